//! Key templates: `ORDER#{tenant}`, `USER#{tenant}#{userId}`, `{createdAt}#{orderId}`,
//! `STATUS#{tenant}#{status}#SHARD#{shard:10}`, `LOG#{tenant}#{at:month}`.
//!
//! A template is literal text and references in braces: `{tenant}` (the caller's tenant),
//! `{shard:N}` (a write shard out of `N`, chosen from the item id), `{name}` (an attribute, or the
//! server-set `createdAt`), `{name:bucket}` (a timestamp cut to `year`, `month`, `day` or `hour`).
//! Values never hold `#`, so a template whose references are separated by `#` has exactly one way to
//! read a key back ([`Template::read`]).

use cqrs_keys::KEY_SEPARATOR;

/// How a timestamp is cut when it is a key part.
///
/// ```
/// use cqrs_model::Bucket;
///
/// assert_eq!(Bucket::parse("month"), Some(Bucket::Month));
/// assert_eq!(Bucket::Month.width(), 7); // 2024-01
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Bucket {
    /// `YYYY`.
    Year,
    /// `YYYY-MM`.
    Month,
    /// `YYYY-MM-DD`.
    Day,
    /// `YYYY-MM-DDTHH`.
    Hour,
}

impl Bucket {
    /// Reads a bucket name.
    ///
    /// ```
    /// assert_eq!(cqrs_model::Bucket::parse("week"), None);
    /// ```
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "year" => Some(Bucket::Year),
            "month" => Some(Bucket::Month),
            "day" => Some(Bucket::Day),
            "hour" => Some(Bucket::Hour),
            _ => None,
        }
    }

    /// How many characters of the fixed-width timestamp `YYYY-MM-DDTHH:MM:SS.sssZ` it keeps.
    ///
    /// ```
    /// assert_eq!(cqrs_model::Bucket::Day.width(), 10);
    /// ```
    pub fn width(self) -> usize {
        match self {
            Bucket::Year => 4,
            Bucket::Month => 7,
            Bucket::Day => 10,
            Bucket::Hour => 13,
        }
    }
}

/// One part of a template.
///
/// ```
/// use cqrs_model::{Part, Template};
///
/// let t = Template::parse("USER#{tenant}#{userId}").unwrap();
/// assert_eq!(t.parts()[1], Part::Tenant);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Part {
    /// Literal text.
    Lit(String),
    /// `{tenant}`: the tenant of the item (from the caller, never from the request body).
    Tenant,
    /// `{shard:N}`: the item's write shard, `0..N`, from a stable hash of its id.
    Shard(u32),
    /// `{name}` or `{name:bucket}`: an attribute (or `createdAt`), formatted as its type says.
    Attr {
        /// The attribute name.
        name: String,
        /// For timestamps: the bucket the value is cut to.
        bucket: Option<Bucket>,
    },
}

impl Part {
    /// Whether the part is a reference (anything but literal text).
    ///
    /// ```
    /// assert!(cqrs_model::Part::Tenant.is_reference());
    /// ```
    pub fn is_reference(&self) -> bool {
        !matches!(self, Part::Lit(_))
    }
}

/// A parsed key template.
///
/// ```
/// use cqrs_model::Template;
///
/// let t = Template::parse("ORDER#{createdAt}#{orderId}").unwrap();
/// assert_eq!(t.attribute_names().collect::<Vec<_>>(), ["createdAt", "orderId"]);
/// assert_eq!(t.text(), "ORDER#{createdAt}#{orderId}");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Template {
    text: String,
    parts: Vec<Part>,
}

/// One `#`-separated segment of a template: literal text around at most one reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Segment<'a> {
    pub prefix: String,
    pub reference: Option<&'a Part>,
    pub suffix: String,
}

