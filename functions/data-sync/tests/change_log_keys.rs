//! The change log's key space: with `CHANGE_LOG_TABLE` set to the data table (which the README
//! allows), its rows must never be read as an entity's items, and a deployed log's rows under the
//! old `LOG#` prefix can be moved to the new key space. Against DynamoDB Local.
// These tests pin what a sync target gets; `with_target` stays until the next major version.
#![allow(deprecated)]

mod common;

use cqrs_data_sync::DataSync;
use cqrs_data_sync::change_log::{self, ChangeLog};
use cqrs_item::Item;
use cqrs_model::Model;

use common::*;

#[tokio::test]
async fn change_log_rows_in_the_data_table_are_no_entitys_items() {
    let tables = cqrs_testkit::fresh_tables().await;
    let commands = vec![
        command("PRODUCT#t1", "P001", 1),
        command("PRODUCT#t1", "P001", 2),
        command("ORDER#t2", "ORDER#o1", 1),
    ];
    let event = commands_to_event(&tables, &commands).await;
    let store = store(&tables);
    let sync = DataSync::new(store.clone()).with_target(ChangeLog::new(store, &tables.data));
    let response = sync.handle(event).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");

    let model = Model::example();
    let entries: Vec<Item> = scan(&tables, &tables.data)
        .await
        .into_iter()
        .filter(|item| item.cpk.is_none())
        .collect();
    assert_eq!(entries.len(), commands.len(), "one entry per version");
    for entry in &entries {
        assert_eq!(
            model.entity_of_keys(&entry.pk, &entry.sk).map(|e| &e.name),
            None,
            "the change log entry {} / {} is read as an entity's item",
            entry.pk,
            entry.sk
        );
        assert!(
            entry
                .pk
                .starts_with(&format!("{}#", cqrs_keys::CHANGE_LOG_PK_PREFIX)),
            "{}",
            entry.pk
        );
    }
    // The tenant is the second segment, so the caller's tenant rules apply to the log.
    assert!(
        entries
            .iter()
            .any(|e| cqrs_keys::tenant_code(&e.pk) == Some("t2"))
    );
}

/// A deployed change log holds rows under the old `LOG#tenant#YYYY-MM` prefix:
/// `change_log::migrate_legacy` moves each of them to the new key space (same sort key), once, and
/// leaves every other row alone (a `log` entity's items, rows of no entity).
#[tokio::test]
async fn legacy_rows_move_to_the_reserved_prefix_once_and_nothing_else_moves() {
    let tables = cqrs_testkit::fresh_tables().await;
    let store = store(&tables);
    let change = cqrs_data_sync::Change::example();
    let current = change_log::entry(&change).unwrap();
    let mut legacy = current.clone();
    legacy.pk = current.pk.replacen(
        cqrs_keys::CHANGE_LOG_PK_PREFIX,
        change_log::LEGACY_PK_PREFIX,
        1,
    );
    legacy.id = cqrs_keys::generate_id(&legacy.pk, &legacy.sk);
    legacy.item_type = change_log::LEGACY_PK_PREFIX.into();
    // An item of the model's `log` entity in the same partition, and one row of no entity: kept.
    let mut log_item = command(&legacy.pk, "2026-01-02T00:00:00.000Z#e1", 1).into_data_item();
    log_item.entity = Some("log".into());
    let other = command("LOG#t1", "x", 1).into_data_item();
    for item in [&legacy, &log_item, &other] {
        assert_eq!(
            store.put_if_absent(&tables.data, item).await.unwrap(),
            cqrs_store::projection::PutIfAbsent::Written
        );
    }

    let report = change_log::migrate_legacy(&store, &tables.data)
        .await
        .unwrap();
    assert_eq!(
        (report.moved, report.already_moved, report.conflicts),
        (1, 0, 0)
    );
    let mut keys: Vec<(String, String)> = scan(&tables, &tables.data)
        .await
        .into_iter()
        .map(|i| (i.pk, i.sk))
        .collect();
    keys.sort();
    let mut want = vec![
        (current.pk.clone(), current.sk.clone()),
        (log_item.pk.clone(), log_item.sk.clone()),
        (other.pk.clone(), other.sk.clone()),
    ];
    want.sort();
    assert_eq!(keys, want);
    // The moved row is the entry data-sync writes now.
    let moved = scan(&tables, &tables.data)
        .await
        .into_iter()
        .find(|i| i.pk == current.pk)
        .unwrap();
    assert_eq!(moved, current);
    // A second run finds nothing to move.
    let again = change_log::migrate_legacy(&store, &tables.data)
        .await
        .unwrap();
    assert_eq!(
        (again.moved, again.already_moved, again.conflicts),
        (0, 0, 0)
    );
}

