//! Inventory and garbage collection through the harness: stale objects are pruned only while
//! they are still ours and not opted out; failed deletions survive; large inventories spill
//! into a companion Secret.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kustomize_controller::apply::{AppliedCache, Applier, ApplyOptions, IgnoreRules};
use kustomize_controller::inventory::{
    self, encode, from_change_set, load_overflow, save_overflow, stale,
};
use kustomize_controller::objects::{Action, KindCache, OwnedObjects, Owner, Seen};
use serde_json::{Value, json};

use crate::support::apiserver::Fault;
use crate::support::cluster::{TestCluster, dynamic_api, wait_for};

fn owner() -> Owner {
    Owner {
        name: "apps".into(),
        namespace: "flux-system".into(),
    }
}

/// An apply engine for `owner()`'s objects with Flux's default options.
fn applier(cluster: &TestCluster) -> Applier {
    Applier::new(
        cluster.client.clone(),
        ApplyOptions::default(),
        owner(),
        None,
        IgnoreRules::none(),
        AppliedCache::default(),
    )
}

fn config_map(namespace: &str, name: &str, annotations: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations}, "data": {"k": "v"}})
}

/// The deletions a prune reports, as `Kind/namespace/name deleted`.
fn deleted(outcome: &inventory::PruneOutcome) -> Vec<String> {
    outcome
        .deleted()
        .changes
        .iter()
        .map(ToString::to_string)
        .collect()
}

async fn exists(cluster: &TestCluster, object: &Value) -> bool {
    let api: Api<DynamicObject> = dynamic_api(&cluster.client, object).await;
    api.get_opt(object["metadata"]["name"].as_str().unwrap())
        .await
        .unwrap()
        .is_some()
}

#[tokio::test]
async fn prune_deletes_only_what_is_still_ours() {
    let cluster = TestCluster::start().await;
    let ns = &cluster.namespace;
    let engine = applier(&cluster);
    let keep = config_map(ns, "keep", json!({}));
    let gone = config_map(ns, "gone", json!({}));
    let adopted = config_map(ns, "adopted", json!({}));
    let protected = config_map(
        ns,
        "protected",
        json!({"kustomize.toolkit.fluxcd.io/prune": "disabled"}),
    );
    let first = engine
        .apply_all(vec![
            keep.clone(),
            gone.clone(),
            adopted.clone(),
            protected.clone(),
        ])
        .await
        .unwrap();
    let old = from_change_set(&first).unwrap();
    assert_eq!(old.entries.len(), 4);

    // Another Kustomization took `adopted` over: its labels name a different owner.
    let api = dynamic_api(&cluster.client, &adopted).await;
    api.patch(
        "adopted",
        &PatchParams::default(),
        &Patch::Merge(json!({
            "metadata": {"labels": {"kustomize.toolkit.fluxcd.io/name": "other"}}
        })),
    )
    .await
    .unwrap();

    let second = engine.apply_all(vec![keep.clone()]).await.unwrap();
    let new = from_change_set(&second).unwrap();
    let stale_objects = stale(&old, &new).unwrap();
    assert_eq!(stale_objects.len(), 3);
    let outcome = inventory::prune(&cluster.client, &stale_objects, &owner()).await;
    let deleted = deleted(&outcome);
    assert_eq!(deleted, vec![format!("ConfigMap/{ns}/gone deleted")]);
    assert!(outcome.survivors.is_empty(), "{:?}", outcome.errors);
    assert!(!exists(&cluster, &gone).await);
    assert!(
        exists(&cluster, &adopted).await,
        "objects now owned by others are left"
    );
    assert!(
        exists(&cluster, &protected).await,
        "prune: disabled is honoured"
    );
    assert!(exists(&cluster, &keep).await);
    assert_eq!(outcome.deleted().count(Action::Deleted), 1);
}

