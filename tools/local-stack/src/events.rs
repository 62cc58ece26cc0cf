//! The local stack's change feed (`cqrs dev`, for a service with `src/bin/event-publisher.rs`), on
//! moto's SNS and SQS ([`crate::moto`]), configured as the template configures AWS's, from the
//! service's `model.toml` so that the two cannot drift:
//!
//! - the topic `<prefix>-events.fifo` (FIFO, no content-based deduplication: the publisher gives
//!   each event its deduplication id);
//! - per consumer (`[consumers.<name>]`): its queue `<prefix>-<name>.fifo` (visibility timeout
//!   six times the function's timeout, redrive to the dead-letter queue after `max_receive + 2`
//!   receives: the runtime parks an event itself at `max_receive`), its dead-letter queue
//!   `<prefix>-<name>-dlq.fifo` (14 days), and a raw subscription of the queue to the topic,
//!   filtered on the `entity` message attribute when the consumer names `entities`;
//! - a local-only queue `<prefix>-dev-tap.fifo`, subscribed raw to every event: what
//!   `cqrs dev events` prints ([`tail`]).
//!
//! What the functions need is in [`Feed::functions_env`] (`cargo lambda watch` gives every function
//! one environment, so each consumer's dead-letter queue and attempts are named by the consumer:
//! `CONSUMER_DLQ_URL_<NAME>`, `CONSUMER_MAX_RECEIVE_<NAME>`); what a test or a script needs to
//! reach the feed from outside is in the state folder's `events.env` ([`Feed::env_file`],
//! [`read_env`]).
//!
//! ```no_run
//! # async fn example(model: cqrs_model::Model) -> Result<(), String> {
//! use cqrs_local_stack::events::Feed;
//! let feed = Feed::create("http://127.0.0.1:5000", "local", model.consumers()).await?;
//! println!("{}", feed.topic_arn); // arn:aws:sns:us-east-1:123456789012:local-events.fifo
//! # Ok(()) }
//! ```

use std::collections::HashMap;
use std::future::Future;
use std::path::Path;
use std::time::{Duration, Instant};

use aws_sdk_sqs::types::QueueAttributeName;
use cqrs_model::ConsumerFunction;
use serde_json::Value;

use crate::sqs_mapper::{SqsMapper, SqsMapperConfig};

/// The file of the state folder that says where the feed is (`KEY=value` lines).
pub const EVENTS_ENV: &str = "events.env";

/// How long a dead-letter queue keeps a message: 14 days, SQS's longest.
const DLQ_RETENTION_SECONDS: u32 = 14 * 24 * 3600;

/// The topic's name for `prefix`.
///
/// ```
/// assert_eq!(cqrs_local_stack::events::topic_name("local"), "local-events.fifo");
/// ```
pub fn topic_name(prefix: &str) -> String {
    format!("{prefix}-events.fifo")
}

/// The queue of consumer `name`.
///
/// ```
/// assert_eq!(cqrs_local_stack::events::queue_name("local", "order-audit"), "local-order-audit.fifo");
/// ```
pub fn queue_name(prefix: &str, name: &str) -> String {
    format!("{prefix}-{name}.fifo")
}

/// The dead-letter queue of consumer `name`.
///
/// ```
/// assert_eq!(cqrs_local_stack::events::dead_letter_queue_name("local", "order-audit"), "local-order-audit-dlq.fifo");
/// ```
pub fn dead_letter_queue_name(prefix: &str, name: &str) -> String {
    format!("{prefix}-{name}-dlq.fifo")
}

/// The local-only queue `cqrs dev events` reads.
///
/// ```
/// assert_eq!(cqrs_local_stack::events::tap_queue_name("local"), "local-dev-tap.fifo");
/// ```
pub fn tap_queue_name(prefix: &str) -> String {
    format!("{prefix}-dev-tap.fifo")
}

