//! Change events: every change of an item of a model entity, as one CloudEvents 1.0 event (structured
//! JSON mode) per item version.
//!
//! This crate is the core of the change feed (issue 39, item 1): it turns the data table's stream
//! records (`NEW_AND_OLD_IMAGES`) into [`ChangeEvent`]s ([`events_from_batch`]), filling the
//! versions data-sync collapsed into one data write from the history table with consistent reads
//! ([`HistoryReader`]), so a consumer sees every `(pk, sk, version)`. Delivery (queues, consumers)
//! is not here.
//!
//! An event:
//!
//! ```json
//! {
//!   "specversion": "1.0",
//!   "id": "<22 chars: base64url(SHA-256(pk 0x00 sk 0x00 version))>",
//!   "source": "urn:cqrs:shop",
//!   "type": "product.updated",
//!   "subject": "PRODUCT#t1/P001",
//!   "time": "2026-01-01T00:00:00.000Z",
//!   "datacontenttype": "application/json",
//!   "dataschema": "urn:cqrs:events:product:<model revision>",
//!   "tenant": "t1", "entity": "product", "itemversion": 2,
//!   "data": {"pk": "PRODUCT#t1", "sk": "P001", "version": 2, "previousVersion": 1,
//!            "state": {"pk": "PRODUCT#t1", "sk": "P001", "...": "..."}, "changed": ["price"]}
//! }
//! ```
//!
//! The rules ([`Feed::version_event`], [`Feed::ttl_event`]):
//!
//! - **type**: `<entity>.deleted` for a version with `isDeleted` true (`removal: "soft"`) and for
//!   a TTL removal of the data row (`removal: "ttl"`: a stream `REMOVE` whose `userIdentity` is
//!   the DynamoDB service, [`is_ttl_removal`]); `<entity>.created` for a version with no previous
//!   version (version 1); `<entity>.updated` otherwise, a restore (`isDeleted` true, then false)
//!   included.
//! - **id**: [`event_id`], a function of `(pk, sk, version)` alone, the same for every delivery
//!   of one version: consumers deduplicate by it, across batches and replays. A TTL removal is a
//!   second event of the item's last version, so its id is [`ttl_removal_id`] (the same digest
//!   with a `ttl` marker), never the id of that version's own event.
//! - **time**: the version's `updatedAt` (RFC 3339); for a TTL removal, when the stream saw the
//!   removal (the record's `ApproximateCreationDateTime`).
//! - **data**: `pk`, `sk` (the data table's, without version), `version`, `previousVersion`
//!   (`null` on created), `state` (the version as `GET /items/{pk}/{sk}` answers it: the data
//!   table's form of the item), `changed` ([`changed`]: the names inside `attributes` whose value
//!   differs from the previous version's; every present one on created, none on a TTL removal).
//! - **stateref**: an event too big for its transport goes as a *reference event*
//!   ([`ChangeEvent::into_reference`]): no `data.state`, extension `stateref: "history"`; the
//!   framework's consumers read the state from the history table. Other events have no
//!   `stateref` member.
//! - **Never leaves** ([`Feed::entity_of`]): an item whose `entity` attribute names no entity of
//!   the model (or that has none), and the framework's own rows in the data table
//!   ([`framework_row`]): the reserved partitions of [`cqrs_keys::RESERVED_PK_PREFIXES`] (the
//!   change log, heads), change log entries of older releases, TTL policies (`MASTER#…` /
//!   `TTL#…`).
//!
//! ```
//! use cqrs_events::{Feed, event_id};
//!
//! let feed = Feed::new(cqrs_model::Model::example(), "urn:cqrs:shop");
//! let mut item = cqrs_item::Item::example().into_data_item();
//! item.entity = Some("product".into());
//! let event = feed.version_event(&item, None, chrono::Utc::now()).unwrap();
//! assert_eq!(event.event_type, "product.created");
//! assert_eq!(event.id, event_id("PRODUCT#t1", "P001", 1));
//! let json = serde_json::to_value(&event).unwrap();
//! assert_eq!(json["specversion"], "1.0");
//! assert_eq!(json["data"]["previousVersion"], serde_json::Value::Null);
//! assert_eq!(json["data"]["changed"], serde_json::json!(["price", "tags"]));
//! ```
#![forbid(unsafe_code)]
#![cfg_attr(
    not(test),
    warn(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

pub mod feed;
pub mod history;

use chrono::{DateTime, SecondsFormat, Utc};
use cqrs_item::{Item, Map};
use cqrs_model::{Entity, Model};
use serde::{Deserialize, Serialize};

pub use feed::{Batch, FeedError, Gaps, RecordFailure, events_from_batch, events_from_batch_with};
pub use history::{HistoryKey, HistoryReader};

/// The CloudEvents version of every event.
///
/// ```
/// assert_eq!(cqrs_events::SPEC_VERSION, "1.0");
/// ```
pub const SPEC_VERSION: &str = "1.0";

/// The media type of every event's `data`.
///
/// ```
/// assert_eq!(cqrs_events::DATA_CONTENT_TYPE, "application/json");
/// ```
pub const DATA_CONTENT_TYPE: &str = "application/json";

/// The environment variable naming the service's `source` URI ([`Feed::from_env`]).
///
/// ```
/// assert_eq!(cqrs_events::SOURCE_ENV, "CQRS_EVENT_SOURCE");
/// ```
pub const SOURCE_ENV: &str = "CQRS_EVENT_SOURCE";

/// The `source` when [`SOURCE_ENV`] is unset or empty.
///
/// ```
/// assert_eq!(cqrs_events::DEFAULT_SOURCE, "urn:cqrs:service");
/// ```
pub const DEFAULT_SOURCE: &str = "urn:cqrs:service";

/// The `userIdentity.principalId` of a stream record written by DynamoDB's TTL (with
/// `userIdentity.type` [`TTL_IDENTITY_TYPE`]).
///
/// ```
/// assert_eq!(cqrs_events::TTL_PRINCIPAL, "dynamodb.amazonaws.com");
/// ```
pub const TTL_PRINCIPAL: &str = "dynamodb.amazonaws.com";

/// The `userIdentity.type` of a stream record written by DynamoDB's TTL.
///
/// ```
/// assert_eq!(cqrs_events::TTL_IDENTITY_TYPE, "Service");
/// ```
pub const TTL_IDENTITY_TYPE: &str = "Service";

/// How many characters of the base64url SHA-256 digest an event id keeps (132 bits).
///
/// ```
/// assert_eq!(cqrs_events::ID_CHARS, 22);
/// ```
pub const ID_CHARS: usize = 22;

/// The id of the event of version `version` of the item `pk` / `sk` (the data table's `sk`, no
/// version): the first [`ID_CHARS`] characters of the base64url (no padding) SHA-256 of `pk`, a
/// NUL byte, `sk`, a NUL byte and the version in decimal. Deterministic: every delivery of one
/// version has this id, which is what consumers deduplicate by across batches.
///
/// ```
/// use cqrs_events::event_id;
/// let id = event_id("PRODUCT#t1", "P001", 3);
/// assert_eq!(id.len(), 22);
/// assert_eq!(id, event_id("PRODUCT#t1", "P001", 3));
/// assert_ne!(id, event_id("PRODUCT#t1", "P001", 4));
/// // The NUL separators keep ("a#b", "c") and ("a", "b#c") apart.
/// assert_ne!(event_id("a#b", "c", 1), event_id("a", "b#c", 1));
/// ```
pub fn event_id(pk: &str, sk: &str, version: i64) -> String {
    digest(&[pk, sk, &version.to_string()])
}

/// The id of the event of the TTL removal of the item `pk` / `sk` whose last version was
/// `version`: [`event_id`]'s digest with a fourth part, `ttl`. The removal is a second event of
/// that version, so it must not share the version's own id (a consumer would drop it as a
/// duplicate); it is as deterministic.
///
/// ```
/// use cqrs_events::{event_id, ttl_removal_id};
/// let id = ttl_removal_id("PRODUCT#t1", "P001", 3);
/// assert_eq!(id.len(), 22);
/// assert_ne!(id, event_id("PRODUCT#t1", "P001", 3));
/// ```
pub fn ttl_removal_id(pk: &str, sk: &str, version: i64) -> String {
    digest(&[pk, sk, &version.to_string(), "ttl"])
}

/// The first [`ID_CHARS`] characters of the base64url SHA-256 of `parts` joined by NUL bytes.
fn digest(parts: &[&str]) -> String {
    use base64::Engine as _;
    use sha2::Digest as _;
    let mut hasher = sha2::Sha256::new();
    for (at, part) in parts.iter().enumerate() {
        if at > 0 {
            hasher.update([0u8]);
        }
        hasher.update(part.as_bytes());
    }
    let mut text = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(hasher.finalize());
    text.truncate(ID_CHARS);
    text
}

/// The `dataschema` of the events of `entity`: the `$id` of that entity event's JSON Schema
/// (`cqrs model events --schema <entity>`), `urn:cqrs:events:<entity>:<model revision>`.
///
/// ```
/// let model = cqrs_model::Model::example();
/// let uri = cqrs_events::dataschema(&model, "product");
/// assert_eq!(uri, format!("urn:cqrs:events:product:{}", model.revision()));
/// ```
pub fn dataschema(model: &Model, entity: &str) -> String {
    format!("urn:cqrs:events:{entity}:{}", model.revision())
}

/// The kind of change an event tells (the part of `type` after the entity).
///
/// ```
/// assert_eq!(cqrs_events::Kind::Deleted.as_str(), "deleted");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The first version (no previous version).
    Created,
    /// A live version after another (a restore too).
    Updated,
    /// A soft-deleted version, or the TTL removal of the item.
    Deleted,
}

