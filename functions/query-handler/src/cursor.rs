//! Cursors: opaque continuation tokens of the two listings and of the access patterns.
//!
//! A cursor is base64url (no padding) of a small JSON document holding the store's start key and
//! what the listing it belongs to was: the listing (`items` or `versions`), the order, the sort
//! key range (partitions) and every key attribute (`pk`, `sk`, and for versions `id` and
//! `version`). On the way in every part is checked against the request: a cursor that does not
//! decode, was made for another listing, order, range, partition or item, or whose key does not
//! lie in the listing, is a 400 naming `cursor`; it never leads to a read elsewhere.
//!
//! The limit is not part of the cursor: a client may change the page size between pages.
//!
//! Cursors are not signed; they need not be, because nothing in one can widen a read beyond the
//! partition (or item) the request names and the caller was authorised for.
//!
//! ```
//! use cqrs_store::query::{PageKey, PartitionQuery, SortKeyRange};
//! use cqrs_query_handler::cursor;
//!
//! let query = PartitionQuery::new("ORDER#t1").range(SortKeyRange::Prefix("ORDER#".into()));
//! let key = PageKey { pk: "ORDER#t1".into(), sk: "ORDER#o7".into() };
//! let text = cursor::encode_partition(&query, &key);
//! assert_eq!(cursor::decode_partition(&text, &query).unwrap(), key);
//!
//! let other = PartitionQuery::new("ORDER#t2").range(SortKeyRange::Prefix("ORDER#".into()));
//! assert_eq!(cursor::decode_partition(&text, &other).unwrap_err().status(), 400);
//! ```

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use cqrs_keys::{MAX_PARTITION_KEY_BYTES, MAX_SORT_KEY_BYTES};
use cqrs_model::{KeyType, KeyValue, PatternQuery};
use cqrs_problem::ApiError;
use cqrs_store::entries::EntryKey;
use cqrs_store::query::{Order, PageKey, PartitionQuery, SortKeyRange, VersionKey, VersionQuery};

use crate::pattern::{PatternCursor, ShardPosition};
use serde::{Deserialize, Serialize};

/// The parameter name a bad cursor is reported under.
const FIELD: &str = "cursor";

/// What a cursor holds. Short member names keep cursors short.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Token {
    /// The listing: `items` (a partition) or `versions` (an item's history).
    #[serde(rename = "l")]
    listing: String,
    /// `asc` or `desc`.
    #[serde(rename = "o")]
    order: String,
    /// The sort key range of a partition listing: `all`, `prefix`, `from`, `to`, `between`.
    #[serde(rename = "r", default, skip_serializing_if = "Option::is_none")]
    range: Option<String>,
    /// The range's first bound (or prefix).
    #[serde(rename = "a", default, skip_serializing_if = "Option::is_none")]
    bound_a: Option<String>,
    /// The range's second bound.
    #[serde(rename = "b", default, skip_serializing_if = "Option::is_none")]
    bound_b: Option<String>,
    pk: String,
    sk: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    #[serde(rename = "v", default, skip_serializing_if = "Option::is_none")]
    version: Option<i64>,
}

const ITEMS: &str = "items";
const VERSIONS: &str = "versions";

fn order_name(order: Order) -> &'static str {
    match order {
        Order::Ascending => "asc",
        Order::Descending => "desc",
    }
}

fn range_parts(range: &SortKeyRange) -> (&'static str, Option<String>, Option<String>) {
    match range {
        SortKeyRange::All => ("all", None, None),
        SortKeyRange::Prefix(p) => ("prefix", Some(p.clone()), None),
        SortKeyRange::From(f) => ("from", Some(f.clone()), None),
        SortKeyRange::To(t) => ("to", None, Some(t.clone())),
        SortKeyRange::Between(f, t) => ("between", Some(f.clone()), Some(t.clone())),
    }
}

fn encode(token: &Token) -> String {
    // Serialising strings and numbers cannot fail.
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(token).unwrap_or_default())
}

