//! [`Number`]: a DynamoDB number carried as its exact decimal text, never as a float.
//!
//! DynamoDB holds numbers of up to 38 significant digits with a magnitude from 1E-130 to
//! 9.9999999999999999999999999999999999999E+125; an `f64` holds 15 to 17 digits. So a number is
//! kept as text from the request body to the query answer. The text is validated against
//! DynamoDB's limits and put into DynamoDB's own canonical form (plain decimal notation, no
//! exponent, no leading zeros, no trailing zeros after the point, `-0` is `0`): `1.50` becomes
//! `1.5`, `1e2` becomes `100`. That is the form DynamoDB returns for a top-level number, so what a
//! client reads back is the same whether DynamoDB or DynamoDB Local stored it (DynamoDB Local keeps
//! numbers nested in maps as sent).

use std::fmt;

use crate::limits::MAX_NUMBER_DIGITS;

/// The power of ten of the largest digit DynamoDB stores: numbers are below `1E+126`.
const MAX_MAGNITUDE: i64 = 125;
/// The power of ten of the smallest digit DynamoDB stores: `1E-130`.
const MIN_MAGNITUDE: i64 = -130;

/// A number DynamoDB can store, as its canonical decimal text.
///
/// ```
/// use cqrs_item::Number;
///
/// let n = Number::parse("12345678901234567890123456789012345678").unwrap();
/// assert_eq!(n.as_str(), "12345678901234567890123456789012345678");
/// assert_eq!(Number::parse("1.50e1").unwrap().as_str(), "15");
/// assert!(Number::parse("1e126").is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Number(String);

/// Why a text is not a number DynamoDB can store.
///
/// ```
/// use cqrs_item::{Number, NumberError};
/// assert_eq!(
///     Number::parse("123456789012345678901234567890123456789"),
///     Err(NumberError::TooManyDigits)
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NumberError {
    /// The text is not a decimal number.
    #[error("is not a number")]
    NotANumber,
    /// More significant digits than DynamoDB holds.
    #[error("has more than DynamoDB's {MAX_NUMBER_DIGITS} significant digits")]
    TooManyDigits,
    /// The magnitude is at or above 1E+126.
    #[error("is too large for DynamoDB (at most 9.9999999999999999999999999999999999999E+125)")]
    TooLarge,
    /// The magnitude is below 1E-130 (and the number is not zero).
    #[error("is too small for DynamoDB (at least 1E-130 in magnitude)")]
    TooSmall,
}

impl Number {
    /// Reads a number as DynamoDB does (`[+-]digits[.digits][e[+-]digits]`, either side of the point
    /// may be empty but not both), checks DynamoDB's limits and gives its canonical form.
    ///
    /// ```
    /// use cqrs_item::Number;
    /// assert_eq!(Number::parse("-0.00100").unwrap().as_str(), "-0.001");
    /// assert_eq!(Number::parse("-0").unwrap().as_str(), "0");
    /// assert_eq!(Number::parse("1.5e-7").unwrap().as_str(), "0.00000015");
    /// assert!(Number::parse("1e-131").is_err());
    /// assert!(Number::parse("abc").is_err());
    /// ```
    pub fn parse(text: &str) -> Result<Number, NumberError> {
        let (negative, unsigned) = match text.as_bytes().first() {
            Some(b'-') => (true, text.get(1..).unwrap_or_default()),
            Some(b'+') => (false, text.get(1..).unwrap_or_default()),
            _ => (false, text),
        };
        let (mantissa, exponent) = match unsigned.split_once(['e', 'E']) {
            Some((mantissa, exponent)) => (mantissa, parse_exponent(exponent)?),
            None => (unsigned, 0),
        };
        let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        if int.is_empty() && frac.is_empty()
            || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
        {
            return Err(NumberError::NotANumber);
        }
        // The digits, and where the decimal point falls among them.
        let digits = int.bytes().chain(frac.bytes());
        let leading_zeros = digits.clone().take_while(|&d| d == b'0').count();
        let significant: Vec<u8> = digits.skip(leading_zeros).collect();
        let trailing_zeros = significant.iter().rev().take_while(|&&d| d == b'0').count();
        let significant = significant
            .get(..significant.len() - trailing_zeros)
            .unwrap_or_default();
        if significant.is_empty() {
            return Ok(Number("0".into()));
        }
        if significant.len() > MAX_NUMBER_DIGITS {
            return Err(NumberError::TooManyDigits);
        }
        // `point` digits of `significant` stand before the decimal point (negative: zeros after it).
        let point = (int.len() as i64 - leading_zeros as i64).saturating_add(exponent);
        let magnitude = point - 1;
        if magnitude > MAX_MAGNITUDE {
            return Err(NumberError::TooLarge);
        }
        if magnitude < MIN_MAGNITUDE {
            return Err(NumberError::TooSmall);
        }
        let len = significant.len() as i64;
        let mut canonical = String::with_capacity(significant.len() + 135);
        if negative {
            canonical.push('-');
        }
        let digit = |&d: &u8| char::from(d);
        if point <= 0 {
            canonical.push_str("0.");
            canonical.extend(std::iter::repeat_n('0', (-point) as usize));
            canonical.extend(significant.iter().map(digit));
        } else if point >= len {
            canonical.extend(significant.iter().map(digit));
            canonical.extend(std::iter::repeat_n('0', (point - len) as usize));
        } else {
            let (whole, fraction) = significant.split_at(point as usize);
            canonical.extend(whole.iter().map(digit));
            canonical.push('.');
            canonical.extend(fraction.iter().map(digit));
        }
        Ok(Number(canonical))
    }

