//! The embedded kustomize build engine: a kustomization directory in, Kubernetes objects out.
//!
//! A pure library, with no Kubernetes client, async runtime or network, so the CLI, the
//! controller and the tests all build the same way. Data flows from the kustomization file
//! through the resource loader (files read under [`LoadRestrictions`]) into a list of JSON
//! objects, sorted into kustomize's legacy order, which [`to_yaml`] prints as `kustomize build`
//! does.
//!
//! This first cut reads `resources` (files, `kind: List` flattened, nested kustomization
//! directories); every other kustomization field is refused with an error naming it until the
//! engine implements it.

mod kustfile;
mod sort;

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::yaml::{self, Schema, YamlError};
pub use kustfile::KUSTOMIZATION_FILE_NAMES;

/// Which files a kustomization may read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LoadRestrictions {
    /// Files must sit in or below the directory of the kustomization that names them
    /// (`kustomize build`'s default).
    #[default]
    RootOnly,
    /// Files may sit anywhere inside the build root (Flux's `--load-restrictor=none` within
    /// the artifact).
    None,
}

/// How a build runs.
#[derive(Clone, Debug, Default)]
pub struct BuildOptions {
    pub load_restrictions: LoadRestrictions,
}

/// The objects a build produces, in output order.
pub type Resources = Vec<Value>;

/// Why a build failed; every variant names the file or field at fault.
#[derive(Debug, thiserror::Error)]
pub enum KustomizeError {
    #[error("unable to find one of 'kustomization.yaml', 'kustomization.yml' or 'Kustomization' in directory '{}'", .0.display())]
    MissingKustomization(PathBuf),

    #[error("Found multiple kustomization files under: {}", .0.display())]
    MultipleKustomizations(PathBuf),

    #[error("{}: kustomization is empty", .0.display())]
    EmptyKustomization(PathBuf),

    #[error("{}: invalid Kustomization: unknown field \"{field}\"", .file.display())]
    UnknownField { file: PathBuf, field: String },

    #[error("{}: field \"{field}\" is not supported by this build of the engine yet", .file.display())]
    UnsupportedField { file: PathBuf, field: String },

    #[error("{}: invalid Kustomization: {message}", .file.display())]
    InvalidKustomization { file: PathBuf, message: String },

    // The cause is part of the message, so it is deliberately not exposed as `source` too:
    // error chains would print it twice.
    #[error("{}: {error}", .file.display())]
    Yaml { file: PathBuf, error: YamlError },

    #[error("{}: {error}", .path.display())]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },

    #[error("security; file '{}' is not in or below '{}'", .file.display(), .root.display())]
    OutsideRoot { file: PathBuf, root: PathBuf },

    #[error("{}: cycle detected: the kustomization includes itself through {}", .dir.display(), .via.display())]
    Cycle { dir: PathBuf, via: PathBuf },

    #[error("{}: object {index} is not a Kubernetes object (expected a mapping with apiVersion, kind and metadata.name)", .file.display())]
    NotAnObject { file: PathBuf, index: usize },
}

/// Builds the kustomization in `dir`.
pub fn build(dir: &Path, options: &BuildOptions) -> Result<Resources, KustomizeError> {
    let dir = canonical(dir)?;
    let mut stack = Vec::new();
    let mut resources = build_dir(&dir, options, &mut stack)?;
    sort::legacy_sort(&mut resources);
    Ok(resources)
}

/// Prints objects as `kustomize build` does: documents separated by `---`.
pub fn to_yaml(resources: &[Value]) -> String {
    yaml::documents_to_yaml_string(resources)
}

fn build_dir(
    dir: &Path,
    options: &BuildOptions,
    stack: &mut Vec<PathBuf>,
) -> Result<Resources, KustomizeError> {
    if let Some(first) = stack.iter().find(|d| d.as_path() == dir) {
        return Err(KustomizeError::Cycle {
            dir: first.clone(),
            via: stack.last().cloned().unwrap_or_default(),
        });
    }
    stack.push(dir.to_path_buf());
    let kustomization = kustfile::load(dir)?;
    let mut resources = Vec::new();
    for entry in &kustomization.resources {
        let path = dir.join(entry);
        let resolved = canonical(&path)?;
        if resolved.is_dir() {
            resources.extend(build_dir(&resolved, options, stack)?);
        } else {
            if options.load_restrictions == LoadRestrictions::RootOnly && !resolved.starts_with(dir)
            {
                return Err(KustomizeError::OutsideRoot {
                    file: resolved,
                    root: dir.to_path_buf(),
                });
            }
            resources.extend(read_objects(&resolved)?);
        }
    }
    stack.pop();
    Ok(resources)
}

fn canonical(path: &Path) -> Result<PathBuf, KustomizeError> {
    path.canonicalize().map_err(|error| KustomizeError::Io {
        path: path.to_path_buf(),
        error,
    })
}

/// Reads the objects of a manifest file: every non-empty document, `kind: List` flattened.
fn read_objects(file: &Path) -> Result<Resources, KustomizeError> {
    let text = std::fs::read_to_string(file).map_err(|error| KustomizeError::Io {
        path: file.to_path_buf(),
        error,
    })?;
    let documents =
        yaml::parse_documents(&text, Schema::Kyaml).map_err(|error| KustomizeError::Yaml {
            file: file.to_path_buf(),
            error,
        })?;
    let mut objects = Vec::new();
    for document in documents.into_iter().filter(|d| !d.is_null()) {
        let is_list = document
            .get("kind")
            .and_then(Value::as_str)
            .is_some_and(|k| k.ends_with("List"))
            && document.get("items").is_some_and(Value::is_array);
        if is_list {
            if let Some(Value::Array(items)) = document.get("items") {
                objects.extend(items.iter().cloned());
            }
        } else {
            objects.push(document);
        }
    }
    for (index, object) in objects.iter().enumerate() {
        let named = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .is_some_and(|n| !n.is_empty());
        if !object.is_object() || object.get("kind").and_then(Value::as_str).is_none() || !named {
            return Err(KustomizeError::NotAnObject {
                file: file.to_path_buf(),
                index,
            });
        }
    }
    Ok(objects)
}
