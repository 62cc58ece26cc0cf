//! The reads of the query handler: the latest state in the data table, a partition of the data
//! table, and the versions of an item in the history table.
//!
//! Every expression the query side sends lives here. Pages come back as [`Page`]s whose `next`
//! is a typed key ([`PageKey`] for the data table, [`VersionKey`] for the history index), so a
//! caller can turn it into a cursor and back without touching DynamoDB types.
//!
//! Paging rules, the same for both listings:
//!
//! - A page holds `limit` items unless the listing ends first. Items left out by a filter (soft
//!   deleted items, items of another partition on the history index, and with `live_at` items
//!   expired at that time, [`Item::is_expired`]) do not count: the store keeps querying until it
//!   has `limit` items or the listing ends.
//! - `next` is `Some` only when at least one more item follows (the store reads one item ahead),
//!   so a listing never ends with an empty page.
//! - `next` is the key of the last item of the page; passing it back as the start key continues
//!   right after that item.
//!
//! ```no_run
//! use cqrs_store::query::{Order, PartitionQuery, SortKeyRange};
//!
//! # async fn example(store: &cqrs_store::Store) -> Result<(), cqrs_store::StoreError> {
//! let mut query = PartitionQuery::new("ORDER#t1")
//!     .range(SortKeyRange::Prefix("ORDER_ITEM#01HX#".into()))
//!     .order(Order::Descending)
//!     .limit(10);
//! loop {
//!     let page = store.query_partition(&query).await?;
//!     for item in &page.items {
//!         println!("{} v{}", item.sk, item.version);
//!     }
//!     match page.next {
//!         Some(next) => query.start = Some(next),
//!         None => break,
//!     }
//! }
//! # Ok(()) }
//! ```

use std::collections::HashMap;

use aws_sdk_dynamodb::{operation::query::builders::QueryFluentBuilder, types::AttributeValue};
use cqrs_item::Item;
use cqrs_keys::{add_sort_key_version, generate_id};

use crate::{Store, StoreError, sdk_error};

/// The history table's index over the versions of one item: `id` (S) + `version` (N).
///
/// ```
/// assert_eq!(cqrs_store::query::HISTORY_VERSION_INDEX, "id-version-index");
/// ```
pub const HISTORY_VERSION_INDEX: &str = "id-version-index";

/// The largest page the store reads in one call; larger limits are cut to this.
///
/// ```
/// assert_eq!(cqrs_store::query::MAX_PAGE_SIZE, 1000);
/// ```
pub const MAX_PAGE_SIZE: usize = 1000;

/// Which sort keys of a partition a [`PartitionQuery`] reads. Bounds are inclusive and compare
/// as DynamoDB compares strings (byte-wise, UTF-8).
///
/// ```
/// use cqrs_store::query::SortKeyRange;
///
/// let range = SortKeyRange::Between("2024-01-15".into(), "2024-01-16".into());
/// assert!(range.contains("2024-01-15T10:30:00.000Z#evt001"));
/// assert!(!range.contains("2024-01-16T00:00:00.000Z#evt002"));
/// assert!(SortKeyRange::Prefix("ORDER#".into()).contains("ORDER#o1"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SortKeyRange {
    /// Every sort key of the partition.
    All,
    /// Sort keys that begin with this text (`begins_with`).
    Prefix(String),
    /// Sort keys from this one on (`>=`).
    From(String),
    /// Sort keys up to and including this one (`<=`).
    To(String),
    /// Sort keys from the first up to and including the second (`BETWEEN`). The first must not be
    /// greater than the second.
    Between(String, String),
}

impl SortKeyRange {
    /// Whether `sk` lies in this range.
    ///
    /// ```
    /// use cqrs_store::query::SortKeyRange;
    /// assert!(SortKeyRange::All.contains("anything"));
    /// assert!(SortKeyRange::From("b".into()).contains("b"));
    /// assert!(!SortKeyRange::To("b".into()).contains("ba"));
    /// ```
    pub fn contains(&self, sk: &str) -> bool {
        match self {
            SortKeyRange::All => true,
            SortKeyRange::Prefix(prefix) => sk.starts_with(prefix.as_str()),
            SortKeyRange::From(from) => sk >= from.as_str(),
            SortKeyRange::To(to) => sk <= to.as_str(),
            SortKeyRange::Between(from, to) => sk >= from.as_str() && sk <= to.as_str(),
        }
    }

