//! Resources as the engine carries them: the object plus what kustomize remembers about it.
//!
//! Besides the JSON object, a resource keeps the identities it had before transformers
//! renamed or moved it (name-reference fix-up at the top of the build matches referrers
//! against those), the prefixes and suffixes applied to it (to break ties between candidates),
//! and, for generated ConfigMaps and Secrets, how they combine with earlier ones and whether
//! they get a content hash suffix.

use std::fmt;

use thin_vec::ThinVec;

use super::history::History;

use crate::value::{Map, Value};

/// Group, version, kind, namespace and name: what tells two resources apart.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResId {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

impl ResId {
    pub fn of(object: &Value) -> ResId {
        let (group, version) = split_api_version(field_str(object, "apiVersion"));
        let metadata = object.get("metadata").unwrap_or(&Value::Null);
        ResId {
            group: group.to_string(),
            version: version.to_string(),
            kind: field_str(object, "kind").to_string(),
            namespace: field_str(metadata, "namespace").to_string(),
            name: name_text(metadata).into_owned(),
        }
    }

    /// [`same_object`](Self::same_object) with the object `object` is, without building its
    /// id (this runs for every pair of resources when generated ones join a list).
    pub fn same_object_as(&self, object: &Value) -> bool {
        let metadata = object.get("metadata").unwrap_or(&Value::Null);
        split_api_version(field_str(object, "apiVersion")).0 == self.group
            && field_str(object, "kind") == self.kind
            && name_text(metadata) == self.name
            && namespaces_equal(field_str(metadata, "namespace"), &self.namespace)
    }

    /// Same group, kind, namespace and name; versions are ignored, as kustomize does when it
    /// looks for conflicts and patch targets.
    pub fn same_object(&self, other: &ResId) -> bool {
        self.group == other.group
            && self.kind == other.kind
            && self.name == other.name
            && namespaces_equal(&self.namespace, &other.namespace)
    }
}

/// kustomize treats a missing namespace and `default` as the same namespace.
pub fn namespaces_equal(a: &str, b: &str) -> bool {
    fn normal(ns: &str) -> &str {
        if ns.is_empty() { "default" } else { ns }
    }
    normal(a) == normal(b)
}

impl fmt::Display for ResId {
    /// kustomize's form: `Deployment.v1.apps/web.prod`, with `[noGrp]`/`[noNs]` placeholders.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let or = |s: &str, placeholder: &'static str| -> String {
            if s.is_empty() {
                placeholder.to_string()
            } else {
                s.to_string()
            }
        };
        write!(
            f,
            "{}.{}.{}/{}.{}",
            self.kind,
            or(&self.version, "[noVer]"),
            or(&self.group, "[noGrp]"),
            self.name,
            or(&self.namespace, "[noNs]")
        )
    }
}

/// Group, version and kind, borrowed from an object: what field specs match on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gvk<'a> {
    pub group: &'a str,
    pub version: &'a str,
    pub kind: &'a str,
}

/// kustomize's `Gvk.String()`: `Deployment.v1.apps`, with `[noKind]`/`[noVer]`/`[noGrp]`
/// for what is empty (Flux names built objects this way in its build errors).
impl fmt::Display for Gvk<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn or<'s>(s: &'s str, placeholder: &'static str) -> &'s str {
            if s.is_empty() { placeholder } else { s }
        }
        write!(
            f,
            "{}.{}.{}",
            or(self.kind, "[noKind]"),
            or(self.version, "[noVer]"),
            or(self.group, "[noGrp]")
        )
    }
}

impl<'a> Gvk<'a> {
    pub fn of(object: &'a Value) -> Gvk<'a> {
        let (group, version) = split_api_version(field_str(object, "apiVersion"));
        Gvk {
            group,
            version,
            kind: field_str(object, "kind"),
        }
    }
}

/// `apps/v1` → (`apps`, `v1`); `v1` → (``, `v1`).
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        Some((group, version)) => (group, version),
        None => ("", api_version),
    }
}

