//! `ssa/manager_apply_test.go`: applying in stages and order, unchanged objects left alone,
//! immutable fields (refused, or recreated by force), policies (exclusions, IfNotPresent),
//! the takeover of kubectl's and other managers' fields, namespaces, conversion-webhook CA
//! bundles, custom stages and the migration of managed fields to a CRD's new version.

use base64::Engine as _;
use kube::api::{Patch, PatchParams, PostParams};
use kustomize_controller::apply::{ApplyError, ApplyOptions};
use kustomize_controller::objects::Action;
use serde_json::{Value, json};

use super::{action_of, apply, entries, first, forced, manager, prepared, read_manifest, subject};
use crate::support::cluster::{TestCluster, dynamic_api, unique, wait_for};

const OURS: &str = "kustomize-controller";
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";
const GC_MARK: &str = "fluxcd.io/sync-gc-mark";
const SSA: &str = "kustomize.toolkit.fluxcd.io/ssa";
const RECONCILE: &str = "kustomize.toolkit.fluxcd.io/reconcile";
const FORCE: &str = "kustomize.toolkit.fluxcd.io/force";

async fn live(client: &kube::Client, object: &Value) -> Value {
    let api = dynamic_api(client, object).await;
    let name = object["metadata"]["name"].as_str().unwrap();
    serde_json::to_value(api.get(name).await.unwrap()).unwrap()
}