impl Kind {
    /// `created`, `updated` or `deleted`.
    ///
    /// ```
    /// assert_eq!(cqrs_events::Kind::Created.as_str(), "created");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Created => "created",
            Kind::Updated => "updated",
            Kind::Deleted => "deleted",
        }
    }
}

/// How a deleted item went: the `removal` extension attribute of a `<entity>.deleted` event.
///
/// ```
/// assert_eq!(serde_json::to_value(cqrs_events::Removal::Ttl).unwrap(), "ttl");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Removal {
    /// A version with `isDeleted` true.
    Soft,
    /// DynamoDB's TTL removed the data row.
    Ttl,
}

/// The kind and removal of `version` after `previous` (`None`: no previous version): deleted
/// (soft) when it is soft-deleted, created when it has no previous version, updated otherwise (a
/// restore included).
///
/// ```
/// use cqrs_events::{Kind, Removal, kind_of};
/// let mut item = cqrs_item::Item::example();
/// assert_eq!(kind_of(&item, None), (Kind::Created, None));
/// let previous = item.clone();
/// item.version = 2;
/// assert_eq!(kind_of(&item, Some(&previous)), (Kind::Updated, None));
/// item.is_deleted = true;
/// assert_eq!(kind_of(&item, Some(&previous)), (Kind::Deleted, Some(Removal::Soft)));
/// // A restore is an update.
/// let deleted = item.clone();
/// item.version = 3;
/// item.is_deleted = false;
/// assert_eq!(kind_of(&item, Some(&deleted)), (Kind::Updated, None));
/// ```
pub fn kind_of(version: &Item, previous: Option<&Item>) -> (Kind, Option<Removal>) {
    if version.is_deleted {
        (Kind::Deleted, Some(Removal::Soft))
    } else if previous.is_none() {
        (Kind::Created, None)
    } else {
        (Kind::Updated, None)
    }
}

