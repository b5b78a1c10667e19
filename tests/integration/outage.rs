//! The controller through API server outages: it hears changes again within seconds of the
//! server answering (a requestedAt, a new source revision, a new Kustomization, a deletion),
//! says it is not ready while it cannot watch, converges what the outage interrupted without
//! pruning anything wrongly, and a leader that cannot renew its Lease steps down.
//!
//! The outages themselves (connections refused, 503s, connections cut without a TLS
//! close_notify, compacted history) are made by the in-process server; on a real cluster
//! (`TEST_KUBECONFIG`, envtest) the same tests run without them and check the rest.

use std::time::{Duration, Instant};

use kube::api::{Api, DeleteParams};
use kustomize_controller::api::Kustomization;
use serde_json::json;

use crate::support::apiserver::{Availability, Fault, TestApiServer};
use crate::support::artifacts::SourceKind;
use crate::support::cluster::wait_for;
use crate::support::controller::ControllerProcess;
use crate::support::controller::Harness;
use crate::support::{free_address, http_get_text};

/// How long after the API server answers again each change must have been handled: the
/// watches' retry cap (3 s) plus one reconciliation, with room for a loaded CI machine.
const HANDLED_WITHIN: Duration = Duration::from_secs(12);

fn config_map(name: &str, value: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  value: \"{value}\"\n"
    )
}

/// Waits for `check` until `HANDLED_WITHIN` after `since`, failing with what was not handled.
async fn handled<T, F, Fut>(what: &str, since: Instant, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let left = HANDLED_WITHIN.saturating_sub(since.elapsed());
    match wait_for(left, check).await {
        Some(value) => value,
        None => panic!(
            "{what} was not handled within {HANDLED_WITHIN:?} of the API server answering again"
        ),
    }
}

/// Three Kustomizations, each from its own source: `app` (to request and to move to a new
/// revision), `gone` (to delete) and, once `late` is called, a new one.
struct Fleet {
    harness: Harness,
}

impl Fleet {
    async fn start() -> Fleet {
        let harness = Harness::start().await;
        for (name, map) in [("app", "app-config"), ("gone", "gone-config")] {
            let artifact = harness.publish_files(
                &format!("{name}-v1"),
                "main@sha1:1111",
                &[("cm.yaml", &config_map(map, "1"))],
            );
            harness.source(name, &artifact).await;
            harness
                .create_kustomization(
                    name,
                    json!({"sourceRef": {"kind": "GitRepository", "name": name}}),
                )
                .await;
        }
        for name in ["app", "gone"] {
            harness
                .wait_ready(name, "True", "ReconciliationSucceeded")
                .await;
        }
        let late = harness.publish_files(
            "late-v1",
            "main@sha1:3333",
            &[("cm.yaml", &config_map("late-config", "1"))],
        );
        harness.source("late", &late).await;
        Fleet { harness }
    }

    fn server(&self) -> Option<&TestApiServer> {
        self.harness.cluster.server()
    }

    /// Makes every change the controller must hear about.
    async fn change_everything(&self) {
        let harness = &self.harness;
        harness.request_reconcile("app", "after-the-outage").await;
        let next = harness.publish_files(
            "app-v2",
            "main@sha1:2222",
            &[("cm.yaml", &config_map("app-config", "2"))],
        );
        let ns = harness.cluster.namespace.clone();
        harness
            .cluster
            .set_artifact(SourceKind::GitRepository, &ns, "app", &next)
            .await;
        harness
            .create_kustomization(
                "late",
                json!({"sourceRef": {"kind": "GitRepository", "name": "late"}}),
            )
            .await;
        harness
            .kustomizations()
            .delete("gone", &DeleteParams::default())
            .await
            .unwrap();
    }

