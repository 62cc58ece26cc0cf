//! Declared constraints (`unique`, `limits`, `references` in `model.toml`) held by the command
//! handler under 20 concurrent writers, against DynamoDB Local, through every state change: create,
//! an update moving onto a value or a group, a condition flip (a return), soft delete, restore.
//!
//! Every client retries a write conflict (DynamoDB's `TransactionConflict`: nothing was written,
//! send again), as a client of the API does. After each round an oracle recounts, from the newest
//! command row of every item (consistent reads), who holds each unique value and who is a member
//! of each bounded group, and that equals the guard items; and
//! `cqrs_store::constraints::verify` reports nothing.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use aws_sdk_dynamodb::types::AttributeValue;
use common::{Harness, USER_T1};
use cqrs_item::Item;
use cqrs_model::Model;
use cqrs_store::constraints::Difference;
use serde_json::{Value, json};

/// A lending library: copies are unique by (isbn, copyNo) in the tenant, a member has at most 3
/// loans out, a loan names a live copy that is not a reference copy.
const MODEL: &str = cqrs_testkit::models::CONSTRAINED_LIBRARY;

const ISBN: &str = "9780000000001";

/// A handler on fresh tables serving [`MODEL`].
async fn library() -> Harness {
    let mut h = Harness::new().await;
    h.app.model = Arc::new(Model::parse(MODEL).expect("the test model parses"));
    h
}

fn copy(id: &str, copy_no: i64, version: i64) -> Value {
    json!({"entity": "copy", "version": version,
        "attributes": {"copyId": id, "isbn": ISBN, "copyNo": copy_no}})
}

fn loan(id: &str, member: &str, status: &str, version: i64) -> Value {
    json!({"entity": "loan", "version": version,
        "attributes": {"loanId": id, "memberId": member, "copyId": "c0", "status": status}})
}

/// Sends until the answer is not a transaction conflict (which writes nothing and asks for the
/// same request again).
async fn settle(h: &Harness, method: &str, body: Value) -> (u16, Value) {
    loop {
        let (status, answer) = match method {
            "PATCH" => h.patch(&USER_T1, body.clone()).await,
            _ => h.post(&USER_T1, body.clone()).await,
        };
        if answer["type"] != "urn:cqrs:problem:write-conflict" {
            return (status, answer);
        }
    }
}

