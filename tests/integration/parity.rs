//! Flux v1.9.4 parity of the controller's configuration: feature gates with Flux's defaults
//! (an unknown gate stops the binary, strict substitution is on, ExternalArtifact is off), and
//! sharding with leader election (a Lease per shard, named as Flux names it, released on
//! SIGTERM).

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use serde_json::json;

use crate::support::artifacts::SourceKind;
use crate::support::cluster::{TestCluster, wait_for};
use crate::support::controller::{ControllerProcess, controller_kubeconfig};
use crate::support::controller::{Harness, ready_message};
use crate::support::{http_get_text, run_cli};

#[test]
fn an_unknown_feature_gate_stops_the_controller_before_it_starts() {
    let output = run_cli(&["run", "--feature-gates=NoSuchGate=true"]);
    assert_eq!(output.status.code(), Some(1), "Flux exits 1 too");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        setup_error(&stderr),
        (
            "unable to load feature gates".to_string(),
            "feature-gate 'NoSuchGate' not supported".to_string()
        )
    );
    let malformed = run_cli(&["run", "--feature-gates=ExternalArtifact=maybe"]);
    assert_eq!(malformed.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&malformed.stderr)
            .contains("invalid value of ExternalArtifact=maybe")
    );
}

/// The JSON line Flux's setup logger writes for a fatal start-up error: its message and error.
fn setup_error(stderr: &str) -> (String, String) {
    let line = stderr
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .find(|line| line["logger"] == "setup" && line["level"] == "error")
        .unwrap_or_else(|| panic!("no setup error line: {stderr}"));
    (
        line["msg"].as_str().unwrap_or("").to_string(),
        line["error"].as_str().unwrap_or("").to_string(),
    )
}

/// What Flux's main and its manager refuse before anything runs, each a JSON line of the
/// `setup` logger and exit 1: an interval jitter of 100% or more, a label selector that does
/// not parse, leader-election timings client-go refuses, an events address Go's `url.Parse`
/// refuses. An empty string flag is no value, as Go's flags have it.
#[test]
fn start_up_flags_flux_refuses_stop_the_controller_in_its_words() {
    let refused = [
        (
            vec!["--interval-jitter-percentage=100"],
            "unable to set global jitter",
            "the interval jitter percentage must be a non-negative value and less than 100",
        ),
        (
            vec!["--watch-label-selector=sharding.fluxcd.io/key in shard1"],
            "unable to configure watch label selector for manager",
            "couldn't parse the selector string \"sharding.fluxcd.io/key in shard1\": \
             unable to parse requirement: found 'shard1' expected: '('",
        ),
        (
            vec!["--watch-label-selector=sharding.fluxcd.io/key!=shard1"],
            "unable to configure watch label selector for manager",
            "\"!=\" is not a valid label selector operator",
        ),
        (
            vec!["--watch-configs-label-selector=reconcile.fluxcd.io/watch notin Enabled"],
            "unable to configure watch configs label selector for controller",
            "unable to parse requirement: found 'Enabled' expected: '('",
        ),
        (
            vec![
                "--enable-leader-election",
                "--leader-election-lease-duration=10s",
                "--leader-election-renew-deadline=15s",
            ],
            "problem running manager",
            "leaseDuration must be greater than renewDeadline",
        ),
        (
            vec![
                "--enable-leader-election",
                "--leader-election-retry-period=30s",
            ],
            "problem running manager",
            "renewDeadline must be greater than retryPeriod*JitterFactor",
        ),
        (
            vec!["--events-addr= http://notification-controller/"],
            "unable to create event recorder",
            "parse \" http://notification-controller/\": first path segment in URL cannot contain colon",
        ),
        (
            vec!["--events-addr=http://notification-controller:http/"],
            "unable to create event recorder",
            "parse \"http://notification-controller:http/\": invalid port \":http\" after host",
        ),
    ];
    for (flags, message, error) in refused {
        let mut args = vec!["run"];
        args.extend(flags.iter().copied());
        let output = run_cli(&args);
        assert_eq!(output.status.code(), Some(1), "{flags:?}");
        let (said, why) = setup_error(&String::from_utf8_lossy(&output.stderr));
        assert_eq!(said, message, "{flags:?}");
        assert!(why.contains(error) && !why.is_empty(), "{flags:?}: {why}");
    }
    // Empty values: no default account (so no gate needed), no sharding selector.
    let empty = std::process::Command::new(env!("CARGO_BIN_EXE_kustomize-controller"))
        .args([
            "run",
            "--default-decryption-service-account=",
            "--watch-label-selector=",
            "--sops-age-secret=",
            // Go parses an address without a scheme; Flux starts and fails each send.
            "--events-addr=notification-controller",
        ])
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&empty.stderr);
    let (said, _) = setup_error(&stderr);
    assert!(said.starts_with("finding the cluster"), "{stderr}");
}

