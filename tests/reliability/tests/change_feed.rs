//! The change feed's chaos run (issue 39, design39 section 6 item 1), end to end on real parts:
//! DynamoDB Local (tables and streams) and moto's SNS/SQS server (started on a free port of
//! 127.0.0.1, stopped on drop, also when an assertion fails).
//!
//! 1. Commands go into the command table; its stream is delivered to the real data-sync handler in
//!    windows that are shuffled, duplicated and replayed, so several versions of one item often
//!    collapse into one data write (the data table's stream lacks them).
//! 2. The data table's stream goes to the real publisher ([`Publisher`] with its [`SnsTopic`] on
//!    moto's SNS FIFO topic) through the local stream mapping (`cqrs_local_stack::mapper::deliver`,
//!    Lambda's rule), in batches some of which come twice and some windows again later, while the
//!    topic refuses some calls as a whole (the publisher reports, the mapping retries or bisects).
//! 3. Two consumers, A and B, each an SQS FIFO queue subscribed with raw delivery and its own FIFO
//!    dead-letter queue, read by the local SQS mapping ([`SqsMapper`], visibility 1 s) that invokes
//!    the consumer runtime ([`Runtime`]) in process; markers in the idempotency table.
//!    A answers `Retry` for every event until B has seen everything (its failure window), then
//!    recovers (its first two invocations then crash after their work: the batch comes back); one
//!    version of one item is poison for A: parked in A's dead-letter queue with its reason, the
//!    item's later versions held behind it, then redriven once the handler is fixed.
//! 4. A restarted stream reader: the whole data stream goes through the publisher once more; both
//!    consumers get every version again.
//!
//! In the end each consumer has handled every `(pk, sk, version)` of the history table exactly
//! once, in version order per item; every queue and dead-letter queue is empty; B finished while
//! A was still failing (B never waited on A). Everything random comes from one seed (printed;
//! `RELIABILITY_SEED=<seed>` replays the same plan; the interleaving of the consumers is real time).
//!
//! A second test takes the other way into a dead-letter queue: a function that crashes on one
//! message until SQS's own `maxReceiveCount` moves it there (no reason attached). The item's next
//! version then finds a gap, which the runtime fills from the history table, in order; the
//! redrive of the dead-lettered message later is a duplicate.

mod common;
mod feed;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_sdk_dynamodbstreams::types::Record;
use aws_sdk_sqs::types::{
    ChangeMessageVisibilityBatchRequestEntry, MessageSystemAttributeName, QueueAttributeName,
};
use common::{Rng, command_item, scan_items, seed, store};
use cqrs_consumer::marker::DynamoMarkers;
use cqrs_consumer::park::SqsDeadLetter;
use cqrs_consumer::{Consumer, ConsumerError, Delivered, Runtime};
use cqrs_data_sync::DataSync;
use cqrs_event_publisher::{CallResult, Entry, Publish, PublishError, Publisher, SnsTopic};
use cqrs_item::{Item, Value};
use cqrs_local_stack::mapper::{Invoke, InvokeError, MapperConfig, deliver};
use cqrs_local_stack::moto;
use cqrs_local_stack::sqs_mapper::{InvokeSqs, SqsMapper, SqsMapperConfig};
use feed::{
    Key, RuntimeInProcess, SyncInProcess, Totals, check_order, depth, fifo_queue, mapper, poll,
};
use futures::StreamExt;
use futures::future::{BoxFuture, FutureExt};

const DEFAULT_SEED: u64 = 0xC4A0_5E39_2026;
/// Items written (products of three tenants), each 1 to `MAX_VERSIONS` versions.
const ITEMS: usize = 24;
const MAX_VERSIONS: usize = 6;
/// The topic refuses one `PublishBatch` call in this many, as a whole.
const FAIL_EVERY_CALL: usize = 13;
/// A's failure window ends when B has seen everything, or after this long at most.
const WINDOW_CAP: Duration = Duration::from_secs(20);
/// How long a phase may take before the test gives up (a hang is a failure, not a figure).
const PHASE_CAP: Duration = Duration::from_secs(30);
const POISON_REASON: &str = "priceCents is negative: cannot index it";

// ------------------------------------------------------------------------------------------
// The commands and data-sync

/// Version `v` of product `code` of `tenant`: an item of the model's `product` entity.
fn product(tenant: &str, code: &str, v: i64, rng: &mut Rng) -> Item {
    let mut item = command_item(&format!("PRODUCT#{tenant}"), code, v);
    item.entity = Some("product".into());
    item.attributes.clear();
    item.attributes
        .insert("productId".into(), Value::from(code));
    item.attributes.insert(
        "priceCents".into(),
        Value::from(100 + rng.below(10_000) as i64),
    );
    item.updated_at = format!("2026-01-01T00:00:{:02}.{v:03}Z", v % 60);
    item
}

