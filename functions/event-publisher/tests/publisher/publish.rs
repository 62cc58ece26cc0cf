//! The publisher without AWS: waves and call limits, failed entries and calls, the first-record
//! rule, reference events, parking, transient history reads, and replays.

use std::collections::HashSet;

use crate::common::{
    batch, data, group, id, insert, modify, product, publisher, record, reported, seq,
};
use cqrs_event_publisher::{
    Entry, MAX_CALL_BYTES, MAX_CALL_ENTRIES, MemoryParking, PARK_KIND, PublishError, Publisher,
    Recorder,
};
use cqrs_events::{HistoryKey, HistoryReader};
use cqrs_item::{Item, Value};
use cqrs_store::StoreError;
use futures::future::{BoxFuture, FutureExt};

/// Every call: at most 10 entries, distinct groups, at most 256 KiB.
fn assert_calls_keep_the_rules(recorder: &Recorder) {
    for (at, call) in recorder.calls().iter().enumerate() {
        assert!(
            call.len() <= MAX_CALL_ENTRIES,
            "call {at}: {} entries",
            call.len()
        );
        let groups: HashSet<&str> = call.iter().map(|e| e.group_id.as_str()).collect();
        assert_eq!(groups.len(), call.len(), "call {at}: a group twice");
        let bytes: usize = call.iter().map(Entry::size).sum();
        assert!(bytes <= MAX_CALL_BYTES, "call {at}: {bytes} bytes");
    }
}

#[tokio::test]
async fn waves_put_one_entry_per_item_in_a_call_and_at_most_10_per_call() {
    // 24 products with one version each, and P-MULTI whose versions 1..4 data-sync collapsed
    // into one INSERT of version 4.
    let history: Vec<Item> = (1..=4).map(|v| product("P-MULTI", v)).collect();
    let mut records = vec![record(
        "INSERT",
        None,
        Some(&data(&product("P-MULTI", 4))),
        1,
    )];
    records.extend((0..24).map(|n| insert(&format!("P{n:03}"), 2 + n)));
    let (publisher, recorder, _) = publisher(history);
    let (response, counts) = publisher.handle_counted(batch(records)).await;
    assert!(response.batch_item_failures.is_empty());
    assert_eq!((counts.events, counts.filled, counts.retried), (28, 3, 0));
    assert_calls_keep_the_rules(&recorder);
    // Wave 1: 25 heads in 3 calls (10, 10, 5); waves 2..4: P-MULTI's versions 2, 3, 4 alone.
    let sizes: Vec<usize> = recorder.calls().iter().map(Vec::len).collect();
    assert_eq!(sizes, [10, 10, 5, 1, 1, 1]);
    let multi: Vec<String> = recorder
        .published()
        .iter()
        .filter(|e| e.group_id == group("P-MULTI"))
        .map(|e| e.dedup_id.clone())
        .collect();
    assert_eq!(multi, (1..=4).map(|v| id("P-MULTI", v)).collect::<Vec<_>>());
}

#[tokio::test]
async fn a_call_holds_at_most_256_kib() {
    // Five products of about 100 KB each: at most two fit in a call.
    let big = |code: &str| {
        let mut item = product(code, 1);
        item.attributes
            .insert("notes".into(), Value::from("n".repeat(100_000)));
        item
    };
    let records: Vec<_> = (0..5)
        .map(|n| record("INSERT", None, Some(&data(&big(&format!("B{n}")))), 1 + n))
        .collect();
    let (publisher, recorder, _) = publisher(Vec::new());
    let response = publisher.handle(batch(records)).await;
    assert!(response.batch_item_failures.is_empty());
    assert_calls_keep_the_rules(&recorder);
    let sizes: Vec<usize> = recorder.calls().iter().map(Vec::len).collect();
    assert_eq!(sizes, [2, 2, 1]);
    assert_eq!(recorder.published().len(), 5);
    assert!(recorder.published().iter().all(|e| !e.reference));
}

#[tokio::test]
async fn a_failed_entry_stops_only_its_item_and_reports_the_record_that_carried_it() {
    let history: Vec<Item> = ["A", "B"]
        .into_iter()
        .flat_map(|code| (1..=3).map(move |v| product(code, v)))
        .collect();
    // A: v1 (seq 1), then 1 -> 3 (seq 3: v2 filled, v3 own). B: v1 (seq 2), 1 -> 3 (seq 4).
    let records = vec![
        insert("A", 1),
        insert("B", 2),
        modify("A", 1, 3, 3),
        modify("B", 1, 3, 4),
    ];
    let (publisher, recorder, _) = publisher(history);
    // B's version 2 (a filled version carried by seq 4) fails once.
    recorder.fail_entry(id("B", 2), 1);
    let (response, counts) = publisher.handle_counted(batch(records)).await;
    assert_eq!(reported(&response), [seq(4)]);
    assert_eq!((counts.events, counts.retried), (4, 1));
    assert_eq!(
        recorder.dedup_ids(),
        [id("A", 1), id("B", 1), id("A", 2), id("A", 3)],
        "B stops at version 2; version 3 is never sent before it"
    );
    assert!(
        !recorder
            .calls()
            .iter()
            .flatten()
            .any(|e| e.dedup_id == id("B", 3)),
        "B's version 3 was never sent"
    );
}

