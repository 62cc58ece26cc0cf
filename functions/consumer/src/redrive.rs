//! `cqrs redrive consumer`: a consumer's dead-letter queue read back into its queue, oldest first,
//! after the cause of the parking is fixed.
//!
//! [`redrive`] receives the dead-letter queue's messages (oldest first; a FIFO queue answers each
//! item's messages in order), and for each one, in order:
//!
//! 1. sends it to the consumer's queue with its message group (the item), its body (the event)
//!    and its message attributes (with the publisher's `type`, `tenant`, `entity` taken from the
//!    event when the parked message lacks them), plus [`REDRIVEN_ATTRIBUTE`] = `"true"`, under a fresh
//!    deduplication id [`redrive_dedup_id`] (`<event id>:redrive:<dead-letter message id>`: the
//!    queue saw the event id when the event first came, and SQS would drop a second message with
//!    it within five minutes);
//! 2. deletes it from the dead-letter queue, only after the send succeeded.
//!
//! A message the consumer parks again while the run goes on (the cause is not fixed: its
//! deduplication id names a message this run sent, [`came_back`]) stops the run
//! ([`RedriveReport::came_back`]) instead of moving it back and forth.
//!
//! Delivery is at least once: a run stopped between the send and the delete leaves the message in
//! the dead-letter queue, and the next run sends it again; the consumer's marker drops the second
//! one (and any redriven version the item already went past: a duplicate). A send or delete that
//! fails stops the run ([`RedriveError`], with what moved so far); the messages received and not
//! moved are released at once, nothing is lost.
//!
//! The runtime sees the message as redriven ([`crate::Delivered::redriven`]); the item's held
//! version (the one parked with a reason) is handled again, the marker's hold cleared, and the
//! versions parked "held behind" it follow in order.
//!
//! [`RedriveOptions::dry_run`] moves nothing: it receives what it can see (each item's oldest
//! messages; a FIFO queue holds an item's later messages back while earlier ones are received),
//! counts them by reason, and releases them (visibility 0). The reason is the `cqrs-reason-kind`
//! attribute the runtime writes when it parks (`poison`, `retries-exhausted`, `held`,
//! `malformed`); a message SQS itself moved there (the function crashed or timed out more often
//! than the queue's `maxReceiveCount`) has none and counts as [`UNKNOWN_REASON`].
//!
//! Cost: per message one `ReceiveMessage` share (up to 10 messages a call), one `SendMessage`,
//! one `DeleteMessage`: 3 SQS requests ($0.50 per million FIFO requests, **[unverified price]**).
//!
//! ```no_run
//! # async fn example(sqs: aws_sdk_sqs::Client) -> Result<(), cqrs_consumer::redrive::RedriveError> {
//! use cqrs_consumer::redrive::{RedriveOptions, redrive};
//! let report = redrive(
//!     &sqs,
//!     "https://sqs.eu-west-1.amazonaws.com/123456789012/shop-search-dlq.fifo",
//!     "https://sqs.eu-west-1.amazonaws.com/123456789012/shop-search.fifo",
//!     &RedriveOptions { max: Some(100), dry_run: false },
//! )
//! .await?;
//! println!("moved {}, by reason {:?}, {} left", report.moved, report.by_reason, report.left);
//! # Ok(()) }
//! ```

use std::collections::BTreeMap;

use aws_sdk_sqs::types::{
    Message, MessageAttributeValue, MessageSystemAttributeName, QueueAttributeName,
};

pub use crate::runtime::REDRIVEN_ATTRIBUTE;

/// The reason counted for a message without `cqrs-reason-kind` (SQS moved it after too many
/// receives: a crash or a timeout, not a reason the runtime gave).
///
/// ```
/// assert_eq!(cqrs_consumer::redrive::UNKNOWN_REASON, "unknown");
/// ```
pub const UNKNOWN_REASON: &str = "unknown";

/// How long a received dead-letter message stays invisible while it is moved (seconds).
const VISIBILITY_SECONDS: i32 = 60;

/// How long a receive waits for messages (seconds): a long poll asks every SQS server, so an
/// empty answer means an empty queue (a short poll may answer empty while messages wait).
const WAIT_SECONDS: i32 = 1;

