//! Flux's tests of how objects are applied and tracked: staged apply of a CRD with its
//! instances (`kustomization_controller_test.go`), drift ignore rules, force, the inventory,
//! deletion policies, origin revisions and `$patch: delete` patches.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::{applied, condition, events_of, gone, kstatus_check, kubeconfig_secret};
use crate::support::cluster::wait_for;
use crate::support::controller::Harness;

/// `TestKustomizationReconciler_StagedApply`: a CRD, an instance of it and the Namespace the
/// instance lives in, in one artifact, are applied in stages and reconcile at once; deleting
/// the Kustomization finalizes it.
#[tokio::test]
async fn flux_staged_apply() {
    let harness = Harness::start().await;
    kubeconfig_secret(&harness).await;
    let namespace = crate::support::cluster::unique("sptribs");
    let crd = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: namespaces.servicebus.azure.com\nspec:\n  group: servicebus.azure.com\n  names:\n    kind: Namespace\n    listKind: NamespaceList\n    plural: namespaces\n    singular: namespace\n  scope: Namespaced\n  versions:\n    - additionalPrinterColumns:\n        - jsonPath: .spec.type\n          name: TYPE\n          type: string\n      name: v1beta20210101preview\n      schema:\n        openAPIV3Schema:\n          properties:\n            apiVersion:\n              type: string\n            kind:\n              type: string\n            metadata:\n              type: object\n            spec:\n              properties:\n                type:\n                  type: string\n                  enum:\n                    - unit\n                    - integration\n                valuesFrom:\n                  type: string\n              type: object\n            status:\n              default:\n                observedGeneration: -1\n              properties:\n                observedGeneration:\n                  format: int64\n                  type: integer\n              type: object\n          type: object\n      served: true\n      storage: true\n      subresources:\n        status: {}\n";
    let instances = format!(
        "---\napiVersion: servicebus.azure.com/v1beta20210101preview\nkind: Namespace\nmetadata:\n  annotations:\n    serviceoperator.azure.com/reconcile-policy: detach-on-delete\n  name: sptribs-servicebus-preview\n  namespace: {namespace}\nspec:\n  type: integration\n  valuesFrom: test-config\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  labels:\n    slackChannel: special-tribunals-builds\n  name: {namespace}\n"
    );
    let files = [("crd.yaml", format!("{crd}---\n{instances}"))];
    let files: Vec<(&str, &str)> = files.iter().map(|(n, t)| (*n, t.as_str())).collect();
    let revision = "main/ab12cd34";
    let artifact = harness.publish_files("crds", revision, &files);
    harness.source("repo", &artifact).await;
    harness
        .create_kustomization(
            "test-kust",
            json!({"kubeConfig": {"secretRef": {"name": "kubeconfig"}}, "targetNamespace": null}),
        )
        .await;
    let ready = applied(&harness, "test-kust", revision).await;
    assert_eq!(
        condition(&ready, "Ready").unwrap().status,
        "True",
        "{:#?}",
        ready.status
    );
    assert_eq!(
        ready
            .status
            .as_ref()
            .unwrap()
            .last_attempted_revision
            .as_deref(),
        Some(revision)
    );
    harness
        .kustomizations()
        .delete("test-kust", &Default::default())
        .await
        .unwrap();
    gone(&harness, "test-kust").await;
}

/// `TestKustomizationReconciler_DriftIgnoreRules`: a field under `spec.ignore` keeps an
/// out-of-band change across new revisions, while a change to another field is reverted.
#[tokio::test]
async fn flux_drift_ignore_rules() {
    let harness = Harness::start().await;
    kubeconfig_secret(&harness).await;
    let manifests = |data: &str| {
        format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: drift-ignore\ndata:\n  managed-key: \"{data}\"\n  ignored-key: \"original\"\n"
        )
    };
    let publish = |revision: &str, data: &str| {
        harness.publish_files(
            &format!("drift-{revision}"),
            revision,
            &[("configmap.yaml", manifests(data).as_str())],
        )
    };
    harness.source("repo", &publish("v1.0.0", "v1")).await;
    harness
        .create_kustomization(
            "drift",
            json!({"kubeConfig": {"secretRef": {"name": "kubeconfig"}}, "force": false,
                "ignore": [{"paths": ["/data/ignored-key"]}]}),
        )
        .await;
    let maps: Api<ConfigMap> = harness.config_maps();
    let data = |map: ConfigMap| map.data.unwrap_or_default();

    // creates configmap with initial data
    kstatus_check(&applied(&harness, "drift", "v1.0.0").await);
    let live = data(maps.get("drift-ignore").await.unwrap());
    assert_eq!(live["managed-key"], "v1");
    assert_eq!(live["ignored-key"], "original");

    // out-of-band change to ignored field is preserved on re-reconcile
    maps.patch(
        "drift-ignore",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"ignored-key": "modified-externally"}})),
    )
    .await
    .unwrap();
    harness.source("repo", &publish("v2.0.0", "v2")).await;
    kstatus_check(&applied(&harness, "drift", "v2.0.0").await);
    let live = data(maps.get("drift-ignore").await.unwrap());
    assert_eq!(live["managed-key"], "v2");
    assert_eq!(live["ignored-key"], "modified-externally");

    // non-ignored field change is reverted on re-reconcile
    maps.patch(
        "drift-ignore",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"managed-key": "tampered"}})),
    )
    .await
    .unwrap();
    harness.source("repo", &publish("v3.0.0", "v3")).await;
    kstatus_check(&applied(&harness, "drift", "v3.0.0").await);
    let live = data(maps.get("drift-ignore").await.unwrap());
    assert_eq!(live["managed-key"], "v3");
    assert_eq!(live["ignored-key"], "modified-externally");
}

