//! Strategic merge patch for built-in kinds, written from Kubernetes' description of it
//! (community/contributors/devel/sig-api-machinery/strategic-merge-patch.md): maps merge key
//! by key and a null deletes; lists whose schema says `patchStrategy: merge` merge items by
//! their `patchMergeKey` (or as a set of values), other lists are replaced; the directives
//! `$patch: replace|delete|merge`, `$retainKeys` and `$deleteFromPrimitiveList/<field>` are
//! honoured. `$setElementOrder/<field>` is accepted and ignored (see the README's known
//! differences).

use serde_json::{Map, Value};

use super::schema::{Field, Schema};

/// Why a strategic merge patch is refused (a 400, in kube-apiserver's words).
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    #[error("a strategic merge patch may not delete the object")]
    DeletesObject,
    #[error("unknown patch type: {0:?} in map")]
    UnknownPatchType(String),
    /// A directive whose value is not a list.
    #[error("{0} must be a list")]
    NotAList(&'static str),
    #[error("map: {item} does not contain declared merge key: {key}")]
    MissingMergeKey { item: Value, key: String },
}

/// Applies `patch` to `object`.
pub fn patch(object: &mut Value, patch: &Value, schema: Option<Schema>) -> Result<(), PatchError> {
    if patch.get("$patch").and_then(Value::as_str) == Some("delete") {
        return Err(PatchError::DeletesObject);
    }
    merge_map(object, patch, schema)
}

fn child_schema<'a>(schema: Option<Schema<'a>>, key: &str) -> Option<Schema<'a>> {
    match schema?.field(key) {
        Field::Declared(child) => Some(child),
        Field::Free | Field::NotDeclared => None,
    }
}

fn merge_map(
    original: &mut Value,
    patch: &Value,
    schema: Option<Schema>,
) -> Result<(), PatchError> {
    let Some(patch_map) = patch.as_object() else {
        *original = patch.clone();
        return Ok(());
    };
    match patch_map.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            *original = Value::Object(without_directives(patch_map));
            return Ok(());
        }
        Some("merge") | None => {}
        Some(other) => return Err(PatchError::UnknownPatchType(other.to_string())),
    }
    if !original.is_object() {
        *original = Value::Object(Map::new());
    }
    let target = original.as_object_mut().expect("made an object above");
    if let Some(retained) = patch_map.get("$retainKeys") {
        let keep: Vec<&str> = retained
            .as_array()
            .ok_or(PatchError::NotAList("$retainKeys"))?
            .iter()
            .filter_map(Value::as_str)
            .collect();
        target.retain(|key, _| keep.contains(&key.as_str()));
    }
    for (key, value) in patch_map {
        if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
            let doomed = value
                .as_array()
                .ok_or(PatchError::NotAList("$deleteFromPrimitiveList"))?;
            if let Some(Value::Array(items)) = target.get_mut(field) {
                items.retain(|item| !doomed.contains(item));
            }
            continue;
        }
        if key.starts_with('$') {
            continue;
        }
        if value.is_null() {
            target.remove(key);
            continue;
        }
        let schema = child_schema(schema, key);
        match target.get_mut(key) {
            Some(existing) => match (existing.is_array(), value.as_array()) {
                (true, Some(items)) => merge_list(existing, items, schema)?,
                _ if value.is_object() && existing.is_object() => {
                    merge_map(existing, value, schema)?
                }
                _ => *existing = strip(value),
            },
            None => {
                let mut fresh = Value::Object(Map::new());
                if value.is_object() {
                    merge_map(&mut fresh, value, schema)?;
                    if fresh.as_object().is_some_and(Map::is_empty)
                        && value.get("$patch").and_then(Value::as_str) == Some("delete")
                    {
                        continue;
                    }
                } else {
                    fresh = strip(value);
                }
                target.insert(key.clone(), fresh);
            }
        }
    }
    Ok(())
}

