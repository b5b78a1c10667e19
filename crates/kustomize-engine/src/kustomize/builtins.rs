//! Configuration files a kustomization points at: `configurations:` (extra field specs),
//! `crds:` (OpenAPI definitions whose name-reference extensions become field specs), and
//! `generators:` / `transformers:` entries that configure kustomize's built-in plugins
//! (`apiVersion: builtin`). Anything else would need a plugin or exec, which stays out.

use std::collections::BTreeMap;
use std::path::Path;

use crate::value::Value;
use serde::Deserialize;

use super::config::{NameReference, TransformerConfig};
use super::generators::{self, EnvLookup, GeneratorKind};
use super::kustfile::{
    FieldSpec, GeneratorArgs, GeneratorOptions, Image, Patch, PatchOptions, ReplacementField,
    Replica, Selector, describe,
};
use super::loader::Loader;
use super::plugin_configs::{self, LoadedConfig};
use super::provenance::ConfiguredBy;
use super::resource::Resource;
use super::target::{Accumulated, Builder};
use super::transformers::{self, Affix, NamespaceOptions, RoleBindingSubjects};
use super::{KustomizeError, patches, replacements};
use crate::yaml::{self, Schema};

/// Parses a `configurations:` file.
pub fn parse_config(text: &str, path: &Path) -> Result<TransformerConfig, KustomizeError> {
    let value =
        yaml::parse_single(text, Schema::Kubernetes).map_err(|error| KustomizeError::Yaml {
            file: path.to_path_buf(),
            error,
        })?;
    if value.is_null() {
        return Ok(TransformerConfig::default());
    }
    // kustomize reads it with non-strict YAML decoding: keys in any letter case, unknown
    // ones ignored.
    serde_path_to_error::deserialize(super::fold::Folded::lenient(value)).map_err(|e| {
        KustomizeError::InvalidConfig {
            file: path.to_path_buf(),
            message: describe(e),
        }
    })
}

/// Field specs declared by a `crds:` file of OpenAPI definitions, as kustomize reads them:
/// from each definition that looks like a Kubernetes type (its properties include `kind`,
/// `apiVersion` and `metadata`), following `$ref`s (not inline `properties`), a property
/// with `x-kubernetes-annotation` or `x-kubernetes-label-selector` takes annotations or
/// labels when present (never created), `x-kubernetes-identity` takes the name prefix, and
/// one with both `x-kubernetes-object-ref-api-version` and `-kind` refers to objects of that
/// kind and version (the whole API version: `apps/v1` matches no group) by its name key.
/// The field specs apply to the definition's kind, in any group.
pub fn config_from_crd(text: &str, path: &Path) -> Result<TransformerConfig, KustomizeError> {
    let value = yaml::parse_single(text, Schema::Kyaml).map_err(|error| KustomizeError::Yaml {
        file: path.to_path_buf(),
        error,
    })?;
    let mut config = TransformerConfig::default();
    let unparsable = || {
        KustomizeError::InvalidConfig {
        file: path.to_path_buf(),
        message: "unable to parse open API definition: expected a map of definition names to OpenAPI definitions (a CRD manifest belongs under resources)".into(),
    }
    };
    let definitions = value.as_object().ok_or_else(unparsable)?;
    if definitions.values().any(|d| !d.is_object()) {
        return Err(unparsable());
    }
    for (name, definition) in definitions {
        let schema = schema_of(definition);
        let looks_like_a_type = schema
            .and_then(|s| s.get("properties"))
            .and_then(Value::as_object)
            .is_some_and(|p| {
                ["kind", "apiVersion", "metadata"]
                    .iter()
                    .all(|k| p.contains_key(*k))
            });
        let Some(schema) = schema.filter(|_| looks_like_a_type) else {
            continue;
        };
        let kind = name.rsplit('.').next().unwrap_or(name).to_string();
        let mut walk = Walk {
            definitions,
            on_path: vec![name.as_str()],
            visited: 0,
        };
        walk.collect_refs(schema, &kind, "", &mut config, 0);
        if walk.visited > MAX_CRD_NODES {
            return Err(KustomizeError::InvalidConfig {
                file: path.to_path_buf(),
                message: format!(
                    "open API definitions expand to more than {MAX_CRD_NODES} properties"
                ),
            });
        }
    }
    Ok(config)
}

/// A definition's `Schema` (Go's JSON decoding matches the key in any case).
fn schema_of(definition: &Value) -> Option<&Value> {
    definition
        .as_object()?
        .iter()
        .rfind(|(key, _)| go_std::equal_fold_ascii(key, "Schema"))
        .map(|(_, schema)| schema)
}

