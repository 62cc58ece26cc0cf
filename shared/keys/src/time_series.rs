//! Time-series keys: `LOG#tenant#YYYY-MM` partition keys and
//! `timestamp#event` sort keys, from UTC timestamps.
//!
//! Timestamps are written as RFC 3339 with exactly three fractional digits
//! and `Z` (`2024-01-15T10:30:00.000Z`, what JavaScript's `toISOString`
//! gives), so that their string order is their time order. Sub-millisecond
//! precision is dropped; years must be 0000 to 9999 (four digits).
//!
//! ```
//! use chrono::{TimeZone, Utc};
//! use cqrs_keys::time_series::{time_series_pk, time_series_sk};
//! let ts = Utc.with_ymd_and_hms(2024, 1, 15, 10, 30, 0).unwrap();
//! assert_eq!(time_series_pk("t1", &ts).unwrap(), "LOG#t1#2024-01");
//! assert_eq!(time_series_sk(&ts, "e1").unwrap(), "2024-01-15T10:30:00.000Z#e1");
//! ```

use chrono::{DateTime, Datelike, NaiveDateTime, Timelike, Utc};

use crate::constants::KEY_SEPARATOR;
use crate::error::KeyError;
use crate::validate::{check_component, check_pk_len, check_sk_len, join};

/// Prefix of time-series partition keys.
///
/// ```
/// assert_eq!(cqrs_keys::LOG_PK_PREFIX, "LOG");
/// ```
pub const LOG_PK_PREFIX: &str = "LOG";

const TIMESTAMP_FORMAT: &str = "%Y-%m-%dT%H:%M:%S%.3fZ";

/// `ts` with its sub-millisecond part dropped: what a key stores.
///
/// ```
/// use chrono::{TimeZone, Utc};
/// use cqrs_keys::truncate_to_millis;
///
/// let ts = Utc.timestamp_opt(1_705_314_600, 123_456_789).unwrap();
/// assert_eq!(truncate_to_millis(&ts), Utc.timestamp_opt(1_705_314_600, 123_000_000).unwrap());
/// ```
pub fn truncate_to_millis(ts: &DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ts.timestamp_millis()).unwrap_or(*ts)
}

/// Writes a timestamp as `YYYY-MM-DDTHH:MM:SS.mmmZ` (sortable RFC 3339).
///
/// ```
/// use chrono::{TimeZone, Utc};
/// use cqrs_keys::format_timestamp;
///
/// let ts = Utc.with_ymd_and_hms(2024, 1, 15, 10, 30, 0).unwrap();
/// assert_eq!(format_timestamp(&ts).unwrap(), "2024-01-15T10:30:00.000Z");
/// ```
pub fn format_timestamp(ts: &DateTime<Utc>) -> Result<String, KeyError> {
    check_year(ts)?;
    Ok(truncate_to_millis(ts).format(TIMESTAMP_FORMAT).to_string())
}

/// Reads a timestamp written by [`format_timestamp`]; refuses any other form
/// (offsets, other precisions, lower-case `t`/`z`).
///
/// ```
/// use chrono::{TimeZone, Utc};
/// use cqrs_keys::parse_timestamp;
///
/// let ts = Utc.with_ymd_and_hms(2024, 1, 15, 10, 30, 0).unwrap();
/// assert_eq!(parse_timestamp("2024-01-15T10:30:00.000Z").unwrap(), ts);
/// assert!(parse_timestamp("2024-01-15T10:30:00Z").is_err());
/// ```
pub fn parse_timestamp(s: &str) -> Result<DateTime<Utc>, KeyError> {
    let invalid = || KeyError::InvalidTimestamp { value: s.into() };
    let naive = NaiveDateTime::parse_from_str(s, TIMESTAMP_FORMAT).map_err(|_| invalid())?;
    let ts = naive.and_utc();
    // Canonical form only: the same text must come back out.
    if ts.nanosecond() >= 1_000_000_000 || format_timestamp(&ts).ok().as_deref() != Some(s) {
        return Err(invalid());
    }
    Ok(ts)
}

/// The `YYYY-MM` of a timestamp.
///
/// ```
/// use chrono::{TimeZone, Utc};
/// use cqrs_keys::year_month;
///
/// let ts = Utc.with_ymd_and_hms(2024, 1, 15, 10, 30, 0).unwrap();
/// assert_eq!(year_month(&ts).unwrap(), "2024-01");
/// ```
pub fn year_month(ts: &DateTime<Utc>) -> Result<String, KeyError> {
    check_year(ts)?;
    Ok(format!("{:04}-{:02}", ts.year(), ts.month()))
}

/// `LOG#tenant#YYYY-MM`: one partition per tenant and month.
///
/// ```
/// use chrono::{TimeZone, Utc};
/// use cqrs_keys::time_series_pk;
///
/// let ts = Utc.with_ymd_and_hms(2024, 1, 15, 10, 30, 0).unwrap();
/// assert_eq!(time_series_pk("tenant001", &ts).unwrap(), "LOG#tenant001#2024-01");
/// ```
pub fn time_series_pk(tenant: &str, ts: &DateTime<Utc>) -> Result<String, KeyError> {
    check_component(&"tenant", tenant)?;
    let pk = join(&[LOG_PK_PREFIX, tenant, &year_month(ts)?]);
    check_pk_len(&pk)?;
    Ok(pk)
}

