//! Flux's garbage-collection tests (`kustomization_prune_test.go`): stale objects pruned on a
//! new revision and on deletion, except those labelled `prune: disabled`, owned by another
//! Kustomization or annotated `ssa: Ignore`; an empty source empties the inventory; a delete
//! the API server refuses keeps the object in the inventory until a retry succeeds.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::{applied, condition, gone, kubeconfig_secret};
use crate::support::cluster::wait_for;
use crate::support::controller::Harness;

fn secret_and_config(name: &str, data: &str, config_metadata: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\nstringData:\n  key: \"{data}\"\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n{config_metadata}data:\n  key: \"{data}\"\n"
    )
}

fn inventory_len(object: &kustomize_controller::api::Kustomization) -> usize {
    object
        .status
        .as_ref()
        .and_then(|s| s.inventory.as_ref())
        .map_or(0, |i| i.entries.len())
}

struct Objects {
    maps: Api<ConfigMap>,
    secrets: Api<Secret>,
}

impl Objects {
    fn of(harness: &Harness) -> Objects {
        Objects {
            maps: harness.config_maps(),
            secrets: Api::namespaced(harness.cluster.client.clone(), &harness.cluster.namespace),
        }
    }

    async fn map(&self, name: &str) -> Option<ConfigMap> {
        self.maps.get_opt(name).await.unwrap()
    }

    async fn secret(&self, name: &str) -> Option<Secret> {
        self.secrets.get_opt(name).await.unwrap()
    }
}

async fn delete_kustomization(harness: &Harness, name: &str) {
    harness
        .kustomizations()
        .delete(name, &Default::default())
        .await
        .unwrap();
    gone(harness, name).await;
}

/// `TestKustomizationReconciler_Prune`: objects of an old revision are pruned, and all are on
/// deletion, except a ConfigMap labelled `kustomize.toolkit.fluxcd.io/prune: disabled`.
#[tokio::test]
async fn flux_prune() {
    let harness = Harness::start().await;
    kubeconfig_secret(&harness).await;
    let disabled = "  labels:\n    kustomize.toolkit.fluxcd.io/prune: \"disabled\"\n";
    let publish = |revision: &str, name: &str| {
        harness.publish_files(
            &format!("prune-{revision}"),
            revision,
            &[("objects.yaml", &secret_and_config(name, name, disabled))],
        )
    };
    harness.source("repo", &publish("v1.0.0", "old")).await;
    harness
        .create_kustomization(
            "prune",
            json!({"kubeConfig": {"secretRef": {"name": "kubeconfig"}}}),
        )
        .await;
    applied(&harness, "prune", "v1.0.0").await;
    let objects = Objects::of(&harness);

    // creates objects
    assert!(objects.secret("old").await.is_some());
    assert!(objects.map("old").await.is_some());

    // deletes stale objects
    harness.source("repo", &publish("v2.0.0", "new")).await;
    applied(&harness, "prune", "v2.0.0").await;
    assert!(objects.secret("new").await.is_some());
    assert!(objects.secret("old").await.is_none());
    // Beyond Flux's test, its event: every entry of the prune's change set, the objects
    // left (pruning disabled) too.
    let ns = harness.cluster.namespace.clone();
    prune_event(
        &harness,
        &format!("Secret/{ns}/old deleted"),
        &format!("ConfigMap/{ns}/old skipped"),
    )
    .await;

    // handles finalizer
    delete_kustomization(&harness, "prune").await;
    assert!(objects.secret("new").await.is_none());
    prune_event(
        &harness,
        &format!("Secret/{ns}/new deleted"),
        &format!("ConfigMap/{ns}/new skipped"),
    )
    .await;

    // preserves objects with pruning disabled
    assert!(objects.map("old").await.is_some());
    assert!(objects.map("new").await.is_some());
}