/// The managers of the object's entries, the status subresource's aside (a real cluster's
/// controllers write those; ssa's envtest has none).
async fn managers(client: &kube::Client, object: &Value) -> Vec<String> {
    live(client, object).await["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["subresource"].as_str().is_none_or(str::is_empty))
        .map(|e| e["manager"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// ssa's `normalize.UnstructuredList` and `SetOwnerLabels`, for objects written by others:
/// besides what our apply does, quantities become the strings the Go types print (`cpu: 2`
/// is `"2"`), or another manager's apply of the same value would conflict with ours.
fn normalized(objects: &[Value]) -> Vec<Value> {
    objects
        .iter()
        .map(|object| {
            let mut object = prepared(object);
            let containers = object
                .pointer_mut("/spec/template/spec/containers")
                .and_then(Value::as_array_mut);
            for container in containers.into_iter().flatten() {
                for bound in ["limits", "requests"] {
                    let quantities = container["resources"][bound].as_object_mut();
                    for quantity in quantities.into_iter().flat_map(|q| q.values_mut()) {
                        if let Value::Number(number) = quantity {
                            *quantity = json!(number.to_string());
                        }
                    }
                }
            }
            object
        })
        .collect()
}

/// Another manager's server-side apply.
async fn apply_as(client: &kube::Client, manager: &str, object: &Value) {
    let api = dynamic_api(client, object).await;
    let name = object["metadata"]["name"].as_str().unwrap();
    api.patch(name, &PatchParams::apply(manager), &Patch::Apply(object))
        .await
        .unwrap_or_else(|e| panic!("{manager} applying {}: {e}", subject(object)));
}

/// Another manager's create (`kubectl apply` without `--server-side`).
async fn create_as(client: &kube::Client, manager: &str, object: &Value) {
    let api = dynamic_api(client, object).await;
    let params = PostParams {
        field_manager: Some(manager.into()),
        ..PostParams::default()
    };
    api.create(&params, &serde_json::from_value(object.clone()).unwrap())
        .await
        .unwrap_or_else(|e| panic!("{manager} creating {}: {e}", subject(object)));
}

/// Waits until the authorizer lets the account list what `api` lists: RBAC written moments
/// ago reaches kube-apiserver's authorizer through an informer, a little later.
async fn wait_until_allowed<K>(api: kube::Api<K>)
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let allowed = wait_for(std::time::Duration::from_secs(30), || async {
        api.list(&Default::default()).await.ok().map(|_| ())
    })
    .await;
    assert!(allowed.is_some(), "the account's RBAC never took effect");
}

fn all(set: &kustomize_controller::objects::ChangeSet, action: Action) -> bool {
    set.changes.iter().all(|c| c.action == action)
}

/// `TestApply`: a first apply creates everything in Flux's order, a second changes nothing,
/// and a changed ConfigMap is the one object configured.
#[tokio::test]
async fn flux_ssa_apply() {
    let cluster = TestCluster::start().await;
    let id = unique("apply");
    let mut objects = read_manifest("test1.yaml", &id);
    let config_map = first(&objects, "ConfigMap", &id);

    // creates objects in order
    let created = apply(&cluster.client, &objects).await;
    let order: Vec<String> = [
        "Namespace/{id}",
        "ClusterRole/{id}",
        "StorageClass/{id}",
        "ClusterRoleBinding/{id}",
        "ServiceAccount/{id}/{id}",
        "ConfigMap/{id}/{id}",
        "Secret/{id}/{id}",
        "Service/{id}/{id}",
    ]
    .iter()
    .map(|s| s.replace("{id}", &id))
    .collect();
    assert_eq!(
        entries(&created),
        order
            .iter()
            .map(|s| (s.clone(), Action::Created))
            .collect::<Vec<_>>()
    );

    // does not apply unchanged objects
    let again = apply(&cluster.client, &objects).await;
    assert!(all(&again, Action::Unchanged), "{again:?}");

    // applies only changed objects
    objects[config_map]["data"]["key"] = json!("val");
    let changed = apply(&cluster.client, &objects).await;
    for (entry, action) in entries(&changed) {
        let expected = if entry == subject(&objects[config_map]) {
            Action::Configured
        } else {
            Action::Unchanged
        };
        assert_eq!(action, expected, "{entry}");
    }
    assert_eq!(
        live(&cluster.client, &objects[config_map]).await["data"]["key"],
        "val"
    );
}

/// `TestApplyAllStaged_PartialFailure`: an account that may manage only what the manifest
/// holds creates a ClusterRole and its binding in one apply (the role's stage goes first), and
/// when the binding's immutable roleRef changes, the error comes with what the stages before
/// it applied.
#[tokio::test]
async fn flux_ssa_apply_all_staged_partial_failure() {
    let cluster = TestCluster::start().await;
    let id = unique("staged-fail");
    let mut objects = read_manifest("test12.yaml", &id);
    let account = format!("{id}-partial-failure");
    for object in [
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": account}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": account, "namespace": account}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": account},
            "rules": [
                {"apiGroups": ["", "rbac.authorization.k8s.io", "storage.k8s.io"],
                 "resources": ["namespaces", "clusterroles", "clusterrolebindings", "storageclasses"],
                 "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
                {"apiGroups": ["apps"], "resources": ["*"], "verbs": ["get", "list", "watch"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": account},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": account},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": account}]}),
    ] {
        cluster.apply(&object).await;
    }
    let restricted = cluster.client_as(&format!("system:serviceaccount:{account}:{account}"), &[]);
    wait_until_allowed(kube::Api::<k8s_openapi::api::core::v1::Namespace>::all(
        restricted.clone(),
    ))
    .await;
    let binding = first(&objects, "ClusterRoleBinding", &id);

    // creates objects in order (the StorageClass's namespace is not its own)
    let created = apply(&restricted, &objects).await;
    let order =
        |kinds: &[&str]| -> Vec<String> { kinds.iter().map(|k| format!("{k}/{id}")).collect() };
    assert_eq!(
        entries(&created),
        order(&[
            "Namespace",
            "ClusterRole",
            "StorageClass",
            "ClusterRoleBinding"
        ])
        .into_iter()
        .map(|s| (s, Action::Created))
        .collect::<Vec<_>>()
    );

    // returns change set on failed apply
    objects[binding]["roleRef"]["name"] = json!("test");
    let (applied, error) = manager(&restricted, ApplyOptions::default())
        .apply_all_partial(objects.clone())
        .await;
    assert!(error.is_some(), "the roleRef may not change");
    assert_eq!(
        entries(&applied),
        order(&["Namespace", "ClusterRole", "StorageClass"])
            .into_iter()
            .map(|s| (s, Action::Unchanged))
            .collect::<Vec<_>>()
    );
}

/// Removes the finalizers of `object` once it is being deleted (the Go test removes them
/// after three seconds; waiting for the deletion shows the same without a fixed sleep).
async fn release_once_deleting(client: kube::Client, object: Value) {
    let api = dynamic_api(&client, &object).await;
    let name = object["metadata"]["name"].as_str().unwrap().to_string();
    let deleting = wait_for(std::time::Duration::from_secs(30), || async {
        let live = api.get(&name).await.ok()?;
        live.metadata.deletion_timestamp.is_some().then_some(())
    })
    .await;
    assert!(deleting.is_some(), "{} was never deleted", subject(&object));
    api.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
}

/// `TestApply_Force`: an immutable Secret's change is refused in the server's words (no data
/// in them), recreated with force (also when a finalizer holds the old one for a while); an
/// immutable roleRef and StorageClass parameters are recreated (the latter by its force
/// annotation), and force does not hide a validation error.
#[tokio::test]
async fn flux_ssa_apply_force() {
    let cluster = TestCluster::start().await;
    let client = &cluster.client;
    let id = unique("apply");
    let mut objects = read_manifest("test1.yaml", &id);
    let secret = first(&objects, "Secret", &id);
    let binding = first(&objects, "ClusterRoleBinding", &id);
    let class = first(&objects, "StorageClass", &id);
    let service = first(&objects, "Service", &id);
    apply(client, &objects).await;
    let secret_subject = subject(&objects[secret]);
    let only_created = |set: &kustomize_controller::objects::ChangeSet, recreated: &str| {
        for (entry, action) in entries(set) {
            let expected = if entry == recreated {
                Action::Created
            } else {
                Action::Unchanged
            };
            assert_eq!(action, expected, "{entry}");
        }
    };

    // fails to apply immutable secret
    objects[secret]["stringData"]["key"] = json!("val-secret");
    let error = manager(client, ApplyOptions::default())
        .apply_all(objects.clone())
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "Secret/{id}/{id} dry-run failed (Invalid): Secret \"{id}\" is invalid: data: \
             Forbidden: field is immutable when `immutable` is set"
        )
    );

    // force applies immutable secret
    let recreated = manager(client, forced())
        .apply_all(objects.clone())
        .await
        .unwrap();
    only_created(&recreated, &secret_subject);
    assert_eq!(
        live(client, &objects[secret]).await["data"]["key"],
        base64::engine::general_purpose::STANDARD.encode("val-secret")
    );

    // force apply waits for finalizer
    let api = dynamic_api(client, &objects[secret]).await;
    api.patch(
        &id,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": ["fluxcd.io/demo-finalizer"]}})),
    )
    .await
    .unwrap();
    let release = tokio::spawn(release_once_deleting(
        client.clone(),
        objects[secret].clone(),
    ));
    objects[secret]["stringData"]["key"] = json!("val-secret2");
    let recreated = manager(client, forced())
        .apply_all(objects.clone())
        .await
        .unwrap();
    release.await.unwrap();
    only_created(&recreated, &secret_subject);

    // recreates immutable RBAC
    objects[binding]["roleRef"]["name"] = json!("test");
    let recreated = manager(client, forced())
        .apply_all(objects.clone())
        .await
        .unwrap();
    assert_eq!(
        action_of(&recreated, &subject(&objects[binding])),
        Action::Created
    );

    // recreates immutable StorageClass based on metadata: refused without the annotation
    // (the controller always honours it; ssa's test turns its selector on and off instead)
    objects[class]["parameters"]["encrypted"] = json!("true");
    let error = manager(client, ApplyOptions::default())
        .apply_all(objects.clone())
        .await
        .unwrap_err();
    assert!(matches!(error, ApplyError::Immutable { .. }), "{error}");
    objects[class]["metadata"]["annotations"] = json!({FORCE: "enabled"});
    let recreated = apply(client, &objects).await;
    assert_eq!(
        action_of(&recreated, &subject(&objects[class])),
        Action::Created
    );

    // force apply returns validation error
    objects[service]["spec"]["type"] = json!("ClusterIPSS");
    let error = manager(client, forced())
        .apply_all(objects.clone())
        .await
        .unwrap_err();
    assert!(error.to_string().contains("is invalid"), "{error}");
}

/// Applies a manifest of ssa's and applies it again: nothing changes the second time.
async fn applies_twice_unchanged(file: &str) {
    let cluster = TestCluster::start().await;
    let objects = read_manifest(file, &unique("fix"));
    apply(&cluster.client, &objects).await;
    let again = apply(&cluster.client, &objects).await;
    assert!(all(&again, Action::Unchanged), "{again:?}");
}

/// `TestApply_SetNativeKindsDefaults`: a Deployment and Service whose ports leave out their
/// protocol (part of the list key) and whose quantities are numbers apply, and applying them
/// again changes nothing.
#[tokio::test]
async fn flux_ssa_apply_set_native_kinds_defaults() {
    applies_twice_unchanged("test2.yaml").await;
}

/// `TestApply_NoOp`: empty data, a null creation time and a Secret's `stringData` do not
/// count as drift.
#[tokio::test]
async fn flux_ssa_apply_no_op() {
    applies_twice_unchanged("test3.yaml").await;
}

/// `TestApply_SkipsExcluded`: an object excluded by its annotation (the controller's
/// `reconcile: disabled`, for ssa's test selector) is reported skipped and not created.
#[tokio::test]
async fn flux_ssa_apply_skips_excluded() {
    let cluster = TestCluster::start().await;
    let id = unique("fix");
    cluster
        .apply(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": id}}))
        .await;
    let mut objects = read_manifest("test13.yaml", &id);
    objects[0]["metadata"]["annotations"] = json!({RECONCILE: "disabled"});
    let skipped = format!("Secret/{id}/data-{id}-excluded");
    let set = apply(&cluster.client, &objects).await;
    assert_eq!(entries(&set), vec![(skipped, Action::Skipped)]);
    let api = dynamic_api(&cluster.client, &objects[0]).await;
    assert!(
        api.get_opt(&format!("data-{id}-excluded"))
            .await
            .unwrap()
            .is_none()
    );
}

/// `TestApply_Exclusions`: a live object annotated `reconcile: disabled` keeps its edits;
/// once the annotation is gone the apply reverts them; a built object so annotated is
/// skipped. (ssa's test switches its exclusion selector off for the middle step; the
/// controller never does, so the port takes the annotation off instead, and the last step is
/// a skip where ssa, without the selector, finds nothing changed.)
#[tokio::test]
async fn flux_ssa_apply_exclusions() {
    let cluster = TestCluster::start().await;
    let client = &cluster.client;
    let id = unique("ignore");
    let objects = read_manifest("test1.yaml", &id);
    let config_map = first(&objects, "ConfigMap", &id);
    let config_map_subject = subject(&objects[config_map]);
    apply(client, &objects).await;

    // skips apply
    let api = dynamic_api(client, &objects[config_map]).await;
    api.patch(
        &id,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {RECONCILE: "disabled"}},
            "data": {"key": "val"}})),
    )
    .await
    .unwrap();
    let set = apply(client, &objects).await;
    assert!(
        !set.changes.iter().any(|c| c.action == Action::Configured),
        "{set:?}"
    );
    assert_eq!(action_of(&set, &config_map_subject), Action::Skipped);
    assert_eq!(
        live(client, &objects[config_map]).await["data"]["key"],
        "val"
    );

    // applies changes
    api.patch(
        &id,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {RECONCILE: null}}})),
    )
    .await
    .unwrap();
    let set = apply(client, &objects).await;
    assert_eq!(action_of(&set, &config_map_subject), Action::Configured);
    assert_eq!(
        live(client, &objects[config_map]).await["data"]["key"],
        "public-key"
    );

    // skips apply when desired state is annotated
    let mut annotated = objects[config_map].clone();
    annotated["metadata"]["annotations"] = json!({RECONCILE: "disabled"});
    annotated["data"]["key"] = json!("other");
    let set = apply(client, &[annotated]).await;
    assert_eq!(entries(&set), vec![(config_map_subject, Action::Skipped)]);
    assert_eq!(
        live(client, &objects[config_map]).await["data"]["key"],
        "public-key"
    );
}

