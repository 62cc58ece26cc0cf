//! The one item shape shared by the command, data and history tables, and its conversion to and
//! from DynamoDB.
//!
//! | table   | `sk`            | extra            |
//! |---------|-----------------|------------------|
//! | command | `base@version`  |                  |
//! | data    | `base`          | `cpk`, `csk`     |
//! | history | `base@version`  |                  |
//!
//! Attribute names are camelCase, as the TypeScript framework mbc-cqrs-serverless writes them, so
//! these functions can share tables with it. Conversion goes through `serde_dynamo`
//! ([`Item::to_attributes`], [`Item::from_attributes`]); nothing here builds attribute maps by hand.
//!
//! ```
//! use cqrs_item::Item;
//!
//! let item = Item::example();
//! let attributes = item.to_attributes().unwrap();
//! assert_eq!(Item::from_attributes(attributes).unwrap(), item);
//! ```
#![forbid(unsafe_code)]

mod limits;
mod merge;
mod size;

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use limits::{MAX_NESTING_DEPTH, MAX_NUMBER_DIGITS, check_limits};
pub use merge::merge_attributes;
pub use size::{MAX_ITEM_BYTES, attribute_size, item_size};

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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
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
    /// Expiry in epoch seconds (DynamoDB TTL), when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<i64>,
    /// The item's own data: any JSON object.
    #[serde(default)]
    pub attributes: Map<String, Value>,
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
}

/// Why attributes could not become an [`Item`] or the other way round.
///
/// ```
/// let empty = std::collections::HashMap::new();
/// let err = cqrs_item::Item::from_attributes(empty).unwrap_err();
/// assert!(err.to_string().contains("missing field"));
/// ```
#[derive(Debug, thiserror::Error)]
#[error("item conversion failed: {0}")]
pub struct ConversionError(#[from] serde_dynamo::Error);

impl Item {
    /// Converts this item into the attribute map `PutItem` takes.
    ///
    /// ```
    /// let attributes = cqrs_item::Item::example().to_attributes().unwrap();
    /// assert!(attributes.contains_key("tenantCode"));
    /// assert!(attributes.contains_key("type"));
    /// assert!(!attributes.contains_key("cpk"));
    /// ```
    pub fn to_attributes(&self) -> Result<Attributes, ConversionError> {
        Ok(serde_dynamo::to_item(self)?)
    }

    /// Reads an item from a DynamoDB attribute map.
    ///
    /// ```
    /// let item = cqrs_item::Item::example();
    /// let back = cqrs_item::Item::from_attributes(item.to_attributes().unwrap()).unwrap();
    /// assert_eq!(back.version, 1);
    /// ```
    pub fn from_attributes(attributes: Attributes) -> Result<Self, ConversionError> {
        Ok(serde_dynamo::from_item(attributes)?)
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
        }
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
        item.attributes = serde_json::json!({
            "n": 1.5, "neg": -3, "s": "x", "b": true, "null": null,
            "list": [1, "two", {"three": 3}], "map": {"deep": {"deeper": []}}
        })
        .as_object()
        .unwrap()
        .clone();
        item.ttl = Some(1_900_000_000);
        item.seq = Some(42);
        let back = Item::from_attributes(item.to_attributes().unwrap()).unwrap();
        assert_eq!(back, item);
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
}
