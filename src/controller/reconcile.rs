//! One reconciliation of one Kustomization, in Flux's order: finalizer, suspend, source,
//! dependencies, fetch, build (with decryption and substitution), apply, inventory and prune,
//! health, status. Every failure lands in the status with Flux's reason and an event; only
//! transient API errors go back to the runtime for backoff.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::json;
use sha2::{Digest, Sha256};

use super::events::{EventType, Recorder};
use super::inputs::{decryption_keys, load_inventory, store_inventory, variables};
use super::manifests::{self, Inputs};
use super::status::{self, HEALTHY, READY, RECONCILING, STALLED, reason};
use crate::api::{Kustomization, KustomizationStatus};
use crate::apply::{
    Action as ApplyAction, AppliedCache, Applier, ApplyOptions, IgnoreRules, ObjectRef, Owner,
};
use crate::health::{CelChecks, WaitOptions};
use crate::inventory;
use crate::source::{Fetcher, SourceError, SourceObject};

pub const FINALIZER: &str = "finalizers.fluxcd.io";
pub const REQUESTED_AT: &str = "reconcile.fluxcd.io/requestedAt";
pub const REVISION_ANNOTATION: &str = "kustomize.toolkit.fluxcd.io/revision";

/// Controller-wide settings (flags).
#[derive(Clone, Debug)]
pub struct Options {
    pub field_manager: String,
    pub status_manager: String,
    pub concurrent_ssa: usize,
    pub requeue_dependency: Duration,
    pub no_cross_namespace_refs: bool,
    pub default_service_account: Option<String>,
    pub sops_age_secret: Option<String>,
    pub runtime_namespace: String,
    pub override_managers: Vec<String>,
    pub custom_apply_stage_kinds: Vec<String>,
    pub interval_jitter_percentage: u8,
    pub health_poll_interval: Duration,
    pub min_retry_delay: Duration,
    pub max_retry_delay: Duration,
    /// The `StrictPostBuildSubstitutions` feature gate.
    pub strict_substitution: bool,
    /// What remote-cluster kubeconfigs may do.
    pub kubeconfig_allowances: super::remote::Allowances,
    /// notification-controller's address (`--events-addr`); events are forwarded there.
    pub events_addr: Option<String>,
    /// `--kube-api-qps`/`--kube-api-burst`, shared by every client the controller makes.
    pub rate_limit: Option<super::ratelimit::RateLimit>,
    /// Fetches remote bases; `None` (`--no-remote-bases`) refuses them.
    pub remote: Option<Arc<dyn crate::kustomize::RemoteFetcher>>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            field_manager: "kustomize-controller".into(),
            status_manager: "gotk-kustomize-controller".into(),
            concurrent_ssa: 4,
            requeue_dependency: Duration::from_secs(30),
            no_cross_namespace_refs: false,
            default_service_account: None,
            sops_age_secret: None,
            runtime_namespace: "flux-system".into(),
            override_managers: Vec::new(),
            custom_apply_stage_kinds: Vec::new(),
            interval_jitter_percentage: 5,
            health_poll_interval: Duration::from_secs(2),
            min_retry_delay: Duration::from_millis(750),
            max_retry_delay: Duration::from_secs(15 * 60),
            strict_substitution: false,
            remote: None,
            kubeconfig_allowances: Default::default(),
            events_addr: None,
            rate_limit: None,
        }
    }
}

/// Shared state of the reconcilers.
pub struct Context {
    pub client: kube::Client,
    pub config: kube::Config,
    pub options: Options,
    pub fetcher: Fetcher,
    pub recorder: Recorder,
    pub metrics: Arc<super::metrics::Metrics>,
    caches: Mutex<BTreeMap<String, AppliedCache>>,
    /// Clients of remote clusters, rebuilt only when their kubeconfig Secret changes.
    remote_clients: super::remote::RemoteClients,
    /// Discovery results shared by every Kustomization's applier (one per cluster).
    kinds: crate::apply::KindCache,
    clients: Mutex<BTreeMap<String, kube::Client>>,
    failures: Mutex<BTreeMap<String, u32>>,
}

