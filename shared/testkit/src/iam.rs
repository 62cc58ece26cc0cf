//! Reading IAM policies and CloudFormation intrinsics of a transformed template (JSON) as plain,
//! comparable text: what the template tests (`sam_transformed`, `sql_auth`) and the own-route
//! checks ([`crate::own_routes`]) compare grants with.

use serde_json::Value;

/// An intrinsic or string as one comparable text: `{"Fn::GetAtt": [A, B]}` is `${A.B}`,
/// `{"Ref": X}` is `${X}`, `{"Fn::Sub": s}` and `{"Fn::Sub": [s, vars]}` are `s`, a string
/// itself, anything else its JSON.
///
/// ```
/// use cqrs_testkit::iam::canon;
/// use serde_json::json;
/// assert_eq!(canon(&json!({"Fn::GetAtt": ["DataTable", "Arn"]})), "${DataTable.Arn}");
/// assert_eq!(canon(&json!({"Ref": "HttpApi"})), "${HttpApi}");
/// assert_eq!(canon(&json!({"Fn::Sub": ["${A}/x", {"A": 1}]})), "${A}/x");
/// assert_eq!(canon(&json!("*")), "*");
/// ```
pub fn canon(value: &Value) -> String {
    if let Some(s) = value.as_str() {
        return s.to_owned();
    }
    if let Some(parts) = value.get("Fn::GetAtt").and_then(Value::as_array) {
        let parts: Vec<String> = parts.iter().map(canon).collect();
        return format!("${{{}}}", parts.join("."));
    }
    if let Some(name) = value.get("Ref").and_then(Value::as_str) {
        return format!("${{{name}}}");
    }
    match value.get("Fn::Sub") {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts.first().map(canon).unwrap_or_default(),
        _ => value.to_string(),
    }
}

/// A string or list (an IAM `Action` or `Resource`), or any single value, as a list; nothing
/// (`null`) is the empty list.
///
/// ```
/// use cqrs_testkit::iam::list;
/// use serde_json::json;
/// assert_eq!(list(&json!("s3:GetObject")), vec![json!("s3:GetObject")]);
/// assert_eq!(list(&json!(["a", "b"])).len(), 2);
/// assert!(list(&json!(null)).is_empty());
/// ```
pub fn list(value: &Value) -> Vec<Value> {
    match value {
        Value::Array(items) => items.clone(),
        Value::Null => Vec::new(),
        other => vec![other.clone()],
    }
}