/// The names inside `attributes` whose value differs between `previous` (`None`: no previous
/// version, every present name counts) and `current`, an attribute present in only one of them
/// included; sorted. Numbers compare by value ([`cqrs_item::Number`]).
///
/// ```
/// use cqrs_item::{Map, Value};
/// let mut old = Map::new();
/// old.insert("status".into(), Value::from("open"));
/// old.insert("price".into(), Value::from(10));
/// old.insert("note".into(), Value::from("x"));
/// let mut new = old.clone();
/// new.insert("status".into(), Value::from("done"));
/// new.remove("note");
/// new.insert("dueDay".into(), Value::from("2026-01-02"));
/// assert_eq!(cqrs_events::changed(Some(&old), &new), ["dueDay", "note", "status"]);
/// assert_eq!(cqrs_events::changed(None, &new), ["dueDay", "price", "status"]);
/// assert!(cqrs_events::changed(Some(&new), &new).is_empty());
/// ```
pub fn changed(previous: Option<&Map>, current: &Map) -> Vec<String> {
    let Some(previous) = previous else {
        return current.keys().cloned().collect();
    };
    let mut names: Vec<String> = current
        .iter()
        .filter(|(name, value)| previous.get(*name) != Some(*value))
        .map(|(name, _)| name.clone())
        .chain(
            previous
                .keys()
                .filter(|name| !current.contains_key(*name))
                .cloned(),
        )
        .collect();
    names.sort();
    names
}

