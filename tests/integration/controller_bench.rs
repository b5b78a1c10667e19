//! `make bench-controller`: the shipped binary reconciles N Kustomizations of four objects
//! each (ServiceAccount, ConfigMap, Secret, Service: Flux's benchmark shape, the Service
//! headless so that a fleet does not depend on the size of the cluster's service IP range —
//! kube-local's is a /24) through five
//! phases — first apply, a no-change reconcile requested by
//! `reconcile.fluxcd.io/requestedAt`, a source revision with the same manifests, a revision
//! that changes one object of each, deletion — and reports for each the time and the
//! controller's API requests per Kustomization, then its peak RSS. It runs against the test
//! cluster: the in-process API server, or a real one (`TEST_KUBECONFIG`,
//! `KUBEBUILDER_ASSETS`), where the controller's own `rest_client_requests_total` counts the
//! requests; in process, the server's request log also splits them by verb and resource. The
//! controller authenticates with its own ServiceAccount token, so its requests are told apart
//! from the benchmark's. `BENCH_N` (default 100), `BENCH_CONCURRENT` (4), `BENCH_ARGS` (more
//! controller flags),
//! `BENCH_QPS`/`BENCH_BURST` (Flux's defaults 50/300; they apply where the server runs no API
//! Priority and Fairness: in process unless `BENCH_APF=1`, never on a real server, as in
//! Flux). A phase ends when a list of all the
//! Kustomizations shows it done; lists are N ms apart (at least 250 ms), so times are that
//! coarse.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kustomize_controller::api::Kustomization;
use serde_json::json;

use crate::support::apiserver::TestApiServer;
use crate::support::artifacts::{ArtifactServer, SourceKind};
use crate::support::cluster::TestCluster;
use crate::support::controller::ControllerProcess;
use crate::support::http_get_text;

const OBJECTS: &str = "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: app\n---\n\
    apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  key: VALUE\n---\n\
    apiVersion: v1\nkind: Secret\nmetadata:\n  name: app\nstringData:\n  token: t\n---\n\
    apiVersion: v1\nkind: Service\nmetadata:\n  name: app\nspec:\n  clusterIP: None\n  selector:\n    app: app\n  ports:\n  - port: 80\n";

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

/// Counts the controller's requests phase by phase, in two ways. Its own
/// `rest_client_requests_total` (by method, discovery and leader election included) works on
/// every backend, so a run against a real API server reports what it spent; the in-process
/// server's request log also tells verbs, resources and Events apart (the controller's
/// requests are those of its ServiceAccount).
struct Tally<'a> {
    log: Option<(&'a TestApiServer, usize)>,
    /// The API server's own `process_cpu_seconds_total`, where it serves `/metrics` (a real
    /// kube-apiserver does to an admin), and its reading at the last report.
    server: kube::Client,
    server_cpu: Option<f64>,
    /// The controller's own `process_cpu_seconds_total` at the last report.
    controller_cpu: f64,
    user: String,
    metrics: String,
    counted: BTreeMap<String, f64>,
}

