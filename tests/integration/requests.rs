//! What a reconciliation asks the API server: a quick one writes its status once and reads its
//! source from the watch cache; one that runs long still shows what is under way. The
//! controller authenticates as its own ServiceAccount, so its requests are told apart.

use std::time::Duration;

use serde_json::json;

use crate::support::cluster::wait_for;
use crate::support::controller::{APPLIED_CONFIGMAPS, Harness};

/// Restarts the harness's controller as a cluster-admin ServiceAccount; returns its user.
async fn as_own_account(harness: &mut Harness) -> String {
    let (token, user) = harness.cluster.controller_account().await;
    harness.restart_as(token).await;
    user
}

/// Another manager sets the ConfigMap's `key`, as `kubectl edit` would.
async fn edit_as_kubectl(harness: &Harness, name: &str, value: &str) {
    harness
        .config_maps()
        .patch(
            name,
            &kube::api::PatchParams {
                field_manager: Some("kubectl-edit".into()),
                ..Default::default()
            },
            &kube::api::Patch::Merge(json!({"data": {"key": value}})),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn a_quick_reconcile_writes_its_status_once_and_reads_its_source_from_the_cache() {
    let mut harness = Harness::start().await;
    let Some(server) = harness.cluster.server().cloned() else {
        eprintln!("skipped: reads the in-process server's request log (a real one keeps none)");
        return;
    };
    let artifact = harness.publish_files(
        "quick",
        "main@sha1:9a1c",
        &[(
            "cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: quick\n",
        )],
    );
    harness.source("repo", &artifact).await;
    // The controller starts after the source exists, so that its source watch's first list
    // holds it: a source created after the watch started may reach the cache after the
    // Kustomization's first reconcile, which then reads it from the server.
    let user = as_own_account(&mut harness).await;
    let created = server.requests().len();
    harness.create_kustomization("quick", json!({})).await;
    harness
        .wait_ready("quick", "True", "ReconciliationSucceeded")
        .await;
    // A new object is dry-run and applied, never read: the dry-run shows it does not exist.
    // The kind's owned-object watch starts with it (one list and watch per kind, not counted).
    let requests = server.requests();
    let first: Vec<_> = requests[created..]
        .iter()
        .filter(|r| r.user == user && r.resource != "events")
        .filter(|r| !matches!(r.verb.as_str(), "list" | "watch"))
        .map(|r| (r.verb.as_str(), r.resource.as_str(), r.dry_run))
        .collect();
    assert_eq!(
        first,
        [
            ("patch", "kustomizations", false),
            ("patch", "configmaps", true),
            ("patch", "configmaps", false),
            ("patch", "kustomizations", false),
        ],
        "finalizer, dry-run, apply, status"
    );
    // The owned-object watch the first apply started has listed.
    harness.sync_applied_configmaps().await;

    let mark = server.requests().len();
    harness.request_reconcile("quick", "again").await;
    let handled = wait_for(Duration::from_secs(30), || async {
        let object = harness.kustomizations().get("quick").await.ok()?;
        (object.status?.last_handled_reconcile_at.as_deref() == Some("again")).then_some(())
    })
    .await;
    assert!(handled.is_some(), "the requested reconcile ran");
    let mine: Vec<_> = server.requests()[mark..]
        .iter()
        .filter(|r| r.user == user)
        .cloned()
        .collect();
    let count = |verb: &str, resource: &str| {
        mine.iter()
            .filter(|r| r.verb == verb && r.resource == resource)
            .count()
    };
    assert_eq!(
        count("patch", "kustomizations"),
        1,
        "one status write: {mine:?}"
    );
    assert_eq!(
        count("get", "gitrepositories"),
        0,
        "the source from the cache: {mine:?}"
    );
    // The object the watch shows as applied is neither read nor dry-run.
    assert_eq!(count("get", "configmaps"), 0, "{mine:?}");
    assert_eq!(count("patch", "configmaps"), 0, "{mine:?}");
}

#[tokio::test]
async fn an_edit_the_watch_delivers_after_a_request_is_still_reverted() {
    let harness = Harness::start().await;
    let artifact = harness.publish_files(
        "late",
        "main@sha1:1a7e",
        &[(
            "cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: late\ndata:\n  key: value\n",
        )],
    );
    harness.source("repo", &artifact).await;
    harness.create_kustomization("late", json!({})).await;
    harness
        .wait_ready("late", "True", "ReconciliationSucceeded")
        .await;
    // A first requested reconciliation, once the owned-object watch has listed what was applied.
    harness.sync_applied_configmaps().await;
    harness.request_reconcile("late", "first").await;
    harness.wait_handled("late", "first").await;

    // The edit reaches the controller's watch only after the request has been handled.
    if let Some(server) = harness.cluster.server() {
        server.set_watch_lag("configmaps", Duration::from_secs(2));
    }
    edit_as_kubectl(&harness, "late", "edited").await;
    harness.request_reconcile("late", "second").await;
    harness.wait_handled("late", "second").await;
    let reverted = wait_for(Duration::from_secs(20), || async {
        let data = harness.config_maps().get("late").await.ok()?.data?;
        (data.get("key").map(String::as_str) == Some("value")).then_some(())
    })
    .await;
    if let Some(server) = harness.cluster.server() {
        server.set_watch_lag("configmaps", Duration::ZERO);
    }
    assert!(
        reverted.is_some(),
        "the edit made before the request is reverted"
    );
}

#[tokio::test]
async fn a_revision_right_after_a_request_runs_once_despite_its_own_writes() {
    let mut harness = Harness::start().await;
    let Some(server) = harness.cluster.server().cloned() else {
        eprintln!("skipped: reads the in-process server's request log (a real one keeps none)");
        return;
    };
    let user = as_own_account(&mut harness).await;
    let manifest = |value: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: twice\ndata:\n  key: {value}\n"
        )
    };
    let v1 = harness.publish_files("twice", "main@sha1:7e01", &[("cm.yaml", &manifest("one"))]);
    harness.source("repo", &v1).await;
    harness.create_kustomization("twice", json!({})).await;
    harness
        .wait_ready("twice", "True", "ReconciliationSucceeded")
        .await;
    harness.sync_applied_configmaps().await;
    // The requested reconciliation takes the ConfigMap as unmoved and vouches for it.
    harness.request_reconcile("twice", "now").await;
    harness.wait_handled("twice", "now").await;

    let mark = server.requests().len();
    let watched = harness.watch_report(APPLIED_CONFIGMAPS).expect("watched");
    let v2 = harness.publish_files("twice", "main@sha1:7e02", &[("cm.yaml", &manifest("two"))]);
    harness.source("repo", &v2).await;
    let applied = wait_for(Duration::from_secs(30), || async {
        let object = harness.kustomizations().get("twice").await.ok()?;
        (object.status?.last_applied_revision.as_deref() == Some("main@sha1:7e02")).then_some(())
    })
    .await;
    assert!(applied.is_some(), "the new revision is applied");
    // Its own write of the ConfigMap, coming back through the watch, is no change to follow up.
    harness.sync_applied_configmaps().await;
    assert_eq!(
        harness.watch_report(APPLIED_CONFIGMAPS).unwrap().follow_ups,
        watched.follow_ups,
        "the write came back and ran nothing again"
    );
    let status_writes: Vec<_> = server.requests()[mark..]
        .iter()
        .filter(|r| r.user == user && r.resource == "kustomizations" && r.verb == "patch")
        .cloned()
        .collect();
    assert_eq!(
        status_writes.len(),
        1,
        "one reconciliation: {status_writes:?}"
    );
}

