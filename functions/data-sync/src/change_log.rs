//! The change log: a per-tenant, per-month log of every version in time-series keys.
//!
//! **It runs as the framework's consumer `change-log`** (`cqrs_consumer::change_log`, template
//! parameter `ChangeLog=on`, entries in the data table): [`ChangeLog`] is that consumer's target,
//! behind `cqrs_consumer::FromSyncTarget`. Run inside data-sync as a sync target (turned on by
//! `CHANGE_LOG_TABLE` on data-sync) it is deprecated, and still works until the next major
//! version; both write the same entries, so a stack can move from one to the other.
//!
//! For every version, [`ChangeLog`] writes one entry, once, into a table of your choice
//! (any table with string keys `pk` and `sk`, the data table included):
//!
//! ```text
//! pk = CQRS_CHANGE_LOG#<tenant>#<YYYY-MM>        (cqrs_keys::change_log_pk)
//! sk = <updatedAt, ms, UTC>#<fnv64(item id) hex>-<version>
//! ```
//!
//! so "what changed in tenant t1 in January, in order" is one `Query` on
//! `CQRS_CHANGE_LOG#t1#2026-01`. An entry has the item shape (type `CQRS_CHANGE_LOG`, version 1,
//! `source` `data-sync`, no `cpk`), so when the log lives in the data table the query handler
//! serves it like any other partition (`GET /items/CQRS_CHANGE_LOG%23t1%232026-01`, the tenant's
//! own). Its `attributes` name the version: `itemId`, `pk`, `sk` (with version), `version`,
//! `type`, `isDeleted`, `source`.
//!
//! **An entry is read like the item it logs, and holds no idempotency key.** The query handler
//! serves an entry only to a reader of the logged item (so `common`'s log shows a tenant no entry
//! of an entity kept for a global `system_admin`) and never shows its `requestId`. The logged
//! version's `requestId` (the writer's `Idempotency-Key`) is not copied into the entry: its own
//! `requestId` is the stream record's `eventID`, the request that wrote it. Entries written
//! before held the key in their attributes too ([`REQUEST_ID_ATTRIBUTE`]); a replay finds such an
//! entry to be its own all the same ([`same_entry`]), and [`migrate_legacy`] moves legacy ones
//! without it.
//!
//! **The prefix is reserved** ([`cqrs_keys::RESERVED_PK_PREFIXES`]): the model check refuses an
//! entity whose partition starts with it, so no entry is ever read as an entity's item, and no
//! entity's item has an entry's key. Before, entries were written under `LOG#<tenant>#<YYYY-MM>`
//! ([`LEGACY_PK_PREFIX`]), the key space of the example model's `log` entity (mbc's time series):
//! in the data table they were listed as `log` items, and held the key of a real `log` item.
//! Entries written then stay where they are until [`migrate_legacy`] moves them (`cqrs change-log
//! migrate` runs it); a reader of a month that began before the upgrade reads both
//! partitions, [`month_partitions`].
//!
//! The entry's key is a function of the item id and version, so a replayed record finds its entry
//! already written and succeeds; an entry with the same key but another item is refused
//! (a record failure).

use chrono::{DateTime, Utc};
use cqrs_item::Item;
use cqrs_item::{Map, Value};

use cqrs_keys::{CHANGE_LOG_PK_PREFIX, change_log_pk, fnv1a_64, generate_id, time_series_sk};
use cqrs_store::{Store, projection::PutIfAbsent};
use futures::future::{BoxFuture, FutureExt};

use crate::target::{Change, SyncTarget, TargetError};

/// The environment variable naming the change log's table: data-sync runs the change log (deprecated)
/// only when it is set; the consumer `change-log` writes there when it is set, else into
/// `DATA_TABLE`.
pub const CHANGE_LOG_TABLE_ENV: &str = "CHANGE_LOG_TABLE";

/// Writes a per-tenant time-series log of every version (see the [module docs](self)).
///
/// ```no_run
/// # async fn wire(store: cqrs_store::Store) {
/// use cqrs_data_sync::{DataSync, change_log::ChangeLog};
/// #[allow(deprecated)] // a target's way out: cqrs_consumer::FromSyncTarget
/// let sync = DataSync::new(store.clone()).with_target(ChangeLog::new(store, "cqrs-change-log"));
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct ChangeLog {
    store: Store,
    table: String,
}

impl ChangeLog {
    /// A change log written through `store` into `table`.
    ///
    /// ```no_run
    /// # fn wire(store: cqrs_store::Store) {
    /// let log = cqrs_data_sync::change_log::ChangeLog::new(store, "cqrs-change-log");
    /// assert_eq!(log.table(), "cqrs-change-log");
    /// # }
    /// ```
    pub fn new(store: Store, table: impl Into<String>) -> Self {
        ChangeLog {
            store,
            table: table.into(),
        }
    }

