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
use super::kustfile::{Patch, Selector};
use super::loader::{Loader, Target};
use super::resource::{ResId, Resource};
use super::selector::CompiledSelector;
use super::smp::{self, Outcome};
use super::target::Accumulated;
use crate::yaml;

/// A loaded patch: where it came from (for messages) and its documents, with the pointers of
/// the keys each wrote as numbers or booleans (`yaml::parse_patches`).
struct Loaded {
    origin: String,
    documents: Vec<Value>,
    number_keys: Vec<Vec<String>>,
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
    let (documents, number_keys) = yaml::parse_patches(text)
        .map_err(|error| KustomizeError::Patch {
            file: file.to_path_buf(),
            patch: origin.to_string(),
            message: error.to_string(),
        })?
        .into_iter()
        .filter(|d| !d.value.is_null())
        .map(|d| (d.value, d.number_keys))
        .unzip();
    Ok(Loaded {
        origin: origin.to_string(),
        documents,
        number_keys,
    })
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

/// Applies every document of `loaded` to the resource with its identity, names and kinds
/// kept (`patchesStrategicMerge`, the PatchStrategicMergeTransformer).
fn apply_each_by_identity(
    loaded: &[Loaded],
    file: &Path,
    acc: &mut Accumulated,
) -> Result<(), KustomizeError> {
    for loaded in loaded {
        for (position, document) in loaded.documents.iter().enumerate() {
            let number_keys = loaded.number_keys_of(position);
            apply_by_identity(
                (document, number_keys),
                (false, false),
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
    (allow_name_change, allow_kind_change): (bool, bool),
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
    apply_smp_to(
        acc,
        index,
        (patch, number_keys),
        (allow_name_change, allow_kind_change),
        (file, origin),
    )
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

/// Applies a strategic merge patch to `acc.resources[index]`, removing the resource on
/// `$patch: delete` and remembering its identity when the patch renames it.
fn apply_smp_to(
    acc: &mut Accumulated,
    index: usize,
    (patch, number_keys): (&Value, &[String]),
    (allow_name_change, allow_kind_change): (bool, bool),
    (file, origin): (&Path, &str),
) -> Result<(), KustomizeError> {
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
        } else if !allow_kind_change {
            // The patch keeps its kind for the merge, which finds the schema by it (a
            // Deployment patch merges containers by name in a custom kind, as in kustomize);
            // the resource's kind is put back afterwards.
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
        .filter(|pointer| acc.resources[index].object.pointer(pointer).is_none())
        .collect();
    let outcome = smp::apply(&mut acc.resources[index].object, &patch, schema)
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
                "unsupported type: mapping key {key} is not a string, and {before} has no key \"{key}\" for it to patch (quote it)"
            ),
        ));
    }
    match outcome {
        Outcome::Deleted => {
            acc.resources.remove(index);
        }
        Outcome::Patched => {
            let resource = &mut acc.resources[index];
            if !allow_kind_change && let Some(map) = resource.object.as_object_mut() {
                map.insert("kind".into(), Value::String(before.kind.clone()));
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
        let allow_name_change = entry.options.allow_name_change;
        let allow_kind_change = entry.options.allow_kind_change;
        // kustomize reads a text whose first document is a list as a JSON patch (its other
        // documents ignored), one whose documents are all objects as strategic merge patches.
        let is_json6902 = matches!(loaded.documents.first(), Some(Value::Array(_)));
        if !is_json6902 && loaded.documents.iter().any(|d| !d.is_object()) {
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
                        (allow_name_change, allow_kind_change),
                        &loaded.origin,
                        file,
                        acc,
                    )?;
                }
            }
            (Some(target), true) => apply_json6902_to_selection(
                &loaded.documents[0],
                target,
                &loaded.origin,
                file,
                acc,
            )?,
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
                // Indexes shift when a patch deletes a resource; walk from the end.
                for &index in selected.iter().rev() {
                    apply_smp_to(
                        acc,
                        index,
                        (document, loaded.number_keys_of(0)),
                        (allow_name_change, allow_kind_change),
                        (file, &loaded.origin),
                    )?;
                }
            }
        }
    }
    Ok(())
}

