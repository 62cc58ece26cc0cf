//! What each command costs in DynamoDB, counted against DynamoDB Local through a client that
//! records every call ([`cqrs_testkit::round_trips::CallLog`]): sequential round trips on the
//! request path, with the container's caches (TTL policy, heads state) warm. These are the
//! figures of the README's command section; a change that adds a round trip fails here.
//!
//! | command | round trips |
//! | --- | --- |
//! | create (`version: 0`), by key or by entity | 1 |
//! | create by entity with a server-made ULID, even before heads are complete | 1 |
//! | `POST` / `PATCH` on version N | 2 |
//! | `version: -1` | 3 |
//! | any of these with an `Idempotency-Key` (and its retry) | +0 |
//! | a constrained create (a unique claim; a limit join and a reference check) | 1 |
//! | a constrained `version: N` (a unique value moved; a limit left) | 2 |
//! | a 409 on a create | 1 |
//! | `/master-data/copy`, per item | 1 head read |
//! | the first command of a container (cold): the heads state with the TTL policy | +1, one `BatchGetItem` (a cold create: `BatchGetItem`, `TransactWriteItems`, the calls of `floor-create`) |
//! | heads `shared` (or `incomplete`): a create / `version: N` / `-1` | 3 / 4 / 4 |
//! | heads not complete, a command on an item without a head (a 409 on a create) | 3 |

mod common;

use common::{Harness, USER_T1, event};
use cqrs_command_handler::App;
use cqrs_item::Item;
use cqrs_testkit::round_trips::CallLog;
use serde_json::{Value, json};

/// A handler on fresh tables whose first command has filled the container's caches for tenant
/// t1's products and orders; the log is cleared after it.
async fn warm() -> (Harness, CallLog) {
    let log = CallLog::default();
    let h = Harness::counted(&log).await;
    for body in [
        json!({"pk": "PRODUCT#t1", "sk": "WARM", "version": 0}),
        json!({"entity": "order", "version": 0, "attributes": {"orderId": "warm", "userId": "u1", "status": "PENDING"}}),
    ] {
        let (status, answer) = h.post(&USER_T1, body).await;
        assert_eq!(status, 202, "{answer}");
    }
    log.clear();
    (h, log)
}

/// Sends `body` with `method` (and headers), asserts the status, and answers the body and the
/// round trips it took; the log is cleared after.
async fn cost(
    h: &Harness,
    log: &CallLog,
    method: &str,
    body: Value,
    headers: &[(&str, &str)],
    status: u16,
) -> (Value, usize, Vec<String>) {
    log.clear();
    let (got, answer, _) = h
        .send(event(method, &USER_T1, &body.to_string(), headers))
        .await;
    assert_eq!(got, status, "{method} {body}: {answer}");
    let trips = log.round_trips();
    let operations = log.operations();
    log.clear();
    (answer, trips, operations)
}

#[tokio::test]
async fn a_create_is_one_round_trip_the_transaction() {
    let (h, log) = warm().await;
    let (_, trips, ops) = cost(
        &h,
        &log,
        "POST",
        json!({"pk": "PRODUCT#t1", "sk": "P1", "version": 0}),
        &[],
        202,
    )
    .await;
    assert_eq!((trips, ops), (1, vec!["TransactWriteItems".to_string()]));

    let by_entity = json!({"entity": "order", "version": 0,
        "attributes": {"orderId": "o1", "userId": "u1", "status": "PENDING"}});
    let (_, trips, ops) = cost(&h, &log, "POST", by_entity.clone(), &[], 202).await;
    assert_eq!((trips, ops), (1, vec!["TransactWriteItems".to_string()]));

    // The same create again: the head's failed condition names the version, no read.
    let (answer, trips, ops) = cost(&h, &log, "POST", by_entity, &[], 409).await;
    assert_eq!(answer["currentVersion"], 1, "{answer}");
    assert_eq!((trips, ops), (1, vec!["TransactWriteItems".to_string()]));

    // A server-made ULID.
    let (answer, trips, _) = cost(
        &h,
        &log,
        "POST",
        json!({"entity": "product", "version": 0, "attributes": {}}),
        &[],
        202,
    )
    .await;
    assert_eq!(trips, 1, "{answer}");
}