/// `TestKustomizationReconciler_Force`: an immutable Secret is created; changing it fails
/// (with a Warning event naming the immutable field, for that revision); with `spec.force`
/// it is recreated and the health check of it passes.
#[tokio::test]
async fn flux_force() {
    let harness = Harness::start().await;
    let ns = harness.cluster.namespace.clone();
    kubeconfig_secret(&harness).await;
    let publish = |revision: &str, data: &str| {
        let secret = format!(
            "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: force\nimmutable: true\nstringData:\n  key: \"{data}\"\n"
        );
        harness.publish_files(
            &format!("force-{revision}"),
            revision,
            &[("secret.yaml", secret.as_str())],
        )
    };
    harness.source("repo", &publish("v1.0.0", "abcde")).await;
    harness
        .create_kustomization(
            "force",
            json!({"kubeConfig": {"secretRef": {"name": "kubeconfig"}}, "force": false,
                "healthChecks": [{"apiVersion": "v1", "kind": "Secret", "name": "force", "namespace": ns}]}),
        )
        .await;

    // creates immutable secret
    kstatus_check(&applied(&harness, "force", "v1.0.0").await);
    let secrets: Api<Secret> = Api::namespaced(harness.cluster.client.clone(), &ns);
    assert!(secrets.get_opt("force").await.unwrap().is_some());

    // fails to update immutable secret
    harness.source("repo", &publish("v2.0.0", "fghij")).await;
    let failed = harness
        .wait_ready("force", "False", "ReconciliationFailed")
        .await;
    kstatus_check(&failed);
    // emits validation error event
    let events = wait_for(Duration::from_secs(10), || async {
        let found = events_of(
            &harness,
            "force",
            &[("kustomize.toolkit.fluxcd.io/revision", "v2.0.0")],
        )
        .await;
        (!found.is_empty()).then_some(found)
    })
    .await
    .expect("an event for v2.0.0");
    assert_eq!(events[0].type_.as_deref(), Some("Warning"));
    assert!(
        events[0]
            .message
            .as_deref()
            .unwrap_or("")
            .contains("field is immutable"),
        "{:?}",
        events[0].message
    );

    // recreates immutable secret
    harness.source("repo", &publish("v3.0.0", "klmno")).await;
    harness
        .kustomizations()
        .patch(
            "force",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"force": true}})),
        )
        .await
        .unwrap();
    let ready = applied(&harness, "force", "v3.0.0").await;
    kstatus_check(&ready);
    assert_eq!(condition(&ready, "Ready").unwrap().status, "True");
    assert_eq!(condition(&ready, "Healthy").unwrap().status, "True");
}