fn decode(text: &str) -> Result<Token, ApiError> {
    let bytes = URL_SAFE_NO_PAD
        .decode(text)
        .map_err(|_| ApiError::bad_field(FIELD, "is not a cursor of this API (not base64url)"))?;
    serde_json::from_slice(&bytes)
        .map_err(|_| ApiError::bad_field(FIELD, "is not a cursor of this API"))
}

fn mismatch(what: &str) -> ApiError {
    ApiError::bad_field(
        FIELD,
        format!("was made for {what}: pass the cursor only with the request that returned it"),
    )
}

/// The cursor continuing `query` after `key` (the store's `next`).
///
/// ```
/// use cqrs_store::query::{PageKey, PartitionQuery};
/// let text = cqrs_query_handler::cursor::encode_partition(
///     &PartitionQuery::new("PRODUCT#t1"),
///     &PageKey { pk: "PRODUCT#t1".into(), sk: "P001".into() },
/// );
/// assert!(text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
/// ```
pub fn encode_partition(query: &PartitionQuery, key: &PageKey) -> String {
    let (range, bound_a, bound_b) = range_parts(&query.range);
    encode(&Token {
        listing: ITEMS.into(),
        order: order_name(query.order).into(),
        range: Some(range.into()),
        bound_a,
        bound_b,
        pk: key.pk.clone(),
        sk: key.sk.clone(),
        id: None,
        version: None,
    })
}

/// The start key of `cursor` for `query` (whose own `start` is ignored), or a 400 when the cursor
/// does not decode or was made for another listing, order, range or partition, or its sort key is
/// outside the range.
///
/// ```
/// use cqrs_store::query::{Order, PageKey, PartitionQuery};
/// use cqrs_query_handler::cursor;
///
/// let asc = PartitionQuery::new("PRODUCT#t1");
/// let text = cursor::encode_partition(&asc, &PageKey { pk: "PRODUCT#t1".into(), sk: "P1".into() });
/// let desc = PartitionQuery::new("PRODUCT#t1").order(Order::Descending);
/// assert_eq!(cursor::decode_partition(&text, &desc).unwrap_err().status(), 400);
/// assert_eq!(cursor::decode_partition("not a cursor", &asc).unwrap_err().status(), 400);
/// ```
pub fn decode_partition(cursor: &str, query: &PartitionQuery) -> Result<PageKey, ApiError> {
    let token = decode(cursor)?;
    if token.listing != ITEMS || token.id.is_some() || token.version.is_some() {
        return Err(mismatch("another listing"));
    }
    if token.order != order_name(query.order) {
        return Err(mismatch("another order"));
    }
    let (range, bound_a, bound_b) = range_parts(&query.range);
    if token.range.as_deref() != Some(range) || token.bound_a != bound_a || token.bound_b != bound_b
    {
        return Err(mismatch("another sort key range"));
    }
    if token.pk != query.pk {
        return Err(mismatch("another partition"));
    }
    if token.sk.is_empty()
        || token.sk.len() > MAX_SORT_KEY_BYTES
        || !query.range.contains(&token.sk)
    {
        return Err(mismatch("a sort key outside this listing"));
    }
    Ok(PageKey {
        pk: token.pk,
        sk: token.sk,
    })
}

/// The cursor continuing the version listing `query` after `key` (the store's `next`).
///
/// ```
/// use cqrs_store::query::{VersionKey, VersionQuery};
/// let query = VersionQuery::new("PRODUCT#t1", "P001");
/// let text = cqrs_query_handler::cursor::encode_versions(&query, &VersionKey::new("PRODUCT#t1", "P001", 9));
/// assert!(!text.is_empty());
/// ```
pub fn encode_versions(query: &VersionQuery, key: &VersionKey) -> String {
    encode(&Token {
        listing: VERSIONS.into(),
        order: order_name(query.order).into(),
        range: None,
        bound_a: None,
        bound_b: None,
        pk: key.pk.clone(),
        sk: key.sk.clone(),
        id: Some(key.id.clone()),
        version: Some(key.version),
    })
}

