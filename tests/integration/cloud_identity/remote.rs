//! `spec.kubeConfig.configMapRef`: remote clusters reached with an identity.

use k8s_openapi::api::core::v1::ServiceAccount;
use serde_json::json;

use super::annotated_service_account;

/// `spec.kubeConfig.configMapRef` with the `generic` provider, the "remote" cluster being the
/// one the suite runs on: the ConfigMap's ServiceAccount gets a token for the audience that
/// cluster serves, and applies with that identity's RBAC (a ConfigMap it may write; a Secret
/// it may not). A missing account and a provider that is not one are named as Flux names
/// them.
#[tokio::test]
async fn a_remote_cluster_is_reached_as_the_service_account_a_config_map_names() {
    use crate::support::controller::{Harness, ready_message};
    let token_dir = tempfile::tempdir().unwrap();
    let token_file = token_dir.path().join("token");
    let controller_token = token_file.clone();
    let harness = Harness::start_with(|options| {
        options.reconcile.object_level_workload_identity = true;
        options.reconcile.controller_token_file = controller_token;
    })
    .await;
    let cluster = &harness.cluster;
    let ns = cluster.namespace.clone();
    if cluster.ca_pem().is_empty() {
        eprintln!("skipped: the cluster's kubeconfig gives no CA to trust");
        return;
    }
    annotated_service_account(cluster, "deployer", json!({})).await;
    // The audience the API server authenticates tokens for: what it fills in when asked for
    // none.
    let accounts: kube::Api<ServiceAccount> = kube::Api::namespaced(cluster.client.clone(), &ns);
    let issued = accounts
        .create_token_request("deployer", &Default::default(), &Default::default())
        .await
        .unwrap();
    let audience = issued.spec.audiences[0].clone();
    cluster
        .grant(
            &ns,
            &format!("system:serviceaccount:{ns}:deployer"),
            json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}]),
        )
        .await;
    let kubeconfig_map = |name: &str, account: &str, provider: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns},
            "data": {"provider": provider, "address": cluster.server_url(), "ca.crt": cluster.ca_pem(),
                "serviceAccountName": account, "audiences": audience}})
    };
    cluster
        .apply(&kubeconfig_map("fleet", "deployer", "generic"))
        .await;
    cluster
        .apply(&kubeconfig_map("nobody", "nobody", "generic"))
        .await;
    cluster
        .apply(&kubeconfig_map("openstack", "deployer", "openstack"))
        .await;
    let config_map = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: far\ndata:\n  k: v\n";
    let artifact = harness.publish_files("maps", "main@sha1:c0f1", &[("cm.yaml", config_map)]);
    harness.source("maps", &artifact).await;
    let secret = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: far\nstringData:\n  k: v\n";
    let artifact = harness.publish_files("secrets", "main@sha1:5ec7", &[("secret.yaml", secret)]);
    harness.source("secrets", &artifact).await;
    let kustomization = |source: &str, config_map: &str| {
        json!({"sourceRef": {"kind": "GitRepository", "name": source},
            "kubeConfig": {"configMapRef": {"name": config_map}}})
    };
    harness
        .create_kustomization("maps", kustomization("maps", "fleet"))
        .await;
    harness
        .wait_ready("maps", "True", "ReconciliationSucceeded")
        .await;
    let maps: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(cluster.client.clone(), &ns);
    assert!(maps.get_opt("far").await.unwrap().is_some());
    // The identity's RBAC applies: it may not write Secrets.
    harness
        .create_kustomization("secrets", kustomization("secrets", "fleet"))
        .await;
    let refused = harness
        .wait_ready("secrets", "False", "ReconciliationFailed")
        .await;
    let message = ready_message(&refused);
    assert!(
        message.contains(&format!("system:serviceaccount:{ns}:deployer"))
            && message.contains("secrets"),
        "{message}"
    );
    harness
        .create_kustomization("nobody", kustomization("maps", "nobody"))
        .await;
    let missing = harness
        .wait_ready("nobody", "False", "ReconciliationFailed")
        .await;
    let message = ready_message(&missing);
    assert!(
        message.contains(&format!(
            "failed to get access token for cluster: failed to get service account '{ns}/nobody': serviceaccounts \"nobody\" not found"
        )),
        "{message}"
    );
    // Without a ServiceAccount, the controller's own (read from its mounted token) is used:
    // here an account the test made, whose token it mounted.
    annotated_service_account(cluster, "controller", json!({})).await;
    let own = accounts
        .create_token_request("controller", &Default::default(), &Default::default())
        .await
        .unwrap();
    std::fs::write(&token_file, own.status.unwrap().token).unwrap();
    cluster
        .grant(
            &ns,
            &format!("system:serviceaccount:{ns}:controller"),
            json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}]),
        )
        .await;
    let mut own_identity = kubeconfig_map("own", "", "generic");
    own_identity["data"]
        .as_object_mut()
        .unwrap()
        .remove("serviceAccountName");
    cluster.apply(&own_identity).await;
    let near = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: near\n";
    let artifact = harness.publish_files("near", "main@sha1:0e4a", &[("cm.yaml", near)]);
    harness.source("near", &artifact).await;
    harness
        .create_kustomization("own", kustomization("near", "own"))
        .await;
    harness
        .wait_ready("own", "True", "ReconciliationSucceeded")
        .await;
    assert!(maps.get_opt("near").await.unwrap().is_some());
    harness
        .create_kustomization("openstack", kustomization("maps", "openstack"))
        .await;
    let unknown = harness
        .wait_ready("openstack", "False", "ReconciliationFailed")
        .await;
    assert!(
        ready_message(&unknown).contains("provider 'openstack' not implemented"),
        "{}",
        ready_message(&unknown)
    );
}
