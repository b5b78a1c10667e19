//! Health checks: whether applied objects reached their desired state.
//!
//! Each object's status comes from `kstatus` (per-kind rules and generic conditions) or,
//! when a `healthCheckExprs` entry matches its group and kind (as Flux matches: the version is
//! ignored, an entry without a kind covers its whole group, a kind's own entry wins), from CEL
//! expressions in Flux's environment, where the object's top-level fields (`apiVersion`,
//! `kind`, `metadata`, `spec`, `status`…) are the variables and `self` is the whole object
//! (`CelChecks`). [`wait`] polls until every object is Current, fails fast when one is Failed,
//! and reports the stragglers on timeout in Flux's wording.

pub mod cel_check;
pub mod cel_ext;
mod cel_functions;
pub mod cel_issues;
pub mod cel_types;
mod kstatus;

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::Value;

pub use kstatus::{Assessment, Status, compute};

use crate::api::CustomHealthCheck;
use futures::StreamExt;

use crate::objects::{KindCache, KindError, ObjectRef, api_group};

#[derive(Debug, thiserror::Error)]
pub enum HealthError {
    #[error("timeout waiting for: [{}]", .0.join(", "))]
    Timeout(Vec<String>),
    #[error("failed early due to stalled resources: [{}]", .0.join(", "))]
    Failed(Vec<String>),
    /// Flux's wording, so that its users find the entry and field that failed to parse.
    #[error(
        "failed to create custom status evaluator for healthchecks[{index}]: failed to parse the expression {field}: failed to parse the CEL expression '{expression}': {reason}"
    )]
    InvalidExpression {
        index: usize,
        /// `Current`, `Failed` or `InProgress`.
        field: &'static str,
        expression: String,
        reason: String,
    },
    #[error("duplicate custom health check for GroupKind {group_kind} at healthchecks[{index}]")]
    DuplicateExpression { group_kind: String, index: usize },
    #[error("health check of {subject}: {message}")]
    Api { subject: String, message: String },
}

struct CelCheck {
    /// The API group of the entry's apiVersion (`""` for the core group).
    group: String,
    /// `None` covers every kind of the group.
    kind: Option<String>,
    current: Expression,
    in_progress: Option<Expression>,
    failed: Option<Expression>,
}

struct Expression {
    text: String,
    program: cel::Program,
}

/// Compiled `healthCheckExprs`.
#[derive(Default)]
pub struct CelChecks {
    checks: Vec<CelCheck>,
}

