//! Build provenance: where each object came from and which transformers ran over it.
//!
//! Recorded only when asked for (the top kustomization's `buildMetadata`, or the caller's
//! provenance option), so a plain build pays nothing. As kustomize does, an origin names the
//! file a resource was read from (`path`) or the file and built-in kind that generated it
//! (`configuredIn`, `configuredBy`), with paths relative to the top kustomization; every
//! configured transformer appends itself to the transformations of every resource
//! accumulated when it runs. At the end the records become the `config.kubernetes.io/origin`
//! and `alpha.config.kubernetes.io/transformations` annotations, and the managed-by label.

use std::path::{Component, Path, PathBuf};

use crate::value::Value;
use serde::Serialize;

use super::resource::{ResId, Resource};
use crate::yaml::{Ordered, ordered_to_yaml_string};

pub const ORIGIN_ANNOTATION: &str = "config.kubernetes.io/origin";
pub const TRANSFORMATIONS_ANNOTATION: &str = "alpha.config.kubernetes.io/transformations";
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// The kustomize release this engine matches, as kustomize writes it in the managed-by label.
pub const MANAGED_BY_VALUE: &str = "kustomize-v5.8.1";

/// What to record and write.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tracking {
    pub origins: bool,
    pub transformations: bool,
    pub managed_by: bool,
}

impl Tracking {
    pub fn any(self) -> bool {
        self.origins || self.transformations
    }

    /// The options of a `buildMetadata` list; unknown options are ignored, as kustomize does.
    pub fn from_build_metadata(options: &[String]) -> Tracking {
        Tracking {
            origins: options.iter().any(|o| o == "originAnnotations"),
            transformations: options.iter().any(|o| o == "transformerAnnotations"),
            managed_by: options.iter().any(|o| o == "managedByLabel"),
        }
    }
}

/// The generator or transformer configuration behind an origin.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfiguredBy {
    pub api_version: String,
    pub kind: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
}

impl ConfiguredBy {
    pub fn builtin(kind: &str) -> ConfiguredBy {
        ConfiguredBy {
            api_version: "builtin".into(),
            kind: kind.into(),
            ..Default::default()
        }
    }
}

/// Where a resource or a transformation came from.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Origin {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub path: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub repo: String,
    #[serde(rename = "ref", skip_serializing_if = "String::is_empty")]
    pub git_ref: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub configured_in: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub configured_by: Option<ConfiguredBy>,
}

impl Origin {
    pub fn file(path: String) -> Origin {
        Origin {
            path,
            ..Default::default()
        }
    }

    pub fn configured(configured_in: String, by: ConfiguredBy) -> Origin {
        Origin {
            configured_in,
            configured_by: Some(by),
            ..Default::default()
        }
    }

    /// The YAML kustomize writes for an origin: fields in struct order, empty ones left out.
    fn to_ordered(&self) -> Ordered {
        let mut fields = Vec::new();
        for (key, value) in [
            ("path", &self.path),
            ("repo", &self.repo),
            ("ref", &self.git_ref),
            ("configuredIn", &self.configured_in),
        ] {
            if !value.is_empty() {
                fields.push((key.to_string(), Ordered::str(value.clone())));
            }
        }
        if let Some(by) = &self.configured_by {
            let mut by_fields = Vec::new();
            for (key, value) in [
                ("apiVersion", &by.api_version),
                ("kind", &by.kind),
                ("name", &by.name),
                ("namespace", &by.namespace),
            ] {
                if !value.is_empty() {
                    by_fields.push((key.to_string(), Ordered::str(value.clone())));
                }
            }
            fields.push(("configuredBy".to_string(), Ordered::Map(by_fields)));
        }
        Ordered::Map(fields)
    }
}

/// An output object with its provenance, for `build --provenance`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Provenance {
    pub api_version: String,
    pub kind: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    pub name: String,
    pub origin: Option<Origin>,
    pub transformations: Vec<Origin>,
}

impl Provenance {
    pub fn of(resource: &Resource) -> Provenance {
        let id: ResId = resource.id();
        Provenance {
            api_version: super::resource::str_at(&resource.object, "/apiVersion").to_string(),
            kind: id.kind,
            namespace: id.namespace,
            name: id.name,
            origin: resource.origin.as_deref().cloned(),
            transformations: resource.transformations.to_vec(),
        }
    }
}

