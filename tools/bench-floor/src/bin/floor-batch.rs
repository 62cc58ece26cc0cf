//! `floor-batch`: the stream projection written by hand, the floor of data-sync's cold path. For
//! a batch of INSERT records it makes the DynamoDB calls data-sync makes: the history rows that
//! already exist (one strongly consistent `BatchGetItem`), the missing ones written (one
//! `BatchWriteItem`), then each item's newest version put into the data table on condition that
//! it is newer (`PutItem`). A record that fails is reported in `batchItemFailures`.

use aws_lambda_events::event::dynamodb::Event;
use aws_lambda_events::event::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes, PutRequest, WriteRequest};
use bench_floor::{dynamodb_client, var};
use lambda_runtime::{Error, LambdaEvent, service_fn};
use std::collections::{HashMap, HashSet};

type Attributes = HashMap<String, AttributeValue>;

struct Tables {
    data: String,
    history: String,
}

fn text<'a>(item: &'a Attributes, name: &str) -> &'a str {
    match item.get(name) {
        Some(AttributeValue::S(value)) => value,
        _ => "",
    }
}

fn key(item: &Attributes) -> Attributes {
    HashMap::from([
        ("pk".to_string(), AttributeValue::S(text(item, "pk").into())),
        ("sk".to_string(), AttributeValue::S(text(item, "sk").into())),
    ])
}

async fn project(
    client: &Client,
    tables: &Tables,
    event: Event,
) -> Result<DynamoDbEventResponse, Error> {
    let mut versions = Vec::new();
    for record in &event.records {
        let image: Attributes = record.change.new_image.clone().into();
        versions.push((record.change.sequence_number.clone(), image));
    }
    // History: what is there already, then the rest in one batch write.
    let keys = KeysAndAttributes::builder()
        .set_keys(Some(versions.iter().map(|(_, item)| key(item)).collect()))
        .consistent_read(true)
        .build()?;
    let found = client
        .batch_get_item()
        .request_items(&tables.history, keys)
        .send()
        .await?;
    let present: HashSet<(String, String)> = found
        .responses()
        .and_then(|r| r.get(&tables.history))
        .into_iter()
        .flatten()
        .map(|item| (text(item, "pk").to_string(), text(item, "sk").to_string()))
        .collect();
    let writes = versions
        .iter()
        .filter(|(_, item)| !present.contains(&(text(item, "pk").into(), text(item, "sk").into())))
        .map(|(_, item)| {
            Ok(WriteRequest::builder()
                .put_request(PutRequest::builder().set_item(Some(item.clone())).build()?)
                .build())
        })
        .collect::<Result<Vec<_>, Error>>()?;
    if !writes.is_empty() {
        client
            .batch_write_item()
            .request_items(&tables.history, writes)
            .send()
            .await?;
    }
    // Data: each version becomes the item's row (`sk` without `@version`), if newer.
    let mut failures = Vec::new();
    for (sequence, image) in versions {
        let command_sk = text(&image, "sk").to_string();
        let Some((base, _)) = command_sk.split_once('@') else {
            failures.push(sequence);
            continue;
        };
        let mut row = image.clone();
        row.insert("sk".into(), AttributeValue::S(base.into()));
        row.insert("cpk".into(), AttributeValue::S(text(&image, "pk").into()));
        row.insert("csk".into(), AttributeValue::S(command_sk.clone()));
        let version = image
            .get("version")
            .cloned()
            .unwrap_or(AttributeValue::N("0".into()));
        let put = client
            .put_item()
            .table_name(&tables.data)
            .set_item(Some(row))
            .condition_expression("attribute_not_exists(#pk) OR #version < :version")
            .expression_attribute_names("#pk", "pk")
            .expression_attribute_names("#version", "version")
            .expression_attribute_values(":version", version)
            .send()
            .await;
        if let Err(error) = put {
            let lost = error
                .as_service_error()
                .is_some_and(|e| e.is_conditional_check_failed_exception());
            if !lost {
                failures.push(sequence);
            }
        }
    }
    let mut response = DynamoDbEventResponse::default();
    for sequence in failures {
        let mut failure = DynamoDbBatchItemFailure::default();
        failure.item_identifier = sequence;
        response.batch_item_failures.push(failure);
    }
    Ok(response)
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let tables = Tables {
        data: var("DATA_TABLE")?,
        history: var("HISTORY_TABLE")?,
    };
    let client = dynamodb_client()?;
    let (client, tables) = (&client, &tables);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Event>| async move {
        project(client, tables, event.payload).await
    }))
    .await
}
