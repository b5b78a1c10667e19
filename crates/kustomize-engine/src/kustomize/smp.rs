//! Strategic merge patch, with kustomize's (kyaml merge2) semantics.
//!
//! Maps merge key by key and `null` deletes. Lists merge only where the schema gives a
//! `merge` strategy (`x-kubernetes-patch-merge-key` along the kind's definitions): lists of
//! maps element by element on the merge key, scalar lists as a union. The merged list holds
//! the patch's elements first, in patch order, then the original elements the patch did not
//! mention. Lists with several `x-kubernetes-list-map-keys` (ports) follow kyaml's element
//! setter instead (see `merge_keyed_list`). Every other list is replaced. `$patch: delete|replace|merge` is honoured; other
//! `$` directives (`$retainKeys`, `$setElementOrder/…`, `$deleteFromPrimitiveList/…`) are
//! not understood by kustomize and stay in the object as ordinary keys.

use crate::value::{Map, Value};

use super::openapi::SchemaView;

const PATCH: &str = "$patch";

/// What applying a patch to a whole object decided.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Patched,
    /// The patch was `$patch: delete` at the top: the object goes away.
    Deleted,
}

/// Where in the schema a value sits.
#[derive(Clone, Copy)]
struct Position<'a> {
    schema: SchemaView<'a>,
    definition: Option<&'a str>,
}

impl<'a> Position<'a> {
    fn child(self, key: &str) -> (Position<'a>, Option<&'a super::openapi::PropertyMeta>) {
        let meta = self.definition.and_then(|d| self.schema.property(d, key));
        let definition = meta.and_then(|m| m.definition.as_deref());
        (
            Position {
                schema: self.schema,
                definition,
            },
            meta,
        )
    }
}

/// Applies `patch` to `object` (of `apiVersion`/`kind` known to the schema or not).
pub fn apply(object: &mut Value, patch: &Value, schema: SchemaView) -> Outcome {
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let kind = object
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let position = Position {
        schema,
        definition: schema.root(&api_version, &kind),
    };
    if patch.get(PATCH).and_then(Value::as_str) == Some("delete") {
        return Outcome::Deleted;
    }
    merge_value(object, patch, position);
    collapse_duplicates(object, position);
    Outcome::Patched
}

/// kyaml's merge walks the whole object it patches: in every list the schema merges on one
/// key, elements sharing a key value collapse into one (at the first one's place, with the
/// last one's content, not merged), and a merged list of scalars loses its repeats; lists the
/// patch never names included. Kinds the schema does not know are left alone.
fn collapse_duplicates(value: &mut Value, position: Position) {
    let Value::Object(map) = value else {
        return;
    };
    for (key, child) in map.iter_mut() {
        let (child_position, meta) = position.child(key);
        match child {
            Value::Object(_) => collapse_duplicates(child, child_position),
            Value::Array(items) => {
                let merged = meta
                    .and_then(|m| m.strategy.as_deref())
                    .is_some_and(|s| s.contains("merge"));
                let single_key = meta
                    .filter(|m| m.list_map_keys.len() <= 1)
                    .and_then(|m| m.merge_key.as_deref());
                match single_key {
                    Some(key) if merged => collapse_by_key(items, key),
                    None if merged && items.iter().all(|v| !v.is_object()) => {
                        let mut seen = Vec::with_capacity(items.len());
                        items.retain(|item| {
                            let first = !seen.contains(item);
                            if first {
                                seen.push(item.clone());
                            }
                            first
                        });
                    }
                    _ => {}
                }
                for item in items.iter_mut() {
                    collapse_duplicates(item, child_position);
                }
            }
            _ => {}
        }
    }
}

/// Elements with the same `key` value become one: the first one's place, the last one's
/// content.
fn collapse_by_key(items: &mut Vec<Value>, key: &str) {
    let mut first_of: Vec<(Value, usize)> = Vec::new();
    let mut keep = vec![true; items.len()];
    for index in 0..items.len() {
        let Some(value) = items[index].get(key).cloned() else {
            continue;
        };
        match first_of.iter().find(|(v, _)| *v == value) {
            Some(&(_, first)) => {
                items[first] = items[index].clone();
                keep[index] = false;
            }
            None => first_of.push((value, index)),
        }
    }
    let mut flags = keep.into_iter();
    items.retain(|_| flags.next().unwrap_or(true));
}

