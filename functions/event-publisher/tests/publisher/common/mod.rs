//! Items, stream records and a publisher of the tests: versions of products of the example model
//! (`PRODUCT#t1` / `<code>`), data-table stream records as Lambda delivers them.
#![allow(dead_code)]

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use cqrs_event_publisher::{MemoryParking, Publisher, Recorder};
use cqrs_events::Feed;
use cqrs_item::{Item, Value};

/// The feed of the example model, source `urn:cqrs:shop`.
pub fn feed() -> Feed {
    Feed::new(cqrs_model::Model::example(), "urn:cqrs:shop")
}

/// Version `v` of product `code` as the history table holds it (`sk` `code@v`).
pub fn product(code: &str, v: i64) -> Item {
    let mut item = Item::example();
    item.pk = "PRODUCT#t1".into();
    item.sk = cqrs_keys::add_sort_key_version(code, v);
    item.id = cqrs_keys::generate_id(&item.pk, code);
    item.code = code.into();
    item.version = v;
    item.entity = Some("product".into());
    item.attributes.clear();
    item.attributes
        .insert("productId".into(), Value::from(code));
    item.attributes
        .insert("category".into(), Value::from("coffee"));
    item.attributes
        .insert("priceCents".into(), Value::from(100 * v));
    item.updated_at = format!("2026-01-01T00:00:{:02}.000Z", v % 60);
    item
}

/// `item` in the data table's form.
pub fn data(item: &Item) -> Item {
    item.clone().into_data_item()
}

/// DynamoDB JSON of `item`'s attributes, as a stream image.
pub fn image(item: &Item) -> String {
    let image: serde_dynamo::Item = item.to_attributes().unwrap().into();
    serde_json::to_string(&image).unwrap()
}

/// A data-table stream record `name` with these images (data table form), sequence number `seq`
/// (21 digits). `keyed` gives the keys when both images are absent.
pub fn record(name: &str, old: Option<&Item>, new: Option<&Item>, seq: u64) -> EventRecord {
    let keyed = new.or(old).expect("a record has an image");
    let mut change = format!(
        r#""Keys":{{"pk":{{"S":{pk}}},"sk":{{"S":{sk}}}}},"SequenceNumber":"{seq:021}","SizeBytes":100,"StreamViewType":"NEW_AND_OLD_IMAGES","ApproximateCreationDateTime":1767225600"#,
        pk = serde_json::to_string(&keyed.pk).unwrap(),
        sk = serde_json::to_string(&keyed.sk).unwrap(),
    );
    if let Some(old) = old {
        change.push_str(&format!(r#","OldImage":{}"#, image(old)));
    }
    if let Some(new) = new {
        change.push_str(&format!(r#","NewImage":{}"#, image(new)));
    }
    let text = format!(
        r#"{{"Records":[{{"eventID":"e{seq}","eventName":"{name}","eventVersion":"1.1","eventSource":"aws:dynamodb","awsRegion":"ddblocal","dynamodb":{{{change}}}}}]}}"#
    );
    let mut event: Event = serde_json::from_str(&text).unwrap();
    event.records.remove(0)
}

/// The INSERT of version 1 of `code`, sequence number `seq`.
pub fn insert(code: &str, seq: u64) -> EventRecord {
    record("INSERT", None, Some(&data(&product(code, 1))), seq)
}

/// The MODIFY of `code` from version `from` to `to`, sequence number `seq`.
pub fn modify(code: &str, from: i64, to: i64, seq: u64) -> EventRecord {
    record(
        "MODIFY",
        Some(&data(&product(code, from))),
        Some(&data(&product(code, to))),
        seq,
    )
}

/// A batch of `records`.
pub fn batch(records: Vec<EventRecord>) -> Event {
    let mut event = Event::default();
    event.records = records;
    event
}

/// The sequence number `seq` as the records carry it.
pub fn seq(seq: u64) -> String {
    format!("{seq:021}")
}

/// A publisher over `history` publishing to a fresh recorder and parking in memory.
pub fn publisher(history: Vec<Item>) -> (Publisher, Recorder, MemoryParking) {
    let recorder = Recorder::new();
    let parking = MemoryParking::new();
    let publisher = Publisher::new(feed(), history, recorder.clone(), parking.clone());
    (publisher, recorder, parking)
}

/// The reported sequence numbers of a response.
pub fn reported(
    response: &aws_lambda_events::event::streams::DynamoDbEventResponse,
) -> Vec<String> {
    response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.clone().unwrap_or_default())
        .collect()
}

/// The id of version `v` of product `code`.
pub fn id(code: &str, v: i64) -> String {
    cqrs_events::event_id("PRODUCT#t1", code, v)
}

/// The message group of product `code`.
pub fn group(code: &str) -> String {
    cqrs_keys::member_token("PRODUCT#t1", code)
}