    /// The canonical decimal text, as DynamoDB's `N` takes it and as JSON writes it.
    ///
    /// ```
    /// assert_eq!(cqrs_item::Number::from(-42).as_str(), "-42");
    /// ```
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The number as an `i64`, when it is an integer in range.
    ///
    /// ```
    /// use cqrs_item::Number;
    /// assert_eq!(Number::from(7).as_i64(), Some(7));
    /// assert_eq!(Number::parse("0.5").unwrap().as_i64(), None);
    /// ```
    pub fn as_i64(&self) -> Option<i64> {
        self.0.parse().ok()
    }

    /// The number as a `u64`, when it is a non-negative integer in range.
    ///
    /// ```
    /// use cqrs_item::Number;
    /// assert_eq!(Number::parse("18446744073709551615").unwrap().as_u64(), Some(u64::MAX));
    /// ```
    pub fn as_u64(&self) -> Option<u64> {
        self.0.parse().ok()
    }

    /// The nearest `f64` (lossy beyond 15 to 17 digits; for display and arithmetic only).
    ///
    /// ```
    /// assert_eq!(cqrs_item::Number::parse("1.5").unwrap().as_f64(), 1.5);
    /// ```
    pub fn as_f64(&self) -> f64 {
        self.0.parse().unwrap_or(f64::NAN)
    }
}

/// An exponent, saturated far beyond DynamoDB's range (so `1e99999999999999999999` is too large,
/// not unreadable).
fn parse_exponent(text: &str) -> Result<i64, NumberError> {
    let (negative, digits) = match text.as_bytes().first() {
        Some(b'-') => (true, text.get(1..).unwrap_or_default()),
        Some(b'+') => (false, text.get(1..).unwrap_or_default()),
        _ => (false, text),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(NumberError::NotANumber);
    }
    let value = digits.bytes().fold(0i64, |acc, d| {
        acc.saturating_mul(10)
            .saturating_add(i64::from(d - b'0'))
            .min(1 << 40)
    });
    Ok(if negative { -value } else { value })
}

impl fmt::Display for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

macro_rules! from_integer {
    ($($t:ty),*) => {$(
        impl From<$t> for Number {
            fn from(value: $t) -> Self {
                Number(value.to_string())
            }
        }
    )*};
}
from_integer!(i8, i16, i32, i64, u8, u16, u32, u64);

impl TryFrom<f64> for Number {
    type Error = NumberError;

