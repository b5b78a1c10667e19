//! The server-side apply engine through the harness: stages, policies, drift and takeover,
//! immutable fields, ignore rules, and the no-write fast path.

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kustomize_controller::api::{IgnoreRule, Selector};
use kustomize_controller::apply::{AppliedCache, Applier, ApplyError, ApplyOptions, IgnoreRules};
use kustomize_controller::objects::{Action, Owner};
use serde_json::{Value, json};

use crate::support::cluster::{TestCluster, dynamic_api, unique};

fn applier(
    cluster: &TestCluster,
    cache: &AppliedCache,
    options: ApplyOptions,
    ignore: IgnoreRules,
) -> Applier {
    Applier::new(
        cluster.client.clone(),
        options,
        Owner {
            name: "apps".into(),
            namespace: "flux-system".into(),
        },
        None,
        ignore,
        cache.clone(),
    )
}

fn config_map(namespace: &str, name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace}, "data": data})
}

fn actions(set: &kustomize_controller::objects::ChangeSet) -> Vec<String> {
    set.changes.iter().map(ToString::to_string).collect()
}

async fn live(cluster: &TestCluster, object: &Value) -> Value {
    let api: Api<DynamicObject> = dynamic_api(&cluster.client, object).await;
    let name = object["metadata"]["name"].as_str().unwrap();
    serde_json::to_value(api.get(name).await.unwrap()).unwrap()
}

#[tokio::test]
async fn stages_apply_a_crd_and_its_instances_in_one_set() {
    let cluster = TestCluster::start().await;
    let group = format!("{}.example.com", unique("stage"));
    let namespace = unique("kc-staged");
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("gadgets.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]},
    });
    let objects = vec![
        json!({"apiVersion": format!("{group}/v1"), "kind": "Gadget",
            "metadata": {"name": "g", "namespace": namespace}, "spec": {"size": 1}}),
        config_map(&namespace, "settings", json!({"a": "1"})),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
        crd,
    ];
    let cache = AppliedCache::default();
    let engine = applier(
        &cluster,
        &cache,
        ApplyOptions::default(),
        IgnoreRules::none(),
    );
    let first = engine.apply_all(objects.clone()).await.unwrap();
    assert_eq!(
        actions(&first),
        vec![
            format!("CustomResourceDefinition/gadgets.{group} created"),
            format!("Namespace/{namespace} created"),
            format!("ConfigMap/{namespace}/settings created"),
            format!("Gadget/{namespace}/g created"),
        ]
    );
    let settings = live(&cluster, &objects[1]).await;
    assert_eq!(
        settings["metadata"]["labels"]["kustomize.toolkit.fluxcd.io/name"],
        "apps"
    );

    // Nothing changed: no writes, and with the cache not even dry-runs.
    let before = cluster.server().map(|s| s.requests().len());
    let second = engine.apply_all(objects.clone()).await.unwrap();
    assert!(
        second.changes.iter().all(|c| c.action == Action::Unchanged),
        "{:?}",
        actions(&second)
    );
    if let (Some(server), Some(before)) = (cluster.server(), before) {
        let calls: Vec<_> = server.requests()[before..].to_vec();
        assert!(
            calls.iter().all(|c| c.verb == "get"),
            "an unchanged re-apply only reads: {calls:?}"
        );
    }

    // A fresh engine (no cache) dry-runs but still writes nothing.
    let fresh = applier(
        &cluster,
        &AppliedCache::default(),
        ApplyOptions::default(),
        IgnoreRules::none(),
    );
    let before = cluster.server().map(|s| s.requests().len());
    let third = fresh.apply_all(objects).await.unwrap();
    assert!(
        third.changes.iter().all(|c| c.action == Action::Unchanged),
        "{:?}",
        actions(&third)
    );
    if let (Some(server), Some(before)) = (cluster.server(), before) {
        let writes: Vec<_> = server.requests()[before..]
            .iter()
            .filter(|c| c.verb != "get" && !c.dry_run)
            .cloned()
            .collect();
        assert!(writes.is_empty(), "no writes: {writes:?}");
    }
}

