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
//! - [`Store::put_data_revised`] (the operator CLI's rebuild) also rewrites the **same** version
//!   when the stored item's `modelRevision` differs: index keys recomputed by a newer entity
//!   model are backfilled, and still no version ever moves backwards.
//! - [`Store::put_history_batch`] writes a whole stream batch into history: `BatchGetItem` finds
//!   what is there (replay or conflict), `BatchWriteItem` writes the rest, 25 a call.
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
        self.put_data(item, None).await
    }

    /// Like [`Store::put_data_if_newer`], and also rewrites the **same** version when the stored
    /// item's `modelRevision` differs from `item`'s (or the stored item has none): the write of a
    /// rebuild that recomputed a version's index keys with the current entity model. Never an
    /// older version. An item without a revision is written exactly as by `put_data_if_newer`.
    ///
    /// Only the operator CLI's rebuild writes this way. data-sync keeps the strict condition, so
    /// that a stream record redelivered after a rebuild (it carries the revision of the model
    /// that wrote it) cannot put the old index keys back.
    ///
    /// ```no_run
    /// # async fn example(store: &cqrs_store::Store) -> Result<(), cqrs_store::StoreError> {
    /// let mut rebuilt = cqrs_item::Item::example();
    /// rebuilt.model_revision = Some("0123456789abcdef".into());
    /// store.put_data_revised(&rebuilt).await?;
    /// # Ok(()) }
    /// ```
    pub async fn put_data_revised(&self, item: &Item) -> Result<DataWrite, StoreError> {
        self.put_data(item, item.model_revision.as_deref()).await
    }

    /// The data-table write: newer versions always, the same version too when `revision` is
    /// given and the stored one differs.
    async fn put_data(&self, item: &Item, revision: Option<&str>) -> Result<DataWrite, StoreError> {
        let attributes = item.clone().into_data_item().to_attributes()?;
        let version = AttributeValue::N(item.version.to_string());
        let condition = match revision {
            None => "attribute_not_exists(#pk) OR #version < :version",
            Some(_) => {
                "attribute_not_exists(#pk) OR #version < :version OR (#version = :version AND \
                 (attribute_not_exists(#revision) OR #revision <> :revision))"
            }
        };
        Retry::default()
            .run(|| async {
                let mut request = self
                    .client
                    .put_item()
                    .table_name(&self.tables.data)
                    .set_item(Some(attributes.clone()))
                    .condition_expression(condition)
                    .expression_attribute_names("#pk", "pk")
                    .expression_attribute_names("#version", "version")
                    .expression_attribute_values(":version", version.clone());
                if let Some(revision) = revision {
                    request = request
                        .expression_attribute_names("#revision", "modelRevision")
                        .expression_attribute_values(
                            ":revision",
                            AttributeValue::S(revision.to_string()),
                        );
                }
                match request.send().await {
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

/// The most keys one `BatchGetItem` reads (DynamoDB's limit).
///
/// ```
/// assert_eq!(cqrs_store::projection::BATCH_GET_MAX, 100);
/// ```
pub const BATCH_GET_MAX: usize = 100;

/// The most puts one `BatchWriteItem` carries (DynamoDB's limit).
///
/// ```
/// assert_eq!(cqrs_store::projection::BATCH_WRITE_MAX, 25);
/// ```
pub const BATCH_WRITE_MAX: usize = 25;

/// How many batch requests of one call are in flight at once.
const BATCH_CONCURRENCY: usize = 8;

/// How many rounds a batch request is sent while DynamoDB leaves keys or puts unprocessed.
const BATCH_ROUNDS: u32 = 8;

/// The key of an item, for matching answers of batch requests to their items.
type RowKey = (String, String);

/// The rows a `BatchGetItem` found, or why it failed.
type StoredRows = Result<Vec<Attributes>, StoreError>;

fn row_key(attributes: &Attributes) -> RowKey {
    let s = |name: &str| match attributes.get(name) {
        Some(AttributeValue::S(s)) => s.clone(),
        _ => String::new(),
    };
    (s("pk"), s("sk"))
}

/// A copy of `error` of the same kind (store errors are not `Clone`), for duplicates in a batch.
fn same_kind(error: &StoreError) -> StoreError {
    match error {
        StoreError::AlreadyExists { pk, sk } => StoreError::AlreadyExists {
            pk: pk.clone(),
            sk: sk.clone(),
        },
        StoreError::StaleVersion { id, latest } => StoreError::StaleVersion {
            id: id.clone(),
            latest: *latest,
        },
        StoreError::WriteConflict(m) => StoreError::WriteConflict(m.clone()),
        StoreError::IdempotencyKeyTaken(m) => StoreError::IdempotencyKeyTaken(m.clone()),
        StoreError::IdempotencyReplay(record) => StoreError::IdempotencyReplay(record.clone()),
        StoreError::HistoryConflict { pk, sk } => StoreError::HistoryConflict {
            pk: pk.clone(),
            sk: sk.clone(),
        },
        StoreError::GuardFailed { index, old } => StoreError::GuardFailed {
            index: *index,
            old: old.clone(),
        },
        StoreError::Throttled(m) => StoreError::Throttled(m.clone()),
        StoreError::Conversion(e) => StoreError::Conversion(cqrs_item::ConversionError::Invalid {
            field: "item".into(),
            reason: e.to_string(),
        }),
        StoreError::Dynamo(m) => StoreError::Dynamo(m.clone()),
    }
}

impl Store {
    /// Writes every version of `items` into the history table, once, and answers for each item, in
    /// order, what [`Store::put_history`] would have answered: [`HistoryWrite::Written`],
    /// [`HistoryWrite::AlreadyPresent`] for a replay of the same content, or an error
    /// ([`StoreError::HistoryConflict`] for other content under the same version, a transient
    /// error when DynamoDB could not be reached).
    ///
    /// The cheap form of `put_history` for a whole stream batch: the stored rows are read with
    /// `BatchGetItem` ([`BATCH_GET_MAX`] keys a call, strongly consistent), and the absent ones
    /// written with `BatchWriteItem` ([`BATCH_WRITE_MAX`] puts a call, no condition: a batch write
    /// cannot carry one). Duplicate keys are sent once. Keys or puts DynamoDB leaves unprocessed
    /// are sent again with backoff, a bounded number of times; what is still unprocessed then
    /// fails with [`StoreError::Throttled`]. Requests go concurrently.
    ///
    /// Between the read and the unconditional write another writer could put a row under the same
    /// key; only data-sync and the operator CLI write history, and both write a version's one
    /// content (the command handler never writes a version number twice), so such a put is an
    /// identical re-put. `cqrs verify` checks that history agrees with the command rows.
    ///
    /// ```no_run
    /// # async fn example(store: &cqrs_store::Store) {
    /// let versions = vec![cqrs_item::Item::example()];
    /// let answers = store.put_history_batch(&versions).await;
    /// assert_eq!(answers.len(), versions.len());
    /// # }
    /// ```
    pub async fn put_history_batch(&self, items: &[Item]) -> Vec<Result<HistoryWrite, StoreError>> {
        use futures::{FutureExt, StreamExt};
        use std::collections::HashMap;

        let table = self.tables.history.as_str();
        let mut results: Vec<Option<Result<HistoryWrite, StoreError>>> =
            items.iter().map(|_| None).collect();
        // One request row per key; later items with the same key follow the first. Items become
        // attribute maps only chunk by chunk, when written, so a batch of 10 000 versions never
        // holds a second copy of itself.
        let mut first: HashMap<(&str, &str), usize> = HashMap::new();
        let mut duplicates: Vec<(usize, usize)> = Vec::new();
        let mut unique: Vec<usize> = Vec::new();
        for (index, item) in items.iter().enumerate() {
            match first.entry((item.pk.as_str(), item.sk.as_str())) {
                std::collections::hash_map::Entry::Occupied(seen) => {
                    duplicates.push((index, *seen.get()));
                }
                std::collections::hash_map::Entry::Vacant(free) => {
                    free.insert(index);
                    unique.push(index);
                }
            }
        }
        drop(first);
        let key_of = |index: usize| {
            items
                .get(index)
                .map(|item| (item.pk.clone(), item.sk.clone()))
                .unwrap_or_default()
        };

        // 1. What history already holds under these keys.
        let reads: Vec<(Vec<RowKey>, StoredRows)> = futures::stream::iter(
            unique
                .chunks(BATCH_GET_MAX)
                .map(|chunk| chunk.iter().map(|&index| key_of(index)).collect::<Vec<_>>())
                .map(|keys| {
                    async move {
                        let stored = self.batch_get(table, &keys).await;
                        (keys, stored)
                    }
                    .boxed()
                })
                .collect::<Vec<_>>(),
        )
        .buffer_unordered(BATCH_CONCURRENCY)
        .collect()
        .await;
        let mut stored: HashMap<RowKey, Attributes> = HashMap::new();
        let mut unread: HashMap<RowKey, StoreError> = HashMap::new();
        for (keys, answer) in reads {
            match answer {
                Ok(rows) => stored.extend(rows.into_iter().map(|row| (row_key(&row), row))),
                Err(e) => {
                    for key in keys {
                        unread.insert(key, same_kind(&e));
                    }
                }
            }
        }

        // 2. Compare what is there; write what is not.
        let mut to_write: Vec<usize> = Vec::new();
        for index in unique {
            let key = key_of(index);
            let answer = if let Some(error) = unread.remove(&key) {
                Err(error)
            } else if let Some(row) = stored.remove(&key) {
                match (Item::from_attributes(row), items.get(index)) {
                    (Ok(row), Some(item)) if row == *item => Ok(HistoryWrite::AlreadyPresent),
                    (Ok(_), _) => Err(StoreError::HistoryConflict {
                        pk: key.0,
                        sk: key.1,
                    }),
                    (Err(e), _) => Err(StoreError::Conversion(e)),
                }
            } else {
                to_write.push(index);
                continue;
            };
            if let Some(slot) = results.get_mut(index) {
                *slot = Some(answer);
            }
        }
        let writes: Vec<Vec<(usize, Result<(), StoreError>)>> = futures::stream::iter(
            to_write
                .chunks(BATCH_WRITE_MAX)
                .map(|chunk| {
                    async move {
                        let mut rows = Vec::with_capacity(chunk.len());
                        let mut answers = Vec::new();
                        for &index in chunk {
                            match items.get(index).map(Item::to_attributes) {
                                Some(Ok(attributes)) => rows.push((index, attributes)),
                                Some(Err(e)) => {
                                    answers.push((index, Err(StoreError::Conversion(e))))
                                }
                                None => {}
                            }
                        }
                        answers.extend(self.batch_put(table, &rows).await);
                        answers
                    }
                    .boxed()
                })
                .collect::<Vec<_>>(),
        )
        .buffer_unordered(BATCH_CONCURRENCY)
        .collect()
        .await;
        for (index, answer) in writes.into_iter().flatten() {
            if let Some(slot) = results.get_mut(index) {
                *slot = Some(answer.map(|()| HistoryWrite::Written));
            }
        }

        // 3. Duplicates answer as their first: a replay of the same content, else a conflict.
        for (index, of) in duplicates {
            let answer = match (results.get(of), items.get(index), items.get(of)) {
                (Some(Some(Ok(_))), Some(item), Some(first)) if item == first => {
                    Ok(HistoryWrite::AlreadyPresent)
                }
                (Some(Some(Ok(_))), Some(item), _) => Err(StoreError::HistoryConflict {
                    pk: item.pk.clone(),
                    sk: item.sk.clone(),
                }),
                (Some(Some(Err(e))), _, _) => Err(same_kind(e)),
                _ => Err(StoreError::Dynamo(
                    "history batch: no answer for a duplicate".into(),
                )),
            };
            if let Some(slot) = results.get_mut(index) {
                *slot = Some(answer);
            }
        }
        results
            .into_iter()
            .map(|answer| {
                answer.unwrap_or_else(|| {
                    Err(StoreError::Dynamo(
                        "history batch: no answer for an item".into(),
                    ))
                })
            })
            .collect()
    }

    /// Reads the rows of `keys` (at most [`BATCH_GET_MAX`]) from `table` with a strongly
    /// consistent `BatchGetItem`, sending unprocessed keys again with backoff; absent keys have no
    /// row in the answer.
    pub(crate) async fn batch_get(
        &self,
        table: &str,
        keys: &[RowKey],
    ) -> Result<Vec<Attributes>, StoreError> {
        use aws_sdk_dynamodb::types::KeysAndAttributes;

        let mut pending: Vec<Attributes> = keys
            .iter()
            .map(|(pk, sk)| {
                Attributes::from([
                    ("pk".to_string(), AttributeValue::S(pk.clone())),
                    ("sk".to_string(), AttributeValue::S(sk.clone())),
                ])
            })
            .collect();
        let mut rows = Vec::new();
        let retry = Retry::default();
        for round in 1..=BATCH_ROUNDS {
            if pending.is_empty() {
                return Ok(rows);
            }
            let request = KeysAndAttributes::builder()
                .set_keys(Some(pending.clone()))
                .consistent_read(true)
                .build()
                .map_err(|e| StoreError::Dynamo(format!("BatchGetItem (history): {e}")))?;
            let output = retry
                .run(|| async {
                    self.client
                        .batch_get_item()
                        .request_items(table, request.clone())
                        .send()
                        .await
                        .map_err(|e| sdk_error("BatchGetItem (history)", e))
                })
                .await?;
            if let Some(found) = output.responses().and_then(|r| r.get(table)) {
                rows.extend(found.iter().cloned());
            }
            pending = output
                .unprocessed_keys()
                .and_then(|u| u.get(table))
                .map(|k| k.keys().to_vec())
                .unwrap_or_default();
            if !pending.is_empty() && round < BATCH_ROUNDS {
                tokio::time::sleep(jitter(retry.ceiling(round))).await;
            }
        }
        if pending.is_empty() {
            Ok(rows)
        } else {
            Err(StoreError::Throttled(format!(
                "BatchGetItem (history): {} keys still unprocessed after {BATCH_ROUNDS} rounds",
                pending.len()
            )))
        }
    }

    /// Puts `rows` (at most [`BATCH_WRITE_MAX`], distinct keys) into `table` with
    /// `BatchWriteItem`, sending unprocessed puts again with backoff; answers per row index.
    pub(crate) async fn batch_put(
        &self,
        table: &str,
        rows: &[(usize, Attributes)],
    ) -> Vec<(usize, Result<(), StoreError>)> {
        use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};
        use std::collections::HashMap;

        let index_of: HashMap<RowKey, usize> = rows
            .iter()
            .map(|(index, attributes)| (row_key(attributes), *index))
            .collect();
        let mut pending: Vec<WriteRequest> = Vec::with_capacity(rows.len());
        let mut answers: Vec<(usize, Result<(), StoreError>)> = Vec::with_capacity(rows.len());
        for (index, attributes) in rows {
            match PutRequest::builder()
                .set_item(Some(attributes.clone()))
                .build()
            {
                Ok(put) => pending.push(WriteRequest::builder().put_request(put).build()),
                Err(e) => answers.push((
                    *index,
                    Err(StoreError::Dynamo(format!("BatchWriteItem (history): {e}"))),
                )),
            }
        }
        let index_of_request = |request: &WriteRequest| {
            request
                .put_request()
                .map(|put| row_key(put.item()))
                .and_then(|key| index_of.get(&key).copied())
        };
        let retry = Retry::default();
        for round in 1..=BATCH_ROUNDS {
            if pending.is_empty() {
                break;
            }
            let sent: Vec<usize> = pending.iter().filter_map(index_of_request).collect();
            let output = retry
                .run(|| async {
                    self.client
                        .batch_write_item()
                        .request_items(table, pending.clone())
                        .send()
                        .await
                        .map_err(|e| sdk_error("BatchWriteItem (history)", e))
                })
                .await;
            let output = match output {
                Ok(output) => output,
                Err(e) => {
                    answers.extend(sent.into_iter().map(|index| (index, Err(same_kind(&e)))));
                    return answers;
                }
            };
            pending = output
                .unprocessed_items()
                .and_then(|u| u.get(table))
                .cloned()
                .unwrap_or_default();
            let left: std::collections::HashSet<usize> =
                pending.iter().filter_map(index_of_request).collect();
            answers.extend(
                sent.into_iter()
                    .filter(|index| !left.contains(index))
                    .map(|index| (index, Ok(()))),
            );
            if !pending.is_empty() && round < BATCH_ROUNDS {
                tokio::time::sleep(jitter(retry.ceiling(round))).await;
            }
        }
        answers.extend(pending.iter().filter_map(index_of_request).map(|index| {
            (
                index,
                Err(StoreError::Throttled(format!(
                    "BatchWriteItem (history): still unprocessed after {BATCH_ROUNDS} rounds"
                ))),
            )
        }));
        answers
    }
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
