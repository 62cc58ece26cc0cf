//! `cqrs replay`: one consumer fed again from the history table, every version written in a time
//! window, in version order per item.
//!
//! The history table is the only store of every version. Its only index is `id-version-index`
//! (by item id), so finding the versions of a time window is a **full table scan**, said plainly:
//!
//! - [`replay`] runs a parallel `Scan` ([`SEGMENTS`] segments, eventually consistent) with the
//!   filter `updatedAt >= since` (and `< until`, and `entity = E` when given). A filter does not
//!   reduce what DynamoDB reads: every replay reads the whole table, **table size / 4 KB × 0.5
//!   read units** (eventually consistent); 10 GB ≈ 1.3 million RRU ≈ $0.16 on demand
//!   **[unverified price: $0.125 per million RRU]**, whatever the window.
//! - The matching versions are held in memory (only those: the window, not the table), grouped
//!   per item and sorted by version (a scan returns `sk` in string order, `P001@10` before
//!   `P001@9`).
//! - Each version becomes its event with [`cqrs_events::Feed::version_event`], after the previous
//!   version: from the scan when it is in the window, else read from the history table (one
//!   `BatchGetItem` key per item whose window does not start at version 1). A row of no entity of
//!   the model makes no event (counted in [`ReplayReport::skipped`]). An event too big for a
//!   message (its JSON over [`MAX_EVENT_BYTES`]) goes without its state
//!   ([`cqrs_events::ChangeEvent::into_reference`]); the runtime reads it back.
//! - The events go straight to the consumer's queue (not through the topic: only that consumer
//!   sees them) with `SendMessageBatch` (10 a call, in order per item), message group = the item,
//!   deduplication id [`replay_dedup_id`] `<event id>:replay:<run id>` (so neither the live event
//!   nor an earlier replay deduplicates it away in SQS), the attributes `type`, `tenant`,
//!   `entity` as the publisher sends them, and [`REPLAYED_ATTRIBUTE`] = `"true"`.
//!
//! The consumer's marker makes a replay **fill-only**: a version at or below the one the consumer
//! already applied is acknowledged as a duplicate, not handled. A second replay of the same window
//! handles nothing. TTL removals are not in the history table and are not replayed.
//!
//! Writes: one SQS request per 10 events ($0.50 per million FIFO requests **[unverified
//! price]**), plus what the consumer does with the events it has not seen.
//!
//! ```no_run
//! # async fn example(history: cqrs_store::Store, feed: cqrs_events::Feed, sqs: aws_sdk_sqs::Client)
//! # -> Result<(), cqrs_consumer::replay::ReplayError> {
//! use cqrs_consumer::replay::{ReplayOptions, replay};
//! let since = "2026-11-27T00:00:00Z".parse().unwrap();
//! let options = ReplayOptions { entity: Some("product".into()), ..ReplayOptions::since(since) };
//! let report = replay(&history, &feed, &sqs, "https://sqs/shop-search.fifo", &options).await?;
//! println!("{} events sent of {} items, {} failed", report.sent, report.items, report.failed);
//! # Ok(()) }
//! ```

use std::collections::{BTreeMap, HashMap};

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_sqs::types::{MessageAttributeValue, SendMessageBatchRequestEntry};
use chrono::{DateTime, SecondsFormat, Utc};
use cqrs_events::{ChangeEvent, Feed, HistoryKey, HistoryReader};
use cqrs_item::Item;

pub use crate::runtime::REPLAYED_ATTRIBUTE;

/// The scan's segments (parallel `Scan` requests).
///
/// ```
/// assert_eq!(cqrs_consumer::replay::SEGMENTS, 8);
/// ```
pub const SEGMENTS: u32 = 8;

/// The largest event sent with its state (bytes of JSON), as the publisher's limit: a bigger one
/// goes as a reference event.
///
/// ```
/// assert_eq!(cqrs_consumer::replay::MAX_EVENT_BYTES, 245_760);
/// ```
pub const MAX_EVENT_BYTES: usize = 240 * 1024;

/// The most bytes of bodies in one `SendMessageBatch` call.
const MAX_CALL_BYTES: usize = 256 * 1024;

