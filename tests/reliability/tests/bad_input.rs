//! Bad input: a corpus of malformed requests to both HTTP functions (malformed bodies, wrong types,
//! huge values, invalid UTF-8, empty and oversized keys, control characters, unknown fields,
//! parameters, routes and methods). Every answer must be a 4xx RFC 9457 problem document, never a
//! 5xx, and nothing may be written.

mod common;

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use common::{Caller, Req, Stack, T1, get};
use cqrs_caller::CallerMode;
use serde_json::{Value, json};

/// `attributes` nested `depth` objects deep.
fn nested(depth: usize) -> Value {
    let mut value = json!(1);
    for _ in 0..depth {
        value = json!({ "a": value });
    }
    value
}

fn with(field: &str, value: Value) -> String {
    let mut body = json!({"pk": "PRODUCT#t1", "sk": "BAD", "version": 0});
    body[field] = value;
    body.to_string()
}

/// Bodies every command refuses, POST and PATCH alike.
fn bad_bodies() -> Vec<(String, Vec<u8>)> {
    let mut bodies: Vec<(String, Vec<u8>)> = Vec::new();
    let mut text = |what: &str, body: String| bodies.push((what.to_string(), body.into_bytes()));
    // Not JSON, or not an object.
    for body in [
        "",
        " ",
        "\n",
        "{",
        "}",
        "[",
        "nul",
        "{\"pk\":}",
        "{'pk':'PRODUCT#t1'}",
        "{\"pk\":\"PRODUCT#t1\",\"sk\":\"BAD\",\"version\":0,}",
        "{\"pk\":\"PRODUCT#t1\",\"sk\":\"BAD\",\"version\":NaN}",
        "{\"pk\":\"PRODUCT#t1\",\"sk\":\"BAD\",\"version\":0} trailing",
        "{\"pk\":\"PRODUCT#t1\" /* c */,\"sk\":\"BAD\",\"version\":0}",
        "\u{feff}{\"pk\":\"PRODUCT#t1\",\"sk\":\"BAD\",\"version\":0}",
        "{\"pk\":\"PRODUCT#t1\",\"sk\":\"B\u{1}AD\",\"version\":0}",
        "{\"pk\":\"PRODUCT#t1\",\"sk\":\"\\ud800\",\"version\":0}",
        "[]",
        "[{}]",
        "1",
        "-1",
        "\"x\"",
        "null",
        "true",
        "{}",
    ] {
        text(&format!("body {body:?}"), body.to_string());
    }
    // Missing required fields.
    text("no pk", r#"{"sk":"BAD","version":0}"#.into());
    text("no sk", r#"{"pk":"PRODUCT#t1","version":0}"#.into());
    text("no version", r#"{"pk":"PRODUCT#t1","sk":"BAD"}"#.into());
    // Wrong types, field by field.
    let wrong = [
        json!(1),
        json!(1.5),
        json!(true),
        json!([]),
        json!({}),
        json!("x"),
    ];
    for field in [
        "pk",
        "sk",
        "version",
        "code",
        "name",
        "attributes",
        "isDeleted",
        "ttl",
    ] {
        for value in &wrong {
            let fits = matches!(
                (field, value),
                ("pk" | "sk" | "code" | "name", Value::String(_))
                    | ("attributes", Value::Object(_))
                    | ("isDeleted", Value::Bool(_))
            ) || matches!((field, value), ("ttl", Value::Number(_)) if value.is_i64()
            );
            if fits {
                continue;
            }
            text(&format!("{field} = {value}"), with(field, value.clone()));
        }
    }
    for (field, value) in [
        ("pk", json!(null)),
        ("sk", json!(null)),
        ("version", json!(null)),
        ("version", json!(-2)),
        ("version", json!(i64::MIN)),
        ("version", json!(9_223_372_036_854_775_808u64)),
        ("version", json!(1e3)),
        ("version", json!("1")),
        ("ttl", json!(0)),
        ("ttl", json!(-5)),
        ("ttl", json!(1e20)),
        ("ttl", json!("1767225600")),
        ("isDeleted", json!("true")),
        ("isDeleted", json!(0)),
    ] {
        text(&format!("{field} = {value}"), with(field, value));
    }
    text(
        "version 1e400",
        r#"{"pk":"PRODUCT#t1","sk":"BAD","version":1e400}"#.into(),
    );
    text(
        "attributes number 1e400",
        r#"{"pk":"PRODUCT#t1","sk":"BAD","version":0,"attributes":{"n":1e400}}"#.into(),
    );
    // Unknown fields, including the server's own.
    for field in [
        "extra",
        "PK",
        "Version",
        "id",
        "tenantCode",
        "type",
        "createdBy",
        "cpk",
        "seq",
        "",
    ] {
        text(&format!("unknown field {field:?}"), with(field, json!("x")));
    }
    // Empty, oversized and malformed keys; control characters.
    for (field, value) in [
        ("pk", String::new()),
        ("sk", String::new()),
        ("pk", format!("PRODUCT#t1#{}", "k".repeat(2100))),
        ("sk", "s".repeat(1100)),
        ("sk", "s".repeat(1004)),
        ("pk", "PRODUCT".into()),
        ("pk", "PRODUCT#t1\u{0}".into()),
        ("pk", "PRODUCT#t1\u{7f}".into()),
        ("pk", "PRODUCT#t1\u{85}".into()),
        ("sk", "BAD\n".into()),
        ("sk", "BAD\t1".into()),
        ("sk", "BAD@1".into()),
        ("sk", "BAD#".into()),
    ] {
        let shown: String = value.chars().take(24).collect();
        text(
            &format!("{field} {shown:?} ({} bytes)", value.len()),
            with(field, json!(value)),
        );
    }
    // Huge values: over the 400 KB item limit (413), and nesting past what JSON or DynamoDB take.
    text(
        "name of 450 KB",
        with("name", json!("n".repeat(450 * 1024))),
    );
    text(
        "attributes of 1 MB",
        with("attributes", json!({"blob": "b".repeat(1024 * 1024)})),
    );
    let many: serde_json::Map<String, Value> = (0..60_000)
        .map(|i| (format!("k{i:05}"), json!(i)))
        .collect();
    text("60 000 attributes", with("attributes", Value::Object(many)));
    text("attributes nested 200 deep", {
        let mut body = "{\"a\":".repeat(200);
        body.push('1');
        body.push_str(&"}".repeat(200));
        format!(r#"{{"pk":"PRODUCT#t1","sk":"BAD","version":0,"attributes":{body}}}"#)
    });
    text("attributes nested 40 deep", with("attributes", nested(40)));
    text(
        "attributes list nested 40 deep",
        with(
            "attributes",
            json!({"l": (0..40).fold(json!(1), |v, _| json!([v]))}),
        ),
    );
    // Map keys DynamoDB refuses ("Empty attribute name"); found by the conformance run on the
    // generated entity bodies, where they were a 500.
    text(
        "attributes with an empty key",
        with("attributes", json!({"": 1})),
    );
    text(
        "attributes with an empty nested key",
        with("attributes", json!({"m": [{"": {"x": 1}}]})),
    );
    text(
        "an entity's attributes with an empty key",
        json!({"entity": "product", "version": 0, "attributes": {"": [{}], "productId": "p"}})
            .to_string(),
    );
    // Numbers DynamoDB cannot store (its range is 1e-130 to 1e126, 38 digits).
    text(
        "attributes number 1e300",
        with("attributes", json!({"n": 1e300})),
    );
    text(
        "attributes number 1e-300",
        with("attributes", json!({"n": 1e-300})),
    );
    // Invalid UTF-8 (sent base64-encoded, as API Gateway sends binary bodies).
    let mut binary = br#"{"pk":"PRODUCT#t1","sk":"BAD","version":0,"name":""#.to_vec();
    binary.extend_from_slice(&[0xff, 0xfe, 0xc0, 0xaf]);
    binary.extend_from_slice(br#""}"#);
    bodies.push(("invalid UTF-8 in a string".into(), binary));
    bodies.push(("binary garbage".into(), vec![0x00, 0x9f, 0x92, 0x96, 0xff]));
    bodies
}

/// Every bad request: commands and queries.
fn corpus(mode: CallerMode) -> Vec<(String, Req)> {
    let mut requests = Vec::new();
    for method in ["POST", "PATCH"] {
        for (what, body) in bad_bodies() {
            let request = Req::new(method, "/commands")
                .header("content-type", "application/json")
                .body(&body)
                .from(mode, T1);
            requests.push((format!("{method} {what}"), request));
        }
        let good = json!({"pk": "PRODUCT#t1", "sk": "BAD", "version": 0}).to_string();
        // PATCH needs a stored version: 0 is refused (and -1 finds nothing to merge into).
        if method == "PATCH" {
            requests.push((
                "PATCH version 0".into(),
                Req::command(method, &good).from(mode, T1),
            ));
        }
        // Bad headers.
        for (name, value) in [
            ("content-type", "text/plain"),
            ("content-type", "application/x-www-form-urlencoded"),
            ("content-type", "application/jsonp"),
            ("idempotency-key", ""),
            ("idempotency-key", "\"\""),
        ] {
            let mut request = Req::new(method, "/commands").body(good.as_bytes());
            if name != "content-type" {
                request = request.header("content-type", "application/json");
            }
            requests.push((
                format!("{method} header {name}: {value:?}"),
                request.header(name, value).from(mode, T1),
            ));
        }
        let long_key = "k".repeat(256);
        requests.push((
            format!("{method} idempotency-key of 256 characters"),
            Req::command(method, &good)
                .header("idempotency-key", &long_key)
                .from(mode, T1),
        ));
        // Unknown routes.
        for path in [
            "/command",
            "/commands/x",
            "/commands/../items",
            "/",
            "/COMMANDS",
        ] {
            requests.push((
                format!("{method} {path}"),
                Req::new(method, path)
                    .header("content-type", "application/json")
                    .body(good.as_bytes())
                    .from(mode, T1),
            ));
        }
    }
    // The optional bodies of a draw and of the master-data copy: none (no bytes), or a JSON object.
    // Whitespace is neither (found by the conformance run: `\r` drew a number).
    for path in ["/sequences/invoice/next", "/master-data/copy"] {
        for (what, body) in [
            ("a carriage return", "\r"),
            ("blanks", " \n\t "),
            ("null", "null"),
        ] {
            requests.push((
                format!("POST {path} with {what} as body"),
                Req::new("POST", path)
                    .header("content-type", "application/json")
                    .body(body.as_bytes())
                    .from(mode, T1),
            ));
        }
    }
    // Unknown methods on /commands.
    for method in ["GET", "PUT", "DELETE", "HEAD", "OPTIONS", "TRACE"] {
        requests.push((
            format!("{method} /commands"),
            Req::new(method, "/commands").from(mode, T1),
        ));
    }

    // --- Queries ---
    let partition = "/items/PRODUCT%23t1";
    let item = "/items/PRODUCT%23t1/P0";
    let versions = "/items/PRODUCT%23t1/P0/versions";
    let mut get = |what: String, target: String| {
        requests.push((format!("GET {what}"), get(&target).from(mode, T1)));
    };
    for limit in [
        "0",
        "-1",
        "101",
        "abc",
        "1.5",
        "%201",
        "+1",
        "1e2",
        "99999999999999999999",
        "",
    ] {
        get(
            format!("limit={limit:?}"),
            format!("{partition}?limit={limit}"),
        );
        get(
            format!("versions limit={limit:?}"),
            format!("{versions}?limit={limit}"),
        );
    }
    for order in ["ASC", "up", "desc%20", "asc,desc"] {
        get(
            format!("order={order:?}"),
            format!("{partition}?order={order}"),
        );
    }
    for flag in ["yes", "1", "TRUE"] {
        get(
            format!("includeDeleted={flag}"),
            format!("{partition}?includeDeleted={flag}"),
        );
    }
    for cursor in [
        "garbage%21".to_string(),
        "e30".into(),
        "W10".into(),
        "eyJsIjoiaXRlbXMifQ==".into(),
        "%00".into(),
        "A".repeat(5000),
    ] {
        let shown: String = cursor.chars().take(16).collect();
        get(
            format!("cursor {shown:?}"),
            format!("{partition}?cursor={cursor}"),
        );
        get(
            format!("versions cursor {shown:?}"),
            format!("{versions}?cursor={cursor}"),
        );
    }
    for min in ["0", "-1", "abc", "1e3", "99999999999999999999", "1.0"] {
        get(
            format!("minVersion={min}"),
            format!("{item}?minVersion={min}"),
        );
    }
    for v in [
        "0",
        "-1",
        "abc",
        "1.0",
        "1e3",
        "99999999999999999999",
        "%FF",
        "%20",
    ] {
        get(format!("version {v}"), format!("{versions}/{v}"));
    }
    for query in [
        "foo=1",
        "limit=1&limit=2",
        "skPrefix=P&skFrom=A",
        "skFrom=Z&skTo=A",
        "skprefix=P",
        "skPrefix=%01",
        "minVersion=1",
    ] {
        get(
            format!("partition ?{query}"),
            format!("{partition}?{query}"),
        );
    }
    for query in ["limit=1", "foo=1", "includeDeleted=maybe"] {
        get(format!("item ?{query}"), format!("{item}?{query}"));
        get(format!("version ?{query}"), format!("{versions}/1?{query}"));
    }
    // Empty, oversized and malformed path segments.
    let long_pk = format!("PRODUCT%23t1%23{}", "k".repeat(2100));
    let long_sk = "s".repeat(1100);
    for (what, target) in [
        ("oversized pk".to_string(), format!("/items/{long_pk}")),
        ("oversized sk".into(), format!("{partition}/{long_sk}")),
        (
            "oversized sk versions".into(),
            format!("{partition}/{long_sk}/versions"),
        ),
        ("empty pk".into(), "/items//P0".into()),
        ("empty sk".into(), format!("{partition}//versions")),
        ("pk without tenant".into(), "/items/PRODUCT".into()),
        ("pk not UTF-8".into(), "/items/PRODUCT%23t1%FF".into()),
        ("sk not UTF-8".into(), format!("{partition}/%C3%28")),
        ("sk with control".into(), format!("{partition}/P%0A0")),
        ("sk with @".into(), format!("{partition}/P0%402")),
    ] {
        get(what, target);
    }
    // Access patterns: unknown patterns and parameters, missing partition parameters, values
    // that would break a key, bad bounds, a tenant parameter, foreign and forged cursors.
    let long = "x".repeat(3000);
    for query in [
        "/query/nope".to_string(),
        "/query/orders_by_status".into(),
        "/query/orders_by_status?status=LOST".into(),
        "/query/orders_by_status?status=PENDING&tenant=t2".into(),
        "/query/orders_by_status?status=PENDING&status=PAID".into(),
        "/query/orders_by_status?status=PENDING&colour=red".into(),
        "/query/orders_by_status?status=PENDING&limit=0".into(),
        "/query/orders_by_status?status=PENDING&order=up".into(),
        "/query/orders_by_status?status=PENDING&cursor=e30".into(),
        "/query/orders_by_status?status=PENDING&cursor=eyJsIjoicXVlcnkifQ".into(),
        "/query/orders_by_status?status=PENDING&from=2024-13".into(),
        "/query/orders_by_status?status=PENDING&to=2024-02-30".into(),
        "/query/orders_of_user?userId=a%23b".into(),
        "/query/orders_of_user?userId=a%40b".into(),
        format!("/query/orders_of_user?userId={long}"),
        "/query/orders_of_user?userId=u&from=2024-01-01&after=2024-01-02".into(),
        "/query/items_of_order?itemId=001".into(),
        "/query/items_of_order?orderId=o1&itemId=001&from=002".into(),
        "/query/readings_of_sensor?sensorId=s1&from=yesterday".into(),
        "/query/readings_of_sensor?sensorId=s1&from=2024-02-01&to=2024-01-01".into(),
        "/query/readings_of_sensor?sensorId=s1&readAt=2024-01-01T00:00:00Z".into(),
        "/query/events_of_month?at=January".into(),
        "/query/products_by_price?category=tools&priceCents=-5".into(),
        "/query/products_by_price?category=tools&priceCents=1234567890123".into(),
        "/query/stores_in_region?country=US".into(),
        "/query/stores_in_region?region=CA&city=Oakland".into(),
        "/query/products?includeDeleted=maybe".into(),
        "/query/products?from=a&after=b".into(),
        "/query/settings?from=ab&to=a".into(),
        "/query/settings?after=ab&before=ab".into(),
        "/query/readings_of_sensor?sensorId=s1&after=2024-01&to=2024-01-15".into(),
        "/query/%FF".into(),
        "/query/a/b".into(),
        "/query/".into(),
    ] {
        let shown: String = query.chars().take(80).collect();
        get(format!("pattern {shown}"), query);
    }
    // Pattern cursors of the right pattern, tenant and parameters whose position holds a key
    // value of another type or over DynamoDB's size (DynamoDB would refuse the start key).
    let model = cqrs_model::Model::example();
    let plan = model
        .query("orders_by_status", T1.tenant, &[("status", "PENDING")])
        .expect("the example pattern plans");
    let long = "9".repeat(1100);
    for (what, attr, value) in [
        ("a number sort key", "gsi2sk", json!(["N", "1"])),
        ("an oversized sort key", "gsi2sk", json!(["S", long])),
        ("a number table key", "sk", json!(["N", "1"])),
    ] {
        let mut position = json!({
            "gsi2sk": ["S", "2024-01-15T10:30:00.000Z#o1"],
            "pk": ["S", format!("ORDER#{}", T1.tenant)],
            "sk": ["S", "ORDER#o1"],
        });
        position[attr] = value;
        let mut shards = vec![json!(0); plan.partitions.len()];
        shards[0] = position;
        let token = json!({
            "l": "query",
            "p": "orders_by_status",
            "f": format!("{:016x}", plan.fingerprint()),
            "o": "asc",
            "s": shards,
        });
        let cursor = URL_SAFE_NO_PAD.encode(token.to_string());
        get(
            format!("pattern cursor with {what}"),
            format!("/query/orders_by_status?status=PENDING&cursor={cursor}"),
        );
    }
    // Unknown routes.
    for path in [
        "/",
        "/items",
        "/items/",
        "/item/PRODUCT%23t1",
        "/items/PRODUCT%23t1/P0/history",
        "/items/PRODUCT%23t1/P0/versions/1/x",
        "/items/PRODUCT%23t1/P0/a/b",
        "/ITEMS/PRODUCT%23t1",
        "/commandsx",
    ] {
        get(format!("route {path}"), path.to_string());
    }
    // Unknown methods on the item routes.
    for method in ["POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"] {
        for path in [partition, item, versions, "/query/products"] {
            requests.push((
                format!("{method} {path}"),
                Req::new(method, path)
                    .header("content-type", "application/json")
                    .body(b"{}")
                    .from(mode, T1),
            ));
        }
    }
    requests
}

#[tokio::test]
async fn bad_input_is_a_4xx_problem_document_and_writes_nothing() {
    let mut total = 0;
    for mode in [CallerMode::Jwt, CallerMode::Local] {
        let stack = Stack::new(mode).await;
        // One item, so that reads have something to (not) find.
        let created = stack
            .send(
                Req::command(
                    "POST",
                    &json!({"pk": "PRODUCT#t1", "sk": "P0", "version": 0}).to_string(),
                )
                .from(mode, T1),
            )
            .await;
        assert_eq!(created.status, 202, "{}", created.text);
        let before = stack.snapshot().await;

        let mut by_status: BTreeMap<u16, usize> = BTreeMap::new();
        let (mut commands, mut queries) = (0, 0);
        let mut failures = Vec::new();
        for (what, request) in corpus(mode) {
            if request.path.starts_with("/commands") {
                commands += 1;
            } else {
                queries += 1;
            }
            let answer = stack.send(request).await;
            *by_status.entry(answer.status).or_default() += 1;
            if let Some(fault) = answer.problem_fault() {
                failures.push(format!("{mode:?} {what}: {fault}"));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
        let after = stack.snapshot().await;
        assert_eq!(before, after, "{mode:?}: bad input wrote something");
        println!(
            "bad input: {mode:?} callers: {} requests ({commands} to command-handler, {queries} \
             to query-handler): every answer a 4xx problem document, by status {by_status:?}; \
             0 writes",
            commands + queries
        );
        total += commands + queries;
    }
    println!("bad input: {total} bad requests in all, 0 answered with a 5xx, 0 writes");
}
