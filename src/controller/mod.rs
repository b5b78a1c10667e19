//! The controller: watches Kustomizations (and the sources they build from) and reconciles
//! each with Flux's semantics.
//!
//! [`run`] wires a kube-runtime `Controller`: Kustomizations trigger on generation,
//! `reconcile.fluxcd.io/requestedAt` and deletion (not on our own status writes); a source
//! whose artifact revision changes triggers the Kustomizations built from it that have not
//! applied that revision yet; a Kustomization that becomes Ready releases the ones waiting on
//! it at once (`released_dependents`). Every watch keeps its own back-off, so no watch can
//! stall another and all resume within seconds of an API server restart.
//!
//! Two halves, with [`Context`] between them: [`reconcile`] owns one reconciliation — Flux's
//! named steps (`steps`: source, dependencies, fetch and build, apply, inventory and prune,
//! health), each failing with a typed [`StepError`] that carries its Flux reason, and
//! `outcome`, which turns the steps' result into the final status, event and requeue as a
//! pure function; [`runtime`] feeds it and carries its results out (watches, leader
//! election, clients, the work queue, events, metrics). The modules of both are re-exported
//! here under their names. See docs/architecture.md.

mod context;
pub mod features;
mod key;
mod reconcile;
pub mod runtime;
mod triggers;

pub use reconcile::{build_cache, drift_mode, manifests, outcome, prune_guard, status};
pub(crate) use reconcile::{cancel, deletion, dependencies, error, freshness, inputs, steps};
pub use runtime::{
    configs, events, identity, leader, metrics, ratelimit, remote, remote_identity, retry_after,
    runtime_metrics, watch,
};
pub(crate) use runtime::{exposition, process_metrics, work_queue};

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DynamicObject, PartialObjectMeta};
use kube::runtime::controller::Config as ControllerConfig;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{Controller, WatchStreamExt, watcher};

pub use context::{Context, Options};
pub use dependencies::DependencyError;
pub use error::{Failed, Retry, StepError};
pub use features::{FeatureGateError, FeatureGates, Gate};
pub use inputs::InputError;
pub use key::KustomizationKey;
pub use reconcile::{
    FINALIZER, REQUESTED_AT, ReconcileError, error_policy, panic_message, reconcile,
};
pub use watch::WatchHealth;

use crate::api::Kustomization;
use crate::source::{Fetcher, FetcherOptions, SourceObject};
use triggers::{
    artifact_revision, cancel_health_checks, dependents, queued, referrers, released_dependents,
    revision_changes, touched, trigger, trigger_of,
};
use watch::WatchConfig;

/// Where and how to run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    pub reconcile: Options,
    pub fetcher: FetcherOptions,
    /// `--concurrent`: Kustomizations reconciled at once.
    pub concurrent: u16,
    /// Watch only this namespace (`None`: all namespaces).
    pub namespace: Option<String>,
    /// `--watch-label-selector`, for sharding.
    pub label_selector: Option<String>,
    /// `--watch-configs-label-selector`: ConfigMaps and Secrets that trigger the
    /// Kustomizations referring to them.
    pub watch_configs_label_selector: Option<String>,
}

