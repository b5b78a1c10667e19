//! `replacements:`: copy a field of one resource into fields of others.
//!
//! The source is one resource selected by identity (current or earlier, exact fields) and a
//! dot-separated field path (default `metadata.name`), optionally one part of a delimited
//! value. Targets are selected the same way, minus `reject`ed ones, and written at their
//! field paths, where `[k=v]` picks list elements, `*` every element, a number one element
//! and `[a.b/c]` a key containing dots. A scalar target keeps its type, as kustomize does.

use std::path::Path;

use crate::value::Value;
use regex::Regex;

use super::KustomizeError;
use super::kustfile::{FieldOptions, ReplacementField, ReplacementSource, Selector};
use super::loader::Loader;
use super::resource::{ResId, Resource, namespaces_equal};
use crate::yaml::{self, Schema};

mod write;

use write::{Copied, Tally, WriteError, WriteOptions, write_at};

/// One step of a replacement field path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PathSegment {
    Field(String),
    /// `[key=value]`: the list elements whose `key` is `value`.
    Match(String, String),
    /// `*`: every element or field.
    Wildcard,
    Index(usize),
}

/// Splits `spec.template.spec.containers.[name=app].image` into segments.
pub fn parse_field_path(path: &str) -> Vec<PathSegment> {
    let mut parts = Vec::new();
    let (mut depth, mut current) = (0usize, String::new());
    let mut chars = path.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            // `config\.json`: a dot that is part of the key, as kyaml's path splitter reads it.
            '\\' if chars.peek() == Some(&'.') => {
                current.push('.');
                chars.next();
            }
            '[' => {
                depth += 1;
                current.push(c);
            }
            ']' => {
                depth = depth.saturating_sub(1);
                current.push(c);
            }
            '.' if depth == 0 => parts.push(std::mem::take(&mut current)),
            _ => current.push(c),
        }
    }
    parts.push(current);
    parts
        .into_iter()
        .filter(|p| !p.is_empty())
        .map(|part| {
            if part == "*" {
                return PathSegment::Wildcard;
            }
            if let Some(inner) = part.strip_prefix('[').and_then(|p| p.strip_suffix(']')) {
                return match inner.split_once('=') {
                    Some((k, v)) => PathSegment::Match(k.to_string(), v.to_string()),
                    None => PathSegment::Field(inner.to_string()),
                };
            }
            match part.parse::<usize>() {
                Ok(index) => PathSegment::Index(index),
                Err(_) => PathSegment::Field(part),
            }
        })
        .collect()
}

/// Applies every replacement in order.
pub fn apply_all(
    entries: &[ReplacementField],
    loader: &Loader,
    file: &Path,
    resources: &mut [Resource],
) -> Result<(), KustomizeError> {
    for entry in entries {
        if entry.path.is_empty() {
            apply(entry, file, resources)?;
            continue;
        }
        let (path, text) = loader.read_text(&entry.path)?;
        if entry.source.is_some() || !entry.targets.is_empty() {
            return Err(error(
                file,
                format!(
                    "{}: cannot specify both path and inline replacement",
                    entry.path
                ),
            ));
        }
        let value =
            yaml::parse_documents(&text, Schema::Kyaml).map_err(|error| KustomizeError::Yaml {
                file: path.clone(),
                error,
            })?;
        let list: Vec<ReplacementField> = value
            .into_iter()
            .filter(|v| !v.is_null())
            .flat_map(|v| match v {
                Value::Array(items) => items,
                other => vec![other],
            })
            .map(|v| {
                // A replacement file is decoded leniently (unknown keys ignored), as kustomize
                // reads it with non-strict YAML decoding.
                serde_path_to_error::deserialize(super::fold::Folded::lenient(v)).map_err(|e| {
                    KustomizeError::Replacement {
                        file: path.clone(),
                        message: super::kustfile::describe(e),
                    }
                })
            })
            .collect::<Result<_, _>>()?;
        for replacement in &list {
            apply(replacement, &path, resources)?;
        }
    }
    Ok(())
}

