//! The runtime: one SQS batch at a time, per item in order, through the marker (see the
//! [crate docs](crate) for the rules), and the Lambda entry point [`run`].
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use cqrs_consumer::{ConsumerError, Delivered, Runtime, from_fn};
//! use cqrs_consumer::{marker::MemoryMarkers, park::MemoryPark, sqs::{SqsEvent, SqsMessage}};
//! let runtime = Runtime::new(
//!     from_fn("c", |_d: Delivered| async { Ok::<(), ConsumerError>(()) }),
//!     cqrs_events::Feed::new(cqrs_model::Model::example(), "urn:cqrs:shop"),
//!     Vec::<cqrs_item::Item>::new(),
//!     MemoryMarkers::default(),
//!     MemoryPark::default(),
//! );
//! let garbage = SqsMessage { message_id: "m1".into(), body: "not an event".into(), ..Default::default() };
//! let (answer, counts) = runtime.handle_counted(SqsEvent { records: vec![garbage] }).await;
//! assert!(answer.batch_item_failures.is_empty(), "parked, not retried");
//! assert_eq!(counts.parked, 1);
//! # }
//! ```

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use chrono::Utc;
use cqrs_events::{ChangeEvent, Feed, HistoryKey, HistoryReader, Removal};
use cqrs_item::Item;
use cqrs_store::ConfigError;
use serde_json::Value;

use crate::marker::{Marker, MarkerStore, MarkerWrite};
use crate::metrics::{self, BatchCounts};
use crate::park::{Park, Parked, ReasonKind};
use crate::sqs::{BatchResponse, SqsEvent, SqsMessage};
use crate::{Consumer, ConsumerError, Delivered};

/// The default `CONSUMER_MAX_RECEIVE`: the attempt on which a `Retry` parks the event.
///
/// ```
/// assert_eq!(cqrs_consumer::runtime::DEFAULT_MAX_RECEIVE, 5);
/// ```
pub const DEFAULT_MAX_RECEIVE: u32 = 5;

/// The message attribute `cqrs redrive` sets on a message it moves back (a parked message also
/// carries `cqrs-parked-at`).
///
/// ```
/// assert_eq!(cqrs_consumer::runtime::REDRIVEN_ATTRIBUTE, "cqrs-redriven");
/// ```
pub const REDRIVEN_ATTRIBUTE: &str = "cqrs-redriven";

/// The message attribute `cqrs replay` sets on the messages it sends.
///
/// ```
/// assert_eq!(cqrs_consumer::runtime::REPLAYED_ATTRIBUTE, "cqrs-replayed");
/// ```
pub const REPLAYED_ATTRIBUTE: &str = "cqrs-replayed";

/// A consumer with what it runs on: the feed (the model, to build filled versions' events), the
/// history table, the markers and the parking.
///
/// ```
/// use cqrs_consumer::{ConsumerError, Delivered, Runtime, from_fn};
/// let runtime = Runtime::new(
///     from_fn("c", |_d: Delivered| async { Ok::<(), ConsumerError>(()) }),
///     cqrs_events::Feed::new(cqrs_model::Model::example(), "urn:cqrs:shop"),
///     Vec::<cqrs_item::Item>::new(),
///     cqrs_consumer::marker::MemoryMarkers::default(),
///     cqrs_consumer::park::MemoryPark::default(),
/// )
/// .with_max_receive(3);
/// assert_eq!(runtime.max_receive(), 3);
/// ```
pub struct Runtime {
    consumer: Arc<dyn Consumer>,
    feed: Feed,
    history: Arc<dyn HistoryReader>,
    markers: Arc<dyn MarkerStore>,
    park: Arc<dyn Park>,
    max_receive: u32,
}

/// What the runtime's configuration comes from: `IDEMPOTENCY_TABLE` (the markers),
/// `HISTORY_TABLE` (gap fills, `stateref` events), `CONSUMER_DLQ_URL` (parking),
/// `CONSUMER_MAX_RECEIVE` (default [`DEFAULT_MAX_RECEIVE`], at least 1).
///
/// ```
/// let config = cqrs_consumer::Config::from_lookup(|name| match name {
///     "IDEMPOTENCY_TABLE" => Some("idem".into()),
///     "HISTORY_TABLE" => Some("history".into()),
///     "CONSUMER_DLQ_URL" => Some("https://sqs/q-dlq.fifo".into()),
///     _ => None,
/// })
/// .unwrap();
/// assert_eq!(config.max_receive, 5);
/// let err = cqrs_consumer::Config::from_lookup(|_| None).unwrap_err();
/// assert_eq!(err.to_string(), "environment variable IDEMPOTENCY_TABLE is missing or empty");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `IDEMPOTENCY_TABLE`.
    pub idempotency_table: String,
    /// `HISTORY_TABLE`.
    pub history_table: String,
    /// `CONSUMER_DLQ_URL`.
    pub dlq_url: String,
    /// `CONSUMER_MAX_RECEIVE`.
    pub max_receive: u32,
}

