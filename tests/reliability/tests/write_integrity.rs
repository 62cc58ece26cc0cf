//! Write integrity: the command path never writes a version number twice (even after command rows
//! were deleted or expired, and on items written before head records existed), refuses keys whose
//! derived keys could never be stored, answers write conflicts with 409 and throttling with 503 and
//! `Retry-After` (never 500), refuses oversized bodies with 413 before parsing them, and never
//! overflows version arithmetic near `i64::MAX`.

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;

use aws_sdk_dynamodb::types::AttributeValue;
use common::{Answer, Caller, Req, Stack, T1, command_item, scan_items, store};
use cqrs_caller::CallerMode;
use cqrs_data_sync::DataSync;
use cqrs_item::Item;
use cqrs_testkit::TestTables;
use futures::future::join_all;
use serde_json::{Value, json};

const PK: &str = "PRODUCT#t1";

fn post(body: &Value) -> Req {
    Req::command("POST", &body.to_string()).claims_of(T1)
}

fn patch(body: &Value) -> Req {
    Req::command("PATCH", &body.to_string()).claims_of(T1)
}

/// One attribute value as text, maps sorted (the harness' snapshot prints nested maps in hash
/// order, which differs from one scan to the next).
fn render(value: &AttributeValue) -> String {
    match value {
        AttributeValue::M(map) => {
            let sorted: std::collections::BTreeMap<_, _> =
                map.iter().map(|(k, v)| (k, render(v))).collect();
            format!("M{sorted:?}")
        }
        AttributeValue::L(list) => format!("L{:?}", list.iter().map(render).collect::<Vec<_>>()),
        other => format!("{other:?}"),
    }
}

/// Every item of the four tables, canonical: what "nothing was written" compares.
async fn tables_state(stack: &Stack) -> Vec<(&'static str, Vec<String>)> {
    let t = &stack.tables;
    let mut state = Vec::new();
    for (name, table) in [
        ("command", &t.command),
        ("data", &t.data),
        ("history", &t.history),
        ("idempotency", &t.idempotency),
    ] {
        let mut items: Vec<String> = common::scan_raw(t, table)
            .await
            .iter()
            .map(|item| render(&AttributeValue::M(item.clone())))
            .collect();
        items.sort();
        state.push((name, items));
    }
    state
}

/// Deletes the command row of version `version` of `PK` / `base`, as DynamoDB TTL or an operator
/// would.
async fn delete_row(tables: &TestTables, base: &str, version: i64) {
    tables
        .client
        .delete_item()
        .table_name(&tables.command)
        .key("pk", AttributeValue::S(PK.into()))
        .key(
            "sk",
            AttributeValue::S(cqrs_keys::add_sort_key_version(base, version)),
        )
        .send()
        .await
        .expect("delete a command row");
}

/// Puts `item` as it is into `table` (a row written by something that keeps no head).
async fn put_raw(tables: &TestTables, table: &str, item: &Item) {
    tables
        .client
        .put_item()
        .table_name(table)
        .set_item(Some(item.to_attributes().expect("attributes")))
        .send()
        .await
        .expect("put a raw item");
}

/// Projects everything in the command table's stream (at least `min` records) with data-sync.
async fn project(stack: &Stack, min: usize) {
    let records = stack.tables.command_stream_records(min).await;
    let arn = stack.tables.command_stream_arn().await;
    let event = cqrs_testkit::stream_event::lambda_event(&records, &arn).expect("a Lambda event");
    let response = DataSync::new(store(&stack.tables)).handle(event).await;
    assert!(
        response.batch_item_failures.is_empty(),
        "data-sync failed records: {:?}",
        response.batch_item_failures
    );
}

