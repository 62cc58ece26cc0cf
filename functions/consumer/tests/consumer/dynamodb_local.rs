//! The consumer runtime against DynamoDB Local: markers in the idempotency table
//! ([`DynamoMarkers`]), missing versions and `stateref` states read from the history table
//! (written with the projection's own `put_history_batch`), parking in memory ([`MemoryPark`]).

use std::sync::Arc;

use crate::common::{
    Answer, Recorder, batch, event, message, message_with_body, pairs, product, ttl_event, versions,
};
use cqrs_consumer::Runtime;
use cqrs_consumer::marker::{DynamoMarkers, Marker, MarkerStore};
use cqrs_consumer::park::{MemoryPark, ReasonKind};
use cqrs_item::Item;
use cqrs_store::projection::HistoryWrite;
use cqrs_store::{Store, Tables};

/// Fresh tables, the store over them, the markers in the idempotency table.
struct Setup {
    store: Store,
    markers: DynamoMarkers,
    _tables: cqrs_testkit::TestTables,
}

async fn setup() -> Setup {
    let t = cqrs_testkit::fresh_tables().await;
    let store = Store::new(
        t.client.clone(),
        Tables::new(&t.command, &t.data, &t.history, &t.idempotency),
    );
    let markers = DynamoMarkers::new(t.client.clone(), &t.idempotency);
    Setup {
        store,
        markers,
        _tables: t,
    }
}

impl Setup {
    /// Writes `versions` into the history table as data-sync does.
    async fn history(&self, versions: &[Item]) {
        let written = self.store.put_history_batch(versions).await;
        assert!(
            written
                .iter()
                .all(|w| matches!(w, Ok(HistoryWrite::Written))),
            "{written:?}"
        );
    }

    /// A runtime of `consumer` on these tables, parking into `park`.
    fn runtime(&self, consumer: Arc<Recorder>, park: Arc<MemoryPark>) -> Runtime {
        Runtime::new(
            consumer,
            crate::common::feed(),
            self.store.clone(),
            self.markers.clone(),
            ArcPark(park),
        )
    }

    /// The marker of `consumer` for product `code`, read back from the table.
    async fn marker(&self, consumer: &str, code: &str) -> Option<Marker> {
        let key = cqrs_keys::consumer_marker_key(consumer, "PRODUCT#t1", code);
        self.markers
            .read(std::slice::from_ref(&key))
            .await
            .unwrap()
            .remove(&key)
    }
}

/// A shared [`MemoryPark`] the test keeps a handle on.
struct ArcPark(Arc<MemoryPark>);

impl cqrs_consumer::park::Park for ArcPark {
    fn park<'a>(
        &'a self,
        parked: &'a cqrs_consumer::park::Parked,
    ) -> futures::future::BoxFuture<'a, Result<(), cqrs_consumer::park::ParkError>> {
        self.0.park(parked)
    }
}

#[tokio::test]
async fn a_duplicate_delivery_is_handled_once() {
    let s = setup().await;
    let recorder = Recorder::new("search");
    let runtime = s.runtime(recorder.clone(), Arc::default());
    let v1 = event("P001", 1);

    let (answer, counts) = runtime
        .handle_counted(batch(vec![message("m1", &v1, 1), message("m1b", &v1, 1)]))
        .await;
    assert!(answer.batch_item_failures.is_empty());
    assert_eq!((counts.handled, counts.duplicates), (1, 1));
    // The same event again in a later batch (after SQS's 5-minute dedup window, a replay).
    let (answer, counts) = runtime
        .handle_counted(batch(vec![message("m2", &v1, 1)]))
        .await;
    assert!(answer.batch_item_failures.is_empty());
    assert_eq!((counts.handled, counts.duplicates), (0, 1));
    assert_eq!(recorder.seen(), pairs(&[("P001", 1)]));
    let marker = s.marker("search", "P001").await.unwrap();
    assert_eq!((marker.applied, marker.held), (Some(1), None));
}