fn error(file: &Path, message: impl Into<String>) -> KustomizeError {
    KustomizeError::Replacement {
        file: file.to_path_buf(),
        message: message.into(),
    }
}

/// Every identity of a resource: current and earlier.
fn identities(resource: &Resource) -> impl Iterator<Item = ResId> + '_ {
    std::iter::once(resource.id()).chain(resource.previous_ids.iter().cloned())
}

fn selected_by(
    id: &ResId,
    group: &str,
    version: &str,
    kind: &str,
    name: &str,
    namespace: &str,
) -> bool {
    (group.is_empty() || group == id.group)
        && (version.is_empty() || version == id.version)
        && (kind.is_empty() || kind == id.kind)
        && (name.is_empty() || name == id.name)
        && (namespace.is_empty() || namespaces_equal(namespace, &id.namespace))
}

/// A target's `select` or `reject` identity as Kustomize v5.8 matches it: each field set is an
/// anchored regular expression over one identity of the resource, the namespace taken as
/// written (no `default` for an empty one).
struct IdPattern {
    parts: [Option<Regex>; 5],
}

impl IdPattern {
    fn new(selector: &Selector) -> Result<IdPattern, regex::Error> {
        let compile = super::selector::anchored_regex;
        Ok(IdPattern {
            parts: [
                compile(&selector.group)?,
                compile(&selector.version)?,
                compile(&selector.kind)?,
                compile(&selector.name)?,
                compile(&selector.namespace)?,
            ],
        })
    }

    fn is_empty(&self) -> bool {
        self.parts.iter().all(Option::is_none)
    }

    fn selects(&self, id: &ResId) -> bool {
        let values = [&id.group, &id.version, &id.kind, &id.name, &id.namespace];
        self.parts
            .iter()
            .zip(values)
            .all(|(pattern, value)| pattern.as_ref().is_none_or(|p| p.is_match(value)))
    }
}

