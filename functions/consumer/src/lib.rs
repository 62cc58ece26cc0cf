//! Runs a service's consumer of change events (issue 39) from its SQS FIFO queue: in version order
//! per item, once per version, poison events parked with their reason.
//!
//! A service writes a [`Consumer`] (a name, the entities it takes, an async `handle`) and a binary
//! that hands it to [`run`]; the framework gives it one SQS FIFO queue fed by the service's SNS FIFO
//! topic (message group = the item, dedup id = the event id), a FIFO dead-letter queue and a Lambda
//! function. Per batch ([`Runtime::handle`]):
//!
//! - **Parse**: each body is a [`cqrs_events::ChangeEvent`] (raw delivery); one that is not is
//!   parked (`malformed`) and acknowledged. An event sent without its state (too big for SNS,
//!   extension `stateref: "history"`) gets it from the history table before the handler sees it.
//! - **Markers** ([`marker`]): one strongly consistent `BatchGetItem` reads the consumer's marker
//!   of every item of the batch (`applied` version, `held` version).
//! - **Per item, in order** (items concurrently):
//!   - a version at or below `applied` is a **duplicate**: acknowledged, not handled (the TTL
//!     removal of `applied`, a second event of that version with its own id, is handled once);
//!   - an item with a **held** (parked) version: the event is parked "held behind v{held}";
//!   - a **gap** (`version > applied + 1`): the missing versions are read from the history table
//!     and handled first (a version the history table lacks too is logged and counted,
//!     `GapsSkipped`); an item without a marker (the first event this consumer sees of it) is
//!     handled with no gap check;
//!   - **handled**: `Ok` moves the marker to the version (conditional: only forward);
//!     [`ConsumerError::Retry`] before the last attempt (`CONSUMER_MAX_RECEIVE`) reports this
//!     message and every later message of the item in the batch in `batchItemFailures` (other
//!     items go on); a `Retry` on the last attempt, or [`ConsumerError::Poison`], **parks** the
//!     event ([`park`]: the dead-letter queue, with its reason), holds the item and acknowledges;
//!     the item's later messages of the batch are parked "held behind".
//! - **Metrics** ([`metrics`]): one EMF line per batch, with `LagMax` (the age of the oldest event).
//!
//! The framework's own consumers: [`change_log`] (the change log, `ChangeLog=on`) and
//! `cqrs_realtime` (realtime to browsers, `RealtimeEvents=on`).
//!
//! For the operator: [`redrive`] moves a consumer's dead-letter queue back into its queue (`cqrs
//! redrive consumer`), [`replay`] feeds its queue from the history table (`cqrs replay`, a full
//! table scan).
//!
//! What a consumer may rely on: per-item order; at-least-once delivery with the effect once per
//! version through the marker (exactly once when the consumer commits
//! [`Delivered::marker_write`] in its own DynamoDB transaction); nothing dropped silently (a
//! message is handled, a duplicate, parked with its reason, or reported). No order across items.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use cqrs_consumer::{ConsumerError, Delivered, Runtime, from_fn};
//! use cqrs_consumer::{marker::MemoryMarkers, park::MemoryPark, sqs::{SqsEvent, SqsMessage}};
//!
//! let consumer = from_fn("printer", |delivered: Delivered| async move {
//!     println!("{} v{}", delivered.event.subject, delivered.event.itemversion);
//!     Ok::<(), ConsumerError>(())
//! });
//! let feed = cqrs_events::Feed::new(cqrs_model::Model::example(), "urn:cqrs:shop");
//! let runtime = Runtime::new(consumer, feed.clone(), Vec::<cqrs_item::Item>::new(), MemoryMarkers::default(), MemoryPark::default());
//!
//! let mut item = cqrs_item::Item::example().into_data_item();
//! item.entity = Some("product".into());
//! let event = feed.version_event(&item, None, chrono::Utc::now()).unwrap();
//! let message = SqsMessage { message_id: "m1".into(), body: serde_json::to_string(&event).unwrap(), ..Default::default() };
//! let batch = SqsEvent { records: vec![message.clone(), message] }; // delivered twice
//! let (answer, counts) = runtime.handle_counted(batch).await;
//! assert!(answer.batch_item_failures.is_empty());
//! assert_eq!((counts.handled, counts.duplicates), (1, 1));
//! # }
//! ```
#![forbid(unsafe_code)]
#![cfg_attr(
    not(test),
    warn(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

pub mod change_log;
pub mod marker;
pub mod metrics;
pub mod park;
pub mod redrive;
pub mod replay;
pub mod runtime;
pub mod sqs;
pub mod sync_target;

use std::future::Future;
use std::sync::Arc;

use aws_sdk_dynamodb::types::TransactWriteItem;
use chrono::{DateTime, Utc};
use cqrs_events::ChangeEvent;
use cqrs_item::Item;
use futures::future::{BoxFuture, FutureExt};

pub use metrics::BatchCounts;
pub use runtime::{Config, Runtime, run};
pub use sync_target::FromSyncTarget;

/// An error a consumer's handler may return, boxed.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A service's consumer of change events.
///
/// ```
/// use cqrs_consumer::{Consumer, ConsumerError, Delivered};
/// use futures::future::{BoxFuture, FutureExt};
///
/// struct SearchIndex;
/// impl Consumer for SearchIndex {
///     fn name(&self) -> &str { "search" }
///     fn entities(&self) -> Option<&[&str]> { Some(&["product"]) }
///     fn handle<'a>(&'a self, delivered: &'a Delivered) -> BoxFuture<'a, Result<(), ConsumerError>> {
///         async move {
///             if delivered.item.attributes.is_empty() {
///                 return Err(ConsumerError::poison("a product without attributes"));
///             }
///             Ok(())
///         }
///         .boxed()
///     }
/// }
/// assert_eq!(SearchIndex.name(), "search");
/// assert!(SearchIndex.takes("product") && !SearchIndex.takes("order"));
/// ```
pub trait Consumer: Send + Sync {
    /// The stable name: its queue, dead-letter queue and marker prefix
    /// ([`cqrs_keys::consumer_marker_key`]). Renaming a consumer starts it afresh.
    fn name(&self) -> &str;

    /// The entities it takes (the subscription's filter policy on `entity`); `None`: all.
    fn entities(&self) -> Option<&[&str]> {
        None
    }

    /// Handles one event. Called in version order per item, once per version after dedup (again
    /// only when it answered an error, or the marker write after it failed).
    fn handle<'a>(&'a self, delivered: &'a Delivered) -> BoxFuture<'a, Result<(), ConsumerError>>;

    /// Whether it takes events of `entity` ([`Consumer::entities`]).
    fn takes(&self, entity: &str) -> bool {
        self.entities()
            .is_none_or(|entities| entities.contains(&entity))
    }
}

impl<C: Consumer + ?Sized> Consumer for Arc<C> {
    fn name(&self) -> &str {
        (**self).name()
    }

    fn entities(&self) -> Option<&[&str]> {
        (**self).entities()
    }

    fn handle<'a>(&'a self, delivered: &'a Delivered) -> BoxFuture<'a, Result<(), ConsumerError>> {
        (**self).handle(delivered)
    }
}

/// Why a consumer did not handle an event.
///
/// ```
/// use cqrs_consumer::ConsumerError;
/// let e = ConsumerError::poison("price is negative");
/// assert_eq!(e.to_string(), "poison: price is negative");
/// let e = ConsumerError::retry(std::io::Error::other("search cluster away"));
/// assert_eq!(e.to_string(), "retry: search cluster away");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConsumerError {
    /// Transient: delivered again (with the item's later events of the batch), parked on the
    /// last attempt (`retries-exhausted`).
    #[error("retry: {0}")]
    Retry(BoxError),
    /// The event can never be handled: parked now (`poison`), the item's later events wait
    /// behind it until it is redriven.
    #[error("poison: {reason}")]
    Poison {
        /// Why (sent with the parked event).
        reason: String,
    },
}

