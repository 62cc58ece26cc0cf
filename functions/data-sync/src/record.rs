//! Reading one stream record: what it asks of data-sync, and which item it belongs to.
//!
//! An `INSERT` carries a new version in its `NewImage`; the image must have the item shape
//! ([`cqrs_item::Item`]), a sort key `base@version` whose version is the `version` attribute, an
//! `id` of `pk#base`, and the record's `Keys`. Anything else is malformed: parked, never
//! projected. A well-formed version must also fit DynamoDB's limits in the tables it is projected
//! to ([`check_limits`]). `MODIFY` and `REMOVE` (e.g. TTL expiry) are acknowledged and ignored:
//! versions are immutable, and an expired command row does not retract the version from the data
//! or history table.

use aws_lambda_events::event::dynamodb::EventRecord;
use chrono::{DateTime, SecondsFormat, Utc};
use cqrs_item::{Item, MAX_ITEM_BYTES};
use cqrs_keys::{
    MAX_PARTITION_KEY_BYTES, MAX_SORT_KEY_BYTES, generate_id, parse_sort_key_version,
    remove_sort_key_version, tenant_code,
};
use cqrs_store::parked::ParkedRecord;
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
/// let key = cqrs_data_sync::record::item_key(&event.records[0]);
/// assert_eq!(key, Some(("P#t1".to_string(), "a".to_string())));
/// ```
pub fn item_key(record: &EventRecord) -> Option<ItemKey> {
    record_key(record).map(|(pk, sk)| (pk, remove_sort_key_version(&sk).to_string()))
}

/// The command row's key (`pk`, `sk` with version) from `Keys` or, failing that, the image.
fn record_key(record: &EventRecord) -> Option<(String, String)> {
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
    .find_map(|image| Some((string(image, "pk")?, string(image, "sk")?)))
}

/// What `record` asks for (see the [module docs](self)).
///
/// ```
/// use cqrs_data_sync::record::{Action, action};
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
    let item =
        Item::from_image(image.clone()).map_err(|e| format!("NewImage is not an item: {e}"))?;
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

/// Checks that the version `item` can be stored where data-sync projects it; the error says which
/// limit it is over. DynamoDB would refuse such a write every time (`ValidationException`), so the
/// record is parked instead of retried:
///
/// - `pk` and the version-free `sk` non-empty (the data table's keys);
/// - `pk` and `id` at most [`MAX_PARTITION_KEY_BYTES`] (`id` is the partition key of the history
///   table's `id-version-index`), `sk` at most [`MAX_SORT_KEY_BYTES`];
/// - the data-table form (with `cpk`/`csk`) at most [`MAX_ITEM_BYTES`];
/// - numbers and nesting within DynamoDB's limits ([`cqrs_item::check_limits`]).
///
/// ```
/// let mut item = cqrs_item::Item::example();
/// assert_eq!(cqrs_data_sync::record::check_limits(&item), Ok(()));
/// item.pk = format!("PRODUCT#{}", "t".repeat(2040));
/// item.id = cqrs_keys::generate_id(&item.pk, &item.sk);
/// assert!(cqrs_data_sync::record::check_limits(&item).unwrap_err().contains("id"));
/// ```
pub fn check_limits(item: &Item) -> Result<(), String> {
    if item.pk.is_empty() || item.base_sk().is_empty() {
        return Err(format!(
            "pk {:?} / sk {:?}: a key of the data table would be empty",
            item.pk, item.sk
        ));
    }
    let over = |name: &str, bytes: usize, max: usize| {
        format!("{name} is {bytes} bytes, over DynamoDB's {max}-byte key limit")
    };
    if item.pk.len() > MAX_PARTITION_KEY_BYTES {
        return Err(over("pk", item.pk.len(), MAX_PARTITION_KEY_BYTES));
    }
    if item.sk.len() > MAX_SORT_KEY_BYTES {
        return Err(over("sk", item.sk.len(), MAX_SORT_KEY_BYTES));
    }
    if item.id.len() > MAX_PARTITION_KEY_BYTES {
        return Err(over(
            "id (the history index's partition key)",
            item.id.len(),
            MAX_PARTITION_KEY_BYTES,
        ));
    }
    let size = item
        .stored_size()
        .map_err(|e| format!("the item cannot be converted: {e}"))?;
    if size > MAX_ITEM_BYTES {
        return Err(format!(
            "the data-table form is {size} bytes, over DynamoDB's {MAX_ITEM_BYTES}-byte item limit"
        ));
    }
    let attributes = item
        .to_attributes()
        .map_err(|e| format!("the item cannot be converted: {e}"))?;
    cqrs_item::check_limits(&attributes)
}

/// The parked-table entry of `record`, parked at `now` because of `reason` (of kind `kind`): what
/// the record says of its item (keys, tenant, version) as far as it says it, and the record
/// itself as Lambda delivered it.
///
/// ```
/// let event: aws_lambda_events::event::dynamodb::Event = serde_json::from_str(
///     r#"{"Records":[{"eventID":"1","eventName":"INSERT","awsRegion":"r",
///        "dynamodb":{"Keys":{"pk":{"S":"P#t1"},"sk":{"S":"a@3"}},"SequenceNumber":"7","SizeBytes":1}}]}"#,
/// ).unwrap();
/// let parked = cqrs_data_sync::record::parked(&event.records[0], "malformed", "no image", chrono::Utc::now());
/// assert_eq!((parked.pk(), parked.sk()), ("PARKED#t1".to_string(), "P#t1#a@7".to_string()));
/// assert_eq!(parked.version, Some(3));
/// assert!(parked.record.unwrap().contains("\"eventID\":\"1\""));
/// ```
pub fn parked(record: &EventRecord, kind: &str, reason: &str, now: DateTime<Utc>) -> ParkedRecord {
    let key = record_key(record);
    let version = key
        .as_ref()
        .and_then(|(_, sk)| parse_sort_key_version(sk).ok())
        .and_then(|(_, version)| version);
    ParkedRecord {
        tenant: key
            .as_ref()
            .and_then(|(pk, _)| tenant_code(pk))
            .map(str::to_string),
        item_id: key.as_ref().map(|(pk, sk)| generate_id(pk, sk)),
        item_pk: key.as_ref().map(|(pk, _)| pk.clone()),
        item_sk: key.map(|(_, sk)| sk),
        version,
        sequence_number: record.change.sequence_number.clone().unwrap_or_default(),
        event_id: record.event_id.clone(),
        event_name: record.event_name.clone(),
        reason_kind: kind.to_string(),
        reason: reason.to_string(),
        parked_at: now.to_rfc3339_opts(SecondsFormat::Millis, true),
        record: serde_json::to_string(record).ok(),
    }
}

/// The record's `ApproximateCreationDateTime`.
pub(crate) fn created(record: &EventRecord) -> DateTime<Utc> {
    record.change.approximate_creation_date_time
}
