//! The DynamoDB store: every DynamoDB expression of the project lives in this crate.
//!
//! [`Store`] holds one client (built once per cold start) and the [`Tables`] it works on. Each
//! module owns the operations of one side of the product:
//!
//! - [`command`]: versions in the command table, written with one conditional put each, and
//!   idempotency records.
//! - [`head`]: the head record of each item (its latest version), written in one transaction
//!   with the version row and the idempotency record, so no version number is written twice.
//! - [`projection`]: data-sync's writes into the data and history tables.
//! - [`query`]: the reads of the query handler.
//! - [`parked`]: stream records data-sync can never project, kept with their reason.
//!
//! Storage failures are translated once, here, into [`StoreError`]: a failed
//! `attribute_not_exists` becomes [`StoreError::AlreadyExists`], a moved head
//! [`StoreError::StaleVersion`], a transaction conflict [`StoreError::WriteConflict`], throttling
//! [`StoreError::Throttled`]; no caller ever matches on SDK types.
//!
//! ```
//! use cqrs_store::Tables;
//!
//! let tables = Tables::from_lookup(|name| match name {
//!     "COMMAND_TABLE" => Some("cqrs-command".into()),
//!     "DATA_TABLE" => Some("cqrs-data".into()),
//!     "HISTORY_TABLE" => Some("cqrs-history".into()),
//!     "IDEMPOTENCY_TABLE" => Some("cqrs-idempotency".into()),
//!     _ => None,
//! })
//! .unwrap();
//! assert_eq!(tables.command, "cqrs-command");
//! ```
#![forbid(unsafe_code)]
#![cfg_attr(
    not(test),
    warn(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

pub mod change_log;
pub mod client;
pub mod command;
pub mod constraints;
pub mod entries;
pub mod guard;
pub mod head;
pub mod logging;
pub mod parked;
pub mod projection;
pub mod query;
pub mod rebuild;
pub mod sequence;
pub mod settings;
pub mod ttl_policy;

use aws_sdk_dynamodb::{Client, error::ProvideErrorMetadata, error::SdkError};

pub use command::IdempotencyRecord;
pub use head::{HeadsState, StoredVersions};

/// The names of the tables the functions use.
///
/// ```
/// let tables = cqrs_store::Tables::new("c", "d", "h", "i");
/// assert_eq!(tables.history, "h");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tables {
    /// Every version of every item, `sk@version` (`COMMAND_TABLE`).
    pub command: String,
    /// The latest version of every item, `sk` without version (`DATA_TABLE`).
    pub data: String,
    /// Every version, projected by data-sync (`HISTORY_TABLE`).
    pub history: String,
    /// Idempotency records of the command handler (`IDEMPOTENCY_TABLE`).
    pub idempotency: String,
    /// Parked stream records of data-sync (`PARKED_TABLE`); only data-sync needs it, so it is
    /// optional here and data-sync requires it at start ([`Tables::require_parked`]).
    pub parked: Option<String>,
    /// Sequence counters (`SEQUENCES_TABLE`, `SEQ#tenant` items); only the command handler needs
    /// it ([`Tables::with_sequences`]).
    pub sequences: Option<String>,
}

impl Tables {
    /// Tables with these names.
    ///
    /// ```
    /// let t = cqrs_store::Tables::new("c", "d", "h", "i");
    /// assert_eq!(t.idempotency, "i");
    /// ```
    pub fn new(
        command: impl Into<String>,
        data: impl Into<String>,
        history: impl Into<String>,
        idempotency: impl Into<String>,
    ) -> Self {
        Tables {
            command: command.into(),
            data: data.into(),
            history: history.into(),
            idempotency: idempotency.into(),
            parked: None,
            sequences: None,
        }
    }

    /// The same tables with a parked-records table.
    ///
    /// ```
    /// let t = cqrs_store::Tables::new("c", "d", "h", "i").with_parked("p");
    /// assert_eq!(t.parked.as_deref(), Some("p"));
    /// ```
    pub fn with_parked(mut self, parked: impl Into<String>) -> Self {
        self.parked = Some(parked.into());
        self
    }