#[tokio::test]
async fn drift_by_kubectl_is_reverted_but_merge_keeps_foreign_fields() {
    let cluster = TestCluster::start().await;
    let ns = &cluster.namespace;
    let cache = AppliedCache::default();
    let engine = applier(
        &cluster,
        &cache,
        ApplyOptions::default(),
        IgnoreRules::none(),
    );
    let mut merged = config_map(ns, "merged", json!({"a": "1"}));
    merged["metadata"]["annotations"] = json!({"kustomize.toolkit.fluxcd.io/ssa": "Merge"});
    let objects = vec![config_map(ns, "owned", json!({"a": "1"})), merged.clone()];
    engine.apply_all(objects.clone()).await.unwrap();

    let edit = PatchParams {
        field_manager: Some("kubectl-edit".into()),
        ..PatchParams::default()
    };
    for name in ["owned", "merged"] {
        let api = dynamic_api(&cluster.client, &objects[0]).await;
        api.patch(
            name,
            &edit,
            &Patch::Merge(json!({
                "metadata": {"labels": {"edited": "yes"}}, "data": {"a": "changed", "extra": "x"}
            })),
        )
        .await
        .unwrap();
    }
    let result = engine.apply_all(objects.clone()).await.unwrap();
    assert_eq!(
        actions(&result),
        vec![
            format!("ConfigMap/{ns}/merged configured"),
            format!("ConfigMap/{ns}/owned configured")
        ],
        "by name, as ssa sorts"
    );
    let owned = live(&cluster, &objects[0]).await;
    assert_eq!(
        owned["data"],
        json!({"a": "1"}),
        "kubectl's edits are reverted"
    );
    assert!(owned["metadata"]["labels"].get("edited").is_none());
    let kept = live(&cluster, &merged).await;
    assert_eq!(kept["data"]["a"], "1", "our field is restored");
    assert_eq!(
        kept["data"]["extra"], "x",
        "Merge leaves other managers' fields"
    );
    assert_eq!(kept["metadata"]["labels"]["edited"], "yes");
}

#[tokio::test]
async fn policies_skip_objects() {
    let cluster = TestCluster::start().await;
    let ns = &cluster.namespace;
    let cache = AppliedCache::default();
    let engine = applier(
        &cluster,
        &cache,
        ApplyOptions::default(),
        IgnoreRules::none(),
    );
    let mut if_not_present = config_map(ns, "once", json!({"a": "1"}));
    if_not_present["metadata"]["annotations"] =
        json!({"kustomize.toolkit.fluxcd.io/ssa": "IfNotPresent"});
    let mut ignored = config_map(ns, "ignored", json!({"a": "1"}));
    ignored["metadata"]["labels"] = json!({"kustomize.toolkit.fluxcd.io/ssa": "ignore"});
    let mut disabled = config_map(ns, "disabled", json!({"a": "1"}));
    disabled["metadata"]["annotations"] =
        json!({"kustomize.toolkit.fluxcd.io/reconcile": "disabled"});
    // As ssa, skipped before its kind is looked up: no CRD serves this one.
    let unserved = json!({"apiVersion": "nothing.example.com/v1", "kind": "Nothing",
        "metadata": {"name": "off", "namespace": ns,
            "annotations": {"kustomize.toolkit.fluxcd.io/reconcile": "disabled"}}});
    let first = engine
        .apply_all(vec![
            if_not_present.clone(),
            ignored.clone(),
            disabled.clone(),
            unserved,
        ])
        .await
        .unwrap();
    assert_eq!(
        actions(&first),
        vec![
            format!("ConfigMap/{ns}/disabled skipped"),
            format!("ConfigMap/{ns}/ignored skipped"),
            format!("ConfigMap/{ns}/once created"),
            format!("Nothing/{ns}/off skipped"),
        ]
    );
    // As Flux: reconcile disabled in the manifests never creates the object either.
    let api = dynamic_api(&cluster.client, &disabled).await;
    assert!(api.get_opt("disabled").await.unwrap().is_none());
    disabled["metadata"]["annotations"] = json!({});
    engine.apply_all(vec![disabled.clone()]).await.unwrap();
    disabled["metadata"]["annotations"] =
        json!({"kustomize.toolkit.fluxcd.io/reconcile": "disabled"});
    if_not_present["data"]["a"] = json!("2");
    disabled["data"]["a"] = json!("2");
    let second = engine
        .apply_all(vec![if_not_present.clone(), disabled.clone()])
        .await
        .unwrap();
    assert!(
        second.changes.iter().all(|c| c.action == Action::Skipped),
        "{:?}",
        actions(&second)
    );
    assert_eq!(live(&cluster, &if_not_present).await["data"]["a"], "1");
    assert_eq!(live(&cluster, &disabled).await["data"]["a"], "1");
    let api = dynamic_api(&cluster.client, &ignored).await;
    assert!(
        api.get_opt("ignored").await.unwrap().is_none(),
        "ssa: Ignore never creates"
    );
}