fn merge_list(
    original: &mut Value,
    patch: &[Value],
    schema: Option<Schema>,
) -> Result<(), PatchError> {
    let strategy = schema.and_then(Schema::patch_merge);
    let items = original.as_array_mut().expect("checked by the caller");
    let Some(merge_key) = strategy else {
        *items = patch.iter().map(strip).collect();
        return Ok(());
    };
    if patch
        .iter()
        .any(|item| item.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        *items = patch
            .iter()
            .filter(|item| item.get("$patch").is_none())
            .map(strip)
            .collect();
        return Ok(());
    }
    let item_schema = schema.and_then(Schema::items);
    for patch_item in patch {
        let Some(key) = merge_key else {
            if !items.contains(patch_item) {
                items.push(patch_item.clone());
            }
            continue;
        };
        let wanted = patch_item
            .get(key)
            .ok_or_else(|| PatchError::MissingMergeKey {
                item: patch_item.clone(),
                key: key.to_string(),
            })?;
        let position = items.iter().position(|item| item.get(key) == Some(wanted));
        let delete = patch_item.get("$patch").and_then(Value::as_str) == Some("delete");
        match (position, delete) {
            (Some(index), true) => {
                items.remove(index);
            }
            (None, true) => {}
            (Some(index), false) => merge_map(&mut items[index], patch_item, item_schema)?,
            (None, false) => {
                let mut fresh = Value::Object(Map::new());
                merge_map(&mut fresh, patch_item, item_schema)?;
                items.push(fresh);
            }
        }
    }
    Ok(())
}

fn without_directives(map: &Map<String, Value>) -> Map<String, Value> {
    map.iter()
        .filter(|(key, _)| !key.starts_with('$'))
        .map(|(key, value)| (key.clone(), strip(value)))
        .collect()
}

/// A patch value as stored: directives removed at every level.
fn strip(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(without_directives(map)),
        Value::Array(items) => Value::Array(items.iter().map(strip).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::resources::builtins;
    use super::*;
    use serde_json::json;

    fn deployment_patch(object: &mut Value, patch_body: Value) -> Result<(), PatchError> {
        let rt = builtins()
            .into_iter()
            .find(|rt| rt.kind == "Deployment")
            .unwrap();
        patch(object, &patch_body, Schema::of(&rt))
    }

    #[test]
    fn containers_merge_by_name_and_args_are_replaced() {
        let mut object = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "a", "image": "a:1", "args": ["x", "y"]}, {"name": "b", "image": "b:1"}
        ]}}}});
        deployment_patch(
            &mut object,
            json!({"spec": {"template": {"spec": {"containers": [
                {"name": "a", "args": ["z"]}, {"name": "c", "image": "c:1"},
                {"name": "b", "$patch": "delete"}
            ]}}}}),
        )
        .unwrap();
        assert_eq!(
            object["spec"]["template"]["spec"]["containers"],
            json!([{"name": "a", "image": "a:1", "args": ["z"]}, {"name": "c", "image": "c:1"}])
        );
    }

    #[test]
    fn directives_replace_delete_and_retain() {
        let mut object = json!({"metadata": {"labels": {"a": "1", "b": "2"},
            "finalizers": ["x", "y"]}, "spec": {"strategy": {"type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": 1}}}});
        deployment_patch(
            &mut object,
            json!({"metadata": {"labels": {"$patch": "replace", "c": "3"},
                "$deleteFromPrimitiveList/finalizers": ["x"]},
                "spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}),
        )
        .unwrap();
        assert_eq!(object["metadata"]["labels"], json!({"c": "3"}));
        assert_eq!(object["metadata"]["finalizers"], json!(["y"]));
        assert_eq!(object["spec"]["strategy"], json!({"type": "Recreate"}));
        let refused = deployment_patch(&mut object, json!({"$patch": "delete"}));
        assert!(refused.is_err());
    }
}