/// Waits for the Event of `prune` whose message lists `deleted` and `skipped`, a line each.
async fn prune_event(harness: &Harness, deleted: &str, skipped: &str) {
    let events: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(harness.cluster.client.clone(), &harness.cluster.namespace);
    let found = wait_for(Duration::from_secs(15), || async {
        let list = events.list(&Default::default()).await.ok()?;
        list.items.into_iter().find_map(|event| {
            let message = event.message?;
            let lines: Vec<&str> = message.lines().collect();
            (event.involved_object.name.as_deref() == Some("prune")
                && lines.contains(&deleted)
                && lines.contains(&skipped))
            .then_some(())
        })
    })
    .await;
    assert!(
        found.is_some(),
        "an Event lists '{deleted}' and '{skipped}'"
    );
}

/// `TestKustomizationReconciler_PruneFailedInventoryRetry`: a delete the API server accepts
/// (the object only gets a deletionTimestamp, a finalizer holding it) leaves the inventory; a
/// delete it refuses keeps the object in the inventory with PruneFailed, until a retry
/// succeeds. (Flux injects the refusal with a failing client; the in-process API server
/// injects it here, so that half runs only there.)
#[tokio::test]
async fn flux_prune_failed_inventory_retry() {
    let harness = Harness::start_with(|options| {
        options.reconcile.min_retry_delay = Duration::from_millis(100);
    })
    .await;
    let config =
        "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: held\ndata:\n  key: value\n";
    let publish = |revision: &str, present: bool| {
        let files: &[(&str, &str)] = if present {
            &[("config.yaml", config)]
        } else {
            &[]
        };
        harness.publish_files(&format!("retry-{revision}"), revision, files)
    };
    harness.source("repo", &publish("v1.0.0", true)).await;
    harness
        .create_kustomization("retry", json!({"retryInterval": "1s"}))
        .await;
    let ready = applied(&harness, "retry", "v1.0.0").await;
    assert_eq!(inventory_len(&ready), 1);
    let maps: Api<ConfigMap> = harness.config_maps();

    // accepted delete leaves inventory
    maps.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": ["test.finalizers.fluxcd.io/block"]}})),
    )
    .await
    .unwrap();
    harness.source("repo", &publish("v2.0.0", false)).await;
    let ready = applied(&harness, "retry", "v2.0.0").await;
    assert_eq!(inventory_len(&ready), 0);
    let held = maps.get("held").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    maps.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    let removed = wait_for(Duration::from_secs(10), || async {
        maps.get_opt("held").await.ok()?.is_none().then_some(())
    })
    .await;
    assert!(removed.is_some());

    // rejected delete stays in inventory until retry succeeds
    let Some(server) = harness.cluster.server() else {
        eprintln!("the rest needs the in-process server's fault injection");
        return;
    };
    harness.source("repo", &publish("v3.0.0", true)).await;
    let ready = applied(&harness, "retry", "v3.0.0").await;
    assert_eq!(inventory_len(&ready), 1);
    server.inject(crate::support::apiserver::Fault {
        dry_run: None,
        verb: Some("delete".into()),
        resource: Some("configmaps".into()),
        remaining: 1,
        code: 500,
        retry_after: None,
    });
    harness.source("repo", &publish("v4.0.0", false)).await;
    let failed = harness.wait_ready("retry", "False", "PruneFailed").await;
    assert_eq!(inventory_len(&failed), 1);
    let message = crate::support::controller::ready_message(&failed);
    let ns = harness.cluster.namespace.clone();
    assert!(
        message.starts_with(&format!(
            "delete failed, errors: ConfigMap/{ns}/held delete failed: "
        )) && message.ends_with(';'),
        "fluxcd/pkg's DeleteAll words: {message}"
    );
    let kept = maps.get("held").await.unwrap();
    assert!(kept.metadata.deletion_timestamp.is_none());
    let removed = wait_for(Duration::from_secs(30), || async {
        maps.get_opt("held").await.ok()?.is_none().then_some(())
    })
    .await;
    assert!(removed.is_some(), "the retry deletes it");
    let ready = applied(&harness, "retry", "v4.0.0").await;
    assert_eq!(inventory_len(&ready), 0);
}