/// A metrics or probe address that cannot be bound stops the controller, as it stops Flux's
/// manager; `0` serves nothing there.
#[tokio::test]
async fn a_port_in_use_stops_the_controller_and_zero_serves_nothing() {
    let cluster = TestCluster::start().await;
    let kubeconfig = controller_kubeconfig(&cluster).await;
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap().to_string();
    let mut controller = ControllerProcess::start_with_kubeconfig(
        &kubeconfig,
        &cluster.namespace,
        &["--log-encoding=json", &format!("--metrics-addr={address}")],
    );
    let status = tokio::time::timeout(Duration::from_secs(30), controller.child.wait())
        .await
        .expect("it stops at once")
        .unwrap();
    assert_eq!(status.code(), Some(1));
    let (message, why) = setup_error(&controller.log());
    assert_eq!(message, "problem running manager");
    assert!(
        why.starts_with(&format!("failed to create listener on {address}")),
        "{why}"
    );

    let quiet = ControllerProcess::start_with_kubeconfig(
        &kubeconfig,
        &cluster.namespace,
        &["--metrics-addr=0"],
    );
    assert!(
        said(&quiet, "Starting workers").await,
        "it runs: {}",
        quiet.log()
    );
    quiet.terminate();
    drop(taken);
}

/// fluxcd/pkg auth's start-up check: default ServiceAccounts for cloud identities need the
/// ObjectLevelWorkloadIdentity gate; with it, the same flags pass the check (and the run then
/// stops only for want of a cluster).
#[test]
fn default_identity_accounts_need_the_workload_identity_gate() {
    for flag in [
        "--default-decryption-service-account=sops",
        "--default-kubeconfig-service-account=kubeconfig",
    ] {
        let refused = run_cli(&["run", flag]);
        assert_eq!(refused.status.code(), Some(1), "{flag}");
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(
            stderr.contains("cannot set default service accounts when the feature gate ObjectLevelWorkloadIdentity is not enabled"),
            "{flag}: {stderr}"
        );
        // No cluster to find: the run stops right after the check, saying so.
        let gated = std::process::Command::new(env!("CARGO_BIN_EXE_kustomize-controller"))
            .args([
                "run",
                flag,
                "--feature-gates=ObjectLevelWorkloadIdentity=true",
            ])
            .env("KUBECONFIG", "/nonexistent/kubeconfig")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&gated.stderr);
        assert!(
            stderr.contains("finding the cluster")
                && !stderr.contains("cannot set default service accounts"),
            "{flag}: {stderr}"
        );
    }
}

#[tokio::test]
async fn unset_variables_fail_the_build_by_default_as_in_flux_1_9() {
    let harness = Harness::start().await;
    let map = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  region: ${region}\n";
    let artifact = harness.publish_files("strict", "main@sha1:5151", &[("cm.yaml", map)]);
    harness.source("repo", &artifact).await;
    harness
        .create_kustomization(
            "strict",
            json!({"postBuild": {"substitute": {"zone": "a"}}}),
        )
        .await;
    let failed = harness.wait_ready("strict", "False", "BuildFailed").await;
    let message = ready_message(&failed);
    // Flux's words, whole: the object as kustomize names it, then fluxcd/pkg's envsubst.
    assert_eq!(
        message,
        "post build failed for 'ConfigMap.v1.[noGrp]/settings': envsubst error: variable substitution failed: variable not set (strict mode): \"region\""
    );
    assert!(
        harness
            .config_maps()
            .get_opt("settings")
            .await
            .unwrap()
            .is_none(),
        "nothing with an empty value was applied"
    );
}