impl Config {
    /// Reads the variables through `lookup`; a missing one is an error naming it.
    ///
    /// ```
    /// let err = cqrs_consumer::Config::from_lookup(|name| match name {
    ///     "CONSUMER_MAX_RECEIVE" => Some("zero".into()),
    ///     _ => Some("x".into()),
    /// })
    /// .unwrap_err();
    /// assert!(err.to_string().contains("CONSUMER_MAX_RECEIVE"));
    /// ```
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let get = |name: &str| {
            lookup(name)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let required = |name: &'static str| get(name).ok_or(ConfigError::MissingVariable(name));
        let max_receive = match get("CONSUMER_MAX_RECEIVE") {
            None => DEFAULT_MAX_RECEIVE,
            Some(text) => text.parse::<u32>().ok().filter(|n| *n >= 1).ok_or(
                ConfigError::InvalidVariable {
                    name: "CONSUMER_MAX_RECEIVE",
                    expected: "a whole number of at least 1",
                },
            )?,
        };
        Ok(Config {
            idempotency_table: required("IDEMPOTENCY_TABLE")?,
            history_table: required("HISTORY_TABLE")?,
            dlq_url: required("CONSUMER_DLQ_URL")?,
            max_receive,
        })
    }

    /// Reads the process environment ([`Config::from_lookup`]).
    ///
    /// ```
    /// if std::env::var_os("IDEMPOTENCY_TABLE").is_none() {
    ///     assert!(cqrs_consumer::Config::from_env().is_err());
    /// }
    /// ```
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }
}

/// A message of the batch, read.
struct Incoming<'m> {
    position: usize,
    message: &'m SqsMessage,
    group: String,
    read: Read,
}

/// What a body held.
enum Read {
    /// A change event; `state` is missing when it came as a reference (`stateref`).
    Event(Box<Body>),
    /// Not a change event: why.
    Malformed(String),
}

/// The parts of an event body the runtime works with.
struct Body {
    value: Value,
    id: String,
    pk: String,
    sk: String,
    version: i64,
    entity: String,
    ttl_removal: bool,
    needs_state: bool,
    marker_key: String,
}

/// Reads a message body (`consumer`: for the marker key).
fn read_body(consumer: &str, body: &str) -> Read {
    let value: Value = match serde_json::from_str(body) {
        Ok(value) => value,
        Err(e) => return Read::Malformed(format!("the body is not JSON: {e}")),
    };
    let text = |pointer: &str| value.pointer(pointer).and_then(Value::as_str);
    let (Some(id), Some(pk), Some(sk), Some(entity)) = (
        text("/id"),
        text("/data/pk"),
        text("/data/sk"),
        text("/entity"),
    ) else {
        return Read::Malformed(
            "the body is no change event (id, entity, data.pk or data.sk missing)".into(),
        );
    };
    let Some(version) = value.pointer("/data/version").and_then(Value::as_i64) else {
        return Read::Malformed("the body is no change event (data.version missing)".into());
    };
    let needs_state = value.pointer("/data/state").is_none_or(Value::is_null);
    if needs_state && text("/stateref") != Some("history") {
        return Read::Malformed(
            "the event has no data.state and no stateref \"history\" to read it from".into(),
        );
    }
    if !needs_state && let Err(e) = serde_json::from_value::<ChangeEvent>(value.clone()) {
        return Read::Malformed(format!("the body is no change event: {e}"));
    }
    let ttl_removal = value.get("removal").and_then(Value::as_str) == Some("ttl");
    Read::Event(Box::new(Body {
        id: id.to_string(),
        pk: pk.to_string(),
        sk: sk.to_string(),
        version,
        entity: entity.to_string(),
        ttl_removal,
        needs_state,
        marker_key: cqrs_keys::consumer_marker_key(consumer, pk, sk),
        value,
    }))
}

/// The event and state of a complete body.
fn event_of(value: Value) -> Result<(ChangeEvent, Item), String> {
    let state = value
        .pointer("/data/state")
        .cloned()
        .ok_or_else(|| "no data.state".to_string())?;
    let item: Item = serde_json::from_value(state).map_err(|e| format!("data.state: {e}"))?;
    let event: ChangeEvent =
        serde_json::from_value(value).map_err(|e| format!("no change event: {e}"))?;
    Ok((event, item))
}

/// How the handling of one version ended.
enum Outcome {
    /// Handled and the marker moved (or found further).
    Handled,
    /// Report the message (and the item's later ones).
    Retry,
    /// Parked: the item's later messages wait behind this version.
    Parked(i64),
    /// The message itself was parked (at version `.0`): the item's later messages wait behind it.
    MessageParked(i64),
}

/// What stops the rest of an item's messages in this batch.
#[derive(Clone, Copy)]
enum Stop {
    Retry,
    HeldBehind(i64),
}

/// One group's work: its counts and the positions / ids of the messages to report.
#[derive(Default)]
struct GroupResult {
    counts: BatchCounts,
    report: Vec<(usize, String)>,
}

impl Runtime {
    /// `consumer` on `feed`'s model, reading missing versions from `history`, its markers in
    /// `markers`, parking with `park`; `max_receive` [`DEFAULT_MAX_RECEIVE`].
    ///
    /// ```
    /// use cqrs_consumer::{ConsumerError, Delivered, Runtime, from_fn};
    /// let runtime = Runtime::new(
    ///     from_fn("c", |_d: Delivered| async { Ok::<(), ConsumerError>(()) }),
    ///     cqrs_events::Feed::new(cqrs_model::Model::example(), "urn:cqrs:shop"),
    ///     Vec::<cqrs_item::Item>::new(),
    ///     cqrs_consumer::marker::MemoryMarkers::default(),
    ///     cqrs_consumer::park::MemoryPark::default(),
    /// );
    /// assert_eq!(runtime.consumer_name(), "c");
    /// ```
    pub fn new(
        consumer: impl Consumer + 'static,
        feed: Feed,
        history: impl HistoryReader + 'static,
        markers: impl MarkerStore + 'static,
        park: impl Park + 'static,
    ) -> Self {
        Runtime {
            consumer: Arc::new(consumer),
            feed,
            history: Arc::new(history),
            markers: Arc::new(markers),
            park: Arc::new(park),
            max_receive: DEFAULT_MAX_RECEIVE,
        }
    }

