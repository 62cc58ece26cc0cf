//! Every sample event in `events/command-handler/` run through the handler against DynamoDB Local,
//! in order, with the answer each must get. A file without an expectation here fails the test, so
//! the folder and this table cannot drift apart.

mod common;

use common::Harness;

const EVENTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../events/command-handler");

/// File, expected status, expected version (for 202s).
const EXPECTED: &[(&str, u16, Option<i64>)] = &[
    ("01-create.json", 202, Some(1)),
    ("02-update.json", 202, Some(2)),
    ("03-patch.json", 202, Some(3)),
    ("04-delete.json", 202, Some(4)),
    ("05-conflict.json", 409, None),
    ("06-bad-body.json", 400, None),
    ("07-create-by-entity.json", 202, Some(1)),
    ("08-sequence-next.json", 200, None),
    ("09-sequence-other-tenant.json", 403, None),
    ("10-master-data-copy.json", 200, None),
];

#[tokio::test]
async fn every_sample_event_gets_its_answer() {
    let mut files: Vec<String> = std::fs::read_dir(EVENTS)
        .expect("events/command-handler exists")
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
    for (file, status, version) in EXPECTED {
        let text = std::fs::read_to_string(format!("{EVENTS}/{file}")).unwrap();
        // The fixture is a real HTTP API event: it round-trips through the event type unchanged.
        let event: aws_lambda_events::apigw::ApiGatewayV2httpRequest =
            serde_json::from_str(&text).unwrap();
        let again: aws_lambda_events::apigw::ApiGatewayV2httpRequest =
            serde_json::from_str(&serde_json::to_string(&event).unwrap()).unwrap();
        assert_eq!(event, again, "{file} round-trips");

        let request = lambda_http::request::from_str(&text).unwrap();
        let (got, body, _) = h.send(request).await;
        assert_eq!(got, *status, "{file}: {body}");
        if let Some(version) = version {
            assert_eq!(body["version"], *version, "{file}");
        } else if *status == 200 && file.contains("master-data-copy") {
            // Nothing in common to copy: an empty, complete report.
            assert_eq!(body["tenantCode"], "tenant001", "{file}: {body}");
            assert_eq!(body["unchanged"], 0, "{file}: {body}");
            assert!(body["cursor"].is_null(), "{file}: {body}");
        } else if *status == 200 {
            // A sequence draw: the first number of the tenant's yearly counter.
            assert_eq!(body["no"], 1, "{file}: {body}");
            assert!(
                body["formattedNo"].as_str().unwrap().starts_with("INV-"),
                "{file}: {body}"
            );
        } else {
            assert!(
                body["type"]
                    .as_str()
                    .unwrap()
                    .starts_with("urn:cqrs:problem:"),
                "{file}"
            );
        }
    }
    let versions = h
        .versions("PRODUCT#tenant001", "01HX7MBJK3V9WQBZ7XNDK5ZT2M")
        .await;
    assert_eq!(versions.len(), 4);
    assert!(versions[3].is_deleted);
    assert_eq!(versions[2].attributes["price"], 1350);
    assert_eq!(
        versions[2].attributes["tags"],
        serde_json::json!(["coffee", "hot"])
    );
}
