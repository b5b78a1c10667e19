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

/// kstatus's `GetIntField`: an integer at `pointer`, else `default` (a float or a string is
/// not an integer).
fn int(object: &Value, pointer: &str, default: i64) -> i64 {
    object
        .pointer(pointer)
        .and_then(Value::as_i64)
        .unwrap_or(default)
}

/// kstatus's `GetStringField`.
fn text<'a>(object: &'a Value, pointer: &str, default: &'a str) -> &'a str {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or(default)
}

/// One condition as kstatus reads it: type, status, reason, message.
struct Condition<'a> {
    type_: &'a str,
    status: &'a str,
    reason: &'a str,
    message: &'a str,
}

/// `status.conditions` in order, as kstatus converts them (absent fields empty); an error
/// where they are not a list of objects of strings, as its conversion refuses them.
fn conditions(object: &Value) -> Result<Vec<Condition<'_>>, String> {
    let Some(list) = object.pointer("/status/conditions") else {
        return Ok(Vec::new());
    };
    if list.is_null() {
        return Ok(Vec::new());
    }
    let refused = || "status.conditions is not a list of conditions".to_string();
    let list = list.as_array().ok_or_else(refused)?;
    list.iter()
        .map(|condition| {
            let condition = condition.as_object().ok_or_else(refused)?;
            let field = |name: &str| match condition.get(name) {
                None | Some(Value::Null) => Ok(""),
                Some(Value::String(text)) => Ok(text.as_str()),
                Some(_) => Err(refused()),
            };
            Ok(Condition {
                type_: field("type")?,
                status: field("status")?,
                reason: field("reason")?,
                message: field("message")?,
            })
        })
        .collect()
}

fn current(message: impl Into<String>) -> Assessment {
    assess(Status::Current, message)
}

fn in_progress(message: impl Into<String>) -> Assessment {
    assess(Status::InProgress, message)
}

fn failed(message: impl Into<String>) -> Assessment {
    assess(Status::Failed, message)
}

/// The status of `object` (a live object; `None` when it does not exist), as kstatus's
/// `Compute` (fluxcd/cli-utils): what every object shares (deletion, an unobserved
/// generation, `Reconciling`/`Stalled`), then the rules of its kind, else its `Ready`
/// condition, else current. What kstatus fails to compute is Unknown, with its error.
pub fn compute(object: Option<&Value>) -> Assessment {
    let Some(object) = object else {
        return assess(Status::NotFound, "object not found");
    };
    let computed = generic_properties(object).and_then(|found| match found {
        Some(assessment) => Ok(assessment),
        None => match kind_rules(object) {
            Some(rules) => rules(object),
            None => Ok(ready_condition(object)?.unwrap_or_else(|| current("Resource is current"))),
        },
    });
    computed.unwrap_or_else(|error| assess(Status::Unknown, error))
}

type KindRules = fn(&Value) -> Result<Assessment, String>;

/// kstatus's rules by `group/kind` (`kind` in the core group).
fn kind_rules(object: &Value) -> Option<KindRules> {
    let api_version = text(object, "/apiVersion", "");
    let group = crate::objects::api_group(api_version);
    let kind = text(object, "/kind", "");
    Some(match (group, kind) {
        ("", "Service") => service,
        ("", "Pod") => pod,
        ("", "Secret" | "ConfigMap") | ("batch", "CronJob") => {
            |_| Ok(current("Resource is always ready"))
        }
        ("", "PersistentVolumeClaim") => pvc,
        ("apps", "StatefulSet") => stateful_set,
        ("apps" | "extensions", "DaemonSet") => daemon_set,
        ("apps" | "extensions", "Deployment") => deployment,
        ("apps" | "extensions", "ReplicaSet") => replica_set,
        ("policy", "PodDisruptionBudget") => {
            |_| Ok(current("AllowedDisruptions has been computed."))
        }
        ("batch", "Job") => job,
        ("apiextensions.k8s.io", "CustomResourceDefinition") => crd,
        _ => return None,
    })
}

