//! kstatus: the status of one object from its own fields, per kind, as Flux's health checks
//! compute it (the rules of `sigs.k8s.io/cli-utils/pkg/kstatus`).

use serde_json::Value;

/// The health of an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    Current,
    InProgress,
    Failed,
    Terminating,
    NotFound,
    Unknown,
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Status::Current => "Current",
            Status::InProgress => "InProgress",
            Status::Failed => "Failed",
            Status::Terminating => "Terminating",
            Status::NotFound => "NotFound",
            Status::Unknown => "Unknown",
        })
    }
}

/// A status with the reason a person would want to read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assessment {
    pub status: Status,
    pub message: String,
}

fn assess(status: Status, message: impl Into<String>) -> Assessment {
    Assessment {
        status,
        message: message.into(),
    }
}

fn int(object: &Value, pointer: &str) -> Option<i64> {
    object.pointer(pointer).and_then(Value::as_i64)
}

fn text<'a>(object: &'a Value, pointer: &str) -> Option<&'a str> {
    object.pointer(pointer).and_then(Value::as_str)
}

/// The condition of `type_`, as (status, reason, message).
pub fn condition<'a>(object: &'a Value, type_: &str) -> Option<(&'a str, &'a str, &'a str)> {
    object
        .pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))
        .map(|c| {
            let field = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("");
            (field("status"), field("reason"), field("message"))
        })
}

/// InProgress while the controller has not yet observed the latest generation.
fn generation_pending(object: &Value) -> Option<Assessment> {
    let generation = int(object, "/metadata/generation")?;
    let observed = int(object, "/status/observedGeneration")?;
    (observed < generation).then(|| {
        assess(
            Status::InProgress,
            format!("observedGeneration {observed} is behind generation {generation}"),
        )
    })
}

/// The status of `object` (a live object; `None` when it does not exist).
pub fn compute(object: Option<&Value>) -> Assessment {
    let Some(object) = object else {
        return assess(Status::NotFound, "object not found");
    };
    if object.pointer("/metadata/deletionTimestamp").is_some() {
        return assess(Status::Terminating, "object is being deleted");
    }
    let api_version = text(object, "/apiVersion").unwrap_or("");
    let group = crate::objects::api_group(api_version);
    let kind = text(object, "/kind").unwrap_or("");
    match (group, kind) {
        ("apps", "Deployment") => deployment(object),
        ("apps", "StatefulSet") => stateful_set(object),
        ("apps", "DaemonSet") => daemon_set(object),
        ("apps", "ReplicaSet") => replica_set(object),
        ("", "Pod") => pod(object),
        ("", "PersistentVolumeClaim") => phase(object, "Bound"),
        ("", "Namespace") => phase(object, "Active"),
        ("", "Service") => service(object),
        ("batch", "Job") => job(object),
        ("batch", "CronJob") => {
            generation_pending(object).unwrap_or_else(|| assess(Status::Current, ""))
        }
        ("policy", "PodDisruptionBudget") => pdb(object),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => crd(object),
        _ => generic(object),
    }
}

/// Objects with conditions: `Reconciling`/`Stalled` (abnormal-true) and `Ready`.
pub fn generic(object: &Value) -> Assessment {
    if let Some(pending) = generation_pending(object) {
        return pending;
    }
    if let Some(("True", reason, message)) = condition(object, "Stalled") {
        return assess(
            Status::Failed,
            if message.is_empty() { reason } else { message },
        );
    }
    if let Some(("True", reason, message)) = condition(object, "Reconciling") {
        return assess(
            Status::InProgress,
            if message.is_empty() { reason } else { message },
        );
    }
    match condition(object, "Ready") {
        Some(("True", _, message)) => assess(Status::Current, message),
        Some((_, reason, message)) => assess(
            Status::InProgress,
            if message.is_empty() { reason } else { message },
        ),
        None => assess(Status::Current, "resource is current"),
    }
}

fn replicas_message(kind: &str, ready: i64, wanted: i64) -> String {
    format!("{kind} is available. Replicas: {ready}/{wanted}")
}

