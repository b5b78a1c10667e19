//! `ssa/manager_diff_test.go`: what an apply would change, decided as the apply decides it
//! and writing nothing (`Applier::plan`, which `kustomize-controller diff` and the drift
//! warn mode use): unchanged and configured objects with the live and dry-run views, keys
//! replaced in a Secret, Secret values masked, policies on the built or the live object,
//! removed map entries and list items, metadata drift, and conversion-webhook CA bundles.

use base64::Engine as _;
use kustomize_controller::apply::{ApplyOptions, Drift, Planned, drifted, mask_secret_data};
use kustomize_controller::objects::Action;
use serde_json::{Value, json};

use super::{apply, first, manager, read_manifest, subject};
use crate::support::cluster::{TestCluster, dynamic_api, unique};

const SSA: &str = "kustomize.toolkit.fluxcd.io/ssa";
const RECONCILE: &str = "kustomize.toolkit.fluxcd.io/reconcile";

/// ssa's `Diff` of one object: its change set entry and the live and dry-run views.
async fn diff(client: &kube::Client, object: &Value) -> Planned {
    let mut planned = manager(client, ApplyOptions::default())
        .plan(vec![object.clone()])
        .await
        .unwrap_or_else(|e| panic!("planning {}: {e}", subject(object)));
    assert_eq!(planned.len(), 1);
    planned.remove(0)
}

