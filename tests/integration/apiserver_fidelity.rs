//! Where a real kube-apiserver is stricter than a convenient double: fields a kind's schema
//! does not declare, values of the wrong type, options a release refuses (unknown `dryRun`,
//! streaming lists without the `WatchList` gate), answered in kube-apiserver's own words; and
//! what kube-controller-manager writes that a client meets (every namespace's root CA and
//! default ServiceAccount, a Deployment's revision). Every test here runs unchanged
//! against a real server (`TEST_KUBECONFIG`, `KUBEBUILDER_ASSETS`); those that need a
//! particular release or gate set it in process and skip elsewhere.

use std::time::Duration;

use http_body_util::BodyExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde_json::{Value, json};

use crate::support::apiserver::ServerProfile;
use crate::support::cluster::{TestCluster, unique, wait_for};
use crate::support::controller::{Harness, ready_message};

/// A raw request's status, `Warning` headers and JSON body.
async fn send(
    cluster: &TestCluster,
    method: &str,
    path: &str,
    content_type: &str,
    body: &Value,
) -> (u16, Vec<String>, Value) {
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .body(serde_json::to_vec(body).unwrap())
        .unwrap();
    let response = cluster.client.send(request.map(Into::into)).await.unwrap();
    let code = response.status().as_u16();
    let warnings = response
        .headers()
        .get_all("warning")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(str::to_string)
        .collect();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (
        code,
        warnings,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// A raw request's status and JSON body, with an `Accept` of its own.
async fn send_accepting(
    cluster: &TestCluster,
    method: &str,
    path: &str,
    content_type: &str,
    accept: &str,
    body: &Value,
) -> (u16, Value) {
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .header("accept", accept)
        .body(serde_json::to_vec(body).unwrap())
        .unwrap();
    let response = cluster.client.send(request.map(Into::into)).await.unwrap();
    let code = response.status().as_u16();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

fn deployment_with_typo(name: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replica": 2, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}})
}

#[tokio::test]
async fn builtin_kinds_refuse_or_drop_fields_their_schema_does_not_declare() {
    let cluster = TestCluster::start().await;
    let ns = &cluster.namespace;
    let collection = format!("/apis/apps/v1/namespaces/{ns}/deployments");

    // Server-side apply: refused, whatever fieldValidation says.
    let api: Api<Deployment> = Api::namespaced(cluster.client.clone(), ns);
    let (code, _, status) = send(
        &cluster,
        "PATCH",
        &format!("{collection}/applied?fieldManager=test&fieldValidation=Ignore"),
        "application/apply-patch+yaml",
        &deployment_with_typo("applied"),
    )
    .await;
    assert_eq!(code, 500, "{status}");
    assert_eq!(
        status["message"],
        "failed to create typed patch object (/applied; apps/v1, Kind=Deployment): \
         .spec.replica: field not declared in schema"
    );
    assert!(
        api.get_opt("applied").await.unwrap().is_none(),
        "nothing was written"
    );

    // Strict field validation: refused as the strict decoder refuses it.
    let (code, _, status) = send(
        &cluster,
        "POST",
        &format!("{collection}?fieldValidation=Strict"),
        "application/json",
        &deployment_with_typo("strict"),
    )
    .await;
    assert_eq!((code, status["reason"].as_str()), (400, Some("BadRequest")));
    assert_eq!(
        status["message"],
        "Deployment in version \"v1\" cannot be handled as a Deployment: strict decoding \
         error: unknown field \"spec.replica\""
    );

    // The default (Warn): created without the field, with a warning naming it.
    let (code, warnings, created) = send(
        &cluster,
        "POST",
        &collection,
        "application/json",
        &deployment_with_typo("warned"),
    )
    .await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(warnings, [r#"299 - "unknown field \"spec.replica\"""#]);
    assert!(created["spec"].get("replica").is_none());
    assert_eq!(
        created["spec"]["template"]["spec"]["containers"][0]["name"],
        "web"
    );

    // Ignore: dropped silently. A real cluster's deployment controller writes the Deployment
    // meanwhile, so the update is made from a fresh read when it conflicts (a few times).
    let mut base = created.clone();
    let mut answer = None;
    for _ in 0..5 {
        let mut update = base.clone();
        update["spec"]["replica"] = json!(3);
        update["metadata"]["labels"] = json!({"updated": "yes"});
        let sent = send(
            &cluster,
            "PUT",
            &format!("{collection}/warned?fieldValidation=Ignore"),
            "application/json",
            &update,
        )
        .await;
        if sent.0 != 409 {
            answer = Some(sent);
            break;
        }
        base = send(
            &cluster,
            "GET",
            &format!("{collection}/warned"),
            "application/json",
            &Value::Null,
        )
        .await
        .2;
    }
    let (code, warnings, updated) = answer.expect("an update without a conflict");
    assert_eq!(code, 200, "{updated}");
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(updated["spec"].get("replica").is_none());
    assert_eq!(updated["metadata"]["labels"]["updated"], "yes");
}

#[tokio::test]
async fn custom_resources_refuse_undeclared_status_fields_in_an_apply() {
    let cluster = TestCluster::start().await;
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("source.toolkit.fluxcd.io", "v1", "ExternalArtifact"),
        "externalartifacts",
    );
    let api: Api<DynamicObject> =
        Api::namespaced_with(cluster.client.clone(), &cluster.namespace, &resource);
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "ExternalArtifact",
        "metadata": {"name": "produced"}, "spec": {}}))
    .unwrap();
    api.patch(
        "produced",
        &PatchParams::apply("producer"),
        &Patch::Apply(&object),
    )
    .await
    .unwrap();
    let status = json!({"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "ExternalArtifact",
        "status": {"observedGeneration": 1}});
    let error = api
        .patch_status(
            "produced",
            &PatchParams::apply("producer"),
            &Patch::Apply(&status),
        )
        .await
        .unwrap_err();
    let kube::Error::Api(error) = error else {
        panic!("expected an API error, got {error}")
    };
    assert_eq!(error.code, 500);
    assert_eq!(
        error.message,
        "failed to create typed patch object (/; source.toolkit.fluxcd.io/v1, \
         Kind=ExternalArtifact): .status.observedGeneration: field not declared in schema"
    );
}

#[tokio::test]
async fn an_unknown_dry_run_value_fails_validation_and_writes_nothing() {
    let cluster = TestCluster::start().await;
    let ns = &cluster.namespace;
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dry"}});
    let (code, _, status) = send(
        &cluster,
        "POST",
        &format!("/api/v1/namespaces/{ns}/configmaps?dryRun=Yes"),
        "application/json",
        &body,
    )
    .await;
    assert_eq!(
        (code, status["reason"].as_str()),
        (422, Some("Invalid")),
        "{status}"
    );
    assert_eq!(
        status["message"],
        "CreateOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: \
         []string{\"Yes\"}: supported values: \"All\""
    );
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), ns);
    assert!(api.get_opt("dry").await.unwrap().is_none());
}

