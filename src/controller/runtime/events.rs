//! Events about Kustomizations, as Flux emits them: `core/v1` Events annotated with Flux's
//! event metadata (`kustomize.toolkit.fluxcd.io/revision`, `…/originRevision`,
//! `…/commit_status`, and the Kustomization's own `event.toolkit.fluxcd.io/*` annotations),
//! and, with `--events-addr`, the same event POSTed to Flux's notification-controller (its
//! `event.Event` JSON, retried a few times) so alerts and Git commit statuses keep working
//! after an image swap. Failing to record an event is logged, never fatal.
//!
//! As client-go's event broadcaster does for Flux, `publish` only queues: writer tasks write
//! the Events with a client of its own (its own rate limiter), so a fleet's Events never hold
//! up, or queue behind, the requests that make Kustomizations Ready. Each Kustomization's
//! Events go to one writer, in the order they were published; a few writers share the
//! Kustomizations, so one slow answer does not hold up everyone's Events.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::api::Kustomization;

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

/// How often a POST to notification-controller is tried, and the first pause between tries
/// (doubled each time), as Flux's retrying client.
const FORWARD_ATTEMPTS: u32 = 5;
const FORWARD_FIRST_PAUSE: Duration = Duration::from_secs(1);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
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
}

/// How many tasks write Events.
const WRITERS: usize = 4;

/// How many Events may wait for each writer; more are dropped (logged), as client-go's
/// broadcaster drops them when its queue of 1,000 is full.
const QUEUE: usize = 256;

/// How long a repeated event updates the earlier one instead of creating a new one.
const AGGREGATION_WINDOW: std::time::Duration = std::time::Duration::from_secs(10 * 60);

/// Event messages are bounded like condition messages.
const MAX_NOTE: usize = 1024 * 8;

/// What the writing task is asked to do, in order.
enum Job {
    Record(Box<Recorded>),
    /// Answered once every Event queued before it is written (or has failed).
    Flush(tokio::sync::oneshot::Sender<()>),
}

struct Recorded {
    namespace: String,
    /// Object, reason and message: what makes two Events repeats of one another.
    key: String,
    /// The Event's name and the Event as JSON, the body of its create.
    name: String,
    event: Vec<u8>,
    now: String,
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
        }
    }

    /// Forwards every event to notification-controller at `address` too.
    pub fn with_events_addr(mut self, address: Option<String>) -> Recorder {
        self.events_addr = address.filter(|a| !a.is_empty());
        self
    }

    /// The event as notification-controller receives it.
    fn forwarded(
        &self,
        object: &Kustomization,
        event_type: EventType,
        reason: &str,
        note: &str,
        metadata: &BTreeMap<String, String>,
        now: &str,
    ) -> serde_json::Value {
        let mut event = json!({
            "involvedObject": {
                "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                "namespace": object.metadata.namespace, "name": object.metadata.name,
                "uid": object.metadata.uid, "resourceVersion": object.metadata.resource_version,
            },
            "severity": match event_type { EventType::Normal => "info", EventType::Warning => "error" },
            "timestamp": now,
            "message": note,
            "reason": reason,
            "reportingController": self.component,
            "reportingInstance": self.instance,
        });
        if !metadata.is_empty() {
            event["metadata"] = json!(metadata);
        }
        event
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
        let metadata = meta.annotations(object);
        let namespace = object.metadata.namespace.clone().unwrap_or_default();
        let name = object.metadata.name.clone().unwrap_or_default();
        let mut note = note.to_string();
        if note.len() > MAX_NOTE {
            let mut end = MAX_NOTE;
            while !note.is_char_boundary(end) {
                end -= 1;
            }
            note.truncate(end);
        }
        let now = k8s_openapi::jiff::Timestamp::now()
            .strftime("%Y-%m-%dT%H:%M:%SZ")
            .to_string();
        let mut event = self.event(object, event_type, reason, &note, &now);
        if !metadata.is_empty() {
            event["metadata"]["annotations"] = json!(metadata);
        }
        if let Some(address) = &self.events_addr {
            let payload = self.forwarded(object, event_type, reason, &note, &metadata, &now);
            let body = serde_json::to_vec(&payload).unwrap_or_default();
            tokio::spawn(forward(self.http.clone(), address.clone(), body));
        }
        let event_name = event["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let Ok(event) = serde_json::to_vec(&event) else {
            return;
        };
        let key = format!("{namespace}/{name}/{reason}/{note}");
        let job = Job::Record(Box::new(Recorded {
            namespace,
            key,
            name: event_name,
            event,
            now,
        }));
        let queues = self.queues();
        // One writer per Kustomization keeps its Events in the order they were published.
        let writer = {
            use std::hash::{Hash, Hasher};
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            (
                object.metadata.namespace.as_deref(),
                object.metadata.name.as_deref(),
            )
                .hash(&mut hasher);
            hasher.finish() as usize % queues.len()
        };
        if let Err(tokio::sync::mpsc::error::TrySendError::Full(_)) = queues[writer].try_send(job) {
            tracing::error!(
                kustomization = %name,
                reason,
                "{QUEUE} events are waiting for this one's writer; it is dropped"
            );
        }
    }

    /// The core/v1 Event about `object`, as client-go's recorder makes it.
    fn event(
        &self,
        object: &Kustomization,
        event_type: EventType,
        reason: &str,
        note: &str,
        now: &str,
    ) -> serde_json::Value {
        let namespace = object.metadata.namespace.as_deref().unwrap_or_default();
        let name = object.metadata.name.as_deref().unwrap_or_default();
        // client-go's recorder names events `<object>.<unix nanoseconds in hex>`, so that
        // listing them (sorted by name, as etcd keys are) lists them in the order they
        // happened; Flux's tests and users read them that way.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": format!("{name}.{nanos:x}"), "namespace": namespace},
            "involvedObject": {
                "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                "name": name, "namespace": namespace,
                "uid": object.metadata.uid, "resourceVersion": object.metadata.resource_version,
            },
            "reason": reason,
            "message": note,
            "type": match event_type { EventType::Normal => "Normal", EventType::Warning => "Warning" },
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "firstTimestamp": now, "lastTimestamp": now, "count": 1,
        })
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
                    tokio::spawn(write_in_order(self.client.clone(), jobs));
                    sender
                })
                .collect()
        })
    }
}

