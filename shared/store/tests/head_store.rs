//! The head record against DynamoDB Local: the version row, the head and the idempotency record in
//! one transaction; a moved head names the current version (ALL_OLD on the failed check) and a
//! taken idempotency key the first request's record; a missing head is seeded from the command
//! rows, the history index and the data table, and from a legacy head only when no other item with
//! the same id holds its version; two items that share an id have a head each; the heads state.

use cqrs_item::Item;
use cqrs_keys::add_sort_key_version;
use cqrs_store::{HeadsState, IdempotencyRecord, Store, StoreError, Tables};
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
    version_in("PRODUCT#t1", base, v)
}

fn version_in(pk: &str, base: &str, v: i64) -> Item {
    let mut item = Item::example();
    item.pk = pk.to_string();
    item.sk = add_sort_key_version(base, v);
    item.id = cqrs_keys::generate_id(pk, base);
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
    assert_eq!(store.get_head(&v1.pk, &v1.sk).await.unwrap(), Some(1));

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
    assert_eq!(store.get_head(&v1.pk, &v1.sk).await.unwrap(), Some(2));
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

    // A taken idempotency key wins over the head check, and the failed condition hands back the
    // first request's record: no read needed to answer the retry.
    let v3 = version("H", 3);
    let err = store
        .write_version(&v3, Some(1), Some(&record("k", &v3)))
        .await
        .unwrap_err();
    match err {
        StoreError::IdempotencyReplay(first) => assert_eq!(*first, record("k", &v2)),
        other => panic!("expected the first request's record, got {other}"),
    }

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
        store.get_head("PRODUCT#t1", "ROW").await.unwrap(),
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
    assert_eq!(store.get_head("PRODUCT#t1", "NEW").await.unwrap(), None);

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
                .unwrap()
                .highest(),
            Some(highest),
            "{base}"
        );
        assert_eq!(
            store.latest_version("PRODUCT#t1", base).await.unwrap(),
            Some(highest),
            "{base}"
        );
        assert_eq!(
            store.get_head("PRODUCT#t1", base).await.unwrap(),
            Some(highest),
            "{base}"
        );
    }
    // Issue 36, item 2: a head is a lower bound, never the answer. A later row of a writer that
    // keeps no head (mbc-cqrs-serverless, `Store::put_command`) is found above it, and the head
    // is raised to it, so that the next write's condition (`latest = 4`) holds.
    store.put_command(&version("ROWS", 4), None).await.unwrap();
    assert_eq!(
        store.latest_version("PRODUCT#t1", "ROWS").await.unwrap(),
        Some(4),
        "a row above the head"
    );
    assert_eq!(store.get_head("PRODUCT#t1", "ROWS").await.unwrap(), Some(4));
    // A version that writer wrote whose row is gone (expired) but which data-sync projected.
    put_raw(&t, &t.data, &version("ROWS", 6).into_data_item()).await;
    put_raw(&t, &t.history, &version("ROWS", 6)).await;
    assert_eq!(
        store.latest_version("PRODUCT#t1", "ROWS").await.unwrap(),
        Some(6),
        "a projected version above the head"
    );
    // The next version is unique: written on top of 6, never a second 5 or 6.
    store
        .write_version(&version("ROWS", 7), Some(6), None)
        .await
        .unwrap();
    assert_eq!(
        store.latest_version("PRODUCT#t1", "ROWS").await.unwrap(),
        Some(7)
    );
}

/// Review finding: `("ORDER#t1", "ORDER#o1")` and `("ORDER#t1#ORDER", "o1")` share the id
/// `ORDER#t1#ORDER#o1`; keyed by the id, they shared one head and corrupted each other's versions.
#[tokio::test]
async fn two_items_that_share_an_id_have_a_head_each() {
    let (store, _t) = store().await;
    let order = version_in("ORDER#t1", "ORDER#o1", 1);
    let other = version_in("ORDER#t1#ORDER", "o1", 1);
    assert_eq!(order.id, other.id, "the two items share an id");
    store.write_version(&order, None, None).await.unwrap();
    // Creating the other item: it never existed, so this is no conflict.
    store.write_version(&other, None, None).await.unwrap();
    store
        .write_version(&version_in("ORDER#t1#ORDER", "o1", 2), Some(1), None)
        .await
        .unwrap();
    assert_eq!(
        store.get_head("ORDER#t1", "ORDER#o1").await.unwrap(),
        Some(1)
    );
    assert_eq!(
        store.get_head("ORDER#t1#ORDER", "o1").await.unwrap(),
        Some(2)
    );
    // The order's next version is still 2.
    store
        .write_version(&version_in("ORDER#t1", "ORDER#o1", 2), Some(1), None)
        .await
        .unwrap();
}