/// Runs the controller until `shutdown` completes; in-flight reconciliations finish first,
/// their health checks cut short.
pub async fn run(
    client: kube::Client,
    config: kube::Config,
    options: RunOptions,
    metrics: Arc<metrics::Metrics>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> Result<(), crate::source::SourceError> {
    let fetcher = Fetcher::new(options.fetcher.clone())?;
    let health = metrics.watches.clone();
    let mut context = Context::new(
        client.clone(),
        config,
        options.reconcile.clone(),
        fetcher,
        metrics.clone(),
    );
    // Kept until the controller stops: the watches end with it.
    let _config_watches = options.reconcile.cache_secrets_and_config_maps.then(|| {
        let (reader, watches) =
            configs::ConfigReader::start(&client, options.namespace.as_deref(), health.clone());
        context.set_configs(reader);
        watches
    });
    let context = Arc::new(context);
    metrics
        .runtime
        .set_max_concurrent(options.concurrent.max(1));
    let (reader, writer) = reflector::store();
    context.share_kustomizations(reader.clone());
    metrics.runtime.queue.watching(reader.clone());
    let queue = metrics.runtime.queue.clone();
    let (kustomizations, released) = kustomization_triggers(
        &client,
        &options,
        health.clone(),
        writer,
        reader.clone(),
        &context,
    );
    let mut controller = Controller::for_stream(kustomizations, reader.clone())
        .with_config(ControllerConfig::default().concurrency(options.concurrent.max(1)))
        .reconcile_on({
            let queue = queue.clone();
            futures::stream::select(
                released,
                context
                    .owned
                    .follow_ups()
                    .map(|(namespace, name)| ObjectRef::new(&name).within(&namespace)),
            )
            .inspect(move |request| queue.add(&KustomizationKey::of_ref(request)))
        });
    controller = watch_sources(
        controller,
        &client,
        options.namespace.as_deref(),
        options.reconcile.allow_external_artifact,
        &context,
        &reader,
        &health,
    );
    if let Some(selector) = &options.watch_configs_label_selector {
        controller = watch_configs(
            controller,
            &client,
            options.namespace.as_deref(),
            selector,
            &reader,
            &health,
            &context,
        );
    }
    let sources = event_sources(
        options.reconcile.allow_external_artifact,
        options.watch_configs_label_selector.is_some(),
    );
    drive(controller, context, options.concurrent, &sources, shutdown).await;
    Ok(())
}

/// The watches controller-runtime names as Flux's controller starts them ("Starting
/// EventSource"), in the order kustomization_manager.go declares them: the Kustomizations,
/// the three source kinds, the configs' metadata with config watching on, ExternalArtifacts
/// with their gate. Each as Go prints its kind source (`kind source: %T`, with the
/// group-version and kind of a metadata-only one).
fn event_sources(allow_external_artifact: bool, watch_configs: bool) -> Vec<&'static str> {
    let mut sources = vec![
        "kind source: *v1.Kustomization",
        "kind source: *v1.OCIRepository",
        "kind source: *v1.GitRepository",
        "kind source: *v1.Bucket",
    ];
    if watch_configs {
        sources.push("kind source: *v1.PartialObjectMetadata[v1 ConfigMap]");
        sources.push("kind source: *v1.PartialObjectMetadata[v1 Secret]");
    }
    if allow_external_artifact {
        sources.push("kind source: *v1.ExternalArtifact");
    }
    sources
}

/// Runs the controller's workers until `shutdown`, then gives the last Events a moment.
async fn drive(
    controller: Controller<Kustomization>,
    context: Arc<Context>,
    concurrent: u16,
    sources: &[&str],
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let recorder = context.clone();
    // controller-runtime's lines, with the fields of its controller logger.
    macro_rules! controller_line {
        ($($field:tt)*) => {
            tracing::info!(
                controller = "kustomization",
                controllerGroup = "kustomize.toolkit.fluxcd.io",
                controllerKind = "Kustomization",
                $($field)*
            )
        };
    }
    for source in sources {
        controller_line!(source = source, "Starting EventSource");
    }
    controller_line!("Starting Controller");
    controller_line!("worker count" = concurrent, "Starting workers");
    let stopping = context.clone();
    let shutdown = async move {
        shutdown.await;
        controller_line!("Shutdown signal received, waiting for all workers to finish");
        stopping.stopping.stop();
    };
    controller
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, context)
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(error = %error, "controller event");
            }
        })
        .await;
    controller_line!("All workers finished");
    // The last reconciliations' Events are still queued; a short wait keeps most of them.
    recorder
        .recorder
        .flush(std::time::Duration::from_secs(5))
        .await;
}

