//! One reconciliation of one Kustomization, as Flux's named steps: finalizer → suspend →
//! source → dependencies → fetch and build → apply → inventory and prune → health → status.
//! The steps live in `steps`; the final status, event and requeue come from the pure
//! `outcome::conclude`. Every step failure lands in the status with Flux's reason and an
//! event; only API errors outside the steps (finalizer, status writes) go back to the
//! runtime for backoff.
//!
//! This module owns the reconcile and what it decides with: `steps` and their `error`s,
//! `outcome` (pure, table-tested), `status`, `dependencies`, `deletion` (a pure plan and its
//! execution), `inputs` (keys and variables), `manifests` (the build), `cancel` and
//! `freshness` (when a run is superseded). What feeds it (watches, leader election,
//! clients, events, metrics) is in `runtime`.

pub mod build_cache;
pub(crate) mod cancel;
pub(crate) mod deletion;
pub(crate) mod dependencies;
pub mod drift_mode;
pub(crate) mod error;
mod fetch_build;
pub(crate) mod freshness;
pub(crate) mod inputs;
pub mod manifests;
pub mod outcome;
pub mod prune_guard;
pub mod status;
pub(crate) mod steps;

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use kube::api::{Api, Patch};
use kube::runtime::controller::Action;
use serde_json::json;
use tracing::Instrument;

use crate::api::{Kustomization, KustomizationStatus};
use crate::controller::KustomizationKey;
use crate::controller::context::Context;
use crate::controller::error::Failed;
use crate::controller::events::{EventMeta, EventType};
use crate::controller::runtime_metrics::ReconcileResult;
use crate::inventory::InventoryError;
use outcome::{Applied, Facts, Next};
use status::reason;
use steps::Progress;

pub const FINALIZER: &str = "finalizers.fluxcd.io";
pub const REQUESTED_AT: &str = "reconcile.fluxcd.io/requestedAt";

