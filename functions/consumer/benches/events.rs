//! Change events, locally (`cargo bench -p cqrs-consumer --bench events`; `make bench`'s phase
//! `events`): a consumer beside raw SQS on the same local queue, and the latency from a command to
//! the consumer's handler. Reports, never asserts; everything on 127.0.0.1: moto's server (SNS and
//! SQS, started here and stopped on drop, also when the bench fails) and DynamoDB Local from the
//! environment (`AWS_ENDPOINT_URL_DYNAMODB`, as `scripts/bench.sh` gives it) for the consumer's
//! markers and the tables.
//!
//! 1. **Raw**: `BENCH_EVENTS_ITEMS` (200) items × `BENCH_EVENTS_VERSIONS` (10) change events (the
//!    JSON body the publisher sends, group = `cqrs_keys::member_token`, dedup id = the event id, the
//!    String attributes `type`, `tenant`, `entity`) sent with `SendMessageBatch` (10 a call, one
//!    call at a time: an item's versions stay in order) into a FIFO queue, then drained with
//!    `ReceiveMessage` (10, all attributes, no wait) and `DeleteMessageBatch`; in waves of
//!    `BENCH_EVENTS_WAVE` (one version of every item) sent then drained, because moto's
//!    `SendMessage` costs in proportion to the queue's depth.
//! 2. **Consumer**: the same events sent the same way into another FIFO queue, drained by
//!    [`SqsMapper`] invoking [`Runtime`] in process (Lambda's SQS event parsed as the function
//!    parses it; a no-op handler; markers in DynamoDB Local's idempotency table, as in AWS).
//!    Both sides alternate wave by wave within a run; `BENCH_EVENTS_REPEATS` (3) runs after a
//!    warm-up of one wave, fresh queues and a fresh consumer name (so fresh markers) each run;
//!    medians.
//! 3. **Latency**: `BENCH_EVENTS_COMMANDS` (200) item versions (20 items, round robin) written to
//!    the command table one every `BENCH_EVENTS_COMMAND_MS` (50) ms; data-sync in process on the
//!    command table's stream, the publisher ([`Publisher`] with its [`SnsTopic`] on moto's FIFO
//!    topic) on the data table's stream, each stream polled every `BENCH_EVENTS_STREAM_POLL_MS`
//!    (25) ms when it had nothing; the consumer's queue subscribed with raw delivery and read by
//!    [`SqsMapper`] + [`Runtime`] (receive without wait, `BENCH_EVENTS_SQS_POLL_MS` (25) ms pause
//!    after an empty one). Per version: the handler's time minus the moment the command write
//!    returned; p50/p99. The polling intervals dominate locally (Lambda polls a stream about 4
//!    times a second, SQS with long polling).
//!
//! Prints one `BENCH_EVENTS {json}` line (what `bench/run.py` reads) and a few lines for people.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_sdk_sqs::types::{
    DeleteMessageBatchRequestEntry, MessageAttributeValue, MessageSystemAttributeName,
    QueueAttributeName, SendMessageBatchRequestEntry,
};
use cqrs_consumer::marker::DynamoMarkers;
use cqrs_consumer::park::SqsDeadLetter;
use cqrs_consumer::sqs::SqsEvent;
use cqrs_consumer::{ConsumerError, Delivered, Runtime, from_fn};
use cqrs_data_sync::DataSync;
use cqrs_event_publisher::{Publisher, SnsTopic};
use cqrs_events::{ChangeEvent, Feed};
use cqrs_item::{Item, Value};
use cqrs_local_stack::mapper::InvokeError;
use cqrs_local_stack::moto;
use cqrs_local_stack::sqs_mapper::{InvokeSqs, SqsMapper, SqsMapperConfig};
use cqrs_local_stack::stream::StreamReader;
use serde_json::json;

/// Longest a drain or the latency run may take before the bench gives up (a hang is reported, not
/// waited for).
const CAP: Duration = Duration::from_secs(300);

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

// ------------------------------------------------------------------------------------------
// moto and the clients

