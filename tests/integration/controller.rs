//! The controller end to end: `controller::run` against the harness cluster, reconciling
//! Kustomizations built from artifacts served over loopback HTTP.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kustomize_controller::api::Kustomization;
use serde_json::{Value, json};

use crate::support::artifacts::{ArtifactServer, SourceKind};
use crate::support::cluster::{TestCluster, wait_for};
use crate::support::controller::{
    ControllerProcess, Harness, controller_kubeconfig, ready_message,
};
use crate::support::{http_get_text, repo_root};

#[tokio::test]
async fn applies_prunes_and_reports_like_flux() {
    let harness = Harness::start().await;
    let ns = harness.cluster.namespace.clone();
    let v1 = harness.publish("v1", "main@sha1:1111");
    harness
        .cluster
        .create_source(SourceKind::GitRepository, &ns, "repo", Some(&v1))
        .await;
    harness
        .create_kustomization(
            "app",
            json!({"postBuild": {"substitute": {"cluster": "test"}}}),
        )
        .await;
    let ready = harness
        .wait_ready("app", "True", "ReconciliationSucceeded")
        .await;
    assert_eq!(ready_message(&ready), "Applied revision: main@sha1:1111");
    let status = ready.status.clone().unwrap();
    assert_eq!(
        status.last_applied_revision.as_deref(),
        Some("main@sha1:1111")
    );
    assert_eq!(
        status.observed_generation,
        ready.metadata.generation.unwrap()
    );
    let entries: Vec<String> = status
        .inventory
        .unwrap()
        .entries
        .iter()
        .map(|e| e.id.clone())
        .collect();
    assert_eq!(
        entries,
        vec![
            format!("{ns}_app-legacy__ConfigMap"),
            format!("{ns}_app-settings__ConfigMap")
        ]
    );
    assert!(
        ready
            .metadata
            .finalizers
            .unwrap()
            .contains(&"finalizers.fluxcd.io".to_string())
    );
    let settings = harness.config_maps().get("app-settings").await.unwrap();
    assert_eq!(
        settings.data.as_ref().unwrap()["region"],
        "eu-west-1",
        "substitution defaults apply"
    );
    assert_eq!(
        settings.metadata.labels.unwrap()["kustomize.toolkit.fluxcd.io/name"],
        "app"
    );

    // A new revision applies and prunes what it no longer has.
    let v2 = harness.publish("v2", "main@sha1:2222");
    harness
        .cluster
        .set_artifact(SourceKind::GitRepository, &ns, "repo", &v2)
        .await;
    let api = harness.kustomizations();
    let applied = wait_for(Duration::from_secs(30), || async {
        let object = api.get("app").await.ok()?;
        (object.status.as_ref()?.last_applied_revision.as_deref() == Some("main@sha1:2222"))
            .then_some(object)
    })
    .await
    .expect("the new revision is applied");
    assert_eq!(applied.status.unwrap().inventory.unwrap().entries.len(), 1);
    assert!(
        harness
            .config_maps()
            .get_opt("app-legacy")
            .await
            .unwrap()
            .is_none(),
        "pruned"
    );
    assert_eq!(
        harness
            .config_maps()
            .get("app-settings")
            .await
            .unwrap()
            .data
            .unwrap()["color"],
        "green"
    );

    // kubectl drift is reverted on the next reconcile (requested like `flux reconcile`).
    let edit = PatchParams {
        field_manager: Some("kubectl-edit".into()),
        ..PatchParams::default()
    };
    harness
        .config_maps()
        .patch(
            "app-settings",
            &edit,
            &Patch::Merge(json!({"data": {"color": "red"}})),
        )
        .await
        .unwrap();
    api.patch(
        "app",
        &PatchParams::default(),
        &Patch::Merge(
            json!({"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": "now-1"}}}),
        ),
    )
    .await
    .unwrap();
    let reverted = wait_for(Duration::from_secs(30), || async {
        let object = api.get("app").await.ok()?;
        let handled = object.status.as_ref()?.last_handled_reconcile_at.as_deref() == Some("now-1");
        let color = harness
            .config_maps()
            .get("app-settings")
            .await
            .ok()?
            .data?
            .get("color")
            .cloned();
        (handled && color.as_deref() == Some("green")).then_some(())
    })
    .await;
    assert!(
        reverted.is_some(),
        "drift is reverted and requestedAt recorded"
    );

    // Deleting the Kustomization prunes (MirrorPrune with prune: true) and drops the finalizer.
    api.delete("app", &DeleteParams::default()).await.unwrap();
    let gone = wait_for(Duration::from_secs(30), || async {
        let ks_gone = api.get_opt("app").await.ok()?.is_none();
        let cm_gone = harness
            .config_maps()
            .get_opt("app-settings")
            .await
            .ok()?
            .is_none();
        (ks_gone && cm_gone).then_some(())
    })
    .await;
    assert!(
        gone.is_some(),
        "deletion prunes the inventory and removes the finalizer"
    );
}

#[tokio::test]
async fn failures_are_reported_without_applying_anything() {
    let harness = Harness::start().await;
    let ns = harness.cluster.namespace.clone();
    let broken = harness.publish("broken", "main@sha1:bad");
    harness
        .cluster
        .create_source(SourceKind::GitRepository, &ns, "repo", Some(&broken))
        .await;
    harness.create_kustomization("broken", json!({})).await;
    let failed = harness.wait_ready("broken", "False", "BuildFailed").await;
    assert!(
        ready_message(&failed).contains("missing.yaml"),
        "{}",
        ready_message(&failed)
    );
    // As Flux's: Reconciling keeps the step that failed, with the retry reason.
    let (why, what) = reconciling(&failed);
    assert_eq!(why, "ProgressingWithRetry");
    assert!(
        what.starts_with("Building manifests for revision main@sha1:bad with a timeout of "),
        "{what}"
    );
    assert_eq!(
        failed
            .status
            .as_ref()
            .unwrap()
            .last_attempted_revision
            .as_deref(),
        Some("main@sha1:bad")
    );
    assert!(
        failed.status.unwrap().inventory.is_none(),
        "nothing applied"
    );

    let mut tampered = harness.publish("v1", "main@sha1:3333");
    tampered.digest = format!("sha256:{}", "0".repeat(64));
    harness
        .cluster
        .create_source(SourceKind::GitRepository, &ns, "tampered", Some(&tampered))
        .await;
    harness
        .create_kustomization(
            "tampered",
            json!({"sourceRef": {"kind": "GitRepository", "name": "tampered"}}),
        )
        .await;
    let failed = harness
        .wait_ready("tampered", "False", "ArtifactFailed")
        .await;
    assert!(
        ready_message(&failed).contains("doesn't match"),
        "{}",
        ready_message(&failed)
    );
    let (_, what) = reconciling(&failed);
    assert!(
        what.starts_with("Fetching manifests for revision main@sha1:3333"),
        "{what}"
    );
    assert_eq!(
        failed.status.as_ref().unwrap().last_attempted_revision,
        None,
        "as Flux: attempted only once downloaded"
    );

    let invalid = harness.publish_files(
        "invalid",
        "main@sha1:1bad",
        &[
            (
                "cm.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: Not_A_Name\ndata:\n  a: b\n",
            ),
            ("kustomization.yaml", "resources:\n- cm.yaml\n"),
        ],
    );
    harness
        .cluster
        .create_source(SourceKind::GitRepository, &ns, "invalid", Some(&invalid))
        .await;
    harness
        .create_kustomization(
            "invalid",
            json!({"sourceRef": {"kind": "GitRepository", "name": "invalid"}}),
        )
        .await;
    let failed = harness
        .wait_ready("invalid", "False", "ReconciliationFailed")
        .await;
    let message = ready_message(&failed);
    assert!(
        message.starts_with(&format!("ConfigMap/{ns}/Not_A_Name ")) && message.ends_with('\n'),
        "as Flux's, the error then what changed before it (nothing): {message:?}"
    );
    let (_, what) = reconciling(&failed);
    assert!(
        what.starts_with("Detecting drift for revision main@sha1:1bad"),
        "{what}"
    );
    assert!(
        harness
            .config_maps()
            .get_opt("app-settings")
            .await
            .unwrap()
            .is_none()
    );

    harness
        .create_kustomization(
            "orphan",
            json!({"sourceRef": {"kind": "GitRepository", "name": "absent"}}),
        )
        .await;
    let failed = harness
        .wait_ready("orphan", "False", "ArtifactFailed")
        .await;
    assert_eq!(
        ready_message(&failed),
        r#"GitRepository.source.toolkit.fluxcd.io "absent" not found"#,
        "the NotFound of the watch's cache, as Flux's Ready carries it"
    );
}

