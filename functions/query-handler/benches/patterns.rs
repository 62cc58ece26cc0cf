//! What a write-sharded access pattern costs beside a single-partition one, against DynamoDB
//! Local, in one run.
//!
//! ```sh
//! cargo run -q -p cqrs-cli -- dynamodb-local install && eval "$(cargo run -q -p cqrs-cli -- dynamodb-local start)"
//! cargo bench -p cqrs-query-handler --bench patterns
//! ```
//!
//! `BENCH_ITEMS` orders (default 2 000) of one user, all `PENDING`, are written into a fresh data
//! table as data-sync projects them (index keys from the entity model). They are spread uniformly
//! over the 10 write shards of `orders_by_status` (gsi2) and all sit in one partition of
//! `orders_of_user` (gsi1). Both patterns are then read to the end in pages of 20 and of 100,
//! page by page interleaved, `BENCH_REPEATS` times (default 3), through the query handler's reader
//! (index query per shard, merge, `BatchGetItem` of the items). Printed per pattern and page size:
//! page latency p50 / p95, index entries read per item returned (read amplification), queries
//! and index entries per page.

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::{Harness, entity_item, model};
use cqrs_query_handler::pattern::{self, PageRequest, PatternCursor};
use cqrs_store::query::Order;
use serde_json::json;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[derive(Default)]
struct Tally {
    pages: Vec<Duration>,
    entries: usize,
    items: usize,
    queries: usize,
}

fn quantile(sorted: &[Duration], q: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted.get(i).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

#[tokio::main]
async fn main() {
    let count = env_usize("BENCH_ITEMS", 2000);
    let repeats = env_usize("BENCH_REPEATS", 3);
    let h = Harness::new().await;
    let orders: Vec<_> = (0..count)
        .map(|i| {
            entity_item(
                "order",
                "t1",
                json!({"orderId": format!("o{i:06}"), "userId": "bench", "status": "PENDING"}),
                &format!("2024-01-01T00:00:{:02}.{:03}Z", i / 1000 % 60, i % 1000),
                1,
            )
        })
        .collect();
    h.put_all(&orders).await;
    let model = model();
    let fan_out = model
        .query("orders_by_status", "t1", &[("status", "PENDING")])
        .unwrap();
    let single = model
        .query("orders_of_user", "t1", &[("userId", "bench")])
        .unwrap();
    println!(
        "pattern bench: {count} orders, 10 shards (orders_by_status, gsi2 keys only) beside one partition (orders_of_user, gsi1), {repeats} repeats"
    );
    for limit in [20usize, 100] {
        let mut tallies = [Tally::default(), Tally::default()];
        // Warm up: one page of each.
        for plan in [&fan_out, &single] {
            let request = PageRequest {
                order: Order::Ascending,
                limit,
                include_deleted: false,
                live_at: None,
                cursor: None,
            };
            pattern::read_page(&h.app.store, model, plan, request)
                .await
                .unwrap();
        }
        for _ in 0..repeats {
            let mut cursors: [Option<PatternCursor>; 2] = [None, None];
            let mut done = [false, false];
            while !(done[0] && done[1]) {
                for (i, plan) in [&fan_out, &single].into_iter().enumerate() {
                    if done[i] {
                        continue;
                    }
                    let request = PageRequest {
                        order: Order::Ascending,
                        limit,
                        include_deleted: false,
                        live_at: None,
                        cursor: cursors[i].take(),
                    };
                    let started = Instant::now();
                    let page = pattern::read_page(&h.app.store, model, plan, request)
                        .await
                        .unwrap();
                    let tally = &mut tallies[i];
                    tally.pages.push(started.elapsed());
                    tally.entries += page.stats.entries;
                    tally.items += page.items.len();
                    tally.queries += page.stats.queries;
                    cursors[i] = page.cursor;
                    done[i] = cursors[i].is_none();
                }
            }
        }
        for (name, tally) in ["fan-out (10 shards)", "single partition"]
            .iter()
            .zip(&mut tallies)
        {
            assert_eq!(
                tally.items,
                count * repeats,
                "{name}: every item once per pass"
            );
            tally.pages.sort();
            println!(
                "pattern {name:<20} limit {limit:>3}: {pages} pages, p50 {p50:.2} ms, p95 {p95:.2} ms, {amp:.2} index entries per item, {qpp:.1} queries per page",
                pages = tally.pages.len(),
                p50 = quantile(&tally.pages, 0.5),
                p95 = quantile(&tally.pages, 0.95),
                amp = tally.entries as f64 / tally.items as f64,
                qpp = tally.queries as f64 / tally.pages.len() as f64,
            );
        }
    }
}