/// The string field `key` of `object`, or `""`.
fn field_str<'a>(object: &'a Value, key: &str) -> &'a str {
    object.get(key).and_then(Value::as_str).unwrap_or("")
}

/// A name as kustomize reads it (`GetName`, a scalar's text): a name a JSON patch made a
/// number or a boolean is its text, so the object keeps its identity (a later patch naming it
/// puts the text back as its name, as kustomize does).
fn name_text(metadata: &Value) -> std::borrow::Cow<'_, str> {
    match metadata.get("name") {
        Some(Value::String(name)) => std::borrow::Cow::Borrowed(name),
        Some(scalar @ (Value::Number(_) | Value::Bool(_))) => {
            std::borrow::Cow::Owned(super::replacements::scalar_text(scalar))
        }
        _ => std::borrow::Cow::Borrowed(""),
    }
}

/// The string at a `/a/b` path, or `""`. Walks with plain lookups: `Value::pointer` would
/// allocate for every segment, and this runs for every resource in every step.
pub fn str_at<'a>(object: &'a Value, pointer: &str) -> &'a str {
    let mut value = object;
    let mut rest = pointer.strip_prefix('/').unwrap_or(pointer);
    loop {
        let (key, tail) = match rest.bytes().position(|b| b == b'/') {
            Some(i) => (&rest[..i], Some(&rest[i + 1..])),
            None => (rest, None),
        };
        let Some(next) = value.get(key) else {
            return "";
        };
        value = next;
        match tail {
            Some(tail) => rest = tail,
            None => return value.as_str().unwrap_or(""),
        }
    }
}

/// How a generated resource combines with one of the same name from a base.
/// `Unspecified` (none written, or one kustomize does not know) acts as `Create`, but
/// kustomize tells them apart in its bookkeeping annotations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Behavior {
    #[default]
    Unspecified,
    Create,
    Merge,
    Replace,
}

impl Behavior {
    pub fn parse(text: &str) -> Behavior {
        match text {
            "create" => Behavior::Create,
            "merge" => Behavior::Merge,
            "replace" => Behavior::Replace,
            _ => Behavior::Unspecified,
        }
    }

    /// The word kustomize's `generatorBehavior` annotation holds.
    fn as_str(self) -> &'static str {
        match self {
            Behavior::Unspecified => "unspecified",
            Behavior::Create => "create",
            Behavior::Merge => "merge",
            Behavior::Replace => "replace",
        }
    }
}

/// A resource in the build. Its lists are thin and its origin boxed: most stay empty, and a
/// build may hold a hundred thousand resources.
#[derive(Clone, Debug)]
pub struct Resource {
    pub object: Value,
    /// Identities before each rename, oldest first.
    pub previous_ids: History<ResId>,
    pub prefixes: History<String>,
    pub suffixes: History<String>,
    /// Set on resources made by a ConfigMap or Secret generator.
    pub generated: Option<Generated>,
    /// Vars whose value this resource supplies.
    pub var_names: ThinVec<String>,
    /// Resources whose name references were pointed at this one, in the order found.
    pub referred_by: ThinVec<ResId>,
    /// Where the resource came from, when provenance is tracked.
    pub origin: Option<Box<super::provenance::Origin>>,
    /// JSON pointers of fields read with no value (`key:`), dropped by a strategic merge
    /// patch ([`Resource::drop_empty_values`]).
    pub empty_values: ThinVec<String>,
    /// The transformers that ran over it, in order, when tracked.
    pub transformations: ThinVec<super::provenance::Origin>,
    /// Fields holding one YAML node in kustomize, which a write into one changes in all.
    pub aliases: super::aliases::Aliases,
    /// The scalars kustomize holds without a tag (numbers, booleans, strings that read as
    /// strings when plain).
    pub untagged: super::untagged::Untagged,
}

/// What a generator recorded about a resource it made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Generated {
    pub behavior: Behavior,
    pub hash_suffix: bool,
}

