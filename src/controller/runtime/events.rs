//! Events about Kustomizations, as Flux emits them: `core/v1` Events annotated with Flux's
//! event metadata (`kustomize.toolkit.fluxcd.io/revision`, `…/originRevision`,
//! `…/commit_status`, and the Kustomization's own `event.toolkit.fluxcd.io/*` annotations),
//! and, with `--events-addr`, the same event POSTed to Flux's notification-controller (its
//! `event.Event` JSON, sent again as Flux's retrying client sends it, `event_retry`) so
//! alerts and Git commit statuses keep working after an image swap. Failing to record an
//! event is logged, never fatal.
//!
//! As client-go's event broadcaster does for Flux, `publish` only queues: writer tasks write
//! the Events with a client of its own (its own rate limiter), so a fleet's Events never hold
//! up, or queue behind, the requests that make Kustomizations Ready. Each Kustomization's
//! Events go to one writer, in the order they were published; a few writers share the
//! Kustomizations, so one slow answer does not hold up everyone's Events. Each writer
//! correlates its Events as client-go's recorder does for Flux (`event_correlator`): a repeat
//! patches the earlier Event's count, a reason with many messages becomes one combined
//! Event, and an object's Events beyond a burst are let through one per five minutes; what
//! is forwarded to notification-controller is not correlated, as in Flux. An Event the API
//! server could not be reached for is tried again, up to 12 times, 10 s apart; one it
//! refused is dropped (`event_retry`), and its writer goes on with the next.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Event;
use kube::api::{Patch, PatchParams, PostParams};
use serde::Serialize;
use serde_json::json;

use super::event_correlator::{COMBINED_PREFIX, Correlated, Correlator, EventFacts};
use super::event_retry::{
    Abandoned, AfterFailure, GIVEN_UP, RETRYING, after_failure, forward_failed, forward_pause,
    pause_after,
};
use crate::api::Kustomization;
use crate::retryable_http::{self, Tried};

/// The API group event metadata keys are prefixed with.
const GROUP: &str = "kustomize.toolkit.fluxcd.io";
/// Annotations of the Kustomization that every event carries (Flux's event API group).
const EVENT_ANNOTATION_PREFIX: &str = "event.toolkit.fluxcd.io/";

/// What an event says about the revision it concerns, in Flux's metadata keys.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EventMeta {
    pub revision: Option<String>,
    pub origin_revision: Option<String>,
    /// `commit_status: update`: notification-controller updates Git commit statuses from it.
    pub commit_status: bool,
}

impl EventMeta {
    pub fn of(revision: Option<&str>, origin_revision: Option<&str>) -> EventMeta {
        EventMeta {
            revision: revision.map(str::to_string),
            origin_revision: origin_revision.map(str::to_string),
            commit_status: false,
        }
    }

