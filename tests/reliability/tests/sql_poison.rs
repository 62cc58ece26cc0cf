//! One poison record in a full batch of the data table's stream: a U+0000 (NUL), which DynamoDB
//! stores and PostgreSQL refuses in `text` and `jsonb` alike, at position k of a 1,000-record batch
//! (sql-sync's `BatchSize`), delivered to the real sql-sync by the local stream mapping
//! (`cqrs_local_stack::mapper::deliver`, Lambda's rule), on DynamoDB Local's real stream and a
//! throwaway PostgreSQL. Two cases:
//!
//! - the NUL in a **value**: all 1,000 rows are written, the NUL item's value with U+FFFD;
//! - the NUL in a **key** (never rewritten into another key): the 999 others are written, the NUL
//!   item is parked in `cqrs_parked` with its reason.
//!
//! Each in at most 2 invocations, nothing to the on-failure destination; PostgreSQL then equals
//! the data table (`cqrs_sql::verify::compare`, through the same U+FFFD transform), the parked item
//! aside. The figure is printed on one line per case (`cargo test -p reliability --test sql_poison
//! -- --nocapture`). Position k comes from the seed (`RELIABILITY_SEED` replays a run).

mod common;

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use common::{Rng, command_item, seed};
use cqrs_item::{Item, Value};
use cqrs_local_stack::mapper::{Invoke, InvokeError, MapperConfig, deliver};
use futures::StreamExt;

const BATCH: usize = 1_000;
const DEFAULT_SEED: u64 = 0x5EED_0000_2026;

/// sql-sync, invoked in process by the local stream mapping.
struct InProcess<'s>(&'s cqrs_sql_sync::SqlSync);

impl Invoke<EventRecord> for InProcess<'_> {
    async fn invoke(&self, records: &[EventRecord]) -> Result<Vec<String>, InvokeError> {
        let mut event = Event::default();
        event.records = records.to_vec();
        let response = self.0.handle(event).await;
        Ok(response
            .batch_item_failures
            .into_iter()
            .map(|f| f.item_identifier.unwrap_or_default())
            .collect())
    }
}

/// The data table's state of item `base` (version 1) in case `case`, with a NUL where `nul` says.
fn data_item(case: &str, n: usize, nul: Option<&str>) -> Item {
    let base = match nul {
        Some("key") => format!("{case}{n:04}\u{0}"),
        _ => format!("{case}{n:04}"),
    };
    let mut item = command_item("PRODUCT#t1", &base, 1).into_data_item();
    if nul == Some("value") {
        item.name = "bad\u{0}name".into();
        item.attributes
            .insert("note".into(), Value::from("a\u{0}b"));
    }
    item
}

fn sk_of(record: &EventRecord) -> String {
    match record.change.keys.get("sk") {
        Some(serde_dynamo::AttributeValue::S(s)) => s.clone(),
        other => panic!("a record without sk: {other:?}"),
    }
}

