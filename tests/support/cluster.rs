//! `TestCluster`: one API server per test, whichever is available, with a fresh namespace.
//!
//! - `TEST_KUBECONFIG` set: that cluster (kind, k3d, a dev cluster);
//! - else `KUBEBUILDER_ASSETS` set: etcd and kube-apiserver from that folder, started once per
//!   test process (`envtest`);
//! - else: the in-process `TestApiServer`, one per test.
//!
//! Tests are written once against `kube::Client` and never assume they are alone: they work
//! in `cluster.namespace` (or namespaces from `create_namespace`) and name cluster-scoped
//! objects uniquely (`cluster.unique`). CRDs (ours and source-controller's) are installed
//! before the first test uses a cluster.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::{Value, json};

use super::apiserver::TestApiServer;
use super::{envtest, repo_root};

/// The field manager the harness writes with.
pub const HARNESS_MANAGER: &str = "kc-test-harness";

pub struct TestCluster {
    pub client: Client,
    /// A namespace created for this test.
    pub namespace: String,
    config: Config,
    /// A kubeconfig for this cluster, as a `spec.kubeConfig` Secret would hold it.
    kubeconfig: String,
    server: Option<TestApiServer>,
    namespaces: std::sync::Mutex<Vec<String>>,
}

enum Backend {
    Kubeconfig(PathBuf),
    Envtest,
    InProcess,
}

fn backend() -> Backend {
    if let Some(path) = std::env::var_os("TEST_KUBECONFIG").filter(|p| !p.is_empty()) {
        return Backend::Kubeconfig(PathBuf::from(path));
    }
    if std::env::var_os("KUBEBUILDER_ASSETS").is_some_and(|p| !p.is_empty()) {
        return Backend::Envtest;
    }
    Backend::InProcess
}

async fn config_from_kubeconfig(path: &std::path::Path) -> Config {
    let kubeconfig = Kubeconfig::read_from(path)
        .unwrap_or_else(|e| panic!("reading kubeconfig {}: {e}", path.display()));
    Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap_or_else(|e| panic!("using kubeconfig {}: {e}", path.display()))
}

