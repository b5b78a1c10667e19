use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use kustomize_controller::cli::{
    Cli, Command, EditCommand, EditTarget, LoadRestrictor, ProvenanceFormat, ReorderFlag,
    SopsCommand, SopsFormat, init_logging,
};
use kustomize_controller::{api, kustomize, sops};

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.log_level, cli.log_encoding);
    match run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        // The reader went away (`| head`): nothing left to say.
        Err(err)
            if err
                .downcast_ref::<std::io::Error>()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe) =>
        {
            ExitCode::SUCCESS
        }
        Err(err) => {
            // The whole cause chain on one line, never a backtrace: users read this.
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// The fetcher for remote bases, unless they are disabled or not compiled in.
fn remote_fetcher(disabled: bool) -> Option<std::sync::Arc<dyn kustomize::RemoteFetcher>> {
    #[cfg(feature = "remote-bases")]
    if !disabled {
        return Some(std::sync::Arc::new(
            kustomize_controller::remote::Fetcher::default(),
        ));
    }
    let _ = disabled;
    None
}

fn run(command: Command) -> anyhow::Result<()> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match command {
        Command::Build {
            dir,
            load_restrictor,
            reorder,
            provenance,
            no_remote_bases,
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
                remote: remote_fetcher(no_remote_bases),
            };
            let context = || format!("building {}", dir.display());
            match provenance {
                None => {
                    let resources = kustomize::build_dir(&dir, &options).with_context(context)?;
                    out.write_all(kustomize::to_yaml(&resources).as_bytes())?;
                }
                Some(format) => {
                    let (_, entries) =
                        kustomize::build_with_provenance(Path::new("/"), &dir, &options)
                            .with_context(context)?;
                    match format {
                        ProvenanceFormat::Table => {
                            out.write_all(kustomize::provenance_table(&entries).as_bytes())?
                        }
                        ProvenanceFormat::Json => {
                            serde_json::to_writer_pretty(&mut out, &entries)?;
                            writeln!(out)?;
                        }
                    }
                }
            }
        }
        Command::Edit { action } => {
            let (action, EditTarget::BuildMetadata { options }) = match action {
                EditCommand::Add { target } => (kustomize::EditAction::Add, target),
                EditCommand::Remove { target } => (kustomize::EditAction::Remove, target),
            };
            let file = kustomize::find_kustomization(Path::new("."))?;
            let options = kustomize::parse_build_metadata_options(&options, &file)?;
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("reading {}", file.display()))?;
            let edited = kustomize::edit_build_metadata(&text, &file, action, &options)?;
            std::fs::write(&file, edited).with_context(|| format!("writing {}", file.display()))?;
        }
        Command::Sops {
            action:
                SopsCommand::Decrypt {
                    file,
                    keys: key_files,
                    input_type,
                },
        } => {
            let mut keys = sops::Keys::new();
            for key_file in &key_files {
                let content = std::fs::read(key_file)
                    .with_context(|| format!("reading key file {}", key_file.display()))?;
                keys.add(&key_file.display().to_string(), &content)?;
            }
            let format = match input_type {
                None => sops::Format::from_path(&file),
                Some(SopsFormat::Yaml) => sops::Format::Yaml,
                Some(SopsFormat::Json) => sops::Format::Json,
                Some(SopsFormat::Dotenv) => sops::Format::Dotenv,
                Some(SopsFormat::Ini) => sops::Format::Ini,
                Some(SopsFormat::Binary) => sops::Format::Binary,
            };
            let content =
                std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
            let plain = sops::decrypt(&content, format, &keys)
                .with_context(|| format!("decrypting {}", file.display()))?;
            out.write_all(&plain)?;
        }
        Command::Crds => out.write_all(api::crd_yaml()?.as_bytes())?,
        Command::Version => writeln!(out, "kustomize-controller {}", env!("CARGO_PKG_VERSION"))?,
    }
    out.flush()?;
    Ok(())
}
