//! Events about Kustomizations, as Flux emits them: `core/v1` Events with the revision in the
//! `kustomize.toolkit.fluxcd.io/revision` annotation, and, with `--events-addr`, the same
//! event POSTed to Flux's notification-controller (its `event.Event` JSON) so alerts keep
//! working after an image swap. Failing to record an event is logged, never fatal.

use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use super::reconcile::REVISION_ANNOTATION;
use crate::api::Kustomization;

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
        revision: Option<&str>,
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
        if let Some(revision) = revision {
            event["metadata"] = json!({"revision": revision});
        }
        event
    }

    pub async fn publish(
        &self,
        object: &Kustomization,
        event_type: EventType,
        reason: &str,
        note: &str,
        revision: Option<&str>,
    ) {
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
        let mut event = json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": format!("{name}."), "namespace": namespace},
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
        if let Some(revision) = revision {
            event["metadata"]["annotations"] = json!({REVISION_ANNOTATION: revision});
        }
        if let Some(address) = &self.events_addr {
            let payload = self.forwarded(object, event_type, reason, &note, revision, &now);
            let request = self
                .http
                .post(address)
                .header("content-type", "application/json")
                .body(serde_json::to_vec(&payload).unwrap_or_default());
            // Delivery must not hold up the reconciliation.
            tokio::spawn(async move {
                if let Err(error) = request.send().await.and_then(|r| r.error_for_status()) {
                    tracing::debug!(error = %error, "forwarding an event to notification-controller");
                }
            });
        }
        let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        let key = format!("{namespace}/{name}/{reason}/{note}");
        let repeat = {
            let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
            recent.retain(|_, (_, _, at)| at.elapsed() < AGGREGATION_WINDOW);
            recent.get(&key).cloned()
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