/// Why the row `item` of the data table is the framework's own, never an event: `None` for any
/// other row. The framework's rows are those under a reserved partition prefix
/// ([`cqrs_keys::reserved_prefix`]: the change log `CQRS_CHANGE_LOG`, heads `HEAD`/`HEADS`), the
/// change log entries older releases wrote under `LOG#` ([`cqrs_store::change_log::is_entry`]),
/// and the TTL policies the command handler reads (`MASTER#<tenant>` / `TTL#<table>`, even when
/// the model declares an entity for them).
///
/// ```
/// let mut item = cqrs_item::Item::example();
/// assert_eq!(cqrs_events::framework_row(&item), None);
/// item.pk = "CQRS_CHANGE_LOG#t1#2026-01".into();
/// assert!(cqrs_events::framework_row(&item).is_some());
/// item.pk = "MASTER#t1".into();
/// item.sk = "TTL#order".into();
/// assert_eq!(cqrs_events::framework_row(&item), Some("a TTL policy"));
/// ```
pub fn framework_row(item: &Item) -> Option<&'static str> {
    if cqrs_keys::reserved_prefix(&item.pk).is_some() {
        return Some("a reserved partition of the framework");
    }
    if cqrs_store::change_log::is_entry(item) {
        return Some("a change log entry");
    }
    if cqrs_keys::is_ttl_policy_key(&item.pk, item.base_sk()) {
        return Some("a TTL policy");
    }
    None
}

/// Whether `record` is DynamoDB's TTL removing a row: a `REMOVE` whose `userIdentity` is the
/// DynamoDB service ([`TTL_IDENTITY_TYPE`], [`TTL_PRINCIPAL`]).
///
/// ```
/// let event: aws_lambda_events::event::dynamodb::Event = serde_json::from_str(
///     r#"{"Records":[{"eventID":"1","eventName":"REMOVE","awsRegion":"r",
///        "userIdentity":{"type":"Service","principalId":"dynamodb.amazonaws.com"},
///        "dynamodb":{"SizeBytes":1}}]}"#,
/// ).unwrap();
/// assert!(cqrs_events::is_ttl_removal(&event.records[0]));
/// ```
pub fn is_ttl_removal(record: &aws_lambda_events::event::dynamodb::EventRecord) -> bool {
    record.event_name == "REMOVE"
        && record
            .user_identity
            .as_ref()
            .is_some_and(|who| who.type_ == TTL_IDENTITY_TYPE && who.principal_id == TTL_PRINCIPAL)
}

/// One change event: CloudEvents 1.0 in structured JSON mode (the whole event is the message
/// body), with the extension attributes `tenant`, `entity`, `itemversion` and, on deleted events,
/// `removal`. Serialises to exactly the JSON of the [crate docs](crate) (numbers inside `state`
/// verbatim).
///
/// ```
/// let feed = cqrs_events::Feed::new(cqrs_model::Model::example(), "urn:cqrs:shop");
/// let mut item = cqrs_item::Item::example().into_data_item();
/// item.entity = Some("product".into());
/// let event = feed.version_event(&item, None, chrono::Utc::now()).unwrap();
/// let text = serde_json::to_string(&event).unwrap();
/// let back: cqrs_events::ChangeEvent = serde_json::from_str(&text).unwrap();
/// assert_eq!(back, event);
/// assert!(!text.contains("removal"));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChangeEvent {
    /// Always [`SPEC_VERSION`].
    pub specversion: String,
    /// [`event_id`] (or [`ttl_removal_id`]).
    pub id: String,
    /// The service ([`Feed::source`]).
    pub source: String,
    /// `<entity>.created`, `<entity>.updated` or `<entity>.deleted`.
    #[serde(rename = "type")]
    pub event_type: String,
    /// `<pk>/<sk>` (the data table's `sk`, no version).
    pub subject: String,
    /// RFC 3339: the version's `updatedAt`, or when a TTL removal was seen.
    pub time: String,
    /// Always [`DATA_CONTENT_TYPE`].
    pub datacontenttype: String,
    /// [`dataschema`] of the entity.
    pub dataschema: String,
    /// Extension: the item's tenant (`tenantCode`).
    pub tenant: String,
    /// Extension: the item's entity.
    pub entity: String,
    /// Extension: the item version (`data.version`).
    pub itemversion: i64,
    /// Extension, on deleted events only: how the item went.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removal: Option<Removal>,
    /// Extension, on a reference event only ([`ChangeEvent::into_reference`]): where the
    /// version's state is to be read, [`STATEREF_HISTORY`]; `data.state` is absent then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stateref: Option<String>,
    /// The version.
    pub data: EventData,
}

