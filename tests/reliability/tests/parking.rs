//! Permanent failures are parked, transient ones retried: the real command handler writes versions,
//! poison rows go straight into the command table (as a table written before today's checks, or by
//! another writer, holds them), and the command table's DynamoDB Local stream is delivered to the
//! real data-sync handler as Lambda delivers it.
//!
//! - A malformed image, a version whose history row already holds other content, a key over
//!   DynamoDB's limits and an item too large for the data table are parked at once with their
//!   reason and acknowledged; the later records of the same items still project; history is
//!   written before data, so the data table never holds a version history refused.
//! - A throttled write is retried (reported in `batchItemFailures`), never parked.
//! - A park write that fails is retried, never dropped.
//! - Versions at `i64::MAX` project; a version past it is parked, nothing panics.

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use aws_lambda_events::event::dynamodb::Event;
use aws_sdk_dynamodb::types::AttributeValue;
use cqrs_caller::CallerMode;
use cqrs_data_sync::{BatchCounts, DataSync, ProjectionWriter};
use cqrs_item::{Item, MAX_ITEM_BYTES, item_size};
use cqrs_store::{
    Store, StoreError, Tables,
    parked::{ParkWrite, ParkedRecord},
    projection::{DataWrite, HistoryWrite},
};
use cqrs_testkit::TestTables;
use futures::future::{BoxFuture, FutureExt};
use serde_json::{Value, json};

use common::{Caller, Req, Stack, T1, command_item, get, scan_items};

/// A store on `tables` that parks into the parked table.
fn parking_store(tables: &TestTables) -> Store {
    Store::new(
        tables.client.clone(),
        Tables::new(
            &tables.command,
            &tables.data,
            &tables.history,
            &tables.idempotency,
        )
        .with_parked(&tables.parked),
    )
}

/// The command table's stream (at least `min` records) as one Lambda event.
async fn stream_event(tables: &TestTables, min: usize) -> Event {
    let records = tables.command_stream_records(min).await;
    let arn = tables.command_stream_arn().await;
    cqrs_testkit::stream_event::lambda_event(&records, &arn).expect("a Lambda event")
}

fn sequence_numbers(
    response: &aws_lambda_events::event::streams::DynamoDbEventResponse,
) -> Vec<String> {
    response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.clone().unwrap_or_default())
        .collect()
}

/// The sequence number of the record of command row `sk` in `event`.
fn sequence_of(event: &Event, sk: &str) -> String {
    event
        .records
        .iter()
        .find(|r| r.change.keys.get("sk") == Some(&serde_dynamo::AttributeValue::S(sk.into())))
        .and_then(|r| r.change.sequence_number.clone())
        .unwrap_or_else(|| panic!("no record of {sk}"))
}

/// What Lambda does with `ReportBatchItemFailures`: invoke; while records are reported, invoke
/// again from the lowest reported one. Returns what every invocation reported, and the counts
/// summed over the invocations.
async fn run_like_lambda(sync: &DataSync, event: Event) -> (Vec<Vec<String>>, BatchCounts) {
    let mut records = event.records;
    let mut reports = Vec::new();
    let mut total = BatchCounts::default();
    for _ in 0..20 {
        let mut batch = Event::default();
        batch.records = records.clone();
        let (response, counts) = sync.handle_counted(batch).await;
        total.records += counts.records;
        total.projected += counts.projected;
        total.parked += counts.parked;
        total.retried += counts.retried;
        let failed = sequence_numbers(&response);
        reports.push(failed.clone());
        let Some(position) = records
            .iter()
            .position(|r| failed.contains(&r.change.sequence_number.clone().unwrap_or_default()))
        else {
            return (reports, total);
        };
        records = records.split_off(position);
    }
    panic!("no convergence after 20 invocations: {reports:?}");
}

