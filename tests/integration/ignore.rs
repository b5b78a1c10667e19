//! `spec.ignore` and field ownership, after fluxcd/pkg `ssa`'s
//! `TestApply_DriftIgnoreRules_SharedMutableCoOwnership`: a field another server-side-apply
//! manager co-owns and then takes with force keeps that manager's value, and the next apply of
//! the Kustomization leaves the field out, so the controller no longer co-owns it.

use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use std::time::Duration;

use crate::support::cluster::wait_for;
use crate::support::controller::Harness;

fn manifest(other: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: tuned\ndata:\n  k: ours\n  other: \"{other}\"\n"
    )
}

/// The managers whose server-side-apply entry owns `data.k`.
fn owners_of_k(map: &Value) -> Vec<String> {
    map["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|entry| {
            entry["operation"] == "Apply" && !entry["fieldsV1"]["f:data"]["f:k"].is_null()
        })
        .map(|entry| entry["manager"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn an_ignored_field_another_applier_took_is_left_to_it() {
    let harness = Harness::start().await;
    let ns = harness.cluster.namespace.clone();
    let v1 = harness.publish_files("tuned-1", "main@sha1:1111", &[("cm.yaml", &manifest("1"))]);
    harness.source("repo", &v1).await;
    harness
        .create_kustomization(
            "tuned",
            json!({"ignore": [{"paths": ["/data/k"], "target": {"kind": "ConfigMap"}}]}),
        )
        .await;
    harness
        .wait_ready("tuned", "True", "ReconciliationSucceeded")
        .await;
    let maps: Api<k8s_openapi::api::core::v1::ConfigMap> = harness.config_maps();
    let tuner = |value: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "tuned", "namespace": ns}, "data": {"k": value}})
    };

    // Another manager applies the same value without force: both co-own the field.
    maps.patch(
        "tuned",
        &PatchParams::apply("tuner"),
        &Patch::Apply(tuner("ours")),
    )
    .await
    .unwrap();
    let live = serde_json::to_value(maps.get("tuned").await.unwrap()).unwrap();
    let mut owners = owners_of_k(&live);
    owners.sort();
    assert_eq!(owners, ["kustomize-controller", "tuner"]);

    // It takes the field with another value.
    maps.patch(
        "tuned",
        &PatchParams::apply("tuner").force(),
        &Patch::Apply(tuner("theirs")),
    )
    .await
    .unwrap();

    // The next revision changes another field: the apply leaves `data.k` to its owner.
    let v2 = harness.publish_files("tuned-2", "main@sha1:2222", &[("cm.yaml", &manifest("2"))]);
    harness.source("repo", &v2).await;
    let kustomizations = harness.kustomizations();
    let applied = wait_for(Duration::from_secs(30), || async {
        let status = kustomizations.get("tuned").await.ok()?.status?;
        (status.last_applied_revision.as_deref() == Some("main@sha1:2222")).then_some(())
    })
    .await;
    assert!(applied.is_some(), "the second revision is applied");
    let live = serde_json::to_value(maps.get("tuned").await.unwrap()).unwrap();
    assert_eq!(live["data"]["other"], "2");
    assert_eq!(
        live["data"]["k"], "theirs",
        "the other manager's value stays"
    );
    assert_eq!(
        owners_of_k(&live),
        ["tuner"],
        "the controller no longer co-owns it"
    );
}
