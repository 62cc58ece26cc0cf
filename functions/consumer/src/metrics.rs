//! What became of a batch's messages, counted and timed, and the CloudWatch metrics made of it.
//!
//! After every batch the runtime writes one log line in CloudWatch's embedded metric format (EMF)
//! to standard output ([`emf_line`]), namespace [`NAMESPACE`], dimension `Consumer` (the
//! consumer's name):
//!
//! | metric | unit | what |
//! | --- | --- | --- |
//! | `Messages` | Count | messages in the batch |
//! | `Handled` | Count | versions the consumer handled (gap fills included) |
//! | `Duplicates` | Count | messages of versions already handled (acknowledged) |
//! | `Filtered` | Count | messages of an entity the consumer does not take (acknowledged) |
//! | `GapsFilled` | Count | missing versions read from the history table and handled |
//! | `GapsSkipped` | Count | missing versions the history table does not hold either |
//! | `Parked` | Count | messages (and filled versions) parked in the dead-letter queue |
//! | `Retried` | Count | messages reported in `batchItemFailures` |
//! | `LagMax` | Milliseconds | now minus the oldest message's `SentTimestamp`: the age of the oldest event |
//! | `BatchDuration` | Milliseconds | how long the batch took |
//!
//! `LagMax` is what the consumer's lag alarm watches; it is left out of a batch whose messages
//! carry no `SentTimestamp` (never a made-up zero).

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

/// The CloudWatch namespace of the consumers' metrics.
///
/// ```
/// assert_eq!(cqrs_consumer::metrics::NAMESPACE, "cqrs-dynamo/consumer");
/// ```
pub const NAMESPACE: &str = "cqrs-dynamo/consumer";

/// What became of the messages of one batch.
///
/// ```
/// let counts = cqrs_consumer::BatchCounts { messages: 2, handled: 1, duplicates: 1, ..Default::default() };
/// assert_eq!(counts.messages, counts.handled + counts.duplicates);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchCounts {
    /// Messages in the batch.
    pub messages: usize,
    /// Versions handled (the handler answered `Ok`), gap fills included.
    pub handled: usize,
    /// Messages of versions already handled.
    pub duplicates: usize,
    /// Messages of entities the consumer does not take.
    pub filtered: usize,
    /// Versions filled from the history table and handled.
    pub gaps_filled: usize,
    /// Missing versions the history table does not hold.
    pub gaps_skipped: usize,
    /// Messages and filled versions parked.
    pub parked: usize,
    /// Messages reported in `batchItemFailures`.
    pub retried: usize,
    /// Now minus the oldest `SentTimestamp`, milliseconds.
    pub lag_max_ms: Option<i64>,
    /// How long the batch took.
    pub duration: Duration,
}

/// The age of the oldest of `sent` at `now`, in milliseconds (never negative); `None` without
/// any time.
///
/// ```
/// use chrono::{TimeZone, Utc};
/// let now = Utc.timestamp_opt(1_767_225_610, 0).unwrap();
/// let sent = [2, 7].map(|s| Utc.timestamp_opt(1_767_225_600 + s, 0).unwrap());
/// assert_eq!(cqrs_consumer::metrics::lag_max(sent.into_iter(), now), Some(8_000));
/// assert_eq!(cqrs_consumer::metrics::lag_max(std::iter::empty(), now), None);
/// ```
pub fn lag_max(sent: impl Iterator<Item = DateTime<Utc>>, now: DateTime<Utc>) -> Option<i64> {
    sent.map(|t| (now - t).num_milliseconds().max(0)).max()
}

