//! Projection under faults: 10 000 commands over many items written into the command table, its
//! DynamoDB Local stream cut into batches that are delivered to the real data-sync handler
//! shuffled, duplicated and replayed, while a fault-injecting [`ProjectionWriter`] fails writes at
//! random, before or after they land. Every delivery runs as Lambda runs it with
//! `ReportBatchItemFailures`: invoke, and while records are reported, invoke again from the lowest
//! reported record on.
//!
//! In the end the data table must equal the newest version of every item and the history table
//! must hold every version, exactly. Then the data table's own stream (what data-sync wrote) goes to
//! sql-sync, shuffled, duplicated and replayed, delivered by the local stream mapping's own code
//! (`cqrs_local_stack::mapper::deliver`, Lambda's rule), with every PostgreSQL connection dropped
//! before some deliveries; PostgreSQL must end equal to the data table, nothing dead-lettered.
//!
//! Everything random comes from one seed (printed; `RELIABILITY_SEED=<seed>` replays a run). Fault
//! decisions hash the seed with the delivery, the invocation, the write and the key, so they do
//! not depend on how concurrent writes interleave.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use common::{Rng, command_item, mix, scan_items, seed, store};
use cqrs_data_sync::{DataSync, ProjectionWriter};
use cqrs_item::Item;
use cqrs_store::{
    Store, StoreError,
    parked::{ParkWrite, ParkedRecord},
    projection::{DataWrite, HistoryWrite},
};
use futures::StreamExt;
use futures::future::{BoxFuture, FutureExt};

const COMMANDS: usize = 10_000;
const DEFAULT_SEED: u64 = 0x5EED_C0DE_2026;
/// Per mille of write attempts that fail before writing.
const FAULT_BEFORE: u64 = 4;
/// Per mille of write attempts that write, then fail (a timeout after success).
const FAULT_AFTER: u64 = 2;
/// Deliveries in flight at once (as with several shards, or a retry overlapping the original).
const DELIVERY_CONCURRENCY: usize = 4;

#[derive(Default)]
struct Stats {
    faults_before: AtomicUsize,
    faults_after: AtomicUsize,
    invocations: AtomicUsize,
    records_delivered: AtomicUsize,
    reported: AtomicUsize,
}

/// The real store, failing writes as the seed decides for one invocation of one delivery.
struct Faulty {
    inner: Store,
    seed: u64,
    delivery: u64,
    invocation: u64,
    stats: Arc<Stats>,
}

enum Fault {
    None,
    Before,
    After,
}

impl Faulty {
    fn decide(&self, op: &str, item: &Item) -> Fault {
        let key = cqrs_keys::fnv1a_64(format!("{op}|{}|{}", item.pk, item.sk).as_bytes());
        let h = mix(self.seed ^ mix(self.delivery << 24 ^ self.invocation) ^ key) % 1000;
        if h < FAULT_BEFORE {
            Fault::Before
        } else if h < FAULT_BEFORE + FAULT_AFTER {
            Fault::After
        } else {
            Fault::None
        }
    }

    async fn write<T>(
        &self,
        op: &str,
        item: &Item,
        write: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        match self.decide(op, item) {
            Fault::None => write.await,
            Fault::Before => {
                self.stats.faults_before.fetch_add(1, Ordering::Relaxed);
                Err(StoreError::Throttled(format!(
                    "injected before {op} {}",
                    item.sk
                )))
            }
            Fault::After => {
                write.await?;
                self.stats.faults_after.fetch_add(1, Ordering::Relaxed);
                Err(StoreError::Dynamo(format!(
                    "injected after {op} {} (the write landed)",
                    item.sk
                )))
            }
        }
    }
}

impl ProjectionWriter for Faulty {
    fn put_data_if_newer<'a>(
        &'a self,
        item: &'a Item,
    ) -> BoxFuture<'a, Result<DataWrite, StoreError>> {
        self.write("data", item, self.inner.put_data_if_newer(item))
            .boxed()
    }

    fn put_history<'a>(
        &'a self,
        item: &'a Item,
    ) -> BoxFuture<'a, Result<HistoryWrite, StoreError>> {
        self.write("history", item, self.inner.put_history(item))
            .boxed()
    }

    /// No record of this test is permanently unprojectable; a park would be a defect, and the
    /// store here has no parked table, so it would be reported and fail the run.
    fn park<'a>(
        &'a self,
        record: &'a ParkedRecord,
    ) -> BoxFuture<'a, Result<ParkWrite, StoreError>> {
        self.inner.park(record).boxed()
    }
}

