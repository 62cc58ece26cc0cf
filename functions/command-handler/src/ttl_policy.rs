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