/// `TestKustomizationReconciler_Inventory`: the inventory lists what was applied; an object
/// annotated `kustomize.toolkit.fluxcd.io/reconcile: disabled` keeps its drift, and gets
/// corrected once enabled again; renamed objects replace the old ones in the inventory, the
/// old ones pruned unless reconciliation of them is disabled.
#[tokio::test]
async fn flux_inventory() {
    let harness = Harness::start().await;
    let ns = harness.cluster.namespace.clone();
    kubeconfig_secret(&harness).await;
    let manifests = |name: &str, data: &str| {
        format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: \"{name}\"\ndata:\n  key: \"{data}\"\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: \"{name}\"\nstringData:\n  key: \"{data}\"\n"
        )
    };
    let publish = |revision: &str, name: &str| {
        harness.publish_files(
            &format!("inv-{revision}"),
            revision,
            &[("config.yaml", manifests(name, "inv").as_str())],
        )
    };
    harness.source("repo", &publish("v1.0.0", "inv")).await;
    harness
        .create_kustomization(
            "inv",
            json!({"interval": "2m", "kubeConfig": {"secretRef": {"name": "kubeconfig"}},
                "timeout": "1s", "wait": true}),
        )
        .await;
    let ready = applied(&harness, "inv", "v1.0.0").await;
    assert_eq!(condition(&ready, "Ready").unwrap().status, "True");
    let entries = |object: &kustomize_controller::api::Kustomization| {
        let mut entries: Vec<(String, String)> = object
            .status
            .as_ref()
            .and_then(|s| s.inventory.as_ref())
            .map(|i| {
                i.entries
                    .iter()
                    .map(|e| (e.id.clone(), e.version.clone()))
                    .collect()
            })
            .unwrap_or_default();
        entries.sort();
        entries
    };
    let maps: Api<ConfigMap> = harness.config_maps();
    let secrets: Api<Secret> = Api::namespaced(harness.cluster.client.clone(), &ns);

    // creates resources
    let secret = secrets.get("inv").await.unwrap();
    assert_eq!(secret.data.unwrap()["key"].0, b"inv");
    assert_eq!(maps.get("inv").await.unwrap().data.unwrap()["key"], "inv");
    assert_eq!(
        entries(&ready),
        [
            (format!("{ns}_inv__ConfigMap"), "v1".to_string()),
            (format!("{ns}_inv__Secret"), "v1".to_string()),
        ]
    );

    let set_reconcile = |value: &'static str, data: Option<&'static str>| {
        let maps = maps.clone();
        async move {
            let mut patch = json!({"metadata": {"annotations": {"kustomize.toolkit.fluxcd.io/reconcile": value}}});
            if let Some(data) = data {
                patch["data"] = json!({"key": data});
            }
            maps.patch("inv", &PatchParams::default(), &Patch::Merge(patch))
                .await
                .unwrap();
        }
    };

    // ignores drift
    set_reconcile("disabled", Some("test")).await;
    harness.source("repo", &publish("v1.0.0-1", "inv")).await;
    let ready = applied(&harness, "inv", "v1.0.0-1").await;
    assert_eq!(condition(&ready, "Ready").unwrap().status, "True");
    assert_eq!(maps.get("inv").await.unwrap().data.unwrap()["key"], "test");

    // corrects drift
    set_reconcile("enabled", None).await;
    harness.source("repo", &publish("v1.0.0-2", "inv")).await;
    let ready = applied(&harness, "inv", "v1.0.0-2").await;
    assert_eq!(condition(&ready, "Ready").unwrap().status, "True");
    assert_eq!(maps.get("inv").await.unwrap().data.unwrap()["key"], "inv");

    // renames resources
    set_reconcile("disabled", None).await;
    harness
        .source("repo", &publish("v1.0.0-3", "inv-renamed"))
        .await;
    let ready = applied(&harness, "inv", "v1.0.0-3").await;
    assert_eq!(condition(&ready, "Ready").unwrap().status, "True");
    assert_eq!(
        entries(&ready),
        [
            (format!("{ns}_inv-renamed__ConfigMap"), "v1".to_string()),
            (format!("{ns}_inv-renamed__Secret"), "v1".to_string()),
        ]
    );
    assert!(
        secrets.get_opt("inv").await.unwrap().is_none(),
        "the old Secret is pruned"
    );
    assert_eq!(
        maps.get("inv").await.unwrap().data.unwrap()["key"],
        "inv",
        "the old ConfigMap, reconcile disabled, is kept"
    );
}

/// `TestKustomizationReconciler_DeletionPolicyDelete`: on deletion, `deletionPolicy`
/// overrides `prune` (Delete and WaitForTermination delete, Orphan keeps) or mirrors it.
#[tokio::test]
async fn flux_deletion_policy_delete() {
    let harness = Harness::start().await;
    kubeconfig_secret(&harness).await;
    let cases = [
        ("delete", false, "Delete", true),
        ("wait", false, "WaitForTermination", true),
        ("mirror-on", true, "MirrorPrune", true),
        ("orphan", true, "Orphan", false),
        ("mirror-off", false, "MirrorPrune", false),
    ];
    let config =
        "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: gc\ndata:\n  key: \"gc\"\n";
    let artifact = harness.publish_files("gc", "v1.0.0", &[("config.yaml", config)]);
    harness.source("repo", &artifact).await;
    let maps: Api<ConfigMap> = harness.config_maps();
    for (name, prune, policy, want_delete) in cases {
        harness
            .create_kustomization(
                name,
                json!({"kubeConfig": {"secretRef": {"name": "kubeconfig"}}, "namePrefix": format!("{name}-"),
                    "prune": prune, "deletionPolicy": policy, "timeout": "5s"}),
            )
            .await;
        applied(&harness, name, "v1.0.0").await;
        let map = format!("{name}-gc");
        assert!(maps.get_opt(&map).await.unwrap().is_some());
        harness
            .kustomizations()
            .delete(name, &Default::default())
            .await
            .unwrap();
        gone(&harness, name).await;
        assert_eq!(
            maps.get_opt(&map).await.unwrap().is_none(),
            want_delete,
            "prune {prune}, deletionPolicy {policy}"
        );
    }
}

