//! The deep merge of `PATCH /commands`: a partial `attributes` object merged into a stored one.

use serde_json::{Map, Value};

/// Merges `patch` into `target` the way JSON Merge Patch (RFC 7396) does: an object merges into an
/// object key by key, recursively; `null` removes the key; any other value (arrays included)
/// replaces what was there.
///
/// ```
/// use serde_json::json;
/// let mut stored = json!({"price": 100, "size": {"w": 1, "h": 2}, "old": true});
/// let patch = json!({"size": {"h": 3}, "old": null, "new": [1]});
/// cqrs_item::merge_attributes(
///     stored.as_object_mut().unwrap(),
///     patch.as_object().unwrap(),
/// );
/// assert_eq!(stored, json!({"price": 100, "size": {"w": 1, "h": 3}, "new": [1]}));
/// ```
pub fn merge_attributes(target: &mut Map<String, Value>, patch: &Map<String, Value>) {
    for (key, value) in patch {
        match value {
            Value::Null => {
                target.remove(key);
            }
            Value::Object(patch_map) => {
                if let Some(Value::Object(existing)) = target.get_mut(key) {
                    merge_attributes(existing, patch_map);
                } else {
                    let mut fresh = Map::new();
                    merge_attributes(&mut fresh, patch_map);
                    target.insert(key.clone(), Value::Object(fresh));
                }
            }
            other => {
                target.insert(key.clone(), other.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn merged(stored: Value, patch: Value) -> Value {
        let mut stored = stored.as_object().unwrap().clone();
        merge_attributes(&mut stored, patch.as_object().unwrap());
        Value::Object(stored)
    }

    #[test]
    fn empty_patch_changes_nothing() {
        let stored = json!({"a": {"b": 1}});
        assert_eq!(merged(stored.clone(), json!({})), stored);
    }

    #[test]
    fn object_replaces_scalar_and_nulls_inside_new_objects_vanish() {
        assert_eq!(
            merged(json!({"a": 1}), json!({"a": {"b": null, "c": 2}})),
            json!({"a": {"c": 2}})
        );
    }

    #[test]
    fn arrays_are_replaced_not_concatenated() {
        assert_eq!(
            merged(json!({"a": [1, 2]}), json!({"a": [3]})),
            json!({"a": [3]})
        );
    }
}
