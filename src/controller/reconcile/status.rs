//! Conditions and history as Flux writes them on a Kustomization's status, and the status
//! write itself.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use kube::api::Patch;

use crate::api::{Kustomization, KustomizationStatus, Snapshot};
use crate::controller::KustomizationKey;
use crate::controller::context::Context;

/// Writes a status on `object`, as Flux's patcher does: a JSON merge patch of the status
/// subresource, from `base` (what the server holds) to `status`, as the status manager;
/// nothing when they are the same. Both come as their JSON text (`null` for none): a
/// reconciliation keeps what it last wrote that way, and the patch is worked out on the text.
pub(crate) async fn write(
    ctx: &Context,
    object: &Kustomization,
    base: &str,
    status: &str,
) -> Result<(), kube::Error> {
    let namespace = object.metadata.namespace.as_deref().unwrap_or("");
    let name = object.metadata.name.as_deref().unwrap_or("");
    let Some(patch) = status_patch(base, status).map_err(kube::Error::SerdeError)? else {
        return Ok(());
    };
    let patch = serde_json::value::RawValue::from_string(patch).map_err(kube::Error::SerdeError)?;
    let params = ctx.options.status_writes();
    // Only the answer's resourceVersion is read: it is asked for as metadata alone (the
    // server then sends neither spec nor status back), else the whole Kustomization.
    let mut request = kube::core::Request::new(Kustomization::url_path(&(), Some(namespace)))
        .patch_subresource("status", name, &params, &Patch::Merge(&patch))
        .map_err(kube::Error::BuildRequest)?;
    request.headers_mut().insert(
        http::header::ACCEPT,
        http::HeaderValue::from_static(METADATA_ONLY),
    );
    request.extensions_mut().insert("patch_status");
    let written: Written = ctx.client.request(request).await?;
    if let Some(version) = written.metadata.resource_version {
        ctx.own_writes
            .record_version(&KustomizationKey::new(namespace, name), &version);
    }
    Ok(())
}

/// The `Accept` of a request whose answer is read for its metadata alone: kube-apiserver
/// then answers with a `PartialObjectMetadata`, as it does client-go's metadata client;
/// plain JSON, the whole object, where it cannot.
const METADATA_ONLY: &str =
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";

/// What a status write's answer is read for.
#[derive(serde::Deserialize)]
struct Written {
    metadata: WrittenMetadata,
}

#[derive(serde::Deserialize)]
struct WrittenMetadata {
    #[serde(rename = "resourceVersion")]
    resource_version: Option<String>,
}

/// The body of the status write that turns the status `old` into `new` (both JSON text):
/// `{"status": <the merge patch>}`, none when they are equal. The status's fields are
/// compared as text, so a reconciliation that changed one field (its history, on every
/// no-change reconciliation) builds no JSON tree; a changed field that is an object on both
/// sides is patched key by key, as [`merge_patch`] does.
fn status_patch(old: &str, new: &str) -> serde_json::Result<Option<String>> {
    use serde_json::value::RawValue;
    use std::collections::BTreeMap;
    if old == new {
        return Ok(None);
    }
    let new_fields: Option<BTreeMap<String, &RawValue>> = serde_json::from_str(new)?;
    let old_fields: Option<BTreeMap<String, &RawValue>> = serde_json::from_str(old)?;
    let (Some(new_fields), Some(old_fields)) = (new_fields, old_fields) else {
        return Ok(Some(format!("{{\"status\":{new}}}")));
    };
    let is_object = |value: &RawValue| value.get().starts_with('{');
    let mut patch = String::with_capacity(new.len() / 2 + 16);
    patch.push_str("{\"status\":{");
    let field = |patch: &mut String, key: &str, value: &str| -> serde_json::Result<()> {
        if !patch.ends_with('{') {
            patch.push(',');
        }
        patch.push_str(&serde_json::to_string(key)?);
        patch.push(':');
        patch.push_str(value);
        Ok(())
    };
    for (key, value) in &new_fields {
        match old_fields.get(key) {
            Some(previous) if previous.get() == value.get() => {}
            Some(previous) if is_object(previous) && is_object(value) => {
                let previous: serde_json::Value = serde_json::from_str(previous.get())?;
                let value: serde_json::Value = serde_json::from_str(value.get())?;
                if let Some(changed) = merge_patch(&previous, &value) {
                    field(&mut patch, key, &changed.to_string())?;
                }
            }
            _ => field(&mut patch, key, value.get())?,
        }
    }
    for key in old_fields
        .keys()
        .filter(|key| !new_fields.contains_key(*key))
    {
        field(&mut patch, key, "null")?;
    }
    if patch.ends_with('{') {
        return Ok(None);
    }
    patch.push_str("}}");
    Ok(Some(patch))
}

