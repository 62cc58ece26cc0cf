//! Reads of master items (`MASTER#tenant` in the data table) with mbc-cqrs-serverless' cascade: a
//! tenant's own item, else the `common` tenant's. Settings, sequence formats and TTL policies are
//! all read this way, in one `BatchGetItem` of both keys.
//!
//! A soft-deleted tenant item counts as absent (the tenant removed its own value, so `common`
//! applies again); a soft-deleted `common` item is no value at all.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes};
use cqrs_item::Item;
use cqrs_keys::{TENANT_COMMON, master_pk};

use crate::{Store, StoreError, sdk_error};

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

/// How many times unprocessed keys of a `BatchGetItem` are asked for again.
const BATCH_RETRIES: usize = 5;

impl Store {
    /// The master item `sk` of `tenant` (`MASTER#tenant`), else of `common` (`MASTER#common`), with
    /// where it came from; `None` when neither has a live one. One `BatchGetItem` of both keys.
    ///
    /// ```no_run
    /// # async fn example(store: &cqrs_store::Store) -> Result<(), cqrs_store::StoreError> {
    /// if let Some((item, source)) = store.master_item_with_common("t1", "SETTING#ui#theme").await? {
    ///     println!("{} from {}", item.id, source.as_str());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn master_item_with_common(
        &self,
        tenant: &str,
        sk: &str,
    ) -> Result<Option<(Item, Source)>, StoreError> {
        let own = master_pk(Some(tenant));
        let common = master_pk(Some(TENANT_COMMON));
        let mut keys = vec![(own.clone(), sk.to_string())];
        if own != common {
            keys.push((common.clone(), sk.to_string()));
        }
        let mut found = self.get_data_items(&keys).await?;
        let live = |item: Option<Item>| item.filter(|i| !i.is_deleted);
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

    /// Several items of the data table by key, in `BatchGetItem` calls of at most 100 keys
    /// (unprocessed keys asked for again); absent keys are absent from the map.
    ///
    /// ```no_run
    /// # async fn example(store: &cqrs_store::Store) -> Result<(), cqrs_store::StoreError> {
    /// let key = ("MASTER#t1".to_string(), "SETTING#ui#theme".to_string());
    /// let items = store.get_data_items(&[key.clone()]).await?;
    /// println!("{}", items.contains_key(&key));
    /// # Ok(()) }
    /// ```
    pub async fn get_data_items(
        &self,
        keys: &[(String, String)],
    ) -> Result<HashMap<(String, String), Item>, StoreError> {
        let mut found = HashMap::new();
        for chunk in keys.chunks(100) {
            let mut pending: Vec<HashMap<String, AttributeValue>> = chunk
                .iter()
                .map(|(pk, sk)| {
                    HashMap::from([
                        ("pk".to_string(), AttributeValue::S(pk.clone())),
                        ("sk".to_string(), AttributeValue::S(sk.clone())),
                    ])
                })
                .collect();
            for attempt in 0..=BATCH_RETRIES {
                if pending.is_empty() {
                    break;
                }
                if attempt == BATCH_RETRIES {
                    return Err(StoreError::Throttled(format!(
                        "BatchGetItem (data): {} key(s) unprocessed after {BATCH_RETRIES} tries",
                        pending.len()
                    )));
                }
                if attempt > 0 {
                    tokio::time::sleep(std::time::Duration::from_millis(20 << attempt)).await;
                }
                let request = KeysAndAttributes::builder()
                    .set_keys(Some(std::mem::take(&mut pending)))
                    .build()
                    .map_err(|e| StoreError::Dynamo(format!("BatchGetItem (data): {e}")))?;
                let output = self
                    .client
                    .batch_get_item()
                    .request_items(&self.tables.data, request)
                    .send()
                    .await
                    .map_err(|e| sdk_error("BatchGetItem (data)", e))?;
                for attributes in output
                    .responses
                    .and_then(|mut r| r.remove(&self.tables.data))
                    .unwrap_or_default()
                {
                    let item = Item::from_attributes(attributes)?;
                    found.insert((item.pk.clone(), item.sk.clone()), item);
                }
                pending = output
                    .unprocessed_keys
                    .and_then(|mut u| u.remove(&self.tables.data))
                    .map(|k| k.keys)
                    .unwrap_or_default();
            }
        }
        Ok(found)
    }
}
