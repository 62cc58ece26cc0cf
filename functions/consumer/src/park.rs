//! Parking: an event the consumer cannot handle goes to the consumer's FIFO dead-letter queue with
//! its reason, and the item's later events wait behind it.
//!
//! The runtime parks a message itself ([`Park`]), so that the reason travels with it as message
//! attributes (SQS's own `maxReceiveCount` redrive, the safety net for crashes and timeouts,
//! carries none):
//!
//! | attribute | value |
//! | --- | --- |
//! | `cqrs-consumer` | the consumer's name |
//! | `cqrs-reason-kind` | `poison`, `retries-exhausted`, `held` or `malformed` ([`ReasonKind`]) |
//! | `cqrs-reason` | the error text (at most [`REASON_MAX_BYTES`]) |
//! | `cqrs-attempts` | the receive count when it was parked |
//! | `cqrs-parked-at` | RFC 3339 |
//!
//! The message keeps its body (the event), its group (the item) and gets the dedup id
//! [`park_dedup_id`] `<event id>:park:<SQS message id>`: a retried park of one message (the
//! function crashed after parking) is dropped by the queue's deduplication, a park of the same
//! event redriven and failing again (a new message) is not. [`SqsDeadLetter`] sends it (`SendMessage`); [`MemoryPark`] keeps
//! it in memory (tests, the local double).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use cqrs_consumer::park::{MemoryPark, Park, Parked, ReasonKind};
//! let park = MemoryPark::default();
//! let parked = Parked::new("search", "{}", "group", "id:park:1", ReasonKind::Poison, "bad price", 1);
//! park.park(&parked).await.unwrap();
//! assert_eq!(park.parked()[0].reason, "bad price");
//! # }
//! ```

use std::sync::Mutex;

use aws_sdk_sqs::types::MessageAttributeValue;
use chrono::{DateTime, SecondsFormat, Utc};
use futures::future::{BoxFuture, FutureExt};

/// The longest reason sent (bytes; a longer one is cut at a character boundary).
///
/// ```
/// assert_eq!(cqrs_consumer::park::REASON_MAX_BYTES, 1024);
/// ```
pub const REASON_MAX_BYTES: usize = 1024;

/// The dedup id of the park of event `event_id` that arrived as SQS message `message_id` (for a
/// version filled from the history table, the message that led to it): `<event id>:park:<message
/// id>`, 64 characters with SQS's message ids (the limit is 128). Not the receive count: a
/// redriven message starts again at 1, and a second park of the event with the first one's dedup
/// id, within SQS's five minutes, would be dropped as a duplicate.
///
/// ```
/// let id = cqrs_consumer::park::park_dedup_id("Kq3f1v2mJQ6yXr9bT0aZcd", "059f36b4-87a3-44ab-83d2-661975830a7d");
/// assert_eq!(id, "Kq3f1v2mJQ6yXr9bT0aZcd:park:059f36b4-87a3-44ab-83d2-661975830a7d");
/// assert!(id.len() <= 128);
/// ```
pub fn park_dedup_id(event_id: &str, message_id: &str) -> String {
    format!("{event_id}:park:{message_id}")
}

/// Why a message was parked.
///
/// ```
/// assert_eq!(cqrs_consumer::park::ReasonKind::RetriesExhausted.as_str(), "retries-exhausted");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReasonKind {
    /// The consumer said the event can never be handled ([`crate::ConsumerError::Poison`]).
    Poison,
    /// The consumer asked for a retry on the last allowed attempt.
    RetriesExhausted,
    /// An earlier version of the item is parked: this one waits behind it.
    Held,
    /// The message is no change event the runtime can read.
    Malformed,
}

impl ReasonKind {
    /// The `cqrs-reason-kind` attribute's value.
    ///
    /// ```
    /// assert_eq!(cqrs_consumer::park::ReasonKind::Held.as_str(), "held");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            ReasonKind::Poison => "poison",
            ReasonKind::RetriesExhausted => "retries-exhausted",
            ReasonKind::Held => "held",
            ReasonKind::Malformed => "malformed",
        }
    }
}