    /// Whether no sort key can lie in this range (a `Between` whose bounds are reversed).
    /// DynamoDB refuses such a query, so the caller should refuse it first.
    ///
    /// ```
    /// use cqrs_store::query::SortKeyRange;
    /// assert!(SortKeyRange::Between("b".into(), "a".into()).is_empty());
    /// assert!(!SortKeyRange::Between("a".into(), "a".into()).is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        matches!(self, SortKeyRange::Between(from, to) if from > to)
    }
}

/// The order of a listing by its sort key (partitions) or version number (history).
///
/// ```
/// assert_eq!(cqrs_store::query::Order::default(), cqrs_store::query::Order::Ascending);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Order {
    /// Smallest first.
    #[default]
    Ascending,
    /// Largest first.
    Descending,
}

impl Order {
    fn forward(self) -> bool {
        self == Order::Ascending
    }
}

/// The key of an item in the data table: where a partition listing goes on.
///
/// ```
/// let key = cqrs_store::query::PageKey { pk: "PRODUCT#t1".into(), sk: "P001".into() };
/// assert_eq!(key.sk, "P001");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageKey {
    /// Partition key.
    pub pk: String,
    /// Sort key (no version: the data table).
    pub sk: String,
}

impl PageKey {
    fn of(item: &Item) -> Self {
        PageKey {
            pk: item.pk.clone(),
            sk: item.sk.clone(),
        }
    }

    fn attributes(&self) -> HashMap<String, AttributeValue> {
        HashMap::from([
            ("pk".to_string(), AttributeValue::S(self.pk.clone())),
            ("sk".to_string(), AttributeValue::S(self.sk.clone())),
        ])
    }
}

/// The key of a version in the history table's [`HISTORY_VERSION_INDEX`]: where a version listing
/// goes on. All four attributes are the index's and the table's keys.
///
/// ```
/// let key = cqrs_store::query::VersionKey::new("PRODUCT#t1", "P001", 3);
/// assert_eq!(key.sk, "P001@3");
/// assert_eq!(key.id, "PRODUCT#t1#P001");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionKey {
    /// Partition key of the item.
    pub pk: String,
    /// Sort key with the version (`base@version`).
    pub sk: String,
    /// `pk#base`, the index's partition key.
    pub id: String,
    /// The version, the index's sort key.
    pub version: i64,
}

impl VersionKey {
    /// The key of version `version` of the item `pk` / `base_sk`.
    ///
    /// ```
    /// let key = cqrs_store::query::VersionKey::new("ORDER#t1", "ORDER#o1", 12);
    /// assert_eq!((key.sk.as_str(), key.version), ("ORDER#o1@12", 12));
    /// ```
    pub fn new(pk: &str, base_sk: &str, version: i64) -> Self {
        VersionKey {
            pk: pk.to_string(),
            sk: add_sort_key_version(base_sk, version),
            id: generate_id(pk, base_sk),
            version,
        }
    }

    fn of(item: &Item) -> Self {
        VersionKey {
            pk: item.pk.clone(),
            sk: item.sk.clone(),
            id: item.id.clone(),
            version: item.version,
        }
    }

    fn attributes(&self) -> HashMap<String, AttributeValue> {
        HashMap::from([
            ("pk".to_string(), AttributeValue::S(self.pk.clone())),
            ("sk".to_string(), AttributeValue::S(self.sk.clone())),
            ("id".to_string(), AttributeValue::S(self.id.clone())),
            (
                "version".to_string(),
                AttributeValue::N(self.version.to_string()),
            ),
        ])
    }
}

/// One page of a listing: the items, and the key to start the next page after, when there is
/// one.
///
/// ```
/// let page: cqrs_store::query::Page<cqrs_store::query::PageKey> =
///     cqrs_store::query::Page { items: vec![], next: None };
/// assert!(page.next.is_none());
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Page<K> {
    /// The items, in the listing's order.
    pub items: Vec<Item>,
    /// Where the next page starts (exclusive): the key of the last item, `None` when no item
    /// follows.
    pub next: Option<K>,
}

