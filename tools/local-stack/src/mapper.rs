//! The local stand-in for Lambda's DynamoDB event source mapping: read the command table's stream,
//! invoke data-sync with real batches, and handle its answer the way AWS does with
//! `ReportBatchItemFailures`.
//!
//! - Records are gathered into batches of at most [`MapperConfig::batch_size`], waiting at most
//!   [`MapperConfig::batching_window`] after the first record of a batch (`BatchSize` and
//!   `MaximumBatchingWindowInSeconds` in the template).
//! - Shards are read one batch at a time, so records of one item reach data-sync in stream order
//!   (`ParallelizationFactor: 1`).
//! - An answer with `batchItemFailures` resumes from the lowest sequence number reported: every
//!   record before it is done, that record and everything after it are sent again. A failed
//!   invocation (the function errored, or could not be reached) retries the whole batch.
//! - After [`MapperConfig::max_retries`] failed attempts without progress the batch is split in
//!   two (`BisectBatchOnFunctionError`), and a single record that still fails goes to the
//!   on-failure destination, a JSON-lines file, so the records after it are not blocked.

use std::future::Future;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use aws_sdk_dynamodbstreams::types::Record;
use serde_json::{Value, json};

/// How the mapping batches and retries; the defaults are those of `template.yaml`.
#[derive(Debug, Clone)]
pub struct MapperConfig {
    /// The largest batch sent in one invocation (`BatchSize`).
    pub batch_size: usize,
    /// How long to wait for a batch to fill after its first record (`MaximumBatchingWindowInSeconds`).
    pub batching_window: Duration,
    /// Failed attempts of a batch without progress before it is split, or before a single record
    /// goes to the on-failure destination (`MaximumRetryAttempts`).
    pub max_retries: u32,
    /// The pause before the first retry; it doubles with each attempt, up to 5 s.
    pub retry_backoff: Duration,
    /// Where records that failed every retry are appended, one JSON document per line.
    pub failure_file: PathBuf,
}

impl Default for MapperConfig {
    fn default() -> Self {
        MapperConfig {
            batch_size: 100,
            batching_window: Duration::from_secs(1),
            max_retries: 3,
            retry_backoff: Duration::from_millis(200),
            failure_file: PathBuf::from(".local/stream-failures.jsonl"),
        }
    }
}

/// Why an invocation failed as a whole.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvokeError(pub String);

/// Invokes the function with one batch; answers the sequence numbers it reported as failed.
pub trait Invoke {
    /// Sends `records` as one DynamoDB stream event.
    fn invoke(&self, records: &[Record]) -> impl Future<Output = Result<Vec<String>, InvokeError>>;
}

/// What one delivery came to.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DeliveryReport {
    /// Invocations made.
    pub invocations: usize,
    /// Invocations that reported failures or failed as a whole.
    pub failed_invocations: usize,
    /// Records sent to the on-failure destination.
    pub dead_lettered: usize,
}

/// Delivers `records` (in stream order) to `invoker`, retrying, splitting and dead-lettering as
/// described in the module documentation. Returns once every record is either acknowledged by
/// the function or written to the on-failure destination.
pub async fn deliver<I: Invoke>(
    invoker: &I,
    shard_id: &str,
    records: &[Record],
    config: &MapperConfig,
) -> DeliveryReport {
    let mut report = DeliveryReport::default();
    // Ranges still to deliver, the next one on top; a split pushes the second half first.
    let mut ranges = vec![(0, records.len())];
    while let Some((start, end)) = ranges.pop() {
        let mut from = start;
        let mut attempts = 0u32;
        while from < end {
            report.invocations += 1;
            let last_error = match invoker.invoke(&records[from..end]).await {
                Ok(failed) if failed.is_empty() => break,
                Ok(failed) => {
                    report.failed_invocations += 1;
                    let lowest = (from..end).find(|&i| {
                        records[i]
                            .dynamodb()
                            .and_then(|d| d.sequence_number())
                            .is_some_and(|seq| failed.iter().any(|f| f == seq))
                    });
                    match lowest {
                        Some(index) if index > from => {
                            // Progress: everything before the first failure is done.
                            from = index;
                            attempts = 1;
                        }
                        Some(_) => attempts += 1,
                        // An identifier that is not in the batch: AWS retries the whole batch.
                        None => attempts += 1,
                    }
                    format!("reported as failed: {failed:?}")
                }
                Err(error) => {
                    report.failed_invocations += 1;
                    attempts += 1;
                    error.0
                }
            };
            if attempts > config.max_retries {
                if end - from > 1 {
                    let middle = from + (end - from) / 2;
                    tracing::warn!(
                        shard_id,
                        from,
                        end,
                        "batch keeps failing: splitting it in two"
                    );
                    ranges.push((middle, end));
                    ranges.push((from, middle));
                } else {
                    dead_letter(config, shard_id, &records[from], attempts, &last_error);
                    report.dead_lettered += 1;
                }
                break;
            }
            if attempts > 0 {
                let factor = 1u32 << (attempts - 1).min(5);
                let pause = (config.retry_backoff * factor).min(Duration::from_secs(5));
                tokio::time::sleep(pause).await;
            }
        }
    }
    report
}

/// Appends a record that failed every retry to the on-failure destination.
fn dead_letter(
    config: &MapperConfig,
    shard_id: &str,
    record: &Record,
    attempts: u32,
    reason: &str,
) {
    let sequence = record
        .dynamodb()
        .and_then(|d| d.sequence_number())
        .unwrap_or_default();
    let entry = json!({
        "time": chrono::Utc::now().to_rfc3339(),
        "shardId": shard_id,
        "sequenceNumber": sequence,
        "eventName": record.event_name().map(|e| e.as_str().to_string()),
        "keys": record.dynamodb().and_then(|d| d.keys()).map(keys_json),
        "attempts": attempts,
        "reason": reason,
    });
    tracing::error!(
        shard_id,
        sequence,
        reason,
        "record failed every retry: sent to the on-failure destination"
    );
    let written = (|| -> std::io::Result<()> {
        if let Some(parent) = config.failure_file.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&config.failure_file)?;
        writeln!(file, "{entry}")
    })();
    if let Err(error) = written {
        // The destination itself failed: say so loudly with the whole entry, so nothing is lost.
        tracing::error!(%error, %entry, file = %config.failure_file.display(), "could not write the on-failure destination");
    }
}

fn keys_json(
    keys: &std::collections::HashMap<String, aws_sdk_dynamodbstreams::types::AttributeValue>,
) -> Value {
    keys.iter()
        .map(|(name, value)| {
            let text = match value {
                aws_sdk_dynamodbstreams::types::AttributeValue::S(s) => s.clone(),
                other => format!("{other:?}"),
            };
            (name.clone(), Value::String(text))
        })
        .collect::<serde_json::Map<_, _>>()
        .into()
}
