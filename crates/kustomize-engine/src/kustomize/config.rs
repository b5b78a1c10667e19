//! Transformer configuration: the field specs each built-in transformer uses.
//!
//! The defaults mirror Kustomize v5.8.1's built-in configuration (`builtin_fieldspecs.yaml`,
//! parsed once per process). A build extends them with `configurations:` files and with what
//! `crds:` declares, and the extensions of a base flow up into the kustomizations above it.

use std::sync::{Arc, OnceLock};

use serde::Deserialize;

use super::kustfile::FieldSpec;
use super::resource::ResId;

/// Field specs per transformer, plus the name-reference table.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TransformerConfig {
    #[serde(default)]
    pub name_prefix: Vec<FieldSpec>,
    #[serde(default)]
    pub name_suffix: Vec<FieldSpec>,
    #[serde(default)]
    pub namespace: Vec<FieldSpec>,
    #[serde(default)]
    pub common_labels: Vec<FieldSpec>,
    /// Where every `labels:` entry's pairs go, selectors and templates or not (none built in).
    #[serde(default)]
    pub labels: Vec<FieldSpec>,
    #[serde(default)]
    pub template_labels: Vec<FieldSpec>,
    #[serde(default)]
    pub common_annotations: Vec<FieldSpec>,
    #[serde(default)]
    pub var_reference: Vec<FieldSpec>,
    #[serde(default)]
    pub images: Vec<FieldSpec>,
    #[serde(default)]
    pub replicas: Vec<FieldSpec>,
    #[serde(default)]
    pub name_reference: Vec<NameReference>,
}

/// A kind that others refer to by name, and the fields where they do.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NameReference {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub field_specs: Vec<FieldSpec>,
}

impl NameReference {
    /// Whether a resource of `id`'s kind is what this entry refers to.
    pub fn refers_to(&self, id: &ResId) -> bool {
        self.kind == id.kind
            && (self.group.is_empty() || self.group == id.group)
            && (self.version.is_empty() || self.version == id.version)
    }
}

impl TransformerConfig {
    /// Kustomize's built-in configuration.
    pub fn builtin() -> Arc<TransformerConfig> {
        static BUILTIN: OnceLock<Arc<TransformerConfig>> = OnceLock::new();
        BUILTIN
            .get_or_init(|| {
                let text = include_str!("builtin_fieldspecs.yaml");
                let value = crate::yaml::parse_single(text, crate::yaml::Schema::Kubernetes)
                    .expect("builtin_fieldspecs.yaml is valid YAML");
                let mut builtin: TransformerConfig =
                    serde_json::from_value(serde_json::Value::from(value))
                        .expect("builtin_fieldspecs.yaml matches TransformerConfig");
                sort_name_references(&mut builtin.name_reference);
                Arc::new(builtin)
            })
            .clone()
    }

    /// Adds `other`'s specs that this configuration lacks. A spec for a field this one has
    /// with the other `create` is refused, naming the list as kustomize does (`CommonLabels`);
    /// the lists are merged in kustomize's order, so the first conflict is the one it reports.
    pub fn merge(&mut self, other: &TransformerConfig) -> Result<(), &'static str> {
        let lists: [(&'static str, &mut Vec<FieldSpec>, &Vec<FieldSpec>); 7] = [
            ("NamePrefix", &mut self.name_prefix, &other.name_prefix),
            ("NameSuffix", &mut self.name_suffix, &other.name_suffix),
            ("NameSpace", &mut self.namespace, &other.namespace),
            (
                "CommonAnnotations",
                &mut self.common_annotations,
                &other.common_annotations,
            ),
            (
                "CommonLabels",
                &mut self.common_labels,
                &other.common_labels,
            ),
            ("Labels", &mut self.labels, &other.labels),
            (
                "TemplateLabels",
                &mut self.template_labels,
                &other.template_labels,
            ),
        ];
        for (section, mine, theirs) in lists {
            merge_spec_lists(mine, theirs).map_err(|ConflictingFieldSpecs| section)?;
        }
        merge_spec_lists(&mut self.var_reference, &other.var_reference)
            .map_err(|ConflictingFieldSpecs| "VarReference")?;
        for reference in &other.name_reference {
            match self.name_reference.iter_mut().find(|r| {
                r.kind == reference.kind
                    && r.group == reference.group
                    && r.version == reference.version
            }) {
                Some(existing) => merge_specs(&mut existing.field_specs, &reference.field_specs)
                    .map_err(|ConflictingFieldSpecs| "NameReference")?,
                None => self.name_reference.push(reference.clone()),
            }
        }
        sort_name_references(&mut self.name_reference);
        merge_spec_lists(&mut self.images, &other.images)
            .map_err(|ConflictingFieldSpecs| "Images")?;
        merge_spec_lists(&mut self.replicas, &other.replicas)
            .map_err(|ConflictingFieldSpecs| "Replicas")?;
        Ok(())
    }
}

