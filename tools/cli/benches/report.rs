//! `cqrs report` over a table of DynamoDB Local against a raw parallel scan of the same table with
//! the same segments: items per second of each, interleaved, repeated. `bench/run.py` (`make bench`)
//! runs it and writes the figures to BENCHMARKS.md; it reports, it does not assert.
//!
//! Knobs: `BENCH_REPORT_ITEMS` (100 000), `BENCH_REPORT_REPEATS` (3), `BENCH_REPORT_SEGMENTS` (8).
//! Needs `AWS_ENDPOINT_URL_DYNAMODB` pointing at DynamoDB Local.

#[path = "../tests/common/mod.rs"]
mod common;

use std::process::Command;
use std::time::Instant;

fn knob(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Every item of `table`, counted, over `segments` concurrent segments.
async fn raw_scan(client: &aws_sdk_dynamodb::Client, table: &str, segments: i32) -> u64 {
    let mut set = tokio::task::JoinSet::new();
    for segment in 0..segments {
        let client = client.clone();
        let table = table.to_string();
        set.spawn(async move {
            let mut count = 0u64;
            let mut start = None;
            loop {
                let page = client
                    .scan()
                    .table_name(&table)
                    .segment(segment)
                    .total_segments(segments)
                    .set_exclusive_start_key(start)
                    .send()
                    .await
                    .unwrap();
                count += page.items().len() as u64;
                start = page.last_evaluated_key().cloned();
                if start.is_none() {
                    return count;
                }
            }
        });
    }
    let mut total = 0;
    while let Some(n) = set.join_next().await {
        total += n.unwrap();
    }
    total
}

#[tokio::main]
async fn main() {
    let items = knob("BENCH_REPORT_ITEMS", 100_000);
    let repeats = knob("BENCH_REPORT_REPEATS", 3);
    let segments = knob("BENCH_REPORT_SEGMENTS", 8) as i32;
    let client = cqrs_testkit::client().await;
    let prefix = cqrs_testkit::fixtures::unique_prefix();
    let tables = cqrs_testkit::fixtures::create_tables(client.clone(), &prefix)
        .await
        .unwrap();
    let started = Instant::now();
    common::generate_bulk(&client, &tables.data, items, 18).await;
    println!(
        "seeded {items} items in {:.2} s",
        started.elapsed().as_secs_f64()
    );
    let dir = std::env::temp_dir().join(format!("cqrs-report-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let model = dir.join("model.toml");
    std::fs::write(&model, common::MODEL).unwrap();
    for round in 1..=repeats {
        let started = Instant::now();
        let n = raw_scan(&client, &tables.data, segments).await;
        let s = started.elapsed().as_secs_f64();
        println!(
            "round {round}: raw parallel scan ({segments} segments)  {n} items  {s:.3} s  {:.0} items/s",
            n as f64 / s
        );
        let started = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_cqrs"))
            .args(["report", "--data-table", &tables.data, "--model"])
            .arg(&model)
            .args(["--segments", &segments.to_string(), "--json"])
            .arg(dir.join("report.json"))
            .arg("--html")
            .arg(dir.join("report.html"))
            .output()
            .unwrap();
        let s = started.elapsed().as_secs_f64();
        assert!(
            out.status.code() == Some(0) || out.status.code() == Some(1),
            "cqrs report failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("report.json")).unwrap()).unwrap();
        let n = json["sample"]["data_items_read"].as_u64().unwrap();
        println!(
            "round {round}: cqrs report ({segments} segments)  {n} items  {s:.3} s  {:.0} items/s",
            n as f64 / s
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
