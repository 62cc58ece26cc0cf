//! Who may write an entity: its `roles = { create = [...], update = [...], delete = [...] }` in
//! `model.toml` (absent operation: every caller of the tenant, as without the key; a global
//! `system_admin` always may).
//!
//! The operation is told apart from the request, before any read ([`check_request`], right after
//! the tenant check): `isDeleted` given (`true`: a delete, `false`: a restore) needs the `delete`
//! roles, `version: 0` the `create` roles (also with `isDeleted: false`), `version: N` the `update`
//! roles. `version: -1` is a
//! create or an update: a caller who may do neither is refused at once, one who may do only one
//! of them once the head read shows which ([`check_transition`], before the write). So is the one
//! transition the request cannot show: a command without `isDeleted` that builds on a deleted
//! version (a restore, `POST`) or deletes a live one (a `PATCH` cannot: it keeps the flag).
//!
//! A refusal is a 403 naming the operation, the entity and the roles.

use cqrs_caller::Caller;
use cqrs_item::Item;
use cqrs_keys::VERSION_LATEST;
use cqrs_model::{Entity, WriteOp};
use cqrs_problem::ApiError;

use crate::entity::ModelEntity;
use crate::input::CommandInput;

/// How an operation reads in a refusal.
fn doing(op: WriteOp) -> &'static str {
    match op {
        WriteOp::Create => "creating",
        WriteOp::Update => "updating",
        WriteOp::Delete => "deleting or restoring",
    }
}

/// Whether `caller` may do `op` on `entity`.
pub fn may(entity: &Entity, caller: &Caller, op: WriteOp) -> bool {
    if caller.is_system_admin() {
        return true;
    }
    match entity.roles.roles(op) {
        None => true,
        Some(roles) => roles.iter().any(|role| caller.has_role(role)),
    }
}

/// The 403 of `caller` who may not do `op` on `entity`.
fn forbidden(entity: &Entity, caller: &Caller, op: WriteOp) -> ApiError {
    let roles = entity.roles.roles(op).unwrap_or_default();
    let held: Vec<&str> = caller
        .roles
        .iter()
        .filter(|r| r.holds_in(&caller.tenant_code))
        .map(|r| r.name.as_str())
        .collect();
    ApiError::Forbidden(format!(
        "{} a {} takes the role {}: the caller holds {}",
        doing(op),
        entity.name,
        roles.join(" or "),
        if held.is_empty() {
            "none".to_string()
        } else {
            held.join(", ")
        }
    ))
}

/// Checks that `caller` may do `op` on `entity`.
///
/// # Errors
///
/// 403 naming the operation, the entity and its roles.
pub fn check(entity: &Entity, caller: &Caller, op: WriteOp) -> Result<(), ApiError> {
    if may(entity, caller, op) {
        Ok(())
    } else {
        Err(forbidden(entity, caller, op))
    }
}

/// The check of a command from the request alone, before any read (see the module's words).
///
/// # Errors
///
/// 403 when the request shows an operation the caller may not do.
pub fn check_request(
    entity: Option<ModelEntity<'_>>,
    caller: &Caller,
    input: &CommandInput,
) -> Result<(), ApiError> {
    let Some(entity) = entity.map(|e| e.entity) else {
        return Ok(());
    };
    if entity.roles.is_empty() {
        return Ok(());
    }
    let op = match (input.is_deleted, input.version) {
        // A create that says it is live is a create.
        (Some(false) | None, 0) => WriteOp::Create,
        (Some(_), _) => WriteOp::Delete,
        (None, VERSION_LATEST) => {
            // A create or an update: refused now only when it can be neither.
            if may(entity, caller, WriteOp::Create) || may(entity, caller, WriteOp::Update) {
                return Ok(());
            }
            WriteOp::Update
        }
        (None, _) => WriteOp::Update,
    };
    check(entity, caller, op)
}

/// The check of the transition the command makes, once its base is known (no read of its own):
/// from `base` (`previous`, the version built on; `None` on a create) to `item`.
///
/// # Errors
///
/// 403 when the transition is an operation the caller may not do.
pub fn check_transition(
    entity: Option<ModelEntity<'_>>,
    caller: &Caller,
    previous: Option<i64>,
    base: Option<&Item>,
    item: &Item,
) -> Result<(), ApiError> {
    let Some(entity) = entity.map(|e| e.entity) else {
        return Ok(());
    };
    if entity.roles.is_empty() {
        return Ok(());
    }
    let was_deleted = base.map(|b| b.is_deleted);
    let op = match (previous, was_deleted) {
        (None, _) if item.is_deleted => WriteOp::Delete,
        (None, _) => WriteOp::Create,
        (Some(_), Some(deleted)) if deleted != item.is_deleted => WriteOp::Delete,
        // The base is gone: a deleted new version is a delete, else an update.
        (Some(_), None) if item.is_deleted => WriteOp::Delete,
        (Some(_), _) => WriteOp::Update,
    };
    check(entity, caller, op)
}
