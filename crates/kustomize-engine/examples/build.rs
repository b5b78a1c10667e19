//! `kustomize build` in a few lines: builds a kustomization directory (the bundled
//! `examples/hello` without an argument) and prints its objects as kustomize prints them.

use std::path::PathBuf;
use std::process::ExitCode;

use kustomize_engine::kustomize::{self, BuildOptions};

fn main() -> ExitCode {
    let dir = std::env::args_os().nth(1).map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/hello"),
        PathBuf::from,
    );
    match kustomize::build_dir(&dir, &BuildOptions::default()) {
        Ok(objects) => {
            print!("{}", kustomize::to_yaml(&objects));
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}