/// Writes versions 1..=n of `PK` / `base` through the command handler.
async fn write_versions(stack: &Stack, base: &str, n: i64) {
    for v in 0..n {
        let answer = stack
            .send(post(
                &json!({"pk": PK, "sk": base, "version": v, "name": format!("v{}", v + 1)}),
            ))
            .await;
        assert_eq!(answer.status, 202, "{}", answer.text);
        assert_eq!(answer.body["version"], v + 1);
    }
}

#[tokio::test]
async fn deleted_and_expired_rows_never_let_a_version_be_written_twice() {
    let stack = Stack::new(CallerMode::Jwt).await;
    write_versions(&stack, "GONE", 4).await;
    let mut attempts = 0;
    let mut written_twice = 0;

    // The newest row deleted by hand: `version: 3` would write version 4 again.
    delete_row(&stack.tables, "GONE", 4).await;
    // Then every row gone (TTL): `version: 0` would create version 1 again, `N` write N+1 again.
    let mut cases: Vec<(&str, Req)> = vec![
        (
            "POST version 3 after row 4 was deleted",
            post(&json!({"pk": PK, "sk": "GONE", "version": 3, "name": "again"})),
        ),
        (
            "PATCH version 3 after row 4 was deleted",
            patch(&json!({"pk": PK, "sk": "GONE", "version": 3, "name": "again"})),
        ),
        (
            "POST version 3 with an Idempotency-Key",
            post(&json!({"pk": PK, "sk": "GONE", "version": 3, "name": "again"}))
                .header("idempotency-key", "again-3"),
        ),
        (
            "POST version 0 after row 4 was deleted",
            post(&json!({"pk": PK, "sk": "GONE", "version": 0, "name": "again"})),
        ),
    ];
    for (what, request) in cases.drain(..) {
        let before = tables_state(&stack).await;
        let answer = stack.send(request).await;
        attempts += 1;
        if answer.status != 409 || tables_state(&stack).await != before {
            written_twice += 1;
        }
        assert_eq!(answer.status, 409, "{what}: {}", answer.text);
        assert_eq!(answer.problem_fault(), None, "{what}");
        assert_eq!(answer.body["currentVersion"], 4, "{what}: {}", answer.text);
        assert_eq!(
            tables_state(&stack).await,
            before,
            "{what}: something was written"
        );
    }

    for v in 1..=3 {
        delete_row(&stack.tables, "GONE", v).await;
    }
    for version in 0..=3 {
        for method in ["POST", "PATCH"] {
            if method == "PATCH" && version == 0 {
                continue;
            }
            let body = json!({"pk": PK, "sk": "GONE", "version": version, "name": "again"});
            let before = tables_state(&stack).await;
            let answer = stack
                .send(Req::command(method, &body.to_string()).claims_of(T1))
                .await;
            attempts += 1;
            if answer.status != 409 || tables_state(&stack).await != before {
                written_twice += 1;
            }
            assert_eq!(
                answer.status, 409,
                "{method} version {version} after all rows expired: {}",
                answer.text
            );
            assert_eq!(answer.problem_fault(), None);
            assert_eq!(
                tables_state(&stack).await,
                before,
                "{method} version {version}"
            );
        }
    }
    // Building on the latest version still works (it writes a new number, 5), and `-1` follows it.
    let next = stack
        .send(post(
            &json!({"pk": PK, "sk": "GONE", "version": 4, "name": "v5"}),
        ))
        .await;
    assert_eq!(
        (next.status, &next.body["version"]),
        (202, &json!(5)),
        "{}",
        next.text
    );
    let latest = stack
        .send(post(
            &json!({"pk": PK, "sk": "GONE", "version": -1, "name": "v6"}),
        ))
        .await;
    assert_eq!(
        (latest.status, &latest.body["version"]),
        (202, &json!(6)),
        "{}",
        latest.text
    );
    // A PATCH on a version whose row expired has nothing to merge into: 404, nothing written.
    delete_row(&stack.tables, "GONE", 6).await;
    let before = tables_state(&stack).await;
    let merge = stack
        .send(patch(
            &json!({"pk": PK, "sk": "GONE", "version": 6, "name": "x"}),
        ))
        .await;
    assert_eq!(merge.status, 404, "{}", merge.text);
    assert_eq!(tables_state(&stack).await, before);

    assert_eq!(written_twice, 0);
    println!(
        "versions written twice: {written_twice} of {attempts} attempts after rows deleted \
         (newest row deleted, then all rows expired; POST, PATCH, with and without Idempotency-Key)"
    );
}