/// The items, each its versions in order (some soft-deleted at the end).
fn plan(rng: &mut Rng) -> Vec<Vec<Item>> {
    (0..ITEMS)
        .map(|n| {
            let tenant = format!("t{}", 1 + n % 3);
            let code = format!("P{n:03}");
            // The first item has at least 4 versions: its v2 is the poison.
            let count = if n == 0 {
                rng.range(4, MAX_VERSIONS)
            } else {
                rng.range(1, MAX_VERSIONS)
            };
            let deleted = rng.chance(150);
            (1..=count as i64)
                .map(|v| {
                    let mut item = product(&tenant, &code, v, rng);
                    item.is_deleted = deleted && v == count as i64 && v > 1;
                    item
                })
                .collect()
        })
        .collect()
}

/// Windows of `len` records: each batch once (1 to `max` records), some twice, `replays` windows
/// of up to `replay_max` records again; shuffled when `shuffle`, else the duplicates right after and the replays at random later
/// places (as a retried or restarted stream reader brings them).
fn deliveries(
    rng: &mut Rng,
    len: usize,
    max: usize,
    replays: usize,
    replay_max: usize,
    shuffle: bool,
) -> (Vec<std::ops::Range<usize>>, usize) {
    let mut out: Vec<std::ops::Range<usize>> = Vec::new();
    let mut duplicates = 0;
    let mut start = 0;
    while start < len {
        let end = (start + rng.range(1, max)).min(len);
        out.push(start..end);
        if rng.chance(150) {
            out.push(start..end);
            duplicates += 1;
        }
        start = end;
    }
    if duplicates == 0 {
        // At least one batch comes twice.
        let at = rng.below(out.len() as u64) as usize;
        out.insert(at + 1, out[at].clone());
        duplicates += 1;
    }
    for _ in 0..replays {
        let from = rng.below(len as u64) as usize;
        let window = from..(from + rng.range(2, replay_max)).min(len);
        // A replay comes after the batch that first held its start.
        let first = out.iter().position(|r| r.contains(&from)).unwrap_or(0);
        let at = rng.range(first + 1, out.len());
        out.insert(at, window);
    }
    if shuffle {
        rng.shuffle(&mut out);
    }
    (out, duplicates)
}

// ------------------------------------------------------------------------------------------
// The publisher

/// moto's SNS topic, refusing one call in [`FAIL_EVERY_CALL`] as a whole (a throttled
/// `PublishBatch`) while `refusing`; counts calls and accepted entries.
struct FlakyTopic {
    inner: SnsTopic,
    refusing: AtomicBool,
    calls: AtomicUsize,
    refused: AtomicUsize,
    accepted: AtomicUsize,
}

impl Publish for FlakyTopic {
    fn publish_batch<'a>(&'a self, entries: &'a [Entry]) -> BoxFuture<'a, CallResult> {
        async move {
            let call = self.calls.fetch_add(1, Ordering::Relaxed);
            if self.refusing.load(Ordering::SeqCst) && call % FAIL_EVERY_CALL == FAIL_EVERY_CALL / 2
            {
                self.refused.fetch_add(1, Ordering::Relaxed);
                return Err(PublishError::new(
                    "Throttled",
                    "injected: the call is refused",
                ));
            }
            let results = self.inner.publish_batch(entries).await?;
            self.accepted.fetch_add(
                results.iter().filter(|r| r.is_ok()).count(),
                Ordering::Relaxed,
            );
            Ok(results)
        }
        .boxed()
    }
}

/// The publisher, invoked in process with the Lambda event of the data table's records; a failed
/// first record fails the invocation (the mapping bisects).
struct PublisherInProcess {
    publisher: Publisher,
    arn: String,
    invocations: AtomicUsize,
}