/// The commands: items of several tenants and prefixes, 1 to 25 versions each, some soft-deleted
/// at the end, `COMMANDS` versions in all. One inner vector per item, in version order.
fn plan(rng: &mut Rng) -> Vec<Vec<Item>> {
    let mut items = Vec::new();
    let mut total = 0;
    while total < COMMANDS {
        let n = items.len();
        let tenant = format!("t{}", 1 + rng.below(5));
        let (pk, base) = match rng.below(3) {
            0 => (format!("PRODUCT#{tenant}"), format!("P{n:05}")),
            1 => (format!("ORDER#{tenant}"), format!("ORDER#o{n:05}")),
            _ => (format!("MASTER#{tenant}"), format!("SETTING#app#k{n:05}")),
        };
        let count = rng.range(1, 25).min(COMMANDS - total);
        let deleted = rng.chance(40);
        let versions: Vec<Item> = (1..=count as i64)
            .map(|v| {
                let mut item = command_item(&pk, &base, v);
                item.attributes
                    .insert("r".into(), (rng.below(1_000_000) as i64).into());
                item.updated_at = format!("2026-01-01T00:00:{:02}.{v:03}Z", v % 60);
                item.is_deleted = deleted && v == count as i64;
                item
            })
            .collect();
        total += versions.len();
        items.push(versions);
    }
    items
}

fn event_of(records: &[EventRecord]) -> Event {
    let mut event = Event::default();
    event.records = records.to_vec();
    event
}

fn sequence_number(record: &EventRecord) -> &str {
    record.change.sequence_number.as_deref().unwrap_or_default()
}

/// What Lambda does with one batch and `ReportBatchItemFailures`: invoke; while records are
/// reported, invoke again from the lowest reported record on.
async fn deliver(
    store: &Store,
    seed: u64,
    delivery: u64,
    records: &[EventRecord],
    stats: &Arc<Stats>,
) {
    let mut from = 0;
    for invocation in 0.. {
        assert!(
            invocation < 500,
            "delivery {delivery} does not converge (seed {seed})"
        );
        let sync = DataSync::new(Faulty {
            inner: store.clone(),
            seed,
            delivery,
            invocation,
            stats: stats.clone(),
        });
        let batch = &records[from..];
        stats.invocations.fetch_add(1, Ordering::Relaxed);
        stats
            .records_delivered
            .fetch_add(batch.len(), Ordering::Relaxed);
        let response = sync.handle(event_of(batch)).await;
        if response.batch_item_failures.is_empty() {
            return;
        }
        stats
            .reported
            .fetch_add(response.batch_item_failures.len(), Ordering::Relaxed);
        let positions: Vec<usize> = response
            .batch_item_failures
            .iter()
            .map(|f| {
                let id = f.item_identifier.as_deref().unwrap_or_default();
                batch
                    .iter()
                    .position(|r| sequence_number(r) == id)
                    .unwrap_or_else(|| panic!("reported {id:?} is not in the batch"))
            })
            .collect();
        from += positions.into_iter().min().expect("a failure");
    }
}