#[tokio::test]
async fn a_version_n_command_reads_its_base_then_writes() {
    let (h, log) = warm().await;
    let create = json!({"pk": "PRODUCT#t1", "sk": "P1", "version": 0, "attributes": {"a": 1}});
    cost(&h, &log, "POST", create, &[], 202).await;

    let (_, trips, ops) = cost(
        &h,
        &log,
        "POST",
        json!({"pk": "PRODUCT#t1", "sk": "P1", "version": 1, "attributes": {"a": 2}}),
        &[],
        202,
    )
    .await;
    assert_eq!(trips, 2, "{ops:?}");
    assert_eq!(ops, ["GetItem", "TransactWriteItems"]);

    let (_, trips, ops) = cost(
        &h,
        &log,
        "PATCH",
        json!({"pk": "PRODUCT#t1", "sk": "P1", "version": 2, "attributes": {"b": 1}}),
        &[],
        202,
    )
    .await;
    assert_eq!(trips, 2, "{ops:?}");
    let stored = h.versions("PRODUCT#t1", "P1").await;
    let newest: &Item = stored.last().unwrap();
    assert_eq!(newest.version, 3);
    assert_eq!(newest.attributes["a"], 2, "merged into version 2");
    assert_eq!(
        newest.created_at, stored[0].created_at,
        "createdAt of the base"
    );

    // A stale base: still two, and the 409 names the latest from the failed condition.
    let (answer, trips, _) = cost(
        &h,
        &log,
        "PATCH",
        json!({"pk": "PRODUCT#t1", "sk": "P1", "version": 1, "attributes": {"c": 1}}),
        &[],
        409,
    )
    .await;
    assert_eq!((trips, answer["currentVersion"].clone()), (2, json!(3)));

    // A version that does not exist: 404, without writing.
    let (_, _, _) = cost(
        &h,
        &log,
        "POST",
        json!({"pk": "PRODUCT#t1", "sk": "P1", "version": 9}),
        &[],
        404,
    )
    .await;
    assert_eq!(h.versions("PRODUCT#t1", "P1").await.len(), 3);
}

#[tokio::test]
async fn a_latest_command_reads_the_head_then_the_base_then_writes() {
    let (h, log) = warm().await;
    cost(
        &h,
        &log,
        "POST",
        json!({"pk": "PRODUCT#t1", "sk": "P1", "version": 0}),
        &[],
        202,
    )
    .await;
    let (answer, trips, ops) = cost(
        &h,
        &log,
        "PATCH",
        json!({"pk": "PRODUCT#t1", "sk": "P1", "version": -1, "attributes": {"b": 1}}),
        &[],
        202,
    )
    .await;
    assert_eq!(answer["version"], 2);
    assert_eq!(trips, 3, "{ops:?}");
    assert_eq!(ops, ["GetItem", "GetItem", "TransactWriteItems"]);
}

#[tokio::test]
async fn an_idempotency_key_adds_no_round_trip_and_its_retry_none_either() {
    let (h, log) = warm().await;
    let create = json!({"pk": "PRODUCT#t1", "sk": "K1", "version": 0});
    let key = [("idempotency-key", "create-k1")];
    let (first, trips, _) = cost(&h, &log, "POST", create.clone(), &key, 202).await;
    assert_eq!(trips, 1);
    // The retry: the record's failed condition hands back the first result.
    let (retry, trips, ops) = cost(&h, &log, "POST", create, &key, 202).await;
    assert_eq!(retry, first);
    assert_eq!((trips, ops), (1, vec!["TransactWriteItems".to_string()]));

    let patch = json!({"pk": "PRODUCT#t1", "sk": "K1", "version": 1, "attributes": {"x": 1}});
    let key = [("idempotency-key", "patch-k1")];
    let (first, trips, _) = cost(&h, &log, "PATCH", patch.clone(), &key, 202).await;
    assert_eq!(trips, 2);
    let (retry, trips, _) = cost(&h, &log, "PATCH", patch, &key, 202).await;
    assert_eq!((retry, trips), (first, 2));
    assert_eq!(
        h.versions("PRODUCT#t1", "K1").await.len(),
        2,
        "nothing written twice"
    );

    // The same key with another request: 422, still no extra read.
    let (_, trips, _) = cost(
        &h,
        &log,
        "PATCH",
        json!({"pk": "PRODUCT#t1", "sk": "K1", "version": 1, "attributes": {"x": 2}}),
        &key,
        422,
    )
    .await;
    assert_eq!(trips, 2);
}

