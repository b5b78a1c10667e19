//! The binary's log as Flux users read it: `flux logs` (fluxcd/flux2 `cmd/flux/logs.go`)
//! decodes every JSON line into a fixed set of string keys, stops at the first line it
//! cannot decode, and selects lines by level, kind, name and namespace.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::artifacts::config_map;
use crate::support::cluster::{TestCluster, wait_for};
use crate::support::controller::{ControllerProcess, controller_kubeconfig};

/// A line as `flux logs` decodes it: Go's `encoding/json` into string fields, so a key that
/// is present with another type fails the decoding, and the last of duplicate keys wins.
#[derive(Debug, Default)]
pub(crate) struct FluxLogEntry {
    pub ts: String,
    pub level: String,
    pub msg: String,
    error: String,
    reconciler_kind: String,
    controller_kind: String,
    name: String,
    namespace: String,
}

pub(crate) fn decode(line: &str) -> Result<FluxLogEntry, String> {
    let value: Value = serde_json::from_str(line).map_err(|e| format!("{e}: {line}"))?;
    let object = value
        .as_object()
        .ok_or_else(|| format!("not an object: {line}"))?;
    let text = |key: &str| -> Result<String, String> {
        match object.get(key) {
            None | Some(Value::Null) => Ok(String::new()),
            Some(Value::String(text)) => Ok(text.clone()),
            Some(other) => Err(format!("{key} is {other}, not a string: {line}")),
        }
    };
    Ok(FluxLogEntry {
        ts: text("ts")?,
        level: text("level")?,
        msg: text("msg")?,
        error: text("error")?,
        reconciler_kind: text("reconciler kind")?,
        controller_kind: text("controllerKind")?,
        name: text("name")?,
        namespace: text("namespace")?,
    })
}

/// `flux logs --kind --name --namespace [--level]`: what it prints, through its template.
fn flux_logs(log: &str, kind: &str, name: &str, namespace: &str, level: &str) -> Vec<String> {
    let mut printed = Vec::new();
    for line in log.lines().filter(|l| l.starts_with('{')) {
        let entry = decode(line).unwrap_or_else(|e| panic!("flux logs stops here: {e}"));
        let kind_matches = entry.reconciler_kind.eq_ignore_ascii_case(kind)
            || entry.controller_kind.eq_ignore_ascii_case(kind);
        if (level.is_empty() || level == entry.level)
            && kind_matches
            && entry.name.eq_ignore_ascii_case(name)
            && entry.namespace.eq_ignore_ascii_case(namespace)
        {
            let shown_kind = if entry.reconciler_kind.is_empty() {
                &entry.controller_kind
            } else {
                &entry.reconciler_kind
            };
            printed.push(format!(
                "{} {} {shown_kind}/{}.{} - {} {}",
                entry.ts, entry.level, entry.name, entry.namespace, entry.msg, entry.error
            ));
        }
    }
    printed
}

