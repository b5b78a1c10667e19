//! The `kustomize-controller` command line: arguments, subcommands and logging setup.
//!
//! `main` parses [`Cli`], calls [`init_logging`] and dispatches on [`Command`]; the commands
//! themselves live in the stage modules so that this file stays a thin description of flags.
//! A command appears here only once it works: `--help` never lists a placeholder.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};
use tracing_subscriber::EnvFilter;

/// A drop-in replacement for the Flux kustomize-controller.
#[derive(Debug, Parser)]
#[command(name = "kustomize-controller", version, about, long_about = None)]
pub struct Cli {
    /// Log verbosity.
    #[arg(long, value_enum, default_value_t = LogLevel::Info, global = true)]
    pub log_level: LogLevel,

    /// Log format: JSON lines for machines or plain text for people.
    #[arg(long, value_enum, default_value_t = LogEncoding::Json, global = true)]
    pub log_encoding: LogEncoding,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Build a kustomization directory and print the resulting objects as YAML.
    Build {
        /// Directory holding a kustomization.yaml.
        dir: PathBuf,
        /// Whether files may come from outside the kustomization's own directory.
        #[arg(long, value_enum, default_value_t = LoadRestrictor::LoadRestrictionsRootOnly)]
        load_restrictor: LoadRestrictor,
        /// Output order: kustomize's legacy kind order, or the order resources were read in.
        /// Defaults to the kustomization's sortOptions, else legacy.
        #[arg(long, value_enum)]
        reorder: Option<ReorderFlag>,
        /// Instead of YAML, print where every object came from and which transformers ran
        /// over it (no need to add buildMetadata to the kustomization).
        #[arg(long, value_enum, num_args = 0..=1, default_missing_value = "table", require_equals = true)]
        provenance: Option<ProvenanceFormat>,
        /// Refuse remote bases (git or http URLs in resources and components) instead of
        /// fetching them.
        #[arg(long)]
        no_remote_bases: bool,
    },
    /// Change the kustomization file in the current directory, keeping its other content.
    Edit {
        #[command(subcommand)]
        action: EditCommand,
    },
    /// SOPS files: decrypt in process, like `sops decrypt`.
    Sops {
        #[command(subcommand)]
        action: SopsCommand,
    },
    /// Print the CustomResourceDefinitions this controller serves.
    Crds,
    /// Print the version.
    Version,
}

/// `sops` subcommands.
#[derive(Debug, Subcommand)]
pub enum SopsCommand {
    /// Print the plaintext of a SOPS-encrypted file; its MAC must match.
    Decrypt {
        /// The encrypted file.
        file: PathBuf,
        /// A file with age identities (AGE-SECRET-KEY-1…) or an armored OpenPGP secret key;
        /// repeat for several.
        #[arg(long = "key", required = true)]
        keys: Vec<PathBuf>,
        /// The file's format; by default inferred from its extension (unknown: binary).
        #[arg(long, value_enum)]
        input_type: Option<SopsFormat>,
    },
}

/// `sops --input-type` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SopsFormat {
    Yaml,
    Json,
    Dotenv,
    Ini,
    Binary,
}

/// `edit add` or `edit remove`.
#[derive(Debug, Subcommand)]
pub enum EditCommand {
    /// Add entries to the kustomization.
    Add {
        #[command(subcommand)]
        target: EditTarget,
    },
    /// Remove entries from the kustomization.
    Remove {
        #[command(subcommand)]
        target: EditTarget,
    },
}

/// What an edit changes.
#[derive(Debug, Subcommand)]
pub enum EditTarget {
    /// buildMetadata options: originAnnotations, transformerAnnotations, managedByLabel, or *
    /// for all (separate arguments or comma-separated).
    #[command(name = "buildmetadata")]
    BuildMetadata {
        #[arg(required = true)]
        options: Vec<String>,
    },
}

/// kustomize's `--load-restrictor` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "verbatim")]
pub enum LoadRestrictor {
    LoadRestrictionsRootOnly,
    LoadRestrictionsNone,
}

/// How `build --provenance` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ProvenanceFormat {
    /// Aligned columns for people.
    Table,
    /// One JSON document for tools.
    Json,
}

/// kustomize's `--reorder` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ReorderFlag {
    Legacy,
    None,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogLevel {
    Debug,
    Info,
    Error,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogEncoding {
    Json,
    Console,
}

/// Installs the global tracing subscriber; logs go to stderr so that stdout stays the output.
pub fn init_logging(level: LogLevel, encoding: LogEncoding) {
    let directive = match level {
        LogLevel::Debug => "debug",
        LogLevel::Info => "info",
        LogLevel::Error => "error",
    };
    let filter = EnvFilter::new(directive);
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false);
    // A second initialisation (tests calling in twice) is harmless, so its error is ignored.
    let _ = match encoding {
        LogEncoding::Json => builder.json().flatten_event(true).try_init(),
        LogEncoding::Console => builder.with_ansi(false).try_init(),
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn flux_logging_flags_parse() {
        let cli = Cli::try_parse_from([
            "kustomize-controller",
            "--log-level=debug",
            "--log-encoding",
            "console",
            "crds",
        ])
        .unwrap();
        assert_eq!(cli.log_level, LogLevel::Debug);
        assert_eq!(cli.log_encoding, LogEncoding::Console);
        assert!(
            Cli::try_parse_from(["kustomize-controller", "--log-level=trace", "crds"]).is_err()
        );
    }
}
