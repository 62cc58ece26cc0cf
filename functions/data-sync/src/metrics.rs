//! What became of a batch's records, counted and timed, and the CloudWatch metrics made of it.
//!
//! After every batch data-sync writes one log line in CloudWatch's embedded metric format (EMF)
//! to standard output ([`emf_line`]); CloudWatch Logs turns it into metrics in the namespace
//! [`NAMESPACE`], with the dimension `FunctionName` (the Lambda function's name):
//!
//! | metric | unit | what |
//! | --- | --- | --- |
//! | `Records` | Count | records in the batch |
//! | `Items` | Count | distinct items they belong to (one data-table write each) |
//! | `ProjectedRecords` | Count | versions projected (history, data, every target) |
//! | `ParkedRecords` | Count | records parked with their reason ([`cqrs_store::parked`]) |
//! | `RetriedRecords` | Count | records reported in `batchItemFailures` |
//! | `ProjectionLagMax` | Milliseconds | now minus the oldest record's `ApproximateCreationDateTime` |
//! | `ProjectionLagP50` | Milliseconds | the median of the same, over the batch's records |
//! | `BatchDuration` | Milliseconds | how long the batch took in the handler |
//!
//! An alarm on `ParkedRecords > 0` tells an operator that records wait in the parked table; one on
//! `ProjectionLagMax` that the read model falls behind. The lag metrics are left out of a batch
//! without creation times (no record carries one), so they never report a made-up zero.
//! No maintained Rust crate writes EMF for a plain `println!` runtime without pulling in a
//! metrics framework; the format is small and the exact JSON is tested here.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

/// The CloudWatch namespace of data-sync's metrics.
///
/// ```
/// assert_eq!(cqrs_data_sync::metrics::NAMESPACE, "cqrs-dynamo/data-sync");
/// ```
pub const NAMESPACE: &str = "cqrs-dynamo/data-sync";

/// How far behind the command table a batch's records are: now minus each record's
/// `ApproximateCreationDateTime` (DynamoDB gives it to the second), in milliseconds.
///
/// ```
/// use chrono::{TimeZone, Utc};
/// use cqrs_data_sync::metrics::Lag;
/// let now = Utc.timestamp_opt(1_767_225_610, 0).unwrap();
/// let created = [0, 4, 8].map(|s| Utc.timestamp_opt(1_767_225_600 + s, 0).unwrap());
/// let lag = Lag::of(created.into_iter(), now).unwrap();
/// assert_eq!((lag.max_ms, lag.p50_ms), (10_000, 6_000));
/// assert_eq!(Lag::of(std::iter::empty(), now), None);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Lag {
    /// The oldest record's lag.
    pub max_ms: i64,
    /// The median lag (the lower middle of an even count).
    pub p50_ms: i64,
}

impl Lag {
    /// The lag of records created at `created`, seen at `now`; `None` when no record carries a
    /// creation time (a time at or before the Unix epoch counts as none). A record stamped after
    /// `now` (clock skew) counts as 0.
    ///
    /// ```
    /// use chrono::{DateTime, Utc};
    /// let none = cqrs_data_sync::metrics::Lag::of([DateTime::<Utc>::default()].into_iter(), Utc::now());
    /// assert_eq!(none, None);
    /// ```
    pub fn of(created: impl Iterator<Item = DateTime<Utc>>, now: DateTime<Utc>) -> Option<Lag> {
        let mut lags: Vec<i64> = created
            .filter(|t| t.timestamp() > 0)
            .map(|t| (now - t).num_milliseconds().max(0))
            .collect();
        if lags.is_empty() {
            return None;
        }
        lags.sort_unstable();
        let p50 = lags.get((lags.len() - 1) / 2).copied().unwrap_or_default();
        let max = lags.last().copied().unwrap_or_default();
        Some(Lag {
            max_ms: max,
            p50_ms: p50,
        })
    }
}

/// What became of the records of one batch.
///
/// ```
/// let counts = cqrs_data_sync::BatchCounts { records: 3, projected: 1, parked: 1, retried: 1, ..Default::default() };
/// assert_eq!(counts.acknowledged_without_projection(), 1);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchCounts {
    /// Records in the batch.
    pub records: usize,
    /// Distinct items the records belong to.
    pub items: usize,
    /// Versions projected (history, data and every target written).
    pub projected: usize,
    /// Records parked with their reason and acknowledged.
    pub parked: usize,
    /// Records reported in `batchItemFailures` (the first failed record of each item that failed).
    pub retried: usize,
    /// The records' projection lag, when they carry creation times.
    pub lag: Option<Lag>,
    /// How long the handler took for the batch.
    pub duration: Duration,
}

impl BatchCounts {
    /// Records acknowledged although nothing was projected from them: the parked ones.
    ///
    /// ```
    /// assert_eq!(cqrs_data_sync::BatchCounts::default().acknowledged_without_projection(), 0);
    /// ```
    pub fn acknowledged_without_projection(&self) -> usize {
        self.parked
    }
}

