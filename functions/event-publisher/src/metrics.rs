//! What became of a batch, counted and timed, and the CloudWatch EMF line made of it.
//!
//! After every batch the publisher writes one log line in CloudWatch's embedded metric format to
//! standard output ([`emf_line`]), namespace [`NAMESPACE`], dimension `FunctionName`:
//!
//! | metric | unit | what |
//! | --- | --- | --- |
//! | `Records` | Count | stream records in the batch |
//! | `Events` | Count | events published (entries SNS accepted) |
//! | `Filled` | Count | events of versions read from the history table (collapsed by data-sync) |
//! | `Parked` | Count | parked entries (reason kind `event-feed`): records that never make their events, events the topic refused for good |
//! | `Retried` | Count | records reported in `batchItemFailures` |
//! | `PublishLagMax` | Milliseconds | now minus the oldest record's `ApproximateCreationDateTime` |
//! | `BatchDuration` | Milliseconds | how long the batch took in the handler |
//!
//! `PublishLagMax` is left out of a batch whose records carry no creation time.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

/// The CloudWatch namespace of the publisher's metrics.
///
/// ```
/// assert_eq!(cqrs_event_publisher::metrics::NAMESPACE, "cqrs-dynamo/event-publisher");
/// ```
pub const NAMESPACE: &str = "cqrs-dynamo/event-publisher";

/// What became of the records of one batch.
///
/// ```
/// let counts = cqrs_event_publisher::BatchCounts { records: 3, events: 5, filled: 2, ..Default::default() };
/// assert_eq!(counts.events - counts.filled, 3);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchCounts {
    /// Records in the batch.
    pub records: usize,
    /// Events published.
    pub events: usize,
    /// Published events of versions read from the history table.
    pub filled: usize,
    /// Published events sent as reference events (too big for SNS).
    pub references: usize,
    /// Entries parked: records that never make their events, and events the topic refused for
    /// good (one entry per refused event).
    pub parked: usize,
    /// Records reported in `batchItemFailures`.
    pub retried: usize,
    /// Now minus the oldest record's creation time, when a record carries one.
    pub lag_max_ms: Option<i64>,
    /// How long the handler took.
    pub duration: Duration,
}

/// Now minus the oldest of `created` in milliseconds (never negative); `None` when no time is
/// after the Unix epoch (records without `ApproximateCreationDateTime`).
///
/// ```
/// use chrono::{TimeZone, Utc};
/// let now = Utc.timestamp_opt(1_767_225_610, 0).unwrap();
/// let created = [0, 4].map(|s| Utc.timestamp_opt(1_767_225_600 + s, 0).unwrap());
/// assert_eq!(cqrs_event_publisher::metrics::lag_max(created.into_iter(), now), Some(10_000));
/// assert_eq!(cqrs_event_publisher::metrics::lag_max(std::iter::empty(), now), None);
/// ```
pub fn lag_max(created: impl Iterator<Item = DateTime<Utc>>, now: DateTime<Utc>) -> Option<i64> {
    created
        .filter(|t| t.timestamp() > 0)
        .map(|t| (now - t).num_milliseconds().max(0))
        .max()
}

/// The EMF line of `counts` for function `function` at `timestamp_ms` (epoch milliseconds).
///
/// ```
/// let counts = cqrs_event_publisher::BatchCounts { records: 5, events: 7, parked: 1, ..Default::default() };
/// let line = cqrs_event_publisher::metrics::emf_line(&counts, "shop-event-publisher", 0);
/// let json: serde_json::Value = serde_json::from_str(&line).unwrap();
/// assert_eq!(json["Events"], 7);
/// assert_eq!(json["_aws"]["CloudWatchMetrics"][0]["Namespace"], "cqrs-dynamo/event-publisher");
/// ```
pub fn emf_line(counts: &BatchCounts, function: &str, timestamp_ms: i64) -> String {
    let duration_ms = i64::try_from(counts.duration.as_millis()).unwrap_or(i64::MAX);
    let mut values: Vec<(&str, &str, Value)> = vec![
        ("Records", "Count", counts.records.into()),
        ("Events", "Count", counts.events.into()),
        ("Filled", "Count", counts.filled.into()),
        ("Parked", "Count", counts.parked.into()),
        ("Retried", "Count", counts.retried.into()),
    ];
    if let Some(lag) = counts.lag_max_ms {
        values.push(("PublishLagMax", "Milliseconds", lag.into()));
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

/// Writes the EMF line of `counts` to standard output, named after `AWS_LAMBDA_FUNCTION_NAME`;
/// outside Lambda (the variable unset) nothing is written.
///
/// ```
/// cqrs_event_publisher::metrics::emit(&cqrs_event_publisher::BatchCounts::default());
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
            events: 14,
            filled: 4,
            references: 0,
            parked: 1,
            retried: 2,
            lag_max_ms: Some(2500),
            duration: Duration::from_millis(37),
        };
        assert_eq!(
            emf_line(&counts, "shop-event-publisher", 1_767_225_600_000),
            concat!(
                r#"{"BatchDuration":37,"Events":14,"Filled":4,"FunctionName":"shop-event-publisher","#,
                r#""Parked":1,"PublishLagMax":2500,"Records":10,"Retried":2,"#,
                r#""_aws":{"CloudWatchMetrics":[{"Dimensions":[["FunctionName"]],"#,
                r#""Metrics":[{"Name":"Records","Unit":"Count"},{"Name":"Events","Unit":"Count"},"#,
                r#"{"Name":"Filled","Unit":"Count"},{"Name":"Parked","Unit":"Count"},"#,
                r#"{"Name":"Retried","Unit":"Count"},"#,
                r#"{"Name":"PublishLagMax","Unit":"Milliseconds"},"#,
                r#"{"Name":"BatchDuration","Unit":"Milliseconds"}],"#,
                r#""Namespace":"cqrs-dynamo/event-publisher"}],"Timestamp":1767225600000}}"#
            )
        );
    }

    #[test]
    fn without_creation_times_the_lag_is_left_out() {
        let json: Value = serde_json::from_str(&emf_line(&BatchCounts::default(), "f", 0)).unwrap();
        assert!(json.get("PublishLagMax").is_none());
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
                "Events",
                "Filled",
                "Parked",
                "Retried",
                "BatchDuration"
            ]
        );
    }
}