/// The suffix of a consumer's own variables (`CONSUMER_DLQ_URL_<NAME>`): its name upper-cased,
/// `-` as `_`.
///
/// ```
/// assert_eq!(cqrs_local_stack::events::env_suffix("order-audit"), "ORDER_AUDIT");
/// ```
pub fn env_suffix(name: &str) -> String {
    name.to_ascii_uppercase().replace('-', "_")
}

/// The events' `source` locally (`CQRS_EVENT_SOURCE`; the stack's name in AWS).
///
/// ```
/// assert_eq!(cqrs_local_stack::events::event_source("e2e"), "local-e2e");
/// ```
pub fn event_source(prefix: &str) -> String {
    format!("local-{prefix}")
}

/// A consumer's queues, as created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerQueues {
    /// The consumer (its function's name).
    pub name: String,
    /// Its queue's URL.
    pub queue_url: String,
    /// Its queue's ARN.
    pub queue_arn: String,
    /// Its dead-letter queue's URL.
    pub dlq_url: String,
    /// Its `max_receive`.
    pub max_receive: u32,
    /// The entities its subscription lets through (`None`: all).
    pub entities: Option<Vec<String>>,
}

/// The feed of a local stack, as created ([`Feed::create`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Feed {
    /// moto's endpoint (SNS and SQS).
    pub endpoint: String,
    /// The topic's ARN (`EVENTS_TOPIC_ARN`).
    pub topic_arn: String,
    /// The events' `source` (`CQRS_EVENT_SOURCE`).
    pub source: String,
    /// The tap queue's URL (`cqrs dev events`).
    pub tap_url: String,
    /// Each consumer's queues.
    pub consumers: Vec<ConsumerQueues>,
}

impl Feed {
    /// Creates the topic, the tap queue, and each of `consumers`' queues and subscription on the
    /// moto server at `endpoint`, named with `prefix` (see the module documentation).
    pub async fn create(
        endpoint: &str,
        prefix: &str,
        consumers: &[ConsumerFunction],
    ) -> Result<Feed, String> {
        let sns = crate::moto::sns_client(endpoint);
        let sqs = crate::moto::sqs_client(endpoint);
        let topic_arn = sns
            .create_topic()
            .name(topic_name(prefix))
            .attributes("FifoTopic", "true")
            .attributes("ContentBasedDeduplication", "false")
            .send()
            .await
            .map_err(|e| format!("creating the topic: {}", sns_error(e)))?
            .topic_arn
            .ok_or("creating the topic: no ARN in the answer")?;

        let (tap_url, tap_arn) = fifo_queue(&sqs, &tap_queue_name(prefix), &[]).await?;
        subscribe(&sns, &topic_arn, &tap_arn, None, None).await?;

        let mut queues = Vec::new();
        for consumer in consumers {
            let (dlq_url, dlq_arn) = fifo_queue(
                &sqs,
                &dead_letter_queue_name(prefix, &consumer.name),
                &[(
                    QueueAttributeName::MessageRetentionPeriod,
                    DLQ_RETENTION_SECONDS.to_string(),
                )],
            )
            .await?;
            let redrive = serde_json::json!({
                "deadLetterTargetArn": dlq_arn,
                "maxReceiveCount": consumer.max_receive + 2,
            });
            let (queue_url, queue_arn) = fifo_queue(
                &sqs,
                &queue_name(prefix, &consumer.name),
                &[
                    (
                        QueueAttributeName::VisibilityTimeout,
                        consumer.visibility_timeout().to_string(),
                    ),
                    (QueueAttributeName::RedrivePolicy, redrive.to_string()),
                    (
                        QueueAttributeName::DeduplicationScope,
                        "messageGroup".into(),
                    ),
                    (
                        QueueAttributeName::FifoThroughputLimit,
                        "perMessageGroupId".into(),
                    ),
                ],
            )
            .await?;
            subscribe(
                &sns,
                &topic_arn,
                &queue_arn,
                consumer.entities.as_deref(),
                Some(&dlq_arn),
            )
            .await?;
            queues.push(ConsumerQueues {
                name: consumer.name.clone(),
                queue_url,
                queue_arn,
                dlq_url,
                max_receive: consumer.max_receive,
                entities: consumer.entities.clone(),
            });
        }
        Ok(Feed {
            endpoint: endpoint.to_string(),
            topic_arn,
            source: event_source(prefix),
            tap_url,
            consumers: queues,
        })
    }

