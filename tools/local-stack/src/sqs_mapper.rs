//! The local stand-in for Lambda's SQS event source mapping, for a consumer's FIFO queue (on moto's
//! server, [`crate::moto`]): receive a batch, invoke the consumer with the SQS event Lambda sends,
//! and settle the answer the way Lambda does with `ReportBatchItemFailures`:
//!
//! - the messages the answer does not report are deleted: they are done;
//! - the messages it reports stay in the queue, and come back once their visibility timeout passed
//!   (a FIFO queue holds their message group meanwhile, so the group's later messages wait: order
//!   per group holds);
//! - a failed invocation (the function errored, or its answer is not a batch answer) deletes
//!   nothing: the whole batch comes back;
//! - a message received more often than the queue's `maxReceiveCount` moves to its dead-letter
//!   queue (the queue's redrive policy does it, not the mapping).
//!
//! moto's FIFO queue (5.2.5) answers a group's later message first when several messages of the
//! group that were in flight become visible again together (its `receive_message` releases the
//! first while the second still holds the group). So the mapping never lets a message it left come
//! back by itself: it extends the visibility of what it leaves, and releases all of it at once,
//! when the queue's visibility timeout is over ([`SqsMapper::poll`]); moto then answers in order.
//! The timing is the queue's, as in AWS.
//!
//! The event is Lambda's (`Records` of `messageId`, `receiptHandle`, `body`, `attributes` with
//! `ApproximateReceiveCount`, `SentTimestamp`, `MessageGroupId`, `MessageDeduplicationId`,
//! `messageAttributes`, `eventSource` `aws:sqs`, `eventSourceARN`, `awsRegion`), so the consumer
//! runs locally exactly as it runs in AWS.
//!
//! ```no_run
//! use cqrs_local_stack::sqs_mapper::{SqsMapper, SqsMapperConfig};
//! # async fn example(sqs: aws_sdk_sqs::Client, invoker: cqrs_local_stack::invoke::HttpInvoker) {
//! let mut mapper = SqsMapper::new(SqsMapperConfig::new(
//!     "http://127.0.0.1:5000/123456789012/shop-search-index.fifo",
//!     "arn:aws:sqs:us-east-1:123456789012:shop-search-index.fifo",
//! ));
//! let report = mapper.poll(&sqs, &invoker).await.unwrap();
//! println!("{} received, {} done", report.received, report.deleted);
//! # }
//! ```

use std::future::Future;
use std::time::{Duration, Instant};

use aws_sdk_sqs::types::{
    ChangeMessageVisibilityBatchRequestEntry, DeleteMessageBatchRequestEntry, Message,
    MessageAttributeValue, MessageSystemAttributeName,
};
use serde_json::{Map, Value, json};

use crate::mapper::InvokeError;

/// How the mapping reads a queue; the defaults are those of a consumer's event source.
#[derive(Debug, Clone)]
pub struct SqsMapperConfig {
    /// The queue's URL.
    pub queue_url: String,
    /// The queue's ARN (the event's `eventSourceARN`).
    pub queue_arn: String,
    /// The largest batch sent in one invocation (`BatchSize`, at most 10 for a FIFO queue).
    pub batch_size: i32,
    /// How long one receive waits for a message (long polling, at most 20 s).
    pub wait: Duration,
    /// The region the event names (`awsRegion`).
    pub region: String,
    /// The queue's visibility timeout: how long a message the consumer reported (or a batch whose
    /// invocation failed) stays away before it comes back.
    pub visibility_timeout: Duration,
}

impl SqsMapperConfig {
    /// The mapping of the queue at `queue_url` (ARN `queue_arn`): batches of 10, receives that
    /// wait up to a second.
    ///
    /// ```
    /// let config = cqrs_local_stack::sqs_mapper::SqsMapperConfig::new("http://q", "arn:q");
    /// assert_eq!(config.batch_size, 10);
    /// assert_eq!(config.region, "us-east-1");
    /// ```
    pub fn new(queue_url: &str, queue_arn: &str) -> Self {
        SqsMapperConfig {
            queue_url: queue_url.to_string(),
            queue_arn: queue_arn.to_string(),
            batch_size: 10,
            wait: Duration::from_secs(1),
            region: "us-east-1".to_string(),
            visibility_timeout: Duration::from_secs(30),
        }
    }
}

/// Invokes a consumer with one SQS event; answers the `messageId`s it reported as failed.
pub trait InvokeSqs {
    /// Sends `event` (Lambda's SQS event) as one invocation.
    fn invoke_sqs(&self, event: &Value) -> impl Future<Output = Result<Vec<String>, InvokeError>>;
}

/// What one poll came to.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PollReport {
    /// Messages received (the batch).
    pub received: usize,
    /// Messages deleted: done.
    pub deleted: usize,
    /// Messages the answer reported, left to come back after their visibility timeout.
    pub reported: usize,
    /// Whether the invocation failed as a whole (nothing deleted).
    pub failed: bool,
}

