//! Flux's CancelHealthCheckOnNewRevision beyond a new source revision: Flux's wrapped
//! reconciler ends running health checks on any request a watch makes for the object — its
//! own spec change or `reconcile.fluxcd.io/requestedAt`, and a watched ConfigMap or Secret it
//! reads — naming the object that caused it.

use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::support::cluster::wait_for;
use crate::support::controller::Harness;

/// A Deployment whose image never runs: its health check waits until the timeout.
const NEVER_READY: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: stuck\nspec:\n  selector:\n    matchLabels:\n      app: stuck\n  template:\n    metadata:\n      labels:\n        app: stuck\n    spec:\n      containers:\n      - name: app\n        image: never.example.com/app:${tag}\n";

async fn canceled_by(harness: &Harness, trigger: &str) -> bool {
    let events: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(harness.cluster.client.clone(), &harness.cluster.namespace);
    let message =
        format!("Health checks canceled due to new reconciliation triggered by {trigger}");
    wait_for(Duration::from_secs(30), || async {
        let list = events.list(&Default::default()).await.ok()?;
        list.items
            .into_iter()
            .any(|e| {
                e.reason.as_deref() == Some("HealthCheckCanceled")
                    && e.message.as_deref() == Some(message.as_str())
            })
            .then_some(())
    })
    .await
    .is_some()
}

async fn checking_health(harness: &Harness) -> bool {
    let api = harness.kustomizations();
    wait_for(Duration::from_secs(30), || async {
        let object = api.get("gated").await.ok()?;
        let conditions = object.status?.conditions;
        let unknown = |type_: &str| {
            conditions
                .iter()
                .any(|c| c.type_ == type_ && c.status == "Unknown")
        };
        // A run in progress (Ready unknown) that is checking health.
        (unknown("Ready") && unknown("Healthy")).then_some(())
    })
    .await
    .is_some()
}

#[tokio::test]
async fn any_request_for_the_object_cancels_its_health_checks_when_the_gate_is_on() {
    let harness = Harness::start_with(|options| {
        options.reconcile.cancel_health_on_new_revision = true;
    })
    .await;
    let ns = harness.cluster.namespace.clone();
    harness
        .cluster
        .apply(&json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "vars", "namespace": ns,
                "labels": {"reconcile.fluxcd.io/watch": "Enabled"}},
            "data": {"tag": "1"}}))
        .await;
    let artifact =
        harness.publish_files("stuck", "main@sha1:5ca1", &[("deploy.yaml", NEVER_READY)]);
    harness.source("repo", &artifact).await;
    harness
        .create_kustomization(
            "gated",
            json!({"wait": true, "timeout": "5m",
                "postBuild": {"substituteFrom": [{"kind": "ConfigMap", "name": "vars"}]}}),
        )
        .await;
    assert!(checking_health(&harness).await, "health checks are running");

    // Its own request: `flux reconcile kustomization gated`.
    harness
        .kustomizations()
        .patch(
            "gated",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": "now"}}}),
            ),
        )
        .await
        .unwrap();
    assert!(
        canceled_by(&harness, &format!("Kustomization/{ns}/gated")).await,
        "a requested reconciliation ends the checks"
    );

    // A watched ConfigMap it reads.
    assert!(checking_health(&harness).await, "the next run checks again");
    harness
        .cluster
        .apply(&json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "vars", "namespace": ns,
                "labels": {"reconcile.fluxcd.io/watch": "Enabled"}},
            "data": {"tag": "2"}}))
        .await;
    assert!(
        canceled_by(&harness, &format!("ConfigMap/{ns}/vars")).await,
        "a change to a watched ConfigMap ends the checks"
    );
}