const PREVIOUS_NAMES: &str = "internal.config.kubernetes.io/previousNames";
const PREVIOUS_NAMESPACES: &str = "internal.config.kubernetes.io/previousNamespaces";
const PREVIOUS_KINDS: &str = "internal.config.kubernetes.io/previousKinds";
const PREFIXES: &str = "internal.config.kubernetes.io/prefixes";
const SUFFIXES: &str = "internal.config.kubernetes.io/suffixes";
const GENERATOR_BEHAVIOR: &str = "internal.config.kubernetes.io/generatorBehavior";
const NEEDS_HASH_SUFFIX: &str = "internal.config.kubernetes.io/needsHashSuffix";

/// The annotations kustomize keeps its own state in and removes from what it prints
/// (`resource.BuildAnnotations`, kio's internal and legacy ones, build metadata).
const BUILD_ANNOTATIONS: [&str; 20] = [
    PREVIOUS_KINDS,
    PREVIOUS_NAMES,
    PREFIXES,
    SUFFIXES,
    PREVIOUS_NAMESPACES,
    "internal.config.kubernetes.io/allowNameChange",
    "internal.config.kubernetes.io/allowKindChange",
    "internal.config.kubernetes.io/refBy",
    GENERATOR_BEHAVIOR,
    NEEDS_HASH_SUFFIX,
    "internal.config.kubernetes.io/path",
    "internal.config.kubernetes.io/index",
    "internal.config.kubernetes.io/seqindent",
    "internal.config.kubernetes.io/id",
    "internal.config.k8s.io/annotations-migration-resource-id",
    "config.kubernetes.io/path",
    "config.kubernetes.io/index",
    "config.k8s.io/id",
    "config.kubernetes.io/origin",
    "alpha.config.kubernetes.io/transformations",
];

impl Resource {
    pub fn new(object: Value) -> Resource {
        Resource {
            object,
            previous_ids: History::new(),
            prefixes: History::new(),
            suffixes: History::new(),
            generated: None,
            var_names: ThinVec::new(),
            referred_by: ThinVec::new(),
            origin: None,
            transformations: ThinVec::new(),
            empty_values: ThinVec::new(),
            aliases: Default::default(),
            untagged: Default::default(),
        }
    }

    /// Removes the fields that were written with no value and still have none, as kyaml's
    /// merge does to a resource a strategic merge patch is applied to.
    pub fn drop_empty_values(&mut self) {
        for pointer in std::mem::take(&mut self.empty_values) {
            let Some((parent, key)) = pointer.rsplit_once('/') else {
                continue;
            };
            let key = key.replace("~1", "/").replace("~0", "~");
            if let Some(Value::Object(map)) = self.object.pointer_mut(parent)
                && map
                    .get(&key)
                    .is_some_and(|v| v.is_null() || v.as_str() == Some(""))
            {
                map.remove(&key);
            }
        }
    }

