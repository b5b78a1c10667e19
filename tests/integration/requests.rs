//! What a reconciliation asks the API server: a quick one writes its status once and reads its
//! source from the watch cache; one that runs long still shows what is under way. The
//! controller authenticates as its own ServiceAccount, so its requests are told apart.

use std::time::Duration;

use serde_json::json;

use crate::support::cluster::wait_for;
use crate::support::controller::Harness;

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
        return;
    };
    let user = as_own_account(&mut harness).await;
    let artifact = harness.publish_files(
        "quick",
        "main@sha1:9a1c",
        &[(
            "cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: quick\n",
        )],
    );
    harness.source("repo", &artifact).await;
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
    // The owned-object watch the first apply started has listed by now.
    tokio::time::sleep(Duration::from_secs(1)).await;

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
    tokio::time::sleep(Duration::from_secs(1)).await;
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
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mark = server.requests().len();
    tokio::time::sleep(Duration::from_secs(3)).await;
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
    tokio::time::sleep(Duration::from_millis(500)).await;
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
