//! The change feed's isolation run (issue 39's "Done when", design39 section 6 item 2): consumer A
//! failing every event for a window leaves consumer B's latency and the publisher's iterator age
//! where a run without the failure has them, while A's dead-letter queue fills and
//! `cqrs_consumer::redrive::redrive` (what `cqrs redrive consumer` runs) empties it.
//!
//! Everything on real parts, in one process: DynamoDB Local (tables, streams) and moto's SNS/SQS
//! ([`moto::Throwaway`], stopped on drop, also when an assertion fails).
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
//! - Two phases of `ISOLATION_SECONDS` (120) each, side by side at the same time, each on a stack
//!   of its own (its own tables in the one DynamoDB Local, its own moto server with its own topic,
//!   queues and dead-letter queues, its own pipeline tasks and consumers A and B): the **baseline**
//!   (A and B healthy) and the **failure** (A's handler answers `Retry` for every event from the
//!   phase's first command until B has seen the phase's last one; the runtime parks each event
//!   after [`MAX_RECEIVE`] receives, and the item's later ones behind it). Then the failing
//!   stack's A is healthy again, the redrive moves its dead-letter queue back into its queue, and
//!   A catches up. Side by side, both phases meet the same machine at the same moment (a build or
//!   another test slowing the machine slows both), and the run takes one phase's time, not two.
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
//! The run also times, every 200 ms in each phase, a call to each server of its stack that
//! concerns neither consumer (moto: `GetQueueAttributes` of an idle queue; DynamoDB Local:
//! `GetItem` of a missing key), and samples the CPU of this process, each stack's moto, DynamoDB
//! Local (both phases' tables) and the rest of the machine. Locally the failure phase is slower
//! for a reason AWS does not have: moto's
//! `SendMessage` to a FIFO queue costs in proportion to the queue's depth (measured on this
//! machine: 8 ms empty, 57 ms at 600, 96 ms at 1200, 140 ms at 1500 messages) and moto answers
//! under one Python interpreter lock, so A parking `rate` events a second into a dead-letter queue
//! that grows to `rate x seconds` messages slows every call to moto: the topic's fan-out to B, B's
//! receives, the probe. The probe line shows it. Hence the default rate of 5 a second: A's
//! dead-letter queue ends at 600 messages, where moto still keeps up (at 10 a second it reaches
//! 1200 and the failure phase's second half measures moto, not the feed).
//!
//! Asserted (counts), on each stack: B handled every version of its history table exactly once,
//! in version order per item; A ends with every version exactly once, in order; A's and B's
//! queues and B's dead-letter queue end empty; the publisher never reported a record or failed an
//! invocation, and parked nothing; data-sync neither. On the failing stack: A handled nothing and
//! its dead-letter queue held messages during the failure, and none after the redrive; on the
//! baseline's, A handled every version in the phase and its dead-letter queue stayed empty.
//!
//! `#[ignore]`d (two phases of two minutes, side by side): run it with
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

/// CPU time (clock ticks) of the whole machine (busy: all but idle and iowait) and of four
/// processes: this test (both phases), each phase's moto, DynamoDB Local (both phases' tables).
/// Linux only; zeros elsewhere.
#[derive(Debug, Clone, Copy, Default)]
struct Cpu {
    busy: u64,
    ours: u64,
    moto: [u64; 2],
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

