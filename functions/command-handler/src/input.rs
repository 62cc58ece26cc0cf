//! The body of `POST /commands` and `PATCH /commands`: strict parsing (unknown fields, wrong types
//! and numbers DynamoDB cannot store are a 400 that names the field or attribute path), key
//! validation through the key crate, and the merge-patch meaning of each field.
//!
//! The body is read by `cqrs_item::parse_json`, so numbers inside `attributes` keep every digit
//! (up to DynamoDB's 38 significant digits, in DynamoDB's canonical form: `1.50` is stored as
//! `1.5`); a number DynamoDB cannot hold is refused here, naming its path (`attributes.big`).
//!
//! `PATCH` is a JSON merge patch (RFC 7396) of the named version: an absent field keeps the stored
//! value, a value replaces it, and `null` resets the field to what a `POST` without it gives:
//! `ttl` none (no expiry), `attributes` `{}`, `code` and `name` `""`, `isDeleted` `false`. Inside
//! `attributes`, `null` removes the key and objects merge key by key.

use cqrs_item::{Map, Value, merge_attributes, parse_json};
use cqrs_keys::{VERSION_LATEST, validate_partition_key, validate_sort_key};
use cqrs_problem::ApiError;

/// The fields a command body may hold.
const FIELDS: [&str; 10] = [
    "entity",
    "pk",
    "sk",
    "version",
    "code",
    "name",
    "attributes",
    "isDeleted",
    "ttl",
    "sequence",
];

/// One field of a merge patch (RFC 7396) for a field that may be absent from the item: left out,
/// `null`, or a value.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Patch<T> {
    /// Not in the body: a `PATCH` keeps the stored value, a `POST` has none.
    #[default]
    Absent,
    /// `null`: clears the field (a `POST` has none either).
    Null,
    /// A value: replaces the stored one.
    Value(T),
}

impl<T: Clone> Patch<T> {
    /// The field after a `PATCH` of `stored`: absent keeps it, `null` clears it, a value replaces it.
    pub fn apply(&self, stored: Option<T>) -> Option<T> {
        match self {
            Patch::Absent => stored,
            Patch::Null => None,
            Patch::Value(value) => Some(value.clone()),
        }
    }

    /// The field of a full command (`POST`): the value, or none when absent or `null`.
    pub fn value(&self) -> Option<T> {
        match self {
            Patch::Value(value) => Some(value.clone()),
            Patch::Absent | Patch::Null => None,
        }
    }
}

impl Patch<Map> {
    /// Applies an `attributes` patch to the stored attributes: absent keeps them, `null` empties
    /// them, an object is merged in ([`merge_attributes`]).
    pub fn merge_into(&self, stored: &mut Map) {
        match self {
            Patch::Absent => {}
            Patch::Null => stored.clear(),
            Patch::Value(patch) => merge_attributes(stored, patch),
        }
    }
}

/// A command as the client sends it.
///
/// `version` is the version the caller last saw: `0` creates, `N` writes `N + 1`, `-1` writes after
/// the latest. For `PATCH` see the [module docs](self): `None` / [`Patch::Absent`] keep the stored
/// value; a `null` `code`, `name` or `isDeleted` arrives here as its empty value (`""`, `false`).
#[derive(Debug, Clone, PartialEq)]
pub struct CommandInput {
    /// The model entity the command names (`{"entity": "order", ...}`): the server builds `pk` and
    /// `sk` from the model. Empty `pk` and `sk` until [`crate::entity::resolve`] fills them.
    pub entity: Option<String>,
    /// Partition key, `PREFIX#TENANT[#more]`.
    pub pk: String,
    /// Sort key without version.
    pub sk: String,
    /// The version the caller last saw.
    pub version: i64,
    /// Business code.
    pub code: Option<String>,
    /// Display name.
    pub name: Option<String>,
    /// The item's data (for `PATCH`, merged into the stored data).
    pub attributes: Patch<Map>,
    /// Soft delete.
    pub is_deleted: Option<bool>,
    /// Expiry in epoch seconds.
    pub ttl: Patch<i64>,
    /// A create that draws a sequence number into one of its attributes
    /// ([`crate::sequence::CommandSequence`]); taken (and drawn) by the handler before publishing.
    pub sequence: Option<crate::sequence::CommandSequence>,
    /// The number drawn for `sequence`, stored as the item's `seq`.
    pub seq: Option<i64>,
    /// The `source` recorded on the version; `None`: the route's (`POST /commands`). Never from
    /// the body: the master-data copy marks its versions with it.
    pub source: Option<String>,
    /// The server made the item's id for this command (a new ULID, [`crate::entity::resolve`]):
    /// no version of it can be stored anywhere, so a create needs no read even while the
    /// deployment's heads are not complete. Never from the body.
    pub fresh_id: bool,
}