/// A writer task: one Event at a time, in order; a repeat within the aggregation window
/// bumps the earlier Event's count instead of creating another, as Kubernetes' event
/// correlator does for Flux. Ends when the recorder is dropped.
async fn write_in_order(client: kube::Client, mut jobs: tokio::sync::mpsc::Receiver<Job>) {
    let mut recent = Recent::default();
    while let Some(job) = jobs.recv().await {
        match job {
            Job::Record(recorded) => recent.write(&client, *recorded).await,
            Job::Flush(done) => {
                let _ = done.send(());
            }
        }
    }
}

/// How many recent Events each writer remembers for aggregation: client-go's correlator
/// keeps 4,096 (`maxLruCacheEntries`), shared here by the writers.
const RECENT_PER_WRITER: usize = 4096 / WRITERS;

/// Keeps the newer half of `written` once it holds `limit` Events or more, as an LRU cache
/// forgets its least recently used: a repeat of a forgotten one is a new Event.
fn forget_oldest(
    written: &mut std::collections::HashMap<String, (String, i32, std::time::Instant)>,
    limit: usize,
) {
    if written.len() < limit {
        return;
    }
    let keep = limit / 2;
    if keep == 0 {
        written.clear();
        return;
    }
    let mut times: Vec<std::time::Instant> = written.values().map(|(_, _, at)| *at).collect();
    let cut = times.len() - keep;
    let (_, oldest_kept, _) = times.select_nth_unstable(cut);
    let oldest_kept = *oldest_kept;
    written.retain(|_, (_, _, at)| *at >= oldest_kept);
}

/// Events written lately: by key, the Event's name, its count and when it was last written.
#[derive(Default)]
struct Recent {
    written: std::collections::HashMap<String, (String, i32, std::time::Instant)>,
    /// The size of `written` at which expired entries are swept next.
    sweep_at: usize,
}

