//! What the apply stage decides for one object, over plain data: the object as built, the
//! live object (or its absence), the last apply the cache remembers, and what the server's
//! dry-run answered. [`super::stage`] asks the cluster for those and performs the decision;
//! nothing here makes a request.
//!
//! The decisions, in the order an object meets them (fluxcd/pkg `ssa` and Flux's apply):
//! skipped as built (`ssa: ignore`, `reconcile: disabled`) → skipped against the live object
//! (its own `ignore`/`disabled`, or `ssa: IfNotPresent` on an existing object) → ignored
//! fields left out or kept → unchanged since the last apply (same digest at the same
//! resourceVersion) → after the dry-run: unchanged, configured, recreated (an immutable field
//! with `force`) or refused.

use serde_json::Value;

use super::ownership;
use crate::objects::{SsaPolicy, force_enabled, reconcile_disabled, ssa_policy};

/// Whether the object as built asks not to be applied.
pub(super) fn skipped_as_built(object: &Value) -> bool {
    ssa_policy(object) == SsaPolicy::Ignore || reconcile_disabled(object)
}

/// Whether an object that exists is left as it is: the live object asks so, or the built one
/// is only to be created.
pub(super) fn skipped_as_live(built_policy: SsaPolicy, live: &Value) -> bool {
    ssa_policy(live) == SsaPolicy::Ignore
        || reconcile_disabled(live)
        || built_policy == SsaPolicy::IfNotPresent
}

/// What is sent for a field `spec.ignore` names.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum IgnoredField {
    /// Left out: it is not live, or another server-side-apply manager owns it (we never
    /// co-own it, and its owner's value stays).
    LeaveOut,
    /// Sent with its live value: we own it alone (or updates wrote it), and leaving it out
    /// would make server-side apply delete it.
    KeepLive(Value),
}

/// The server-side-apply managers whose fields an ignored field is left to: every one but
/// ours, except those this apply takes over first (ssa's cleanup moves their fields into our
/// entry before it judges ownership, so it keeps their values as ours; leaving such a field
/// out after taking it over would delete it).
pub(super) struct OtherAppliers<'a> {
    pub own: &'a str,
    /// `--override-manager` names; ignored unless `taking_over`.
    pub overrides: &'a [String],
    pub taking_over: bool,
}

impl OtherAppliers<'_> {
    fn is_other(&self, manager: &str) -> bool {
        manager != self.own
            && !(self.taking_over
                && super::drift::is_taken_over(manager, "Apply", self.own, self.overrides))
    }
}

pub(super) fn ignored_field(live: &Value, pointer: &str, others: &OtherAppliers) -> IgnoredField {
    match live.pointer(pointer) {
        Some(value)
            if !ownership::owned_by_another_applier(live, pointer, |m| others.is_other(m)) =>
        {
            IgnoredField::KeepLive(value.clone())
        }
        _ => IgnoredField::LeaveOut,
    }
}

/// What `spec.ignore`'s selectors are matched against for an object that exists: its kind
/// and name, with the live object's labels and annotations under the built ones', as in
/// the dry-run's answer ssa matches them on (another manager's label selects the object too).
pub(super) fn selection_view(object: &Value, live: &Value) -> Value {
    let merged = |field: &str| {
        let mut all = live["metadata"][field]
            .as_object()
            .cloned()
            .unwrap_or_default();
        if let Some(built) = object["metadata"][field].as_object() {
            all.extend(built.clone());
        }
        Value::Object(all)
    };
    serde_json::json!({
        "apiVersion": object["apiVersion"], "kind": object["kind"],
        "metadata": {"name": object["metadata"]["name"],
            "namespace": object["metadata"]["namespace"],
            "labels": merged("labels"), "annotations": merged("annotations")},
    })
}

/// Whether the last apply stands: the same object was applied to the live object's very
/// version (and no migration wrote since), so nothing can have drifted.
pub(super) fn unchanged_since_applied(
    cached: Option<(&str, &str)>,
    digest: &str,
    live_version: Option<&str>,
    migrated: bool,
) -> bool {
    match (cached, live_version) {
        (Some((cached_digest, cached_version)), Some(version)) => {
            !migrated && cached_digest == digest && cached_version == version
        }
        _ => false,
    }
}

