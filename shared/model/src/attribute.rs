//! Declared attributes: their types, and how a value becomes a key part that sorts as its type does.
//!
//! A constraint of an attribute holds for every value of it, whether or not (and in whichever key)
//! the attribute is used: [`Attribute::check`] enforces it on every version, and a key part is only
//! made of a value that passes it.
//!
//! - numbers: any DynamoDB number; with a declared `width`, a non-negative integer of at most `width`
//!   digits, zero-padded to `width` in a string key (a negative number or one wider than its width
//!   is refused, wherever the attribute is used: in a string key template, in a native number key
//!   attribute of a multi-attribute index, or in no key at all; plain padding would turn -5 into
//!   `00-5` and sort it wrong). Without a `width` a number is a key part only as a non-negative
//!   integer, without leading zeros;
//! - timestamps: RFC 3339 in any offset, written as fixed-width UTC `YYYY-MM-DDTHH:MM:SS.sssZ`;
//! - strings: as given, or upper/lower case only when the model says so (never silently);
//! - enums: one of the declared values, as written; booleans: `true` / `false`.

use chrono::{DateTime, SecondsFormat, Utc};
use cqrs_keys::validate_component;

use crate::template::Bucket;
use crate::value::ValueRef;

/// The type of an attribute.
///
/// ```
/// use cqrs_model::AttrType;
///
/// assert_eq!(AttrType::parse("timestamp"), Some(AttrType::Timestamp));
/// assert!(AttrType::Map.is_key_type() == false);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AttrType {
    /// A string.
    String,
    /// A number (DynamoDB `N`).
    Number,
    /// `true` or `false`.
    Boolean,
    /// An RFC 3339 date-time string.
    Timestamp,
    /// A string out of a declared list.
    Enum,
    /// A JSON object.
    Map,
    /// A JSON array.
    List,
}

impl AttrType {
    /// Reads a type name as the model file spells it.
    ///
    /// ```
    /// assert_eq!(cqrs_model::AttrType::parse("text"), None);
    /// ```
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "string" => AttrType::String,
            "number" => AttrType::Number,
            "boolean" => AttrType::Boolean,
            "timestamp" => AttrType::Timestamp,
            "enum" => AttrType::Enum,
            "map" => AttrType::Map,
            "list" => AttrType::List,
            _ => return None,
        })
    }

    /// The name as the model file spells it.
    ///
    /// ```
    /// assert_eq!(cqrs_model::AttrType::Enum.name(), "enum");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            AttrType::String => "string",
            AttrType::Number => "number",
            AttrType::Boolean => "boolean",
            AttrType::Timestamp => "timestamp",
            AttrType::Enum => "enum",
            AttrType::Map => "map",
            AttrType::List => "list",
        }
    }

    /// Whether values of this type can be key parts (maps and lists cannot).
    ///
    /// ```
    /// assert!(cqrs_model::AttrType::Number.is_key_type());
    /// ```
    pub fn is_key_type(self) -> bool {
        !matches!(self, AttrType::Map | AttrType::List)
    }
}

/// Explicit casing of a string key part.
///
/// ```
/// assert_eq!(cqrs_model::Case::Upper.apply("us-ca"), "US-CA");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Case {
    /// Upper case in keys.
    Upper,
    /// Lower case in keys.
    Lower,
}

impl Case {
    /// The value in this case.
    ///
    /// ```
    /// assert_eq!(cqrs_model::Case::Lower.apply("ABC"), "abc");
    /// ```
    pub fn apply(self, value: &str) -> String {
        match self {
            Case::Upper => value.to_uppercase(),
            Case::Lower => value.to_lowercase(),
        }
    }
}

/// One declared attribute of an entity.
///
/// ```
/// use cqrs_model::{AttrType, Attribute};
///
/// let total = Attribute::new(AttrType::Number).with_width(6);
/// assert_eq!(total.key_part(cqrs_model::ValueRef::Num("42"), None).unwrap(), "000042");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attribute {
    /// Its type.
    pub ty: AttrType,
    /// Whether every version must have it.
    pub required: bool,
    /// The allowed values of an enum.
    pub values: Vec<String>,
    /// Zero-padding width of a number in keys; a number with a width is a non-negative integer of
    /// at most this many digits, wherever it is used ([`Attribute::check`]).
    pub width: Option<u32>,
    /// Maximum length in bytes of a string (or enum) value.
    pub max: Option<usize>,
    /// Explicit casing in keys.
    pub case: Option<Case>,
    /// Declared as growing with time (an auto-increment, a timestamp): the key-design lint warns when
    /// it leads a partition key.
    pub sequential: bool,
}