#[tokio::test]
async fn a_failed_first_record_of_a_larger_batch_fails_the_invocation() {
    let records = vec![insert("A", 1), insert("B", 2)];
    let (publisher, recorder, _) = publisher(Vec::new());
    recorder.fail_entry(id("A", 1), 1);
    let error = publisher.invoke(batch(records.clone())).await.unwrap_err();
    assert_eq!((error.records, error.failed), (2, 1));
    // B went out anyway (a later redelivery publishes it again with the same dedup id).
    assert_eq!(recorder.dedup_ids(), [id("B", 1)]);

    // The same failure in a batch of one record is reported, not an invocation error.
    let (publisher, recorder, _) = publisher_with(Vec::new());
    recorder.fail_entry(id("A", 1), 1);
    let response = publisher.invoke(batch(vec![insert("A", 1)])).await.unwrap();
    assert_eq!(reported(&response), [seq(1)]);

    // A failed later record is reported as such.
    let (publisher, recorder, _) = publisher_with(Vec::new());
    recorder.fail_entry(id("B", 1), 1);
    let response = publisher.invoke(batch(records)).await.unwrap();
    assert_eq!(reported(&response), [seq(2)]);
}

fn publisher_with(history: Vec<Item>) -> (Publisher, Recorder, MemoryParking) {
    publisher(history)
}

#[tokio::test]
async fn a_whole_failed_call_reports_each_of_its_items_and_the_replay_is_identical() {
    let records: Vec<_> = (0..12)
        .map(|n| insert(&format!("P{n:02}"), 1 + n))
        .collect();
    let (publisher, recorder, _) = publisher(Vec::new());
    recorder.fail_calls(1);
    let response = publisher.handle(batch(records.clone())).await;
    // The first call (10 entries) failed; the second (2) went out.
    assert_eq!(reported(&response), (1..=10).map(seq).collect::<Vec<_>>());
    let first = recorder.published();
    assert_eq!(first.len(), 2);

    // Lambda delivers the batch again: every entry once more, the two published before with the
    // same dedup ids and bodies.
    assert!(publisher.invoke(batch(records)).await.is_ok());
    let again: Vec<Entry> = recorder.published().split_off(2);
    assert_eq!(again.len(), 12);
    for entry in &first {
        let same = again.iter().find(|e| e.dedup_id == entry.dedup_id).unwrap();
        assert_eq!(same, entry);
    }
}

#[tokio::test]
async fn replays_publish_identical_entries() {
    let history: Vec<Item> = (1..=3).map(|v| product("A", v)).collect();
    let records = vec![insert("A", 1), modify("A", 1, 3, 2), insert("B", 3)];
    let (one, first, _) = publisher(history.clone());
    let (two, second, _) = publisher(history);
    assert!(
        one.handle(batch(records.clone()))
            .await
            .batch_item_failures
            .is_empty()
    );
    assert!(
        two.handle(batch(records.clone()))
            .await
            .batch_item_failures
            .is_empty()
    );
    // A duplicated record in the batch adds nothing.
    let mut doubled = records.clone();
    doubled.push(modify("A", 1, 3, 4));
    let (three, third, _) = publisher((1..=3).map(|v| product("A", v)).collect());
    assert!(
        three
            .handle(batch(doubled))
            .await
            .batch_item_failures
            .is_empty()
    );
    assert_eq!(first.published(), second.published());
    assert_eq!(first.published(), third.published());
    assert_eq!(
        first.dedup_ids(),
        [id("A", 1), id("B", 1), id("A", 2), id("A", 3)]
    );
    for entry in first.published() {
        let event: cqrs_events::ChangeEvent = serde_json::from_str(&entry.body).unwrap();
        assert_eq!(entry.dedup_id, event.id);
        assert_eq!(entry.attributes.event_type, event.event_type);
        assert_eq!(
            (
                entry.attributes.tenant.as_str(),
                entry.attributes.entity.as_str()
            ),
            ("t1", "product")
        );
    }
}

