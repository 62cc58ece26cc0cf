//! The key operations of `cqrs-keys` on the generated inputs that the Node bench
//! (`bench/node/keys.js`) runs through `@mbc-cqrs-serverless/core`'s helpers.
//!
//! `scripts/bench.sh` writes the inputs (`bench/run.py`, a seeded generator) and sets
//! `BENCH_KEY_INPUTS` to their path; run alone, the bench reads `.local/bench/key-inputs.json`.
//! One criterion iteration applies an operation to every input once, so the time per operation is
//! criterion's time per iteration divided by the number of inputs (`bench/run.py` does that from
//! `target/criterion/keys_vs_node/*/new/estimates.json`).
//!
//! Before measuring, every operation runs once over the inputs and a check sum of its results
//! (lengths, versions, part counts) is written to `BENCH_KEY_CHECK` (default
//! `.local/bench/key-check-rust.json`): the driver compares it with the Node bench's, so both
//! sides are known to compute the same results from the same inputs.

use std::hint::black_box;
use std::path::PathBuf;
use std::time::Duration;

use cqrs_keys::{
    add_sort_key_version, composite_key, generate_id, parse_composite_key, parse_entity_key,
    remove_sort_key_version, sort_key_version,
};
use criterion::{Criterion, Throughput, criterion_main};
use serde::Deserialize;

/// One generated input (the fields of `bench/run.py`'s generator).
#[derive(Deserialize)]
struct Input {
    /// Partition key, `PREFIX#tenant`.
    pk: String,
    /// Sort key without version.
    sk: String,
    /// The same sort key with `@version`.
    skv: String,
    /// The version in `skv`.
    version: i64,
    /// Components of a composite key.
    parts: Vec<String>,
    /// `parts` joined with `#`.
    composite: String,
    /// An entity key, `TYPE#id[#more]`.
    entity: String,
}

fn workspace_file(env: &str, default: &str) -> PathBuf {
    std::env::var_os(env).map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(default)
    })
}

fn load() -> Vec<Input> {
    let path = workspace_file("BENCH_KEY_INPUTS", ".local/bench/key-inputs.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (scripts/bench.sh writes the inputs)",
            path.display()
        )
    });
    let inputs: Vec<Input> = serde_json::from_str(&text).expect("key inputs");
    assert!(!inputs.is_empty(), "no key inputs in {}", path.display());
    inputs
}

/// The check sums of every operation over the inputs, in the Node bench's format.
fn write_check(inputs: &[Input]) {
    let mut check = serde_json::Map::new();
    let mut put = |name: &str, value: usize| {
        check.insert(name.into(), value.into());
    };
    put(
        "generate_id",
        inputs
            .iter()
            .map(|i| generate_id(&i.pk, &i.skv).len())
            .sum(),
    );
    put(
        "add_sort_key_version",
        inputs
            .iter()
            .map(|i| add_sort_key_version(&i.sk, i.version).len())
            .sum(),
    );
    put(
        "remove_sort_key_version",
        inputs
            .iter()
            .map(|i| remove_sort_key_version(&i.skv).len())
            .sum(),
    );
    put(
        "sort_key_version",
        inputs
            .iter()
            .map(|i| usize::try_from(sort_key_version(&i.skv)).expect("versions are positive"))
            .sum(),
    );
    put(
        "composite_key",
        inputs
            .iter()
            .map(|i| composite_key(&parts(i)).expect("valid parts").len())
            .sum(),
    );
    put(
        "parse_composite_key",
        inputs
            .iter()
            .map(|i| parse_composite_key(&i.composite).expect("valid key").len())
            .sum(),
    );
    put(
        "parse_entity_key",
        inputs
            .iter()
            .map(|i| {
                let (t, id) = parse_entity_key(&i.entity).expect("valid entity key");
                t.len() + id.len()
            })
            .sum(),
    );
    let path = workspace_file("BENCH_KEY_CHECK", ".local/bench/key-check-rust.json");
    std::fs::write(&path, serde_json::Value::Object(check).to_string())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

fn parts(input: &Input) -> Vec<&str> {
    input.parts.iter().map(String::as_str).collect()
}

fn benches(c: &mut Criterion) {
    let inputs = load();
    write_check(&inputs);
    let parts: Vec<Vec<&str>> = inputs.iter().map(parts).collect();
    let mut group = c.benchmark_group("keys_vs_node");
    group.throughput(Throughput::Elements(inputs.len() as u64));

    group.bench_function("generate_id", |b| {
        b.iter(|| {
            for i in &inputs {
                black_box(generate_id(black_box(&i.pk), black_box(&i.skv)));
            }
        })
    });
    group.bench_function("add_sort_key_version", |b| {
        b.iter(|| {
            for i in &inputs {
                black_box(add_sort_key_version(black_box(&i.sk), black_box(i.version)));
            }
        })
    });
    group.bench_function("remove_sort_key_version", |b| {
        b.iter(|| {
            for i in &inputs {
                black_box(remove_sort_key_version(black_box(&i.skv)));
            }
        })
    });
    group.bench_function("sort_key_version", |b| {
        b.iter(|| {
            for i in &inputs {
                black_box(sort_key_version(black_box(&i.skv)));
            }
        })
    });
    group.bench_function("composite_key", |b| {
        b.iter(|| {
            for p in &parts {
                black_box(composite_key(black_box(p)).ok());
            }
        })
    });
    group.bench_function("parse_composite_key", |b| {
        b.iter(|| {
            for i in &inputs {
                black_box(parse_composite_key(black_box(&i.composite)).ok());
            }
        })
    });
    group.bench_function("parse_entity_key", |b| {
        b.iter(|| {
            for i in &inputs {
                black_box(parse_entity_key(black_box(&i.entity)).ok());
            }
        })
    });
    // References: what the same builds and parses cost without the crate's validation (the Node
    // side, having no composite or entity helper, does only this).
    group.bench_function("composite_key_join_unvalidated", |b| {
        b.iter(|| {
            for p in &parts {
                black_box(black_box(p).join("#"));
            }
        })
    });
    group.bench_function("parse_composite_key_split_unvalidated", |b| {
        b.iter(|| {
            for i in &inputs {
                black_box(black_box(&i.composite).split('#').collect::<Vec<&str>>());
            }
        })
    });
    group.bench_function("parse_entity_key_split_unvalidated", |b| {
        b.iter(|| {
            for i in &inputs {
                black_box(black_box(&i.entity).split_once('#'));
            }
        })
    });
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30)
}

/// The benchmark group (in a module: `criterion_group!` makes an undocumented `pub fn`).
mod group {
    criterion::criterion_group! {
        name = keys_vs_node;
        config = super::config();
        targets = super::benches
    }
}

criterion_main!(group::keys_vs_node);
