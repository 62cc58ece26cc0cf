//! The change feed's isolation run (issue 39's "Done when", design39 section 6 item 2): consumer A
//! failing every event for a window leaves consumer B's latency and the publisher's iterator age
//! where a run without the failure has them, while A's dead-letter queue fills and
//! `cqrs_consumer::redrive::redrive` (what `cqrs redrive consumer` runs) empties it.
//!
//! Everything on real parts, in one process on the same servers: DynamoDB Local (tables, streams)
//! and moto's SNS/SQS ([`moto::Throwaway`], stopped on drop, also when an assertion fails).
//!
//! - A steady load: `ISOLATION_RATE` (5) commands a second, round robin over [`ITEMS`] products,
//!   each a `POST /commands` through the real command handler (a `202` is "accepted").
//! - The pipeline runs all the time, each part its own task as each is its own function in AWS:
//!   data-sync on the command table's stream and the publisher ([`Publisher`] with its
//!   [`SnsTopic`] on moto's SNS FIFO topic) on the data table's stream, each stream read as the
//!   stream mapping reads it (polled every [`STREAM_POLL`] when idle, delivered by Lambda's rule);
//!   consumers A and B on their SQS FIFO queues (raw delivery, visibility 1 s, their own
//!   dead-letter queues), read by the local SQS mapping ([`SqsMapper`]) that invokes the consumer
//!   runtime ([`Runtime`]) in process, markers in the idempotency table.
//! - Two phases of `ISOLATION_SECONDS` (120) each, one after the other: the **baseline** (A and B
//!   healthy), then the **failure** (A's handler answers `Retry` for every event from the phase's
//!   first command until B has seen the phase's last one; the runtime parks each event after
//!   [`MAX_RECEIVE`] receives, and the item's later ones behind it). Then A is healthy again, the
//!   redrive moves A's dead-letter queue back into A's queue, and A catches up.
//!
//! Measured per phase: B's latency (the command's `202` to B's handler seeing its event; p50, p99,
//! max) and the publisher's iterator age (when a batch is handed to the publisher, now minus each
//! record's creation, taken from above as the start of the data-sync invocation that wrote its
//! data row; p50, p99, max: DynamoDB Local rounds `ApproximateCreationDateTime` down to the
//! minute, so the record's own time is no use here, and the publisher exposes no finer one).
//! Printed as a table on stdout with the ratios failure / baseline and the verdict line
//! `isolation: B p99 ratio X, iterator age ratio Y (goal <= 1.20)`: figures, never asserted
//! (timing on a shared machine is noise, and the suite asserts no wall-clock limit).
//!
//! The same servers serve both phases, so the run also times, every 200 ms, a call to each server
//! that concerns neither consumer (moto: `GetQueueAttributes` of an idle queue; DynamoDB Local:
//! `GetItem` of a missing key) and the CPU of this process, moto, DynamoDB Local and the rest of
//! the machine. Locally the failure phase is slower for a reason AWS does not have: moto's
//! `SendMessage` to a FIFO queue costs in proportion to the queue's depth (measured on this
//! machine: 8 ms empty, 57 ms at 600, 96 ms at 1200, 140 ms at 1500 messages) and moto answers
//! under one Python interpreter lock, so A parking `rate` events a second into a dead-letter queue
//! that grows to `rate x seconds` messages slows every call to moto: the topic's fan-out to B, B's
//! receives, the probe. The probe line shows it. Hence the default rate of 5 a second: A's
//! dead-letter queue ends at 600 messages, where moto still keeps up (at 10 a second it reaches
//! 1200 and the failure phase's second half measures moto, not the feed).
//!
//! Asserted (counts): B handled every version of the history table exactly once, in version order
//! per item, in both phases; A's dead-letter queue held messages during the failure and none after
//! the redrive; A ends with every version exactly once, in order; the publisher never reported a
//! record or failed an invocation, and parked nothing; data-sync neither.
//!
//! `#[ignore]`d (two phases of two minutes): run it with
//! `eval "$(target/debug/cqrs dynamodb-local start)" && ISOLATION_SECONDS=120 cargo test -p
//! reliability --test isolation -- --ignored --nocapture`.

mod common;
mod feed;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_sdk_dynamodbstreams::types::Record;
use common::{Caller, Req, Stack, T1, scan_items};
use cqrs_caller::CallerMode;
use cqrs_consumer::marker::DynamoMarkers;
use cqrs_consumer::park::SqsDeadLetter;
use cqrs_consumer::{Consumer, ConsumerError, Delivered, Runtime};
use cqrs_data_sync::DataSync;
use cqrs_event_publisher::{Publisher, SnsTopic};
use cqrs_local_stack::mapper::{Invoke, InvokeError, MapperConfig, deliver};
use cqrs_local_stack::moto;
use cqrs_local_stack::sqs_mapper::SqsMapper;
use cqrs_local_stack::stream::StreamReader;
use feed::{Key, RuntimeInProcess, SyncInProcess, Totals, check_order, depth};
use futures::future::{BoxFuture, FutureExt};

