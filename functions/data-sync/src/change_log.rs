//! The example sync target: a per-tenant, per-month change log in time-series keys.
//!
//! For every projected version, [`ChangeLog`] writes one entry, once, into a table of your choice
//! (`CHANGE_LOG_TABLE`; any table with string keys `pk` and `sk`, the data table included):
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
//! `type`, `isDeleted`, `source`, `requestId`.
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
use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use cqrs_keys::{
    CHANGE_LOG_PK_PREFIX, KEY_SEPARATOR, change_log_pk, fnv1a_64, generate_id,
    parse_time_series_sk, time_series_sk,
};
use cqrs_store::{Store, StoreError, projection::PutIfAbsent};
use futures::future::{BoxFuture, FutureExt};

use crate::target::{Change, SyncTarget, TargetError};

/// The environment variable naming the change log's table; data-sync runs the change log only when
/// it is set.
pub const CHANGE_LOG_TABLE_ENV: &str = "CHANGE_LOG_TABLE";

/// Writes a per-tenant time-series log of every version (see the [module docs](self)).
///
/// ```no_run
/// # async fn wire(store: cqrs_store::Store) {
/// use data_sync::{DataSync, change_log::ChangeLog};
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
    /// let log = data_sync::change_log::ChangeLog::new(store, "cqrs-change-log");
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
    /// if let Some(log) = data_sync::change_log::ChangeLog::from_env(&store) {
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
    /// # fn f(log: &data_sync::change_log::ChangeLog) {
    /// println!("{}", log.table());
    /// # }
    /// ```
    pub fn table(&self) -> &str {
        &self.table
    }
}

/// The log entry of `change`: its key from the version's `updatedAt` (or, when that is not an
/// RFC 3339 time, the stream record's creation time), the tenant and the item id and version.
///
/// ```
/// let entry = data_sync::change_log::entry(&data_sync::Change::example()).unwrap();
/// assert_eq!(entry.pk, "CQRS_CHANGE_LOG#t1#2026-01");
/// assert_eq!(entry.item_type, "CQRS_CHANGE_LOG");
/// assert!(entry.sk.starts_with("2026-01-01T00:00:00.000Z#"));
/// assert!(entry.sk.ends_with("-1"));
/// assert_eq!(entry.attributes["itemId"], "PRODUCT#t1#P001");
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
    attributes.insert("requestId".into(), Value::from(item.request_id.clone()));
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
        request_id: item.request_id.clone(),
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
                PutIfAbsent::Present(stored) if stored.attributes == entry.attributes => Ok(()),
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

/// The partition prefix entries were written under before [`CHANGE_LOG_PK_PREFIX`]: `LOG`, the
/// example model's `log` entity's (see the [module docs](self)).
///
/// ```
/// assert_eq!(data_sync::change_log::LEGACY_PK_PREFIX, "LOG");
/// ```
pub const LEGACY_PK_PREFIX: &str = "LOG";

/// The partitions that may hold a tenant's entries of one month (`YYYY-MM`): the current one, then
/// the legacy one (`LOG#<tenant>#<YYYY-MM>`, empty once [`migrate_legacy`] ran or for months after
/// the upgrade). Entries of both have the same sort keys, so a reader merges them by `sk`.
///
/// ```
/// assert_eq!(
///     data_sync::change_log::month_partitions("t1", "2026-01"),
///     ["CQRS_CHANGE_LOG#t1#2026-01", "LOG#t1#2026-01"]
/// );
/// ```
pub fn month_partitions(tenant: &str, month: &str) -> [String; 2] {
    [CHANGE_LOG_PK_PREFIX, LEGACY_PK_PREFIX]
        .map(|prefix| [prefix, tenant, month].join(&KEY_SEPARATOR.to_string()))
}

/// Whether `item` is a change log entry written under the legacy prefix: `LOG#<tenant>#<YYYY-MM>`
/// / `<timestamp>#<16 hex digits>-<version>`, type `LOG`, `source` `data-sync`, version 1, no
/// `cpk` and no `entity` (so never a projected item, such as one of the `log` entity), and the
/// attributes an entry carries.
///
/// ```
/// let mut old = data_sync::change_log::entry(&data_sync::Change::example()).unwrap();
/// assert!(!data_sync::change_log::is_legacy_entry(&old));
/// old.pk = old.pk.replacen("CQRS_CHANGE_LOG", "LOG", 1);
/// old.item_type = "LOG".into();
/// assert!(data_sync::change_log::is_legacy_entry(&old));
/// ```
pub fn is_legacy_entry(item: &Item) -> bool {
    let pk_ok = cqrs_keys::parse_time_series_pk(&item.pk).is_ok();
    let sk_ok = parse_time_series_sk(&item.sk).is_ok_and(|(_, event)| {
        event.split_once('-').is_some_and(|(hash, version)| {
            hash.len() == 16
                && hash.bytes().all(|b| b.is_ascii_hexdigit())
                && version.parse::<i64>().is_ok()
        })
    });
    pk_ok
        && sk_ok
        && item.item_type == LEGACY_PK_PREFIX
        && item.source == "data-sync"
        && item.version == 1
        && item.cpk.is_none()
        && item.entity.is_none()
        && ["itemId", "pk", "sk", "version"]
            .iter()
            .all(|name| item.attributes.contains_key(*name))
}

