//! data-sync against DynamoDB Local: commands written into the command table, the table's own
//! stream turned into Lambda events, the handler run on them, and the data and history tables read
//! back.
// These tests pin what a sync target gets; `with_target` stays until the next major version.
#![allow(deprecated)]

mod common;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use cqrs_data_sync::DataSync;
use cqrs_data_sync::change_log::ChangeLog;
use cqrs_item::Item;
use cqrs_store::projection::DataWrite;

use common::*;

/// Three items, several versions each, one soft-deleted at the end.
fn commands() -> Vec<Item> {
    let mut items = vec![
        command("PRODUCT#t1", "P001", 1),
        command("PRODUCT#t1", "P002", 1),
        command("PRODUCT#t1", "P001", 2),
        command("ORDER#t2", "ORDER#o1", 1),
        command("PRODUCT#t1", "P001", 3),
        command("ORDER#t2", "ORDER#o1", 2),
    ];
    let mut deleted = command("PRODUCT#t1", "P002", 2);
    deleted.is_deleted = true;
    items.push(deleted);
    items
}

#[tokio::test]
async fn the_command_tables_stream_ends_up_in_the_data_and_history_tables() {
    let tables = cqrs_testkit::fresh_tables().await;
    let commands = commands();
    let event = commands_to_event(&tables, &commands).await;
    assert_eq!(event.records.len(), commands.len());

    let response = DataSync::new(store(&tables)).handle(event).await;

    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let data = scan(&tables, &tables.data).await;
    assert_eq!(data, expected_data(&commands));
    // Spelled out for one item: the command item with the version-free sk and cpk/csk.
    let p001 = data.iter().find(|i| i.sk == "P001").unwrap();
    let mut expected = command("PRODUCT#t1", "P001", 3);
    expected.sk = "P001".into();
    expected.cpk = Some("PRODUCT#t1".into());
    expected.csk = Some("P001@3".into());
    assert_eq!(*p001, expected);
    assert_eq!(
        scan(&tables, &tables.history).await,
        expected_history(&commands)
    );
}

#[tokio::test]
async fn soft_deleted_items_are_projected_as_deleted() {
    let tables = cqrs_testkit::fresh_tables().await;
    let commands = commands();
    let event = commands_to_event(&tables, &commands).await;
    DataSync::new(store(&tables)).handle(event).await;

    let data = scan(&tables, &tables.data).await;
    let p002 = data.iter().find(|i| i.sk == "P002").unwrap();
    assert!(p002.is_deleted);
    assert_eq!(p002.version, 2);
    let history = scan(&tables, &tables.history).await;
    let versions: Vec<(i64, bool)> = history
        .iter()
        .filter(|i| i.id == "PRODUCT#t1#P002")
        .map(|i| (i.version, i.is_deleted))
        .collect();
    assert_eq!(versions, [(1, false), (2, true)]);
}

#[tokio::test]
async fn commands_written_through_the_command_handler_are_projected() {
    use cqrs_command_handler::App;
    use lambda_http::Body;

    let tables = cqrs_testkit::fresh_tables().await;
    let app = App::new(
        store(&tables),
        cqrs_caller::CallerMode::Local,
        cqrs_model::Model::example(),
    );
    let send = |method: &'static str, body: serde_json::Value| {
        let app = &app;
        async move {
            let request = lambda_http::Request::new(Body::Text(body.to_string()));
            let (mut parts, body) = request.into_parts();
            parts.method = method.parse().unwrap();
            parts.uri = "/commands".parse().unwrap();
            for (name, value) in [
                ("content-type", "application/json"),
                ("x-tenant-code", "t1"),
                ("x-user-id", "u1"),
                ("x-roles", "admin"),
            ] {
                parts.headers.insert(name, value.parse().unwrap());
            }
            let response =
                cqrs_command_handler::handle(app, lambda_http::Request::from_parts(parts, body))
                    .await;
            assert_eq!(response.status(), 202, "{:?}", response.body());
        }
    };
    send(
        "POST",
        serde_json::json!({"pk": "PRODUCT#t1", "sk": "P001", "version": 0,
        "name": "Coffee", "attributes": {"price": 1200}}),
    )
    .await;
    send(
        "PATCH",
        serde_json::json!({"pk": "PRODUCT#t1", "sk": "P001", "version": 1,
        "attributes": {"price": 1300, "tags": ["new"]}}),
    )
    .await;
    send(
        "POST",
        serde_json::json!({"pk": "PRODUCT#t1", "sk": "P001", "version": 2,
        "name": "Coffee", "attributes": {"discontinued": true}, "isDeleted": true}),
    )
    .await;

    let event = stream_event(&tables, 3).await;
    let response = DataSync::new(store(&tables)).handle(event).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");

    let commands = scan(&tables, &tables.command).await;
    assert_eq!(commands.len(), 3);
    assert_converged(&tables, &commands).await;
    let data = scan(&tables, &tables.data).await;
    assert_eq!(data.len(), 1);
    assert!(data[0].is_deleted);
    assert_eq!(data[0].version, 3);
    assert_eq!(data[0].csk.as_deref(), Some("P001@3"));
}