/// Merges two configurations' lists as kustomize's `TransformerConfig.Merge` does, twice over
/// (a configuration is merged into its defaults, and the result into the accumulator):
/// [`merge_specs`], then sorted by GVK, kinds before the spec for every kind, so that a spec
/// for every kind goes once any kind's spec for its path precedes it.
fn merge_spec_lists(
    mine: &mut Vec<FieldSpec>,
    theirs: &[FieldSpec],
) -> Result<(), ConflictingFieldSpecs> {
    if theirs.is_empty() {
        return Ok(());
    }
    let mut merged = std::mem::take(mine);
    merge_specs(&mut merged, theirs)?;
    sort_by_gvk(&mut merged);
    merge_specs(mine, &merged)?;
    sort_by_gvk(mine);
    Ok(())
}

fn sort_by_gvk(specs: &mut [FieldSpec]) {
    specs.sort_by_cached_key(|spec| gvk_order(&spec.group, &spec.version, &spec.kind));
}

/// kyaml's `Gvk.IsLessThan`: the kind's rank, then `group_version_kind` with `~` for what is
/// empty.
fn gvk_order(group: &str, version: &str, kind: &str) -> (i32, String) {
    let or = |text: &str, empty: &'static str| -> String {
        if text.is_empty() {
            empty.to_string()
        } else {
            text.to_string()
        }
    };
    (
        super::sort::kind_rank(kind),
        format!(
            "{}_{}_{}",
            or(group, "~G"),
            or(version, "~V"),
            or(kind, "~K")
        ),
    )
}

/// kustomize keeps the name-reference table sorted by the referred-to kind's GVK (each
/// entry's is its own, so the order is total): which reference a resource's fields are
/// walked for first decides which error a malformed resource gets.
fn sort_name_references(references: &mut [NameReference]) {
    references.sort_by_cached_key(|r| gvk_order(&r.group, &r.version, &r.kind));
}

/// Appends the specs of `theirs` as kustomize's `FsSlice.MergeAll` does: one is left out
/// when a spec already kept has its path and a GVK it selects (its empty fields match
/// anything), so exact repeats go, and so does a spec for every kind after one for some kind.
/// The first such kept spec must agree on `create`.
pub fn merge_specs(
    mine: &mut Vec<FieldSpec>,
    theirs: &[FieldSpec],
) -> Result<(), ConflictingFieldSpecs> {
    for spec in theirs {
        let selected_by = |kept: &&FieldSpec| {
            kept.path == spec.path
                && (spec.group.is_empty() || kept.group == spec.group)
                && (spec.version.is_empty() || kept.version == spec.version)
                && (spec.kind.is_empty() || kept.kind == spec.kind)
        };
        match mine.iter().find(selected_by) {
            Some(kept) if kept.create != spec.create => return Err(ConflictingFieldSpecs),
            Some(_) => {}
            None => mine.push(spec.clone()),
        }
    }
    Ok(())
}

/// Two field specs for one field, one creating it and one not (kustomize's "conflicting
/// fieldspecs").
#[derive(Debug, PartialEq, Eq)]
pub struct ConflictingFieldSpecs;

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(kind: &str, path: &str) -> FieldSpec {
        FieldSpec {
            kind: kind.into(),
            path: path.into(),
            ..FieldSpec::default()
        }
    }

    /// kustomize's merge: a configuration naming `metadata/name` for some kinds takes the
    /// place of the spec for every kind (its own upstream test `TestIssue4884`), while specs
    /// of other paths stay, sorted by GVK.
    #[test]
    fn merged_specs_follow_kustomize_merge_and_order() {
        let mut prefix = vec![spec("", "metadata/name")];
        merge_spec_lists(
            &mut prefix,
            &[
                spec("IngressHost", "metadata/name"),
                spec("IngressSecret", "metadata/name"),
            ],
        )
        .unwrap();
        assert_eq!(
            prefix,
            [
                spec("IngressHost", "metadata/name"),
                spec("IngressSecret", "metadata/name")
            ]
        );
        let mut labels = vec![
            spec("", "metadata/labels"),
            spec("Deployment", "spec/selector"),
        ];
        merge_spec_lists(&mut labels, &[spec("Widget", "spec/labels")]).unwrap();
        assert_eq!(
            labels,
            [
                spec("Deployment", "spec/selector"),
                spec("Widget", "spec/labels"),
                spec("", "metadata/labels")
            ]
        );
    }
}