/// What [`migrate_legacy`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Migration {
    /// Rows read by the scan (the filtered candidates).
    pub scanned: usize,
    /// Legacy entries written under the current prefix and deleted from the old key.
    pub moved: usize,
    /// Legacy entries whose current twin already existed with the same content: deleted only.
    pub already_moved: usize,
    /// Legacy entries whose current key holds another entry: left where they are.
    pub conflicts: usize,
}

/// Moves every legacy change log entry of `table` ([`is_legacy_entry`]) to the current prefix:
/// the same sort key and attributes under `CQRS_CHANGE_LOG#<tenant>#<YYYY-MM>`, written if absent,
/// then the old row deleted on condition that it is still that entry (a row that changed
/// meanwhile stays). Rows that are not legacy entries (a `log` entity's items, anything else under
/// `LOG#`) are never written nor deleted. Safe to run while data-sync writes (it writes only the
/// current prefix) and to run again (a second run moves nothing). One scan of the whole table.
///
/// # Errors
///
/// A DynamoDB failure of the scan, a write or a delete; what was moved before it stays moved.
pub async fn migrate_legacy(store: &Store, table: &str) -> Result<Migration, StoreError> {
    let client = store.client();
    let mut report = Migration::default();
    let mut start: Option<HashMap<String, AttributeValue>> = None;
    loop {
        let page = client
            .scan()
            .table_name(table)
            .filter_expression(
                "begins_with(pk, :prefix) AND #source = :source AND attribute_not_exists(cpk)",
            )
            .expression_attribute_names("#source", "source")
            .expression_attribute_values(
                ":prefix",
                AttributeValue::S(format!("{LEGACY_PK_PREFIX}{KEY_SEPARATOR}")),
            )
            .expression_attribute_values(":source", AttributeValue::S("data-sync".into()))
            .set_exclusive_start_key(start.take())
            .send()
            .await
            .map_err(|e| StoreError::Dynamo(format!("scanning {table}: {e}")))?;
        for attributes in page.items() {
            report.scanned += 1;
            let Ok(old) = Item::from_attributes(attributes.clone()) else {
                continue;
            };
            if !is_legacy_entry(&old) {
                continue;
            }
            let Some(rest) = old.pk.strip_prefix(LEGACY_PK_PREFIX) else {
                continue;
            };
            let mut current = old.clone();
            current.pk = format!("{CHANGE_LOG_PK_PREFIX}{rest}");
            current.id = generate_id(&current.pk, &current.sk);
            current.item_type = CHANGE_LOG_PK_PREFIX.into();
            match store.put_if_absent(table, &current).await? {
                PutIfAbsent::Written => report.moved += 1,
                PutIfAbsent::Present(stored) if stored.attributes == current.attributes => {
                    report.already_moved += 1
                }
                PutIfAbsent::Present(_) => {
                    report.conflicts += 1;
                    continue;
                }
            }
            let deleted = client
                .delete_item()
                .table_name(table)
                .key("pk", AttributeValue::S(old.pk.clone()))
                .key("sk", AttributeValue::S(old.sk.clone()))
                .condition_expression(
                    "#source = :source AND attribute_not_exists(cpk) AND #type = :type",
                )
                .expression_attribute_names("#source", "source")
                .expression_attribute_names("#type", "type")
                .expression_attribute_values(":source", AttributeValue::S("data-sync".into()))
                .expression_attribute_values(":type", AttributeValue::S(LEGACY_PK_PREFIX.into()))
                .send()
                .await;
            if let Err(e) = deleted {
                let changed = e
                    .as_service_error()
                    .is_some_and(|s| s.is_conditional_check_failed_exception());
                if !changed {
                    return Err(StoreError::Dynamo(format!(
                        "deleting {} / {}: {e}",
                        old.pk, old.sk
                    )));
                }
            }
        }
        match page.last_evaluated_key() {
            Some(key) if !key.is_empty() => start = Some(key.clone()),
            _ => return Ok(report),
        }
    }
}
