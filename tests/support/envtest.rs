//! etcd and kube-apiserver from `KUBEBUILDER_ASSETS` (the envtest convention), started once
//! per test process on free loopback ports with a generated CA, serving certificate, admin
//! client certificate (`system:masters`) and service-account key. A watchdog shell stops
//! both and removes their folder when the test process exits.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use base64::Engine as _;

use super::free_port;
use super::pki::pki;

fn write(dir: &Path, name: &str, contents: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, contents).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    path
}

fn spawn(program: &Path, args: &[String], log: &Path) -> Child {
    let log = std::fs::File::create(log).expect("a log file");
    Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log handle"))
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", program.display()))
}

fn start(assets: &Path) -> PathBuf {
    let dir = tempfile::Builder::new()
        .prefix("kc-envtest-")
        .tempdir()
        .expect("a temporary folder")
        .keep();
    let pki = pki().expect("generated certificates");
    let ca = write(&dir, "ca.crt", &pki.ca);
    let serving_cert = write(&dir, "apiserver.crt", &pki.serving_cert);
    let serving_key = write(&dir, "apiserver.key", &pki.serving_key);
    let sa_key = write(&dir, "sa.key", &pki.service_account_key);
    let sa_pub = write(&dir, "sa.pub", &pki.service_account_public);

    let (etcd_port, peer_port, secure_port) = (free_port(), free_port(), free_port());
    let etcd_url = format!("http://127.0.0.1:{etcd_port}");
    let etcd = spawn(
        &assets.join("etcd"),
        &[
            format!("--data-dir={}", dir.join("etcd").display()),
            format!("--listen-client-urls={etcd_url}"),
            format!("--advertise-client-urls={etcd_url}"),
            format!("--listen-peer-urls=http://127.0.0.1:{peer_port}"),
            "--unsafe-no-fsync=true".into(),
        ],
        &dir.join("etcd.log"),
    );
    let apiserver = spawn(
        &assets.join("kube-apiserver"),
        &[
            format!("--etcd-servers={etcd_url}"),
            "--bind-address=127.0.0.1".into(),
            "--advertise-address=127.0.0.1".into(),
            format!("--secure-port={secure_port}"),
            format!("--cert-dir={}", dir.display()),
            format!("--tls-cert-file={}", serving_cert.display()),
            format!("--tls-private-key-file={}", serving_key.display()),
            format!("--client-ca-file={}", ca.display()),
            "--service-account-issuer=https://kubernetes.default.svc".into(),
            format!("--service-account-key-file={}", sa_pub.display()),
            format!("--service-account-signing-key-file={}", sa_key.display()),
            "--service-cluster-ip-range=10.0.0.0/24".into(),
            "--authorization-mode=RBAC".into(),
            "--allow-privileged=true".into(),
            "--disable-admission-plugins=ServiceAccount".into(),
        ],
        &dir.join("kube-apiserver.log"),
    );
    let (etcd_pid, apiserver_pid) = (etcd.id(), apiserver.id());
    // Both stop, and the folder goes, when this test process ends.
    let watchdog = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "while kill -0 {} 2>/dev/null; do sleep 1; done; kill {} {} 2>/dev/null; sleep 2; rm -rf '{}'",
            std::process::id(),
            apiserver_pid,
            etcd_pid,
            dir.display()
        ))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the envtest watchdog starts");
    // Kept for the life of the process; the watchdog ends them.
    static CHILDREN: Mutex<Vec<Child>> = Mutex::new(Vec::new());
    CHILDREN
        .lock()
        .expect("children")
        .extend([etcd, apiserver, watchdog]);

    let encode = |pem: &str| base64::engine::general_purpose::STANDARD.encode(pem);
    let kubeconfig = write(
        &dir,
        "kubeconfig",
        &format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: envtest\n  cluster:\n    server: https://127.0.0.1:{secure_port}\n    certificate-authority-data: {}\n\
             contexts:\n- name: envtest\n  context:\n    cluster: envtest\n    user: admin\ncurrent-context: envtest\n\
             users:\n- name: admin\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\n",
            encode(&pki.ca),
            encode(&pki.admin_cert),
            encode(&pki.admin_key)
        ),
    );
    wait_ready(&kubeconfig, &dir);
    kubeconfig
}

/// Waits for `/readyz`, from a thread with its own runtime since the caller's test runtime
/// may not be the one later tests use.
fn wait_ready(kubeconfig: &Path, dir: &Path) {
    let kubeconfig = kubeconfig.to_path_buf();
    let ready = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async move {
            let config = kube::Config::from_custom_kubeconfig(
                kube::config::Kubeconfig::read_from(&kubeconfig).expect("kubeconfig"),
                &kube::config::KubeConfigOptions::default(),
            )
            .await
            .expect("a config");
            let client = kube::Client::try_from(config).expect("a client");
            let started = Instant::now();
            while started.elapsed() < Duration::from_secs(90) {
                let request = http::Request::get("/readyz")
                    .body(Vec::new())
                    .expect("request");
                if client
                    .request_text(request)
                    .await
                    .is_ok_and(|t| t.trim() == "ok")
                {
                    return true;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            false
        })
    });
    if !ready.join().unwrap_or(false) {
        panic!(
            "kube-apiserver from KUBEBUILDER_ASSETS did not become ready; logs in {}",
            dir.display()
        );
    }
}

/// The kubeconfig of the process-wide envtest control plane, starting it on first use.
pub fn shared_kubeconfig() -> PathBuf {
    static KUBECONFIG: OnceLock<PathBuf> = OnceLock::new();
    KUBECONFIG
        .get_or_init(|| {
            let assets = PathBuf::from(
                std::env::var_os("KUBEBUILDER_ASSETS").expect("KUBEBUILDER_ASSETS is set"),
            );
            for binary in ["etcd", "kube-apiserver"] {
                assert!(
                    assets.join(binary).is_file(),
                    "KUBEBUILDER_ASSETS={} has no {binary}",
                    assets.display()
                );
            }
            start(&assets)
        })
        .clone()
}