#[tokio::test]
async fn items_without_a_head_get_the_right_next_version() {
    let stack = Stack::new(CallerMode::Jwt).await;
    let (command, history, data) = (
        stack.tables.command.clone(),
        stack.tables.history.clone(),
        stack.tables.data.clone(),
    );
    // Written before heads existed: rows only (ROWS 1..=3); rows expired, history left (HIST
    // 1..=7); only the data table left (DATA at 9); rows 1..=2 but history up to 5 (MIXED).
    for v in 1..=3 {
        put_raw(&stack.tables, &command, &command_item(PK, "ROWS", v)).await;
    }
    for v in 1..=7 {
        put_raw(&stack.tables, &history, &command_item(PK, "HIST", v)).await;
    }
    put_raw(
        &stack.tables,
        &data,
        &command_item(PK, "DATA", 9).into_data_item(),
    )
    .await;
    for v in 1..=2 {
        put_raw(&stack.tables, &command, &command_item(PK, "MIXED", v)).await;
    }
    for v in 1..=5 {
        put_raw(&stack.tables, &history, &command_item(PK, "MIXED", v)).await;
    }

    let mut checked = 0;
    for (base, highest) in [("ROWS", 3), ("HIST", 7), ("DATA", 9), ("MIXED", 5)] {
        // `version: 0` and a stale `N` are conflicts, not re-creations.
        for version in [0, highest - 1] {
            let before = tables_state(&stack).await;
            let answer = stack
                .send(post(&json!({"pk": PK, "sk": base, "version": version})))
                .await;
            assert_eq!(
                answer.status, 409,
                "{base} version {version}: {}",
                answer.text
            );
            assert_eq!(
                answer.body["currentVersion"], highest,
                "{base}: {}",
                answer.text
            );
            // The first command seeds the head; nothing else is written.
            let after = tables_state(&stack).await;
            assert_eq!(after[0], before[0], "{base}");
            checked += 1;
        }
        let next = stack
            .send(post(
                &json!({"pk": PK, "sk": base, "version": -1, "name": "next"}),
            ))
            .await;
        assert_eq!(next.status, 202, "{base}: {}", next.text);
        assert_eq!(next.body["version"], highest + 1, "{base}: {}", next.text);
        checked += 1;
    }
    println!(
        "items without a head: 4 items seeded from command rows, history index and data table, \
         {checked} commands all at the right version, 0 versions written twice"
    );
}

#[tokio::test]
async fn fifty_concurrent_latest_writers_leave_no_gap_on_an_item_without_a_head() {
    const WRITERS: usize = 50;
    let stack = Stack::new(CallerMode::Jwt).await;
    // Three versions written before heads existed: the writers race to seed the head too.
    for v in 1..=3 {
        put_raw(
            &stack.tables,
            &stack.tables.command,
            &command_item(PK, "SEQ", v),
        )
        .await;
    }
    let answers = join_all((0..WRITERS).map(|i| {
        let stack = &stack;
        async move {
            let body = json!({"pk": PK, "sk": "SEQ", "version": -1, "name": format!("w{i}")});
            stack.send(post(&body)).await
        }
    }))
    .await;
    let mut won: Vec<i64> = Vec::new();
    let (mut conflicts, mut errors) = (0, 0);
    for answer in &answers {
        match answer.status {
            202 => won.push(answer.body["version"].as_i64().expect("a version")),
            409 => {
                assert_eq!(answer.problem_fault(), None);
                conflicts += 1;
            }
            _ => errors += 1,
        }
    }
    assert_eq!(errors, 0, "every answer is 202 or 409");
    won.sort_unstable();
    let expected: Vec<i64> = (4..4 + won.len() as i64).collect();
    assert_eq!(won, expected, "gap-free, no duplicate");
    let mut chain: Vec<i64> = scan_items(&stack.tables, &stack.tables.command)
        .await
        .iter()
        .filter(|i| i.base_sk() == "SEQ")
        .map(|i| i.version)
        .collect();
    chain.sort_unstable();
    assert_eq!(chain, (1..4 + won.len() as i64).collect::<Vec<_>>());
    println!(
        "concurrent -1 writers: {WRITERS} on an item without a head (3 old versions): {} written \
         as versions 4..={} without gap or duplicate, {conflicts} got 409, {errors} 5xx",
        won.len(),
        3 + won.len()
    );
}