    /// The event's metadata as Flux writes it: keys prefixed with the API group, then the
    /// Kustomization's `event.toolkit.fluxcd.io/` annotations.
    pub fn annotations(&self, object: &Kustomization) -> BTreeMap<String, String> {
        let mut map = BTreeMap::new();
        if self.commit_status {
            map.insert(format!("{GROUP}/commit_status"), "update".to_string());
        }
        if let Some(revision) = self.revision.as_deref().filter(|r| !r.is_empty()) {
            map.insert(format!("{GROUP}/revision"), revision.to_string());
        }
        if let Some(origin) = self.origin_revision.as_deref().filter(|r| !r.is_empty()) {
            map.insert(format!("{GROUP}/originRevision"), origin.to_string());
        }
        for (key, value) in object.metadata.annotations.iter().flatten() {
            if key.starts_with(EVENT_ANNOTATION_PREFIX) {
                map.insert(key.clone(), value.clone());
            }
        }
        map
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    /// The Event's `type`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

pub struct Recorder {
    component: String,
    /// notification-controller's address (`--events-addr`).
    events_addr: Option<String>,
    http: reqwest::Client,
    instance: String,
    /// The client Events are written with: its own rate limiter, as client-go's event sink
    /// has its own clientset, so Events never delay a reconciliation's requests.
    client: kube::Client,
    /// The queues to the writer tasks, started with the first event.
    queues: std::sync::OnceLock<Vec<tokio::sync::mpsc::Sender<Job>>>,
    /// The pause between tries of an Event the API server was not reached for.
    retry_pause: Duration,
}

/// How many tasks write Events.
const WRITERS: usize = 4;

/// How many Events may wait for each writer; more are dropped (logged), as client-go's
/// broadcaster drops them when its queue of 1,000 is full.
const QUEUE: usize = 256;

/// Event messages are bounded as condition messages are (Flux's and client-go's are not;
/// a message this long is the condition's, which is already cut to this).
const MAX_NOTE: usize = crate::controller::status::MAX_MESSAGE;

/// What the writing task is asked to do, in order.
enum Job {
    Record(Box<Recorded>),
    /// Answered once every Event queued before it is written (or has failed).
    Flush(tokio::sync::oneshot::Sender<()>),
}

struct Recorded {
    namespace: String,
    /// The involved Kustomization's name, uid and resourceVersion.
    object: String,
    uid: Option<String>,
    resource_version: Option<String>,
    event_type: EventType,
    reason: String,
    message: String,
    /// The event metadata, kept to write the Event again should it be gone.
    annotations: BTreeMap<String, String>,
    /// The Event's name, given when it is recorded, as client-go's recorder names it.
    name: String,
    now: String,
}

impl Recorded {
    /// An event about `object`, recorded now: its message bounded, its metadata as Flux
    /// writes it, its Event's name given.
    fn of(
        object: &Kustomization,
        event_type: EventType,
        reason: &str,
        note: &str,
        meta: &EventMeta,
    ) -> Recorded {
        let name = object.metadata.name.clone().unwrap_or_default();
        Recorded {
            namespace: object.metadata.namespace.clone().unwrap_or_default(),
            name: event_name(&name),
            object: name,
            uid: object.metadata.uid.clone(),
            resource_version: object.metadata.resource_version.clone(),
            event_type,
            reason: reason.to_string(),
            message: bounded(note).to_string(),
            annotations: meta.annotations(object),
            now: k8s_openapi::jiff::Timestamp::now()
                .strftime("%Y-%m-%dT%H:%M:%SZ")
                .to_string(),
        }
    }

    /// The Kustomization the event is about.
    fn involved(&self) -> InvolvedObject<'_> {
        InvolvedObject {
            api_version: "kustomize.toolkit.fluxcd.io/v1",
            kind: "Kustomization",
            namespace: &self.namespace,
            name: &self.object,
            uid: self.uid.as_deref(),
            resource_version: self.resource_version.as_deref(),
        }
    }
}

/// Logs a published event as Flux's pipeline does, outside any reconciliation's context:
/// with trace enabled, fluxcd/pkg's recorder writes a Warning as an error line (its reason
/// the error) and a Normal one as an info line, with the event metadata; at debug,
/// controller-runtime's event watcher (logger `events`) writes the Event's type, object and
/// reason.
fn log_published(recorded: &Recorded) {
    use tracing::Level;
    if tracing::enabled!(Level::TRACE) {
        let annotations = if recorded.annotations.is_empty() {
            "null".to_string()
        } else {
            serde_json::to_string(&recorded.annotations).unwrap_or_default()
        };
        let (name, namespace) = (&recorded.object, &recorded.namespace);
        match recorded.event_type {
            EventType::Warning => tracing::error!(parent: None, name = %name,
                namespace = %namespace, "reconciler kind" = "Kustomization",
                json.annotations = %annotations, error = %recorded.reason,
                "{}", recorded.message),
            EventType::Normal => tracing::info!(parent: None, name = %name,
                namespace = %namespace, "reconciler kind" = "Kustomization",
                reason = %recorded.reason, json.annotations = %annotations,
                "{}", recorded.message),
        }
    }
    if tracing::enabled!(Level::DEBUG) {
        let object = serde_json::to_string(&recorded.involved()).unwrap_or_default();
        tracing::debug!(parent: None, logger = "events",
            "type" = recorded.event_type.as_str(), json.object = %object,
            reason = %recorded.reason, "{}", recorded.message);
    }
}

/// `note` cut to [`MAX_NOTE`] bytes, at a character boundary.
fn bounded(note: &str) -> &str {
    let mut end = note.len().min(MAX_NOTE);
    while !note.is_char_boundary(end) {
        end -= 1;
    }
    &note[..end]
}

/// The Kustomization an Event is about; an absent uid or resourceVersion is left out, as
/// client-go's `ObjectReference` leaves it. Its keys come in the Go struct's order, as Flux's
/// log lines print it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct InvolvedObject<'a> {
    kind: &'a str,
    namespace: &'a str,
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    uid: Option<&'a str>,
    api_version: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    resource_version: Option<&'a str>,
}

