//! `cqrs_consumer::redrive` and `cqrs_consumer::replay` against moto's SQS FIFO queues (a server
//! of its own per test, on a free port of 127.0.0.1, stopped on drop, also when an assertion
//! fails) and, for the replay, DynamoDB Local's history and idempotency tables; the runtime then
//! handles what they sent, as the event source mapping would hand it over.

use std::collections::BTreeMap;

use aws_sdk_sqs::types::{
    Message, MessageAttributeValue, MessageSystemAttributeName, QueueAttributeName,
};
use cqrs_consumer::marker::{DynamoMarkers, MemoryMarkers};
use cqrs_consumer::park::{MemoryPark, SqsDeadLetter};
use cqrs_consumer::redrive::{RedriveOptions, redrive};
use cqrs_consumer::replay::{ReplayOptions, replay};
use cqrs_consumer::sqs::SqsEvent;
use cqrs_consumer::{BatchCounts, Runtime};
use cqrs_events::ChangeEvent;
use cqrs_local_stack::moto;
use cqrs_store::projection::HistoryWrite;
use cqrs_store::{Store, Tables};

use crate::common::{Answer, Recorder, batch, event, message, pairs, product};

/// A FIFO queue `name` (no content-based deduplication, as the template makes them).
async fn fifo(sqs: &aws_sdk_sqs::Client, name: &str) -> String {
    sqs.create_queue()
        .queue_name(name)
        .attributes(QueueAttributeName::FifoQueue, "true")
        .attributes(QueueAttributeName::ContentBasedDeduplication, "false")
        .send()
        .await
        .unwrap()
        .queue_url()
        .unwrap()
        .to_string()
}

/// The queue's approximate number of messages (visible and in flight).
async fn count(sqs: &aws_sdk_sqs::Client, url: &str) -> usize {
    let answer = sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::All)
        .send()
        .await
        .unwrap();
    let attributes = answer.attributes().unwrap();
    let n = |name: QueueAttributeName| {
        attributes
            .get(&name)
            .map(|v| v.parse::<usize>().unwrap())
            .unwrap_or(0)
    };
    n(QueueAttributeName::ApproximateNumberOfMessages)
        + n(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
}

/// A string attribute.
fn attribute(value: &str) -> MessageAttributeValue {
    MessageAttributeValue::builder()
        .data_type("String")
        .string_value(value)
        .build()
        .unwrap()
}

/// What the runtime made of everything it received, and the messages as they came.
#[derive(Default)]
struct Drained {
    messages: Vec<Message>,
    counts: BatchCounts,
}

/// Receives the queue's messages batch by batch, as the event source mapping does, hands each
/// batch to `runtime` and deletes what it did not report, until the queue answers nothing.
async fn drain(sqs: &aws_sdk_sqs::Client, url: &str, runtime: &Runtime) -> Drained {
    let mut drained = Drained::default();
    loop {
        let received = sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .message_attribute_names("All")
            .send()
            .await
            .unwrap();
        let messages = received.messages().to_vec();
        if messages.is_empty() {
            return drained;
        }
        let lambda_event = cqrs_local_stack::sqs_mapper::sqs_event(
            &messages,
            "arn:aws:sqs:us-east-1:123456789012:shop-search.fifo",
            "us-east-1",
        );
        let event: SqsEvent = serde_json::from_value(lambda_event).unwrap();
        let (answer, counts) = runtime.handle_counted(event).await;
        assert!(
            answer.batch_item_failures.is_empty(),
            "nothing is retried here: {:?}",
            answer.batch_item_failures
        );
        for m in &messages {
            sqs.delete_message()
                .queue_url(url)
                .receipt_handle(m.receipt_handle().unwrap())
                .send()
                .await
                .unwrap();
        }
        drained.counts.messages += counts.messages;
        drained.counts.handled += counts.handled;
        drained.counts.duplicates += counts.duplicates;
        drained.counts.parked += counts.parked;
        drained.counts.gaps_filled += counts.gaps_filled;
        drained.messages.extend(messages);
    }
}

/// The events of `messages`, per message group, in the order received.
fn versions_per_group(messages: &[Message]) -> BTreeMap<String, Vec<i64>> {
    let mut groups: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for m in messages {
        let event: ChangeEvent = serde_json::from_str(m.body().unwrap()).unwrap();
        let group = m.attributes().unwrap()[&MessageSystemAttributeName::MessageGroupId].clone();
        assert_eq!(
            group,
            cqrs_keys::member_token(&event.data.pk, &event.data.sk)
        );
        groups
            .entry(event.data.sk.clone())
            .or_default()
            .push(event.itemversion);
    }
    groups
}

fn string_attribute<'m>(m: &'m Message, name: &str) -> Option<&'m str> {
    m.message_attributes()?.get(name)?.string_value()
}

