//! JSON merge patch (RFC 7396) on a call's parameters, and the per-field changes it made,
//! which become `parameters_history` entries and `modification_applied`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Applies `patch` to `target` as RFC 7396 says: objects merge recursively, `null` removes
/// a member, anything else replaces.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(target) = target else { return };
    for (key, value) in patch {
        if value.is_null() {
            target.remove(key);
        } else {
            merge_patch(target.entry(key.clone()).or_insert(Value::Null), value);
        }
    }
}

/// One top-level parameter that changed. `None` means absent (`null` in the JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FieldChange {
    pub field: String,
    pub old: Option<Value>,
    pub new: Option<Value>,
}

/// The top-level parameters that differ between `before` and `after`: changed and removed
/// fields in key order, then added ones in key order.
pub fn changed_fields(before: &Map<String, Value>, after: &Map<String, Value>) -> Vec<FieldChange> {
    let mut changes: Vec<FieldChange> = before
        .iter()
        .filter(|(key, old)| after.get(*key) != Some(*old))
        .map(|(key, old)| FieldChange { field: key.clone(), old: Some(old.clone()), new: after.get(key).cloned() })
        .collect();
    changes.extend(after.iter().filter(|(key, _)| !before.contains_key(*key)).map(|(key, new)| FieldChange {
        field: key.clone(),
        old: None,
        new: Some(new.clone()),
    }));
    changes
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn patched(target: Value, patch: Value) -> Value {
        let mut target = target;
        merge_patch(&mut target, &patch);
        target
    }

    /// The examples of RFC 7396 appendix A.
    #[test]
    fn follows_the_rfc_examples() {
        let cases = [
            (json!({"a":"b"}), json!({"a":"c"}), json!({"a":"c"})),
            (json!({"a":"b"}), json!({"b":"c"}), json!({"a":"b","b":"c"})),
            (json!({"a":"b"}), json!({"a":null}), json!({})),
            (json!({"a":"b","b":"c"}), json!({"a":null}), json!({"b":"c"})),
            (json!({"a":["b"]}), json!({"a":"c"}), json!({"a":"c"})),
            (json!({"a":"c"}), json!({"a":["b"]}), json!({"a":["b"]})),
            (json!({"a":{"b":"c"}}), json!({"a":{"b":"d","c":null}}), json!({"a":{"b":"d"}})),
            (json!({"a":[{"b":"c"}]}), json!({"a":[1]}), json!({"a":[1]})),
            (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
            (json!({"a":"b"}), json!(["c"]), json!(["c"])),
            (json!({"a":"foo"}), json!(null), json!(null)),
            (json!({"a":"foo"}), json!("bar"), json!("bar")),
            (json!({"e":null}), json!({"a":1}), json!({"e":null,"a":1})),
            (json!([1, 2]), json!({"a":"b","c":null}), json!({"a":"b"})),
            (json!({}), json!({"a":{"bb":{"ccc":null}}}), json!({"a":{"bb":{}}})),
        ];
        for (target, patch, expected) in cases {
            assert_eq!(patched(target.clone(), patch.clone()), expected, "{target} + {patch}");
        }
    }

    #[test]
    fn reports_changed_added_and_removed_fields() {
        let before = json!({"to": "john@gmail.com", "subject": "Hi", "cc": "a@b.c"});
        let after = json!({"to": "john.smith@gmail.com", "subject": "Hi", "bcc": "d@e.f"});
        let (Value::Object(before), Value::Object(after)) = (before, after) else { unreachable!() };
        let changes = changed_fields(&before, &after);
        assert_eq!(
            changes,
            [
                FieldChange { field: "cc".into(), old: Some(json!("a@b.c")), new: None },
                FieldChange {
                    field: "to".into(),
                    old: Some(json!("john@gmail.com")),
                    new: Some(json!("john.smith@gmail.com"))
                },
                FieldChange { field: "bcc".into(), old: None, new: Some(json!("d@e.f")) },
            ]
        );
        assert!(changed_fields(&before, &before).is_empty());
    }
}
