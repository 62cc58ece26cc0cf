//! data-sync: the command table's DynamoDB stream projected into the data and history tables.
//!
//! The command handler writes every change as a new, immutable version (`sk@version`) into the
//! command table; its stream (`NEW_IMAGE`) invokes this function with batches of records.
//! [`DataSync::handle`] turns a batch into writes and answers which records failed:
//!
//! - **`INSERT`** records are projected ([`record::action`]), a whole batch at a time:
//!   1. **history**: every version of the batch goes into the history table under `sk@version`
//!      at once ([`ProjectionWriter::put_history_batch`]: `BatchGetItem` to find what is already
//!      there, `BatchWriteItem` for the rest, 25 puts a call; write-once, a replay is success);
//!   2. **data**: per item, the versions of the batch **collapse** into one conditional write of
//!      the newest version whose history row is in place, under the version-free `sk` with
//!      `cpk`/`csk` naming the command row, unless the data table already holds this version or
//!      a newer one (newest version wins, whatever the arrival order). History goes first so that
//!      a version history refuses never reaches the data table;
//!   3. **targets**: every [`SyncTarget`] gets every version of the item, in stream order (older
//!      versions of the batch are told [`DataWrite::AlreadyCurrent`]).
//! - **`MODIFY`** and **`REMOVE`** records (a TTL expiry of a command row, say) are acknowledged
//!   and ignored, with a log line.
//! - **Ordering**: the versions of one item are walked in stream order; different items go
//!   concurrently, at most [`DEFAULT_CONCURRENCY`] at a time ([`DataSync::with_concurrency`]), so
//!   a batch of a thousand records costs a few dozen batch requests and one conditional write
//!   per item.
//! - **Permanent failures are parked**: a record that can never be projected (a malformed image,
//!   an unknown event name, an item over DynamoDB's limits ([`record::check_limits`]), a version
//!   whose history row already holds other content, a stored row that is not an item) is written
//!   to the parked table with its reason ([`cqrs_store::parked`]), logged at error level, counted
//!   ([`metrics`]) and acknowledged, so the shard goes on. The item's later records in the batch
//!   are still projected: history is per version and the data table keeps the newest version
//!   whatever the order, so skipping one version corrupts nothing, and a redrive of the parked
//!   record later lands exactly as a late delivery would.
//! - **Transient failures are retried**: a write still failing after the store's bounded retries
//!   (throttling, transport), a failing target, or a park write that fails is reported in
//!   `batchItemFailures` with a sequence number, for an event source mapping with
//!   `ReportBatchItemFailures`. A history write or park that fails stops its item at that record
//!   (the versions before it still go to the data table and the targets); a failed data write
//!   reports the item's **earliest** record of the batch (not the newest, collapsed one), so the
//!   redelivery brings every version of the item to the targets again; a failing target reports
//!   the version it failed on. The response lists the first failed record of every item that
//!   failed, in stream order; Lambda resumes the shard from the lowest of them and delivers every
//!   later record again, which the idempotent writes absorb. A record without a sequence number
//!   is reported with an empty identifier, which fails the whole batch. Nothing is dropped
//!   silently: a record is projected, ignored (not an `INSERT`), parked, or reported.
//! - **A failed first record fails the invocation** ([`DataSync::invoke`], what the Lambda entry
//!   point answers): Lambda's mapping resumes from, and bisects at, the sequence number returned,
//!   so a reported first record would split nothing and, after the retries, take every record
//!   after it to the on-failure destination. A failed invocation makes the mapping split the
//!   batch in halves until a record that keeps failing is alone.
//! - **Metrics**: every batch writes one CloudWatch EMF line ([`metrics`]): records, items,
//!   parked, retried, projection lag (max and median) and duration.
//!
//! The writes go through the [`ProjectionWriter`] trait ([`cqrs_store::Store`] in production), so
//! tests inject faults without touching the handler.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use aws_lambda_events::event::dynamodb::Event;
//! # use cqrs_item::Item;
//! # use cqrs_store::{StoreError, parked::{ParkWrite, ParkedRecord}, projection::{DataWrite, HistoryWrite}};
//! # use futures::future::{BoxFuture, FutureExt};
//! # struct Memory;
//! # impl cqrs_data_sync::ProjectionWriter for Memory {
//! #     fn put_data_if_newer<'a>(&'a self, _: &'a Item) -> BoxFuture<'a, Result<DataWrite, StoreError>> { async { Ok(DataWrite::Written) }.boxed() }
//! #     fn put_history<'a>(&'a self, _: &'a Item) -> BoxFuture<'a, Result<HistoryWrite, StoreError>> { async { Ok(HistoryWrite::Written) }.boxed() }
//! #     fn park<'a>(&'a self, _: &'a ParkedRecord) -> BoxFuture<'a, Result<ParkWrite, StoreError>> { async { Ok(ParkWrite::Parked) }.boxed() }
//! # }
//! let sync = cqrs_data_sync::DataSync::new(Memory);
//! let event: Event = serde_json::from_str(
//!     r#"{"Records":[{"eventID":"1","eventName":"INSERT","awsRegion":"r",
//!        "dynamodb":{"Keys":{"pk":{"S":"P#t1"},"sk":{"S":"a@1"}},
//!                    "NewImage":{"pk":{"S":"P#t1"},"sk":{"S":"a@1"}},
//!                    "SequenceNumber":"100","SizeBytes":1}}]}"#,
//! )
//! .unwrap();
//! // The image lacks most of the item shape: the record is parked and acknowledged, not retried.
//! let (response, counts) = sync.handle_counted(event).await;
//! assert!(response.batch_item_failures.is_empty());
//! assert_eq!(counts.parked, 1);
//! # }
//! ```
#![forbid(unsafe_code)]
#![cfg_attr(
    not(test),
    warn(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

pub mod change_log;
pub mod metrics;
pub mod record;
pub mod target;
pub mod writer;

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use aws_lambda_events::event::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use cqrs_item::Item;
use cqrs_store::StoreError;
use cqrs_store::parked::ParkedRecord;
use cqrs_store::projection::{DataWrite, HistoryWrite};
use futures::StreamExt;
use lambda_runtime::LambdaEvent;
use tracing::Instrument;

pub use metrics::BatchCounts;
pub use target::{Change, SyncTarget, TargetError};
pub use writer::ProjectionWriter;

use record::{Action, ItemKey};

/// How many items are projected at the same time by default.
pub const DEFAULT_CONCURRENCY: usize = 32;

/// The projection: where it writes, what runs after, how many items at a time.
///
/// ```no_run
/// # async fn wire() -> Result<(), Box<dyn std::error::Error>> {
/// let env = cqrs_store::client::ClientEnv::from_env()?;
/// let client = env.client(cqrs_store::client::http_client(env.tls_roots)?);
/// let store = cqrs_store::Store::new(client, cqrs_store::Tables::from_env()?);
/// let sync = cqrs_data_sync::DataSync::new(store).with_concurrency(16);
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
    /// The record is not a well-formed version (permanent).
    Malformed(String),
    /// The version cannot be stored in the data or history table (permanent).
    OverLimit(String),
    /// A projection write failed: permanent for a history conflict or a stored row that is not an
    /// item, transient otherwise.
    Store(StoreError),
    /// A sync target failed (retried: a target's error says nothing about the record).
    Target { name: String, error: TargetError },
}