fn apply(
    replacement: &ReplacementField,
    file: &Path,
    resources: &mut [Resource],
) -> Result<(), KustomizeError> {
    let incomplete = || {
        error(
            file,
            "replacements must specify a source and at least one target",
        )
    };
    if replacement.targets.is_empty() {
        return Err(incomplete());
    }
    // kustomize holds the source field's node and copies it at each write, so a target that
    // writes into the source field itself changes what later writes copy: `source_node` is
    // where that node is (a part picked by a delimiter is a node of its own, and none).
    let (mut value, source_node) = match (&replacement.source, &replacement.source_value) {
        (None, None) => return Err(incomplete()),
        (Some(_), Some(_)) => {
            return Err(error(
                file,
                "value and resource selectors are mutually exclusive",
            ));
        }
        // A literal is an untyped scalar: where it creates a field it reads as plain YAML.
        (None, Some(text)) => (Copied::literal(text), None),
        (Some(source), None) => {
            let (value, node) = source_value(source, file, resources)?;
            (Copied::field(value), node.map(|at| (at, source)))
        }
    };
    for target in &replacement.targets {
        let select = target
            .select
            .as_ref()
            .ok_or_else(|| error(file, "target must specify resources to select"))?;
        let label_and_annotation =
            metadata_selector(select).map_err(|e| error(file, e.to_string()))?;
        let invalid = |e: regex::Error| error(file, format!("error creating target selector: {e}"));
        let selected = IdPattern::new(select).map_err(invalid)?;
        let rejected_ids: Vec<IdPattern> = target
            .reject
            .iter()
            .map(IdPattern::new)
            .collect::<Result<_, _>>()
            .map_err(invalid)?;
        let rejected_metadata: Vec<super::selector::CompiledSelector> = target
            .reject
            .iter()
            .filter(|r| !r.label_selector.is_empty() || !r.annotation_selector.is_empty())
            .map(metadata_selector)
            .collect::<Result<_, _>>()
            .map_err(|e| error(file, e.to_string()))?;
        let default_path = ["metadata.name".to_string()];
        let field_paths: &[String] = if target.field_paths.is_empty() {
            &default_path
        } else {
            &target.field_paths
        };
        let options = target.options.clone().unwrap_or_default();
        let field_paths: Vec<(&str, Vec<PathSegment>)> = field_paths
            .iter()
            .map(|path| (path.as_str(), parse_field_path(path)))
            .collect();
        for (position, resource) in resources.iter_mut().enumerate() {
            // As kustomize: label and annotation selectors first (a reject's only when it has
            // one), then identities, a reject's only when it names one.
            let rejected = rejected_metadata.iter().any(|r| r.matches(resource))
                || rejected_ids
                    .iter()
                    .filter(|r| !r.is_empty())
                    .any(|r| identities(resource).any(|id| r.selects(&id)));
            if !label_and_annotation.matches(resource)
                || rejected
                || !identities(resource).any(|id| selected.selects(&id))
            {
                continue;
            }
            // A rename here is no previous identity: kustomize's replacements write the
            // field without recording one, so later selectors and name references see only
            // the new name.
            let before = resource.id();
            for (path, segments) in &field_paths {
                // kyaml writes into the field's node: fields sharing it change too.
                let shared = resource.aliases.before_write(&resource.object);
                replace_at(resource, (path, segments), &value, &options, &before, file)?;
                resource
                    .aliases
                    .after_write(&mut resource.object, shared, &[]);
                if let Some((_, source)) = source_node.filter(|(at, _)| *at == position)
                    && let Ok(Some(now)) = source_lookup(&resource.object, &source_path(source))
                {
                    value = Copied::field(now.clone());
                }
            }
            if let Some(missing) = super::resource::missing_identity(&resource.object) {
                return Err(error(file, format!("{missing} in object {before}")));
            }
        }
    }
    Ok(())
}

/// Writes `value` at one field path of a selected resource, in kustomize's words when the
/// path is not there (and not to be created) or the value does not fit.
fn replace_at(
    resource: &mut Resource,
    (path, segments): (&str, &[PathSegment]),
    value: &Copied,
    options: &FieldOptions,
    before: &ResId,
    file: &Path,
) -> Result<(), KustomizeError> {
    let verb = if options.create {
        "find or create"
    } else {
        "find"
    };
    let not_found = format!("unable to {verb} field \"{path}\" in replacement target {before}");
    // A path of no field names (``, `.`) is the object itself, which kyaml's path lookup
    // refuses to hand back as a value to set.
    if segments
        .iter()
        .all(|s| matches!(s, PathSegment::Field(f) if f.is_empty()))
    {
        return Err(error(
            file,
            format!("{not_found}: wrong node kind: expected ScalarNode but got MappingNode"),
        ));
    }
    if write_inside_embedded_document(&mut resource.object, segments, value, options) {
        return Ok(());
    }
    let mut tally = Tally::over(&resource.untagged);
    // kustomize rewrites annotations as a string map after the build; labels keep
    // the type a created entry was given.
    let created_as_string = matches!(segments, [PathSegment::Field(m), PathSegment::Field(f), ..]
        if m == "metadata" && f == "annotations");
    let written = write_at(
        &mut resource.object,
        segments,
        value,
        &WriteOptions {
            field: options,
            created_as_string,
            null_is_value: false,
            json_types: false,
        },
        &mut tally,
    );
    for (path, value) in std::mem::take(&mut tally.untagged_writes) {
        resource.untagged.wrote(path, &value);
    }
    match written {
        Err(WriteError::Path(cause)) => Err(error(file, format!("{not_found}: {cause}"))),
        Err(WriteError::DelimiterOnCollection) => Err(error(
            file,
            format!("{before}: delimiter option can only be used with scalar nodes"),
        )),
        Err(WriteError::TagMismatch { found, tag }) => Err(error(
            file,
            format!("{before}: field \"{path}\": yaml: cannot decode {found} as a {tag}"),
        )),
        Ok(()) if tally.written == 0 => Err(error(file, not_found)),
        Ok(()) => Ok(()),
    }
}