#[tokio::test]
async fn v1_v2_v3_out_of_a_redelivery_with_v2_duplicated_are_handled_once_each_in_order() {
    let s = setup().await;
    let recorder = Recorder::new("search");
    let runtime = s.runtime(recorder.clone(), Arc::default());
    let (v1, v2, v3) = (event("P001", 1), event("P001", 2), event("P001", 3));

    let (answer, counts) = runtime
        .handle_counted(batch(vec![
            message("a", &v1, 1),
            message("b", &v2, 1),
            message("c", &v2, 1),
            message("d", &v3, 1),
        ]))
        .await;
    assert!(answer.batch_item_failures.is_empty());
    assert_eq!((counts.handled, counts.duplicates), (3, 1));
    // The whole batch delivered again.
    let (_, counts) = runtime
        .handle_counted(batch(vec![
            message("a", &v1, 2),
            message("b", &v2, 2),
            message("d", &v3, 2),
        ]))
        .await;
    assert_eq!((counts.handled, counts.duplicates), (0, 3));
    assert_eq!(
        recorder.seen(),
        pairs(&[("P001", 1), ("P001", 2), ("P001", 3)])
    );
    assert_eq!(s.marker("search", "P001").await.unwrap().applied, Some(3));
}

#[tokio::test]
async fn a_gap_v1_then_v4_fills_v2_and_v3_from_the_history_table_then_handles_v4() {
    let s = setup().await;
    s.history(&versions("P001", 4)).await;
    let recorder = Recorder::new("search");
    let runtime = s.runtime(recorder.clone(), Arc::default());

    runtime
        .handle(batch(vec![message("a", &event("P001", 1), 1)]))
        .await;
    let (answer, counts) = runtime
        .handle_counted(batch(vec![message("d", &event("P001", 4), 1)]))
        .await;
    assert!(answer.batch_item_failures.is_empty());
    assert_eq!(
        (counts.handled, counts.gaps_filled, counts.gaps_skipped),
        (3, 2, 0)
    );
    let calls = recorder.calls();
    let seen: Vec<(i64, bool)> = calls.iter().map(|c| (c.version, c.filled)).collect();
    assert_eq!(seen, [(1, false), (2, true), (3, true), (4, false)]);
    // The filled versions carry their own state (the data table's form).
    assert_eq!(calls[1].item, product("P001", 2).into_data_item());
    assert_eq!(s.marker("search", "P001").await.unwrap().applied, Some(4));
}

#[tokio::test]
async fn a_gap_version_missing_from_the_history_table_too_is_skipped_and_counted() {
    let s = setup().await;
    // Version 2 exists nowhere.
    s.history(&[product("P001", 1), product("P001", 3)]).await;
    let recorder = Recorder::new("search");
    let runtime = s.runtime(recorder.clone(), Arc::default());
    runtime
        .handle(batch(vec![message("a", &event("P001", 1), 1)]))
        .await;
    let (answer, counts) = runtime
        .handle_counted(batch(vec![message("d", &event("P001", 4), 1)]))
        .await;
    assert!(answer.batch_item_failures.is_empty());
    assert_eq!((counts.gaps_filled, counts.gaps_skipped), (1, 1));
    assert_eq!(
        recorder.seen(),
        pairs(&[("P001", 1), ("P001", 3), ("P001", 4)])
    );
}

