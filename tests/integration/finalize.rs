//! Deleting a Kustomization, as Flux's finalizer reports it to notification-controller: an
//! info event listing what it deleted (`<Kind>/<namespace>/<name> deleted`), and an error
//! event when pruning fails (the finalizer stays and the deletion is retried), then, as Flux's
//! deferred end of every reconciliation, the success event of a Ready Kustomization. All
//! carry the Ready condition's reason and the last applied revision.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::cluster::wait_for;
use crate::support::controller::Harness;
use crate::support::notification::{accepted_by_notification_controller, event_receiver};

/// The tenant's rights on ConfigMaps: everything but `delete`, unless `delete` is given.
fn tenant_role(ns: &str, delete: bool) -> Value {
    let mut verbs = vec!["get", "list", "watch", "create", "update", "patch"];
    if delete {
        verbs.push("delete");
    }
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "tenant", "namespace": ns},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": verbs}]})
}

/// A deletion event as notification-controller keeps it: its severity, the Ready condition's
/// reason and the last applied revision.
fn about_the_last_revision(event: &Value, severity: &str) {
    let event = accepted_by_notification_controller(event);
    assert_eq!(event["severity"], severity, "{event}");
    assert_eq!(event["reason"], "ReconciliationSucceeded", "{event}");
    assert_eq!(
        event["metadata"]["kustomize.toolkit.fluxcd.io/revision"], "main@sha1:de1e",
        "{event}"
    );
}

/// Where the Kustomization `tenant` applies, and where its ServiceAccount is.
#[derive(Clone, Copy, PartialEq)]
enum Cluster {
    /// The controller's own cluster, the account created there.
    Local,
    /// A cluster reached through `spec.kubeConfig` (the test cluster again, under an admin
    /// kubeconfig), whose account is only a name its RBAC binds: none exists locally.
    Remote,
}

/// A controller sending its events to `events_address`, and the Kustomization `tenant`, Ready,
/// which applied the ConfigMap `kept` as the ServiceAccount `tenant` (which may delete
/// ConfigMaps if `delete`).
async fn tenant_kustomization(
    events_address: &str,
    delete: bool,
    cluster: Cluster,
) -> (Harness, String) {
    let address = events_address.to_string();
    let harness =
        Harness::start_with(|options| options.reconcile.events_addr = Some(address.clone())).await;
    let ns = harness.cluster.namespace.clone();
    let mut objects = vec![
        tenant_role(&ns, delete),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "tenant", "namespace": ns},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "tenant"},
            "subjects": [{"kind": "ServiceAccount", "name": "tenant", "namespace": ns}]}),
    ];
    let mut spec = json!({"serviceAccountName": "tenant"});
    match cluster {
        Cluster::Local => objects.push(json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "tenant", "namespace": ns}})),
        Cluster::Remote => {
            objects.push(json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "kubeconfig", "namespace": ns},
                "stringData": {"value": harness.cluster.kubeconfig_yaml()}}));
            spec["kubeConfig"] = json!({"secretRef": {"name": "kubeconfig"}});
        }
    }
    for object in objects {
        harness.cluster.apply(&object).await;
    }
    let artifact = harness.publish_files(
        "kept",
        "main@sha1:de1e",
        &[("cm.yaml", &crate::support::artifacts::config_map("kept"))],
    );
    harness.source("repo", &artifact).await;
    harness.create_kustomization("tenant", spec).await;
    harness
        .wait_ready("tenant", "True", "ReconciliationSucceeded")
        .await;
    (harness, ns)
}

/// What notification-controller has received.
type Received = std::sync::Arc<std::sync::Mutex<Vec<Value>>>;

/// The event about `tenant` saying `message`, once notification-controller has it.
async fn event_about_tenant(received: &Received, message: &str) -> Option<Value> {
    wait_for(Duration::from_secs(30), || async {
        received
            .lock()
            .unwrap()
            .iter()
            .find(|e| e["involvedObject"]["name"] == "tenant" && e["message"] == message)
            .cloned()
    })
    .await
}

/// Whether the ConfigMap `kept` the Kustomization `tenant` applied is there.
async fn kept_exists(harness: &Harness) -> bool {
    harness
        .config_maps()
        .get_opt("kept")
        .await
        .unwrap()
        .is_some()
}

