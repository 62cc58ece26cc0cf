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
//! by [`Store::heads_state`], or with a TTL policy in one `BatchGetItem` by
//! [`Store::heads_state_with_ttl_policy`]) says so: `complete` once `cqrs heads seed` has given
//! every stored item a head, or from the start for a deployment that held no version and no head
//! (strongly consistent scans) when its first command came ([`Store::complete_heads_if_empty`]);
//! `shared` for tables that mbc-cqrs-serverless (or any writer that does not keep heads) also
//! writes, which are never complete. A command handler container reads the record again every
//! [`HEADS_STATE_MAX_AGE`], so a mark reaches it within that time.
//!
//! **Heads not complete.** Until the record says `complete` (and always when it says `shared`),
//! a head is a lower bound, never the answer: another writer may have written above it. A
//! command reads the head with what data-sync projected and the command row above the highest
//! of these, and raises the head to what it found before it writes ([`Store::latest_version`]);
//! an item without a head gets one, seeded from [`Store::highest_stored_version`] and its legacy
//! head.
//!
//! **Keys that cannot exist.** An item id of 2044 to 2048 bytes (written before heads, or by
//! mbc-cqrs-serverless) makes `HEAD#pk@sk` longer than DynamoDB's 2048-byte key limit
//! ([`cqrs_keys::validate_derived_keys`]). Such an item has no head: reads never send its key
//! ([`Store::get_head`] answers `None`), and a write of its head is refused before any request.
//!
//! **Legacy heads.** Heads were keyed by the item id (`HEAD#pk#sk`, [`legacy_head_key`]) before,
//! and two items can share an id. A legacy head is used as a seed only when no other item with
//! the same id holds its version (the history table's `id-version-index` tells), so the larger
//! version of two colliding items never makes the other's real version unwritable.
//!
//! **Mirrors.** The head of an item some declared reference names also mirrors its latest version
//! ([`Store::write_version_constrained`]: `mv`, the version it describes, `del`, `m`), so that a
//! referencing command checks the target in its own transaction without reading it. A head
//! raised by [`Store::raise_head`] keeps its old `mv`: the mirror is then stale, which the check
//! tells apart ([`crate::guard::HeadRefusal::Stale`]) and `cqrs rebuild --constraints` fixes.
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
        AttributeValue, CancellationReason, KeysAndAttributes, Put,
        ReturnValuesOnConditionCheckFailure, TransactWriteItem,
    },
};
use cqrs_item::Item;
use cqrs_keys::{HEADS_STATE_KEY, generate_id, head_key, legacy_head_key};

