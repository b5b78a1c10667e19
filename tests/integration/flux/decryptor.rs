//! Flux's SOPS test (`kustomization_decryptor_test.go`) through the controller: Flux's own
//! `testdata/sops` tree (age and OpenPGP keys; encrypted Secrets, env and plain files of
//! generators, a component, patches) is applied decrypted; a new revision of identical
//! Secrets changes nothing; the `--sops-age-secret` in the runtime namespace decrypts when a
//! Kustomization names no key Secret, and a named one wins over it.
//!
//! Flux's tree also holds a Vault-encrypted Secret, a post-quantum age one and a remote base
//! over HTTPS; this port leaves those three out (Vault transit keys and post-quantum age
//! identities are not supported yet, and there is no network here), as the in-process build
//! test `sops::flux_sops_tree_builds_and_decrypts_end_to_end` does.

use std::path::PathBuf;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::Api;
use serde_json::json;

use super::{applied, events_of, kubeconfig_secret};
use crate::support::artifacts::{Artifact, SourceKind};
use crate::support::controller::Harness;
use crate::support::copy_tree;

fn testdata() -> PathBuf {
    crate::support::repo_root().join("tests/fixtures/sops/flux/internal/controller/testdata/sops")
}

fn key(file: &str) -> String {
    std::fs::read_to_string(testdata().join("keys").join(file)).unwrap()
}

/// Flux's `testdata/sops` (or its `sub` folder) as an artifact, without the Vault object,
/// the post-quantum one and the remote base.
fn publish_tree(harness: &Harness, sub: &str, name: &str, revision: &str) -> Artifact {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&testdata(), dir.path());
    std::fs::write(
        dir.path().join("kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamePrefix: sops-\nresources:\n  - algorithms\n  - envs\n  - files\n  - patches\n  - inside\ncomponents:\n  - ./component\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("algorithms/kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamePrefix: algo-\nresources:\n  - age.yaml\n  - pgp.yaml\n",
    )
    .unwrap();
    harness
        .artifacts
        .publish_dir(&format!("{name}.tar.gz"), revision, &dir.path().join(sub))
}

/// The key Secret Flux's test makes (its Vault token is left out with the Vault object).
async fn key_secret(harness: &Harness, namespace: &str, name: &str) {
    harness
        .cluster
        .apply(&json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": namespace},
            "stringData": {"pgp.asc": key("pgp.asc"), "age.agekey": key("age.txt")}}))
        .await;
}

/// `sops-age-secret` in `namespace`, holding the global age identity.
async fn global_secret(harness: &Harness, namespace: &str) {
    harness
        .cluster
        .apply(&json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "sops-age-secret", "namespace": namespace},
            "stringData": {"identity.agekey": key("age-global.txt")}}))
        .await;
}

fn data(secret: &Secret, key: &str) -> String {
    secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|v| String::from_utf8_lossy(&v.0).into_owned())
        .unwrap_or_default()
}

/// `TestKustomizationReconciler_Decryptor`.
#[tokio::test]
async fn flux_decryptor() {
    let mut harness = Harness::start().await;
    let ns = harness.cluster.namespace.clone();
    kubeconfig_secret(&harness).await;
    let artifact = publish_tree(&harness, "", "sops", "main/sops");
    harness.source("repo", &artifact).await;
    key_secret(&harness, &ns, "sops-keys").await;
    harness
        .create_kustomization(
            "sops",
            json!({"interval": "2m", "path": "./", "prune": false,
                "kubeConfig": {"secretRef": {"name": "kubeconfig"}},
                "decryption": {"provider": "sops", "secretRef": {"name": "sops-keys"}}}),
        )
        .await;
    applied(&harness, "sops", "main/sops").await;

    // decrypts SOPS secrets
    let secrets: Api<Secret> = Api::namespaced(harness.cluster.client.clone(), &ns);
    for name in [
        "sops-algo-age",
        "sops-algo-pgp",
        "sops-component",
        "sops-envs-secret",
        "sops-files-secret",
        "sops-inside-secret",
    ] {
        let secret = secrets.get(name).await.unwrap();
        assert_eq!(data(&secret, "key"), "value", "failed on secret {name}");
    }
    let maps: Api<ConfigMap> = harness.config_maps();
    for name in ["sops-envs-configmap", "sops-files-configmap"] {
        let map = maps.get(name).await.unwrap();
        let value = map.data.as_ref().and_then(|d| d.get("key")).cloned();
        assert_eq!(
            value.as_deref(),
            Some("value"),
            "failed on configmap {name}"
        );
    }
    let patched = secrets.get("sops-patches-secret").await.unwrap();
    assert_eq!(data(&patched, "key"), "merge1");
    assert_eq!(data(&patched, "merge2"), "merge2");

    // does not emit change events for identical secrets
    let same = Artifact {
        revision: "v2.0.0".into(),
        ..artifact.clone()
    };
    harness.source("repo", &same).await;
    applied(&harness, "sops", "v2.0.0").await;
    let events = events_of(
        &harness,
        "sops",
        &[("kustomize.toolkit.fluxcd.io/revision", "v2.0.0")],
    )
    .await;
    let messages: Vec<&str> = events
        .iter()
        .map(|e| e.message.as_deref().unwrap_or(""))
        .collect();
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert!(
        messages[0].contains("Reconciliation finished"),
        "{messages:?}"
    );
    assert!(!messages[0].contains("configured"), "{messages:?}");

    // global SOPS age secret as fallback: Flux points RUNTIME_NAMESPACE at a new namespace
    // holding `sops-age-secret`; here the controller restarts with that runtime namespace.
    let runtime = harness.cluster.create_namespace("global-sops").await;
    global_secret(&harness, &runtime).await;
    harness
        .restart_with(|options| {
            options.reconcile.runtime_namespace = runtime.clone();
            options.reconcile.sops_age_secret = Some("sops-age-secret".into());
        })
        .await;
    let global = publish_tree(&harness, "global", "global-sops", "main/global");
    harness
        .cluster
        .create_source(SourceKind::GitRepository, &ns, "global", Some(&global))
        .await;
    harness
        .create_kustomization(
            "global-sops",
            json!({"interval": "2m", "path": "./", "prune": false,
                "sourceRef": {"kind": "GitRepository", "name": "global"},
                "decryption": {"provider": "sops"}}),
        )
        .await;
    applied(&harness, "global-sops", "main/global").await;
    let secret = secrets.get("global-age-secret").await.unwrap();
    assert_eq!(data(&secret, "key"), "global-value");

    // spec.decryption.secretRef takes precedence over global secret
    key_secret(&harness, &ns, "local-sops").await;
    let algorithms = publish_tree(&harness, "algorithms", "precedence", "main/precedence");
    harness
        .cluster
        .create_source(
            SourceKind::GitRepository,
            &ns,
            "precedence",
            Some(&algorithms),
        )
        .await;
    harness
        .create_kustomization(
            "precedence",
            json!({"interval": "2m", "path": "./", "prune": false,
                "sourceRef": {"kind": "GitRepository", "name": "precedence"},
                "decryption": {"provider": "sops", "secretRef": {"name": "local-sops"}}}),
        )
        .await;
    applied(&harness, "precedence", "main/precedence").await;
    let secret = secrets.get("algo-age").await.unwrap();
    assert_eq!(data(&secret, "key"), "value");
}