impl CelChecks {
    pub fn new(checks: &[CustomHealthCheck]) -> Result<CelChecks, HealthError> {
        let mut compiled: Vec<CelCheck> = Vec::new();
        for (index, check) in checks.iter().enumerate() {
            let group = api_group(&check.api_version).to_string();
            let kind = check.kind.clone().filter(|k| !k.is_empty());
            if compiled.iter().any(|c| c.group == group && c.kind == kind) {
                let group_kind = match group.as_str() {
                    "" => kind.clone().unwrap_or_default(),
                    _ => format!("{}.{group}", kind.clone().unwrap_or_default()),
                };
                return Err(HealthError::DuplicateExpression { group_kind, index });
            }
            let compile = |field: &'static str, expression: &str| {
                cel_ext::compile(expression)
                    .map(|program| Expression {
                        text: expression.to_string(),
                        program,
                    })
                    .map_err(|e| HealthError::InvalidExpression {
                        index,
                        field,
                        expression: expression.to_string(),
                        reason: e.to_string(),
                    })
            };
            // Flux parses Current, then Failed, then InProgress: the first error it reports.
            let current = compile("Current", &check.current)?;
            let failed = check
                .failed
                .as_deref()
                .map(|e| compile("Failed", e))
                .transpose()?;
            let in_progress = check
                .in_progress
                .as_deref()
                .map(|e| compile("InProgress", e))
                .transpose()?;
            compiled.push(CelCheck {
                group,
                kind,
                current,
                in_progress,
                failed,
            });
        }
        Ok(CelChecks { checks: compiled })
    }

    /// The status by a matching CEL check, `None` when no check covers the object's kind.
    /// The generation check comes first; then `inProgress`, `failed` and `current` in that
    /// order, the first that holds deciding; none holding means InProgress.
    pub fn assess(&self, object: &Value) -> Option<Assessment> {
        self.evaluate(object).map(|(assessment, _)| assessment)
    }

    /// [`assess`](Self::assess), with the error of an expression that could not be evaluated:
    /// as Flux, that object is in progress and the error is reported with it.
    fn evaluate(&self, object: &Value) -> Option<(Assessment, Option<String>)> {
        let api_version = object
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
        let group = api_group(api_version);
        let check = self
            .checks
            .iter()
            .find(|c| c.group == group && c.kind.as_deref() == Some(kind))
            .or_else(|| {
                self.checks
                    .iter()
                    .find(|c| c.group == group && c.kind.is_none())
            })?;
        let generation = object
            .pointer("/metadata/generation")
            .and_then(Value::as_i64);
        let observed = object
            .pointer("/status/observedGeneration")
            .and_then(Value::as_i64);
        // As Flux's CEL status evaluator: any other generation observed is in progress, and
        // its results carry no message.
        if let (Some(generation), Some(observed)) = (generation, observed)
            && observed != generation
        {
            let assessment = Assessment {
                status: Status::InProgress,
                message: String::new(),
            };
            return Some((assessment, None));
        }
        // One conversion of the object, shared by `self` and its top-level fields.
        let mut context = cel_ext::context();
        let self_value = cel_ext::json_value(object);
        if let cel::Value::Map(fields) = &self_value {
            for (name, value) in fields.map.iter() {
                if let cel::objects::Key::String(name) = name {
                    context.add_variable_from_value(name.as_str(), value.clone());
                }
            }
        }
        context.add_variable_from_value("self", self_value);
        let holds = |expression: &Expression| match expression.program.execute(&context) {
            Ok(cel::Value::Bool(value)) => Ok(value),
            // Flux's `EvaluateBoolean`: anything but a boolean is an error.
            Ok(_) => Err(format!(
                "failed to evaluate CEL expression as boolean: '{}'",
                expression.text
            )),
            Err(error) => Err(format!(
                "failed to evaluate the CEL expression '{}': {}",
                expression.text,
                cel_ext::describe_for(
                    &expression.program,
                    &context,
                    |name| variable(object, name),
                    &error
                )
            )),
        };
        let verdict = (|| {
            if let Some(in_progress) = &check.in_progress
                && holds(in_progress)?
            {
                return Ok(Status::InProgress);
            }
            if let Some(failed) = &check.failed
                && holds(failed)?
            {
                return Ok(Status::Failed);
            }
            Ok(if holds(&check.current)? {
                Status::Current
            } else {
                Status::InProgress
            })
        })();
        let message = String::new();
        Some(match verdict {
            Ok(status) => (Assessment { status, message }, None),
            Err(error) => (
                Assessment {
                    status: Status::InProgress,
                    message,
                },
                Some(error),
            ),
        })
    }
}

/// fluxcd/pkg `ssa/utils` `ExtractJobsWithTTL`: the Jobs whose spec sets
/// `ttlSecondsAfterFinished` (0 too). Kubernetes deletes them once they finish, so one that is
/// gone did its work.
pub fn jobs_with_ttl(objects: &[Value]) -> BTreeSet<ObjectRef> {
    objects
        .iter()
        .filter(|object| is_job(object))
        .filter(|job| {
            job.pointer("/spec/ttlSecondsAfterFinished")
                .is_some_and(|ttl| ttl.as_i64().is_some())
        })
        .map(ObjectRef::of)
        .collect()
}

/// fluxcd/pkg `ssa/utils` `IsJob`: kind Job in the `batch` group, any version.
fn is_job(object: &Value) -> bool {
    object.get("kind").and_then(Value::as_str) == Some("Job")
        && object
            .get("apiVersion")
            .and_then(Value::as_str)
            .is_some_and(|version| version.starts_with("batch/"))
}

/// The status of a live object (or of one that is gone: a Job of `jobs_with_ttl` is then
/// done).
pub fn assess(
    reference: &ObjectRef,
    live: Option<&Value>,
    cel: &CelChecks,
    jobs_with_ttl: &BTreeSet<ObjectRef>,
) -> Assessment {
    let Some(live) = live else {
        // The same object whatever version names it, as Flux's object metadata compares.
        let same = |job: &ObjectRef| {
            job.group() == reference.group()
                && job.kind == reference.kind
                && job.namespace == reference.namespace
                && job.name == reference.name
        };
        if jobs_with_ttl.iter().any(same) {
            return Assessment {
                status: Status::Current,
                message: "Job was deleted after completion".into(),
            };
        }
        return compute(None);
    };
    cel.assess(live).unwrap_or_else(|| compute(Some(live)))
}

/// A variable a health expression reads, by name: `self` is the whole object, any other
/// name its top-level field.
fn variable<'o>(object: &'o Value, name: &str) -> Option<&'o Value> {
    match name {
        "self" => Some(object),
        field => object.get(field),
    }
}