use crate::{
    IdempotencyRecord, Store, StoreError,
    command::idempotency_put,
    guard::{Guard, HeadMirror, MIRROR_ATTRIBUTES, MIRROR_DELETED, MIRROR_VERSION},
    query::HISTORY_VERSION_INDEX,
    sdk_error,
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

/// The head key of `pk` / `sk`, or why DynamoDB could not store it: an item id (`pk#sk`) of 2044
/// to 2048 bytes (written before heads, or by mbc-cqrs-serverless) makes `HEAD#pk@sk` longer than
/// its 2048-byte key limit ([`cqrs_keys::validate_derived_keys`]). Such an item has no head, and
/// never gets one.
fn checked_head_key(pk: &str, sk: &str) -> Result<String, cqrs_keys::KeyError> {
    cqrs_keys::validate_derived_keys(pk, cqrs_keys::remove_sort_key_version(sk))?;
    Ok(head_key(pk, sk))
}

/// [`checked_head_key`] for a write: a key that cannot exist is an error of the caller, which
/// refuses such items first (the command handler with a 400, the seed by listing them).
fn writable_head_key(pk: &str, sk: &str) -> Result<String, StoreError> {
    checked_head_key(pk, sk).map_err(|e| {
        StoreError::Conversion(cqrs_item::ConversionError::Invalid {
            field: "sk".into(),
            reason: e.to_string(),
        })
    })
}

/// How long the command handler keeps the heads state it read before reading it again: a mark
/// (`cqrs heads mark`, the seed's `complete`) reaches every warm container within this time.
///
/// ```
/// assert_eq!(cqrs_store::head::HEADS_STATE_MAX_AGE.as_secs(), 60);
/// ```
pub const HEADS_STATE_MAX_AGE: std::time::Duration = std::time::Duration::from_secs(60);

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
    /// Some items may have no head yet (no state record): a head is a lower bound, and a command
    /// reads the stored versions above it first ([`Store::latest_version`]).
    Incomplete,
    /// A writer that does not keep heads (mbc-cqrs-serverless, `Store::put_command`) shares the
    /// tables: never complete, whatever `cqrs heads seed` did; a head is a lower bound, as with
    /// `Incomplete`.
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
        // A key DynamoDB cannot store holds no head: never send it.
        match checked_head_key(pk, sk) {
            Ok(key) => self.head_at(key).await,
            Err(_) => Ok(None),
        }
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
        let key = legacy_head_key(id);
        if key.len() > cqrs_keys::MAX_PARTITION_KEY_BYTES {
            return Ok(None);
        }
        self.head_at(key).await
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

    /// The heads state and the TTL policy of `table` for `tenant` (else `common`'s, as
    /// [`Store::ttl_policy`] reads it at `now`, epoch seconds) in one `BatchGetItem` across the
    /// idempotency table (the state record) and the data table (the two policy items), all
    /// strongly consistent; keys DynamoDB leaves unprocessed are asked again (with a short
    /// backoff, up to 8 times, then [`StoreError::Throttled`]). What a command handler container
    /// reads before its first command: the calls of a hand-written create, which reads its TTL
    /// policy the same way. A `table` that cannot name a policy reads the state alone.
    ///
    /// ```no_run
    /// # async fn example(store: &cqrs_store::Store) -> Result<(), cqrs_store::StoreError> {
    /// let (state, policy) = store.heads_state_with_ttl_policy("t1", "order", 1_700_000_000).await?;
    /// if let Some(policy) = policy {
    ///     println!("heads {}, orders kept {} days", state.as_str(), policy.days);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn heads_state_with_ttl_policy(
        &self,
        tenant: &str,
        table: &str,
        now: i64,
    ) -> Result<(HeadsState, Option<crate::ttl_policy::TtlPolicy>), StoreError> {
        let Ok(sk) = cqrs_keys::master::ttl_policy_sk(table) else {
            return Ok((self.heads_state().await?, None));
        };
        let own = cqrs_keys::master_pk(Some(tenant));
        let common = cqrs_keys::master_pk(Some(cqrs_keys::TENANT_COMMON));
        let policy_key = |pk: &str| {
            HashMap::from([
                ("pk".to_string(), AttributeValue::S(pk.to_string())),
                ("sk".to_string(), AttributeValue::S(sk.clone())),
            ])
        };
        let mut keys: HashMap<String, Vec<Attributes>> = HashMap::new();
        keys.entry(self.tables.idempotency.clone())
            .or_default()
            .push(HashMap::from([(
                "pk".to_string(),
                AttributeValue::S(HEADS_STATE_KEY.to_string()),
            )]));
        let data_keys = keys.entry(self.tables.data.clone()).or_default();
        data_keys.push(policy_key(&own));
        if own != common {
            data_keys.push(policy_key(&common));
        }
        let found = self
            .batch_get_tables(keys, "BatchGetItem (heads state, TTL policy)")
            .await?;
        let pick = |table: &str, pk: &str, sk: Option<&str>| {
            found
                .iter()
                .filter(|(t, _)| t == table)
                .map(|(_, item)| item)
                .find(|item| {
                    string(item, "pk") == Some(pk)
                        && sk.is_none_or(|sk| string(item, "sk") == Some(sk))
                })
                .cloned()
        };
        let state =
            HeadsState::from_record(pick(&self.tables.idempotency, HEADS_STATE_KEY, None).as_ref());
        let item = |pk: &str| {
            pick(&self.tables.data, pk, Some(&sk))
                .map(Item::from_attributes)
                .transpose()
        };
        // `common`'s own policy is `common`'s, as `Store::ttl_policy` says.
        let own_item = if own == common { None } else { item(&own)? };
        let common_item = item(&common)?;
        Ok((
            state,
            crate::ttl_policy::policy_of(own_item, common_item, now),
        ))
    }

    /// One `BatchGetItem` of `keys` (by table, strongly consistent, at most 100 keys in all),
    /// asking again for what DynamoDB left unprocessed; answers each item found with its table.
    async fn batch_get_tables(
        &self,
        keys: HashMap<String, Vec<Attributes>>,
        what: &str,
    ) -> Result<Vec<(String, Attributes)>, StoreError> {
        let mut pending = HashMap::with_capacity(keys.len());
        for (table, keys) in keys {
            let request = KeysAndAttributes::builder()
                .set_keys(Some(keys))
                .consistent_read(true)
                .build()
                .map_err(|e| StoreError::Dynamo(format!("{what}: {e}")))?;
            pending.insert(table, request);
        }
        let mut found = Vec::new();
        let mut attempt = 0u32;
        while !pending.is_empty() {
            let output = self
                .client
                .batch_get_item()
                .set_request_items(Some(pending))
                .send()
                .await
                .map_err(|e| sdk_error(what, e))?;
            for (table, items) in output.responses.unwrap_or_default() {
                found.extend(items.into_iter().map(|item| (table.clone(), item)));
            }
            pending = output.unprocessed_keys.unwrap_or_default();
            pending.retain(|_, request| !request.keys().is_empty());
            if !pending.is_empty() {
                attempt += 1;
                if attempt > 8 {
                    return Err(StoreError::Throttled(format!(
                        "{what}: keys still unprocessed after 8 retries"
                    )));
                }
                tokio::time::sleep(std::time::Duration::from_millis(10u64 << attempt.min(6))).await;
            }
        }
        Ok(found)
    }

    /// The heads state, and for a deployment without a state record that holds no version and no
    /// head, the record `complete` written first (conditionally): every item a deployment's
    /// functions write has a head, so a stack that starts empty starts complete. One read when
    /// the record exists; while it does not, [`Store::complete_heads_if_empty_from`].
    ///
    /// ```no_run
    /// # async fn example(store: &cqrs_store::Store) -> Result<(), cqrs_store::StoreError> {
    /// let state = store.complete_heads_if_empty().await?;
    /// # Ok(()) }
    /// ```
    pub async fn complete_heads_if_empty(&self) -> Result<HeadsState, StoreError> {
        let state = self.heads_state().await?;
        self.complete_heads_if_empty_from(state).await
    }

    /// [`Store::complete_heads_if_empty`] after the state record was read (`state`, as
    /// [`Store::heads_state`] or [`Store::heads_state_with_ttl_policy`] answered it). Only
    /// `Incomplete` reads more, and only what cannot be stale: a strongly consistent `Scan` with
    /// `Limit` 1 of the command, data and history tables (concurrently); when all three are
    /// empty, a strongly consistent `Scan` of the idempotency table for any head (`HEAD#…`, the
    /// legacy `HEAD#id` ones included), which remembers versions whose rows are gone. Complete
    /// only when none holds anything.
    ///
    /// ```no_run
    /// # async fn example(store: &cqrs_store::Store) -> Result<(), cqrs_store::StoreError> {
    /// let state = store.heads_state().await?;
    /// let state = store.complete_heads_if_empty_from(state).await?;
    /// # Ok(()) }
    /// ```
    pub async fn complete_heads_if_empty_from(
        &self,
        state: HeadsState,
    ) -> Result<HeadsState, StoreError> {
        if state != HeadsState::Incomplete {
            return Ok(state);
        }
        let (command, data, history) = futures::try_join!(
            self.is_empty(&self.tables.command),
            self.is_empty(&self.tables.data),
            self.is_empty(&self.tables.history),
        )?;
        if !(command && data && history) || self.holds_heads().await? {
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

    /// Whether `table` holds no item at all (one item read at most, strongly consistent).
    async fn is_empty(&self, table: &str) -> Result<bool, StoreError> {
        let output = self
            .client
            .scan()
            .table_name(table)
            .limit(1)
            .projection_expression("pk")
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| sdk_error("Scan (is empty)", e))?;
        Ok(output.items().is_empty() && output.last_evaluated_key().is_none())
    }

    /// Whether the idempotency table holds any head, new (`HEAD#pk@sk`) or legacy (`HEAD#id`):
    /// a strongly consistent scan filtered on the prefix, page by page until one is found.
    async fn holds_heads(&self) -> Result<bool, StoreError> {
        let mut pages = self
            .client
            .scan()
            .table_name(&self.tables.idempotency)
            .filter_expression("begins_with(pk, :head)")
            .expression_attribute_values(":head", AttributeValue::S(legacy_head_key("")))
            .projection_expression("pk")
            .consistent_read(true)
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| sdk_error("Scan (any head)", e))?;
            if !page.items().is_empty() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The latest version of `pk` / `base_sk` for a deployment whose heads are not complete
    /// (`incomplete` or `shared`): the head is a lower bound, never the answer, since a writer
    /// that keeps no heads (mbc-cqrs-serverless, `Store::put_command`, an older deployment) may
    /// have written above it.
    ///
    /// One round trip reads, concurrently, the head, the legacy head, the item's newest version in
    /// the history table's `id-version-index` and the data table's version (strongly consistent).
    /// With a head, the second is the command row after the highest of these (strongly
    /// consistent): only when it exists are all the item's rows read. Without a head, all its
    /// rows are read, and its legacy head counts when no other item with the same id holds that
    /// version. When what was found is above the head (or there is no head), the head is raised
    /// to it (conditionally, only ever up: [`Store::raise_head`]), so that the write's condition
    /// (`latest = found`) makes the next version unique. `None` when the item has no version
    /// anywhere.
    ///
    /// An item whose head key DynamoDB cannot store ([`cqrs_keys::validate_derived_keys`]) gets
    /// no head: its latest version is still found, from the stored versions alone.
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
        let (head, legacy, history, data) = futures::try_join!(
            self.get_head(pk, base_sk),
            self.get_legacy_head(&id),
            self.history_version_of(&id, pk, "="),
            self.data_version(pk, base_sk),
        )?;
        let projected = history.max(data);
        let mut found = match head {
            Some(head) => {
                let known = head.max(projected.unwrap_or(head));
                let above = match known.checked_add(1) {
                    Some(next) => self.command_row_exists(pk, base_sk, next).await?,
                    None => false,
                };
                if above {
                    self.latest_command_version(pk, base_sk)
                        .await?
                        .max(Some(known))
                } else {
                    Some(known)
                }
            }
            None => self
                .latest_command_version(pk, base_sk)
                .await?
                .max(projected),
        };
        if head.is_none()
            && let Some(legacy) = legacy
            && Some(legacy) > found
            && !self.other_item_holds(pk, &id, legacy).await?
        {
            found = Some(legacy);
        }
        let Some(found) = found else {
            return Ok(None);
        };
        if head == Some(found) || checked_head_key(pk, base_sk).is_err() {
            return Ok(Some(found));
        }
        if self.raise_head(pk, base_sk, found).await? {
            return Ok(Some(found));
        }
        // Another writer raised it further, or wrote a version, first.
        Ok(self.get_head(pk, base_sk).await?.max(Some(found)))
    }

    /// Whether the command table holds the row of version `version` of `pk` / `base_sk` (a
    /// strongly consistent read of its key).
    async fn command_row_exists(
        &self,
        pk: &str,
        base_sk: &str,
        version: i64,
    ) -> Result<bool, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.tables.command)
            .key("pk", AttributeValue::S(pk.to_string()))
            .key(
                "sk",
                AttributeValue::S(cqrs_keys::add_sort_key_version(base_sk, version)),
            )
            .projection_expression("pk")
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| sdk_error("GetItem (command row)", e))?;
        Ok(output.item.is_some())
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
        let key = writable_head_key(pk, base_sk)?;
        let raised = self
            .client
            .update_item()
            .table_name(&self.tables.idempotency)
            .key("pk", AttributeValue::S(key))
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
    ///     Err(cqrs_store::StoreError::GuardFailed { index: 0, .. }) => println!("m1 holds 3 loans"),
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
        self.write_version_constrained(item, previous, idempotency, guards, None)
            .await
    }

    /// [`Store::write_version_guarded`], with the head's mirror when the item's entity is
    /// referenced ([`HeadMirror`]; `None`: the head as [`Store::write_version`] writes it). The
    /// head `Put` then also holds `mv` (the version written), `del` and `m`, so that a
    /// [`Guard::RequireHead`] of a referencing command checks the target's latest version without
    /// reading it. A failed guard is [`StoreError::GuardFailed`] with the item its condition found
    /// (`old`, the cancellation reason's `ALL_OLD`).
    ///
    /// ```no_run
    /// # async fn example(store: &cqrs_store::Store, item: cqrs_item::Item) -> Result<(), cqrs_store::StoreError> {
    /// use cqrs_store::guard::HeadMirror;
    /// let mirror = HeadMirror { is_deleted: false, attributes: [("reference".into(), "false".into())].into() };
    /// store.write_version_constrained(&item, None, None, &[], Some(&mirror)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn write_version_constrained(
        &self,
        item: &Item,
        previous: Option<i64>,
        idempotency: Option<&IdempotencyRecord>,
        guards: &[Guard],
        mirror: Option<&HeadMirror>,
    ) -> Result<(), StoreError> {
        if let Some(index) = guards.iter().position(Guard::never_holds) {
            return Err(StoreError::GuardFailed { index, old: None });
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
            .item(
                "pk",
                AttributeValue::S(writable_head_key(&item.pk, &item.sk)?),
            )
            .item(LATEST, AttributeValue::N(item.version.to_string()))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        let head = match mirror {
            None => head,
            Some(mirror) => head
                .item(MIRROR_VERSION, AttributeValue::N(item.version.to_string()))
                .item(MIRROR_DELETED, AttributeValue::Bool(mirror.is_deleted))
                .item(
                    MIRROR_ATTRIBUTES,
                    AttributeValue::M(
                        mirror
                            .attributes
                            .iter()
                            .map(|(name, value)| (name.clone(), AttributeValue::S(value.clone())))
                            .collect(),
                    ),
                ),
        };
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
            let old = reasons
                .get(first_guard + index)
                .and_then(CancellationReason::item)
                .cloned();
            return Err(StoreError::GuardFailed { index, old });
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
