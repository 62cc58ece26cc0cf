//! event-publisher: the data table's DynamoDB stream published as change events to the
//! service's SNS FIFO topic, one message per item version, in order per item (issue 39, design39
//! section 2).
//!
//! [`Publisher::handle`] takes one batch of the data table's stream (`NEW_AND_OLD_IMAGES`):
//!
//! 1. **Events**: [`cqrs_events::events_from_batch`] turns the records into CloudEvents, one per
//!    version, the versions data-sync collapsed read from the history table ([`HistoryReader`],
//!    consistent reads); each event is an [`Entry`]: group [`cqrs_keys::member_token`], dedup id
//!    the event id, the CloudEvent JSON as body (a reference event when over
//!    [`MAX_EVENT_BYTES`]).
//! 2. **Waves**: wave *i* holds the *i*-th unpublished event of every item that has one; a wave
//!    goes out in [`Publish::publish_batch`] calls of at most [`MAX_CALL_ENTRIES`] entries (so of
//!    distinct message groups: one per item) and [`MAX_CALL_BYTES`]; an item's next event goes
//!    in the next wave, only after its previous one was accepted; a failed entry (or a failed
//!    call, for its entries) stops its item. So a partly failed call never lets version `v+1`
//!    out before `v`.
//! 3. **Permanent failures are parked** ([`FeedError::permanent`]: a malformed record, a
//!    `MODIFY` without its old image, a version missing from history under a `MODIFY`): the
//!    record goes to the parked table ([`cqrs_store::parked`], reason kind [`PARK_KIND`], the
//!    reason the feed's error) and is acknowledged. A missing version is skipped and the
//!    versions that exist are published ([`cqrs_events::Gaps::Skip`]); a record that makes no
//!    event at all is left out and the batch's events made again without it, so the item's
//!    later records still publish (a consumer fills the hole from the history table). An entry
//!    the topic refuses for good ([`PublishError::permanent`]: the sender's fault and a code
//!    saying the entry itself is invalid) is parked the same way (the event's version and SNS's
//!    code and message in the parked record) and the item's later versions still go;
//!    throttling, configuration errors and SNS's own faults are retried.
//! 4. **The answer** (`ReportBatchItemFailures`): for each item that failed (a transient history
//!    read, a failed entry or call, a park that failed) the sequence number of the record that
//!    carried its first unpublished event, in stream order. Lambda resumes from the lowest and
//!    delivers every later record again; what was already published is published again with the
//!    same dedup ids and bodies (SNS drops it within 5 minutes, the consumers' markers after).
//!    [`Publisher::invoke`] fails the invocation ([`NoProgress`]) when the lowest is the batch's
//!    first record and the batch holds more, as data-sync does, so the mapping bisects.
//! 5. **Metrics**: one EMF line per batch ([`metrics`]).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use cqrs_event_publisher::{MemoryParking, Publisher, Recorder};
//! let feed = cqrs_events::Feed::new(cqrs_model::Model::example(), "urn:cqrs:shop");
//! let mut item = cqrs_item::Item::example().into_data_item();
//! item.entity = Some("product".into());
//! let image = serde_json::to_string(&serde_dynamo::Item::from(item.to_attributes().unwrap())).unwrap();
//! let event: aws_lambda_events::event::dynamodb::Event = serde_json::from_str(&format!(
//!     r#"{{"Records":[{{"eventID":"1","eventName":"INSERT","awsRegion":"r",
//!        "dynamodb":{{"Keys":{{"pk":{{"S":"PRODUCT#t1"}},"sk":{{"S":"P001"}}}},
//!                    "NewImage":{image},"SequenceNumber":"100","SizeBytes":1}}}}]}}"#
//! )).unwrap();
//! let topic = Recorder::new();
//! let publisher = Publisher::new(feed, Vec::<cqrs_item::Item>::new(), topic.clone(), MemoryParking::new());
//! let response = publisher.invoke(event).await.unwrap();
//! assert!(response.batch_item_failures.is_empty());
//! assert_eq!(topic.dedup_ids(), [cqrs_events::event_id("PRODUCT#t1", "P001", 1)]);
//! # }
//! ```
#![forbid(unsafe_code)]
#![cfg_attr(
    not(test),
    warn(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

pub mod metrics;
pub mod park;
pub mod publish;
pub mod recorder;

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use aws_lambda_events::event::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use cqrs_events::{Feed, FeedError, Gaps, HistoryReader, events_from_batch_with};
use futures::StreamExt;
use lambda_runtime::LambdaEvent;

pub use metrics::BatchCounts;
pub use park::{MemoryParking, PARK_KIND, ParkWriter};
pub use publish::{
    Attributes, CallResult, Entry, MAX_CALL_BYTES, MAX_CALL_ENTRIES, MAX_EVENT_BYTES,
    PERMANENT_SENDER_CODES, Publish, PublishError, SnsTopic,
};
pub use recorder::Recorder;

/// How many `PublishBatch` calls of a wave are in flight at the same time by default.
///
/// ```
/// assert_eq!(cqrs_event_publisher::DEFAULT_CONCURRENCY, 32);
/// ```
pub const DEFAULT_CONCURRENCY: usize = 32;

/// The environment variable holding the topic's ARN.
///
/// ```
/// assert_eq!(cqrs_event_publisher::TOPIC_ENV, "EVENTS_TOPIC_ARN");
/// ```
pub const TOPIC_ENV: &str = "EVENTS_TOPIC_ARN";

/// The publisher: the feed, where it reads skipped versions, where it publishes, where it parks.
///
/// ```
/// use cqrs_event_publisher::{MemoryParking, Publisher, Recorder};
/// let feed = cqrs_events::Feed::new(cqrs_model::Model::example(), "urn:cqrs:shop");
/// let publisher = Publisher::new(feed, Vec::<cqrs_item::Item>::new(), Recorder::new(), MemoryParking::new())
///     .with_concurrency(4);
/// assert_eq!(publisher.feed().source(), "urn:cqrs:shop");
/// ```
pub struct Publisher {
    feed: Feed,
    history: Arc<dyn HistoryReader>,
    topic: Arc<dyn Publish>,
    parking: Arc<dyn ParkWriter>,
    concurrency: usize,
}

impl std::fmt::Debug for Publisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Publisher")
            .field("source", &self.feed.source())
            .field("concurrency", &self.concurrency)
            .finish_non_exhaustive()
    }
}

