//! Test harness of data-sync: commands written into a fresh command table, its DynamoDB Local
//! stream turned into Lambda events (`cqrs_testkit::stream_event`), projections into fresh data and
//! history tables, and writers/targets that inject faults or record what they saw.

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use aws_lambda_events::event::streams::DynamoDbEventResponse;
use aws_sdk_dynamodb::types::AttributeValue;
use cqrs_data_sync::{Change, DataSync, ProjectionWriter, SyncTarget, TargetError};
use cqrs_item::Item;
use cqrs_keys::{add_sort_key_version, generate_id};
use cqrs_store::{
    Store, StoreError, Tables,
    parked::{ParkWrite, ParkedRecord},
    projection::{DataWrite, HistoryWrite},
};
use cqrs_testkit::TestTables;
use futures::future::{BoxFuture, FutureExt};

/// A store on `tables`, with the parked table.
pub fn store(tables: &TestTables) -> Store {
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

/// Every raw item of the parked table.
pub async fn parked(tables: &TestTables) -> Vec<HashMap<String, AttributeValue>> {
    tables
        .client
        .scan()
        .table_name(&tables.parked)
        .consistent_read(true)
        .send()
        .await
        .unwrap()
        .items()
        .to_vec()
}

/// Version `version` of item `pk` / `base`, as the command handler would write it.
pub fn command(pk: &str, base: &str, version: i64) -> Item {
    let mut item = Item::example();
    let tenant = cqrs_keys::tenant_code(pk).unwrap_or("t1").to_string();
    item.pk = pk.into();
    item.sk = add_sort_key_version(base, version);
    item.id = generate_id(pk, base);
    item.code = base.into();
    item.name = format!("{base} v{version}");
    item.version = version;
    item.tenant_code = tenant;
    item.item_type = pk.split('#').next().unwrap_or_default().into();
    item.attributes.insert("v".into(), version.into());
    item.updated_at = format!(
        "2026-01-{:02}T00:00:{:02}.000Z",
        1 + version % 28,
        version % 60
    );
    item
}

/// Writes `items` into the command table (each a new version) and returns the Lambda event of the
/// command table's stream holding them, in stream order.
pub async fn commands_to_event(tables: &TestTables, items: &[Item]) -> Event {
    let store = store(tables);
    for item in items {
        store.put_command(item, None).await.unwrap();
    }
    stream_event(tables, items.len()).await
}

/// The command table's stream (at least `min` records) as the Lambda event.
pub async fn stream_event(tables: &TestTables, min: usize) -> Event {
    let records = tables.command_stream_records(min).await;
    let arn = tables.command_stream_arn().await;
    cqrs_testkit::stream_event::lambda_event(&records, &arn).unwrap()
}

/// An event of these records.
pub fn event_of(records: Vec<EventRecord>) -> Event {
    let mut event = Event::default();
    event.records = records;
    event
}

/// The sequence numbers a response reports.
pub fn reported(response: &DynamoDbEventResponse) -> Vec<String> {
    response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.clone().unwrap_or_default())
        .collect()
}

pub fn sequence_number(record: &EventRecord) -> String {
    record.change.sequence_number.clone().unwrap()
}

/// What Lambda does with `ReportBatchItemFailures`: invoke, and while records are reported,
/// invoke again with the batch from the lowest reported record on. Returns every response.
pub async fn run_like_lambda(
    sync: &DataSync,
    event: Event,
    max_invocations: usize,
) -> Vec<Vec<String>> {
    let mut records = event.records;
    let mut responses = Vec::new();
    for _ in 0..max_invocations {
        let response = sync.handle(event_of(records.clone())).await;
        let failures = reported(&response);
        responses.push(failures.clone());
        let Some(position) = records
            .iter()
            .position(|r| failures.contains(&sequence_number(r)))
        else {
            return responses;
        };
        records = records.split_off(position);
    }
    panic!("no convergence after {max_invocations} invocations: {responses:?}");
}