    /// Checks that every change was handled within `HANDLED_WITHIN` of `since`.
    async fn everything_handled(&self, since: Instant) {
        let api = self.harness.kustomizations();
        let status = |name: &'static str| {
            let api = api.clone();
            async move { api.get(name).await.ok()?.status }
        };
        handled("the reconcile request", since, || async {
            let status = status("app").await?;
            (status.last_handled_reconcile_at.as_deref() == Some("after-the-outage")).then_some(())
        })
        .await;
        handled("the new source revision", since, || async {
            let status = status("app").await?;
            (status.last_applied_revision.as_deref() == Some("main@sha1:2222")).then_some(())
        })
        .await;
        let maps = self.harness.config_maps();
        handled("the new revision's object", since, || async {
            let map = maps.get("app-config").await.ok()?;
            (map.data?.get("value").map(String::as_str) == Some("2")).then_some(())
        })
        .await;
        handled("the new Kustomization", since, || async {
            let status = status("late").await?;
            let ready = status.conditions.iter().find(|c| c.type_ == "Ready")?;
            (ready.status == "True").then_some(())
        })
        .await;
        handled("the deletion", since, || async {
            let gone = api.get_opt("gone").await.ok()?.is_none();
            let pruned = maps.get_opt("gone-config").await.ok()?.is_none();
            (gone && pruned).then_some(())
        })
        .await;
    }

    /// Each watch's failed attempts so far (restarts for an error), by kind; kinds the
    /// server does not serve are left out: they retry only every 30 s.
    fn failed_attempts(&self) -> std::collections::BTreeMap<String, u64> {
        use kustomize_controller::controller::watch::Restart;
        self.harness
            .metrics
            .watches
            .reports()
            .into_iter()
            .filter(|report| !report.absent)
            .map(|report| {
                let failed = report.restarts.get(&Restart::Error).copied().unwrap_or(0);
                (report.kind, failed)
            })
            .collect()
    }

    /// Waits until every watch (of `kinds`, or all) has failed `more` times more than now:
    /// with the back-off doubling from 200 ms, five failures take a watch to its cap.
    async fn until_watches_failed(&self, kinds: Option<&[&str]>, more: u64) {
        let before = self.failed_attempts();
        let wanted = |kind: &str| kinds.is_none_or(|kinds| kinds.contains(&kind));
        let failed = wait_for(Duration::from_secs(60), || async {
            let now = self.failed_attempts();
            before
                .iter()
                .filter(|(kind, _)| wanted(kind))
                .all(|(kind, was)| now.get(kind).copied().unwrap_or(0) >= was + more)
                .then_some(())
        })
        .await;
        assert!(
            failed.is_some(),
            "every watch failed {more} more times: {:?} → {:?}",
            before,
            self.failed_attempts()
        );
    }

    fn metric(&self, line_start: &str) -> Option<f64> {
        self.harness
            .metrics
            .encode_extra()
            .lines()
            .find(|line| line.starts_with(line_start))
            .and_then(|line| line.rsplit(' ').next()?.parse().ok())
    }
}

/// `GET /readyz` on the controller's probe endpoint, as the kubelet asks it.
async fn probe_readyz(fleet: &Fleet) -> String {
    let address = free_address();
    let serving = tokio::spawn({
        let (address, metrics) = (address.clone(), fleet.harness.metrics.clone());
        async move { kustomize_controller::controller::metrics::serve(&address, metrics).await }
    });
    let answer = wait_for(Duration::from_secs(5), || {
        http_get_text(&address, "/readyz")
    })
    .await;
    serving.abort();
    answer.expect("the probe endpoint answers")
}

