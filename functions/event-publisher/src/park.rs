//! Parking a data-table stream record that can never make its events ([`FeedError::permanent`],
//! [`parked`]) or one of whose events the topic refused for good ([`PublishError::permanent`],
//! [`refused`]): the record goes to the parked table ([`cqrs_store::parked`]) with reason kind
//! [`PARK_KIND`] and the error as its reason, and is acknowledged. Its sort key is the
//! publisher's own ([`cqrs_keys::parked::parked_event_sk`]), never one of data-sync's.
//!
//! The parked table is data-sync's: an operator lists both with one query per tenant; the reason
//! kind tells the publisher's records (data table stream) from data-sync's (command table
//! stream). [`ParkWriter`] is implemented by [`cqrs_store::Store`] and by [`MemoryParking`], the
//! in-memory double of tests and the local stack.

use std::sync::{Arc, Mutex};

use aws_lambda_events::event::dynamodb::EventRecord;
use chrono::{DateTime, SecondsFormat, Utc};
use cqrs_events::FeedError;
use cqrs_store::parked::{ParkWrite, ParkedRecord};
use cqrs_store::{Store, StoreError};
use futures::future::{BoxFuture, FutureExt};

use crate::publish::PublishError;

/// The reason kind of the records the publisher parks.
///
/// ```
/// assert_eq!(cqrs_event_publisher::PARK_KIND, "event-feed");
/// ```
pub const PARK_KIND: &str = cqrs_keys::parked::EVENT_FEED_KIND;

/// Where records are parked.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use cqrs_event_publisher::{MemoryParking, ParkWriter};
/// let parking = MemoryParking::new();
/// let record = cqrs_store::parked::ParkedRecord::example();
/// assert_eq!(parking.park(&record).await.unwrap(), cqrs_store::parked::ParkWrite::Parked);
/// assert_eq!(parking.park(&record).await.unwrap(), cqrs_store::parked::ParkWrite::AlreadyParked);
/// # }
/// ```
pub trait ParkWriter: Send + Sync {
    /// Parks `record` (write-once: the same record again answers [`ParkWrite::AlreadyParked`]).
    fn park<'a>(&'a self, record: &'a ParkedRecord)
    -> BoxFuture<'a, Result<ParkWrite, StoreError>>;
}

/// The parked table of the store (`PARKED_TABLE`).
impl ParkWriter for Store {
    fn park<'a>(
        &'a self,
        record: &'a ParkedRecord,
    ) -> BoxFuture<'a, Result<ParkWrite, StoreError>> {
        Store::park(self, record).boxed()
    }
}

/// An in-memory parked table: keeps the records parked, in order, once per key; can be told to
/// fail the next writes. Cloning shares the records.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use cqrs_event_publisher::{MemoryParking, ParkWriter};
/// let parking = MemoryParking::new();
/// parking.fail_next(1);
/// let record = cqrs_store::parked::ParkedRecord::example();
/// assert!(parking.park(&record).await.is_err());
/// assert!(parking.park(&record).await.is_ok());
/// assert_eq!(parking.records().len(), 1);
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct MemoryParking {
    state: Arc<Mutex<(Vec<ParkedRecord>, usize)>>,
}

impl MemoryParking {
    /// An empty parked table.
    ///
    /// ```
    /// assert!(cqrs_event_publisher::MemoryParking::new().records().is_empty());
    /// ```
    pub fn new() -> Self {
        MemoryParking::default()
    }

    /// The records parked, in order.
    ///
    /// ```
    /// assert!(cqrs_event_publisher::MemoryParking::new().records().is_empty());
    /// ```
    pub fn records(&self) -> Vec<ParkedRecord> {
        self.lock().0.clone()
    }

    /// Fails the next `times` writes (as an unreachable table does).
    ///
    /// ```
    /// cqrs_event_publisher::MemoryParking::new().fail_next(2);
    /// ```
    pub fn fail_next(&self, times: usize) {
        self.lock().1 += times;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (Vec<ParkedRecord>, usize)> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl ParkWriter for MemoryParking {
    fn park<'a>(
        &'a self,
        record: &'a ParkedRecord,
    ) -> BoxFuture<'a, Result<ParkWrite, StoreError>> {
        let mut state = self.lock();
        let answer = if state.1 > 0 {
            state.1 -= 1;
            Err(StoreError::Dynamo(
                "the in-memory parked table was told to fail".into(),
            ))
        } else if state
            .0
            .iter()
            .any(|r| r.pk() == record.pk() && r.sk() == record.sk())
        {
            Ok(ParkWrite::AlreadyParked)
        } else {
            state.0.push(record.clone());
            Ok(ParkWrite::Parked)
        };
        drop(state);
        async move { answer }.boxed()
    }
}

