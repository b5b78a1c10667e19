//! Who owns an applied object (the owner labels) and the per-object policies Flux reads from
//! its annotations or labels (`ssa`, `reconcile`, `force`, `prune`).

use serde_json::Value;

pub const NAME_LABEL: &str = "kustomize.toolkit.fluxcd.io/name";
pub const NAMESPACE_LABEL: &str = "kustomize.toolkit.fluxcd.io/namespace";
pub const SSA_ANNOTATION: &str = "kustomize.toolkit.fluxcd.io/ssa";
pub const FORCE_ANNOTATION: &str = "kustomize.toolkit.fluxcd.io/force";
pub const RECONCILE_ANNOTATION: &str = "kustomize.toolkit.fluxcd.io/reconcile";
pub const PRUNE_ANNOTATION: &str = "kustomize.toolkit.fluxcd.io/prune";

/// How an object is applied (`kustomize.toolkit.fluxcd.io/ssa`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SsaPolicy {
    /// Apply and take over fields other tools changed.
    #[default]
    Override,
    /// Apply only our fields; leave other managers' fields alone.
    Merge,
    /// Create when missing, never update.
    IfNotPresent,
    /// Never apply, never prune.
    Ignore,
}

/// The value of a label or annotation, compared case-insensitively as Flux does.
pub fn metadata_value<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    let metadata = object.get("metadata")?;
    ["annotations", "labels"].into_iter().find_map(|map| {
        metadata
            .get(map)
            .and_then(Value::as_object)
            .and_then(|m| m.get(key))
            .and_then(Value::as_str)
    })
}

fn has_value(object: &Value, key: &str, value: &str) -> bool {
    metadata_value(object, key).is_some_and(|v| v.eq_ignore_ascii_case(value))
}

pub fn ssa_policy(object: &Value) -> SsaPolicy {
    match metadata_value(object, SSA_ANNOTATION)
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("merge") => SsaPolicy::Merge,
        Some("ifnotpresent") => SsaPolicy::IfNotPresent,
        Some("ignore") => SsaPolicy::Ignore,
        _ => SsaPolicy::Override,
    }
}

pub fn reconcile_disabled(object: &Value) -> bool {
    has_value(object, RECONCILE_ANNOTATION, "disabled")
}

pub fn force_enabled(object: &Value) -> bool {
    has_value(object, FORCE_ANNOTATION, "enabled")
}

pub fn prune_disabled(object: &Value) -> bool {
    has_value(object, PRUNE_ANNOTATION, "disabled")
}

/// Who applies: stamped on every object as the owner labels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    pub name: String,
    pub namespace: String,
}

impl Owner {
    /// Whether a live object still carries this owner's labels.
    pub fn owns(&self, object: &Value) -> bool {
        let label = |key: &str| {
            object
                .pointer("/metadata/labels")
                .and_then(|l| l.get(key))
                .and_then(Value::as_str)
        };
        label(NAME_LABEL) == Some(self.name.as_str())
            && label(NAMESPACE_LABEL) == Some(self.namespace.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn policies_read_labels_or_annotations_case_insensitively() {
        let object = json!({"metadata": {"annotations": {SSA_ANNOTATION: "IfNotPresent"},
            "labels": {RECONCILE_ANNOTATION: "Disabled", FORCE_ANNOTATION: "enabled"}}});
        assert_eq!(ssa_policy(&object), SsaPolicy::IfNotPresent);
        assert!(reconcile_disabled(&object));
        assert!(force_enabled(&object));
        assert!(!prune_disabled(&object));
        assert_eq!(ssa_policy(&json!({})), SsaPolicy::Override);
        assert_eq!(
            ssa_policy(&json!({"metadata": {"labels": {SSA_ANNOTATION: "merge"}}})),
            SsaPolicy::Merge
        );
    }
}