#[tokio::test]
async fn retry_reports_the_message_and_the_rest_of_its_item_but_not_other_items() {
    let s = setup().await;
    let recorder = Recorder::new("search");
    recorder.fail("P001", 2, Answer::Retry);
    let runtime = s.runtime(recorder.clone(), Arc::default());
    let a: Vec<_> = (1..=3).map(|v| event("P001", v)).collect();
    let b: Vec<_> = (1..=2).map(|v| event("P002", v)).collect();

    let (answer, counts) = runtime
        .handle_counted(batch(vec![
            message("a1", &a[0], 1),
            message("b1", &b[0], 1),
            message("a2", &a[1], 1),
            message("b2", &b[1], 1),
            message("a3", &a[2], 1),
        ]))
        .await;
    assert_eq!(answer.ids(), ["a2", "a3"]);
    assert_eq!((counts.handled, counts.retried, counts.parked), (3, 2, 0));
    assert_eq!(s.marker("search", "P001").await.unwrap().applied, Some(1));
    assert_eq!(s.marker("search", "P002").await.unwrap().applied, Some(2));

    // Delivered again, the consumer recovered: 2 then 3, once each.
    recorder.heal("P001", 2);
    let answer = runtime
        .handle(batch(vec![
            message("a2", &a[1], 2),
            message("a3", &a[2], 2),
        ]))
        .await;
    assert!(answer.batch_item_failures.is_empty());
    let a_calls: Vec<(i64, u32)> = recorder
        .calls()
        .iter()
        .filter(|c| c.code == "P001")
        .map(|c| (c.version, c.attempt))
        .collect();
    assert_eq!(a_calls, [(1, 1), (2, 1), (2, 2), (3, 2)]);
    assert_eq!(s.marker("search", "P001").await.unwrap().applied, Some(3));
}

#[tokio::test]
async fn poison_parks_with_its_reason_and_the_items_later_versions_are_held_behind_it() {
    let s = setup().await;
    s.history(&versions("P001", 4)).await;
    let recorder = Recorder::new("search");
    recorder.fail("P001", 2, Answer::Poison("priceCents is negative".into()));
    let park = Arc::new(MemoryPark::default());
    let runtime = s.runtime(recorder.clone(), park.clone());
    let e: Vec<_> = (1..=4).map(|v| event("P001", v)).collect();
    let other = event("P002", 1);

    let (answer, counts) = runtime
        .handle_counted(batch(vec![
            message("m1", &e[0], 1),
            message("m2", &e[1], 1),
            message("o1", &other, 1),
            message("m3", &e[2], 1),
        ]))
        .await;
    assert!(
        answer.batch_item_failures.is_empty(),
        "parked, acknowledged"
    );
    assert_eq!((counts.handled, counts.parked), (2, 2));
    let parked = park.parked();
    let summary: Vec<(ReasonKind, &str, &str)> = parked
        .iter()
        .map(|p| (p.kind, p.reason.as_str(), p.dedup_id.as_str()))
        .collect();
    let (id2, id3) = (
        format!("{}:park:m2", e[1].id),
        format!("{}:park:m3", e[2].id),
    );
    assert_eq!(
        summary,
        [
            (ReasonKind::Poison, "priceCents is negative", id2.as_str()),
            (ReasonKind::Held, "held behind v2", id3.as_str()),
        ]
    );
    assert_eq!(parked[0].body, serde_json::to_string(&e[1]).unwrap());
    assert_eq!(parked[0].consumer, "search");
    assert_eq!(
        parked[0].group_id,
        cqrs_keys::member_token("PRODUCT#t1", "P001")
    );
    let marker = s.marker("search", "P001").await.unwrap();
    assert_eq!((marker.applied, marker.held), (Some(1), Some(2)));
    assert_eq!(
        marker.held_reason.as_deref(),
        Some("poison: priceCents is negative")
    );

    // A later event of the held item, in a later batch: parked behind v2 too.
    runtime.handle(batch(vec![message("m4", &e[3], 1)])).await;
    assert_eq!(park.parked()[2].reason, "held behind v2");

    // The redrive, in order, once the consumer is fixed: 2, 3, 4 handled, the hold gone.
    recorder.heal("P001", 2);
    let answer = runtime
        .handle(batch(vec![
            crate::common::redriven(message("r2", &e[1], 1)),
            crate::common::redriven(message("r3", &e[2], 1)),
            crate::common::redriven(message("r4", &e[3], 1)),
        ]))
        .await;
    assert!(answer.batch_item_failures.is_empty());
    let p1: Vec<i64> = recorder
        .calls()
        .iter()
        .filter(|c| c.code == "P001")
        .map(|c| c.version)
        .collect();
    assert_eq!(p1, [1, 2, 2, 3, 4]);
    let marker = s.marker("search", "P001").await.unwrap();
    assert_eq!((marker.applied, marker.held), (Some(4), None));
}

