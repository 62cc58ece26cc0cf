//! The framework's change log as a consumer of the change events: the function `change-log`
//! (template parameter `ChangeLog=on`, the service's `src/bin/change-log.rs`) writes one entry per
//! version of every item into the data table's reserved `CQRS_CHANGE_LOG#<tenant>#<YYYY-MM>`
//! partitions ([`cqrs_data_sync::change_log`] says what an entry holds and how it is read).
//!
//! Before, the change log ran inside data-sync as a sync target, turned on by `CHANGE_LOG_TABLE`
//! (which the template never set): a failing write held back every item of the stream shard, and
//! the projection with it. Here it is [`ChangeLog`] unchanged behind [`FromSyncTarget`], run by the
//! consumer runtime: its own queue, dead-letter queue, lag alarm and redrive, and a failure that
//! delays only the log. The entries are the same (their key is a function of the item's tenant,
//! `updatedAt`, id and version, and an entry already written is recognised as its own,
//! [`cqrs_data_sync::change_log::same_entry`]), so a stack that moves from data-sync's target to the
//! consumer, or replays a month, writes no entry twice.
//!
//! Configuration: `CHANGE_LOG_TABLE` when set (any table with string keys `pk` and `sk`), else
//! `DATA_TABLE` (the template's choice: the query handler serves the entries from there); the
//! consumer runtime's own ([`crate::Config`]) and the client's ([`cqrs_store::client`]).
//!
//! ```
//! use cqrs_consumer::{Consumer, change_log};
//! let vars = [
//!     ("AWS_REGION", "eu-west-1"), ("AWS_ACCESS_KEY_ID", "AKID"), ("AWS_SECRET_ACCESS_KEY", "s"),
//!     ("DATA_TABLE", "shop-data"),
//! ];
//! let lookup = |name: &str| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string());
//! let consumer = change_log::from_lookup(lookup).unwrap();
//! assert_eq!(consumer.name(), change_log::NAME);
//! assert_eq!(consumer.target().table(), "shop-data");
//! ```

use cqrs_data_sync::change_log::{CHANGE_LOG_TABLE_ENV, ChangeLog};
use cqrs_store::client::{ClientEnv, http_client};
use cqrs_store::{ConfigError, Store, Tables};

use crate::FromSyncTarget;
use crate::runtime::StartError;

/// The change log consumer's name: its `[consumers]`-like name in the template (queue
/// `<Prefix>-change-log.fifo`, function `<Prefix>-change-log`), its markers' prefix and its
/// binary's. One of [`crate::runtime::FRAMEWORK_CONSUMERS`].
///
/// ```
/// assert_eq!(cqrs_consumer::change_log::NAME, "change-log");
/// assert!(cqrs_consumer::runtime::FRAMEWORK_CONSUMERS.contains(&cqrs_consumer::change_log::NAME));
/// ```
pub const NAME: &str = "change-log";

/// The change log consumer as the function builds it at cold start: its table from
/// `CHANGE_LOG_TABLE`, else `DATA_TABLE`, its DynamoDB client from the client's variables
/// ([`cqrs_store::client`]). Builds only; nothing is sent.
///
/// ```
/// let vars = [
///     ("AWS_REGION", "eu-west-1"), ("AWS_ACCESS_KEY_ID", "AKID"), ("AWS_SECRET_ACCESS_KEY", "s"),
///     ("DATA_TABLE", "shop-data"), ("CHANGE_LOG_TABLE", "shop-log"),
/// ];
/// let lookup = |name: &str| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string());
/// let consumer = cqrs_consumer::change_log::from_lookup(lookup).unwrap();
/// assert_eq!(consumer.target().table(), "shop-log", "CHANGE_LOG_TABLE first");
///
/// let none = |name: &str| match name { "AWS_REGION" => Some("eu-west-1".to_string()), _ => None };
/// let err = cqrs_consumer::change_log::from_lookup(none).err().unwrap();
/// assert_eq!(err.to_string(), "environment variable DATA_TABLE is missing or empty");
/// ```
///
/// # Errors
///
/// Neither variable set, or the client's variables malformed ([`StartError::Config`]).
pub fn from_lookup(
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<FromSyncTarget<ChangeLog>, StartError> {
    let named = |name: &str| {
        lookup(name)
            .map(|value| value.trim().to_string())
            .filter(|value| !value.is_empty())
    };
    let table = named(CHANGE_LOG_TABLE_ENV)
        .or_else(|| named("DATA_TABLE"))
        .ok_or(ConfigError::MissingVariable("DATA_TABLE"))?;
    let env = ClientEnv::from_lookup(&lookup)?;
    let http = http_client(env.tls_roots)?;
    let client = env.client(http);
    // The change log writes one table; the store's other names are never read by it.
    let store = Store::new(client, Tables::new("-", &table, "-", "-"));
    Ok(FromSyncTarget::new(ChangeLog::new(store, table)))
}

/// The `change-log` function's `main`: [`from_lookup`] from the environment, run by
/// [`crate::run`] (the consumer runtime's configuration and model check). The service's
/// `src/bin/change-log.rs` is this call:
///
/// ```no_run
/// // The service's src/bin/change-log.rs, where MODEL is `include_str!("../../model.toml")`.
/// # const MODEL: &str = "";
/// #[tokio::main]
/// async fn main() -> Result<(), lambda_runtime::Error> {
///     cqrs_consumer::change_log::run(MODEL).await
/// }
/// ```
///
/// # Errors
///
/// A model that does not check, or a missing or malformed variable ([`StartError`]): the cold
/// start fails and says which.
pub async fn run(model_text: &str) -> Result<(), lambda_runtime::Error> {
    let consumer = from_lookup(|name| std::env::var(name).ok())?;
    tracing::info!(table = consumer.target().table(), "change log");
    crate::run(model_text, consumer).await
}
