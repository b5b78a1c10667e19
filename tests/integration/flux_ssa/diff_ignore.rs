//! `ssa/manager_diff_ignore_test.go`: what a plan shows with `spec.ignore` rules (ssa's
//! `DriftIgnoreRules`): drift in an ignored field alone is no change, other drift still is
//! (with the ignored field left out of both views), no rules or an empty list change
//! nothing, and a rule's selector scopes it.

use kube::api::{Patch, PatchParams};
use kustomize_controller::api::{IgnoreRule, Selector};
use kustomize_controller::apply::Planned;
use kustomize_controller::objects::Action;
use serde_json::{Value, json};

use super::{apply, first, manager_ignoring, read_manifest};
use crate::support::cluster::{TestCluster, dynamic_api, unique};

fn rule(path: &str, kind: &str) -> IgnoreRule {
    IgnoreRule {
        paths: vec![path.into()],
        target: Some(Selector {
            kind: Some(kind.into()),
            ..Default::default()
        }),
    }
}

async fn plan(client: &kube::Client, rules: &[IgnoreRule], object: &Value) -> Planned {
    let mut planned = manager_ignoring(client, rules)
        .plan(vec![object.clone()])
        .await
        .unwrap();
    planned.remove(0)
}

/// test2.yaml applied; its Deployment.
async fn applied_deployment(cluster: &TestCluster, prefix: &str) -> (String, Value) {
    let id = unique(prefix);
    let objects = read_manifest("test2.yaml", &id);
    apply(&cluster.client, &objects).await;
    let deployment = objects[first(&objects, "Deployment", &id)].clone();
    (id, deployment)
}

/// A vertical autoscaler's forced apply of the replica count.
async fn scale_as_vpa(cluster: &TestCluster, id: &str, deployment: &Value, replicas: i64) {
    let api = dynamic_api(&cluster.client, deployment).await;
    let scaled = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": id, "namespace": id},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": id}},
            "template": {"metadata": {"labels": {"app": id}},
                "spec": {"containers": [{"name": "podinfod",
                    "image": "ghcr.io/stefanprodan/podinfo:6.0.0"}]}}}});
    api.patch(
        id,
        &PatchParams::apply("vpa-controller").force(),
        &Patch::Apply(scaled),
    )
    .await
    .unwrap();
}

/// `TestDiff_DriftIgnoreRules_IgnoredFieldReturnsUnchanged`: replicas another controller set
/// and a rule ignores are no change, and no views come with it.
#[tokio::test]
async fn flux_ssa_diff_drift_ignore_rules_ignored_field_returns_unchanged() {
    let cluster = TestCluster::start().await;
    let (id, deployment) = applied_deployment(&cluster, "diff-ign").await;
    scale_as_vpa(&cluster, &id, &deployment, 5).await;
    let rules = [rule("/spec/replicas", "Deployment")];

    // returns unchanged when only ignored field drifted
    let planned = plan(&cluster.client, &rules, &deployment).await;
    assert_eq!(planned.change.action, Action::Unchanged);
    assert!(planned.drift.is_none());
}

/// `TestDiff_DriftIgnoreRules_NonIgnoredFieldReturnsConfigured`: a field no rule ignores is a
/// change, with both views.
#[tokio::test]
async fn flux_ssa_diff_drift_ignore_rules_non_ignored_field_returns_configured() {
    let cluster = TestCluster::start().await;
    let (_, mut deployment) = applied_deployment(&cluster, "diff-nonign").await;
    let rules = [rule("/spec/replicas", "Deployment")];

    // returns configured when non-ignored field changed
    deployment["spec"]["minReadySeconds"] = json!(10);
    let planned = plan(&cluster.client, &rules, &deployment).await;
    assert_eq!(planned.change.action, Action::Configured);
    assert!(planned.drift.is_some());
}

/// `TestDiff_DriftIgnoreRules_StripsIgnoredFieldsFromReturnedObjects`: beside other drift, the
/// ignored field is left out of both views.
#[tokio::test]
async fn flux_ssa_diff_drift_ignore_rules_strips_ignored_fields_from_returned_objects() {
    let cluster = TestCluster::start().await;
    let (id, mut deployment) = applied_deployment(&cluster, "diff-strip").await;
    scale_as_vpa(&cluster, &id, &deployment, 10).await;
    let rules = [rule("/spec/replicas", "Deployment")];

    // strips ignored fields from returned objects when other drift exists
    deployment["spec"]["minReadySeconds"] = json!(42);
    let planned = plan(&cluster.client, &rules, &deployment).await;
    assert_eq!(planned.change.action, Action::Configured);
    let views = planned.drift.expect("views of a configured object");
    assert!(
        views.live.pointer("/spec/replicas").is_none(),
        "{}",
        views.live
    );
    assert!(
        views.applied.pointer("/spec/replicas").is_none(),
        "{}",
        views.applied
    );
}

/// `TestDiff_DriftIgnoreRules_EmptyRulesFallsBack`: without rules, or with an empty list, a
/// plan is the plain one.
#[tokio::test]
async fn flux_ssa_diff_drift_ignore_rules_empty_rules_falls_back() {
    let cluster = TestCluster::start().await;
    let id = unique("diff-empty");
    let objects = read_manifest("test1.yaml", &id);
    apply(&cluster.client, &objects).await;
    let config_map = objects[first(&objects, "ConfigMap", &id)].clone();

    // unchanged object returns unchanged with nil rules
    let planned = plan(&cluster.client, &[], &config_map).await;
    assert_eq!(planned.change.action, Action::Unchanged);

    // changed object returns configured with nil rules (ssa's empty slice is the same: no
    // rules); a rule with no paths is none either
    let mut modified = config_map.clone();
    modified["data"]["key"] = json!("new-value");
    assert_eq!(
        plan(&cluster.client, &[], &modified).await.change.action,
        Action::Configured
    );
    let no_paths = [IgnoreRule {
        paths: Vec::new(),
        target: None,
    }];
    modified["data"]["key"] = json!("another-value");
    assert_eq!(
        plan(&cluster.client, &no_paths, &modified)
            .await
            .change
            .action,
        Action::Configured
    );
}

/// `TestDiff_DriftIgnoreRules_SelectorScoping`: a rule for Deployments does not hide a
/// ConfigMap's change at the same path.
#[tokio::test]
async fn flux_ssa_diff_drift_ignore_rules_selector_scoping() {
    let cluster = TestCluster::start().await;
    let id = unique("diff-sel");
    let objects = read_manifest("test1.yaml", &id);
    apply(&cluster.client, &objects).await;
    let mut config_map = objects[first(&objects, "ConfigMap", &id)].clone();
    let rules = [rule("/data/key", "Deployment")];

    // selector-scoped rule does not suppress drift on non-matching kind
    config_map["data"]["key"] = json!("changed-value");
    assert_eq!(
        plan(&cluster.client, &rules, &config_map)
            .await
            .change
            .action,
        Action::Configured
    );
}
