//! The controller run as the Helm chart's restricted ClusterRole (`rbac.clusterAdmin=false`),
//! authenticated by a ServiceAccount token: what the role grants works, what it lacks fails
//! with the API server's RBAC message, and impersonation is limited to what the role allows.
//! Runs unchanged against a real server (TokenRequest and RBAC are real there).

use kube::api::{Api, ListParams};
use serde_json::{Value, json};

use crate::support::cluster::unique;
use crate::support::controller::{Harness, ready_message};

/// The restricted ClusterRole's rules, as the chart renders them (`rbac.clusterAdmin=false`).
fn chart_rules() -> Value {
    let rendered = crate::install::render(&json!({"rbac": {"clusterAdmin": false}}), "flux-system")
        .expect("the chart renders");
    rendered
        .objects
        .iter()
        .find(|object| object["kind"] == "ClusterRole")
        .expect("the restricted ClusterRole")["rules"]
        .clone()
}

#[tokio::test]
async fn the_charts_restricted_role_applies_only_through_impersonation() {
    let mut harness = Harness::start().await;
    let cluster = &harness.cluster;
    let ns = cluster.namespace.clone();
    let role = unique("kc-restricted");
    for object in [
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "kustomize-controller", "namespace": ns}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": role}, "rules": chart_rules()}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": role},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": "kustomize-controller", "namespace": ns}]}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "tenant", "namespace": ns}}),
    ] {
        cluster.apply(&object).await;
    }
    let tenant = format!("system:serviceaccount:{ns}:tenant");
    cluster
        .grant(
            &ns,
            &tenant,
            json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}]),
        )
        .await;
    let token = cluster
        .service_account_token(&ns, "kustomize-controller")
        .await;
    let controller = format!("system:serviceaccount:{ns}:kustomize-controller");

    // The token authenticates as the ServiceAccount; impersonating a user needs a right the
    // role does not grant.
    let mut as_user = cluster.config_with_token(&token);
    as_user.auth_info.impersonate = Some("alice".into());
    let configmaps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(kube::Client::try_from(as_user).unwrap(), &ns);
    let refused = configmaps.list(&ListParams::default()).await.unwrap_err();
    let kube::Error::Api(refused) = refused else {
        panic!("expected an API error, got {refused}")
    };
    assert_eq!(refused.code, 403);
    assert_eq!(
        refused.message,
        format!(
            "users \"alice\" is forbidden: User \"{controller}\" cannot impersonate resource \
             \"users\" in API group \"\" at the cluster scope"
        )
    );

    harness.restart_as(token).await;
    let config_map = |name: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  a: \"1\"\n")
    };
    let own = harness.publish_files(
        "own",
        "main@sha1:0a0a",
        &[("cm.yaml", &config_map("own-cm"))],
    );
    harness.source("own", &own).await;
    harness
        .create_kustomization(
            "own",
            json!({"sourceRef": {"kind": "GitRepository", "name": "own"}}),
        )
        .await;
    let failed = harness
        .wait_ready("own", "False", "ReconciliationFailed")
        .await;
    let message = ready_message(&failed);
    // fluxcd/pkg/ssa's words: a read that fails is passed over, the dry-run's refusal named.
    assert!(
        message.starts_with(&format!(
            "ConfigMap/{ns}/own-cm dry-run failed (Forbidden): configmaps \"own-cm\" is forbidden: \
             User \"{controller}\" cannot patch resource \"configmaps\" in API group \"\" in the \
             namespace \"{ns}\""
        )),
        "what the role lacks is named: {message}"
    );
    assert!(
        harness
            .config_maps()
            .get_opt("own-cm")
            .await
            .unwrap()
            .is_none()
    );

    let tenant_files = harness.publish_files(
        "tenant",
        "main@sha1:0b0b",
        &[("cm.yaml", &config_map("tenant-cm"))],
    );
    harness.source("tenant", &tenant_files).await;
    harness
        .create_kustomization(
            "tenant",
            json!({"sourceRef": {"kind": "GitRepository", "name": "tenant"},
                "serviceAccountName": "tenant"}),
        )
        .await;
    harness
        .wait_ready("tenant", "True", "ReconciliationSucceeded")
        .await;
    assert!(
        harness
            .config_maps()
            .get_opt("tenant-cm")
            .await
            .unwrap()
            .is_some()
    );
}
