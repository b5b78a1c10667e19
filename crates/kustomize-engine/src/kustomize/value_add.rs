//! kustomize's built-in `ValueAddTransformer` (alpha): a value added at a field path of the
//! selected resources, as an RFC 6902 `add` would — fields created on the way, a scalar
//! replaced — or inserted as one part of a file path the field holds (`filePathPosition`);
//! `metadata/namespace` moves the resources as kustomize's namespace filter does. The value
//! defaults to the name of the kustomization's directory; targets may also come from a file
//! (`targetFilePath`).

use std::path::Path;

use serde::Deserialize;

use super::KustomizeError;
use super::kustfile::Selector;
use super::loader::Loader;
use super::openapi::SchemaView;
use super::replacements::scalar_text;
use super::resource::Resource;
use super::selector::CompiledSelector;
use super::transformers::{NamespaceOptions, set_subject_namespaces};
use crate::value::{Map, Value};
use crate::yaml::{self, Schema};

/// The plugin's configuration.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ValueAddConfig {
    #[serde(default)]
    value: String,
    #[serde(default)]
    targets: Vec<ValueAddTarget>,
    #[serde(default)]
    target_file_path: String,
}

/// Where the value goes.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ValueAddTarget {
    #[serde(default)]
    selector: Option<Selector>,
    #[serde(default)]
    field_path: String,
    #[serde(default)]
    file_path_position: i64,
}

/// The file `targetFilePath` names.
#[derive(Debug, Default, Deserialize)]
struct TargetFile {
    #[serde(default)]
    targets: Vec<ValueAddTarget>,
}

/// kustomize's `MetadataNamespacePath`, which its namespace filter handles.
const NAMESPACE_PATH: &str = "metadata/namespace";

/// Runs the configuration `config` (from `origin` in `file`) on `resources`.
pub(super) fn apply(
    mut config: ValueAddConfig,
    origin: &str,
    loader: &Loader,
    file: &Path,
    resources: &mut [Resource],
    schema: SchemaView,
) -> Result<(), KustomizeError> {
    let invalid = |message: String| KustomizeError::InvalidConfig {
        file: file.to_path_buf(),
        message: format!("{origin}: {message}"),
    };
    let value = match config.value.trim() {
        "" => loader
            .dir
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default(),
        trimmed => trimmed.to_string(),
    };
    if !config.target_file_path.is_empty() {
        config
            .targets
            .extend(targets_from(loader, &config.target_file_path)?);
    }
    validate(&config.targets).map_err(invalid)?;
    for target in &config.targets {
        let selector = target
            .selector
            .as_ref()
            .map(CompiledSelector::new)
            .transpose()
            .map_err(|e| invalid(e.to_string()))?;
        let fields = split_fields(&target.field_path);
        for resource in resources.iter_mut() {
            if selector.as_ref().is_some_and(|s| !s.matches(resource)) {
                continue;
            }
            if target.field_path == NAMESPACE_PATH {
                move_to_namespace(resource, &value, schema);
                continue;
            }
            add_at(
                &mut resource.object,
                &fields,
                &value,
                target.file_path_position,
            )
            .map_err(|cause| KustomizeError::InvalidConfig {
                file: file.to_path_buf(),
                message: format!(
                    "{origin}: {}: field path '{}': {cause}",
                    resource.id(),
                    target.field_path
                ),
            })?;
        }
    }
    Ok(())
}

/// The targets a `targetFilePath` file lists.
fn targets_from(loader: &Loader, entry: &str) -> Result<Vec<ValueAddTarget>, KustomizeError> {
    let (path, text) = loader.read_text(entry)?;
    let parsed =
        yaml::parse_single(&text, Schema::Kubernetes).map_err(|error| KustomizeError::Yaml {
            file: path.clone(),
            error,
        })?;
    let file: TargetFile = serde_path_to_error::deserialize(super::fold::Folded::lenient(parsed))
        .map_err(|e| KustomizeError::InvalidConfig {
        file: path,
        message: super::kustfile::describe(e),
    })?;
    Ok(file.targets)
}

/// What the plugin refuses in its configuration, in its words.
fn validate(targets: &[ValueAddTarget]) -> Result<(), String> {
    if targets.is_empty() {
        return Err("must specify at least one target".into());
    }
    for target in targets {
        if target.field_path.is_empty() {
            return Err("fieldPath cannot be empty".into());
        }
        if target.file_path_position < 0 {
            return Err(format!(
                "value of FilePathPosition ({}) cannot be negative",
                target.file_path_position
            ));
        }
    }
    Ok(())
}