#[tokio::test]
async fn dependencies_gate_reconciliation() {
    let harness = Harness::start().await;
    let ns = harness.cluster.namespace.clone();
    let v2 = harness.publish("v2", "main@sha1:4444");
    harness
        .cluster
        .create_source(SourceKind::GitRepository, &ns, "repo", Some(&v2))
        .await;
    harness
        .create_kustomization(
            "apps",
            json!({"dependsOn": [{"name": "infra"}], "namePrefix": "apps-"}),
        )
        .await;
    let waiting = harness
        .wait_ready("apps", "False", "DependencyNotReady")
        .await;
    assert!(
        ready_message(&waiting).contains(&format!("dependency '{ns}/infra'")),
        "{}",
        ready_message(&waiting)
    );
    harness
        .create_kustomization("infra", json!({"namePrefix": "infra-"}))
        .await;
    harness
        .wait_ready("infra", "True", "ReconciliationSucceeded")
        .await;
    harness
        .wait_ready("apps", "True", "ReconciliationSucceeded")
        .await;
    assert!(
        harness
            .config_maps()
            .get_opt("apps-app-settings")
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test]
async fn suspended_kustomizations_are_left_alone() {
    let harness = Harness::start().await;
    let ns = harness.cluster.namespace.clone();
    let v1 = harness.publish("v1", "main@sha1:5555");
    harness
        .cluster
        .create_source(SourceKind::GitRepository, &ns, "repo", Some(&v1))
        .await;
    harness
        .create_kustomization("paused", json!({"suspend": true}))
        .await;
    // The controller took it in (its finalizer, added before the suspension is read) and
    // applied nothing.
    let taken_in = wait_for(Duration::from_secs(30), || async {
        let object = harness.kustomizations().get("paused").await.ok()?;
        object
            .metadata
            .finalizers
            .unwrap_or_default()
            .iter()
            .any(|f| f == "finalizers.fluxcd.io")
            .then_some(())
    })
    .await;
    assert!(taken_in.is_some(), "the controller saw the Kustomization");
    // The run that added the finalizer read the suspension and ended: only then does the
    // absence of what it would have applied tell anything.
    let ended = wait_for(Duration::from_secs(30), || async {
        let text = harness.metrics.encode();
        let ended: f64 = text
            .lines()
            .filter(|line| line.starts_with("controller_runtime_reconcile_total{"))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
            .sum();
        (ended >= 1.0).then_some(())
    })
    .await;
    assert!(ended.is_some(), "the suspended Kustomization's run ended");
    assert!(
        harness
            .config_maps()
            .get_opt("app-settings")
            .await
            .unwrap()
            .is_none()
    );
    harness
        .create_kustomization("paused", json!({"suspend": false}))
        .await;
    harness
        .wait_ready("paused", "True", "ReconciliationSucceeded")
        .await;
}

/// As Flux's deferred `finalizeStatus`: suspending a Ready Kustomization (a new generation)
/// observes that generation, so the Kustomizations that depend on it are not held back by
/// it: a new revision of their own source reaches them.
#[tokio::test]
async fn a_suspended_kustomization_observes_its_generation_and_its_dependents_go_on() {
    let harness = Harness::start().await;
    let ns = harness.cluster.namespace.clone();
    let v1 = harness.publish("v1", "main@sha1:5a01");
    harness
        .cluster
        .create_source(SourceKind::GitRepository, &ns, "repo", Some(&v1))
        .await;
    harness.create_kustomization("base", json!({})).await;
    harness
        .wait_ready("base", "True", "ReconciliationSucceeded")
        .await;
    harness
        .cluster
        .create_source(SourceKind::GitRepository, &ns, "app-repo", Some(&v1))
        .await;
    harness
        .create_kustomization(
            "app",
            json!({"dependsOn": [{"name": "base"}], "namePrefix": "app-",
                "sourceRef": {"kind": "GitRepository", "name": "app-repo"}}),
        )
        .await;
    harness
        .wait_ready("app", "True", "ReconciliationSucceeded")
        .await;

    harness
        .create_kustomization("base", json!({"suspend": true}))
        .await;
    let observed = wait_for(Duration::from_secs(30), || async {
        let object = harness.kustomizations().get("base").await.ok()?;
        let status = object.status?;
        (Some(status.observed_generation) == object.metadata.generation
            && status.conditions.iter().all(|c| c.type_ != "Reconciling"))
        .then_some(())
    })
    .await;
    assert!(
        observed.is_some(),
        "the suspension's generation is observed"
    );

    let v2 = harness.publish("v2", "main@sha1:5a02");
    harness
        .cluster
        .set_artifact(SourceKind::GitRepository, &ns, "app-repo", &v2)
        .await;
    let moved_on = wait_for(Duration::from_secs(30), || async {
        let object = harness.kustomizations().get("app").await.ok()?;
        (object.status?.last_applied_revision.as_deref() == Some("main@sha1:5a02")).then_some(())
    })
    .await;
    assert!(
        moved_on.is_some(),
        "the dependent applied the new revision: {:?}",
        harness
            .kustomizations()
            .get("app")
            .await
            .ok()
            .and_then(|o| o.status)
    );
}

/// The shipped binary: `kustomize-controller run` against the test cluster, its metrics and
/// probes, and a clean exit on SIGTERM.
#[tokio::test]
async fn the_run_command_reconciles_serves_metrics_and_stops_on_sigterm() {
    let cluster = TestCluster::start().await;
    let kubeconfig = controller_kubeconfig(&cluster).await;
    let artifacts = ArtifactServer::start().await;
    let ns = cluster.namespace.clone();
    let v1 = artifacts.publish_dir(
        "v1.tar.gz",
        "main@sha1:6666",
        &repo_root().join("tests/fixtures/controller/v1"),
    );
    cluster
        .create_source(SourceKind::GitRepository, &ns, "repo", Some(&v1))
        .await;
    let mut controller = ControllerProcess::start_with_kubeconfig(
        &kubeconfig,
        &ns,
        &[
            "--enable-leader-election",
            "--leader-election-retry-period=100ms",
            "--log-encoding=json",
        ],
    );
    cluster
        .apply(&json!({
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": "app", "namespace": ns},
            "spec": {"interval": "10m", "prune": true, "targetNamespace": ns,
                "sourceRef": {"kind": "GitRepository", "name": "repo"}},
        }))
        .await;
    let api: Api<Kustomization> = Api::namespaced(cluster.client.clone(), &ns);
    let ready = wait_for(Duration::from_secs(60), || async {
        let object = api.get("app").await.ok()?;
        let condition = object
            .status
            .as_ref()?
            .conditions
            .iter()
            .find(|c| c.type_ == "Ready")?
            .clone();
        (condition.status == "True").then_some(())
    })
    .await;
    if ready.is_none() {
        panic!("never Ready; controller log:\n{}", controller.log());
    }
    // Metrics are recorded just after the status write that made it Ready: poll for them.
    let expected = [
        "gotk_reconcile_duration_seconds_count{kind=\"Kustomization\",name=\"app\"",
        "kustomize_controller_objects_total{action=\"created\"}",
    ];
    let metrics = wait_for(Duration::from_secs(10), || async {
        let flux = http_get_text(&controller.metrics, "/metrics").await?;
        let extra = http_get_text(&controller.metrics, "/metrics/extra").await?;
        let text = format!("{flux}\n{extra}");
        expected.iter().all(|m| text.contains(m)).then_some(text)
    })
    .await;
    assert!(metrics.is_some(), "metrics {expected:?} are served");
    let ready_probe = http_get_text(&controller.health, "/readyz").await.unwrap();
    assert!(ready_probe.starts_with("HTTP/1.1 200"), "{ready_probe}");
    // controller-runtime's handler for Flux's one check: alone at its sub-path, and listed.
    let ping = http_get_text(&controller.health, "/healthz/ping")
        .await
        .unwrap();
    assert!(
        ping.starts_with("HTTP/1.1 200") && ping.ends_with("\r\n\r\nok"),
        "{ping}"
    );
    let listed = http_get_text(&controller.health, "/readyz?verbose")
        .await
        .unwrap();
    assert!(
        listed.ends_with("[+]ping ok\nhealthz check passed\n"),
        "{listed}"
    );
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(cluster.client.clone(), &ns);
    let lease = leases
        .get("kustomize-controller-leader-election")
        .await
        .unwrap();
    assert!(lease.spec.unwrap().holder_identity.is_some());

    controller.terminate();
    let status = tokio::time::timeout(Duration::from_secs(30), controller.child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "exits cleanly on SIGTERM: {status}");
    manager_lines_in_controller_runtimes_order(&controller.log());
}

/// The start and stop of the process say what controller-runtime's manager and controller
/// say for Flux's, in their order (JSON lines, Flux's default encoding): the servers, the
/// lease, each watch ("Starting EventSource", named as Go prints a kind source), the
/// controller and its workers; on SIGTERM the runnables stopped in controller-runtime's order.
fn manager_lines_in_controller_runtimes_order(log: &str) {
    let lines: Vec<serde_json::Value> = log
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    let message = |line: &serde_json::Value| line["msg"].as_str().unwrap_or("").to_string();
    let expected = [
        "starting manager",
        "Attempting to acquire leader lease",
        "Successfully acquired lease",
        "Starting EventSource",
        "Starting Controller",
        "Starting workers",
        "Stopping and waiting for non leader election runnables",
        "Stopping and waiting for leader election runnables",
        "Shutdown signal received, waiting for all workers to finish",
        "All workers finished",
        "Stopping and waiting for caches",
        "Stopping and waiting for webhooks",
        "Stopping and waiting for HTTP servers",
        "shutting down server",
        "Wait completed, proceeding to shutdown the manager",
    ];
    let mut position = 0;
    for want in expected {
        match lines[position..]
            .iter()
            .position(|line| message(line).starts_with(want))
        {
            Some(found) => position += found + 1,
            None => panic!("no {want:?} after line {position} of:\n{log}"),
        }
    }
    let sources: Vec<&str> = lines
        .iter()
        .filter(|line| line["msg"] == "Starting EventSource")
        .map(|line| {
            assert_eq!(line["controller"], "kustomization", "{line}");
            assert_eq!(line["controllerKind"], "Kustomization", "{line}");
            line["source"].as_str().unwrap_or("")
        })
        .collect();
    assert_eq!(
        sources[..4],
        [
            "kind source: *v1.Kustomization",
            "kind source: *v1.OCIRepository",
            "kind source: *v1.GitRepository",
            "kind source: *v1.Bucket",
        ]
    );
    let servers: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|line| line["msg"] == "starting server" || line["msg"] == "Serving metrics server")
        .collect();
    assert_eq!(servers.len(), 2, "{log}");
    assert!(
        servers
            .iter()
            .any(|line| line["name"] == "health probe" && line["addr"].is_string()),
        "{log}"
    );
    assert!(
        servers.iter().any(|line| {
            line["logger"] == "controller-runtime.metrics" && line["secure"] == false
        }),
        "{log}"
    );
}