/// Every item of `table`, by `pk`, `sk`.
pub async fn scan(tables: &TestTables, table: &str) -> Vec<Item> {
    let mut items = Vec::new();
    let mut pages = tables
        .client
        .scan()
        .table_name(table)
        .consistent_read(true)
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        for attributes in page.unwrap().items() {
            items.push(Item::from_attributes(attributes.clone()).unwrap());
        }
    }
    items.sort_by(|a, b| (&a.pk, &a.sk).cmp(&(&b.pk, &b.sk)));
    items
}

/// What the data table must hold for `commands`: the newest version of every item, in data form.
pub fn expected_data(commands: &[Item]) -> Vec<Item> {
    let mut newest: BTreeMap<(String, String), Item> = BTreeMap::new();
    for item in commands {
        let key = (item.pk.clone(), item.base_sk().to_string());
        if newest.get(&key).is_none_or(|n| n.version < item.version) {
            newest.insert(key, item.clone());
        }
    }
    newest.into_values().map(Item::into_data_item).collect()
}

/// What the history table must hold: every version, as written.
pub fn expected_history(commands: &[Item]) -> Vec<Item> {
    let mut all: Vec<Item> = commands.to_vec();
    all.sort_by(|a, b| (&a.pk, &a.sk).cmp(&(&b.pk, &b.sk)));
    all.dedup();
    all
}

/// Asserts the data and history tables of `tables` hold exactly what `commands` project to.
pub async fn assert_converged(tables: &TestTables, commands: &[Item]) {
    assert_eq!(
        scan(tables, &tables.data).await,
        expected_data(commands),
        "data table"
    );
    assert_eq!(
        scan(tables, &tables.history).await,
        expected_history(commands),
        "history table"
    );
}

/// Which write a fault hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    Data,
    History,
}

/// Wraps the real store and fails chosen writes with `Throttled` (as if the store's retries were
/// exhausted), each the first `times` times it is attempted.
pub struct FaultInjector {
    inner: Store,
    faults: Mutex<HashMap<(Op, String), usize>>,
}

impl FaultInjector {
    /// Faults on the given writes (operation and command `sk`), each failing `times` times.
    pub fn new(inner: Store, faults: impl IntoIterator<Item = (Op, String)>, times: usize) -> Self {
        FaultInjector {
            inner,
            faults: Mutex::new(faults.into_iter().map(|f| (f, times)).collect()),
        }
    }

    /// Faults chosen by `seed`: each write of each of `items` fails once with probability
    /// `percent`, decided by a hash of the seed, the operation and the key (reproducible).
    pub fn seeded(
        inner: Store,
        items: &[Item],
        seed: u64,
        percent: u64,
    ) -> (Self, HashSet<(Op, String)>) {
        let mut chosen = HashSet::new();
        for item in items {
            for op in [Op::Data, Op::History] {
                let text = format!("{seed}/{op:?}/{}/{}", item.pk, item.sk);
                if cqrs_keys::fnv1a_64(text.as_bytes()) % 100 < percent {
                    chosen.insert((op, item.sk.clone()));
                }
            }
        }
        (Self::new(inner, chosen.clone(), 1), chosen)
    }

    fn fault(&self, op: Op, item: &Item) -> Option<StoreError> {
        let mut faults = self.faults.lock().unwrap();
        let left = faults.get_mut(&(op, item.sk.clone()))?;
        if *left == 0 {
            return None;
        }
        *left -= 1;
        Some(StoreError::Throttled(format!(
            "injected: {op:?} {}",
            item.sk
        )))
    }
}