    /// What the functions get: moto's endpoint for SNS and SQS, the topic, the events' source,
    /// and each consumer's dead-letter queue and attempts under its own name.
    ///
    /// ```
    /// # let feed = cqrs_local_stack::events::Feed::example();
    /// let env = feed.functions_env();
    /// assert!(env.contains(&("CONSUMER_MAX_RECEIVE_ORDER_AUDIT".into(), "5".into())));
    /// assert!(env.iter().any(|(k, _)| k == "EVENTS_TOPIC_ARN"));
    /// ```
    pub fn functions_env(&self) -> Vec<(String, String)> {
        let mut env = vec![
            ("AWS_ENDPOINT_URL_SNS".to_string(), self.endpoint.clone()),
            ("AWS_ENDPOINT_URL_SQS".to_string(), self.endpoint.clone()),
            ("EVENTS_TOPIC_ARN".to_string(), self.topic_arn.clone()),
            ("CQRS_EVENT_SOURCE".to_string(), self.source.clone()),
        ];
        for consumer in &self.consumers {
            let suffix = env_suffix(&consumer.name);
            env.push((
                format!("CONSUMER_DLQ_URL_{suffix}"),
                consumer.dlq_url.clone(),
            ));
            env.push((
                format!("CONSUMER_MAX_RECEIVE_{suffix}"),
                consumer.max_receive.to_string(),
            ));
        }
        env
    }

    /// The text of `events.env`: [`Feed::functions_env`], the tap queue (`DEV_TAP_QUEUE_URL`) and
    /// each consumer's queue (`CONSUMER_QUEUE_URL_<NAME>`), one `KEY=value` a line.
    ///
    /// ```
    /// # let feed = cqrs_local_stack::events::Feed::example();
    /// let text = feed.env_file();
    /// assert!(text.contains("DEV_TAP_QUEUE_URL=http://127.0.0.1:5000/123456789012/local-dev-tap.fifo\n"));
    /// assert!(text.contains("CONSUMER_QUEUE_URL_ORDER_AUDIT="));
    /// ```
    pub fn env_file(&self) -> String {
        let mut env = self.functions_env();
        env.push(("DEV_TAP_QUEUE_URL".to_string(), self.tap_url.clone()));
        for consumer in &self.consumers {
            env.push((
                format!("CONSUMER_QUEUE_URL_{}", env_suffix(&consumer.name)),
                consumer.queue_url.clone(),
            ));
        }
        env.iter().map(|(k, v)| format!("{k}={v}\n")).collect()
    }

    /// One line per topic and queue, for `cqrs dev`'s summary.
    ///
    /// ```
    /// # let feed = cqrs_local_stack::events::Feed::example();
    /// let lines = feed.lines();
    /// assert!(lines[0].starts_with("topic"));
    /// assert!(lines.iter().any(|l| l.contains("local-order-audit.fifo") && l.contains("order")));
    /// ```
    pub fn lines(&self) -> Vec<String> {
        let name = |url: &str| url.rsplit('/').next().unwrap_or(url).to_string();
        let mut lines = vec![
            format!("topic            {} (moto)", self.topic_arn),
            format!(
                "queue            {} <- topic, every event (cqrs dev events)",
                name(&self.tap_url)
            ),
        ];
        for consumer in &self.consumers {
            let filter = match &consumer.entities {
                Some(entities) => format!("entities {}", entities.join(", ")),
                None => "every event".to_string(),
            };
            lines.push(format!(
                "queue            {} <- topic, {filter}; dead letters {}",
                name(&consumer.queue_url),
                name(&consumer.dlq_url)
            ));
        }
        lines
    }

