//! How fast `cqrs rebuild` re-projects the data table, against DynamoDB Local, beside the raw
//! `PutItem` rate of the same server measured in the same run.
//!
//! ```sh
//! cargo bench -p cqrs-cli --bench rebuild
//! ```
//!
//! `BENCH_ITEMS` products (default 1 000, over 16 tenants), 4 versions each, go into a fresh history table in
//! batch writes; the server is warmed up with raw puts. Then, each on fresh tables: raw `PutItem`
//! of one item per product with 32 in flight, and the `cqrs` binary's `rebuild` of the whole
//! history (4 segments, index keys computed by the embedded model). It prints items per second
//! for both and the ratio. `cargo test -p cqrs-cli --bench rebuild` runs it once in a debug
//! build (a check that it works, not a measurement).

use std::process::Command;
use std::time::Instant;

use cqrs_item::{Item, Value};
use cqrs_keys::{add_sort_key_version, generate_id};
use cqrs_store::{Store, Tables};
use cqrs_testkit::TestTables;
use futures::StreamExt;

const VERSIONS: i64 = 4;
const CONCURRENCY: usize = 32;

fn store(t: &TestTables) -> Store {
    Store::new(
        t.client.clone(),
        Tables::new(&t.command, &t.data, &t.history, &t.idempotency),
    )
}

fn product(n: usize, v: i64) -> Item {
    let base = format!("P{n:06}");
    let mut item = Item::example();
    // 16 tenants, so that the scan's segments share the work (a segment holds whole partitions).
    item.tenant_code = format!("t{}", n % 16);
    item.pk = format!("PRODUCT#{}", item.tenant_code);
    item.sk = add_sort_key_version(&base, v);
    item.id = generate_id(&item.pk, &base);
    item.version = v;
    item.name = format!("{base} v{v}");
    item.attributes
        .insert("category".into(), Value::from(format!("c{}", n % 7)));
    item.attributes
        .insert("priceCents".into(), Value::from(v * 100));
    item.entity = None;
    item.model_revision = None;
    item.index_keys.clear();
    item
}

async fn raw_puts(t: &TestTables, items: &[Item]) -> f64 {
    let started = Instant::now();
    futures::stream::iter(items)
        .map(|item| {
            t.client
                .put_item()
                .table_name(&t.data)
                .set_item(Some(item.clone().into_data_item().to_attributes().unwrap()))
                .send()
        })
        .buffer_unordered(CONCURRENCY)
        .for_each(|r| {
            r.expect("PutItem");
            futures::future::ready(())
        })
        .await;
    items.len() as f64 / started.elapsed().as_secs_f64()
}

#[tokio::main]
async fn main() {
    if let Err(e) = cqrs_testkit::endpoint::local_endpoint() {
        eprintln!("rebuild bench: {e}");
        std::process::exit(2);
    }
    let items: usize = std::env::var("BENCH_ITEMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let newest: Vec<Item> = (0..items).map(|n| product(n, VERSIONS)).collect();

    // Warm-up, then the baseline.
    raw_puts(&cqrs_testkit::fresh_tables().await, &newest).await;
    let raw = raw_puts(&cqrs_testkit::fresh_tables().await, &newest).await;

    let t = cqrs_testkit::fresh_tables().await;
    let versions: Vec<Item> = (0..items)
        .flat_map(|n| (1..=VERSIONS).map(move |v| product(n, v)))
        .collect();
    for chunk in versions.chunks(1000) {
        let answers = store(&t).put_history_batch(chunk).await;
        assert!(answers.iter().all(Result::is_ok), "history fill");
    }
    let checkpoint = std::env::temp_dir().join(format!("{}-bench.json", t.history));
    let output = Command::new(env!("CARGO_BIN_EXE_cqrs"))
        .args(["rebuild", "--json", "--segments", "4", "--checkpoint"])
        .arg(&checkpoint)
        .args(["--endpoint-url", &cqrs_testkit::endpoint::endpoint()])
        // The example shop's model (its `product` entity is what this bench writes): `cqrs
        // rebuild` reads `model.toml` from the working folder by default, and cargo runs a bench
        // in its package's folder, tools/cli, which has none.
        .arg("--model")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/../../model.toml"))
        .env("DATA_TABLE", &t.data)
        .env("HISTORY_TABLE", &t.history)
        .output()
        .expect("cqrs runs");
    assert!(
        output.status.success(),
        "rebuild failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let summary: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("the rebuild's JSON summary");
    let rebuild = summary["itemsPerSecond"].as_f64().unwrap_or_default();
    let written = summary["totals"]["written"].as_u64().unwrap_or_default();
    assert!(written >= items as u64, "{summary}");

    println!(
        "cqrs rebuild bench: {items} items x {VERSIONS} versions in history, DynamoDB Local at {}",
        cqrs_testkit::endpoint::endpoint()
    );
    println!("  raw PutItem, {CONCURRENCY} in flight         {raw:8.0} puts/s");
    println!(
        "  rebuild (4 segments)               {rebuild:8.0} items/s ({:.2} s, {written} data writes)",
        summary["seconds"].as_f64().unwrap_or_default()
    );
    println!(
        "  ratio rebuild / raw concurrent     {:8.2} (items per put)",
        rebuild / raw
    );
}
