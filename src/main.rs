//! The `kustomize-controller` binary: argument parsing and wiring; the work is in the library,
//! the controller process (`run`) in `cmd/run.rs`.

#![forbid(unsafe_code)]

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;

#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::Parser;
use kustomize_controller::cli::{
    Cli, Command, EditCommand, EditTarget, LoadRestrictor, ProvenanceFormat, ReorderFlag,
    SopsCommand, SopsFormat, init_logging,
};
use kustomize_controller::{api, controller, kustomize, sops};

/// The commands too large to live here.
mod cmd {
    pub(crate) mod run;
}

/// Flux's image runs the controller with flags only (`kustomize-controller --log-level=info …`);
/// so does ours when no subcommand is named, which lets an image swap keep Flux's args.
fn arguments() -> Vec<std::ffi::OsString> {
    const SUBCOMMANDS: &[&str] = &[
        "run", "diff", "build", "edit", "sops", "crds", "version", "help",
    ];
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let flags_only = args.len() > 1
        && args[1..].iter().all(|a| {
            let a = a.to_string_lossy();
            !SUBCOMMANDS.contains(&a.as_ref())
        })
        && args[1].to_string_lossy().starts_with("--")
        && !matches!(args[1].to_string_lossy().as_ref(), "--help" | "--version");
    if flags_only {
        args.insert(1, "run".into());
    }
    args
}

fn main() -> ExitCode {
    kustomize_controller::tls::use_ring();
    let cli = Cli::parse_from(arguments());
    init_logging(cli.log_level, cli.log_encoding);
    let controller = matches!(cli.command, Command::Run(_));
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
        // As Flux's setup logger: a JSON line, what failed and why, so `flux logs` reads it.
        Err(err) if controller => {
            let causes: Vec<String> = err.chain().skip(1).map(ToString::to_string).collect();
            if causes.is_empty() {
                tracing::error!(logger = "setup", error = %err, "problem running manager");
            } else {
                tracing::error!(logger = "setup", error = %causes.join(": "), "{err}");
            }
            ExitCode::FAILURE
        }
        Err(err) => {
            // The whole cause chain on one line, never a backtrace: users read this.
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// Where remote bases may come from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum RemoteBases {
    Refused,
    /// The network and, for the CLI's local trees, `file://` repositories.
    AnyUrl,
    /// The network only, as the controller fetches them.
    NetworkOnly,
}

/// The fetcher for remote bases, unless they are refused or not compiled in.
fn remote_fetcher(bases: RemoteBases) -> Option<std::sync::Arc<dyn kustomize::RemoteFetcher>> {
    #[cfg(feature = "remote-bases")]
    {
        use kustomize_controller::remote::Fetcher;
        match bases {
            RemoteBases::Refused => {}
            RemoteBases::AnyUrl => return Some(std::sync::Arc::new(Fetcher::default())),
            RemoteBases::NetworkOnly => return Some(std::sync::Arc::new(Fetcher::network_only())),
        }
    }
    let _ = bases;
    None
}

fn run(command: Command) -> anyhow::Result<()> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match command {
        Command::Build(args) => build(&args, &mut out)?,
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
                    keys,
                    input_type,
                },
        } => out.write_all(&sops_decrypt(&file, &keys, input_type)?)?,
        Command::Run(args) => {
            drop(out);
            return cmd::run::run_controller(*args);
        }
        Command::Diff {
            kustomization,
            namespace,
            path,
        } => {
            drop(out);
            return run_diff(&kustomization, &namespace, &path);
        }
        Command::Crds => out.write_all(api::crd_yaml()?.as_bytes())?,
        Command::Version => writeln!(out, "kustomize-controller {}", env!("CARGO_PKG_VERSION"))?,
    }
    out.flush()?;
    Ok(())
}