#[tokio::test]
async fn before_heads_are_complete_a_create_reads_first_but_a_fresh_ulid_does_not() {
    let log = CallLog::default();
    let h = Harness::counted(&log).await;
    // A row written without a head (an older deployment, mbc-cqrs-serverless): not complete.
    let mut old = Item::example();
    old.pk = "PRODUCT#t1".into();
    old.sk = "OLD@4".into();
    old.id = "PRODUCT#t1#OLD".into();
    old.version = 4;
    h.app.store.put_command(&old, None).await.unwrap();

    let (answer, trips, _) = cost(
        &h,
        &log,
        "POST",
        json!({"entity": "product", "version": 0, "attributes": {}}),
        &[],
        202,
    )
    .await;
    // The first command of the container also reads the heads state, then (no state record)
    // whether the tables are empty: two round trips of its own, once per container.
    assert_eq!(trips, 3, "{answer}");
    let (_, trips, _) = cost(
        &h,
        &log,
        "POST",
        json!({"entity": "product", "version": 0, "attributes": {}}),
        &[],
        202,
    )
    .await;
    assert_eq!(trips, 1, "a new ULID has no older rows to look for");

    // By key: the head, then the stored versions (no head yet), then the transaction.
    let (answer, trips, _) = cost(
        &h,
        &log,
        "POST",
        json!({"pk": "PRODUCT#t1", "sk": "OLD", "version": 0}),
        &[],
        409,
    )
    .await;
    assert_eq!(
        answer["currentVersion"], 4,
        "the old row is found: {answer}"
    );
    // The README's figure: its head with what data-sync projected (one round trip of concurrent
    // reads), its rows (no head bounds them), the head written; the 409 needs no transaction.
    assert_eq!(trips, 3, "{answer}");
    let (answer, _, _) = cost(
        &h,
        &log,
        "POST",
        json!({"pk": "PRODUCT#t1", "sk": "OLD", "version": 4}),
        &[],
        202,
    )
    .await;
    assert_eq!(answer["version"], 5);
}

/// With heads `shared` (or `incomplete`) a head is a lower bound: a command reads it with what
/// data-sync projected (the history index, the data table), then the row after the highest
/// version these know, before it writes. The README's figures.
#[tokio::test]
async fn with_shared_heads_a_command_reads_above_the_head_first() {
    let (h, log) = warm().await;
    h.app
        .store
        .mark_heads(cqrs_store::HeadsState::Shared, "test")
        .await
        .unwrap();
    h.app
        .heads
        .clock
        .advance(cqrs_command_handler::heads::STATE_MAX_AGE);
    // The first command after the state's age reads it again with its TTL policy: one round trip.
    let (_, trips, ops) = cost(
        &h,
        &log,
        "POST",
        json!({"pk": "PRODUCT#t1", "sk": "S1", "version": 0}),
        &[],
        202,
    )
    .await;
    // The state and policy, then head, legacy head, history and data at once, then the rows
    // (no head), then the transaction.
    assert_eq!((trips, ops[0].as_str()), (4, "BatchGetItem"), "{ops:?}");
    let (_, trips, ops) = cost(
        &h,
        &log,
        "POST",
        json!({"pk": "PRODUCT#t1", "sk": "S2", "version": 0}),
        &[],
        202,
    )
    .await;
    assert_eq!(trips, 3, "a create: {ops:?}");
    let (_, trips, ops) = cost(
        &h,
        &log,
        "PATCH",
        json!({"pk": "PRODUCT#t1", "sk": "S2", "version": 1, "attributes": {"b": 1}}),
        &[],
        202,
    )
    .await;
    // Head and co, the row above it, the base row, the transaction.
    assert_eq!(trips, 4, "version N: {ops:?}");
    let (_, trips, ops) = cost(
        &h,
        &log,
        "POST",
        json!({"pk": "PRODUCT#t1", "sk": "S2", "version": -1}),
        &[],
        202,
    )
    .await;
    assert_eq!(trips, 4, "-1: {ops:?}");
}

#[tokio::test]
async fn the_master_data_copy_reads_each_head_once() {
    let (h, log) = warm().await;
    for code in ["a", "b", "c"] {
        let mut item = Item::example();
        item.pk = "MASTER#common".into();
        item.sk = format!("DATA#unit#{code}");
        item.id = format!("MASTER#common#DATA#unit#{code}");
        item.version = 1;
        item.tenant_code = "common".into();
        h.tables
            .client
            .put_item()
            .table_name(&h.tables.data)
            .set_item(Some(item.to_attributes().unwrap()))
            .send()
            .await
            .unwrap();
    }
    log.clear();
    let (status, report, _) = h
        .send(
            cqrs_testkit::http_event::HttpApiRequest::new("POST", "/master-data/copy")
                .header("content-type", "application/json")
                .body(b"{}")
                .claims("u1", "t1", "admin")
                .request(),
        )
        .await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(
        report["created"].as_array().map(Vec::len),
        Some(3),
        "{report}"
    );
    let head_reads = |base: &str| {
        let key = cqrs_keys::head_key("MASTER#t1", base);
        log.calls()
            .iter()
            .filter(|c| c.operation == "GetItem" && c.pk.as_deref() == Some(key.as_str()))
            .count()
    };
    for code in ["a", "b", "c"] {
        assert_eq!(head_reads(&format!("DATA#unit#{code}")), 1, "{code}");
    }
}