thread_local! {
    /// The names `unique` gave out on this thread: a test's own (libtest runs each test on a
    /// thread of its own), which the cleanup of a shared cluster looks for.
    static ISSUED: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A name no other test (or earlier run) uses.
pub fn unique(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let seed =
        u64::from(std::process::id()) << 32 ^ u64::from(nanos) ^ count.wrapping_mul(0x9e37_79b9);
    let name = format!("{prefix}-{:06x}{count}", seed % 0xff_ffff);
    ISSUED.with(|issued| issued.borrow_mut().push(name.clone()));
    name
}

impl TestCluster {
    pub async fn start() -> TestCluster {
        let read = |path: &std::path::Path| {
            std::fs::read_to_string(path)
                .unwrap_or_else(|e| panic!("reading kubeconfig {}: {e}", path.display()))
        };
        let (config, kubeconfig, server, shared) = match backend() {
            Backend::Kubeconfig(path) => {
                (config_from_kubeconfig(&path).await, read(&path), None, true)
            }
            Backend::Envtest => {
                let path = envtest::shared_kubeconfig();
                (config_from_kubeconfig(&path).await, read(&path), None, true)
            }
            Backend::InProcess => {
                let server = TestApiServer::start().await;
                let config = server.client_config();
                let kubeconfig = server.kubeconfig_yaml();
                (config, kubeconfig, Some(server), false)
            }
        };
        let client = Client::try_from(config.clone()).expect("a client for the test cluster");
        install_crds(&client, shared).await;
        let mut cluster = TestCluster {
            client,
            namespace: String::new(),
            config,
            kubeconfig,
            server,
            namespaces: std::sync::Mutex::new(Vec::new()),
        };
        cluster.namespace = cluster.create_namespace("kc-test").await;
        cluster
    }

    /// Whether kube-controller-manager's controllers run (namespace furnishing and
    /// finalization, garbage collection, the deployment controller): on the in-process server
    /// and on a real cluster; not on envtest, which starts only etcd and kube-apiserver.
    pub fn has_controller_manager(&self) -> bool {
        !matches!(backend(), Backend::Envtest)
    }

    /// The client configuration, for components that build their own clients (the controller).
    pub fn config(&self) -> Config {
        self.config.clone()
    }

    /// A kubeconfig reaching this cluster, for `spec.kubeConfig` Secrets (Flux's own tests
    /// point every Kustomization at the test cluster this way).
    pub fn kubeconfig_yaml(&self) -> &str {
        &self.kubeconfig
    }

    /// The in-process server, for fault injection and compaction; `None` on a real cluster
    /// (tests that need it skip there).
    pub fn server(&self) -> Option<&TestApiServer> {
        self.server.as_ref()
    }

    /// A client that impersonates `user` (and `groups`), as the controller does for
    /// `spec.serviceAccountName`.
    pub fn client_as(&self, user: &str, groups: &[&str]) -> Client {
        let mut config = self.config.clone();
        config.auth_info.impersonate = Some(user.to_string());
        if !groups.is_empty() {
            config.auth_info.impersonate_groups =
                Some(groups.iter().map(|g| g.to_string()).collect());
        }
        Client::try_from(config).expect("an impersonating client")
    }

    /// A bearer token for a ServiceAccount (TokenRequest, as `kubectl create token`).
    pub async fn service_account_token(&self, namespace: &str, name: &str) -> String {
        let request = http::Request::post(format!(
            "/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token"
        ))
        .header("content-type", "application/json")
        .body(
            serde_json::to_vec(&json!({"apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}}))
            .expect("JSON"),
        )
        .expect("a request");
        let answer: Value = self
            .client
            .request(request)
            .await
            .unwrap_or_else(|e| panic!("a token for {namespace}/{name}: {e}"));
        answer["status"]["token"]
            .as_str()
            .expect("a token")
            .to_string()
    }

    /// A ServiceAccount `kustomize-controller` in the test namespace bound to cluster-admin, as
    /// a deployment gives the controller: its token and its user name, so that its requests
    /// are told apart from the test's.
    pub async fn controller_account(&self) -> (String, String) {
        let ns = &self.namespace;
        for object in [
            json!({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": "kustomize-controller", "namespace": ns}}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": format!("{ns}-kustomize-controller")},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "cluster-admin"},
                "subjects": [{"kind": "ServiceAccount", "name": "kustomize-controller",
                    "namespace": ns}]}),
        ] {
            self.apply(&object).await;
        }
        let token = self.service_account_token(ns, "kustomize-controller").await;
        // The authorizer sees the binding a moment after it is written: wait until it does,
        // so that the controller's first requests are not refused.
        let client = Client::try_from(self.config_with_token(&token)).expect("a client");
        let namespaces: Api<Namespace> = Api::all(client);
        let authorized = wait_for(Duration::from_secs(30), || async {
            let one = kube::api::ListParams::default().limit(1);
            namespaces.list_metadata(&one).await.ok()
        })
        .await;
        assert!(
            authorized.is_some(),
            "the controller's account is authorized"
        );
        (
            token,
            format!("system:serviceaccount:{ns}:kustomize-controller"),
        )
    }

    /// The client configuration authenticated by a bearer token instead of the admin's
    /// credentials.
    pub fn config_with_token(&self, token: &str) -> Config {
        let mut config = self.config.clone();
        config.auth_info = serde_json::from_value(json!({"token": token})).expect("auth info");
        config
    }

    /// A kubeconfig reaching this cluster (any backend) with a bearer token as the
    /// credentials, for a controller process running as its own ServiceAccount.
    pub fn kubeconfig_with_token(&self, token: &str) -> String {
        use base64::Engine as _;
        let base64 = base64::engine::general_purpose::STANDARD;
        let pem = self.ca_pem();
        let mut cluster = format!("    server: {}\n", self.config.cluster_url);
        if !pem.is_empty() {
            cluster += &format!("    certificate-authority-data: {}\n", base64.encode(pem));
        }
        if self.config.accept_invalid_certs {
            cluster += "    insecure-skip-tls-verify: true\n";
        }
        if let Some(name) = &self.config.tls_server_name {
            cluster += &format!("    tls-server-name: {name}\n");
        }
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n{cluster}\
             contexts:\n- name: test\n  context:\n    cluster: test\n    user: token\n\
             current-context: test\nusers:\n- name: token\n  user:\n    token: {token}\n"
        )
    }

    /// The API server's address.
    pub fn server_url(&self) -> String {
        self.config
            .cluster_url
            .to_string()
            .trim_end_matches('/')
            .to_string()
    }

    /// The CA bundle the API server's certificate is checked against (PEM; empty when the
    /// kubeconfig skips verification).
    pub fn ca_pem(&self) -> String {
        use base64::Engine as _;
        let base64 = base64::engine::general_purpose::STANDARD;
        self.config
            .root_cert
            .iter()
            .flatten()
            .map(|der| {
                let body = base64.encode(der);
                let lines: Vec<&str> = body
                    .as_bytes()
                    .chunks(64)
                    .map(|c| std::str::from_utf8(c).expect("base64 is ASCII"))
                    .collect();
                format!(
                    "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
                    lines.join("\n")
                )
            })
            .collect()
    }

    /// A new namespace, deleted with what it holds when the cluster handle drops (on shared
    /// clusters: `cleanup`).
    pub async fn create_namespace(&self, prefix: &str) -> String {
        let name = unique(prefix);
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        let namespace: Namespace =
            serde_json::from_value(json!({"metadata": {"name": name}})).expect("a namespace");
        namespaces
            .create(&PostParams::default(), &namespace)
            .await
            .unwrap_or_else(|e| panic!("creating namespace {name}: {e}"));
        self.namespaces
            .lock()
            .expect("namespaces")
            .push(name.clone());
        name
    }

    /// Grants `user` the RBAC `rules` in `namespace` through a Role and RoleBinding, which
    /// works the same on every backend.
    pub async fn grant(&self, namespace: &str, user: &str, rules: Value) {
        let role_name = unique("grant");
        let role = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": role_name, "namespace": namespace},
            "rules": rules,
        });
        let subject = match user.strip_prefix("system:serviceaccount:") {
            Some(rest) => {
                let (ns, name) = rest
                    .split_once(':')
                    .expect("system:serviceaccount:<ns>:<name>");
                json!({"kind": "ServiceAccount", "name": name, "namespace": ns})
            }
            None => json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}),
        };
        let binding = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": role_name, "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role_name},
            "subjects": [subject],
        });
        for object in [role, binding] {
            self.apply(&object).await;
        }
    }

    /// Server-side applies an object (any kind the cluster serves) as the harness.
    pub async fn apply(&self, object: &Value) -> Value {
        let api = dynamic_api(&self.client, object).await;
        let name = object["metadata"]["name"].as_str().expect("a named object");
        let applied = api
            .patch(
                name,
                &PatchParams::apply(HARNESS_MANAGER).force(),
                &Patch::Apply(object),
            )
            .await
            .unwrap_or_else(|e| panic!("applying {}/{name}: {e}", object["kind"]));
        serde_json::to_value(applied).expect("objects serialize")
    }
}

