//! TTL policies applied to commands: a command that gives no `ttl` gets `now + days` from the
//! policy of its table (`MASTER#tenant` / `TTL#table`, else `common`'s; `table` is the entity
//! name, or the item type for items of no entity). A command's own `ttl` wins, and `"ttl": null`
//! clears the expiry whatever the policy says. Without a policy nothing changes (a `PATCH` keeps
//! the stored `ttl`).
//!
//! Policies are cached per warm container for [`POLICY_MAX_AGE`]: a command does not read its
//! policy, one read per tenant and table per minute does. A changed policy applies to new
//! versions within that time; versions already written keep their `ttl`. A command that reads
//! its policy reads the heads state with it, in one `BatchGetItem` ([`crate::heads::prepare`]).
//!
//! An entity with `unique` or `limits` takes no TTL: a TTL removal is not a transaction, so it
//! would never free the guard items its versions hold. A command of such an entity with its own
//! `ttl` is a 400 ([`refuse_own_ttl`]); writing a live TTL policy for it is a 422
//! ([`refuse_policy_write`]); a policy found for it anyway (written around the handler) refuses
//! its commands with a 500 whose logged detail names the policy to remove ([`refuse_policy_found`]).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use cqrs_keys::{parse_entity_key, tenant_code};
use cqrs_problem::ApiError;
use cqrs_store::ttl_policy::TtlPolicy;

use crate::App;
use crate::entity::ModelEntity;
use crate::input::{CommandInput, Patch};

/// How long a policy read stays in a warm container's cache.
pub const POLICY_MAX_AGE: Duration = Duration::from_secs(60);

/// A tenant and a table.
type PolicyKey = (String, String);

/// A policy (or none) and when it was read.
type PolicyEntry = (Instant, Option<TtlPolicy>);

/// The policies a warm container has read, by tenant and table, with when.
#[derive(Debug, Default)]
pub struct PolicyCache {
    entries: Mutex<HashMap<PolicyKey, PolicyEntry>>,
}

impl PolicyCache {
    /// The cached policy of `tenant` / `table` when read less than [`POLICY_MAX_AGE`] before
    /// `now`.
    fn fresh(&self, key: &PolicyKey, now: Instant) -> Option<Option<TtlPolicy>> {
        let entries = self.entries.lock().ok()?;
        entries
            .get(key)
            .filter(|(at, _)| now.saturating_duration_since(*at) < POLICY_MAX_AGE)
            .map(|(_, policy)| *policy)
    }

    /// Keeps `policy` (or none) of `key`, read at `now`.
    pub(crate) fn store(&self, key: PolicyKey, policy: Option<TtlPolicy>, now: Instant) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.insert(key, (now, policy));
        }
    }
}

/// The table a command's policy is looked up by: the entity's name, else the `pk` prefix.
fn table_of<'a>(input: &'a CommandInput, entity: Option<ModelEntity<'a>>) -> Option<&'a str> {
    match entity {
        Some(entity) => Some(entity.entity.name.as_str()),
        None => parse_entity_key(&input.pk).ok().map(|(prefix, _)| prefix),
    }
}

/// Whether the command takes a policy, and which: `None` when it gives its own `ttl` (or
/// `"ttl": null`) or its `pk` names no tenant or table; else the tenant and table, with the
/// cached policy when it is fresh at `now` (`None`: to be read).
pub(crate) fn needed(
    app: &App,
    input: &CommandInput,
    entity: Option<ModelEntity<'_>>,
    now: Instant,
) -> Option<(PolicyKey, Option<Option<TtlPolicy>>)> {
    if !matches!(input.ttl, Patch::Absent) {
        return None;
    }
    let (Some(tenant), Some(table)) = (tenant_code(&input.pk), table_of(input, entity)) else {
        return None;
    };
    let key = (tenant.to_string(), table.to_string());
    let cached = app.ttl_policies.fresh(&key, now);
    Some((key, cached))
}

/// Sets `input.ttl` from `policy` (nothing without one).
pub(crate) fn set(input: &mut CommandInput, policy: Option<TtlPolicy>) {
    if let Some(policy) = policy {
        input.ttl = Patch::Value(policy.expiry(chrono::Utc::now().timestamp()));
    }
}

/// Sets `input.ttl` from the policy when the command gives none (the policy read alone when it
/// is not cached).
pub async fn apply(
    app: &App,
    input: &mut CommandInput,
    entity: Option<ModelEntity<'_>>,
) -> Result<(), ApiError> {
    let now = app.heads.clock.now();
    let Some((key, cached)) = needed(app, input, entity, now) else {
        return Ok(());
    };
    let policy = match cached {
        Some(policy) => policy,
        None => {
            let at = chrono::Utc::now().timestamp();
            let policy = app.store.ttl_policy(&key.0, &key.1, at).await?;
            app.ttl_policies.store(key, policy, now);
            policy
        }
    };
    set(input, policy);
    Ok(())
}