fn deployment(object: &Value) -> Assessment {
    if let Some(pending) = generation_pending(object) {
        return pending;
    }
    if let Some((_, "ProgressDeadlineExceeded", message)) = condition(object, "Progressing") {
        return assess(
            Status::Failed,
            format!("Progress deadline exceeded: {message}"),
        );
    }
    let wanted = int(object, "/spec/replicas").unwrap_or(1);
    let replicas = int(object, "/status/replicas").unwrap_or(0);
    let updated = int(object, "/status/updatedReplicas").unwrap_or(0);
    let ready = int(object, "/status/readyReplicas").unwrap_or(0);
    let available = int(object, "/status/availableReplicas").unwrap_or(0);
    if updated < wanted {
        return assess(Status::InProgress, format!("Updated: {updated}/{wanted}"));
    }
    if replicas > updated {
        return assess(
            Status::InProgress,
            format!("Pending termination: {}", replicas - updated),
        );
    }
    if available < wanted {
        return assess(
            Status::InProgress,
            format!("Available: {available}/{wanted}"),
        );
    }
    if ready < wanted {
        return assess(Status::InProgress, format!("Ready: {ready}/{wanted}"));
    }
    assess(
        Status::Current,
        replicas_message("Deployment", ready, wanted),
    )
}

fn stateful_set(object: &Value) -> Assessment {
    if let Some(pending) = generation_pending(object) {
        return pending;
    }
    if text(object, "/spec/updateStrategy/type") == Some("OnDelete") {
        return assess(Status::Current, "StatefulSet updates on delete");
    }
    let wanted = int(object, "/spec/replicas").unwrap_or(1);
    let ready = int(object, "/status/readyReplicas").unwrap_or(0);
    let current = int(object, "/status/currentReplicas").unwrap_or(0);
    let updated = int(object, "/status/updatedReplicas").unwrap_or(0);
    if ready < wanted {
        return assess(Status::InProgress, format!("Ready: {ready}/{wanted}"));
    }
    let partition = int(object, "/spec/updateStrategy/rollingUpdate/partition").unwrap_or(0);
    if partition > 0 {
        let expected = (wanted - partition).max(0);
        if updated < expected {
            return assess(
                Status::InProgress,
                format!("Partitioned roll out: {updated}/{expected}"),
            );
        }
        return assess(
            Status::Current,
            format!("Partitioned roll out complete: {updated}/{expected}"),
        );
    }
    let current_revision = text(object, "/status/currentRevision");
    let update_revision = text(object, "/status/updateRevision");
    if current_revision != update_revision {
        return assess(
            Status::InProgress,
            format!("Waiting for updated revision: {updated}/{wanted}"),
        );
    }
    if current < wanted {
        return assess(Status::InProgress, format!("Current: {current}/{wanted}"));
    }
    assess(
        Status::Current,
        replicas_message("StatefulSet", ready, wanted),
    )
}

fn daemon_set(object: &Value) -> Assessment {
    if let Some(pending) = generation_pending(object) {
        return pending;
    }
    let Some(desired) = int(object, "/status/desiredNumberScheduled") else {
        return assess(Status::InProgress, "Missing .status.desiredNumberScheduled");
    };
    let scheduled = int(object, "/status/currentNumberScheduled").unwrap_or(0);
    let updated = int(object, "/status/updatedNumberScheduled").unwrap_or(0);
    let available = int(object, "/status/numberAvailable").unwrap_or(0);
    let ready = int(object, "/status/numberReady").unwrap_or(0);
    for (value, what) in [
        (scheduled, "Scheduled"),
        (updated, "Updated"),
        (available, "Available"),
        (ready, "Ready"),
    ] {
        if value < desired {
            return assess(Status::InProgress, format!("{what}: {value}/{desired}"));
        }
    }
    assess(
        Status::Current,
        format!("All replicas scheduled as expected. Replicas: {desired}"),
    )
}

fn replica_set(object: &Value) -> Assessment {
    if let Some(pending) = generation_pending(object) {
        return pending;
    }
    if let Some(("True", _, message)) = condition(object, "ReplicaFailure") {
        return assess(Status::InProgress, format!("Replica failure: {message}"));
    }
    let wanted = int(object, "/spec/replicas").unwrap_or(1);
    let ready = int(object, "/status/readyReplicas").unwrap_or(0);
    let available = int(object, "/status/availableReplicas").unwrap_or(0);
    if available < wanted {
        return assess(
            Status::InProgress,
            format!("Available: {available}/{wanted}"),
        );
    }
    if ready < wanted {
        return assess(Status::InProgress, format!("Ready: {ready}/{wanted}"));
    }
    assess(
        Status::Current,
        replicas_message("ReplicaSet", ready, wanted),
    )
}

