//! Beyond Flux: drift detection without correction (`kustomize-controller.rs/drift-detection:
//! warn`). An interval or requested reconciliation of what was applied reports drift in the
//! `Drifted` condition, a Warning event and a gauge, and corrects nothing; a new revision
//! applies as usual; switching warn mode off corrects the drift at once.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Event, Secret};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;

use crate::support::cluster::wait_for;
use crate::support::controller::Harness;

const MODE: &str = "kustomize-controller.rs/drift-detection";

fn manifests(extra: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  k: from-git\n  tuned: from-git\n  extra: \"{extra}\"\n---\n\
         apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: once\n  annotations:\n    kustomize.toolkit.fluxcd.io/ssa: IfNotPresent\ndata:\n  k: v\n---\n\
         apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: handed-over\ndata:\n  k: v\n---\n\
         apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\ndata:\n  k: v\n---\n\
         apiVersion: v1\nkind: Secret\nmetadata:\n  name: token\nstringData:\n  token: from-git-secret\n"
    )
}

async fn set_mode(harness: &Harness, name: &str, mode: Option<&str>) {
    harness
        .kustomizations()
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {MODE: mode}}})),
        )
        .await
        .unwrap();
}

fn condition(
    object: &kustomize_controller::api::Kustomization,
    type_: &str,
) -> Option<(String, String, String)> {
    object
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// The gauge line for `name`, from `/metrics/extra`.
fn drifted_gauge(harness: &Harness, name: &str) -> Option<String> {
    harness
        .metrics
        .encode_extra()
        .lines()
        .find(|line| {
            line.starts_with("kustomize_controller_drifted_objects{")
                && line.contains(&format!("name=\"{name}\""))
        })
        .map(|line| line.rsplit(' ').next().unwrap_or("").to_string())
}

/// Edits `data.k` of `settings`, its ignored `data.tuned`, the `IfNotPresent` ConfigMap, one
/// taken over with `ssa: Ignore` on the live object, and the Secret's value.
async fn edit_by_hand(harness: &Harness) {
    let maps = harness.config_maps();
    maps.patch(
        "settings",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "by-hand", "tuned": "by-hand"}})),
    )
    .await
    .unwrap();
    maps.patch(
        "once",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "by-hand"}})),
    )
    .await
    .unwrap();
    // Taken over by hand, as Flux lets a user do on the live object.
    maps.patch(
        "handed-over",
        &PatchParams::default(),
        &Patch::Merge(
            json!({"metadata": {"annotations": {"kustomize.toolkit.fluxcd.io/ssa": "Ignore"}},
            "data": {"k": "by-hand"}}),
        ),
    )
    .await
    .unwrap();
    let secrets: Api<Secret> =
        Api::namespaced(harness.cluster.client.clone(), &harness.cluster.namespace);
    secrets
        .patch(
            "token",
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"token": "hand-made-secret"}})),
        )
        .await
        .unwrap();
}

