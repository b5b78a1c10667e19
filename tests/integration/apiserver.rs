//! API-server conformance: the behaviours the controller relies on, exercised through
//! `kube::Client`. The same tests run against the in-process test server, against envtest
//! (`KUBEBUILDER_ASSETS`) and against any cluster (`TEST_KUBECONFIG`); the few that need fault
//! injection or compaction skip on real servers.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::core::Status as ErrorResponse;
use serde_json::{Value, json};

use crate::support::apiserver::Fault;
use crate::support::cluster::{TestCluster, unique, wait_for};

fn api_error(error: kube::Error) -> ErrorResponse {
    match error {
        kube::Error::Api(response) => *response,
        other => panic!("expected an API error, got {other}"),
    }
}

fn config_map(name: &str, data: Value) -> ConfigMap {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data,
    }))
    .expect("a ConfigMap")
}

fn apply_params(manager: &str) -> PatchParams {
    PatchParams::apply(manager)
}

fn managers(object: &impl kube::Resource) -> Vec<(String, String)> {
    object
        .meta()
        .managed_fields
        .iter()
        .flatten()
        .map(|e| {
            (
                e.manager.clone().unwrap_or_default(),
                e.operation.clone().unwrap_or_default(),
            )
        })
        .collect()
}

fn fields_of(object: &impl kube::Resource, manager: &str) -> Value {
    object
        .meta()
        .managed_fields
        .iter()
        .flatten()
        .find(|e| e.manager.as_deref() == Some(manager))
        .and_then(|e| e.fields_v1.as_ref())
        .map(|f| f.0.clone())
        .unwrap_or(Value::Null)
}

#[tokio::test]
async fn discovery_lists_builtin_kinds_with_their_scope() {
    let cluster = TestCluster::start().await;
    // On a shared server another test may delete a CRD's group between discovery's list of
    // groups and its read of that group (a 404), as on a real cluster: try again.
    let mut attempts = 0;
    let discovery = loop {
        attempts += 1;
        match kube::Discovery::new(cluster.client.clone()).run().await {
            Ok(discovery) => break discovery,
            Err(error) if attempts >= 5 => panic!("discovery runs: {error:?}"),
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(200)).await,
        }
    };
    let find = |group: &str, kind: &str| {
        discovery
            .groups()
            .flat_map(|g| g.recommended_resources())
            .find(|(r, _)| r.group == group && r.kind == kind)
            .unwrap_or_else(|| panic!("{group}/{kind} is discovered"))
    };
    assert_eq!(
        find("", "Namespace").1.scope,
        kube::discovery::Scope::Cluster
    );
    assert_eq!(
        find("", "ConfigMap").1.scope,
        kube::discovery::Scope::Namespaced
    );
    assert_eq!(find("apps", "Deployment").0.plural, "deployments");
    assert_eq!(
        find("rbac.authorization.k8s.io", "ClusterRole").1.scope,
        kube::discovery::Scope::Cluster
    );
    let (kustomization, caps) = find("kustomize.toolkit.fluxcd.io", "Kustomization");
    assert_eq!(kustomization.version, "v1");
    assert!(caps.subresources.iter().any(|(r, _)| r.plural == "status"));
    find("source.toolkit.fluxcd.io", "GitRepository");
}

#[tokio::test]
async fn create_get_list_update_with_optimistic_concurrency() {
    let cluster = TestCluster::start().await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let mut first = config_map("first", json!({"a": "1"}));
    first.metadata.labels = Some([("app".to_string(), "web".to_string())].into());
    let created = api.create(&PostParams::default(), &first).await.unwrap();
    assert!(created.metadata.uid.is_some());
    assert!(created.metadata.creation_timestamp.is_some());
    api.create(&PostParams::default(), &config_map("second", json!({})))
        .await
        .unwrap();

    let again = api_error(
        api.create(&PostParams::default(), &first)
            .await
            .unwrap_err(),
    );
    assert_eq!((again.code, again.reason.as_str()), (409, "AlreadyExists"));

    let labelled = api
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap();
    assert_eq!(labelled.items.len(), 1);
    let by_name = api
        .list(&ListParams::default().fields("metadata.name=second"))
        .await
        .unwrap();
    assert_eq!(by_name.items[0].metadata.name.as_deref(), Some("second"));
    let paged = api.list(&ListParams::default().limit(1)).await.unwrap();
    assert_eq!(paged.items.len(), 1);
    assert!(
        paged
            .metadata
            .continue_
            .as_deref()
            .is_some_and(|c| !c.is_empty())
    );

    let mut update = created.clone();
    update.data = Some([("a".to_string(), "2".to_string())].into());
    let replaced = api
        .replace("first", &PostParams::default(), &update)
        .await
        .unwrap();
    assert_ne!(
        replaced.metadata.resource_version,
        created.metadata.resource_version
    );
    let stale = api_error(
        api.replace("first", &PostParams::default(), &update)
            .await
            .unwrap_err(),
    );
    assert_eq!((stale.code, stale.reason.as_str()), (409, "Conflict"));

    let missing = api_error(api.get("absent").await.unwrap_err());
    assert_eq!((missing.code, missing.reason.as_str()), (404, "NotFound"));
}