#[tokio::test]
async fn a_stage_is_validated_whole_before_anything_of_it_is_applied() {
    let cluster = TestCluster::start().await;
    let ns = &cluster.namespace;
    let engine = applier(
        &cluster,
        &AppliedCache::default(),
        ApplyOptions::default(),
        IgnoreRules::none(),
    );
    let existing = config_map(ns, "existing", json!({"a": "1"}));
    engine.apply_all(vec![existing.clone()]).await.unwrap();
    let mut changed = existing.clone();
    changed["data"]["a"] = json!("2");
    let fresh = config_map(ns, "fresh", json!({"a": "1"}));
    let invalid = config_map(ns, "Not_A_Name", json!({"a": "1"}));
    let also_invalid = config_map(ns, "Also_Not_A_Name", json!({"a": "1"}));
    let (applied, error) = engine
        .apply_all_partial(vec![fresh.clone(), changed, invalid, also_invalid])
        .await;
    let message = error
        .expect("the invalid object fails the stage")
        .to_string();
    // Beyond Flux (whose errgroup keeps the first): every failed dry-run, one a line.
    let lines: Vec<&str> = message.lines().collect();
    assert_eq!(lines.len(), 2, "{message}");
    for name in ["Also_Not_A_Name", "Not_A_Name"] {
        assert!(
            lines
                .iter()
                .any(|line| line.starts_with(&format!("ConfigMap/{ns}/{name} dry-run failed"))),
            "{message}"
        );
    }
    assert!(applied.changes.is_empty(), "{:?}", actions(&applied));
    let api = dynamic_api(&cluster.client, &fresh).await;
    assert!(
        api.get_opt("fresh").await.unwrap().is_none(),
        "nothing created"
    );
    assert_eq!(
        live(&cluster, &existing).await["data"]["a"],
        "1",
        "nothing changed"
    );

    // An earlier stage that validated is applied and reported; the failing stage is not.
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": unique("kc-whole")}});
    let (applied, error) = engine
        .apply_all_partial(vec![
            namespace.clone(),
            fresh,
            config_map(ns, "Bad_Too", json!({})),
        ])
        .await;
    assert!(error.is_some());
    assert_eq!(
        actions(&applied),
        vec![format!(
            "Namespace/{} created",
            namespace["metadata"]["name"].as_str().unwrap()
        )]
    );
    assert!(api.get_opt("fresh").await.unwrap().is_none());
}

#[tokio::test]
async fn policies_on_the_live_object_count_as_flux_reads_them() {
    let cluster = TestCluster::start().await;
    let ns = &cluster.namespace;
    let engine = applier(
        &cluster,
        &AppliedCache::default(),
        ApplyOptions::default(),
        IgnoreRules::none(),
    );
    let mut ignored = config_map(ns, "ignored-live", json!({"a": "1"}));
    let mut frozen = config_map(ns, "frozen-live", json!({"a": "1"}));
    frozen["immutable"] = json!(true);
    engine
        .apply_all(vec![ignored.clone(), frozen.clone()])
        .await
        .unwrap();
    // Someone marks the objects in the cluster, not in the manifests.
    let annotate = |object: &Value, key: &str, value: &str| {
        let object = object.clone();
        let (key, value) = (key.to_string(), value.to_string());
        let client = cluster.client.clone();
        async move {
            let api = dynamic_api(&client, &object).await;
            api.patch(
                object["metadata"]["name"].as_str().unwrap(),
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": {key: value}}})),
            )
            .await
            .unwrap();
        }
    };
    annotate(&ignored, "kustomize.toolkit.fluxcd.io/ssa", "Ignore").await;
    annotate(&frozen, "kustomize.toolkit.fluxcd.io/force", "enabled").await;
    ignored["data"]["a"] = json!("2");
    frozen["data"]["a"] = json!("2");
    let result = engine
        .apply_all(vec![ignored.clone(), frozen.clone()])
        .await
        .unwrap();
    assert_eq!(
        actions(&result),
        vec![
            format!("ConfigMap/{ns}/frozen-live created"),
            format!("ConfigMap/{ns}/ignored-live skipped"),
        ]
    );
    assert_eq!(live(&cluster, &ignored).await["data"]["a"], "1");
    assert_eq!(live(&cluster, &frozen).await["data"]["a"], "2", "recreated");
}