    fn sample(moto: [u32; 2], dynamodb: Option<u32>) -> Cpu {
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
            moto: moto.map(|pid| Cpu::process(Some(pid))),
            dynamodb: dynamodb.map(|p| Cpu::process(Some(p))).unwrap_or(0),
        }
    }

    /// Cores busy on average between `self` and `later`, `seconds` apart: (this test, the
    /// baseline's moto, the failing phase's moto, DynamoDB Local, everything else on the
    /// machine). 100 ticks a second (Linux's USER_HZ).
    fn cores(self, later: Cpu, seconds: f64) -> [f64; 5] {
        let per = |a: u64, b: u64| b.saturating_sub(a) as f64 / 100.0 / seconds;
        let ours = per(self.ours, later.ours);
        let moto = [
            per(self.moto[0], later.moto[0]),
            per(self.moto[1], later.moto[1]),
        ];
        let dynamodb = per(self.dynamodb, later.dynamodb);
        let busy = per(self.busy, later.busy);
        [
            ours,
            moto[0],
            moto[1],
            dynamodb,
            (busy - ours - moto[0] - moto[1] - dynamodb).max(0.0),
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

/// What the publishers did, per phase (0 baseline, 1 failure): each stack's publisher writes its
/// own phase's figures.
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
    phase: usize,
    written: Arc<Mutex<HashMap<Key, Instant>>>,
    figures: Arc<Mutex<PublisherFigures>>,
}

impl Invoke for MeasuredPublisher {
    async fn invoke(&self, records: &[Record]) -> Result<Vec<String>, InvokeError> {
        let phase = self.phase.min(1);
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
    cpu: &(dyn Fn() -> Cpu + Sync),
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
) -> Probes {
    let mut out: Probes = Default::default();
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

// The two stacks

/// One phase's stack of its own: a moto server (topic, A's and B's queues and dead-letter
/// queues), fresh tables in DynamoDB Local, and the pipeline's tasks until `stop`: data-sync and
/// the publisher on their tables' streams, consumers A and B on their queues, the probe.
struct Pipeline {
    /// 0 the baseline, 1 the failure.
    phase: usize,
    moto: moto::Throwaway,
    stack: Stack,
    sqs: aws_sdk_sqs::Client,
    a_url: String,
    a_dlq: String,
    b_url: String,
    b_dlq: String,
    a: Arc<Watch>,
    b: Arc<Watch>,
    a_runtime: Arc<RuntimeInProcess>,
    b_runtime: Arc<RuntimeInProcess>,
    stop: Arc<AtomicBool>,
    probing: Arc<AtomicUsize>,
    failures: std::path::PathBuf,
    syncing: tokio::task::JoinHandle<(usize, usize, usize)>,
    publishing: tokio::task::JoinHandle<(usize, usize, usize)>,
    consuming_a: tokio::task::JoinHandle<usize>,
    consuming_b: tokio::task::JoinHandle<usize>,
    probing_task: tokio::task::JoinHandle<Probes>,
}

/// The probe's timed calls, `[server][phase]` (server 0 moto, 1 DynamoDB Local).
type Probes = [[Vec<(Instant, f64)>; 2]; 2];

const PHASES: [&str; 2] = ["baseline", "A failing"];

impl Pipeline {
    async fn start(phase: usize, publisher_figures: Arc<Mutex<PublisherFigures>>) -> Pipeline {
        let name = ["isolation-baseline", "isolation-failing"][phase];
        let moto = moto::Throwaway::start(name).expect("moto starts");
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
        let written: Arc<Mutex<HashMap<Key, Instant>>> = Arc::default();
        let failures = std::env::temp_dir().join(format!(
            "reliability-{name}-failures-{}.jsonl",
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
                phase,
                written: written.clone(),
                figures: publisher_figures,
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
        Pipeline {
            phase,
            moto,
            stack,
            sqs,
            a_url,
            a_dlq,
            b_url,
            b_dlq,
            a,
            b,
            a_runtime,
            b_runtime,
            stop,
            probing,
            failures,
            syncing,
            publishing,
            consuming_a,
            consuming_b,
            probing_task,
        }
    }
}

/// What A's recovery did on a stack: the rest of its queue drained, its dead-letter queue
/// redriven, A caught up.
struct Recovery {
    more_parked: usize,
    dlq_before_redrive: usize,
    handled_meanwhile: usize,
    moved: usize,
    by_reason: String,
    redrive_time: Duration,
    redrive_to_done: Duration,
    dlq_after: usize,
}

/// What one phase leaves for the table.
struct Outcome {
    start: Instant,
    accepted: BTreeMap<Key, Instant>,
    cpu: Vec<(Instant, Cpu)>,
    /// How long B (and, in the baseline, A) took to drain after the load.
    tail: Duration,
    /// A in the phase (until the drain): versions handled, events failed, dead-letter depth.
    a_handled: usize,
    a_failed: usize,
    a_dlq: usize,
    recovery: Recovery,
    b_timed: Vec<(Instant, f64)>,
    a_totals: Totals,
    b_totals: Totals,
    a_handled_all: usize,
    b_handled_all: usize,
    polls: [usize; 2],
    sync_invocations: usize,
    pub_invocations: usize,
    /// moto's and DynamoDB Local's probe, each timed call with when it was made.
    probes: [Vec<(Instant, f64)>; 2],
}

/// One phase on its stack: the load (A failing from its first command in the failure phase, until
/// B has seen its last), the drain, A's recovery and the redrive, then every count asserted.
async fn run(
    p: Pipeline,
    rate: u64,
    seconds: u64,
    motos: [u32; 2],
    dynamodb_pid: Option<u32>,
) -> Outcome {
    let label = PHASES[p.phase];
    let failing = p.phase == 1;
    let (a, b, sqs) = (&p.a, &p.b, &p.sqs);
    let mut versions = vec![0i64; ITEMS];
    let cpu = move || Cpu::sample(motos, dynamodb_pid);
    if failing {
        a.failing.store(true, Ordering::SeqCst);
    }
    let start = Instant::now();
    p.probing.store(p.phase + 1, Ordering::SeqCst);
    let (accepted, cpu_samples) = load(&p.stack, &mut versions, rate, seconds, &cpu).await;
    p.probing.store(0, Ordering::SeqCst);
    let total = accepted.len();
    let (tail, a_handled, a_dlq, a_parked_in_window);
    if failing {
        tail = until("B, the failure phase", || b.distinct() >= total).await;
        a_dlq = depth(sqs, &p.a_dlq).await;
        a_handled = a.distinct();
        a_parked_in_window = p.a_runtime.totals.lock().unwrap().parked;
        a.failing.store(false, Ordering::SeqCst);
        assert!(
            a_dlq > 0,
            "A's dead-letter queue holds A's parked events during its failure (parked {a_parked_in_window})"
        );
        assert_eq!(a_handled, 0, "A handled nothing while failing");
    } else {
        tail = until("the baseline's drain", || {
            b.distinct() >= total && a.distinct() >= total
        })
        .await;
        a_handled = a.distinct();
        a_dlq = depth(sqs, &p.a_dlq).await;
        a_parked_in_window = p.a_runtime.totals.lock().unwrap().parked;
    }
    let a_failed = a.failed.load(Ordering::Relaxed);

    // A is healthy (again): what is left in its queue goes behind what was parked (held), until
    // its queue is empty; then its dead-letter queue holds every version of the window (none on
    // the baseline's stack, whose redrive then moves nothing).
    let recovered = Instant::now();
    let mut empty_in_a_row = 0;
    while empty_in_a_row < 3 {
        assert!(
            recovered.elapsed() < DRAIN_CAP,
            "A's queue never emptied after its window ({label})"
        );
        if depth(sqs, &p.a_url).await == 0 {
            empty_in_a_row += 1;
        } else {
            empty_in_a_row = 0;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let dlq_before_redrive = depth(sqs, &p.a_dlq).await;
    let handled_before_redrive = a.distinct();

    // The redrive: A's dead-letter queue back into A's queue (A keeps running, as it does when
    // an operator runs `cqrs redrive consumer`), then A catches up.
    let redrive_started = Instant::now();
    let report = cqrs_consumer::redrive::redrive(
        sqs,
        &p.a_dlq,
        &p.a_url,
        &cqrs_consumer::redrive::RedriveOptions::default(),
    )
    .await
    .expect("redrive");
    let redrive_time = redrive_started.elapsed();
    until("A after the redrive", || a.distinct() >= total).await;
    let redrive_to_done = redrive_started.elapsed();
    let dlq_after = depth(sqs, &p.a_dlq).await;

    // The pipeline stops; every task's figures.
    p.stop.store(true, Ordering::SeqCst);
    let (sync_invocations, sync_failed, sync_dead) = p.syncing.await.expect("data-sync's task");
    let (pub_invocations, pub_failed, pub_dead) = p.publishing.await.expect("the publisher's task");
    let a_polls = p.consuming_a.await.expect("A's task");
    let b_polls = p.consuming_b.await.expect("B's task");
    let mut probes = p.probing_task.await.expect("the probe's task");
    let _ = std::fs::remove_file(&p.failures);

    // Every version of the history table: B and A each exactly once, in order per item.
    let tables = &p.stack.tables;
    let history = scan_items(tables, &tables.history).await;
    assert_eq!(
        history.len(),
        total,
        "every command's version in history ({label})"
    );
    let mut expected: BTreeMap<(String, String), i64> = BTreeMap::new();
    for item in &history {
        let n = expected
            .entry((item.pk.clone(), item.base_sk().to_string()))
            .or_default();
        *n = (*n).max(item.version);
    }
    check_order(&format!("B ({label})"), &b.handled(), &expected);
    check_order(&format!("A ({label})"), &a.handled(), &expected);
    let b_timed = latencies(b, &accepted);
    assert_eq!(
        dlq_after, 0,
        "A's dead-letter queue is empty after the redrive ({label})"
    );
    assert_eq!(report.left, 0, "the redrive left nothing ({label})");
    assert_eq!(
        depth(sqs, &p.a_url).await,
        0,
        "A's queue is empty ({label})"
    );
    assert_eq!(
        depth(sqs, &p.b_dlq).await,
        0,
        "nothing of B parked ({label})"
    );
    assert_eq!(
        depth(sqs, &p.b_url).await,
        0,
        "B's queue is empty ({label})"
    );

    // The publisher never failed because of A (nor at all); data-sync neither; nothing parked.
    assert_eq!(
        (pub_failed, pub_dead),
        (0, 0),
        "the publisher: failed invocations, dead-lettered records ({label})"
    );
    assert_eq!(
        common::scan_raw(tables, &tables.parked).await.len(),
        0,
        "nothing parked by data-sync or the publisher ({label})"
    );
    assert_eq!(
        (sync_failed, sync_dead),
        (0, 0),
        "data-sync never failed ({label})"
    );

    let a_totals = std::mem::take(&mut *p.a_runtime.totals.lock().unwrap());
    let b_totals = std::mem::take(&mut *p.b_runtime.totals.lock().unwrap());
    let outcome = Outcome {
        start,
        tail,
        a_handled,
        a_failed,
        a_dlq,
        recovery: Recovery {
            more_parked: a_totals.parked - a_parked_in_window,
            dlq_before_redrive,
            handled_meanwhile: handled_before_redrive - a_handled,
            moved: report.moved,
            by_reason: format!("{:?}", report.by_reason),
            redrive_time,
            redrive_to_done,
            dlq_after,
        },
        b_timed,
        a_totals,
        b_totals,
        a_handled_all: a.handled().len(),
        b_handled_all: b.handled().len(),
        polls: [a_polls, b_polls],
        sync_invocations,
        pub_invocations,
        probes: [
            std::mem::take(&mut probes[0][p.phase]),
            std::mem::take(&mut probes[1][p.phase]),
        ],
        accepted,
        cpu: cpu_samples,
    };
    drop(p.moto);
    outcome
}

// ------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "two phases of ISOLATION_SECONDS (120 s), side by side: run with --ignored"]
async fn a_failing_consumer_leaves_the_other_consumer_and_the_publisher_alone_and_its_dead_letters_are_redriven()
 {
    let seconds = env_number("ISOLATION_SECONDS", 120).max(1);
    let rate = env_number("ISOLATION_RATE", 5).max(1);
    let started = Instant::now();
    let publisher_figures = Arc::new(Mutex::new(PublisherFigures::default()));
    let (baseline, failing) = tokio::join!(
        Pipeline::start(0, publisher_figures.clone()),
        Pipeline::start(1, publisher_figures.clone())
    );
    let set_up = started.elapsed();
    let motos = [baseline.moto.instance.pid, failing.moto.instance.pid];
    let dynamodb_pid = std::env::var("DDB_LOCAL_PORT")
        .ok()
        .and_then(|port| Cpu::dynamodb_pid(&port));

    // Both phases at once, each on its own stack.
    let runs =
        [baseline, failing].map(|p| tokio::spawn(run(p, rate, seconds, motos, dynamodb_pid)));
    let mut outcomes = Vec::new();
    for phase in runs {
        match phase.await {
            Ok(outcome) => outcomes.push(outcome),
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => panic!("a phase's task: {e}"),
        }
    }
    let o = [&outcomes[0], &outcomes[1]];

    // The publishers never reported a record, parked nothing, knew every record's write time.
    let pf = std::mem::take(&mut *publisher_figures.lock().unwrap());
    assert_eq!(
        (pf.reported, pf.parked),
        ([0, 0], [0, 0]),
        "the publisher: reported records per phase, parked entries per phase"
    );
    assert_eq!(pf.unknown, 0, "every data record's write time known");

    // The figures.
    let b_latency = [values(&o[0].b_timed), values(&o[1].b_timed)];
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
        "isolation run: {seconds} s a phase, both phases at once on stacks of their own, {rate} \
         commands/s each over {ITEMS} products (POST /commands through the command handler), A \
         parks after {MAX_RECEIVE} receives (visibility 1 s)"
    );
    println!(
        "  {:<56} {:>10} {:>10} {:>9}",
        "", "baseline", "A failing", "ratio"
    );
    count(
        "commands accepted",
        [o[0].accepted.len(), o[1].accepted.len()],
    );
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
        [o[0].a_handled, o[1].a_handled],
    );
    count(
        "A: events its handler failed",
        [o[0].a_failed, o[1].a_failed],
    );
    count(
        "A: dead-letter queue depth at the phase's end",
        [o[0].a_dlq, o[1].a_dlq],
    );
    let r = &o[1].recovery;
    println!(
        "  A after its window: {} more parked as its queue emptied (dead-letter queue {}, {} versions \
         handled meanwhile); redrive moved {} ({}) in {:.1?}, A had every version {:.1?} after the \
         redrive began; dead-letter queue after: {} (the baseline's A: redrive moved {}, dead-letter \
         queue after: {})",
        r.more_parked,
        r.dlq_before_redrive,
        r.handled_meanwhile,
        r.moved,
        r.by_reason,
        r.redrive_time,
        r.redrive_to_done,
        r.dlq_after,
        o[0].recovery.moved,
        o[0].recovery.dlq_after,
    );
    for (label, o) in PHASES.iter().zip(o) {
        let (at, bt) = (&o.a_totals, &o.b_totals);
        println!(
            "  {label}: A: {} invocations, {} messages, {} handled, {} duplicates, {} parked, {} \
             retried, {} polls; B: {} invocations, {} messages, {} handled, {} duplicates, {} \
             parked, {} retried, {} polls",
            at.invocations,
            at.messages,
            o.a_handled_all,
            at.duplicates,
            at.parked,
            at.retried,
            o.polls[0],
            bt.invocations,
            bt.messages,
            o.b_handled_all,
            bt.duplicates,
            bt.parked,
            bt.retried,
            o.polls[1],
        );
    }
    println!(
        "  data-sync: {} | {} invocations (baseline | A failing), 0 failed; publisher: {} | {} \
         invocations, 0 failed; DynamoDB Local's ApproximateCreationDateTime: {} of {} on a \
         whole minute (rounded down to the minute there: the ages above are from data-sync's \
         writes instead); drain after the load: baseline {:.1?}, failure (B) {:.1?}; set up \
         {set_up:.1?}, total {:.1?}",
        o[0].sync_invocations,
        o[1].sync_invocations,
        o[0].pub_invocations,
        o[1].pub_invocations,
        pf.whole_minutes,
        pf.created,
        o[0].tail,
        o[1].tail,
        started.elapsed()
    );
    println!(
        "  p99 by quarter of the phase (ms), baseline | A failing: B latency {} | {}; iterator age \
         {} | {}; publisher invocation {} | {}",
        quarters(&o[0].b_timed, o[0].start, seconds),
        quarters(&o[1].b_timed, o[1].start, seconds),
        quarters(&pf.ages_ms[0], o[0].start, seconds),
        quarters(&pf.ages_ms[1], o[1].start, seconds),
        quarters(&pf.batch_ms[0], o[0].start, seconds),
        quarters(&pf.batch_ms[1], o[1].start, seconds),
    );
    // Sampled by each phase during its load (the two loads run at the same time): this process
    // and DynamoDB Local serve both phases; each phase's own moto, then the other's.
    let cores = |samples: &[(Instant, Cpu)], phase: usize| {
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
                format!("{:.2}/{:.2}", q[1 + phase], q[4])
            })
            .collect();
        format!(
            "moto {:.2} (the other phase's {:.2}), this test {:.2} and DynamoDB Local {:.2} for \
             both phases, everything else {:.2} (moto/else by quarter {})",
            c[1 + phase],
            c[2 - phase],
            c[0],
            c[3],
            c[4],
            by_quarter.join(" ")
        )
    };
    println!(
        "  cores busy during the load (of {}): baseline: {}; A failing: {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        cores(&o[0].cpu, 0),
        cores(&o[1].cpu, 1)
    );
    println!(
        "  probes (ms; p50, then p99 by quarter), baseline | A failing: moto GetQueueAttributes of \
         an idle queue {:.1}, {} | {:.1}, {}; DynamoDB Local GetItem {:.1}, {} | {:.1}, {}",
        quantile(&values(&o[0].probes[0]), 0.5),
        quarters(&o[0].probes[0], o[0].start, seconds),
        quantile(&values(&o[1].probes[0]), 0.5),
        quarters(&o[1].probes[0], o[1].start, seconds),
        quantile(&values(&o[0].probes[1]), 0.5),
        quarters(&o[0].probes[1], o[0].start, seconds),
        quantile(&values(&o[1].probes[1]), 0.5),
        quarters(&o[1].probes[1], o[1].start, seconds),
    );
    println!(
        "isolation: B p99 ratio {:.2}, iterator age ratio {:.2} (goal <= 1.20)",
        b_p99[1] / b_p99[0],
        age_p99[1] / age_p99[0]
    );
    let probe_p99 = |server: usize| {
        quantile(&values(&o[1].probes[server]), 0.99)
            / quantile(&values(&o[0].probes[server]), 0.99)
    };
    println!(
        "isolation: the servers themselves, p99 ratio of a call unrelated to A (each phase's own \
         moto; the one DynamoDB Local): moto {:.2}, DynamoDB Local {:.2} (moto's SendMessage to a \
         FIFO queue costs in proportion to the queue's depth, and moto serves one request at a \
         time under Python's GIL: A parking into its deepening dead-letter queue slows every call \
         to its moto; AWS has no such coupling)",
        probe_p99(0),
        probe_p99(1)
    );
}
