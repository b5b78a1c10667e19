//! Flux's health-check tests (`kustomization_wait_test.go`): the Healthy condition through
//! success, progress, failure and recovery with its history entries and events; objects
//! skipped by `ssa: Ignore` are not waited on; CEL health checks that cannot evaluate say why.

use std::time::Duration;

use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::{applied, condition, events_of, events_through, gone, kstatus_check};
use crate::support::cluster::wait_for;
use crate::support::controller::{Harness, ready_message};

/// fluxcd/pkg's in-progress checks (`NewInProgressChecker`): Ready present, Stalled and
/// Reconciling not both, Ready False when Stalled, Reconciling True when Ready is Unknown.
fn kstatus_in_progress_check(object: &kustomize_controller::api::Kustomization) {
    let status = object.status.clone().unwrap_or_default();
    let get = |t: &str| status.conditions.iter().find(|c| c.type_ == t);
    assert!(get("Ready").is_some(), "FAIL0002");
    assert!(
        !(get("Stalled").is_some() && get("Reconciling").is_some()),
        "FAIL0005"
    );
    if get("Stalled").is_some_and(|c| c.status == "True") {
        assert_eq!(get("Ready").unwrap().status, "False", "FAIL0004");
    }
    if get("Ready").is_some_and(|c| c.status == "Unknown") {
        assert_eq!(
            get("Reconciling").map(|c| c.status.as_str()),
            Some("True"),
            "FAIL0011"
        );
    }
}

fn history(object: &kustomize_controller::api::Kustomization) -> Vec<serde_json::Value> {
    object
        .status
        .as_ref()
        .unwrap()
        .history
        .iter()
        .map(|h| serde_json::to_value(h).unwrap())
        .collect()
}