    /// A feed as [`Feed::create`] answers it for `local` and one consumer `order-audit` of
    /// orders, for examples.
    #[doc(hidden)]
    pub fn example() -> Feed {
        let base = "http://127.0.0.1:5000/123456789012";
        Feed {
            endpoint: "http://127.0.0.1:5000".into(),
            topic_arn: "arn:aws:sns:us-east-1:123456789012:local-events.fifo".into(),
            source: event_source("local"),
            tap_url: format!("{base}/local-dev-tap.fifo"),
            consumers: vec![ConsumerQueues {
                name: "order-audit".into(),
                queue_url: format!("{base}/local-order-audit.fifo"),
                queue_arn: "arn:aws:sqs:us-east-1:123456789012:local-order-audit.fifo".into(),
                dlq_url: format!("{base}/local-order-audit-dlq.fifo"),
                max_receive: 5,
                entities: Some(vec!["order".into()]),
            }],
        }
    }
}

/// A FIFO queue named `name` with `attributes`; answers its URL and ARN.
async fn fifo_queue(
    sqs: &aws_sdk_sqs::Client,
    name: &str,
    attributes: &[(QueueAttributeName, String)],
) -> Result<(String, String), String> {
    let mut create = sqs
        .create_queue()
        .queue_name(name)
        .attributes(QueueAttributeName::FifoQueue, "true")
        .attributes(QueueAttributeName::ContentBasedDeduplication, "false");
    for (key, value) in attributes {
        create = create.attributes(key.clone(), value);
    }
    let url = create
        .send()
        .await
        .map_err(|e| format!("creating the queue {name}: {}", sqs_error(e)))?
        .queue_url
        .ok_or_else(|| format!("creating the queue {name}: no URL in the answer"))?;
    let arn = queue_arn(sqs, &url).await?;
    Ok((url, arn))
}

/// The ARN of the queue at `url`.
async fn queue_arn(sqs: &aws_sdk_sqs::Client, url: &str) -> Result<String, String> {
    sqs.get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .map_err(|e| format!("reading the ARN of {url}: {}", sqs_error(e)))?
        .attributes
        .and_then(|mut a| a.remove(&QueueAttributeName::QueueArn))
        .ok_or_else(|| format!("reading the ARN of {url}: none in the answer"))
}

/// Subscribes the queue `queue_arn` to `topic_arn`: raw delivery, the `entity` filter when
/// `entities` are given, the subscription's own dead letters to `dlq_arn`.
async fn subscribe(
    sns: &aws_sdk_sns::Client,
    topic_arn: &str,
    queue_arn: &str,
    entities: Option<&[String]>,
    dlq_arn: Option<&str>,
) -> Result<(), String> {
    let mut subscribe = sns
        .subscribe()
        .topic_arn(topic_arn)
        .protocol("sqs")
        .endpoint(queue_arn)
        .attributes("RawMessageDelivery", "true");
    if let Some(entities) = entities {
        subscribe = subscribe
            .attributes(
                "FilterPolicy",
                serde_json::json!({ "entity": entities }).to_string(),
            )
            .attributes("FilterPolicyScope", "MessageAttributes");
    }
    if let Some(dlq_arn) = dlq_arn {
        subscribe = subscribe.attributes(
            "RedrivePolicy",
            serde_json::json!({ "deadLetterTargetArn": dlq_arn }).to_string(),
        );
    }
    subscribe
        .send()
        .await
        .map_err(|e| format!("subscribing {queue_arn}: {}", sns_error(e)))?;
    Ok(())
}

fn sns_error<E: std::error::Error + 'static>(error: aws_sdk_sns::error::SdkError<E>) -> String {
    aws_sdk_sns::error::DisplayErrorContext(&error).to_string()
}

fn sqs_error<E: std::error::Error + 'static>(error: aws_sdk_sqs::error::SdkError<E>) -> String {
    aws_sdk_sqs::error::DisplayErrorContext(&error).to_string()
}

