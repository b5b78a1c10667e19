//! The patch transformers: `patchesStrategicMerge`, `patches` and `patchesJson6902`.
//!
//! A patch document that is a list is a JSON 6902 patch, anything else a strategic merge
//! patch. Strategic merge patches without a target apply to the resource with their own
//! identity (current or earlier); with a target, to every selected resource, keeping the
//! resource's name and kind unless the options allow the patch to change them.

use std::path::Path;

use crate::value::Value;
use serde_json::Value as JsonValue;

use super::KustomizeError;
use super::json6902::JsonPatch;
use super::kustfile::{Patch, Selector};
use super::loader::{Loader, Target};
use super::resource::{ResId, Resource};
use super::selector::CompiledSelector;
use super::smp::{self, Outcome};
use super::target::Accumulated;
use crate::yaml;

/// A loaded patch: where it came from (for messages) and its documents, with the pointers of
/// the keys each wrote as numbers or booleans and of its nulls not spelled `null`
/// (`yaml::parse_patches`).
struct Loaded {
    origin: String,
    /// The patch as written: a JSON 6902 patch is read again from it with YAML 1.1 rules.
    text: String,
    documents: Vec<Value>,
    number_keys: Vec<Vec<String>>,
    null_spellings: Vec<Vec<(String, String)>>,
}

impl Loaded {
    fn number_keys_of(&self, document: usize) -> &[String] {
        self.number_keys.get(document).map_or(&[], Vec::as_slice)
    }
}

/// Reads a patch from a file or, when `entry` is not a file, as inline YAML.
fn load_entry(entry: &str, loader: &Loader, file: &Path) -> Result<Loaded, KustomizeError> {
    let looks_inline = entry.contains('\n')
        || entry.trim_start().starts_with('{')
        || entry.trim_start().starts_with('[');
    if !looks_inline
        && (super::loader::is_remote_file(entry)
            || matches!(loader.resolve(entry), Ok(Target::File(_))))
    {
        let (path, text) = loader.read_text(entry)?;
        return parse(&text, &loader.relative(&path).display().to_string(), file);
    }
    let loaded = parse(entry, "inline patch", file)?;
    if !looks_inline
        && loaded
            .documents
            .iter()
            .all(|d| !d.is_object() && !d.is_array())
    {
        // A single word that is not a file: report the missing file, as kustomize does.
        loader.read(entry)?;
    }
    Ok(loaded)
}

fn parse(text: &str, origin: &str, file: &Path) -> Result<Loaded, KustomizeError> {
    let mut loaded = Loaded {
        origin: origin.to_string(),
        text: text.to_string(),
        documents: Vec::new(),
        number_keys: Vec::new(),
        null_spellings: Vec::new(),
    };
    let documents = yaml::parse_patches(text).map_err(|error| KustomizeError::Patch {
        file: file.to_path_buf(),
        patch: origin.to_string(),
        message: error.to_string(),
    })?;
    for document in documents.into_iter().filter(|d| !d.value.is_null()) {
        loaded.documents.push(document.value);
        loaded.number_keys.push(document.number_keys);
        loaded.null_spellings.push(document.null_spellings);
    }
    Ok(loaded)
}

fn patch_error(file: &Path, origin: &str, message: impl Into<String>) -> KustomizeError {
    KustomizeError::Patch {
        file: file.to_path_buf(),
        patch: origin.to_string(),
        message: message.into(),
    }
}

/// `patchesStrategicMerge`: each document patches the resource with its identity.
pub fn apply_strategic_merge_files(
    entries: &[String],
    loader: &Loader,
    file: &Path,
    acc: &mut Accumulated,
) -> Result<(), KustomizeError> {
    let loaded = entries
        .iter()
        .map(|entry| load_entry(entry, loader, file))
        .collect::<Result<Vec<_>, _>>()?;
    // Unlike `patches:`, kustomize refuses `patchesStrategicMerge` files with nothing in them.
    if !loaded.is_empty() && loaded.iter().all(|l| l.documents.is_empty()) {
        return Err(patch_error(
            file,
            &entries.join(", "),
            "patch appears to be empty",
        ));
    }
    apply_each_by_identity(&loaded, file, acc)
}

