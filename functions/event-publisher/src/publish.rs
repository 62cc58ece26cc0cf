//! What the publisher sends and where: an [`Entry`] per event, the [`Publish`] trait, and its
//! production implementation [`SnsTopic`] (`PublishBatch` on the service's SNS FIFO topic).
//!
//! An entry is one SNS FIFO message (design39 1.3): message group
//! [`cqrs_keys::member_token`]`(pk, sk)` (the item: order per item, parallelism across items),
//! deduplication id the event `id` (the same for every delivery of one version), body the
//! CloudEvent JSON (raw delivery: the SQS body is the event), and three `String` message
//! attributes, `type`, `tenant` and `entity`, for subscription filter policies. An event whose
//! JSON is over [`MAX_EVENT_BYTES`] goes as a reference event
//! ([`cqrs_events::ChangeEvent::into_reference`]: no `data.state`, `stateref: "history"`).
//!
//! [`Publish::publish_batch`] tells a call that failed as a whole (`Err`: throttled, transport,
//! access denied) from entries that failed one by one (`Ok` with an `Err` per failed entry: SNS
//! answers HTTP 200 with a `Failed` list, each with its `Code`, `Message` and `SenderFault`).
//! [`PublishError::permanent`] tells an entry no retry can publish (the sender's fault and a code
//! of [`PERMANENT_SENDER_CODES`]: the entry itself is invalid) from everything else (throttling,
//! the topic's configuration, SNS's own faults, a code not known here): the publisher parks the
//! first and retries the rest.

use aws_sdk_sns::types::{MessageAttributeValue, PublishBatchRequestEntry};
use cqrs_events::ChangeEvent;
use futures::future::{BoxFuture, FutureExt};

/// The largest event JSON sent whole, in bytes (240 KiB): SNS takes 256 KiB per message,
/// attributes included, and as much per `PublishBatch` call; AppSync Events 240 KB. A larger
/// event goes as a reference event.
///
/// ```
/// assert_eq!(cqrs_event_publisher::MAX_EVENT_BYTES, 245_760);
/// ```
pub const MAX_EVENT_BYTES: usize = 240 * 1024;

/// The most bytes of one `PublishBatch` call, bodies and attributes of all its entries (256 KiB).
///
/// ```
/// assert_eq!(cqrs_event_publisher::MAX_CALL_BYTES, 262_144);
/// ```
pub const MAX_CALL_BYTES: usize = 256 * 1024;

/// The most entries of one `PublishBatch` call.
///
/// ```
/// assert_eq!(cqrs_event_publisher::MAX_CALL_ENTRIES, 10);
/// ```
pub const MAX_CALL_ENTRIES: usize = 10;

/// The codes of a failed `PublishBatch` entry that no retry can fix when SNS also says the sender
/// is at fault (`SenderFault: true`): the entry itself breaks a constraint of the request
/// (`InvalidParameter`, `ParameterValueInvalid` = InvalidParameterValueException,
/// `ValidationException`), so the same entry is refused again whatever the wait. Every other
/// sender fault is retried: throttling (`Throttled`, `KMSThrottling`), and the topic's
/// configuration, which an operator can fix and after which the same entry goes
/// (`AuthorizationError`, `NotFound`, `InvalidSecurity`, `KMSAccessDenied`, `KMSDisabled`,
/// `KMSInvalidState`, `KMSNotFound`, `KMSOptInRequired`, ...), as is a code not listed here.
///
/// ```
/// assert!(cqrs_event_publisher::PERMANENT_SENDER_CODES.contains(&"ParameterValueInvalid"));
/// assert!(!cqrs_event_publisher::PERMANENT_SENDER_CODES.contains(&"Throttled"));
/// ```
pub const PERMANENT_SENDER_CODES: &[&str] = &[
    "InvalidParameter",
    "ParameterValueInvalid",
    "ValidationException",
];

/// The message attributes of an entry (all of SNS data type `String`).
///
/// ```
/// let attributes = cqrs_event_publisher::Attributes {
///     event_type: "product.created".into(),
///     tenant: "t1".into(),
///     entity: "product".into(),
/// };
/// assert_eq!(attributes.pairs()[0], ("type", "product.created"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Attributes {
    /// `type`: the event's type (`<entity>.created|updated|deleted`).
    pub event_type: String,
    /// `tenant`: the item's tenant.
    pub tenant: String,
    /// `entity`: the item's entity.
    pub entity: String,
}