/// A command-table row without the item shape (`version` is not a number).
async fn put_malformed(tables: &TestTables, pk: &str, sk: &str) {
    tables
        .client
        .put_item()
        .table_name(&tables.command)
        .item("pk", AttributeValue::S(pk.into()))
        .item("sk", AttributeValue::S(sk.into()))
        .item("version", AttributeValue::S("not a number".into()))
        .send()
        .await
        .expect("a malformed command row");
}

/// Writes `item` straight into `table` and answers whether DynamoDB refused it.
async fn refused(tables: &TestTables, table: &str, item: &Item) -> bool {
    tables
        .client
        .put_item()
        .table_name(table)
        .set_item(Some(item.to_attributes().expect("attributes")))
        .send()
        .await
        .is_err()
}

/// A POST /commands as tenant t1.
fn post(body: Value) -> Req {
    Req::command("POST", &body.to_string()).claims_of(T1)
}

/// The version the query handler answers for `PRODUCT#t1` / `base`.
async fn read_version(stack: &Stack, base: &str) -> Option<i64> {
    let answer = stack
        .send(get(&format!("/items/PRODUCT%23t1/{base}")).claims_of(T1))
        .await;
    (answer.status == 200)
        .then(|| answer.body["version"].as_i64())
        .flatten()
}

