//! Reading one stream record: what it asks of data-sync, and which item it belongs to.
//!
//! An `INSERT` carries a new version in its `NewImage`; the image must have the item shape
//! ([`cqrs_item::Item`]), a sort key `base@version` whose version is the `version` attribute, an
//! `id` of `pk#base`, and the record's `Keys`. Anything else is malformed: reported, never
//! projected. `MODIFY` and `REMOVE` (e.g. TTL expiry) are acknowledged and ignored: versions are
//! immutable, and an expired command row does not retract the version from the data or history
//! table.

use aws_lambda_events::event::dynamodb::EventRecord;
use chrono::{DateTime, Utc};
use cqrs_item::Item;
use cqrs_keys::{generate_id, parse_sort_key_version, remove_sort_key_version};
use serde_dynamo::AttributeValue;

/// What a record asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Project this version (an `INSERT`).
    Project(Box<Item>),
    /// Acknowledge without writing (`MODIFY`, `REMOVE`); the event name, for the log.
    Ignore(String),
    /// Cannot be projected: why.
    Malformed(String),
}

/// The item a record belongs to: its `pk` and version-free `sk`. Records of one item are applied
/// in stream order.
pub type ItemKey = (String, String);

/// The key of the record's item, from `Keys` (present in every record) or, failing that, the image.
///
/// ```
/// let event: aws_lambda_events::event::dynamodb::Event = serde_json::from_str(
///     r#"{"Records":[{"eventID":"1","eventName":"INSERT","awsRegion":"r",
///        "dynamodb":{"Keys":{"pk":{"S":"P#t1"},"sk":{"S":"a@3"}},"SizeBytes":1}}]}"#,
/// ).unwrap();
/// let key = data_sync::record::item_key(&event.records[0]);
/// assert_eq!(key, Some(("P#t1".to_string(), "a".to_string())));
/// ```
pub fn item_key(record: &EventRecord) -> Option<ItemKey> {
    let string = |image: &serde_dynamo::Item, name: &str| match image.get(name) {
        Some(AttributeValue::S(s)) => Some(s.clone()),
        _ => None,
    };
    [
        &record.change.keys,
        &record.change.new_image,
        &record.change.old_image,
    ]
    .into_iter()
    .find_map(|image| {
        let pk = string(image, "pk")?;
        let sk = string(image, "sk")?;
        Some((pk, remove_sort_key_version(&sk).to_string()))
    })
}

/// What `record` asks for (see the [module docs](self)).
///
/// ```
/// use data_sync::record::{Action, action};
/// let event: aws_lambda_events::event::dynamodb::Event = serde_json::from_str(
///     r#"{"Records":[{"eventID":"1","eventName":"REMOVE","awsRegion":"r","dynamodb":{"SizeBytes":1}}]}"#,
/// ).unwrap();
/// assert_eq!(action(&event.records[0]), Action::Ignore("REMOVE".into()));
/// ```
pub fn action(record: &EventRecord) -> Action {
    match record.event_name.as_str() {
        "INSERT" => match parse_insert(record) {
            Ok(item) => Action::Project(Box::new(item)),
            Err(reason) => Action::Malformed(reason),
        },
        "MODIFY" | "REMOVE" => Action::Ignore(record.event_name.clone()),
        other => Action::Malformed(format!("unknown eventName {other:?}")),
    }
}

fn parse_insert(record: &EventRecord) -> Result<Item, String> {
    let image = &record.change.new_image;
    if image.is_empty() {
        return Err(
            "INSERT without NewImage (the stream view type must include new images)".into(),
        );
    }
    let item = Item::from_attributes(image.clone().into())
        .map_err(|e| format!("NewImage is not an item: {e}"))?;
    let version = match parse_sort_key_version(&item.sk) {
        Ok((_, Some(version))) => version,
        _ => return Err(format!("sk {:?} carries no version", item.sk)),
    };
    if version != item.version {
        return Err(format!(
            "sk {:?} names version {version} but the item's version is {}",
            item.sk, item.version
        ));
    }
    let id = generate_id(&item.pk, &item.sk);
    if item.id != id {
        return Err(format!("id {:?} is not {id:?}", item.id));
    }
    if let Some((pk, base)) = item_key(record)
        && (pk != item.pk || base != item.base_sk())
    {
        return Err(format!(
            "Keys {pk:?} / {base:?} do not match the image's {:?} / {:?}",
            item.pk, item.sk
        ));
    }
    Ok(item)
}

/// The record's `ApproximateCreationDateTime`.
pub(crate) fn created(record: &EventRecord) -> DateTime<Utc> {
    record.change.approximate_creation_date_time
}
