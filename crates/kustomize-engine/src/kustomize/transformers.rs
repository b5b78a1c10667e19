//! The field-spec driven built-in transformers: namespace, name prefix and suffix, labels and
//! annotations, replicas and images.
//!
//! Each walks the field specs of its configuration over every resource whose kind they
//! apply to. Renames and moves remember the resource's previous identity so the name
//! reference fix-up at the top of the build can follow them.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::Path;

use crate::value::{Map, Value};
use regex::Regex;

use super::aliases::{Place, Step, field_path};
use super::fieldspec::{split_path, visit_leaves, visit_placed_leaves};
use super::kustfile::{FieldSpec, Image, Replica};
use super::openapi::SchemaView;
use super::replacements::scalar_text;
use super::resource::{ResId, Resource, str_at};
use super::{KustomizeError, node_kind_mismatch};
use crate::yaml::{self, Schema};

/// How the namespace transformer treats RoleBinding and ClusterRoleBinding subjects.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RoleBindingSubjects {
    /// Subjects named `default` (kustomize's default).
    #[default]
    DefaultOnly,
    /// Every ServiceAccount subject.
    AllServiceAccounts,
    None,
}

/// Options of the namespace transformer.
#[derive(Clone, Copy, Debug, Default)]
pub struct NamespaceOptions {
    /// Only set namespaces that are empty.
    pub unset_only: bool,
    pub subjects: RoleBindingSubjects,
}

/// Moves namespaced resources (and the namespace fields the specs name) to `namespace`.
pub fn set_namespace(
    resources: &mut [Resource],
    namespace: &str,
    specs: &[FieldSpec],
    schema: SchemaView,
    options: NamespaceOptions,
    file: &Path,
) -> Result<(), KustomizeError> {
    for resource in resources.iter_mut() {
        // As kustomize's namespace transformer: every resource's identity so far is kept as a
        // previous one, moved or not (a name reference may still name it that way).
        resource.remember_id();
        let id = resource.id();
        let api_version = str_at(&resource.object, "/apiVersion").to_string();
        if !schema.is_cluster_scoped(&api_version, &id.kind)
            && (!options.unset_only
                || has_no_text(
                    resource.object.pointer("/metadata/namespace"),
                    "/metadata/namespace",
                    &resource.empty_values,
                ))
            && id.namespace != namespace
        {
            resource.set_namespace(namespace);
        }
        let binding = matches!(id.kind.as_str(), "RoleBinding" | "ClusterRoleBinding");
        if binding {
            set_subject_namespaces(resource, namespace, options);
        }
        for spec in specs.iter().filter(|s| s.applies_to(&id)) {
            // Handled above, as kustomize handles them apart.
            let binding_spec = matches!(spec.kind.as_str(), "RoleBinding" | "ClusterRoleBinding");
            if spec.path == "metadata/namespace"
                || (binding && binding_spec && spec.path == "subjects/namespace")
            {
                continue;
            }
            let renames = spec.kind == "Namespace" && spec.path == "metadata/name";
            if renames {
                if api_version != "v1"
                    || options.unset_only && !is_unset(resource.object.pointer("/metadata/name"))
                    || resource.name() == namespace
                {
                    continue;
                }
                resource.set_name(namespace);
                continue;
            }
            visit_leaves::<NamespaceVisit>(
                &mut resource.object,
                &split_path(&spec.path),
                spec.create,
                &mut |map, key| {
                    if let Some(found @ (Value::Object(_) | Value::Array(_))) = map.get(key) {
                        return Err(NamespaceVisit::NotScalar(node_kind_mismatch(
                            "ScalarNode",
                            found,
                        )));
                    }
                    if !options.unset_only || is_unset(map.get(key)) {
                        map.insert(key.to_string(), Value::String(namespace.to_string()));
                    }
                    Ok(())
                },
            )
            .map_err(|visit| visit.into_error(file, &resource.id(), &spec.path))?;
        }
    }
    Ok(())
}

/// Why a namespace field spec's walk stopped: the walk's own refusal (a scalar on the way,
/// an empty name, a list step in a mapping), or a target that is not a scalar (in kyaml's
/// words, after the lists walked through).
enum NamespaceVisit {
    RefusedOnTheWay(super::fieldspec::PathRefused),
    NotScalar(String),
}

