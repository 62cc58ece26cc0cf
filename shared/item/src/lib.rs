//! The one item shape shared by the command, data and history tables, its conversion to and from
//! DynamoDB, and when a version has expired ([`Item::is_expired`]: from its `ttl` on, whether or not
//! DynamoDB has deleted it yet).
//!
//! | table   | `sk`            | extra            |
//! |---------|-----------------|------------------|
//! | command | `base@version`  |                  |
//! | data    | `base`          | `cpk`, `csk`     |
//! | history | `base@version`  |                  |
//!
//! Attribute names are camelCase, as the TypeScript framework mbc-cqrs-serverless writes them, so
//! these functions can share tables with it.
//!
//! [`entity::apply`] checks a version against its model entity and computes its index keys: the
//! command handler and `cqrs rebuild` both run it, so a rebuild computes what a new command would.
//!
//! The item's own data, `attributes`, is a [`Map`] of [`Value`]s whose numbers are exact
//! ([`Number`]: up to DynamoDB's 38 significant digits, carried as text, never as `f64`). So
//! conversion to and from DynamoDB ([`Item::to_attributes`], [`Item::from_attributes`]) is written
//! out here, field by field, rather than going through `serde_dynamo` (whose deserialiser reads
//! `N` as a float). An `Item` serialises to and from JSON with serde, numbers verbatim.
//!
//! ```
//! use cqrs_item::Item;
//!
//! let item = Item::example();
//! let attributes = item.to_attributes().unwrap();
//! assert_eq!(Item::from_attributes(attributes).unwrap(), item);
//! ```
#![forbid(unsafe_code)]
#![cfg_attr(
    not(test),
    warn(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

pub mod entity;
mod json;
mod limits;
mod merge;
mod number;
mod size;
pub mod typed;
mod value;

use std::collections::{BTreeMap, HashMap};

use aws_sdk_dynamodb::types::AttributeValue;
use serde::{Deserialize, Serialize};

pub use json::{JsonError, MAX_JSON_DEPTH, parse_json};
pub use limits::{MAX_NESTING_DEPTH, MAX_NUMBER_DIGITS, check_limits};
pub use merge::merge_attributes;
pub use number::{Number, NumberError};
pub use size::{MAX_ITEM_BYTES, attribute_size, item_size};
pub use typed::TypedEntity;
pub use value::{Map, Value, ValueError, map_from_json};

/// A DynamoDB item as the SDK takes and gives it.
pub type Attributes = HashMap<String, AttributeValue>;

/// One version of an item: a row of the command or history table, or the latest state in the data
/// table.
///
/// ```
/// let item = cqrs_item::Item::example();
/// assert_eq!(item.id, "PRODUCT#t1#P001");
/// assert_eq!(item.sk, "P001@1");
/// ```
///
/// From JSON, the top-level names that are not [`Item`]'s own fields are its index keys, each a
/// string or a number read exactly (`"gsi9": 5`, a number past 64 bits).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", remote = "Self")]
pub struct Item {
    /// Partition key, `PREFIX#TENANT[#more]`.
    pub pk: String,
    /// Sort key: `base@version` in the command and history tables, `base` in the data table.
    pub sk: String,
    /// `pk#base`: the item's identity across versions.
    pub id: String,
    /// A business code (free text).
    #[serde(default)]
    pub code: String,
    /// A display name (free text).
    #[serde(default)]
    pub name: String,
    /// The version, 1 for the first.
    pub version: i64,
    /// The tenant, the segment of `pk` after its prefix.
    pub tenant_code: String,
    /// The item type, by default the prefix of `pk`.
    #[serde(rename = "type")]
    pub item_type: String,
    /// Soft delete: the item stays, readers skip it unless asked.
    #[serde(default)]
    pub is_deleted: bool,
    /// A sequence number, when the item has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<i64>,
    /// Expiry in epoch seconds (DynamoDB TTL), when set: the version is gone from then on
    /// ([`Item::is_expired`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<i64>,
    /// The item's own data: any JSON object, numbers exact.
    #[serde(default)]
    pub attributes: Map,
    /// What wrote this version (e.g. `POST /commands`).
    #[serde(default)]
    pub source: String,
    /// The idempotency key or the Lambda request id of the write.
    #[serde(default)]
    pub request_id: String,
    /// When version 1 was written (ISO-8601).
    #[serde(default)]
    pub created_at: String,
    /// Who wrote version 1.
    #[serde(default)]
    pub created_by: String,
    /// From which address version 1 was written.
    #[serde(default)]
    pub created_ip: String,
    /// When this version was written (ISO-8601).
    #[serde(default)]
    pub updated_at: String,
    /// Who wrote this version.
    #[serde(default)]
    pub updated_by: String,
    /// From which address this version was written.
    #[serde(default)]
    pub updated_ip: String,
    /// Data table only: the `pk` of the command item this state came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpk: Option<String>,
    /// Data table only: the `sk` (with version) of the command item this state came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub csk: Option<String>,
    /// The entity of the model this version belongs to, when it matches one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entity: Option<String>,
    /// The revision of the model that computed this version's index keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_revision: Option<String>,
    /// Index key attributes (`gsi1pk`, `locCountry`, ...), top level as GSIs need them: computed by
    /// the entity model from the whole item of this version and carried with it into the data and
    /// history tables. Strings and numbers only; an index the version is not in has none.
    #[serde(flatten, skip_deserializing)]
    pub index_keys: BTreeMap<String, Value>,
}

impl Serialize for Item {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Item::serialize(self, serializer)
    }
}

