//! The command side of the store against DynamoDB Local: conditional puts, the idempotency
//! transaction, and reading the latest version in numeric order.

use cqrs_item::Item;
use cqrs_keys::add_sort_key_version;
use cqrs_store::{IdempotencyRecord, Store, StoreError, Tables};

async fn store() -> Store {
    let t = cqrs_testkit::fresh_tables().await;
    Store::new(
        t.client.clone(),
        Tables::new(&t.command, &t.data, &t.history, &t.idempotency),
    )
}

fn version(base: &str, v: i64) -> Item {
    let mut item = Item::example();
    item.sk = add_sort_key_version(base, v);
    item.id = cqrs_keys::generate_id(&item.pk, base);
    item.version = v;
    item
}

fn record(key: &str, item: &Item, ttl: i64) -> IdempotencyRecord {
    IdempotencyRecord {
        key: key.into(),
        fingerprint: "f".into(),
        item_pk: item.pk.clone(),
        item_sk: item.sk.clone(),
        item_id: item.id.clone(),
        version: item.version,
        ttl,
    }
}

const FAR_FUTURE: i64 = 4_000_000_000;

#[tokio::test]
async fn a_taken_version_is_refused_and_not_overwritten() {
    let store = store().await;
    let first = version("P001", 1);
    store.put_command(&first, None).await.unwrap();

    let mut second = first.clone();
    second.name = "overwrite attempt".into();
    let err = store.put_command(&second, None).await.unwrap_err();
    assert!(
        matches!(err, StoreError::AlreadyExists { ref sk, .. } if sk == "P001@1"),
        "{err}"
    );
    let stored = store
        .get_command("PRODUCT#t1", "P001", 1)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored, first);
    assert!(
        store
            .get_command("PRODUCT#t1", "P001", 2)
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn latest_version_is_numeric_and_ignores_other_items() {
    let store = store().await;
    assert_eq!(
        store
            .latest_command_version("PRODUCT#t1", "A")
            .await
            .unwrap(),
        None
    );
    for v in 1..=11 {
        store.put_command(&version("A", v), None).await.unwrap();
    }
    // Other items whose sort keys start like ours.
    store.put_command(&version("AB", 50), None).await.unwrap();
    store.put_command(&version("A#x", 60), None).await.unwrap();
    assert_eq!(
        store
            .latest_command_version("PRODUCT#t1", "A")
            .await
            .unwrap(),
        Some(11)
    );
    assert_eq!(
        store
            .latest_command_version("PRODUCT#t1", "AB")
            .await
            .unwrap(),
        Some(50)
    );
    assert_eq!(
        store
            .latest_command_version("PRODUCT#t2", "A")
            .await
            .unwrap(),
        None
    );
}

#[tokio::test]
async fn version_and_idempotency_record_are_written_together_or_not_at_all() {
    let store = store().await;
    let v1 = version("I", 1);
    store
        .put_command(&v1, Some(&record("k1", &v1, FAR_FUTURE)))
        .await
        .unwrap();
    assert_eq!(
        store.get_idempotency("k1").await.unwrap().unwrap().item_sk,
        "I@1"
    );

    // The same key again: refused as taken, and the version is not written.
    let v2 = version("I", 2);
    let err = store
        .put_command(&v2, Some(&record("k1", &v2, FAR_FUTURE)))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::IdempotencyKeyTaken(_)), "{err}");
    assert!(
        store
            .get_command("PRODUCT#t1", "I", 2)
            .await
            .unwrap()
            .is_none()
    );

    // A taken version with a fresh key: refused as a conflict, and the key stays free.
    let err = store
        .put_command(&v1, Some(&record("k2", &v1, FAR_FUTURE)))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::AlreadyExists { .. }), "{err}");
    assert!(store.get_idempotency("k2").await.unwrap().is_none());
}

#[tokio::test]
async fn an_expired_idempotency_record_is_forgotten() {
    let store = store().await;
    let v1 = version("E", 1);
    store
        .put_command(&v1, Some(&record("old", &v1, 1)))
        .await
        .unwrap();
    // Expired but not yet removed by TTL: reads as absent, and the key may be used again.
    assert!(store.get_idempotency("old").await.unwrap().is_none());
    let v2 = version("E", 2);
    store
        .put_command(&v2, Some(&record("old", &v2, FAR_FUTURE)))
        .await
        .unwrap();
    assert_eq!(
        store.get_idempotency("old").await.unwrap().unwrap().version,
        2
    );
}

#[tokio::test]
async fn a_missing_table_is_a_dynamo_error_not_a_conflict() {
    let t = cqrs_testkit::fresh_tables().await;
    let store = Store::new(
        t.client.clone(),
        Tables::new("no-such-table", &t.data, &t.history, &t.idempotency),
    );
    let err = store.put_command(&version("X", 1), None).await.unwrap_err();
    assert!(matches!(err, StoreError::Dynamo(_)), "{err}");
}