/// The start key of `cursor` for the version listing `query`, or a 400 when the cursor does not
/// decode or was made for another listing, order or item, or names a version that is not a version
/// of this item (every key attribute is checked: `pk`, `sk` = `base@version`, `id`, `version`).
///
/// ```
/// use cqrs_store::query::{VersionKey, VersionQuery};
/// use cqrs_query_handler::cursor;
///
/// let query = VersionQuery::new("PRODUCT#t1", "P001");
/// let text = cursor::encode_versions(&query, &VersionKey::new("PRODUCT#t1", "P001", 9));
/// assert_eq!(cursor::decode_versions(&text, &query).unwrap().version, 9);
/// let other = VersionQuery::new("PRODUCT#t1", "P002");
/// assert_eq!(cursor::decode_versions(&text, &other).unwrap_err().status(), 400);
/// ```
pub fn decode_versions(cursor: &str, query: &VersionQuery) -> Result<VersionKey, ApiError> {
    let token = decode(cursor)?;
    if token.listing != VERSIONS
        || token.range.is_some()
        || token.bound_a.is_some()
        || token.bound_b.is_some()
    {
        return Err(mismatch("another listing"));
    }
    if token.order != order_name(query.order) {
        return Err(mismatch("another order"));
    }
    let (Some(id), Some(version)) = (token.id, token.version) else {
        return Err(mismatch("another listing"));
    };
    if version < 1 {
        return Err(mismatch("a version that cannot exist"));
    }
    let key = VersionKey {
        pk: token.pk,
        sk: token.sk,
        id,
        version,
    };
    if key != VersionKey::new(&query.pk, &query.base_sk, version) {
        return Err(mismatch("another item"));
    }
    Ok(key)
}

/// What a pattern cursor holds: the pattern, the fingerprint of its tenant and parameters, the
/// order, and each shard's position (`0` not started, `1` done, or the entry's sort and table key
/// attributes; the partition is the shard's own and is not repeated).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PatternToken {
    #[serde(rename = "l")]
    listing: String,
    #[serde(rename = "p")]
    pattern: String,
    #[serde(rename = "f")]
    fingerprint: String,
    #[serde(rename = "o")]
    order: String,
    #[serde(rename = "s")]
    shards: Vec<serde_json::Value>,
}

const PATTERN: &str = "query";

/// The cursor continuing the pattern read `plan` in `order` at `cursor`.
///
/// ```
/// use cqrs_store::query::Order;
/// use cqrs_query_handler::{cursor, pattern::PatternCursor};
///
/// let model = cqrs_model::Model::example();
/// let plan = model.query("orders_by_status", "t1", &[("status", "PAID")]).unwrap();
/// let text = cursor::encode_pattern(&plan, Order::Ascending, &PatternCursor::start(10));
/// assert_eq!(cursor::decode_pattern(&text, &plan, Order::Ascending).unwrap(), PatternCursor::start(10));
/// let other = model.query("orders_by_status", "t2", &[("status", "PAID")]).unwrap();
/// assert_eq!(cursor::decode_pattern(&text, &other, Order::Ascending).unwrap_err().status(), 400);
/// ```
pub fn encode_pattern(plan: &PatternQuery<'_>, order: Order, cursor: &PatternCursor) -> String {
    let partition: Vec<&str> = plan
        .partition_attrs
        .iter()
        .map(|a| a.name.as_str())
        .collect();
    let shards = cursor
        .shards
        .iter()
        .map(|position| match position {
            ShardPosition::Start => serde_json::Value::from(0),
            ShardPosition::Done => serde_json::Value::from(1),
            ShardPosition::After(key) => serde_json::Value::Object(
                key.iter()
                    .filter(|(name, _)| !partition.contains(&name.as_str()))
                    .map(|(name, value)| {
                        let ty = if value.is_number() { "N" } else { "S" };
                        (name.clone(), serde_json::json!([ty, value.as_str()]))
                    })
                    .collect(),
            ),
        })
        .collect();
    let token = PatternToken {
        listing: PATTERN.into(),
        pattern: plan.pattern.name.clone(),
        fingerprint: format!("{:016x}", plan.fingerprint()),
        order: order_name(order).into(),
        shards,
    };
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(&token).unwrap_or_default())
}

