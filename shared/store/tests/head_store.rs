//! The head record against DynamoDB Local: the version row, the head and the idempotency record in
//! one transaction; a moved head names the current version (ALL_OLD on the failed check); a missing
//! head is seeded from the command rows, the history index and the data table.

use cqrs_item::Item;
use cqrs_keys::add_sort_key_version;
use cqrs_store::{IdempotencyRecord, Store, StoreError, Tables};
use cqrs_testkit::TestTables;

async fn store() -> (Store, TestTables) {
    let t = cqrs_testkit::fresh_tables().await;
    let store = Store::new(
        t.client.clone(),
        Tables::new(&t.command, &t.data, &t.history, &t.idempotency),
    );
    (store, t)
}

fn version(base: &str, v: i64) -> Item {
    let mut item = Item::example();
    item.sk = add_sort_key_version(base, v);
    item.id = cqrs_keys::generate_id(&item.pk, base);
    item.version = v;
    item
}

fn record(key: &str, item: &Item) -> IdempotencyRecord {
    IdempotencyRecord {
        key: key.into(),
        fingerprint: "f".into(),
        item_pk: item.pk.clone(),
        item_sk: item.sk.clone(),
        item_id: item.id.clone(),
        version: item.version,
        ttl: 4_000_000_000,
    }
}

async fn put_raw(t: &TestTables, table: &str, item: &Item) {
    t.client
        .put_item()
        .table_name(table)
        .set_item(Some(item.to_attributes().unwrap()))
        .send()
        .await
        .unwrap();
}

#[tokio::test]
async fn the_head_moves_with_each_version_and_a_stale_write_names_the_current_one() {
    let (store, _t) = store().await;
    let v1 = version("H", 1);
    store.write_version(&v1, None, None).await.unwrap();
    assert_eq!(store.get_head(&v1.id).await.unwrap(), Some(1));

    // Creating again: the head exists, and the failed check says at which version.
    let err = store.write_version(&v1, None, None).await.unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::StaleVersion {
                latest: Some(1),
                ..
            }
        ),
        "{err}"
    );
    let v2 = version("H", 2);
    store
        .write_version(&v2, Some(1), Some(&record("k", &v2)))
        .await
        .unwrap();
    assert_eq!(store.get_head(&v1.id).await.unwrap(), Some(2));
    assert!(store.get_idempotency("k").await.unwrap().is_some());

    // Based on version 1 again (a lost race): refused, nothing written, the record untouched.
    let other = version("H", 2);
    let err = store
        .write_version(&other, Some(1), Some(&record("k2", &other)))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::StaleVersion {
                latest: Some(2),
                ..
            }
        ),
        "{err}"
    );
    assert!(store.get_idempotency("k2").await.unwrap().is_none());

    // A taken idempotency key wins over the head check.
    let v3 = version("H", 3);
    let err = store
        .write_version(&v3, Some(1), Some(&record("k", &v3)))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::IdempotencyKeyTaken(_)), "{err}");

    // Based on a version of an item without a head: StaleVersion with no version.
    let err = store
        .write_version(&version("NONE", 5), Some(4), None)
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::StaleVersion { latest: None, .. }),
        "{err}"
    );

    // The row is taken although the head allows the write (a writer that keeps no head).
    store.put_command(&version("ROW", 1), None).await.unwrap();
    let err = store
        .write_version(&version("ROW", 1), None, None)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::AlreadyExists { .. }), "{err}");
    assert_eq!(
        store.get_head(&version("ROW", 1).id).await.unwrap(),
        None,
        "all or nothing"
    );
}

#[tokio::test]
async fn a_missing_head_is_seeded_from_the_highest_stored_version() {
    let (store, t) = store().await;
    assert_eq!(
        store.latest_version("PRODUCT#t1", "NEW").await.unwrap(),
        None
    );
    assert_eq!(store.get_head("PRODUCT#t1#NEW").await.unwrap(), None);

    for v in 1..=3 {
        store.put_command(&version("ROWS", v), None).await.unwrap();
    }
    for v in 1..=12 {
        put_raw(&t, &t.history, &version("HIST", v)).await;
    }
    put_raw(&t, &t.data, &version("DATA", 7).into_data_item()).await;
    store.put_command(&version("MIXED", 2), None).await.unwrap();
    put_raw(&t, &t.data, &version("MIXED", 9).into_data_item()).await;
    put_raw(&t, &t.history, &version("MIXED", 8)).await;

    for (base, highest) in [("ROWS", 3), ("HIST", 12), ("DATA", 7), ("MIXED", 9)] {
        assert_eq!(
            store
                .highest_stored_version("PRODUCT#t1", base)
                .await
                .unwrap(),
            Some(highest),
            "{base}"
        );
        assert_eq!(
            store.latest_version("PRODUCT#t1", base).await.unwrap(),
            Some(highest),
            "{base}"
        );
        let id = cqrs_keys::generate_id("PRODUCT#t1", base);
        assert_eq!(store.get_head(&id).await.unwrap(), Some(highest), "{base}");
    }
    // Once seeded, the head is the truth: a later row of an old writer does not move it.
    store.put_command(&version("ROWS", 4), None).await.unwrap();
    assert_eq!(
        store.latest_version("PRODUCT#t1", "ROWS").await.unwrap(),
        Some(3)
    );
}