/// fluxcd/pkg's envsubst makes every `$$` a `$` in every object it substitutes (its scanner,
/// `parse_test.go` "$$string"), not only before `{`: Kubernetes' own `$$(VAR)` escape
/// arrives as `$(VAR)`, in objects with no `${` as well.
#[tokio::test]
async fn double_dollars_become_single_as_fluxs_envsubst_makes_them() {
    let harness = Harness::start().await;
    let map = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: escapes\ndata:\n  command: echo $$(HOME) $$$${zone}\n  literal: $${zone} is ${zone}\n";
    let plain = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plain\ndata:\n  price: $$5\n";
    let artifact = harness.publish_files(
        "escapes",
        "main@sha1:5252",
        &[("cm.yaml", map), ("plain.yaml", plain)],
    );
    harness.source("repo", &artifact).await;
    harness
        .create_kustomization(
            "escapes",
            json!({"postBuild": {"substitute": {"zone": "a"}}}),
        )
        .await;
    harness
        .wait_ready("escapes", "True", "ReconciliationSucceeded")
        .await;
    let config_maps = harness.config_maps();
    let data = |name: &'static str| {
        let config_maps = config_maps.clone();
        async move {
            config_maps
                .get(name)
                .await
                .unwrap()
                .data
                .unwrap_or_default()
        }
    };
    let escapes = data("escapes").await;
    assert_eq!(escapes["command"], "echo $(HOME) $${zone}");
    assert_eq!(escapes["literal"], "${zone} is a");
    assert_eq!(data("plain").await["price"], "$5");
}

/// Flux's decryptor's words for a decryption Secret that is missing (the API server's own)
/// or holds an entry that is not a key.
#[tokio::test]
async fn decryption_secret_failures_are_worded_as_fluxs_decryptor_words_them() {
    let harness = Harness::start().await;
    let ns = harness.cluster.namespace.clone();
    let encrypted = harness.age_encrypted_secret_and_keys().await;
    let artifact = harness.publish_files(
        "sops-keys",
        "main@sha1:5353",
        &[("secret.yaml", &encrypted)],
    );
    harness.source("repo", &artifact).await;
    let decrypting_with =
        |name: &str| json!({"decryption": {"provider": "sops", "secretRef": {"name": name}}});
    harness
        .create_kustomization("keys", decrypting_with("no-such-keys"))
        .await;
    let failed = harness.wait_ready("keys", "False", "BuildFailed").await;
    assert_eq!(ready_message(&failed), "secrets \"no-such-keys\" not found");

    harness
        .cluster
        .apply(&json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "bad-keys", "namespace": ns},
            "stringData": {"bad.agekey": "not a key"}}))
        .await;
    harness
        .create_kustomization("keys", decrypting_with("bad-keys"))
        .await;
    let failed = wait_for(Duration::from_secs(30), || async {
        let object = harness.kustomizations().get("keys").await.ok()?;
        ready_message(&object)
            .starts_with("failed to import")
            .then(|| ready_message(&object))
    })
    .await
    .expect("the bad key is named");
    assert_eq!(
        failed,
        format!(
            "failed to import 'bad.agekey' data from sops decryption Secret '{ns}/bad-keys': line 1 is not an age identity (expected AGE-SECRET-KEY-1…)"
        )
    );
}

#[tokio::test]
async fn external_artifacts_need_their_feature_gate() {
    let off = Harness::start().await;
    let ns = off.cluster.namespace.clone();
    let map = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: external\n";
    let artifact = off.publish_files("external", "latest@sha256:abcd", &[("cm.yaml", map)]);
    off.cluster
        .create_source(SourceKind::ExternalArtifact, &ns, "art", Some(&artifact))
        .await;
    off.create_kustomization(
        "ext",
        json!({"sourceRef": {"kind": "ExternalArtifact", "name": "art"}}),
    )
    .await;
    let denied = off.wait_ready("ext", "False", "AccessDenied").await;
    assert_eq!(
        ready_message(&denied),
        format!(
            "can't access 'ExternalArtifact/{ns}/art', ExternalArtifact feature gate is disabled"
        )
    );
    let stalled = denied
        .status
        .as_ref()
        .unwrap()
        .conditions
        .iter()
        .find(|c| c.type_ == "Stalled");
    assert!(
        stalled.is_some_and(|c| c.status == "True"),
        "terminal, as in Flux"
    );

    let on = Harness::start_with(|options| options.reconcile.allow_external_artifact = true).await;
    let ns = on.cluster.namespace.clone();
    let artifact = on.publish_files("external-on", "latest@sha256:abcd", &[("cm.yaml", map)]);
    on.cluster
        .create_source(SourceKind::ExternalArtifact, &ns, "art", Some(&artifact))
        .await;
    on.create_kustomization(
        "ext",
        json!({"sourceRef": {"kind": "ExternalArtifact", "name": "art"}}),
    )
    .await;
    on.wait_ready("ext", "True", "ReconciliationSucceeded")
        .await;
    assert!(
        on.config_maps()
            .get_opt("external")
            .await
            .unwrap()
            .is_some()
    );
}

