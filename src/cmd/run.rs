//! The `run` command, the controller process (part of the binary, not the library): flags
//! checked as Flux checks them, the API client, metrics and probe servers, leader election,
//! the controller until a signal, then a graceful stop in controller-runtime's order.

use anyhow::Context;
use kustomize_controller::cli::RunArgs;
use kustomize_controller::{api, controller, kustomize};

use crate::{RemoteBases, remote_fetcher};

/// `:8080` listens on every interface, as Go's net package reads it.
fn listen_address(flag: &str) -> String {
    if flag.starts_with(':') {
        format!("0.0.0.0{flag}")
    } else {
        flag.to_string()
    }
}

/// controller-runtime's default `GracefulShutdownTimeout`, which Flux keeps.
const GRACEFUL_SHUTDOWN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Resolves on SIGTERM or Ctrl-C.
async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = terminate => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

pub(crate) fn run_controller(args: RunArgs) -> anyhow::Result<()> {
    use controller::Gate;
    let args = args.without_empty_values();
    // A panic is a line of the log like any other (as controller-runtime's panic handler
    // logs "Observed a panic"), so `flux logs` still reads every line; a reconciliation's
    // panic is then recovered as its error.
    std::panic::set_hook(Box::new(|info| {
        let panic = controller::panic_message(info.payload());
        let location = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_default();
        // As RUST_BACKTRACE asks (nothing is captured without it).
        let backtrace = std::backtrace::Backtrace::capture();
        match backtrace.status() {
            std::backtrace::BacktraceStatus::Captured => {
                tracing::error!(%panic, %location, stacktrace = %backtrace, "Observed a panic")
            }
            _ => tracing::error!(%panic, %location, "Observed a panic"),
        }
    }));
    // As Flux: an unknown gate or a malformed value stops the controller before it starts.
    let gates = args
        .feature_gates()
        .context("unable to load feature gates")?;
    if (args.default_decryption_service_account.is_some()
        || args.default_kubeconfig_service_account.is_some())
        && !gates.enabled(Gate::ObjectLevelWorkloadIdentity)
    {
        return Err(anyhow::anyhow!(
            "cannot set default service accounts when the feature gate ObjectLevelWorkloadIdentity is not enabled"
        ))
        .context("invalid configuration");
    }
    if args.interval_jitter_percentage >= 100 {
        return Err(anyhow::anyhow!(
            "the interval jitter percentage must be a non-negative value and less than 100"
        ))
        .context("unable to set global jitter");
    }
    // As Flux's event recorder: an address Go's url.Parse refuses stops the controller.
    if let Some(error) = kustomize_controller::cli::go_url::parse_error(&args.events_addr) {
        return Err(anyhow::anyhow!(error)).context("unable to create event recorder");
    }
    // As Flux: the watch selector becomes a LabelSelector object (no `!=`, `>`, `<`), the
    // configs selector is parsed as it is.
    if let Some(selector) = args
        .watch_label_selector
        .as_deref()
        .filter(|s| !s.is_empty())
    {
        kustomize::LabelSelector::parse_for_watch(selector)
            .map_err(|error| anyhow::anyhow!("{error}"))
            .context("unable to configure watch label selector for manager")?;
    }
    let configs = args.watch_configs_label_selector.as_str();
    if !configs.is_empty() {
        kustomize::labels_parse_message(configs)
            .map_err(|error| anyhow::anyhow!("{error}"))
            .context("unable to configure watch configs label selector for controller")?;
    }
    if args.enable_leader_election {
        controller::leader::check_timing(
            args.leader_election_lease_duration,
            args.leader_election_renew_deadline,
            args.leader_election_retry_period,
        )
        .context("problem running manager")?;
    }
    if args.storage_path.is_some() {
        tracing::info!(
            logger = "setup",
            flag = "--storage-path",
            "accepted for compatibility with Flux; it has no effect here"
        );
    }
    // Builds, archive extraction and file writes run on the blocking pool; a few threads per
    // reconciler are enough, and every idle thread the default pool (up to 512) keeps for 10 s
    // holds allocator memory of its own.
    let blocking_threads = usize::from(args.concurrent).max(1) + 2;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(blocking_threads)
        .build()
        .context("starting the async runtime")?;
    // The controller runs as a task on the runtime's workers, not on the thread `block_on`
    // parks: under a CPU limit of 1 (Flux's Deployment, ours) the runtime has one worker, and a
    // controller stream polled on the main thread would hand every reconciliation, request
    // and watch event across two threads, each hand-over a futex wake and a context switch.
    runtime.block_on(async move {
        match tokio::spawn(serve(args, gates)).await {
            Ok(outcome) => outcome,
            // A panic ends the process as it would have on the main thread (exit code 101).
            Err(ended) if ended.is_panic() => std::panic::resume_unwind(ended.into_panic()),
            Err(ended) => Err(ended).context("the controller task ended abnormally"),
        }
    })
}