/// A core/v1 Event as client-go's recorder makes it, serialized straight from borrowed parts.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CoreEvent<'a> {
    api_version: &'a str,
    kind: &'a str,
    metadata: EventObjectMeta<'a>,
    involved_object: &'a InvolvedObject<'a>,
    reason: &'a str,
    message: &'a str,
    #[serde(rename = "type")]
    type_: &'a str,
    source: EventSource<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reporting_component: Option<&'a str>,
    first_timestamp: &'a str,
    last_timestamp: &'a str,
    count: i32,
}

#[derive(Serialize)]
struct EventObjectMeta<'a> {
    name: &'a str,
    namespace: &'a str,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    annotations: &'a BTreeMap<String, String>,
}

#[derive(Serialize)]
struct EventSource<'a> {
    component: &'a str,
}

/// The event as notification-controller receives it (fluxcd/pkg `event.Event`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Forwarded<'a> {
    involved_object: &'a InvolvedObject<'a>,
    severity: &'a str,
    timestamp: &'a str,
    message: &'a str,
    reason: &'a str,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    metadata: &'a BTreeMap<String, String>,
    reporting_controller: &'a str,
    reporting_instance: &'a str,
}

impl Recorder {
    /// A recorder writing Events with `client`, which should not share the reconcilers'
    /// rate limiter (see `ratelimit::RateLimit::twin`).
    pub fn new(client: kube::Client, component: &str) -> Recorder {
        Recorder {
            client,
            component: component.to_string(),
            events_addr: None,
            http: crate::tls::client_builder()
                .timeout(std::time::Duration::from_secs(5))
                .build()
                .unwrap_or_default(),
            instance: std::env::var("HOSTNAME").unwrap_or_else(|_| component.to_string()),
            queues: std::sync::OnceLock::new(),
            retry_pause: super::event_retry::PAUSE,
        }
    }

    /// Pauses `pause` between tries of an Event the API server was not reached for (10 s
    /// unless told), as client-go's `WithSleepDuration`; tests shorten it.
    pub fn with_retry_pause(mut self, pause: Duration) -> Recorder {
        self.retry_pause = pause;
        self
    }

    /// Forwards every event to notification-controller at `address` too.
    pub fn with_events_addr(mut self, address: Option<String>) -> Recorder {
        self.events_addr = address.filter(|a| !a.is_empty());
        self
    }