impl<'de> Deserialize<'de> for Item {
    /// From JSON only. serde's `flatten` would buffer the index keys, and an exact number does not
    /// survive the buffer: the object is read as raw texts instead, its own fields handed to the
    /// derived deserializer and every other name read as an index key by [`crate::parse_json`].
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        use serde_json::value::RawValue;
        let fields = BTreeMap::<String, Box<RawValue>>::deserialize(deserializer)?;
        let mut own = String::from("{");
        let mut index_keys = BTreeMap::new();
        for (name, raw) in &fields {
            if ITEM_FIELDS.contains(&name.as_str()) {
                if own.len() > 1 {
                    own.push(',');
                }
                own.push_str(&serde_json::to_string(name).map_err(D::Error::custom)?);
                own.push(':');
                own.push_str(raw.get());
            } else {
                let value = parse_json(raw.get()).map_err(D::Error::custom)?;
                index_keys.insert(name.clone(), value);
            }
        }
        own.push('}');
        let mut item = Item::deserialize(&mut serde_json::Deserializer::from_str(&own))
            .map_err(D::Error::custom)?;
        item.index_keys = index_keys;
        Ok(item)
    }
}

/// The names of [`Item`]'s own fields as JSON writes them; any other top-level name is an index key.
const ITEM_FIELDS: [&str; 24] = [
    "pk",
    "sk",
    "id",
    "code",
    "name",
    "version",
    "tenantCode",
    "type",
    "isDeleted",
    "seq",
    "ttl",
    "attributes",
    "source",
    "requestId",
    "createdAt",
    "createdBy",
    "createdIp",
    "updatedAt",
    "updatedBy",
    "updatedIp",
    "cpk",
    "csk",
    "entity",
    "modelRevision",
];

