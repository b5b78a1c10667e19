//! Shared helpers: paths to the repository and its fixtures, and the binary.

use std::path::PathBuf;
use std::process::{Command, Output};

/// The repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
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

pub mod apiserver;
pub mod artifacts;
pub mod cluster;
pub mod controller;
pub mod envtest;
pub mod pki;
