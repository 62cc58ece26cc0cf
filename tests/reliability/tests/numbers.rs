//! Exact numbers and merge patches, end to end: commands posted to the command handler, the
//! command table's real DynamoDB Local stream delivered to data-sync in process, and the result
//! read back raw from the tables and through the query handler.
//!
//! - Numbers of up to DynamoDB's 38 significant digits come back byte for byte (in DynamoDB's
//!   canonical form) from the data table (raw `GetItem`), from `GET /items/{pk}/{sk}` and from
//!   `GET .../versions/{v}`, also after a `PATCH` merged into them; numbers DynamoDB cannot hold
//!   are a 400 naming the attribute's path, with nothing written.
//! - `PATCH` is a JSON merge patch: `"ttl": null` clears the expiry everywhere; `null` resets the
//!   other fields; absent fields keep theirs.

mod common;

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use common::{Answer, Caller, Req, Stack, T1, get, store};
use cqrs_caller::CallerMode;
use cqrs_data_sync::DataSync;

/// Numbers as the client sends them, and the text DynamoDB's canonical form gives them.
const NUMBERS: [(&str, &str, &str); 9] = [
    (
        "int38",
        "12345678901234567890123456789012345678",
        "12345678901234567890123456789012345678",
    ),
    (
        "dec38",
        "0.12345678901234567890123456789012345678",
        "0.12345678901234567890123456789012345678",
    ),
    (
        "neg38",
        "-9.9999999999999999999999999999999999999",
        "-9.9999999999999999999999999999999999999",
    ),
    ("big", "12345678901234567891", "12345678901234567891"),
    ("dec", "0.12345678901234567891", "0.12345678901234567891"),
    (
        "largest",
        "9.9999999999999999999999999999999999999E+125",
        // 38 nines and 88 zeros
        "999999999999999999999999999999999999990000000000000000000000000000000000000000000000000000000000000000000000000000000000000000",
    ),
    (
        "smallest",
        "1E-130",
        "0.0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000001",
    ),
    ("as_sent", "1.50", "1.5"),
    ("exponent", "-12.5e3", "-12500"),
];

