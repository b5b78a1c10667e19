//! Flux's health and discovery tests on custom resources (`kustomization_wait_test.go`): a CRD
//! with two versions applied with its instance in one revision, served at its preferred
//! version and gone from discovery once the Kustomization is finalized; and one CEL health
//! expression for a whole API group, judging two kinds.

use std::time::Duration;

use serde_json::json;

use super::{
    condition, eventually, eventually_within, gone, has_condition, kubeconfig_secret,
    patch_kustomization,
};
use crate::support::cluster::unique;
use crate::support::controller::Harness;

fn settled_at(object: &kustomize_controller::api::Kustomization, revision: &str) -> bool {
    let status = object.status.as_ref().unwrap();
    has_condition(object, "Ready", "True")
        && status.last_attempted_revision.as_deref() == Some(revision)
        && object.metadata.generation == Some(status.observed_generation)
}

/// A cluster-scoped CRD of `group` with a `spec` of any fields, served at `versions` (the first
/// stored).
fn crd(group: &str, kind: &str, plural: &str, versions: &[&str]) -> String {
    let versions: String = versions
        .iter()
        .enumerate()
        .map(|(index, version)| {
            format!(
                "    - name: {version}\n      served: true\n      storage: {}\n      schema:\n        openAPIV3Schema:\n          type: object\n          properties:\n            spec:\n              type: object\n              x-kubernetes-preserve-unknown-fields: true\n",
                index == 0
            )
        })
        .collect();
    format!(
        "---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: {plural}.{group}\nspec:\n  group: {group}\n  names:\n    kind: {kind}\n    listKind: {kind}List\n    plural: {plural}\n    singular: {}\n  scope: Cluster\n  versions:\n{versions}",
        kind.to_lowercase()
    )
}

/// The version discovery prefers for `group`, or why there is none.
async fn preferred_version(harness: &Harness, group: &str) -> Result<String, kube::Error> {
    let group = kube::discovery::group(&harness.cluster.client, group).await?;
    Ok(group.preferred_version_or_latest().to_string())
}

/// `TestKustomizationReconciler_RESTMapper`: a CRD served at `v2` (stored) and `v2beta1`,
/// applied in one revision with a `v2` instance and `wait: true`, reconciles; discovery then
/// maps the kind to its preferred version `v2`; finalizing the Kustomization prunes the CRD,
/// after which discovery no longer knows the group.
#[tokio::test]
async fn flux_rest_mapper() {
    let harness = Harness::start().await;
    kubeconfig_secret(&harness).await;
    let group = format!("{}.kyverno.test", unique("rm"));
    let cr = format!(
        "---\napiVersion: {group}/v2\nkind: ClusterCleanupPolicy\nmetadata:\n  name: test-cluster-cleanup-policy\nspec:\n  schedule: '*/5 * * * *'\n  match:\n    any:\n      - resources:\n          kinds:\n            - Namespace\n"
    );
    let crd = crd(
        &group,
        "ClusterCleanupPolicy",
        "clustercleanuppolicies",
        &["v2", "v2beta1"],
    );
    let artifact = harness.publish_files(
        "restmapper",
        "main/restmapper",
        &[("crd.yaml", &crd), ("cr.yaml", &cr)],
    );
    harness.source("repo", &artifact).await;
    harness
        .create_kustomization(
            "rm",
            json!({"interval": "10m", "prune": true, "path": "./", "wait": true,
                "targetNamespace": null,
                "kubeConfig": {"secretRef": {"name": "kubeconfig"}}}),
        )
        .await;
    eventually(&harness, "rm", "reconciled main/restmapper", |k| {
        settled_at(k, "main/restmapper")
    })
    .await;

    // discovers newly registered CRD and preferred version (the group list in discovery
    // follows a CRD's establishment a little later, as kube-apiserver's does: poll)
    let preferred = crate::support::cluster::wait_for(Duration::from_secs(30), || async {
        preferred_version(&harness, &group).await.ok()
    })
    .await;
    assert_eq!(preferred.as_deref(), Some("v2"));

    // finalizes object
    harness
        .kustomizations()
        .delete("rm", &Default::default())
        .await
        .unwrap();
    gone(&harness, "rm").await;

    // discovery fails for deleted CRD
    let forgotten = crate::support::cluster::wait_for(Duration::from_secs(30), || async {
        preferred_version(&harness, &group)
            .await
            .is_err()
            .then_some(())
    })
    .await;
    assert!(forgotten.is_some(), "{group} is still discovered");
}