#[tokio::test]
async fn immutable_changes_fail_clearly_or_recreate_with_force() {
    let cluster = TestCluster::start().await;
    let ns = &cluster.namespace;
    let cache = AppliedCache::default();
    let engine = applier(
        &cluster,
        &cache,
        ApplyOptions::default(),
        IgnoreRules::none(),
    );
    let mut frozen = config_map(ns, "frozen", json!({"a": "1"}));
    frozen["immutable"] = json!(true);
    engine.apply_all(vec![frozen.clone()]).await.unwrap();
    let uid = live(&cluster, &frozen).await["metadata"]["uid"].clone();

    frozen["data"]["a"] = json!("2");
    let error = engine.apply_all(vec![frozen.clone()]).await.unwrap_err();
    assert!(matches!(error, ApplyError::Immutable { .. }), "{error}");
    let message = error.to_string();
    // fluxcd/pkg/ssa's DryRunErr, the server's words after it.
    assert!(
        message.starts_with(&format!("ConfigMap/{ns}/frozen dry-run failed (Invalid): ")),
        "{message}"
    );
    assert!(message.contains("immutable"), "{message}");

    let forced = applier(
        &cluster,
        &cache,
        ApplyOptions {
            force: true,
            ..ApplyOptions::default()
        },
        IgnoreRules::none(),
    );
    let result = forced.apply_all(vec![frozen.clone()]).await.unwrap();
    assert_eq!(
        actions(&result),
        vec![format!("ConfigMap/{ns}/frozen created")]
    );
    let recreated = live(&cluster, &frozen).await;
    assert_eq!(recreated["data"]["a"], "2");
    assert_ne!(recreated["metadata"]["uid"], uid);

    // The annotation forces one object without spec.force.
    frozen["data"]["a"] = json!("3");
    frozen["metadata"]["annotations"] = json!({"kustomize.toolkit.fluxcd.io/force": "Enabled"});
    let result = engine.apply_all(vec![frozen.clone()]).await.unwrap();
    assert_eq!(
        actions(&result),
        vec![format!("ConfigMap/{ns}/frozen created")]
    );
}

/// fluxcd/pkg/ssa's "recreates immutable StorageClass": a StorageClass's parameters may not
/// change ("updates to parameters are forbidden."), which is refused without force and
/// recreated with it.
#[tokio::test]
async fn a_storage_class_whose_parameters_changed_is_recreated_with_force() {
    let cluster = TestCluster::start().await;
    let engine = |force: bool| {
        applier(
            &cluster,
            &AppliedCache::default(),
            ApplyOptions {
                force,
                ..ApplyOptions::default()
            },
            IgnoreRules::none(),
        )
    };
    let name = unique("kc-sc");
    let mut class = json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": name}, "provisioner": "example.com/none",
        "parameters": {"type": "slow"}});
    engine(false).apply_all(vec![class.clone()]).await.unwrap();
    class["parameters"]["encrypted"] = json!("true");
    let error = engine(false)
        .apply_all(vec![class.clone()])
        .await
        .unwrap_err();
    assert!(matches!(error, ApplyError::Immutable { .. }), "{error}");
    assert!(
        error
            .to_string()
            .starts_with(&format!("StorageClass/{name} dry-run failed (Invalid): ")),
        "{error}"
    );
    let recreated = engine(true).apply_all(vec![class.clone()]).await.unwrap();
    assert_eq!(
        actions(&recreated),
        vec![format!("StorageClass/{name} created")]
    );
    assert_eq!(
        live(&cluster, &class).await["parameters"]["encrypted"],
        "true"
    );
    let api = dynamic_api(&cluster.client, &class).await;
    api.delete(&name, &Default::default()).await.unwrap();
}

#[tokio::test]
async fn ignore_rules_leave_fields_to_other_controllers() {
    let cluster = TestCluster::start().await;
    let ns = &cluster.namespace;
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": ns},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx", "ports": [{"containerPort": 80}]}]}}}});
    let rules = IgnoreRules::new(&[IgnoreRule {
        paths: vec!["/spec/replicas".into()],
        target: Some(Selector {
            kind: Some("Deployment".into()),
            ..Selector::default()
        }),
    }])
    .unwrap();
    let cache = AppliedCache::default();
    let engine = applier(&cluster, &cache, ApplyOptions::default(), rules);
    engine.apply_all(vec![deployment.clone()]).await.unwrap();
    let api = dynamic_api(&cluster.client, &deployment).await;
    let scaler = PatchParams {
        field_manager: Some("hpa-controller".into()),
        ..PatchParams::default()
    };
    api.patch(
        "web",
        &scaler,
        &Patch::Merge(json!({"spec": {"replicas": 5}})),
    )
    .await
    .unwrap();
    let result = engine.apply_all(vec![deployment.clone()]).await.unwrap();
    assert_eq!(
        actions(&result),
        vec![format!("Deployment/{ns}/web unchanged")]
    );
    assert_eq!(live(&cluster, &deployment).await["spec"]["replicas"], 5);
}