/// A batch whose first record failed, answered as a failed invocation so that Lambda's mapping
/// splits the batch ([`Publisher::invoke`]).
///
/// ```
/// let error = cqrs_event_publisher::NoProgress { records: 8, failed: 2 };
/// assert!(error.to_string().starts_with("the first of the batch's 8 records failed"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the first of the batch's {records} records failed ({failed} reported): failing the invocation so that the mapping splits the batch"
)]
pub struct NoProgress {
    /// Records in the batch.
    pub records: usize,
    /// Records reported as failed.
    pub failed: usize,
}

/// One event waiting to go: its entry, its version, the position of the record that carried it.
struct Pending {
    entry: Entry,
    version: i64,
    position: usize,
}

/// One entry of a call: the item's queue and the event.
type Call = Vec<(usize, Pending)>;

/// One item's events waiting to go, in version order.
struct Queue {
    entries: VecDeque<Pending>,
    /// The position of the record that carried the item's first unpublished event, once the
    /// item stopped.
    stopped: Option<usize>,
}

impl Publisher {
    /// A publisher of `feed`'s events that reads skipped versions from `history`, publishes to
    /// `topic` and parks to `parking`, [`DEFAULT_CONCURRENCY`] calls at a time.
    ///
    /// ```
    /// use cqrs_event_publisher::{MemoryParking, Publisher, Recorder};
    /// let feed = cqrs_events::Feed::new(cqrs_model::Model::example(), "urn:cqrs:shop");
    /// let publisher = Publisher::new(feed, Vec::<cqrs_item::Item>::new(), Recorder::new(), MemoryParking::new());
    /// # let _ = publisher;
    /// ```
    pub fn new(
        feed: Feed,
        history: impl HistoryReader + 'static,
        topic: impl Publish + 'static,
        parking: impl ParkWriter + 'static,
    ) -> Self {
        Publisher {
            feed,
            history: Arc::new(history),
            topic: Arc::new(topic),
            parking: Arc::new(parking),
            concurrency: DEFAULT_CONCURRENCY,
        }
    }