#[tokio::test]
async fn an_event_over_240_kib_goes_as_a_reference_without_state() {
    let mut huge = product("H", 1);
    huge.attributes
        .insert("blob".into(), Value::from("x".repeat(250_000)));
    let records = vec![
        record("INSERT", None, Some(&data(&huge)), 1),
        insert("S", 2),
    ];
    let (publisher, recorder, _) = publisher(Vec::new());
    let (response, counts) = publisher.handle_counted(batch(records)).await;
    assert!(response.batch_item_failures.is_empty());
    assert_eq!((counts.events, counts.references), (2, 1));
    let published = recorder.published();
    let big = published.iter().find(|e| e.group_id == group("H")).unwrap();
    assert!(big.reference);
    assert!(big.body.len() < 10_000, "{} bytes", big.body.len());
    let json: serde_json::Value = serde_json::from_str(&big.body).unwrap();
    assert_eq!(json["stateref"], "history");
    assert!(json["data"].get("state").is_none());
    assert_eq!(json["id"], id("H", 1));
    assert_eq!(json["data"]["version"], 1);
    // The small one is the whole event, without stateref.
    let small = published.iter().find(|e| e.group_id == group("S")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&small.body).unwrap();
    assert!(json.get("stateref").is_none());
    assert_eq!(json["data"]["state"]["code"], "S");
    assert_calls_keep_the_rules(&recorder);
}

#[tokio::test]
async fn a_malformed_record_is_parked_and_its_items_later_records_still_publish() {
    let history: Vec<Item> = (1..=3).map(|v| product("A", v)).collect();
    // A MODIFY without its old image (seq 1), then B, then A's next change 2 -> 3.
    let records = vec![
        record("MODIFY", None, Some(&data(&product("A", 2))), 1),
        insert("B", 2),
        modify("A", 2, 3, 3),
    ];
    let (publisher, recorder, parking) = publisher(history);
    let (response, counts) = publisher.handle_counted(batch(records.clone())).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    assert_eq!(counts.parked, 1);
    assert_eq!(recorder.dedup_ids(), [id("B", 1), id("A", 3)]);
    let parked = parking.records();
    assert_eq!(parked.len(), 1);
    assert_eq!(parked[0].reason_kind, PARK_KIND);
    assert_eq!(parked[0].sequence_number, seq(1));
    assert_eq!(
        parked[0].reason,
        "malformed record: MODIFY without its OldImage (the data table's stream view type must be NEW_AND_OLD_IMAGES)"
    );
    assert_eq!(
        (
            parked[0].item_pk.as_deref(),
            parked[0].item_sk.as_deref(),
            parked[0].version
        ),
        (Some("PRODUCT#t1"), Some("A"), Some(2))
    );
    assert!(parked[0].record.is_some());

    // A park that fails is reported (never dropped): here the first record of the batch.
    let (publisher, _, parking) = publisher_with((1..=3).map(|v| product("A", v)).collect());
    parking.fail_next(1);
    let error = publisher.invoke(batch(records)).await.unwrap_err();
    assert_eq!(error.failed, 1);
    assert!(parking.records().is_empty());
}

#[tokio::test]
async fn a_version_missing_from_history_under_a_modify_is_parked() {
    // History lacks A's version 3: A's MODIFY 1 -> 4 can never be filled.
    let history: Vec<Item> = [1, 2, 4, 5].into_iter().map(|v| product("A", v)).collect();
    let records = vec![modify("A", 1, 4, 1), insert("B", 2), modify("A", 4, 5, 3)];
    let (publisher, recorder, parking) = publisher(history);
    let (response, counts) = publisher.handle_counted(batch(records)).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    assert_eq!(counts.parked, 1);
    assert_eq!(
        parking.records()[0].reason,
        "version 3 of PRODUCT#t1 / A is not in the history table"
    );
    // The versions that exist are published (design39 2.4), in order per item: A 2, 4, 5 (4
    // says it replaces 3, its `changed` is against 2, the last version known); A's next record
    // publishes too.
    assert_eq!(
        recorder.dedup_ids(),
        [id("A", 2), id("B", 1), id("A", 4), id("A", 5)]
    );
    let after_gap: cqrs_events::ChangeEvent =
        serde_json::from_str(&recorder.published()[2].body).unwrap();
    assert_eq!(after_gap.event_type, "product.updated");
    assert_eq!(after_gap.data.previous_version, Some(3));
    assert_eq!(after_gap.data.changed, ["priceCents"]);
}

/// A, B: version 1 each, then each 1 -> 3 (version 2 filled from history, carried by the MODIFY).
fn two_items_with_a_filled_version() -> (
    Vec<Item>,
    Vec<aws_lambda_events::event::dynamodb::EventRecord>,
) {
    let history: Vec<Item> = ["A", "B"]
        .into_iter()
        .flat_map(|code| (1..=3).map(move |v| product(code, v)))
        .collect();
    let records = vec![
        insert("A", 1),
        insert("B", 2),
        modify("A", 1, 3, 3),
        modify("B", 1, 3, 4),
    ];
    (history, records)
}

