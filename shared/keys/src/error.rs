//! The crate's one error type, [`KeyError`].
//!
//! Every variant names the offending part: its role ("tenant", "part 3",
//! "sort key segment 2"; positions are 1-based) and, where it helps, its value.
//!
//! ```
//! use cqrs_keys::error::KeyError;
//! let err = cqrs_keys::validate_component("tenant", "").unwrap_err();
//! assert_eq!(err, KeyError::EmptyComponent { part: "tenant".into() });
//! ```

use thiserror::Error;

/// Why a key, or a component of one, was refused.
///
/// ```
/// use cqrs_keys::{entity_key, KeyError};
///
/// let err = entity_key("USER", "").unwrap_err();
/// assert_eq!(err, KeyError::EmptyComponent { part: "id".into() });
/// assert_eq!(err.to_string(), "id is empty");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Error)]
#[non_exhaustive]
pub enum KeyError {
    /// A component contains a reserved separator: `#` (which joins components)
    /// or `@` (which introduces a version). Escaping is not supported; such a
    /// value cannot be a key component.
    #[error("{part} {value:?} contains the reserved separator {separator:?}")]
    SeparatorInComponent {
        /// Which component, e.g. `tenant` or `part 2`.
        part: String,
        /// The component's value.
        value: String,
        /// The separator found in it (`#` or `@`).
        separator: char,
    },

    /// A component, or a segment between two `#`, is empty.
    #[error("{part} is empty")]
    EmptyComponent {
        /// Which component, e.g. `tenant` or `sort key segment 2`.
        part: String,
    },

    /// A component contains a control character (Unicode category Cc, e.g.
    /// NUL, tab, newline, DEL). DynamoDB would store it, but it is invisible in
    /// consoles and logs and makes keys that look equal differ.
    #[error("{part} {value:?} contains the control character U+{code:04X}")]
    ControlCharacter {
        /// Which component.
        part: String,
        /// The component's value.
        value: String,
        /// The code point of the first control character.
        code: u32,
    },

    /// A component contains U+10FFFF, the highest code point. A read of every key that begins
    /// with a prefix ends at `prefix + U+10FFFF` (DynamoDB has no "begins with" that takes a lower
    /// bound too), so a key whose next character is U+10FFFF would sort after that end and be
    /// missed: no key takes it. (It is a Unicode noncharacter, never in interchanged text.)
    #[error(
        "{part} {value:?} contains U+10FFFF, the highest code point, which ends key ranges: no key may hold it"
    )]
    HighestCodePoint {
        /// Which component.
        part: String,
        /// The component's value.
        value: String,
    },

    /// A partition key is longer than
    /// [`MAX_PARTITION_KEY_BYTES`](crate::MAX_PARTITION_KEY_BYTES).
    #[error(
        "partition key of {bytes} bytes is over the limit of {max} bytes (starts with {head:?})"
    )]
    PartitionKeyTooLong {
        /// Length of the key in UTF-8 bytes.
        bytes: usize,
        /// The limit it broke.
        max: usize,
        /// The key's first 32 characters.
        head: String,
    },

    /// A base sort key is longer than
    /// [`MAX_BASE_SORT_KEY_BYTES`](crate::MAX_BASE_SORT_KEY_BYTES) (DynamoDB's
    /// 1024 bytes minus room for the `@version` suffix).
    #[error("sort key of {bytes} bytes is over the limit of {max} bytes (starts with {head:?})")]
    SortKeyTooLong {
        /// Length of the key in UTF-8 bytes.
        bytes: usize,
        /// The limit it broke.
        max: usize,
        /// The key's first 32 characters.
        head: String,
    },

    /// A key derived from the partition and sort key (the item id `pk#sk`, which is the hash key
    /// of the history table's `id-version-index`, or the item's head key `HEAD#pk@sk`) is longer
    /// than DynamoDB's [`MAX_PARTITION_KEY_BYTES`](crate::MAX_PARTITION_KEY_BYTES): the item could
    /// be written to the command table but never projected nor versioned.
    #[error(
        "{key} of {bytes} bytes (derived from pk and sk) is over DynamoDB's key limit of {max} bytes (starts with {head:?})"
    )]
    DerivedKeyTooLong {
        /// Which derived key, e.g. `item id pk#sk`.
        key: String,
        /// Its length in UTF-8 bytes.
        bytes: usize,
        /// The limit it broke.
        max: usize,
        /// The key's first 32 characters.
        head: String,
    },

    /// The text after the last `@` of a sort key is not a version number
    /// (an optional `-` and ASCII digits that fit an `i64`).
    #[error("sort key {sk:?} has the version suffix {suffix:?}, which is not an integer")]
    InvalidVersion {
        /// The whole sort key.
        sk: String,
        /// The text after its last `@`.
        suffix: String,
    },

    /// A parser found a different prefix (first component, or fixed partition
    /// key) from the one its pattern requires.
    #[error("expected the prefix {expected:?}, found {found:?}")]
    WrongPrefix {
        /// The prefix the pattern requires (alternatives are joined by `|`).
        expected: String,
        /// The prefix found.
        found: String,
    },

    /// A key does not have the shape its parser expects (no separator, wrong
    /// number of components, a malformed shard suffix or year-month, ...).
    #[error("key {key:?} is malformed: expected {expected}")]
    Malformed {
        /// The key (or the part of it) that was refused.
        key: String,
        /// The shape that was expected.
        expected: String,
    },

    /// A timestamp cannot be written as, or was not, a canonical key timestamp
    /// `YYYY-MM-DDTHH:MM:SS.mmmZ` (years 0000 to 9999).
    #[error(
        "timestamp {value:?} is not a key timestamp (YYYY-MM-DDTHH:MM:SS.mmmZ, years 0000-9999)"
    )]
    InvalidTimestamp {
        /// The offending timestamp, as text.
        value: String,
    },

    /// A sharded key was asked for with zero shards.
    #[error("shard count must be at least 1, got {count}")]
    InvalidShardCount {
        /// The shard count given.
        count: u32,
    },
}

/// First 32 characters of a key, for error messages.
pub(crate) fn head(key: &str) -> String {
    key.chars().take(32).collect()
}
