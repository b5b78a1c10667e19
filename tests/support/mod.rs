//! Shared helpers: paths to the repository and its fixtures, and the binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The Python that `make setup` prepared (target/venv, with the Helm SDK), else the system's.
pub fn python() -> PathBuf {
    let venv = repo_root().join("target/venv/bin/python3");
    if venv.exists() {
        venv
    } else {
        PathBuf::from("python3")
    }
}

/// A fixture file under `tests/fixtures/` (everything the tests read is in the repository).
pub fn fixture_file(relative: &str) -> PathBuf {
    let path = repo_root().join("tests/fixtures").join(relative);
    assert!(path.is_file(), "fixture {} is missing", path.display());
    path
}

/// Runs the `kustomize-controller` binary built for this test run.
pub fn run_cli(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kustomize-controller"))
        .args(args)
        .output()
        .expect("the kustomize-controller binary runs")
}

pub fn stdout_of(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).expect("stdout is UTF-8")
}

pub fn stderr_of(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).expect("stderr is UTF-8")
}

/// A loopback port nobody listens on now, for a server a test starts.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// `127.0.0.1:<free port>`.
pub fn free_address() -> String {
    format!("127.0.0.1:{}", free_port())
}

/// One plain HTTP/1.1 GET, as a kubelet probe or a Prometheus scrape makes it: the whole
/// answer (status line, headers, body), or `None` when nothing listens.
pub async fn http_get_text(address: &str, path: &str) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(address).await.ok()?;
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).await.ok()?;
    Some(text)
}

/// The managers an object's managed fields name, in their order.
pub fn field_managers(
    metadata: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Vec<String> {
    metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|entry| entry.manager.clone())
        .collect()
}

pub use test_apiserver as apiserver;
pub mod artifacts;
pub mod cleanup;
pub mod cluster;
pub mod controller;
pub mod envtest;
pub mod key_services;
pub mod notification;
pub use test_apiserver::pki;
pub mod process;

/// Copies the folder `from` into `to`, recursively.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}