#[tokio::test]
async fn leader_election_hands_over() {
    use kustomize_controller::controller::leader::LeaderElection;
    let cluster = TestCluster::start().await;
    let elector = |identity: &str| {
        LeaderElection::new(
            cluster.client.clone(),
            &cluster.namespace,
            "kc-leader",
            identity,
            Duration::from_secs(1),
            Duration::from_millis(800),
            Duration::from_millis(100),
        )
    };
    let (first, second) = (elector("first"), elector("second"));
    assert!(first.try_acquire().await.unwrap());
    assert!(
        !second.try_acquire().await.unwrap(),
        "a held Lease is not taken"
    );
    assert!(first.try_acquire().await.unwrap(), "the holder renews");
    // As client-go's leader: a renewal writes from the Lease its last write left, without
    // reading it first; when another client changed the Lease since, that write is refused
    // and the Lease is read and renewed.
    let lease_reads = || {
        cluster.server().map(|server| {
            server
                .requests()
                .iter()
                .filter(|r| r.resource == "leases" && r.verb == "get")
                .count()
        })
    };
    let reads = lease_reads();
    assert!(
        first.try_acquire().await.unwrap(),
        "the holder renews again"
    );
    assert_eq!(lease_reads(), reads, "a renewal reads nothing");
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(cluster.client.clone(), &cluster.namespace);
    leases
        .patch(
            "kc-leader",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"metadata": {"labels": {"seen-by": "someone"}}})),
        )
        .await
        .unwrap();
    assert!(first.try_acquire().await.unwrap(), "renewed after a read");
    if let (Some(before), Some(after)) = (reads, lease_reads()) {
        assert_eq!(after, before + 1, "one read after the refused write");
    }
    let lease = leases.get("kc-leader").await.unwrap();
    assert_eq!(lease.metadata.labels.unwrap()["seen-by"], "someone");
    assert_eq!(
        lease.spec.unwrap().holder_identity.as_deref(),
        Some("first")
    );
    // Another holder took the Lease since our last write: the renewal's write is refused,
    // the Lease is read, and the holder keeps it.
    let now = k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S.%6fZ")
        .to_string();
    leases
        .patch(
            "kc-leader",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(
                json!({"spec": {"holderIdentity": "intruder", "renewTime": now}}),
            ),
        )
        .await
        .unwrap();
    assert!(!first.try_acquire().await.unwrap(), "not taken back");
    let holder = leases
        .get("kc-leader")
        .await
        .unwrap()
        .spec
        .unwrap()
        .holder_identity;
    assert_eq!(holder.as_deref(), Some("intruder"));
    // The first replica stops renewing; the Lease expires and the second takes over.
    tokio::time::timeout(Duration::from_secs(10), second.acquire())
        .await
        .expect("handed over");
    assert!(!first.try_acquire().await.unwrap());
    let lost = tokio::time::timeout(Duration::from_secs(10), first.hold())
        .await
        .unwrap();
    assert!(lost.to_string().contains("leader election lost"), "{lost}");
}

const CONFIG_MAP: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  greeting: ${greeting}\n";

#[tokio::test]
async fn sops_secrets_are_applied_decrypted() {
    let harness = Harness::start().await;
    let ns = harness.cluster.namespace.clone();
    let encrypted = harness.age_encrypted_secret_and_keys().await;
    let artifact = harness.publish_files(
        "sops",
        "main@sha1:5005",
        &[
            ("secret.yaml", &encrypted),
            ("kustomization.yaml", "resources:\n- secret.yaml\n"),
        ],
    );
    harness.source("repo", &artifact).await;
    harness
        .create_kustomization(
            "secrets",
            json!({"decryption": {"provider": "sops", "secretRef": {"name": "sops-keys"}}}),
        )
        .await;
    harness
        .wait_ready("secrets", "True", "ReconciliationSucceeded")
        .await;
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(harness.cluster.client.clone(), &ns);
    let secret = secrets.get("age").await.unwrap();
    assert_eq!(secret.data.unwrap()["key"].0, b"value");

    // Without keys the still-encrypted Secret is refused before anything is applied, with
    // the reason of Flux's apply step, which refuses it there.
    harness
        .create_kustomization("nokeys", json!({"namePrefix": "x-"}))
        .await;
    let failed = harness
        .wait_ready("nokeys", "False", "ReconciliationFailed")
        .await;
    assert!(
        ready_message(&failed).ends_with(
            "x-age is SOPS encrypted, configuring decryption is required for this secret to be reconciled"
        ),
        "{}",
        ready_message(&failed)
    );
    assert!(secrets.get_opt("x-age").await.unwrap().is_none());
}