/// The PatchStrategicMergeTransformer: `paths` (each a file, or the patch itself) and
/// `patches` (patch content), every document applied to the resource with its identity.
pub fn apply_strategic_merge_config(
    paths: &[String],
    content: &str,
    loader: &Loader,
    file: &Path,
    acc: &mut Accumulated,
) -> Result<(), KustomizeError> {
    if paths.is_empty() && content.is_empty() {
        return Err(patch_error(
            file,
            "PatchStrategicMergeTransformer",
            "empty file path and empty patch content",
        ));
    }
    let mut loaded = paths
        .iter()
        .map(|entry| load_entry(entry, loader, file))
        .collect::<Result<Vec<_>, _>>()?;
    if !content.is_empty() {
        let inline = parse(content, "patches", file)?;
        if inline.documents.iter().any(|d| !d.is_object()) {
            return Err(patch_error(file, "patches", "missing Resource metadata"));
        }
        loaded.push(inline);
    }
    if loaded.iter().all(|l| l.documents.is_empty()) {
        return Err(patch_error(
            file,
            "PatchStrategicMergeTransformer",
            "patch appears to be empty",
        ));
    }
    apply_each_by_identity(&loaded, file, acc)
}

/// How a strategic merge patch meets a resource: whether it may rename it or change its kind,
/// and whether kustomize applies a copy of it ([`patch_copy`]: for a target and for
/// `patchesStrategicMerge`), which takes the resource's apiVersion.
#[derive(Clone, Copy, Default)]
struct SmpMode {
    allow_name_change: bool,
    allow_kind_change: bool,
    copied: bool,
}

/// Applies a copy ([`patch_copy`]) of every document of `loaded` to the resource with its
/// identity, names and kinds kept (`patchesStrategicMerge`, the
/// PatchStrategicMergeTransformer).
fn apply_each_by_identity(
    loaded: &[Loaded],
    file: &Path,
    acc: &mut Accumulated,
) -> Result<(), KustomizeError> {
    for loaded in loaded {
        for (position, document) in loaded.documents.iter().enumerate() {
            let copy = patch_copy(document, loaded, position);
            let mode = SmpMode {
                copied: true,
                ..SmpMode::default()
            };
            apply_by_identity(
                (&copy, loaded.number_keys_of(position)),
                mode,
                &loaded.origin,
                file,
                acc,
            )?;
        }
    }
    Ok(())
}

/// Applies a strategic merge patch to the one resource whose identity it carries.
fn apply_by_identity(
    (patch, number_keys): (&Value, &[String]),
    mode: SmpMode,
    origin: &str,
    file: &Path,
    acc: &mut Accumulated,
) -> Result<(), KustomizeError> {
    if !patch.is_object() {
        return Err(patch_error(
            file,
            origin,
            "a strategic merge patch must be a mapping",
        ));
    }
    let id = ResId::of(patch);
    let matches: Vec<usize> = acc
        .resources
        .iter()
        .enumerate()
        .filter(|(_, r)| matches_identity(r, &id))
        .map(|(i, _)| i)
        .collect();
    let index = match matches.as_slice() {
        [one] => *one,
        [] => {
            return Err(patch_error(
                file,
                origin,
                format!("no matches for Id {id}; failed to find unique target for patch"),
            ));
        }
        _ => {
            return Err(patch_error(
                file,
                origin,
                format!("multiple matches for Id {id}; failed to find unique target for patch"),
            ));
        }
    };
    apply_smp_to(acc, index, (patch, number_keys), mode, (file, origin))
}

/// Same group, kind, name and namespace as `id`, now or before a rename.
fn matches_identity(resource: &Resource, id: &ResId) -> bool {
    // Group and version must match exactly, as in kustomize: a patch for `apps/v1beta1`
    // does not patch an `apps/v1` object.
    let same = |other: &ResId| {
        other.kind == id.kind
            && other.name == id.name
            && other.group == id.group
            && other.version == id.version
            && super::resource::namespaces_equal(&other.namespace, &id.namespace)
    };
    same(&resource.id()) || resource.previous_ids.iter().any(same)
}

