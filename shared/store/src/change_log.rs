//! The change log's entries written before its prefix was reserved: `LOG#<tenant>#<YYYY-MM>` (the
//! key space of the example model's `log` entity, mbc's time series) instead of
//! `CQRS_CHANGE_LOG#<tenant>#<YYYY-MM>` ([`cqrs_keys::CHANGE_LOG_PK_PREFIX`]). data-sync's change
//! log (`cqrs_data_sync::change_log`) writes only the current prefix; this module recognises the old
//! entries ([`is_legacy_entry`]), names both partitions of a month for a reader
//! ([`month_partitions`]) and moves the old entries ([`migrate_legacy`], which `cqrs change-log
//! migrate` runs), so that no tool needs a function crate for it.
//!
//! It also says what an entry is, current or legacy ([`is_entry`]), for the readers that must
//! treat entries apart (the query handler shows an entry only to a reader of the item it logs),
//! and what older entries hold that an entry no longer does: the logged version's idempotency key
//! in their attributes ([`REQUEST_ID_ATTRIBUTE`], never shown: [`strip_request_id`]), which two
//! entries of one version may differ in ([`same_entry`]).

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use cqrs_item::Item;
use cqrs_keys::{CHANGE_LOG_PK_PREFIX, KEY_SEPARATOR, generate_id, parse_time_series_sk};

use crate::projection::PutIfAbsent;
use crate::{Store, StoreError};

/// The partition prefix entries were written under before [`CHANGE_LOG_PK_PREFIX`]: `LOG`, the
/// example model's `log` entity's (see the [module docs](self)).
///
/// ```
/// assert_eq!(cqrs_store::change_log::LEGACY_PK_PREFIX, "LOG");
/// ```
pub const LEGACY_PK_PREFIX: &str = "LOG";

/// The attribute into which entries written before this release copied the logged version's
/// `requestId`, that is the writer's `Idempotency-Key`: an entry no longer holds it, and a reader
/// never shows it ([`strip_request_id`]).
///
/// ```
/// assert_eq!(cqrs_store::change_log::REQUEST_ID_ATTRIBUTE, "requestId");
/// ```
pub const REQUEST_ID_ATTRIBUTE: &str = "requestId";

/// Whether `item` is a change log entry: any row under the reserved prefix
/// ([`CHANGE_LOG_PK_PREFIX`], which nothing else may write), or a legacy entry
/// ([`is_legacy_entry`]).
///
/// ```
/// let mut item = cqrs_item::Item::example();
/// assert!(!cqrs_store::change_log::is_entry(&item));
/// item.pk = "CQRS_CHANGE_LOG#t1#2026-01".into();
/// assert!(cqrs_store::change_log::is_entry(&item));
/// ```
pub fn is_entry(item: &Item) -> bool {
    cqrs_keys::reserved_prefix(&item.pk) == Some(CHANGE_LOG_PK_PREFIX) || is_legacy_entry(item)
}

/// `entry` without the idempotency key an older release copied into its attributes
/// ([`REQUEST_ID_ATTRIBUTE`]).
///
/// ```
/// let mut entry = cqrs_item::Item::example();
/// entry.attributes.insert("requestId".into(), cqrs_item::Value::from("k-secret"));
/// cqrs_store::change_log::strip_request_id(&mut entry);
/// assert!(!entry.attributes.contains_key("requestId"));
/// ```
pub fn strip_request_id(entry: &mut Item) {
    entry.attributes.remove(REQUEST_ID_ATTRIBUTE);
}

/// Whether `stored` and `entry` log the same version: the same attributes, but for the idempotency
/// key an older release copied into one of them ([`REQUEST_ID_ATTRIBUTE`]). So a record replayed
/// after the upgrade finds the entry an older release wrote to be its own.
///
/// ```
/// use cqrs_store::change_log::same_entry;
/// let entry = cqrs_item::Item::example();
/// let mut older = entry.clone();
/// older.attributes.insert("requestId".into(), cqrs_item::Value::from("k-1"));
/// assert!(same_entry(&older, &entry));
/// older.attributes.insert("version".into(), cqrs_item::Value::from(9));
/// assert!(!same_entry(&older, &entry));
/// ```
pub fn same_entry(stored: &Item, entry: &Item) -> bool {
    let mut stored = stored.attributes.clone();
    let mut entry = entry.attributes.clone();
    stored.remove(REQUEST_ID_ATTRIBUTE);
    entry.remove(REQUEST_ID_ATTRIBUTE);
    stored == entry
}

/// The partitions that may hold a tenant's entries of one month (`YYYY-MM`): the current one, then
/// the legacy one (`LOG#<tenant>#<YYYY-MM>`, empty once [`migrate_legacy`] ran or for months after
/// the upgrade). Entries of both have the same sort keys, so a reader merges them by `sk`.
///
/// ```
/// assert_eq!(
///     cqrs_store::change_log::month_partitions("t1", "2026-01"),
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
/// use cqrs_item::{Item, Value};
///
/// let mut old = Item::example();
/// old.pk = "LOG#t1#2026-01".into();
/// old.sk = "2026-01-15T10:30:00.000Z#0123456789abcdef-3".into();
/// old.item_type = "LOG".into();
/// old.source = "data-sync".into();
/// for name in ["itemId", "pk", "sk", "version"] {
///     old.attributes.insert(name.into(), Value::from("x"));
/// }
/// assert!(cqrs_store::change_log::is_legacy_entry(&old));
/// // An entity's item under `LOG#` is never one.
/// old.entity = Some("log".into());
/// assert!(!cqrs_store::change_log::is_legacy_entry(&old));
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
/// the same sort key and attributes (but the idempotency key, [`strip_request_id`]) under
/// `CQRS_CHANGE_LOG#<tenant>#<YYYY-MM>`, written if absent (a twin already there is the same
/// entry when [`same_entry`] says so),
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
            // The same tenant and month under the reserved prefix, read and built by the key crate.
            let Ok(pk) = cqrs_keys::parse_time_series_pk(&old.pk)
                .and_then(|(tenant, month)| cqrs_keys::change_log_month_pk(tenant, month))
            else {
                continue;
            };
            let mut current = old.clone();
            current.pk = pk;
            current.id = generate_id(&current.pk, &current.sk);
            current.item_type = CHANGE_LOG_PK_PREFIX.into();
            strip_request_id(&mut current);
            match store.put_if_absent(table, &current).await? {
                PutIfAbsent::Written => report.moved += 1,
                PutIfAbsent::Present(stored) if same_entry(&stored, &current) => {
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
