//! Every Flux reason a step can fail with, and what the status, event and requeue become.

use std::time::Duration;

use super::*;
use crate::api::SourceKind;
use crate::apply::{ApplyError, IgnoreRuleError};
use crate::controller::dependencies::DependencyError;
use crate::controller::inputs::InputError;
use crate::controller::manifests::ManifestError;
use crate::controller::remote::ClientError;
use crate::health::HealthError;
use crate::inventory::InventoryError;
use crate::inventory::OverflowError;
use crate::objects::{Change, ObjectRef};
use crate::source::SourceError;

const INTERVAL: Duration = Duration::from_secs(600);
const RETRY: Duration = Duration::from_secs(60);
const DEPENDENCY: Duration = Duration::from_secs(30);

fn facts() -> Facts {
    Facts {
        generation: Some(3),
        requested_at: None,
        previous_revision: Some("main@sha1:old".into()),
        interval: INTERVAL,
        retry_interval: RETRY,
        dependency_interval: DEPENDENCY,
        elapsed: Duration::from_millis(1500),
    }
}

/// The status as the steps leave it after fetching revision `main@sha1:new`.
fn started() -> KustomizationStatus {
    let mut status = KustomizationStatus::default();
    begin(&mut status, "Fetching manifests", Some(3));
    status.last_attempted_revision = Some("main@sha1:new".into());
    status
}

fn condition<'a>(status: &'a KustomizationStatus, type_: &str) -> Option<(&'a str, &'a str)> {
    status::get(status, type_).map(|c| (c.status.as_str(), c.reason.as_str()))
}

fn applied(changes: Vec<Change>) -> Applied {
    Applied {
        revision: "main@sha1:new".into(),
        origin_revision: Some("v1.2.3@sha1:abc".into()),
        digest: "sha256:built".into(),
        changes: ChangeSet { changes },
    }
}

fn config_map(action: crate::objects::Action) -> Change {
    Change {
        object: ObjectRef {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: "apps".into(),
            name: "settings".into(),
        },
        action,
    }
}

fn no_artifact() -> SourceError {
    SourceError::NoArtifact {
        kind: "GitRepository",
        namespace: "flux-system".into(),
        name: "repo".into(),
    }
}

fn artifact_missing() -> SourceError {
    SourceError::ArtifactMissing {
        url: "http://source-controller/gitrepository/flux-system/repo/latest.tar.gz".into(),
    }
}

fn source_not_found() -> SourceError {
    SourceError::NotFound {
        kind: "GitRepository",
        namespace: "flux-system".into(),
        name: "repo".into(),
    }
}

fn fail(error: StepError, digest: Option<&str>) -> Conclusion {
    conclude(
        started(),
        &facts(),
        &Err(Failed {
            error,
            revision: Some("main@sha1:new".into()),
            origin_revision: Some("v1.2.3@sha1:abc".into()),
            digest: digest.map(str::to_string),
        }),
    )
}

#[test]
fn a_reconciliation_begins_reconciling_with_ready_unknown_and_not_stalled() {
    let mut previous = KustomizationStatus::default();
    status::set(
        &mut previous,
        STALLED,
        "True",
        reason::INVALID_CEL,
        "x",
        Some(2),
    );
    status::set(
        &mut previous,
        READY,
        "True",
        reason::SUCCEEDED,
        "ok",
        Some(2),
    );
    let mut status = previous;
    begin(&mut status, "Fetching manifests", Some(3));
    assert_eq!(condition(&status, STALLED), None);
    assert_eq!(
        condition(&status, RECONCILING),
        Some(("True", reason::PROGRESSING))
    );
    assert_eq!(
        condition(&status, READY),
        Some(("Unknown", reason::PROGRESSING))
    );
    let order: Vec<&str> = status.conditions.iter().map(|c| c.type_.as_str()).collect();
    assert_eq!(order, [RECONCILING, READY], "fluxcd/pkg's order");
}

