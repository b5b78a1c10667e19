//! Trees written to hurt: a build must fail with a clear error, never take the process
//! down for every other tenant (issue 18). Inputs are generated here, not committed.

use std::path::Path;

use kustomize_controller::kustomize::{self, BuildOptions, KustomizeError, Limits};
use serde_json::json;

use crate::support::controller::Harness;

/// A chain of `depth` kustomizations, each including the next; the last holds one
/// ConfigMap. Returns the first.
fn base_chain(root: &Path, depth: usize) -> std::path::PathBuf {
    for level in 0..depth {
        let dir = root.join(format!("b{level}"));
        std::fs::create_dir_all(&dir).unwrap();
        let kustomization = if level + 1 == depth {
            std::fs::write(
                dir.join("cm.yaml"),
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: deepest\n",
            )
            .unwrap();
            "resources:\n- cm.yaml\n".to_string()
        } else {
            format!("resources:\n- ../b{}\n", level + 1)
        };
        std::fs::write(dir.join("kustomization.yaml"), kustomization).unwrap();
    }
    root.join("b0")
}

#[test]
fn base_chains_deeper_than_the_limit_fail_naming_the_directory() {
    let root = tempfile::tempdir().unwrap();
    let top = base_chain(root.path(), 60);
    let options = BuildOptions {
        limits: Limits { max_depth: 50 },
        ..Default::default()
    };
    let error = kustomize::build(root.path(), &top, &options).unwrap_err();
    assert!(
        matches!(&error, KustomizeError::TooDeep { dir, limit: 50 } if dir.ends_with("b50")),
        "{error}"
    );
    assert!(
        error.to_string().contains("deeper than 50 levels"),
        "{error}"
    );
    // The same tree within the limit builds.
    let options = BuildOptions {
        limits: Limits { max_depth: 60 },
        ..Default::default()
    };
    assert_eq!(
        kustomize::build(root.path(), &top, &options).unwrap().len(),
        1
    );
}

/// kustomize builds chains of 3,000 bases; so does the controller, on whatever thread its
/// reconcile runs (unoptimised test builds use ten times the stack of a release build).
#[tokio::test]
async fn the_controller_builds_base_chains_as_deep_as_kustomize_does() {
    let harness = Harness::start().await;
    let dir = tempfile::tempdir().unwrap();
    base_chain(dir.path(), 3_000);
    std::fs::write(dir.path().join("kustomization.yaml"), "resources:\n- b0\n").unwrap();
    let artifact = harness
        .artifacts
        .publish_dir("deep.tar.gz", "main@sha1:3000", dir.path());
    harness.source("repo", &artifact).await;
    harness
        .create_kustomization("deep", json!({"interval": "10m"}))
        .await;
    harness
        .wait_ready("deep", "True", "ReconciliationSucceeded")
        .await;
    let deepest = harness.config_maps().get("deepest").await.unwrap();
    assert_eq!(deepest.metadata.name.as_deref(), Some("deepest"));
}

/// Errors name what is wrong, not a symptom of it.
#[test]
fn malformed_inputs_are_named_for_what_they_are() {
    // A number where a name must be a string (kustomize would carry it on; no API server
    // would take it).
    let root = tempfile::tempdir().unwrap();
    std::fs::write(
        root.path().join("kustomization.yaml"),
        "resources:\n- cm.yaml\n",
    )
    .unwrap();
    std::fs::write(
        root.path().join("cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: 12345\n",
    )
    .unwrap();
    let error = kustomize::build(root.path(), root.path(), &BuildOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("cm.yaml")
            && error.contains("metadata.name of object 0 (kind ConfigMap) is 12345, not a string"),
        "{error}"
    );

    // SOPS metadata of the wrong shape is invalid metadata, not a missing key.
    use kustomize_controller::sops::{self, Format, Keys};
    let file = "data: ENC[AES256_GCM,data:AA==,iv:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=,tag:AAAAAAAAAAAAAAAAAAAAAA==,type:str]\n\
                sops:\n  age: not-a-list\n  lastmodified: \"2026-11-25T00:00:00Z\"\n  mac: x\n  version: 3.9.0\n";
    let error = sops::decrypt(file.as_bytes(), Format::Yaml, &Keys::new())
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("invalid SOPS metadata: `age` is not a list"),
        "{error}"
    );
}