/// `build`: the objects as YAML, or where each came from.
fn build(args: &kustomize_controller::cli::BuildArgs, out: &mut impl Write) -> anyhow::Result<()> {
    let options = kustomize::BuildOptions {
        limits: kustomize::Limits {
            max_depth: args.max_depth,
            max_objects: args.max_objects,
            ..Default::default()
        },
        // As `kustomize build`, env-file entries without a value read this process's
        // environment; the controller never does.
        env_lookup: kustomize::EnvLookup::Process,
        load_restrictions: match args.load_restrictor {
            LoadRestrictor::LoadRestrictionsRootOnly => kustomize::LoadRestrictions::RootOnly,
            LoadRestrictor::LoadRestrictionsNone => kustomize::LoadRestrictions::None,
        },
        reorder: args.reorder.map(|r| match r {
            ReorderFlag::Legacy => kustomize::Reorder::Legacy,
            ReorderFlag::None => kustomize::Reorder::None,
        }),
        remote: remote_fetcher(if args.no_remote_bases {
            RemoteBases::Refused
        } else {
            RemoteBases::AnyUrl
        }),
        root_unknown_fields: kustomize::UnknownFields::Refuse,
        // As `kustomize build`: the top kustomization's custom schema replaces the built-in one.
        builtin_schema_preloaded: false,
    };
    let dir = &args.dir;
    let context = || format!("building {}", dir.display());
    match args.provenance {
        None => {
            let resources = kustomize::build_dir(dir, &options).with_context(context)?;
            let mut buffered = std::io::BufWriter::with_capacity(1 << 16, &mut *out);
            kustomize::write_yaml(resources, &mut buffered)?;
            buffered.flush()?;
        }
        Some(format) => {
            let (_, entries) = kustomize::build_with_provenance(Path::new("/"), dir, &options)
                .with_context(context)?;
            match format {
                ProvenanceFormat::Table => {
                    out.write_all(kustomize::provenance_table(&entries).as_bytes())?
                }
                ProvenanceFormat::Json => {
                    serde_json::to_writer_pretty(&mut *out, &entries)?;
                    writeln!(out)?;
                }
            }
        }
    }

    Ok(())
}

/// `sops decrypt`: the plaintext, with the key files given and the environment's credentials.
fn sops_decrypt(
    file: &Path,
    key_files: &[std::path::PathBuf],
    input_type: Option<SopsFormat>,
) -> anyhow::Result<Vec<u8>> {
    let mut keys = sops::Keys::new();
    for key_file in key_files {
        let content = std::fs::read(key_file)
            .with_context(|| format!("reading key file {}", key_file.display()))?;
        keys.add(&key_file.display().to_string(), &content)?;
    }
    keys.add_environment(std::env::vars());
    let format = match input_type {
        None => sops::Format::from_path(file),
        Some(SopsFormat::Yaml) => sops::Format::Yaml,
        Some(SopsFormat::Json) => sops::Format::Json,
        Some(SopsFormat::Dotenv) => sops::Format::Dotenv,
        Some(SopsFormat::Ini) => sops::Format::Ini,
        Some(SopsFormat::Binary) => sops::Format::Binary,
    };
    let content = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let plain = sops::decrypt(&content, format, &keys)
        .with_context(|| format!("decrypting {}", file.display()))?;
    Ok(plain)
}

fn run_diff(name: &str, namespace: &str, path: &Path) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let differences = runtime.block_on(async {
        let config = kube::Config::infer()
            .await
            .context("finding the cluster (in-cluster config or KUBECONFIG)")?;
        let client = controller::ratelimit::client(
            config.clone(),
            controller::ratelimit::ClientLayers::default(),
        )
        .context("creating the API client")?;
        let fetcher = kustomize_controller::source::Fetcher::new(Default::default())
            .map_err(|e| anyhow::anyhow!(e))?;
        let options = controller::Options {
            remote: remote_fetcher(RemoteBases::NetworkOnly),
            ..controller::Options::default()
        };
        let context = controller::Context::new(
            client,
            config,
            options,
            fetcher,
            std::sync::Arc::new(controller::metrics::Metrics::new()),
        );
        kustomize_controller::cli::diff::diff(&context, namespace, name, path)
            .await
            .map_err(|e| anyhow::anyhow!(e))
    })?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for difference in &differences {
        write!(out, "{difference}")?;
    }
    out.flush()?;
    if !differences.is_empty() {
        std::process::exit(1);
    }
    Ok(())
}