/// The `KEY=value` lines of `state`'s `events.env` (written by `cqrs dev up` when the stack has
/// a change feed).
///
/// ```
/// let err = cqrs_local_stack::events::read_env("/nonexistent".as_ref()).unwrap_err();
/// assert!(err.contains("no change feed"), "{err}");
/// ```
pub fn read_env(state: &Path) -> Result<HashMap<String, String>, String> {
    let path = state.join(EVENTS_ENV);
    let text = std::fs::read_to_string(&path).map_err(|e| {
        format!(
            "{}: {e}: the local stack is not running, or it has no change feed (no src/bin/event-publisher.rs)",
            path.display()
        )
    })?;
    Ok(text
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect())
}

/// One event as `cqrs dev events` prints it: `time type subject v<version> id`.
///
/// ```
/// let event = serde_json::json!({"id": "e1", "type": "order.created", "subject": "ORDER#t1/ORDER#1",
///     "time": "2026-11-28T02:00:00Z", "itemversion": 1, "tenant": "t1"});
/// assert_eq!(
///     cqrs_local_stack::events::event_line(&event),
///     "2026-11-28T02:00:00Z order.created ORDER#t1/ORDER#1 v1 e1"
/// );
/// ```
pub fn event_line(event: &Value) -> String {
    let text = |name: &str| event.get(name).and_then(Value::as_str).unwrap_or("-");
    let version = event
        .get("itemversion")
        .map(|v| v.to_string())
        .unwrap_or_else(|| "-".into());
    format!(
        "{} {} {} v{version} {}",
        text("time"),
        text("type"),
        text("subject"),
        text("id")
    )
}

/// How [`tail`] prints and when it stops.
#[derive(Debug, Clone, Default)]
pub struct TailOptions {
    /// The whole event (its JSON, one line) instead of [`event_line`].
    pub json: bool,
    /// Stop after this many events.
    pub count: Option<usize>,
    /// Stop after this long.
    pub timeout: Option<Duration>,
}

/// Reads the tap queue at `tap_url` and hands each event to `out` ([`event_line`], or its JSON
/// with [`TailOptions::json`]), deleting it once handed on, until `until` completes (Ctrl-C),
/// [`TailOptions::count`] events were handed on, or [`TailOptions::timeout`] passed. Answers how
/// many events it handed on. A body that is not JSON is handed on as it is.
pub async fn tail(
    sqs: &aws_sdk_sqs::Client,
    tap_url: &str,
    options: &TailOptions,
    until: impl Future<Output = ()>,
    mut out: impl FnMut(String),
) -> Result<usize, String> {
    tokio::pin!(until);
    let started = Instant::now();
    let mut seen = 0;
    loop {
        if options.count.is_some_and(|n| seen >= n)
            || options.timeout.is_some_and(|t| started.elapsed() >= t)
        {
            return Ok(seen);
        }
        let wanted = options.count.map_or(10, |n| (n - seen).min(10)).max(1) as i32;
        let receive = sqs
            .receive_message()
            .queue_url(tap_url)
            .max_number_of_messages(wanted)
            .wait_time_seconds(1)
            .send();
        let messages = tokio::select! {
            _ = &mut until => return Ok(seen),
            answer = receive => answer
                .map_err(|e| format!("receiving from {tap_url}: {}", sqs_error(e)))?
                .messages
                .unwrap_or_default(),
        };
        for message in messages {
            let body = message.body.unwrap_or_default();
            let line = match serde_json::from_str::<Value>(&body) {
                Ok(event) if options.json => event.to_string(),
                Ok(event) => event_line(&event),
                Err(_) => body,
            };
            out(line);
            seen += 1;
            if let Some(handle) = message.receipt_handle {
                sqs.delete_message()
                    .queue_url(tap_url)
                    .receipt_handle(handle)
                    .send()
                    .await
                    .map_err(|e| format!("deleting from {tap_url}: {}", sqs_error(e)))?;
            }
        }
    }
}

