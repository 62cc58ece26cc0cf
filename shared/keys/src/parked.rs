//! Keys of parked records: stream records that can never be projected (data-sync, the command
//! table's stream) or never make or publish their change events (the event publisher, the data
//! table's stream, reason kind [`EVENT_FEED_KIND`]), kept with their reason until an operator
//! looks at them.
//!
//! ```text
//! pk = PARKED#<tenant>                  (PARKED#unknown when the record names no tenant)
//! sk = <item id>@<sequence number>      data-sync's (<fnv64(item id) hex> for an id too long)
//! sk = <item id>@event-feed@<sequence number>[@<version>]     the event publisher's
//! ```
//!
//! One `Query` on `PARKED#t1` lists a tenant's parked records; `begins_with(sk, "<item id>@")`
//! narrows it to one item (both kinds), in stream order per kind. `@` never appears in an item id
//! (a base sort key holds no `@`), so one item's prefix never matches another item. The sequence
//! number makes the key unique per stream record, so parking a redelivered record again finds the
//! same key. The two streams number their records independently, so one sequence number can name
//! a record of each: the publisher's keys hold `event-feed@` before theirs (a DynamoDB Streams
//! sequence number is digits only, a hashed one hex), so they never equal data-sync's, whose keys
//! stay as deployed tables hold them. The publisher's keys end with the version the entry names
//! (its image's, or the refused event's), so two refused events of one record are both kept.
//!
//! ```
//! use cqrs_keys::parked::{parked_event_sk, parked_pk, parked_sk, parked_sk_prefix};
//! assert_eq!(parked_pk(Some("t1")), "PARKED#t1");
//! assert_eq!(parked_pk(None), "PARKED#unknown");
//! let sk = parked_sk(Some("PRODUCT#t1#P001"), "000042");
//! assert_eq!(sk, "PRODUCT#t1#P001@000042");
//! assert!(sk.starts_with(&parked_sk_prefix(Some("PRODUCT#t1#P001"))));
//! let events = parked_event_sk(Some("PRODUCT#t1#P001"), "000042", None);
//! assert_eq!(events, "PRODUCT#t1#P001@event-feed@000042");
//! assert!(events.starts_with(&parked_sk_prefix(Some("PRODUCT#t1#P001"))));
//! ```

use crate::constants::{KEY_SEPARATOR, MAX_PARTITION_KEY_BYTES, MAX_SORT_KEY_BYTES, VER_SEPARATOR};
use crate::shard::fnv1a_64;

/// Prefix of the parked records' partition keys (`PARKED#tenant`).
///
/// ```
/// assert_eq!(cqrs_keys::parked::PARKED_PK_PREFIX, "PARKED");
/// ```
pub const PARKED_PK_PREFIX: &str = "PARKED";

/// Stands for a tenant or an item id a parked record does not name (a record without keys).
///
/// ```
/// assert_eq!(cqrs_keys::parked::PARKED_UNKNOWN, "unknown");
/// ```
pub const PARKED_UNKNOWN: &str = "unknown";

/// The partition key of a tenant's parked records: `PARKED#<tenant>`, [`PARKED_UNKNOWN`] for no
/// tenant, an empty one, or one too long for a partition key.
///
/// ```
/// use cqrs_keys::parked::parked_pk;
/// assert_eq!(parked_pk(Some("t1")), "PARKED#t1");
/// assert_eq!(parked_pk(Some("")), "PARKED#unknown");
/// assert_eq!(parked_pk(Some(&"x".repeat(2048))), "PARKED#unknown");
/// ```
pub fn parked_pk(tenant: Option<&str>) -> String {
    let tenant = match tenant {
        Some(t)
            if !t.is_empty() && PARKED_PK_PREFIX.len() + 1 + t.len() <= MAX_PARTITION_KEY_BYTES =>
        {
            t
        }
        _ => PARKED_UNKNOWN,
    };
    format!("{PARKED_PK_PREFIX}{KEY_SEPARATOR}{tenant}")
}

/// What stands for `item_id` in a parked sort key: the id itself, [`PARKED_UNKNOWN`] for none,
/// or, for an id that would not leave room for a sequence number within DynamoDB's sort key limit,
/// its 64-bit FNV-1a hash in 16 hex digits (no `#`, so it never equals a real id).
///
/// ```
/// use cqrs_keys::parked::parked_item_part;
/// assert_eq!(parked_item_part(Some("P#t1#a")), "P#t1#a");
/// assert_eq!(parked_item_part(None), "unknown");
/// assert_eq!(parked_item_part(Some(&"P#t1#".repeat(400))).len(), 16);
/// ```
pub fn parked_item_part(item_id: Option<&str>) -> String {
    match item_id {
        None | Some("") => PARKED_UNKNOWN.to_string(),
        // Room for `@` and a sequence number (at most 40 digits in DynamoDB Streams).
        Some(id) if id.len() + 1 + 40 <= MAX_SORT_KEY_BYTES => id.to_string(),
        Some(id) => format!("{:016x}", fnv1a_64(id.as_bytes())),
    }
}

/// The sort-key prefix of one item's parked records: `<item part>@`.
///
/// ```
/// use cqrs_keys::parked::parked_sk_prefix;
/// assert_eq!(parked_sk_prefix(Some("P#t1#a")), "P#t1#a@");
/// ```
pub fn parked_sk_prefix(item_id: Option<&str>) -> String {
    format!("{}{VER_SEPARATOR}", parked_item_part(item_id))
}

