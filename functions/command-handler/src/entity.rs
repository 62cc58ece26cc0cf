//! Commands and the entity model: which entity a command writes, its keys, and the index keys of
//! every version.
//!
//! - A command that names an `entity` and no `pk`/`sk` gets its keys from the model: the tenant is
//!   the caller's (`common` for common entities), a create without the entity's id attribute gets a
//!   ULID ([`resolve`]).
//! - A command with its own `pk`/`sk` is matched to the entity whose templates its keys fit; keys that
//!   fit no entity are written as they are (tables shared with mbc-cqrs-serverless) unless the model
//!   is strict.
//! - The whole item of each new version (after a PATCH merge) is checked against its entity and gets
//!   its index key attributes from [`cqrs_model::Entity::derive`] ([`apply`]): attribute types and
//!   required attributes hold, the keys agree with the attributes they are built from (a PATCH that
//!   would change the item's own primary key is a 400: that is a new item), and an index the version
//!   is no longer in loses its keys.

use cqrs_caller::Caller;
use cqrs_item::{Item, Map, Number, Value};
use cqrs_keys::{TENANT_COMMON, VERSION_LATEST, new_ulid};
use cqrs_model::{
    AttrType, AttributeSource, CREATED_AT, DeriveError, Entity, ItemView, KeyValue, Model, ValueRef,
};
use cqrs_problem::ApiError;

use crate::input::{CommandInput, Patch};
use crate::publish::Mode;

/// The entity a command writes, with the revision of the model that knows it.
#[derive(Debug, Clone, Copy)]
pub struct ModelEntity<'m> {
    /// The entity.
    pub entity: &'m Entity,
    /// [`Model::revision`], stamped on every version.
    pub revision: &'m str,
}

/// An item's attributes as the model reads them, falling back to the values its keys hold (an item
/// written by key, e.g. by mbc, need not repeat them in `attributes`; they are not copied there).
struct Attributes<'a> {
    map: &'a Map,
    /// Attribute name, key text, and whether the attribute is a number.
    from_keys: &'a [(String, String, bool)],
}

impl<'a> Attributes<'a> {
    fn of(map: &'a Map) -> Self {
        Attributes {
            map,
            from_keys: &[],
        }
    }
}

impl AttributeSource for Attributes<'_> {
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

/// A refusal naming the attribute (`attributes.status`) or the key field.
fn refuse(error: DeriveError) -> ApiError {
    let field = match error.attribute.as_str() {
        "pk" | "sk" | "tenant" | "shard" => error.attribute.clone(),
        name => format!("attributes.{name}"),
    };
    ApiError::bad_field(field, error.message)
}

/// Finds the command's entity and, for a command by entity, fills its `pk` and `sk` (and a ULID for
/// the id attribute of a create that gives none). `None`: keys the model does not know.
pub fn resolve<'m>(
    model: &'m Model,
    input: &mut CommandInput,
    caller: &Caller,
    mode: Mode,
    now: &str,
) -> Result<Option<ModelEntity<'m>>, ApiError> {
    let revision = model.revision();
    let Some(name) = input.entity.clone() else {
        return match model.entity_of_keys(&input.pk, &input.sk) {
            Some(entity) => Ok(Some(ModelEntity { entity, revision })),
            None if model.is_strict() => Err(ApiError::bad_field(
                "pk",
                format!(
                    "{} / {} match no entity of the model, and the model is strict: name an `entity`",
                    input.pk, input.sk
                ),
            )),
            None => Ok(None),
        };
    };
    let Some(entity) = model.entity(&name) else {
        let known: Vec<&str> = model.entities().iter().map(|e| e.name.as_str()).collect();
        return Err(ApiError::bad_field(
            "entity",
            format!(
                "no entity {name:?} in the model: one of {}",
                known.join(", ")
            ),
        ));
    };
    if !input.pk.is_empty() {
        // Keys given with the entity must be that entity's.
        return match model.entity_of_keys(&input.pk, &input.sk) {
            Some(found) if found.name == entity.name => Ok(Some(ModelEntity { entity, revision })),
            _ => Err(ApiError::bad_field(
                "sk",
                format!(
                    "{} / {} are not keys of entity `{}` ({} / {})",
                    input.pk,
                    input.sk,
                    entity.name,
                    entity.pk.text(),
                    entity.sk.text()
                ),
            )),
        };
    }
    let creates = input.version == 0 || (input.version == VERSION_LATEST && mode == Mode::Replace);
    let mut fresh = None;
    if creates && let Some(id) = &entity.id {
        if matches!(input.attributes, Patch::Absent | Patch::Null) {
            input.attributes = Patch::Value(Map::new());
        }
        if let Patch::Value(map) = &mut input.attributes
            && !map.contains_key(id)
        {
            let ulid = new_ulid();
            fresh = Some(ulid.clone());
            map.insert(id.clone(), Value::String(ulid));
        }
    }
    let empty = Map::new();
    let attributes = match &input.attributes {
        Patch::Value(map) => map,
        _ => &empty,
    };
    let tenant = if entity.common {
        TENANT_COMMON
    } else {
        caller.tenant_code.as_str()
    };
    let view = ItemView {
        tenant,
        // Only a create knows createdAt before the stored version is read.
        created_at: if creates { now } else { "" },
        attributes: &Attributes::of(attributes),
    };
    let (pk, sk) = entity.primary_key(&view).map_err(|e| {
        if e.attribute == CREATED_AT {
            ApiError::bad_field(
                "entity",
                format!(
                    "the keys of entity `{}` hold createdAt: name an existing item by `pk` and `sk`",
                    entity.name
                ),
            )
        } else {
            refuse(e)
        }
    })?;
    // A key that holds the ULID made just now names an item no one can have written before.
    input.fresh_id = fresh.is_some_and(|ulid| pk.contains(&ulid) || sk.contains(&ulid));
    input.pk = pk;
    input.sk = sk;
    Ok(Some(ModelEntity { entity, revision }))
}

/// Checks the whole item of a new version against its entity and gives it its index keys: fills
/// key attributes the item lacks from its keys (items written by key, e.g. by mbc), validates types
/// and required attributes, refuses a version whose attributes would move its primary key, and sets
/// `entity`, `modelRevision` and the index key attributes.
pub fn apply(model: ModelEntity<'_>, item: &mut Item) -> Result<(), ApiError> {
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
    let attributes = Attributes {
        map: &item.attributes,
        from_keys: &from_keys,
    };
    let view = ItemView {
        tenant: &item.tenant_code,
        created_at: &item.created_at,
        attributes: &attributes,
    };
    let keys = entity.derive(&view).map_err(refuse)?;
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
        return Err(ApiError::bad_field(
            field,
            format!(
                "the attributes make the keys {} / {}, not this item's {} / {}: an item's own keys \
                 never change (a new key is a new item: create it with version 0)",
                keys.pk, keys.sk, item.pk, base
            ),
        ));
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
