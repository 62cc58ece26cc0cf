//! The writes data-sync needs, behind a trait: the handler takes a `dyn ProjectionWriter`,
//! production passes [`cqrs_store::Store`], tests wrap it (e.g. with a fault injector) without
//! touching the handler.

use cqrs_item::Item;
use cqrs_store::{
    Store, StoreError,
    parked::{ParkWrite, ParkedRecord},
    projection::{DataWrite, HistoryWrite},
};
use futures::future::{BoxFuture, FutureExt};
use futures::stream::StreamExt;

/// The two writes of every projected version (history for every version of a batch, at once;
/// data once per item, its newest version), and the write that parks a record that can never be
/// projected. All must be idempotent and order-insensitive: a stream delivers records at least
/// once, and a retried batch replays records already applied.
///
/// [`Store`] implements it with [`Store::put_data_if_newer`], [`Store::put_history`],
/// [`Store::put_history_batch`] and [`Store::park`].
///
/// ```
/// use cqrs_item::Item;
/// use cqrs_store::{StoreError, parked::{ParkWrite, ParkedRecord}, projection::{DataWrite, HistoryWrite}};
/// use cqrs_data_sync::ProjectionWriter;
/// use futures::future::{BoxFuture, FutureExt};
///
/// /// Accepts everything and writes nothing (e.g. a dry run).
/// struct DryRun;
///
/// impl ProjectionWriter for DryRun {
///     fn put_data_if_newer<'a>(&'a self, _: &'a Item) -> BoxFuture<'a, Result<DataWrite, StoreError>> {
///         async { Ok(DataWrite::Written) }.boxed()
///     }
///     fn put_history<'a>(&'a self, _: &'a Item) -> BoxFuture<'a, Result<HistoryWrite, StoreError>> {
///         async { Ok(HistoryWrite::Written) }.boxed()
///     }
///     fn park<'a>(&'a self, _: &'a ParkedRecord) -> BoxFuture<'a, Result<ParkWrite, StoreError>> {
///         async { Ok(ParkWrite::Parked) }.boxed()
///     }
/// }
/// let sync = cqrs_data_sync::DataSync::new(DryRun);
/// ```
pub trait ProjectionWriter: Send + Sync {
    /// Writes the data-table form of the command item `item` unless the data table already holds
    /// this version or a newer one.
    fn put_data_if_newer<'a>(
        &'a self,
        item: &'a Item,
    ) -> BoxFuture<'a, Result<DataWrite, StoreError>>;

    /// Writes the command item `item` into the history table, once.
    fn put_history<'a>(&'a self, item: &'a Item)
    -> BoxFuture<'a, Result<HistoryWrite, StoreError>>;

    /// Writes `record` into the parked table, once. An error means the record is not parked: it
    /// is reported for redelivery, never acknowledged.
    fn park<'a>(&'a self, record: &'a ParkedRecord)
    -> BoxFuture<'a, Result<ParkWrite, StoreError>>;

    /// Writes every version of a batch into the history table and answers for each, in order,
    /// what [`ProjectionWriter::put_history`] answers. The default calls `put_history` for each
    /// version, [`crate::DEFAULT_CONCURRENCY`] at a time (so a wrapper that injects faults per
    /// version keeps working); [`Store`] reads and writes whole batches
    /// ([`Store::put_history_batch`]).
    fn put_history_batch<'a>(
        &'a self,
        items: &'a [Item],
    ) -> BoxFuture<'a, Vec<Result<HistoryWrite, StoreError>>> {
        futures::stream::iter(items)
            .map(|item| self.put_history(item))
            .buffered(crate::DEFAULT_CONCURRENCY)
            .collect()
            .boxed()
    }
}

impl ProjectionWriter for Store {
    fn put_data_if_newer<'a>(
        &'a self,
        item: &'a Item,
    ) -> BoxFuture<'a, Result<DataWrite, StoreError>> {
        Box::pin(Store::put_data_if_newer(self, item))
    }

    fn put_history<'a>(
        &'a self,
        item: &'a Item,
    ) -> BoxFuture<'a, Result<HistoryWrite, StoreError>> {
        Box::pin(Store::put_history(self, item))
    }

    fn park<'a>(
        &'a self,
        record: &'a ParkedRecord,
    ) -> BoxFuture<'a, Result<ParkWrite, StoreError>> {
        Box::pin(Store::park(self, record))
    }

    fn put_history_batch<'a>(
        &'a self,
        items: &'a [Item],
    ) -> BoxFuture<'a, Vec<Result<HistoryWrite, StoreError>>> {
        Box::pin(Store::put_history_batch(self, items))
    }
}

/// A shared writer, e.g. one a test keeps a handle on to inspect afterwards.
impl<W: ProjectionWriter + ?Sized> ProjectionWriter for std::sync::Arc<W> {
    fn put_data_if_newer<'a>(
        &'a self,
        item: &'a Item,
    ) -> BoxFuture<'a, Result<DataWrite, StoreError>> {
        (**self).put_data_if_newer(item)
    }

    fn put_history<'a>(
        &'a self,
        item: &'a Item,
    ) -> BoxFuture<'a, Result<HistoryWrite, StoreError>> {
        (**self).put_history(item)
    }

    fn park<'a>(
        &'a self,
        record: &'a ParkedRecord,
    ) -> BoxFuture<'a, Result<ParkWrite, StoreError>> {
        (**self).park(record)
    }

    fn put_history_batch<'a>(
        &'a self,
        items: &'a [Item],
    ) -> BoxFuture<'a, Vec<Result<HistoryWrite, StoreError>>> {
        (**self).put_history_batch(items)
    }
}