#[tokio::test]
async fn server_side_apply_conflicts_name_the_field_and_force_takes_over() {
    let cluster = TestCluster::start().await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let mine = config_map("shared", json!({"owner": "alpha", "common": "same"}));
    api.patch("shared", &apply_params("alpha"), &Patch::Apply(&mine))
        .await
        .unwrap();

    let theirs = config_map("shared", json!({"owner": "beta", "common": "same"}));
    let conflict = api_error(
        api.patch("shared", &apply_params("beta"), &Patch::Apply(&theirs))
            .await
            .unwrap_err(),
    );
    assert_eq!((conflict.code, conflict.reason.as_str()), (409, "Conflict"));
    assert!(
        conflict.message.contains("conflict with \"alpha\""),
        "{}",
        conflict.message
    );
    assert!(
        conflict.message.contains(".data.owner"),
        "{}",
        conflict.message
    );
    assert!(
        !conflict.message.contains(".data.common"),
        "equal values share ownership"
    );

    let forced = api
        .patch(
            "shared",
            &apply_params("beta").force(),
            &Patch::Apply(&theirs),
        )
        .await
        .unwrap();
    assert_eq!(forced.data.as_ref().unwrap()["owner"], "beta");
    assert!(
        fields_of(&forced, "beta")["f:data"]
            .get("f:owner")
            .is_some()
    );
    assert!(
        fields_of(&forced, "alpha")["f:data"]
            .get("f:owner")
            .is_none()
    );
    assert!(
        fields_of(&forced, "alpha")["f:data"]
            .get("f:common")
            .is_some(),
        "alpha still co-owns the field it set to the same value"
    );
}

#[tokio::test]
async fn apply_removes_fields_its_manager_stopped_sending_unless_shared() {
    let cluster = TestCluster::start().await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let full = config_map("trim", json!({"keep": "1", "drop": "2", "both": "3"}));
    api.patch("trim", &apply_params("owner"), &Patch::Apply(&full))
        .await
        .unwrap();
    let other = config_map("trim", json!({"both": "3"}));
    api.patch("trim", &apply_params("other"), &Patch::Apply(&other))
        .await
        .unwrap();
    let fewer = config_map("trim", json!({"keep": "1"}));
    let applied = api
        .patch("trim", &apply_params("owner"), &Patch::Apply(&fewer))
        .await
        .unwrap();
    let data = applied.data.unwrap();
    assert_eq!(data.get("keep").map(String::as_str), Some("1"));
    assert!(
        !data.contains_key("drop"),
        "the field only owner set is removed"
    );
    assert_eq!(
        data.get("both").map(String::as_str),
        Some("3"),
        "a co-owned field stays"
    );

    // Applying the same configuration again writes nothing.
    let again = api
        .patch("trim", &apply_params("owner"), &Patch::Apply(&fewer))
        .await
        .unwrap();
    assert_eq!(
        again.metadata.resource_version,
        applied.metadata.resource_version
    );
}

#[tokio::test]
async fn managed_fields_record_updates_and_applies_per_manager() {
    let cluster = TestCluster::start().await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let params = PostParams {
        field_manager: Some("kubectl-create".into()),
        ..PostParams::default()
    };
    api.create(&params, &config_map("owned", json!({"a": "1"})))
        .await
        .unwrap();
    let applied = api
        .patch(
            "owned",
            &apply_params("kustomize-controller"),
            &Patch::Apply(&config_map("owned", json!({"b": "2"}))),
        )
        .await
        .unwrap();
    let entries = managers(&applied);
    assert!(
        entries.contains(&("kubectl-create".into(), "Update".into())),
        "{entries:?}"
    );
    assert!(
        entries.contains(&("kustomize-controller".into(), "Apply".into())),
        "{entries:?}"
    );
    assert!(
        fields_of(&applied, "kubectl-create")["f:data"]
            .get("f:a")
            .is_some()
    );
    assert!(
        fields_of(&applied, "kustomize-controller")["f:data"]
            .get("f:b")
            .is_some()
    );

    let merge = PatchParams {
        field_manager: Some("editor".into()),
        ..PatchParams::default()
    };
    let patched = api
        .patch(
            "owned",
            &merge,
            &Patch::Merge(json!({"data": {"a": "changed"}})),
        )
        .await
        .unwrap();
    assert!(fields_of(&patched, "editor")["f:data"].get("f:a").is_some());
    assert!(
        fields_of(&patched, "kubectl-create")["f:data"]
            .get("f:a")
            .is_none(),
        "an update takes the fields it changed"
    );
}

#[tokio::test]
async fn dry_run_leaves_the_cluster_unchanged() {
    let cluster = TestCluster::start().await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let dry_create = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let preview = api
        .create(&dry_create, &config_map("dry", json!({"a": "1"})))
        .await
        .unwrap();
    assert_eq!(preview.data.unwrap()["a"], "1");
    assert_eq!(api_error(api.get("dry").await.unwrap_err()).code, 404);

    let live = api
        .patch(
            "dry",
            &apply_params("m"),
            &Patch::Apply(&config_map("dry", json!({"a": "1"}))),
        )
        .await
        .unwrap();
    let preview = api
        .patch(
            "dry",
            &apply_params("m").dry_run(),
            &Patch::Apply(&config_map("dry", json!({"a": "2"}))),
        )
        .await
        .unwrap();
    assert_eq!(preview.data.unwrap()["a"], "2");
    let after = api.get("dry").await.unwrap();
    assert_eq!(after.data.unwrap()["a"], "1");
    assert_eq!(
        after.metadata.resource_version,
        live.metadata.resource_version
    );

    let dry_delete = DeleteParams {
        dry_run: true,
        ..DeleteParams::default()
    };
    api.delete("dry", &dry_delete).await.unwrap();
    assert!(api.get("dry").await.is_ok());
}

