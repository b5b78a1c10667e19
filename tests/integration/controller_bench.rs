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
//! `BENCH_SPREAD` (seconds over which the requested no-change reconciles are asked),
//! `BENCH_REQUESTS` (rounds of them, default 1: the first and last reported apart),
//! `BENCH_INTERVAL` (seconds: the fleet's interval and a phase for one no-change interval
//! cycle), `BENCH_CPUS` (1: the async runtime's workers, one per CPU of the Deployment's limit),
//! `BENCH_QPS`/`BENCH_BURST` (Flux's defaults 50/300; they apply where the server runs no API
//! Priority and Fairness: in process unless `BENCH_APF=1`, never on a real server, as in
//! Flux). A phase ends when the benchmark's watch of the Kustomizations shows it done (looked
//! at up to ten times a second). Where the API server reports its CPU (a real one), the
//! benchmark first measures its own requests without the controller (create, annotate,
//! delete the fleet) and reports the controller's share of each phase apart.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kube::api::{Api, DeleteParams, Patch, PatchParams};
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
    /// The API server's `apiserver_request_total` by verb and resource, every client's
    /// (the controller-manager's reactions to the objects included), at the last report.
    server_requests: BTreeMap<String, f64>,
    /// The controller's own `process_cpu_seconds_total` at the last report.
    controller_cpu: f64,
    user: String,
    /// Each controller process's metrics address (one per shard).
    metrics: Vec<String>,
    counted: BTreeMap<String, f64>,
}

impl<'a> Tally<'a> {
    async fn start(
        server: Option<&'a TestApiServer>,
        admin: &kube::Client,
        user: &str,
        metrics: Vec<String>,
    ) -> Tally<'a> {
        let mut tally = Tally {
            log: server.map(|s| (s, s.requests().len())),
            server: admin.clone(),
            server_cpu: api_server_cpu(admin).await,
            server_requests: api_server_requests(admin).await,
            controller_cpu: 0.0,
            user: user.to_string(),
            metrics,
            counted: BTreeMap::new(),
        };
        let (counted, cpu) = tally.client_requests().await;
        (tally.counted, tally.controller_cpu) = (counted, cpu);
        tally
    }

    /// `rest_client_requests_total` summed by method, and the controller's CPU seconds, over
    /// every process (shard), once they serve metrics.
    async fn client_requests(&self) -> (BTreeMap<String, f64>, f64) {
        let (mut requests, mut cpu) = (BTreeMap::new(), 0.0);
        for page in metric_pages(&self.metrics).await {
            cpu += page
                .lines()
                .find_map(|l| l.strip_prefix("process_cpu_seconds_total "))
                .and_then(|v| v.trim().parse::<f64>().ok())
                .unwrap_or(0.0);
            for (method, n) in requests_by_method(&page) {
                *requests.entry(method).or_default() += n;
            }
        }
        (requests, cpu)
    }

    /// `own`: what the benchmark's own requests for the phase cost the API server, per
    /// Kustomization, measured without the controller (`bench_alone`).
    async fn report(&mut self, phase: &str, count: usize, took: Duration, own: Option<f64>) {
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
            let total = per(after - before) * 1000.0;
            println!(
                "bench-controller: {phase}: kube-apiserver CPU {:.1} s ({total:.1} ms per Kustomization)",
                after - before,
            );
            if let Some(own) = own {
                println!(
                    "bench-controller: {phase}:   of which the benchmark's own requests {own:.1} ms, \
                     the controller's {:.1} ms per Kustomization",
                    total - own
                );
            }
        }
        self.server_cpu = cpu;
        let served = api_server_requests(&self.server).await;
        for (kind, n) in &served {
            let n = per(n - self.server_requests.get(kind).unwrap_or(&0.0));
            if n >= 0.05 {
                println!("bench-controller:   served to every client: {kind:<52} {n:>6.2}");
            }
        }
        self.server_requests = served;
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

/// How many times a Kustomization was reconciled, by its status history.
fn reconciliations(k: &Kustomization) -> i64 {
    k.status.as_ref().map_or(0, |status| {
        status
            .history
            .iter()
            .map(|snapshot| snapshot.total_reconciliations)
            .sum()
    })
}