impl Failure {
    /// The kind of a permanent failure (the record is parked), `None` for a transient one (the
    /// record is retried). Unknown store errors count as transient: retrying is the safe side.
    fn permanent_kind(&self) -> Option<&'static str> {
        match self {
            Failure::Malformed(_) => Some("malformed"),
            Failure::OverLimit(_) => Some("over-limit"),
            Failure::Store(StoreError::HistoryConflict { .. }) => Some("history-conflict"),
            Failure::Store(StoreError::Conversion(_)) => Some("unconvertible"),
            Failure::Store(_) | Failure::Target { .. } => None,
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Malformed(reason) => write!(f, "malformed record: {reason}"),
            Failure::OverLimit(reason) => write!(f, "over DynamoDB's limits: {reason}"),
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

/// What a record comes to before any write: ignored, refused, or a version (an index into the
/// batch's versions).
enum Parsed {
    Ignore(String),
    Refused(Failure),
    Version(usize),
}

/// What a record comes to after the batch's history write.
enum Ready {
    Ignore(String),
    Refused(Failure),
    Version(Box<Item>, Result<HistoryWrite, StoreError>),
}

/// A version of an item whose history row is in place: a candidate for the data table.
struct Candidate {
    entry: Entry,
    item: Item,
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
    parked: usize,
    held_back: usize,
    failed: Option<Failed>,
}

impl DataSync {
    /// A projection writing through `writer`, with no sync target and [`DEFAULT_CONCURRENCY`].
    ///
    /// ```no_run
    /// # fn wire(store: cqrs_store::Store) {
    /// let sync = cqrs_data_sync::DataSync::new(store);
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
    /// **Deprecated**: a failing target holds back every item of its stream shard, the projection
    /// included. Declare a consumer instead (`[consumers.<name>]` in `model.toml`) and run the
    /// target as it is with `cqrs_consumer::FromSyncTarget`: it gets its own queue, dead-letter
    /// queue, lag alarm and redrive. Targets added here keep running until the next major version.
    ///
    /// ```no_run
    /// # fn wire(store: cqrs_store::Store) {
    /// # #[allow(deprecated)]
    /// let sync = cqrs_data_sync::DataSync::new(store.clone())
    ///     .with_target(cqrs_data_sync::change_log::ChangeLog::new(store, "cqrs-change-log"));
    /// # }
    /// ```
    #[deprecated(
        note = "a failing target stalls its whole stream shard: declare a consumer ([consumers.<name>] in model.toml) and run the target with cqrs_consumer::FromSyncTarget"
    )]
    pub fn with_target(mut self, target: impl SyncTarget + 'static) -> Self {
        self.targets.push(Arc::new(target));
        self
    }