/// A read of one partition of the data table.
///
/// ```
/// use cqrs_store::query::{Order, PartitionQuery, SortKeyRange};
///
/// let query = PartitionQuery::new("MASTER#t1")
///     .range(SortKeyRange::Prefix("SETTING#".into()))
///     .order(Order::Descending)
///     .limit(50)
///     .include_deleted(true);
/// assert_eq!(query.limit, 50);
/// assert!(query.start.is_none());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionQuery {
    /// The partition.
    pub pk: String,
    /// Which sort keys.
    pub range: SortKeyRange,
    /// By sort key, ascending or descending.
    pub order: Order,
    /// Items per page: at least 1, at most [`MAX_PAGE_SIZE`] (values outside are moved inside).
    pub limit: usize,
    /// Whether soft-deleted items are listed.
    pub include_deleted: bool,
    /// Leave out items expired at this time (epoch seconds, [`Item::is_expired`]); `None` lists
    /// them (the operator tools see every stored item).
    pub live_at: Option<i64>,
    /// Start after this key (from the previous page's `next`); it must be of this partition.
    pub start: Option<PageKey>,
}

impl PartitionQuery {
    /// All of partition `pk`, ascending, 20 per page, soft-deleted items left out.
    ///
    /// ```
    /// let query = cqrs_store::query::PartitionQuery::new("PRODUCT#t1");
    /// assert_eq!((query.limit, query.include_deleted), (20, false));
    /// ```
    pub fn new(pk: impl Into<String>) -> Self {
        PartitionQuery {
            pk: pk.into(),
            range: SortKeyRange::All,
            order: Order::Ascending,
            limit: 20,
            include_deleted: false,
            live_at: None,
            start: None,
        }
    }

    /// With this sort key range.
    ///
    /// ```
    /// # use cqrs_store::query::{PartitionQuery, SortKeyRange};
    /// let q = PartitionQuery::new("P#t1").range(SortKeyRange::From("b".into()));
    /// assert_eq!(q.range, SortKeyRange::From("b".into()));
    /// ```
    pub fn range(mut self, range: SortKeyRange) -> Self {
        self.range = range;
        self
    }

    /// In this order.
    ///
    /// ```
    /// # use cqrs_store::query::{Order, PartitionQuery};
    /// assert_eq!(PartitionQuery::new("P#t1").order(Order::Descending).order, Order::Descending);
    /// ```
    pub fn order(mut self, order: Order) -> Self {
        self.order = order;
        self
    }

    /// With this many items per page.
    ///
    /// ```
    /// assert_eq!(cqrs_store::query::PartitionQuery::new("P#t1").limit(5).limit, 5);
    /// ```
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }

    /// Listing soft-deleted items too, or not.
    ///
    /// ```
    /// assert!(cqrs_store::query::PartitionQuery::new("P#t1").include_deleted(true).include_deleted);
    /// ```
    pub fn include_deleted(mut self, include: bool) -> Self {
        self.include_deleted = include;
        self
    }

    /// Leaving out the items expired at `now` (epoch seconds), as every read of the functions does.
    ///
    /// ```
    /// let query = cqrs_store::query::PartitionQuery::new("P#t1").live_at(1_700_000_000);
    /// assert_eq!(query.live_at, Some(1_700_000_000));
    /// ```
    pub fn live_at(mut self, now: i64) -> Self {
        self.live_at = Some(now);
        self
    }

    /// Starting after `key`.
    ///
    /// ```
    /// # use cqrs_store::query::{PageKey, PartitionQuery};
    /// let key = PageKey { pk: "P#t1".into(), sk: "a".into() };
    /// assert_eq!(PartitionQuery::new("P#t1").start(Some(key.clone())).start, Some(key));
    /// ```
    pub fn start(mut self, key: Option<PageKey>) -> Self {
        self.start = key;
        self
    }
}

/// A read of the versions of one item in the history table, by version number.
///
/// ```
/// use cqrs_store::query::{Order, VersionQuery};
///
/// let query = VersionQuery::new("PRODUCT#t1", "P001");
/// assert_eq!(query.order, Order::Descending);
/// assert_eq!(query.id(), "PRODUCT#t1#P001");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionQuery {
    /// Partition key of the item.
    pub pk: String,
    /// Sort key of the item, without version.
    pub base_sk: String,
    /// By version number; newest first by default.
    pub order: Order,
    /// Versions per page: at least 1, at most [`MAX_PAGE_SIZE`] (values outside are moved inside).
    pub limit: usize,
    /// Leave out versions expired at this time (epoch seconds, [`Item::is_expired`]); `None` lists
    /// them (a rebuild reads every stored version).
    pub live_at: Option<i64>,
    /// Start after this version (from the previous page's `next`); it must be of this item.
    pub start: Option<VersionKey>,
}