/// `timestamp#event`: sorted by time within the month's partition.
///
/// ```
/// use chrono::{TimeZone, Utc};
/// use cqrs_keys::time_series_sk;
///
/// let ts = Utc.with_ymd_and_hms(2024, 1, 15, 10, 30, 0).unwrap();
/// assert_eq!(time_series_sk(&ts, "evt001").unwrap(), "2024-01-15T10:30:00.000Z#evt001");
/// ```
pub fn time_series_sk(ts: &DateTime<Utc>, event_id: &str) -> Result<String, KeyError> {
    check_component(&"event id", event_id)?;
    let sk = join(&[&format_timestamp(ts)?, event_id]);
    check_sk_len(&sk)?;
    Ok(sk)
}

/// Splits `LOG#tenant#YYYY-MM` into the tenant and the year-month.
///
/// ```
/// use cqrs_keys::parse_time_series_pk;
///
/// assert_eq!(parse_time_series_pk("LOG#tenant001#2024-01").unwrap(), ("tenant001", "2024-01"));
/// assert!(parse_time_series_pk("LOG#tenant001#2024-13").is_err());
/// ```
pub fn parse_time_series_pk(pk: &str) -> Result<(&str, &str), KeyError> {
    let parts: Vec<&str> = pk.split(KEY_SEPARATOR).collect();
    let [prefix, tenant, ym] = parts[..] else {
        return Err(KeyError::Malformed {
            key: pk.into(),
            expected: "LOG#tenant#YYYY-MM".into(),
        });
    };
    if prefix != LOG_PK_PREFIX {
        return Err(KeyError::WrongPrefix {
            expected: LOG_PK_PREFIX.into(),
            found: prefix.into(),
        });
    }
    check_component(&"tenant", tenant)?;
    if !is_year_month(ym) {
        return Err(KeyError::Malformed {
            key: ym.into(),
            expected: "a year-month YYYY-MM".into(),
        });
    }
    Ok((tenant, ym))
}

/// Splits `timestamp#event` into the timestamp and the event id.
///
/// ```
/// use chrono::{TimeZone, Utc};
/// use cqrs_keys::parse_time_series_sk;
///
/// let (ts, event) = parse_time_series_sk("2024-01-15T10:30:00.000Z#evt001").unwrap();
/// assert_eq!(ts, Utc.with_ymd_and_hms(2024, 1, 15, 10, 30, 0).unwrap());
/// assert_eq!(event, "evt001");
/// ```
pub fn parse_time_series_sk(sk: &str) -> Result<(DateTime<Utc>, &str), KeyError> {
    let Some((ts, event)) = sk.split_once(KEY_SEPARATOR) else {
        return Err(KeyError::Malformed {
            key: sk.into(),
            expected: "timestamp#event".into(),
        });
    };
    let ts = parse_timestamp(ts)?;
    check_component(&"event id", event)?;
    Ok((ts, event))
}

/// Time bucket granularity for [`time_bucket`].
///
/// ```
/// use cqrs_keys::Granularity;
///
/// assert_ne!(Granularity::Day, Granularity::Month);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Granularity {
    /// `YYYY-MM-DD-HH`.
    Hour,
    /// `YYYY-MM-DD`.
    Day,
    /// `YYYY-MM`.
    Month,
}

/// The UTC time bucket of a timestamp (ddb-lib's `timeSeriesKey`): a sortable
/// key component for hourly, daily or monthly partitions.
///
/// ```
/// use chrono::{TimeZone, Utc};
/// use cqrs_keys::{time_bucket, Granularity};
///
/// let ts = Utc.with_ymd_and_hms(2024, 12, 2, 15, 30, 45).unwrap();
/// assert_eq!(time_bucket(&ts, Granularity::Hour).unwrap(), "2024-12-02-15");
/// assert_eq!(time_bucket(&ts, Granularity::Day).unwrap(), "2024-12-02");
/// assert_eq!(time_bucket(&ts, Granularity::Month).unwrap(), "2024-12");
/// ```
pub fn time_bucket(ts: &DateTime<Utc>, granularity: Granularity) -> Result<String, KeyError> {
    check_year(ts)?;
    let (y, m, d, h) = (ts.year(), ts.month(), ts.day(), ts.hour());
    Ok(match granularity {
        Granularity::Hour => format!("{y:04}-{m:02}-{d:02}-{h:02}"),
        Granularity::Day => format!("{y:04}-{m:02}-{d:02}"),
        Granularity::Month => format!("{y:04}-{m:02}"),
    })
}

fn check_year(ts: &DateTime<Utc>) -> Result<(), KeyError> {
    if (0..=9999).contains(&ts.year()) {
        Ok(())
    } else {
        Err(KeyError::InvalidTimestamp {
            value: ts.to_rfc3339(),
        })
    }
}

fn is_year_month(s: &str) -> bool {
    let &[y1, y2, y3, y4, b'-', m1, m2] = s.as_bytes() else {
        return false;
    };
    if ![y1, y2, y3, y4, m1, m2].iter().all(u8::is_ascii_digit) {
        return false;
    }
    let month = u32::from(m1 - b'0') * 10 + u32::from(m2 - b'0');
    (1..=12).contains(&month)
}