/// Products written to, round robin (each gets a new version every `ITEMS / rate` seconds).
const ITEMS: usize = 40;
/// How often an idle stream is read again.
const STREAM_POLL: Duration = Duration::from_millis(50);
/// The attempt on which the runtime parks an event its handler keeps failing (the default).
const MAX_RECEIVE: u32 = cqrs_consumer::runtime::DEFAULT_MAX_RECEIVE;
/// How long a drain may take before the test gives up (a hang is a failure, not a figure).
const DRAIN_CAP: Duration = Duration::from_secs(600);

fn env_number(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(text) => text
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={text:?} is not a whole number")),
        Err(_) => default,
    }
}

/// Linear-interpolation quantile of `values` (sorted here), `q` in [0, 1]; NaN when empty.
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

fn max(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::NAN, f64::max)
}

/// The values of timed samples.
fn values(samples: &[(Instant, f64)]) -> Vec<f64> {
    samples.iter().map(|(_, v)| *v).collect()
}

/// p99 of each quarter of a phase that began at `start` and lasted `seconds` (a late sample
/// counts in the last quarter): how a figure moved during the phase.
fn quarters(samples: &[(Instant, f64)], start: Instant, seconds: u64) -> String {
    let quarter = seconds as f64 / 4.0;
    let mut parts: [Vec<f64>; 4] = Default::default();
    for (at, v) in samples {
        let q = (at.saturating_duration_since(start).as_secs_f64() / quarter) as usize;
        parts[q.min(3)].push(*v);
    }
    parts
        .iter()
        .map(|p| format!("{:.0}", quantile(p, 0.99)))
        .collect::<Vec<_>>()
        .join(" / ")
}

/// CPU time (clock ticks) of the whole machine (busy: all but idle and iowait) and of three
/// processes: this test, moto, DynamoDB Local. Linux only; zeros elsewhere.
#[derive(Debug, Clone, Copy, Default)]
struct Cpu {
    busy: u64,
    ours: u64,
    moto: u64,
    dynamodb: u64,
}

impl Cpu {
    fn process(pid: Option<u32>) -> u64 {
        let path = match pid {
            Some(pid) => format!("/proc/{pid}/stat"),
            None => "/proc/self/stat".to_string(),
        };
        let Ok(text) = std::fs::read_to_string(path) else {
            return 0;
        };
        // After the command's closing parenthesis and the state: ppid (field 4) first, so utime
        // (field 14) and stime (15) are the 11th and 12th.
        let rest = text.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
        let fields: Vec<u64> = rest
            .split_whitespace()
            .skip(1)
            .map(|f| f.parse().unwrap_or(0))
            .collect();
        fields.get(10).copied().unwrap_or(0) + fields.get(11).copied().unwrap_or(0)
    }

    /// DynamoDB Local's Java process on `port` (its command line says `-port <port>`).
    fn dynamodb_pid(port: &str) -> Option<u32> {
        std::fs::read_dir("/proc")
            .ok()?
            .flatten()
            .find_map(|entry| {
                let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
                let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
                let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
                let java = args.iter().any(|a| a.ends_with(b"DynamoDBLocal.jar"));
                let on_port = args
                    .windows(2)
                    .any(|w| w[0] == b"-port" && w[1] == port.as_bytes());
                (java && on_port).then_some(pid)
            })
    }

    fn sample(moto: u32, dynamodb: Option<u32>) -> Cpu {
        let busy = std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|t| {
                let line = t.lines().next()?.to_string();
                let n: Vec<u64> = line
                    .split_whitespace()
                    .skip(1)
                    .map(|f| f.parse().unwrap_or(0))
                    .collect();
                // user nice system idle iowait irq softirq steal
                Some(
                    n.iter().take(8).sum::<u64>() - n.get(3).unwrap_or(&0) - n.get(4).unwrap_or(&0),
                )
            })
            .unwrap_or(0);
        Cpu {
            busy,
            ours: Cpu::process(None),
            moto: Cpu::process(Some(moto)),
            dynamodb: dynamodb.map(|p| Cpu::process(Some(p))).unwrap_or(0),
        }
    }

    /// Cores busy on average between `self` and `later`, `seconds` apart: (this test, moto,
    /// DynamoDB Local, everything else on the machine). 100 ticks a second (Linux's USER_HZ).
    fn cores(self, later: Cpu, seconds: f64) -> [f64; 4] {
        let per = |a: u64, b: u64| b.saturating_sub(a) as f64 / 100.0 / seconds;
        let ours = per(self.ours, later.ours);
        let moto = per(self.moto, later.moto);
        let dynamodb = per(self.dynamodb, later.dynamodb);
        let busy = per(self.busy, later.busy);
        [
            ours,
            moto,
            dynamodb,
            (busy - ours - moto - dynamodb).max(0.0),
        ]
    }
}

// ------------------------------------------------------------------------------------------
// The consumers