#[tokio::test]
async fn permanent_failures_are_parked_with_their_reason_and_later_records_project() {
    let stack = Stack::new(CallerMode::Jwt).await;
    let tables = stack.tables.clone();
    let store = parking_store(&tables);
    let send = |body: Value| {
        let stack = &stack;
        async move {
            let answer = stack.send(post(body)).await;
            assert_eq!(answer.status, 202, "{}", answer.text);
        }
    };

    // A: version 1, a malformed row, version 2 after it.
    send(json!({"pk": "PRODUCT#t1", "sk": "A", "version": 0, "name": "a1"})).await;
    put_malformed(&tables, "PRODUCT#t1", "A@99").await;
    send(json!({"pk": "PRODUCT#t1", "sk": "A", "version": 1, "name": "a2"})).await;
    // B and D: history already holds other content under version 2 (written by something else);
    // B goes on to version 3, D stops at 2.
    for base in ["B", "D"] {
        send(json!({"pk": "PRODUCT#t1", "sk": base, "version": 0, "name": "v1"})).await;
        let mut other = command_item("PRODUCT#t1", base, 2);
        other.name = "written by something else".into();
        store.put_history(&other).await.expect("a history row");
        send(json!({"pk": "PRODUCT#t1", "sk": base, "version": 1, "name": "v2"})).await;
    }
    send(json!({"pk": "PRODUCT#t1", "sk": "B", "version": 2, "name": "v3"})).await;
    // L: keys within the command table's limits whose id (pk#sk, the history index's partition
    // key) is over DynamoDB's 2048 bytes.
    let long_pk = format!("PRODUCT#t1#{}", "x".repeat(2030));
    let long = command_item(&long_pk, &"L".repeat(20), 1);
    assert!(long.pk.len() <= 2048 && long.id.len() > 2048);
    store
        .put_command(&long, None)
        .await
        .expect("the long-key row");
    // S: a command item just under 400 KB, whose data-table form (with cpk/csk) is over it.
    let mut large = command_item("PRODUCT#t1", "S", 1);
    large
        .attributes
        .insert("blob".into(), cqrs_item::Value::from(""));
    let base_size = item_size(&large.to_attributes().unwrap());
    large.attributes.insert(
        "blob".into(),
        cqrs_item::Value::from("x".repeat(MAX_ITEM_BYTES - 8 - base_size)),
    );
    store
        .put_command(&large, None)
        .await
        .expect("the large row");
    assert!(large.stored_size().unwrap() > MAX_ITEM_BYTES);
    // C: an unrelated item.
    send(json!({"pk": "PRODUCT#t1", "sk": "C", "version": 0, "name": "c1"})).await;
    send(json!({"pk": "PRODUCT#t1", "sk": "C", "version": 1, "name": "c2"})).await;

    // DynamoDB itself refuses the over-limit versions: retrying them could never succeed.
    assert!(
        refused(&tables, &tables.history, &long).await,
        "the long id is refused"
    );
    assert!(
        refused(&tables, &tables.data, &large.clone().into_data_item()).await,
        "the large data item is refused"
    );

    let total = 12;
    let event = stream_event(&tables, total).await;
    assert_eq!(event.records.len(), total);
    let sync = DataSync::new(store.clone());
    let (response, counts) = sync.handle_counted(event.clone()).await;

    // One invocation: nothing reported, the five permanent failures parked, the rest projected.
    assert_eq!(sequence_numbers(&response), Vec::<String>::new());
    assert_eq!(counts.parked, 5, "{counts:?}");
    assert_eq!(counts.projected, 7, "{counts:?}");
    let parked = store.list_parked(Some("t1"), None).await.unwrap();
    let mut kinds: HashMap<String, (String, String)> = parked
        .iter()
        .map(|p| {
            (
                p.sequence_number.clone(),
                (p.reason_kind.clone(), p.reason.clone()),
            )
        })
        .collect();
    let expect = [
        ("A@99", "malformed", "NewImage"),
        ("B@2", "history-conflict", "different content"),
        ("D@2", "history-conflict", "different content"),
        (long.sk.as_str(), "over-limit", "id"),
        ("S@1", "over-limit", "item limit"),
    ];
    for (sk, kind, says) in expect {
        let (got_kind, reason) = kinds
            .remove(&sequence_of(&event, sk))
            .unwrap_or_else(|| panic!("{sk} is not parked: {parked:?}"));
        assert_eq!(got_kind, kind, "{sk}");
        assert!(reason.contains(says), "{sk}: {reason}");
    }
    assert!(kinds.is_empty(), "parked besides: {kinds:?}");
    for p in &parked {
        assert_eq!(p.event_name, "INSERT");
        match p.record.as_deref() {
            // The record is kept as Lambda delivered it, ready to be redriven.
            Some(text) => {
                let record: Value = serde_json::from_str(text).unwrap();
                assert_eq!(record["dynamodb"]["SequenceNumber"], p.sequence_number);
            }
            // Too large to keep beside its reason: the command row's key says where it is.
            None => assert_eq!(
                (p.item_pk.as_deref(), p.item_sk.as_deref()),
                (Some("PRODUCT#t1"), Some("S@1"))
            ),
        }
    }
    // One item's parked records, by the item's id.
    let of_a = store
        .list_parked(Some("t1"), Some("PRODUCT#t1#A"))
        .await
        .unwrap();
    assert_eq!(of_a.len(), 1);
    assert_eq!(of_a[0].item_sk.as_deref(), Some("A@99"));

    // Later records of the same items projected; history first: D's refused version 2 never
    // reached the data table.
    let versions: Vec<Option<i64>> =
        futures::future::join_all(["A", "B", "C", "D", "S"].map(|base| read_version(&stack, base)))
            .await;
    assert_eq!(versions, [Some(2), Some(3), Some(2), Some(1), None]);
    let history: HashSet<String> = scan_items(&tables, &tables.history)
        .await
        .into_iter()
        .map(|i| i.sk)
        .collect();
    for sk in [
        "A@1", "A@2", "B@1", "B@2", "B@3", "C@1", "C@2", "D@1", "D@2",
    ] {
        assert!(history.contains(sk), "history lacks {sk}");
    }
    assert_eq!(history.len(), 9, "{history:?}");

    // A redelivery of the same batch changes nothing and parks nothing twice.
    let (again, counts_again) = sync.handle_counted(event).await;
    assert!(again.batch_item_failures.is_empty());
    assert_eq!(counts_again.parked, 5);
    assert_eq!(store.list_parked(Some("t1"), None).await.unwrap().len(), 5);

    println!(
        "permanent failures: {} parked (1 malformed, 2 history conflicts, 1 key over the limit, \
         1 too large), {} retried, {} valid projected; data table never ahead of history",
        counts.parked,
        response.batch_item_failures.len(),
        counts.projected
    );
}

