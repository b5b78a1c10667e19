//! The steps of one reconciliation, each a function with a small typed input and output and a
//! [`StepError`] on failure: source → dependencies → fetch and build → target (the cluster
//! and identity to apply as) → apply → inventory and prune → health. `reconcile` runs them
//! in order; `diff` reuses the build and the applier. Progress that is reported while the
//! steps run (status writes, the prune event) goes through [`Progress`].

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::api::{Kustomization, KustomizationSpec, KustomizationStatus, ResourceInventory};
use crate::apply::{Applier, ApplyOptions, IgnoreRules};
use crate::controller::KustomizationKey;
use crate::controller::context::Context;
use crate::controller::error::StepError;
use crate::controller::events::{EventMeta, EventType};
use crate::controller::status::reason;
use crate::health::{CelChecks, WaitOptions};
use crate::inventory::{self, Holder};
use crate::objects::{Action, ChangeSet, KindCache, ObjectRef, Owner};
use crate::source::{Artifact, SourceError, SourceObject};

mod guards;
mod prune;

pub(crate) use guards::{applied_without_drift, detect_drift, drift_mode, prune_guard_threshold};
pub(crate) use prune::inventory_and_prune;

/// What a progress report is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// The reconciliation proper begins (see [`crate::controller::outcome::begin`]): `Reconciling` says
    /// what is under way, `Ready` is unknown.
    Begin,
    /// A later step (building, detecting drift): `Reconciling` says which.
    Progressing,
    /// Health checks: `Reconciling` and `Healthy` (unknown) say so.
    CheckingHealth,
}

/// Reports progress while the steps run: status writes and events about the Kustomization.
pub(crate) struct Progress<'a> {
    pub object: &'a Kustomization,
    pub ctx: &'a Context,
    pub pending: &'a PendingProgress,
}

/// How long a reconciliation runs before what is under way is written to its status: a
/// shorter one writes only its outcome, one status write instead of two or three.
pub(crate) const PROGRESS_REPORT_DELAY: std::time::Duration = std::time::Duration::from_secs(1);

/// Progress not yet written: the latest report, and whether the reconciliation has run long
/// enough that reports are written as they come.
#[derive(Default)]
pub(crate) struct PendingProgress {
    long: std::sync::atomic::AtomicBool,
    latest: std::sync::Mutex<Option<KustomizationStatus>>,
    /// The status this reconciliation last wrote, as JSON, if it wrote one: what the server
    /// holds, and what the next write is a patch from.
    written: std::sync::Mutex<Option<String>>,
}

impl PendingProgress {
    /// The reconciliation has run long: the latest report is written now, later ones at once.
    pub async fn running_long(&self, ctx: &Context, object: &Kustomization) {
        self.long.store(true, std::sync::atomic::Ordering::Relaxed);
        let latest = self.latest.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(status) = latest {
            self.write_progress(ctx, object, &status).await;
        }
    }

    async fn write_progress(
        &self,
        ctx: &Context,
        object: &Kustomization,
        status: &KustomizationStatus,
    ) {
        if let Err(error) = self.write(ctx, object, status).await {
            tracing::debug!(error = %error, "writing progress");
        }
    }

    /// Writes `status`, as a patch from what the server holds: this reconciliation's last
    /// write, else the status it started from. What was written is kept as its JSON text,
    /// the form the next patch is worked out from.
    pub async fn write(
        &self,
        ctx: &Context,
        object: &Kustomization,
        status: &KustomizationStatus,
    ) -> Result<(), kube::Error> {
        let status = serde_json::to_string(status).map_err(kube::Error::SerdeError)?;
        // Copied, not taken: a write dropped while under way leaves the base where it was.
        let written = self
            .written
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let base = match written {
            Some(text) => text,
            None => serde_json::to_string(&object.status).map_err(kube::Error::SerdeError)?,
        };
        crate::controller::status::write(ctx, object, &base, &status).await?;
        *self.written.lock().unwrap_or_else(|e| e.into_inner()) = Some(status);
        Ok(())
    }
}