#[tokio::test]
async fn an_entry_refused_for_a_sender_fault_a_retry_cannot_fix_is_parked_and_its_item_goes_on() {
    let (history, records) = two_items_with_a_filled_version();
    let (publisher, recorder, parking) = publisher(history.clone());
    // SNS refuses B's version 2 (carried by seq 4) every time: the request's fault, not SNS's.
    let refusal = PublishError::sender(
        "ParameterValueInvalid",
        "Invalid parameter: Message contains characters outside the allowed range",
    );
    recorder.fail_entry_with(id("B", 2), 100, refusal);
    let (response, counts) = publisher.handle_counted(batch(records.clone())).await;
    assert!(
        response.batch_item_failures.is_empty(),
        "a refusal no retry can fix holds the shard until the record ages out: {:?}",
        reported(&response)
    );
    assert_eq!((counts.parked, counts.retried), (1, 0));
    // B's later version still goes, after the refused one.
    assert_eq!(
        recorder.dedup_ids(),
        [id("A", 1), id("B", 1), id("A", 2), id("A", 3), id("B", 3)]
    );
    let parked = parking.records();
    assert_eq!(parked.len(), 1, "{parked:?}");
    assert_eq!(parked[0].reason_kind, PARK_KIND);
    assert_eq!(parked[0].sequence_number, seq(4));
    assert_eq!(parked[0].version, Some(2), "the refused event's version");
    assert_eq!(
        parked[0].reason,
        format!(
            "SNS refused event {} (version 2): ParameterValueInvalid: Invalid parameter: Message contains characters outside the allowed range",
            id("B", 2)
        )
    );
    assert!(parked[0].record.is_some());

    // Delivered again: parked once, acknowledged again.
    let response = publisher.handle(batch(records.clone())).await;
    assert!(response.batch_item_failures.is_empty());
    assert_eq!(parking.records().len(), 1);

    // A park that fails: the record is reported, never acknowledged, and B stops there.
    let (publisher, recorder, parking) = publisher_with(history);
    recorder.fail_entry_with(
        id("B", 2),
        1,
        PublishError::sender("ParameterValueInvalid", "bad"),
    );
    parking.fail_next(1);
    let response = publisher.handle(batch(records)).await;
    assert_eq!(reported(&response), [seq(4)]);
    assert!(!recorder.dedup_ids().contains(&id("B", 3)));
}

#[tokio::test]
async fn throttling_configuration_and_server_faults_stay_retried() {
    for error in [
        PublishError::sender("Throttled", "Rate exceeded"),
        PublishError::sender("KMSThrottling", "KMS rate exceeded"),
        PublishError::sender("KMSDisabled", "the topic's key is disabled"),
        PublishError::sender("AuthorizationError", "not allowed"),
        PublishError::sender("SomethingNew", "a code this version does not know"),
        PublishError::new("InternalError", "try again"),
    ] {
        let (history, records) = two_items_with_a_filled_version();
        let (publisher, recorder, parking) = publisher(history);
        recorder.fail_entry_with(id("B", 2), 1, error.clone());
        let (response, counts) = publisher.handle_counted(batch(records)).await;
        assert_eq!(reported(&response), [seq(4)], "{error}");
        assert_eq!((counts.parked, counts.retried), (0, 1), "{error}");
        assert!(parking.records().is_empty(), "{error}");
        assert!(!recorder.dedup_ids().contains(&id("B", 3)), "{error}");
    }
}

/// A history whose reads fail (throttled).
struct Throttled;

impl HistoryReader for Throttled {
    fn read_versions<'a>(
        &'a self,
        _keys: &'a [HistoryKey],
    ) -> BoxFuture<'a, Result<Vec<Item>, StoreError>> {
        async { Err(StoreError::Throttled("BatchGetItem: throttled".into())) }.boxed()
    }
}

#[tokio::test]
async fn a_failed_history_read_is_reported_for_retry_not_parked() {
    let records = vec![insert("B", 1), modify("A", 1, 3, 2), insert("C", 3)];
    let recorder = Recorder::new();
    let parking = MemoryParking::new();
    let publisher = Publisher::new(
        crate::common::feed(),
        Throttled,
        recorder.clone(),
        parking.clone(),
    );
    let (response, counts) = publisher.handle_counted(batch(records)).await;
    assert_eq!(reported(&response), [seq(2)]);
    assert_eq!((counts.parked, counts.retried), (0, 1));
    assert!(parking.records().is_empty());
    assert_eq!(recorder.dedup_ids(), [id("B", 1), id("C", 1)]);
}
