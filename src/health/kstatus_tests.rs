//! kstatus's rules by example, and against Flux's own kstatus over thousands of objects.

use super::*;
use serde_json::json;

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
                json!({"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2, "readyReplicas": 2, "availableReplicas": 2,
                    "conditions": [{"type": "Available", "status": "True"}]}),
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
            json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "spec": {"replicas": 1}, "status": {"replicas": 1, "readyReplicas": 1, "currentReplicas": 1, "updatedReplicas": 1, "currentRevision": "a", "updateRevision": "a"}}),
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
            json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"generation": 1}, "status": {"observedGeneration": 1, "desiredNumberScheduled": 2, "currentNumberScheduled": 2, "updatedNumberScheduled": 2, "numberAvailable": 2, "numberReady": 2}}),
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
            json!({"apiVersion": "v1", "kind": "Pod", "status": {"phase": "Running", "containerStatuses": [{"name": "app", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}}),
            Failed,
        ),
        (
            // kstatus: a Pod that ran to completion is current, failed or not.
            "pod failed",
            json!({"apiVersion": "v1", "kind": "Pod", "status": {"phase": "Failed"}}),
            Current,
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
            // kstatus: a budget is current once computed, met or not.
            "pdb unmet",
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "status": {"currentHealthy": 0, "desiredHealthy": 1}}),
            Current,
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
        (
            "pod unschedulable for long",
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"creationTimestamp": "2020-01-01T00:00:00Z"},
                "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}}),
            Failed,
        ),
        (
            "pod unschedulable just created",
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"creationTimestamp": k8s_openapi::jiff::Timestamp::now().to_string()},
                "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}}),
            InProgress,
        ),
        (
            "deployment of the extensions group",
            json!({"apiVersion": "extensions/v1beta1", "kind": "Deployment", "metadata": {"generation": 2},
                "spec": {"replicas": 2}, "status": {"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2, "readyReplicas": 1, "availableReplicas": 1}}),
            InProgress,
        ),
    ];
    let mut wrong = Vec::new();
    for (name, object, expected) in cases {
        let actual = if object.is_null() {
            compute(None)
        } else {
            compute(Some(&object))
        };
        if actual.status != expected {
            wrong.push(format!("{name}: {actual:?}, expected {expected}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A generation kstatus cannot read as an integer (some CRDs type it as a string) is its
/// error, and the object Unknown, as Flux's kstatus fails on it.
#[test]
fn a_generation_that_is_not_an_integer_is_kstatus_error() {
    let object = json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"generation": 3}, "status": {"observedGeneration": "3"}});
    let assessment = compute(Some(&object));
    assert_eq!(assessment.status, Status::Unknown);
    assert_eq!(
        assessment.message,
        "looking up status.observedGeneration from resource: .status.observedGeneration accessor error: 3 is of the type string, expected int64"
    );
}

mod go_oracle {
    use super::compute;

    /// `tests/fixtures/go/kstatus.json`: 2,580 objects of every kind kstatus knows and custom
    /// resources (spec and status fields, replica counts, generations and conditions drawn at
    /// random, some missing) as Flux's kstatus (fluxcd/cli-utils `status.Compute`) judged them.
    /// Ours gives each the same status and message (Unknown with its error where it failed).
    #[test]
    fn objects_are_judged_as_fluxs_kstatus_judges_them() {
        /// The object, kstatus's status, its message, its error.
        type Row = (
            serde_json::Value,
            Option<String>,
            Option<String>,
            Option<String>,
        );
        #[derive(serde::Deserialize)]
        struct Fixture {
            rows: Vec<Row>,
        }
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/go/kstatus.json"
        );
        let fixture: Fixture =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let mut differ = Vec::new();
        for (object, status, message, error) in &fixture.rows {
            let ours = compute(Some(object));
            // What kstatus fails to compute (an unknown Pod phase) is Unknown, with its error.
            let want = match error {
                Some(error) => ("Unknown".to_string(), error.clone()),
                None => (
                    status.clone().unwrap_or_default(),
                    message.clone().unwrap_or_default(),
                ),
            };
            let got = (ours.status.to_string(), ours.message.clone());
            if got != want {
                differ.push(format!(
                    "{object}\n  Flux {want:?} {error:?}\n  ours {got:?}"
                ));
            }
        }
        assert!(fixture.rows.len() >= 2_500);
        assert!(
            differ.is_empty(),
            "{} differ:\n{}",
            differ.len(),
            differ.join("\n")
        );
    }
}