impl Attributes {
    /// `(name, value)` of each attribute, in the order `type`, `tenant`, `entity`.
    ///
    /// ```
    /// let attributes = cqrs_event_publisher::Attributes {
    ///     event_type: "order.updated".into(),
    ///     tenant: "t9".into(),
    ///     entity: "order".into(),
    /// };
    /// let names: Vec<&str> = attributes.pairs().iter().map(|(n, _)| *n).collect();
    /// assert_eq!(names, ["type", "tenant", "entity"]);
    /// ```
    pub fn pairs(&self) -> [(&'static str, &str); 3] {
        [
            ("type", self.event_type.as_str()),
            ("tenant", self.tenant.as_str()),
            ("entity", self.entity.as_str()),
        ]
    }
}

/// One message of the topic: one event.
///
/// ```
/// let feed = cqrs_events::Feed::new(cqrs_model::Model::example(), "urn:cqrs:shop");
/// let mut item = cqrs_item::Item::example().into_data_item();
/// item.entity = Some("product".into());
/// let event = feed.version_event(&item, None, chrono::Utc::now()).unwrap();
/// let entry = cqrs_event_publisher::Entry::of(&event).unwrap();
/// assert_eq!(entry.dedup_id, event.id);
/// assert_eq!(entry.group_id, cqrs_keys::member_token("PRODUCT#t1", "P001"));
/// assert_eq!(entry.body, serde_json::to_string(&event).unwrap());
/// assert!(!entry.reference);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Entry {
    /// `MessageGroupId`: [`cqrs_keys::member_token`] of the item's `pk` and `sk`.
    pub group_id: String,
    /// `MessageDeduplicationId`: the event `id`.
    pub dedup_id: String,
    /// The message: the CloudEvent JSON.
    pub body: String,
    /// The message attributes.
    pub attributes: Attributes,
    /// Whether the body is a reference event (the whole event was over [`MAX_EVENT_BYTES`]).
    pub reference: bool,
}

impl Entry {
    /// The entry of `event`: the event's JSON, or, when that is over [`MAX_EVENT_BYTES`], the
    /// JSON of its reference event.
    ///
    /// ```
    /// let feed = cqrs_events::Feed::new(cqrs_model::Model::example(), "urn:cqrs:shop");
    /// let mut item = cqrs_item::Item::example().into_data_item();
    /// item.entity = Some("product".into());
    /// item.attributes.insert("blob".into(), cqrs_item::Value::from("x".repeat(300_000)));
    /// let event = feed.version_event(&item, None, chrono::Utc::now()).unwrap();
    /// let entry = cqrs_event_publisher::Entry::of(&event).unwrap();
    /// assert!(entry.reference);
    /// let sent: serde_json::Value = serde_json::from_str(&entry.body).unwrap();
    /// assert_eq!(sent["stateref"], "history");
    /// assert!(sent["data"].get("state").is_none());
    /// ```
    ///
    /// # Errors
    ///
    /// The event does not serialise (it always does: its state is an item read from JSON).
    pub fn of(event: &ChangeEvent) -> Result<Entry, serde_json::Error> {
        let mut body = serde_json::to_string(event)?;
        let mut reference = false;
        if body.len() > MAX_EVENT_BYTES {
            body = serde_json::to_string(&event.clone().into_reference())?;
            reference = true;
        }
        Ok(Entry {
            group_id: cqrs_keys::member_token(&event.data.pk, &event.data.sk),
            dedup_id: event.id.clone(),
            body,
            attributes: Attributes {
                event_type: event.event_type.clone(),
                tenant: event.tenant.clone(),
                entity: event.entity.clone(),
            },
            reference,
        })
    }

    /// The bytes the entry counts for in a call's 256 KiB: the body, and each attribute's name,
    /// data type (`String`) and value.
    ///
    /// ```
    /// let entry = cqrs_event_publisher::Entry {
    ///     group_id: "g".into(),
    ///     dedup_id: "d".into(),
    ///     body: "{}".into(),
    ///     attributes: cqrs_event_publisher::Attributes {
    ///         event_type: "a.created".into(),
    ///         tenant: "t1".into(),
    ///         entity: "a".into(),
    ///     },
    ///     reference: false,
    /// };
    /// assert_eq!(entry.size(), 2 + (4 + 6 + 9) + (6 + 6 + 2) + (6 + 6 + 1));
    /// ```
    pub fn size(&self) -> usize {
        self.body.len()
            + self
                .attributes
                .pairs()
                .iter()
                .map(|(name, value)| name.len() + "String".len() + value.len())
                .sum::<usize>()
    }
}

/// Why an entry or a call was not published.
///
/// ```
/// let error = cqrs_event_publisher::PublishError::new("Throttled", "rate exceeded");
/// assert_eq!(error.to_string(), "Throttled: rate exceeded");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct PublishError {
    /// The service's error code (`Throttled`, `InternalError`, ...), or what failed locally.
    pub code: String,
    /// The service's message.
    pub message: String,
    /// Whether the service says the caller is at fault (`SenderFault` of a failed entry).
    pub sender_fault: bool,
}