/// What to replay: the versions written (`updatedAt`) at or after `since`, before `until`, of one
/// entity or all.
///
/// ```
/// let since = "2026-11-27T10:00:00Z".parse().unwrap();
/// let options = cqrs_consumer::replay::ReplayOptions::since(since);
/// assert_eq!((options.until, options.entity), (None, None));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayOptions {
    /// The first time (inclusive).
    pub since: DateTime<Utc>,
    /// The end (exclusive); `None`: now and later.
    pub until: Option<DateTime<Utc>>,
    /// Only this entity's versions.
    pub entity: Option<String>,
}

impl ReplayOptions {
    /// Every version written at or after `since`.
    ///
    /// ```
    /// let since: chrono::DateTime<chrono::Utc> = "2026-11-27T10:00:00Z".parse().unwrap();
    /// assert_eq!(cqrs_consumer::replay::ReplayOptions::since(since).since, since);
    /// ```
    pub fn since(since: DateTime<Utc>) -> Self {
        ReplayOptions {
            since,
            until: None,
            entity: None,
        }
    }
}

/// What a replay did.
///
/// ```
/// let report = cqrs_consumer::replay::ReplayReport::default();
/// assert_eq!((report.sent, report.failed), (0, 0));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReplayReport {
    /// This run's id (in every deduplication id it sent).
    pub run_id: String,
    /// Versions of the window the scan found.
    pub versions: usize,
    /// Items they belong to.
    pub items: usize,
    /// Events sent to the queue.
    pub sent: usize,
    /// Events sent, per entity.
    pub by_entity: BTreeMap<String, usize>,
    /// Versions that make no event (no entity of the model, a framework row).
    pub skipped: usize,
    /// Rows without the item shape.
    pub unreadable: usize,
    /// Events not sent: refused by SQS, or a later version of an item whose earlier one was.
    pub failed: usize,
    /// Why (the first few failures).
    pub errors: Vec<String>,
}

/// A replay that could not start: the scan or the previous versions' read failed (nothing was
/// sent).
///
/// ```
/// let e = cqrs_consumer::replay::ReplayError::Scan("ResourceNotFoundException".into());
/// assert_eq!(e.to_string(), "scanning the history table failed, nothing sent: ResourceNotFoundException");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReplayError {
    /// `Scan` failed.
    #[error("scanning the history table failed, nothing sent: {0}")]
    Scan(String),
    /// Reading the versions before the window failed.
    #[error("reading the previous versions from the history table failed, nothing sent: {0}")]
    Previous(String),
    /// `until` is not after `since`.
    #[error("--until must be after --since")]
    EmptyWindow,
}

/// The deduplication id of event `event_id` sent by replay run `run_id`.
///
/// ```
/// assert_eq!(cqrs_consumer::replay::replay_dedup_id("Kq3f", "01J"), "Kq3f:replay:01J");
/// ```
pub fn replay_dedup_id(event_id: &str, run_id: &str) -> String {
    format!("{event_id}:replay:{run_id}")
}

