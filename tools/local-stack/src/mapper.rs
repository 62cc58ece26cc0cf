//! The local stand-in for Lambda's DynamoDB event source mapping: read a table's stream, invoke
//! data-sync or sql-sync with real batches, and handle the answer the way Lambda does with
//! `ReportBatchItemFailures` and `BisectBatchOnFunctionError` (both set in `template.yaml`). It is
//! the one delivery model of the project: the local stack, sql-sync's chaos test and the
//! reliability suite all deliver through [`deliver`].
//!
//! - Records are gathered into batches of at most [`MapperConfig::batch_size`], waiting at most
//!   [`MapperConfig::batching_window`] after the first record of a batch (`BatchSize` and
//!   `MaximumBatchingWindowInSeconds` in the template).
//! - Shards are read one batch at a time, so records of one item reach the function in stream
//!   order (`ParallelizationFactor: 1`).
//!
//! Lambda's documented rule ("Configuring partial batch response with DynamoDB and Lambda",
//! "Bisecting a batch"), which [`deliver`] follows:
//!
//! - An answer with `batchItemFailures` checkpoints at the **lowest** sequence number reported:
//!   every record before it is done, and the batch is cut there ("bisected at the returned
//!   sequence number"): only that record and the ones after it are retried. A function that
//!   reports its batch's **first** record therefore cuts nothing and makes no progress.
//! - A failed invocation (the function errored, timed out, or could not be reached), and an answer
//!   Lambda reads as a complete failure (an empty or unknown `itemIdentifier`), bisects the batch
//!   in two halves at once, whatever `ReportBatchItemFailures` says; each half is a batch of its
//!   own, with its own retries.
//! - A batch that failed [`MapperConfig::max_retries`] retries (`MaximumRetryAttempts`) is given up:
//!   **all** its records go to the on-failure destination (here a JSON-lines file, one line a
//!   record), and delivery goes on after them. So a record that is reported every time takes the
//!   records after it in its batch along: a function must never report a record that can never
//!   succeed (sql-sync parks it instead). Lambda also gives up at `MaximumRecordAgeInSeconds`; the
//!   local mapping has no age limit and a `MaximumRetryAttempts` of -1 (until that age) is capped
//!   locally (`crate::mapping`).

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
    /// Retries of a failed batch before its records go to the on-failure destination
    /// (`MaximumRetryAttempts`).
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

/// A stream record as the mapping needs it: its sequence number, and what the on-failure
/// destination says of it. Implemented by the DynamoDB Streams API's records (what the local stack
/// reads) and by the Lambda event's records (what in-process tests deliver).
pub trait StreamRecord {
    /// Its sequence number.
    fn sequence_number(&self) -> Option<&str>;
    /// Its `eventName`.
    fn event_name(&self) -> Option<String>;
    /// Its keys, as `{"pk": "...", "sk": "..."}`.
    fn keys_json(&self) -> Option<Value>;
}

impl StreamRecord for Record {
    fn sequence_number(&self) -> Option<&str> {
        self.dynamodb().and_then(|d| d.sequence_number())
    }

    fn event_name(&self) -> Option<String> {
        self.event_name().map(|e| e.as_str().to_string())
    }

    fn keys_json(&self) -> Option<Value> {
        self.dynamodb().and_then(|d| d.keys()).map(keys_json)
    }
}

impl StreamRecord for aws_lambda_events::event::dynamodb::EventRecord {
    fn sequence_number(&self) -> Option<&str> {
        self.change.sequence_number.as_deref()
    }

    fn event_name(&self) -> Option<String> {
        Some(self.event_name.clone())
    }

    fn keys_json(&self) -> Option<Value> {
        let keys: serde_json::Map<String, Value> = self
            .change
            .keys
            .iter()
            .map(|(name, value)| {
                let text = match value {
                    serde_dynamo::AttributeValue::S(s) => s.clone(),
                    other => format!("{other:?}"),
                };
                (name.clone(), Value::String(text))
            })
            .collect();
        Some(keys.into())
    }
}

