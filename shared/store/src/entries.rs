//! The reads behind access patterns: one page of key entries of the data table or one of its GSIs
//! ([`Store::query_entries`]), and the items of a set of keys as the data table holds them now
//! ([`Store::get_data_items`]).
//!
//! A GSI is eventually consistent and may project only keys, so an index read yields positions
//! ([`Entry::key`]: the table's `pk` and `sk` and the index's key attributes), and the items are
//! read again from the data table, strongly consistent. A read of the table itself is strongly
//! consistent already and yields the items with their positions.
//!
//! ```no_run
//! use cqrs_model::Model;
//! use cqrs_store::entries::EntryQuery;
//!
//! # async fn example(store: &cqrs_store::Store) -> Result<(), cqrs_store::StoreError> {
//! let model = Model::example();
//! let plan = model.query("orders_of_user", "t1", &[("userId", "u1")]).unwrap();
//! let query = EntryQuery::for_partition(&plan, 0, false, 20);
//! let page = store.query_entries(&query).await?;
//! let keys: Vec<(String, String)> = page.entries.iter().filter_map(|e| e.table_key()).collect();
//! let items = store.get_data_items(&keys).await?;
//! assert!(items.len() <= keys.len());
//! # Ok(()) }
//! ```

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes};
use cqrs_item::Item;
use cqrs_model::{KeyValue, PatternQuery, SortKeyCondition, SortOp};

use crate::{Store, StoreError, sdk_error};

/// A position in the table or an index: every key attribute by name (`pk`, `sk`, and the index's).
pub type EntryKey = BTreeMap<String, KeyValue>;

/// How many keys one `BatchGetItem` call takes.
///
/// ```
/// assert_eq!(cqrs_store::entries::BATCH_GET_KEYS, 100);
/// ```
pub const BATCH_GET_KEYS: usize = 100;

/// One key-condition query on the data table or one GSI.
///
/// ```
/// let model = cqrs_model::Model::example();
/// let plan = model.query("orders_by_status", "t1", &[("status", "PAID")]).unwrap();
/// let q = cqrs_store::entries::EntryQuery::for_partition(&plan, 3, true, 5);
/// assert_eq!(q.index.as_deref(), Some("gsi2"));
/// assert_eq!(q.equal[0].1.as_str(), "STATUS#t1#PAID#SHARD#3");
/// assert_eq!(q.key_attributes, ["gsi2pk", "gsi2sk", "pk", "sk"]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryQuery {
    /// The GSI, `None` for the table.
    pub index: Option<String>,
    /// Attributes the key condition fixes: the partition's, then leading sort attributes.
    pub equal: Vec<(String, KeyValue)>,
    /// The condition on the next sort attribute.
    pub sort: Option<SortKeyCondition>,
    /// Every key attribute of a position (the index's, then `pk` and `sk`).
    pub key_attributes: Vec<String>,
    /// Ascending sort key order.
    pub forward: bool,
    /// Entries to read at most (DynamoDB's `Limit`).
    pub limit: usize,
    /// Continue after this position.
    pub start: Option<EntryKey>,
}

impl EntryQuery {
    /// The query of partition `shard` of a pattern plan.
    ///
    /// ```
    /// let model = cqrs_model::Model::example();
    /// let plan = model.query("products", "t1", &[]).unwrap();
    /// let q = cqrs_store::entries::EntryQuery::for_partition(&plan, 0, true, 20);
    /// assert_eq!(q.index, None);
    /// assert_eq!(q.key_attributes, ["pk", "sk"]);
    /// ```
    pub fn for_partition(
        plan: &PatternQuery<'_>,
        shard: usize,
        forward: bool,
        limit: usize,
    ) -> Self {
        let mut equal: Vec<(String, KeyValue)> = plan
            .partition_attrs
            .iter()
            .map(|a| a.name.clone())
            .zip(plan.partitions.get(shard).cloned().unwrap_or_default())
            .collect();
        equal.extend(
            plan.sort_attrs
                .iter()
                .map(|a| a.name.clone())
                .zip(plan.sort_equal.iter().cloned()),
        );
        let mut key_attributes: Vec<String> = plan
            .partition_attrs
            .iter()
            .chain(&plan.sort_attrs)
            .map(|a| a.name.clone())
            .collect();
        for table_key in ["pk", "sk"] {
            if !key_attributes.iter().any(|k| k == table_key) {
                key_attributes.push(table_key.into());
            }
        }
        EntryQuery {
            index: plan.index.map(|i| i.name.clone()),
            equal,
            sort: plan.sort.clone(),
            key_attributes,
            forward,
            limit,
            start: None,
        }
    }
}