/// The Kustomizations to reconcile, as Flux's controller is triggered: a watch of them (kept
/// in the store `writer` feeds), passing changes its predicate lets through (each queued, and
/// cancelling the object's running health checks with the gate); and the dependents a change
/// releases, sent on the second stream.
fn kustomization_triggers(
    client: &kube::Client,
    options: &RunOptions,
    health: Arc<watch::WatchHealth>,
    writer: reflector::store::Writer<Kustomization>,
    store: reflector::Store<Kustomization>,
    context: &Arc<Context>,
) -> (
    impl futures::Stream<Item = Result<Kustomization, watcher::Error>> + use<>,
    futures::channel::mpsc::UnboundedReceiver<ObjectRef<Kustomization>>,
) {
    let (release, released) = futures::channel::mpsc::unbounded();
    let queue = context.metrics.runtime.queue.clone();
    let listing = queue.clone();
    let mut anyone_depends = false;
    let kustomizations = watch::watch_kustomizations(
        client,
        options.namespace.clone(),
        WatchConfig {
            kind: "Kustomization".into(),
            label_selector: options.label_selector.clone(),
        },
        health,
    )
    .inspect(move |event| match event {
        watcher::Event::InitApply(object) => listing.listed(&KustomizationKey::of(object)),
        watcher::Event::InitDone => listing.listing_done(),
        // Nothing is reconciled for an object that is gone.
        watcher::Event::Delete(object) => listing.forget(&KustomizationKey::of(object)),
        _ => {}
    })
    .map(Ok)
    .reflect(writer)
    .applied_objects()
    .inspect(move |changed| {
        if let Ok(changed) = changed {
            // Until some Kustomization names a dependency (every one in the store came
            // through here), nobody can be waiting: no scan of the store per event.
            if !changed.spec.depends_on.is_empty() {
                anyone_depends = true;
            }
            if !anyone_depends {
                return;
            }
            for dependent in released_dependents(|| store.state(), changed) {
                let _ = release.unbounded_send(dependent);
            }
        }
    })
    .predicate_filter(trigger, Default::default())
    .inspect({
        let cancelling = context.clone();
        move |passed| {
            if let Ok(object) = passed {
                let key = KustomizationKey::of(object);
                queue.add(&key);
                // As Flux with the gate: a request for the object itself (a spec change,
                // `reconcile.fluxcd.io/requestedAt`) ends its running health checks too.
                cancel_health_checks(&cancelling, &[ObjectRef::from_obj(object)], || {
                    format!("Kustomization/{key}")
                });
            }
        }
    });
    (kustomizations, released)
}

/// The source watches: a new artifact revision runs the Kustomizations that use it (and, with
/// CancelHealthCheckOnNewRevision, cancels their running health checks).
fn watch_sources(
    mut controller: Controller<Kustomization>,
    client: &kube::Client,
    namespace: Option<&str>,
    allow_external_artifact: bool,
    context: &Arc<Context>,
    reader: &Store<Kustomization>,
    health: &Arc<watch::WatchHealth>,
) -> Controller<Kustomization> {
    for source_kind in crate::api::SourceKind::ALL {
        // As Flux: ExternalArtifacts are neither watched nor read unless the gate is on.
        if source_kind == crate::api::SourceKind::ExternalArtifact && !allow_external_artifact {
            continue;
        }
        let kind = source_kind.as_str();
        let resource = crate::source::source_resource(source_kind);
        let scope = namespace.map(str::to_string);
        let watched = resource.clone();
        let sources = move |client| -> Api<DynamicObject> {
            match &scope {
                Some(namespace) => Api::namespaced_with(client, namespace, &watched),
                None => Api::all_with(client, &watched),
            }
        };
        let store = reader.clone();
        let cancelling = context.clone();
        let queue = context.metrics.runtime.queue.clone();
        let config = WatchConfig {
            kind: kind.into(),
            label_selector: None,
        };
        let mut cached = context.sources.writer(source_kind);
        let changed = revision_changes(
            watch::watch(client, sources, config, health.clone())
                .inspect(move |event| cached.apply_watcher_event(event)),
        );
        controller = controller.watches_stream_with(
            changed,
            move |source| {
                let revision = artifact_revision(&source).unwrap_or("").to_string();
                let mut dependents = dependents(store.state(), &source, kind);
                // One attempting this revision already has it; the cache may not show it yet.
                dependents.retain(|d| {
                    let key = KustomizationKey::of_ref(d);
                    // The CRD defaults a status, so "never reconciled" is: no conditions.
                    let brand_new = store
                        .get(d)
                        .is_some_and(|k| k.status.as_ref().is_none_or(|s| s.conditions.is_empty()));
                    cancelling.attempted.needs_run(&key, &revision, brand_new)
                });
                cancel_health_checks(&cancelling, &dependents, || {
                    trigger_of(kind, &source.metadata)
                });
                queued(&queue, dependents)
            },
            resource,
        );
    }
    controller
}

