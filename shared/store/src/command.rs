//! The command table: versions of items written with one conditional put each, and the
//! idempotency records that make a retried command return its first result. The command handler
//! writes through [`head`](crate::head), which adds the item's head record to the same transaction.
//!
//! A version is a row `pk` / `base@version`. Writing version `v` is a `PutItem` conditional on
//! `attribute_not_exists(pk)` for that exact key, so two writers of the same version can never both
//! succeed and a lost race never overwrites anything. With an idempotency record the put and the
//! record go in one transaction, so a version and the record of the request that wrote it exist
//! together or not at all.

use std::time::{SystemTime, UNIX_EPOCH};

use aws_sdk_dynamodb::{
    operation::{put_item::PutItemError, transact_write_items::TransactWriteItemsError},
    types::{AttributeValue, Put, TransactWriteItem},
};
use cqrs_item::Item;
use cqrs_keys::{add_sort_key_version, parse_sort_key_version, sort_key_version_prefix};
use serde::{Deserialize, Serialize};

use crate::{Store, StoreError, sdk_error};

/// What an idempotency key stands for: the request it was first used with and the version that
/// request wrote. Kept until `ttl` (epoch seconds).
///
/// ```
/// let record = cqrs_store::IdempotencyRecord {
///     key: "t1#key-1".into(),
///     fingerprint: "abc".into(),
///     item_pk: "PRODUCT#t1".into(),
///     item_sk: "P001@1".into(),
///     item_id: "PRODUCT#t1#P001".into(),
///     version: 1,
///     ttl: 4_000_000_000,
/// };
/// assert!(!record.is_expired(1_800_000_000));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IdempotencyRecord {
    /// The scoped key (tenant and the client's `Idempotency-Key`), the table's partition key.
    #[serde(rename = "pk")]
    pub key: String,
    /// A digest of the request the key was first used with.
    pub fingerprint: String,
    /// `pk` of the version written.
    pub item_pk: String,
    /// `sk` (with version) of the version written.
    pub item_sk: String,
    /// `id` of the item written.
    pub item_id: String,
    /// The version written.
    pub version: i64,
    /// When the record may be forgotten (epoch seconds, DynamoDB TTL).
    pub ttl: i64,
}

impl IdempotencyRecord {
    /// Whether the record has outlived its `ttl` (DynamoDB deletes expired items lazily, so an
    /// expired record may still be read).
    ///
    /// ```
    /// # let mut record = cqrs_store::IdempotencyRecord { key: "k".into(), fingerprint: "f".into(),
    /// #   item_pk: "P#t".into(), item_sk: "a@1".into(), item_id: "P#t#a".into(), version: 1, ttl: 10 };
    /// assert!(record.is_expired(11));
    /// assert!(!record.is_expired(10));
    /// ```
    pub fn is_expired(&self, now_epoch_seconds: i64) -> bool {
        self.ttl < now_epoch_seconds
    }
}

/// The conditional `Put` of an idempotency record: its key must be free, or hold an expired record.
pub(crate) fn idempotency_put(
    store: &Store,
    record: &IdempotencyRecord,
) -> Result<Put, StoreError> {
    let attributes = serde_dynamo::to_item(record).map_err(cqrs_item::ConversionError::from)?;
    Put::builder()
        .table_name(&store.tables.idempotency)
        .set_item(Some(attributes))
        .condition_expression("attribute_not_exists(pk) OR #ttl < :now")
        .expression_attribute_names("#ttl", "ttl")
        .expression_attribute_values(":now", AttributeValue::N(now_epoch_seconds().to_string()))
        .build()
        .map_err(|e| StoreError::Dynamo(e.to_string()))
}

fn now_epoch_seconds() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default()
}

