//! The controller-runtime metrics Flux's dashboards query, with controller-runtime's names and
//! labels: `controller_runtime_*` for reconciliations, `workqueue_*` for the work queue, and
//! `rest_client_requests_total` for every API request (a tower layer on each client).
//!
//! kube-runtime keeps its queue to itself: adds, depth and the wait in the queue come from
//! a shadow of it (`work_queue`); retries are the reconciliations requeued (after an error,
//! a delay or at once, as controller-runtime counts them), work duration the reconcile
//! time, and unfinished work and the longest-running processor come from the
//! reconciliations in flight.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use tower::{Layer, Service};

use crate::controller::KustomizationKey;
use crate::controller::work_queue::{QueueLabels, WorkQueue, queue};

/// controller-runtime's name for this controller (the lowercased kind), its `controller`
/// and workqueue `name` label.
pub const CONTROLLER: &str = "kustomization";

/// controller-runtime's work-queue duration buckets: `ExponentialBuckets(10e-9, 10, 12)` as
/// Go computes them.
pub const QUEUE_BUCKETS: [f64; 12] = [
    1e-8,
    1e-7,
    1e-6,
    9.999999999999999e-6,
    9.999999999999999e-5,
    0.001,
    0.01,
    0.1,
    1.0,
    10.0,
    100.0,
    1000.0,
];

/// controller-runtime's reconcile time buckets.
const RECONCILE_BUCKETS: [f64; 40] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabels {
    controller: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    controller: String,
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    code: String,
    host: String,
    method: String,
}

/// How a reconciliation ended, as controller-runtime labels it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReconcileResult {
    /// Done until something changes.
    Success,
    /// Requeued at once.
    Requeue,
    /// Requeued after a delay (the interval, a retry or a dependency wait).
    RequeueAfter(Duration),
    /// Failed; retried with back-off.
    Error,
    /// Failed in a way only a change can mend; not retried.
    TerminalError,
}

impl ReconcileResult {
    fn label(self) -> &'static str {
        match self {
            ReconcileResult::Success => "success",
            ReconcileResult::Requeue => "requeue",
            ReconcileResult::RequeueAfter(_) => "requeue_after",
            ReconcileResult::Error | ReconcileResult::TerminalError => "error",
        }
    }
}

const RESULTS: [&str; 4] = ["error", "requeue", "requeue_after", "success"];

/// Reconciliations in flight, by when they started.
#[derive(Debug, Default)]
struct InFlight {
    next: u64,
    started: HashMap<u64, Instant>,
}

/// The reconciler's and work queue's metrics.
#[derive(Debug)]
pub struct ControllerRuntime {
    totals: Family<ResultLabels, Counter>,
    errors: Family<ControllerLabels, Counter>,
    time: Family<ControllerLabels, Histogram>,
    terminal_errors: Family<ControllerLabels, Counter>,
    panics: Family<ControllerLabels, Counter>,
    timeouts: Family<ControllerLabels, Counter>,
    max_concurrent: Family<ControllerLabels, Gauge>,
    active: Family<ControllerLabels, Gauge>,
    /// The shadow of the runtime's queue: adds, depth, the wait.
    pub queue: WorkQueue,
    retries: Family<QueueLabels, Counter>,
    work: Family<QueueLabels, Histogram>,
    in_flight: Arc<Mutex<InFlight>>,
}

/// A reconciliation being timed; [`ControllerRuntime::finish`] records it.
#[derive(Debug)]
pub struct Started {
    id: u64,
    at: Instant,
    key: KustomizationKey,
    /// The priority it was queued at, which a requeue keeps.
    priority: i32,
}

fn controller() -> ControllerLabels {
    ControllerLabels {
        controller: CONTROLLER.into(),
    }
}