#[tokio::test]
async fn a_dead_letter_queue_is_redriven_oldest_first_and_the_runtime_handles_it_once() {
    let moto = moto::Throwaway::start("consumer-redrive").expect("moto starts");
    let sqs = crate::common::consumer_sqs(&moto);
    let queue = fifo(&sqs, "shop-search.fifo").await;
    let dlq = fifo(&sqs, "shop-search-dlq.fifo").await;

    let recorder = Recorder::new("search");
    recorder.fail("P001", 1, Answer::Poison("priceCents is negative".into()));
    let runtime = Runtime::new(
        recorder.clone(),
        crate::common::feed(),
        Vec::<cqrs_item::Item>::new(),
        MemoryMarkers::default(),
        SqsDeadLetter::new(sqs.clone(), &dlq),
    );

    // P002 v1 as SQS itself moves a message there (the function crashed after handling it, more
    // often than maxReceiveCount): its own attributes, no reason.
    let p2 = event("P002", 1);
    sqs.send_message()
        .queue_url(&dlq)
        .message_body(serde_json::to_string(&p2).unwrap())
        .message_group_id(cqrs_keys::member_token(&p2.data.pk, &p2.data.sk))
        .message_deduplication_id(&p2.id)
        .message_attributes("type", attribute(&p2.event_type))
        .message_attributes("tenant", attribute(&p2.tenant))
        .message_attributes("entity", attribute(&p2.entity))
        .send()
        .await
        .unwrap();
    // The runtime: P001 v1 poison (parked), v2 parked behind it; P002 v1 handled.
    let (answer, counts) = runtime
        .handle_counted(batch(vec![
            message("m1", &event("P001", 1), 1),
            message("m2", &event("P001", 2), 1),
            message("m3", &p2, 1),
        ]))
        .await;
    assert!(answer.batch_item_failures.is_empty());
    assert_eq!((counts.handled, counts.parked), (1, 2));
    assert_eq!(count(&sqs, &dlq).await, 3);

    // Dry run: counted by reason, nothing moved.
    let dry = redrive(
        &sqs,
        &dlq,
        &queue,
        &RedriveOptions {
            max: None,
            dry_run: true,
        },
    )
    .await
    .unwrap();
    assert_eq!(dry.moved, 0);
    assert_eq!(
        dry.by_reason,
        BTreeMap::from([
            ("held".to_string(), 1),
            ("poison".to_string(), 1),
            ("unknown".to_string(), 1)
        ])
    );
    assert_eq!(dry.left, 3);
    assert_eq!(count(&sqs, &queue).await, 0, "a dry run moves nothing");

    // The cause is fixed; one message first (--max 1), then the rest.
    recorder.heal("P001", 1);
    let first = redrive(
        &sqs,
        &dlq,
        &queue,
        &RedriveOptions {
            max: Some(1),
            dry_run: false,
        },
    )
    .await
    .unwrap();
    assert_eq!((first.moved, first.left), (1, 2));
    let rest = redrive(&sqs, &dlq, &queue, &RedriveOptions::default())
        .await
        .unwrap();
    assert_eq!((rest.moved, rest.left), (2, 0));
    assert!(rest.came_back.is_empty() && first.came_back.is_empty());
    assert_eq!(rest.messages.len(), 2);
    let mut by_reason = first.by_reason.clone();
    for (reason, n) in rest.by_reason {
        *by_reason.entry(reason).or_default() += n;
    }
    assert_eq!(by_reason, dry.by_reason);
    assert_eq!(count(&sqs, &dlq).await, 0, "the dead-letter queue is empty");

    // The runtime takes them: P001 v1 then v2, P002 v1 a duplicate (already applied).
    let drained = drain(&sqs, &queue, &runtime).await;
    assert_eq!(drained.messages.len(), 3);
    for m in &drained.messages {
        assert_eq!(string_attribute(m, "cqrs-redriven"), Some("true"));
        let body: ChangeEvent = serde_json::from_str(m.body().unwrap()).unwrap();
        assert_eq!(
            (
                string_attribute(m, "type"),
                string_attribute(m, "tenant"),
                string_attribute(m, "entity")
            ),
            (
                Some(body.event_type.as_str()),
                Some(body.tenant.as_str()),
                Some("product")
            ),
            "the publisher's attributes, also on a message the runtime parked"
        );
        let dedup = &m.attributes().unwrap()[&MessageSystemAttributeName::MessageDeduplicationId];
        assert!(
            dedup.starts_with(&format!("{}:redrive:", body.id)),
            "a fresh dedup id: {dedup}"
        );
    }
    let parked_reasons: Vec<Option<&str>> = drained
        .messages
        .iter()
        .map(|m| string_attribute(m, "cqrs-reason-kind"))
        .collect();
    assert!(parked_reasons.contains(&Some("poison")), "attributes kept");
    assert_eq!(
        versions_per_group(&drained.messages),
        BTreeMap::from([
            ("P001".to_string(), vec![1, 2]),
            ("P002".to_string(), vec![1])
        ])
    );
    assert_eq!((drained.counts.handled, drained.counts.duplicates), (2, 1));
    assert_eq!(drained.counts.parked, 0);
    assert_eq!(
        recorder.seen(),
        pairs(&[("P001", 1), ("P002", 1), ("P001", 1), ("P001", 2)])
    );
}