/// A client that reads only an answer's metadata (the controller's status writes and
/// applies) asks for it alone, as client-go's metadata client does, and gets a
/// `PartialObjectMetadata` from every verb that answers with an object; a failure is still a
/// `Status`.
#[tokio::test]
async fn writes_answer_with_the_metadata_alone_when_asked() {
    const METADATA_ONLY: &str =
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";
    let cluster = TestCluster::start().await;
    let ns = &cluster.namespace;
    let path = format!("/api/v1/namespaces/{ns}/configmaps");
    let config_map = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "meta"}, "data": {"key": "one"}});
    let (code, created) = send_accepting(
        &cluster,
        "POST",
        &path,
        "application/json",
        METADATA_ONLY,
        &config_map,
    )
    .await;
    assert_eq!(code, 201, "{created}");
    let patch = json!({"data": {"key": "two"}});
    let (code, patched) = send_accepting(
        &cluster,
        "PATCH",
        &format!("{path}/meta"),
        "application/merge-patch+json",
        METADATA_ONLY,
        &patch,
    )
    .await;
    assert_eq!(code, 200, "{patched}");
    // The apply engine's writes: a server-side apply asking for metadata alone (kube's
    // `patch_metadata`, no fallback type), whose answer must still carry what the applied
    // cache keeps, the resourceVersion and the managed fields.
    let apply_path = format!("{path}/meta?fieldManager=kustomize-controller&force=true");
    let (code, applied) = send_accepting(
        &cluster,
        "PATCH",
        &apply_path,
        "application/apply-patch+yaml",
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
        &json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "meta", "namespace": ns}, "data": {"key": "applied"}}),
    )
    .await;
    assert_eq!(code, 200, "{applied}");
    let managers: Vec<&str> = applied["metadata"]["managedFields"]
        .as_array()
        .unwrap_or_else(|| panic!("managed fields in {applied}"))
        .iter()
        .filter(|entry| entry["operation"] == "Apply")
        .filter_map(|entry| entry["manager"].as_str())
        .collect();
    assert_eq!(managers, ["kustomize-controller"], "{applied}");
    for answer in [&created, &patched, &applied] {
        assert_eq!(
            (
                &answer["apiVersion"],
                &answer["kind"],
                &answer["metadata"]["name"]
            ),
            (
                &json!("meta.k8s.io/v1"),
                &json!("PartialObjectMetadata"),
                &json!("meta")
            ),
            "{answer}"
        );
        assert!(answer.get("data").is_none(), "{answer}");
        assert!(
            answer["metadata"]["resourceVersion"].is_string(),
            "{answer}"
        );
    }
    let (code, whole) = send_accepting(
        &cluster,
        "PATCH",
        &format!("{path}/meta"),
        "application/merge-patch+json",
        "application/json",
        &patch,
    )
    .await;
    assert_eq!(
        (code, &whole["kind"]),
        (200, &json!("ConfigMap")),
        "{whole}"
    );
    assert_eq!(
        whole["data"]["key"], "two",
        "the apply wrote before this patch"
    );
    let (code, missing) = send_accepting(
        &cluster,
        "PATCH",
        &format!("{path}/absent"),
        "application/merge-patch+json",
        METADATA_ONLY,
        &patch,
    )
    .await;
    assert_eq!(
        (code, &missing["kind"], &missing["reason"]),
        (404, &json!("Status"), &json!("NotFound")),
        "{missing}"
    );
}

