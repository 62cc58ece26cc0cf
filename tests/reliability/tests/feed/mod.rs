//! The change feed's harness, shared by `change_feed.rs` (the chaos run) and `isolation.rs` (the
//! isolation run): moto's FIFO queues subscribed to a topic, data-sync and the consumer runtime
//! invoked in process (the local stream and SQS mappings call them as Lambda would), and the check
//! that a consumer handled every version once, in order per item.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use aws_sdk_dynamodbstreams::types::Record;
use aws_sdk_sqs::types::QueueAttributeName;
use cqrs_consumer::Runtime;
use cqrs_consumer::sqs::SqsEvent;
use cqrs_data_sync::DataSync;
use cqrs_local_stack::mapper::{Invoke, InvokeError};
use cqrs_local_stack::sqs_mapper::{InvokeSqs, SqsMapper, SqsMapperConfig};

// ------------------------------------------------------------------------------------------
// moto

/// A FIFO queue with `attributes`; its URL and ARN.
pub async fn fifo_queue(
    sqs: &aws_sdk_sqs::Client,
    name: &str,
    attributes: &[(QueueAttributeName, String)],
) -> (String, String) {
    let mut create = sqs
        .create_queue()
        .queue_name(format!("{name}.fifo"))
        .attributes(QueueAttributeName::FifoQueue, "true")
        .attributes(QueueAttributeName::ContentBasedDeduplication, "false");
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

/// A consumer's queue: `<name>.fifo` subscribed to `topic` with raw delivery, visibility 1 s, its
/// dead-letter queue `<name>-dlq.fifo` (SQS's own `maxReceiveCount` is only the safety net for
/// crashes: far above the runtime's). Answers (queue URL, queue ARN, dead-letter URL).
pub async fn consumer_queue(
    sqs: &aws_sdk_sqs::Client,
    sns: &aws_sdk_sns::Client,
    topic: &str,
    name: &str,
) -> (String, String, String) {
    let (dlq_url, dlq_arn) = fifo_queue(sqs, &format!("{name}-dlq"), &[]).await;
    let redrive = serde_json::json!({ "deadLetterTargetArn": dlq_arn, "maxReceiveCount": "100" });
    let (url, arn) = fifo_queue(
        sqs,
        name,
        &[
            (QueueAttributeName::VisibilityTimeout, "1".into()),
            (QueueAttributeName::RedrivePolicy, redrive.to_string()),
        ],
    )
    .await;
    sns.subscribe()
        .topic_arn(topic)
        .protocol("sqs")
        .endpoint(&arn)
        .attributes("RawMessageDelivery", "true")
        .send()
        .await
        .unwrap();
    (url, arn, dlq_url)
}

/// A consumer's queues: (queue URL, queue ARN, dead-letter URL), as [`consumer_queue`] answers.
pub type ConsumerQueue = (String, String, String);

/// The shop's events topic `shop-events.fifo` on moto, and the queues of consumers A and B
/// subscribed to it ([`consumer_queue`]): (topic ARN, A's, B's).
pub async fn topic_with_consumers_a_and_b(
    sqs: &aws_sdk_sqs::Client,
    sns: &aws_sdk_sns::Client,
) -> (String, ConsumerQueue, ConsumerQueue) {
    let topic = sns
        .create_topic()
        .name("shop-events.fifo")
        .attributes("FifoTopic", "true")
        .attributes("ContentBasedDeduplication", "false")
        .send()
        .await
        .unwrap()
        .topic_arn
        .unwrap();
    let a = consumer_queue(sqs, sns, &topic, "shop-consumer-a").await;
    let b = consumer_queue(sqs, sns, &topic, "shop-consumer-b").await;
    (topic, a, b)
}

/// The store of `tables` with their parked table (where the publisher parks).
pub fn parked_store(tables: &cqrs_testkit::TestTables) -> cqrs_store::Store {
    cqrs_store::Store::new(
        tables.client.clone(),
        cqrs_store::Tables::new(
            &tables.command,
            &tables.data,
            &tables.history,
            &tables.idempotency,
        )
        .with_parked(&tables.parked),
    )
}

/// Messages in `queue_url`, visible or in flight.
pub async fn depth(sqs: &aws_sdk_sqs::Client, queue_url: &str) -> usize {
    let attributes = sqs
        .get_queue_attributes()
        .queue_url(queue_url)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await
        .unwrap()
        .attributes
        .unwrap_or_default();
    [
        QueueAttributeName::ApproximateNumberOfMessages,
        QueueAttributeName::ApproximateNumberOfMessagesNotVisible,
    ]
    .iter()
    .map(|name| {
        attributes
            .get(name)
            .and_then(|n| n.parse::<usize>().ok())
            .unwrap_or(0)
    })
    .sum()
}

/// `(pk, base sk, version)`.
pub type Key = (String, String, i64);

/// data-sync, invoked in process with the Lambda event of the records (as `on_failure.rs`).
pub struct SyncInProcess {
    pub sync: DataSync,
    pub arn: String,
}

impl Invoke for SyncInProcess {
    async fn invoke(&self, records: &[Record]) -> Result<Vec<String>, InvokeError> {
        let event = cqrs_testkit::stream_event::lambda_event(records, &self.arn)
            .map_err(|e| InvokeError(format!("building the event: {e}")))?;
        let response = self
            .sync
            .invoke(event)
            .await
            .map_err(|e| InvokeError(e.to_string()))?;
        Ok(response
            .batch_item_failures
            .into_iter()
            .map(|f| f.item_identifier.unwrap_or_default())
            .collect())
    }
}

/// The runtime's counts, summed over a consumer's invocations.
#[derive(Debug, Default)]
pub struct Totals {
    pub invocations: usize,
    pub messages: usize,
    pub duplicates: usize,
    pub gaps_filled: usize,
    pub gaps_skipped: usize,
    pub parked: usize,
    pub retried: usize,
}

/// The consumer runtime invoked in process by the SQS mapping: Lambda's SQS event, parsed as
/// the function's entry point parses it. While `crash_next` > 0, an invocation crashes after the
/// runtime handled its batch (a timeout after the work was done): the whole batch comes back.
pub struct RuntimeInProcess {
    pub runtime: Runtime,
    pub totals: Mutex<Totals>,
    pub crash_next: AtomicUsize,
    pub crashed: AtomicUsize,
}

impl InvokeSqs for RuntimeInProcess {
    async fn invoke_sqs(&self, event: &serde_json::Value) -> Result<Vec<String>, InvokeError> {
        let event: SqsEvent = serde_json::from_value(event.clone())
            .map_err(|e| InvokeError(format!("not an SQS event: {e}")))?;
        let (answer, counts) = self.runtime.handle_counted(event).await;
        let mut totals = self.totals.lock().unwrap();
        totals.invocations += 1;
        totals.messages += counts.messages;
        totals.duplicates += counts.duplicates;
        totals.gaps_filled += counts.gaps_filled;
        totals.gaps_skipped += counts.gaps_skipped;
        totals.parked += counts.parked;
        totals.retried += counts.retried;
        drop(totals);
        if self
            .crash_next
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            self.crashed.fetch_add(1, Ordering::Relaxed);
            return Err(InvokeError(
                "injected: the function timed out after its work".into(),
            ));
        }
        Ok(answer
            .batch_item_failures
            .into_iter()
            .map(|f| f.item_identifier)
            .collect())
    }
}

