//! The steps of what a Kustomization opts into beyond Flux, with this controller's
//! annotations: the prune guard's threshold and drift detection in warn mode (the decisions
//! are the pure `prune_guard` and `drift_mode`).

use serde_json::Value;

use super::{EventMeta, EventType, Progress};
use crate::api::{Kustomization, KustomizationStatus};
use crate::apply::Applier;
use crate::controller::context::Context;
use crate::controller::drift_mode::{self, Mode};
use crate::controller::error::StepError;
use crate::controller::prune_guard;
use crate::objects::{Action, ChangeSet};

/// The prune guard's threshold for this Kustomization (see [`prune_guard`]): an annotation
/// that is not a threshold stalls it before its source is read.
pub(crate) fn prune_guard_threshold(
    object: &Kustomization,
    ctx: &Context,
) -> Result<Option<prune_guard::Threshold>, StepError> {
    prune_guard::threshold(
        ctx.options.prune_guard,
        ctx.options.prune_guard_default,
        annotation(object, prune_guard::GUARD),
    )
    .map_err(StepError::InvalidPruneGuard)
}

pub(super) fn annotation<'a>(object: &'a Kustomization, key: &str) -> Option<&'a str> {
    object
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// The drift detection mode (see [`drift_mode`]): an annotation that is neither `warn` nor
/// `correct` stalls the Kustomization before its source is read.
pub(crate) fn drift_mode(object: &Kustomization, ctx: &Context) -> Result<Mode, StepError> {
    drift_mode::mode(
        ctx.options.drift_warn_mode,
        annotation(object, drift_mode::MODE),
    )
    .map_err(StepError::InvalidDriftMode)
}

/// Drift detection in warn mode: the applier's plan, nothing written. The `Drifted`
/// condition, a Warning event and the gauge say what differs. What comes back is for the
/// health checks: the objects as they are, without those that are missing.
pub(crate) async fn detect_drift(
    progress: &Progress<'_>,
    applier: &Applier,
    objects: Vec<Value>,
    status: &mut KustomizationStatus,
    meta: &EventMeta,
) -> Result<ChangeSet, StepError> {
    let planned = applier.plan(objects).await.map_err(StepError::Apply)?;
    let report = drift_mode::report(&planned);
    let message = report_drift(progress, &report, status);
    if let Some(text) = report.event_message() {
        tracing::info!("{message}");
        progress.event(EventType::Warning, drift_mode::DRIFT_DETECTED, &text, meta);
    }
    let changes = planned
        .into_iter()
        .map(|planned| {
            let mut change = planned.change;
            change.action = match change.action {
                Action::Created => Action::Skipped,
                Action::Skipped => Action::Skipped,
                _ => Action::Unchanged,
            };
            change
        })
        .collect();
    Ok(ChangeSet { changes })
}

/// After an apply: in warn mode nothing is left drifted; otherwise drift is corrected and
/// not reported.
pub(crate) fn applied_without_drift(
    progress: &Progress<'_>,
    mode: Mode,
    status: &mut KustomizationStatus,
) {
    let (object, ctx) = (progress.object, progress.ctx);
    match mode {
        Mode::Warn => {
            report_drift(progress, &drift_mode::DriftReport::default(), status);
        }
        Mode::Correct => {
            crate::controller::status::remove(status, drift_mode::DRIFTED);
            ctx.metrics.set_drifted(object, None);
        }
    }
}

/// The `Drifted` condition and the gauge for `report`; the condition's message comes back.
fn report_drift(
    progress: &Progress<'_>,
    report: &drift_mode::DriftReport,
    status: &mut KustomizationStatus,
) -> String {
    let (object, ctx) = (progress.object, progress.ctx);
    let (value, reason, message) = report.condition();
    let generation = object.metadata.generation;
    crate::controller::status::set(
        status,
        drift_mode::DRIFTED,
        value,
        reason,
        &message,
        generation,
    );
    ctx.metrics.set_drifted(object, Some(report.drifted.len()));
    message
}
