//! TTL policies: `MASTER#tenant` / `TTL#table` items (mbc-cqrs-serverless' layout) whose
//! `attributes.days` says how many days a new version of that table's items is kept. Read with the
//! `common` fallback ([`Store::master_item_with_common`]).
//!
//! `table` is the model entity's name (`order`), or the item type (the `pk` prefix, `PRODUCT`) for
//! items of no entity.
//!
//! A command handler container reads a policy together with the heads state, in one
//! `BatchGetItem` ([`Store::heads_state_with_ttl_policy`]); [`policy_of`] is the cascade both
//! reads share.

use cqrs_item::Item;
use cqrs_keys::master::ttl_policy_sk;

use crate::settings::Source;
use crate::{Store, StoreError};

/// A TTL policy: keep each new version this many days.
///
/// ```
/// let policy = cqrs_store::ttl_policy::TtlPolicy { days: 30, source: cqrs_store::settings::Source::Common };
/// assert_eq!(policy.expiry(1_000), 1_000 + 30 * 86_400);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TtlPolicy {
    /// Days to keep, at least 1.
    pub days: i64,
    /// Whether the tenant's own policy or `common`'s.
    pub source: Source,
}

impl TtlPolicy {
    /// The `ttl` (epoch seconds) of a version written at `now` (epoch seconds).
    ///
    /// ```
    /// let policy = cqrs_store::ttl_policy::TtlPolicy { days: 1, source: cqrs_store::settings::Source::Tenant };
    /// assert_eq!(policy.expiry(0), 86_400);
    /// ```
    pub fn expiry(&self, now: i64) -> i64 {
        now.saturating_add(self.days.saturating_mul(86_400))
    }
}

/// The policy of the tenant's item (`own`), else of `common`'s, as read at `now` (epoch seconds):
/// the cascade of [`Store::master_item_with_common`] (a soft-deleted or expired item is absent),
/// then the check of `days` (a whole number of at least 1, else no policy, logged). For a caller
/// that read the two items itself ([`Store::heads_state_with_ttl_policy`]).
///
/// ```
/// use cqrs_store::ttl_policy::{TtlPolicy, policy_of};
/// use cqrs_store::settings::Source;
/// let mut own = cqrs_item::Item::example();
/// own.attributes.insert("days".into(), cqrs_item::Value::from(3));
/// assert_eq!(policy_of(Some(own.clone()), None, 0), Some(TtlPolicy { days: 3, source: Source::Tenant }));
/// own.is_deleted = true;
/// assert_eq!(policy_of(Some(own), None, 0), None);
/// assert_eq!(policy_of(None, None, 0), None);
/// ```
pub fn policy_of(own: Option<Item>, common: Option<Item>, now: i64) -> Option<TtlPolicy> {
    let live = |item: Option<Item>| item.filter(|i| !i.is_deleted && !i.is_expired(now));
    let (item, source) = match (live(own), live(common)) {
        (Some(own), _) => (own, Source::Tenant),
        (None, Some(common)) => (common, Source::Common),
        (None, None) => return None,
    };
    days_of(&item, source)
}

/// The policy `item` states, or `None` (logged) when its `days` is not a whole number of at
/// least 1: a bad policy never expires data by accident.
fn days_of(item: &Item, source: Source) -> Option<TtlPolicy> {
    match item.attributes.get("days").and_then(|d| d.as_i64()) {
        Some(days) if days >= 1 => Some(TtlPolicy { days, source }),
        _ => {
            tracing::error!(id = %item.id, "TTL policy without a whole `days` of at least 1: ignored");
            None
        }
    }
}

impl Store {
    /// The TTL policy of `table` for `tenant` (else `common`'s); `None` when neither has a live
    /// policy (neither soft-deleted nor expired at `now`, epoch seconds). A policy whose `days` is not a whole number of at least 1 is no policy (and is
    /// logged): a bad policy never expires data by accident.
    ///
    /// ```no_run
    /// # async fn example(store: &cqrs_store::Store) -> Result<(), cqrs_store::StoreError> {
    /// if let Some(policy) = store.ttl_policy("t1", "order", 1_700_000_000).await? {
    ///     println!("orders of t1 are kept {} days", policy.days);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn ttl_policy(
        &self,
        tenant: &str,
        table: &str,
        now: i64,
    ) -> Result<Option<TtlPolicy>, StoreError> {
        let Ok(sk) = ttl_policy_sk(table) else {
            return Ok(None);
        };
        let Some((item, source)) = self.master_item_with_common(tenant, &sk, now).await? else {
            return Ok(None);
        };
        Ok(days_of(&item, source))
    }
}
