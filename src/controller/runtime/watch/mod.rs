//! The watches the controller keeps open, one loop per watched kind, that never give up.
//!
//! Each [`watch`] lists its kind, watches from the listed resourceVersion, and starts again
//! whatever happens: a stream the server ends is resumed from the last version seen, a broken
//! stream or a failed request is retried after a short jittered back-off (capped at
//! [`RETRY_CAP`], so a watch is back within seconds of the API server answering again, however
//! long it was away), and a version that history no longer holds (410) is listed again. The
//! stream it returns never ends and never yields an error: kube-runtime's `Controller` backs
//! off *all* its triggers together when any one of them yields an error, which is how one
//! failing watch made the controller deaf to every other after an API server restart.
//!
//! Every loop reports to one [`WatchHealth`], which logs an outage once when it starts and
//! once when it ends, tells which watches have been down for longer than the grace period,
//! and exports the watch metrics (up, restarts by reason, seconds since the API server was
//! last heard from).

mod health;

use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use kube::runtime::watcher::Event;
use kube::{Resource, ResourceExt};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;

pub use crate::retry::Backoff;
pub use health::{Restart, Transition, WatchReport, WatchStates};

pub use crate::retry::{REFUSED_CAP, RETRY_CAP};
/// Objects asked for per list page.
const PAGE_SIZE: u32 = 500;

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

    fn register(&self, kind: &str) {
        self.with(|states| states.register(kind, Instant::now()));
    }

    fn connected(&self, kind: &str) {
        if let Transition::Resumed(outage) = self.with(|s| s.connected(kind, Instant::now())) {
            tracing::info!(kind, outage_seconds = outage.as_secs_f64(), "watch resumed");
        }
    }

    fn failed(&self, kind: &str, error: &dyn std::fmt::Display) {
        match self.with(|s| s.failed(kind, Instant::now())) {
            Transition::Lost => tracing::error!(
                kind,
                error = %error,
                "watch lost; retrying every few seconds until the API server answers"
            ),
            _ => tracing::debug!(kind, error = %error, "watch still down"),
        }
    }

    fn not_served(&self, kind: &str) {
        if self.with(|s| s.not_served(kind, Instant::now())) == Transition::NotServed {
            tracing::info!(
                kind,
                "the API server does not serve this kind; asking again every {}s",
                REFUSED_CAP.as_secs()
            );
        }
    }

    fn heard(&self, kind: &str) {
        self.with(|s| s.heard(kind, Instant::now()));
    }

    fn restarted(&self, kind: &str, why: Restart) {
        self.with(|s| s.restarted(kind, why, Instant::now()));
    }

    /// The watches that have been down for longer than the grace period; empty when ready.
    pub fn unready(&self) -> Vec<String> {
        self.with(|s| s.unready(self.grace, Instant::now()))
    }

    pub fn reports(&self) -> Vec<WatchReport> {
        self.with(|s| s.reports(Instant::now()))
    }
}

/// The owned-object watches (kube-runtime's watcher) report here too: one record of every
/// watch the controller keeps.
impl crate::objects::WatchReporter for WatchHealth {
    fn started(&self, kind: &str) {
        self.register(kind);
    }

    fn connected(&self, kind: &str) {
        WatchHealth::connected(self, kind);
    }

    fn heard(&self, kind: &str) {
        WatchHealth::heard(self, kind);
    }

    fn delivered(&self, kind: &str, version: Option<&str>, followed_up: bool) {
        self.with(|s| s.delivered(kind, version, followed_up, Instant::now()));
    }