/// The JSON merge patch (RFC 7386) that turns `old` into `new`: objects are patched key by
/// key (a key `new` lacks is set to null), anything else is replaced whole; none when they
/// are equal.
fn merge_patch(old: &serde_json::Value, new: &serde_json::Value) -> Option<serde_json::Value> {
    use serde_json::{Map, Value};
    if old == new {
        return None;
    }
    let (Value::Object(old), Value::Object(new)) = (old, new) else {
        return Some(new.clone());
    };
    let mut patch = Map::new();
    for (key, value) in new {
        let changed = match old.get(key) {
            Some(previous) => merge_patch(previous, value),
            None => Some(value.clone()),
        };
        if let Some(changed) = changed {
            patch.insert(key.clone(), changed);
        }
    }
    for key in old.keys().filter(|key| !new.contains_key(*key)) {
        patch.insert(key.clone(), Value::Null);
    }
    Some(Value::Object(patch))
}

pub const READY: &str = "Ready";
pub const RECONCILING: &str = "Reconciling";
pub const HEALTHY: &str = "Healthy";
pub const STALLED: &str = "Stalled";

/// Flux's condition reasons.
pub mod reason {
    pub const SUCCEEDED: &str = "ReconciliationSucceeded";
    pub const FAILED: &str = "ReconciliationFailed";
    pub const ARTIFACT_FAILED: &str = "ArtifactFailed";
    pub const BUILD_FAILED: &str = "BuildFailed";
    pub const PRUNE_FAILED: &str = "PruneFailed";
    pub const HEALTH_CHECK_FAILED: &str = "HealthCheckFailed";
    pub const DEPENDENCY_NOT_READY: &str = "DependencyNotReady";
    pub const ACCESS_DENIED: &str = "AccessDenied";
    pub const INVALID_CEL: &str = "InvalidCELExpression";
    pub const PROGRESSING: &str = "Progressing";
    pub const PROGRESSING_WITH_RETRY: &str = "ProgressingWithRetry";
    pub const HEALTH_SUCCEEDED: &str = "Succeeded";
    pub const FEATURE_GATE_DISABLED: &str = "FeatureGateDisabled";
    pub const HEALTH_CHECK_CANCELED: &str = "HealthCheckCanceled";
    /// Beyond Flux: the prune guard stopped a prune (see `prune_guard`).
    pub const PRUNE_GUARDED: &str = "PruneGuarded";
    /// Beyond Flux: the prune guard's annotation is not a threshold.
    pub const INVALID_PRUNE_GUARD: &str = "InvalidPruneGuard";
    /// Beyond Flux: the drift detection annotation is neither `warn` nor `correct`.
    pub const INVALID_DRIFT_MODE: &str = "InvalidDriftDetectionMode";
}

/// Condition messages are capped as fluxcd/pkg's `conditions.Set` caps them (32,768 bytes,
/// the last three `...`), so a huge error cannot bloat the object; the cut falls on a
/// character boundary.
pub const MAX_MESSAGE: usize = 32_768;
const TRIMMED: &str = "...";

fn cap(message: &str) -> String {
    if message.len() <= MAX_MESSAGE {
        return message.to_string();
    }
    let mut end = MAX_MESSAGE - TRIMMED.len();
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{TRIMMED}", &message[..end])
}

pub fn now() -> Time {
    Time(Timestamp::now())
}

/// Sets a condition as fluxcd/pkg's `conditions.Set`: its transition time moves when its
/// status, reason or message changes, and the conditions stay in Flux's order
/// ([`flux_order`]).
pub fn set(
    status: &mut KustomizationStatus,
    type_: &str,
    value: &str,
    reason: &str,
    message: &str,
    generation: Option<i64>,
) {
    let message = cap(message);
    match status.conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(condition) => {
            if condition.status != value
                || condition.reason != reason
                || condition.message != message
            {
                condition.last_transition_time = now();
            }
            condition.status = value.to_string();
            condition.reason = reason.to_string();
            condition.message = message;
            condition.observed_generation = generation;
        }
        None => status.conditions.push(Condition {
            type_: type_.to_string(),
            status: value.to_string(),
            reason: reason.to_string(),
            message,
            observed_generation: generation,
            last_transition_time: now(),
        }),
    }
    status.conditions.sort_by(flux_order);
}

