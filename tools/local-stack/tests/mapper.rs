//! The local stream mapping's delivery rules (Lambda's, see `cqrs_local_stack::mapper`), with a
//! scripted function standing in for data-sync or sql-sync: resume from the lowest reported
//! failure, retry a reported record's rest until the retries are spent and then send that rest to
//! the on-failure destination whole, bisect a batch at once on a function error and isolate the
//! record that keeps failing. The last tests read a real stream from DynamoDB Local.

use std::cell::RefCell;
use std::collections::HashSet;
use std::time::Duration;

use aws_sdk_dynamodbstreams::types::{Record, StreamRecord};
use cqrs_local_stack::mapper::{Invoke, InvokeError, MapperConfig, deliver};

fn record(sequence: u32) -> Record {
    Record::builder()
        .dynamodb(
            StreamRecord::builder()
                .sequence_number(format!("{sequence:021}"))
                .build(),
        )
        .build()
}

fn seq(record: &Record) -> String {
    record
        .dynamodb()
        .unwrap()
        .sequence_number()
        .unwrap()
        .to_string()
}

/// A function that fails `poison` records every time, fails `flaky` records on their first
/// delivery only, and errors as a whole on the first `crash_first` invocations.
#[derive(Default)]
struct Scripted {
    poison: HashSet<String>,
    flaky: RefCell<HashSet<String>>,
    crash_first: RefCell<usize>,
    batches: RefCell<Vec<Vec<String>>>,
    applied: RefCell<Vec<String>>,
}

impl Invoke for Scripted {
    async fn invoke(&self, records: &[Record]) -> Result<Vec<String>, InvokeError> {
        let batch: Vec<String> = records.iter().map(seq).collect();
        self.batches.borrow_mut().push(batch.clone());
        if *self.crash_first.borrow() > 0 {
            *self.crash_first.borrow_mut() -= 1;
            return Err(InvokeError("crashed".into()));
        }
        let mut failed = Vec::new();
        for s in batch {
            if self.poison.contains(&s) || self.flaky.borrow_mut().remove(&s) {
                failed.push(s);
            } else if failed.is_empty() {
                self.applied.borrow_mut().push(s);
            }
        }
        Ok(failed)
    }
}

fn config(dir: &tempdir::Dir) -> MapperConfig {
    MapperConfig {
        retry_backoff: Duration::from_millis(1),
        failure_file: dir.path.join("failures.jsonl"),
        ..MapperConfig::default()
    }
}