/// The invocation that parked a poison event crashed after its work (a timeout), so SQS delivers
/// the same message again: it is parked already and waits for its redrive, so the handler must not
/// see it again, nor is it parked a second time. Only its redrive hands it to the handler.
#[tokio::test]
async fn a_parked_version_delivered_again_before_its_redrive_is_neither_handled_nor_parked_again() {
    let s = setup().await;
    s.history(&versions("P001", 2)).await;
    let recorder = Recorder::new("search");
    recorder.fail("P001", 2, Answer::Poison("priceCents is negative".into()));
    let park = Arc::new(MemoryPark::default());
    let runtime = s.runtime(recorder.clone(), park.clone());
    let (v1, v2) = (event("P001", 1), event("P001", 2));
    runtime
        .handle(batch(vec![message("m1", &v1, 1), message("m2", &v2, 1)]))
        .await;
    assert_eq!(park.parked().len(), 1, "v2 parked");

    // The same message again, as SQS delivers it after the crash.
    let (answer, counts) = runtime
        .handle_counted(batch(vec![message("m2", &v2, 2)]))
        .await;
    assert!(answer.batch_item_failures.is_empty(), "acknowledged");
    let calls = |version: i64| {
        recorder
            .calls()
            .iter()
            .filter(|c| c.code == "P001" && c.version == version)
            .count()
    };
    assert_eq!(calls(2), 1, "the handler saw v2 once, when it refused it");
    assert_eq!(
        (counts.parked, park.parked().len()),
        (0, 1),
        "not parked again"
    );

    // Its redrive, once the consumer is fixed: handled, the hold gone.
    recorder.heal("P001", 2);
    let answer = runtime
        .handle(batch(vec![crate::common::redriven(message("r2", &v2, 1))]))
        .await;
    assert!(answer.batch_item_failures.is_empty());
    assert_eq!(calls(2), 2);
    let marker = s.marker("search", "P001").await.unwrap();
    assert_eq!((marker.applied, marker.held), (Some(2), None));
}

#[tokio::test]
async fn a_retry_on_the_last_attempt_parks_the_event_retries_exhausted() {
    let s = setup().await;
    let recorder = Recorder::new("search");
    recorder.fail("P001", 1, Answer::Retry);
    let park = Arc::new(MemoryPark::default());
    let runtime = s
        .runtime(recorder.clone(), park.clone())
        .with_max_receive(3);
    let v1 = event("P001", 1);

    let answer = runtime.handle(batch(vec![message("m1", &v1, 2)])).await;
    assert_eq!(answer.ids(), ["m1"], "attempt 2 of 3: delivered again");
    let answer = runtime.handle(batch(vec![message("m1", &v1, 3)])).await;
    assert!(
        answer.batch_item_failures.is_empty(),
        "attempt 3 of 3: parked"
    );
    let parked = park.parked();
    assert_eq!(parked.len(), 1);
    assert_eq!(parked[0].kind, ReasonKind::RetriesExhausted);
    assert_eq!(parked[0].reason, "after 3 attempts: the index is away");
    assert_eq!(parked[0].attempts, 3);
    assert_eq!(s.marker("search", "P001").await.unwrap().held, Some(1));
}

