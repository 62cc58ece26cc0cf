//! What the model costs: parsing and checking `model.toml` (once per cold start) and deriving every
//! key of one version of the example model's largest entity (once per command).

use std::hint::black_box;

use cqrs_model::{EXAMPLE_TOML, ItemView, Model, ValueRef};
use criterion::{Criterion, criterion_main};

fn model_parse(c: &mut Criterion) {
    c.bench_function("model: parse and check model.toml", |b| {
        b.iter(|| Model::parse(black_box(EXAMPLE_TOML)).map(|m| m.entities().len()))
    });
}

fn derive_order(c: &mut Criterion) {
    let model = Model::example();
    let order = model.entity("order").cloned();
    let attrs = [
        ("orderId", ValueRef::Str("01HX7MBJK3V9WQBZ7XNDK5ZT2M")),
        ("userId", ValueRef::Str("user-4711")),
        ("status", ValueRef::Str("PENDING")),
        ("totalCents", ValueRef::Num("129900")),
    ];
    let view = ItemView {
        tenant: "tenant001",
        created_at: "2024-01-15T10:30:00.000Z",
        attributes: &attrs,
    };
    c.bench_function(
        "model: derive all keys of an order (3 indexes, 10 shards)",
        |b| b.iter(|| order.as_ref().map(|o| o.derive(black_box(&view)))),
    );
}

/// The benchmark group (in a module: `criterion_group!` makes an undocumented `pub fn`).
mod group {
    criterion::criterion_group!(model, super::model_parse, super::derive_order);
}

criterion_main!(group::model);