    /// Sets how many items are projected at the same time (at least 1).
    ///
    /// ```no_run
    /// # fn wire(store: cqrs_store::Store) {
    /// let sync = cqrs_data_sync::DataSync::new(store).with_concurrency(8);
    /// # }
    /// ```
    pub fn with_concurrency(mut self, concurrency: usize) -> Self {
        self.concurrency = concurrency.max(1);
        self
    }

    /// Projects one batch and answers the records to deliver again (see the
    /// [crate docs](crate)); an empty `batchItemFailures` when every record succeeded or was
    /// parked.
    pub async fn handle(&self, event: Event) -> DynamoDbEventResponse {
        self.handle_counted(event).await.0
    }

    /// What the Lambda invocation answers for one batch ([`handle_event`] calls it): the answer
    /// of [`DataSync::handle`], except when it would report the batch's **first** record while the
    /// batch holds more. Lambda's stream mapping resumes from, and with `BisectBatchOnFunctionError`
    /// splits at, the sequence number a function returns, so a reported first record splits
    /// nothing: after the retries that record goes to the on-failure destination together with
    /// every record after it, of every item on the shard. The invocation fails instead
    /// ([`NoProgress`]), which makes the mapping bisect the batch, so a record that keeps failing
    /// (one that can neither be projected nor parked) ends up alone and is the only one sent to
    /// the on-failure destination. What the batch's records before the failure wrote stays
    /// written: every write is idempotent.
    ///
    /// ```no_run
    /// # async fn run(sync: cqrs_data_sync::DataSync, event: aws_lambda_events::event::dynamodb::Event) {
    /// match sync.invoke(event).await {
    ///     Ok(response) => println!("{} records to deliver again", response.batch_item_failures.len()),
    ///     Err(no_progress) => println!("the mapping bisects the batch: {no_progress}"),
    /// }
    /// # }
    /// ```
    pub async fn invoke(&self, event: Event) -> Result<DynamoDbEventResponse, NoProgress> {
        let records = event.records.len();
        let first = event
            .records
            .first()
            .and_then(|r| r.change.sequence_number.clone());
        let response = self.handle(event).await;
        let reports_first = first.is_some()
            && response
                .batch_item_failures
                .iter()
                .any(|f| f.item_identifier == first);
        if records > 1 && reports_first {
            tracing::error!(
                records,
                failed = response.batch_item_failures.len(),
                "the batch's first record failed: the invocation fails so that the mapping splits the batch"
            );
            return Err(NoProgress {
                records,
                failed: response.batch_item_failures.len(),
            });
        }
        Ok(response)
    }

