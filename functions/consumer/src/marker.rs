//! The per-(consumer, item) version marker: a consumer's dedup and order guard.
//!
//! One row of the idempotency table per consumer and item, key
//! [`cqrs_keys::consumer_marker_key`] (`CONSUMER#<consumer>#<member token>`):
//!
//! | attribute | type | what |
//! | --- | --- | --- |
//! | `applied` | N | the newest version the consumer handled |
//! | `ttlRemoved` | BOOL | the TTL removal of `applied` was handled too |
//! | `held` | N | a version parked in the consumer's dead-letter queue: later ones wait behind it |
//! | `heldReason` | S | why it was parked |
//! | `updatedAt` | S | when the marker last moved (RFC 3339) |
//! | `ttl` | N | the item's own `ttl` + 7 days when the item has one, else absent |
//!
//! The marker only moves forward: [`MarkerWrite`] sets `applied = v` under the condition
//! `attribute_not_exists(applied) OR applied < v` (a TTL removal also when `applied = v` and its
//! removal is not yet handled), so a lost race is a duplicate, never a step back.
//! [`MarkerStore`] is what the runtime reads and writes: [`DynamoMarkers`] (the table, a
//! strongly consistent `BatchGetItem` per batch, one `UpdateItem` per handled version) and
//! [`MemoryMarkers`] (tests, examples).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use cqrs_consumer::marker::{MarkerStore, MarkerWrite, MemoryMarkers, Written};
//! let markers = MemoryMarkers::default();
//! let write = MarkerWrite::new("CONSUMER#search#abc", 2);
//! assert_eq!(markers.apply(&write).await.unwrap(), Written::Applied);
//! assert_eq!(markers.apply(&MarkerWrite::new("CONSUMER#search#abc", 1)).await.unwrap(), Written::Stale);
//! let read = markers.read(&["CONSUMER#search#abc".to_string()]).await.unwrap();
//! assert_eq!(read["CONSUMER#search#abc"].applied, Some(2));
//! # }
//! ```

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes, TransactWriteItem, Update};
use chrono::{SecondsFormat, Utc};
use cqrs_store::StoreError;
use futures::future::{BoxFuture, FutureExt};

/// How long a marker outlives an item that has a `ttl` (seconds): 7 days.
///
/// ```
/// assert_eq!(cqrs_consumer::marker::TTL_GRACE_SECONDS, 604_800);
/// ```
pub const TTL_GRACE_SECONDS: i64 = 7 * 24 * 3600;

/// How many rounds of unprocessed keys a marker read sends before it gives up (throttled).
const ROUNDS: u32 = 6;

/// A consumer's marker of one item, as read.
///
/// ```
/// let marker = cqrs_consumer::marker::Marker { applied: Some(3), ..Default::default() };
/// assert!(marker.is_duplicate(3, false));
/// assert!(!marker.is_duplicate(4, false));
/// assert!(!marker.is_duplicate(3, true), "the TTL removal of v3 is not handled yet");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Marker {
    /// The newest version handled.
    pub applied: Option<i64>,
    /// Whether the TTL removal of `applied` was handled.
    pub ttl_removed: bool,
    /// A parked version later versions wait behind.
    pub held: Option<i64>,
    /// Why `held` was parked.
    pub held_reason: Option<String>,
}

impl Marker {
    /// Whether the event of `version` (`ttl_removal`: the TTL removal of that version) was
    /// handled already: an older version, the same version, or the same TTL removal.
    ///
    /// ```
    /// let marker = cqrs_consumer::marker::Marker { applied: Some(3), ttl_removed: true, ..Default::default() };
    /// assert!(marker.is_duplicate(3, true));
    /// assert!(marker.is_duplicate(2, true));
    /// assert!(!cqrs_consumer::marker::Marker::default().is_duplicate(1, false));
    /// ```
    pub fn is_duplicate(&self, version: i64, ttl_removal: bool) -> bool {
        match self.applied {
            None => false,
            Some(applied) if version < applied => true,
            Some(applied) if version == applied => !ttl_removal || self.ttl_removed,
            Some(_) => false,
        }
    }

