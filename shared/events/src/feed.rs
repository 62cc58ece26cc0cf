//! One batch of the data table's stream turned into change events: [`events_from_batch`].
//!
//! The data table's stream (`StreamViewType: NEW_AND_OLD_IMAGES` in `template.yaml`) carries the
//! item's state before and after each write of the data table. Each image is read as data-sync and
//! sql-sync read images ([`cqrs_item::Item::from_image`]). Per record:
//!
//! - **`INSERT`, `MODIFY`** from version `a` (the old image's; 0 for an `INSERT`) to `b` (the new
//!   image's): one event per version `a+1..=b`, in version order. data-sync collapses a batch's
//!   versions of an item into one data write, so `a+1..b-1` are read from the history table
//!   ([`HistoryReader`], consistent reads, one read for the whole batch); a version the history
//!   table does not hold is a [`FeedError::MissingVersion`] naming the item and the version, never
//!   skipped silently (with [`Gaps::Skip`], [`events_from_batch_with`], it is reported and the
//!   versions that exist go on). A `MODIFY` without its old image is malformed (the stream must carry both).
//! - **An `INSERT` of version `b > 1`** is an item that returns after DynamoDB's TTL removed it
//!   (or whose first versions data-sync collapsed): the fill goes **downwards** from `b-1` and
//!   stops before the first version the history table does not hold or whose `ttl` is at or
//!   before the record's `ApproximateCreationDateTime` (that version ended a previous life, whose
//!   events, TTL removal included, left back then). Under an `INSERT` a missing version is not a
//!   failure; the first version of the new life is `<entity>.created`. The batch's one read
//!   holds an `INSERT`'s newest 100 fills; older windows are read only while the life goes on.
//! - **`REMOVE`** by DynamoDB's TTL ([`crate::is_ttl_removal`]): one `<entity>.deleted` event,
//!   `removal: "ttl"`, with the last state. Any other `REMOVE` (an operator's delete) changes no
//!   version: no event, logged.
//! - **Never leaves**: an image of no entity, or a framework row ([`crate::Feed::entity_of`]).
//!
//! **Order and duplicates.** Records are walked in stream order; an item's events come in version
//! order, the filled versions before the record's own. Within a batch a record whose new version
//! is not above the item's last version already emitted (a duplicated or replayed record, or a
//! rewrite of the same version by `cqrs rebuild`) yields nothing, and a TTL removal already
//! emitted for the same version yields nothing. **Across batches** (a batch delivered again after
//! a failure, a replay from the stream's trim horizon) the same versions make the same events with
//! the same ids ([`crate::event_id`]): consumers deduplicate by `id`.
//!
//! **Failures stop their item.** A record that fails (malformed image, missing history version,
//! failed history read) is reported once in [`Batch::failures`] with its position and sequence
//! number, and the item's later records in the batch make no event (they would come out of order);
//! the other items go on. A publisher reports the failed records for redelivery (the earliest per
//! item), and the redelivered batch yields the same events again, deduplicated by id.

use std::collections::{BTreeMap, HashMap, HashSet};

use aws_lambda_events::event::dynamodb::EventRecord;
use chrono::{DateTime, Utc};
use cqrs_item::Item;

use crate::history::{BATCH_GET_MAX, HistoryKey, HistoryReader};
use crate::{ChangeEvent, Feed, is_ttl_removal};

/// Why a record of the batch made no event.
///
/// ```
/// let error = cqrs_events::FeedError::MissingVersion { pk: "PRODUCT#t1".into(), sk: "P001".into(), version: 3 };
/// assert_eq!(error.to_string(), "version 3 of PRODUCT#t1 / P001 is not in the history table");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FeedError {
    /// The record is not a change of an item (no image, an image that is not an item, an unknown
    /// `eventName`): permanent.
    #[error("malformed record: {0}")]
    Malformed(String),
    /// A version between the record's old and new image is not in the history table.
    #[error("version {version} of {pk} / {sk} is not in the history table")]
    MissingVersion {
        /// The item's partition key.
        pk: String,
        /// The item's sort key (no version).
        sk: String,
        /// The version not found.
        version: i64,
    },
    /// Reading the history table failed (transient unless `transient` is false).
    #[error("reading the history of {pk} / {sk} failed: {message}")]
    History {
        /// The item's partition key.
        pk: String,
        /// The item's sort key (no version).
        sk: String,
        /// The store's error.
        message: String,
        /// Whether reading again later may succeed.
        transient: bool,
    },
}