#[tokio::test]
async fn a_ttl_removal_of_the_applied_version_is_handled_once() {
    let s = setup().await;
    let recorder = Recorder::new("search");
    let runtime = s.runtime(recorder.clone(), Arc::default());
    let v1 = event("P001", 1);
    let removal = ttl_event("P001", 1);
    assert_eq!(removal.itemversion, v1.itemversion);
    assert_ne!(removal.id, v1.id);

    runtime.handle(batch(vec![message("m1", &v1, 1)])).await;
    let (_, counts) = runtime
        .handle_counted(batch(vec![
            message("t1", &removal, 1),
            message("t1b", &removal, 1),
        ]))
        .await;
    assert_eq!((counts.handled, counts.duplicates), (1, 1));
    let (_, counts) = runtime
        .handle_counted(batch(vec![
            message("t1", &removal, 1),
            message("m1", &v1, 1),
        ]))
        .await;
    assert_eq!((counts.handled, counts.duplicates), (0, 2));
    let calls: Vec<(i64, bool)> = recorder
        .calls()
        .iter()
        .map(|c| (c.version, c.ttl))
        .collect();
    assert_eq!(calls, [(1, false), (1, true)]);
    let marker = s.marker("search", "P001").await.unwrap();
    assert_eq!((marker.applied, marker.ttl_removed), (Some(1), true));
}

#[tokio::test]
async fn a_stateref_event_gets_its_state_from_the_history_table() {
    let s = setup().await;
    s.history(&versions("P001", 2)).await;
    let recorder = Recorder::new("search");
    let runtime = s.runtime(recorder.clone(), Arc::default());
    let v2 = event("P001", 2);
    // What the publisher sends for an event too big for SNS.
    let mut body = serde_json::to_value(&v2).unwrap();
    body["data"].as_object_mut().unwrap().remove("state");
    body["stateref"] = "history".into();

    let (answer, counts) = runtime
        .handle_counted(batch(vec![message_with_body(
            "m2",
            &body.to_string(),
            &v2,
            1,
        )]))
        .await;
    assert!(answer.batch_item_failures.is_empty());
    assert_eq!(counts.handled, 1);
    let calls = recorder.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].item, product("P001", 2).into_data_item());
    // What the event would have carried.
    assert_eq!(
        serde_json::to_value(&calls[0].item).unwrap(),
        serde_json::to_value(&v2).unwrap()["data"]["state"]
    );
}

#[tokio::test]
async fn two_consumers_markers_are_independent() {
    let s = setup().await;
    let (a, b) = (Recorder::new("search"), Recorder::new("mailer"));
    let (run_a, run_b) = (
        s.runtime(a.clone(), Arc::default()),
        s.runtime(b.clone(), Arc::default()),
    );
    let (v1, v2) = (event("P001", 1), event("P001", 2));

    run_a
        .handle(batch(vec![message("m1", &v1, 1), message("m2", &v2, 1)]))
        .await;
    // The second consumer was added later: its first event of the item is v2 (no marker, no gap
    // check), then v1 arrives late: a duplicate for it.
    let (_, counts) = run_b
        .handle_counted(batch(vec![message("m2", &v2, 1), message("m1", &v1, 1)]))
        .await;
    assert_eq!((counts.handled, counts.duplicates), (1, 1));
    assert_eq!(a.seen(), pairs(&[("P001", 1), ("P001", 2)]));
    assert_eq!(b.seen(), pairs(&[("P001", 2)]));
    assert_eq!(s.marker("search", "P001").await.unwrap().applied, Some(2));
    assert_eq!(s.marker("mailer", "P001").await.unwrap().applied, Some(2));
    assert_ne!(
        cqrs_keys::consumer_marker_key("search", "PRODUCT#t1", "P001"),
        cqrs_keys::consumer_marker_key("mailer", "PRODUCT#t1", "P001")
    );
}