/// One shard of the controller: the shipped binary with leader election and a shard selector.
fn start_shard(kubeconfig: &str, namespace: &str, shard: &str) -> ControllerProcess {
    ControllerProcess::start_with_kubeconfig(
        kubeconfig,
        namespace,
        &[
            &format!("--watch-label-selector=sharding.fluxcd.io/key={shard}"),
            "--enable-leader-election",
            "--leader-election-retry-period=200ms",
        ],
    )
}

#[tokio::test]
async fn two_shards_lead_on_their_own_leases_and_release_them_on_sigterm() {
    let cluster = TestCluster::start().await;
    let kubeconfig = controller_kubeconfig(&cluster).await;
    let artifacts = crate::support::artifacts::ArtifactServer::start().await;
    let ns = cluster.namespace.clone();
    let dir = tempfile::tempdir().unwrap();
    // "unsharded" carries no shard key: no shard may take it.
    for shard in ["shard1", "shard2", "unsharded"] {
        let map = format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {shard}-config\n");
        let source = dir.path().join(shard);
        std::fs::create_dir_all(&source).unwrap();
        std::fs::write(source.join("cm.yaml"), map).unwrap();
        let artifact = artifacts.publish_dir(&format!("{shard}.tar.gz"), "main@sha1:5eed", &source);
        cluster
            .create_source(SourceKind::GitRepository, &ns, shard, Some(&artifact))
            .await;
        cluster
            .apply(&json!({
                "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                "metadata": {"name": shard, "namespace": ns,
                    "labels": if shard == "unsharded" { json!({}) } else { json!({"sharding.fluxcd.io/key": shard}) }},
                "spec": {"interval": "10m", "prune": true, "targetNamespace": ns,
                    "sourceRef": {"kind": "GitRepository", "name": shard}},
            }))
            .await;
    }
    let mut first = start_shard(&kubeconfig, &ns, "shard1");
    let second = start_shard(&kubeconfig, &ns, "shard2");

    // Both lead at once, each on the Lease Flux would name for its selector.
    let leases: Api<Lease> = Api::namespaced(cluster.client.clone(), &ns);
    let holder = |name: &'static str| {
        let leases = leases.clone();
        async move {
            leases
                .get_opt(name)
                .await
                .ok()
                .flatten()
                .and_then(|l| l.spec?.holder_identity)
        }
    };
    const SHARD1: &str = "kustomize-controller-leader-election-73fdc1be";
    const SHARD2: &str = "kustomize-controller-leader-election-b5f72efd";
    for lease in [SHARD1, SHARD2] {
        let held = wait_for(Duration::from_secs(30), || async {
            holder(lease).await.filter(|h| !h.is_empty())
        })
        .await;
        assert!(held.is_some(), "{lease} is held");
        // client-go's lock writes the Lease without a field manager, so the server names
        // the writer by the agent's first word, the binary's name.
        let lease = leases.get(lease).await.unwrap();
        assert_eq!(
            crate::support::field_managers(&lease.metadata),
            ["kustomize-controller"]
        );
    }
    let maps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(cluster.client.clone(), &ns);
    for shard in ["shard1", "shard2"] {
        let applied = wait_for(Duration::from_secs(30), || async {
            maps.get_opt(&format!("{shard}-config"))
                .await
                .ok()
                .flatten()
        })
        .await;
        assert!(
            applied.is_some(),
            "{shard} reconciles its own Kustomization"
        );
    }
    // Each shard reconciled its own Kustomization and no other (Flux's per-object
    // reconcile-duration series name what a process reconciled); neither took the one
    // without a key.
    for (shard, process) in [("shard1", &first), ("shard2", &second)] {
        let reconciled = wait_for(Duration::from_secs(30), || async {
            let page = http_get_text(&process.metrics, "/metrics").await?;
            let names: Vec<String> = page
                .lines()
                .filter(|l| l.starts_with("gotk_reconcile_duration_seconds_count{"))
                .filter_map(|l| l.split_once("name=\"")?.1.split_once('"'))
                .map(|(name, _)| name.to_string())
                .collect();
            (!names.is_empty()).then_some(names)
        })
        .await;
        assert_eq!(
            reconciled.unwrap_or_default(),
            [shard],
            "what {shard} reconciled"
        );
    }
    let kustomizations: Api<kustomize_controller::api::Kustomization> =
        Api::namespaced(cluster.client.clone(), &ns);
    let unsharded = kustomizations.get("unsharded").await.unwrap();
    // The CRD's defaults give every new object `observedGeneration: -1`; nothing more.
    let untouched = unsharded
        .status
        .as_ref()
        .is_none_or(|s| s.conditions.is_empty() && s.observed_generation <= 0);
    assert!(untouched, "no shard touched it: {:?}", unsharded.status);
    assert!(maps.get_opt("unsharded-config").await.unwrap().is_none());

    // controller-runtime's identity: the host name and a UUID.
    let leader = holder(SHARD1).await.unwrap_or_default();
    let uuid = leader.rsplit('_').next().unwrap_or("");
    assert_eq!(uuid.len(), 36, "{leader}");

    // SIGTERM: the first shard finishes and gives its Lease up; the second keeps its own.
    first.terminate();
    let status = tokio::time::timeout(Duration::from_secs(30), first.child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status}");
    assert_eq!(
        holder(SHARD1).await.as_deref(),
        Some(""),
        "released on SIGTERM"
    );
    assert!(holder(SHARD2).await.is_some_and(|h| !h.is_empty()));
    // client-go's LeaseLock Events about the Lease, from the identity.
    let events: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(cluster.client.clone(), &ns);
    let about_shard1: Vec<(String, String, String)> = events
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(SHARD1))
        .map(|e| {
            (
                e.reason.unwrap_or_default(),
                e.message.unwrap_or_default(),
                e.source.and_then(|s| s.component).unwrap_or_default(),
            )
        })
        .collect();
    for what in ["became leader", "stopped leading"] {
        assert!(
            about_shard1.contains(&(
                "LeaderElection".to_string(),
                format!("{leader} {what}"),
                leader.clone()
            )),
            "{what}: {about_shard1:?}"
        );
    }
}