impl Template {
    /// Parses template text. Fails on unbalanced braces, an empty reference, a bad shard count or
    /// bucket, or an empty template.
    ///
    /// ```
    /// use cqrs_model::Template;
    ///
    /// assert!(Template::parse("STATUS#{tenant}#{status}#SHARD#{shard:10}").is_ok());
    /// assert!(Template::parse("ORDER#{orderId").is_err());
    /// assert!(Template::parse("{shard:0}").is_err());
    /// assert!(Template::parse("{at:week}").is_err());
    /// ```
    pub fn parse(text: &str) -> Result<Self, String> {
        if text.is_empty() {
            return Err("the template is empty".into());
        }
        let mut parts = Vec::new();
        let mut rest = text;
        while !rest.is_empty() {
            match rest.find(['{', '}']) {
                None => {
                    parts.push(Part::Lit(rest.to_string()));
                    rest = "";
                }
                Some(at) => {
                    let (lit, tail) = rest.split_at(at);
                    if !lit.is_empty() {
                        parts.push(Part::Lit(lit.to_string()));
                    }
                    if tail.starts_with('}') {
                        return Err(format!("unbalanced `}}` in {text:?}"));
                    }
                    let Some(end) = tail.find('}') else {
                        return Err(format!("unclosed `{{` in {text:?}"));
                    };
                    let inner = tail.get(1..end).unwrap_or_default();
                    parts.push(parse_reference(inner, text)?);
                    rest = tail.get(end + 1..).unwrap_or_default();
                }
            }
        }
        Ok(Template {
            text: text.to_string(),
            parts,
        })
    }

    /// The template as written.
    ///
    /// ```
    /// assert_eq!(cqrs_model::Template::parse("A#{tenant}").unwrap().text(), "A#{tenant}");
    /// ```
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Its parts, in order.
    ///
    /// ```
    /// assert_eq!(cqrs_model::Template::parse("A").unwrap().parts().len(), 1);
    /// ```
    pub fn parts(&self) -> &[Part] {
        &self.parts
    }

    /// The attribute names it references (not `tenant` or `shard`), in order.
    ///
    /// ```
    /// let t = cqrs_model::Template::parse("{tenant}#{a}#{shard:4}").unwrap();
    /// assert_eq!(t.attribute_names().collect::<Vec<_>>(), ["a"]);
    /// ```
    pub fn attribute_names(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::Attr { name, .. } => Some(name.as_str()),
            _ => None,
        })
    }

    /// Whether it references `{tenant}`.
    ///
    /// ```
    /// assert!(cqrs_model::Template::parse("A#{tenant}").unwrap().has_tenant());
    /// ```
    pub fn has_tenant(&self) -> bool {
        self.parts.contains(&Part::Tenant)
    }

    /// The shard count of its `{shard:N}`, if any.
    ///
    /// ```
    /// let t = cqrs_model::Template::parse("S#{tenant}#SHARD#{shard:10}").unwrap();
    /// assert_eq!(t.shards(), Some(10));
    /// ```
    pub fn shards(&self) -> Option<u32> {
        self.parts.iter().find_map(|p| match p {
            Part::Shard(n) => Some(*n),
            _ => None,
        })
    }

    /// Whether the template is nothing but one reference (what a number attribute of a native
    /// multi-attribute key must be).
    pub(crate) fn single_reference(&self) -> Option<&Part> {
        match self.parts.as_slice() {
            [only] if only.is_reference() => Some(only),
            _ => None,
        }
    }

    /// The `#`-separated segments, each literal text around at most one reference. `Err` names two
    /// references that share a segment (no `#` between them), which would make keys ambiguous.
    pub(crate) fn segments(&self) -> Result<Vec<Segment<'_>>, String> {
        let mut segments = vec![Segment {
            prefix: String::new(),
            reference: None,
            suffix: String::new(),
        }];
        for part in &self.parts {
            match part {
                Part::Lit(text) => {
                    let mut pieces = text.split(KEY_SEPARATOR);
                    if let (Some(first), Some(current)) = (pieces.next(), segments.last_mut()) {
                        if current.reference.is_some() {
                            current.suffix.push_str(first);
                        } else {
                            current.prefix.push_str(first);
                        }
                    }
                    for piece in pieces {
                        segments.push(Segment {
                            prefix: piece.to_string(),
                            reference: None,
                            suffix: String::new(),
                        });
                    }
                }
                reference => {
                    let Some(current) = segments.last_mut() else {
                        continue;
                    };
                    if let Some(previous) = current.reference {
                        return Err(format!(
                            "{} and {} are not separated by `{KEY_SEPARATOR}`: a key could be read back in more than one way",
                            describe(previous),
                            describe(reference)
                        ));
                    }
                    current.reference = Some(reference);
                }
            }
        }
        Ok(segments)
    }

    /// Reads a key back: the value of every reference, in order, or `None` when the key does not
    /// have this template's shape. Values are the key's text (formatted), not the attribute values.
    ///
    /// ```
    /// use cqrs_model::{Part, Template};
    ///
    /// let t = Template::parse("ORDER_ITEM#{orderId}#{itemId}").unwrap();
    /// let values = t.read("ORDER_ITEM#o1#001").unwrap();
    /// assert_eq!(values[1].1, "001");
    /// assert!(t.read("ORDER#o1").is_none());
    /// ```
    pub fn read<'k>(&self, key: &'k str) -> Option<Vec<(&Part, &'k str)>> {
        let segments = self.segments().ok()?;
        let pieces: Vec<&str> = key.split(KEY_SEPARATOR).collect();
        if pieces.len() != segments.len() {
            return None;
        }
        let mut values = Vec::new();
        for (segment, piece) in segments.iter().zip(pieces) {
            match segment.reference {
                None => {
                    if piece != segment.prefix {
                        return None;
                    }
                }
                Some(part) => {
                    let inner = piece
                        .strip_prefix(segment.prefix.as_str())?
                        .strip_suffix(segment.suffix.as_str())?;
                    if inner.is_empty() {
                        return None;
                    }
                    values.push((part, inner));
                }
            }
        }
        Some(values)
    }
}

