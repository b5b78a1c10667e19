//! Flux's `dependsOn` tests (`kustomization_dependson_test.go`): a Kustomization whose source
//! appears late, then a dependency that does not exist; and CEL `readyExpr` checks that pass,
//! fail (waiting, not stalled) or cannot compile (stalled), with finalization still working
//! while a dependency check fails.

use serde_json::json;

use super::{
    condition, eventually, has_condition, kubeconfig_secret, patch_kustomization, ready_reason,
};
use crate::support::artifacts::SourceKind;
use crate::support::cluster::unique;
use crate::support::controller::{Harness, ready_message};

/// `TestKustomizationReconciler_DependsOn`: created before its GitRepository, the
/// Kustomization fails with ArtifactFailed, becomes Ready once the source is there (a
/// ConfigMap and an `autoscaling/v2` HorizontalPodAutoscaler), and then waits with
/// DependencyNotReady when it is made to depend on a Kustomization that does not exist.
#[tokio::test]
async fn flux_depends_on() {
    let harness = Harness::start().await;
    let ns = harness.cluster.namespace.clone();
    kubeconfig_secret(&harness).await;
    let id = unique("dep");
    let manifests = format!(
        r#"---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {id}
data:
  key: "{id}"
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: "v2-{id}"
  namespace: "{ns}"
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: test
  minReplicas: 1
  maxReplicas: 10
  metrics:
  - type: Resource
    resource:
      name: cpu
      target:
        type: Utilization
        averageUtilization: 50
  - type: Pods
    pods:
      metric:
        name: packets-per-second
      target:
        type: AverageValue
        averageValue: 1k
"#
    );
    let artifact = harness.publish_files("dep", "v1.0.0", &[("config.yaml", &manifests)]);
    let repository = unique("dep");
    harness
        .create_kustomization(
            "dep",
            json!({"interval": "1h", "path": "./",
                "kubeConfig": {"secretRef": {"name": "kubeconfig"}},
                "sourceRef": {"kind": "GitRepository", "name": repository, "namespace": ns}}),
        )
        .await;
    eventually(&harness, "dep", "has a Ready condition", |k| {
        condition(k, "Ready").is_some()
    })
    .await;

    // fails due to source not found
    eventually(&harness, "dep", "failed with ArtifactFailed", |k| {
        ready_reason(k) == "ArtifactFailed"
    })
    .await;

    // reconciles when source is found
    harness
        .cluster
        .create_source(SourceKind::GitRepository, &ns, &repository, Some(&artifact))
        .await;
    eventually(&harness, "dep", "became Ready", |k| {
        has_condition(k, "Ready", "True")
    })
    .await;
    let hpa = crate::support::cluster::dynamic_api(
        &harness.cluster.client,
        &json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"namespace": ns}}),
    )
    .await;
    assert!(hpa.get(&format!("v2-{id}")).await.is_ok());

    // fails due to dependency not found
    patch_kustomization(
        &harness,
        "dep",
        json!({"spec": {"dependsOn": [{"namespace": ns, "name": "root"}]}}),
    )
    .await;
    let waiting = eventually(&harness, "dep", "waited with DependencyNotReady", |k| {
        ready_reason(k) == "DependencyNotReady"
    })
    .await;
    assert!(
        ready_message(&waiting).contains(&format!("dependency '{ns}/root' not found")),
        "{}",
        ready_message(&waiting)
    );
}

/// `TestKustomizationReconciler_DependsOn_CEL`: a `readyExpr` comparing an annotation of
/// `self` and `dep` lets a suspended, never-Ready dependency pass; a mismatch waits with
/// DependencyNotReady ("not ready according to readyExpr"), not stalled; an expression
/// naming an undeclared variable stalls with InvalidCELExpression ("failed to parse"); and the
/// Kustomization is still finalized while its dependency check fails.
#[tokio::test]
async fn flux_depends_on_cel() {
    let harness = Harness::start().await;
    let ns = harness.cluster.namespace.clone();
    kubeconfig_secret(&harness).await;
    let id = unique("dep-cel");
    let dependency = unique("test-dep");
    let manifests = format!(
        "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {id}\ndata:\n  key: \"{id}\"\n"
    );
    let artifact = harness.publish_files("dep-cel", "v1.0.0", &[("config.yaml", &manifests)]);
    let repository = unique("dep");
    harness
        .cluster
        .create_source(SourceKind::GitRepository, &ns, &repository, Some(&artifact))
        .await;
    let spec = |extra: serde_json::Value| {
        let mut spec = json!({"interval": "1h", "path": "./",
            "kubeConfig": {"secretRef": {"name": "kubeconfig"}},
            "sourceRef": {"kind": "GitRepository", "name": repository, "namespace": ns}});
        spec.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        spec
    };
    harness
        .create_kustomization("dep-cel", spec(json!({})))
        .await;
    eventually(&harness, "dep-cel", "has a Ready condition", |k| {
        condition(k, "Ready").is_some()
    })
    .await;

    // succeeds with readyExpr dependency check
    harness
        .cluster
        .apply(&json!({
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": dependency, "namespace": ns,
                "annotations": {"app/version": "v1.2.3"}},
            "spec": spec(json!({"suspend": true, "interval": "2s", "prune": true})),
        }))
        .await;
    let expression =
        "self.metadata.annotations['app/version'] == dep.metadata.annotations['app/version']";
    patch_kustomization(
        &harness,
        "dep-cel",
        json!({"metadata": {"annotations": {"app/version": "v1.2.3"}},
            "spec": {"dependsOn": [{"name": dependency, "readyExpr": expression}]}}),
    )
    .await;
    eventually(&harness, "dep-cel", "became Ready by readyExpr", |k| {
        has_condition(k, "Ready", "True") && k.status.as_ref().unwrap().observed_generation == 2
    })
    .await;

    // fails with readyExpr when condition not met
    patch_kustomization(
        &harness,
        "dep-cel",
        json!({"metadata": {"annotations": {"app/version": "v1.2.4"}},
            "spec": {"dependsOn": [{"namespace": ns, "name": dependency, "readyExpr": expression}]}}),
    )
    .await;
    let waiting = eventually(&harness, "dep-cel", "waited on its readyExpr", |k| {
        ready_reason(k) == "DependencyNotReady"
            && ready_message(k).contains("not ready according to readyExpr")
    })
    .await;
    assert!(!has_condition(&waiting, "Stalled", "True"), "not stalled");

    // fails terminally with invalid readyExpr
    patch_kustomization(
        &harness,
        "dep-cel",
        json!({"spec": {"dependsOn": [{"name": dependency,
            "readyExpr": "self.generation == deps.generation"}]}}),
    )
    .await;
    let stalled = eventually(&harness, "dep-cel", "stalled", |k| {
        has_condition(k, "Stalled", "True")
    })
    .await;
    assert!(!has_condition(&stalled, "Ready", "True"));
    assert_eq!(ready_reason(&stalled), "InvalidCELExpression");
    assert!(
        ready_message(&stalled).contains("failed to parse"),
        "{}",
        ready_message(&stalled)
    );
    // Beyond Flux's test, its whole prefix: Ready wraps the terminal error ("%v").
    assert!(
        ready_message(&stalled).starts_with(&format!(
            "Reconciliation failed terminally due to configuration error: terminal error: failed to evaluate dependency {dependency}: "
        )),
        "{}",
        ready_message(&stalled)
    );

    // GC works with failing dependency
    harness
        .kustomizations()
        .delete("dep-cel", &Default::default())
        .await
        .unwrap();
    super::gone(&harness, "dep-cel").await;
}
