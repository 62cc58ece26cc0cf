//! sql-sync beside its floor, in one run against one PostgreSQL (a throwaway cluster of the bench's
//! own, on 127.0.0.1): rows per second of [`SqlSync::handle`] on the data table's stream records
//! against raw batched upserts of the same rows into the same tables, and the peak memory of one
//! process handling Lambda's largest stream batch.
//!
//! - **sql-sync**: prepared stream events (`INSERT` of version 1 of every item, then `MODIFY` to
//!   version 2), handed to `handle` batch by batch: each record's image converted into an item and
//!   a row, the batch's changes deduplicated, one transaction per batch with the generic-table and
//!   removal checks, in a few pipelined statements, each chunk under a savepoint
//!   ([`cqrs_sql::write::Writer::write_batch`]).
//! - **the floor**: the same rows, computed before the clock starts, written batch by batch in one
//!   transaction each with the plain statement a hand-written consumer would use, in its faster
//!   form: `INSERT INTO t (...) SELECT ... FROM unnest($1::text[], ...) ON CONFLICT (pk, sk) DO
//!   UPDATE SET ... WHERE t.version < excluded.version` (one text array a column, cast, as sql-sync
//!   sends them; the statement prepared once a run); each batch is freed once written, as sql-sync
//!   frees each event.
//! - **sql-sync's writes alone**: a [`cqrs_sql::write::Writer`] on the same prepared rows (its
//!   statements without the conversion of the records).
//! - **the floor's `VALUES` form**: one tuple a row, a new statement each batch, for comparison.
//!
//! The sides alternate (which goes first alternates too), on emptied tables each time; every run is
//! checked to have written every row. It prints one line per figure and a last line `BENCH_SQL
//! {json}` for `bench/run.py`. It reports, it asserts no speed.
//!
//! `cargo bench -p cqrs-sql-sync --bench throughput`. Knobs: `BENCH_SQL_ITEMS` (10000),
//! `BENCH_SQL_BATCHES` (`100,1000`), `BENCH_SQL_REPEATS` (3), `BENCH_SQL_RSS_RECORDS` (10000:
//! Lambda's largest batch of a DynamoDB stream).

use std::path::Path;
use std::time::Instant;

use aws_lambda_events::event::dynamodb::{Event, EventRecord, StreamViewType};
use cqrs_item::{Item, Value};
use cqrs_local_stack::postgres::Throwaway;
use cqrs_model::Model;
use cqrs_sql::rows::Row;
use cqrs_sql::schema::{Schema, ident};
use cqrs_sql::write::Change;
use cqrs_sql_sync::SqlSync;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, NoTls};

/// A loan of a lending library: typed columns of several kinds, and one attribute the model does
/// not declare (it goes into `attributes jsonb`).
const MODEL: &str = r#"
[entities.loan]
pk = "LOAN#{tenant}"
sk = "{loanId}"
attributes.loanId = { type = "string", required = true, max = 26 }
attributes.memberId = { type = "string", required = true, max = 26 }
attributes.status = { type = "enum", values = ["out", "returned"], required = true }
attributes.fee = { type = "number", width = 6 }
attributes.renewed = { type = "boolean" }
"#;

/// Lambda's limit on an invocation's payload.
const PAYLOAD_LIMIT: usize = 6 * 1024 * 1024;
/// The most PostgreSQL parameters one statement of the `VALUES` floor binds (PostgreSQL allows
/// 65,535).
const MAX_PARAMETERS: usize = 30_000;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn loan(n: usize, version: i64) -> Item {
    let id = format!("L{n:06}");
    let mut item = Item::example();
    item.pk = "LOAN#t1".into();
    item.sk = id.clone();
    item.id = cqrs_keys::generate_id("LOAN#t1", &id);
    item.code = id.clone();
    item.name = format!("loan {n}");
    (item.tenant_code, item.item_type, item.version) = ("t1".into(), "LOAN".into(), version);
    item.cpk = Some("LOAN#t1".into());
    item.csk = Some(cqrs_keys::add_sort_key_version(&id, version));
    item.attributes.clear();
    item.attributes
        .insert("loanId".into(), Value::from(id.as_str()));
    item.attributes
        .insert("memberId".into(), Value::from(format!("M{:04}", n % 997)));
    let status = if version > 1 { "returned" } else { "out" };
    item.attributes.insert("status".into(), Value::from(status));
    item.attributes.insert(
        "fee".into(),
        Value::Number((n % 500).to_string().parse().unwrap()),
    );
    item.attributes
        .insert("renewed".into(), Value::Bool(version > 1));
    item.attributes
        .insert("note".into(), Value::from("shelf 4"));
    item
}

