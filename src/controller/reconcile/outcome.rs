//! The end of a reconciliation as a pure function of what the steps produced: the final
//! conditions and history, the event to record and when to run again. No API access here, so
//! every Flux reason and condition combination is unit-tested without a server.
//!
//! The steps keep `status` current while they run (the attempted revision, the inventory,
//! progress messages, `Healthy` once checks pass); [`begin`] opens the reconciliation proper,
//! [`progressing`] and [`checking_health`] report what is under way, and [`conclude`]
//! closes it.

use std::time::Duration;

use crate::api::{GoDuration, KustomizationStatus};
use crate::controller::error::{Failed, Retry, StepError};
use crate::controller::events::{EventMeta, EventType};
use crate::controller::status::{self, HEALTHY, READY, RECONCILING, STALLED, reason};
use crate::objects::ChangeSet;

/// What a successful reconciliation applied.
#[derive(Debug)]
pub struct Applied {
    pub revision: String,
    pub origin_revision: Option<String>,
    /// The digest of the built objects.
    pub digest: String,
    pub changes: ChangeSet,
}

/// The facts about the Kustomization that shape the conclusion.
#[derive(Clone, Debug)]
pub struct Facts {
    pub generation: Option<i64>,
    /// `reconcile.fluxcd.io/requestedAt`, handled once the reconciliation ends.
    pub requested_at: Option<String>,
    /// `status.lastAppliedRevision` before this reconciliation.
    pub previous_revision: Option<String>,
    pub interval: Duration,
    /// `spec.retryInterval`, else `spec.interval`.
    pub retry_interval: Duration,
    /// `--requeue-dependency`.
    pub dependency_interval: Duration,
    /// How long the reconciliation took.
    pub elapsed: Duration,
}

/// An event to record about the Kustomization.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub type_: EventType,
    pub reason: &'static str,
    pub message: String,
    /// The revisions it concerns, and whether Git commit statuses follow it.
    pub meta: EventMeta,
}

/// When to reconcile again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// After the interval, jittered by `--interval-jitter-percentage`.
    Interval(Duration),
    After(Duration),
    OnChange,
    /// The error goes back to the runtime, which retries with backoff.
    Backoff,
}

/// How a reconciliation ends.
#[derive(Clone, Debug)]
pub struct Conclusion {
    pub status: KustomizationStatus,
    pub event: Option<Event>,
    pub next: Next,
    /// The line the reconciliation ends with in the log.
    pub said: Said,
}

/// The log line a reconciliation ends with, as Flux's reconciler and controller-runtime
/// write it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Said {
    /// `info`: `Reconciliation finished in …, next run in …`, with the revision.
    Finished { message: String, revision: String },
    /// `error`: `Reconciliation failed after …, next try in …`, with the revision (once the
    /// source had one) and the error.
    Failed {
        message: String,
        revision: Option<String>,
        error: String,
    },
    /// `info`: waiting for the source or the dependencies.
    Waiting { message: String },
    /// `info`: `New reconciliation triggered, canceling health checks`, with the trigger.
    Canceled { trigger: String },
    /// `error`: controller-runtime's `Reconciler error` for a terminal error (a stall).
    Terminal { error: String },
    /// Nothing of the reconciler's own: the error goes back to the runtime, which logs
    /// controller-runtime's `Reconciler error` for it.
    Returned,
    /// `error`: a feature gate the Kustomization needs is off (`message` says which to
    /// enable), logged as Flux's reconciler logs it.
    GateDisabled { message: String, error: String },
}

const IN_PROGRESS: &str = "Reconciliation in progress";

/// The reconciliation proper begins — the source has an artifact and the dependencies are
/// ready — as Flux's `MarkReconciling`: not stalled, reconciling with `message`, and Ready
/// unknown. Before this (a missing source, a dependency not ready), the conditions are those
/// of the last reconciliation until the outcome, as in Flux.
pub fn begin(status: &mut KustomizationStatus, message: &str, generation: Option<i64>) {
    status::remove(status, STALLED);
    progressing(status, message, generation);
}

/// Reports what the reconciliation is doing, as Flux: `Reconciling` says what, and `Ready` is
/// unknown ("Reconciliation in progress") until the outcome, even if it was false before.
pub fn progressing(status: &mut KustomizationStatus, message: &str, generation: Option<i64>) {
    status::set(
        status,
        RECONCILING,
        "True",
        reason::PROGRESSING,
        message,
        generation,
    );
    status::set(
        status,
        READY,
        "Unknown",
        reason::PROGRESSING,
        IN_PROGRESS,
        generation,
    );
}

/// Reports that health checks are running: `Reconciling` and `Healthy` say so (Healthy
/// unknown until they end), as Flux.
pub fn checking_health(status: &mut KustomizationStatus, message: &str, generation: Option<i64>) {
    for type_ in [RECONCILING, HEALTHY] {
        let state = if type_ == RECONCILING {
            "True"
        } else {
            "Unknown"
        };
        status::set(
            status,
            type_,
            state,
            reason::PROGRESSING,
            message,
            generation,
        );
    }
}