#[tokio::test]
async fn duplicates_replays_and_reversed_order_converge_to_the_newest_version() {
    let source = cqrs_testkit::fresh_tables().await;
    let commands = commands();
    let event = commands_to_event(&source, &commands).await;

    let duplicated = {
        let mut records = event.records.clone();
        records.extend(event.records.clone());
        event_of(records)
    };
    let reversed = {
        let mut records = event.records.clone();
        records.reverse();
        event_of(records)
    };
    // Each record delivered twice in a row, as a retrying event source may.
    let interleaved = event_of(
        event
            .records
            .iter()
            .flat_map(|r| [r.clone(), r.clone()])
            .collect(),
    );
    for (name, batches) in [
        ("duplicates", vec![duplicated]),
        (
            "whole-batch replay",
            vec![event.clone(), event.clone(), event.clone()],
        ),
        ("reversed", vec![reversed.clone()]),
        ("reversed, then in order", vec![reversed, event.clone()]),
        ("interleaved duplicates", vec![interleaved]),
    ] {
        let tables = cqrs_testkit::fresh_tables().await;
        let sync = DataSync::new(store(&tables));
        for batch in batches {
            let response = sync.handle(batch).await;
            assert!(
                response.batch_item_failures.is_empty(),
                "{name}: {response:?}"
            );
        }
        assert_eq!(
            scan(&tables, &tables.data).await,
            expected_data(&commands),
            "{name}: data"
        );
        assert_eq!(
            scan(&tables, &tables.history).await,
            expected_history(&commands),
            "{name}: history"
        );
    }
}

#[tokio::test]
async fn an_older_version_never_overwrites_a_newer_one() {
    let tables = cqrs_testkit::fresh_tables().await;
    let commands = vec![
        command("PRODUCT#t1", "P001", 1),
        command("PRODUCT#t1", "P001", 2),
    ];
    let event = commands_to_event(&tables, &commands).await;
    let store = store(&tables);
    assert_eq!(
        store.put_data_if_newer(&commands[1]).await.unwrap(),
        DataWrite::Written
    );

    let recorder = Arc::new(Recorder::default());
    let sync = DataSync::new(store.clone()).with_target(recorder.clone());
    let response = sync.handle(event).await;
    assert!(response.batch_item_failures.is_empty());
    assert_converged(&tables, &commands).await;
    // Targets still see both versions, told that neither changed the data table.
    let seen = recorder.seen.lock().unwrap().clone();
    let id = "PRODUCT#t1#P001".to_string();
    assert_eq!(
        seen,
        [
            (id.clone(), 1, DataWrite::AlreadyCurrent),
            (id, 2, DataWrite::AlreadyCurrent)
        ]
    );
}

/// The record of command row `sk` in `event`.
fn record_of<'e>(
    event: &'e aws_lambda_events::event::dynamodb::Event,
    sk: &str,
) -> &'e aws_lambda_events::event::dynamodb::EventRecord {
    event
        .records
        .iter()
        .find(|r| r.change.keys["sk"] == serde_dynamo::AttributeValue::S(sk.into()))
        .unwrap()
}