impl FeedError {
    /// Whether the record can never make its events however often it is read again: a malformed
    /// record, a version missing from the history table under a `MODIFY` (history is written
    /// before the data row and read consistently, so a missing version expired or was deleted),
    /// a history read that failed for good. `false` for a transient history read (throttling,
    /// transport), which a redelivery may get past. A publisher parks the permanent ones and
    /// reports the others for retry.
    ///
    /// ```
    /// use cqrs_events::FeedError;
    /// assert!(FeedError::Malformed("no image".into()).permanent());
    /// assert!(FeedError::MissingVersion { pk: "P#t".into(), sk: "a".into(), version: 2 }.permanent());
    /// let throttled = FeedError::History {
    ///     pk: "P#t".into(),
    ///     sk: "a".into(),
    ///     message: "throttled".into(),
    ///     transient: true,
    /// };
    /// assert!(!throttled.permanent());
    /// ```
    pub fn permanent(&self) -> bool {
        match self {
            FeedError::Malformed(_) | FeedError::MissingVersion { .. } => true,
            FeedError::History { transient, .. } => !transient,
        }
    }
}

/// A record that made no event, and why.
///
/// ```
/// let failure = cqrs_events::RecordFailure {
///     position: 0,
///     sequence_number: Some("100".into()),
///     event_id: "e1".into(),
///     error: cqrs_events::FeedError::Malformed("no image".into()),
/// };
/// assert_eq!(failure.sequence_number.as_deref(), Some("100"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordFailure {
    /// The record's position in the batch.
    pub position: usize,
    /// The record's `SequenceNumber`.
    pub sequence_number: Option<String>,
    /// The record's `eventID`.
    pub event_id: String,
    /// Why.
    pub error: FeedError,
}

/// What one batch came to: its events in order, the records that failed (the first of each
/// failed item), and how many records made no event by rule.
///
/// ```
/// let batch = cqrs_events::Batch::default();
/// assert!(batch.events.is_empty() && batch.failures.is_empty());
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Batch {
    /// The events, per item in version order, items in the order of their records.
    pub events: Vec<ChangeEvent>,
    /// Beside each event of [`Batch::events`] (same index): the position in the batch of the
    /// record that carried it (a filled version is carried by the record whose fill read it).
    /// A publisher reports that record when the event cannot be published.
    pub origins: Vec<usize>,
    /// How many of the events are versions read from the history table (filled).
    pub filled: usize,
    /// The first failed record of each item that failed, in batch order.
    pub failures: Vec<RecordFailure>,
    /// Records of items that never leave, and `REMOVE`s that are not TTL removals.
    pub ignored: usize,
    /// Records that repeat a version (or a TTL removal) already emitted in the batch.
    pub duplicates: usize,
}

impl Batch {
    /// Adds `event` (when there is one), carried by the record at `position`; `filled`: read
    /// from the history table.
    fn push(&mut self, event: Option<ChangeEvent>, position: usize, filled: bool) {
        if let Some(event) = event {
            self.events.push(event);
            self.origins.push(position);
            self.filled += usize::from(filled);
        }
    }

    /// Each event with the position of the record that carried it ([`Batch::origins`]).
    ///
    /// ```
    /// let batch = cqrs_events::Batch::default();
    /// assert_eq!(batch.events_with_origins().count(), 0);
    /// ```
    pub fn events_with_origins(&self) -> impl Iterator<Item = (&ChangeEvent, usize)> {
        self.events.iter().zip(self.origins.iter().copied())
    }
}

/// The item a record belongs to: `pk` and the data table's `sk`.
type ItemKey = (String, String);

/// What a record asks for, before the history is read.
enum Step {
    /// No event (ignored or a duplicate: counted already).
    Nothing,
    /// The record fails.
    Fail(Option<ItemKey>, FeedError),
    /// Events of versions `fills` (from the history table) then of `own`, after `old`; `insert`:
    /// the record is an `INSERT` (the fill goes downwards and stops at a previous life).
    Versions {
        key: ItemKey,
        old: Option<Box<Item>>,
        fills: Vec<i64>,
        own: Box<Item>,
        insert: bool,
    },
    /// The TTL removal of the item whose last state is `last`.
    Ttl { key: ItemKey, last: Box<Item> },
}

