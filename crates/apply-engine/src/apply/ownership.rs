//! Who owns a field of a live object, read from its `metadata.managedFields`: the question
//! `spec.ignore` asks before an apply. As fluxcd/pkg `ssa` does, an ignored field that another
//! server-side-apply manager owns is left out of what we apply (so we never co-own it, and
//! its owner's value stays), while one we own alone, or one written by updates (`kubectl
//! edit`, a controller's PUT), keeps its live value in what we apply.
//!
//! A JSON pointer (`/spec/template/spec/containers/0/image`) becomes fieldsV1 segments
//! (`f:spec`, `f:template`, …); a list index is resolved through the live item, to the
//! `k:{…}` key that names it in an associative list or the `v:…` value in a set.

use serde_json::{Map, Value};

/// Whether an `Apply` manager that `is_other` says is another's owns `pointer` in `live`. A
/// pointer that cannot be resolved in the managed fields counts as not owned by another, as
/// in Flux.
pub fn owned_by_another_applier(
    live: &Value,
    pointer: &str,
    is_other: impl Fn(&str) -> bool,
) -> bool {
    let entries = live
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    entries
        .iter()
        .filter(|entry| {
            entry.get("operation").and_then(Value::as_str) == Some("Apply")
                && entry
                    .get("subresource")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
                && is_other(entry.get("manager").and_then(Value::as_str).unwrap_or(""))
        })
        .filter_map(|entry| entry.get("fieldsV1").and_then(Value::as_object))
        .any(|fields| owns(fields, live, pointer))
}

/// Whether `fields` (a fieldsV1 tree) holds the field at `pointer` of `object`.
fn owns(fields: &Map<String, Value>, object: &Value, pointer: &str) -> bool {
    let mut tree = fields;
    let mut node = object;
    for raw in pointer.split('/').skip(1) {
        let segment = raw.replace("~1", "/").replace("~0", "~");
        let (key, next) = match node {
            Value::Array(items) => {
                let Some(item) = segment.parse::<usize>().ok().and_then(|i| items.get(i)) else {
                    return false;
                };
                let Some(key) = list_key(tree, item) else {
                    return false;
                };
                (key, item)
            }
            Value::Object(map) => {
                let Some(next) = map.get(&segment) else {
                    return false;
                };
                (format!("f:{segment}"), next)
            }
            _ => return false,
        };
        let Some(child) = tree.get(&key) else {
            return false;
        };
        match child.as_object() {
            Some(child) => tree = child,
            None => return false,
        }
        node = next;
    }
    true
}

/// The fieldsV1 key of a list item: `k:{…}` whose fields all match the item, else `v:…` for
/// an item of a set.
fn list_key(tree: &Map<String, Value>, item: &Value) -> Option<String> {
    tree.keys()
        .find(|key| {
            key.strip_prefix("k:")
                .and_then(|json| serde_json::from_str::<Map<String, Value>>(json).ok())
                .is_some_and(|wanted| {
                    wanted
                        .iter()
                        .all(|(name, value)| item.get(name) == Some(value))
                })
        })
        .cloned()
        .or_else(|| {
            let key = format!("v:{}", serde_json::to_string(item).ok()?);
            tree.contains_key(&key).then_some(key)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment() -> Value {
        json!({
            "metadata": {"managedFields": [
                {"manager": "kustomize-controller", "operation": "Apply", "fieldsV1": {
                    "f:spec": {"f:template": {"f:spec": {"f:containers": {
                        "k:{\"name\":\"app\"}": {".": {}, "f:image": {}, "f:name": {}}}}}}}},
                {"manager": "vpa", "operation": "Apply", "fieldsV1": {
                    "f:spec": {"f:template": {"f:spec": {"f:containers": {
                        "k:{\"name\":\"app\"}": {"f:resources": {"f:requests": {}}}}}}}}},
                {"manager": "hpa", "operation": "Update", "fieldsV1": {"f:spec": {"f:replicas": {}}}},
                {"manager": "status-writer", "operation": "Apply", "subresource": "status",
                    "fieldsV1": {"f:status": {"f:replicas": {}}}},
                {"manager": "finalizer", "operation": "Apply", "fieldsV1": {
                    "f:metadata": {"f:finalizers": {"v:\"example.com/keep\"": {}}}}},
            ], "finalizers": ["example.com/keep"]},
            "spec": {"replicas": 3, "template": {"spec": {"containers": [
                {"name": "app", "image": "app:1", "resources": {"requests": {"cpu": "1"}}}]}}},
            "status": {"replicas": 3},
        })
    }

    #[test]
    fn fields_another_applier_owns_are_told_from_ours_and_from_updates() {
        let live = deployment();
        for (pointer, another) in [
            ("/spec/template/spec/containers/0/resources/requests", true),
            ("/spec/template/spec/containers/0/resources", true),
            ("/spec/template/spec/containers/0/image", false),
            ("/spec/replicas", false),
            ("/status/replicas", false),
            ("/metadata/finalizers/0", true),
            ("/spec/template/spec/containers/1/image", false),
            ("/spec/absent", false),
        ] {
            assert_eq!(
                owned_by_another_applier(&live, pointer, |m| m != "kustomize-controller"),
                another,
                "{pointer}"
            );
        }
    }
}