/// A FIFO queue `<name>.fifo` (explicit dedup ids, visibility 30 s); its URL and ARN.
async fn fifo_queue(sqs: &aws_sdk_sqs::Client, name: &str) -> (String, String) {
    let url = sqs
        .create_queue()
        .queue_name(format!("{name}.fifo"))
        .attributes(QueueAttributeName::FifoQueue, "true")
        .attributes(QueueAttributeName::ContentBasedDeduplication, "false")
        .attributes(QueueAttributeName::VisibilityTimeout, "30")
        .send()
        .await
        .expect("CreateQueue")
        .queue_url
        .expect("a queue URL");
    let arn = sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .expect("GetQueueAttributes")
        .attributes
        .and_then(|mut a| a.remove(&QueueAttributeName::QueueArn))
        .expect("a queue ARN");
    (url, arn)
}

// ------------------------------------------------------------------------------------------
// The events

fn feed() -> Feed {
    Feed::new(cqrs_model::Model::example(), "urn:cqrs:shop")
}

/// Version `v` of product `code` of `tenant` (the example model's `product`).
fn product(tenant: &str, code: &str, v: i64) -> Item {
    let mut item = Item::example();
    item.pk = format!("PRODUCT#{tenant}");
    item.sk = cqrs_keys::add_sort_key_version(code, v);
    item.id = cqrs_keys::generate_id(&item.pk, code);
    item.code = code.into();
    item.name = format!("{code} v{v}");
    item.version = v;
    item.tenant_code = tenant.into();
    item.item_type = "PRODUCT".into();
    item.entity = Some("product".into());
    item.attributes.clear();
    item.attributes
        .insert("productId".into(), Value::from(code));
    item.attributes
        .insert("priceCents".into(), Value::from(100 * v));
    item.updated_at = format!("2026-01-01T00:00:{:02}.{v:03}Z", v % 60);
    item
}

/// `items` × `versions` events, version-major (v1 of every item, then v2, ...): each batch of 10
/// holds 10 items, and an item's versions go in order.
fn events(items: usize, versions: usize) -> Vec<ChangeEvent> {
    let feed = feed();
    let now = chrono::Utc::now();
    let mut out = Vec::with_capacity(items * versions);
    for v in 1..=versions as i64 {
        for i in 0..items {
            let code = format!("P{i:04}");
            let previous = (v > 1).then(|| product("t1", &code, v - 1));
            out.push(
                feed.version_event(&product("t1", &code, v), previous.as_ref(), now)
                    .expect("an event of the model"),
            );
        }
    }
    out
}

fn string_attribute(value: &str) -> MessageAttributeValue {
    MessageAttributeValue::builder()
        .data_type("String")
        .string_value(value)
        .build()
        .expect("a String attribute")
}

/// The send entries of `events`, as the publisher's messages arrive through SNS raw delivery.
fn entries(events: &[ChangeEvent]) -> Vec<SendMessageBatchRequestEntry> {
    events
        .iter()
        .enumerate()
        .map(|(i, event)| {
            SendMessageBatchRequestEntry::builder()
                .id(format!("e{}", i % 10))
                .message_body(serde_json::to_string(event).expect("JSON"))
                .message_group_id(cqrs_keys::member_token(&event.data.pk, &event.data.sk))
                .message_deduplication_id(&event.id)
                .message_attributes("type", string_attribute(&event.event_type))
                .message_attributes("tenant", string_attribute(&event.tenant))
                .message_attributes("entity", string_attribute(&event.entity))
                .build()
                .expect("an entry")
        })
        .collect()
}

/// Sends `entries` 10 a call, one call at a time; the seconds it took.
async fn send(
    sqs: &aws_sdk_sqs::Client,
    url: &str,
    entries: &[SendMessageBatchRequestEntry],
) -> f64 {
    let started = Instant::now();
    for chunk in entries.chunks(10) {
        let out = sqs
            .send_message_batch()
            .queue_url(url)
            .set_entries(Some(chunk.to_vec()))
            .send()
            .await
            .expect("SendMessageBatch");
        assert!(
            out.failed().is_empty(),
            "SendMessageBatch failed entries: {:?}",
            out.failed()
        );
    }
    started.elapsed().as_secs_f64()
}

