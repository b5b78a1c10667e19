//! The kustomization file: finding it in a directory and reading it into typed fields.
//!
//! Reading follows kustomize: YAML 1.1 scalars (sigs.k8s.io/yaml), unknown fields rejected,
//! an empty file rejected, and deprecated fields folded into their successors (`bases` into
//! `resources`, `imageTags` into `images`, a generator's single `env` into `envs`). Deprecated
//! fields with a pipeline step of their own (`patchesStrategicMerge`, `patchesJson6902`,
//! `commonLabels`, `vars`) stay as they are.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::value::Value;
use serde::Deserialize;

use super::KustomizeError;
use crate::yaml::{self, Schema};

/// The file names kustomize recognises, in its order of preference.
pub const KUSTOMIZATION_FILE_NAMES: [&str; 3] =
    ["kustomization.yaml", "kustomization.yml", "Kustomization"];

const KUSTOMIZATION_KIND: &str = "Kustomization";
const COMPONENT_KIND: &str = "Component";
const COMPONENT_API_VERSION: &str = "kustomize.config.k8s.io/v1alpha1";

/// A kustomization or component file, with deprecated fields already folded in.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Kustomization {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    /// Accepted as kustomize accepts it; nothing in a build depends on it.
    #[serde(default)]
    #[allow(dead_code)]
    pub metadata: Option<Value>,
    #[serde(default)]
    pub openapi: BTreeMap<String, String>,
    #[serde(default)]
    pub name_prefix: String,
    #[serde(default)]
    pub name_suffix: String,
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub common_labels: BTreeMap<String, String>,
    #[serde(default)]
    pub labels: Vec<Label>,
    #[serde(default)]
    pub common_annotations: BTreeMap<String, String>,
    #[serde(default)]
    pub patches_strategic_merge: Vec<String>,
    #[serde(default)]
    pub patches_json6902: Vec<Patch>,
    #[serde(default)]
    pub patches: Vec<Patch>,
    #[serde(default)]
    pub images: Vec<Image>,
    #[serde(default)]
    pub image_tags: Vec<Image>,
    #[serde(default)]
    pub replacements: Vec<ReplacementField>,
    #[serde(default)]
    pub replicas: Vec<Replica>,
    #[serde(default)]
    pub vars: Vec<Var>,
    #[serde(default)]
    pub sort_options: Option<SortOptions>,
    #[serde(default)]
    pub resources: Vec<String>,
    #[serde(default)]
    pub components: Vec<String>,
    #[serde(default)]
    pub crds: Vec<String>,
    #[serde(default)]
    pub bases: Vec<String>,
    #[serde(default)]
    pub config_map_generator: Vec<GeneratorArgs>,
    #[serde(default)]
    pub secret_generator: Vec<GeneratorArgs>,
    #[serde(default)]
    pub helm_globals: Option<Value>,
    #[serde(default)]
    pub helm_charts: Vec<Value>,
    #[serde(default)]
    pub helm_chart_inflation_generator: Vec<Value>,
    #[serde(default)]
    pub generator_options: Option<GeneratorOptions>,
    #[serde(default)]
    pub configurations: Vec<String>,
    #[serde(default)]
    pub generators: Vec<String>,
    #[serde(default)]
    pub transformers: Vec<String>,
    #[serde(default)]
    pub validators: Vec<String>,
    #[serde(default)]
    pub build_metadata: Vec<String>,
    /// kustomize v2.1's inventory directive (dropped upstream since; supported here).
    #[serde(default)]
    pub inventory: Option<super::inventory::InventoryConfig>,
}

impl Kustomization {
    pub fn is_component(&self) -> bool {
        self.kind == COMPONENT_KIND
    }
}

/// A `labels:` entry.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Label {
    #[serde(default)]
    pub pairs: BTreeMap<String, String>,
    #[serde(default)]
    pub include_selectors: bool,
    #[serde(default)]
    pub include_templates: bool,
    #[serde(default)]
    pub fields: Vec<FieldSpec>,
}

/// Where a transformer reads or writes: a slash-separated path in objects of a GVK.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FieldSpec {
    #[serde(default, deserialize_with = "super::fold::json_typed_string")]
    pub group: String,
    #[serde(default, deserialize_with = "super::fold::json_typed_string")]
    pub version: String,
    #[serde(default, deserialize_with = "super::fold::json_typed_string")]
    pub kind: String,
    #[serde(default)]
    pub path: String,
    #[serde(default)]
    pub create: bool,
}