/// What to move.
///
/// ```
/// let options = cqrs_consumer::redrive::RedriveOptions::default();
/// assert_eq!((options.max, options.dry_run), (None, false));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RedriveOptions {
    /// At most this many messages (`None`: all).
    pub max: Option<usize>,
    /// Count the messages by reason, move nothing.
    pub dry_run: bool,
}

/// What a redrive did.
///
/// ```
/// let report = cqrs_consumer::redrive::RedriveReport::default();
/// assert_eq!((report.moved, report.left), (0, 0));
/// assert!(report.by_reason.is_empty());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RedriveReport {
    /// Messages moved back into the consumer's queue (0 in a dry run).
    pub moved: usize,
    /// The messages moved (in a dry run: seen) by reason (`cqrs-reason-kind`, else
    /// [`UNKNOWN_REASON`]).
    pub by_reason: BTreeMap<String, usize>,
    /// Messages in the dead-letter queue afterwards (SQS's approximate count, visible and in
    /// flight).
    pub left: usize,
    /// The messages moved (in a dry run: seen), in the order they were read.
    pub messages: Vec<DeadLetter>,
    /// A message this run moved that the consumer parked again while the run went on (the
    /// cause is not fixed): the run stopped there, rather than move it back and forth. Empty
    /// when the run ended because the dead-letter queue was empty (or `max` was reached).
    pub came_back: Vec<DeadLetter>,
}

/// One dead-letter message as a redrive read it: what it is and why it was parked.
///
/// ```
/// use aws_sdk_sqs::types::{Message, MessageAttributeValue};
/// let text = |v: &str| MessageAttributeValue::builder().data_type("String").string_value(v).build().unwrap();
/// let message = Message::builder()
///     .message_id("m1")
///     .body(r#"{"id":"e1","subject":"PRODUCT#t1/P001","itemversion":3}"#)
///     .message_attributes("cqrs-reason-kind", text("poison"))
///     .message_attributes("cqrs-reason", text("priceCents is negative"))
///     .build();
/// let parked = cqrs_consumer::redrive::DeadLetter::of(&message);
/// assert_eq!((parked.subject.as_deref(), parked.version), (Some("PRODUCT#t1/P001"), Some(3)));
/// assert_eq!((parked.reason_kind.as_str(), parked.reason.as_deref()), ("poison", Some("priceCents is negative")));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeadLetter {
    /// The dead-letter queue's message id.
    pub message_id: String,
    /// The event id (`None`: the body is no event).
    pub event_id: Option<String>,
    /// The event's subject (the item).
    pub subject: Option<String>,
    /// The event's version.
    pub version: Option<i64>,
    /// `cqrs-reason-kind`, else [`UNKNOWN_REASON`].
    pub reason_kind: String,
    /// `cqrs-reason`.
    pub reason: Option<String>,
    /// `cqrs-attempts`.
    pub attempts: Option<String>,
    /// `cqrs-parked-at`.
    pub parked_at: Option<String>,
}

impl DeadLetter {
    /// What `message` holds (see the type's example).
    ///
    /// ```
    /// let empty = cqrs_consumer::redrive::DeadLetter::of(&aws_sdk_sqs::types::Message::builder().build());
    /// assert_eq!((empty.reason_kind.as_str(), empty.event_id), ("unknown", None));
    /// ```
    pub fn of(message: &Message) -> Self {
        let body: Option<serde_json::Value> =
            message.body().and_then(|b| serde_json::from_str(b).ok());
        let text = |name: &str| {
            body.as_ref()
                .and_then(|b| b.get(name))
                .and_then(serde_json::Value::as_str)
                .map(str::to_string)
        };
        let attribute = |name: &str| {
            message
                .message_attributes()
                .and_then(|a| a.get(name))
                .and_then(|v| v.string_value())
                .map(str::to_string)
        };
        DeadLetter {
            message_id: message.message_id().unwrap_or_default().to_string(),
            event_id: text("id"),
            subject: text("subject"),
            version: body
                .as_ref()
                .and_then(|b| b.get("itemversion"))
                .and_then(serde_json::Value::as_i64),
            reason_kind: reason_of(message),
            reason: attribute("cqrs-reason"),
            attempts: attribute("cqrs-attempts"),
            parked_at: attribute("cqrs-parked-at"),
        }
    }
}

