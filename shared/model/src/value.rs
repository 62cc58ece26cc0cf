//! How the model reads an item's attributes and what it writes into keys: [`ValueRef`] (a view of one
//! attribute value, numbers as their text), [`AttributeSource`] (anything that can be asked for an
//! attribute by name) and [`KeyValue`] (one index key attribute, typed `S` or `N`).
//!
//! The model never depends on the item crate's value type: the functions implement
//! [`AttributeSource`] for their attribute map, tests for a plain list.

/// One attribute value as the model sees it. Numbers are their decimal text, exactly as stored, so
/// no precision is lost on the way into a key.
///
/// ```
/// use cqrs_model::ValueRef;
///
/// assert_eq!(ValueRef::Num("42").type_name(), "number");
/// assert_eq!(ValueRef::Other("map").type_name(), "map");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueRef<'a> {
    /// JSON `null`.
    Null,
    /// A boolean.
    Bool(bool),
    /// A number, as its decimal text.
    Num(&'a str),
    /// A string.
    Str(&'a str),
    /// A map (`"map"`) or a list (`"list"`): never a key part.
    Other(&'static str),
}

impl ValueRef<'_> {
    /// The name of this value's type, as error messages and the model file spell it.
    ///
    /// ```
    /// assert_eq!(cqrs_model::ValueRef::Bool(true).type_name(), "boolean");
    /// ```
    pub fn type_name(&self) -> &'static str {
        match self {
            ValueRef::Null => "null",
            ValueRef::Bool(_) => "boolean",
            ValueRef::Num(_) => "number",
            ValueRef::Str(_) => "string",
            ValueRef::Other(name) => name,
        }
    }
}

/// Anything that can give the model an item's attribute by name.
///
/// ```
/// use cqrs_model::{AttributeSource, ValueRef};
///
/// let attributes = [("userId", ValueRef::Str("u1"))];
/// assert_eq!(attributes.as_slice().attribute("userId"), Some(ValueRef::Str("u1")));
/// assert_eq!(attributes.as_slice().attribute("status"), None);
/// ```
pub trait AttributeSource {
    /// The value of attribute `name`, `None` when the item has no such attribute.
    fn attribute(&self, name: &str) -> Option<ValueRef<'_>>;
}

impl AttributeSource for [(&str, ValueRef<'_>)] {
    fn attribute(&self, name: &str) -> Option<ValueRef<'_>> {
        self.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
    }
}

impl<const N: usize> AttributeSource for [(&str, ValueRef<'_>); N] {
    fn attribute(&self, name: &str) -> Option<ValueRef<'_>> {
        self.as_slice().attribute(name)
    }
}

impl AttributeSource for Vec<(&str, ValueRef<'_>)> {
    fn attribute(&self, name: &str) -> Option<ValueRef<'_>> {
        self.as_slice().attribute(name)
    }
}

/// One key attribute that the model computed for an index: a string (`S`) or a number (`N`, its
/// decimal text). Native multi-attribute GSI keys keep each attribute's own type.
///
/// ```
/// use cqrs_model::KeyValue;
///
/// let key = KeyValue::S("USER#t1#u1".into());
/// assert_eq!(key.as_str(), "USER#t1#u1");
/// assert!(!key.is_number());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum KeyValue {
    /// A string key attribute.
    S(String),
    /// A number key attribute, as its decimal text.
    N(String),
}

impl KeyValue {
    /// The text of the value (the digits of a number).
    ///
    /// ```
    /// assert_eq!(cqrs_model::KeyValue::N("7".into()).as_str(), "7");
    /// ```
    pub fn as_str(&self) -> &str {
        match self {
            KeyValue::S(s) | KeyValue::N(s) => s,
        }
    }

    /// Whether the value is a number (`N`).
    ///
    /// ```
    /// assert!(cqrs_model::KeyValue::N("7".into()).is_number());
    /// ```
    pub fn is_number(&self) -> bool {
        matches!(self, KeyValue::N(_))
    }
}
