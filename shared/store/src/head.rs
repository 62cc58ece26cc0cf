//! The head record of an item: its latest version, so that no version number is ever written
//! twice, whatever happens to old command rows (TTL, a manual delete).
//!
//! The head lives in the idempotency table (a table without a stream, already part of the write
//! transaction) under [`head_key`] (`HEAD#pk@sk`, exactly one item per key), holds `latest` (N)
//! and has no `ttl`. It is written in the same `TransactWriteItems` as the version it announces
//! ([`Store::write_version`]): conditional on `attribute_not_exists(pk)` for the first version and
//! on `latest = :previous` after, with `ReturnValuesOnConditionCheckFailure = ALL_OLD`, so a lost
//! race names the current version without another read. The head is never put in the command
//! table: its stream would carry it to data-sync (and to mbc-cqrs-serverless' own handler) as a
//! malformed record.
//!
//! **Complete heads.** When every item of a deployment has a head, a missing head means a new
//! item, and a create is the transaction alone. The heads state record ([`HEADS_STATE_KEY`], read
//! by [`Store::heads_state`]) says so: `complete` once `cqrs heads seed` has given every stored
//! item a head, or from the start for a deployment whose tables were empty when its first command
//! came ([`Store::complete_heads_if_empty`]); `shared` for tables that mbc-cqrs-serverless (or any
//! writer that does not keep heads) also writes, which are never complete. Until it says
//! `complete`, the first command on an item without a head seeds one, conditionally, from
//! [`Store::highest_stored_version`] and the item's legacy head ([`Store::latest_version`]).
//!
//! **Legacy heads.** Heads were keyed by the item id (`HEAD#pk#sk`, [`legacy_head_key`]) before,
//! and two items can share an id. A legacy head is used as a seed only when no other item with
//! the same id holds its version (the history table's `id-version-index` tells), so the larger
//! version of two colliding items never makes the other's real version unwritable.
//!
//! Positions in the transaction, which [`Store::write_version`] reads its cancellation reasons
//! by: 0 the version row, 1 the head, 2 the idempotency record (when there is one).

use std::collections::HashMap;

use aws_sdk_dynamodb::{
    operation::{
        put_item::PutItemError, transact_write_items::TransactWriteItemsError,
        update_item::UpdateItemError,
    },
    types::{
        AttributeValue, CancellationReason, Put, ReturnValuesOnConditionCheckFailure,
        TransactWriteItem,
    },
};
use cqrs_item::Item;
use cqrs_keys::{HEADS_STATE_KEY, generate_id, head_key, legacy_head_key};

use crate::{
    IdempotencyRecord, Store, StoreError, command::idempotency_put, guard::Guard,
    query::HISTORY_VERSION_INDEX, sdk_error,
};

/// The attribute of a head record that holds the latest version.
const LATEST: &str = "latest";
/// The attribute of the heads state record that holds the state.
const STATE: &str = "state";

/// Position of each element of the write transaction.
const ROW: usize = 0;
const HEAD: usize = 1;
const RECORD: usize = 2;

type Attributes = HashMap<String, AttributeValue>;

fn number(item: &Attributes, name: &str) -> Option<i64> {
    match item.get(name) {
        Some(AttributeValue::N(n)) => n.parse().ok(),
        _ => None,
    }
}

fn string<'a>(item: &'a Attributes, name: &str) -> Option<&'a str> {
    match item.get(name) {
        Some(AttributeValue::S(s)) => Some(s),
        _ => None,
    }
}

/// Whether every item of a deployment has a head ([module docs](self)).
///
/// ```
/// use cqrs_store::HeadsState;
/// assert!(HeadsState::Complete.is_complete());
/// assert!(!HeadsState::Shared.is_complete());
/// assert_eq!(HeadsState::Incomplete.as_str(), "incomplete");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadsState {
    /// Every item has a head: a missing head means the item does not exist.
    Complete,
    /// Some items may have no head yet (no state record): a command on an item without a head
    /// seeds it from the stored versions first.
    Incomplete,
    /// A writer that does not keep heads (mbc-cqrs-serverless, `Store::put_command`) shares the
    /// tables: never complete, whatever `cqrs heads seed` did.
    Shared,
}