#[tokio::test]
async fn a_failed_data_write_reports_the_items_earliest_record_of_the_batch() {
    let tables = cqrs_testkit::fresh_tables().await;
    let commands = commands();
    let event = commands_to_event(&tables, &commands).await;
    // P001's three versions collapse into one data write, of version 3; it fails (the store's
    // retries exhausted, say).
    let faulty = FaultInjector::new(store(&tables), [(Op::Data, "P001@3".to_string())], 1);
    let recorder = Arc::new(Recorder::default());
    let sync = DataSync::new(faulty).with_target(recorder.clone());

    let response = sync.handle(event.clone()).await;

    // Reported: P001's earliest record in the batch (version 1), not the collapsed version 3, so
    // that the redelivery brings every version of P001 to the targets again.
    let p001_v1 = record_of(&event, "P001@1");
    assert_eq!(reported(&response), [sequence_number(p001_v1)]);
    let data = scan(&tables, &tables.data).await;
    assert!(data.iter().all(|i| i.sk != "P001"), "{data:?}");
    // History went first, whole: every version of P001 is there.
    let p001_history: Vec<i64> = scan(&tables, &tables.history)
        .await
        .iter()
        .filter(|i| i.id == "PRODUCT#t1#P001")
        .map(|i| i.version)
        .collect();
    assert_eq!(p001_history, [1, 2, 3]);
    // No target saw P001; the other items are complete.
    assert!(
        recorder
            .seen
            .lock()
            .unwrap()
            .iter()
            .all(|(id, _, _)| id != "PRODUCT#t1#P001")
    );
    for other in ["P002", "ORDER#o1"] {
        assert_eq!(
            data.iter().find(|i| i.sk == other).unwrap().version,
            2,
            "{other}"
        );
    }

    // Lambda resumes from the reported record: everything converges, the target saw P001 in order.
    let position = event.records.iter().position(|r| r == p001_v1).unwrap();
    let rest = event_of(event.records[position..].to_vec());
    let response = sync.handle(rest).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    assert_converged(&tables, &commands).await;
    let p001_seen: Vec<(i64, DataWrite)> = recorder
        .seen
        .lock()
        .unwrap()
        .iter()
        .filter(|(id, _, _)| id == "PRODUCT#t1#P001")
        .map(|(_, v, w)| (*v, *w))
        .collect();
    // Only the newest version was written to the data table; the older ones collapsed into it.
    assert_eq!(
        p001_seen,
        [
            (1, DataWrite::AlreadyCurrent),
            (2, DataWrite::AlreadyCurrent),
            (3, DataWrite::Written)
        ]
    );
    println!(
        "collapsed data write fault: reported P001@1 (earliest of 3 collapsed versions), \
         converged after 1 redelivery, targets saw versions 1, 2, 3 in order"
    );
}

#[tokio::test]
async fn a_failed_history_write_stops_its_item_there_and_the_versions_before_it_project() {
    let tables = cqrs_testkit::fresh_tables().await;
    let commands = commands();
    let event = commands_to_event(&tables, &commands).await;
    let faulty = FaultInjector::new(store(&tables), [(Op::History, "P001@2".to_string())], 1);
    let recorder = Arc::new(Recorder::default());
    let sync = DataSync::new(faulty).with_target(recorder.clone());

    let response = sync.handle(event.clone()).await;

    let p001_v2 = record_of(&event, "P001@2");
    assert_eq!(reported(&response), [sequence_number(p001_v2)]);
    // P001 stopped at version 1: version 3 was not applied past the failure.
    let data = scan(&tables, &tables.data).await;
    assert_eq!(data.iter().find(|i| i.sk == "P001").unwrap().version, 1);

    let position = event.records.iter().position(|r| r == p001_v2).unwrap();
    let rest = event_of(event.records[position..].to_vec());
    assert!(sync.handle(rest).await.batch_item_failures.is_empty());
    assert_converged(&tables, &commands).await;
    let p001_seen: Vec<i64> = recorder
        .seen
        .lock()
        .unwrap()
        .iter()
        .filter(|(id, _, _)| id == "PRODUCT#t1#P001")
        .map(|(_, v, _)| *v)
        .collect();
    assert_eq!(p001_seen, [1, 2, 3]);
}

#[tokio::test]
async fn seeded_faults_name_the_first_failed_record_of_each_item_and_replays_converge() {
    let tables = cqrs_testkit::fresh_tables().await;
    // Five items with four versions each, interleaved as concurrent writers would produce them.
    let mut commands = Vec::new();
    for version in 1..=4 {
        for n in 1..=5 {
            commands.push(command("PRODUCT#t1", &format!("P{n:03}"), version));
        }
    }
    let event = commands_to_event(&tables, &commands).await;
    let mut any_failure = false;
    for seed in 1..=6u64 {
        let target = cqrs_testkit::fresh_tables().await;
        let (faulty, chosen) = FaultInjector::seeded(store(&target), &commands, seed, 15);
        let sync = DataSync::new(faulty);

        // Expected, per item: its records in stream order stop at the first whose history write
        // fails; the newest version before that is the item's one data write; when that fails,
        // the item's earliest record is reported, else the record history stopped at.
        let mut by_item: std::collections::BTreeMap<String, Vec<(usize, String)>> =
            Default::default();
        for (position, record) in event.records.iter().enumerate() {
            let serde_dynamo::AttributeValue::S(sk) = &record.change.keys["sk"] else {
                panic!("keys")
            };
            let base = cqrs_keys::remove_sort_key_version(sk).to_string();
            by_item
                .entry(base)
                .or_default()
                .push((position, sk.clone()));
        }
        let mut expected_positions = Vec::new();
        for records in by_item.values() {
            let stop = records
                .iter()
                .position(|(_, sk)| chosen.contains(&(Op::History, sk.clone())));
            let applied = &records[..stop.unwrap_or(records.len())];
            if let Some((_, newest)) = applied.last()
                && chosen.contains(&(Op::Data, newest.clone()))
            {
                expected_positions.push(records[0].0);
            } else if let Some(stop) = stop {
                expected_positions.push(records[stop].0);
            }
        }
        expected_positions.sort();
        let expected: Vec<String> = expected_positions
            .iter()
            .map(|&p| sequence_number(&event.records[p]))
            .collect();
        any_failure |= !expected.is_empty();

        let responses = run_like_lambda(&sync, event.clone(), 20).await;
        assert_eq!(responses[0], expected, "seed {seed}");
        assert!(responses.last().unwrap().is_empty(), "seed {seed}");
        assert_converged(&target, &commands).await;
    }
    assert!(any_failure, "the seeds must inject at least one fault");
}