#[tokio::test]
async fn a_typo_in_a_custom_resource_fails_the_kustomization_with_the_servers_message() {
    let harness = Harness::start().await;
    let artifact = harness.publish_files(
        "typo",
        "main@sha1:7e57",
        &[
            (
                "cm.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: beside-the-typo\n",
            ),
            (
                "repo.yaml",
                "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  \
                 name: typo\nspec:\n  interval: 1m\n  url: https://example.invalid/r.git\n  \
                 urll: https://example.invalid/r.git\n",
            ),
        ],
    );
    harness.source("repo", &artifact).await;
    harness.create_kustomization("typo", json!({})).await;
    let failed = harness
        .wait_ready("typo", "False", "ReconciliationFailed")
        .await;
    let message = ready_message(&failed);
    assert!(
        message.contains(&format!(
            "GitRepository/{}/typo dry-run failed",
            harness.cluster.namespace
        )),
        "{message}"
    );
    assert!(
        message.contains(".spec.urll: field not declared in schema"),
        "{message}"
    );
    assert!(
        harness
            .config_maps()
            .get_opt("beside-the-typo")
            .await
            .unwrap()
            .is_none(),
        "nothing of the stage is applied"
    );
}

#[tokio::test]
async fn streaming_lists_need_the_watch_list_gate_and_the_controller_never_asks_for_them() {
    let harness = Harness::start().await;
    let Some(server) = harness.cluster.server() else {
        eprintln!("skipped: plays a release and gate, which only the in-process server can");
        return;
    };
    // kube-apiserver v1.28, where WatchList is an alpha gate, off.
    server.set_profile(ServerProfile {
        minor: 28,
        patch: 0,
        watch_list: false,
        priority_and_fairness: true,
    });
    let (code, _, version) = send(
        &harness.cluster,
        "GET",
        "/version",
        "application/json",
        &Value::Null,
    )
    .await;
    assert_eq!(
        (code, version["gitVersion"].as_str()),
        (200, Some("v1.28.0"))
    );
    let ns = &harness.cluster.namespace;
    let (code, _, status) = send(
        &harness.cluster,
        "GET",
        &format!(
            "/api/v1/namespaces/{ns}/configmaps?watch=true&sendInitialEvents=true\
             &resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
        ),
        "application/json",
        &Value::Null,
    )
    .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        status["message"],
        "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: \
         sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"
    );

    let probed = server.requests().len();
    let artifact = harness.publish_files(
        "plain",
        "main@sha1:1e57",
        &[(
            "cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plain\n",
        )],
    );
    harness.source("repo", &artifact).await;
    harness.create_kustomization("plain", json!({})).await;
    harness
        .wait_ready("plain", "True", "ReconciliationSucceeded")
        .await;
    let streamed: Vec<_> = server.requests()[probed..]
        .iter()
        .filter(|r| r.initial_events)
        .cloned()
        .collect();
    assert!(
        streamed.is_empty(),
        "the controller asked for streaming lists: {streamed:?}"
    );
}

