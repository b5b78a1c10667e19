//! Prometheus metrics. `/metrics` serves what Flux's kustomize-controller v1.9.4 serves and
//! nothing else (`tests/fixtures/flux-metrics/` is the reference, derived from Flux's
//! sources): `gotk_reconcile_duration_seconds` with Flux's buckets, controller-runtime's
//! reconcile and work-queue series (`runtime_metrics`), `rest_client_requests_total`,
//! `leader_election_master_status`, client_golang's `process_*` (`process_metrics`), and the
//! label-less series Flux registers at zero (token cache, certificate watcher, webhook
//! panics). Go runtime series (`go_*`) have no honest equivalent and are left out. What this
//! controller measures beyond Flux (build and apply time, objects by action, reconciliations
//! in flight, watch health) is on `/metrics/extra`, where no Flux scrape looks.
//!
//! The same listener answers the probes (`/healthz`, `/readyz`, see [`super::probes`]): pings,
//! as Flux's (fluxcd/pkg `runtime/probes`: controller-runtime's `healthz.Ping`), answered from the moment the
//! process listens, before and whatever the leader election: a standby must be Ready for a
//! rolling update to stop the leader. Watch health is in the watch metrics ([`WatchHealth`]).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

use crate::api::Kustomization;
use crate::controller::runtime::object_histograms::{ObjectHistograms, ObjectKey};
use crate::controller::runtime_metrics::{ControllerRuntime, RestRequests};
use crate::controller::watch::WatchHealth;

/// fluxcd/pkg `runtime/metrics`: `prometheus.ExponentialBucketsRange(10e-3, 1800, 10)` as
/// Go computes it (the last bound is Go's rounding of 1800).
const RECONCILE_DURATION_BUCKETS: [f64; 10] = [
    0.01,
    0.038363583488692544,
    0.1471764538093883,
    0.5646216173286169,
    2.166090855590701,
    8.309900738254731,
    31.879757075478317,
    122.30217221643493,
    469.19495946736544,
    1799.9999999999986,
];

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
struct LeaseLabels {
    name: String,
}

pub struct Metrics {
    /// What Flux serves, on `/metrics`.
    registry: Registry,
    /// What only this controller measures, on `/metrics/extra`.
    extra: Registry,
    duration: ObjectHistograms,
    leader: Family<LeaseLabels, Gauge>,
    build: Histogram,
    apply: Histogram,
    objects: Family<ActionLabels, Counter>,
    in_flight: Gauge,
    /// Objects found drifted by a Kustomization in drift warn mode.
    drifted: Family<ObjectLabels, Gauge>,
    /// Every watch the controller keeps.
    pub watches: Arc<WatchHealth>,
    /// controller-runtime's reconcile and work-queue metrics.
    pub runtime: ControllerRuntime,
    /// `rest_client_requests_total`: a layer every API client the controller makes wears.
    pub requests: RestRequests,
    /// The token cache's `gotk_token_*` families.
    pub token_cache: crate::auth::cache::CacheMetrics,
    /// The build cache's hits, misses and size (on `/metrics/extra`).
    pub build_cache: crate::controller::reconcile::build_cache::BuildCacheMetrics,
    /// The length of the last page served: the next is written into a buffer that size.
    page_size: std::sync::atomic::AtomicUsize,
}