    /// Sets the attempt on which a `Retry` parks the event (at least 1).
    ///
    /// ```
    /// # use cqrs_consumer::{ConsumerError, Delivered, Runtime, from_fn};
    /// # let runtime = Runtime::new(from_fn("c", |_d: Delivered| async { Ok::<(), ConsumerError>(()) }),
    /// #     cqrs_events::Feed::new(cqrs_model::Model::example(), "s"), Vec::<cqrs_item::Item>::new(),
    /// #     cqrs_consumer::marker::MemoryMarkers::default(), cqrs_consumer::park::MemoryPark::default());
    /// assert_eq!(runtime.with_max_receive(0).max_receive(), 1);
    /// ```
    pub fn with_max_receive(mut self, max_receive: u32) -> Self {
        self.max_receive = max_receive.max(1);
        self
    }

    /// The attempt on which a `Retry` parks the event.
    ///
    /// ```
    /// # use cqrs_consumer::{ConsumerError, Delivered, Runtime, from_fn};
    /// # let runtime = Runtime::new(from_fn("c", |_d: Delivered| async { Ok::<(), ConsumerError>(()) }),
    /// #     cqrs_events::Feed::new(cqrs_model::Model::example(), "s"), Vec::<cqrs_item::Item>::new(),
    /// #     cqrs_consumer::marker::MemoryMarkers::default(), cqrs_consumer::park::MemoryPark::default());
    /// assert_eq!(runtime.max_receive(), 5);
    /// ```
    pub fn max_receive(&self) -> u32 {
        self.max_receive
    }

    /// The consumer's name.
    ///
    /// ```
    /// # use cqrs_consumer::{ConsumerError, Delivered, Runtime, from_fn};
    /// # let runtime = Runtime::new(from_fn("search", |_d: Delivered| async { Ok::<(), ConsumerError>(()) }),
    /// #     cqrs_events::Feed::new(cqrs_model::Model::example(), "s"), Vec::<cqrs_item::Item>::new(),
    /// #     cqrs_consumer::marker::MemoryMarkers::default(), cqrs_consumer::park::MemoryPark::default());
    /// assert_eq!(runtime.consumer_name(), "search");
    /// ```
    pub fn consumer_name(&self) -> &str {
        self.consumer.name()
    }

    /// Handles one batch and answers the messages to deliver again.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// # use cqrs_consumer::{ConsumerError, Delivered, Runtime, from_fn};
    /// # let runtime = Runtime::new(from_fn("c", |_d: Delivered| async { Ok::<(), ConsumerError>(()) }),
    /// #     cqrs_events::Feed::new(cqrs_model::Model::example(), "s"), Vec::<cqrs_item::Item>::new(),
    /// #     cqrs_consumer::marker::MemoryMarkers::default(), cqrs_consumer::park::MemoryPark::default());
    /// let answer = runtime.handle(Default::default()).await;
    /// assert!(answer.batch_item_failures.is_empty());
    /// # }
    /// ```
    pub async fn handle(&self, event: SqsEvent) -> BatchResponse {
        self.handle_counted(event).await.0
    }

    /// [`Runtime::handle`], also answering what became of the messages; logs the batch summary
    /// and writes the [`metrics`] line.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// # use cqrs_consumer::{ConsumerError, Delivered, Runtime, from_fn};
    /// # let runtime = Runtime::new(from_fn("c", |_d: Delivered| async { Ok::<(), ConsumerError>(()) }),
    /// #     cqrs_events::Feed::new(cqrs_model::Model::example(), "s"), Vec::<cqrs_item::Item>::new(),
    /// #     cqrs_consumer::marker::MemoryMarkers::default(), cqrs_consumer::park::MemoryPark::default());
    /// let (answer, counts) = runtime.handle_counted(Default::default()).await;
    /// assert_eq!(counts.retried, answer.batch_item_failures.len());
    /// # }
    /// ```
    pub async fn handle_counted(&self, event: SqsEvent) -> (BatchResponse, BatchCounts) {
        let started = Instant::now();
        let now = Utc::now();
        let name = self.consumer.name().to_string();
        let messages = &event.records;

        // 1. Read every body; group by message group, in batch order.
        let mut groups: BTreeMap<usize, Vec<Incoming<'_>>> = BTreeMap::new();
        let mut group_of: HashMap<String, usize> = HashMap::new();
        for (position, message) in messages.iter().enumerate() {
            let read = read_body(&name, &message.body);
            let group = message
                .attributes
                .message_group_id
                .clone()
                .or_else(|| match &read {
                    Read::Event(body) => Some(cqrs_keys::member_token(&body.pk, &body.sk)),
                    Read::Malformed(_) => None,
                })
                .unwrap_or_else(|| message.message_id.clone());
            let first = *group_of.entry(group.clone()).or_insert(position);
            groups.entry(first).or_default().push(Incoming {
                position,
                message,
                group,
                read,
            });
        }

        // 2. The markers of every item of the batch, in one consistent read.
        let mut keys: Vec<String> = groups
            .values()
            .flatten()
            .filter_map(|m| match &m.read {
                Read::Event(body) => Some(body.marker_key.clone()),
                Read::Malformed(_) => None,
            })
            .collect();
        keys.sort();
        keys.dedup();
        let mut results: Vec<GroupResult> = Vec::new();
        match self.markers.read(&keys).await {
            Ok(markers) => {
                // 3. Per item in order, items concurrently.
                let markers = &markers;
                results = futures::future::join_all(
                    groups.values().map(|group| self.group(group, markers, now)),
                )
                .await;
            }
            Err(error) => {
                tracing::error!(%error, consumer = %name, "the markers could not be read: every message of the batch is delivered again");
                results.push(GroupResult {
                    counts: BatchCounts::default(),
                    report: messages
                        .iter()
                        .enumerate()
                        .map(|(p, m)| (p, m.message_id.clone()))
                        .collect(),
                });
            }
        }

        // 4. The answer, the summary, the metrics.
        let mut counts = BatchCounts {
            messages: messages.len(),
            lag_max_ms: metrics::lag_max(messages.iter().filter_map(SqsMessage::sent), now),
            ..BatchCounts::default()
        };
        let mut report: Vec<(usize, String)> = Vec::new();
        for result in results {
            let c = result.counts;
            counts.handled += c.handled;
            counts.duplicates += c.duplicates;
            counts.filtered += c.filtered;
            counts.gaps_filled += c.gaps_filled;
            counts.gaps_skipped += c.gaps_skipped;
            counts.parked += c.parked;
            report.extend(result.report);
        }
        report.sort();
        counts.retried = report.len();
        counts.duration = started.elapsed();
        tracing::info!(
            consumer = %name,
            messages = counts.messages,
            handled = counts.handled,
            duplicates = counts.duplicates,
            filtered = counts.filtered,
            gaps_filled = counts.gaps_filled,
            gaps_skipped = counts.gaps_skipped,
            parked = counts.parked,
            retried = counts.retried,
            lag_max_ms = counts.lag_max_ms,
            "batch"
        );
        metrics::emit(&counts, &name);
        (
            BatchResponse::failing(report.into_iter().map(|(_, id)| id)),
            counts,
        )
    }