/// Runs a reconciliation's steps; once they have run for [`PROGRESS_REPORT_DELAY`], what is
/// under way is written and later reports are written as they come.
pub(crate) async fn reporting_when_long<T>(
    steps: impl std::future::Future<Output = T>,
    pending: &PendingProgress,
    ctx: &Context,
    object: &Kustomization,
) -> T {
    let mut steps = std::pin::pin!(steps);
    tokio::select! {
        result = &mut steps => return result,
        () = tokio::time::sleep(PROGRESS_REPORT_DELAY) => {}
    }
    pending.running_long(ctx, object).await;
    steps.await
}

impl Progress<'_> {
    /// Says what is under way (see [`Step`]): written at once in a reconciliation that has
    /// run long, else kept for [`PendingProgress::running_long`]. A failed write is only
    /// logged: the outcome is written anyway.
    pub async fn report(&self, status: &mut KustomizationStatus, message: &str, step: Step) {
        let generation = self.object.metadata.generation;
        match step {
            Step::Begin => crate::controller::outcome::begin(status, message, generation),
            Step::Progressing => {
                crate::controller::outcome::progressing(status, message, generation)
            }
            Step::CheckingHealth => {
                crate::controller::outcome::checking_health(status, message, generation)
            }
        }
        if self.pending.long.load(std::sync::atomic::Ordering::Relaxed) {
            self.pending
                .write_progress(self.ctx, self.object, status)
                .await;
        } else {
            *self
                .pending
                .latest
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = Some(status.clone());
        }
    }

    pub fn event(&self, type_: EventType, reason: &str, message: &str, meta: &EventMeta) {
        self.ctx
            .recorder
            .publish(self.object, type_, reason, message, meta);
    }
}

/// Identity: decryption as a service account (object-level workload identity) needs Flux's
/// feature gate; without it the Kustomization stalls, as in Flux.
pub(crate) fn identity(object: &Kustomization, ctx: &Context) -> Result<(), StepError> {
    let wants = object
        .spec
        .decryption
        .as_ref()
        .and_then(|d| d.service_account())
        .is_some();
    // With the gate on, the account is asked for tokens only when a key service needs one
    // (cloud KMS, Vault login); a key it cannot open fails the build, naming it.
    if wants && !ctx.options.object_level_workload_identity {
        return Err(StepError::WorkloadIdentityDisabled);
    }
    Ok(())
}

/// Health expressions: `healthCheckExprs` compiled before anything else, as Flux does, so an
/// invalid one stalls the Kustomization before its source is even read.
pub(crate) fn health_expressions(object: &Kustomization) -> Result<CelChecks, StepError> {
    CelChecks::new(&object.spec.health_check_exprs).map_err(StepError::InvalidHealthExpression)
}

/// Source: the artifact `spec.sourceRef` names, unless cross-namespace references are blocked
/// or it is an ExternalArtifact and that feature gate is off.
pub(crate) async fn source(
    object: &Kustomization,
    ctx: &Context,
) -> Result<(SourceObject, Artifact), StepError> {
    let namespace = object.metadata.namespace.clone().unwrap_or_default();
    let source = SourceObject::of(&object.spec.source_ref, &namespace);
    if ctx.options.no_cross_namespace_refs && source.namespace != namespace {
        return Err(StepError::CrossNamespaceSource {
            kind: source.kind.as_str(),
            namespace: source.namespace,
            name: source.name,
        });
    }
    if source.kind == crate::api::SourceKind::ExternalArtifact
        && !ctx.options.allow_external_artifact
    {
        return Err(StepError::ExternalArtifactDisabled {
            namespace: source.namespace,
            name: source.name,
        });
    }
    // As Flux's DirectSourceFetch gate: the API server's answer, not the watch's.
    let cache = (!ctx.options.direct_source_fetch).then_some(&ctx.sources);
    match crate::source::resolve(&ctx.client, cache, &source).await {
        Ok(artifact) => Ok((source, artifact)),
        Err(SourceError::NotFound {
            namespace, name, ..
        }) => Err(StepError::SourceNotFound {
            kind: source.kind,
            namespace,
            name,
            direct: ctx.options.direct_source_fetch,
            namespaced_ref: object.spec.source_ref.namespace.is_some(),
        }),
        Err(error @ SourceError::NoArtifact { .. }) => Err(StepError::SourceNotReady(error)),
        Err(SourceError::Api {
            namespace,
            name,
            source,
            ..
        }) => Err(StepError::SourceUnreadable {
            namespace,
            name,
            source,
        }),
        Err(error) => Err(StepError::Source(error)),
    }
}

