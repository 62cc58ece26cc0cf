//! Composite keys: several components joined by `#` (`USER#123#ORDER#456`),
//! and their `begins_with` prefixes.
//!
//! ```
//! use cqrs_keys::composite::{composite_key, parse_composite_key};
//! let key = composite_key(&["USER", "123", "ORDER", "456"]).unwrap();
//! assert_eq!(parse_composite_key(&key).unwrap(), ["USER", "123", "ORDER", "456"]);
//! ```

use crate::constants::KEY_SEPARATOR;
use crate::error::KeyError;
use crate::validate::{Nth, check_component, check_pk_len, join};

/// Joins components with `#`.
///
/// Needs at least one component; each must be non-empty and free of `#`,
/// `@` and control characters. The result is at most
/// [`MAX_PARTITION_KEY_BYTES`](crate::MAX_PARTITION_KEY_BYTES) long
/// ([`KeyError::PartitionKeyTooLong`] otherwise, as no key attribute could
/// hold it); check it with [`validate_sort_key`](crate::validate_sort_key)
/// before using it as a sort key.
///
/// ```
/// use cqrs_keys::composite_key;
///
/// assert_eq!(composite_key(&["USER", "123", "ORDER", "456"]).unwrap(), "USER#123#ORDER#456");
/// assert!(composite_key(&["USER#123", "456"]).is_err());
/// assert!(composite_key(&[]).is_err());
/// ```
pub fn composite_key(parts: &[&str]) -> Result<String, KeyError> {
    if parts.is_empty() {
        return Err(KeyError::EmptyComponent {
            part: "composite key".into(),
        });
    }
    for (i, p) in parts.iter().enumerate() {
        check_component(&Nth("part", i), p)?;
    }
    let key = join(parts);
    check_pk_len(&key)?;
    Ok(key)
}

/// [`composite_key`] followed by `#`: the prefix for a `begins_with` query
/// over every key below these components.
///
/// The trailing `#` keeps `ORDER#12` from matching `ORDER#123`.
///
/// ```
/// use cqrs_keys::composite_key_prefix;
///
/// assert_eq!(composite_key_prefix(&["USER", "123"]).unwrap(), "USER#123#");
/// ```
pub fn composite_key_prefix(parts: &[&str]) -> Result<String, KeyError> {
    let mut key = composite_key(parts)?;
    key.push(KEY_SEPARATOR);
    Ok(key)
}

/// Splits a composite key at every `#`.
///
/// Refuses an empty key, an empty component (ddb-lib's `parseCompositeKey`
/// returns `""` for `USER##123`; this names the empty part instead), `@` and
/// control characters, and keys longer than [`composite_key`] builds.
///
/// ```
/// use cqrs_keys::{parse_composite_key, KeyError};
///
/// assert_eq!(parse_composite_key("USER#123#ORDER#456").unwrap(), ["USER", "123", "ORDER", "456"]);
/// assert_eq!(
///     parse_composite_key("USER##123"),
///     Err(KeyError::EmptyComponent { part: "part 2".into() })
/// );
/// ```
pub fn parse_composite_key(key: &str) -> Result<Vec<&str>, KeyError> {
    if key.is_empty() {
        return Err(KeyError::EmptyComponent {
            part: "composite key".into(),
        });
    }
    let parts: Vec<&str> = key.split(KEY_SEPARATOR).collect();
    for (i, p) in parts.iter().enumerate() {
        check_component(&Nth("part", i), p)?;
    }
    // What the builder refuses does not parse either.
    check_pk_len(key)?;
    Ok(parts)
}
