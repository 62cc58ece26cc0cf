//! moto's server, for real: started on a free port of 127.0.0.1, found again and stopped (also when
//! an assertion fails), and the SNS FIFO and SQS FIFO behaviour the change events rely on, checked
//! against it with the SDK clients the functions use:
//!
//! - an SNS FIFO topic delivers to every subscribed SQS FIFO queue (raw delivery: the body is the
//!   message), in order per message group, with the group, the deduplication id and the message
//!   attributes kept;
//! - a message group is held while one of its messages is in flight, other groups are not;
//! - a message received and not deleted comes back after its visibility timeout;
//! - after `maxReceiveCount` receives it moves to the queue's dead-letter queue;
//! - a second send of one deduplication id, while the first is in the queue, is dropped.
//!
//! moto comes from the project's `.venv` (scripts/tools.sh; `make test` runs it first), or from
//! `MOTO_SERVER`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use aws_sdk_sns::types::{MessageAttributeValue as SnsAttribute, PublishBatchRequestEntry};
use aws_sdk_sqs::types::{MessageSystemAttributeName, QueueAttributeName};
use cqrs_local_stack::dynamodb_local::answers_http;
use cqrs_local_stack::moto;

/// A FIFO queue with `attributes`; returns its URL and ARN.
async fn fifo_queue(
    sqs: &aws_sdk_sqs::Client,
    name: &str,
    attributes: &[(QueueAttributeName, String)],
) -> (String, String) {
    let mut create = sqs
        .create_queue()
        .queue_name(format!("{name}.fifo"))
        .attributes(QueueAttributeName::FifoQueue, "true");
    for (key, value) in attributes {
        create = create.attributes(key.clone(), value);
    }
    let url = create.send().await.unwrap().queue_url.unwrap();
    let arn = sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .unwrap()
        .attributes
        .unwrap()[&QueueAttributeName::QueueArn]
        .clone();
    (url, arn)
}

/// Up to ten messages, with their system and message attributes.
async fn receive(
    sqs: &aws_sdk_sqs::Client,
    url: &str,
    max: i32,
) -> Vec<aws_sdk_sqs::types::Message> {
    sqs.receive_message()
        .queue_url(url)
        .max_number_of_messages(max)
        .message_system_attribute_names(MessageSystemAttributeName::All)
        .message_attribute_names("All")
        .send()
        .await
        .unwrap()
        .messages
        .unwrap_or_default()
}

fn bodies(messages: &[aws_sdk_sqs::types::Message]) -> Vec<String> {
    messages
        .iter()
        .map(|m| m.body.clone().unwrap_or_default())
        .collect()
}

async fn delete(sqs: &aws_sdk_sqs::Client, url: &str, messages: &[aws_sdk_sqs::types::Message]) {
    for message in messages {
        sqs.delete_message()
            .queue_url(url)
            .receipt_handle(message.receipt_handle.clone().unwrap())
            .send()
            .await
            .unwrap();
    }
}

async fn send(sqs: &aws_sdk_sqs::Client, url: &str, body: &str, group: &str, dedup: &str) {
    sqs.send_message()
        .queue_url(url)
        .message_body(body)
        .message_group_id(group)
        .message_deduplication_id(dedup)
        .send()
        .await
        .unwrap();
}

#[test]
fn the_pinned_version_is_requirements_tools_txt_s() {
    let requirements = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../requirements-tools.txt"),
    )
    .unwrap();
    assert!(
        requirements
            .lines()
            .any(|line| line.trim() == format!("moto=={}", moto::VERSION)),
        "requirements-tools.txt pins moto=={}",
        moto::VERSION
    );
}

#[tokio::test]
async fn started_found_and_stopped_by_its_port() {
    let server = moto::Throwaway::start("lifecycle").expect("moto starts");
    let port = server.instance.port;
    assert!(answers_http(port));
    assert_eq!(moto::running(server.state()), vec![server.instance]);
    assert!(moto::stop(server.state(), port).unwrap());
    assert!(!answers_http(port), "the port answers no more");
    assert!(moto::running(server.state()).is_empty());
    assert!(
        !moto::stop(server.state(), port).unwrap(),
        "stopping it again is no error"
    );
}