impl VersionQuery {
    /// The versions of `pk` / `base_sk`, newest first, 20 per page.
    ///
    /// ```
    /// assert_eq!(cqrs_store::query::VersionQuery::new("P#t1", "a").limit, 20);
    /// ```
    pub fn new(pk: impl Into<String>, base_sk: impl Into<String>) -> Self {
        VersionQuery {
            pk: pk.into(),
            base_sk: base_sk.into(),
            order: Order::Descending,
            limit: 20,
            live_at: None,
            start: None,
        }
    }

    /// The item's id, `pk#base_sk`: the index's partition key.
    ///
    /// ```
    /// assert_eq!(cqrs_store::query::VersionQuery::new("LOG#t1#2024-01", "x").id(), "LOG#t1#2024-01#x");
    /// ```
    pub fn id(&self) -> String {
        generate_id(&self.pk, &self.base_sk)
    }
}

/// Clamps a requested page size into `1..=MAX_PAGE_SIZE`.
fn page_size(limit: usize) -> usize {
    limit.clamp(1, MAX_PAGE_SIZE)
}

/// Soft-deleted items are left out by this filter (`#deleted` is `isDeleted`, `:true` is `true`);
/// an item without the attribute is not deleted.
const NOT_DELETED: &str = "attribute_not_exists(#deleted) OR #deleted <> :true";

