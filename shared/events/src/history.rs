//! Reading the versions a batch of the data table's stream skipped, from the history table.
//!
//! data-sync collapses the versions of an item in one batch of the command table's stream into one
//! data write, so the data table's stream can jump from version `a` to `b`; the history table
//! (written before the data row) holds every version under `sk@version`. [`HistoryReader`] is what
//! the feed asks for them: [`cqrs_store::Store`] reads with strongly consistent `BatchGetItem`s
//! (100 keys a call, unprocessed keys sent again with backoff, transient failures retried with
//! [`cqrs_store::projection::Retry`]), and a `Vec<Item>` serves as an in-memory history in tests
//! and examples.

use std::collections::{BTreeSet, HashMap};

use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes};
use cqrs_item::Item;
use cqrs_keys::add_sort_key_version;
use cqrs_store::projection::Retry;
use cqrs_store::{Store, StoreError};
use futures::future::{BoxFuture, FutureExt};

/// The most keys of one `BatchGetItem` (DynamoDB's limit).
///
/// ```
/// assert_eq!(cqrs_events::history::BATCH_GET_MAX, 100);
/// ```
pub const BATCH_GET_MAX: usize = 100;

/// How many rounds of unprocessed keys a read sends before it gives up (throttled).
const ROUNDS: u32 = 8;

/// One version of one item in the history table: `pk`, the base sort key (no version) and the
/// version (the row's `sk` is `sk@version`).
///
/// ```
/// let key = cqrs_events::HistoryKey::new("PRODUCT#t1", "P001", 3);
/// assert_eq!(key.history_sk(), "P001@3");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HistoryKey {
    /// The item's partition key.
    pub pk: String,
    /// The item's sort key without version.
    pub sk: String,
    /// The version.
    pub version: i64,
}

impl HistoryKey {
    /// The key of version `version` of `pk` / `sk` (no version).
    ///
    /// ```
    /// let key = cqrs_events::HistoryKey::new("ORDER#t1", "ORDER#o1", 2);
    /// assert_eq!((key.pk.as_str(), key.version), ("ORDER#t1", 2));
    /// ```
    pub fn new(pk: impl Into<String>, sk: impl Into<String>, version: i64) -> Self {
        HistoryKey {
            pk: pk.into(),
            sk: sk.into(),
            version,
        }
    }

    /// The history table's sort key of this version: `sk@version`.
    ///
    /// ```
    /// assert_eq!(cqrs_events::HistoryKey::new("P#t", "a", 12).history_sk(), "a@12");
    /// ```
    pub fn history_sk(&self) -> String {
        add_sort_key_version(&self.sk, self.version)
    }

    /// The key of `item`, a history row.
    fn of(item: &Item) -> Self {
        HistoryKey::new(item.pk.clone(), item.base_sk(), item.version)
    }
}

/// Where the feed reads skipped versions: answers the rows of `keys` it has (history rows, `sk`
/// with version), in any order; a key without a row is simply absent from the answer (the feed
/// reports it, naming the item and version). Reads must be strongly consistent: the history row
/// of a version is written before its data row, so a consistent read after the data table's
/// stream record always finds it.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use cqrs_events::{HistoryKey, HistoryReader};
/// let history = vec![cqrs_item::Item::example()]; // PRODUCT#t1 / P001@1
/// let found = history
///     .read_versions(&[HistoryKey::new("PRODUCT#t1", "P001", 1), HistoryKey::new("PRODUCT#t1", "P001", 2)])
///     .await
///     .unwrap();
/// assert_eq!(found.len(), 1);
/// # }
/// ```
pub trait HistoryReader: Send + Sync {
    /// The history rows of `keys` that exist.
    fn read_versions<'a>(
        &'a self,
        keys: &'a [HistoryKey],
    ) -> BoxFuture<'a, Result<Vec<Item>, StoreError>>;
}