#[tokio::test]
async fn an_sns_fifo_topic_delivers_in_order_per_group_to_each_raw_fifo_queue() {
    let server = moto::Throwaway::start("fanout").expect("moto starts");
    let endpoint = server.instance.endpoint();
    let (sqs, sns) = (moto::sqs_client(&endpoint), moto::sns_client(&endpoint));
    let topic = sns
        .create_topic()
        .name("events.fifo")
        .attributes("FifoTopic", "true")
        .attributes("ContentBasedDeduplication", "false")
        .send()
        .await
        .unwrap()
        .topic_arn
        .unwrap();
    let mut queues = Vec::new();
    for name in ["consumer-a", "consumer-b"] {
        let (url, arn) = fifo_queue(&sqs, name, &[]).await;
        sns.subscribe()
            .topic_arn(&topic)
            .protocol("sqs")
            .endpoint(&arn)
            .attributes("RawMessageDelivery", "true")
            .send()
            .await
            .unwrap();
        queues.push(url);
    }
    // Two items' versions, interleaved, in batches of at most ten entries.
    let entries: Vec<PublishBatchRequestEntry> =
        [("i1", 1), ("i2", 1), ("i1", 2), ("i2", 2), ("i1", 3)]
            .into_iter()
            .map(|(item, version)| {
                PublishBatchRequestEntry::builder()
                    .id(format!("{item}-{version}"))
                    .message(format!("{item}@{version}"))
                    .message_group_id(item)
                    .message_deduplication_id(format!("{item}-{version}"))
                    .message_attributes(
                        "entity",
                        SnsAttribute::builder()
                            .data_type("String")
                            .string_value("order")
                            .build()
                            .unwrap(),
                    )
                    .build()
                    .unwrap()
            })
            .collect();
    let answer = sns
        .publish_batch()
        .topic_arn(&topic)
        .set_publish_batch_request_entries(Some(entries))
        .send()
        .await
        .unwrap();
    assert!(
        answer.failed.as_deref().unwrap_or_default().is_empty(),
        "{:?}",
        answer.failed
    );

    for url in &queues {
        let mut seen: Vec<aws_sdk_sqs::types::Message> = Vec::new();
        for _ in 0..10 {
            let got = receive(&sqs, url, 10).await;
            delete(&sqs, url, &got).await;
            seen.extend(got);
            if seen.len() >= 5 {
                break;
            }
        }
        let per_group = |group: &str| -> Vec<String> {
            seen.iter()
                .filter(|m| {
                    m.attributes.as_ref().unwrap()[&MessageSystemAttributeName::MessageGroupId]
                        == group
                })
                .map(|m| m.body.clone().unwrap())
                .collect()
        };
        assert_eq!(
            per_group("i1"),
            ["i1@1", "i1@2", "i1@3"],
            "{url}: raw bodies, in order"
        );
        assert_eq!(per_group("i2"), ["i2@1", "i2@2"], "{url}");
        for message in &seen {
            let attributes = message.attributes.as_ref().unwrap();
            let body = message.body.as_deref().unwrap();
            assert_eq!(
                attributes[&MessageSystemAttributeName::MessageDeduplicationId],
                body.replace('@', "-"),
                "the deduplication id travels"
            );
            let entity = message
                .message_attributes
                .as_ref()
                .and_then(|a| a.get("entity"))
                .and_then(|a| a.string_value.as_deref());
            assert_eq!(entity, Some("order"), "the message attributes travel");
        }
    }
}

#[tokio::test]
async fn a_group_is_held_in_flight_comes_back_after_its_visibility_and_then_dead_letters() {
    let server = moto::Throwaway::start("groups").expect("moto starts");
    let endpoint = server.instance.endpoint();
    let sqs = moto::sqs_client(&endpoint);
    let (dlq_url, dlq_arn) = fifo_queue(&sqs, "consumer-dlq", &[]).await;
    let redrive = serde_json::json!({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 2});
    let (url, _) = fifo_queue(
        &sqs,
        "consumer",
        &[
            (QueueAttributeName::VisibilityTimeout, "1".into()),
            (QueueAttributeName::RedrivePolicy, redrive.to_string()),
        ],
    )
    .await;
    send(&sqs, &url, "g1-1", "g1", "g1-1").await;
    send(&sqs, &url, "g1-2", "g1", "g1-2").await;
    send(&sqs, &url, "g2-1", "g2", "g2-1").await;
    // A second send of a deduplication id still in the queue is dropped.
    send(&sqs, &url, "g2-1 again", "g2", "g2-1").await;

    let first = receive(&sqs, &url, 1).await;
    assert_eq!(bodies(&first), ["g1-1"]);
    let others = receive(&sqs, &url, 10).await;
    assert_eq!(
        bodies(&others),
        ["g2-1"],
        "g1 is held while g1-1 is in flight; the duplicate was dropped"
    );
    delete(&sqs, &url, &others).await;

    // Not deleted: g1-1 comes back once its visibility timeout passed, before g1-2.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let again = receive(&sqs, &url, 10).await;
    assert_eq!(
        bodies(&again).first().map(String::as_str),
        Some("g1-1"),
        "back after its visibility timeout, still before g1-2"
    );

    // Its second receive was its last: after the timeout it is in the dead-letter queue, and the
    // rest of its group follows in the queue.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let mut rest = Vec::new();
    for _ in 0..5 {
        let got = receive(&sqs, &url, 10).await;
        delete(&sqs, &url, &got).await;
        rest.extend(bodies(&got));
        if rest.contains(&"g1-2".to_string()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1100)).await;
    }
    assert!(
        !rest.contains(&"g1-1".to_string()),
        "g1-1 left the queue: {rest:?}"
    );
    assert!(rest.contains(&"g1-2".to_string()), "{rest:?}");
    // moto moves it at a later receive of its queue (as SQS does once a receive finds it over
    // its count), not the moment its last visibility timeout ends.
    let mut dead = Vec::new();
    for _ in 0..10 {
        let late = receive(&sqs, &url, 10).await;
        assert!(!bodies(&late).contains(&"g1-1".to_string()), "{late:?}");
        delete(&sqs, &url, &late).await;
        dead = receive(&sqs, &dlq_url, 10).await;
        if !dead.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(bodies(&dead), ["g1-1"], "moved to the dead-letter queue");
    let group = dead[0]
        .attributes
        .as_ref()
        .and_then(|a| a.get(&MessageSystemAttributeName::MessageGroupId));
    assert_eq!(group.map(String::as_str), Some("g1"), "with its group");
}

