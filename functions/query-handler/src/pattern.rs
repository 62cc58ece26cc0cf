//! `GET /query/{pattern}`: the model's named access patterns, read by name.
//!
//! The model turns the pattern, the caller's tenant and the parameters into partitions and a key
//! condition ([`cqrs_model::Model::query`]); this module reads them:
//!
//! - **Fan-out.** A write-sharded pattern is one query per shard, sent concurrently and merged by
//!   the sort key in the asked order into pages of exactly `limit` items. Each shard is read a
//!   little at a time (its share of what the page still needs), so a page reads about as many
//!   entries as it returns instead of `limit` from every shard. Sort key attributes compare as
//!   DynamoDB compares them: strings by their UTF-8 bytes, native numbers (`N`) by exact decimal
//!   value ([`cqrs_item::Number`]'s order, never `f64`).
//! - **Cursors** hold every shard's position: the last entry the page consumed from it, "not
//!   started", or "done" ([`PatternCursor`]). Reading the pages to the end returns every item once,
//!   also when items are written between pages. A page answers a cursor only when an item of the
//!   pattern follows it: the reader looks one item past the page (that item is not consumed, the
//!   next page starts with it), so a non-null cursor is never followed by an empty page, whether
//!   the pattern ends on a page boundary, in a shard the merge had not finished, or after entries
//!   the exact filter or the checks below leave out.
//! - **Current items.** An index read yields positions only; the items are read again from the data
//!   table (strongly consistent). An entry whose item no longer has those index keys (the index lags,
//!   or the item moved) is left out: the item is, or will be, at its current position. Soft-deleted
//!   items are left out unless `includeDeleted=true`; items expired at the time of the read
//!   ([`PageRequest::live_at`], [`Item::is_expired`]) always. Left-out entries do not count towards
//!   the page: the reader goes on until it has `limit` items or every shard is done.
//! - **Collections.** A pattern over several entities of one partition returns them in one page,
//!   each item carrying its `entity`.

use std::cmp::Ordering;
use std::collections::{HashMap, VecDeque};
use std::future::Future;

use cqrs_item::{Item, Number, Value};
use cqrs_model::{KeyValue, Model, PatternQuery};
use cqrs_store::{
    Store, StoreError,
    entries::{Entry, EntryKey, EntryPage, EntryQuery},
    query::Order,
};

/// Where the entries and items of a pattern read come from: the [`Store`], or a test double that
/// serves a stale index.
pub trait EntrySource: Sync {
    /// One page of entries ([`Store::query_entries`]).
    fn query_entries(
        &self,
        query: &EntryQuery,
    ) -> impl Future<Output = Result<EntryPage, StoreError>> + Send;
    /// The data table's current items ([`Store::get_data_items`]).
    fn get_data_items(
        &self,
        keys: &[(String, String)],
    ) -> impl Future<Output = Result<HashMap<(String, String), Item>, StoreError>> + Send;
}

impl EntrySource for Store {
    fn query_entries(
        &self,
        query: &EntryQuery,
    ) -> impl Future<Output = Result<EntryPage, StoreError>> + Send {
        Store::query_entries(self, query)
    }

    fn get_data_items(
        &self,
        keys: &[(String, String)],
    ) -> impl Future<Output = Result<HashMap<(String, String), Item>, StoreError>> + Send {
        Store::get_data_items(self, keys)
    }
}

/// Where one shard's read stands between pages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShardPosition {
    /// Nothing read yet.
    Start,
    /// Continue after this entry.
    After(EntryKey),
    /// Every entry read.
    Done,
}

/// The positions of every shard (one for an unsharded pattern), what a cursor carries.
///
/// ```
/// use cqrs_query_handler::pattern::{PatternCursor, ShardPosition};
/// let fresh = PatternCursor::start(3);
/// assert_eq!(fresh.shards, vec![ShardPosition::Start; 3]);
/// assert!(!fresh.is_done());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatternCursor {
    /// One position per shard, shard `i` at `i`.
    pub shards: Vec<ShardPosition>,
}

impl PatternCursor {
    /// Every shard at its start.
    pub fn start(shards: usize) -> Self {
        PatternCursor {
            shards: vec![ShardPosition::Start; shards],
        }
    }

    /// Whether every shard is read to the end.
    pub fn is_done(&self) -> bool {
        self.shards.iter().all(|s| *s == ShardPosition::Done)
    }
}

