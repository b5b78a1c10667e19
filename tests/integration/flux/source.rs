//! Flux's tests of reading sources and their artifacts: direct source reads for each source
//! kind (`kustomization_direct_source_fetch_test.go`), ExternalArtifact sources and their
//! feature gate (`kustomization_externalartifact_test.go`), an artifact that answers 404 and
//! then recovers (`kustomization_fetcher_test.go`), and manifests that do not build
//! (`kustomization_validation_test.go`).
//!
//! The DirectSourceFetch ports run with the gate on, as Flux's do: the source is read from the
//! API server instead of the source watches.

use serde_json::json;

use super::{events_through, eventually, has_condition, kubeconfig_secret, ready_reason};
use crate::support::artifacts::{Artifact, SourceKind};
use crate::support::cluster::unique;
use crate::support::controller::{Harness, ready_message};

fn config_map(name: &str, data: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  key: \"{data}\"\n"
    )
}

fn secret(name: &str, data: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\nstringData:\n  key: \"{data}\"\n"
    )
}

/// The spec Flux's source tests share: a kubeconfig Secret, path `./`, the source by kind and
/// name in the test namespace.
fn spec_on(harness: &Harness, kind: &str, name: &str, interval: &str) -> serde_json::Value {
    json!({"interval": interval, "path": "./", "prune": false,
        "kubeConfig": {"secretRef": {"name": "kubeconfig"}},
        "sourceRef": {"kind": kind, "name": name, "namespace": harness.cluster.namespace}})
}

/// `TestKustomizationReconciler_DirectSourceFetch`: a Kustomization reads its GitRepository
/// and applies its revision; one naming a GitRepository that does not exist fails with
/// ArtifactFailed.
#[tokio::test]
async fn flux_direct_source_fetch() {
    let harness = Harness::start_with(|options| options.reconcile.direct_source_fetch = true).await;
    let ns = harness.cluster.namespace.clone();
    kubeconfig_secret(&harness).await;
    let id = unique("direct-fetch");
    let artifact = harness.publish_files(
        "direct-fetch",
        "v1.0.0",
        &[("configmap.yaml", &config_map(&id, &unique("data")))],
    );
    let repository = unique("direct-fetch-repo");
    harness
        .cluster
        .create_source(SourceKind::GitRepository, &ns, &repository, Some(&artifact))
        .await;

    // reconciles with DirectSourceFetch enabled (uses APIReader)
    harness
        .create_kustomization(
            "direct",
            spec_on(&harness, "GitRepository", &repository, "5s"),
        )
        .await;
    eventually(&harness, "direct", "applied v1.0.0", |k| {
        has_condition(k, "Ready", "True")
            && k.status.as_ref().unwrap().last_applied_revision.as_deref() == Some("v1.0.0")
    })
    .await;
    assert!(harness.config_maps().get_opt(&id).await.unwrap().is_some());
    if let Some(server) = harness.cluster.server() {
        assert!(
            server.requests().iter().any(|r| r.verb == "get"
                && r.resource == "gitrepositories"
                && r.name == repository),
            "the GitRepository is read from the API server"
        );
    }

    // source not found with DirectSourceFetch enabled
    harness
        .create_kustomization(
            "notfound",
            spec_on(&harness, "GitRepository", "non-existent-repo", "5s"),
        )
        .await;
    let missing = eventually(&harness, "notfound", "failed with ArtifactFailed", |k| {
        has_condition(k, "Ready", "False") && ready_reason(k) == "ArtifactFailed"
    })
    .await;
    // Flux's Ready carries the API server's NotFound (its APIReader asked).
    assert_eq!(
        ready_message(&missing),
        r#"gitrepositories.source.toolkit.fluxcd.io "non-existent-repo" not found"#
    );
}

/// `TestKustomizationReconciler_DirectSourceFetch_OCIRepository` and `_Bucket` share one
/// scenario: a Kustomization on a source of that kind that has no artifact yet gets status
/// conditions. Flux asserts only that; ours also holds Flux's condition for it (Ready False
/// ArtifactFailed).
async fn source_without_artifact_gets_conditions(kind: SourceKind) {
    let harness = Harness::start_with(|options| options.reconcile.direct_source_fetch = true).await;
    let ns = harness.cluster.namespace.clone();
    kubeconfig_secret(&harness).await;
    let source = unique("no-artifact");
    harness
        .cluster
        .create_source(kind, &ns, &source, None)
        .await;
    harness
        .create_kustomization("kust", spec_on(&harness, kind.kind(), &source, "5s"))
        .await;
    let failed = eventually(&harness, "kust", "got conditions", |k| {
        !k.status.as_ref().is_none_or(|s| s.conditions.is_empty())
            && !has_condition(k, "Ready", "Unknown")
    })
    .await;
    assert_eq!(
        (
            ready_reason(&failed).as_str(),
            has_condition(&failed, "Ready", "False")
        ),
        ("ArtifactFailed", true),
        "{}",
        ready_message(&failed)
    );
    let message = ready_message(&failed);
    assert!(
        message.starts_with("Source artifact not found, retrying in "),
        "Flux's words: {message}"
    );
}

