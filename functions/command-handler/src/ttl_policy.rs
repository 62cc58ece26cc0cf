//! TTL policies applied to commands: a command that gives no `ttl` gets `now + days` from the
//! policy of its table (`MASTER#tenant` / `TTL#table`, else `common`'s; `table` is the entity
//! name, or the item type for items of no entity). A command's own `ttl` wins, and `"ttl": null`
//! clears the expiry whatever the policy says. Without a policy nothing changes (a `PATCH` keeps
//! the stored `ttl`).
//!
//! Policies are cached per warm container for [`POLICY_MAX_AGE`]: a command does not read its
//! policy, one read per tenant and table per minute does. A changed policy applies to new
//! versions within that time; versions already written keep their `ttl`.

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
    /// The cached policy of `tenant` / `table` when read less than [`POLICY_MAX_AGE`] ago.
    fn fresh(&self, key: &PolicyKey) -> Option<Option<TtlPolicy>> {
        let entries = self.entries.lock().ok()?;
        entries
            .get(key)
            .filter(|(at, _)| at.elapsed() < POLICY_MAX_AGE)
            .map(|(_, policy)| *policy)
    }

    fn store(&self, key: PolicyKey, policy: Option<TtlPolicy>) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.insert(key, (Instant::now(), policy));
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

/// Sets `input.ttl` from the policy when the command gives none.
pub async fn apply(
    app: &App,
    input: &mut CommandInput,
    entity: Option<ModelEntity<'_>>,
) -> Result<(), ApiError> {
    if !matches!(input.ttl, Patch::Absent) {
        return Ok(());
    }
    let (Some(tenant), Some(table)) = (tenant_code(&input.pk), table_of(input, entity)) else {
        return Ok(());
    };
    let key = (tenant.to_string(), table.to_string());
    let now = chrono::Utc::now().timestamp();
    let policy = match app.ttl_policies.fresh(&key) {
        Some(policy) => policy,
        None => {
            let policy = app.store.ttl_policy(&key.0, &key.1, now).await?;
            app.ttl_policies.store(key, policy);
            policy
        }
    };
    if let Some(policy) = policy {
        input.ttl = Patch::Value(policy.expiry(now));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cqrs_store::settings::Source;

    #[test]
    fn a_cached_policy_is_fresh_for_a_minute_only() {
        let cache = PolicyCache::default();
        let key = ("t1".to_string(), "order".to_string());
        assert_eq!(cache.fresh(&key), None, "never read");
        let policy = TtlPolicy {
            days: 3,
            source: Source::Tenant,
        };
        cache.store(key.clone(), Some(policy));
        assert_eq!(cache.fresh(&key), Some(Some(policy)));
        // No policy is cached too: a command does not read it again.
        let other = ("t2".to_string(), "order".to_string());
        cache.store(other.clone(), None);
        assert_eq!(cache.fresh(&other), Some(None));
        // Read more than a minute ago: stale.
        let old = Instant::now()
            .checked_sub(POLICY_MAX_AGE + Duration::from_secs(1))
            .unwrap();
        cache
            .entries
            .lock()
            .unwrap()
            .insert(key.clone(), (old, Some(policy)));
        assert_eq!(cache.fresh(&key), None);
    }
}