/// A controller's write landing between our read of an object and our dry-run of it (the
/// deployment controller's revision annotation, right after a Deployment is created, on every
/// real cluster) is not drift: the two are compared at one resourceVersion, whichever request
/// came first.
#[tokio::test]
async fn a_write_between_the_read_and_the_dry_run_is_not_drift() {
    let cluster = TestCluster::start().await;
    let Some(server) = cluster.server() else {
        eprintln!("skipped: the interleaved write is made by the in-process server");
        return;
    };
    let ns = &cluster.namespace;
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": ns},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}});
    let fresh_engine = || {
        applier(
            &cluster,
            &AppliedCache::default(),
            ApplyOptions::default(),
            IgnoreRules::none(),
        )
    };
    fresh_engine()
        .apply_all(vec![deployment.clone()])
        .await
        .unwrap();
    let path = format!("/apis/apps/v1/namespaces/{ns}/deployments/web");
    for (round, (verb, dry_run)) in [("patch", true), ("get", false)].into_iter().enumerate() {
        server.interleave(crate::support::apiserver::Interleave {
            verb: verb.into(),
            resource: "deployments".into(),
            dry_run,
            path: path.clone(),
            patch: json!({"metadata": {"annotations": {"example.com/round": round.to_string()}}}),
            manager: "another-controller".into(),
        });
        let result = fresh_engine()
            .apply_all(vec![deployment.clone()])
            .await
            .unwrap();
        assert_eq!(
            actions(&result),
            vec![format!("Deployment/{ns}/web unchanged")],
            "a write after the {verb}"
        );
        let annotations = live(&cluster, &deployment).await["metadata"]["annotations"].clone();
        assert_eq!(
            annotations["example.com/round"],
            round.to_string(),
            "the write was made"
        );
    }
}

#[tokio::test]
async fn secrets_with_string_data_do_not_drift() {
    let cluster = TestCluster::start().await;
    let ns = &cluster.namespace;
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": ns},
        "stringData": {"password": "hunter2"}, "type": "Opaque"});
    let engine = applier(
        &cluster,
        &AppliedCache::default(),
        ApplyOptions::default(),
        IgnoreRules::none(),
    );
    engine.apply_all(vec![secret.clone()]).await.unwrap();
    let fresh = applier(
        &cluster,
        &AppliedCache::default(),
        ApplyOptions::default(),
        IgnoreRules::none(),
    );
    let result = fresh.apply_all(vec![secret]).await.unwrap();
    assert_eq!(actions(&result), vec![format!("Secret/{ns}/s unchanged")]);
}

/// As Flux's normalization: an object copied from a live cluster (`kubectl get -o yaml`) keeps
/// neither its old creation time nor its status, and does not drift on the next apply.
#[tokio::test]
async fn objects_copied_from_a_cluster_take_the_servers_creation_time_and_do_not_drift() {
    let cluster = TestCluster::start().await;
    let ns = &cluster.namespace;
    let service = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "copied", "namespace": ns, "creationTimestamp": "2020-01-01T00:00:00Z"},
        "spec": {"ports": [{"port": 80}]},
        "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}}});
    let engine = || {
        applier(
            &cluster,
            &AppliedCache::default(),
            ApplyOptions::default(),
            IgnoreRules::none(),
        )
    };
    let created = engine().apply_all(vec![service.clone()]).await.unwrap();
    assert_eq!(
        actions(&created),
        vec![format!("Service/{ns}/copied created")]
    );
    let applied = live(&cluster, &service).await;
    let created_at = applied["metadata"]["creationTimestamp"]
        .as_str()
        .unwrap_or("");
    assert!(
        created_at > "2026",
        "the server's creation time: {created_at}"
    );
    assert_eq!(
        applied.pointer("/status/loadBalancer/ingress"),
        None,
        "the copied status is not applied"
    );
    let again = engine().apply_all(vec![service]).await.unwrap();
    assert_eq!(
        actions(&again),
        vec![format!("Service/{ns}/copied unchanged")]
    );
}

#[tokio::test]
async fn unknown_kinds_and_missing_namespaces_are_named() {
    let cluster = TestCluster::start().await;
    let engine = applier(
        &cluster,
        &AppliedCache::default(),
        ApplyOptions::default(),
        IgnoreRules::none(),
    );
    let error = engine
        .apply_all(vec![
            json!({"apiVersion": "nothing.example.com/v1", "kind": "Nothing",
            "metadata": {"name": "n", "namespace": cluster.namespace}}),
        ])
        .await
        .unwrap_err();
    // fluxcd/pkg/ssa's DryRunErr around the REST mapper's words.
    assert_eq!(
        error.to_string(),
        format!(
            "Nothing/{}/n dry-run failed: no matches for kind \"Nothing\" in version \"nothing.example.com/v1\"",
            cluster.namespace
        )
    );
    let error = engine
        .apply_all(vec![
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "n"}}),
        ])
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("namespace not specified"),
        "{error}"
    );
}