/// One object's poll: its status and the error that decided it, if any.
type Polled = (ObjectRef, Status, Option<String>);

/// The status of a live object for [`wait`], with the error that decided it, if any.
fn verdict(
    reference: &ObjectRef,
    live: Option<&Value>,
    cel: &CelChecks,
    jobs_with_ttl: &BTreeSet<ObjectRef>,
) -> (Status, Option<String>) {
    match live.and_then(|live| cel.evaluate(live)) {
        Some((assessment, error)) => (assessment.status, error),
        None => (assess(reference, live, cel, jobs_with_ttl).status, None),
    }
}

/// How to poll.
#[derive(Clone, Debug)]
pub struct WaitOptions {
    pub timeout: Duration,
    pub interval: Duration,
    /// Fail at once when an object has failed (Flux's default), rather than waiting out the
    /// timeout for it to recover (the DisableFailFastBehavior gate).
    pub fail_fast: bool,
    /// The Jobs Kubernetes deletes after they finish ([`jobs_with_ttl`]).
    pub jobs_with_ttl: BTreeSet<ObjectRef>,
}

/// Waits until every object is Current.
pub async fn wait(
    client: &kube::Client,
    objects: &[ObjectRef],
    cel: &CelChecks,
    options: &WaitOptions,
) -> Result<(), HealthError> {
    wait_with(client, &KindCache::default(), objects, cel, options).await
}

/// [`wait`] with discovery results shared with other callers.
pub async fn wait_with(
    client: &kube::Client,
    kinds: &KindCache,
    objects: &[ObjectRef],
    cel: &CelChecks,
    options: &WaitOptions,
) -> Result<(), HealthError> {
    let deadline = tokio::time::Instant::now() + options.timeout;
    let mut pending: Vec<ObjectRef> = objects.to_vec();
    loop {
        // The objects are read concurrently, a few at a time, on every poll.
        let verdicts: Vec<Result<Polled, HealthError>> = futures::stream::iter(
            pending,
        )
        .map(|reference| async move {
            let api = match kinds.api(client, &reference).await {
                Ok(api) => api,
                Err(KindError::NotServed) => {
                    return Err(HealthError::Api {
                        subject: reference.to_string(),
                        message: format!(
                            "the server does not serve {} {}",
                            reference.api_version, reference.kind
                        ),
                    });
                }
                // Passing discovery trouble is polled through like a failed read.
                Err(KindError::Api(error)) => {
                    tracing::debug!(object = %reference, error = %error, "health check discovery");
                    return Ok((reference, Status::Unknown, None));
                }
            };
            // A failed read is not a verdict: the object is polled again until the deadline,
            // and if it is still unread then, the read's error is what the timeout names (as
            // cli-utils' status reader reports it to ssa: Unknown, with the error).
            match api.get_opt(&reference.name).await {
                Ok(live) => {
                    let live = live.map(|o| serde_json::to_value(o).unwrap_or_default());
                    let (status, error) =
                        verdict(&reference, live.as_ref(), cel, &options.jobs_with_ttl);
                    Ok((reference, status, error))
                }
                Err(error) => {
                    tracing::debug!(object = %reference, error = %error, "health check read");
                    let message = crate::report::api_message(&error);
                    Ok((reference, Status::Unknown, Some(message)))
                }
            }
        })
        .buffered(8)
        .collect()
        .await;
        let mut still = Vec::new();
        let mut failed = Vec::new();
        let mut stalled = Vec::new();
        for verdict in verdicts {
            let (reference, status, error) = verdict?;
            // fluxcd/pkg/ssa's wording: the status, and the error behind it.
            let describe = |status: Status| match &error {
                Some(error) => format!("{reference} status: '{status}': {error}"),
                None => format!("{reference} status: '{status}'"),
            };
            match status {
                Status::Current => {}
                Status::Failed if options.fail_fast => failed.push(describe(status)),
                status => {
                    let described = describe(status);
                    if status == Status::Failed {
                        stalled.push(described.clone());
                    }
                    still.push((reference, described));
                }
            }
        }
        if !failed.is_empty() {
            return Err(HealthError::Failed(failed));
        }
        // As ssa without fail-fast: once all that is left has Failed, nothing more can come
        // of waiting (a terminal state).
        if !still.is_empty() && stalled.len() == still.len() {
            return Err(HealthError::Failed(stalled));
        }
        if still.is_empty() {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(HealthError::Timeout(
                still
                    .iter()
                    .map(|(_, described)| described.clone())
                    .collect(),
            ));
        }
        pending = still.into_iter().map(|(reference, _)| reference).collect();
        tokio::time::sleep(options.interval).await;
    }
}