impl NamespaceVisit {
    /// kustomize's namespace filter words a node-kind error on a mapping or a list apart
    /// from its other failures.
    fn into_error(self, file: &Path, object: &ResId, path: &str) -> KustomizeError {
        let (file, object, path) = (file.to_path_buf(), object.to_string(), path.to_string());
        match self {
            NamespaceVisit::NotScalar(cause) => KustomizeError::NamespaceFieldNotScalar {
                file,
                object,
                path,
                cause,
            },
            NamespaceVisit::RefusedOnTheWay(refused) if refused.met_a_collection() => {
                KustomizeError::NamespaceFieldNotScalar {
                    file,
                    object,
                    path,
                    cause: refused.to_string(),
                }
            }
            NamespaceVisit::RefusedOnTheWay(refused) => KustomizeError::NamespaceTransformation {
                file,
                object,
                path,
                cause: refused.to_string(),
            },
        }
    }
}

impl super::fieldspec::Traversed for NamespaceVisit {
    fn traversed(self, prefix: &str) -> Self {
        match self {
            NamespaceVisit::NotScalar(cause) => {
                NamespaceVisit::NotScalar(format!("{prefix}{cause}"))
            }
            refused => refused,
        }
    }
}

impl From<super::fieldspec::PathRefused> for NamespaceVisit {
    fn from(refused: super::fieldspec::PathRefused) -> Self {
        NamespaceVisit::RefusedOnTheWay(refused)
    }
}

pub(super) fn set_subject_namespaces(
    resource: &mut Resource,
    namespace: &str,
    options: NamespaceOptions,
) {
    let Some(Value::Array(subjects)) = resource.object.get_mut("subjects") else {
        return;
    };
    for subject in subjects.iter_mut().filter_map(Value::as_object_mut) {
        let selected = match options.subjects {
            RoleBindingSubjects::DefaultOnly => {
                subject.get("name").and_then(Value::as_str) == Some("default")
            }
            RoleBindingSubjects::AllServiceAccounts => {
                subject.get("kind").and_then(Value::as_str) == Some("ServiceAccount")
            }
            RoleBindingSubjects::None => false,
        };
        if selected && (!options.unset_only || is_unset(subject.get("namespace"))) {
            subject.insert("namespace".into(), Value::String(namespace.to_string()));
        }
    }
}

/// Whether `unsetOnly` finds no value at a resource's own namespace:
/// kustomize sets one where the field is missing or its YAML text is empty (`""`, or a key
/// written with nothing after it); a null spelled out (`null`, `~`), a number or a boolean
/// is a value there and stays. Elsewhere ([`is_unset`]) kyaml makes a null field anew first.
fn has_no_text(current: Option<&Value>, pointer: &str, empty_values: &[String]) -> bool {
    match current {
        None | Some(Value::Object(_) | Value::Array(_)) => true,
        Some(Value::String(text)) => text.is_empty(),
        Some(Value::Null) => empty_values.iter().any(|empty| empty == pointer),
        Some(Value::Number(_) | Value::Bool(_)) => false,
    }
}

/// Whether `unsetOnly` finds no value at a subject's or a field spec's namespace field (or a
/// Namespace's name).
fn is_unset(current: Option<&Value>) -> bool {
    current.and_then(Value::as_str).is_none_or(str::is_empty)
}

/// Kinds never renamed by prefixes and suffixes (checked against the original identity).
fn keeps_its_name(resource: &Resource) -> bool {
    let original = resource.original_id();
    matches!(
        original.kind.as_str(),
        "CustomResourceDefinition" | "Namespace"
    ) || (original.kind == "APIService" && original.group == "apiregistration.k8s.io")
}

/// Which end of a name an affix goes to.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Affix {
    Prefix,
    Suffix,
}

