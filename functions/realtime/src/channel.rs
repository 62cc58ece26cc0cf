//! The channels an event is published on, and the names the template gives the namespaces.
//!
//! An entity's events go to its namespace (the entity name, `_` written `-`), on two channels:
//!
//! - `/<namespace>/<tenant>`: every change of the tenant's items of that entity;
//! - `/<namespace>/<tenant>/<item>`: the changes of one item, `<item>` = [`item_token`].
//!
//! `<tenant>` is the tenant of the item's partition key (what the HTTP API's read rules look at).
//! Every segment must fit the Event API's channel alphabet ([`is_segment`]): a tenant code that
//! does not is never published (the consumer logs and counts it, [`crate::Skip`]).

use cqrs_model::{Model, ReadRule};

/// The longest channel segment (the namespace name's limit, AppSync API reference
/// `ChannelNamespace.name`: 1 to 50 characters).
///
/// ```
/// assert_eq!(cqrs_realtime::channel::MAX_SEGMENT, 50);
/// ```
pub const MAX_SEGMENT: usize = 50;

/// Whether `segment` is a channel segment: 1 to 50 ASCII letters, digits and `-`, starting and
/// ending with a letter or digit. That is the pattern AppSync documents for a namespace name
/// (`([A-Za-z0-9](?:[A-Za-z0-9\-]{0,48}[A-Za-z0-9])?)`, API reference `ChannelNamespace`);
/// the framework holds every segment of its channels to it.
///
/// ```
/// use cqrs_realtime::channel::is_segment;
/// assert!(is_segment("t1") && is_segment("order-item") && is_segment("a"));
/// assert!(!is_segment("") && !is_segment("-t1") && !is_segment("t1-") && !is_segment("t_1"));
/// assert!(!is_segment("*") && !is_segment(&"a".repeat(51)));
/// ```
pub fn is_segment(segment: &str) -> bool {
    let bytes = segment.as_bytes();
    let (Some(first), Some(last)) = (bytes.first(), bytes.last()) else {
        return false;
    };
    bytes.len() <= MAX_SEGMENT
        && first.is_ascii_alphanumeric()
        && last.is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'-')
}

/// The namespace of `entity`: its name with `_` written `-` (`order_item` -> `order-item`).
///
/// ```
/// assert_eq!(cqrs_realtime::channel::namespace("order_item"), "order-item");
/// assert_eq!(cqrs_realtime::channel::namespace("order"), "order");
/// ```
pub fn namespace(entity: &str) -> String {
    entity.replace('_', "-")
}

/// An item's channel segment ([`cqrs_keys::item_hex_token`]): the first 32 hexadecimal digits
/// (128 bits) of the SHA-256 of its partition key, a NUL byte and its sort key without version. A browser computes it with
/// `crypto.subtle.digest('SHA-256', ...)` on the same bytes (UTF-8).
///
/// ```
/// use cqrs_realtime::channel::{is_segment, item_token};
/// let token = item_token("ORDER#t1", "O1");
/// assert_eq!(token.len(), 32);
/// assert!(is_segment(&token));
/// assert_eq!(token, item_token("ORDER#t1", "O1@7"), "the version is not part of it");
/// assert_ne!(token, item_token("ORDER#t1", "O2"));
/// ```
pub fn item_token(pk: &str, sk: &str) -> String {
    cqrs_keys::item_hex_token(pk, sk)
}

/// One namespace of the realtime API, as the template declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Namespace {
    /// Its name ([`namespace`]).
    pub name: String,
    /// The entity whose events it carries.
    pub entity: String,
    /// Who may subscribe to its `common` channels: `CommonReaders` of the onSubscribe handler
    /// (`everyone` or `system_admin`), the entity's read rule.
    pub common_readers: ReadRule,
}

/// The namespaces of `model`, one per entity, in the model's order; an entity whose namespace
/// would not be a channel segment is left out (its events are never published).
///
/// ```
/// let namespaces = cqrs_realtime::channel::namespaces(&cqrs_model::Model::example());
/// let user_tenant = namespaces.iter().find(|n| n.entity == "user_tenant").unwrap();
/// assert_eq!(user_tenant.name, "user-tenant");
/// assert_eq!(user_tenant.common_readers.as_str(), "system_admin");
/// assert!(namespaces.iter().any(|n| n.name == "product" && n.common_readers.as_str() == "everyone"));
/// ```
pub fn namespaces(model: &Model) -> Vec<Namespace> {
    model
        .entities()
        .iter()
        .map(|entity| Namespace {
            name: namespace(&entity.name),
            entity: entity.name.clone(),
            common_readers: entity.read_rule(),
        })
        .filter(|n| is_segment(&n.name))
        .collect()
}

/// The two channels of an item's events, without the leading `/` (as the HTTP publish request
/// names them): `<namespace>/<tenant>` and `<namespace>/<tenant>/<item>`.
///
/// ```
/// let [all, one] = cqrs_realtime::channel::channels("order", "t1", "ORDER#t1", "O1");
/// assert_eq!(all, "order/t1");
/// assert!(one.starts_with("order/t1/") && one.len() == "order/t1/".len() + 32);
/// ```
pub fn channels(namespace: &str, tenant: &str, pk: &str, sk: &str) -> [String; 2] {
    let all = format!("{namespace}/{tenant}");
    let one = format!("{all}/{}", item_token(pk, sk));
    [all, one]
}