/// The fixed width of a timestamp key part.
pub const TIMESTAMP_WIDTH: usize = 24;

impl Attribute {
    /// An optional attribute of this type with no further constraint.
    ///
    /// ```
    /// let a = cqrs_model::Attribute::new(cqrs_model::AttrType::String);
    /// assert!(!a.required);
    /// ```
    pub fn new(ty: AttrType) -> Self {
        Attribute {
            ty,
            required: false,
            values: Vec::new(),
            width: None,
            max: None,
            case: None,
            sequential: false,
        }
    }

    /// The same with a zero-padding width.
    ///
    /// ```
    /// let a = cqrs_model::Attribute::new(cqrs_model::AttrType::Number).with_width(3);
    /// assert_eq!(a.width, Some(3));
    /// ```
    pub fn with_width(mut self, width: u32) -> Self {
        self.width = Some(width);
        self
    }

    /// Checks a value against the declared type (and enum values, maximum length, and a number's
    /// `width`: a non-negative integer of at most `width` digits, the rule of its key part, whether
    /// or not the attribute is in a key). `Err` says what is wrong, for a 400 that names the
    /// attribute.
    ///
    /// ```
    /// use cqrs_model::{AttrType, Attribute, ValueRef};
    ///
    /// let at = Attribute::new(AttrType::Timestamp);
    /// assert!(at.check(ValueRef::Str("2024-01-15T10:30:00Z")).is_ok());
    /// assert!(at.check(ValueRef::Str("yesterday")).is_err());
    /// assert!(at.check(ValueRef::Num("1")).is_err());
    ///
    /// let fee = Attribute::new(AttrType::Number).with_width(6);
    /// assert!(fee.check(ValueRef::Num("999999")).is_ok());
    /// assert!(fee.check(ValueRef::Num("1000000")).is_err());
    /// assert!(fee.check(ValueRef::Num("-5")).is_err());
    /// assert!(fee.check(ValueRef::Num("1.5")).is_err());
    /// // Without a width, any number.
    /// assert!(Attribute::new(AttrType::Number).check(ValueRef::Num("-1.5")).is_ok());
    /// ```
    pub fn check(&self, value: ValueRef<'_>) -> Result<(), String> {
        let wrong = || {
            Err(format!(
                "must be a {}, not a {}",
                self.ty.name(),
                value.type_name()
            ))
        };
        match (self.ty, value) {
            (_, ValueRef::Null) => wrong(),
            (AttrType::String, ValueRef::Str(s)) => self.check_len(s),
            (AttrType::Number, ValueRef::Num(n)) => match self.width {
                // The key part's rule, for every value: a number with a width always fits it.
                Some(width) => key_number(n, Some(width)).map(|_| ()),
                None => Ok(()),
            },
            (AttrType::Boolean, ValueRef::Bool(_)) => Ok(()),
            (AttrType::Timestamp, ValueRef::Str(s)) => parse_timestamp(s).map(|_| ()),
            (AttrType::Enum, ValueRef::Str(s)) => {
                if self.values.iter().any(|v| v == s) {
                    Ok(())
                } else {
                    Err(format!("{s:?} is not one of {:?}", self.values))
                }
            }
            (AttrType::Map, ValueRef::Other("map")) | (AttrType::List, ValueRef::Other("list")) => {
                Ok(())
            }
            _ => wrong(),
        }
    }

    fn check_len(&self, s: &str) -> Result<(), String> {
        match self.max {
            Some(max) if s.len() > max => Err(format!(
                "is {} bytes, over the model's maximum of {max}",
                s.len()
            )),
            _ => Ok(()),
        }
    }

