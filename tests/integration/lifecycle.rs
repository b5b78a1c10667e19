//! The process's end, as a Flux user's Deployment sees it. On SIGTERM a leader ends its
//! health checks at once, as Flux's do when controller-runtime cancels the reconcile context
//! (the reconciliations in flight finish their writes, for at most controller-runtime's 30 s
//! graceful shutdown timeout), gives the Lease up so a standby takes over at once, and exits
//! 0; a standby still waiting for the Lease stops at once too.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use serde_json::json;

use crate::support::cluster::{TestCluster, wait_for};
use crate::support::controller::{ControllerProcess, controller_kubeconfig};

/// A GitRepository no source-controller serves: its Ready condition never comes.
const NEVER_READY_REPOSITORY: &str = "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: never-ready\nspec:\n  url: https://example.invalid/x.git\n  interval: 1m\n";

#[tokio::test]
async fn sigterm_ends_health_checks_at_once_and_gives_the_lease_up() {
    let cluster = TestCluster::start().await;
    let kubeconfig = controller_kubeconfig(&cluster).await;
    let artifacts = crate::support::artifacts::ArtifactServer::start().await;
    let ns = cluster.namespace.clone();
    cluster
        .source_of_manifests(&artifacts, "main@sha1:57c4", NEVER_READY_REPOSITORY)
        .await;
    let mut controller = ControllerProcess::start_with_kubeconfig(
        &kubeconfig,
        &ns,
        &[
            "--enable-leader-election",
            "--leader-election-retry-period=200ms",
        ],
    );
    cluster
        .apply(&json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": "stuck", "namespace": ns},
            "spec": {"interval": "10m", "prune": true, "wait": true, "timeout": "10m",
                "targetNamespace": ns, "sourceRef": {"kind": "GitRepository", "name": "repo"},
                "healthCheckExprs": [{
                    "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
                    "current": "status.conditions.filter(e, e.type == 'Ready').all(e, e.status == 'True')",
                }]}}))
        .await;
    let kustomizations: Api<kustomize_controller::api::Kustomization> =
        Api::namespaced(cluster.client.clone(), &ns);
    let checking = wait_for(Duration::from_secs(30), || async {
        let object = kustomizations.get("stuck").await.ok()?;
        object
            .status?
            .conditions
            .iter()
            .any(|c| c.type_ == "Reconciling" && c.message.starts_with("Running health checks"))
            .then_some(())
    })
    .await;
    assert!(
        checking.is_some(),
        "health checks run; log:\n{}",
        controller.log()
    );

    // A standby, waiting for the Lease, stops cleanly.
    let mut standby = ControllerProcess::start_with_kubeconfig(
        &kubeconfig,
        &ns,
        &[
            "--enable-leader-election",
            "--leader-election-retry-period=200ms",
        ],
    );
    let waiting = wait_for(Duration::from_secs(30), || async {
        standby
            .log()
            .contains("Attempting to acquire leader lease...")
            .then_some(())
    })
    .await;
    assert!(waiting.is_some(), "{}", standby.log());
    standby.terminate();
    let status = tokio::time::timeout(Duration::from_secs(20), standby.child.wait())
        .await
        .expect("a standby stops at once")
        .unwrap();
    assert!(status.success(), "{status}; log:\n{}", standby.log());

    controller.terminate();
    let status = tokio::time::timeout(Duration::from_secs(20), controller.child.wait())
        .await
        .expect("the leader stops without waiting out its health checks")
        .unwrap();
    let log = controller.log();
    assert!(status.success(), "{status}; log:\n{log}");
    assert!(
        log.contains("Reconciliation interrupted: the controller is stopping"),
        "{log}"
    );
    let leases: Api<Lease> = Api::namespaced(cluster.client.clone(), &ns);
    let lease = leases
        .get("kustomize-controller-leader-election")
        .await
        .unwrap();
    let holder = lease
        .spec
        .and_then(|s| s.holder_identity)
        .unwrap_or_default();
    assert!(
        holder.is_empty(),
        "the Lease is given up: held by {holder:?}; log:\n{log}"
    );
    // No outcome was written: the status still says what was under way, for the next leader.
    let object = kustomizations.get("stuck").await.unwrap();
    let conditions = object.status.unwrap().conditions;
    assert!(
        conditions
            .iter()
            .any(|c| c.type_ == "Reconciling" && c.message.starts_with("Running health checks")),
        "{conditions:?}"
    );
}
