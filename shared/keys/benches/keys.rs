//! Benchmarks of the hot key functions on fixed generated inputs.
//!
//! Short measurement windows keep the whole run well under a minute.

use std::hint::black_box;
use std::time::Duration;

use cqrs_keys::{
    add_sort_key_version, composite_key, generate_id, parse_composite_key, parse_entity_key,
    remove_sort_key_version, sort_key_version,
};
use criterion::{Criterion, criterion_main};

const PK: &str = "ORDER#tenant001";
const SK: &str = "ORDER_ITEM#01HX7MBJK3V9WQBZ7XNDK5ZT2M#001";
const SK_V: &str = "ORDER_ITEM#01HX7MBJK3V9WQBZ7XNDK5ZT2M#001@42";
const PARTS: [&str; 6] = [
    "TENANT",
    "acme",
    "USER",
    "alice",
    "ORDER",
    "01HX7MBJK3V9WQBZ7XNDK5ZT2M",
];
const COMPOSITE: &str = "TENANT#acme#USER#alice#ORDER#01HX7MBJK3V9WQBZ7XNDK5ZT2M";
const ENTITY: &str = "ORDER#2024-01-15#01HX7MBJK3V9WQBZ7XNDK5ZT2M";

fn benches(c: &mut Criterion) {
    c.bench_function("generate_id", |b| {
        b.iter(|| generate_id(black_box(PK), black_box(SK_V)))
    });
    c.bench_function("add_sort_key_version", |b| {
        b.iter(|| add_sort_key_version(black_box(SK), black_box(42)))
    });
    c.bench_function("remove_sort_key_version", |b| {
        b.iter(|| remove_sort_key_version(black_box(SK_V)).len())
    });
    c.bench_function("sort_key_version", |b| {
        b.iter(|| sort_key_version(black_box(SK_V)))
    });
    c.bench_function("composite_key", |b| {
        b.iter(|| composite_key(black_box(&PARTS)))
    });
    c.bench_function("parse_composite_key", |b| {
        b.iter(|| parse_composite_key(black_box(COMPOSITE)).map(|v| v.len()))
    });
    c.bench_function("parse_entity_key", |b| {
        b.iter(|| parse_entity_key(black_box(ENTITY)).map(|(t, id)| t.len() + id.len()))
    });
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .sample_size(30)
}

/// The benchmark group (in a module: `criterion_group!` makes an undocumented
/// `pub fn`).
mod group {
    criterion::criterion_group! {
        name = keys;
        config = super::config();
        targets = super::benches
    }
}

criterion_main!(group::keys);