/// With object-level workload identity on, a Kustomization that names a service account for
/// decryption (or gets `--default-decryption-service-account`) never decrypts with the
/// controller's own credentials: a Vault key (whose token Flux gets for a ServiceAccount only
/// with `--sops-vault-configmap`) fails the build saying what to add.
#[tokio::test]
async fn decryption_as_a_service_account_never_uses_the_controllers_vault_token() {
    let harness = Harness::start_with(|options| {
        options.reconcile.object_level_workload_identity = true;
        options.reconcile.default_decryption_service_account = Some("fallback".into());
        options.reconcile.environment = std::sync::Arc::new(vec![
            (
                "VAULT_TOKEN".to_string(),
                "controllers-own-token".to_string(),
            ),
            ("VAULT_ADDR".to_string(), "http://127.0.0.1:9".to_string()),
        ]);
    })
    .await;
    let fixtures = repo_root().join("tests/fixtures/sops/flux/internal/controller/testdata/sops");
    let encrypted = std::fs::read_to_string(fixtures.join("algorithms/pgp.yaml")).unwrap();
    let mut object = kustomize_controller::yaml::parse_single(
        &encrypted,
        kustomize_controller::yaml::Schema::Kyaml,
    )
    .map(Value::from)
    .unwrap();
    object["sops"]["pgp"] = json!([]);
    object["sops"]["hc_vault"] = json!([{"vault_address": "http://127.0.0.1:9", "engine_path": "sops",
        "key_name": "vault", "created_at": "2026-11-25T00:00:00Z", "enc": "vault:v1:AAAA"}]);
    let artifact = harness.publish_files(
        "identity",
        "main@sha1:6006",
        &[
            ("secret.yaml", &object.to_string()),
            ("kustomization.yaml", "resources:\n- secret.yaml\n"),
        ],
    );
    harness.source("repo", &artifact).await;
    harness
        .create_kustomization(
            "identity",
            json!({"decryption": {"provider": "sops", "serviceAccountName": "tenant"}}),
        )
        .await;
    let failed = harness.wait_ready("identity", "False", "BuildFailed").await;
    let message = ready_message(&failed);
    assert!(
        message.contains(&format!(
            "a Vault token is exchanged for the service account '{}/tenant' only where the controller runs with --sops-vault-configmap",
            harness.cluster.namespace
        )) && message.contains("sops.vault-token"),
        "{message}"
    );
    // Without one of its own, a Kustomization decrypts as --default-decryption-service-account.
    harness
        .create_kustomization("defaulted", json!({"decryption": {"provider": "sops"}}))
        .await;
    let failed = harness
        .wait_ready("defaulted", "False", "BuildFailed")
        .await;
    let message = ready_message(&failed);
    assert!(
        message.contains(&format!(
            "a Vault token is exchanged for the service account '{}/fallback' only where the controller runs with --sops-vault-configmap",
            harness.cluster.namespace
        )),
        "{message}"
    );
}

#[tokio::test]
async fn substitute_from_required_and_optional_sources() {
    let harness = Harness::start().await;
    let ns = harness.cluster.namespace.clone();
    let artifact = harness.publish_files("vars", "main@sha1:7007", &[("cm.yaml", CONFIG_MAP)]);
    harness.source("repo", &artifact).await;
    harness
        .create_kustomization(
            "vars",
            json!({"postBuild": {"substituteFrom": [
                {"kind": "ConfigMap", "name": "cluster-vars"},
                {"kind": "Secret", "name": "maybe", "optional": true},
            ]}}),
        )
        .await;
    // As Flux: the first object substituted fails, naming the source as fluxcd/pkg does.
    let failed = harness.wait_ready("vars", "False", "BuildFailed").await;
    assert_eq!(
        ready_message(&failed),
        "post build failed for 'ConfigMap.v1.[noGrp]/settings': substitute from 'ConfigMap/cluster-vars' error: configmaps \"cluster-vars\" not found"
    );
    // Objects that opt out of substitution never ask for the variables: nothing fails.
    let opted_out = CONFIG_MAP.replace(
        "  name: settings\n",
        "  name: verbatim\n  annotations:\n    kustomize.toolkit.fluxcd.io/substitute: disabled\n",
    );
    let artifact = harness.publish_files("verbatim", "main@sha1:7008", &[("cm.yaml", &opted_out)]);
    harness.source("verbatim", &artifact).await;
    harness
        .create_kustomization(
            "verbatim",
            json!({"sourceRef": {"kind": "GitRepository", "name": "verbatim"},
                "postBuild": {"substituteFrom": [{"kind": "ConfigMap", "name": "absent"}]}}),
        )
        .await;
    harness
        .wait_ready("verbatim", "True", "ReconciliationSucceeded")
        .await;
    let verbatim = harness.config_maps().get("verbatim").await.unwrap();
    assert_eq!(verbatim.data.unwrap()["greeting"], "${greeting}");
    harness
        .cluster
        .apply(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cluster-vars", "namespace": ns},
            "data": {"greeting": "hello\n"}}))
        .await;
    harness.request_reconcile("vars", "vars-1").await;
    harness
        .wait_ready("vars", "True", "ReconciliationSucceeded")
        .await;
    let settings = harness.config_maps().get("settings").await.unwrap();
    assert_eq!(
        settings.data.unwrap()["greeting"],
        "hello",
        "newlines are stripped from values"
    );
}

const DEPLOYMENT: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 1\n  selector:\n    matchLabels:\n      app: web\n  template:\n    metadata:\n      labels:\n        app: web\n    spec:\n      containers:\n      - name: web\n        image: nginx\n";

#[tokio::test]
async fn health_check_failure_then_recovery() {
    let harness = Harness::start().await;
    let ns = harness.cluster.namespace.clone();
    let artifact = harness.publish_files("web", "main@sha1:8008", &[("deploy.yaml", DEPLOYMENT)]);
    harness.source("repo", &artifact).await;
    harness
        .create_kustomization(
            "web",
            // Flux's shortest timeout: a shorter one is raised to 30s.
            json!({"wait": true, "timeout": "1s", "retryInterval": "1h"}),
        )
        .await;
    // Two checks of 30s fit: as in Flux, the source's first sighting may run the Kustomization
    // once more when it arrives before the first attempt has recorded its revision.
    let failed = harness
        .wait_ready_within(
            Duration::from_secs(100),
            "web",
            "False",
            "HealthCheckFailed",
        )
        .await;
    let message = ready_message(&failed);
    let checks = format!("timeout waiting for: [Deployment/{ns}/web status: 'InProgress']");
    assert!(
        message.starts_with("health check failed after ") && message.ends_with(&checks),
        "as Flux's Ready: {message}"
    );
    // Its controller owns the status and, without kubelets, no Pod becomes available: a
    // revision that asks for none is healthy.
    let scaled = harness.publish_files(
        "web-scaled",
        "main@sha1:9009",
        &[(
            "deploy.yaml",
            &DEPLOYMENT.replace("replicas: 1", "replicas: 0"),
        )],
    );
    harness
        .cluster
        .set_artifact(SourceKind::GitRepository, &ns, "repo", &scaled)
        .await;
    let ready = harness
        .wait_ready("web", "True", "ReconciliationSucceeded")
        .await;
    let healthy = ready
        .status
        .unwrap()
        .conditions
        .into_iter()
        .find(|c| c.type_ == "Healthy")
        .unwrap();
    assert_eq!(healthy.status, "True");
}

#[tokio::test]
async fn deletion_policies() {
    let harness = Harness::start().await;
    let artifact = harness.publish_files(
        "cm",
        "main@sha1:9009",
        &[(
            "cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  a: b\n",
        )],
    );
    harness.source("repo", &artifact).await;
    let api = harness.kustomizations();
    for (name, policy, prune, survives) in [
        ("orphan", "Orphan", true, true),
        ("delete", "Delete", false, false),
        ("mirror-off", "MirrorPrune", false, true),
        ("wait", "WaitForTermination", true, false),
    ] {
        harness
            .create_kustomization(
                name,
                json!({"namePrefix": format!("{name}-"), "prune": prune, "deletionPolicy": policy}),
            )
            .await;
        harness
            .wait_ready(name, "True", "ReconciliationSucceeded")
            .await;
        api.delete(name, &DeleteParams::default()).await.unwrap();
        let gone = wait_for(Duration::from_secs(30), || async {
            api.get_opt(name).await.ok()?.is_none().then_some(())
        })
        .await;
        assert!(gone.is_some(), "{name}: the finalizer is removed");
        let object = harness
            .config_maps()
            .get_opt(&format!("{name}-cm"))
            .await
            .unwrap();
        assert_eq!(
            object.is_some(),
            survives,
            "{name}: {policy} with prune={prune}"
        );
    }
}