#[tokio::test]
async fn generation_follows_spec_changes_and_status_is_a_subresource() {
    let cluster = TestCluster::start().await;
    let api: Api<Deployment> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let deployment = |image: &str, label: &str| -> Deployment {
        serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"note": label}},
            "spec": {
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "web", "image": image}]},
                },
            },
        }))
        .unwrap()
    };
    let params = apply_params("kustomize-controller");
    let first = api
        .patch("web", &params, &Patch::Apply(&deployment("nginx:1", "a")))
        .await
        .unwrap();
    assert_eq!(first.metadata.generation, Some(1));
    let relabelled = api
        .patch("web", &params, &Patch::Apply(&deployment("nginx:1", "b")))
        .await
        .unwrap();
    assert_eq!(
        relabelled.metadata.generation,
        Some(1),
        "metadata changes keep the generation"
    );
    let updated = api
        .patch("web", &params, &Patch::Apply(&deployment("nginx:2", "b")))
        .await
        .unwrap();
    assert_eq!(updated.metadata.generation, Some(2));

    let status = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "status": {"observedGeneration": 2, "replicas": 1, "readyReplicas": 1}});
    let with_status = api
        .patch_status(
            "web",
            &apply_params("status-writer").force(),
            &Patch::Apply(&status),
        )
        .await
        .unwrap();
    assert_eq!(with_status.status.unwrap().ready_replicas, Some(1));
    assert_eq!(with_status.metadata.generation, Some(2));
    let entry = with_status
        .metadata
        .managed_fields
        .unwrap()
        .into_iter()
        .find(|e| e.manager.as_deref() == Some("status-writer"))
        .unwrap();
    assert_eq!(entry.subresource.as_deref(), Some("status"));

    // Status sent to the main resource is ignored.
    let mut sneaky = deployment("nginx:2", "b");
    sneaky.status = serde_json::from_value(json!({"readyReplicas": 7})).unwrap();
    let ignored = api
        .patch("web", &params, &Patch::Apply(&sneaky))
        .await
        .unwrap();
    // Not "equals the status written above": on a real cluster the deployment controller
    // may have written its own status (no Pods run there) in between.
    assert_ne!(
        ignored.status.and_then(|s| s.ready_replicas),
        Some(7),
        "status sent to the main resource is ignored"
    );
}

#[tokio::test]
async fn immutable_fields_are_rejected_as_invalid() {
    let cluster = TestCluster::start().await;
    let ns = &cluster.namespace;
    let params = apply_params("kustomize-controller");

    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), ns);
    let mut frozen = config_map("frozen", json!({"a": "1"}));
    frozen.immutable = Some(true);
    config_maps
        .patch("frozen", &params, &Patch::Apply(&frozen))
        .await
        .unwrap();
    frozen.data = Some([("a".to_string(), "2".to_string())].into());
    let error = api_error(
        config_maps
            .patch("frozen", &params, &Patch::Apply(&frozen))
            .await
            .unwrap_err(),
    );
    assert_eq!((error.code, error.reason.as_str()), (422, "Invalid"));
    assert!(
        error.message.contains("field is immutable"),
        "{}",
        error.message
    );

    let deployments: Api<Deployment> = Api::namespaced(cluster.client.clone(), ns);
    let deployment = |app: &str| -> Deployment {
        serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {
                "selector": {"matchLabels": {"app": app}},
                "template": {"metadata": {"labels": {"app": app}},
                    "spec": {"containers": [{"name": "web", "image": "nginx"}]}},
            },
        }))
        .unwrap()
    };
    deployments
        .patch("web", &params, &Patch::Apply(&deployment("a")))
        .await
        .unwrap();
    let error = api_error(
        deployments
            .patch("web", &params, &Patch::Apply(&deployment("b")))
            .await
            .unwrap_err(),
    );
    assert_eq!(error.code, 422);
    assert!(error.message.contains("spec.selector"), "{}", error.message);
    assert!(
        error.message.contains("field is immutable"),
        "{}",
        error.message
    );

    let jobs: Api<Job> = Api::namespaced(cluster.client.clone(), ns);
    let job = |image: &str| -> Job {
        serde_json::from_value(json!({
            "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "once"},
            "spec": {"template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "run", "image": image}]}}},
        }))
        .unwrap()
    };
    jobs.patch("once", &params, &Patch::Apply(&job("busybox:1")))
        .await
        .unwrap();
    let error = api_error(
        jobs.patch("once", &params, &Patch::Apply(&job("busybox:2")))
            .await
            .unwrap_err(),
    );
    assert_eq!(error.code, 422);
    assert!(error.message.contains("spec.template"), "{}", error.message);
    assert!(
        error.message.contains("field is immutable"),
        "{}",
        error.message
    );

    let services: Api<Service> = Api::namespaced(cluster.client.clone(), ns);
    let service = |cluster_ip: Option<&str>| -> Service {
        let mut spec = json!({"ports": [{"port": 80}], "selector": {"app": "web"}});
        if let Some(ip) = cluster_ip {
            spec["clusterIP"] = json!(ip);
        }
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web"}, "spec": spec}))
        .unwrap()
    };
    let created = services
        .patch("web", &params, &Patch::Apply(&service(None)))
        .await
        .unwrap();
    let allocated = created
        .spec
        .unwrap()
        .cluster_ip
        .expect("a cluster IP is allocated");
    let other = if allocated.ends_with(".250") {
        "10.0.0.249"
    } else {
        "10.0.0.250"
    };
    let error = api_error(
        services
            .patch("web", &params, &Patch::Apply(&service(Some(other))))
            .await
            .unwrap_err(),
    );
    assert_eq!(error.code, 422, "{}", error.message);
    assert!(
        error.message.contains("spec.clusterIP"),
        "{}",
        error.message
    );
}

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let cluster = TestCluster::start().await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let mut held = config_map("held", json!({}));
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    api.create(&PostParams::default(), &held).await.unwrap();
    let pending = api
        .delete("held", &DeleteParams::background())
        .await
        .unwrap();
    let pending = pending
        .left()
        .expect("the object stays while finalizers remain");
    assert!(pending.metadata.deletion_timestamp.is_some());
    assert!(
        api.get("held")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );

    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    let gone = wait_for(Duration::from_secs(30), || async {
        api.get_opt("held").await.unwrap().is_none().then_some(())
    })
    .await;
    assert!(
        gone.is_some(),
        "the object goes once its finalizers are removed"
    );

    api.create(&PostParams::default(), &config_map("plain", json!({})))
        .await
        .unwrap();
    let deleted = api.delete("plain", &DeleteParams::default()).await.unwrap();
    assert!(
        deleted.is_right(),
        "an object without finalizers is deleted at once"
    );
}