/// Why attributes could not become an [`Item`] or the other way round.
///
/// ```
/// let empty = std::collections::HashMap::new();
/// let err = cqrs_item::Item::from_attributes(empty).unwrap_err();
/// assert!(err.to_string().contains("missing field"));
/// ```
#[derive(Debug, thiserror::Error)]
pub enum ConversionError {
    /// A record written through `serde_dynamo` (such as the idempotency record) did not convert.
    #[error("item conversion failed: {0}")]
    Dynamo(#[from] serde_dynamo::Error),
    /// A field every item has is absent.
    #[error("item conversion failed: missing field `{0}`")]
    Missing(&'static str),
    /// A field holds the wrong DynamoDB type or a value out of range.
    #[error("item conversion failed: {field}: {reason}")]
    Invalid {
        /// The attribute (with its path inside `attributes`).
        field: String,
        /// What is wrong.
        reason: String,
    },
}

impl Item {
    /// Converts this item into the attribute map `PutItem` takes. Numbers inside `attributes`
    /// become `N` with their exact text.
    ///
    /// ```
    /// use aws_sdk_dynamodb::types::AttributeValue;
    /// let mut item = cqrs_item::Item::example();
    /// item.attributes.insert("big".into(), cqrs_item::Number::parse("12345678901234567891").unwrap().into());
    /// let attributes = item.to_attributes().unwrap();
    /// assert!(attributes.contains_key("tenantCode"));
    /// assert!(attributes.contains_key("type"));
    /// assert!(!attributes.contains_key("cpk"));
    /// let AttributeValue::M(data) = &attributes["attributes"] else { panic!() };
    /// assert_eq!(data["big"], AttributeValue::N("12345678901234567891".into()));
    /// ```
    pub fn to_attributes(&self) -> Result<Attributes, ConversionError> {
        let s = |value: &str| AttributeValue::S(value.to_string());
        let n = |value: i64| AttributeValue::N(value.to_string());
        let mut out = Attributes::with_capacity(24);
        out.insert("pk".into(), s(&self.pk));
        out.insert("sk".into(), s(&self.sk));
        out.insert("id".into(), s(&self.id));
        out.insert("code".into(), s(&self.code));
        out.insert("name".into(), s(&self.name));
        out.insert("version".into(), n(self.version));
        out.insert("tenantCode".into(), s(&self.tenant_code));
        out.insert("type".into(), s(&self.item_type));
        out.insert("isDeleted".into(), AttributeValue::Bool(self.is_deleted));
        if let Some(seq) = self.seq {
            out.insert("seq".into(), n(seq));
        }
        if let Some(ttl) = self.ttl {
            out.insert("ttl".into(), n(ttl));
        }
        out.insert(
            "attributes".into(),
            AttributeValue::M(
                self.attributes
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_attribute_value()))
                    .collect(),
            ),
        );
        out.insert("source".into(), s(&self.source));
        out.insert("requestId".into(), s(&self.request_id));
        out.insert("createdAt".into(), s(&self.created_at));
        out.insert("createdBy".into(), s(&self.created_by));
        out.insert("createdIp".into(), s(&self.created_ip));
        out.insert("updatedAt".into(), s(&self.updated_at));
        out.insert("updatedBy".into(), s(&self.updated_by));
        out.insert("updatedIp".into(), s(&self.updated_ip));
        if let Some(cpk) = &self.cpk {
            out.insert("cpk".into(), s(cpk));
        }
        if let Some(csk) = &self.csk {
            out.insert("csk".into(), s(csk));
        }
        if let Some(entity) = &self.entity {
            out.insert("entity".into(), s(entity));
        }
        if let Some(revision) = &self.model_revision {
            out.insert("modelRevision".into(), s(revision));
        }
        for (name, value) in &self.index_keys {
            out.insert(name.clone(), value.to_attribute_value());
        }
        Ok(out)
    }

    /// Reads an item from a DynamoDB attribute map (a `GetItem` answer, or a stream image
    /// converted with `.into()`). Numbers inside `attributes` keep every digit; attributes the
    /// item shape does not name (written by other tools) are ignored; `NULL` counts as absent.
    ///
    /// ```
    /// let item = cqrs_item::Item::example();
    /// let back = cqrs_item::Item::from_attributes(item.to_attributes().unwrap()).unwrap();
    /// assert_eq!(back.version, 1);
    /// ```
    pub fn from_attributes(attributes: Attributes) -> Result<Self, ConversionError> {
        Self::read(attributes)
    }

    /// [`Item::from_attributes`] of a stream image (an event's `NewImage` or `OldImage`), read
    /// as it is: without first building the SDK's map of it.
    ///
    /// ```
    /// let item = cqrs_item::Item::example();
    /// let image: serde_dynamo::Item = item.to_attributes().unwrap().into();
    /// assert_eq!(cqrs_item::Item::from_image(image).unwrap(), item);
    /// ```
    pub fn from_image(image: serde_dynamo::Item) -> Result<Self, ConversionError> {
        Self::read(image.into_inner())
    }

