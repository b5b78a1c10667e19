//! Flux kustomize-controller v1.9.4's own controller tests (`internal/controller/
//! kustomization_*_test.go`), ported: one test per Flux test, named after it, with its
//! scenario and assertions. `tests/FLUX_PARITY.md` maps each Flux test to its port.

mod access;
mod apply;
mod custom_resources;
mod decryptor;
mod dependson;
mod prune;
mod source;
mod transformer;
mod varsub;
mod wait;

use serde_json::json;

use crate::support::controller::Harness;

/// Flux's tests point every Kustomization at the test cluster through a `kubeconfig` Secret
/// (`createKubeConfigSecret`); this makes the same Secret, key `value`.
async fn kubeconfig_secret(harness: &Harness) {
    harness
        .cluster
        .apply(&json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "kubeconfig", "namespace": harness.cluster.namespace},
            "stringData": {"value": harness.cluster.kubeconfig_yaml()}}))
        .await;
}

/// The condition of `type_` on a Kustomization, if any.
fn condition<'a>(
    object: &'a kustomize_controller::api::Kustomization,
    type_: &str,
) -> Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    object
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
}

/// Whether the Kustomization has a condition of `type_` with `status`.
fn has_condition(
    object: &kustomize_controller::api::Kustomization,
    type_: &str,
    status: &str,
) -> bool {
    condition(object, type_).is_some_and(|c| c.status == status)
}

/// The reason of the Ready condition, empty without one.
fn ready_reason(object: &kustomize_controller::api::Kustomization) -> String {
    condition(object, "Ready")
        .map(|c| c.reason.clone())
        .unwrap_or_default()
}

/// Waits until the Kustomization applied `revision` (Flux's tests poll
/// `status.lastAppliedRevision`) and no reconciliation of it is under way (Ready is not
/// Unknown; Flux's tests check the status with kstatus right after), and returns it.
async fn applied(
    harness: &Harness,
    name: &str,
    revision: &str,
) -> kustomize_controller::api::Kustomization {
    eventually(harness, name, &format!("applied {revision}"), |object| {
        let Some(status) = object.status.as_ref() else {
            return false;
        };
        let settled = condition(object, "Ready").is_some_and(|c| c.status != "Unknown")
            && object.metadata.generation == Some(status.observed_generation);
        status.last_applied_revision.as_deref() == Some(revision) && settled
    })
    .await
}

/// Waits until `holds` is true of the Kustomization (Flux's `g.Eventually` on a fetched
/// object) and returns it; panics with `what` and the status when it never is.
async fn eventually(
    harness: &Harness,
    name: &str,
    what: &str,
    holds: impl Fn(&kustomize_controller::api::Kustomization) -> bool,
) -> kustomize_controller::api::Kustomization {
    eventually_within(
        harness,
        std::time::Duration::from_secs(30),
        name,
        what,
        holds,
    )
    .await
}

/// [`eventually`] for outcomes that take longer (a health check timing out).
async fn eventually_within(
    harness: &Harness,
    limit: std::time::Duration,
    name: &str,
    what: &str,
    holds: impl Fn(&kustomize_controller::api::Kustomization) -> bool,
) -> kustomize_controller::api::Kustomization {
    let api = harness.kustomizations();
    let found = crate::support::cluster::wait_for(limit, || async {
        let object = api.get(name).await.ok()?;
        holds(&object).then_some(object)
    })
    .await;
    match found {
        Some(object) => object,
        None => {
            let object = api.get(name).await.ok();
            panic!(
                "{name}: never {what}: {}",
                serde_json::to_string_pretty(&object.and_then(|o| o.status)).unwrap()
            )
        }
    }
}

/// Merge-patches the Kustomization, as Flux's tests `Update` a fetched object.
async fn patch_kustomization(harness: &Harness, name: &str, patch: serde_json::Value) {
    harness
        .kustomizations()
        .patch(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(patch),
        )
        .await
        .unwrap_or_else(|e| panic!("patching {name}: {e}"));
}

/// Waits until the Kustomization is gone (finalized).
async fn gone(harness: &Harness, name: &str) {
    let api = harness.kustomizations();
    let deleted = crate::support::cluster::wait_for(std::time::Duration::from_secs(30), || async {
        api.get_opt(name).await.ok()?.is_none().then_some(())
    })
    .await;
    assert!(deleted.is_some(), "{name} was not finalized");
}

