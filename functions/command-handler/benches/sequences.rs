//! How fast sequence numbers are drawn, against DynamoDB Local, beside the raw `UpdateItem` rate
//! of the same counter on the same server, in the same run.
//!
//! ```sh
//! cargo run -q -p cqrs-cli -- dynamodb-local install && eval "$(cargo run -q -p cqrs-cli -- dynamodb-local start)"
//! cargo bench -p cqrs-command-handler --bench sequences
//! ```
//!
//! Each on its own fresh counter, [`IN_FLIGHT`] requests at a time (all on one item, the worst case
//! of a sequence: DynamoDB applies the updates of one item one after the other):
//!
//! - raw `UpdateItem`: `SET seq = if_not_exists(seq, 0) + 1`, nothing else;
//! - draws through the command handler (`POST /sequences/invoice/next`, JWT claims, a format in
//!   the tenant's master data and a time zone setting): the two master reads (`BatchGetItem`), the
//!   `UpdateItem` and the formatting.
//!
//! The server is warmed up first. Both runs check that they got every number from 1 to N once. It
//! prints updates (draws) per second and the ratio. `BENCH_DRAWS` sets N (default 1000).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};
use cqrs_caller::CallerMode;
use cqrs_item::Item;
use cqrs_store::{Store, Tables};
use cqrs_testkit::http_event::HttpApiRequest;
use futures::StreamExt;

/// Requests in flight.
const IN_FLIGHT: usize = 16;

async fn sequences_table(tables: &cqrs_testkit::TestTables) -> String {
    let name = format!("{}-sequences", tables.command.trim_end_matches("-command"));
    let specs = cqrs_testkit::template::workspace_tables().expect("template.yaml parses");
    let spec = cqrs_testkit::template::find(&specs, "SequencesTable").expect("SequencesTable");
    cqrs_testkit::tables::create_table(&tables.client, spec, &name)
        .await
        .expect("sequences table");
    name
}

async fn raw_updates(client: &aws_sdk_dynamodb::Client, table: &str, draws: usize) -> Duration {
    let started = Instant::now();
    let numbers: BTreeSet<i64> = futures::stream::iter(0..draws)
        .map(|_| {
            client
                .update_item()
                .table_name(table)
                .key("pk", AttributeValue::S("SEQ#t1".into()))
                .key("sk", AttributeValue::S("raw#none".into()))
                .update_expression("SET seq = if_not_exists(seq, :zero) + :one")
                .expression_attribute_values(":zero", AttributeValue::N("0".into()))
                .expression_attribute_values(":one", AttributeValue::N("1".into()))
                .return_values(ReturnValue::UpdatedNew)
                .send()
        })
        .buffer_unordered(IN_FLIGHT)
        .map(|result| {
            match result
                .expect("UpdateItem")
                .attributes()
                .and_then(|a| a.get("seq"))
            {
                Some(AttributeValue::N(n)) => n.parse::<i64>().expect("a number"),
                other => panic!("seq is {other:?}"),
            }
        })
        .collect()
        .await;
    let elapsed = started.elapsed();
    assert_eq!(
        numbers,
        (1..=draws as i64).collect(),
        "raw: every number once"
    );
    elapsed
}

async fn draws(app: &cqrs_command_handler::App, draws: usize) -> Duration {
    let started = Instant::now();
    let numbers: BTreeSet<i64> = futures::stream::iter(0..draws)
        .map(|_| {
            let request = HttpApiRequest::new("POST", "/sequences/invoice/next")
                .header("content-type", "application/json")
                .body(br#"{"rotateBy":"fiscal_yearly","params":{"code1":"A"}}"#)
                .claims("u1", "t1", "admin")
                .request();
            cqrs_command_handler::handle(app, request)
        })
        .buffer_unordered(IN_FLIGHT)
        .map(|response| {
            assert_eq!(response.status(), 200, "{:?}", response.body());
            let body: serde_json::Value = match response.body() {
                lambda_http::Body::Text(text) => serde_json::from_str(text).expect("JSON"),
                other => panic!("body {other:?}"),
            };
            body["no"].as_i64().expect("no")
        })
        .collect()
        .await;
    let elapsed = started.elapsed();
    assert_eq!(
        numbers,
        (1..=draws as i64).collect(),
        "handler: every number once"
    );
    elapsed
}

async fn put_master(tables: &cqrs_testkit::TestTables, sk: &str, attributes: serde_json::Value) {
    let mut item = Item::example();
    item.pk = cqrs_keys::master::tenant_master_pk("t1").expect("a master key");
    item.sk = sk.into();
    item.id = cqrs_keys::generate_id(&item.pk, sk);
    item.attributes = cqrs_item::map_from_json(attributes).expect("attributes");
    tables
        .client
        .put_item()
        .table_name(&tables.data)
        .set_item(Some(item.to_attributes().expect("item")))
        .send()
        .await
        .expect("put master item");
}

fn rate(n: usize, elapsed: Duration) -> f64 {
    n as f64 / elapsed.as_secs_f64()
}

#[tokio::main]
async fn main() {
    if let Err(e) = cqrs_testkit::endpoint::local_endpoint() {
        eprintln!("sequences bench: {e}");
        std::process::exit(2);
    }
    let n: usize = std::env::var("BENCH_DRAWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let tables = cqrs_testkit::fresh_tables().await;
    let sequences = sequences_table(&tables).await;
    put_master(
        &tables,
        "MASTER_DATA#invoice",
        serde_json::json!({"format": "INV-%%fiscal_year%%-%%code1%%-%%no#:0>6%%"}),
    )
    .await;
    put_master(
        &tables,
        "SETTING#sequence#timeZone",
        serde_json::json!({"value": "+09:00"}),
    )
    .await;
    let store = Store::new(
        tables.client.clone(),
        Tables::new(
            &tables.command,
            &tables.data,
            &tables.history,
            &tables.idempotency,
        )
        .with_sequences(&sequences),
    );
    let app = cqrs_command_handler::App::new(store, CallerMode::Jwt, cqrs_model::Model::example());

    // Warm-up on other counters of other tables.
    let warm = cqrs_testkit::fresh_tables().await;
    let warm_table = sequences_table(&warm).await;
    raw_updates(&warm.client, &warm_table, n.min(500)).await;

    let raw = raw_updates(&tables.client, &sequences, n).await;
    let handler = draws(&app, n).await;
    let (raw_rate, draw_rate) = (rate(n, raw), rate(n, handler));
    println!(
        "sequences bench: {n} draws of one counter, {IN_FLIGHT} in flight, DynamoDB Local at {}",
        cqrs_testkit::endpoint::endpoint()
    );
    println!("  raw UpdateItem                     {raw_rate:8.0} updates/s ({raw:.2?})");
    println!("  draws through the handler          {draw_rate:8.0} draws/s   ({handler:.2?})");
    println!(
        "  ratio draws / raw UpdateItem       {:8.2} (a draw is 2 BatchGetItem + 1 UpdateItem)",
        draw_rate / raw_rate
    );
}