#[tokio::test]
async fn ten_thousand_commands_survive_shuffled_duplicated_replayed_batches_and_write_faults() {
    let seed = seed(DEFAULT_SEED);
    println!("projection under faults: seed {seed} (replay with RELIABILITY_SEED={seed})");
    let mut rng = Rng::new(seed);
    let started = std::time::Instant::now();
    let tables = cqrs_testkit::fresh_tables().await;
    let store = store(&tables);

    // 1. The commands, written concurrently (each item's versions in order).
    let items = plan(&mut rng);
    let commands: Vec<Item> = items.iter().flatten().cloned().collect();
    assert_eq!(commands.len(), COMMANDS);
    futures::stream::iter(items.iter())
        .map(|versions| {
            let store = &store;
            async move {
                for item in versions {
                    store
                        .put_command(item, None)
                        .await
                        .unwrap_or_else(|e| panic!("writing {}: {e}", item.sk));
                }
            }
        })
        .buffer_unordered(64)
        .collect::<Vec<()>>()
        .await;

    let written = started.elapsed();

    // 2. The command table's stream, as Lambda records.
    let stream = tables.command_stream_records(COMMANDS).await;
    assert_eq!(stream.len(), COMMANDS, "one INSERT per command");
    let arn = tables.command_stream_arn().await;
    let mut records = cqrs_testkit::stream_event::lambda_event(&stream, &arn)
        .expect("a Lambda event")
        .records;
    // The stream orders the versions of each item (and nothing across items): check that, then
    // put the records into one interleaving chosen by the seed, keeping each item's order, so a
    // seed replays the same batches whatever order the concurrent writes landed in.
    let key = |record: &EventRecord| {
        let s = |name: &str| match record.change.keys.get(name) {
            Some(serde_dynamo::AttributeValue::S(s)) => s.clone(),
            other => panic!("a record without {name}: {other:?}"),
        };
        (s("pk"), s("sk"))
    };
    let mut seen: HashMap<(String, String), i64> = HashMap::new();
    for record in &records {
        let (pk, sk) = key(record);
        let version = cqrs_keys::sort_key_version(&sk);
        let base = cqrs_keys::remove_sort_key_version(&sk).to_string();
        let last = seen.insert((pk, base), version).unwrap_or(0);
        assert_eq!(
            version,
            last + 1,
            "the stream holds {sk} right after version {last}"
        );
    }
    let mut position: HashMap<(String, String), usize> = HashMap::new();
    let mut next = vec![0; items.len()];
    let mut remaining: Vec<usize> = (0..items.len()).collect();
    while !remaining.is_empty() {
        let pick = rng.below(remaining.len() as u64) as usize;
        let i = remaining[pick];
        let item = &items[i][next[i]];
        position.insert((item.pk.clone(), item.sk.clone()), position.len());
        next[i] += 1;
        if next[i] == items[i].len() {
            remaining.swap_remove(pick);
        }
    }
    records.sort_by_key(|record| position[&key(record)]);

    // 3. Deliveries: every batch once, some twice, some windows of the stream again; shuffled.
    let mut deliveries: Vec<std::ops::Range<usize>> = Vec::new();
    let (mut batches, mut duplicates, mut replays) = (0, 0, 0);
    let mut start = 0;
    while start < records.len() {
        let end = (start + rng.range(1, 100)).min(records.len());
        deliveries.push(start..end);
        batches += 1;
        if rng.chance(100) {
            deliveries.push(start..end);
            duplicates += 1;
        }
        start = end;
    }
    for _ in 0..5 {
        let from = rng.below(records.len() as u64) as usize;
        let to = (from + rng.range(50, 300)).min(records.len());
        deliveries.push(from..to);
        replays += 1;
    }
    rng.shuffle(&mut deliveries);

    // 4. Project them, a few deliveries at a time.
    let stats = Arc::new(Stats::default());
    futures::stream::iter(deliveries.iter().cloned().enumerate())
        .map(|(index, range)| {
            let (store, records, stats) = (&store, &records, &stats);
            async move { deliver(store, seed, index as u64, &records[range], stats).await }
        })
        .buffer_unordered(DELIVERY_CONCURRENCY)
        .collect::<Vec<()>>()
        .await;

    let projected = started.elapsed();

    // 5. The data table: the newest version of every item; the history: every version.
    let mut newest: BTreeMap<(String, String), Item> = BTreeMap::new();
    for item in &commands {
        let key = (item.pk.clone(), item.base_sk().to_string());
        if newest.get(&key).is_none_or(|n| n.version < item.version) {
            newest.insert(key, item.clone());
        }
    }
    let expected_data: Vec<Item> = newest.into_values().map(Item::into_data_item).collect();
    let mut expected_history = commands.clone();
    expected_history.sort_by(|a, b| (&a.pk, &a.sk).cmp(&(&b.pk, &b.sk)));

    let data = scan_items(&tables, &tables.data).await;
    let history = scan_items(&tables, &tables.history).await;
    let data_wrong = data
        .iter()
        .zip(&expected_data)
        .filter(|(got, want)| got != want)
        .count();
    let history_wrong = history
        .iter()
        .zip(&expected_history)
        .filter(|(got, want)| got != want)
        .count();
    let faults_before = stats.faults_before.load(Ordering::Relaxed);
    let faults_after = stats.faults_after.load(Ordering::Relaxed);
    println!(
        "projection under faults: seed {seed}: {} commands over {} items; {} deliveries \
         ({batches} batches, {duplicates} duplicated, {replays} replayed windows, shuffled); \
         {} invocations, {} records delivered, {} failures reported; {} write faults injected \
         ({faults_before} before the write, {faults_after} after it landed); \
         commands written in {:.1?}, projected by {:.1?}",
        commands.len(),
        items.len(),
        deliveries.len(),
        stats.invocations.load(Ordering::Relaxed),
        stats.records_delivered.load(Ordering::Relaxed),
        stats.reported.load(Ordering::Relaxed),
        faults_before + faults_after,
        written,
        projected,
    );
    assert!(
        faults_before > 0 && faults_after > 0,
        "faults were injected"
    );
    assert_eq!(
        data.len(),
        expected_data.len(),
        "data table items (seed {seed})"
    );
    assert_eq!(data_wrong, 0, "data table items differ (seed {seed})");
    assert_eq!(
        history.len(),
        expected_history.len(),
        "history versions (seed {seed})"
    );
    assert_eq!(history_wrong, 0, "history versions differ (seed {seed})");
    println!(
        "projection under faults: checked {} items in the data table (each the newest version) \
         and {} versions in the history table: all equal",
        expected_data.len(),
        expected_history.len()
    );

    // 6. The relational read model: the data table's stream, into sql-sync under the same kind of
    //    chaos (shuffled, duplicated and replayed batches), with PostgreSQL dropping every
    //    connection before some deliveries. PostgreSQL must end equal to the data table.
    sql_under_faults(&tables, &mut rng, seed, &data).await;
}

