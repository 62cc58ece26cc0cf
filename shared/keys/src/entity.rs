//! Entity keys `ENTITY_TYPE#id` (the ddb-lib "entity keys" pattern).
//!
//! The entity type is one component; the id may itself contain `#`
//! (`ORDER#2024-01-15#abc` has the id `2024-01-15#abc`) but no empty segment.
//!
//! ```
//! use cqrs_keys::entity::{entity_key, parse_entity_key};
//! let key = entity_key("ORDER", "2024-01-15#abc").unwrap();
//! assert_eq!(parse_entity_key(&key).unwrap(), ("ORDER", "2024-01-15#abc"));
//! ```

use crate::constants::KEY_SEPARATOR;
use crate::error::KeyError;
use crate::validate::{check_component, check_path, check_pk_len, join};

/// Builds `entity_type#id`.
///
/// The entity type must be a single component; the id may contain `#` but no
/// empty segment, no `@`, no control character. The result is at most
/// [`MAX_PARTITION_KEY_BYTES`](crate::MAX_PARTITION_KEY_BYTES) long, so it can
/// be a partition key; check it with
/// [`validate_sort_key`](crate::validate_sort_key) before using it as a sort
/// key.
///
/// ```
/// use cqrs_keys::entity_key;
///
/// assert_eq!(entity_key("USER", "123").unwrap(), "USER#123");
/// assert_eq!(entity_key("ORDER", "2024-01-15#abc").unwrap(), "ORDER#2024-01-15#abc");
/// assert!(entity_key("", "123").is_err());
/// ```
pub fn entity_key(entity_type: &str, id: &str) -> Result<String, KeyError> {
    check_component(&"entity type", entity_type)?;
    check_path(&"id", id)?;
    let key = join(&[entity_type, id]);
    check_pk_len(&key)?;
    Ok(key)
}

/// Splits `entity_type#id` at the first `#`; the id keeps any further `#`.
///
/// Unlike ddb-lib's `parseEntityKey`, which returns an empty id for `USER#`,
/// this refuses empty parts, so only what [`entity_key`] can build parses.
///
/// ```
/// use cqrs_keys::parse_entity_key;
///
/// assert_eq!(parse_entity_key("USER#123").unwrap(), ("USER", "123"));
/// assert_eq!(parse_entity_key("ORDER#2024-01-15#abc").unwrap(), ("ORDER", "2024-01-15#abc"));
/// assert!(parse_entity_key("USER123").is_err());
/// // Over the key length the builder allows.
/// assert!(parse_entity_key(&format!("USER#{}", "1".repeat(2048))).is_err());
/// ```
pub fn parse_entity_key(key: &str) -> Result<(&str, &str), KeyError> {
    let Some((entity_type, id)) = key.split_once(KEY_SEPARATOR) else {
        return Err(KeyError::Malformed {
            key: key.into(),
            expected: "ENTITY_TYPE#id".into(),
        });
    };
    check_component(&"entity type", entity_type)?;
    check_path(&"id", id)?;
    // What the builder refuses does not parse either.
    check_pk_len(key)?;
    Ok((entity_type, id))
}