/// Kustomize v5.8: a path that runs into a string holding a document continues inside it.
/// A JSON document is written back in Go's JSON form; a YAML one as kyaml writes it, keeping
/// its comments, key order and styles. `false` (nothing written) leaves the path to the
/// ordinary walk, as kustomize falls back to it.
fn write_inside_embedded_document(
    object: &mut Value,
    segments: &[PathSegment],
    value: &Copied,
    options: &FieldOptions,
) -> bool {
    for split in 1..segments.len() {
        let (outer, inner) = segments.split_at(split);
        let Some(found) = read_at(object, outer) else {
            continue;
        };
        // The first scalar on the way decides, as in kustomize.
        let Value::String(text) = found else {
            if found.is_object() || found.is_array() {
                continue;
            }
            return false;
        };
        let field = FieldOptions {
            delimiter: String::new(),
            ..options.clone()
        };
        let json = super::embedded::is_json_document(text);
        let write = WriteOptions {
            field: &field,
            created_as_string: false,
            null_is_value: !json,
            json_types: json,
        };
        let mut tally = Tally::default();
        let rewritten = if json {
            let Ok(mut document) = yaml::parse_single(text, Schema::Kyaml) else {
                return false;
            };
            if write_at(&mut document, inner, value, &write, &mut tally).is_err()
                || tally.written == 0
            {
                return false;
            }
            if tally.type_not_kept {
                return true;
            }
            super::embedded::to_go_json(&document, text)
        } else {
            let Ok(mut document) = yaml::Document::parse(text) else {
                return false;
            };
            let mut data = document.to_value();
            if write_at(&mut data, inner, value, &write, &mut tally).is_err() || tally.written == 0
            {
                return false;
            }
            document.update(&data, !value.value.is_object() && !value.value.is_array());
            document.to_yaml_string()
        };
        if let Some(slot) = value_at_mut(object, outer) {
            *slot = Value::String(rewritten);
        }
        return true;
    }
    false
}

/// The first value `segments` reach, for writing.
fn value_at_mut<'v>(value: &'v mut Value, segments: &[PathSegment]) -> Option<&'v mut Value> {
    let Some((first, rest)) = segments.split_first() else {
        return Some(value);
    };
    let next = match (first, value) {
        (PathSegment::Field(name), Value::Object(map)) => map.get_mut(name)?,
        (PathSegment::Index(i), Value::Array(items)) => items.get_mut(*i)?,
        (PathSegment::Match(k, v), Value::Array(items)) => items
            .iter_mut()
            .find(|item| super::path_step::element_matches(item, k, v))?,
        (PathSegment::Wildcard, Value::Array(items)) => {
            return items.iter_mut().find_map(|item| value_at_mut(item, rest));
        }
        _ => return None,
    };
    value_at_mut(next, rest)
}

/// The label and annotation part of a selector.
fn metadata_selector(
    selector: &Selector,
) -> Result<super::selector::CompiledSelector, super::selector::SelectorError> {
    super::selector::CompiledSelector::new(&Selector {
        label_selector: selector.label_selector.clone(),
        annotation_selector: selector.annotation_selector.clone(),
        ..Default::default()
    })
}

/// Whether `source`'s selector selects `resource` by any of its identities.
fn selects_source(source: &ReplacementSource, resource: &Resource) -> bool {
    identities(resource).any(|id| {
        selected_by(
            &id,
            &source.group,
            &source.version,
            &source.kind,
            &source.name,
            &source.namespace,
        )
    })
}

