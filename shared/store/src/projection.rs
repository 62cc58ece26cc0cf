//! data-sync's writes: the newest version of every item into the data table, every version into
//! the history table, and write-once entries for sync targets.
//!
//! Both projection writes are safe to repeat and to receive out of order, because a DynamoDB stream
//! delivers every record at least once and Lambda retries whole batches:
//!
//! - [`Store::put_data_if_newer`] writes the data-table form of a command item
//!   ([`Item::into_data_item`]) with a `PutItem` conditional on
//!   `attribute_not_exists(pk) OR version < :version`. When the condition fails the data table
//!   already holds this version or a newer one: that is success ([`DataWrite::AlreadyCurrent`]),
//!   never an error, so an old version can never overwrite a newer one.
//! - [`Store::put_history`] writes the version under `sk@version` with a `PutItem` conditional on
//!   `attribute_not_exists(pk)`. A version is immutable, so when the key is taken the stored row is
//!   compared with the incoming one: the same content is an idempotent replay
//!   ([`HistoryWrite::AlreadyPresent`]); different content under the same version is
//!   [`StoreError::HistoryConflict`] and nothing is overwritten (see its documentation).
//!
//! Every write here retries throttling and transport failures a bounded number of times with
//! exponential backoff and jitter ([`Retry`]), on top of the SDK's own retries; what still fails is
//! returned as a [`StoreError`] for the caller to report.

use std::future::Future;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_sdk_dynamodb::{
    operation::put_item::PutItemError,
    types::{AttributeValue, ReturnValuesOnConditionCheckFailure},
};
use cqrs_item::{Attributes, Item};

use crate::{Store, StoreError, sdk_error};

/// What [`Store::put_data_if_newer`] did.
///
/// ```
/// use cqrs_store::projection::DataWrite;
/// assert_ne!(DataWrite::Written, DataWrite::AlreadyCurrent);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataWrite {
    /// The version is now the item's state in the data table.
    Written,
    /// The data table already held this version or a newer one; nothing was written.
    AlreadyCurrent,
}

/// What [`Store::put_history`] and [`Store::put_if_absent`] did.
///
/// ```
/// use cqrs_store::projection::HistoryWrite;
/// assert_ne!(HistoryWrite::Written, HistoryWrite::AlreadyPresent);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HistoryWrite {
    /// The row was written.
    Written,
    /// The same row was already there (a replay); nothing was written.
    AlreadyPresent,
}

/// A bounded retry policy with exponential backoff and full jitter, for throttling and transport
/// failures ([`StoreError::is_transient`]).
///
/// Attempt `n` (from 1) that fails transiently waits a random time up to
/// `min(base_delay * 2^(n-1), max_delay)` before the next one; after `attempts` attempts the last
/// error is returned.
///
/// ```
/// use std::time::Duration;
/// let retry = cqrs_store::projection::Retry::default();
/// assert_eq!(retry.attempts, 4);
/// assert!(retry.ceiling(10) <= retry.max_delay);
/// assert_eq!(retry.ceiling(1), retry.base_delay);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    /// How many attempts in all (1 means no retry).
    pub attempts: u32,
    /// The ceiling of the first wait.
    pub base_delay: Duration,
    /// The largest ceiling of any wait.
    pub max_delay: Duration,
}

impl Default for Retry {
    /// 4 attempts, waits of at most 50 ms, 100 ms, 200 ms: under half a second in the worst case,
    /// small against a Lambda timeout.
    fn default() -> Self {
        Retry {
            attempts: 4,
            base_delay: Duration::from_millis(50),
            max_delay: Duration::from_secs(1),
        }
    }
}

impl Retry {
    /// The longest wait after failed attempt `attempt` (1-based).
    ///
    /// ```
    /// use std::time::Duration;
    /// let retry = cqrs_store::projection::Retry::default();
    /// assert_eq!(retry.ceiling(3), Duration::from_millis(200));
    /// ```
    pub fn ceiling(&self, attempt: u32) -> Duration {
        let factor = 1u32 << attempt.saturating_sub(1).min(16);
        self.base_delay.saturating_mul(factor).min(self.max_delay)
    }