/// A field of the type kstatus reads it as (`NestedInt64`, `NestedString`): none when absent,
/// an error in its words when of another type (some CRDs type a generation as a string).
fn nested<'a, T>(
    object: &'a Value,
    field: &str,
    read: impl Fn(&'a Value) -> Option<T>,
    expected: &str,
) -> Result<Option<T>, String> {
    let pointer = format!("/{}", field.replace('.', "/"));
    let Some(value) = object.pointer(&pointer) else {
        return Ok(None);
    };
    read(value).map(Some).ok_or_else(|| {
        let (shown, go_type) = match value {
            Value::Null => ("<nil>".to_string(), "<nil>"),
            Value::String(text) => (text.clone(), "string"),
            Value::Bool(b) => (b.to_string(), "bool"),
            Value::Number(n) => (n.to_string(), "float64"),
            Value::Array(_) => (value.to_string(), "[]interface {}"),
            Value::Object(_) => (value.to_string(), "map[string]interface {}"),
        };
        format!(
            "looking up {field} from resource: .{field} accessor error: {shown} is of the type {go_type}, expected {expected}"
        )
    })
}

fn generation(object: &Value) -> Result<Option<i64>, String> {
    nested(object, "metadata.generation", Value::as_i64, "int64")
}

fn observed_generation(object: &Value) -> Result<Option<i64>, String> {
    nested(object, "status.observedGeneration", Value::as_i64, "int64")
}

/// Deletion, a generation the controller has not observed, `Reconciling` or `Stalled` true.
fn generic_properties(object: &Value) -> Result<Option<Assessment>, String> {
    let deletion = nested(
        object,
        "metadata.deletionTimestamp",
        Value::as_str,
        "string",
    )?;
    if deletion.is_some_and(|t| !t.is_empty()) {
        return Ok(Some(assess(
            Status::Terminating,
            "Resource scheduled for deletion",
        )));
    }
    let kind = text(object, "/kind", "");
    if let Some(generation) = generation(object)?
        && let Some(observed) = observed_generation(object)?
        && observed != generation
    {
        return Ok(Some(in_progress(format!(
            "{kind} generation is {generation}, but latest observed generation is {observed}"
        ))));
    }
    for condition in conditions(object)? {
        if condition.type_ == "Reconciling" && condition.status == "True" {
            return Ok(Some(in_progress(condition.message)));
        }
        if condition.type_ == "Stalled" && condition.status == "True" {
            return Ok(Some(failed(condition.message)));
        }
    }
    Ok(None)
}

/// The first `Ready` condition that is True, False or Unknown.
fn ready_condition(object: &Value) -> Result<Option<Assessment>, String> {
    for condition in conditions(object)? {
        if condition.type_ != "Ready" {
            continue;
        }
        match condition.status {
            "True" => return Ok(Some(current("Resource is Ready"))),
            "False" | "Unknown" => return Ok(Some(in_progress(condition.message))),
            _ => {}
        }
    }
    Ok(None)
}

/// One of kstatus's replica checks, in the order its kind makes them.
enum Count<'a> {
    /// `have` below `want`: "<what>: have/want".
    Below { what: &'a str, have: i64, want: i64 },
    /// More replicas than wanted: "Pending termination: n".
    Extra { have: i64, want: i64 },
}

fn below(what: &str, have: i64, want: i64) -> Count<'_> {
    Count::Below { what, have, want }
}

fn extra<'a>(have: i64, want: i64) -> Count<'a> {
    Count::Extra { have, want }
}

/// The first check that fails, in progress with kstatus's words.
fn first_shortfall(counts: &[Count]) -> Option<Assessment> {
    counts.iter().find_map(|count| match *count {
        Count::Below { what, have, want } if want > have => {
            Some(in_progress(format!("{what}: {have}/{want}")))
        }
        Count::Extra { have, want } if have > want => Some(in_progress(format!(
            "Pending termination: {}",
            have.wrapping_sub(want)
        ))),
        _ => None,
    })
}

fn stateful_set(object: &Value) -> Result<Assessment, String> {
    if text(object, "/spec/updateStrategy/type", "") == "OnDelete" {
        return Ok(current("StatefulSet is using the ondelete update strategy"));
    }
    let wanted = int(object, "/spec/replicas", 1);
    let ready = int(object, "/status/readyReplicas", 0);
    let current_replicas = int(object, "/status/currentReplicas", 0);
    let updated = int(object, "/status/updatedReplicas", 0);
    let replicas = int(object, "/status/replicas", 0);
    let partition = int(object, "/spec/updateStrategy/rollingUpdate/partition", -1);
    if let Some(shortfall) = first_shortfall(&[
        below("Replicas", replicas, wanted),
        below("Ready", ready, wanted),
        extra(replicas, wanted),
    ]) {
        return Ok(shortfall);
    }
    if partition != -1 {
        if updated < wanted.wrapping_sub(partition) {
            return Ok(in_progress(format!(
                "updated: {updated}/{}",
                wanted.wrapping_sub(partition)
            )));
        }
        return Ok(current(format!(
            "Partition rollout complete. updated: {updated}"
        )));
    }
    if wanted > current_replicas {
        return Ok(in_progress(format!("current: {current_replicas}/{wanted}")));
    }
    if text(object, "/status/currentRevision", "") != text(object, "/status/updateRevision", "") {
        return Ok(in_progress("Waiting for updated revision to match current"));
    }
    Ok(current(format!(
        "All replicas scheduled as expected. Replicas: {replicas}"
    )))
}