    /// The value as a key part (see the module docs), cut to `bucket` for timestamps.
    ///
    /// ```
    /// use cqrs_model::{AttrType, Attribute, Bucket, ValueRef};
    ///
    /// let at = Attribute::new(AttrType::Timestamp);
    /// let v = ValueRef::Str("2024-01-15T19:30:00+09:00");
    /// assert_eq!(at.key_part(v, None).unwrap(), "2024-01-15T10:30:00.000Z");
    /// assert_eq!(at.key_part(v, Some(Bucket::Month)).unwrap(), "2024-01");
    ///
    /// let n = Attribute::new(AttrType::Number).with_width(4);
    /// assert!(n.key_part(ValueRef::Num("-5"), None).is_err());
    /// assert!(n.key_part(ValueRef::Num("12345"), None).is_err());
    /// ```
    pub fn key_part(&self, value: ValueRef<'_>, bucket: Option<Bucket>) -> Result<String, String> {
        if self.ty != AttrType::Timestamp {
            // Timestamps are checked by their parse below, once.
            self.check(value)?;
        }
        let part = match (self.ty, value) {
            (AttrType::Timestamp, ValueRef::Str(s)) => {
                let full = format_timestamp(&parse_timestamp(s)?)?;
                match bucket {
                    Some(b) => full.get(..b.width()).unwrap_or_default().to_string(),
                    None => full,
                }
            }
            (AttrType::Number, ValueRef::Num(n)) => key_number(n, self.width)?,
            (AttrType::Boolean, ValueRef::Bool(b)) => b.to_string(),
            (AttrType::String, ValueRef::Str(s)) => match self.case {
                Some(case) => case.apply(s),
                None => s.to_string(),
            },
            (AttrType::Enum, ValueRef::Str(s)) => s.to_string(),
            (AttrType::Timestamp, other) => {
                return Err(format!("must be a timestamp, not a {}", other.type_name()));
            }
            _ => return Err(format!("a {} cannot be part of a key", self.ty.name())),
        };
        validate_component("key part", &part).map_err(|e| e.to_string())?;
        Ok(part)
    }

    /// Whether `text` is a key part this attribute can produce (read back from a key).
    ///
    /// ```
    /// use cqrs_model::{AttrType, Attribute};
    ///
    /// let n = Attribute::new(AttrType::Number).with_width(3);
    /// assert!(n.produces("007", None));
    /// assert!(!n.produces("7", None));
    /// ```
    pub fn produces(&self, text: &str, bucket: Option<Bucket>) -> bool {
        match self.ty {
            AttrType::Enum => self.values.iter().any(|v| v == text),
            AttrType::Boolean => text == "true" || text == "false",
            AttrType::Number => {
                !text.is_empty()
                    && text.bytes().all(|b| b.is_ascii_digit())
                    && match self.width {
                        Some(w) => text.len() == w as usize,
                        // Without a width a number is written without leading zeros.
                        None => text == "0" || !text.starts_with('0'),
                    }
            }
            AttrType::Timestamp => {
                let width = bucket.map_or(TIMESTAMP_WIDTH, Bucket::width);
                text.len() == width
                    && text
                        .bytes()
                        .zip("DDDD-DD-DDTDD:DD:DD.DDDZ".bytes())
                        .all(|(c, p)| {
                            if p == b'D' {
                                c.is_ascii_digit()
                            } else {
                                c == p
                            }
                        })
            }
            AttrType::String => match self.case {
                Some(Case::Upper) => text == text.to_uppercase(),
                Some(Case::Lower) => text == text.to_lowercase(),
                None => true,
            },
            AttrType::Map | AttrType::List => false,
        }
    }

    /// Appends the value as a key part to `out` ([`Attribute::key_part`] without the intermediate
    /// string for plain strings and enums). `checked`: the value was already checked against the
    /// type ([`Attribute::check`]).
    pub(crate) fn push_key_part(
        &self,
        value: ValueRef<'_>,
        bucket: Option<Bucket>,
        checked: bool,
        out: &mut String,
    ) -> Result<(), String> {
        match (self.ty, value, self.case) {
            (AttrType::String, ValueRef::Str(s), None) | (AttrType::Enum, ValueRef::Str(s), _) => {
                if !checked {
                    self.check(value)?;
                }
                validate_component("key part", s).map_err(|e| e.to_string())?;
                out.push_str(s);
                Ok(())
            }
            _ => {
                out.push_str(&self.key_part(value, bucket)?);
                Ok(())
            }
        }
    }

    /// The longest key part this attribute can give (bytes), `None` when unbounded.
    pub(crate) fn max_key_len(&self, bucket: Option<Bucket>) -> Option<usize> {
        match self.ty {
            AttrType::Timestamp => Some(bucket.map_or(TIMESTAMP_WIDTH, Bucket::width)),
            AttrType::Number => Some(self.width.map_or(38, |w| w as usize)),
            AttrType::Boolean => Some(5),
            AttrType::Enum => self.values.iter().map(String::len).max(),
            AttrType::String => self.max,
            AttrType::Map | AttrType::List => None,
        }
    }
}

/// Parses an RFC 3339 timestamp (any offset) into UTC.
///
/// ```
/// assert!(cqrs_model::parse_timestamp("2024-01-15T10:30:00.123Z").is_ok());
/// assert!(cqrs_model::parse_timestamp("2024-01-15").is_err());
/// ```
pub fn parse_timestamp(s: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| format!("{s:?} is not an RFC 3339 timestamp ({e})"))
}

