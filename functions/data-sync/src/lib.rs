//! data-sync: the command table's DynamoDB stream projected into the data and history tables.
//!
//! The command handler writes every change as a new, immutable version (`sk@version`) into the
//! command table; its stream (`NEW_IMAGE`) invokes this function with batches of records.
//! [`DataSync::handle`] turns a batch into writes and answers which records failed:
//!
//! - **`INSERT`** records are projected ([`record::action`]): the version goes into the history
//!   table under `sk@version` (write-once, a replay is success) and, unless the data table already
//!   holds this version or a newer one, into the data table under the version-free `sk` with
//!   `cpk`/`csk` naming the command row (newest version wins, whatever the arrival order). Then
//!   every [`SyncTarget`] runs.
//! - **`MODIFY`** and **`REMOVE`** records (a TTL expiry of a command row, say) are acknowledged
//!   and ignored, with a log line.
//! - **Ordering**: records of one item (same `pk` and version-free `sk`) are applied one after the
//!   other, in stream order; different items go concurrently, at most [`DEFAULT_CONCURRENCY`] at
//!   a time ([`DataSync::with_concurrency`]), so a batch of hundreds of records costs a few round
//!   trips of wall time.
//! - **Failures**: a record that cannot be projected (a malformed image, a write still failing
//!   after the store's bounded retries, a failing target) is reported in `batchItemFailures` with
//!   its sequence number, for an event source mapping with `ReportBatchItemFailures`. Its item
//!   stops there: the item's later records in the batch are not applied, so nothing of one item
//!   is applied past a failure. The response lists the first failed record of every item that
//!   failed, in stream order; Lambda resumes the shard from the lowest of them and delivers every
//!   later record again, which the idempotent writes absorb. A record without a sequence number
//!   is reported with an empty identifier, which fails the whole batch. Nothing is dropped
//!   silently.
//!
//! The writes go through the [`ProjectionWriter`] trait ([`cqrs_store::Store`] in production), so
//! tests inject faults without touching the handler.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use aws_lambda_events::event::dynamodb::Event;
//! # use cqrs_item::Item;
//! # use cqrs_store::{StoreError, projection::{DataWrite, HistoryWrite}};
//! # use futures::future::{BoxFuture, FutureExt};
//! # struct Memory;
//! # impl data_sync::ProjectionWriter for Memory {
//! #     fn put_data_if_newer<'a>(&'a self, _: &'a Item) -> BoxFuture<'a, Result<DataWrite, StoreError>> { async { Ok(DataWrite::Written) }.boxed() }
//! #     fn put_history<'a>(&'a self, _: &'a Item) -> BoxFuture<'a, Result<HistoryWrite, StoreError>> { async { Ok(HistoryWrite::Written) }.boxed() }
//! # }
//! let sync = data_sync::DataSync::new(Memory);
//! let event: Event = serde_json::from_str(
//!     r#"{"Records":[{"eventID":"1","eventName":"INSERT","awsRegion":"r",
//!        "dynamodb":{"Keys":{"pk":{"S":"P#t1"},"sk":{"S":"a@1"}},
//!                    "NewImage":{"pk":{"S":"P#t1"},"sk":{"S":"a@1"}},
//!                    "SequenceNumber":"100","SizeBytes":1}}]}"#,
//! )
//! .unwrap();
//! // The image lacks most of the item shape: the record is reported, not dropped.
//! let response = sync.handle(event).await;
//! assert_eq!(response.batch_item_failures[0].item_identifier.as_deref(), Some("100"));
//! # }
//! ```
#![forbid(unsafe_code)]

pub mod change_log;
pub mod record;
pub mod target;
pub mod writer;

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use aws_lambda_events::event::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use cqrs_store::StoreError;
use futures::StreamExt;
use lambda_runtime::LambdaEvent;
use tracing::Instrument;

pub use target::{Change, SyncTarget, TargetError};
pub use writer::ProjectionWriter;

use record::{Action, ItemKey};

/// How many items are projected at the same time by default.
pub const DEFAULT_CONCURRENCY: usize = 32;