/// The events of one batch of the data table's stream (see the [module docs](self)): every
/// version in order per item, the versions the batch skipped read from `history` (one read for
/// the batch). Never fails as a whole: a failed record is in [`Batch::failures`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use cqrs_events::{Feed, events_from_batch};
/// let feed = Feed::new(cqrs_model::Model::example(), "urn:cqrs:shop");
/// // Versions 1 and 2 of a product in the history table.
/// let mut v1 = cqrs_item::Item::example();
/// v1.entity = Some("product".into());
/// let mut v2 = v1.clone();
/// v2.version = 2;
/// v2.sk = "P001@2".into();
/// v2.attributes.insert("price".into(), cqrs_item::Value::from(1300));
/// let history = vec![v1, v2.clone()];
/// // The data table's stream: one INSERT of version 2 (data-sync collapsed 1 and 2).
/// let image = serde_json::to_string(&serde_dynamo::Item::from(
///     v2.into_data_item().to_attributes().unwrap(),
/// )).unwrap();
/// let event: aws_lambda_events::event::dynamodb::Event = serde_json::from_str(&format!(
///     r#"{{"Records":[{{"eventID":"1","eventName":"INSERT","awsRegion":"r",
///        "dynamodb":{{"Keys":{{"pk":{{"S":"PRODUCT#t1"}},"sk":{{"S":"P001"}}}},
///                    "NewImage":{image},"SequenceNumber":"100","SizeBytes":1}}}}]}}"#
/// )).unwrap();
/// let batch = events_from_batch(&feed, &event.records, &history).await;
/// let types: Vec<&str> = batch.events.iter().map(|e| e.event_type.as_str()).collect();
/// assert_eq!(types, ["product.created", "product.updated"]);
/// assert_eq!(batch.events[1].data.changed, ["price"]);
/// # }
/// ```
pub async fn events_from_batch<H: HistoryReader + ?Sized>(
    feed: &Feed,
    records: &[EventRecord],
    history: &H,
) -> Batch {
    events_from_batch_with(feed, records, history, Gaps::Stop).await
}

/// What a version missing from the history table under a `MODIFY` does to its item.
///
/// ```
/// assert_ne!(cqrs_events::Gaps::Stop, cqrs_events::Gaps::Skip);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gaps {
    /// The item stops at the gap: its later versions in the batch make no event
    /// ([`events_from_batch`]).
    Stop,
    /// The gap is reported in [`Batch::failures`] (once per record) and skipped: the versions
    /// that exist are emitted, the one after the gap with `previousVersion` = the version before
    /// it (the missing one) and `changed` against the last version known. For a publisher that
    /// parks the record and must not hold the item's newest version back (design39 2.4).
    Skip,
}