/// `TestApply_IfNotPresent`: `ssa: IfNotPresent` creates an object and then leaves it alone;
/// another value of the annotation applies it again.
#[tokio::test]
async fn flux_ssa_apply_if_not_present() {
    let cluster = TestCluster::start().await;
    let id = unique("skip");
    let objects = read_manifest("test1.yaml", &id);
    let namespace = objects[first(&objects, "Namespace", &id)].clone();
    let mut config_map = objects[first(&objects, "ConfigMap", &id)].clone();
    config_map["metadata"]["annotations"] = json!({SSA: "IfNotPresent"});

    // creates objects
    let set = apply(&cluster.client, &[namespace, config_map.clone()]).await;
    assert!(all(&set, Action::Created), "{set:?}");

    // skips apply when annotated IfNotPresent
    let set = apply(&cluster.client, &[config_map.clone()]).await;
    assert_eq!(entries(&set), vec![(subject(&config_map), Action::Skipped)]);

    // resume apply when is annotated Override
    config_map["metadata"]["annotations"] = json!({SSA: "Override"});
    let set = apply(&cluster.client, &[config_map.clone()]).await;
    assert_eq!(
        entries(&set),
        vec![(subject(&config_map), Action::Configured)]
    );
}

/// `TestApply_IfNotPresent_ClusterScopedNamespaceInjection` (fluxcd/flux2#5871): a skipped
/// cluster-scoped object is reported under its own identity, without the namespace a
/// transformer stamped on the built one, so that the inventory does not see a new object.
#[tokio::test]
async fn flux_ssa_apply_if_not_present_cluster_scoped_namespace_injection() {
    let cluster = TestCluster::start().await;
    let id = unique("ifnotpresent-cluster-ns");
    let objects = read_manifest("test1.yaml", &id);
    let mut role = objects[first(&objects, "ClusterRole", &id)].clone();
    role["metadata"]["annotations"] = json!({SSA: "IfNotPresent"});

    // creates cluster-scoped object
    let set = apply(&cluster.client, &[role.clone()]).await;
    assert_eq!(set.changes[0].action, Action::Created);
    assert_eq!(set.changes[0].object.namespace, "");

    // skipped entry ignores injected namespace on desired (ssa's Apply and ApplyAll are one
    // call here)
    role["metadata"]["namespace"] = json!("injected-ns");
    let set = apply(&cluster.client, &[role]).await;
    assert_eq!(set.changes.len(), 1);
    assert_eq!(set.changes[0].action, Action::Skipped);
    assert_eq!(set.changes[0].object.namespace, "");
    assert_eq!(set.changes[0].object.name, id);
}