/// A redrive stopped: the SQS call that failed, and what moved before.
///
/// ```
/// let e = cqrs_consumer::redrive::RedriveError {
///     operation: "SendMessage",
///     message: "AccessDenied".into(),
///     report: Default::default(),
/// };
/// assert_eq!(e.to_string(), "SendMessage failed after 0 moved: AccessDenied");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{operation} failed after {} moved: {message}", report.moved)]
pub struct RedriveError {
    /// The SQS operation (or `redrive` for a refused request).
    pub operation: &'static str,
    /// What it answered.
    pub message: String,
    /// What moved before it failed.
    pub report: RedriveReport,
}

/// The deduplication id of the redrive of event `event_id` that sat in the dead-letter queue as
/// message `message_id`: `<event id>:redrive:<message id>`. Falls back to `redrive:<message id>`
/// when the event id is unknown (a malformed body) or would make the id longer than SQS's 128
/// characters or use a character SQS refuses.
///
/// ```
/// use cqrs_consumer::redrive::redrive_dedup_id;
/// assert_eq!(redrive_dedup_id(Some("Kq3f1v2m"), "m-1"), "Kq3f1v2m:redrive:m-1");
/// assert_eq!(redrive_dedup_id(None, "m-1"), "redrive:m-1");
/// assert_eq!(redrive_dedup_id(Some("with space"), "m-1"), "redrive:m-1");
/// ```
pub fn redrive_dedup_id(event_id: Option<&str>, message_id: &str) -> String {
    match event_id {
        Some(id)
            if !id.is_empty()
                && id.chars().all(|c| c.is_ascii_graphic())
                && id.len() + message_id.len() + 9 <= 128 =>
        {
            format!("{id}:redrive:{message_id}")
        }
        _ => format!("redrive:{message_id}"),
    }
}

/// The parking reason of a dead-letter message: its `cqrs-reason-kind`, else [`UNKNOWN_REASON`].
///
/// ```
/// use aws_sdk_sqs::types::{Message, MessageAttributeValue};
/// let kind = MessageAttributeValue::builder().data_type("String").string_value("poison").build().unwrap();
/// let parked = Message::builder().message_attributes("cqrs-reason-kind", kind).build();
/// assert_eq!(cqrs_consumer::redrive::reason_of(&parked), "poison");
/// assert_eq!(cqrs_consumer::redrive::reason_of(&Message::builder().build()), "unknown");
/// ```
pub fn reason_of(message: &Message) -> String {
    message
        .message_attributes()
        .and_then(|a| a.get("cqrs-reason-kind"))
        .and_then(|v| v.string_value())
        .filter(|v| !v.is_empty())
        .unwrap_or(UNKNOWN_REASON)
        .to_string()
}

/// Whether `message` (read from the dead-letter queue) is the consumer's park of one of the
/// messages `sent` to its queue: its deduplication id is `<event id>:park:<message id>`
/// ([`crate::park::park_dedup_id`]) with a message id of `sent`.
///
/// ```
/// use aws_sdk_sqs::types::{Message, MessageSystemAttributeName};
/// let parked = |dedup: &str| {
///     Message::builder().attributes(MessageSystemAttributeName::MessageDeduplicationId, dedup).build()
/// };
/// let sent = std::collections::HashSet::from(["a1b2".to_string()]);
/// assert!(cqrs_consumer::redrive::came_back(&parked("Kq3f:park:a1b2"), &sent));
/// assert!(!cqrs_consumer::redrive::came_back(&parked("Kq3f:park:zz99"), &sent));
/// assert!(!cqrs_consumer::redrive::came_back(&parked("Kq3f"), &sent));
/// ```
pub fn came_back(message: &Message, sent: &std::collections::HashSet<String>) -> bool {
    message
        .attributes()
        .and_then(|a| a.get(&MessageSystemAttributeName::MessageDeduplicationId))
        .and_then(|dedup| dedup.rsplit_once(":park:"))
        .is_some_and(|(_, via)| sent.contains(via))
}

