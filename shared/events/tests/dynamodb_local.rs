//! The feed against DynamoDB Local: versions written through the projection's own writes
//! (`put_history_batch`, `put_data_if_newer`), the history read back with the store's consistent
//! reads, the data table's real stream (`NEW_AND_OLD_IMAGES`) as Lambda would deliver it.

mod common;

use std::time::Duration;

use common::{data, feed, product, record, row, summary};
use cqrs_events::{FeedError, Removal, events_from_batch};
use cqrs_item::Item;
use cqrs_store::projection::{DataWrite, HistoryWrite};
use cqrs_store::{Store, Tables};

async fn store() -> (Store, cqrs_testkit::TestTables) {
    let t = cqrs_testkit::fresh_tables().await;
    let store = Store::new(
        t.client.clone(),
        Tables::new(&t.command, &t.data, &t.history, &t.idempotency),
    );
    (store, t)
}

/// Writes `versions` into the history table as data-sync does (one batch write).
async fn history(store: &Store, versions: &[Item]) {
    let written = store.put_history_batch(versions).await;
    assert!(
        written
            .iter()
            .all(|w| matches!(w, Ok(HistoryWrite::Written))),
        "{written:?}"
    );
}

#[tokio::test]
async fn a_record_jumping_from_1_to_5_yields_2_3_4_5_in_order_from_the_history_table() {
    let (store, _t) = store().await;
    let versions: Vec<Item> = (1..=5).map(|v| product("P001", v)).collect();
    history(&store, &versions).await;
    // The data table holds version 5 (data-sync collapsed 2..5 into one write).
    assert_eq!(
        store.put_data_if_newer(&versions[0]).await.unwrap(),
        DataWrite::Written
    );
    assert_eq!(
        store.put_data_if_newer(&versions[4]).await.unwrap(),
        DataWrite::Written
    );

    let records = [record(
        "MODIFY",
        Some(&data(&versions[0])),
        Some(&data(&versions[4])),
        10,
        false,
    )];
    let batch = events_from_batch(&feed(), &records, &store).await;
    assert!(batch.failures.is_empty(), "{:?}", batch.failures);
    assert_eq!(
        summary(&batch.events),
        [
            row(2, "product.updated", Some(1), &["priceCents"]),
            row(3, "product.updated", Some(2), &["priceCents"]),
            row(4, "product.updated", Some(3), &["priceCents"]),
            row(5, "product.updated", Some(4), &["priceCents"]),
        ]
    );
    for (event, v) in batch.events.iter().zip(2..) {
        assert_eq!(event.id, cqrs_events::event_id("PRODUCT#t1", "P001", v));
        assert_eq!(event.data.state, Some(data(&product("P001", v))));
        assert_eq!(event.time, format!("2026-01-01T00:00:{v:02}.000Z"));
    }
    println!(
        "1 record jumping 1 -> 5: {} events, versions {:?}",
        batch.events.len(),
        batch
            .events
            .iter()
            .map(|e| e.itemversion)
            .collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn the_data_tables_real_stream_yields_every_version_and_a_soft_delete() {
    let (store, t) = store().await;
    let mut versions: Vec<Item> = (1..=5).map(|v| product("P001", v)).collect();
    let mut deleted = product("P001", 6);
    deleted.is_deleted = true;
    versions.push(deleted);
    history(&store, &versions).await;
    // What data-sync writes for three batches: 1, then 2..5 collapsed into 5, then 6.
    for v in [0, 4, 5] {
        assert_eq!(
            store.put_data_if_newer(&versions[v]).await.unwrap(),
            DataWrite::Written
        );
    }

    let arn = cqrs_testkit::tables::latest_stream_arn(&t.client, &t.data)
        .await
        .unwrap();
    let streams = cqrs_testkit::streams_client().await;
    let stream =
        cqrs_testkit::tables::wait_for_stream_records(&streams, &arn, 3, Duration::from_secs(10))
            .await
            .unwrap();
    let event = cqrs_testkit::stream_event::lambda_event(&stream, &arn).unwrap();
    let names: Vec<&str> = event
        .records
        .iter()
        .map(|r| r.event_name.as_str())
        .collect();
    assert_eq!(names, ["INSERT", "MODIFY", "MODIFY"]);

    let batch = events_from_batch(&feed(), &event.records, &store).await;
    assert!(batch.failures.is_empty(), "{:?}", batch.failures);
    let all = ["category", "priceCents", "productId"];
    assert_eq!(
        summary(&batch.events),
        [
            row(1, "product.created", None, &all),
            row(2, "product.updated", Some(1), &["priceCents"]),
            row(3, "product.updated", Some(2), &["priceCents"]),
            row(4, "product.updated", Some(3), &["priceCents"]),
            row(5, "product.updated", Some(4), &["priceCents"]),
            row(6, "product.deleted", Some(5), &["priceCents"]),
        ]
    );
    assert_eq!(batch.events[5].removal, Some(Removal::Soft));
    assert!(batch.events[0..5].iter().all(|e| e.removal.is_none()));

    // The same batch delivered again: the same events, the same ids (consumers deduplicate).
    let again = events_from_batch(&feed(), &event.records, &store).await;
    assert_eq!(again, batch);
}

#[tokio::test]
async fn a_ttl_remove_is_deleted_ttl_and_framework_partitions_make_nothing() {
    let (store, _t) = store().await;
    let last = data(&product("P001", 3));
    let mut change_log = data(&product("P002", 1));
    change_log.pk = "CQRS_CHANGE_LOG#t1#2026-01".into();
    change_log.sk = "2026-01-01T00:00:01.000Z#0123456789abcdef-1".into();
    let mut head = data(&product("P003", 1));
    head.pk = "HEAD#PRODUCT#t1@P003".into();
    let mut policy = data(&product("P004", 1));
    policy.pk = "MASTER#t1".into();
    policy.sk = "TTL#order".into();
    policy.entity = Some("ttl_policy".into());
    let records = [
        record("REMOVE", Some(&last), None, 1, true),
        record("INSERT", None, Some(&change_log), 2, false),
        record("INSERT", None, Some(&head), 3, false),
        record("INSERT", None, Some(&policy), 4, false),
        record("REMOVE", Some(&change_log), None, 5, true),
    ];
    let batch = events_from_batch(&feed(), &records, &store).await;
    assert!(batch.failures.is_empty(), "{:?}", batch.failures);
    assert_eq!(batch.events.len(), 1, "{:?}", summary(&batch.events));
    let event = &batch.events[0];
    assert_eq!(event.event_type, "product.deleted");
    assert_eq!(event.removal, Some(Removal::Ttl));
    assert_eq!((event.itemversion, &event.data.state), (3, &Some(last)));
    assert_eq!(batch.ignored, 4);
}

#[tokio::test]
async fn a_version_missing_from_the_history_table_is_reported_never_skipped() {
    let (store, _t) = store().await;
    // History holds 1, 2 and 4: version 3 is missing.
    let versions: Vec<Item> = [1, 2, 4].into_iter().map(|v| product("P001", v)).collect();
    history(&store, &versions).await;
    let records = [record(
        "MODIFY",
        Some(&data(&product("P001", 1))),
        Some(&data(&product("P001", 4))),
        7,
        false,
    )];
    let batch = events_from_batch(&feed(), &records, &store).await;
    assert_eq!(
        batch.failures.iter().map(|f| &f.error).collect::<Vec<_>>(),
        [&FeedError::MissingVersion {
            pk: "PRODUCT#t1".into(),
            sk: "P001".into(),
            version: 3
        }]
    );
    assert_eq!(
        batch
            .events
            .iter()
            .map(|e| e.itemversion)
            .collect::<Vec<_>>(),
        [2],
        "the versions before the gap only"
    );
}