/// fluxcd/pkg's order of conditions, for kubectl's reader: Stalled, Reconciling and Ready
/// first, then the others by the newest generation observed and by type.
fn flux_order(a: &Condition, b: &Condition) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let weight = |c: &Condition| match c.type_.as_str() {
        STALLED => Some(0),
        RECONCILING => Some(1),
        READY => Some(2),
        _ => None,
    };
    match (weight(a), weight(b)) {
        (Some(x), Some(y)) => x.cmp(&y),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => {
            let (x, y) = (
                a.observed_generation.unwrap_or(0),
                b.observed_generation.unwrap_or(0),
            );
            y.cmp(&x).then_with(|| a.type_.cmp(&b.type_))
        }
    }
}

pub fn remove(status: &mut KustomizationStatus, type_: &str) {
    status.conditions.retain(|c| c.type_ != type_);
}

pub fn get<'a>(status: &'a KustomizationStatus, type_: &str) -> Option<&'a Condition> {
    status.conditions.iter().find(|c| c.type_ == type_)
}

/// What a history snapshot records about a reconciled build.
#[derive(Clone, Copy, Debug)]
pub struct Reconciled<'a> {
    /// The digest of the built objects.
    pub digest: &'a str,
    /// How it ended: Flux's reason (ReconciliationSucceeded, HealthCheckFailed, …).
    pub outcome: &'a str,
    pub duration: std::time::Duration,
    pub revision: &'a str,
    pub origin_revision: Option<&'a str>,
}

