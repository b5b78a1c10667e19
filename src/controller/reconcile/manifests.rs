//! From an extracted artifact to the objects to apply, as Flux builds them: a
//! `kustomization.yaml` is generated where the path has none, the Kustomization's overrides
//! are written into it (targetNamespace, namePrefix/Suffix, patches, images, components,
//! buildMetadata), SOPS inputs are decrypted in place, the embedded engine builds, SOPS
//! objects are decrypted and post-build variables substituted. No cluster access here: keys
//! and variables come in from the reconciler.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::json;
use crate::value::Value;

use crate::api::{BuildMetadataOption, KustomizationSpec, SubstituteStrategy};
use crate::kustomize::{
    self, BuildOptions, KUSTOMIZATION_FILE_NAMES, LoadRestrictions, UnknownFields,
};
use crate::sops::{self, Keys};
use crate::substitute;
use crate::yaml::{self, Schema};

#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("kustomization path not found: {0}")]
    Path(String),
    #[error("failed to generate kustomization.yaml: {0}")]
    Generate(String),
    #[error("component path '{0}' must be local and relative")]
    RemoteComponent(String),
    /// Flux's words for the SOPS files the kustomization's generators and patches read.
    #[error("error decrypting sources: {0}")]
    DecryptSources(sops::SopsError),
    /// Flux's words: the object as kustomize names it (`Kind.version.group/name`), then why.
    #[error("decryption failed for '{resource}': {source}")]
    DecryptObject {
        resource: String,
        source: sops::SopsError,
    },
    /// A Secret that would be applied still encrypted (no keys for it).
    #[error(transparent)]
    EncryptedSecret(#[from] sops::EncryptedSecret),
    #[error("kustomize build failed: {0}")]
    Build(String),
    /// Flux's words: a built object lacks what every Kubernetes object has. The object is
    /// shown as YAML, a Secret's values left out.
    #[error("failed to decode Kubernetes apiVersion, kind and name from: {0}")]
    NotAnObject(String),
    /// Flux's words: the object as kustomize names it (`Kind.version.group/name`), then what
    /// fluxcd/pkg's substitution says.
    #[error("post build failed for '{resource}': {message}")]
    Substitute { resource: String, message: String },
}

/// An object as Flux's build errors name it: kustomize's `Gvk` and the name
/// (`ConfigMap.v1.[noGrp]/settings`).
fn resource_id(object: &Value) -> String {
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    format!("{}/{name}", kustomize::Gvk::of(object))
}

/// What the build needs besides the artifact.
pub struct Inputs<'a> {
    pub spec: &'a KustomizationSpec,
    /// SOPS keys, when `spec.decryption` is set.
    pub keys: Option<&'a Keys>,
    /// Post-build variables (sources and inline values already collected), or why they
    /// could not be.
    pub variables: Result<&'a BTreeMap<String, String>, &'a substitute::SubstituteError>,
    pub remote: Option<std::sync::Arc<dyn kustomize::RemoteFetcher>>,
    /// The `StrictPostBuildSubstitutions` feature gate: unset variables without a default fail.
    pub strict_substitution: bool,
    /// What the build may use.
    pub limits: kustomize::Limits,
}

/// As Flux's generator (fluxcd/pkg `kustomize` `scanManifests`, through kustomize's resource
/// factory): a YAML file in a plain directory must hold Kubernetes objects; one that does not
/// fails the build, naming the file, rather than being left out unnoticed.
fn check_manifest(path: &Path, relative: &str) -> Result<(), ManifestError> {
    let fail = |reason: String| {
        ManifestError::Generate(format!(
            "failed to decode Kubernetes YAML from {relative}: {reason}"
        ))
    };
    let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
    let documents =
        yaml::parse_documents(&text, Schema::Kubernetes).map_err(|e| fail(e.to_string()))?;
    documents
        .iter()
        .try_for_each(|document| resource_metadata(document).map_err(|e| fail(e.to_string())))
}

/// What kyaml's metadata check finds missing, in its words.
#[derive(Debug, thiserror::Error, PartialEq)]
enum MissingMetadata {
    #[error("missing Resource metadata")]
    Resource,
    #[error("missing kind in object")]
    Kind,
    #[error("missing metadata.name in object (kind {0})")]
    Name(String),
}