impl Context {
    pub fn new(
        client: kube::Client,
        config: kube::Config,
        options: Options,
        fetcher: Fetcher,
        metrics: Arc<super::metrics::Metrics>,
    ) -> Context {
        Context {
            recorder: Recorder::new(client.clone(), "kustomize-controller")
                .with_events_addr(options.events_addr.clone()),
            client,
            config,
            options,
            fetcher,
            metrics,
            caches: Mutex::new(BTreeMap::new()),
            kinds: Default::default(),
            remote_clients: Default::default(),
            clients: Mutex::new(BTreeMap::new()),
            failures: Mutex::new(BTreeMap::new()),
        }
    }

    fn cache_for(&self, key: &str) -> AppliedCache {
        self.caches
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(key.to_string())
            .or_default()
            .clone()
    }

    /// The client that applies for a Kustomization: impersonating its service account when
    /// it names one (or `--default-service-account` does).
    pub(crate) fn applier_client(
        &self,
        namespace: &str,
        service_account: Option<&str>,
    ) -> Result<kube::Client, String> {
        let Some(account) = service_account.or(self.options.default_service_account.as_deref())
        else {
            return Ok(self.client.clone());
        };
        let user = format!("system:serviceaccount:{namespace}:{account}");
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(client) = clients.get(&user) {
            return Ok(client.clone());
        }
        let mut config = self.config.clone();
        config.auth_info.impersonate = Some(user.clone());
        let client = super::ratelimit::client(config, self.options.rate_limit.as_ref())
            .map_err(|e| e.to_string())?;
        clients.insert(user, client.clone());
        Ok(client)
    }

    /// The client that applies, prunes and checks health for a Kustomization: for the
    /// cluster `spec.kubeConfig` names, else this one; as `spec.serviceAccountName` (or
    /// `--default-service-account`) when set.
    pub(crate) async fn target_client(
        &self,
        object: &Kustomization,
    ) -> Result<kube::Client, String> {
        let namespace = object.metadata.namespace.clone().unwrap_or_default();
        let account = object.spec.service_account_name.as_deref();
        match &object.spec.kube_config {
            Some(reference) => {
                let impersonate =
                    account.map(|sa| format!("system:serviceaccount:{namespace}:{sa}"));
                super::remote::cached_client(
                    &self.client,
                    &namespace,
                    reference,
                    self.options.kubeconfig_allowances,
                    impersonate,
                    &self.remote_clients,
                )
                .await
            }
            None => self.applier_client(&namespace, account),
        }
    }

    /// Drops what was kept for a deleted Kustomization.
    pub(crate) fn forget(&self, key: &str) {
        self.caches
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }

    /// Exponential backoff for transient errors, per object.
    pub fn backoff(&self, key: &str) -> Duration {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let count = failures.entry(key.to_string()).or_default();
        *count = count.saturating_add(1);
        let factor = 2u32.saturating_pow((*count - 1).min(20));
        (self.options.min_retry_delay * factor).min(self.options.max_retry_delay)
    }

    fn reset_backoff(&self, key: &str) {
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("{0}")]
    Other(String),
}

/// A failed reconciliation as the status reports it.
struct Failure {
    reason: &'static str,
    message: String,
    /// Retrying cannot help until the object changes.
    stalled: bool,
    requeue: Option<Duration>,
    /// The digest of the built objects, once the build succeeded.
    digest: Option<String>,
}

impl Failure {
    fn new(reason: &'static str, message: impl Into<String>) -> Failure {
        Failure {
            reason,
            message: message.into(),
            stalled: false,
            requeue: None,
            digest: None,
        }
    }

    fn with_digest(mut self, digest: &str) -> Failure {
        self.digest = Some(digest.to_string());
        self
    }
}

fn key_of(object: &Kustomization) -> String {
    format!(
        "{}/{}",
        object.metadata.namespace.as_deref().unwrap_or(""),
        object.metadata.name.as_deref().unwrap_or("")
    )
}

fn jittered(interval: Duration, percentage: u8) -> Duration {
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
    let key = key_of(&object);
    let started = Instant::now();
    let _running = ctx.metrics.running();
    let result = if object.metadata.deletion_timestamp.is_some() {
        super::deletion::finalize(&object, &ctx).await
    } else {
        reconcile_live(&object, &ctx).await
    };
    ctx.metrics.observe_reconcile(&object, started.elapsed());
    if result.is_ok() {
        ctx.reset_backoff(&key);
    }
    result
}

pub fn error_policy(
    object: Arc<Kustomization>,
    error: &ReconcileError,
    ctx: Arc<Context>,
) -> Action {
    let delay = ctx.backoff(&key_of(&object));
    tracing::warn!(kustomization = %key_of(&object), error = %error, retry_in = ?delay, "reconciliation error");
    Action::requeue(delay)
}

