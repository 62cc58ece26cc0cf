//! Every sample event in `events/query-handler/` run through the handler against DynamoDB Local
//! (tables seeded as the command handler and data-sync would leave them), with the answer each
//! must get. A file without an expectation here fails the test, so the folder and this table
//! cannot drift apart.

mod common;

use chrono::{Duration, TimeZone, Utc};
use common::{Harness, model_keys, version_item};

const EVENTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../events/query-handler");

/// What a sample event must get besides its status.
enum Check {
    /// One item of this version, with this `read-source` header (`None`: no such header).
    Item(i64, Option<&'static str>),
    /// 304, no body.
    NotModified,
    /// A listing with these sort keys and a next cursor or not.
    Listing(&'static [&'static str], bool),
    /// A problem document.
    Problem,
}

const PRODUCT: &str = "PRODUCT#tenant001";
const ULID: &str = "01HX7MBJK3V9WQBZ7XNDK5ZT2M";
const DELETED: &str = "01HX7MBJK3V9WQBZ7XNDK5ZT3Z";
const ORDER: &str = "01HX7MBJK3V9WQBZ7XNDK5ZT4A";

/// File, expected status, what else.
const EXPECTED: &[(&str, u16, Check)] = &[
    ("01-get-item.json", 200, Check::Item(3, Some("data"))),
    ("02-get-item-not-modified.json", 304, Check::NotModified),
    (
        "03-get-item-min-version.json",
        200,
        Check::Item(4, Some("command")),
    ),
    ("04-get-deleted-item.json", 404, Check::Problem),
    (
        "05-get-deleted-item-included.json",
        200,
        Check::Item(2, Some("data")),
    ),
    (
        "06-list-order-items.json",
        200,
        Check::Listing(
            &[
                "ORDER_ITEM#01HX7MBJK3V9WQBZ7XNDK5ZT4A#001",
                "ORDER_ITEM#01HX7MBJK3V9WQBZ7XNDK5ZT4A#002",
            ],
            true,
        ),
    ),
    (
        "07-list-time-range.json",
        200,
        Check::Listing(
            &[
                "2024-01-15T20:00:00.000Z#evt003",
                "2024-01-15T10:00:00.000Z#evt002",
                "2024-01-15T00:00:00.000Z#evt001",
            ],
            false,
        ),
    ),
    (
        "08-list-common-users.json",
        200,
        Check::Listing(&["sso#alice", "sso#bob"], false),
    ),
    (
        "09-list-versions.json",
        200,
        Check::Listing(
            &[
                "01HX7MBJK3V9WQBZ7XNDK5ZT2M@3",
                "01HX7MBJK3V9WQBZ7XNDK5ZT2M@2",
            ],
            true,
        ),
    ),
    ("10-get-version.json", 200, Check::Item(2, None)),
    ("11-other-tenant.json", 403, Check::Problem),
    ("12-bad-limit.json", 400, Check::Problem),
    ("13-bad-version.json", 400, Check::Problem),
    (
        "14-query-items-of-order.json",
        200,
        Check::Listing(
            &[
                "ORDER_ITEM#01HX7MBJK3V9WQBZ7XNDK5ZT4A#001",
                "ORDER_ITEM#01HX7MBJK3V9WQBZ7XNDK5ZT4A#002",
            ],
            true,
        ),
    ),
    (
        "15-query-events-of-day.json",
        200,
        Check::Listing(
            &[
                "2024-01-15T20:00:00.000Z#evt003",
                "2024-01-15T10:00:00.000Z#evt002",
                "2024-01-15T00:00:00.000Z#evt001",
            ],
            false,
        ),
    ),
    (
        "16-query-orders-by-status.json",
        200,
        Check::Listing(&["ORDER#01HX7MBJK3V9WQBZ7XNDK5ZT4B"], false),
    ),
    ("17-query-unknown-pattern.json", 400, Check::Problem),
    ("18-get-setting-other-tenant.json", 403, Check::Problem),
    // The users of every tenant (`read = "system_admin"` in model.toml): a tenant's viewer is
    // refused what 08's system_admin lists.
    ("19-list-common-users-as-a-tenant.json", 403, Check::Problem),
];