/// How a part is named in messages.
pub(crate) fn describe(part: &Part) -> String {
    match part {
        Part::Lit(text) => format!("{text:?}"),
        Part::Tenant => "{tenant}".into(),
        Part::Shard(n) => format!("{{shard:{n}}}"),
        Part::Attr { name, bucket: None } => format!("{{{name}}}"),
        Part::Attr {
            name,
            bucket: Some(b),
        } => format!("{{{name}:{b:?}}}").to_lowercase(),
    }
}

fn parse_reference(inner: &str, text: &str) -> Result<Part, String> {
    let (name, arg) = match inner.split_once(':') {
        Some((name, arg)) => (name, Some(arg)),
        None => (inner, None),
    };
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(format!("`{{{inner}}}` in {text:?} is not a reference"));
    }
    match (name, arg) {
        ("tenant", None) => Ok(Part::Tenant),
        ("tenant", Some(_)) => Err(format!("`{{{inner}}}` in {text:?}: tenant takes no format")),
        ("shard", Some(count)) => match count.parse::<u32>() {
            Ok(n) if (1..=1000).contains(&n) => Ok(Part::Shard(n)),
            _ => Err(format!(
                "`{{{inner}}}` in {text:?}: the shard count must be 1 to 1000"
            )),
        },
        ("shard", None) => Err(format!(
            "`{{shard}}` in {text:?} needs a count: {{shard:10}}"
        )),
        (name, None) => Ok(Part::Attr {
            name: name.to_string(),
            bucket: None,
        }),
        (name, Some(bucket)) => match Bucket::parse(bucket) {
            Some(bucket) => Ok(Part::Attr {
                name: name.to_string(),
                bucket: Some(bucket),
            }),
            None => Err(format!(
                "`{{{inner}}}` in {text:?}: {bucket:?} is not year, month, day or hour"
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_split_literals_and_keep_one_reference_each() {
        let t = Template::parse("ORDER_ITEM#{orderId}#x{itemId}y").unwrap();
        let segments = t.segments().unwrap();
        assert_eq!(segments.len(), 3);
        assert_eq!(segments[2].prefix, "x");
        assert_eq!(segments[2].suffix, "y");
        assert_eq!(t.read("ORDER_ITEM#o#xAy").unwrap()[1].1, "A");
        assert!(t.read("ORDER_ITEM#o#xy").is_none());
    }

    #[test]
    fn adjacent_references_are_refused() {
        let t = Template::parse("{a}{b}").unwrap();
        assert!(t.segments().unwrap_err().contains("{a} and {b}"));
        let t = Template::parse("{a}-{b}").unwrap();
        assert!(t.segments().is_err());
    }
}