/// `TestKustomizationReconciler_WaitConditions`: Healthy through success, health checks in
/// progress (a reconcile request and a spec change), failure (kept Reconciling message with
/// the retry reason, the request handled, the generation not observed, a Warning event),
/// recovery (a Normal "Health check passed" event, the history entry of that digest counted
/// twice) and a new revision; then finalization.
#[tokio::test]
async fn flux_wait_conditions() {
    let harness = Harness::start().await;
    let ns = harness.cluster.namespace.clone();
    let storage_class = crate::support::cluster::unique("aws-efs");
    let manifests = |data: &str| {
        format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: wait\ndata:\n  key: \"{data}\"\n---\nkind: StorageClass\napiVersion: storage.k8s.io/v1\nmetadata:\n  name: {storage_class}\n  namespace: was-system\nprovisioner: aws-efs\nparameters:\n  gidMin: \"2200\"\n  gidMax: \"2299\"\n  gidAllocate: \"true\"\n"
        )
    };
    let publish = |revision: &str| {
        harness.publish_files(
            &format!("wait-{revision}"),
            revision,
            &[("config.yaml", &manifests(revision))],
        )
    };
    harness.source("repo", &publish("v1.0.0")).await;
    harness
        .create_kustomization("wait", json!({"timeout": "1s", "wait": true}))
        .await;
    let api = harness.kustomizations();

    // reports healthy status
    let ready = applied(&harness, "wait", "v1.0.0").await;
    let healthy = condition(&ready, "Healthy").unwrap();
    assert_eq!(
        (healthy.status.as_str(), healthy.reason.as_str()),
        ("True", "Succeeded")
    );
    kstatus_check(&ready);
    let entries = history(&ready);
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0]["totalReconciliations"], 1);
    assert_eq!(
        entries[0]["lastReconciledStatus"],
        "ReconciliationSucceeded"
    );
    assert_eq!(entries[0]["metadata"]["revision"], "v1.0.0");

    // reports progressing status
    let requested = "2026-11-24T12:00:00Z";
    api.patch(
        "wait",
        &PatchParams::default(),
        &Patch::Merge(json!({
            "metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": requested}},
            "spec": {"wait": false, "healthChecks": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "does-not-exists", "namespace": ns}]},
        })),
    )
    .await
    .unwrap();
    let running = wait_for(Duration::from_secs(30), || async {
        let object = api.get("wait").await.ok()?;
        let reconciling = condition(&object, "Reconciling")?.status == "True";
        let unknown = condition(&object, "Healthy")?.status == "Unknown";
        (reconciling && unknown).then_some(object)
    })
    .await
    .expect("health checks running");
    for type_ in ["Reconciling", "Healthy"] {
        let found = condition(&running, type_).unwrap();
        assert_eq!(found.reason, "Progressing", "{type_}");
        assert!(
            found.message.contains("Running health checks"),
            "{type_}: {}",
            found.message
        );
        assert_eq!(found.observed_generation, running.metadata.generation);
    }
    kstatus_in_progress_check(&running);

    // reports unhealthy status
    let failed = harness
        .wait_ready_within(
            Duration::from_secs(60),
            "wait",
            "False",
            "HealthCheckFailed",
        )
        .await;
    for type_ in ["Healthy", "Ready"] {
        let found = condition(&failed, type_).unwrap();
        assert_eq!(
            (found.status.as_str(), found.reason.as_str()),
            ("False", "HealthCheckFailed"),
            "{type_}"
        );
        assert_eq!(found.observed_generation, failed.metadata.generation);
    }
    let reconciling = condition(&failed, "Reconciling").unwrap();
    assert_eq!(reconciling.reason, "ProgressingWithRetry");
    assert!(
        reconciling.message.contains("Running health checks"),
        "{}",
        reconciling.message
    );
    let status = failed.status.as_ref().unwrap();
    assert_eq!(status.last_handled_reconcile_at.as_deref(), Some(requested));
    assert_eq!(
        Some(status.observed_generation),
        failed.metadata.generation.map(|g| g - 1)
    );
    kstatus_check(&failed);
    let entries = history(&failed);
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0]["totalReconciliations"], 1);
    assert_eq!(entries[0]["lastReconciledStatus"], "HealthCheckFailed");
    assert_eq!(entries[0]["metadata"]["revision"], "v1.0.0");

    // emits unhealthy event
    let events = events_through(
        &harness,
        "wait",
        &[("kustomize.toolkit.fluxcd.io/revision", "v1.0.0")],
        |e| e.type_.as_deref() == Some("Warning"),
    )
    .await;
    let last = events.last().expect("events for v1.0.0");
    assert_eq!(last.type_.as_deref(), Some("Warning"));
    assert!(
        last.message
            .as_deref()
            .unwrap_or("")
            .contains("does-not-exists")
    );

    // recovers and reports healthy status: `wait` checks what was applied, in place of the
    // failing `healthChecks` still in the spec
    api.patch(
        "wait",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"wait": true}})),
    )
    .await
    .unwrap();
    let recovered = wait_for(Duration::from_secs(30), || async {
        let object = api.get("wait").await.ok()?;
        let status = object.status.as_ref()?;
        (condition(&object, "Ready")?.status == "True"
            && object.metadata.generation == Some(status.observed_generation))
        .then_some(object)
    })
    .await
    .expect("recovered");
    let healthy = condition(&recovered, "Healthy").unwrap();
    assert_eq!(
        (healthy.status.as_str(), healthy.reason.as_str()),
        ("True", "Succeeded")
    );
    assert_eq!(healthy.observed_generation, recovered.metadata.generation);
    assert!(
        healthy.message.contains("Health check passed"),
        "{}",
        healthy.message
    );
    let ready = condition(&recovered, "Ready").unwrap();
    assert_eq!(ready.reason, "ReconciliationSucceeded");
    assert_eq!(ready.message, "Applied revision: v1.0.0");
    kstatus_check(&recovered);
    let entries = history(&recovered);
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0]["totalReconciliations"], 2);
    assert_eq!(
        entries[0]["lastReconciledStatus"],
        "ReconciliationSucceeded"
    );

    // emits recovery event
    let recovery = wait_for(Duration::from_secs(10), || async {
        events_of(
            &harness,
            "wait",
            &[("kustomize.toolkit.fluxcd.io/revision", "v1.0.0")],
        )
        .await
        .into_iter()
        .find(|e| {
            e.type_.as_deref() == Some("Normal")
                && e.message
                    .as_deref()
                    .unwrap_or("")
                    .contains("Health check passed")
        })
    })
    .await;
    assert!(recovery.is_some(), "a Normal 'Health check passed' event");

    // reports new revision healthy status
    harness.source("repo", &publish("v2.0.0")).await;
    let ready = applied(&harness, "wait", "v2.0.0").await;
    assert_eq!(condition(&ready, "Healthy").unwrap().status, "True");
    assert_eq!(
        condition(&ready, "Ready").unwrap().message,
        "Applied revision: v2.0.0"
    );
    let status = ready.status.as_ref().unwrap();
    assert_eq!(status.last_attempted_revision, status.last_applied_revision);
    kstatus_check(&ready);
    let entries = history(&ready);
    assert_eq!(entries.len(), 3);
    assert_eq!(entries[0]["totalReconciliations"], 1);
    assert_eq!(
        entries[0]["lastReconciledStatus"],
        "ReconciliationSucceeded"
    );
    assert_eq!(entries[0]["metadata"]["revision"], "v2.0.0");

    // emits event for the new revision
    let passed = wait_for(Duration::from_secs(10), || async {
        events_of(
            &harness,
            "wait",
            &[("kustomize.toolkit.fluxcd.io/revision", "v2.0.0")],
        )
        .await
        .into_iter()
        .find(|e| {
            e.type_.as_deref() == Some("Normal")
                && e.message
                    .as_deref()
                    .unwrap_or("")
                    .contains("Health check passed")
        })
    })
    .await;
    assert!(
        passed.is_some(),
        "a Normal 'Health check passed' event for v2.0.0"
    );

    // finalizes object
    assert!(
        ready
            .metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == "finalizers.fluxcd.io")
    );
    api.delete("wait", &Default::default()).await.unwrap();
    gone(&harness, "wait").await;
}

