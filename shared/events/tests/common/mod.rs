//! Items and stream records of the tests: versions of one product (`PRODUCT#t1` / `P001`) of the
//! example model, and data-table stream records as Lambda delivers them.
#![allow(dead_code)]

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use cqrs_events::Feed;
use cqrs_item::{Item, Value};

/// The feed of the example model, source `urn:cqrs:shop`.
pub fn feed() -> Feed {
    Feed::new(cqrs_model::Model::example(), "urn:cqrs:shop")
}

/// Version `v` of product `code` as the history table holds it (`sk` `code@v`): `priceCents`
/// 100 × v, `category` fixed, `updatedAt` second `v` of 2026.
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
    item.updated_at = format!("2026-01-01T00:00:{v:02}.000Z");
    item
}

/// `item` in the data table's form (`sk` without version, `cpk`/`csk`).
pub fn data(item: &Item) -> Item {
    item.clone().into_data_item()
}

/// DynamoDB JSON of `item`'s attributes, as a stream image.
pub fn image(item: &Item) -> String {
    let image: serde_dynamo::Item = item.to_attributes().unwrap().into();
    serde_json::to_string(&image).unwrap()
}

/// A data-table stream record `name` (`INSERT`, `MODIFY`, `REMOVE`) with these images (data
/// table form), sequence number `seq`; `ttl`: made by DynamoDB's TTL.
pub fn record(
    name: &str,
    old: Option<&Item>,
    new: Option<&Item>,
    seq: u64,
    ttl: bool,
) -> EventRecord {
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
    let identity = if ttl {
        r#","userIdentity":{"type":"Service","principalId":"dynamodb.amazonaws.com"}"#
    } else {
        ""
    };
    let text = format!(
        r#"{{"Records":[{{"eventID":"e{seq}","eventName":"{name}","eventVersion":"1.1","eventSource":"aws:dynamodb","awsRegion":"ddblocal"{identity},"dynamodb":{{{change}}}}}]}}"#
    );
    let mut event: Event = serde_json::from_str(&text).unwrap();
    event.records.remove(0)
}

/// `(version, type, previousVersion, changed)` of each event, to compare in one assertion.
pub fn summary(
    events: &[cqrs_events::ChangeEvent],
) -> Vec<(i64, String, Option<i64>, Vec<String>)> {
    events
        .iter()
        .map(|e| {
            (
                e.itemversion,
                e.event_type.clone(),
                e.data.previous_version,
                e.data.changed.clone(),
            )
        })
        .collect()
}

/// `(version, type, previousVersion, changed)` literal helper.
pub fn row(
    v: i64,
    ty: &str,
    previous: Option<i64>,
    changed: &[&str],
) -> (i64, String, Option<i64>, Vec<String>) {
    (
        v,
        ty.to_string(),
        previous,
        changed.iter().map(|s| s.to_string()).collect(),
    )
}