/// Whether a document can be a strategic merge patch: kustomize reads one as an object, with
/// a kind and a name (a List needs none), even where a target selects what it patches.
fn is_patch_object(document: &Value) -> bool {
    document.is_object() && super::resource::missing_identity(document).is_none()
}

/// Whether a mapping on the way to `pointer` in a strategic merge patch replaces its
/// counterpart (`$patch: replace`): the key there is then the patch's own, however the
/// object wrote it.
fn under_replaced_map(patch: &Value, pointer: &str) -> bool {
    let replaces = |at: &str| {
        patch
            .pointer(at)
            .and_then(|map| map.get("$patch"))
            .and_then(Value::as_str)
            == Some("replace")
    };
    let mut prefix = String::new();
    let steps: Vec<&str> = pointer.split('/').skip(1).collect();
    replaces("")
        || steps[..steps.len().saturating_sub(1)].iter().any(|step| {
            prefix.push('/');
            prefix.push_str(step);
            replaces(&prefix)
        })
}

/// Applies a strategic merge patch to `acc.resources[index]`, removing the resource on
/// `$patch: delete` and remembering its identity when the patch renames it.
fn apply_smp_to(
    acc: &mut Accumulated,
    index: usize,
    (patch, number_keys): (&Value, &[String]),
    mode: SmpMode,
    (file, origin): (&Path, &str),
) -> Result<(), KustomizeError> {
    let SmpMode {
        allow_name_change,
        allow_kind_change,
        copied,
    } = mode;
    let resource = &mut acc.resources[index];
    let before = resource.id();
    let mut patch = patch.clone();
    if let Some(map) = patch.as_object_mut() {
        let api_version =
            super::resource::str_at(&acc.resources[index].object, "/apiVersion").to_string();
        if map
            .get("kind")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            map.insert("kind".into(), Value::String(before.kind.clone()));
            map.insert("apiVersion".into(), Value::String(api_version));
        } else if !allow_kind_change || copied {
            // The patch keeps its kind for the merge, which finds the schema by it (a
            // Deployment patch merges containers by name in a custom kind, as in kustomize);
            // the resource's kind is put back afterwards unless the patch may change it.
            map.insert("apiVersion".into(), Value::String(api_version));
        }
        if !allow_name_change
            || patch
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
        {
            super::resource::metadata_mut(&mut patch)
                .insert("name".into(), Value::String(before.name.clone()));
        }
        // The patch's namespace never moves the resource.
        super::resource::metadata_mut(&mut patch).remove("namespace");
    }
    let schema = super::openapi::SchemaView {
        custom: acc.custom_schema.as_ref(),
        replaces_builtin: acc.custom_replaces_builtin,
    };
    acc.resources[index].drop_empty_values();
    // A key the patch wrote as a number merges onto the object's key of that text; one that
    // would be added is refused, as kustomize's build refuses it (a number cannot be a JSON
    // key).
    let added_number_keys: Vec<&String> = number_keys
        .iter()
        .filter(|pointer| {
            acc.resources[index].object.pointer(pointer).is_none()
                || under_replaced_map(&patch, pointer)
        })
        .collect();
    let shared = acc.resources[index]
        .aliases
        .before_write(&acc.resources[index].object);
    let resource = &mut acc.resources[index];
    let name_before = resource.object.pointer("/metadata/name").cloned();
    let outcome = smp::apply(&mut resource.object, &patch, schema, &mut resource.untagged)
        .map_err(|e| patch_error(file, origin, format!("{before}: {e}")))?;
    if outcome == Outcome::Patched
        && let Some(pointer) = added_number_keys
            .iter()
            .find(|pointer| acc.resources[index].object.pointer(pointer).is_some())
    {
        let key = pointer.rsplit('/').next().unwrap_or("");
        let key = key.replace("~1", "/").replace("~0", "~");
        return Err(patch_error(
            file,
            origin,
            format!(
                "unsupported type: mapping key {key} is not a string, and {before} has no key \"{key}\" for it to patch, or the patch replaces the mapping holding it (quote it)"
            ),
        ));
    }
    match outcome {
        Outcome::Deleted => {
            acc.resources.remove(index);
        }
        Outcome::Patched => {
            let resource = &mut acc.resources[index];
            // Only a resource with shared fields needs to know what the patch replaced.
            let renewed = if shared.is_empty() {
                Vec::new()
            } else {
                super::aliases::replaced_maps(&patch)
            };
            resource
                .aliases
                .after_write(&mut resource.object, shared, &renewed);
            if !allow_kind_change && let Some(map) = resource.object.as_object_mut() {
                map.insert("kind".into(), Value::String(before.kind.clone()));
            }
            // kustomize sets the name (unless the patch may change it) and the namespace back
            // after the merge, with no tag, in the style the object's own had (the merge
            // keeps the object's node style), so a name a JSON patch made 3 stays the number.
            let mut set_back = vec!["namespace"];
            if !allow_name_change {
                if let Some(name) = name_before {
                    super::resource::metadata_mut(&mut resource.object).insert("name".into(), name);
                }
                set_back.push("name");
            }
            for field in set_back {
                if let Some(value) = resource.object.get("metadata").and_then(|m| m.get(field)) {
                    let value = value.clone();
                    resource
                        .untagged
                        .wrote(super::untagged::metadata_field(field), &value);
                }
            }
            if resource.id() != before && resource.previous_ids.last() != Some(&before) {
                resource.previous_ids.push(before);
            }
        }
    }
    Ok(())
}