/// Sends the versions of the window `options` from the history table `history` to the queue
/// `queue_url` as events of `feed` (see the [module docs](self): a full table scan).
///
/// ```no_run
/// # async fn example(history: cqrs_store::Store, feed: cqrs_events::Feed, sqs: aws_sdk_sqs::Client)
/// # -> Result<(), cqrs_consumer::replay::ReplayError> {
/// let options = cqrs_consumer::replay::ReplayOptions::since("2026-11-27T00:00:00Z".parse().unwrap());
/// let report = cqrs_consumer::replay::replay(&history, &feed, &sqs, "https://sqs/q.fifo", &options).await?;
/// assert_eq!(report.sent + report.failed + report.skipped, report.versions);
/// # Ok(()) }
/// ```
///
/// # Errors
///
/// [`ReplayError`] when the scan (or the read of the versions before the window) fails: nothing
/// was sent. Failed sends are counted in the report ([`ReplayReport::failed`]).
pub async fn replay(
    history: &cqrs_store::Store,
    feed: &Feed,
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    options: &ReplayOptions,
) -> Result<ReplayReport, ReplayError> {
    if options.until.is_some_and(|until| until <= options.since) {
        return Err(ReplayError::EmptyWindow);
    }
    let mut report = ReplayReport {
        run_id: ulid::Ulid::new().to_string(),
        ..ReplayReport::default()
    };

    // 1. The window's versions, per item, in version order.
    let segments = futures::future::join_all(
        (0..SEGMENTS).map(|segment| scan_segment(history, options, segment)),
    )
    .await;
    let mut items: BTreeMap<(String, String), BTreeMap<i64, Item>> = BTreeMap::new();
    for segment in segments {
        let (rows, unreadable) = segment.map_err(ReplayError::Scan)?;
        report.unreadable += unreadable;
        for item in rows {
            if !in_window(&item, options) {
                continue;
            }
            let base = cqrs_keys::remove_sort_key_version(&item.sk).to_string();
            items
                .entry((item.pk.clone(), base))
                .or_default()
                .insert(item.version, item);
        }
    }
    report.items = items.len();
    report.versions = items.values().map(BTreeMap::len).sum();

    // 2. The version before each item's window, when the scan did not bring it.
    let before: Vec<HistoryKey> = items
        .iter()
        .filter_map(|((pk, sk), versions)| {
            let first = *versions.keys().next()?;
            (first > 1).then(|| HistoryKey::new(pk.clone(), sk.clone(), first - 1))
        })
        .collect();
    let mut previous: HashMap<(String, String), Item> = HashMap::new();
    for chunk in before.chunks(100) {
        let found = history
            .read_versions(chunk)
            .await
            .map_err(|e| ReplayError::Previous(e.to_string()))?;
        for item in found {
            let base = cqrs_keys::remove_sort_key_version(&item.sk).to_string();
            previous.insert((item.pk.clone(), base), item);
        }
    }

    // 3. The events, in order per item.
    let now = Utc::now();
    let mut outgoing: Vec<Outgoing> = Vec::new();
    for (key, versions) in &items {
        let mut before = previous.get(key);
        for item in versions.values() {
            let after = before.filter(|p| p.version == item.version - 1);
            match feed.version_event(item, after, now) {
                Some(event) => outgoing.push(Outgoing::new(event, &report.run_id)),
                None => report.skipped += 1,
            }
            before = Some(item);
        }
    }

    // 4. Sent, 10 a call, an item's later versions not after one of its versions failed.
    send_all(sqs, queue_url, outgoing, &mut report).await;
    Ok(report)
}

/// Whether `item` was written in the window (the scan's filter compares text; this compares
/// times, for rows whose `updatedAt` is not written the usual way).
fn in_window(item: &Item, options: &ReplayOptions) -> bool {
    let Ok(at) = DateTime::parse_from_rfc3339(&item.updated_at) else {
        return true; // the filter took it; keep its judgement
    };
    let at = at.with_timezone(&Utc);
    at >= options.since && options.until.is_none_or(|until| at < until)
}

/// The rows of one scan segment that pass the filter, and the number of unreadable rows.
async fn scan_segment(
    history: &cqrs_store::Store,
    options: &ReplayOptions,
    segment: u32,
) -> Result<(Vec<Item>, usize), String> {
    let time =
        |t: &DateTime<Utc>| AttributeValue::S(t.to_rfc3339_opts(SecondsFormat::Millis, true));
    let mut filter = String::from("#updatedAt >= :since");
    let mut request = history
        .client()
        .scan()
        .table_name(&history.tables().history)
        .segment(i32::try_from(segment).unwrap_or(0))
        .total_segments(i32::try_from(SEGMENTS).unwrap_or(1))
        .expression_attribute_names("#updatedAt", "updatedAt")
        .expression_attribute_values(":since", time(&options.since));
    if let Some(until) = &options.until {
        filter.push_str(" AND #updatedAt < :until");
        request = request.expression_attribute_values(":until", time(until));
    }
    if let Some(entity) = &options.entity {
        filter.push_str(" AND #entity = :entity");
        request = request
            .expression_attribute_names("#entity", "entity")
            .expression_attribute_values(":entity", AttributeValue::S(entity.clone()));
    }
    let request = request.filter_expression(filter);
    let mut rows = Vec::new();
    let mut unreadable = 0;
    let mut start = None;
    loop {
        let output = request
            .clone()
            .set_exclusive_start_key(start)
            .send()
            .await
            .map_err(|e| aws_sdk_dynamodb::error::DisplayErrorContext(&e).to_string())?;
        for row in output.items() {
            match Item::from_attributes(row.clone()) {
                Ok(item) => rows.push(item),
                Err(_) => unreadable += 1,
            }
        }
        start = output.last_evaluated_key().cloned();
        if start.is_none() {
            break;
        }
    }
    Ok((rows, unreadable))
}

/// One event to send.
struct Outgoing {
    group: String,
    entity: String,
    body: String,
    event: ChangeEvent,
    dedup: String,
}