/// Plays a consumer's SQS event source mapping until SIGTERM or Ctrl-C: reads the queue at
/// `queue_url` (on `AWS_ENDPOINT_URL_SQS`) and invokes `function` at `api` (`cargo lambda watch`)
/// with batches of the consumer's `batch_size`, its queue's visibility timeout, as
/// [`SqsMapper`] settles them. The settings are the consumer's in `model.toml` of the current
/// folder (the service's), as the template's.
pub async fn sqs_mapper(queue_url: &str, api: &str, function: &str) -> Result<(), String> {
    let text = std::fs::read_to_string("model.toml")
        .map_err(|e| format!("reading model.toml (run in the service's folder): {e}"))?;
    let model = cqrs_model::Model::parse(&text).map_err(|e| format!("model.toml: {e}"))?;
    let consumer = model
        .consumer(function)
        .ok_or_else(|| format!("model.toml has no [consumers.{function}]"))?;
    let endpoint = std::env::var("AWS_ENDPOINT_URL_SQS")
        .map_err(|_| "AWS_ENDPOINT_URL_SQS is not set (moto's endpoint)".to_string())?;
    let sqs = crate::moto::sqs_client(&endpoint);
    let queue_arn = queue_arn(&sqs, queue_url).await?;
    let mut config = SqsMapperConfig::new(queue_url, &queue_arn);
    config.batch_size = consumer.batch_size as i32;
    config.visibility_timeout = Duration::from_secs(consumer.visibility_timeout().into());
    let invoker = crate::invoke::HttpInvoker::new(api, function, &queue_arn);
    println!(
        "sqs-mapper: {queue_url} -> {function} at {api} (batch size {}, visibility timeout {:?})",
        config.batch_size, config.visibility_timeout
    );
    let mut mapper = SqsMapper::new(config);
    let shutdown = crate::stack::shutdown_signal();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => {
                println!("sqs-mapper: stopping");
                return Ok(());
            }
            report = mapper.poll(&sqs, &invoker) => match report {
                Ok(report) if report.received > 0 => println!(
                    "sqs-mapper: {} message(s) to {function}: {} done, {} reported{}",
                    report.received,
                    report.deleted,
                    report.reported,
                    if report.failed { ", the invocation failed" } else { "" }
                ),
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(%error, "could not read or settle the queue; retrying");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_sns::types::MessageAttributeValue;

    const MODEL: &str = r#"
[entities.order]
pk = "ORDER#{tenant}"
sk = "{orderId}"
attributes.orderId = { type = "string", required = true }

[entities.product]
pk = "PRODUCT#{tenant}"
sk = "{code}"
attributes.code = { type = "string", required = true }

[consumers.order-audit]
entities = ["order"]
max_receive = 3
timeout = 20

[consumers.all-audit]
"#;

    fn event(entity: &str, id: &str, version: i64) -> Value {
        serde_json::json!({
            "specversion": "1.0", "id": id, "source": "local-t", "type": format!("{entity}.created"),
            "subject": format!("{}#t1/{id}", entity.to_uppercase()), "time": "2026-11-28T02:00:00Z",
            "tenant": "t1", "entity": entity, "itemversion": version,
        })
    }

    async fn publish(sns: &aws_sdk_sns::Client, topic: &str, event: &Value) {
        let attribute = |v: &Value| {
            MessageAttributeValue::builder()
                .data_type("String")
                .string_value(v.as_str().unwrap())
                .build()
                .unwrap()
        };
        sns.publish()
            .topic_arn(topic)
            .message(event.to_string())
            .message_group_id(event["subject"].as_str().unwrap())
            .message_deduplication_id(event["id"].as_str().unwrap())
            .message_attributes("entity", attribute(&event["entity"]))
            .message_attributes("tenant", attribute(&event["tenant"]))
            .message_attributes("type", attribute(&event["type"]))
            .send()
            .await
            .unwrap();
    }

    /// The events' ids one receive of the queue at `url` finds (up to 10, within a few seconds).
    async fn ids(sqs: &aws_sdk_sqs::Client, url: &str) -> Vec<String> {
        let mut ids = Vec::new();
        for _ in 0..3 {
            let answer = sqs
                .receive_message()
                .queue_url(url)
                .max_number_of_messages(10)
                .wait_time_seconds(1)
                .send()
                .await
                .unwrap();
            for message in answer.messages.unwrap_or_default() {
                let body: Value = serde_json::from_str(message.body().unwrap()).unwrap();
                ids.push(body["id"].as_str().unwrap().to_string());
                sqs.delete_message()
                    .queue_url(url)
                    .receipt_handle(message.receipt_handle().unwrap())
                    .send()
                    .await
                    .unwrap();
            }
        }
        ids.sort();
        ids
    }

    #[tokio::test]
    async fn the_feed_routes_each_event_to_the_tap_and_to_the_consumers_that_want_it() {
        let moto = crate::moto::Throwaway::start("events-feed").unwrap();
        let model = cqrs_model::Model::parse(MODEL).unwrap();
        let feed = Feed::create(&moto.endpoint(), "t", model.consumers())
            .await
            .unwrap();
        assert_eq!(
            feed.topic_arn,
            "arn:aws:sns:us-east-1:123456789012:t-events.fifo"
        );
        let sqs = moto.sqs();
        let audit = feed
            .consumers
            .iter()
            .find(|c| c.name == "order-audit")
            .unwrap();
        let attributes = sqs
            .get_queue_attributes()
            .queue_url(&audit.queue_url)
            .attribute_names(QueueAttributeName::All)
            .send()
            .await
            .unwrap()
            .attributes
            .unwrap();
        assert_eq!(attributes[&QueueAttributeName::VisibilityTimeout], "120");
        let redrive: Value =
            serde_json::from_str(&attributes[&QueueAttributeName::RedrivePolicy]).unwrap();
        assert_eq!(redrive["maxReceiveCount"], 5, "max_receive + 2: {redrive}");
        assert!(
            redrive["deadLetterTargetArn"]
                .as_str()
                .unwrap()
                .ends_with(":t-order-audit-dlq.fifo")
        );
        let env = feed.functions_env();
        assert!(env.contains(&("CONSUMER_MAX_RECEIVE_ORDER_AUDIT".into(), "3".into())));
        assert!(env.contains(&(
            "CONSUMER_DLQ_URL_ALL_AUDIT".into(),
            feed.consumers[0].dlq_url.clone()
        )));

        let sns = moto.sns();
        let (order, product) = (event("order", "o1", 1), event("product", "p1", 1));
        publish(&sns, &feed.topic_arn, &order).await;
        publish(&sns, &feed.topic_arn, &product).await;

        assert_eq!(
            ids(&sqs, &audit.queue_url).await,
            ["o1"],
            "order-audit: orders only"
        );
        let all = feed
            .consumers
            .iter()
            .find(|c| c.name == "all-audit")
            .unwrap();
        assert_eq!(
            ids(&sqs, &all.queue_url).await,
            ["o1", "p1"],
            "all-audit: every event"
        );

        // `cqrs dev events`: one line each, in order, then it stops at --count.
        let mut lines = Vec::new();
        let options = TailOptions {
            count: Some(2),
            timeout: Some(Duration::from_secs(30)),
            ..TailOptions::default()
        };
        let seen = tail(&sqs, &feed.tap_url, &options, std::future::pending(), |l| {
            lines.push(l)
        })
        .await
        .unwrap();
        assert_eq!(seen, 2);
        assert_eq!(lines, [event_line(&order), event_line(&product)]);
        assert_eq!(
            lines[0],
            "2026-11-28T02:00:00Z order.created ORDER#t1/o1 v1 o1"
        );

        // --json: the whole event; --timeout ends a tail that finds nothing more.
        publish(&sns, &feed.topic_arn, &event("order", "o2", 2)).await;
        let mut lines = Vec::new();
        let options = TailOptions {
            json: true,
            timeout: Some(Duration::from_secs(3)),
            ..TailOptions::default()
        };
        let seen = tail(&sqs, &feed.tap_url, &options, std::future::pending(), |l| {
            lines.push(l)
        })
        .await
        .unwrap();
        assert_eq!(seen, 1);
        let back: Value = serde_json::from_str(&lines[0]).unwrap();
        assert_eq!(back, event("order", "o2", 2));
    }
}