fn pod(object: &Value) -> Assessment {
    match text(object, "/status/phase") {
        Some("Succeeded") => return assess(Status::Current, "Pod has completed successfully"),
        Some("Failed") => return assess(Status::Failed, "Pod has completed, but not successfully"),
        _ => {}
    }
    let crash_looping = object
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| {
            c.pointer("/state/waiting/reason").and_then(Value::as_str) == Some("CrashLoopBackOff")
        });
    if crash_looping {
        return assess(Status::Failed, "Pod has a container in CrashLoopBackOff");
    }
    match condition(object, "Ready") {
        Some(("True", _, _)) => assess(Status::Current, "Pod is Ready"),
        _ => assess(Status::InProgress, "Pod is not Ready"),
    }
}

fn phase(object: &Value, wanted: &str) -> Assessment {
    match text(object, "/status/phase") {
        Some(p) if p == wanted => assess(Status::Current, format!("phase is {wanted}")),
        Some("Terminating") => assess(Status::Terminating, "phase is Terminating"),
        Some(p) => assess(Status::InProgress, format!("phase is {p}, not {wanted}")),
        None => assess(Status::InProgress, format!("phase is not yet {wanted}")),
    }
}

fn service(object: &Value) -> Assessment {
    if text(object, "/spec/type") == Some("LoadBalancer") {
        let ingress = object
            .pointer("/status/loadBalancer/ingress")
            .and_then(Value::as_array)
            .is_some_and(|i| !i.is_empty());
        if !ingress {
            return assess(Status::InProgress, "LoadBalancer has no ingress yet");
        }
    }
    assess(Status::Current, "Service is ready")
}

fn job(object: &Value) -> Assessment {
    if let Some(pending) = generation_pending(object) {
        return pending;
    }
    if let Some(("True", _, message)) = condition(object, "Failed") {
        return assess(Status::Failed, format!("Job Failed: {message}"));
    }
    if let Some(("True", _, _)) = condition(object, "Complete") {
        let succeeded = int(object, "/status/succeeded").unwrap_or(0);
        return assess(
            Status::Current,
            format!("Job Completed. succeeded: {succeeded}"),
        );
    }
    assess(Status::InProgress, "Job in progress")
}

fn pdb(object: &Value) -> Assessment {
    if let Some(pending) = generation_pending(object) {
        return pending;
    }
    let healthy = int(object, "/status/currentHealthy").unwrap_or(0);
    let desired = int(object, "/status/desiredHealthy").unwrap_or(0);
    if healthy < desired {
        return assess(
            Status::InProgress,
            format!("Budget not met: {healthy}/{desired}"),
        );
    }
    assess(
        Status::Current,
        format!("Budget is met. Replicas: {healthy}/{desired}"),
    )
}