#[tokio::test]
async fn keys_whose_derived_keys_cannot_be_stored_are_refused() {
    let stack = Stack::new(CallerMode::Jwt).await;
    let pk = |len: usize| format!("PRODUCT#t1#{}", "p".repeat(len - "PRODUCT#t1#".len()));
    // Each key valid alone; together `pk#sk` (and `HEAD#pk@sk`) go over 2048 bytes.
    let refused = [
        (pk(2048), "s".repeat(1003)),
        (pk(2000), "s".repeat(100)),
        (pk(1100), "s".repeat(1003)),
        (pk(2048), "s".to_string()),
        (pk(2000), "s".repeat(2048 - 5 - 2000)), // `HEAD#pk@sk` = 2049 bytes
    ];
    let mut refusals = 0;
    for (pk, sk) in &refused {
        let before = tables_state(&stack).await;
        let answer = stack
            .send(post(&json!({"pk": pk, "sk": sk, "version": 0})))
            .await;
        assert_eq!(
            answer.status,
            400,
            "pk {} + sk {}: {}",
            pk.len(),
            sk.len(),
            answer.text
        );
        assert_eq!(answer.problem_fault(), None);
        assert_eq!(answer.body["field"], "sk");
        assert!(
            answer.body["detail"]
                .as_str()
                .unwrap_or_default()
                .contains("2048")
        );
        assert_eq!(tables_state(&stack).await, before);
        refusals += 1;
    }
    // The longest accepted pair: `HEAD#pk@sk` is exactly 2048 bytes. It is written, versioned and
    // projected (history index and data table).
    let (long_pk, long_sk) = (pk(2000), "s".repeat(2048 - 5 - 2000 - 1));
    for version in [0, -1] {
        let answer = stack
            .send(post(
                &json!({"pk": long_pk, "sk": long_sk, "version": version}),
            ))
            .await;
        assert_eq!(answer.status, 202, "{}", answer.text);
    }
    project(&stack, 2).await;
    let history = scan_items(&stack.tables, &stack.tables.history).await;
    assert_eq!(
        history.iter().map(|i| i.version).collect::<Vec<_>>(),
        [1, 2]
    );
    let data = scan_items(&stack.tables, &stack.tables.data).await;
    assert_eq!(data.len(), 1);
    println!(
        "unprojectable keys: {} of {} refused with 400 naming the 2048-byte limit, 0 written; \
         the longest accepted key pair (HEAD#pk@sk = 2048 bytes) written and projected",
        refusals,
        refused.len()
    );
}

/// A fake DynamoDB endpoint: answers `TransactWriteItems` (or every request when `all`) with the
/// error `body`, every other request with an empty result. Runs on its own thread.
fn fake_dynamodb(error: &'static str, all: bool) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = listener.local_addr().expect("address");
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            std::thread::spawn(move || serve(stream, error, all));
        }
    });
    format!("http://{address}")
}

