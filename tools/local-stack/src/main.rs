//! `local-stack`: the commands behind `make dev` (see `scripts/dev.sh`).
//!
//! ```text
//! local-stack create-tables PREFIX
//!     Creates the tables of template.yaml, named as the template names them with Prefix=PREFIX,
//!     in the DynamoDB that AWS_ENDPOINT_URL_DYNAMODB points at (it must be local). When it created
//!     the command, data, history and idempotency tables, it marks their heads complete, as a new
//!     stack's first command would.
//! local-stack stream-mapper TABLE INVOKE_URL [FUNCTION]
//!     Plays the template's stream mapping locally: reads TABLE's stream and invokes FUNCTION
//!     (default data-sync) at INVOKE_URL (cargo lambda watch, e.g. http://127.0.0.1:9000) with
//!     the template's batch size, batching window and retry count. Records that fail every retry
//!     go to STREAM_FAILURES_FILE (default .local/stream-failures.jsonl).
//! local-stack parked TABLE TENANT [ITEM_ID]
//!     Lists the records data-sync parked in TABLE (e.g. local-parked) for TENANT (`unknown`: records
//!     that named no tenant), of one item when ITEM_ID is given, one JSON object per line.
//! ```

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use aws_sdk_dynamodbstreams::types::Record;
use cqrs_testkit::{tables, template};
use local_stack::{
    invoke::HttpInvoker,
    mapper::{MapperConfig, deliver},
    stream::StreamReader,
};

const USAGE: &str = "usage:
  local-stack create-tables PREFIX
  local-stack stream-mapper TABLE INVOKE_URL [FUNCTION]
  local-stack parked TABLE TENANT [ITEM_ID]";

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_target(false)
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["create-tables", prefix] => create_tables(prefix).await,
        ["stream-mapper", table, url] => stream_mapper(table, url, "data-sync").await,
        ["stream-mapper", table, url, function] => stream_mapper(table, url, function).await,
        ["parked", table, tenant] => parked(table, tenant, None).await,
        ["parked", table, tenant, item] => parked(table, tenant, Some(item)).await,
        _ => Err(USAGE.to_string()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("local-stack: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn create_tables(prefix: &str) -> Result<(), String> {
    let client = cqrs_testkit::endpoint::client_for(
        &cqrs_testkit::endpoint::local_endpoint().map_err(|e| e.to_string())?,
    )
    .await
    .map_err(|e| e.to_string())?;
    // Every page of table names: a DynamoDB Local that tests have used holds more than one.
    let mut existing = Vec::new();
    let mut pages = client.list_tables().into_paginator().send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| {
            format!(
                "ListTables: {}",
                aws_sdk_dynamodb::error::DisplayErrorContext(&e)
            )
        })?;
        existing.extend(page.table_names().iter().cloned());
    }
    let mut created = HashMap::new();
    for spec in template::workspace_tables().map_err(|e| e.to_string())? {
        let name = spec
            .table_name(&[("Prefix", prefix)])
            .ok_or_else(|| format!("{} has no TableName in template.yaml", spec.logical_id))?;
        if existing.contains(&name) {
            println!("table {name} ({}) exists", spec.logical_id);
            continue;
        }
        tables::create_table(&client, &spec, &name)
            .await
            .map_err(|e| e.to_string())?;
        println!("table {name} ({}) created", spec.logical_id);
        created.insert(spec.logical_id.clone(), name);
    }
    // A new stack starts with its heads complete (a create is one transaction), as the command
    // handler's first command on empty tables would find; tables that existed keep their state.
    if let [Some(command), Some(data), Some(history), Some(idempotency)] = [
        "CommandTable",
        "DataTable",
        "HistoryTable",
        "IdempotencyTable",
    ]
    .map(|id| created.get(id))
    {
        let store = cqrs_store::Store::new(
            client,
            cqrs_store::Tables::new(command, data, history, idempotency),
        );
        let state = store
            .mark_heads(
                cqrs_store::HeadsState::Complete,
                "local-stack create-tables",
            )
            .await
            .map_err(|e| e.to_string())?;
        println!("heads {} (new tables)", state.as_str());
    }
    Ok(())
}

/// Prints the parked records of `tenant` (of one item when `item` is given) in `table`.
async fn parked(table: &str, tenant: &str, item: Option<&str>) -> Result<(), String> {
    let client = cqrs_testkit::endpoint::client_for(
        &cqrs_testkit::endpoint::local_endpoint().map_err(|e| e.to_string())?,
    )
    .await
    .map_err(|e| e.to_string())?;
    // Only the parked table is read; the other names are never used here.
    let tables = cqrs_store::Tables::new("-", "-", "-", "-").with_parked(table);
    let store = cqrs_store::Store::new(client, tables);
    let tenant = (tenant != cqrs_keys::parked::PARKED_UNKNOWN).then_some(tenant);
    let records = store
        .list_parked(tenant, item)
        .await
        .map_err(|e| e.to_string())?;
    for record in &records {
        let line = serde_json::json!({
            "sequenceNumber": record.sequence_number,
            "itemPk": record.item_pk,
            "itemSk": record.item_sk,
            "reasonKind": record.reason_kind,
            "reason": record.reason,
            "parkedAt": record.parked_at,
        });
        println!("{line}");
    }
    eprintln!("{} parked record(s)", records.len());
    Ok(())
}