/// What goes back to the runtime (which retries with backoff): failures outside the steps.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("{0}")]
    Inventory(#[from] InventoryError),
    #[error("{0}")]
    Client(#[from] crate::controller::remote::ClientError),
    /// A step's transient failure, handed back for backoff as Flux's reconcile returns it
    /// (after the status says it).
    #[error("{0}")]
    Step(Box<crate::controller::error::StepError>),
    /// Objects whose deletion failed while finalizing.
    /// In fluxcd/pkg's DeleteAll words ([`crate::inventory::delete_failed`]).
    #[error("{}", crate::inventory::delete_failed(.0))]
    Prune(Vec<String>),
    /// A reconciliation that panicked, recovered as controller-runtime recovers Flux's
    /// (`RecoverPanic`): the object is backed off, the process goes on.
    #[error("panic: {0} [recovered]")]
    Panic(String),
}

fn jittered(interval: std::time::Duration, percentage: u8) -> std::time::Duration {
    if percentage == 0 {
        return interval;
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let spread = f64::from(percentage) / 100.0;
    let unit = f64::from(nanos % 10_000) / 10_000.0 * 2.0 - 1.0;
    interval.mul_f64((1.0 + unit * spread).max(0.0))
}

pub async fn reconcile(
    object: Arc<Kustomization>,
    ctx: Arc<Context>,
) -> Result<Action, ReconcileError> {
    let span = reconcile_span(&object);
    async {
        let result = reconcile_timed(&object, &ctx).await;
        if let Err(error) = &result {
            // controller-runtime's line for an error handed back to it for backoff.
            tracing::error!(error = %error, "Reconciler error");
        }
        result
    }
    .instrument(span)
    .await
}

/// The keys controller-runtime puts on every line of a reconciliation, which `flux logs`
/// selects on. The span is at `error` level so that it is on whatever `--log-level` lets
/// through.
fn reconcile_span(object: &Kustomization) -> tracing::Span {
    let namespace = object.metadata.namespace.as_deref().unwrap_or("");
    let name = object.metadata.name.as_deref().unwrap_or("");
    let reference = json!({"name": name, "namespace": namespace}).to_string();
    tracing::error_span!(
        "reconcile",
        controller = "kustomization",
        controllerGroup = "kustomize.toolkit.fluxcd.io",
        controllerKind = "Kustomization",
        json.Kustomization = %reference,
        namespace,
        name,
        reconcileID = %crate::logging::reconcile_id(),
    )
}

async fn reconcile_timed(object: &Kustomization, ctx: &Context) -> Result<Action, ReconcileError> {
    let key = KustomizationKey::of(object);
    let started = Instant::now();
    let _running = ctx.metrics.running();
    let timing = ctx.metrics.runtime.start(&key);
    let deleting = object.metadata.deletion_timestamp.is_some();
    let run = async {
        if deleting {
            crate::controller::deletion::finalize(object, ctx)
                .await
                .map(|()| ReconcileResult::Success)
        } else {
            reconcile_live(object, ctx).await
        }
    };
    // A bug in one reconciliation must not take every other Kustomization down with the
    // process: its panic becomes its error, as controller-runtime's RecoverPanic makes it.
    let result = match recovered(run).await {
        Ok(result) => result,
        Err(panic) => {
            ctx.metrics.runtime.panicked();
            // What the panicking run left behind is not trusted: its next build starts over.
            if let Some(cache) = &ctx.options.build_cache {
                cache.forget(&key);
            }
            Err(ReconcileError::Panic(panic))
        }
    };
    if deleting && result.is_ok() {
        // As Flux's recorder: the series of an object whose finalizer is gone is deleted.
        ctx.metrics.forget(object);
    } else {
        ctx.metrics.observe_reconcile(object, started.elapsed());
    }
    match result {
        Ok(outcome) => {
            ctx.metrics.runtime.finish(timing, outcome);
            ctx.reset_backoff(&key);
            Ok(match outcome {
                ReconcileResult::Requeue => Action::requeue(Duration::ZERO),
                ReconcileResult::RequeueAfter(delay) => Action::requeue(delay),
                _ => Action::await_change(),
            })
        }
        Err(error) => {
            ctx.metrics.runtime.finish(timing, ReconcileResult::Error);
            Err(error)
        }
    }
}

/// Runs `run` to its end, or to its panic, caught as what it said.
async fn recovered<T>(run: impl std::future::Future<Output = T>) -> Result<T, String> {
    std::panic::AssertUnwindSafe(run)
        .catch_unwind()
        .await
        .map_err(|payload| panic_message(payload.as_ref()))
}

/// What a panic said (its `&str` or `String` payload).
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|text| text.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

pub fn error_policy(
    object: Arc<Kustomization>,
    _error: &ReconcileError,
    ctx: Arc<Context>,
) -> Action {
    let key = KustomizationKey::of(&object);
    let delay = ctx.backoff(&key);
    // At the default priority: controller-runtime keeps the item's own, which only an item of
    // the initial listing that failed would tell apart.
    ctx.metrics.runtime.queue.add_after(
        &key,
        delay,
        crate::controller::work_queue::DEFAULT_PRIORITY,
    );
    Action::requeue(delay)
}

/// Writes the line a reconciliation ends with.
/// Records an outcome's event about the Kustomization.
pub(super) fn publish(ctx: &Context, object: &Kustomization, event: &outcome::Event) {
    ctx.recorder.publish(
        object,
        event.type_,
        event.reason,
        &event.message,
        &event.meta,
    );
}

pub(super) fn say(said: &outcome::Said) {
    match said {
        outcome::Said::Finished { message, revision } => {
            tracing::info!(%revision, "{message}");
        }
        outcome::Said::Failed {
            message,
            revision,
            error,
        } => {
            let revision = revision.as_deref().unwrap_or("");
            tracing::error!(%revision, %error, "{message}");
        }
        outcome::Said::Waiting { message } => tracing::info!("{message}"),
        outcome::Said::Canceled { trigger } => {
            tracing::info!(%trigger, "New reconciliation triggered, canceling health checks");
        }
        outcome::Said::Terminal { error } => tracing::error!(%error, "Reconciler error"),
        outcome::Said::GateDisabled { message, error } => tracing::error!(%error, "{message}"),
        // The runtime logs the error it is handed.
        outcome::Said::Returned => {}
    }
}

/// Finalizer: ours is on the object before anything is applied, so deletion can clean up.
/// The object as it is after that.
async fn ensure_finalizer<'a>(
    object: Cow<'a, Kustomization>,
    api: &Api<Kustomization>,
    ctx: &Context,
) -> Result<Cow<'a, Kustomization>, ReconcileError> {
    if object
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == FINALIZER)
    {
        return Ok(object);
    }
    let mut finalizers = object.metadata.finalizers.clone().unwrap_or_default();
    finalizers.push(FINALIZER.to_string());
    let patch = json!({"metadata": {"finalizers": finalizers, "resourceVersion": object.metadata.resource_version}});
    // Flux's patcher writes the finalizer as it writes the status, as the status manager.
    let params = ctx.options.status_writes();
    let patched = api
        .patch(
            object.metadata.name.as_deref().unwrap_or(""),
            &params,
            &Patch::Merge(patch),
        )
        .await?;
    ctx.own_writes
        .record(&KustomizationKey::of(&patched), &patched);
    Ok(Cow::Owned(patched))
}