/// The real store, failing chosen writes with `Throttled` (as if the store's own retries were
/// exhausted) the first `times` times each is attempted, and parks the first `park_failures` times.
struct Flaky {
    inner: Store,
    history_faults: Mutex<HashMap<String, usize>>,
    park_failures: Mutex<usize>,
}

impl Flaky {
    fn new(inner: Store, history_faults: &[(&str, usize)], park_failures: usize) -> Self {
        Flaky {
            inner,
            history_faults: Mutex::new(
                history_faults
                    .iter()
                    .map(|(sk, n)| (sk.to_string(), *n))
                    .collect(),
            ),
            park_failures: Mutex::new(park_failures),
        }
    }
}

fn take(left: &mut usize) -> bool {
    let fail = *left > 0;
    *left = left.saturating_sub(1);
    fail
}

impl ProjectionWriter for Flaky {
    fn put_data_if_newer<'a>(
        &'a self,
        item: &'a Item,
    ) -> BoxFuture<'a, Result<DataWrite, StoreError>> {
        self.inner.put_data_if_newer(item).boxed()
    }

    fn put_history<'a>(
        &'a self,
        item: &'a Item,
    ) -> BoxFuture<'a, Result<HistoryWrite, StoreError>> {
        let fail = self
            .history_faults
            .lock()
            .unwrap()
            .get_mut(&item.sk)
            .is_some_and(take);
        async move {
            if fail {
                return Err(StoreError::Throttled(format!("injected: {}", item.sk)));
            }
            self.inner.put_history(item).await
        }
        .boxed()
    }

    fn park<'a>(
        &'a self,
        record: &'a ParkedRecord,
    ) -> BoxFuture<'a, Result<ParkWrite, StoreError>> {
        let fail = take(&mut self.park_failures.lock().unwrap());
        async move {
            if fail {
                return Err(StoreError::Throttled("injected: park".into()));
            }
            self.inner.park(record).await
        }
        .boxed()
    }
}

#[tokio::test]
async fn throttled_writes_are_retried_not_parked() {
    let tables = cqrs_testkit::fresh_tables().await;
    let store = parking_store(&tables);
    let commands = [
        command_item("PRODUCT#t1", "P", 1),
        command_item("PRODUCT#t1", "P", 2),
        command_item("PRODUCT#t1", "Q", 1),
        command_item("PRODUCT#t1", "R", 1),
    ];
    for item in &commands {
        store.put_command(item, None).await.unwrap();
    }
    let event = stream_event(&tables, commands.len()).await;
    // P@1 throttled twice, R@1 once.
    let sync = DataSync::new(Flaky::new(store.clone(), &[("P@1", 2), ("R@1", 1)], 0));

    let (reports, counts) = run_like_lambda(&sync, event.clone()).await;

    assert_eq!(
        reports[0],
        [sequence_of(&event, "P@1"), sequence_of(&event, "R@1")],
        "the throttled records are reported"
    );
    assert_eq!(reports.len(), 3, "{reports:?}");
    assert_eq!(counts.parked, 0);
    assert!(
        store
            .list_parked(Some("t1"), None)
            .await
            .unwrap()
            .is_empty()
    );
    let data: Vec<(String, i64)> = scan_items(&tables, &tables.data)
        .await
        .into_iter()
        .map(|i| (i.sk, i.version))
        .collect();
    assert_eq!(
        data,
        [("P".to_string(), 2), ("Q".into(), 1), ("R".into(), 1)]
    );
    assert_eq!(scan_items(&tables, &tables.history).await.len(), 4);
    println!(
        "transient failures: 3 throttled writes, {} retried, {} parked, {} invocations until all {} \
         records projected",
        counts.retried,
        counts.parked,
        reports.len(),
        commands.len()
    );
}