/// A no-change interval cycle: nothing is asked of the fleet; each Kustomization is
/// reconciled again when its interval (`every`, with Flux's default jitter of 5%) runs out
/// after its last reconciliation. The controller idles until the first is due, which is
/// reported apart (the status history's `lastReconciled` says when that is), then the phase
/// lasts until every Kustomization's history counts one more reconciliation.
async fn interval_cycle(fleet: &mut Fleet, tally: &mut Tally<'_>, count: usize, every: Duration) {
    let state = fleet.store.state();
    let before: BTreeMap<String, i64> = state
        .iter()
        .map(|k| {
            (
                k.metadata.name.clone().unwrap_or_default(),
                reconciliations(k),
            )
        })
        .collect();
    let earliest = state
        .iter()
        .filter_map(|k| {
            k.status
                .as_ref()?
                .history
                .iter()
                .map(|s| s.last_reconciled.0)
                .max()
        })
        .min()
        .expect("a reconciled fleet");
    let idle = Instant::now();
    let lead = every.mul_f64(0.95).saturating_sub(Duration::from_secs(2));
    let due = earliest + jiff::SignedDuration::try_from(lead).expect("a short interval");
    // A timer that fired during the earlier phases would have counted in their figures.
    let wait = Duration::try_from(due.duration_since(jiff::Timestamp::now())).unwrap_or_else(|_| {
        panic!("BENCH_INTERVAL is shorter than the phases before the cycle took: timers fired in them")
    });
    tokio::time::sleep(wait).await;
    tally
        .report(
            "idle until the interval is due",
            count,
            idle.elapsed(),
            Some(0.0),
        )
        .await;
    let started = Instant::now();
    fleet
        .wait_all(count, "were reconciled on their interval", |k| {
            let name = k.metadata.name.as_deref().unwrap_or_default();
            reconciliations(k) > before.get(name).copied().unwrap_or(i64::MAX)
        })
        .await;
    tally
        .report("interval cycle", count, started.elapsed(), Some(0.0))
        .await;
}

/// Each process's `/metrics` page, waiting (up to 30 s) until it serves one.
async fn metric_pages(addresses: &[String]) -> Vec<String> {
    let mut pages = Vec::new();
    for address in addresses {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(text) = http_get_text(address, "/metrics").await
                && text.starts_with("HTTP/1.1 200")
            {
                pages.push(text);
                break;
            }
            assert!(Instant::now() < deadline, "the controller serves /metrics");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    pages
}

/// The Kustomizations a metrics page shows reconciled (Flux's per-object
/// `gotk_reconcile_duration_seconds` series).
fn reconciled_names(page: &str) -> std::collections::BTreeSet<String> {
    page.lines()
        .filter_map(|l| l.strip_prefix("gotk_reconcile_duration_seconds_count{"))
        .filter_map(|labels| labels.split_once("name=\"").map(|(_, rest)| rest))
        .filter_map(|rest| rest.split_once('"').map(|(name, _)| name.to_string()))
        .collect()
}

/// The CPU seconds the API server has used, from its own `/metrics` (`None` where it serves
/// none: the in-process server).
pub(crate) async fn api_server_cpu(admin: &kube::Client) -> Option<f64> {
    let request = http::Request::get("/metrics").body(Vec::new()).ok()?;
    let page = admin.request_text(request).await.ok()?;
    page.lines()
        .find_map(|l| l.strip_prefix("process_cpu_seconds_total "))
        .and_then(|v| v.trim().parse().ok())
}

/// Waits (up to ten minutes) until no namespace is terminating: an earlier run's namespace,
/// thousands of objects, is emptied by kube-controller-manager after that run ends, and the
/// API server's CPU for it would be counted in this run's measurements.
pub(crate) async fn until_no_namespace_terminates(admin: &kube::Client) {
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(admin.clone());
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let terminating: Vec<String> = match namespaces.list(&Default::default()).await {
            Ok(list) => list
                .items
                .into_iter()
                .filter(|ns| ns.metadata.deletion_timestamp.is_some())
                .filter_map(|ns| ns.metadata.name)
                .collect(),
            Err(_) => return,
        };
        if terminating.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "namespaces still terminating after ten minutes: {terminating:?}"
        );
        println!("bench: waiting for {terminating:?} to be deleted before measuring");
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
}