/// Issue 36, item 11: a new container (its caches empty) reads the heads state and the TTL policy
/// in one `BatchGetItem`, then writes: a cold create makes the calls of `floor-create`, the
/// hand-written floor (the TTL policy's `BatchGetItem`, then the transaction).
#[tokio::test]
async fn a_cold_create_makes_the_calls_of_the_floor() {
    let (h, log) = warm().await;
    for body in [
        json!({"pk": "PRODUCT#t1", "sk": "COLD", "version": 0}),
        json!({"entity": "order", "version": 0, "attributes": {"orderId": "cold", "userId": "u1", "status": "PENDING"}}),
    ] {
        // A new container on the same tables: nothing cached.
        let cold = App::new(
            h.app.store.clone(),
            cqrs_caller::CallerMode::Jwt,
            cqrs_model::Model::example(),
        );
        log.clear();
        let response =
            cqrs_command_handler::handle(&cold, event("POST", &USER_T1, &body.to_string(), &[]))
                .await;
        assert_eq!(response.status(), 202, "{body}");
        assert_eq!(
            (log.round_trips(), log.operations()),
            (
                2,
                vec!["BatchGetItem".to_string(), "TransactWriteItems".to_string()]
            ),
            "{body}"
        );
    }
}

/// A model with each kind of declared constraint (issue 38): the guards ride in the command's own
/// transaction, so a constrained create is still the transaction alone and a `version: N` its base
/// row then the transaction.
const CONSTRAINED: &str = cqrs_testkit::models::CONSTRAINED_LIBRARY;

#[tokio::test]
async fn a_constrained_create_is_one_round_trip_and_a_version_n_two() {
    let log = CallLog::default();
    let mut h = Harness::counted(&log).await;
    h.app.model = std::sync::Arc::new(cqrs_model::Model::parse(CONSTRAINED).unwrap());
    let copy = |id: &str, no: i64, version: i64| {
        json!({"entity": "copy", "version": version,
            "attributes": {"copyId": id, "isbn": "9780000000001", "copyNo": no}})
    };
    let loan = |id: &str, status: &str, version: i64| {
        json!({"entity": "loan", "version": version,
            "attributes": {"loanId": id, "memberId": "m1", "copyId": "c1", "status": status}})
    };
    // Warm the container's caches for both entities.
    for body in [copy("warm", 0, 0), copy("c1", 1, 0), loan("warm", "out", 0)] {
        let (status, answer) = h.post(&USER_T1, body).await;
        assert_eq!(status, 202, "{answer}");
    }
    let write = vec!["TransactWriteItems".to_string()];
    let (_, trips, ops) = cost(&h, &log, "POST", copy("c2", 2, 0), &[], 202).await;
    assert_eq!((trips, &ops), (1, &write), "a unique claim");
    let (_, trips, ops) = cost(&h, &log, "POST", loan("L1", "out", 0), &[], 202).await;
    assert_eq!(
        (trips, &ops),
        (1, &write),
        "a limit join and a reference check"
    );
    // A refusal of a constraint costs the same: the failed condition names it, no read.
    let (answer, trips, _) = cost(&h, &log, "POST", copy("c3", 2, 0), &[], 409).await;
    assert_eq!(answer["type"], "urn:cqrs:problem:unique-taken");
    assert_eq!(trips, 1);

    let read_write = vec!["GetItem".to_string(), "TransactWriteItems".to_string()];
    let (_, trips, ops) = cost(&h, &log, "POST", copy("c2", 5, 1), &[], 202).await;
    assert_eq!((trips, &ops), (2, &read_write), "release + claim");
    let (_, trips, ops) = cost(&h, &log, "POST", loan("L1", "returned", 1), &[], 202).await;
    assert_eq!((trips, &ops), (2, &read_write), "a leave");
}