/// As Flux: a Kustomization that failed before is Ready=Unknown while it runs again, with
/// "Reconciliation in progress"; `Reconciling` carries what is under way, and `Healthy` is
/// unknown while health checks run.
#[test]
fn a_retrying_kustomization_is_unknown_while_it_runs_as_in_flux() {
    let mut previous = KustomizationStatus::default();
    status::set(
        &mut previous,
        READY,
        "False",
        reason::BUILD_FAILED,
        "bad",
        Some(2),
    );
    let mut status = previous;
    begin(&mut status, "Fetching manifests", Some(3));
    let ready = status::get(&status, READY).unwrap();
    assert_eq!(
        (
            ready.status.as_str(),
            ready.reason.as_str(),
            ready.message.as_str()
        ),
        ("Unknown", reason::PROGRESSING, "Reconciliation in progress")
    );
    assert_eq!(
        status::get(&status, RECONCILING).unwrap().message,
        "Fetching manifests"
    );
    checking_health(&mut status, "Running health checks", Some(3));
    assert_eq!(
        condition(&status, HEALTHY),
        Some(("Unknown", reason::PROGRESSING))
    );
    assert_eq!(
        status::get(&status, RECONCILING).unwrap().message,
        "Running health checks"
    );
    assert_eq!(
        condition(&status, READY),
        Some(("Unknown", reason::PROGRESSING))
    );
}

#[test]
fn success_is_ready_records_the_revision_and_history_and_requeues_at_the_interval() {
    let conclusion = conclude(
        started(),
        &facts(),
        &Ok(applied(vec![config_map(crate::objects::Action::Created)])),
    );
    let status = &conclusion.status;
    assert_eq!(condition(status, READY), Some(("True", reason::SUCCEEDED)));
    assert_eq!(
        status::get(status, READY).unwrap().message,
        "Applied revision: main@sha1:new"
    );
    assert_eq!(condition(status, RECONCILING), None);
    assert_eq!(condition(status, STALLED), None);
    assert_eq!(status.observed_generation, 3);
    assert_eq!(
        status.last_applied_revision.as_deref(),
        Some("main@sha1:new")
    );
    assert_eq!(
        status.last_applied_origin_revision.as_deref(),
        Some("v1.2.3@sha1:abc")
    );
    assert_eq!(status.history.len(), 1);
    assert_eq!(status.history[0].digest, "sha256:built");
    assert_eq!(status.history[0].last_reconciled_status, reason::SUCCEEDED);
    assert_eq!(status.history[0].last_reconciled_duration, "1.5s");
    assert_eq!(conclusion.next, Next::Interval(INTERVAL));
    assert_eq!(
        status.history[0].metadata.as_ref().unwrap()["originRevision"],
        "v1.2.3@sha1:abc"
    );
}

/// As Flux: every successful reconciliation ends with "Reconciliation finished in …, next
/// run in …", carrying both revisions and `commit_status: update` for Git commit statuses.
#[test]
fn success_ends_with_fluxs_finished_event_for_commit_statuses() {
    let unchanged = || applied(vec![config_map(crate::objects::Action::Unchanged)]);
    let same_revision = Facts {
        previous_revision: Some("main@sha1:new".into()),
        ..facts()
    };
    for facts in [facts(), same_revision] {
        let conclusion = conclude(started(), &facts, &Ok(unchanged()));
        assert_eq!(
            conclusion.event,
            Some(Event {
                type_: EventType::Normal,
                reason: reason::SUCCEEDED,
                message: "Reconciliation finished in 1.5s, next run in 10m0s".into(),
                meta: EventMeta {
                    revision: Some("main@sha1:new".into()),
                    origin_revision: Some("v1.2.3@sha1:abc".into()),
                    commit_status: true,
                },
            })
        );
    }
}

#[test]
fn a_handled_request_is_recorded_whatever_the_outcome() {
    let requested = Facts {
        requested_at: Some("2026-11-23T10:00:00Z".into()),
        ..facts()
    };
    let ok = conclude(started(), &requested, &Ok(applied(vec![])));
    assert_eq!(
        ok.status.last_handled_reconcile_at.as_deref(),
        Some("2026-11-23T10:00:00Z")
    );
    let failed = conclude(
        started(),
        &requested,
        &Err(StepError::Source(source_not_found()).into()),
    );
    assert_eq!(
        failed.status.last_handled_reconcile_at.as_deref(),
        Some("2026-11-23T10:00:00Z")
    );
}