impl HeadsState {
    /// Whether a missing head means a new item.
    ///
    /// ```
    /// assert!(!cqrs_store::HeadsState::Incomplete.is_complete());
    /// ```
    pub fn is_complete(self) -> bool {
        self == HeadsState::Complete
    }

    /// The state as the state record and the CLI write it.
    ///
    /// ```
    /// assert_eq!(cqrs_store::HeadsState::Shared.as_str(), "shared");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            HeadsState::Complete => "complete",
            HeadsState::Incomplete => "incomplete",
            HeadsState::Shared => "shared",
        }
    }

    fn from_record(item: Option<&Attributes>) -> HeadsState {
        match item.and_then(|item| string(item, STATE)) {
            Some("complete") => HeadsState::Complete,
            Some("shared") => HeadsState::Shared,
            _ => HeadsState::Incomplete,
        }
    }
}

/// Where the highest stored version of an item came from, for [`Store::highest_stored_version`]
/// and `cqrs heads seed`.
///
/// ```
/// let seed = cqrs_store::StoredVersions { rows: Some(3), history: Some(4), data: Some(4) };
/// assert_eq!(seed.highest(), Some(4));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoredVersions {
    /// The newest of the item's command rows.
    pub rows: Option<i64>,
    /// The newest version of this item (its `pk`, not only its id) in the history table.
    pub history: Option<i64>,
    /// The version the data table holds.
    pub data: Option<i64>,
}

impl StoredVersions {
    /// The highest of the three.
    ///
    /// ```
    /// assert_eq!(cqrs_store::StoredVersions::default().highest(), None);
    /// ```
    pub fn highest(&self) -> Option<i64> {
        self.rows.max(self.history).max(self.data)
    }
}

impl Store {
    /// The latest version the head of `pk` / `sk` records (a strongly consistent read; a version
    /// on `sk` is ignored); `None` when the item has no head.
    ///
    /// ```no_run
    /// # async fn example(store: &cqrs_store::Store) -> Result<(), cqrs_store::StoreError> {
    /// let latest = store.get_head("PRODUCT#t1", "P001").await?;
    /// println!("next version: {}", latest.unwrap_or(0) + 1);
    /// # Ok(()) }
    /// ```
    pub async fn get_head(&self, pk: &str, sk: &str) -> Result<Option<i64>, StoreError> {
        self.head_at(head_key(pk, sk)).await
    }

    /// The version a legacy head (`HEAD#` + the item id, before heads were keyed by `pk` and
    /// `sk`) records. Two items may share it; see the [module docs](self).
    ///
    /// ```no_run
    /// # async fn example(store: &cqrs_store::Store) -> Result<(), cqrs_store::StoreError> {
    /// let old = store.get_legacy_head("PRODUCT#t1#P001").await?;
    /// # Ok(()) }
    /// ```
    pub async fn get_legacy_head(&self, id: &str) -> Result<Option<i64>, StoreError> {
        self.head_at(legacy_head_key(id)).await
    }