    /// [`DataSync::handle`], also answering what became of the batch's records. Logs the batch
    /// summary and writes the [`metrics`] line.
    ///
    /// ```no_run
    /// # async fn run(sync: cqrs_data_sync::DataSync, event: aws_lambda_events::event::dynamodb::Event) {
    /// let (response, counts) = sync.handle_counted(event).await;
    /// assert_eq!(counts.retried, response.batch_item_failures.len());
    /// # }
    /// ```
    #[tracing::instrument(skip_all, fields(records = event.records.len()))]
    pub async fn handle_counted(&self, event: Event) -> (DynamoDbEventResponse, BatchCounts) {
        let started = std::time::Instant::now();
        let total = event.records.len();
        let lag = metrics::Lag::of(
            event.records.iter().map(record::created),
            chrono::Utc::now(),
        );

        // 1. Records grouped by item, in stream order; every version of the batch in one list.
        let mut groups: Vec<Vec<(Entry, Parsed)>> = Vec::new();
        let mut index: HashMap<ItemKey, usize> = HashMap::new();
        let mut versions: Vec<Item> = Vec::new();
        for (position, mut record) in event.records.into_iter().enumerate() {
            let parsed = match record::action(&record) {
                Action::Project(item) => match record::check_limits(&item) {
                    Ok(()) => {
                        // The item now holds what the image held: drop the image, so that a
                        // batch is not kept twice in memory (it is put back to park the record).
                        record.change.new_image = Default::default();
                        versions.push(*item);
                        Parsed::Version(versions.len() - 1)
                    }
                    Err(reason) => Parsed::Refused(Failure::OverLimit(reason)),
                },
                Action::Ignore(event_name) => Parsed::Ignore(event_name),
                Action::Malformed(reason) => Parsed::Refused(Failure::Malformed(reason)),
            };
            let entry = Entry {
                position,
                sequence_number: record.change.sequence_number.clone().unwrap_or_default(),
                event_id: record.event_id.clone(),
                record,
            };
            // Records without a key each make an item of their own.
            let key = record::item_key(&entry.record);
            let group = key.as_ref().and_then(|key| index.get(key).copied());
            match group.and_then(|group| groups.get_mut(group)) {
                Some(entries) => entries.push((entry, parsed)),
                None => {
                    if let Some(key) = key {
                        index.insert(key, groups.len());
                    }
                    groups.push(vec![(entry, parsed)]);
                }
            }
        }
        let items = groups.len();

        // 2. History first, every version of the batch at once: a version history refuses must
        // never reach the data table.
        let history = if versions.is_empty() {
            Vec::new()
        } else {
            self.writer.put_history_batch(&versions).await
        };
        let mut slots: Vec<Option<(Item, Result<HistoryWrite, StoreError>)>> = versions
            .into_iter()
            .zip(
                history
                    .into_iter()
                    .map(Some)
                    .chain(std::iter::repeat_with(|| None)),
            )
            .map(|(item, answer)| {
                let answer = answer.unwrap_or_else(|| {
                    Err(StoreError::Dynamo(
                        "the history write gave no answer".into(),
                    ))
                });
                Some((item, answer))
            })
            .collect();
        let groups: Vec<Vec<(Entry, Ready)>> = groups
            .into_iter()
            .map(|entries| {
                entries
                    .into_iter()
                    .map(|(entry, parsed)| {
                        let ready = match parsed {
                            Parsed::Ignore(name) => Ready::Ignore(name),
                            Parsed::Refused(failure) => Ready::Refused(failure),
                            Parsed::Version(at) => match slots.get_mut(at).and_then(Option::take) {
                                Some((item, answer)) => Ready::Version(Box::new(item), answer),
                                None => Ready::Refused(Failure::Malformed(
                                    "the version was lost in the batch".into(),
                                )),
                            },
                        };
                        (entry, ready)
                    })
                    .collect()
            })
            .collect();

        // 3. Per item: park what can never be projected, write the newest version once into the
        // data table, run the targets for every version in order.
        let outcomes: Vec<Outcome> = futures::stream::iter(groups)
            .map(|entries| self.project_item(entries))
            .buffer_unordered(self.concurrency)
            .collect()
            .await;

        let mut failed: Vec<Failed> = Vec::new();
        let mut counts = BatchCounts {
            records: total,
            items,
            lag,
            ..BatchCounts::default()
        };
        let mut held_back = 0;
        for outcome in outcomes {
            counts.projected += outcome.projected;
            counts.parked += outcome.parked;
            held_back += outcome.held_back;
            failed.extend(outcome.failed);
        }
        failed.sort_by_key(|f| f.position);
        counts.retried = failed.len();
        counts.duration = started.elapsed();
        match failed.first() {
            None => tracing::info!(
                total,
                items,
                projected = counts.projected,
                parked = counts.parked,
                "batch projected"
            ),
            Some(first) => tracing::warn!(
                total,
                items,
                projected = counts.projected,
                parked = counts.parked,
                failed = failed.len(),
                held_back,
                resume_from = %first.sequence_number,
                "batch partly projected; failed records reported for redelivery"
            ),
        }
        metrics::emit(&counts);
        let mut response = DynamoDbEventResponse::default();
        response.batch_item_failures = failed
            .into_iter()
            .map(|f| {
                let mut failure = DynamoDbBatchItemFailure::default();
                failure.item_identifier = Some(f.sequence_number);
                failure
            })
            .collect();
        (response, counts)
    }