mod tempdir {
    pub struct Dir {
        pub path: std::path::PathBuf,
    }
    impl Dir {
        pub fn new(name: &str) -> Self {
            let path =
                std::env::temp_dir().join(format!("local-stack-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&path);
            std::fs::create_dir_all(&path).unwrap();
            Dir { path }
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

#[tokio::test]
async fn a_clean_batch_is_one_invocation() {
    let dir = tempdir::Dir::new("clean");
    let records: Vec<Record> = (1..=5).map(record).collect();
    let function = Scripted::default();
    let report = deliver(&function, "shard", &records, &config(&dir)).await;
    assert_eq!((report.invocations, report.dead_lettered), (1, 0));
    assert_eq!(function.applied.borrow().len(), 5);
}

#[tokio::test]
async fn a_partial_failure_resumes_from_the_lowest_reported_record() {
    let dir = tempdir::Dir::new("partial");
    let records: Vec<Record> = (1..=6).map(record).collect();
    let function = Scripted {
        flaky: RefCell::new([seq(&records[3]), seq(&records[4])].into()),
        ..Default::default()
    };
    let report = deliver(&function, "shard", &records, &config(&dir)).await;
    let batches = function.batches.borrow();
    assert_eq!(batches.len(), 2, "{batches:?}");
    // The second invocation starts at the first failed record, not after the last one, and
    // carries everything after it.
    let expected: Vec<String> = records[3..].iter().map(seq).collect();
    assert_eq!(batches[1], expected);
    assert_eq!(report.dead_lettered, 0);
    assert_eq!(function.applied.borrow().len(), 6);
}

/// A failed invocation bisects the batch (`BisectBatchOnFunctionError`): here two crashes, then
/// every half goes through, each record once and in order.
#[tokio::test]
async fn a_failed_invocation_bisects_the_batch_and_every_record_goes_through() {
    let dir = tempdir::Dir::new("crash");
    let records: Vec<Record> = (1..=4).map(record).collect();
    let function = Scripted {
        crash_first: RefCell::new(2),
        ..Default::default()
    };
    let report = deliver(&function, "shard", &records, &config(&dir)).await;
    let sizes: Vec<usize> = function.batches.borrow().iter().map(Vec::len).collect();
    // [1..4] crashes, [1, 2] crashes, then [1], [2], [3, 4].
    assert_eq!(sizes, [4, 2, 1, 1, 2]);
    assert_eq!(report.invocations, 5);
    let expected: Vec<String> = records.iter().map(seq).collect();
    assert_eq!(*function.applied.borrow(), expected);
    assert_eq!(report.dead_lettered, 0);
}

/// Lambda's rule (`ReportBatchItemFailures` with `BisectBatchOnFunctionError`): the batch is cut at
/// the reported record and only the rest is retried. A record reported by its own sequence number
/// every time is the first of the rest: the cut splits nothing, and once the retries are spent the
/// rest goes to the on-failure destination whole, the records after it with it. (So a function
/// must never report a record that can never succeed: sql-sync parks it instead.)
#[tokio::test]
async fn a_record_reported_every_time_takes_the_records_after_it_to_the_on_failure_destination() {
    let dir = tempdir::Dir::new("poison");
    let records: Vec<Record> = (1..=8).map(record).collect();
    let poison = seq(&records[2]);
    let function = Scripted {
        poison: [poison.clone()].into(),
        ..Default::default()
    };
    let config = config(&dir);
    let report = deliver(&function, "shard-1", &records, &config).await;
    let applied = function.applied.borrow();
    let before: Vec<String> = records[..2].iter().map(seq).collect();
    assert_eq!(*applied, before, "the records before it, once");
    let rest: Vec<String> = records[2..].iter().map(seq).collect();
    let batches = function.batches.borrow();
    assert_eq!(
        batches.len(),
        1 + config.max_retries as usize,
        "{batches:?}"
    );
    assert!(batches[1..].iter().all(|b| *b == rest), "{batches:?}");
    assert_eq!(report.dead_lettered, 6);
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&config.failure_file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let dead: Vec<&str> = lines
        .iter()
        .map(|l| l["sequenceNumber"].as_str().unwrap())
        .collect();
    assert_eq!(dead, rest);
    assert_eq!(lines[0]["shardId"], "shard-1");
    assert_eq!(report.dead_letters, rest);
}

/// A function that reports its batch's first record whenever any record fails (sql-sync before
/// it isolated data errors) makes no progress at all: the whole batch goes to the on-failure
/// destination, nothing is bisected.
#[tokio::test]
async fn a_reported_first_record_cuts_nothing_and_the_whole_batch_is_dead_lettered() {
    struct FirstOnAnyFailure {
        poison: String,
        batches: RefCell<Vec<Vec<String>>>,
    }
    impl Invoke for FirstOnAnyFailure {
        async fn invoke(&self, records: &[Record]) -> Result<Vec<String>, InvokeError> {
            let batch: Vec<String> = records.iter().map(seq).collect();
            self.batches.borrow_mut().push(batch.clone());
            Ok(if batch.contains(&self.poison) {
                vec![batch[0].clone()]
            } else {
                Vec::new()
            })
        }
    }
    let dir = tempdir::Dir::new("first");
    let records: Vec<Record> = (1..=8).map(record).collect();
    let function = FirstOnAnyFailure {
        poison: seq(&records[5]),
        batches: RefCell::default(),
    };
    let config = config(&dir);
    let report = deliver(&function, "shard", &records, &config).await;
    let batches = function.batches.borrow();
    assert!(
        batches.iter().all(|b| b.len() == records.len()),
        "never bisected: {batches:?}"
    );
    assert_eq!(report.invocations, 1 + config.max_retries as usize);
    assert_eq!(report.dead_lettered, records.len());
}

/// A function error (the invocation failed: a crash, a timeout) bisects the batch at once, and
/// each half is retried on its own; a single record that keeps failing goes to the on-failure
/// destination after its retries, alone.
#[tokio::test]
async fn a_function_error_bisects_the_batch_at_once_and_isolates_the_record() {
    struct CrashOn {
        poison: String,
        batches: RefCell<Vec<Vec<String>>>,
        applied: RefCell<Vec<String>>,
    }
    impl Invoke for CrashOn {
        async fn invoke(&self, records: &[Record]) -> Result<Vec<String>, InvokeError> {
            let batch: Vec<String> = records.iter().map(seq).collect();
            self.batches.borrow_mut().push(batch.clone());
            if batch.contains(&self.poison) {
                return Err(InvokeError("crashed".into()));
            }
            self.applied.borrow_mut().extend(batch);
            Ok(Vec::new())
        }
    }
    let dir = tempdir::Dir::new("bisect");
    let records: Vec<Record> = (1..=8).map(record).collect();
    let poison = seq(&records[2]);
    let function = CrashOn {
        poison: poison.clone(),
        batches: RefCell::default(),
        applied: RefCell::default(),
    };
    let config = config(&dir);
    let report = deliver(&function, "shard", &records, &config).await;
    let batches = function.batches.borrow();
    let half: Vec<String> = records[..4].iter().map(seq).collect();
    assert_eq!(
        batches[1], half,
        "the first half right after the error: {batches:?}"
    );
    assert_eq!(report.dead_letters, std::slice::from_ref(&poison));
    let expected: Vec<String> = records.iter().map(seq).filter(|s| *s != poison).collect();
    assert_eq!(
        *function.applied.borrow(),
        expected,
        "every other record, in order"
    );
    println!(
        "on-failure path: 1 crashing record of {} dead-lettered alone after {} invocations, {} others applied",
        records.len(),
        report.invocations,
        expected.len()
    );
}

#[tokio::test]
async fn a_function_that_always_crashes_dead_letters_each_record_once() {
    let dir = tempdir::Dir::new("down");
    let records: Vec<Record> = (1..=3).map(record).collect();
    let function = Scripted {
        crash_first: RefCell::new(usize::MAX),
        ..Default::default()
    };
    let report = deliver(&function, "shard", &records, &config(&dir)).await;
    assert_eq!(report.dead_lettered, 3, "nothing is lost silently");
}

/// The `sk` of each stream record.
fn sort_keys(records: &[Record]) -> Vec<String> {
    records
        .iter()
        .map(|r| match r.dynamodb().unwrap().keys().unwrap().get("sk") {
            Some(aws_sdk_dynamodbstreams::types::AttributeValue::S(s)) => s.clone(),
            other => panic!("{other:?}"),
        })
        .collect()
}

/// Writes `PRODUCT#t1` / `sk` into `table`.
async fn put(tables: &cqrs_testkit::TestTables, table: &str, sk: &str) {
    use aws_sdk_dynamodb::types::AttributeValue;
    tables
        .client
        .put_item()
        .table_name(table)
        .item("pk", AttributeValue::S("PRODUCT#t1".into()))
        .item("sk", AttributeValue::S(sk.into()))
        .send()
        .await
        .unwrap();
}

/// A reader of the command table's stream, its shards known.
async fn command_stream(
    tables: &cqrs_testkit::TestTables,
) -> cqrs_local_stack::stream::StreamReader {
    let arn = tables.command_stream_arn().await;
    let mut reader =
        cqrs_local_stack::stream::StreamReader::new(cqrs_testkit::streams_client().await, &arn);
    reader.refresh_shards().await.unwrap();
    reader
}

#[tokio::test]
async fn records_of_a_real_stream_are_read_in_order() {
    let tables = cqrs_testkit::fresh_tables().await;
    for i in 0..7 {
        put(&tables, &tables.command, &format!("P@{}", i + 1)).await;
    }
    let mut reader = command_stream(&tables).await;
    let mut read = Vec::new();
    for _ in 0..50 {
        for shard in reader.readable_shards(&HashSet::new()) {
            read.extend(reader.read(&shard, 3).await.unwrap());
        }
        if read.len() >= 7 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let sks = sort_keys(&read);
    assert_eq!(sks, (1..=7).map(|i| format!("P@{i}")).collect::<Vec<_>>());
}

/// DynamoDB Local (3.3.1) answers `TrimmedDataAccessException` for the iterator an empty shard
/// handed out once any other table is written before the shard's first record (the command
/// handler writes the heads state record into the idempotency table before its first command):
/// the reader starts the shard again from `TRIM_HORIZON` and skips what it already returned, so
/// nothing is lost or read twice. (In AWS the iterator stays valid; the retry costs nothing there.)
#[tokio::test]
async fn a_write_to_another_table_before_the_first_record_loses_nothing() {
    let tables = cqrs_testkit::fresh_tables().await;
    let mut reader = command_stream(&tables).await;
    let shards = reader.readable_shards(&HashSet::new());
    assert_eq!(shards.len(), 1);
    let shard = &shards[0];
    // The shard is empty: two reads hand out iterators past nothing.
    for _ in 0..2 {
        assert!(reader.read(shard, 10).await.unwrap().is_empty());
    }
    put(&tables, &tables.data, "other").await;
    assert!(reader.read(shard, 10).await.unwrap().is_empty());
    put(&tables, &tables.command, "P@1").await;
    put(&tables, &tables.data, "other2").await;
    put(&tables, &tables.command, "P@2").await;
    let mut read = Vec::new();
    for _ in 0..20 {
        read.extend(reader.read(shard, 1).await.expect("the reader recovers"));
        if read.len() >= 2 {
            break;
        }
    }
    put(&tables, &tables.data, "other3").await;
    put(&tables, &tables.command, "P@3").await;
    for _ in 0..20 {
        read.extend(reader.read(shard, 10).await.expect("the reader recovers"));
        if read.len() >= 3 {
            break;
        }
    }
    let sks = sort_keys(&read);
    assert_eq!(sks, ["P@1", "P@2", "P@3"]);
}