/// `TestApply_Cleanup_ExactMatch`, as the controller matches: its managers to take over
/// (`--override-manager` here) match by name prefix, as every ssa field manager the
/// controller configures does (none asks for an exact match). `flux` takes `flux` and
/// `flux-apply-prefix`; `flux-apply-prefix` leaves `flux`.
#[tokio::test]
async fn flux_ssa_apply_cleanup_exact_match() {
    let cluster = TestCluster::start().await;
    let client = &cluster.client;
    for (override_manager, left) in [
        ("flux", Vec::<&str>::new()),
        ("flux-apply-prefix", vec!["flux"]),
    ] {
        let id = unique("cleanup-exact");
        let objects = normalized(&read_manifest("test2.yaml", &id));
        let deployment = &objects[first(&objects, "Deployment", &id)];

        // creates objects as different managers
        for object in &objects {
            apply_as(client, "flux-apply-prefix", object).await;
        }
        apply_as(client, "flux", deployment).await;
        let before = managers(client, deployment).await;
        assert!(before.contains(&"flux".to_string()), "{before:?}");
        assert!(
            before.contains(&"flux-apply-prefix".to_string()),
            "{before:?}"
        );

        // cleanup removes what the name matches
        let options = ApplyOptions {
            override_managers: vec![override_manager.into()],
            ..ApplyOptions::default()
        };
        manager(client, options)
            .apply_all(objects.clone())
            .await
            .unwrap();
        let after = managers(client, deployment).await;
        let mut expected: Vec<String> = left.iter().map(|m| m.to_string()).collect();
        expected.push(OURS.into());
        let mut found = after.clone();
        found.sort();
        expected.sort();
        assert_eq!(found, expected, "--override-manager={override_manager}");
    }
}