/// A consumer that records what it handled (answered `Ok`), in order, and when it first saw each
/// version; answers `Retry` for every event while `failing`.
struct Watch {
    name: String,
    failing: AtomicBool,
    handled: Mutex<Vec<Key>>,
    seen: Mutex<HashMap<Key, Instant>>,
    failed: AtomicUsize,
}

impl Watch {
    fn new(name: &str) -> Arc<Self> {
        Arc::new(Watch {
            name: name.into(),
            failing: AtomicBool::new(false),
            handled: Mutex::new(Vec::new()),
            seen: Mutex::new(HashMap::new()),
            failed: AtomicUsize::new(0),
        })
    }

    fn handled(&self) -> Vec<Key> {
        self.handled.lock().unwrap().clone()
    }

    /// Distinct versions handled.
    fn distinct(&self) -> usize {
        self.handled().into_iter().collect::<HashSet<_>>().len()
    }
}

impl Consumer for Watch {
    fn name(&self) -> &str {
        &self.name
    }

    fn handle<'a>(&'a self, delivered: &'a Delivered) -> BoxFuture<'a, Result<(), ConsumerError>> {
        let at = Instant::now();
        let key: Key = (
            delivered.event.data.pk.clone(),
            delivered.event.data.sk.clone(),
            delivered.event.itemversion,
        );
        let answer = if self.failing.load(Ordering::SeqCst) {
            self.failed.fetch_add(1, Ordering::Relaxed);
            Err(ConsumerError::retry("the search index is away"))
        } else {
            self.seen.lock().unwrap().entry(key.clone()).or_insert(at);
            self.handled.lock().unwrap().push(key);
            Ok(())
        };
        async move { answer }.boxed()
    }
}

// ------------------------------------------------------------------------------------------
// The publisher, measured

/// `(pk, base sk, version)` of a stream record's new image (`None` for a removal).
fn image_key(record: &Record) -> Option<Key> {
    use aws_sdk_dynamodbstreams::types::AttributeValue;
    let image = record.dynamodb()?.new_image()?;
    let text = |name: &str| match image.get(name) {
        Some(AttributeValue::S(s)) => Some(s.clone()),
        _ => None,
    };
    let version = match image.get("version") {
        Some(AttributeValue::N(n)) => n.parse::<i64>().ok()?,
        _ => return None,
    };
    let sk = text("sk")?;
    let base = sk.split('@').next().unwrap_or_default().to_string();
    Some((text("pk")?, base, version))
}

/// data-sync, invoked in process ([`SyncInProcess`]); notes when the invocation that writes each
/// version's data row began: the data table's stream record of that row is created within that
/// invocation, so the age from there is an upper bound of the record's (by at most the
/// invocation's time; the publisher may read the record before the invocation ends).
struct MeasuredSync {
    inner: SyncInProcess,
    written: Arc<Mutex<HashMap<Key, Instant>>>,
}

impl Invoke for MeasuredSync {
    async fn invoke(&self, records: &[Record]) -> Result<Vec<String>, InvokeError> {
        let began = Instant::now();
        {
            let mut written = self.written.lock().unwrap();
            for key in records.iter().filter_map(image_key) {
                // A version delivered again (a retried batch) keeps its first write's time.
                written.entry(key).or_insert(began);
            }
        }
        self.inner.invoke(records).await
    }
}

/// What the publisher did, per phase (0 baseline, 1 failure).
#[derive(Debug, Default)]
struct PublisherFigures {
    /// Per record: milliseconds from the data row's write (the start of the data-sync invocation
    /// that wrote it: its stream record was created after) to its batch being handed to the
    /// publisher: the iterator age of that record, from above (Lambda reports the batch's last
    /// record's).
    ages_ms: [Vec<(Instant, f64)>; 2],
    /// Records whose write time is unknown (none expected).
    unknown: usize,
    /// Per invocation: how long the publisher took (SNS FIFO's fan-out to both queues included:
    /// moto delivers to the subscribed queues within `PublishBatch`).
    batch_ms: [Vec<(Instant, f64)>; 2],
    invocations: [usize; 2],
    records: [usize; 2],
    events: [usize; 2],
    /// Records the publisher reported (to be delivered again), entries it parked.
    reported: [usize; 2],
    parked: [usize; 2],
    /// `ApproximateCreationDateTime`s seen, and how many of them fall on a whole minute
    /// (DynamoDB Local rounds them down to the minute: no use for an age of milliseconds).
    created: usize,
    whole_minutes: usize,
}

/// The publisher invoked in process with the Lambda event of the data table's records.
struct MeasuredPublisher {
    publisher: Publisher,
    arn: String,
    phase: Arc<AtomicUsize>,
    written: Arc<Mutex<HashMap<Key, Instant>>>,
    figures: Arc<Mutex<PublisherFigures>>,
}

