//! Secret-less cloud identities, as Flux users on EKS, GKE and AKS decrypt with them: the
//! controller's own (EKS Pod Identity, the EC2 instance role, GKE's metadata server, a
//! workload identity federation file, Azure workload and managed identity) and a
//! Kustomization's ServiceAccount's (gate `ObjectLevelWorkloadIdentity`), whose token the API
//! server (in-process or real) issues through TokenRequest. Cloud endpoints are moto (AWS KMS)
//! and loopback servers answering as the documented endpoints, checking every request and
//! refusing anything unexpected.

mod decryption;
mod remote;
mod vault_login;

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use k8s_openapi::api::core::v1::ServiceAccount;
use kustomize_controller::controller::identity::KubeServiceAccount;
use kustomize_controller::sops::Keys;
use serde_json::{Value, json};

use crate::sops_key_sources::decrypt_sealed;
use crate::support::cluster::TestCluster;

/// The claims of a JWT, unverified (what a cloud's token exchange reads from a Kubernetes
/// token after checking its signature against the cluster's issuer).
pub(crate) fn claims(token: &str) -> Value {
    token
        .split('.')
        .nth(1)
        .and_then(|part| URL_SAFE_NO_PAD.decode(part).ok())
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or(Value::Null)
}

/// Whether `token` is a Kubernetes token for `namespace/name` with audience `audience`.
pub(crate) fn issued_for(token: &str, namespace: &str, name: &str, audience: &str) -> bool {
    let claims = claims(token);
    claims["sub"] == format!("system:serviceaccount:{namespace}:{name}")
        && claims["aud"]
            .as_array()
            .is_some_and(|audiences| audiences.iter().any(|a| a == audience))
}

pub(crate) fn vars(pairs: &[(&str, String)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(name, value)| (name.to_string(), value.clone()))
        .collect()
}

pub(crate) async fn annotated_service_account(
    cluster: &TestCluster,
    name: &str,
    annotations: Value,
) -> Arc<KubeServiceAccount> {
    let accounts: kube::Api<ServiceAccount> =
        kube::Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let account: ServiceAccount = serde_json::from_value(json!({"apiVersion": "v1",
        "kind": "ServiceAccount", "metadata": {"name": name, "annotations": annotations}}))
    .unwrap();
    accounts
        .create(&Default::default(), &account)
        .await
        .unwrap();
    Arc::new(KubeServiceAccount::new(
        cluster.client.clone(),
        &cluster.namespace,
        name,
    ))
}

/// Decrypts off the runtime, as the controller's build does (the ServiceAccount's requests
/// run on the runtime from there).
pub(crate) async fn decrypt_off_the_runtime(file: String, keys: Keys) -> Result<String, String> {
    tokio::task::spawn_blocking(move || decrypt_sealed(&file, &keys).map_err(|e| e.to_string()))
        .await
        .unwrap()
}