/// Every step failure: its reason, whether it stalls, and when it runs again.
#[tokio::test]
async fn every_step_failure_maps_to_its_flux_reason_stall_and_requeue() {
    let stopped = {
        let task = tokio::spawn(std::future::pending::<()>());
        task.abort();
        task.await.unwrap_err()
    };
    let cases: Vec<(StepError, &str, bool, Next)> = vec![
        (
            StepError::CrossNamespaceSource {
                kind: "GitRepository",
                namespace: "other".into(),
                name: "repo".into(),
            },
            reason::ACCESS_DENIED,
            true,
            Next::OnChange,
        ),
        (
            StepError::SourceNotFound {
                kind: SourceKind::GitRepository,
                namespace: "flux-system".into(),
                name: "repo".into(),
                direct: false,
                namespaced_ref: true,
            },
            reason::ARTIFACT_FAILED,
            false,
            Next::After(RETRY),
        ),
        (
            StepError::SourceNotReady(SourceError::NoArtifact {
                kind: "GitRepository",
                namespace: "flux-system".into(),
                name: "repo".into(),
            }),
            reason::ARTIFACT_FAILED,
            false,
            Next::After(DEPENDENCY),
        ),
        (
            StepError::Source(SourceError::PathNotFound("./apps".into())),
            reason::ARTIFACT_FAILED,
            false,
            Next::After(RETRY),
        ),
        (
            StepError::Dependency(DependencyError::NotReady {
                id: "apps/infra".into(),
            }),
            reason::DEPENDENCY_NOT_READY,
            false,
            Next::After(DEPENDENCY),
        ),
        (
            StepError::Dependency(DependencyError::InvalidReadyExpr {
                name: "infra".into(),
                expression: "(".into(),
                reason: "syntax".into(),
            }),
            reason::INVALID_CEL,
            true,
            Next::OnChange,
        ),
        (
            StepError::Dependency(DependencyError::ReadyExprNotBoolean {
                name: "infra".into(),
                expression: "1".into(),
                output: Some("int".into()),
            }),
            reason::INVALID_CEL,
            true,
            Next::OnChange,
        ),
        (
            StepError::BuildInputs(InputError::DecryptionSecretNotFound {
                name: "sops".into(),
            }),
            reason::BUILD_FAILED,
            false,
            Next::After(RETRY),
        ),
        (
            StepError::Build(ManifestError::Path("./missing".into())),
            reason::BUILD_FAILED,
            false,
            Next::After(RETRY),
        ),
        // Flux refuses a still-encrypted Secret at its apply step.
        (
            StepError::Build(ManifestError::EncryptedSecret(
                crate::sops::EncryptedSecret {
                    object: "Secret/apps/creds".into(),
                },
            )),
            reason::FAILED,
            false,
            Next::After(RETRY),
        ),
        (
            StepError::BuildStopped(stopped),
            reason::BUILD_FAILED,
            false,
            Next::After(RETRY),
        ),
        (
            StepError::Client(ClientError::SecretNotFound {
                secret: "apps/kubeconfig".into(),
                name: "kubeconfig".into(),
            }),
            reason::FAILED,
            false,
            Next::After(RETRY),
        ),
        (
            StepError::InvalidIgnoreRule(IgnoreRuleError::NotAPointer("spec".into())),
            reason::FAILED,
            true,
            Next::OnChange,
        ),
        (
            StepError::Apply(ApplyError::WaitTimeout(vec!["Namespace/apps".into()])),
            reason::FAILED,
            false,
            Next::After(RETRY),
        ),
        (
            StepError::Inventory(InventoryError::Overflow {
                namespace: "apps".into(),
                name: "web".into(),
                source: OverflowError::MalformedLine("forbidden".into()),
            }),
            reason::FAILED,
            false,
            Next::After(RETRY),
        ),
        (
            StepError::StaleObjects(InventoryError::Parse {
                id: "bad".into(),
                reason: "fields".into(),
            }),
            reason::PRUNE_FAILED,
            false,
            Next::After(RETRY),
        ),
        (
            StepError::Prune(vec!["ConfigMap/apps/old delete failed: forbidden".into()]),
            reason::PRUNE_FAILED,
            false,
            Next::After(RETRY),
        ),
        (
            StepError::InvalidHealthExpression(HealthError::InvalidExpression {
                index: 0,
                field: "Current",
                expression: "(".into(),
                reason: "syntax".into(),
            }),
            reason::INVALID_CEL,
            true,
            Next::OnChange,
        ),
        (
            StepError::Health {
                error: HealthError::Timeout(vec!["Deployment/apps/web".into()]),
                after: Duration::from_millis(30_012),
            },
            reason::HEALTH_CHECK_FAILED,
            false,
            Next::After(RETRY),
        ),
    ];
    for (error, expected_reason, stalls, next) in cases {
        let message = error.to_string();
        // As Flux's reconcile returns it: only a client failure says so before its cause.
        let announced = if matches!(error, StepError::Client(_)) {
            format!("failed to build kube client: {message}")
        } else {
            message.clone()
        };
        let conclusion = fail(error, Some("sha256:built"));
        let status = &conclusion.status;
        assert_eq!(
            condition(status, READY).map(|(state, _)| state),
            Some("False"),
            "{message}"
        );
        assert_eq!(
            condition(status, READY),
            Some(("False", expected_reason)),
            "{message}"
        );
        let ready_message = &status::get(status, READY).unwrap().message;
        if expected_reason == reason::ARTIFACT_FAILED && message.starts_with("Source") {
            // A source not ready says when it is tried again (see below).
            assert_eq!(*ready_message, format!("{message}, retrying in 30s"));
        } else {
            assert_eq!(*ready_message, message);
        }
        if stalls {
            assert_eq!(
                condition(status, STALLED),
                Some(("True", expected_reason)),
                "{message}"
            );
            assert_eq!(condition(status, RECONCILING), None, "{message}");
            // As Flux, only a terminal expression error observes the generation.
            let observed = if expected_reason == reason::INVALID_CEL {
                3
            } else {
                started().observed_generation
            };
            assert_eq!(status.observed_generation, observed, "{message}");
        } else {
            assert_eq!(condition(status, STALLED), None, "{message}");
            assert_eq!(
                condition(status, RECONCILING),
                Some(("True", reason::PROGRESSING_WITH_RETRY)),
                "{message}"
            );
            assert_eq!(
                status.observed_generation,
                started().observed_generation,
                "a retrying failure has not observed the generation: {message}"
            );
        }
        let healthy = (expected_reason == reason::HEALTH_CHECK_FAILED)
            .then_some(("False", reason::HEALTH_CHECK_FAILED));
        assert_eq!(condition(status, HEALTHY), healthy, "{message}");
        assert_eq!(conclusion.next, next, "{message}");
        assert_eq!(status.last_applied_revision, None, "{message}");
        let Some(event) = conclusion.event else {
            assert!(
                message.starts_with("Source") || message.ends_with("\"repo\" not found"),
                "only a source not there yet is quiet: {message}"
            );
            continue;
        };
        assert_eq!(event.reason, expected_reason);
        if expected_reason == reason::DEPENDENCY_NOT_READY {
            assert_eq!(event.type_, EventType::Normal);
            assert_eq!(
                event.message,
                "Dependencies do not meet ready condition, retrying in 30s"
            );
        } else {
            assert_eq!(event.type_, EventType::Warning, "{message}");
            assert_eq!(event.message, announced, "{message}");
        }
        assert_eq!(event.meta.revision.as_deref(), Some("main@sha1:new"));
        assert!(!event.meta.commit_status);
    }
}