    /// One item's messages, in order.
    async fn group(
        &self,
        group: &[Incoming<'_>],
        read: &HashMap<String, Marker>,
        now: chrono::DateTime<Utc>,
    ) -> GroupResult {
        let mut result = GroupResult::default();
        let mut markers: HashMap<String, Marker> = HashMap::new();
        let mut stop: Option<Stop> = None;
        for incoming in group {
            let message = incoming.message;
            let attempt = message.attempt();
            if let Some(Stop::Retry) = stop {
                result
                    .report
                    .push((incoming.position, message.message_id.clone()));
                continue;
            }
            let body = match &incoming.read {
                Read::Malformed(reason) => {
                    tracing::error!(consumer = %self.consumer.name(), message_id = %message.message_id, %reason, "malformed message: parked");
                    let parked = Parked::new(
                        self.consumer.name(),
                        message.body.clone(),
                        incoming.group.clone(),
                        crate::park::park_dedup_id("malformed", &message.message_id),
                        ReasonKind::Malformed,
                        reason.clone(),
                        attempt,
                    );
                    match self.park.park(&parked).await {
                        Ok(()) => result.counts.parked += 1,
                        Err(error) => {
                            tracing::error!(%error, "parking failed: the message is delivered again");
                            result
                                .report
                                .push((incoming.position, message.message_id.clone()));
                        }
                    }
                    continue;
                }
                Read::Event(body) => body,
            };
            if !self.consumer.takes(&body.entity) {
                result.counts.filtered += 1;
                continue;
            }
            let marker = markers
                .entry(body.marker_key.clone())
                .or_insert_with(|| read.get(&body.marker_key).cloned().unwrap_or_default());
            if marker.is_duplicate(body.version, body.ttl_removal) {
                result.counts.duplicates += 1;
                continue;
            }
            // The parked version itself, delivered again without a redrive (the invocation that
            // parked it crashed after its work, or timed out): it waits in the dead-letter queue
            // for its redrive, so it is neither handled nor parked again here.
            if marker.held == Some(body.version) && !is_redriven(message) {
                tracing::warn!(consumer = %self.consumer.name(), event_id = %body.id, version = body.version, "delivered again while parked: acknowledged, it waits for its redrive");
                result.counts.duplicates += 1;
                continue;
            }
            let held = match stop {
                Some(Stop::HeldBehind(v)) => Some(v),
                _ => marker.held.filter(|h| *h != body.version),
            };
            if let Some(held) = held {
                match self
                    .park_message(
                        incoming,
                        body,
                        ReasonKind::Held,
                        format!("held behind v{held}"),
                    )
                    .await
                {
                    Ok(()) => result.counts.parked += 1,
                    Err(()) => {
                        result
                            .report
                            .push((incoming.position, message.message_id.clone()));
                        stop = Some(Stop::Retry);
                    }
                }
                continue;
            }
            // A gap: the missing versions first, from the history table.
            if let Some(applied) = marker.applied {
                let upto = if body.ttl_removal {
                    body.version
                } else {
                    body.version - 1
                };
                if upto > applied {
                    match self
                        .fill(incoming, marker, applied, upto, now, &mut result.counts)
                        .await
                    {
                        Outcome::Handled => {}
                        Outcome::MessageParked(v) => {
                            stop = Some(Stop::HeldBehind(v));
                            continue;
                        }
                        Outcome::Retry => {
                            result
                                .report
                                .push((incoming.position, message.message_id.clone()));
                            stop = Some(Stop::Retry);
                            continue;
                        }
                        Outcome::Parked(v) => {
                            match self
                                .park_message(
                                    incoming,
                                    body,
                                    ReasonKind::Held,
                                    format!("held behind v{v}"),
                                )
                                .await
                            {
                                Ok(()) => {
                                    result.counts.parked += 1;
                                    stop = Some(Stop::HeldBehind(v));
                                }
                                Err(()) => {
                                    // Delivered again, and the item's later messages with it,
                                    // so that they reach the dead-letter queue in order.
                                    result
                                        .report
                                        .push((incoming.position, message.message_id.clone()));
                                    stop = Some(Stop::Retry);
                                }
                            }
                            continue;
                        }
                    }
                }
            }
            // The event itself.
            let outcome = match self.complete(incoming, body).await {
                Ok((event, item)) => {
                    let delivered = self.delivered(event, item, message, false, now, body);
                    self.attempt(
                        &delivered,
                        &incoming.group,
                        &message.body,
                        marker,
                        &mut result.counts,
                    )
                    .await
                }
                Err(Incomplete::Retry) => {
                    self.exhausted_or_retry(
                        incoming,
                        body,
                        "the history table could not be read for the event's state",
                        &mut result.counts,
                    )
                    .await
                }
                Err(Incomplete::Malformed(reason)) => {
                    match self
                        .park_message(incoming, body, ReasonKind::Malformed, reason)
                        .await
                    {
                        Ok(()) => {
                            result.counts.parked += 1;
                            Outcome::Handled
                        }
                        Err(()) => Outcome::Retry,
                    }
                }
            };
            match outcome {
                Outcome::Handled => {}
                Outcome::Retry => {
                    result
                        .report
                        .push((incoming.position, message.message_id.clone()));
                    stop = Some(Stop::Retry);
                }
                Outcome::Parked(v) | Outcome::MessageParked(v) => stop = Some(Stop::HeldBehind(v)),
            }
        }
        result.counts.retried = result.report.len();
        result
    }

    /// The message's event with its state (read from the history table for a `stateref` event).
    async fn complete(
        &self,
        incoming: &Incoming<'_>,
        body: &Body,
    ) -> Result<(ChangeEvent, Item), Incomplete> {
        let mut value = body.value.clone();
        if body.needs_state {
            let key = HistoryKey::new(body.pk.clone(), body.sk.clone(), body.version);
            let found = self
                .history
                .read_versions(std::slice::from_ref(&key))
                .await
                .map_err(|error| {
                    tracing::warn!(%error, message_id = %incoming.message.message_id, "reading the state of a stateref event");
                    Incomplete::Retry
                })?;
            let Some(version) = found.into_iter().next() else {
                return Err(Incomplete::Malformed(format!(
                    "the event was sent without its state (stateref) and version {} of {}/{} is not in the history table",
                    body.version, body.pk, body.sk
                )));
            };
            let state = serde_json::to_value(version.into_data_item())
                .map_err(|e| Incomplete::Malformed(format!("the history row: {e}")))?;
            if let Some(data) = value.get_mut("data").and_then(Value::as_object_mut) {
                data.insert("state".into(), state);
            }
        }
        event_of(value).map_err(Incomplete::Malformed)
    }

    /// The [`Delivered`] of `event`.
    fn delivered(
        &self,
        event: ChangeEvent,
        item: Item,
        message: &SqsMessage,
        filled: bool,
        now: chrono::DateTime<Utc>,
        body: &Body,
    ) -> Delivered {
        let ttl_removal = event.removal == Some(Removal::Ttl);
        let write = MarkerWrite::new(body.marker_key.clone(), event.itemversion)
            .ttl_removal(ttl_removal)
            .item_ttl(item.ttl);
        let redriven = is_redriven(message);
        Delivered {
            attempt: message.attempt(),
            sent: message.sent().unwrap_or(now),
            message_id: (!filled).then(|| message.message_id.clone()),
            filled,
            redriven: redriven && !filled,
            replayed: message.string_attribute(REPLAYED_ATTRIBUTE).is_some() && !filled,
            marker: self.markers.table().map(|t| (t.to_string(), write)),
            via: message.message_id.clone(),
            event,
            item,
        }
    }

    /// Hands `delivered` to the consumer; moves the marker, or parks, or asks for a retry.
    async fn attempt(
        &self,
        delivered: &Delivered,
        group: &str,
        body: &str,
        marker: &mut Marker,
        counts: &mut BatchCounts,
    ) -> Outcome {
        let event = &delivered.event;
        let ttl_removal = event.removal == Some(Removal::Ttl);
        let key =
            cqrs_keys::consumer_marker_key(self.consumer.name(), &event.data.pk, &event.data.sk);
        let (kind, reason) = match self.consumer.handle(delivered).await {
            Ok(()) => {
                let write = MarkerWrite::new(key, event.itemversion)
                    .ttl_removal(ttl_removal)
                    .item_ttl(delivered.item.ttl);
                return match self.markers.apply(&write).await {
                    Ok(_) => {
                        counts.handled += 1;
                        *marker = Marker {
                            applied: Some(event.itemversion),
                            ttl_removed: ttl_removal,
                            held: None,
                            held_reason: None,
                        };
                        Outcome::Handled
                    }
                    Err(error) => {
                        tracing::error!(%error, event_id = %event.id, "handled, but the marker could not be written: delivered again");
                        Outcome::Retry
                    }
                };
            }
            Err(ConsumerError::Retry(error)) if delivered.attempt < self.max_receive => {
                tracing::warn!(%error, event_id = %event.id, attempt = delivered.attempt, "the consumer asks for a retry");
                return Outcome::Retry;
            }
            Err(ConsumerError::Retry(error)) => (
                ReasonKind::RetriesExhausted,
                format!("after {} attempts: {error}", delivered.attempt),
            ),
            Err(ConsumerError::Poison { reason }) => (ReasonKind::Poison, reason),
        };
        let parked = Parked::new(
            self.consumer.name(),
            if delivered.filled {
                serde_json::to_string(event).unwrap_or_default()
            } else {
                body.to_string()
            },
            group,
            crate::park::park_dedup_id(&event.id, &delivered.via),
            kind,
            reason.clone(),
            delivered.attempt,
        );
        tracing::error!(event_id = %event.id, subject = %event.subject, version = event.itemversion, kind = kind.as_str(), %reason, "parked");
        if let Err(error) = self.park.park(&parked).await {
            tracing::error!(%error, event_id = %event.id, "parking failed: delivered again");
            return Outcome::Retry;
        }
        counts.parked += 1;
        let held_reason = format!("{}: {reason}", kind.as_str());
        if let Err(error) = self
            .markers
            .hold(&key, event.itemversion, &held_reason)
            .await
        {
            tracing::error!(%error, event_id = %event.id, "parked, but the marker could not be held: a later version fills the gap from the history table");
        }
        if marker.held.is_none() {
            marker.held = Some(event.itemversion);
            marker.held_reason = Some(held_reason);
        }
        Outcome::Parked(event.itemversion)
    }

    /// Handles the versions `applied + 1 ..= upto` of the message's item from the history table.
    async fn fill(
        &self,
        incoming: &Incoming<'_>,
        marker: &mut Marker,
        applied: i64,
        upto: i64,
        now: chrono::DateTime<Utc>,
        counts: &mut BatchCounts,
    ) -> Outcome {
        let Read::Event(body) = &incoming.read else {
            return Outcome::Handled;
        };
        let keys: Vec<HistoryKey> = (applied.max(1)..=upto)
            .map(|v| HistoryKey::new(body.pk.clone(), body.sk.clone(), v))
            .collect();
        let found = match self.history.read_versions(&keys).await {
            Ok(found) => found,
            Err(error) => {
                tracing::warn!(%error, "reading the missing versions from the history table");
                return self
                    .exhausted_or_retry(
                        incoming,
                        body,
                        "the history table could not be read to fill a gap",
                        counts,
                    )
                    .await;
            }
        };
        let by_version: HashMap<i64, Item> = found.into_iter().map(|i| (i.version, i)).collect();
        for version in applied + 1..=upto {
            let Some(row) = by_version.get(&version) else {
                tracing::error!(consumer = %self.consumer.name(), pk = %body.pk, sk = %body.sk, version, "a missing version is not in the history table either: skipped");
                counts.gaps_skipped += 1;
                continue;
            };
            let Some(event) = self
                .feed
                .version_event(row, by_version.get(&(version - 1)), now)
            else {
                tracing::error!(pk = %body.pk, sk = %body.sk, version, "a missing version makes no event (no entity of the model): skipped");
                counts.gaps_skipped += 1;
                continue;
            };
            let item = row.clone().into_data_item();
            let delivered = self.delivered(event, item, incoming.message, true, now, body);
            match self
                .attempt(&delivered, &incoming.group, "", marker, counts)
                .await
            {
                Outcome::Handled => counts.gaps_filled += 1,
                other => return other,
            }
        }
        Outcome::Handled
    }

    /// A transient failure of the runtime itself (history read): delivered again, or parked
    /// (`retries-exhausted`) on the last attempt.
    async fn exhausted_or_retry(
        &self,
        incoming: &Incoming<'_>,
        body: &Body,
        what: &str,
        counts: &mut BatchCounts,
    ) -> Outcome {
        let attempt = incoming.message.attempt();
        if attempt < self.max_receive {
            return Outcome::Retry;
        }
        match self
            .park_message(
                incoming,
                body,
                ReasonKind::RetriesExhausted,
                format!("after {attempt} attempts: {what}"),
            )
            .await
        {
            Ok(()) => {
                counts.parked += 1;
                if let Err(error) = self
                    .markers
                    .hold(&body.marker_key, body.version, what)
                    .await
                {
                    tracing::error!(%error, event_id = %body.id, "parked, but the marker could not be held");
                }
                Outcome::MessageParked(body.version)
            }
            Err(()) => Outcome::Retry,
        }
    }

    /// Parks the message as it came.
    async fn park_message(
        &self,
        incoming: &Incoming<'_>,
        body: &Body,
        kind: ReasonKind,
        reason: String,
    ) -> Result<(), ()> {
        let attempt = incoming.message.attempt();
        tracing::error!(consumer = %self.consumer.name(), event_id = %body.id, version = body.version, kind = kind.as_str(), %reason, "parked");
        let parked = Parked::new(
            self.consumer.name(),
            incoming.message.body.clone(),
            incoming.group.clone(),
            crate::park::park_dedup_id(&body.id, &incoming.message.message_id),
            kind,
            reason,
            attempt,
        );
        self.park.park(&parked).await.map_err(|error| {
            tracing::error!(%error, event_id = %body.id, "parking failed: delivered again");
        })
    }
}

/// Why an event's state could not be completed.
enum Incomplete {
    Retry,
    Malformed(String),
}

/// `lookup`, where `CONSUMER_DLQ_URL` and `CONSUMER_MAX_RECEIVE`, when absent, are read as
/// `CONSUMER_DLQ_URL_<NAME>` and `CONSUMER_MAX_RECEIVE_<NAME>` (`NAME`: `consumer` upper-cased, `-`
/// as `_`): a local stack runs every function under one environment (`cargo lambda watch`), so
/// it names each consumer's variables.
fn named_fallback<'a>(
    consumer: &str,
    lookup: &'a impl Fn(&str) -> Option<String>,
) -> impl Fn(&str) -> Option<String> + 'a {
    let suffix = consumer.to_ascii_uppercase().replace('-', "_");
    move |name: &str| {
        lookup(name).or_else(|| match name {
            "CONSUMER_DLQ_URL" | "CONSUMER_MAX_RECEIVE" => lookup(&format!("{name}_{suffix}")),
            _ => None,
        })
    }
}

