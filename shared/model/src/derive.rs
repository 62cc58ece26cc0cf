//! Keys from the whole item: the one pure function that gives a version its `pk`, `sk` and every
//! index key attribute ([`Entity::derive`]), and its inverse for commands that bring their own keys
//! ([`Entity::read_keys`]).
//!
//! Index keys are computed from the whole item of each version (after a PATCH merge), never from the
//! fields a command happened to send: an index cannot hold a stale or half-updated key. An index whose
//! referenced attribute is absent (or `null`), or whose `when` condition is false, gets no key
//! attribute at all (a sparse index): never an empty string, never the previous value.

use std::collections::BTreeMap;

use cqrs_keys::{
    MAX_PARTITION_KEY_BYTES, MAX_SORT_KEY_BYTES, generate_id, shard_for_id, validate_partition_key,
    validate_sort_key,
};

use crate::attribute::{AttrType, Attribute};
use crate::model::{CREATED_AT, Entity, KeyType, Model};
use crate::template::{Part, Template};
use crate::value::{AttributeSource, KeyValue, ValueRef};

/// What the model needs to know of one version to compute its keys.
///
/// ```
/// use cqrs_model::{ItemView, ValueRef};
///
/// let attributes = [("productId", ValueRef::Str("01HX7MBJK3V9WQBZ7XNDK5ZT2M"))];
/// let view = ItemView { tenant: "t1", created_at: "2024-01-15T10:30:00.000Z", attributes: &attributes };
/// assert_eq!(view.tenant, "t1");
/// ```
#[derive(Clone, Copy)]
pub struct ItemView<'a> {
    /// The item's tenant (the caller's, or `common`).
    pub tenant: &'a str,
    /// When version 1 was written (ISO-8601, UTC).
    pub created_at: &'a str,
    /// The item's attributes (after any PATCH merge).
    pub attributes: &'a dyn AttributeSource,
}

/// The keys of one version.
///
/// ```
/// let keys = cqrs_model::DerivedKeys { pk: "A#t".into(), sk: "1".into(), index: Default::default() };
/// assert!(keys.index.is_empty());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DerivedKeys {
    /// The table's partition key.
    pub pk: String,
    /// The table's sort key (without version).
    pub sk: String,
    /// Every index key attribute this version carries, by attribute name.
    pub index: BTreeMap<String, KeyValue>,
}

/// Why a version's keys cannot be computed: names the attribute (or `pk`/`sk`) for the 400.
///
/// ```
/// let e = cqrs_model::DeriveError { attribute: "status".into(), message: "is required".into() };
/// assert_eq!(e.to_string(), "attribute status: is required");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("attribute {attribute}: {message}")]
pub struct DeriveError {
    /// The attribute (`status`), or `pk` / `sk` / `tenant`.
    pub attribute: String,
    /// What is wrong.
    pub message: String,
}

fn derive_error(attribute: &str, message: impl Into<String>) -> DeriveError {
    DeriveError {
        attribute: attribute.to_string(),
        message: message.into(),
    }
}

/// A rendered template, or the attribute that was absent.
enum Rendered {
    Text(String),
    Missing(String),
}

impl Entity {
    /// Checks the declared attributes of a version: required ones present (not `null`), every
    /// present one of its declared type. Undeclared attributes are the item's own business.
    ///
    /// ```
    /// use cqrs_model::{Model, ValueRef};
    ///
    /// let order = Model::example().entity("order").unwrap().clone();
    /// let attrs = [("userId", ValueRef::Str("u1")), ("status", ValueRef::Str("LOST"))];
    /// let err = order.validate(&attrs).unwrap_err();
    /// assert_eq!(err.attribute, "status");
    /// ```
    pub fn validate(&self, attributes: &dyn AttributeSource) -> Result<(), DeriveError> {
        for (name, attr) in &self.attributes {
            match attributes.attribute(name) {
                None | Some(ValueRef::Null) if attr.required => {
                    return Err(derive_error(
                        name,
                        format!("is required by entity `{}`", self.name),
                    ));
                }
                None | Some(ValueRef::Null) => {}
                Some(value) => attr.check(value).map_err(|m| derive_error(name, m))?,
            }
        }
        Ok(())
    }