/// The `stateref` of a reference event: the state is the item's version in the history table
/// (`pk`, `sk@version`), read with [`HistoryReader`].
///
/// ```
/// assert_eq!(cqrs_events::STATEREF_HISTORY, "history");
/// ```
pub const STATEREF_HISTORY: &str = "history";

impl ChangeEvent {
    /// The kind of change, from `type`; `None` when `type` is none of the three.
    ///
    /// ```
    /// let feed = cqrs_events::Feed::new(cqrs_model::Model::example(), "urn:cqrs:shop");
    /// let mut item = cqrs_item::Item::example().into_data_item();
    /// item.entity = Some("product".into());
    /// let event = feed.version_event(&item, None, chrono::Utc::now()).unwrap();
    /// assert_eq!(event.kind(), Some(cqrs_events::Kind::Created));
    /// ```
    pub fn kind(&self) -> Option<Kind> {
        match self.event_type.rsplit_once('.').map(|(_, kind)| kind) {
            Some("created") => Some(Kind::Created),
            Some("updated") => Some(Kind::Updated),
            Some("deleted") => Some(Kind::Deleted),
            _ => None,
        }
    }

    /// The event without its state: `data.state` absent and the extension `stateref`
    /// [`STATEREF_HISTORY`], for a transport whose message size the whole event exceeds (an item
    /// may hold 400 KB, an SNS message 256 KiB). Everything else, the id included, is unchanged;
    /// the framework's consumers read the state back from the history table before a handler
    /// sees the event.
    ///
    /// ```
    /// let feed = cqrs_events::Feed::new(cqrs_model::Model::example(), "urn:cqrs:shop");
    /// let mut item = cqrs_item::Item::example().into_data_item();
    /// item.entity = Some("product".into());
    /// let event = feed.version_event(&item, None, chrono::Utc::now()).unwrap();
    /// let reference = event.clone().into_reference();
    /// assert_eq!(reference.id, event.id);
    /// let json = serde_json::to_value(&reference).unwrap();
    /// assert_eq!(json["stateref"], "history");
    /// assert!(json["data"].get("state").is_none());
    /// // A normal event has no stateref member at all.
    /// assert!(serde_json::to_value(&event).unwrap().get("stateref").is_none());
    /// ```
    pub fn into_reference(mut self) -> ChangeEvent {
        self.data.state = None;
        self.stateref = Some(STATEREF_HISTORY.to_string());
        self
    }
}

/// The `data` of a [`ChangeEvent`]: the version, the one it replaces, its state and what changed.
///
/// ```
/// let data: cqrs_events::EventData = serde_json::from_value(serde_json::json!({
///     "pk": "PRODUCT#t1", "sk": "P001", "version": 2, "previousVersion": 1,
///     "state": serde_json::to_value(cqrs_item::Item::example()).unwrap(),
///     "changed": ["price"]
/// })).unwrap();
/// assert_eq!(data.previous_version, Some(1));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventData {
    /// The item's partition key.
    pub pk: String,
    /// The item's sort key in the data table (no version).
    pub sk: String,
    /// The version.
    pub version: i64,
    /// The version this one replaces; `null` on created.
    pub previous_version: Option<i64>,
    /// The version as `GET /items/{pk}/{sk}` answers it (the data table's form; for a TTL
    /// removal, the last state). Always present, except in a reference event
    /// ([`ChangeEvent::into_reference`], `stateref` set), whose JSON has no `state` member.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<Item>,
    /// The attribute names whose value changed ([`changed`]).
    pub changed: Vec<String>,
}