/// Why a consumer function cannot start: its cold start fails with this message.
///
/// ```
/// let e = cqrs_consumer::runtime::StartError::from(cqrs_store::ConfigError::MissingVariable("CONSUMER_DLQ_URL"));
/// assert_eq!(e.to_string(), "environment variable CONSUMER_DLQ_URL is missing or empty");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The service's `model.toml` does not check.
    #[error(transparent)]
    Model(#[from] cqrs_model::ModelErrors),
    /// A variable is missing or malformed (or the TLS context does not build).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The consumer's name is not declared in `model.toml` (nor one of the framework's
    /// [`FRAMEWORK_CONSUMERS`]): its resources, queue and role are deployed under the declared
    /// name, so a consumer named otherwise would read another queue's markers, or none.
    #[error(
        "the consumer `{0}` is not declared in model.toml: add `[consumers.{0}]`, or give from_fn the declared name"
    )]
    Undeclared(String),
}

/// The consumers the framework itself deploys, outside `model.toml`'s `[consumers]`: the realtime
/// API's publisher (`cqrs_realtime`, `RealtimeEvents=on`) and the change log
/// ([`crate::change_log`], `ChangeLog=on`). `cqrs template` refuses a route or consumer of
/// `model.toml` named as one of them.
///
/// ```
/// assert_eq!(cqrs_consumer::runtime::FRAMEWORK_CONSUMERS, ["realtime", "change-log"]);
/// ```
pub const FRAMEWORK_CONSUMERS: [&str; 2] = ["realtime", crate::change_log::NAME];