/// Moves the messages of the dead-letter queue `dead_letter_url` back into the consumer's queue
/// `queue_url` (see the [module docs](self)), or counts them (`dry_run`).
///
/// ```no_run
/// # async fn example(sqs: aws_sdk_sqs::Client) -> Result<(), cqrs_consumer::redrive::RedriveError> {
/// use cqrs_consumer::redrive::{RedriveOptions, redrive};
/// let options = RedriveOptions { dry_run: true, ..Default::default() };
/// let report = redrive(&sqs, "https://sqs/q-dlq.fifo", "https://sqs/q.fifo", &options).await?;
/// for (reason, count) in &report.by_reason {
///     println!("{reason}: {count}");
/// }
/// # Ok(()) }
/// ```
///
/// # Errors
///
/// The two URLs are the same; an SQS call failed ([`RedriveError`], with what moved before; the
/// messages received and not moved are released).
pub async fn redrive(
    sqs: &aws_sdk_sqs::Client,
    dead_letter_url: &str,
    queue_url: &str,
    options: &RedriveOptions,
) -> Result<RedriveReport, RedriveError> {
    let mut report = RedriveReport::default();
    if dead_letter_url.trim() == queue_url.trim() {
        return Err(RedriveError {
            operation: "redrive",
            message: "the dead-letter queue and the consumer's queue are the same queue".into(),
            report,
        });
    }
    let max = options.max.unwrap_or(usize::MAX);
    // Dry run: what was received, released at the end.
    let mut seen: Vec<String> = Vec::new();
    let mut counted = 0usize;
    // The ids of the messages this run sent: a park of one of them means it came back.
    let mut sent: std::collections::HashSet<String> = std::collections::HashSet::new();
    let outcome: Result<(), (&'static str, String)> = async {
        while counted < max {
            let want = i32::try_from((max - counted).min(10)).unwrap_or(10);
            let received = sqs
                .receive_message()
                .queue_url(dead_letter_url)
                .max_number_of_messages(want)
                .visibility_timeout(VISIBILITY_SECONDS)
                .wait_time_seconds(WAIT_SECONDS)
                .message_system_attribute_names(MessageSystemAttributeName::All)
                .message_attribute_names("All")
                .send()
                .await
                .map_err(|e| ("ReceiveMessage", sdk_text(&e)))?;
            let messages = received.messages();
            if messages.is_empty() {
                break;
            }
            if options.dry_run {
                for message in messages {
                    *report.by_reason.entry(reason_of(message)).or_default() += 1;
                    report.messages.push(DeadLetter::of(message));
                    seen.extend(message.receipt_handle().map(str::to_string));
                    counted += 1;
                }
                continue;
            }
            for (position, message) in messages.iter().enumerate() {
                if came_back(message, &sent) {
                    // Parked again by the consumer: the cause is not fixed. Stop, or this run
                    // would move the item's messages back and forth for ever.
                    report.came_back.push(DeadLetter::of(message));
                    let rest: Vec<String> = messages
                        .iter()
                        .skip(position)
                        .filter_map(|m| m.receipt_handle().map(str::to_string))
                        .collect();
                    release(sqs, dead_letter_url, &rest).await;
                    return Ok(());
                }
                match move_one(sqs, dead_letter_url, queue_url, message).await {
                    Ok(id) => {
                        sent.insert(id);
                    }
                    Err(e) => {
                        let rest: Vec<String> = messages
                            .iter()
                            .skip(position + usize::from(e.0 == "DeleteMessage"))
                            .filter_map(|m| m.receipt_handle().map(str::to_string))
                            .collect();
                        release(sqs, dead_letter_url, &rest).await;
                        return Err(e);
                    }
                }
                report.moved += 1;
                counted += 1;
                *report.by_reason.entry(reason_of(message)).or_default() += 1;
                report.messages.push(DeadLetter::of(message));
            }
        }
        Ok(())
    }
    .await;
    if options.dry_run {
        release(sqs, dead_letter_url, &seen).await;
    }
    report.left = approximate_count(sqs, dead_letter_url).await.unwrap_or(0);
    match outcome {
        Ok(()) => Ok(report),
        Err((operation, message)) => Err(RedriveError {
            operation,
            message,
            report,
        }),
    }
}

