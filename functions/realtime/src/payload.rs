//! What a browser receives: the change event as JSON text, within the Event API's size limit.
//!
//! - An event is published whole (the CloudEvent the consumers get) when its text fits
//!   [`MAX_EVENT_BYTES`]; else as a reference ([`cqrs_events::ChangeEvent::into_reference`]:
//!   `data.state` left out, `stateref: "history"`), and the browser reads the version with
//!   `GET /items/{pk}/{sk}/versions/{version}`.
//! - The audit attributes ([`AUDIT_FIELDS`]) of the state are left out unless every subscriber of
//!   the channel may see them ([`keeps_audit`]): the HTTP API shows them only to the item's own
//!   tenant and a global `system_admin`, and a `common` channel is read by every tenant.

use cqrs_events::ChangeEvent;
use std::collections::BTreeMap;

use serde_json::value::{RawValue, to_raw_value};

/// The largest event text published: AppSync Events takes events of at most 240 KB
/// ("Events are designed to be lightweight and efficient, with a maximum size of 240 KB per
/// event", event-api-concepts). Counted as 240,000 bytes, the smaller reading of "KB".
///
/// ```
/// assert_eq!(cqrs_realtime::payload::MAX_EVENT_BYTES, 240_000);
/// ```
pub const MAX_EVENT_BYTES: usize = 240_000;

/// The state's attributes that say who wrote the item, from where and with which request (the
/// query handler's `AUDIT_FIELDS`).
///
/// ```
/// assert!(cqrs_realtime::payload::AUDIT_FIELDS.contains(&"updatedIp"));
/// ```
pub const AUDIT_FIELDS: [&str; 5] = [
    "createdBy",
    "createdIp",
    "updatedBy",
    "updatedIp",
    "requestId",
];

/// Whether the audit attributes may go to every subscriber of the tenant's channels: the item
/// belongs to `tenant` (the event's `tenant` is its partition key's tenant) and `tenant` is not
/// `common`. The subscribers of a tenant's channel are that tenant's callers and global
/// `system_admin`s, exactly who sees an item's audit attributes through the HTTP API.
///
/// ```
/// use cqrs_realtime::payload::keeps_audit;
/// assert!(keeps_audit("t1", "t1"));
/// assert!(!keeps_audit("common", "common"));
/// assert!(!keeps_audit("t1", "t2"));
/// ```
pub fn keeps_audit(channel_tenant: &str, event_tenant: &str) -> bool {
    channel_tenant == event_tenant && channel_tenant != cqrs_keys::TENANT_COMMON
}

/// The event's text as published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payload {
    /// The JSON text (one element of the publish request's `events`).
    pub text: String,
    /// Sent without `data.state` (too big whole).
    pub reference: bool,
}

/// Why an event cannot be published at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    /// Even without its state the event is over [`MAX_EVENT_BYTES`].
    #[error(
        "the event is {bytes} bytes even without its state (the Event API takes {MAX_EVENT_BYTES})"
    )]
    TooBig {
        /// The reference event's size.
        bytes: usize,
    },
    /// The event does not serialize (never for an event the feed built).
    #[error("the event does not serialize: {0}")]
    Json(String),
}

/// The published text of `event`: whole when it fits, else a reference; the audit attributes
/// left out unless `audit`.
///
/// ```
/// let feed = cqrs_events::Feed::new(cqrs_model::Model::example(), "urn:cqrs:shop");
/// let mut item = cqrs_item::Item::example().into_data_item();
/// item.entity = Some("product".into());
/// let event = feed.version_event(&item, None, chrono::Utc::now()).unwrap();
/// let payload = cqrs_realtime::payload::payload(&event, false).unwrap();
/// assert!(!payload.reference);
/// let json: serde_json::Value = serde_json::from_str(&payload.text).unwrap();
/// assert_eq!(json["id"], event.id.as_str());
/// assert!(json["data"]["state"].get("createdBy").is_none());
/// ```
pub fn payload(event: &ChangeEvent, audit: bool) -> Result<Payload, PayloadError> {
    let text = text_of(event, audit)?;
    if text.len() <= MAX_EVENT_BYTES {
        return Ok(Payload {
            text,
            reference: false,
        });
    }
    let text = text_of(&event.clone().into_reference(), audit)?;
    if text.len() <= MAX_EVENT_BYTES {
        return Ok(Payload {
            text,
            reference: true,
        });
    }
    Err(PayloadError::TooBig { bytes: text.len() })
}

