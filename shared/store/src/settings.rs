//! Reads of master items (`MASTER#tenant` in the data table) with mbc-cqrs-serverless' cascade: a
//! tenant's own item, else the `common` tenant's. Settings, sequence formats and TTL policies are
//! all read this way, in one `BatchGetItem` of both keys ([`Store::get_data_items`]).
//!
//! A soft-deleted tenant item counts as absent (the tenant removed its own value, so `common`
//! applies again); a soft-deleted `common` item is no value at all. An item expired at the time of
//! the read ([`Item::is_expired`]) is absent the same way, whether DynamoDB has deleted it yet or
//! not.

use cqrs_item::Item;
use cqrs_keys::{TENANT_COMMON, master_pk};

use crate::{Store, StoreError};

/// Where a cascaded value came from.
///
/// ```
/// assert_eq!(cqrs_store::settings::Source::Common.as_str(), "common");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The tenant's own item.
    Tenant,
    /// The `common` tenant's item (the tenant has none).
    Common,
}

impl Source {
    /// `tenant` or `common`.
    ///
    /// ```
    /// assert_eq!(cqrs_store::settings::Source::Tenant.as_str(), "tenant");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Tenant => "tenant",
            Source::Common => "common",
        }
    }
}

impl Store {
    /// The master item `sk` of `tenant` (`MASTER#tenant`), else of `common` (`MASTER#common`), with
    /// where it came from; `None` when neither has a live one (neither soft-deleted nor expired at
    /// `now`, epoch seconds). One `BatchGetItem` of both keys.
    ///
    /// ```no_run
    /// # async fn example(store: &cqrs_store::Store) -> Result<(), cqrs_store::StoreError> {
    /// let now = 1_700_000_000;
    /// if let Some((item, source)) = store.master_item_with_common("t1", "SETTING#ui#theme", now).await? {
    ///     println!("{} from {}", item.id, source.as_str());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn master_item_with_common(
        &self,
        tenant: &str,
        sk: &str,
        now: i64,
    ) -> Result<Option<(Item, Source)>, StoreError> {
        let own = master_pk(Some(tenant));
        let common = master_pk(Some(TENANT_COMMON));
        let mut keys = vec![(own.clone(), sk.to_string())];
        if own != common {
            keys.push((common.clone(), sk.to_string()));
        }
        let mut found = self.get_data_items(&keys).await?;
        let live = |item: Option<Item>| item.filter(|i| !i.is_deleted && !i.is_expired(now));
        if let Some(item) = live(found.remove(&(own.clone(), sk.to_string()))) {
            let source = if own == common {
                Source::Common
            } else {
                Source::Tenant
            };
            return Ok(Some((item, source)));
        }
        Ok(live(found.remove(&(common, sk.to_string()))).map(|item| (item, Source::Common)))
    }
}