/// The EMF log line of `counts` for function `function` at `timestamp_ms` (epoch milliseconds).
///
/// ```
/// let counts = cqrs_data_sync::BatchCounts { records: 5, items: 2, projected: 3, parked: 2, ..Default::default() };
/// let line = cqrs_data_sync::metrics::emf_line(&counts, "cqrs-data-sync", 1_767_225_600_000);
/// let json: serde_json::Value = serde_json::from_str(&line).unwrap();
/// assert_eq!(json["ParkedRecords"], 2);
/// assert_eq!(json["Items"], 2);
/// assert_eq!(json["FunctionName"], "cqrs-data-sync");
/// assert_eq!(json["_aws"]["CloudWatchMetrics"][0]["Namespace"], "cqrs-dynamo/data-sync");
/// ```
pub fn emf_line(counts: &BatchCounts, function: &str, timestamp_ms: i64) -> String {
    let duration_ms = i64::try_from(counts.duration.as_millis()).unwrap_or(i64::MAX);
    let mut values: Vec<(&str, &str, Value)> = vec![
        ("Records", "Count", counts.records.into()),
        ("Items", "Count", counts.items.into()),
        ("ProjectedRecords", "Count", counts.projected.into()),
        ("ParkedRecords", "Count", counts.parked.into()),
        ("RetriedRecords", "Count", counts.retried.into()),
    ];
    if let Some(lag) = counts.lag {
        values.push(("ProjectionLagMax", "Milliseconds", lag.max_ms.into()));
        values.push(("ProjectionLagP50", "Milliseconds", lag.p50_ms.into()));
    }
    values.push(("BatchDuration", "Milliseconds", duration_ms.into()));
    let definitions: Vec<Value> = values
        .iter()
        .map(|(name, unit, _)| json!({"Name": name, "Unit": unit}))
        .collect();
    let mut line = Map::new();
    line.insert(
        "_aws".into(),
        json!({
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": NAMESPACE,
                "Dimensions": [["FunctionName"]],
                "Metrics": definitions
            }]
        }),
    );
    line.insert("FunctionName".into(), function.into());
    for (name, _, value) in values {
        line.insert(name.into(), value);
    }
    Value::Object(line).to_string()
}

/// Writes the EMF line of `counts` to standard output (see the [module docs](self)), named after
/// `AWS_LAMBDA_FUNCTION_NAME`. Outside Lambda (the variable unset, e.g. in tests that call the
/// handler in process) there is no CloudWatch to read it and nothing is written; the batch summary
/// log line carries the same counts everywhere.
///
/// ```
/// cqrs_data_sync::metrics::emit(&cqrs_data_sync::BatchCounts::default()); // outside Lambda: no line
/// ```
pub fn emit(counts: &BatchCounts) {
    let Ok(function) = std::env::var("AWS_LAMBDA_FUNCTION_NAME") else {
        return;
    };
    println!(
        "{}",
        emf_line(counts, &function, chrono::Utc::now().timestamp_millis())
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_emf_line_is_exactly_this_json() {
        let counts = BatchCounts {
            records: 10,
            items: 4,
            projected: 8,
            parked: 1,
            retried: 1,
            lag: Some(Lag {
                max_ms: 2500,
                p50_ms: 1200,
            }),
            duration: Duration::from_millis(37),
        };
        let line = emf_line(&counts, "cqrs-data-sync", 1_767_225_600_000);
        assert_eq!(
            line,
            concat!(
                r#"{"BatchDuration":37,"FunctionName":"cqrs-data-sync","Items":4,"#,
                r#""ParkedRecords":1,"ProjectedRecords":8,"ProjectionLagMax":2500,"#,
                r#""ProjectionLagP50":1200,"Records":10,"RetriedRecords":1,"#,
                r#""_aws":{"CloudWatchMetrics":[{"Dimensions":[["FunctionName"]],"#,
                r#""Metrics":[{"Name":"Records","Unit":"Count"},{"Name":"Items","Unit":"Count"},"#,
                r#"{"Name":"ProjectedRecords","Unit":"Count"},{"Name":"ParkedRecords","Unit":"Count"},"#,
                r#"{"Name":"RetriedRecords","Unit":"Count"},"#,
                r#"{"Name":"ProjectionLagMax","Unit":"Milliseconds"},"#,
                r#"{"Name":"ProjectionLagP50","Unit":"Milliseconds"},"#,
                r#"{"Name":"BatchDuration","Unit":"Milliseconds"}],"#,
                r#""Namespace":"cqrs-dynamo/data-sync"}],"Timestamp":1767225600000}}"#
            )
        );
    }

    #[test]
    fn without_creation_times_the_lag_metrics_are_left_out() {
        let counts = BatchCounts {
            records: 2,
            items: 1,
            projected: 2,
            ..BatchCounts::default()
        };
        let json: Value = serde_json::from_str(&emf_line(&counts, "f", 0)).unwrap();
        let names: Vec<&str> = json["_aws"]["CloudWatchMetrics"][0]["Metrics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["Name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "Records",
                "Items",
                "ProjectedRecords",
                "ParkedRecords",
                "RetriedRecords",
                "BatchDuration"
            ]
        );
        assert!(json.get("ProjectionLagMax").is_none());
        assert_eq!(json["BatchDuration"], 0);
        // Every declared metric has its value beside it (EMF drops the line otherwise).
        for name in names {
            assert!(json[name].is_number(), "{name}");
        }
    }

    #[test]
    fn lag_is_max_and_median_and_never_negative() {
        let at = |s: i64| DateTime::from_timestamp(1_767_225_600 + s, 0).unwrap();
        let now = at(100);
        let lag = Lag::of([at(99), at(40), at(70), at(90)].into_iter(), now).unwrap();
        assert_eq!(
            lag,
            Lag {
                max_ms: 60_000,
                p50_ms: 10_000
            }
        );
        let skewed = Lag::of([at(105)].into_iter(), now).unwrap();
        assert_eq!(
            skewed,
            Lag {
                max_ms: 0,
                p50_ms: 0
            }
        );
    }
}
