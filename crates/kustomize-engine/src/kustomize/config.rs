//! Transformer configuration: the field specs each built-in transformer uses.
//!
//! The defaults mirror Kustomize v5.8.1's built-in configuration (`builtin_fieldspecs.yaml`,
//! parsed once per process). A build extends them with `configurations:` files and with what
//! `crds:` declares, and the extensions of a base flow up into the kustomizations above it,
//! each step one [`TransformerConfig::merge`] as kustomize merges (which is not idempotent:
//! merging a configuration into nothing can drop specs, or find them conflicting).

use std::sync::{Arc, OnceLock};

use serde::Deserialize;

use super::kustfile::FieldSpec;
use super::resource::ResId;

/// Field specs per transformer, plus the name-reference table.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
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
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
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
    /// Kustomize's built-in configuration as it reads it (`MakeDefaultConfig`, sorted).
    pub fn builtin() -> &'static TransformerConfig {
        static BUILTIN: OnceLock<TransformerConfig> = OnceLock::new();
        BUILTIN.get_or_init(|| {
            let text = include_str!("builtin_fieldspecs.yaml");
            let value = crate::yaml::parse_single(text, crate::yaml::Schema::Kubernetes)
                .expect("builtin_fieldspecs.yaml is valid YAML");
            let builtin: TransformerConfig = serde_json::from_value(serde_json::Value::from(value))
                .expect("builtin_fieldspecs.yaml matches TransformerConfig");
            builtin.sorted()
        })
    }

    /// The built-in configuration as a kustomization without bases holds it: merged into
    /// nothing by its accumulator. Merging the built-in configuration into this again, or
    /// this into itself, changes nothing (a test shows it), so a build without
    /// configurations shares this one.
    pub fn defaults() -> Arc<TransformerConfig> {
        static DEFAULTS: OnceLock<Arc<TransformerConfig>> = OnceLock::new();
        DEFAULTS
            .get_or_init(|| {
                let mut defaults = TransformerConfig::default();
                defaults
                    .merge(TransformerConfig::builtin())
                    .expect("the built-in field specs do not conflict");
                Arc::new(defaults)
            })
            .clone()
    }

    /// Whether nothing is configured (an accumulator before its first merge).
    pub fn is_empty(&self) -> bool {
        self.lists().iter().all(|list| list.is_empty()) && self.name_reference.is_empty()
    }

    /// The configuration with each list sorted as kustomize sorts a configuration it reads.
    pub fn sorted(mut self) -> TransformerConfig {
        for list in self.lists_mut() {
            sort_by_gvk(list);
        }
        sort_name_references(&mut self.name_reference);
        self
    }

    fn lists(&self) -> [&Vec<FieldSpec>; 10] {
        [
            &self.name_prefix,
            &self.name_suffix,
            &self.namespace,
            &self.common_labels,
            &self.labels,
            &self.template_labels,
            &self.common_annotations,
            &self.var_reference,
            &self.images,
            &self.replicas,
        ]
    }

    fn lists_mut(&mut self) -> [&mut Vec<FieldSpec>; 10] {
        [
            &mut self.name_prefix,
            &mut self.name_suffix,
            &mut self.namespace,
            &mut self.common_labels,
            &mut self.labels,
            &mut self.template_labels,
            &mut self.common_annotations,
            &mut self.var_reference,
            &mut self.images,
            &mut self.replicas,
        ]
    }

    /// kustomize's `TransformerConfig.Merge`: adds `other`'s specs that this configuration
    /// lacks, each list then sorted. A spec for a field this one has with the other `create`
    /// is refused, naming the list as kustomize does (`CommonLabels`); the lists are merged in
    /// kustomize's order, so the first conflict is the one it reports.
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

/// Merges a list of another configuration as kustomize's `TransformerConfig.Merge` does:
/// [`merge_specs`], then sorted by GVK, kinds before the spec for every kind (so that, merged
/// into nothing again, a spec for every kind goes once any kind's spec for its path precedes
/// it).
fn merge_spec_lists(
    mine: &mut Vec<FieldSpec>,
    theirs: &[FieldSpec],
) -> Result<(), ConflictingFieldSpecs> {
    merge_specs(mine, theirs)?;
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

    fn with_prefix_specs(specs: Vec<FieldSpec>) -> TransformerConfig {
        TransformerConfig {
            name_prefix: specs,
            ..TransformerConfig::default()
        }
    }

    /// kustomize's merge into nothing: a configuration naming `metadata/name` for some kinds,
    /// merged into the defaults and the result into an empty accumulator, takes the place of
    /// the spec for every kind (its own upstream test `TestIssue4884`); merged into an
    /// accumulator a base filled, it does not. Specs of other paths stay, sorted by GVK.
    #[test]
    fn merged_specs_follow_kustomize_merge_and_order() {
        let user = with_prefix_specs(vec![
            spec("IngressHost", "metadata/name"),
            spec("IngressSecret", "metadata/name"),
        ]);
        let mut own = TransformerConfig::builtin().clone();
        own.merge(&user).unwrap();
        let mut fresh = TransformerConfig::default();
        fresh.merge(&own).unwrap();
        assert_eq!(
            fresh.name_prefix,
            [
                spec("IngressHost", "metadata/name"),
                spec("IngressSecret", "metadata/name")
            ]
        );
        let mut from_base = (*TransformerConfig::defaults()).clone();
        from_base.merge(&own).unwrap();
        assert_eq!(
            from_base.name_prefix,
            [
                spec("IngressHost", "metadata/name"),
                spec("IngressSecret", "metadata/name"),
                spec("", "metadata/name")
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

    /// What lets a build without configurations share one configuration: the defaults merged
    /// into nothing, the built-in configuration merged into them, and they into themselves,
    /// are all the defaults.
    #[test]
    fn the_defaults_are_a_fixed_point_of_the_merge() {
        let defaults = TransformerConfig::defaults();
        let mut again = (*defaults).clone();
        again.merge(TransformerConfig::builtin()).unwrap();
        assert_eq!(again, *defaults);
        again.merge(&defaults).unwrap();
        assert_eq!(again, *defaults);
    }
}