/// The controller process once its flags are checked: the API client, `/metrics` and the
/// probes, leader election, then the reconcilers until a signal stops them.
async fn serve(args: RunArgs, gates: controller::FeatureGates) -> anyhow::Result<()> {
    let config = kube::Config::infer()
        .await
        .context("finding the cluster (in-cluster config or KUBECONFIG)")?;
    let metrics = std::sync::Arc::new(controller::metrics::Metrics::new());
    let (client, rate_limit) = connect(&config, &args, &metrics).await?;
    let options = run_options(&args, &gates, &metrics, rate_limit);
    let signalled = watch_for_shutdown();
    tracing::info!(logger = "setup", "starting manager");
    serve_metrics_and_probes(&args, &metrics).await?;
    let leading = match elect(&args, &client, &metrics, signalled.clone()).await {
        Election::Off => None,
        Election::Leading(leading) => Some(leading),
        Election::StoppedWaiting => {
            log_servers_stopping(&args);
            return Ok(());
        }
    };
    let outcome = run_until_stopped(client, config, options, metrics.clone(), signalled).await;
    if matches!(outcome, Ok(true)) {
        log_servers_stopping(&args);
    }
    if let Some(leading) = leading {
        give_up(*leading, &metrics, args.leader_election_release_on_cancel).await;
    }
    match outcome {
        Ok(true) => Ok(()),
        // As Flux's main after its manager failed: exit 1.
        Ok(false) => std::process::exit(1),
        Err(error) => Err(anyhow::anyhow!(error)),
    }
}

/// The controller's API client: rate-limited on the client side only when the API server
/// does not do API Priority and Fairness (as client-go's default), each request counted.
async fn connect(
    config: &kube::Config,
    args: &RunArgs,
    metrics: &std::sync::Arc<controller::metrics::Metrics>,
) -> anyhow::Result<(kube::Client, Option<controller::ratelimit::RateLimit>)> {
    let probe = controller::ratelimit::client(
        config.clone(),
        controller::ratelimit::ClientLayers::default(),
    )
    .context("creating the API client")?;
    let flow_control = controller::ratelimit::priority_and_fairness(&probe).await;
    let rate_limit =
        controller::ratelimit::client_limit(flow_control, args.kube_api_qps, args.kube_api_burst);
    if flow_control {
        tracing::info!(
            logger = "setup",
            "API Priority and Fairness is on: no client-side rate limit"
        );
    } else {
        tracing::info!(
            logger = "setup",
            qps = args.kube_api_qps,
            burst = args.kube_api_burst,
            "API Priority and Fairness is off: client-side rate limit"
        );
    }
    let client = controller::ratelimit::client(
        config.clone(),
        controller::ratelimit::ClientLayers {
            limit: rate_limit.as_ref(),
            requests: Some(&metrics.requests),
        },
    )
    .context("creating the API client")?;
    Ok((client, rate_limit))
}

