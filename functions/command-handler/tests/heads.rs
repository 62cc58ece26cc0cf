//! Heads through HTTP, against DynamoDB Local: with tables another writer shares (heads
//! `shared`) a head is a lower bound and a command builds on the versions that writer wrote;
//! an item whose head key cannot exist (over DynamoDB's 2048-byte key limit) is refused with a
//! 400 naming the limit, never a 500.

mod common;

use common::{Harness, USER_T1, command};
use cqrs_item::Item;
use cqrs_keys::add_sort_key_version;
use cqrs_store::HeadsState;
use serde_json::json;

/// Version `v` of `pk` / `base` as a writer that keeps no heads (mbc-cqrs-serverless) writes it.
fn foreign(pk: &str, base: &str, v: i64) -> Item {
    let mut item = Item::example();
    item.pk = pk.to_string();
    item.sk = add_sort_key_version(base, v);
    item.id = cqrs_keys::generate_id(pk, base);
    item.version = v;
    item.name = format!("written by the other writer at {v}");
    item
}

/// Issue 36, item 2: with heads `shared`, after the other writer wrote v2 over our v1 the head
/// stayed at 1: `PATCH` on 2 was a 404, `-1` a 409 on every try, and with row `@2` expired `-1`
/// wrote a second v2.
#[tokio::test]
async fn with_shared_heads_a_command_builds_on_what_the_other_writer_wrote() {
    let h = Harness::new().await;
    h.app
        .store
        .mark_heads(HeadsState::Shared, "test")
        .await
        .unwrap();
    let (status, answer) = h.post(&USER_T1, command("PRODUCT#t1", "S1", 0)).await;
    assert_eq!(
        (status, answer["version"].clone()),
        (202, json!(1)),
        "{answer}"
    );

    // The other writer writes v2 over our v1: PATCH on 2 merges into it.
    h.app
        .store
        .put_command(&foreign("PRODUCT#t1", "S1", 2), None)
        .await
        .unwrap();
    let (status, answer) = h
        .patch(
            &USER_T1,
            json!({"pk": "PRODUCT#t1", "sk": "S1", "version": 2, "attributes": {"b": 1}}),
        )
        .await;
    assert_eq!(
        (status, answer["version"].clone()),
        (202, json!(3)),
        "{answer}"
    );
    let stored = h.versions("PRODUCT#t1", "S1").await;
    assert_eq!(
        stored.last().unwrap().name,
        "written by the other writer at 2"
    );

    // It writes v4: `-1` writes 5, at the first try.
    h.app
        .store
        .put_command(&foreign("PRODUCT#t1", "S1", 4), None)
        .await
        .unwrap();
    let (status, answer) = h
        .post(
            &USER_T1,
            json!({"pk": "PRODUCT#t1", "sk": "S1", "version": -1, "name": "ours"}),
        )
        .await;
    assert_eq!(
        (status, answer["version"].clone()),
        (202, json!(5)),
        "{answer}"
    );

    // Our v1, its v2, projected by data-sync, and then its row expired (deleted by TTL): `-1`
    // writes 3, never a second 2.
    let (status, _) = h.post(&USER_T1, command("PRODUCT#t1", "S2", 0)).await;
    assert_eq!(status, 202);
    let v2 = foreign("PRODUCT#t1", "S2", 2);
    for (table, item) in [
        (&h.tables.data, v2.clone().into_data_item()),
        (&h.tables.history, v2.clone()),
    ] {
        h.tables
            .client
            .put_item()
            .table_name(table)
            .set_item(Some(item.to_attributes().unwrap()))
            .send()
            .await
            .unwrap();
    }
    let (status, answer) = h
        .post(
            &USER_T1,
            json!({"pk": "PRODUCT#t1", "sk": "S2", "version": -1}),
        )
        .await;
    assert_eq!(
        (status, answer["version"].clone()),
        (202, json!(3)),
        "{answer}"
    );
    let versions: Vec<i64> = h
        .versions("PRODUCT#t1", "S2")
        .await
        .iter()
        .map(|i| i.version)
        .collect();
    assert_eq!(versions, [1, 3], "no second v2");
}