/// The sort key of one parked stream record: `<item part>@<sequence number>`. Always within
/// DynamoDB's sort key limit: a sequence number too long for it (never seen from DynamoDB Streams)
/// is hashed too.
///
/// ```
/// use cqrs_keys::parked::parked_sk;
/// assert_eq!(parked_sk(Some("P#t1#a"), "100"), "P#t1#a@100");
/// assert_eq!(parked_sk(None, "100"), "unknown@100");
/// assert!(parked_sk(Some("P#t1#a"), &"9".repeat(5000)).len() <= cqrs_keys::MAX_SORT_KEY_BYTES);
/// ```
pub fn parked_sk(item_id: Option<&str>, sequence_number: &str) -> String {
    let prefix = parked_sk_prefix(item_id);
    if prefix.len() + sequence_number.len() <= MAX_SORT_KEY_BYTES {
        format!("{prefix}{sequence_number}")
    } else {
        format!("{prefix}{:016x}", fnv1a_64(sequence_number.as_bytes()))
    }
}

/// The reason kind of the event publisher's parked records (a record of the data table's stream
/// whose change events could not be made or published). Its records have their own sort keys
/// ([`parked_event_sk`]); `cqrs redrive run` leaves them parked (it re-projects, it does not
/// publish).
///
/// ```
/// assert_eq!(cqrs_keys::parked::EVENT_FEED_KIND, "event-feed");
/// ```
pub const EVENT_FEED_KIND: &str = "event-feed";

/// The sort key of one record the event publisher parked:
/// `<item part>@event-feed@<sequence number>`, with `@<version>` after it when the parked entry
/// names a version (the version its image carries, or that of the event the topic refused, so two
/// refused events of one record are two entries). Never equal to a data-sync key
/// ([`parked_sk`]) of the same item and sequence number; starts with the item's
/// [`parked_sk_prefix`]; always within DynamoDB's sort key limit (what follows the item part is
/// hashed when it would not fit).
///
/// ```
/// use cqrs_keys::parked::{parked_event_sk, parked_sk};
/// assert_eq!(parked_event_sk(Some("P#t1#a"), "100", None), "P#t1#a@event-feed@100");
/// assert_eq!(parked_event_sk(Some("P#t1#a"), "100", Some(7)), "P#t1#a@event-feed@100@7");
/// assert_ne!(parked_event_sk(Some("P#t1#a"), "100", None), parked_sk(Some("P#t1#a"), "100"));
/// assert!(parked_event_sk(Some(&"P#t1#".repeat(400)), &"9".repeat(5000), Some(1)).len() <= cqrs_keys::MAX_SORT_KEY_BYTES);
/// ```
pub fn parked_event_sk(
    item_id: Option<&str>,
    sequence_number: &str,
    version: Option<i64>,
) -> String {
    let prefix = format!(
        "{}{EVENT_FEED_KIND}{VER_SEPARATOR}",
        parked_sk_prefix(item_id)
    );
    let rest = match version {
        Some(version) => format!("{sequence_number}{VER_SEPARATOR}{version}"),
        None => sequence_number.to_string(),
    };
    if prefix.len() + rest.len() <= MAX_SORT_KEY_BYTES {
        format!("{prefix}{rest}")
    } else {
        format!("{prefix}{:016x}", fnv1a_64(rest.as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_stay_within_the_limits_whatever_the_input() {
        for id in [
            "",
            "a#b",
            &"x".repeat(983),
            &"x".repeat(984),
            &"x".repeat(3072),
        ] {
            for seq in ["", "1", &"1".repeat(40), &"1".repeat(2000)] {
                let sk = parked_sk(Some(id), seq);
                assert!(sk.len() <= MAX_SORT_KEY_BYTES, "{id:?} {seq:?}");
                assert!(sk.starts_with(&parked_sk_prefix(Some(id))));
            }
        }
        for tenant in ["t", &"t".repeat(2040), &"t".repeat(2041), &"t".repeat(5000)] {
            assert!(parked_pk(Some(tenant)).len() <= MAX_PARTITION_KEY_BYTES);
        }
    }

    #[test]
    fn the_publishers_keys_stay_within_the_limits_and_never_equal_data_syncs() {
        for id in ["a#b", &"x".repeat(983), &"x".repeat(984), &"x".repeat(3072)] {
            for seq in ["", "1", &"1".repeat(40), &"1".repeat(2000)] {
                for version in [None, Some(1), Some(i64::MAX)] {
                    let sk = parked_event_sk(Some(id), seq, version);
                    assert!(sk.len() <= MAX_SORT_KEY_BYTES, "{id:?} {seq:?}");
                    assert!(sk.starts_with(&parked_sk_prefix(Some(id))));
                    assert_ne!(sk, parked_sk(Some(id), seq));
                }
            }
        }
        // Data-sync's keys are as deployed tables hold them.
        assert_eq!(
            parked_sk(Some("PRODUCT#t1#P001"), "000000000000000000008"),
            "PRODUCT#t1#P001@000000000000000000008"
        );
    }

    #[test]
    fn one_items_prefix_never_matches_another_item() {
        let a = parked_sk_prefix(Some("P#t1#a"));
        assert!(!parked_sk(Some("P#t1#a#b"), "1").starts_with(&a));
        assert!(!parked_sk(Some("P#t1#ab"), "1").starts_with(&a));
    }
}