    /// The marker after the handling of `write` (what [`MarkerWrite`]'s condition allows).
    fn after(&self, write: &MarkerWrite) -> Option<Marker> {
        if !write.allowed(self) {
            return None;
        }
        Some(Marker {
            applied: Some(write.version),
            ttl_removed: write.ttl_removal,
            held: None,
            held_reason: None,
        })
    }
}

/// The move of a marker to a handled version: `applied = version` (and `ttlRemoved` for a TTL
/// removal), `held` cleared, `ttl` set when the item has one; only forward.
///
/// ```
/// let write = cqrs_consumer::marker::MarkerWrite::new("CONSUMER#c#t", 4).ttl_removal(true).item_ttl(Some(100));
/// assert_eq!(write.ttl, Some(100 + cqrs_consumer::marker::TTL_GRACE_SECONDS));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkerWrite {
    /// The marker's key ([`cqrs_keys::consumer_marker_key`]).
    pub key: String,
    /// The version handled.
    pub version: i64,
    /// It was the TTL removal of `version`.
    pub ttl_removal: bool,
    /// The marker's own `ttl` (epoch seconds), if any.
    pub ttl: Option<i64>,
}

impl MarkerWrite {
    /// The move of `key` to `version` (a version event, no `ttl`).
    ///
    /// ```
    /// let write = cqrs_consumer::marker::MarkerWrite::new("k", 1);
    /// assert!(!write.ttl_removal);
    /// ```
    pub fn new(key: impl Into<String>, version: i64) -> Self {
        MarkerWrite {
            key: key.into(),
            version,
            ttl_removal: false,
            ttl: None,
        }
    }

    /// Marks the write as the TTL removal of its version.
    ///
    /// ```
    /// assert!(cqrs_consumer::marker::MarkerWrite::new("k", 1).ttl_removal(true).ttl_removal);
    /// ```
    pub fn ttl_removal(mut self, ttl_removal: bool) -> Self {
        self.ttl_removal = ttl_removal;
        self
    }

    /// The marker's `ttl` from the item's (`None`: the item has none, the marker neither).
    ///
    /// ```
    /// assert_eq!(cqrs_consumer::marker::MarkerWrite::new("k", 1).item_ttl(None).ttl, None);
    /// ```
    pub fn item_ttl(mut self, item_ttl: Option<i64>) -> Self {
        self.ttl = item_ttl.map(|t| t.saturating_add(TTL_GRACE_SECONDS));
        self
    }

    /// Whether the condition holds on `marker`.
    fn allowed(&self, marker: &Marker) -> bool {
        match marker.applied {
            None => true,
            Some(applied) if applied < self.version => true,
            Some(applied) => self.ttl_removal && applied == self.version && !marker.ttl_removed,
        }
    }

    /// The `Update` of this write on `table`, for an `UpdateItem` or a transaction.
    ///
    /// ```
    /// let update = cqrs_consumer::marker::MarkerWrite::new("CONSUMER#c#t", 2).update("idem").unwrap();
    /// assert_eq!(update.table_name(), "idem");
    /// assert!(update.condition_expression().unwrap().contains("attribute_not_exists(#a)"));
    /// ```
    pub fn update(&self, table: &str) -> Result<Update, StoreError> {
        let (update, condition, names, values) = self.expression();
        Update::builder()
            .table_name(table)
            .key("pk", AttributeValue::S(self.key.clone()))
            .update_expression(update)
            .condition_expression(condition)
            .set_expression_attribute_names(Some(names))
            .set_expression_attribute_values(Some(values))
            .build()
            .map_err(|e| StoreError::Dynamo(format!("marker update: {e}")))
    }

    /// The write as one item of a `TransactWriteItems` (a consumer's own transaction).
    ///
    /// ```
    /// let item = cqrs_consumer::marker::MarkerWrite::new("CONSUMER#c#t", 2).transact_item("idem").unwrap();
    /// assert!(item.update().is_some());
    /// ```
    pub fn transact_item(&self, table: &str) -> Result<TransactWriteItem, StoreError> {
        Ok(TransactWriteItem::builder()
            .update(self.update(table)?)
            .build())
    }