/// The most properties one `crds:` definition may expand to through `$ref`s.
const MAX_CRD_NODES: usize = 100_000;

/// A walk over definitions that refer to each other: a definition already on the current
/// path is not entered again (recursive schemas, on which kustomize itself never returns),
/// and the whole walk is bounded.
struct Walk<'d> {
    definitions: &'d crate::value::Map,
    on_path: Vec<&'d str>,
    visited: usize,
}

impl<'d> Walk<'d> {
    fn collect_refs(
        &mut self,
        schema: &'d Value,
        kind: &str,
        prefix: &str,
        config: &mut TransformerConfig,
        depth: usize,
    ) {
        let definitions = self.definitions;
        if depth > 32 || self.visited > MAX_CRD_NODES {
            return;
        }
        let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
            return;
        };
        for (property, spec) in properties {
            self.visited += 1;
            let path = if prefix.is_empty() {
                property.clone()
            } else {
                format!("{prefix}/{property}")
            };
            // kube-openapi's `GetString`: the extension is there and a string.
            let extension = |key: &str| spec.get(key).and_then(Value::as_str);
            let field_spec = |path: String| FieldSpec {
                kind: kind.to_string(),
                path,
                ..Default::default()
            };
            if extension("x-kubernetes-annotation").is_some() {
                config.common_annotations.push(field_spec(path.clone()));
            }
            if extension("x-kubernetes-label-selector").is_some() {
                config.common_labels.push(field_spec(path.clone()));
            }
            if extension("x-kubernetes-identity").is_some() {
                config.name_prefix.push(field_spec(path.clone()));
            }
            if let (Some(version), Some(ref_kind)) = (
                extension("x-kubernetes-object-ref-api-version"),
                extension("x-kubernetes-object-ref-kind"),
            ) {
                let name_key = extension("x-kubernetes-object-ref-name-key").unwrap_or("name");
                let referrer = field_spec(format!("{path}/{name_key}"));
                match config
                    .name_reference
                    .iter_mut()
                    .find(|r| r.kind == ref_kind && r.group.is_empty() && r.version == version)
                {
                    Some(existing) => existing.field_specs.push(referrer),
                    None => config.name_reference.push(NameReference {
                        group: String::new(),
                        version: version.to_string(),
                        kind: ref_kind.to_string(),
                        field_specs: vec![referrer],
                    }),
                }
            }
            // A `$ref` names a definition of the file as written (`#/definitions/...`
            // names none, as in kustomize).
            let reference = spec.get("$ref").and_then(Value::as_str);
            if let Some((name, definition)) = reference.and_then(|r| definitions.get_key_value(r))
                && !self.on_path.contains(&name.as_str())
                && let Some(schema) = schema_of(definition)
            {
                self.on_path.push(name);
                self.collect_refs(schema, kind, &path, config, depth + 1);
                self.on_path.pop();
            }
        }
    }
}

/// Who configured a transformer or generator: the config's kind, name and namespace.
fn configured_by(config: &Value) -> ConfiguredBy {
    let text = |pointer: &str| super::resource::str_at(config, pointer).to_string();
    ConfiguredBy {
        api_version: text("/apiVersion"),
        kind: text("/kind"),
        name: text("/metadata/name"),
        namespace: text("/metadata/namespace"),
    }
}

fn decode<T: for<'de> Deserialize<'de>>(
    config: &Value,
    origin: &str,
    file: &Path,
) -> Result<T, KustomizeError> {
    let mut config = config.clone();
    if let Some(map) = config.as_object_mut() {
        map.remove("apiVersion");
        map.remove("kind");
    }
    // As kustomize configures its built-in plugins: non-strict YAML decoding.
    serde_path_to_error::deserialize(super::fold::Folded::plugin_config(config)).map_err(|e| {
        KustomizeError::InvalidConfig {
            file: file.to_path_buf(),
            message: format!("{origin}: {}", describe(e)),
        }
    })
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct GeneratorConfig {
    #[serde(default)]
    metadata: ConfigMetadata,
    #[serde(flatten)]
    args: GeneratorArgs,
}

#[derive(Deserialize, Default)]
struct ConfigMetadata {
    #[serde(default, deserialize_with = "super::fold::go_zero")]
    name: String,
    #[serde(default, deserialize_with = "super::fold::go_zero")]
    namespace: String,
    /// A configuration's own labels and annotations label nothing it generates (only its
    /// `options` do); they are read only so that a mistyped one fails as in kustomize.
    #[serde(default, deserialize_with = "super::fold::go_zero")]
    #[allow(dead_code)]
    labels: BTreeMap<String, String>,
    #[serde(default, deserialize_with = "super::fold::go_zero")]
    #[allow(dead_code)]
    annotations: BTreeMap<String, String>,
}

/// An `IAMPolicyGenerator` configuration: a Kubernetes service account bound to a cloud one.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct IamPolicyConfig {
    #[serde(default)]
    cloud: String,
    #[serde(default)]
    kubernetes_service: IamKubernetesService,
    #[serde(default)]
    service_account: IamServiceAccount,
}