/// Adds `affix` to the names the specs point at, as kustomize's prefix or suffix transformer.
/// Any scalar there takes it (a number's or a boolean's text too), and what it writes is read
/// back by YAML's rules, as kyaml drops the tag: `1` on `23` gives the number 123, a field a
/// spec creates starts empty (so an empty affix makes it null, `1` the number 1), an empty
/// affix turns a null's text back into a null. A mapping or a list there, or a scalar on the
/// way, is refused. An empty affix still visits every field (creating and refusing as above)
/// but renames nothing.
pub fn add_affix(
    resources: &mut [Resource],
    affix: &str,
    end: Affix,
    specs: &[FieldSpec],
) -> Result<(), KustomizeError> {
    let affixed = |text: &str| match end {
        Affix::Prefix => format!("{affix}{text}"),
        Affix::Suffix => format!("{text}{affix}"),
    };
    for resource in resources.iter_mut() {
        if keeps_its_name(resource) {
            continue;
        }
        let id = resource.id();
        let mut renamed = false;
        for spec in specs.iter().filter(|s| s.applies_to(&id)) {
            if spec.path == "metadata/name" {
                if !affix.is_empty() {
                    // A name a JSON patch made a number is affixed to its text.
                    let name = affixed(&resource.name_text());
                    resource.set_name(&name);
                    // kyaml writes the name with no tag.
                    let written = Value::String(name);
                    resource
                        .untagged
                        .wrote(super::untagged::metadata_name(), &written);
                    renamed = true;
                }
                continue;
            }
            let mut untagged_writes = Vec::new();
            visit_placed_leaves(
                &mut resource.object,
                &split_path(&spec.path),
                spec.create,
                &mut |map, key, at| {
                    let written = match map.get(key) {
                        Some(found @ (Value::Object(_) | Value::Array(_))) => {
                            return Err(KustomizeError::field_not("ScalarNode", found));
                        }
                        // A string kept its quotes, so it stays a string.
                        Some(Value::String(current)) => Value::String(affixed(current)),
                        // kyaml's text of a null is how it was written; `null` here.
                        Some(Value::Null) => yaml::plain_scalar(&affixed("null"), Schema::Kyaml),
                        Some(scalar) => {
                            yaml::plain_scalar(&affixed(&scalar_text(scalar)), Schema::Kyaml)
                        }
                        None => yaml::plain_scalar(&affixed(""), Schema::Kyaml),
                    };
                    // kyaml writes the text with no tag.
                    untagged_writes.push((field_path(at, key), written.clone()));
                    map.insert(key.to_string(), written);
                    Ok(())
                },
            )
            .map_err(|e| e.in_field(&id, &spec.path))?;
            for (path, written) in untagged_writes {
                resource.untagged.wrote(path, &written);
            }
        }
        if renamed {
            match end {
                Affix::Prefix => resource.prefixes.push(affix.to_string()),
                Affix::Suffix => resource.suffixes.push(affix.to_string()),
            }
        }
    }
    Ok(())
}

/// Sets `entries` in the maps the specs point at (labels, selectors, annotations); returns
/// how many maps were written, even where the values were already there.
pub fn add_map_entries(
    resources: &mut [Resource],
    entries: &BTreeMap<String, String>,
    specs: &[FieldSpec],
) -> Result<usize, KustomizeError> {
    let mut written = 0;
    if entries.is_empty() {
        return Ok(written);
    }
    let paths: Vec<Vec<Cow<str>>> = specs.iter().map(|s| split_path(&s.path)).collect();
    for resource in resources.iter_mut() {
        let id = resource.id();
        // Per key, the fields this pass creates (one node in kustomize) and those it writes
        // into (whose node's other holders change with them).
        let mut created: Vec<Vec<Vec<Step>>> = vec![Vec::new(); entries.len()];
        let mut written_into: Vec<Vec<Step>> = Vec::new();
        let shares_fields = !resource.aliases.is_empty();
        // kustomize holds its bookkeeping in the annotations, so they are there to be written
        // into, created or not, while a resource has any.
        let holds_bookkeeping = !resource.build_annotations(false, false).is_empty();
        for (spec, path) in specs.iter().zip(&paths).filter(|(s, _)| s.applies_to(&id)) {
            let create = spec.create || (holds_bookkeeping && spec.path == "metadata/annotations");
            visit_placed_leaves(&mut resource.object, path, create, &mut |map, key, at| {
                let leaf = map
                    .entry(key.to_string())
                    .or_insert_with(|| Value::Object(Map::new()));
                if leaf.is_null() {
                    // kustomize makes a null into a map only where the spec creates; else
                    // its entries go nowhere and the null stays.
                    if !create {
                        return Ok(());
                    }
                    *leaf = Value::Object(Map::new());
                }
                let Value::Object(target) = leaf else {
                    return Err(KustomizeError::field_not("MappingNode", leaf));
                };
                for (index, (k, v)) in entries.iter().enumerate() {
                    let field = || {
                        let mut map_path = at.to_vec();
                        map_path.push(Place::Key(key));
                        field_path(&map_path, k)
                    };
                    match target.insert(k.clone(), Value::String(v.clone())) {
                        None => created[index].push(field()),
                        Some(_) if shares_fields => written_into.push(field()),
                        Some(_) => {}
                    }
                }
                written += 1;
                Ok(())
            })
            .map_err(|e| e.in_field(&id, &spec.path))?;
        }
        for path in &written_into {
            resource.aliases.written(&mut resource.object, path);
        }
        for paths in created.into_iter().filter(|paths| !paths.is_empty()) {
            resource.aliases.created(paths);
        }
    }
    Ok(written)
}

