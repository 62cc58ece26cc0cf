//! A version of a model entity: the one place that checks the whole item of a version against its
//! entity and gives it its index keys ([`apply`]). The command handler runs it on every new version;
//! `cqrs rebuild` runs it on every history version it re-projects, so a rebuild computes exactly what
//! a new command would.
//!
//! Key attributes the item lacks are read back from its keys (an item written by key, e.g. by
//! mbc-cqrs-serverless, need not repeat them in `attributes`; they are not copied there). Attribute
//! types and required attributes hold, the keys agree with the attributes they are built from (a
//! version whose attributes would move its primary key is refused: that is a new item), and an index
//! the version is no longer in loses its keys.

use cqrs_model::{AttrType, AttributeSource, DeriveError, Entity, ItemView, KeyValue, ValueRef};

use crate::{Item, Map, Number, Value};

/// The entity a version belongs to, with the revision of the model that knows it.
///
/// ```
/// let model = cqrs_model::Model::example();
/// let product = cqrs_item::entity::ModelEntity {
///     entity: model.entity("product").unwrap(),
///     revision: model.revision(),
/// };
/// assert_eq!(product.entity.name, "product");
/// ```
#[derive(Debug, Clone, Copy)]
pub struct ModelEntity<'m> {
    /// The entity.
    pub entity: &'m Entity,
    /// [`cqrs_model::Model::revision`], stamped on every version.
    pub revision: &'m str,
}

/// Why a version does not fit its entity: the field at fault (`attributes.status`, `pk`, `sk`,
/// `tenant`) and what is wrong, for a 400 that names it.
///
/// ```
/// let r = cqrs_item::entity::Refusal { field: "attributes.status".into(), message: "is required".into() };
/// assert_eq!(r.to_string(), "attributes.status: is required");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct Refusal {
    /// The field: `pk`, `sk`, `tenant`, `shard`, or `attributes.<name>`.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl From<DeriveError> for Refusal {
    /// A derive error naming the attribute as a request field.
    ///
    /// ```
    /// use cqrs_item::entity::Refusal;
    /// let e = cqrs_model::DeriveError { attribute: "status".into(), message: "is required".into() };
    /// assert_eq!(Refusal::from(e).field, "attributes.status");
    /// ```
    fn from(error: DeriveError) -> Self {
        let field = match error.attribute.as_str() {
            "pk" | "sk" | "tenant" | "shard" => error.attribute.clone(),
            name => format!("attributes.{name}"),
        };
        Refusal {
            field,
            message: error.message,
        }
    }
}

/// An item's attributes as the model reads them, falling back to the values its keys hold.
///
/// ```
/// use cqrs_model::{AttributeSource, ValueRef};
///
/// let mut map = cqrs_item::Map::new();
/// map.insert("status".into(), cqrs_item::Value::from("PAID"));
/// let attributes = cqrs_item::entity::EntityAttributes::of(&map);
/// assert_eq!(attributes.attribute("status"), Some(ValueRef::Str("PAID")));
/// assert_eq!(attributes.attribute("userId"), None);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct EntityAttributes<'a> {
    map: &'a Map,
    /// Attribute name, key text, and whether the attribute is a number.
    from_keys: &'a [(String, String, bool)],
}

impl<'a> EntityAttributes<'a> {
    /// The attributes alone (no key to fall back to).
    ///
    /// ```
    /// let map = cqrs_item::Map::new();
    /// let _ = cqrs_item::entity::EntityAttributes::of(&map);
    /// ```
    pub fn of(map: &'a Map) -> Self {
        EntityAttributes {
            map,
            from_keys: &[],
        }
    }
}

