//! The head record of an item: its latest version, so that no version number is ever written
//! twice, whatever happens to old command rows (TTL, a manual delete).
//!
//! The head lives in the idempotency table (a table without a stream, already part of the write
//! transaction) under [`head_key`] (`HEAD#pk#sk`), holds `latest` (N) and has no `ttl`. It is
//! written in the same `TransactWriteItems` as the version it announces
//! ([`Store::write_version`]): conditional on `attribute_not_exists(pk)` for the first version and
//! on `latest = :previous` after, with `ReturnValuesOnConditionCheckFailure = ALL_OLD`, so a lost
//! race names the current version without another read. The head is never put in the command
//! table: its stream would carry it to data-sync (and to mbc-cqrs-serverless' own handler) as a
//! malformed record.
//!
//! An item written before heads existed (or by mbc-cqrs-serverless) has none; the first command
//! on it seeds the head, conditionally, from the highest version among its command rows, the
//! history table's `id-version-index` and the data table ([`Store::latest_version`]).
//!
//! Positions in the transaction, which [`Store::write_version`] reads its cancellation reasons
//! by: 0 the version row, 1 the head, 2 the idempotency record (when there is one).

use aws_sdk_dynamodb::{
    operation::{put_item::PutItemError, transact_write_items::TransactWriteItemsError},
    types::{
        AttributeValue, CancellationReason, Put, ReturnValuesOnConditionCheckFailure,
        TransactWriteItem,
    },
};
use cqrs_item::Item;
use cqrs_keys::{generate_id, head_key};

use crate::{
    IdempotencyRecord, Store, StoreError, command::idempotency_put, query::HISTORY_VERSION_INDEX,
    sdk_error,
};

/// The attribute of a head record that holds the latest version.
const LATEST: &str = "latest";

/// Position of each element of the write transaction.
const ROW: usize = 0;
const HEAD: usize = 1;
const RECORD: usize = 2;

fn number(item: &std::collections::HashMap<String, AttributeValue>, name: &str) -> Option<i64> {
    match item.get(name) {
        Some(AttributeValue::N(n)) => n.parse().ok(),
        _ => None,
    }
}