#[cfg(test)]
#[path = "cel_flux_tests.rs"]
mod cel_flux_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A check of `example.com/v1` `Widget`s.
    pub(super) fn check(
        current: &str,
        in_progress: Option<&str>,
        failed: Option<&str>,
    ) -> CustomHealthCheck {
        CustomHealthCheck {
            api_version: "example.com/v1".into(),
            kind: Some("Widget".into()),
            current: current.into(),
            in_progress: in_progress.map(str::to_string),
            failed: failed.map(str::to_string),
        }
    }

    #[test]
    fn cel_expressions_decide_in_order() {
        let checks = CelChecks::new(&[check(
            "self.status.phase == 'Ready'",
            Some("self.status.phase == 'Pending'"),
            Some("self.status.phase == 'Error'"),
        )])
        .unwrap();
        let widget = |phase: &str| json!({"apiVersion": "example.com/v1", "kind": "Widget", "status": {"phase": phase}});
        assert_eq!(
            checks.assess(&widget("Ready")).unwrap().status,
            Status::Current
        );
        assert_eq!(
            checks.assess(&widget("Pending")).unwrap().status,
            Status::InProgress
        );
        assert_eq!(
            checks.assess(&widget("Error")).unwrap().status,
            Status::Failed
        );
        assert_eq!(
            checks.assess(&widget("Other")).unwrap().status,
            Status::InProgress
        );
        let stale = json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"generation": 2}, "status": {"observedGeneration": 1, "phase": "Ready"}});
        assert_eq!(checks.assess(&stale).unwrap().status, Status::InProgress);
        // Any generation other than the observed one, ahead of it too (Flux compares `!=`).
        let ahead = json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"generation": 1}, "status": {"observedGeneration": 2, "phase": "Ready"}});
        assert_eq!(checks.assess(&ahead).unwrap().status, Status::InProgress);
        let other = json!({"apiVersion": "v1", "kind": "ConfigMap"});
        assert!(checks.assess(&other).is_none());
    }

    /// Flux's `EvaluateBoolean`: an expression whose value is not a boolean is an error (the
    /// object is in progress, the error reported), not a false one passed over.
    #[test]
    fn an_expression_that_is_not_a_boolean_is_an_error() {
        let checks = CelChecks::new(&[check("true", Some("status.phase"), None)]).unwrap();
        let widget = json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "status": {"phase": "Running"}});
        let (assessment, error) = checks.evaluate(&widget).unwrap();
        assert_eq!(assessment.status, Status::InProgress);
        assert_eq!(
            error.as_deref(),
            Some("failed to evaluate CEL expression as boolean: 'status.phase'")
        );
    }

    #[test]
    fn flux_expressions_see_the_objects_top_level_fields() {
        // The example of Flux's docs, written against the object's fields, not `self`.
        let checks = CelChecks::new(&[CustomHealthCheck {
            api_version: "example.com/v1alpha1".into(),
            kind: Some("Widget".into()),
            current: "status.conditions.filter(e, e.type == 'Synced').all(e, e.status == 'True')"
                .into(),
            in_progress: None,
            failed: Some(
                "status.conditions.filter(e, e.type == 'Synced').all(e, e.status == 'False')"
                    .into(),
            ),
        }])
        .unwrap();
        let widget = |api_version: &str, synced: &str| {
            json!({"apiVersion": api_version, "kind": "Widget", "metadata": {"name": "w"},
                "status": {"conditions": [{"type": "Synced", "status": synced}]}})
        };
        assert_eq!(
            checks
                .assess(&widget("example.com/v1alpha1", "True"))
                .unwrap()
                .status,
            Status::Current
        );
        assert_eq!(
            checks
                .assess(&widget("example.com/v1alpha1", "False"))
                .unwrap()
                .status,
            Status::Failed,
            "a matching failed expression fails at once"
        );
        assert_eq!(
            checks
                .assess(&widget("example.com/v1", "True"))
                .unwrap()
                .status,
            Status::Current,
            "matched by group and kind: the version does not matter"
        );
        assert!(
            checks
                .assess(&widget("other.example.com/v1", "True"))
                .is_none()
        );
        let kind_and_metadata = CelChecks::new(&[check(
            "kind == 'Widget' && metadata.name == 'w' && apiVersion.startsWith('example.com/')",
            None,
            None,
        )])
        .unwrap();
        assert_eq!(
            kind_and_metadata
                .assess(&widget("example.com/v1", "True"))
                .unwrap()
                .status,
            Status::Current
        );
    }

    #[test]
    fn a_kinds_own_entry_wins_over_its_groups_and_duplicates_are_refused() {
        let group_wide = CustomHealthCheck {
            api_version: "example.com/v1".into(),
            kind: None,
            current: "true".into(),
            in_progress: None,
            failed: None,
        };
        let widgets = check("false", None, Some("true"));
        let checks = CelChecks::new(&[group_wide.clone(), widgets.clone()]).unwrap();
        let object = |kind: &str| json!({"apiVersion": "example.com/v2", "kind": kind});
        assert_eq!(
            checks.assess(&object("Widget")).unwrap().status,
            Status::Failed
        );
        assert_eq!(
            checks.assess(&object("Gadget")).unwrap().status,
            Status::Current
        );
        let error = CelChecks::new(&[widgets.clone(), check("true", None, None)])
            .err()
            .unwrap();
        assert_eq!(
            error.to_string(),
            "duplicate custom health check for GroupKind Widget.example.com at healthchecks[1]"
        );
    }

    #[test]
    fn invalid_expressions_are_reported() {
        let error = CelChecks::new(&[check("self.status.(", None, None)])
            .err()
            .unwrap();
        assert!(
            error.to_string().starts_with(
                "failed to create custom status evaluator for healthchecks[0]: failed to parse the expression Current: failed to parse the CEL expression 'self.status.(': "
            ),
            "{error}"
        );
    }

    #[test]
    fn ttl_deleted_jobs_count_as_done_and_others_as_not_found() {
        let job = |name: &str, ttl: Option<i64>| {
            let mut job = serde_json::json!({"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": name, "namespace": "ns"}, "spec": {}});
            if let Some(ttl) = ttl {
                job["spec"]["ttlSecondsAfterFinished"] = ttl.into();
            }
            job
        };
        let objects = [job("once", Some(60)), job("kept", None)];
        let ttl = jobs_with_ttl(&objects);
        let status = |object: &Value| {
            assess(&ObjectRef::of(object), None, &CelChecks::default(), &ttl).status
        };
        assert_eq!(status(&objects[0]), Status::Current);
        // As Flux: only a Job that sets its TTL is expected to go.
        assert_eq!(status(&objects[1]), Status::NotFound);
        let config_map = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "once", "namespace": "ns"}});
        assert_eq!(status(&config_map), Status::NotFound);
    }

    /// fluxcd/pkg `ssa/utils` `TestIsJob` and `TestExtractJobsWithTTL`, row by row.
    #[test]
    fn flux_is_job_and_extract_jobs_with_ttl_rows() {
        for (name, api_version, kind, want) in [
            ("batch/v1 Job", "batch/v1", "Job", true),
            ("batch/v1beta1 Job", "batch/v1beta1", "Job", true),
            ("apps/v1 Deployment", "apps/v1", "Deployment", false),
            ("v1 ConfigMap", "v1", "ConfigMap", false),
            ("batch/v1 CronJob", "batch/v1", "CronJob", false),
        ] {
            let object = serde_json::json!({"apiVersion": api_version, "kind": kind});
            assert_eq!(is_job(&object), want, "{name}");
        }
        let job = |name: &str, namespace: &str, ttl: Option<i64>| {
            let mut job = serde_json::json!({"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}],
                    "restartPolicy": "Never"}}}});
            if let Some(ttl) = ttl {
                job["spec"]["ttlSecondsAfterFinished"] = ttl.into();
            }
            job
        };
        let deployment = serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "app", "namespace": "default"}});
        let config_map = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": "default"}});
        for (name, objects, want) in [
            ("empty list", vec![], 0),
            (
                "Job with ttlSecondsAfterFinished: 0",
                vec![job("job", "default", Some(0))],
                1,
            ),
            (
                "Job with ttlSecondsAfterFinished: 300",
                vec![job("job", "default", Some(300))],
                1,
            ),
            (
                "Job without ttlSecondsAfterFinished",
                vec![job("job", "default", None)],
                0,
            ),
            (
                "non-Job resources",
                vec![deployment.clone(), config_map.clone()],
                0,
            ),
            (
                "mixed list of resources",
                vec![
                    job("job-with-ttl", "default", Some(60)),
                    job("job-without-ttl", "default", None),
                    deployment,
                    job("another-job-with-ttl", "other", Some(0)),
                    config_map,
                ],
                2,
            ),
        ] {
            assert_eq!(jobs_with_ttl(&objects).len(), want, "{name}");
        }
    }
}