/// `TestKustomizationReconciler_WaitIgnoresSkippedObjects`: a Deployment annotated
/// `ssa: Ignore` in the manifests is neither applied nor waited on.
#[tokio::test]
async fn flux_wait_ignores_skipped_objects() {
    let harness = Harness::start().await;
    let manifests = "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: skipped\ndata:\n  key: value\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: skipped-ignored\n  annotations:\n    kustomize.toolkit.fluxcd.io/ssa: Ignore\nspec:\n  replicas: 1\n  selector:\n    matchLabels:\n      app: skipped-ignored\n  template:\n    metadata:\n      labels:\n        app: skipped-ignored\n    spec:\n      containers:\n        - name: app\n          image: registry.invalid/never-exists:nope\n";
    let artifact = harness.publish_files("skipped", "v1.0.0", &[("config.yaml", manifests)]);
    harness.source("repo", &artifact).await;
    harness
        .create_kustomization("skipped", json!({"timeout": "5s", "wait": true}))
        .await;
    let ready = applied(&harness, "skipped", "v1.0.0").await;
    let healthy = condition(&ready, "Healthy").unwrap();
    assert_eq!(
        (healthy.status.as_str(), healthy.reason.as_str()),
        ("True", "Succeeded")
    );
    let deployments: kube::Api<k8s_openapi::api::apps::v1::Deployment> =
        kube::Api::namespaced(harness.cluster.client.clone(), &harness.cluster.namespace);
    assert!(
        deployments
            .get_opt("skipped-ignored")
            .await
            .unwrap()
            .is_none(),
        "an ssa: Ignore Deployment must not be applied"
    );
}

/// `TestKustomizationReconciler_WaitsForCustomHealthChecks`: an `inProgress` expression that
/// cannot evaluate keeps the object in progress until the timeout, and the message says why.
#[tokio::test]
async fn flux_waits_for_custom_health_checks() {
    let harness = Harness::start().await;
    let map = "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: custom\ndata: {}\n";
    let artifact = harness.publish_files("custom", "v1.0.0", &[("config.yaml", map)]);
    harness.source("repo", &artifact).await;
    harness
        .create_kustomization(
            "custom",
            json!({"timeout": "1s", "wait": true, "healthCheckExprs": [
                {"apiVersion": "v1", "kind": "ConfigMap", "inProgress": "has(data.foo.bar)", "current": "true"}]}),
        )
        .await;
    let failed = harness
        .wait_ready_within(
            Duration::from_secs(60),
            "custom",
            "False",
            "HealthCheckFailed",
        )
        .await;
    let message = ready_message(&failed);
    assert!(
        message.contains("timeout waiting for: [ConfigMap"),
        "{message}"
    );
    assert!(
        message.contains(
            "failed to evaluate the CEL expression 'has(data.foo.bar)': no such attribute(s): \
             data.foo.bar"
        ),
        "{message}"
    );
}

