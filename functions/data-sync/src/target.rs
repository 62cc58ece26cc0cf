//! Further sync targets: what runs for every projected version after the data and history tables
//! are written (the `up` handler of the TypeScript framework's data-sync), e.g. to feed a search
//! index, a SQL read model or a change log ([`crate::change_log::ChangeLog`]).
//!
//! A target's failure is the record's failure: the record is reported in `batchItemFailures`,
//! Lambda delivers it (and everything after it in the shard) again, and the data and history
//! writes, which are idempotent, are repeated along with every target. So targets see each version
//! **at least once** and must be idempotent (key their writes by item id and version). Within one
//! item, versions arrive in stream order; across items, concurrently.
//!
//! **On the way out.** A failing target holds back every item of its shard, the projection
//! included. A service's own targets move to consumers of the change events (`[consumers.<name>]`
//! in `model.toml`, `cqrs_consumer::FromSyncTarget` runs a target unchanged), each with its own
//! queue, dead-letter queue, lag alarm and redrive; [`crate::DataSync::with_target`] is deprecated
//! and goes in the next major version, after which data-sync projects and nothing else.

use chrono::{DateTime, Utc};
use cqrs_item::Item;
use cqrs_store::projection::DataWrite;
use futures::future::BoxFuture;

/// Any error of a target; its message goes into the log line of the failed record.
pub type TargetError = Box<dyn std::error::Error + Send + Sync>;

/// One version being projected, as targets see it.
///
/// ```
/// let change = cqrs_data_sync::Change::example();
/// assert_eq!(change.item.sk, "P001@1");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// The command item, `sk` with its version (use [`Item::into_data_item`] for the data-table
    /// form).
    pub item: Item,
    /// What the data-table write did. [`DataWrite::AlreadyCurrent`] happens for an out-of-order
    /// record *and* for a replay of a version that was written the first time, so it does not say
    /// that a newer version exists: a target that keeps only the latest state compares versions
    /// itself.
    pub data: DataWrite,
    /// The stream record's sequence number.
    pub sequence_number: String,
    /// The stream record's `eventID`.
    pub event_id: String,
    /// When DynamoDB wrote the version, to the second (the record's `ApproximateCreationDateTime`).
    pub approximate_creation: DateTime<Utc>,
}

impl Change {
    /// A change of [`Item::example`], for examples and tests.
    ///
    /// ```
    /// assert_eq!(cqrs_data_sync::Change::example().sequence_number, "100");
    /// ```
    pub fn example() -> Self {
        Change {
            item: Item::example(),
            data: DataWrite::Written,
            sequence_number: "100".into(),
            event_id: "event-1".into(),
            approximate_creation: DateTime::from_timestamp(1_767_225_600, 0).unwrap_or_default(),
        }
    }
}

/// A sync target: gets every projected version, in stream order per item.
///
/// ```
/// use std::sync::Mutex;
/// use cqrs_data_sync::{Change, SyncTarget, TargetError};
/// use futures::future::{BoxFuture, FutureExt};
///
/// /// Counts the versions of deleted items (a stand-in for a real read model).
/// #[derive(Default)]
/// struct Deletions(Mutex<u64>);
///
/// impl SyncTarget for Deletions {
///     fn name(&self) -> &str {
///         "deletions"
///     }
///     fn apply<'a>(&'a self, change: &'a Change) -> BoxFuture<'a, Result<(), TargetError>> {
///         async move {
///             if change.item.is_deleted {
///                 *self.0.lock().unwrap() += 1;
///             }
///             Ok(())
///         }
///         .boxed()
///     }
/// }
///
/// # async fn wire(store: cqrs_store::Store) {
/// #[allow(deprecated)] // a target's way out: cqrs_consumer::FromSyncTarget
/// let sync = cqrs_data_sync::DataSync::new(store).with_target(Deletions::default());
/// # }
/// ```
pub trait SyncTarget: Send + Sync {
    /// A short name for logs (`change-log`, `search-index`, …).
    fn name(&self) -> &str;

    /// Applies one version. An error fails the record (it will be delivered again).
    fn apply<'a>(&'a self, change: &'a Change) -> BoxFuture<'a, Result<(), TargetError>>;
}

/// A shared target, e.g. one a test keeps a handle on to inspect afterwards.
impl<T: SyncTarget + ?Sized> SyncTarget for std::sync::Arc<T> {
    fn name(&self) -> &str {
        (**self).name()
    }

    fn apply<'a>(&'a self, change: &'a Change) -> BoxFuture<'a, Result<(), TargetError>> {
        (**self).apply(change)
    }
}