/// Sends one dead-letter message to the queue, then deletes it from the dead-letter queue;
/// answers the id of the message sent.
async fn move_one(
    sqs: &aws_sdk_sqs::Client,
    dead_letter_url: &str,
    queue_url: &str,
    message: &Message,
) -> Result<String, (&'static str, String)> {
    let message_id = message.message_id().unwrap_or_default();
    let body = message.body().unwrap_or_default();
    let event: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let event_id = event
        .as_ref()
        .and_then(|e| e.get("id"))
        .and_then(serde_json::Value::as_str);
    let group = message
        .attributes()
        .and_then(|a| a.get(&MessageSystemAttributeName::MessageGroupId))
        .cloned()
        .or_else(|| {
            let text = |p: &str| event.as_ref()?.pointer(p)?.as_str();
            Some(cqrs_keys::member_token(
                text("/data/pk")?,
                text("/data/sk")?,
            ))
        })
        .unwrap_or_else(|| message_id.to_string());
    let mut request = sqs
        .send_message()
        .queue_url(queue_url)
        .message_body(body)
        .message_group_id(group)
        .message_deduplication_id(redrive_dedup_id(event_id, message_id));
    let attributes = message.message_attributes();
    for (name, value) in attributes.into_iter().flatten() {
        if name != REDRIVEN_ATTRIBUTE {
            request = request.message_attributes(name, value.clone());
        }
    }
    // A message the runtime parked carries its reason, not the publisher's `type`, `tenant`,
    // `entity`: they come back from the event, so that a redriven message looks like a live one.
    for (name, pointer) in [
        ("type", "/type"),
        ("tenant", "/tenant"),
        ("entity", "/entity"),
    ] {
        let present = attributes.is_some_and(|a| a.contains_key(name));
        let value = event
            .as_ref()
            .and_then(|e| e.pointer(pointer))
            .and_then(serde_json::Value::as_str)
            .filter(|v| !v.is_empty());
        if let (false, Some(value)) = (present, value) {
            let attribute = MessageAttributeValue::builder()
                .data_type("String")
                .string_value(value)
                .build()
                .map_err(|e| ("SendMessage", e.to_string()))?;
            request = request.message_attributes(name, attribute);
        }
    }
    let redriven = MessageAttributeValue::builder()
        .data_type("String")
        .string_value("true")
        .build()
        .map_err(|e| ("SendMessage", e.to_string()))?;
    let sent = request
        .message_attributes(REDRIVEN_ATTRIBUTE, redriven)
        .send()
        .await
        .map_err(|e| ("SendMessage", sdk_text(&e)))?;
    sqs.delete_message()
        .queue_url(dead_letter_url)
        .receipt_handle(message.receipt_handle().unwrap_or_default())
        .send()
        .await
        .map_err(|e| ("DeleteMessage", sdk_text(&e)))?;
    Ok(sent.message_id().unwrap_or_default().to_string())
}

/// Makes received messages visible again at once (best effort: unreleased ones come back when
/// their visibility timeout ends). All at once, so that a FIFO queue answers them in order.
async fn release(sqs: &aws_sdk_sqs::Client, queue_url: &str, handles: &[String]) {
    use aws_sdk_sqs::types::ChangeMessageVisibilityBatchRequestEntry;
    for chunk in handles.chunks(10) {
        let entries: Vec<_> = chunk
            .iter()
            .enumerate()
            .filter_map(|(i, handle)| {
                ChangeMessageVisibilityBatchRequestEntry::builder()
                    .id(format!("m{i}"))
                    .receipt_handle(handle)
                    .visibility_timeout(0)
                    .build()
                    .ok()
            })
            .collect();
        if let Err(e) = sqs
            .change_message_visibility_batch()
            .queue_url(queue_url)
            .set_entries(Some(entries))
            .send()
            .await
        {
            tracing::warn!(error = %sdk_text(&e), "releasing dead-letter messages: they come back when their visibility timeout ends");
        }
    }
}

/// The queue's approximate number of messages, visible and in flight.
async fn approximate_count(sqs: &aws_sdk_sqs::Client, queue_url: &str) -> Option<usize> {
    let answer = sqs
        .get_queue_attributes()
        .queue_url(queue_url)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await
        .ok()?;
    let attributes = answer.attributes()?;
    let count = |name: QueueAttributeName| {
        attributes
            .get(&name)
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(0)
    };
    Some(
        count(QueueAttributeName::ApproximateNumberOfMessages)
            + count(QueueAttributeName::ApproximateNumberOfMessagesNotVisible),
    )
}

/// An SDK error in a line: the service's code and message, else the error with its context
/// (a timeout, a connection refused).
pub(crate) fn sdk_text<E, R>(e: &aws_sdk_sqs::error::SdkError<E, R>) -> String
where
    E: aws_sdk_sqs::error::ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    match e.as_service_error() {
        Some(service) => format!(
            "{}: {}",
            service.code().unwrap_or("error"),
            service.message().unwrap_or_default()
        ),
        None => aws_sdk_sqs::error::DisplayErrorContext(e).to_string(),
    }
}
