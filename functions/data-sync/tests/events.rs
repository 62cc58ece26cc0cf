//! Every sample event in `events/data-sync/` run through the handler against DynamoDB Local, each on
//! fresh tables, with the outcome each must get. A file without an expectation here fails the
//! test, so the folder and this table cannot drift apart.

mod common;

use aws_lambda_events::event::dynamodb::Event;
use cqrs_data_sync::DataSync;
use cqrs_item::Item;
use serde_json::Value;

use common::{parked, reported, scan, store};

const EVENTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../events/data-sync");

/// An expected outcome: the indexes (in the file) of the records reported as failed and of those
/// parked, the data table's items as (command sk, isDeleted), and how many history rows.
struct Expected {
    file: &'static str,
    failed: &'static [usize],
    parked: &'static [usize],
    data: &'static [(&'static str, bool)],
    history: usize,
}

const EXPECTED: &[Expected] = &[
    // One new item: data and history hold version 1.
    Expected {
        file: "01-insert.json",
        failed: &[],
        parked: &[],
        data: &[("01HX7MBJK3V9WQBZ7XNDK5ZT2M@1", false)],
        history: 1,
    },
    // Create, update, patch, soft delete of one item: the data table holds the deleted version 4.
    Expected {
        file: "02-versions.json",
        failed: &[],
        parked: &[],
        data: &[("01HX7MBJK3V9WQBZ7XNDK5ZT2M@4", true)],
        history: 4,
    },
    // Version 2 delivered before version 1 (a replay): version 1 must not overwrite version 2.
    Expected {
        file: "03-out-of-order.json",
        failed: &[],
        parked: &[],
        data: &[("ORDER#01HX7N0Q2ZC8W6Y3K9D4T5R1AB@2", false)],
        history: 2,
    },
    // A command row expired by TTL: acknowledged, nothing written.
    Expected {
        file: "04-ttl-remove.json",
        failed: &[],
        parked: &[],
        data: &[],
        history: 0,
    },
    // A version written as a string: parked with its reason and acknowledged (never retried); the
    // other item of the batch is still projected.
    Expected {
        file: "05-malformed.json",
        failed: &[],
        parked: &[0],
        data: &[("01HX7R1AAA2B3C4D5E6F7G8H9J@1", false)],
        history: 1,
    },
];

#[tokio::test]
async fn every_sample_event_gets_its_outcome() {
    let mut files: Vec<String> = std::fs::read_dir(EVENTS)
        .expect("events/data-sync exists")
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".json"))
        .collect();
    files.sort();
    let expected: Vec<&str> = EXPECTED.iter().map(|e| e.file).collect();
    assert_eq!(
        files, expected,
        "every event file has an expectation and vice versa"
    );

    for expected in EXPECTED {
        let file = expected.file;
        let text = std::fs::read_to_string(format!("{EVENTS}/{file}")).unwrap();
        assert_lambda_shape(file, &serde_json::from_str(&text).unwrap());
        let event: Event = serde_json::from_str(&text).unwrap();

        let tables = cqrs_testkit::fresh_tables().await;
        let response = DataSync::new(store(&tables)).handle(event.clone()).await;

        let failed: Vec<String> = expected
            .failed
            .iter()
            .map(|&i| event.records[i].change.sequence_number.clone().unwrap())
            .collect();
        assert_eq!(reported(&response), failed, "{file}");
        let mut parked_sequence_numbers: Vec<String> = parked(&tables)
            .await
            .iter()
            .map(|row| common::s(row, "sequenceNumber"))
            .collect();
        parked_sequence_numbers.sort();
        let want_parked: Vec<String> = expected
            .parked
            .iter()
            .map(|&i| event.records[i].change.sequence_number.clone().unwrap())
            .collect();
        assert_eq!(parked_sequence_numbers, want_parked, "{file}: parked");
        let data: Vec<(String, bool)> = scan(&tables, &tables.data)
            .await
            .into_iter()
            .map(|item| (item.csk.clone().unwrap(), item.is_deleted))
            .collect();
        let want: Vec<(String, bool)> = expected
            .data
            .iter()
            .map(|(sk, deleted)| (sk.to_string(), *deleted))
            .collect();
        assert_eq!(data, want, "{file}: data table");
        let history = scan(&tables, &tables.history).await;
        assert_eq!(history.len(), expected.history, "{file}: history table");
        // What was projected is exactly the images of the file.
        for row in &history {
            let image = event
                .records
                .iter()
                .find(|r| {
                    r.change.new_image.get("sk")
                        == Some(&serde_dynamo::AttributeValue::S(row.sk.clone()))
                })
                .unwrap();
            let item: Item = Item::from_attributes(image.change.new_image.clone().into()).unwrap();
            assert_eq!(*row, item, "{file}: history row");
        }
        for row in scan(&tables, &tables.data).await {
            let command = history
                .iter()
                .find(|h| Some(&h.sk) == row.csk.as_ref())
                .unwrap();
            assert_eq!(row, command.clone().into_data_item(), "{file}: data item");
        }
    }
}

/// The fields Lambda sends for a DynamoDB stream record.
fn assert_lambda_shape(file: &str, json: &Value) {
    let records = json["Records"].as_array().unwrap();
    assert!(!records.is_empty(), "{file}");
    for record in records {
        for field in ["eventID", "eventName", "awsRegion", "eventSourceARN"] {
            assert!(record[field].is_string(), "{file}: {field}");
        }
        assert_eq!(record["eventVersion"], "1.1", "{file}");
        assert_eq!(record["eventSource"], "aws:dynamodb", "{file}");
        let change = &record["dynamodb"];
        assert!(change["ApproximateCreationDateTime"].is_number(), "{file}");
        assert!(change["Keys"]["pk"]["S"].is_string(), "{file}");
        assert!(change["SequenceNumber"].is_string(), "{file}");
        assert!(change["SizeBytes"].is_number(), "{file}");
        assert_eq!(change["StreamViewType"], "NEW_IMAGE", "{file}");
        match record["eventName"].as_str().unwrap() {
            "INSERT" => assert!(change["NewImage"].is_object(), "{file}"),
            "REMOVE" => {
                assert_eq!(record["userIdentity"]["type"], "Service", "{file}");
                assert_eq!(
                    record["userIdentity"]["principalId"], "dynamodb.amazonaws.com",
                    "{file}"
                );
            }
            other => panic!("{file}: unexpected eventName {other}"),
        }
    }
}