    /// The table keys of a version: `pk` and `sk` (without version).
    ///
    /// ```
    /// use cqrs_model::{ItemView, Model, ValueRef};
    ///
    /// let model = Model::example();
    /// let item = model.entity("order_item").unwrap();
    /// let attrs = [("orderId", ValueRef::Str("01HX7MBJK3V9WQBZ7XNDK5ZT2M")), ("itemId", ValueRef::Str("001"))];
    /// let view = ItemView { tenant: "tenant001", created_at: "2024-01-15T10:30:00.000Z", attributes: &attrs };
    /// let (pk, sk) = item.primary_key(&view).unwrap();
    /// assert_eq!((pk.as_str(), sk.as_str()), ("ORDER#tenant001", "ORDER_ITEM#01HX7MBJK3V9WQBZ7XNDK5ZT2M#001"));
    /// ```
    pub fn primary_key(&self, view: &ItemView<'_>) -> Result<(String, String), DeriveError> {
        let pk = match self.render(&self.pk, view, None, false)? {
            Rendered::Text(pk) => pk,
            Rendered::Missing(name) => {
                return Err(derive_error(
                    &name,
                    "is part of the partition key and missing",
                ));
            }
        };
        let sk = match self.render(&self.sk, view, None, false)? {
            Rendered::Text(sk) => sk,
            Rendered::Missing(name) => {
                return Err(derive_error(&name, "is part of the sort key and missing"));
            }
        };
        validate_partition_key(&pk).map_err(|e| derive_error("pk", e.to_string()))?;
        validate_sort_key(&sk).map_err(|e| derive_error("sk", e.to_string()))?;
        Ok((pk, sk))
    }