#[tokio::test]
async fn a_failing_target_fails_its_record_until_it_recovers() {
    let tables = cqrs_testkit::fresh_tables().await;
    let commands = commands();
    let event = commands_to_event(&tables, &commands).await;
    let recorder = Arc::new(Recorder::default());
    recorder.failing.lock().unwrap().insert("ORDER#o1@1".into());
    let sync = DataSync::new(store(&tables)).with_target(recorder.clone());

    let response = sync.handle(event.clone()).await;
    let o1_v1 = event
        .records
        .iter()
        .find(|r| r.change.keys["sk"] == serde_dynamo::AttributeValue::S("ORDER#o1@1".into()))
        .unwrap();
    assert_eq!(reported(&response), [sequence_number(o1_v1)]);
    // The data table already has the item's newest version of the batch (one data write per
    // item, before the targets); the target waits at version 1 and has not seen version 2.
    let data = scan(&tables, &tables.data).await;
    assert_eq!(data.iter().find(|i| i.sk == "ORDER#o1").unwrap().version, 2);
    assert!(
        recorder
            .seen
            .lock()
            .unwrap()
            .iter()
            .all(|(id, _, _)| id != "ORDER#t2#ORDER#o1")
    );

    // Still failing: reported again, nothing lost.
    let position = event.records.iter().position(|r| r == o1_v1).unwrap();
    let rest = event_of(event.records[position..].to_vec());
    assert_eq!(
        reported(&sync.handle(rest.clone()).await),
        [sequence_number(o1_v1)]
    );

    recorder.failing.lock().unwrap().clear();
    assert!(sync.handle(rest).await.batch_item_failures.is_empty());
    assert_converged(&tables, &commands).await;
    let seen = recorder.seen.lock().unwrap().clone();
    let o1: Vec<i64> = seen
        .iter()
        .filter(|(id, _, _)| id == "ORDER#t2#ORDER#o1")
        .map(|(_, v, _)| *v)
        .collect();
    assert_eq!(o1, [1, 2]);
}

#[tokio::test]
async fn different_content_under_an_existing_history_version_is_parked_not_overwritten() {
    let tables = cqrs_testkit::fresh_tables().await;
    let commands = vec![command("PRODUCT#t1", "P001", 1)];
    let event = commands_to_event(&tables, &commands).await;
    let store = store(&tables);
    let mut other = commands[0].clone();
    other.name = "written by something else".into();
    store.put_history(&other).await.unwrap();

    let response = DataSync::new(store.clone()).handle(event.clone()).await;
    assert!(reported(&response).is_empty(), "{response:?}");
    assert_eq!(scan(&tables, &tables.history).await, [other]);
    // History is written first: the refused version never reached the data table.
    assert!(scan(&tables, &tables.data).await.is_empty());
    let parked = common::parked(&tables).await;
    assert_eq!(parked.len(), 1);
    assert_eq!(common::s(&parked[0], "reasonKind"), "history-conflict");
    assert_eq!(
        common::s(&parked[0], "sequenceNumber"),
        sequence_number(&event.records[0])
    );
    // The parked copy of the record still carries its image (put back from the version).
    let record: serde_json::Value = serde_json::from_str(&common::s(&parked[0], "record")).unwrap();
    assert_eq!(
        record["dynamodb"]["NewImage"]["name"]["S"],
        commands[0].name.as_str()
    );
}