    /// Sets how many calls of a wave are in flight at the same time (at least 1).
    ///
    /// ```
    /// use cqrs_event_publisher::{MemoryParking, Publisher, Recorder};
    /// let feed = cqrs_events::Feed::new(cqrs_model::Model::example(), "urn:cqrs:shop");
    /// let publisher = Publisher::new(feed, Vec::<cqrs_item::Item>::new(), Recorder::new(), MemoryParking::new())
    ///     .with_concurrency(0);
    /// assert!(format!("{publisher:?}").contains("concurrency: 1"));
    /// ```
    pub fn with_concurrency(mut self, concurrency: usize) -> Self {
        self.concurrency = concurrency.max(1);
        self
    }

    /// The feed.
    ///
    /// ```
    /// use cqrs_event_publisher::{MemoryParking, Publisher, Recorder};
    /// let feed = cqrs_events::Feed::new(cqrs_model::Model::example(), "urn:cqrs:x");
    /// let publisher = Publisher::new(feed, Vec::<cqrs_item::Item>::new(), Recorder::new(), MemoryParking::new());
    /// assert_eq!(publisher.feed().source(), "urn:cqrs:x");
    /// ```
    pub fn feed(&self) -> &Feed {
        &self.feed
    }

    /// Publishes one batch and answers the records to deliver again (see the
    /// [crate docs](crate)).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use cqrs_event_publisher::{MemoryParking, Publisher, Recorder};
    /// let feed = cqrs_events::Feed::new(cqrs_model::Model::example(), "urn:cqrs:x");
    /// let publisher = Publisher::new(feed, Vec::<cqrs_item::Item>::new(), Recorder::new(), MemoryParking::new());
    /// let response = publisher.handle(Default::default()).await;
    /// assert!(response.batch_item_failures.is_empty());
    /// # }
    /// ```
    pub async fn handle(&self, event: Event) -> DynamoDbEventResponse {
        self.handle_counted(event).await.0
    }