#[tokio::test]
async fn namespaces_terminate_after_their_contents() {
    let cluster = TestCluster::start().await;
    if !cluster.has_controller_manager() {
        eprintln!(
            "skipped: needs kube-controller-manager's namespace controller, which envtest does not run"
        );
        return;
    }
    let namespace = cluster.create_namespace("kc-terminating").await;
    let namespaces: Api<Namespace> = Api::all(cluster.client.clone());
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &namespace);
    let mut held = config_map("held", json!({}));
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    api.create(&PostParams::default(), &held).await.unwrap();

    namespaces
        .delete(&namespace, &DeleteParams::background())
        .await
        .unwrap();
    let terminating = wait_for(Duration::from_secs(30), || async {
        let ns = namespaces.get(&namespace).await.ok()?;
        let phase = ns.status?.phase?;
        let content = api.get("held").await.ok()?;
        (phase == "Terminating" && content.metadata.deletion_timestamp.is_some()).then_some(())
    })
    .await;
    assert!(
        terminating.is_some(),
        "the namespace terminates and deletes its contents"
    );

    let refused = api_error(
        api.create(&PostParams::default(), &config_map("late", json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!(refused.code, 403, "{}", refused.message);
    assert!(
        refused.message.contains("being terminated"),
        "{}",
        refused.message
    );

    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    let gone = wait_for(Duration::from_secs(60), || async {
        namespaces
            .get_opt(&namespace)
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    assert!(gone.is_some(), "the namespace goes once it is empty");
}

#[tokio::test]
async fn watch_resumes_from_a_resource_version() {
    let cluster = TestCluster::start().await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let first = api
        .create(&PostParams::default(), &config_map("w1", json!({})))
        .await
        .unwrap();
    let since = first.metadata.resource_version.unwrap();
    api.create(&PostParams::default(), &config_map("w2", json!({})))
        .await
        .unwrap();
    api.patch(
        "w1",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"x": "1"}})),
    )
    .await
    .unwrap();
    api.delete("w2", &DeleteParams::default()).await.unwrap();

    // A watcher that restarts from `since` sees what happened while it was away (to the
    // test's own objects: the control plane may publish `kube-root-ca.crt` meanwhile).
    let params = WatchParams::default().timeout(5);
    let stream = api.watch(&params, &since).await.unwrap();
    let events: Vec<(String, String)> = stream
        .try_filter(|event| {
            let name = match event {
                WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => {
                    o.metadata.name.as_deref()
                }
                _ => None,
            };
            std::future::ready(name != Some("kube-root-ca.crt"))
        })
        .take(3)
        .map_ok(|event| match event {
            WatchEvent::Added(o) => ("ADDED".to_string(), o.metadata.name.unwrap()),
            WatchEvent::Modified(o) => ("MODIFIED".to_string(), o.metadata.name.unwrap()),
            WatchEvent::Deleted(o) => ("DELETED".to_string(), o.metadata.name.unwrap()),
            other => (format!("{other:?}"), String::new()),
        })
        .try_collect()
        .await
        .unwrap();
    assert_eq!(
        events,
        vec![
            ("ADDED".to_string(), "w2".to_string()),
            ("MODIFIED".to_string(), "w1".to_string()),
            ("DELETED".to_string(), "w2".to_string()),
        ]
    );

    // Live events arrive on an open stream.
    let latest = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = api.watch(&params, &latest).await.unwrap().boxed();
    api.create(&PostParams::default(), &config_map("w3", json!({})))
        .await
        .unwrap();
    match stream.next().await {
        Some(Ok(WatchEvent::Added(o))) => assert_eq!(o.metadata.name.as_deref(), Some("w3")),
        other => panic!("expected ADDED w3, got {other:?}"),
    }
}

#[tokio::test]
async fn watch_from_a_compacted_version_is_gone() {
    let cluster = TestCluster::start().await;
    let Some(server) = cluster.server() else {
        eprintln!("skipped: compaction can only be forced on the in-process server");
        return;
    };
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let created = api
        .create(&PostParams::default(), &config_map("old", json!({})))
        .await
        .unwrap();
    api.create(&PostParams::default(), &config_map("newer", json!({})))
        .await
        .unwrap();
    server.compact();
    let since = created.metadata.resource_version.unwrap();
    let mut stream = api
        .watch(&WatchParams::default(), &since)
        .await
        .unwrap()
        .boxed();
    match stream.next().await {
        Some(Ok(WatchEvent::Error(status))) => {
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
        }
        other => panic!("expected a 410 error event, got {other:?}"),
    }

    // And a dropped stream ends, so clients re-watch.
    let latest = api
        .get("newer")
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = api
        .watch(&WatchParams::default(), &latest)
        .await
        .unwrap()
        .boxed();
    server.drop_watches();
    let ended = tokio::time::timeout(Duration::from_secs(5), stream.next()).await;
    assert!(
        matches!(ended, Ok(None)),
        "the stream ends when dropped: {ended:?}"
    );
}

fn widget_crd(group: &str) -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("widgets.{group}")},
        "spec": {
            "group": group, "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "size": {"type": "integer"},
                        "items": {"type": "array", "x-kubernetes-list-type": "map",
                            "x-kubernetes-list-map-keys": ["name"],
                            "items": {"type": "object", "required": ["name"], "properties": {
                                "name": {"type": "string"}, "value": {"type": "string"}}}},
                    }},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                }}},
            }],
        },
    }))
    .unwrap()
}