#[tokio::test]
async fn a_long_reconcile_shows_what_is_under_way_before_its_outcome() {
    let harness = Harness::start().await;
    let deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: slow\nspec:\n  \
        replicas: 1\n  selector:\n    matchLabels:\n      app: slow\n  template:\n    metadata:\n      \
        labels:\n        app: slow\n    spec:\n      containers:\n      - name: web\n        image: nginx\n";
    let artifact = harness.publish_files("slow", "main@sha1:5100", &[("deploy.yaml", deployment)]);
    harness.source("repo", &artifact).await;
    harness
        .create_kustomization("slow", json!({"wait": true, "timeout": "1m"}))
        .await;
    // The health check waits (no Pod ever becomes available); meanwhile the status says so.
    let reported = wait_for(Duration::from_secs(20), || async {
        let object = harness.kustomizations().get("slow").await.ok()?;
        let status = object.status?;
        status
            .conditions
            .iter()
            .find(|c| c.type_ == "Reconciling" && c.status == "True")
            .map(|c| c.message.clone())
    })
    .await
    .expect("a long reconcile reports progress");
    assert!(!reported.is_empty(), "{reported}");
}

#[tokio::test]
async fn an_interval_reconcile_trusts_the_watch_and_still_reverts_drift() {
    let mut harness = Harness::start().await;
    let Some(server) = harness.cluster.server().cloned() else {
        eprintln!("skipped: reads the in-process server's request log (a real one keeps none)");
        return;
    };
    let user = as_own_account(&mut harness).await;
    let artifact = harness.publish_files(
        "steady",
        "main@sha1:57ea",
        &[(
            "cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: steady\ndata:\n  key: value\n",
        )],
    );
    harness.source("repo", &artifact).await;
    harness
        .create_kustomization("steady", json!({"interval": "1s"}))
        .await;
    harness
        .wait_ready("steady", "True", "ReconciliationSucceeded")
        .await;

    // Unchanged: the next intervals' reconciliations neither read nor dry-run the object.
    harness.sync_applied_configmaps().await;
    let mark = server.requests().len();
    let status_writes = || {
        server.requests()[mark..]
            .iter()
            .filter(|r| r.user == user && r.resource == "kustomizations" && r.verb == "patch")
            .count()
    };
    let two_intervals = wait_for(Duration::from_secs(30), || async {
        (status_writes() >= 2).then_some(())
    })
    .await;
    assert!(
        two_intervals.is_some(),
        "two intervals' reconciliations ran"
    );
    let since: Vec<_> = server.requests()[mark..]
        .iter()
        .filter(|r| r.user == user)
        .cloned()
        .collect();
    assert!(
        since.iter().any(|r| r.resource == "kustomizations"),
        "it reconciled meanwhile: {since:?}"
    );
    assert!(
        !since.iter().any(|r| r.resource == "configmaps"),
        "an unchanged object is left alone: {since:?}"
    );

    // Drift by another manager is reverted on a following interval.
    edit_as_kubectl(&harness, "steady", "drifted").await;
    let reverted = wait_for(Duration::from_secs(30), || async {
        let data = harness.config_maps().get("steady").await.ok()?.data?;
        (data.get("key").map(String::as_str) == Some("value")).then_some(())
    })
    .await;
    assert!(reverted.is_some(), "the drift is reverted");
}