fn merge_value(target: &mut Value, patch: &Value, position: Position) {
    match (target, patch) {
        (Value::Object(target), Value::Object(patch)) => merge_map(target, patch, position),
        (target, patch) => *target = clean(patch),
    }
}

fn merge_map(target: &mut Map, patch: &Map, position: Position) {
    match patch.get(PATCH).and_then(Value::as_str) {
        Some("replace") => {
            *target = clean_map(patch);
            return;
        }
        Some("delete") => {
            target.clear();
            return;
        }
        _ => {}
    }
    for (key, value) in patch {
        if key == PATCH {
            continue;
        }
        if value.is_null() {
            target.remove(key);
            continue;
        }
        let (child_position, meta) = position.child(key);
        match (target.get_mut(key), value) {
            (Some(Value::Object(existing)), Value::Object(patch_map)) => {
                merge_map(existing, patch_map, child_position);
                if patch_map.get(PATCH).and_then(Value::as_str) == Some("delete") {
                    target.remove(key);
                }
            }
            (Some(Value::Array(existing)), Value::Array(patch_items)) => {
                // List-map keys, when the schema has them, identify elements together;
                // otherwise the single patch merge key does.
                let merge_keys: Option<Vec<String>> = meta.and_then(|m| {
                    m.strategy.as_deref().filter(|s| s.contains("merge"))?;
                    if m.list_map_keys.len() > 1 {
                        Some(m.list_map_keys.clone())
                    } else {
                        m.merge_key.clone().map(|k| vec![k])
                    }
                });
                let merges_scalars = meta
                    .and_then(|m| m.strategy.as_deref())
                    .is_some_and(|s| s.contains("merge"));
                merge_list(
                    existing,
                    patch_items,
                    merge_keys,
                    merges_scalars,
                    child_position,
                );
            }
            (_, value) => {
                let is_delete = value.get(PATCH).and_then(Value::as_str) == Some("delete");
                if is_delete {
                    target.remove(key);
                } else {
                    target.insert(key.clone(), clean(value));
                }
            }
        }
    }
}

fn merge_list(
    target: &mut Vec<Value>,
    patch: &[Value],
    merge_keys: Option<Vec<String>>,
    merges_scalars: bool,
    position: Position,
) {
    let is_directive =
        |item: &Value, directive: &str| item.get(PATCH).and_then(Value::as_str) == Some(directive);
    if patch.iter().any(|item| is_directive(item, "replace")) {
        *target = patch
            .iter()
            .filter(|item| !is_directive(item, "replace"))
            .map(clean)
            .collect();
        return;
    }
    let Some(keys) = merge_keys else {
        if merges_scalars && patch.iter().all(|v| !v.is_object()) {
            let mut merged: Vec<Value> = Vec::with_capacity(target.len() + patch.len());
            for item in patch.iter().chain(target.iter()) {
                if !merged.contains(item) {
                    merged.push(item.clone());
                }
            }
            *target = merged;
        } else {
            *target = patch.iter().map(clean).collect();
        }
        return;
    };
    // Keys no element sets do not identify anything: a port list without any `protocol`
    // merges on the port alone.
    let keys: Vec<String> = if keys.len() > 1 {
        keys.into_iter()
            .filter(|k| target.iter().chain(patch).any(|e| e.get(k).is_some()))
            .collect()
    } else {
        keys
    };
    if keys.len() > 1 {
        merge_keyed_list(target, patch, &keys, position);
        return;
    }
    let Some(key) = keys.first() else {
        *target = patch.iter().map(clean).collect();
        return;
    };
    let mut original: Vec<Option<Value>> = std::mem::take(target).into_iter().map(Some).collect();
    let mut merged = Vec::with_capacity(original.len() + patch.len());
    let mut patched_keys: Vec<&Value> = Vec::new();
    for item in patch {
        let key_value = item.as_object().and_then(|m| m.get(key));
        // kyaml takes a patch's first element for a key value and ignores the others.
        if let Some(kv) = key_value {
            if patched_keys.contains(&kv) {
                continue;
            }
            patched_keys.push(kv);
        }
        let existing = key_value.and_then(|kv| {
            original
                .iter()
                .position(|o| o.as_ref().is_some_and(|o| o.get(key) == Some(kv)))
        });
        if is_directive(item, "delete") {
            if let Some(index) = existing {
                original[index] = None;
            }
            continue;
        }
        match existing {
            Some(index) => {
                let mut value = original[index].take().expect("present");
                merge_value(&mut value, item, position);
                merged.push(value);
            }
            None => merged.push(clean(item)),
        }
    }
    merged.extend(original.into_iter().flatten());
    *target = merged;
}