impl<'a> Tally<'a> {
    async fn start(
        server: Option<&'a TestApiServer>,
        admin: &kube::Client,
        user: &str,
        metrics: &str,
    ) -> Tally<'a> {
        let mut tally = Tally {
            log: server.map(|s| (s, s.requests().len())),
            server: admin.clone(),
            server_cpu: api_server_cpu(admin).await,
            controller_cpu: 0.0,
            user: user.to_string(),
            metrics: metrics.to_string(),
            counted: BTreeMap::new(),
        };
        let (counted, cpu) = tally.client_requests().await;
        (tally.counted, tally.controller_cpu) = (counted, cpu);
        tally
    }

    /// `rest_client_requests_total` summed by method, and the controller's CPU seconds, once
    /// the controller serves metrics.
    async fn client_requests(&self) -> (BTreeMap<String, f64>, f64) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(text) = http_get_text(&self.metrics, "/metrics").await
                && text.starts_with("HTTP/1.1 200")
            {
                let cpu = text
                    .lines()
                    .find_map(|l| l.strip_prefix("process_cpu_seconds_total "))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0.0);
                return (requests_by_method(&text), cpu);
            }
            assert!(Instant::now() < deadline, "the controller serves /metrics");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn report(&mut self, phase: &str, count: usize, took: Duration) {
        let per = |n: f64| n / count as f64;
        let (counted, controller_cpu) = self.client_requests().await;
        let spent: BTreeMap<&String, f64> = counted
            .iter()
            .map(|(method, n)| (method, n - self.counted.get(method).unwrap_or(&0.0)))
            .filter(|(_, n)| *n > 0.0)
            .collect();
        let total: f64 = spent.values().sum();
        println!(
            "bench-controller: {phase}: {took:.2?}, {:.2} requests per Kustomization by the \
             controller's rest_client_requests_total",
            per(total)
        );
        for (method, n) in spent {
            println!("bench-controller:   {method:<40} {:>8.2}", per(n));
        }
        self.counted = counted;
        println!(
            "bench-controller: {phase}: controller CPU {:.2} s ({:.2} ms per Kustomization)",
            controller_cpu - self.controller_cpu,
            per(controller_cpu - self.controller_cpu) * 1000.0
        );
        self.controller_cpu = controller_cpu;
        let cpu = api_server_cpu(&self.server).await;
        if let (Some(before), Some(after)) = (self.server_cpu, cpu) {
            println!(
                "bench-controller: {phase}: kube-apiserver CPU {:.1} s ({:.1} ms per Kustomization)",
                after - before,
                per(after - before) * 1000.0
            );
        }
        self.server_cpu = cpu;
        let Some((server, from)) = self.log else {
            return;
        };
        let requests = server.requests();
        let mut by_kind: BTreeMap<String, usize> = BTreeMap::new();
        for record in requests[from..].iter().filter(|r| r.user == self.user) {
            let dry = if record.dry_run { " (dry-run)" } else { "" };
            *by_kind
                .entry(format!("{} {}{dry}", record.verb, record.resource))
                .or_default() += 1;
        }
        let total: usize = by_kind.values().sum();
        // Events go through the event recorder's own rate limiter, never ahead of the others.
        let events: usize = by_kind
            .iter()
            .filter(|(kind, _)| kind.ends_with(" events"))
            .map(|(_, n)| n)
            .sum();
        println!(
            "bench-controller: {phase}: {:.2} requests per Kustomization in the server's log \
             ({:.2} without Events)",
            per(total as f64),
            per((total - events) as f64)
        );
        for (kind, n) in by_kind {
            println!("bench-controller:   {kind:<40} {:>8.2}", per(n as f64));
        }
        self.log = Some((server, requests.len()));
    }
}

/// The CPU seconds the API server has used, from its own `/metrics` (`None` where it serves
/// none: the in-process server).
async fn api_server_cpu(admin: &kube::Client) -> Option<f64> {
    let request = http::Request::get("/metrics").body(Vec::new()).ok()?;
    let page = admin.request_text(request).await.ok()?;
    page.lines()
        .find_map(|l| l.strip_prefix("process_cpu_seconds_total "))
        .and_then(|v| v.trim().parse().ok())
}

/// Sums `rest_client_requests_total` samples of a Prometheus text page by their method.
fn requests_by_method(page: &str) -> BTreeMap<String, f64> {
    let mut by_method = BTreeMap::new();
    for line in page.lines() {
        let Some(labels) = line.strip_prefix("rest_client_requests_total{") else {
            continue;
        };
        let method = labels
            .split_once("method=\"")
            .and_then(|(_, rest)| rest.split_once('"'))
            .map_or("?", |(method, _)| method);
        let value: f64 = line
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        *by_method.entry(method.to_string()).or_default() += value;
    }
    by_method
}

/// Waits until `count` of a fleet of `fleet` Kustomizations hold `holds`.
async fn wait_all(
    api: &Api<Kustomization>,
    fleet: usize,
    count: usize,
    what: &str,
    holds: impl Fn(&Kustomization) -> bool,
) {
    // Listing every Kustomization takes the in-process server's one lock for as long as it
    // serializes them (tens of MB at 10,000): polled every 250 ms, that was most of its time.
    let pause = Duration::from_millis(fleet as u64).max(Duration::from_millis(250));
    let deadline = Instant::now() + Duration::from_secs(3_600);
    loop {
        if let Ok(list) = api.list(&ListParams::default()).await
            && list.items.iter().filter(|k| holds(k)).count() == count
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "not all {count} Kustomizations {what}"
        );
        tokio::time::sleep(pause).await;
    }
}