/// kyaml's check of a document's metadata (`GetValidatedMetadata`).
fn resource_metadata(document: &Value) -> Result<(), MissingMetadata> {
    let present = |value: Option<&Value>| {
        value.is_some_and(|v| {
            !v.is_null() && v.as_str() != Some("") && v.as_object().is_none_or(|o| !o.is_empty())
        })
    };
    let Some(fields) = document.as_object() else {
        return if document.is_null() {
            Ok(())
        } else {
            Err(MissingMetadata::Resource)
        };
    };
    if fields.is_empty() {
        return Ok(());
    }
    let metadata = document.get("metadata");
    let described = ["name", "namespace", "labels", "annotations"]
        .iter()
        .any(|key| present(metadata.and_then(|m| m.get(key))));
    let kind = document.get("kind").and_then(Value::as_str).unwrap_or("");
    if !present(document.get("apiVersion")) && kind.is_empty() && !described {
        return Err(MissingMetadata::Resource);
    }
    if kind.is_empty() {
        return Err(MissingMetadata::Kind);
    }
    let named = present(metadata.and_then(|m| m.get("name")));
    if !kind.ends_with("List") && !named {
        return Err(MissingMetadata::Name(kind.to_string()));
    }
    Ok(())
}

fn has_kustomization(dir: &Path) -> bool {
    KUSTOMIZATION_FILE_NAMES
        .iter()
        .any(|name| dir.join(name).is_file())
}

/// The resources a generated kustomization lists: every YAML file under `dir` (each must hold
/// Kubernetes objects), and subdirectories that have their own kustomization (not walked
/// into).
fn scan(root: &Path, dir: &Path, out: &mut Vec<String>) -> Result<(), ManifestError> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| ManifestError::Generate(format!("{}: {e}", dir.display())))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for path in entries {
        let metadata = std::fs::symlink_metadata(&path)
            .map_err(|e| ManifestError::Generate(format!("{}: {e}", path.display())))?;
        let relative = path
            .strip_prefix(root)
            .unwrap_or(&path)
            .to_string_lossy()
            .to_string();
        if metadata.is_dir() {
            if has_kustomization(&path) {
                out.push(relative);
            } else {
                scan(root, &path, out)?;
            }
        } else if metadata.is_file() {
            let yaml = path
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| e == "yaml" || e == "yml");
            if yaml {
                check_manifest(&path, &relative)?;
                out.push(relative);
            }
        }
    }
    Ok(())
}

/// Where a kustomization file came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Origin {
    /// The artifact's own.
    Found,
    /// Generated here, listing the directory's manifests.
    Generated,
}

/// The kustomization file of `dir`, generated when missing.
fn kustomization_file(dir: &Path) -> Result<(PathBuf, Origin), ManifestError> {
    if let Some(name) = KUSTOMIZATION_FILE_NAMES
        .iter()
        .find(|n| dir.join(n).is_file())
    {
        return Ok((dir.join(name), Origin::Found));
    }
    let mut resources = Vec::new();
    scan(dir, dir, &mut resources)?;
    let generated = json!({
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": resources,
    });
    let path = dir.join("kustomization.yaml");
    std::fs::write(&path, yaml::to_yaml_string(&generated))
        .map_err(|e| ManifestError::Generate(format!("{}: {e}", path.display())))?;
    Ok((path, Origin::Generated))
}

