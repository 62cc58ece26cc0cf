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
//!   skipped. A `MODIFY` without its old image is malformed (the stream must carry both).
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

use crate::history::{HistoryKey, HistoryReader};
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
    /// The first failed record of each item that failed, in batch order.
    pub failures: Vec<RecordFailure>,
    /// Records of items that never leave, and `REMOVE`s that are not TTL removals.
    pub ignored: usize,
    /// Records that repeat a version (or a TTL removal) already emitted in the batch.
    pub duplicates: usize,
}

/// The item a record belongs to: `pk` and the data table's `sk`.
type ItemKey = (String, String);

/// What a record asks for, before the history is read.
enum Step {
    /// No event (ignored or a duplicate: counted already).
    Nothing,
    /// The record fails.
    Fail(Option<ItemKey>, FeedError),
    /// Events of versions `fills` (from the history table) then of `own`, after `old`.
    Versions {
        key: ItemKey,
        old: Option<Box<Item>>,
        fills: Vec<i64>,
        own: Box<Item>,
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
            Step::Versions { key, fills, .. } => fills
                .iter()
                .map(|v| HistoryKey::new(key.0.clone(), key.1.clone(), *v))
                .collect(),
            _ => Vec::new(),
        })
        .collect();
    let found: Result<BTreeMap<HistoryKey, Item>, (String, bool)> = if wanted.is_empty() {
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
                    batch.events.extend(feed.ttl_event(&state, observed));
                }
            }
            Step::Versions {
                key,
                old,
                fills,
                own,
            } => {
                if failed.contains(&key) {
                    continue;
                }
                let start = fills.first().copied().unwrap_or(own.version);
                let mut previous: Option<Item> = match last.remove(&key) {
                    Some(state) if state.version == start - 1 => Some(state),
                    _ => old.map(|o| *o).filter(|o| o.version == start - 1),
                };
                let mut stopped = false;
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
                    batch
                        .events
                        .extend(feed.version_event(&item, previous.as_ref(), observed));
                    previous = Some(item);
                }
                if stopped {
                    continue;
                }
                batch
                    .events
                    .extend(feed.version_event(&own, previous.as_ref(), observed));
                last.insert(key, *own);
            }
        }
    }
    batch
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