/// One parked message.
///
/// ```
/// use cqrs_consumer::park::{Parked, ReasonKind};
/// let parked = Parked::new("c", "body", "g", "d", ReasonKind::Held, "x".repeat(2000), 3);
/// assert_eq!(parked.reason.len(), cqrs_consumer::park::REASON_MAX_BYTES);
/// assert_eq!(parked.attempts, 3);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Parked {
    /// The consumer.
    pub consumer: String,
    /// The message body (the event's JSON, or what arrived when it is malformed).
    pub body: String,
    /// The message group (the item).
    pub group_id: String,
    /// The dedup id ([`park_dedup_id`]).
    pub dedup_id: String,
    /// Why, in a word.
    pub kind: ReasonKind,
    /// Why, the error text.
    pub reason: String,
    /// The receive count when parked.
    pub attempts: u32,
    /// When.
    pub parked_at: DateTime<Utc>,
}

impl Parked {
    /// A message to park now; `reason` is cut to [`REASON_MAX_BYTES`].
    ///
    /// ```
    /// let p = cqrs_consumer::park::Parked::new("c", "{}", "g", "d", cqrs_consumer::park::ReasonKind::Malformed, "not JSON", 1);
    /// assert_eq!(p.kind.as_str(), "malformed");
    /// ```
    pub fn new(
        consumer: impl Into<String>,
        body: impl Into<String>,
        group_id: impl Into<String>,
        dedup_id: impl Into<String>,
        kind: ReasonKind,
        reason: impl Into<String>,
        attempts: u32,
    ) -> Self {
        let mut reason = reason.into();
        if reason.len() > REASON_MAX_BYTES {
            let mut end = REASON_MAX_BYTES;
            while !reason.is_char_boundary(end) {
                end -= 1;
            }
            reason.truncate(end);
        }
        Parked {
            consumer: consumer.into(),
            body: body.into(),
            group_id: group_id.into(),
            dedup_id: dedup_id.into(),
            kind,
            reason,
            attempts,
            parked_at: Utc::now(),
        }
    }

    /// The message attributes of the parked message (see the [module docs](self)).
    ///
    /// ```
    /// let p = cqrs_consumer::park::Parked::new("c", "{}", "g", "d", cqrs_consumer::park::ReasonKind::Poison, "why", 2);
    /// let attributes = p.attributes();
    /// assert!(attributes.contains(&("cqrs-reason-kind", "poison".to_string())));
    /// assert!(attributes.contains(&("cqrs-attempts", "2".to_string())));
    /// ```
    pub fn attributes(&self) -> Vec<(&'static str, String)> {
        vec![
            ("cqrs-consumer", self.consumer.clone()),
            ("cqrs-reason-kind", self.kind.as_str().to_string()),
            ("cqrs-reason", self.reason.clone()),
            ("cqrs-attempts", self.attempts.to_string()),
            (
                "cqrs-parked-at",
                self.parked_at.to_rfc3339_opts(SecondsFormat::Millis, true),
            ),
        ]
    }
}

/// Parking failed: the message is reported to be delivered again.
///
/// ```
/// let e = cqrs_consumer::park::ParkError("timeout".into());
/// assert_eq!(e.to_string(), "parking the message failed: timeout");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("parking the message failed: {0}")]
pub struct ParkError(pub String);

/// Where parked messages go.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use cqrs_consumer::park::{MemoryPark, Park, Parked, ReasonKind};
/// let park: &dyn Park = &MemoryPark::default();
/// park.park(&Parked::new("c", "{}", "g", "d", ReasonKind::Poison, "r", 1)).await.unwrap();
/// # }
/// ```
pub trait Park: Send + Sync {
    /// Parks `parked`.
    fn park<'a>(&'a self, parked: &'a Parked) -> BoxFuture<'a, Result<(), ParkError>>;
}

/// Parked messages kept in memory, in order: the tests' and the local stack's double.
///
/// ```
/// assert!(cqrs_consumer::park::MemoryPark::default().parked().is_empty());
/// ```
#[derive(Debug, Default)]
pub struct MemoryPark {
    parked: Mutex<Vec<Parked>>,
}

impl MemoryPark {
    /// Everything parked so far, in order.
    ///
    /// ```
    /// assert_eq!(cqrs_consumer::park::MemoryPark::default().parked().len(), 0);
    /// ```
    pub fn parked(&self) -> Vec<Parked> {
        self.parked.lock().map(|p| p.clone()).unwrap_or_default()
    }
}

impl Park for MemoryPark {
    fn park<'a>(&'a self, parked: &'a Parked) -> BoxFuture<'a, Result<(), ParkError>> {
        let result = self
            .parked
            .lock()
            .map(|mut all| all.push(parked.clone()))
            .map_err(|_| ParkError("memory park poisoned".into()));
        async move { result }.boxed()
    }
}