/// The data table's stream record of `item` (`NEW_AND_OLD_IMAGES`: a `MODIFY` carries the
/// version before it too).
fn record(item: &Item, sequence: u64) -> EventRecord {
    let image = item.to_attributes().unwrap();
    let mut keys = image.clone();
    keys.retain(|name, _| name == "pk" || name == "sk");
    let mut record = EventRecord::default();
    record.event_name = if item.version == 1 {
        "INSERT"
    } else {
        "MODIFY"
    }
    .into();
    if item.version > 1 {
        let mut old = item.clone();
        old.version -= 1;
        record.change.old_image = old.to_attributes().unwrap().into();
    }
    record.event_id = format!("{sequence:032x}");
    record.event_source = Some("aws:dynamodb".into());
    record.event_version = Some("1.1".into());
    record.aws_region = "us-east-1".into();
    record.event_source_arn = Some(
        "arn:aws:dynamodb:us-east-1:123456789012:table/data/stream/2026-01-15T10:30:00.000".into(),
    );
    record.change.keys = keys.into();
    record.change.new_image = image.into();
    record.change.stream_view_type = Some(StreamViewType::NewAndOldImages);
    record.change.sequence_number = Some(format!("{sequence:021}"));
    record.change.size_bytes = 400;
    record
}

/// A pass over every item at one version, as stream events of `batch` records each.
fn events(items: usize, version: i64, batch: usize) -> Vec<Event> {
    let records: Vec<EventRecord> = (0..items)
        .map(|n| record(&loan(n, version), (version as u64) * 10_000_000 + n as u64))
        .collect();
    records
        .chunks(batch)
        .map(|chunk| {
            let mut event = Event::default();
            event.records = chunk.to_vec();
            event
        })
        .collect()
}

/// The same pass as rows, batch by batch.
fn rows(model: &Model, schema: &Schema, items: usize, version: i64, batch: usize) -> Vec<Vec<Row>> {
    let all: Vec<Row> = (0..items)
        .map(|n| cqrs_sql::rows::row(model, schema, &loan(n, version)))
        .collect();
    all.chunks(batch).map(<[Row]>::to_vec).collect()
}

/// The floor: one transaction per batch, one plain upsert statement per batch, its rows sent as one
/// text array per column (`unnest`) and cast, the statement prepared once per run. It takes its
/// rows, and frees each batch once written, as sql-sync frees each event.
async fn floor(client: &mut Client, batches: Vec<Vec<Row>>) {
    let first = &batches[0][0];
    let columns: Vec<String> = first.columns.iter().map(|c| ident(c)).collect();
    let list = columns.join(", ");
    let casts: Vec<String> = columns
        .iter()
        .zip(first.types.iter())
        .map(|(c, ty)| format!("{c}::{ty}"))
        .collect();
    let arrays: Vec<String> = (1..=columns.len())
        .map(|n| format!("${n}::text[]"))
        .collect();
    let table = ident(&first.table);
    let updates: Vec<String> = columns
        .iter()
        .filter(|c| *c != "\"pk\"" && *c != "\"sk\"")
        .map(|c| format!("{c} = excluded.{c}"))
        .collect();
    let statement = client
        .prepare(&format!(
            "INSERT INTO {table} ({list}) SELECT {casts} FROM unnest({arrays}) AS u ({list}) \
             ON CONFLICT (\"pk\", \"sk\") DO UPDATE SET {updates} \
             WHERE {table}.\"version\" < excluded.\"version\"",
            casts = casts.join(", "),
            arrays = arrays.join(", "),
            updates = updates.join(", "),
        ))
        .await
        .unwrap();
    for batch in batches {
        let transaction = client.transaction().await.unwrap();
        let values: Vec<Vec<Option<&str>>> = (0..batch[0].values.len())
            .map(|at| batch.iter().map(|row| row.values[at].as_deref()).collect())
            .collect();
        let refs: Vec<&(dyn ToSql + Sync)> =
            values.iter().map(|v| v as &(dyn ToSql + Sync)).collect();
        transaction.execute(&statement, &refs).await.unwrap();
        transaction.commit().await.unwrap();
    }
}

