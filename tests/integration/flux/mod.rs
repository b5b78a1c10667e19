//! Flux kustomize-controller v1.9.4's own controller tests (`internal/controller/
//! kustomization_*_test.go`), ported: one test per Flux test, named after it, with its
//! scenario and assertions. `tests/FLUX_PARITY.md` maps each Flux test to its port.

mod access;

use serde_json::json;

use crate::support::controller::Harness;

/// Flux's tests point every Kustomization at the test cluster through a `kubeconfig` Secret
/// (`createKubeConfigSecret`); this makes the same Secret, key `value`.
async fn kubeconfig_secret(harness: &Harness) {
    harness
        .cluster
        .apply(&json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "kubeconfig", "namespace": harness.cluster.namespace},
            "stringData": {"value": harness.cluster.kubeconfig_yaml()}}))
        .await;
}

/// The condition of `type_` on a Kustomization, if any.
fn condition<'a>(
    object: &'a kustomize_controller::api::Kustomization,
    type_: &str,
) -> Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    object
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
}
