//! The controller harness: `controller::run` against a test cluster (in-process, envtest or
//! `TEST_KUBECONFIG`), with artifacts served over loopback HTTP and helpers to create
//! Kustomizations and sources and wait for their conditions.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use kustomize_controller::api::Kustomization;
use kustomize_controller::controller::watch::WatchReport;
use kustomize_controller::controller::{self, Options, RunOptions, WatchHealth, metrics::Metrics};
use kustomize_controller::source::FetcherOptions;
use serde_json::{Value, json};

use super::artifacts::{Artifact, ArtifactServer, SourceKind};
use super::cluster::{TestCluster, wait_for};
use super::process::Watchdog;
use super::repo_root;

pub struct Harness {
    pub cluster: TestCluster,
    pub artifacts: ArtifactServer,
    /// The controller's metrics and probes (watches count as down after 2 s).
    pub metrics: Arc<Metrics>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
    /// The bearer token the controller authenticates with; the admin's credentials if none.
    token: Option<String>,
}

impl Harness {
    pub async fn start() -> Harness {
        Harness::start_with(|_| {}).await
    }

    /// The cluster and artifact server only: `restart_with` starts the controller, for tests
    /// that prepare objects it must first meet in a given state.
    pub async fn start_without_controller() -> Harness {
        Harness {
            cluster: TestCluster::start().await,
            artifacts: ArtifactServer::start().await,
            metrics: Arc::new(Metrics::default()),
            stop: None,
            task: None,
            token: None,
        }
    }

    pub async fn start_with(adjust: impl FnOnce(&mut RunOptions)) -> Harness {
        let cluster = TestCluster::start().await;
        let artifacts = ArtifactServer::start().await;
        let mut harness = Harness {
            cluster,
            artifacts,
            metrics: Arc::new(Metrics::default()),
            stop: None,
            task: None,
            token: None,
        };
        harness.run_controller(adjust);
        harness
    }

    /// Restarts the controller authenticated by `token` (a ServiceAccount's), so that what it
    /// may do is what that account's RBAC grants.
    pub async fn restart_as(&mut self, token: String) {
        self.restart_as_with(token, |_| {}).await;
    }

    /// `restart_as`, with other options.
    pub async fn restart_as_with(&mut self, token: String, adjust: impl FnOnce(&mut RunOptions)) {
        self.token = Some(token);
        self.restart_with(adjust).await;
    }

    /// Stops the controller (in-flight reconciliations finish) and starts another on the same
    /// cluster with other options, as Flux's tests change their reconciler's fields mid-test.
    pub async fn restart_with(&mut self, adjust: impl FnOnce(&mut RunOptions)) {
        self.stop_controller().await;
        self.run_controller(adjust);
    }