/// Writes the Kustomization's overrides into the kustomization file.
fn apply_overrides(
    file: &Path,
    origin: Origin,
    spec: &KustomizationSpec,
) -> Result<(), ManifestError> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| ManifestError::Generate(format!("{}: {e}", file.display())))?;
    let mut kustomization = yaml::parse_single(&text, Schema::Kyaml)
        .map_err(|e| ManifestError::Build(format!("{}: {e}", file.display())))?;
    if kustomization.is_null() {
        kustomization = json!({});
    }
    if !kustomization.is_object() {
        return Err(ManifestError::Build(format!(
            "{}: not a kustomization",
            file.display()
        )));
    }
    let dir = file.parent().unwrap_or(Path::new("."));
    let list = |value: &mut Value, key: &str| -> Vec<Value> {
        value
            .get(key)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    // As fluxcd/pkg's generator: an artifact's kustomization without resources records
    // where its objects came from, so that it is not "empty" to kustomize (`buildMetadata`
    // in the spec replaces this).
    if origin == Origin::Found && !has_resources(&kustomization) {
        kustomization["buildMetadata"] = json!(["originAnnotations"]);
    }
    if let Some(namespace) = spec.target_namespace.as_deref().filter(|n| !n.is_empty()) {
        kustomization["namespace"] = json!(namespace);
    }
    if let Some(prefix) = spec.name_prefix.as_deref().filter(|p| !p.is_empty()) {
        kustomization["namePrefix"] = json!(prefix);
    }
    if let Some(suffix) = spec.name_suffix.as_deref().filter(|s| !s.is_empty()) {
        kustomization["nameSuffix"] = json!(suffix);
    }
    if !spec.patches.is_empty() {
        let mut patches = list(&mut kustomization, "patches");
        for patch in &spec.patches {
            let mut entry = json!({"patch": patch.patch});
            if let Some(target) = &patch.target {
                entry["target"] = serde_json::to_value(target).map_or(Value::Null, Value::from);
            }
            patches.push(entry);
        }
        kustomization["patches"] = Value::Array(patches);
    }
    if !spec.images.is_empty() {
        let mut images = list(&mut kustomization, "images");
        merge_images(&mut images, &spec.images);
        kustomization["images"] = Value::Array(images);
    }
    if !spec.components.is_empty() {
        let mut components = list(&mut kustomization, "components");
        let ignore_missing = spec.ignore_missing_components.unwrap_or(false);
        for component in &spec.components {
            if !is_local_relative_path(component) {
                return Err(ManifestError::RemoteComponent(component.clone()));
            }
            // A missing one not ignored is left for kustomize to name.
            if ignore_missing && !dir.join(component).exists() {
                continue;
            }
            components.push(json!(component));
        }
        kustomization["components"] = Value::Array(components);
    }
    if !spec.build_metadata.is_empty() {
        let options: Vec<&str> = spec
            .build_metadata
            .iter()
            .map(|o| match o {
                BuildMetadataOption::OriginAnnotations => "originAnnotations",
                BuildMetadataOption::TransformerAnnotations => "transformerAnnotations",
            })
            .collect();
        kustomization["buildMetadata"] = json!(options);
    }
    std::fs::write(file, yaml::to_yaml_string(&kustomization))
        .map_err(|e| ManifestError::Generate(format!("{}: {e}", file.display())))
}

/// fluxcd/pkg's `IsLocalRelativePath`: not a remote reference (`git::`, `https://`,
/// `github.com/`, …) nor an absolute path (`file://` read as a path).
fn is_local_relative_path(path: &str) -> bool {
    const REMOTE: [&str; 8] = [
        "git::",
        "gh:",
        "ssh://",
        "https://",
        "http://",
        "git@",
        "github.com:",
        "github.com/",
    ];
    let remote = REMOTE.iter().any(|prefix| {
        path.len() > prefix.len()
            && path
                .get(..prefix.len())
                .is_some_and(|head| head.eq_ignore_ascii_case(prefix))
    });
    let lower = path.to_lowercase();
    let absolute = Path::new(path).is_absolute()
        || Path::new(lower.strip_prefix("file://").unwrap_or(&lower)).is_absolute();
    !remote && !absolute
}

/// Whether a kustomization lists resources, its `resources` key spelled in any letter case as
/// Go's decoding reads it.
fn has_resources(kustomization: &Value) -> bool {
    // Of several spellings, Go's decoding keeps the last in sorted order, as the map holds them.
    kustomization
        .as_object()
        .and_then(|fields| {
            fields
                .iter()
                .rev()
                .find(|(key, _)| go_std::equal_fold_ascii(key, "resources"))
        })
        .is_some_and(|(_, value)| value.as_array().is_some_and(|list| !list.is_empty()))
}