/// What the feed needs to build events: the model (which items are entities, and the schemas'
/// revision) and the service's `source` URI.
///
/// ```
/// let feed = cqrs_events::Feed::new(cqrs_model::Model::example(), "urn:cqrs:shop");
/// assert_eq!(feed.source(), "urn:cqrs:shop");
/// ```
#[derive(Debug, Clone)]
pub struct Feed {
    model: Model,
    source: String,
}

impl Feed {
    /// A feed of `model`'s entities, events naming `source`.
    ///
    /// ```
    /// let feed = cqrs_events::Feed::new(cqrs_model::Model::example(), "urn:cqrs:shop");
    /// assert!(feed.model().entity("product").is_some());
    /// ```
    pub fn new(model: Model, source: impl Into<String>) -> Self {
        Feed {
            model,
            source: source.into(),
        }
    }

    /// A feed of `model`'s entities whose `source` is [`SOURCE_ENV`], or [`DEFAULT_SOURCE`] when
    /// it is unset or empty.
    ///
    /// ```
    /// let feed = cqrs_events::Feed::from_lookup(cqrs_model::Model::example(), |_| None);
    /// assert_eq!(feed.source(), cqrs_events::DEFAULT_SOURCE);
    /// ```
    pub fn from_env(model: Model) -> Self {
        Self::from_lookup(model, |name| std::env::var(name).ok())
    }