#[tokio::test]
async fn impersonation_without_rights_fails_the_reconciliation() {
    let harness = Harness::start().await;
    let artifact = harness.publish_files(
        "cm",
        "main@sha1:a00a",
        &[(
            "cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n",
        )],
    );
    harness.source("repo", &artifact).await;
    harness
        .create_kustomization("tenant", json!({"serviceAccountName": "tenant"}))
        .await;
    let failed = harness
        .wait_ready("tenant", "False", "ReconciliationFailed")
        .await;
    assert!(
        ready_message(&failed).contains("forbidden"),
        "{}",
        ready_message(&failed)
    );
    assert!(harness.config_maps().get_opt("cm").await.unwrap().is_none());
}

/// As Flux: a source the API server fails to return (the DirectSourceFetch gate reads it
/// there) is ArtifactFailed on Ready with Flux's "unable to get source", sends no event, and
/// is tried again with the work queue's backoff until it is read.
#[tokio::test]
async fn an_unreadable_source_is_retried_with_backoff_and_no_event() {
    let harness = Harness::start_with(|options| options.reconcile.direct_source_fetch = true).await;
    let Some(server) = harness.cluster.server() else {
        eprintln!("skipped: needs fault injection");
        return;
    };
    let ns = harness.cluster.namespace.clone();
    let config_map = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n";
    let artifact =
        harness.publish_files("unreadable", "main@sha1:d00d", &[("cm.yaml", config_map)]);
    harness.source("repo", &artifact).await;
    server.inject(crate::support::apiserver::Fault {
        dry_run: None,
        verb: Some("get".into()),
        resource: Some("gitrepositories".into()),
        remaining: 3,
        code: 500,
        retry_after: None,
    });
    harness.create_kustomization("unreadable", json!({})).await;
    let failed = harness
        .wait_ready("unreadable", "False", "ArtifactFailed")
        .await;
    let message = ready_message(&failed);
    assert!(
        message.starts_with(&format!("unable to get source '{ns}/repo': ")),
        "{message}"
    );
    harness
        .wait_ready("unreadable", "True", "ReconciliationSucceeded")
        .await;
    // Events are written in order: once the success is there, a failure's would be too.
    let events: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(harness.cluster.client.clone(), &ns);
    let ours = |event: &k8s_openapi::api::core::v1::Event| {
        event.involved_object.name.as_deref() == Some("unreadable")
    };
    let listed = wait_for(Duration::from_secs(30), || async {
        let list = events.list(&Default::default()).await.ok()?;
        list.items
            .iter()
            .any(|e| ours(e) && e.reason.as_deref() == Some("ReconciliationSucceeded"))
            .then_some(list.items)
    })
    .await
    .expect("the success's event");
    let failures: Vec<_> = listed
        .iter()
        .filter(|e| ours(e) && e.reason.as_deref() == Some("ArtifactFailed"))
        .collect();
    assert!(failures.is_empty(), "{failures:?}");
}

#[tokio::test]
async fn api_errors_mid_apply_converge_without_wrong_pruning() {
    let harness = Harness::start().await;
    let Some(server) = harness.cluster.server() else {
        eprintln!("skipped: needs fault injection");
        return;
    };
    let ns = harness.cluster.namespace.clone();
    let two = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: one\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: two\n";
    let artifact = harness.publish_files("two", "main@sha1:b00b", &[("cms.yaml", two)]);
    harness.source("repo", &artifact).await;
    harness
        .create_kustomization("flaky", json!({"retryInterval": "1s"}))
        .await;
    harness
        .wait_ready("flaky", "True", "ReconciliationSucceeded")
        .await;

    // The next revision changes both objects; applying them fails a few times.
    let changed = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: one\ndata:\n  v: \"2\"\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: two\ndata:\n  v: \"2\"\n";
    let next = harness.publish_files("two-v2", "main@sha1:c00c", &[("cms.yaml", changed)]);
    server.inject(crate::support::apiserver::Fault {
        dry_run: None,
        verb: Some("patch".into()),
        resource: Some("configmaps".into()),
        remaining: 3,
        code: 500,
        retry_after: None,
    });
    harness
        .cluster
        .set_artifact(SourceKind::GitRepository, &ns, "repo", &next)
        .await;
    let failed = harness
        .wait_ready("flaky", "False", "ReconciliationFailed")
        .await;
    assert_eq!(
        failed
            .status
            .as_ref()
            .unwrap()
            .inventory
            .as_ref()
            .unwrap()
            .entries
            .len(),
        2,
        "the inventory is kept"
    );
    assert!(
        harness
            .config_maps()
            .get_opt("one")
            .await
            .unwrap()
            .is_some(),
        "nothing was pruned"
    );
    assert!(
        harness
            .config_maps()
            .get_opt("two")
            .await
            .unwrap()
            .is_some(),
        "nothing was pruned"
    );
    let api = harness.kustomizations();
    let converged = wait_for(Duration::from_secs(30), || async {
        let object = api.get("flaky").await.ok()?;
        (object.status.as_ref()?.last_applied_revision.as_deref() == Some("main@sha1:c00c"))
            .then_some(())
    })
    .await;
    assert!(converged.is_some(), "the retry converges");
    assert_eq!(
        harness
            .config_maps()
            .get("two")
            .await
            .unwrap()
            .data
            .unwrap()["v"],
        "2"
    );
}

#[tokio::test]
async fn events_carry_the_revision() {
    let harness = Harness::start().await;
    let ns = harness.cluster.namespace.clone();
    let v1 = harness.publish("v1", "main@sha1:e00e");
    harness.source("repo", &v1).await;
    harness.create_kustomization("noisy", json!({})).await;
    harness
        .wait_ready("noisy", "True", "ReconciliationSucceeded")
        .await;
    let events: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(harness.cluster.client.clone(), &ns);
    let event = |reason: &'static str| {
        let events = events.clone();
        async move {
            wait_for(Duration::from_secs(10), || async {
                let list = events.list(&Default::default()).await.ok()?;
                list.items.into_iter().find(|e| {
                    e.involved_object.name.as_deref() == Some("noisy")
                        && e.reason.as_deref() == Some(reason)
                })
            })
            .await
            .unwrap_or_else(|| panic!("a {reason} event"))
        }
    };
    // As Flux: the change set as it is applied, then the end of the reconciliation.
    let applied = event("Progressing").await;
    assert_eq!(
        applied.metadata.annotations.unwrap()["kustomize.toolkit.fluxcd.io/revision"],
        "main@sha1:e00e"
    );
    assert!(
        applied
            .message
            .unwrap()
            .contains(&format!("ConfigMap/{ns}/app-settings created"))
    );
    let finished = event("ReconciliationSucceeded").await;
    let annotations = finished.metadata.annotations.unwrap();
    assert_eq!(
        annotations["kustomize.toolkit.fluxcd.io/revision"],
        "main@sha1:e00e"
    );
    assert_eq!(
        annotations["kustomize.toolkit.fluxcd.io/commit_status"],
        "update"
    );
    let message = finished.message.unwrap();
    assert!(
        message.starts_with("Reconciliation finished in ")
            && message.ends_with(", next run in 10m0s"),
        "{message}"
    );
}

