//! What every reconciliation shares: the controller's options (its flags), the clients it
//! applies with (impersonated, or for a remote cluster), per-Kustomization caches, discovery
//! results and the retry backoff.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::events::Recorder;
use super::remote::ClientError;
use crate::api::Kustomization;
use crate::apply::AppliedCache;
use crate::controller::KustomizationKey;
use crate::objects::KindCache;
use crate::source::Fetcher;

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
    /// What one build may use (`--build-max-depth`).
    pub build_limits: crate::kustomize::Limits,
    /// `--default-decryption-service-account`: the identity Flux decrypts as when a
    /// Kustomization names none; here it keeps the controller's own cloud credentials away
    /// from those Kustomizations.
    pub default_decryption_service_account: Option<String>,
    pub runtime_namespace: String,
    /// `--sops-vault-configmap`: the ConfigMap (in `runtime_namespace`) listing the Vault
    /// servers a decryption may log in to as a ServiceAccount, and each one's login path.
    pub sops_vault_config_map: Option<String>,
    /// `--default-kubeconfig-service-account`: the identity a kubeconfig ConfigMap without
    /// `serviceAccountName` uses (gate `ObjectLevelWorkloadIdentity`).
    pub default_kubeconfig_service_account: Option<String>,
    /// The controller's own ServiceAccount token (a kubeconfig ConfigMap's `generic`
    /// provider without an account uses it).
    pub controller_token_file: std::path::PathBuf,
    /// The token cache (`--token-cache-max-size`, `--token-cache-max-duration`): credentials
    /// of secret-less identities kept across reconciles; `None` when turned off.
    pub token_cache: Option<Arc<crate::auth::cache::TokenCache>>,
    /// The objects each Kustomization built last (`--build-cache-max-size`), reused while
    /// the build's inputs are unchanged; `None` when turned off.
    pub build_cache: Option<Arc<super::reconcile::build_cache::BuildCache>>,
    /// Where Google's STS, IAM Credentials, Kubernetes Engine API and metadata server are
    /// reached for remote clusters, when not Google's own (private endpoints, tests).
    pub google_endpoints: Option<crate::auth::gcp::GoogleEndpoints>,
    /// Azure Resource Manager's origin for AKS clusters, when not Azure's own (tests).
    pub azure_resource_manager: Option<String>,
    /// The controller's environment, as it started: its own cloud identity and the key
    /// services' endpoints come from it (tests give their own).
    pub environment: Arc<Vec<(String, String)>>,
    pub override_managers: Vec<String>,
    pub custom_apply_stage_kinds: Vec<String>,
    pub interval_jitter_percentage: u8,
    pub health_poll_interval: Duration,
    pub min_retry_delay: Duration,
    pub max_retry_delay: Duration,
    /// The `StrictPostBuildSubstitutions` feature gate (on, as in Flux 1.9).
    pub strict_substitution: bool,
    /// The `ExternalArtifact` feature gate: ExternalArtifact sources are watched and read.
    pub allow_external_artifact: bool,
    /// The `AdditiveCELDependencyCheck` feature gate: a `readyExpr` adds to the built-in
    /// readiness check instead of replacing it.
    pub additive_cel_dependency_check: bool,
    /// The `DisableFailFastBehavior` feature gate: health checks wait out the timeout even
    /// when an object has failed.
    pub disable_fail_fast: bool,
    /// The `MigrateAPIVersion` feature gate.
    pub migrate_api_version: bool,
    /// The `CacheSecretsAndConfigMaps` feature gate: ConfigMaps and Secrets are read from
    /// watches of all of them (see `configs`).
    pub cache_secrets_and_config_maps: bool,
    /// The `DirectSourceFetch` feature gate: sources are read from the API server, not from
    /// the source watches.
    pub direct_source_fetch: bool,
    /// The `GroupChangeLog` feature gate: the apply log groups objects by action.
    pub group_change_log: bool,
    /// The `CancelHealthCheckOnNewRevision` feature gate.
    pub cancel_health_on_new_revision: bool,
    /// The `ObjectLevelWorkloadIdentity` feature gate.
    pub object_level_workload_identity: bool,
    /// Beyond Flux, the `PruneGuard` feature gate: the prune guard's annotations are read.
    pub prune_guard: bool,
    /// `--prune-guard-threshold`: the guard's threshold where a Kustomization sets none.
    pub prune_guard_default: Option<super::prune_guard::Threshold>,
    /// Beyond Flux, the `DriftWarnMode` feature gate: the drift-detection annotation is read.
    pub drift_warn_mode: bool,
    /// What remote-cluster kubeconfigs may do.
    pub kubeconfig_allowances: super::remote::Allowances,
    /// notification-controller's address (`--events-addr`); events are forwarded there.
    pub events_addr: Option<String>,
    /// `--kube-api-qps`/`--kube-api-burst`, shared by every client the controller makes.
    pub rate_limit: Option<super::ratelimit::RateLimit>,
    /// Counts every API request of the clients the controller makes (`rest_client_requests_total`).
    pub rest_requests: Option<super::runtime_metrics::RestRequests>,
    /// Fetches remote bases; `None` (`--no-remote-bases`) refuses them.
    pub remote: Option<Arc<dyn crate::kustomize::RemoteFetcher>>,
}

