//! The constraints a model declares on an entity (`unique`, `limits`, `references` in
//! `model.toml`), enforced in the command's own transaction.
//!
//! [`plan`] asks [`cqrs_store::constraints::plan`] for the guard moves of one command, from the
//! version it is based on (`None` on a create: nothing more is read) to the new item, after the
//! command hook ran (a hook's adjustments count). The guards go first in the transaction, the
//! hook's after them ([`Refusal`] keeps each guard's answer). A failed guard of a declared
//! constraint becomes its problem document ([`refusal`], from the item the failed condition
//! returned: no read):
//!
//! | constraint | status | `type` |
//! | --- | --- | --- |
//! | `unique` value held by another live item | 409 | `urn:cqrs:problem:unique-taken` (naming the holder for a tenant-scoped unique) |
//! | `limits` group full | 409 | `urn:cqrs:problem:limit-reached` (`limit`: the bound) |
//! | `references` target missing, deleted or not satisfying the condition | 422 | `urn:cqrs:problem:reference-refused` (`reason`) |
//! | `references` target whose head does not describe its latest version | 503 | `urn:cqrs:problem:constraints-not-rebuilt` (run `cqrs rebuild --constraints`) |
//!
//! Each names the constraint (`constraint`: `<entity>.<name>`). A release that finds another
//! holder is drift between the guards and the data (a 500 naming the guard; `cqrs verify
//! --constraints` lists it, `cqrs rebuild --constraints` repairs it).
//!
//! An update of an entity with `unique` or `limits` whose base version is no longer stored (its
//! command row deleted out of band) cannot tell what that version held: a 500 naming the version,
//! nothing written.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use cqrs_item::Item;
use cqrs_model::{Entity, Model};
use cqrs_problem::{ApiError, ConstraintKind, ReferenceReason};
use cqrs_store::constraints::{ConstraintPlan, Explained, Violation, explain};
use cqrs_store::guard::HeadRefusal;

use crate::entity::ModelEntity;

/// What a guard of the transaction answers when it does not hold.
#[derive(Debug, Clone)]
pub enum Refusal {
    /// A constraint the model declares: its problem document, from what the failed condition found.
    Declared(Violation),
    /// The command hook's own refusal.
    Hook(ApiError),
}

/// The guard moves and head mirror of a command of `entity` writing `item` on `base` (the stored
/// version `previous`; `None`, `None` on a create).
///
/// # Errors
///
/// 500 when the entity has `unique` or `limits`, the command builds on a version and that
/// version is no longer stored; the reference's own refusal when the item references itself
/// and does not satisfy the condition; 400 when a referenced key cannot be built.
pub fn plan(
    model: Option<&Model>,
    entity: Option<ModelEntity<'_>>,
    item: &Item,
    base: Option<&Item>,
    previous: Option<i64>,
) -> Result<ConstraintPlan, ApiError> {
    let (Some(model), Some(entity)) = (model, entity) else {
        return Ok(ConstraintPlan::default());
    };
    let entity = entity.entity;
    if !entity.has_constraints() && !model.is_referenced(&entity.name) {
        return Ok(ConstraintPlan::default());
    }
    if let (Some(previous), None) = (previous, base)
        && !(entity.unique.is_empty() && entity.limits.is_empty())
    {
        return Err(ApiError::Internal(format!(
            "version {previous} of {} is no longer stored (its command row was deleted): the \
             constraints of entity {} cannot tell what it held, so no new version is written; \
             `cqrs verify --constraints` lists it",
            item.id, entity.name
        )));
    }
    let plan = cqrs_store::constraints::plan(model, entity, &item.tenant_code, base, item)
        .map_err(|e| ApiError::bad_field("attributes", e))?;
    if let Some(violation) = &plan.refused {
        return Err(refusal(model, violation, None));
    }
    Ok(plan)
}