/// The field a source reads (`metadata.name` when none is named).
fn source_field(source: &ReplacementSource) -> &str {
    if source.field_path.is_empty() {
        "metadata.name"
    } else {
        &source.field_path
    }
}

fn source_path(source: &ReplacementSource) -> Vec<PathSegment> {
    parse_field_path(source_field(source))
}

/// The source's value, and the position of the resource holding it where the value is the
/// field's own node (no delimiter picked a part).
fn source_value(
    source: &ReplacementSource,
    file: &Path,
    resources: &[Resource],
) -> Result<(Value, Option<usize>), KustomizeError> {
    let or = |s: &str, placeholder: &'static str| {
        if s.is_empty() {
            placeholder.to_string()
        } else {
            s.to_string()
        }
    };
    // kustomize names the source by its selector's ResId, and adds the field path and
    // options where the selector has them (types.SourceSelector's String).
    let id_text = format!(
        "{}.{}.{}/{}.{}",
        or(&source.kind, "[noKind]"),
        or(&source.version, "[noVer]"),
        or(&source.group, "[noGrp]"),
        or(&source.name, "[noName]"),
        or(&source.namespace, "[noNs]")
    );
    let mut selector_text = id_text.clone();
    if !source.field_path.is_empty() {
        selector_text = format!("{selector_text}:{}", source.field_path);
    }
    if let Some(options) = source
        .options
        .as_ref()
        .filter(|o| !o.delimiter.is_empty() || o.create)
    {
        selector_text = format!(
            "{selector_text}:{}({}), create={}",
            options.delimiter, options.index, options.create
        );
    }
    let mut matches = resources
        .iter()
        .enumerate()
        .filter(|(_, r)| selects_source(source, r));
    let (position, resource) = matches
        .next()
        .ok_or_else(|| error(file, format!("nothing selected by {selector_text}")))?;
    if matches.next().is_some() {
        return Err(error(
            file,
            format!("multiple matches for selector {selector_text}"),
        ));
    }
    let path = source_field(source);
    let value = source_lookup(&resource.object, &source_path(source))
        .map_err(|message| {
            error(
                file,
                format!("error looking up replacement source: {message}"),
            )
        })?
        .filter(|v| !is_nil_or_empty(v))
        .ok_or_else(|| {
            error(
                file,
                format!("fieldPath `{path}` is missing for replacement source {id_text}"),
            )
        })?;
    match &source.options {
        Some(options) if !options.delimiter.is_empty() => {
            if matches!(value, Value::Object(_) | Value::Array(_)) {
                return Err(error(
                    file,
                    "delimiter option can only be used with scalar nodes".to_string(),
                ));
            }
            let text = scalar_text(value);
            let parts: Vec<&str> = text.split(options.delimiter.as_str()).collect();
            let index = usize::try_from(options.index)
                .ok()
                .filter(|i| *i < parts.len())
                .ok_or_else(|| {
                    error(
                        file,
                        format!(
                            "options.index {} is out of bounds for value {text}",
                            options.index
                        ),
                    )
                })?;
            Ok((Value::String(parts[index].to_string()), None))
        }
        _ => Ok((value.clone(), Some(position))),
    }
}

fn is_nil_or_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// The source field as kyaml's path getter finds it: `-` is a list's last element, and a
/// `*` or a negative index it reaches is an error (the walk ends quietly where a field is
/// missing before them).
fn source_lookup<'v>(
    value: &'v Value,
    segments: &[PathSegment],
) -> Result<Option<&'v Value>, String> {
    let Some((first, rest)) = segments.split_first() else {
        return Ok(Some(value));
    };
    let next = match first {
        PathSegment::Wildcard => return Err("wildcard is not supported in PathGetter".into()),
        PathSegment::Field(name) if name == "-" => match value {
            Value::Array(items) => items.last(),
            _ => None,
        },
        PathSegment::Field(name) if name.parse::<i64>().is_ok_and(|index| index < 0) => {
            return Err(format!("array index {name} cannot be negative"));
        }
        _ => read_at(value, std::slice::from_ref(first)),
    };
    next.map_or(Ok(None), |next| source_lookup(next, rest))
}

