//! The controller-runtime metrics Flux's dashboards query, with controller-runtime's names and
//! labels: `controller_runtime_*` for reconciliations, `workqueue_*` for the work queue, and
//! `rest_client_requests_total` for every API request (a tower layer on each client).
//!
//! kube-runtime keeps its queue to itself, so the queue metrics are what the reconciler sees:
//! adds are reconciliations started, retries the ones requeued after an error, work duration
//! the reconcile time, and unfinished work and the longest-running processor come from the
//! reconciliations in flight. `workqueue_depth` and `workqueue_queue_duration_seconds` are
//! not exported: their values are not observable here.

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

/// controller-runtime's name for this controller (the lowercased kind), its `controller`
/// and workqueue `name` label.
pub const CONTROLLER: &str = "kustomization";

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
struct QueueLabels {
    controller: String,
    name: String,
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
    /// Requeued after a delay (the interval, a retry or a dependency wait).
    RequeueAfter,
    /// Failed; retried with back-off.
    Error,
}

impl ReconcileResult {
    fn label(self) -> &'static str {
        match self {
            ReconcileResult::Success => "success",
            ReconcileResult::RequeueAfter => "requeue_after",
            ReconcileResult::Error => "error",
        }
    }
}

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
    max_concurrent: Family<ControllerLabels, Gauge>,
    active: Family<ControllerLabels, Gauge>,
    adds: Family<QueueLabels, Counter>,
    retries: Family<QueueLabels, Counter>,
    work: Family<QueueLabels, Histogram>,
    in_flight: Arc<Mutex<InFlight>>,
}

/// A reconciliation being timed; [`ControllerRuntime::finish`] records it.
#[derive(Debug)]
pub struct Started {
    id: u64,
    at: Instant,
}

fn controller() -> ControllerLabels {
    ControllerLabels {
        controller: CONTROLLER.into(),
    }
}

fn queue() -> QueueLabels {
    QueueLabels {
        controller: CONTROLLER.into(),
        name: CONTROLLER.into(),
    }
}

impl ControllerRuntime {
    /// The metrics, registered in `registry` with controller-runtime's names.
    pub fn register(registry: &mut Registry) -> ControllerRuntime {
        let histogram = || Histogram::new(RECONCILE_BUCKETS);
        let metrics = ControllerRuntime {
            totals: Family::default(),
            errors: Family::default(),
            time: Family::new_with_constructor(histogram),
            max_concurrent: Family::default(),
            active: Family::default(),
            adds: Family::default(),
            retries: Family::default(),
            work: Family::new_with_constructor(|| {
                Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
                    1e-8, 10.0, 10,
                ))
            }),
            in_flight: Arc::default(),
        };
        // Counters are registered without `_total`: the encoder appends it.
        registry.register(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            metrics.totals.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            metrics.errors.clone(),
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
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            metrics.adds.clone(),
        );
        registry.register(
            "workqueue_retries",
            "Total number of retries handled by workqueue",
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
        self.max_concurrent
            .get_or_create(&controller())
            .set(i64::from(workers));
    }

    /// A reconciliation starts: a worker is busy with an item taken off the queue.
    pub fn start(&self) -> Started {
        self.active.get_or_create(&controller()).inc();
        self.adds.get_or_create(&queue()).inc();
        let at = Instant::now();
        let mut in_flight = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        in_flight.next += 1;
        let id = in_flight.next;
        in_flight.started.insert(id, at);
        Started { id, at }
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
        if result == ReconcileResult::Error {
            self.errors.get_or_create(&controller()).inc();
            self.retries.get_or_create(&queue()).inc();
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
                "How many seconds of work has been done that is in progress and hasn't been observed by work_duration.",
                unfinished,
            ),
            (
                "workqueue_longest_running_processor_seconds",
                "How many seconds has the longest running processor for workqueue been running.",
                longest,
            ),
        ] {
            let gauge = ConstGauge::new(value.as_secs_f64());
            let mut family = encoder.encode_descriptor(name, help, None, gauge.metric_type())?;
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

impl<S> Layer<S> for RestRequests {
    type Service = Counted<S>;

    fn layer(&self, inner: S) -> Counted<S> {
        Counted {
            inner,
            requests: self.clone(),
        }
    }
}

/// A service that counts each request by its answer.
#[derive(Clone, Debug)]
pub struct Counted<S> {
    inner: S,
    requests: RestRequests,
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
            .map(|a| a.as_str().to_string())
            .unwrap_or_default();
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
        let first = metrics.start();
        let second = metrics.start();
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(
            text.contains("controller_runtime_active_workers{controller=\"kustomization\"} 2"),
            "{text}"
        );
        assert!(text.contains("workqueue_longest_running_processor_seconds{controller=\"kustomization\",name=\"kustomization\"}"));
        metrics.finish(first, ReconcileResult::RequeueAfter);
        metrics.finish(second, ReconcileResult::Error);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for line in [
            "controller_runtime_reconcile_total{controller=\"kustomization\",result=\"requeue_after\"} 1",
            "controller_runtime_reconcile_total{controller=\"kustomization\",result=\"error\"} 1",
            "controller_runtime_reconcile_errors_total{controller=\"kustomization\"} 1",
            "controller_runtime_max_concurrent_reconciles{controller=\"kustomization\"} 4",
            "controller_runtime_active_workers{controller=\"kustomization\"} 0",
            "workqueue_adds_total{controller=\"kustomization\",name=\"kustomization\"} 2",
            "workqueue_retries_total{controller=\"kustomization\",name=\"kustomization\"} 1",
            "controller_runtime_reconcile_time_seconds_count{controller=\"kustomization\"} 2",
            "workqueue_unfinished_work_seconds{controller=\"kustomization\",name=\"kustomization\"} 0.0",
        ] {
            assert!(text.contains(line), "{line} in\n{text}");
        }
    }
}