    /// Runs `operation` until it succeeds, fails with a non-transient error, or `attempts` are
    /// used up.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use std::time::Duration;
    /// use cqrs_store::{StoreError, projection::Retry};
    ///
    /// let retry = Retry { attempts: 3, base_delay: Duration::from_millis(1), max_delay: Duration::from_millis(1) };
    /// let calls = AtomicU32::new(0);
    /// let result = retry
    ///     .run(|| async {
    ///         match calls.fetch_add(1, Ordering::SeqCst) {
    ///             0 => Err(StoreError::Throttled("slow down".into())),
    ///             _ => Ok("done"),
    ///         }
    ///     })
    ///     .await;
    /// assert_eq!(result.unwrap(), "done");
    /// assert_eq!(calls.load(Ordering::SeqCst), 2);
    /// # }
    /// ```
    pub async fn run<T, F, Fut>(&self, mut operation: F) -> Result<T, StoreError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, StoreError>>,
    {
        let mut attempt = 1;
        loop {
            match operation().await {
                Err(error) if error.is_transient() && attempt < self.attempts => {
                    let wait = jitter(self.ceiling(attempt));
                    tracing::warn!(attempt, ?wait, %error, "transient DynamoDB failure, retrying");
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
                other => return other,
            }
        }
    }
}

/// A random duration in `[0, ceiling]` ("full jitter"), from the clock's nanoseconds: enough to
/// spread concurrent retries, no random number crate needed.
fn jitter(ceiling: Duration) -> Duration {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    let ceiling_nanos = ceiling.as_nanos().max(1);
    // Mix the nanoseconds so that calls close in time do not get close waits.
    let mixed = u128::from(cqrs_keys::fnv1a_64(&nanos.to_le_bytes()));
    Duration::from_nanos((mixed % (ceiling_nanos + 1)) as u64)
}

pub(crate) fn is_condition_failure(
    error: &aws_sdk_dynamodb::error::SdkError<PutItemError>,
) -> bool {
    matches!(
        error.as_service_error(),
        Some(PutItemError::ConditionalCheckFailedException(_))
    )
}

impl Store {
    /// Writes the data-table form of the command item `item` (its `sk` carries the version) unless
    /// the data table already holds this version or a newer one. Retries transient failures
    /// ([`Retry::default`]).
    ///
    /// ```no_run
    /// # async fn example(store: &cqrs_store::Store) -> Result<(), cqrs_store::StoreError> {
    /// use cqrs_store::projection::DataWrite;
    /// let command = cqrs_item::Item::example(); // sk P001@1
    /// match store.put_data_if_newer(&command).await? {
    ///     DataWrite::Written => println!("data table now at version 1"),
    ///     DataWrite::AlreadyCurrent => println!("a newer (or the same) version is already there"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn put_data_if_newer(&self, item: &Item) -> Result<DataWrite, StoreError> {
        let attributes = item.clone().into_data_item().to_attributes()?;
        let version = AttributeValue::N(item.version.to_string());
        Retry::default()
            .run(|| async {
                let result = self
                    .client
                    .put_item()
                    .table_name(&self.tables.data)
                    .set_item(Some(attributes.clone()))
                    .condition_expression("attribute_not_exists(#pk) OR #version < :version")
                    .expression_attribute_names("#pk", "pk")
                    .expression_attribute_names("#version", "version")
                    .expression_attribute_values(":version", version.clone())
                    .send()
                    .await;
                match result {
                    Ok(_) => Ok(DataWrite::Written),
                    Err(e) if is_condition_failure(&e) => Ok(DataWrite::AlreadyCurrent),
                    Err(e) => Err(sdk_error("PutItem (data)", e)),
                }
            })
            .await
    }

    /// Writes the command item `item` (`sk@version`) into the history table, once. A replay of the
    /// same version with the same content is [`HistoryWrite::AlreadyPresent`]; with different
    /// content it is [`StoreError::HistoryConflict`] and the stored row stays. Retries transient
    /// failures ([`Retry::default`]).
    ///
    /// ```no_run
    /// # async fn example(store: &cqrs_store::Store) -> Result<(), cqrs_store::StoreError> {
    /// let command = cqrs_item::Item::example();
    /// store.put_history(&command).await?;
    /// // A redelivered stream record is harmless:
    /// let again = store.put_history(&command).await?;
    /// assert_eq!(again, cqrs_store::projection::HistoryWrite::AlreadyPresent);
    /// # Ok(()) }
    /// ```
    pub async fn put_history(&self, item: &Item) -> Result<HistoryWrite, StoreError> {
        let table = self.tables.history.clone();
        match self.put_if_absent(&table, item).await? {
            PutIfAbsent::Written => Ok(HistoryWrite::Written),
            PutIfAbsent::Present(stored) if *stored == *item => Ok(HistoryWrite::AlreadyPresent),
            PutIfAbsent::Present(_) => Err(StoreError::HistoryConflict {
                pk: item.pk.clone(),
                sk: item.sk.clone(),
            }),
        }
    }

