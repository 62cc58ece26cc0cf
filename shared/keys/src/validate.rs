//! Validation of key components and whole keys.
//!
//! Rules (all builders in this crate apply them, so their output always
//! passes [`validate_partition_key`] / [`validate_sort_key`]):
//!
//! * a **component** (tenant, prefix, id, ...) is non-empty and contains
//!   neither `#` nor `@` nor a control character (Unicode Cc: U+0000 to
//!   U+001F and U+007F to U+009F) nor U+10FFFF, the highest code point, which
//!   ends every range read of the keys that begin with a prefix
//!   (`prefix + U+10FFFF`; a key holding it there would sort past that end).
//!   Everything else, spaces and non-ASCII letters included, is allowed:
//!   DynamoDB accepts any UTF-8, and normalising (e.g. lower-casing tenant
//!   codes) is the caller's policy, not the key layer's;
//! * a **base sort key** is components joined by `#`: no empty segment, no
//!   `@` (the version is added later with
//!   [`add_sort_key_version`](crate::add_sort_key_version)), at most
//!   [`MAX_BASE_SORT_KEY_BYTES`] bytes;
//! * a **partition key** is `PREFIX#TENANT[#more]`: at least two segments, none
//!   empty, no `@`, at most [`MAX_PARTITION_KEY_BYTES`] bytes.
//!
//! ```
//! use cqrs_keys::validate::{validate_partition_key, validate_sort_key};
//! assert!(validate_partition_key("PRODUCT#tenant001").is_ok());
//! assert!(validate_sort_key("DATA#product_category#electronics").is_ok());
//! assert!(validate_sort_key("DATA##electronics").is_err());
//! ```

use std::fmt::{self, Display};

use crate::constants::{
    KEY_SEPARATOR, MAX_BASE_SORT_KEY_BYTES, MAX_PARTITION_KEY_BYTES, VER_SEPARATOR,
};
use crate::error::{KeyError, head};

/// Checks one key component: non-empty, no `#`, no `@`, no control character, no U+10FFFF.
///
/// `part` names the component in the error.
///
/// ```
/// use cqrs_keys::{validate_component, KeyError};
///
/// assert!(validate_component("tenant", "tenant001").is_ok());
/// assert_eq!(
///     validate_component("id", "a\u{10FFFF}"),
///     Err(KeyError::HighestCodePoint { part: "id".into(), value: "a\u{10FFFF}".into() })
/// );
/// assert_eq!(
///     validate_component("tenant", "a#b"),
///     Err(KeyError::SeparatorInComponent {
///         part: "tenant".into(),
///         value: "a#b".into(),
///         separator: '#',
///     })
/// );
/// ```
pub fn validate_component(part: &str, value: &str) -> Result<(), KeyError> {
    check_component(&part, value)
}

/// Checks a partition key: `PREFIX#TENANT[#more]`, every segment non-empty,
/// no `@`, no control character, no U+10FFFF, at most [`MAX_PARTITION_KEY_BYTES`] bytes.
///
/// ```
/// use cqrs_keys::{validate_partition_key, KeyError};
///
/// assert!(validate_partition_key("PRODUCT#tenant001").is_ok());
/// assert!(validate_partition_key("LOG#tenant001#2024-01").is_ok());
/// assert!(matches!(validate_partition_key("PRODUCT"), Err(KeyError::Malformed { .. })));
/// assert_eq!(
///     validate_partition_key("PRODUCT#"),
///     Err(KeyError::EmptyComponent { part: "partition key tenant".into() })
/// );
/// ```
pub fn validate_partition_key(pk: &str) -> Result<(), KeyError> {
    if pk.is_empty() {
        return Err(KeyError::EmptyComponent {
            part: "partition key".into(),
        });
    }
    if pk.len() > MAX_PARTITION_KEY_BYTES {
        return Err(KeyError::PartitionKeyTooLong {
            bytes: pk.len(),
            max: MAX_PARTITION_KEY_BYTES,
            head: head(pk),
        });
    }
    check_chars(&"partition key", pk, false)?;
    if !pk.contains(KEY_SEPARATOR) {
        return Err(KeyError::Malformed {
            key: pk.into(),
            expected: "PREFIX#TENANT[#more]".into(),
        });
    }
    for (i, segment) in pk.split(KEY_SEPARATOR).enumerate() {
        if segment.is_empty() {
            let part = match i {
                0 => "partition key prefix".to_string(),
                1 => "partition key tenant".to_string(),
                _ => format!("partition key segment {}", i + 1),
            };
            return Err(KeyError::EmptyComponent { part });
        }
    }
    Ok(())
}