/// Raw: receives (10, all attributes, no wait) and deletes until `n` messages were received; the
/// seconds it took.
async fn drain_raw(sqs: &aws_sdk_sqs::Client, url: &str, n: usize, pause: Duration) -> f64 {
    let started = Instant::now();
    let mut received = 0;
    while received < n {
        assert!(
            started.elapsed() < CAP,
            "raw drain: {received}/{n} after {CAP:?}"
        );
        let messages = sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .wait_time_seconds(0)
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .message_attribute_names("All")
            .send()
            .await
            .expect("ReceiveMessage")
            .messages
            .unwrap_or_default();
        if messages.is_empty() {
            tokio::time::sleep(pause).await;
            continue;
        }
        received += messages.len();
        let entries: Vec<DeleteMessageBatchRequestEntry> = messages
            .iter()
            .enumerate()
            .map(|(i, m)| {
                DeleteMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .receipt_handle(m.receipt_handle.clone().unwrap_or_default())
                    .build()
                    .expect("an entry")
            })
            .collect();
        sqs.delete_message_batch()
            .queue_url(url)
            .set_entries(Some(entries))
            .send()
            .await
            .expect("DeleteMessageBatch");
    }
    started.elapsed().as_secs_f64()
}

/// The runtime invoked in process by the mapping, with Lambda's SQS event parsed as the function
/// parses it; counts what it handled.
struct InProcess {
    runtime: Runtime,
    handled: AtomicUsize,
    retried: AtomicUsize,
}

impl InvokeSqs for InProcess {
    async fn invoke_sqs(&self, event: &serde_json::Value) -> Result<Vec<String>, InvokeError> {
        let event: SqsEvent = serde_json::from_value(event.clone())
            .map_err(|e| InvokeError(format!("not an SQS event: {e}")))?;
        let (answer, counts) = self.runtime.handle_counted(event).await;
        self.handled.fetch_add(counts.handled, Ordering::Relaxed);
        self.retried.fetch_add(counts.retried, Ordering::Relaxed);
        Ok(answer
            .batch_item_failures
            .into_iter()
            .map(|f| f.item_identifier)
            .collect())
    }
}

fn mapper(url: &str, arn: &str) -> SqsMapper {
    let mut config = SqsMapperConfig::new(url, arn);
    config.wait = Duration::ZERO;
    SqsMapper::new(config)
}

/// The consumer: the mapping polls until the handler saw `n` events; the seconds it took.
async fn drain_consumer(
    sqs: &aws_sdk_sqs::Client,
    mapper: &mut SqsMapper,
    invoker: &InProcess,
    n: usize,
    pause: Duration,
) -> f64 {
    let started = Instant::now();
    while invoker.handled.load(Ordering::Relaxed) < n {
        assert!(
            started.elapsed() < CAP,
            "consumer drain: {}/{n} after {CAP:?}",
            invoker.handled.load(Ordering::Relaxed)
        );
        let report = mapper.poll(sqs, invoker).await.expect("the queue answers");
        if report.received == 0 {
            tokio::time::sleep(pause).await;
        }
    }
    started.elapsed().as_secs_f64()
}

fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Linear-interpolation quantile, `q` in [0, 1].
fn quantile(values: &[f64], q: f64) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    let pos = (v.len() - 1) as f64 * q;
    let lo = pos.floor() as usize;
    let hi = (lo + 1).min(v.len() - 1);
    v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
}

// ------------------------------------------------------------------------------------------
// Throughput