/// The gates that decide what the shipped binary watches: ExternalArtifact (off by default)
/// and DisableConfigWatchers, read off the watch metrics it serves.
#[tokio::test]
async fn feature_gates_decide_what_the_binary_watches() {
    let cluster = TestCluster::start().await;
    let kubeconfig = controller_kubeconfig(&cluster).await;
    // The config watches start before the Kustomization and source watches: once these
    // are there, every watch the gates allow has registered.
    let watched = |gates: &'static str, expected: &'static [&'static str]| {
        let mut controller = ControllerProcess::start_with_kubeconfig(
            &kubeconfig,
            &cluster.namespace,
            &[&format!("--feature-gates={gates}")],
        );
        async move {
            let kinds = wait_for(Duration::from_secs(30), || async {
                let text = http_get_text(&controller.metrics, "/metrics/extra").await?;
                let kinds: Vec<String> = text
                    .lines()
                    .filter_map(|l| l.strip_prefix("kustomize_controller_watch_up{kind=\""))
                    .filter_map(|l| l.split('"').next())
                    .map(str::to_string)
                    .collect();
                expected
                    .iter()
                    .all(|kind| kinds.iter().any(|k| k == kind))
                    .then_some(kinds)
            })
            .await;
            let _ = controller.child.start_kill();
            kinds.unwrap_or_else(|| {
                panic!(
                    "the binary serves its watch metrics; its log:\n{}",
                    controller.log()
                )
            })
        }
    };
    const SOURCES: &[&str] = &["Kustomization", "GitRepository", "OCIRepository", "Bucket"];
    let defaults = watched("", SOURCES).await;
    assert!(defaults.contains(&"ConfigMap".to_string()), "{defaults:?}");
    assert!(
        defaults.contains(&"GitRepository".to_string()),
        "{defaults:?}"
    );
    assert!(
        !defaults.contains(&"ExternalArtifact".to_string()),
        "{defaults:?}"
    );
    let gated = watched(
        "ExternalArtifact=true,DisableConfigWatchers=true",
        &[
            "Kustomization",
            "GitRepository",
            "OCIRepository",
            "Bucket",
            "ExternalArtifact",
        ],
    )
    .await;
    assert!(gated.contains(&"ExternalArtifact".to_string()), "{gated:?}");
    assert!(
        !gated.iter().any(|k| k == "ConfigMap" || k == "Secret"),
        "{gated:?}"
    );
}

/// Beyond Flux (which polls every `--requeue-dependency`): a Kustomization that becomes Ready
/// releases those waiting on it at once. With the poll at 10 minutes, a chain of five
/// converges only through that.
#[tokio::test]
async fn a_dependency_chain_converges_without_waiting_for_the_poll() {
    let harness = Harness::start_with(|options| {
        options.reconcile.requeue_dependency = Duration::from_secs(600);
    })
    .await;
    let v1 = harness.publish("v1", "main@sha1:c4a1");
    harness.source("repo", &v1).await;
    let links = ["link-0", "link-1", "link-2", "link-3", "link-4"];
    // Dependents first, so each waits before its dependency is even there.
    for (index, name) in links.iter().enumerate().rev() {
        let mut spec = json!({"namePrefix": format!("{name}-")});
        if index > 0 {
            spec["dependsOn"] = json!([{"name": links[index - 1]}]);
        }
        harness.create_kustomization(name, spec).await;
    }
    for name in links {
        harness
            .wait_ready_within(
                Duration::from_secs(20),
                name,
                "True",
                "ReconciliationSucceeded",
            )
            .await;
    }
}

