//! `ssa/manager_wait_test.go`: waiting for a set of applied objects (the controller's health
//! checks): a custom resource until its status observes its generation, fail-fast on a
//! Deployment past its progress deadline (or, without it, a timeout naming what is still in
//! progress), failing early once everything left has failed, a read that keeps failing named
//! in the timeout, and Jobs deleted after they finished.

use std::time::Duration;

use kube::api::{Patch, PatchParams};
use kustomize_controller::health::{CelChecks, HealthError, WaitOptions, jobs_with_ttl, wait};
use kustomize_controller::objects::{ChangeSet, ObjectRef};
use serde_json::{Value, json};

use super::{apply, first, read_manifest, subject};
use crate::support::cluster::{TestCluster, dynamic_api, unique, wait_for};

fn options(timeout: Duration, interval: Duration, fail_fast: bool) -> WaitOptions {
    WaitOptions {
        timeout,
        interval,
        fail_fast,
        jobs_with_ttl: Default::default(),
    }
}

/// ssa's `DefaultWaitOptions`: a minute, polled every two seconds (every half second here),
/// failing fast.
fn default_options() -> WaitOptions {
    options(Duration::from_secs(60), Duration::from_millis(500), true)
}

fn references(set: &ChangeSet) -> Vec<ObjectRef> {
    set.changes.iter().map(|c| c.object.clone()).collect()
}

async fn wait_for_set(
    client: &kube::Client,
    objects: &[ObjectRef],
    options: &WaitOptions,
) -> Result<(), HealthError> {
    wait(client, objects, &CelChecks::new(&[]).unwrap(), options).await
}

/// `TestWaitForSet`: a CRD is waited for until established; a custom resource whose status
/// (defaulted to `observedGeneration: -1`) has not observed its generation times the wait
/// out, and passes once its status says it has.
#[tokio::test]
async fn flux_ssa_wait_for_set() {
    let cluster = TestCluster::start().await;
    let client = &cluster.client;
    let id = unique("wait");
    let mut objects = read_manifest("test5.yaml", &id);
    // The CRD's group is the test's own, so that runs on a shared cluster do not meet.
    let group = format!("{id}.testing.fluxcd.io");
    let crd = first(
        &objects,
        "CustomResourceDefinition",
        "clustertests.testing.fluxcd.io",
    );
    objects[crd]["metadata"]["name"] = json!(format!("clustertests.{group}"));
    objects[crd]["spec"]["group"] = json!(group);
    let cr = first(&objects, "ClusterTest", &id);
    objects[cr]["apiVersion"] = json!(format!("{group}/v1"));

    // waits for CRD and CR
    let set = apply(client, &[objects[crd].clone()]).await;
    wait_for_set(client, &references(&set), &default_options())
        .await
        .unwrap_or_else(|e| panic!("wait failed for CRD: {e}"));

    let set = apply(client, &objects).await;
    let short = options(Duration::from_secs(3), Duration::from_secs(1), true);
    let error = wait_for_set(client, &references(&set), &short)
        .await
        .expect_err("observedGeneration < generation");
    assert!(
        error.to_string().contains(&format!("ClusterTest/{id}")),
        "{error}"
    );

    let api = dynamic_api(client, &objects[cr]).await;
    api.patch_status(
        &id,
        &PatchParams::apply("kustomize-controller"),
        &Patch::Apply(
            json!({"apiVersion": objects[cr]["apiVersion"], "kind": "ClusterTest",
            "metadata": {"name": id}, "status": {"observedGeneration": 1}}),
        ),
    )
    .await
    .unwrap();
    wait_for_set(client, &references(&set), &default_options())
        .await
        .unwrap_or_else(|e| panic!("wait error: {e}"));
}

/// ssa's `test10.yaml` applied, its Deployment (an image that never runs) given a progress
/// deadline of a second rather than sixty, and waited for until its controller reports
/// `ProgressDeadlineExceeded` (ssa's envtest runs no deployment controller, so its tests write
/// that status themselves; a controller would overwrite it). Returns the objects as applied.
async fn stalled_deployment(cluster: &TestCluster, prefix: &str) -> (String, Vec<Value>) {
    let id = unique(prefix);
    let mut objects = read_manifest("test10.yaml", &id);
    let deployment = first(&objects, "Deployment", &id);
    objects[deployment]["spec"]["progressDeadlineSeconds"] = json!(1);
    apply(&cluster.client, &objects).await;
    let api = dynamic_api(&cluster.client, &objects[deployment]).await;
    let stalled = wait_for(Duration::from_secs(60), || async {
        let live = serde_json::to_value(api.get(&id).await.ok()?).ok()?;
        let conditions = live.pointer("/status/conditions")?.as_array()?.clone();
        conditions
            .iter()
            .any(|c| c["type"] == "Progressing" && c["reason"] == "ProgressDeadlineExceeded")
            .then_some(())
    })
    .await;
    assert!(
        stalled.is_some(),
        "the Deployment never passed its deadline"
    );
    (id, objects)
}