/// A dynamic API for the kind of `object`, found through discovery.
pub async fn dynamic_api(client: &Client, object: &Value) -> Api<kube::api::DynamicObject> {
    let api_version = object["apiVersion"].as_str().expect("apiVersion");
    let kind = object["kind"].as_str().expect("kind");
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
    let (resource, capabilities) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .unwrap_or_else(|e| panic!("discovering {api_version} {kind}: {e}"));
    let namespace = object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str);
    match (capabilities.scope, namespace) {
        (kube::discovery::Scope::Namespaced, Some(ns)) => {
            Api::namespaced_with(client.clone(), ns, &resource)
        }
        _ => Api::all_with(client.clone(), &resource),
    }
}

/// The CRDs the tests need: ours from `crds/` and source-controller's.
fn crd_files() -> Vec<PathBuf> {
    let mut files = vec![repo_root().join("crds/kustomize.toolkit.fluxcd.io_kustomizations.yaml")];
    for kind in [
        "gitrepositories",
        "ocirepositories",
        "buckets",
        "externalartifacts",
    ] {
        files.push(super::fixture_file(&format!(
            "reference/crds/source.toolkit.fluxcd.io_{kind}.yaml"
        )));
    }
    files
}

fn crd_documents() -> &'static [Value] {
    static DOCUMENTS: std::sync::OnceLock<Vec<Value>> = std::sync::OnceLock::new();
    DOCUMENTS.get_or_init(|| {
        crd_files()
            .iter()
            .flat_map(|path| {
                let text = std::fs::read_to_string(path).expect("CRD file");
                kustomize_controller::yaml::parse_documents(
                    &text,
                    kustomize_controller::yaml::Schema::Kubernetes,
                )
                .expect("CRD YAML")
                .into_iter()
                .map(Value::from)
            })
            .filter(|d| !d.is_null())
            .collect()
    })
}