/// A timestamp as a fixed-width UTC key part, `YYYY-MM-DDTHH:MM:SS.sssZ` (milliseconds; years 0 to
/// 9999 only, so that every key part has the same width).
///
/// ```
/// let t = cqrs_model::parse_timestamp("2024-01-15T10:30:00.123456Z").unwrap();
/// assert_eq!(cqrs_model::format_timestamp(&t).unwrap(), "2024-01-15T10:30:00.123Z");
/// ```
pub fn format_timestamp(t: &DateTime<Utc>) -> Result<String, String> {
    let text = t.to_rfc3339_opts(SecondsFormat::Millis, true);
    if text.len() == TIMESTAMP_WIDTH {
        Ok(text)
    } else {
        Err(format!(
            "{text:?}: only years 0000 to 9999 keep timestamps fixed-width"
        ))
    }
}

/// A non-negative integer as a key part: without leading zeros, or zero-padded to `width`. Also the
/// whole rule of a number with a `width` ([`Attribute::check`]), so the two never differ.
fn key_number(text: &str, width: Option<u32>) -> Result<String, String> {
    let rule = || match width {
        Some(w) => format!("a number of width {w} is a non-negative integer of at most {w} digits"),
        None => "only non-negative integers can be key parts (their text would not sort)".into(),
    };
    if text.starts_with('-') {
        return Err(format!("{text} is negative: {}", rule()));
    }
    let digits = text.strip_prefix('+').unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{text} is not a whole number: {}", rule()));
    }
    let trimmed = digits.trim_start_matches('0');
    let trimmed = if trimmed.is_empty() { "0" } else { trimmed };
    match width {
        None => Ok(trimmed.to_string()),
        Some(w) if trimmed.len() > w as usize => Err(format!(
            "{text} has {} digits, wider than its declared width {w}",
            trimmed.len()
        )),
        Some(w) => Ok(format!("{trimmed:0>width$}", width = w as usize)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padded_numbers_sort_as_numbers() {
        let a = Attribute::new(AttrType::Number).with_width(5);
        let mut parts: Vec<String> = ["9", "10", "0", "99999", "100"]
            .iter()
            .map(|n| a.key_part(ValueRef::Num(n), None).unwrap())
            .collect();
        parts.sort();
        assert_eq!(parts, ["00000", "00009", "00010", "00100", "99999"]);
    }

    #[test]
    fn numbers_that_are_not_whole_are_refused() {
        let a = Attribute::new(AttrType::Number);
        for bad in ["1.5", "1e3", "", "-0"] {
            assert!(a.key_part(ValueRef::Num(bad), None).is_err(), "{bad}");
        }
        assert_eq!(a.key_part(ValueRef::Num("007"), None).unwrap(), "7");
    }

    #[test]
    fn a_width_holds_for_every_value_not_only_in_keys() {
        let a = Attribute::new(AttrType::Number).with_width(6);
        for good in ["0", "7", "000123", "999999", "+42"] {
            assert_eq!(a.check(ValueRef::Num(good)), Ok(()), "{good}");
            assert!(a.key_part(ValueRef::Num(good), None).is_ok(), "{good}");
        }
        for bad in ["1000000", "-5", "-0", "1.5", "1e3", "0000001000000"] {
            let error = a.check(ValueRef::Num(bad)).unwrap_err();
            // The same refusal as the key part's: one rule.
            assert_eq!(
                a.key_part(ValueRef::Num(bad), None).unwrap_err(),
                error,
                "{bad}"
            );
        }
        assert!(
            a.check(ValueRef::Num("1000000"))
                .unwrap_err()
                .contains("wider than its declared width 6")
        );
        // Without a width any number checks; only a key part needs a whole number.
        let free = Attribute::new(AttrType::Number);
        for any in ["-5", "1.5", "12345678901234567890.1", "1E+125"] {
            assert_eq!(free.check(ValueRef::Num(any)), Ok(()), "{any}");
        }
    }

    #[test]
    fn casing_only_when_declared() {
        let mut a = Attribute::new(AttrType::String);
        assert_eq!(a.key_part(ValueRef::Str("Ab"), None).unwrap(), "Ab");
        a.case = Some(Case::Upper);
        assert_eq!(a.key_part(ValueRef::Str("Ab"), None).unwrap(), "AB");
    }

    #[test]
    fn separators_in_values_are_refused() {
        let a = Attribute::new(AttrType::String);
        assert!(a.key_part(ValueRef::Str("a#b"), None).is_err());
        assert!(a.key_part(ValueRef::Str("a@b"), None).is_err());
        assert!(a.key_part(ValueRef::Str(""), None).is_err());
    }
}
