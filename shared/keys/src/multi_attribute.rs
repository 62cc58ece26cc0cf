//! Multi-attribute keys: several typed attribute values (strings and
//! unsigned numbers) joined into one key value, typically a GSI key such as
//! `tenant#customer#department` or `ERROR#00000001733011200000`.
//!
//! DynamoDB compares string keys byte by byte, so numbers are written as 20
//! zero-padded digits (`u64::MAX` has 20): their string order is then their
//! numeric order. [`parse_multi_attribute_key`] reads a key back against the
//! list of attribute kinds it was built from.
//!
//! ```
//! use cqrs_keys::multi_attribute::{multi_attribute_key, parse_multi_attribute_key, AttributeKind, KeyAttribute};
//! let attrs = [KeyAttribute::Str("v"), KeyAttribute::Num(2), KeyAttribute::Num(10)];
//! let key = multi_attribute_key(&attrs).unwrap();
//! assert_eq!(key, "v#00000000000000000002#00000000000000000010");
//! let kinds = [AttributeKind::Str, AttributeKind::Num, AttributeKind::Num];
//! assert_eq!(parse_multi_attribute_key(&key, &kinds).unwrap(), attrs);
//! ```

use crate::constants::KEY_SEPARATOR;
use crate::error::KeyError;
use crate::validate::{Nth, check_component, check_pk_len};

/// Width of an encoded [`KeyAttribute::Num`].
const NUM_WIDTH: usize = 20;

/// One attribute value of a multi-attribute key.
///
/// ```
/// use cqrs_keys::KeyAttribute;
///
/// let attrs = [KeyAttribute::Str("ERROR"), KeyAttribute::Num(1_733_011_200_000)];
/// assert_eq!(attrs[1].kind(), cqrs_keys::AttributeKind::Num);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyAttribute<'a> {
    /// A string value: one key component (no `#`, `@`, control character).
    Str(&'a str),
    /// An unsigned number, written as 20 zero-padded digits so that it sorts
    /// numerically.
    Num(u64),
}

impl KeyAttribute<'_> {
    /// The kind of this value, for [`parse_multi_attribute_key`].
    ///
    /// ```
    /// use cqrs_keys::{AttributeKind, KeyAttribute};
    ///
    /// assert_eq!(KeyAttribute::Str("a").kind(), AttributeKind::Str);
    /// ```
    pub fn kind(&self) -> AttributeKind {
        match self {
            KeyAttribute::Str(_) => AttributeKind::Str,
            KeyAttribute::Num(_) => AttributeKind::Num,
        }
    }
}

/// The kind of one attribute of a multi-attribute key, as its parser expects
/// it.
///
/// ```
/// use cqrs_keys::{parse_multi_attribute_key, AttributeKind, KeyAttribute};
///
/// let parsed = parse_multi_attribute_key("v#00000000000000000002", &[AttributeKind::Str, AttributeKind::Num]);
/// assert_eq!(parsed.unwrap(), [KeyAttribute::Str("v"), KeyAttribute::Num(2)]);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AttributeKind {
    /// A string component.
    Str,
    /// A 20-digit zero-padded unsigned number.
    Num,
}

/// Joins attribute values with `#`, numbers zero-padded to 20 digits.
///
/// Needs at least one attribute; the result is at most
/// [`MAX_PARTITION_KEY_BYTES`](crate::MAX_PARTITION_KEY_BYTES) long.
///
/// ```
/// use cqrs_keys::{multi_attribute_key, KeyAttribute::{Num, Str}};
///
/// assert_eq!(
///     multi_attribute_key(&[Str("TENANT-123"), Str("CUSTOMER-456"), Str("DEPT-A")]).unwrap(),
///     "TENANT-123#CUSTOMER-456#DEPT-A"
/// );
/// assert_eq!(
///     multi_attribute_key(&[Str("ERROR"), Num(1_733_011_200_000)]).unwrap(),
///     "ERROR#00000001733011200000"
/// );
/// ```
pub fn multi_attribute_key(attributes: &[KeyAttribute<'_>]) -> Result<String, KeyError> {
    if attributes.is_empty() {
        return Err(KeyError::EmptyComponent {
            part: "multi-attribute key".into(),
        });
    }
    let mut key = String::with_capacity(attributes.len() * (NUM_WIDTH + 1));
    for (i, attr) in attributes.iter().enumerate() {
        if i > 0 {
            key.push(KEY_SEPARATOR);
        }
        match attr {
            KeyAttribute::Str(s) => {
                check_component(&Nth("attribute", i), s)?;
                key.push_str(s);
            }
            KeyAttribute::Num(n) => key.push_str(&format!("{n:020}")),
        }
    }
    check_pk_len(&key)?;
    Ok(key)
}

/// Reads a multi-attribute key back: exactly one component per entry of
/// `kinds`, numbers as exactly 20 digits.
///
/// ```
/// use cqrs_keys::{parse_multi_attribute_key, AttributeKind::{Num, Str}, KeyAttribute};
///
/// let attrs = parse_multi_attribute_key("ERROR#00000001733011200000", &[Str, Num]).unwrap();
/// assert_eq!(attrs, [KeyAttribute::Str("ERROR"), KeyAttribute::Num(1_733_011_200_000)]);
/// assert!(parse_multi_attribute_key("ERROR", &[Str, Num]).is_err());
/// ```
pub fn parse_multi_attribute_key<'a>(
    key: &'a str,
    kinds: &[AttributeKind],
) -> Result<Vec<KeyAttribute<'a>>, KeyError> {
    let parts: Vec<&str> = key.split(KEY_SEPARATOR).collect();
    if parts.len() != kinds.len() {
        return Err(KeyError::Malformed {
            key: key.into(),
            expected: format!("{} attributes, found {}", kinds.len(), parts.len()),
        });
    }
    parts
        .iter()
        .zip(kinds)
        .enumerate()
        .map(|(i, (part, kind))| {
            check_component(&Nth("attribute", i), part)?;
            match kind {
                AttributeKind::Str => Ok(KeyAttribute::Str(part)),
                AttributeKind::Num => {
                    parse_num(part)
                        .map(KeyAttribute::Num)
                        .ok_or_else(|| KeyError::Malformed {
                            key: (*part).into(),
                            expected: format!("attribute {} to be a 20-digit number", i + 1),
                        })
                }
            }
        })
        .collect()
}

fn parse_num(s: &str) -> Option<u64> {
    if s.len() != NUM_WIDTH || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}