impl PublishError {
    /// An error of `code` with `message`.
    ///
    /// ```
    /// let error = cqrs_event_publisher::PublishError::new("InternalError", "try again");
    /// assert_eq!(error.code, "InternalError");
    /// ```
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        PublishError {
            code: code.into(),
            message: message.into(),
            sender_fault: false,
        }
    }

    /// An error of `code` with `message` the service puts on the sender (`SenderFault: true`).
    ///
    /// ```
    /// let error = cqrs_event_publisher::PublishError::sender("ParameterValueInvalid", "bad");
    /// assert!(error.sender_fault);
    /// ```
    pub fn sender(code: impl Into<String>, message: impl Into<String>) -> Self {
        PublishError {
            sender_fault: true,
            ..PublishError::new(code, message)
        }
    }

    /// Whether no retry can publish the entry: SNS put the failure on the sender and its code is
    /// one of [`PERMANENT_SENDER_CODES`]. Throttling, configuration errors, SNS's own faults and
    /// unknown codes are not permanent (retried).
    ///
    /// ```
    /// use cqrs_event_publisher::PublishError;
    /// assert!(PublishError::sender("ParameterValueInvalid", "bad").permanent());
    /// assert!(!PublishError::sender("Throttled", "slow down").permanent());
    /// assert!(!PublishError::sender("KMSDisabled", "key disabled").permanent());
    /// assert!(!PublishError::new("ParameterValueInvalid", "not the sender's fault").permanent());
    /// ```
    pub fn permanent(&self) -> bool {
        self.sender_fault && PERMANENT_SENDER_CODES.contains(&self.code.as_str())
    }
}

/// The answer of one [`Publish::publish_batch`]: `Err` when the call failed as a whole, else one
/// result per entry, in the entries' order.
///
/// ```
/// use cqrs_event_publisher::{CallResult, PublishError};
/// let partly: CallResult = Ok(vec![Ok(()), Err(PublishError::new("InternalError", "retry"))]);
/// let whole: CallResult = Err(PublishError::new("Throttled", "slow down"));
/// assert_eq!(partly.unwrap().iter().filter(|r| r.is_err()).count(), 1);
/// assert!(whole.is_err());
/// ```
pub type CallResult = Result<Vec<Result<(), PublishError>>, PublishError>;

/// Where entries go: one `PublishBatch`-like call of at most [`MAX_CALL_ENTRIES`] entries of
/// distinct message groups and at most [`MAX_CALL_BYTES`]. [`SnsTopic`] in production,
/// [`crate::Recorder`] in tests and locally.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use cqrs_event_publisher::{Publish, Recorder};
/// let recorder = Recorder::new();
/// let results = recorder.publish_batch(&[]).await.unwrap();
/// assert!(results.is_empty());
/// # }
/// ```
pub trait Publish: Send + Sync {
    /// Publishes `entries` in one call (see [`CallResult`]).
    fn publish_batch<'a>(&'a self, entries: &'a [Entry]) -> BoxFuture<'a, CallResult>;
}

/// The service's SNS FIFO topic (`EVENTS_TOPIC_ARN`), published to with `PublishBatch`.
///
/// ```
/// let env = cqrs_store::client::ClientEnv::from_lookup(|name| {
///     (name != "CQRS_TLS_ROOTS").then(|| format!("value-of-{name}"))
/// })
/// .unwrap();
/// let http = cqrs_store::client::http_client(env.tls_roots).unwrap();
/// let client = cqrs_event_publisher::SnsTopic::client(&env, http, Some("http://127.0.0.1:4566".into()));
/// let topic = cqrs_event_publisher::SnsTopic::new(client, "arn:aws:sns:eu-west-1:1:shop-events.fifo");
/// assert_eq!(topic.arn(), "arn:aws:sns:eu-west-1:1:shop-events.fifo");
/// ```
#[derive(Debug, Clone)]
pub struct SnsTopic {
    client: aws_sdk_sns::Client,
    arn: String,
}

impl SnsTopic {
    /// The topic `arn` through `client`.
    ///
    /// ```
    /// # fn wire(client: aws_sdk_sns::Client) {
    /// let topic = cqrs_event_publisher::SnsTopic::new(client, "arn:aws:sns:eu-west-1:1:t.fifo");
    /// # }
    /// ```
    pub fn new(client: aws_sdk_sns::Client, arn: impl Into<String>) -> Self {
        SnsTopic {
            client,
            arn: arn.into(),
        }
    }

    /// The topic's ARN.
    ///
    /// ```
    /// # fn wire(client: aws_sdk_sns::Client) {
    /// let topic = cqrs_event_publisher::SnsTopic::new(client, "arn:aws:sns:eu-west-1:1:t.fifo");
    /// assert!(topic.arn().ends_with(".fifo"));
    /// # }
    /// ```
    pub fn arn(&self) -> &str {
        &self.arn
    }