/// What a page read costs, for the access log and the benchmarks.
///
/// ```
/// let stats = cqrs_query_handler::pattern::ReadStats::default();
/// assert_eq!(stats.queries, 0);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// Query calls.
    pub queries: usize,
    /// Entries the queries returned.
    pub entries: usize,
    /// Items read again from the data table.
    pub reread: usize,
    /// Entries left out because the index no longer matched the item.
    pub stale: usize,
}

/// One page of a pattern.
#[derive(Debug, Clone, PartialEq)]
pub struct PatternPage {
    /// The items, in the pattern's order, each with its `entity`.
    pub items: Vec<Item>,
    /// Where the next page starts; `None` when every shard is read to the end.
    pub cursor: Option<PatternCursor>,
    /// What the page cost.
    pub stats: ReadStats,
    /// Index (or table) entries read from each shard's partition, shard `i` at `i`.
    pub shard_entries: Vec<usize>,
}

/// How to read one page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageRequest {
    /// Sort key order.
    pub order: Order,
    /// Items per page.
    pub limit: usize,
    /// Keep soft-deleted items.
    pub include_deleted: bool,
    /// Leave out the items expired at this time (epoch seconds, [`Item::is_expired`]); the handler
    /// always gives the time of the request.
    pub live_at: Option<i64>,
    /// Where to start (every shard at its start when `None`).
    pub cursor: Option<PatternCursor>,
}

struct Shard {
    /// Where the next query of this shard starts (the last entry read, consumed or not).
    read_from: Option<EntryKey>,
    buffer: VecDeque<Entry>,
    more: bool,
}

impl Shard {
    fn live(&self) -> bool {
        !self.buffer.is_empty() || self.more
    }
}

/// The rounds of queries one page may take before it answers with what it has (every round
/// consumes entries or reads new ones; this bounds the time a page of mostly deleted or moved
/// items can take).
const MAX_ROUNDS: usize = 64;

/// Reads one page of `plan` (see the [module docs](self)).
pub async fn read_page<S: EntrySource>(
    source: &S,
    model: &Model,
    plan: &PatternQuery<'_>,
    request: PageRequest,
) -> Result<PatternPage, StoreError> {
    let count = plan.partitions.len();
    let cursor = request
        .cursor
        .unwrap_or_else(|| PatternCursor::start(count));
    // Where the next page starts, shard by shard: after the last entry this page answered or left
    // out. Entries merged past the page (the item that follows it, and what the merge took after
    // that) are not consumed: `pending` marks their shards.
    let mut committed = cursor.shards;
    let mut pending = vec![false; committed.len()];
    let mut shards: Vec<Shard> = committed
        .iter()
        .map(|position| {
            let (read_from, more) = match position {
                ShardPosition::Start => (None, true),
                ShardPosition::After(key) => (Some(key.clone()), true),
                ShardPosition::Done => (None, false),
            };
            Shard {
                read_from,
                buffer: VecDeque::new(),
                more,
            }
        })
        .collect();
    let forward = request.order == Order::Ascending;
    let limit = request.limit.max(1);
    let mut stats = ReadStats::default();
    let mut shard_entries = vec![0; count];
    let mut items = Vec::with_capacity(limit);
    // Whether an item of the pattern follows the page (found by reading one item past it).
    let mut follows = false;
    for _ in 0..MAX_ROUNDS {
        if follows || !shards.iter().any(Shard::live) {
            break;
        }
        // The rest of the page, and one item more: whether anything follows the page.
        let need = limit + 1 - items.len();
        // Read every shard that blocks the merge, each for its share of what the page needs.
        let live = shards.iter().filter(|s| s.live()).count().max(1);
        let share = need.div_ceil(live) + 1;
        let head = first_head(plan, &shards, forward);
        let mut reads = Vec::new();
        for (i, shard) in shards.iter().enumerate() {
            if blocks(plan, shard, head.as_ref(), forward) {
                let mut query = EntryQuery::for_partition(plan, i, forward, share);
                query.start = shard.read_from.clone();
                reads.push(async move { (i, source.query_entries(&query).await) });
            }
        }
        for (i, page) in futures::future::join_all(reads).await {
            let page = page?;
            stats.queries += 1;
            stats.entries += page.entries.len();
            if let Some(n) = shard_entries.get_mut(i) {
                *n += page.entries.len();
            }
            if let Some(shard) = shards.get_mut(i) {
                if let Some(last) = page.entries.last() {
                    shard.read_from = Some(last.key.clone());
                }
                shard.more = page.more && !page.entries.is_empty();
                shard.buffer.extend(page.entries);
            }
        }
        // Merge: take the first entry of all shards while no shard that ran dry could hold an
        // earlier one.
        let mut candidates = Vec::new();
        while candidates.len() < need {
            let head = first_head(plan, &shards, forward);
            if shards
                .iter()
                .any(|s| blocks(plan, s, head.as_ref(), forward))
            {
                break;
            }
            let Some((i, _)) = head else { break };
            if let Some(shard) = shards.get_mut(i)
                && let Some(entry) = shard.buffer.pop_front()
            {
                candidates.push((i, entry));
            }
        }
        let resolved = resolve(
            source,
            model,
            plan,
            candidates,
            (request.include_deleted, request.live_at),
            &mut stats,
        )
        .await?;
        for (i, key, item) in resolved {
            if follows {
                // Merged after the item that follows the page: not consumed.
                if let Some(p) = pending.get_mut(i) {
                    *p = true;
                }
                continue;
            }
            match item {
                Some(_) if items.len() == limit => {
                    // The first item after the page: the next page starts with it.
                    follows = true;
                    if let Some(p) = pending.get_mut(i) {
                        *p = true;
                    }
                }
                answered_or_left_out => {
                    if let Some(position) = committed.get_mut(i) {
                        *position = ShardPosition::After(key);
                    }
                    items.extend(answered_or_left_out);
                }
            }
        }
    }
    // A shard is done when it has nothing more and nothing merged past the page.
    let cursor = PatternCursor {
        shards: committed
            .into_iter()
            .zip(&shards)
            .zip(pending)
            .map(|((position, shard), pending)| {
                if shard.live() || pending {
                    position
                } else {
                    ShardPosition::Done
                }
            })
            .collect(),
    };
    Ok(PatternPage {
        items,
        cursor: (!cursor.is_done()).then_some(cursor),
        stats,
        shard_entries,
    })
}