#[tokio::test]
async fn redriving_into_the_dead_letter_queue_itself_is_refused() {
    let moto = moto::Throwaway::start("consumer-redrive-same").expect("moto starts");
    let sqs = crate::common::consumer_sqs(&moto);
    let dlq = fifo(&sqs, "shop-search-dlq.fifo").await;
    let err = redrive(&sqs, &dlq, &dlq, &RedriveOptions::default())
        .await
        .unwrap_err();
    assert_eq!(err.operation, "redrive");
    assert_eq!(err.report.moved, 0);
}

#[tokio::test]
async fn a_replay_sends_the_versions_since_t_in_version_order_and_a_second_one_handles_nothing() {
    let moto = moto::Throwaway::start("consumer-replay").expect("moto starts");
    let sqs = crate::common::consumer_sqs(&moto);
    let queue = fifo(&sqs, "shop-search.fifo").await;
    let t = cqrs_testkit::fresh_tables().await;
    let store = Store::new(
        t.client.clone(),
        Tables::new(&t.command, &t.data, &t.history, &t.idempotency),
    );
    // P001 v1..v11 and P002 v1..v10, version v written at 00:00:v (common::product).
    let mut rows: Vec<cqrs_item::Item> = (1..=11).map(|v| product("P001", v)).collect();
    rows.extend((1..=10).map(|v| product("P002", v)));
    for chunk in rows.chunks(25) {
        let written = store.put_history_batch(chunk).await;
        assert!(
            written
                .iter()
                .all(|w| matches!(w, Ok(HistoryWrite::Written))),
            "{written:?}"
        );
    }

    let since = "2026-01-01T00:00:09Z".parse().unwrap();
    let options = ReplayOptions::since(since);
    let feed = crate::common::feed();
    let report = replay(&store, &feed, &sqs, &queue, &options).await.unwrap();
    assert_eq!(
        (report.versions, report.items, report.sent, report.failed),
        (5, 2, 5, 0),
        "{report:?}"
    );
    assert_eq!(
        report.by_entity,
        BTreeMap::from([("product".to_string(), 5)])
    );

    let recorder = Recorder::new("search");
    let runtime = Runtime::new(
        recorder.clone(),
        feed.clone(),
        store.clone(),
        DynamoMarkers::new(t.client.clone(), &t.idempotency),
        MemoryPark::default(),
    );
    let drained = drain(&sqs, &queue, &runtime).await;
    assert_eq!(
        versions_per_group(&drained.messages),
        BTreeMap::from([
            ("P001".to_string(), vec![9, 10, 11]),
            ("P002".to_string(), vec![9, 10])
        ]),
        "exactly the versions written since T, in version order per item (not @10 before @9)"
    );
    for m in &drained.messages {
        assert_eq!(string_attribute(m, "cqrs-replayed"), Some("true"));
        let body: ChangeEvent = serde_json::from_str(m.body().unwrap()).unwrap();
        assert_eq!(string_attribute(m, "type"), Some(body.event_type.as_str()));
        let dedup = &m.attributes().unwrap()[&MessageSystemAttributeName::MessageDeduplicationId];
        assert_eq!(dedup, &format!("{}:replay:{}", body.id, report.run_id));
        // v9's previous version (8) is outside the window: read from the history table.
        assert_eq!(body.data.previous_version, Some(body.itemversion - 1));
        assert_eq!(body.event_type, "product.updated");
        assert_eq!(
            body,
            event(&body.data.sk, body.itemversion).with_time_of(&body)
        );
    }
    assert_eq!((drained.counts.handled, drained.counts.duplicates), (5, 0));

    // A second replay of the window: sent again (a new run id), handled not at all.
    let again = replay(&store, &feed, &sqs, &queue, &options).await.unwrap();
    assert_eq!(again.sent, 5);
    assert_ne!(again.run_id, report.run_id);
    let drained = drain(&sqs, &queue, &runtime).await;
    assert_eq!(drained.messages.len(), 5);
    assert_eq!((drained.counts.handled, drained.counts.duplicates), (0, 5));
    assert_eq!(recorder.calls().len(), 5);

    // A window with an end, one entity.
    let until_options = ReplayOptions {
        until: Some("2026-01-01T00:00:10Z".parse().unwrap()),
        entity: Some("product".into()),
        ..ReplayOptions::since(since)
    };
    let bounded = replay(&store, &feed, &sqs, &queue, &until_options)
        .await
        .unwrap();
    assert_eq!((bounded.versions, bounded.sent), (2, 2), "v9 of each item");
    let none = ReplayOptions {
        entity: Some("order".into()),
        ..ReplayOptions::since(since)
    };
    assert_eq!(
        replay(&store, &feed, &sqs, &queue, &none)
            .await
            .unwrap()
            .sent,
        0
    );
}

/// Equal up to `time` (the event's `time` is the version's `updatedAt`; this keeps the test
/// independent of it).
trait WithTimeOf {
    fn with_time_of(self, other: &ChangeEvent) -> ChangeEvent;
}

impl WithTimeOf for ChangeEvent {
    fn with_time_of(mut self, other: &ChangeEvent) -> ChangeEvent {
        self.time = other.time.clone();
        self
    }
}