/// `TestWaitForSet_failFast`: a stalled Deployment beside a PersistentVolumeClaim that stays
/// Pending (no volume ever matches it): without fail-fast the wait times out naming both
/// (Failed, InProgress); with it, it fails early naming the Deployment alone.
#[tokio::test]
async fn flux_ssa_wait_for_set_fail_fast() {
    let cluster = TestCluster::start().await;
    let (id, objects) = stalled_deployment(&cluster, "failfast").await;
    let all: Vec<ObjectRef> = objects.iter().map(ObjectRef::of).collect();
    let failed = format!(
        "{} status: 'Failed'",
        subject(&objects[first(&objects, "Deployment", &id)])
    );

    // timeout when fail fast is disabled
    let without = options(Duration::from_secs(3), Duration::from_millis(500), false);
    let error = wait_for_set(&cluster.client, &all, &without)
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("timeout waiting for"), "{error}");
    assert!(error.contains(&failed), "{error}");
    assert!(error.contains("InProgress"), "{error}");

    // fail early even if there are still progressing resources
    let with = options(Duration::from_secs(3), Duration::from_millis(500), true);
    let error = wait_for_set(&cluster.client, &all, &with)
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("failed early"), "{error}");
    assert!(error.contains(&failed), "{error}");
    assert!(!error.contains("InProgress"), "{error}");
}

/// `TestWaitForSet_terminalState`: without fail-fast, once everything not Current has Failed,
/// the wait ends early. (ssa's test binds its claim by writing `phase: Bound`; a cluster's
/// volume controller puts an unbound claim back to Pending, so the port waits for the
/// namespace, the ConfigMap and the Deployment, the claim left out.)
#[tokio::test]
async fn flux_ssa_wait_for_set_terminal_state() {
    let cluster = TestCluster::start().await;
    let (id, objects) = stalled_deployment(&cluster, "terminal").await;
    let terminal: Vec<ObjectRef> = objects
        .iter()
        .filter(|o| o["kind"] != "PersistentVolumeClaim")
        .map(ObjectRef::of)
        .collect();
    let without = options(Duration::from_secs(30), Duration::from_millis(500), false);
    let error = wait_for_set(&cluster.client, &terminal, &without)
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("failed early"), "{error}");
    let failed = format!(
        "{} status: 'Failed'",
        subject(&objects[first(&objects, "Deployment", &id)])
    );
    assert!(error.contains(&failed), "{error}");
    assert!(!error.contains("InProgress"), "{error}");
}

/// `TestWaitForSet_ErrorOnReaderError`: a status that can never be read is Unknown, and the
/// timeout says why. ssa's test makes its status reader fail; the port's reader is an
/// account that may not read ConfigMaps, so the reason is the server's refusal.
#[tokio::test]
async fn flux_ssa_wait_for_set_error_on_reader_error() {
    let cluster = TestCluster::start().await;
    let ns = &cluster.namespace;
    cluster
        .apply(&json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "test", "namespace": ns}, "data": {"foo": "bar"}}))
        .await;
    let user = unique("kc-no-reader");
    let reader = cluster.client_as(&user, &[]);
    let set = [ObjectRef {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: ns.clone(),
        name: "test".into(),
    }];
    let short = options(Duration::from_millis(100), Duration::from_millis(40), true);
    let error = wait_for_set(&reader, &set, &short).await.unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "timeout waiting for: [ConfigMap/{ns}/test status: 'Unknown': configmaps \"test\" is \
             forbidden: User \"{user}\" cannot get resource \"configmaps\" in API group \"\" in \
             the namespace \"{ns}\"]"
        )
    );
}

/// `TestWaitForSet_JobWithTTL`: a Job deleted after it finished (its `ttlSecondsAfterFinished`;
/// here the test deletes it, as the TTL controller would) counts as done when the wait knows
/// it has a TTL, and is NotFound otherwise.
#[tokio::test]
async fn flux_ssa_wait_for_set_job_with_ttl() {
    let cluster = TestCluster::start().await;
    let id = unique("job-ttl");
    let job = json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": id, "namespace": cluster.namespace},
        "spec": {"ttlSecondsAfterFinished": 0, "template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "test", "image": "busybox", "command": ["echo", "hello"]}]}}}});
    apply(&cluster.client, std::slice::from_ref(&job)).await;
    let api = dynamic_api(&cluster.client, &job).await;
    api.delete(&id, &kube::api::DeleteParams::background())
        .await
        .unwrap();
    let gone = wait_for(Duration::from_secs(30), || async {
        api.get_opt(&id).await.ok()?.is_none().then_some(())
    })
    .await;
    assert!(gone.is_some(), "the Job is never gone");
    let set = [ObjectRef::of(&job)];

    // NotFound Job with TTL is treated as success
    let mut with_ttl = options(Duration::from_secs(5), Duration::from_millis(100), true);
    with_ttl.jobs_with_ttl = jobs_with_ttl(std::slice::from_ref(&job));
    wait_for_set(&cluster.client, &set, &with_ttl)
        .await
        .unwrap_or_else(|e| panic!("a Job with a TTL that is gone is done: {e}"));

    // NotFound Job without TTL option is treated as error
    let without = options(Duration::from_secs(2), Duration::from_millis(100), true);
    let error = wait_for_set(&cluster.client, &set, &without)
        .await
        .unwrap_err();
    assert!(error.to_string().contains("NotFound"), "{error}");
}