async fn install_crds(client: &Client, shared_cluster: bool) {
    // On a shared cluster once per process; every in-process server is new.
    static INSTALLED: tokio::sync::Mutex<bool> = tokio::sync::Mutex::const_new(false);
    let mut installed = INSTALLED.lock().await;
    if shared_cluster && *installed {
        return;
    }
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    // All applied first, then waited for: establishment and serving happen after the write.
    for document in crd_documents() {
        let crd: CustomResourceDefinition =
            serde_json::from_value(document.clone()).expect("a CRD");
        let name = crd.metadata.name.clone().expect("CRD name");
        api.patch(
            &name,
            &PatchParams::apply(HARNESS_MANAGER).force(),
            &Patch::Apply(&crd),
        )
        .await
        .unwrap_or_else(|e| panic!("installing CRD {name}: {e}"));
    }
    for document in crd_documents() {
        let crd: CustomResourceDefinition =
            serde_json::from_value(document.clone()).expect("a CRD");
        wait_until_served(client, &crd).await;
        wait_until_discovered(client, &crd).await;
    }
    if shared_cluster {
        *installed = true;
    }
}

/// Waits until a CRD is established and every served version of its kind answers a list:
/// discovery lags the `Established` condition on a real server.
pub async fn wait_until_served(client: &Client, crd: &CustomResourceDefinition) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = crd.metadata.name.clone().expect("CRD name");
    wait_for(Duration::from_secs(30), || {
        let api = api.clone();
        let name = name.clone();
        async move {
            let crd = api.get(&name).await.ok()?;
            crd.status?
                .conditions?
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
                .then_some(())
        }
    })
    .await
    .unwrap_or_else(|| panic!("CRD {name} was not established"));
    for version in crd.spec.versions.iter().filter(|v| v.served) {
        let gvk =
            kube::api::GroupVersionKind::gvk(&crd.spec.group, &version.name, &crd.spec.names.kind);
        let resource = kube::api::ApiResource::from_gvk_with_plural(&gvk, &crd.spec.names.plural);
        let objects: Api<kube::api::DynamicObject> = Api::all_with(client.clone(), &resource);
        wait_for(Duration::from_secs(30), || {
            let objects = objects.clone();
            async move {
                objects
                    .list_metadata(&kube::api::ListParams::default().limit(1))
                    .await
                    .ok()
                    .map(|_| ())
            }
        })
        .await
        .unwrap_or_else(|| panic!("CRD {name} version {} is not served", version.name));
    }
}

/// Waits until discovery lists every served version of a CRD's kind.
pub async fn wait_until_discovered(client: &Client, crd: &CustomResourceDefinition) {
    for version in crd.spec.versions.iter().filter(|v| v.served) {
        let gvk =
            kube::api::GroupVersionKind::gvk(&crd.spec.group, &version.name, &crd.spec.names.kind);
        wait_for(Duration::from_secs(30), || async {
            kube::discovery::pinned_kind(client, &gvk).await.ok()
        })
        .await
        .unwrap_or_else(|| panic!("{gvk:?} is not discovered"));
    }
}

/// Polls `check` until it gives a value or `timeout` passes.
pub async fn wait_for<T, F, Fut>(timeout: Duration, mut check: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    let mut pause = Duration::from_millis(5);
    loop {
        if let Some(value) = check().await {
            return Some(value);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(250));
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        if self.server.is_some() {
            return;
        }
        // A shared cluster outlives the test: what the test made is removed from a thread of
        // our own, since the test's runtime is shutting down (also when the test failed).
        let namespaces = std::mem::take(&mut *self.namespaces.lock().expect("namespaces"));
        let issued = ISSUED.with(|issued| issued.borrow().clone());
        let config = self.config.clone();
        let cleanup = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            runtime.block_on(async move {
                if let Ok(client) = Client::try_from(config) {
                    super::cleanup::remove_test_objects(&client, namespaces, &issued).await;
                }
            });
        });
        let _ = cleanup.join();
    }
}

/// The keys that verify the cluster's ServiceAccount tokens, as the API server publishes
/// them (`/openid/v1/jwks`, a JSON Web Key Set).
pub async fn published_service_account_keys(client: &Client) -> String {
    let request = http::Request::get("/openid/v1/jwks")
        .body(Vec::new())
        .expect("a request");
    client
        .request_text(request)
        .await
        .expect("the API server publishes its ServiceAccount token keys")
}