    /// kustomize's own bookkeeping annotations, met in a file (written by a kustomize or kpt
    /// pipeline, or by hand): the previous names, kinds and namespaces become the resource's
    /// previous identities, as kustomize reads them, and every one of them is dropped, as
    /// kustomize drops them from what it prints. Lists of unequal length are refused in
    /// kustomize's words (kustomize panics on them).
    pub fn take_build_annotations(&mut self) -> Result<(), String> {
        let Some(Value::Object(annotations)) = self.object.pointer_mut("/metadata/annotations")
        else {
            return Ok(());
        };
        if !BUILD_ANNOTATIONS
            .iter()
            .any(|key| annotations.contains_key(*key))
        {
            return Ok(());
        }
        let text = |key: &str| {
            annotations.get(key).map(|value| match value {
                Value::String(text) => text.clone(),
                other => super::replacements::scalar_text(other),
            })
        };
        let previous = text(PREVIOUS_NAMES).map(|names| {
            (
                names,
                text(PREVIOUS_NAMESPACES).unwrap_or_default(),
                text(PREVIOUS_KINDS).unwrap_or_default(),
            )
        });
        for key in BUILD_ANNOTATIONS {
            annotations.remove(key);
        }
        if annotations.is_empty()
            && let Some(Value::Object(metadata)) = self.object.get_mut("metadata")
        {
            metadata.remove("annotations");
        }
        if let Some((names, namespaces, kinds)) = previous {
            let (names, namespaces, kinds): (Vec<&str>, Vec<&str>, Vec<&str>) = (
                names.split(',').collect(),
                namespaces.split(',').collect(),
                kinds.split(',').collect(),
            );
            let current = self.id();
            if names.len() != namespaces.len() || names.len() != kinds.len() {
                return Err(format!(
                    "{current}: number of previous names, number of previous namespaces, number of previous kinds not equal"
                ));
            }
            for ((name, namespace), kind) in names.iter().zip(&namespaces).zip(&kinds) {
                self.previous_ids.push(ResId {
                    group: current.group.clone(),
                    version: current.version.clone(),
                    kind: kind.to_string(),
                    namespace: namespace.to_string(),
                    name: name.to_string(),
                });
            }
        }
        Ok(())
    }

    pub fn id(&self) -> ResId {
        ResId::of(&self.object)
    }

    /// The annotations kustomize would hold this resource's bookkeeping in at this point of
    /// the build (we keep it in fields): previous identities (with the current one when
    /// `with_current_id`, as a transformer about to change it stores it), prefixes,
    /// suffixes and what its generator asked for. A JSON patch sees them.
    pub fn build_annotations(
        &self,
        with_current_id: bool,
        cluster_scoped: bool,
    ) -> Vec<(&'static str, String)> {
        let current = self.id();
        // Histories read newest first; kustomize lists oldest first.
        let mut ids: Vec<&ResId> = self.previous_ids.iter().collect();
        ids.reverse();
        ids.extend(with_current_id.then_some(&current));
        let csv =
            |part: fn(&ResId) -> &str| ids.iter().map(|id| part(id)).collect::<Vec<_>>().join(",");
        let mut annotations = Vec::new();
        if !ids.is_empty() {
            annotations.push((PREVIOUS_NAMES, csv(|id| &id.name)));
            annotations.push((PREVIOUS_KINDS, csv(|id| &id.kind)));
            let namespaces = ids
                .iter()
                .map(|id| match id.namespace.as_str() {
                    _ if cluster_scoped => "_non_namespaceable_",
                    "" => "default",
                    namespace => namespace,
                })
                .collect::<Vec<_>>()
                .join(",");
            annotations.push((PREVIOUS_NAMESPACES, namespaces));
        }
        for (key, affixes) in [(PREFIXES, &self.prefixes), (SUFFIXES, &self.suffixes)] {
            if !affixes.is_empty() {
                let mut oldest_first: Vec<&str> = affixes.iter().map(String::as_str).collect();
                oldest_first.reverse();
                annotations.push((key, oldest_first.join(",")));
            }
        }
        if let Some(generated) = self.generated {
            annotations.push((GENERATOR_BEHAVIOR, generated.behavior.as_str().to_string()));
            if generated.hash_suffix {
                annotations.push((NEEDS_HASH_SUFFIX, "enabled".to_string()));
            }
        }
        annotations
    }