impl Invoke for PublisherInProcess {
    async fn invoke(&self, records: &[Record]) -> Result<Vec<String>, InvokeError> {
        self.invocations.fetch_add(1, Ordering::Relaxed);
        let event = cqrs_testkit::stream_event::lambda_event(records, &self.arn)
            .map_err(|e| InvokeError(format!("building the event: {e}")))?;
        let response = self
            .publisher
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

// ------------------------------------------------------------------------------------------
// The consumers

/// A consumer that records every version it handled (answered `Ok`), in order; fails every event
/// while `failing`; answers `Poison` for `poison` while `poisonous`.
struct Chaos {
    name: String,
    failing: AtomicBool,
    poison: Option<Key>,
    poisonous: AtomicBool,
    handled: Mutex<Vec<Key>>,
    retries: AtomicUsize,
    poisons: AtomicUsize,
    redriven_handled: AtomicUsize,
    filled_handled: AtomicUsize,
}

impl Chaos {
    fn new(name: &str, poison: Option<Key>) -> Arc<Self> {
        Arc::new(Chaos {
            name: name.into(),
            failing: AtomicBool::new(false),
            poisonous: AtomicBool::new(poison.is_some()),
            poison,
            handled: Mutex::new(Vec::new()),
            retries: AtomicUsize::new(0),
            poisons: AtomicUsize::new(0),
            redriven_handled: AtomicUsize::new(0),
            filled_handled: AtomicUsize::new(0),
        })
    }

    fn handled(&self) -> Vec<Key> {
        self.handled.lock().unwrap().clone()
    }

    fn distinct(&self) -> usize {
        self.handled().into_iter().collect::<BTreeSet<_>>().len()
    }
}

impl Consumer for Chaos {
    fn name(&self) -> &str {
        &self.name
    }

    fn handle<'a>(&'a self, delivered: &'a Delivered) -> BoxFuture<'a, Result<(), ConsumerError>> {
        let key: Key = (
            delivered.event.data.pk.clone(),
            delivered.event.data.sk.clone(),
            delivered.event.itemversion,
        );
        let answer = if self.failing.load(Ordering::SeqCst) {
            self.retries.fetch_add(1, Ordering::Relaxed);
            Err(ConsumerError::retry("the search index is away"))
        } else if self.poison.as_ref() == Some(&key) && self.poisonous.load(Ordering::SeqCst) {
            self.poisons.fetch_add(1, Ordering::Relaxed);
            Err(ConsumerError::poison(POISON_REASON))
        } else {
            if delivered.redriven {
                self.redriven_handled.fetch_add(1, Ordering::Relaxed);
            }
            if delivered.filled {
                self.filled_handled.fetch_add(1, Ordering::Relaxed);
            }
            self.handled.lock().unwrap().push(key);
            Ok(())
        };
        async move { answer }.boxed()
    }
}

/// Polls until `done()` holds with nothing left in flight and an empty receive; panics after
/// [`PHASE_CAP`].
async fn drain(
    what: &str,
    mapper: &mut SqsMapper,
    sqs: &aws_sdk_sqs::Client,
    invoker: &RuntimeInProcess,
    done: impl Fn() -> bool,
) -> usize {
    let started = Instant::now();
    let mut polls = 0;
    loop {
        assert!(
            started.elapsed() < PHASE_CAP,
            "{what}: not done after {PHASE_CAP:?} ({polls} polls, {} waiting)",
            mapper.waiting()
        );
        let received = poll(mapper, sqs, invoker).await;
        polls += 1;
        if received == 0 && mapper.waiting() == 0 && done() {
            return polls;
        }
    }
}

/// Every message of the dead-letter queue `url` (receiving holds them; all are made visible
/// again together, as the SQS mapping releases what it left, so that the FIFO order holds).
async fn peek(sqs: &aws_sdk_sqs::Client, url: &str) -> Vec<aws_sdk_sqs::types::Message> {
    let mut all = Vec::new();
    loop {
        let messages = sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .visibility_timeout(30)
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .message_attribute_names("All")
            .send()
            .await
            .unwrap()
            .messages
            .unwrap_or_default();
        if messages.is_empty() {
            break;
        }
        all.extend(messages);
    }
    for chunk in all.chunks(10) {
        let entries = chunk
            .iter()
            .enumerate()
            .map(|(i, m)| {
                ChangeMessageVisibilityBatchRequestEntry::builder()
                    .id(i.to_string())
                    .receipt_handle(m.receipt_handle().unwrap())
                    .visibility_timeout(0)
                    .build()
                    .unwrap()
            })
            .collect();
        sqs.change_message_visibility_batch()
            .queue_url(url)
            .set_entries(Some(entries))
            .send()
            .await
            .unwrap();
    }
    all
}

fn attribute<'m>(message: &'m aws_sdk_sqs::types::Message, name: &str) -> Option<&'m str> {
    message
        .message_attributes()
        .and_then(|a| a.get(name))
        .and_then(|v| v.string_value())
}

/// The `(pk, sk, version)` of a parked message's body (an event).
fn key_of(message: &aws_sdk_sqs::types::Message) -> Key {
    let event: cqrs_events::ChangeEvent =
        serde_json::from_str(message.body().unwrap_or_default()).expect("a parked event");
    (event.data.pk, event.data.sk, event.itemversion)
}

// ------------------------------------------------------------------------------------------