fn load_patch(entry: &Patch, loader: &Loader, file: &Path) -> Result<Loaded, KustomizeError> {
    match (entry.path.is_empty(), entry.patch.trim().is_empty()) {
        (false, true) => {
            let (path, text) = loader.read_text(&entry.path)?;
            parse(&text, &loader.relative(&path).display().to_string(), file)
        }
        (true, false) => parse(&entry.patch, "inline patch", file),
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

/// Why a JSON 6902 operation could not be applied.
#[derive(Debug, thiserror::Error)]
enum OperationError {
    #[error("testing value {path} failed: test failed")]
    TestFailed { path: String },
    #[error(transparent)]
    Patch(#[from] json_patch::PatchError),
    #[error("index {index} is out of range for {parent} ({len} elements)")]
    IndexOutOfRange {
        index: i64,
        parent: String,
        len: usize,
    },
    #[error("{0}")]
    Pointer(#[from] json_patch::jsonptr::ParseError),
    #[error("the patched object grows past {} MiB", super::MAX_OBJECT_BYTES >> 20)]
    TooLarge,
}

/// Applies JSON 6902 operations one by one with kustomize's leniency: `replace` of a missing
/// member adds it. The `json_patch` crate works on serde_json values.
fn apply_operations(object: &mut Value, patch: &json_patch::Patch) -> Result<(), OperationError> {
    let mut json = JsonValue::from(object.take());
    let result = apply_json_operations(&mut json, patch);
    *object = Value::from(json);
    result
}

fn apply_json_operations(
    object: &mut JsonValue,
    patch: &json_patch::Patch,
) -> Result<(), OperationError> {
    use json_patch::PatchOperation;
    for operation in &patch.0 {
        let mut operation = operation.clone();
        resolve_negative_index(object, &mut operation)?;
        let operation = match operation {
            // `replace` of a missing member of a map adds it; a missing list index stays an
            // error.
            PatchOperation::Replace(replace)
                if object.pointer(replace.path.as_str()).is_none()
                    && parent_of(object, replace.path.as_str())
                        .is_some_and(JsonValue::is_object) =>
            {
                PatchOperation::Add(json_patch::AddOperation {
                    path: replace.path.clone(),
                    value: replace.value.clone(),
                })
            }
            // kustomize's JSON patch library treats a missing member as null for `test`.
            PatchOperation::Test(test)
                if test.value.is_null()
                    && object.pointer(test.path.as_str()).is_none()
                    && parent_of(object, test.path.as_str()).is_some() =>
            {
                continue;
            }
            other => other,
        };
        json_patch::patch(object, std::slice::from_ref(&operation)).map_err(|e| {
            match (&operation, &e.kind) {
                (PatchOperation::Test(test), json_patch::PatchErrorKind::TestFailed) => {
                    OperationError::TestFailed {
                        path: test.path.to_string(),
                    }
                }
                _ => OperationError::Patch(e),
            }
        })?;
        // `copy` and `add` can double an object with every operation.
        if matches!(operation, PatchOperation::Copy(_) | PatchOperation::Add(_))
            && exceeds_bytes(object, super::MAX_OBJECT_BYTES)
        {
            return Err(OperationError::TooLarge);
        }
    }
    Ok(())
}

/// Whether `value` takes more than `limit` bytes written as JSON (about: punctuation is
/// counted a byte per value and key). Stops counting at the limit.
fn exceeds_bytes(value: &JsonValue, limit: usize) -> bool {
    let mut total = 0usize;
    let mut pending = vec![value];
    while let Some(value) = pending.pop() {
        total += match value {
            JsonValue::String(text) => text.len() + 2,
            JsonValue::Object(map) => {
                pending.extend(map.values());
                map.keys().map(|k| k.len() + 4).sum::<usize>() + 2
            }
            JsonValue::Array(items) => {
                pending.extend(items);
                2 + items.len()
            }
            _ => 8,
        };
        if total > limit {
            return true;
        }
    }
    false
}

/// The value holding the last token of `pointer`.
fn parent_of<'v>(object: &'v JsonValue, pointer: &str) -> Option<&'v JsonValue> {
    let (parent, _) = pointer.rsplit_once('/')?;
    object.pointer(parent)
}

/// kustomize counts negative list indices from the end: `-1` is the last element for
/// `replace`, `remove` and `test`, and the end of the list for `add`.
fn resolve_negative_index(
    object: &JsonValue,
    operation: &mut json_patch::PatchOperation,
) -> Result<(), OperationError> {
    use json_patch::PatchOperation;
    let (path, extra) = match operation {
        PatchOperation::Add(op) => (&mut op.path, 1),
        PatchOperation::Replace(op) => (&mut op.path, 0),
        PatchOperation::Remove(op) => (&mut op.path, 0),
        PatchOperation::Test(op) => (&mut op.path, 0),
        _ => return Ok(()),
    };
    let text = path.as_str().to_string();
    let Some((parent, last)) = text.rsplit_once('/') else {
        return Ok(());
    };
    let Ok(index) = last.parse::<i64>() else {
        return Ok(());
    };
    if index >= 0 {
        return Ok(());
    }
    let Some(JsonValue::Array(items)) = object.pointer(parent) else {
        return Ok(());
    };
    let resolved = items.len() as i64 + index + extra;
    if resolved < 0 {
        return Err(OperationError::IndexOutOfRange {
            index,
            parent: parent.to_string(),
            len: items.len(),
        });
    }
    *path = format!("{parent}/{resolved}").parse()?;
    Ok(())
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
        let loaded = load_patch(entry, loader, file)?;
        let [operations] = loaded.documents.as_slice() else {
            return Err(patch_error(
                file,
                &loaded.origin,
                "a JSON 6902 patch is one list of operations",
            ));
        };
        apply_json6902_to_selection(operations, target, &loaded.origin, file, acc)?;
    }
    Ok(())
}

fn apply_json6902_to_selection(
    operations: &Value,
    target: &Selector,
    origin: &str,
    file: &Path,
    acc: &mut Accumulated,
) -> Result<(), KustomizeError> {
    let patch: json_patch::Patch = serde_json::from_value(serde_json::Value::from(operations))
        .map_err(|e| patch_error(file, origin, format!("invalid JSON 6902 patch: {e}")))?;
    for index in select(target, acc, file, origin)? {
        let resource = &mut acc.resources[index];
        let before = resource.id();
        apply_operations(&mut resource.object, &patch).map_err(|message| {
            patch_error(file, origin, format!("applying to {before}: {message}"))
        })?;
        let kind = resource
            .object
            .get("kind")
            .and_then(Value::as_str)
            .is_some_and(|k| !k.is_empty());
        let name = resource
            .object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .is_some_and(|n| !n.is_empty());
        if !resource.object.is_object() || !kind || !name {
            return Err(patch_error(
                file,
                origin,
                format!("applying to {before}: the patch leaves no object with a kind and a name"),
            ));
        }
        if resource.id() != before && resource.previous_ids.last() != Some(&before) {
            resource.previous_ids.push(before);
        }
    }
    Ok(())
}