/// `patches`: strategic merge or JSON 6902 patches for a target set.
pub fn apply_patches(
    entries: &[Patch],
    loader: &Loader,
    file: &Path,
    acc: &mut Accumulated,
) -> Result<(), KustomizeError> {
    for entry in entries {
        let loaded = load_patch(entry, loader, file)?;
        let mode = SmpMode {
            allow_name_change: entry.options.allow_name_change,
            allow_kind_change: entry.options.allow_kind_change,
            copied: false,
        };
        // kustomize reads a text whose first document is a list as a JSON patch (its other
        // documents ignored), one whose documents are all objects as strategic merge patches.
        let is_json6902 = matches!(loaded.documents.first(), Some(Value::Array(_)));
        if !is_json6902 && loaded.documents.iter().any(|d| !is_patch_object(d)) {
            return Err(patch_error(
                file,
                &loaded.origin,
                format!(
                    "unable to parse SM or JSON patch from {}",
                    if entry.path.is_empty() {
                        "the inline patch".to_string()
                    } else {
                        format!("[path: {:?}]", entry.path)
                    }
                ),
            ));
        }
        match (&entry.target, is_json6902) {
            (None, true) => {
                return Err(patch_error(
                    file,
                    &loaded.origin,
                    "must specify a target for JSON patch",
                ));
            }
            (None, false) => {
                for (position, document) in loaded.documents.iter().enumerate() {
                    apply_by_identity(
                        (document, loaded.number_keys_of(position)),
                        mode,
                        &loaded.origin,
                        file,
                        acc,
                    )?;
                }
            }
            (Some(target), true) => {
                let patch = json6902_patch(&loaded.text, &loaded.origin, file)?;
                apply_json6902_to_selection(&patch, target, (&loaded.origin, file), true, acc)?;
            }
            (Some(_), false) if loaded.documents.is_empty() => {}
            (Some(target), false) => {
                let [document] = loaded.documents.as_slice() else {
                    return Err(patch_error(
                        file,
                        &loaded.origin,
                        "Multiple Strategic-Merge Patches in one `patches` entry is not allowed to set `patches.target` field",
                    ));
                };
                let selected = select(target, acc, file, &loaded.origin)?;
                let copy = patch_copy(document, &loaded, 0);
                let mode = SmpMode {
                    copied: true,
                    ..mode
                };
                // Indexes shift when a patch deletes a resource; walk from the end.
                for &index in selected.iter().rev() {
                    apply_smp_to(
                        acc,
                        index,
                        (&copy, loaded.number_keys_of(0)),
                        mode,
                        (file, &loaded.origin),
                    )?;
                }
            }
        }
    }
    Ok(())
}