/// One entry of a page: its position, and for a read of the table the item itself.
///
/// ```
/// use cqrs_model::KeyValue;
/// let entry = cqrs_store::entries::Entry {
///     key: [("pk".to_string(), KeyValue::S("P#t1".into())), ("sk".to_string(), KeyValue::S("a".into()))].into(),
///     item: None,
/// };
/// assert_eq!(entry.table_key(), Some(("P#t1".to_string(), "a".to_string())));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Every key attribute of the entry.
    pub key: EntryKey,
    /// The item, when the query read the table (strongly consistent).
    pub item: Option<Item>,
}

impl Entry {
    /// The table keys (`pk`, `sk`) of the entry.
    pub fn table_key(&self) -> Option<(String, String)> {
        match (self.key.get("pk"), self.key.get("sk")) {
            (Some(KeyValue::S(pk)), Some(KeyValue::S(sk))) => Some((pk.clone(), sk.clone())),
            _ => None,
        }
    }
}

/// A page of entries; `more` when DynamoDB said the read may continue after the last one.
///
/// ```
/// let page = cqrs_store::entries::EntryPage { entries: vec![], more: false };
/// assert!(page.entries.is_empty());
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EntryPage {
    /// The entries, in the query's order.
    pub entries: Vec<Entry>,
    /// Whether more entries may follow the last one.
    pub more: bool,
}

fn attribute(value: &KeyValue) -> AttributeValue {
    match value {
        KeyValue::S(s) => AttributeValue::S(s.clone()),
        KeyValue::N(n) => AttributeValue::N(n.clone()),
    }
}

fn key_value(value: &AttributeValue) -> Option<KeyValue> {
    match value {
        AttributeValue::S(s) => Some(KeyValue::S(s.clone())),
        AttributeValue::N(n) => Some(KeyValue::N(n.clone())),
        _ => None,
    }
}

impl Store {
    /// One page of entries of `query`, in its order. On the table the items come with their
    /// positions (strongly consistent); on a GSI only the key attributes are read.
    pub async fn query_entries(&self, query: &EntryQuery) -> Result<EntryPage, StoreError> {
        let mut names: HashMap<String, String> = HashMap::new();
        let mut values: HashMap<String, AttributeValue> = HashMap::new();
        let mut conditions = Vec::new();
        for (i, (name, value)) in query.equal.iter().enumerate() {
            names.insert(format!("#k{i}"), name.clone());
            values.insert(format!(":k{i}"), attribute(value));
            conditions.push(format!("#k{i} = :k{i}"));
        }
        if let Some(sort) = &query.sort {
            names.insert("#s".into(), sort.attribute.clone());
            match &sort.op {
                SortOp::Equal(v) => {
                    values.insert(":s".into(), attribute(v));
                    conditions.push("#s = :s".into());
                }
                SortOp::BeginsWith(prefix) => {
                    values.insert(":s".into(), AttributeValue::S(prefix.clone()));
                    conditions.push("begins_with(#s, :s)".into());
                }
                SortOp::Between(lo, hi) => {
                    values.insert(":lo".into(), AttributeValue::S(lo.clone()));
                    values.insert(":hi".into(), AttributeValue::S(hi.clone()));
                    conditions.push("#s BETWEEN :lo AND :hi".into());
                }
                SortOp::AtMost(hi) => {
                    values.insert(":hi".into(), AttributeValue::S(hi.clone()));
                    conditions.push("#s <= :hi".into());
                }
            }
        }
        let table = &self.tables.data;
        let mut builder = self
            .client
            .query()
            .table_name(table)
            .key_condition_expression(conditions.join(" AND "))
            .set_expression_attribute_values(Some(values))
            .scan_index_forward(query.forward)
            .limit(i32::try_from(query.limit.clamp(1, 1000)).unwrap_or(1000))
            .set_exclusive_start_key(
                query
                    .start
                    .as_ref()
                    .map(|key| key.iter().map(|(k, v)| (k.clone(), attribute(v))).collect()),
            );
        let operation = match &query.index {
            Some(index) => {
                // Only the positions: whatever the index projects, items are read again from
                // the table.
                let mut projection = Vec::new();
                for (i, name) in query.key_attributes.iter().enumerate() {
                    names.insert(format!("#p{i}"), name.clone());
                    projection.push(format!("#p{i}"));
                }
                builder = builder
                    .index_name(index)
                    .projection_expression(projection.join(", "));
                "Query (data index)"
            }
            None => {
                builder = builder.consistent_read(true);
                "Query (data)"
            }
        };
        let output = builder
            .set_expression_attribute_names(Some(names))
            .send()
            .await
            .map_err(|e| sdk_error(operation, e))?;
        let mut entries = Vec::new();
        for attributes in output.items.unwrap_or_default() {
            let key: EntryKey = query
                .key_attributes
                .iter()
                .filter_map(|name| {
                    attributes
                        .get(name)
                        .and_then(key_value)
                        .map(|v| (name.clone(), v))
                })
                .collect();
            let item = match &query.index {
                Some(_) => None,
                None => Some(Item::from_attributes(attributes)?),
            };
            entries.push(Entry { key, item });
        }
        let more = output.last_evaluated_key.is_some_and(|key| !key.is_empty());
        Ok(EntryPage { entries, more })
    }

