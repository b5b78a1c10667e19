//! A path without a kustomization file, as Flux's generator builds it: every YAML file under
//! it is a resource, and one that is not Kubernetes objects fails the build, naming the file,
//! with nothing applied.

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