    /// Stops the controller (in-flight reconciliations finish).
    async fn stop_controller(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = tokio::time::timeout(Duration::from_secs(30), task).await;
        }
    }

    fn run_controller(&mut self, adjust: impl FnOnce(&mut RunOptions)) {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let mut options = RunOptions {
            reconcile: Options {
                health_poll_interval: Duration::from_millis(50),
                requeue_dependency: Duration::from_millis(200),
                interval_jitter_percentage: 0,
                ..Options::default()
            },
            fetcher: FetcherOptions {
                retries: 1,
                retry_wait_min: Duration::from_millis(10),
                ..FetcherOptions::default()
            },
            concurrent: 4,
            namespace: Some(self.cluster.namespace.clone()),
            label_selector: None,
            watch_configs_label_selector: Some("reconcile.fluxcd.io/watch=Enabled".into()),
        };
        adjust(&mut options);
        let config = match &self.token {
            Some(token) => self.cluster.config_with_token(token),
            None => self.cluster.config(),
        };
        let metrics = Arc::new(Metrics::with_watch_grace(WatchHealth::new(
            Duration::from_secs(2),
        )));
        // The client the binary makes (its retries and request counting), without the
        // client-side limit a server without API Priority and Fairness would get.
        let client = controller::ratelimit::client(
            config.clone(),
            controller::ratelimit::ClientLayers {
                limit: None,
                requests: Some(&metrics.requests),
            },
        )
        .expect("a controller client");
        // Flux's default token cache, counted in this controller's metrics (unless the test
        // turned it off).
        if options.reconcile.token_cache.is_some() {
            options.reconcile.token_cache = kustomize_controller::auth::cache::TokenCache::new(
                100,
                Duration::from_secs(3600),
                metrics.token_cache.clone(),
            )
            .map(Arc::new);
        }
        // The build cache, counted in this controller's metrics (unless the test turned it off).
        if options.reconcile.build_cache.is_some() {
            options.reconcile.build_cache =
                Some(Arc::new(controller::build_cache::BuildCache::new(
                    controller::build_cache::DEFAULT_CAPACITY,
                    metrics.build_cache.clone(),
                )));
        }
        let running = metrics.clone();
        let task = tokio::spawn(async move {
            controller::run(client, config, options, running, async {
                let _ = stopped.await;
            })
            .await
            .expect("the controller runs");
        });
        self.metrics = metrics;
        self.stop = Some(stop);
        self.task = Some(task);
    }

    pub fn publish(&self, fixture: &str, revision: &str) -> Artifact {
        let dir = repo_root().join("tests/fixtures/controller").join(fixture);
        self.artifacts
            .publish_dir(&format!("{fixture}-{revision}.tar.gz"), revision, &dir)
    }

    pub fn kustomizations(&self) -> Api<Kustomization> {
        Api::namespaced(self.cluster.client.clone(), &self.cluster.namespace)
    }

    pub fn config_maps(&self) -> Api<ConfigMap> {
        Api::namespaced(self.cluster.client.clone(), &self.cluster.namespace)
    }

    pub async fn create_kustomization(&self, name: &str, spec: Value) {
        let mut full = json!({"interval": "10m", "prune": true, "targetNamespace": self.cluster.namespace,
            "sourceRef": {"kind": "GitRepository", "name": "repo"}});
        if let (Some(full), Some(spec)) = (full.as_object_mut(), spec.as_object()) {
            full.extend(spec.clone());
            // `null` drops a default (e.g. no targetNamespace).
            full.retain(|_, value| !value.is_null());
        }
        self.cluster
            .apply(&json!({
                "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                "metadata": {"name": name, "namespace": self.cluster.namespace},
                "spec": full,
            }))
            .await;
    }

    /// Waits until the Kustomization's Ready condition has `status` and `reason`.
    pub async fn wait_ready(&self, name: &str, status: &str, reason: &str) -> Kustomization {
        self.wait_ready_within(Duration::from_secs(30), name, status, reason)
            .await
    }

    /// `wait_ready`, for outcomes that take longer (a health check timing out).
    pub async fn wait_ready_within(
        &self,
        limit: Duration,
        name: &str,
        status: &str,
        reason: &str,
    ) -> Kustomization {
        let api = self.kustomizations();
        let found = wait_for(limit, || async {
            let object = api.get(name).await.ok()?;
            let ready = object
                .status
                .as_ref()?
                .conditions
                .iter()
                .find(|c| c.type_ == "Ready")?;
            (ready.status == status && ready.reason == reason).then_some(object)
        })
        .await;
        match found {
            Some(object) => object,
            None => {
                let object = api.get(name).await.ok();
                panic!(
                    "{name} never reached Ready={status} ({reason}); status: {}",
                    serde_json::to_string_pretty(&object.and_then(|o| o.status)).unwrap()
                );
            }
        }
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// A kubeconfig for the controller binary on any backend: the in-process server's admin one,
/// or elsewhere one with the token of a cluster-admin ServiceAccount of the test namespace
/// (`TestCluster::controller_account`), as a deployment gives the controller.
pub async fn controller_kubeconfig(cluster: &TestCluster) -> String {
    match cluster.server() {
        Some(server) => server.kubeconfig_yaml(),
        None => {
            let (token, _) = cluster.controller_account().await;
            cluster.kubeconfig_with_token(&token)
        }
    }
}

pub fn ready_message(object: &Kustomization) -> String {
    object
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

impl Harness {
    /// Serves an artifact made of the given files.
    pub fn publish_files(&self, name: &str, revision: &str, files: &[(&str, &str)]) -> Artifact {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let path = dir.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        self.artifacts
            .publish_dir(&format!("{name}.tar.gz"), revision, dir.path())
    }

    /// Flux's age-encrypted test Secret (`age`, `key: value`), and the Secret `sops-keys`
    /// holding its age key, for `decryption.secretRef`.
    pub async fn age_encrypted_secret_and_keys(&self) -> String {
        let fixtures =
            repo_root().join("tests/fixtures/sops/flux/internal/controller/testdata/sops");
        let encrypted = std::fs::read_to_string(fixtures.join("algorithms/age.yaml")).unwrap();
        let key = std::fs::read_to_string(fixtures.join("keys/age.txt")).unwrap();
        self.cluster
            .apply(&json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "sops-keys", "namespace": self.cluster.namespace},
                "stringData": {"age.agekey": key}}))
            .await;
        encrypted
    }

    /// Runs `kustomize-controller diff` for the Kustomization `name` against the local
    /// directory `path`, as the controller's identity.
    pub async fn diff(&self, name: &str, path: &std::path::Path) -> std::process::Output {
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, controller_kubeconfig(&self.cluster).await).unwrap();
        let namespace = &self.cluster.namespace;
        tokio::process::Command::new(env!("CARGO_BIN_EXE_kustomize-controller"))
            .args(["diff", "-k", name, "-n", namespace, "--path"])
            .arg(path)
            .env("KUBECONFIG", &kubeconfig)
            .output()
            .await
            .unwrap()
    }

    pub async fn source(&self, name: &str, artifact: &Artifact) {
        let ns = self.cluster.namespace.clone();
        self.cluster
            .create_source(SourceKind::GitRepository, &ns, name, Some(artifact))
            .await;
    }

    pub async fn request_reconcile(&self, name: &str, token: &str) {
        self.kustomizations()
            .patch(name, &PatchParams::default(), &Patch::Merge(json!({"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": token}}})))
            .await
            .unwrap();
    }

    /// Waits until the request named `token` is recorded as handled.
    pub async fn wait_handled(&self, name: &str, token: &str) {
        let handled = wait_for(Duration::from_secs(30), || async {
            let object = self.kustomizations().get(name).await.ok()?;
            (object.status?.last_handled_reconcile_at.as_deref() == Some(token)).then_some(())
        })
        .await;
        assert!(handled.is_some(), "{name}: request {token} handled");
    }

    /// The controller's record of its watch of `kind` (`Kustomization`, `ConfigMap
    /// (applied)` for the ConfigMaps it applied).
    pub fn watch_report(&self, kind: &str) -> Option<WatchReport> {
        self.metrics
            .watches
            .reports()
            .into_iter()
            .find(|report| report.kind == kind)
    }

    /// Waits until the controller's watch of `kind` has listed and is connected.
    pub async fn wait_watch_up(&self, kind: &str) {
        let up = wait_for(Duration::from_secs(30), || async {
            self.watch_report(kind)
                .filter(|report| report.up)
                .map(|_| ())
        })
        .await;
        assert!(
            up.is_some(),
            "the {kind} watch is up: {:?}",
            self.watch_report(kind)
        );
    }

    /// Waits until the controller's watch of the ConfigMaps it applied has delivered every
    /// change made so far: a ConfigMap with the owner label, written now, comes back through
    /// it after every earlier change, as a watch delivers in order.
    pub async fn sync_applied_configmaps(&self) {
        self.wait_watch_up(APPLIED_CONFIGMAPS).await;
        let token = format!("{:?}", std::time::Instant::now());
        let barrier = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "watch-barrier", "labels": {
                "kustomize.toolkit.fluxcd.io/name": "watch-barrier",
                "kustomize.toolkit.fluxcd.io/namespace": self.cluster.namespace}},
            "data": {"at": token},
        });
        let written = self
            .config_maps()
            .patch(
                "watch-barrier",
                &PatchParams::apply("kc-test-barrier").force(),
                &Patch::Apply(&barrier),
            )
            .await
            .expect("the barrier is written");
        let version = written.metadata.resource_version;
        // The watch is cluster-wide: on a shared server another test's change may follow the
        // barrier before the report is read. A watch delivers in resource-version order, and
        // both servers number their writes (etcd's revision, the test server's counter), so a
        // later version means the barrier went by.
        let number = |version: Option<&str>| version.and_then(|v| v.parse::<u64>().ok());
        let barrier = number(version.as_deref());
        let synced = wait_for(Duration::from_secs(30), || async {
            let report = self.watch_report(APPLIED_CONFIGMAPS)?;
            let passed = match (number(report.last_version.as_deref()), barrier) {
                (Some(last), Some(barrier)) => last >= barrier,
                _ => report.last_version == version,
            };
            passed.then_some(())
        })
        .await;
        assert!(
            synced.is_some(),
            "the {APPLIED_CONFIGMAPS} watch delivers the barrier: {:?}",
            self.watch_report(APPLIED_CONFIGMAPS)
        );
    }
}