    /// The data table's items of `keys` (`pk`, `sk`), strongly consistent, by key; keys the table
    /// does not hold are absent from the map. `BatchGetItem` calls of at most [`BATCH_GET_KEYS`]
    /// keys; unprocessed keys are asked for again with backoff, and keys still unprocessed after 8
    /// retries are a [`StoreError::Throttled`].
    ///
    /// ```no_run
    /// # async fn example(store: &cqrs_store::Store) -> Result<(), cqrs_store::StoreError> {
    /// let key = ("MASTER#t1".to_string(), "SETTING#ui#theme".to_string());
    /// let items = store.get_data_items(&[key.clone()]).await?;
    /// println!("{}", items.contains_key(&key));
    /// # Ok(()) }
    /// ```
    pub async fn get_data_items(
        &self,
        keys: &[(String, String)],
    ) -> Result<HashMap<(String, String), Item>, StoreError> {
        let mut items = HashMap::with_capacity(keys.len());
        for chunk in keys.chunks(BATCH_GET_KEYS) {
            let mut unique: Vec<&(String, String)> = chunk.iter().collect();
            unique.sort_unstable();
            unique.dedup();
            let request = unique
                .iter()
                .map(|(pk, sk)| {
                    HashMap::from([
                        ("pk".to_string(), AttributeValue::S(pk.clone())),
                        ("sk".to_string(), AttributeValue::S(sk.clone())),
                    ])
                })
                .collect::<Vec<_>>();
            let mut pending = Some(
                KeysAndAttributes::builder()
                    .set_keys(Some(request))
                    .consistent_read(true)
                    .build()
                    .map_err(|e| StoreError::Dynamo(format!("BatchGetItem (data): {e}")))?,
            );
            let mut attempt = 0u32;
            while let Some(keys_and_attributes) = pending.take() {
                let output = self
                    .client
                    .batch_get_item()
                    .request_items(&self.tables.data, keys_and_attributes)
                    .send()
                    .await
                    .map_err(|e| sdk_error("BatchGetItem (data)", e))?;
                if let Some(mut responses) = output.responses
                    && let Some(found) = responses.remove(&self.tables.data)
                {
                    for attributes in found {
                        let item = Item::from_attributes(attributes)?;
                        items.insert((item.pk.clone(), item.sk.clone()), item);
                    }
                }
                pending = output
                    .unprocessed_keys
                    .and_then(|mut u| u.remove(&self.tables.data))
                    .filter(|k| !k.keys().is_empty());
                if pending.is_some() {
                    attempt += 1;
                    if attempt > 8 {
                        return Err(StoreError::Throttled(
                            "BatchGetItem (data): keys still unprocessed after 8 retries".into(),
                        ));
                    }
                    tokio::time::sleep(Duration::from_millis(10u64 << attempt.min(6))).await;
                }
            }
        }
        Ok(items)
    }
}