/// Builds the objects of `dir` (inside the extracted artifact at `root`).
pub fn build(root: &Path, dir: &Path, inputs: &Inputs) -> Result<Vec<Value>, ManifestError> {
    if !dir.is_dir() {
        return Err(ManifestError::Path(dir.display().to_string()));
    }
    let (file, origin) = kustomization_file(dir)?;
    apply_overrides(&file, origin, inputs.spec)?;
    if let Some(keys) = inputs.keys {
        sops::decrypt_build_inputs(root, dir, keys).map_err(ManifestError::DecryptSources)?;
    }
    let options = BuildOptions {
        remote: inputs.remote.clone(),
        load_restrictions: LoadRestrictions::None,
        limits: inputs.limits,
        // Flux decodes the kustomization it writes its overrides into without strictness.
        root_unknown_fields: UnknownFields::Drop,
        // Flux's krusty options leave `Reorder` unset: no legacy kind order unless the
        // kustomization asks for one (fluxcd/pkg's `kustomization_expected.yaml`).
        reorder: Some(kustomize::Reorder::AsWritten),
        // A custom `openapi` schema adds to the built-in one, as Flux preloads it.
        builtin_schema_preloaded: true,
        ..BuildOptions::default()
    };
    let mut objects =
        kustomize::build(root, dir, &options).map_err(|e| ManifestError::Build(e.to_string()))?;
    if let Some(object) = objects.iter().find(|object| !is_kubernetes_object(object)) {
        return Err(ManifestError::NotAnObject(shown_without_secrets(object)));
    }
    for object in objects.iter_mut() {
        if let Some(keys) = inputs.keys {
            let resource = resource_id(object);
            sops::decrypt_object(object, keys)
                .map_err(|source| ManifestError::DecryptObject { resource, source })?;
        }
        sops::ensure_not_encrypted_secret(object).map_err(ManifestError::EncryptedSecret)?;
    }
    if let Some(post_build) = &inputs.spec.post_build {
        let always = post_build.substitute_strategy == Some(SubstituteStrategy::Always);
        for object in objects.iter_mut() {
            // As fluxcd/pkg: an object that opts out is not even asked for the variables.
            if substitute::is_disabled(object) {
                continue;
            }
            // Named only on failure: a substitution that fails leaves the object as it was.
            let failed =
                |object: &Value, e: &substitute::SubstituteError| ManifestError::Substitute {
                    resource: resource_id(object),
                    message: e.as_fluxs(),
                };
            let variables = inputs.variables.map_err(|e| failed(object, e))?;
            if substitute::should_run(variables, always) {
                substitute::substitute_object(object, variables, inputs.strict_substitution)
                    .map_err(|e| failed(object, &e))?;
            }
        }
    }
    Ok(objects)
}

/// Whether `object` has the apiVersion, kind and name every Kubernetes object has; kustomize
/// builds documents without them, which Flux refuses before applying anything.
fn is_kubernetes_object(object: &Value) -> bool {
    let text = |value: Option<&Value>| value.and_then(Value::as_str).is_some_and(|t| !t.is_empty());
    text(object.get("apiVersion"))
        && text(object.get("kind"))
        && text(object.pointer("/metadata/name"))
}

/// The object as YAML for an error message; a Secret's values never reach a status.
fn shown_without_secrets(object: &Value) -> String {
    let mut shown = object.clone();
    if object.get("kind").and_then(Value::as_str) == Some("Secret")
        && let Some(fields) = shown.as_object_mut()
    {
        fields.remove("data");
        fields.remove("stringData");
    }
    yaml::to_yaml_string(&shown)
}

