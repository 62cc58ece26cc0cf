//! Key spaces the framework writes itself and no entity of a model may take.
//!
//! The change log (data-sync's example sync target) may share the data table
//! (`CHANGE_LOG_TABLE` set to it). Its rows must then never look like an entity's items: the query
//! handler would list them as that entity, and a real item with the same key would never be
//! projected (the log's row holds the key). So the log writes under a partition prefix of its own,
//! [`CHANGE_LOG_PK_PREFIX`], that the entity model's check refuses to any entity
//! ([`RESERVED_PK_PREFIXES`], [`reserved_prefix`]).
//!
//! ```
//! use chrono::{TimeZone, Utc};
//! use cqrs_keys::{change_log_pk, reserved_prefix};
//! let ts = Utc.with_ymd_and_hms(2026, 1, 15, 10, 30, 0).unwrap();
//! let pk = change_log_pk("t1", &ts).unwrap();
//! assert_eq!(pk, "CQRS_CHANGE_LOG#t1#2026-01");
//! assert_eq!(reserved_prefix(&pk), Some("CQRS_CHANGE_LOG"));
//! assert_eq!(reserved_prefix("LOG#t1#2026-01"), None);
//! ```

use chrono::{DateTime, Utc};

use crate::constants::KEY_SEPARATOR;
use crate::error::KeyError;
use crate::time_series::year_month;
use crate::validate::{check_component, check_pk_len, join};

/// The partition prefix of the change log: `CQRS_CHANGE_LOG#<tenant>#<YYYY-MM>`. The tenant stays
/// the second segment, so the tenant rules of every read apply to the log as to any partition.
///
/// ```
/// assert_eq!(cqrs_keys::CHANGE_LOG_PK_PREFIX, "CQRS_CHANGE_LOG");
/// ```
pub const CHANGE_LOG_PK_PREFIX: &str = "CQRS_CHANGE_LOG";

/// Every partition prefix the framework keeps for its own rows: an entity's `pk` template may not
/// start with one of them (the model check refuses it), a command may not write under one, and
/// the query handler serves none of them but the change log's (read entry by entry, each as the
/// reader may see the item it logs): the change log's, and `HEAD` and `HEADS`, the heads
/// (`HEAD#pk@sk`, [`head_key`](crate::head_key)) and the heads state
/// ([`HEADS_STATE_KEY`](crate::HEADS_STATE_KEY)), kept in the idempotency table.
///
/// ```
/// assert!(cqrs_keys::RESERVED_PK_PREFIXES.contains(&cqrs_keys::CHANGE_LOG_PK_PREFIX));
/// assert_eq!(cqrs_keys::reserved_prefix(cqrs_keys::HEADS_STATE_KEY), Some("HEADS"));
/// assert_eq!(cqrs_keys::reserved_prefix(&cqrs_keys::head_key("PRODUCT#t1", "P1")), Some("HEAD"));
/// ```
pub const RESERVED_PK_PREFIXES: &[&str] = &[
    CHANGE_LOG_PK_PREFIX,
    crate::helpers::HEAD_KEY_PREFIX,
    "HEADS",
];

/// The reserved prefix `pk` starts with (its first `#`-separated segment), if any.
///
/// ```
/// assert_eq!(cqrs_keys::reserved_prefix("CQRS_CHANGE_LOG"), Some("CQRS_CHANGE_LOG"));
/// assert_eq!(cqrs_keys::reserved_prefix("CQRS_CHANGE_LOGS#t1"), None);
/// ```
pub fn reserved_prefix(pk: &str) -> Option<&'static str> {
    let first = pk.split(KEY_SEPARATOR).next().unwrap_or_default();
    RESERVED_PK_PREFIXES.iter().copied().find(|p| *p == first)
}

/// The change log's partition of `tenant` for the month of `ts`:
/// `CQRS_CHANGE_LOG#<tenant>#<YYYY-MM>`.
///
/// ```
/// use chrono::{TimeZone, Utc};
/// let ts = Utc.with_ymd_and_hms(2024, 1, 15, 10, 30, 0).unwrap();
/// assert_eq!(cqrs_keys::change_log_pk("t1", &ts).unwrap(), "CQRS_CHANGE_LOG#t1#2024-01");
/// assert!(cqrs_keys::change_log_pk("t#1", &ts).is_err());
/// ```
pub fn change_log_pk(tenant: &str, ts: &DateTime<Utc>) -> Result<String, KeyError> {
    check_component(&"tenant", tenant)?;
    let pk = join(&[CHANGE_LOG_PK_PREFIX, tenant, &year_month(ts)?]);
    check_pk_len(&pk)?;
    Ok(pk)
}

/// The change log's partition of `tenant` for the month `YYYY-MM`, the same key as
/// [`change_log_pk`] for any time in that month: the partition an entry written under the legacy
/// `LOG#<tenant>#<YYYY-MM>` moves to.
///
/// ```
/// assert_eq!(cqrs_keys::change_log_month_pk("t1", "2024-01").unwrap(), "CQRS_CHANGE_LOG#t1#2024-01");
/// assert!(cqrs_keys::change_log_month_pk("t1", "2024-1").is_err());
/// assert!(cqrs_keys::change_log_month_pk("t#1", "2024-01").is_err());
/// ```
pub fn change_log_month_pk(tenant: &str, month: &str) -> Result<String, KeyError> {
    // A legacy partition key of the same tenant and month reads the parts back checked.
    let legacy = join(&[crate::LOG_PK_PREFIX, tenant, month]);
    let (tenant, month) = crate::parse_time_series_pk(&legacy)?;
    let pk = join(&[CHANGE_LOG_PK_PREFIX, tenant, month]);
    check_pk_len(&pk)?;
    Ok(pk)
}