/// The shipped binary serves the controller-runtime metrics Flux's dashboards query, next to
/// Flux's `gotk_*`: reconciliations by result, reconcile time, workers, the work queue, and
/// every API request by code, host and method.
#[tokio::test]
async fn the_binary_serves_controller_runtime_metrics() {
    let cluster = TestCluster::start().await;
    let kubeconfig = controller_kubeconfig(&cluster).await;
    let artifacts = crate::support::artifacts::ArtifactServer::start().await;
    let ns = cluster.namespace.clone();
    source_of_one_config_map(&cluster, &artifacts, "measured", "main@sha1:3e7c").await;
    let mut controller =
        ControllerProcess::start_with_kubeconfig(&kubeconfig, &ns, &["--concurrent=3"]);
    cluster
        .apply(
            &json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": "measured", "namespace": ns},
            "spec": {"interval": "1h", "prune": true, "targetNamespace": ns,
                "sourceRef": {"kind": "GitRepository", "name": "repo"}}}),
        )
        .await;
    let text = wait_for(Duration::from_secs(30), || async {
        let text = http_get_text(&controller.metrics, "/metrics").await?;
        // The series read 0 from the start, as controller-runtime's: wait for a count.
        text.lines()
            .any(|l| {
                l.starts_with("controller_runtime_reconcile_total{controller=\"kustomization\",result=\"requeue_after\"}")
                    && !l.ends_with(" 0")
            })
            .then_some(text)
    })
    .await;
    let _ = controller.child.start_kill();
    let text = text.unwrap_or_else(|| panic!("no reconcile counted; log:\n{}", controller.log()));
    for expected in [
        "controller_runtime_max_concurrent_reconciles{controller=\"kustomization\"} 3",
        "controller_runtime_active_workers{controller=\"kustomization\"}",
        "controller_runtime_reconcile_time_seconds_bucket{controller=\"kustomization\",le=\"0.005\"}",
        "workqueue_depth{controller=\"kustomization\",name=\"kustomization\",priority=",
        "workqueue_adds_total{controller=\"kustomization\",name=\"kustomization\"}",
        "workqueue_longest_running_processor_seconds{controller=\"kustomization\",name=\"kustomization\"}",
    ] {
        assert!(text.contains(expected), "{expected} in\n{text}");
    }
    let requests: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("rest_client_requests_total{code=\"200\""))
        .collect();
    assert!(
        requests.iter().any(|l| l.contains("method=\"GET\"")),
        "{requests:?}"
    );
    assert!(
        requests.iter().any(|l| l.contains("method=\"PATCH\"")),
        "server-side applies are counted: {requests:?}"
    );
}

/// Flux's CancelHealthCheckOnNewRevision: a new source revision cancels health checks that
/// wait on the old one (HealthCheckCanceled, with Flux's event), and the new revision is
/// reconciled at once instead of after the old checks time out.
#[tokio::test]
async fn a_new_revision_cancels_running_health_checks_when_the_gate_is_on() {
    let harness = Harness::start_with(|options| {
        options.reconcile.cancel_health_on_new_revision = true;
    })
    .await;
    let ns = harness.cluster.namespace.clone();
    let stuck = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: stuck\nspec:\n  selector:\n    matchLabels:\n      app: stuck\n  template:\n    metadata:\n      labels:\n        app: stuck\n    spec:\n      containers:\n      - name: app\n        image: never.example.com/app:1\n";
    let v1 = harness.publish_files("stuck", "main@sha1:0001", &[("deploy.yaml", stuck)]);
    harness.source("repo", &v1).await;
    harness
        .create_kustomization("gated", json!({"wait": true, "timeout": "5m"}))
        .await;
    let api = harness.kustomizations();
    let checking = wait_for(Duration::from_secs(30), || async {
        let object = api.get("gated").await.ok()?;
        object
            .status?
            .conditions
            .iter()
            .any(|c| c.type_ == "Healthy" && c.status == "Unknown")
            .then_some(())
    })
    .await;
    assert!(checking.is_some(), "health checks are running");
    let fixed = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fixed\n";
    let v2 = harness.publish_files("fixed", "main@sha1:0002", &[("cm.yaml", fixed)]);
    harness.source("repo", &v2).await;
    let ready = harness
        .wait_ready("gated", "True", "ReconciliationSucceeded")
        .await;
    assert_eq!(
        ready.status.unwrap().last_applied_revision.as_deref(),
        Some("main@sha1:0002"),
        "the new revision, long before the old checks' 5m timeout"
    );
    let events: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(harness.cluster.client.clone(), &ns);
    // Events are written after the status, as Flux's recorder writes them.
    let canceled = wait_for(Duration::from_secs(10), || async {
        let list = events.list(&Default::default()).await.ok()?;
        list.items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("HealthCheckCanceled"))
    })
    .await
    .expect("a HealthCheckCanceled event");
    assert_eq!(
        canceled.message.as_deref(),
        Some(format!("Health checks canceled due to new reconciliation triggered by GitRepository/{ns}/repo").as_str())
    );
}

