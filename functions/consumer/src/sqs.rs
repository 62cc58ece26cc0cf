//! The SQS event Lambda delivers to a consumer and the partial-batch answer it expects, as plain
//! serde structs (only the fields the runtime reads; `aws_lambda_events`' `sqs` feature is not
//! used: it pulls in a tree of crates for these few fields).
//!
//! ```
//! let event: cqrs_consumer::sqs::SqsEvent = serde_json::from_str(r#"{"Records":[{
//!     "messageId": "m1", "receiptHandle": "r", "body": "{}",
//!     "attributes": {"ApproximateReceiveCount": "2", "SentTimestamp": "1767225600000",
//!                    "MessageGroupId": "g1", "MessageDeduplicationId": "d1"},
//!     "messageAttributes": {"tenant": {"stringValue": "t1", "dataType": "String"}},
//!     "eventSourceARN": "arn:aws:sqs:eu-west-1:1:q.fifo"}]}"#).unwrap();
//! let message = &event.records[0];
//! assert_eq!(message.attempt(), 2);
//! assert_eq!(message.attributes.message_group_id.as_deref(), Some("g1"));
//! assert_eq!(message.string_attribute("tenant"), Some("t1"));
//! let answer = cqrs_consumer::sqs::BatchResponse::failing(["m1".to_string()]);
//! assert_eq!(serde_json::to_string(&answer).unwrap(),
//!            r#"{"batchItemFailures":[{"itemIdentifier":"m1"}]}"#);
//! ```

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// One invocation's batch of SQS messages (a FIFO queue: at most 10, in order per group).
///
/// ```
/// let event: cqrs_consumer::sqs::SqsEvent = serde_json::from_str(r#"{"Records":[]}"#).unwrap();
/// assert!(event.records.is_empty());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SqsEvent {
    /// The messages, in the queue's order.
    #[serde(rename = "Records", default)]
    pub records: Vec<SqsMessage>,
}

/// One SQS message as Lambda hands it over.
///
/// ```
/// let message = cqrs_consumer::sqs::SqsMessage { message_id: "m1".into(), ..Default::default() };
/// assert_eq!(message.attempt(), 1, "no receive count: the first attempt");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SqsMessage {
    /// The id `batchItemFailures` names.
    #[serde(default)]
    pub message_id: String,
    /// The receipt handle (unused: Lambda deletes what the answer does not name).
    #[serde(default)]
    pub receipt_handle: String,
    /// The body: with raw delivery from SNS, the change event's JSON itself.
    #[serde(default)]
    pub body: String,
    /// The system attributes.
    #[serde(default)]
    pub attributes: SqsAttributes,
    /// The message attributes (`type`, `tenant`, `entity`; `cqrs-*` on a redriven message).
    #[serde(default)]
    pub message_attributes: HashMap<String, MessageAttribute>,
    /// The queue's ARN.
    #[serde(rename = "eventSourceARN", default)]
    pub event_source_arn: String,
}

impl SqsMessage {
    /// Which delivery this is: `ApproximateReceiveCount` (1 when absent or unreadable).
    ///
    /// ```
    /// let mut message = cqrs_consumer::sqs::SqsMessage::default();
    /// message.attributes.approximate_receive_count = Some("3".into());
    /// assert_eq!(message.attempt(), 3);
    /// ```
    pub fn attempt(&self) -> u32 {
        self.attributes
            .approximate_receive_count
            .as_deref()
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(1)
            .max(1)
    }

    /// When SQS received the message (`SentTimestamp`, epoch milliseconds), if given.
    ///
    /// ```
    /// let mut message = cqrs_consumer::sqs::SqsMessage::default();
    /// message.attributes.sent_timestamp = Some("1767225600000".into());
    /// assert_eq!(message.sent().unwrap().timestamp(), 1_767_225_600);
    /// ```
    pub fn sent(&self) -> Option<DateTime<Utc>> {
        self.attributes
            .sent_timestamp
            .as_deref()
            .and_then(|t| t.trim().parse::<i64>().ok())
            .and_then(DateTime::from_timestamp_millis)
    }

    /// The string value of message attribute `name`, if any.
    ///
    /// ```
    /// let message: cqrs_consumer::sqs::SqsMessage = serde_json::from_str(
    ///     r#"{"messageId":"m","messageAttributes":{"entity":{"stringValue":"product","dataType":"String"}}}"#,
    /// ).unwrap();
    /// assert_eq!(message.string_attribute("entity"), Some("product"));
    /// assert_eq!(message.string_attribute("tenant"), None);
    /// ```
    pub fn string_attribute(&self, name: &str) -> Option<&str> {
        self.message_attributes
            .get(name)
            .and_then(|a| a.string_value.as_deref())
    }
}

/// The system attributes of a message the runtime reads.
///
/// ```
/// let a = cqrs_consumer::sqs::SqsAttributes::default();
/// assert!(a.message_group_id.is_none());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct SqsAttributes {
    /// How many times the message was received, this time included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approximate_receive_count: Option<String>,
    /// When the queue received it, epoch milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_timestamp: Option<String>,
    /// The message group (the item's member token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_group_id: Option<String>,
    /// The dedup id (the event id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_deduplication_id: Option<String>,
}

/// A message attribute.
///
/// ```
/// let a: cqrs_consumer::sqs::MessageAttribute =
///     serde_json::from_str(r#"{"stringValue":"t1","dataType":"String"}"#).unwrap();
/// assert_eq!(a.string_value.as_deref(), Some("t1"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageAttribute {
    /// A `String` or `Number` attribute's value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub string_value: Option<String>,
    /// `String`, `Number` or `Binary`.
    #[serde(default)]
    pub data_type: String,
}

/// The partial-batch answer (`ReportBatchItemFailures`): the messages Lambda must not delete.
///
/// ```
/// let answer = cqrs_consumer::sqs::BatchResponse::default();
/// assert_eq!(serde_json::to_string(&answer).unwrap(), r#"{"batchItemFailures":[]}"#);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BatchResponse {
    /// The failed messages.
    pub batch_item_failures: Vec<BatchItemFailure>,
}

impl BatchResponse {
    /// The answer naming `ids`.
    ///
    /// ```
    /// let answer = cqrs_consumer::sqs::BatchResponse::failing(["a".to_string(), "b".to_string()]);
    /// assert_eq!(answer.ids(), ["a", "b"]);
    /// ```
    pub fn failing(ids: impl IntoIterator<Item = String>) -> Self {
        BatchResponse {
            batch_item_failures: ids
                .into_iter()
                .map(|item_identifier| BatchItemFailure { item_identifier })
                .collect(),
        }
    }

    /// The message ids named.
    ///
    /// ```
    /// assert!(cqrs_consumer::sqs::BatchResponse::default().ids().is_empty());
    /// ```
    pub fn ids(&self) -> Vec<&str> {
        self.batch_item_failures
            .iter()
            .map(|f| f.item_identifier.as_str())
            .collect()
    }
}

/// One failed message of [`BatchResponse`].
///
/// ```
/// let f = cqrs_consumer::sqs::BatchItemFailure { item_identifier: "m1".into() };
/// assert_eq!(serde_json::to_value(&f).unwrap()["itemIdentifier"], "m1");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BatchItemFailure {
    /// The message id.
    pub item_identifier: String,
}