/// Sets replica counts of the resources named by `replicas`.
pub fn set_replicas(
    resources: &mut [Resource],
    replicas: &[Replica],
    specs: &[FieldSpec],
    file: &Path,
) -> Result<(), KustomizeError> {
    for replica in replicas {
        let mut found = false;
        // As kustomize: each field spec in turn, over every resource of that name.
        for spec in specs {
            let path = split_path(&spec.path);
            for resource in resources.iter_mut() {
                let named = resource.name() == replica.name
                    || resource.previous_ids.iter().any(|p| p.name == replica.name);
                let id = resource.id();
                if !named || !spec.applies_to(&id) {
                    continue;
                }
                found = true;
                visit_leaves(
                    &mut resource.object,
                    &path,
                    spec.create,
                    &mut |map, key| match map.get(key) {
                        Some(found @ (Value::Object(_) | Value::Array(_))) => {
                            Err(KustomizeError::field_not("ScalarNode", found))
                        }
                        _ => {
                            map.insert(key.to_string(), Value::from(replica.count));
                            Ok(())
                        }
                    },
                )
                .map_err(|e| e.in_field(&id, &spec.path))?;
            }
        }
        if !found {
            let gvks: Vec<String> = specs
                .iter()
                .map(|s| format!("{}/{}/{}", s.group, s.version, s.kind))
                .collect();
            return Err(KustomizeError::Transformer {
                file: file.to_path_buf(),
                object: replica.name.clone(),
                message: format!(
                    "resource with name {} does not match a config with the following GVK [{}]",
                    replica.name,
                    gvks.join(" ")
                ),
            });
        }
    }
    Ok(())
}

/// Applies each `images:` entry in turn: first to every `containers`/`initContainers` list
/// at any depth, then to the image field specs, skipping CRDs (as kustomize does, which is
/// why a `tagSuffix` lands twice on ordinary pod templates).
pub fn set_images(
    resources: &mut [Resource],
    images: &[Image],
    specs: &[FieldSpec],
) -> Result<(), KustomizeError> {
    let paths: Vec<Vec<Cow<str>>> = specs.iter().map(|s| split_path(&s.path)).collect();
    for image in images {
        let pattern = format!(
            "^{}(:[a-zA-Z0-9_.{{}}-]*)?(@sha256:[a-zA-Z0-9_.{{}}-]*)?$",
            image.name
        );
        let matcher =
            super::regexes::compile(&pattern).map_err(|e| KustomizeError::InvalidImageName {
                name: image.name.clone(),
                message: e.to_string(),
            })?;
        // As kustomize: the container lists of every resource, then the field specs.
        for resource in resources.iter_mut() {
            if resource.kind() != "CustomResourceDefinition" {
                update_container_lists(&mut resource.object, &matcher, image).map_err(|cause| {
                    KustomizeError::ContainerImage {
                        object: resource.id().to_string(),
                        cause,
                    }
                })?;
            }
        }
        for resource in resources.iter_mut() {
            if resource.kind() == "CustomResourceDefinition" {
                continue;
            }
            let id = resource.id();
            for (spec, path) in specs.iter().zip(&paths) {
                if !spec.applies_to(&id) {
                    continue;
                }
                visit_leaves(
                    &mut resource.object,
                    path,
                    false,
                    &mut |map, key| match map.get(key) {
                        Some(Value::String(current)) => {
                            if let Some(updated) = updated_image(current, &matcher, image) {
                                map.insert(key.to_string(), Value::String(updated));
                            }
                            Ok(())
                        }
                        Some(found @ (Value::Object(_) | Value::Array(_))) => {
                            Err(KustomizeError::field_not("ScalarNode", found))
                        }
                        _ => Ok(()),
                    },
                )
                .map_err(|e| e.in_field(&id, &spec.path))?;
            }
        }
    }
    Ok(())
}