/// `a/b\/c/d` → `a`, `b/c`, `d`: a backslash before a slash keeps it in the field name.
fn split_fields(path: &str) -> Vec<String> {
    let mut fields: Vec<String> = Vec::new();
    for part in path.split('/') {
        match fields.last_mut() {
            Some(last) if last.ends_with('\\') => {
                last.pop();
                last.push('/');
                last.push_str(part);
            }
            _ => fields.push(part.to_string()),
        }
    }
    fields
}

/// kustomize's namespace filter without field specs: a namespaced resource's
/// `metadata.namespace` (the kinds the schema knows as cluster-scoped keep none), and the
/// `default` subjects of a binding. Unlike the NamespaceTransformer, the resource's former
/// identity is not kept for name references.
fn move_to_namespace(resource: &mut Resource, namespace: &str, schema: SchemaView) {
    let id = resource.id();
    let api_version = resource
        .object
        .get("apiVersion")
        .map(scalar_text)
        .unwrap_or_default();
    if !schema.is_cluster_scoped(&api_version, &id.kind) {
        if let Some(metadata) = resource
            .object
            .get_mut("metadata")
            .and_then(Value::as_object_mut)
        {
            metadata.insert("namespace".into(), Value::String(namespace.to_string()));
        } else if let Some(object) = resource.object.as_object_mut() {
            let mut metadata = Map::new();
            metadata.insert("namespace".into(), Value::String(namespace.to_string()));
            object.insert("metadata".into(), Value::Object(metadata));
        }
    }
    if matches!(id.kind.as_str(), "RoleBinding" | "ClusterRoleBinding") {
        set_subject_namespaces(resource, namespace, NamespaceOptions::default());
    }
}

/// kyaml's `LookupCreate(ScalarNode, fields…)` then the scalar set: maps made where fields
/// are missing (or null), `[key=value]` picking (or adding) a list element; the leaf a plain
/// scalar read back by YAML's rules, unless it was a string.
fn add_at(object: &mut Value, fields: &[String], value: &str, position: i64) -> Result<(), String> {
    let Some((field, rest)) = fields.split_first() else {
        let text = match (&*object, position) {
            (Value::Object(_), _) => return Err(wrong_kind("ScalarNode", "MappingNode")),
            (Value::Array(_), _) => return Err(wrong_kind("ScalarNode", "SequenceNode")),
            (current, position) if position > 0 => {
                let current = scalar_text(current);
                insert_path_part(&current, usize::try_from(position - 1).unwrap_or(0), value)
            }
            _ => value.to_string(),
        };
        // kyaml keeps the node's style: a number, a boolean, a null or a new field is plain,
        // and reads back by YAML's rules (`replicas: true`); a string is taken as quoted and
        // stays a string ("80" becomes "8080"). A string written plain in the source would be
        // read back as well in kustomize (`port: abc` becomes the number 8080); the source's
        // style is not kept here.
        *object = match &*object {
            Value::String(_) => Value::String(text),
            _ => yaml::plain_scalar(&text, Schema::Kyaml),
        };
        return Ok(());
    };
    if object.is_null() {
        *object = if field.starts_with('[') {
            Value::Array(Vec::new())
        } else {
            Value::Object(Map::new())
        };
    }
    match (object, element_match(field)) {
        (Value::Array(items), Some((key, wanted))) => {
            let position_of = items
                .iter()
                .position(|item| item.get(key).map(scalar_text).as_deref() == Some(wanted));
            let index = match position_of {
                Some(index) => index,
                None => {
                    let mut element = Map::new();
                    element.insert(key.to_string(), Value::String(wanted.to_string()));
                    items.push(Value::Object(element));
                    items.len() - 1
                }
            };
            add_at(&mut items[index], rest, value, position)
        }
        (Value::Object(map), None) => add_at(
            map.entry(field.clone()).or_insert(Value::Null),
            rest,
            value,
            position,
        ),
        (Value::Array(_), None) => Err(wrong_kind("MappingNode", "SequenceNode")),
        (Value::Object(_), Some(_)) => Err(wrong_kind("SequenceNode", "MappingNode")),
        (_, Some(_)) => Err(wrong_kind("SequenceNode", "ScalarNode")),
        (_, None) => Err(wrong_kind("MappingNode", "ScalarNode")),
    }
}

/// `[key=value]` as its key and value.
fn element_match(field: &str) -> Option<(&str, &str)> {
    field.strip_prefix('[')?.strip_suffix(']')?.split_once('=')
}

fn wrong_kind(expected: &str, found: &str) -> String {
    format!("wrong node kind: expected {expected} but got {found}")
}