fn serve(stream: std::net::TcpStream, error: &str, all: bool) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut writer = stream;
    loop {
        let mut headers = HashMap::new();
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        loop {
            line.clear();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let trimmed = line.trim_end();
            if trimmed.is_empty() {
                break;
            }
            if let Some((name, value)) = trimmed.split_once(':') {
                headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_string());
            }
        }
        let length: usize = headers
            .get("content-length")
            .and_then(|l| l.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let target = headers.get("x-amz-target").cloned().unwrap_or_default();
        let (status, reply) = if all || target.ends_with("TransactWriteItems") {
            ("400 Bad Request", error.to_string())
        } else {
            (
                "200 OK",
                r#"{"Items":[],"Count":0,"ScannedCount":0}"#.to_string(),
            )
        };
        let response = format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/x-amz-json-1.0\r\n\
             content-length: {}\r\n\r\n{reply}",
            reply.len()
        );
        if writer.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

/// The command handler on a fake DynamoDB endpoint.
fn app_on(endpoint: &str) -> cqrs_command_handler::App {
    use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region, retry::RetryConfig};
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("local", "local", None, None, "fake"))
        .retry_config(RetryConfig::standard().with_max_attempts(1))
        .build();
    cqrs_command_handler::App::new(
        cqrs_store::Store::new(
            aws_sdk_dynamodb::Client::from_conf(config),
            cqrs_store::Tables::new("c", "d", "h", "i"),
        ),
        CallerMode::Jwt,
        cqrs_model::Model::example(),
    )
}

const TRANSACTION_CONFLICT: &str = r#"{"__type":"com.amazonaws.dynamodb.v20120810#TransactionCanceledException","message":"Transaction cancelled, please refer cancellation reasons for specific reasons [None, TransactionConflict]","CancellationReasons":[{"Code":"None"},{"Code":"TransactionConflict","Message":"Transaction is ongoing for the item"}]}"#;
const TRANSACTION_THROTTLED: &str = r#"{"__type":"com.amazonaws.dynamodb.v20120810#TransactionCanceledException","message":"Transaction cancelled, please refer cancellation reasons for specific reasons [ThrottlingError, None]","CancellationReasons":[{"Code":"ThrottlingError","Message":"Throughput exceeds the current capacity for one or more global secondary indexes"},{"Code":"None"}]}"#;
const THROTTLING: &str = r#"{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException","message":"Rate of requests exceeds the allowed throughput."}"#;
const PROVISIONED: &str = r#"{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException","message":"The level of configured provisioned throughput for the table was exceeded."}"#;
const REQUEST_LIMIT: &str = r#"{"__type":"com.amazonaws.dynamodb.v20120810#RequestLimitExceeded","message":"Throughput exceeds the current throughput limit for your account."}"#;
const CONFLICT_EXCEPTION: &str = r#"{"__type":"com.amazonaws.dynamodb.v20120810#TransactionConflictException","message":"Transaction is ongoing for the item"}"#;