    /// Records an event: queued for its Kustomization's writer (which writes them in the
    /// order they were published) and forwarded to notification-controller; neither holds up the caller,
    /// as neither does in Flux. Must be called within the tokio runtime.
    pub fn publish(
        &self,
        object: &Kustomization,
        event_type: EventType,
        reason: &str,
        note: &str,
        meta: &EventMeta,
    ) {
        let recorded = Recorded::of(object, event_type, reason, note, meta);
        log_published(&recorded);
        if let Some(address) = &self.events_addr
            && let Some(body) = self.forwarded(&recorded)
        {
            let about = (recorded.namespace.clone(), recorded.object.clone());
            tokio::spawn(forward(self.http.clone(), address.clone(), body, about));
        }
        let queues = self.queues();
        // One writer per Kustomization keeps its Events in the order they were published.
        let writer = {
            use std::hash::{Hash, Hasher};
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            (recorded.namespace.as_str(), recorded.object.as_str()).hash(&mut hasher);
            hasher.finish() as usize % queues.len()
        };
        let job = Job::Record(Box::new(recorded));
        if let Err(tokio::sync::mpsc::error::TrySendError::Full(_)) = queues[writer].try_send(job) {
            tracing::error!(
                kustomization = object.metadata.name.as_deref().unwrap_or_default(),
                reason,
                "{QUEUE} events are waiting for this one's writer; it is dropped"
            );
        }
    }

    /// The event as notification-controller receives it, as JSON.
    fn forwarded(&self, recorded: &Recorded) -> Option<Vec<u8>> {
        serde_json::to_vec(&Forwarded {
            involved_object: &recorded.involved(),
            severity: match recorded.event_type {
                EventType::Normal => "info",
                EventType::Warning => "error",
            },
            timestamp: &recorded.now,
            message: &recorded.message,
            reason: &recorded.reason,
            metadata: &recorded.annotations,
            reporting_controller: &self.component,
            reporting_instance: &self.instance,
        })
        .ok()
    }

    /// Waits (at most `within`) until every event published so far is written.
    pub async fn flush(&self, within: Duration) {
        let Some(queues) = self.queues.get() else {
            return;
        };
        let flushed = queues.iter().map(|queue| async move {
            let (done, written) = tokio::sync::oneshot::channel();
            if queue.send(Job::Flush(done)).await.is_ok() {
                let _ = written.await;
            }
        });
        let _ = tokio::time::timeout(within, futures::future::join_all(flushed)).await;
    }

    fn queues(&self) -> &[tokio::sync::mpsc::Sender<Job>] {
        self.queues.get_or_init(|| {
            (0..WRITERS)
                .map(|_| {
                    let (sender, jobs) = tokio::sync::mpsc::channel(QUEUE);
                    let writer = Writer {
                        client: self.client.clone(),
                        component: self.component.clone(),
                        correlator: Correlator::new(CORRELATED_PER_WRITER),
                        retry_pause: self.retry_pause,
                    };
                    tokio::spawn(writer.write_in_order(jobs));
                    sender
                })
                .collect()
        })
    }
}

/// How many keys each writer's correlator remembers per step: client-go's correlator
/// keeps 4,096 (`maxLruCacheEntries`), shared here by the writers.
const CORRELATED_PER_WRITER: usize = 4096 / WRITERS;

/// A writer task's state: its Events' correlator and what it writes with.
struct Writer {
    client: kube::Client,
    component: String,
    correlator: Correlator,
    /// The pause between tries of an Event the server was not reached for.
    retry_pause: Duration,
}

impl Writer {
    /// Writes one Event at a time, in order, as the correlator decides (see
    /// [`event_correlator`](super::event_correlator)). Ends when the recorder is dropped.
    async fn write_in_order(mut self, mut jobs: tokio::sync::mpsc::Receiver<Job>) {
        while let Some(job) = jobs.recv().await {
            match job {
                Job::Record(recorded) => self.write(*recorded).await,
                Job::Flush(done) => {
                    let _ = done.send(());
                }
            }
        }
    }