#[tokio::test]
async fn watches_resume_within_seconds_after_the_api_server_restarts() {
    let fleet = Fleet::start().await;
    if let Some(server) = fleet.server() {
        assert_eq!(
            fleet.harness.metrics.watches.unready(),
            Vec::<String>::new()
        );
        // Down long enough for every watch's back-off to reach its cap: first nobody
        // listens, then the server answers 503 while it "starts".
        server.set_availability(Availability::Refusing);
        let unready = wait_for(Duration::from_secs(10), || async {
            let down = fleet.harness.metrics.watches.unready().join(", ");
            (down.contains("Kustomization") && down.contains("GitRepository")).then_some(down)
        })
        .await
        .expect("the watches count as down once down for the grace period");
        assert!(unready.contains("Kustomization"), "{unready}");
        assert!(unready.contains("GitRepository"), "{unready}");
        // The probe stays a ping, as Flux's: an outage is no reason to restart or unroute.
        let probe = probe_readyz(&fleet).await;
        assert!(probe.starts_with("HTTP/1.1 200"), "{probe}");
        assert_eq!(
            fleet.metric("kustomize_controller_watch_up{kind=\"Kustomization\"}"),
            Some(0.0)
        );
        fleet.until_watches_failed(None, 4).await;
        server.set_availability(Availability::Unavailable);
        fleet.until_watches_failed(None, 2).await;
        server.set_availability(Availability::Serving);
        let back = Instant::now();
        let resumed = wait_for(Duration::from_secs(5), || async {
            let text = fleet.harness.metrics.encode_extra();
            let ups: Vec<&str> = text
                .lines()
                .filter(|l| l.starts_with("kustomize_controller_watch_up{"))
                .collect();
            // Kustomizations, three source kinds (ExternalArtifact is off by default, as in
            // Flux), ConfigMaps and Secrets, and the applied ConfigMaps.
            (ups.len() == 7 && ups.iter().all(|l| l.ends_with(" 1"))).then_some(())
        })
        .await;
        assert!(
            resumed.is_some(),
            "every watch is connected again within 5 s of the server answering: {}",
            fleet.harness.metrics.encode_extra()
        );
        eprintln!(
            "watches resumed {:?} after the server answered",
            back.elapsed()
        );
    } else {
        eprintln!("outage skipped: it needs the in-process server");
    }
    let back = Instant::now();
    fleet.change_everything().await;
    fleet.everything_handled(back).await;
    if fleet.server().is_some() {
        let ready = wait_for(Duration::from_secs(5), || async {
            fleet
                .harness
                .metrics
                .watches
                .unready()
                .is_empty()
                .then_some(())
        })
        .await;
        assert!(
            ready.is_some(),
            "no watch counts as down once every watch is back"
        );
        assert!(probe_readyz(&fleet).await.starts_with("HTTP/1.1 200"));
        assert_eq!(
            fleet.metric("kustomize_controller_watch_up{kind=\"Kustomization\"}"),
            Some(1.0)
        );
        let restarts = fleet
            .metric("kustomize_controller_watch_restarts_total{kind=\"Kustomization\",reason=\"error\"}")
            .unwrap_or(0.0);
        assert!(restarts >= 1.0, "{}", fleet.harness.metrics.encode_extra());
    }
}

#[tokio::test]
async fn watches_cut_mid_stream_resume_and_relist_when_history_is_gone() {
    let fleet = Fleet::start().await;
    if let Some(server) = fleet.server() {
        // The watches are cut without a TLS close_notify and cannot be opened again for a
        // while (as when the watch cache restarts in an HA control plane), while writes go
        // on; then history is compacted, so resuming from the last version seen gets 410.
        server.inject(Fault {
            dry_run: None,
            verb: Some("watch".into()),
            resource: None,
            remaining: usize::MAX,
            code: 503,
            retry_after: None,
        });
        server.sever_connections();
        fleet.change_everything().await;
        server.compact();
        fleet.until_watches_failed(None, 1).await;
        server.clear_faults();
    } else {
        eprintln!("outage skipped: it needs the in-process server");
        fleet.change_everything().await;
    }
    let back = Instant::now();
    fleet.everything_handled(back).await;
    if fleet.server().is_some() {
        let expired = fleet
            .metric("kustomize_controller_watch_restarts_total{kind=\"Kustomization\",reason=\"expired\"}")
            .unwrap_or(0.0);
        assert!(
            expired >= 1.0,
            "the Kustomization watch listed again after 410: {}",
            fleet.harness.metrics.encode_extra()
        );
    }
}