impl Store {
    /// The latest version the head of item `id` records (a strongly consistent read); `None` when
    /// the item has no head.
    ///
    /// ```no_run
    /// # async fn example(store: &cqrs_store::Store) -> Result<(), cqrs_store::StoreError> {
    /// let latest = store.get_head("PRODUCT#t1#P001").await?;
    /// println!("next version: {}", latest.unwrap_or(0) + 1);
    /// # Ok(()) }
    /// ```
    pub async fn get_head(&self, id: &str) -> Result<Option<i64>, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.tables.idempotency)
            .key("pk", AttributeValue::S(head_key(id)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| sdk_error("GetItem (head)", e))?;
        Ok(output.item.as_ref().and_then(|item| number(item, LATEST)))
    }

    /// The latest version of `pk` / `base_sk`: one read of its head. An item without a head
    /// (written before heads existed, or by mbc-cqrs-serverless) gets one, seeded conditionally
    /// from [`Store::highest_stored_version`]; `None` when the item has no version anywhere.
    ///
    /// ```no_run
    /// # async fn example(store: &cqrs_store::Store) -> Result<(), cqrs_store::StoreError> {
    /// match store.latest_version("PRODUCT#t1", "P001").await? {
    ///     Some(latest) => println!("at version {latest}"),
    ///     None => println!("never written"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn latest_version(&self, pk: &str, base_sk: &str) -> Result<Option<i64>, StoreError> {
        let id = generate_id(pk, base_sk);
        if let Some(latest) = self.get_head(&id).await? {
            return Ok(Some(latest));
        }
        let Some(seed) = self.highest_stored_version(pk, base_sk).await? else {
            return Ok(None);
        };
        let seeded = self
            .client
            .put_item()
            .table_name(&self.tables.idempotency)
            .item("pk", AttributeValue::S(head_key(&id)))
            .item(LATEST, AttributeValue::N(seed.to_string()))
            .condition_expression("attribute_not_exists(pk)")
            .send()
            .await;
        match seeded {
            Ok(_) => Ok(Some(seed)),
            // Another writer seeded it, or wrote a version, first: its head is the truth.
            Err(e)
                if matches!(
                    e.as_service_error(),
                    Some(PutItemError::ConditionalCheckFailedException(_))
                ) =>
            {
                self.get_head(&id).await
            }
            Err(e) => Err(sdk_error("PutItem (seed head)", e)),
        }
    }

    /// The highest version of `pk` / `base_sk` stored anywhere without a head: its command rows
    /// (strongly consistent), the history table's `id-version-index` (newest first, one item) and
    /// the data table (strongly consistent). Each may have lost versions (TTL, deletes); together
    /// they give the best seed for a missing head.
    ///
    /// ```no_run
    /// # async fn example(store: &cqrs_store::Store) -> Result<(), cqrs_store::StoreError> {
    /// let highest = store.highest_stored_version("PRODUCT#t1", "P001").await?;
    /// # Ok(()) }
    /// ```
    pub async fn highest_stored_version(
        &self,
        pk: &str,
        base_sk: &str,
    ) -> Result<Option<i64>, StoreError> {
        let id = generate_id(pk, base_sk);
        let (rows, history, data) = futures::try_join!(
            self.latest_command_version(pk, base_sk),
            self.latest_history_version(&id),
            self.data_version(pk, base_sk),
        )?;
        Ok(rows.max(history).max(data))
    }

    /// The newest version of item `id` in the history table's version index.
    async fn latest_history_version(&self, id: &str) -> Result<Option<i64>, StoreError> {
        let output = self
            .client
            .query()
            .table_name(&self.tables.history)
            .index_name(HISTORY_VERSION_INDEX)
            .key_condition_expression("id = :id")
            .expression_attribute_values(":id", AttributeValue::S(id.to_string()))
            .projection_expression("version")
            .scan_index_forward(false)
            .limit(1)
            .send()
            .await
            .map_err(|e| sdk_error("Query (history versions)", e))?;
        Ok(output
            .items()
            .iter()
            .filter_map(|item| number(item, "version"))
            .max())
    }

    /// The version the data table holds for `pk` / `base_sk` (strongly consistent).
    async fn data_version(&self, pk: &str, base_sk: &str) -> Result<Option<i64>, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.tables.data)
            .key("pk", AttributeValue::S(pk.to_string()))
            .key("sk", AttributeValue::S(base_sk.to_string()))
            .projection_expression("version")
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| sdk_error("GetItem (data version)", e))?;
        Ok(output
            .item
            .as_ref()
            .and_then(|item| number(item, "version")))
    }

    /// Writes `item` as the next version of its item in one `TransactWriteItems`: the version row
    /// (conditional on its key being free), the head moved from `previous` to `item.version`
    /// (conditional on the head being absent when `previous` is `None`, on `latest = previous`
    /// otherwise), and the idempotency record when there is one (conditional on its key being
    /// free or expired). All or nothing.
    ///
    /// Failures, in this order: a taken idempotency key is [`StoreError::IdempotencyKeyTaken`];
    /// a head that moved is [`StoreError::StaleVersion`] with the head's current version (read
    /// from the failed check, `None` when the item has no head); a taken row is
    /// [`StoreError::AlreadyExists`]; a transaction conflict is [`StoreError::WriteConflict`];
    /// throttling is [`StoreError::Throttled`].
    ///
    /// ```no_run
    /// # async fn example(store: &cqrs_store::Store) -> Result<(), cqrs_store::StoreError> {
    /// let mut item = cqrs_item::Item::example();
    /// let latest = store.latest_version(&item.pk, item.base_sk()).await?;
    /// item.version = latest.unwrap_or(0) + 1;
    /// item.sk = cqrs_keys::add_sort_key_version(item.base_sk(), item.version);
    /// match store.write_version(&item, latest, None).await {
    ///     Ok(()) => println!("written"),
    ///     Err(cqrs_store::StoreError::StaleVersion { latest, .. }) => println!("now at {latest:?}"),
    ///     Err(other) => return Err(other),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn write_version(
        &self,
        item: &Item,
        previous: Option<i64>,
        idempotency: Option<&IdempotencyRecord>,
    ) -> Result<(), StoreError> {
        let build = |e: aws_sdk_dynamodb::error::BuildError| StoreError::Dynamo(e.to_string());
        let put_row = Put::builder()
            .table_name(&self.tables.command)
            .set_item(Some(item.to_attributes()?))
            .condition_expression("attribute_not_exists(pk)")
            .build()
            .map_err(build)?;
        let head = Put::builder()
            .table_name(&self.tables.idempotency)
            .item("pk", AttributeValue::S(head_key(&item.id)))
            .item(LATEST, AttributeValue::N(item.version.to_string()))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        let head = match previous {
            None => head.condition_expression("attribute_not_exists(pk)"),
            Some(previous) => head
                .condition_expression("#latest = :previous")
                .expression_attribute_names("#latest", LATEST)
                .expression_attribute_values(":previous", AttributeValue::N(previous.to_string())),
        }
        .build()
        .map_err(build)?;
        let mut transaction = self
            .client
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().put(put_row).build())
            .transact_items(TransactWriteItem::builder().put(head).build());
        if let Some(record) = idempotency {
            transaction = transaction.transact_items(
                TransactWriteItem::builder()
                    .put(idempotency_put(self, record)?)
                    .build(),
            );
        }
        let Err(error) = transaction.send().await else {
            return Ok(());
        };
        let Some(TransactWriteItemsError::TransactionCanceledException(cancelled)) =
            error.as_service_error()
        else {
            return Err(sdk_error("TransactWriteItems (version + head)", error));
        };
        let reasons = cancelled.cancellation_reasons();
        let code = |index: usize| reasons.get(index).and_then(CancellationReason::code);
        if let Some(record) = idempotency
            && code(RECORD) == Some("ConditionalCheckFailed")
        {
            return Err(StoreError::IdempotencyKeyTaken(record.key.clone()));
        }
        if code(HEAD) == Some("ConditionalCheckFailed") {
            let latest = reasons
                .get(HEAD)
                .and_then(CancellationReason::item)
                .and_then(|old| number(old, LATEST));
            return Err(StoreError::StaleVersion {
                id: item.id.clone(),
                latest,
            });
        }
        if code(ROW) == Some("ConditionalCheckFailed") {
            return Err(StoreError::AlreadyExists {
                pk: item.pk.clone(),
                sk: item.sk.clone(),
            });
        }
        let codes: Vec<&str> = reasons
            .iter()
            .filter_map(CancellationReason::code)
            .collect();
        Err(crate::cancelled_error(
            "TransactWriteItems (version + head)",
            &codes,
            aws_sdk_dynamodb::error::DisplayErrorContext(&error).to_string(),
        ))
    }
}