    /// Update expression, condition, names and values.
    #[allow(clippy::type_complexity)]
    fn expression(
        &self,
    ) -> (
        String,
        String,
        HashMap<String, String>,
        HashMap<String, AttributeValue>,
    ) {
        let mut names = HashMap::from([
            ("#a".to_string(), "applied".to_string()),
            ("#tr".to_string(), "ttlRemoved".to_string()),
            ("#u".to_string(), "updatedAt".to_string()),
            ("#h".to_string(), "held".to_string()),
            ("#hr".to_string(), "heldReason".to_string()),
        ]);
        let mut values = HashMap::from([
            (
                ":v".to_string(),
                AttributeValue::N(self.version.to_string()),
            ),
            (":tr".to_string(), AttributeValue::Bool(self.ttl_removal)),
            (
                ":u".to_string(),
                AttributeValue::S(Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true)),
            ),
        ]);
        let mut update = "SET #a = :v, #tr = :tr, #u = :u".to_string();
        if let Some(ttl) = self.ttl {
            names.insert("#ttl".into(), "ttl".into());
            values.insert(":ttl".into(), AttributeValue::N(ttl.to_string()));
            update.push_str(", #ttl = :ttl");
        }
        update.push_str(" REMOVE #h, #hr");
        let mut condition = "attribute_not_exists(#a) OR #a < :v".to_string();
        if self.ttl_removal {
            values.insert(":false".into(), AttributeValue::Bool(false));
            condition.push_str(" OR (#a = :v AND (attribute_not_exists(#tr) OR #tr = :false))");
        }
        (update, condition, names, values)
    }
}

/// Whether a consumer's `TransactWriteItems`, holding [`crate::Delivered::marker_write`] at
/// `marker_index`, was cancelled by the marker's condition: the version was applied already (by
/// an earlier or a concurrent delivery), so the consumer answers `Ok` and writes nothing again.
///
/// ```
/// use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
/// use aws_sdk_dynamodb::types::{CancellationReason, error::TransactionCanceledException};
/// let reasons = vec![
///     CancellationReason::builder().code("None").build(),
///     CancellationReason::builder().code("ConditionalCheckFailed").build(),
/// ];
/// let error = TransactWriteItemsError::TransactionCanceledException(
///     TransactionCanceledException::builder().set_cancellation_reasons(Some(reasons)).build(),
/// );
/// assert!(cqrs_consumer::marker::already_applied(&error, 1));
/// assert!(!cqrs_consumer::marker::already_applied(&error, 0));
/// ```
pub fn already_applied(
    error: &aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError,
    marker_index: usize,
) -> bool {
    use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
    match error {
        TransactWriteItemsError::TransactionCanceledException(e) => {
            e.cancellation_reasons()
                .get(marker_index)
                .and_then(|r| r.code())
                == Some("ConditionalCheckFailed")
        }
        _ => false,
    }
}

/// What became of a [`MarkerWrite`].
///
/// ```
/// assert_ne!(cqrs_consumer::marker::Written::Applied, cqrs_consumer::marker::Written::Stale);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// The marker moved.
    Applied,
    /// The marker was already there or further (a concurrent delivery won): a duplicate.
    Stale,
}

/// Where the runtime keeps the markers.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use cqrs_consumer::marker::{MarkerStore, MemoryMarkers};
/// let markers = MemoryMarkers::default();
/// markers.hold("k", 3, "poison: bad price").await.unwrap();
/// let read = markers.read(&["k".to_string()]).await.unwrap();
/// assert_eq!((read["k"].applied, read["k"].held), (None, Some(3)));
/// # }
/// ```
pub trait MarkerStore: Send + Sync {
    /// The markers of `keys` that exist (strongly consistent).
    fn read<'a>(
        &'a self,
        keys: &'a [String],
    ) -> BoxFuture<'a, Result<HashMap<String, Marker>, StoreError>>;

    /// Moves a marker forward ([`MarkerWrite`]); [`Written::Stale`] when its condition fails.
    fn apply<'a>(&'a self, write: &'a MarkerWrite) -> BoxFuture<'a, Result<Written, StoreError>>;

    /// Marks `version` of the item `key` as parked (`held`, `heldReason`), unless a version is
    /// held already (the first park of an item holds it).
    fn hold<'a>(
        &'a self,
        key: &'a str,
        version: i64,
        reason: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// The table a consumer's own transaction writes the marker to ([`crate::Delivered::marker_write`]);
    /// `None` when the markers are not in DynamoDB.
    fn table(&self) -> Option<&str> {
        None
    }
}