#[tokio::test]
async fn an_absent_source_kind_does_not_slow_the_other_watches() {
    let fleet = Fleet::start().await;
    let Some(server) = fleet.server() else {
        eprintln!("skipped: needs the in-process server to refuse one kind");
        return;
    };
    // Every watch and list of buckets fails; the other kinds must not wait on it.
    server.inject(Fault {
        dry_run: None,
        verb: None,
        resource: Some("buckets".into()),
        remaining: usize::MAX,
        code: 500,
        retry_after: None,
    });
    server.sever_connections();
    fleet.until_watches_failed(Some(&["Bucket"]), 5).await;
    let since = Instant::now();
    fleet.change_everything().await;
    fleet.everything_handled(since).await;
    assert_eq!(
        fleet.metric("kustomize_controller_watch_up{kind=\"Bucket\"}"),
        Some(0.0)
    );
    server.clear_faults();
}

#[tokio::test]
async fn a_reconcile_interrupted_by_an_outage_converges_without_wrong_pruning() {
    let harness = Harness::start().await;
    let two = format!("{}---\n{}", config_map("one", "1"), config_map("two", "1"));
    let artifact = harness.publish_files("pair-v1", "main@sha1:aaaa", &[("cms.yaml", &two)]);
    harness.source("repo", &artifact).await;
    harness
        .create_kustomization("pair", json!({"retryInterval": "1s"}))
        .await;
    harness
        .wait_ready("pair", "True", "ReconciliationSucceeded")
        .await;
    let maps = harness.config_maps();
    let uid = |name: &'static str| {
        let maps = maps.clone();
        async move { maps.get(name).await.unwrap().metadata.uid.unwrap() }
    };
    let (one, two_uid) = (uid("one").await, uid("two").await);

    let changed = format!("{}---\n{}", config_map("one", "2"), config_map("two", "2"));
    let next = harness.publish_files("pair-v2", "main@sha1:bbbb", &[("cms.yaml", &changed)]);
    let dry_runs = |server: &TestApiServer| {
        server
            .requests()
            .iter()
            .filter(|r| r.resource == "configmaps" && r.verb == "patch" && r.dry_run)
            .count()
    };
    let dry_runs_before = harness.cluster.server().map(dry_runs).unwrap_or(0);
    if let Some(server) = harness.cluster.server() {
        // Slow requests, so the outage lands in the middle of the reconciliation.
        server.set_latency(Duration::from_millis(100));
    }
    let ns = harness.cluster.namespace.clone();
    harness
        .cluster
        .set_artifact(SourceKind::GitRepository, &ns, "repo", &next)
        .await;
    if let Some(server) = harness.cluster.server() {
        // Down once the new revision's first object is being applied, until the controller
        // counts its watches as lost.
        let started = wait_for(Duration::from_secs(30), || async {
            (dry_runs(server) > dry_runs_before).then_some(())
        })
        .await;
        assert!(
            started.is_some(),
            "the new revision's reconciliation starts"
        );
        server.set_availability(Availability::Refusing);
        let lost = wait_for(Duration::from_secs(10), || async {
            let down = harness.metrics.watches.unready();
            down.iter()
                .any(|kind| kind == "Kustomization")
                .then_some(())
        })
        .await;
        assert!(lost.is_some(), "the controller sees the outage");
        server.set_latency(Duration::ZERO);
        server.set_availability(Availability::Serving);
    }
    let api: Api<Kustomization> = harness.kustomizations();
    let converged = wait_for(Duration::from_secs(30), || async {
        let object = api.get("pair").await.ok()?;
        let status = object.status?;
        let ready = status.conditions.iter().find(|c| c.type_ == "Ready")?;
        (status.last_applied_revision.as_deref() == Some("main@sha1:bbbb")
            && ready.status == "True")
            .then_some(())
    })
    .await;
    assert!(
        converged.is_some(),
        "the interrupted revision is applied after the outage"
    );
    for (name, before) in [("one", one), ("two", two_uid)] {
        let map = maps.get(name).await.unwrap();
        assert_eq!(
            map.metadata.uid.unwrap(),
            before,
            "{name} was neither pruned nor recreated"
        );
        assert_eq!(map.data.unwrap()["value"], "2");
    }
}