/// The shard positions of `cursor` for the pattern read `plan` in `order`, or a 400 when the cursor
/// does not decode, was made for another pattern, tenant, parameter set or order, or holds a
/// position outside what `plan` reads for this caller: every sort key attribute inside the key
/// condition, the table keys of one of the pattern's entities in the caller's tenant, nothing else.
///
/// ```
/// use cqrs_store::query::Order;
/// use cqrs_query_handler::cursor;
///
/// let model = cqrs_model::Model::example();
/// let plan = model.query("items_of_order", "t1", &[("orderId", "o1")]).unwrap();
/// assert_eq!(cursor::decode_pattern("e30", &plan, Order::Ascending).unwrap_err().status(), 400);
/// ```
pub fn decode_pattern(
    cursor: &str,
    plan: &PatternQuery<'_>,
    order: Order,
) -> Result<PatternCursor, ApiError> {
    let bytes = URL_SAFE_NO_PAD
        .decode(cursor)
        .map_err(|_| ApiError::bad_field(FIELD, "is not a cursor of this API (not base64url)"))?;
    let token: PatternToken = serde_json::from_slice(&bytes)
        .map_err(|_| ApiError::bad_field(FIELD, "is not a cursor of this API"))?;
    if token.listing != PATTERN {
        return Err(mismatch("another listing"));
    }
    if token.pattern != plan.pattern.name {
        return Err(mismatch("another access pattern"));
    }
    if token.fingerprint != format!("{:016x}", plan.fingerprint()) {
        return Err(mismatch("other parameters or another tenant"));
    }
    if token.order != order_name(order) {
        return Err(mismatch("another order"));
    }
    if token.shards.len() != plan.partitions.len() {
        return Err(mismatch("another number of shards"));
    }
    let mut shards = Vec::with_capacity(token.shards.len());
    for (shard, value) in token.shards.iter().enumerate() {
        let position = match value {
            serde_json::Value::Number(n) if n.as_u64() == Some(0) => ShardPosition::Start,
            serde_json::Value::Number(n) if n.as_u64() == Some(1) => ShardPosition::Done,
            serde_json::Value::Object(members) => {
                ShardPosition::After(position_key(plan, shard, members)?)
            }
            _ => return Err(ApiError::bad_field(FIELD, "is not a cursor of this API")),
        };
        shards.push(position);
    }
    Ok(PatternCursor { shards })
}