    /// What the Lambda invocation answers for one batch: [`Publisher::handle`]'s answer, except
    /// when it reports the batch's **first** record while the batch holds more: then the
    /// invocation fails ([`NoProgress`]) so that the mapping bisects the batch (a reported first
    /// record would split nothing).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use cqrs_event_publisher::{MemoryParking, Publisher, Recorder};
    /// let feed = cqrs_events::Feed::new(cqrs_model::Model::example(), "urn:cqrs:x");
    /// let publisher = Publisher::new(feed, Vec::<cqrs_item::Item>::new(), Recorder::new(), MemoryParking::new());
    /// assert!(publisher.invoke(Default::default()).await.is_ok());
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`NoProgress`] as said.
    pub async fn invoke(&self, event: Event) -> Result<DynamoDbEventResponse, NoProgress> {
        let records = event.records.len();
        let first = event
            .records
            .first()
            .map(|r| r.change.sequence_number.clone().unwrap_or_default());
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

    /// [`Publisher::handle`], also answering what became of the batch. Logs the batch summary
    /// and writes the [`metrics`] line.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use cqrs_event_publisher::{MemoryParking, Publisher, Recorder};
    /// let feed = cqrs_events::Feed::new(cqrs_model::Model::example(), "urn:cqrs:x");
    /// let publisher = Publisher::new(feed, Vec::<cqrs_item::Item>::new(), Recorder::new(), MemoryParking::new());
    /// let (response, counts) = publisher.handle_counted(Default::default()).await;
    /// assert_eq!(counts.retried, response.batch_item_failures.len());
    /// # }
    /// ```
    #[tracing::instrument(skip_all, fields(records = event.records.len()))]
    pub async fn handle_counted(&self, event: Event) -> (DynamoDbEventResponse, BatchCounts) {
        let started = std::time::Instant::now();
        let records = event.records;
        let mut counts = BatchCounts {
            records: records.len(),
            lag_max_ms: metrics::lag_max(
                records
                    .iter()
                    .map(|r| r.change.approximate_creation_date_time),
                chrono::Utc::now(),
            ),
            ..BatchCounts::default()
        };
        // The record positions to report, by item (`None`: a record without keys).
        let mut failed: HashMap<Option<String>, usize> = HashMap::new();
        let mut fail = |group: Option<String>, position: usize| {
            failed
                .entry(group)
                .and_modify(|p| *p = (*p).min(position))
                .or_insert(position);
        };

        // 1. The events. A version missing from history under a MODIFY: the record is parked,
        // the gap skipped, the versions that exist still go (design39 2.4). Any other permanent
        // failure: the record is parked and the batch read again without it, so that the item's
        // later records still publish.
        let mut parked: BTreeSet<usize> = BTreeSet::new();
        let mut left_out: BTreeSet<usize> = BTreeSet::new();
        let mut park_failed: BTreeSet<usize> = BTreeSet::new();
        let (batch, positions) = loop {
            let (batch, positions) = if left_out.is_empty() {
                let batch =
                    events_from_batch_with(&self.feed, &records, self.history.as_ref(), Gaps::Skip)
                        .await;
                (batch, (0..records.len()).collect::<Vec<usize>>())
            } else {
                let (kept, positions): (Vec<EventRecord>, Vec<usize>) = records
                    .iter()
                    .enumerate()
                    .filter(|(at, _)| !left_out.contains(at))
                    .map(|(at, r)| (r.clone(), at))
                    .unzip();
                let batch =
                    events_from_batch_with(&self.feed, &kept, self.history.as_ref(), Gaps::Skip)
                        .await;
                (batch, positions)
            };
            let mut again = false;
            for failure in &batch.failures {
                let Some(&position) = positions.get(failure.position) else {
                    continue;
                };
                if !failure.error.permanent()
                    || park_failed.contains(&position)
                    || parked.contains(&position)
                {
                    continue;
                }
                let Some(record) = records.get(position) else {
                    continue;
                };
                if self.park(record, &failure.error).await {
                    parked.insert(position);
                    if !matches!(failure.error, FeedError::MissingVersion { .. }) {
                        left_out.insert(position);
                        again = true;
                    }
                } else {
                    park_failed.insert(position);
                }
            }
            if !again {
                break (batch, positions);
            }
        };
        counts.parked = parked.len();
        counts.filled = batch.filled;
        for failure in &batch.failures {
            let Some(&position) = positions.get(failure.position) else {
                continue;
            };
            if parked.contains(&position) {
                continue;
            }
            let group = records.get(position).and_then(group_of);
            tracing::warn!(
                position,
                event_id = %failure.event_id,
                error = %failure.error,
                "record not published: reported for redelivery"
            );
            fail(group, position);
        }

        // 2. Entries, per item in version order.
        let mut queues: Vec<Queue> = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        for (event, origin) in batch.events_with_origins() {
            let position = positions.get(origin).copied().unwrap_or(origin);
            let entry = match Entry::of(event) {
                Ok(entry) => entry,
                Err(error) => {
                    tracing::error!(id = %event.id, %error, "the event does not serialise");
                    fail(
                        Some(cqrs_keys::member_token(&event.data.pk, &event.data.sk)),
                        position,
                    );
                    continue;
                }
            };
            let at = *index.entry(entry.group_id.clone()).or_insert_with(|| {
                queues.push(Queue {
                    entries: VecDeque::new(),
                    stopped: None,
                });
                queues.len() - 1
            });
            if let Some(queue) = queues.get_mut(at) {
                queue.entries.push_back(Pending {
                    entry,
                    version: event.data.version,
                    position,
                });
            }
        }

        // 3. Waves.
        let mut waves = 0;
        loop {
            let mut calls: Vec<Call> = Vec::new();
            let mut bytes = 0;
            for (at, queue) in queues.iter_mut().enumerate() {
                if queue.stopped.is_some() {
                    continue;
                }
                let Some(pending) = queue.entries.pop_front() else {
                    continue;
                };
                let size = pending.entry.size();
                let full = calls.last().is_none_or(|call| {
                    call.len() >= MAX_CALL_ENTRIES || bytes + size > MAX_CALL_BYTES
                });
                if full {
                    calls.push(Vec::new());
                    bytes = 0;
                }
                bytes += size;
                if let Some(call) = calls.last_mut() {
                    call.push((at, pending));
                }
            }
            if calls.is_empty() {
                break;
            }
            waves += 1;
            let topic = &self.topic;
            let answers: Vec<(Call, CallResult)> = futures::stream::iter(calls)
                .map(|call| async move {
                    let entries: Vec<Entry> = call.iter().map(|(_, p)| p.entry.clone()).collect();
                    let answer = topic.publish_batch(&entries).await;
                    (call, answer)
                })
                .buffer_unordered(self.concurrency)
                .collect()
                .await;
            for (call, answer) in answers {
                let results: Vec<Result<(), PublishError>> = match answer {
                    Ok(results) => results,
                    Err(error) => {
                        tracing::warn!(entries = call.len(), %error, "PublishBatch failed");
                        call.iter().map(|_| Err(error.clone())).collect()
                    }
                };
                let mut results = results.into_iter();
                for (at, pending) in call {
                    let Pending {
                        entry,
                        version,
                        position,
                    } = pending;
                    match results.next().unwrap_or_else(|| {
                        Err(PublishError::new("NoResult", "no result for the entry"))
                    }) {
                        Ok(()) => {
                            counts.events += 1;
                            counts.references += usize::from(entry.reference);
                        }
                        // No retry can publish it: parked with SNS's reason and acknowledged;
                        // the item's later versions still go (the consumer sees the gap in
                        // `previousVersion` and reads the version from history).
                        Err(error)
                            if error.permanent()
                                && self
                                    .park_refused(records.get(position), &entry, version, &error)
                                    .await =>
                        {
                            counts.parked += 1;
                        }
                        Err(error) => {
                            tracing::warn!(
                                position,
                                id = %entry.dedup_id,
                                group = %entry.group_id,
                                %error,
                                "entry not published: its item stops"
                            );
                            if let Some(queue) = queues.get_mut(at) {
                                queue.stopped = Some(position);
                            }
                            fail(Some(entry.group_id), position);
                        }
                    }
                }
            }
        }

        // 4. The answer: the first unpublished record of each failed item, in stream order.
        let reported: BTreeSet<usize> = failed.into_values().collect();
        counts.retried = reported.len();
        counts.duration = started.elapsed();
        let held_back: usize = queues
            .iter()
            .filter(|q| q.stopped.is_some())
            .map(|q| q.entries.len())
            .sum();
        match reported.first() {
            None => tracing::info!(
                records = counts.records,
                events = counts.events,
                filled = counts.filled,
                parked = counts.parked,
                waves,
                "batch published"
            ),
            Some(first) => tracing::warn!(
                records = counts.records,
                events = counts.events,
                filled = counts.filled,
                parked = counts.parked,
                failed = reported.len(),
                held_back,
                waves,
                resume_from = first,
                "batch partly published; failed records reported for redelivery"
            ),
        }
        metrics::emit(&counts);
        let mut response = DynamoDbEventResponse::default();
        response.batch_item_failures = reported
            .into_iter()
            .map(|position| {
                let mut failure = DynamoDbBatchItemFailure::default();
                failure.item_identifier = Some(
                    records
                        .get(position)
                        .and_then(|r| r.change.sequence_number.clone())
                        .unwrap_or_default(),
                );
                failure
            })
            .collect();
        (response, counts)
    }

    /// Parks `record` for the topic's refusal (`error`, [`PublishError::permanent`]) of `entry`,
    /// the event of `version` it carried; `true` when it is in the parked table (now or before).
    async fn park_refused(
        &self,
        record: Option<&EventRecord>,
        entry: &Entry,
        version: i64,
        error: &PublishError,
    ) -> bool {
        let Some(record) = record else {
            return false;
        };
        let parked = park::refused(record, &entry.dedup_id, version, error, chrono::Utc::now());
        match self.parking.park(&parked).await {
            Ok(write) => {
                tracing::error!(
                    sequence_number = %parked.sequence_number,
                    id = %entry.dedup_id,
                    version,
                    %error,
                    ?write,
                    "the topic refused the event for good: parked and acknowledged"
                );
                true
            }
            Err(park_error) => {
                tracing::error!(
                    sequence_number = %parked.sequence_number,
                    id = %entry.dedup_id,
                    version,
                    %error,
                    %park_error,
                    "the topic refused the event for good and parking it failed: reported for redelivery"
                );
                false
            }
        }
    }

    /// Parks `record` for `error`; `true` when it is in the parked table (now or before).
    async fn park(&self, record: &EventRecord, error: &FeedError) -> bool {
        let entry = park::parked(record, error, chrono::Utc::now());
        match self.parking.park(&entry).await {
            Ok(write) => {
                tracing::error!(
                    sequence_number = %entry.sequence_number,
                    event_id = %entry.event_id,
                    %error,
                    ?write,
                    "record can never make its events: parked and acknowledged"
                );
                true
            }
            Err(park_error) => {
                tracing::error!(
                    sequence_number = %entry.sequence_number,
                    event_id = %entry.event_id,
                    %error,
                    %park_error,
                    "record can never make its events and parking it failed: reported for redelivery"
                );
                false
            }
        }
    }
}

