//! What became of a batch's records, counted, and the CloudWatch metrics made of the counts.
//!
//! When a batch parked or reported records, data-sync writes one log line in CloudWatch's
//! embedded metric format (EMF) to standard output; CloudWatch Logs turns it into the metrics
//! `ParkedRecords` and `RetriedRecords` (unit `Count`) in the namespace [`NAMESPACE`], with the
//! dimension `FunctionName` (the Lambda function's name). An alarm on `ParkedRecords > 0` tells an
//! operator that records wait in the parked table. Batches where every record was projected write
//! no metric line (a missing data point is "nothing parked").

use serde_json::json;

/// The CloudWatch namespace of data-sync's metrics.
///
/// ```
/// assert_eq!(data_sync::metrics::NAMESPACE, "cqrs-dynamo/data-sync");
/// ```
pub const NAMESPACE: &str = "cqrs-dynamo/data-sync";

/// What became of the records of one batch.
///
/// ```
/// let counts = data_sync::BatchCounts { records: 3, projected: 1, parked: 1, retried: 1 };
/// assert_eq!(counts.acknowledged_without_projection(), 1);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchCounts {
    /// Records in the batch.
    pub records: usize,
    /// Versions projected (history, data and every target written).
    pub projected: usize,
    /// Records parked with their reason and acknowledged.
    pub parked: usize,
    /// Records reported in `batchItemFailures` (the first failed record of each item that failed).
    pub retried: usize,
}

impl BatchCounts {
    /// Records acknowledged although nothing was projected from them: the parked ones.
    ///
    /// ```
    /// assert_eq!(data_sync::BatchCounts::default().acknowledged_without_projection(), 0);
    /// ```
    pub fn acknowledged_without_projection(&self) -> usize {
        self.parked
    }
}

/// The EMF log line of `counts` for function `function` at `timestamp_ms` (epoch milliseconds),
/// or `None` when nothing was parked or reported.
///
/// ```
/// let counts = data_sync::BatchCounts { records: 5, projected: 3, parked: 2, retried: 0 };
/// let line = data_sync::metrics::emf_line(&counts, "cqrs-data-sync", 1_767_225_600_000).unwrap();
/// let json: serde_json::Value = serde_json::from_str(&line).unwrap();
/// assert_eq!(json["ParkedRecords"], 2);
/// assert_eq!(json["FunctionName"], "cqrs-data-sync");
/// assert_eq!(json["_aws"]["CloudWatchMetrics"][0]["Namespace"], "cqrs-dynamo/data-sync");
/// assert!(data_sync::metrics::emf_line(&Default::default(), "f", 0).is_none());
/// ```
pub fn emf_line(counts: &BatchCounts, function: &str, timestamp_ms: i64) -> Option<String> {
    if counts.parked == 0 && counts.retried == 0 {
        return None;
    }
    let line = json!({
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": NAMESPACE,
                "Dimensions": [["FunctionName"]],
                "Metrics": [
                    {"Name": "ParkedRecords", "Unit": "Count"},
                    {"Name": "RetriedRecords", "Unit": "Count"}
                ]
            }]
        },
        "FunctionName": function,
        "ParkedRecords": counts.parked,
        "RetriedRecords": counts.retried,
        "Records": counts.records,
    });
    Some(line.to_string())
}

/// Writes the EMF line of `counts` to standard output (see the [module docs](self)), named after
/// `AWS_LAMBDA_FUNCTION_NAME`. Outside Lambda (the variable unset, e.g. in tests that call the
/// handler in process) there is no CloudWatch to read it and nothing is written; the batch summary
/// log line carries the same counts everywhere.
///
/// ```
/// data_sync::metrics::emit(&data_sync::BatchCounts::default()); // nothing to report: no line
/// ```
pub fn emit(counts: &BatchCounts) {
    let Ok(function) = std::env::var("AWS_LAMBDA_FUNCTION_NAME") else {
        return;
    };
    if let Some(line) = emf_line(counts, &function, chrono::Utc::now().timestamp_millis()) {
        println!("{line}");
    }
}