#[tokio::test]
async fn custom_resource_definitions_register_and_remove_their_kinds() {
    let cluster = TestCluster::start().await;
    let group = format!("{}.example.com", unique("g"));
    let crds: Api<CustomResourceDefinition> = Api::all(cluster.client.clone());
    let name = format!("widgets.{group}");
    crds.create(&PostParams::default(), &widget_crd(&group))
        .await
        .unwrap();
    let established = wait_for(Duration::from_secs(30), || async {
        let crd = crds.get(&name).await.ok()?;
        let conditions = crd.status?.conditions?;
        let ok = |t: &str| {
            conditions
                .iter()
                .any(|c| c.type_ == t && c.status == "True")
        };
        (ok("Established") && ok("NamesAccepted")).then_some(())
    })
    .await;
    assert!(established.is_some(), "the CRD is established");

    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(&group, "v1", "Widget"),
        "widgets",
    );
    let widgets: Api<DynamicObject> =
        Api::namespaced_with(cluster.client.clone(), &cluster.namespace, &resource);
    // Server-side apply types the whole configuration first: a field the schema does not
    // declare refuses the apply (kube-apiserver v1.28's own message), it is not pruned.
    let typo: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{group}/v1"), "kind": "Widget", "metadata": {"name": "w"},
        "spec": {"size": 3, "unknown": "refused"},
    }))
    .unwrap();
    let refusal = wait_for(Duration::from_secs(30), || async {
        match widgets
            .patch("w", &apply_params("alpha"), &Patch::Apply(&typo))
            .await
        {
            Err(kube::Error::Api(e)) if e.code != 404 => Some(*e),
            _ => None,
        }
    })
    .await
    .expect("the new kind is served and refuses the undeclared field");
    assert_eq!(refusal.code, 500);
    assert_eq!(
        refusal.message,
        format!(
            "failed to create typed patch object (/w; {group}/v1, Kind=Widget): \
             .spec.unknown: field not declared in schema"
        )
    );
    let widget: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{group}/v1"), "kind": "Widget", "metadata": {"name": "w"},
        "spec": {"size": 3, "items": [{"name": "a", "value": "1"}]},
    }))
    .unwrap();
    let created = widgets
        .patch("w", &apply_params("alpha"), &Patch::Apply(&widget))
        .await
        .unwrap();
    assert_eq!(created.data["spec"]["size"], 3);
    assert_eq!(created.metadata.generation, Some(1));

    // Items of a map list are owned per key.
    let second: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{group}/v1"), "kind": "Widget", "metadata": {"name": "w"},
        "spec": {"items": [{"name": "b", "value": "2"}]},
    }))
    .unwrap();
    let merged = widgets
        .patch("w", &apply_params("beta"), &Patch::Apply(&second))
        .await
        .unwrap();
    assert_eq!(merged.data["spec"]["items"].as_array().unwrap().len(), 2);

    let wrong: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{group}/v1"), "kind": "Widget", "metadata": {"name": "bad"},
        "spec": {"size": "three"},
    }))
    .unwrap();
    // A value of the wrong type fails the typed conversion too (500, no reason), naming the
    // field as structured-merge-diff does.
    let error = api_error(
        widgets
            .patch("bad", &apply_params("alpha"), &Patch::Apply(&wrong))
            .await
            .unwrap_err(),
    );
    assert_eq!((error.code, error.reason.as_str()), (500, ""));
    assert_eq!(
        error.message,
        format!(
            "failed to create typed patch object (/bad; {group}/v1, Kind=Widget): \
             .spec.size: expected numeric (int or float), got string"
        )
    );
    // A null where the schema allows none passes the conversion and fails validation; a
    // create drops it while decoding instead.
    let null: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{group}/v1"), "kind": "Widget", "metadata": {"name": "null"},
        "spec": {"size": null},
    }))
    .unwrap();
    let error = api_error(
        widgets
            .patch("null", &apply_params("alpha"), &Patch::Apply(&null))
            .await
            .unwrap_err(),
    );
    assert_eq!((error.code, error.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        error.message,
        format!(
            "Widget.{group} \"null\" is invalid: spec.size: Invalid value: \"null\": \
             spec.size in body must be of type integer: \"null\""
        )
    );
    let created = widgets.create(&PostParams::default(), &null).await.unwrap();
    assert_eq!(created.data["spec"], json!({}));

    crds.delete(&name, &DeleteParams::default()).await.unwrap();
    let removed = wait_for(Duration::from_secs(60), || async {
        crds.get_opt(&name).await.unwrap().is_none().then_some(())
    })
    .await;
    assert!(removed.is_some(), "the CRD goes after its instances");
    let unknown = wait_for(Duration::from_secs(30), || async {
        match widgets.list(&ListParams::default()).await {
            Err(kube::Error::Api(e)) if e.code == 404 => Some(()),
            _ => None,
        }
    })
    .await;
    assert!(unknown.is_some(), "the kind is no longer served");
}