/// Why the queue could not be read or settled.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SqsMapperError(pub String);

/// Lambda's SQS event for `messages`, received from the queue `queue_arn` in `region`.
///
/// ```
/// use aws_sdk_sqs::types::{Message, MessageSystemAttributeName};
/// let message = Message::builder()
///     .message_id("m1")
///     .receipt_handle("r1")
///     .body("{}")
///     .attributes(MessageSystemAttributeName::MessageGroupId, "g1")
///     .build();
/// let event = cqrs_local_stack::sqs_mapper::sqs_event(&[message], "arn:q.fifo", "us-east-1");
/// let record = &event["Records"][0];
/// assert_eq!(record["messageId"], "m1");
/// assert_eq!(record["eventSource"], "aws:sqs");
/// assert_eq!(record["attributes"]["MessageGroupId"], "g1");
/// ```
pub fn sqs_event(messages: &[Message], queue_arn: &str, region: &str) -> Value {
    let records: Vec<Value> = messages
        .iter()
        .map(|message| {
            let attributes: Map<String, Value> = message
                .attributes
                .iter()
                .flatten()
                .map(|(name, value)| (name.as_str().to_string(), Value::from(value.as_str())))
                .collect();
            let message_attributes: Map<String, Value> = message
                .message_attributes
                .iter()
                .flatten()
                .map(|(name, value)| (name.clone(), message_attribute(value)))
                .collect();
            json!({
                "messageId": message.message_id,
                "receiptHandle": message.receipt_handle,
                "body": message.body,
                "attributes": attributes,
                "messageAttributes": message_attributes,
                "md5OfBody": message.md5_of_body,
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": region,
            })
        })
        .collect();
    json!({ "Records": records })
}

/// A message attribute as Lambda's event writes it.
fn message_attribute(value: &MessageAttributeValue) -> Value {
    json!({
        "stringValue": value.string_value,
        "binaryValue": value.binary_value.as_ref().map(|b| {
            use base64::Engine as _;
            base64::engine::general_purpose::STANDARD.encode(b.as_ref())
        }),
        "stringListValues": [],
        "binaryListValues": [],
        "dataType": value.data_type,
    })
}

/// The mapping of one queue: [`SqsMapper::poll`] receives and settles one batch at a time, and
/// keeps the messages it left until their visibility timeout is over (see the module
/// documentation).
#[derive(Debug)]
pub struct SqsMapper {
    config: SqsMapperConfig,
    /// Receipt handles of the messages left in flight, with when they come back.
    waiting: Vec<(Instant, String)>,
}

/// How much longer than the queue's timeout a left message is held, so that the mapping, not
/// moto, releases it.
const HOLD: Duration = Duration::from_secs(60);

impl SqsMapper {
    /// The mapping of the queue `config` names.
    ///
    /// ```
    /// use cqrs_local_stack::sqs_mapper::{SqsMapper, SqsMapperConfig};
    /// let mapper = SqsMapper::new(SqsMapperConfig::new("http://q", "arn:q"));
    /// assert_eq!(mapper.config().queue_arn, "arn:q");
    /// assert_eq!(mapper.waiting(), 0);
    /// ```
    pub fn new(config: SqsMapperConfig) -> Self {
        SqsMapper {
            config,
            waiting: Vec::new(),
        }
    }

    /// Its settings.
    pub fn config(&self) -> &SqsMapperConfig {
        &self.config
    }

