//! kustomize's built-in `ValueAddTransformer` (alpha): a value added at a field path of the
//! selected resources, as an RFC 6902 `add` would — fields created on the way, a scalar
//! replaced — or inserted as one part of a file path the field holds (`filePathPosition`);
//! `metadata/namespace` moves the resources as kustomize's namespace filter does. The value
//! defaults to the name of the kustomization's directory; targets may also come from a file
//! (`targetFilePath`).

use std::path::Path;

use serde::Deserialize;

use super::KustomizeError;
use super::aliases::Step as FieldStep;
use super::kustfile::Selector;
use super::loader::Loader;
use super::openapi::SchemaView;
use super::path_step::{Step, element_matches};
use super::replacements::scalar_text;
use super::resource::Resource;
use super::selector::CompiledSelector;
use super::transformers::{NamespaceOptions, set_subject_namespaces};
use super::untagged::Trail;
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
            let mut written = Written::default();
            add_at(
                &mut resource.object,
                &fields,
                &value,
                target.file_path_position,
                false,
                &mut written,
            )
            .map_err(|cause| KustomizeError::InvalidConfig {
                file: file.to_path_buf(),
                message: format!(
                    "{origin}: {}: field path '{}': {cause}",
                    resource.id(),
                    target.field_path
                ),
            })?;
            // kyaml writes the value with no tag.
            if let Some((path, value)) = written.leaf {
                resource.untagged.wrote(path, &value);
            }
        }
    }
    Ok(())
}

/// Where a value-add write walks, and the field it wrote with what it now holds.
#[derive(Default)]
struct Written {
    at: Vec<FieldStep>,
    leaf: Option<(Vec<FieldStep>, Value)>,
}

