//! How a reconciliation step fails. Each variant carries its Flux condition reason, whether
//! the failure stalls the Kustomization (only a spec change can help) and how it is retried,
//! so that turning a failure into conditions is one `match` (see `outcome`).

use crate::apply::{ApplyError, IgnoreRuleError};
use crate::controller::dependencies::DependencyError;
use crate::controller::drift_mode::ModeError;
use crate::controller::inputs::InputError;
use crate::controller::manifests::ManifestError;
use crate::controller::prune_guard::{ThresholdError, Tripped};
use crate::controller::remote::ClientError;
use crate::controller::status::reason;
use crate::health::HealthError;
use crate::inventory::InventoryError;
use crate::source::SourceError;

/// A failed step of the reconciliation, in Flux's words.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    #[error(
        "can't access '{kind}/{namespace}/{name}', cross-namespace references have been blocked"
    )]
    CrossNamespaceSource {
        kind: &'static str,
        namespace: String,
        name: String,
    },
    #[error(
        "can't access 'ExternalArtifact/{namespace}/{name}', ExternalArtifact feature gate is disabled"
    )]
    ExternalArtifactDisabled { namespace: String, name: String },
    /// `spec.decryption.serviceAccountName` while the ObjectLevelWorkloadIdentity gate is off
    /// (Flux's words).
    #[error(
        "to use spec.decryption.serviceAccountName for decryption authentication please enable the ObjectLevelWorkloadIdentity feature gate in the controller"
    )]
    WorkloadIdentityDisabled,
    /// The source object does not exist: retried after the retry interval, as Flux. Its
    /// message is the client's NotFound, as Flux's Ready condition carries it: the kind for
    /// a read from the watch (controller-runtime's cache), the resource for one from the
    /// API server (`direct`, the DirectSourceFetch gate).
    #[error("{}.source.toolkit.fluxcd.io \"{name}\" not found", not_found_resource(.kind, *.direct))]
    SourceNotFound {
        kind: crate::api::SourceKind,
        namespace: String,
        name: String,
        direct: bool,
        /// Whether `sourceRef` names the namespace (Flux's log line names it only then).
        namespaced_ref: bool,
    },
    /// The source has no artifact yet, or its file is gone: source-controller will publish
    /// it, so it is retried after `--requeue-dependency`. In Flux's words (the outcome adds
    /// when it is tried again).
    #[error("{}", not_ready(.0))]
    SourceNotReady(SourceError),
    /// The source object could not be read (the API server did not answer, or refused):
    /// as Flux, no event; the error goes back to the work queue for backoff. Flux's words.
    #[error("unable to get source '{namespace}/{name}': {}", crate::report::api_message(.source))]
    SourceUnreadable {
        namespace: String,
        name: String,
        source: Box<kube::Error>,
    },
    #[error("{0}")]
    Source(SourceError),
    #[error("{0}")]
    Dependency(DependencyError),
    #[error("{0}")]
    BuildInputs(InputError),
    #[error("{0}")]
    Build(ManifestError),
    #[error("build stopped: {0}")]
    BuildStopped(tokio::task::JoinError),
    #[error("{0}")]
    Client(ClientError),
    #[error("{0}")]
    InvalidIgnoreRule(IgnoreRuleError),
    #[error("{0}")]
    Apply(ApplyError),
    /// An apply that failed part way, as Flux's says it: the error, then a line for each
    /// object the stages before it changed (`changed`, each line ending in a newline).
    #[error("{error}\n{changed}")]
    ApplyFailed { error: ApplyError, changed: String },
    #[error("{0}")]
    Inventory(InventoryError),
    #[error("{0}")]
    StaleObjects(InventoryError),
    /// Beyond Flux: the drift detection annotation is neither `warn` nor `correct`.
    #[error("{0}")]
    InvalidDriftMode(ModeError),
    /// Beyond Flux: the prune guard's annotation is not a threshold.
    #[error("annotation {key}: {0}", key = crate::controller::prune_guard::GUARD)]
    InvalidPruneGuard(ThresholdError),
    /// Beyond Flux: the prune guard stopped a prune; what was built is applied, and the
    /// objects it would have deleted stay in the inventory.
    #[error("{0}")]
    PruneGuarded(Tripped),
    /// Beyond Flux: the honoured confirmation could not be recorded, so nothing was pruned.
    #[error(
        "prune guard: recording the confirmation in annotation {key} failed, nothing was pruned: {0}",
        key = crate::controller::prune_guard::HONOURED
    )]
    PruneConfirmation(kube::Error),
    /// Stale objects whose deletion failed; they stay in the inventory.
    /// In fluxcd/pkg's DeleteAll words ([`crate::inventory::delete_failed`]).
    #[error("{}", crate::inventory::delete_failed(.0))]
    Prune(Vec<String>),
    #[error("Reconciliation failed terminally due to configuration error: {0}")]
    InvalidHealthExpression(HealthError),
    /// The health checks failed `after` so long: Ready says so, as Flux's does; Healthy
    /// carries the checks' own message.
    #[error("health check failed after {}: {error}", crate::api::GoDuration::from_std(*.after))]
    Health {
        error: HealthError,
        after: std::time::Duration,
    },
    /// A new source revision arrived while health checks ran (CancelHealthCheckOnNewRevision).
    #[error("New reconciliation triggered by {trigger}")]
    HealthCheckCanceled { trigger: String },
    /// The process is stopping: the health checks were left; the next leader runs them.
    #[error("health checks interrupted: the controller is stopping")]
    Interrupted,
}

