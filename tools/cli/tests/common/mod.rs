//! A seeded generator of report data in DynamoDB Local: tickets with a status index and
//! attachments, keyed by a small model of their own (through the model's `derive`, as the
//! functions key them); their history versions at chosen seconds; and the query handler's access
//! log lines. `Shape::Skewed` has one hot status partition (most tickets OPEN, a burst of writes
//! and reads on it) and one large item class (attachments of 120 KB); `Shape::Even` has neither.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;

use aws_sdk_dynamodb::types::{AttributeValue, PutRequest, WriteRequest};
use cqrs_model::{Model, ValueRef};

/// The test model: a status index that nothing shards.
pub const MODEL: &str = r#"
[indexes.gsi1]
pk = "gsi1pk"
sk = "gsi1sk"

[entities.ticket]
pk = "TICKET#{tenant}#{ticketId}"
sk = "TICKET"
id = "ticketId"
attributes.ticketId = { type = "string", max = 26 }
attributes.status = { type = "enum", required = true, values = ["OPEN", "TRIAGED", "WAITING", "SOLVED", "CLOSED"] }
indexes.gsi1 = { pk = "STATUS#{tenant}#{status}", sk = "{createdAt}#{ticketId}" }

[entities.attachment]
pk = "ATTACHMENT#{tenant}#{ticketId}"
sk = "{fileName}"
attributes.ticketId = { type = "string", required = true, max = 26 }
attributes.fileName = { type = "string", required = true, max = 64 }
"#;

pub const TENANT: &str = "t1";
pub const STATUSES: [&str; 5] = ["OPEN", "TRIAGED", "WAITING", "SOLVED", "CLOSED"];
pub const HOT_PARTITION: &str = "STATUS#t1#OPEN";
pub const TICKETS: usize = 400;
pub const ATTACHMENTS: usize = 40;
/// The heat window: the hour after this second.
pub const BASE: i64 = 1_767_225_600; // 2026-01-01T00:00:00Z
pub const SINCE: &str = "2026-01-01T00:00:00Z";
pub const UNTIL: &str = "2026-01-01T01:00:00Z";
/// Writes of the skewed set's burst, all in one second, on the hot status partition.
pub const BURST_WRITES: usize = 900;
/// Access lines of the skewed set's read burst, each standing for 1 / READ_SAMPLE requests.
pub const BURST_READS: usize = 120;
pub const READ_SAMPLE: f64 = 0.04;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Shape {
    Skewed,
    Even,
}

/// A small seeded generator (xorshift), so every run writes the same data.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

