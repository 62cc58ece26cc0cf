//! The operator's reads and writes: whole-table scans of the data and history tables by parallel
//! segment (for `cqrs rebuild` and `cqrs verify`), the newest history version of one item, and
//! the parked table read whole and emptied record by record (for `cqrs redrive`).
//!
//! A scan goes page by page and answers where it stopped ([`ScanCursor`]: the last key read),
//! so a caller can write a checkpoint after each page and resume a killed run from it. The
//! data-table scan keeps projected items only (those with `cpk`, the command row they came from),
//! so other rows sharing the table (a change log, say) are not taken for items.

use aws_sdk_dynamodb::types::AttributeValue;
use cqrs_item::{Attributes, Item};
use serde::{Deserialize, Serialize};

use crate::parked::ParkedRecord;
use crate::projection::Retry;
use crate::query::VersionQuery;
use crate::{Store, StoreError, sdk_error};

/// Which table a scan reads.
///
/// ```
/// assert_ne!(cqrs_store::rebuild::ItemTable::Data, cqrs_store::rebuild::ItemTable::History);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemTable {
    /// The data table (projected items only).
    Data,
    /// The history table (every version).
    History,
}

/// Which items a scan keeps: all, one tenant's (`tenantCode`), one entity's (`entity`), or both.
///
/// ```
/// let scope = cqrs_store::rebuild::ScanScope { tenant: Some("t1".into()), entity: None };
/// assert!(!scope.is_all());
/// assert!(cqrs_store::rebuild::ScanScope::default().is_all());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScanScope {
    /// Only items of this tenant.
    pub tenant: Option<String>,
    /// Only items of this model entity.
    pub entity: Option<String>,
}

impl ScanScope {
    /// Whether the scope keeps every item.
    ///
    /// ```
    /// assert!(cqrs_store::rebuild::ScanScope::default().is_all());
    /// ```
    pub fn is_all(&self) -> bool {
        self.tenant.is_none() && self.entity.is_none()
    }
}

/// Where a scan segment stands: the `pk` and `sk` of the last row read; the next page starts
/// after it.
///
/// ```
/// let cursor = cqrs_store::rebuild::ScanCursor { pk: "P#t1".into(), sk: "a@2".into() };
/// assert_eq!(serde_json::to_string(&cursor).unwrap(), r#"{"pk":"P#t1","sk":"a@2"}"#);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScanCursor {
    /// The partition key of the last row read.
    pub pk: String,
    /// The sort key of the last row read.
    pub sk: String,
}

/// One page of a scan segment.
///
/// ```
/// let page = cqrs_store::rebuild::ScanPage::default();
/// assert!(page.items.is_empty() && page.next.is_none());
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScanPage {
    /// The items of the page that are in the scope.
    pub items: Vec<Item>,
    /// Rows of the page that do not have the item shape (`pk / sk`), left out of `items`.
    pub unreadable: Vec<String>,
    /// Where the next page starts; `None` when the segment is done.
    pub next: Option<ScanCursor>,
}

impl Store {
    /// One page (at most `limit` rows read, before the scope's filter) of segment `segment` of
    /// `segments` of `table`, from `start` on (`None`: the segment's beginning). Strongly
    /// consistent; transient failures are retried ([`Retry::default`]).
    ///
    /// ```no_run
    /// use cqrs_store::rebuild::{ItemTable, ScanScope};
    /// # async fn example(store: &cqrs_store::Store) -> Result<(), cqrs_store::StoreError> {
    /// let mut start = None;
    /// loop {
    ///     let page = store
    ///         .scan_items_page(ItemTable::History, &ScanScope::default(), 0, 4, start.as_ref(), 500)
    ///         .await?;
    ///     println!("{} versions", page.items.len());
    ///     match page.next {
    ///         Some(next) => start = Some(next),
    ///         None => break,
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn scan_items_page(
        &self,
        table: ItemTable,
        scope: &ScanScope,
        segment: u32,
        segments: u32,
        start: Option<&ScanCursor>,
        limit: u32,
    ) -> Result<ScanPage, StoreError> {
        let name = match table {
            ItemTable::Data => &self.tables.data,
            ItemTable::History => &self.tables.history,
        };
        let mut filters = Vec::new();
        let mut request = self
            .client
            .scan()
            .table_name(name)
            .consistent_read(true)
            .segment(i32::try_from(segment).unwrap_or(i32::MAX))
            .total_segments(i32::try_from(segments.max(1)).unwrap_or(i32::MAX))
            .limit(i32::try_from(limit.max(1)).unwrap_or(i32::MAX));
        if table == ItemTable::Data {
            filters.push("attribute_exists(#cpk)");
            request = request.expression_attribute_names("#cpk", "cpk");
        }
        if let Some(tenant) = &scope.tenant {
            filters.push("#tenant = :tenant");
            request = request
                .expression_attribute_names("#tenant", "tenantCode")
                .expression_attribute_values(":tenant", AttributeValue::S(tenant.clone()));
        }
        if let Some(entity) = &scope.entity {
            filters.push("#entity = :entity");
            request = request
                .expression_attribute_names("#entity", "entity")
                .expression_attribute_values(":entity", AttributeValue::S(entity.clone()));
        }
        if !filters.is_empty() {
            request = request.filter_expression(filters.join(" AND "));
        }
        if let Some(start) = start {
            request = request
                .exclusive_start_key("pk", AttributeValue::S(start.pk.clone()))
                .exclusive_start_key("sk", AttributeValue::S(start.sk.clone()));
        }
        let output = Retry::default()
            .run(|| async {
                request
                    .clone()
                    .send()
                    .await
                    .map_err(|e| sdk_error("Scan", e))
            })
            .await?;
        let mut page = ScanPage::default();
        for row in output.items() {
            let key = cursor_of(row);
            match Item::from_attributes(row.clone()) {
                Ok(item) => page.items.push(item),
                Err(_) => page.unreadable.push(match key {
                    Some(key) => format!("{} / {}", key.pk, key.sk),
                    None => "a row without string keys".into(),
                }),
            }
        }
        page.next = output.last_evaluated_key().and_then(cursor_of);
        Ok(page)
    }