/// Whether fields other managers took are taken back before the apply: never with the
/// merge policy (on either side), never while only planning.
pub(super) fn takes_over(applying: bool, built_policy: SsaPolicy, live: &Value) -> bool {
    applying && built_policy != SsaPolicy::Merge && ssa_policy(live) != SsaPolicy::Merge
}

/// What the dry-run said; a refusal carries what the caller reports if it stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DryRun<R> {
    /// It would apply; whether the result differs from the live object (ignored fields
    /// aside).
    Applies { drifted: bool },
    /// It refused an immutable field's change.
    Immutable(R),
}

/// What is done with an object that exists, once the dry-run answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict<R> {
    Unchanged,
    /// Applied (drift, a takeover or a migration to write).
    Configure,
    /// Deleted and created again: an immutable change with `force`.
    Recreate,
    /// The immutable change is an error: the dry-run's refusal.
    Refuse(R),
}

/// `force`: the controller's `--force`/`spec.force`, or either object's annotation.
pub(super) fn forced(force: bool, object: &Value, live: &Value) -> bool {
    force || force_enabled(object) || force_enabled(live)
}

pub(super) fn verdict<R>(
    dry_run: DryRun<R>,
    forced: bool,
    takeover: bool,
    migrated: bool,
) -> Verdict<R> {
    match dry_run {
        DryRun::Immutable(_) if forced => Verdict::Recreate,
        DryRun::Immutable(refusal) => Verdict::Refuse(refusal),
        DryRun::Applies { drifted } if drifted || takeover || migrated => Verdict::Configure,
        DryRun::Applies { .. } => Verdict::Unchanged,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn with(annotations: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "annotations": annotations}})
    }

    /// Flux's per-object policies (kustomize-controller docs, "Controlling the apply
    /// behavior"), as built and as live.
    #[test]
    fn policies_skip_as_flux_reads_them() {
        let ssa = "kustomize.toolkit.fluxcd.io/ssa";
        let reconcile = "kustomize.toolkit.fluxcd.io/reconcile";
        for (object, skipped) in [
            (with(json!({})), false),
            (with(json!({ssa: "Ignore"})), true),
            (with(json!({ssa: "ignore"})), true),
            (with(json!({ssa: "Merge"})), false),
            (with(json!({ssa: "IfNotPresent"})), false),
            (with(json!({reconcile: "disabled"})), true),
            (with(json!({reconcile: "Disabled"})), true),
        ] {
            assert_eq!(skipped_as_built(&object), skipped, "{object}");
        }
        let plain = with(json!({}));
        for (built, live, skipped) in [
            (SsaPolicy::Override, plain.clone(), false),
            (SsaPolicy::Merge, plain.clone(), false),
            (SsaPolicy::IfNotPresent, plain.clone(), true),
            (SsaPolicy::Override, with(json!({ssa: "Ignore"})), true),
            (
                SsaPolicy::Override,
                with(json!({reconcile: "disabled"})),
                true,
            ),
            (SsaPolicy::Override, with(json!({ssa: "Merge"})), false),
        ] {
            assert_eq!(skipped_as_live(built, &live), skipped, "{built:?} {live}");
        }
    }

    #[test]
    fn takeovers_wait_for_apply_and_never_merge() {
        let plain = with(json!({}));
        let merging = with(json!({"kustomize.toolkit.fluxcd.io/ssa": "merge"}));
        assert!(takes_over(true, SsaPolicy::Override, &plain));
        assert!(!takes_over(false, SsaPolicy::Override, &plain), "planning");
        assert!(!takes_over(true, SsaPolicy::Merge, &plain));
        assert!(!takes_over(true, SsaPolicy::Override, &merging));
    }

    #[test]
    fn ignored_fields_are_left_to_other_managers_and_kept_when_ours() {
        let live = json!({"spec": {"replicas": 3, "paused": false, "minReadySeconds": 5},
            "metadata": {"managedFields": [
                {"manager": "hpa", "operation": "Apply", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:spec": {"f:replicas": {}}}},
                {"manager": "kubectl", "operation": "Apply", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:spec": {"f:minReadySeconds": {}}}},
                {"manager": "kustomize-controller", "operation": "Apply", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:spec": {"f:paused": {}}}}]}});
        let hpa = ["hpa".to_string()];
        let none: [String; 0] = [];
        let rows = [
            // (pointer, taking over, `--override-manager=hpa`, what is sent)
            ("/spec/replicas", true, false, IgnoredField::LeaveOut),
            (
                "/spec/replicas",
                true,
                true,
                IgnoredField::KeepLive(json!(3)),
            ),
            ("/spec/replicas", false, true, IgnoredField::LeaveOut),
            (
                "/spec/minReadySeconds",
                true,
                false,
                IgnoredField::KeepLive(json!(5)),
            ),
            (
                "/spec/minReadySeconds",
                false,
                false,
                IgnoredField::LeaveOut,
            ),
            (
                "/spec/paused",
                true,
                false,
                IgnoredField::KeepLive(json!(false)),
            ),
            ("/spec/missing", true, false, IgnoredField::LeaveOut),
        ];
        for (pointer, taking_over, overriding, want) in rows {
            let others = OtherAppliers {
                own: "kustomize-controller",
                overrides: if overriding { &hpa } else { &none },
                taking_over,
            };
            assert_eq!(
                ignored_field(&live, pointer, &others),
                want,
                "{pointer} taking over: {taking_over}, overriding hpa: {overriding}"
            );
        }
    }

    #[test]
    fn ignore_selectors_see_the_live_labels_under_the_built_ones() {
        let built = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "apps",
                "labels": {"team": "a"}, "annotations": {"note": "built"}},
            "spec": {"replicas": 2}});
        let live = json!({"metadata": {"name": "web", "namespace": "apps",
            "labels": {"team": "b", "autoscaled": "true"}, "annotations": {"note": "live"}},
            "spec": {"replicas": 7}});
        assert_eq!(
            selection_view(&built, &live),
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "namespace": "apps",
                    "labels": {"team": "a", "autoscaled": "true"},
                    "annotations": {"note": "built"}}})
        );
    }

    #[test]
    fn the_last_apply_stands_only_at_the_same_version_and_digest() {
        let cached = Some(("d1", "42"));
        assert!(unchanged_since_applied(cached, "d1", Some("42"), false));
        assert!(
            !unchanged_since_applied(cached, "d2", Some("42"), false),
            "object changed"
        );
        assert!(
            !unchanged_since_applied(cached, "d1", Some("43"), false),
            "someone wrote"
        );
        assert!(
            !unchanged_since_applied(cached, "d1", Some("42"), true),
            "migrated"
        );
        assert!(!unchanged_since_applied(None, "d1", Some("42"), false));
        assert!(!unchanged_since_applied(cached, "d1", None, false));
    }

    /// fluxcd/pkg `ssa` (TestApply_Force, TestApply_SetNativeKinds…): an immutable change is
    /// recreated only when forced; otherwise the dry-run's drift, a takeover or a migration
    /// make a write.
    #[test]
    fn verdicts_after_the_dry_run() {
        use DryRun::*;
        use Verdict::*;
        let rows = [
            (
                Immutable("field is immutable"),
                true,
                false,
                false,
                Recreate,
            ),
            (
                Immutable("field is immutable"),
                false,
                false,
                false,
                Refuse("field is immutable"),
            ),
            (
                Immutable("field is immutable"),
                false,
                true,
                true,
                Refuse("field is immutable"),
            ),
            (Applies { drifted: true }, false, false, false, Configure),
            (Applies { drifted: false }, false, true, false, Configure),
            (Applies { drifted: false }, false, false, true, Configure),
            (Applies { drifted: false }, true, false, false, Unchanged),
            (Applies { drifted: false }, false, false, false, Unchanged),
        ];
        for (dry_run, forced, takeover, migrated, want) in rows {
            assert_eq!(
                verdict(dry_run, forced, takeover, migrated),
                want,
                "{dry_run:?} forced={forced} takeover={takeover} migrated={migrated}"
            );
        }
        let forced_object = with(json!({"kustomize.toolkit.fluxcd.io/force": "Enabled"}));
        let plain = with(json!({}));
        assert!(forced(false, &forced_object, &plain));
        assert!(
            forced(false, &plain, &forced_object),
            "the live object's annotation"
        );
        assert!(forced(true, &plain, &plain));
        assert!(!forced(false, &plain, &plain));
    }
}
