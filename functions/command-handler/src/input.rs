//! The body of `POST /commands` and `PATCH /commands`: strict parsing (unknown fields and wrong
//! types are a 400 that names the field) and key validation through the key crate.

use cqrs_keys::{VERSION_LATEST, validate_partition_key, validate_sort_key};
use cqrs_problem::ApiError;
use serde::Deserialize;
use serde_json::{Map, Value};

/// A command as the client sends it.
///
/// `version` is the version the caller last saw: `0` creates, `N` writes `N + 1`, `-1` writes after
/// the latest. For `PATCH`, absent fields keep the stored value and `attributes` is merged.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CommandInput {
    /// Partition key, `PREFIX#TENANT[#more]`.
    pub pk: String,
    /// Sort key without version.
    pub sk: String,
    /// The version the caller last saw.
    pub version: i64,
    /// Business code.
    #[serde(default)]
    pub code: Option<String>,
    /// Display name.
    #[serde(default)]
    pub name: Option<String>,
    /// The item's data.
    #[serde(default)]
    pub attributes: Option<Map<String, Value>>,
    /// Soft delete.
    #[serde(default)]
    pub is_deleted: Option<bool>,
    /// Expiry in epoch seconds.
    #[serde(default)]
    pub ttl: Option<i64>,
}

/// Parses and validates a command body. `for_patch` refuses `version: 0` (a patch needs a stored
/// version to merge into).
pub fn parse_command(body: &str, for_patch: bool) -> Result<CommandInput, ApiError> {
    let value: Value = serde_json::from_str(body)
        .map_err(|e| ApiError::bad_request(format!("the body is not valid JSON: {e}")))?;
    if !value.is_object() {
        return Err(ApiError::bad_request("the body must be a JSON object"));
    }
    let input: CommandInput = serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let message = e.inner().to_string();
        let field = if path == "." {
            // Missing fields are reported at the root; the message names them in backticks.
            message
                .split('`')
                .nth(1)
                .map(str::to_string)
                .unwrap_or_else(|| "body".to_string())
        } else {
            path
        };
        ApiError::bad_field(field, message)
    })?;
    validate_partition_key(&input.pk).map_err(|e| ApiError::bad_field("pk", e))?;
    validate_sort_key(&input.sk).map_err(|e| ApiError::bad_field("sk", e))?;
    match input.version {
        VERSION_LATEST => {}
        0 if for_patch => {
            return Err(ApiError::bad_field(
                "version",
                "a PATCH merges into a stored version: give that version or -1 for the latest",
            ));
        }
        v if v >= 0 => {}
        v => {
            return Err(ApiError::bad_field(
                "version",
                format!("{v} is not a version: use 0 to create, N to write N+1, -1 for the latest"),
            ));
        }
    }
    if let Some(ttl) = input.ttl
        && ttl <= 0
    {
        return Err(ApiError::bad_field(
            "ttl",
            "must be a positive epoch time in seconds",
        ));
    }
    Ok(input)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(body: &str) -> Option<String> {
        match parse_command(body, false).unwrap_err() {
            ApiError::BadRequest { field, .. } => field,
            other => panic!("expected a 400, got {other:?}"),
        }
    }

    #[test]
    fn a_full_command_parses() {
        let input = parse_command(
            r#"{"pk":"PRODUCT#t1","sk":"P001","version":0,"name":"n","code":"c",
                "attributes":{"a":1},"isDeleted":false,"ttl":1900000000}"#,
            false,
        )
        .unwrap();
        assert_eq!(input.pk, "PRODUCT#t1");
        assert_eq!(input.attributes.unwrap()["a"], 1);
    }

    #[test]
    fn errors_name_the_field() {
        assert_eq!(
            field_of(r#"{"pk":"P#t","sk":"s","version":"1"}"#).as_deref(),
            Some("version")
        );
        assert_eq!(
            field_of(r#"{"pk":"P#t","sk":"s"}"#).as_deref(),
            Some("version")
        );
        assert_eq!(
            field_of(r#"{"pk":"P#t","sk":"s","version":1,"extra":1}"#).as_deref(),
            Some("extra")
        );
        assert_eq!(
            field_of(r#"{"pk":"P#t","sk":"s","version":1,"attributes":[]}"#).as_deref(),
            Some("attributes")
        );
        assert_eq!(
            field_of(r#"{"pk":"P#t","sk":"s@2","version":1}"#).as_deref(),
            Some("sk")
        );
        assert_eq!(
            field_of(r#"{"pk":"P","sk":"s","version":1}"#).as_deref(),
            Some("pk")
        );
        assert_eq!(
            field_of(r#"{"pk":"P#t","sk":"s","version":-2}"#).as_deref(),
            Some("version")
        );
        assert_eq!(
            field_of(r#"{"pk":"P#t","sk":"s","version":1,"ttl":0}"#).as_deref(),
            Some("ttl")
        );
        assert_eq!(
            field_of(r#"{"pk":"P#t","sk":"s","version":1.5}"#).as_deref(),
            Some("version")
        );
    }

    #[test]
    fn non_objects_are_refused() {
        for body in ["[]", "1", "\"x\"", "null", "{", ""] {
            assert_eq!(
                parse_command(body, false).unwrap_err().status(),
                400,
                "{body}"
            );
        }
    }

    #[test]
    fn patch_refuses_version_zero() {
        let err = parse_command(r#"{"pk":"P#t","sk":"s","version":0}"#, true).unwrap_err();
        assert_eq!(err.status(), 400);
    }
}