#[tokio::test]
async fn a_failing_park_write_is_retried_not_dropped() {
    let tables = cqrs_testkit::fresh_tables().await;
    let store = parking_store(&tables);
    store
        .put_command(&command_item("PRODUCT#t1", "M", 1), None)
        .await
        .unwrap();
    put_malformed(&tables, "PRODUCT#t1", "M@2").await;
    store
        .put_command(&command_item("PRODUCT#t1", "M", 3), None)
        .await
        .unwrap();
    store
        .put_command(&command_item("PRODUCT#t1", "N", 1), None)
        .await
        .unwrap();
    let event = stream_event(&tables, 4).await;

    // Parking fails twice: the malformed record is reported each time, its item waits behind it,
    // the other item goes on; the third attempt parks it and everything after it projects.
    let sync = DataSync::new(Flaky::new(store.clone(), &[], 2));
    let (reports, counts) = run_like_lambda(&sync, event.clone()).await;
    let m2 = sequence_of(&event, "M@2");
    assert_eq!(reports, [vec![m2.clone()], vec![m2.clone()], vec![]]);
    let parked = store.list_parked(Some("t1"), None).await.unwrap();
    assert_eq!(parked.len(), 1);
    assert_eq!(parked[0].sequence_number, m2);
    let data: Vec<(String, i64)> = scan_items(&tables, &tables.data)
        .await
        .into_iter()
        .map(|i| (i.sk, i.version))
        .collect();
    assert_eq!(data, [("M".to_string(), 3), ("N".into(), 1)]);

    // Without a parked table at all, the record is reported every time, never acknowledged.
    let unparked = Store::new(
        tables.client.clone(),
        Tables::new(
            &tables.command,
            &tables.data,
            &tables.history,
            &tables.idempotency,
        ),
    );
    let mut reported_without_table = 0;
    for _ in 0..3 {
        let response = DataSync::new(unparked.clone()).handle(event.clone()).await;
        assert_eq!(sequence_numbers(&response), std::slice::from_ref(&m2));
        reported_without_table += 1;
    }
    println!(
        "failing park writes: 2 failed parks, {} retried, 0 dropped, parked on attempt 3; \
         without a parked table: {reported_without_table} of 3 deliveries reported, 0 acknowledged",
        counts.retried
    );
}

#[tokio::test]
async fn versions_at_i64_max_project_and_one_past_it_is_parked() {
    let tables = cqrs_testkit::fresh_tables().await;
    let store = parking_store(&tables);
    let max = command_item("PRODUCT#t1", "V", i64::MAX);
    let below = command_item("PRODUCT#t1", "V", i64::MAX - 1);
    // The newest first: the older one must not overwrite it.
    store.put_command(&max, None).await.unwrap();
    store.put_command(&below, None).await.unwrap();
    // A row whose sk names a version past i64::MAX.
    let mut past = command_item("PRODUCT#t1", "W", 1);
    past.sk = "W@9223372036854775808".into();
    store.put_command(&past, None).await.unwrap();
    let event = stream_event(&tables, 3).await;

    let (response, counts) = DataSync::new(store.clone()).handle_counted(event).await;

    assert!(response.batch_item_failures.is_empty());
    assert_eq!((counts.projected, counts.parked), (2, 1));
    let data = scan_items(&tables, &tables.data).await;
    assert_eq!(data.len(), 1);
    assert_eq!(data[0].version, i64::MAX);
    let history: Vec<i64> = scan_items(&tables, &tables.history)
        .await
        .into_iter()
        .map(|i| i.version)
        .collect();
    assert_eq!(history.len(), 2);
    let parked = store.list_parked(Some("t1"), None).await.unwrap();
    assert_eq!(parked.len(), 1);
    assert_eq!(parked[0].item_sk.as_deref(), Some("W@9223372036854775808"));
    assert_eq!(parked[0].version, None);
    println!(
        "versions near i64::MAX in data-sync: {} projected (data table at {}), {} past i64::MAX \
         parked, 0 overflows",
        counts.projected, data[0].version, counts.parked
    );
}