#[tokio::test]
async fn the_control_plane_follows_up_after_the_write_is_answered() {
    let cluster = TestCluster::start().await;
    if !cluster.has_controller_manager() {
        eprintln!(
            "skipped: needs kube-controller-manager's controllers, which envtest does not run"
        );
        return;
    }
    let in_process = cluster.server();
    if let Some(server) = in_process {
        // Long enough that "right after the answer" is deterministic here.
        server.set_control_delay(Duration::from_millis(400));
    }
    // Garbage collection: a dependent outlives its owner's delete call.
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let owner = api
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
            "metadata": {"name": "owner"}}))
            .unwrap(),
        )
        .await
        .unwrap();
    let dependent: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "dependent",
        "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
            "uid": owner.metadata.uid.clone().unwrap()}]}}))
    .unwrap();
    api.create(&PostParams::default(), &dependent)
        .await
        .unwrap();
    api.delete("owner", &DeleteParams::background())
        .await
        .unwrap();
    if in_process.is_some() {
        assert!(
            api.get_opt("dependent").await.unwrap().is_some(),
            "collected later"
        );
    }
    let collected = wait_for(Duration::from_secs(60), || async {
        api.get_opt("dependent")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    assert!(collected.is_some(), "the dependent is collected");

    // A new CRD: not established, not served, not discovered at once; then established and
    // served; discovered last.
    let group = format!("{}.example.com", unique("later"));
    let crds: Api<CustomResourceDefinition> = Api::all(cluster.client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("gizmos.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"kind": "Gizmo", "plural": "gizmos", "singular": "gizmo", "listKind": "GizmoList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]}}))
    .unwrap();
    let created = crds.create(&PostParams::default(), &crd).await.unwrap();
    let gvk = GroupVersionKind::gvk(&group, "v1", "Gizmo");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "gizmos");
    let gizmos: Api<DynamicObject> =
        Api::namespaced_with(cluster.client.clone(), &cluster.namespace, &resource);
    if in_process.is_some() {
        let conditions = created
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default();
        assert!(
            conditions.iter().all(|c| c.type_ != "Established"),
            "{conditions:?}"
        );
        let error = gizmos.list(&Default::default()).await.unwrap_err();
        assert!(
            matches!(error, kube::Error::Api(ref e) if e.code == 404),
            "{error}"
        );
    }
    crate::support::cluster::wait_until_served(&cluster.client, &crd).await;
    if in_process.is_some() {
        assert!(
            kube::discovery::pinned_kind(&cluster.client, &gvk)
                .await
                .is_err(),
            "discovery lags the established CRD"
        );
    }
    let discovered = wait_for(Duration::from_secs(30), || async {
        kube::discovery::pinned_kind(&cluster.client, &gvk)
            .await
            .ok()
    })
    .await;
    assert!(discovered.is_some(), "the kind is discovered");
    crds.delete(&format!("gizmos.{group}"), &DeleteParams::default())
        .await
        .unwrap();
}