/// Records a reconciliation in `status.history` as Flux's `History.Upsert`: a snapshot with
/// the same digest and outcome is updated and moved to the front, else a new one goes there;
/// five are kept.
pub fn record_history(status: &mut KustomizationStatus, reconciled: &Reconciled<'_>) {
    let when = now();
    let duration = crate::api::GoDuration::from_std(reconciled.duration).to_string();
    let mut metadata: std::collections::BTreeMap<String, String> =
        [("revision".to_string(), reconciled.revision.to_string())].into();
    if let Some(origin) = reconciled.origin_revision {
        metadata.insert("originRevision".into(), origin.to_string());
    }
    let metadata = Some(metadata.into_iter().collect());
    let same = status.history.iter().position(|s| {
        s.digest == reconciled.digest && s.last_reconciled_status == reconciled.outcome
    });
    match same {
        Some(index) => {
            let mut snapshot = status.history.remove(index);
            snapshot.last_reconciled = when;
            snapshot.last_reconciled_duration = duration;
            snapshot.total_reconciliations += 1;
            snapshot.metadata = metadata;
            status.history.insert(0, snapshot);
        }
        None => status.history.insert(
            0,
            Snapshot {
                digest: reconciled.digest.to_string(),
                first_reconciled: when.clone(),
                last_reconciled: when,
                last_reconciled_duration: duration,
                last_reconciled_status: reconciled.outcome.to_string(),
                metadata,
                total_reconciliations: 1,
            },
        ),
    }
    status.history.truncate(5);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A status as a reconciliation of two objects leaves it.
    fn applied_status() -> KustomizationStatus {
        serde_json::from_value(json!({
            "observedGeneration": 2,
            "lastAppliedRevision": "main@sha1:1111",
            "lastAttemptedRevision": "main@sha1:1111",
            "conditions": [{"type": "Ready", "status": "True", "reason": "ReconciliationSucceeded",
                "message": "Applied revision: main@sha1:1111", "observedGeneration": 2,
                "lastTransitionTime": "2026-11-27T00:00:00Z"}],
            "inventory": {"entries": [{"id": "apps_a_apps_Deployment", "v": "v1"},
                {"id": "apps_a__Service", "v": "v1"}]},
            "history": [{"digest": "sha256:aa", "firstReconciled": "2026-11-27T00:00:00Z",
                "lastReconciled": "2026-11-27T00:00:00Z", "lastReconciledDuration": "12ms",
                "lastReconciledStatus": "ReconciliationSucceeded", "totalReconciliations": 1,
                "metadata": {"revision": "main@sha1:1111"}}],
        }))
        .unwrap()
    }

    /// The status write's body, worked out on the JSON text, is `{"status": …}` around the
    /// merge patch of the two statuses' JSON trees (or nothing, as that gives nothing), and
    /// applied to the old status it gives the new one.
    #[test]
    fn status_patches_are_the_merge_patch_of_the_two_statuses() {
        let base = applied_status();
        type Change = (&'static str, fn(&mut KustomizationStatus));
        let changes: [Change; 9] = [
            ("nothing", |_| {}),
            ("a no-change reconciliation's history", |s| {
                s.history[0].last_reconciled = s.history[0].first_reconciled.clone();
                s.history[0].total_reconciliations = 2;
                s.history[0].last_reconciled_duration = "1ms".into();
            }),
            ("a handled request", |s| {
                s.last_handled_reconcile_at = Some("now".into())
            }),
            ("a field dropped", |s| s.last_applied_revision = None),
            ("an object pruned from the inventory", |s| {
                s.inventory.as_mut().unwrap().entries.pop();
            }),
            ("the inventory dropped", |s| s.inventory = None),
            ("conditions and generation", |s| {
                s.observed_generation = 3;
                s.conditions[0].status = "False".into();
            }),
            ("the history emptied", |s| s.history.clear()),
            ("everything reset", |s| *s = KustomizationStatus::default()),
        ];
        for (what, change) in changes {
            let mut new = base.clone();
            change(&mut new);
            for old in [Some(&base), None] {
                let old_text = serde_json::to_string(&old).unwrap();
                let new_text = serde_json::to_string(&new).unwrap();
                let body = status_patch(&old_text, &new_text).unwrap();
                let old_tree = serde_json::to_value(old).unwrap();
                let new_tree = serde_json::to_value(&new).unwrap();
                let want = merge_patch(&old_tree, &new_tree).map(|patch| json!({"status": patch}));
                let body: Option<serde_json::Value> =
                    body.map(|body| serde_json::from_str(&body).unwrap());
                assert_eq!(body, want, "{what}, from {old_text}");
                if let Some(body) = body {
                    let mut applied = json!({"status": old_tree});
                    json_patch::merge(&mut applied, &body);
                    assert_eq!(applied["status"], new_tree, "{what}: {body}");
                }
            }
        }
    }

    /// RFC 7386's own examples (appendix A) that a status can hold (no nulls in the target),
    /// each read backwards: the patch from the original to the result.
    #[test]
    fn merge_patches_turn_the_old_status_into_the_new() {
        let rows = [
            (
                json!({"a": "b"}),
                json!({"a": "c"}),
                Some(json!({"a": "c"})),
            ),
            (
                json!({"a": "b"}),
                json!({"a": "b", "b": "c"}),
                Some(json!({"b": "c"})),
            ),
            (json!({"a": "b"}), json!({}), Some(json!({"a": null}))),
            (
                json!({"a": "b", "b": "c"}),
                json!({"b": "c"}),
                Some(json!({"a": null})),
            ),
            (
                json!({"a": ["b"]}),
                json!({"a": "c"}),
                Some(json!({"a": "c"})),
            ),
            (
                json!({"a": "c"}),
                json!({"a": ["b"]}),
                Some(json!({"a": ["b"]})),
            ),
            (
                json!({"a": {"b": "c"}}),
                json!({"a": {"b": "d"}}),
                Some(json!({"a": {"b": "d"}})),
            ),
            (
                json!({"a": [{"b": "c"}]}),
                json!({"a": [1]}),
                Some(json!({"a": [1]})),
            ),
            (
                json!(["a", "b"]),
                json!(["c", "d"]),
                Some(json!(["c", "d"])),
            ),
            (json!({"a": "b"}), json!(["c"]), Some(json!(["c"]))),
            (
                json!({"e": null}),
                json!({"a": 1}),
                Some(json!({"a": 1, "e": null})),
            ),
            (
                json!([1, 2]),
                json!({"a": "b", "c": null}),
                Some(json!({"a": "b", "c": null})),
            ),
            (
                json!({}),
                json!({"a": {"bb": {}}}),
                Some(json!({"a": {"bb": {}}})),
            ),
            (json!({"a": {"b": "c"}}), json!({"a": {"b": "c"}}), None),
        ];
        for (old, new, want) in rows {
            assert_eq!(merge_patch(&old, &new), want, "{old} -> {new}");
            // Applied to the old value, the patch gives the new one (where it holds no null,
            // which a merge patch cannot express).
            if let Some(patch) = &want
                && !new.to_string().contains("null")
            {
                let mut applied = old.clone();
                json_patch::merge(&mut applied, patch);
                assert_eq!(applied, new, "{old} + {patch}");
            }
        }
        // A status that did not exist yet is written whole.
        assert_eq!(
            merge_patch(&serde_json::Value::Null, &json!({"observedGeneration": 1})),
            Some(json!({"observedGeneration": 1}))
        );
    }

    /// fluxcd/pkg's `conditions.Set`: the transition time moves with the status, reason or
    /// message, not with the generation alone; the order is Stalled, Reconciling, Ready, then
    /// the others by newest generation and type; a long message is cut to 32,768 bytes
    /// ending in "...".
    #[test]
    fn conditions_keep_transition_times_and_order_as_fluxcd_pkg() {
        let mut status = KustomizationStatus::default();
        let long_ago = Time("2026-01-01T00:00:00Z".parse().unwrap());
        let set_ready = |status: &mut KustomizationStatus, value, reason, message, generation| {
            set(status, READY, value, reason, message, Some(generation));
            get(status, READY).unwrap().last_transition_time.clone()
        };
        set_ready(&mut status, "Unknown", reason::PROGRESSING, "working", 1);
        let age = |status: &mut KustomizationStatus| {
            status.conditions[0].last_transition_time = long_ago.clone();
        };
        age(&mut status);
        let cases = [
            ("Unknown", reason::PROGRESSING, "working", 2, false),
            ("Unknown", reason::PROGRESSING, "still working", 2, true),
            (
                "Unknown",
                reason::DEPENDENCY_NOT_READY,
                "still working",
                2,
                true,
            ),
            (
                "False",
                reason::DEPENDENCY_NOT_READY,
                "still working",
                2,
                true,
            ),
        ];
        for (value, why, message, generation, moves) in cases {
            age(&mut status);
            let time = set_ready(&mut status, value, why, message, generation);
            assert_eq!(
                time != long_ago,
                moves,
                "{value} {why} {message} {generation}"
            );
            assert_eq!(status.conditions[0].observed_generation, Some(generation));
        }
        for type_ in [HEALTHY, "Apples", RECONCILING, STALLED] {
            set(
                &mut status,
                type_,
                "True",
                reason::PROGRESSING,
                "x",
                Some(2),
            );
        }
        set(
            &mut status,
            "Zebra",
            "True",
            reason::PROGRESSING,
            "x",
            Some(3),
        );
        let order: Vec<&str> = status.conditions.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(
            order,
            [STALLED, RECONCILING, READY, "Zebra", "Apples", HEALTHY]
        );
        set(
            &mut status,
            READY,
            "False",
            reason::BUILD_FAILED,
            &format!("{}é", "x".repeat(40_000)),
            Some(1),
        );
        let message = &get(&status, READY).unwrap().message;
        assert_eq!(message.len(), MAX_MESSAGE);
        assert!(
            message.ends_with("x..."),
            "{}",
            &message[message.len() - 8..]
        );
        let multibyte = format!("{}{}", "x".repeat(MAX_MESSAGE - 4), "é".repeat(10));
        set(
            &mut status,
            READY,
            "False",
            reason::BUILD_FAILED,
            &multibyte,
            Some(1),
        );
        let message = &get(&status, READY).unwrap().message;
        assert!(
            message.len() <= MAX_MESSAGE && message.ends_with("..."),
            "{}",
            message.len()
        );
        remove(&mut status, RECONCILING);
        assert!(get(&status, RECONCILING).is_none());
    }

    #[test]
    fn history_is_upserted_by_digest_and_outcome_as_flux() {
        let mut status = KustomizationStatus::default();
        let mut record = |digest: &str, outcome: &str| {
            record_history(
                &mut status,
                &Reconciled {
                    digest,
                    outcome,
                    duration: std::time::Duration::from_millis(1500),
                    revision: "main@sha1:abc",
                    origin_revision: Some("v1.0.0@sha1:def"),
                },
            );
        };
        for i in 0..7 {
            record(&format!("sha256:{i}"), reason::SUCCEEDED);
        }
        record("sha256:6", reason::SUCCEEDED);
        record("sha256:6", reason::HEALTH_CHECK_FAILED);
        assert_eq!(status.history.len(), 5);
        assert_eq!(status.history[0].digest, "sha256:6");
        assert_eq!(
            status.history[0].last_reconciled_status,
            reason::HEALTH_CHECK_FAILED
        );
        assert_eq!(status.history[0].total_reconciliations, 1);
        assert_eq!(status.history[1].digest, "sha256:6");
        assert_eq!(status.history[1].total_reconciliations, 2);
        assert_eq!(status.history[1].last_reconciled_duration, "1.5s");
        let metadata = status.history[0].metadata.clone().unwrap();
        assert_eq!(metadata["revision"], "main@sha1:abc");
        assert_eq!(metadata["originRevision"], "v1.0.0@sha1:def");
    }
}