/// `TestKustomizationReconciler_DirectSourceFetch_OCIRepository`.
#[tokio::test]
async fn flux_direct_source_fetch_oci_repository() {
    source_without_artifact_gets_conditions(SourceKind::OciRepository).await;
}

/// `TestKustomizationReconciler_DirectSourceFetch_Bucket`.
#[tokio::test]
async fn flux_direct_source_fetch_bucket() {
    source_without_artifact_gets_conditions(SourceKind::Bucket).await;
}

/// `TestKustomizationReconciler_ExternalArtifact`: with the gate on, a Kustomization (wait:
/// true) applies an ExternalArtifact's revision with Flux's three events for it (created,
/// health check passed, reconciliation finished); a new revision on the ExternalArtifact is
/// applied through its watch and counted in the one history entry of that digest; with the
/// gate off, the next revision stalls with AccessDenied and an event saying so.
#[tokio::test]
async fn flux_external_artifact() {
    let mut harness =
        Harness::start_with(|options| options.reconcile.allow_external_artifact = true).await;
    let ns = harness.cluster.namespace.clone();
    kubeconfig_secret(&harness).await;
    let id = unique("ea");
    let files = [("secret.yaml", secret(&id, &unique("data")))];
    let files: Vec<(&str, &str)> = files.iter().map(|(p, t)| (*p, t.as_str())).collect();
    let published = harness.publish_files("ea", "v1.0.0", &files);
    let artifact_at = |revision: &str| -> Artifact {
        Artifact {
            revision: revision.to_string(),
            ..published.clone()
        }
    };
    let source = unique("ea-source");
    harness
        .cluster
        .create_source(
            SourceKind::ExternalArtifact,
            &ns,
            &source,
            Some(&artifact_at("v1.0.0")),
        )
        .await;
    let mut spec = spec_on(&harness, "ExternalArtifact", &source, "1h");
    spec["wait"] = json!(true);
    harness.create_kustomization("ea", spec).await;

    // reconciles from external artifact source
    let applied = eventually(&harness, "ea", "applied v1.0.0", |k| {
        k.status.as_ref().unwrap().last_applied_revision.as_deref() == Some("v1.0.0")
            && !has_condition(k, "Ready", "Unknown")
    })
    .await;
    assert_eq!(ready_reason(&applied), "ReconciliationSucceeded");
    let events = events_through(
        &harness,
        "ea",
        &[("kustomize.toolkit.fluxcd.io/revision", "v1.0.0")],
        |e| e.reason.as_deref() == Some("ReconciliationSucceeded"),
    )
    .await;
    let said: Vec<(&str, &str)> = events
        .iter()
        .map(|e| {
            (
                e.reason.as_deref().unwrap_or(""),
                e.message.as_deref().unwrap_or(""),
            )
        })
        .collect();
    assert!(said.len() > 2, "{said:?}");
    assert!(
        said[0].0 == "Progressing" && said[0].1.contains("created"),
        "{said:?}"
    );
    assert!(
        said[1].0 == "Progressing" && said[1].1.contains("check passed"),
        "{said:?}"
    );
    assert!(
        said[2].0 == "ReconciliationSucceeded" && said[2].1.contains("finished"),
        "{said:?}"
    );

    // watches for external artifact revision change
    harness
        .cluster
        .set_artifact(
            SourceKind::ExternalArtifact,
            &ns,
            &source,
            &artifact_at("v2.0.0"),
        )
        .await;
    let updated = eventually(&harness, "ea", "applied v2.0.0", |k| {
        k.status.as_ref().unwrap().last_applied_revision.as_deref() == Some("v2.0.0")
            && !has_condition(k, "Ready", "Unknown")
    })
    .await;
    let history = &updated.status.as_ref().unwrap().history;
    assert_eq!(history.len(), 1, "{history:?}");
    let entry = serde_json::to_value(&history[0]).unwrap();
    assert_eq!(entry["totalReconciliations"], 2, "{entry}");
    assert_eq!(entry["lastReconciledStatus"], "ReconciliationSucceeded");
    assert!(
        entry["metadata"]
            .as_object()
            .is_some_and(|m| m.values().any(|v| v == "v2.0.0")),
        "{entry}"
    );

    // fails when external artifact feature gate is disable
    harness
        .restart_with(|options| options.reconcile.allow_external_artifact = false)
        .await;
    harness
        .cluster
        .set_artifact(
            SourceKind::ExternalArtifact,
            &ns,
            &source,
            &artifact_at("v3.0.0"),
        )
        .await;
    let denied = eventually(&harness, "ea", "was refused", |k| {
        has_condition(k, "Ready", "False")
    })
    .await;
    assert_eq!(ready_reason(&denied), "AccessDenied");
    assert!(has_condition(&denied, "Stalled", "True"));
    let events = events_through(&harness, "ea", &[], |e| {
        e.reason.as_deref() == Some("AccessDenied")
    })
    .await;
    let last = events.last().expect("events");
    assert_eq!(last.reason.as_deref(), Some("AccessDenied"));
    assert!(
        last.message
            .as_deref()
            .unwrap_or("")
            .contains("feature gate is disabled"),
        "{last:?}"
    );
}