/// `TestKustomizationReconciler_PruneEmpty`: an empty artifact, and an empty kustomization,
/// prune everything and empty the inventory; objects come back with the next revision; a
/// suspended Kustomization is still finalized.
#[tokio::test]
async fn flux_prune_empty() {
    let harness = Harness::start().await;
    kubeconfig_secret(&harness).await;
    let objects = secret_and_config("empty", "empty", "");
    harness
        .source(
            "repo",
            &harness.publish_files("empty-v1", "v1.0.0", &[("objects.yaml", &objects)]),
        )
        .await;
    harness
        .create_kustomization(
            "empty",
            json!({"kubeConfig": {"secretRef": {"name": "kubeconfig"}}, "wait": true}),
        )
        .await;
    assert_eq!(
        inventory_len(&applied(&harness, "empty", "v1.0.0").await),
        2
    );

    // deletes stale objects
    harness
        .source("repo", &harness.publish_files("empty-v2", "v2.0.0", &[]))
        .await;
    assert_eq!(
        inventory_len(&applied(&harness, "empty", "v2.0.0").await),
        0
    );

    // reconciles empty kustomization
    let empty = "---\napiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n";
    harness
        .source(
            "repo",
            &harness.publish_files("empty-v3", "v3.0.0", &[("kustomization.yaml", empty)]),
        )
        .await;
    assert_eq!(
        inventory_len(&applied(&harness, "empty", "v3.0.0").await),
        0
    );

    // restores objects
    harness
        .source(
            "repo",
            &harness.publish_files("empty-v4", "v4.0.0", &[("objects.yaml", &objects)]),
        )
        .await;
    assert_eq!(
        inventory_len(&applied(&harness, "empty", "v4.0.0").await),
        2
    );

    // deletes suspended
    harness
        .kustomizations()
        .patch(
            "empty",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"suspend": true}})),
        )
        .await
        .unwrap();
    delete_kustomization(&harness, "empty").await;
}

/// `TestKustomizationReconciler_PruneSkipNotOwned`: applied objects carry the owner labels;
/// on deletion, an object whose owner label now names another Kustomization is kept.
#[tokio::test]
async fn flux_prune_skip_not_owned() {
    let harness = Harness::start().await;
    let ns = harness.cluster.namespace.clone();
    kubeconfig_secret(&harness).await;
    let objects = secret_and_config("owned", "owned", "");
    harness
        .source(
            "repo",
            &harness.publish_files("owned", "v1.0.0", &[("objects.yaml", &objects)]),
        )
        .await;
    harness
        .create_kustomization(
            "owner",
            json!({"kubeConfig": {"secretRef": {"name": "kubeconfig"}}, "wait": true}),
        )
        .await;
    applied(&harness, "owner", "v1.0.0").await;
    let objects = Objects::of(&harness);

    // creates objects with owner labels
    assert!(objects.secret("owned").await.is_some());
    let map = objects.map("owned").await.unwrap();
    let labels = map.metadata.labels.unwrap_or_default();
    assert_eq!(labels["kustomize.toolkit.fluxcd.io/name"], "owner");
    assert_eq!(labels["kustomize.toolkit.fluxcd.io/namespace"], ns);
    objects
        .maps
        .patch(
            "owned",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"labels": {"kustomize.toolkit.fluxcd.io/name": "new-owner"}}}),
            ),
        )
        .await
        .unwrap();

    // deletes owned objects
    delete_kustomization(&harness, "owner").await;
    assert!(objects.secret("owned").await.is_none());

    // preserves objects with different owner
    assert!(objects.map("owned").await.is_some());
}