fn ready_at(object: &Kustomization, revision: &str) -> bool {
    object.status.as_ref().is_some_and(|s| {
        s.last_applied_revision.as_deref() == Some(revision)
            && s.conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark; run by make bench-controller"]
async fn bench_controller() {
    let count = env_number("BENCH_N", 100);
    let concurrent = env_number("BENCH_CONCURRENT", 4);
    let qps = env_number("BENCH_QPS", 50);
    let burst = env_number("BENCH_BURST", 300);
    let cluster = TestCluster::start().await;
    // The controller limits itself only where the server runs no API Priority and Fairness
    // (as Flux): in process, APF is off unless BENCH_APF=1, so that BENCH_QPS applies and the
    // figures compare with the earlier ones; a real server runs APF (no client limit).
    let flow_control = env_number("BENCH_APF", 0) == 1;
    if let Some(server) = cluster.server() {
        server.set_profile(crate::support::apiserver::ServerProfile {
            priority_and_fairness: flow_control,
            ..Default::default()
        });
    }
    // The controller gets the hand-off of a real deployment: its own account, cluster-admin.
    let ns = cluster.namespace.clone();
    let (token, user) = cluster.controller_account().await;

    let artifacts = ArtifactServer::start().await;
    let publish = |name: &str, revision: &str, value: &str| {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("app.yaml"), OBJECTS.replace("VALUE", value)).unwrap();
        artifacts.publish_dir(name, revision, dir.path())
    };
    let first = publish("bench-1.tar.gz", "main@sha1:1111", "one");
    cluster
        .create_source(SourceKind::GitRepository, &ns, "repo", Some(&first))
        .await;
    // BENCH_ARGS: more flags for the controller (`--build-cache-max-size=0`).
    let extra = std::env::var("BENCH_ARGS").unwrap_or_default();
    let mut flags = vec![
        format!("--concurrent={concurrent}"),
        format!("--kube-api-qps={qps}"),
        format!("--kube-api-burst={burst}"),
        "--log-level=error".to_string(),
    ];
    flags.extend(extra.split_whitespace().map(str::to_string));
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut controller = ControllerProcess::start_with_kubeconfig(
        &cluster.kubeconfig_with_token(&token),
        &ns,
        &flags,
    );
    let pid = controller.child.id().unwrap();
    println!(
        "bench-controller: {count} Kustomizations x 4 objects, --concurrent={concurrent} \
         --kube-api-qps={qps} --kube-api-burst={burst} {extra}"
    );
    let api: Api<Kustomization> = Api::namespaced(cluster.client.clone(), &ns);

    let mut tally = Tally::start(
        cluster.server(),
        &cluster.client,
        &user,
        &controller.metrics,
    )
    .await;

    // First apply.
    let started = Instant::now();
    for i in 0..count {
        let object: Kustomization = serde_json::from_value(json!({
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": format!("app-{i}"), "namespace": ns},
            "spec": {"interval": "1h", "prune": true, "targetNamespace": ns, "namePrefix": format!("app-{i}-"),
                "sourceRef": {"kind": "GitRepository", "name": "repo"}},
        }))
        .unwrap();
        api.create(&Default::default(), &object).await.unwrap();
    }
    wait_all(&api, count, count, "became Ready", |k| {
        ready_at(k, "main@sha1:1111")
    })
    .await;
    tally.report("first apply", count, started.elapsed()).await;

    // A no-change reconcile, requested.
    let started = Instant::now();
    for i in 0..count {
        api.patch(
            &format!("app-{i}"),
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": "bench-1"}}})),
        )
        .await
        .unwrap();
    }
    wait_all(&api, count, count, "handled the request", |k| {
        k.status
            .as_ref()
            .and_then(|s| s.last_handled_reconcile_at.as_deref())
            == Some("bench-1")
            && ready_at(k, "main@sha1:1111")
    })
    .await;
    tally
        .report("no-change reconcile", count, started.elapsed())
        .await;

    // A new revision with the same manifests (a commit elsewhere in the repository): the
    // objects are as the last apply left them, which the owned-object watches tell. Then one
    // that changes one object of each.
    for (phase, file, revision, value) in [
        (
            "revision without changes",
            "bench-1b.tar.gz",
            "main@sha1:1b1b",
            "one",
        ),
        ("new revision", "bench-2.tar.gz", "main@sha1:2222", "two"),
    ] {
        let started = Instant::now();
        let artifact = publish(file, revision, value);
        cluster
            .set_artifact(SourceKind::GitRepository, &ns, "repo", &artifact)
            .await;
        wait_all(&api, count, count, phase, |k| ready_at(k, revision)).await;
        tally.report(phase, count, started.elapsed()).await;
    }

    // Deletion: every Kustomization prunes its objects and goes.
    let started = Instant::now();
    for i in 0..count {
        api.delete(&format!("app-{i}"), &DeleteParams::default())
            .await
            .unwrap();
    }
    wait_all(&api, count, 0, "were deleted", |_| true).await;
    tally.report("deletion", count, started.elapsed()).await;

    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let peak = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .unwrap_or("VmHWM: ?")
        .trim_start_matches("VmHWM:")
        .trim()
        .to_string();
    let _ = controller.child.start_kill();
    let _ = controller.child.wait().await;
    println!("bench-controller: controller peak RSS {peak}");
}