    /// The SNS client of the function's environment, built as
    /// [`cqrs_store::client::ClientEnv::client`] builds DynamoDB's (region, credentials,
    /// `http`, standard retry, the SDK's connect timeout), at `endpoint`
    /// ([`cqrs_store::client::service_endpoint`]`("SNS", ..)`; `None`: the region's).
    ///
    /// ```
    /// let env = cqrs_store::client::ClientEnv::from_lookup(|name| {
    ///     (name != "CQRS_TLS_ROOTS").then(|| format!("value-of-{name}"))
    /// })
    /// .unwrap();
    /// let http = cqrs_store::client::http_client(env.tls_roots).unwrap();
    /// let client = cqrs_event_publisher::SnsTopic::client(&env, http, None);
    /// assert_eq!(client.config().retry_config().map(|r| r.max_attempts()), Some(3));
    /// ```
    pub fn client(
        env: &cqrs_store::client::ClientEnv,
        http: aws_sdk_sns::config::SharedHttpClient,
        endpoint: Option<String>,
    ) -> aws_sdk_sns::Client {
        use aws_sdk_sns::config::retry::RetryConfig;
        use aws_sdk_sns::config::timeout::TimeoutConfig;
        use aws_sdk_sns::config::{BehaviorVersion, Region};
        let mut config = aws_sdk_sns::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new(env.region.clone()))
            .credentials_provider(env.credentials())
            .retry_config(RetryConfig::standard())
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(std::time::Duration::from_millis(3100))
                    .build(),
            )
            .http_client(http);
        if let Some(endpoint) = endpoint {
            config = config.endpoint_url(endpoint);
        }
        aws_sdk_sns::Client::from_conf(config.build())
    }

    /// One `PublishBatch` request entry of `entry`, id `id`.
    fn request_entry(id: usize, entry: &Entry) -> Result<PublishBatchRequestEntry, PublishError> {
        let mut builder = PublishBatchRequestEntry::builder()
            .id(id.to_string())
            .message(entry.body.clone())
            .message_group_id(entry.group_id.clone())
            .message_deduplication_id(entry.dedup_id.clone());
        // SNS refuses an empty String attribute: an empty one is left out (a filter policy on it
        // then sees the attribute absent).
        for (name, value) in entry.attributes.pairs() {
            if value.is_empty() {
                continue;
            }
            let attribute = MessageAttributeValue::builder()
                .data_type("String")
                .string_value(value)
                .build()
                .map_err(|e| PublishError::new("BuildError", e.to_string()))?;
            builder = builder.message_attributes(name, attribute);
        }
        builder
            .build()
            .map_err(|e| PublishError::new("BuildError", e.to_string()))
    }
}

impl Publish for SnsTopic {
    fn publish_batch<'a>(&'a self, entries: &'a [Entry]) -> BoxFuture<'a, CallResult> {
        async move {
            if entries.is_empty() {
                return Ok(Vec::new());
            }
            let request: Vec<PublishBatchRequestEntry> = entries
                .iter()
                .enumerate()
                .map(|(id, entry)| SnsTopic::request_entry(id, entry))
                .collect::<Result<_, _>>()?;
            let output = self
                .client
                .publish_batch()
                .topic_arn(&self.arn)
                .set_publish_batch_request_entries(Some(request))
                .send()
                .await
                .map_err(|e| {
                    use aws_sdk_sns::error::ProvideErrorMetadata;
                    PublishError::new(
                        e.code().unwrap_or("PublishBatch"),
                        aws_sdk_sns::error::DisplayErrorContext(&e).to_string(),
                    )
                })?;
            // HTTP 200 says nothing about the entries: each is in `Successful` or `Failed`.
            let mut results: Vec<Result<(), PublishError>> = entries
                .iter()
                .map(|_| {
                    Err(PublishError::new(
                        "NoResult",
                        "PublishBatch answered neither success nor failure for the entry",
                    ))
                })
                .collect();
            for ok in output.successful() {
                if let Some(slot) = ok
                    .id()
                    .and_then(|id| id.parse::<usize>().ok())
                    .and_then(|id| results.get_mut(id))
                {
                    *slot = Ok(());
                }
            }
            for failed in output.failed() {
                if let Some(slot) = failed
                    .id()
                    .parse::<usize>()
                    .ok()
                    .and_then(|id| results.get_mut(id))
                {
                    let message = failed.message().unwrap_or("no message");
                    *slot = Err(if failed.sender_fault() {
                        PublishError::sender(failed.code(), message)
                    } else {
                        PublishError::new(failed.code(), message)
                    });
                }
            }
            Ok(results)
        }
        .boxed()
    }
}