/// A table of objects, their origins and the transformers that ran over them, for people.
pub fn provenance_table(entries: &[Provenance]) -> String {
    let describe = |origin: &Origin| -> String {
        let mut text = match &origin.configured_by {
            Some(by) if !by.name.is_empty() => format!("{} {}", by.kind, by.name),
            Some(by) => by.kind.clone(),
            None => String::new(),
        };
        let place = if origin.path.is_empty() {
            &origin.configured_in
        } else {
            &origin.path
        };
        if !place.is_empty() {
            text = if text.is_empty() {
                place.clone()
            } else {
                format!("{text} ({place})")
            };
        }
        if !origin.repo.is_empty() {
            text.push_str(&format!(
                " [{}{}]",
                origin.repo,
                if origin.git_ref.is_empty() {
                    String::new()
                } else {
                    format!("@{}", origin.git_ref)
                }
            ));
        }
        text
    };
    let rows: Vec<[String; 3]> = entries
        .iter()
        .map(|p| {
            let object = if p.namespace.is_empty() {
                format!("{}/{}", p.kind, p.name)
            } else {
                format!("{}/{}/{}", p.kind, p.namespace, p.name)
            };
            let origin = p
                .origin
                .as_ref()
                .map(describe)
                .unwrap_or_else(|| "-".into());
            let chain = if p.transformations.is_empty() {
                "-".to_string()
            } else {
                p.transformations
                    .iter()
                    .map(describe)
                    .collect::<Vec<_>>()
                    .join(" → ")
            };
            [object, origin, chain]
        })
        .collect();
    let header = [
        "OBJECT".to_string(),
        "ORIGIN".to_string(),
        "TRANSFORMED BY".to_string(),
    ];
    let widths: Vec<usize> = (0..2)
        .map(|c| {
            rows.iter()
                .chain(std::iter::once(&header))
                .map(|r| r[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in std::iter::once(&header).chain(&rows) {
        out.push_str(&format!(
            "{:w0$}  {:w1$}  {}\n",
            row[0],
            row[1],
            row[2],
            w0 = widths[0],
            w1 = widths[1]
        ));
    }
    out
}

/// Writes the requested annotations and label onto a finished resource.
pub fn annotate(resource: &mut Resource, tracking: Tracking) {
    if tracking.origins
        && let Some(origin) = resource.origin.clone()
    {
        let text = ordered_to_yaml_string(&origin.to_ordered());
        resource
            .metadata_map_mut("annotations")
            .insert(ORIGIN_ANNOTATION.into(), Value::String(text));
    }
    if tracking.transformations && !resource.transformations.is_empty() {
        let list = Ordered::Seq(
            resource
                .transformations
                .iter()
                .map(Origin::to_ordered)
                .collect(),
        );
        let text = ordered_to_yaml_string(&list);
        resource
            .metadata_map_mut("annotations")
            .insert(TRANSFORMATIONS_ANNOTATION.into(), Value::String(text));
    }
    if tracking.managed_by {
        resource.metadata_map_mut("labels").insert(
            MANAGED_BY_LABEL.into(),
            Value::String(MANAGED_BY_VALUE.into()),
        );
    }
}

/// `path` relative to `base` (both absolute), with `..` where it lies outside.
pub fn relative_to(path: &Path, base: &Path) -> String {
    let path: Vec<Component> = path.components().collect();
    let base: Vec<Component> = base.components().collect();
    let common = path.iter().zip(&base).take_while(|(a, b)| a == b).count();
    let mut relative = PathBuf::new();
    for _ in common..base.len() {
        relative.push("..");
    }
    for component in &path[common..] {
        relative.push(component.as_os_str());
    }
    relative.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_lists_origin_and_chain() {
        let entries = vec![Provenance {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: "team".into(),
            name: "cm".into(),
            origin: Some(Origin::file("../base/cm.yaml".into())),
            transformations: vec![
                Origin::configured(
                    "../base/kustomization.yaml".into(),
                    ConfiguredBy::builtin("NamespaceTransformer"),
                ),
                Origin::configured(
                    "labels.yaml".into(),
                    ConfiguredBy {
                        name: "my-labels".into(),
                        ..ConfiguredBy::builtin("LabelTransformer")
                    },
                ),
            ],
        }];
        assert_eq!(
            provenance_table(&entries),
            "OBJECT             ORIGIN           TRANSFORMED BY\n\
             ConfigMap/team/cm  ../base/cm.yaml  NamespaceTransformer (../base/kustomization.yaml) → LabelTransformer my-labels (labels.yaml)\n"
        );
    }

    #[test]
    fn relative_paths_climb_out_of_the_top_directory() {
        assert_eq!(
            relative_to(Path::new("/a/overlay/svc.yaml"), Path::new("/a/overlay")),
            "svc.yaml"
        );
        assert_eq!(
            relative_to(Path::new("/a/base/cm.yaml"), Path::new("/a/overlay")),
            "../base/cm.yaml"
        );
        assert_eq!(
            relative_to(Path::new("/x/y/z.yaml"), Path::new("/a/b")),
            "../../x/y/z.yaml"
        );
    }

    #[test]
    fn origins_print_in_struct_order() {
        let origin = Origin::configured(
            "../base/kustomization.yaml".into(),
            ConfiguredBy::builtin("ConfigMapGenerator"),
        );
        assert_eq!(
            ordered_to_yaml_string(&origin.to_ordered()),
            "configuredIn: ../base/kustomization.yaml\nconfiguredBy:\n  apiVersion: builtin\n  kind: ConfigMapGenerator\n"
        );
        let list = Ordered::Seq(vec![origin.to_ordered()]);
        assert_eq!(
            ordered_to_yaml_string(&list),
            "- configuredIn: ../base/kustomization.yaml\n  configuredBy:\n    apiVersion: builtin\n    kind: ConfigMapGenerator\n"
        );
    }
}