#[tokio::test]
async fn deletion_prunes_from_the_watch_and_keeps_what_opted_out_since() {
    let mut harness = Harness::start().await;
    let Some(server) = harness.cluster.server().cloned() else {
        eprintln!("skipped: reads the in-process server's request log (a real one keeps none)");
        return;
    };
    let user = as_own_account(&mut harness).await;
    let artifact = harness.publish_files(
        "gone",
        "main@sha1:90e5",
        &[(
            "cms.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: doomed\n---\n\
             apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kept\n",
        )],
    );
    harness.source("repo", &artifact).await;
    harness.create_kustomization("gone", json!({})).await;
    harness
        .wait_ready("gone", "True", "ReconciliationSucceeded")
        .await;
    // Opted out after the apply: the watch must tell it.
    harness
        .config_maps()
        .patch(
            "kept",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(
                json!({"metadata": {"annotations": {"kustomize.toolkit.fluxcd.io/prune": "disabled"}}}),
            ),
        )
        .await
        .unwrap();
    harness.sync_applied_configmaps().await;
    let mark = server.requests().len();
    harness
        .kustomizations()
        .delete("gone", &Default::default())
        .await
        .unwrap();
    let deleted = wait_for(Duration::from_secs(30), || async {
        harness
            .kustomizations()
            .get_opt("gone")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    assert!(deleted.is_some(), "the Kustomization goes");
    let maps = harness.config_maps();
    assert!(maps.get_opt("doomed").await.unwrap().is_none(), "pruned");
    assert!(maps.get_opt("kept").await.unwrap().is_some(), "opted out");
    let reads: Vec<_> = server.requests()[mark..]
        .iter()
        .filter(|r| r.user == user && r.resource == "configmaps" && r.verb == "get")
        .cloned()
        .collect();
    assert!(reads.is_empty(), "judged from the watch: {reads:?}");
}

/// Flux's CacheSecretsAndConfigMaps gate: with it on, `substituteFrom` ConfigMaps and Secrets
/// come from the controller's watches of them, not a read per reconciliation, and an edit
/// reaches the next reconciliations; with it off (Flux's default) each is read every time.
#[tokio::test]
async fn substitutions_are_read_each_time_unless_the_cache_gate_is_on() {
    for cached in [false, true] {
        let mut harness = Harness::start().await;
        let Some(server) = harness.cluster.server().cloned() else {
            eprintln!("skipped: reads the in-process server's request log (a real one keeps none)");
            return;
        };
        let (token, user) = harness.cluster.controller_account().await;
        harness
            .restart_as_with(token, |options| {
                options.reconcile.cache_secrets_and_config_maps = cached;
            })
            .await;
        let ns = harness.cluster.namespace.clone();
        harness
            .cluster
            .apply(&json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "vars", "namespace": ns}, "data": {"color": "blue"}}))
            .await;
        harness
            .cluster
            .apply(&json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "secret-vars", "namespace": ns},
                "stringData": {"size": "large"}}))
            .await;
        let artifact = harness.publish_files(
            "painted",
            "main@sha1:c010",
            &[(
                "cm.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: painted\n\
                 data:\n  color: ${color}\n  size: ${size}\n",
            )],
        );
        harness.source("repo", &artifact).await;
        harness
            .create_kustomization(
                "painted",
                // With the cache gate, a reconcile that outruns the watch's copy of `vars`
                // (a loaded machine) finds no such source and is retried, as Flux's would be.
                json!({"retryInterval": "1s", "postBuild": {"substituteFrom": [
                    {"kind": "ConfigMap", "name": "vars"},
                    {"kind": "Secret", "name": "secret-vars"}]}}),
            )
            .await;
        harness
            .wait_ready("painted", "True", "ReconciliationSucceeded")
            .await;
        let painted = |color: &'static str| {
            let maps = harness.config_maps();
            async move {
                let data = maps.get("painted").await.ok()?.data?;
                (data.get("color").map(String::as_str) == Some(color)
                    && data.get("size").map(String::as_str) == Some("large"))
                .then_some(())
            }
        };
        assert!(painted("blue").await.is_some(), "cached: {cached}");
        // The owned-object watch the first apply started has listed.
        harness.sync_applied_configmaps().await;

        let mark = server.requests().len();
        harness.request_reconcile("painted", "once").await;
        harness.wait_handled("painted", "once").await;
        let reads = |resource: &str| {
            server.requests()[mark..]
                .iter()
                .filter(|r| r.user == user && r.verb == "get" && r.resource == resource)
                .map(|r| r.name.clone())
                .collect::<Vec<_>>()
        };
        if cached {
            assert_eq!(
                (reads("configmaps"), reads("secrets")),
                (vec![], vec![]),
                "from the watches"
            );
        } else {
            assert_eq!(
                (reads("configmaps"), reads("secrets")),
                (vec!["vars".to_string()], vec!["secret-vars".to_string()]),
                "read once each"
            );
        }

        harness
            .config_maps()
            .patch(
                "vars",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(json!({"data": {"color": "red"}})),
            )
            .await
            .unwrap();
        let mut asked = 0;
        let repainted = wait_for(Duration::from_secs(20), || {
            asked += 1;
            let token = format!("again-{asked}");
            let harness = &harness;
            let painted = &painted;
            async move {
                harness.request_reconcile("painted", &token).await;
                harness.wait_handled("painted", &token).await;
                painted("red").await
            }
        })
        .await;
        assert!(
            repainted.is_some(),
            "the edit is substituted (cached: {cached})"
        );
    }
}