fn update_container_lists(value: &mut Value, matcher: &Regex, image: &Image) -> Result<(), String> {
    match value {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                // kustomize walks a field's value before looking at the field.
                update_container_lists(child, matcher, image)?;
                if matches!(key.as_str(), "containers" | "initContainers")
                    && let Value::Array(containers) = child
                {
                    for container in containers.iter_mut() {
                        update_container_image(container, matcher, image)?;
                    }
                }
            }
            Ok(())
        }
        Value::Array(items) => items
            .iter_mut()
            .try_for_each(|item| update_container_lists(item, matcher, image)),
        _ => Ok(()),
    }
}

/// One element of a container list: kustomize looks its `image` up as a mapping's field (a
/// null element is skipped) and sets it as a scalar.
fn update_container_image(
    container: &mut Value,
    matcher: &Regex,
    image: &Image,
) -> Result<(), String> {
    let container = match container {
        Value::Null => return Ok(()),
        Value::Object(container) => container,
        other => return Err(super::node_kind_mismatch("MappingNode", other)),
    };
    match container.get("image") {
        Some(Value::String(current)) => {
            if let Some(updated) = updated_image(current, matcher, image) {
                container.insert("image".into(), Value::String(updated));
            }
            Ok(())
        }
        Some(found @ (Value::Object(_) | Value::Array(_))) => {
            Err(super::node_kind_mismatch("ScalarNode", found))
        }
        _ => Ok(()),
    }
}

/// The image reference after applying `image`, or `None` when it does not match.
fn updated_image(current: &str, matcher: &Regex, image: &Image) -> Option<String> {
    if !matcher.is_match(current) {
        return None;
    }
    let (mut name, mut tag, mut digest) = split_image(current);
    if !image.new_name.is_empty() {
        name = image.new_name.clone();
    }
    match (image.new_tag.is_empty(), image.digest.is_empty()) {
        (false, false) => {
            tag = image.new_tag.clone();
            digest = image.digest.clone();
        }
        (false, true) => {
            tag = image.new_tag.clone();
            digest.clear();
        }
        (true, false) => {
            tag.clear();
            digest = image.digest.clone();
        }
        // Only where neither is set: the suffix goes on the tag (or is the tag, where there
        // is none) and any digest is dropped.
        (true, true) if !image.tag_suffix.is_empty() => {
            tag.push_str(&image.tag_suffix);
            digest.clear();
        }
        (true, true) => {}
    }
    let mut out = name;
    if !tag.is_empty() {
        out.push(':');
        out.push_str(&tag);
    }
    if !digest.is_empty() {
        out.push('@');
        out.push_str(&digest);
    }
    Some(out)
}

/// `registry:5000/app:tag@sha256:…` → (`registry:5000/app`, `tag`, `sha256:…`): a colon
/// before the first slash belongs to the registry.
pub fn split_image(image: &str) -> (String, String, String) {
    let offset = image.find('/').filter(|i| *i > 0).unwrap_or(0);
    let search = &image[offset..];
    let at = search.find('@').map(|i| i + offset);
    let colon = search.find(':').map(|i| i + offset);
    match (colon, at) {
        (None, None) => (image.to_string(), String::new(), String::new()),
        (c, Some(a)) if c.is_none_or(|c| a < c) => (
            image[..a].to_string(),
            String::new(),
            image[a + 1..].to_string(),
        ),
        (Some(c), Some(a)) => (
            image[..c].to_string(),
            image[c + 1..a].to_string(),
            image[a + 1..].to_string(),
        ),
        (Some(c), None) => (
            image[..c].to_string(),
            image[c + 1..].to_string(),
            String::new(),
        ),
        (None, Some(_)) => unreachable!("handled by the digest-only arm"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_images_like_kustomize() {
        let split = |s| split_image(s);
        assert_eq!(split("nginx"), ("nginx".into(), "".into(), "".into()));
        assert_eq!(
            split("nginx:1.0"),
            ("nginx".into(), "1.0".into(), "".into())
        );
        assert_eq!(
            split("reg:5000/app:v1"),
            ("reg:5000/app".into(), "v1".into(), "".into())
        );
        assert_eq!(
            split("app@sha256:ab"),
            ("app".into(), "".into(), "sha256:ab".into())
        );
        assert_eq!(
            split("app:v1@sha256:ab"),
            ("app".into(), "v1".into(), "sha256:ab".into())
        );
    }
}