pub fn mapper(url: &str, arn: &str) -> SqsMapper {
    let mut config = SqsMapperConfig::new(url, arn);
    config.visibility_timeout = Duration::from_secs(1);
    config.wait = Duration::ZERO;
    SqsMapper::new(config)
}

/// One poll; an empty one pauses a little (the receive does not wait).
pub async fn poll(
    mapper: &mut SqsMapper,
    sqs: &aws_sdk_sqs::Client,
    invoker: &RuntimeInProcess,
) -> usize {
    let report = mapper.poll(sqs, invoker).await.expect("the queue answers");
    if report.received == 0 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    report.received
}

/// Each item's handled versions must be exactly `1..=n` of the history, in that order.
pub fn check_order(consumer: &str, handled: &[Key], expected: &BTreeMap<(String, String), i64>) {
    let mut by_item: BTreeMap<(String, String), Vec<i64>> = BTreeMap::new();
    for (pk, sk, v) in handled {
        by_item
            .entry((pk.clone(), sk.clone()))
            .or_default()
            .push(*v);
    }
    let wrong: Vec<_> = expected
        .iter()
        .filter_map(|(item, n)| {
            let got = by_item.get(item).cloned().unwrap_or_default();
            let want: Vec<i64> = (1..=*n).collect();
            (got != want)
                .then(|| format!("{}/{}: handled {got:?}, history 1..={n}", item.0, item.1))
        })
        .collect();
    let unknown: Vec<_> = by_item
        .keys()
        .filter(|k| !expected.contains_key(*k))
        .collect();
    assert!(
        wrong.is_empty() && unknown.is_empty(),
        "consumer {consumer}: every version once, in order: {} items wrong, e.g. {:?}; unknown items {unknown:?}",
        wrong.len(),
        &wrong[..wrong.len().min(5)]
    );
}