impl ControllerRuntime {
    /// The metrics, registered in `registry` with controller-runtime's names.
    pub fn register(registry: &mut Registry) -> ControllerRuntime {
        let histogram = || Histogram::new(RECONCILE_BUCKETS);
        let metrics = ControllerRuntime {
            totals: Family::default(),
            errors: Family::default(),
            terminal_errors: Family::default(),
            panics: Family::default(),
            timeouts: Family::default(),
            time: Family::new_with_constructor(histogram),
            max_concurrent: Family::default(),
            active: Family::default(),
            queue: WorkQueue::register(registry),
            retries: Family::default(),
            work: Family::new_with_constructor(|| Histogram::new(QUEUE_BUCKETS)),
            in_flight: Arc::default(),
        };
        // Counters are registered without `_total`: the encoder appends it.
        let counters = [
            (
                "controller_runtime_reconcile_errors",
                "Total number of reconciliation errors per controller",
                &metrics.errors,
            ),
            (
                "controller_runtime_terminal_reconcile_errors",
                "Total number of terminal reconciliation errors per controller",
                &metrics.terminal_errors,
            ),
            (
                "controller_runtime_reconcile_panics",
                "Total number of reconciliation panics per controller",
                &metrics.panics,
            ),
            (
                "controller_runtime_reconcile_timeouts",
                "Total number of reconciliation timeouts per controller",
                &metrics.timeouts,
            ),
        ];
        for (name, help, family) in counters {
            // As controller-runtime, they read 0 from the start.
            let _ = family.get_or_create(&controller());
            registry.register(name, help, family.clone());
        }
        for result in RESULTS {
            let _ = metrics.totals.get_or_create(&ResultLabels {
                controller: CONTROLLER.into(),
                result: result.into(),
            });
        }
        registry.register(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            metrics.totals.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            metrics.time.clone(),
        );
        registry.register(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            metrics.max_concurrent.clone(),
        );
        registry.register(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            metrics.active.clone(),
        );
        registry.register(
            "workqueue_retries",
            "Total number of items added to the workqueue with a non-zero delay (rate-limited requeues, explicit RequeueAfter or AddAfter calls)",
            metrics.retries.clone(),
        );
        registry.register(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            metrics.work.clone(),
        );
        registry.register_collector(Box::new(InFlightCollector(metrics.in_flight.clone())));
        metrics
    }

    /// `--concurrent`.
    pub fn set_max_concurrent(&self, workers: u16) {
        // As controller-runtime, which sets it as the workers start.
        let _ = self.active.get_or_create(&controller());
        self.max_concurrent
            .get_or_create(&controller())
            .set(i64::from(workers));
    }

    /// A reconciliation starts: a worker is busy with an item taken off the queue.
    pub fn start(&self, key: &KustomizationKey) -> Started {
        self.active.get_or_create(&controller()).inc();
        let priority = self.queue.take(key);
        let at = Instant::now();
        let mut in_flight = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        in_flight.next += 1;
        let id = in_flight.next;
        in_flight.started.insert(id, at);
        Started {
            id,
            at,
            key: key.clone(),
            priority,
        }
    }

    /// A reconciliation panicked (controller-runtime counts it before the error it becomes).
    pub fn panicked(&self) {
        self.panics.get_or_create(&controller()).inc();
    }

    /// A reconciliation ended with `result`.
    pub fn finish(&self, started: Started, result: ReconcileResult) {
        let elapsed = started.at.elapsed().as_secs_f64();
        self.in_flight
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .started
            .remove(&started.id);
        self.active.get_or_create(&controller()).dec();
        self.time.get_or_create(&controller()).observe(elapsed);
        self.work.get_or_create(&queue()).observe(elapsed);
        self.totals
            .get_or_create(&ResultLabels {
                controller: CONTROLLER.into(),
                result: result.label().into(),
            })
            .inc();
        match result {
            ReconcileResult::Success => {}
            ReconcileResult::TerminalError => {
                self.errors.get_or_create(&controller()).inc();
                self.terminal_errors.get_or_create(&controller()).inc();
            }
            // Queued again by the error policy, with its back-off.
            ReconcileResult::Error => {
                self.errors.get_or_create(&controller()).inc();
                self.retries.get_or_create(&queue()).inc();
            }
            ReconcileResult::Requeue => {
                self.retries.get_or_create(&queue()).inc();
                self.queue
                    .add_after(&started.key, Duration::ZERO, started.priority);
            }
            ReconcileResult::RequeueAfter(delay) => {
                self.retries.get_or_create(&queue()).inc();
                self.queue.add_after(&started.key, delay, started.priority);
            }
        }
    }
}

/// `workqueue_unfinished_work_seconds` and `workqueue_longest_running_processor_seconds`,
/// read off the reconciliations in flight when scraped.
#[derive(Debug)]
struct InFlightCollector(Arc<Mutex<InFlight>>);