/// kyaml's `filesys.InsertPathPart`: `part` inserted into the `/`-separated `path` at `position`
/// (0 first, past the end last), an absolute path kept absolute.
fn insert_path_part(path: &str, position: usize, part: &str) -> String {
    if part.is_empty() {
        return path.to_string();
    }
    let mut parts = split_file_path(path);
    let absolute = parts.first().is_some_and(String::is_empty);
    let mut position = position.min(parts.len());
    if absolute && position < parts.len() {
        position += 1;
    }
    parts.insert(position, part.to_string());
    join_file_path(&parts)
}

/// kyaml's `PathSplit`: the names of a path, an empty first one for a leading `/` (a
/// doubled `/` leaves an empty name between). Taken from the end, as Go's recursion does, in
/// a loop: the path is a field's value, of any length.
fn split_file_path(path: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut rest = path;
    while !rest.is_empty() {
        let (dir, name) = match rest.rfind('/') {
            Some(slash) => (&rest[..=slash], &rest[slash + 1..]),
            None => ("", rest),
        };
        if dir == "/" {
            if !name.is_empty() {
                parts.push(name.to_string());
            }
            parts.push(String::new());
            break;
        }
        parts.push(name.to_string());
        rest = dir.strip_suffix('/').unwrap_or(dir);
    }
    parts.reverse();
    parts
}

/// kyaml's `PathJoin`: Go's `filepath.Join` (empty names dropped, the result cleaned), with a
/// leading empty name for an absolute path.
fn join_file_path(parts: &[String]) -> String {
    let Some((first, rest)) = parts.split_first() else {
        return String::new();
    };
    if first.is_empty() {
        return format!("/{}", clean_join(rest));
    }
    clean_join(parts)
}

/// Go's `filepath.Join` on relative names: joined by `/`, empty names dropped, `.` and `..`
/// resolved (`.` for nothing).
fn clean_join(parts: &[String]) -> String {
    let mut kept: Vec<&str> = Vec::new();
    let mut leading_up = 0;
    for name in parts.iter().flat_map(|p| p.split('/')) {
        match name {
            "" | "." => {}
            ".." => {
                if kept.pop().is_none() {
                    leading_up += 1;
                }
            }
            name => kept.push(name),
        }
    }
    let joined: Vec<&str> = std::iter::repeat_n("..", leading_up).chain(kept).collect();
    if joined.is_empty() && !parts.iter().any(|p| !p.is_empty()) {
        return String::new();
    }
    if joined.is_empty() {
        return ".".into();
    }
    joined.join("/")
}

#[cfg(test)]
mod tests {
    use super::{insert_path_part, split_fields};

    /// kustomize's `filesys.InsertPathPart` table (the filter's doc comment and kyaml's
    /// util_test rows).
    #[test]
    fn path_parts_are_inserted_as_kyaml_inserts_them() {
        for (path, position, want) in [
            ("", 0, "PEACH"),
            ("", 99, "PEACH"),
            ("/", 0, "/PEACH"),
            ("/", 99, "/PEACH"),
            ("pie", 0, "PEACH/pie"),
            ("/pie", 0, "/PEACH/pie"),
            ("raw", 1, "raw/PEACH"),
            ("/raw", 1, "/raw/PEACH"),
            ("raw", 99, "raw/PEACH"),
            ("a/nice/warm/pie", 3, "a/nice/warm/PEACH/pie"),
            ("/a/nice/warm/pie", 3, "/a/nice/warm/PEACH/pie"),
            ("projects/data", 1, "projects/PEACH/data"),
        ] {
            assert_eq!(
                insert_path_part(path, position, "PEACH"),
                want,
                "{path} at {position}"
            );
        }
        assert_eq!(insert_path_part("a/b", 1, ""), "a/b");
        assert_eq!(insert_path_part("a//b", 1, "PEACH"), "a/PEACH/b");
        assert_eq!(insert_path_part("a/../..", 0, "PEACH"), ".");
        // A field's value of any length: no recursion as deep as its slashes.
        let long = "a/".repeat(200_000);
        assert!(insert_path_part(&long, 1, "PEACH").starts_with("a/PEACH/a/"));
    }

    #[test]
    fn an_escaped_slash_stays_in_its_field() {
        assert_eq!(
            split_fields("metadata/annotations/config.kubernetes.io\\/path"),
            ["metadata", "annotations", "config.kubernetes.io/path"]
        );
        assert_eq!(split_fields("spec/a"), ["spec", "a"]);
    }
}