/// The history seed reads the id index, which two items can share: only this item's versions
/// count, and the filter on `pk` comes after the page's limit, so the read pages.
#[tokio::test]
async fn the_history_seed_counts_only_this_items_versions() {
    let (store, t) = store().await;
    for v in 1..=12 {
        put_raw(&t, &t.history, &version_in("ORDER#t1", "ORDER#o1", v)).await;
    }
    for v in 1..=2 {
        put_raw(&t, &t.history, &version_in("ORDER#t1#ORDER", "o1", v)).await;
    }
    let stored = store
        .highest_stored_version("ORDER#t1#ORDER", "o1")
        .await
        .unwrap();
    assert_eq!(stored.history, Some(2));
    assert_eq!(
        store
            .highest_stored_version("ORDER#t1", "ORDER#o1")
            .await
            .unwrap()
            .history,
        Some(12)
    );
    assert!(
        store
            .other_item_holds(
                "ORDER#t1#ORDER",
                &version_in("ORDER#t1#ORDER", "o1", 1).id,
                12
            )
            .await
            .unwrap()
    );
    assert!(
        !store
            .other_item_holds("ORDER#t1", &version_in("ORDER#t1", "ORDER#o1", 1).id, 3)
            .await
            .unwrap()
    );
}

async fn put_legacy_head(t: &TestTables, id: &str, latest: i64) {
    t.client
        .put_item()
        .table_name(&t.idempotency)
        .item(
            "pk",
            aws_sdk_dynamodb::types::AttributeValue::S(cqrs_keys::legacy_head_key(id)),
        )
        .item(
            "latest",
            aws_sdk_dynamodb::types::AttributeValue::N(latest.to_string()),
        )
        .send()
        .await
        .unwrap();
}

/// A deployed table has heads under the old key. A legacy head seeds the new one, unless another
/// item with the same id holds its version: then it is that item's, and copying it would make
/// this item's real version unwritable.
#[tokio::test]
async fn a_legacy_head_seeds_only_the_item_it_belongs_to() {
    let (store, t) = store().await;
    // Collided: the order is at 5, the other item at 2, the old shared head says 5.
    for v in 1..=5 {
        put_raw(&t, &t.history, &version_in("ORDER#t1", "ORDER#o1", v)).await;
    }
    for v in 1..=2 {
        put_raw(&t, &t.history, &version_in("ORDER#t1#ORDER", "o1", v)).await;
    }
    let shared_id = cqrs_keys::generate_id("ORDER#t1", "ORDER#o1");
    put_legacy_head(&t, &shared_id, 5).await;
    assert_eq!(
        store.latest_version("ORDER#t1#ORDER", "o1").await.unwrap(),
        Some(2)
    );
    assert_eq!(
        store.latest_version("ORDER#t1", "ORDER#o1").await.unwrap(),
        Some(5)
    );
    // Not collided: the legacy head knows of versions whose rows and history are gone.
    store.put_command(&version("OLD", 3), None).await.unwrap();
    put_legacy_head(&t, &cqrs_keys::generate_id("PRODUCT#t1", "OLD"), 7).await;
    assert_eq!(
        store.latest_version("PRODUCT#t1", "OLD").await.unwrap(),
        Some(7)
    );
    assert_eq!(store.get_head("PRODUCT#t1", "OLD").await.unwrap(), Some(7));
}

#[tokio::test]
async fn a_head_is_only_ever_raised() {
    let (store, _t) = store().await;
    assert!(store.raise_head("PRODUCT#t1", "R", 3).await.unwrap());
    assert!(!store.raise_head("PRODUCT#t1", "R", 2).await.unwrap());
    assert!(!store.raise_head("PRODUCT#t1", "R", 3).await.unwrap());
    assert_eq!(store.get_head("PRODUCT#t1", "R").await.unwrap(), Some(3));
    assert!(store.raise_head("PRODUCT#t1", "R", 4).await.unwrap());
    // A writer based on the raised-over version loses its race.
    let err = store
        .write_version(&version("R", 4), Some(3), None)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::StaleVersion {
                latest: Some(4),
                ..
            }
        ),
        "{err}"
    );
}