/// Lists identified by several keys (`x-kubernetes-list-map-keys`, such as ports by port and
/// protocol) merge as kyaml sets elements: a matching element is merged where it stands, a
/// new one goes first, and one that matches an existing element only partially (a key set on
/// one side and missing on the other) is dropped.
fn merge_keyed_list(target: &mut Vec<Value>, patch: &[Value], keys: &[String], position: Position) {
    let is_delete = |item: &Value| item.get(PATCH).and_then(Value::as_str) == Some("delete");
    let mut added = Vec::new();
    for item in patch {
        let Some(item_map) = item.as_object() else {
            added.push(clean(item));
            continue;
        };
        let item_keys: Vec<Option<&Value>> = keys.iter().map(|k| item_map.get(k)).collect();
        let exact = target
            .iter()
            .position(|o| keys.iter().zip(&item_keys).all(|(k, v)| o.get(k) == *v));
        match exact {
            Some(index) if is_delete(item) => {
                target.remove(index);
            }
            Some(index) => merge_value(&mut target[index], item, position),
            None if is_delete(item) => {}
            None => {
                let partial = target.iter().any(|o| {
                    keys.iter()
                        .zip(&item_keys)
                        .all(|(k, v)| match (o.get(k), v) {
                            (Some(a), Some(b)) => a == *b,
                            _ => true,
                        })
                });
                if !partial {
                    added.push(clean(item));
                }
            }
        }
    }
    added.append(target);
    *target = added;
}

/// A patch value as it lands when nothing was there: directives and nulls removed.
fn clean(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(clean_map(map)),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .filter(|i| i.get(PATCH).and_then(Value::as_str) != Some("delete"))
                .map(clean)
                .collect(),
        ),
        other => other.clone(),
    }
}

fn clean_map(map: &Map) -> Map {
    map.iter()
        .filter(|(k, v)| !v.is_null() && k.as_str() != PATCH)
        .map(|(k, v)| (k.clone(), clean(v)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json;

    fn view() -> SchemaView<'static> {
        SchemaView { custom: None }
    }

    #[test]
    fn merges_containers_by_name_and_deletes_with_null() {
        let mut deployment = json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "labels": {"a": "1"}},
            "spec": {"template": {"spec": {"containers": [
                {"name": "app", "image": "app:1", "env": [{"name": "A", "value": "1"}]},
                {"name": "sidecar", "image": "side:1"}
            ]}}}
        });
        let patch = json!({
            "metadata": {"labels": {"a": null, "b": "2"}},
            "spec": {"template": {"spec": {"containers": [
                {"name": "app", "image": "app:2", "env": [{"name": "B", "value": "2"}]},
                {"name": "sidecar", "$patch": "delete"},
                {"name": "new", "image": "new:1"}
            ]}}}
        });
        assert_eq!(apply(&mut deployment, &patch, view()), Outcome::Patched);
        assert_eq!(deployment["metadata"]["labels"], json!({"b": "2"}));
        // Patch elements first, in patch order, then the original ones it did not mention.
        assert_eq!(
            deployment["spec"]["template"]["spec"]["containers"],
            json!([
                {"name": "app", "image": "app:2", "env": [{"name": "B", "value": "2"}, {"name": "A", "value": "1"}]},
                {"name": "new", "image": "new:1"}
            ])
        );
    }

    #[test]
    fn lists_without_merge_keys_are_replaced_and_replace_directive_works() {
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "spec": {
            "tolerations": [{"key": "a"}], "nodeSelector": {"x": "1", "y": "2"}}});
        let patch = json!({"spec": {"tolerations": [{"key": "b"}], "nodeSelector": {"$patch": "replace", "z": "3"}}});
        apply(&mut pod, &patch, view());
        assert_eq!(pod["spec"]["tolerations"], json!([{"key": "b"}]));
        assert_eq!(pod["spec"]["nodeSelector"], json!({"z": "3"}));
        assert_eq!(
            apply(&mut pod, &json!({"$patch": "delete"}), view()),
            Outcome::Deleted
        );
    }
}