/// Checks a base sort key (one without a version): components joined by `#`,
/// no empty segment, no `@`, no control character, no U+10FFFF, at most
/// [`MAX_BASE_SORT_KEY_BYTES`] bytes.
///
/// ```
/// use cqrs_keys::{validate_sort_key, KeyError};
///
/// assert!(validate_sort_key("01HX7MBJK3V9WQBZ7XNDK5ZT2M").is_ok());
/// assert!(validate_sort_key("ORDER_ITEM#01HX7MBJK3V9WQBZ7XNDK5ZT2M#001").is_ok());
/// assert!(matches!(
///     validate_sort_key("CAT#001@3"),
///     Err(KeyError::SeparatorInComponent { separator: '@', .. })
/// ));
/// assert_eq!(
///     validate_sort_key("CAT##001"),
///     Err(KeyError::EmptyComponent { part: "sort key segment 2".into() })
/// );
/// ```
pub fn validate_sort_key(sk: &str) -> Result<(), KeyError> {
    check_path(&"sort key", sk)?;
    if sk.len() > MAX_BASE_SORT_KEY_BYTES {
        return Err(KeyError::SortKeyTooLong {
            bytes: sk.len(),
            max: MAX_BASE_SORT_KEY_BYTES,
            head: head(sk),
        });
    }
    Ok(())
}

/// Checks that every key derived from a valid `pk` and base `sk` fits DynamoDB's key limit of
/// [`MAX_PARTITION_KEY_BYTES`]: the item id `pk#sk` (the hash key of the history table's
/// `id-version-index`) and the head key `HEAD#pk@sk` (see [`head_key`](crate::head_key)). The
/// head key is the longer one, so a pk and sk are accepted when `HEAD#pk@sk` is at most 2048
/// bytes. Call it after [`validate_partition_key`] and [`validate_sort_key`].
///
/// ```
/// use cqrs_keys::{validate_derived_keys, KeyError};
///
/// assert!(validate_derived_keys("PRODUCT#t1", "P001").is_ok());
/// // A pk of 2000 bytes and an sk of 100: each valid alone, but `pk#sk` is 2101 bytes.
/// let pk = format!("P#{}", "t".repeat(1998));
/// let err = validate_derived_keys(&pk, &"s".repeat(100)).unwrap_err();
/// assert!(matches!(err, KeyError::DerivedKeyTooLong { max: 2048, .. }));
/// assert!(err.to_string().contains("2048"));
/// // The longest accepted: `HEAD#` + pk + `@` + sk = 2048 bytes.
/// let sk = "s".repeat(2048 - 5 - pk.len() - 1);
/// assert!(validate_derived_keys(&pk, &sk).is_ok());
/// assert!(validate_derived_keys(&pk, &format!("{sk}s")).is_err());
/// ```
pub fn validate_derived_keys(pk: &str, sk: &str) -> Result<(), KeyError> {
    let id = crate::generate_id(pk, sk);
    if id.len() > MAX_PARTITION_KEY_BYTES {
        return Err(KeyError::DerivedKeyTooLong {
            key: "item id pk#sk (hash key of the history index)".into(),
            bytes: id.len(),
            max: MAX_PARTITION_KEY_BYTES,
            head: head(&id),
        });
    }
    let head_key = crate::head_key(pk, sk);
    if head_key.len() > MAX_PARTITION_KEY_BYTES {
        return Err(KeyError::DerivedKeyTooLong {
            key: "head key HEAD#pk@sk (the item's latest-version record)".into(),
            bytes: head_key.len(),
            max: MAX_PARTITION_KEY_BYTES,
            head: head(&head_key),
        });
    }
    Ok(())
}

/// Checks one component; `part` names it in the error.
pub(crate) fn check_component(part: &dyn Display, value: &str) -> Result<(), KeyError> {
    if value.is_empty() {
        return Err(KeyError::EmptyComponent {
            part: part.to_string(),
        });
    }
    check_chars(part, value, true)
}