/// A `patches:` (or `patchesJson6902:`) entry: a patch inline or in a file, for a target set.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Patch {
    #[serde(default)]
    pub path: String,
    #[serde(default)]
    pub patch: String,
    #[serde(default)]
    pub target: Option<Selector>,
    #[serde(default)]
    pub options: PatchOptions,
}

/// A patch's `options:`. Kustomize v5.8 reads them as typed fields (v5.5 took any map and
/// ignored unknown keys): in a kustomization other keys are refused, and like every field
/// they match in any letter case (see `fold`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PatchOptions {
    #[serde(default)]
    pub allow_name_change: bool,
    #[serde(default)]
    pub allow_kind_change: bool,
}

/// Selects resources by GVK, name and namespace (anchored regular expressions) and by label
/// and annotation selectors.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Selector {
    #[serde(default, deserialize_with = "super::fold::json_typed_string")]
    pub group: String,
    #[serde(default, deserialize_with = "super::fold::json_typed_string")]
    pub version: String,
    #[serde(default, deserialize_with = "super::fold::json_typed_string")]
    pub kind: String,
    #[serde(default, deserialize_with = "super::fold::json_typed_string")]
    pub name: String,
    #[serde(default, deserialize_with = "super::fold::json_typed_string")]
    pub namespace: String,
    #[serde(default)]
    pub label_selector: String,
    #[serde(default)]
    pub annotation_selector: String,
}

/// An `images:` entry.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Image {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub new_name: String,
    #[serde(default)]
    pub new_tag: String,
    #[serde(default)]
    pub tag_suffix: String,
    #[serde(default)]
    pub digest: String,
}

/// A `replacements:` entry: inline, or a file of replacements under `path`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplacementField {
    #[serde(default)]
    pub path: String,
    #[serde(default)]
    pub source: Option<ReplacementSource>,
    /// A literal value to copy instead of a source field (Kustomize v5.6+).
    #[serde(default, rename = "sourceValue")]
    pub source_value: Option<String>,
    #[serde(default)]
    pub targets: Vec<ReplacementTarget>,
}

/// Where a replacement copies from.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReplacementSource {
    #[serde(default, deserialize_with = "super::fold::json_typed_string")]
    pub group: String,
    #[serde(default, deserialize_with = "super::fold::json_typed_string")]
    pub version: String,
    #[serde(default, deserialize_with = "super::fold::json_typed_string")]
    pub kind: String,
    #[serde(default, deserialize_with = "super::fold::json_typed_string")]
    pub name: String,
    #[serde(default, deserialize_with = "super::fold::json_typed_string")]
    pub namespace: String,
    #[serde(default)]
    pub field_path: String,
    #[serde(default)]
    pub options: Option<FieldOptions>,
}

/// Where a replacement writes to.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReplacementTarget {
    #[serde(default)]
    pub select: Option<Selector>,
    #[serde(default)]
    pub reject: Vec<Selector>,
    #[serde(default, deserialize_with = "super::fold::json_typed_strings")]
    pub field_paths: Vec<String>,
    #[serde(default)]
    pub options: Option<FieldOptions>,
}

/// How a replacement reads or writes part of a delimited value.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FieldOptions {
    #[serde(default)]
    pub delimiter: String,
    #[serde(default)]
    pub index: i64,
    /// Accepted for compatibility; the engine does not use it.
    #[serde(default)]
    #[allow(dead_code)]
    pub encoding: String,
    #[serde(default)]
    pub create: bool,
}

/// A `replicas:` entry.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Replica {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub count: i64,
}

/// A `vars:` entry.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Var {
    pub name: String,
    pub objref: VarObjectRef,
    #[serde(default)]
    pub fieldref: Option<VarFieldRef>,
}

/// The object a var reads from.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VarObjectRef {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub namespace: String,
}

/// The field a var reads; `metadata.name` when absent.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VarFieldRef {
    #[serde(default)]
    pub field_path: String,
}

/// `sortOptions:`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SortOptions {
    #[serde(default)]
    pub order: String,
    #[serde(default)]
    pub legacy_sort_options: Option<LegacySortOptions>,
}