#[derive(Deserialize, Default)]
struct IamKubernetesService {
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: String,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct IamServiceAccount {
    #[serde(default)]
    name: String,
    #[serde(default)]
    project_id: String,
}

/// The ServiceAccount kustomize's IAMPolicyGenerator makes: for GKE, one annotated with the
/// Google service account it acts as (workload identity); no other cloud is supported.
fn iam_policy_service_account(
    config: &IamPolicyConfig,
    origin: &str,
    file: &Path,
) -> Result<Value, KustomizeError> {
    if config.cloud != "gke" {
        return Err(KustomizeError::InvalidConfig {
            file: file.to_path_buf(),
            message: format!(
                "{origin}: cloud provider {} not supported yet",
                config.cloud
            ),
        });
    }
    let mut metadata = crate::json!({
        "annotations": {"iam.gke.io/gcp-service-account": format!(
            "{}@{}.iam.gserviceaccount.com",
            config.service_account.name, config.service_account.project_id
        )},
        "name": config.kubernetes_service.name,
    });
    if !config.kubernetes_service.namespace.is_empty() {
        metadata["namespace"] = Value::String(config.kubernetes_service.namespace.clone());
    }
    Ok(crate::json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": metadata}))
}

/// Runs a `generators:` list: ConfigMapGenerator, SecretGenerator and IAMPolicyGenerator
/// configurations.
pub fn run_generators(
    builder: &mut Builder,
    entries: &[String],
    loader: &Loader,
    env_lookup: EnvLookup,
    file: &Path,
) -> Result<Vec<Resource>, KustomizeError> {
    let mut resources = Vec::new();
    for LoadedConfig {
        config,
        origin,
        source,
    } in plugin_configs::gather(builder, entries, loader, file)?
    {
        let kind = match config.get("kind").and_then(Value::as_str) {
            Some("ConfigMapGenerator") => GeneratorKind::ConfigMap,
            Some("SecretGenerator") => GeneratorKind::Secret,
            Some("IAMPolicyGenerator") => {
                let parsed: IamPolicyConfig = decode(&config, &origin, file)?;
                let mut resource =
                    Resource::new(iam_policy_service_account(&parsed, &origin, file)?);
                resource.origin = builder
                    .generated_origin(&source, configured_by(&config))
                    .map(Box::new);
                resources.push(resource);
                continue;
            }
            other => {
                return Err(KustomizeError::PluginRefused {
                    file: file.to_path_buf(),
                    what: format!(
                        "unable to load builtin generator {:?} configured in {origin}",
                        other.unwrap_or("")
                    ),
                });
            }
        };
        let parsed: GeneratorConfig = decode(&config, &origin, file)?;
        let mut args = parsed.args;
        if args.name.is_empty() {
            args.name = parsed.metadata.name;
        }
        if args.namespace.is_empty() {
            args.namespace = parsed.metadata.namespace;
        }
        let mut resource = generators::generate(
            kind,
            &args,
            None::<&GeneratorOptions>,
            loader,
            env_lookup,
            file,
        )?;
        resource.origin = builder
            .generated_origin(&source, configured_by(&config))
            .map(Box::new);
        resources.push(resource);
    }
    Ok(resources)
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct PrefixSuffixConfig {
    #[serde(default)]
    prefix: String,
    #[serde(default)]
    suffix: String,
    #[serde(default)]
    field_specs: Vec<FieldSpec>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct MapConfig {
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    annotations: BTreeMap<String, String>,
    #[serde(default)]
    field_specs: Vec<FieldSpec>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct NamespaceConfig {
    #[serde(default)]
    metadata: ConfigMetadata,
    #[serde(default)]
    field_specs: Vec<FieldSpec>,
    #[serde(default)]
    unset_only: bool,
    #[serde(default)]
    set_role_binding_subjects: String,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct ImageConfig {
    #[serde(default)]
    image_tag: Image,
    #[serde(default)]
    field_specs: Vec<FieldSpec>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct ReplicaConfig {
    #[serde(default)]
    replica: Replica,
    #[serde(default)]
    field_specs: Vec<FieldSpec>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct StrategicMergeConfig {
    #[serde(default)]
    paths: Vec<String>,
    #[serde(default)]
    patches: String,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct PatchConfig {
    #[serde(default)]
    path: String,
    #[serde(default)]
    patch: String,
    #[serde(default)]
    target: Option<Selector>,
    #[serde(default)]
    options: PatchOptions,
    #[serde(default)]
    json_op: String,
}

#[derive(Deserialize, Default)]
struct ReplacementConfig {
    #[serde(default)]
    replacements: Vec<ReplacementField>,
}

/// Runs a `transformers:` list's built-in transformer configurations over `acc`.
pub fn run_transformers(
    builder: &mut Builder,
    entries: &[String],
    loader: &Loader,
    file: &Path,
    acc: &mut Accumulated,
) -> Result<(), KustomizeError> {
    for LoadedConfig {
        config,
        origin,
        source,
    } in plugin_configs::gather(builder, entries, loader, file)?
    {
        apply_transformer_config(&config, &origin, loader, file, acc)?;
        builder.record_transformation(acc, || {
            builder.configured_at(&source, configured_by(&config))
        });
    }
    Ok(())
}

/// Runs a `validators:` list: built-in transformer configurations that must leave every
/// resource as it was.
pub fn run_validators(
    builder: &mut Builder,
    entries: &[String],
    loader: &Loader,
    file: &Path,
    acc: &Accumulated,
) -> Result<(), KustomizeError> {
    for LoadedConfig { config, origin, .. } in
        plugin_configs::gather(builder, entries, loader, file)?
    {
        let mut copy = acc.clone();
        // kustomize compares nodes, so even rewriting a value with itself is a modification.
        let writes = apply_transformer_config(&config, &origin, loader, file, &mut copy)?;
        let unchanged = writes == 0
            && copy.resources.len() == acc.resources.len()
            && copy
                .resources
                .iter()
                .zip(&acc.resources)
                .all(|(a, b)| a.object == b.object);
        if !unchanged {
            return Err(KustomizeError::ValidatorModified {
                file: file.to_path_buf(),
                what: origin,
            });
        }
    }
    Ok(())
}

/// Runs one built-in transformer configuration; returns the writes it reports (the map
/// transformers count every map they set, even to the same values).
fn apply_transformer_config(
    config: &Value,
    origin: &str,
    loader: &Loader,
    file: &Path,
    acc: &mut Accumulated,
) -> Result<usize, KustomizeError> {
    let mut writes = 0;
    let kind = config.get("kind").and_then(Value::as_str).unwrap_or("");
    match kind {
        "PrefixSuffixTransformer" | "PrefixTransformer" | "SuffixTransformer" => {
            // These two decode with go-yaml, which leaves a null field spec out (the others
            // decode through JSON, where it is a zero one).
            let mut config = config.clone();
            match config.get_mut("fieldSpecs") {
                Some(Value::Array(specs)) => {
                    specs.retain(|spec| !spec.is_null());
                    // go-yaml reads any scalar into a string field as its text.
                    for spec in specs.iter_mut().filter_map(Value::as_object_mut) {
                        for field in ["group", "version", "kind"] {
                            if let Some(scalar @ (Value::Bool(_) | Value::Number(_))) =
                                spec.get_mut(field)
                            {
                                *scalar = Value::String(super::replacements::scalar_text(scalar));
                            }
                        }
                    }
                }
                // Without field specs these affix nothing, which kustomize takes for a mistake.
                None | Some(Value::Null) => {
                    return Err(KustomizeError::InvalidConfig {
                        file: file.to_path_buf(),
                        message: format!(
                            "{origin}: {kind} {:?} fails configuration: fieldSpecs is not expected to be nil",
                            super::resource::str_at(&config, "/metadata/name")
                        ),
                    });
                }
                Some(_) => {}
            }
            let c: PrefixSuffixConfig = decode(&config, origin, file)?;
            // PrefixSuffixTransformer is the prefix transformer, then the suffix one, each
            // over every resource; each of the others reads only its own affix. An empty
            // prefix before a suffix is left out: the fields it would create hold an empty
            // text (a null we cannot tell from one written `null`) for the suffix to follow.
            let prefix_pass = match kind {
                "PrefixSuffixTransformer" => !c.prefix.is_empty() || c.suffix.is_empty(),
                _ => kind == "PrefixTransformer",
            };
            if prefix_pass {
                transformers::add_affix(
                    &mut acc.resources,
                    &c.prefix,
                    Affix::Prefix,
                    &c.field_specs,
                )?;
            }
            if kind != "PrefixTransformer" {
                transformers::add_affix(
                    &mut acc.resources,
                    &c.suffix,
                    Affix::Suffix,
                    &c.field_specs,
                )?;
            }
        }
        "LabelTransformer" => {
            let c: MapConfig = decode(config, origin, file)?;
            writes += transformers::add_map_entries(&mut acc.resources, &c.labels, &c.field_specs)?;
        }
        "AnnotationsTransformer" => {
            let c: MapConfig = decode(config, origin, file)?;
            writes +=
                transformers::add_map_entries(&mut acc.resources, &c.annotations, &c.field_specs)?;
        }
        "NamespaceTransformer" => {
            let c: NamespaceConfig = decode(config, origin, file)?;
            set_namespace(c, origin, file, acc)?;
        }
        "ImageTagTransformer" => {
            let c: ImageConfig = decode(config, origin, file)?;
            transformers::set_images(
                &mut acc.resources,
                std::slice::from_ref(&c.image_tag),
                &c.field_specs,
            )?;
        }
        "ReplicaCountTransformer" => {
            let c: ReplicaConfig = decode(config, origin, file)?;
            transformers::set_replicas(
                &mut acc.resources,
                std::slice::from_ref(&c.replica),
                &c.field_specs,
                file,
            )?;
        }
        "PatchStrategicMergeTransformer" => {
            let c: StrategicMergeConfig = decode(config, origin, file)?;
            patches::apply_strategic_merge_config(&c.paths, &c.patches, loader, file, acc)?;
        }
        "PatchTransformer" | "PatchJson6902Transformer" => {
            let c: PatchConfig = decode(config, origin, file)?;
            let json6902 = kind == "PatchJson6902Transformer";
            let patch = Patch {
                path: c.path,
                patch: if json6902 { c.json_op } else { c.patch },
                target: c.target,
                options: c.options,
            };
            let patch = std::slice::from_ref(&patch);
            if json6902 {
                patches::apply_json6902(patch, loader, file, acc)?;
            } else {
                patches::apply_patches(patch, loader, file, acc)?;
            }
        }
        "ReplacementTransformer" => {
            let c: ReplacementConfig = decode(config, origin, file)?;
            replacements::apply_all(&c.replacements, loader, file, &mut acc.resources)?;
        }
        "ValueAddTransformer" => {
            let c: super::value_add::ValueAddConfig = decode(config, origin, file)?;
            let custom = acc.custom_schema.clone();
            let schema = super::openapi::SchemaView {
                custom: custom.as_ref(),
                replaces_builtin: acc.custom_replaces_builtin,
            };
            super::value_add::apply(c, origin, loader, file, &mut acc.resources, schema)?;
        }
        // kustomize's HashTransformer has no settings; the build's own pass at the end suffixes
        // again (`cm-4h2mbtbbt6-4h2mbtbbt6`, as kustomize prints it).
        "HashTransformer" => super::hash::suffix_generated_names(&mut acc.resources),
        other => {
            return Err(KustomizeError::PluginRefused {
                file: file.to_path_buf(),
                what: format!(
                    "unable to load builtin transformer {other:?} configured in {origin}"
                ),
            });
        }
    }
    Ok(writes)
}

/// The NamespaceTransformer configuration, whose `setRoleBindingSubjects` names which
/// subjects follow the namespace.
fn set_namespace(
    c: NamespaceConfig,
    origin: &str,
    file: &Path,
    acc: &mut Accumulated,
) -> Result<(), KustomizeError> {
    let subjects = match c.set_role_binding_subjects.as_str() {
        "" | "defaultOnly" => RoleBindingSubjects::DefaultOnly,
        "allServiceAccounts" => RoleBindingSubjects::AllServiceAccounts,
        "none" => RoleBindingSubjects::None,
        other => {
            return Err(KustomizeError::InvalidConfig {
                file: file.to_path_buf(),
                message: format!("{origin}: invalid value {other:?} for setRoleBindingSubjects"),
            });
        }
    };
    let options = NamespaceOptions {
        unset_only: c.unset_only,
        subjects,
    };
    let custom = acc.custom_schema.clone();
    let schema = super::openapi::SchemaView {
        custom: custom.as_ref(),
        replaces_builtin: acc.custom_replaces_builtin,
    };
    transformers::set_namespace(
        &mut acc.resources,
        &c.metadata.namespace,
        &c.field_specs,
        schema,
        options,
        file,
    )?;
    super::target::check_unique_ids(&acc.resources)
}
