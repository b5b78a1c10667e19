//! Events about Kustomizations, as Flux emits them: `core/v1` Events annotated with Flux's
//! event metadata (`kustomize.toolkit.fluxcd.io/revision`, `…/originRevision`,
//! `…/commit_status`, and the Kustomization's own `event.toolkit.fluxcd.io/*` annotations),
//! and, with `--events-addr`, the same event POSTed to Flux's notification-controller (its
//! `event.Event` JSON, retried a few times) so alerts and Git commit statuses keep working
//! after an image swap. Failing to record an event is logged, never fatal.

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
    client: kube::Client,
    component: String,
    /// Events already recorded, by object, reason and message: a repeat within the
    /// aggregation window bumps the existing Event's count instead of creating another, as
    /// Kubernetes' event correlator does for Flux.
    recent: std::sync::Mutex<std::collections::HashMap<String, (String, i32, std::time::Instant)>>,
    /// The size of `recent` at which expired entries are swept next.
    sweep_at: std::sync::atomic::AtomicUsize,
    /// notification-controller's address (`--events-addr`).
    events_addr: Option<String>,
    http: reqwest::Client,
    instance: String,
}

/// How long a repeated event updates the earlier one instead of creating a new one.
const AGGREGATION_WINDOW: std::time::Duration = std::time::Duration::from_secs(10 * 60);

/// Event messages are bounded like condition messages.
const MAX_NOTE: usize = 1024 * 8;

impl Recorder {
    pub fn new(client: kube::Client, component: &str) -> Recorder {
        Recorder {
            client,
            component: component.to_string(),
            recent: Default::default(),
            sweep_at: std::sync::atomic::AtomicUsize::new(64),
            events_addr: None,
            http: reqwest::Client::builder()
                .timeout(std::time::Duration::from_secs(5))
                .build()
                .unwrap_or_default(),
            instance: std::env::var("HOSTNAME").unwrap_or_else(|_| component.to_string()),
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

    pub async fn publish(
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
        // client-go's recorder names events `<object>.<unix nanoseconds in hex>`, so that
        // listing them (sorted by name, as etcd keys are) lists them in the order they
        // happened; Flux's tests and users read them that way.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let mut event = json!({
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
        });
        if !metadata.is_empty() {
            event["metadata"]["annotations"] = json!(metadata);
        }
        if let Some(address) = &self.events_addr {
            let payload = self.forwarded(object, event_type, reason, &note, &metadata, &now);
            let body = serde_json::to_vec(&payload).unwrap_or_default();
            // Delivery must not hold up the reconciliation.
            tokio::spawn(forward(self.http.clone(), address.clone(), body));
        }
        let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        let key = format!("{namespace}/{name}/{reason}/{note}");
        let repeat = {
            let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
            // Swept when it has grown, not on every event: a fleet records thousands.
            if recent.len() >= self.sweep_at.load(std::sync::atomic::Ordering::Relaxed) {
                recent.retain(|_, (_, _, at)| at.elapsed() < AGGREGATION_WINDOW);
                self.sweep_at
                    .store(recent.len() * 2 + 64, std::sync::atomic::Ordering::Relaxed);
            }
            recent
                .get(&key)
                .filter(|(_, _, at)| at.elapsed() < AGGREGATION_WINDOW)
                .cloned()
        };
        if let Some((event_name, count, _)) = repeat {
            let patch = json!({"count": count + 1, "lastTimestamp": now});
            if api
                .patch(&event_name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .is_ok()
            {
                self.recent
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(key, (event_name, count + 1, std::time::Instant::now()));
                return;
            }
        }
        let Ok(event) = serde_json::from_value::<Event>(event) else {
            return;
        };
        match api.create(&PostParams::default(), &event).await {
            Ok(created) => {
                if let Some(event_name) = created.metadata.name {
                    self.recent
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(key, (event_name, 1, std::time::Instant::now()));
                }
            }
            Err(error) => tracing::debug!(error = %error, "recording an event failed"),
        }
    }
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
        let http = reqwest::Client::new();
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