impl Store {
    /// The latest state of `pk` / `sk` (no version) in the data table, soft-deleted or not; `None`
    /// when the data table has no such item. An eventually consistent read: data-sync writes the
    /// table asynchronously anyway.
    ///
    /// ```no_run
    /// # async fn example(store: &cqrs_store::Store) -> Result<(), cqrs_store::StoreError> {
    /// if let Some(item) = store.get_data_item("PRODUCT#t1", "P001").await? {
    ///     println!("version {} deleted {}", item.version, item.is_deleted);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn get_data_item(&self, pk: &str, sk: &str) -> Result<Option<Item>, StoreError> {
        self.get_item(
            "GetItem (data)",
            &self.tables.data,
            pk,
            sk.to_string(),
            false,
        )
        .await
    }

    /// Version `version` of `pk` / `base_sk` in the history table (`sk` is `base_sk@version`);
    /// `None` when the history has no such version.
    ///
    /// ```no_run
    /// # async fn example(store: &cqrs_store::Store) -> Result<(), cqrs_store::StoreError> {
    /// let second = store.get_history_version("PRODUCT#t1", "P001", 2).await?;
    /// assert!(second.is_none_or(|item| item.sk == "P001@2"));
    /// # Ok(()) }
    /// ```
    pub async fn get_history_version(
        &self,
        pk: &str,
        base_sk: &str,
        version: i64,
    ) -> Result<Option<Item>, StoreError> {
        let sk = add_sort_key_version(base_sk, version);
        self.get_item("GetItem (history)", &self.tables.history, pk, sk, false)
            .await
    }

    /// One page of a partition of the data table (see the [module docs](self) for the paging
    /// rules). A start key of another partition is refused without a read.
    ///
    /// ```no_run
    /// use cqrs_store::query::{PartitionQuery, SortKeyRange};
    /// # async fn example(store: &cqrs_store::Store) -> Result<(), cqrs_store::StoreError> {
    /// let query = PartitionQuery::new("LOG#t1#2024-01").range(SortKeyRange::Between(
    ///     "2024-01-15T00:00:00.000Z".into(),
    ///     "2024-01-15T23:59:59.999Z~".into(),
    /// ));
    /// let page = store.query_partition(&query).await?;
    /// assert!(page.items.len() <= 20);
    /// # Ok(()) }
    /// ```
    pub async fn query_partition(
        &self,
        query: &PartitionQuery,
    ) -> Result<Page<PageKey>, StoreError> {
        if let Some(start) = &query.start
            && (start.pk != query.pk || !query.range.contains(&start.sk))
        {
            return Err(StoreError::Dynamo(format!(
                "start key {} / {} is outside the partition query on {}",
                start.pk, start.sk, query.pk
            )));
        }
        if query.range.is_empty() {
            return Ok(Page {
                items: Vec::new(),
                next: None,
            });
        }
        let condition = match &query.range {
            SortKeyRange::All => "#pk = :pk",
            SortKeyRange::Prefix(_) => "#pk = :pk AND begins_with(#sk, :prefix)",
            SortKeyRange::From(_) => "#pk = :pk AND #sk >= :from",
            SortKeyRange::To(_) => "#pk = :pk AND #sk <= :to",
            SortKeyRange::Between(_, _) => "#pk = :pk AND #sk BETWEEN :from AND :to",
        };
        let mut builder = self
            .client
            .query()
            .table_name(&self.tables.data)
            .key_condition_expression(condition)
            .expression_attribute_names("#pk", "pk")
            .expression_attribute_values(":pk", AttributeValue::S(query.pk.clone()))
            .scan_index_forward(query.order.forward());
        if !matches!(query.range, SortKeyRange::All) {
            builder = builder.expression_attribute_names("#sk", "sk");
        }
        let value = |s: &String| AttributeValue::S(s.clone());
        builder = match &query.range {
            SortKeyRange::All => builder,
            SortKeyRange::Prefix(prefix) => {
                builder.expression_attribute_values(":prefix", value(prefix))
            }
            SortKeyRange::From(from) => builder.expression_attribute_values(":from", value(from)),
            SortKeyRange::To(to) => builder.expression_attribute_values(":to", value(to)),
            SortKeyRange::Between(from, to) => builder
                .expression_attribute_values(":from", value(from))
                .expression_attribute_values(":to", value(to)),
        };
        if !query.include_deleted {
            builder = builder
                .filter_expression(NOT_DELETED)
                .expression_attribute_names("#deleted", "isDeleted")
                .expression_attribute_values(":true", AttributeValue::Bool(true));
        }
        let start = query.start.as_ref().map(PageKey::attributes);
        let (items, more) = read_page(
            builder,
            start,
            page_size(query.limit),
            query.live_at,
            "Query (data)",
        )
        .await?;
        let next = if more {
            items.last().map(PageKey::of)
        } else {
            None
        };
        Ok(Page { items, next })
    }

    /// One page of the versions of one item, from the history table's
    /// [`HISTORY_VERSION_INDEX`], in numeric version order (see the [module docs](self) for the
    /// paging rules). Only versions whose `pk` is the query's are listed (two items of different
    /// partitions can share an id). A start key of another item is refused without a read.
    ///
    /// ```no_run
    /// use cqrs_store::query::VersionQuery;
    /// # async fn example(store: &cqrs_store::Store) -> Result<(), cqrs_store::StoreError> {
    /// let page = store.query_versions(&VersionQuery::new("PRODUCT#t1", "P001")).await?;
    /// let versions: Vec<i64> = page.items.iter().map(|item| item.version).collect();
    /// assert!(versions.windows(2).all(|w| w[0] > w[1]));
    /// # Ok(()) }
    /// ```
    pub async fn query_versions(
        &self,
        query: &VersionQuery,
    ) -> Result<Page<VersionKey>, StoreError> {
        let id = query.id();
        if let Some(start) = &query.start
            && *start != VersionKey::new(&query.pk, &query.base_sk, start.version)
        {
            return Err(StoreError::Dynamo(format!(
                "start key {} / {} is outside the version query on {id}",
                start.pk, start.sk
            )));
        }
        let builder = self
            .client
            .query()
            .table_name(&self.tables.history)
            .index_name(HISTORY_VERSION_INDEX)
            .key_condition_expression("#id = :id")
            .filter_expression("#pk = :pk")
            .expression_attribute_names("#id", "id")
            .expression_attribute_names("#pk", "pk")
            .expression_attribute_values(":id", AttributeValue::S(id))
            .expression_attribute_values(":pk", AttributeValue::S(query.pk.clone()))
            .scan_index_forward(query.order.forward());
        let start = query.start.as_ref().map(VersionKey::attributes);
        let (items, more) = read_page(
            builder,
            start,
            page_size(query.limit),
            query.live_at,
            "Query (history versions)",
        )
        .await?;
        let next = if more {
            items.last().map(VersionKey::of)
        } else {
            None
        };
        Ok(Page { items, next })
    }
}