#[tokio::test]
async fn failed_deletions_survive_in_the_inventory() {
    let cluster = TestCluster::start().await;
    let Some(server) = cluster.server() else {
        eprintln!("skipped: needs fault injection");
        return;
    };
    let ns = &cluster.namespace;
    let engine = applier(&cluster);
    let first = engine
        .apply_all(vec![config_map(ns, "stuck", json!({}))])
        .await
        .unwrap();
    let old = from_change_set(&first).unwrap();
    let mut new = from_change_set(&Default::default()).unwrap();
    let stale_objects = stale(&old, &new).unwrap();
    server.inject(Fault {
        dry_run: None,
        verb: Some("delete".into()),
        resource: Some("configmaps".into()),
        remaining: 1,
        code: 500,
        retry_after: None,
    });
    let outcome = inventory::prune(&cluster.client, &stale_objects, &owner()).await;
    assert_eq!(outcome.survivors.len(), 1);
    assert!(
        outcome.errors[0].contains(&format!("ConfigMap/{ns}/stuck")),
        "{:?}",
        outcome.errors
    );
    inventory::keep_survivors(&mut new, &outcome.survivors).unwrap();
    assert_eq!(new, old, "the survivor stays for the next attempt");
}

/// An entry whose kind is no longer served (its CRD went first) is counted as settled, with
/// nothing to delete and no error: it leaves the inventory (ssa fails the prune instead).
#[tokio::test]
async fn an_entry_of_a_kind_no_longer_served_leaves_the_inventory() {
    let cluster = TestCluster::start().await;
    let ns = &cluster.namespace;
    let gone = kustomize_controller::objects::ObjectRef {
        api_version: "nothing.example.com/v1".into(),
        kind: "Nothing".into(),
        namespace: ns.clone(),
        name: "left".into(),
    };
    let outcome = inventory::prune(&cluster.client, std::slice::from_ref(&gone), &owner()).await;
    assert!(outcome.errors.is_empty(), "{:?}", outcome.errors);
    assert!(outcome.survivors.is_empty());
    let settled: Vec<String> = outcome
        .settled
        .changes
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(settled, [format!("Nothing/{ns}/left skipped")]);
}

/// An entry recorded at a version its CRD no longer serves is pruned at the version the
/// group serves now: the object lives on there and would otherwise be left behind.
#[tokio::test]
async fn an_entry_at_a_version_no_longer_served_is_pruned_at_the_served_one() {
    let cluster = TestCluster::start().await;
    let ns = &cluster.namespace;
    let (crds, group) = install_crd(
        &cluster,
        "moved",
        "Gadget",
        "Namespaced",
        &[("v1beta1", false, false), ("v1", true, true)],
    )
    .await;
    let gadget = json!({"apiVersion": format!("{group}/v1"), "kind": "Gadget",
        "metadata": {"name": "moved", "namespace": ns}});
    applier(&cluster)
        .apply_all(vec![gadget.clone()])
        .await
        .unwrap();
    let recorded = kustomize_controller::objects::ObjectRef {
        api_version: format!("{group}/v1beta1"),
        kind: "Gadget".into(),
        namespace: ns.clone(),
        name: "moved".into(),
    };
    let outcome =
        inventory::prune(&cluster.client, std::slice::from_ref(&recorded), &owner()).await;
    assert!(outcome.errors.is_empty(), "{:?}", outcome.errors);
    assert_eq!(deleted(&outcome), [format!("Gadget/{ns}/moved deleted")]);
    let gone = wait_for(std::time::Duration::from_secs(30), || async {
        (!exists(&cluster, &gadget).await).then_some(())
    })
    .await;
    assert!(gone.is_some(), "deleted at v1");
    crds.delete(&format!("gadgets.{group}"), &Default::default())
        .await
        .unwrap();
}

