//! How fast data-sync projects a batch, against DynamoDB Local, beside the raw `PutItem` rate of
//! the same server measured in the same run.
//!
//! ```sh
//! cargo run -q -p cqrs-cli -- dynamodb-local install && eval "$(cargo run -q -p cqrs-cli -- dynamodb-local start)"
//! cargo bench -p cqrs-data-sync --bench projection
//! ```
//!
//! 1 000 stream records (250 items, 4 versions each, interleaved as concurrent writers produce
//! them) are written into a fresh command table, read back from its stream and turned into one
//! Lambda event. Then, each on fresh tables:
//!
//! - raw `PutItem` of the same 1 000 items (data form), one at a time;
//! - raw `PutItem` of the same items, [`cqrs_data_sync::DEFAULT_CONCURRENCY`] in flight;
//! - the projection of the batch ([`cqrs_data_sync::DataSync::handle`]): every version into history
//!   in batch writes, one conditional data write per item (its newest version).
//!
//! The server is warmed up first with the same puts. It prints records per second for each and
//! the ratios. `BENCH_RECORDS` sets the size, `BENCH_VERSIONS` the versions per item (4; 1 is the
//! workload of one version per item). `cargo test -p cqrs-data-sync --bench projection` runs it once
//! in a debug build (a check that it works, not a measurement).

use std::time::{Duration, Instant};

use cqrs_data_sync::{DEFAULT_CONCURRENCY, DataSync};
use cqrs_item::Item;
use cqrs_keys::{add_sort_key_version, generate_id};
use cqrs_store::{Store, Tables};
use cqrs_testkit::TestTables;
use futures::StreamExt;

/// Versions per item, from `BENCH_VERSIONS` (default 4).
fn versions() -> usize {
    std::env::var("BENCH_VERSIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|v| *v > 0)
        .unwrap_or(4)
}

fn store(tables: &TestTables) -> Store {
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

fn commands(records: usize, versions: usize) -> Vec<Item> {
    let items = records.div_ceil(versions);
    let mut commands = Vec::with_capacity(records);
    'outer: for version in 1..=versions as i64 {
        for n in 0..items {
            if commands.len() == records {
                break 'outer;
            }
            let base = format!("P{n:05}");
            let mut item = Item::example();
            item.sk = add_sort_key_version(&base, version);
            item.id = generate_id(&item.pk, &base);
            item.version = version;
            item.name = format!("{base} v{version}");
            commands.push(item);
        }
    }
    commands
}

async fn raw_puts(tables: &TestTables, items: &[Item], concurrency: usize) -> Duration {
    let started = Instant::now();
    futures::stream::iter(items)
        .map(|item| {
            let attributes = item.clone().into_data_item().to_attributes().unwrap();
            let mut attributes = attributes;
            // Distinct keys, as the projection's history rows are.
            attributes.insert(
                "sk".into(),
                aws_sdk_dynamodb::types::AttributeValue::S(item.sk.clone()),
            );
            tables
                .client
                .put_item()
                .table_name(&tables.data)
                .set_item(Some(attributes))
                .send()
        })
        .buffer_unordered(concurrency)
        .for_each(|result| {
            result.expect("PutItem");
            futures::future::ready(())
        })
        .await;
    started.elapsed()
}

fn rate(records: usize, elapsed: Duration) -> f64 {
    records as f64 / elapsed.as_secs_f64()
}

#[tokio::main]
async fn main() {
    if let Err(e) = cqrs_testkit::endpoint::local_endpoint() {
        eprintln!("projection bench: {e}");
        std::process::exit(2);
    }
    let records: usize = std::env::var("BENCH_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let versions = versions();
    let commands = commands(records, versions);

    // The batch: the command table's own stream, as Lambda would deliver it.
    let source = cqrs_testkit::fresh_tables().await;
    let source_store = store(&source);
    futures::stream::iter(&commands)
        .map(|item| source_store.put_command(item, None))
        .buffered(DEFAULT_CONCURRENCY)
        .for_each(|result| {
            result.expect("command write");
            futures::future::ready(())
        })
        .await;
    let stream = cqrs_testkit::tables::wait_for_stream_records(
        &cqrs_testkit::streams_client().await,
        &source.command_stream_arn().await,
        records,
        Duration::from_secs(120),
    )
    .await
    .expect("stream records");
    let event =
        cqrs_testkit::stream_event::lambda_event(&stream, &source.command_stream_arn().await)
            .expect("Lambda event");
    assert_eq!(event.records.len(), records);

    // Warm the server up (the JVM compiles its hot paths during the first thousands of requests),
    // so that no measurement below pays for it.
    raw_puts(
        &cqrs_testkit::fresh_tables().await,
        &commands,
        DEFAULT_CONCURRENCY,
    )
    .await;
    raw_puts(&cqrs_testkit::fresh_tables().await, &commands, 1).await;

    let sequential = raw_puts(&cqrs_testkit::fresh_tables().await, &commands, 1).await;
    let concurrent = raw_puts(
        &cqrs_testkit::fresh_tables().await,
        &commands,
        DEFAULT_CONCURRENCY,
    )
    .await;

    let tables = cqrs_testkit::fresh_tables().await;
    let sync = DataSync::new(store(&tables));
    let started = Instant::now();
    let response = sync.handle(event).await;
    let projection = started.elapsed();
    assert!(
        response.batch_item_failures.is_empty(),
        "projection failed: {response:?}"
    );

    let (seq, conc, proj) = (
        rate(records, sequential),
        rate(records, concurrent),
        rate(records, projection),
    );
    println!(
        "data-sync projection bench: {records} records ({} items x {versions} versions), DynamoDB Local at {}",
        records.div_ceil(versions),
        cqrs_testkit::endpoint::endpoint()
    );
    println!("  raw PutItem, sequential           {seq:8.0} puts/s    ({sequential:.2?})");
    println!(
        "  raw PutItem, {DEFAULT_CONCURRENCY} in flight         {conc:8.0} puts/s    ({concurrent:.2?})"
    );
    println!(
        "  projection ({versions} versions per item)  {proj:8.0} records/s ({projection:.2?})"
    );
    println!(
        "  ratio projection / raw sequential  {:8.2} (records per put)",
        proj / seq
    );
    println!(
        "  ratio projection / raw concurrent  {:8.2} (records per put; goal >= 1.0 at 4 versions, >= 0.6 at 1)",
        proj / conc
    );
}