/// [`events_from_batch`], with what a gap under a `MODIFY` does ([`Gaps`]).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use cqrs_events::{Feed, FeedError, Gaps, events_from_batch_with};
/// let feed = Feed::new(cqrs_model::Model::example(), "urn:cqrs:shop");
/// let version = |v: i64| {
///     let mut item = cqrs_item::Item::example();
///     item.entity = Some("product".into());
///     item.version = v;
///     item.sk = format!("P001@{v}");
///     item
/// };
/// let image = |v: i64| serde_json::to_string(&serde_dynamo::Item::from(
///     version(v).into_data_item().to_attributes().unwrap(),
/// )).unwrap();
/// // MODIFY 1 -> 3; the history table lacks version 2.
/// let event: aws_lambda_events::event::dynamodb::Event = serde_json::from_str(&format!(
///     r#"{{"Records":[{{"eventID":"1","eventName":"MODIFY","awsRegion":"r",
///        "dynamodb":{{"Keys":{{"pk":{{"S":"PRODUCT#t1"}},"sk":{{"S":"P001"}}}},
///                    "OldImage":{},"NewImage":{},"SequenceNumber":"100","SizeBytes":1}}}}]}}"#,
///     image(1), image(3)
/// )).unwrap();
/// let history = vec![version(1), version(3)];
/// let batch = events_from_batch_with(&feed, &event.records, &history, Gaps::Skip).await;
/// assert!(matches!(batch.failures[0].error, FeedError::MissingVersion { version: 2, .. }));
/// assert_eq!(batch.events.len(), 1);
/// assert_eq!((batch.events[0].itemversion, batch.events[0].data.previous_version), (3, Some(2)));
/// # }
/// ```
pub async fn events_from_batch_with<H: HistoryReader + ?Sized>(
    feed: &Feed,
    records: &[EventRecord],
    history: &H,
    gaps: Gaps,
) -> Batch {
    let mut batch = Batch::default();

    // 1. What each record asks for, with the versions to fill.
    let mut emitted: HashMap<ItemKey, i64> = HashMap::new();
    let mut removed: HashSet<(ItemKey, i64)> = HashSet::new();
    let steps: Vec<Step> = records
        .iter()
        .map(|record| plan(feed, record, &mut emitted, &mut removed, &mut batch))
        .collect();

    // 2. One read of every version to fill.
    let wanted: Vec<HistoryKey> = steps
        .iter()
        .flat_map(|step| match step {
            // An INSERT's fill goes downwards: its newest window first (more when needed, 3).
            Step::Versions {
                key, fills, insert, ..
            } => fills
                .iter()
                .skip(if *insert {
                    fills.len().saturating_sub(BATCH_GET_MAX)
                } else {
                    0
                })
                .map(|v| HistoryKey::new(key.0.clone(), key.1.clone(), *v))
                .collect(),
            _ => Vec::new(),
        })
        .collect();
    let mut found: Result<BTreeMap<HistoryKey, Item>, (String, bool)> = if wanted.is_empty() {
        Ok(BTreeMap::new())
    } else {
        match history.read_versions(&wanted).await {
            Ok(items) => Ok(items
                .into_iter()
                .map(|item| {
                    (
                        HistoryKey::new(item.pk.clone(), item.base_sk(), item.version),
                        item,
                    )
                })
                .collect()),
            Err(error) => Err((error.to_string(), error.is_transient())),
        }
    };

    // 3. The events, per item in version order; a failure stops its item.
    let mut last: HashMap<ItemKey, Item> = HashMap::new();
    let mut failed: HashSet<ItemKey> = HashSet::new();
    for (position, (record, step)) in records.iter().zip(steps).enumerate() {
        let observed: DateTime<Utc> = record.change.approximate_creation_date_time;
        match step {
            Step::Nothing => {}
            Step::Fail(key, error) => report(&mut failed, &mut batch, position, record, key, error),
            Step::Ttl { key, last: state } => {
                if !failed.contains(&key) {
                    batch.push(feed.ttl_event(&state, observed), position, false);
                    // The item's life ended: a later INSERT starts a new one.
                    last.remove(&key);
                }
            }
            Step::Versions {
                key,
                old,
                mut fills,
                own,
                insert,
            } => {
                if failed.contains(&key) {
                    continue;
                }
                let mut new_life = false;
                if insert && let Ok(found) = &mut found {
                    match downward(history, &key, &fills, found, observed).await {
                        Ok(cut) => {
                            new_life = cut > 0;
                            fills.drain(..cut);
                        }
                        Err(error) => {
                            let error = FeedError::History {
                                pk: key.0.clone(),
                                sk: key.1.clone(),
                                message: error.to_string(),
                                transient: error.is_transient(),
                            };
                            report(
                                &mut failed,
                                &mut batch,
                                position,
                                record,
                                Some(key.clone()),
                                error,
                            );
                            continue;
                        }
                    }
                }
                let start = fills.first().copied().unwrap_or(own.version);
                let mut previous: Option<Item> = match last.remove(&key) {
                    _ if new_life => None,
                    Some(state) if state.version == start - 1 => Some(state),
                    _ => old.map(|o| *o).filter(|o| o.version == start - 1),
                };
                let mut stopped = false;
                // Gaps::Skip: the missing version just skipped, and whether the record's gap is
                // reported already.
                let mut after_gap: Option<i64> = None;
                let mut gap_noted = false;
                for version in fills {
                    let wanted = HistoryKey::new(key.0.clone(), key.1.clone(), version);
                    let item = match &found {
                        Ok(found) => found.get(&wanted).cloned(),
                        Err((message, transient)) => {
                            let error = FeedError::History {
                                pk: key.0.clone(),
                                sk: key.1.clone(),
                                message: message.clone(),
                                transient: *transient,
                            };
                            report(
                                &mut failed,
                                &mut batch,
                                position,
                                record,
                                Some(key.clone()),
                                error,
                            );
                            stopped = true;
                            break;
                        }
                    };
                    let Some(item) = item else {
                        let error = FeedError::MissingVersion {
                            pk: key.0.clone(),
                            sk: key.1.clone(),
                            version,
                        };
                        if gaps == Gaps::Skip {
                            if !gap_noted {
                                note(&mut batch, position, record, error);
                                gap_noted = true;
                            }
                            after_gap = Some(version);
                            continue;
                        }
                        report(
                            &mut failed,
                            &mut batch,
                            position,
                            record,
                            Some(key.clone()),
                            error,
                        );
                        stopped = true;
                        break;
                    };
                    let event = past_gap(
                        feed.version_event(&item, previous.as_ref(), observed),
                        after_gap.take(),
                    );
                    batch.push(event, position, true);
                    previous = Some(item);
                }
                if stopped {
                    continue;
                }
                let event = past_gap(
                    feed.version_event(&own, previous.as_ref(), observed),
                    after_gap.take(),
                );
                batch.push(event, position, false);
                last.insert(key, *own);
            }
        }
    }
    batch
}