/// Whether the Kustomization `tenant` is gone (its finalizer released) within 30 s.
async fn tenant_goes(harness: &Harness) -> bool {
    wait_for(Duration::from_secs(30), || async {
        harness
            .kustomizations()
            .get_opt("tenant")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await
    .is_some()
}

#[tokio::test]
async fn deleting_reports_what_was_pruned_and_when_pruning_fails() {
    let (address, received) = event_receiver().await;
    let (harness, ns) = tenant_kustomization(&address, false, Cluster::Local).await;

    harness
        .kustomizations()
        .delete("tenant", &Default::default())
        .await
        .unwrap();
    let failed = event_about_tenant(&received, "pruning for deleted resource failed")
        .await
        .expect("the failed prune is reported");
    about_the_last_revision(&failed, "error");
    let held = harness.kustomizations().get("tenant").await.unwrap();
    assert!(
        held.metadata
            .finalizers
            .unwrap_or_default()
            .contains(&"finalizers.fluxcd.io".to_string()),
        "the finalizer stays until pruning succeeds"
    );
    assert!(kept_exists(&harness).await);

    harness.cluster.apply(&tenant_role(&ns, true)).await;
    let deleted = event_about_tenant(&received, &format!("ConfigMap/{ns}/kept deleted"))
        .await
        .expect("the retried deletion reports what it pruned");
    about_the_last_revision(&deleted, "info");
    assert!(
        tenant_goes(&harness).await,
        "the Kustomization goes once pruned"
    );
    assert!(!kept_exists(&harness).await);
    // As Flux's deferred end of the reconciliation that finalized it: a Ready Kustomization
    // ends as a success does, after what it deleted, and Git commit statuses follow it.
    let deleted_message = format!("ConfigMap/{ns}/kept deleted");
    let finished = wait_for(Duration::from_secs(30), || {
        let received = received.clone();
        let deleted_message = deleted_message.clone();
        async move {
            let received = received.lock().unwrap();
            let deleted = received
                .iter()
                .position(|e| e["message"] == deleted_message.as_str())?;
            received[deleted..]
                .iter()
                .find(|e| {
                    e["message"]
                        .as_str()
                        .is_some_and(|m| m.starts_with("Reconciliation finished in "))
                })
                .cloned()
        }
    })
    .await
    .expect("the finalizing reconciliation ends with Flux's success event");
    about_the_last_revision(&finished, "info");
    assert_eq!(
        finished["metadata"]["kustomize.toolkit.fluxcd.io/commit_status"], "update",
        "{finished}"
    );
}

/// As Flux's finalizer: when the account the Kustomization impersonates is gone (its
/// namespace being deleted, say), nothing can be pruned in its name, so the objects are
/// listed in an error event ("unable to prune objects: …") and left, and the finalizer goes.
#[tokio::test]
async fn deleting_after_the_tenant_account_is_gone_leaves_the_objects_and_says_so() {
    let (address, received) = event_receiver().await;
    let (harness, ns) = tenant_kustomization(&address, true, Cluster::Local).await;

    let accounts: kube::Api<k8s_openapi::api::core::v1::ServiceAccount> =
        kube::Api::namespaced(harness.cluster.client.clone(), &ns);
    accounts
        .delete("tenant", &Default::default())
        .await
        .unwrap();
    harness
        .kustomizations()
        .delete("tenant", &Default::default())
        .await
        .unwrap();
    let message = format!("unable to prune objects: \nConfigMap/{ns}/kept");
    let reported = event_about_tenant(&received, &message)
        .await
        .expect("the objects left behind are reported");
    about_the_last_revision(&reported, "error");
    assert!(tenant_goes(&harness).await, "the finalizer goes");
    assert!(kept_exists(&harness).await, "nothing was pruned");
}

/// Beyond Flux: a remote cluster's account is the remote cluster's, so its absence from the
/// controller's own cluster does not keep a deletion from pruning (Flux looks for it locally,
/// and not finding it leaves the objects behind).
#[tokio::test]
async fn deleting_a_remote_clusters_kustomization_prunes_though_its_account_is_not_local() {
    let (address, received) = event_receiver().await;
    let (harness, ns) = tenant_kustomization(&address, true, Cluster::Remote).await;

    harness
        .kustomizations()
        .delete("tenant", &Default::default())
        .await
        .unwrap();
    let deleted = event_about_tenant(&received, &format!("ConfigMap/{ns}/kept deleted"))
        .await
        .expect("the deletion reports what it pruned");
    about_the_last_revision(&deleted, "info");
    assert!(tenant_goes(&harness).await, "the finalizer goes");
    assert!(
        !kept_exists(&harness).await,
        "pruned as the remote cluster's account"
    );
}