/// The projection: where it writes, what runs after, how many items at a time.
///
/// ```no_run
/// # async fn wire() -> Result<(), Box<dyn std::error::Error>> {
/// let config = aws_config::load_from_env().await;
/// let store = cqrs_store::Store::new(
///     aws_sdk_dynamodb::Client::new(&config),
///     cqrs_store::Tables::from_env()?,
/// );
/// let sync = data_sync::DataSync::new(store.clone())
///     .with_target(data_sync::change_log::ChangeLog::new(store, "cqrs-change-log"))
///     .with_concurrency(16);
/// # Ok(()) }
/// ```
pub struct DataSync {
    writer: Arc<dyn ProjectionWriter>,
    targets: Vec<Arc<dyn SyncTarget>>,
    concurrency: usize,
}

impl fmt::Debug for DataSync {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DataSync")
            .field(
                "targets",
                &self.targets.iter().map(|t| t.name()).collect::<Vec<_>>(),
            )
            .field("concurrency", &self.concurrency)
            .finish_non_exhaustive()
    }
}

/// Why a record was not projected.
#[derive(Debug)]
enum Failure {
    Malformed(String),
    Store(StoreError),
    Target { name: String, error: TargetError },
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Malformed(reason) => write!(f, "malformed record: {reason}"),
            Failure::Store(error) => write!(f, "projection write failed: {error}"),
            Failure::Target { name, error } => write!(f, "sync target {name} failed: {error}"),
        }
    }
}

/// A record of a batch, with its position in the batch.
struct Entry {
    position: usize,
    sequence_number: String,
    event_id: String,
    record: EventRecord,
}

/// The first failed record of one item.
struct Failed {
    position: usize,
    sequence_number: String,
}

/// What projecting one item's records came to.
#[derive(Default)]
struct Outcome {
    projected: usize,
    held_back: usize,
    failed: Option<Failed>,
}

impl DataSync {
    /// A projection writing through `writer`, with no sync target and [`DEFAULT_CONCURRENCY`].
    ///
    /// ```no_run
    /// # fn wire(store: cqrs_store::Store) {
    /// let sync = data_sync::DataSync::new(store);
    /// # }
    /// ```
    pub fn new(writer: impl ProjectionWriter + 'static) -> Self {
        DataSync {
            writer: Arc::new(writer),
            targets: Vec::new(),
            concurrency: DEFAULT_CONCURRENCY,
        }
    }

    /// Adds a sync target; targets run in the order they were added, after the data and history
    /// writes of each version.
    ///
    /// ```no_run
    /// # fn wire(store: cqrs_store::Store) {
    /// let sync = data_sync::DataSync::new(store.clone())
    ///     .with_target(data_sync::change_log::ChangeLog::new(store, "cqrs-change-log"));
    /// # }
    /// ```
    pub fn with_target(mut self, target: impl SyncTarget + 'static) -> Self {
        self.targets.push(Arc::new(target));
        self
    }

    /// Sets how many items are projected at the same time (at least 1).
    ///
    /// ```no_run
    /// # fn wire(store: cqrs_store::Store) {
    /// let sync = data_sync::DataSync::new(store).with_concurrency(8);
    /// # }
    /// ```
    pub fn with_concurrency(mut self, concurrency: usize) -> Self {
        self.concurrency = concurrency.max(1);
        self
    }