/// `event` after the missing version `missing` (if any): it replaces that version.
fn past_gap(event: Option<ChangeEvent>, missing: Option<i64>) -> Option<ChangeEvent> {
    event.map(|mut event| {
        if let Some(missing) = missing {
            event.data.previous_version = Some(missing);
        }
        event
    })
}

/// Reports a gap the item goes on past ([`Gaps::Skip`]): the record is in
/// [`Batch::failures`], the item is not stopped.
fn note(batch: &mut Batch, position: usize, record: &EventRecord, error: FeedError) {
    tracing::warn!(
        position,
        event_id = %record.event_id,
        %error,
        "a version is missing from history: skipped, the versions that exist go on"
    );
    batch.failures.push(RecordFailure {
        position,
        sequence_number: record.change.sequence_number.clone(),
        event_id: record.event_id.clone(),
        error,
    });
}

/// Reports the failure of the record at `position` unless its item failed already (its first
/// failure is the one a publisher must report), and marks the item failed.
fn report(
    failed: &mut HashSet<ItemKey>,
    batch: &mut Batch,
    position: usize,
    record: &EventRecord,
    key: Option<ItemKey>,
    error: FeedError,
) {
    if let Some(key) = key
        && !failed.insert(key)
    {
        return;
    }
    tracing::warn!(
        position,
        event_id = %record.event_id,
        %error,
        "stream record made no event"
    );
    batch.failures.push(RecordFailure {
        position,
        sequence_number: record.change.sequence_number.clone(),
        event_id: record.event_id.clone(),
        error,
    });
}

/// How many of an `INSERT`'s `fills` (ascending) belong to a previous life of the item
/// ([`previous_life_cut`]), reading the history downwards: `found` holds the newest
/// [`BATCH_GET_MAX`] fills (the batch's one read); while a whole window is of the same life and
/// older fills remain, the next window down is read (consistently) into `found`. An item that
/// returns after a TTL removal with thousands of old versions costs one window, not all of them.
async fn downward<H: HistoryReader + ?Sized>(
    history: &H,
    key: &ItemKey,
    fills: &[i64],
    found: &mut BTreeMap<HistoryKey, Item>,
    observed: DateTime<Utc>,
) -> Result<usize, cqrs_store::StoreError> {
    let mut bottom = fills.len().saturating_sub(BATCH_GET_MAX);
    loop {
        let window = fills.get(bottom..).unwrap_or_default();
        let cut = bottom + previous_life_cut(key, window, found, observed);
        if cut > bottom || bottom == 0 {
            return Ok(cut);
        }
        let next = bottom.saturating_sub(BATCH_GET_MAX);
        let keys: Vec<HistoryKey> = fills
            .get(next..bottom)
            .unwrap_or_default()
            .iter()
            .map(|v| HistoryKey::new(key.0.clone(), key.1.clone(), *v))
            .collect();
        for item in history.read_versions(&keys).await? {
            found.insert(
                HistoryKey::new(item.pk.clone(), item.base_sk(), item.version),
                item,
            );
        }
        bottom = next;
    }
}

