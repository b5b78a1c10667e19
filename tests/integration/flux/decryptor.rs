//! Flux's SOPS test (`kustomization_decryptor_test.go`) through the controller: Flux's own
//! `testdata/sops` tree (age and OpenPGP keys; encrypted Secrets, env and plain files of
//! generators, a component, patches) is applied decrypted; a new revision of identical
//! Secrets changes nothing; the `--sops-age-secret` in the runtime namespace decrypts when a
//! Kustomization names no key Secret, and a named one wins over it.
//!
//! Flux's test encrypts `algorithms/vault.yaml` with the sops CLI and a Vault dev server's
//! transit engine when it starts; here OpenBao's dev server (`bao server -dev`) wraps the
//! data key of Flux's OpenPGP-encrypted Secret the same way, and the Secret's
//! `sops.vault-token` opens it. Flux's tree also holds a post-quantum age Secret and a remote
//! base over HTTPS; this port leaves those two out (post-quantum age identities are not
//! supported yet, and there is no network here).

use std::path::PathBuf;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::Api;
use serde_json::json;

use super::{applied, events_through, kubeconfig_secret};
use crate::support::artifacts::{Artifact, SourceKind};
use crate::support::controller::Harness;
use crate::support::copy_tree;
use crate::support::key_services::{Gpg, openbao, transit_encrypt};
use kustomize_controller::yaml::{Schema, parse_single};

fn testdata() -> PathBuf {
    crate::support::repo_root().join("tests/fixtures/sops/flux/internal/controller/testdata/sops")
}

fn key(file: &str) -> String {
    std::fs::read_to_string(testdata().join("keys").join(file)).unwrap()
}

/// Flux's `algorithms/vault.yaml`: its OpenPGP Secret (`pgp`) renamed `vault`, the data key
/// that GnuPG opens wrapped by the transit key `sops/keys/vault` of `bao`, as Flux's test
/// makes it with the sops CLI.
fn vault_object(bao_url: &str) -> String {
    let gpg = Gpg::new();
    gpg.import(&testdata().join("keys/pgp.asc"));
    let text = std::fs::read_to_string(testdata().join("algorithms/pgp.yaml")).unwrap();
    let mut object = serde_json::Value::from(parse_single(&text, Schema::Kyaml).unwrap());
    let data_key = gpg.decrypt(object["sops"]["pgp"][0]["enc"].as_str().unwrap());
    object["metadata"]["name"] = json!("vault");
    object["sops"]["pgp"] = json!([]);
    object["sops"]["hc_vault"] = json!([{
        "vault_address": bao_url, "engine_path": "sops", "key_name": "vault",
        "created_at": "2026-11-25T00:00:00Z",
        "enc": transit_encrypt(bao_url, "sops", "vault", &data_key)}]);
    // JSON is YAML.
    object.to_string()
}

/// Flux's `testdata/sops` (or its `sub` folder) as an artifact, with the Vault object when
/// given, without the post-quantum one and the remote base.
fn publish_tree(
    harness: &Harness,
    sub: &str,
    name: &str,
    revision: &str,
    vault: Option<&str>,
) -> Artifact {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&testdata(), dir.path());
    let vault_resource = match vault {
        Some(object) => {
            std::fs::write(dir.path().join("algorithms/vault.yaml"), object).unwrap();
            "  - vault.yaml\n"
        }
        None => "",
    };
    std::fs::write(
        dir.path().join("kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamePrefix: sops-\nresources:\n  - algorithms\n  - envs\n  - files\n  - patches\n  - inside\ncomponents:\n  - ./component\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("algorithms/kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamePrefix: algo-\nresources:\n  - age.yaml\n  - pgp.yaml\n{vault_resource}"
        ),
    )
    .unwrap();
    harness
        .artifacts
        .publish_dir(&format!("{name}.tar.gz"), revision, &dir.path().join(sub))
}

/// The key Secret Flux's test makes, with the dev server's root token.
async fn key_secret(harness: &Harness, namespace: &str, name: &str) {
    harness
        .cluster
        .apply(&json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": namespace},
            "stringData": {"pgp.asc": key("pgp.asc"), "age.agekey": key("age.txt"),
                "sops.vault-token": "root"}}))
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
    let bao = openbao();
    let bao_url = bao.url.clone();
    // GnuPG and the blocking HTTP client stay off the async runtime.
    let vault = tokio::task::spawn_blocking(move || vault_object(&bao_url))
        .await
        .unwrap();
    let artifact = publish_tree(&harness, "", "sops", "main/sops", Some(&vault));
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
        "sops-algo-vault",
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
    let events = events_through(
        &harness,
        "sops",
        &[("kustomize.toolkit.fluxcd.io/revision", "v2.0.0")],
        |e| e.reason.as_deref() == Some("ReconciliationSucceeded"),
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
    let global = publish_tree(&harness, "global", "global-sops", "main/global", None);
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
    let algorithms = publish_tree(
        &harness,
        "algorithms",
        "precedence",
        "main/precedence",
        None,
    );
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
