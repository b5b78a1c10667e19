//! Kubernetes events about Kustomizations, as Flux emits them: `core/v1` Events with the
//! revision in the `kustomize.toolkit.fluxcd.io/revision` annotation. Failing to record an
//! event is logged, never fatal.

use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, PostParams};
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
}

/// Event messages are bounded like condition messages.
const MAX_NOTE: usize = 1024 * 8;

impl Recorder {
    pub fn new(client: kube::Client, component: &str) -> Recorder {
        Recorder {
            client,
            component: component.to_string(),
        }
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
        let Ok(event) = serde_json::from_value::<Event>(event) else {
            return;
        };
        let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        if let Err(error) = api.create(&PostParams::default(), &event).await {
            tracing::debug!(error = %error, "recording an event failed");
        }
    }
}
