//! The change log's key space: with `CHANGE_LOG_TABLE` set to the data table (which the README
//! allows), its rows must never be read as an entity's items, and a deployed log's rows under the
//! old `LOG#` prefix can be moved to the new key space. Against DynamoDB Local.

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