    fn failed(&self, kind: &str, status: Option<u16>, error: &dyn std::fmt::Display) {
        // History compacted: the watcher lists again, no outage.
        if status == Some(410) {
            self.restarted(kind, Restart::Expired);
            return;
        }
        self.restarted(kind, Restart::Error);
        if status == Some(404) {
            self.not_served(kind);
        } else {
            WatchHealth::failed(self, kind, error);
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
            "Times a watch was started again, by reason (error, expired, closed).",
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

/// Watches `api` for as long as the returned stream is kept, yielding what a kube-runtime
/// reflector expects (`Init`, `InitApply`…, `InitDone` after each list, then `Apply` and
/// `Delete`). It never ends and never yields an error. Objects come without their
/// `managedFields`, which nothing downstream reads and which would be most of what the
/// caches hold (as Flux strips them from its informer caches).
pub fn watch<K>(
    api: Api<K>,
    config: WatchConfig,
    health: Arc<WatchHealth>,
) -> impl Stream<Item = Event<K>> + Send + 'static
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    health.register(&config.kind);
    let (sender, mut receiver) = mpsc::channel(256);
    tokio::spawn(run(api, config, health, sender));
    futures::stream::poll_fn(move |cx| receiver.poll_recv(cx))
        .map(|event: Event<K>| event.modify(|object| object.meta_mut().managed_fields = None))
}

/// How a watch stream ended.
enum Followed {
    /// The server ended it; resume from this version.
    Ended(String),
    /// It broke (the connection dropped, or the server sent an error); resume from this version.
    Broken(String),
    /// The version is no longer in history: list again.
    Expired,
    /// Nobody listens any more.
    Closed,
}

/// Why a list did not complete.
enum Unlisted {
    Failed(kube::Error),
    Closed,
}

async fn run<K>(
    api: Api<K>,
    config: WatchConfig,
    health: Arc<WatchHealth>,
    sender: mpsc::Sender<Event<K>>,
) where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let kind = config.kind.as_str();
    let mut backoff = Backoff::default();
    let mut resume: Option<String> = None;
    loop {
        let version = match resume.take() {
            Some(version) => version,
            None => match list(&api, &config, &sender).await {
                Ok(version) => {
                    health.connected(kind);
                    backoff.reset();
                    version
                }
                Err(Unlisted::Closed) => return,
                Err(Unlisted::Failed(error)) => {
                    let wait = refused(&health, kind, &error, &mut backoff);
                    if !pause(&sender, wait).await {
                        return;
                    }
                    continue;
                }
            },
        };
        let params = WatchParams {
            label_selector: config.label_selector.clone(),
            // Spread the server-side timeouts so that watches do not all restart together.
            timeout: Some(240 + fastrand::u32(0..50)),
            ..WatchParams::default()
        };
        let stream = match api.watch(&params, &version).await {
            Ok(stream) => stream,
            Err(kube::Error::Api(status)) if status.code == 410 => {
                health.restarted(kind, Restart::Expired);
                continue;
            }
            Err(error) => {
                health.restarted(kind, Restart::Error);
                let wait = refused(&health, kind, &error, &mut backoff);
                resume = Some(version);
                if !pause(&sender, wait).await {
                    return;
                }
                continue;
            }
        };
        health.connected(kind);
        let started = Instant::now();
        let (version, broke) = match follow(stream, version, kind, &health, &sender).await {
            Followed::Ended(version) => {
                health.restarted(kind, Restart::Closed);
                (version, false)
            }
            Followed::Broken(version) => {
                health.restarted(kind, Restart::Error);
                (version, true)
            }
            Followed::Expired => {
                health.restarted(kind, Restart::Expired);
                continue;
            }
            Followed::Closed => return,
        };
        let wait = resume_delay(started.elapsed(), broke, &mut backoff);
        if !wait.is_zero() && !pause(&sender, wait).await {
            return;
        }
        resume = Some(version);
    }
}

/// How long a stream must have run to count as a working watch.
const STABLE: Duration = Duration::from_secs(1);

/// How long to wait before resuming a watch whose stream ran for `lived`. A stream that ran
/// for a while resets the back-off: after a clean end (the server's timeout) the watch resumes
/// at once, after a break it pauses briefly. One that ended at once counts as a failure, so a
/// server that ends every watch immediately is asked ever less often, not in a tight loop.
fn resume_delay(lived: Duration, broke: bool, backoff: &mut Backoff) -> Duration {
    if lived >= STABLE {
        backoff.reset();
        if !broke {
            return Duration::ZERO;
        }
    }
    backoff.next(RETRY_CAP)
}

/// Records a failed request and says how long to wait before the next.
fn refused(
    health: &WatchHealth,
    kind: &str,
    error: &kube::Error,
    backoff: &mut Backoff,
) -> Duration {
    let status = match error {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    };
    if status == Some(404) {
        health.not_served(kind);
    } else {
        health.failed(kind, error);
    }
    crate::retry::after_failure(status, backoff)
}

/// Sleeps, unless nobody listens any more (then `false`).
async fn pause<K>(sender: &mpsc::Sender<Event<K>>, wait: Duration) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(wait) => true,
        _ = sender.closed() => false,
    }
}

/// Lists every page, sending `Init`, the objects and `InitDone`; returns the list's version.
async fn list<K>(
    api: &Api<K>,
    config: &WatchConfig,
    sender: &mpsc::Sender<Event<K>>,
) -> Result<String, Unlisted>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let mut params = ListParams {
        label_selector: config.label_selector.clone(),
        limit: Some(PAGE_SIZE),
        ..ListParams::default()
    };
    let mut started = false;
    loop {
        let page = api.list(&params).await.map_err(Unlisted::Failed)?;
        if !started {
            sender
                .send(Event::Init)
                .await
                .map_err(|_| Unlisted::Closed)?;
            started = true;
        }
        for object in page.items {
            sender
                .send(Event::InitApply(object))
                .await
                .map_err(|_| Unlisted::Closed)?;
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params.continue_token = Some(token),
            None => {
                sender
                    .send(Event::InitDone)
                    .await
                    .map_err(|_| Unlisted::Closed)?;
                return Ok(page.metadata.resource_version.unwrap_or_default());
            }
        }
    }
}