#[tokio::test]
async fn impersonated_identities_are_limited_by_rbac() {
    let cluster = TestCluster::start().await;
    let ns = &cluster.namespace;
    let user = format!("system:serviceaccount:{ns}:deployer");
    let admin: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), ns);
    admin
        .create(&PostParams::default(), &config_map("visible", json!({})))
        .await
        .unwrap();

    let as_deployer: Api<ConfigMap> = Api::namespaced(cluster.client_as(&user, &[]), ns);
    let denied = api_error(as_deployer.get("visible").await.unwrap_err());
    assert_eq!((denied.code, denied.reason.as_str()), (403, "Forbidden"));
    assert!(denied.message.contains(&user), "{}", denied.message);

    // kube-apiserver's authorizer reads RBAC from an informer: a grant takes effect a moment
    // after it is written (in process: `set_rbac_lag`, long here so that it shows).
    if let Some(server) = cluster.server() {
        server.set_rbac_lag(Duration::from_secs(5));
    }
    cluster
        .grant(
            ns,
            &user,
            json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]),
        )
        .await;
    if let Some(server) = cluster.server() {
        let early = api_error(as_deployer.get("visible").await.unwrap_err());
        assert_eq!(early.code, 403, "the authorizer has not seen the grant yet");
        server.set_rbac_lag(Duration::ZERO);
    }
    let allowed = wait_for(Duration::from_secs(30), || async {
        as_deployer.get("visible").await.ok()
    })
    .await;
    assert!(allowed.is_some(), "the granted verb is allowed");
    let write = api_error(
        as_deployer
            .create(&PostParams::default(), &config_map("written", json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        write.code, 403,
        "verbs that were not granted stay forbidden"
    );
}

#[tokio::test]
async fn patches_merge_by_kind() {
    let cluster = TestCluster::start().await;
    let api: Api<Deployment> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let deployment: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
                {"name": "web", "image": "nginx:1"}, {"name": "sidecar", "image": "envoy:1"}]}}},
    }))
    .unwrap();
    api.create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    let strategic = json!({"spec": {"template": {"spec": {"containers": [{"name": "sidecar", "image": "envoy:2"}]}}}});
    let patched = api
        .patch("web", &PatchParams::default(), &Patch::Strategic(strategic))
        .await
        .unwrap();
    let containers = patched.spec.unwrap().template.spec.unwrap().containers;
    assert_eq!(
        containers.len(),
        2,
        "strategic merge keys containers by name"
    );
    assert_eq!(
        containers
            .iter()
            .find(|c| c.name == "sidecar")
            .unwrap()
            .image
            .as_deref(),
        Some("envoy:2")
    );

    // kube's typed JSON patch uses another json-patch major version; send it as the wire form.
    let request = http::Request::patch(format!(
        "/apis/apps/v1/namespaces/{}/deployments/web",
        cluster.namespace
    ))
    .header("content-type", "application/json-patch+json")
    .body(
        serde_json::to_vec(&json!([{"op": "replace", "path": "/spec/replicas", "value": 3}]))
            .unwrap(),
    )
    .unwrap();
    let patched: Deployment = cluster.client.request(request).await.unwrap();
    assert_eq!(patched.spec.unwrap().replicas, Some(3));
}

#[tokio::test]
async fn deletion_propagates_to_dependents() {
    let cluster = TestCluster::start().await;
    if !cluster.has_controller_manager() {
        eprintln!(
            "skipped: needs kube-controller-manager's garbage collector, which envtest does not run"
        );
        return;
    }
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    for (owner, policy) in [
        ("owner-bg", DeleteParams::background()),
        ("owner-orphan", DeleteParams::orphan()),
    ] {
        let created = api
            .create(&PostParams::default(), &config_map(owner, json!({})))
            .await
            .unwrap();
        let mut dependent = config_map(&format!("{owner}-child"), json!({}));
        dependent.metadata.owner_references = Some(vec![
            serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "ConfigMap", "name": owner,
                "uid": created.metadata.uid.clone().unwrap(),
            }))
            .unwrap(),
        ]);
        api.create(&PostParams::default(), &dependent)
            .await
            .unwrap();
        api.delete(owner, &policy).await.unwrap();
    }
    let collected = wait_for(Duration::from_secs(60), || async {
        api.get_opt("owner-bg-child")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    assert!(
        collected.is_some(),
        "background deletion collects dependents"
    );
    let released = wait_for(Duration::from_secs(60), || async {
        let owner_gone = api.get_opt("owner-orphan").await.unwrap().is_none();
        let child = api.get_opt("owner-orphan-child").await.unwrap()?;
        (owner_gone
            && child
                .metadata
                .owner_references
                .unwrap_or_default()
                .is_empty())
        .then_some(())
    })
    .await;
    assert!(
        released.is_some(),
        "orphaning keeps dependents and drops their owner reference"
    );
}

#[tokio::test]
async fn unknown_kinds_are_not_found() {
    let cluster = TestCluster::start().await;
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("nothing.example.com", "v1", "Nothing"),
        "nothings",
    );
    let api: Api<DynamicObject> =
        Api::namespaced_with(cluster.client.clone(), &cluster.namespace, &resource);
    let error = api_error(api.list(&ListParams::default()).await.unwrap_err());
    assert_eq!(error.code, 404);
}

#[tokio::test]
async fn injected_faults_fail_matching_requests() {
    let cluster = TestCluster::start().await;
    let Some(server) = cluster.server() else {
        eprintln!("skipped: fault injection needs the in-process server");
        return;
    };
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    api.create(&PostParams::default(), &config_map("flaky", json!({})))
        .await
        .unwrap();
    server.inject(Fault {
        dry_run: None,
        verb: Some("get".into()),
        resource: Some("configmaps".into()),
        remaining: 2,
        code: 500,
        retry_after: None,
    });
    server.inject(Fault {
        dry_run: None,
        verb: Some("list".into()),
        resource: None,
        remaining: 1,
        code: 429,
        retry_after: Some(1),
    });
    assert_eq!(api_error(api.get("flaky").await.unwrap_err()).code, 500);
    assert_eq!(api_error(api.get("flaky").await.unwrap_err()).code, 500);
    assert!(api.get("flaky").await.is_ok(), "the fault is used up");
    // kube's client retries 429 by itself, as it would against a real server.
    assert!(api.list(&ListParams::default()).await.is_ok());
    assert_eq!(
        server.pending_faults(),
        0,
        "the throttled request was answered with 429"
    );

    server.set_latency(Duration::from_millis(50));
    let started = std::time::Instant::now();
    api.get("flaky").await.unwrap();
    server.set_latency(Duration::ZERO);
    assert!(started.elapsed() >= Duration::from_millis(50));
}