/// Sends every body at once (each settled); answers in order.
async fn round(h: &Harness, bodies: Vec<(&'static str, Value)>) -> Vec<(u16, Value)> {
    futures::future::join_all(
        bodies
            .into_iter()
            .map(|(method, body)| settle(h, method, body)),
    )
    .await
}

/// Sends one body, asserting its status.
async fn ok(h: &Harness, body: Value, status: u16) -> Value {
    let (got, answer) = settle(h, "POST", body.clone()).await;
    assert_eq!(got, status, "{body}: {answer}");
    answer
}

fn count(answers: &[(u16, Value)], status: u16, problem: Option<&str>) -> usize {
    answers
        .iter()
        .filter(|(s, a)| *s == status && problem.is_none_or(|p| a["type"] == p))
        .count()
}

/// The newest command row of every item (consistent scan of the command table).
async fn newest_rows(h: &Harness) -> Vec<Item> {
    let mut newest: BTreeMap<(String, String), Item> = BTreeMap::new();
    let mut start = None;
    loop {
        let output = h
            .tables
            .client
            .scan()
            .table_name(&h.tables.command)
            .consistent_read(true)
            .set_exclusive_start_key(start)
            .send()
            .await
            .unwrap();
        for attributes in output.items() {
            let item = Item::from_attributes(attributes.clone()).unwrap();
            let key = (item.pk.clone(), item.base_sk().to_string());
            if newest
                .get(&key)
                .is_none_or(|seen| seen.version < item.version)
            {
                newest.insert(key, item);
            }
        }
        start = output.last_evaluated_key().cloned();
        if start.is_none() {
            break;
        }
    }
    newest.into_values().collect()
}

/// What the guard items say: the holder of each unique value, the members of each group (empty
/// groups left out), by guard key.
#[derive(Debug, Default, PartialEq, Eq)]
struct Guards {
    holders: BTreeMap<String, (String, String)>,
    members: BTreeMap<String, BTreeSet<String>>,
}

async fn guard_items(h: &Harness) -> Guards {
    let output = h
        .tables
        .client
        .scan()
        .table_name(&h.tables.idempotency)
        .consistent_read(true)
        .filter_expression("begins_with(pk, :g)")
        .expression_attribute_values(
            ":g",
            AttributeValue::S(format!("{}#", cqrs_keys::GUARD_KEY_PREFIX)),
        )
        .send()
        .await
        .unwrap();
    assert!(output.last_evaluated_key().is_none(), "one page");
    let mut guards = Guards::default();
    for item in output.items() {
        let s = |name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned();
        let key = s("pk").unwrap();
        match (s("o"), s("s"), item.get("m")) {
            (Some(owner_pk), Some(owner_sk), _) => {
                guards.holders.insert(key, (owner_pk, owner_sk));
            }
            (_, _, Some(AttributeValue::Ss(set))) if !set.is_empty() => {
                guards
                    .members
                    .insert(key, set.iter().cloned().collect::<BTreeSet<_>>());
            }
            _ => {}
        }
    }
    guards
}

fn text(item: &Item, name: &str) -> Option<String> {
    match item.attributes.get(name)? {
        cqrs_item::Value::String(s) => Some(s.clone()),
        cqrs_item::Value::Number(n) => Some(n.to_string()),
        cqrs_item::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// The oracle: the guards the newest versions call for, counted by hand from the rows (each
/// unique value held by at most one live copy, asserted here).
fn recount(rows: &[Item]) -> Guards {
    let mut guards = Guards::default();
    for row in rows.iter().filter(|r| !r.is_deleted) {
        let base = row.base_sk().to_string();
        if row.pk.starts_with("COPY#")
            && let (Some(isbn), Some(no)) = (text(row, "isbn"), text(row, "copyNo"))
        {
            let key = cqrs_keys::guard_key(&row.tenant_code, "copy", "copy_number", &[isbn, no]);
            let previous = guards.holders.insert(key, (row.pk.clone(), base.clone()));
            assert!(
                previous.is_none(),
                "two live copies hold one value: {row:?}"
            );
        }
        if row.pk.starts_with("LOAN#")
            && text(row, "status").as_deref() == Some("out")
            && let Some(member) = text(row, "memberId")
        {
            let key = cqrs_keys::guard_key(&row.tenant_code, "loan", "loans_out", &[member]);
            guards
                .members
                .entry(key)
                .or_default()
                .insert(cqrs_keys::member_token(&row.pk, &base));
        }
    }
    guards
}

/// After a round: the oracle's recount equals the guard items, no group is over its bound, and
/// `verify --constraints` finds nothing.
async fn check_round(h: &Harness) -> Guards {
    let (guards, dangling) = check_round_with_dangling(h).await;
    assert!(dangling.is_empty(), "verify: {dangling:?}");
    guards
}

/// [`check_round`], where references that went dangling after their write are listed (a
/// reference restricts the referencing write only: `verify` lists them for information).
async fn check_round_with_dangling(h: &Harness) -> (Guards, Vec<(String, String)>) {
    let rows = newest_rows(h).await;
    let expected = recount(&rows);
    let found = guard_items(h).await;
    assert_eq!(found, expected, "guard items against the oracle's recount");
    for members in found.members.values() {
        assert!(members.len() <= 3, "a group over its bound: {members:?}");
    }
    let report = cqrs_store::constraints::verify(&h.app.store, &h.app.model, Some("t1"))
        .await
        .unwrap();
    let (dangling, other): (Vec<_>, Vec<_>) = report
        .differences
        .into_iter()
        .partition(|d| matches!(d, Difference::Dangling { .. }));
    assert!(other.is_empty(), "verify: {other:?}");
    let dangling = dangling
        .into_iter()
        .filter_map(|d| match d {
            Difference::Dangling { item, .. } => Some(item),
            _ => None,
        })
        .collect();
    (found, dangling)
}

/// How many loans of `member` are out, by the oracle.
async fn out_of(h: &Harness, member: &str) -> usize {
    newest_rows(h)
        .await
        .iter()
        .filter(|r| {
            r.pk.starts_with("LOAN#")
                && !r.is_deleted
                && text(r, "status").as_deref() == Some("out")
                && text(r, "memberId").as_deref() == Some(member)
        })
        .count()
}

#[tokio::test]
async fn twenty_creates_of_one_unique_value_write_one() {
    let h = library().await;
    let answers = round(
        &h,
        (0..20)
            .map(|i| ("POST", copy(&format!("c{i}"), 1, 0)))
            .collect(),
    )
    .await;
    assert_eq!(count(&answers, 202, None), 1, "{answers:?}");
    let taken = "urn:cqrs:problem:unique-taken";
    assert_eq!(count(&answers, 409, Some(taken)), 19, "{answers:?}");
    let winner = answers.iter().find(|(s, _)| *s == 202).unwrap().1["sk"]
        .as_str()
        .unwrap()
        .split('@')
        .next()
        .unwrap()
        .to_string();
    let refusal = &answers.iter().find(|(s, _)| *s == 409).unwrap().1;
    assert_eq!(refusal["constraint"], "copy.copy_number", "{refusal}");
    let detail = refusal["detail"].as_str().unwrap();
    assert!(
        detail.contains(&format!("is held by COPY#t1 / {winner}")) && detail.contains(ISBN),
        "{detail}"
    );
    check_round(&h).await;
}

#[tokio::test]
async fn twenty_updates_moving_onto_one_value_write_one() {
    let h = library().await;
    for i in 0..20 {
        ok(&h, copy(&format!("c{i}"), 100 + i, 0), 202).await;
    }
    check_round(&h).await;
    let answers = round(
        &h,
        (0..20)
            .map(|i| ("POST", copy(&format!("c{i}"), 1, 1)))
            .collect(),
    )
    .await;
    assert_eq!(count(&answers, 202, None), 1, "{answers:?}");
    let taken = "urn:cqrs:problem:unique-taken";
    assert_eq!(count(&answers, 409, Some(taken)), 19, "{answers:?}");
    // The 19 others still hold their own numbers: the winner's old number is free again.
    let guards = check_round(&h).await;
    assert_eq!(guards.holders.len(), 20);
    let winner = answers.iter().position(|(s, _)| *s == 202).unwrap() as i64;
    ok(&h, copy("again", 100 + winner, 0), 202).await;
    check_round(&h).await;
}

#[tokio::test]
async fn a_soft_delete_frees_a_unique_value_and_a_restore_races_the_creates() {
    let h = library().await;
    ok(&h, copy("holder", 1, 0), 202).await;
    ok(&h, copy("late", 1, 0), 409).await;
    ok(
        &h,
        json!({"entity": "copy", "version": 1, "isDeleted": true,
            "attributes": {"copyId": "holder", "isbn": ISBN, "copyNo": 1}}),
        202,
    )
    .await;
    check_round(&h).await;
    let answers = round(
        &h,
        (0..20)
            .map(|i| ("POST", copy(&format!("c{i}"), 1, 0)))
            .collect(),
    )
    .await;
    assert_eq!(count(&answers, 202, None), 1, "freed once: {answers:?}");
    check_round(&h).await;

    // The value's holder deleted again; its restore races 19 creates: one holder.
    let winner = answers.iter().position(|(s, _)| *s == 202).unwrap();
    ok(
        &h,
        json!({"entity": "copy", "version": 1, "isDeleted": true,
            "attributes": {"copyId": format!("c{winner}"), "isbn": ISBN, "copyNo": 1}}),
        202,
    )
    .await;
    let mut bodies: Vec<(&'static str, Value)> = (0..19)
        .map(|i| ("POST", copy(&format!("d{i}"), 1, 0)))
        .collect();
    bodies.push((
        "POST",
        json!({"entity": "copy", "version": 2, "isDeleted": false,
            "attributes": {"copyId": "holder", "isbn": ISBN, "copyNo": 1}}),
    ));
    let answers = round(&h, bodies).await;
    assert_eq!(count(&answers, 202, None), 1, "{answers:?}");
    assert_eq!(
        count(&answers, 409, Some("urn:cqrs:problem:unique-taken")),
        19
    );
    check_round(&h).await;
}

#[tokio::test]
async fn twenty_loans_of_one_member_write_three() {
    let h = library().await;
    ok(&h, copy("c0", 1, 0), 202).await;
    let answers = round(
        &h,
        (0..20)
            .map(|i| ("POST", loan(&format!("L{i}"), "m1", "out", 0)))
            .collect(),
    )
    .await;
    assert_eq!(count(&answers, 202, None), 3, "{answers:?}");
    let full = "urn:cqrs:problem:limit-reached";
    assert_eq!(count(&answers, 409, Some(full)), 17, "{answers:?}");
    let refusal = &answers.iter().find(|(s, _)| *s == 409).unwrap().1;
    assert_eq!(
        (refusal["constraint"].as_str(), refusal["limit"].as_u64()),
        (Some("loan.loans_out"), Some(3)),
        "{refusal}"
    );
    assert!(
        refusal["detail"]
            .as_str()
            .unwrap()
            .contains(r#"memberId "m1" already has 3 (at most 3)"#),
        "{refusal}"
    );
    assert_eq!(out_of(&h, "m1").await, 3);
    check_round(&h).await;
}

#[tokio::test]
async fn twenty_loans_moving_onto_a_member_at_two_write_one() {
    let h = library().await;
    ok(&h, copy("c0", 1, 0), 202).await;
    for i in 0..2 {
        ok(&h, loan(&format!("M{i}"), "m2", "out", 0), 202).await;
    }
    for i in 0..20 {
        ok(&h, loan(&format!("L{i}"), &format!("x{i}"), "out", 0), 202).await;
    }
    check_round(&h).await;
    let answers = round(
        &h,
        (0..20)
            .map(|i| ("POST", loan(&format!("L{i}"), "m2", "out", 1)))
            .collect(),
    )
    .await;
    assert_eq!(count(&answers, 202, None), 1, "{answers:?}");
    assert_eq!(
        count(&answers, 409, Some("urn:cqrs:problem:limit-reached")),
        19
    );
    assert_eq!(out_of(&h, "m2").await, 3);
    check_round(&h).await;
}

#[tokio::test]
async fn returns_and_new_loans_mixed_never_pass_the_bound() {
    let h = library().await;
    ok(&h, copy("c0", 1, 0), 202).await;
    for i in 0..3 {
        ok(&h, loan(&format!("L{i}"), "m1", "out", 0), 202).await;
    }
    let mut bodies: Vec<(&'static str, Value)> = (0..3)
        .map(|i| ("POST", loan(&format!("L{i}"), "m1", "returned", 1)))
        .collect();
    bodies.extend((0..17).map(|i| ("POST", loan(&format!("N{i}"), "m1", "out", 0))));
    let answers = round(&h, bodies).await;
    assert!(
        answers.iter().take(3).all(|(s, _)| *s == 202),
        "every return is taken: {answers:?}"
    );
    let lent = count(&answers[3..], 202, None);
    assert!(lent <= 3, "{answers:?}");
    assert_eq!(
        count(&answers[3..], 409, Some("urn:cqrs:problem:limit-reached")),
        17 - lent
    );
    assert_eq!(out_of(&h, "m1").await, lent);
    check_round(&h).await;
    // Exactly the free slots are left: 3 - lent more loans, then a refusal.
    for i in lent..3 {
        ok(&h, loan(&format!("F{i}"), "m1", "out", 0), 202).await;
    }
    ok(&h, loan("F9", "m1", "out", 0), 409).await;
    check_round(&h).await;
}

#[tokio::test]
async fn a_soft_delete_frees_a_slot_and_a_restore_is_bounded() {
    let h = library().await;
    ok(&h, copy("c0", 1, 0), 202).await;
    for i in 1..=3 {
        ok(&h, loan(&format!("L{i}"), "m1", "out", 0), 202).await;
    }
    for i in 1..=2 {
        let mut delete = loan(&format!("L{i}"), "m1", "out", 1);
        delete["isDeleted"] = json!(true);
        ok(&h, delete, 202).await;
    }
    assert_eq!(out_of(&h, "m1").await, 1);
    check_round(&h).await;
    let answers = round(
        &h,
        (0..20)
            .map(|i| ("POST", loan(&format!("N{i}"), "m1", "out", 0)))
            .collect(),
    )
    .await;
    assert_eq!(count(&answers, 202, None), 2, "{answers:?}");
    check_round(&h).await;
    // The group is full again: the restore of L1 is refused, nothing written.
    let mut restore = loan("L1", "m1", "out", 2);
    restore["isDeleted"] = json!(false);
    let refusal = ok(&h, restore.clone(), 409).await;
    assert_eq!(refusal["type"], "urn:cqrs:problem:limit-reached");
    assert_eq!(h.versions("LOAN#t1", "L1").await.len(), 2);
    // A return frees a slot: the restore is taken.
    ok(&h, loan("L3", "m1", "returned", 1), 202).await;
    ok(&h, restore, 202).await;
    assert_eq!(out_of(&h, "m1").await, 3);
    check_round(&h).await;
}

#[tokio::test]
async fn a_reference_names_a_live_copy_that_is_no_reference_copy() {
    let h = library().await;
    // A copy created just before: accepted at once (its head, not the lagging data table).
    ok(&h, copy("c0", 1, 0), 202).await;
    ok(&h, loan("L1", "m1", "out", 0), 202).await;

    let refused = |answer: &Value, reason: &str| {
        assert_eq!(
            answer["type"], "urn:cqrs:problem:reference-refused",
            "{answer}"
        );
        assert_eq!(
            (answer["constraint"].as_str(), answer["reason"].as_str()),
            (Some("loan.copy"), Some(reason)),
            "{answer}"
        );
    };
    // A missing copy.
    let mut missing = loan("L2", "m1", "out", 0);
    missing["attributes"]["copyId"] = json!("nope");
    let answer = ok(&h, missing, 422).await;
    refused(&answer, "missing");
    assert!(
        answer["detail"]
            .as_str()
            .unwrap()
            .contains("COPY#t1 / nope does not exist"),
        "{answer}"
    );
    // A reference copy.
    let mut reference = copy("r1", 2, 0);
    reference["attributes"]["reference"] = json!(true);
    ok(&h, reference, 202).await;
    let mut on_reference = loan("L3", "m1", "out", 0);
    on_reference["attributes"]["copyId"] = json!("r1");
    refused(&ok(&h, on_reference, 422).await, "condition");
    // A deleted copy.
    ok(&h, copy("d1", 3, 0), 202).await;
    let mut delete = copy("d1", 3, 1);
    delete["isDeleted"] = json!(true);
    ok(&h, delete, 202).await;
    let mut on_deleted = loan("L4", "m1", "out", 0);
    on_deleted["attributes"]["copyId"] = json!("d1");
    refused(&ok(&h, on_deleted, 422).await, "deleted");
    // Moving a loan onto a reference copy is refused too; a return on its copy is not checked.
    let mut moved = loan("L1", "m1", "out", 1);
    moved["attributes"]["copyId"] = json!("r1");
    refused(&ok(&h, moved, 422).await, "condition");
    ok(&h, loan("L1", "m1", "returned", 1), 202).await;
    for id in ["L2", "L3", "L4"] {
        assert!(h.versions("LOAN#t1", id).await.is_empty(), "{id} written");
    }
    check_round(&h).await;

    // A head raised without its mirror (heads seeding): the mirror is stale, 503 naming the fix.
    ok(&h, copy("s1", 4, 0), 202).await;
    assert!(h.app.store.raise_head("COPY#t1", "s1", 5).await.unwrap());
    let mut on_stale = loan("L5", "m1", "out", 0);
    on_stale["attributes"]["copyId"] = json!("s1");
    let (status, answer) = h.post(&USER_T1, on_stale).await;
    assert_eq!(status, 503, "{answer}");
    assert_eq!(answer["type"], "urn:cqrs:problem:constraints-not-rebuilt");
    assert!(
        answer["detail"]
            .as_str()
            .unwrap()
            .contains("cqrs rebuild --constraints"),
        "{answer}"
    );
}

#[tokio::test]
async fn twenty_loans_while_the_copy_becomes_a_reference_copy() {
    let h = library().await;
    ok(&h, copy("c0", 1, 0), 202).await;
    let mut flip = copy("c0", 1, 1);
    flip["attributes"]["reference"] = json!(true);
    let mut bodies: Vec<(&'static str, Value)> = vec![("POST", flip)];
    bodies.extend((0..20).map(|i| ("POST", loan(&format!("L{i}"), &format!("x{i}"), "out", 0))));
    let answers = round(&h, bodies).await;
    assert_eq!(answers[0].0, 202, "{answers:?}");
    for (status, answer) in &answers[1..] {
        assert!(
            *status == 202
                || (*status == 422 && answer["type"] == "urn:cqrs:problem:reference-refused"),
            "{answers:?}"
        );
    }
    // After the flip's 202, every loan is refused.
    ok(&h, loan("late", "y", "out", 0), 422).await;
    // Loans taken before the flip now name a reference copy: listed, never a guard difference.
    let (_, dangling) = check_round_with_dangling(&h).await;
    let lent: Vec<(String, String)> = answers[1..]
        .iter()
        .filter(|(status, _)| *status == 202)
        .map(|(_, a)| {
            let sk = a["sk"].as_str().unwrap();
            (
                "LOAN#t1".to_string(),
                sk.split('@').next().unwrap().to_string(),
            )
        })
        .collect();
    let mut dangling = dangling;
    dangling.sort();
    let mut lent = lent;
    lent.sort();
    assert_eq!(dangling, lent, "{answers:?}");
}

#[tokio::test]
async fn an_update_whose_base_is_gone_is_refused_naming_the_version() {
    let h = library().await;
    ok(&h, copy("c1", 1, 0), 202).await;
    h.tables
        .client
        .delete_item()
        .table_name(&h.tables.command)
        .key("pk", AttributeValue::S("COPY#t1".into()))
        .key("sk", AttributeValue::S("c1@1".into()))
        .send()
        .await
        .unwrap();
    let (status, answer) = h.post(&USER_T1, copy("c1", 2, 1)).await;
    assert_eq!(status, 500, "{answer}");
    assert!(
        h.versions("COPY#t1", "c1").await.is_empty(),
        "nothing written"
    );
}

#[tokio::test]
async fn a_constrained_entity_takes_no_ttl() {
    let h = library().await;
    let mut with_ttl = copy("c1", 1, 0);
    with_ttl["ttl"] = json!(4_000_000_000_i64);
    let answer = ok(&h, with_ttl, 400).await;
    assert_eq!(answer["field"], "ttl", "{answer}");
    assert!(
        answer["detail"].as_str().unwrap().contains("copy_number"),
        "{answer}"
    );
    // `"ttl": null` keeps no expiry: taken.
    let mut no_ttl = copy("c1", 1, 0);
    no_ttl["ttl"] = Value::Null;
    ok(&h, no_ttl, 202).await;
    // A TTL policy for a constrained entity is refused; for another table it is taken.
    let policy = |table: &str| {
        json!({"pk": "MASTER#t1", "sk": format!("TTL#{table}"), "version": 0,
            "attributes": {"days": 30}})
    };
    let answer = ok(&h, policy("loan"), 422).await;
    assert_eq!(answer["type"], "urn:cqrs:problem:ttl-policy-refused");
    assert!(
        answer["detail"].as_str().unwrap().contains("loans_out"),
        "{answer}"
    );
    ok(&h, policy("PRODUCT"), 202).await;
    assert!(h.versions("MASTER#t1", "TTL#loan").await.is_empty());
    // A policy written around the handler (straight into the data table): the entity's commands
    // are refused (500, the log names the policy to remove), nothing written.
    let mut item = Item::example();
    item.pk = "MASTER#t1".into();
    item.sk = "TTL#copy".into();
    item.id = "MASTER#t1#TTL#copy".into();
    item.version = 1;
    item.tenant_code = "t1".into();
    item.attributes = serde_json::from_value(json!({"days": 3})).unwrap();
    h.tables
        .client
        .put_item()
        .table_name(&h.tables.data)
        .set_item(Some(item.to_attributes().unwrap()))
        .send()
        .await
        .unwrap();
    let (status, answer) = h.post(&USER_T1, copy("c2", 2, 0)).await;
    assert_eq!(status, 500, "{answer}");
    assert!(h.versions("COPY#t1", "c2").await.is_empty());
}

/// Master data kept as an entity with a unique label and write roles: the copy from `common`
/// writes through the same rules as a command.
const MASTER: &str = r#"
[entities.unit]
pk = "MASTER#{tenant}"
sk = "DATA#unit#{code}"
attributes.code = { type = "string", required = true, max = 20 }
attributes.label = { type = "string", max = 40 }
unique.label = { attributes = "label" }
roles = { create = ["librarian"], update = ["librarian"] }
"#;

#[tokio::test]
async fn the_master_data_copy_applies_the_entitys_roles_and_constraints() {
    let mut h = Harness::new().await;
    h.app.model = Arc::new(Model::parse(MASTER).expect("the master model parses"));
    for (code, label) in [("a", "x"), ("b", "y"), ("c", "z")] {
        let mut item = Item::example();
        item.pk = "MASTER#common".into();
        item.sk = format!("DATA#unit#{code}");
        item.id = format!("MASTER#common#DATA#unit#{code}");
        item.version = 1;
        item.tenant_code = "common".into();
        item.attributes = serde_json::from_value(json!({"code": code, "label": label})).unwrap();
        h.tables
            .client
            .put_item()
            .table_name(&h.tables.data)
            .set_item(Some(item.to_attributes().unwrap()))
            .send()
            .await
            .unwrap();
    }
    let h = &h;
    let copy = |roles: &'static str| async move {
        let (status, report, _) = h
            .send(
                cqrs_testkit::http_event::HttpApiRequest::new("POST", "/master-data/copy")
                    .header("content-type", "application/json")
                    .body(b"{}")
                    .claims("u1", "t1", roles)
                    .request(),
            )
            .await;
        (status, report)
    };
    let (status, report) = copy("reader").await;
    assert_eq!(status, 403, "{report}");
    assert!(
        report["detail"]
            .as_str()
            .unwrap()
            .contains("creating a unit takes the role librarian"),
        "{report}"
    );
    // The tenant's own unit holds the label of common's `c`: that copy is refused.
    let own = json!({"entity": "unit", "version": 0, "attributes": {"code": "own", "label": "z"}});
    let (status, answer) = h.post(&LIBRARIAN, own).await;
    assert_eq!(status, 202, "{answer}");
    let (status, report) = copy("librarian").await;
    assert_eq!(status, 409, "{report}");
    assert_eq!(report["type"], "urn:cqrs:problem:unique-taken", "{report}");
    assert_eq!(report["constraint"], "unit.label", "{report}");
    assert!(
        h.versions("MASTER#t1", "DATA#unit#c").await.is_empty(),
        "c is not copied"
    );
    // a and b were copied with their guards.
    assert_eq!(h.versions("MASTER#t1", "DATA#unit#a").await.len(), 1);
    let report = cqrs_store::constraints::verify(&h.app.store, &h.app.model, Some("t1"))
        .await
        .unwrap();
    assert!(report.is_clean(), "{:?}", report.differences);
    let (status, answer) = h
        .post(
            &LIBRARIAN,
            json!({"entity": "unit", "version": 0, "attributes": {"code": "dup", "label": "x"}}),
        )
        .await;
    assert_eq!(status, 409, "the copied a holds x: {answer}");
}

const LIBRARIAN: common::As = common::As {
    user: "l",
    tenant: "t1",
    roles: "librarian",
};