    /// The value of the tenant's counter `name` (0 when it was never written), read strongly
    /// consistent: what [`Guard::Counter`] guards.
    ///
    /// ```no_run
    /// # async fn example(store: &cqrs_store::Store) -> Result<(), cqrs_store::StoreError> {
    /// let loans = store.counter("t1", "loans#m1").await?;
    /// # Ok(()) }
    /// ```
    pub async fn counter(&self, tenant: &str, name: &str) -> Result<i64, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.tables.idempotency)
            .key(
                "pk",
                AttributeValue::S(cqrs_keys::counter_key(tenant, name)),
            )
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| sdk_error("GetItem (counter)", e))?;
        Ok(output
            .item
            .as_ref()
            .and_then(|item| number(item, crate::guard::COUNTER_VALUE))
            .unwrap_or(0))
    }

    async fn head_at(&self, key: String) -> Result<Option<i64>, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.tables.idempotency)
            .key("pk", AttributeValue::S(key))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| sdk_error("GetItem (head)", e))?;
        Ok(output.item.as_ref().and_then(|item| number(item, LATEST)))
    }

    /// The deployment's heads state (one strongly consistent read of its record).
    ///
    /// ```no_run
    /// # async fn example(store: &cqrs_store::Store) -> Result<(), cqrs_store::StoreError> {
    /// if store.heads_state().await?.is_complete() {
    ///     println!("a create is one transaction");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn heads_state(&self) -> Result<HeadsState, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.tables.idempotency)
            .key("pk", AttributeValue::S(HEADS_STATE_KEY.to_string()))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| sdk_error("GetItem (heads state)", e))?;
        Ok(HeadsState::from_record(output.item.as_ref()))
    }

    /// The heads state, and for a deployment without a state record whose command, data and
    /// history tables are all empty, the record `complete` written first (conditionally): every
    /// item a deployment's functions write has a head, so a stack that starts empty starts
    /// complete. One read when the record exists; the three tables are read (one item each,
    /// concurrently) only while it does not.
    ///
    /// ```no_run
    /// # async fn example(store: &cqrs_store::Store) -> Result<(), cqrs_store::StoreError> {
    /// let state = store.complete_heads_if_empty().await?;
    /// # Ok(()) }
    /// ```
    pub async fn complete_heads_if_empty(&self) -> Result<HeadsState, StoreError> {
        let state = self.heads_state().await?;
        if state != HeadsState::Incomplete {
            return Ok(state);
        }
        let (command, data, history) = futures::try_join!(
            self.is_empty(&self.tables.command),
            self.is_empty(&self.tables.data),
            self.is_empty(&self.tables.history),
        )?;
        if !(command && data && history) {
            return Ok(HeadsState::Incomplete);
        }
        self.mark_heads(HeadsState::Complete, "empty tables at the first command")
            .await
    }

    /// Writes the heads state record: `Complete` unless the record says `Shared` (a shared table
    /// stays shared until an operator says otherwise with `Shared` → `Incomplete`), `Shared`
    /// always, `Incomplete` removes the record. Answers the state the record holds afterwards.
    ///
    /// ```no_run
    /// # async fn example(store: &cqrs_store::Store) -> Result<(), cqrs_store::StoreError> {
    /// use cqrs_store::HeadsState;
    /// let state = store.mark_heads(HeadsState::Complete, "cqrs heads seed").await?;
    /// assert_ne!(state, HeadsState::Incomplete);
    /// # Ok(()) }
    /// ```
    pub async fn mark_heads(&self, state: HeadsState, by: &str) -> Result<HeadsState, StoreError> {
        let key = AttributeValue::S(HEADS_STATE_KEY.to_string());
        if state == HeadsState::Incomplete {
            self.client
                .delete_item()
                .table_name(&self.tables.idempotency)
                .key("pk", key)
                .send()
                .await
                .map_err(|e| sdk_error("DeleteItem (heads state)", e))?;
            return Ok(HeadsState::Incomplete);
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or_default();
        let mut put = self
            .client
            .put_item()
            .table_name(&self.tables.idempotency)
            .item("pk", key)
            .item(STATE, AttributeValue::S(state.as_str().to_string()))
            .item("since", AttributeValue::N(now.to_string()))
            .item("by", AttributeValue::S(by.to_string()));
        if state == HeadsState::Complete {
            put = put
                .condition_expression("attribute_not_exists(pk) OR #state <> :shared")
                .expression_attribute_names("#state", STATE)
                .expression_attribute_values(":shared", AttributeValue::S("shared".into()));
        }
        match put.send().await {
            Ok(_) => Ok(state),
            Err(e)
                if matches!(
                    e.as_service_error(),
                    Some(PutItemError::ConditionalCheckFailedException(_))
                ) =>
            {
                Ok(HeadsState::Shared)
            }
            Err(e) => Err(sdk_error("PutItem (heads state)", e)),
        }
    }

    /// Whether `table` holds no item at all (one item read at most).
    async fn is_empty(&self, table: &str) -> Result<bool, StoreError> {
        let output = self
            .client
            .scan()
            .table_name(table)
            .limit(1)
            .projection_expression("pk")
            .send()
            .await
            .map_err(|e| sdk_error("Scan (is empty)", e))?;
        Ok(output.items().is_empty() && output.last_evaluated_key().is_none())
    }

    /// The latest version of `pk` / `base_sk` for a deployment whose heads are not complete: one
    /// read of its head (and, beside it, of its legacy head); an item without a head gets one, seeded
    /// conditionally from [`Store::highest_stored_version`] and its legacy head (when no other
    /// item with the same id holds that version); `None` when the item has no version anywhere.
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
        let (head, legacy) =
            futures::try_join!(self.get_head(pk, base_sk), self.get_legacy_head(&id))?;
        if let Some(latest) = head {
            return Ok(Some(latest));
        }
        let mut seed = self.highest_stored_version(pk, base_sk).await?.highest();
        if let Some(legacy) = legacy
            && Some(legacy) > seed
            && !self.other_item_holds(pk, &id, legacy).await?
        {
            seed = Some(legacy);
        }
        let Some(seed) = seed else {
            return Ok(None);
        };
        let seeded = self
            .client
            .put_item()
            .table_name(&self.tables.idempotency)
            .item("pk", AttributeValue::S(head_key(pk, base_sk)))
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
                self.get_head(pk, base_sk).await
            }
            Err(e) => Err(sdk_error("PutItem (seed head)", e)),
        }
    }

    /// Raises the head of `pk` / `base_sk` to `version` unless it already records as much:
    /// `cqrs heads seed`'s write, safe while commands run (a head only ever moves up, and a
    /// command based on the old value fails its condition and reads again). `true` when it
    /// wrote.
    ///
    /// ```no_run
    /// # async fn example(store: &cqrs_store::Store) -> Result<(), cqrs_store::StoreError> {
    /// let raised = store.raise_head("PRODUCT#t1", "P001", 7).await?;
    /// # Ok(()) }
    /// ```
    pub async fn raise_head(
        &self,
        pk: &str,
        base_sk: &str,
        version: i64,
    ) -> Result<bool, StoreError> {
        let raised = self
            .client
            .update_item()
            .table_name(&self.tables.idempotency)
            .key("pk", AttributeValue::S(head_key(pk, base_sk)))
            .update_expression("SET #latest = :v")
            .condition_expression("attribute_not_exists(pk) OR #latest < :v")
            .expression_attribute_names("#latest", LATEST)
            .expression_attribute_values(":v", AttributeValue::N(version.to_string()))
            .send()
            .await;
        match raised {
            Ok(_) => Ok(true),
            Err(e)
                if matches!(
                    e.as_service_error(),
                    Some(UpdateItemError::ConditionalCheckFailedException(_))
                ) =>
            {
                Ok(false)
            }
            Err(e) => Err(sdk_error("UpdateItem (raise head)", e)),
        }
    }

    /// The highest version of `pk` / `base_sk` stored anywhere: its command rows (strongly
    /// consistent), its entries in the history table's `id-version-index` (newest first, only
    /// those of this `pk`: another item may share the id) and the data table (strongly
    /// consistent). Each may have lost versions (TTL, deletes); together they give the best seed
    /// for a missing head.
    ///
    /// ```no_run
    /// # async fn example(store: &cqrs_store::Store) -> Result<(), cqrs_store::StoreError> {
    /// let highest = store.highest_stored_version("PRODUCT#t1", "P001").await?.highest();
    /// # Ok(()) }
    /// ```
    pub async fn highest_stored_version(
        &self,
        pk: &str,
        base_sk: &str,
    ) -> Result<StoredVersions, StoreError> {
        let id = generate_id(pk, base_sk);
        let (rows, history, data) = futures::try_join!(
            self.latest_command_version(pk, base_sk),
            self.history_version_of(&id, pk, "="),
            self.data_version(pk, base_sk),
        )?;
        Ok(StoredVersions {
            rows,
            history,
            data,
        })
    }

    /// Whether an item other than the one in `pk` that has the id `id` holds `version` or a
    /// higher one in the history table: then a legacy head of that id may be that item's.
    ///
    /// ```no_run
    /// # async fn example(store: &cqrs_store::Store) -> Result<(), cqrs_store::StoreError> {
    /// // ("ORDER#t1", "ORDER#o1") and ("ORDER#t1#ORDER", "o1") share the id ORDER#t1#ORDER#o1.
    /// let shared = store.other_item_holds("ORDER#t1", "ORDER#t1#ORDER#o1", 3).await?;
    /// # Ok(()) }
    /// ```
    pub async fn other_item_holds(
        &self,
        pk: &str,
        id: &str,
        version: i64,
    ) -> Result<bool, StoreError> {
        let other = self.history_version_of(id, pk, "<>").await?;
        Ok(other.is_some_and(|other| other >= version))
    }

    /// The newest version in the history table's version index of id `id` whose `pk` compares
    /// to `pk` by `op` (`=` this item, `<>` the others that share its id). The filter applies
    /// after each page's limit, so this pages until an entry matches or the id has no more.
    async fn history_version_of(
        &self,
        id: &str,
        pk: &str,
        op: &str,
    ) -> Result<Option<i64>, StoreError> {
        let mut pages = self
            .client
            .query()
            .table_name(&self.tables.history)
            .index_name(HISTORY_VERSION_INDEX)
            .key_condition_expression("id = :id")
            .filter_expression(format!("pk {op} :pk"))
            .expression_attribute_values(":id", AttributeValue::S(id.to_string()))
            .expression_attribute_values(":pk", AttributeValue::S(pk.to_string()))
            .projection_expression("version")
            .scan_index_forward(false)
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| sdk_error("Query (history versions)", e))?;
            if let Some(newest) = page
                .items()
                .iter()
                .filter_map(|item| number(item, "version"))
                .max()
            {
                return Ok(Some(newest));
            }
        }
        Ok(None)
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
    /// free or expired). All or nothing. The head and the record return what they held when
    /// their condition fails, so no failure needs another read.
    ///
    /// Failures, in this order: a key held by an earlier request is
    /// [`StoreError::IdempotencyReplay`] with that request's record; a head that moved is
    /// [`StoreError::StaleVersion`] with the head's current version (`None` when the item has no
    /// head); a taken row is [`StoreError::AlreadyExists`]; a transaction conflict is
    /// [`StoreError::WriteConflict`]; throttling is [`StoreError::Throttled`].
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
        self.write_version_guarded(item, previous, idempotency, &[])
            .await
    }

    /// [`Store::write_version`] with `guards` in the same transaction, after the version, its
    /// head and its record: the version is written only if every guard holds too. A guard that
    /// does not hold is [`StoreError::GuardFailed`] with its position in `guards` (after the
    /// idempotency record's and the head's failures, which say more); nothing is written then. A
    /// guard that can never hold ([`Guard::never_holds`]) fails before any request. A counter
    /// guard's condition is evaluated on the counter as the transaction finds it, so two commands
    /// that race for the last unit of a counter cannot both be written.
    ///
    /// ```no_run
    /// # async fn example(store: &cqrs_store::Store, item: cqrs_item::Item) -> Result<(), cqrs_store::StoreError> {
    /// use cqrs_store::guard::Guard;
    /// let at_most_3 = Guard::counter("t1", "loans#m1", 1, 3).map_err(cqrs_store::StoreError::Dynamo)?;
    /// match store.write_version_guarded(&item, None, None, &[at_most_3]).await {
    ///     Err(cqrs_store::StoreError::GuardFailed { index: 0 }) => println!("m1 holds 3 loans"),
    ///     other => other?,
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn write_version_guarded(
        &self,
        item: &Item,
        previous: Option<i64>,
        idempotency: Option<&IdempotencyRecord>,
        guards: &[Guard],
    ) -> Result<(), StoreError> {
        if let Some(index) = guards.iter().position(Guard::never_holds) {
            return Err(StoreError::GuardFailed { index });
        }
        let build = |e: aws_sdk_dynamodb::error::BuildError| StoreError::Dynamo(e.to_string());
        let put_row = Put::builder()
            .table_name(&self.tables.command)
            .set_item(Some(item.to_attributes()?))
            .condition_expression("attribute_not_exists(pk)")
            .build()
            .map_err(build)?;
        let head = Put::builder()
            .table_name(&self.tables.idempotency)
            .item("pk", AttributeValue::S(head_key(&item.pk, &item.sk)))
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
            let mut put = idempotency_put(self, record)?;
            put.return_values_on_condition_check_failure =
                Some(ReturnValuesOnConditionCheckFailure::AllOld);
            transaction = transaction.transact_items(TransactWriteItem::builder().put(put).build());
        }
        // Where the guards start in the transaction.
        let first_guard = if idempotency.is_some() {
            RECORD + 1
        } else {
            RECORD
        };
        for guard in guards {
            transaction =
                transaction.transact_items(guard.to_transact_item(&self.tables.idempotency)?);
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
            let first = reasons
                .get(RECORD)
                .and_then(CancellationReason::item)
                .and_then(|old| serde_dynamo::from_item::<_, IdempotencyRecord>(old.clone()).ok());
            return Err(match first {
                Some(first) => StoreError::IdempotencyReplay(Box::new(first)),
                None => StoreError::IdempotencyKeyTaken(record.key.clone()),
            });
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
        if let Some(index) =
            (0..guards.len()).find(|i| code(first_guard + i) == Some("ConditionalCheckFailed"))
        {
            return Err(StoreError::GuardFailed { index });
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

/// A table whose rows name item versions, for `cqrs heads seed`'s scans.
///
/// ```
/// assert_ne!(cqrs_store::head::VersionTable::Command, cqrs_store::head::VersionTable::Data);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VersionTable {
    /// Command rows, `sk = base@version`.
    Command,
    /// History rows, `sk = base@version`.
    History,
    /// Data items, `sk = base`, `version` an attribute.
    Data,
}

/// One stored version read by a seed scan.
///
/// ```
/// let v = cqrs_store::head::StoredVersion { pk: "P#t1".into(), base_sk: "a".into(), version: 2 };
/// assert_eq!(v.version, 2);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredVersion {
    /// The item's partition key.
    pub pk: String,
    /// The item's sort key without version.
    pub base_sk: String,
    /// The version.
    pub version: i64,
}

