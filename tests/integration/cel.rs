//! `healthCheckExprs` in Flux's CEL environment: expressions written against the object's own
//! fields, with the cel-go libraries Flux enables (optional types, strings with `format`,
//! encoders, sets). The
//! object checked is a GitRepository no source-controller serves, whose Ready condition the
//! test sets as source-controller would.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::cluster::wait_for;
use crate::support::controller::{Harness, ready_message};

const WIDGET: &str = "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: widget\nspec:\n  url: https://example.invalid/widget.git\n  interval: 1m\n";

/// A Kustomization `cel` applying the widget GitRepository with these health expressions.
async fn checking_the_widget(harness: &Harness, revision: &str, expressions: Value) {
    let artifact = harness.publish_files(revision, revision, &[("repo.yaml", WIDGET)]);
    harness.source("repo", &artifact).await;
    let mut check = json!({"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository"});
    if let (Some(check), Some(expressions)) = (check.as_object_mut(), expressions.as_object()) {
        check.extend(expressions.clone());
    }
    harness
        .create_kustomization(
            "cel",
            json!({"wait": true, "timeout": "2m", "retryInterval": "1h", "healthCheckExprs": [check]}),
        )
        .await;
}

/// Sets the widget's Ready condition, once it is applied, as source-controller would.
async fn set_widget_ready(harness: &Harness, status: &str, reason: &str, message: &str) {
    let object = json!({"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
        "metadata": {"name": "widget", "namespace": harness.cluster.namespace}});
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
            "status": {"observedGeneration": 1, "conditions": [{"type": "Ready", "status": status,
                "reason": reason, "message": message,
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]},
        })),
    )
    .await
    .unwrap();
}

/// Flux's documented `healthCheckExprs`: a matching `failed` expression fails the check at
/// once (not at the timeout), and `current` passes it. (The status must have observed the
/// generation: before that the object is InProgress.)
#[tokio::test]
async fn health_check_expressions_use_fluxs_cel_environment() {
    let harness = Harness::start().await;
    let ns = harness.cluster.namespace.clone();
    checking_the_widget(
        &harness,
        "main@sha1:ce1",
        json!({"current": "status.conditions.filter(e, e.type == 'Ready').all(e, e.status == 'True')",
            "failed": "status.conditions.filter(e, e.type == 'Ready').all(e, e.status == 'False')"}),
    )
    .await;
    set_widget_ready(&harness, "False", "Test", "set by the test").await;
    let started = std::time::Instant::now();
    let failed = harness
        .wait_ready("cel", "False", "HealthCheckFailed")
        .await;
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "failed at once, not at the 2m timeout"
    );
    assert!(
        ready_message(&failed).contains(&format!("GitRepository/{ns}/widget status: 'Failed'")),
        "{}",
        ready_message(&failed)
    );
    set_widget_ready(&harness, "True", "Test", "set by the test").await;
    harness.request_reconcile("cel", "after-ready").await;
    harness
        .wait_ready("cel", "True", "ReconciliationSucceeded")
        .await;
}

/// The extension libraries decide health as in Flux instead of failing to evaluate.
#[tokio::test]
async fn health_check_expressions_use_the_extension_libraries_flux_enables() {
    let harness = Harness::start().await;
    checking_the_widget(
        &harness,
        "main@sha1:ce2",
        json!({"current": "status.conditions.filter(e, e.type == 'Ready').all(e, e.reason.lowerAscii() == 'succeeded' && sets.contains(['True'], [e.status]) && base64.decode(e.message) == b'ready' && '%s/%s'.format([e.type, e.status]) == 'Ready/True')",
            "failed": "status.?conditions.orValue([]).exists(e, e.type == 'Ready' && e.reason.upperAscii().startsWith('FAIL')) || status.?conditions[?0].?reason.orValue('') == 'Stalled'"}),
    )
    .await;
    set_widget_ready(&harness, "True", "Succeeded", "cmVhZHk=").await;
    harness
        .wait_ready("cel", "True", "ReconciliationSucceeded")
        .await;
}