/// Whether a consumer named `name` may run with `model_text`: declared as `[consumers.<name>]`,
/// or one of [`FRAMEWORK_CONSUMERS`].
///
/// ```
/// use cqrs_consumer::runtime::{StartError, check_declared};
/// let model = "[consumers.order-audit]\n";
/// assert!(check_declared(model, "order-audit").is_ok());
/// assert!(check_declared(model, "realtime").is_ok());
/// let err = check_declared(model, "order-audti").unwrap_err();
/// assert!(matches!(err, StartError::Undeclared(ref name) if name == "order-audti"));
/// assert!(err.to_string().contains("[consumers.order-audti]"));
/// ```
pub fn check_declared(model_text: &str, name: &str) -> Result<(), StartError> {
    let model = cqrs_model::Model::parse(model_text)?;
    if model.consumer(name).is_some() || FRAMEWORK_CONSUMERS.contains(&name) {
        Ok(())
    } else {
        Err(StartError::Undeclared(name.to_string()))
    }
}

impl Runtime {
    /// The runtime of `consumer` as the function builds it at cold start: the model from
    /// `model_text`, the configuration ([`Config`]) and the clients (DynamoDB, SQS; region,
    /// credentials, endpoints, [`cqrs_store::client`]) through `lookup`. Builds only; nothing is
    /// sent. Locally, where every function shares one environment, `CONSUMER_DLQ_URL_<NAME>` and
    /// `CONSUMER_MAX_RECEIVE_<NAME>` stand in for the plain variables when they are absent
    /// (`NAME`: the consumer's name upper-cased, `-` as `_`).
    ///
    /// ```
    /// use cqrs_consumer::{ConsumerError, Delivered, Runtime, from_fn};
    /// let vars = [
    ///     ("AWS_REGION", "eu-west-1"), ("AWS_ACCESS_KEY_ID", "AKID"), ("AWS_SECRET_ACCESS_KEY", "s"),
    ///     ("IDEMPOTENCY_TABLE", "shop-idempotency"), ("HISTORY_TABLE", "shop-history"),
    /// ];
    /// let lookup = |name: &str| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string());
    /// let consumer = || from_fn("search", |_d: Delivered| async { Ok::<(), ConsumerError>(()) });
    /// let model = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../model.toml")).unwrap();
    /// let err = Runtime::from_lookup(&model, consumer(), lookup).err().unwrap();
    /// assert_eq!(err.to_string(), "environment variable CONSUMER_DLQ_URL is missing or empty");
    ///
    /// let with_dlq = |name: &str| match name {
    ///     "CONSUMER_DLQ_URL" => Some("https://sqs.eu-west-1.amazonaws.com/1/shop-search-dlq.fifo".to_string()),
    ///     _ => lookup(name),
    /// };
    /// let runtime = Runtime::from_lookup(&model, consumer(), with_dlq).unwrap();
    /// assert_eq!((runtime.consumer_name(), runtime.max_receive()), ("search", 5));
    /// assert!(Runtime::from_lookup("not a model [", consumer(), with_dlq).is_err());
    /// ```
    pub fn from_lookup(
        model_text: &str,
        consumer: impl Consumer + 'static,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, StartError> {
        use cqrs_store::client::{ClientEnv, http_client};
        let model = cqrs_model::Model::parse(model_text)?;
        let config = Config::from_lookup(named_fallback(consumer.name(), &lookup))?;
        let env = ClientEnv::from_lookup(&lookup)?;
        let http = http_client(env.tls_roots)?;
        let dynamo = env.client(http.clone());
        let sqs = crate::park::sqs_client(&env, http, &lookup);
        // The history reader is the store's; the consumer touches no command or data table.
        let store = cqrs_store::Store::new(
            dynamo.clone(),
            cqrs_store::Tables::new(
                "-",
                "-",
                config.history_table.clone(),
                config.idempotency_table.clone(),
            ),
        );
        Ok(Runtime::new(
            consumer,
            Feed::from_lookup(model, &lookup),
            store,
            crate::marker::DynamoMarkers::new(dynamo, config.idempotency_table.clone()),
            crate::park::SqsDeadLetter::new(sqs, config.dlq_url.clone()),
        )
        .with_max_receive(config.max_receive))
    }
}