impl Collector for InFlightCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let now = Instant::now();
        let (unfinished, longest) = {
            let in_flight = self.0.lock().unwrap_or_else(|e| e.into_inner());
            in_flight
                .started
                .values()
                .map(|at| now.saturating_duration_since(*at))
                .fold((Duration::ZERO, Duration::ZERO), |(sum, max), d| {
                    (sum + d, max.max(d))
                })
        };
        let labels = queue();
        for (name, help, value) in [
            (
                "workqueue_unfinished_work_seconds",
                "How many seconds of work has been done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases.",
                unfinished,
            ),
            (
                "workqueue_longest_running_processor_seconds",
                "How many seconds has the longest running processor for workqueue been running.",
                longest,
            ),
        ] {
            let gauge = ConstGauge::new(value.as_secs_f64());
            let mut family = encoder.encode_descriptor(
                name,
                &crate::controller::exposition::collector_help(help),
                None,
                gauge.metric_type(),
            )?;
            gauge.encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

/// `rest_client_requests_total{code,host,method}`: every API request a client makes, counted
/// by a tower layer on the client as client-go counts them for Flux.
#[derive(Clone, Debug, Default)]
pub struct RestRequests(Family<RequestLabels, Counter>);

impl RestRequests {
    pub fn register(registry: &mut Registry) -> RestRequests {
        let requests = RestRequests::default();
        registry.register(
            "rest_client_requests",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            requests.0.clone(),
        );
        requests
    }

    fn count(&self, code: &str, host: &str, method: &str) {
        self.0
            .get_or_create(&RequestLabels {
                code: code.into(),
                host: host.into(),
                method: method.into(),
            })
            .inc();
    }
}

impl RestRequests {
    /// The layer for a client of the API server at `host` (`host:port`, as client-go labels
    /// it): the requests a client sends are still relative when its outer layers see them.
    pub fn at(&self, host: &str) -> RestRequestsAt {
        RestRequestsAt {
            requests: self.clone(),
            host: host.to_string(),
        }
    }
}

/// [`RestRequests`] for one API server.
#[derive(Clone, Debug)]
pub struct RestRequestsAt {
    requests: RestRequests,
    host: String,
}

impl<S> Layer<S> for RestRequestsAt {
    type Service = Counted<S>;

    fn layer(&self, inner: S) -> Counted<S> {
        Counted {
            inner,
            requests: self.requests.clone(),
            host: self.host.clone(),
        }
    }
}

/// A service that counts each request by its answer.
#[derive(Clone, Debug)]
pub struct Counted<S> {
    inner: S,
    requests: RestRequests,
    host: String,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, B, R> Service<http::Request<B>> for Counted<S>
where
    S: Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let method = request.method().as_str().to_string();
        let host = request
            .uri()
            .authority()
            .map_or_else(|| self.host.clone(), |a| a.as_str().to_string());
        let requests = self.requests.clone();
        let answer = self.inner.call(request);
        Box::pin(async move {
            let answer = answer.await;
            let code = match &answer {
                Ok(response) => response.status().as_u16().to_string(),
                Err(_) => "<error>".to_string(),
            };
            requests.count(&code, &host, &method);
            answer
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconciliations_are_counted_with_controller_runtimes_names_and_labels() {
        let mut registry = Registry::default();
        let metrics = ControllerRuntime::register(&mut registry);
        metrics.set_max_concurrent(4);
        metrics.queue.add(&KustomizationKey::new("apps", "web"));
        let first = metrics.start(&KustomizationKey::new("apps", "web"));
        let second = metrics.start(&KustomizationKey::new("apps", "db"));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(
            text.contains("controller_runtime_active_workers{controller=\"kustomization\"} 2"),
            "{text}"
        );
        assert!(text.contains("workqueue_longest_running_processor_seconds{controller=\"kustomization\",name=\"kustomization\"}"));
        metrics.finish(
            first,
            ReconcileResult::RequeueAfter(Duration::from_secs(600)),
        );
        metrics.panicked();
        metrics.finish(second, ReconcileResult::Error);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for line in [
            "controller_runtime_reconcile_total{controller=\"kustomization\",result=\"requeue_after\"} 1",
            "controller_runtime_reconcile_total{controller=\"kustomization\",result=\"error\"} 1",
            "controller_runtime_reconcile_errors_total{controller=\"kustomization\"} 1",
            "controller_runtime_max_concurrent_reconciles{controller=\"kustomization\"} 4",
            "controller_runtime_active_workers{controller=\"kustomization\"} 0",
            // Queued, started without being seen queued, and requeued after the interval.
            "workqueue_adds_total{controller=\"kustomization\",name=\"kustomization\"} 3",
            "workqueue_retries_total{controller=\"kustomization\",name=\"kustomization\"} 2",
            "controller_runtime_reconcile_total{controller=\"kustomization\",result=\"success\"} 0",
            "controller_runtime_terminal_reconcile_errors_total{controller=\"kustomization\"} 0",
            // The error was a panic, counted on its own as well.
            "controller_runtime_reconcile_panics_total{controller=\"kustomization\"} 1",
            "workqueue_queue_duration_seconds_count{controller=\"kustomization\",name=\"kustomization\"} 2",
            "workqueue_depth{controller=\"kustomization\",name=\"kustomization\",priority=\"0\"} 0",
            "controller_runtime_reconcile_time_seconds_count{controller=\"kustomization\"} 2",
            "workqueue_unfinished_work_seconds{controller=\"kustomization\",name=\"kustomization\"} 0.0",
        ] {
            assert!(text.contains(line), "{line} in\n{text}");
        }
    }
}