impl Options {
    /// The parameters of the writes Flux's patcher makes to a Kustomization (its status, its
    /// finalizer, its annotations): merge patches by the status manager.
    pub fn status_writes(&self) -> kube::api::PatchParams {
        kube::api::PatchParams {
            field_manager: Some(self.status_manager.clone()),
            ..kube::api::PatchParams::default()
        }
    }

    /// The layers every client the controller makes wears.
    pub fn client_layers(&self) -> super::ratelimit::ClientLayers<'_> {
        super::ratelimit::ClientLayers {
            limit: self.rate_limit.as_ref(),
            requests: self.rest_requests.as_ref(),
        }
    }
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
            build_limits: crate::kustomize::Limits::default(),
            default_decryption_service_account: None,
            environment: Arc::new(std::env::vars().collect()),
            token_cache: crate::auth::cache::TokenCache::new(
                100,
                crate::auth::cache::MAX_DURATION,
                Default::default(),
            )
            .map(Arc::new),
            build_cache: Some(Arc::new(super::reconcile::build_cache::BuildCache::new(
                super::reconcile::build_cache::DEFAULT_CAPACITY,
                Default::default(),
            ))),
            default_kubeconfig_service_account: None,
            google_endpoints: None,
            azure_resource_manager: None,
            controller_token_file: super::remote_identity::default_token_file(),
            runtime_namespace: "flux-system".into(),
            sops_vault_config_map: None,
            override_managers: Vec::new(),
            custom_apply_stage_kinds: Vec::new(),
            interval_jitter_percentage: 5,
            health_poll_interval: Duration::from_secs(2),
            min_retry_delay: Duration::from_millis(750),
            max_retry_delay: Duration::from_secs(15 * 60),
            strict_substitution: true,
            allow_external_artifact: false,
            object_level_workload_identity: false,
            prune_guard: true,
            prune_guard_default: None,
            drift_warn_mode: true,
            cancel_health_on_new_revision: false,
            additive_cel_dependency_check: false,
            group_change_log: false,
            migrate_api_version: false,
            cache_secrets_and_config_maps: false,
            direct_source_fetch: false,
            disable_fail_fast: false,
            remote: None,
            kubeconfig_allowances: Default::default(),
            events_addr: None,
            rate_limit: None,
            rest_requests: None,
        }
    }
}

/// The client Events are written with: the controller's, but with a rate limiter of its own
/// (client-go gives Flux's event recorder its own clientset), so Events never wait behind
/// the reconcilers' requests nor they behind Events.
fn events_client(client: &kube::Client, config: &kube::Config, options: &Options) -> kube::Client {
    let Some(limit) = &options.rate_limit else {
        return client.clone();
    };
    let layers = super::ratelimit::ClientLayers {
        limit: Some(&limit.twin()),
        requests: options.rest_requests.as_ref(),
    };
    super::ratelimit::client(config.clone(), layers).unwrap_or_else(|error| {
        tracing::error!(error = %error, "Events share the controller's rate limiter");
        client.clone()
    })
}