/// The consumer function's `main`: `model_text` is the service's `model.toml` (the events of
/// filled versions are built from it, [`cqrs_events::Feed`], `source` from
/// `CQRS_EVENT_SOURCE`); configuration from the environment ([`Runtime::from_lookup`]: [`Config`],
/// the client's variables of [`cqrs_store::client`], the SQS endpoint from
/// `AWS_ENDPOINT_URL_SQS`).
///
/// ```no_run
/// // The service's src/bin/consumer-search.rs, where MODEL is `include_str!("../../model.toml")`.
/// # const MODEL: &str = "";
/// use cqrs_consumer::{ConsumerError, Delivered, from_fn};
/// #[tokio::main]
/// async fn main() -> Result<(), lambda_runtime::Error> {
///     let consumer = from_fn("search", |d: Delivered| async move {
///         println!("{}", d.event.subject);
///         Ok::<(), ConsumerError>(())
///     });
///     cqrs_consumer::run(MODEL, consumer).await
/// }
/// ```
///
/// # Errors
///
/// A model that does not check, a consumer whose name `model.toml` does not declare
/// ([`check_declared`]), a missing or malformed variable ([`StartError`]): the cold start fails and
/// says which.
pub async fn run(
    model_text: &str,
    consumer: impl Consumer + 'static,
) -> Result<(), lambda_runtime::Error> {
    use cqrs_store::client::InitClock;
    use lambda_runtime::{LambdaEvent, service_fn};

    let mut init = InitClock::start();
    cqrs_store::logging::init();
    init.lap("logging");
    check_declared(model_text, consumer.name())?;
    let runtime = Runtime::from_lookup(model_text, consumer, |name| std::env::var(name).ok())?;
    init.lap("config_and_clients");
    tracing::info!(consumer = %runtime.consumer_name(), max_receive = runtime.max_receive(), "consumer");
    init.log();
    let runtime = &runtime;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        Ok::<_, lambda_runtime::Error>(runtime.handle(event.payload).await)
    }))
    .await
}

