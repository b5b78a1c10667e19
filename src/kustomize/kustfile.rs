//! Finding and reading the kustomization file of a directory.

use std::path::Path;

use serde_json::Value;

use super::KustomizeError;
use crate::yaml::{self, Schema};

/// The file names kustomize recognises, in its order of preference.
pub const KUSTOMIZATION_FILE_NAMES: [&str; 3] =
    ["kustomization.yaml", "kustomization.yml", "Kustomization"];

/// Every top-level field kustomize v5.5 accepts in a kustomization or component.
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
];

/// What this cut of the engine understands.
const SUPPORTED_FIELDS: &[&str] = &["apiVersion", "kind", "resources"];

/// The parts of a kustomization the engine uses.
#[derive(Debug, Default)]
pub struct Kustomization {
    pub resources: Vec<String>,
}

/// Reads the kustomization file of `dir`.
pub fn load(dir: &Path) -> Result<Kustomization, KustomizeError> {
    let present: Vec<_> = KUSTOMIZATION_FILE_NAMES
        .iter()
        .map(|n| dir.join(n))
        .filter(|p| p.is_file())
        .collect();
    let file = match present.as_slice() {
        [] => return Err(KustomizeError::MissingKustomization(dir.to_path_buf())),
        [one] => one.clone(),
        _ => return Err(KustomizeError::MultipleKustomizations(dir.to_path_buf())),
    };
    let text = std::fs::read_to_string(&file).map_err(|error| KustomizeError::Io {
        path: file.clone(),
        error,
    })?;
    let value =
        yaml::parse_single(&text, Schema::Kubernetes).map_err(|error| KustomizeError::Yaml {
            file: file.clone(),
            error,
        })?;
    let map = match value {
        Value::Null => return Err(KustomizeError::EmptyKustomization(file)),
        Value::Object(map) if map.is_empty() => {
            return Err(KustomizeError::EmptyKustomization(file));
        }
        Value::Object(map) => map,
        _ => {
            return Err(KustomizeError::InvalidKustomization {
                file,
                message: "expected a mapping".into(),
            });
        }
    };
    for field in map.keys() {
        if !KNOWN_FIELDS.contains(&field.as_str()) {
            return Err(KustomizeError::UnknownField {
                file,
                field: field.clone(),
            });
        }
        if !SUPPORTED_FIELDS.contains(&field.as_str()) {
            return Err(KustomizeError::UnsupportedField {
                file,
                field: field.clone(),
            });
        }
    }
    let resources = match map.get("resources") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(s) => Ok(s.clone()),
                other => Err(KustomizeError::InvalidKustomization {
                    file: file.clone(),
                    message: format!("resources: expected a list of strings, found {other}"),
                }),
            })
            .collect::<Result<_, _>>()?,
        Some(other) => {
            return Err(KustomizeError::InvalidKustomization {
                file,
                message: format!("resources: expected a list of strings, found {other}"),
            });
        }
    };
    Ok(Kustomization { resources })
}