/// The hand-written form of the floor most consumers start with: a `VALUES` list of one tuple per
/// row, a new statement each batch (PostgreSQL parses, analyses and plans it in proportion to the
/// batch). For comparison: the ratio is to [`floor`], the faster of the two.
async fn floor_values(client: &mut Client, batches: Vec<Vec<Row>>) {
    for batch in batches {
        let transaction = client.transaction().await.unwrap();
        let per_row = batch[0].values.len();
        for chunk in batch.chunks(MAX_PARAMETERS / per_row) {
            let columns: Vec<String> = chunk[0].columns.iter().map(|c| ident(c)).collect();
            let mut params: Vec<&Option<String>> = Vec::with_capacity(chunk.len() * per_row);
            let mut tuples = Vec::with_capacity(chunk.len());
            for row in chunk {
                let mut cells = Vec::with_capacity(per_row);
                for (value, ty) in row.values.iter().zip(row.types.iter()) {
                    params.push(value);
                    cells.push(format!("(${}::text)::{ty}", params.len()));
                }
                tuples.push(format!("({})", cells.join(", ")));
            }
            let table = ident(&chunk[0].table);
            let updates: Vec<String> = columns
                .iter()
                .filter(|c| *c != "\"pk\"" && *c != "\"sk\"")
                .map(|c| format!("{c} = excluded.{c}"))
                .collect();
            let sql = format!(
                "INSERT INTO {table} ({columns}) VALUES {tuples} ON CONFLICT (\"pk\", \"sk\") \
                 DO UPDATE SET {updates} WHERE {table}.\"version\" < excluded.\"version\"",
                columns = columns.join(", "),
                tuples = tuples.join(", "),
                updates = updates.join(", "),
            );
            let refs: Vec<&(dyn ToSql + Sync)> =
                params.iter().map(|p| *p as &(dyn ToSql + Sync)).collect();
            transaction.execute(&sql, &refs).await.unwrap();
        }
        transaction.commit().await.unwrap();
    }
}

async fn ours(sync: &SqlSync, events: Vec<Event>) {
    for event in events {
        let response = sync.handle(event).await;
        assert!(
            response.batch_item_failures.is_empty(),
            "sql-sync reported a failure: see its log (RUST_LOG=error)"
        );
    }
}

/// Empties the tables a run writes.
async fn empty(client: &Client) {
    client
        .batch_execute("TRUNCATE loan, cqrs_items, cqrs_removed")
        .await
        .unwrap();
}

/// The rows of `loan` at `version`: every run must have written all of them.
async fn check(client: &Client, items: usize, version: i64) {
    let row = client
        .query_one("SELECT count(*) FROM loan WHERE version = $1", &[&version])
        .await
        .unwrap();
    let written: i64 = row.get(0);
    assert_eq!(written as usize, items, "rows at version {version}");
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}

/// `VmHWM` (peak resident set) of this process, in KiB.
fn peak_kib() -> u64 {
    status_kib("VmHWM:")
}

fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// The child process of the memory figure: connects, notes its peak, reads the event's JSON from
/// `path`, parses it as the Lambda runtime does, handles it, and prints its peak again.
fn memory_child(url: &str, path: &Path) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let sync = SqlSync::new(Model::parse(MODEL).unwrap(), url);
        // Connects (the migrations are applied already: none is run).
        let v1 = cqrs_sql::migrate::plan(None, &Schema::of(&Model::parse(MODEL).unwrap()))
            .unwrap()
            .unwrap();
        sync.migrate(&[(1, "V1__model.sql", &v1)]).await.unwrap();
        let before = peak_kib();
        let body = std::fs::read(path).unwrap();
        let event: Event = serde_json::from_slice(&body).unwrap();
        let records = event.records.len();
        let started = Instant::now();
        let response = sync.handle(event).await;
        let elapsed = started.elapsed().as_secs_f64();
        assert!(response.batch_item_failures.is_empty());
        drop(body);
        println!(
            "BENCH_SQL_MEMORY {{\"records\": {records}, \"before_kib\": {before}, \"peak_kib\": {}, \"seconds\": {elapsed}}}",
            peak_kib()
        );
    });
}

fn main() {
    if let (Ok(url), Ok(path)) = (
        std::env::var("BENCH_SQL_CHILD_URL"),
        std::env::var("BENCH_SQL_CHILD_EVENT"),
    ) {
        memory_child(&url, Path::new(&path));
        return;
    }
    // `cargo bench` passes `--bench`; nothing else is understood.
    let items = env_usize("BENCH_SQL_ITEMS", 10_000);
    let repeats = env_usize("BENCH_SQL_REPEATS", 3);
    let rss_records = env_usize("BENCH_SQL_RSS_RECORDS", 10_000);
    let batch_sizes: Vec<usize> = std::env::var("BENCH_SQL_BATCHES")
        .unwrap_or_else(|_| "100,1000".into())
        .split(',')
        .filter_map(|b| b.trim().parse().ok())
        .collect();

    let pg = Throwaway::start("cqrs-sql-bench").unwrap();
    let url = pg.url();
    let model = Model::parse(MODEL).unwrap();
    let schema = Schema::of(&model);
    let v1 = cqrs_sql::migrate::plan(None, &schema).unwrap().unwrap();

    // One thread, as a Lambda function with one vCPU or less runs it.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut results = Vec::new();
    runtime.block_on(async {
        let sync = SqlSync::new(model.clone(), &url);
        sync.migrate(&[(1, "V1__model.sql", &v1)]).await.unwrap();
        let (mut client, connection) = tokio_postgres::connect(&url, NoTls).await.unwrap();
        tokio::spawn(connection);
        let admin = {
            let (admin, connection) = tokio_postgres::connect(&url, NoTls).await.unwrap();
            tokio::spawn(connection);
            admin
        };
        for &batch in &batch_sizes {
            // [pass][side] -> rows/s of each repeat; pass 0 inserts version 1, pass 1 updates to 2.
            // Sides: 0 sql-sync, 1 the floor, 2 sql-sync's writes alone (a Writer on the same
            // prepared rows: what its statements cost beside the floor's, without the conversion
            // of the records), 3 the floor's VALUES form.
            let mut rates: [[Vec<f64>; 4]; 2] = Default::default();
            let mut writer = {
                let (client, connection) = tokio_postgres::connect(&url, NoTls).await.unwrap();
                tokio::spawn(connection);
                cqrs_sql::write::Writer::new(client)
            };
            for repeat in 0..=repeats {
                // Repeat 0 warms the server and the connections up and is not counted.
                let sides = if repeat % 2 == 0 { [0, 1, 2, 3] } else { [3, 2, 1, 0] };
                for side in sides {
                    empty(&admin).await;
                    for (pass, version) in [(0usize, 1i64), (1, 2)] {
                        let seconds = if side == 0 {
                            let prepared = events(items, version, batch);
                            let started = Instant::now();
                            ours(&sync, prepared).await;
                            started.elapsed().as_secs_f64()
                        } else if side == 1 {
                            let prepared = rows(&model, &schema, items, version, batch);
                            let started = Instant::now();
                            floor(&mut client, prepared).await;
                            started.elapsed().as_secs_f64()
                        } else if side == 3 {
                            let prepared = rows(&model, &schema, items, version, batch);
                            let started = Instant::now();
                            floor_values(&mut client, prepared).await;
                            started.elapsed().as_secs_f64()
                        } else {
                            let prepared: Vec<Vec<Change>> =
                                rows(&model, &schema, items, version, batch)
                                    .into_iter()
                                    .map(|batch| batch.into_iter().map(Change::Upsert).collect())
                                    .collect();
                            let started = Instant::now();
                            for changes in prepared {
                                writer.apply(&changes).await.unwrap();
                            }
                            started.elapsed().as_secs_f64()
                        };
                        check(&admin, items, version).await;
                        if repeat > 0 {
                            rates[pass][side].push(items as f64 / seconds);
                        }
                    }
                }
            }
            for (pass, name) in [(0, "insert"), (1, "update")] {
                let [ours_runs, floor_runs, writes_runs, values_runs] = &mut rates[pass];
                let runs_ours = ours_runs.clone();
                let runs_floor = floor_runs.clone();
                let runs_writes = writes_runs.clone();
                let (o, f, w, v) = (
                    median(ours_runs),
                    median(floor_runs),
                    median(writes_runs),
                    median(values_runs),
                );
                println!(
                    "batch {batch:>5} {name}: sql-sync {o:>9.0} rows/s, raw upserts {f:>9.0} rows/s, ratio {:.2}; \
                     its writes alone {w:>9.0} rows/s ({:.2} of raw); raw VALUES upserts {v:>9.0} rows/s",
                    o / f,
                    w / f
                );
                results.push(format!(
                    "{{\"batch\": {batch}, \"pass\": \"{name}\", \"sql_sync_rows_s\": {o}, \"raw_rows_s\": {f}, \
                     \"writes_rows_s\": {w}, \"values_rows_s\": {v}, \"ratio\": {}, \"sql_sync_runs\": {runs_ours:?}, \
                     \"raw_runs\": {runs_floor:?}, \"writes_runs\": {runs_writes:?}}}",
                    o / f
                ));
            }
        }
        empty(&admin).await;
    });

    // Memory: a fresh process handles Lambda's largest batch of the data table's stream: at most
    // 10,000 records, and at most 6 MB of JSON. Updates (a MODIFY carries both images) are the
    // largest records, so the payload limit is the one that binds.
    let event_path = pg.state().join("largest-batch.json");
    let mut event = Event::default();
    event.records = (0..rss_records)
        .map(|n| record(&loan(n, 2), n as u64))
        .collect();
    let mut body = serde_json::to_vec(&event).unwrap();
    while body.len() > PAYLOAD_LIMIT {
        let fits = event.records.len() * PAYLOAD_LIMIT / body.len() * 99 / 100;
        event.records.truncate(fits);
        body = serde_json::to_vec(&event).unwrap();
    }
    let rss_records = event.records.len();
    drop(event);
    std::fs::write(&event_path, &body).unwrap();
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .env("BENCH_SQL_CHILD_URL", &url)
        .env("BENCH_SQL_CHILD_EVENT", &event_path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the memory run failed: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let memory = stdout
        .lines()
        .find_map(|l| l.strip_prefix("BENCH_SQL_MEMORY "))
        .expect("the memory run printed its figures")
        .to_string();
    println!(
        "memory ({rss_records} records, {} bytes of JSON): {memory}",
        body.len()
    );
    println!(
        "BENCH_SQL {{\"items\": {items}, \"repeats\": {repeats}, \"rates\": [{}], \"memory\": {memory}, \"event_bytes\": {}}}",
        results.join(", "),
        body.len()
    );
    drop(pg);
}
