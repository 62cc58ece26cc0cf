//! The stream mapping's on-failure path with the real pieces: the local stream mapping
//! (`cqrs_local_stack::mapper::deliver`, the stand-in for Lambda's event source mapping and its SQS
//! on-failure destination) delivering the command table's real DynamoDB Local stream to the real
//! data-sync handler, in process. Poison records (items written straight into the command table
//! without the item shape) can never be projected, and here they cannot be parked either: this
//! data-sync's store has no parked table, as when parking keeps failing (`parking.rs` tests the
//! parked path). So they fail every retry: they must land in the on-failure file, once each, and
//! the records after them, of the same item and of others, must still be projected.

mod common;

use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodbstreams::types::Record;
use common::{command_item, scan_items, store};
use cqrs_data_sync::DataSync;
use cqrs_item::Item;
use cqrs_local_stack::mapper::{Invoke, InvokeError, MapperConfig, deliver};
use serde_json::Value;

/// data-sync, invoked in process with the Lambda event of the records.
struct InProcess {
    sync: DataSync,
    arn: String,
    invocations: std::cell::Cell<usize>,
}

impl Invoke for InProcess {
    async fn invoke(&self, records: &[Record]) -> Result<Vec<String>, InvokeError> {
        self.invocations.set(self.invocations.get() + 1);
        let event = cqrs_testkit::stream_event::lambda_event(records, &self.arn)
            .map_err(|e| InvokeError(format!("building the event: {e}")))?;
        // What the Lambda entry point answers (`handle_event`): a failed invocation when the
        // batch's first record failed, so that the mapping bisects.
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

fn sk_of(record: &Record) -> String {
    match record
        .dynamodb()
        .and_then(|d| d.keys())
        .and_then(|k| k.get("sk"))
    {
        Some(aws_sdk_dynamodbstreams::types::AttributeValue::S(s)) => s.clone(),
        other => panic!("a record without sk: {other:?}"),
    }
}

fn sequence_number(record: &Record) -> String {
    record
        .dynamodb()
        .and_then(|d| d.sequence_number())
        .expect("a sequence number")
        .to_string()
}

#[tokio::test]
async fn poison_records_go_to_the_on_failure_destination_and_block_nothing() {
    let tables = cqrs_testkit::fresh_tables().await;
    let store = store(&tables);
    let poison = |pk: &str, sk: &str| {
        // No item shape: `version` is not a number and most attributes are missing.
        tables
            .client
            .put_item()
            .table_name(&tables.command)
            .item("pk", AttributeValue::S(pk.into()))
            .item("sk", AttributeValue::S(sk.into()))
            .item("version", AttributeValue::S("not a number".into()))
            .send()
    };
    // In stream order: valid versions, a poison record inside item A's chain, more of A after it,
    // a poison record of an item of its own, then other items.
    let valid_before = [
        command_item("PRODUCT#t1", "A", 1),
        command_item("PRODUCT#t1", "A", 2),
        command_item("PRODUCT#t1", "B", 1),
    ];
    let valid_after = [
        command_item("PRODUCT#t1", "A", 3),
        command_item("PRODUCT#t1", "C", 1),
        command_item("PRODUCT#t1", "B", 2),
        command_item("PRODUCT#t1", "C", 2),
        command_item("ORDER#t2", "ORDER#o1", 1),
    ];
    for item in &valid_before {
        store.put_command(item, None).await.unwrap();
    }
    poison("PRODUCT#t1", "A@99").await.unwrap();
    store.put_command(&valid_after[0], None).await.unwrap();
    poison("PRODUCT#t1", "POISON@1").await.unwrap();
    for item in &valid_after[1..] {
        store.put_command(item, None).await.unwrap();
    }
    let total = valid_before.len() + valid_after.len() + 2;
    let records = tables.command_stream_records(total).await;
    assert_eq!(records.len(), total);
    let poisons: Vec<String> = records
        .iter()
        .filter(|r| ["A@99", "POISON@1"].contains(&sk_of(r).as_str()))
        .map(sequence_number)
        .collect();
    assert_eq!(poisons.len(), 2);

    let dir = std::env::temp_dir().join(format!("reliability-on-failure-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let config = MapperConfig {
        retry_backoff: Duration::from_millis(1),
        failure_file: dir.join("stream-failures.jsonl"),
        ..MapperConfig::default()
    };
    // `store` has no parked table (`Tables::new` without `with_parked`): parking fails every time.
    assert!(store.tables().parked.is_none());
    let invoker = InProcess {
        sync: DataSync::new(store.clone()),
        arn: tables.command_stream_arn().await,
        invocations: Default::default(),
    };
    let report = deliver(&invoker, "shard-0", &records, &config).await;

    // The poison records, and only they, are in the on-failure destination, once each.
    let lines: Vec<Value> = std::fs::read_to_string(&config.failure_file)
        .expect("the on-failure file")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    let dead: Vec<&str> = lines
        .iter()
        .map(|l| l["sequenceNumber"].as_str().unwrap())
        .collect();
    assert_eq!(dead, poisons);
    assert_eq!(report.dead_lettered, 2);
    for line in &lines {
        assert_eq!(line["eventName"], "INSERT");
        assert!(line["reason"].as_str().is_some_and(|r| !r.is_empty()));
    }

    // Everything else is projected: the newest valid version of every item, every valid version.
    let valid: Vec<Item> = valid_before.iter().chain(&valid_after).cloned().collect();
    let mut expected_history = valid.clone();
    expected_history.sort_by(|a, b| (&a.pk, &a.sk).cmp(&(&b.pk, &b.sk)));
    let mut expected_data: Vec<Item> = ["A", "B", "C", "ORDER#o1"]
        .iter()
        .map(|base| {
            valid
                .iter()
                .filter(|i| i.base_sk() == *base)
                .max_by_key(|i| i.version)
                .unwrap()
                .clone()
                .into_data_item()
        })
        .collect();
    expected_data.sort_by(|a, b| (&a.pk, &a.sk).cmp(&(&b.pk, &b.sk)));
    assert_eq!(scan_items(&tables, &tables.history).await, expected_history);
    assert_eq!(scan_items(&tables, &tables.data).await, expected_data);
    let first_poison = records
        .iter()
        .position(|r| sequence_number(r) == poisons[0])
        .unwrap();
    let after_poison = records[first_poison..]
        .iter()
        .filter(|r| !poisons.contains(&sequence_number(r)))
        .count();
    println!(
        "on-failure path: {} stream records, {} poison: {} dead-lettered to the on-failure file \
         after {} invocations ({} failed); all {} valid records projected, {after_poison} of them \
         after the first poison record (data table {} items, history {} versions)",
        records.len(),
        poisons.len(),
        report.dead_lettered,
        report.invocations,
        report.failed_invocations,
        valid.len(),
        expected_data.len(),
        expected_history.len()
    );
}