async fn throughput(
    sqs: &aws_sdk_sqs::Client,
    tables: &cqrs_testkit::TestTables,
    store: &cqrs_store::Store,
) -> serde_json::Value {
    let items = env_usize("BENCH_EVENTS_ITEMS", 200);
    let versions = env_usize("BENCH_EVENTS_VERSIONS", 10);
    let repeats = env_usize("BENCH_EVENTS_REPEATS", 3).max(1);
    let pause = Duration::from_millis(env_usize("BENCH_EVENTS_SQS_POLL_MS", 25) as u64);
    // Sent and drained in waves of one version of every item: moto's SendMessage costs in
    // proportion to the queue's depth (moto 5.2.5 counts every message's visibility for the
    // queue's attributes, several times a message), so a deep queue measures moto, not the sides.
    let wave = env_usize("BENCH_EVENTS_WAVE", items).max(1);
    let events = events(items, versions);
    let n = events.len();
    let entries = entries(&events);
    let body_bytes: usize = events
        .iter()
        .map(|e| serde_json::to_string(e).map(|s| s.len()).unwrap_or(0))
        .sum();
    let (dlq_url, _) = fifo_queue(sqs, "bench-events-dlq").await;

    let mut raw_total = Vec::new();
    let mut raw_drain = Vec::new();
    let mut raw_send = Vec::new();
    let mut con_total = Vec::new();
    let mut con_drain = Vec::new();
    let mut con_send = Vec::new();
    // One warm-up run of one wave (uncounted), then `repeats` timed runs of every wave. Within a
    // run the sides alternate wave by wave (which goes first alternates too), so that a drift of
    // the shared machine or of moto falls on both alike.
    for run in 0..=repeats {
        let events = if run == 0 {
            &entries[..wave.min(n)]
        } else {
            &entries[..]
        };
        let (raw_url, _) = fifo_queue(sqs, &format!("bench-raw-{run}")).await;
        let (con_url, con_arn) = fifo_queue(sqs, &format!("bench-consumer-{run}")).await;
        // A fresh consumer name each run: fresh markers.
        let consumer = from_fn(format!("bench-{run}"), |_d: Delivered| async {
            Ok::<(), ConsumerError>(())
        });
        let invoker = InProcess {
            runtime: Runtime::new(
                consumer,
                feed(),
                store.clone(),
                DynamoMarkers::new(tables.client.clone(), &tables.idempotency),
                SqsDeadLetter::new(sqs.clone(), &dlq_url),
            ),
            handled: AtomicUsize::new(0),
            retried: AtomicUsize::new(0),
        };
        let mut mapper = mapper(&con_url, &con_arn);
        let (mut rs, mut rd, mut cs, mut cd, mut sent) = (0.0, 0.0, 0.0, 0.0, 0);
        for (k, wave) in events.chunks(wave).enumerate() {
            sent += wave.len();
            for side in 0..2 {
                if (side + k + run) % 2 == 0 {
                    rs += send(sqs, &raw_url, wave).await;
                    rd += drain_raw(sqs, &raw_url, wave.len(), pause).await;
                } else {
                    cs += send(sqs, &con_url, wave).await;
                    cd += drain_consumer(sqs, &mut mapper, &invoker, sent, pause).await;
                }
            }
        }
        let retried = invoker.retried.load(Ordering::Relaxed);
        if retried > 0 {
            eprintln!("events bench: consumer run {run}: {retried} messages retried");
        }
        if run > 0 {
            raw_send.push(rs);
            raw_drain.push(rd);
            raw_total.push(rs + rd);
            con_send.push(cs);
            con_drain.push(cd);
            con_total.push(cs + cd);
        }
        let _ = sqs.delete_queue().queue_url(&raw_url).send().await;
        let _ = sqs.delete_queue().queue_url(&con_url).send().await;
    }
    let rate = |secs: &[f64]| -> Vec<f64> { secs.iter().map(|s| n as f64 / s).collect() };
    let (raw_rates, con_rates) = (rate(&raw_total), rate(&con_total));
    let (raw_drain_rates, con_drain_rates) = (rate(&raw_drain), rate(&con_drain));
    let ratios: Vec<f64> = con_rates
        .iter()
        .zip(&raw_rates)
        .map(|(c, r)| c / r)
        .collect();
    let drain_ratios: Vec<f64> = con_drain_rates
        .iter()
        .zip(&raw_drain_rates)
        .map(|(c, r)| c / r)
        .collect();
    let raw_s = median(&raw_rates);
    let con_s = median(&con_rates);
    eprintln!(
        "events bench: {n} events, send+drain: raw {raw_s:.0}/s, consumer {con_s:.0}/s ({:.2}x); \
         drain alone: raw {:.0}/s, consumer {:.0}/s ({:.2}x)",
        con_s / raw_s,
        median(&raw_drain_rates),
        median(&con_drain_rates),
        median(&con_drain_rates) / median(&raw_drain_rates)
    );
    json!({
        "items": items,
        "versions": versions,
        "events": n,
        "body_bytes_mean": body_bytes as f64 / n as f64,
        "repeats": repeats,
        "wave": wave,
        "sqs_poll_ms": pause.as_millis() as u64,
        "raw": {
            "events_s": raw_s,
            "runs": raw_rates,
            "drain_events_s": median(&raw_drain_rates),
            "drain_runs": raw_drain_rates,
            "send_s": raw_send,
        },
        "consumer": {
            "events_s": con_s,
            "runs": con_rates,
            "drain_events_s": median(&con_drain_rates),
            "drain_runs": con_drain_rates,
            "send_s": con_send,
        },
        "ratio": con_s / raw_s,
        "ratio_runs": ratios,
        "drain_ratio": median(&con_drain_rates) / median(&raw_drain_rates),
        "drain_ratio_runs": drain_ratios,
    })
}