    /// Every key of a version: validates the attributes, then computes the table keys and each
    /// index's key attributes from the whole item.
    ///
    /// ```
    /// use cqrs_model::{ItemView, KeyValue, Model, ValueRef};
    ///
    /// let model = Model::example();
    /// let order = model.entity("order").unwrap();
    /// let attrs = [
    ///     ("orderId", ValueRef::Str("01HX7MBJK3V9WQBZ7XNDK5ZT2M")),
    ///     ("userId", ValueRef::Str("u1")),
    ///     ("status", ValueRef::Str("DELIVERED")),
    ///     ("productId", ValueRef::Str("p9")),
    /// ];
    /// let view = ItemView { tenant: "t1", created_at: "2024-01-15T10:30:00.000Z", attributes: &attrs };
    /// let keys = order.derive(&view).unwrap();
    /// assert_eq!(keys.pk, "ORDER#t1");
    /// assert_eq!(keys.index["gsi1pk"], KeyValue::S("USER#t1#u1".into()));
    /// // DELIVERED is not in the status index's `when` list: no key attribute at all.
    /// assert!(!keys.index.contains_key("gsi2pk"));
    /// ```
    pub fn derive(&self, view: &ItemView<'_>) -> Result<DerivedKeys, DeriveError> {
        self.validate(view.attributes)?;
        let (pk, sk) = self.primary_key(view)?;
        let id = generate_id(&pk, &sk);
        let id_hash = cqrs_keys::fnv1a_64(id.as_bytes());
        let mut index = BTreeMap::new();
        'indexes: for ei in &self.indexes {
            for (attr, allowed) in &ei.when {
                let holds = match view.attributes.attribute(attr) {
                    Some(ValueRef::Str(s)) => allowed.iter().any(|a| a == s),
                    Some(ValueRef::Bool(b)) => allowed.iter().any(|a| *a == b.to_string()),
                    _ => false,
                };
                if !holds {
                    continue 'indexes;
                }
            }
            let keys = ei
                .pk_keys
                .iter()
                .map(|k| (k, true))
                .chain(ei.sk_keys.iter().map(|k| (k, false)));
            let mut values = Vec::new();
            for (template, (key, is_pk)) in ei.pk.iter().chain(&ei.sk).zip(keys) {
                let name = key.name.as_str();
                let value = match key.ty {
                    KeyType::N => match template.single_reference() {
                        Some(Part::Attr { name: attr, .. }) => {
                            match view.attributes.attribute(attr) {
                                None | Some(ValueRef::Null) => continue 'indexes,
                                Some(ValueRef::Num(n)) => KeyValue::N(n.to_string()),
                                Some(other) => {
                                    return Err(derive_error(
                                        attr,
                                        format!("must be a number, not a {}", other.type_name()),
                                    ));
                                }
                            }
                        }
                        Some(Part::Shard(n)) => KeyValue::N(shard_of(&id, *n)?.to_string()),
                        _ => continue 'indexes,
                    },
                    KeyType::S | KeyType::B => {
                        match self.render(template, view, Some(id_hash), true)? {
                            Rendered::Text(text) => {
                                let limit = if is_pk {
                                    MAX_PARTITION_KEY_BYTES
                                } else {
                                    MAX_SORT_KEY_BYTES
                                };
                                if text.len() > limit {
                                    return Err(derive_error(
                                        template.attribute_names().next().unwrap_or("attributes"),
                                        format!(
                                            "makes index `{}`'s key {name} {} bytes long, over DynamoDB's {limit}",
                                            ei.index,
                                            text.len()
                                        ),
                                    ));
                                }
                                KeyValue::S(text)
                            }
                            Rendered::Missing(_) => continue 'indexes,
                        }
                    }
                };
                values.push((name.to_string(), value));
            }
            index.extend(values);
        }
        Ok(DerivedKeys { pk, sk, index })
    }

    /// Reads a command's own `pk`/`sk` against this entity's templates: the text of every attribute
    /// they hold, or `None` when the keys do not have this entity's shape. `{tenant}` is returned
    /// under the name `tenant`.
    ///
    /// ```
    /// let model = cqrs_model::Model::example();
    /// let order = model.entity("order").unwrap();
    /// let values = order.read_keys("ORDER#t1", "ORDER#01HX").unwrap();
    /// assert_eq!(values, [("tenant".to_string(), "t1".to_string()), ("orderId".into(), "01HX".into())]);
    /// assert!(order.read_keys("ORDER#t1", "ORDER_ITEM#o#1").is_none());
    /// ```
    pub fn read_keys(&self, pk: &str, sk: &str) -> Option<Vec<(String, String)>> {
        let mut values = Vec::new();
        let mut buckets = Vec::new();
        for (template, key) in [(&self.pk, pk), (&self.sk, sk)] {
            for (part, text) in template.read(key)? {
                // The text must be something this part can produce: an enum's value, a number of
                // its width, a fixed-width timestamp.
                if let Part::Attr { name, bucket } = part
                    && let Some(attr) = self.attribute_of(name)
                    && !attr.produces(text, *bucket)
                {
                    return None;
                }
                let name = match part {
                    Part::Tenant => "tenant".to_string(),
                    Part::Attr { name, bucket: None } => name.clone(),
                    Part::Attr {
                        name,
                        bucket: Some(_),
                    } => {
                        buckets.push((name, text));
                        continue;
                    }
                    _ => continue,
                };
                values.push((name, text.to_string()));
            }
        }
        // A bucket (`{at:month}`) must be the cut of the full value the other key holds, or the
        // keys have no consistent reading.
        for (name, cut) in buckets {
            if let Some((_, full)) = values.iter().find(|(n, _)| n == name)
                && !full.starts_with(cut)
            {
                return None;
            }
        }
        Some(values)
    }

    fn attribute_of(&self, name: &str) -> Option<&Attribute> {
        self.attributes.get(name)
    }

    /// Renders a template. `id_hash` is the stable hash of the item id (index keys only: shards);
    /// `checked` says the tenant and the attributes were already validated ([`Entity::derive`]).
    fn render(
        &self,
        template: &Template,
        view: &ItemView<'_>,
        id_hash: Option<u64>,
        checked: bool,
    ) -> Result<Rendered, DeriveError> {
        let mut out = String::with_capacity(64);
        for part in template.parts() {
            match part {
                Part::Lit(text) => out.push_str(text),
                Part::Tenant => {
                    if !checked {
                        cqrs_keys::validate_component("tenant", view.tenant)
                            .map_err(|e| derive_error("tenant", e.to_string()))?;
                    }
                    out.push_str(view.tenant);
                }
                Part::Shard(n) => {
                    let hash = id_hash
                        .ok_or_else(|| derive_error("shard", "only index keys have shards"))?;
                    if *n == 0 {
                        return Err(derive_error("shard", "the shard count is 0"));
                    }
                    // The same shard as `cqrs_keys::shard_for_id(id, n)`: FNV-1a of the id, mod n.
                    out.push_str(&(hash % u64::from(*n)).to_string());
                }
                Part::Attr { name, bucket } => match self.attribute_of(name) {
                    None if name == CREATED_AT => {
                        // Set by the server in the fixed-width form already: no parse needed.
                        let full = if is_canonical_timestamp(view.created_at) {
                            std::borrow::Cow::Borrowed(view.created_at)
                        } else {
                            std::borrow::Cow::Owned(
                                crate::attribute::Attribute::new(AttrType::Timestamp)
                                    .key_part(ValueRef::Str(view.created_at), None)
                                    .map_err(|m| derive_error(CREATED_AT, m))?,
                            )
                        };
                        let cut = bucket.map_or(full.len(), |b| b.width());
                        out.push_str(full.get(..cut).unwrap_or(&full));
                    }
                    None => return Ok(Rendered::Missing(name.clone())),
                    Some(attr) => match view.attributes.attribute(name) {
                        None | Some(ValueRef::Null) => return Ok(Rendered::Missing(name.clone())),
                        Some(value) => attr
                            .push_key_part(value, *bucket, checked, &mut out)
                            .map_err(|m| derive_error(name, m))?,
                    },
                },
            }
        }
        Ok(Rendered::Text(out))
    }
}

