//! [`Value`]: the JSON-like data of an item's `attributes`, with numbers kept exact.
//!
//! A `serde_json::Value` holds a number as an `f64`, `i64` or `u64`, so `12345678901234567891` or
//! `0.12345678901234567891` would change on the way through. [`Value`] carries a [`Number`] as its
//! text instead. It converts to and from DynamoDB's `AttributeValue` by hand (`N` keeps its text),
//! serialises to JSON with the number text verbatim, and deserialises from JSON exactly (through
//! serde_json's `RawValue` and this crate's reader, [`crate::parse_json`]). It serialises to and
//! from JSON only: give it to DynamoDB through [`Value::to_attribute_value`] or
//! [`crate::Item::to_attributes`], never through `serde_dynamo`.

use std::collections::BTreeMap;
use std::fmt;

use aws_sdk_dynamodb::types::AttributeValue;
use serde::de::Error as _;
use serde::ser::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::{Number, NumberError};

/// An object of [`Value`]s: an item's `attributes`, or a map inside them. Keys are sorted.
pub type Map = BTreeMap<String, Value>;

/// One value inside an item's `attributes`.
///
/// ```
/// use cqrs_item::Value;
///
/// let value: Value = serde_json::from_str(r#"{"big": 12345678901234567891, "dec": 0.12345678901234567891}"#).unwrap();
/// assert_eq!(
///     serde_json::to_string(&value).unwrap(),
///     r#"{"big":12345678901234567891,"dec":0.12345678901234567891}"#
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Value {
    /// JSON `null`, DynamoDB `NULL`.
    #[default]
    Null,
    /// JSON `true` / `false`, DynamoDB `BOOL`.
    Bool(bool),
    /// A number, exact, DynamoDB `N`.
    Number(Number),
    /// A string, DynamoDB `S`.
    String(String),
    /// An array, DynamoDB `L`.
    List(Vec<Value>),
    /// An object, DynamoDB `M`.
    Map(Map),
}

/// Why a DynamoDB attribute value is not a [`Value`]: a number DynamoDB should never have
/// returned, or a type this crate does not know.
///
/// ```
/// use aws_sdk_dynamodb::types::AttributeValue;
/// let err = cqrs_item::Value::from_attribute_value(AttributeValue::N("x".into())).unwrap_err();
/// assert!(err.to_string().contains("not a number"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}{}{reason}", if path.is_empty() { "" } else { ": " })]
pub struct ValueError {
    /// Where, inside the value (`a.b[2]`); empty for the value itself.
    pub path: String,
    /// What is wrong.
    pub reason: String,
}

impl ValueError {
    fn at(self, segment: &str) -> Self {
        let path = if self.path.is_empty() {
            segment.to_string()
        } else if self.path.starts_with('[') {
            format!("{segment}{}", self.path)
        } else {
            format!("{segment}.{}", self.path)
        };
        ValueError { path, ..self }
    }
}

impl Value {
    /// The DynamoDB form: `NULL`, `BOOL`, `N` (the exact text), `S`, `L`, `M`.
    ///
    /// ```
    /// use aws_sdk_dynamodb::types::AttributeValue;
    /// use cqrs_item::{Number, Value};
    /// let n = Value::Number(Number::parse("0.12345678901234567891").unwrap());
    /// assert_eq!(n.to_attribute_value(), AttributeValue::N("0.12345678901234567891".into()));
    /// ```
    pub fn to_attribute_value(&self) -> AttributeValue {
        match self {
            Value::Null => AttributeValue::Null(true),
            Value::Bool(b) => AttributeValue::Bool(*b),
            Value::Number(n) => AttributeValue::N(n.as_str().to_string()),
            Value::String(s) => AttributeValue::S(s.clone()),
            Value::List(list) => {
                AttributeValue::L(list.iter().map(Value::to_attribute_value).collect())
            }
            Value::Map(map) => AttributeValue::M(
                map.iter()
                    .map(|(k, v)| (k.clone(), v.to_attribute_value()))
                    .collect(),
            ),
        }
    }