    /// Reads an item from a map of attribute values of either shape (each converted as it is
    /// taken).
    fn read<V: Into<AttributeValue>>(
        mut attributes: HashMap<String, V>,
    ) -> Result<Self, ConversionError> {
        let mut take = |name: &'static str| match attributes.remove(name).map(Into::into) {
            None | Some(AttributeValue::Null(_)) => None,
            Some(value) => Some((name, value)),
        };
        let string = |field: Option<(&'static str, AttributeValue)>| match field {
            None => Ok(None),
            Some((_, AttributeValue::S(s))) => Ok(Some(s)),
            Some((name, other)) => Err(invalid(name, "a string", &other)),
        };
        let integer = |field: Option<(&'static str, AttributeValue)>| match field {
            None => Ok(None),
            Some((name, AttributeValue::N(text))) => {
                text.parse::<i64>()
                    .map(Some)
                    .map_err(|_| ConversionError::Invalid {
                        field: name.into(),
                        reason: format!("{text} is not a 64-bit integer"),
                    })
            }
            Some((name, other)) => Err(invalid(name, "a number", &other)),
        };
        let required =
            |name: &'static str, value: Option<String>| value.ok_or(ConversionError::Missing(name));
        let pk = required("pk", string(take("pk"))?)?;
        let sk = required("sk", string(take("sk"))?)?;
        let id = required("id", string(take("id"))?)?;
        let version = integer(take("version"))?.ok_or(ConversionError::Missing("version"))?;
        let tenant_code = required("tenantCode", string(take("tenantCode"))?)?;
        let item_type = required("type", string(take("type"))?)?;
        let is_deleted = match take("isDeleted") {
            None => false,
            Some((_, AttributeValue::Bool(b))) => b,
            Some((name, other)) => return Err(invalid(name, "a boolean", &other)),
        };
        let data = match take("attributes") {
            None => Map::new(),
            Some((name, AttributeValue::M(map))) => map
                .into_iter()
                .map(|(key, value)| match Value::from_attribute_value(value) {
                    Ok(value) => Ok((key, value)),
                    Err(e) => Err(ConversionError::Invalid {
                        field: if e.path.is_empty() {
                            format!("{name}.{key}")
                        } else if e.path.starts_with('[') {
                            format!("{name}.{key}{}", e.path)
                        } else {
                            format!("{name}.{key}.{}", e.path)
                        },
                        reason: e.reason,
                    }),
                })
                .collect::<Result<_, _>>()?,
            Some((name, other)) => return Err(invalid(name, "a map", &other)),
        };
        Ok(Item {
            code: string(take("code"))?.unwrap_or_default(),
            name: string(take("name"))?.unwrap_or_default(),
            seq: integer(take("seq"))?,
            ttl: integer(take("ttl"))?,
            source: string(take("source"))?.unwrap_or_default(),
            request_id: string(take("requestId"))?.unwrap_or_default(),
            created_at: string(take("createdAt"))?.unwrap_or_default(),
            created_by: string(take("createdBy"))?.unwrap_or_default(),
            created_ip: string(take("createdIp"))?.unwrap_or_default(),
            updated_at: string(take("updatedAt"))?.unwrap_or_default(),
            updated_by: string(take("updatedBy"))?.unwrap_or_default(),
            updated_ip: string(take("updatedIp"))?.unwrap_or_default(),
            cpk: string(take("cpk"))?,
            csk: string(take("csk"))?,
            entity: string(take("entity"))?,
            model_revision: string(take("modelRevision"))?,
            // What is left at the top level: the version's index keys (strings and numbers).
            index_keys: attributes
                .drain()
                .filter_map(|(name, value)| match value.into() {
                    value @ (AttributeValue::S(_) | AttributeValue::N(_)) => {
                        Value::from_attribute_value(value).ok().map(|v| (name, v))
                    }
                    _ => None,
                })
                .collect(),
            pk,
            sk,
            id,
            version,
            tenant_code,
            item_type,
            is_deleted,
            attributes: data,
        })
    }

    /// Whether this version has expired at `now` (epoch seconds): it has a `ttl` and `ttl <= now`.
    ///
    /// DynamoDB deletes an expired item only within days of its `ttl`; until then reads still find
    /// it. Every read of the functions treats an item expired by this rule as absent, in every
    /// table (the one rule the query handler and the command handler share).
    ///
    /// ```
    /// let mut item = cqrs_item::Item::example();
    /// assert!(!item.is_expired(2_000_000_000), "no ttl: never expires");
    /// item.ttl = Some(1_700_000_000);
    /// assert!(!item.is_expired(1_699_999_999));
    /// assert!(item.is_expired(1_700_000_000), "expired from its ttl on");
    /// assert!(item.is_expired(1_800_000_000));
    /// ```
    pub fn is_expired(&self, now: i64) -> bool {
        self.ttl.is_some_and(|ttl| ttl <= now)
    }

    /// The sort key without its version (`P001@3` gives `P001`).
    ///
    /// ```
    /// assert_eq!(cqrs_item::Item::example().base_sk(), "P001");
    /// ```
    pub fn base_sk(&self) -> &str {
        cqrs_keys::remove_sort_key_version(&self.sk)
    }

    /// The data-table form of this command item: `sk` without version, `cpk`/`csk` naming the
    /// command item it came from.
    ///
    /// ```
    /// let data = cqrs_item::Item::example().into_data_item();
    /// assert_eq!(data.sk, "P001");
    /// assert_eq!(data.csk.as_deref(), Some("P001@1"));
    /// assert_eq!(data.cpk.as_deref(), Some("PRODUCT#t1"));
    /// ```
    pub fn into_data_item(mut self) -> Self {
        let base = self.base_sk().to_string();
        self.cpk = Some(self.pk.clone());
        self.csk = Some(std::mem::replace(&mut self.sk, base));
        self
    }

    /// The size DynamoDB counts for this item in its largest stored form (the data-table form, which
    /// adds `cpk` and `csk`), in bytes.
    ///
    /// ```
    /// let item = cqrs_item::Item::example();
    /// assert!(item.stored_size().unwrap() < cqrs_item::MAX_ITEM_BYTES);
    /// ```
    pub fn stored_size(&self) -> Result<usize, ConversionError> {
        let command = item_size(&self.to_attributes()?);
        let extra = "cpk".len() + self.pk.len() + "csk".len() + self.sk.len();
        Ok(command + extra)
    }

    /// A small, complete item for examples and tests: version 1 of `PRODUCT#t1` / `P001`.
    ///
    /// ```
    /// assert_eq!(cqrs_item::Item::example().tenant_code, "t1");
    /// ```
    pub fn example() -> Self {
        let mut attributes = Map::new();
        attributes.insert("price".into(), Value::from(1200));
        attributes.insert("tags".into(), Value::from(vec!["a", "b"]));
        Item {
            pk: "PRODUCT#t1".into(),
            sk: "P001@1".into(),
            id: "PRODUCT#t1#P001".into(),
            code: "P001".into(),
            name: "Coffee".into(),
            version: 1,
            tenant_code: "t1".into(),
            item_type: "PRODUCT".into(),
            is_deleted: false,
            seq: None,
            ttl: None,
            attributes,
            source: "POST /commands".into(),
            request_id: "req-1".into(),
            created_at: "2026-01-01T00:00:00.000Z".into(),
            created_by: "user-1".into(),
            created_ip: "127.0.0.1".into(),
            updated_at: "2026-01-01T00:00:00.000Z".into(),
            updated_by: "user-1".into(),
            updated_ip: "127.0.0.1".into(),
            cpk: None,
            csk: None,
            entity: None,
            model_revision: None,
            index_keys: BTreeMap::new(),
        }
    }
}