/// `TestKustomizationReconciler_CancelHealthCheckOnNewRevision` (Flux's suite runs with the
/// gate on): a Kustomization (wait: true, timeout 5m) is Ready on a ConfigMap revision, then
/// health-checks a Deployment that never becomes ready; a fixed revision published while those
/// checks run is attempted long before their timeout, and a HealthCheckCanceled event names
/// the GitRepository that triggered it.
#[tokio::test]
async fn flux_cancel_health_check_on_new_revision() {
    let harness = Harness::start_with(|options| {
        options.reconcile.cancel_health_on_new_revision = true;
    })
    .await;
    let ns = harness.cluster.namespace.clone();
    super::kubeconfig_secret(&harness).await;
    let deployment = |name: &str, app: &str, image: &str, port: u16| {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  replicas: 1\n  selector:\n    matchLabels:\n      app: {app}\n  template:\n    metadata:\n      labels:\n        app: {app}\n    spec:\n      containers:\n      - name: app\n        image: {image}\n        ports:\n        - containerPort: {port}"
        )
    };
    let config = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: test-config\n  namespace: {ns}\ndata:\n  foo: bar"
    );
    let success =
        harness.publish_files("cancel-ok", "main/success", &[("configmap.yaml", &config)]);
    harness.source("repo", &success).await;
    harness
        .create_kustomization(
            "cancel",
            json!({"interval": "10m", "path": "./", "wait": true, "timeout": "5m",
                "prune": false, "targetNamespace": null,
                "kubeConfig": {"secretRef": {"name": "kubeconfig"}}}),
        )
        .await;
    let api = harness.kustomizations();
    let attempted = |revision: &'static str| {
        let api = api.clone();
        async move {
            wait_for(Duration::from_secs(60), || async {
                let object = api.get("cancel").await.ok()?;
                (object.status.as_ref()?.last_attempted_revision.as_deref() == Some(revision))
                    .then_some(object)
            })
            .await
            .unwrap_or_else(|| panic!("{revision} was never attempted"))
        }
    };
    harness
        .wait_ready("cancel", "True", "ReconciliationSucceeded")
        .await;

    let failing = deployment(
        "failing-deployment",
        "failing-app",
        "nonexistent.registry/badimage:latest",
        8080,
    );
    let failing = harness.publish_files(
        "cancel-failing",
        "main/failing",
        &[("deployment.yaml", &failing)],
    );
    harness.source("repo", &failing).await;
    attempted("main/failing").await;

    let fixed = deployment("working-deployment", "working-app", "nginx:latest", 80);
    let fixed = harness.publish_files("cancel-fixed", "main/fixed", &[("deployment.yaml", &fixed)]);
    // The new revision arrives while the failing one's health checks run.
    let checking = wait_for(Duration::from_secs(60), || async {
        let status = api.get("cancel").await.ok()?.status?;
        status
            .conditions
            .iter()
            .any(|c| {
                c.type_ == "Reconciling"
                    && c.status == "True"
                    && c.message
                        .contains("Running health checks for revision main/failing")
            })
            .then_some(())
    })
    .await;
    assert!(
        checking.is_some(),
        "the failing revision's health checks run"
    );
    harness.source("repo", &fixed).await;
    attempted("main/fixed").await;

    let canceled = wait_for(Duration::from_secs(60), || async {
        events_of(&harness, "cancel", &[])
            .await
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("HealthCheckCanceled"))
    })
    .await
    .expect("a HealthCheckCanceled event");
    let message = canceled.message.unwrap_or_default();
    assert!(message.contains("Health checks canceled"), "{message}");
    assert!(message.contains("GitRepository"), "{message}");
}