async fn seed(h: &Harness) {
    // Versions 1-3 projected; version 4 written but not yet projected.
    h.seed(PRODUCT, ULID, 3, false).await;
    h.put_command(&version_item(PRODUCT, ULID, 4, false)).await;
    h.seed(PRODUCT, DELETED, 2, true).await;
    let (pk, sk) = model_keys("order", "tenant001", &[("orderId", ORDER)]);
    h.seed_data(&pk, &sk, false).await;
    for item in ["001", "002", "003"] {
        let (pk, sk) = model_keys(
            "order_item",
            "tenant001",
            &[("orderId", ORDER), ("itemId", item)],
        );
        h.seed_data(&pk, &sk, false).await;
    }
    let start = Utc.with_ymd_and_hms(2024, 1, 14, 14, 0, 0).unwrap();
    for i in 0..5 {
        let at = (start + Duration::hours(10 * i)).to_rfc3339();
        let event = format!("evt{i:03}");
        let (pk, sk) = model_keys("log", "tenant001", &[("at", &at), ("eventId", &event)]);
        h.seed_data(&pk, &sk, false).await;
    }
    // An order as data-sync projects it, with its index keys (the status index).
    h.put_all(&[common::entity_item(
        "order",
        "tenant001",
        serde_json::json!({"orderId": "01HX7MBJK3V9WQBZ7XNDK5ZT4B", "userId": "user-123", "status": "PENDING"}),
        "2024-01-15T10:30:00.000Z",
        1,
    )])
    .await;
    for (provider, user) in [("sso", "alice"), ("sso", "bob"), ("local", "carol")] {
        let (pk, sk) = model_keys(
            "user_auth",
            "common",
            &[("provider", provider), ("userId", user)],
        );
        h.seed_data(&pk, &sk, false).await;
    }
}

#[tokio::test]
async fn every_sample_event_gets_its_answer() {
    let mut files: Vec<String> = std::fs::read_dir(EVENTS)
        .expect("events/query-handler exists")
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".json"))
        .collect();
    files.sort();
    let expected: Vec<&str> = EXPECTED.iter().map(|(f, _, _)| *f).collect();
    assert_eq!(
        files, expected,
        "every event file has an expectation and vice versa"
    );

    let h = Harness::new().await;
    seed(&h).await;
    for (file, status, check) in EXPECTED {
        let text = std::fs::read_to_string(format!("{EVENTS}/{file}")).unwrap();
        // The fixture is a real HTTP API event: it round-trips through the event type unchanged.
        let event: aws_lambda_events::apigw::ApiGatewayV2httpRequest =
            serde_json::from_str(&text).unwrap();
        let again: aws_lambda_events::apigw::ApiGatewayV2httpRequest =
            serde_json::from_str(&serde_json::to_string(&event).unwrap()).unwrap();
        assert_eq!(event, again, "{file} round-trips");
        assert_eq!(event.request_context.http.method, "GET", "{file}");
        let route_key = event.route_key.unwrap();
        assert!(
            route_key.starts_with("GET /items/{pk}")
                || route_key == "GET /query/{pattern}"
                || route_key == "GET /settings/{category}/{code}",
            "{file}"
        );

        let request = lambda_http::request::from_str(&text).unwrap();
        let a = h.send(request).await;
        assert_eq!(a.status, *status, "{file}: {}", a.body);
        match check {
            Check::Item(version, source) => {
                assert_eq!(a.body["version"], *version, "{file}");
                assert_eq!(a.header("etag"), Some(format!("\"{version}\"").as_str()));
                assert_eq!(a.header("read-source"), *source, "{file}");
            }
            Check::NotModified => {
                assert_eq!(a.body, serde_json::Value::Null, "{file}");
                assert!(a.header("etag").is_some(), "{file}");
            }
            Check::Listing(sks, more) => {
                assert_eq!(a.sks(), *sks, "{file}");
                assert_eq!(a.cursor().is_some(), *more, "{file}");
            }
            Check::Problem => {
                assert!(
                    a.body["type"]
                        .as_str()
                        .unwrap()
                        .starts_with("urn:cqrs:problem:"),
                    "{file}"
                );
                assert_eq!(
                    a.body["requestId"],
                    event.request_context.request_id.unwrap()
                );
            }
        }
    }
}
