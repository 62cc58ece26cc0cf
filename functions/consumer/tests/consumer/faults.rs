//! The runtime when what it stands on fails: the markers cannot be read, a park cannot be sent,
//! a marker cannot be written. Nothing is lost silently: every such message is reported in
//! `batchItemFailures` (delivered again). In memory: no DynamoDB needed.

use std::collections::HashMap;
use std::sync::Arc;

use crate::common::{Answer, Recorder, batch, event, message, pairs};
use cqrs_consumer::Runtime;
use cqrs_consumer::marker::{Marker, MarkerStore, MarkerWrite, MemoryMarkers, Written};
use cqrs_consumer::park::{MemoryPark, Park, ParkError, Parked};
use cqrs_item::Item;
use cqrs_store::StoreError;
use futures::future::{BoxFuture, FutureExt};

/// Markers whose reads or writes fail.
struct BrokenMarkers {
    reads: bool,
    writes: bool,
    inner: MemoryMarkers,
}

impl MarkerStore for BrokenMarkers {
    fn read<'a>(
        &'a self,
        keys: &'a [String],
    ) -> BoxFuture<'a, Result<HashMap<String, Marker>, StoreError>> {
        if self.reads {
            return async { Err(StoreError::Throttled("markers".into())) }.boxed();
        }
        self.inner.read(keys)
    }

    fn apply<'a>(&'a self, write: &'a MarkerWrite) -> BoxFuture<'a, Result<Written, StoreError>> {
        if self.writes {
            return async { Err(StoreError::Dynamo("connection reset".into())) }.boxed();
        }
        self.inner.apply(write)
    }

    fn hold<'a>(
        &'a self,
        key: &'a str,
        version: i64,
        reason: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.inner.hold(key, version, reason)
    }
}

/// A dead-letter queue that refuses everything.
struct BrokenPark;

impl Park for BrokenPark {
    fn park<'a>(&'a self, _: &'a Parked) -> BoxFuture<'a, Result<(), ParkError>> {
        async { Err(ParkError("queue away".into())) }.boxed()
    }
}

fn runtime(
    recorder: Arc<Recorder>,
    markers: impl MarkerStore + 'static,
    park: impl Park + 'static,
) -> Runtime {
    Runtime::new(
        recorder,
        crate::common::feed(),
        Vec::<Item>::new(),
        markers,
        park,
    )
}

#[tokio::test]
async fn unreadable_markers_report_every_message_and_handle_none() {
    let recorder = Recorder::new("search");
    let markers = BrokenMarkers {
        reads: true,
        writes: false,
        inner: MemoryMarkers::default(),
    };
    let rt = runtime(recorder.clone(), markers, MemoryPark::default());
    let (answer, counts) = rt
        .handle_counted(batch(vec![
            message("a", &event("P001", 1), 1),
            message("b", &event("P002", 1), 1),
        ]))
        .await;
    assert_eq!(answer.ids(), ["a", "b"]);
    assert_eq!((counts.retried, counts.handled), (2, 0));
    assert!(recorder.calls().is_empty());
}

#[tokio::test]
async fn a_marker_that_cannot_be_written_reports_the_message_and_the_rest_of_its_item() {
    let recorder = Recorder::new("search");
    let markers = BrokenMarkers {
        reads: false,
        writes: true,
        inner: MemoryMarkers::default(),
    };
    let rt = runtime(recorder.clone(), markers, MemoryPark::default());
    let answer = rt
        .handle(batch(vec![
            message("a1", &event("P001", 1), 1),
            message("a2", &event("P001", 2), 1),
        ]))
        .await;
    assert_eq!(answer.ids(), ["a1", "a2"]);
    assert_eq!(
        recorder.seen(),
        pairs(&[("P001", 1)]),
        "v2 waits for v1's marker"
    );
}