/// A field of the wrong DynamoDB type.
fn invalid(name: &str, expected: &str, found: &AttributeValue) -> ConversionError {
    ConversionError::Invalid {
        field: name.into(),
        reason: format!("expected {expected}, found {found:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attribute_names_are_camel_case_like_the_framework() {
        let attributes = Item::example().into_data_item().to_attributes().unwrap();
        let mut names: Vec<_> = attributes.keys().cloned().collect();
        names.sort();
        assert_eq!(
            names,
            [
                "attributes",
                "code",
                "cpk",
                "createdAt",
                "createdBy",
                "createdIp",
                "csk",
                "id",
                "isDeleted",
                "name",
                "pk",
                "requestId",
                "sk",
                "source",
                "tenantCode",
                "type",
                "updatedAt",
                "updatedBy",
                "updatedIp",
                "version"
            ]
        );
        assert_eq!(attributes["version"], AttributeValue::N("1".into()));
        assert!(matches!(attributes["attributes"], AttributeValue::M(_)));
    }

    #[test]
    fn nested_attributes_round_trip() {
        let mut item = Item::example();
        item.attributes = parse_json(
            r#"{"n": 1.5, "neg": -3, "s": "x", "b": true, "null": null,
                "big": 12345678901234567890123456789012345678,
                "dec": -0.12345678901234567890123456789012345678,
                "list": [1, "two", {"three": 3}], "map": {"deep": {"deeper": []}}}"#,
        )
        .unwrap()
        .as_map()
        .unwrap()
        .clone();
        item.ttl = Some(1_900_000_000);
        item.seq = Some(42);
        let back = Item::from_attributes(item.to_attributes().unwrap()).unwrap();
        assert_eq!(back, item);
    }

    #[test]
    fn a_stream_image_reads_as_its_sdk_map_does() {
        let mut item = Item::example().into_data_item();
        item.attributes = parse_json(r#"{"n": 12345678901234567890.5, "list": [1, {"a": null}]}"#)
            .unwrap()
            .as_map()
            .unwrap()
            .clone();
        item.index_keys
            .insert("gsi1pk".into(), Value::from("LOC#US"));
        item.entity = Some("product".into());
        let mut attributes = item.to_attributes().unwrap();
        // Written by another tool: a set at the top level (not an index key), a NULL seq.
        attributes.insert("tags".into(), AttributeValue::Ss(vec!["x".into()]));
        attributes.insert("seq".into(), AttributeValue::Null(true));
        let image: serde_dynamo::Item = attributes.clone().into();
        let read = Item::from_image(image).unwrap();
        assert_eq!(read, Item::from_attributes(attributes).unwrap());
        assert_eq!(read, item);

        let mut wrong = item.to_attributes().unwrap();
        wrong.insert("version".into(), AttributeValue::S("2".into()));
        let error = Item::from_image(wrong.into()).unwrap_err().to_string();
        assert!(error.contains("version: expected a number"), "{error}");
    }

    #[test]
    fn items_written_by_the_framework_without_optional_fields_read() {
        let mut attributes = Item::example().to_attributes().unwrap();
        for optional in [
            "code",
            "name",
            "attributes",
            "source",
            "createdIp",
            "isDeleted",
        ] {
            attributes.remove(optional);
        }
        let item = Item::from_attributes(attributes).unwrap();
        assert!(!item.is_deleted);
        assert!(item.attributes.is_empty());
    }
    /// An item read back from JSON text (an HTTP answer, a change event's `data`): a number among
    /// the index keys, numbers nested in attributes beside a string index key, and numbers past
    /// 64 bits all read exactly, and the text written again is the text read.
    #[test]
    fn json_text_with_numeric_index_keys_reads_exactly() {
        let mut item = Item::example();
        item.index_keys
            .insert("gsi1pk".into(), Value::from("ORDER#t1"));
        item.index_keys.insert("gsi9".into(), Value::from(5));
        item.index_keys.insert(
            "big".into(),
            Value::Number(Number::parse("123456789012345678901234567890").unwrap()),
        );
        item.attributes.insert(
            "nested".into(),
            crate::parse_json(r#"{"a":[1,2.50,{"b":-3e7}],"c":18446744073709551616}"#).unwrap(),
        );
        let text = serde_json::to_string(&item).unwrap();
        let back: Item = serde_json::from_str(&text).unwrap();
        assert_eq!(back, item);
        assert_eq!(serde_json::to_string(&back).unwrap(), text);
        // The same from a reader and from a serde_json::Value's text.
        let from_reader: Item = serde_json::from_reader(text.as_bytes()).unwrap();
        assert_eq!(from_reader, item);
    }

    /// Every field the derived part of the deserializer knows is in [`ITEM_FIELDS`], and nothing
    /// else: a field added to [`Item`] without its name there would land among the index keys.
    #[test]
    fn the_known_field_names_are_the_struct_s() {
        let mut item = Item::example();
        item.seq = Some(1);
        item.ttl = Some(2);
        item.cpk = Some("c".into());
        item.csk = Some("c@1".into());
        item.entity = Some("product".into());
        item.model_revision = Some("r".into());
        let value = serde_json::to_value(&item).unwrap();
        let mut names: Vec<&str> = value
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        names.sort_unstable();
        let mut known = ITEM_FIELDS.to_vec();
        known.sort_unstable();
        assert_eq!(names, known);
    }

    /// An unknown field that is not a string or a number, or a field of the wrong type, is refused
    /// with its name.
    #[test]
    fn json_text_with_a_wrong_field_is_refused() {
        let mut value = serde_json::to_value(Item::example()).unwrap();
        value["version"] = serde_json::json!("one");
        let err = serde_json::from_str::<Item>(&value.to_string()).unwrap_err();
        assert!(err.to_string().contains("invalid type"), "{err}");
    }
}