async fn reconcile_live(
    cached: &Kustomization,
    ctx: &Context,
) -> Result<ReconcileResult, ReconcileError> {
    let namespace = cached.metadata.namespace.clone().unwrap_or_default();
    let name = cached.metadata.name.clone().unwrap_or_default();
    let api: Api<Kustomization> = Api::namespaced(ctx.client.clone(), &namespace);
    // The runtime's cached copy is current unless our last write has not come back through
    // the watch yet; only then is the object read.
    let object = if ctx
        .own_writes
        .includes_ours(&KustomizationKey::of(cached), cached)
    {
        Cow::Borrowed(cached)
    } else {
        match api.get_opt(&name).await? {
            Some(object) => Cow::Owned(object),
            None => return Ok(ReconcileResult::Success),
        }
    };
    let object = ensure_finalizer(object, &api, ctx).await?;
    let object = object.as_ref();
    let suspended = object.spec.suspend == Some(true);
    if suspended {
        tracing::info!("Reconciliation is suspended for this object");
        let current = object.status.clone().unwrap_or_default();
        let facts = facts_of(object, ctx, object.metadata.generation, Duration::ZERO);
        let finalized = outcome::suspended(current.clone(), &facts);
        if finalized != current {
            steps::PendingProgress::default()
                .write(ctx, object, &finalized)
                .await?;
        }
        return Ok(ReconcileResult::Success);
    }
    let started = Instant::now();
    let generation = object.metadata.generation;
    // The conditions change once the reconciliation proper begins (`Fetching manifests for
    // revision …`, written then if it runs long), else only with the outcome.
    let mut status = object.status.clone().unwrap_or_default();
    let key = KustomizationKey::of(object);
    ctx.attempted.start(&key);
    let pending = steps::PendingProgress::default();
    let result = steps::reporting_when_long(
        run_steps(object, ctx, &mut status, &pending),
        &pending,
        ctx,
        object,
    )
    .await;
    let run_again = ctx.attempted.finish(&key);
    if result.as_ref().is_err_and(|failed| {
        matches!(
            failed.error,
            crate::controller::error::StepError::Interrupted
        )
    }) {
        // As Flux when its reconcile context is cancelled: no outcome is written; the status
        // says what was under way, and the next leader starts over.
        tracing::info!("Reconciliation interrupted: the controller is stopping");
        return Ok(ReconcileResult::Success);
    }
    let facts = facts_of(object, ctx, generation, started.elapsed());
    let conclusion = outcome::conclude(status, &facts, &result);
    // Written only now, at the end, so that `flux reconcile` waits for this outcome. Always
    // written: as in Flux, every reconciliation moves Ready's transition time and the history.
    pending.write(ctx, object, &conclusion.status).await?;
    say(&conclusion.said);
    if let Some(event) = &conclusion.event {
        publish(ctx, object, event);
    }
    if run_again {
        // A source event came while this run started, and it may have read the older revision.
        return Ok(ReconcileResult::Requeue);
    }
    if let (Next::Backoff, Err(failed)) = (&conclusion.next, result) {
        return Err(ReconcileError::Step(Box::new(failed.error)));
    }
    Ok(match conclusion.next {
        Next::Interval(interval) => ReconcileResult::RequeueAfter(jittered(
            interval,
            ctx.options.interval_jitter_percentage,
        )),
        Next::After(Duration::ZERO) => ReconcileResult::Requeue,
        Next::After(delay) => ReconcileResult::RequeueAfter(delay),
        // As controller-runtime: a terminal error is an error that is not retried.
        Next::OnChange if matches!(conclusion.said, outcome::Said::Terminal { .. }) => {
            ReconcileResult::TerminalError
        }
        Next::OnChange => ReconcileResult::Success,
        // Only a failure backs off, and it was handed back above.
        Next::Backoff => ReconcileResult::Error,
    })
}