/// The single value at `segments` (the first match).
fn read_at<'v>(value: &'v Value, segments: &[PathSegment]) -> Option<&'v Value> {
    let Some((first, rest)) = segments.split_first() else {
        return Some(value);
    };
    let next = match (first, value) {
        (PathSegment::Field(name), Value::Object(map)) => map.get(name)?,
        (PathSegment::Index(i), Value::Array(items)) => items.get(*i)?,
        (PathSegment::Match(k, v), Value::Array(items)) => items
            .iter()
            .find(|item| super::path_step::element_matches(item, k, v))?,
        (PathSegment::Wildcard, Value::Array(items)) => {
            return items.iter().find_map(|item| read_at(item, rest));
        }
        _ => return None,
    };
    read_at(next, rest)
}

/// Whether a list element's `key` matches `pattern` anywhere in its text, as kustomize's
/// `PathMatcher` selects target elements: `[name=app]` selects `my-app` too, `[name=]`
/// every element with a name. A `[=pattern]` tests scalar elements.
fn element_matches_pattern(item: &Value, key: &str, pattern: &regex::Regex) -> bool {
    let text = if key.is_empty() {
        (!item.is_object() && !item.is_array()).then(|| scalar_text(item))
    } else {
        item.get(key).map(|field| match field {
            Value::Object(_) | Value::Array(_) => crate::yaml::to_yaml_string(field),
            scalar => scalar_text(scalar),
        })
    };
    text.is_some_and(|text| pattern.is_match(text.trim()))
}

/// The YAML text of a scalar, as kyaml keeps it: a number as it was spelled.
pub fn scalar_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.text(),
        Value::Bool(b) => b.to_string(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// kyaml's text of a node (`GetValue`, a node's `Value`): a scalar's text, and nothing for a
/// mapping or a list (or a null).
pub fn kyaml_text(value: &Value) -> String {
    match value {
        Value::Object(_) | Value::Array(_) => String::new(),
        scalar => scalar_text(scalar),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_paths() {
        assert_eq!(
            parse_field_path("spec.containers.[name=app].env.0.[a.b/c]"),
            [
                PathSegment::Field("spec".into()),
                PathSegment::Field("containers".into()),
                PathSegment::Match("name".into(), "app".into()),
                PathSegment::Field("env".into()),
                PathSegment::Index(0),
                PathSegment::Field("a.b/c".into()),
            ]
        );
        assert_eq!(parse_field_path("a.*.b")[1], PathSegment::Wildcard);
    }

    #[test]
    fn a_path_through_a_secret_value_names_the_kind_but_not_the_value() {
        let mut secret = crate::json!({
            "kind": "Secret",
            "data": {"password": "c3VwZXItc2VjcmV0", "list": ["c3VwZXItc2VjcmV0"]},
        });
        for path in ["data.password.x", "data.list.x"] {
            let mut tally = Tally::default();
            let options = FieldOptions::default();
            let write = WriteOptions {
                field: &options,
                created_as_string: false,
                null_is_value: false,
                json_types: false,
            };
            let result = write_at(
                &mut secret,
                &parse_field_path(path),
                &Copied::literal("new"),
                &write,
                &mut tally,
            );
            let Err(WriteError::Path(cause)) = result else {
                panic!("{path}: expected a path error, got {result:?}");
            };
            assert!(cause.starts_with("wrong node kind: expected MappingNode but got "));
            assert!(!cause.contains("c3VwZXItc2VjcmV0"), "{cause}");
        }
        assert_eq!(secret["data"]["password"], "c3VwZXItc2VjcmV0");
    }
}
