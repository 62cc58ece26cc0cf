//! Keys of mbc-cqrs-serverless' sequence, master-data, setting and TTL-policy items.
//!
//! The layouts are mbc's, so both frameworks read the same tables:
//!
//! | item | pk | sk |
//! | --- | --- | --- |
//! | a sequence counter (sequences table) | `SEQ#tenant` | `typeCode[#code1..#code5]#rotateValue` |
//! | a sequence's format (data table) | `MASTER#tenant` | `MASTER_DATA#typeCode` |
//! | a setting | `MASTER#tenant` | `SETTING#category#code` |
//! | master data | `MASTER#tenant` | `DATA#category#code` |
//! | a copy of master data from `common` | `MASTER#tenant` | `COPY#category#code` |
//! | a TTL policy | `MASTER#tenant` | `TTL#table` |
//!
//! Every builder validates its components (non-empty, no `#`, `@` or control character), so a
//! caller's value can never add a segment to a key.
//!
//! ```
//! use cqrs_keys::master::{sequence_sk, setting_sk};
//!
//! assert_eq!(sequence_sk("invoice", &["A"], "2026").unwrap(), "invoice#A#2026");
//! assert_eq!(setting_sk("sequence", "timeZone").unwrap(), "SETTING#sequence#timeZone");
//! ```

use crate::composite::composite_key;
use crate::error::KeyError;
use crate::helpers::{master_pk, seq_pk, ttl_sk};
use crate::validate::{validate_component, validate_partition_key, validate_sort_key};

/// Prefix of a sequence format's sort key (`MASTER_DATA#typeCode`), as in mbc.
///
/// ```
/// assert_eq!(cqrs_keys::master::SEQUENCE_FORMAT_PREFIX, "MASTER_DATA");
/// ```
pub const SEQUENCE_FORMAT_PREFIX: &str = "MASTER_DATA";

/// Prefix of a setting's sort key (`SETTING#category#code`).
///
/// ```
/// assert_eq!(cqrs_keys::master::SETTING_PREFIX, "SETTING");
/// ```
pub const SETTING_PREFIX: &str = "SETTING";

/// Prefix of a master-data item's sort key (`DATA#category#code`).
///
/// ```
/// assert_eq!(cqrs_keys::master::DATA_PREFIX, "DATA");
/// ```
pub const DATA_PREFIX: &str = "DATA";

/// Prefix of a copy record's sort key (`COPY#category#code`).
///
/// ```
/// assert_eq!(cqrs_keys::master::COPY_PREFIX, "COPY");
/// ```
pub const COPY_PREFIX: &str = "COPY";

/// The most `code1`..`code5` parameters a sequence key takes (mbc's limit).
///
/// ```
/// assert_eq!(cqrs_keys::master::MAX_SEQUENCE_CODES, 5);
/// ```
pub const MAX_SEQUENCE_CODES: usize = 5;

/// `MASTER#tenant`, validated (unlike [`master_pk`], which defaults an empty tenant).
///
/// ```
/// assert_eq!(cqrs_keys::master::tenant_master_pk("t1").unwrap(), "MASTER#t1");
/// assert!(cqrs_keys::master::tenant_master_pk("t#1").is_err());
/// ```
pub fn tenant_master_pk(tenant: &str) -> Result<String, KeyError> {
    validate_component("tenant", tenant)?;
    let pk = master_pk(Some(tenant));
    validate_partition_key(&pk)?;
    Ok(pk)
}

/// `SEQ#tenant`, validated.
///
/// ```
/// assert_eq!(cqrs_keys::master::tenant_seq_pk("t1").unwrap(), "SEQ#t1");
/// assert!(cqrs_keys::master::tenant_seq_pk("").is_err());
/// ```
pub fn tenant_seq_pk(tenant: &str) -> Result<String, KeyError> {
    validate_component("tenant", tenant)?;
    let pk = seq_pk(Some(tenant));
    validate_partition_key(&pk)?;
    Ok(pk)
}

/// A sequence counter's sort key: `typeCode`, the given codes (`code1`..`code5`, in order), and
/// the rotation value (`none`, `yyyy`, `yyyymm`, `yyyymmdd` or the fiscal year), joined by `#`.
///
/// ```
/// use cqrs_keys::master::sequence_sk;
///
/// assert_eq!(sequence_sk("invoice", &[], "none").unwrap(), "invoice#none");
/// assert_eq!(sequence_sk("invoice", &["A", "B"], "202604").unwrap(), "invoice#A#B#202604");
/// assert!(sequence_sk("in#voice", &[], "none").is_err());
/// assert!(sequence_sk("invoice", &["1", "2", "3", "4", "5", "6"], "none").is_err());
/// ```
pub fn sequence_sk(
    type_code: &str,
    codes: &[&str],
    rotate_value: &str,
) -> Result<String, KeyError> {
    if codes.len() > MAX_SEQUENCE_CODES {
        return Err(KeyError::Malformed {
            key: codes.join(","),
            expected: format!("at most {MAX_SEQUENCE_CODES} codes (code1..code5)"),
        });
    }
    validate_component("typeCode", type_code)?;
    let mut parts = Vec::with_capacity(codes.len() + 2);
    parts.push(type_code);
    parts.extend_from_slice(codes);
    parts.push(rotate_value);
    let sk = composite_key(&parts)?;
    validate_sort_key(&sk)?;
    Ok(sk)
}