/// Parses and validates a command body. `for_patch` refuses `version: 0` (a patch needs a stored
/// version to merge into).
pub fn parse_command(body: &str, for_patch: bool) -> Result<CommandInput, ApiError> {
    let value = parse_json(body).map_err(|e| {
        if e.syntax || e.path.is_empty() {
            ApiError::bad_request(format!("the body is not valid JSON: {e}"))
        } else {
            ApiError::bad_field(e.path, e.message)
        }
    })?;
    let Value::Map(mut fields) = value else {
        return Err(ApiError::bad_request("the body must be a JSON object"));
    };
    if let Some(unknown) = fields.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(ApiError::bad_field(
            unknown.clone(),
            format!(
                "unknown field `{unknown}`, expected one of {}",
                FIELDS.map(|f| format!("`{f}`")).join(", ")
            ),
        ));
    }
    let mut take = |name: &'static str| match fields.remove(name) {
        None => Patch::Absent,
        Some(Value::Null) => Patch::Null,
        Some(value) => Patch::Value((name, value)),
    };
    let wrong = |name: &str, expected: &str, found: &Value| {
        ApiError::bad_field(name, format!("invalid type: {found}, expected {expected}"))
    };
    let string = |field: Patch<(&'static str, Value)>| match field {
        Patch::Absent => Ok(Patch::Absent),
        Patch::Null => Ok(Patch::Null),
        Patch::Value((_, Value::String(s))) => Ok(Patch::Value(s)),
        Patch::Value((name, other)) => Err(wrong(name, "a string", &other)),
    };
    let integer = |field: Patch<(&'static str, Value)>| match field {
        Patch::Absent => Ok(Patch::Absent),
        Patch::Null => Ok(Patch::Null),
        Patch::Value((name, Value::Number(n))) => n
            .as_i64()
            .map(Patch::Value)
            .ok_or_else(|| ApiError::bad_field(name, format!("{n} is not a 64-bit integer"))),
        Patch::Value((name, other)) => Err(wrong(name, "an integer", &other)),
    };
    fn required<T>(name: &str, field: Patch<T>) -> Result<T, ApiError> {
        match field {
            Patch::Value(value) => Ok(value),
            Patch::Absent => Err(ApiError::bad_field(name, format!("missing field `{name}`"))),
            Patch::Null => Err(ApiError::bad_field(name, "must not be null")),
        }
    }
    let entity = match string(take("entity"))? {
        Patch::Absent => None,
        Patch::Null => return Err(ApiError::bad_field("entity", "must not be null")),
        Patch::Value(name) => Some(name),
    };
    // By entity, the keys come from the model (or, when given, must match it); otherwise they
    // are required.
    let (pk, sk) = match (entity.is_some(), string(take("pk"))?, string(take("sk"))?) {
        (true, Patch::Absent, Patch::Absent) => (String::new(), String::new()),
        (true, Patch::Value(pk), Patch::Value(sk)) => (pk, sk),
        (true, pk, _) => {
            let field = if matches!(pk, Patch::Value(_)) {
                "sk"
            } else {
                "pk"
            };
            return Err(ApiError::bad_field(
                field,
                "with `entity`, give both `pk` and `sk` or neither (the model builds them)",
            ));
        }
        (false, pk, sk) => (required("pk", pk)?, required("sk", sk)?),
    };
    let version = required("version", integer(take("version"))?)?;
    // `null` resets a field the item always has to its empty value.
    let reset = |field: Patch<String>| match field {
        Patch::Absent => None,
        Patch::Null => Some(String::new()),
        Patch::Value(s) => Some(s),
    };
    let code = reset(string(take("code"))?);
    let name = reset(string(take("name"))?);
    let is_deleted = match take("isDeleted") {
        Patch::Absent => None,
        Patch::Null => Some(false),
        Patch::Value((_, Value::Bool(b))) => Some(b),
        Patch::Value((name, other)) => return Err(wrong(name, "a boolean", &other)),
    };
    let attributes = match take("attributes") {
        Patch::Absent => Patch::Absent,
        Patch::Null => Patch::Null,
        Patch::Value((_, Value::Map(map))) => Patch::Value(map),
        Patch::Value((name, other)) => return Err(wrong(name, "an object", &other)),
    };
    let ttl = integer(take("ttl"))?;
    let sequence = match take("sequence") {
        Patch::Absent | Patch::Null => None,
        Patch::Value((_, value)) => Some(parse_sequence(&value)?),
    };
    let input = CommandInput {
        entity,
        pk,
        sk,
        version,
        code,
        name,
        attributes,
        is_deleted,
        ttl,
        sequence,
        seq: None,
        source: None,
        fresh_id: false,
    };
    if let Some(sequence) = &input.sequence {
        if input.version != 0 || for_patch {
            return Err(ApiError::bad_field(
                "sequence",
                "a sequence number is drawn only by a create (POST with version 0)",
            ));
        }
        if sequence.attribute.is_empty() {
            return Err(ApiError::bad_field(
                "sequence.attribute",
                "must not be empty",
            ));
        }
        if let Patch::Value(attributes) = &input.attributes
            && attributes.contains_key(&sequence.attribute)
        {
            return Err(ApiError::bad_field(
                format!("attributes.{}", sequence.attribute),
                "is the sequence's attribute: the number is drawn into it, do not give it",
            ));
        }
    }
    if !input.pk.is_empty() || input.entity.is_none() {
        validate_partition_key(&input.pk).map_err(|e| ApiError::bad_field("pk", e))?;
        validate_sort_key(&input.sk).map_err(|e| ApiError::bad_field("sk", e))?;
    }
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
    if let Patch::Value(ttl) = input.ttl
        && ttl <= 0
    {
        return Err(ApiError::bad_field(
            "ttl",
            "must be a positive epoch time in seconds (null clears it)",
        ));
    }
    Ok(input)
}