/// The strategic merge patch kustomize applies for a target or for `patchesStrategicMerge`:
/// a copy whose labels and annotations it has read back as text
/// (`CopyMergeMetaDataFieldsFrom`), so each value is a string (a null its spelling: `tier:
/// null` sets the label to "null" where a `patches` entry without a target removes it; a
/// number or a boolean its text; a mapping or a list "") and a field that is empty or not a
/// mapping is gone. Keys keep their spelling (one written as a number is still refused where
/// it would be added). `position` is the document's in `loaded`.
fn patch_copy(document: &Value, loaded: &Loaded, position: usize) -> Value {
    let null_spellings = loaded
        .null_spellings
        .get(position)
        .map_or(&[][..], Vec::as_slice);
    let mut copy = document.clone();
    let Some(Value::Object(metadata)) = copy.get_mut("metadata") else {
        return copy;
    };
    for field in ["labels", "annotations"] {
        let Some(current) = metadata.remove(field) else {
            continue;
        };
        let entries: Vec<(String, Value)> = match current {
            Value::Object(entries) => entries.into_iter().collect(),
            // kyaml reads a list's items in pairs, as keys and values (a last item without a
            // partner is left out, where kustomize panics).
            Value::Array(items) => items
                .chunks_exact(2)
                .map(|pair| (super::replacements::kyaml_text(&pair[0]), pair[1].clone()))
                .collect(),
            _ => continue,
        };
        if entries.is_empty() {
            continue;
        }
        let texts = entries
            .into_iter()
            .map(|(key, value)| {
                let text = match value {
                    Value::Null => {
                        let pointer = format!("/metadata/{field}/{}", yaml::escape_pointer(&key));
                        null_spellings
                            .iter()
                            .find(|(at, _)| *at == pointer)
                            .map_or_else(|| "null".to_string(), |(_, text)| text.clone())
                    }
                    other => super::replacements::kyaml_text(&other),
                };
                (key, Value::String(text))
            })
            .collect();
        metadata.insert(field.into(), Value::Object(texts));
    }
    copy
}

fn load_patch(entry: &Patch, loader: &Loader, file: &Path) -> Result<Loaded, KustomizeError> {
    let (origin, text) = read_patch(entry, loader, file)?;
    parse(&text, &origin, file)
}

/// Where a `patches` or `patchesJson6902` entry's patch comes from, and its text.
fn read_patch(
    entry: &Patch,
    loader: &Loader,
    file: &Path,
) -> Result<(String, String), KustomizeError> {
    match (entry.path.is_empty(), entry.patch.trim().is_empty()) {
        (false, true) => {
            let (path, text) = loader.read_text(&entry.path)?;
            Ok((loader.relative(&path).display().to_string(), text))
        }
        (true, false) => Ok(("inline patch".to_string(), entry.patch.clone())),
        (false, false) => Err(patch_error(
            file,
            &entry.path,
            "patch and path can't be set at the same time",
        )),
        (true, true) => Err(patch_error(
            file,
            "patch",
            "must specify one of patch and path in the entry",
        )),
    }
}

fn select(
    target: &Selector,
    acc: &Accumulated,
    file: &Path,
    origin: &str,
) -> Result<Vec<usize>, KustomizeError> {
    let compiled =
        CompiledSelector::new(target).map_err(|e| patch_error(file, origin, e.to_string()))?;
    Ok(acc
        .resources
        .iter()
        .enumerate()
        .filter(|(_, r)| compiled.matches(r))
        .map(|(i, _)| i)
        .collect())
}