#[tokio::test]
async fn write_conflicts_are_409_and_throttling_is_503_with_retry_after() {
    let cases: [(&str, &str, bool, u16); 7] = [
        (
            "TransactionConflict in the write",
            TRANSACTION_CONFLICT,
            false,
            409,
        ),
        (
            "TransactionConflictException",
            CONFLICT_EXCEPTION,
            true,
            409,
        ),
        (
            "ThrottlingError in the write",
            TRANSACTION_THROTTLED,
            false,
            503,
        ),
        ("ThrottlingException", THROTTLING, true, 503),
        (
            "ProvisionedThroughputExceededException",
            PROVISIONED,
            true,
            503,
        ),
        ("RequestLimitExceeded", REQUEST_LIMIT, true, 503),
        (
            "TransactionConflict in a -1 write, after retries",
            TRANSACTION_CONFLICT,
            false,
            409,
        ),
    ];
    let (mut conflicts, mut throttled, mut server_errors) = (0, 0, 0);
    for (i, (what, error, all, status)) in cases.into_iter().enumerate() {
        let app = app_on(&fake_dynamodb(error, all));
        let version = if i == 6 { -1 } else { 0 };
        for key in [None, Some("k-1")] {
            let mut request = post(&json!({"pk": PK, "sk": "X", "version": version}));
            if let Some(key) = key {
                request = request.header("idempotency-key", key);
            }
            let response = cqrs_command_handler::handle(&app, request.request()).await;
            let retry_after = response
                .headers()
                .get("retry-after")
                .map(|v| v.to_str().unwrap_or_default().to_string());
            let answer = Answer::of(response);
            if answer.status >= 500 && answer.status != 503 {
                server_errors += 1;
            }
            assert_eq!(
                answer.status, status,
                "{what} (key {key:?}): {}",
                answer.text
            );
            assert_eq!(
                answer.content_type.as_deref(),
                Some("application/problem+json")
            );
            if status == 503 {
                assert_eq!(retry_after.as_deref(), Some("1"), "{what}");
                throttled += 1;
            } else {
                assert_eq!(retry_after, None, "{what}");
                assert_eq!(answer.problem_fault(), None, "{what}");
                conflicts += 1;
            }
        }
    }
    assert_eq!(server_errors, 0);
    println!(
        "write conflicts: {conflicts} answered 409, {throttled} throttled answered 503 with \
         Retry-After, {server_errors} other 5xx"
    );
}

#[tokio::test]
async fn contended_writers_never_get_a_5xx() {
    const WRITERS: usize = 40;
    let stack = Stack::new(CallerMode::Jwt).await;
    write_versions(&stack, "HOT", 1).await;
    // Writers of one version, half with an Idempotency-Key: transactions on one head record.
    let answers = join_all((0..WRITERS).map(|i| {
        let stack = &stack;
        async move {
            let mut request =
                post(&json!({"pk": PK, "sk": "HOT", "version": 1, "name": format!("w{i}")}));
            if i % 2 == 0 {
                request = request.header("idempotency-key", &format!("hot-{i}"));
            }
            stack.send(request).await
        }
    }))
    .await;
    let won = answers.iter().filter(|a| a.status == 202).count();
    let conflicts = answers.iter().filter(|a| a.status == 409).count();
    let other: Vec<_> = answers
        .iter()
        .filter(|a| a.status != 202 && a.status != 409)
        .map(|a| format!("{} {}", a.status, a.text))
        .collect();
    assert!(other.is_empty(), "{other:?}");
    assert_eq!(won, 1);
    println!(
        "contended writers: {WRITERS} writers of one version on DynamoDB Local: {won} \
         written, {conflicts} got 409, 0 5xx"
    );
}

#[tokio::test]
async fn oversized_bodies_are_refused_before_parsing() {
    let stack = Stack::new(CallerMode::Jwt).await;
    let max = cqrs_command_handler::MAX_BODY_BYTES;
    let small = json!({"pk": PK, "sk": "BIG", "version": 0}).to_string();
    let padded = format!("{small}{}", " ".repeat(max + 1 - small.len()));
    let truncated = format!(
        r#"{{"pk":"{PK}","sk":"BIG","version":0,"attributes":{{"a":"{}"#,
        "x".repeat(max)
    );
    let huge = format!(
        r#"{{"pk":"{PK}","sk":"BIG","version":0,"attributes":{{"a":"{}"}}}}"#,
        "x".repeat(4 * max)
    );
    let before = tables_state(&stack).await;
    let mut refused = 0;
    let bodies = [
        ("a small command padded with whitespace", &padded),
        ("a truncated body", &truncated),
        ("a 4 MiB attribute", &huge),
    ];
    for (what, body) in bodies {
        for method in ["POST", "PATCH"] {
            let answer = stack.send(Req::command(method, body).claims_of(T1)).await;
            assert_eq!(answer.status, 413, "{method} {what}: {}", answer.text);
            assert_eq!(answer.problem_fault(), None);
            assert_eq!(answer.body["type"], "urn:cqrs:problem:body-too-large");
            refused += 1;
        }
    }
    assert_eq!(tables_state(&stack).await, before);
    // At the limit, the body is parsed (and this one written).
    let at_limit = format!("{small}{}", " ".repeat(max - small.len()));
    let answer = stack
        .send(Req::command("POST", &at_limit).claims_of(T1))
        .await;
    assert_eq!(answer.status, 202, "{}", answer.text);
    println!(
        "oversized bodies: {refused} of {} over {max} bytes refused with 413 before parsing, 0 written",
        bodies.len() * 2
    );
}

