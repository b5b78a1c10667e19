//! Prometheus metrics with Flux's names (`gotk_reconcile_duration_seconds`,
//! `gotk_reconcile_condition`, `gotk_suspend_status`, and controller-runtime's from
//! `runtime_metrics`), and the small HTTP endpoints that serve
//! them and the health probes (`/metrics`, `/healthz`, `/readyz`). The probes are pings, as
//! Flux's (fluxcd/pkg `runtime/probes`: controller-runtime's `healthz.Ping`), answered from
//! the moment the process listens, before and whatever the leader election: a standby must be
//! Ready for a rolling update to stop the leader. Watch health is in the watch metrics
//! ([`WatchHealth`]).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::api::Kustomization;
use crate::controller::runtime_metrics::{ControllerRuntime, RestRequests};
use crate::controller::watch::WatchHealth;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ObjectLabels {
    kind: String,
    name: String,
    namespace: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ActionLabels {
    action: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ConditionLabels {
    kind: String,
    name: String,
    namespace: String,
    r#type: String,
    status: String,
}

pub struct Metrics {
    registry: Registry,
    duration: Family<ObjectLabels, Histogram>,
    condition: Family<ConditionLabels, Gauge>,
    suspended: Family<ObjectLabels, Gauge>,
    build: Histogram,
    apply: Histogram,
    objects: Family<ActionLabels, Counter>,
    in_flight: Gauge,
    /// Every watch the controller keeps.
    pub watches: Arc<WatchHealth>,
    /// controller-runtime's reconcile and work-queue metrics.
    pub runtime: ControllerRuntime,
    /// `rest_client_requests_total`: a layer every API client the controller makes wears.
    pub requests: RestRequests,
    /// The length of the last page served: the next is written into a buffer that size.
    page_size: std::sync::atomic::AtomicUsize,
}

fn labels(object: &Kustomization) -> ObjectLabels {
    ObjectLabels {
        kind: "Kustomization".into(),
        name: object.metadata.name.clone().unwrap_or_default(),
        namespace: object.metadata.namespace.clone().unwrap_or_default(),
    }
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        Metrics::with_watch_grace(WatchHealth::default())
    }

    /// Metrics whose readiness follows `watches` (for a grace period other than the default).
    pub fn with_watch_grace(watches: WatchHealth) -> Metrics {
        let watches = Arc::new(watches);
        let mut registry = Registry::default();
        let duration = Family::<ObjectLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.01, 2.0, 16))
        });
        let condition = Family::<ConditionLabels, Gauge>::default();
        let suspended = Family::<ObjectLabels, Gauge>::default();
        registry.register(
            "gotk_reconcile_duration_seconds",
            "The duration in seconds of a GitOps Toolkit resource reconciliation.",
            duration.clone(),
        );
        registry.register(
            "gotk_reconcile_condition",
            "The current condition status of a GitOps Toolkit resource reconciliation.",
            condition.clone(),
        );
        registry.register(
            "gotk_suspend_status",
            "The current suspend status of a GitOps Toolkit resource.",
            suspended.clone(),
        );
        let build = Histogram::new(exponential_buckets(0.001, 2.0, 16));
        let apply = Histogram::new(exponential_buckets(0.01, 2.0, 16));
        let objects = Family::<ActionLabels, Counter>::default();
        let in_flight = Gauge::default();
        registry.register(
            "kustomize_controller_build_duration_seconds",
            "Time spent building manifests (kustomize, decryption, substitution).",
            build.clone(),
        );
        registry.register(
            "kustomize_controller_apply_duration_seconds",
            "Time spent applying a Kustomization's objects.",
            apply.clone(),
        );
        registry.register(
            "kustomize_controller_objects",
            "Objects handled, by action (created, configured, unchanged, skipped, deleted).",
            objects.clone(),
        );
        registry.register(
            "kustomize_controller_reconciles_in_flight",
            "Reconciliations running now.",
            in_flight.clone(),
        );
        registry.register_collector(Box::new(watches.clone()));
        let runtime = ControllerRuntime::register(&mut registry);
        let requests = RestRequests::register(&mut registry);
        Metrics {
            registry,
            duration,
            condition,
            suspended,
            build,
            apply,
            objects,
            in_flight,
            watches,
            runtime,
            requests,
            page_size: Default::default(),
        }
    }

    pub fn observe_reconcile(&self, object: &Kustomization, elapsed: Duration) {
        self.duration
            .get_or_create(&labels(object))
            .observe(elapsed.as_secs_f64());
    }

    pub fn set_condition(&self, object: &Kustomization, status: &str) {
        let base = labels(object);
        for value in ["True", "False", "Unknown", "Deleted"] {
            let key = ConditionLabels {
                kind: base.kind.clone(),
                name: base.name.clone(),
                namespace: base.namespace.clone(),
                r#type: "Ready".into(),
                status: value.into(),
            };
            self.condition
                .get_or_create(&key)
                .set(i64::from(value == status));
        }
    }

    pub fn observe_build(&self, elapsed: Duration) {
        self.build.observe(elapsed.as_secs_f64());
    }

    pub fn observe_apply(&self, elapsed: Duration, changes: &crate::objects::ChangeSet) {
        self.apply.observe(elapsed.as_secs_f64());
        for change in &changes.changes {
            self.objects
                .get_or_create(&ActionLabels {
                    action: change.action.to_string(),
                })
                .inc();
        }
    }

    /// Counts a reconciliation as running until the guard drops.
    pub fn running(&self) -> InFlight<'_> {
        self.in_flight.inc();
        InFlight(&self.in_flight)
    }

    pub fn set_suspended(&self, object: &Kustomization, suspended: bool) {
        self.suspended
            .get_or_create(&labels(object))
            .set(i64::from(suspended));
    }

    pub fn forget(&self, object: &Kustomization) {
        self.set_condition(object, "Deleted");
        self.suspended.remove(&labels(object));
    }

    /// The Prometheus text page. A fleet's per-object series make it megabytes (about 2.8 MB
    /// for 1,000 Kustomizations), so it is written into a buffer of the last page's size
    /// rather than one that doubles its way there.
    pub fn encode(&self) -> String {
        let last = self.page_size.load(Ordering::Relaxed);
        let mut text = String::with_capacity(last + last / 16);
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        self.page_size.store(text.len(), Ordering::Relaxed);
        text
    }
}