/// An in-memory history: the items of the vector whose key is asked for.
impl HistoryReader for Vec<Item> {
    fn read_versions<'a>(
        &'a self,
        keys: &'a [HistoryKey],
    ) -> BoxFuture<'a, Result<Vec<Item>, StoreError>> {
        let wanted: BTreeSet<&HistoryKey> = keys.iter().collect();
        let found = self
            .iter()
            .filter(|item| wanted.contains(&HistoryKey::of(item)))
            .cloned()
            .collect();
        async move { Ok(found) }.boxed()
    }
}

/// The history table of the store, read with strongly consistent `BatchGetItem`s (see the
/// [module docs](self)).
impl HistoryReader for Store {
    fn read_versions<'a>(
        &'a self,
        keys: &'a [HistoryKey],
    ) -> BoxFuture<'a, Result<Vec<Item>, StoreError>> {
        async move {
            // BatchGetItem refuses a key twice in one request.
            let distinct: BTreeSet<(String, String)> = keys
                .iter()
                .map(|k| (k.pk.clone(), k.history_sk()))
                .collect();
            let distinct: Vec<(String, String)> = distinct.into_iter().collect();
            let mut found = Vec::with_capacity(distinct.len());
            for chunk in distinct.chunks(BATCH_GET_MAX) {
                for row in consistent_batch_get(self, chunk).await? {
                    found.push(Item::from_attributes(row)?);
                }
            }
            Ok(found)
        }
        .boxed()
    }
}

/// The rows of `keys` (at most [`BATCH_GET_MAX`]) in the history table, read consistently.
async fn consistent_batch_get(
    store: &Store,
    keys: &[(String, String)],
) -> Result<Vec<HashMap<String, AttributeValue>>, StoreError> {
    let table = &store.tables().history;
    let mut pending: Vec<HashMap<String, AttributeValue>> = keys
        .iter()
        .map(|(pk, sk)| {
            HashMap::from([
                ("pk".to_string(), AttributeValue::S(pk.clone())),
                ("sk".to_string(), AttributeValue::S(sk.clone())),
            ])
        })
        .collect();
    let retry = Retry::default();
    let mut rows = Vec::with_capacity(keys.len());
    for round in 1..=ROUNDS {
        if pending.is_empty() {
            break;
        }
        let request = KeysAndAttributes::builder()
            .set_keys(Some(std::mem::take(&mut pending)))
            .consistent_read(true)
            .build()
            .map_err(|e| StoreError::Dynamo(format!("BatchGetItem (history, events): {e}")))?;
        let output = retry
            .run(|| async {
                store
                    .client()
                    .batch_get_item()
                    .request_items(table, request.clone())
                    .send()
                    .await
                    .map_err(|e| {
                        let code = e.code().map(str::to_string);
                        let message = format!(
                            "BatchGetItem (history, events): {}",
                            aws_sdk_dynamodb::error::DisplayErrorContext(&e)
                        );
                        match code.as_deref() {
                            Some(
                                "ProvisionedThroughputExceededException"
                                | "RequestLimitExceeded"
                                | "ThrottlingException",
                            ) => StoreError::Throttled(message),
                            _ => StoreError::Dynamo(message),
                        }
                    })
            })
            .await?;
        if let Some(found) = output.responses().and_then(|r| r.get(table.as_str())) {
            rows.extend(found.iter().cloned());
        }
        pending = output
            .unprocessed_keys()
            .and_then(|u| u.get(table.as_str()))
            .map(|k| k.keys().to_vec())
            .unwrap_or_default();
        if !pending.is_empty() && round < ROUNDS {
            tokio::time::sleep(retry.ceiling(round)).await;
        }
    }
    if pending.is_empty() {
        Ok(rows)
    } else {
        Err(StoreError::Throttled(format!(
            "BatchGetItem (history, events): {} keys still unprocessed after {ROUNDS} rounds",
            pending.len()
        )))
    }
}