/// One page of a seed scan, and where the next starts (`None`: the table is done).
///
/// ```
/// let page = cqrs_store::head::SeedPage::<i64>::default();
/// assert!(page.rows.is_empty() && page.next.is_none());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeedPage<T> {
    /// What the page held.
    pub rows: Vec<T>,
    /// The key the next page starts after, as the scan's `ExclusiveStartKey` (strings only).
    pub next: Option<std::collections::BTreeMap<String, String>>,
}

impl<T> Default for SeedPage<T> {
    fn default() -> Self {
        SeedPage {
            rows: Vec::new(),
            next: None,
        }
    }
}

fn start_key(
    start: Option<&std::collections::BTreeMap<String, String>>,
) -> Option<HashMap<String, AttributeValue>> {
    start.map(|key| {
        key.iter()
            .map(|(k, v)| (k.clone(), AttributeValue::S(v.clone())))
            .collect()
    })
}

fn next_key(
    key: Option<&HashMap<String, AttributeValue>>,
) -> Option<std::collections::BTreeMap<String, String>> {
    let key = key.filter(|k| !k.is_empty())?;
    Some(
        key.iter()
            .filter_map(|(k, v)| v.as_s().ok().map(|s| (k.clone(), s.clone())))
            .collect(),
    )
}

impl Store {
    /// One page (at most `limit` rows) of a scan of `table` for `cqrs heads seed`: each row's
    /// item and version (keys and version only are read). Rows whose sort key holds no version
    /// (command, history) or that have no `version` (data) are left out.
    ///
    /// ```no_run
    /// use cqrs_store::head::VersionTable;
    /// # async fn example(store: &cqrs_store::Store) -> Result<(), cqrs_store::StoreError> {
    /// let page = store.scan_versions_page(VersionTable::Command, None, 500).await?;
    /// # Ok(()) }
    /// ```
    pub async fn scan_versions_page(
        &self,
        table: VersionTable,
        start: Option<&std::collections::BTreeMap<String, String>>,
        limit: u32,
    ) -> Result<SeedPage<StoredVersion>, StoreError> {
        let name = match table {
            VersionTable::Command => &self.tables.command,
            VersionTable::History => &self.tables.history,
            VersionTable::Data => &self.tables.data,
        };
        let output = self
            .client
            .scan()
            .table_name(name)
            .projection_expression("pk, sk, version")
            .consistent_read(true)
            .limit(i32::try_from(limit.max(1)).unwrap_or(i32::MAX))
            .set_exclusive_start_key(start_key(start))
            .send()
            .await
            .map_err(|e| sdk_error("Scan (seed heads)", e))?;
        let rows = output
            .items()
            .iter()
            .filter_map(|row| {
                let (pk, sk) = (string(row, "pk")?, string(row, "sk")?);
                let (base, version) = match table {
                    VersionTable::Data => (sk, number(row, "version")?),
                    _ => match cqrs_keys::parse_sort_key_version(sk) {
                        Ok((base, Some(version))) => (base, version),
                        _ => return None,
                    },
                };
                Some(StoredVersion {
                    pk: pk.to_string(),
                    base_sk: base.to_string(),
                    version,
                })
            })
            .collect();
        Ok(SeedPage {
            rows,
            next: next_key(output.last_evaluated_key()),
        })
    }