#[tokio::test]
async fn items_go_concurrently_and_each_item_gets_one_data_write_of_its_newest_version() {
    let tables = cqrs_testkit::fresh_tables().await;
    let mut commands = Vec::new();
    for version in 1..=3 {
        for n in 1..=12 {
            commands.push(command("PRODUCT#t1", &format!("P{n:03}"), version));
        }
    }
    let event = commands_to_event(&tables, &commands).await;
    let observer = Arc::new(Observer::new(store(&tables), Duration::from_millis(20)));
    let sync = DataSync::new(observer.clone()).with_concurrency(4);

    assert!(sync.handle(event).await.batch_item_failures.is_empty());

    let max = observer.max_in_flight.load(Ordering::SeqCst);
    assert!(max > 1, "independent items were projected one at a time");
    assert!(max <= 4, "more than the concurrency limit in flight: {max}");
    assert_eq!(observer.max_per_item.load(Ordering::SeqCst), 1);
    // One data write per item: its newest version of the batch.
    let order = observer.order.lock().unwrap().clone();
    assert_eq!(order.len(), 12);
    for (id, versions) in order.iter() {
        assert_eq!(versions, &[3], "{id}");
    }
    assert_converged(&tables, &commands).await;
}

#[tokio::test]
async fn the_change_log_keeps_every_version_once_per_tenant_and_month() {
    let tables = cqrs_testkit::fresh_tables().await;
    // The log in a table of its own, created like the data table.
    let specs = cqrs_testkit::template::workspace_tables().unwrap();
    let spec = cqrs_testkit::template::find(&specs, cqrs_testkit::template::DATA_TABLE).unwrap();
    let log_table = format!("{}-log", tables.command);
    cqrs_testkit::tables::create_table(&tables.client, spec, &log_table)
        .await
        .unwrap();
    let commands = commands();
    let event = commands_to_event(&tables, &commands).await;
    let store = store(&tables);
    let sync = DataSync::new(store.clone()).with_target(ChangeLog::new(store, &log_table));

    for _ in 0..2 {
        let response = sync.handle(event.clone()).await;
        assert!(response.batch_item_failures.is_empty(), "{response:?}");
    }

    let entries = scan(&tables, &log_table).await;
    assert_eq!(
        entries.len(),
        commands.len(),
        "one entry per version, replays included"
    );
    // Tenant t1, January 2026 (the versions' updatedAt), in time order.
    let t1 = tables
        .client
        .query()
        .table_name(&log_table)
        .key_condition_expression("pk = :pk")
        .expression_attribute_values(
            ":pk",
            AttributeValue::S("CQRS_CHANGE_LOG#t1#2026-01".into()),
        )
        .send()
        .await
        .unwrap();
    let logged: Vec<(String, i64)> = t1
        .items()
        .iter()
        .map(|a| {
            let entry = Item::from_attributes(a.clone()).unwrap();
            (
                entry.attributes["sk"].as_str().unwrap().to_string(),
                entry.attributes["version"].as_i64().unwrap(),
            )
        })
        .collect();
    let mut expected: Vec<&Item> = commands.iter().filter(|c| c.tenant_code == "t1").collect();
    expected.sort_by(|a, b| (&a.updated_at, &a.id).cmp(&(&b.updated_at, &b.id)));
    let expected: Vec<(String, i64)> = expected.iter().map(|c| (c.sk.clone(), c.version)).collect();
    let mut logged_sorted = logged.clone();
    logged_sorted.sort();
    let mut expected_sorted = expected.clone();
    expected_sorted.sort();
    assert_eq!(logged_sorted, expected_sorted);
    // The sort key orders the partition by time.
    let times: Vec<String> = t1.items().iter().map(|a| s(a, "updatedAt")).collect();
    let mut sorted = times.clone();
    sorted.sort();
    assert_eq!(times, sorted);
    // A deleted version is logged as such.
    let deletion = t1
        .items()
        .iter()
        .map(|a| Item::from_attributes(a.clone()).unwrap())
        .find(|e| e.attributes["sk"] == "P002@2")
        .unwrap();
    assert_eq!(deletion.attributes["isDeleted"], true);
    assert_eq!(deletion.item_type, "CQRS_CHANGE_LOG");
}

#[tokio::test]
async fn an_empty_batch_answers_no_failure() {
    let tables = cqrs_testkit::fresh_tables().await;
    let response = DataSync::new(store(&tables))
        .handle(event_of(Vec::new()))
        .await;
    assert_eq!(
        serde_json::to_value(&response).unwrap(),
        serde_json::json!({"batchItemFailures": []})
    );
}