/// Serves `/metrics` and the probes on `--metrics-addr` and on `--health-addr` (each address
/// answers every route; `0` serves nothing there, as controller-runtime reads it). A port that
/// cannot be bound stops the start-up, as it stops Flux's manager.
async fn serve_metrics_and_probes(
    args: &RunArgs,
    metrics: &std::sync::Arc<controller::metrics::Metrics>,
) -> anyhow::Result<()> {
    for (address_flag, probes) in [(&args.metrics_addr, false), (&args.health_addr, true)] {
        if address_flag == "0" {
            continue;
        }
        let address = listen_address(address_flag);
        let listener = tokio::net::TcpListener::bind(&address)
            .await
            .map_err(|error| anyhow::anyhow!("failed to create listener on {address}: {error}"))
            .context("problem running manager")?;
        // controller-runtime's lines for its two servers.
        if probes {
            let addr = go_listener_address(address_flag);
            tracing::info!(name = "health probe", addr = addr, "starting server");
        } else {
            let logger = "controller-runtime.metrics";
            tracing::info!(logger = logger, "Starting metrics server");
            tracing::info!(
                logger = logger,
                bindAddress = address_flag,
                secure = false,
                "Serving metrics server"
            );
        }
        let metrics = metrics.clone();
        tokio::spawn(async move {
            if let Err(error) = controller::metrics::serve_on(listener, metrics).await {
                tracing::error!(logger = "setup", address = %address, error = %error, "serving metrics and probes");
            }
        });
    }
    Ok(())
}

/// controller-runtime's manager lines once the controllers have stopped: the caches, the
/// webhooks and the servers (each served one saying it shuts down), then the end of the wait.
fn log_servers_stopping(args: &RunArgs) {
    for line in [
        "Stopping and waiting for caches",
        "Stopping and waiting for webhooks",
        "Stopping and waiting for HTTP servers",
    ] {
        tracing::info!("{line}");
    }
    if args.health_addr != "0" {
        let addr = go_listener_address(&args.health_addr);
        tracing::info!(name = "health probe", addr = addr, "shutting down server");
    }
    if args.metrics_addr != "0" {
        tracing::info!(
            logger = "controller-runtime.metrics",
            "Shutting down metrics server with timeout of 1 minute"
        );
    }
    tracing::info!("Wait completed, proceeding to shutdown the manager");
}

/// A listener's address as Go prints it: a flag without a host listens on every address,
/// which Go shows as `[::]`.
fn go_listener_address(flag: &str) -> String {
    if flag.starts_with(':') {
        format!("[::]{flag}")
    } else {
        flag.to_string()
    }
}

/// The controller's options from its flags and feature gates (and the metrics its token cache
/// counts in).
fn run_options(
    args: &RunArgs,
    gates: &controller::FeatureGates,
    metrics: &std::sync::Arc<controller::metrics::Metrics>,
    rate_limit: Option<controller::ratelimit::RateLimit>,
) -> controller::RunOptions {
    use controller::Gate;
    controller::RunOptions {
        reconcile: controller::Options {
            concurrent_ssa: args.concurrent_ssa,
            requeue_dependency: args.requeue_dependency,
            no_cross_namespace_refs: args.no_cross_namespace_refs,
            default_service_account: args.default_service_account.clone(),
            sops_age_secret: args.sops_age_secret.clone(),
            build_limits: kustomize::Limits {
                max_depth: args.build_max_depth,
                max_objects: args.build_max_objects,
                ..Default::default()
            },
            default_decryption_service_account: args.default_decryption_service_account.clone(),
            default_kubeconfig_service_account: args.default_kubeconfig_service_account.clone(),
            token_cache: kustomize_controller::auth::cache::TokenCache::new(
                args.token_cache_max_size,
                args.token_cache_max_duration,
                metrics.token_cache.clone(),
            )
            .map(std::sync::Arc::new),
            build_cache: (args.build_cache_max_size > 0).then(|| {
                std::sync::Arc::new(controller::build_cache::BuildCache::new(
                    args.build_cache_max_size,
                    metrics.build_cache.clone(),
                ))
            }),
            runtime_namespace: args.runtime_namespace.clone(),
            sops_vault_config_map: args
                .sops_vault_configmap
                .clone()
                .filter(|name| !name.is_empty()),
            override_managers: args.override_managers.clone(),
            custom_apply_stage_kinds: args.custom_apply_stage_kinds.clone(),
            interval_jitter_percentage: args.interval_jitter_percentage,
            min_retry_delay: args.min_retry_delay,
            max_retry_delay: args.max_retry_delay,
            strict_substitution: gates.enabled(Gate::StrictPostBuildSubstitutions),
            allow_external_artifact: gates.enabled(Gate::ExternalArtifact),
            object_level_workload_identity: gates.enabled(Gate::ObjectLevelWorkloadIdentity),
            prune_guard: gates.enabled(Gate::PruneGuard),
            prune_guard_default: args.prune_guard_threshold.0,
            drift_warn_mode: gates.enabled(Gate::DriftWarnMode),
            cancel_health_on_new_revision: gates.enabled(Gate::CancelHealthCheckOnNewRevision),
            additive_cel_dependency_check: gates.enabled(Gate::AdditiveCELDependencyCheck),
            group_change_log: gates.enabled(Gate::GroupChangeLog),
            migrate_api_version: gates.enabled(Gate::MigrateAPIVersion),
            cache_secrets_and_config_maps: gates.enabled(Gate::CacheSecretsAndConfigMaps),
            direct_source_fetch: gates.enabled(Gate::DirectSourceFetch),
            disable_fail_fast: gates.enabled(Gate::DisableFailFastBehavior),
            remote: remote_fetcher(if args.no_remote_bases {
                RemoteBases::Refused
            } else {
                RemoteBases::NetworkOnly
            }),
            events_addr: Some(args.events_addr.clone()).filter(|a| !a.is_empty()),
            rate_limit,
            rest_requests: Some(metrics.requests.clone()),
            kubeconfig_allowances: controller::remote::Allowances {
                exec: args.insecure_kubeconfig_exec,
                insecure_tls: args.insecure_kubeconfig_tls,
            },
            ..controller::Options::default()
        },
        fetcher: kustomize_controller::source::FetcherOptions {
            retries: args.http_retry,
            localhost: std::env::var("SOURCE_CONTROLLER_LOCALHOST")
                .ok()
                .filter(|v| !v.is_empty()),
            watcher_localhost: std::env::var("SOURCE_WATCHER_LOCALHOST")
                .ok()
                .filter(|v| !v.is_empty()),
            ..Default::default()
        },
        concurrent: args.concurrent,
        namespace: (!args.watch_all_namespaces).then(|| args.runtime_namespace.clone()),
        label_selector: args.watch_label_selector.clone(),
        // An empty selector is Flux's `labels.Everything()`: the metadata of every ConfigMap
        // and Secret in scope is watched, and those a Kustomization reads trigger it.
        watch_configs_label_selector: Some(args.watch_configs_label_selector.clone())
            .filter(|_| !gates.enabled(Gate::DisableConfigWatchers)),
    }
}