#[tokio::test]
async fn a_park_that_cannot_be_sent_reports_the_message_instead() {
    let recorder = Recorder::new("search");
    recorder.fail("P001", 1, Answer::Poison("bad".into()));
    let rt = runtime(recorder.clone(), MemoryMarkers::default(), BrokenPark);
    let (answer, counts) = rt
        .handle_counted(batch(vec![
            message("a1", &event("P001", 1), 1),
            message("a2", &event("P001", 2), 1),
            message("x", &event("P002", 1), 1),
        ]))
        .await;
    assert_eq!(answer.ids(), ["a1", "a2"]);
    assert_eq!((counts.parked, counts.handled), (0, 1));
}

#[tokio::test]
async fn events_of_entities_the_consumer_does_not_take_are_acknowledged_unhandled() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let consumer = cqrs_consumer::from_fn("orders-only", move |d: cqrs_consumer::Delivered| {
        log.lock().unwrap().push(d.event.id.clone());
        async { Ok::<(), cqrs_consumer::ConsumerError>(()) }
    })
    .with_entities(&["order"]);
    let rt = Runtime::new(
        consumer,
        crate::common::feed(),
        Vec::<Item>::new(),
        MemoryMarkers::default(),
        MemoryPark::default(),
    );
    let (answer, counts) = rt
        .handle_counted(batch(vec![message("a", &event("P001", 1), 1)]))
        .await;
    assert!(answer.batch_item_failures.is_empty());
    assert_eq!((counts.filtered, counts.handled), (1, 0));
    assert!(seen.lock().unwrap().is_empty());
}

/// A history table that cannot be read.
struct BrokenHistory;

impl cqrs_events::HistoryReader for BrokenHistory {
    fn read_versions<'a>(
        &'a self,
        _: &'a [cqrs_events::HistoryKey],
    ) -> BoxFuture<'a, Result<Vec<Item>, StoreError>> {
        async { Err(StoreError::Throttled("history".into())) }.boxed()
    }
}

#[tokio::test]
async fn an_unreadable_gap_is_retried_then_parked_once_on_the_last_attempt() {
    let recorder = Recorder::new("search");
    let markers = MemoryMarkers::default();
    markers
        .apply(&MarkerWrite::new(
            cqrs_keys::consumer_marker_key("search", "PRODUCT#t1", "P001"),
            1,
        ))
        .await
        .unwrap();
    let park = Arc::new(MemoryPark::default());
    let rt = Runtime::new(
        recorder.clone(),
        crate::common::feed(),
        BrokenHistory,
        markers,
        SharedPark(park.clone()),
    )
    .with_max_receive(2);
    let v4 = event("P001", 4);
    let v5 = event("P001", 5);
    let answer = rt
        .handle(batch(vec![message("m4", &v4, 1), message("m5", &v5, 1)]))
        .await;
    assert_eq!(
        answer.ids(),
        ["m4", "m5"],
        "attempt 1 of 2: delivered again"
    );
    assert!(park.parked().is_empty());

    let (answer, counts) = rt
        .handle_counted(batch(vec![message("m4", &v4, 2), message("m5", &v5, 2)]))
        .await;
    assert!(answer.batch_item_failures.is_empty());
    let parked: Vec<(cqrs_consumer::park::ReasonKind, String)> = park
        .parked()
        .iter()
        .map(|p| (p.kind, p.reason.clone()))
        .collect();
    assert_eq!(
        parked,
        [
            (
                cqrs_consumer::park::ReasonKind::RetriesExhausted,
                "after 2 attempts: the history table could not be read to fill a gap".to_string()
            ),
            (
                cqrs_consumer::park::ReasonKind::Held,
                "held behind v4".to_string()
            ),
        ],
        "each message parked once"
    );
    assert_eq!(counts.parked, 2);
    assert!(recorder.calls().is_empty());
}

/// A [`MemoryPark`] the test keeps a handle on.
struct SharedPark(Arc<MemoryPark>);

impl Park for SharedPark {
    fn park<'a>(&'a self, parked: &'a Parked) -> BoxFuture<'a, Result<(), ParkError>> {
        self.0.park(parked)
    }
}