#[test]
fn failures_after_a_build_enter_the_history_and_earlier_ones_do_not() {
    let before_build = fail(StepError::Source(source_not_found()), None);
    assert!(before_build.status.history.is_empty());
    let after_build = fail(
        StepError::Health {
            error: HealthError::Failed(vec!["Deployment/apps/web".into()]),
            after: Duration::from_secs(2),
        },
        Some("sha256:built"),
    );
    let history = &after_build.status.history;
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].digest, "sha256:built");
    assert_eq!(
        history[0].last_reconciled_status,
        reason::HEALTH_CHECK_FAILED
    );
    assert_eq!(
        history[0].metadata.as_ref().unwrap()["revision"],
        "main@sha1:new"
    );
}

#[test]
fn a_healthy_condition_survives_failures_other_than_health() {
    let mut status = started();
    status::set(
        &mut status,
        HEALTHY,
        "True",
        reason::HEALTH_SUCCEEDED,
        "Health check passed in 0.100s",
        Some(3),
    );
    let conclusion = conclude(
        status,
        &facts(),
        &Err(StepError::Prune(vec!["gone wrong".into()]).into()),
    );
    assert_eq!(
        condition(&conclusion.status, HEALTHY),
        Some(("True", reason::HEALTH_SUCCEEDED))
    );
}

