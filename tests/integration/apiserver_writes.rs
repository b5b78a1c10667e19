//! What kube-apiserver does with writes that fluxcd/pkg `ssa`'s scenarios meet
//! (`flux_ssa`): validation the apply engine relies on to refuse (a binding's roleRef, a
//! Service's type), what ObjectMeta's `omitempty` drops, managed-fields entries written by a
//! client, and how a server-side apply prunes a map taken over from an update. Every test runs
//! unchanged against a real server.

use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::support::cluster::{TestCluster, unique};

fn refusal(error: kube::Error) -> (u16, String) {
    match error {
        kube::Error::Api(status) => (status.code, status.message),
        other => panic!("an API refusal, got {other}"),
    }
}

/// kube-apiserver's ValidateRoleBindingUpdate: a binding's roleRef never changes, in its words
/// (the engine recreates such a binding only with force).
#[tokio::test]
async fn a_bindings_role_ref_cannot_change() {
    let cluster = TestCluster::start().await;
    let name = unique("kc-binding");
    let bindings: Api<ClusterRoleBinding> = Api::all(cluster.client.clone());
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": cluster.namespace}]});
    bindings
        .create(
            &PostParams::default(),
            &serde_json::from_value(binding).unwrap(),
        )
        .await
        .unwrap();
    let error = bindings
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"roleRef": {"name": "edit"}})),
        )
        .await
        .unwrap_err();
    assert_eq!(
        refusal(error),
        (
            422,
            format!(
                "ClusterRoleBinding.rbac.authorization.k8s.io \"{name}\" is invalid: roleRef: \
                 Invalid value: rbac.RoleRef{{APIGroup:\"rbac.authorization.k8s.io\", \
                 Kind:\"ClusterRole\", Name:\"edit\"}}: cannot change roleRef"
            )
        )
    );
    bindings.delete(&name, &Default::default()).await.unwrap();
}

/// kube-apiserver's ValidateService: a type other than the four is refused.
#[tokio::test]
async fn a_services_type_is_one_of_four() {
    let cluster = TestCluster::start().await;
    let services: Api<Service> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let service = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
        "spec": {"type": "ClusterIPSS", "ports": [{"name": "http", "port": 80}]}});
    let error = services
        .create(
            &PostParams::default(),
            &serde_json::from_value(service).unwrap(),
        )
        .await
        .unwrap_err();
    let (code, message) = refusal(error);
    assert_eq!(code, 422);
    assert!(
        message.contains(
            "spec.type: Unsupported value: \"ClusterIPSS\": supported values: \"ClusterIP\", \
             \"ExternalName\", \"LoadBalancer\", \"NodePort\""
        ),
        "{message}"
    );
}

async fn config_map(cluster: &TestCluster, manager: &str, object: Value) -> Api<ConfigMap> {
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let params = PostParams {
        field_manager: Some(manager.into()),
        ..PostParams::default()
    };
    api.create(&params, &serde_json::from_value(object).unwrap())
        .await
        .unwrap();
    api
}

fn managed_fields(object: &ConfigMap) -> Value {
    serde_json::to_value(&object.metadata.managed_fields).unwrap()
}

/// Removing the last annotation leaves no `annotations` map (ObjectMeta's `omitempty`) and no
/// entry for the remover, which set nothing.
#[tokio::test]
async fn an_emptied_annotation_map_is_not_kept() {
    let cluster = TestCluster::start().await;
    let api = config_map(
        &cluster,
        "creator",
        json!({"metadata": {"name": "settings", "annotations": {"note": "x"}}, "data": {"a": "1"}}),
    )
    .await;
    let params = PatchParams {
        field_manager: Some("remover".into()),
        ..PatchParams::default()
    };
    let patched = api
        .patch(
            "settings",
            &params,
            &Patch::Json::<()>(
                serde_json::from_value(
                    json!([{"op": "remove", "path": "/metadata/annotations/note"}]),
                )
                .unwrap(),
            ),
        )
        .await
        .unwrap();
    assert_eq!(patched.metadata.annotations, None);
    let managers: Vec<Value> = managed_fields(&patched)
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["manager"].clone())
        .collect();
    assert_eq!(managers, vec![json!("creator")]);
}

/// A managed-fields entry a client writes without a time has none (`metav1.Time`'s
/// `omitempty`); clients must read such entries.
#[tokio::test]
async fn a_managed_fields_entry_written_without_a_time_has_none() {
    let cluster = TestCluster::start().await;
    let api = config_map(
        &cluster,
        "creator",
        json!({"metadata": {"name": "settings"}, "data": {"a": "1"}}),
    )
    .await;
    let entry = json!({"manager": "taker", "operation": "Apply", "apiVersion": "v1",
        "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:a": {}}}});
    let patched = api
        .patch(
            "settings",
            &PatchParams::default(),
            &Patch::Json::<()>(
                serde_json::from_value(json!([{"op": "replace", "path": "/metadata/managedFields",
                "value": [entry]}]))
                .unwrap(),
            ),
        )
        .await
        .unwrap();
    let entries = managed_fields(&patched);
    assert_eq!(entries.as_array().map(Vec::len), Some(1), "{entries}");
    assert_eq!(entries[0]["manager"], "taker");
    assert!(entries[0].get("time").is_none(), "{entries}");
}

/// A map taken over from an update (its own `.` member in our Apply entry) keeps the keys our
/// next apply sets: structured-merge-diff adds back what the applier still owns after pruning
/// what it dropped.
#[tokio::test]
async fn a_map_taken_over_from_an_update_keeps_its_applied_keys() {
    let cluster = TestCluster::start().await;
    let api = config_map(
        &cluster,
        "kubectl-client-side-apply",
        json!({"metadata": {"name": "settings"}, "data": {"a": "1", "b": "2"}}),
    )
    .await;
    let live = api.get("settings").await.unwrap();
    let mut entries = managed_fields(&live);
    entries[0]["manager"] = json!("kustomize-controller");
    entries[0]["operation"] = json!("Apply");
    api.patch(
        "settings",
        &PatchParams::default(),
        &Patch::Json::<()>(
            serde_json::from_value(
                json!([{"op": "replace", "path": "/metadata/managedFields", "value": entries}]),
            )
            .unwrap(),
        ),
    )
    .await
    .unwrap();
    let applied = api
        .patch(
            "settings",
            &PatchParams::apply("kustomize-controller").force(),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "settings"}, "data": {"a": "1"}})),
        )
        .await
        .unwrap();
    let data = applied.data.unwrap_or_default();
    assert_eq!(data.get("a").map(String::as_str), Some("1"));
    assert!(!data.contains_key("b"), "dropped from the apply: {data:?}");
}