    /// The same tables with a sequences table.
    ///
    /// ```
    /// let t = cqrs_store::Tables::new("c", "d", "h", "i").with_sequences("s");
    /// assert_eq!(t.sequences.as_deref(), Some("s"));
    /// ```
    pub fn with_sequences(mut self, sequences: impl Into<String>) -> Self {
        self.sequences = Some(sequences.into());
        self
    }

    /// These tables if they name a parked-records table, else the error that names `PARKED_TABLE`.
    ///
    /// ```
    /// let t = cqrs_store::Tables::new("c", "d", "h", "i");
    /// assert!(t.clone().require_parked().unwrap_err().to_string().contains("PARKED_TABLE"));
    /// assert!(t.with_parked("p").require_parked().is_ok());
    /// ```
    pub fn require_parked(self) -> Result<Self, ConfigError> {
        match self.parked {
            Some(_) => Ok(self),
            None => Err(ConfigError::MissingVariable("PARKED_TABLE")),
        }
    }

    /// Reads the table names from the environment (`COMMAND_TABLE`, `DATA_TABLE`, `HISTORY_TABLE`,
    /// `IDEMPOTENCY_TABLE`); a missing or empty one is an error that names it. `PARKED_TABLE` and
    /// `SEQUENCES_TABLE` are read when set (data-sync's parked records, the command handler's
    /// sequence counters).
    ///
    /// ```
    /// // The doctest environment sets none of them.
    /// let err = cqrs_store::Tables::from_env().unwrap_err();
    /// assert!(err.to_string().contains("COMMAND_TABLE"));
    /// ```
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the table names through `lookup` (the environment in production, a map in tests).
    ///
    /// ```
    /// let err = cqrs_store::Tables::from_lookup(|_| Some(" ".into())).unwrap_err();
    /// assert!(err.to_string().contains("COMMAND_TABLE"));
    /// ```
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let get = |name: &'static str| {
            lookup(name)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
                .ok_or(ConfigError::MissingVariable(name))
        };
        Ok(Tables {
            command: get("COMMAND_TABLE")?,
            data: get("DATA_TABLE")?,
            history: get("HISTORY_TABLE")?,
            idempotency: get("IDEMPOTENCY_TABLE")?,
            parked: get("PARKED_TABLE").ok(),
            sequences: get("SEQUENCES_TABLE").ok(),
        })
    }
}

/// A configuration problem found at start-up; the function stops with this message.
///
/// ```
/// let e = cqrs_store::ConfigError::MissingVariable("DATA_TABLE");
/// assert_eq!(e.to_string(), "environment variable DATA_TABLE is missing or empty");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A required environment variable is not set.
    #[error("environment variable {0} is missing or empty")]
    MissingVariable(&'static str),
    /// An environment variable holds a value the function cannot use.
    #[error("environment variable {name} must be {expected}")]
    InvalidVariable {
        /// The variable.
        name: &'static str,
        /// What it may hold.
        expected: &'static str,
    },
    /// The HTTP client's TLS context could not be built.
    #[error("the TLS context of the DynamoDB client could not be built: {0}")]
    Tls(String),
}