    /// Projects one item's records, in stream order, after their history write: a permanent
    /// failure parks its record and goes on, a transient one (or a park that fails) stops the
    /// item there. The versions before the stop go to the data table in one write (the newest);
    /// when that write fails, the item's earliest record is reported, so the redelivery covers
    /// every version of the item. Then the targets get every version, in order.
    async fn project_item(&self, entries: Vec<(Entry, Ready)>) -> Outcome {
        let mut outcome = Outcome::default();
        let count = entries.len();
        let earliest = entries.first().map(|(entry, _)| Failed {
            position: entry.position,
            sequence_number: entry.sequence_number.clone(),
        });
        let mut candidates: Vec<Candidate> = Vec::new();
        for (done, (mut entry, ready)) in entries.into_iter().enumerate() {
            let span = record_span(&entry);
            let failure = match ready {
                Ready::Ignore(event_name) => {
                    span.in_scope(|| {
                        tracing::info!(%event_name, "not an INSERT: acknowledged, nothing to project")
                    });
                    continue;
                }
                Ready::Version(item, Ok(history)) => {
                    span.in_scope(|| tracing::debug!(pk = %item.pk, sk = %item.sk, ?history, "history written"));
                    candidates.push(Candidate { entry, item: *item });
                    continue;
                }
                Ready::Version(item, Err(error)) => {
                    restore_image(&mut entry, &item);
                    Failure::Store(error)
                }
                Ready::Refused(failure) => failure,
            };
            if self.park_or_keep(&entry, &failure, &span).await {
                outcome.parked += 1;
                continue;
            }
            let held_back = count.saturating_sub(done).saturating_sub(1);
            span.in_scope(|| tracing::warn!(%failure, held_back, "record not projected"));
            outcome.held_back = held_back;
            outcome.failed = Some(Failed {
                position: entry.position,
                sequence_number: entry.sequence_number,
            });
            break;
        }

        // One data write per item: its newest version. A version the data table can never hold
        // is parked and the next newest tried.
        let mut written: Option<(i64, DataWrite)> = None;
        while let Some(newest) = candidates
            .iter()
            .enumerate()
            .max_by_key(|(_, c)| c.item.version)
            .map(|(at, _)| at)
        {
            let Some(candidate) = candidates.get_mut(newest) else {
                break;
            };
            match self.writer.put_data_if_newer(&candidate.item).await {
                Ok(write) => {
                    written = Some((candidate.item.version, write));
                    break;
                }
                Err(error) => {
                    let failure = Failure::Store(error);
                    restore_image(&mut candidate.entry, &candidate.item);
                    let span = record_span(&candidate.entry);
                    if failure.permanent_kind().is_some()
                        && self.park_or_keep(&candidate.entry, &failure, &span).await
                    {
                        outcome.parked += 1;
                        candidates.remove(newest);
                        continue;
                    }
                    span.in_scope(|| {
                        tracing::warn!(
                            %failure,
                            versions = candidates.len(),
                            "data write failed: the item's earliest record is reported"
                        )
                    });
                    outcome.held_back = count.saturating_sub(1);
                    outcome.failed = earliest;
                    return outcome;
                }
            }
        }

        // Every version to the targets, in stream order.
        let count = candidates.len();
        for (done, candidate) in candidates.into_iter().enumerate() {
            let data = match written {
                Some((version, write)) if version == candidate.item.version => write,
                _ => DataWrite::AlreadyCurrent,
            };
            let span = record_span(&candidate.entry);
            let change = Change {
                approximate_creation: record::created(&candidate.entry.record),
                item: candidate.item,
                data,
                sequence_number: candidate.entry.sequence_number.clone(),
                event_id: candidate.entry.event_id.clone(),
            };
            if let Err(failure) = self.apply_targets(&change).instrument(span.clone()).await {
                let held_back = count.saturating_sub(done).saturating_sub(1);
                span.in_scope(|| tracing::warn!(%failure, held_back, "record not projected"));
                outcome.held_back = held_back;
                // A stop earlier in the loop above is later in the stream than any candidate.
                outcome.failed = Some(Failed {
                    position: candidate.entry.position,
                    sequence_number: candidate.entry.sequence_number,
                });
                return outcome;
            }
            outcome.projected += 1;
        }
        outcome
    }