/// The shard whose first buffered entry comes first in the read's order, with that entry's key
/// (ties go to the lower shard).
fn first_head(
    plan: &PatternQuery<'_>,
    shards: &[Shard],
    forward: bool,
) -> Option<(usize, EntryKey)> {
    shards
        .iter()
        .enumerate()
        .filter_map(|(i, s)| s.buffer.front().map(|e| (i, &e.key)))
        .min_by(|(a, x), (b, y)| ordered(plan, x, y, forward).then(a.cmp(b)))
        .map(|(i, key)| (i, key.clone()))
}

/// Whether `shard` must be read before the merge can take `head`: its buffer is empty, it may hold
/// more, and what it holds next could come before `head` (entries follow the last one read, so a
/// shard whose last entry already comes after `head` need not be read yet).
fn blocks(
    plan: &PatternQuery<'_>,
    shard: &Shard,
    head: Option<&(usize, EntryKey)>,
    forward: bool,
) -> bool {
    if !shard.buffer.is_empty() || !shard.more {
        return false;
    }
    match (&shard.read_from, head) {
        (Some(last), Some((_, head))) => ordered(plan, last, head, forward) != Ordering::Greater,
        _ => true,
    }
}

/// [`compare`] in the read's order.
fn ordered(plan: &PatternQuery<'_>, a: &EntryKey, b: &EntryKey, forward: bool) -> Ordering {
    let order = compare(plan, a, b);
    if forward { order } else { order.reverse() }
}

/// Orders two positions by the pattern's sort attributes, left to right.
fn compare(plan: &PatternQuery<'_>, a: &EntryKey, b: &EntryKey) -> Ordering {
    for attr in &plan.sort_attrs {
        let order = match (a.get(&attr.name), b.get(&attr.name)) {
            (Some(KeyValue::S(x)), Some(KeyValue::S(y))) => x.as_bytes().cmp(y.as_bytes()),
            (Some(KeyValue::N(x)), Some(KeyValue::N(y))) => compare_numbers(x, y),
            (x, y) => x.cmp(&y),
        };
        if order != Ordering::Equal {
            return order;
        }
    }
    Ordering::Equal
}

/// Compares two decimal numbers as DynamoDB orders them: by exact value, every one of up to 38
/// significant digits ([`Number`]'s order; an `f64` keeps 15 to 17). A text that is no number
/// DynamoDB holds (never in an index entry) compares as text.
fn compare_numbers(x: &str, y: &str) -> Ordering {
    match (Number::parse(x), Number::parse(y)) {
        (Ok(a), Ok(b)) => a.cmp(&b),
        _ => x.cmp(y),
    }
}