/// Completes, and stays complete, once SIGTERM or Ctrl-C came.
fn watch_for_shutdown() -> tokio::sync::watch::Receiver<bool> {
    let (stopping, signalled) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown_signal().await;
        // controller-runtime's manager, as it starts stopping its runnables.
        for line in [
            "Stopping and waiting for warmup runnables",
            "Stopping and waiting for non leader election runnables",
            "Stopping and waiting for leader election runnables",
        ] {
            tracing::info!("{line}");
        }
        let _ = stopping.send(true);
        // As controller-runtime's signal handler: a second signal ends it at once.
        shutdown_signal().await;
        std::process::exit(1);
    });
    signalled
}

async fn signalled(mut signalled: tokio::sync::watch::Receiver<bool>) {
    let _ = signalled.wait_for(|stop| *stop).await;
}

/// The leader election's state, for giving the Lease up at the end.
struct Leading {
    election: controller::leader::LeaderElection,
    renewing: tokio::task::JoinHandle<()>,
    lease: String,
    /// `namespace/name`, as client-go names the Lease in its log lines.
    described: String,
}

enum Election {
    /// `--enable-leader-election` is off.
    Off,
    Leading(Box<Leading>),
    /// Stopped while a standby: nothing ran, nothing to give up.
    StoppedWaiting,
}