impl Store {
    /// Reads version `version` of the item `pk` / `base_sk` from the command table (strongly
    /// consistent).
    ///
    /// ```no_run
    /// # async fn example(store: &cqrs_store::Store) -> Result<(), cqrs_store::StoreError> {
    /// if let Some(item) = store.get_command("PRODUCT#t1", "P001", 3).await? {
    ///     assert_eq!(item.sk, "P001@3");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn get_command(
        &self,
        pk: &str,
        base_sk: &str,
        version: i64,
    ) -> Result<Option<Item>, StoreError> {
        let sk = add_sort_key_version(base_sk, version);
        self.get_item("GetItem (command)", &self.tables.command, pk, sk, true)
            .await
    }

    /// The newest version of `pk` / `base_sk` in the command table, `None` when there is none.
    ///
    /// Versions sort as strings in DynamoDB (`@10` before `@9`), so this reads the keys of every
    /// version (a keys-only, strongly consistent query, paged) and takes the numeric maximum.
    ///
    /// ```no_run
    /// # async fn example(store: &cqrs_store::Store) -> Result<(), cqrs_store::StoreError> {
    /// let next = store.latest_command_version("PRODUCT#t1", "P001").await?.unwrap_or(0) + 1;
    /// # Ok(()) }
    /// ```
    pub async fn latest_command_version(
        &self,
        pk: &str,
        base_sk: &str,
    ) -> Result<Option<i64>, StoreError> {
        let prefix = sort_key_version_prefix(base_sk);
        let mut pages = self
            .client
            .query()
            .table_name(&self.tables.command)
            .key_condition_expression("pk = :pk AND begins_with(sk, :prefix)")
            .expression_attribute_values(":pk", AttributeValue::S(pk.to_string()))
            .expression_attribute_values(":prefix", AttributeValue::S(prefix))
            .projection_expression("sk")
            .consistent_read(true)
            .into_paginator()
            .send();
        let mut latest = None;
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| sdk_error("Query (command versions)", e))?;
            for item in page.items() {
                let Some(AttributeValue::S(sk)) = item.get("sk") else {
                    continue;
                };
                // Only `base@<number>` belongs to this item; anything else is another item
                // whose base merely starts with ours.
                if let Ok((base, Some(version))) = parse_sort_key_version(sk)
                    && base == base_sk
                {
                    latest = latest.max(Some(version));
                }
            }
        }
        Ok(latest)
    }

    /// Writes one version row into the command table: one `PutItem` conditional on the key being
    /// free. A taken key is [`StoreError::AlreadyExists`]; nothing is overwritten.
    ///
    /// This does **not** move the item's head record: it writes a row as an older writer (or
    /// mbc-cqrs-serverless) would, which tests and tools use. The command handler writes with
    /// [`Store::write_version`], which keeps the head in the same transaction.
    ///
    /// With an idempotency record, the version and the record are written in one transaction, each
    /// conditional on its key being free (an expired record counts as free). A taken idempotency
    /// key is [`StoreError::IdempotencyKeyTaken`] and nothing is written.
    ///
    /// ```no_run
    /// # async fn example(store: &cqrs_store::Store) -> Result<(), cqrs_store::StoreError> {
    /// let item = cqrs_item::Item::example();
    /// match store.put_command(&item, None).await {
    ///     Ok(()) => println!("written"),
    ///     Err(cqrs_store::StoreError::AlreadyExists { .. }) => println!("lost the race"),
    ///     Err(other) => return Err(other),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn put_command(
        &self,
        item: &Item,
        idempotency: Option<&IdempotencyRecord>,
    ) -> Result<(), StoreError> {
        let attributes = item.to_attributes()?;
        let already_exists = || StoreError::AlreadyExists {
            pk: item.pk.clone(),
            sk: item.sk.clone(),
        };
        let Some(record) = idempotency else {
            return match self
                .client
                .put_item()
                .table_name(&self.tables.command)
                .set_item(Some(attributes))
                .condition_expression("attribute_not_exists(pk)")
                .send()
                .await
            {
                Ok(_) => Ok(()),
                Err(e)
                    if matches!(
                        e.as_service_error(),
                        Some(PutItemError::ConditionalCheckFailedException(_))
                    ) =>
                {
                    Err(already_exists())
                }
                Err(e) => Err(sdk_error("PutItem (command)", e)),
            };
        };
        let put_version = Put::builder()
            .table_name(&self.tables.command)
            .set_item(Some(attributes))
            .condition_expression("attribute_not_exists(pk)")
            .build()
            .map_err(|e| StoreError::Dynamo(e.to_string()))?;
        let put_record = idempotency_put(self, record)?;
        let result = self
            .client
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().put(put_version).build())
            .transact_items(TransactWriteItem::builder().put(put_record).build())
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(e) => {
                if let Some(TransactWriteItemsError::TransactionCanceledException(cancelled)) =
                    e.as_service_error()
                {
                    let failed = |index: usize| {
                        cancelled
                            .cancellation_reasons()
                            .get(index)
                            .and_then(|reason| reason.code())
                            == Some("ConditionalCheckFailed")
                    };
                    if failed(1) {
                        return Err(StoreError::IdempotencyKeyTaken(record.key.clone()));
                    }
                    if failed(0) {
                        return Err(already_exists());
                    }
                    let codes: Vec<&str> = cancelled
                        .cancellation_reasons()
                        .iter()
                        .filter_map(|reason| reason.code())
                        .collect();
                    return Err(crate::cancelled_error(
                        "TransactWriteItems (command + idempotency)",
                        &codes,
                        aws_sdk_dynamodb::error::DisplayErrorContext(&e).to_string(),
                    ));
                }
                Err(sdk_error("TransactWriteItems (command + idempotency)", e))
            }
        }
    }

    /// Reads the idempotency record of `key` (strongly consistent); an expired one is `None`.
    ///
    /// ```no_run
    /// # async fn example(store: &cqrs_store::Store) -> Result<(), cqrs_store::StoreError> {
    /// if let Some(first) = store.get_idempotency("t1#key-1").await? {
    ///     println!("replay of version {}", first.version);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn get_idempotency(
        &self,
        key: &str,
    ) -> Result<Option<IdempotencyRecord>, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.tables.idempotency)
            .key("pk", AttributeValue::S(key.to_string()))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| sdk_error("GetItem (idempotency)", e))?;
        let Some(attributes) = output.item else {
            return Ok(None);
        };
        let record: IdempotencyRecord =
            serde_dynamo::from_item(attributes).map_err(cqrs_item::ConversionError::from)?;
        Ok((!record.is_expired(now_epoch_seconds())).then_some(record))
    }
}