/// The API server's `apiserver_request_total` summed by verb, resource, subresource and
/// dry-run, long-running watches left out (empty where it serves no metrics).
async fn api_server_requests(admin: &kube::Client) -> BTreeMap<String, f64> {
    let Ok(request) = http::Request::get("/metrics").body(Vec::new()) else {
        return BTreeMap::new();
    };
    let page = admin.request_text(request).await.unwrap_or_default();
    let mut served = BTreeMap::new();
    for line in page.lines() {
        let Some(labels) = line.strip_prefix("apiserver_request_total{") else {
            continue;
        };
        let label = |name: &str| {
            labels
                .split_once(&format!("{name}=\""))
                .and_then(|(_, rest)| rest.split_once('"'))
                .map_or("", |(value, _)| value)
                .to_string()
        };
        let verb = label("verb");
        if verb == "WATCH" {
            continue;
        }
        let mut kind = format!("{verb} {}", label("resource"));
        for (name, shown) in [("subresource", "/"), ("dry_run", " dry-run=")] {
            let value = label(name);
            if !value.is_empty() {
                kind.push_str(shown);
                kind.push_str(&value);
            }
        }
        let value: f64 = line
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        *served.entry(kind).or_default() += value;
    }
    served
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

/// What the benchmark knows of the fleet: a watch of the Kustomizations into a store. A
/// phase's end is read off the store, not off lists: a list of 1,000 Kustomizations costs a
/// kube-apiserver about half a second of CPU (`make bench-server-cost`), so polling with lists
/// was most of the server CPU the benchmark used to report.
struct Fleet {
    store: kube::runtime::reflector::Store<Kustomization>,
    changed: tokio::sync::watch::Receiver<u64>,
    task: tokio::task::JoinHandle<()>,
}

impl Fleet {
    async fn watch(api: &Api<Kustomization>) -> Fleet {
        use futures::StreamExt;
        use kube::runtime::{WatchStreamExt, reflector, watcher};
        let (store, writer) = reflector::store();
        let (notify, changed) = tokio::sync::watch::channel(0u64);
        let stream = reflector(writer, watcher(api.clone(), watcher::Config::default()))
            .default_backoff()
            .touched_objects();
        let task = tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while stream.next().await.is_some() {
                notify.send_modify(|n| *n += 1);
            }
        });
        let fleet = Fleet {
            store,
            changed,
            task,
        };
        fleet.store.wait_until_ready().await.unwrap();
        fleet
    }

    /// Waits until `count` Kustomizations of the store hold `holds`.
    async fn wait_all(&mut self, count: usize, what: &str, holds: impl Fn(&Kustomization) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(3_600);
        loop {
            let state = self.store.state();
            if state.len() >= count && state.iter().filter(|k| holds(k)).count() == count {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "not all {count} Kustomizations {what}"
            );
            // Looked at again after the next change, at most ten times a second.
            let _ = tokio::time::timeout(Duration::from_secs(1), self.changed.changed()).await;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn wait_gone(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(3_600);
        while !self.store.is_empty() {
            assert!(
                Instant::now() < deadline,
                "not all Kustomizations were deleted"
            );
            let _ = tokio::time::timeout(Duration::from_secs(1), self.changed.changed()).await;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What the API server spends on the benchmark's own requests, per Kustomization and in ms,
/// with no controller running: creating the fleet, annotating each with `requestedAt`,
/// deleting it (no finalizer, so at once), with the fleet's watch open as in the phases.
/// `None` where the server tells no CPU.
async fn bench_alone(
    admin: &kube::Client,
    api: &Api<Kustomization>,
    fleet: &mut Fleet,
    count: usize,
    object: impl Fn(usize) -> Kustomization,
) -> Option<[f64; 3]> {
    let mut spent = [0.0; 3];
    let mut last = api_server_cpu(admin).await?;
    let mut mark = |slot: usize, now: f64| {
        spent[slot] = (now - last) * 1000.0 / count as f64;
        last = now;
    };
    for i in 0..count {
        api.create(&Default::default(), &object(i)).await.unwrap();
    }
    fleet.wait_all(count, "were created", |_| true).await;
    mark(0, api_server_cpu(admin).await?);
    for i in 0..count {
        api.patch(
            &format!("app-{i}"),
            &PatchParams::default(),
            &requested("alone"),
        )
        .await
        .unwrap();
    }
    fleet
        .wait_all(count, "were annotated", |k| {
            k.metadata.annotations.as_ref().is_some_and(|a| {
                a.get("reconcile.fluxcd.io/requestedAt").map(String::as_str) == Some("alone")
            })
        })
        .await;
    mark(1, api_server_cpu(admin).await?);
    for i in 0..count {
        api.delete(&format!("app-{i}"), &DeleteParams::default())
            .await
            .unwrap();
    }
    fleet.wait_gone().await;
    mark(2, api_server_cpu(admin).await?);
    Some(spent)
}

fn requested(token: &str) -> Patch<serde_json::Value> {
    Patch::Merge(json!({"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": token}}}))
}

/// Requests a reconciliation of every Kustomization (`token`), paced over `spread`, and waits
/// until each has handled it.
async fn request_all(
    api: &Api<Kustomization>,
    fleet: &mut Fleet,
    count: usize,
    spread: Duration,
    token: &str,
) {
    let started = Instant::now();
    for i in 0..count {
        tokio::time::sleep_until((started + spread.mul_f64(i as f64 / count as f64)).into()).await;
        api.patch(
            &format!("app-{i}"),
            &PatchParams::default(),
            &requested(token),
        )
        .await
        .unwrap();
    }
    fleet
        .wait_all(count, "handled the request", |k| {
            k.status
                .as_ref()
                .and_then(|s| s.last_handled_reconcile_at.as_deref())
                == Some(token)
                && ready_at(k, "main@sha1:1111")
        })
        .await;
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
    // BENCH_SHARDS: Flux's sharding, one process per `sharding.fluxcd.io/key` value, each
    // with its own Lease.
    let shards = env_number("BENCH_SHARDS", 1).max(1);
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
    let api: Api<Kustomization> = Api::namespaced(cluster.client.clone(), &ns);
    // BENCH_INTERVAL (seconds): the fleet's interval (else 1h), and a phase after the new
    // revision that waits for one interval cycle (see `interval_cycle`). It must be longer than
    // the phases before it take, or timers fire during them.
    let cycle = Some(env_number("BENCH_INTERVAL", 0))
        .filter(|seconds| *seconds > 0)
        .map(|seconds| Duration::from_secs(seconds as u64));
    let interval = cycle.map_or("1h".to_string(), |every| format!("{}s", every.as_secs()));
    let kustomization = |i: usize| -> Kustomization {
        serde_json::from_value(json!({
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": format!("app-{i}"), "namespace": ns,
                "labels": {"sharding.fluxcd.io/key": format!("shard{}", i % shards)}},
            "spec": {"interval": interval, "prune": true, "targetNamespace": ns, "namePrefix": format!("app-{i}-"),
                "sourceRef": {"kind": "GitRepository", "name": "repo"}},
        }))
        .unwrap()
    };
    until_no_namespace_terminates(&cluster.client).await;
    let mut fleet = Fleet::watch(&api).await;
    // The benchmark's own requests, measured before the controller starts.
    let alone = bench_alone(&cluster.client, &api, &mut fleet, count, &kustomization).await;
    if let Some([create, annotate, delete]) = alone {
        println!(
            "bench-controller: the benchmark alone costs the API server {create:.1} ms per \
             Kustomization to create, {annotate:.1} ms to annotate, {delete:.1} ms to delete"
        );
    }
    let own = |slot: usize| alone.map(|costs| costs[slot]);

    // BENCH_CPUS: the async runtime's worker threads. The runtime starts one per CPU the
    // process may use, which in a Pod is its CPU limit: 1 in Flux's Deployment and in ours
    // (`config/manager/deployment.yaml`, the chart's values), whatever the machine has.
    let cpus = env_number("BENCH_CPUS", 1).max(1);
    // BENCH_ARGS: more flags for the controller (`--build-cache-max-size=0`).
    let extra = std::env::var("BENCH_ARGS").unwrap_or_default();
    let mut flags = vec![
        format!("--concurrent={concurrent}"),
        format!("--kube-api-qps={qps}"),
        format!("--kube-api-burst={burst}"),
        // Flux's logging defaults (the harness's own default is the console encoding): a
        // JSON line per reconciliation at info costs CPU too, and a fleet pays it.
        "--log-level=info".to_string(),
        "--log-encoding=json".to_string(),
    ];
    flags.extend(extra.split_whitespace().map(str::to_string));
    let mut controllers: Vec<ControllerProcess> = (0..shards)
        .map(|shard| {
            let mut flags = flags.clone();
            if shards > 1 {
                flags.push(format!(
                    "--watch-label-selector=sharding.fluxcd.io/key=shard{shard}"
                ));
                flags.push("--enable-leader-election".to_string());
            }
            let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
            ControllerProcess::start_with_kubeconfig_and_env(
                &cluster.kubeconfig_with_token(&token),
                &ns,
                &flags,
                &[("TOKIO_WORKER_THREADS", cpus.to_string())],
            )
        })
        .collect();
    let pids: Vec<u32> = controllers.iter().map(|c| c.child.id().unwrap()).collect();
    println!(
        "bench-controller: {count} Kustomizations x 4 objects, {shards} process(es), \
         --concurrent={concurrent} --kube-api-qps={qps} --kube-api-burst={burst} {extra}, \
         {cpus} runtime worker(s)"
    );

    let mut tally = Tally::start(
        cluster.server(),
        &cluster.client,
        &user,
        controllers.iter().map(|c| c.metrics.clone()).collect(),
    )
    .await;

    // First apply.
    let started = Instant::now();
    for i in 0..count {
        api.create(&Default::default(), &kustomization(i))
            .await
            .unwrap();
    }
    fleet
        .wait_all(count, "became Ready", |k| ready_at(k, "main@sha1:1111"))
        .await;
    tally
        .report("first apply", count, started.elapsed(), own(0))
        .await;

    // A no-change reconcile, requested. BENCH_SPREAD (seconds): the requests paced evenly over
    // that long rather than sent at once, to compare with an interval cycle's rate.
    // BENCH_REQUESTS (default 1): that many rounds of requests, the first and the last
    // reported apart (those between together), to see a fleet past client-go's event spam
    // filter: after 25 Events of a Kustomization, only one more per five minutes is written.
    let spread = Duration::from_secs(env_number("BENCH_SPREAD", 0) as u64);
    let rounds = env_number("BENCH_REQUESTS", 1).max(1);
    let mut started = Instant::now();
    for round in 1..=rounds {
        request_all(&api, &mut fleet, count, spread, &format!("bench-{round}")).await;
        // The phase a round ends, and how many rounds it took.
        let (phase, rounds_in_phase) = if round == 1 {
            ("no-change reconcile".to_string(), 1)
        } else if round == rounds {
            (format!("no-change reconcile, request {round} of each"), 1)
        } else if round + 1 == rounds {
            let phase = format!("no-change reconciles, requests 2 to {round} of each");
            (phase, round - 1)
        } else {
            continue;
        };
        let own = own(1).map(|per_round| per_round * rounds_in_phase as f64);
        tally.report(&phase, count, started.elapsed(), own).await;
        started = Instant::now();
    }

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
        fleet
            .wait_all(count, phase, |k| ready_at(k, revision))
            .await;
        tally
            .report(phase, count, started.elapsed(), alone.map(|_| 0.0))
            .await;
    }

    if let Some(every) = cycle {
        interval_cycle(&mut fleet, &mut tally, count, every).await;
    }

    // Each Kustomization was reconciled by its own shard and by no other.
    let pages = metric_pages(&tally.metrics).await;
    let mut seen = std::collections::BTreeSet::new();
    for (shard, page) in pages.iter().enumerate() {
        let names = reconciled_names(page);
        for name in &names {
            let i: usize = name.trim_start_matches("app-").parse().unwrap();
            assert_eq!(i % shards, shard, "{name} reconciled by shard{shard}");
            assert!(seen.insert(name.clone()), "{name} reconciled by two shards");
        }
    }
    assert_eq!(
        seen.len(),
        count,
        "every Kustomization reconciled by a shard"
    );

    // Deletion: every Kustomization prunes its objects and goes.
    let started = Instant::now();
    for i in 0..count {
        api.delete(&format!("app-{i}"), &DeleteParams::default())
            .await
            .unwrap();
    }
    fleet.wait_gone().await;
    tally
        .report("deletion", count, started.elapsed(), own(2))
        .await;

    for (shard, (pid, controller)) in pids.iter().zip(controllers.iter_mut()).enumerate() {
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
        println!("bench-controller: controller (shard {shard}) peak RSS {peak}");
    }
}
