//! The watches the controller keeps open, one per watched kind, and the one record of how
//! every watch is doing.
//!
//! Each [`watch`] is kube-runtime's watcher run by the one watch mechanism
//! ([`apply_engine::watch`]): it lists its kind, watches from the listed resourceVersion, and
//! starts again whatever happens, after a jittered back-off capped at [`RETRY_CAP`], so a
//! watch is back within seconds of the API server answering again, however long it was away.
//! Its stream never ends and never yields an error.
//!
//! Every watch, the applied-object ones too, reports to one [`WatchHealth`], which logs an
//! outage once when it starts and once when it ends, tells which watches have been down for
//! longer than the grace period, and exports the watch metrics (up, restarts by reason,
//! seconds since the API server was last heard from).

mod health;
mod lean;

pub use lean::LeanKustomization;

use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use apply_engine::watch::{Setback, WatchReporter};
use futures::{Stream, StreamExt};
use kube::Resource;
use kube::api::Api;
use kube::runtime::watcher::{self, Event};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use serde::de::DeserializeOwned;

pub use crate::retry::{REFUSED_CAP, RETRY_CAP};
pub use health::{Restart, Transition, WatchReport, WatchStates};

/// What one watch is given: the kind's name in logs and metrics, and the label selector.
#[derive(Clone, Debug, Default)]
pub struct WatchConfig {
    pub kind: String,
    pub label_selector: Option<String>,
}

/// The shared record of every watch, read by `/readyz` and `/metrics`.
#[derive(Debug)]
pub struct WatchHealth {
    states: Mutex<WatchStates>,
    /// How long a watch may be down before the controller reports itself not ready.
    grace: Duration,
}

impl Default for WatchHealth {
    fn default() -> WatchHealth {
        WatchHealth::new(Duration::from_secs(30))
    }
}

impl WatchHealth {
    pub fn new(grace: Duration) -> WatchHealth {
        WatchHealth {
            states: Mutex::default(),
            grace,
        }
    }