/// sql-sync, invoked in process by the local stream mapping (`cqrs_local_stack::mapper::deliver`:
/// Lambda's delivery rule, the one the local stack and sql-sync's chaos test use).
struct SqlInProcess<'s>(&'s cqrs_sql_sync::SqlSync);

impl cqrs_local_stack::mapper::Invoke<EventRecord> for SqlInProcess<'_> {
    async fn invoke(
        &self,
        records: &[EventRecord],
    ) -> Result<Vec<String>, cqrs_local_stack::mapper::InvokeError> {
        let response = self.0.handle(event_of(records)).await;
        Ok(response
            .batch_item_failures
            .into_iter()
            .map(|f| f.item_identifier.unwrap_or_default())
            .collect())
    }
}

async fn sql_under_faults(
    tables: &cqrs_testkit::TestTables,
    rng: &mut Rng,
    seed: u64,
    data: &[Item],
) {
    let started = std::time::Instant::now();
    // Every state data-sync wrote, once the stream holds them all (one per item at least).
    let mut stream = tables.data_stream_records(data.len()).await;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let again = tables.data_stream_records(data.len()).await;
    if again.len() > stream.len() {
        stream = again;
    }
    let arn = tables.data_stream_arn().await;
    let records = cqrs_testkit::stream_event::lambda_event(&stream, &arn)
        .expect("a Lambda event")
        .records;

    // A throwaway PostgreSQL, stopped on drop (also when an assertion fails).
    let pg = cqrs_local_stack::postgres::Throwaway::start("reliability-sql").expect("starts");
    let instance = pg.instance();
    let model = cqrs_model::Model::example();
    let schema = cqrs_sql::schema::Schema::of(&model);
    let v1 = cqrs_sql::migrate::plan(None, &schema).unwrap().unwrap();
    let sync = cqrs_sql_sync::SqlSync::new(model.clone(), &instance.url());
    sync.migrate(&[(1, "V1__model.sql", &v1)]).await.unwrap();
    let (admin, connection) = tokio_postgres::connect(&instance.url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);

    let mut deliveries: Vec<std::ops::Range<usize>> = Vec::new();
    let mut start = 0;
    while start < records.len() {
        let end = (start + rng.range(1, 100)).min(records.len());
        deliveries.push(start..end);
        if rng.chance(100) {
            deliveries.push(start..end);
        }
        start = end;
    }
    for _ in 0..5 {
        let from = rng.below(records.len() as u64) as usize;
        deliveries.push(from..(from + rng.range(50, 300)).min(records.len()));
    }
    rng.shuffle(&mut deliveries);
    let failures = std::env::temp_dir().join(format!(
        "reliability-sql-failures-{}.jsonl",
        std::process::id()
    ));
    let config = cqrs_local_stack::mapper::MapperConfig {
        retry_backoff: std::time::Duration::from_millis(1),
        failure_file: failures.clone(),
        ..Default::default()
    };
    let invoker = SqlInProcess(&sync);
    let (mut drops, mut invocations, mut retried, mut dead) = (0, 0, 0, 0);
    for range in &deliveries {
        if rng.chance(50) {
            admin
                .execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                     WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'",
                    &[],
                )
                .await
                .unwrap();
            drops += 1;
        }
        let report = cqrs_local_stack::mapper::deliver(
            &invoker,
            "shard-0",
            &records[range.clone()],
            &config,
        )
        .await;
        invocations += report.invocations;
        retried += report.failed_invocations;
        dead += report.dead_lettered;
    }
    let _ = std::fs::remove_file(&failures);
    assert!(drops > 0, "faults were injected (seed {seed})");
    assert_eq!(
        dead, 0,
        "nothing went to the on-failure destination (seed {seed})"
    );

    let expected: Vec<_> = data
        .iter()
        .map(|item| cqrs_sql::rows::row(&model, &schema, item))
        .collect();
    let differences = cqrs_sql::verify::compare(&admin, &schema, &expected)
        .await
        .unwrap();
    println!(
        "projection under faults: sql-sync: {} data-table records in {} deliveries (shuffled, \
         duplicated, replayed), every connection dropped {drops} times, {invocations} invocations, \
         {retried} failed and retried, {dead} dead-lettered; PostgreSQL checked against {} items \
         in {:.1?}: {} differences",
        records.len(),
        deliveries.len(),
        expected.len(),
        started.elapsed(),
        differences.len()
    );
    assert!(
        differences.is_empty(),
        "PostgreSQL differs from the data table (seed {seed}): {:?}",
        &differences[..differences.len().min(5)]
    );
}