/// Markers in memory: tests and examples.
///
/// ```
/// let markers = cqrs_consumer::marker::MemoryMarkers::default();
/// assert!(markers.snapshot().is_empty());
/// ```
#[derive(Debug, Default)]
pub struct MemoryMarkers {
    markers: Mutex<HashMap<String, Marker>>,
}

impl MemoryMarkers {
    /// Every marker, by key.
    ///
    /// ```
    /// assert!(cqrs_consumer::marker::MemoryMarkers::default().snapshot().is_empty());
    /// ```
    pub fn snapshot(&self) -> HashMap<String, Marker> {
        self.markers.lock().map(|m| m.clone()).unwrap_or_default()
    }
}

impl MarkerStore for MemoryMarkers {
    fn read<'a>(
        &'a self,
        keys: &'a [String],
    ) -> BoxFuture<'a, Result<HashMap<String, Marker>, StoreError>> {
        let all = self.snapshot();
        let found = keys
            .iter()
            .filter_map(|k| all.get(k).map(|m| (k.clone(), m.clone())))
            .collect();
        async move { Ok(found) }.boxed()
    }

    fn apply<'a>(&'a self, write: &'a MarkerWrite) -> BoxFuture<'a, Result<Written, StoreError>> {
        let result = match self.markers.lock() {
            Ok(mut markers) => {
                let current = markers.get(&write.key).cloned().unwrap_or_default();
                match current.after(write) {
                    Some(next) => {
                        markers.insert(write.key.clone(), next);
                        Ok(Written::Applied)
                    }
                    None => Ok(Written::Stale),
                }
            }
            Err(_) => Err(StoreError::Dynamo("memory markers poisoned".into())),
        };
        async move { result }.boxed()
    }

    fn hold<'a>(
        &'a self,
        key: &'a str,
        version: i64,
        reason: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let result = match self.markers.lock() {
            Ok(mut markers) => {
                let marker = markers.entry(key.to_string()).or_default();
                if marker.held.is_none() {
                    marker.held = Some(version);
                    marker.held_reason = Some(reason.to_string());
                }
                Ok(())
            }
            Err(_) => Err(StoreError::Dynamo("memory markers poisoned".into())),
        };
        async move { result }.boxed()
    }
}

/// The markers in a DynamoDB table (the idempotency table, `pk` only).
///
/// ```
/// # fn wire(client: aws_sdk_dynamodb::Client) {
/// let markers = cqrs_consumer::marker::DynamoMarkers::new(client, "my-service-idempotency");
/// assert_eq!(markers.table_name(), "my-service-idempotency");
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct DynamoMarkers {
    client: aws_sdk_dynamodb::Client,
    table: String,
}

impl DynamoMarkers {
    /// The markers in `table` through `client`.
    ///
    /// ```no_run
    /// # fn wire(store: &cqrs_store::Store) {
    /// let markers = cqrs_consumer::marker::DynamoMarkers::new(
    ///     store.client().clone(),
    ///     store.tables().idempotency.clone(),
    /// );
    /// # }
    /// ```
    pub fn new(client: aws_sdk_dynamodb::Client, table: impl Into<String>) -> Self {
        DynamoMarkers {
            client,
            table: table.into(),
        }
    }

    /// The table's name.
    ///
    /// ```no_run
    /// # fn show(markers: &cqrs_consumer::marker::DynamoMarkers) {
    /// println!("{}", markers.table_name());
    /// # }
    /// ```
    pub fn table_name(&self) -> &str {
        &self.table
    }
}

/// A DynamoDB error as a [`StoreError`]: throttling told apart.
fn dynamo_error<E, R>(what: &str, e: aws_sdk_dynamodb::error::SdkError<E, R>) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    let code = e.code().map(str::to_string);
    let message = format!(
        "{what}: {}",
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
}

/// A marker row as read.
fn marker_of(row: &HashMap<String, AttributeValue>) -> Marker {
    let number = |name: &str| match row.get(name) {
        Some(AttributeValue::N(n)) => n.parse::<i64>().ok(),
        _ => None,
    };
    Marker {
        applied: number("applied"),
        ttl_removed: matches!(row.get("ttlRemoved"), Some(AttributeValue::Bool(true))),
        held: number("held"),
        held_reason: match row.get("heldReason") {
            Some(AttributeValue::S(s)) => Some(s.clone()),
            _ => None,
        },
    }
}