fn deployment(object: &Value) -> Result<Assessment, String> {
    // Without a deadline the controller never reports progress: it counts as progressing.
    let mut progressing = object
        .pointer("/spec/progressDeadlineSeconds")
        .and_then(Value::as_i64)
        .is_none_or(|seconds| seconds == i64::from(i32::MAX));
    let mut available = false;
    for condition in conditions(object)? {
        match condition.type_ {
            "Progressing" => {
                if condition.reason == "ProgressDeadlineExceeded" {
                    return Ok(failed("Progress deadline exceeded"));
                }
                if condition.status == "True" && condition.reason == "NewReplicaSetAvailable" {
                    progressing = true;
                }
            }
            "Available" if condition.status == "True" => available = true,
            _ => {}
        }
    }
    let wanted = int(object, "/spec/replicas", 1);
    let replicas = int(object, "/status/replicas", 0);
    let updated = int(object, "/status/updatedReplicas", 0);
    let ready = int(object, "/status/readyReplicas", 0);
    let available_replicas = int(object, "/status/availableReplicas", 0);
    if let Some(shortfall) = first_shortfall(&[
        below("Replicas", replicas, wanted),
        below("Updated", updated, wanted),
        extra(replicas, wanted),
        below("Available", available_replicas, updated),
        below("Ready", ready, wanted),
    ]) {
        return Ok(shortfall);
    }
    if !progressing {
        return Ok(in_progress("ReplicaSet not Available"));
    }
    if !available {
        return Ok(in_progress("Deployment not Available"));
    }
    Ok(current(format!(
        "Deployment is available. Replicas: {replicas}"
    )))
}

fn replica_set(object: &Value) -> Result<Assessment, String> {
    if conditions(object)?
        .iter()
        .any(|c| c.type_ == "ReplicaFailure" && c.status == "True")
    {
        return Ok(in_progress("Replica Failure condition. Check Pods"));
    }
    let wanted = int(object, "/spec/replicas", 1);
    let replicas = int(object, "/status/replicas", 0);
    let ready = int(object, "/status/readyReplicas", 0);
    let available = int(object, "/status/availableReplicas", 0);
    let labelled = int(object, "/status/fullyLabeledReplicas", 0);
    if let Some(shortfall) = first_shortfall(&[
        below("Labelled", labelled, wanted),
        below("Available", available, wanted),
        below("Ready", ready, wanted),
        extra(replicas, wanted),
    ]) {
        return Ok(shortfall);
    }
    Ok(current(format!(
        "ReplicaSet is available. Replicas: {replicas}"
    )))
}

fn daemon_set(object: &Value) -> Result<Assessment, String> {
    let kind = text(object, "/kind", "");
    if generation(object)?.is_none() {
        return Ok(in_progress(format!("{kind} metadata.generation not found")));
    }
    if observed_generation(object)?.is_none() {
        return Ok(in_progress(format!(
            "{kind} status.observedGeneration not found"
        )));
    }
    let desired = int(object, "/status/desiredNumberScheduled", -1);
    let scheduled = int(object, "/status/currentNumberScheduled", 0);
    let updated = int(object, "/status/updatedNumberScheduled", 0);
    let available = int(object, "/status/numberAvailable", 0);
    let ready = int(object, "/status/numberReady", 0);
    if desired == -1 {
        return Ok(in_progress("Missing .status.desiredNumberScheduled"));
    }
    if let Some(shortfall) = first_shortfall(&[
        below("Current", scheduled, desired),
        below("Updated", updated, desired),
        below("Available", available, desired),
        below("Ready", ready, desired),
    ]) {
        return Ok(shortfall);
    }
    Ok(current(format!(
        "All replicas scheduled as expected. Replicas: {desired}"
    )))
}

