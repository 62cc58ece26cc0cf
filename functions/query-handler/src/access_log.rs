//! The read access log: one JSON line per sampled request on stdout, naming the table or index and
//! the partition it read, so that the operator CLI's `cqrs report --access-log` can compute read
//! heat per partition from the function log (locally) or a CloudWatch Logs Insights export (AWS):
//!
//! ```text
//! {"cqrsAccess":1,"ms":1767225600123,"table":"data","index":null,"pk":"ORDER#t1","op":"query","items":3,"sampleRate":0.01}
//! ```
//!
//! The sample rate comes from `ACCESS_LOG_SAMPLE_RATE` (a fraction, 0 to 1; `0` turns the log off,
//! `1` logs every request); without it, [`DEFAULT_SAMPLE_RATE`]. Each line carries its rate, so
//! the report counts it as `1 / rate` requests.

use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

/// The environment variable that sets the sample rate.
///
/// ```
/// assert_eq!(cqrs_query_handler::access_log::SAMPLE_RATE_VAR, "ACCESS_LOG_SAMPLE_RATE");
/// ```
pub const SAMPLE_RATE_VAR: &str = "ACCESS_LOG_SAMPLE_RATE";

/// The sample rate when [`SAMPLE_RATE_VAR`] is not set: one request in a hundred.
///
/// ```
/// assert_eq!(cqrs_query_handler::access_log::DEFAULT_SAMPLE_RATE, 0.01);
/// ```
pub const DEFAULT_SAMPLE_RATE: f64 = 0.01;

static RATE: OnceLock<f64> = OnceLock::new();

/// Reads a sample rate: a number from 0 to 1.
///
/// ```
/// use cqrs_query_handler::access_log::parse_sample_rate;
/// assert_eq!(parse_sample_rate("0.25"), Ok(0.25));
/// assert!(parse_sample_rate("2").is_err());
/// assert!(parse_sample_rate("often").is_err());
/// ```
pub fn parse_sample_rate(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(rate) if (0.0..=1.0).contains(&rate) => Ok(rate),
        _ => Err(format!(
            "{SAMPLE_RATE_VAR}={text:?}: give a fraction from 0 (off) to 1 (every request)"
        )),
    }
}

/// Reads [`SAMPLE_RATE_VAR`] once, at start: an invalid value stops the function with a message
/// naming the variable. Returns the rate in force.
///
/// ```
/// let rate = cqrs_query_handler::access_log::init_from_env().unwrap();
/// assert!((0.0..=1.0).contains(&rate));
/// ```
pub fn init_from_env() -> Result<f64, String> {
    let rate = match std::env::var(SAMPLE_RATE_VAR) {
        Ok(text) => parse_sample_rate(&text)?,
        Err(_) => DEFAULT_SAMPLE_RATE,
    };
    Ok(*RATE.get_or_init(|| rate))
}

fn rate() -> f64 {
    *RATE.get_or_init(|| {
        std::env::var(SAMPLE_RATE_VAR)
            .ok()
            .and_then(|t| parse_sample_rate(&t).ok())
            .unwrap_or(DEFAULT_SAMPLE_RATE)
    })
}

/// One access line.
///
/// ```
/// let line = cqrs_query_handler::access_log::AccessLine {
///     ms: 1_767_225_600_123, table: "data", index: None, pk: "ORDER#t1", op: "query", items: 3,
///     sample_rate: 0.5,
/// };
/// assert_eq!(
///     line.to_json(),
///     r#"{"cqrsAccess":1,"ms":1767225600123,"table":"data","index":null,"pk":"ORDER#t1","op":"query","items":3,"sampleRate":0.5}"#
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AccessLine<'a> {
    /// When (Unix milliseconds).
    pub ms: i64,
    /// `data`, `history` or `command`.
    pub table: &'a str,
    /// The index read, if any.
    pub index: Option<&'a str>,
    /// The partition read (of the table, or of the index).
    pub pk: &'a str,
    /// `get` or `query`.
    pub op: &'a str,
    /// Items answered.
    pub items: usize,
    /// The sample rate this line was written under.
    pub sample_rate: f64,
}

#[derive(Serialize)]
struct Wire<'a> {
    #[serde(rename = "cqrsAccess")]
    marker: u8,
    ms: i64,
    table: &'a str,
    index: Option<&'a str>,
    pk: &'a str,
    op: &'a str,
    items: usize,
    #[serde(rename = "sampleRate")]
    sample_rate: f64,
}

impl AccessLine<'_> {
    /// The line as the log holds it.
    pub fn to_json(&self) -> String {
        serde_json::to_string(&Wire {
            marker: 1,
            ms: self.ms,
            table: self.table,
            index: self.index,
            pk: self.pk,
            op: self.op,
            items: self.items,
            sample_rate: self.sample_rate,
        })
        .unwrap_or_default()
    }
}

/// Whether this request is in the sample: a pseudo-random draw against the rate.
fn sampled(rate: f64) -> bool {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    if rate <= 0.0 {
        return false;
    }
    if rate >= 1.0 {
        return true;
    }
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    (hasher.finish() as f64) < rate * u64::MAX as f64
}

/// Logs one read of a request, when the request is in the sample.
pub(crate) fn record(table: &str, index: Option<&str>, pk: &str, op: &str, items: usize) {
    let rate = rate();
    if !sampled(rate) {
        return;
    }
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default();
    let line = AccessLine {
        ms,
        table,
        index,
        pk,
        op,
        items,
        sample_rate: rate,
    };
    println!("{}", line.to_json());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sample_follows_the_rate() {
        assert!(!sampled(0.0));
        assert!(sampled(1.0));
        let hits = (0..20_000).filter(|_| sampled(0.1)).count();
        assert!((1_500..2_500).contains(&hits), "{hits} of 20000 at 0.1");
    }
}