async fn list_page(cluster: &TestCluster, query: &str) -> (u16, Value) {
    let ns = &cluster.namespace;
    let (code, _, body) = send(
        cluster,
        "GET",
        &format!("/api/v1/namespaces/{ns}/configmaps?{query}"),
        "application/json",
        &Value::Null,
    )
    .await;
    (code, body)
}

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|item| item["metadata"]["name"].as_str().unwrap_or("").to_string())
        .collect()
}

#[tokio::test]
async fn lists_read_one_snapshot_across_pages_and_at_a_resource_version() {
    let cluster = TestCluster::start().await;
    // The namespace also holds what the control plane publishes into every namespace.
    let own_names = |list: &Value| {
        let mut found = names(list);
        found.retain(|name| name != "kube-root-ca.crt");
        found
    };
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    for name in ["a", "b", "c"] {
        let object: ConfigMap = serde_json::from_value(json!({"metadata": {"name": name},
            "data": {"v": "1"}}))
        .unwrap();
        api.create(&PostParams::default(), &object).await.unwrap();
    }
    let (code, first) = list_page(&cluster, "limit=1").await;
    assert_eq!(code, 200, "{first}");
    assert_eq!(own_names(&first), ["a"]);
    let snapshot = first["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let token = first["metadata"]["continue"].as_str().unwrap().to_string();

    // Writes after the first page: a change, a deletion and an addition.
    api.patch(
        "b",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": "2"}})),
    )
    .await
    .unwrap();
    api.delete("c", &Default::default()).await.unwrap();
    let late: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "d"}})).unwrap();
    api.create(&PostParams::default(), &late).await.unwrap();

    let (code, rest) = list_page(&cluster, &format!("continue={token}")).await;
    assert_eq!(code, 200, "{rest}");
    assert_eq!(
        own_names(&rest),
        ["b", "c"],
        "the rest of the first page's snapshot"
    );
    assert_eq!(rest["items"][0]["data"]["v"], "1");
    assert_eq!(rest["metadata"]["resourceVersion"], snapshot.as_str());

    let (code, exact) = list_page(
        &cluster,
        &format!("resourceVersion={snapshot}&resourceVersionMatch=Exact"),
    )
    .await;
    assert_eq!(code, 200, "{exact}");
    assert_eq!(own_names(&exact), ["a", "b", "c"]);
    let (_, latest) = list_page(&cluster, "").await;
    assert_eq!(own_names(&latest), ["a", "b", "d"]);

    let (code, status) = list_page(&cluster, "resourceVersionMatch=NotOlderThan").await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        status["message"],
        "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: \
         resourceVersionMatch is forbidden unless resourceVersion is provided"
    );

    let Some(server) = cluster.server() else {
        eprintln!("skipped the rest: compaction can only be forced on the in-process server");
        return;
    };
    // After a compaction neither the old snapshot nor the token can be read.
    server.compact();
    let (code, status) = list_page(
        &cluster,
        &format!("resourceVersion={snapshot}&resourceVersionMatch=Exact"),
    )
    .await;
    assert_eq!(
        (code, status["reason"].as_str()),
        (410, Some("Expired")),
        "{status}"
    );
    let (code, status) = list_page(&cluster, &format!("continue={token}")).await;
    assert_eq!(
        (code, status["reason"].as_str()),
        (410, Some("Expired")),
        "{status}"
    );
    let inconsistent = status["metadata"]["continue"].as_str().unwrap();
    let (code, rest) = list_page(&cluster, &format!("continue={inconsistent}")).await;
    assert_eq!(code, 200, "{rest}");
    assert_eq!(own_names(&rest), ["b", "d"], "the remainder as it is now");
}