    /// One page of the legacy heads (`HEAD#` + an item id, no `@`) in the idempotency table:
    /// each head's id and version.
    ///
    /// ```no_run
    /// # async fn example(store: &cqrs_store::Store) -> Result<(), cqrs_store::StoreError> {
    /// let page = store.scan_legacy_heads_page(None, 500).await?;
    /// for (id, latest) in page.rows {
    ///     println!("{id}: {latest}");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn scan_legacy_heads_page(
        &self,
        start: Option<&std::collections::BTreeMap<String, String>>,
        limit: u32,
    ) -> Result<SeedPage<(String, i64)>, StoreError> {
        let prefix = legacy_head_key("");
        let output = self
            .client
            .scan()
            .table_name(&self.tables.idempotency)
            .filter_expression("begins_with(pk, :head) AND NOT contains(pk, :at)")
            .expression_attribute_values(":head", AttributeValue::S(prefix.clone()))
            .expression_attribute_values(
                ":at",
                AttributeValue::S(cqrs_keys::VER_SEPARATOR.to_string()),
            )
            .consistent_read(true)
            .limit(i32::try_from(limit.max(1)).unwrap_or(i32::MAX))
            .set_exclusive_start_key(start_key(start))
            .send()
            .await
            .map_err(|e| sdk_error("Scan (legacy heads)", e))?;
        let rows = output
            .items()
            .iter()
            .filter_map(|row| {
                let id = string(row, "pk")?.strip_prefix(prefix.as_str())?;
                Some((id.to_string(), number(row, LATEST)?))
            })
            .collect();
        Ok(SeedPage {
            rows,
            next: next_key(output.last_evaluated_key()),
        })
    }

    /// Every item the history table holds under id `id` (two items can share one): each item's
    /// `pk` and base sort key, and its newest version there.
    ///
    /// ```no_run
    /// # async fn example(store: &cqrs_store::Store) -> Result<(), cqrs_store::StoreError> {
    /// let items = store.items_with_id("ORDER#t1#ORDER#o1").await?;
    /// if items.len() > 1 {
    ///     println!("the id is shared by {} items", items.len());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn items_with_id(&self, id: &str) -> Result<Vec<StoredVersion>, StoreError> {
        let mut pages = self
            .client
            .query()
            .table_name(&self.tables.history)
            .index_name(HISTORY_VERSION_INDEX)
            .key_condition_expression("id = :id")
            .expression_attribute_values(":id", AttributeValue::S(id.to_string()))
            .projection_expression("pk, sk, version")
            .into_paginator()
            .send();
        let mut items: Vec<StoredVersion> = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| sdk_error("Query (items of an id)", e))?;
            for row in page.items() {
                let (Some(pk), Some(sk), Some(version)) =
                    (string(row, "pk"), string(row, "sk"), number(row, "version"))
                else {
                    continue;
                };
                let base = cqrs_keys::remove_sort_key_version(sk);
                match items.iter_mut().find(|i| i.pk == pk && i.base_sk == base) {
                    Some(known) => known.version = known.version.max(version),
                    None => items.push(StoredVersion {
                        pk: pk.to_string(),
                        base_sk: base.to_string(),
                        version,
                    }),
                }
            }
        }
        Ok(items)
    }
}
