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

/// Whether the label or the annotation `key` has `value`, in any case: ssa's `AnyInMetadata`,
/// which looks at both.
fn has_value(object: &Value, key: &str, value: &str) -> bool {
    let Some(metadata) = object.get("metadata") else {
        return false;
    };
    ["annotations", "labels"].into_iter().any(|map| {
        metadata
            .get(map)
            .and_then(Value::as_object)
            .and_then(|m| m.get(key))
            .and_then(Value::as_str)
            .is_some_and(|v| v.eq_ignore_ascii_case(value))
    })
}

/// The `ssa` policy, as Flux's selectors find it (in label or annotation) and in the order
/// ssa consults them: Ignore (an exclusion), then IfNotPresent, then Merge.
pub fn ssa_policy(object: &Value) -> SsaPolicy {
    [
        ("ignore", SsaPolicy::Ignore),
        ("ifnotpresent", SsaPolicy::IfNotPresent),
        ("merge", SsaPolicy::Merge),
    ]
    .into_iter()
    .find(|(value, _)| has_value(object, SSA_ANNOTATION, value))
    .map_or(SsaPolicy::Override, |(_, policy)| policy)
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
        // ssa's AnyInMetadata: the label counts beside an annotation that says otherwise.
        let both = json!({"metadata": {"annotations": {SSA_ANNOTATION: "Override", PRUNE_ANNOTATION: "enabled"},
            "labels": {SSA_ANNOTATION: "IfNotPresent", PRUNE_ANNOTATION: "disabled"}}});
        assert_eq!(ssa_policy(&both), SsaPolicy::IfNotPresent);
        assert!(prune_disabled(&both));
    }
}