fn key(object: &Kustomization) -> ObjectKey {
    ObjectKey {
        kind: "Kustomization".into(),
        name: object.metadata.name.as_deref().unwrap_or_default().into(),
        namespace: object
            .metadata
            .namespace
            .as_deref()
            .unwrap_or_default()
            .into(),
    }
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

/// Series Flux's process registers without labels and never moves here either, so they
/// read 0 as in Flux: controller-runtime's certificate watcher and webhook panic counters (it
/// serves no webhooks).
fn register_flux_zeros(registry: &mut Registry) {
    for (name, help) in [
        (
            "certwatcher_read_certificate",
            "Total number of certificate reads",
        ),
        (
            "certwatcher_read_certificate_errors",
            "Total number of certificate read errors",
        ),
        (
            "controller_runtime_webhook_panics",
            "Total number of webhook panics",
        ),
        (
            "controller_runtime_conversion_webhook_panics",
            "Total number of conversion webhook panics",
        ),
    ] {
        registry.register(name, help, Counter::<u64>::default());
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        Metrics::with_watch_grace(WatchHealth::default())
    }

    /// Metrics whose watch health (on `/metrics/extra`) is kept by `watches`: a grace period
    /// other than the default, in tests.
    pub fn with_watch_grace(watches: WatchHealth) -> Metrics {
        let watches = Arc::new(watches);
        let mut registry = Registry::default();
        // Written into the page by `encode`, not through the registry: it is most of the page.
        let duration = ObjectHistograms::new(
            "gotk_reconcile_duration_seconds",
            "The duration in seconds of a GitOps Toolkit resource reconciliation.",
            &RECONCILE_DURATION_BUCKETS,
        );
        let leader = Family::<LeaseLabels, Gauge>::default();
        registry.register(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease. Please make sure to group by name.",
            leader.clone(),
        );
        register_flux_zeros(&mut registry);
        let token_cache = crate::auth::cache::CacheMetrics::default();
        token_cache.register(&mut registry);
        registry.register_collector(Box::new(
            crate::controller::process_metrics::ProcessCollector,
        ));
        let runtime = ControllerRuntime::register(&mut registry);
        let requests = RestRequests::register(&mut registry);

        let mut extra = Registry::default();
        let build = Histogram::new(exponential_buckets(0.001, 2.0, 16));
        let apply = Histogram::new(exponential_buckets(0.01, 2.0, 16));
        let objects = Family::<ActionLabels, Counter>::default();
        let in_flight = Gauge::default();
        extra.register(
            "kustomize_controller_build_duration_seconds",
            "Time spent building manifests (kustomize, decryption, substitution).",
            build.clone(),
        );
        extra.register(
            "kustomize_controller_apply_duration_seconds",
            "Time spent applying a Kustomization's objects.",
            apply.clone(),
        );
        extra.register(
            "kustomize_controller_objects",
            "Objects handled, by action (created, configured, unchanged, skipped, deleted).",
            objects.clone(),
        );
        extra.register(
            "kustomize_controller_reconciles_in_flight",
            "Reconciliations running now.",
            in_flight.clone(),
        );
        let drifted = Family::<ObjectLabels, Gauge>::default();
        extra.register(
            "kustomize_controller_drifted_objects",
            "Objects that differ from what a Kustomization in drift warn mode would apply, as its last reconciliation found them.",
            drifted.clone(),
        );
        extra.register_collector(Box::new(watches.clone()));
        let build_cache = crate::controller::reconcile::build_cache::BuildCacheMetrics::default();
        build_cache.register(&mut extra);
        Metrics {
            registry,
            extra,
            duration,
            leader,
            build,
            apply,
            objects,
            in_flight,
            drifted,
            watches,
            runtime,
            requests,
            token_cache,
            build_cache,
            page_size: Default::default(),
        }
    }

    pub fn observe_reconcile(&self, object: &Kustomization, elapsed: Duration) {
        self.duration.observe(key(object), elapsed.as_secs_f64());
    }

    /// `leader_election_master_status` for the Lease `name`: 0 from the start of the election
    /// (a standby), 1 while leading, 0 again once released or lost — as client-go sets it.
    pub fn set_leader(&self, name: &str, leading: bool) {
        self.leader
            .get_or_create(&LeaseLabels { name: name.into() })
            .set(i64::from(leading));
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

    /// How many objects a Kustomization in drift warn mode found drifted; `None` (it corrects
    /// drift) removes its series.
    pub fn set_drifted(&self, object: &Kustomization, count: Option<usize>) {
        match count {
            Some(count) => {
                let count = i64::try_from(count).unwrap_or(i64::MAX);
                self.drifted.get_or_create(&labels(object)).set(count);
            }
            None => {
                self.drifted.remove(&labels(object));
            }
        }
    }

    /// A deleted Kustomization's series go, as Flux deletes them once its finalizer is off.
    pub fn forget(&self, object: &Kustomization) {
        self.duration.remove(&key(object));
        self.drifted.remove(&labels(object));
    }

    /// The Prometheus text page. A fleet's per-object series make it megabytes (about 2.8 MB
    /// for 1,000 Kustomizations): they are written straight into a buffer of the last page's
    /// size rather than one that doubles its way there; the rest of the page is small.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        let last = self.page_size.load(Ordering::Relaxed);
        let page = crate::controller::exposition::prometheus_text_into(
            &text,
            &[&self.duration],
            String::with_capacity(last + last / 16),
        );
        self.page_size.store(page.len(), Ordering::Relaxed);
        page
    }

    /// The `/metrics/extra` page: what this controller measures beyond Flux.
    pub fn encode_extra(&self) -> String {
        let mut text = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.extra);
        crate::controller::exposition::prometheus_text(&text)
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
    serve_on(TcpListener::bind(address).await?, metrics).await
}

/// [`serve`] on a listener already bound (so that a port in use stops the start-up).
pub async fn serve_on(listener: TcpListener, metrics: Arc<Metrics>) -> std::io::Result<()> {
    loop {
        // A failed accept (too many open files, a reset) must not take the probes down.
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(error) => {
                tracing::error!(error = %error, "accepting a metrics or probe connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request: hyper::Request<_>| {
                let answer = respond(request.uri(), &metrics);
                async move { Ok::<_, std::convert::Infallible>(answer) }
            });
            // A client that sends no request within seconds is dropped.
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(Duration::from_secs(5))
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        });
    }
}