impl Invoke for MeasuredPublisher {
    async fn invoke(&self, records: &[Record]) -> Result<Vec<String>, InvokeError> {
        let phase = self.phase.load(Ordering::SeqCst).min(1);
        let now = Instant::now();
        let ages: Vec<Option<f64>> = {
            let written = self.written.lock().unwrap();
            records
                .iter()
                .map(|r| {
                    let at = written.get(&image_key(r)?)?;
                    Some(now.saturating_duration_since(*at).as_secs_f64() * 1000.0)
                })
                .collect()
        };
        let created: Vec<i64> = records
            .iter()
            .filter_map(|r| r.dynamodb()?.approximate_creation_date_time())
            .map(|t| t.secs())
            .collect();
        let event = cqrs_testkit::stream_event::lambda_event(records, &self.arn)
            .map_err(|e| InvokeError(format!("building the event: {e}")))?;
        let (response, counts) = self.publisher.handle_counted(event).await;
        {
            let mut f = self.figures.lock().unwrap();
            f.created += created.len();
            f.whole_minutes += created.iter().filter(|s| *s % 60 == 0).count();
            f.unknown += ages.iter().filter(|a| a.is_none()).count();
            f.ages_ms[phase].extend(ages.into_iter().flatten().map(|a| (now, a)));
            f.batch_ms[phase].push((now, counts.duration.as_secs_f64() * 1000.0));
            f.invocations[phase] += 1;
            f.records[phase] += counts.records;
            f.events[phase] += counts.events;
            f.reported[phase] += counts.retried;
            f.parked[phase] += counts.parked;
        }
        Ok(response
            .batch_item_failures
            .into_iter()
            .map(|f| f.item_identifier.unwrap_or_default())
            .collect())
    }
}

// ------------------------------------------------------------------------------------------
// The pipeline's tasks

/// Reads every shard of `reader` once; the records, in shard order.
async fn read_new(reader: &mut StreamReader) -> Vec<Record> {
    reader.refresh_shards().await.expect("DescribeStream");
    let mut out = Vec::new();
    for shard in reader.readable_shards(&HashSet::new()) {
        out.extend(reader.read(&shard, 1000).await.expect("GetRecords"));
    }
    out
}

/// A stream's mapping until `stop`: what it read goes to `invoker` by Lambda's rule. Answers
/// (invocations, failed invocations, records dead-lettered).
async fn follow<I: Invoke>(
    mut reader: StreamReader,
    invoker: I,
    config: MapperConfig,
    stop: Arc<AtomicBool>,
) -> (usize, usize, usize) {
    let mut totals = (0, 0, 0);
    while !stop.load(Ordering::SeqCst) {
        let records = read_new(&mut reader).await;
        if records.is_empty() {
            tokio::time::sleep(STREAM_POLL).await;
            continue;
        }
        let report = deliver(&invoker, "shard-0", &records, &config).await;
        totals.0 += report.invocations;
        totals.1 += report.failed_invocations;
        totals.2 += report.dead_lettered;
    }
    totals
}

/// A consumer's SQS mapping until `stop`; answers its polls.
async fn consume(
    mut mapper: SqsMapper,
    sqs: aws_sdk_sqs::Client,
    invoker: Arc<RuntimeInProcess>,
    stop: Arc<AtomicBool>,
) -> usize {
    let mut polls = 0;
    while !stop.load(Ordering::SeqCst) {
        feed::poll(&mut mapper, &sqs, &invoker).await;
        polls += 1;
    }
    polls
}