/// `TestApply_Cleanup`: objects created by kubectl's client-side apply are taken over (its
/// manager, its last-applied annotation and Flux v1's garbage-collection label go), and so
/// are fields kubectl later applies server-side.
#[tokio::test]
async fn flux_ssa_apply_cleanup() {
    let cluster = TestCluster::start().await;
    let client = &cluster.client;
    let id = unique("cleanup");
    let objects = normalized(&read_manifest("test2.yaml", &id));
    let deployment = &objects[first(&objects, "Deployment", &id)];

    // creates objects as kubectl
    for object in &objects {
        let mut object = object.clone();
        object["metadata"]["annotations"] = json!({LAST_APPLIED: "test"});
        object["metadata"]["labels"][GC_MARK] = json!("test");
        create_as(client, "kubectl-client-side-apply", &object).await;
    }

    // removes kubectl client-side-apply manager and annotation
    let set = apply(client, &objects).await;
    assert!(all(&set, Action::Configured), "{set:?}");
    let taken = live(client, deployment).await;
    assert!(
        taken["metadata"]["annotations"][LAST_APPLIED].is_null(),
        "{taken}"
    );
    assert!(taken["metadata"]["labels"][GC_MARK].is_null(), "{taken}");
    for found in managers(client, deployment).await {
        assert!(
            ["before-first-apply", OURS].contains(&found.as_str()),
            "{found}"
        );
    }

    // replaces kubectl server-side-apply manager
    for object in &objects {
        apply_as(client, "kubectl", object).await;
    }
    let set = apply(client, &objects).await;
    assert!(all(&set, Action::Configured), "{set:?}");
    for object in &objects {
        assert_eq!(
            managers(client, object).await,
            vec![OURS.to_string()],
            "{}",
            subject(object)
        );
    }
}