/// `make bench-apply`: applies the generated medium workload (about 1,000 objects) and
/// reports the time and API requests of a first apply, a no-change re-apply with the applied
/// cache, and one without it (dry-runs but no writes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark; run by make bench-apply"]
async fn bench_apply_medium() {
    use std::collections::BTreeMap;
    let workdir = tempfile::tempdir().unwrap();
    let generator = crate::support::repo_root().join("bench/workload.py");
    let status = std::process::Command::new("python3")
        .arg(&generator)
        .args(["--preset", "medium"])
        .arg(workdir.path().join("medium"))
        .status()
        .expect("python3 runs the workload generator");
    assert!(status.success());
    let built = kustomize_controller::kustomize::build_dir(
        &workdir.path().join("medium"),
        &kustomize_controller::kustomize::BuildOptions::default(),
    )
    .expect("the workload builds");
    let cluster = TestCluster::start().await;
    // Objects the workload leaves without a namespace go where spec.targetNamespace would put them.
    let schema = kustomize_controller::kustomize::SchemaView::builtin();
    let objects: Vec<Value> = built
        .into_iter()
        .map(Value::from)
        .map(|mut o| {
            let api_version = o["apiVersion"].as_str().unwrap_or("").to_string();
            let kind = o["kind"].as_str().unwrap_or("").to_string();
            if o.pointer("/metadata/namespace").is_none()
                && !schema.is_cluster_scoped(&api_version, &kind)
            {
                o["metadata"]["namespace"] = json!(cluster.namespace);
            }
            o
        })
        .collect();
    let mut namespaces: Vec<String> = objects
        .iter()
        .filter_map(|o| o.pointer("/metadata/namespace").and_then(Value::as_str))
        .map(str::to_string)
        .collect();
    namespaces.sort();
    namespaces.dedup();
    for namespace in &namespaces {
        cluster
            .apply(
                &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
            )
            .await;
    }
    let counts = |from: usize| -> String {
        let Some(server) = cluster.server() else {
            return "n/a (real cluster)".into();
        };
        let mut by_verb: BTreeMap<String, usize> = BTreeMap::new();
        for request in &server.requests()[from..] {
            let verb = if request.dry_run {
                format!("{} (dry-run)", request.verb)
            } else {
                request.verb.clone()
            };
            *by_verb.entry(verb).or_default() += 1;
        }
        format!("{by_verb:?}")
    };
    let position = || cluster.server().map_or(0, |s| s.requests().len());
    let cache = AppliedCache::default();
    let engine = applier(
        &cluster,
        &cache,
        ApplyOptions::default(),
        IgnoreRules::none(),
    );
    for (label, engine) in [
        ("first apply", &engine),
        ("no-change re-apply (cached)", &engine),
    ] {
        let start = position();
        let started = std::time::Instant::now();
        let result = engine.apply_all(objects.clone()).await.unwrap();
        println!(
            "{label}: {} objects in {:?}; created {}, configured {}, unchanged {}; requests {}",
            objects.len(),
            started.elapsed(),
            result.count(Action::Created),
            result.count(Action::Configured),
            result.count(Action::Unchanged),
            counts(start)
        );
    }
    let fresh = applier(
        &cluster,
        &AppliedCache::default(),
        ApplyOptions::default(),
        IgnoreRules::none(),
    );
    let start = position();
    let started = std::time::Instant::now();
    let result = fresh.apply_all(objects.clone()).await.unwrap();
    println!(
        "no-change re-apply (fresh engine): {:?}; unchanged {}; requests {}",
        started.elapsed(),
        result.count(Action::Unchanged),
        counts(start)
    );
}

/// `plan` decides as `apply_all` does (policies, ignore rules, dry-run) and writes nothing:
/// what `diff` shows is what an apply would do.
#[tokio::test]
async fn plans_report_what_an_apply_would_change_without_writing() {
    let cluster = TestCluster::start().await;
    let namespace = cluster.namespace.clone();
    let cache = AppliedCache::default();
    let engine = applier(
        &cluster,
        &cache,
        ApplyOptions::default(),
        IgnoreRules::none(),
    );
    let kept = config_map(&namespace, "kept", json!({"a": "1"}));
    let changed = config_map(&namespace, "changed", json!({"color": "blue"}));
    engine
        .apply_all(vec![kept.clone(), changed.clone()])
        .await
        .unwrap();
    let mut skipped = config_map(&namespace, "skipped", json!({"a": "1"}));
    skipped["metadata"]["annotations"] = json!({"kustomize.toolkit.fluxcd.io/ssa": "Ignore"});
    let group = format!("{}.example.com", unique("plan"));
    let unserved = json!({"apiVersion": format!("{group}/v1"), "kind": "Widget",
        "metadata": {"name": "w", "namespace": namespace}});
    let planned = engine
        .plan(vec![
            kept.clone(),
            config_map(&namespace, "changed", json!({"color": "green"})),
            config_map(&namespace, "new", json!({"a": "1"})),
            skipped,
            unserved,
        ])
        .await
        .unwrap();
    let changes: Vec<String> = planned.iter().map(|p| p.change.to_string()).collect();
    assert_eq!(
        changes,
        vec![
            format!("ConfigMap/{namespace}/changed configured"),
            format!("ConfigMap/{namespace}/kept unchanged"),
            format!("ConfigMap/{namespace}/new created"),
            format!("ConfigMap/{namespace}/skipped skipped"),
            format!("Widget/{namespace}/w created"),
        ]
    );
    let drift = planned[0]
        .drift
        .as_ref()
        .expect("a configured object shows its drift");
    assert_eq!(drift.live["data"]["color"], "blue");
    assert_eq!(drift.applied["data"]["color"], "green");
    assert!(
        planned
            .iter()
            .all(|p| p.change.action != Action::Configured || p.drift.is_some())
    );
    assert_eq!(
        live(&cluster, &changed).await["data"]["color"],
        "blue",
        "plans write nothing"
    );
    let configs: Api<DynamicObject> = dynamic_api(&cluster.client, &changed).await;
    assert!(
        configs.get_opt("new").await.unwrap().is_none(),
        "plans create nothing"
    );
}