/// A shard position of a cursor as a start key, checked against what `plan` reads.
fn position_key(
    plan: &PatternQuery<'_>,
    shard: usize,
    members: &serde_json::Map<String, serde_json::Value>,
) -> Result<EntryKey, ApiError> {
    let outside = || mismatch("a position outside this pattern's read");
    let mut expected: Vec<&str> = plan.sort_attrs.iter().map(|a| a.name.as_str()).collect();
    for table_key in ["pk", "sk"] {
        if !expected.contains(&table_key) {
            expected.push(table_key);
        }
    }
    let partition: Vec<&str> = plan
        .partition_attrs
        .iter()
        .map(|a| a.name.as_str())
        .collect();
    expected.retain(|name| !partition.contains(name));
    if members.len() != expected.len() {
        return Err(outside());
    }
    let mut key = EntryKey::new();
    for name in expected {
        // The key schema's type and DynamoDB's size limit of this attribute: a start key that
        // breaks either is refused by DynamoDB (a ValidationException), so it is a bad cursor.
        let (ty, max) = match plan.sort_attrs.iter().find(|a| a.name == name) {
            Some(attr) => (attr.ty, MAX_SORT_KEY_BYTES),
            None if name == "pk" => (KeyType::S, MAX_PARTITION_KEY_BYTES),
            None => (KeyType::S, MAX_SORT_KEY_BYTES),
        };
        let value = match members
            .get(name)
            .and_then(|v| v.as_array())
            .map(Vec::as_slice)
        {
            // Binary key attributes travel as text, as the handler reads them.
            Some([kind, text]) => match (kind.as_str(), text.as_str(), ty) {
                (Some("S"), Some(text), KeyType::S | KeyType::B) => KeyValue::S(text.to_string()),
                (Some("N"), Some(text), KeyType::N) if cqrs_item::Number::parse(text).is_ok() => {
                    KeyValue::N(text.to_string())
                }
                _ => return Err(outside()),
            },
            _ => return Err(outside()),
        };
        if value.as_str().is_empty() || value.as_str().len() > max {
            return Err(outside());
        }
        key.insert(name.to_string(), value);
    }
    let partition_values = plan.partitions.get(shard).ok_or_else(outside)?;
    for (attr, value) in plan.partition_attrs.iter().zip(partition_values) {
        key.insert(attr.name.clone(), value.clone());
    }
    let sort: Option<Vec<KeyValue>> = plan
        .sort_attrs
        .iter()
        .map(|a| key.get(&a.name).cloned())
        .collect();
    if !sort.is_some_and(|sort| plan.in_range(&sort)) {
        return Err(outside());
    }
    match (key.get("pk"), key.get("sk")) {
        (Some(KeyValue::S(pk)), Some(KeyValue::S(sk)))
            if plan.entity_of_table_key(pk, sk).is_some() => {}
        _ => return Err(outside()),
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(json: &str) -> String {
        URL_SAFE_NO_PAD.encode(json)
    }

    #[test]
    fn partition_cursors_round_trip_for_every_range() {
        for range in [
            SortKeyRange::All,
            SortKeyRange::Prefix("a#".into()),
            SortKeyRange::From("a".into()),
            SortKeyRange::To("z".into()),
            SortKeyRange::Between("a".into(), "z".into()),
        ] {
            for order in [Order::Ascending, Order::Descending] {
                let query = PartitionQuery::new("P#t1")
                    .range(range.clone())
                    .order(order);
                let key = PageKey {
                    pk: "P#t1".into(),
                    sk: "a#m".into(),
                };
                let text = encode_partition(&query, &key);
                assert_eq!(decode_partition(&text, &query).unwrap(), key, "{range:?}");
            }
        }
    }

    #[test]
    fn a_partition_cursor_fits_only_its_own_query_shape() {
        let query = PartitionQuery::new("P#t1").range(SortKeyRange::Prefix("a#".into()));
        let text = encode_partition(
            &query,
            &PageKey {
                pk: "P#t1".into(),
                sk: "a#m".into(),
            },
        );
        for other in [
            PartitionQuery::new("P#t1"),
            PartitionQuery::new("P#t1").range(SortKeyRange::Prefix("a#m".into())),
            PartitionQuery::new("P#t1").range(SortKeyRange::From("a#".into())),
            PartitionQuery::new("P#t2").range(SortKeyRange::Prefix("a#".into())),
            PartitionQuery::new("P#t1")
                .range(SortKeyRange::Prefix("a#".into()))
                .order(Order::Descending),
        ] {
            assert_eq!(
                decode_partition(&text, &other).unwrap_err().status(),
                400,
                "{other:?}"
            );
        }
        // The limit and the deleted filter are not part of the shape.
        let relaxed = query.clone().limit(3).include_deleted(true);
        assert!(decode_partition(&text, &relaxed).is_ok());
    }

    #[test]
    fn forged_partition_cursors_are_refused() {
        let query = PartitionQuery::new("P#t1").range(SortKeyRange::Prefix("a#".into()));
        for forged in [
            // A sort key outside the prefix.
            raw(r#"{"l":"items","o":"asc","r":"prefix","a":"a#","pk":"P#t1","sk":"b"}"#),
            // An empty sort key.
            raw(r#"{"l":"items","o":"asc","r":"prefix","a":"a#","pk":"P#t1","sk":""}"#),
            // Extra members.
            raw(r#"{"l":"items","o":"asc","r":"prefix","a":"a#","pk":"P#t1","sk":"a#1","x":1}"#),
            // Version members on a partition cursor.
            raw(r#"{"l":"items","o":"asc","r":"prefix","a":"a#","pk":"P#t1","sk":"a#1","v":1}"#),
            // Missing members, wrong types, not JSON, not base64url, padded.
            raw(r#"{"l":"items","o":"asc","pk":"P#t1"}"#),
            raw(r#"{"l":"items","o":"asc","r":"prefix","a":"a#","pk":1,"sk":"a#1"}"#),
            raw("garbage"),
            "!!!".into(),
            format!("{}=", raw(r#"{"l":"items"}"#)),
        ] {
            assert_eq!(
                decode_partition(&forged, &query).unwrap_err().status(),
                400,
                "{forged}"
            );
        }
    }

    /// A pattern cursor for `orders_by_status` (10 shards) whose first shard stands at `gsi2sk`.
    fn status_cursor(members: serde_json::Value) -> String {
        let mut shards = vec![serde_json::json!(0); 10];
        shards[0] = members;
        let model = cqrs_model::Model::example();
        let plan = model
            .query("orders_by_status", "t1", &[("status", "PENDING")])
            .unwrap();
        raw(&serde_json::json!({
            "l": "query",
            "p": "orders_by_status",
            "f": format!("{:016x}", plan.fingerprint()),
            "o": "asc",
            "s": shards,
        })
        .to_string())
    }

    /// Each key value of a pattern position has the type the index's (or table's) key schema
    /// declares and fits DynamoDB's key sizes; anything else is a 400 naming `cursor`, never a
    /// start key DynamoDB refuses (a 500, the review's forged `"gsi2sk":["N","1"]`).
    #[test]
    fn pattern_positions_have_the_key_schema_types_and_sizes() {
        let model = cqrs_model::Model::example();
        let plan = model
            .query("orders_by_status", "t1", &[("status", "PENDING")])
            .unwrap();
        let good = serde_json::json!({
            "gsi2sk": ["S", "2024-01-15T10:30:00.000Z#o1"],
            "pk": ["S", "ORDER#t1"],
            "sk": ["S", "ORDER#o1"],
        });
        let decoded = decode_pattern(&status_cursor(good.clone()), &plan, Order::Ascending)
            .expect("a position the handler made decodes");
        let ShardPosition::After(key) = &decoded.shards[0] else {
            panic!("{decoded:?}")
        };
        assert_eq!(
            key["gsi2sk"],
            KeyValue::S("2024-01-15T10:30:00.000Z#o1".into())
        );
        let long = "x".repeat(MAX_SORT_KEY_BYTES + 1);
        for (attr, value) in [
            ("gsi2sk", serde_json::json!(["N", "1"])),
            ("gsi2sk", serde_json::json!(["B", "AQ"])),
            ("gsi2sk", serde_json::json!(["S", long])),
            ("pk", serde_json::json!(["N", "1"])),
            ("sk", serde_json::json!(["N", "1"])),
            ("sk", serde_json::json!(["S", format!("ORDER#{long}")])),
        ] {
            let mut forged = good.clone();
            forged[attr] = value.clone();
            let error = decode_pattern(&status_cursor(forged), &plan, Order::Ascending)
                .expect_err(&format!("{attr} = {value}"));
            assert_eq!(error.status(), 400, "{attr} = {value}");
            assert!(
                matches!(&error, ApiError::BadRequest { field: Some(f), .. } if f == FIELD),
                "{attr} = {value}: {error:?}"
            );
        }
    }

    /// A native multi-attribute index with a number sort attribute: its positions must hold
    /// numbers DynamoDB stores (`1e999` is none), as `N`.
    #[test]
    fn number_key_positions_are_numbers_dynamodb_stores() {
        let model = cqrs_model::Model::parse(
            r#"
[indexes.byscore]
pk = [{ name = "scTenant", type = "S" }]
sk = [{ name = "scScore", type = "N" }, { name = "scId", type = "S" }]

[entities.player]
pk = "PLAYER#{tenant}"
sk = "{playerId}"
id = "playerId"
attributes.playerId = { type = "string", max = 26 }
attributes.score = { type = "number", required = true, width = 10 }
indexes.byscore = { pk = ["{tenant}"], sk = ["{score}", "{playerId}"] }

[patterns.players_by_score]
entity = "player"
index = "byscore"
params = []
description = "players by score"
"#,
        )
        .unwrap();
        let plan = model.query("players_by_score", "t1", &[]).unwrap();
        let cursor = |position: serde_json::Value| {
            raw(&serde_json::json!({
                "l": "query",
                "p": "players_by_score",
                "f": format!("{:016x}", plan.fingerprint()),
                "o": "asc",
                "s": [position],
            })
            .to_string())
        };
        let good = serde_json::json!({
            "scScore": ["N", "42"],
            "scId": ["S", "p1"],
            "pk": ["S", "PLAYER#t1"],
            "sk": ["S", "p1"],
        });
        let decoded = decode_pattern(&cursor(good.clone()), &plan, Order::Ascending).unwrap();
        assert!(matches!(
            &decoded.shards[0],
            ShardPosition::After(key) if key["scScore"] == KeyValue::N("42".into())
        ));
        for (attr, value) in [
            ("scScore", serde_json::json!(["N", "1e999"])),
            ("scScore", serde_json::json!(["N", "forty"])),
            ("scScore", serde_json::json!(["N", "1".repeat(39)])),
            ("scScore", serde_json::json!(["S", "42"])),
            ("scId", serde_json::json!(["N", "1"])),
        ] {
            let mut forged = good.clone();
            forged[attr] = value.clone();
            let error = decode_pattern(&cursor(forged), &plan, Order::Ascending)
                .expect_err(&format!("{attr} = {value}"));
            assert_eq!(error.status(), 400, "{attr} = {value}");
        }
    }

    #[test]
    fn version_cursors_check_every_key_attribute() {
        let query = VersionQuery::new("P#t1", "a");
        let good = encode_versions(&query, &VersionKey::new("P#t1", "a", 4));
        assert_eq!(
            decode_versions(&good, &query).unwrap(),
            VersionKey::new("P#t1", "a", 4)
        );
        for forged in [
            raw(r#"{"l":"versions","o":"desc","pk":"P#t1","sk":"a@4","id":"P#t1#a","v":5}"#),
            raw(r#"{"l":"versions","o":"desc","pk":"P#t1","sk":"a@4","id":"P#t1#b","v":4}"#),
            raw(r#"{"l":"versions","o":"desc","pk":"P#t2","sk":"a@4","id":"P#t1#a","v":4}"#),
            raw(r#"{"l":"versions","o":"desc","pk":"P#t1","sk":"a@0","id":"P#t1#a","v":0}"#),
            raw(r#"{"l":"versions","o":"asc","pk":"P#t1","sk":"a@4","id":"P#t1#a","v":4}"#),
            raw(r#"{"l":"versions","o":"desc","pk":"P#t1","sk":"a@4"}"#),
            raw(r#"{"l":"items","o":"desc","pk":"P#t1","sk":"a@4","id":"P#t1#a","v":4}"#),
        ] {
            assert_eq!(
                decode_versions(&forged, &query).unwrap_err().status(),
                400,
                "{forged}"
            );
        }
        // A partition cursor is no version cursor, and the other way round.
        let listing = encode_partition(
            &PartitionQuery::new("P#t1"),
            &PageKey {
                pk: "P#t1".into(),
                sk: "a".into(),
            },
        );
        assert!(decode_versions(&listing, &query).is_err());
        assert!(decode_partition(&good, &PartitionQuery::new("P#t1")).is_err());
    }
}
