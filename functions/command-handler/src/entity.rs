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
//!   its index key attributes ([`apply`], over [`cqrs_item::entity::apply`], shared with
//!   `cqrs rebuild`): attribute types and required attributes hold, the keys agree with the
//!   attributes they are built from (a PATCH that would change the item's own primary key is a 400:
//!   that is a new item), and an index the version is no longer in loses its keys.

use cqrs_caller::Caller;
pub use cqrs_item::entity::ModelEntity;
use cqrs_item::entity::{EntityAttributes, Refusal};
use cqrs_item::{Item, Map, Value};
use cqrs_keys::{TENANT_COMMON, VERSION_LATEST, new_ulid};
use cqrs_model::{CREATED_AT, DeriveError, ItemView, Model};
use cqrs_problem::ApiError;

use crate::input::{CommandInput, Patch};
use crate::publish::Mode;

/// A refusal naming the attribute (`attributes.status`) or the key field.
fn refuse(error: DeriveError) -> ApiError {
    let refusal = Refusal::from(error);
    ApiError::bad_field(refusal.field, refusal.message)
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
        attributes: &EntityAttributes::of(attributes),
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

/// Checks the whole item of a new version against its entity and gives it its index keys
/// ([`cqrs_item::entity::apply`], which `cqrs rebuild` runs too): a refusal is a 400 naming the field.
pub fn apply(model: ModelEntity<'_>, item: &mut Item) -> Result<(), ApiError> {
    cqrs_item::entity::apply(model, item).map_err(|r| ApiError::bad_field(r.field, r.message))
}