/// With `--enable-leader-election`, waits for the Lease (a standby stops cleanly on SIGTERM)
/// and keeps renewing it; losing it stops the process at once, as controller-runtime does,
/// since another replica now applies.
async fn elect(
    args: &RunArgs,
    client: &kube::Client,
    metrics: &std::sync::Arc<controller::metrics::Metrics>,
    stop: tokio::sync::watch::Receiver<bool>,
) -> Election {
    if !args.enable_leader_election {
        return Election::Off;
    }
    // controller-runtime's: the host name and a fresh UUID.
    let identity = format!(
        "{}_{}",
        std::env::var("HOSTNAME").unwrap_or_else(|_| "kustomize-controller".into()),
        kustomize_controller::logging::reconcile_id()
    );
    let lease = controller::leader::lease_name(args.watch_label_selector.as_deref());
    let election = controller::leader::LeaderElection::new(
        client.clone(),
        &args.runtime_namespace,
        &lease,
        &identity,
        args.leader_election_lease_duration,
        args.leader_election_renew_deadline,
        args.leader_election_retry_period,
    );
    // client-go's words, which Flux's log has under the `runtime` logger.
    let described = election.describe();
    metrics.set_leader(&lease, false);
    tracing::info!(logger = "runtime", lock = %described, "Attempting to acquire leader lease...");
    tokio::select! {
        () = election.acquire() => {}
        () = signalled(stop) => {
            tracing::info!(logger = "setup", "stopping: the leader lease {described} was not acquired");
            return Election::StoppedWaiting;
        }
    }
    metrics.set_leader(&lease, true);
    tracing::info!(logger = "runtime", lock = %described, "Successfully acquired lease");
    // Best effort and never in the way of the renewals, as client-go's recorder.
    tokio::spawn({
        let election = election.clone();
        async move { election.record_event("became leader").await }
    });
    let holding = election.clone();
    let status = metrics.clone();
    let held = lease.clone();
    let renewing = tokio::spawn(async move {
        let lost = holding.hold().await;
        status.set_leader(&held, false);
        // No Event here: another replica may lead already, so nothing may wait before the
        // exit (the API server is likely what failed the renewal).
        tracing::error!(logger = "setup", error = %lost, "problem running manager");
        std::process::exit(1);
    });
    Election::Leading(Box::new(Leading {
        election,
        renewing,
        lease,
        described,
    }))
}

/// Runs the controller until SIGTERM. controller-runtime's graceful shutdown: health checks
/// end at once and the reconciliations in flight finish, for up to
/// [`GRACEFUL_SHUTDOWN_TIMEOUT`]; after that the process stops regardless, well within a
/// Pod's grace period. Whether it stopped in time.
async fn run_until_stopped(
    client: kube::Client,
    config: kube::Config,
    options: controller::RunOptions,
    metrics: std::sync::Arc<controller::metrics::Metrics>,
    stop: tokio::sync::watch::Receiver<bool>,
) -> Result<bool, kustomize_controller::source::SourceError> {
    let grace_over = {
        let stop = stop.clone();
        async move {
            signalled(stop).await;
            tokio::time::sleep(GRACEFUL_SHUTDOWN_TIMEOUT).await;
        }
    };
    tokio::select! {
        result = controller::run(client, config, options, metrics, signalled(stop)) => {
            result.map(|()| true)
        }
        () = grace_over => {
            tracing::error!(
                logger = "setup",
                error = format!(
                    "failed waiting for all runnables to end within grace period of {}: context deadline exceeded",
                    api::GoDuration::from_std(GRACEFUL_SHUTDOWN_TIMEOUT)
                ),
                "problem running manager"
            );
            Ok(false)
        }
    }
}

/// Stops renewing the Lease and, with `--leader-election-release-on-cancel`, gives it up so
/// a standby takes over at once — on every way out.
async fn give_up(
    leading: Leading,
    metrics: &controller::metrics::Metrics,
    release_on_cancel: bool,
) {
    let Leading {
        election,
        renewing,
        lease,
        described,
    } = leading;
    renewing.abort();
    metrics.set_leader(&lease, false);
    // Bounded, so that a slow API server cannot hold the shutdown past the release.
    let _ = tokio::time::timeout(
        std::time::Duration::from_secs(1),
        election.record_event("stopped leading"),
    )
    .await;
    if !release_on_cancel {
        return;
    }
    let released =
        tokio::time::timeout(std::time::Duration::from_secs(5), election.release()).await;
    // client-go says nothing of a release that worked.
    match released {
        Ok(Ok(())) => tracing::debug!(logger = "runtime", lock = %described, "Lease released"),
        Ok(Err(error)) => {
            tracing::error!(logger = "runtime", error = %error, lock = %described, "Failed to release lease")
        }
        Err(_) => tracing::error!(
            logger = "runtime",
            error = "context deadline exceeded",
            lock = %described,
            "Failed to release lease"
        ),
    }
}