#[tokio::test]
async fn remote_clusters_receive_the_objects() {
    let harness = Harness::start().await;
    if harness.cluster.server().is_none() {
        eprintln!("skipped: the remote cluster is a second in-process server");
        return;
    }
    let ns = harness.cluster.namespace.clone();
    let remote = crate::support::apiserver::TestApiServer::start().await;
    let remote_client = kube::Client::try_from(remote.client_config()).unwrap();
    let remote_namespaces: Api<k8s_openapi::api::core::v1::Namespace> =
        Api::all(remote_client.clone());
    remote_namespaces
        .create(
            &Default::default(),
            &serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap(),
        )
        .await
        .unwrap();
    harness
        .cluster
        .apply(&json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "remote-kubeconfig", "namespace": ns},
            "stringData": {"value": remote.kubeconfig_yaml()}}))
        .await;
    let artifact = harness.publish_files(
        "remote",
        "main@sha1:d00d",
        &[(
            "cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: far\n",
        )],
    );
    harness.source("repo", &artifact).await;
    harness
        .create_kustomization(
            "remote",
            json!({"kubeConfig": {"secretRef": {"name": "remote-kubeconfig"}}}),
        )
        .await;
    harness
        .wait_ready("remote", "True", "ReconciliationSucceeded")
        .await;
    let remote_maps: Api<ConfigMap> = Api::namespaced(remote_client, &ns);
    assert!(
        remote_maps.get_opt("far").await.unwrap().is_some(),
        "applied to the remote cluster"
    );
    assert!(
        harness
            .config_maps()
            .get_opt("far")
            .await
            .unwrap()
            .is_none(),
        "not to the local one"
    );
}

/// As Flux: `--default-service-account` is impersonated on a remote cluster too, so a tenant
/// without a service account there gets the remote cluster's RBAC refusal.
#[tokio::test]
async fn remote_clusters_are_applied_to_as_the_default_service_account() {
    let harness = Harness::start_with(|options| {
        options.reconcile.default_service_account = Some("tenant".into());
    })
    .await;
    if harness.cluster.server().is_none() {
        eprintln!("skipped: the remote cluster is a second in-process server");
        return;
    }
    let ns = harness.cluster.namespace.clone();
    let remote = crate::support::apiserver::TestApiServer::start().await;
    harness
        .cluster
        .apply(&json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "remote-kubeconfig", "namespace": ns},
            "stringData": {"value": remote.kubeconfig_yaml()}}))
        .await;
    let artifact = harness.publish_files(
        "remote",
        "main@sha1:d00e",
        &[(
            "cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: far\n",
        )],
    );
    harness.source("repo", &artifact).await;
    harness
        .create_kustomization(
            "remote",
            json!({"kubeConfig": {"secretRef": {"name": "remote-kubeconfig"}}}),
        )
        .await;
    let refused = harness
        .wait_ready("remote", "False", "ReconciliationFailed")
        .await;
    let message = ready_message(&refused);
    assert!(
        message.contains(&format!(
            "User \"system:serviceaccount:{ns}:tenant\" cannot"
        )),
        "{message}"
    );
}

/// A ConfigMap `vars` (with `labels`) that a Kustomization substitutes from: changing it
/// applies the Kustomization again at once (its interval is 10 minutes).
async fn a_config_change_applies_its_reader_again(harness: &Harness, labels: Value) -> bool {
    let ns = harness.cluster.namespace.clone();
    let artifact = harness.publish_files("vars", "main@sha1:f00f", &[("cm.yaml", CONFIG_MAP)]);
    harness.source("repo", &artifact).await;
    let vars = |greeting: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "vars", "namespace": ns, "labels": labels},
        "data": {"greeting": greeting}})
    };
    harness.cluster.apply(&vars("hi")).await;
    harness
        .create_kustomization(
            "reader",
            json!({"postBuild": {"substituteFrom": [{"kind": "ConfigMap", "name": "vars"}]}}),
        )
        .await;
    harness
        .wait_ready("reader", "True", "ReconciliationSucceeded")
        .await;
    harness.cluster.apply(&vars("bye")).await;
    wait_for(Duration::from_secs(30), || async {
        let settings = harness.config_maps().get("settings").await.ok()?;
        (settings.data?.get("greeting").map(String::as_str) == Some("bye")).then_some(())
    })
    .await
    .is_some()
}

#[tokio::test]
async fn watched_config_maps_trigger_reconciliation() {
    let harness = Harness::start().await;
    assert!(
        a_config_change_applies_its_reader_again(
            &harness,
            json!({"reconcile.fluxcd.io/watch": "Enabled"})
        )
        .await,
        "a change to a watched ConfigMap reconciles its users"
    );
}

/// An empty `--watch-configs-label-selector` is Flux's `labels.Everything()`: a ConfigMap a
/// Kustomization reads triggers it without any label (its metadata is all that is watched).
#[tokio::test]
async fn an_empty_config_selector_watches_every_config_a_kustomization_reads() {
    let harness = Harness::start_with(|options| {
        options.watch_configs_label_selector = Some(String::new());
    })
    .await;
    assert!(
        a_config_change_applies_its_reader_again(&harness, json!({})).await,
        "the unlabelled ConfigMap's change ran it"
    );
}

#[tokio::test]
async fn cross_namespace_references_can_be_blocked() {
    let harness =
        Harness::start_with(|options| options.reconcile.no_cross_namespace_refs = true).await;
    harness
        .create_kustomization("sneaky", json!({"sourceRef": {"kind": "GitRepository", "name": "repo", "namespace": "flux-system"}}))
        .await;
    let stalled = harness.wait_ready("sneaky", "False", "AccessDenied").await;
    let conditions = stalled.status.unwrap().conditions;
    assert!(
        conditions
            .iter()
            .any(|c| c.type_ == "Stalled" && c.status == "True")
    );
    assert!(conditions.iter().all(|c| c.type_ != "Reconciling"));
}

#[tokio::test]
async fn dependency_chains_and_ready_expressions() {
    let harness = Harness::start().await;
    let artifact = harness.publish_files(
        "chain",
        "main@sha1:1234",
        &[(
            "cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: link\n",
        )],
    );
    harness.source("repo", &artifact).await;
    harness
        .create_kustomization(
            "third",
            json!({"namePrefix": "c-", "dependsOn": [{"name": "second"}]}),
        )
        .await;
    harness.create_kustomization("second", json!({"namePrefix": "b-", "dependsOn": [{"name": "first",
        "readyExpr": "dep.?status.?conditions.orValue([]).exists(c, c.type == 'Ready' && c.status == 'True') && self.metadata.name == 'second'"}]})).await;
    harness
        .create_kustomization("first", json!({"namePrefix": "a-"}))
        .await;
    for name in ["first", "second", "third"] {
        harness
            .wait_ready(name, "True", "ReconciliationSucceeded")
            .await;
    }
    harness.create_kustomization("broken-expr", json!({"namePrefix": "d-", "dependsOn": [{"name": "first", "readyExpr": "dep.status.("}]})).await;
    let broken = harness
        .wait_ready("broken-expr", "False", "InvalidCELExpression")
        .await;
    let message = ready_message(&broken);
    assert!(
        message.ends_with(
            "failed to parse the CEL expression 'dep.status.(': ERROR: <input>:1:12: Syntax error: no viable alternative at input '.('\n | dep.status.(\n | ...........^"
        ),
        "{message}"
    );
    // As Flux's compilation: a field of `dep` is `dyn`, not `bool`, whatever it holds.
    harness.create_kustomization("dyn-expr", json!({"namePrefix": "e-", "dependsOn": [{"name": "first", "readyExpr": "dep.spec.prune"}]})).await;
    let dyn_typed = harness
        .wait_ready("dyn-expr", "False", "InvalidCELExpression")
        .await;
    assert_eq!(
        ready_message(&dyn_typed),
        "Reconciliation failed terminally due to configuration error: terminal error: failed to evaluate dependency first: CEL expression output type mismatch: expected bool, got dyn"
    );
    let stalled = dyn_typed.status.as_ref().and_then(|s| {
        s.conditions
            .iter()
            .find(|c| c.type_ == "Stalled")
            .map(|c| c.status.clone())
    });
    assert_eq!(stalled.as_deref(), Some("True"));
}