    /// How many messages it left in flight, to come back after their visibility timeout.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// Releases the messages whose visibility timeout is over (all at once), then receives one
    /// batch and, when there is one, invokes `invoker` with it and settles the answer (see the
    /// module documentation). A receive that finds nothing returns an empty report after waiting
    /// [`SqsMapperConfig::wait`].
    pub async fn poll<I: InvokeSqs>(
        &mut self,
        sqs: &aws_sdk_sqs::Client,
        invoker: &I,
    ) -> Result<PollReport, SqsMapperError> {
        self.release_due(sqs).await?;
        let config = &self.config;
        let received = sqs
            .receive_message()
            .queue_url(&config.queue_url)
            .max_number_of_messages(config.batch_size)
            .wait_time_seconds(config.wait.as_secs().min(20) as i32)
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .message_attribute_names("All")
            .send()
            .await
            .map_err(|e| sdk_error("receiving from", &config.queue_url, e))?
            .messages
            .unwrap_or_default();
        let mut report = PollReport {
            received: received.len(),
            ..PollReport::default()
        };
        if received.is_empty() {
            return Ok(report);
        }
        let received_at = Instant::now();
        let event = sqs_event(&received, &config.queue_arn, &config.region);
        let failed: Vec<&str> = match invoker.invoke_sqs(&event).await {
            Ok(failed) => {
                // An identifier that is no message of the batch: Lambda reads the whole batch
                // as failed.
                let known = failed
                    .iter()
                    .all(|id| received.iter().any(|m| m.message_id.as_deref() == Some(id)));
                if known {
                    report.reported = failed.len();
                    received
                        .iter()
                        .filter_map(|m| m.message_id.as_deref())
                        .filter(|id| failed.iter().any(|f| f == id))
                        .collect()
                } else {
                    tracing::warn!(
                        queue = config.queue_url,
                        ?failed,
                        "batchItemFailures names no message of the batch: the batch failed"
                    );
                    report.failed = true;
                    received
                        .iter()
                        .filter_map(|m| m.message_id.as_deref())
                        .collect()
                }
            }
            Err(error) => {
                tracing::warn!(
                    queue = config.queue_url,
                    %error,
                    "the invocation failed: the batch comes back after its visibility timeout"
                );
                report.failed = true;
                received
                    .iter()
                    .filter_map(|m| m.message_id.as_deref())
                    .collect()
            }
        };
        let (left, done): (Vec<&Message>, Vec<&Message>) = received.iter().partition(|m| {
            m.message_id
                .as_deref()
                .is_some_and(|id| failed.contains(&id))
        });
        let handles = |messages: &[&Message]| -> Vec<String> {
            messages
                .iter()
                .filter_map(|m| m.receipt_handle.clone())
                .collect()
        };
        let left = handles(&left);
        let hold = (config.visibility_timeout + HOLD).as_secs() as i32;
        self.change_visibility(sqs, &left, hold).await?;
        let back = received_at + self.config.visibility_timeout;
        self.waiting.extend(left.into_iter().map(|h| (back, h)));
        report.deleted = self.delete(sqs, &handles(&done)).await?;
        Ok(report)
    }

    /// The left messages whose time has come: visible again, all at once.
    async fn release_due(&mut self, sqs: &aws_sdk_sqs::Client) -> Result<(), SqsMapperError> {
        let now = Instant::now();
        let (due, later): (Vec<_>, Vec<_>) = self.waiting.drain(..).partition(|(at, _)| *at <= now);
        self.waiting = later;
        let due: Vec<String> = due.into_iter().map(|(_, handle)| handle).collect();
        self.change_visibility(sqs, &due, 0).await
    }

    /// Sets the visibility of the messages `handles` to `seconds`; a message no longer in the
    /// queue (moved to its dead-letter queue) is skipped.
    async fn change_visibility(
        &self,
        sqs: &aws_sdk_sqs::Client,
        handles: &[String],
        seconds: i32,
    ) -> Result<(), SqsMapperError> {
        for chunk in handles.chunks(10) {
            let entries = chunk
                .iter()
                .enumerate()
                .map(|(i, handle)| {
                    ChangeMessageVisibilityBatchRequestEntry::builder()
                        .id(i.to_string())
                        .receipt_handle(handle)
                        .visibility_timeout(seconds)
                        .build()
                        .map_err(|e| SqsMapperError(format!("a visibility entry: {e}")))
                })
                .collect::<Result<Vec<_>, _>>()?;
            sqs.change_message_visibility_batch()
                .queue_url(&self.config.queue_url)
                .set_entries(Some(entries))
                .send()
                .await
                .map_err(|e| sdk_error("changing the visibility in", &self.config.queue_url, e))?;
        }
        Ok(())
    }

    /// Deletes the messages `handles` (done); answers how many.
    async fn delete(
        &self,
        sqs: &aws_sdk_sqs::Client,
        handles: &[String],
    ) -> Result<usize, SqsMapperError> {
        for chunk in handles.chunks(10) {
            let entries = chunk
                .iter()
                .enumerate()
                .map(|(i, handle)| {
                    DeleteMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .receipt_handle(handle)
                        .build()
                        .map_err(|e| SqsMapperError(format!("a delete entry: {e}")))
                })
                .collect::<Result<Vec<_>, _>>()?;
            let answer = sqs
                .delete_message_batch()
                .queue_url(&self.config.queue_url)
                .set_entries(Some(entries))
                .send()
                .await
                .map_err(|e| sdk_error("deleting from", &self.config.queue_url, e))?;
            if !answer.failed.is_empty() {
                return Err(SqsMapperError(format!(
                    "deleting from {}: {:?}",
                    self.config.queue_url, answer.failed
                )));
            }
        }
        Ok(handles.len())
    }
}

fn sdk_error<E: std::error::Error + 'static>(
    doing: &str,
    queue: &str,
    error: aws_sdk_sqs::error::SdkError<E>,
) -> SqsMapperError {
    SqsMapperError(format!(
        "{doing} {queue}: {}",
        aws_sdk_sqs::error::DisplayErrorContext(&error)
    ))
}
