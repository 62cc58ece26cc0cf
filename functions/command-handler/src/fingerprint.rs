//! The fingerprint of a command request, stored with its idempotency record, so that a retry with
//! the same `Idempotency-Key` is answered from the first result only when it is the same request.
//!
//! The fingerprint is a SHA-256 digest of the method and the body as JSON in a canonical form:
//! member order and white space do not matter, numbers are compared exactly (the item crate's
//! [`parse_json`](cqrs_item::parse_json) keeps every digit DynamoDB keeps, so `1.00000000000000000001` and `1` differ,
//! where reading them as `f64` made them equal). It is versioned (`v2:` before the digest);
//! records written before the version existed hold the digest of the body as serde_json printed
//! it (numbers through `f64`), which [`matches()`] still recognises, so retries in flight across a
//! deploy still replay.

use lambda_http::http::Method;
use sha2::{Digest, Sha256};

/// The prefix of fingerprints of this version.
pub const VERSION_PREFIX: &str = "v2:";

/// The fingerprint of `method` with `body` (a JSON text; a text that is not JSON, or holds a
/// number DynamoDB cannot store, is digested as it is).
///
/// ```
/// use cqrs_command_handler::fingerprint::of;
/// use lambda_http::http::Method;
///
/// let a = of(&Method::POST, r#"{"a":1,"b":2.50}"#);
/// assert!(a.starts_with("v2:"));
/// assert_eq!(a, of(&Method::POST, "{ \"b\": 2.5,\n \"a\": 1 }"));
/// assert_ne!(a, of(&Method::PATCH, r#"{"a":1,"b":2.5}"#));
/// // 21 significant digits: not the same number as 1.
/// assert_ne!(
///     of(&Method::POST, r#"{"n":1.00000000000000000001}"#),
///     of(&Method::POST, r#"{"n":1}"#)
/// );
/// ```
pub fn of(method: &Method, body: &str) -> String {
    let canonical = cqrs_item::parse_json(body)
        .map(|value| value.to_string())
        .unwrap_or_else(|_| body.to_string());
    format!("{VERSION_PREFIX}{}", digest(method, &canonical))
}

/// Whether a stored fingerprint is the one of `method` with `body`, whichever version wrote it.
///
/// ```
/// use cqrs_command_handler::fingerprint::{matches, of};
/// use lambda_http::http::Method;
///
/// let body = r#"{"pk":"P#t1","sk":"a","version":0}"#;
/// assert!(matches(&of(&Method::POST, body), &Method::POST, body));
/// assert!(!matches(&of(&Method::POST, body), &Method::PATCH, body));
/// ```
pub fn matches(stored: &str, method: &Method, body: &str) -> bool {
    match stored.strip_prefix(VERSION_PREFIX) {
        Some(_) => stored == of(method, body),
        None => stored == legacy(method, body),
    }
}

/// The fingerprint records held before it was versioned: the body as serde_json printed it.
fn legacy(method: &Method, body: &str) -> String {
    let canonical = serde_json::from_str::<serde_json::Value>(body)
        .map(|v| v.to_string())
        .unwrap_or_else(|_| body.to_string());
    digest(method, &canonical)
}

fn digest(method: &Method, canonical: &str) -> String {
    let mut digest = Sha256::new();
    digest.update(method.as_str().as_bytes());
    digest.update([0]);
    digest.update(canonical.as_bytes());
    crate::hex(&digest.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_does_not_matter_content_does() {
        let a = of(&Method::POST, r#"{"a":1,"b":2}"#);
        assert_eq!(a, of(&Method::POST, "{ \"b\": 2,\n \"a\": 1 }"));
        assert_ne!(a, of(&Method::PATCH, r#"{"a":1,"b":2}"#));
        assert_ne!(a, of(&Method::POST, r#"{"a":1,"b":3}"#));
    }

    #[test]
    fn numbers_are_not_rounded() {
        // Two bodies that differ past f64's 17 digits, and past u64.
        for (x, y) in [
            ("12345678901234567890123", "12345678901234567890124"),
            ("0.1000000000000000000001", "0.1"),
            ("18446744073709551617", "18446744073709551616"),
        ] {
            let a = format!(r#"{{"attributes":{{"n":{x}}}}}"#);
            let b = format!(r#"{{"attributes":{{"n":{y}}}}}"#);
            assert_ne!(of(&Method::POST, &a), of(&Method::POST, &b), "{x} vs {y}");
            // The old fingerprint could not tell them apart.
            assert_eq!(
                legacy(&Method::POST, &a),
                legacy(&Method::POST, &b),
                "{x} vs {y}"
            );
        }
        // The same number written two ways is the same request.
        assert_eq!(
            of(&Method::POST, r#"{"n":1.50e1}"#),
            of(&Method::POST, r#"{"n":15}"#)
        );
    }

    #[test]
    fn records_from_before_the_version_still_replay() {
        let body = r#"{"pk":"P#t1","sk":"a","version":0,"attributes":{"n":2}}"#;
        let stored = legacy(&Method::POST, body);
        assert!(!stored.starts_with(VERSION_PREFIX));
        assert!(matches(&stored, &Method::POST, body));
        assert!(matches(
            &stored,
            &Method::POST,
            r#"{"version":0,"sk":"a","pk":"P#t1","attributes":{"n":2}}"#
        ));
        assert!(!matches(
            &stored,
            &Method::POST,
            r#"{"pk":"P#t1","sk":"b","version":0}"#
        ));
    }
}