/// `TestKustomizationReconciler_HealthCheckExprs_GroupOnly`: one `healthCheckExprs` entry
/// with an API group and no kind (`has(spec.ready) && spec.ready == true`) judges both kinds
/// of two cluster-scoped CRDs in that group: Healthy Succeeded while both instances are
/// ready; when a new revision makes Bar not ready (with a short timeout), Healthy False
/// HealthCheckFailed naming Bar and its instance.
#[tokio::test]
async fn flux_health_check_exprs_group_only() {
    let harness = Harness::start().await;
    kubeconfig_secret(&harness).await;
    let id = unique("cel-grp");
    let group = format!("{id}.flux-test.io");
    let (foo_name, bar_name) = (unique("foo"), unique("bar"));
    let files = |bar_ready: bool| {
        vec![
            (
                "crd-foo.yaml".to_string(),
                crd(&group, "Foo", "foos", &["v1"]),
            ),
            (
                "crd-bar.yaml".to_string(),
                crd(&group, "Bar", "bars", &["v1"]),
            ),
            (
                "foo.yaml".to_string(),
                format!(
                    "---\napiVersion: {group}/v1\nkind: Foo\nmetadata:\n  name: {foo_name}\nspec:\n  ready: true\n"
                ),
            ),
            (
                "bar.yaml".to_string(),
                format!(
                    "---\napiVersion: {group}/v1\nkind: Bar\nmetadata:\n  name: {bar_name}\nspec:\n  ready: {bar_ready}\n"
                ),
            ),
        ]
    };
    let publish = |name: &str, revision: &str, bar_ready: bool| {
        let files = files(bar_ready);
        let files: Vec<(&str, &str)> = files
            .iter()
            .map(|(p, t)| (p.as_str(), t.as_str()))
            .collect();
        harness.publish_files(name, revision, &files)
    };
    harness
        .source("repo", &publish("grp-ready", "v1.0.0", true))
        .await;
    harness
        .create_kustomization(
            "grp",
            json!({"interval": "2m", "path": "./", "prune": true, "wait": true,
                "targetNamespace": null,
                "kubeConfig": {"secretRef": {"name": "kubeconfig"}},
                "healthCheckExprs": [{"apiVersion": format!("{group}/v1"),
                    "current": "has(spec.ready) && spec.ready == true"}]}),
        )
        .await;

    // group-only healthcheck succeeds for both kinds
    let ready = eventually_within(
        &harness,
        Duration::from_secs(60),
        "grp",
        "reconciled v1.0.0",
        |k| settled_at(k, "v1.0.0"),
    )
    .await;
    let healthy = condition(&ready, "Healthy").expect("a Healthy condition");
    assert_eq!(
        (healthy.status.as_str(), healthy.reason.as_str()),
        ("True", "Succeeded")
    );

    // reports unhealthy when one kind stops satisfying the group expression. Flux shortens
    // the timeout right after publishing the revision; here it goes first, so that the
    // revision's health checks cannot start with the longer one.
    patch_kustomization(&harness, "grp", json!({"spec": {"timeout": "5s"}})).await;
    eventually(&harness, "grp", "reconciled the shorter timeout", |k| {
        settled_at(k, "v1.0.0")
    })
    .await;
    harness
        .source("repo", &publish("grp-bar-not-ready", "v1.0.1", false))
        .await;
    let unhealthy = eventually_within(
        &harness,
        Duration::from_secs(60),
        "grp",
        "reported Bar unhealthy",
        |k| {
            condition(k, "Healthy")
                .is_some_and(|c| c.status == "False" && c.reason == "HealthCheckFailed")
        },
    )
    .await;
    let message = &condition(&unhealthy, "Healthy").unwrap().message;
    assert!(message.contains("Bar"), "{message}");
    assert!(message.contains(&bar_name), "{message}");
}