/// `TestKustomizationReconciler_PruneExcludesSSAIgnore`: an object annotated
/// `kustomize.toolkit.fluxcd.io/ssa: Ignore` on the cluster is pruned neither when it leaves
/// the source nor when the Kustomization is deleted.
#[tokio::test]
async fn flux_prune_excludes_ssa_ignore() {
    let harness = Harness::start().await;
    kubeconfig_secret(&harness).await;
    let secret = "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: ignored\nstringData:\n  key: value\n";
    let config =
        "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ignored\ndata:\n  key: value\n";
    let both = format!("{secret}{config}");
    harness
        .source(
            "repo",
            &harness.publish_files("ignore-v1", "v1.0.0", &[("objects.yaml", &both)]),
        )
        .await;
    harness
        .create_kustomization(
            "ignore",
            json!({"kubeConfig": {"secretRef": {"name": "kubeconfig"}}}),
        )
        .await;
    applied(&harness, "ignore", "v1.0.0").await;
    let objects = Objects::of(&harness);
    objects
        .maps
        .patch(
            "ignored",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {"kustomize.toolkit.fluxcd.io/ssa": "Ignore"}}}),
            ),
        )
        .await
        .unwrap();
    let annotated = |map: Option<ConfigMap>| {
        map.and_then(|m| m.metadata.annotations).is_some_and(|a| {
            a.get("kustomize.toolkit.fluxcd.io/ssa").map(String::as_str) == Some("Ignore")
        })
    };

    // preserves ssa: Ignore objects on stale prune
    harness
        .source(
            "repo",
            &harness.publish_files("ignore-v2", "v2.0.0", &[("objects.yaml", secret)]),
        )
        .await;
    applied(&harness, "ignore", "v2.0.0").await;
    assert!(objects.secret("ignored").await.is_some());
    assert!(annotated(objects.map("ignored").await));

    // preserves ssa: Ignore objects on finalizer prune
    delete_kustomization(&harness, "ignore").await;
    assert!(
        objects.secret("ignored").await.is_none(),
        "the managed Secret is pruned by the finalizer"
    );
    assert!(annotated(objects.map("ignored").await));
}

/// `TestKustomizationReconciler_PruneIncludesSSAIfNotPresent`: an object applied with
/// `ssa: IfNotPresent` is still pruned, when it leaves the source and on deletion.
#[tokio::test]
async fn flux_prune_includes_ssa_if_not_present() {
    let harness = Harness::start().await;
    kubeconfig_secret(&harness).await;
    let secret =
        "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: once\nstringData:\n  key: value\n";
    let config = "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: once\n  annotations:\n    kustomize.toolkit.fluxcd.io/ssa: IfNotPresent\ndata:\n  key: value\n";
    let both = format!("{secret}{config}");
    let publish = |revision: &str, text: &str| {
        harness.publish_files(
            &format!("once-{revision}"),
            revision,
            &[("objects.yaml", text)],
        )
    };
    harness.source("repo", &publish("v1.0.0", &both)).await;
    harness
        .create_kustomization(
            "once",
            json!({"kubeConfig": {"secretRef": {"name": "kubeconfig"}}}),
        )
        .await;
    applied(&harness, "once", "v1.0.0").await;
    let objects = Objects::of(&harness);
    let map = objects.map("once").await.unwrap();
    assert_eq!(
        map.metadata.annotations.unwrap()["kustomize.toolkit.fluxcd.io/ssa"],
        "IfNotPresent"
    );
    harness.source("repo", &publish("v1.0.1", &both)).await;
    applied(&harness, "once", "v1.0.1").await;

    // deletes stale ssa: IfNotPresent objects
    harness.source("repo", &publish("v2.0.0", secret)).await;
    applied(&harness, "once", "v2.0.0").await;
    assert!(objects.secret("once").await.is_some());
    let pruned = wait_for(Duration::from_secs(10), || async {
        objects.map("once").await.is_none().then_some(())
    })
    .await;
    assert!(
        pruned.is_some(),
        "an ssa: IfNotPresent ConfigMap is pruned when removed from the source"
    );

    // deletes ssa: IfNotPresent objects via finalizer
    harness.source("repo", &publish("v3.0.0", &both)).await;
    applied(&harness, "once", "v3.0.0").await;
    harness.source("repo", &publish("v3.0.1", &both)).await;
    let ready = applied(&harness, "once", "v3.0.1").await;
    assert_eq!(condition(&ready, "Ready").unwrap().status, "True");
    assert!(objects.map("once").await.is_some());
    delete_kustomization(&harness, "once").await;
    assert!(objects.secret("once").await.is_none());
    assert!(objects.map("once").await.is_none());
}