#[tokio::test]
async fn a_malformed_message_is_parked_and_the_batch_goes_on() {
    let s = setup().await;
    let recorder = Recorder::new("search");
    let park = Arc::new(MemoryPark::default());
    let runtime = s.runtime(recorder.clone(), park.clone());
    let v1 = event("P001", 1);
    let (answer, counts) = runtime
        .handle_counted(batch(vec![
            message_with_body("x", "{\"not\": \"an event\"}", &v1, 1),
            message("m1", &v1, 1),
        ]))
        .await;
    assert!(answer.batch_item_failures.is_empty());
    assert_eq!((counts.parked, counts.handled), (1, 1));
    let parked = park.parked();
    assert_eq!(parked[0].kind, ReasonKind::Malformed);
    assert_eq!(parked[0].body, "{\"not\": \"an event\"}");
    assert!(
        parked[0].reason.starts_with("the body is no change event"),
        "{}",
        parked[0].reason
    );
}

/// A consumer that writes a row of its own and the marker in one transaction.
struct Transactional {
    client: aws_sdk_dynamodb::Client,
    table: String,
    committed: Arc<std::sync::atomic::AtomicUsize>,
    already: Arc<std::sync::atomic::AtomicUsize>,
}

impl cqrs_consumer::Consumer for Transactional {
    fn name(&self) -> &str {
        "ledger"
    }

    fn handle<'a>(
        &'a self,
        delivered: &'a cqrs_consumer::Delivered,
    ) -> futures::future::BoxFuture<'a, Result<(), cqrs_consumer::ConsumerError>> {
        use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem};
        use futures::FutureExt;
        async move {
            let mine = Put::builder()
                .table_name(&self.table)
                .item(
                    "pk",
                    AttributeValue::S(format!(
                        "LEDGER#{}@{}",
                        delivered.event.data.sk, delivered.event.itemversion
                    )),
                )
                .build()
                .unwrap();
            let mut writes = vec![TransactWriteItem::builder().put(mine).build()];
            writes.extend(delivered.marker_write());
            assert_eq!(writes.len(), 2, "the runtime gives the marker write");
            let sent = self
                .client
                .transact_write_items()
                .set_transact_items(Some(writes))
                .send()
                .await;
            match sent {
                Ok(_) => {
                    self.committed
                        .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    Ok(())
                }
                // The marker's condition cancelled it: applied already, nothing to do.
                Err(e)
                    if e.as_service_error()
                        .is_some_and(|e| cqrs_consumer::marker::already_applied(e, 1)) =>
                {
                    self.already
                        .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    Ok(())
                }
                Err(e) => Err(cqrs_consumer::ConsumerError::retry(
                    aws_sdk_dynamodb::error::DisplayErrorContext(e).to_string(),
                )),
            }
        }
        .boxed()
    }
}

#[tokio::test]
async fn a_consumer_commits_the_marker_with_its_own_writes() {
    let s = setup().await;
    let table = s.markers.table_name().to_string();
    let (committed, already) = (Arc::default(), Arc::default());
    let consumer = Arc::new(Transactional {
        client: s.store.client().clone(),
        table: table.clone(),
        committed: Arc::clone(&committed),
        already: Arc::clone(&already),
    });
    let runtime = Runtime::new(
        consumer.clone(),
        crate::common::feed(),
        s.store.clone(),
        s.markers.clone(),
        MemoryPark::default(),
    );
    let v1 = event("P001", 1);
    let (answer, counts) = runtime
        .handle_counted(batch(vec![message("m1", &v1, 1)]))
        .await;
    assert!(answer.batch_item_failures.is_empty());
    assert_eq!(counts.handled, 1);
    assert_eq!(s.marker("ledger", "P001").await.unwrap().applied, Some(1));
    let own = s
        .store
        .client()
        .get_item()
        .table_name(&table)
        .key(
            "pk",
            aws_sdk_dynamodb::types::AttributeValue::S("LEDGER#P001@1".into()),
        )
        .consistent_read(true)
        .send()
        .await
        .unwrap();
    assert!(own.item().is_some(), "the consumer's own row is written");
    // Delivered again: a duplicate, the transaction is not tried again.
    let (_, counts) = runtime
        .handle_counted(batch(vec![message("m1", &v1, 2)]))
        .await;
    assert_eq!((counts.handled, counts.duplicates), (0, 1));
    // A delivery that read no marker (a stale read, a concurrent delivery that won): the
    // consumer's transaction is cancelled by the marker's condition and it answers Ok.
    let blind = Runtime::new(
        consumer,
        crate::common::feed(),
        s.store.clone(),
        Blind(s.markers.clone()),
        MemoryPark::default(),
    );
    let (answer, counts) = blind
        .handle_counted(batch(vec![message("m1", &v1, 3)]))
        .await;
    assert!(answer.batch_item_failures.is_empty());
    assert_eq!(counts.handled, 1);
    use std::sync::atomic::Ordering::SeqCst;
    assert_eq!((committed.load(SeqCst), already.load(SeqCst)), (1, 1));
    assert_eq!(s.marker("ledger", "P001").await.unwrap().applied, Some(1));
}