/// The `sequence` member: an object with `attribute`, `typeCode` and the optional draw members;
/// an error names the member (`sequence.rotateBy`).
fn parse_sequence(value: &Value) -> Result<crate::sequence::CommandSequence, ApiError> {
    let json = serde_json::to_value(value).map_err(|e| ApiError::bad_field("sequence", e))?;
    serde_path_to_error::deserialize(json).map_err(|e| {
        let path = e.path().to_string();
        let field = if path.is_empty() || path == "." {
            "sequence".to_string()
        } else {
            format!("sequence.{path}")
        };
        ApiError::bad_field(field, e.into_inner())
    })
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
        let Patch::Value(attributes) = input.attributes else {
            panic!("attributes were given")
        };
        assert_eq!(attributes["a"], 1);
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
    fn numbers_keep_every_digit_and_unstorable_ones_name_their_path() {
        let input = parse_command(
            r#"{"pk":"P#t","sk":"s","version":0,"attributes":{"big":12345678901234567891,
                "dec":0.12345678901234567891,"as_sent":1.50}}"#,
            false,
        )
        .unwrap();
        let Patch::Value(attributes) = input.attributes else {
            panic!("attributes were given")
        };
        assert_eq!(attributes["big"].to_string(), "12345678901234567891");
        assert_eq!(attributes["dec"].to_string(), "0.12345678901234567891");
        assert_eq!(attributes["as_sent"].to_string(), "1.5");
        for (body, field) in [
            (
                r#"{"pk":"P#t","sk":"s","version":0,"attributes":{"a":1e126}}"#,
                "attributes.a",
            ),
            (
                r#"{"pk":"P#t","sk":"s","version":0,"attributes":{"a":{"b":[1,1e-131]}}}"#,
                "attributes.a.b[1]",
            ),
            (
                r#"{"pk":"P#t","sk":"s","version":0,"attributes":{"n":123456789012345678901234567890123456789}}"#,
                "attributes.n",
            ),
            (r#"{"pk":"P#t","sk":"s","version":1e30}"#, "version"),
            (r#"{"pk":"P#t","sk":"s","version":0,"ttl":1e999}"#, "ttl"),
            (r#"{"pk":"P#t","sk":"s","version":0,"pk":"Q#t"}"#, "pk"),
        ] {
            assert_eq!(field_of(body).as_deref(), Some(field), "{body}");
        }
    }

    #[test]
    fn null_means_reset_absent_means_keep() {
        let input = parse_command(
            r#"{"pk":"P#t","sk":"s","version":1,"ttl":null,"attributes":null,"code":null,
                "name":null,"isDeleted":null}"#,
            true,
        )
        .unwrap();
        assert_eq!(input.ttl, Patch::Null);
        assert_eq!(input.ttl.apply(Some(5)), None);
        assert_eq!(input.attributes, Patch::Null);
        assert_eq!(input.code.as_deref(), Some(""));
        assert_eq!(input.name.as_deref(), Some(""));
        assert_eq!(input.is_deleted, Some(false));
        let mut stored = cqrs_item::map_from_json(serde_json::json!({"a": 1})).unwrap();
        input.attributes.merge_into(&mut stored);
        assert!(stored.is_empty());

        let input = parse_command(r#"{"pk":"P#t","sk":"s","version":1}"#, true).unwrap();
        assert_eq!(input.ttl.apply(Some(5)), Some(5));
        assert_eq!(input.ttl.value(), None);
        assert_eq!(input.code, None);
        let mut stored = cqrs_item::map_from_json(serde_json::json!({"a": 1})).unwrap();
        input.attributes.merge_into(&mut stored);
        assert_eq!(stored["a"], 1);

        let input = parse_command(r#"{"pk":"P#t","sk":"s","version":1,"ttl":7}"#, true).unwrap();
        assert_eq!(input.ttl.apply(Some(5)), Some(7));
        assert_eq!(
            field_of(r#"{"pk":"P#t","sk":"s","version":null}"#).as_deref(),
            Some("version")
        );
        assert_eq!(
            field_of(r#"{"pk":null,"sk":"s","version":1}"#).as_deref(),
            Some("pk")
        );
    }

    #[test]
    fn patch_refuses_version_zero() {
        let err = parse_command(r#"{"pk":"P#t","sk":"s","version":0}"#, true).unwrap_err();
        assert_eq!(err.status(), 400);
    }
}