// ------------------------------------------------------------------------------------------
// Latency

/// `(pk, base sk, version)`.
type Key = (String, String, i64);

/// Reads every shard of `reader` once; the records, in shard order.
async fn read_new(reader: &mut StreamReader) -> Vec<aws_sdk_dynamodbstreams::types::Record> {
    reader.refresh_shards().await.expect("DescribeStream");
    let mut out = Vec::new();
    for shard in reader.readable_shards(&HashSet::new()) {
        out.extend(reader.read(&shard, 1000).await.expect("GetRecords"));
    }
    out
}

async fn latency(
    endpoint: &str,
    sqs: &aws_sdk_sqs::Client,
    tables: &cqrs_testkit::TestTables,
    store: &cqrs_store::Store,
) -> serde_json::Value {
    let commands = env_usize("BENCH_EVENTS_COMMANDS", 200);
    let command_ms = env_usize("BENCH_EVENTS_COMMAND_MS", 50) as u64;
    let stream_poll_ms = env_usize("BENCH_EVENTS_STREAM_POLL_MS", 25) as u64;
    let sqs_poll_ms = env_usize("BENCH_EVENTS_SQS_POLL_MS", 25) as u64;
    let items = commands.clamp(1, 20);

    let sns = moto::sns_client(endpoint);
    let topic = sns
        .create_topic()
        .name("bench-events.fifo")
        .attributes("FifoTopic", "true")
        .attributes("ContentBasedDeduplication", "false")
        .send()
        .await
        .expect("CreateTopic")
        .topic_arn
        .expect("a topic ARN");
    let (url, arn) = fifo_queue(sqs, "bench-latency").await;
    let (dlq_url, _) = fifo_queue(sqs, "bench-latency-dlq").await;
    sns.subscribe()
        .topic_arn(&topic)
        .protocol("sqs")
        .endpoint(&arn)
        .attributes("RawMessageDelivery", "true")
        .send()
        .await
        .expect("Subscribe");

    let parked_store = cqrs_store::Store::new(
        tables.client.clone(),
        cqrs_store::Tables::new(
            &tables.command,
            &tables.data,
            &tables.history,
            &tables.idempotency,
        )
        .with_parked(&tables.parked),
    );
    let sync = DataSync::new(parked_store.clone());
    let publisher = Publisher::new(
        feed(),
        parked_store.clone(),
        SnsTopic::new(sns.clone(), &topic),
        parked_store.clone(),
    );
    let seen: Arc<Mutex<HashMap<Key, Instant>>> = Arc::default();
    let handler_seen = seen.clone();
    let consumer = from_fn("bench-latency", move |d: Delivered| {
        let at = Instant::now();
        let key = (
            d.event.data.pk.clone(),
            d.event.data.sk.clone(),
            d.event.itemversion,
        );
        handler_seen.lock().unwrap().entry(key).or_insert(at);
        async { Ok::<(), ConsumerError>(()) }
    });
    let invoker = InProcess {
        runtime: Runtime::new(
            consumer,
            feed(),
            store.clone(),
            DynamoMarkers::new(tables.client.clone(), &tables.idempotency),
            SqsDeadLetter::new(sqs.clone(), &dlq_url),
        ),
        handled: AtomicUsize::new(0),
        retried: AtomicUsize::new(0),
    };
    let mut mapper = mapper(&url, &arn);
    let streams = cqrs_testkit::streams_client().await;
    let mut command_stream = StreamReader::new(streams.clone(), tables.command_stream_arn().await);
    let mut data_stream = StreamReader::new(streams, tables.data_stream_arn().await);
    let command_arn = tables.command_stream_arn().await;
    let data_arn = tables.data_stream_arn().await;

    let written: Mutex<HashMap<Key, Instant>> = Mutex::default();
    let done = AtomicBool::new(false);
    let started = Instant::now();
    let sync_failures = AtomicUsize::new(0);
    let publish_failures = AtomicUsize::new(0);

    let writer = async {
        for i in 0..commands {
            let code = format!("L{:03}", i % items);
            let v = (i / items) as i64 + 1;
            let item = product("t1", &code, v);
            let tick = Instant::now();
            store
                .put_command(&item, None)
                .await
                .unwrap_or_else(|e| panic!("writing {code}@{v}: {e}"));
            written
                .lock()
                .unwrap()
                .insert((item.pk.clone(), code, v), Instant::now());
            let next = tick + Duration::from_millis(command_ms);
            tokio::time::sleep_until(next.into()).await;
        }
    };
    let syncing = async {
        while !done.load(Ordering::Relaxed) {
            let records = read_new(&mut command_stream).await;
            if records.is_empty() {
                tokio::time::sleep(Duration::from_millis(stream_poll_ms)).await;
                continue;
            }
            for chunk in records.chunks(100) {
                let event = cqrs_testkit::stream_event::lambda_event(chunk, &command_arn)
                    .expect("a stream event");
                let answer = sync.invoke(event).await.expect("data-sync");
                sync_failures.fetch_add(answer.batch_item_failures.len(), Ordering::Relaxed);
            }
        }
    };
    let publishing = async {
        while !done.load(Ordering::Relaxed) {
            let records = read_new(&mut data_stream).await;
            if records.is_empty() {
                tokio::time::sleep(Duration::from_millis(stream_poll_ms)).await;
                continue;
            }
            for chunk in records.chunks(100) {
                let event = cqrs_testkit::stream_event::lambda_event(chunk, &data_arn)
                    .expect("a stream event");
                let answer = publisher.invoke(event).await.expect("the publisher");
                publish_failures.fetch_add(answer.batch_item_failures.len(), Ordering::Relaxed);
            }
        }
    };
    let consuming = async {
        while seen.lock().unwrap().len() < commands && started.elapsed() < CAP {
            let report = mapper.poll(sqs, &invoker).await.expect("the queue answers");
            if report.received == 0 {
                tokio::time::sleep(Duration::from_millis(sqs_poll_ms)).await;
            }
        }
        done.store(true, Ordering::Relaxed);
    };
    tokio::join!(writer, syncing, publishing, consuming);

    let written = written.into_inner().unwrap();
    let seen = seen.lock().unwrap().clone();
    let mut latencies: Vec<f64> = written
        .iter()
        .filter_map(|(key, at)| {
            seen.get(key)
                .map(|s| s.saturating_duration_since(*at).as_secs_f64() * 1000.0)
        })
        .collect();
    latencies.sort_by(f64::total_cmp);
    let p50 = quantile(&latencies, 0.5);
    let p99 = quantile(&latencies, 0.99);
    eprintln!(
        "events bench: command -> consumer over {} of {commands} commands: p50 {p50:.1} ms, p99 \
         {p99:.1} ms (streams polled every {stream_poll_ms} ms when idle, SQS every \
         {sqs_poll_ms} ms)",
        latencies.len()
    );
    json!({
        "commands": commands,
        "items": items,
        "seen": latencies.len(),
        "p50_ms": p50,
        "p90_ms": quantile(&latencies, 0.9),
        "p99_ms": p99,
        "max_ms": latencies.last().copied().unwrap_or(f64::NAN),
        "min_ms": latencies.first().copied().unwrap_or(f64::NAN),
        "command_interval_ms": command_ms,
        "stream_poll_ms": stream_poll_ms,
        "sqs_poll_ms": sqs_poll_ms,
        "sync_failures": sync_failures.load(Ordering::Relaxed),
        "publish_failures": publish_failures.load(Ordering::Relaxed),
        "retried": invoker.retried.load(Ordering::Relaxed),
        "seconds": started.elapsed().as_secs_f64(),
    })
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument other than this bench's name skips it.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    if args.iter().any(|a| !"events".contains(a.as_str())) {
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(async {
        let moto = moto::Throwaway::start("bench-events")
            .expect("moto starts (scripts/tools.sh installs it)");
        let endpoint = moto.instance.endpoint();
        let sqs = moto::sqs_client(&endpoint);
        let tables = cqrs_testkit::fresh_tables().await;
        let store = cqrs_store::Store::new(
            tables.client.clone(),
            cqrs_store::Tables::new(
                &tables.command,
                &tables.data,
                &tables.history,
                &tables.idempotency,
            ),
        );
        let throughput = throughput(&sqs, &tables, &store).await;
        let latency = latency(&endpoint, &sqs, &tables, &store).await;
        println!(
            "BENCH_EVENTS {}",
            json!({ "throughput": throughput, "latency": latency })
        );
        drop(moto);
    });
}