/// The consumer's FIFO dead-letter queue: `SendMessage` with the reason as message attributes.
///
/// ```no_run
/// # fn wire(client: aws_sdk_sqs::Client) {
/// let dlq = cqrs_consumer::park::SqsDeadLetter::new(
///     client,
///     "https://sqs.eu-west-1.amazonaws.com/123456789012/shop-search-dlq.fifo",
/// );
/// assert!(dlq.queue_url().ends_with(".fifo"));
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct SqsDeadLetter {
    client: aws_sdk_sqs::Client,
    queue_url: String,
}

impl SqsDeadLetter {
    /// The queue `queue_url` through `client`.
    ///
    /// ```no_run
    /// # fn wire(client: aws_sdk_sqs::Client) {
    /// let dlq = cqrs_consumer::park::SqsDeadLetter::new(client, "https://sqs/q-dlq.fifo");
    /// # }
    /// ```
    pub fn new(client: aws_sdk_sqs::Client, queue_url: impl Into<String>) -> Self {
        SqsDeadLetter {
            client,
            queue_url: queue_url.into(),
        }
    }

    /// The queue's URL.
    ///
    /// ```no_run
    /// # fn show(dlq: &cqrs_consumer::park::SqsDeadLetter) {
    /// println!("{}", dlq.queue_url());
    /// # }
    /// ```
    pub fn queue_url(&self) -> &str {
        &self.queue_url
    }
}

impl Park for SqsDeadLetter {
    fn park<'a>(&'a self, parked: &'a Parked) -> BoxFuture<'a, Result<(), ParkError>> {
        async move {
            let mut request = self
                .client
                .send_message()
                .queue_url(&self.queue_url)
                .message_body(&parked.body)
                .message_group_id(&parked.group_id)
                .message_deduplication_id(&parked.dedup_id);
            for (name, value) in parked.attributes() {
                if value.is_empty() {
                    continue;
                }
                let attribute = MessageAttributeValue::builder()
                    .data_type("String")
                    .string_value(value)
                    .build()
                    .map_err(|e| ParkError(e.to_string()))?;
                request = request.message_attributes(name, attribute);
            }
            request.send().await.map_err(|e| {
                ParkError(format!(
                    "SendMessage ({}): {}",
                    self.queue_url,
                    aws_sdk_sqs::error::DisplayErrorContext(&e)
                ))
            })?;
            Ok(())
        }
        .boxed()
    }
}

/// The connect timeout of the SQS client, as the DynamoDB client's ([`cqrs_store::client`]).
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(3100);

/// The SQS client of `env`, built exactly as [`cqrs_store::client::ClientEnv::client`] builds
/// DynamoDB's (region, credentials, `http`, standard retry, connect timeout), the endpoint from
/// `AWS_ENDPOINT_URL_SQS` / `AWS_ENDPOINT_URL` through `lookup`
/// ([`cqrs_store::client::service_endpoint`]); never through `aws-config`.
///
/// ```
/// use cqrs_store::client::{ClientEnv, http_client};
/// let lookup = |name: &str| match name {
///     "CQRS_TLS_ROOTS" => None,
///     "AWS_ENDPOINT_URL_SQS" => Some("http://127.0.0.1:5000".to_string()),
///     _ => Some(format!("value-of-{name}")),
/// };
/// let env = ClientEnv::from_lookup(lookup).unwrap();
/// let client = cqrs_consumer::park::sqs_client(&env, http_client(env.tls_roots).unwrap(), lookup);
/// assert_eq!(client.config().region().map(|r| r.as_ref()), Some("value-of-AWS_REGION"));
/// ```
pub fn sqs_client(
    env: &cqrs_store::client::ClientEnv,
    http: aws_sdk_sqs::config::SharedHttpClient,
    lookup: impl Fn(&str) -> Option<String>,
) -> aws_sdk_sqs::Client {
    use aws_sdk_sqs::config::retry::RetryConfig;
    use aws_sdk_sqs::config::timeout::TimeoutConfig;
    use aws_sdk_sqs::config::{BehaviorVersion, Region};
    let mut config = aws_sdk_sqs::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(env.region.clone()))
        .credentials_provider(env.credentials())
        .retry_config(RetryConfig::standard())
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(CONNECT_TIMEOUT)
                .build(),
        )
        .http_client(http);
    if let Some(endpoint) = cqrs_store::client::service_endpoint("SQS", lookup) {
        config = config.endpoint_url(endpoint);
    }
    aws_sdk_sqs::Client::from_conf(config.build())
}