/// `patchesJson6902`: JSON 6902 patches for a target.
pub fn apply_json6902(
    entries: &[Patch],
    loader: &Loader,
    file: &Path,
    acc: &mut Accumulated,
) -> Result<(), KustomizeError> {
    for entry in entries {
        let named = if entry.path.is_empty() {
            "patchesJson6902"
        } else {
            entry.path.as_str()
        };
        let refuse = |message: &str| Err(patch_error(file, named, message));
        let target = match &entry.target {
            None => return refuse("must specify a target for patch"),
            Some(target) if target.name.is_empty() => {
                return refuse("must specify the target name");
            }
            Some(target) => target,
        };
        match (entry.path.is_empty(), entry.patch.is_empty()) {
            (true, true) => return refuse("empty file path and empty jsonOp"),
            (false, false) => return refuse("must specify a file path or jsonOp, not both"),
            _ => {}
        }
        let (origin, text) = read_patch(entry, loader, file)?;
        if text.is_empty() {
            return Err(patch_error(file, &origin, "the patch file is empty"));
        }
        // Unlike `patches`, this transformer reads its operations when configured.
        let patch = json6902_patch(&text, &origin, file)?;
        if patch.is_empty() {
            return Err(patch_error(file, &origin, "patch appears to be empty"));
        }
        apply_json6902_to_selection(&patch, target, (&origin, file), false, acc)?;
    }
    Ok(())
}

/// A JSON 6902 patch read as kustomize reads one: a text starting with `[` as JSON, any
/// other as YAML 1.1 (sigs.k8s.io/yaml: `value: y` is true, `0755` is 493), first document.
fn json6902_patch(text: &str, origin: &str, file: &Path) -> Result<JsonPatch, KustomizeError> {
    let invalid =
        |message: String| patch_error(file, origin, format!("invalid JSON 6902 patch: {message}"));
    let document = if text.starts_with('[') {
        serde_json::from_str::<JsonValue>(text).map_err(|e| invalid(e.to_string()))?
    } else {
        let documents = yaml::parse_documents(text, yaml::Schema::Kubernetes)
            .map_err(|e| invalid(e.to_string()))?;
        JsonValue::from(documents.into_iter().next().unwrap_or(Value::Null))
    };
    JsonPatch::decode(document).map_err(|e| invalid(format!("decoding {}: {e}", text.trim())))
}

