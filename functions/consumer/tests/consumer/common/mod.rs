//! The tests' items, events, SQS messages and a recording consumer: versions of products of the
//! example model (`PRODUCT#t1` / `P…`), as the history table holds them and as the publisher sends
//! them.
#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cqrs_consumer::sqs::{SqsAttributes, SqsEvent, SqsMessage};
use cqrs_consumer::{Consumer, ConsumerError, Delivered};
use cqrs_events::{ChangeEvent, Feed};
use cqrs_item::{Item, Value};
use futures::future::{BoxFuture, FutureExt};

/// The feed of the example model, source `urn:cqrs:shop`.
pub fn feed() -> Feed {
    Feed::new(cqrs_model::Model::example(), "urn:cqrs:shop")
}

/// Version `v` of product `code` as the history table holds it (`sk` `code@v`): `priceCents`
/// 100 × v.
pub fn product(code: &str, v: i64) -> Item {
    let mut item = Item::example();
    item.pk = "PRODUCT#t1".into();
    item.sk = cqrs_keys::add_sort_key_version(code, v);
    item.id = cqrs_keys::generate_id(&item.pk, code);
    item.code = code.into();
    item.version = v;
    item.entity = Some("product".into());
    item.attributes.clear();
    item.attributes
        .insert("productId".into(), Value::from(code));
    item.attributes
        .insert("priceCents".into(), Value::from(100 * v));
    item.updated_at = format!("2026-01-01T00:00:{v:02}.000Z");
    item
}

/// The versions `1..=n` of `code`.
pub fn versions(code: &str, n: i64) -> Vec<Item> {
    (1..=n).map(|v| product(code, v)).collect()
}

/// The event of version `v` of `code`, as the publisher sends it.
pub fn event(code: &str, v: i64) -> ChangeEvent {
    let previous = (v > 1).then(|| product(code, v - 1));
    feed()
        .version_event(&product(code, v), previous.as_ref(), chrono::Utc::now())
        .unwrap()
}

/// The TTL removal event of `code` whose last version is `v`.
pub fn ttl_event(code: &str, v: i64) -> ChangeEvent {
    feed()
        .ttl_event(&product(code, v).into_data_item(), chrono::Utc::now())
        .unwrap()
}

/// The SQS message of `event` (id `id`, receive count `attempt`), group = the item.
pub fn message(id: &str, event: &ChangeEvent, attempt: u32) -> SqsMessage {
    message_with_body(id, &serde_json::to_string(event).unwrap(), event, attempt)
}

/// A message of `event`'s item with body `body`.
pub fn message_with_body(id: &str, body: &str, event: &ChangeEvent, attempt: u32) -> SqsMessage {
    SqsMessage {
        message_id: id.into(),
        receipt_handle: format!("rh-{id}"),
        body: body.into(),
        attributes: SqsAttributes {
            approximate_receive_count: Some(attempt.to_string()),
            sent_timestamp: Some(chrono::Utc::now().timestamp_millis().to_string()),
            message_group_id: Some(cqrs_keys::member_token(&event.data.pk, &event.data.sk)),
            message_deduplication_id: Some(event.id.clone()),
        },
        message_attributes: HashMap::new(),
        event_source_arn: "arn:aws:sqs:eu-west-1:123456789012:shop-test.fifo".into(),
    }
}

/// A batch of `messages`.
pub fn batch(messages: Vec<SqsMessage>) -> SqsEvent {
    SqsEvent { records: messages }
}

/// One call of the consumer.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// `P001`, ...
    pub code: String,
    pub version: i64,
    pub filled: bool,
    pub ttl: bool,
    pub attempt: u32,
    pub item: Item,
}

/// What the recorder answers for a version.
#[derive(Debug, Clone)]
pub enum Answer {
    Retry,
    Poison(String),
}

/// A consumer that records every call and answers as told (Ok unless a version is scripted).
pub struct Recorder {
    name: String,
    calls: Mutex<Vec<Call>>,
    script: Mutex<HashMap<(String, i64), Answer>>,
}

impl Recorder {
    pub fn new(name: &str) -> Arc<Self> {
        Arc::new(Recorder {
            name: name.into(),
            calls: Mutex::new(Vec::new()),
            script: Mutex::new(HashMap::new()),
        })
    }

    /// From now on, version `v` of `code` answers `answer`.
    pub fn fail(&self, code: &str, v: i64, answer: Answer) {
        self.script
            .lock()
            .unwrap()
            .insert((code.to_string(), v), answer);
    }

    /// Version `v` of `code` answers Ok again.
    pub fn heal(&self, code: &str, v: i64) {
        self.script.lock().unwrap().remove(&(code.to_string(), v));
    }

    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }

    /// `(code, version)` of the calls that succeeded... and failed, in order.
    pub fn seen(&self) -> Vec<(String, i64)> {
        self.calls()
            .into_iter()
            .map(|c| (c.code, c.version))
            .collect()
    }
}

impl Consumer for Recorder {
    fn name(&self) -> &str {
        &self.name
    }

    fn handle<'a>(&'a self, delivered: &'a Delivered) -> BoxFuture<'a, Result<(), ConsumerError>> {
        let code = delivered.event.data.sk.clone();
        let version = delivered.event.itemversion;
        self.calls.lock().unwrap().push(Call {
            code: code.clone(),
            version,
            filled: delivered.filled,
            ttl: delivered.event.removal == Some(cqrs_events::Removal::Ttl),
            attempt: delivered.attempt,
            item: delivered.item.clone(),
        });
        let answer = self.script.lock().unwrap().get(&(code, version)).cloned();
        async move {
            match answer {
                None => Ok(()),
                Some(Answer::Retry) => Err(ConsumerError::retry("the index is away")),
                Some(Answer::Poison(reason)) => Err(ConsumerError::poison(reason)),
            }
        }
        .boxed()
    }
}

/// `(code, version)` pairs.
pub fn pairs(list: &[(&str, i64)]) -> Vec<(String, i64)> {
    list.iter().map(|(c, v)| (c.to_string(), *v)).collect()
}

/// A message marked as redriven (`cqrs redrive consumer` sets the attribute).
pub fn redriven(mut message: cqrs_consumer::sqs::SqsMessage) -> cqrs_consumer::sqs::SqsMessage {
    message.message_attributes.insert(
        cqrs_consumer::runtime::REDRIVEN_ATTRIBUTE.into(),
        cqrs_consumer::sqs::MessageAttribute {
            string_value: Some("true".into()),
            data_type: "String".into(),
        },
    );
    message
}

/// The SQS client as the consumer function builds it, on `moto`.
pub fn consumer_sqs(moto: &cqrs_local_stack::moto::Throwaway) -> aws_sdk_sqs::Client {
    let endpoint = moto.endpoint();
    let lookup = |name: &str| match name {
        "AWS_REGION" => Some("us-east-1".to_string()),
        "AWS_ACCESS_KEY_ID" | "AWS_SECRET_ACCESS_KEY" => Some("local".to_string()),
        "CQRS_TLS_ROOTS" => Some("system".to_string()),
        "AWS_ENDPOINT_URL_SQS" => Some(endpoint.clone()),
        _ => None,
    };
    let env = cqrs_store::client::ClientEnv::from_lookup(lookup).unwrap();
    let http = cqrs_store::client::http_client(env.tls_roots).unwrap();
    cqrs_consumer::park::sqs_client(&env, http, lookup)
}