    async fn write(&mut self, recorded: Recorded) {
        let facts = EventFacts {
            namespace: &recorded.namespace,
            name: &recorded.object,
            uid: recorded.uid.as_deref().unwrap_or_default(),
            event_type: recorded.event_type.as_str(),
            reason: &recorded.reason,
            message: &recorded.message,
        };
        let write = match self.correlator.correlate(&facts, std::time::Instant::now()) {
            Correlated::Skip => {
                tracing::debug!(
                    kustomization = %recorded.object,
                    reason = %recorded.reason,
                    "an event was dropped by the event spam filter"
                );
                return;
            }
            Correlated::Patch {
                name,
                count,
                first_timestamp,
                combined,
            } => Write {
                combined,
                name,
                count,
                first_timestamp,
                patch: true,
            },
            // A combined Event is a new one (client-go's aggregator names it anew).
            Correlated::Create { combined } => Write {
                combined,
                name: if combined {
                    event_name(&recorded.object)
                } else {
                    recorded.name.clone()
                },
                count: 1,
                first_timestamp: recorded.now.clone(),
                patch: false,
            },
        };
        if self.deliver(&recorded, &write).await {
            self.correlator.written(
                &facts,
                write.combined,
                &write.name,
                write.count,
                &write.first_timestamp,
            );
        }
    }

    /// Tries `write` until it is written (true; also when a try whose answer was lost wrote
    /// it), refused, or its tries are spent, as
    /// client-go's `recordToSink` (see [`super::event_retry`]); logs each failure as it does.
    async fn deliver(&self, recorded: &Recorded, write: &Write) -> bool {
        let mut tries = 0;
        loop {
            let Err(error) = self.attempt(recorded, write).await else {
                return true;
            };
            let event = || String::from_utf8(self.body(recorded, write)).unwrap_or_default();
            match after_failure(&error) {
                AfterFailure::Abandon { quiet, why } => {
                    if quiet {
                        tracing::debug!(logger = "runtime", json.event = %event(),
                            error = %error, "{}", why.message());
                    } else {
                        tracing::error!(logger = "runtime", json.event = %event(),
                            error = %error, "{}", why.message());
                    }
                    // An Event a lost answer hid was written: a repeat counts on it.
                    return why == Abandoned::Exists;
                }
                AfterFailure::Retry => {
                    tracing::error!(logger = "runtime", json.event = %event(),
                        error = %error, "{RETRYING}");
                }
            }
            tries += 1;
            let Some(pause) = pause_after(tries, self.retry_pause, fastrand::f64()) else {
                tracing::error!(logger = "runtime", json.event = %event(), "{GIVEN_UP}");
                return false;
            };
            tokio::time::sleep(pause).await;
        }
    }

    /// One try of `write`: the count patch (an Event gone meanwhile, as Events expire, is
    /// written again under its name with its count, as client-go does), or the create.
    async fn attempt(&self, recorded: &Recorded, write: &Write) -> Result<(), kube::Error> {
        if write.patch {
            let message = message_of(recorded, write.combined);
            let patch =
                json!({"count": write.count, "lastTimestamp": recorded.now, "message": message});
            match patch_event(&self.client, &recorded.namespace, &write.name, &patch).await {
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                done => return done,
            }
        }
        create(
            &self.client,
            &recorded.namespace,
            self.body(recorded, write),
        )
        .await
    }

    /// The Event `write` creates (or would, for a patch).
    fn body(&self, recorded: &Recorded, write: &Write) -> Vec<u8> {
        event_body(
            recorded,
            &self.component,
            &write.name,
            write.count,
            &write.first_timestamp,
            write.combined,
        )
    }
}

/// A correlated Event to write: a new one, or a count patch of an earlier one.
struct Write {
    combined: bool,
    name: String,
    count: i32,
    first_timestamp: String,
    /// Patch the Event `name`'s count rather than create it.
    patch: bool,
}

/// client-go's recorder names events `<object>.<unix nanoseconds in hex>`, so that listing
/// them (sorted by name, as etcd keys are) lists them in the order they happened; Flux's
/// tests and users read them that way.
fn event_name(object: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{object}.{nanos:x}")
}

/// The message of a recorded event as written: prefixed when it is combined.
fn message_of(recorded: &Recorded, combined: bool) -> std::borrow::Cow<'_, str> {
    if combined {
        format!("{COMBINED_PREFIX}{}", recorded.message).into()
    } else {
        recorded.message.as_str().into()
    }
}