/// `--watch-configs-label-selector`: a change to a labelled ConfigMap or Secret runs the
/// Kustomizations that read it (`substituteFrom`, decryption, kubeConfig).
fn watch_configs(
    mut controller: Controller<Kustomization>,
    client: &kube::Client,
    namespace: Option<&str>,
    selector: &str,
    reader: &Store<Kustomization>,
    health: &Arc<watch::WatchHealth>,
    context: &Arc<Context>,
) -> Controller<Kustomization> {
    let queue = &context.metrics.runtime.queue;
    let config = |kind: &str| WatchConfig {
        kind: kind.into(),
        label_selector: Some(selector.to_string()),
    };
    let scope = namespace.map(str::to_string);
    let store = reader.clone();
    // Metadata only, as Flux's `WatchesMetadata`: what changed, never a Secret's data.
    let changed = touched(watch::watch(
        client,
        watch::scoped::<PartialObjectMeta<ConfigMap>>(scope.clone()),
        config("ConfigMap"),
        health.clone(),
    ));
    let maps_queue = queue.clone();
    let cancelling = context.clone();
    controller = controller.watches_stream(changed, move |map| {
        let found = referrers(
            &store,
            map.metadata.namespace.as_deref(),
            map.metadata.name.as_deref(),
            false,
        );
        cancel_health_checks(&cancelling, &found, || {
            trigger_of("ConfigMap", &map.metadata)
        });
        queued(&maps_queue, found)
    });
    let store = reader.clone();
    let changed = touched(watch::watch(
        client,
        watch::scoped::<PartialObjectMeta<Secret>>(scope),
        config("Secret"),
        health.clone(),
    ));
    let secrets_queue = queue.clone();
    let cancelling = context.clone();
    controller = controller.watches_stream(changed, move |secret| {
        let found = referrers(
            &store,
            secret.metadata.namespace.as_deref(),
            secret.metadata.name.as_deref(),
            true,
        );
        cancel_health_checks(&cancelling, &found, || {
            trigger_of("Secret", &secret.metadata)
        });
        queued(&secrets_queue, found)
    });
    controller
}

#[cfg(test)]
mod tests {
    use super::*;

    /// kustomization_manager.go's watches, as controller-runtime names them: configs' metadata
    /// while config watching is on, ExternalArtifacts with their gate, both after the sources.
    #[test]
    fn event_sources_follow_fluxs_watches() {
        let flux = |extra: &[&'static str]| {
            let mut all = vec![
                "kind source: *v1.Kustomization",
                "kind source: *v1.OCIRepository",
                "kind source: *v1.GitRepository",
                "kind source: *v1.Bucket",
            ];
            all.extend_from_slice(extra);
            all
        };
        let configs = [
            "kind source: *v1.PartialObjectMetadata[v1 ConfigMap]",
            "kind source: *v1.PartialObjectMetadata[v1 Secret]",
        ];
        let external = "kind source: *v1.ExternalArtifact";
        assert_eq!(event_sources(false, false), flux(&[]));
        assert_eq!(event_sources(false, true), flux(&configs));
        assert_eq!(event_sources(true, false), flux(&[external]));
        assert_eq!(
            event_sources(true, true),
            flux(&[configs[0], configs[1], external])
        );
    }
}