/// Dependencies: every `dependsOn` entry is ready for this revision.
pub(crate) async fn dependencies(
    object: &Kustomization,
    ctx: &Context,
    source: &SourceObject,
    revision: &str,
) -> Result<(), StepError> {
    crate::controller::dependencies::check(object, ctx, source, revision)
        .await
        .map_err(StepError::Dependency)?;
    if !object.spec.depends_on.is_empty() {
        tracing::info!("All dependencies are ready, proceeding with reconciliation");
    }
    Ok(())
}

pub(crate) use super::fetch_build::{build, build_fetched, fetch};

/// Where and as whom a Kustomization applies, prunes and checks health.
pub(crate) struct Target {
    pub client: kube::Client,
    pub kinds: KindCache,
    pub owner: Owner,
}

/// Target: the cluster `spec.kubeConfig` names (else this one), as `spec.serviceAccountName`.
pub(crate) async fn target(object: &Kustomization, ctx: &Context) -> Result<Target, StepError> {
    let client = ctx.target_client(object).await.map_err(StepError::Client)?;
    Ok(Target {
        client,
        kinds: ctx.kinds_for(object),
        owner: Owner {
            name: object.metadata.name.clone().unwrap_or_default(),
            namespace: object.metadata.namespace.clone().unwrap_or_default(),
        },
    })
}

/// How long waits may take, as Flux's `GetTimeout()`: `spec.timeout`, else the interval less
/// 30 s, and never under 30 s.
pub(crate) fn timeout_of(spec: &KustomizationSpec) -> Duration {
    const FLOOR: Duration = Duration::from_secs(30);
    spec.timeout
        .map(|t| t.to_std())
        .unwrap_or_else(|| spec.interval.to_std().saturating_sub(FLOOR))
        .max(FLOOR)
}

/// The applier for a Kustomization, with its policies and the controller's flags; `diff`
/// plans with the same one.
pub(crate) fn applier(
    object: &Kustomization,
    ctx: &Context,
    target: &Target,
) -> Result<Applier, StepError> {
    let spec = &object.spec;
    let ignore = IgnoreRules::new(&spec.ignore).map_err(StepError::InvalidIgnoreRule)?;
    let options = ApplyOptions {
        field_manager: ctx.options.field_manager.clone(),
        force: spec.force,
        concurrency: ctx.options.concurrent_ssa,
        custom_stage_kinds: ctx.options.custom_apply_stage_kinds.clone(),
        override_managers: ctx.options.override_managers.clone(),
        migrate_api_version: ctx.options.migrate_api_version,
        // ssa's `DefaultApplyOptions`, which Flux keeps: CRDs, namespaces and classes are
        // waited for 60 s whatever `spec.timeout` says.
        wait_timeout: ApplyOptions::default().wait_timeout,
        poll_interval: ctx
            .options
            .health_poll_interval
            .min(Duration::from_millis(500)),
    };
    let key = KustomizationKey::new(&target.owner.namespace, &target.owner.name);
    let applier = Applier::new(
        target.client.clone(),
        options,
        target.owner.clone(),
        spec.common_metadata.clone(),
        ignore,
        ctx.cache_for(&key),
    )
    .with_kind_cache(target.kinds.clone());
    // The watches are this cluster's: a remote one's objects are read as before. A user who
    // edits an object and asks for a reconciliation at once must see the edit reverted,
    // whatever a watch has delivered yet: a requested reconciliation vouches for what it took
    // from the watches, and runs again if they bring a change shortly after.
    let requested = object
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(crate::controller::REQUESTED_AT))
        .is_some_and(|at| {
            object
                .status
                .as_ref()
                .and_then(|s| s.last_handled_reconcile_at.as_deref())
                != Some(at.as_str())
        });
    Ok(match (object.spec.kube_config.is_none(), requested) {
        (false, _) => applier,
        (true, false) => applier.with_owned_objects(ctx.owned.clone()),
        (true, true) => applier.with_owned_objects(ctx.owned.clone()).requested(),
    })
}