/// Custom first and last kinds for the legacy order.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LegacySortOptions {
    #[serde(default)]
    pub order_first: Vec<String>,
    #[serde(default)]
    pub order_last: Vec<String>,
}

/// A `configMapGenerator:` or `secretGenerator:` entry.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GeneratorArgs {
    #[serde(default, deserialize_with = "super::fold::go_zero")]
    pub namespace: String,
    #[serde(default, deserialize_with = "super::fold::go_zero")]
    pub name: String,
    #[serde(default, deserialize_with = "super::fold::go_zero")]
    pub behavior: String,
    #[serde(default, deserialize_with = "super::fold::go_zero")]
    pub literals: Vec<String>,
    #[serde(default, deserialize_with = "super::fold::go_zero")]
    pub files: Vec<String>,
    #[serde(default, deserialize_with = "super::fold::go_zero")]
    pub envs: Vec<String>,
    /// Deprecated single env file; folded into `envs`.
    #[serde(default, deserialize_with = "super::fold::go_zero")]
    pub env: String,
    #[serde(default, deserialize_with = "super::fold::go_zero")]
    pub options: Option<GeneratorOptions>,
    /// Secrets only.
    #[serde(default, rename = "type", deserialize_with = "super::fold::go_zero")]
    pub secret_type: String,
}

/// `generatorOptions:` and a generator's `options:`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GeneratorOptions {
    #[serde(default, deserialize_with = "super::fold::go_zero")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, deserialize_with = "super::fold::go_zero")]
    pub annotations: BTreeMap<String, String>,
    #[serde(default, deserialize_with = "super::fold::go_zero")]
    pub disable_name_suffix_hash: Option<bool>,
    #[serde(default, deserialize_with = "super::fold::go_zero")]
    pub immutable: bool,
}

/// The kustomization file of `dir`, or the reason there is none.
pub fn find(dir: &Path) -> Result<PathBuf, KustomizeError> {
    let present: Vec<_> = KUSTOMIZATION_FILE_NAMES
        .iter()
        .map(|n| dir.join(n))
        .filter(|p| p.is_file())
        .collect();
    match present.as_slice() {
        [] => Err(KustomizeError::MissingKustomization(dir.to_path_buf())),
        [one] => Ok(one.clone()),
        _ => Err(KustomizeError::MultipleKustomizations(dir.to_path_buf())),
    }
}

/// What reading a kustomization does with a field kustomize does not know.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UnknownFields {
    /// Refused, naming the field, as kustomize refuses it.
    #[default]
    Refuse,
    /// Dropped, at every level, as Go's non-strict decoding drops it (Flux's controller
    /// decodes the top kustomization so before it writes its overrides in).
    Drop,
}

/// Reads and checks the kustomization file of the loader's directory, through the loader so
/// that the file, like any other, stays inside the root and within the size limit.
pub fn load(
    loader: &super::loader::Loader,
    unknown: UnknownFields,
) -> Result<(PathBuf, Kustomization), KustomizeError> {
    let found = find(&loader.dir)?;
    let name = found
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (file, text) = loader.read_text(&name)?;
    let kustomization = parse_with(&text, &file, unknown)?;
    Ok((file, kustomization))
}

/// Parses kustomization text; `file` names it in errors.
pub fn parse(text: &str, file: &Path) -> Result<Kustomization, KustomizeError> {
    parse_with(text, file, UnknownFields::Refuse)
}