/// Issue 36, item 5: an item whose id is 2044 to 2048 bytes (written before heads, or by the
/// other writer) has a head key (`HEAD#pk@sk`, 5 bytes longer) DynamoDB cannot store. A command
/// on it is refused: without a head, no version number could be kept unique. A 400 that names
/// the key and the limit, nothing written, whatever the version and method.
#[tokio::test]
async fn a_command_on_an_item_whose_head_key_cannot_exist_is_a_400() {
    let h = Harness::new().await;
    let pk = format!("PRODUCT#t1#{}", "x".repeat(1034));
    let sk = "s".repeat(1000);
    let id = cqrs_keys::generate_id(&pk, &sk);
    assert_eq!(id.len(), 2046, "an id DynamoDB stores");
    assert!(cqrs_keys::head_key(&pk, &sk).len() > 2048);
    h.app
        .store
        .put_command(&foreign(&pk, &sk, 1), None)
        .await
        .unwrap();
    for (method, version) in [
        ("POST", 0),
        ("POST", 1),
        ("POST", -1),
        ("PATCH", 1),
        ("PATCH", -1),
    ] {
        let body = json!({"pk": pk, "sk": sk, "version": version, "attributes": {"a": 1}});
        let (status, answer, _) = h
            .send(common::event(method, &USER_T1, &body.to_string(), &[]))
            .await;
        assert_eq!(status, 400, "{method} {version}: {answer}");
        assert_eq!(answer["field"], "sk", "{answer}");
        let detail = answer["detail"].as_str().unwrap_or_default();
        assert!(detail.contains("2048"), "{detail}");
    }
    assert_eq!(h.versions(&pk, &sk).await.len(), 1, "nothing written");
}

/// Issue 36, item 3: a warm container that read `complete` kept it for good, so `cqrs heads mark
/// shared` never reached it. It reads the state again after `STATE_MAX_AGE` (the cache's clock
/// moved forward instead of waiting): a command that starts later is decided on the mark.
#[tokio::test]
async fn a_mark_reaches_a_warm_container_within_the_state_max_age() {
    use cqrs_command_handler::heads::STATE_MAX_AGE;
    use std::time::Duration;

    let h = Harness::new().await;
    // The container's clock stands still: only `advance` moves it.
    h.app.heads.clock.freeze();
    let (status, _) = h.post(&USER_T1, command("PRODUCT#t1", "WARM", 0)).await;
    assert_eq!(status, 202);
    assert_eq!(
        h.app.store.heads_state().await.unwrap(),
        HeadsState::Complete,
        "empty tables at the first command"
    );
    // The operator marks the tables shared; the other writer writes v1 of an item, no head.
    h.app
        .store
        .mark_heads(HeadsState::Shared, "cqrs heads mark")
        .await
        .unwrap();
    h.app
        .store
        .put_command(&foreign("PRODUCT#t1", "M1", 1), None)
        .await
        .unwrap();
    let patch = json!({"pk": "PRODUCT#t1", "sk": "M1", "version": 1, "attributes": {"b": 1}});
    // Within the state's age the container still decides on `complete`: version 1 has no head,
    // so the write's condition refuses it (nothing written, never a duplicate version).
    h.app
        .heads
        .clock
        .advance(STATE_MAX_AGE - Duration::from_secs(1));
    let (status, answer) = h.patch(&USER_T1, patch.clone()).await;
    assert_eq!(status, 404, "{answer}");
    // Once it is that old, the state is read again: shared, and the command builds on v1.
    h.app.heads.clock.advance(Duration::from_secs(1));
    let (status, answer) = h.patch(&USER_T1, patch).await;
    assert_eq!(
        (status, answer["version"].clone()),
        (202, json!(2)),
        "{answer}"
    );
}