/// The template's stream mapping settings for the mapper.
fn mapping_config() -> Result<MapperConfig, String> {
    let path = template::service_template();
    let text =
        std::fs::read_to_string(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let settings = local_stack::mapping::stream_mapping_settings(&text)?;
    let mut config = MapperConfig {
        batch_size: settings.batch_size,
        batching_window: settings.batching_window,
        max_retries: settings.max_retries,
        ..MapperConfig::default()
    };
    if let Ok(file) = std::env::var("STREAM_FAILURES_FILE") {
        config.failure_file = PathBuf::from(file);
    }
    Ok(config)
}

#[derive(Default)]
struct Pending {
    records: Vec<Record>,
    since: Option<Instant>,
}

async fn stream_mapper(table: &str, url: &str, function: &str) -> Result<(), String> {
    let config = mapping_config()?;
    let endpoint = cqrs_testkit::endpoint::local_endpoint().map_err(|e| e.to_string())?;
    let dynamodb = cqrs_testkit::endpoint::client_for(&endpoint)
        .await
        .map_err(|e| e.to_string())?;
    let streams = cqrs_testkit::endpoint::streams_client_for(&endpoint)
        .await
        .map_err(|e| e.to_string())?;
    let stream_arn = tables::latest_stream_arn(&dynamodb, table)
        .await
        .map_err(|e| e.to_string())?;
    let invoker = HttpInvoker::new(url, function, &stream_arn);
    println!(
        "stream-mapper: {table} stream -> {function} at {url} (batch size {}, window {:?}, {} retries, failures to {})",
        config.batch_size,
        config.batching_window,
        config.max_retries,
        config.failure_file.display()
    );
    let mut reader = StreamReader::new(streams, &stream_arn);
    let mut pending: HashMap<String, Pending> = HashMap::new();
    let mut last_refresh: Option<Instant> = None;
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    loop {
        if last_refresh.is_none_or(|t| t.elapsed() > Duration::from_secs(10)) {
            if let Err(error) = reader.refresh_shards().await {
                tracing::warn!(%error, "could not list the stream's shards; retrying");
            }
            last_refresh = Some(Instant::now());
        }
        let waiting: HashSet<String> = pending
            .iter()
            .filter(|(_, p)| !p.records.is_empty())
            .map(|(id, _)| id.clone())
            .collect();
        let mut shards = reader.readable_shards(&waiting);
        shards.extend(waiting.iter().cloned());
        shards.sort();
        shards.dedup();
        let mut busy = false;
        for shard in shards {
            let entry = pending.entry(shard.clone()).or_default();
            if entry.records.len() < config.batch_size {
                match reader
                    .read(&shard, config.batch_size - entry.records.len())
                    .await
                {
                    Ok(records) if !records.is_empty() => {
                        busy = true;
                        entry.since.get_or_insert_with(Instant::now);
                        entry.records.extend(records);
                    }
                    Ok(_) => {}
                    Err(error) => {
                        tracing::warn!(%error, shard, "could not read the shard; retrying")
                    }
                }
            }
            let due = entry.records.len() >= config.batch_size
                || entry
                    .since
                    .is_some_and(|t| t.elapsed() >= config.batching_window);
            if due && !entry.records.is_empty() {
                let batch = std::mem::take(&mut entry.records);
                entry.since = None;
                let report = deliver(&invoker, &shard, &batch, &config).await;
                println!(
                    "stream-mapper: {} record(s) delivered to {function} in {} invocation(s){}",
                    batch.len(),
                    report.invocations,
                    if report.dead_lettered > 0 {
                        format!(
                            ", {} sent to {} after every retry failed",
                            report.dead_lettered,
                            config.failure_file.display()
                        )
                    } else {
                        String::new()
                    }
                );
                busy = true;
            }
        }
        let pause = if busy {
            Duration::from_millis(10)
        } else {
            Duration::from_millis(200)
        };
        tokio::select! {
            _ = &mut shutdown => {
                println!("stream-mapper: stopping");
                return Ok(());
            }
            _ = tokio::time::sleep(pause) => {}
        }
    }
}

async fn shutdown_signal() {
    let mut terminate =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = async {
            match terminate.as_mut() {
                Some(signal) => { signal.recv().await; }
                None => std::future::pending::<()>().await,
            }
        } => {}
    }
}