/// Installs a CRD of `kind` (plural: lower case and `s`) in a new group named after `prefix`,
/// at `versions` (name, served, storage), and waits until it is served and discovered.
async fn install_crd(
    cluster: &TestCluster,
    prefix: &str,
    kind: &str,
    scope: &str,
    versions: &[(&str, bool, bool)],
) -> (Api<CustomResourceDefinition>, String) {
    let group = format!("{}.example.com", crate::support::cluster::unique(prefix));
    let plural = format!("{}s", kind.to_lowercase());
    let versions: Vec<Value> = versions
        .iter()
        .map(|(name, served, storage)| {
            json!({"name": name, "served": served, "storage": storage,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}})
        })
        .collect();
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {"group": group, "scope": scope,
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind, "listKind": format!("{kind}List")},
            "versions": versions},
    }))
    .unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(cluster.client.clone());
    crds.create(&Default::default(), &crd).await.unwrap();
    crate::support::cluster::wait_until_served(&cluster.client, &crd).await;
    crate::support::cluster::wait_until_discovered(&cluster.client, &crd).await;
    (crds, group)
}

/// kustomize gives the custom resources of a cluster-scoped kind the kustomization's
/// namespace (it cannot know their scope). One skipped as built (`reconcile: disabled`) is
/// recorded without it, as an applied one is, so marking it leaves nothing stale; and a stale
/// entry that names it with the namespace (as an inventory Flux wrote records a skipped one)
/// is the object the new inventory keeps, which the prune leaves, and deletes once when both
/// entries are stale.
#[tokio::test]
async fn a_cluster_scoped_object_under_two_inventory_keys_is_one_object() {
    let cluster = TestCluster::start().await;
    let ns = &cluster.namespace;
    let (crds, group) = install_crd(
        &cluster,
        "dials",
        "Dial",
        "Cluster",
        &[("v1beta1", false, false), ("v1", true, true)],
    )
    .await;
    let dial = |annotations: Value| {
        json!({"apiVersion": format!("{group}/v1"), "kind": "Dial",
            "metadata": {"name": "dial", "namespace": ns, "annotations": annotations}})
    };
    let engine = applier(&cluster);
    let applied = from_change_set(&engine.apply_all(vec![dial(json!({}))]).await.unwrap()).unwrap();
    let skipped = engine
        .apply_all(vec![dial(
            json!({"kustomize.toolkit.fluxcd.io/reconcile": "disabled"}),
        )])
        .await
        .unwrap();
    assert_eq!(skipped.changes[0].action, Action::Skipped);
    let skipped = from_change_set(&skipped).unwrap();
    assert_eq!(skipped.entries, applied.entries, "recorded under one key");
    assert!(stale(&applied, &skipped).unwrap().is_empty());

    let as_flux_records_a_skip = kustomize_controller::objects::ObjectRef {
        api_version: format!("{group}/v1"),
        kind: "Dial".into(),
        namespace: ns.clone(),
        name: "dial".into(),
    };
    let kept = kustomize_controller::objects::ObjectRef {
        namespace: String::new(),
        ..as_flux_records_a_skip.clone()
    };
    let kinds = KindCache::default();
    let (client, kinds) = (&cluster.client, &kinds);
    let prune = |stale: Vec<kustomize_controller::objects::ObjectRef>, kept: Vec<_>| async move {
        inventory::prune_with(client, kinds, None, &stale, &kept, &owner()).await
    };
    // Also recorded at a version the CRD no longer serves.
    let at_an_old_version = kustomize_controller::objects::ObjectRef {
        api_version: format!("{group}/v1beta1"),
        ..as_flux_records_a_skip.clone()
    };
    let outcome = prune(
        vec![as_flux_records_a_skip.clone(), at_an_old_version],
        vec![kept.clone()],
    )
    .await;
    assert!(outcome.errors.is_empty(), "{:?}", outcome.errors);
    assert!(outcome.settled.changes.is_empty(), "{:?}", outcome.settled);
    assert!(
        exists(&cluster, &dial(json!({}))).await,
        "the kept object is left"
    );

    let outcome = prune(vec![kept, as_flux_records_a_skip], vec![]).await;
    assert!(outcome.errors.is_empty(), "{:?}", outcome.errors);
    assert_eq!(deleted(&outcome), ["Dial/dial deleted"]);
    crds.delete(&format!("dials.{group}"), &Default::default())
        .await
        .unwrap();
}