impl ConsumerError {
    /// A transient failure.
    ///
    /// ```
    /// let e = cqrs_consumer::ConsumerError::retry("throttled");
    /// assert!(matches!(e, cqrs_consumer::ConsumerError::Retry(_)));
    /// ```
    pub fn retry(error: impl Into<BoxError>) -> Self {
        ConsumerError::Retry(error.into())
    }

    /// A permanent failure of this event.
    ///
    /// ```
    /// let e = cqrs_consumer::ConsumerError::poison("no such customer");
    /// assert!(matches!(e, cqrs_consumer::ConsumerError::Poison { .. }));
    /// ```
    pub fn poison(reason: impl Into<String>) -> Self {
        ConsumerError::Poison {
            reason: reason.into(),
        }
    }
}

/// One event as a consumer gets it.
///
/// ```
/// let feed = cqrs_events::Feed::new(cqrs_model::Model::example(), "urn:cqrs:shop");
/// let mut item = cqrs_item::Item::example().into_data_item();
/// item.entity = Some("product".into());
/// let event = feed.version_event(&item, None, chrono::Utc::now()).unwrap();
/// let delivered = cqrs_consumer::Delivered::new(event, item.clone());
/// assert_eq!(delivered.item, item);
/// assert_eq!(delivered.attempt, 1);
/// assert!(delivered.marker_write().is_none(), "not from a runtime");
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Delivered {
    /// The event.
    pub event: ChangeEvent,
    /// The version's state (the data table's form; read from the history table when the event
    /// was sent without it).
    pub item: Item,
    /// The message's receive count (1 on the first delivery).
    pub attempt: u32,
    /// When the queue received the message (now, when SQS did not say).
    pub sent: DateTime<Utc>,
    /// The SQS message id; `None` for a version read from the history table to fill a gap.
    pub message_id: Option<String>,
    /// The version was missing from the queue and read from the history table.
    pub filled: bool,
    /// The message came back from the dead-letter queue (`cqrs redrive`).
    pub redriven: bool,
    /// The message was sent by `cqrs replay`.
    pub replayed: bool,
    marker: Option<(String, marker::MarkerWrite)>,
    /// The SQS message that brought it (or, for a filled version, led to it).
    via: String,
}

