//! Sharded partition keys `BASE#SHARD_n` (the ddb-lib "hot partition
//! distribution" pattern), for partitions that would take more than one
//! partition's write throughput.
//!
//! * [`shard_for_id`] / [`sharded_key_for_id`]: the shard of an id, from a
//!   stable hash, so the same id always lands in the same shard (reads by id
//!   hit one partition);
//! * [`random_shard_key`]: a uniformly random shard, for append-only writes;
//! * [`all_shard_keys`]: every shard's key, for a fan-out read.
//!
//! The hash is 64-bit FNV-1a ([`fnv1a_64`]), written out here because
//! `std`'s `DefaultHasher` may change between Rust releases and would move
//! items between shards.
//!
//! ```
//! use cqrs_keys::shard::{all_shard_keys, sharded_key_for_id};
//! let key = sharded_key_for_id("VIEWS#tenant001", "product-9", 4).unwrap();
//! assert!(all_shard_keys("VIEWS#tenant001", 4).unwrap().contains(&key));
//! ```

use crate::constants::KEY_SEPARATOR;
use crate::error::KeyError;
use crate::validate::{check_path, check_pk_len};

/// The text before a shard number: `BASE#SHARD_3`.
///
/// ```
/// assert_eq!(cqrs_keys::SHARD_MARKER, "SHARD_");
/// ```
pub const SHARD_MARKER: &str = "SHARD_";

const FNV_OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// 64-bit FNV-1a hash (Fowler, Noll, Vo): for each byte, XOR it into the hash,
/// then multiply by the FNV prime. Stable across platforms and releases.
///
/// ```
/// use cqrs_keys::fnv1a_64;
///
/// assert_eq!(fnv1a_64(b""), 0xcbf29ce484222325);
/// assert_eq!(fnv1a_64(b"a"), 0xaf63dc4c8601ec8c);
/// assert_eq!(fnv1a_64(b"foobar"), 0x85944171f73967e8);
/// ```
pub fn fnv1a_64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(FNV_OFFSET_BASIS, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(FNV_PRIME)
    })
}

/// The shard of `id` among `shard_count`: `fnv1a_64(id) % shard_count`.
///
/// ```
/// use cqrs_keys::shard_for_id;
///
/// let shard = shard_for_id("order-42", 10).unwrap();
/// assert!(shard < 10);
/// assert_eq!(shard_for_id("order-42", 10).unwrap(), shard);
/// assert!(shard_for_id("order-42", 0).is_err());
/// ```
pub fn shard_for_id(id: &str, shard_count: u32) -> Result<u32, KeyError> {
    check_count(shard_count)?;
    // The remainder is below shard_count, a u32.
    Ok((fnv1a_64(id.as_bytes()) % u64::from(shard_count)) as u32)
}

/// `base#SHARD_shard`.
///
/// `base` is one or more `#`-joined components; the result is a valid
/// partition key.
///
/// ```
/// use cqrs_keys::shard_key;
///
/// assert_eq!(shard_key("ACTIVE_USERS", 7).unwrap(), "ACTIVE_USERS#SHARD_7");
/// assert_eq!(shard_key("PRODUCT#tenant001", 0).unwrap(), "PRODUCT#tenant001#SHARD_0");
/// ```
pub fn shard_key(base: &str, shard: u32) -> Result<String, KeyError> {
    check_path(&"shard base", base)?;
    let key = format!("{base}{KEY_SEPARATOR}{SHARD_MARKER}{shard}");
    check_pk_len(&key)?;
    Ok(key)
}

/// The key of `id`'s shard: [`shard_key`] of [`shard_for_id`].
///
/// ```
/// use cqrs_keys::{shard_for_id, shard_key, sharded_key_for_id};
///
/// let key = sharded_key_for_id("ORDER#tenant001", "order-42", 8).unwrap();
/// assert_eq!(key, shard_key("ORDER#tenant001", shard_for_id("order-42", 8).unwrap()).unwrap());
/// ```
pub fn sharded_key_for_id(base: &str, id: &str, shard_count: u32) -> Result<String, KeyError> {
    shard_key(base, shard_for_id(id, shard_count)?)
}

/// The key of a random shard, for write sharding.
///
/// The randomness is the 80 random bits of a fresh ULID (the `ulid` crate
/// draws them from `rand`'s thread-local generator), so no extra dependency is
/// needed; the modulo bias over 2^80 is negligible.
///
/// ```
/// use cqrs_keys::{parse_shard_key, random_shard_key};
///
/// let key = random_shard_key("ACTIVE_USERS", 10).unwrap();
/// let (base, shard) = parse_shard_key(&key).unwrap();
/// assert_eq!(base, "ACTIVE_USERS");
/// assert!(shard < 10);
/// ```
pub fn random_shard_key(base: &str, shard_count: u32) -> Result<String, KeyError> {
    check_count(shard_count)?;
    let random = ::ulid::Ulid::new().random();
    shard_key(base, (random % u128::from(shard_count)) as u32)
}

/// Every shard's key, shard 0 first: the partitions a fan-out read queries.
///
/// ```
/// use cqrs_keys::all_shard_keys;
///
/// assert_eq!(
///     all_shard_keys("POPULAR_ITEM", 3).unwrap(),
///     ["POPULAR_ITEM#SHARD_0", "POPULAR_ITEM#SHARD_1", "POPULAR_ITEM#SHARD_2"]
/// );
/// ```
pub fn all_shard_keys(base: &str, shard_count: u32) -> Result<Vec<String>, KeyError> {
    check_count(shard_count)?;
    // Validate once; the longest key is the last one.
    shard_key(base, shard_count - 1)?;
    Ok((0..shard_count)
        .map(|s| format!("{base}{KEY_SEPARATOR}{SHARD_MARKER}{s}"))
        .collect())
}

/// Splits `base#SHARD_n` into its base and shard number.
///
/// The number must be plain ASCII digits without a sign or leading zeros.
///
/// ```
/// use cqrs_keys::parse_shard_key;
///
/// assert_eq!(parse_shard_key("USER#123#ITEM#SHARD_5").unwrap(), ("USER#123#ITEM", 5));
/// assert!(parse_shard_key("ITEM#SHARD").is_err());
/// ```
pub fn parse_shard_key(key: &str) -> Result<(&str, u32), KeyError> {
    let malformed = || KeyError::Malformed {
        key: key.into(),
        expected: "BASE#SHARD_n".into(),
    };
    let (base, suffix) = key.rsplit_once(KEY_SEPARATOR).ok_or_else(malformed)?;
    let digits = suffix.strip_prefix(SHARD_MARKER).ok_or_else(malformed)?;
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'));
    if !canonical {
        return Err(malformed());
    }
    let shard = digits.parse().map_err(|_| malformed())?;
    check_path(&"shard base", base)?;
    Ok((base, shard))
}

/// The shard number of a sharded key; `None` for any other key (ddb-lib's
/// `getShardNumber`).
///
/// ```
/// use cqrs_keys::shard_number;
///
/// assert_eq!(shard_number("ACTIVE_USERS#SHARD_7"), Some(7));
/// assert_eq!(shard_number("REGULAR_KEY"), None);
/// ```
pub fn shard_number(key: &str) -> Option<u32> {
    parse_shard_key(key).ok().map(|(_, shard)| shard)
}

fn check_count(shard_count: u32) -> Result<(), KeyError> {
    if shard_count == 0 {
        return Err(KeyError::InvalidShardCount { count: shard_count });
    }
    Ok(())
}
