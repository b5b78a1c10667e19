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
        limits: Limits {
            max_depth: 50,
            ..Default::default()
        },
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
        limits: Limits {
            max_depth: 60,
            ..Default::default()
        },
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

/// Bases that each include the next twice (under two prefixes) double their objects at
/// every level: the build stops at its object limit, naming the file.
fn diamond(root: &Path, levels: usize) -> std::path::PathBuf {
    for level in 0..levels {
        let dir = root.join(format!("d{level}"));
        for side in ["a", "b"] {
            std::fs::create_dir_all(dir.join(side)).unwrap();
            std::fs::write(
                dir.join(side).join("kustomization.yaml"),
                format!("namePrefix: {side}-\nresources:\n- ../../d{}\n", level + 1),
            )
            .unwrap();
        }
        std::fs::write(dir.join("kustomization.yaml"), "resources:\n- a\n- b\n").unwrap();
    }
    let leaf = root.join(format!("d{levels}"));
    std::fs::create_dir_all(&leaf).unwrap();
    std::fs::write(leaf.join("kustomization.yaml"), "resources:\n- cm.yaml\n").unwrap();
    std::fs::write(
        leaf.join("cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: leaf\n",
    )
    .unwrap();
    root.join("d0")
}

#[test]
fn diamonds_of_bases_stop_at_the_object_limit() {
    let root = tempfile::tempdir().unwrap();
    let top = diamond(root.path(), 12);
    let options = BuildOptions {
        limits: Limits {
            max_objects: 1_000,
            ..Default::default()
        },
        ..Default::default()
    };
    let error = kustomize::build(root.path(), &top, &options).unwrap_err();
    assert!(
        matches!(&error, KustomizeError::TooManyObjects { limit: 1_000, count, .. } if *count > 1_000),
        "{error}"
    );
    assert!(error.to_string().contains("kustomization.yaml"), "{error}");
    let small = tempfile::tempdir().unwrap();
    let top = diamond(small.path(), 6);
    assert_eq!(
        kustomize::build(small.path(), &top, &options)
            .unwrap()
            .len(),
        64
    );
}

/// JSON patch `copy` operations that each double a value stop at the object size limit.
#[test]
fn doubling_patches_stop_at_the_object_size_limit() {
    let root = tempfile::tempdir().unwrap();
    let mut operations =
        String::from("- op: add\n  path: /data/v0\n  value: 0123456789abcdef0123456789abcdef\n");
    for step in 1..=40 {
        operations.push_str(&format!(
            "- op: add\n  path: /data/v{step}\n  value: {{}}\n- op: copy\n  from: /data/v{}\n  path: /data/v{step}/x\n- op: copy\n  from: /data/v{}\n  path: /data/v{step}/y\n",
            step - 1,
            step - 1
        ));
    }
    std::fs::write(root.path().join("patch.yaml"), operations).unwrap();
    std::fs::write(
        root.path().join("cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: grows\ndata: {}\n",
    )
    .unwrap();
    std::fs::write(
        root.path().join("kustomization.yaml"),
        "resources:\n- cm.yaml\npatches:\n- path: patch.yaml\n  target: {kind: ConfigMap}\n",
    )
    .unwrap();
    let error = kustomize::build(root.path(), root.path(), &BuildOptions::default())
        .unwrap_err()
        .to_string();
    assert!(error.contains("grows past 64 MiB"), "{error}");
    assert!(
        error.contains("patch.yaml") || error.contains("kustomization.yaml"),
        "{error}"
    );
}

/// An age header with thousands of recipient stanzas (the age crate's work grows with the
/// square of their number) is refused before it is read.
#[test]
fn age_headers_with_thousands_of_stanzas_are_refused() {
    use base64::Engine;
    use kustomize_controller::sops::{self, Format, Keys};
    let armored_with = |stanzas: usize| {
        let mut header = String::from("age-encryption.org/v1\n");
        for _ in 0..stanzas {
            header.push_str("-> X25519 AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n");
            header.push_str("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n");
        }
        header.push_str("--- AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n");
        let body = base64::engine::general_purpose::STANDARD.encode(header.as_bytes());
        format!(
            "-----BEGIN AGE ENCRYPTED FILE-----\n{}\n-----END AGE ENCRYPTED FILE-----\n",
            body.as_bytes()
                .chunks(64)
                .map(|c| std::str::from_utf8(c).unwrap())
                .collect::<Vec<_>>()
                .join("\n")
        )
    };
    for (stanzas, says) in [
        (2_000, "bytes, more than 65536"),
        (100, "100 recipient stanzas, more than 64"),
    ] {
        let file = serde_json::json!({
            "data": "ENC[AES256_GCM,data:AA==,iv:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=,tag:AAAAAAAAAAAAAAAAAAAAAA==,type:str]",
            "sops": {"age": [{"recipient": "age1x", "enc": armored_with(stanzas)}],
                     "lastmodified": "2026-11-25T00:00:00Z", "mac": "x", "version": "3.9.0"}
        });
        let error = sops::decrypt(file.to_string().as_bytes(), Format::Json, &Keys::new())
            .unwrap_err()
            .to_string();
        assert!(error.contains(says), "{stanzas}: {error}");
    }
}

/// Generators may name many files, each under the per-file limit: what one build reads in
/// all is bounded too.
#[test]
fn generators_reading_many_files_stop_at_the_read_budget() {
    let root = tempfile::tempdir().unwrap();
    let mut files = String::new();
    for index in 0..20 {
        std::fs::write(
            root.path().join(format!("f{index}.txt")),
            vec![b'x'; 10_000],
        )
        .unwrap();
        files.push_str(&format!("  - f{index}.txt\n"));
    }
    std::fs::write(
        root.path().join("kustomization.yaml"),
        format!("configMapGenerator:\n- name: many\n  files:\n{files}"),
    )
    .unwrap();
    let options = |max_read_bytes| BuildOptions {
        limits: Limits {
            max_read_bytes,
            ..Default::default()
        },
        ..Default::default()
    };
    let error = kustomize::build(root.path(), root.path(), &options(100_000))
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("read all the file bytes its limit allows"),
        "{error}"
    );
    assert!(error.contains(".txt"), "{error}");
    assert_eq!(
        kustomize::build(root.path(), root.path(), &options(1_000_000))
            .unwrap()
            .len(),
        1
    );
}