/// The EMF line of `counts` for consumer `consumer` at `timestamp_ms` (epoch milliseconds).
///
/// ```
/// let counts = cqrs_consumer::BatchCounts { messages: 3, parked: 1, lag_max_ms: Some(1500), ..Default::default() };
/// let line = cqrs_consumer::metrics::emf_line(&counts, "search", 1_767_225_600_000);
/// let json: serde_json::Value = serde_json::from_str(&line).unwrap();
/// assert_eq!(json["Consumer"], "search");
/// assert_eq!(json["Parked"], 1);
/// assert_eq!(json["LagMax"], 1500);
/// assert_eq!(json["_aws"]["CloudWatchMetrics"][0]["Namespace"], "cqrs-dynamo/consumer");
/// ```
pub fn emf_line(counts: &BatchCounts, consumer: &str, timestamp_ms: i64) -> String {
    let duration_ms = i64::try_from(counts.duration.as_millis()).unwrap_or(i64::MAX);
    let mut values: Vec<(&str, &str, Value)> = vec![
        ("Messages", "Count", counts.messages.into()),
        ("Handled", "Count", counts.handled.into()),
        ("Duplicates", "Count", counts.duplicates.into()),
        ("Filtered", "Count", counts.filtered.into()),
        ("GapsFilled", "Count", counts.gaps_filled.into()),
        ("GapsSkipped", "Count", counts.gaps_skipped.into()),
        ("Parked", "Count", counts.parked.into()),
        ("Retried", "Count", counts.retried.into()),
    ];
    if let Some(lag) = counts.lag_max_ms {
        values.push(("LagMax", "Milliseconds", lag.into()));
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
                "Dimensions": [["Consumer"]],
                "Metrics": definitions
            }]
        }),
    );
    line.insert("Consumer".into(), consumer.into());
    for (name, _, value) in values {
        line.insert(name.into(), value);
    }
    Value::Object(line).to_string()
}

/// Writes the EMF line of `counts` to standard output, inside Lambda only
/// (`AWS_LAMBDA_FUNCTION_NAME` set: outside, no CloudWatch reads it; the batch summary log line
/// carries the same counts everywhere).
///
/// ```
/// cqrs_consumer::metrics::emit(&cqrs_consumer::BatchCounts::default(), "search");
/// ```
pub fn emit(counts: &BatchCounts, consumer: &str) {
    if std::env::var_os("AWS_LAMBDA_FUNCTION_NAME").is_none() {
        return;
    }
    println!(
        "{}",
        emf_line(counts, consumer, Utc::now().timestamp_millis())
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_emf_line_is_exactly_this_json() {
        let counts = BatchCounts {
            messages: 10,
            handled: 7,
            duplicates: 1,
            filtered: 0,
            gaps_filled: 2,
            gaps_skipped: 1,
            parked: 1,
            retried: 1,
            lag_max_ms: Some(2500),
            duration: Duration::from_millis(37),
        };
        let line = emf_line(&counts, "search", 1_767_225_600_000);
        assert_eq!(
            line,
            concat!(
                r#"{"BatchDuration":37,"Consumer":"search","Duplicates":1,"Filtered":0,"#,
                r#""GapsFilled":2,"GapsSkipped":1,"Handled":7,"LagMax":2500,"Messages":10,"#,
                r#""Parked":1,"Retried":1,"#,
                r#""_aws":{"CloudWatchMetrics":[{"Dimensions":[["Consumer"]],"#,
                r#""Metrics":[{"Name":"Messages","Unit":"Count"},{"Name":"Handled","Unit":"Count"},"#,
                r#"{"Name":"Duplicates","Unit":"Count"},{"Name":"Filtered","Unit":"Count"},"#,
                r#"{"Name":"GapsFilled","Unit":"Count"},{"Name":"GapsSkipped","Unit":"Count"},"#,
                r#"{"Name":"Parked","Unit":"Count"},{"Name":"Retried","Unit":"Count"},"#,
                r#"{"Name":"LagMax","Unit":"Milliseconds"},"#,
                r#"{"Name":"BatchDuration","Unit":"Milliseconds"}],"#,
                r#""Namespace":"cqrs-dynamo/consumer"}],"Timestamp":1767225600000}}"#
            )
        );
    }

    #[test]
    fn without_sent_times_lag_is_left_out_and_every_metric_has_its_value() {
        let json: Value = serde_json::from_str(&emf_line(&BatchCounts::default(), "c", 0)).unwrap();
        assert!(json.get("LagMax").is_none());
        for definition in json["_aws"]["CloudWatchMetrics"][0]["Metrics"]
            .as_array()
            .unwrap()
        {
            let name = definition["Name"].as_str().unwrap();
            assert!(json[name].is_number(), "{name}");
        }
    }

    #[test]
    fn lag_is_never_negative() {
        let at = |s: i64| DateTime::from_timestamp(1_767_225_600 + s, 0).unwrap();
        assert_eq!(lag_max([at(105)].into_iter(), at(100)), Some(0));
    }
}