fn stamp(second: i64, ms: i64) -> String {
    chrono::DateTime::from_timestamp(second, (ms * 1_000_000) as u32)
        .unwrap()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// An item as data-sync writes it: keys from the model, item fields, attributes, index keys.
fn item(
    model: &Model,
    entity: &str,
    attrs: &[(&str, &str)],
    created: &str,
    updated: &str,
    version: u32,
    body: Option<&str>,
) -> HashMap<String, AttributeValue> {
    let refs: Vec<(&str, ValueRef<'_>)> =
        attrs.iter().map(|(k, v)| (*k, ValueRef::Str(v))).collect();
    let view = cqrs_model::ItemView {
        tenant: TENANT,
        created_at: created,
        attributes: &refs,
    };
    let e = model.entity(entity).unwrap();
    let keys = e.derive(&view).unwrap();
    let mut map: HashMap<String, AttributeValue> =
        attrs.iter().map(|(k, v)| (k.to_string(), s(*v))).collect();
    if let Some(body) = body {
        map.insert("body".into(), s(body));
    }
    let mut item = HashMap::from([
        ("pk".to_string(), s(&keys.pk)),
        ("sk".to_string(), s(&keys.sk)),
        (
            "id".to_string(),
            s(cqrs_keys::generate_id(&keys.pk, &keys.sk)),
        ),
        (
            "version".to_string(),
            AttributeValue::N(version.to_string()),
        ),
        ("type".to_string(), s(&e.item_type)),
        ("entity".to_string(), s(entity)),
        ("tenantCode".to_string(), s(TENANT)),
        ("createdAt".to_string(), s(created)),
        ("updatedAt".to_string(), s(updated)),
        ("attributes".to_string(), AttributeValue::M(map)),
    ]);
    for (name, value) in keys.index {
        item.insert(name, s(value.as_str()));
    }
    item
}

/// Writes items with BatchWriteItem, 25 at a time, a few batches at once.
async fn write_all(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    items: Vec<HashMap<String, AttributeValue>>,
) {
    let batches: Vec<Vec<WriteRequest>> = items
        .chunks(25)
        .map(|chunk| {
            chunk
                .iter()
                .map(|i| {
                    WriteRequest::builder()
                        .put_request(
                            PutRequest::builder()
                                .set_item(Some(i.clone()))
                                .build()
                                .unwrap(),
                        )
                        .build()
                })
                .collect()
        })
        .collect();
    let mut pending = batches.into_iter();
    loop {
        let mut set = tokio::task::JoinSet::new();
        for batch in pending.by_ref().take(8) {
            let client = client.clone();
            let table = table.to_string();
            set.spawn(async move {
                let mut requests = batch;
                while !requests.is_empty() {
                    let out = client
                        .batch_write_item()
                        .request_items(&table, requests)
                        .send()
                        .await
                        .unwrap();
                    requests = out
                        .unprocessed_items
                        .and_then(|mut m| m.remove(&table))
                        .unwrap_or_default();
                }
            });
        }
        if set.is_empty() {
            break;
        }
        while let Some(done) = set.join_next().await {
            done.unwrap();
        }
    }
}

/// Fills `data` and `history` with the data set and returns the access log lines.
pub async fn generate(
    client: &aws_sdk_dynamodb::Client,
    data: &str,
    history: &str,
    shape: Shape,
    seed: u64,
) -> String {
    let model = Model::parse(MODEL).unwrap();
    let mut rng = Rng::new(seed);
    let created = stamp(BASE - 86_400, 0);
    let mut data_items = Vec::new();
    let mut history_items = Vec::new();
    let mut open = Vec::new();
    for t in 0..TICKETS {
        let id = format!("T{t:05}{:06}", rng.below(1_000_000));
        let status = match shape {
            // 90% OPEN, the rest spread over the other four.
            Shape::Skewed if t % 10 != 0 => "OPEN",
            Shape::Skewed => STATUSES[1 + (t / 10) % 4],
            Shape::Even => STATUSES[t % 5],
        };
        if status == "OPEN" {
            open.push(id.clone());
        }
        let attrs = [("ticketId", id.as_str()), ("status", status)];
        // Version 1 spread over the window, one at a time.
        let v1 = stamp(BASE + 60 + t as i64 * 5, rng.below(1000) as i64);
        data_items.push(item(&model, "ticket", &attrs, &created, &v1, 1, None));
        history_items.push(item(&model, "ticket", &attrs, &created, &v1, 1, None));
    }
    if shape == Shape::Skewed {
        // A burst: every OPEN ticket updated (and again) within one second.
        for n in 0..BURST_WRITES {
            let id = &open[n % open.len()];
            let attrs = [("ticketId", id.as_str()), ("status", "OPEN")];
            let at = stamp(BASE + 30, (n % 1000) as i64);
            let version = 2 + (n / open.len()) as u32;
            history_items.push(item(&model, "ticket", &attrs, &created, &at, version, None));
        }
    }
    let body_len = match shape {
        Shape::Skewed => 120 * 1024,
        Shape::Even => 2 * 1024,
    };
    let body = "x".repeat(body_len);
    for a in 0..ATTACHMENTS {
        let ticket = format!("T{a:05}");
        let name = format!("file-{a}.pdf");
        let attrs = [("ticketId", ticket.as_str()), ("fileName", name.as_str())];
        // Only every tenth attachment is a big one in the skewed set: one large item class.
        let body = (shape == Shape::Even || a % 10 == 0).then_some(body.as_str());
        let at = stamp(BASE + 2000 + a as i64, 0);
        data_items.push(item(&model, "attachment", &attrs, &created, &at, 1, body));
    }
    // History keys are sk@version.
    for i in history_items.iter_mut() {
        if let (Some(AttributeValue::S(sk)), Some(AttributeValue::N(v))) =
            (i.get("sk"), i.get("version"))
        {
            let sk = cqrs_keys::add_sort_key_version(sk, v.parse().unwrap());
            i.insert("sk".into(), s(sk));
        }
    }
    tokio::join!(
        write_all(client, data, data_items),
        write_all(client, history, history_items)
    );

    // The access log: lines as the query handler prints them.
    let mut log = String::new();
    let mut line = |ms: i64, index: Option<&str>, pk: &str, rate: f64| {
        let access = cqrs_query_handler::access_log::AccessLine {
            ms,
            table: "data",
            index,
            pk,
            op: "query",
            items: 3,
            sample_rate: rate,
        };
        log.push_str(&format!("START RequestId: {}\n", rng.next()));
        log.push_str(&access.to_json());
        log.push('\n');
    };
    match shape {
        Shape::Skewed => {
            for n in 0..BURST_READS {
                line(
                    BASE * 1000 + 40_000 + n as i64,
                    Some("gsi1"),
                    HOT_PARTITION,
                    READ_SAMPLE,
                );
            }
        }
        Shape::Even => {
            for n in 0..BURST_READS {
                let pk = format!("STATUS#t1#{}", STATUSES[n % 5]);
                line(
                    BASE * 1000 + 40_000 + n as i64 * 1000,
                    Some("gsi1"),
                    &pk,
                    1.0,
                );
            }
        }
    }
    log
}

/// Where tests keep what they make: `target/test-artifacts/report/`.
pub fn artifacts() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // target/debug/deps/<test binary>
    let target = exe.ancestors().nth(3).unwrap().to_path_buf();
    let dir = target.join("test-artifacts").join("report");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `cqrs` with the test's DynamoDB Local endpoint; returns the exit code and stdout.
pub fn cqrs(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_cqrs"))
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.code() != Some(2),
        "cqrs {args:?} failed: {stderr}"
    );
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// A fresh pair of tables, a data set of `shape` in them, the model and access log in files; then
/// `cqrs report` over them with `extra` arguments. Returns the exit code, stdout and the JSON.
pub async fn report(shape: Shape, name: &str, extra: &[&str]) -> (i32, String, serde_json::Value) {
    let tables = cqrs_testkit::fresh_tables().await;
    let log = generate(&tables.client, &tables.data, &tables.history, shape, 18).await;
    let dir = artifacts();
    let model = dir.join(format!("{name}.model.toml"));
    std::fs::write(&model, MODEL).unwrap();
    let access = dir.join(format!("{name}.access.log"));
    std::fs::write(&access, log).unwrap();
    let json = dir.join(format!("{name}.json"));
    let html = dir.join(format!("{name}.html"));
    let mut args = vec![
        "report",
        "--data-table",
        &tables.data,
        "--history-table",
        &tables.history,
        "--model",
        model.to_str().unwrap(),
        "--since",
        SINCE,
        "--until",
        UNTIL,
        "--access-log",
        access.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let (code, out) = cqrs(&args);
    let report = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    (code, out, report)
}

/// `n` tickets of even statuses (one in fifty with a 4 KB attachment) for the report's benchmark,
/// written in chunks so memory stays flat.
pub async fn generate_bulk(client: &aws_sdk_dynamodb::Client, data: &str, n: usize, seed: u64) {
    let model = Model::parse(MODEL).unwrap();
    let mut rng = Rng::new(seed);
    let created = stamp(BASE - 86_400, 0);
    let body = "x".repeat(4096);
    let mut written = 0;
    while written < n {
        let chunk = (n - written).min(5000);
        let mut items = Vec::with_capacity(chunk);
        for i in written..written + chunk {
            let id = format!("T{i:07}{:06}", rng.below(1_000_000));
            let at = stamp(BASE + (i as i64 % 3600), rng.below(1000) as i64);
            if i % 50 == 49 {
                let name = format!("file-{i}.pdf");
                let attrs = [("ticketId", id.as_str()), ("fileName", name.as_str())];
                items.push(item(
                    &model,
                    "attachment",
                    &attrs,
                    &created,
                    &at,
                    1,
                    Some(&body),
                ));
            } else {
                let status = STATUSES[rng.below(5) as usize];
                let attrs = [("ticketId", id.as_str()), ("status", status)];
                items.push(item(&model, "ticket", &attrs, &created, &at, 1, None));
            }
        }
        write_all(client, data, items).await;
        written += chunk;
    }
}
