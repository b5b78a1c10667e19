//! What Flux makes of manifests that are not quite right. A path without a kustomization file,
//! as Flux's generator builds it: every YAML file under it is a resource, and one that is not
//! Kubernetes objects fails the build, naming the file, with nothing applied. A CRD whose
//! conversion webhook `caBundle` holds no certificate is applied without it. A built-in kind
//! with a field its type does not declare: the field is dropped and the rest applied.

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

/// As Flux's normalization of built-in kinds: a field the kind does not declare (a misspelled
/// pod-spec field) is dropped and the rest applied, where the server would refuse the whole
/// object; beyond Flux, a Warning event names the dropped field. A custom resource's unknown
/// field still fails, as in Flux.
#[tokio::test]
async fn undeclared_fields_of_built_in_kinds_are_dropped_and_reported() {
    let harness = Harness::start().await;
    let ns = harness.cluster.namespace.clone();
    let deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  selector:\n    matchLabels:\n      app: web\n  template:\n    metadata:\n      labels:\n        app: web\n    spec:\n      containers:\n      - name: app\n        image: example.com/app:1\n        imagePullPolicyy: Always\n";
    let artifact = harness.publish_files("typo", "main@sha1:7e90", &[("deploy.yaml", deployment)]);
    harness.source("repo", &artifact).await;
    harness.create_kustomization("typo", json!({})).await;
    harness
        .wait_ready("typo", "True", "ReconciliationSucceeded")
        .await;
    let deployments: kube::Api<k8s_openapi::api::apps::v1::Deployment> =
        kube::Api::namespaced(harness.cluster.client.clone(), &ns);
    let applied = deployments.get("web").await.unwrap();
    let container = &applied.spec.unwrap().template.spec.unwrap().containers[0];
    assert_eq!(container.image.as_deref(), Some("example.com/app:1"));
    let events: kube::Api<k8s_openapi::api::core::v1::Event> =
        kube::Api::namespaced(harness.cluster.client.clone(), &ns);
    let reported =
        crate::support::cluster::wait_for(std::time::Duration::from_secs(10), || async {
            events
                .list(&Default::default())
                .await
                .ok()?
                .items
                .into_iter()
                .find(|e| e.reason.as_deref() == Some("UndeclaredFieldsDropped"))
        })
        .await
        .expect("a Warning event names the dropped field");
    assert_eq!(reported.type_.as_deref(), Some("Warning"));
    assert_eq!(
        reported.metadata.annotations.clone().unwrap_or_default()["kustomize.toolkit.fluxcd.io/revision"],
        "main@sha1:7e90",
        "the event names the revision"
    );
    let message = reported.message.unwrap_or_default();
    assert!(
        message.ends_with(&format!(
            "Deployment/{ns}/web: spec.template.spec.containers[name=\"app\"].imagePullPolicyy"
        )),
        "{message}"
    );
}