/// The parked entry of the data-table stream `record` that failed with `error`, at `now`: the
/// item's keys (data table: `sk` without version), its tenant, the version its image names, the
/// record's sequence number, reason kind [`PARK_KIND`], the error as reason, the record's JSON.
///
/// ```
/// let event: aws_lambda_events::event::dynamodb::Event = serde_json::from_str(
///     r#"{"Records":[{"eventID":"e1","eventName":"MODIFY","awsRegion":"r",
///        "dynamodb":{"Keys":{"pk":{"S":"PRODUCT#t1"},"sk":{"S":"P001"}},
///                    "NewImage":{"version":{"N":"4"}},"SequenceNumber":"100","SizeBytes":1}}]}"#,
/// )
/// .unwrap();
/// let error = cqrs_events::FeedError::Malformed("MODIFY without its OldImage".into());
/// let parked = cqrs_event_publisher::park::parked(&event.records[0], &error, chrono::Utc::now());
/// assert_eq!(parked.reason_kind, "event-feed");
/// assert_eq!(parked.reason, "malformed record: MODIFY without its OldImage");
/// assert_eq!((parked.tenant.as_deref(), parked.version), (Some("t1"), Some(4)));
/// assert_eq!(parked.item_sk.as_deref(), Some("P001"));
/// ```
pub fn parked(record: &EventRecord, error: &FeedError, now: DateTime<Utc>) -> ParkedRecord {
    entry(record, None, error.to_string(), now)
}

/// The parked entry of the data-table stream `record` whose event `event_id` of `version` the
/// topic refused for good with `error` ([`PublishError::permanent`]), at `now`: as [`parked`],
/// with the event's version (so two refused events of one record are two entries) and
/// `SNS refused event <id> (version <v>): <code>: <message>` as reason.
///
/// ```
/// let event: aws_lambda_events::event::dynamodb::Event = serde_json::from_str(
///     r#"{"Records":[{"eventID":"e1","eventName":"MODIFY","awsRegion":"r",
///        "dynamodb":{"Keys":{"pk":{"S":"PRODUCT#t1"},"sk":{"S":"P001"}},
///                    "NewImage":{"version":{"N":"4"}},"SequenceNumber":"100","SizeBytes":1}}]}"#,
/// )
/// .unwrap();
/// let error = cqrs_event_publisher::PublishError::sender("ParameterValueInvalid", "bad message");
/// let parked = cqrs_event_publisher::park::refused(&event.records[0], "id3", 3, &error, chrono::Utc::now());
/// assert_eq!(parked.reason, "SNS refused event id3 (version 3): ParameterValueInvalid: bad message");
/// assert_eq!((parked.reason_kind.as_str(), parked.version), ("event-feed", Some(3)));
/// assert_eq!(parked.sk(), "PRODUCT#t1#P001@event-feed@100@3");
/// ```
pub fn refused(
    record: &EventRecord,
    event_id: &str,
    version: i64,
    error: &PublishError,
    now: DateTime<Utc>,
) -> ParkedRecord {
    let reason = format!("{REFUSED_PREFIX}{event_id} (version {version}): {error}");
    entry(record, Some(version), reason, now)
}

/// How the reason of a [`refused`] entry starts.
const REFUSED_PREFIX: &str = "SNS refused event ";

/// The id of the event the topic refused, when `reason` is a [`refused`] entry's (`cqrs redrive
/// events` republishes that event alone); `None` for any other reason.
///
/// ```
/// use cqrs_event_publisher::park::refused_event_id;
/// assert_eq!(refused_event_id("SNS refused event id3 (version 3): ParameterValueInvalid: bad"), Some("id3"));
/// assert_eq!(refused_event_id("version 2 of P#t1 / a is not in the history table"), None);
/// ```
pub fn refused_event_id(reason: &str) -> Option<&str> {
    reason
        .strip_prefix(REFUSED_PREFIX)?
        .split_whitespace()
        .next()
}

/// The parked entry of `record` with `reason`; its version `version`, else the one its image
/// names.
fn entry(
    record: &EventRecord,
    version: Option<i64>,
    reason: String,
    now: DateTime<Utc>,
) -> ParkedRecord {
    let key = |name: &str| match record.change.keys.get(name) {
        Some(serde_dynamo::AttributeValue::S(s)) => Some(s.clone()),
        _ => None,
    };
    let (pk, sk) = (key("pk"), key("sk"));
    let version = version.or_else(|| {
        [&record.change.new_image, &record.change.old_image]
            .into_iter()
            .find_map(|image| match image.get("version") {
                Some(serde_dynamo::AttributeValue::N(n)) => n.parse::<i64>().ok(),
                _ => None,
            })
    });
    ParkedRecord {
        tenant: pk
            .as_deref()
            .and_then(cqrs_keys::tenant_code)
            .map(str::to_string),
        item_id: pk
            .as_deref()
            .zip(sk.as_deref())
            .map(|(pk, sk)| cqrs_keys::generate_id(pk, sk)),
        item_pk: pk,
        item_sk: sk,
        version,
        sequence_number: record.change.sequence_number.clone().unwrap_or_default(),
        event_id: record.event_id.clone(),
        event_name: record.event_name.clone(),
        reason_kind: PARK_KIND.to_string(),
        reason,
        parked_at: now.to_rfc3339_opts(SecondsFormat::Millis, true),
        record: serde_json::to_string(record).ok(),
    }
}