impl MarkerStore for DynamoMarkers {
    fn read<'a>(
        &'a self,
        keys: &'a [String],
    ) -> BoxFuture<'a, Result<HashMap<String, Marker>, StoreError>> {
        async move {
            let distinct: BTreeSet<&String> = keys.iter().collect();
            let mut found = HashMap::new();
            let all: Vec<&String> = distinct.into_iter().collect();
            for chunk in all.chunks(cqrs_events::history::BATCH_GET_MAX) {
                let mut pending: Vec<HashMap<String, AttributeValue>> = chunk
                    .iter()
                    .map(|k| HashMap::from([("pk".to_string(), AttributeValue::S((*k).clone()))]))
                    .collect();
                let mut round = 0;
                while !pending.is_empty() {
                    round += 1;
                    if round > ROUNDS {
                        return Err(StoreError::Throttled(format!(
                            "BatchGetItem (consumer markers): {} keys still unprocessed after {ROUNDS} rounds",
                            pending.len()
                        )));
                    }
                    let request = KeysAndAttributes::builder()
                        .set_keys(Some(std::mem::take(&mut pending)))
                        .consistent_read(true)
                        .build()
                        .map_err(|e| {
                            StoreError::Dynamo(format!("BatchGetItem (consumer markers): {e}"))
                        })?;
                    let output = self
                        .client
                        .batch_get_item()
                        .request_items(&self.table, request)
                        .send()
                        .await
                        .map_err(|e| dynamo_error("BatchGetItem (consumer markers)", e))?;
                    for row in output
                        .responses()
                        .and_then(|r| r.get(self.table.as_str()))
                        .into_iter()
                        .flatten()
                    {
                        if let Some(AttributeValue::S(key)) = row.get("pk") {
                            found.insert(key.clone(), marker_of(row));
                        }
                    }
                    pending = output
                        .unprocessed_keys()
                        .and_then(|u| u.get(self.table.as_str()))
                        .map(|k| k.keys().to_vec())
                        .unwrap_or_default();
                    if !pending.is_empty() {
                        tokio::time::sleep(std::time::Duration::from_millis(25 << round)).await;
                    }
                }
            }
            Ok(found)
        }
        .boxed()
    }

    fn apply<'a>(&'a self, write: &'a MarkerWrite) -> BoxFuture<'a, Result<Written, StoreError>> {
        async move {
            let (update, condition, names, values) = write.expression();
            let sent = self
                .client
                .update_item()
                .table_name(&self.table)
                .key("pk", AttributeValue::S(write.key.clone()))
                .update_expression(update)
                .condition_expression(condition)
                .set_expression_attribute_names(Some(names))
                .set_expression_attribute_values(Some(values))
                .send()
                .await;
            match sent {
                Ok(_) => Ok(Written::Applied),
                Err(e) if e.code() == Some("ConditionalCheckFailedException") => Ok(Written::Stale),
                Err(e) => Err(dynamo_error("UpdateItem (consumer marker)", e)),
            }
        }
        .boxed()
    }

    fn hold<'a>(
        &'a self,
        key: &'a str,
        version: i64,
        reason: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        async move {
            let sent = self
                .client
                .update_item()
                .table_name(&self.table)
                .key("pk", AttributeValue::S(key.to_string()))
                .update_expression("SET #h = :v, #hr = :r, #u = :u")
                .condition_expression("attribute_not_exists(#h)")
                .expression_attribute_names("#h", "held")
                .expression_attribute_names("#hr", "heldReason")
                .expression_attribute_names("#u", "updatedAt")
                .expression_attribute_values(":v", AttributeValue::N(version.to_string()))
                .expression_attribute_values(":r", AttributeValue::S(reason.to_string()))
                .expression_attribute_values(
                    ":u",
                    AttributeValue::S(Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true)),
                )
                .send()
                .await;
            match sent {
                Ok(_) => Ok(()),
                Err(e) if e.code() == Some("ConditionalCheckFailedException") => Ok(()),
                Err(e) => Err(dynamo_error("UpdateItem (consumer marker, hold)", e)),
            }
        }
        .boxed()
    }

    fn table(&self) -> Option<&str> {
        Some(&self.table)
    }
}