impl Outgoing {
    fn new(event: ChangeEvent, run_id: &str) -> Self {
        let group = cqrs_keys::member_token(&event.data.pk, &event.data.sk);
        let mut body = serde_json::to_string(&event).unwrap_or_default();
        if body.len() > MAX_EVENT_BYTES {
            body = serde_json::to_string(&event.clone().into_reference()).unwrap_or_default();
        }
        Outgoing {
            group,
            entity: event.entity.clone(),
            dedup: replay_dedup_id(&event.id, run_id),
            body,
            event,
        }
    }

    fn entry(&self, id: usize) -> Result<SendMessageBatchRequestEntry, String> {
        let attribute = |value: &str| {
            MessageAttributeValue::builder()
                .data_type("String")
                .string_value(value)
                .build()
                .map_err(|e| e.to_string())
        };
        let mut entry = SendMessageBatchRequestEntry::builder()
            .id(format!("e{id}"))
            .message_body(&self.body)
            .message_group_id(&self.group)
            .message_deduplication_id(&self.dedup)
            .message_attributes(REPLAYED_ATTRIBUTE, attribute("true")?);
        for (name, value) in [
            ("type", &self.event.event_type),
            ("tenant", &self.event.tenant),
            ("entity", &self.event.entity),
        ] {
            if !value.is_empty() {
                entry = entry.message_attributes(name, attribute(value)?);
            }
        }
        entry.build().map_err(|e| e.to_string())
    }
}

/// The most errors a report keeps.
const MAX_ERRORS: usize = 10;

/// Sends `outgoing` in order, in calls of at most 10 entries and [`MAX_CALL_BYTES`].
async fn send_all(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    outgoing: Vec<Outgoing>,
    report: &mut ReplayReport,
) {
    let mut failed_groups: std::collections::HashSet<String> = Default::default();
    fn error(report: &mut ReplayReport, text: String) {
        report.failed += 1;
        if report.errors.len() < MAX_ERRORS {
            report.errors.push(text);
        }
    }
    let mut calls: Vec<Vec<&Outgoing>> = Vec::new();
    let mut bytes = 0;
    for message in &outgoing {
        let fits = calls
            .last()
            .is_some_and(|c| c.len() < 10 && bytes + message.body.len() <= MAX_CALL_BYTES);
        if !fits {
            calls.push(Vec::new());
            bytes = 0;
        }
        bytes += message.body.len();
        if let Some(call) = calls.last_mut() {
            call.push(message);
        }
    }
    for call in calls {
        let mut entries = Vec::new();
        let mut sent_here: Vec<&Outgoing> = Vec::new();
        for message in call {
            if failed_groups.contains(&message.group) {
                error(
                    report,
                    format!(
                        "{} v{}: not sent, an earlier version of the item was not",
                        message.event.subject, message.event.itemversion
                    ),
                );
                continue;
            }
            match message.entry(sent_here.len()) {
                Ok(entry) => {
                    entries.push(entry);
                    sent_here.push(message);
                }
                Err(e) => {
                    failed_groups.insert(message.group.clone());
                    error(report, format!("{}: {e}", message.event.subject));
                }
            }
        }
        if entries.is_empty() {
            continue;
        }
        match sqs
            .send_message_batch()
            .queue_url(queue_url)
            .set_entries(Some(entries))
            .send()
            .await
        {
            Ok(output) => {
                let failed: HashMap<&str, String> = output
                    .failed()
                    .iter()
                    .map(|f| {
                        (
                            f.id(),
                            format!("{}: {}", f.code(), f.message().unwrap_or_default()),
                        )
                    })
                    .collect();
                for (id, message) in sent_here.iter().enumerate() {
                    match failed.get(format!("e{id}").as_str()) {
                        Some(why) => {
                            failed_groups.insert(message.group.clone());
                            error(
                                report,
                                format!(
                                    "{} v{}: {why}",
                                    message.event.subject, message.event.itemversion
                                ),
                            );
                        }
                        None => {
                            report.sent += 1;
                            *report.by_entity.entry(message.entity.clone()).or_default() += 1;
                        }
                    }
                }
            }
            Err(e) => {
                let why = crate::redrive::sdk_text(&e);
                for message in sent_here {
                    failed_groups.insert(message.group.clone());
                    error(
                        report,
                        format!(
                            "{} v{}: SendMessageBatch: {why}",
                            message.event.subject, message.event.itemversion
                        ),
                    );
                }
            }
        }
    }
}