/// Every line the binary writes with `--log-encoding=json` decodes as `flux logs` decodes it,
/// and a reconciliation is selected by kind, name and namespace, a failure also by level,
/// with controller-runtime's keys and Flux's messages.
#[tokio::test]
async fn flux_logs_selects_a_reconciliation_by_kind_name_and_namespace() {
    let cluster = TestCluster::start().await;
    let kubeconfig = controller_kubeconfig(&cluster).await;
    let artifacts = crate::support::artifacts::ArtifactServer::start().await;
    let ns = cluster.namespace.clone();
    cluster
        .source_of_manifests(&artifacts, "main@sha1:10f5", &config_map("logged"))
        .await;
    let controller =
        ControllerProcess::start_with_kubeconfig(&kubeconfig, &ns, &["--log-encoding=json"]);
    for (name, path, depends_on) in [
        ("logged", "./", json!([])),
        ("broken", "./missing", json!([])),
        ("dependent", "./", json!([{"name": "logged"}])),
    ] {
        cluster
            .apply(
                &json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                "metadata": {"name": name, "namespace": ns},
                "spec": {"interval": "10m", "retryInterval": "1h", "path": path, "prune": true,
                    "dependsOn": depends_on, "targetNamespace": ns,
                    "sourceRef": {"kind": "GitRepository", "name": "repo"}}}),
            )
            .await;
    }
    let log = wait_for(Duration::from_secs(30), || async {
        let log = controller.log();
        (log.contains("Reconciliation finished in")
            && log.contains("Reconciliation failed after")
            && log.contains("All dependencies are ready"))
        .then_some(log)
    })
    .await
    .unwrap_or_else(|| panic!("both reconciliations end; log:\n{}", controller.log()));

    for line in log.lines() {
        assert!(
            line.starts_with('{'),
            "flux logs skips a line that is not JSON: {line}"
        );
        let entry = decode(line).unwrap();
        assert!(
            ["trace", "debug", "info", "error"].contains(&entry.level.as_str()),
            "{line}"
        );
        assert_eq!(entry.ts.len(), "2026-11-26T15:45:22.123Z".len(), "{line}");
    }
    let selected = flux_logs(&log, "kustomization", "logged", &ns, "");
    let prefix = format!("info Kustomization/logged.{ns} - ");
    for message in ["server-side apply completed", "Reconciliation finished in "] {
        assert!(
            selected
                .iter()
                .any(|l| l.contains(&format!("{prefix}{message}"))),
            "{message} in {selected:#?}"
        );
    }
    let dependent = flux_logs(&log, "kustomization", "dependent", &ns, "info");
    assert!(
        dependent.iter().any(|l| l.contains(&format!(
            "info Kustomization/dependent.{ns} - All dependencies are ready, proceeding with reconciliation"
        ))),
        "as Flux, once the dependencies are ready: {dependent:#?}"
    );
    let logged = flux_logs(&log, "kustomization", "logged", &ns, "info");
    assert!(
        !logged.iter().any(|l| l.contains("All dependencies")),
        "only with dependencies: {logged:#?}"
    );
    let failed = flux_logs(&log, "Kustomization", "broken", &ns, "error");
    assert!(
        failed.iter().any(|l| l.contains(&format!(
            "error Kustomization/broken.{ns} - Reconciliation failed after"
        )) && l.contains("missing")),
        "{failed:#?}"
    );

    let lines: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let applied = lines
        .iter()
        .find(|l| l["msg"] == "server-side apply completed")
        .unwrap();
    assert_eq!(applied["controller"], "kustomization");
    assert_eq!(applied["controllerGroup"], "kustomize.toolkit.fluxcd.io");
    assert_eq!(applied["controllerKind"], "Kustomization");
    assert_eq!(
        applied["Kustomization"],
        json!({"name": "logged", "namespace": ns})
    );
    assert_eq!(
        applied["output"],
        json!({format!("ConfigMap/{ns}/logged"): "created"})
    );
    assert_eq!(applied["revision"], "main@sha1:10f5");
    let id = applied["reconcileID"].as_str().unwrap();
    assert_eq!(id.len(), 36, "{id}");
    let finished = lines
        .iter()
        .find(|l| {
            l["name"] == "logged"
                && l["msg"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("Reconciliation finished"))
        })
        .unwrap();
    assert_eq!(
        finished["reconcileID"], id,
        "one reconciliation, one reconcile ID"
    );
    assert!(
        finished["msg"]
            .as_str()
            .unwrap()
            .ends_with(", next run in 10m0s"),
        "{finished}"
    );
    let setup: Vec<&str> = lines
        .iter()
        .filter(|l| l["logger"] == "setup")
        .filter_map(|l| l["msg"].as_str())
        .collect();
    assert!(setup.contains(&"starting manager"), "{setup:?}");
    let workers = lines
        .iter()
        .find(|l| l["msg"] == "Starting workers")
        .unwrap();
    assert_eq!(workers["worker count"], 4, "{workers}");
}