/// `TestApply_CleanupRemovals`: a rule kubectl added to our Ingress with a client-side apply
/// stays until we apply again; then kubectl's fields are ours, and what neither we nor the
/// edit still declare (the TLS section) is removed.
#[tokio::test]
async fn flux_ssa_apply_cleanup_removals() {
    let cluster = TestCluster::start().await;
    let client = &cluster.client;
    let id = unique("cleanup-removal");
    let objects = read_manifest("test8.yaml", &id);
    let edited = read_manifest("test9.yaml", &id);
    let ingress = objects[first(&objects, "Ingress", &id)].clone();

    // creates objects using manager apply
    apply(client, &objects).await;
    assert_eq!(managers(client, &ingress).await, vec![OURS.to_string()]);

    // applies edited objects as kubectl
    for object in normalized(&edited) {
        let mut object = object;
        object["metadata"]["annotations"] = json!({LAST_APPLIED: "test"});
        object["metadata"]["labels"][GC_MARK] = json!("test");
        let api = dynamic_api(client, &object).await;
        let params = PatchParams {
            field_manager: Some("kubectl-client-side-apply".into()),
            ..PatchParams::default()
        };
        api.patch(&id, &params, &Patch::Merge(&object))
            .await
            .unwrap();
    }
    for found in managers(client, &ingress).await {
        assert!(
            ["kubectl-client-side-apply", OURS].contains(&found.as_str()),
            "{found}"
        );
    }
    let rules = live(client, &ingress).await["spec"]["rules"].clone();
    assert_eq!(rules.as_array().map(Vec::len), Some(2), "{rules}");

    // applies edited object using manager apply
    apply(client, &edited).await;
    assert_eq!(managers(client, &ingress).await, vec![OURS.to_string()]);
    let now = live(client, &ingress).await;
    assert!(now["spec"]["tls"].is_null(), "{}", now["spec"]);
}

/// `TestApply_Cleanup_Exclusions`: objects marked `ssa: Merge` (the controller's cleanup
/// exclusion) keep kubectl's manager.
#[tokio::test]
async fn flux_ssa_apply_cleanup_exclusions() {
    let cluster = TestCluster::start().await;
    let client = &cluster.client;
    let id = unique("cleanup");
    let mut objects = normalized(&read_manifest("test2.yaml", &id));
    let deployment = first(&objects, "Deployment", &id);

    // creates objects as kubectl
    for object in &objects {
        create_as(client, "kubectl-client-side-apply", object).await;
    }

    // does not remove kubectl manager
    for object in &mut objects {
        object["metadata"]["annotations"] = json!({SSA: "Merge"});
    }
    let set = apply(client, &objects).await;
    assert!(all(&set, Action::Configured), "{set:?}");
    let found = managers(client, &objects[deployment]).await;
    assert!(
        found.contains(&"kubectl-client-side-apply".to_string()),
        "{found:?}"
    );
}