    pub fn gvk(&self) -> Gvk<'_> {
        Gvk::of(&self.object)
    }

    /// The identity before any rename.
    pub fn original_id(&self) -> ResId {
        self.previous_ids
            .first()
            .cloned()
            .unwrap_or_else(|| self.id())
    }

    pub fn kind(&self) -> &str {
        str_at(&self.object, "/kind")
    }

    pub fn name(&self) -> &str {
        str_at(&self.object, "/metadata/name")
    }

    /// The name as kustomize reads it: also a number's or a boolean's text ([`name_text`]).
    pub fn name_text(&self) -> std::borrow::Cow<'_, str> {
        name_text(self.object.get("metadata").unwrap_or(&Value::Null))
    }

    pub fn namespace(&self) -> &str {
        str_at(&self.object, "/metadata/namespace")
    }

    /// Remembers the current identity before a transformer changes it.
    pub fn remember_id(&mut self) {
        let id = self.id();
        if self.previous_ids.last() != Some(&id) {
            self.previous_ids.push(id);
        }
    }

    pub fn set_name(&mut self, name: &str) {
        self.remember_id();
        self.untagged.forget(&super::untagged::metadata_name());
        metadata_mut(&mut self.object).insert("name".into(), Value::String(name.to_string()));
    }

    pub fn set_namespace(&mut self, namespace: &str) {
        self.remember_id();
        metadata_mut(&mut self.object)
            .insert("namespace".into(), Value::String(namespace.to_string()));
    }

    /// Labels (or annotations) as a map, created when absent.
    pub fn metadata_map_mut(&mut self, field: &str) -> &mut Map {
        let metadata = metadata_mut(&mut self.object);
        let entry = metadata
            .entry(field.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        if !entry.is_object() {
            *entry = Value::Object(Map::new());
        }
        entry.as_object_mut().expect("just made an object")
    }

    pub fn metadata_map(&self, field: &str) -> Option<&Map> {
        self.object.get("metadata")?.get(field)?.as_object()
    }

    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.metadata_map("annotations")?.get(key)?.as_str()
    }
}

/// What kustomize's check of an object a transformer returns (`GetValidatedMetadata`) finds
/// missing: a kind, or a name (a List needs none); a mapping, a list or a null has no text.
pub fn missing_identity(object: &Value) -> Option<&'static str> {
    let text = |pointer: &str| {
        object
            .pointer(pointer)
            .map(super::replacements::kyaml_text)
            .unwrap_or_default()
    };
    let kind = text("/kind");
    if kind.is_empty() {
        return Some("missing kind");
    }
    (text("/metadata/name").is_empty() && !kind.ends_with("List"))
        .then_some("missing metadata.name")
}

/// `metadata`, made an object when it is missing or not one.
pub fn metadata_mut(object: &mut Value) -> &mut Map {
    if !object.is_object() {
        *object = Value::Object(Map::new());
    }
    let map = object.as_object_mut().expect("just made an object");
    let metadata = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !metadata.is_object() {
        *metadata = Value::Object(Map::new());
    }
    metadata.as_object_mut().expect("just made an object")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kustomizes_bookkeeping_annotations_become_previous_ids_and_go() {
        let mut resource = Resource::new(crate::json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "pre-deploy", "annotations": {
                "internal.config.kubernetes.io/previousNames": "deploy,deploy",
                "internal.config.kubernetes.io/previousKinds": "CronJob,Deployment",
                "internal.config.kubernetes.io/previousNamespaces": "default,default",
                "config.kubernetes.io/index": "0"}}}));
        resource.take_build_annotations().unwrap();
        assert!(resource.object["metadata"].get("annotations").is_none());
        // Oldest first, as kustomize lists them.
        let previous: Vec<String> = resource
            .previous_ids
            .to_vec()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            previous,
            [
                "CronJob.v1.apps/deploy.default",
                "Deployment.v1.apps/deploy.default"
            ]
        );
        let mut unequal = Resource::new(crate::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "annotations": {
                "internal.config.kubernetes.io/previousNames": "a,b",
                "internal.config.kubernetes.io/previousKinds": "ConfigMap",
                "internal.config.kubernetes.io/previousNamespaces": "default"}}}));
        assert!(unequal.take_build_annotations().is_err());
    }

    #[test]
    fn a_resource_without_history_costs_little_beyond_its_object() {
        // The object, three shared histories, four thin lists, the thin lists of shared and
        // of untagged fields, a boxed origin and flags.
        assert!(std::mem::size_of::<Resource>() <= 120);
        let resource = Resource::new(Value::Null);
        assert!(resource.previous_ids.is_empty() && resource.origin.is_none());
    }
}