/// The sort key of a sequence's format in the tenant's master data: `MASTER_DATA#typeCode`.
///
/// ```
/// assert_eq!(cqrs_keys::master::sequence_format_sk("invoice").unwrap(), "MASTER_DATA#invoice");
/// ```
pub fn sequence_format_sk(type_code: &str) -> Result<String, KeyError> {
    two_part(SEQUENCE_FORMAT_PREFIX, "typeCode", type_code)
}

/// A setting's sort key: `SETTING#category#code`.
///
/// ```
/// assert_eq!(cqrs_keys::master::setting_sk("ui", "theme").unwrap(), "SETTING#ui#theme");
/// assert!(cqrs_keys::master::setting_sk("ui", "").is_err());
/// ```
pub fn setting_sk(category: &str, code: &str) -> Result<String, KeyError> {
    three_part(SETTING_PREFIX, category, code)
}

/// A master-data item's sort key: `DATA#category#code`.
///
/// ```
/// assert_eq!(cqrs_keys::master::data_sk("country", "JP").unwrap(), "DATA#country#JP");
/// ```
pub fn data_sk(category: &str, code: &str) -> Result<String, KeyError> {
    three_part(DATA_PREFIX, category, code)
}

/// A copy record's sort key: `COPY#category#code` (the copy of `DATA#category#code`).
///
/// ```
/// assert_eq!(cqrs_keys::master::copy_sk("country", "JP").unwrap(), "COPY#country#JP");
/// ```
pub fn copy_sk(category: &str, code: &str) -> Result<String, KeyError> {
    three_part(COPY_PREFIX, category, code)
}

/// The `begins_with` prefix of master data: `DATA#` for all of it, `DATA#category#` for one
/// category.
///
/// ```
/// use cqrs_keys::master::data_sk_prefix;
///
/// assert_eq!(data_sk_prefix(None).unwrap(), "DATA#");
/// assert_eq!(data_sk_prefix(Some("country")).unwrap(), "DATA#country#");
/// assert!(data_sk_prefix(Some("a#b")).is_err());
/// ```
pub fn data_sk_prefix(category: Option<&str>) -> Result<String, KeyError> {
    let mut prefix = String::from(DATA_PREFIX);
    prefix.push(crate::KEY_SEPARATOR);
    if let Some(category) = category {
        validate_component("category", category)?;
        prefix.push_str(category);
        prefix.push(crate::KEY_SEPARATOR);
    }
    Ok(prefix)
}

/// The `(category, code)` of a master-data sort key `DATA#category#code`; `None` for any other
/// shape.
///
/// ```
/// use cqrs_keys::master::parse_data_sk;
///
/// assert_eq!(parse_data_sk("DATA#country#JP"), Some(("country", "JP")));
/// assert_eq!(parse_data_sk("SETTING#a#b"), None);
/// assert_eq!(parse_data_sk("DATA#a#b#c"), None);
/// ```
pub fn parse_data_sk(sk: &str) -> Option<(&str, &str)> {
    let rest = sk.strip_prefix(DATA_PREFIX)?.strip_prefix('#')?;
    let (category, code) = rest.split_once('#')?;
    (validate_component("category", category).is_ok() && validate_component("code", code).is_ok())
        .then_some((category, code))
}

/// The sort key of a TTL policy: `TTL#table`, where `table` is the entity name (or, for items of
/// no model entity, their type), validated.
///
/// ```
/// assert_eq!(cqrs_keys::master::ttl_policy_sk("order").unwrap(), "TTL#order");
/// assert!(cqrs_keys::master::ttl_policy_sk("a#b").is_err());
/// ```
pub fn ttl_policy_sk(table: &str) -> Result<String, KeyError> {
    validate_component("table", table)?;
    let sk = ttl_sk(table);
    validate_sort_key(&sk)?;
    Ok(sk)
}

fn two_part(prefix: &str, part: &str, value: &str) -> Result<String, KeyError> {
    validate_component(part, value)?;
    let sk = composite_key(&[prefix, value])?;
    validate_sort_key(&sk)?;
    Ok(sk)
}

fn three_part(prefix: &str, category: &str, code: &str) -> Result<String, KeyError> {
    validate_component("category", category)?;
    validate_component("code", code)?;
    let sk = composite_key(&[prefix, category, code])?;
    validate_sort_key(&sk)?;
    Ok(sk)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_value_adds_a_segment() {
        for bad in ["a#b", "a@b", "", "a\u{1}"] {
            assert!(sequence_sk(bad, &[], "none").is_err(), "{bad:?}");
            assert!(sequence_sk("t", &[bad], "none").is_err(), "{bad:?}");
            assert!(setting_sk(bad, "c").is_err(), "{bad:?}");
            assert!(data_sk("c", bad).is_err(), "{bad:?}");
            assert!(tenant_seq_pk(bad).is_err(), "{bad:?}");
            assert!(ttl_policy_sk(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn data_keys_round_trip() {
        let sk = data_sk("country", "JP").unwrap();
        assert_eq!(parse_data_sk(&sk), Some(("country", "JP")));
        assert_eq!(copy_sk("country", "JP").unwrap(), "COPY#country#JP");
    }
}