/// As `flux diff kustomization` (fluxcd/pkg `ssa` `SanitizeUnstructuredData`): a Secret's
/// values never reach the output; which entries changed still does.
#[tokio::test]
async fn the_diff_command_masks_secret_values() {
    let harness = Harness::start().await;
    let ns = harness.cluster.namespace.clone();
    let secret = |token: &str, password: &str| {
        format!(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\nstringData:\n  token: {token}\n  password: {password}\n"
        )
    };
    let v1 = harness.publish_files(
        "creds",
        "main@sha1:5ec1",
        &[("secret.yaml", &secret("t0ken-one", "same-pass"))],
    );
    harness.source("repo", &v1).await;
    harness.create_kustomization("creds", json!({})).await;
    harness
        .wait_ready("creds", "True", "ReconciliationSucceeded")
        .await;
    let local = tempfile::tempdir().unwrap();
    let secret_file = local.path().join("secret.yaml");
    std::fs::write(secret_file, secret("t0ken-two", "same-pass")).unwrap();
    let output = harness.diff("creds", local.path()).await;
    assert_eq!(
        output.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains(&format!("► Secret/{ns}/creds drifted")),
        "{text}"
    );
    assert!(
        text.contains("-  token: '*** (before)'") && text.contains("+  token: '*** (after)'"),
        "{text}"
    );
    for secret in ["t0ken", "same-pass", "dDBrZW4", "c2FtZS1wYXNz"] {
        assert!(!text.contains(secret), "{secret} in {text}");
    }
}

#[tokio::test]
async fn the_diff_command_previews_changes() {
    let harness = Harness::start().await;
    let ns = harness.cluster.namespace.clone();
    let v1 = harness.publish("v1", "main@sha1:1d1f");
    harness.source("repo", &v1).await;
    harness
        .create_kustomization(
            "app",
            json!({"postBuild": {"substitute": {"cluster": "test"}}}),
        )
        .await;
    harness
        .wait_ready("app", "True", "ReconciliationSucceeded")
        .await;
    let diff = |fixture: &str| {
        let path = repo_root().join("tests/fixtures/controller").join(fixture);
        let harness = &harness;
        async move { harness.diff("app", &path).await }
    };
    let same = diff("v1").await;
    assert!(
        same.status.success(),
        "{}",
        String::from_utf8_lossy(&same.stderr)
    );
    assert!(
        same.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&same.stdout)
    );
    let changed = diff("v2").await;
    assert_eq!(
        changed.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&changed.stderr)
    );
    let text = String::from_utf8_lossy(&changed.stdout);
    assert!(
        text.contains(&format!("► ConfigMap/{ns}/app-settings drifted")),
        "{text}"
    );
    assert!(
        text.contains("-  color: blue") && text.contains("+  color: green"),
        "{text}"
    );
    assert!(
        text.contains(&format!("► ConfigMap/{ns}/app-legacy deleted")),
        "{text}"
    );
    assert_eq!(
        harness
            .config_maps()
            .get("app-settings")
            .await
            .unwrap()
            .data
            .unwrap()["color"],
        "blue",
        "diff changes nothing"
    );
}

/// `make bench-controller`: a chain of `BENCH_CHAIN` (default 10) Kustomizations, each
/// depending on the one before, created dependents first, reconciled by the shipped binary with
/// Flux's default `--requeue-dependency` (30s); reports the time until the last is Ready. Flux
/// polls dependencies, so there a chain takes about one poll per link.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark; run by make bench-controller"]
async fn bench_dependency_chain() {
    let links: usize = std::env::var("BENCH_CHAIN")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10);
    let cluster = TestCluster::start().await;
    let kubeconfig = controller_kubeconfig(&cluster).await;
    let artifacts = ArtifactServer::start().await;
    let ns = cluster.namespace.clone();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: link\n",
    )
    .unwrap();
    let artifact = artifacts.publish_dir("chain.tar.gz", "main@sha1:c4a1", dir.path());
    cluster
        .create_source(SourceKind::GitRepository, &ns, "repo", Some(&artifact))
        .await;
    let mut controller =
        ControllerProcess::start_with_kubeconfig(&kubeconfig, &ns, &["--log-level=error"]);
    let started = std::time::Instant::now();
    let api: Api<Kustomization> = Api::namespaced(cluster.client.clone(), &ns);
    for i in (0..links).rev() {
        let mut spec = json!({"interval": "1h", "prune": true, "targetNamespace": ns,
            "namePrefix": format!("link-{i}-"), "sourceRef": {"kind": "GitRepository", "name": "repo"}});
        if i > 0 {
            spec["dependsOn"] = json!([{"name": format!("link-{}", i - 1)}]);
        }
        let object: Kustomization = serde_json::from_value(json!({
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": format!("link-{i}"), "namespace": ns}, "spec": spec,
        }))
        .unwrap();
        api.create(&Default::default(), &object).await.unwrap();
    }
    let last = format!("link-{}", links - 1);
    let ready = wait_for(Duration::from_secs(60 * links as u64), || async {
        let object = api.get(&last).await.ok()?;
        object
            .status?
            .conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
            .then_some(())
    })
    .await;
    let elapsed = started.elapsed();
    let _ = controller.child.start_kill();
    let _ = controller.child.wait().await;
    assert!(ready.is_some(), "the chain did not converge");
    println!(
        "bench-controller: a dependency chain of {links} Kustomizations, --requeue-dependency=30s: the last Ready after {elapsed:?}"
    );
}

#[tokio::test]
async fn a_kustomization_that_applies_itself_can_wait() {
    let harness = Harness::start().await;
    let ns = harness.cluster.namespace.clone();
    let myself = format!(
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: flux-system\n  namespace: {ns}\nspec:\n  interval: 10m\n  prune: true\n  wait: true\n  timeout: 2s\n  targetNamespace: {ns}\n  sourceRef:\n    kind: GitRepository\n    name: repo\n"
    );
    let artifact = harness.publish_files(
        "bootstrap",
        "main@sha1:b007",
        &[
            ("self.yaml", &myself),
            (
                "cm.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: boot\n",
            ),
        ],
    );
    harness.source("repo", &artifact).await;
    harness
        .create_kustomization("flux-system", json!({"wait": true, "timeout": "2s"}))
        .await;
    harness
        .wait_ready("flux-system", "True", "ReconciliationSucceeded")
        .await;
}

#[tokio::test]
async fn stalled_clears_when_the_spec_is_fixed() {
    let harness =
        Harness::start_with(|options| options.reconcile.no_cross_namespace_refs = true).await;
    let artifact = harness.publish("v2", "main@sha1:5a1e");
    harness.source("repo", &artifact).await;
    harness
        .create_kustomization("fixme", json!({"sourceRef": {"kind": "GitRepository", "name": "repo", "namespace": "elsewhere"}}))
        .await;
    harness.wait_ready("fixme", "False", "AccessDenied").await;
    harness
        .create_kustomization(
            "fixme",
            json!({"sourceRef": {"kind": "GitRepository", "name": "repo"}}),
        )
        .await;
    let ready = harness
        .wait_ready("fixme", "True", "ReconciliationSucceeded")
        .await;
    let conditions = ready.status.unwrap().conditions;
    assert!(
        conditions.iter().all(|c| c.type_ != "Stalled"),
        "{conditions:?}"
    );
}

#[tokio::test]
async fn events_are_forwarded_to_notification_controller() {
    use crate::support::notification::{accepted_by_notification_controller, event_receiver};
    let (address, received) = event_receiver().await;
    let harness =
        Harness::start_with(|options| options.reconcile.events_addr = Some(address.clone())).await;
    let ns = harness.cluster.namespace.clone();
    let v1 = harness.publish("v1", "main@sha1:fade");
    harness.source("repo", &v1).await;
    harness.create_kustomization("notify", json!({})).await;
    harness
        .kustomizations()
        .patch(
            "notify",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(
                json!({"metadata": {"annotations": {"event.toolkit.fluxcd.io/team": "apps",
                    "reconcile.fluxcd.io/requestedAt": "team-annotated"}}}),
            ),
        )
        .await
        .unwrap();
    harness
        .wait_ready("notify", "True", "ReconciliationSucceeded")
        .await;
    let event = wait_for(Duration::from_secs(10), || async {
        received
            .lock()
            .unwrap()
            .iter()
            .find(|e| {
                e["reason"] == "ReconciliationSucceeded"
                    && e["metadata"]["event.toolkit.fluxcd.io/team"] == "apps"
            })
            .cloned()
    })
    .await
    .expect("an event reaches notification-controller");
    let event = accepted_by_notification_controller(&event);
    assert_eq!(event["involvedObject"]["kind"], "Kustomization");
    assert_eq!(event["involvedObject"]["name"], "notify");
    assert_eq!(event["involvedObject"]["namespace"], json!(ns));
    assert_eq!(event["severity"], "info");
    assert_eq!(event["reportingController"], "kustomize-controller");
    // What notification-controller keeps for alerts and commit statuses.
    assert_eq!(
        event["metadata"]["kustomize.toolkit.fluxcd.io/revision"],
        "main@sha1:fade"
    );
    assert_eq!(
        event["metadata"]["kustomize.toolkit.fluxcd.io/commit_status"],
        "update"
    );
    assert_eq!(event["metadata"]["event.toolkit.fluxcd.io/team"], "apps");
}