/// What can go wrong in the store, translated from the SDK once.
///
/// ```
/// let e = cqrs_store::StoreError::AlreadyExists { pk: "P#t".into(), sk: "a@1".into() };
/// assert!(e.to_string().contains("a@1"));
/// ```
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The conditional put found the key taken: the version exists (a lost race). The HTTP side
    /// answers 409.
    #[error("{pk} / {sk} already exists")]
    AlreadyExists {
        /// The partition key written.
        pk: String,
        /// The sort key written.
        sk: String,
    },
    /// The item's head record is not at the version the write was based on: another version was
    /// written first, or the item already exists (`version: 0`). `latest` is the head's version,
    /// read from the failed condition (`None`: the item has no head, so no version). The HTTP
    /// side answers 409 (404 when the version named does not exist).
    #[error("the latest version of {id} is {latest:?}, not the one the write was based on")]
    StaleVersion {
        /// The item id.
        id: String,
        /// The head's version when the write was refused.
        latest: Option<i64>,
    },
    /// A concurrent write touched the same item at the same moment (`TransactionConflict`,
    /// `TransactionInProgressException`, `ReplicatedWriteConflictException`). Nothing was
    /// written; the same request may succeed when tried again. The HTTP side answers 409.
    #[error("write conflict: {0}")]
    WriteConflict(String),
    /// The idempotency key was taken by a concurrent request between our read and our write. Read
    /// the record again and answer from it.
    #[error("idempotency key {0:?} was taken by a concurrent request")]
    IdempotencyKeyTaken(String),
    /// The idempotency key is held by an earlier request: nothing was written, and this is that
    /// request's record, as the failed condition returned it (no read needed). Answer from it
    /// (a replay when the requests match, 422 when they do not).
    #[error("idempotency key {:?} is held by an earlier request", .0.key)]
    IdempotencyReplay(Box<IdempotencyRecord>),
    /// A history row with this key holds different content than the version being projected.
    /// Versions are immutable, so this cannot come from the command side: the history table was
    /// written by something else, or the command table was recreated and reused the key. The
    /// stored row is left as it is and data-sync reports the record as failed, so an operator sees
    /// it (iterator age, the event source mapping's on-failure destination) instead of one of the
    /// two contents being dropped silently.
    #[error("history row {pk} / {sk} already holds different content for this version")]
    HistoryConflict {
        /// The partition key written.
        pk: String,
        /// The sort key (with version) written.
        sk: String,
    },
    /// A guard of the write ([`guard::Guard`], at `index` in the guards given) did not hold: nothing
    /// was written. The command hook (or the declared constraint) that added it says what the
    /// caller is told; `old` is the guard's item as the failed condition found it (the
    /// cancellation reason's `ALL_OLD`: the holder of a unique value, a group's members, the
    /// target's head), `None` when it did not exist or the guard returns nothing.
    #[error("guard {index} of the write did not hold")]
    GuardFailed {
        /// The guard's position in the guards given to the write.
        index: usize,
        /// The guard's item when the condition failed (no read).
        old: Option<std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>>,
    },
    /// DynamoDB throttled the request after the SDK's retries. Retry later.
    #[error("DynamoDB throttled the request: {0}")]
    Throttled(String),
    /// A stored item does not have the item shape.
    #[error(transparent)]
    Conversion(#[from] cqrs_item::ConversionError),
    /// Any other DynamoDB or transport failure.
    #[error("DynamoDB request failed: {0}")]
    Dynamo(String),
}

impl StoreError {
    /// Whether trying the same operation again later may succeed (throttling, write conflicts,
    /// transport).
    ///
    /// ```
    /// assert!(cqrs_store::StoreError::Throttled("x".into()).is_transient());
    /// assert!(cqrs_store::StoreError::WriteConflict("x".into()).is_transient());
    /// assert!(!cqrs_store::StoreError::IdempotencyKeyTaken("k".into()).is_transient());
    /// ```
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            StoreError::Throttled(_) | StoreError::WriteConflict(_) | StoreError::Dynamo(_)
        )
    }
}

/// Error codes of DynamoDB (and cancellation-reason codes of a transaction) that mean throttling.
const THROTTLING_CODES: [&str; 5] = [
    "ProvisionedThroughputExceededException",
    "ProvisionedThroughputExceeded",
    "RequestLimitExceeded",
    "ThrottlingException",
    "ThrottlingError",
];

/// Error codes (and cancellation-reason codes) that mean a concurrent write got in the way.
const CONFLICT_CODES: [&str; 4] = [
    "TransactionConflictException",
    "TransactionConflict",
    "TransactionInProgressException",
    "ReplicatedWriteConflictException",
];

/// What one DynamoDB error code means for a caller.
fn classify(operation: &str, code: Option<&str>, message: String) -> StoreError {
    let message = format!("{operation}: {message}");
    match code {
        Some(code) if THROTTLING_CODES.contains(&code) => StoreError::Throttled(message),
        Some(code) if CONFLICT_CODES.contains(&code) => StoreError::WriteConflict(message),
        _ => StoreError::Dynamo(message),
    }
}

/// Translates a cancelled transaction whose reasons hold no failed condition the caller handles:
/// throttling first (retry later), then a conflict, else a plain failure.
pub(crate) fn cancelled_error(operation: &str, codes: &[&str], message: String) -> StoreError {
    let throttled = codes.iter().find(|c| THROTTLING_CODES.contains(c));
    let conflict = codes.iter().find(|c| CONFLICT_CODES.contains(c));
    classify(operation, throttled.or(conflict).copied(), message)
}