/// `TestKustomizationReconciler_OriginRevision`: the origin revision in the artifact's
/// metadata is recorded in the status, the history entry and every event.
#[tokio::test]
async fn flux_origin_revision() {
    let harness = Harness::start().await;
    let secret = "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: origin\nstringData:\n  key: \"abcde\"\n";
    let artifact = harness
        .publish_files("origin", "v1.0.0", &[("secret.yaml", secret)])
        .with_metadata("org.opencontainers.image.revision", "orev");
    harness.source("repo", &artifact).await;
    harness.create_kustomization("origin", json!({})).await;
    let ready = applied(&harness, "origin", "v1.0.0").await;
    let status = ready.status.as_ref().unwrap();
    assert_eq!(
        condition(&ready, "Ready").unwrap().reason,
        "ReconciliationSucceeded"
    );
    assert_eq!(status.last_applied_origin_revision.as_deref(), Some("orev"));
    assert_eq!(status.history.len(), 1);
    let entry = serde_json::to_value(&status.history[0]).unwrap();
    assert!(!entry["digest"].as_str().unwrap().is_empty());
    assert_eq!(entry["totalReconciliations"], 1);
    assert!(entry["firstReconciled"].is_string());
    assert!(entry["lastReconciled"].is_string());
    assert_eq!(entry["lastReconciledStatus"], "ReconciliationSucceeded");
    let duration = entry["lastReconciledDuration"].as_str().unwrap();
    assert!(
        !duration.starts_with('0') || duration.len() > 2,
        "{duration}"
    );
    let metadata: Vec<&str> = entry["metadata"]
        .as_object()
        .unwrap()
        .values()
        .filter_map(|v| v.as_str())
        .collect();
    assert!(
        metadata.contains(&"v1.0.0") && metadata.contains(&"orev"),
        "{metadata:?}"
    );
    let events = wait_for(Duration::from_secs(10), || async {
        let found = events_of(&harness, "origin", &[]).await;
        (!found.is_empty()).then_some(found)
    })
    .await
    .expect("events");
    for event in events {
        assert_eq!(
            event
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("kustomize.toolkit.fluxcd.io/originRevision"))
                .map(String::as_str),
            Some("orev"),
            "{:?}",
            event.message
        );
    }
}

/// `TestKustomizationReconciler_MultiplePatchDelete`: `$patch: delete` removes objects,
/// whether several are in one patch or each in its own.
#[tokio::test]
async fn flux_multiple_patch_delete() {
    let harness = Harness::start().await;
    let id = harness.cluster.namespace.clone();
    kubeconfig_secret(&harness).await;
    let maps_yaml: String = (1..=3)
        .map(|i| format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm{i}\n  namespace: {id}\ndata:\n  key: abcde{i}\n"))
        .collect();
    let artifact =
        harness.publish_files("patch-delete", "v1.0.0", &[("configmaps.yaml", &maps_yaml)]);
    harness.source("repo", &artifact).await;
    let delete = |name: &str| {
        format!(
            "$patch: delete\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {id}"
        )
    };
    let maps: Api<ConfigMap> = harness.config_maps();
    let cases = [
        (
            "single",
            json!([{"patch": format!("{}\n---\n{}", delete("cm1"), delete("cm2"))}]),
        ),
        (
            "separate",
            json!([{"patch": delete("cm1")}, {"patch": delete("cm2")}]),
        ),
    ];
    for (name, patches) in cases {
        harness
            .create_kustomization(
                name,
                json!({"kubeConfig": {"secretRef": {"name": "kubeconfig"}}, "targetNamespace": null,
                    "patches": patches}),
            )
            .await;
        applied(&harness, name, "v1.0.0").await;
        assert!(
            maps.get_opt("cm1").await.unwrap().is_none(),
            "{name}: cm1 deleted"
        );
        assert!(
            maps.get_opt("cm2").await.unwrap().is_none(),
            "{name}: cm2 deleted"
        );
        assert!(
            maps.get_opt("cm3").await.unwrap().is_some(),
            "{name}: cm3 kept"
        );
        harness
            .kustomizations()
            .delete(name, &Default::default())
            .await
            .unwrap();
        gone(&harness, name).await;
    }
}