#[test]
fn a_stalled_kustomization_recovers_when_a_later_reconciliation_succeeds() {
    let stalled = fail(
        StepError::InvalidIgnoreRule(IgnoreRuleError::NotAPointer("spec".into())),
        None,
    );
    let mut next = stalled.status;
    begin(&mut next, "Fetching manifests", Some(4));
    assert_eq!(condition(&next, STALLED), None);
    let conclusion = conclude(
        next,
        &Facts {
            generation: Some(4),
            ..facts()
        },
        &Ok(applied(vec![])),
    );
    assert_eq!(
        condition(&conclusion.status, READY),
        Some(("True", reason::SUCCEEDED))
    );
    assert_eq!(conclusion.status.observed_generation, 4);
    assert_eq!(condition(&conclusion.status, STALLED), None);
}

/// As Flux: a source that is missing or has no artifact yet is retried quietly (no event,
/// so no notification every retry), with Ready false and ArtifactFailed.
#[test]
fn a_missing_or_unready_source_is_retried_without_an_event() {
    let missing = fail(
        StepError::SourceNotFound {
            kind: SourceKind::GitRepository,
            namespace: "flux-system".into(),
            name: "repo".into(),
            direct: false,
            namespaced_ref: true,
        },
        None,
    );
    assert!(missing.event.is_none());
    assert_eq!(missing.next, Next::After(RETRY));
    assert_eq!(
        condition(&missing.status, READY),
        Some(("False", reason::ARTIFACT_FAILED))
    );
    let message = &status::get(&missing.status, READY).unwrap().message;
    assert_eq!(
        message, "GitRepository.source.toolkit.fluxcd.io \"repo\" not found",
        "the NotFound of controller-runtime's cache, as Flux's Ready says it"
    );
    let unready = fail(StepError::SourceNotReady(no_artifact()), None);
    assert!(unready.event.is_none());
    assert_eq!(unready.next, Next::After(DEPENDENCY));
    let broken = fail(StepError::Source(source_not_found()), None);
    assert!(
        broken.event.is_some(),
        "other source failures are announced"
    );
}

/// As Flux: a source that could not be read (the API server failed) says so on Ready with
/// ArtifactFailed, sends no event, and goes back to the work queue for backoff, where
/// controller-runtime's "Reconciler error" is the only line logged.
#[test]
fn an_unreadable_source_is_backed_off_without_an_event() {
    let status = kube::core::Status {
        message: "the server is currently unable to handle the request".into(),
        code: 503,
        ..Default::default()
    };
    let unreadable = fail(
        StepError::SourceUnreadable {
            namespace: "flux-system".into(),
            name: "repo".into(),
            source: Box::new(kube::Error::Api(Box::new(status))),
        },
        None,
    );
    assert!(unreadable.event.is_none());
    assert_eq!(unreadable.next, Next::Backoff);
    assert_eq!(unreadable.said, Said::Returned);
    assert_eq!(
        condition(&unreadable.status, READY),
        Some(("False", reason::ARTIFACT_FAILED))
    );
    assert_eq!(
        status::get(&unreadable.status, READY).unwrap().message,
        "unable to get source 'flux-system/repo': the server is currently unable to handle the request"
    );
}

/// Flux's CancelHealthCheckOnNewRevision outcome: Ready false with HealthCheckCanceled, an
/// informational event naming the trigger, no history entry, and the next run at once.
#[test]
fn cancelled_health_checks_requeue_at_once_without_history() {
    let conclusion = fail(
        StepError::HealthCheckCanceled {
            trigger: "GitRepository/flux-system/repo".into(),
        },
        Some("sha256:built"),
    );
    assert_eq!(
        condition(&conclusion.status, READY),
        Some(("False", reason::HEALTH_CHECK_CANCELED))
    );
    assert_eq!(
        status::get(&conclusion.status, READY).unwrap().message,
        "New reconciliation triggered by GitRepository/flux-system/repo"
    );
    assert!(conclusion.status.history.is_empty());
    assert_eq!(conclusion.next, Next::After(Duration::ZERO));
    let event = conclusion.event.unwrap();
    assert_eq!(event.type_, EventType::Normal);
    assert_eq!(
        event.message,
        "Health checks canceled due to new reconciliation triggered by GitRepository/flux-system/repo"
    );
}