/// The message group of the item of `record`, from its `Keys`.
fn group_of(record: &EventRecord) -> Option<String> {
    let key = |name: &str| match record.change.keys.get(name) {
        Some(serde_dynamo::AttributeValue::S(s)) => Some(s.as_str()),
        _ => None,
    };
    Some(cqrs_keys::member_token(key("pk")?, key("sk")?))
}

/// The publisher's configuration from the environment.
///
/// ```
/// let vars = std::collections::HashMap::from([
///     ("HISTORY_TABLE", "shop-history"),
///     ("PARKED_TABLE", "shop-parked"),
///     ("EVENTS_TOPIC_ARN", "arn:aws:sns:eu-west-1:1:shop-events.fifo"),
/// ]);
/// let config = cqrs_event_publisher::Config::from_lookup(|name| vars.get(name).map(|v| v.to_string())).unwrap();
/// assert_eq!(config.topic_arn, "arn:aws:sns:eu-west-1:1:shop-events.fifo");
/// let missing = cqrs_event_publisher::Config::from_lookup(|_| None).unwrap_err();
/// assert_eq!(missing.to_string(), "environment variable HISTORY_TABLE is missing or empty");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `HISTORY_TABLE`: where skipped versions are read.
    pub history_table: String,
    /// `PARKED_TABLE`: where records that can never make their events are parked.
    pub parked_table: String,
    /// [`TOPIC_ENV`]: the SNS FIFO topic.
    pub topic_arn: String,
}

