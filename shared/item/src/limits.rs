//! DynamoDB's limits on an item's content besides its size: how deep maps and lists nest, which
//! numbers it can store, and that no map key is empty. An item past them is refused by DynamoDB with a `ValidationException`;
//! checking before writing turns that into a clear refusal of the request instead of a failed
//! write.

use aws_sdk_dynamodb::types::AttributeValue;

use crate::Attributes;

/// How deep an item may nest, the item itself counting as the first level: an attribute holding a
/// map holding a map is three levels.
///
/// ```
/// assert_eq!(cqrs_item::MAX_NESTING_DEPTH, 32);
/// ```
pub const MAX_NESTING_DEPTH: usize = 32;

/// The most significant digits a DynamoDB number holds.
///
/// ```
/// assert_eq!(cqrs_item::MAX_NUMBER_DIGITS, 38);
/// ```
pub const MAX_NUMBER_DIGITS: usize = 38;

/// Checks `attributes` against DynamoDB's nesting depth ([`MAX_NESTING_DEPTH`]), number limits
/// (at most [`MAX_NUMBER_DIGITS`] significant digits, magnitude from 1e-130 to below 1e126) and
/// its refusal of empty map keys; the error says which attribute is at fault and why.
///
/// ```
/// use aws_sdk_dynamodb::types::AttributeValue;
///
/// let mut item = cqrs_item::Item::example().to_attributes().unwrap();
/// assert!(cqrs_item::check_limits(&item).is_ok());
/// item.insert("n".into(), AttributeValue::N("1e126".into()));
/// assert!(cqrs_item::check_limits(&item).unwrap_err().contains("n"));
///
/// let mut item = cqrs_item::Item::example().to_attributes().unwrap();
/// let empty_key = [(String::new(), AttributeValue::Bool(true))].into_iter().collect();
/// item.insert("m".into(), AttributeValue::M(empty_key));
/// assert!(cqrs_item::check_limits(&item).unwrap_err().contains("empty"));
/// ```
pub fn check_limits(attributes: &Attributes) -> Result<(), String> {
    for (name, value) in attributes {
        check_value(name, value, 2)?;
    }
    Ok(())
}

fn check_value(path: &str, value: &AttributeValue, depth: usize) -> Result<(), String> {
    match value {
        AttributeValue::M(map) => {
            nesting(path, depth)?;
            for (name, inner) in map {
                if name.is_empty() {
                    return Err(format!(
                        "{path}: holds a map key that is empty (DynamoDB refuses empty attribute names)"
                    ));
                }
                check_value(&format!("{path}.{name}"), inner, depth + 1)?;
            }
        }
        AttributeValue::L(list) => {
            nesting(path, depth)?;
            for (i, inner) in list.iter().enumerate() {
                check_value(&format!("{path}[{i}]"), inner, depth + 1)?;
            }
        }
        AttributeValue::N(number) => check_number(number).map_err(|e| format!("{path}: {e}"))?,
        AttributeValue::Ns(numbers) => {
            for number in numbers {
                check_number(number).map_err(|e| format!("{path}: {e}"))?;
            }
        }
        _ => {}
    }
    Ok(())
}

fn nesting(path: &str, depth: usize) -> Result<(), String> {
    if depth > MAX_NESTING_DEPTH {
        return Err(format!(
            "{path}: nested deeper than DynamoDB's {MAX_NESTING_DEPTH} levels"
        ));
    }
    Ok(())
}

/// Checks a number as DynamoDB reads it: `[-]digits[.digits][e[+-]digits]` within its limits.
fn check_number(text: &str) -> Result<(), String> {
    crate::Number::parse(text)
        .map(drop)
        .map_err(|e| format!("{text} {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_in_and_out_of_range() {
        for ok in [
            "0",
            "-0",
            "0.0",
            "1",
            "-1",
            "1e125",
            "9.9e125",
            "1e-130",
            "-1e-130",
            "0.001",
            "12345678901234567890123456789012345678",
            "1234567890123456789012345678901234567800000",
            "1.7976931348623157e10",
            "18446744073709551615",
        ] {
            assert_eq!(check_number(ok), Ok(()), "{ok}");
        }
        for bad in [
            "1e126",
            "-1e126",
            "1e-131",
            "123456789012345678901234567890123456789",
            "",
            ".",
            "1e",
            "abc",
            "1.2.3",
            "1e999999999999999999999",
        ] {
            assert!(check_number(bad).is_err(), "{bad}");
        }
        // f64 as serde_dynamo writes it: 1e300 in full, 1e-300 with 300 zeros.
        assert!(check_number(&1e300f64.to_string()).is_err());
        assert!(check_number(&1e-300f64.to_string()).is_err());
        assert!(check_number(&0.1f64.to_string()).is_ok());
    }

    #[test]
    fn nesting_counts_the_item_as_the_first_level() {
        let nested = |levels: usize| {
            let mut value = AttributeValue::N("1".into());
            for _ in 0..levels {
                value = AttributeValue::M([("a".to_string(), value)].into());
            }
            Attributes::from([("attributes".to_string(), value)])
        };
        assert!(check_limits(&nested(31)).is_ok());
        assert!(check_limits(&nested(32)).is_err());
        let list = AttributeValue::L(vec![AttributeValue::L(vec![])]);
        assert!(check_limits(&Attributes::from([("l".to_string(), list)])).is_ok());
    }
}