/// Shared state of the reconcilers.
pub struct Context {
    pub client: kube::Client,
    pub config: kube::Config,
    pub options: Options,
    pub fetcher: Fetcher,
    pub recorder: Recorder,
    pub metrics: Arc<super::metrics::Metrics>,
    /// Health checks a new source revision may cancel.
    pub health_cancels: super::cancel::HealthCancels,
    /// Set when the process stops: health checks end at once.
    pub stopping: super::cancel::Stopping,
    /// The revision each Kustomization last attempted, for the source watch.
    pub attempted: super::cancel::AttemptedRevisions,
    caches: Mutex<BTreeMap<KustomizationKey, AppliedCache>>,
    /// Clients of remote clusters, rebuilt only when their kubeconfig Secret changes.
    remote_clients: super::remote::RemoteClients,
    /// Clients of remote clusters reached with an identity, until their token ages out.
    identity_clients: super::remote_identity::IdentityClients,
    /// Discovery results shared by every Kustomization's applier (one per cluster).
    kinds: KindCache,
    /// The watched source objects, as last seen.
    pub sources: crate::source::SourceCache,
    /// Where ConfigMaps and Secrets are read from (the API server unless the gate caches them).
    pub configs: super::configs::ConfigReader,
    /// What this cluster's watches tell of the objects Kustomizations applied.
    pub owned: crate::objects::OwnedObjects,
    /// Our last write to each Kustomization, to tell a stale cached copy.
    pub own_writes: super::freshness::OwnWrites,
    /// The controller's watch of Kustomizations, once it runs.
    kustomizations: std::sync::OnceLock<kube::runtime::reflector::Store<crate::api::Kustomization>>,
    clients: Mutex<BTreeMap<String, kube::Client>>,
    failures: Mutex<BTreeMap<KustomizationKey, u32>>,
}

impl Context {
    pub fn new(
        client: kube::Client,
        config: kube::Config,
        options: Options,
        fetcher: Fetcher,
        metrics: Arc<super::metrics::Metrics>,
    ) -> Context {
        let own_client = client.clone();
        let owned = crate::objects::OwnedObjects::new(own_client.clone())
            .reporting_to(metrics.watches.clone());
        Context {
            recorder: Recorder::new(
                events_client(&client, &config, &options),
                "kustomize-controller",
            )
            .with_events_addr(options.events_addr.clone()),
            client,
            config,
            options,
            fetcher,
            metrics,
            health_cancels: Default::default(),
            stopping: Default::default(),
            attempted: Default::default(),
            caches: Mutex::new(BTreeMap::new()),
            kinds: Default::default(),
            sources: Default::default(),
            configs: super::configs::ConfigReader::direct(own_client.clone()),
            owned,
            own_writes: Default::default(),
            kustomizations: Default::default(),
            remote_clients: Default::default(),
            identity_clients: Default::default(),
            clients: Mutex::new(BTreeMap::new()),
            failures: Mutex::new(BTreeMap::new()),
        }
    }

    /// ConfigMaps and Secrets are read through `configs`.
    pub fn set_configs(&mut self, configs: super::configs::ConfigReader) {
        self.configs = configs;
    }

    /// Hands the Kustomization watch's store to the reconcilers (once).
    pub(crate) fn share_kustomizations(
        &self,
        store: kube::runtime::reflector::Store<crate::api::Kustomization>,
    ) {
        // The applied-object watches keep only the objects of the Kustomizations this
        // controller reconciles: a shard's watches see every shard's objects.
        let kustomizations = store.clone();
        self.owned
            .keep_only(Arc::new(move |namespace: &str, name: &str| {
                let reference = kube::runtime::reflector::ObjectRef::new(name).within(namespace);
                kustomizations.get(&reference).is_some()
            }));
        let _ = self.kustomizations.set(store);
    }

    /// A Kustomization as the controller's watch last saw it, if the watch covers it.
    pub(crate) fn watched_kustomization(
        &self,
        namespace: &str,
        name: &str,
    ) -> Option<Arc<crate::api::Kustomization>> {
        let reference = kube::runtime::reflector::ObjectRef::new(name).within(namespace);
        self.kustomizations.get()?.get(&reference)
    }