async fn ensure_finalizer(
    object: &Kustomization,
    api: &Api<Kustomization>,
) -> Result<(), ReconcileError> {
    if object
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == FINALIZER)
    {
        return Ok(());
    }
    let mut finalizers = object.metadata.finalizers.clone().unwrap_or_default();
    finalizers.push(FINALIZER.to_string());
    let patch = json!({"metadata": {"finalizers": finalizers, "resourceVersion": object.metadata.resource_version}});
    api.patch(
        object.metadata.name.as_deref().unwrap_or(""),
        &PatchParams::default(),
        &Patch::Merge(patch),
    )
    .await?;
    Ok(())
}

async fn write_status(
    api: &Api<Kustomization>,
    ctx: &Context,
    name: &str,
    status: &KustomizationStatus,
) -> Result<(), ReconcileError> {
    let body = json!({
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
        "status": status,
    });
    api.patch_status(
        name,
        &PatchParams::apply(&ctx.options.status_manager).force(),
        &Patch::Apply(&body),
    )
    .await?;
    Ok(())
}

async fn reconcile_live(cached: &Kustomization, ctx: &Context) -> Result<Action, ReconcileError> {
    let namespace = cached.metadata.namespace.clone().unwrap_or_default();
    let name = cached.metadata.name.clone().unwrap_or_default();
    let api: Api<Kustomization> = Api::namespaced(ctx.client.clone(), &namespace);
    // The runtime's cached copy may predate our last status write; start from the server's.
    let Some(fresh) = api.get_opt(&name).await? else {
        return Ok(Action::await_change());
    };
    let object = &fresh;
    ensure_finalizer(object, &api).await?;
    ctx.metrics
        .set_suspended(object, object.spec.suspend == Some(true));
    if object.spec.suspend == Some(true) {
        return Ok(Action::await_change());
    }
    let generation = object.metadata.generation;
    let mut status = object.status.clone().unwrap_or_default();
    let requested = object
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(REQUESTED_AT))
        .cloned();
    status::remove(&mut status, STALLED);
    status::set(
        &mut status,
        RECONCILING,
        "True",
        reason::PROGRESSING,
        "Reconciliation in progress",
        generation,
    );
    if status::get(&status, READY).is_none_or(|c| c.status != "False") {
        status::set(
            &mut status,
            READY,
            "Unknown",
            reason::PROGRESSING,
            "Reconciliation in progress",
            generation,
        );
    }
    // Written once the revision is known (`Fetching manifests for revision …`), or with the
    // outcome if the reconciliation ends before that.

    let started = Instant::now();
    let interval = object.spec.interval.to_std();
    let retry = object
        .spec
        .retry_interval
        .map(|d| d.to_std())
        .unwrap_or(interval);
    let result = run_pipeline(object, ctx, &mut status).await;
    // Handled only now, at the end, so that `flux reconcile` waits for this outcome.
    if let Some(requested) = requested {
        status.last_handled_reconcile_at = Some(requested);
    }
    match result {
        Ok(outcome) => {
            status::remove(&mut status, RECONCILING);
            let message = format!("Applied revision: {}", outcome.revision);
            status::set(
                &mut status,
                READY,
                "True",
                reason::SUCCEEDED,
                &message,
                generation,
            );
            status.observed_generation = generation.unwrap_or(-1);
            status.last_applied_revision = Some(outcome.revision.clone());
            status.last_applied_origin_revision = outcome.origin_revision.clone();
            status::record_history(
                &mut status,
                &outcome.digest,
                reason::SUCCEEDED,
                started.elapsed(),
                &outcome.revision,
            );
            write_status(&api, ctx, &name, &status).await?;
            ctx.metrics.set_condition(object, "True");
            let summary = outcome.changes.summary();
            if !summary.is_empty()
                || object
                    .status
                    .as_ref()
                    .and_then(|s| s.last_applied_revision.as_deref())
                    != Some(&outcome.revision)
            {
                let note = if summary.is_empty() {
                    message.clone()
                } else {
                    summary
                };
                ctx.recorder
                    .publish(
                        object,
                        EventType::Normal,
                        reason::SUCCEEDED,
                        &note,
                        Some(&outcome.revision),
                    )
                    .await;
            }
            Ok(Action::requeue(jittered(
                interval,
                ctx.options.interval_jitter_percentage,
            )))
        }
        Err(failure) => {
            if failure.stalled {
                status::remove(&mut status, RECONCILING);
                status::set(
                    &mut status,
                    STALLED,
                    "True",
                    failure.reason,
                    &failure.message,
                    generation,
                );
                // As Flux: a stalled object has observed its generation, so kstatus reads Failed.
                status.observed_generation = generation.unwrap_or(-1);
            } else {
                status::set(
                    &mut status,
                    RECONCILING,
                    "True",
                    reason::PROGRESSING_WITH_RETRY,
                    &failure.message,
                    generation,
                );
            }
            status::set(
                &mut status,
                READY,
                "False",
                failure.reason,
                &failure.message,
                generation,
            );
            if failure.reason == reason::HEALTH_CHECK_FAILED {
                status::set(
                    &mut status,
                    HEALTHY,
                    "False",
                    reason::HEALTH_CHECK_FAILED,
                    &failure.message,
                    generation,
                );
            }
            // History records builds: failures before one produced objects leave it alone.
            if let Some(digest) = &failure.digest {
                let attempted = status.last_attempted_revision.clone().unwrap_or_default();
                status::record_history(
                    &mut status,
                    digest,
                    failure.reason,
                    started.elapsed(),
                    &attempted,
                );
            }
            write_status(&api, ctx, &name, &status).await?;
            ctx.metrics.set_condition(object, "False");
            let requeue = failure.requeue.unwrap_or(retry);
            if failure.reason == reason::DEPENDENCY_NOT_READY {
                let note = format!(
                    "Dependencies do not meet ready condition ({}), retrying in {}s",
                    failure.message,
                    requeue.as_secs()
                );
                ctx.recorder
                    .publish(object, EventType::Normal, failure.reason, &note, None)
                    .await;
            } else {
                ctx.recorder
                    .publish(
                        object,
                        EventType::Warning,
                        failure.reason,
                        &failure.message,
                        status.last_attempted_revision.as_deref(),
                    )
                    .await;
            }
            if failure.stalled {
                return Ok(Action::await_change());
            }
            Ok(Action::requeue(requeue))
        }
    }
}