#[tokio::test]
async fn sources_carry_artifacts_served_over_http() {
    use crate::support::artifacts::{ArtifactServer, SourceKind};
    let cluster = TestCluster::start().await;
    let artifacts = ArtifactServer::start().await;
    let dir = crate::support::repo_root().join("examples/podinfo");
    let artifact = artifacts.publish_dir(
        "gitrepository/podinfo/latest.tar.gz",
        "main@sha1:0123abcd",
        &dir,
    );
    for kind in [
        SourceKind::GitRepository,
        SourceKind::OciRepository,
        SourceKind::Bucket,
        SourceKind::ExternalArtifact,
    ] {
        let source = cluster
            .create_source(kind, &cluster.namespace, "podinfo", Some(&artifact))
            .await;
        assert_eq!(
            source["status"]["artifact"]["digest"],
            json!(artifact.digest),
            "{kind:?}"
        );
        assert_eq!(source["status"]["conditions"][0]["type"], "Ready");
    }
    let bytes = http_get(&artifact.url).await;
    assert_eq!(
        artifacts.requests(),
        vec!["/gitrepository/podinfo/latest.tar.gz".to_string()]
    );
    assert_eq!(
        crate::support::artifacts::sha256_digest(&bytes),
        artifact.digest
    );
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(bytes.as_slice()));
    let names: Vec<String> = archive
        .entries()
        .unwrap()
        .map(|e| e.unwrap().path().unwrap().display().to_string())
        .collect();
    assert!(
        names.iter().any(|n| n.ends_with("kustomization.yaml")),
        "{names:?}"
    );
}

async fn http_get(url: &str) -> Vec<u8> {
    use http_body_util::BodyExt;
    let uri: hyper::Uri = url.parse().unwrap();
    let address = format!("{}:{}", uri.host().unwrap(), uri.port_u16().unwrap());
    let stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(connection);
    let request = hyper::Request::get(uri.path())
        .header("host", uri.host().unwrap())
        .body(http_body_util::Empty::<hyper::body::Bytes>::new())
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    assert_eq!(response.status(), 200);
    response
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes()
        .to_vec()
}

#[tokio::test]
async fn delete_preconditions_and_metadata_lists() {
    let cluster = TestCluster::start().await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let created = api
        .create(&PostParams::default(), &config_map("guarded", json!({})))
        .await
        .unwrap();
    let wrong_uid = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: Some("00000000-0000-0000-0000-000000000000".into()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    let refused = api_error(api.delete("guarded", &wrong_uid).await.unwrap_err());
    assert_eq!((refused.code, refused.reason.as_str()), (409, "Conflict"));
    // kube-apiserver's own words (rest.BeforeDelete), naming the kind.
    let uid = created.metadata.uid.clone().unwrap();
    assert_eq!(
        refused.message,
        format!(
            "Operation cannot be fulfilled on ConfigMap \"guarded\": the UID in the precondition \
             (00000000-0000-0000-0000-000000000000) does not match the UID in record ({uid}). \
             The object might have been deleted and then recreated"
        )
    );
    let stale_version = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: None,
            resource_version: Some("1".into()),
        }),
        ..DeleteParams::default()
    };
    let refused = api_error(api.delete("guarded", &stale_version).await.unwrap_err());
    assert_eq!(refused.code, 409);
    assert!(
        refused.message.starts_with(
            "Operation cannot be fulfilled on ConfigMap \"guarded\": the ResourceVersion in the \
             precondition (1) does not match the ResourceVersion in record ("
        ) && refused
            .message
            .ends_with("). The object might have been modified"),
        "{}",
        refused.message
    );

    // The namespace also holds what the control plane publishes into every namespace
    // (`kube-root-ca.crt`): only the test's own object is looked at.
    let metadata = api.list_metadata(&ListParams::default()).await.unwrap();
    let guarded: Vec<_> = metadata
        .items
        .iter()
        .filter(|item| item.metadata.name.as_deref() == Some("guarded"))
        .collect();
    assert_eq!(guarded.len(), 1);
    assert_eq!(guarded[0].metadata.uid, created.metadata.uid);

    let right_uid = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: created.metadata.uid.clone(),
            resource_version: created.metadata.resource_version.clone(),
        }),
        ..DeleteParams::default()
    };
    api.delete("guarded", &right_uid).await.unwrap();
    assert!(api.get_opt("guarded").await.unwrap().is_none());
}

#[tokio::test]
async fn runtime_watchers_recover_from_dropped_streams() {
    use kube::runtime::{WatchStreamExt, watcher};
    let cluster = TestCluster::start().await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    // Streaming lists need the WatchList gate: on in process for this test; a real server
    // without it refuses them (422), and then only the plain list-then-watch runs.
    if let Some(server) = cluster.server() {
        server.set_profile(crate::support::apiserver::ServerProfile {
            watch_list: true,
            ..Default::default()
        });
    }
    let probe = api
        .watch(&WatchParams::streaming_lists().timeout(1), "0")
        .await;
    let mut configs = vec![watcher::Config::default()];
    if probe.is_ok() {
        configs.push(watcher::Config::default().streaming_lists());
    }
    for config in configs {
        let name_a = unique("seen");
        api.create(&PostParams::default(), &config_map(&name_a, json!({})))
            .await
            .unwrap();
        let mut objects = watcher(api.clone(), config).applied_objects().boxed();
        let first = tokio::time::timeout(Duration::from_secs(30), async {
            loop {
                let object = objects.next().await.unwrap().unwrap();
                if object.metadata.name.as_deref() == Some(name_a.as_str()) {
                    return object;
                }
            }
        })
        .await
        .expect("the initial list arrives");
        assert!(first.metadata.uid.is_some());
        if let Some(server) = cluster.server() {
            server.drop_watches();
        }
        let name_b = unique("later");
        api.create(&PostParams::default(), &config_map(&name_b, json!({})))
            .await
            .unwrap();
        tokio::time::timeout(Duration::from_secs(30), async {
            loop {
                let object = objects.next().await.unwrap().unwrap();
                if object.metadata.name.as_deref() == Some(name_b.as_str()) {
                    return;
                }
            }
        })
        .await
        .expect("events after the drop arrive");
    }
}