/// The Kustomization whose inventory is read and written.
fn holder(object: &Kustomization) -> Holder<'_> {
    Holder {
        namespace: object.metadata.namespace.as_deref().unwrap_or(""),
        name: object.metadata.name.as_deref().unwrap_or(""),
        uid: object.metadata.uid.as_deref().unwrap_or(""),
    }
}

/// The inventory as the last reconciliation left it (with its overflow Secret).
pub(crate) async fn load_inventory(
    object: &Kustomization,
    ctx: &Context,
    status: &KustomizationStatus,
) -> Result<ResourceInventory, StepError> {
    inventory::load(&ctx.client, &holder(object), status.inventory.as_ref())
        .await
        .map_err(StepError::Inventory)
}

/// Records `full` as the inventory in `status` (and the overflow Secret).
pub(crate) async fn store_inventory(
    object: &Kustomization,
    ctx: &Context,
    status: &mut KustomizationStatus,
    full: &ResourceInventory,
) -> Result<(), StepError> {
    let stored = inventory::store(
        &ctx.client,
        &holder(object),
        &ctx.options.field_manager,
        status.inventory.as_ref(),
        full,
    )
    .await
    .map_err(StepError::Inventory)?;
    status.inventory = Some(stored);
    Ok(())
}

/// Apply: every built object, stage by stage. After a failure, what was applied before it
/// joins the old inventory, so it stays ours.
pub(crate) async fn apply(
    progress: &Progress<'_>,
    applier: &Applier,
    objects: Vec<Value>,
    status: &mut KustomizationStatus,
    meta: &EventMeta,
) -> Result<(ChangeSet, ResourceInventory), StepError> {
    let (object, ctx) = (progress.object, progress.ctx);
    let started = Instant::now();
    let (changes, apply_error) = applier.apply_all_partial(objects).await;
    report_dropped_fields(progress, &applier.take_dropped_fields(), meta);
    let old_inventory = load_inventory(object, ctx, status).await?;
    if let Some(error) = apply_error {
        keep_partially_applied(object, ctx, status, &old_inventory, &changes).await;
        let changed: String = changes
            .summary()
            .lines()
            .map(|line| format!("{line}\n"))
            .collect();
        return Err(StepError::ApplyFailed { error, changed });
    }
    ctx.metrics.observe_apply(started.elapsed(), &changes);
    Ok((changes, old_inventory))
}

/// Beyond Flux, which drops fields a built-in kind does not declare silently: a Warning
/// event names each one.
fn report_dropped_fields(progress: &Progress<'_>, dropped: &[String], meta: &EventMeta) {
    if dropped.is_empty() {
        return;
    }
    let message = format!(
        "fields their kind does not declare were dropped before applying, as Flux drops them:\n{}",
        dropped.join("\n")
    );
    tracing::info!("{message}");
    progress.event(
        EventType::Warning,
        "UndeclaredFieldsDropped",
        &message,
        meta,
    );
}

async fn keep_partially_applied(
    object: &Kustomization,
    ctx: &Context,
    status: &mut KustomizationStatus,
    old_inventory: &ResourceInventory,
    changes: &ChangeSet,
) {
    let Ok(kept) = inventory::merge_applied(old_inventory, changes) else {
        return;
    };
    if let Err(error) = store_inventory(object, ctx, status, &kept).await {
        tracing::error!(error = %error, "keeping the partially applied inventory");
    }
}

/// The objects whose health is checked: with `spec.wait` every applied object (but a
/// Kustomization that applies itself, as Flux bootstrap does: it is Reconciling while it
/// waits), else `spec.healthChecks`. An entry without apiVersion takes it from the applied
/// object of that kind and name, else Flux's default, `apps/v1`.
#[cfg(test)]
fn health_targets(object: &Kustomization, changes: &ChangeSet) -> Vec<ObjectRef> {
    without_itself(object, requested_health_targets(object, changes))
}