#[tokio::test]
async fn a_poison_version_among_the_filled_ones_is_parked_as_its_own_event_and_the_message_behind_it()
 {
    let s = setup().await;
    s.history(&versions("P001", 4)).await;
    let recorder = Recorder::new("search");
    recorder.fail("P001", 3, Answer::Poison("no such category".into()));
    let park = Arc::new(MemoryPark::default());
    let runtime = s.runtime(recorder.clone(), park.clone());
    runtime
        .handle(batch(vec![message("m1", &event("P001", 1), 1)]))
        .await;
    let (answer, counts) = runtime
        .handle_counted(batch(vec![message("m4", &event("P001", 4), 1)]))
        .await;
    assert!(answer.batch_item_failures.is_empty());
    assert_eq!(
        (counts.handled, counts.gaps_filled, counts.parked),
        (1, 1, 2)
    );
    let parked = park.parked();
    let kinds: Vec<(ReasonKind, &str)> =
        parked.iter().map(|p| (p.kind, p.reason.as_str())).collect();
    assert_eq!(
        kinds,
        [
            (ReasonKind::Poison, "no such category"),
            (ReasonKind::Held, "held behind v3"),
        ]
    );
    // The filled version is parked as its own event (it never was a message of the queue).
    let body: serde_json::Value = serde_json::from_str(&parked[0].body).unwrap();
    assert_eq!(body["itemversion"], 3);
    assert_eq!(body["id"], cqrs_events::event_id("PRODUCT#t1", "P001", 3));
    assert_eq!(
        parked[0].dedup_id,
        format!("{}:park:m4", cqrs_events::event_id("PRODUCT#t1", "P001", 3))
    );
    let marker = s.marker("search", "P001").await.unwrap();
    assert_eq!((marker.applied, marker.held), (Some(2), Some(3)));
}

/// The table's markers, but every read finds none.
struct Blind(DynamoMarkers);

impl MarkerStore for Blind {
    fn read<'a>(
        &'a self,
        _: &'a [String],
    ) -> futures::future::BoxFuture<
        'a,
        Result<std::collections::HashMap<String, Marker>, cqrs_store::StoreError>,
    > {
        use futures::FutureExt;
        async { Ok(Default::default()) }.boxed()
    }

    fn apply<'a>(
        &'a self,
        write: &'a cqrs_consumer::marker::MarkerWrite,
    ) -> futures::future::BoxFuture<
        'a,
        Result<cqrs_consumer::marker::Written, cqrs_store::StoreError>,
    > {
        self.0.apply(write)
    }

    fn hold<'a>(
        &'a self,
        key: &'a str,
        version: i64,
        reason: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<(), cqrs_store::StoreError>> {
        self.0.hold(key, version, reason)
    }

    fn table(&self) -> Option<&str> {
        self.0.table()
    }
}