/// Whether versions of `entity` must not expire: it has `unique` or `limits`, whose guard items a
/// TTL removal (not a transaction) would never free.
fn is_constrained(entity: &cqrs_model::Entity) -> bool {
    !(entity.unique.is_empty() && entity.limits.is_empty())
}

/// The constraints of `entity` that forbid a TTL, by name.
fn constraint_names(entity: &cqrs_model::Entity) -> String {
    entity
        .unique
        .iter()
        .map(|u| u.name.as_str())
        .chain(entity.limits.iter().map(|l| l.name.as_str()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A command of an entity with `unique` or `limits` that gives its own `ttl`: a 400 (a TTL
/// removal frees no guard). `"ttl": null` is taken.
///
/// # Errors
///
/// 400 naming `ttl`, the entity and its constraints.
pub fn refuse_own_ttl(
    entity: Option<ModelEntity<'_>>,
    input: &CommandInput,
) -> Result<(), ApiError> {
    match (entity, &input.ttl) {
        (Some(entity), Patch::Value(_)) if is_constrained(entity.entity) => {
            Err(ApiError::bad_field(
                "ttl",
                format!(
                    "entity {} has constraints ({}): a TTL removal frees no guard, so its \
                     versions do not expire",
                    entity.entity.name,
                    constraint_names(entity.entity)
                ),
            ))
        }
        _ => Ok(()),
    }
}

/// A TTL policy found for an entity with `unique` or `limits` (set on `input` by
/// [`crate::heads::prepare`]): a 500 whose logged detail says to remove it; nothing is written.
///
/// # Errors
///
/// 500 naming the policy to remove.
pub fn refuse_policy_found(
    entity: Option<ModelEntity<'_>>,
    input: &CommandInput,
) -> Result<(), ApiError> {
    match (entity, &input.ttl) {
        (Some(entity), Patch::Value(_)) if is_constrained(entity.entity) => {
            Err(ApiError::Internal(format!(
                "entity {} has constraints ({}) and a TTL policy applies to it: remove the TTL \
                 policy MASTER#{} / TTL#{} (or common's); a TTL removal frees no guard",
                entity.entity.name,
                constraint_names(entity.entity),
                tenant_code(&input.pk).unwrap_or("?"),
                entity.entity.name
            )))
        }
        _ => Ok(()),
    }
}

/// A command writing a live TTL policy (`MASTER#tenant` / `TTL#<entity>`) for an entity with
/// `unique` or `limits`: a 422 (its versions must not expire). Deleting such a policy is taken.
///
/// # Errors
///
/// 422 `urn:cqrs:problem:ttl-policy-refused` naming the entity and its constraints.
pub fn refuse_policy_write(
    model: &cqrs_model::Model,
    input: &CommandInput,
) -> Result<(), ApiError> {
    if input.is_deleted == Some(true) {
        return Ok(());
    }
    let Ok((cqrs_keys::MASTER_PK_PREFIX, _)) = parse_entity_key(&input.pk) else {
        return Ok(());
    };
    let Some(table) = input
        .sk
        .strip_prefix(cqrs_keys::TTL_SK_PREFIX)
        .and_then(|rest| rest.strip_prefix('#'))
    else {
        return Ok(());
    };
    match model.entity(table) {
        Some(entity) if is_constrained(entity) => Err(ApiError::refused(
            422,
            "urn:cqrs:problem:ttl-policy-refused",
            "TTL policy refused",
            format!(
                "entity {table} has constraints ({}): a TTL removal frees no guard, so its \
                 versions may not expire and it takes no TTL policy",
                constraint_names(entity)
            ),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cqrs_store::settings::Source;

    #[test]
    fn a_cached_policy_is_fresh_for_a_minute_only() {
        let cache = PolicyCache::default();
        let clock = crate::heads::Clock::default();
        let key = ("t1".to_string(), "order".to_string());
        assert_eq!(cache.fresh(&key, clock.now()), None, "never read");
        let policy = TtlPolicy {
            days: 3,
            source: Source::Tenant,
        };
        cache.store(key.clone(), Some(policy), clock.now());
        assert_eq!(cache.fresh(&key, clock.now()), Some(Some(policy)));
        // No policy is cached too: a command does not read it again.
        let other = ("t2".to_string(), "order".to_string());
        cache.store(other.clone(), None, clock.now());
        assert_eq!(cache.fresh(&other, clock.now()), Some(None));
        // Read more than a minute ago: stale.
        clock.advance(POLICY_MAX_AGE + Duration::from_secs(1));
        assert_eq!(cache.fresh(&key, clock.now()), None);
    }
}