/// The live object as a client reads it, its managed fields left out.
async fn live_copy(client: &kube::Client, object: &Value) -> Value {
    let api = dynamic_api(client, object).await;
    let name = object["metadata"]["name"].as_str().unwrap();
    let mut live = serde_json::to_value(api.get(name).await.unwrap()).unwrap();
    live["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("managedFields");
    live
}

/// The action a plan of `object` reports.
async fn action(client: &kube::Client, object: &Value) -> Action {
    diff(client, object).await.change.action
}

/// The live copy of `object` with another data key, and `annotations` when given.
async fn edited(client: &kube::Client, object: &Value, annotations: Option<Value>) -> Value {
    let mut edited = live_copy(client, object).await;
    edited["data"]["secondKey"] = json!("public-second-key");
    if let Some(annotations) = annotations {
        edited["metadata"]["annotations"] = annotations;
    }
    edited
}

fn drift(planned: &Planned) -> &Drift {
    planned
        .drift
        .as_ref()
        .unwrap_or_else(|| panic!("no drift for {}", planned.change.object))
}

fn keys(object: &Value) -> Vec<String> {
    object["data"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

/// `TestDiff`: an unchanged ConfigMap; a changed one, whose dry-run shows the new value; a
/// Secret whose `stringData` key is replaced, whose dry-run holds the new key alone; and a
/// Secret's values masked in both views, its keys shown.
#[tokio::test]
async fn flux_ssa_diff() {
    let cluster = TestCluster::start().await;
    let client = &cluster.client;
    let id = unique("diff");
    let mut objects = read_manifest("test1.yaml", &id);
    let config_map = first(&objects, "ConfigMap", &id);
    let secret = first(&objects, "Secret", &id);
    objects[secret]["immutable"] = json!(false);
    apply(client, &objects).await;

    // generates empty diff for unchanged object
    let planned = diff(client, &objects[config_map]).await;
    assert_eq!(
        planned.change.object.to_string(),
        subject(&objects[config_map])
    );
    assert_eq!(planned.change.action, Action::Unchanged);

    // generates diff for changed object
    objects[config_map]["data"]["key"] = json!("diff-test");
    let planned = diff(client, &objects[config_map]).await;
    assert_eq!(planned.change.action, Action::Configured);
    assert_eq!(drift(&planned).applied["data"]["key"], "diff-test");

    // generates diff for replaced key in stringData secret
    let mut replaced = objects[secret].clone();
    replaced["metadata"]["name"] = json!(unique("diff"));
    apply(client, std::slice::from_ref(&replaced)).await;
    replaced["stringData"] = json!({"key.new": "diff-test"});
    let planned = diff(client, &replaced).await;
    assert_eq!(planned.change.action, Action::Configured);
    assert_eq!(keys(&drift(&planned).live), vec!["key".to_string()]);
    assert_eq!(keys(&drift(&planned).applied), vec!["key.new".to_string()]);

    // masks secret values (as `kustomize-controller diff` masks them)
    objects[secret]["stringData"]["key"] = json!("diff-test");
    objects[secret]["stringData"]["key.new"] = json!("diff-test");
    let planned = diff(client, &objects[secret]).await;
    assert_eq!(planned.change.object.to_string(), subject(&objects[secret]));
    let mut views = drift(&planned).clone();
    mask_secret_data(Some(&mut views.live), Some(&mut views.applied));
    let shown = format!("{}\n{}", views.live, views.applied);
    let encoded = base64::engine::general_purpose::STANDARD.encode("diff-test");
    assert!(shown.contains("key.new"), "{shown}");
    assert!(!shown.contains("diff-test"), "{shown}");
    assert!(!shown.contains(&encoded), "{shown}");
    assert!(!shown.contains("private-key"), "{shown}");
}

/// `TestDiff_Exclusions`: an object is compared; one whose live copy is marked
/// `reconcile: disabled` is skipped.
#[tokio::test]
async fn flux_ssa_diff_exclusions() {
    let cluster = TestCluster::start().await;
    let client = &cluster.client;
    let id = unique("ignore");
    let objects = read_manifest("test1.yaml", &id);
    let config_map = &objects[first(&objects, "ConfigMap", &id)];
    let secret = &objects[first(&objects, "Secret", &id)];
    apply(client, &objects).await;

    // diffs non-exclusion
    assert_eq!(diff(client, secret).await.change.action, Action::Unchanged);

    // skips diff exclusion
    let api = dynamic_api(client, config_map).await;
    api.patch(
        &id,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(json!({"metadata": {"annotations": {RECONCILE: "disabled"}}})),
    )
    .await
    .unwrap();
    assert_eq!(
        diff(client, config_map).await.change.action,
        Action::Skipped
    );
}

/// `TestDiff_IfNotPresent_OnExisting`: a ConfigMap created `ssa: IfNotPresent` is skipped;
/// its live copy with another key and the annotation emptied is configured; with the
/// annotation kept, skipped.
#[tokio::test]
async fn flux_ssa_diff_if_not_present_on_existing() {
    let cluster = TestCluster::start().await;
    let client = &cluster.client;
    let id = unique("ifnotpresentonexisting");
    let mut objects = read_manifest("test1.yaml", &id);
    let config_map = first(&objects, "ConfigMap", &id);
    objects[config_map]["metadata"]["annotations"] = json!({SSA: "IfNotPresent"});
    apply(client, &objects).await;

    // diffs skips
    assert_eq!(action(client, &objects[config_map]).await, Action::Skipped);

    // diffs applies without meta
    let without = edited(client, &objects[config_map], Some(json!({SSA: ""}))).await;
    assert_eq!(action(client, &without).await, Action::Configured);

    // diffs skips with meta
    let with = edited(client, &objects[config_map], None).await;
    assert_eq!(action(client, &with).await, Action::Skipped);
}

/// `TestDiff_IfNotPresent_OnObject`: an unannotated ConfigMap is unchanged; its live copy with
/// `ssa: IfNotPresent` and another key is skipped; without the annotation, configured.
#[tokio::test]
async fn flux_ssa_diff_if_not_present_on_object() {
    let cluster = TestCluster::start().await;
    let client = &cluster.client;
    let id = unique("ifnotpresentonobject");
    let objects = read_manifest("test1.yaml", &id);
    let config_map = &objects[first(&objects, "ConfigMap", &id)];
    apply(client, &objects).await;

    // diffs unchanged
    assert_eq!(action(client, config_map).await, Action::Unchanged);

    // diffs skips with meta
    let with = edited(client, config_map, Some(json!({SSA: "IfNotPresent"}))).await;
    assert_eq!(action(client, &with).await, Action::Skipped);

    // diffs configures without meta
    let without = edited(client, config_map, None).await;
    assert_eq!(action(client, &without).await, Action::Configured);
}

/// `TestDiff_Removals`: a ConfigMap without data is unchanged; an added entry is configured
/// (and shown); once applied, removing it again is configured.
#[tokio::test]
async fn flux_ssa_diff_removals() {
    let cluster = TestCluster::start().await;
    let client = &cluster.client;
    let id = unique("diff");
    let mut objects = read_manifest("test4.yaml", &id);
    let config_map = first(&objects, "ConfigMap", &id);
    apply(client, &objects).await;

    // generates empty diff for unchanged object
    let planned = diff(client, &objects[config_map]).await;
    assert_eq!(
        planned.change.object.to_string(),
        subject(&objects[config_map])
    );
    assert_eq!(planned.change.action, Action::Unchanged);

    // generates diff for added map entry
    objects[config_map]["data"] = json!({"token": "diff-test"});
    let planned = diff(client, &objects[config_map]).await;
    assert_eq!(planned.change.action, Action::Configured);
    assert_eq!(drift(&planned).applied["data"]["token"], "diff-test");
    apply(client, &objects[config_map..=config_map]).await;

    // generates diff for removed map entry
    objects[config_map]["data"]
        .as_object_mut()
        .unwrap()
        .remove("token");
    assert_eq!(
        diff(client, &objects[config_map]).await.change.action,
        Action::Configured
    );
    apply(client, &objects[config_map..=config_map]).await;
}

/// `TestDiffHPA`: an autoscaler with two metrics is unchanged; without its second metric,
/// configured; after applying the original again, unchanged; with the metric back, configured.
#[tokio::test]
async fn flux_ssa_diff_hpa() {
    let cluster = TestCluster::start().await;
    let client = &cluster.client;
    let id = unique("diff");
    let objects = read_manifest("test6.yaml", &id);
    let hpa = first(&objects, "HorizontalPodAutoscaler", &id);
    apply(client, &objects).await;

    // generates empty diff for unchanged object
    let planned = diff(client, &objects[hpa]).await;
    assert_eq!(planned.change.object.to_string(), subject(&objects[hpa]));
    assert_eq!(planned.change.action, Action::Unchanged);

    // generates diff for removed metric
    let mut fewer = objects[hpa].clone();
    let metrics = fewer["spec"]["metrics"].as_array_mut().unwrap();
    metrics.truncate(1);
    assert_eq!(diff(client, &fewer).await.change.action, Action::Configured);
    apply(client, &[fewer.clone()]).await;

    // generates empty diff for unchanged metric
    assert_eq!(diff(client, &fewer).await.change.action, Action::Unchanged);

    // generates diff for added metric
    assert_eq!(
        diff(client, &objects[hpa]).await.change.action,
        Action::Configured
    );
    apply(client, &objects).await;
}

/// `TestHasDrifted_Metadata`: a removed annotation or label is drift; the same object is not.
#[test]
fn flux_ssa_has_drifted_metadata() {
    let objects = read_manifest("test7.yaml", "drifted");
    let mut deployment = objects[first(&objects, "Deployment", "drifted")].clone();
    deployment["metadata"]["resourceVersion"] = json!("1");
    let annotated = deployment.clone();
    deployment["metadata"]["annotations"]
        .as_object_mut()
        .unwrap()
        .remove("annotated");
    let mut labeled = deployment.clone();
    labeled["metadata"]["labels"]
        .as_object_mut()
        .unwrap()
        .remove("labeled");
    for (name, object, expected) in [
        ("returns false if object is unchanged", &deployment, false),
        ("returns true if an annotation is removed", &annotated, true),
        ("returns true if an label is removed", &labeled, true),
    ] {
        assert_eq!(drifted(object, &deployment), expected, "{name}");
    }
}

/// `TestResourceManager_Diff_CRDWebhookCABundle`: against a CRD applied with a valid CA
/// bundle, one whose bundle is garbage is configured with the bundle left out of the dry-run;
/// the same CRD is unchanged (no views); a label change keeps the bundle in both views.
#[tokio::test]
async fn flux_ssa_diff_crd_webhook_ca_bundle() {
    let cluster = TestCluster::start().await;
    let client = &cluster.client;
    let pem = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/flux-ssa/example-ca.pem"
    ))
    .unwrap();
    let valid = base64::engine::general_purpose::STANDARD.encode(pem.trim_end());
    const BUNDLE: &str = "/spec/conversion/webhook/clientConfig/caBundle";
    let applied_crd = |case: &str| {
        let id = unique(case);
        let mut objects = read_manifest("test11.yaml", &id);
        let crd = first(&objects, "CustomResourceDefinition", "webhooks.example.com");
        let group = format!("{id}.example.com");
        objects[crd]["metadata"]["name"] = json!(format!("webhooks.{group}"));
        objects[crd]["spec"]["group"] = json!(group);
        objects[crd]["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"] =
            json!(valid.clone());
        (objects, crd)
    };

    // diff removes invalid CA bundle from CRD
    let (objects, crd) = applied_crd("diff-ca-bundle-invalid");
    apply(client, &objects).await;
    let mut modified = objects[crd].clone();
    modified["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"] =
        json!("invalid-cert-data");
    let planned = diff(client, &modified).await;
    assert_eq!(planned.change.action, Action::Configured);
    let views = drift(&planned);
    assert!(
        views
            .applied
            .pointer(BUNDLE)
            .and_then(Value::as_str)
            .is_none_or(str::is_empty),
        "{}",
        views.applied
    );
    assert_eq!(views.live.pointer(BUNDLE), Some(&json!(valid)));

    // diff preserves valid CA bundle in CRD
    let (objects, crd) = applied_crd("diff-ca-bundle-valid");
    apply(client, &objects).await;
    let planned = diff(client, &objects[crd]).await;
    assert_eq!(planned.change.action, Action::Unchanged);
    assert!(planned.drift.is_none(), "no views for an unchanged CRD");

    // diff with label change preserves valid CA bundle
    let (objects, crd) = applied_crd("diff-ca-bundle-change");
    apply(client, &objects).await;
    let mut modified = objects[crd].clone();
    modified["metadata"]["labels"]["test-change"] = json!("true");
    let planned = diff(client, &modified).await;
    assert_eq!(planned.change.action, Action::Configured);
    let views = drift(&planned);
    assert_eq!(views.applied.pointer(BUNDLE), Some(&json!(valid)));
    assert_eq!(views.live.pointer(BUNDLE), Some(&json!(valid)));
}
