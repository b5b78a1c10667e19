use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use kustomize_controller::cli::{Cli, Command, LoadRestrictor, ReorderFlag, init_logging};
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
        Command::Build {
            dir,
            load_restrictor,
            reorder,
        } => {
            let options = kustomize::BuildOptions {
                // As `kustomize build`, env-file entries without a value read this process's
                // environment; the controller never does.
                env_lookup: kustomize::EnvLookup::Process,
                load_restrictions: match load_restrictor {
                    LoadRestrictor::LoadRestrictionsRootOnly => {
                        kustomize::LoadRestrictions::RootOnly
                    }
                    LoadRestrictor::LoadRestrictionsNone => kustomize::LoadRestrictions::None,
                },
                reorder: reorder.map(|r| match r {
                    ReorderFlag::Legacy => kustomize::Reorder::Legacy,
                    ReorderFlag::None => kustomize::Reorder::None,
                }),
                remote: None,
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