/// A recorded event as an Event named `name` with `count` and `first_timestamp`; a combined
/// one as client-go's aggregator makes it: the message prefixed, and neither the annotations
/// nor the reporting controller.
fn event_body(
    recorded: &Recorded,
    component: &str,
    name: &str,
    count: i32,
    first_timestamp: &str,
    combined: bool,
) -> Vec<u8> {
    let none = BTreeMap::new();
    serde_json::to_vec(&CoreEvent {
        api_version: "v1",
        kind: "Event",
        metadata: EventObjectMeta {
            name,
            namespace: &recorded.namespace,
            annotations: if combined {
                &none
            } else {
                &recorded.annotations
            },
        },
        involved_object: &recorded.involved(),
        reason: &recorded.reason,
        message: &message_of(recorded, combined),
        type_: recorded.event_type.as_str(),
        source: EventSource { component },
        reporting_component: (!combined).then_some(component),
        first_timestamp,
        last_timestamp: &recorded.now,
        count,
    })
    .unwrap_or_default()
}

/// Creates the Event whose JSON is `body` in `namespace`. The answer is the Event as written,
/// under the name it was given: nothing of it is read.
async fn create(client: &kube::Client, namespace: &str, body: Vec<u8>) -> Result<(), kube::Error> {
    use kube::Resource;
    let mut request = kube::core::Request::new(Event::url_path(&(), Some(namespace)))
        .create(&PostParams::default(), body)
        .map_err(kube::Error::BuildRequest)?;
    request.extensions_mut().insert("create");
    client.request::<serde::de::IgnoredAny>(request).await?;
    Ok(())
}

/// Patches the Event `name` as client-go's event sink does (a strategic merge patch of its
/// count, last timestamp and message); the answer is not read.
async fn patch_event(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    patch: &serde_json::Value,
) -> Result<(), kube::Error> {
    use kube::Resource;
    let mut request = kube::core::Request::new(Event::url_path(&(), Some(namespace)))
        .patch(name, &PatchParams::default(), &Patch::Strategic(patch))
        .map_err(kube::Error::BuildRequest)?;
    request.extensions_mut().insert("patch");
    client.request::<serde::de::IgnoredAny>(request).await?;
    Ok(())
}

/// POSTs an event about the Kustomization `about` (namespace, name) to notification-controller,
/// sent again as Flux's retrying client sends it ([`forward_pause`]); giving up is logged as
/// Flux's recorder logs it.
async fn forward(http: reqwest::Client, address: String, body: Vec<u8>, about: (String, String)) {
    let mut attempt = 0;
    loop {
        let sent = http
            .post(&address)
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
            .await;
        let (forwarded, failure) = match &sent {
            Ok(response) => {
                let status = response.status();
                let retry_after = response.headers().get(http::header::RETRY_AFTER);
                let forwarded = Tried::Answered {
                    status: status.as_u16(),
                    retry_after: retry_after.and_then(|value| value.to_str().ok()),
                };
                let failure =
                    forward_failed(&forwarded).then(|| format!("unexpected HTTP status {status}"));
                (forwarded, failure)
            }
            Err(error) => (
                Tried::Unreached {
                    permanent: retryable_http::is_permanent(error),
                },
                Some(error.to_string()),
            ),
        };
        let Some(pause) = forward_pause(&forwarded, attempt, k8s_openapi::jiff::Timestamp::now())
        else {
            if let Some(failure) = failure {
                let tries = attempt + 1;
                tracing::error!(
                    name = %about.1,
                    namespace = %about.0,
                    "reconciler kind" = "Kustomization",
                    error = %retryable_http::giving_up("POST", &address, tries, Some(&failure)),
                    "unable to record event"
                );
            }
            return;
        };
        tracing::debug!(
            attempt,
            ?pause,
            "retrying the event's POST to notification-controller"
        );
        tokio::time::sleep(pause).await;
        attempt += 1;
    }
}

#[cfg(test)]
#[path = "events_tests.rs"]
mod tests;