    /// [`Feed::from_env`] with the variables read through `lookup`.
    ///
    /// ```
    /// let feed = cqrs_events::Feed::from_lookup(cqrs_model::Model::example(), |name| {
    ///     (name == "CQRS_EVENT_SOURCE").then(|| "urn:cqrs:shop".to_string())
    /// });
    /// assert_eq!(feed.source(), "urn:cqrs:shop");
    /// ```
    pub fn from_lookup(model: Model, lookup: impl Fn(&str) -> Option<String>) -> Self {
        let source = lookup(SOURCE_ENV)
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| DEFAULT_SOURCE.to_string());
        Feed::new(model, source)
    }

    /// The service's `source` URI.
    ///
    /// ```
    /// let feed = cqrs_events::Feed::new(cqrs_model::Model::example(), "urn:cqrs:x");
    /// assert_eq!(feed.source(), "urn:cqrs:x");
    /// ```
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The model.
    ///
    /// ```
    /// let feed = cqrs_events::Feed::new(cqrs_model::Model::example(), "urn:cqrs:x");
    /// assert!(!feed.model().entities().is_empty());
    /// ```
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The entity whose events `item` makes: the model's entity its `entity` attribute names;
    /// `None` (the item never leaves) when it names none, names one the model does not have, or
    /// the row is the framework's own ([`framework_row`]).
    ///
    /// ```
    /// let feed = cqrs_events::Feed::new(cqrs_model::Model::example(), "urn:cqrs:x");
    /// let mut item = cqrs_item::Item::example();
    /// assert!(feed.entity_of(&item).is_none(), "no entity attribute");
    /// item.entity = Some("product".into());
    /// assert_eq!(feed.entity_of(&item).unwrap().name, "product");
    /// item.entity = Some("gone".into());
    /// assert!(feed.entity_of(&item).is_none());
    /// ```
    pub fn entity_of(&self, item: &Item) -> Option<&Entity> {
        if framework_row(item).is_some() {
            return None;
        }
        self.model.entity(item.entity.as_deref()?)
    }

    /// The event of `version` (of the data or the history table: a history row is turned into the
    /// data table's form), after `previous` (`None`: it has no previous version). `observed` is
    /// the `time` when the version's `updatedAt` is not an RFC 3339 time. `None` when the item
    /// never leaves ([`Feed::entity_of`]).
    ///
    /// ```
    /// let feed = cqrs_events::Feed::new(cqrs_model::Model::example(), "urn:cqrs:shop");
    /// let mut first = cqrs_item::Item::example(); // history form: sk P001@1
    /// first.entity = Some("product".into());
    /// let mut second = first.clone();
    /// second.version = 2;
    /// second.sk = "P001@2".into();
    /// second.attributes.insert("price".into(), cqrs_item::Value::from(1300));
    /// let event = feed.version_event(&second, Some(&first), chrono::Utc::now()).unwrap();
    /// assert_eq!(event.event_type, "product.updated");
    /// assert_eq!(event.subject, "PRODUCT#t1/P001");
    /// assert_eq!((event.data.version, event.data.previous_version), (2, Some(1)));
    /// assert_eq!(event.data.changed, ["price"]);
    /// let state = event.data.state.as_ref().unwrap();
    /// assert_eq!(state.sk, "P001");
    /// assert_eq!(state.csk.as_deref(), Some("P001@2"));
    /// ```
    pub fn version_event(
        &self,
        version: &Item,
        previous: Option<&Item>,
        observed: DateTime<Utc>,
    ) -> Option<ChangeEvent> {
        let entity = self.entity_of(version)?;
        let state = data_form(version);
        let (kind, removal) = kind_of(&state, previous);
        let changed = changed(previous.map(|p| &p.attributes), &state.attributes);
        let time = rfc3339(&state.updated_at).unwrap_or_else(|| format_time(observed));
        Some(self.event(
            entity,
            event_id(&state.pk, &state.sk, state.version),
            kind,
            removal,
            time,
            previous.map(|p| p.version),
            changed,
            state,
        ))
    }

    /// The event of DynamoDB's TTL removing the item whose last state is `last`, seen at
    /// `removed_at`: `<entity>.deleted`, `removal: "ttl"`, the last version and state, nothing
    /// changed, id [`ttl_removal_id`]. `None` when the item never leaves.
    ///
    /// ```
    /// let feed = cqrs_events::Feed::new(cqrs_model::Model::example(), "urn:cqrs:shop");
    /// let mut last = cqrs_item::Item::example().into_data_item();
    /// last.entity = Some("product".into());
    /// let event = feed.ttl_event(&last, chrono::Utc::now()).unwrap();
    /// assert_eq!(event.event_type, "product.deleted");
    /// assert_eq!(event.removal, Some(cqrs_events::Removal::Ttl));
    /// assert!(event.data.changed.is_empty());
    /// assert_eq!(event.id, cqrs_events::ttl_removal_id("PRODUCT#t1", "P001", 1));
    /// ```
    pub fn ttl_event(&self, last: &Item, removed_at: DateTime<Utc>) -> Option<ChangeEvent> {
        let entity = self.entity_of(last)?;
        let state = data_form(last);
        Some(self.event(
            entity,
            ttl_removal_id(&state.pk, &state.sk, state.version),
            Kind::Deleted,
            Some(Removal::Ttl),
            format_time(removed_at),
            (state.version > 1).then(|| state.version - 1),
            Vec::new(),
            state,
        ))
    }

    #[allow(clippy::too_many_arguments)]
    fn event(
        &self,
        entity: &Entity,
        id: String,
        kind: Kind,
        removal: Option<Removal>,
        time: String,
        previous_version: Option<i64>,
        changed: Vec<String>,
        state: Item,
    ) -> ChangeEvent {
        ChangeEvent {
            specversion: SPEC_VERSION.to_string(),
            id,
            source: self.source.clone(),
            event_type: format!("{}.{}", entity.name, kind.as_str()),
            subject: format!("{}/{}", state.pk, state.sk),
            time,
            datacontenttype: DATA_CONTENT_TYPE.to_string(),
            dataschema: dataschema(&self.model, &entity.name),
            tenant: state.tenant_code.clone(),
            entity: entity.name.clone(),
            itemversion: state.version,
            removal,
            stateref: None,
            data: EventData {
                pk: state.pk.clone(),
                sk: state.sk.clone(),
                version: state.version,
                previous_version,
                changed,
                state: Some(state),
            },
        }
    }
}

/// The data table's form of `item`: as it is when its `sk` has no version, else
/// [`Item::into_data_item`] (what data-sync writes for a command or history row).
fn data_form(item: &Item) -> Item {
    if item.base_sk() == item.sk {
        item.clone()
    } else {
        item.clone().into_data_item()
    }
}

/// `text` when it is an RFC 3339 time.
fn rfc3339(text: &str) -> Option<String> {
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|_| text.to_string())
}

/// `at` in RFC 3339, milliseconds, UTC (`Z`), as the items' own times are written.
fn format_time(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}