/// Flux's MigrateAPIVersion: before applying at a newer version of a CRD, every managed-fields
/// entry of the live object (other managers' too) is moved to that version.
#[tokio::test]
async fn managed_fields_move_to_the_applied_version_when_asked() {
    let cluster = TestCluster::start().await;
    let ns = &cluster.namespace;
    let group = format!("{}.example.com", unique("migrate"));
    let schema = json!({"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}});
    cluster
        .apply(&json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("widgets.{group}")},
            "spec": {"group": group, "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                "versions": [
                    {"name": "v1alpha1", "served": true, "storage": false, "schema": schema},
                    {"name": "v1", "served": true, "storage": true, "schema": schema}]},
        }))
        .await;
    let old = json!({"apiVersion": format!("{group}/v1alpha1"), "kind": "Widget",
        "metadata": {"name": "w", "namespace": ns}, "spec": {"size": 1}});
    let engine = |migrate: bool| {
        applier(
            &cluster,
            &AppliedCache::default(),
            ApplyOptions {
                migrate_api_version: migrate,
                ..ApplyOptions::default()
            },
            IgnoreRules::none(),
        )
    };
    let versions = |live: &Value| -> Vec<String> {
        live["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["apiVersion"].as_str().unwrap().to_string())
            .collect()
    };
    let mut applied = None;
    let served = crate::support::cluster::wait_for(std::time::Duration::from_secs(30), || async {
        engine(false).apply_all(vec![old.clone()]).await.ok()
    })
    .await;
    assert!(served.is_some(), "the CRD's kinds are served");
    // Another manager writes a field at the old version.
    let api = dynamic_api(&cluster.client, &old).await;
    api.patch(
        "w",
        &PatchParams::apply("other-tool").force(),
        &Patch::Apply(
            json!({"apiVersion": format!("{group}/v1alpha1"), "kind": "Widget",
            "metadata": {"name": "w", "namespace": ns}, "spec": {"color": "red"}}),
        ),
    )
    .await
    .unwrap();
    let mut new = old.clone();
    new["apiVersion"] = json!(format!("{group}/v1"));
    for migrate in [false, true] {
        let result = engine(migrate).apply_all(vec![new.clone()]).await.unwrap();
        applied = Some(actions(&result));
        let live = live(&cluster, &new).await;
        let stale = versions(&live)
            .iter()
            .any(|v| *v == format!("{group}/v1alpha1"));
        assert_eq!(stale, !migrate, "migrate={migrate}: {:?}", versions(&live));
    }
    assert_eq!(
        applied.unwrap(),
        vec![format!("Widget/{ns}/w configured")],
        "the migration is a change"
    );
}