/// What Flux's `finalizeStatus` makes of a suspended Kustomization's status: its
/// reconciliation returns at once, but the deferred finalization still runs. The request is
/// marked handled; a Ready one observes its generation (so that its dependents and kstatus
/// readers see it current) and stops Reconciling; a failed one keeps Reconciling with the
/// retry reason.
pub fn suspended(mut status: KustomizationStatus, facts: &Facts) -> KustomizationStatus {
    if let Some(requested) = &facts.requested_at {
        status.last_handled_reconcile_at = Some(requested.clone());
    }
    match status::get(&status, READY).map(|c| c.status.as_str()) {
        Some("True") => {
            status::remove(&mut status, RECONCILING);
            status.observed_generation = facts.generation.unwrap_or(-1);
        }
        Some("False") => {
            if let Some(reconciling) = status::get(&status, RECONCILING).cloned() {
                status::set(
                    &mut status,
                    RECONCILING,
                    &reconciling.status,
                    reason::PROGRESSING_WITH_RETRY,
                    &reconciling.message,
                    reconciling.observed_generation,
                );
            }
        }
        _ => {}
    }
    status
}

/// What Flux's deferred end of a reconciliation says after a deletion was finalized: a
/// Kustomization that was Ready (and not suspended) ends as a successful one does, with
/// "Reconciliation finished in …, next run in …" (Ready's reason, the last applied revisions,
/// `commit_status: update`), logged with the last attempted revision.
pub fn finalized(
    status: &KustomizationStatus,
    suspended: bool,
    elapsed: Duration,
    interval: Duration,
) -> Option<(Event, Said)> {
    let ready = status::get(status, READY).filter(|c| c.status == "True")?;
    if suspended {
        return None;
    }
    let message = format!(
        "Reconciliation finished in {}, next run in {}",
        GoDuration::from_std(elapsed),
        GoDuration::from_std(interval)
    );
    let reason = match ready.reason.as_str() {
        reason::SUCCEEDED => reason::SUCCEEDED,
        // Ready is True only after a success; anything else is Flux's `info` severity.
        _ => "info",
    };
    let event = Event {
        type_: EventType::Normal,
        reason,
        message: message.clone(),
        meta: EventMeta {
            commit_status: true,
            ..EventMeta::of(
                status.last_applied_revision.as_deref(),
                status.last_applied_origin_revision.as_deref(),
            )
        },
    };
    let said = Said::Finished {
        message,
        revision: status.last_attempted_revision.clone().unwrap_or_default(),
    };
    Some((event, said))
}

/// Closes a reconciliation: the final status, the event and when to run again.
pub fn conclude(
    mut status: KustomizationStatus,
    facts: &Facts,
    result: &Result<Applied, Failed>,
) -> Conclusion {
    if let Some(requested) = &facts.requested_at {
        status.last_handled_reconcile_at = Some(requested.clone());
    }
    match result {
        Ok(applied) => succeeded(status, facts, applied),
        Err(failed) => failed_with(status, facts, failed),
    }
}

fn succeeded(mut status: KustomizationStatus, facts: &Facts, applied: &Applied) -> Conclusion {
    let generation = facts.generation;
    let message = format!("Applied revision: {}", applied.revision);
    status::remove(&mut status, RECONCILING);
    status::set(
        &mut status,
        READY,
        "True",
        reason::SUCCEEDED,
        &message,
        generation,
    );
    status.observed_generation = generation.unwrap_or(-1);
    status.last_applied_revision = Some(applied.revision.clone());
    status.last_applied_origin_revision = applied.origin_revision.clone();
    status::record_history(
        &mut status,
        &status::Reconciled {
            digest: &applied.digest,
            outcome: reason::SUCCEEDED,
            duration: facts.elapsed,
            revision: &applied.revision,
            origin_revision: applied.origin_revision.as_deref(),
        },
    );
    // As Flux, every successful reconciliation ends with this event; notification-controller
    // sets Git commit statuses from it.
    let event = Event {
        type_: EventType::Normal,
        reason: reason::SUCCEEDED,
        message: format!(
            "Reconciliation finished in {}, next run in {}",
            GoDuration::from_std(facts.elapsed),
            GoDuration::from_std(facts.interval)
        ),
        meta: EventMeta {
            commit_status: true,
            ..EventMeta::of(Some(&applied.revision), applied.origin_revision.as_deref())
        },
    };
    let said = Said::Finished {
        message: event.message.clone(),
        revision: applied.revision.clone(),
    };
    Conclusion {
        status,
        event: Some(event),
        next: Next::Interval(facts.interval),
        said,
    }
}