/// When a failed reconciliation runs again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retry {
    /// After `spec.retryInterval` (else `spec.interval`).
    RetryInterval,
    /// After `--requeue-dependency`: something another controller provides is not there yet.
    DependencyInterval,
    /// Only when the Kustomization changes (stalled).
    OnChange,
    /// At once: a newer revision waits.
    Now,
    /// With the work queue's exponential backoff (`--min-retry-delay` to
    /// `--max-retry-delay`): a transient error handed back to the runtime, as Flux's
    /// reconcile returns it.
    Backoff,
}

impl StepError {
    /// The terminal error Flux's reconcile returns for a stall, as controller-runtime logs it
    /// ("terminal error: " and the cause).
    pub fn terminal_cause(&self) -> String {
        match self {
            StepError::InvalidHealthExpression(error) => format!("terminal error: {error}"),
            StepError::Dependency(error) => error
                .terminal_cause()
                .unwrap_or_else(|| format!("terminal error: {error}")),
            other => format!("terminal error: {other}"),
        }
    }

    /// What Flux's reconcile returns for this failure, when it differs from what Ready says:
    /// its event and log say this.
    pub fn reported(&self) -> Option<String> {
        match self {
            StepError::Client(error) => Some(format!("failed to build kube client: {error}")),
            _ => None,
        }
    }