fn pvc(object: &Value) -> Result<Assessment, String> {
    match text(object, "/status/phase", "unknown") {
        "Bound" => Ok(current("PVC is Bound")),
        phase => Ok(in_progress(format!("PVC is not Bound. phase: {phase}"))),
    }
}

/// How long kstatus gives a new Pod to be scheduled before it calls it unschedulable.
const SCHEDULE_WINDOW: k8s_openapi::jiff::SignedDuration =
    k8s_openapi::jiff::SignedDuration::from_secs(15);

fn pod(object: &Value) -> Result<Assessment, String> {
    let conditions = conditions(object)?;
    match text(object, "/status/phase", "") {
        "Succeeded" => Ok(current("Pod has completed successfully")),
        "Failed" => Ok(current("Pod has completed, but not successfully")),
        "Running" => {
            if conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
            {
                return Ok(current("Pod is Ready"));
            }
            let crash_looping: Vec<&str> = object
                .pointer("/status/containerStatuses")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter(|c| {
                    c.pointer("/state/waiting/reason").and_then(Value::as_str)
                        == Some("CrashLoopBackOff")
                })
                .filter_map(|c| c.get("name").and_then(Value::as_str))
                .collect();
            if !crash_looping.is_empty() {
                return Ok(failed(format!(
                    "Containers in CrashLoop state: {}",
                    crash_looping.join(",")
                )));
            }
            Ok(in_progress("Pod is running but is not Ready"))
        }
        "Pending" => {
            let unschedulable = conditions
                .iter()
                .find(|c| c.type_ == "PodScheduled" && c.status == "False");
            if unschedulable.is_some_and(|c| c.reason == "Unschedulable") {
                let created = text(object, "/metadata/creationTimestamp", "")
                    .parse::<k8s_openapi::jiff::Timestamp>()
                    .ok();
                let recent = created.is_some_and(|created| {
                    k8s_openapi::jiff::Timestamp::now() - SCHEDULE_WINDOW < created
                });
                if recent {
                    return Ok(in_progress("Pod has not been scheduled"));
                }
                return Ok(failed("Pod could not be scheduled"));
            }
            Ok(in_progress("Pod is in the Pending phase"))
        }
        "" => Ok(in_progress("Pod phase not available")),
        phase => Err(format!("unknown phase {phase}")),
    }
}

fn job(object: &Value) -> Result<Assessment, String> {
    let parallelism = int(object, "/spec/parallelism", 1);
    let completions = int(object, "/spec/completions", parallelism);
    let succeeded = int(object, "/status/succeeded", 0);
    let active = int(object, "/status/active", 0);
    let failed_pods = int(object, "/status/failed", 0);
    for condition in conditions(object)? {
        match (condition.type_, condition.status) {
            ("Complete", "True") => {
                return Ok(current(format!(
                    "Job Completed. succeeded: {succeeded}/{completions}"
                )));
            }
            ("Failed", "True") => {
                return Ok(failed(format!(
                    "Job Failed. failed: {failed_pods}/{completions}"
                )));
            }
            _ => {}
        }
    }
    if text(object, "/status/startTime", "").is_empty() {
        return Ok(in_progress("Job not started"));
    }
    Ok(current(format!(
        "Job in progress. success:{succeeded}, active: {active}, failed: {failed_pods}"
    )))
}

fn service(object: &Value) -> Result<Assessment, String> {
    if text(object, "/spec/type", "ClusterIP") == "LoadBalancer"
        && text(object, "/spec/clusterIP", "").is_empty()
    {
        return Ok(in_progress("ClusterIP not set. Service type: LoadBalancer"));
    }
    Ok(current("Service is ready"))
}

fn crd(object: &Value) -> Result<Assessment, String> {
    for condition in conditions(object)? {
        if condition.type_ == "NamesAccepted" && condition.status == "False" {
            return Ok(failed(condition.message));
        }
        if condition.type_ == "Established" {
            if condition.status == "False" && condition.reason != "Installing" {
                return Ok(failed(condition.message));
            }
            if condition.status == "True" {
                return Ok(current("CRD is established"));
            }
        }
    }
    Ok(in_progress("Install in progress"))
}

#[cfg(test)]
#[path = "kstatus_tests.rs"]
mod tests;