#[tokio::test]
async fn empty_tables_start_complete_and_shared_tables_never_are() {
    let (store, _t) = store().await;
    assert_eq!(store.heads_state().await.unwrap(), HeadsState::Incomplete);
    assert_eq!(
        store.complete_heads_if_empty().await.unwrap(),
        HeadsState::Complete
    );
    assert_eq!(store.heads_state().await.unwrap(), HeadsState::Complete);

    // Tables that hold rows are not complete until someone says so.
    let (store, _t) = self::store().await;
    store.put_command(&version("ROW", 1), None).await.unwrap();
    assert_eq!(
        store.complete_heads_if_empty().await.unwrap(),
        HeadsState::Incomplete
    );
    assert_eq!(store.heads_state().await.unwrap(), HeadsState::Incomplete);

    // Shared stays shared: neither the seed's mark nor an empty table completes it.
    let (store, _t) = self::store().await;
    store.mark_heads(HeadsState::Shared, "test").await.unwrap();
    assert_eq!(
        store
            .mark_heads(HeadsState::Complete, "test")
            .await
            .unwrap(),
        HeadsState::Shared
    );
    assert_eq!(
        store.complete_heads_if_empty().await.unwrap(),
        HeadsState::Shared
    );
    assert_eq!(
        store
            .mark_heads(HeadsState::Incomplete, "test")
            .await
            .unwrap(),
        HeadsState::Incomplete
    );
    assert_eq!(
        store
            .mark_heads(HeadsState::Complete, "test")
            .await
            .unwrap(),
        HeadsState::Complete
    );
}

async fn put_head(t: &TestTables, key: String) {
    t.client
        .put_item()
        .table_name(&t.idempotency)
        .item("pk", aws_sdk_dynamodb::types::AttributeValue::S(key))
        .item(
            "latest",
            aws_sdk_dynamodb::types::AttributeValue::N("3".into()),
        )
        .send()
        .await
        .unwrap();
}

/// Issue 36, item 8: the tables are empty only when no table holds a version and no head (legacy
/// `HEAD#id` included) remembers one: a legacy head whose rows, history and data are all gone
/// still says which versions were written, so the heads are not complete until the seed moved it.
#[tokio::test]
async fn a_remembered_head_keeps_the_heads_incomplete() {
    let (store, t) = store().await;
    put_legacy_head(&t, &cqrs_keys::generate_id("PRODUCT#t1", "GONE"), 4).await;
    assert_eq!(
        store.complete_heads_if_empty().await.unwrap(),
        HeadsState::Incomplete,
        "a legacy head alone"
    );
    assert_eq!(store.heads_state().await.unwrap(), HeadsState::Incomplete);

    let (store, t) = self::store().await;
    put_head(&t, cqrs_keys::head_key("PRODUCT#t1", "GONE")).await;
    assert_eq!(
        store.complete_heads_if_empty().await.unwrap(),
        HeadsState::Incomplete,
        "a head alone"
    );

    let (store, t) = self::store().await;
    put_raw(&t, &t.history, &version("HIST", 2)).await;
    assert_eq!(
        store.complete_heads_if_empty().await.unwrap(),
        HeadsState::Incomplete,
        "history alone"
    );

    // What it decides on cannot be stale: every read is strongly consistent.
    let log = cqrs_testkit::round_trips::CallLog::default();
    let (_, t) = self::store().await;
    let counted = Store::new(
        log.client(&t.client),
        Tables::new(&t.command, &t.data, &t.history, &t.idempotency),
    );
    assert_eq!(
        counted.complete_heads_if_empty().await.unwrap(),
        HeadsState::Complete
    );
    let reads: Vec<_> = log
        .calls()
        .into_iter()
        .filter(|c| c.operation != "PutItem")
        .collect();
    let scanned: Vec<_> = reads
        .iter()
        .filter(|c| c.operation == "Scan")
        .filter_map(|c| c.table.clone())
        .collect();
    for table in [&t.command, &t.data, &t.history, &t.idempotency] {
        assert!(scanned.contains(table), "{table} scanned: {reads:?}");
    }
    assert!(
        reads.iter().all(|c| c.consistent == Some(true)),
        "{reads:?}"
    );

    // Records that are no heads (an idempotency record, a counter) leave the tables empty.
    let (store, t) = self::store().await;
    put_head(&t, "0f1e2d3c4b5a".into()).await;
    put_head(&t, cqrs_keys::counter_key("t1", "loans#m1")).await;
    assert_eq!(
        store.complete_heads_if_empty().await.unwrap(),
        HeadsState::Complete
    );
}