/// Decrements the in-flight gauge when dropped.
pub struct InFlight<'a>(&'a Gauge);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Serves `/metrics`, `/healthz` and `/readyz` on `address` until the task is dropped.
pub async fn serve(address: &str, metrics: Arc<Metrics>) -> std::io::Result<()> {
    let listener = TcpListener::bind(address).await?;
    loop {
        // A failed accept (too many open files, a reset) must not take the probes down.
        let mut stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(error) => {
                tracing::error!(error = %error, "accepting a metrics or probe connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let mut buffer = vec![0u8; 4096];
            let mut read = 0;
            let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
            while read < buffer.len() {
                let chunk =
                    tokio::time::timeout_at(deadline, stream.read(&mut buffer[read..])).await;
                match chunk {
                    Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
                    Ok(Ok(n)) => read += n,
                }
                if buffer[..read].windows(4).any(|w| w == b"\r\n\r\n") {
                    break;
                }
            }
            let request = String::from_utf8_lossy(&buffer[..read]);
            let path = request.split_whitespace().nth(1).unwrap_or("/");
            let (code, body) = match path {
                "/metrics" => ("200 OK", metrics.encode()),
                "/healthz" | "/readyz" => ("200 OK", "ok".to_string()),
                _ => ("404 Not Found", "not found".to_string()),
            };
            let head = format!(
                "HTTP/1.1 {code}\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            if stream.write_all(head.as_bytes()).await.is_ok() {
                let _ = stream.write_all(body.as_bytes()).await;
            }
        });
    }
}