/// [`parse`], with unknown fields refused or dropped.
pub fn parse_with(
    text: &str,
    file: &Path,
    unknown: UnknownFields,
) -> Result<Kustomization, KustomizeError> {
    let drop_unknown = unknown == UnknownFields::Drop;
    let invalid = |message: String| KustomizeError::InvalidKustomization {
        file: file.to_path_buf(),
        message,
    };
    // kustomize reads only the first document of a kustomization file, and a key written
    // twice there takes its last value.
    let mut value = yaml::parse_documents_last_key_wins(text, Schema::Kubernetes)
        .map_err(|error| KustomizeError::Yaml {
            file: file.to_path_buf(),
            error,
        })?
        .into_iter()
        .next()
        .unwrap_or(Value::Null);
    // Keys name fields in any letter case, as kustomize's JSON decoding reads them; a field
    // written in two spellings takes the last, but Go decodes the other too.
    if let Value::Object(map) = value {
        for (field, shadowed) in super::fold::shadowed_values(&map, KNOWN_FIELDS) {
            let mut alone = crate::value::Map::new();
            alone.insert(field, shadowed);
            let mut alone = Value::Object(alone);
            empty_strings_for_nulls_in_string_maps(&mut alone);
            drop_nulls(&mut alone);
            serde_path_to_error::deserialize::<_, Kustomization>(super::fold::Folded::lenient(
                alone,
            ))
            .map_err(|e| invalid(describe(e)))?;
        }
        value = Value::Object(super::fold::fold_keys(map, KNOWN_FIELDS, drop_unknown));
    }
    // Go decodes a null value of a string map as "", and a null field as one left out.
    empty_strings_for_nulls_in_string_maps(&mut value);
    drop_nulls(&mut value);
    match &value {
        Value::Null => return Err(KustomizeError::EmptyKustomization(file.to_path_buf())),
        Value::Object(map) if map.is_empty() => {
            return Err(KustomizeError::EmptyKustomization(file.to_path_buf()));
        }
        Value::Object(map) => {
            if let Some(field) = map.keys().find(|k| !KNOWN_FIELDS.contains(&k.as_str())) {
                return Err(KustomizeError::UnknownField {
                    file: file.to_path_buf(),
                    field: field.clone(),
                });
            }
            // kustomize's CheckEmpty: apart from apiVersion, kind and metadata, nothing but
            // zero values (an empty list or map is not one).
            let zero = |value: &Value| match value {
                Value::String(text) => text.is_empty(),
                Value::Bool(flag) => !flag,
                Value::Number(number) => number.as_f64() == Some(0.0),
                _ => false,
            };
            if map
                .iter()
                .filter(|(key, _)| !matches!(key.as_str(), "apiVersion" | "kind" | "metadata"))
                .all(|(_, value)| zero(value))
            {
                return Err(KustomizeError::EmptyKustomization(file.to_path_buf()));
            }
        }
        _ => return Err(invalid("expected a mapping of kustomization fields".into())),
    }
    let folded = if drop_unknown {
        super::fold::Folded::lenient(value)
    } else {
        super::fold::Folded::strict(value)
    };
    let mut kustomization: Kustomization =
        serde_path_to_error::deserialize(folded).map_err(|e| invalid(describe(e)))?;
    check_kind(&kustomization, file)?;
    fold_deprecated(&mut kustomization);
    Ok(kustomization)
}

/// `field <path>: <what is wrong>` for a typed-decoding error.
pub fn describe(error: serde_path_to_error::Error<serde_json::Error>) -> String {
    let path = error.path().to_string();
    format!("field {path}: {}", error.into_inner())
}

/// Every top-level field kustomize v5.8.1 accepts; named here so that a misspelt field is
/// reported by name before any type error.
const KNOWN_FIELDS: &[&str] = &[
    "apiVersion",
    "kind",
    "metadata",
    "openapi",
    "namePrefix",
    "nameSuffix",
    "namespace",
    "commonLabels",
    "labels",
    "commonAnnotations",
    "patchesStrategicMerge",
    "patchesJson6902",
    "patches",
    "images",
    "imageTags",
    "replacements",
    "replicas",
    "vars",
    "sortOptions",
    "resources",
    "components",
    "crds",
    "bases",
    "configMapGenerator",
    "secretGenerator",
    "helmGlobals",
    "helmCharts",
    "helmChartInflationGenerator",
    "generatorOptions",
    "configurations",
    "generators",
    "transformers",
    "validators",
    "buildMetadata",
    "inventory",
];

/// The kustomization's string maps (labels, annotations): there a null value is "".
fn empty_strings_for_nulls_in_string_maps(value: &mut Value) {
    fn fill(map: Option<&mut Value>) {
        if let Some(Value::Object(map)) = map {
            for entry in map.values_mut().filter(|v| v.is_null()) {
                *entry = Value::String(String::new());
            }
        }
    }
    fn fill_options(options: Option<&mut Value>) {
        if let Some(options) = options {
            fill(options.get_mut("labels"));
            fill(options.get_mut("annotations"));
        }
    }
    let Value::Object(top) = value else {
        return;
    };
    fill(top.get_mut("commonLabels"));
    fill(top.get_mut("commonAnnotations"));
    fill_options(top.get_mut("metadata"));
    fill_options(top.get_mut("generatorOptions"));
    if let Some(Value::Array(labels)) = top.get_mut("labels") {
        labels
            .iter_mut()
            .for_each(|entry| fill(entry.get_mut("pairs")));
    }
    for generators in ["configMapGenerator", "secretGenerator"] {
        if let Some(Value::Array(entries)) = top.get_mut(generators) {
            entries
                .iter_mut()
                .for_each(|entry| fill_options(entry.get_mut("options")));
        }
    }
}