#[tokio::test]
async fn one_nul_record_in_a_batch_of_1000_never_stops_it() {
    let seed = seed(DEFAULT_SEED);
    let mut rng = Rng::new(seed);
    let tables = cqrs_testkit::fresh_tables().await;

    // 1. The data table: two sets of 1,000 items, "V" with a NUL in one item's values, "K" with a
    //    NUL in one item's key, at a position chosen by the seed.
    let (k_value, k_key) = (
        rng.below(BATCH as u64) as usize,
        rng.below(BATCH as u64) as usize,
    );
    let mut items: Vec<Item> = Vec::with_capacity(2 * BATCH);
    for n in 0..BATCH {
        items.push(data_item("V", n, (n == k_value).then_some("value")));
        items.push(data_item("K", n, (n == k_key).then_some("key")));
    }
    futures::stream::iter(items.iter())
        .map(|item| {
            let tables = &tables;
            async move {
                tables
                    .client
                    .put_item()
                    .table_name(&tables.data)
                    .set_item(Some(item.to_attributes().expect("attributes")))
                    .send()
                    .await
                    .unwrap_or_else(|e| panic!("writing {:?}: {e:?}", item.sk));
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<()>>()
        .await;

    // 2. Its stream, as Lambda records, one batch of 1,000 a case, the NUL record at position k.
    let stream = tables.data_stream_records(2 * BATCH).await;
    let arn = tables.data_stream_arn().await;
    let records = cqrs_testkit::stream_event::lambda_event(&stream, &arn)
        .expect("a Lambda event")
        .records;
    assert_eq!(records.len(), 2 * BATCH);
    let batch = |case: &str, k: usize| {
        let mut batch: Vec<EventRecord> = records
            .iter()
            .filter(|r| sk_of(r).starts_with(case))
            .cloned()
            .collect();
        let nul = batch
            .iter()
            .position(|r| {
                sk_of(r).contains('\u{0}')
                    || r.change.new_image.get("name")
                        == Some(&serde_dynamo::AttributeValue::S("bad\u{0}name".into()))
            })
            .expect("the NUL record");
        let record = batch.remove(nul);
        batch.insert(k, record);
        assert_eq!(batch.len(), BATCH);
        batch
    };

    // 3. sql-sync on a throwaway PostgreSQL, migrated as at cold start.
    let pg =
        cqrs_local_stack::postgres::Throwaway::start("reliability-sql-poison").expect("starts");
    let model = cqrs_model::Model::example();
    let schema = cqrs_sql::schema::Schema::of(&model);
    let v1 = cqrs_sql::migrate::plan(None, &schema).unwrap().unwrap();
    let sync = cqrs_sql_sync::SqlSync::new(model.clone(), &pg.url());
    sync.migrate(&[(1, "V1__model.sql", &v1)]).await.unwrap();
    let (admin, connection) = tokio_postgres::connect(&pg.url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let failures = std::env::temp_dir().join(format!("sql-poison-{}.jsonl", std::process::id()));
    let config = MapperConfig {
        retry_backoff: std::time::Duration::from_millis(1),
        failure_file: failures.clone(),
        ..MapperConfig::default()
    };
    let invoker = InProcess(&sync);
    let rows = async |prefix: &str| -> i64 {
        let mut total = 0;
        for table in schema
            .tables
            .iter()
            .map(|t| t.name.as_str())
            .chain([cqrs_sql::schema::GENERIC_TABLE])
        {
            let n: i64 = admin
                .query_one(
                    &format!(
                        "SELECT count(*) FROM {} WHERE sk LIKE $1",
                        cqrs_sql::schema::ident(table)
                    ),
                    &[&format!("{prefix}%")],
                )
                .await
                .unwrap()
                .get(0);
            total += n;
        }
        total
    };

    // 4. Each case: one delivery of its batch.
    for (case, k, what) in [("V", k_value, "value"), ("K", k_key, "key")] {
        let report = deliver(&invoker, "shard-0", &batch(case, k), &config).await;
        let written = rows(case).await;
        let parked: Vec<(Vec<u8>, String)> = admin
            .query(
                "SELECT sk, reason FROM cqrs_parked WHERE substring(sk from 1 for 1) = $1",
                &[&case.as_bytes()],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        let stored = match what {
            "value" => {
                let row = admin
                    .query_one(
                        r#"SELECT "name", "attributes"->>'note' FROM "product" WHERE sk = $1
                           UNION ALL SELECT "name", "attributes"->>'note' FROM "cqrs_items" WHERE sk = $1"#,
                        &[&format!("V{k_value:04}")],
                    )
                    .await
                    .expect("the NUL item's row");
                let (name, note): (String, String) = (row.get(0), row.get(1));
                assert_eq!(
                    (name.as_str(), note.as_str()),
                    ("bad\u{FFFD}name", "a\u{FFFD}b")
                );
                format!("the NUL item stored, its value with U+FFFD ({name:?})")
            }
            _ => {
                assert_eq!(parked.len(), 1, "{parked:?}");
                assert_eq!(parked[0].0, format!("K{k_key:04}\u{0}").into_bytes());
                format!("the NUL item parked: {}", parked[0].1)
            }
        };
        println!(
            "sql poison: one NUL in a {what} at position {k} of a {BATCH}-record batch: {written} rows \
             written, {} parked, {} invocation(s), {} dead-lettered; {stored} (seed {seed})",
            parked.len(),
            report.invocations,
            report.dead_lettered,
        );
        let expected_rows = if what == "value" { BATCH } else { BATCH - 1 };
        assert_eq!(written, expected_rows as i64, "rows of case {case}");
        assert!(
            report.invocations <= 2,
            "invocations: {}",
            report.invocations
        );
        assert_eq!(
            report.dead_lettered, 0,
            "nothing to the on-failure destination"
        );
    }
    let _ = std::fs::remove_file(&failures);

    // 5. PostgreSQL equals the data table, through the same transform, the parked item aside.
    let expected: Vec<cqrs_sql::rows::Row> = items
        .iter()
        .filter(|item| cqrs_sql::rows::unstorable_key(item).is_none())
        .map(|item| cqrs_sql::rows::row(&model, &schema, item))
        .collect();
    let differences = cqrs_sql::verify::compare(&admin, &schema, &expected)
        .await
        .unwrap();
    assert!(
        differences.is_empty(),
        "PostgreSQL differs from the data table: {:?}",
        &differences[..differences.len().min(5)]
    );
}
