//! The deep merge of `PATCH /commands`: a partial `attributes` object merged into a stored one.

use crate::{Map, Value};

/// Merges `patch` into `target` the way JSON Merge Patch (RFC 7396) does: an object merges into an
/// object key by key, recursively; `null` removes the key; any other value (arrays included)
/// replaces what was there. Nulls inside an object that replaces a non-object vanish too.
///
/// ```
/// use cqrs_item::{map_from_json, merge_attributes};
/// use serde_json::json;
/// let mut stored = map_from_json(json!({"price": 100, "size": {"w": 1, "h": 2}, "old": true})).unwrap();
/// let patch = map_from_json(json!({"size": {"h": 3}, "old": null, "new": [1]})).unwrap();
/// merge_attributes(&mut stored, &patch);
/// assert_eq!(stored, map_from_json(json!({"price": 100, "size": {"w": 1, "h": 3}, "new": [1]})).unwrap());
/// ```
pub fn merge_attributes(target: &mut Map, patch: &Map) {
    for (key, value) in patch {
        match value {
            Value::Null => {
                target.remove(key);
            }
            Value::Map(patch_map) => {
                if let Some(Value::Map(existing)) = target.get_mut(key) {
                    merge_attributes(existing, patch_map);
                } else {
                    let mut fresh = Map::new();
                    merge_attributes(&mut fresh, patch_map);
                    target.insert(key.clone(), Value::Map(fresh));
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
    use crate::map_from_json;
    use serde_json::json;

    fn merged(stored: serde_json::Value, patch: serde_json::Value) -> Map {
        let mut stored = map_from_json(stored).unwrap();
        merge_attributes(&mut stored, &map_from_json(patch).unwrap());
        stored
    }

    fn map(value: serde_json::Value) -> Map {
        map_from_json(value).unwrap()
    }

    #[test]
    fn empty_patch_changes_nothing() {
        let stored = json!({"a": {"b": 1}});
        assert_eq!(merged(stored.clone(), json!({})), map(stored));
    }

    #[test]
    fn object_replaces_scalar_and_nulls_inside_new_objects_vanish() {
        assert_eq!(
            merged(json!({"a": 1}), json!({"a": {"b": null, "c": 2}})),
            map(json!({"a": {"c": 2}}))
        );
    }

    #[test]
    fn arrays_are_replaced_not_concatenated() {
        assert_eq!(
            merged(json!({"a": [1, 2]}), json!({"a": [3]})),
            map(json!({"a": [3]}))
        );
    }

    #[test]
    fn exact_numbers_survive_the_merge() {
        let mut stored = crate::parse_json(r#"{"keep": 0.12345678901234567890123456789012345678}"#)
            .unwrap()
            .as_map()
            .unwrap()
            .clone();
        let patch = crate::parse_json(r#"{"add": 12345678901234567890123456789012345678}"#)
            .unwrap()
            .as_map()
            .unwrap()
            .clone();
        merge_attributes(&mut stored, &patch);
        assert_eq!(
            Value::Map(stored).to_string(),
            r#"{"add":12345678901234567890123456789012345678,"keep":0.12345678901234567890123456789012345678}"#
        );
    }
}
