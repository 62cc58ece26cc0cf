//! Version suffixes on sort keys: `sk@version`.
//!
//! The command and history tables store every version of an item under
//! `sk@1`, `sk@2`, ...; the data table stores the latest under the bare `sk`.
//!
//! **Several `@`.** A base sort key never contains `@` (validation refuses
//! it), so the version is whatever follows the *last* `@`. Unlike
//! mbc-cqrs-serverless's `removeSortKeyVersion`, which cuts at the last `@`
//! whatever follows, this module treats the text after the last `@` as a
//! version only when it is one: an optional `-` and ASCII digits that fit an
//! `i64`. So `remove_sort_key_version("a@b")` is `"a@b"` (mbc: `"a"`) and
//! `sort_key_version("a@b")` is [`VERSION_LATEST`] (mbc: `NaN`); this keeps a
//! stray `@` from silently truncating a key. [`parse_sort_key_version`] is
//! the strict form that refuses such a suffix.
//!
//! ```
//! use cqrs_keys::version::{add_sort_key_version, remove_sort_key_version, sort_key_version};
//! let sk = add_sort_key_version("ORDER#o1", 2);
//! assert_eq!(sk, "ORDER#o1@2");
//! assert_eq!(remove_sort_key_version(&sk), "ORDER#o1");
//! assert_eq!(sort_key_version(&sk), 2);
//! ```

use std::fmt::Write as _;

use crate::constants::{VER_SEPARATOR, VERSION_LATEST};
use crate::error::KeyError;

/// The prefix every versioned sort key of the base `sk` starts with (`sk@`): what a
/// `begins_with(sk, :prefix)` query over all versions of one item needs.
///
/// ```
/// use cqrs_keys::{add_sort_key_version, sort_key_version_prefix};
///
/// assert_eq!(sort_key_version_prefix("CAT#001"), "CAT#001@");
/// assert!(add_sort_key_version("CAT#001", 12).starts_with(&sort_key_version_prefix("CAT#001")));
/// // Another item whose base merely starts the same way does not match.
/// assert!(!add_sort_key_version("CAT#0012", 1).starts_with(&sort_key_version_prefix("CAT#001")));
/// ```
pub fn sort_key_version_prefix(sk: &str) -> String {
    let base = remove_sort_key_version(sk);
    let mut prefix = String::with_capacity(base.len() + 1);
    prefix.push_str(base);
    prefix.push(VER_SEPARATOR);
    prefix
}

/// Appends `@version` to a sort key, replacing any version it already has
/// (as mbc's `addSortKeyVersion` does).
///
/// ```
/// use cqrs_keys::add_sort_key_version;
///
/// assert_eq!(add_sort_key_version("CAT#001", 1), "CAT#001@1");
/// assert_eq!(add_sort_key_version("CAT#001@1", 2), "CAT#001@2");
/// ```
pub fn add_sort_key_version(sk: &str, version: i64) -> String {
    let base = remove_sort_key_version(sk);
    let mut out = String::with_capacity(base.len() + 21);
    out.push_str(base);
    out.push(VER_SEPARATOR);
    // Writing to a String cannot fail.
    let _ = write!(out, "{version}");
    out
}

/// The sort key without its version suffix; the key itself when it has none.
///
/// Cuts at the last `@` only when what follows is a version (see the module
/// docs for the difference from mbc).
///
/// ```
/// use cqrs_keys::remove_sort_key_version;
///
/// assert_eq!(remove_sort_key_version("CAT#001@3"), "CAT#001");
/// assert_eq!(remove_sort_key_version("CAT#001"), "CAT#001");
/// assert_eq!(remove_sort_key_version("a@b@7"), "a@b");
/// assert_eq!(remove_sort_key_version("mail@example"), "mail@example");
/// ```
pub fn remove_sort_key_version(sk: &str) -> &str {
    split_version(sk).map_or(sk, |(base, _)| base)
}

/// The version of a sort key, or [`VERSION_LATEST`] (-1) when it has none.
///
/// Lenient, like mbc's `getSortKeyVersion`: a suffix that is not a number
/// also gives [`VERSION_LATEST`] (mbc gives `NaN`, and `0` for a bare
/// trailing `@`). Use [`parse_sort_key_version`] to refuse such keys.
///
/// ```
/// use cqrs_keys::{sort_key_version, VERSION_LATEST};
///
/// assert_eq!(sort_key_version("CAT#001@3"), 3);
/// assert_eq!(sort_key_version("CAT#001"), VERSION_LATEST);
/// ```
pub fn sort_key_version(sk: &str) -> i64 {
    split_version(sk).map_or(VERSION_LATEST, |(_, v)| v)
}

/// Splits a sort key into its base and its version, refusing a suffix after
/// the last `@` that is not a number.
///
/// Only the suffix is checked; check the base with
/// [`validate_sort_key`](crate::validate_sort_key) if it comes from outside.
///
/// ```
/// use cqrs_keys::{parse_sort_key_version, KeyError};
///
/// assert_eq!(parse_sort_key_version("CAT#001@3"), Ok(("CAT#001", Some(3))));
/// assert_eq!(parse_sort_key_version("CAT#001"), Ok(("CAT#001", None)));
/// assert_eq!(
///     parse_sort_key_version("CAT#001@x"),
///     Err(KeyError::InvalidVersion { sk: "CAT#001@x".into(), suffix: "x".into() })
/// );
/// ```
pub fn parse_sort_key_version(sk: &str) -> Result<(&str, Option<i64>), KeyError> {
    match sk.rfind(VER_SEPARATOR) {
        None => Ok((sk, None)),
        Some(at) => {
            let suffix = &sk[at + 1..];
            match parse_version_number(suffix) {
                Some(v) => Ok((&sk[..at], Some(v))),
                None => Err(KeyError::InvalidVersion {
                    sk: sk.into(),
                    suffix: suffix.into(),
                }),
            }
        }
    }
}

fn split_version(sk: &str) -> Option<(&str, i64)> {
    let at = sk.rfind(VER_SEPARATOR)?;
    let v = parse_version_number(&sk[at + 1..])?;
    Some((&sk[..at], v))
}

/// An optional `-`, then one or more ASCII digits, within `i64`.
fn parse_version_number(s: &str) -> Option<i64> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}