    /// Projects one batch and answers the records to deliver again (see the
    /// [crate docs](crate)); an empty `batchItemFailures` when every record succeeded.
    #[tracing::instrument(skip_all, fields(records = event.records.len()))]
    pub async fn handle(&self, event: Event) -> DynamoDbEventResponse {
        let total = event.records.len();
        let mut groups: Vec<Vec<Entry>> = Vec::new();
        let mut index: HashMap<ItemKey, usize> = HashMap::new();
        for (position, record) in event.records.into_iter().enumerate() {
            let entry = Entry {
                position,
                sequence_number: record.change.sequence_number.clone().unwrap_or_default(),
                event_id: record.event_id.clone(),
                record,
            };
            // Records without a key each make an item of their own.
            match record::item_key(&entry.record) {
                Some(key) => {
                    let next = groups.len();
                    let group = *index.entry(key).or_insert(next);
                    if group == next {
                        groups.push(Vec::new());
                    }
                    groups[group].push(entry);
                }
                None => groups.push(vec![entry]),
            }
        }

        let outcomes: Vec<Outcome> = futures::stream::iter(groups)
            .map(|entries| self.project_item(entries))
            .buffer_unordered(self.concurrency)
            .collect()
            .await;

        let mut failed: Vec<Failed> = Vec::new();
        let (mut projected, mut held_back) = (0, 0);
        for outcome in outcomes {
            projected += outcome.projected;
            held_back += outcome.held_back;
            failed.extend(outcome.failed);
        }
        failed.sort_by_key(|f| f.position);
        if failed.is_empty() {
            tracing::info!(total, projected, "batch projected");
        } else {
            tracing::warn!(
                total,
                projected,
                failed = failed.len(),
                held_back,
                resume_from = %failed[0].sequence_number,
                "batch partly projected; failed records reported for redelivery"
            );
        }
        let mut response = DynamoDbEventResponse::default();
        response.batch_item_failures = failed
            .into_iter()
            .map(|f| {
                let mut failure = DynamoDbBatchItemFailure::default();
                failure.item_identifier = Some(f.sequence_number);
                failure
            })
            .collect();
        response
    }

    /// Applies one item's records in order, stopping at the first failure.
    async fn project_item(&self, entries: Vec<Entry>) -> Outcome {
        let mut outcome = Outcome::default();
        let count = entries.len();
        for (done, entry) in entries.into_iter().enumerate() {
            let span = tracing::info_span!(
                "record",
                sequence_number = %entry.sequence_number,
                event_id = %entry.event_id,
                event_name = %entry.record.event_name,
            );
            let result = self.project_record(&entry).instrument(span.clone()).await;
            match result {
                Ok(projected) => outcome.projected += usize::from(projected),
                Err(failure) => {
                    let held_back = count - done - 1;
                    span.in_scope(|| match &failure {
                        Failure::Malformed(_) => {
                            tracing::error!(%failure, held_back, "record not projected")
                        }
                        _ => tracing::warn!(%failure, held_back, "record not projected"),
                    });
                    outcome.held_back = held_back;
                    outcome.failed = Some(Failed {
                        position: entry.position,
                        sequence_number: entry.sequence_number,
                    });
                    break;
                }
            }
        }
        outcome
    }

    /// Projects one record; `Ok(true)` when a version was projected, `Ok(false)` when ignored.
    async fn project_record(&self, entry: &Entry) -> Result<bool, Failure> {
        let item = match record::action(&entry.record) {
            Action::Project(item) => *item,
            Action::Ignore(event_name) => {
                tracing::info!(%event_name, "not an INSERT: acknowledged, nothing to project");
                return Ok(false);
            }
            Action::Malformed(reason) => return Err(Failure::Malformed(reason)),
        };
        let (history, data) = futures::try_join!(
            self.writer.put_history(&item),
            self.writer.put_data_if_newer(&item),
        )
        .map_err(Failure::Store)?;
        tracing::debug!(pk = %item.pk, sk = %item.sk, ?history, ?data, "projected");
        let change = Change {
            item,
            data,
            sequence_number: entry.sequence_number.clone(),
            event_id: entry.event_id.clone(),
            approximate_creation: record::created(&entry.record),
        };
        for target in &self.targets {
            target
                .apply(&change)
                .await
                .map_err(|error| Failure::Target {
                    name: target.name().to_string(),
                    error,
                })?;
        }
        Ok(true)
    }
}

/// The Lambda entry point: one invocation, one batch. The runtime's span carries the request id
/// (`requestId`) into every log line of the invocation.
///
/// ```no_run
/// # async fn wire(sync: data_sync::DataSync) -> Result<(), lambda_runtime::Error> {
/// use aws_lambda_events::event::dynamodb::Event;
/// use lambda_runtime::{LambdaEvent, service_fn};
/// let sync = &sync;
/// lambda_runtime::run(service_fn(move |event: LambdaEvent<Event>| async move {
///     data_sync::handle_event(sync, event).await
/// }))
/// .await
/// # }
/// ```
pub async fn handle_event(
    sync: &DataSync,
    event: LambdaEvent<Event>,
) -> Result<DynamoDbEventResponse, lambda_runtime::Error> {
    Ok(sync.handle(event.payload).await)
}