    /// Parks `entry` when `failure` is permanent; `true` when it is parked (acknowledged),
    /// `false` when the record must be reported (a transient failure, or a park that failed).
    async fn park_or_keep(&self, entry: &Entry, failure: &Failure, span: &tracing::Span) -> bool {
        let Some(kind) = failure.permanent_kind() else {
            return false;
        };
        let parked: ParkedRecord = record::parked(
            &entry.record,
            kind,
            &failure.to_string(),
            chrono::Utc::now(),
        );
        match self.writer.park(&parked).instrument(span.clone()).await {
            Ok(write) => {
                span.in_scope(|| {
                    tracing::error!(
                        %failure,
                        reason_kind = kind,
                        ?write,
                        "record can never be projected: parked and acknowledged"
                    )
                });
                true
            }
            Err(error) => {
                span.in_scope(|| {
                    tracing::error!(
                        %failure,
                        %error,
                        "record can never be projected and parking it failed: reported for redelivery"
                    )
                });
                false
            }
        }
    }

    /// Runs every target on `change`, in the order they were added.
    async fn apply_targets(&self, change: &Change) -> Result<(), Failure> {
        for target in &self.targets {
            target
                .apply(change)
                .await
                .map_err(|error| Failure::Target {
                    name: target.name().to_string(),
                    error,
                })?;
        }
        Ok(())
    }
}

/// Puts the image of a version's record back from its item, for the parked table's copy of the
/// record (the image is dropped after parsing to save memory).
fn restore_image(entry: &mut Entry, item: &Item) {
    if entry.record.change.new_image.is_empty()
        && let Ok(attributes) = item.to_attributes()
    {
        entry.record.change.new_image = attributes.into();
    }
}

/// The log span of one record.
fn record_span(entry: &Entry) -> tracing::Span {
    tracing::info_span!(
        "record",
        sequence_number = %entry.sequence_number,
        event_id = %entry.event_id,
        event_name = %entry.record.event_name,
    )
}