/// kube-controller-manager furnishes every new namespace with its `default` ServiceAccount and
/// the `kube-root-ca.crt` ConfigMap (a CA bundle), so no namespace is ever empty to a list.
#[tokio::test]
async fn every_namespace_gets_a_default_service_account_and_the_root_ca() {
    let cluster = TestCluster::start().await;
    if !cluster.has_controller_manager() {
        eprintln!("skipped: needs kube-controller-manager, which envtest does not run");
        return;
    }
    let ns = &cluster.namespace;
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), ns);
    let bundle = wait_for(Duration::from_secs(30), || async {
        config_maps.get_opt("kube-root-ca.crt").await.ok().flatten()
    })
    .await
    .expect("kube-root-ca.crt is published");
    let data = bundle.data.unwrap_or_default();
    assert!(
        data["ca.crt"].starts_with("-----BEGIN CERTIFICATE-----"),
        "{data:?}"
    );
    let annotations = bundle.metadata.annotations.clone().unwrap_or_default();
    assert!(
        annotations["kubernetes.io/description"].starts_with("Contains a CA bundle"),
        "{annotations:?}"
    );
    assert_eq!(
        crate::support::field_managers(&bundle.metadata),
        ["kube-controller-manager"]
    );
    let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(cluster.client.clone(), ns);
    let account = wait_for(Duration::from_secs(30), || async {
        accounts.get_opt("default").await.ok().flatten()
    })
    .await;
    assert!(account.is_some(), "the default ServiceAccount is created");
}

/// The deployment controller keeps `deployment.kubernetes.io/revision` on a Deployment (one
/// more for each new pod template), a write to the main resource after the client's own.
#[tokio::test]
async fn the_deployment_controller_annotates_each_revision() {
    let cluster = TestCluster::start().await;
    if !cluster.has_controller_manager() {
        eprintln!("skipped: needs kube-controller-manager, which envtest does not run");
        return;
    }
    let api: Api<Deployment> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let deployment = |image: &str| -> Deployment {
        serde_json::from_value(json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web"},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "web", "image": image}]}}}}))
        .unwrap()
    };
    let params = PatchParams::apply("fidelity").force();
    let revision = |wanted: &'static str| {
        let api = api.clone();
        async move {
            wait_for(Duration::from_secs(30), || async {
                let live = api.get("web").await.ok()?;
                let annotations = live.metadata.annotations?;
                (annotations.get("deployment.kubernetes.io/revision")? == wanted).then_some(())
            })
            .await
        }
    };
    api.patch("web", &params, &Patch::Apply(deployment("nginx:1")))
        .await
        .unwrap();
    assert!(revision("1").await.is_some(), "revision 1 is recorded");
    api.patch("web", &params, &Patch::Apply(deployment("nginx:2")))
        .await
        .unwrap();
    assert!(
        revision("2").await.is_some(),
        "a new template is revision 2"
    );
}