/// Merges `spec.images` into the kustomization's `images` as Flux 1.9.4 does: an entry for an
/// image the file already names overrides it field by field (`newName` when set; `newTag` and
/// `digest` together, as they both pick the version, so a fresh tag never sits beside a stale
/// digest), and other entries are appended.
fn merge_images(images: &mut Vec<Value>, overrides: &[crate::api::Image]) {
    for image in overrides {
        let existing = images
            .iter_mut()
            .find(|entry| entry.get("name").and_then(Value::as_str) == Some(image.name.as_str()))
            .and_then(Value::as_object_mut);
        let Some(entry) = existing else {
            images.push(serde_json::to_value(image).map_or(Value::Null, Value::from));
            continue;
        };
        let set = |entry: &mut crate::value::Map, key: &str, value: Option<&str>| {
            match value.filter(|v| !v.is_empty()) {
                Some(value) => entry.insert(key.to_string(), json!(value)),
                None => entry.remove(key),
            };
        };
        if let Some(new_name) = image.new_name.as_deref().filter(|n| !n.is_empty()) {
            set(entry, "newName", Some(new_name));
        }
        let new_tag = image.new_tag.as_deref().filter(|t| !t.is_empty());
        let digest = image.digest.as_deref().filter(|d| !d.is_empty());
        if new_tag.is_some() || digest.is_some() {
            set(entry, "newTag", new_tag);
            set(entry, "digest", digest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `resources` key in any letter case (the long `ſ` too), the last spelling in sorted
    /// order deciding, as Go's decoding of the kustomization does.
    #[test]
    fn resources_are_read_as_gos_decoding_reads_them() {
        for (kustomization, listed) in [
            (json!({"resources": ["a.yaml"]}), true),
            (json!({"RESOURCES": ["a.yaml"]}), true),
            (json!({"re\u{17f}ources": ["a.yaml"]}), true),
            (json!({"resources": []}), false),
            (json!({"Resources": ["a.yaml"], "resources": []}), false),
            (json!({"Resources": [], "resources": ["a.yaml"]}), true),
        ] {
            assert_eq!(has_resources(&kustomization), listed, "{kustomization}");
        }
    }

    /// kustomize's `Gvk.String()` and the name, as Flux's build errors print them.
    #[test]
    fn objects_are_named_as_kustomizes_resource_ids() {
        let cases = [
            (
                serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}),
                "Deployment.v1.apps/web",
            ),
            (
                serde_json::json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "token"}}),
                "Secret.v1.[noGrp]/token",
            ),
            (
                serde_json::json!({"metadata": {"name": "x"}}),
                "[noKind].[noVer].[noGrp]/x",
            ),
        ];
        for (object, expected) in cases {
            assert_eq!(resource_id(&Value::from(object)), expected);
        }
    }

    fn spec(extra: Value) -> KustomizationSpec {
        let mut base = json!({"interval": "5m", "prune": true, "sourceRef": {"kind": "GitRepository", "name": "r"}});
        if let (Some(base), Some(extra)) = (base.as_object_mut(), extra.as_object()) {
            base.extend(extra.clone());
        }
        serde_json::from_value(serde_json::Value::from(base)).unwrap()
    }

    /// Builds `dir` as an artifact of its own, with `spec` and the post-build `variables`.
    fn build_dir(
        dir: &Path,
        spec: &KustomizationSpec,
        variables: &BTreeMap<String, String>,
    ) -> Result<Vec<Value>, ManifestError> {
        build_dir_strictly(dir, spec, variables, false)
    }

    /// [`build_dir`], substituting strictly or not.
    fn build_dir_strictly(
        dir: &Path,
        spec: &KustomizationSpec,
        variables: &BTreeMap<String, String>,
        strict_substitution: bool,
    ) -> Result<Vec<Value>, ManifestError> {
        build(
            dir,
            dir,
            &Inputs {
                spec,
                keys: None,
                variables: Ok(variables),
                remote: None,
                strict_substitution,
                limits: Default::default(),
            },
        )
    }

    fn write(dir: &Path, name: &str, text: &str) {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn plain_directories_get_a_generated_kustomization_with_overrides() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path();
        write(
            dir,
            "a/cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  k: v\n",
        );
        write(dir, "a/empty.yaml", "# nothing here yet\n");
        write(dir, "readme.md", "# hi\n");
        write(dir, "values.json", "{\"just\": \"text\"}\n");
        write(dir, "sub/kustomization.yaml", "resources:\n- deploy.yaml\n");
        write(
            dir,
            "sub/deploy.yaml",
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n",
        );
        let spec = spec(json!({"targetNamespace": "apps", "namePrefix": "p-",
            "patches": [{"patch": "- op: add\n  path: /data/extra\n  value: x\n", "target": {"kind": "ConfigMap"}}]}));
        let variables = BTreeMap::new();
        let objects = build_dir(dir, &spec, &variables).unwrap();
        let names: Vec<String> = objects
            .iter()
            .map(|o| {
                format!(
                    "{}/{}/{}",
                    o["kind"].as_str().unwrap(),
                    o["metadata"]["namespace"].as_str().unwrap(),
                    o["metadata"]["name"].as_str().unwrap()
                )
            })
            .collect();
        assert_eq!(names, vec!["ConfigMap/apps/p-cm", "Secret/apps/p-s"]);
        assert_eq!(objects[0]["data"]["extra"], "x");
    }

    /// As Flux's generator: a YAML file in a plain directory that is not Kubernetes objects
    /// fails the build, naming the file and what is missing, in kyaml's words.
    #[test]
    fn a_plain_directory_with_a_yaml_file_that_is_not_an_object_fails_naming_it() {
        for (text, reason) in [
            ("just: text\n", "missing Resource metadata"),
            ("- a\n- b\n", "missing Resource metadata"),
            (
                "apiVersion: v1\nmetadata:\n  name: x\n",
                "missing kind in object",
            ),
            (
                "apiVersion: v1\nkind: ConfigMap\ndata: {}\n",
                "missing metadata.name in object (kind ConfigMap)",
            ),
            ("key: [unclosed\n", ""),
        ] {
            let root = tempfile::tempdir().unwrap();
            let dir = root.path();
            write(
                dir,
                "cm.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n",
            );
            write(dir, "ci/values.yaml", text);
            let error = kustomization_file(dir).unwrap_err().to_string();
            assert!(
                error.starts_with(
                    "failed to generate kustomization.yaml: failed to decode Kubernetes YAML from ci/values.yaml: "
                ) && error.contains(reason),
                "{text:?}: {error}"
            );
        }
        let root = tempfile::tempdir().unwrap();
        write(
            root.path(),
            "list.yaml",
            "apiVersion: v1\nkind: List\nitems: []\n",
        );
        assert!(
            kustomization_file(root.path()).is_ok(),
            "a List needs no name"
        );
    }

    #[test]
    fn substitution_and_missing_components() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path();
        write(dir, "kustomization.yaml", "resources:\n- cm.yaml\n");
        write(
            dir,
            "cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  env: ${cluster_env:=dev}\n  region: ${region}\n",
        );
        let spec_with = spec(
            json!({"postBuild": {"substitute": {"region": "eu"}}, "components": ["missing"], "ignoreMissingComponents": true}),
        );
        let variables: BTreeMap<String, String> = [("region".to_string(), "eu".to_string())].into();
        let objects = build_dir(dir, &spec_with, &variables).unwrap();
        assert_eq!(objects[0]["data"], json!({"env": "dev", "region": "eu"}));

        let outcome = |components: Value, ignore: bool| {
            // Each build writes its overrides into the file: start from the artifact's.
            write(dir, "kustomization.yaml", "resources:\n- cm.yaml\n");
            let spec = spec(json!({"components": components, "ignoreMissingComponents": ignore}));
            build_dir(dir, &spec, &variables)
                .map(|objects| objects.len())
                .map_err(|error| error.to_string())
        };
        // A missing one is left for kustomize to name, unless ignored.
        let missing = outcome(json!(["nope"]), false).unwrap_err();
        assert!(
            missing.contains("nope: No such file or directory"),
            "{missing}"
        );
        assert_eq!(outcome(json!(["nope"]), true), Ok(1));
        // As fluxcd/pkg's generator: remote or absolute, ignored or not.
        for remote in [
            "https://github.com/org/repo//c",
            "GitHub.com/org/repo",
            "/abs",
            "file:///c",
        ] {
            let expected = format!("component path '{remote}' must be local and relative");
            for ignore in [true, false] {
                assert_eq!(outcome(json!([remote]), ignore), Err(expected.clone()));
            }
        }
    }

    /// Flux refuses a built document without apiVersion (kustomize builds it), naming it as
    /// YAML; a Secret's values stay out of the message.
    #[test]
    fn objects_without_api_version_kind_or_name_fail_the_build() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path();
        write(dir, "kustomization.yaml", "resources:\n- all.yaml\n");
        let inputs =
            |spec: &KustomizationSpec| build_dir_strictly(dir, spec, &BTreeMap::new(), true);
        let empty = spec(json!({}));
        write(
            dir,
            "all.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fine\n---\npiVersion: pkg.crossplane.io/v1\nkind: Provider\nmetadata:\n  name: aws\n",
        );
        let error = inputs(&empty).unwrap_err().to_string();
        assert_eq!(
            error,
            "failed to decode Kubernetes apiVersion, kind and name from: kind: Provider\nmetadata:\n  name: aws\npiVersion: pkg.crossplane.io/v1\n"
        );
        write(
            dir,
            "all.yaml",
            "kind: Secret\nmetadata:\n  name: s\nstringData:\n  password: hunter2\n",
        );
        let error = inputs(&empty).unwrap_err().to_string();
        assert!(error.contains("kind: Secret"), "{error}");
        assert!(!error.contains("hunter2"), "{error}");
    }

    /// Flux 1.9.4: `spec.images` merge by name into the file's `images`, field by field.
    #[test]
    fn spec_images_merge_by_name_with_the_kustomization_file() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path();
        write(
            dir,
            "kustomization.yaml",
            "resources:\n- deploy.yaml\nimages:\n- name: web\n  newTag: \"1.0\"\n- name: db\n  newName: mirror/db\n  digest: sha256:aaaa\n",
        );
        write(
            dir,
            "deploy.yaml",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app\nspec:\n  template:\n    spec:\n      containers:\n      - name: web\n        image: web\n      - name: db\n        image: db:old\n      - name: cache\n        image: cache\n",
        );
        let spec = spec(json!({"images": [
            {"name": "web", "newName": "registry.example.com/web"},
            {"name": "db", "newTag": "2.0"},
            {"name": "cache", "newTag": "7"},
        ]}));
        let variables = BTreeMap::new();
        let objects = build_dir(dir, &spec, &variables).unwrap();
        let images: Vec<&str> = objects[0]["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["image"].as_str().unwrap())
            .collect();
        assert_eq!(
            images,
            ["registry.example.com/web:1.0", "mirror/db:2.0", "cache:7"],
            "newName kept the file's tag; a new tag dropped the file's digest"
        );
    }

    /// fluxcd/pkg's generator decodes the artifact's kustomization without strictness and,
    /// when it lists no resources, asks for origin annotations: unknown fields (at any level)
    /// are dropped, a generator-only kustomization's objects say where they came from, and
    /// one with nothing to build builds nothing.
    #[test]
    fn the_artifacts_kustomization_is_read_as_fluxs_generator_reads_it() {
        let build_tree = |kustomization: &str, spec: KustomizationSpec| {
            let root = tempfile::tempdir().unwrap();
            write(root.path(), "kustomization.yaml", kustomization);
            write(
                root.path(),
                "cm.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: listed\n",
            );
            let variables = BTreeMap::new();
            build_dir(root.path(), &spec, &variables)
        };
        let origin = |object: &Value| {
            object["metadata"]["annotations"]["config.kubernetes.io/origin"]
                .as_str()
                .map(str::to_string)
        };
        let generated = build_tree(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnotAField: x\nconfigMapGenerator:\n- name: settings\n  literals: [a=b]\n  typo: true\n",
            spec(json!({})),
        )
        .unwrap();
        assert_eq!(generated.len(), 1);
        assert_eq!(
            origin(&generated[0]).as_deref(),
            Some(
                "configuredIn: kustomization.yaml\nconfiguredBy:\n  apiVersion: builtin\n  kind: ConfigMapGenerator\n"
            )
        );
        let asked_otherwise = build_tree(
            "configMapGenerator:\n- name: settings\n  literals: [a=b]\n",
            spec(json!({"buildMetadata": ["transformerAnnotations"]})),
        )
        .unwrap();
        assert_eq!(
            origin(&asked_otherwise[0]),
            None,
            "the spec's buildMetadata wins"
        );
        let listed = build_tree("Resources:\n- cm.yaml\n", spec(json!({}))).unwrap();
        assert_eq!(
            origin(&listed[0]),
            None,
            "resources listed: nothing recorded"
        );
        let nothing = build_tree(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n",
            spec(json!({})),
        )
        .unwrap();
        assert!(nothing.is_empty(), "not an empty-kustomization error");
    }
}

#[cfg(test)]
#[path = "manifests_flux_pkg_tests.rs"]
mod flux_pkg_tests;