/// Flux's AdditiveCELDependencyCheck: a `readyExpr` replaces the built-in readiness check by
/// default, and adds to it with the gate on.
#[tokio::test]
async fn ready_expressions_replace_or_add_to_the_built_in_check_as_the_gate_says() {
    for additive in [false, true] {
        let harness = Harness::start_with(|options| {
            options.reconcile.additive_cel_dependency_check = additive;
        })
        .await;
        let v1 = harness.publish("v1", "main@sha1:add1");
        harness.source("repo", &v1).await;
        // Never reconciled, so never Ready by the built-in check.
        harness
            .create_kustomization("held", json!({"suspend": true, "namePrefix": "held-"}))
            .await;
        harness
            .create_kustomization(
                "dependent",
                json!({"namePrefix": "dep-", "dependsOn": [{"name": "held", "readyExpr": "true"}]}),
            )
            .await;
        if additive {
            harness
                .wait_ready("dependent", "False", "DependencyNotReady")
                .await;
        } else {
            harness
                .wait_ready("dependent", "True", "ReconciliationSucceeded")
                .await;
        }
    }
}

/// Flux's `TestKustomizationReconciler_DisallowedManagers`: fields a manager named by
/// `--override-manager` wrote are taken back (and removed) on the next reconcile, while fields
/// of other managers stay.
#[tokio::test]
async fn flux_disallowed_managers() {
    let harness = Harness::start_with(|options| {
        options.reconcile.override_managers = vec!["mallory".into()];
    })
    .await;
    let ns = harness.cluster.namespace.clone();
    let map = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: managed\ndata:\n  key: value\n";
    let v1 = harness.publish_files("managers", "v1.0.0", &[("configmap.yaml", map)]);
    harness.source("repo", &v1).await;
    harness
        .create_kustomization(
            "managers",
            json!({"healthChecks": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "managed", "namespace": ns}]}),
        )
        .await;
    // creates configmap
    let ready = harness
        .wait_ready("managers", "True", "ReconciliationSucceeded")
        .await;
    let status = ready.status.as_ref().unwrap();
    assert!(
        !status
            .conditions
            .iter()
            .any(|c| matches!(c.type_.as_str(), "Stalled" | "Reconciling") && c.status == "True"),
        "kstatus: neither stalled nor reconciling while Ready: {status:?}"
    );
    let maps = harness.config_maps();
    let created = maps.get("managed").await.unwrap().data.unwrap_or_default();
    assert_eq!(created.get("key").map(String::as_str), Some("value"));

    // update configmap with new data
    for (manager, data) in [
        ("mallory", json!({"bad-key": "overridden field manager"})),
        ("good-name", json!({"key2": "not overridden field manager"})),
    ] {
        maps.patch(
            "managed",
            &kube::api::PatchParams {
                field_manager: Some(manager.into()),
                ..Default::default()
            },
            &kube::api::Patch::Merge(json!({"data": data})),
        )
        .await
        .unwrap();
    }
    let updated = maps.get("managed").await.unwrap().data.unwrap_or_default();
    assert!(
        updated.contains_key("bad-key") && updated.contains_key("key2"),
        "{updated:?}"
    );

    // bad-key should be removed from the configmap
    harness.request_reconcile("managers", "after-mallory").await;
    let fixed = wait_for(Duration::from_secs(30), || async {
        let data = maps.get("managed").await.ok()?.data?;
        (!data.contains_key("bad-key")).then_some(data)
    })
    .await
    .expect("bad-key is removed");
    assert_eq!(fixed["key"], "value");
    assert_eq!(
        fixed["key2"], "not overridden field manager",
        "other managers' fields stay"
    );
}