/// Server-side apply converts the configuration to the kind's types first: a value of the
/// wrong type fails there (500, no reason) for built-in kinds as for custom resources,
/// whatever `fieldValidation` says, named as structured-merge-diff names it.
#[tokio::test]
async fn applied_values_of_the_wrong_type_fail_the_typed_conversion() {
    let cluster = TestCluster::start().await;
    let ns = &cluster.namespace;
    let path = format!("/apis/apps/v1/namespaces/{ns}/deployments/typed?fieldManager=fidelity");
    let body = |spec: Value| {
        let mut deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "typed"},
            "spec": {"selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "web", "image": "nginx",
                        "resources": {"limits": {"cpu": 1}}}]}}}});
        deployment["spec"]
            .as_object_mut()
            .unwrap()
            .extend(spec.as_object().unwrap().clone());
        deployment
    };
    let prefix = "failed to create typed patch object (/typed; apps/v1, Kind=Deployment): ";
    for (spec, problem) in [
        (
            json!({"replicas": "two"}),
            ".spec.replicas: expected numeric (int or float), got string",
        ),
        (
            json!({"paused": "yes"}),
            ".spec.paused: expected boolean, got &{yes}",
        ),
        (
            json!({"paused": 3, "replicas": true}),
            "errors:\n  .spec.paused: expected boolean, got &{3}\n  \
             .spec.replicas: expected numeric (int or float), got bool",
        ),
    ] {
        let (code, _, status) = send(
            &cluster,
            "PATCH",
            &path,
            "application/apply-patch+yaml",
            &body(spec),
        )
        .await;
        assert_eq!((code, status["reason"].as_str()), (500, None), "{status}");
        // Several problems are listed in no fixed order (kube-apiserver walks a Go map).
        let lines = |text: &str| {
            let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
            lines.sort();
            lines
        };
        let message = status["message"].as_str().unwrap_or_default();
        assert_eq!(
            lines(message),
            lines(&format!("{prefix}{problem}")),
            "{message}"
        );
    }
    // A Quantity (`cpu: 1`) is an untyped scalar: a number is as good as a string.
    let (code, _, created) = send(
        &cluster,
        "PATCH",
        &path,
        "application/apply-patch+yaml",
        &body(json!({"replicas": 0})),
    )
    .await;
    assert_eq!(code, 201, "{created}");
}

/// A label selector kube-apiserver refuses is a 400 in the words of Kubernetes' `labels.Parse`
/// (as kube-local's v1.28 answers them); one it reads selects as it selects.
#[tokio::test]
async fn label_selectors_are_read_and_refused_as_kube_apiserver_reads_them() {
    let cluster = TestCluster::start().await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    for (name, labels) in [
        ("web", json!({"app": "web", "tier": "front"})),
        ("db", json!({"app": "db"})),
    ] {
        let object: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap();
        api.create(&PostParams::default(), &object).await.unwrap();
    }
    let query = |selector: &str| {
        format!(
            "labelSelector={}",
            form_urlencoded::byte_serialize(selector.as_bytes()).collect::<String>()
        )
    };
    for (selector, message) in [
        ("a=b=c", "found '=', expected: ',' or 'end of string'"),
        (
            "a in (b c)",
            "unable to parse requirement: found 'c', expected: ',' or ')'",
        ),
        ("a,", "found '', expected: identifier after ','"),
        (
            "a>x",
            "unable to parse requirement: values[0]: Invalid value: \"x\": for 'Gt', 'Lt' operators, the value must be an integer",
        ),
        ("!a=b", "found '=', expected: ',' or 'end of string'"),
    ] {
        let (code, body) = list_page(&cluster, &query(selector)).await;
        assert_eq!(code, 400, "{selector}: {body}");
        assert_eq!(body["reason"], "BadRequest", "{selector}");
        assert_eq!(body["message"], message, "{selector}");
    }
    for (selector, selected) in [
        ("app in (web,db),!tier", vec!["db"]),
        ("tier!=", vec!["db", "web"]),
        ("app=web,tier", vec!["web"]),
    ] {
        let (code, list) = list_page(&cluster, &query(selector)).await;
        assert_eq!(code, 200, "{selector}: {list}");
        let mut found = names(&list);
        found.retain(|name| name != "kube-root-ca.crt");
        found.sort();
        assert_eq!(found, selected, "{selector}");
    }
}
