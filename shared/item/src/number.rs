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
//!
//! Numbers compare by value, exactly, as DynamoDB orders `N` key attributes ([`Ord`] on [`Number`]):
//! `12345678901234567890.1 < 12345678901234567890.2`, which two `f64`s cannot tell apart.

use std::cmp::Ordering;
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
///
/// Equal numbers have the same canonical text, so `==` is equality of value; the order ([`Ord`]) is
/// the order of value, exact to every digit DynamoDB holds:
///
/// ```
/// use cqrs_item::Number;
///
/// let n = |text| Number::parse(text).unwrap();
/// assert!(n("12345678901234567890.1") < n("12345678901234567890.2"));
/// assert!(n("9") < n("10") && n("-10") < n("-9"));
/// assert!(n("-0.5") < n("0") && n("0") < n("1E-130"));
/// assert_eq!(n("1.50").cmp(&n("15e-1")), std::cmp::Ordering::Equal);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Number(String);

impl Ord for Number {
    /// By value: the sign, then the magnitude (the canonical text has no exponent, no leading zeros
    /// before the point and no trailing zeros after it, so the length of the integer part, then its
    /// digits, then the fraction's digits decide).
    fn cmp(&self, other: &Self) -> Ordering {
        let (a_negative, a) = split_sign(&self.0);
        let (b_negative, b) = split_sign(&other.0);
        match (a_negative, b_negative) {
            (false, true) => Ordering::Greater,
            (true, false) => Ordering::Less,
            (false, false) => compare_magnitudes(a, b),
            (true, true) => compare_magnitudes(b, a),
        }
    }
}

impl PartialOrd for Number {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Whether a canonical text is negative, and its digits without the sign.
fn split_sign(text: &str) -> (bool, &str) {
    match text.strip_prefix('-') {
        Some(magnitude) => (true, magnitude),
        None => (false, text),
    }
}

/// Compares two canonical magnitudes (no sign): a longer integer part is larger; then digit by
/// digit, the integer part and then the fraction (a fraction that is a prefix of the other is
/// smaller, as it has no trailing zeros).
fn compare_magnitudes(a: &str, b: &str) -> Ordering {
    let (a_int, a_frac) = a.split_once('.').unwrap_or((a, ""));
    let (b_int, b_frac) = b.split_once('.').unwrap_or((b, ""));
    a_int
        .len()
        .cmp(&b_int.len())
        .then_with(|| a_int.cmp(b_int))
        .then_with(|| a_frac.cmp(b_frac))
}

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
    use proptest::prelude::*;

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
    fn numbers_order_by_value_past_seventeen_digits() {
        let n = |text: &str| Number::parse(text).unwrap();
        let ascending = [
            "-9.9999999999999999999999999999999999999E+125",
            "-12345678901234567890123456789012345679",
            "-12345678901234567890123456789012345678",
            "-12345678901234567890.2",
            "-12345678901234567890.1",
            "-10",
            "-9",
            "-1.5",
            "-1.05",
            "-1",
            "-0.5",
            "-1E-130",
            "0",
            "1E-130",
            "2E-130",
            "0.1",
            "0.10000000000000000000000000000000000001",
            "0.11",
            "0.9",
            "1",
            "1.05",
            "1.5",
            "9",
            "10",
            "9007199254740992",
            "9007199254740993",
            "12345678901234567890.1",
            "12345678901234567890.2",
            "12345678901234567890123456789012345678",
            "12345678901234567890123456789012345679",
            "1E+125",
            "1.0000000000000000000000000000000000001E+125",
            "9.9999999999999999999999999999999999999E+125",
        ];
        for (i, a) in ascending.iter().enumerate() {
            for (j, b) in ascending.iter().enumerate() {
                assert_eq!(n(a).cmp(&n(b)), i.cmp(&j), "{a} vs {b}");
            }
        }
        // Equal values, written differently, are equal.
        assert_eq!(n("1.50").cmp(&n("15E-1")), Ordering::Equal);
        assert_eq!(n("-0").cmp(&n("0.000")), Ordering::Equal);
    }

    /// A number in scientific form, `sign d.ddd E exp`, and the texts it can be written as.
    fn scientific() -> impl Strategy<Value = (bool, String, i64, String)> {
        (
            any::<bool>(),
            "[1-9][0-9]{0,37}",
            -130i64..=125,
            0usize..40,
            any::<bool>(),
        )
            .prop_map(|(negative, digits, exponent, point, upper)| {
                // Written with the point after `point` digits (padded with zeros when beyond).
                let point = point.min(digits.len());
                let (int, frac) = digits.split_at(point);
                let int = if int.is_empty() { "0" } else { int };
                let written_exponent = exponent - (point as i64 - 1);
                let e = if upper { 'E' } else { 'e' };
                let sign = if negative { "-" } else { "" };
                let text = format!("{sign}{int}.{frac}0{e}{written_exponent}");
                (negative, digits, exponent, text)
            })
    }

    /// The oracle: compares normalised (sign, exponent, digits) without any decimal text.
    fn oracle(a: &(bool, String, i64, String), b: &(bool, String, i64, String)) -> Ordering {
        let magnitude = |(_, digits, exponent, _): &(bool, String, i64, String)| {
            (*exponent, digits.trim_end_matches('0').to_string())
        };
        let by_magnitude = magnitude(a).cmp(&magnitude(b));
        match (a.0, b.0) {
            (false, true) => Ordering::Greater,
            (true, false) => Ordering::Less,
            (false, false) => by_magnitude,
            (true, true) => by_magnitude.reverse(),
        }
    }

    proptest::proptest! {
        #[test]
        fn order_is_the_oracles(a in scientific(), b in scientific()) {
            let (x, y) = (Number::parse(&a.3).unwrap(), Number::parse(&b.3).unwrap());
            proptest::prop_assert_eq!(x.cmp(&y), oracle(&a, &b), "{} vs {}", a.3, b.3);
            proptest::prop_assert_eq!(x.cmp(&x), Ordering::Equal);
        }

        #[test]
        fn neighbours_in_the_last_digit_order(a in scientific()) {
            // The same digits with the last one raised by one (when it is not a 9): larger by one
            // unit in the last place, which an f64 loses past 17 digits.
            let (negative, digits, exponent, _) = &a;
            proptest::prop_assume!(!digits.ends_with('9'));
            let mut raised = digits.clone();
            let last = raised.pop().unwrap();
            raised.push(char::from(last as u8 + 1));
            let sign = if *negative { "-" } else { "" };
            let x = Number::parse(&format!("{sign}0.{digits}E{}", exponent + 1)).unwrap();
            let y = Number::parse(&format!("{sign}0.{raised}E{}", exponent + 1)).unwrap();
            let want = if *negative { Ordering::Greater } else { Ordering::Less };
            proptest::prop_assert_eq!(x.cmp(&y), want, "{} vs {}", x, y);
        }
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