/// A consumer in process: answers as the consumer runtime does, reporting a failing message and
/// every later message of its group in the batch, and records what it handled.
struct Consumer {
    /// Bodies that fail this many more times.
    failing: std::sync::Mutex<HashMap<String, u32>>,
    /// Bodies handled, in order.
    handled: std::sync::Mutex<Vec<String>>,
    /// `ApproximateReceiveCount` of each delivery, by body.
    receives: std::sync::Mutex<Vec<(String, String)>>,
}

impl cqrs_local_stack::sqs_mapper::InvokeSqs for Consumer {
    async fn invoke_sqs(
        &self,
        event: &serde_json::Value,
    ) -> Result<Vec<String>, cqrs_local_stack::mapper::InvokeError> {
        let mut failed_groups = Vec::new();
        let mut failures = Vec::new();
        for record in event["Records"].as_array().unwrap() {
            assert_eq!(record["eventSource"], "aws:sqs");
            let body = record["body"].as_str().unwrap().to_string();
            let group = record["attributes"]["MessageGroupId"].as_str().unwrap();
            let id = record["messageId"].as_str().unwrap().to_string();
            self.receives.lock().unwrap().push((
                body.clone(),
                record["attributes"]["ApproximateReceiveCount"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            ));
            if failed_groups.contains(&group.to_string()) {
                failures.push(id);
                continue;
            }
            let mut failing = self.failing.lock().unwrap();
            match failing.get_mut(&body) {
                Some(left) if *left > 0 => {
                    *left -= 1;
                    failed_groups.push(group.to_string());
                    failures.push(id);
                }
                _ => self.handled.lock().unwrap().push(body),
            }
        }
        Ok(failures)
    }
}

#[tokio::test]
async fn the_local_sqs_mapping_retries_a_reported_message_in_order_and_dead_letters_a_poison_group()
{
    use cqrs_local_stack::sqs_mapper::{SqsMapper, SqsMapperConfig, sqs_event};
    let server = moto::Throwaway::start("mapping").expect("moto starts");
    let endpoint = server.instance.endpoint();
    let sqs = moto::sqs_client(&endpoint);
    let (dlq_url, dlq_arn) = fifo_queue(&sqs, "mapped-dlq", &[]).await;
    let redrive = serde_json::json!({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 2});
    let (url, arn) = fifo_queue(
        &sqs,
        "mapped",
        &[
            (QueueAttributeName::VisibilityTimeout, "1".into()),
            (QueueAttributeName::RedrivePolicy, redrive.to_string()),
        ],
    )
    .await;
    for (body, group) in [
        ("a1", "a"),
        ("b1", "b"),
        ("a2", "a"),
        ("c1", "c"),
        ("b2", "b"),
        ("c2", "c"),
    ] {
        send(&sqs, &url, body, group, body).await;
    }
    let consumer = Consumer {
        // a1 fails once, then succeeds; c1 fails on every delivery (a poison message).
        failing: std::sync::Mutex::new(HashMap::from([
            ("a1".to_string(), 1),
            ("c1".to_string(), u32::MAX),
        ])),
        handled: std::sync::Mutex::new(Vec::new()),
        receives: std::sync::Mutex::new(Vec::new()),
    };
    let mut config = SqsMapperConfig::new(&url, &arn);
    config.wait = Duration::ZERO;
    config.visibility_timeout = Duration::from_secs(1);
    let mut mapper = SqsMapper::new(config);
    let first = mapper.poll(&sqs, &consumer).await.unwrap();
    assert_eq!(first.received, 6, "{first:?}");
    assert_eq!(
        first.reported, 4,
        "a1 and a2, c1 and c2 reported: {first:?}"
    );
    assert_eq!(first.deleted, 2, "b1 and b2 done: {first:?}");
    // Each poll releases what is due, receives, settles; the dead-letter queue is read as well
    // (moto moves a message there at a receive of its queue).
    let mut dead: Vec<String> = Vec::new();
    for _ in 0..30 {
        if consumer.handled.lock().unwrap().len() == 4 && dead.len() == 2 {
            break;
        }
        mapper.poll(&sqs, &consumer).await.unwrap();
        let got = receive(&sqs, &dlq_url, 10).await;
        delete(&sqs, &dlq_url, &got).await;
        dead.extend(bodies(&got));
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let handled = consumer.handled.lock().unwrap().clone();
    let of = |group: char| -> Vec<&str> {
        handled
            .iter()
            .filter(|b| b.starts_with(group))
            .map(String::as_str)
            .collect()
    };
    assert_eq!(
        of('a'),
        ["a1", "a2"],
        "a1 again after its visibility timeout, then a2"
    );
    assert_eq!(of('b'), ["b1", "b2"]);
    assert!(of('c').is_empty(), "{handled:?}");
    // c2 was reported with c1 at every delivery (held behind it), so its receives count too: both
    // reach maxReceiveCount and leave for the dead-letter queue, in order. (Which is why the
    // consumer runtime parks a poison event itself before the queue's count runs out.)
    assert_eq!(
        dead,
        ["c1", "c2"],
        "the poison message and the one behind it, dead-lettered"
    );
    assert_eq!(mapper.waiting(), 0);
    let receives = consumer.receives.lock().unwrap().clone();
    assert!(
        receives.contains(&("a1".to_string(), "2".to_string())),
        "the second delivery of a1 says so: {receives:?}"
    );

    // The event is Lambda's: every field a consumer reads.
    send(&sqs, &url, "d1", "d", "d1").await;
    let message = receive(&sqs, &url, 1).await;
    let event = sqs_event(&message, &arn, "us-east-1");
    let record = &event["Records"][0];
    for field in [
        "messageId",
        "receiptHandle",
        "body",
        "md5OfBody",
        "eventSourceARN",
        "awsRegion",
    ] {
        assert!(record[field].is_string(), "{field}: {record}");
    }
    for attribute in [
        "ApproximateReceiveCount",
        "SentTimestamp",
        "MessageGroupId",
        "MessageDeduplicationId",
    ] {
        assert!(
            record["attributes"][attribute].is_string(),
            "{attribute}: {record}"
        );
    }
}

#[tokio::test]
async fn a_failed_invocation_deletes_nothing() {
    use cqrs_local_stack::mapper::InvokeError;
    use cqrs_local_stack::sqs_mapper::{InvokeSqs, SqsMapper, SqsMapperConfig};
    struct Broken;
    impl InvokeSqs for Broken {
        async fn invoke_sqs(&self, _: &serde_json::Value) -> Result<Vec<String>, InvokeError> {
            Err(InvokeError("the function panicked".into()))
        }
    }
    struct Unknown;
    impl InvokeSqs for Unknown {
        async fn invoke_sqs(&self, _: &serde_json::Value) -> Result<Vec<String>, InvokeError> {
            Ok(vec!["not a message of the batch".into()])
        }
    }
    let server = moto::Throwaway::start("failed").expect("moto starts");
    let sqs = server.sqs();
    let (url, arn) = fifo_queue(
        &sqs,
        "broken",
        &[(QueueAttributeName::VisibilityTimeout, "1".into())],
    )
    .await;
    send(&sqs, &url, "e1", "e", "e1").await;
    let mut config = SqsMapperConfig::new(&url, &arn);
    config.wait = Duration::ZERO;
    config.visibility_timeout = Duration::from_secs(1);
    let mut mapper = SqsMapper::new(config);
    let report = mapper.poll(&sqs, &Broken).await.unwrap();
    assert!(report.failed && report.deleted == 0, "{report:?}");
    assert_eq!(mapper.waiting(), 1);
    let early = mapper.poll(&sqs, &Unknown).await.unwrap();
    assert_eq!(
        early.received, 0,
        "not back before its visibility timeout: {early:?}"
    );
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let report = mapper.poll(&sqs, &Unknown).await.unwrap();
    assert_eq!(report.received, 1, "back after its visibility timeout");
    assert!(report.failed && report.deleted == 0, "{report:?}");
}
