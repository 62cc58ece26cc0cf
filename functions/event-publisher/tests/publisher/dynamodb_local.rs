//! The publisher against DynamoDB Local: versions written with the projection's own writes, the
//! data table's real stream (`NEW_AND_OLD_IMAGES`) as Lambda delivers it, the history read with
//! the store's consistent reads, records parked in the real parked table; the topic is the
//! in-memory [`Recorder`].

use std::time::Duration;

use crate::common::{group, id, product};
use cqrs_event_publisher::{Publisher, Recorder};
use cqrs_item::Item;
use cqrs_store::projection::{DataWrite, HistoryWrite};
use cqrs_store::{Store, Tables};

async fn store() -> (Store, cqrs_testkit::TestTables) {
    let t = cqrs_testkit::fresh_tables().await;
    let store = Store::new(
        t.client.clone(),
        Tables::new(&t.command, &t.data, &t.history, &t.idempotency).with_parked(&t.parked),
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

/// What data-sync writes into the data table for one batch: the newest version.
async fn data(store: &Store, version: &Item) {
    assert_eq!(
        store.put_data_if_newer(version).await.unwrap(),
        DataWrite::Written
    );
}

/// The data table's stream, at least `min` records, as one Lambda event.
async fn stream(
    t: &cqrs_testkit::TestTables,
    min: usize,
) -> aws_lambda_events::event::dynamodb::Event {
    let arn = cqrs_testkit::tables::latest_stream_arn(&t.client, &t.data)
        .await
        .unwrap();
    let streams = cqrs_testkit::streams_client().await;
    let records =
        cqrs_testkit::tables::wait_for_stream_records(&streams, &arn, min, Duration::from_secs(10))
            .await
            .unwrap();
    cqrs_testkit::stream_event::lambda_event(&records, &arn).unwrap()
}

/// `(group, dedup id)` of each entry the recorder accepted for product `code`, in order.
fn of(recorder: &Recorder, code: &str) -> Vec<String> {
    recorder
        .published()
        .into_iter()
        .filter(|e| e.group_id == group(code))
        .map(|e| e.dedup_id)
        .collect()
}

#[tokio::test]
async fn a_real_stream_batch_with_collapsed_versions_publishes_every_version_in_order() {
    let (store, t) = store().await;
    let p1: Vec<Item> = (1..=5).map(|v| product("P001", v)).collect();
    let p2: Vec<Item> = (1..=3).map(|v| product("P002", v)).collect();
    history(&store, &[p1.clone(), p2.clone()].concat()).await;
    // data-sync's writes: P001 v1, then 2..5 collapsed into v5; P002 1..3 collapsed into v3.
    data(&store, &p1[0]).await;
    data(&store, &p1[4]).await;
    data(&store, &p2[2]).await;
    let event = stream(&t, 3).await;
    let names: Vec<&str> = event
        .records
        .iter()
        .map(|r| r.event_name.as_str())
        .collect();
    assert_eq!(names, ["INSERT", "MODIFY", "INSERT"]);

    let recorder = Recorder::new();
    let publisher = Publisher::new(
        crate::common::feed(),
        store.clone(),
        recorder.clone(),
        store.clone(),
    );
    let (response, counts) = publisher.handle_counted(event.clone()).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    assert_eq!((counts.events, counts.filled, counts.parked), (8, 5, 0));
    assert_eq!(
        of(&recorder, "P001"),
        (1..=5).map(|v| id("P001", v)).collect::<Vec<_>>()
    );
    assert_eq!(
        of(&recorder, "P002"),
        (1..=3).map(|v| id("P002", v)).collect::<Vec<_>>()
    );
    for entry in recorder.published() {
        let sent: cqrs_events::ChangeEvent = serde_json::from_str(&entry.body).unwrap();
        assert_eq!(entry.dedup_id, sent.id);
        assert_eq!(
            entry.group_id,
            cqrs_keys::member_token(&sent.data.pk, &sent.data.sk)
        );
        assert_eq!(
            sent.data.state.as_ref().map(|s| s.version),
            Some(sent.itemversion)
        );
    }
    // Waves: (P001 v1, P002 v1), (v2, v2), (v3, v3), (P001 v4), (P001 v5).
    let sizes: Vec<usize> = recorder.calls().iter().map(Vec::len).collect();
    assert_eq!(sizes, [2, 2, 2, 1, 1]);
    println!(
        "real stream batch: {} records -> {} events in {} calls",
        event.records.len(),
        counts.events,
        sizes.len()
    );

    // The same batch delivered again: the same entries, in the same order.
    let first = recorder.published();
    recorder.clear();
    assert!(
        publisher
            .invoke(event)
            .await
            .unwrap()
            .batch_item_failures
            .is_empty()
    );
    assert_eq!(recorder.published(), first);
}

#[tokio::test]
async fn an_insert_after_a_ttl_removal_publishes_only_the_new_life() {
    let (store, t) = store().await;
    let expired_at = chrono::Utc::now().timestamp() - 3600;
    // v1..v3: a life that TTL ended an hour ago (DynamoDB Local keeps expired rows, as DynamoDB
    // does for up to days); v4: the item created again.
    let mut versions: Vec<Item> = (1..=3)
        .map(|v| {
            let mut item = product("P009", v);
            item.ttl = Some(expired_at);
            item
        })
        .collect();
    versions.push(product("P009", 4));
    history(&store, &versions).await;
    data(&store, &versions[3]).await;
    let event = stream(&t, 1).await;
    assert_eq!(event.records.len(), 1);
    assert_eq!(event.records[0].event_name, "INSERT");

    let recorder = Recorder::new();
    let publisher = Publisher::new(
        crate::common::feed(),
        store.clone(),
        recorder.clone(),
        store.clone(),
    );
    let (response, counts) = publisher.handle_counted(event).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    assert_eq!((counts.events, counts.parked), (1, 0));
    let published = recorder.published();
    assert_eq!(of(&recorder, "P009"), [id("P009", 4)]);
    let sent: serde_json::Value = serde_json::from_str(&published[0].body).unwrap();
    assert_eq!(sent["type"], "product.created");
    assert_eq!(sent["data"]["previousVersion"], serde_json::Value::Null);
}

#[tokio::test]
async fn a_record_that_can_never_publish_is_parked_in_the_parked_table() {
    let (store, _t) = store().await;
    // A MODIFY whose version 2 is not in history (history holds 1 and 3 only).
    history(&store, &[product("P010", 1), product("P010", 3)]).await;
    let record = crate::common::modify("P010", 1, 3, 7);
    let recorder = Recorder::new();
    let publisher = Publisher::new(
        crate::common::feed(),
        store.clone(),
        recorder.clone(),
        store.clone(),
    );
    let response = publisher
        .invoke(crate::common::batch(vec![record.clone()]))
        .await
        .unwrap();
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let parked = store.list_parked(Some("t1"), None).await.unwrap();
    assert_eq!(parked.len(), 1, "{parked:?}");
    assert_eq!(parked[0].reason_kind, "event-feed");
    assert_eq!(
        parked[0].reason,
        "version 2 of PRODUCT#t1 / P010 is not in the history table"
    );
    // The version that exists is published, saying it replaces the missing one.
    assert_eq!(recorder.dedup_ids(), [id("P010", 3)]);
    let sent: cqrs_events::ChangeEvent =
        serde_json::from_str(&recorder.published()[0].body).unwrap();
    assert_eq!(sent.data.previous_version, Some(2));
    // Delivered again: parked once, acknowledged again.
    assert!(
        publisher
            .invoke(crate::common::batch(vec![record]))
            .await
            .unwrap()
            .batch_item_failures
            .is_empty()
    );
    assert_eq!(store.list_parked(Some("t1"), None).await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_data_sync_record_and_a_publisher_record_of_one_item_and_sequence_number_are_both_kept() {
    use cqrs_store::parked::{ParkWrite, ParkedRecord};
    let (store, _t) = store().await;
    // The publisher parks a record of the data table's stream...
    let record = crate::common::modify("P011", 1, 3, 8);
    let error = cqrs_events::FeedError::Malformed("a test record".into());
    let publishers = cqrs_event_publisher::park::parked(&record, &error, chrono::Utc::now());
    // ...and data-sync one of the command table's stream, of the same item, whose sequence
    // number happens to be the same (two streams, two numberings).
    let data_syncs = ParkedRecord {
        tenant: Some("t1".into()),
        item_id: Some(cqrs_keys::generate_id("PRODUCT#t1", "P011")),
        item_pk: Some("PRODUCT#t1".into()),
        item_sk: Some("P011@3".into()),
        version: Some(3),
        sequence_number: crate::common::seq(8),
        event_id: "command-e8".into(),
        event_name: "INSERT".into(),
        reason_kind: "malformed".into(),
        reason: "NewImage is not an item".into(),
        parked_at: "2026-01-01T00:00:00.000Z".into(),
        record: None,
    };
    assert_eq!(publishers.sequence_number, data_syncs.sequence_number);
    assert_eq!(store.park(&data_syncs).await.unwrap(), ParkWrite::Parked);
    assert_eq!(
        store.park(&publishers).await.unwrap(),
        ParkWrite::Parked,
        "the publisher's record was taken for data-sync's (it would be acknowledged and lost)"
    );
    // Both kept, both listed with the item; each parked once on redelivery.
    let mut kinds: Vec<String> = store
        .list_parked(Some("t1"), data_syncs.item_id.as_deref())
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.reason_kind)
        .collect();
    kinds.sort();
    assert_eq!(kinds, ["event-feed", "malformed"]);
    assert_eq!(
        store.park(&data_syncs).await.unwrap(),
        ParkWrite::AlreadyParked
    );
    assert_eq!(
        store.park(&publishers).await.unwrap(),
        ParkWrite::AlreadyParked
    );
    // Data-sync's key is the one deployed parked tables hold; the publisher's its own.
    assert_eq!(
        data_syncs.sk(),
        format!("PRODUCT#t1#P011@{}", crate::common::seq(8))
    );
    assert_eq!(
        publishers.sk(),
        format!("PRODUCT#t1#P011@event-feed@{}@3", crate::common::seq(8))
    );
}