/// What the outcome is decided from besides the steps' result: the object's generation,
/// request, last applied revision and intervals.
fn facts_of(
    object: &Kustomization,
    ctx: &Context,
    generation: Option<i64>,
    elapsed: Duration,
) -> Facts {
    let interval = object.spec.interval.to_std();
    Facts {
        generation,
        requested_at: object
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(REQUESTED_AT))
            .cloned(),
        previous_revision: object
            .status
            .as_ref()
            .and_then(|s| s.last_applied_revision.clone()),
        interval,
        retry_interval: object
            .spec
            .retry_interval
            .map(|d| d.to_std())
            .unwrap_or(interval),
        dependency_interval: ctx.options.requeue_dependency,
        elapsed,
    }
}

/// The steps from source to health; `status` follows them (attempted revision, inventory,
/// progress, `Healthy`). As Flux, what the apply changed and a health check that passed
/// again are announced as they happen.
async fn run_steps(
    object: &Kustomization,
    ctx: &Context,
    status: &mut KustomizationStatus,
    pending: &steps::PendingProgress,
) -> Result<Applied, Failed> {
    let progress = Progress {
        object,
        ctx,
        pending,
    };
    let health_expressions = steps::health_expressions(object)?;
    let guards = Guards {
        prune: steps::prune_guard_threshold(object, ctx)?,
        drift: steps::drift_mode(object, ctx)?,
    };
    steps::identity(object, ctx)?;
    let (source, artifact) = steps::source(object, ctx).await?;
    let revision = artifact.revision.clone();
    ctx.attempted.read(&KustomizationKey::of(object), &revision);
    let origin_revision = artifact.origin_revision().map(str::to_string);
    let origin = origin_revision.as_deref();
    let meta = EventMeta::of(Some(&revision), origin);
    steps::dependencies(object, ctx, &source, &revision)
        .await
        .map_err(|error| error.at(&revision, origin, None))?;
    // What is under way, in Flux's words, step by step.
    let under_way = |doing: &str| {
        format!(
            "{doing} for revision {revision} with a timeout of {}",
            crate::api::GoDuration::from_std(steps::timeout_of(&object.spec))
        )
    };
    let fetching = under_way("Fetching manifests");
    progress.report(status, &fetching, steps::Step::Begin).await;
    let before_build =
        |error: crate::controller::error::StepError| error.at(&revision, origin, None);
    let fetched = steps::fetch(object, ctx, &artifact)
        .await
        .map_err(before_build)?;
    // As Flux: attempted once the artifact is downloaded and its path found.
    status.last_attempted_revision = Some(revision.clone());
    let building = under_way("Building manifests");
    progress
        .report(status, &building, steps::Step::Progressing)
        .await;
    // As Flux's, the client is made before the build: a failure to make it is no outcome
    // of a build (no history).
    let target = steps::target(object, ctx).await.map_err(before_build)?;
    let built = steps::build_fetched(object, ctx, fetched)
        .await
        .map_err(before_build)?;
    let digest = built.digest;
    let after_build =
        |error: crate::controller::error::StepError| error.at(&revision, origin, Some(&digest));
    let applier = steps::applier(object, ctx, &target).map_err(after_build)?;
    let jobs_with_ttl = crate::health::jobs_with_ttl(&built.objects);
    let converging = Converging {
        target: &target,
        applier: &applier,
        revision: &revision,
        guards,
        meta: &meta,
    };
    let detecting = under_way("Detecting drift");
    progress
        .report(status, &detecting, steps::Step::Progressing)
        .await;
    let (changes, applied_summary) = converge(&progress, &converging, built.objects, status)
        .await
        .map_err(after_build)?;
    let was_healthy = status::get(status, status::HEALTHY).is_some_and(|c| c.status == "True");
    let passed = steps::health(
        &progress,
        &target,
        &changes,
        status,
        &revision,
        &health_expressions,
        jobs_with_ttl,
    )
    .await
    .map_err(after_build)?;
    let new_revision = object
        .status
        .as_ref()
        .and_then(|s| s.last_applied_revision.as_deref())
        != Some(revision.as_str());
    if let Some(passed) = passed
        && (!was_healthy || (new_revision && !applied_summary.is_empty()))
    {
        progress.event(EventType::Normal, reason::PROGRESSING, &passed, &meta);
    }
    Ok(Applied {
        revision,
        origin_revision: origin_revision.clone(),
        digest: digest.clone(),
        changes,
    })
}