#[tokio::test]
async fn versions_near_i64_max_never_overflow() {
    let stack = Stack::new(CallerMode::Jwt).await;
    let max = i64::MAX;
    // An item at i64::MAX - 1, written before heads existed.
    put_raw(
        &stack.tables,
        &stack.tables.command,
        &command_item(PK, "EDGE", max - 1),
    )
    .await;
    let next = stack
        .send(post(&json!({"pk": PK, "sk": "EDGE", "version": -1})))
        .await;
    assert_eq!(next.status, 202, "{}", next.text);
    assert_eq!(next.body["version"], max);

    let mut attempts = 0;
    let mut clean = 0;
    let cases: Vec<(&str, String, u16)> = vec![
        (
            "POST -1 at i64::MAX",
            json!({"pk": PK, "sk": "EDGE", "version": -1}).to_string(),
            400,
        ),
        (
            "PATCH -1 at i64::MAX",
            json!({"pk": PK, "sk": "EDGE", "version": -1}).to_string(),
            400,
        ),
        (
            "POST i64::MAX at i64::MAX",
            json!({"pk": PK, "sk": "EDGE", "version": max}).to_string(),
            400,
        ),
        (
            "PATCH i64::MAX at i64::MAX",
            json!({"pk": PK, "sk": "EDGE", "version": max}).to_string(),
            400,
        ),
        (
            "POST i64::MAX - 1 at i64::MAX",
            json!({"pk": PK, "sk": "EDGE", "version": max - 1}).to_string(),
            409,
        ),
        (
            "POST 0 at i64::MAX",
            json!({"pk": PK, "sk": "EDGE", "version": 0}).to_string(),
            409,
        ),
        (
            "POST i64::MAX on a new item",
            json!({"pk": PK, "sk": "NEW", "version": max}).to_string(),
            404,
        ),
        (
            "POST i64::MAX + 1",
            format!(r#"{{"pk":"{PK}","sk":"EDGE","version":9223372036854775808}}"#),
            400,
        ),
        (
            "POST -i64::MAX",
            json!({"pk": PK, "sk": "EDGE", "version": -max}).to_string(),
            400,
        ),
        (
            "POST i64::MIN",
            json!({"pk": PK, "sk": "EDGE", "version": i64::MIN}).to_string(),
            400,
        ),
    ];
    for (what, body, status) in cases {
        let method = if what.starts_with("PATCH") {
            "PATCH"
        } else {
            "POST"
        };
        let before = tables_state(&stack).await;
        let answer = stack.send(Req::command(method, &body).claims_of(T1)).await;
        attempts += 1;
        assert_eq!(answer.status, status, "{what}: {}", answer.text);
        assert_eq!(answer.problem_fault(), None, "{what}");
        if status == 400 && what.contains("at i64::MAX") {
            assert_eq!(answer.body["field"], "version", "{what}");
        }
        assert_eq!(tables_state(&stack).await, before, "{what}");
        clean += 1;
    }
    println!(
        "version arithmetic: {attempts} commands at or near i64::MAX, {clean} clean 4xx, 0 5xx, \
         0 panics"
    );
}
