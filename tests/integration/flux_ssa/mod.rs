//! fluxcd/pkg `ssa` v0.76.1's own tests of its resource manager (`manager_apply_test.go`,
//! `manager_delete_test.go`, `manager_wait_test.go`, `manager_diff_test.go`), ported: one
//! test per Go test, named after it, with its scenario, its manifests
//! (`tests/fixtures/flux-ssa/testdata/`) and its assertions. `tests/FLUX_PARITY.md` maps each
//! Go test to its port and says where a port differs.
//!
//! ssa's tests drive a `ResourceManager` with options chosen per test; Flux
//! kustomize-controller v1.9.4 always sets the same ones (the `kustomize.toolkit.fluxcd.io`
//! `reconcile: disabled`, `ssa: IgnoreIfNotPresent|Ignore|Merge` and `force: enabled`
//! selectors, the cleanup of kubectl's and Flux v1's managers and marks). The ports run
//! ssa's scenarios with the controller's options, which is what a Flux user gets.

mod apply;
mod delete;
mod diff;
mod diff_ignore;
mod migrate;
mod wait;

use kustomize_controller::apply::{AppliedCache, Applier, ApplyOptions, IgnoreRules};
use kustomize_controller::objects::{Action, ChangeSet, ObjectRef, Owner};
use serde_json::Value;

/// ssa's `readManifest`: a file of `testdata/` with `%[1]s` standing for the test's id.
fn read_manifest(file: &str, id: &str) -> Vec<Value> {
    let path = format!(
        "{}/tests/fixtures/flux-ssa/testdata/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    kustomize_controller::yaml::parse_documents(
        &text.replace("%[1]s", id),
        kustomize_controller::yaml::Schema::Kubernetes,
    )
    .unwrap_or_else(|e| panic!("{path}: {e}"))
    .into_iter()
    .map(Value::from)
    .filter(|object| !object.is_null())
    .collect()
}

/// ssa's `getFirstObject`: the index of the first object of `kind` named `name`.
fn first(objects: &[Value], kind: &str, name: &str) -> usize {
    objects
        .iter()
        .position(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind}/{name} in the manifest"))
}

/// ssa's `FmtUnstructured` (`Kind/namespace/name`, or `Kind/name`): how the change set
/// names an object.
fn subject(object: &Value) -> String {
    ObjectRef::of(object).to_string()
}

/// The owner ssa's tests stamp (`SetOwnerLabels(objects, "app1", "default")`).
fn owner() -> Owner {
    Owner {
        name: "app1".into(),
        namespace: "default".into(),
    }
}

/// An object as our apply sends it: normalized, the owner's labels stamped.
fn prepared(object: &Value) -> Value {
    let mut object = object.clone();
    kustomize_controller::apply::prepare(&mut object, &owner(), None);
    object
}

/// The test suite's resource manager: owner labels of `app1` in `default`, as ssa's tests
/// set them. Every call gets a new applied-object memory, as every call of ssa's manager
/// starts from the cluster alone (the controller keeps one per Kustomization, which only
/// saves requests; `tests/integration/apply.rs` covers it).
fn manager(client: &kube::Client, options: ApplyOptions) -> Applier {
    Applier::new(
        client.clone(),
        options,
        owner(),
        None,
        IgnoreRules::none(),
        AppliedCache::default(),
    )
}

/// ssa's `ApplyAllStaged` with its default options, which must succeed.
async fn apply(client: &kube::Client, objects: &[Value]) -> ChangeSet {
    manager(client, ApplyOptions::default())
        .apply_all(objects.to_vec())
        .await
        .unwrap_or_else(|e| panic!("applying: {e}"))
}

/// The manager with `spec.ignore` rules (ssa's `DriftIgnoreRules`).
fn manager_ignoring(
    client: &kube::Client,
    rules: &[kustomize_controller::api::IgnoreRule],
) -> Applier {
    Applier::new(
        client.clone(),
        ApplyOptions::default(),
        owner(),
        None,
        IgnoreRules::new(rules).expect("valid ignore rules"),
        AppliedCache::default(),
    )
}

fn forced() -> ApplyOptions {
    ApplyOptions {
        force: true,
        ..ApplyOptions::default()
    }
}

/// `(subject, action)` of every entry, in the order of the change set.
fn entries(set: &ChangeSet) -> Vec<(String, Action)> {
    set.changes
        .iter()
        .map(|c| (c.object.to_string(), c.action))
        .collect()
}

/// The action of the entry for `subject`.
fn action_of(set: &ChangeSet, subject: &str) -> Action {
    set.changes
        .iter()
        .find(|c| c.object.to_string() == subject)
        .unwrap_or_else(|| panic!("no entry for {subject} in {set:?}"))
        .action
}
