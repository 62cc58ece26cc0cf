//! Keys of data-sync's parked records: stream records that can never be projected, kept with their
//! reason until an operator redrives them.
//!
//! ```text
//! pk = PARKED#<tenant>                  (PARKED#unknown when the record names no tenant)
//! sk = <item id>@<sequence number>      (<fnv64(item id) hex>@<sequence number> for an id too long)
//! ```
//!
//! One `Query` on `PARKED#t1` lists a tenant's parked records; `begins_with(sk, "<item id>@")`
//! narrows it to one item, in stream order. `@` never appears in an item id (a base sort key holds
//! no `@`), so one item's prefix never matches another item. The sequence number makes the key
//! unique per stream record, so parking a redelivered record again finds the same key.
//!
//! ```
//! use cqrs_keys::parked::{parked_pk, parked_sk, parked_sk_prefix};
//! assert_eq!(parked_pk(Some("t1")), "PARKED#t1");
//! assert_eq!(parked_pk(None), "PARKED#unknown");
//! let sk = parked_sk(Some("PRODUCT#t1#P001"), "000042");
//! assert_eq!(sk, "PRODUCT#t1#P001@000042");
//! assert!(sk.starts_with(&parked_sk_prefix(Some("PRODUCT#t1#P001"))));
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
    fn one_items_prefix_never_matches_another_item() {
        let a = parked_sk_prefix(Some("P#t1#a"));
        assert!(!parked_sk(Some("P#t1#a#b"), "1").starts_with(&a));
        assert!(!parked_sk(Some("P#t1#ab"), "1").starts_with(&a));
    }
}
