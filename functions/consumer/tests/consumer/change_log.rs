//! The framework's change log consumer (`cqrs_consumer::change_log`) against DynamoDB Local: the
//! entries it writes into the data table are those data-sync's target writes for the same
//! versions, one per version (a gap filled from the history table included), and a replay writes
//! none twice.

use cqrs_consumer::marker::{DynamoMarkers, MemoryMarkers};
use cqrs_consumer::park::MemoryPark;
use cqrs_consumer::{Consumer, Runtime, change_log};
use cqrs_item::Item;
use cqrs_store::projection::{DataWrite, HistoryWrite};
use cqrs_store::{Store, Tables};

use crate::common::{batch, event, message, product, versions};

/// The change log partition of tenant t1, January 2026 (the products' `updatedAt`), in `sk` order.
async fn entries(t: &cqrs_testkit::TestTables) -> Vec<Item> {
    let answer = t
        .client
        .query()
        .table_name(&t.data)
        .key_condition_expression("pk = :pk")
        .expression_attribute_values(
            ":pk",
            aws_sdk_dynamodb::types::AttributeValue::S("CQRS_CHANGE_LOG#t1#2026-01".into()),
        )
        .consistent_read(true)
        .send()
        .await
        .unwrap();
    answer
        .items()
        .iter()
        .map(|row| Item::from_attributes(row.clone()).unwrap())
        .collect()
}

#[tokio::test]
async fn the_change_log_consumer_writes_data_syncs_entries_once_per_version_gap_included() {
    let t = cqrs_testkit::fresh_tables().await;
    let store = Store::new(
        t.client.clone(),
        Tables::new(&t.command, &t.data, &t.history, &t.idempotency),
    );
    let written = store.put_history_batch(&versions("P001", 3)).await;
    assert!(
        written
            .iter()
            .all(|w| matches!(w, Ok(HistoryWrite::Written)))
    );
    // The function's own construction: the data table from DATA_TABLE, the client from the
    // environment DynamoDB Local's harness set.
    let data = t.data.clone();
    let consumer = change_log::from_lookup(move |name| match name {
        "DATA_TABLE" => Some(data.clone()),
        "CHANGE_LOG_TABLE" => None,
        _ => std::env::var(name).ok(),
    })
    .unwrap();
    assert_eq!(consumer.name(), "change-log");
    let runtime = Runtime::new(
        consumer,
        crate::common::feed(),
        store.clone(),
        DynamoMarkers::new(t.client.clone(), &t.idempotency),
        MemoryPark::default(),
    );

    // v1, then v3: v2 is filled from the history table.
    let (answer, counts) = runtime
        .handle_counted(batch(vec![
            message("m1", &event("P001", 1), 1),
            message("m3", &event("P001", 3), 1),
        ]))
        .await;
    assert!(answer.batch_item_failures.is_empty(), "{answer:?}");
    assert_eq!(counts.handled, 3, "{counts:?}");
    let logged = entries(&t).await;
    let logged_versions: Vec<_> = logged
        .iter()
        .map(|e| e.attributes["version"].clone())
        .collect();
    assert_eq!(logged_versions, [1, 2, 3].map(cqrs_item::Value::from));

    // Each is the entry data-sync's target writes for that version (same key, same attributes).
    for (stored, v) in logged.iter().zip(1..) {
        let change = cqrs_data_sync::Change {
            item: product("P001", v),
            data: DataWrite::Written,
            sequence_number: format!("{v}00"),
            event_id: format!("stream-{v}"),
            approximate_creation: chrono::Utc::now(),
        };
        let expected = cqrs_data_sync::change_log::entry(&change).unwrap();
        assert_eq!((&stored.pk, &stored.sk), (&expected.pk, &expected.sk));
        assert!(
            cqrs_data_sync::change_log::same_entry(stored, &expected),
            "v{v}: {stored:?}"
        );
        assert_eq!(
            stored.attributes["sk"],
            cqrs_item::Value::from(format!("P001@{v}"))
        );
    }

    // A replay (markers lost: every version handled again) writes nothing twice and fails nothing.
    let data = t.data.clone();
    let again = Runtime::new(
        change_log::from_lookup(move |name| match name {
            "DATA_TABLE" => Some(data.clone()),
            _ => std::env::var(name).ok(),
        })
        .unwrap(),
        crate::common::feed(),
        store,
        MemoryMarkers::default(),
        MemoryPark::default(),
    );
    let events = (1..=3)
        .map(|v| message(&format!("r{v}"), &event("P001", v), 1))
        .collect();
    let (answer, counts) = again.handle_counted(batch(events)).await;
    assert!(answer.batch_item_failures.is_empty(), "{answer:?}");
    assert_eq!(counts.handled, 3, "{counts:?}");
    assert_eq!(
        entries(&t).await,
        logged,
        "the same three entries, untouched"
    );
}