    pub(crate) fn cache_for(&self, key: &KustomizationKey) -> AppliedCache {
        self.caches
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(key.clone())
            .or_default()
            .clone()
    }

    /// The client that applies for a Kustomization: impersonating `account` in `namespace`
    /// when there is one.
    fn applier_client(
        &self,
        namespace: &str,
        account: Option<&str>,
    ) -> Result<kube::Client, ClientError> {
        let Some(account) = account else {
            return Ok(self.client.clone());
        };
        let user = format!("system:serviceaccount:{namespace}:{account}");
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(client) = clients.get(&user) {
            return Ok(client.clone());
        }
        let mut config = self.config.clone();
        config.auth_info.impersonate = Some(user.clone());
        let client =
            super::ratelimit::client(config, self.options.client_layers()).map_err(|source| {
                ClientError::Impersonate {
                    user: user.clone(),
                    source,
                }
            })?;
        clients.insert(user, client.clone());
        Ok(client)
    }

    /// The client that applies, prunes and checks health for a Kustomization: for the
    /// cluster `spec.kubeConfig` names, else this one; as `spec.serviceAccountName` (or
    /// `--default-service-account`) when set.
    pub(crate) async fn target_client(
        &self,
        object: &Kustomization,
    ) -> Result<kube::Client, ClientError> {
        let namespace = object.metadata.namespace.clone().unwrap_or_default();
        // As Flux: the service account (or --default-service-account) is impersonated on a
        // remote cluster too.
        let account = object
            .spec
            .service_account()
            .or(self.options.default_service_account.as_deref());
        match &object.spec.kube_config {
            Some(reference) => {
                let impersonate =
                    account.map(|sa| format!("system:serviceaccount:{namespace}:{sa}"));
                if let (None, Some(config_map)) = (&reference.secret_ref, &reference.config_map_ref)
                {
                    let options = super::remote_identity::IdentityOptions {
                        object_level_workload_identity: self.options.object_level_workload_identity,
                        default_kubeconfig_service_account: self
                            .options
                            .default_kubeconfig_service_account
                            .as_deref(),
                        controller_token_file: &self.options.controller_token_file,
                        environment: &self.options.environment,
                        google_endpoints: self.options.google_endpoints.as_ref(),
                        azure_resource_manager: self.options.azure_resource_manager.as_deref(),
                        token_cache: self.options.token_cache.as_deref(),
                        object_name: object.metadata.name.as_deref().unwrap_or_default(),
                    };
                    return super::remote_identity::client(
                        &self.client,
                        &self.configs,
                        &namespace,
                        &config_map.name,
                        &options,
                        impersonate,
                        &self.identity_clients,
                        self.options.rest_requests.as_ref(),
                    )
                    .await
                    .map_err(ClientError::from);
                }
                super::remote::cached_client(
                    &self.configs,
                    &namespace,
                    reference,
                    self.options.kubeconfig_allowances,
                    impersonate,
                    &self.remote_clients,
                    self.options.rest_requests.as_ref(),
                )
                .await
            }
            None => self.applier_client(&namespace, account),
        }
    }

    /// Drops what was kept for a deleted Kustomization.
    pub(crate) fn forget(&self, key: &KustomizationKey) {
        self.caches
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
        self.own_writes.forget(key);
        self.metrics.runtime.queue.forget(key);
    }

    /// Exponential backoff for transient errors, per object.
    pub fn backoff(&self, key: &KustomizationKey) -> Duration {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let count = failures.entry(key.clone()).or_default();
        *count = count.saturating_add(1);
        let factor = 2u32.saturating_pow((*count - 1).min(20));
        (self.options.min_retry_delay * factor).min(self.options.max_retry_delay)
    }

    pub(crate) fn reset_backoff(&self, key: &KustomizationKey) {
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }

    /// Discovery results for the cluster `object` applies to: shared for this cluster, new
    /// for a remote one (remote clusters serve their own kinds).
    pub(crate) fn kinds_for(&self, object: &Kustomization) -> KindCache {
        if object.spec.kube_config.is_none() {
            self.kinds.clone()
        } else {
            KindCache::default()
        }
    }
}