/// The answer to a request for `uri`: the metrics pages, the probes, or Go's not-found.
fn respond(
    uri: &hyper::Uri,
    metrics: &Metrics,
) -> hyper::Response<http_body_util::Full<hyper::body::Bytes>> {
    let (status, body, content_type, nosniff) = match uri.path() {
        "/metrics" => (200, metrics.encode(), METRICS_CONTENT_TYPE, false),
        "/metrics/extra" => (200, metrics.encode_extra(), METRICS_CONTENT_TYPE, false),
        path => {
            let probe =
                super::probes::answer(path, uri.query()).unwrap_or_else(super::probes::not_found);
            (
                probe.status,
                probe.body,
                super::probes::CONTENT_TYPE,
                probe.nosniff,
            )
        }
    };
    let mut response = hyper::Response::new(http_body_util::Full::new(body.into()));
    *response.status_mut() = hyper::StatusCode::from_u16(status).expect("a valid status");
    let headers = response.headers_mut();
    headers.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(content_type),
    );
    if nosniff {
        headers.insert(
            hyper::header::X_CONTENT_TYPE_OPTIONS,
            hyper::header::HeaderValue::from_static("nosniff"),
        );
    }
    response
}

/// What client_golang's handler answers a scrape that asks for no other format with.
const METRICS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8; escaping=underscores";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_routes_answer_as_flux_serves_them() {
        use http_body_util::BodyExt;
        let metrics = Metrics::new();
        let probe = "text/plain; charset=utf-8";
        for (uri, status, content_type, starts) in [
            ("/healthz", 200, probe, "ok"),
            ("/readyz/ping", 200, probe, "ok"),
            ("/healthz?verbose", 200, probe, "[+]ping ok\n"),
            ("/metrics", 200, METRICS_CONTENT_TYPE, "# HELP"),
            ("/metrics/extra", 200, METRICS_CONTENT_TYPE, "# HELP"),
            ("/", 404, probe, "404 page not found\n"),
            ("/metrics/other", 404, probe, "404 page not found\n"),
        ] {
            let answer = respond(&uri.parse().unwrap(), &metrics);
            assert_eq!(answer.status().as_u16(), status, "{uri}");
            assert_eq!(
                answer.headers()[hyper::header::CONTENT_TYPE],
                content_type,
                "{uri}"
            );
            let body = futures::executor::block_on(answer.into_body().collect())
                .unwrap()
                .to_bytes();
            let body = String::from_utf8_lossy(&body);
            assert!(body.starts_with(starts), "{uri}: {body}");
        }
    }
}