    /// Reads a DynamoDB attribute value. `N` keeps its digits (in canonical form); number sets
    /// and string sets become lists, and binaries lists of byte values, as items written by other
    /// tools may hold them (this crate never writes sets or binaries).
    ///
    /// ```
    /// use aws_sdk_dynamodb::types::AttributeValue;
    /// let value = cqrs_item::Value::from_attribute_value(AttributeValue::N("12345678901234567891".into())).unwrap();
    /// assert_eq!(value.to_string(), "12345678901234567891");
    /// ```
    pub fn from_attribute_value(value: AttributeValue) -> Result<Value, ValueError> {
        let number = |text: String| {
            Number::parse(&text).map_err(|e| ValueError {
                path: String::new(),
                reason: format!("{text:?} {e}"),
            })
        };
        Ok(match value {
            AttributeValue::Null(_) => Value::Null,
            AttributeValue::Bool(b) => Value::Bool(b),
            AttributeValue::N(text) => Value::Number(number(text)?),
            AttributeValue::S(s) => Value::String(s),
            AttributeValue::L(list) => Value::List(
                list.into_iter()
                    .enumerate()
                    .map(|(i, v)| {
                        Value::from_attribute_value(v).map_err(|e| e.at(&format!("[{i}]")))
                    })
                    .collect::<Result<_, _>>()?,
            ),
            AttributeValue::M(map) => Value::Map(
                map.into_iter()
                    .map(|(k, v)| match Value::from_attribute_value(v) {
                        Ok(v) => Ok((k, v)),
                        Err(e) => Err(e.at(&k)),
                    })
                    .collect::<Result<_, _>>()?,
            ),
            AttributeValue::Ss(set) => Value::List(set.into_iter().map(Value::String).collect()),
            AttributeValue::Ns(set) => Value::List(
                set.into_iter()
                    .map(|text| number(text).map(Value::Number))
                    .collect::<Result<_, _>>()?,
            ),
            AttributeValue::B(blob) => Value::List(
                blob.into_inner()
                    .into_iter()
                    .map(|b| Value::Number(b.into()))
                    .collect(),
            ),
            AttributeValue::Bs(set) => Value::List(
                set.into_iter()
                    .map(|blob| {
                        Value::List(
                            blob.into_inner()
                                .into_iter()
                                .map(|b| Value::Number(b.into()))
                                .collect(),
                        )
                    })
                    .collect(),
            ),
            other => {
                return Err(ValueError {
                    path: String::new(),
                    reason: format!("unknown DynamoDB type {other:?}"),
                });
            }
        })
    }

    /// Converts a `serde_json::Value` (for tests and examples: its numbers are already `f64`,
    /// `i64` or `u64`); a float DynamoDB cannot hold (such as `1e300`) is an error.
    ///
    /// ```
    /// let value = cqrs_item::Value::from_json(serde_json::json!({"a": [1, 2.5, null]})).unwrap();
    /// assert_eq!(value.to_string(), r#"{"a":[1,2.5,null]}"#);
    /// ```
    pub fn from_json(value: serde_json::Value) -> Result<Value, ValueError> {
        Ok(match value {
            serde_json::Value::Null => Value::Null,
            serde_json::Value::Bool(b) => Value::Bool(b),
            serde_json::Value::Number(n) => {
                Value::Number(json_number(&n).map_err(|e| ValueError {
                    path: String::new(),
                    reason: format!("{n} {e}"),
                })?)
            }
            serde_json::Value::String(s) => Value::String(s),
            serde_json::Value::Array(list) => Value::List(
                list.into_iter()
                    .enumerate()
                    .map(|(i, v)| Value::from_json(v).map_err(|e| e.at(&format!("[{i}]"))))
                    .collect::<Result<_, _>>()?,
            ),
            serde_json::Value::Object(map) => Value::Map(
                map.into_iter()
                    .map(|(k, v)| match Value::from_json(v) {
                        Ok(v) => Ok((k, v)),
                        Err(e) => Err(e.at(&k)),
                    })
                    .collect::<Result<_, _>>()?,
            ),
        })
    }

    /// The string, when this is one.
    ///
    /// ```
    /// assert_eq!(cqrs_item::Value::from("x").as_str(), Some("x"));
    /// ```
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The number as an `i64`, when this is an integer in range.
    ///
    /// ```
    /// assert_eq!(cqrs_item::Value::from(3).as_i64(), Some(3));
    /// ```
    pub fn as_i64(&self) -> Option<i64> {
        self.as_number().and_then(Number::as_i64)
    }