    fn with<T>(&self, change: impl FnOnce(&mut WatchStates) -> T) -> T {
        change(&mut self.states.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn log(&self, kind: &str, transition: Transition, error: Option<&dyn std::fmt::Display>) {
        match transition {
            Transition::Resumed(outage) => {
                tracing::info!(kind, outage_seconds = outage.as_secs_f64(), "watch resumed");
            }
            Transition::Lost => tracing::error!(
                kind,
                error = %error.map(ToString::to_string).unwrap_or_default(),
                "watch lost; retrying every few seconds until the API server answers"
            ),
            Transition::NotServed => tracing::info!(
                kind,
                "the API server does not serve this kind; asking again every {}s",
                REFUSED_CAP.as_secs()
            ),
            Transition::Quiet => {
                if let Some(error) = error {
                    tracing::debug!(kind, error = %error, "watch still down");
                }
            }
        }
    }

    /// The watches that have been down for longer than the grace period; empty when ready.
    pub fn unready(&self) -> Vec<String> {
        self.with(|s| s.unready(self.grace, Instant::now()))
    }

    pub fn reports(&self) -> Vec<WatchReport> {
        self.with(|s| s.reports(Instant::now()))
    }
}

/// Every watch reports here: one record of every watch the controller keeps.
impl WatchReporter for WatchHealth {
    fn started(&self, kind: &str) {
        self.with(|states| states.register(kind, Instant::now()));
    }

    fn listed(&self, kind: &str) {
        let transition = self.with(|s| s.connected(kind, Instant::now()));
        self.log(kind, transition, None);
    }

    fn opened(&self, kind: &str) {
        let transition = self.with(|s| s.opened(kind, Instant::now()));
        self.log(kind, transition, None);
    }

    fn heard(&self, kind: &str) {
        self.with(|s| s.heard(kind, Instant::now()));
    }

    fn delivered(&self, kind: &str, version: Option<&str>, followed_up: bool) {
        self.with(|s| s.delivered(kind, version, followed_up, Instant::now()));
    }

    fn set_back(&self, kind: &str, setback: Setback, error: &dyn std::fmt::Display) {
        let now = Instant::now();
        let transition = self.with(|s| match setback {
            // History compacted: the watch lists again, no outage.
            Setback::Expired => {
                s.restarted(kind, Restart::Expired, now);
                Transition::Quiet
            }
            // A stream that broke is resumed at once; only a failed request is an outage.
            Setback::Broke => {
                s.restarted(kind, Restart::Error, now);
                Transition::Quiet
            }
            Setback::NotServed => {
                s.restarted(kind, Restart::Error, now);
                s.not_served(kind, now)
            }
            Setback::Refused(_) => {
                s.restarted(kind, Restart::Error, now);
                s.failed(kind, now)
            }
        });
        match setback {
            Setback::Expired | Setback::Broke => {
                tracing::debug!(kind, error = %error, "watch stream ended; resuming")
            }
            Setback::NotServed | Setback::Refused(_) => self.log(kind, transition, Some(error)),
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
struct KindLabels {
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
struct RestartLabels {
    kind: String,
    reason: String,
}

impl Collector for WatchHealth {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let reports = self.reports();
        let up = ConstGauge::new(0i64);
        let mut family = encoder.encode_descriptor(
            "kustomize_controller_watch_up",
            "Whether the watch of a kind is connected (1) or retrying (0).",
            None,
            up.metric_type(),
        )?;
        for report in &reports {
            let labels = KindLabels {
                kind: report.kind.clone(),
            };
            ConstGauge::new(i64::from(report.up)).encode(family.encode_family(&labels)?)?;
        }
        let silence = ConstGauge::new(0f64);
        let mut family = encoder.encode_descriptor(
            "kustomize_controller_watch_seconds_since_last_event",
            "Seconds since the watch of a kind last heard from the API server.",
            None,
            silence.metric_type(),
        )?;
        for report in &reports {
            let labels = KindLabels {
                kind: report.kind.clone(),
            };
            ConstGauge::new(report.since_last_heard.as_secs_f64())
                .encode(family.encode_family(&labels)?)?;
        }
        let restarts = ConstCounter::new(0u64);
        let mut family = encoder.encode_descriptor(
            "kustomize_controller_watch_restarts",
            "Times a watch had to start again, by reason: error (each failed list or watch request, each broken stream), expired (history compacted: listed again), closed (the server ended the stream, counted when the next is answered).",
            None,
            restarts.metric_type(),
        )?;
        for report in &reports {
            for (why, count) in &report.restarts {
                let labels = RestartLabels {
                    kind: report.kind.clone(),
                    reason: why.as_str().into(),
                };
                ConstCounter::new(*count).encode(family.encode_family(&labels)?)?;
            }
        }
        let follow_ups = ConstCounter::new(0u64);
        let mut family = encoder.encode_descriptor(
            "kustomize_controller_watch_follow_ups",
            "Changes a watch delivered that ran a Kustomization again (an object a requested reconciliation took as unmoved changed).",
            None,
            follow_ups.metric_type(),
        )?;
        for report in reports.iter().filter(|report| report.delivered > 0) {
            let labels = KindLabels {
                kind: report.kind.clone(),
            };
            ConstCounter::new(report.follow_ups).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

/// Watches the kind `api` names (built on the client it is given) for as long as the returned
/// stream is kept, yielding what a kube-runtime reflector expects (`Init`, `InitApply`…,
/// `InitDone` after each list, then `Apply` and `Delete`). It never ends and never yields an
/// error. Objects come without their `managedFields`, which nothing downstream reads and which
/// would be most of what the caches hold (as Flux strips them from its informer caches).
pub fn watch<K, F>(
    client: &kube::Client,
    api: F,
    config: WatchConfig,
    health: Arc<WatchHealth>,
) -> impl Stream<Item = Event<K>> + Send + 'static + use<K, F>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    F: Fn(kube::Client) -> Api<K> + Send + 'static,
{
    // Spread the server-side timeouts so that watches do not all restart together.
    let mut watcher_config = watcher::Config::default().timeout(240 + fastrand::u32(0..50));
    if let Some(selector) = &config.label_selector {
        watcher_config = watcher_config.labels(selector);
    }
    apply_engine::watch::watch(client, &config.kind, health, move |client| {
        watcher::watcher(api(client), watcher_config.clone())
    })
    .map(|event: Event<K>| event.modify(|object| object.meta_mut().managed_fields = None))
}

/// Watches Kustomizations as [`watch`] does, parsing them without their managed fields.
pub fn watch_kustomizations(
    client: &kube::Client,
    namespace: Option<String>,
    config: WatchConfig,
    health: Arc<WatchHealth>,
) -> impl Stream<Item = Event<crate::api::Kustomization>> + Send + 'static + use<> {
    watch(
        client,
        scoped::<LeanKustomization>(namespace),
        config,
        health,
    )
    .map(|event| match event {
        Event::Apply(LeanKustomization(object)) => Event::Apply(object),
        Event::Delete(LeanKustomization(object)) => Event::Delete(object),
        Event::Init => Event::Init,
        Event::InitApply(LeanKustomization(object)) => Event::InitApply(object),
        Event::InitDone => Event::InitDone,
    })
}

/// The API of a namespaced kind in `namespace` (all namespaces: none), on the client a
/// watch hands it.
pub fn scoped<K>(namespace: Option<String>) -> impl Fn(kube::Client) -> Api<K> + Send + 'static
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
{
    move |client| match &namespace {
        Some(namespace) => Api::namespaced(client, namespace),
        None => Api::all(client),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn how_a_watch_is_set_back_decides_whether_it_is_down() {
        let health = WatchHealth::new(Duration::ZERO);
        let kind = "ConfigMap (applied)";
        health.started(kind);
        health.listed(kind);
        health.set_back(kind, Setback::Expired, &"too old resource version");
        let report = &health.reports()[0];
        assert!(report.up, "a compaction is no outage: {report:?}");
        assert_eq!(report.restarts.get(&Restart::Expired), Some(&1));
        assert_eq!(report.restarts.get(&Restart::Error), None);
        health.set_back(kind, Setback::Broke, &"connection reset");
        let report = &health.reports()[0];
        assert!(report.up, "a broken stream resumes at once: {report:?}");
        assert_eq!(report.restarts.get(&Restart::Error), Some(&1));
        health.set_back(kind, Setback::Refused(Some(503)), &"unavailable");
        let report = &health.reports()[0];
        assert!(!report.up, "{report:?}");
        assert_eq!(report.restarts.get(&Restart::Error), Some(&2));
        health.opened(kind);
        assert!(health.reports()[0].up);
        health.set_back(kind, Setback::NotServed, &"not found");
        let report = &health.reports()[0];
        assert!(report.absent && !report.up, "{report:?}");
        assert!(health.unready().is_empty(), "an absent kind is not unready");
        health.delivered(kind, Some("42"), false);
        let report = &health.reports()[0];
        assert_eq!(
            (report.delivered, report.last_version.as_deref()),
            (1, Some("42"))
        );
    }

    #[test]
    fn metrics_name_every_watch() {
        let health = Arc::new(WatchHealth::new(Duration::from_secs(1)));
        health.started("Kustomization");
        health.listed("Kustomization");
        health.set_back("Kustomization", Setback::Expired, &"gone");
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register_collector(Box::new(health));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(
            text.contains("kustomize_controller_watch_up{kind=\"Kustomization\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("kustomize_controller_watch_restarts_total{kind=\"Kustomization\",reason=\"expired\"} 1"),
            "{text}"
        );
        assert!(
            text.contains(
                "kustomize_controller_watch_seconds_since_last_event{kind=\"Kustomization\"}"
            ),
            "{text}"
        );
    }
}