/// `TestPruneSurvivors` (Flux's regression test for a partially failed prune): every stale
/// object whose deletion is not settled stays for the next attempt. Flux tests its helper
/// over a change set; ours decides each object's fate in `inventory::prune`, so the same four
/// cases run against the API server with refused requests injected: nothing settled (every
/// read refused) keeps all, deleted and skipped objects are settled while an unread one
/// survives, refused deletes survive, and no input gives no output.
#[tokio::test]
async fn flux_prune_survivors() {
    use crate::support::apiserver::Fault;
    use kustomize_controller::inventory;
    use kustomize_controller::objects::{ObjectRef, Owner};

    let cluster = crate::support::cluster::TestCluster::start().await;
    let ns = cluster.namespace.clone();
    let owner = Owner {
        name: "survivors".into(),
        namespace: ns.clone(),
    };
    let create = |name: &str, ours: bool| {
        let labels = if ours {
            json!({"kustomize.toolkit.fluxcd.io/name": "survivors",
                "kustomize.toolkit.fluxcd.io/namespace": ns})
        } else {
            json!({})
        };
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns, "labels": labels}})
    };
    let names = |refs: &[ObjectRef]| refs.iter().map(|r| r.name.clone()).collect::<Vec<_>>();

    // empty input is empty output
    let outcome = inventory::prune(&cluster.client, &[], &owner).await;
    assert!(outcome.deleted().changes.is_empty() && outcome.survivors.is_empty());
    assert!(outcome.skipped().is_empty() && outcome.errors.is_empty());

    let Some(server) = cluster.server() else {
        eprintln!("skipped the refused requests: they need fault injection");
        return;
    };
    let refuse = |verb: &str, remaining: usize| {
        server.inject(Fault {
            dry_run: None,
            verb: Some(verb.into()),
            resource: Some("configmaps".into()),
            remaining,
            code: 500,
            retry_after: None,
        })
    };

    // nil changeset preserves all objects on failure path
    let mut stale = Vec::new();
    for name in ["a1", "b1", "c1"] {
        stale.push(ObjectRef::of(&cluster.apply(&create(name, true)).await));
    }
    refuse("get", 3);
    let outcome = inventory::prune(&cluster.client, &stale, &owner).await;
    assert_eq!(names(&outcome.survivors), ["a1", "b1", "c1"]);
    assert!(outcome.deleted().changes.is_empty());

    // deleted and skipped actions are settled
    let a = ObjectRef::of(&cluster.apply(&create("a2", true)).await);
    let b = ObjectRef::of(&cluster.apply(&create("b2", false)).await);
    let c = ObjectRef::of(&cluster.apply(&create("c2", true)).await);
    refuse("get", 1);
    let outcome = inventory::prune(&cluster.client, &[c, a, b], &owner).await;
    assert_eq!(names(&outcome.survivors), ["c2"], "c is not settled");
    assert_eq!(names(&outcome.skipped()), ["b2"]);
    let deleted: Vec<_> = outcome
        .deleted()
        .changes
        .iter()
        .map(|c| c.object.name.clone())
        .collect();
    assert_eq!(deleted, ["a2"]);

    // unknown action means delete was rejected — must survive
    let mut stale = Vec::new();
    for name in ["b3", "c3", "a3"] {
        stale.push(ObjectRef::of(&cluster.apply(&create(name, true)).await));
    }
    refuse("delete", 2);
    let outcome = inventory::prune(&cluster.client, &stale, &owner).await;
    let mut survivors = names(&outcome.survivors);
    survivors.sort();
    assert_eq!(survivors, ["b3", "c3"]);
    let deleted: Vec<_> = outcome
        .deleted()
        .changes
        .iter()
        .map(|c| c.object.name.clone())
        .collect();
    assert_eq!(deleted, ["a3"]);
}