impl Trail for Written {
    fn at(&mut self) -> &mut Vec<FieldStep> {
        &mut self.at
    }
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

/// `a/b\/c/d` → `a`, `b/c`, `d`: a backslash before a slash keeps it in the field name;
/// then, as kyaml's path lookup cleans a path, each name trimmed and empty ones dropped.
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
        .into_iter()
        .map(|field| field.trim().to_string())
        .filter(|field| !field.is_empty())
        .collect()
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

/// What kyaml makes for a missing field: a list when the next step picks an element by
/// index or match, an empty scalar at the end of the path, else a mapping.
fn made_for(next: Option<&String>) -> Value {
    match next {
        None => Value::Null,
        Some(next)
            if (next.starts_with('[') && next.ends_with(']'))
                || next.parse::<i64>().is_ok_and(|index| index >= 0) =>
        {
            Value::Array(Vec::new())
        }
        Some(_) => Value::Object(Map::new()),
    }
}

/// kyaml's `LookupCreate(ScalarNode, fields…)` then the scalar set. A null (or missing
/// element) on the way ends the walk with nothing written and nothing refused, as kyaml's
/// lookup finds nothing there; what was made before it stays. `made` says the node was just
/// made, so holds no string of the source's.
fn add_at(
    node: &mut Value,
    fields: &[String],
    value: &str,
    position: i64,
    made: bool,
    written: &mut Written,
) -> Result<(), String> {
    let Some((part, rest)) = fields.split_first() else {
        set_leaf(node, value, position, made)?;
        written.leaf = Some((written.at.clone(), node.clone()));
        return Ok(());
    };
    let step = Step::parse(part)?;
    if node.is_null() {
        // kustomize looks for the last element of no list and crashes.
        return match step {
            Step::Last => Err(NO_LAST_ELEMENT.into()),
            _ => Ok(()),
        };
    }
    match step {
        Step::Index(index) => match list(node)?.get_mut(index) {
            Some(element) => written.under(FieldStep::Index(index), |w| {
                add_at(element, rest, value, position, false, w)
            }),
            None => Ok(()),
        },
        Step::Last => {
            let items = list(node)?;
            let last = items.len().checked_sub(1);
            match (items.last_mut(), last) {
                (Some(element), Some(index)) => written.under(FieldStep::Index(index), |w| {
                    add_at(element, rest, value, position, false, w)
                }),
                _ => Err(NO_LAST_ELEMENT.into()),
            }
        }
        Step::Element(key, wanted) => {
            let items = list(node)?;
            let found = items
                .iter()
                .position(|item| element_matches(item, key, wanted));
            let (index, made) = match found {
                Some(index) => (index, false),
                None => {
                    items.push(new_element(key, wanted));
                    (items.len() - 1, true)
                }
            };
            written.under(FieldStep::Index(index), |w| {
                add_at(&mut items[index], rest, value, position, made, w)
            })
        }
        Step::Field(name) => {
            let Value::Object(map) = node else {
                return Err(wrong_kind("MappingNode", node));
            };
            let made = !map.contains_key(name);
            let field = map
                .entry(name.to_string())
                .or_insert_with(|| made_for(rest.first()));
            written.under(FieldStep::Key(name.into()), |w| {
                add_at(field, rest, value, position, made, w)
            })
        }
    }
}

const NO_LAST_ELEMENT: &str = "'-' names the last element of a list that has none";

/// The value (or, at `position`, a file-path part) written into the scalar a path ends at.
fn set_leaf(node: &mut Value, value: &str, position: i64, made: bool) -> Result<(), String> {
    if node.is_object() || node.is_array() {
        return Err(wrong_kind("ScalarNode", node));
    }
    let text = match usize::try_from(position - 1) {
        Ok(at) if position > 0 => insert_path_part(&scalar_text(node), at, value),
        _ => value.to_string(),
    };
    // kyaml keeps the node's style: a number, a boolean, a null or a node just made is
    // plain, and reads back by YAML's rules (`replicas: true`); a string is taken as quoted
    // and stays a string ("80" becomes "8080"). A string written plain in the source would
    // be read back as well in kustomize (`port: abc` becomes the number 8080); the source's
    // style is not kept here.
    *node = match node {
        Value::String(_) if !made => Value::String(text),
        _ => yaml::plain_scalar(&text, Schema::Kyaml),
    };
    Ok(())
}

fn list(node: &mut Value) -> Result<&mut Vec<Value>, String> {
    match node {
        Value::Array(items) => Ok(items),
        other => Err(wrong_kind("SequenceNode", other)),
    }
}

/// The element kyaml adds when none matches: the scalar itself for `[=value]`, else a
/// mapping with the plain scalar as the key's value (`[port=80]` adds the number 80).
fn new_element(key: &str, wanted: &str) -> Value {
    if key.is_empty() {
        return Value::String(wanted.to_string());
    }
    let mut element = Map::new();
    element.insert(key.to_string(), yaml::plain_scalar(wanted, Schema::Kyaml));
    Value::Object(element)
}

fn wrong_kind(expected: &str, found: &Value) -> String {
    super::node_kind_mismatch(expected, found)
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
    use super::{add_at, insert_path_part, split_fields};
    use crate::value::Value;

    /// kyaml's `PathGetter` reads a step as Go's `strconv.Atoi` and its own bracket rules.
    #[test]
    fn steps_are_read_as_kyaml_reads_them() {
        use crate::kustomize::path_step::Step;
        let step = Step::parse;
        for (part, read) in [
            ("0", Ok(Step::Index(0))),
            ("+1", Ok(Step::Index(1))),
            ("01", Ok(Step::Index(1))),
            ("-0", Ok(Step::Index(0))),
            ("-", Ok(Step::Last)),
            ("+", Ok(Step::Field("+"))),
            ("1_000", Ok(Step::Field("1_000"))),
            (
                "99999999999999999999",
                Ok(Step::Field("99999999999999999999")),
            ),
            ("[name=app]", Ok(Step::Element("name", "app"))),
            ("[=-jar]", Ok(Step::Element("", "-jar"))),
            ("[a=b=c]", Ok(Step::Element("a", "b=c"))),
            ("[a=]]", Ok(Step::Element("a", "]"))),
            ("-2", Err("array index -2 cannot be negative".to_string())),
            (
                "*",
                Err("wildcard is not supported in PathGetter".to_string()),
            ),
            (
                "[app]",
                Err(
                    "list path element must contain fieldName=fieldValue for element to match"
                        .to_string(),
                ),
            ),
        ] {
            assert_eq!(step(part), read, "{part}");
        }
    }

    /// kustomize crashes looking for the last element of an empty list (or of a null); here
    /// it is refused.
    #[test]
    fn the_last_element_of_no_list_is_refused() {
        for document in [r#"{"spec": {"args": []}}"#, r#"{"spec": {"args": null}}"#] {
            let mut object: Value = serde_json::from_str(document).unwrap();
            let fields = split_fields("spec/args/-");
            let refused = add_at(
                &mut object,
                &fields,
                "x",
                0,
                false,
                &mut super::Written::default(),
            )
            .unwrap_err();
            assert_eq!(
                refused,
                "'-' names the last element of a list that has none"
            );
        }
    }

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