/// As fluxcd/pkg `runtime/client.KubeConfig`: a client for a remote cluster asks that
/// cluster whether it runs API Priority and Fairness; with it there is no client-side limit,
/// without it client-go's default (5 QPS, burst 10) — whatever the main cluster runs. The
/// binary says which it chose, and both Kustomizations apply.
#[tokio::test]
async fn each_remote_cluster_is_throttled_as_its_own_server_asks() {
    use crate::support::apiserver::{ServerProfile, TestApiServer};
    let cluster = TestCluster::start().await;
    let kubeconfig = controller_kubeconfig(&cluster).await;
    let artifacts = crate::support::artifacts::ArtifactServer::start().await;
    let ns = cluster.namespace.clone();
    cluster
        .source_of_manifests(&artifacts, "main@sha1:fa12", &config_map("far"))
        .await;
    let paced = TestApiServer::start().await;
    let unpaced = TestApiServer::start().await;
    unpaced.set_profile(ServerProfile {
        priority_and_fairness: false,
        ..Default::default()
    });
    for (name, remote) in [("paced", &paced), ("unpaced", &unpaced)] {
        let client = kube::Client::try_from(remote.client_config()).unwrap();
        let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client);
        namespaces
            .create(
                &Default::default(),
                &serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap(),
            )
            .await
            .unwrap();
        cluster
            .apply(&json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": name, "namespace": ns},
                "stringData": {"value": remote.kubeconfig_yaml()}}))
            .await;
        cluster
            .apply(
                &json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                "metadata": {"name": name, "namespace": ns},
                "spec": {"interval": "10m", "prune": true, "targetNamespace": ns,
                    "kubeConfig": {"secretRef": {"name": name}},
                    "sourceRef": {"kind": "GitRepository", "name": "repo"}}}),
            )
            .await;
    }
    let controller =
        ControllerProcess::start_with_kubeconfig(&kubeconfig, &ns, &["--log-encoding=json"]);
    let finished = |log: &str, name: &str| {
        log.lines().any(|l| {
            l.contains(&format!("\"name\":\"{name}\""))
                && l.contains("\"msg\":\"Reconciliation finished in")
        })
    };
    let log = wait_for(Duration::from_secs(30), || async {
        let log = controller.log();
        (finished(&log, "paced") && finished(&log, "unpaced")).then_some(log)
    })
    .await
    .unwrap_or_else(|| panic!("both apply to their cluster; log:\n{}", controller.log()));
    let said = |name: &str| -> Value {
        log.lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .find(|l| {
                l["name"] == name
                    && l["msg"]
                        .as_str()
                        .is_some_and(|m| m.starts_with("remote cluster: API Priority"))
            })
            .unwrap_or_else(|| panic!("{name}: the choice is logged:\n{log}"))
    };
    let paced_line = said("paced");
    assert_eq!(
        paced_line["msg"],
        "remote cluster: API Priority and Fairness is on: no client-side rate limit"
    );
    let unpaced_line = said("unpaced");
    assert_eq!(
        unpaced_line["msg"],
        "remote cluster: API Priority and Fairness is off: client-side rate limit"
    );
    assert_eq!(
        (&unpaced_line["qps"], &unpaced_line["burst"]),
        (&json!(5.0), &json!(10))
    );
}

/// At `--log-level=trace` the lines are the controller's, as Flux's are: each event is logged
/// by the recorder (selected by `flux logs` through `reconciler kind`) and by controller-runtime's
/// `events` logger, and nothing of the HTTP and TLS stack (a line or more per request) is.
#[tokio::test]
async fn debug_and_trace_lines_are_the_controllers_not_its_http_stacks() {
    let cluster = TestCluster::start().await;
    let kubeconfig = controller_kubeconfig(&cluster).await;
    let artifacts = crate::support::artifacts::ArtifactServer::start().await;
    let ns = cluster.namespace.clone();
    cluster
        .source_of_manifests(&artifacts, "main@sha1:7ace", &config_map("traced"))
        .await;
    let controller = ControllerProcess::start_with_kubeconfig(
        &kubeconfig,
        &ns,
        &["--log-level=trace", "--log-encoding=json"],
    );
    cluster
        .apply(
            &json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": "traced", "namespace": ns},
            "spec": {"interval": "10m", "path": "./", "prune": true, "targetNamespace": ns,
                "sourceRef": {"kind": "GitRepository", "name": "repo"}}}),
        )
        .await;
    let log = wait_for(Duration::from_secs(30), || async {
        let log = controller.log();
        let events = log
            .lines()
            .filter(|l| {
                l.contains("\"logger\":\"events\"") && l.contains("Reconciliation finished")
            })
            .count();
        (events > 0).then_some(log)
    })
    .await
    .unwrap_or_else(|| panic!("the success event is logged; log:\n{}", controller.log()));
    let lines: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let transport = [
        "hyper",
        "hyper_util",
        "h2",
        "tower",
        "rustls",
        "reqwest",
        "log",
    ];
    for line in &lines {
        let logger = line["logger"].as_str().unwrap_or_default();
        assert!(!transport.contains(&logger), "{line}");
        assert_ne!(line["msg"], "requesting", "{line}");
    }
    let event = lines
        .iter()
        .find(|l| {
            l["logger"] == "events"
                && l["msg"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("Reconciliation finished"))
        })
        .unwrap();
    assert_eq!(event["level"], "debug");
    assert_eq!(event["type"], "Normal");
    assert_eq!(event["reason"], "ReconciliationSucceeded");
    assert_eq!(event["object"]["kind"], "Kustomization");
    assert_eq!(event["object"]["name"], "traced");
    assert_eq!(event["object"]["namespace"], ns.as_str());
    assert!(event.get("reconcileID").is_none(), "{event}");
    let recorded = flux_logs(&log, "Kustomization", "traced", &ns, "info");
    assert!(
        recorded.iter().any(|l| l.contains(&format!(
            "info Kustomization/traced.{ns} - Reconciliation finished in"
        ))),
        "{recorded:#?}"
    );
}
