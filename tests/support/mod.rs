//! Shared helpers: paths to the repository, the reference data beside it, and the binary.

use std::path::PathBuf;
use std::process::{Command, Output};

/// The repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A file of the read-only reference data that sits beside the repository (`../shared`).
pub fn shared_file(relative: &str) -> PathBuf {
    let path = repo_root().join("../shared").join(relative);
    assert!(
        path.is_file(),
        "reference file {} is missing: the tests expect the shared/ folder beside the repository",
        path.display()
    );
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
