//! Reading a resource file into objects, as kustomize reads one: its documents (null, `{}`
//! and `[]` dropped), a lone `List` unwrapped by kyaml's reader, every FooList's items
//! queued in its place, and each object checked to have a kind and a name. Each object
//! comes with the pointers of its fields written with no value ([`yaml::Resource`]).

use std::path::Path;

use super::KustomizeError;
use crate::value::Value;
use crate::yaml;

/// The pointers among `empty_values` (a List's) inside its item `index`, relative to it.
fn item_pointers(empty_values: &[String], index: usize) -> Vec<String> {
    let prefix = format!("/items/{index}/");
    empty_values
        .iter()
        .filter_map(|p| p.strip_prefix(&prefix).map(|rest| format!("/{rest}")))
        .collect()
}

/// The Go type kustomize names for a List's `items` that are not a list (`None` for a list
/// or a null, which it takes).
fn go_type_of_non_list(items: &Value) -> Option<&'static str> {
    match items {
        Value::Array(_) | Value::Null => None,
        Value::String(_) => Some("string"),
        Value::Bool(_) => Some("bool"),
        Value::Number(n) if n.is_f64() => Some("float64"),
        Value::Number(_) => Some("int"),
        Value::Object(_) => Some("map[string]interface {}"),
    }
}

/// kyaml's `IsNilOrEmpty`: what kustomize drops instead of reading as a resource (a null,
/// an empty mapping, an empty list).
fn nil_or_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Object(map) => map.is_empty(),
        Value::Array(items) => items.is_empty(),
        _ => false,
    }
}

/// Whether kyaml's reader unwraps this lone document: a `List` or `ResourceList` with
/// `items` or `functionConfig`.
fn kyaml_unwraps(document: &Value) -> bool {
    matches!(
        document.get("kind").and_then(Value::as_str),
        Some("List" | "ResourceList")
    ) && (document.get("items").is_some() || document.get("functionConfig").is_some())
}

/// What kyaml's reader makes of an unwrapped List: the elements of its `items` (a mapping's
/// keys and values, each on its own; nothing from a scalar).
fn kyaml_unwrapped(document: Value, empty_values: &[String]) -> Vec<(Value, Vec<String>)> {
    let Value::Object(mut map) = document else {
        return Vec::new();
    };
    match map.remove("items") {
        Some(Value::Array(items)) => items
            .into_iter()
            .enumerate()
            .filter(|(_, item)| !nil_or_empty(item))
            .map(|(index, item)| (item, item_pointers(empty_values, index)))
            .collect(),
        Some(Value::Object(entries)) => entries
            .into_iter()
            .flat_map(|(key, value)| [Value::String(key), value])
            .filter(|node| !nil_or_empty(node))
            .map(|node| (node, Vec::new()))
            .collect(),
        _ => Vec::new(),
    }
}

/// Reads the objects of a manifest: every non-empty document, `kind: List` flattened. Each
/// comes with the pointers of its fields written with no value ([`yaml::Resource`]).
pub(super) fn read_objects(
    text: &str,
    file: &Path,
) -> Result<Vec<(Value, Vec<String>)>, KustomizeError> {
    let documents = yaml::parse_resources(text).map_err(|error| KustomizeError::Yaml {
        file: file.to_path_buf(),
        error,
    })?;
    let mut objects = Vec::new();
    // As kustomize does: kyaml unwraps a file that is one `List` (or `ResourceList`); then
    // a FooList's items join the end of the file's queue, each read back through kyaml (so
    // unwrapped again when itself a List), and a FooList without items contributes nothing.
    let mut documents: Vec<(Value, Vec<String>)> = documents
        .into_iter()
        .filter(|d| !nil_or_empty(&d.value))
        .map(|d| (d.value, d.empty_values))
        .collect();
    if let [(only, _)] = documents.as_slice()
        && kyaml_unwraps(only)
    {
        let (only, empty_values) = documents.remove(0);
        documents = kyaml_unwrapped(only, &empty_values);
    }
    let mut queue: std::collections::VecDeque<(Value, Vec<String>)> = documents.into();
    while let Some((document, empty_values)) = queue.pop_front() {
        let kind = document.get("kind").and_then(Value::as_str).unwrap_or("");
        let items = document.get("items");
        let is_list = kind.ends_with("List") && items.is_some();
        if is_list && let Some(found) = items.and_then(go_type_of_non_list) {
            return Err(KustomizeError::InvalidResource {
                file: file.to_path_buf(),
                message: format!("expected array in {kind}/items, but found {found}"),
            });
        }
        match document {
            Value::Object(mut map) if is_list => {
                if let Some(Value::Array(items)) = map.remove("items") {
                    for (index, item) in items.into_iter().enumerate() {
                        if nil_or_empty(&item) {
                            continue;
                        }
                        let inner = item_pointers(&empty_values, index);
                        if kyaml_unwraps(&item) {
                            queue.extend(kyaml_unwrapped(item, &inner));
                        } else {
                            queue.push_back((item, inner));
                        }
                    }
                }
            }
            other => objects.push((other, empty_values)),
        }
    }
    for (index, (object, _)) in objects.iter().enumerate() {
        let file = file.to_path_buf();
        if !object.is_object() {
            return Err(KustomizeError::NotAnObject { file, index });
        }
        let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
        if kind.is_empty() {
            return Err(KustomizeError::MissingKind { file, index });
        }
        if let Some(scalar @ (Value::Number(_) | Value::Bool(_))) = object.pointer("/metadata/name")
        {
            return Err(KustomizeError::NameNotText {
                file,
                index,
                kind: kind.to_string(),
                name: scalar.to_string(),
            });
        }
        if object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            return Err(KustomizeError::MissingName {
                file,
                index,
                kind: kind.to_string(),
            });
        }
    }
    Ok(objects)
}