/// The line each outcome ends with in the log, in the words of Flux's reconciler (and of
/// controller-runtime for terminal errors).
#[test]
fn every_outcome_ends_with_fluxs_log_line() {
    let finished = conclude(started(), &facts(), &Ok(applied(Vec::new())));
    assert_eq!(
        finished.said,
        Said::Finished {
            message: "Reconciliation finished in 1.5s, next run in 10m0s".into(),
            revision: "main@sha1:new".into(),
        }
    );
    let waiting = |message: &str| Said::Waiting {
        message: message.into(),
    };
    let cases = [
        (
            StepError::SourceNotFound {
                kind: SourceKind::GitRepository,
                namespace: "flux-system".into(),
                name: "repo".into(),
                direct: false,
                namespaced_ref: true,
            },
            waiting("Source 'GitRepository/flux-system/repo' not found"),
        ),
        (
            StepError::SourceNotFound {
                kind: SourceKind::OCIRepository,
                namespace: "flux-system".into(),
                name: "repo".into(),
                direct: true,
                namespaced_ref: false,
            },
            waiting("Source 'OCIRepository/repo' not found"),
        ),
        (
            StepError::SourceNotReady(no_artifact()),
            waiting("Source artifact not found, retrying in 30s"),
        ),
        (
            StepError::SourceNotReady(artifact_missing()),
            waiting("Source is not ready, artifact not found, retrying in 30s"),
        ),
        (
            StepError::Dependency(DependencyError::NotReady {
                id: "apps/db".into(),
            }),
            waiting("Dependencies do not meet ready condition, retrying in 30s"),
        ),
        (
            StepError::HealthCheckCanceled {
                trigger: "GitRepository/flux-system/repo".into(),
            },
            Said::Canceled {
                trigger: "GitRepository/flux-system/repo".into(),
            },
        ),
        (
            StepError::WorkloadIdentityDisabled,
            Said::GateDisabled {
                message: StepError::WorkloadIdentityDisabled.to_string(),
                error: "ObjectLevelWorkloadIdentity feature gate is not enabled".into(),
            },
        ),
        (
            StepError::CrossNamespaceSource {
                kind: "GitRepository",
                namespace: "other".into(),
                name: "repo".into(),
            },
            Said::Terminal {
                error: "terminal error: can't access 'GitRepository/other/repo', cross-namespace references have been blocked".into(),
            },
        ),
        (
            StepError::Dependency(DependencyError::InvalidReadyExpr {
                name: "db".into(),
                expression: "dep.".into(),
                reason: "Syntax error".into(),
            }),
            Said::Terminal {
                error: "terminal error: failed to evaluate dependency db: failed to parse the CEL expression 'dep.': Syntax error".into(),
            },
        ),
        (
            StepError::Prune(vec![
                "ConfigMap/apps/settings delete failed: forbidden".into(),
                "Secret/apps/token query failed: forbidden".into(),
            ]),
            Said::Failed {
                message: "Reconciliation failed after 1.5s, next try in 1m0s".into(),
                revision: Some("main@sha1:new".into()),
                // fluxcd/pkg's DeleteAll, each error closed by a `;`.
                error: "delete failed, errors: ConfigMap/apps/settings delete failed: forbidden;Secret/apps/token query failed: forbidden;".into(),
            },
        ),
    ];
    for (error, said) in cases {
        assert_eq!(fail(error, None).said, said);
    }
}