/// Runs data-sync as a Lambda function on the command table's stream: builds the DynamoDB client
/// and the configuration once per cold start (each phase timed and logged once, see
/// [`cqrs_store::client::InitClock`]), the framework's own targets (the change log when
/// `CHANGE_LOG_TABLE` is set: deprecated, with a warning at cold start; the change log is the
/// consumer `cqrs_consumer::change_log` now), then the service's (`targets` adds them with
/// [`DataSync::with_target`]), and hands every batch to [`handle_event`]. A service's `data-sync`
/// binary is this call:
///
/// ```no_run
/// #[tokio::main]
/// async fn main() -> Result<(), lambda_runtime::Error> {
///     cqrs_data_sync::run(|_store, sync| sync).await
/// }
/// ```
///
/// Configuration: `COMMAND_TABLE`, `DATA_TABLE`, `HISTORY_TABLE`, `IDEMPOTENCY_TABLE`,
/// `PARKED_TABLE` (required here: where records that can never be projected are parked),
/// `CHANGE_LOG_TABLE` (optional, deprecated), and the client's variables ([`cqrs_store::client`]).
///
/// # Errors
///
/// A missing or malformed variable: the function fails its cold start and says why.
pub async fn run(
    targets: impl FnOnce(&cqrs_store::Store, DataSync) -> DataSync,
) -> Result<(), lambda_runtime::Error> {
    use cqrs_store::Tables;
    use cqrs_store::client::{InitClock, client_from_env};
    use lambda_runtime::{LambdaEvent, service_fn};

    let mut init = InitClock::start();
    cqrs_store::logging::init();
    init.lap("logging");
    let tables = Tables::from_env()?.require_parked()?;
    init.lap("config");
    let store = cqrs_store::Store::new(client_from_env(&mut init)?, tables);
    let mut sync = DataSync::new(store.clone());
    if let Some(change_log) = change_log::ChangeLog::from_env(&store) {
        // Deprecated: the change log is the framework consumer `change-log` now
        // (cqrs_consumer::change_log, template parameter ChangeLog=on). It keeps running here,
        // writing the same entries, until the next major version.
        tracing::warn!(
            table = change_log.table(),
            "change log enabled by CHANGE_LOG_TABLE on data-sync, which is deprecated: deploy \
             with ChangeLog=on (the consumer change-log writes the same entries) and remove \
             CHANGE_LOG_TABLE from data-sync"
        );
        sync.targets.push(Arc::new(change_log));
    }
    let sync = targets(&store, sync);
    init.log();
    let sync = &sync;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Event>| async move {
        handle_event(sync, event).await
    }))
    .await
}

/// The Lambda entry point: one invocation, one batch. The runtime's span carries the request id
/// (`requestId`) into every log line of the invocation.
///
/// ```no_run
/// # async fn wire(sync: cqrs_data_sync::DataSync) -> Result<(), lambda_runtime::Error> {
/// use aws_lambda_events::event::dynamodb::Event;
/// use lambda_runtime::{LambdaEvent, service_fn};
/// let sync = &sync;
/// lambda_runtime::run(service_fn(move |event: LambdaEvent<Event>| async move {
///     cqrs_data_sync::handle_event(sync, event).await
/// }))
/// .await
/// # }
/// ```
pub async fn handle_event(
    sync: &DataSync,
    event: LambdaEvent<Event>,
) -> Result<DynamoDbEventResponse, lambda_runtime::Error> {
    Ok(sync.invoke(event.payload).await?)
}

/// A batch whose first record failed, answered as a failed invocation so that Lambda's mapping
/// splits the batch ([`DataSync::invoke`]).
///
/// ```
/// let error = cqrs_data_sync::NoProgress { records: 8, failed: 2 };
/// assert!(error.to_string().starts_with("the first of the batch's 8 records failed"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the first of the batch's {records} records failed ({failed} reported): failing the invocation so that the mapping splits the batch"
)]
pub struct NoProgress {
    /// Records in the batch.
    pub records: usize,
    /// Records the projection reported as failed.
    pub failed: usize,
}