impl Config {
    /// Reads `HISTORY_TABLE`, `PARKED_TABLE` and [`TOPIC_ENV`] through `lookup`; a missing or
    /// empty one is an error naming it.
    ///
    /// ```
    /// let err = cqrs_event_publisher::Config::from_lookup(|name| {
    ///     (name != "EVENTS_TOPIC_ARN").then(|| "x".to_string())
    /// })
    /// .unwrap_err();
    /// assert!(err.to_string().contains("EVENTS_TOPIC_ARN"));
    /// ```
    ///
    /// # Errors
    ///
    /// [`cqrs_store::ConfigError::MissingVariable`] naming the first missing variable.
    pub fn from_lookup(
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, cqrs_store::ConfigError> {
        let get = |name: &'static str| {
            lookup(name)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
                .ok_or(cqrs_store::ConfigError::MissingVariable(name))
        };
        Ok(Config {
            history_table: get("HISTORY_TABLE")?,
            parked_table: get("PARKED_TABLE")?,
            topic_arn: get(TOPIC_ENV)?,
        })
    }

    /// The store's tables: history and parked (the publisher uses no other).
    ///
    /// ```
    /// let config = cqrs_event_publisher::Config {
    ///     history_table: "h".into(),
    ///     parked_table: "p".into(),
    ///     topic_arn: "arn".into(),
    /// };
    /// let tables = config.tables();
    /// assert_eq!((tables.history.as_str(), tables.parked.as_deref()), ("h", Some("p")));
    /// ```
    pub fn tables(&self) -> cqrs_store::Tables {
        const UNUSED: &str = "unused-by-the-event-publisher";
        cqrs_store::Tables::new(UNUSED, UNUSED, &self.history_table, UNUSED)
            .with_parked(&self.parked_table)
    }
}

