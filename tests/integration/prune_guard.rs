//! Beyond Flux: the prune guard. A revision that would prune more of a Kustomization's
//! inventory than its threshold applies what it built, prunes nothing, and stalls with
//! `PruneGuarded` until a one-shot confirmation lets that prune through.

use std::time::Duration;

use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::support::cluster::wait_for;
use crate::support::controller::Harness;
use kustomize_controller::controller::prune_guard::{self, Threshold};

fn config_maps(names: impl IntoIterator<Item = String>) -> String {
    names
        .into_iter()
        .map(|name| {
            format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  k: v\n")
        })
        .collect::<Vec<_>>()
        .join("---\n")
}

fn numbered(count: usize) -> String {
    config_maps((0..count).map(|i| format!("cm-{i:04}")))
}

/// The controller's own count of its API requests with `method`.
fn requests(harness: &Harness, method: &str) -> f64 {
    harness
        .metrics
        .encode()
        .lines()
        .filter(|line| {
            line.starts_with("rest_client_requests_total{")
                && line.contains(&format!("method=\"{method}\""))
        })
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

async fn live_config_maps(harness: &Harness) -> usize {
    harness
        .config_maps()
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter(|map| {
            map.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with("cm-"))
        })
        .count()
}

async fn annotate(harness: &Harness, name: &str, key: &str, value: &str) {
    harness
        .kustomizations()
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {key: value}}})),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn the_guard_stops_a_prune_of_most_of_a_thousand_objects_until_confirmed_once() {
    let harness = Harness::start().await;
    let v1 = harness.publish_files(
        "guard-1",
        "main@sha1:1111",
        &[("all.yaml", &numbered(1000))],
    );
    harness.source("repo", &v1).await;
    harness
        .create_kustomization("fleet", json!({"timeout": "5m"}))
        .await;
    annotate(&harness, "fleet", prune_guard::GUARD, "50%").await;
    harness
        .wait_ready_within(
            Duration::from_secs(300),
            "fleet",
            "True",
            "ReconciliationSucceeded",
        )
        .await;
    assert_eq!(live_config_maps(&harness).await, 1000);

    // A commit that keeps 10 of them (and changes one): applied, nothing pruned.
    let (gets, deletes) = (requests(&harness, "GET"), requests(&harness, "DELETE"));
    let mut kept = numbered(10);
    kept = kept.replacen("k: v", "k: changed", 1);
    let v2 = harness.publish_files("guard-2", "main@sha1:2222", &[("all.yaml", &kept)]);
    harness.source("repo", &v2).await;
    let stalled = harness
        .wait_ready_within(Duration::from_secs(120), "fleet", "False", "PruneGuarded")
        .await;
    let message = crate::support::controller::ready_message(&stalled);
    assert!(
        message.contains("would delete 990 of the 1000 objects in the inventory, more than 50% of the inventory; nothing was pruned")
            && message.contains(prune_guard::CONFIRM),
        "{message}"
    );
    let status = stalled.status.clone().unwrap();
    let stalled_condition = status.conditions.iter().find(|c| c.type_ == "Stalled");
    assert_eq!(
        stalled_condition.map(|c| (c.status.as_str(), c.reason.as_str())),
        Some(("True", "PruneGuarded"))
    );
    assert_eq!(
        status.inventory.as_ref().map(|i| i.entries.len()),
        Some(1000),
        "the objects it would have deleted stay in the inventory"
    );
    assert_eq!(live_config_maps(&harness).await, 1000, "nothing pruned");
    let changed = harness.config_maps().get("cm-0000").await.unwrap();
    assert_eq!(
        changed.data.unwrap()["k"],
        "changed",
        "what was built is applied"
    );
    assert_eq!(
        requests(&harness, "DELETE"),
        deletes,
        "no deletion asked for"
    );
    let read = requests(&harness, "GET") - gets;
    assert!(
        read < 20.0,
        "the guard judges from the inventories, not by reading the objects: {read} GETs"
    );

    let events: Api<Event> =
        Api::namespaced(harness.cluster.client.clone(), &harness.cluster.namespace);
    let event = wait_for(Duration::from_secs(10), || async {
        let list = events.list(&Default::default()).await.ok()?;
        list.items.into_iter().find(|e| {
            e.involved_object.name.as_deref() == Some("fleet")
                && e.reason.as_deref() == Some("PruneGuarded")
        })
    })
    .await
    .expect("a PruneGuarded event");
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert!(
        event
            .message
            .unwrap_or_default()
            .contains("would delete 990 of the 1000 objects")
    );

    // A confirmation lets this prune through once, and is recorded.
    annotate(&harness, "fleet", prune_guard::CONFIRM, "go-1").await;
    let pruned = harness
        .wait_ready_within(
            Duration::from_secs(120),
            "fleet",
            "True",
            "ReconciliationSucceeded",
        )
        .await;
    assert_eq!(
        pruned.status.unwrap().inventory.map(|i| i.entries.len()),
        Some(10)
    );
    let gone = wait_for(Duration::from_secs(60), || async {
        (live_config_maps(&harness).await == 10).then_some(())
    })
    .await;
    assert!(gone.is_some(), "the confirmed prune deleted the 990");
    let object = harness.kustomizations().get("fleet").await.unwrap();
    assert_eq!(
        object.metadata.annotations.unwrap()[prune_guard::HONOURED],
        "go-1"
    );

    // The same value confirms nothing more: the next big prune trips the guard again.
    let v3 = harness.publish_files("guard-3", "main@sha1:3333", &[("all.yaml", &numbered(1))]);
    harness.source("repo", &v3).await;
    harness
        .wait_ready_within(Duration::from_secs(60), "fleet", "False", "PruneGuarded")
        .await;
    assert_eq!(live_config_maps(&harness).await, 10);
}