#[tokio::test]
async fn every_consumer_sees_every_version_once_in_order_through_chaos_a_failure_window_and_a_poison()
 {
    let seed = seed(DEFAULT_SEED);
    eprintln!("change feed chaos: seed {seed} (replay the plan with RELIABILITY_SEED={seed})");
    let mut rng = Rng::new(seed);
    let started = Instant::now();
    let moto = moto::Throwaway::start("change-feed").expect("moto starts");
    let endpoint = moto.instance.endpoint();
    let tables = cqrs_testkit::fresh_tables().await;
    let store = store(&tables);
    let failures = std::env::temp_dir().join(format!(
        "reliability-change-feed-failures-{}.jsonl",
        std::process::id()
    ));
    let mapper_config = MapperConfig {
        retry_backoff: Duration::from_millis(1),
        max_retries: 20,
        failure_file: failures.clone(),
        ..Default::default()
    };

    // 1. The commands, four items at a time, each item's versions in order.
    let set_up = started.elapsed();
    let items = plan(&mut rng);
    let commands: Vec<Item> = items.iter().flatten().cloned().collect();
    futures::stream::iter(items.iter())
        .map(|versions| {
            let store = &store;
            async move {
                for item in versions {
                    store
                        .put_command(item, None)
                        .await
                        .unwrap_or_else(|e| panic!("writing {}: {e}", item.sk));
                }
            }
        })
        .buffer_unordered(4)
        .collect::<Vec<()>>()
        .await;

    // 2. data-sync: the command stream in shuffled, duplicated and replayed windows of up to 30
    //    records (an item's versions in one window collapse into one data write).
    let written = started.elapsed();
    let records = tables.command_stream_records(commands.len()).await;
    assert_eq!(records.len(), commands.len(), "one INSERT per command");
    let sync = SyncInProcess {
        sync: DataSync::new(store.clone()),
        arn: tables.command_stream_arn().await,
    };
    let (sync_deliveries, sync_duplicates) = deliveries(&mut rng, records.len(), 30, 4, 40, true);
    let mut sync_invocations = 0;
    for range in &sync_deliveries {
        let report = deliver(&sync, "shard-0", &records[range.clone()], &mapper_config).await;
        sync_invocations += report.invocations;
        assert_eq!(
            report.dead_lettered, 0,
            "data-sync dead-lettered (seed {seed})"
        );
    }
    let synced = started.elapsed();
    let history = scan_items(&tables, &tables.history).await;
    assert_eq!(
        history.len(),
        commands.len(),
        "every version in history (seed {seed})"
    );
    let mut expected: BTreeMap<(String, String), i64> = BTreeMap::new();
    for item in &history {
        let key = (item.pk.clone(), item.base_sk().to_string());
        let n = expected.entry(key).or_default();
        *n = (*n).max(item.version);
    }
    let total: usize = expected.values().map(|n| *n as usize).sum();
    assert_eq!(total, commands.len());

    // The data table's stream: every state data-sync wrote, read until it holds each item's
    //    newest version (DynamoDB Local's stream may lag the writes a little).
    let newest_of = |records: &[Record]| -> BTreeMap<(String, String), i64> {
        let mut newest = BTreeMap::new();
        for record in records {
            let Some(image) = record.dynamodb().and_then(|d| d.new_image()) else {
                continue;
            };
            let text = |name: &str| match image.get(name) {
                Some(aws_sdk_dynamodbstreams::types::AttributeValue::S(s)) => s.clone(),
                _ => String::new(),
            };
            let version = match image.get("version") {
                Some(aws_sdk_dynamodbstreams::types::AttributeValue::N(n)) => {
                    n.parse::<i64>().unwrap_or(0)
                }
                _ => 0,
            };
            let n = newest.entry((text("pk"), text("sk"))).or_insert(0);
            *n = (*n).max(version);
        }
        newest
    };
    let mut data_records = tables.data_stream_records(ITEMS).await;
    let stream_started = Instant::now();
    while newest_of(&data_records) != expected {
        assert!(
            stream_started.elapsed() < Duration::from_secs(10),
            "the data table's stream lacks newest versions after 10 s (seed {seed})"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        data_records = tables.data_stream_records(ITEMS).await;
    }
    let projected = started.elapsed();

    // 3. The topic, the consumers' queues and dead-letter queues on moto.
    let sqs = moto::sqs_client(&endpoint);
    let sns = moto::sns_client(&endpoint);
    let (topic, (a_url, a_arn, a_dlq), (b_url, b_arn, b_dlq)) =
        feed::topic_with_consumers_a_and_b(&sqs, &sns).await;

    let feed = || cqrs_events::Feed::new(cqrs_model::Model::example(), "urn:cqrs:shop");
    let parked_store = feed::parked_store(&tables);
    let topic_handle = Arc::new(FlakyTopic {
        inner: SnsTopic::new(sns.clone(), &topic),
        refusing: AtomicBool::new(true),
        calls: AtomicUsize::new(0),
        refused: AtomicUsize::new(0),
        accepted: AtomicUsize::new(0),
    });
    struct Shared(Arc<FlakyTopic>);
    impl Publish for Shared {
        fn publish_batch<'a>(&'a self, entries: &'a [Entry]) -> BoxFuture<'a, CallResult> {
            self.0.publish_batch(entries)
        }
    }
    let publisher = PublisherInProcess {
        publisher: Publisher::new(
            feed(),
            parked_store.clone(),
            Shared(topic_handle.clone()),
            parked_store.clone(),
        ),
        arn: tables.data_stream_arn().await,
        invocations: AtomicUsize::new(0),
    };

    let poison_item = &items[0];
    let poison: Key = (
        poison_item[1].pk.clone(),
        poison_item[1].base_sk().to_string(),
        2,
    );
    let behind_poison = poison_item.len() - 2;
    let a = Chaos::new("a", Some(poison.clone()));
    let b = Chaos::new("b", None);
    let runtime = |consumer: Arc<Chaos>, dlq: &str, max_receive: u32| RuntimeInProcess {
        runtime: Runtime::new(
            consumer,
            feed(),
            store.clone(),
            DynamoMarkers::new(tables.client.clone(), &tables.idempotency),
            SqsDeadLetter::new(sqs.clone(), dlq),
        )
        .with_max_receive(max_receive),
        totals: Mutex::new(Totals::default()),
        crash_next: AtomicUsize::new(0),
        crashed: AtomicUsize::new(0),
    };
    // A's retries during its window must not exhaust it: the window is about failing and
    // recovering; the poison is what gets parked.
    let a_runtime = runtime(a.clone(), &a_dlq, 1000);
    let b_runtime = runtime(b.clone(), &b_dlq, 5);
    let mut a_mapper = mapper(&a_url, &a_arn);
    let mut b_mapper = mapper(&b_url, &b_arn);

    // 4. Publisher, B and A at once. A fails every event until B has seen everything (at most
    //    WINDOW_CAP), then recovers.
    let (pub_deliveries, pub_duplicates) =
        deliveries(&mut rng, data_records.len(), 8, 3, 10, false);
    let published = AtomicBool::new(false);
    let b_done = AtomicBool::new(false);
    let feed_started = Instant::now();
    a.failing.store(true, Ordering::SeqCst);

    let publish = async {
        let mut failed_invocations = 0;
        for range in &pub_deliveries {
            let report = deliver(
                &publisher,
                "shard-0",
                &data_records[range.clone()],
                &mapper_config,
            )
            .await;
            failed_invocations += report.failed_invocations;
            assert_eq!(
                report.dead_lettered, 0,
                "the publisher dead-lettered (seed {seed})"
            );
        }
        published.store(true, Ordering::SeqCst);
        (failed_invocations, feed_started.elapsed())
    };
    let consume_b = async {
        let polls = drain("consumer B", &mut b_mapper, &sqs, &b_runtime, || {
            published.load(Ordering::SeqCst) && b.distinct() >= total
        })
        .await;
        b_done.store(true, Ordering::SeqCst);
        (polls, feed_started.elapsed())
    };
    let consume_a = async {
        // The failure window.
        let mut polls = 0;
        while !b_done.load(Ordering::SeqCst) && feed_started.elapsed() < WINDOW_CAP {
            poll(&mut a_mapper, &sqs, &a_runtime).await;
            polls += 1;
        }
        a.failing.store(false, Ordering::SeqCst);
        // Recovering, its first two invocations time out after their work was done.
        a_runtime.crash_next.store(2, Ordering::SeqCst);
        let window = feed_started.elapsed();
        let at_window_end = (
            b.distinct(),
            b_done.load(Ordering::SeqCst),
            a.handled().len(),
        );
        // Recovered: everything but the poisoned item's v2 and what is held behind it.
        polls += drain(
            "consumer A after its window",
            &mut a_mapper,
            &sqs,
            &a_runtime,
            || published.load(Ordering::SeqCst) && a.distinct() >= total - 1 - behind_poison,
        )
        .await;
        (polls, window, at_window_end)
    };
    let ((pub_failed, pub_time), (b_polls, b_time), (a_polls, window, at_window_end)) =
        tokio::join!(publish, consume_b, consume_a);
    let _ = std::fs::remove_file(&failures);
    assert_eq!(
        common::scan_raw(&tables, &tables.parked).await.len(),
        0,
        "the publisher parked nothing: every record of this run can be published (seed {seed})"
    );

    // B finished while A was still failing every event: B never waited on A.
    let (b_seen_at_window_end, b_done_at_window_end, a_handled_at_window_end) = at_window_end;
    assert!(
        b_done_at_window_end && b_seen_at_window_end == total,
        "B had seen {b_seen_at_window_end} of {total} versions when A's failure window ended \
         ({window:.1?}): B waited (seed {seed})"
    );
    assert_eq!(
        a_handled_at_window_end, 0,
        "A handled nothing while failing"
    );
    assert!(
        a.retries.load(Ordering::Relaxed) > 0,
        "A failed during its window"
    );

    // 5. The poison is parked in A's dead-letter queue with its reason, the item's later
    //    versions held behind it.
    let parked = peek(&sqs, &a_dlq).await;
    let poisoned: Vec<_> = parked
        .iter()
        .filter(|m| attribute(m, "cqrs-reason-kind") == Some("poison"))
        .collect();
    // (A crashed invocation may bring a parked message back and park it again: at least once.)
    assert!(!poisoned.is_empty(), "the poison is parked: {parked:#?}");
    for message in &poisoned {
        assert_eq!(key_of(message), poison, "the poison's version");
        assert_eq!(attribute(message, "cqrs-reason"), Some(POISON_REASON));
        assert_eq!(attribute(message, "cqrs-consumer"), Some("a"));
    }
    let held: BTreeSet<Key> = parked
        .iter()
        .filter(|m| attribute(m, "cqrs-reason-kind") == Some("held"))
        .map(key_of)
        .collect();
    let want_held: BTreeSet<Key> = (3..=poison_item.len() as i64)
        .map(|v| (poison.0.clone(), poison.1.clone(), v))
        .collect();
    assert_eq!(
        held, want_held,
        "the poisoned item's later versions, and only they, are held behind it"
    );
    let reason_kinds: BTreeMap<String, usize> =
        parked.iter().fold(BTreeMap::new(), |mut kinds, m| {
            *kinds
                .entry(
                    attribute(m, "cqrs-reason-kind")
                        .unwrap_or("(none)")
                        .to_string(),
                )
                .or_default() += 1;
            kinds
        });
    assert_eq!(depth(&sqs, &b_dlq).await, 0, "nothing of B parked");

    // 6. The handler is fixed; the dead-letter queue goes back to A's queue; A drains it.
    a.poisonous.store(false, Ordering::SeqCst);
    let redrive_started = Instant::now();
    let report = cqrs_consumer::redrive::redrive(
        &sqs,
        &a_dlq,
        &a_url,
        &cqrs_consumer::redrive::RedriveOptions::default(),
    )
    .await
    .expect("redrive");
    assert_eq!(
        report.moved,
        parked.len(),
        "every parked message moved back"
    );
    assert_eq!(report.left, 0);
    assert_eq!(
        report.by_reason.get("held").copied().unwrap_or(0),
        parked.len() - poisoned.len(),
        "the redrive counts by reason: {:?}",
        report.by_reason
    );
    let a_redrive_polls = drain(
        "consumer A after the redrive",
        &mut a_mapper,
        &sqs,
        &a_runtime,
        || a.distinct() >= total,
    )
    .await;
    let redriven = redrive_started.elapsed();

    // 7. A restarted stream reader: the whole data stream once more, after the consumers deleted
    //    every message (moto, like SQS after five minutes, no longer drops the repeated dedup
    //    ids): both consumers get every version again and must handle none of them. The topic
    //    takes every call now (the refusals were for the first pass).
    topic_handle.refusing.store(false, Ordering::SeqCst);
    let late_started = Instant::now();
    let (a_before, b_before) = (a.handled().len(), b.handled().len());
    let totals = |r: &RuntimeInProcess| {
        let t = r.totals.lock().unwrap();
        (t.messages, t.duplicates)
    };
    let (a_late, b_late) = (totals(&a_runtime), totals(&b_runtime));
    let accepted_before = topic_handle.accepted.load(Ordering::Relaxed);
    let late = deliver(&publisher, "shard-0", &data_records, &mapper_config).await;
    assert_eq!(
        late.dead_lettered, 0,
        "the publisher dead-lettered (seed {seed})"
    );
    let late_entries = topic_handle.accepted.load(Ordering::Relaxed) - accepted_before;
    // Each version comes at least once more: drain until as many messages came.
    let a_messages = || totals(&a_runtime).0 - a_late.0;
    let b_messages = || totals(&b_runtime).0 - b_late.0;
    tokio::join!(
        drain(
            "consumer A, late replay",
            &mut a_mapper,
            &sqs,
            &a_runtime,
            || a_messages() >= total
        ),
        drain(
            "consumer B, late replay",
            &mut b_mapper,
            &sqs,
            &b_runtime,
            || b_messages() >= total
        ),
    );
    let (a_late_duplicates, b_late_duplicates) = (
        totals(&a_runtime).1 - a_late.1,
        totals(&b_runtime).1 - b_late.1,
    );
    assert_eq!(
        (a.handled().len(), b.handled().len()),
        (a_before, b_before),
        "the late replay handled nothing again"
    );
    assert!(
        a_late_duplicates >= total && b_late_duplicates >= total,
        "every version came again and was dropped as a duplicate: A {a_late_duplicates}, B \
         {b_late_duplicates} of {total}"
    );
    let late_time = late_started.elapsed();

    // 8. Every consumer: every version of the history exactly once, in order per item; nothing
    //    left in any dead-letter queue.
    check_order("A", &a.handled(), &expected);
    check_order("B", &b.handled(), &expected);
    assert_eq!(
        depth(&sqs, &a_dlq).await,
        0,
        "A's dead-letter queue is empty"
    );
    assert_eq!(
        depth(&sqs, &b_dlq).await,
        0,
        "B's dead-letter queue is empty"
    );
    assert_eq!(depth(&sqs, &a_url).await, 0, "A's queue is empty");
    assert_eq!(depth(&sqs, &b_url).await, 0, "B's queue is empty");
    assert!(
        a.redriven_handled.load(Ordering::Relaxed) >= 1,
        "the poison came back redriven and was handled"
    );
    assert_eq!(
        a_runtime.crashed.load(Ordering::Relaxed),
        2,
        "A crashed twice after its work"
    );

    let (at, bt) = (
        a_runtime.totals.lock().unwrap(),
        b_runtime.totals.lock().unwrap(),
    );
    let entries_accepted = topic_handle.accepted.load(Ordering::Relaxed);
    eprintln!(
        "change feed chaos: seed {seed}: {} commands over {} items; data-sync: {} deliveries \
         ({sync_duplicates} duplicated, 4 replayed windows, shuffled), {sync_invocations} \
         invocations, {} data-table records (versions collapsed: {}); moto and tables up at \
         {set_up:.1?}, commands written at {written:.1?}, projected at {synced:.1?}, data stream \
         read at {projected:.1?}",
        commands.len(),
        expected.len(),
        sync_deliveries.len(),
        data_records.len(),
        commands.len() - data_records.len().min(commands.len()),
    );
    eprintln!(
        "change feed chaos: publisher: {} deliveries ({pub_duplicates} duplicated, 3 replayed \
         windows), {} invocations ({pub_failed} failed and retried or bisected), {} PublishBatch \
         calls ({} refused as a whole), {entries_accepted} entries accepted by SNS for {total} \
         versions; done in {pub_time:.1?}",
        pub_deliveries.len(),
        publisher.invocations.load(Ordering::Relaxed),
        topic_handle.calls.load(Ordering::Relaxed),
        topic_handle.refused.load(Ordering::Relaxed),
    );
    eprintln!(
        "change feed chaos: consumer B: {} invocations, {} messages, {} handled, {} duplicates \
         dropped, {} gaps filled, {} retried, {} parked; {b_polls} polls; done in {b_time:.1?}, \
         while A was failing (A's window ended at {window:.1?})",
        bt.invocations,
        bt.messages,
        b.handled().len(),
        bt.duplicates,
        bt.gaps_filled,
        bt.retried,
        bt.parked,
    );
    eprintln!(
        "change feed chaos: consumer A: {} invocations, {} messages, {} handled, {} duplicates \
         dropped, {} gaps filled, {} events failed in its window ({} messages retried), {} \
         invocations crashed after their work, the handler answered Poison {} times, {} parks, \
         in the dead-letter queue \
         ({reason_kinds:?}: the poison and {} versions held behind it), {} redriven ({:?}), {} \
         handled after the redrive; {a_polls} + {a_redrive_polls} polls; redrive to done in \
         {redriven:.1?}",
        at.invocations,
        at.messages,
        a.handled().len(),
        at.duplicates,
        at.gaps_filled,
        a.retries.load(Ordering::Relaxed),
        at.retried,
        a_runtime.crashed.load(Ordering::Relaxed),
        a.poisons.load(Ordering::Relaxed),
        at.parked,
        held.len(),
        report.moved,
        report.by_reason,
        a.redriven_handled.load(Ordering::Relaxed),
    );
    // A batch that crashed after parking comes back whole: the parked version is acknowledged
    // there (it waits for its redrive), so nothing is parked twice and the handler saw the poison
    // once before the redrive.
    assert_eq!(at.parked, 1 + held.len(), "each parked message parked once");
    assert_eq!(
        a.poisons.load(Ordering::Relaxed),
        1,
        "the poison handled once before its redrive"
    );
    eprintln!(
        "change feed chaos: late replay of the whole data stream ({} records): {late_entries} \
         entries published again, A dropped {} and B {} duplicates, handled none again; \
         {late_time:.1?}; total {:.1?}",
        data_records.len(),
        a_late_duplicates,
        b_late_duplicates,
        started.elapsed(),
    );
    drop(moto);
}

/// The consumer runtime, crashing (a failed invocation: the whole batch comes back) on every
/// batch that holds version `crash_on` of an item and was not redriven.
struct CrashOn {
    inner: RuntimeInProcess,
    crash_on: i64,
    crashed: AtomicUsize,
}

impl InvokeSqs for CrashOn {
    async fn invoke_sqs(&self, event: &serde_json::Value) -> Result<Vec<String>, InvokeError> {
        let fatal = event["Records"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|record| {
                let body: serde_json::Value =
                    serde_json::from_str(record["body"].as_str().unwrap_or_default())
                        .unwrap_or_default();
                body["itemversion"].as_i64() == Some(self.crash_on)
                    && record["messageAttributes"]
                        .get(cqrs_consumer::runtime::REDRIVEN_ATTRIBUTE)
                        .is_none()
            });
        if fatal {
            self.crashed.fetch_add(1, Ordering::Relaxed);
            return Err(InvokeError("injected: the function crashed".into()));
        }
        self.inner.invoke_sqs(event).await
    }
}

#[tokio::test]
async fn a_message_sqs_itself_dead_letters_leaves_a_gap_filled_from_history_and_its_redrive_is_a_duplicate()
 {
    let started = Instant::now();
    let moto = moto::Throwaway::start("change-feed-gap").expect("moto starts");
    let endpoint = moto.instance.endpoint();
    let tables = cqrs_testkit::fresh_tables().await;
    let store = store(&tables);
    let sqs = moto::sqs_client(&endpoint);

    // Versions 1..=4 of one product, in the history table as data-sync writes them.
    let mut rng = Rng::new(seed(DEFAULT_SEED));
    let versions: Vec<Item> = (1..=4)
        .map(|v| product("t1", "P900", v, &mut rng))
        .collect();
    assert!(
        store
            .put_history_batch(&versions)
            .await
            .iter()
            .all(Result::is_ok),
        "history written"
    );

    // The consumer's queue: SQS moves a message to the dead-letter queue after 2 receives.
    let (dlq_url, dlq_arn) = fifo_queue(&sqs, "shop-consumer-c-dlq", &[]).await;
    let redrive_policy =
        serde_json::json!({ "deadLetterTargetArn": dlq_arn, "maxReceiveCount": "2" });
    let (url, arn) = fifo_queue(
        &sqs,
        "shop-consumer-c",
        &[
            (QueueAttributeName::VisibilityTimeout, "1".into()),
            (
                QueueAttributeName::RedrivePolicy,
                redrive_policy.to_string(),
            ),
        ],
    )
    .await;
    // The events, as the publisher sends them (group = the item, dedup id = the event id).
    let feed = cqrs_events::Feed::new(cqrs_model::Model::example(), "urn:cqrs:shop");
    for (i, version) in versions.iter().enumerate() {
        let previous = i.checked_sub(1).map(|p| &versions[p]);
        let event = feed
            .version_event(version, previous, chrono::Utc::now())
            .expect("a product event");
        sqs.send_message()
            .queue_url(&url)
            .message_body(serde_json::to_string(&event).unwrap())
            .message_group_id(cqrs_keys::member_token(&event.data.pk, &event.data.sk))
            .message_deduplication_id(&event.id)
            .send()
            .await
            .unwrap();
    }

    let c = Chaos::new("c", None);
    let invoker = CrashOn {
        inner: RuntimeInProcess {
            runtime: Runtime::new(
                c.clone(),
                feed,
                store.clone(),
                DynamoMarkers::new(tables.client.clone(), &tables.idempotency),
                SqsDeadLetter::new(sqs.clone(), &dlq_url),
            ),
            totals: Mutex::new(Totals::default()),
            crash_next: AtomicUsize::new(0),
            crashed: AtomicUsize::new(0),
        },
        crash_on: 2,
        crashed: AtomicUsize::new(0),
    };
    // One message a batch, so that only v2's batches crash.
    let mut config = SqsMapperConfig::new(&url, &arn);
    config.visibility_timeout = Duration::from_secs(1);
    config.wait = Duration::ZERO;
    config.batch_size = 1;
    let mut mapper = SqsMapper::new(config);

    // Until the last version is handled (v2 by then in the dead-letter queue).
    let phase = Instant::now();
    loop {
        assert!(
            phase.elapsed() < PHASE_CAP,
            "not done after {PHASE_CAP:?}: handled {:?}",
            c.handled()
        );
        let report = mapper
            .poll(&sqs, &invoker)
            .await
            .expect("the queue answers");
        if report.received == 0 {
            // The last version handled: the item went past v2 one way or another.
            if c.handled().iter().any(|k| k.2 == 4) && mapper.waiting() == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let key = |v: i64| ("PRODUCT#t1".to_string(), "P900".to_string(), v);
    assert_eq!(
        c.handled(),
        (1..=4).map(key).collect::<Vec<_>>(),
        "every version once, in order, v2 read from history"
    );
    assert_eq!(c.filled_handled.load(Ordering::Relaxed), 1, "v2 was filled");
    assert_eq!(invoker.inner.totals.lock().unwrap().gaps_filled, 1);
    assert_eq!(
        depth(&sqs, &dlq_url).await,
        1,
        "v2 is in the dead-letter queue"
    );

    // The redrive brings v2 back: a duplicate, handled no more.
    let report = cqrs_consumer::redrive::redrive(
        &sqs,
        &dlq_url,
        &url,
        &cqrs_consumer::redrive::RedriveOptions::default(),
    )
    .await
    .expect("redrive");
    assert_eq!(report.moved, 1);
    assert_eq!(
        report.by_reason.get(cqrs_consumer::redrive::UNKNOWN_REASON),
        Some(&1),
        "SQS moved it: no reason: {:?}",
        report.by_reason
    );
    let phase = Instant::now();
    while invoker.inner.totals.lock().unwrap().duplicates == 0 || mapper.waiting() > 0 {
        assert!(phase.elapsed() < PHASE_CAP, "the redriven v2 never came");
        poll(&mut mapper, &sqs, &invoker.inner).await;
    }
    assert_eq!(c.handled().len(), 4, "the redriven v2 was a duplicate");
    assert_eq!(depth(&sqs, &dlq_url).await, 0);
    assert_eq!(depth(&sqs, &url).await, 0);
    let crashed = invoker.crashed.load(Ordering::Relaxed);
    assert!(crashed >= 2, "v2 crashed the function until SQS moved it");
    eprintln!(
        "change feed gap: v2 crashed the function {crashed} times, SQS moved it to the dead-letter \
         queue (maxReceiveCount 2), v3 found the gap and the runtime filled v2 from history \
         ({} gap filled), the redrive ({:?}) brought v2 back as a duplicate; {:.1?}",
        invoker.inner.totals.lock().unwrap().gaps_filled,
        report.by_reason,
        started.elapsed()
    );
    drop(moto);
}