/// Runs the publisher as a Lambda function on the data table's stream: parses the service's
/// model (`model_text`, the service's `model.toml`), reads the configuration ([`Config`],
/// `CQRS_EVENT_SOURCE` for the events' `source`, [`Feed::from_env`]) and builds the DynamoDB
/// and SNS clients once per cold start, then hands every batch to [`handle_event`]. A service's
/// `event-publisher` binary is this call:
///
/// ```no_run
/// # const MODEL: &str = cqrs_model::EXAMPLE_TOML;
/// #[tokio::main]
/// async fn main() -> Result<(), lambda_runtime::Error> {
///     cqrs_event_publisher::run(MODEL).await // MODEL = include_str!("../../model.toml")
/// }
/// ```
///
/// # Errors
///
/// A model that does not parse, a missing or malformed variable: the cold start fails and says
/// which.
pub async fn run(model_text: &str) -> Result<(), lambda_runtime::Error> {
    use cqrs_store::client::{ClientEnv, InitClock, http_client, service_endpoint};
    use lambda_runtime::service_fn;

    let mut init = InitClock::start();
    cqrs_store::logging::init();
    init.lap("logging");
    let model = cqrs_model::Model::parse(model_text)?;
    let config = Config::from_lookup(|name| std::env::var(name).ok())?;
    let feed = Feed::from_env(model);
    init.lap("config");
    let env = ClientEnv::from_env()?;
    let http = http_client(env.tls_roots)?;
    let store = cqrs_store::Store::new(env.client(http.clone()), config.tables());
    let sns = SnsTopic::client(
        &env,
        http,
        service_endpoint("SNS", |name| std::env::var(name).ok()),
    );
    init.lap("clients");
    tracing::info!(source = feed.source(), topic = %config.topic_arn, "event publisher");
    let publisher = Publisher::new(
        feed,
        store.clone(),
        SnsTopic::new(sns, config.topic_arn),
        store,
    );
    init.log();
    let publisher = &publisher;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Event>| async move {
        handle_event(publisher, event).await
    }))
    .await
}

/// The Lambda entry point: one invocation, one batch ([`Publisher::invoke`]).
///
/// ```no_run
/// # async fn wire(publisher: cqrs_event_publisher::Publisher) -> Result<(), lambda_runtime::Error> {
/// use aws_lambda_events::event::dynamodb::Event;
/// use lambda_runtime::{LambdaEvent, service_fn};
/// let publisher = &publisher;
/// lambda_runtime::run(service_fn(move |event: LambdaEvent<Event>| async move {
///     cqrs_event_publisher::handle_event(publisher, event).await
/// }))
/// .await
/// # }
/// ```
///
/// # Errors
///
/// [`NoProgress`]: the mapping bisects the batch.
pub async fn handle_event(
    publisher: &Publisher,
    event: LambdaEvent<Event>,
) -> Result<DynamoDbEventResponse, lambda_runtime::Error> {
    Ok(publisher.invoke(event.payload).await?)
}