/// Translates an SDK failure that is neither a condition failure nor a cancelled transaction.
pub(crate) fn sdk_error<E, R>(operation: &str, error: SdkError<E, R>) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    let code = error.code().map(str::to_string);
    let message = aws_sdk_dynamodb::error::DisplayErrorContext(&error).to_string();
    classify(operation, code.as_deref(), message)
}

/// The DynamoDB store of the three functions: one client, the table names, and the operations in
/// this crate's modules.
///
/// ```no_run
/// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
/// let env = cqrs_store::client::ClientEnv::from_env()?;
/// let client = env.client(cqrs_store::client::http_client(env.tls_roots)?);
/// let store = cqrs_store::Store::new(client, cqrs_store::Tables::from_env()?);
/// let latest = store.latest_command_version("PRODUCT#t1", "P001").await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Store {
    client: Client,
    tables: Tables,
}

impl Store {
    /// A store over `client` and `tables`.
    ///
    /// ```no_run
    /// # async fn example() {
    /// let client = aws_sdk_dynamodb::Client::new(&aws_config::load_from_env().await);
    /// let store = cqrs_store::Store::new(client, cqrs_store::Tables::new("c", "d", "h", "i"));
    /// assert_eq!(store.tables().data, "d");
    /// # }
    /// ```
    pub fn new(client: Client, tables: Tables) -> Self {
        Store { client, tables }
    }

    /// The table names this store works on.
    ///
    /// ```no_run
    /// # fn example(store: &cqrs_store::Store) {
    /// println!("{}", store.tables().command);
    /// # }
    /// ```
    pub fn tables(&self) -> &Tables {
        &self.tables
    }

    /// Reads one item by its key and converts it; `None` when absent. The one `GetItem` of the
    /// item tables.
    pub(crate) async fn get_item(
        &self,
        operation: &'static str,
        table: &str,
        pk: &str,
        sk: String,
        consistent: bool,
    ) -> Result<Option<cqrs_item::Item>, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(table)
            .key(
                "pk",
                aws_sdk_dynamodb::types::AttributeValue::S(pk.to_string()),
            )
            .key("sk", aws_sdk_dynamodb::types::AttributeValue::S(sk))
            .consistent_read(consistent)
            .send()
            .await
            .map_err(|e| sdk_error(operation, e))?;
        output
            .item
            .map(cqrs_item::Item::from_attributes)
            .transpose()
            .map_err(StoreError::from)
    }

    /// The DynamoDB client.
    ///
    /// ```no_run
    /// # fn example(store: &cqrs_store::Store) {
    /// let _client = store.client().clone();
    /// # }
    /// ```
    pub fn client(&self) -> &Client {
        &self.client
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_become_throttling_conflict_or_failure() {
        for code in [
            "ProvisionedThroughputExceededException",
            "ThrottlingException",
            "RequestLimitExceeded",
        ] {
            assert!(matches!(
                classify("op", Some(code), "m".into()),
                StoreError::Throttled(_)
            ));
        }
        for code in [
            "TransactionConflictException",
            "TransactionInProgressException",
        ] {
            assert!(matches!(
                classify("op", Some(code), "m".into()),
                StoreError::WriteConflict(_)
            ));
        }
        assert!(matches!(
            classify("op", Some("ValidationException"), "m".into()),
            StoreError::Dynamo(_)
        ));
        assert!(matches!(
            classify("op", None, "m".into()),
            StoreError::Dynamo(_)
        ));
    }

    #[test]
    fn cancellation_reasons_prefer_throttling_over_conflict() {
        let error = |codes: &[&str]| cancelled_error("op", codes, "m".into());
        assert!(matches!(
            error(&["None", "TransactionConflict"]),
            StoreError::WriteConflict(_)
        ));
        assert!(matches!(
            error(&["TransactionConflict", "ThrottlingError"]),
            StoreError::Throttled(_)
        ));
        assert!(matches!(
            error(&["ProvisionedThroughputExceeded", "None"]),
            StoreError::Throttled(_)
        ));
        assert!(matches!(
            error(&["ValidationError", "None"]),
            StoreError::Dynamo(_)
        ));
    }
}
