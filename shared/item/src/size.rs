//! DynamoDB's item-size arithmetic, so an item over the 400 KB limit is refused before any write.
//!
//! The rules are DynamoDB's documented ones: strings and binaries count their bytes, a number about
//! one byte per two significant digits plus one, `NULL` and booleans one byte, a list or map three
//! bytes plus one byte per element, and every attribute its name.

use aws_sdk_dynamodb::types::AttributeValue;

use crate::Attributes;

/// DynamoDB's limit on one item, names and values together: 400 KB.
///
/// ```
/// assert_eq!(cqrs_item::MAX_ITEM_BYTES, 409_600);
/// ```
pub const MAX_ITEM_BYTES: usize = 400 * 1024;

/// The size DynamoDB counts for a whole item.
///
/// ```
/// use aws_sdk_dynamodb::types::AttributeValue;
/// let mut item = std::collections::HashMap::new();
/// item.insert("pk".to_string(), AttributeValue::S("abc".into()));
/// assert_eq!(cqrs_item::item_size(&item), 5);
/// ```
pub fn item_size(item: &Attributes) -> usize {
    item.iter()
        .map(|(name, value)| name.len() + attribute_size(value))
        .sum()
}

/// The size DynamoDB counts for one attribute value (without its name).
///
/// ```
/// use aws_sdk_dynamodb::types::AttributeValue;
/// assert_eq!(cqrs_item::attribute_size(&AttributeValue::Bool(true)), 1);
/// assert_eq!(cqrs_item::attribute_size(&AttributeValue::N("12345".into())), 4);
/// assert_eq!(cqrs_item::attribute_size(&AttributeValue::L(vec![AttributeValue::Null(true)])), 5);
/// ```
pub fn attribute_size(value: &AttributeValue) -> usize {
    match value {
        AttributeValue::S(s) => s.len(),
        AttributeValue::N(n) => number_size(n),
        AttributeValue::B(b) => b.as_ref().len(),
        AttributeValue::Bool(_) | AttributeValue::Null(_) => 1,
        AttributeValue::Ss(set) => set.iter().map(String::len).sum(),
        AttributeValue::Ns(set) => set.iter().map(|n| number_size(n)).sum(),
        AttributeValue::Bs(set) => set.iter().map(|b| b.as_ref().len()).sum(),
        AttributeValue::L(list) => 3 + list.iter().map(|v| 1 + attribute_size(v)).sum::<usize>(),
        AttributeValue::M(map) => {
            3 + map
                .iter()
                .map(|(k, v)| 1 + k.len() + attribute_size(v))
                .sum::<usize>()
        }
        // A type added to the SDK after this was written: count it as its debug text, an
        // over-estimate that can only refuse, never let an oversized item through.
        other => format!("{other:?}").len(),
    }
}

fn number_size(number: &str) -> usize {
    let mantissa = number.split(['e', 'E']).next().unwrap_or(number);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let significant = digits
        .trim_start_matches('0')
        .trim_end_matches('0')
        .len()
        .max(1);
    significant.div_ceil(2) + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_count_significant_digits() {
        assert_eq!(number_size("0"), 2);
        assert_eq!(number_size("1"), 2);
        assert_eq!(number_size("100"), 2);
        assert_eq!(number_size("-12.5"), 3);
        assert_eq!(number_size("123456789012345678901234567890"), 16);
    }

    #[test]
    fn nested_maps_count_names_and_overheads() {
        let inner = AttributeValue::M([("ab".to_string(), AttributeValue::S("xyz".into()))].into());
        // 3 (map) + 1 (element) + 2 (name) + 3 (value)
        assert_eq!(attribute_size(&inner), 9);
    }
}