/// How many of an `INSERT`'s `fills` (ascending) belong to a previous life of the item and are
/// not filled: walking down from the newest, the fill stops before the first version that the
/// history table does not hold or whose `ttl` is at or before `observed` (the `INSERT`'s
/// `ApproximateCreationDateTime`: DynamoDB's TTL ended that life, and its events, the TTL
/// removal included, left back then). `0`: every fill is of the same life.
fn previous_life_cut(
    key: &ItemKey,
    fills: &[i64],
    found: &BTreeMap<HistoryKey, Item>,
    observed: DateTime<Utc>,
) -> usize {
    let now = observed.timestamp();
    let mut kept = fills.len();
    for (at, version) in fills.iter().enumerate().rev() {
        let wanted = HistoryKey::new(key.0.clone(), key.1.clone(), *version);
        match found.get(&wanted) {
            Some(item) if item.ttl.is_none_or(|ttl| ttl > now) => kept = at,
            _ => break,
        }
    }
    if kept > 0 {
        tracing::info!(
            pk = %key.0, sk = %key.1, first = fills.first().copied(), new_life_from = fills.get(kept).copied(),
            "an INSERT after a previous life of the item (expired by TTL or no longer in history): \
             its versions are not filled"
        );
    }
    kept
}

/// What `record` asks for (step 1 of [`events_from_batch`]); `emitted` is the last version each
/// item will have emitted, `removed` the TTL removals emitted.
fn plan(
    feed: &Feed,
    record: &EventRecord,
    emitted: &mut HashMap<ItemKey, i64>,
    removed: &mut HashSet<(ItemKey, i64)>,
    batch: &mut Batch,
) -> Step {
    let keys = record_key(record);
    let image = |image: &serde_dynamo::Item, which: &str| -> Result<Item, FeedError> {
        if image.is_empty() {
            return Err(FeedError::Malformed(format!(
                "{} without its {which} (the data table's stream view type must be NEW_AND_OLD_IMAGES)",
                record.event_name
            )));
        }
        Item::from_image(image.clone())
            .map_err(|e| FeedError::Malformed(format!("the {which} is not an item: {e}")))
    };
    match record.event_name.as_str() {
        "INSERT" | "MODIFY" => {
            let own = match image(&record.change.new_image, "NewImage") {
                Ok(item) => item,
                Err(error) => return Step::Fail(keys, error),
            };
            let old = if record.event_name == "MODIFY" {
                match image(&record.change.old_image, "OldImage") {
                    Ok(item) => Some(item),
                    Err(error) => return Step::Fail(keys, error),
                }
            } else {
                None
            };
            if feed.entity_of(&own).is_none() {
                batch.ignored += 1;
                return Step::Nothing;
            }
            let key: ItemKey = (own.pk.clone(), own.sk.clone());
            let from = old.as_ref().map_or(0, |o| o.version);
            let start = from.max(emitted.get(&key).copied().unwrap_or(0)) + 1;
            if own.version < start {
                tracing::debug!(
                    pk = %key.0, sk = %key.1, version = own.version,
                    "version already emitted in this batch: no event"
                );
                batch.duplicates += 1;
                return Step::Nothing;
            }
            emitted.insert(key.clone(), own.version);
            Step::Versions {
                key,
                insert: old.is_none(),
                old: old.map(Box::new),
                fills: (start..own.version).collect(),
                own: Box::new(own),
            }
        }
        "REMOVE" => {
            let last = match image(&record.change.old_image, "OldImage") {
                Ok(item) => item,
                Err(error) => return Step::Fail(keys, error),
            };
            if !is_ttl_removal(record) {
                tracing::info!(
                    pk = %last.pk, sk = %last.sk, version = last.version,
                    "a REMOVE not made by TTL changes no version: no event"
                );
                batch.ignored += 1;
                return Step::Nothing;
            }
            if feed.entity_of(&last).is_none() {
                batch.ignored += 1;
                return Step::Nothing;
            }
            let key: ItemKey = (last.pk.clone(), last.sk.clone());
            if !removed.insert((key.clone(), last.version)) {
                batch.duplicates += 1;
                return Step::Nothing;
            }
            Step::Ttl {
                key,
                last: Box::new(last),
            }
        }
        other => Step::Fail(
            keys,
            FeedError::Malformed(format!("unknown eventName {other:?}")),
        ),
    }
}

/// The record's item key from its `Keys`, if it has one.
fn record_key(record: &EventRecord) -> Option<ItemKey> {
    let string = |name: &str| match record.change.keys.get(name) {
        Some(serde_dynamo::AttributeValue::S(s)) => Some(s.clone()),
        _ => None,
    };
    Some((string("pk")?, string("sk")?))
}