    /// A change log into the table named by `CHANGE_LOG_TABLE`, or `None` when it is unset or
    /// empty.
    ///
    /// ```no_run
    /// # fn wire(store: cqrs_store::Store) {
    /// if let Some(log) = cqrs_data_sync::change_log::ChangeLog::from_env(&store) {
    ///     println!("change log into {}", log.table());
    /// }
    /// # }
    /// ```
    pub fn from_env(store: &Store) -> Option<Self> {
        std::env::var(CHANGE_LOG_TABLE_ENV)
            .ok()
            .map(|table| table.trim().to_string())
            .filter(|table| !table.is_empty())
            .map(|table| ChangeLog::new(store.clone(), table))
    }

    /// The table the log is written to.
    ///
    /// ```no_run
    /// # fn f(log: &cqrs_data_sync::change_log::ChangeLog) {
    /// println!("{}", log.table());
    /// # }
    /// ```
    pub fn table(&self) -> &str {
        &self.table
    }
}

/// The log entry of `change`: its key from the version's `updatedAt` (or, when that is not an
/// RFC 3339 time, the stream record's creation time), the tenant and the item id and version; its
/// `requestId` the stream record's `eventID`, never the version's (an idempotency key).
///
/// ```
/// let entry = cqrs_data_sync::change_log::entry(&cqrs_data_sync::Change::example()).unwrap();
/// assert_eq!(entry.pk, "CQRS_CHANGE_LOG#t1#2026-01");
/// assert_eq!(entry.item_type, "CQRS_CHANGE_LOG");
/// assert!(entry.sk.starts_with("2026-01-01T00:00:00.000Z#"));
/// assert!(entry.sk.ends_with("-1"));
/// assert_eq!(entry.attributes["itemId"], "PRODUCT#t1#P001");
/// assert!(!entry.attributes.contains_key("requestId"));
/// assert_eq!(entry.request_id, "event-1");
/// ```
pub fn entry(change: &Change) -> Result<Item, TargetError> {
    let item = &change.item;
    let time = DateTime::parse_from_rfc3339(&item.updated_at)
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or(change.approximate_creation);
    let event_id = format!("{:016x}-{}", fnv1a_64(item.id.as_bytes()), item.version);
    let pk = change_log_pk(&item.tenant_code, &time)?;
    let sk = time_series_sk(&time, &event_id)?;

    let mut attributes = Map::new();
    attributes.insert("itemId".into(), Value::from(item.id.clone()));
    attributes.insert("pk".into(), Value::from(item.pk.clone()));
    attributes.insert("sk".into(), Value::from(item.sk.clone()));
    attributes.insert("version".into(), Value::from(item.version));
    attributes.insert("type".into(), Value::from(item.item_type.clone()));
    attributes.insert("isDeleted".into(), Value::from(item.is_deleted));
    attributes.insert("source".into(), Value::from(item.source.clone()));
    Ok(Item {
        id: generate_id(&pk, &sk),
        code: item.code.clone(),
        name: item.name.clone(),
        version: 1,
        tenant_code: item.tenant_code.clone(),
        item_type: CHANGE_LOG_PK_PREFIX.into(),
        is_deleted: false,
        seq: None,
        ttl: None,
        attributes,
        source: "data-sync".into(),
        request_id: change.event_id.clone(),
        created_at: item.updated_at.clone(),
        created_by: item.updated_by.clone(),
        created_ip: item.updated_ip.clone(),
        updated_at: item.updated_at.clone(),
        updated_by: item.updated_by.clone(),
        updated_ip: item.updated_ip.clone(),
        cpk: None,
        csk: None,
        entity: None,
        model_revision: None,
        index_keys: Default::default(),
        pk,
        sk,
    })
}

impl SyncTarget for ChangeLog {
    fn name(&self) -> &str {
        "change-log"
    }

    fn apply<'a>(&'a self, change: &'a Change) -> BoxFuture<'a, Result<(), TargetError>> {
        async move {
            let entry = entry(change)?;
            match self.store.put_if_absent(&self.table, &entry).await? {
                PutIfAbsent::Written => Ok(()),
                PutIfAbsent::Present(stored) if same_entry(&stored, &entry) => Ok(()),
                PutIfAbsent::Present(stored) => Err(format!(
                    "change log entry {} / {} already logs {}",
                    entry.pk,
                    entry.sk,
                    stored
                        .attributes
                        .get("sk")
                        .map_or_else(|| "an entry without sk".to_string(), ToString::to_string)
                )
                .into()),
            }
        }
        .boxed()
    }
}

pub use cqrs_store::change_log::{
    LEGACY_PK_PREFIX, Migration, REQUEST_ID_ATTRIBUTE, is_entry, is_legacy_entry, migrate_legacy,
    month_partitions, same_entry, strip_request_id,
};