/// The problem document of a declared constraint's guard that failed; `old` is the item its
/// condition found (the unique value's holder, the group, the target's head).
pub fn refusal(
    model: &Model,
    violation: &Violation,
    old: Option<&HashMap<String, AttributeValue>>,
) -> ApiError {
    let constraint = violation.constraint().to_string();
    let explained = explain(violation, old);
    match (violation, explained) {
        (Violation::Unique { values, .. }, Explained::Taken { holder }) => {
            let declared = declared_unique(model, &constraint);
            let held = match (holder, declared) {
                // A global unique's holder is in another tenant: not named.
                (_, Some((_, cqrs_model::Scope::Global))) | (None, _) => {
                    "is held by another item".to_string()
                }
                (Some((pk, sk)), _) => format!("is held by {pk} / {sk}"),
            };
            let named = named_values(declared.map(|(a, _)| a), values);
            ApiError::Constraint {
                kind: ConstraintKind::UniqueTaken,
                detail: format!("{constraint}: {named} {held}"),
                constraint,
            }
        }
        (Violation::Limit { group, at_most, .. }, Explained::Full { members }) => {
            let per = declared_limit(model, &constraint);
            let whose = if group.is_empty() {
                "the tenant".to_string()
            } else {
                named_values(per, group)
            };
            ApiError::Constraint {
                kind: ConstraintKind::LimitReached { limit: *at_most },
                detail: format!(
                    "{constraint}: {whose} already has {} (at most {at_most})",
                    members.max(*at_most as usize)
                ),
                constraint,
            }
        }
        (
            Violation::Reference {
                target_pk,
                target_sk,
                ..
            },
            Explained::Reference(why),
        ) => {
            let target = format!("{target_pk} / {target_sk}");
            let (kind, what) = match why {
                HeadRefusal::Missing => (
                    ConstraintKind::ReferenceRefused {
                        reason: ReferenceReason::Missing,
                    },
                    format!("{target} does not exist"),
                ),
                HeadRefusal::Deleted => (
                    ConstraintKind::ReferenceRefused {
                        reason: ReferenceReason::Deleted,
                    },
                    format!("{target} is deleted"),
                ),
                HeadRefusal::Condition => (
                    ConstraintKind::ReferenceRefused {
                        reason: ReferenceReason::Condition,
                    },
                    format!(
                        "{target} does not satisfy the reference's condition ({})",
                        condition_text(model, &constraint)
                    ),
                ),
                HeadRefusal::Stale { latest } => (
                    ConstraintKind::NotRebuilt,
                    format!(
                        "the head of {target} does not describe its latest version{}: run \
                         `cqrs rebuild --constraints`",
                        latest.map(|v| format!(" ({v})")).unwrap_or_default()
                    ),
                ),
            };
            ApiError::Constraint {
                kind,
                detail: format!("{constraint}: {what}"),
                constraint,
            }
        }
        (Violation::Drift { key, .. }, explained) => ApiError::Internal(format!(
            "{constraint}: the guard {key} is held by another item ({explained:?}): the guard \
             items drifted from the data; run `cqrs verify --constraints` then `cqrs rebuild \
             --constraints`"
        )),
        (violation, explained) => ApiError::Internal(format!(
            "{constraint}: a failed guard explained as {explained:?} for {violation:?}"
        )),
    }
}

/// The declared entity and constraint name of `entity.name`.
fn split(constraint: &str) -> Option<(&str, &str)> {
    constraint.split_once('.')
}

fn entity_of<'m>(model: &'m Model, constraint: &str) -> Option<(&'m Entity, String)> {
    let (entity, name) = split(constraint)?;
    Some((model.entity(entity)?, name.to_string()))
}

/// The attributes and scope of a declared unique.
fn declared_unique<'m>(
    model: &'m Model,
    constraint: &str,
) -> Option<(&'m [String], cqrs_model::Scope)> {
    let (entity, name) = entity_of(model, constraint)?;
    let unique = entity.unique.iter().find(|u| u.name == name)?;
    Some((unique.attributes.as_slice(), unique.scope))
}

/// The `per` attributes of a declared limit.
fn declared_limit<'m>(model: &'m Model, constraint: &str) -> Option<&'m [String]> {
    let (entity, name) = entity_of(model, constraint)?;
    Some(
        entity
            .limits
            .iter()
            .find(|l| l.name == name)?
            .per
            .as_slice(),
    )
}

/// A reference's `when` / `unless`, in words.
fn condition_text(model: &Model, constraint: &str) -> String {
    let Some(reference) = entity_of(model, constraint)
        .and_then(|(entity, name)| entity.references.iter().find(|r| r.name == name))
    else {
        return "its when / unless".into();
    };
    let mut parts = Vec::new();
    for (word, map) in [
        ("when", &reference.condition.when),
        ("unless", &reference.condition.unless),
    ] {
        for (attribute, values) in map {
            parts.push(format!("{word} {attribute} in {values:?}"));
        }
    }
    if parts.is_empty() {
        "live".into()
    } else {
        parts.join(", ")
    }
}

/// `isbn "978..." copyNo "2"`: each value with its attribute when the model names them.
fn named_values(attributes: Option<&[String]>, values: &[String]) -> String {
    match attributes {
        Some(attributes) if attributes.len() == values.len() => attributes
            .iter()
            .zip(values)
            .map(|(a, v)| format!("{a} {v:?}"))
            .collect::<Vec<_>>()
            .join(" "),
        _ => format!("{values:?}"),
    }
}