    /// The number as a `u64`, when this is a non-negative integer in range.
    ///
    /// ```
    /// assert_eq!(cqrs_item::Value::from(3u64).as_u64(), Some(3));
    /// ```
    pub fn as_u64(&self) -> Option<u64> {
        self.as_number().and_then(Number::as_u64)
    }

    /// The number as the nearest `f64`, when this is a number (lossy beyond 15 to 17 digits).
    ///
    /// ```
    /// assert_eq!(cqrs_item::Value::from(3).as_f64(), Some(3.0));
    /// ```
    pub fn as_f64(&self) -> Option<f64> {
        self.as_number().map(Number::as_f64)
    }

    /// The number, when this is one.
    ///
    /// ```
    /// assert_eq!(cqrs_item::Value::from(3).as_number().unwrap().as_str(), "3");
    /// ```
    pub fn as_number(&self) -> Option<&Number> {
        match self {
            Value::Number(n) => Some(n),
            _ => None,
        }
    }

    /// The boolean, when this is one.
    ///
    /// ```
    /// assert_eq!(cqrs_item::Value::from(true).as_bool(), Some(true));
    /// ```
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The map, when this is one.
    ///
    /// ```
    /// assert!(cqrs_item::Value::Map(Default::default()).as_map().is_some());
    /// ```
    pub fn as_map(&self) -> Option<&Map> {
        match self {
            Value::Map(map) => Some(map),
            _ => None,
        }
    }

    /// The list, when this is one.
    ///
    /// ```
    /// assert!(cqrs_item::Value::List(vec![]).as_list().is_some());
    /// ```
    pub fn as_list(&self) -> Option<&[Value]> {
        match self {
            Value::List(list) => Some(list),
            _ => None,
        }
    }

    /// Whether this is `null`.
    ///
    /// ```
    /// assert!(cqrs_item::Value::Null.is_null());
    /// ```
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }
}

/// A serde_json number as a [`Number`]: integers exactly, floats by their shortest text.
fn json_number(n: &serde_json::Number) -> Result<Number, NumberError> {
    if let Some(i) = n.as_i64() {
        Ok(i.into())
    } else if let Some(u) = n.as_u64() {
        Ok(u.into())
    } else {
        Number::parse(&n.to_string())
    }
}

/// Converts a `serde_json` object into attributes (for tests and examples); anything but an object
/// is an error.
///
/// ```
/// let attributes = cqrs_item::map_from_json(serde_json::json!({"price": 1200})).unwrap();
/// assert_eq!(attributes["price"], 1200);
/// ```
pub fn map_from_json(value: serde_json::Value) -> Result<Map, ValueError> {
    match Value::from_json(value)? {
        Value::Map(map) => Ok(map),
        other => Err(ValueError {
            path: String::new(),
            reason: format!("{other} is not an object"),
        }),
    }
}

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::Null => serializer.serialize_unit(),
            Value::Bool(b) => serializer.serialize_bool(*b),
            Value::Number(n) => n.serialize(serializer),
            Value::String(s) => serializer.serialize_str(s),
            Value::List(list) => serializer.collect_seq(list),
            Value::Map(map) => serializer.collect_map(map),
        }
    }
}

impl Serialize for Number {
    /// Integers that fit a machine word as integers (any serde format takes them exactly); any
    /// other number as its text, verbatim, through serde_json's `RawValue` (JSON only).
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if let Some(i) = self.as_i64() {
            return serializer.serialize_i64(i);
        }
        if let Some(u) = self.as_u64() {
            return serializer.serialize_u64(u);
        }
        serde_json::value::RawValue::from_string(self.as_str().to_string())
            .map_err(S::Error::custom)?
            .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Value {
    /// From JSON only, exactly: the value's text is taken whole and read by [`crate::parse_json`].
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Box::<serde_json::value::RawValue>::deserialize(deserializer)?;
        crate::parse_json(raw.get()).map_err(D::Error::custom)
    }
}

impl<'de> Deserialize<'de> for Number {
    /// From a JSON number, exactly.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match Value::deserialize(deserializer)? {
            Value::Number(n) => Ok(n),
            other => Err(D::Error::custom(format!("{other} is not a number"))),
        }
    }
}

impl fmt::Display for Value {
    /// The value as compact JSON, numbers verbatim.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = serde_json::to_string(self).map_err(|_| fmt::Error)?;
        f.write_str(&text)
    }
}