/// Whether `message` came back from a dead-letter queue: `cqrs redrive consumer` marks it
/// `cqrs-redriven`, and a message the runtime parked keeps its `cqrs-parked-at` whatever moved it
/// back.
fn is_redriven(message: &SqsMessage) -> bool {
    message.string_attribute(REDRIVEN_ATTRIBUTE).is_some()
        || message.string_attribute("cqrs-parked-at").is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::from_fn;

    fn consumer(name: &'static str) -> impl Consumer + 'static {
        from_fn(name, |_d: Delivered| async { Ok::<(), ConsumerError>(()) })
    }

    /// The variables every consumer of a local stack shares (cargo lambda watch gives all functions
    /// one environment), `extra` added.
    fn shared(extra: &[(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        let mut vars = vec![
            ("AWS_REGION", "us-east-1"),
            ("AWS_ACCESS_KEY_ID", "local"),
            ("AWS_SECRET_ACCESS_KEY", "local"),
            ("IDEMPOTENCY_TABLE", "local-idempotency"),
            ("HISTORY_TABLE", "local-history"),
        ];
        vars.extend_from_slice(extra);
        move |name: &str| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    const MODEL: &str = "[consumers.order-audit]\n[consumers.search]\n";

    #[test]
    fn a_local_stack_names_each_consumers_queue_and_attempts_by_its_name() {
        let lookup = shared(&[
            (
                "CONSUMER_DLQ_URL_ORDER_AUDIT",
                "http://127.0.0.1:5000/123456789012/local-order-audit-dlq.fifo",
            ),
            ("CONSUMER_MAX_RECEIVE_ORDER_AUDIT", "3"),
            (
                "CONSUMER_DLQ_URL_SEARCH",
                "http://127.0.0.1:5000/123456789012/local-search-dlq.fifo",
            ),
        ]);
        let audit = Runtime::from_lookup(MODEL, consumer("order-audit"), &lookup).unwrap();
        assert_eq!(audit.max_receive(), 3);
        let search = Runtime::from_lookup(MODEL, consumer("search"), &lookup).unwrap();
        assert_eq!(search.max_receive(), DEFAULT_MAX_RECEIVE);
        // Another consumer's variables are not this one's.
        let err = Runtime::from_lookup(MODEL, consumer("other"), &lookup)
            .err()
            .unwrap();
        assert_eq!(
            err.to_string(),
            "environment variable CONSUMER_DLQ_URL is missing or empty"
        );
    }

    #[test]
    fn the_plain_variables_win_over_the_named_ones() {
        let lookup = shared(&[
            (
                "CONSUMER_DLQ_URL",
                "https://sqs.eu-west-1.amazonaws.com/1/shop-search-dlq.fifo",
            ),
            ("CONSUMER_MAX_RECEIVE", "4"),
            ("CONSUMER_MAX_RECEIVE_SEARCH", "zero"),
        ]);
        let search = Runtime::from_lookup(MODEL, consumer("search"), &lookup).unwrap();
        assert_eq!(search.max_receive(), 4);
    }
}