impl AttributeSource for EntityAttributes<'_> {
    fn attribute(&self, name: &str) -> Option<ValueRef<'_>> {
        match self.map.get(name) {
            Some(value) => Some(match value {
                Value::Null => ValueRef::Null,
                Value::Bool(b) => ValueRef::Bool(*b),
                Value::Number(n) => ValueRef::Num(n.as_str()),
                Value::String(s) => ValueRef::Str(s),
                Value::List(_) => ValueRef::Other("list"),
                Value::Map(_) => ValueRef::Other("map"),
            }),
            None => self
                .from_keys
                .iter()
                .find(|(n, _, _)| n == name)
                .map(|(_, text, number)| {
                    if *number {
                        ValueRef::Num(text)
                    } else {
                        ValueRef::Str(text)
                    }
                }),
        }
    }
}

/// Checks the whole item of a version against its entity and gives it its index keys: fills key
/// attributes the item lacks from its keys, validates types and required attributes, refuses a
/// version whose attributes would move its primary key, and sets `entity`, `modelRevision` and the
/// index key attributes (an index the version is not in has none).
///
/// ```
/// use cqrs_item::{Item, Value, entity::{ModelEntity, apply}};
///
/// let model = cqrs_model::Model::example();
/// let product = ModelEntity { entity: model.entity("product").unwrap(), revision: model.revision() };
/// let mut item = Item::example(); // PRODUCT#t1 / P001@1: productId P001, read from the key
/// item.attributes.insert("category".into(), Value::from("books"));
/// item.attributes.insert("priceCents".into(), Value::from(1200));
/// apply(product, &mut item).unwrap();
/// assert_eq!(item.entity.as_deref(), Some("product"));
/// assert_eq!(item.index_keys["gsi5pk"], Value::from("PRICE#t1#books"));
/// assert_eq!(item.index_keys["gsi5sk"], Value::from("000000001200#P001"));
///
/// item.attributes.insert("priceCents".into(), Value::from(-1));
/// assert_eq!(apply(product, &mut item).unwrap_err().field, "attributes.priceCents");
/// ```
pub fn apply(model: ModelEntity<'_>, item: &mut Item) -> Result<(), Refusal> {
    let entity = model.entity;
    let base = item.base_sk().to_string();
    let from_keys = entity.read_keys(&item.pk, &base).unwrap_or_default();
    // Key parts read back from the keys are key text: a number attribute reads as its digits.
    let from_keys: Vec<(String, String, bool)> = from_keys
        .into_iter()
        .filter_map(|(name, text)| {
            let number = entity.attributes.get(&name)?.ty == AttrType::Number;
            Some((name, text, number))
        })
        .collect();
    let attributes = EntityAttributes {
        map: &item.attributes,
        from_keys: &from_keys,
    };
    let view = ItemView {
        tenant: &item.tenant_code,
        created_at: &item.created_at,
        attributes: &attributes,
    };
    let keys = entity.derive(&view).map_err(Refusal::from)?;
    if keys.pk != item.pk || keys.sk != base {
        let derived = entity.read_keys(&keys.pk, &keys.sk).unwrap_or_default();
        let stored = entity.read_keys(&item.pk, &base).unwrap_or_default();
        let moved = stored
            .iter()
            .zip(&derived)
            .find(|(a, b)| a != b)
            .map(|((name, _), _)| name.clone())
            .unwrap_or_else(|| "sk".into());
        let field = match moved.as_str() {
            "tenant" | "sk" => moved.clone(),
            name => format!("attributes.{name}"),
        };
        return Err(Refusal {
            field,
            message: format!(
                "the attributes make the keys {} / {}, not this item's {} / {}: an item's own keys \
                 never change (a new key is a new item: create it with version 0)",
                keys.pk, keys.sk, item.pk, base
            ),
        });
    }
    item.item_type = entity.item_type.clone();
    item.entity = Some(entity.name.clone());
    item.model_revision = Some(model.revision.to_string());
    item.index_keys = keys
        .index
        .into_iter()
        .filter_map(|(name, value)| match value {
            KeyValue::S(s) => Some((name, Value::String(s))),
            KeyValue::N(n) => Number::parse(&n).ok().map(|n| (name, Value::Number(n))),
        })
        .collect();
    Ok(())
}