/// Invokes the function with one batch; answers the sequence numbers it reported as failed.
/// `R` is the kind of record ([`StreamRecord`]): the Streams API's by default.
pub trait Invoke<R = Record> {
    /// Sends `records` as one DynamoDB stream event.
    fn invoke(&self, records: &[R]) -> impl Future<Output = Result<Vec<String>, InvokeError>>;
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
    /// Their sequence numbers, in the order they were sent.
    pub dead_letters: Vec<String>,
}

/// Delivers `records` (in stream order) to `invoker` by Lambda's rule (see the module
/// documentation): checkpoint at the lowest reported record, bisect at once on a failed
/// invocation, and after [`MapperConfig::max_retries`] retries send the batch's records to the
/// on-failure destination. Returns once every record is either acknowledged by the function or
/// written to the on-failure destination.
pub async fn deliver<R: StreamRecord, I: Invoke<R>>(
    invoker: &I,
    shard_id: &str,
    records: &[R],
    config: &MapperConfig,
) -> DeliveryReport {
    let mut report = DeliveryReport::default();
    // Batches still to deliver, the next one on top; a bisection pushes the second half first.
    let mut ranges = vec![(0, records.len())];
    while let Some((start, end)) = ranges.pop() {
        let mut from = start;
        // Failed invocations of the batch `from..end`, since it became one.
        let mut failures = 0u32;
        while from < end {
            report.invocations += 1;
            let batch = &records[from..end];
            let answer = invoker.invoke(batch).await;
            let (reason, cut) = match answer {
                Ok(failed) if failed.is_empty() => break,
                Ok(failed) => {
                    // Every identifier must be a record of the batch; otherwise Lambda reads a
                    // complete failure.
                    let positions: Option<Vec<usize>> = failed
                        .iter()
                        .map(|f| batch.iter().position(|r| r.sequence_number() == Some(f)))
                        .collect();
                    let reason = format!("reported as failed: {failed:?}");
                    match positions.and_then(|p| p.into_iter().min()) {
                        Some(lowest) => (reason, Some(lowest)),
                        None => (format!("{reason} (not records of the batch)"), None),
                    }
                }
                Err(error) => (error.0, None),
            };
            report.failed_invocations += 1;
            match cut {
                Some(lowest) if lowest > 0 => {
                    // The records before it are done; the rest is a batch that failed once.
                    from += lowest;
                    failures = 1;
                }
                Some(_) => failures += 1,
                None if end - from > 1 => {
                    let middle = from + (end - from) / 2;
                    tracing::warn!(
                        shard_id,
                        from,
                        end,
                        reason,
                        "the invocation failed: bisecting the batch"
                    );
                    ranges.push((middle, end));
                    ranges.push((from, middle));
                    break;
                }
                None => failures += 1,
            }
            if failures > config.max_retries {
                for record in &records[from..end] {
                    dead_letter(config, shard_id, record, end - from, failures, &reason);
                    report.dead_lettered += 1;
                    report
                        .dead_letters
                        .push(record.sequence_number().unwrap_or_default().to_string());
                }
                break;
            }
            let factor = 1u32 << (failures.max(1) - 1).min(5);
            let pause = (config.retry_backoff * factor).min(Duration::from_secs(5));
            tokio::time::sleep(pause).await;
        }
    }
    report
}

/// Appends a record of a batch (of `batch_size` records) that failed every retry to the
/// on-failure destination.
fn dead_letter<R: StreamRecord>(
    config: &MapperConfig,
    shard_id: &str,
    record: &R,
    batch_size: usize,
    attempts: u32,
    reason: &str,
) {
    let sequence = record.sequence_number().unwrap_or_default();
    let entry = json!({
        "time": chrono::Utc::now().to_rfc3339(),
        "shardId": shard_id,
        "sequenceNumber": sequence,
        "eventName": record.event_name(),
        "keys": record.keys_json(),
        "batchSize": batch_size,
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