fn failed_with(mut status: KustomizationStatus, facts: &Facts, failed: &Failed) -> Conclusion {
    let generation = facts.generation;
    let error = &failed.error;
    let reason = error.reason();
    let message = match error {
        // As Flux's, the condition says when it is tried again.
        StepError::SourceNotReady(_) => retrying(error, facts),
        _ => error.to_string(),
    };
    if error.stalls() {
        status::remove(&mut status, RECONCILING);
        status::set(&mut status, STALLED, "True", reason, &message, generation);
        // As Flux: an invalid expression is a terminal error that observes the generation
        // (kstatus reads Failed); other stalls (access denied, a disabled feature gate) leave
        // it as it was.
        if reason == reason::INVALID_CEL {
            status.observed_generation = generation.unwrap_or(-1);
        }
    } else if let Some(progress) = status::get(&status, RECONCILING).map(|c| c.message.clone()) {
        // As Flux's finalizeStatus: a Reconciling condition keeps its message (what this run,
        // or the last, was doing) with the retry reason; the error is Ready's message. One
        // that failed before it began (waiting for a source or a dependency) has none.
        status::set(
            &mut status,
            RECONCILING,
            "True",
            reason::PROGRESSING_WITH_RETRY,
            &progress,
            generation,
        );
    }
    status::set(&mut status, READY, "False", reason, &message, generation);
    if let StepError::Health { error, .. } = error {
        let checks = error.to_string();
        status::set(&mut status, HEALTHY, "False", reason, &checks, generation);
    }
    // As Flux, cancelled checks are not an outcome of this build: the next revision is.
    let canceled = matches!(error, StepError::HealthCheckCanceled { .. });
    if let Some(digest) = failed.digest.as_ref().filter(|_| !canceled) {
        status::record_history(
            &mut status,
            &status::Reconciled {
                digest,
                outcome: reason,
                duration: facts.elapsed,
                revision: failed.revision.as_deref().unwrap_or_default(),
                origin_revision: failed.origin_revision.as_deref(),
            },
        );
    }
    let next = match error.retry() {
        Retry::OnChange => Next::OnChange,
        Retry::DependencyInterval => Next::After(facts.dependency_interval),
        Retry::RetryInterval => Next::After(facts.retry_interval),
        Retry::Now => Next::After(Duration::ZERO),
        Retry::Backoff => Next::Backoff,
    };
    let meta = EventMeta::of(
        failed.revision.as_deref(),
        failed.origin_revision.as_deref(),
    );
    let event = if matches!(error, StepError::Dependency(_)) && !error.stalls() {
        // As Flux: the event says only that it waits; the condition says for what.
        Event {
            type_: EventType::Normal,
            reason,
            message: retrying(DEPENDENCIES_NOT_READY, facts),
            meta,
        }
    } else if let StepError::HealthCheckCanceled { trigger } = error {
        Event {
            type_: EventType::Normal,
            reason,
            message: format!(
                "Health checks canceled due to new reconciliation triggered by {trigger}"
            ),
            meta,
        }
    } else {
        Event {
            type_: EventType::Warning,
            reason,
            message: error.reported().unwrap_or(message),
            meta,
        }
    };
    Conclusion {
        status,
        event: error.announced().then_some(event),
        next,
        said: said_on_failure(facts, failed),
    }
}

/// What Flux says of a Kustomization waiting on its dependencies (the event and the log; the
/// condition names them).
const DEPENDENCIES_NOT_READY: &str = "Dependencies do not meet ready condition";

/// `what`, and that it is tried again after `--requeue-dependency`, in Flux's words.
fn retrying(what: impl std::fmt::Display, facts: &Facts) -> String {
    format!(
        "{what}, retrying in {}",
        GoDuration::from_std(facts.dependency_interval)
    )
}

/// What Flux logs for a failure: waiting and cancelling are news, not errors; a stall is
/// controller-runtime's terminal `Reconciler error`; anything else is retried.
fn said_on_failure(facts: &Facts, failed: &Failed) -> Said {
    let error = &failed.error;
    if let StepError::WorkloadIdentityDisabled = error {
        // Flux logs it and ends the reconciliation without an error.
        return Said::GateDisabled {
            message: error.to_string(),
            error: "ObjectLevelWorkloadIdentity feature gate is not enabled".into(),
        };
    }
    if error.stalls() {
        return Said::Terminal {
            error: error.terminal_cause(),
        };
    }
    if error.retry() == Retry::Backoff {
        return Said::Returned;
    }
    match error {
        StepError::SourceNotFound {
            kind,
            namespace,
            name,
            namespaced_ref,
            ..
        } => Said::Waiting {
            message: if *namespaced_ref {
                format!("Source '{}/{namespace}/{name}' not found", kind.as_str())
            } else {
                format!("Source '{}/{name}' not found", kind.as_str())
            },
        },
        StepError::SourceNotReady(_) => Said::Waiting {
            message: retrying(error, facts),
        },
        StepError::Dependency(_) => Said::Waiting {
            message: retrying(DEPENDENCIES_NOT_READY, facts),
        },
        StepError::HealthCheckCanceled { trigger } => Said::Canceled {
            trigger: trigger.clone(),
        },
        _ => Said::Failed {
            message: format!(
                "Reconciliation failed after {}, next try in {}",
                GoDuration::from_std(facts.elapsed),
                GoDuration::from_std(facts.retry_interval)
            ),
            revision: failed.revision.clone(),
            error: error.reported().unwrap_or_else(|| error.to_string()),
        },
    }
}

#[cfg(test)]
#[path = "outcome_tests.rs"]
mod tests;