/// Flux's `TestKustomizationReconciler_deleteBeforeFinalizer`: a Kustomization deleted before
/// our finalizer was added (another finalizer holds it) is reconciled without error, and our
/// finalizer is never added to it.
#[tokio::test]
async fn flux_delete_before_finalizer() {
    // As in Flux's test, the reconciler first meets the object when it is already being
    // deleted: a running controller could see it in between.
    let mut harness = Harness::start_without_controller().await;
    let ns = harness.cluster.namespace.clone();
    let api = harness.kustomizations();
    let object: kustomize_controller::api::Kustomization = serde_json::from_value(json!({
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
        "metadata": {"name": "test-kust", "namespace": ns, "finalizers": ["test-finalizer"]},
        "spec": {"interval": "10m", "prune": true, "sourceRef": {"kind": "Bucket", "name": "foo"}},
    }))
    .unwrap();
    api.create(&Default::default(), &object).await.unwrap();
    api.delete("test-kust", &Default::default()).await.unwrap();
    harness.restart_with(|_| {}).await;
    let counted = wait_for(Duration::from_secs(30), || async {
        let text = harness.metrics.encode();
        // The series read 0 from the start, as controller-runtime's: wait for a count.
        text.lines()
            .any(|l| {
                l.starts_with("controller_runtime_reconcile_total{")
                    && l.contains("result=\"success\"")
                    && !l.ends_with(" 0")
            })
            .then_some(text)
    })
    .await
    .expect("the deleting Kustomization is reconciled");
    assert!(
        counted
            .lines()
            .any(|l| l
                == "controller_runtime_reconcile_errors_total{controller=\"kustomization\"} 0"),
        "without error:\n{counted}"
    );
    let held = api.get("test-kust").await.unwrap();
    assert_eq!(
        held.metadata.finalizers,
        Some(vec!["test-finalizer".to_string()]),
        "our finalizer is not added to an object being deleted"
    );
    api.patch(
        "test-kust",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    let gone = wait_for(Duration::from_secs(10), || async {
        api.get_opt("test-kust").await.ok()?.is_none().then_some(())
    })
    .await;
    assert!(gone.is_some());
}

/// As Flux's `runtime/client`: against a server running API Priority and Fairness (every
/// supported release, by default) the controller sets no client-side limit and lets the
/// server pace it; `--kube-api-qps`/`--kube-api-burst` apply only where APF is off. The binary
/// says which it chose.
#[tokio::test]
async fn client_side_throttling_applies_only_without_priority_and_fairness() {
    let cluster = TestCluster::start().await;
    let kubeconfig = controller_kubeconfig(&cluster).await;
    let limits = ["--kube-api-qps=7", "--kube-api-burst=9"];
    let controller =
        ControllerProcess::start_with_kubeconfig(&kubeconfig, &cluster.namespace, &limits);
    assert!(
        said(
            &controller,
            "API Priority and Fairness is on: no client-side rate limit"
        )
        .await,
        "{}",
        controller.log()
    );
    drop(controller);
    let Some(server) = cluster.server() else {
        eprintln!("skipped the rest: only the in-process server can run without APF");
        return;
    };
    server.set_profile(crate::support::apiserver::ServerProfile {
        priority_and_fairness: false,
        ..Default::default()
    });
    let controller =
        ControllerProcess::start_with_kubeconfig(&kubeconfig, &cluster.namespace, &limits);
    assert!(
        said(
            &controller,
            "API Priority and Fairness is off: client-side rate limit"
        )
        .await,
        "{}",
        controller.log()
    );
    let log = controller.log();
    assert!(
        log.contains("\"qps\": 7") && log.contains("\"burst\": 9"),
        "{log}"
    );
}

/// Whether the controller's log says `words` within 30 s.
async fn said(controller: &ControllerProcess, words: &str) -> bool {
    wait_for(Duration::from_secs(30), || async {
        controller.log().contains(words).then_some(())
    })
    .await
    .is_some()
}

/// A GitRepository `repo` in the test namespace whose artifact holds one ConfigMap, `name`.
async fn source_of_one_config_map(
    cluster: &TestCluster,
    artifacts: &crate::support::artifacts::ArtifactServer,
    name: &str,
    revision: &str,
) {
    cluster
        .source_of_manifests(
            artifacts,
            revision,
            &crate::support::artifacts::config_map(name),
        )
        .await;
}