fn text_of(event: &ChangeEvent, audit: bool) -> Result<String, PayloadError> {
    let json = |e: serde_json::Error| PayloadError::Json(e.to_string());
    let text = serde_json::to_string(event).map_err(json)?;
    if audit || event.data.state.is_none() {
        return Ok(text);
    }
    // Member by member, each value kept as its exact text (an item's numbers may hold more digits
    // than a float): the event, its `data`, the state, without the audit members.
    type Members = BTreeMap<String, Box<RawValue>>;
    let mut members: Members = serde_json::from_str(&text).map_err(json)?;
    let data_text = members
        .get("data")
        .map(|d| d.get().to_string())
        .unwrap_or_default();
    let mut data: Members = serde_json::from_str(&data_text).map_err(json)?;
    let state_text = data
        .get("state")
        .map(|s| s.get().to_string())
        .unwrap_or_default();
    let mut state: Members = serde_json::from_str(&state_text).map_err(json)?;
    for name in AUDIT_FIELDS {
        state.remove(name);
    }
    data.insert("state".into(), to_raw_value(&state).map_err(json)?);
    members.insert("data".into(), to_raw_value(&data).map_err(json)?);
    serde_json::to_string(&members).map_err(json)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cqrs_item::Value as ItemValue;
    use serde_json::Value;

    fn event(attributes: BTreeMap<String, ItemValue>) -> ChangeEvent {
        let feed = cqrs_events::Feed::new(cqrs_model::Model::example(), "urn:cqrs:shop");
        let mut item = cqrs_item::Item::example().into_data_item();
        item.entity = Some("product".into());
        item.attributes = attributes;
        feed.version_event(&item, None, chrono::Utc::now()).unwrap()
    }

    #[test]
    fn the_audit_attributes_stay_only_when_asked() {
        let event = event(BTreeMap::new());
        let with: Value = serde_json::from_str(&payload(&event, true).unwrap().text).unwrap();
        let without: Value = serde_json::from_str(&payload(&event, false).unwrap().text).unwrap();
        for name in AUDIT_FIELDS {
            assert!(with["data"]["state"].get(name).is_some(), "{name} kept");
            assert!(
                without["data"]["state"].get(name).is_none(),
                "{name} left out"
            );
        }
        assert_eq!(
            with["data"]["state"]["code"],
            without["data"]["state"]["code"]
        );
    }

    #[test]
    fn an_event_over_the_limit_goes_as_a_reference() {
        let mut attributes = BTreeMap::new();
        attributes.insert(
            "notes".into(),
            ItemValue::String("x".repeat(MAX_EVENT_BYTES)),
        );
        let event = event(attributes);
        let payload = payload(&event, true).unwrap();
        assert!(payload.reference);
        assert!(payload.text.len() < 10_000, "{} bytes", payload.text.len());
        let json: Value = serde_json::from_str(&payload.text).unwrap();
        assert_eq!(json["stateref"], "history");
        assert!(json["data"].get("state").is_none());
        assert_eq!(json["id"], event.id.as_str());
    }

    #[test]
    fn an_event_just_at_the_limit_goes_whole() {
        let with_notes = |notes: String| {
            let mut attributes = BTreeMap::new();
            attributes.insert("notes".into(), ItemValue::String(notes));
            event(attributes)
        };
        let base = payload(&with_notes(String::new()), true)
            .unwrap()
            .text
            .len();
        let at = payload(&with_notes("x".repeat(MAX_EVENT_BYTES - base)), true).unwrap();
        assert_eq!((at.text.len(), at.reference), (MAX_EVENT_BYTES, false));
        let over = payload(&with_notes("x".repeat(MAX_EVENT_BYTES - base + 1)), true).unwrap();
        assert!(over.reference);
    }

    #[test]
    fn numbers_keep_every_digit_without_the_audit_attributes() {
        let mut attributes = BTreeMap::new();
        let exact: ItemValue = serde_json::from_str("12345678901234567891").unwrap();
        attributes.insert("totalCents".into(), exact);
        let event = event(attributes);
        for audit in [true, false] {
            let text = payload(&event, audit).unwrap().text;
            assert!(
                text.contains(r#""totalCents":12345678901234567891"#),
                "{audit}: {text}"
            );
        }
    }
}