/// Numbers DynamoDB cannot hold, and the attribute path the 400 must name.
const UNSTORABLE: [(&str, &str); 6] = [
    (
        r#"{"n39":123456789012345678901234567890123456789}"#,
        "attributes.n39",
    ),
    (
        r#"{"d39":0.123456789012345678901234567890123456789}"#,
        "attributes.d39",
    ),
    (r#"{"over":1E+126}"#, "attributes.over"),
    (r#"{"under":-1E-131}"#, "attributes.under"),
    (
        r#"{"deep":{"list":[1,{"n":-123456789012345678901234567890123456789}]}}"#,
        "attributes.deep.list[1].n",
    ),
    (r#"{"huge":1e400}"#, "attributes.huge"),
];

fn command(method: &str, body: &str) -> Req {
    Req::new(method, "/commands")
        .claims_of(T1)
        .header("content-type", "application/json")
        .body(body.as_bytes())
}

/// Delivers every record of the command table's stream not delivered yet to data-sync.
struct Projector {
    sync: DataSync,
    arn: String,
    delivered: usize,
}

impl Projector {
    async fn new(stack: &Stack) -> Self {
        Projector {
            sync: DataSync::new(store(&stack.tables)),
            arn: stack.tables.command_stream_arn().await,
            delivered: 0,
        }
    }

    /// Waits for `written` records in all and projects the new ones; every record must succeed.
    async fn project(&mut self, stack: &Stack, written: usize) {
        let records = stack.tables.command_stream_records(written).await;
        let fresh = records.get(self.delivered..).unwrap_or_default();
        let event = cqrs_testkit::stream_event::lambda_event(fresh, &self.arn).expect("an event");
        let response = self.sync.handle(event).await;
        assert!(
            response.batch_item_failures.is_empty(),
            "data-sync failed records: {:?}",
            response.batch_item_failures
        );
        self.delivered = records.len();
    }
}

/// The raw data-table row of `pk` / `sk`.
async fn data_row(stack: &Stack, pk: &str, sk: &str) -> HashMap<String, AttributeValue> {
    stack
        .tables
        .client
        .get_item()
        .table_name(&stack.tables.data)
        .key("pk", AttributeValue::S(pk.into()))
        .key("sk", AttributeValue::S(sk.into()))
        .consistent_read(true)
        .send()
        .await
        .expect("GetItem")
        .item
        .expect("a data row")
}

/// The `N` text of `attributes.<name>` in a raw row.
fn raw_number(row: &HashMap<String, AttributeValue>, name: &str) -> Option<String> {
    match row.get("attributes") {
        Some(AttributeValue::M(map)) => match map.get(name) {
            Some(AttributeValue::N(text)) => Some(text.clone()),
            _ => None,
        },
        _ => None,
    }
}

/// The text of the number `attributes.<name>` exactly as it stands in a JSON answer (the names
/// used here appear once in an answer; a `serde_json::Value` would already have rounded it).
fn answered_number(answer: &Answer, name: &str) -> Option<String> {
    let key = format!("\"{name}\":");
    let at = answer.text.find(&key)? + key.len();
    let number: String = answer
        .text
        .get(at..)?
        .chars()
        .take_while(|c| c.is_ascii_digit() || matches!(c, '-' | '+' | '.' | 'e' | 'E'))
        .collect();
    (!number.is_empty()).then_some(number)
}

#[tokio::test]
async fn numbers_keep_every_digit_from_body_to_answer() {
    let stack = Stack::new(CallerMode::Jwt).await;
    let mut projector = Projector::new(&stack).await;
    let attributes: Vec<String> = NUMBERS
        .iter()
        .map(|(name, sent, _)| format!("\"{name}\":{sent}"))
        .collect();
    let body = format!(
        r#"{{"pk":"PRODUCT#t1","sk":"NUM","version":0,"attributes":{{{}}}}}"#,
        attributes.join(",")
    );
    let created = stack.send(command("POST", &body)).await;
    assert_eq!(created.status, 202, "{}", created.text);
    // A PATCH merges into the stored version: the numbers it keeps must survive the merge too.
    let patched = stack
        .send(command(
            "PATCH",
            r#"{"pk":"PRODUCT#t1","sk":"NUM","version":1,"attributes":{"added":-0.00000000000000000000000000000000000000000000000000012345678901234567890123456789012345678}}"#,
        ))
        .await;
    assert_eq!(patched.status, 202, "{}", patched.text);
    projector.project(&stack, 2).await;

    let mut expected: Vec<(&str, String)> = NUMBERS
        .iter()
        .map(|(name, _, canonical)| (*name, canonical.to_string()))
        .collect();
    expected.push((
        "added",
        "-0.00000000000000000000000000000000000000000000000000012345678901234567890123456789012345678"
            .into(),
    ));
    let row = data_row(&stack, "PRODUCT#t1", "NUM").await;
    let item = stack
        .send(get("/items/PRODUCT%23t1/NUM").claims_of(T1))
        .await;
    assert_eq!(item.status, 200, "{}", item.text);
    let version = stack
        .send(get("/items/PRODUCT%23t1/NUM/versions/2").claims_of(T1))
        .await;
    assert_eq!(version.status, 200, "{}", version.text);

    let mut round_trips = 0;
    let mut changed = Vec::new();
    for (name, canonical) in &expected {
        for (read, text) in [
            ("data table", raw_number(&row, name)),
            ("GET item", answered_number(&item, name)),
            ("GET version", answered_number(&version, name)),
        ] {
            round_trips += 1;
            if text.as_deref() != Some(canonical.as_str()) {
                changed.push(format!("{name} via {read}: {text:?}, sent {canonical}"));
            }
        }
    }
    println!(
        "exact numbers: {} numbers x 3 reads = {round_trips} round trips (38 digits, 1E-130, \
         9.99..E+125, after a PATCH merge), {} changed",
        expected.len(),
        changed.len()
    );
    assert!(changed.is_empty(), "{changed:#?}");
}

#[tokio::test]
async fn numbers_dynamodb_cannot_hold_are_refused_naming_the_attribute() {
    let stack = Stack::new(CallerMode::Jwt).await;
    let created = stack
        .send(command(
            "POST",
            r#"{"pk":"PRODUCT#t1","sk":"BASE","version":0,"attributes":{"n":1}}"#,
        ))
        .await;
    assert_eq!(created.status, 202, "{}", created.text);
    let before = stack.snapshot().await;
    let mut refused = 0;
    let mut faults = Vec::new();
    for (attributes, path) in UNSTORABLE {
        for (method, sk, version) in [("POST", "NEW", 0), ("PATCH", "BASE", 1)] {
            let body = format!(
                r#"{{"pk":"PRODUCT#t1","sk":"{sk}","version":{version},"attributes":{attributes}}}"#
            );
            let answer = stack.send(command(method, &body)).await;
            if let Some(fault) = answer.problem_fault() {
                faults.push(format!("{method} {attributes}: {fault}"));
            } else if answer.status != 400 || answer.body["field"] != path {
                faults.push(format!(
                    "{method} {attributes}: {} naming {}, not 400 naming {path}",
                    answer.status, answer.body["field"]
                ));
            } else {
                refused += 1;
            }
        }
    }
    let written = stack.snapshot().await.items() - before.items();
    println!(
        "unstorable numbers: {} refused of {} (39 digits, 1E+126, 1E-131, nested), attribute \
         named, {written} written",
        refused,
        UNSTORABLE.len() * 2
    );
    assert!(faults.is_empty(), "{faults:#?}");
    assert_eq!(stack.snapshot().await, before, "something was written");
}

#[tokio::test]
async fn patch_is_a_merge_patch_null_clears_ttl_and_resets_fields() {
    let stack = Stack::new(CallerMode::Jwt).await;
    let mut projector = Projector::new(&stack).await;
    let posted = stack
        .send(command(
            "POST",
            r#"{"pk":"PRODUCT#t1","sk":"TTL","version":0,"code":"C1","name":"Coffee",
                "isDeleted":true,"ttl":1900000000,"attributes":{"keep":1,"drop":2}}"#,
        ))
        .await;
    assert_eq!(posted.status, 202, "{}", posted.text);
    // Absent fields keep their stored values.
    let kept = stack
        .send(command(
            "PATCH",
            r#"{"pk":"PRODUCT#t1","sk":"TTL","version":1,"attributes":{"drop":null}}"#,
        ))
        .await;
    assert_eq!(kept.status, 202, "{}", kept.text);
    projector.project(&stack, 2).await;
    let v2 = stack
        .send(get("/items/PRODUCT%23t1/TTL?includeDeleted=true").claims_of(T1))
        .await;
    assert_eq!(v2.status, 200, "{}", v2.text);
    let mut kept_fields = 0;
    for (field, value) in [
        ("ttl", serde_json::json!(1900000000)),
        ("code", "C1".into()),
        ("name", "Coffee".into()),
        ("isDeleted", true.into()),
        ("attributes", serde_json::json!({"keep": 1})),
    ] {
        assert_eq!(v2.body[field], value, "{field} after a PATCH without it");
        kept_fields += 1;
    }

    // `null` clears the expiry and resets every other field to what a POST without it gives.
    let cleared = stack
        .send(command(
            "PATCH",
            r#"{"pk":"PRODUCT#t1","sk":"TTL","version":2,"ttl":null,"code":null,"name":null,
                "isDeleted":null,"attributes":null}"#,
        ))
        .await;
    assert_eq!(cleared.status, 202, "{}", cleared.text);
    projector.project(&stack, 3).await;

    let command_row = common::scan_raw(&stack.tables, &stack.tables.command)
        .await
        .into_iter()
        .find(|row| row.get("sk") == Some(&AttributeValue::S("TTL@3".into())))
        .expect("version 3 in the command table");
    let data = data_row(&stack, "PRODUCT#t1", "TTL").await;
    let item = stack
        .send(get("/items/PRODUCT%23t1/TTL").claims_of(T1))
        .await;
    let history = stack
        .send(get("/items/PRODUCT%23t1/TTL/versions/3").claims_of(T1))
        .await;
    assert_eq!(item.status, 200, "{}", item.text);
    assert_eq!(history.status, 200, "{}", history.text);
    assert_eq!(item.body["version"], 3);
    let stale: Vec<&str> = [
        ("command table", command_row.contains_key("ttl")),
        ("data table", data.contains_key("ttl")),
        ("GET item", !item.body["ttl"].is_null()),
        ("GET version", !history.body["ttl"].is_null()),
    ]
    .into_iter()
    .filter(|(_, has_ttl)| *has_ttl)
    .map(|(place, _)| place)
    .collect();
    let mut reset_fields = 0;
    for answer in [&item, &history] {
        for (field, value) in [
            ("code", serde_json::json!("")),
            ("name", "".into()),
            ("isDeleted", false.into()),
            ("attributes", serde_json::json!({})),
        ] {
            assert_eq!(answer.body[field], value, "{field} after a PATCH with null");
            reset_fields += 1;
        }
    }
    println!(
        "merge patch: ttl cleared, {} stale (command table, data table, GET item, GET version); \
         {reset_fields} fields reset by null, {kept_fields} kept when absent",
        stale.len()
    );
    assert!(stale.is_empty(), "ttl still set in {stale:?}");
}