/// Forwards one watch stream's events until it ends.
async fn follow<K>(
    stream: impl Stream<Item = Result<WatchEvent<K>, kube::Error>>,
    mut version: String,
    kind: &str,
    health: &WatchHealth,
    sender: &mpsc::Sender<Event<K>>,
) -> Followed
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let mut stream = std::pin::pin!(stream);
    loop {
        let next = tokio::select! {
            next = stream.next() => next,
            _ = sender.closed() => return Followed::Closed,
        };
        let event = match next {
            None => return Followed::Ended(version),
            Some(Err(error)) => {
                tracing::debug!(kind, error = %error, "watch stream broke; resuming");
                return Followed::Broken(version);
            }
            Some(Ok(event)) => event,
        };
        health.heard(kind);
        let forward = match event {
            WatchEvent::Added(object) | WatchEvent::Modified(object) => {
                remember(&mut version, &object);
                Event::Apply(object)
            }
            WatchEvent::Deleted(object) => {
                remember(&mut version, &object);
                Event::Delete(object)
            }
            WatchEvent::Bookmark(bookmark) => {
                version = bookmark.metadata.resource_version;
                continue;
            }
            WatchEvent::Error(status) if status.code == 410 => return Followed::Expired,
            WatchEvent::Error(status) => {
                tracing::debug!(kind, code = status.code, message = %status.message, "watch error event; resuming");
                return Followed::Broken(version);
            }
        };
        if sender.send(forward).await.is_err() {
            return Followed::Closed;
        }
    }
}

fn remember<K: Resource>(version: &mut String, object: &K) {
    if let Some(seen) = object.resource_version().filter(|v| !v.is_empty()) {
        *version = seen;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn applied_object_watches_report_compactions_as_expiry_not_outage() {
        use crate::objects::WatchReporter;
        let health = WatchHealth::new(Duration::ZERO);
        let kind = "ConfigMap (applied)";
        WatchReporter::started(&health, kind);
        WatchReporter::connected(&health, kind);
        WatchReporter::failed(&health, kind, Some(410), &"too old resource version");
        let report = &health.reports()[0];
        assert!(report.up, "{report:?}");
        assert_eq!(report.restarts.get(&Restart::Expired), Some(&1));
        assert_eq!(report.restarts.get(&Restart::Error), None);
        WatchReporter::failed(&health, kind, Some(503), &"unavailable");
        let report = &health.reports()[0];
        assert!(!report.up, "{report:?}");
        assert_eq!(report.restarts.get(&Restart::Error), Some(&1));
        WatchReporter::delivered(&health, kind, Some("42"), false);
        let report = &health.reports()[0];
        assert_eq!(
            (report.delivered, report.last_version.as_deref()),
            (1, Some("42"))
        );
    }

    #[test]
    fn streams_that_end_at_once_are_resumed_ever_more_slowly() {
        let mut backoff = Backoff::default();
        let quick = Duration::from_millis(10);
        let waits: Vec<Duration> = (0..12)
            .map(|_| resume_delay(quick, false, &mut backoff))
            .collect();
        assert!(
            waits[11] >= RETRY_CAP / 2,
            "escalates to the cap: {waits:?}"
        );
        assert_eq!(
            resume_delay(Duration::from_secs(240), false, &mut backoff),
            Duration::ZERO,
            "a stream the server timed out resumes at once"
        );
        let after_break = resume_delay(Duration::from_secs(240), true, &mut backoff);
        assert!(
            after_break <= crate::retry::FIRST,
            "a long-lived stream that broke resets: {after_break:?}"
        );
    }

    #[test]
    fn refusals_back_off_longer_but_still_bounded() {
        let mut backoff = Backoff::default();
        let waits: Vec<Duration> = (0..40).map(|_| backoff.next(REFUSED_CAP)).collect();
        assert!(waits.iter().all(|w| *w <= REFUSED_CAP));
        assert!(waits[39] >= REFUSED_CAP / 2);
    }

    #[test]
    fn metrics_name_every_watch() {
        let health = Arc::new(WatchHealth::new(Duration::from_secs(1)));
        health.register("Kustomization");
        health.connected("Kustomization");
        health.restarted("Kustomization", Restart::Expired);
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