/// Whether `s` is already a fixed-width UTC timestamp `YYYY-MM-DDTHH:MM:SS.sssZ`.
fn is_canonical_timestamp(s: &str) -> bool {
    s.len() == crate::attribute::TIMESTAMP_WIDTH
        && s.bytes()
            .zip("DDDD-DD-DDTDD:DD:DD.DDDZ".bytes())
            .all(|(c, p)| {
                if p == b'D' {
                    c.is_ascii_digit()
                } else {
                    c == p
                }
            })
}

fn shard_of(id: &str, shards: u32) -> Result<u32, DeriveError> {
    shard_for_id(id, shards).map_err(|e| derive_error("shard", e.to_string()))
}

impl Model {
    /// The entity whose key templates a command's own `pk`/`sk` match, if any (the model's checks
    /// guarantee at most one).
    ///
    /// ```
    /// let model = cqrs_model::Model::example();
    /// assert_eq!(model.entity_of_keys("ORDER#t1", "ORDER_ITEM#o1#001").unwrap().name, "order_item");
    /// assert!(model.entity_of_keys("CUSTOM#t1", "x").is_none());
    /// ```
    pub fn entity_of_keys(&self, pk: &str, sk: &str) -> Option<&Entity> {
        self.entities.iter().find(|e| e.read_keys(pk, sk).is_some())
    }
}