#[tokio::test]
async fn the_flag_sets_a_default_the_annotation_overrides_and_a_bad_one_stalls() {
    let harness = Harness::start_with(|options| {
        options.reconcile.prune_guard_default = Some(Threshold::Count(2));
    })
    .await;
    let v1 = harness.publish_files("flag-1", "main@sha1:1111", &[("all.yaml", &numbered(5))]);
    harness.source("repo", &v1).await;
    harness.create_kustomization("small", json!({})).await;
    harness
        .wait_ready("small", "True", "ReconciliationSucceeded")
        .await;
    let v2 = harness.publish_files("flag-2", "main@sha1:2222", &[("all.yaml", &numbered(2))]);
    harness.source("repo", &v2).await;
    let stalled = harness.wait_ready("small", "False", "PruneGuarded").await;
    assert!(
        crate::support::controller::ready_message(&stalled)
            .contains("would delete 3 of the 5 objects in the inventory, more than 2 objects"),
    );
    assert_eq!(live_config_maps(&harness).await, 5);

    // The annotation overrides the flag: off lets the prune through.
    annotate(&harness, "small", prune_guard::GUARD, "off").await;
    // An annotation change is no trigger by itself (as in Flux): ask for a reconciliation.
    harness.request_reconcile("small", "after-off").await;
    harness
        .wait_ready("small", "True", "ReconciliationSucceeded")
        .await;
    let pruned = wait_for(Duration::from_secs(30), || async {
        (live_config_maps(&harness).await == 2).then_some(())
    })
    .await;
    assert!(pruned.is_some());

    annotate(&harness, "small", prune_guard::GUARD, "most").await;
    harness.request_reconcile("small", "after-most").await;
    let invalid = harness
        .wait_ready("small", "False", "InvalidPruneGuard")
        .await;
    let message = crate::support::controller::ready_message(&invalid);
    assert!(
        message.contains("\"most\"") && message.contains(prune_guard::GUARD),
        "the error names the annotation and its value: {message}"
    );
}

#[tokio::test]
async fn with_the_gate_off_the_guard_is_ignored() {
    let harness = Harness::start_with(|options| options.reconcile.prune_guard = false).await;
    let v1 = harness.publish_files("gate-1", "main@sha1:1111", &[("all.yaml", &numbered(4))]);
    harness.source("repo", &v1).await;
    harness.create_kustomization("ungated", json!({})).await;
    annotate(&harness, "ungated", prune_guard::GUARD, "0").await;
    harness
        .wait_ready("ungated", "True", "ReconciliationSucceeded")
        .await;
    let v2 = harness.publish_files("gate-2", "main@sha1:2222", &[("all.yaml", &numbered(1))]);
    harness.source("repo", &v2).await;
    let pruned = wait_for(Duration::from_secs(30), || async {
        (live_config_maps(&harness).await == 1).then_some(())
    })
    .await;
    assert!(pruned.is_some(), "pruned as Flux prunes");
}