/// The watch of the ConfigMaps Kustomizations applied.
pub const APPLIED_CONFIGMAPS: &str = "ConfigMap (applied)";

/// The shipped binary running `run` against an in-process test server: watching the test
/// namespace, metrics and probes on free loopback addresses, logs (zap's console lines unless
/// `--log-encoding` is given) to a file.
/// It is killed when dropped.
pub struct ControllerProcess {
    pub child: tokio::process::Child,
    /// `--metrics-addr`.
    pub metrics: String,
    /// `--health-addr`.
    pub health: String,
    dir: tempfile::TempDir,
    /// Kills the process also when the test process ends without dropping this.
    _watchdog: Watchdog,
}

impl ControllerProcess {
    /// Starts the binary with `args` after the common flags.
    pub fn start(
        server: &super::apiserver::TestApiServer,
        namespace: &str,
        args: &[&str],
    ) -> ControllerProcess {
        ControllerProcess::start_with_kubeconfig(&server.kubeconfig_yaml(), namespace, args)
    }

    /// Starts the binary with the given kubeconfig (another identity, say).
    pub fn start_with_kubeconfig(
        kubeconfig_yaml: &str,
        namespace: &str,
        args: &[&str],
    ) -> ControllerProcess {
        ControllerProcess::start_with_kubeconfig_and_env(kubeconfig_yaml, namespace, args, &[])
    }