fn drop_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(drop_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

const KUSTOMIZATION_API_VERSION: &str = "kustomize.config.k8s.io/v1beta1";

fn check_kind(kustomization: &Kustomization, file: &Path) -> Result<(), KustomizeError> {
    let invalid = |message: String| KustomizeError::InvalidKustomization {
        file: file.to_path_buf(),
        message,
    };
    match kustomization.kind.as_str() {
        "" | KUSTOMIZATION_KIND
            if !kustomization.api_version.is_empty()
                && kustomization.api_version != KUSTOMIZATION_API_VERSION =>
        {
            Err(invalid(format!(
                "apiVersion for Kustomization should be {KUSTOMIZATION_API_VERSION}"
            )))
        }
        "" | KUSTOMIZATION_KIND => Ok(()),
        // kustomize fills in a missing apiVersion for the kind.
        COMPONENT_KIND
            if kustomization.api_version.is_empty()
                || kustomization.api_version == COMPONENT_API_VERSION =>
        {
            Ok(())
        }
        COMPONENT_KIND => Err(invalid(format!(
            "apiVersion for Component should be {COMPONENT_API_VERSION}, not {:?}",
            kustomization.api_version
        ))),
        other => Err(invalid(format!(
            "kind should be {KUSTOMIZATION_KIND} or {COMPONENT_KIND}, not {other:?}"
        ))),
    }
}

fn fold_deprecated(k: &mut Kustomization) {
    let bases = std::mem::take(&mut k.bases);
    k.resources.extend(bases);
    let image_tags = std::mem::take(&mut k.image_tags);
    k.images.extend(image_tags);
    for generator in k
        .config_map_generator
        .iter_mut()
        .chain(k.secret_generator.iter_mut())
    {
        if !generator.env.is_empty() {
            let env = std::mem::take(&mut generator.env);
            generator.envs.push(env);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_text(text: &str) -> Result<Kustomization, KustomizeError> {
        parse(text, Path::new("kustomization.yaml"))
    }

    #[test]
    fn reads_fields_and_folds_deprecated_ones() {
        let k = parse_text(
            "bases: [../base]\nresources: [a.yaml]\nimageTags: [{name: x, newTag: v1}]\n\
             configMapGenerator: [{name: c, env: a.env, envs: [b.env]}]\n",
        )
        .unwrap();
        assert_eq!(k.resources, ["a.yaml", "../base"]);
        assert_eq!(k.images[0].new_tag, "v1");
        assert_eq!(k.config_map_generator[0].envs, ["b.env", "a.env"]);
    }

    #[test]
    fn yaml11_booleans_are_type_errors_naming_the_field() {
        let err = parse_text("commonLabels:\n  x: y\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("commonLabels.x"), "{err}");
        assert!(err.contains("boolean"), "{err}");
    }

    #[test]
    fn unknown_and_empty() {
        let err = parse_text("resource: [a]\n").unwrap_err().to_string();
        assert!(err.contains("unknown field \"resource\""), "{err}");
        assert!(matches!(
            parse_text(""),
            Err(KustomizeError::EmptyKustomization(_))
        ));
        assert!(matches!(
            parse_text("{}"),
            Err(KustomizeError::EmptyKustomization(_))
        ));
        // Only zero values besides apiVersion, kind and metadata: empty, as kustomize's
        // CheckEmpty; an empty list is a value.
        for text in ["kind: Kustomization\n", "namePrefix: \"\"\nresources:\n"] {
            assert!(
                matches!(parse_text(text), Err(KustomizeError::EmptyKustomization(_))),
                "{text}"
            );
        }
        assert!(parse_text("resources: []\n").is_ok());
        // A Component without apiVersion gets its own, as kustomize fills it in.
        assert!(parse_text("kind: Component\nresources: []\n").is_ok());
        let err = parse_text(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Component\nresources: []\n",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("kustomize.config.k8s.io/v1alpha1"), "{err}");
    }
}