/// A write the server refuses after the stage's dry-run passed fails that object only: the
/// stage's other writes are still made (concurrently, `--concurrent-ssa` at a time), what was
/// written comes back for the inventory, and the error names the object refused. ssa writes a
/// stage one object at a time and stops at the first refusal, leaving the rest unwritten.
/// Needs the test server's faults (a refusal of writes, not of dry-runs).
#[tokio::test]
async fn a_write_refused_after_the_dry_run_fails_that_object_and_the_stage_writes_the_rest() {
    let cluster = TestCluster::start().await;
    let Some(server) = cluster.server() else {
        eprintln!("skipped: needs the in-process API server's fault injection");
        return;
    };
    let ns = &cluster.namespace;
    let names = ["alpha", "bravo", "charlie"];
    let objects: Vec<Value> = names
        .iter()
        .map(|name| config_map(ns, name, json!({"k": "v"})))
        .collect();
    server.inject(crate::support::apiserver::Fault {
        verb: Some("patch".into()),
        resource: Some("configmaps".into()),
        remaining: 1,
        code: 500,
        retry_after: None,
        dry_run: Some(false),
    });
    let engine = applier(
        &cluster,
        &AppliedCache::default(),
        ApplyOptions::default(),
        IgnoreRules::none(),
    );
    let (written, error) = engine.apply_all_partial(objects.clone()).await;
    let error = error.expect("one write was refused").to_string();
    assert_eq!(written.changes.len(), 2, "{}", actions(&written).join(", "));
    let refused: Vec<&str> = names
        .iter()
        .copied()
        .filter(|name| !written.changes.iter().any(|c| c.object.name == *name))
        .collect();
    assert_eq!(refused.len(), 1);
    assert!(
        error.starts_with(&format!("ConfigMap/{ns}/{} apply failed", refused[0])),
        "{error}"
    );
    let maps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(cluster.client.clone(), ns);
    for name in names {
        let exists = maps.get_opt(name).await.unwrap().is_some();
        assert_eq!(exists, name != refused[0], "{name}");
    }
}

/// An account that may patch an object but not read it (a tenant's role granting `patch`
/// alone): as ssa, the failed read is passed over and the dry-run decides. It passes, so the
/// object is judged against an empty live one and written.
#[tokio::test]
async fn an_object_the_account_may_patch_but_not_read_is_applied() {
    let cluster = TestCluster::start().await;
    let ns = &cluster.namespace;
    let user = unique("patcher");
    cluster
        .grant(
            ns,
            &user,
            json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["patch"]}]),
        )
        .await;
    let existing = config_map(ns, "patched-only", json!({"a": "1"}));
    cluster.apply(&existing).await;
    // The authorizer sees a new grant moments after it is written.
    let as_user: Api<DynamicObject> = Api::namespaced_with(
        cluster.client_as(&user, &[]),
        ns,
        &kube::discovery::ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()),
    );
    let granted = crate::support::cluster::wait_for(std::time::Duration::from_secs(10), || async {
        let probe = PatchParams::apply("probe").dry_run();
        as_user
            .patch("patched-only", &probe, &Patch::Apply(&existing))
            .await
            .ok()
            .map(|_| ())
    })
    .await;
    assert!(granted.is_some(), "patch is granted");
    assert!(as_user.get("patched-only").await.is_err(), "get is not");
    let applied = apply_as(&cluster, &user, IgnoreRules::none(), json!({"a": "2"})).await;
    assert_eq!(
        applied.unwrap(),
        format!("ConfigMap/{ns}/patched-only configured")
    );
    assert_eq!(live(&cluster, &existing).await["data"]["a"], "2");

    // The live object's opt-out still holds: the dry-run's answer carries it.
    let mut disabled = existing.clone();
    disabled["metadata"]["annotations"] =
        json!({"kustomize.toolkit.fluxcd.io/reconcile": "disabled"});
    cluster.apply(&disabled).await;
    let skipped = apply_as(&cluster, &user, IgnoreRules::none(), json!({"a": "3"})).await;
    assert_eq!(
        skipped.unwrap(),
        format!("ConfigMap/{ns}/patched-only skipped")
    );
    assert_eq!(live(&cluster, &existing).await["data"]["a"], "1");

    // Ignored fields cannot keep live values no one could read: the read's refusal is the
    // error, and nothing is written.
    cluster.apply(&existing).await;
    let ignore = IgnoreRules::new(&[IgnoreRule {
        paths: vec!["/data/b".into()],
        target: None,
    }])
    .unwrap();
    let refused = apply_as(&cluster, &user, ignore, json!({"a": "4"}))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("cannot get resource \"configmaps\""),
        "{refused}"
    );
    assert_eq!(live(&cluster, &existing).await["data"]["a"], "1");
}

/// Applies the ConfigMap `patched-only` with `data` as `user` (impersonated), with `ignore`
/// rules and Flux's default options: the action, or the error.
async fn apply_as(
    cluster: &TestCluster,
    user: &str,
    ignore: IgnoreRules,
    data: Value,
) -> Result<String, ApplyError> {
    let engine = Applier::new(
        cluster.client_as(user, &[]),
        ApplyOptions::default(),
        Owner {
            name: "apps".into(),
            namespace: "flux-system".into(),
        },
        None,
        ignore,
        AppliedCache::default(),
    );
    let object = config_map(&cluster.namespace, "patched-only", data);
    engine
        .apply_all(vec![object])
        .await
        .map(|changes| actions(&changes).join(", "))
}
