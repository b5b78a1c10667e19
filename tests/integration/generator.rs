//! What Flux makes of manifests that are not quite right. A path without a kustomization file,
//! as Flux's generator builds it: every YAML file under it is a resource, and one that is not
//! Kubernetes objects fails the build, naming the file, with nothing applied. A CRD whose
//! conversion webhook `caBundle` holds no certificate is applied without it.

use serde_json::json;

use crate::support::controller::{Harness, ready_message};

#[tokio::test]
async fn a_yaml_file_that_is_not_an_object_fails_a_plain_directory_naming_it() {
    let harness = Harness::start().await;
    let artifact = harness.publish_files(
        "plain",
        "main@sha1:91a1",
        &[
            (
                "deploy/cm.yaml",
                &crate::support::artifacts::config_map("plain"),
            ),
            ("deploy/ci/values.yaml", "replicas: 3\n"),
        ],
    );
    harness.source("repo", &artifact).await;
    harness
        .create_kustomization("plain", json!({"path": "./deploy"}))
        .await;
    let failed = harness.wait_ready("plain", "False", "BuildFailed").await;
    assert_eq!(
        ready_message(&failed),
        "failed to generate kustomization.yaml: failed to decode Kubernetes YAML from ci/values.yaml: missing Resource metadata"
    );
    assert!(
        harness
            .config_maps()
            .get_opt("plain")
            .await
            .unwrap()
            .is_none(),
        "nothing is applied"
    );
}

/// As Flux's `ssa`: a CRD whose conversion webhook `caBundle` holds no certificate is applied
/// without it (Kubernetes 1.31 and later refuse the CRD for it).
#[tokio::test]
async fn an_invalid_conversion_webhook_ca_bundle_is_left_out_of_a_crd() {
    let harness = Harness::start().await;
    let group = format!("{}.example.com", crate::support::cluster::unique("cab"));
    let crd = format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.{group}\nspec:\n  group: {group}\n  names:\n    kind: Widget\n    plural: widgets\n  scope: Namespaced\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n        x-kubernetes-preserve-unknown-fields: true\n  conversion:\n    strategy: Webhook\n    webhook:\n      conversionReviewVersions: [v1]\n      clientConfig:\n        url: https://webhook.example.com/convert\n        caBundle: aW52YWxpZC1jZXJ0LWRhdGE=\n"
    );
    let artifact = harness.publish_files("crd", "main@sha1:cab1", &[("crd.yaml", &crd)]);
    harness.source("repo", &artifact).await;
    harness.create_kustomization("crd", json!({})).await;
    harness
        .wait_ready("crd", "True", "ReconciliationSucceeded")
        .await;
    let crds: kube::Api<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    > = kube::Api::all(harness.cluster.client.clone());
    let applied = crds.get(&format!("widgets.{group}")).await.unwrap();
    let client_config = applied
        .spec
        .conversion
        .and_then(|c| c.webhook)
        .and_then(|w| w.client_config)
        .expect("the webhook is applied");
    assert_eq!(
        client_config.url.as_deref(),
        Some("https://webhook.example.com/convert")
    );
    assert!(client_config.ca_bundle.is_none(), "{client_config:?}");
}