#[tokio::test]
async fn repeated_events_are_aggregated() {
    let harness = Harness::start().await;
    let ns = harness.cluster.namespace.clone();
    let v1 = harness.publish("v1", "main@sha1:fade");
    harness.source("repo", &v1).await;
    // A dependency that never comes: retried every --requeue-dependency, with an event each
    // time (a missing source is retried quietly, as Flux).
    harness
        .create_kustomization("waiting", json!({"dependsOn": [{"name": "absent"}]}))
        .await;
    let events: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(harness.cluster.client.clone(), &ns);
    let counted = wait_for(Duration::from_secs(30), || async {
        let list = events.list(&Default::default()).await.ok()?;
        let failures: Vec<_> = list
            .items
            .into_iter()
            .filter(|e| {
                e.involved_object.name.as_deref() == Some("waiting")
                    && e.reason.as_deref() == Some("DependencyNotReady")
            })
            .collect();
        (failures.len() == 1 && failures[0].count.unwrap_or(0) >= 3).then_some(())
    })
    .await;
    assert!(
        counted.is_some(),
        "retries bump one Event's count instead of creating new ones"
    );
}

/// As client-go's event correlator for Flux: once a Kustomization has had ten "Reconciliation
/// finished" Events with different messages (their durations differ), the next ones are one
/// combined Event, whose count they raise; and of its Events only a burst of 25 is written
/// (client-go's spam filter lets one more through every five minutes).
#[tokio::test]
async fn many_reconciliations_are_combined_and_throttled_as_client_go_does() {
    let harness = Harness::start().await;
    let ns = harness.cluster.namespace.clone();
    let v1 = harness.publish("v1", "main@sha1:fade");
    harness.source("repo", &v1).await;
    harness.create_kustomization("busy", json!({})).await;
    harness
        .wait_ready("busy", "True", "ReconciliationSucceeded")
        .await;
    for i in 0..30 {
        let token = format!("request-{i}");
        harness.request_reconcile("busy", &token).await;
        harness.wait_handled("busy", &token).await;
    }
    let events: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(harness.cluster.client.clone(), &ns);
    let combined_prefix = "(combined from similar events): Reconciliation finished in ";
    // Events are written after the reconciliations: wait until the burst is all there.
    let written = wait_for(Duration::from_secs(30), || async {
        let list = events.list(&Default::default()).await.ok()?;
        let busy: Vec<_> = list
            .items
            .into_iter()
            .filter(|e| e.involved_object.name.as_deref() == Some("busy"))
            .collect();
        let total: i32 = busy.iter().map(|e| e.count.unwrap_or(1)).sum();
        (total >= 25).then_some(busy)
    })
    .await
    .expect("the Kustomization's first 25 Events are written");
    let total: i32 = written.iter().map(|e| e.count.unwrap_or(1)).sum();
    assert!(
        total <= 26,
        "beyond the burst of 25 the spam filter drops an object's Events: {total} written"
    );
    let message = |e: &k8s_openapi::api::core::v1::Event| e.message.clone().unwrap_or_default();
    let combined: Vec<_> = written
        .iter()
        .filter(|e| message(e).starts_with(combined_prefix))
        .collect();
    assert_eq!(combined.len(), 1, "one combined Event: {written:#?}");
    let combined = combined[0];
    assert!(
        combined.count.unwrap_or(1) >= 2,
        "later reconciliations raise its count: {combined:?}"
    );
    assert_eq!(combined.reason.as_deref(), Some("ReconciliationSucceeded"));
    assert_eq!(combined.type_.as_deref(), Some("Normal"));
    assert!(
        combined.metadata.annotations.is_none(),
        "client-go's combined Event carries no annotations"
    );
    let separate = written
        .iter()
        .filter(|e| {
            e.reason.as_deref() == Some("ReconciliationSucceeded")
                && !message(e).starts_with(combined_prefix)
        })
        .count();
    assert!(
        separate <= 9,
        "nine messages of a reason are written apart before they are combined: {separate}"
    );
}

/// As Flux's patcher (fluxcd/pkg `runtime/patch`): the status is written with merge patches
/// of what changed, by `gotk-kustomize-controller`, so its managed fields entry is an
/// `Update` of the status subresource; the finalizer is that manager's `Update` of the object
/// itself. Events are written without a field manager, as client-go's recorder writes them,
/// so the server names their manager by the agent's first word: the command's name
/// (`kustomize-controller` for the binary, `parity::two_shards_…` shows it on the Leases;
/// this process's own name here, where the controller runs in the test).
#[tokio::test]
async fn the_status_is_written_as_flux_writes_it() {
    let harness = Harness::start().await;
    let artifact = harness.publish_files(
        "status-writer",
        "main@sha1:5a7e",
        &[(
            "cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: written\n",
        )],
    );
    harness.source("repo", &artifact).await;
    harness.create_kustomization("writer", json!({})).await;
    harness
        .wait_ready("writer", "True", "ReconciliationSucceeded")
        .await;
    harness.request_reconcile("writer", "again").await;
    harness.wait_handled("writer", "again").await;
    let object = harness.kustomizations().get("writer").await.unwrap();
    let entries: Vec<(String, String, String)> = object
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter(|entry| entry.manager.as_deref() == Some("gotk-kustomize-controller"))
        .map(|entry| {
            (
                entry.operation.unwrap_or_default(),
                entry.subresource.unwrap_or_default(),
                serde_json::to_string(&entry.fields_v1).unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(entries.len(), 2, "{entries:?}");
    let entry = |subresource: &str| {
        entries
            .iter()
            .find(|(operation, s, _)| operation == "Update" && s == subresource)
            .map(|(_, _, fields)| fields.clone())
            .unwrap_or_else(|| panic!("an Update of {subresource:?}: {entries:?}"))
    };
    let status_fields = entry("status");
    assert!(status_fields.contains("f:inventory"), "{status_fields}");
    let object_fields = entry("");
    assert!(
        object_fields.contains("finalizers.fluxcd.io"),
        "{object_fields}"
    );
    let status = object.status.unwrap();
    assert_eq!(status.last_handled_reconcile_at.as_deref(), Some("again"));
    assert!(status.conditions.iter().all(|c| c.type_ != "Reconciling"));

    let events: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(harness.cluster.client.clone(), &harness.cluster.namespace);
    let managers = wait_for(Duration::from_secs(30), || async {
        let list = events.list(&Default::default()).await.ok()?;
        let managers: Vec<String> = list
            .items
            .into_iter()
            .filter(|e| e.involved_object.name.as_deref() == Some("writer"))
            .flat_map(|e| crate::support::field_managers(&e.metadata))
            .collect();
        (!managers.is_empty()).then_some(managers)
    })
    .await
    .expect("the controller's Events");
    let command = std::env::args_os().next().unwrap();
    let command = std::path::Path::new(&command).file_name().unwrap();
    assert!(
        managers.iter().all(|m| *m == *command.to_string_lossy()),
        "{managers:?}"
    );
}

/// The Reconciling condition's reason and message.
fn reconciling(kustomization: &Kustomization) -> (String, String) {
    let status = kustomization.status.as_ref().expect("a status");
    let condition = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Reconciling")
        .expect("a Reconciling condition");
    (condition.reason.clone(), condition.message.clone())
}
