//! The build cache end to end: a reconcile whose inputs are unchanged reuses the objects it
//! built last, without downloading the artifact; a change to any input the build reads (the
//! artifact, `spec.path`, overrides, post-build variables inline or from a ConfigMap) builds
//! again and applies what changed; a decrypting build is built every time.

use std::time::Duration;

use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::support::cluster::wait_for;
use crate::support::controller::Harness;

const SETTINGS: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  greeting: ${greeting}\n  who: ${who}\n";
const OTHER: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\n";

/// How often the artifact server was asked for `file`.
fn downloads(harness: &Harness, file: &str) -> usize {
    harness
        .artifacts
        .requests()
        .iter()
        .filter(|path| path.ends_with(file))
        .count()
}

/// The build cache's hits so far.
fn hits(harness: &Harness) -> f64 {
    harness
        .metrics
        .encode_extra()
        .lines()
        .find(|line| line.starts_with("kustomize_controller_build_cache_hits_total "))
        .and_then(|line| line.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0.0)
}

/// Waits until the applied `settings` ConfigMap holds `key: value`.
async fn until_settings(harness: &Harness, key: &str, value: &str) {
    let applied = wait_for(Duration::from_secs(30), || async {
        let settings = harness.config_maps().get("settings").await.ok()?;
        (settings.data?.get(key).map(String::as_str) == Some(value)).then_some(())
    })
    .await;
    assert!(applied.is_some(), "settings {key}={value} applied");
}

/// A requested reconcile that must reuse the last build: handled, no download, a hit.
async fn reconcile_from_cache(harness: &Harness, token: &str, file: &str) {
    let (before, hits_before) = (downloads(harness, file), hits(harness));
    harness.request_reconcile("cached", token).await;
    harness.wait_handled("cached", token).await;
    assert_eq!(downloads(harness, file), before, "{token}: no download");
    assert!(
        hits(harness) > hits_before,
        "{token}: served from the cache"
    );
}

/// A requested reconcile after an input changed: built again (a download).
async fn rebuilt_after(harness: &Harness, token: &str, file: &str) {
    let before = downloads(harness, file);
    harness.request_reconcile("cached", token).await;
    harness.wait_handled("cached", token).await;
    assert_eq!(downloads(harness, file), before + 1, "{token}: built again");
}

async fn patch_spec(harness: &Harness, spec: serde_json::Value) {
    harness
        .kustomizations()
        .patch(
            "cached",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": spec})),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn unchanged_inputs_reuse_the_last_build_and_any_change_builds_again() {
    let harness = Harness::start().await;
    let ns = harness.cluster.namespace.clone();
    let files = [("app/cm.yaml", SETTINGS), ("other/cm.yaml", OTHER)];
    let first = harness.publish_files("cache-v1", "main@sha1:c1", &files);
    harness.source("repo", &first).await;
    let vars = |greeting: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "vars", "namespace": ns}, "data": {"greeting": greeting}})
    };
    harness.cluster.apply(&vars("hi")).await;
    harness
        .create_kustomization(
            "cached",
            json!({"path": "./app", "postBuild": {
                "substitute": {"who": "world"},
                "substituteFrom": [{"kind": "ConfigMap", "name": "vars"}]}}),
        )
        .await;
    harness
        .wait_ready("cached", "True", "ReconciliationSucceeded")
        .await;
    let v1 = "cache-v1.tar.gz";
    assert_eq!(downloads(&harness, v1), 1);
    reconcile_from_cache(&harness, "unchanged", v1).await;

    // A post-build variable read from a ConfigMap.
    harness.cluster.apply(&vars("bye")).await;
    rebuilt_after(&harness, "variable-from-configmap", v1).await;
    until_settings(&harness, "greeting", "bye").await;
    reconcile_from_cache(&harness, "unchanged-2", v1).await;

    // An inline post-build variable (a spec change reconciles by itself).
    let before = downloads(&harness, v1);
    patch_spec(
        &harness,
        json!({"postBuild": {"substitute": {"who": "you"}}}),
    )
    .await;
    until_settings(&harness, "who", "you").await;
    assert_eq!(downloads(&harness, v1), before + 1, "inline variable");

    // An override: a patch.
    let before = downloads(&harness, v1);
    patch_spec(
        &harness,
        json!({"patches": [{"patch": "- op: add\n  path: /data/patched\n  value: \"yes\"\n",
            "target": {"kind": "ConfigMap", "name": "settings"}}]}),
    )
    .await;
    until_settings(&harness, "patched", "yes").await;
    assert_eq!(downloads(&harness, v1), before + 1, "patches");
    reconcile_from_cache(&harness, "unchanged-3", v1).await;

    // Another path in the same artifact.
    let before = downloads(&harness, v1);
    patch_spec(&harness, json!({"path": "./other", "patches": null})).await;
    let moved = wait_for(Duration::from_secs(30), || async {
        let other = harness.config_maps().get_opt("other").await.ok()??;
        let settings = harness.config_maps().get_opt("settings").await.ok()?;
        settings.is_none().then_some(other)
    })
    .await;
    assert!(moved.is_some(), "the other path applied, the first pruned");
    assert_eq!(downloads(&harness, v1), before + 1, "path");

    // A new artifact.
    let changed = OTHER.replace("name: other", "name: other\ndata:\n  version: \"2\"");
    let second = harness.publish_files(
        "cache-v2",
        "main@sha1:c2",
        &[("app/cm.yaml", SETTINGS), ("other/cm.yaml", &changed)],
    );
    harness.source("repo", &second).await;
    let updated = wait_for(Duration::from_secs(30), || async {
        let other = harness.config_maps().get("other").await.ok()?;
        (other.data?.get("version").map(String::as_str) == Some("2")).then_some(())
    })
    .await;
    assert!(updated.is_some(), "the new artifact applied");
    assert_eq!(downloads(&harness, "cache-v2.tar.gz"), 1);
    reconcile_from_cache(&harness, "unchanged-4", "cache-v2.tar.gz").await;
}

#[tokio::test]
async fn decrypting_builds_are_built_every_time() {
    let harness = Harness::start().await;
    let encrypted = harness.age_encrypted_secret_and_keys().await;
    let artifact = harness.publish_files(
        "cache-sops",
        "main@sha1:5005",
        &[("secret.yaml", &encrypted)],
    );
    harness.source("repo", &artifact).await;
    harness
        .create_kustomization(
            "cached",
            json!({"decryption": {"provider": "sops", "secretRef": {"name": "sops-keys"}}}),
        )
        .await;
    harness
        .wait_ready("cached", "True", "ReconciliationSucceeded")
        .await;
    for token in ["again", "and-again"] {
        rebuilt_after(&harness, token, "cache-sops.tar.gz").await;
    }
    assert_eq!(hits(&harness), 0.0, "never served from the cache");
}