/// What `kustomize-controller diff` prints for the Kustomization `name` and `manifests`.
async fn local_diff(harness: &Harness, name: &str, manifests: &str) -> String {
    let local = tempfile::tempdir().unwrap();
    std::fs::write(local.path().join("all.yaml"), manifests).unwrap();
    let output = harness.diff(name, local.path()).await;
    assert_eq!(
        output.status.code(),
        Some(1),
        "differences exit 1: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Waits until `data.k` of `settings` is back to what the source says.
async fn drift_corrected(harness: &Harness) -> bool {
    wait_for(Duration::from_secs(30), || async {
        (data_k(harness).await == "from-git").then_some(())
    })
    .await
    .is_some()
}

async fn data_k(harness: &Harness) -> String {
    let map: ConfigMap = harness.config_maps().get("settings").await.unwrap();
    map.data.unwrap_or_default()["k"].clone()
}

#[tokio::test]
async fn warn_mode_reports_drift_corrects_nothing_and_switching_it_off_corrects_it() {
    let harness = Harness::start().await;
    let ns = harness.cluster.namespace.clone();
    let v1 = harness.publish_files("warn-1", "main@sha1:1111", &[("all.yaml", &manifests("1"))]);
    harness.source("repo", &v1).await;
    // spec.ignore and the ssa annotation apply as usual: what they leave out is no drift.
    let ignore = json!({"ignore": [{"paths": ["/data/tuned"], "target": {"kind": "ConfigMap", "name": "settings"}}]});
    harness.create_kustomization("watched", ignore).await;
    set_mode(&harness, "watched", Some("warn")).await;
    let applied = harness
        .wait_ready("watched", "True", "ReconciliationSucceeded")
        .await;
    // The first reconciliation is a new revision: applied, nothing left drifted.
    let first = wait_for(Duration::from_secs(30), || async {
        let object = harness.kustomizations().get("watched").await.ok()?;
        condition(&object, "Drifted").filter(|c| c.0 == "False")
    })
    .await
    .unwrap_or_else(|| panic!("Drifted=False after the first apply: {:?}", applied.status));
    assert_eq!(first.1, "NoDriftDetected");

    // Edits by hand and a deleted object: reported, not corrected.
    edit_by_hand(&harness).await;
    harness
        .config_maps()
        .delete("other", &DeleteParams::default())
        .await
        .unwrap();
    harness.request_reconcile("watched", "look-1").await;
    harness.wait_handled("watched", "look-1").await;
    let object = harness.kustomizations().get("watched").await.unwrap();
    let (status, reason, message) = condition(&object, "Drifted").expect("a Drifted condition");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", "DriftDetected")
    );
    assert_eq!(
        message,
        format!(
            "3 objects drifted, not corrected (drift detection mode warn): ConfigMap/{ns}/other, ConfigMap/{ns}/settings, Secret/{ns}/token"
        )
    );
    assert_eq!(
        condition(&object, "Ready").map(|c| c.0),
        Some("True".into())
    );
    assert_eq!(
        data_k(&harness).await,
        "by-hand",
        "warn mode corrects nothing"
    );
    assert!(
        harness
            .config_maps()
            .get_opt("other")
            .await
            .unwrap()
            .is_none(),
        "a deleted object is not recreated"
    );
    assert_eq!(drifted_gauge(&harness, "watched").as_deref(), Some("3"));
    let events: Api<Event> = Api::namespaced(harness.cluster.client.clone(), &ns);
    let event = wait_for(Duration::from_secs(10), || async {
        let list = events.list(&Default::default()).await.ok()?;
        list.items.into_iter().find(|e| {
            e.involved_object.name.as_deref() == Some("watched")
                && e.reason.as_deref() == Some("DriftDetected")
        })
    })
    .await
    .expect("a DriftDetected event");
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    let text = event.message.unwrap_or_default();
    assert!(
        text.contains(&format!("ConfigMap/{ns}/other missing")),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "ConfigMap/{ns}/settings drifted\n  replace /data/k: \"by-hand\" -> \"from-git\""
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("Secret/{ns}/token drifted\n  replace /data/token")),
        "{text}"
    );
    for left_alone in ["/data/tuned", "/once", "/handed-over"] {
        assert!(!text.contains(left_alone), "{left_alone} in {text}");
    }
    for secret in [
        "hand-made-secret",
        "from-git-secret",
        "aGFuZC1tYWRlLXNlY3JldA",
        "ZnJvbS1naXQtc2VjcmV0",
    ] {
        assert!(
            !text.contains(secret),
            "a Secret's value in the event: {text}"
        );
    }

    // `diff` shows the same drift locally, from the same manifests.
    let shown = local_diff(&harness, "watched", &manifests("1")).await;
    for line in [
        format!("► ConfigMap/{ns}/other created"),
        format!("► ConfigMap/{ns}/settings drifted"),
        format!("► Secret/{ns}/token drifted"),
    ] {
        assert!(shown.contains(&line), "{line} in {shown}");
    }
    assert_eq!(shown.matches("► ").count(), 3, "{shown}");

    // A new revision is the GitOps change: it applies, and nothing is left drifted.
    let v2 = harness.publish_files("warn-2", "main@sha1:2222", &[("all.yaml", &manifests("2"))]);
    harness.source("repo", &v2).await;
    let corrected = wait_for(Duration::from_secs(30), || async {
        let object = harness.kustomizations().get("watched").await.ok()?;
        let status = object.status.as_ref()?;
        (status.last_applied_revision.as_deref() == Some("main@sha1:2222")).then_some(object)
    })
    .await
    .expect("the new revision applied");
    assert_eq!(
        condition(&corrected, "Drifted").map(|c| (c.0, c.1)),
        Some(("False".into(), "NoDriftDetected".into()))
    );
    assert_eq!(data_k(&harness).await, "from-git");
    assert!(
        harness
            .config_maps()
            .get_opt("other")
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(drifted_gauge(&harness, "watched").as_deref(), Some("0"));

    // Drift again, then warn mode off: the next reconciliation (the annotation's change
    // triggers it) corrects it, and the condition and gauge go.
    edit_by_hand(&harness).await;
    harness.request_reconcile("watched", "look-2").await;
    harness.wait_handled("watched", "look-2").await;
    assert_eq!(data_k(&harness).await, "by-hand");
    set_mode(&harness, "watched", None).await;
    assert!(
        drift_corrected(&harness).await,
        "switching warn mode off corrects the drift"
    );
    let cleared = wait_for(Duration::from_secs(30), || async {
        let object = harness.kustomizations().get("watched").await.ok()?;
        condition(&object, "Drifted").is_none().then_some(())
    })
    .await;
    assert!(
        cleared.is_some(),
        "no Drifted condition once drift is corrected"
    );
    assert_eq!(drifted_gauge(&harness, "watched"), None);
}

#[tokio::test]
async fn an_unknown_drift_mode_stalls_and_the_gate_turns_warn_mode_off() {
    let harness = Harness::start_with(|options| options.reconcile.drift_warn_mode = false).await;
    let v1 = harness.publish_files("gate-1", "main@sha1:1111", &[("all.yaml", &manifests("1"))]);
    harness.source("repo", &v1).await;
    harness.create_kustomization("gated", json!({})).await;
    set_mode(&harness, "gated", Some("warn")).await;
    harness
        .wait_ready("gated", "True", "ReconciliationSucceeded")
        .await;
    edit_by_hand(&harness).await;
    harness.request_reconcile("gated", "look").await;
    harness.wait_handled("gated", "look").await;
    assert!(
        drift_corrected(&harness).await,
        "with the gate off, drift is corrected as in Flux"
    );
    let object = harness.kustomizations().get("gated").await.unwrap();
    assert_eq!(condition(&object, "Drifted"), None);

    let mut harness = harness;
    harness.restart_with(|_| {}).await;
    set_mode(&harness, "gated", Some("detect")).await;
    let stalled = harness
        .wait_ready("gated", "False", "InvalidDriftDetectionMode")
        .await;
    let (status, _, message) = condition(&stalled, "Stalled").expect("Stalled");
    assert_eq!(status, "True");
    assert!(
        message.contains(MODE) && message.contains("\"detect\""),
        "{message}"
    );
}