/// As Flux: waiting for a source or a dependency fails before the reconciliation proper
/// begins, so only Ready changes (False, with the reason); a Reconciling condition left by an
/// earlier run gets the retry reason and keeps its message, and none is added.
#[test]
fn waiting_for_a_source_or_a_dependency_changes_only_ready() {
    let waits = || {
        [
            (
                StepError::SourceNotFound {
                    kind: SourceKind::GitRepository,
                    namespace: "flux-system".into(),
                    name: "repo".into(),
                    direct: false,
                    namespaced_ref: true,
                },
                reason::ARTIFACT_FAILED,
            ),
            (
                StepError::SourceNotReady(source_not_found()),
                reason::ARTIFACT_FAILED,
            ),
            (
                StepError::Dependency(DependencyError::NotReady {
                    id: "apps/db".into(),
                }),
                reason::DEPENDENCY_NOT_READY,
            ),
        ]
    };
    let waiting = |status: KustomizationStatus, error: StepError| {
        conclude(status, &facts(), &Err(Failed::from(error))).status
    };
    for (error, ready_reason) in waits() {
        let fresh = waiting(KustomizationStatus::default(), error);
        let types: Vec<&str> = fresh.conditions.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(types, [READY], "{ready_reason}");
        assert_eq!(condition(&fresh, READY), Some(("False", ready_reason)));
    }
    let mut earlier = KustomizationStatus::default();
    begin(&mut earlier, "Running health checks", Some(2));
    status::set(
        &mut earlier,
        STALLED,
        "True",
        reason::INVALID_CEL,
        "x",
        Some(2),
    );
    for (error, ready_reason) in waits() {
        let after = waiting(earlier.clone(), error);
        assert_eq!(condition(&after, READY), Some(("False", ready_reason)));
        let reconciling = status::get(&after, RECONCILING).unwrap();
        assert_eq!(
            (reconciling.reason.as_str(), reconciling.message.as_str()),
            (reason::PROGRESSING_WITH_RETRY, "Running health checks")
        );
        assert_eq!(
            condition(&after, STALLED),
            Some(("True", reason::INVALID_CEL))
        );
    }
}

/// Ready's message when the source is missing or not ready, in Flux's words: the client's
/// NotFound (controller-runtime's cache names the kind, the API server the resource, with
/// DirectSourceFetch), and the retry for a source without its artifact.
#[test]
fn a_missing_or_unready_source_says_what_fluxs_ready_says() {
    let missing = |direct| StepError::SourceNotFound {
        kind: SourceKind::Bucket,
        namespace: "flux-system".into(),
        name: "data".into(),
        direct,
        namespaced_ref: false,
    };
    let cases = [
        (
            missing(false),
            r#"Bucket.source.toolkit.fluxcd.io "data" not found"#,
        ),
        (
            missing(true),
            r#"buckets.source.toolkit.fluxcd.io "data" not found"#,
        ),
        (
            StepError::SourceNotReady(no_artifact()),
            "Source artifact not found, retrying in 30s",
        ),
        (
            StepError::SourceNotReady(artifact_missing()),
            "Source is not ready, artifact not found, retrying in 30s",
        ),
    ];
    for (error, expected) in cases {
        let conclusion = fail(error, None);
        let ready = status::get(&conclusion.status, READY).unwrap();
        assert_eq!(ready.message, expected);
        assert_eq!(ready.reason, reason::ARTIFACT_FAILED);
    }
}

/// Flux's checkHealth: Healthy carries the checks' message; Ready, the event and the log
/// say how long the checks ran before they failed.
#[test]
fn a_failed_health_check_says_after_how_long_as_flux() {
    let conclusion = fail(
        StepError::Health {
            error: HealthError::Timeout(vec!["Deployment/apps/web status: 'InProgress'".into()]),
            after: Duration::from_millis(30_012),
        },
        Some("sha256:built"),
    );
    let checks = "timeout waiting for: [Deployment/apps/web status: 'InProgress']";
    let ready = status::get(&conclusion.status, READY).unwrap();
    assert_eq!(
        ready.message,
        format!("health check failed after 30.012s: {checks}")
    );
    assert_eq!(
        status::get(&conclusion.status, HEALTHY).unwrap().message,
        checks
    );
    assert_eq!(conclusion.event.unwrap().message, ready.message);
}

/// Flux's apply: a failure says its error, then the objects the stages before it changed, a
/// line each (so the message ends in a newline even when none did).
#[test]
fn a_failed_apply_says_what_it_changed_before_it_failed_as_flux() {
    let error = || ApplyError::Apply {
        subject: "ConfigMap/apps/settings".into(),
        message: "refused".into(),
    };
    let cases = [
        (
            String::new(),
            "ConfigMap/apps/settings apply failed: refused\n",
        ),
        (
            "Namespace/apps created\nClusterRole/reader configured\n".to_string(),
            "ConfigMap/apps/settings apply failed: refused\nNamespace/apps created\nClusterRole/reader configured\n",
        ),
    ];
    for (changed, expected) in cases {
        let conclusion = fail(
            StepError::ApplyFailed {
                error: error(),
                changed,
            },
            None,
        );
        let ready = status::get(&conclusion.status, READY).unwrap();
        assert_eq!(ready.message, expected);
        assert_eq!(ready.reason, reason::FAILED);
        assert_eq!(conclusion.event.unwrap().message, expected);
    }
}