/// fluxcd/pkg/runtime/conditions/check's failure checks, as Flux's tests run them on every
/// status they read (`kstatusCheck.CheckErr`, negative polarity: Stalled and Reconciling).
fn kstatus_check(object: &kustomize_controller::api::Kustomization) {
    let status = object.status.clone().unwrap_or_default();
    let generation = object.metadata.generation.unwrap_or(0);
    let observed = status.observed_generation;
    let get = |type_: &str| status.conditions.iter().find(|c| c.type_ == type_);
    let is = |type_: &str, value: &str| get(type_).is_some_and(|c| c.status == value);
    let mut failures = Vec::new();
    let ready = get("Ready");
    if ready.is_none() {
        failures.push("FAIL0002: Ready condition must always be present".to_string());
    }
    let ready_true = is("Ready", "True");
    for negative in ["Stalled", "Reconciling"] {
        if ready_true && is(negative, "True") {
            failures.push(format!("FAIL0001: {negative} is True while Ready is True"));
        }
    }
    if is("Reconciling", "True") && ready.is_some() && !is("Ready", "False") {
        failures.push("FAIL0003: Ready must be False when Reconciling is True".into());
    }
    if is("Stalled", "True") && ready.is_some() && !is("Ready", "False") {
        failures.push("FAIL0004: Ready must be False when Stalled is True".into());
    }
    if get("Reconciling").is_some() && get("Stalled").is_some() {
        failures.push("FAIL0005: only one of Reconciling and Stalled may be present".into());
    }
    if observed > generation {
        failures.push("FAIL0006: observedGeneration is above the generation".into());
    }
    if observed < generation && ready_true {
        failures.push("FAIL0007: Ready while observedGeneration is behind".into());
    }
    if ready_true {
        for condition in &status.conditions {
            if condition.observed_generation.unwrap_or(0) < generation {
                failures.push(format!(
                    "FAIL0008: {} has an older observedGeneration while Ready",
                    condition.type_
                ));
            }
            if condition.observed_generation.unwrap_or(0) != observed {
                failures.push(format!(
                    "FAIL0009: {} observedGeneration differs from the status' while Ready",
                    condition.type_
                ));
            }
        }
    }
    if is("Ready", "Unknown") && !is("Reconciling", "True") {
        failures.push("FAIL0011: Ready=Unknown needs Reconciling=True".into());
    }
    assert!(
        failures.is_empty(),
        "kstatus check failed: {failures:?}\n{}",
        serde_json::to_string_pretty(&status).unwrap()
    );
}

/// The Events about `name` (as `events_of`) once the last of them satisfies `last`: Events are
/// written in order but after the status, as Flux's event recorder writes them.
async fn events_through(
    harness: &Harness,
    name: &str,
    annotations: &[(&str, &str)],
    last: impl Fn(&k8s_openapi::api::core::v1::Event) -> bool,
) -> Vec<k8s_openapi::api::core::v1::Event> {
    let found = crate::support::cluster::wait_for(std::time::Duration::from_secs(10), || async {
        let events = events_of(harness, name, annotations).await;
        events.last().is_some_and(&last).then_some(events)
    })
    .await;
    match found {
        Some(events) => events,
        None => panic!(
            "the events of {name} end otherwise: {:#?}",
            events_of(harness, name, annotations).await
        ),
    }
}

/// The Events about the Kustomization `name`, those with one of `annotations` (key, value)
/// when any are given, as Flux's `getEvents`.
async fn events_of(
    harness: &Harness,
    name: &str,
    annotations: &[(&str, &str)],
) -> Vec<k8s_openapi::api::core::v1::Event> {
    let events: kube::Api<k8s_openapi::api::core::v1::Event> =
        kube::Api::namespaced(harness.cluster.client.clone(), &harness.cluster.namespace);
    let mut found: Vec<_> = events
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(name))
        .filter(|e| {
            annotations.is_empty()
                || annotations.iter().any(|(key, value)| {
                    e.metadata
                        .annotations
                        .as_ref()
                        .and_then(|a| a.get(*key))
                        .is_some_and(|v| v == value)
                })
        })
        .collect();
    found.sort_by_key(|e| e.metadata.creation_timestamp.clone());
    found
}
