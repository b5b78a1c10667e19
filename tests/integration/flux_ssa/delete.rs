//! `ssa/manager_delete_test.go`: deleting a set of objects in the order given (the
//! controller's prune of what dropped out of its inventory), objects already gone counting
//! as deleted, and an object marked `prune: disabled` left alone.

use kube::api::{Patch, PatchParams};
use kustomize_controller::inventory::prune;
use kustomize_controller::objects::{Action, ObjectRef};
use serde_json::json;

use super::{apply, entries, first, owner, read_manifest, subject};
use crate::support::cluster::{TestCluster, dynamic_api, unique};

/// `TestDelete`: every object is deleted in the order given and is gone (the ConfigMap and
/// the ClusterRole are read back); deleting them again reports them deleted, being gone.
/// (The Go test then waits for termination, tolerating the namespace; the controller's wait,
/// its `WaitForTermination` deletion policy, is tested in `tests/integration/controller.rs`
/// and `flux/apply.rs`.)
#[tokio::test]
async fn flux_ssa_delete() {
    let cluster = TestCluster::start().await;
    let client = &cluster.client;
    let id = unique("delete");
    let objects = read_manifest("test1.yaml", &id);
    apply(client, &objects).await;
    let stale: Vec<ObjectRef> = objects.iter().map(ObjectRef::of).collect();
    let in_order: Vec<(String, Action)> = objects
        .iter()
        .map(|o| (subject(o), Action::Deleted))
        .collect();

    // deletes objects in order
    let outcome = prune(client, &stale, &owner()).await;
    assert!(outcome.errors.is_empty(), "{:?}", outcome.errors);
    assert_eq!(entries(&outcome.settled), in_order);
    for kind in ["ConfigMap", "ClusterRole"] {
        let object = &objects[first(&objects, kind, &id)];
        let api = dynamic_api(client, object).await;
        assert!(api.get_opt(&id).await.unwrap().is_none(), "{kind} is gone");
    }

    // deleting again: gone is deleted
    let outcome = prune(client, &stale, &owner()).await;
    assert!(outcome.errors.is_empty(), "{:?}", outcome.errors);
    assert_eq!(entries(&outcome.settled), in_order);
}

/// `TestDelete_Exclusions`: a live object marked `prune: disabled` (the controller's
/// exclusion, for ssa's test selector) is skipped and stays; the others are deleted.
#[tokio::test]
async fn flux_ssa_delete_exclusions() {
    let cluster = TestCluster::start().await;
    let client = &cluster.client;
    let id = unique("ignore");
    let objects = read_manifest("test1.yaml", &id);
    let config_map = &objects[first(&objects, "ConfigMap", &id)];

    // creates objects
    apply(client, &objects).await;

    // skips delete
    let api = dynamic_api(client, config_map).await;
    api.patch(
        &id,
        &PatchParams::default(),
        &Patch::Merge(
            json!({"metadata": {"annotations": {"kustomize.toolkit.fluxcd.io/prune": "disabled"}}}),
        ),
    )
    .await
    .unwrap();
    // The namespace stays: deleting it would take the ConfigMap with it on a cluster whose
    // namespace controller runs (ssa's envtest has none).
    let stale: Vec<ObjectRef> = objects
        .iter()
        .filter(|o| o["kind"] != "Namespace")
        .map(ObjectRef::of)
        .collect();
    let outcome = prune(client, &stale, &owner()).await;
    assert!(outcome.errors.is_empty(), "{:?}", outcome.errors);
    for (entry, action) in entries(&outcome.settled) {
        let expected = if entry == subject(config_map) {
            Action::Skipped
        } else {
            Action::Deleted
        };
        assert_eq!(action, expected, "{entry}");
    }
    assert!(
        api.get_opt(&id).await.unwrap().is_some(),
        "the ConfigMap stays"
    );
}