    /// Flux's condition reason for this failure.
    pub fn reason(&self) -> &'static str {
        match self {
            StepError::CrossNamespaceSource { .. } | StepError::ExternalArtifactDisabled { .. } => {
                reason::ACCESS_DENIED
            }
            StepError::WorkloadIdentityDisabled => reason::FEATURE_GATE_DISABLED,
            StepError::SourceNotFound { .. }
            | StepError::SourceNotReady(_)
            | StepError::SourceUnreadable { .. }
            | StepError::Source(_) => reason::ARTIFACT_FAILED,
            StepError::Dependency(error) if error.is_invalid_expression() => reason::INVALID_CEL,
            StepError::Dependency(_) => reason::DEPENDENCY_NOT_READY,
            // Flux finds it at its apply step, before applying anything.
            StepError::Build(ManifestError::EncryptedSecret(_)) => reason::FAILED,
            StepError::BuildInputs(_) | StepError::Build(_) | StepError::BuildStopped(_) => {
                reason::BUILD_FAILED
            }
            StepError::Client(_)
            | StepError::InvalidIgnoreRule(_)
            | StepError::Apply(_)
            | StepError::ApplyFailed { .. }
            | StepError::Inventory(_) => reason::FAILED,
            StepError::StaleObjects(_) | StepError::Prune(_) | StepError::PruneConfirmation(_) => {
                reason::PRUNE_FAILED
            }
            StepError::InvalidPruneGuard(_) => reason::INVALID_PRUNE_GUARD,
            StepError::InvalidDriftMode(_) => reason::INVALID_DRIFT_MODE,
            StepError::PruneGuarded(_) => reason::PRUNE_GUARDED,
            StepError::InvalidHealthExpression(_) => reason::INVALID_CEL,
            StepError::Health { .. } => reason::HEALTH_CHECK_FAILED,
            StepError::HealthCheckCanceled { .. } | StepError::Interrupted => {
                reason::HEALTH_CHECK_CANCELED
            }
        }
    }

    /// Whether retrying cannot help until the Kustomization changes.
    pub fn stalls(&self) -> bool {
        match self {
            StepError::CrossNamespaceSource { .. }
            | StepError::ExternalArtifactDisabled { .. }
            | StepError::WorkloadIdentityDisabled
            | StepError::InvalidIgnoreRule(_)
            | StepError::InvalidHealthExpression(_)
            | StepError::InvalidPruneGuard(_)
            | StepError::InvalidDriftMode(_)
            | StepError::PruneGuarded(_) => true,
            StepError::Dependency(error) => error.is_invalid_expression(),
            _ => false,
        }
    }

    /// Whether the failure is announced with an event (and so a notification). As Flux, a
    /// source that is missing or not ready yet is only logged: it is retried quietly until
    /// source-controller catches up; one that could not be read is only logged too.
    pub fn announced(&self) -> bool {
        !matches!(
            self,
            StepError::SourceNotFound { .. }
                | StepError::SourceNotReady(_)
                | StepError::SourceUnreadable { .. }
        )
    }

    /// When to try again.
    pub fn retry(&self) -> Retry {
        if self.stalls() {
            return Retry::OnChange;
        }
        match self {
            StepError::SourceNotReady(_) | StepError::Dependency(_) => Retry::DependencyInterval,
            StepError::HealthCheckCanceled { .. } => Retry::Now,
            StepError::SourceUnreadable { .. } => Retry::Backoff,
            _ => Retry::RetryInterval,
        }
    }
}

/// A failed step, with the source revision once it was known (events carry it) and the
/// digest of the built objects once the build had succeeded (the history records builds, not
/// failures before one).
#[derive(Debug)]
pub struct Failed {
    pub error: StepError,
    pub revision: Option<String>,
    pub origin_revision: Option<String>,
    pub digest: Option<String>,
}

impl From<StepError> for Failed {
    fn from(error: StepError) -> Failed {
        Failed {
            error,
            revision: None,
            origin_revision: None,
            digest: None,
        }
    }
}

impl StepError {
    /// This failure, once the source was at `revision` (from `origin_revision`), and after
    /// the build that produced objects with `digest`, if it got that far.
    pub fn at(self, revision: &str, origin_revision: Option<&str>, digest: Option<&str>) -> Failed {
        Failed {
            error: self,
            revision: Some(revision.to_string()),
            origin_revision: origin_revision.map(str::to_string),
            digest: digest.map(str::to_string),
        }
    }
}

/// The resource a NotFound of a source names: its kind as controller-runtime's cache names
/// it, its plural as the API server does.
fn not_found_resource(kind: &crate::api::SourceKind, direct: bool) -> &'static str {
    if direct { kind.plural() } else { kind.as_str() }
}

/// Flux's words for a source that is not ready: one without an artifact yet, or whose
/// artifact's file is gone.
fn not_ready(error: &SourceError) -> &'static str {
    match error {
        SourceError::NoArtifact { .. } => "Source artifact not found",
        _ => "Source is not ready, artifact not found",
    }
}