/// Issue 36, item 11: the heads state and a TTL policy in one strongly consistent `BatchGetItem`
/// across the idempotency and data tables, with the cascade of `Store::ttl_policy`.
#[tokio::test]
async fn the_heads_state_and_a_ttl_policy_are_one_batch_read() {
    use cqrs_store::settings::Source;
    let log = cqrs_testkit::round_trips::CallLog::default();
    let (_, t) = store().await;
    let store = Store::new(
        log.client(&t.client),
        Tables::new(&t.command, &t.data, &t.history, &t.idempotency),
    );
    let now = 1_700_000_000;
    let policy = |tenant: &str, days: i64| {
        let mut item = Item::example();
        item.pk = cqrs_keys::master_pk(Some(tenant));
        item.sk = "TTL#order".into();
        item.id = cqrs_keys::generate_id(&item.pk, &item.sk);
        item.ttl = None;
        item.attributes
            .insert("days".into(), cqrs_item::Value::from(days));
        item
    };
    let read = || store.heads_state_with_ttl_policy("t1", "order", now);
    assert_eq!(read().await.unwrap(), (HeadsState::Incomplete, None));
    put_raw(&t, &t.data, &policy("common", 30)).await;
    store.mark_heads(HeadsState::Shared, "test").await.unwrap();
    let common = cqrs_store::ttl_policy::TtlPolicy {
        days: 30,
        source: Source::Common,
    };
    assert_eq!(read().await.unwrap(), (HeadsState::Shared, Some(common)));
    assert_eq!(
        store.ttl_policy("t1", "order", now).await.unwrap(),
        Some(common)
    );
    put_raw(&t, &t.data, &policy("t1", 3)).await;
    let mut deleted = policy("t2", 5);
    deleted.is_deleted = true;
    put_raw(&t, &t.data, &deleted).await;
    store
        .mark_heads(HeadsState::Incomplete, "test")
        .await
        .unwrap();
    store
        .mark_heads(HeadsState::Complete, "test")
        .await
        .unwrap();
    log.clear();
    assert_eq!(
        read().await.unwrap(),
        (
            HeadsState::Complete,
            Some(cqrs_store::ttl_policy::TtlPolicy {
                days: 3,
                source: Source::Tenant
            })
        )
    );
    let calls = log.calls();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(
        (calls[0].operation.as_str(), calls[0].consistent),
        ("BatchGetItem", Some(true))
    );
    // A soft-deleted tenant policy: common's applies again. `common` itself: one key.
    assert_eq!(
        store
            .heads_state_with_ttl_policy("t2", "order", now)
            .await
            .unwrap()
            .1,
        Some(common)
    );
    assert_eq!(
        store
            .heads_state_with_ttl_policy("common", "order", now)
            .await
            .unwrap()
            .1,
        Some(common)
    );
}

/// Issue 36, item 5: an item whose id is 2044 to 2048 bytes has a head key DynamoDB cannot
/// store. It has no head (the key is never sent), its latest version comes from the stored
/// versions alone, and writing its head is an error that names the limit, not DynamoDB's
/// refusal.
#[tokio::test]
async fn an_item_whose_head_key_cannot_exist_has_no_head() {
    let (store, t) = store().await;
    let pk = format!("PRODUCT#t1#{}", "x".repeat(1034));
    let sk = "s".repeat(1000);
    assert!(cqrs_keys::head_key(&pk, &sk).len() > 2048);
    for v in 1..=2 {
        store
            .put_command(&version_in(&pk, &sk, v), None)
            .await
            .unwrap();
    }
    put_raw(&t, &t.history, &version_in(&pk, &sk, 3)).await;
    assert_eq!(store.get_head(&pk, &sk).await.unwrap(), None);
    assert_eq!(
        store
            .get_legacy_head(&cqrs_keys::generate_id(&pk, &sk))
            .await
            .unwrap(),
        None
    );
    assert_eq!(store.latest_version(&pk, &sk).await.unwrap(), Some(3));
    let err = store.raise_head(&pk, &sk, 3).await.unwrap_err();
    assert!(err.to_string().contains("2048"), "{err}");
    assert!(!err.is_transient(), "{err}");
    let err = store
        .write_version(&version_in(&pk, &sk, 4), Some(3), None)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("2048"), "{err}");
    assert_eq!(
        store.latest_command_version(&pk, &sk).await.unwrap(),
        Some(2),
        "nothing written"
    );
}