    /// [`ControllerProcess::start_with_kubeconfig`] with more environment variables.
    pub fn start_with_kubeconfig_and_env(
        kubeconfig_yaml: &str,
        namespace: &str,
        args: &[&str],
        env: &[(&str, String)],
    ) -> ControllerProcess {
        let (metrics, health) = (super::free_address(), super::free_address());
        // Later flags override earlier ones (as with Flux's pflag): `args` may change these.
        let mut all = vec![
            "run".to_string(),
            "--watch-all-namespaces=false".to_string(),
            "--log-encoding=console".to_string(),
            format!("--metrics-addr={metrics}"),
            format!("--health-addr={health}"),
        ];
        all.extend(args.iter().map(|a| a.to_string()));
        ControllerProcess::spawn(kubeconfig_yaml, namespace, &all, env, metrics, health)
    }

    /// Starts the binary as a Pod's container runs it: `args` exactly as a Deployment gives
    /// them (no subcommand), `RUNTIME_NAMESPACE` as its downward API sets it, and only the
    /// listen addresses added (a Pod has loopback ports of its own; tests share theirs).
    pub fn start_container(
        kubeconfig_yaml: &str,
        namespace: &str,
        args: &[String],
    ) -> ControllerProcess {
        let (metrics, health) = (super::free_address(), super::free_address());
        let mut all = args.to_vec();
        all.push(format!("--metrics-addr={metrics}"));
        all.push(format!("--health-addr={health}"));
        ControllerProcess::spawn(kubeconfig_yaml, namespace, &all, &[], metrics, health)
    }

    fn spawn(
        kubeconfig_yaml: &str,
        namespace: &str,
        args: &[String],
        env: &[(&str, String)],
        metrics: String,
        health: String,
    ) -> ControllerProcess {
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, kubeconfig_yaml).unwrap();
        let log = std::fs::File::create(dir.path().join("controller.log")).unwrap();
        // BENCH_CONTROLLER_BIN: another build of the controller (an earlier commit's) under
        // the same harness, so a benchmark compares binaries measured the same way.
        let binary = std::env::var_os("BENCH_CONTROLLER_BIN")
            .filter(|path| !path.is_empty())
            .unwrap_or_else(|| env!("CARGO_BIN_EXE_kustomize-controller").into());
        let child = tokio::process::Command::new(binary)
            .args(args)
            .env("KUBECONFIG", &kubeconfig)
            .env("RUNTIME_NAMESPACE", namespace)
            .envs(env.iter().map(|(name, value)| (name, value)))
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .process_group(0)
            .spawn()
            .expect("the kustomize-controller binary starts");
        let watchdog = Watchdog::guard(child.id().expect("a running child has a pid"));
        ControllerProcess {
            child,
            _watchdog: watchdog,
            metrics,
            health,
            dir,
        }
    }

    /// What it has logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("controller.log")).unwrap_or_default()
    }

    /// Sends SIGTERM, as the kubelet does to stop a Pod.
    pub fn terminate(&self) {
        let pid = self.child.id().expect("the process is running");
        std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .expect("kill runs");
    }
}