    /// Writes `item` into `table` unless its key is taken; a taken key answers the stored item
    /// (from the failed condition, no second request). The building block of write-once
    /// projections such as the history table and data-sync's change log. Retries transient
    /// failures ([`Retry::default`]).
    ///
    /// ```no_run
    /// # async fn example(store: &cqrs_store::Store) -> Result<(), cqrs_store::StoreError> {
    /// use cqrs_store::projection::PutIfAbsent;
    /// let entry = cqrs_item::Item::example();
    /// match store.put_if_absent("cqrs-change-log", &entry).await? {
    ///     PutIfAbsent::Written => println!("logged"),
    ///     PutIfAbsent::Present(stored) => println!("already logged: {}", stored.sk),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn put_if_absent(&self, table: &str, item: &Item) -> Result<PutIfAbsent, StoreError> {
        let attributes = item.to_attributes()?;
        let stored: Option<Option<Attributes>> = Retry::default()
            .run(|| async {
                let result = self
                    .client
                    .put_item()
                    .table_name(table)
                    .set_item(Some(attributes.clone()))
                    .condition_expression("attribute_not_exists(#pk)")
                    .expression_attribute_names("#pk", "pk")
                    .return_values_on_condition_check_failure(
                        ReturnValuesOnConditionCheckFailure::AllOld,
                    )
                    .send()
                    .await;
                match result {
                    Ok(_) => Ok(None),
                    Err(e) if is_condition_failure(&e) => {
                        let old = match e.as_service_error() {
                            Some(PutItemError::ConditionalCheckFailedException(failed)) => {
                                failed.item().cloned()
                            }
                            _ => None,
                        };
                        Ok(Some(old))
                    }
                    Err(e) => Err(sdk_error("PutItem (if absent)", e)),
                }
            })
            .await?;
        let old = match stored {
            None => return Ok(PutIfAbsent::Written),
            Some(Some(old)) => old,
            // An endpoint that does not return the old item on a failed condition: read it.
            Some(None) => self.get_stored(table, item).await?,
        };
        Ok(PutIfAbsent::Present(Box::new(Item::from_attributes(old)?)))
    }

    async fn get_stored(&self, table: &str, item: &Item) -> Result<Attributes, StoreError> {
        let output = Retry::default()
            .run(|| async {
                self.client
                    .get_item()
                    .table_name(table)
                    .key("pk", AttributeValue::S(item.pk.clone()))
                    .key("sk", AttributeValue::S(item.sk.clone()))
                    .consistent_read(true)
                    .send()
                    .await
                    .map_err(|e| sdk_error("GetItem (if absent)", e))
            })
            .await?;
        // Taken a moment ago and gone now (only a delete can do that): compare with nothing.
        Ok(output.item.unwrap_or_default())
    }
}

/// What [`Store::put_if_absent`] found.
///
/// ```
/// let found = cqrs_store::projection::PutIfAbsent::Present(Box::new(cqrs_item::Item::example()));
/// assert!(matches!(found, cqrs_store::projection::PutIfAbsent::Present(_)));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum PutIfAbsent {
    /// The key was free; the item is written.
    Written,
    /// The key was taken; this is the stored item, left as it was.
    Present(Box<Item>),
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    fn quick(attempts: u32) -> Retry {
        Retry {
            attempts,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(2),
        }
    }

    #[tokio::test]
    async fn throttling_is_retried_up_to_the_bound_then_returned() {
        let calls = AtomicU32::new(0);
        let result: Result<(), _> = quick(3)
            .run(|| async {
                calls.fetch_add(1, Ordering::SeqCst);
                Err(StoreError::Throttled("x".into()))
            })
            .await;
        assert!(matches!(result, Err(StoreError::Throttled(_))));
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn permanent_failures_are_not_retried() {
        let calls = AtomicU32::new(0);
        let result: Result<(), _> = quick(5)
            .run(|| async {
                calls.fetch_add(1, Ordering::SeqCst);
                Err(StoreError::HistoryConflict {
                    pk: "P#t".into(),
                    sk: "a@1".into(),
                })
            })
            .await;
        assert!(matches!(result, Err(StoreError::HistoryConflict { .. })));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn backoff_grows_to_its_cap_and_jitter_stays_under_the_ceiling() {
        let retry = Retry::default();
        assert_eq!(retry.ceiling(1), Duration::from_millis(50));
        assert_eq!(retry.ceiling(2), Duration::from_millis(100));
        assert_eq!(retry.ceiling(30), Duration::from_secs(1));
        for _ in 0..100 {
            assert!(jitter(Duration::from_millis(3)) <= Duration::from_millis(3));
        }
    }
}