    /// The shortest decimal that reads back as `value`; infinities and NaN are not numbers.
    fn try_from(value: f64) -> Result<Self, NumberError> {
        if !value.is_finite() {
            return Err(NumberError::NotANumber);
        }
        Number::parse(&format!("{value:e}"))
    }
}

impl std::str::FromStr for Number {
    type Err = NumberError;

    fn from_str(text: &str) -> Result<Self, NumberError> {
        Number::parse(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canonical(text: &str) -> String {
        Number::parse(text).unwrap().0
    }

    /// What DynamoDB (Local 3.3.1) returned for a top-level `N` put as the left-hand text.
    #[test]
    fn canonical_form_is_dynamodbs() {
        let zeros = |n| "0".repeat(n);
        for (sent, stored) in [
            ("1.50", "1.5".to_string()),
            ("1e2", "100".into()),
            ("1E+2", "100".into()),
            ("1.5e-7", "0.00000015".into()),
            ("-0", "0".into()),
            ("0.0", "0".into()),
            ("0e5", "0".into()),
            ("1e125", format!("1{}", zeros(125))),
            (
                "9.9999999999999999999999999999999999999E+125",
                format!("{}{}", "9".repeat(38), zeros(88)),
            ),
            ("1e-130", format!("0.{}1", zeros(129))),
            ("-1E-130", format!("-0.{}1", zeros(129))),
            (
                "0.12345678901234567890123456789012345678",
                "0.12345678901234567890123456789012345678".into(),
            ),
            (
                "1234567890123456789012345678901234567800000",
                "1234567890123456789012345678901234567800000".into(),
            ),
            ("0.00100", "0.001".into()),
            ("1.0", "1".into()),
            ("-1.500", "-1.5".into()),
            ("123.456e3", "123456".into()),
            ("123.456e-3", "0.123456".into()),
            ("5e0", "5".into()),
            ("-0.5", "-0.5".into()),
            ("1e1", "10".into()),
            ("1.00000000000000000000000000000000000000000", "1".into()),
            ("01", "1".into()),
            ("+1", "1".into()),
            (".5", "0.5".into()),
            ("5.", "5".into()),
            ("1e+0", "1".into()),
        ] {
            assert_eq!(canonical(sent), stored, "{sent}");
        }
    }

    #[test]
    fn limits_are_dynamodbs() {
        for (bad, error) in [
            ("1e126", NumberError::TooLarge),
            ("-1e126", NumberError::TooLarge),
            ("1e99999999999999999999999", NumberError::TooLarge),
            ("1e-131", NumberError::TooSmall),
            ("1e-99999999999999999999999", NumberError::TooSmall),
            (
                "123456789012345678901234567890123456789",
                NumberError::TooManyDigits,
            ),
            (
                "0.123456789012345678901234567890123456789",
                NumberError::TooManyDigits,
            ),
            ("", NumberError::NotANumber),
            ("-", NumberError::NotANumber),
            (".", NumberError::NotANumber),
            ("1e", NumberError::NotANumber),
            ("e5", NumberError::NotANumber),
            ("abc", NumberError::NotANumber),
            ("1.2.3", NumberError::NotANumber),
            ("--1", NumberError::NotANumber),
            ("1e+-2", NumberError::NotANumber),
            ("١", NumberError::NotANumber),
        ] {
            assert_eq!(Number::parse(bad), Err(error), "{bad}");
        }
        // Zero has no magnitude: any exponent is fine.
        assert_eq!(canonical("0e99999999999999999999999"), "0");
        assert_eq!(canonical("12345678901234567890123456789012345678e88"), {
            format!("12345678901234567890123456789012345678{}", "0".repeat(88))
        });
    }

    #[test]
    fn floats_and_integers_convert() {
        assert_eq!(Number::try_from(0.1).unwrap().as_str(), "0.1");
        assert_eq!(Number::try_from(-2.5e-7).unwrap().as_str(), "-0.00000025");
        assert!(Number::try_from(1e300).is_err());
        assert!(Number::try_from(f64::NAN).is_err());
        assert_eq!(Number::from(i64::MIN).as_i64(), Some(i64::MIN));
        assert_eq!(Number::from(u64::MAX).as_str(), "18446744073709551615");
    }
}