/// Prune judges an object from the owned-object watch and deletes it only if unchanged since
/// (a resourceVersion precondition). Changed by another manager meanwhile, it is read and
/// judged again, not left behind with a failed reconciliation.
#[tokio::test]
async fn a_stale_object_changed_since_the_watch_saw_it_is_judged_again_and_pruned() {
    let cluster = TestCluster::start().await;
    let ns = &cluster.namespace;
    let engine = applier(&cluster);
    let moved = config_map(ns, "moved", json!({}));
    let first = engine.apply_all(vec![moved.clone()]).await.unwrap();
    let old = from_change_set(&first).unwrap();
    let stale_objects = stale(&old, &from_change_set(&Default::default()).unwrap()).unwrap();
    let kinds = KindCache::default();
    let owned = OwnedObjects::new(cluster.client.clone());
    let served = kinds
        .served(&cluster.client, &stale_objects[0])
        .await
        .unwrap();
    owned.watch(&served);
    let seen = wait_for(std::time::Duration::from_secs(10), || async {
        matches!(owned.seen(&stale_objects[0], &served), Seen::Present(_)).then_some(())
    })
    .await;
    assert!(seen.is_some(), "the owned-object watch lists the ConfigMap");

    // The watch falls behind (as a busy watch cache can) while another manager edits it.
    if let Some(server) = cluster.server() {
        server.set_watch_lag("configmaps", std::time::Duration::from_secs(5));
    }
    let api = dynamic_api(&cluster.client, &moved).await;
    api.patch(
        "moved",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {"team": "b"}}})),
    )
    .await
    .unwrap();

    let outcome = inventory::prune_with(
        &cluster.client,
        &kinds,
        Some(&owned),
        &stale_objects,
        &[],
        &owner(),
    )
    .await;
    assert!(outcome.survivors.is_empty(), "{:?}", outcome.errors);
    let deleted = deleted(&outcome);
    assert_eq!(deleted, vec![format!("ConfigMap/{ns}/moved deleted")]);
    assert!(!exists(&cluster, &moved).await);
    if let Some(server) = cluster.server() {
        let deletes = server
            .requests()
            .iter()
            .filter(|r| r.verb == "delete" && r.name == "moved")
            .count();
        assert_eq!(
            deletes, 2,
            "refused by the precondition, then deleted as read"
        );
    }
}

#[tokio::test]
async fn overflow_secret_round_trips_a_large_inventory() {
    let cluster = TestCluster::start().await;
    let ns = &cluster.namespace;
    let kustomization = cluster
        .apply(&json!({
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": "big", "namespace": ns},
            "spec": {"interval": "5m", "prune": true, "sourceRef": {"kind": "GitRepository", "name": "repo"}},
        }))
        .await;
    let uid = kustomization["metadata"]["uid"].as_str().unwrap();
    let entries: Vec<kustomize_controller::api::ResourceRef> = (0..20_000)
        .map(|i| kustomize_controller::api::ResourceRef {
            id: format!("team-{}_cm-{i:05}__ConfigMap", i % 20),
            version: "v1".into(),
        })
        .collect();
    let full = kustomize_controller::api::ResourceInventory { entries };
    let stored = encode(&full, inventory::STATUS_BUDGET);
    let overflow = stored.overflow.clone().expect("20,000 entries overflow");
    save_overflow(
        &cluster.client,
        ns,
        "big",
        uid,
        Some(&overflow),
        "kustomize-controller",
    )
    .await
    .unwrap();
    let loaded = load_overflow(&cluster.client, ns, "big")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        inventory::decode(&stored.status, Some(&loaded)).unwrap(),
        full
    );
    save_overflow(
        &cluster.client,
        ns,
        "big",
        uid,
        None,
        "kustomize-controller",
    )
    .await
    .unwrap();
    assert!(
        load_overflow(&cluster.client, ns, "big")
            .await
            .unwrap()
            .is_none()
    );
}