/// `TestKustomizationReconciler_ArtifactDownload`: the artifact is downloaded and applied
/// (with a health check on the Secret); when the source's artifact URL answers 404 the Ready
/// message says "artifact not found"; once the URL is right again the Kustomization recovers.
#[tokio::test]
async fn flux_artifact_download() {
    let harness = Harness::start().await;
    let ns = harness.cluster.namespace.clone();
    kubeconfig_secret(&harness).await;
    let id = unique("fetch");
    let artifact = harness.publish_files(
        "fetch",
        "v1.0.0",
        &[("secret.yaml", &secret(&id, &unique("data")))],
    );
    let repository = unique("fetch");
    harness
        .cluster
        .create_source(SourceKind::GitRepository, &ns, &repository, Some(&artifact))
        .await;
    let mut spec = spec_on(&harness, "GitRepository", &repository, "5s");
    spec["healthChecks"] =
        json!([{"apiVersion": "v1", "kind": "Secret", "name": id, "namespace": ns}]);
    spec["targetNamespace"] = json!(ns);
    spec["force"] = json!(false);
    harness.create_kustomization("fetch", spec).await;

    // downloads artifact
    eventually(&harness, "fetch", "applied v1.0.0", |k| {
        has_condition(k, "Ready", "True")
            && k.status.as_ref().unwrap().last_applied_revision.as_deref() == Some("v1.0.0")
    })
    .await;

    // retries on not found errors
    let missing = Artifact {
        url: format!("{}not-found", artifact.url),
        ..artifact.clone()
    };
    harness
        .cluster
        .set_artifact(SourceKind::GitRepository, &ns, &repository, &missing)
        .await;
    eventually(&harness, "fetch", "said the artifact is not found", |k| {
        ready_message(k).contains("artifact not found")
    })
    .await;

    // recovers after not found errors
    harness
        .cluster
        .set_artifact(SourceKind::GitRepository, &ns, &repository, &artifact)
        .await;
    eventually(&harness, "fetch", "recovered", |k| {
        has_condition(k, "Ready", "True")
    })
    .await;
}

/// `TestKustomizationReconciler_Validation`: a document whose `apiVersion` key is misspelled
/// (`piVersion`) beside a valid Deployment fails the build (a BuildFailed condition), both as
/// a plain directory and behind a kustomization.yaml; nothing of it is applied.
#[tokio::test]
async fn flux_validation() {
    let harness = Harness::start().await;
    let ns = harness.cluster.namespace.clone();
    kubeconfig_secret(&harness).await;
    let manifests = r#"---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: podinfo
  labels:
    app: podinfo
spec:
  replicas: 1
  selector:
    matchLabels:
      app: podinfo
  template:
    metadata:
      labels:
        app: podinfo
    spec:
      containers:
        - name: podinfo
          image: podinfo
---
piVersion: pkg.crossplane.io/v1
kind: Provider
metadata:
  name: crossplane-provider-aws1
spec:
  package: crossplane/provider-aws:v0.23.0
"#;
    let kustomization = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - deployment.yaml\n";
    let plain = harness.publish_files(
        "invalid-plain",
        "main/plain",
        &[("deployment.yaml", manifests)],
    );
    let overlay = harness.publish_files(
        "invalid-overlay",
        "main/overlay",
        &[
            ("deployment.yaml", manifests),
            ("kustomization.yaml", kustomization),
        ],
    );
    for (name, artifact) in [("plain", &plain), ("overlay", &overlay)] {
        harness
            .cluster
            .create_source(SourceKind::GitRepository, &ns, name, Some(artifact))
            .await;
        let mut spec = spec_on(&harness, "GitRepository", name, "2m");
        spec["targetNamespace"] = json!(ns);
        harness.create_kustomization(name, spec).await;
    }

    // fails to build invalid plain yamls, fails to build invalid overlay
    for (name, revision) in [("plain", "main/plain"), ("overlay", "main/overlay")] {
        let failed = eventually(&harness, name, "failed to build", |k| {
            let status = k.status.as_ref().unwrap();
            status.last_attempted_revision.as_deref() == Some(revision)
                && status.conditions.iter().any(|c| c.reason == "BuildFailed")
        })
        .await;
        assert!(
            ready_message(&failed).contains("apiVersion"),
            "the message names the missing field: {}",
            ready_message(&failed)
        );
    }
    let deployments: kube::Api<k8s_openapi::api::apps::v1::Deployment> =
        kube::Api::namespaced(harness.cluster.client.clone(), &ns);
    assert!(deployments.get_opt("podinfo").await.unwrap().is_none());
}
