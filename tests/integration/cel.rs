//! `healthCheckExprs` in Flux's CEL environment, with the cel-go extension libraries Flux
//! enables (strings, encoders, sets): an expression using them decides health as in Flux
//! instead of failing to evaluate.

use std::time::Duration;

use serde_json::json;

use crate::support::cluster::wait_for;
use crate::support::controller::Harness;

#[tokio::test]
async fn health_check_expressions_use_the_extension_libraries_flux_enables() {
    let harness = Harness::start().await;
    let ns = harness.cluster.namespace.clone();
    let source = "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: widget\nspec:\n  url: https://example.invalid/widget.git\n  interval: 1m\n";
    let artifact = harness.publish_files("cel-ext", "main@sha1:ce2", &[("repo.yaml", source)]);
    harness.source("repo", &artifact).await;
    harness
        .create_kustomization(
            "cel",
            json!({"wait": true, "timeout": "2m", "retryInterval": "1h",
                "healthCheckExprs": [{
                    "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
                    "current": "status.conditions.filter(e, e.type == 'Ready').all(e, e.reason.lowerAscii() == 'succeeded' && sets.contains(['True'], [e.status]) && base64.decode(e.message) == b'ready')",
                    "failed": "status.conditions.exists(e, e.type == 'Ready' && e.reason.upperAscii().startsWith('FAIL'))",
                }]}),
        )
        .await;
    let object = json!({"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
        "metadata": {"name": "widget", "namespace": ns}});
    let api = crate::support::cluster::dynamic_api(&harness.cluster.client, &object).await;
    let exists = wait_for(Duration::from_secs(30), || async {
        api.get_opt("widget").await.ok().flatten()
    })
    .await;
    assert!(exists.is_some(), "the GitRepository is applied");
    api.patch_status(
        "widget",
        &kube::api::PatchParams::apply("source-controller").force(),
        &kube::api::Patch::Apply(json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
            "status": {"observedGeneration": 1, "conditions": [{"type": "Ready", "status": "True",
                "reason": "Succeeded", "message": "cmVhZHk=",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]},
        })),
    )
    .await
    .unwrap();
    harness
        .wait_ready("cel", "True", "ReconciliationSucceeded")
        .await;
}