impl Recent {
    async fn write(&mut self, client: &kube::Client, recorded: Recorded) {
        let Recorded {
            namespace,
            key,
            name,
            event,
            now,
        } = recorded;
        let api: Api<Event> = Api::namespaced(client.clone(), &namespace);
        // Swept when it has grown, not on every event: a fleet records thousands.
        if self.written.len() >= self.sweep_at.max(64) {
            self.written
                .retain(|_, (_, _, at)| at.elapsed() < AGGREGATION_WINDOW);
            forget_oldest(&mut self.written, RECENT_PER_WRITER);
            self.sweep_at = (self.written.len() * 2 + 64).min(RECENT_PER_WRITER);
        }
        let repeat = self
            .written
            .get(&key)
            .filter(|(_, _, at)| at.elapsed() < AGGREGATION_WINDOW)
            .cloned();
        if let Some((event_name, count, _)) = repeat {
            let patch = json!({"count": count + 1, "lastTimestamp": now});
            if api
                .patch(&event_name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .is_ok()
            {
                self.written
                    .insert(key, (event_name, count + 1, std::time::Instant::now()));
                return;
            }
        }
        match create(client, &namespace, event).await {
            Ok(()) => {
                self.written
                    .insert(key, (name, 1, std::time::Instant::now()));
            }
            Err(error) => tracing::debug!(error = %error, "recording an event failed"),
        }
    }
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

/// POSTs an event to notification-controller, retrying connection failures and server errors
/// a bounded number of times.
async fn forward(http: reqwest::Client, address: String, body: Vec<u8>) {
    let mut pause = FORWARD_FIRST_PAUSE;
    for attempt in 1..=FORWARD_ATTEMPTS {
        let sent = http
            .post(&address)
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
            .await;
        let retry = match &sent {
            Ok(response) if response.status().is_server_error() => true,
            Ok(response) => {
                if !response.status().is_success() {
                    tracing::debug!(status = %response.status(), "notification-controller refused an event");
                }
                false
            }
            Err(error) => {
                tracing::debug!(error = %error, attempt, "forwarding an event to notification-controller");
                true
            }
        };
        if !retry || attempt == FORWARD_ATTEMPTS {
            return;
        }
        tokio::time::sleep(pause).await;
        pause *= 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_correlator_forgets_its_oldest_events_beyond_client_gos_bound() {
        let start = std::time::Instant::now();
        let mut written: std::collections::HashMap<String, (String, i32, std::time::Instant)> = (0
            ..10u64)
            .map(|i| {
                let at = start + Duration::from_secs(i);
                (format!("key-{i}"), (format!("event-{i}"), 1, at))
            })
            .collect();
        forget_oldest(&mut written, 11);
        assert_eq!(written.len(), 10, "under the bound nothing goes");
        forget_oldest(&mut written, 10);
        let mut one = written.clone();
        forget_oldest(&mut one, 1);
        assert!(
            one.is_empty(),
            "a bound of one keeps nothing, and does not panic"
        );
        let mut kept: Vec<&str> = written.keys().map(String::as_str).collect();
        kept.sort();
        assert_eq!(kept, ["key-5", "key-6", "key-7", "key-8", "key-9"]);
        assert_eq!(RECENT_PER_WRITER * WRITERS, 4096);
    }

    #[test]
    fn metadata_is_prefixed_with_the_api_group_and_carries_event_annotations() {
        let object: Kustomization = serde_json::from_value(json!({
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": "apps", "namespace": "flux-system", "annotations": {
                "event.toolkit.fluxcd.io/cluster": "prod", "other.io/x": "no"}},
            "spec": {"interval": "5m", "prune": true,
                "sourceRef": {"kind": "GitRepository", "name": "r"}},
        }))
        .unwrap();
        let meta = EventMeta {
            commit_status: true,
            ..EventMeta::of(Some("main@sha1:abc"), Some("v1@sha1:def"))
        };
        let expected: BTreeMap<String, String> = [
            ("event.toolkit.fluxcd.io/cluster", "prod"),
            ("kustomize.toolkit.fluxcd.io/commit_status", "update"),
            ("kustomize.toolkit.fluxcd.io/originRevision", "v1@sha1:def"),
            ("kustomize.toolkit.fluxcd.io/revision", "main@sha1:abc"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(meta.annotations(&object), expected);
        assert_eq!(
            EventMeta::default().annotations(&object).len(),
            1,
            "only the object's event annotations"
        );
    }

    fn kustomization(name: &str) -> Kustomization {
        serde_json::from_value(json!({
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": name, "namespace": "apps", "uid": "u-1"},
            "spec": {"interval": "5m", "prune": true,
                "sourceRef": {"kind": "GitRepository", "name": "r"}},
        }))
        .unwrap()
    }

    /// A client whose API server answers nothing until `open` is sent, then records each
    /// request (method, path and Event reason or patched count) and echoes its body.
    fn gated_client() -> (
        kube::Client,
        tokio::sync::watch::Sender<bool>,
        std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    ) {
        use http_body_util::BodyExt;
        let (open, gate) = tokio::sync::watch::channel(false);
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = seen.clone();
        let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
            let mut gate = gate.clone();
            let log = log.clone();
            async move {
                let _ = gate.wait_for(|open| *open).await;
                let method = request.method().to_string();
                let path = request.uri().path().to_string();
                let body = request.into_body().collect().await?.to_bytes();
                let mut sent: serde_json::Value = serde_json::from_slice(&body)?;
                let what = sent["reason"]
                    .as_str()
                    .map_or_else(|| format!("count {}", sent["count"]), str::to_string);
                log.lock().unwrap().push(format!("{method} {path} {what}"));
                if method == "PATCH" {
                    sent = json!({"apiVersion": "v1", "kind": "Event",
                        "metadata": {"name": path.rsplit('/').next()},
                        "involvedObject": {}});
                }
                let reply = http::Response::builder()
                    .status(if method == "POST" { 201 } else { 200 })
                    .header("content-type", "application/json")
                    .body(http_body_util::Full::<hyper::body::Bytes>::from(
                        serde_json::to_vec(&sent)?,
                    ))?;
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>(reply)
            }
        });
        (kube::Client::new(service, "default"), open, seen)
    }

    /// As client-go's recorder for Flux: publishing does not wait for the API server, a
    /// Kustomization's Events are written in the order they were published, and a repeat of
    /// the same event bumps the first one's count.
    #[tokio::test]
    async fn events_are_queued_written_in_order_and_repeats_counted() {
        let (client, open, seen) = gated_client();
        let recorder = Recorder::new(client, "kustomize-controller");
        let object = kustomization("apps");
        let meta = EventMeta::default();
        recorder.publish(&object, EventType::Normal, "Progressing", "created", &meta);
        recorder.publish(
            &object,
            EventType::Warning,
            "HealthCheckFailed",
            "late",
            &meta,
        );
        recorder.publish(&object, EventType::Normal, "Progressing", "created", &meta);
        let other = kustomization("web");
        recorder.publish(&other, EventType::Normal, "Other", "web's", &meta);
        // Publishing returned; the gated server has answered nothing yet.
        assert!(
            seen.lock().unwrap().is_empty(),
            "publish returned while the API server had answered nothing"
        );
        open.send(true).unwrap();
        recorder.flush(Duration::from_secs(5)).await;
        let all = seen.lock().unwrap().clone();
        assert_eq!(all.len(), 4, "flushed every writer: {all:?}");
        let seen: Vec<_> = all.into_iter().filter(|s| !s.contains("Other")).collect();
        assert_eq!(seen[0], "POST /api/v1/namespaces/apps/events Progressing");
        assert_eq!(
            seen[1],
            "POST /api/v1/namespaces/apps/events HealthCheckFailed"
        );
        assert!(
            seen[2].starts_with("PATCH /api/v1/namespaces/apps/events/apps.")
                && seen[2].ends_with("count 2"),
            "{seen:?}"
        );
    }

    /// notification-controller answering 503 (restarting) gets the event again; a 4xx is
    /// not retried.
    #[tokio::test]
    async fn forwarding_retries_server_errors_and_stops_on_success() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = format!("http://{}/", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            let mut answered = Vec::new();
            let statuses = [
                "503 Service Unavailable",
                "202 Accepted",
                "400 Bad Request",
                "500 retried a 400",
            ];
            for status in statuses {
                let Ok(Ok((mut stream, _))) =
                    tokio::time::timeout(Duration::from_secs(3), listener.accept()).await
                else {
                    break;
                };
                let mut buffer = vec![0u8; 4096];
                let _ = stream.read(&mut buffer).await;
                let reply =
                    format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
                let _ = stream.write_all(reply.as_bytes()).await;
                answered.push(status);
            }
            answered
        });
        let http = crate::tls::client_builder().build().unwrap();
        forward(http.clone(), address.clone(), b"{}".to_vec()).await;
        forward(http, address, b"{}".to_vec()).await;
        let answered = server.await.unwrap();
        assert_eq!(
            answered,
            ["503 Service Unavailable", "202 Accepted", "400 Bad Request"],
            "one retry after the 503, none after the 400"
        );
    }
}