/// What `wait` or `healthChecks` ask to check, the Kustomization itself included.
fn requested_health_targets(object: &Kustomization, changes: &ChangeSet) -> Vec<ObjectRef> {
    let namespace = object.metadata.namespace.clone().unwrap_or_default();
    let spec = &object.spec;
    if spec.wait == Some(true) {
        changes
            .changes
            .iter()
            .filter(|c| c.action != Action::Skipped)
            .map(|c| c.object.clone())
            .collect()
    } else {
        spec.health_checks
            .iter()
            .map(|h| {
                let api_version = h.api_version.clone().or_else(|| {
                    changes
                        .changes
                        .iter()
                        .find(|c| c.object.kind == h.kind && c.object.name == h.name)
                        .map(|c| c.object.api_version.clone())
                });
                ObjectRef {
                    api_version: api_version.unwrap_or_else(|| "apps/v1".into()),
                    kind: h.kind.clone(),
                    namespace: h
                        .namespace
                        .clone()
                        .filter(|n| !n.is_empty())
                        .unwrap_or_else(|| namespace.clone()),
                    name: h.name.clone(),
                }
            })
            .collect()
    }
}

/// As Flux, never the Kustomization itself, from `wait` or `healthChecks`: it would wait on
/// its own outcome.
fn without_itself(object: &Kustomization, targets: Vec<ObjectRef>) -> Vec<ObjectRef> {
    let namespace = object.metadata.namespace.as_deref().unwrap_or_default();
    let name = object.metadata.name.as_deref().unwrap_or_default();
    targets
        .into_iter()
        .filter(|t| !(t.kind == "Kustomization" && t.namespace == namespace && t.name == name))
        .collect()
}