/// A key attribute of an item as an index holds it: `pk` and `sk`, or an index key attribute.
fn item_key(item: &Item, name: &str) -> Option<KeyValue> {
    match name {
        "pk" => Some(KeyValue::S(item.pk.clone())),
        "sk" => Some(KeyValue::S(item.sk.clone())),
        _ => match item.index_keys.get(name)? {
            Value::String(s) => Some(KeyValue::S(s.clone())),
            Value::Number(n) => Some(KeyValue::N(n.as_str().to_string())),
            _ => None,
        },
    }
}

/// The merged entries, in merge order, each with its shard, its position and its item: read again
/// from the data table when it came from an index, and `None` when it is left out (the item no
/// longer belongs to the pattern at that position, is soft-deleted without `include_deleted`, or
/// is expired at `live_at`).
async fn resolve<S: EntrySource>(
    source: &S,
    model: &Model,
    plan: &PatternQuery<'_>,
    candidates: Vec<(usize, Entry)>,
    (include_deleted, live_at): (bool, Option<i64>),
    stats: &mut ReadStats,
) -> Result<Vec<(usize, EntryKey, Option<Item>)>, StoreError> {
    if candidates.is_empty() {
        return Ok(Vec::new());
    }
    let mut current: HashMap<(String, String), Item> = HashMap::new();
    if plan.index.is_some() {
        let keys: Vec<(String, String)> = candidates
            .iter()
            .filter_map(|(_, e)| e.table_key())
            .collect();
        current = source.get_data_items(&keys).await?;
        stats.reread += current.len();
    }
    let mut answer = Vec::with_capacity(candidates.len());
    for (shard, entry) in candidates {
        let table_key = entry.table_key();
        let Entry { key, item } = entry;
        let item = match item {
            Some(item) => Some(item),
            None => {
                let found = table_key.and_then(|k| current.remove(&k));
                if found.is_none() {
                    stats.stale += 1;
                }
                found
            }
        };
        let filters = (include_deleted, live_at);
        let kept = item.and_then(|item| keep(model, plan, shard, &key, item, filters, stats));
        answer.push((shard, key, kept));
    }
    Ok(answer)
}

/// The current `item` of an entry of `shard` at `key` when the answer keeps it: it still sits where
/// the entry put it, inside the pattern's read, and is neither soft-deleted (unless
/// `include_deleted`) nor expired at `live_at`.
fn keep(
    model: &Model,
    plan: &PatternQuery<'_>,
    shard: usize,
    key: &EntryKey,
    mut item: Item,
    (include_deleted, live_at): (bool, Option<i64>),
    stats: &mut ReadStats,
) -> Option<Item> {
    let entity = match &item.entity {
        Some(name) => model.entity(name),
        None => model.entity_of_keys(&item.pk, &item.sk),
    }?;
    let partition: Option<Vec<KeyValue>> = plan
        .partition_attrs
        .iter()
        .map(|a| item_key(&item, &a.name))
        .collect();
    let sort: Option<Vec<KeyValue>> = plan
        .sort_attrs
        .iter()
        .map(|a| item_key(&item, &a.name))
        .collect();
    let (Some(partition), Some(sort)) = (partition, sort) else {
        stats.stale += 1;
        return None;
    };
    // The item must still sit where the index put it: same keys as the entry, inside the
    // pattern's read.
    let unmoved = plan
        .sort_attrs
        .iter()
        .zip(&sort)
        .all(|(a, v)| key.get(&a.name) == Some(v));
    if !unmoved || plan.matches(entity, &partition, &sort) != Some(shard) {
        stats.stale += 1;
        return None;
    }
    // A bound inside a bucket (`before=2024-01-15T00:00:00Z` on `{at:month}`): the keys kept the
    // whole bucket, the item's own timestamp decides.
    let attributes = cqrs_item::entity::EntityAttributes::of(&item.attributes);
    let view = cqrs_model::ItemView {
        tenant: &item.tenant_code,
        created_at: &item.created_at,
        attributes: &attributes,
    };
    if !plan.admits_values(entity, &view) {
        return None;
    }
    if item.is_deleted && !include_deleted || live_at.is_some_and(|now| item.is_expired(now)) {
        return None;
    }
    if item.entity.is_none() {
        item.entity = Some(entity.name.clone());
    }
    Some(item)
}