/// Waits (checking every 100 ms) until `done()`; panics after [`DRAIN_CAP`].
async fn until(what: &str, done: impl Fn() -> bool) -> Duration {
    let started = Instant::now();
    while !done() {
        assert!(
            started.elapsed() < DRAIN_CAP,
            "{what}: not done after {DRAIN_CAP:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    started.elapsed()
}

/// The load of one phase: `rate` commands a second for `seconds`, round robin over the items,
/// each building on the item's current version (`versions`). Answers when each was accepted.
async fn load(
    stack: &Stack,
    versions: &mut [i64],
    rate: u64,
    seconds: u64,
    cpu: &dyn Fn() -> Cpu,
) -> (BTreeMap<Key, Instant>, Vec<(Instant, Cpu)>) {
    let mut accepted = BTreeMap::new();
    let mut samples = Vec::new();
    let commands = rate * seconds;
    let started = tokio::time::Instant::now();
    for i in 0..commands {
        let due = started + Duration::from_secs_f64(i as f64 / rate as f64);
        tokio::time::sleep_until(due).await;
        if i % (commands / 4).max(1) == 0 {
            samples.push((Instant::now(), cpu()));
        }
        let n = i as usize % ITEMS;
        let code = format!("I{n:03}");
        let body = serde_json::json!({
            "pk": "PRODUCT#t1",
            "sk": code,
            "version": versions[n],
            "name": format!("product {n}"),
            "attributes": {"productId": code, "priceCents": 100 + i},
        });
        let answer = stack
            .send(Req::command("POST", &body.to_string()).claims_of(T1))
            .await;
        assert_eq!(answer.status, 202, "command {i} ({code}): {}", answer.text);
        versions[n] += 1;
        accepted.insert(
            ("PRODUCT#t1".to_string(), code, versions[n]),
            Instant::now(),
        );
    }
    samples.push((Instant::now(), cpu()));
    (accepted, samples)
}

/// Until `stop`: every 200 ms while `probing` names a phase (1 or 2), times one call to moto that
/// has nothing to do with A or B (`GetQueueAttributes` of an idle queue) and one to DynamoDB
/// Local (`GetItem` of a missing key): whether a server, or the whole machine, was slow.
async fn probe(
    sqs: aws_sdk_sqs::Client,
    queue_url: String,
    dynamodb: aws_sdk_dynamodb::Client,
    table: String,
    probing: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
) -> [[Vec<(Instant, f64)>; 2]; 2] {
    let mut out: [[Vec<(Instant, f64)>; 2]; 2] = Default::default();
    while !stop.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let phase = probing.load(Ordering::SeqCst);
        if phase == 0 {
            continue;
        }
        let at = Instant::now();
        sqs.get_queue_attributes()
            .queue_url(&queue_url)
            .attribute_names(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessages)
            .send()
            .await
            .expect("moto answers");
        out[0][phase - 1].push((at, at.elapsed().as_secs_f64() * 1000.0));
        let at = Instant::now();
        dynamodb
            .get_item()
            .table_name(&table)
            .key(
                "pk",
                aws_sdk_dynamodb::types::AttributeValue::S("PROBE".into()),
            )
            .key(
                "sk",
                aws_sdk_dynamodb::types::AttributeValue::S("PROBE".into()),
            )
            .send()
            .await
            .expect("DynamoDB Local answers");
        out[1][phase - 1].push((at, at.elapsed().as_secs_f64() * 1000.0));
    }
    out
}

/// B's latencies (ms) for the commands of `accepted`, with when each was accepted: each must have
/// been seen.
fn latencies(b: &Watch, accepted: &BTreeMap<Key, Instant>) -> Vec<(Instant, f64)> {
    let seen = b.seen.lock().unwrap();
    accepted
        .iter()
        .map(|(key, at)| {
            let seen_at = seen
                .get(key)
                .unwrap_or_else(|| panic!("B never saw {key:?}"));
            (
                *at,
                seen_at.saturating_duration_since(*at).as_secs_f64() * 1000.0,
            )
        })
        .collect()
}

// ------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "two phases of ISOLATION_SECONDS (120 s) each: run with --ignored"]
async fn a_failing_consumer_leaves_the_other_consumer_and_the_publisher_alone_and_its_dead_letters_are_redriven()
 {
    let seconds = env_number("ISOLATION_SECONDS", 120).max(1);
    let rate = env_number("ISOLATION_RATE", 5).max(1);
    let started = Instant::now();
    let moto = moto::Throwaway::start("isolation").expect("moto starts");
    let endpoint = moto.instance.endpoint();
    let stack = Stack::new(CallerMode::Jwt).await;
    let tables = &stack.tables;
    let store = common::store(tables);
    let sqs = moto::sqs_client(&endpoint);
    let sns = moto::sns_client(&endpoint);

    // The topic, A's and B's queues and dead-letter queues.
    let (topic, (a_url, a_arn, a_dlq), (b_url, b_arn, b_dlq)) =
        feed::topic_with_consumers_a_and_b(&sqs, &sns).await;

    let feed = || cqrs_events::Feed::new(cqrs_model::Model::example(), "urn:cqrs:shop");
    let parked_store = feed::parked_store(tables);
    let a = Watch::new("a");
    let b = Watch::new("b");
    let runtime = |consumer: Arc<Watch>, dlq: &str| {
        Arc::new(RuntimeInProcess {
            runtime: Runtime::new(
                consumer,
                feed(),
                store.clone(),
                DynamoMarkers::new(tables.client.clone(), &tables.idempotency),
                SqsDeadLetter::new(sqs.clone(), dlq),
            )
            .with_max_receive(MAX_RECEIVE),
            totals: Mutex::new(Totals::default()),
            crash_next: AtomicUsize::new(0),
            crashed: AtomicUsize::new(0),
        })
    };
    let a_runtime = runtime(a.clone(), &a_dlq);
    let b_runtime = runtime(b.clone(), &b_dlq);

    // The pipeline, each part its own task until `stop`.
    let stop = Arc::new(AtomicBool::new(false));
    let phase = Arc::new(AtomicUsize::new(0));
    let publisher_figures = Arc::new(Mutex::new(PublisherFigures::default()));
    let written: Arc<Mutex<HashMap<Key, Instant>>> = Arc::default();
    let failures = std::env::temp_dir().join(format!(
        "reliability-isolation-failures-{}.jsonl",
        std::process::id()
    ));
    let mapper_config = MapperConfig {
        retry_backoff: Duration::from_millis(50),
        max_retries: 20,
        failure_file: failures.clone(),
        ..Default::default()
    };
    let streams = cqrs_testkit::streams_client().await;
    let syncing = tokio::spawn(follow(
        StreamReader::new(streams.clone(), tables.command_stream_arn().await),
        MeasuredSync {
            inner: SyncInProcess {
                sync: DataSync::new(store.clone()),
                arn: tables.command_stream_arn().await,
            },
            written: written.clone(),
        },
        mapper_config.clone(),
        stop.clone(),
    ));
    let publishing = tokio::spawn(follow(
        StreamReader::new(streams, tables.data_stream_arn().await),
        MeasuredPublisher {
            publisher: Publisher::new(
                feed(),
                parked_store.clone(),
                SnsTopic::new(sns.clone(), &topic),
                parked_store.clone(),
            ),
            arn: tables.data_stream_arn().await,
            phase: phase.clone(),
            written: written.clone(),
            figures: publisher_figures.clone(),
        },
        mapper_config.clone(),
        stop.clone(),
    ));
    let consuming_a = tokio::spawn(consume(
        feed::mapper(&a_url, &a_arn),
        sqs.clone(),
        a_runtime.clone(),
        stop.clone(),
    ));
    let consuming_b = tokio::spawn(consume(
        feed::mapper(&b_url, &b_arn),
        sqs.clone(),
        b_runtime.clone(),
        stop.clone(),
    ));
    let probing = Arc::new(AtomicUsize::new(0));
    let (probe_url, _) = feed::fifo_queue(&sqs, "probe", &[]).await;
    let probing_task = tokio::spawn(probe(
        sqs.clone(),
        probe_url,
        tables.client.clone(),
        tables.data.clone(),
        probing.clone(),
        stop.clone(),
    ));
    let set_up = started.elapsed();

    // 1. The baseline: A and B healthy.
    let mut versions = vec![0i64; ITEMS];
    let dynamodb_pid = std::env::var("DDB_LOCAL_PORT")
        .ok()
        .and_then(|port| Cpu::dynamodb_pid(&port));
    let moto_pid = moto.instance.pid;
    let cpu = || Cpu::sample(moto_pid, dynamodb_pid);
    let start_0 = Instant::now();
    probing.store(1, Ordering::SeqCst);
    let (baseline, cpu_0) = load(&stack, &mut versions, rate, seconds, &cpu).await;
    probing.store(0, Ordering::SeqCst);
    let written_0 = baseline.len();
    let baseline_tail = until("the baseline's drain", || {
        b.distinct() >= written_0 && a.distinct() >= written_0
    })
    .await;
    let a_handled_baseline = a.distinct();
    let a_dlq_baseline = depth(&sqs, &a_dlq).await;

    // 2. The failure: A fails every event from the phase's first command until B saw its last.
    phase.store(1, Ordering::SeqCst);
    let a_failed_before = a.failed.load(Ordering::Relaxed);
    a.failing.store(true, Ordering::SeqCst);
    let start_1 = Instant::now();
    probing.store(2, Ordering::SeqCst);
    let (failure, cpu_1) = load(&stack, &mut versions, rate, seconds, &cpu).await;
    probing.store(0, Ordering::SeqCst);
    let total = written_0 + failure.len();
    let failure_tail = until("B, the failure phase", || b.distinct() >= total).await;
    let a_dlq_in_window = depth(&sqs, &a_dlq).await;
    let a_handled_in_window = a.distinct() - a_handled_baseline;
    let a_parked_in_window = a_runtime.totals.lock().unwrap().parked;
    a.failing.store(false, Ordering::SeqCst);
    let a_failed_in_window = a.failed.load(Ordering::Relaxed) - a_failed_before;
    assert!(
        a_dlq_in_window > 0,
        "A's dead-letter queue holds A's parked events during its failure (parked {a_parked_in_window})"
    );
    assert_eq!(a_handled_in_window, 0, "A handled nothing while failing");

    // 3. A is healthy again: what is left in its queue goes behind what was parked (held), until
    //    its queue is empty; then its dead-letter queue holds every version of the window.
    let recovered = Instant::now();
    let sqs_ref = &sqs;
    let a_url_ref = &a_url;
    let mut empty_in_a_row = 0;
    while empty_in_a_row < 3 {
        assert!(
            recovered.elapsed() < DRAIN_CAP,
            "A's queue never emptied after its window"
        );
        if depth(sqs_ref, a_url_ref).await == 0 {
            empty_in_a_row += 1;
        } else {
            empty_in_a_row = 0;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let a_dlq_before_redrive = depth(&sqs, &a_dlq).await;
    let a_handled_before_redrive = a.distinct();

    // 4. The redrive: A's dead-letter queue back into A's queue (A keeps running, as it does when
    //    an operator runs `cqrs redrive consumer`), then A catches up.
    let redrive_started = Instant::now();
    let report = cqrs_consumer::redrive::redrive(
        &sqs,
        &a_dlq,
        &a_url,
        &cqrs_consumer::redrive::RedriveOptions::default(),
    )
    .await
    .expect("redrive");
    let redrive_time = redrive_started.elapsed();
    until("A after the redrive", || a.distinct() >= total).await;
    let redrive_to_done = redrive_started.elapsed();
    let a_dlq_after = depth(&sqs, &a_dlq).await;

    // The pipeline stops; every task's figures.
    stop.store(true, Ordering::SeqCst);
    let (sync_invocations, sync_failed, sync_dead) = syncing.await.expect("data-sync's task");
    let (pub_invocations, pub_failed, pub_dead) = publishing.await.expect("the publisher's task");
    let a_polls = consuming_a.await.expect("A's task");
    let b_polls = consuming_b.await.expect("B's task");
    let probes = probing_task.await.expect("the probe's task");
    let _ = std::fs::remove_file(&failures);

    // Every version of the history table: B and A each exactly once, in order per item.
    let history = scan_items(tables, &tables.history).await;
    assert_eq!(history.len(), total, "every command's version in history");
    let mut expected: BTreeMap<(String, String), i64> = BTreeMap::new();
    for item in &history {
        let n = expected
            .entry((item.pk.clone(), item.base_sk().to_string()))
            .or_default();
        *n = (*n).max(item.version);
    }
    check_order("B", &b.handled(), &expected);
    check_order("A", &a.handled(), &expected);
    let b_timed = [latencies(&b, &baseline), latencies(&b, &failure)];
    let b_latency = [values(&b_timed[0]), values(&b_timed[1])];
    assert_eq!(
        a_dlq_after, 0,
        "A's dead-letter queue is empty after the redrive"
    );
    assert_eq!(report.left, 0, "the redrive left nothing");
    assert_eq!(depth(&sqs, &a_url).await, 0, "A's queue is empty");
    assert_eq!(depth(&sqs, &b_dlq).await, 0, "nothing of B parked");
    assert_eq!(depth(&sqs, &b_url).await, 0, "B's queue is empty");

    // The publisher never failed because of A (nor at all), and parked nothing.
    let pf = std::mem::take(&mut *publisher_figures.lock().unwrap());
    assert_eq!(
        (pub_failed, pub_dead, pf.reported, pf.parked),
        (0, 0, [0, 0], [0, 0]),
        "the publisher: failed invocations, dead-lettered records, reported records per phase, \
         parked entries per phase"
    );
    assert_eq!(pf.unknown, 0, "every data record's write time known");
    assert_eq!(
        common::scan_raw(tables, &tables.parked).await.len(),
        0,
        "nothing parked by data-sync or the publisher"
    );
    assert_eq!((sync_failed, sync_dead), (0, 0), "data-sync never failed");

    // The figures.
    let (at, bt) = (
        a_runtime.totals.lock().unwrap(),
        b_runtime.totals.lock().unwrap(),
    );
    let ages = [values(&pf.ages_ms[0]), values(&pf.ages_ms[1])];
    let invocations = [values(&pf.batch_ms[0]), values(&pf.batch_ms[1])];
    let b_p99 = [quantile(&b_latency[0], 0.99), quantile(&b_latency[1], 0.99)];
    let age_p99 = [quantile(&ages[0], 0.99), quantile(&ages[1], 0.99)];
    let row = |name: &str, values: [f64; 2], ratio: bool| {
        let r = if ratio {
            format!("{:>9.2}", values[1] / values[0])
        } else {
            String::new()
        };
        println!("  {name:<56} {:>10.1} {:>10.1} {r}", values[0], values[1]);
    };
    let count = |name: &str, values: [usize; 2]| {
        println!("  {name:<56} {:>10} {:>10}", values[0], values[1]);
    };
    println!();
    println!(
        "isolation run: {seconds} s a phase, {rate} commands/s over {ITEMS} products (POST /commands \
         through the command handler), A parks after {MAX_RECEIVE} receives (visibility 1 s)"
    );
    println!(
        "  {:<56} {:>10} {:>10} {:>9}",
        "", "baseline", "A failing", "ratio"
    );
    count("commands accepted", [baseline.len(), failure.len()]);
    row(
        "B latency p50 (ms, 202 -> B's handler)",
        [quantile(&b_latency[0], 0.5), quantile(&b_latency[1], 0.5)],
        true,
    );
    row("B latency p99 (ms)", b_p99, true);
    row(
        "B latency max (ms)",
        [max(&b_latency[0]), max(&b_latency[1])],
        true,
    );
    row(
        "publisher iterator age p50 (ms, data write -> publisher)",
        [quantile(&ages[0], 0.5), quantile(&ages[1], 0.5)],
        true,
    );
    row("publisher iterator age p99 (ms)", age_p99, true);
    row(
        "publisher iterator age max (ms)",
        [max(&ages[0]), max(&ages[1])],
        true,
    );
    row(
        "publisher invocation p50 (ms)",
        [
            quantile(&invocations[0], 0.5),
            quantile(&invocations[1], 0.5),
        ],
        true,
    );
    row(
        "publisher invocation p99 (ms)",
        [
            quantile(&invocations[0], 0.99),
            quantile(&invocations[1], 0.99),
        ],
        true,
    );
    count("publisher invocations", pf.invocations);
    count("publisher records (data table's stream)", pf.records);
    count("publisher events published", pf.events);
    count(
        "publisher records reported / entries parked",
        [pf.reported[0] + pf.parked[0], pf.reported[1] + pf.parked[1]],
    );
    count(
        "A: versions handled in the phase",
        [a_handled_baseline, a_handled_in_window],
    );
    count(
        "A: events its handler failed",
        [a_failed_before, a_failed_in_window],
    );
    count(
        "A: dead-letter queue depth at the phase's end",
        [a_dlq_baseline, a_dlq_in_window],
    );
    println!(
        "  A after its window: {} more parked as its queue emptied (dead-letter queue {a_dlq_before_redrive}, \
         {} versions handled meanwhile); redrive moved {} ({:?}) in {redrive_time:.1?}, A had every \
         version {redrive_to_done:.1?} after the redrive began; dead-letter queue after: {a_dlq_after}",
        at.parked - a_parked_in_window,
        a_handled_before_redrive - a_handled_baseline,
        report.moved,
        report.by_reason,
    );
    println!(
        "  A: {} invocations, {} messages, {} handled, {} duplicates, {} parked, {} retried, {a_polls} polls; \
         B: {} invocations, {} messages, {} handled, {} duplicates, {} parked, {} retried, {b_polls} polls",
        at.invocations,
        at.messages,
        a.handled().len(),
        at.duplicates,
        at.parked,
        at.retried,
        bt.invocations,
        bt.messages,
        b.handled().len(),
        bt.duplicates,
        bt.parked,
        bt.retried,
    );
    println!(
        "  data-sync: {sync_invocations} invocations, 0 failed; publisher: {pub_invocations} \
         invocations, 0 failed; DynamoDB Local's ApproximateCreationDateTime: {} of {} on a \
         whole minute (rounded down to the minute there: the ages above are from data-sync's \
         writes instead); drain after the load: baseline {baseline_tail:.1?}, failure (B) {failure_tail:.1?}; \
         set up {set_up:.1?}, total {:.1?}",
        pf.whole_minutes,
        pf.created,
        started.elapsed()
    );
    println!(
        "  p99 by quarter of the phase (ms), baseline | A failing: B latency {} | {}; iterator age \
         {} | {}; publisher invocation {} | {}",
        quarters(&b_timed[0], start_0, seconds),
        quarters(&b_timed[1], start_1, seconds),
        quarters(&pf.ages_ms[0], start_0, seconds),
        quarters(&pf.ages_ms[1], start_1, seconds),
        quarters(&pf.batch_ms[0], start_0, seconds),
        quarters(&pf.batch_ms[1], start_1, seconds),
    );
    let cores = |samples: &[(Instant, Cpu)]| {
        let c = samples[0].1.cores(
            samples[samples.len() - 1].1,
            samples[samples.len() - 1]
                .0
                .duration_since(samples[0].0)
                .as_secs_f64(),
        );
        let by_quarter: Vec<String> = samples
            .windows(2)
            .map(|w| {
                let q = w[0]
                    .1
                    .cores(w[1].1, w[1].0.duration_since(w[0].0).as_secs_f64());
                format!("{:.2}/{:.2}", q[1], q[3])
            })
            .collect();
        format!(
            "this test {:.2}, moto {:.2}, DynamoDB Local {:.2}, everything else {:.2} (moto/else \
             by quarter {})",
            c[0],
            c[1],
            c[2],
            c[3],
            by_quarter.join(" ")
        )
    };
    println!(
        "  cores busy during the load (of {}): baseline: {}; A failing: {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        cores(&cpu_0),
        cores(&cpu_1)
    );
    println!(
        "  probes (ms; p50, then p99 by quarter), baseline | A failing: moto GetQueueAttributes of \
         an idle queue {:.1}, {} | {:.1}, {}; DynamoDB Local GetItem {:.1}, {} | {:.1}, {}",
        quantile(&values(&probes[0][0]), 0.5),
        quarters(&probes[0][0], start_0, seconds),
        quantile(&values(&probes[0][1]), 0.5),
        quarters(&probes[0][1], start_1, seconds),
        quantile(&values(&probes[1][0]), 0.5),
        quarters(&probes[1][0], start_0, seconds),
        quantile(&values(&probes[1][1]), 0.5),
        quarters(&probes[1][1], start_1, seconds),
    );
    println!(
        "isolation: B p99 ratio {:.2}, iterator age ratio {:.2} (goal <= 1.20)",
        b_p99[1] / b_p99[0],
        age_p99[1] / age_p99[0]
    );
    let probe_p99 = |server: usize| {
        quantile(&values(&probes[server][1]), 0.99) / quantile(&values(&probes[server][0]), 0.99)
    };
    println!(
        "isolation: the servers themselves, p99 ratio of a call unrelated to A: moto {:.2}, \
         DynamoDB Local {:.2} (moto's SendMessage to a FIFO queue costs in proportion to the \
         queue's depth, and moto serves one request at a time under Python's GIL: A parking into \
         its deepening dead-letter queue slows every call to moto; AWS has no such coupling)",
        probe_p99(0),
        probe_p99(1)
    );
    drop(moto);
}