/// `TestApply_MissingNamespaceErr`: a namespaced object without a namespace is refused,
/// saying so.
#[tokio::test]
async fn flux_ssa_apply_missing_namespace_err() {
    let cluster = TestCluster::start().await;
    let id = unique("err");
    let objects = read_manifest("test1.yaml", &id);
    let mut config_map = objects[first(&objects, "ConfigMap", &id)].clone();
    config_map["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("namespace");
    let error = manager(&cluster.client, ApplyOptions::default())
        .apply_all(vec![config_map])
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("namespace not specified"),
        "{error}"
    );
}

/// `TestResourceManager_ApplyAllStaged_CRDWebhookCABundle`: a conversion webhook's CA bundle
/// that is not base64 of a certificate (garbage, or the PEM text itself) is left out so that
/// the CRD applies; a valid one is kept.
#[tokio::test]
async fn flux_ssa_apply_all_staged_crd_webhook_ca_bundle() {
    let cluster = TestCluster::start().await;
    let pem = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/flux-ssa/example-ca.pem"
    ))
    .unwrap();
    let valid = base64::engine::general_purpose::STANDARD.encode(pem.trim_end());
    for (case, bundle, kept) in [
        (
            "remove-ca-bundle-invalid",
            "invalid-cert-data".to_string(),
            false,
        ),
        (
            "remove-ca-bundle-non-base64",
            pem.trim_end().to_string(),
            false,
        ),
        ("remove-ca-bundle-valid", valid.clone(), true),
    ] {
        let id = unique(case);
        let mut objects = read_manifest("test11.yaml", &id);
        let crd = first(&objects, "CustomResourceDefinition", "webhooks.example.com");
        let group = format!("{id}.example.com");
        objects[crd]["metadata"]["name"] = json!(format!("webhooks.{group}"));
        objects[crd]["spec"]["group"] = json!(group);
        objects[crd]["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"] = json!(bundle);
        let set = manager(&cluster.client, ApplyOptions::default())
            .apply_all(objects.clone())
            .await
            .unwrap_or_else(|e| panic!("{case}: {e}"));
        assert!(all(&set, Action::Created), "{case}: {set:?}");
        let live = live(&cluster.client, &objects[crd]).await;
        let found = &live["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"];
        if kept {
            assert_eq!(found, &json!(valid), "{case}");
        } else {
            assert!(found.as_str().is_none_or(str::is_empty), "{case}: {found}");
        }
    }
}

/// `TestApplyAllStaged_AppliesRoleAndRoleBinding`: for an account without the Role's
/// permissions, a RoleBinding's dry-run fails on the Role it names until the Role has a stage
/// of its own (`--custom-stage-kinds`); then both are created.
#[tokio::test]
async fn flux_ssa_apply_all_staged_applies_role_and_role_binding() {
    let cluster = TestCluster::start().await;
    let id = unique("custom-stage");
    for object in [
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": id}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": id, "namespace": id}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": id},
            "rules": [
                {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"],
                 "verbs": ["create", "update", "delete", "get", "list", "watch", "patch"]},
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": id},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": id},
            "subjects": [{"kind": "ServiceAccount", "name": id, "namespace": id}]}),
    ] {
        cluster.apply(&object).await;
    }
    let restricted = cluster.client_as(&format!("system:serviceaccount:{id}:{id}"), &[]);
    wait_until_allowed(kube::Api::<k8s_openapi::api::core::v1::ConfigMap>::all(
        restricted.clone(),
    ))
    .await;
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "role", "namespace": id},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]});
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "role-binding", "namespace": id},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "role"},
        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": id}]});
    let objects = vec![binding, role];

    // does not apply Role and RoleBinding together without custom stage
    let error = manager(&restricted, ApplyOptions::default())
        .apply_all(objects.clone())
        .await
        .unwrap_err();
    match &error {
        ApplyError::DryRunNotFound { subject, message } => {
            assert_eq!(subject, &format!("RoleBinding/{id}/role-binding"));
            assert!(message.contains("\"role\""), "{message}");
        }
        other => panic!("a dry-run NotFound for the Role, got {other:?}"),
    }

    // applies Role and RoleBinding together with Role in custom stage
    let options = ApplyOptions {
        custom_stage_kinds: vec!["rbac.authorization.k8s.io/Role".into()],
        ..ApplyOptions::default()
    };
    let set = manager(&restricted, options)
        .apply_all(objects)
        .await
        .unwrap();
    assert_eq!(set.changes.len(), 2);
    assert!(all(&set, Action::Created), "{set:?}");
}