    /// The newest version of `pk` / `base_sk` in the history table, `None` when it has none.
    ///
    /// ```no_run
    /// # async fn example(store: &cqrs_store::Store) -> Result<(), cqrs_store::StoreError> {
    /// if let Some(newest) = store.newest_history_version("PRODUCT#t1", "P001").await? {
    ///     println!("version {}", newest.version);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn newest_history_version(
        &self,
        pk: &str,
        base_sk: &str,
    ) -> Result<Option<Item>, StoreError> {
        let mut query = VersionQuery::new(pk, base_sk);
        query.limit = 1;
        let page = self.query_versions(&query).await?;
        Ok(page.items.into_iter().next())
    }

    /// Every parked record of every tenant (a scan of the parked table), in no particular order.
    ///
    /// ```no_run
    /// # async fn example(store: &cqrs_store::Store) -> Result<(), cqrs_store::StoreError> {
    /// for parked in store.scan_parked().await? {
    ///     println!("{:?} {}: {}", parked.item_id, parked.reason_kind, parked.reason);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn scan_parked(&self) -> Result<Vec<ParkedRecord>, StoreError> {
        let table = self.parked_table_name()?;
        let mut pages = self
            .client
            .scan()
            .table_name(table)
            .consistent_read(true)
            .into_paginator()
            .send();
        let mut records = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| sdk_error("Scan (parked)", e))?;
            for row in page.items() {
                let record: ParkedRecord = serde_dynamo::from_item(row.clone())
                    .map_err(|e| StoreError::Conversion(cqrs_item::ConversionError::from(e)))?;
                records.push(record);
            }
        }
        Ok(records)
    }

    /// Removes `record` from the parked table (after a redrive re-projected its item).
    ///
    /// ```no_run
    /// # async fn example(store: &cqrs_store::Store) -> Result<(), cqrs_store::StoreError> {
    /// store.delete_parked(&cqrs_store::parked::ParkedRecord::example()).await?;
    /// # Ok(()) }
    /// ```
    pub async fn delete_parked(&self, record: &ParkedRecord) -> Result<(), StoreError> {
        let table = self.parked_table_name()?;
        Retry::default()
            .run(|| async {
                self.client
                    .delete_item()
                    .table_name(table)
                    .key("pk", AttributeValue::S(record.pk()))
                    .key("sk", AttributeValue::S(record.sk()))
                    .send()
                    .await
                    .map(|_| ())
                    .map_err(|e| sdk_error("DeleteItem (parked)", e))
            })
            .await
    }

    fn parked_table_name(&self) -> Result<&str, StoreError> {
        self.tables.parked.as_deref().ok_or_else(|| {
            StoreError::Dynamo("no parked-records table configured (PARKED_TABLE)".into())
        })
    }
}

/// The `pk` / `sk` of a row or a scan's last evaluated key.
fn cursor_of(row: &Attributes) -> Option<ScanCursor> {
    match (row.get("pk"), row.get("sk")) {
        (Some(AttributeValue::S(pk)), Some(AttributeValue::S(sk))) => Some(ScanCursor {
            pk: pk.clone(),
            sk: sk.clone(),
        }),
        _ => None,
    }
}
