//! Health checks against live objects: waiting, failing fast, timeouts, CEL expressions.

use std::time::Duration;

use kube::api::{Patch, PatchParams};
use kustomize_controller::api::CustomHealthCheck;
use kustomize_controller::health::{CelChecks, HealthError, WaitOptions, wait};
use kustomize_controller::objects::ObjectRef;
use serde_json::{Value, json};

use crate::support::cluster::{TestCluster, dynamic_api};

fn quick(timeout_ms: u64) -> WaitOptions {
    WaitOptions {
        fail_fast: true,
        timeout: Duration::from_millis(timeout_ms),
        interval: Duration::from_millis(20),
        jobs_with_ttl: Default::default(),
    }
}

async fn set_status(cluster: &TestCluster, object: &Value, status: Value) {
    let api = dynamic_api(&cluster.client, object).await;
    let body =
        json!({"apiVersion": object["apiVersion"], "kind": object["kind"], "status": status});
    api.patch_status(
        object["metadata"]["name"].as_str().unwrap(),
        &PatchParams::apply("test-controller").force(),
        &Patch::Apply(&body),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn waits_for_deployments_and_reports_stragglers() {
    let cluster = TestCluster::start().await;
    let ns = &cluster.namespace;
    let deployment = cluster
        .apply(&json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": ns},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}}))
        .await;
    let reference = ObjectRef::of(&deployment);
    let error = wait(
        &cluster.client,
        std::slice::from_ref(&reference),
        &CelChecks::default(),
        &quick(200),
    )
    .await
    .unwrap_err();
    assert!(matches!(error, HealthError::Timeout(_)));
    assert_eq!(
        error.to_string(),
        format!("timeout waiting for: [Deployment/{ns}/web status: 'InProgress']")
    );
    // Its controller owns the status: on a cluster without kubelets no Pod becomes available,
    // so the Deployment is ready once it asks for none.
    let mut scaled_down = deployment.clone();
    scaled_down["spec"]["replicas"] = json!(0);
    for field in [
        "managedFields",
        "resourceVersion",
        "uid",
        "creationTimestamp",
        "generation",
    ] {
        scaled_down["metadata"]
            .as_object_mut()
            .unwrap()
            .remove(field);
    }
    scaled_down.as_object_mut().unwrap().remove("status");
    cluster.apply(&scaled_down).await;
    wait(
        &cluster.client,
        &[reference],
        &CelChecks::default(),
        &quick(5_000),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn failed_jobs_fail_fast_and_deleted_jobs_count_as_done() {
    let cluster = TestCluster::start().await;
    let ns = &cluster.namespace;
    let job = cluster
        .apply(&json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "once", "namespace": ns},
            "spec": {"template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "run", "image": "busybox"}]}}}}))
        .await;
    set_status(&cluster, &job, json!({"conditions": [{"type": "Failed", "status": "True",
        "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit"}]})).await;
    let started = std::time::Instant::now();
    let error = wait(
        &cluster.client,
        &[ObjectRef::of(&job)],
        &CelChecks::default(),
        &quick(30_000),
    )
    .await
    .unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "fails before the timeout"
    );
    assert_eq!(
        error.to_string(),
        format!("failed early due to stalled resources: [Job/{ns}/once status: 'Failed']")
    );
    // DisableFailFastBehavior: a failed object is waited on while anything else may still
    // come round (ssa's "timeout when fail fast is disabled")...
    let patient = WaitOptions {
        fail_fast: false,
        ..quick(300)
    };
    let progressing = cluster
        .apply(&json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "progressing", "namespace": ns},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "progressing"}},
                "template": {"metadata": {"labels": {"app": "progressing"}},
                    "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}}))
        .await;
    let error = wait(
        &cluster.client,
        &[ObjectRef::of(&job), ObjectRef::of(&progressing)],
        &CelChecks::default(),
        &patient,
    )
    .await
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "timeout waiting for: [Job/{ns}/once status: 'Failed', Deployment/{ns}/progressing status: 'InProgress']"
        )
    );
    // ...but once all that is left has failed, the wait ends (ssa's "fail early when all
    // resources are in terminal states").
    let started = std::time::Instant::now();
    let error = wait(
        &cluster.client,
        &[ObjectRef::of(&job)],
        &CelChecks::default(),
        &WaitOptions {
            fail_fast: false,
            ..quick(30_000)
        },
    )
    .await
    .unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "before the timeout"
    );
    assert_eq!(
        error.to_string(),
        format!("failed early due to stalled resources: [Job/{ns}/once status: 'Failed']")
    );
    // A Job that sets ttlSecondsAfterFinished and is gone did its work; one that does not is
    // missing (as Flux's ExtractJobsWithTTL decides).
    let ttl_job = json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "ttl-deleted", "namespace": ns},
        "spec": {"ttlSecondsAfterFinished": 0}});
    let with_ttl = WaitOptions {
        jobs_with_ttl: kustomize_controller::health::jobs_with_ttl(std::slice::from_ref(&ttl_job)),
        ..quick(1_000)
    };
    wait(
        &cluster.client,
        &[ObjectRef::of(&ttl_job)],
        &CelChecks::default(),
        &with_ttl,
    )
    .await
    .unwrap();
    let gone = ObjectRef {
        name: "gone-without-ttl".into(),
        ..ObjectRef::of(&job)
    };
    let error = wait(&cluster.client, &[gone], &CelChecks::default(), &with_ttl)
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        format!("timeout waiting for: [Job/{ns}/gone-without-ttl status: 'NotFound']")
    );
}

#[tokio::test]
async fn cel_expressions_judge_custom_resources() {
    let cluster = TestCluster::start().await;
    let ns = &cluster.namespace;
    let source = cluster
        .create_source(
            crate::support::artifacts::SourceKind::GitRepository,
            ns,
            "repo",
            None,
        )
        .await;
    let checks = CelChecks::new(&[CustomHealthCheck {
        api_version: "source.toolkit.fluxcd.io/v1".into(),
        kind: Some("GitRepository".into()),
        current: "has(self.status.artifact)".into(),
        in_progress: None,
        failed: Some(
            "self.status.conditions.exists(c, c.type == 'Stalled' && c.status == 'True')".into(),
        ),
    }])
    .unwrap();
    let reference = ObjectRef::of(&source);
    assert!(matches!(
        wait(
            &cluster.client,
            std::slice::from_ref(&reference),
            &checks,
            &quick(150)
        )
        .await,
        Err(HealthError::Timeout(_))
    ));
    set_status(&cluster, &source, json!({"observedGeneration": 1, "conditions": [{"type": "Stalled", "status": "True",
        "reason": "AuthFailed", "message": "no credentials", "lastTransitionTime": "2026-01-01T00:00:00Z"}]})).await;
    assert!(matches!(
        wait(
            &cluster.client,
            std::slice::from_ref(&reference),
            &checks,
            &quick(5_000)
        )
        .await,
        Err(HealthError::Failed(_))
    ));
    let server = crate::support::artifacts::ArtifactServer::start().await;
    let artifact = server.publish_dir(
        "a.tar.gz",
        "main@sha1:1",
        &crate::support::repo_root().join("examples/podinfo"),
    );
    cluster
        .set_artifact(
            crate::support::artifacts::SourceKind::GitRepository,
            ns,
            "repo",
            &artifact,
        )
        .await;
    wait(&cluster.client, &[reference], &checks, &quick(5_000))
        .await
        .unwrap();
}