#[tokio::test]
async fn apply_owns_map_entries_not_maps() {
    let cluster = TestCluster::start().await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let mut labelled = config_map("maps", json!({"a": "1"}));
    labelled.metadata.labels = Some([("mine".to_string(), "x".to_string())].into());
    api.patch("maps", &apply_params("owner"), &Patch::Apply(&labelled))
        .await
        .unwrap();
    let editor = PatchParams {
        field_manager: Some("editor".into()),
        ..PatchParams::default()
    };
    api.patch(
        "maps",
        &editor,
        &Patch::Merge(json!({"metadata": {"labels": {"theirs": "y"}}})),
    )
    .await
    .unwrap();
    let unlabelled = config_map("maps", json!({"a": "1"}));
    let applied = api
        .patch("maps", &apply_params("owner"), &Patch::Apply(&unlabelled))
        .await
        .unwrap();
    let labels = applied.metadata.labels.unwrap_or_default();
    assert!(!labels.contains_key("mine"), "the applier's own label goes");
    assert_eq!(
        labels.get("theirs").map(String::as_str),
        Some("y"),
        "another manager's label stays"
    );
}

#[tokio::test]
async fn custom_resources_get_schema_defaults() {
    let cluster = TestCluster::start().await;
    let object = json!({
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
        "metadata": {"name": "defaults", "namespace": cluster.namespace},
        "spec": {"interval": "5m", "prune": true, "sourceRef": {"kind": "GitRepository", "name": "repo"}},
    });
    let created = cluster.apply(&object).await;
    assert_eq!(created["spec"]["force"], json!(false), "{created}");
    assert_eq!(
        created["status"]["observedGeneration"],
        json!(-1),
        "{created}"
    );
}

#[tokio::test]
async fn malformed_requests_fail_without_breaking_the_server() {
    let cluster = TestCluster::start().await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    api.create(&PostParams::default(), &config_map("target", json!({})))
        .await
        .unwrap();
    let request = http::Request::patch(format!(
        "/api/v1/namespaces/{}/configmaps/target",
        cluster.namespace
    ))
    .header("content-type", "application/json-patch+json")
    .body(serde_json::to_vec(&json!([{"op": "replace", "path": "", "value": 1}])).unwrap())
    .unwrap();
    let error = cluster
        .client
        .request::<ConfigMap>(request)
        .await
        .unwrap_err();
    let code = match error {
        kube::Error::Api(status) => status.code,
        other => panic!("expected an API error, got {other}"),
    };
    assert!((400..500).contains(&code), "a client error, got {code}");
    let namespaces: Api<Namespace> = Api::all(cluster.client.clone());
    let bad_labels = serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": unique("bad"), "labels": "not-a-map"}}))
    .unwrap();
    let request = http::Request::post("/api/v1/namespaces")
        .header("content-type", "application/json")
        .body(bad_labels)
        .unwrap();
    assert!(cluster.client.request::<Namespace>(request).await.is_err());
    assert!(api.get("target").await.is_ok(), "the server still answers");
    assert!(namespaces.get(&cluster.namespace).await.is_ok());
}

/// Serves an in-process API server until killed, writing its kubeconfig to
/// `KC_TESTSERVER_KUBECONFIG`: the suite can then run against it as against any cluster
/// (`TEST_KUBECONFIG`), shared by all tests. `make test-shared-server` does this.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a server for other processes; run by make test-shared-server"]
async fn serve_test_apiserver() {
    let path = std::env::var("KC_TESTSERVER_KUBECONFIG").expect("KC_TESTSERVER_KUBECONFIG is set");
    let server = crate::support::apiserver::TestApiServer::start().await;
    let partial = format!("{path}.partial");
    std::fs::write(&partial, server.kubeconfig_yaml()).unwrap();
    std::fs::rename(&partial, &path).unwrap();
    eprintln!("serving {} (kubeconfig {path})", server.url());
    std::future::pending::<()>().await;
}

/// Run by `make test-shared-server` after the suite, against the server the suite shared: the
/// tests left nothing there (`support/cleanup.rs`). Namespaces and CRDs are deleted after a
/// delay, so it waits for them to go.
#[tokio::test]
#[ignore = "run by make test-shared-server after the suite"]
async fn the_shared_server_holds_nothing_of_the_tests_that_ran() {
    let Some(path) = std::env::var_os("TEST_KUBECONFIG") else {
        panic!("TEST_KUBECONFIG names the shared server");
    };
    let kubeconfig = kube::config::Kubeconfig::read_from(path).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let left = || async {
        let mut left = Vec::new();
        let namespaces: Api<Namespace> = Api::all(client.clone());
        for namespace in namespaces
            .list_metadata(&ListParams::default())
            .await
            .unwrap()
        {
            let name = namespace.metadata.name.unwrap_or_default();
            if !["default", "kube-system", "kube-public", "kube-node-lease"].contains(&&*name) {
                left.push(format!("namespace {name}"));
            }
        }
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        for crd in crds.list_metadata(&ListParams::default()).await.unwrap() {
            let name = crd.metadata.name.unwrap_or_default();
            if !name.ends_with(".toolkit.fluxcd.io") {
                left.push(format!("CRD {name}"));
            }
        }
        let roles: Api<k8s_openapi::api::rbac::v1::ClusterRole> = Api::all(client.clone());
        let bindings: Api<k8s_openapi::api::rbac::v1::ClusterRoleBinding> =
            Api::all(client.clone());
        let role_names = roles.list_metadata(&ListParams::default()).await.unwrap();
        let binding_names = bindings
            .list_metadata(&ListParams::default())
            .await
            .unwrap();
        let names = role_names
            .items
            .into_iter()
            .map(|o| o.metadata.name)
            .chain(binding_names.items.into_iter().map(|o| o.metadata.name));
        for name in names.flatten() {
            if name != "cluster-admin" {
                left.push(format!("cluster RBAC {name}"));
            }
        }
        left
    };
    let settled = wait_for(Duration::from_secs(60), || async {
        left().await.is_empty().then_some(())
    })
    .await;
    assert!(settled.is_some(), "left behind: {:?}", left().await);
}