impl From<Number> for Value {
    fn from(n: Number) -> Self {
        Value::Number(n)
    }
}

macro_rules! from_integer {
    ($($t:ty),*) => {$(
        impl From<$t> for Value {
            fn from(value: $t) -> Self {
                Value::Number(value.into())
            }
        }
        impl PartialEq<$t> for Value {
            fn eq(&self, other: &$t) -> bool {
                self.as_number() == Some(&Number::from(*other))
            }
        }
    )*};
}
from_integer!(i8, i16, i32, i64, u8, u16, u32, u64);

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::String(s)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::String(s.to_string())
    }
}

impl From<Map> for Value {
    fn from(map: Map) -> Self {
        Value::Map(map)
    }
}

impl<T: Into<Value>> From<Vec<T>> for Value {
    fn from(list: Vec<T>) -> Self {
        Value::List(list.into_iter().map(Into::into).collect())
    }
}

impl PartialEq<bool> for Value {
    fn eq(&self, other: &bool) -> bool {
        self.as_bool() == Some(*other)
    }
}

impl PartialEq<str> for Value {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == Some(other)
    }
}

impl PartialEq<&str> for Value {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == Some(*other)
    }
}

impl PartialEq<String> for Value {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == Some(other.as_str())
    }
}

impl PartialEq<serde_json::Value> for Value {
    /// Equal when `other` converts to this value (numbers compare by their canonical text).
    fn eq(&self, other: &serde_json::Value) -> bool {
        Value::from_json(other.clone()).is_ok_and(|other| *self == other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dynamodb_round_trip_keeps_every_digit() {
        let value = crate::parse_json(
            r#"{"big":12345678901234567891,"dec":0.12345678901234567891,
                "max":99999999999999999999999999999999999999,"neg":-1.5,
                "list":[null,true,"s",{"deep":0.00000000000000000000000000000000000001}]}"#,
        )
        .unwrap();
        let back = Value::from_attribute_value(value.to_attribute_value()).unwrap();
        assert_eq!(back, value);
        assert_eq!(
            value.to_string(),
            r#"{"big":12345678901234567891,"dec":0.12345678901234567891,"list":[null,true,"s",{"deep":0.00000000000000000000000000000000000001}],"max":99999999999999999999999999999999999999,"neg":-1.5}"#
        );
    }

    #[test]
    fn json_deserialisation_is_exact_and_serialisation_verbatim() {
        let text = r#"{"a":0.12345678901234567890123456789012345678,"b":-12345678901234567890123456789012345678,"c":18446744073709551615,"d":-9223372036854775808}"#;
        let map: Map = serde_json::from_str(text).unwrap();
        assert_eq!(serde_json::to_string(&map).unwrap(), text);
        // Through a serde_json::Value the float is already lossy, but still a valid number.
        let from_value: Map = serde_json::from_value(serde_json::json!({"x": 1.5})).unwrap();
        assert_eq!(from_value["x"].to_string(), "1.5");
    }

    #[test]
    fn unstorable_numbers_from_dynamodb_name_their_path() {
        let bad = AttributeValue::M(
            [(
                "a".to_string(),
                AttributeValue::L(vec![AttributeValue::N("1e999".into())]),
            )]
            .into(),
        );
        let err = Value::from_attribute_value(bad).unwrap_err();
        assert_eq!(err.path, "a[0]");
    }

    #[test]
    fn sets_and_binaries_read_as_lists() {
        let set = AttributeValue::Ns(vec!["1".into(), "2.50".into()]);
        assert_eq!(
            Value::from_attribute_value(set).unwrap().to_string(),
            "[1,2.5]"
        );
        let blob = AttributeValue::B(aws_sdk_dynamodb::primitives::Blob::new(vec![0u8, 255]));
        assert_eq!(
            Value::from_attribute_value(blob).unwrap().to_string(),
            "[0,255]"
        );
    }

    #[test]
    fn comparisons_with_plain_values() {
        let map = map_from_json(serde_json::json!({"s": "x", "n": 2, "b": true})).unwrap();
        assert_eq!(map["s"], "x");
        assert_eq!(map["n"], 2);
        assert_eq!(map["b"], true);
        assert_eq!(map["n"], serde_json::json!(2));
        assert!(map_from_json(serde_json::json!([1])).is_err());
        assert!(map_from_json(serde_json::json!({"f": 1e300})).is_err());
    }
}