/// A change whose version was written with `Idempotency-Key: k-secret`.
fn keyed_change() -> cqrs_data_sync::Change {
    let mut change = cqrs_data_sync::Change::example();
    change.item.request_id = "k-secret".into();
    change
}

/// The entry of an older release: the idempotency key copied into its attributes and at its top.
fn entry_as_written_before(change: &cqrs_data_sync::Change) -> Item {
    let mut entry = change_log::entry(change).unwrap();
    entry.attributes.insert(
        "requestId".into(),
        cqrs_item::Value::from(change.item.request_id.clone()),
    );
    entry.request_id = change.item.request_id.clone();
    entry
}

/// A log entry names the version it logs, never the idempotency key that wrote it: the log may be
/// read by other callers than the writer (`common`'s log by every tenant).
#[test]
fn an_entry_holds_no_idempotency_key() {
    let entry = change_log::entry(&keyed_change()).unwrap();
    let text = serde_json::to_string(&entry).unwrap();
    assert!(!text.contains("k-secret"), "{text}");
    assert_eq!(entry.attributes["itemId"], "PRODUCT#t1#P001");
}

/// After the upgrade, a replayed record whose entry an older release wrote (with the key in its
/// attributes) finds it the same entry: no record failure.
#[tokio::test]
async fn a_replay_finds_an_entry_written_with_the_key_before_as_the_same() {
    let tables = cqrs_testkit::fresh_tables().await;
    let store = store(&tables);
    let change = keyed_change();
    let old = entry_as_written_before(&change);
    store.put_if_absent(&tables.data, &old).await.unwrap();
    let log = ChangeLog::new(store, &tables.data);
    cqrs_data_sync::SyncTarget::apply(&log, &change)
        .await
        .expect("the entry written before is this version's");
    let stored = scan(&tables, &tables.data).await;
    assert_eq!(stored, vec![old], "the stored entry is left as it is");
}

/// `migrate_legacy` moves an older entry without the idempotency key it held, and a second run
/// over a twin moved with it (by an older release's migrate) counts it as already moved.
#[tokio::test]
async fn a_legacy_entry_moves_without_its_idempotency_key() {
    let tables = cqrs_testkit::fresh_tables().await;
    let store = store(&tables);
    let change = keyed_change();
    let current = change_log::entry(&change).unwrap();
    let mut legacy = entry_as_written_before(&change);
    legacy.pk = current.pk.replacen(
        cqrs_keys::CHANGE_LOG_PK_PREFIX,
        change_log::LEGACY_PK_PREFIX,
        1,
    );
    legacy.id = cqrs_keys::generate_id(&legacy.pk, &legacy.sk);
    legacy.item_type = change_log::LEGACY_PK_PREFIX.into();
    store.put_if_absent(&tables.data, &legacy).await.unwrap();
    let report = change_log::migrate_legacy(&store, &tables.data)
        .await
        .unwrap();
    assert_eq!((report.moved, report.conflicts), (1, 0));
    let moved = scan(&tables, &tables.data).await;
    assert_eq!(moved.len(), 1);
    assert!(
        !moved[0].attributes.contains_key("requestId"),
        "{:?}",
        moved[0].attributes
    );

    // A twin an older migrate moved with the key: the same entry, so the legacy row goes.
    let tables = cqrs_testkit::fresh_tables().await;
    let store = self::store(&tables);
    let mut twin = entry_as_written_before(&change);
    twin.pk = current.pk.clone();
    twin.id = current.id.clone();
    store.put_if_absent(&tables.data, &twin).await.unwrap();
    store.put_if_absent(&tables.data, &legacy).await.unwrap();
    let report = change_log::migrate_legacy(&store, &tables.data)
        .await
        .unwrap();
    assert_eq!(
        (report.moved, report.already_moved, report.conflicts),
        (0, 1, 0)
    );
}
