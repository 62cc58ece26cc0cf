//! The local stack's tables and stream mapping, as `cqrs dev` runs them: the tables of the
//! service's `template.yaml` created in DynamoDB Local, the records data-sync parked, and the loop
//! that plays the template's event source mapping (the command table's stream into data-sync through
//! `cargo lambda watch`'s Invoke endpoint).

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use aws_sdk_dynamodbstreams::types::Record;
use cqrs_testkit::tables;
/// The template's tables, as [`create_tables`] takes them (`template::load_template`).
pub use cqrs_testkit::template;

use crate::{
    invoke::HttpInvoker,
    mapper::{MapperConfig, deliver},
    stream::StreamReader,
};

/// Creates the tables of `specs` (a service's `template.yaml`, [`template::load_template`]), named
/// as the template names them with `Prefix=prefix`, in the DynamoDB Local at `endpoint` (it must be
/// local). Returns one line per table, and the name of each table by its logical id. When it
/// created the command, data, history and idempotency tables, it marks their heads complete, as a
/// new stack's first command would.
pub async fn create_tables(
    endpoint: &str,
    specs: &[template::TableSpec],
    prefix: &str,
) -> Result<(Vec<String>, HashMap<String, String>), String> {
    cqrs_testkit::endpoint::check_local_endpoint(endpoint).map_err(|e| e.to_string())?;
    let client = cqrs_testkit::endpoint::client_for(endpoint)
        .await
        .map_err(|e| e.to_string())?;
    let mut lines = Vec::new();
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
    let mut names = HashMap::new();
    for spec in specs {
        let name = spec
            .table_name(&[("Prefix", prefix)])
            .ok_or_else(|| format!("{} has no TableName in template.yaml", spec.logical_id))?;
        names.insert(spec.logical_id.clone(), name.clone());
        if existing.contains(&name) {
            lines.push(format!("table {name} ({}) exists", spec.logical_id));
            continue;
        }
        tables::create_table(&client, spec, &name)
            .await
            .map_err(|e| e.to_string())?;
        lines.push(format!("table {name} ({}) created", spec.logical_id));
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
            .mark_heads(cqrs_store::HeadsState::Complete, "cqrs dev")
            .await
            .map_err(|e| e.to_string())?;
        lines.push(format!("heads {} (new tables)", state.as_str()));
    }
    Ok((lines, names))
}

/// Prints the parked records of `tenant` (`unknown`: records that named no tenant; of one item
/// when `item` is given) in `table`, one JSON object per line.
pub async fn parked(
    endpoint: &str,
    table: &str,
    tenant: &str,
    item: Option<&str>,
) -> Result<(), String> {
    cqrs_testkit::endpoint::check_local_endpoint(endpoint).map_err(|e| e.to_string())?;
    let client = cqrs_testkit::endpoint::client_for(endpoint)
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

/// The template's stream mapping settings of `function`'s mapping, for the mapper.
fn mapping_config(function: &str) -> Result<MapperConfig, String> {
    let path = template::service_template();
    let text =
        std::fs::read_to_string(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let settings = crate::mapping::stream_mapping_settings(&text, function)?;
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

/// Plays the template's stream mapping until SIGTERM or Ctrl-C: reads `table`'s stream and invokes
/// `function` at `url` (`cargo lambda watch`, e.g. `http://127.0.0.1:9000`) with the template's
/// batch size, batching window and retry count. Records that fail every retry go to
/// `$STREAM_FAILURES_FILE` (default `.local/stream-failures.jsonl`).
pub async fn stream_mapper(table: &str, url: &str, function: &str) -> Result<(), String> {
    let config = mapping_config(function)?;
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

/// Completes on Ctrl-C or SIGTERM (a terminal closing, a process manager stopping the stack).
///
/// ```no_run
/// # async fn example() {
/// cqrs_local_stack::stack::shutdown_signal().await;
/// println!("stopping");
/// # }
/// ```
pub async fn shutdown_signal() {
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
