use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use kustomize_controller::cli::{Cli, Command, init_logging};
use kustomize_controller::{api, kustomize};

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.log_level, cli.log_encoding);
    match run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            // The whole cause chain on one line, never a backtrace: users read this.
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(command: Command) -> anyhow::Result<()> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match command {
        Command::Build { dir } => {
            let options = kustomize::BuildOptions {
                env_lookup: kustomize::EnvLookup::Process,
                ..Default::default()
            };
            let resources = kustomize::build_dir(&dir, &options)
                .with_context(|| format!("building {}", dir.display()))?;
            out.write_all(kustomize::to_yaml(&resources).as_bytes())?;
        }
        Command::Crds => out.write_all(api::crd_yaml()?.as_bytes())?,
        Command::Version => writeln!(out, "kustomize-controller {}", env!("CARGO_PKG_VERSION"))?,
    }
    out.flush()?;
    Ok(())
}