#[tokio::test]
async fn a_leader_that_cannot_renew_steps_down_and_a_follower_takes_over() {
    use kustomize_controller::controller::leader::LeaderElection;
    let cluster = crate::support::cluster::TestCluster::start().await;
    let Some(server) = cluster.server() else {
        eprintln!("skipped: the outage needs the in-process server");
        return;
    };
    let elector = |identity: &str| {
        LeaderElection::new(
            cluster.client.clone(),
            &cluster.namespace,
            "kc-leader-outage",
            identity,
            Duration::from_secs(2),
            Duration::from_millis(1500),
            Duration::from_millis(200),
        )
    };
    let (first, second) = (elector("first"), elector("second"));
    assert!(first.try_acquire().await.unwrap());
    let holding = tokio::spawn({
        let first = first.clone();
        async move { first.hold().await }
    });
    server.set_availability(Availability::Refusing);
    let lost = tokio::time::timeout(Duration::from_secs(5), holding)
        .await
        .expect("the leader steps down once it could not renew within the deadline")
        .unwrap();
    assert!(lost.to_string().contains("leader election lost"), "{lost}");
    server.set_availability(Availability::Serving);
    tokio::time::timeout(Duration::from_secs(10), second.acquire())
        .await
        .expect("a follower takes over once the Lease expires");

    // A server that hangs instead of refusing must not keep a leader leading either.
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let renewed_at = || async {
        let lease = leases.get("kc-leader-outage").await.ok()?;
        lease.spec?.renew_time.map(|time| time.0)
    };
    let acquired_at = renewed_at().await;
    let holding = tokio::spawn({
        let second = second.clone();
        async move { second.hold().await }
    });
    // Hang the server once the new leader has renewed at least once.
    let renewed = wait_for(Duration::from_secs(10), || async {
        let now = renewed_at().await?;
        (Some(now) != acquired_at).then_some(())
    })
    .await;
    assert!(renewed.is_some(), "the new leader renews its Lease");
    server.set_latency(Duration::from_secs(30));
    let lost = tokio::time::timeout(Duration::from_secs(5), holding).await;
    server.set_latency(Duration::ZERO);
    assert!(
        lost.is_ok(),
        "renewals that hang are cut off at the renew deadline"
    );
}

/// The shipped binary, leading, loses the API server for longer than its renew deadline: it
/// exits non-zero (so its Deployment restarts it) rather than go on applying without a Lease.
#[tokio::test]
async fn the_leading_process_exits_when_it_cannot_renew() {
    let cluster = crate::support::cluster::TestCluster::start().await;
    let Some(server) = cluster.server() else {
        eprintln!("skipped: the outage needs the in-process server");
        return;
    };
    let mut controller = ControllerProcess::start(
        server,
        &cluster.namespace,
        &[
            "--enable-leader-election",
            "--leader-election-lease-duration=3s",
            "--leader-election-renew-deadline=2s",
            "--leader-election-retry-period=200ms",
        ],
    );
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let leading = wait_for(Duration::from_secs(30), || async {
        let lease = leases
            .get_opt("kustomize-controller-leader-election")
            .await
            .ok()??;
        lease.spec?.holder_identity.map(|_| ())
    })
    .await;
    assert!(leading.is_some(), "the process takes the Lease");
    server.set_availability(Availability::Refusing);
    let exited = tokio::time::timeout(Duration::from_secs(10), controller.child.wait()).await;
    server.set_availability(Availability::Serving);
    let status = exited
        .expect("the leader exits once it could not renew within the deadline")
        .unwrap();
    assert_eq!(status.code(), Some(1), "{status}");
    let log = controller.log();
    assert!(log.contains("leader election lost"), "{log}");
    assert!(log.contains("watch lost"), "the outage was logged: {log}");
    assert!(
        !log.contains("failed with error"),
        "not a line per failed request: {log}"
    );
}