/// Applies a JSON patch to the resource as kustomize holds it: with its bookkeeping in
/// annotations (so a patch adding `/metadata/annotations/x` finds the map even on an object
/// that has none, and removing `/metadata/annotations` succeeds), and with every annotation
/// read back as text afterwards, as kustomize reads them (a number as Go prints a float64,
/// null as "null", a mapping or a list as ""). The bookkeeping itself stays in our fields.
fn apply_as_kustomize_holds(
    resource: &mut Resource,
    patch: &JsonPatch,
    bookkeeping: &[(&'static str, String)],
) -> Result<(), super::json6902::OperationError> {
    let mut object = JsonValue::from(resource.object.take());
    resource.aliases.clear();
    resource.untagged.clear();
    if !bookkeeping.is_empty()
        && let Some(JsonValue::Object(metadata)) = object.get_mut("metadata")
    {
        let annotations = metadata
            .entry("annotations")
            .and_modify(|a| {
                if a.is_null() {
                    *a = JsonValue::Object(Default::default());
                }
            })
            .or_insert_with(|| JsonValue::Object(Default::default()));
        if let JsonValue::Object(annotations) = annotations {
            for (key, value) in bookkeeping {
                annotations.insert(key.to_string(), JsonValue::String(value.clone()));
            }
        }
    }
    let applied = patch.apply(&mut object, super::MAX_OBJECT_BYTES);
    round_large_integers(&mut object);
    // kyaml reads annotations the patch made a list as a mapping of its items in pairs
    // (`[a, b]` is `a: b`; a last item without a partner is left out, where kustomize
    // panics), and anything else that is not a mapping as none.
    if let Some(JsonValue::Object(metadata)) = object.get_mut("metadata") {
        if let Some(JsonValue::Array(items)) = metadata.get_mut("annotations") {
            let pairs = std::mem::take(items)
                .chunks_exact(2)
                .map(|pair| (annotation_text(&pair[0]), pair[1].clone()))
                .collect();
            metadata.insert("annotations".into(), JsonValue::Object(pairs));
        } else if metadata
            .get("annotations")
            .is_some_and(|annotations| !annotations.is_object())
        {
            metadata.remove("annotations");
        }
    }
    if let Some(JsonValue::Object(metadata)) = object.get_mut("metadata")
        && let Some(JsonValue::Object(annotations)) = metadata.get_mut("annotations")
    {
        for (key, _) in bookkeeping {
            annotations.remove(*key);
        }
        for value in annotations.values_mut() {
            *value = JsonValue::String(annotation_text(value));
        }
        if annotations.is_empty() {
            metadata.remove("annotations");
        }
    }
    resource.object = Value::from(object);
    applied
}

/// kustomize reads a patched object back with every number a Go float64, so an integer
/// beyond 2^53 loses its low digits (12345678901234567890 comes out 12345678901234567000).
fn round_large_integers(value: &mut JsonValue) {
    const EXACT: u64 = 1 << 53;
    match value {
        JsonValue::Number(number)
            if number.as_u64().is_some_and(|n| n > EXACT)
                || number.as_i64().is_some_and(|n| n.unsigned_abs() > EXACT) =>
        {
            if let Some(rounded) = number.as_f64().and_then(serde_json::Number::from_f64) {
                *number = rounded;
            }
        }
        JsonValue::Object(members) => members.values_mut().for_each(round_large_integers),
        JsonValue::Array(elements) => elements.iter_mut().for_each(round_large_integers),
        _ => {}
    }
}

/// An annotation's text as kustomize reads it after a JSON patch, whose numbers come back
/// as Go float64s.
fn annotation_text(value: &JsonValue) -> String {
    match value {
        JsonValue::String(text) => text.clone(),
        JsonValue::Number(number) => go_std::format_float_g(number.as_f64().unwrap_or(0.0)),
        JsonValue::Bool(flag) => flag.to_string(),
        JsonValue::Null => "null".to_string(),
        JsonValue::Object(_) | JsonValue::Array(_) => String::new(),
    }
}

/// `stores_current_id`: the `patches` transformer records each selected resource's identity
/// in its bookkeeping annotations before patching it; `patchesJson6902` does not.
fn apply_json6902_to_selection(
    patch: &JsonPatch,
    target: &Selector,
    (origin, file): (&str, &Path),
    stores_current_id: bool,
    acc: &mut Accumulated,
) -> Result<(), KustomizeError> {
    let schema = super::openapi::SchemaView {
        custom: acc.custom_schema.as_ref(),
        replaces_builtin: acc.custom_replaces_builtin,
    };
    for index in select(target, acc, file, origin)? {
        let resource = &mut acc.resources[index];
        let before = resource.id();
        let cluster_scoped = schema.is_cluster_scoped(
            resource
                .object
                .get("apiVersion")
                .and_then(Value::as_str)
                .unwrap_or(""),
            &before.kind,
        );
        let bookkeeping = resource.build_annotations(stores_current_id, cluster_scoped);
        apply_as_kustomize_holds(resource, patch, &bookkeeping).map_err(|message| {
            patch_error(file, origin, format!("applying to {before}: {message}"))
        })?;
        let missing = if resource.object.is_object() {
            super::resource::missing_identity(&resource.object)
        } else {
            Some("no object")
        };
        if let Some(missing) = missing {
            return Err(patch_error(
                file,
                origin,
                format!("applying to {before}: the patch leaves {missing}"),
            ));
        }
        if resource.id() != before && resource.previous_ids.last() != Some(&before) {
            resource.previous_ids.push(before);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::kustomize::{self, BuildOptions};

    /// A deliberate difference (README): an annotation key that reads as a number stays a
    /// string, where kustomize writes it unquoted after a JSON patch and fails the build.
    #[test]
    fn a_numeric_annotation_key_a_json_patch_adds_stays_a_string() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("kustomization.yaml"),
            "resources: [cm.yaml]\npatches:\n- target: {kind: ConfigMap}\n  patch: '[{\"op\": \"add\", \"path\": \"/metadata/annotations/8080\", \"value\": \"http\"}]'\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("cm.yaml"),
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n",
        )
        .unwrap();
        let objects = kustomize::build_dir(dir.path(), &BuildOptions::default()).unwrap();
        assert_eq!(
            kustomize::to_yaml(&objects),
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  annotations:\n    \"8080\": http\n  name: settings\n"
        );
    }
}