fn crd(object: &Value) -> Assessment {
    if let Some(("False", reason, message)) = condition(object, "NamesAccepted") {
        return assess(Status::Failed, format!("{reason}: {message}"));
    }
    match condition(object, "Established") {
        Some(("True", _, _)) => assess(Status::Current, "CRD is established"),
        _ => assess(Status::InProgress, "CRD is not established"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn status_of(object: Value) -> Status {
        compute(Some(&object)).status
    }

    #[test]
    fn kstatus_table() {
        use Status::*;
        let deployment = |spec_replicas: i64, status: Value| {
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"generation": 2}, "spec": {"replicas": spec_replicas}, "status": status})
        };
        let cases: Vec<(&str, Value, Status)> = vec![
            ("missing", Value::Null, NotFound),
            (
                "deleting",
                json!({"kind": "ConfigMap", "metadata": {"deletionTimestamp": "x"}}),
                Terminating,
            ),
            (
                "deployment ready",
                deployment(
                    2,
                    json!({"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2, "readyReplicas": 2, "availableReplicas": 2}),
                ),
                Current,
            ),
            (
                "deployment old generation",
                deployment(
                    2,
                    json!({"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2, "readyReplicas": 2, "availableReplicas": 2}),
                ),
                InProgress,
            ),
            (
                "deployment rolling",
                deployment(
                    2,
                    json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 2, "readyReplicas": 2, "availableReplicas": 2}),
                ),
                InProgress,
            ),
            (
                "deployment unavailable",
                deployment(
                    2,
                    json!({"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2, "readyReplicas": 1, "availableReplicas": 1}),
                ),
                InProgress,
            ),
            (
                "deployment deadline",
                deployment(
                    2,
                    json!({"observedGeneration": 2, "conditions": [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}]}),
                ),
                Failed,
            ),
            (
                "statefulset ready",
                json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "spec": {"replicas": 1}, "status": {"readyReplicas": 1, "currentReplicas": 1, "updatedReplicas": 1, "currentRevision": "a", "updateRevision": "a"}}),
                Current,
            ),
            (
                "statefulset new revision",
                json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "spec": {"replicas": 1}, "status": {"readyReplicas": 1, "currentReplicas": 1, "updatedReplicas": 0, "currentRevision": "a", "updateRevision": "b"}}),
                InProgress,
            ),
            (
                "statefulset on delete",
                json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "spec": {"updateStrategy": {"type": "OnDelete"}}}),
                Current,
            ),
            (
                "daemonset ready",
                json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "status": {"desiredNumberScheduled": 2, "currentNumberScheduled": 2, "updatedNumberScheduled": 2, "numberAvailable": 2, "numberReady": 2}}),
                Current,
            ),
            (
                "daemonset unknown",
                json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "status": {}}),
                InProgress,
            ),
            (
                "replicaset short",
                json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "spec": {"replicas": 2}, "status": {"readyReplicas": 1, "availableReplicas": 1}}),
                InProgress,
            ),
            (
                "pod running ready",
                json!({"apiVersion": "v1", "kind": "Pod", "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}),
                Current,
            ),
            (
                "pod crashloop",
                json!({"apiVersion": "v1", "kind": "Pod", "status": {"phase": "Running", "containerStatuses": [{"state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}}),
                Failed,
            ),
            (
                "pod failed",
                json!({"apiVersion": "v1", "kind": "Pod", "status": {"phase": "Failed"}}),
                Failed,
            ),
            (
                "pvc pending",
                json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "status": {"phase": "Pending"}}),
                InProgress,
            ),
            (
                "pvc bound",
                json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "status": {"phase": "Bound"}}),
                Current,
            ),
            (
                "service cluster ip",
                json!({"apiVersion": "v1", "kind": "Service", "spec": {"type": "ClusterIP"}}),
                Current,
            ),
            (
                "service lb pending",
                json!({"apiVersion": "v1", "kind": "Service", "spec": {"type": "LoadBalancer"}, "status": {"loadBalancer": {}}}),
                InProgress,
            ),
            (
                "job complete",
                json!({"apiVersion": "batch/v1", "kind": "Job", "status": {"conditions": [{"type": "Complete", "status": "True"}]}}),
                Current,
            ),
            (
                "job failed",
                json!({"apiVersion": "batch/v1", "kind": "Job", "status": {"conditions": [{"type": "Failed", "status": "True", "message": "BackoffLimitExceeded"}]}}),
                Failed,
            ),
            (
                "job running",
                json!({"apiVersion": "batch/v1", "kind": "Job", "status": {"active": 1}}),
                InProgress,
            ),
            (
                "cronjob",
                json!({"apiVersion": "batch/v1", "kind": "CronJob"}),
                Current,
            ),
            (
                "pdb met",
                json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "status": {"currentHealthy": 2, "desiredHealthy": 1}}),
                Current,
            ),
            (
                "pdb unmet",
                json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "status": {"currentHealthy": 0, "desiredHealthy": 1}}),
                InProgress,
            ),
            (
                "crd established",
                json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "status": {"conditions": [{"type": "Established", "status": "True"}]}}),
                Current,
            ),
            (
                "crd names conflict",
                json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "status": {"conditions": [{"type": "NamesAccepted", "status": "False"}]}}),
                Failed,
            ),
            (
                "namespace active",
                json!({"apiVersion": "v1", "kind": "Namespace", "status": {"phase": "Active"}}),
                Current,
            ),
            (
                "generic ready",
                json!({"apiVersion": "x/v1", "kind": "K", "status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
                Current,
            ),
            (
                "generic not ready",
                json!({"apiVersion": "x/v1", "kind": "K", "status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
                InProgress,
            ),
            (
                "generic stalled",
                json!({"apiVersion": "x/v1", "kind": "K", "status": {"conditions": [{"type": "Stalled", "status": "True"}]}}),
                Failed,
            ),
            (
                "generic reconciling",
                json!({"apiVersion": "x/v1", "kind": "K", "status": {"conditions": [{"type": "Reconciling", "status": "True"}]}}),
                InProgress,
            ),
            (
                "generic generation",
                json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"generation": 3}, "status": {"observedGeneration": 2, "conditions": [{"type": "Ready", "status": "True"}]}}),
                InProgress,
            ),
            (
                "generic no status",
                json!({"apiVersion": "v1", "kind": "ConfigMap"}),
                Current,
            ),
        ];
        for (name, object, expected) in cases {
            let actual = if object.is_null() {
                compute(None).status
            } else {
                status_of(object)
            };
            assert_eq!(actual, expected, "{name}");
        }
    }
}