/// Flux's reconcile marks Ready with the client's error and returns it wrapped: the event and
/// the log say "failed to build kube client: …". The client is made before the build, so its
/// failure enters no history.
#[test]
fn a_client_that_cannot_be_made_is_reported_as_flux_reports_it() {
    let error = ClientError::SecretNotFound {
        secret: "apps/kubeconfig".into(),
        name: "kubeconfig".into(),
    };
    let bare = error.to_string();
    let conclusion = fail(StepError::Client(error), None);
    let ready = status::get(&conclusion.status, READY).unwrap();
    assert_eq!(ready.message, bare);
    assert_eq!(ready.reason, reason::FAILED);
    let reported = format!("failed to build kube client: {bare}");
    assert_eq!(conclusion.event.unwrap().message, reported);
    assert!(
        matches!(&conclusion.said, Said::Failed { error, .. } if *error == reported),
        "{:?}",
        conclusion.said
    );
    assert!(conclusion.status.history.is_empty());
}

/// Flux's `finalizeStatus` on a suspended Kustomization, by the state it was left in.
#[test]
fn a_suspended_kustomization_is_finalized_as_flux_finalizes_it() {
    let ready = || {
        let mut status = started();
        status::set(
            &mut status,
            READY,
            "True",
            reason::SUCCEEDED,
            "Applied",
            Some(2),
        );
        status.observed_generation = 2;
        status
    };
    let requested = Facts {
        requested_at: Some("2026-11-28T10:00:00Z".into()),
        ..facts()
    };
    let finalized = suspended(ready(), &requested);
    assert_eq!(
        finalized.observed_generation, 3,
        "the suspension's generation"
    );
    assert_eq!(condition(&finalized, RECONCILING), None);
    assert_eq!(
        condition(&finalized, READY),
        Some(("True", reason::SUCCEEDED))
    );
    assert_eq!(
        finalized.last_handled_reconcile_at.as_deref(),
        Some("2026-11-28T10:00:00Z")
    );

    let mut failed = started();
    status::set(
        &mut failed,
        READY,
        "False",
        reason::BUILD_FAILED,
        "bad",
        Some(2),
    );
    failed.observed_generation = 1;
    let finalized = suspended(failed.clone(), &facts());
    assert_eq!(
        finalized.observed_generation, 1,
        "a failed one observes nothing new"
    );
    assert_eq!(
        condition(&finalized, RECONCILING),
        Some(("True", reason::PROGRESSING_WITH_RETRY))
    );
    assert_eq!(
        status::get(&finalized, RECONCILING).map(|c| c.message.as_str()),
        Some("Fetching manifests")
    );

    let never = suspended(KustomizationStatus::default(), &facts());
    assert_eq!(never, KustomizationStatus::default(), "nothing to write");
    let mut current = ready();
    status::remove(&mut current, RECONCILING);
    current.observed_generation = 3;
    assert_eq!(
        suspended(current.clone(), &facts()),
        current,
        "already final"
    );
}

/// Flux's deferred end after a deletion: a Ready Kustomization's last event is a success's.
#[test]
fn a_finalized_ready_kustomization_ends_as_a_success_does() {
    let mut ready = started();
    status::set(
        &mut ready,
        READY,
        "True",
        reason::SUCCEEDED,
        "Applied",
        Some(3),
    );
    ready.last_applied_revision = Some("main@sha1:new".into());
    let (event, said) = finalized(&ready, false, Duration::from_millis(12), INTERVAL).unwrap();
    assert_eq!(event.type_, EventType::Normal);
    assert_eq!(event.reason, reason::SUCCEEDED);
    assert_eq!(
        event.message,
        "Reconciliation finished in 12ms, next run in 10m0s"
    );
    assert!(event.meta.commit_status);
    assert_eq!(
        said,
        Said::Finished {
            message: event.message.clone(),
            revision: "main@sha1:new".into()
        }
    );
    assert!(
        finalized(&ready, true, Duration::ZERO, INTERVAL).is_none(),
        "suspended"
    );
    let mut failed = started();
    status::set(
        &mut failed,
        READY,
        "False",
        reason::BUILD_FAILED,
        "bad",
        Some(3),
    );
    assert!(finalized(&failed, false, Duration::ZERO, INTERVAL).is_none());
}