impl ProjectionWriter for FaultInjector {
    fn put_data_if_newer<'a>(
        &'a self,
        item: &'a Item,
    ) -> BoxFuture<'a, Result<DataWrite, StoreError>> {
        async move {
            match self.fault(Op::Data, item) {
                Some(error) => Err(error),
                None => self.inner.put_data_if_newer(item).await,
            }
        }
        .boxed()
    }

    fn put_history<'a>(
        &'a self,
        item: &'a Item,
    ) -> BoxFuture<'a, Result<HistoryWrite, StoreError>> {
        async move {
            match self.fault(Op::History, item) {
                Some(error) => Err(error),
                None => self.inner.put_history(item).await,
            }
        }
        .boxed()
    }

    fn park<'a>(
        &'a self,
        record: &'a ParkedRecord,
    ) -> BoxFuture<'a, Result<ParkWrite, StoreError>> {
        self.inner.park(record).boxed()
    }
}

/// Wraps a writer and records how writes overlapped: the most in flight at once, overall and per
/// item, and the order each item's versions were written in.
pub struct Observer<W> {
    inner: W,
    delay: Duration,
    in_flight: AtomicUsize,
    pub max_in_flight: AtomicUsize,
    per_item: Mutex<HashMap<String, usize>>,
    pub max_per_item: AtomicUsize,
    pub order: Mutex<HashMap<String, Vec<i64>>>,
}

impl<W: ProjectionWriter> Observer<W> {
    pub fn new(inner: W, delay: Duration) -> Self {
        Observer {
            inner,
            delay,
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            per_item: Mutex::new(HashMap::new()),
            max_per_item: AtomicUsize::new(0),
            order: Mutex::new(HashMap::new()),
        }
    }

    async fn observe<T>(&self, item: &Item, write: BoxFuture<'_, T>) -> T {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        {
            let mut per_item = self.per_item.lock().unwrap();
            let n = per_item.entry(item.id.clone()).or_default();
            *n += 1;
            self.max_per_item.fetch_max(*n, Ordering::SeqCst);
        }
        // Hold the write open a moment so that overlapping writes really overlap.
        tokio::time::sleep(self.delay).await;
        let result = write.await;
        *self.per_item.lock().unwrap().get_mut(&item.id).unwrap() -= 1;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        result
    }
}

impl<W: ProjectionWriter> ProjectionWriter for Observer<W> {
    fn put_data_if_newer<'a>(
        &'a self,
        item: &'a Item,
    ) -> BoxFuture<'a, Result<DataWrite, StoreError>> {
        async move {
            self.order
                .lock()
                .unwrap()
                .entry(item.id.clone())
                .or_default()
                .push(item.version);
            self.observe(item, self.inner.put_data_if_newer(item)).await
        }
        .boxed()
    }

    fn put_history<'a>(
        &'a self,
        item: &'a Item,
    ) -> BoxFuture<'a, Result<HistoryWrite, StoreError>> {
        // History and data of one version are written together; count the pair once per item.
        self.inner.put_history(item)
    }

    fn park<'a>(
        &'a self,
        record: &'a ParkedRecord,
    ) -> BoxFuture<'a, Result<ParkWrite, StoreError>> {
        self.inner.park(record)
    }
}

/// A target that records every change it gets and fails for chosen command `sk`s until healed.
#[derive(Default)]
pub struct Recorder {
    pub seen: Mutex<Vec<(String, i64, DataWrite)>>,
    pub failing: Mutex<HashSet<String>>,
}

impl SyncTarget for Recorder {
    fn name(&self) -> &str {
        "recorder"
    }

    fn apply<'a>(&'a self, change: &'a Change) -> BoxFuture<'a, Result<(), TargetError>> {
        async move {
            if self.failing.lock().unwrap().contains(&change.item.sk) {
                return Err(format!("recorder refuses {}", change.item.sk).into());
            }
            self.seen.lock().unwrap().push((
                change.item.id.clone(),
                change.item.version,
                change.data,
            ));
            Ok(())
        }
        .boxed()
    }
}

/// The string attribute `name` of a raw item.
pub fn s(attributes: &HashMap<String, AttributeValue>, name: &str) -> String {
    attributes[name].as_s().unwrap().clone()
}