/// A TCP relay to the API server that refuses connections (its port is bound, so no one else
/// takes it, but not listened on) until opened, so an outage can be made in front of any
/// server, the in-process one or a real one.
struct Relay {
    address: String,
    upstream: String,
    socket: Option<tokio::net::TcpSocket>,
    serving: Option<tokio::task::JoinHandle<()>>,
}

impl Relay {
    fn refusing(upstream: &str) -> Relay {
        let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
        socket
            .bind("127.0.0.1:0".parse().expect("an address"))
            .expect("a loopback port");
        Relay {
            address: socket.local_addr().expect("bound address").to_string(),
            upstream: upstream.to_string(),
            socket: Some(socket),
            serving: None,
        }
    }

    /// Listens on the relay's address and passes each connection to the API server.
    async fn open(&mut self) {
        let listener = self
            .socket
            .take()
            .expect("opened once")
            .listen(128)
            .expect("listening on the relay's port");
        let upstream = self.upstream.clone();
        self.serving = Some(tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let upstream = upstream.clone();
                tokio::spawn(async move {
                    if let Ok(mut server) = tokio::net::TcpStream::connect(&upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
            }
        }));
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        if let Some(serving) = self.serving.take() {
            serving.abort();
        }
    }
}

/// As Flux's event recorder (client-go's broadcaster): an Event recorded while the API
/// server cannot be reached is held, tried again, and written once the server can be
/// reached, once.
#[tokio::test]
async fn an_event_recorded_while_the_api_server_is_unreachable_is_written_once_it_is_back() {
    use k8s_openapi::api::core::v1::Event;
    use kustomize_controller::controller::events::{EventMeta, EventType, Recorder};
    use kustomize_controller::controller::ratelimit::{ClientLayers, client};
    use kustomize_controller::controller::runtime_metrics::RestRequests;
    let cluster = crate::support::cluster::TestCluster::start().await;
    let server_url = cluster.server_url();
    let upstream = server_url.trim_start_matches("https://");
    let mut relay = Relay::refusing(upstream);
    let mut config = cluster.config();
    config.cluster_url = format!("https://{}", relay.address).parse().unwrap();
    let mut registry = prometheus_client::registry::Registry::default();
    let requests = RestRequests::register(&mut registry);
    let layers = ClientLayers {
        limit: None,
        requests: Some(&requests),
    };
    let recorder = Recorder::new(client(config, layers).unwrap(), "kustomize-controller")
        .with_retry_pause(Duration::from_millis(200));
    let object: Kustomization = serde_json::from_value(json!({
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
        "metadata": {"name": "unreachable", "namespace": cluster.namespace, "uid": "u-1"},
        "spec": {"interval": "5m", "prune": true,
            "sourceRef": {"kind": "GitRepository", "name": "repo"}},
    }))
    .unwrap();
    let message = "Reconciliation finished in 5ms, next run in 5m";
    recorder.publish(
        &object,
        EventType::Normal,
        "ReconciliationSucceeded",
        message,
        &EventMeta::default(),
    );
    let unreached = || {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        text.lines()
            .filter(|line| line.contains("code=\"<error>\""))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    };
    let tried = wait_for(Duration::from_secs(10), || async {
        (unreached() >= 2.0).then_some(())
    })
    .await;
    assert!(tried.is_some(), "the Event was tried again while refused");
    relay.open().await;
    let events: Api<Event> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let ours = || async {
        let list = events.list(&Default::default()).await.ok()?;
        let ours: Vec<Event> = list
            .items
            .into_iter()
            .filter(|e| e.involved_object.name.as_deref() == Some("unreachable"))
            .collect();
        (!ours.is_empty()).then_some(ours)
    };
    wait_for(Duration::from_secs(10), ours)
        .await
        .expect("the Event is written once the API server can be reached");
    recorder.flush(Duration::from_secs(5)).await;
    let written = ours().await.unwrap();
    assert_eq!(written.len(), 1, "written once: {written:?}");
    assert_eq!(written[0].message.as_deref(), Some(message));
    assert_eq!(written[0].count, Some(1));
    assert_eq!(
        written[0].reason.as_deref(),
        Some("ReconciliationSucceeded")
    );
}