/// Reads up to `limit` items of the query `builder` from `start` on, plus one item ahead to know
/// whether more follow, leaving out the items expired at `live_at` when given. Keeps querying while
/// a filter or the 1 MB page limit leaves the page short, evaluating more items per request each
/// time (so a run of filtered items costs few requests).
async fn read_page(
    builder: QueryFluentBuilder,
    mut start: Option<HashMap<String, AttributeValue>>,
    limit: usize,
    live_at: Option<i64>,
    operation: &str,
) -> Result<(Vec<Item>, bool), StoreError> {
    let mut items = Vec::with_capacity(limit + 1);
    let mut batch = limit + 1;
    loop {
        let want = limit + 1 - items.len();
        let evaluate = batch.max(want).min(MAX_PAGE_SIZE + 1);
        let output = builder
            .clone()
            .limit(i32::try_from(evaluate).unwrap_or(i32::MAX))
            .set_exclusive_start_key(start.take())
            .send()
            .await
            .map_err(|e| sdk_error(operation, e))?;
        for attributes in output.items.unwrap_or_default() {
            let item = Item::from_attributes(attributes)?;
            if !live_at.is_some_and(|now| item.is_expired(now)) {
                items.push(item);
            }
        }
        if items.len() > limit {
            items.truncate(limit);
            return Ok((items, true));
        }
        match output.last_evaluated_key {
            Some(key) if !key.is_empty() => start = Some(key),
            _ => return Ok((items, false)),
        }
        batch = batch.saturating_mul(2);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_compare_bytewise_like_dynamodb() {
        let between = SortKeyRange::Between("a#1".into(), "a#3".into());
        assert!(between.contains("a#1"));
        assert!(between.contains("a#2#x"));
        assert!(between.contains("a#3"));
        assert!(!between.contains("a#3#x"));
        assert!(!between.contains("a#0"));
        // Upper case sorts before lower case, as in DynamoDB.
        assert!(SortKeyRange::To("a".into()).contains("Z"));
        assert!(!SortKeyRange::Prefix("ab".into()).contains("a"));
    }

    /// A store whose client has no endpoint it could reach: any request would fail, so an answer
    /// proves no request was sent.
    fn offline_store() -> Store {
        let config = aws_sdk_dynamodb::Config::builder()
            .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
            .region(aws_sdk_dynamodb::config::Region::new("us-east-1"))
            .endpoint_url("http://127.0.0.1:9")
            .build();
        Store::new(
            aws_sdk_dynamodb::Client::from_conf(config),
            crate::Tables::new("c", "d", "h", "i"),
        )
    }

    #[tokio::test]
    async fn start_keys_outside_the_query_are_refused_before_any_read() {
        let store = offline_store();
        let other_pk = PartitionQuery::new("P#t1").start(Some(PageKey {
            pk: "P#t2".into(),
            sk: "a".into(),
        }));
        let outside_prefix = PartitionQuery::new("P#t1")
            .range(SortKeyRange::Prefix("a".into()))
            .start(Some(PageKey {
                pk: "P#t1".into(),
                sk: "b".into(),
            }));
        for query in [other_pk, outside_prefix] {
            let error = store.query_partition(&query).await.unwrap_err();
            assert!(error.to_string().contains("outside"), "{error}");
        }
        let mut versions = VersionQuery::new("P#t1", "a");
        versions.start = Some(VersionKey::new("P#t1", "b", 2));
        let error = store.query_versions(&versions).await.unwrap_err();
        assert!(error.to_string().contains("outside"), "{error}");
        // A reversed range reads nothing and needs no request.
        let empty =
            PartitionQuery::new("P#t1").range(SortKeyRange::Between("b".into(), "a".into()));
        let page = store.query_partition(&empty).await.unwrap();
        assert!(page.items.is_empty() && page.next.is_none());
    }

    #[test]
    fn page_sizes_stay_in_bounds() {
        assert_eq!(page_size(0), 1);
        assert_eq!(page_size(20), 20);
        assert_eq!(page_size(5000), MAX_PAGE_SIZE);
    }

    #[test]
    fn version_keys_name_all_four_index_and_table_keys() {
        let key = VersionKey::new("ORDER#t1", "ORDER_ITEM#o1#001", 11);
        let attributes = key.attributes();
        assert_eq!(attributes.len(), 4);
        assert_eq!(attributes["version"], AttributeValue::N("11".into()));
        assert_eq!(
            attributes["id"],
            AttributeValue::S("ORDER#t1#ORDER_ITEM#o1#001".into())
        );
        assert_eq!(
            attributes["sk"],
            AttributeValue::S("ORDER_ITEM#o1#001@11".into())
        );
    }
}