/// Checks a `#`-joined path of components: non-empty, no empty segment, no
/// `@`, no control character. No length check.
pub(crate) fn check_path(part: &dyn Display, value: &str) -> Result<(), KeyError> {
    if value.is_empty() {
        return Err(KeyError::EmptyComponent {
            part: part.to_string(),
        });
    }
    check_chars(part, value, false)?;
    // Fast test first; the position is only worked out for the error.
    let bytes = value.as_bytes();
    let sep = KEY_SEPARATOR as u8;
    if bytes.first() == Some(&sep)
        || bytes.last() == Some(&sep)
        || bytes.windows(2).any(|w| w == [sep, sep])
    {
        for (i, segment) in value.split(KEY_SEPARATOR).enumerate() {
            if segment.is_empty() {
                return Err(KeyError::EmptyComponent {
                    part: format!("{part} segment {}", i + 1),
                });
            }
        }
    }
    Ok(())
}

/// Refuses `@`, control characters, U+10FFFF and (when `refuse_hash`) `#`.
///
/// Works on bytes: the separators and the C0 controls (and DEL) are single bytes in UTF-8, the
/// C1 controls (U+0080 to U+009F) are `0xC2` followed by `0x80..=0x9F`, and U+10FFFF is
/// `F4 8F BF BF`; a `0xC2` or `0xF4` byte in valid UTF-8 is always the lead byte of a character,
/// so no character is misread.
fn check_chars(part: &dyn Display, value: &str, refuse_hash: bool) -> Result<(), KeyError> {
    let bytes = value.as_bytes();
    let (ver, key) = (VER_SEPARATOR as u8, KEY_SEPARATOR as u8);
    for (i, &b) in bytes.iter().enumerate() {
        if b == ver || (refuse_hash && b == key) {
            return Err(KeyError::SeparatorInComponent {
                part: part.to_string(),
                value: value.into(),
                separator: char::from(b),
            });
        }
        let control = match b {
            0x00..=0x1F | 0x7F => Some(u32::from(b)),
            0xC2 => bytes
                .get(i + 1)
                .filter(|next| (0x80..=0x9F).contains(*next))
                .map(|next| u32::from(*next)),
            _ => None,
        };
        if let Some(code) = control {
            return Err(KeyError::ControlCharacter {
                part: part.to_string(),
                value: value.into(),
                code,
            });
        }
        if b == 0xF4 && bytes.get(i + 1..i + 4) == Some(&[0x8F, 0xBF, 0xBF]) {
            return Err(KeyError::HighestCodePoint {
                part: part.to_string(),
                value: value.into(),
            });
        }
    }
    Ok(())
}

/// Refuses a finished partition key over the DynamoDB limit.
pub(crate) fn check_pk_len(pk: &str) -> Result<(), KeyError> {
    if pk.len() > MAX_PARTITION_KEY_BYTES {
        return Err(KeyError::PartitionKeyTooLong {
            bytes: pk.len(),
            max: MAX_PARTITION_KEY_BYTES,
            head: head(pk),
        });
    }
    Ok(())
}

/// Refuses a finished base sort key over [`MAX_BASE_SORT_KEY_BYTES`].
pub(crate) fn check_sk_len(sk: &str) -> Result<(), KeyError> {
    if sk.len() > MAX_BASE_SORT_KEY_BYTES {
        return Err(KeyError::SortKeyTooLong {
            bytes: sk.len(),
            max: MAX_BASE_SORT_KEY_BYTES,
            head: head(sk),
        });
    }
    Ok(())
}

/// Joins components with `#` into one preallocated string.
pub(crate) fn join(parts: &[&str]) -> String {
    let len = parts.iter().map(|p| p.len() + 1).sum::<usize>();
    let mut out = String::with_capacity(len);
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            out.push(KEY_SEPARATOR);
        }
        out.push_str(p);
    }
    out
}

/// A 1-based position label such as `part 3`, formatted only on error.
pub(crate) struct Nth<'a>(pub &'a str, pub usize);

impl Display for Nth<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.0, self.1 + 1)
    }
}
