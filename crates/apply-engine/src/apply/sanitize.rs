//! Secrets in a diff: the values of a Secret's `data` are masked in both the live object and
//! what the apply would make of it, as fluxcd/pkg `ssa` masks them for `flux diff`: `***`
//! where the value is the same (or on one side only), `*** (before)` and `*** (after)` where
//! it changed. Keys stay, so a diff still tells which entries changed.

use serde_json::Value;

const MASK: &str = "***";
const MASK_BEFORE: &str = "*** (before)";
const MASK_AFTER: &str = "*** (after)";

/// Whether `object` is a core Secret, whose data a diff must not show.
pub fn is_secret(object: &Value) -> bool {
    object.get("kind").and_then(Value::as_str) == Some("Secret")
        && object.get("apiVersion").and_then(Value::as_str) == Some("v1")
}

/// Masks the `data` values of `old` and `new` (either may be absent).
pub fn mask_secret_data(old: Option<&mut Value>, new: Option<&mut Value>) {
    let (old, new) = (data_of(old), data_of(new));
    let before: Option<serde_json::Map<String, Value>> = old.as_deref().cloned();
    let after: Option<serde_json::Map<String, Value>> = new.as_deref().cloned();
    if let Some(old) = old {
        for (key, value) in old.iter_mut() {
            let changed = after
                .as_ref()
                .and_then(|after| after.get(key))
                .is_some_and(|other| other != value);
            *value = Value::from(if changed { MASK_BEFORE } else { MASK });
        }
    }
    if let Some(new) = new {
        for (key, value) in new.iter_mut() {
            let changed = before
                .as_ref()
                .and_then(|before| before.get(key))
                .is_some_and(|other| other != value);
            *value = Value::from(if changed { MASK_AFTER } else { MASK });
        }
    }
}

fn data_of(object: Option<&mut Value>) -> Option<&mut serde_json::Map<String, Value>> {
    object
        .and_then(|object| object.get_mut("data"))
        .and_then(Value::as_object_mut)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// fluxcd/pkg `ssa` `TestSanitizeUnstructuredData`, row by row.
    #[test]
    fn flux_sanitize_unstructured_data_rows() {
        let data = |pairs: Value| json!({"data": pairs});
        // (row, old, new, old masked, new masked)
        type Row<'a> = (
            &'a str,
            Option<Value>,
            Option<Value>,
            Option<Value>,
            Option<Value>,
        );
        let rows: Vec<Row> = vec![
            (
                "sanitizes data",
                Some(data(json!({"token": "abc", "password": "123"}))),
                Some(data(json!({"token": "abc", "password": "123"}))),
                Some(data(json!({"token": MASK, "password": MASK}))),
                Some(data(json!({"token": MASK, "password": MASK}))),
            ),
            (
                "sanitizes data with different values",
                Some(data(json!({"token": "abc", "password": "123"}))),
                Some(data(json!({"token": "def", "password": "456"}))),
                Some(data(json!({"token": MASK_BEFORE, "password": MASK_BEFORE}))),
                Some(data(json!({"token": MASK_AFTER, "password": MASK_AFTER}))),
            ),
            (
                "sanitizes data with different keys",
                Some(data(json!({"token": "abc", "password": "123"}))),
                Some(data(json!({"username": "admin", "token": "abc"}))),
                Some(data(json!({"token": MASK, "password": MASK}))),
                Some(data(json!({"username": MASK, "token": MASK}))),
            ),
            (
                "sanitizes new object without old object",
                None,
                Some(data(json!({"token": "abc"}))),
                None,
                Some(data(json!({"token": MASK}))),
            ),
            (
                "sanitizes old object without new object",
                Some(data(json!({"token": "abc"}))),
                None,
                Some(data(json!({"token": MASK}))),
                None,
            ),
            (
                "sanitizes empty object",
                Some(data(json!({}))),
                Some(data(json!({}))),
                Some(data(json!({}))),
                Some(data(json!({}))),
            ),
        ];
        for (name, mut old, mut new, want_old, want_new) in rows {
            mask_secret_data(old.as_mut(), new.as_mut());
            assert_eq!(old, want_old, "{name}: old");
            assert_eq!(new, want_new, "{name}: new");
        }
    }

    #[test]
    fn only_core_secrets_are_masked_in_diffs() {
        assert!(is_secret(&json!({"apiVersion": "v1", "kind": "Secret"})));
        assert!(!is_secret(
            &json!({"apiVersion": "v1", "kind": "ConfigMap"})
        ));
        assert!(!is_secret(
            &json!({"apiVersion": "example.com/v1", "kind": "Secret"})
        ));
    }
}