impl Delivered {
    /// `event` with the state `item`, first attempt, sent now (tests, examples).
    ///
    /// ```
    /// # let feed = cqrs_events::Feed::new(cqrs_model::Model::example(), "urn:cqrs:shop");
    /// # let mut item = cqrs_item::Item::example().into_data_item();
    /// # item.entity = Some("product".into());
    /// # let event = feed.version_event(&item, None, chrono::Utc::now()).unwrap();
    /// let delivered = cqrs_consumer::Delivered::new(event, item);
    /// assert!(!delivered.filled && !delivered.redriven);
    /// ```
    pub fn new(event: ChangeEvent, item: Item) -> Self {
        Delivered {
            event,
            item,
            attempt: 1,
            sent: Utc::now(),
            message_id: None,
            filled: false,
            redriven: false,
            replayed: false,
            marker: None,
            via: String::new(),
        }
    }

    /// The marker's move to this version as a `TransactWriteItem`: a consumer writing to DynamoDB
    /// commits it with its own writes, so the effect and the marker land together (exactly once).
    /// When the transaction is cancelled by this item's condition (`ConditionalCheckFailed`,
    /// [`marker::already_applied`]), the version was applied already: answer `Ok`. `None` outside a runtime or when the markers are
    /// not in DynamoDB. The runtime's own marker write after `Ok` then finds it done.
    ///
    /// ```no_run
    /// # async fn handle(client: aws_sdk_dynamodb::Client, delivered: &cqrs_consumer::Delivered, mine: aws_sdk_dynamodb::types::TransactWriteItem) {
    /// let mut writes = vec![mine];
    /// writes.extend(delivered.marker_write());
    /// client.transact_write_items().set_transact_items(Some(writes)).send().await.unwrap();
    /// # }
    /// ```
    pub fn marker_write(&self) -> Option<TransactWriteItem> {
        let (table, write) = self.marker.as_ref()?;
        write.transact_item(table).ok()
    }
}

/// A [`Consumer`] made of a name and an async function ([`from_fn`]).
///
/// ```
/// use cqrs_consumer::{Consumer, ConsumerError, Delivered, from_fn};
/// let c = from_fn("audit", |_d: Delivered| async { Ok::<(), ConsumerError>(()) }).with_entities(&["order"]);
/// assert_eq!(c.entities(), Some(&["order"][..]));
/// ```
pub struct FnConsumer<F> {
    name: String,
    entities: Option<Vec<&'static str>>,
    f: F,
}

impl<F> FnConsumer<F> {
    /// Takes only events of `entities`.
    ///
    /// ```
    /// use cqrs_consumer::{Consumer, ConsumerError, Delivered, from_fn};
    /// let c = from_fn("a", |_d: Delivered| async { Ok::<(), ConsumerError>(()) }).with_entities(&["product"]);
    /// assert!(c.takes("product") && !c.takes("order"));
    /// ```
    pub fn with_entities(mut self, entities: &[&'static str]) -> Self {
        self.entities = Some(entities.to_vec());
        self
    }
}

/// A consumer named `name` that handles each event with `f` (given its own copy of the
/// [`Delivered`]).
///
/// ```
/// use cqrs_consumer::{Consumer, ConsumerError, Delivered, from_fn};
/// let consumer = from_fn("mailer", |delivered: Delivered| async move {
///     if delivered.event.event_type.ends_with(".deleted") {
///         return Err(ConsumerError::retry("mail server away"));
///     }
///     Ok(())
/// });
/// assert_eq!(consumer.name(), "mailer");
/// assert_eq!(consumer.entities(), None);
/// ```
pub fn from_fn<F, Fut>(name: impl Into<String>, f: F) -> FnConsumer<F>
where
    F: Fn(Delivered) -> Fut + Send + Sync,
    Fut: Future<Output = Result<(), ConsumerError>> + Send + 'static,
{
    FnConsumer {
        name: name.into(),
        entities: None,
        f,
    }
}

impl<F, Fut> Consumer for FnConsumer<F>
where
    F: Fn(Delivered) -> Fut + Send + Sync,
    Fut: Future<Output = Result<(), ConsumerError>> + Send + 'static,
{
    fn name(&self) -> &str {
        &self.name
    }

    fn entities(&self) -> Option<&[&str]> {
        self.entities.as_deref()
    }

    fn handle<'a>(&'a self, delivered: &'a Delivered) -> BoxFuture<'a, Result<(), ConsumerError>> {
        (self.f)(delivered.clone()).boxed()
    }
}
