//! A small JSON reader that keeps numbers exact: [`parse_json`] reads JSON text (RFC 8259) into a
//! [`Value`], each number as its text ([`Number`]), checked against DynamoDB's limits.
//!
//! serde_json alone would read numbers as `f64`/`i64`/`u64` (its `arbitrary_precision` feature
//! would keep them, but it changes serde_json for the whole workspace and breaks `serde_dynamo` and
//! untagged types). Strings are decoded by serde_json; everything else is read here. An error
//! names the path of the value at fault (`attributes.prices[2]`), so a request can be refused
//! with the attribute named.

use std::fmt;

use crate::{Map, Number, Value};

/// How deep arrays and objects may nest in the text (as serde_json's default): a guard for the
/// reader's stack. DynamoDB's own, lower, limit is checked on the item ([`crate::check_limits`]).
pub const MAX_JSON_DEPTH: usize = 128;

/// Why a JSON text was not read: where (`path`, empty for the whole text) and why.
///
/// ```
/// let err = cqrs_item::parse_json(r#"{"a":{"b":[1,1e999]}}"#).unwrap_err();
/// assert_eq!(err.path, "a.b[1]");
/// assert!(err.to_string().starts_with("a.b[1]: 1e999 is too large for DynamoDB"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonError {
    /// The path of the value at fault: object keys joined by `.`, list positions in brackets.
    pub path: String,
    /// What is wrong.
    pub message: String,
    /// Whether the text is not JSON at all (as opposed to JSON holding a value DynamoDB cannot
    /// store).
    pub syntax: bool,
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

impl std::error::Error for JsonError {}

impl JsonError {
    fn at(mut self, segment: &str) -> Self {
        self.path = if self.path.is_empty() {
            segment.to_string()
        } else if self.path.starts_with('[') {
            format!("{segment}{}", self.path)
        } else {
            format!("{segment}.{}", self.path)
        };
        self
    }
}

/// Reads one JSON value (surrounded by optional whitespace) with numbers exact.
///
/// ```
/// let value = cqrs_item::parse_json(r#" {"big": 12345678901234567891, "dec": 1.50} "#).unwrap();
/// // Numbers in DynamoDB's canonical form: 1.50 is 1.5.
/// assert_eq!(value.to_string(), r#"{"big":12345678901234567891,"dec":1.5}"#);
/// assert!(cqrs_item::parse_json("[1,]").unwrap_err().syntax);
/// ```
pub fn parse_json(text: &str) -> Result<Value, JsonError> {
    let mut reader = Reader {
        text,
        bytes: text.as_bytes(),
        pos: 0,
        depth: 0,
    };
    reader.whitespace();
    let value = reader.value()?;
    reader.whitespace();
    if reader.pos < reader.bytes.len() {
        return Err(reader.syntax("trailing characters after the JSON value"));
    }
    Ok(value)
}

struct Reader<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    depth: usize,
}