/// Health: waits until the targets are ready (kstatus, or `healthCheckExprs`), up to the
/// timeout. `Healthy` says how it went; without targets it is removed. What passed comes
/// back as Flux words it ("Health check passed in …"), `None` when nothing was checked.
pub(crate) async fn health(
    progress: &Progress<'_>,
    target: &Target,
    changes: &ChangeSet,
    status: &mut KustomizationStatus,
    revision: &str,
    cel: &CelChecks,
    jobs_with_ttl: std::collections::BTreeSet<crate::objects::ObjectRef>,
) -> Result<Option<String>, StepError> {
    let (object, ctx) = (progress.object, progress.ctx);
    // As Flux: Healthy goes only when nothing was asked; asked for itself alone, the
    // Kustomization passes an empty check.
    let requested = requested_health_targets(object, changes);
    if requested.is_empty() {
        crate::controller::status::remove(status, crate::controller::status::HEALTHY);
        return Ok(None);
    }
    let checks = without_itself(object, requested);
    let timeout = timeout_of(&object.spec);
    // Health checks can take up to the timeout: say so in the status meanwhile, as Flux.
    progress
        .report(
            status,
            &format!(
                "Running health checks for revision {revision} with a timeout of {}",
                crate::api::GoDuration::from_std(timeout)
            ),
            Step::CheckingHealth,
        )
        .await;
    let waited = Instant::now();
    let wait_options = WaitOptions {
        timeout,
        interval: ctx.options.health_poll_interval,
        fail_fast: !ctx.options.disable_fail_fast,
        jobs_with_ttl,
    };
    let waiting =
        crate::health::wait_with(&target.client, &target.kinds, &checks, cel, &wait_options);
    let mut registered = ctx
        .options
        .cancel_health_on_new_revision
        .then(|| ctx.health_cancels.register(&KustomizationKey::of(object)));
    let cancelled = async {
        match registered.as_mut() {
            Some(registered) => (&mut registered.cancelled).await.ok(),
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        checked = waiting => checked.map_err(|error| StepError::Health {
            error,
            after: waited.elapsed(),
        })?,
        trigger = cancelled => {
            return Err(StepError::HealthCheckCanceled {
                trigger: trigger.unwrap_or_default(),
            });
        }
        () = ctx.stopping.stopped() => return Err(StepError::Interrupted),
    }
    let passed = format!(
        "Health check passed in {}",
        crate::api::GoDuration::from_std(waited.elapsed())
    );
    crate::controller::status::set(
        status,
        crate::controller::status::HEALTHY,
        "True",
        reason::HEALTH_SUCCEEDED,
        &passed,
        object.metadata.generation,
    );
    Ok(Some(passed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::Change;
    use serde_json::json;

    fn kustomization(spec: Value) -> Kustomization {
        let mut full = json!({"interval": "5m", "prune": true,
            "sourceRef": {"kind": "GitRepository", "name": "repo"}});
        if let (Some(full), Some(spec)) = (full.as_object_mut(), spec.as_object()) {
            full.extend(spec.clone());
        }
        serde_json::from_value(json!({
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": "apps", "namespace": "flux-system"},
            "spec": full,
        }))
        .unwrap()
    }

    fn change(
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: &str,
        action: Action,
    ) -> Change {
        Change {
            object: ObjectRef {
                api_version: api_version.into(),
                kind: kind.into(),
                namespace: namespace.into(),
                name: name.into(),
            },
            action,
        }
    }

    fn applied() -> ChangeSet {
        ChangeSet {
            changes: vec![
                change("apps/v1", "Deployment", "apps", "web", Action::Created),
                change("v1", "ConfigMap", "apps", "skipped", Action::Skipped),
                change(
                    "kustomize.toolkit.fluxcd.io/v1",
                    "Kustomization",
                    "flux-system",
                    "apps",
                    Action::Configured,
                ),
                change(
                    "kustomize.toolkit.fluxcd.io/v1",
                    "Kustomization",
                    "flux-system",
                    "other",
                    Action::Unchanged,
                ),
            ],
        }
    }

    fn names(targets: &[ObjectRef]) -> Vec<String> {
        targets.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn waiting_checks_every_applied_object_but_skipped_ones_and_itself() {
        let object = kustomization(json!({"wait": true}));
        assert_eq!(
            names(&health_targets(&object, &applied())),
            ["Deployment/apps/web", "Kustomization/flux-system/other"]
        );
    }

    #[test]
    fn health_checks_take_their_api_version_from_the_applied_objects() {
        let object = kustomization(json!({"healthChecks": [
            {"kind": "Deployment", "name": "web", "namespace": "apps"},
            {"kind": "Service", "name": "db"},
            {"apiVersion": "batch/v1", "kind": "Job", "name": "migrate", "namespace": "apps"},
            {"kind": "StatefulSet", "name": "elsewhere", "namespace": "apps"},
        ]}));
        let mut applied = applied();
        applied.changes.push(change(
            "v1",
            "Service",
            "flux-system",
            "db",
            Action::Created,
        ));
        let targets = health_targets(&object, &applied);
        let versions: Vec<&str> = targets.iter().map(|t| t.api_version.as_str()).collect();
        assert_eq!(
            versions,
            ["apps/v1", "v1", "batch/v1", "apps/v1"],
            "Flux's default is apps/v1"
        );
        assert_eq!(
            names(&targets),
            [
                "Deployment/apps/web",
                "Service/flux-system/db",
                "Job/apps/migrate",
                "StatefulSet/apps/elsewhere"
            ]
        );
    }

    /// Flux's guard against waiting on itself covers `healthChecks` too.
    #[test]
    fn a_health_check_naming_the_kustomization_itself_is_left_out() {
        let object = kustomization(json!({"healthChecks": [
            {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                "name": "apps", "namespace": "flux-system"},
            {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                "name": "other", "namespace": "flux-system"},
        ]}));
        assert_eq!(
            names(&health_targets(&object, &applied())),
            ["Kustomization/flux-system/other"]
        );
        // Asked for itself alone: something was asked (Healthy is kept), nothing is checked.
        let alone = kustomization(json!({"healthChecks": [
            {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                "name": "apps", "namespace": "flux-system"},
        ]}));
        assert_eq!(requested_health_targets(&alone, &applied()).len(), 1);
        assert!(health_targets(&alone, &applied()).is_empty());
    }

    #[test]
    fn nothing_is_checked_without_wait_or_health_checks() {
        assert!(health_targets(&kustomization(json!({})), &applied()).is_empty());
    }

    #[test]
    fn the_timeout_is_fluxs_get_timeout() {
        let timeout = |spec: Value| timeout_of(&kustomization(spec).spec);
        assert_eq!(timeout(json!({})), Duration::from_secs(270), "5m less 30s");
        assert_eq!(timeout(json!({"timeout": "2m"})), Duration::from_secs(120));
        assert_eq!(
            timeout(json!({"timeout": "10s"})),
            Duration::from_secs(30),
            "raised to 30s"
        );
        assert_eq!(timeout(json!({"interval": "40s"})), Duration::from_secs(30));
        assert_eq!(
            timeout(json!({"interval": "1h"})),
            Duration::from_secs(3570)
        );
    }
}