struct Outcome {
    revision: String,
    origin_revision: Option<String>,
    digest: String,
    changes: crate::apply::ChangeSet,
}

async fn run_pipeline(
    object: &Kustomization,
    ctx: &Context,
    status: &mut KustomizationStatus,
) -> Result<Outcome, Failure> {
    let namespace = object.metadata.namespace.clone().unwrap_or_default();
    let name = object.metadata.name.clone().unwrap_or_default();
    let spec = &object.spec;

    // Source.
    let source = SourceObject::of(&spec.source_ref, &namespace);
    if ctx.options.no_cross_namespace_refs && source.namespace != namespace {
        return Err(Failure {
            stalled: true,
            ..Failure::new(
                reason::ACCESS_DENIED,
                format!(
                    "cannot access {} {}/{}, cross-namespace references have been blocked",
                    source.kind.as_str(),
                    source.namespace,
                    source.name
                ),
            )
        });
    }
    let artifact = match crate::source::resolve(&ctx.client, &source).await {
        Ok(artifact) => artifact,
        Err(error @ (SourceError::NotFound { .. } | SourceError::NoArtifact { .. })) => {
            return Err(Failure {
                requeue: Some(ctx.options.requeue_dependency),
                ..Failure::new(
                    reason::ARTIFACT_FAILED,
                    format!("Source is not ready, {error}"),
                )
            });
        }
        Err(error) => return Err(Failure::new(reason::ARTIFACT_FAILED, error.to_string())),
    };

    // Dependencies.
    super::dependencies::check(object, ctx, &source, &artifact.revision)
        .await
        .map_err(|(stalled, reason, message)| Failure {
            stalled,
            requeue: Some(ctx.options.requeue_dependency),
            ..Failure::new(reason, message)
        })?;

    status.last_attempted_revision = Some(artifact.revision.clone());
    let timeout = spec
        .timeout
        .map(|t| t.to_std())
        .unwrap_or(spec.interval.to_std());
    let progress = format!(
        "Fetching manifests for revision {} with a timeout of {}",
        artifact.revision,
        crate::api::GoDuration::from_std(timeout)
    );
    let generation = object.metadata.generation;
    status::set(
        status,
        RECONCILING,
        "True",
        reason::PROGRESSING,
        &progress,
        generation,
    );
    if status::get(status, READY).is_none_or(|c| c.status != "False") {
        status::set(
            status,
            READY,
            "Unknown",
            reason::PROGRESSING,
            &progress,
            generation,
        );
    }
    let api: Api<Kustomization> = Api::namespaced(ctx.client.clone(), &namespace);
    if let Err(error) = write_status(&api, ctx, &name, status).await {
        tracing::debug!(error = %error, "writing progress");
    }

    // Fetch and build.
    let workspace = ctx.fetcher.fetch(&artifact).await.map_err(|e| match e {
        SourceError::ArtifactMissing { .. } => Failure {
            requeue: Some(ctx.options.requeue_dependency),
            ..Failure::new(reason::ARTIFACT_FAILED, format!("Source is not ready, {e}"))
        },
        other => Failure::new(reason::ARTIFACT_FAILED, other.to_string()),
    })?;
    let dir = workspace
        .path(spec.path.as_deref().unwrap_or("./"))
        .map_err(|e| Failure::new(reason::ARTIFACT_FAILED, e.to_string()))?;
    let keys = decryption_keys(object, ctx)
        .await
        .map_err(|m| Failure::new(reason::BUILD_FAILED, m))?;
    let variables = variables(object, ctx)
        .await
        .map_err(|m| Failure::new(reason::BUILD_FAILED, m))?;
    let root = workspace.root().to_path_buf();
    let build_started = Instant::now();
    let spec_for_build = spec.clone();
    let strict_substitution = ctx.options.strict_substitution;
    let remote = ctx.options.remote.clone();
    let objects = tokio::task::spawn_blocking(move || {
        let inputs = Inputs {
            spec: &spec_for_build,
            keys: keys.as_ref(),
            variables: &variables,
            remote,
            strict_substitution,
        };
        manifests::build(&root, &dir, &inputs)
    })
    .await
    .map_err(|e| Failure::new(reason::BUILD_FAILED, format!("build stopped: {e}")))?
    .map_err(|e| Failure::new(reason::BUILD_FAILED, e.to_string()))?;
    drop(workspace);
    ctx.metrics.observe_build(build_started.elapsed());
    let digest = format!(
        "sha256:{}",
        hex::encode(Sha256::digest(
            crate::kustomize::to_yaml(&objects).as_bytes()
        ))
    );

    // Apply, to this cluster or the one `spec.kubeConfig` names.
    let applier_client = ctx
        .target_client(object)
        .await
        .map_err(|m| Failure::new(reason::FAILED, m).with_digest(&digest))?;
    let owner = Owner {
        name: name.clone(),
        namespace: namespace.clone(),
    };
    let ignore = IgnoreRules::new(&spec.ignore).map_err(|m| Failure {
        stalled: true,
        ..Failure::new(reason::FAILED, m).with_digest(&digest)
    })?;
    let applier = Applier::new(
        applier_client.clone(),
        ApplyOptions {
            field_manager: ctx.options.field_manager.clone(),
            force: spec.force,
            concurrency: ctx.options.concurrent_ssa,
            custom_stage_kinds: ctx.options.custom_apply_stage_kinds.clone(),
            override_managers: ctx.options.override_managers.clone(),
            wait_timeout: timeout,
            poll_interval: ctx
                .options
                .health_poll_interval
                .min(Duration::from_millis(500)),
        },
        owner.clone(),
        spec.common_metadata.clone(),
        ignore,
        ctx.cache_for(&format!("{namespace}/{name}")),
    );
    // Remote clusters serve their own kinds; only the local cluster's discovery is shared.
    let kinds = if spec.kube_config.is_none() {
        ctx.kinds.clone()
    } else {
        crate::apply::KindCache::default()
    };
    let applier = applier.with_kind_cache(kinds.clone());
    let apply_started = Instant::now();
    let (changes, apply_error) = applier.apply_all_partial(objects).await;
    let old_inventory = load_inventory(ctx, &namespace, &name, status)
        .await
        .map_err(|m| Failure::new(reason::FAILED, m).with_digest(&digest))?;
    if let Some(error) = apply_error {
        // What was applied before the failure stays ours: keep it next to the old entries.
        if let Ok(applied) = inventory::from_change_set(&changes) {
            let mut kept = old_inventory.clone();
            let known: std::collections::HashSet<String> =
                kept.entries.iter().map(|e| e.id.clone()).collect();
            kept.entries.extend(
                applied
                    .entries
                    .into_iter()
                    .filter(|e| !known.contains(&e.id)),
            );
            if let Err(message) = store_inventory(ctx, object, status, kept).await {
                tracing::warn!(error = %message, "keeping the partially applied inventory");
            }
        }
        return Err(Failure::new(reason::FAILED, error.to_string()).with_digest(&digest));
    }
    ctx.metrics.observe_apply(apply_started.elapsed(), &changes);

    // Inventory and prune.
    let mut new_inventory = inventory::from_change_set(&changes)
        .map_err(|e| Failure::new(reason::FAILED, e.to_string()).with_digest(&digest))?;
    let mut prune_error = None;
    if spec.prune {
        let stale = inventory::stale(&old_inventory, &new_inventory)
            .map_err(|e| Failure::new(reason::PRUNE_FAILED, e.to_string()).with_digest(&digest))?;
        if !stale.is_empty() {
            let outcome = inventory::prune_with(&applier_client, &kinds, &stale, &owner).await;
            if !outcome.survivors.is_empty() {
                inventory::keep_survivors(&mut new_inventory, &outcome.survivors).map_err(|e| {
                    Failure::new(reason::PRUNE_FAILED, e.to_string()).with_digest(&digest)
                })?;
                prune_error = Some(outcome.errors.join("; "));
            }
            ctx.metrics.observe_apply(Duration::ZERO, &outcome.deleted);
            let summary = outcome.deleted.summary();
            if !summary.is_empty() {
                ctx.recorder
                    .publish(
                        object,
                        EventType::Normal,
                        "Progressing",
                        &summary,
                        Some(&artifact.revision),
                    )
                    .await;
            }
        }
    }
    store_inventory(ctx, object, status, new_inventory)
        .await
        .map_err(|m| Failure::new(reason::FAILED, m).with_digest(&digest))?;
    if let Some(message) = prune_error {
        return Err(Failure::new(reason::PRUNE_FAILED, message).with_digest(&digest));
    }

    // Health.
    let checks: Vec<ObjectRef> = if spec.wait == Some(true) {
        changes
            .changes
            .iter()
            .filter(|c| c.action != ApplyAction::Skipped)
            // A Kustomization that applies itself (Flux bootstrap) is Reconciling while it waits.
            .filter(|c| {
                !(c.object.kind == "Kustomization"
                    && c.object.group() == "kustomize.toolkit.fluxcd.io"
                    && c.object.namespace == namespace
                    && c.object.name == name)
            })
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
                    api_version: api_version.unwrap_or_else(|| "v1".into()),
                    kind: h.kind.clone(),
                    namespace: h.namespace.clone().unwrap_or_else(|| namespace.clone()),
                    name: h.name.clone(),
                }
            })
            .collect()
    };
    if !checks.is_empty() {
        let cel = CelChecks::new(&spec.health_check_exprs).map_err(|e| Failure {
            stalled: true,
            ..Failure::new(reason::INVALID_CEL, e.to_string()).with_digest(&digest)
        })?;
        // Health checks can take up to the timeout: say so in the status meanwhile, as Flux.
        let progress = format!(
            "Running health checks for revision {} with a timeout of {}",
            artifact.revision,
            crate::api::GoDuration::from_std(timeout)
        );
        status::set(
            status,
            RECONCILING,
            "True",
            reason::PROGRESSING,
            &progress,
            object.metadata.generation,
        );
        if let Err(error) = write_status(&api, ctx, &name, status).await {
            tracing::debug!(error = %error, "writing progress");
        }
        let waited = Instant::now();
        crate::health::wait_with(
            &applier_client,
            &kinds,
            &checks,
            &cel,
            &WaitOptions {
                timeout,
                interval: ctx.options.health_poll_interval,
            },
        )
        .await
        .map_err(|e| {
            Failure::new(reason::HEALTH_CHECK_FAILED, e.to_string()).with_digest(&digest)
        })?;
        status::set(
            status,
            HEALTHY,
            "True",
            reason::HEALTH_SUCCEEDED,
            &format!(
                "Health check passed in {:.3}s",
                waited.elapsed().as_secs_f64()
            ),
            object.metadata.generation,
        );
    } else {
        status::remove(status, HEALTHY);
    }
    Ok(Outcome {
        revision: artifact.revision.clone(),
        origin_revision: artifact.origin_revision().map(str::to_string),
        digest,
        changes,
    })
}