/// Beyond Flux, what a Kustomization opted into with this controller's annotations.
#[derive(Clone, Copy)]
struct Guards {
    prune: Option<prune_guard::Threshold>,
    drift: drift_mode::Mode,
}

/// What [`converge`] works with.
struct Converging<'a> {
    target: &'a steps::Target,
    applier: &'a crate::apply::Applier,
    revision: &'a str,
    guards: Guards,
    meta: &'a EventMeta,
}

/// Apply, then inventory and prune, announcing what the apply changed; or, in drift warn
/// mode for what was already applied, only detect drift. The change set (for the health
/// checks) and the apply's summary come back.
async fn converge(
    progress: &Progress<'_>,
    converging: &Converging<'_>,
    objects: Vec<serde_json::Value>,
    status: &mut KustomizationStatus,
) -> Result<(crate::objects::ChangeSet, String), crate::controller::error::StepError> {
    let (object, ctx) = (progress.object, progress.ctx);
    let Converging {
        target,
        applier,
        revision,
        guards,
        meta,
    } = converging;
    let last_applied = object
        .status
        .as_ref()
        .and_then(|s| s.last_applied_revision.as_deref());
    let observed = object.status.as_ref().map_or(0, |s| s.observed_generation);
    let generation = object.metadata.generation;
    if drift_mode::detects_only(guards.drift, revision, last_applied, generation, observed) {
        let changes = steps::detect_drift(progress, applier, objects, status, meta).await?;
        return Ok((changes, String::new()));
    }
    let (changes, old_inventory) = steps::apply(progress, applier, objects, status, meta).await?;
    if !changes.changes.is_empty() {
        let output = changes.log_output(ctx.options.group_change_log);
        tracing::info!(json.output = %output, %revision, "server-side apply completed");
    }
    let applied_summary = changes.summary();
    if !applied_summary.is_empty() {
        progress.event(
            EventType::Normal,
            reason::PROGRESSING,
            &applied_summary,
            meta,
        );
    }
    steps::applied_without_drift(progress, guards.drift, status);
    steps::inventory_and_prune(
        progress,
        target,
        &changes,
        &old_inventory,
        status,
        guards.prune,
        meta,
    )
    .await?;
    Ok((changes, applied_summary))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As controller-runtime's RecoverPanic: a reconciliation's panic is caught and becomes
    /// its error, in controller-runtime's words; the process goes on.
    #[tokio::test]
    async fn a_panicking_reconciliation_becomes_its_error() {
        let unforeseen =
            |found: Option<u8>| found.expect("a Kustomization the code did not foresee");
        let panicking = async { unforeseen(None) };
        let caught = recovered(panicking).await.unwrap_err();
        assert_eq!(caught, "a Kustomization the code did not foresee");
        assert_eq!(
            ReconcileError::Panic(caught).to_string(),
            "panic: a Kustomization the code did not foresee [recovered]"
        );
        let formatted = recovered(async { panic!("boom {}", 1) }).await;
        assert_eq!(formatted, Err::<(), _>("boom 1".to_string()));
        assert_eq!(recovered(async { 7 }).await, Ok(7));
    }
}