impl Reader<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn syntax(&self, what: &str) -> JsonError {
        let before = self.bytes.get(..self.pos).unwrap_or(self.bytes);
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let column = before.iter().rev().take_while(|&&b| b != b'\n').count() + 1;
        JsonError {
            path: String::new(),
            message: format!("invalid JSON: {what} at line {line} column {column}"),
            syntax: true,
        }
    }

    fn expect(&mut self, byte: u8, what: &str) -> Result<(), JsonError> {
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.syntax(what))
        }
    }

    fn value(&mut self) -> Result<Value, JsonError> {
        match self.peek() {
            Some(b'{') => self.nested(Self::object),
            Some(b'[') => self.nested(Self::list),
            Some(b'"') => self.string().map(Value::String),
            Some(b'-' | b'0'..=b'9') => self.number().map(Value::Number),
            Some(b't') => self.literal("true", Value::Bool(true)),
            Some(b'f') => self.literal("false", Value::Bool(false)),
            Some(b'n') => self.literal("null", Value::Null),
            Some(_) => Err(self.syntax("expected a value")),
            None => Err(self.syntax("unexpected end of text")),
        }
    }

    fn nested(
        &mut self,
        read: fn(&mut Self) -> Result<Value, JsonError>,
    ) -> Result<Value, JsonError> {
        if self.depth >= MAX_JSON_DEPTH {
            return Err(self.syntax(&format!("nested deeper than {MAX_JSON_DEPTH} levels")));
        }
        self.depth += 1;
        let value = read(self);
        self.depth -= 1;
        value
    }

    fn literal(&mut self, word: &str, value: Value) -> Result<Value, JsonError> {
        if self.bytes.get(self.pos..self.pos + word.len()) == Some(word.as_bytes()) {
            self.pos += word.len();
            Ok(value)
        } else {
            Err(self.syntax("expected a value"))
        }
    }

    fn object(&mut self) -> Result<Value, JsonError> {
        self.pos += 1; // `{`
        let mut map = Map::new();
        self.whitespace();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Value::Map(map));
        }
        loop {
            self.whitespace();
            if self.peek() != Some(b'"') {
                return Err(self.syntax("expected a key in quotes"));
            }
            let key = self.string()?;
            self.whitespace();
            self.expect(b':', "expected `:` after a key")
                .map_err(|e| e.at(&key))?;
            self.whitespace();
            let value = self.value().map_err(|e| e.at(&key))?;
            if map.contains_key(&key) {
                return Err(JsonError {
                    path: String::new(),
                    message: "appears twice in the same object".into(),
                    syntax: false,
                }
                .at(&key));
            }
            map.insert(key, value);
            self.whitespace();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Value::Map(map));
                }
                _ => return Err(self.syntax("expected `,` or `}`")),
            }
        }
    }

    fn list(&mut self) -> Result<Value, JsonError> {
        self.pos += 1; // `[`
        let mut list = Vec::new();
        self.whitespace();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(Value::List(list));
        }
        loop {
            self.whitespace();
            let value = self
                .value()
                .map_err(|e| e.at(&format!("[{}]", list.len())))?;
            list.push(value);
            self.whitespace();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Value::List(list));
                }
                _ => return Err(self.syntax("expected `,` or `]`")),
            }
        }
    }

    /// A string, from its opening quote; serde_json decodes the escapes and checks the rest.
    fn string(&mut self) -> Result<String, JsonError> {
        let start = self.pos;
        self.pos += 1; // `"`
        loop {
            match self.peek() {
                Some(b'"') => break,
                Some(b'\\') => self.pos += 2,
                Some(_) => self.pos += 1,
                None => return Err(self.syntax("unterminated string")),
            }
        }
        self.pos += 1; // `"`
        let quoted = self
            .text
            .get(start..self.pos)
            .ok_or_else(|| self.syntax("unterminated string"))?;
        serde_json::from_str(quoted).map_err(|e| {
            let mut error = self.syntax("bad string");
            error.message = format!("invalid JSON string: {e}");
            error
        })
    }

    /// A number in JSON's grammar, `-?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?`, then checked
    /// against DynamoDB's limits.
    fn number(&mut self) -> Result<Number, JsonError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(self.syntax("expected a digit")),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.syntax("expected a digit after the decimal point"));
            }
            self.digits();
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.syntax("expected a digit in the exponent"));
            }
            self.digits();
        }
        let text = self.text.get(start..self.pos).unwrap_or_default();
        Number::parse(text).map_err(|e| JsonError {
            path: String::new(),
            message: format!("{text} {e}"),
            syntax: false,
        })
    }

    fn digits(&mut self) {
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_serde_json_reads() {
        for text in [
            "null",
            "true",
            " false ",
            "0",
            "-0.5e-3",
            r#""a\"b\\c\u00e9\ud83d\ude00\n""#,
            r#"{"a":[],"b":{},"c":[1,[2,[3]]],"d":"","e":{"f":null}}"#,
            "[1 , 2\n,\t3]",
            r#""日本""#,
        ] {
            let ours = parse_json(text).unwrap();
            let theirs: serde_json::Value = serde_json::from_str(text).unwrap();
            assert_eq!(ours, theirs, "{text}");
        }
    }

    #[test]
    fn refuses_what_serde_json_refuses() {
        for text in [
            "",
            "nul",
            "[1,]",
            "{\"a\":1,}",
            "{a:1}",
            "01",
            "1.",
            ".5",
            "+1",
            "1e",
            "-",
            "[1 2]",
            "{\"a\" 1}",
            "\"abc",
            "\"a\\\"",
            "\"\u{1}\"",
            "[",
            "{",
            "1 2",
            "\"\\x\"",
            "NaN",
            "Infinity",
            "[\"a\\",
        ] {
            assert!(
                serde_json::from_str::<serde_json::Value>(text).is_err(),
                "{text}"
            );
            let err = parse_json(text).unwrap_err();
            assert!(err.syntax, "{text}: {err}");
        }
    }

    #[test]
    fn paths_name_the_value_at_fault() {
        let path = |text| parse_json(text).unwrap_err().path;
        assert_eq!(path(r#"{"a":1e126}"#), "a");
        assert_eq!(path(r#"{"a":{"b c":[0,{"d":1e-131}]}}"#), "a.b c[1].d");
        assert_eq!(
            path(r#"[[1],[2,123456789012345678901234567890123456789]]"#),
            "[1][1]"
        );
        assert_eq!(path(r#"{"a":1,"a":2}"#), "a");
        assert_eq!(path(r#"{"a":{"b":[1,}}"#), "a.b[1]");
        assert!(!parse_json(r#"{"a":1e126}"#).unwrap_err().syntax);
    }

    #[test]
    fn depth_is_bounded() {
        let deep = format!(
            "{}{}",
            "[".repeat(MAX_JSON_DEPTH),
            "]".repeat(MAX_JSON_DEPTH)
        );
        assert!(parse_json(&deep).is_ok());
        let deeper = format!("[{deep}]");
        assert!(parse_json(&deeper).unwrap_err().message.contains("deeper"));
        let very_deep = "[".repeat(100_000);
        assert!(parse_json(&very_deep).is_err());
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    fn floats(value: serde_json::Value) -> serde_json::Value {
        match value {
            serde_json::Value::Number(n) => n.as_f64().into(),
            serde_json::Value::Array(list) => list.into_iter().map(floats).collect(),
            serde_json::Value::Object(map) => {
                map.into_iter().map(|(k, v)| (k, floats(v))).collect()
            }
            other => other,
        }
    }

    proptest! {
        /// Any text: no panic, and the reader agrees with serde_json on what is JSON (short of
        /// numbers DynamoDB cannot hold and keys given twice, which it refuses on purpose).
        #[test]
        fn agrees_with_serde_json(text in "[\\[\\]{}\",:0-9eE.+\\- a-z\\\\]{0,40}") {
            let ours = parse_json(&text);
            let theirs = serde_json::from_str::<serde_json::Value>(&text);
            match (&ours, &theirs) {
                (Ok(value), Ok(json)) => {
                    // The same JSON, numbers compared as the nearest f64 (serde_json's precision).
                    let back: serde_json::Value = serde_json::from_str(&value.to_string()).unwrap();
                    prop_assert_eq!(floats(back), floats(json.clone()), "{}", text);
                }
                (Err(e), Ok(_)) => prop_assert!(!e.syntax, "{text}: {e}"),
                (Ok(_), Err(e)) => prop_assert!(false, "{text}: serde_json refuses: {e}"),
                (Err(_), Err(_)) => {}
            }
        }

        /// Integers and floats read back as the same number.
        #[test]
        fn numbers_read_back(i in any::<i64>(), f in -1e100f64..1e100) {
            prop_assert_eq!(parse_json(&i.to_string()).unwrap().as_i64(), Some(i));
            let text = serde_json::to_string(&f).unwrap();
            let value = parse_json(&text).unwrap();
            prop_assert_eq!(value.as_f64(), Some(f));
        }
    }
}
