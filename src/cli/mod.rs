//! The `kustomize-controller` command line: arguments, subcommands and logging setup.
//!
//! `main` parses [`Cli`], calls [`init_logging`] and dispatches on [`Command`]; the commands
//! run the stage modules (`build` the engine, `run` the controller), except [`diff`], which
//! is the CLI's own: a plan of one Kustomization from the controller's build and applier.
//! A command appears here only once it works: `--help` never lists a placeholder.

pub mod diff;
pub mod go_url;

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};
use tracing_subscriber::EnvFilter;

/// A drop-in replacement for the Flux kustomize-controller.
#[derive(Debug, Parser)]
// As Go's pflag, which Flux parses with: a flag given again overrides the earlier value, so
// a Deployment patched by appending `--flag=value` to Flux's args keeps working.
#[command(name = "kustomize-controller", version, about, long_about = None, args_override_self = true)]
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
    Build(BuildArgs),
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
    /// Run the controller: reconcile Kustomizations in the cluster (Flux's flags).
    #[command(args_override_self = true)]
    Run(Box<RunArgs>),
    /// Show what a Kustomization would change if it applied a local directory (like
    /// `flux diff kustomization`); exits 1 when there are differences.
    Diff {
        /// Name of the Kustomization whose settings (overrides, decryption, variables) apply.
        #[arg(short = 'k', long)]
        kustomization: String,
        /// Namespace of the Kustomization.
        #[arg(short = 'n', long, default_value = "flux-system")]
        namespace: String,
        /// Local directory to build instead of the artifact.
        #[arg(long)]
        path: PathBuf,
    },
    /// Print the CustomResourceDefinitions this controller serves.
    Crds,
    /// Print the version.
    Version,
}

/// `build`'s arguments.
#[derive(Debug, clap::Args)]
pub struct BuildArgs {
    /// Directory holding a kustomization.yaml.
    pub dir: PathBuf,
    /// Whether files may come from outside the kustomization's own directory.
    #[arg(long, value_enum, default_value_t = LoadRestrictor::LoadRestrictionsRootOnly)]
    pub load_restrictor: LoadRestrictor,
    /// Output order: kustomize's legacy kind order, or the order resources were read in.
    /// Defaults to the kustomization's sortOptions, else legacy.
    #[arg(long, value_enum)]
    pub reorder: Option<ReorderFlag>,
    /// Instead of YAML, print where every object came from and which transformers ran
    /// over it (no need to add buildMetadata to the kustomization).
    #[arg(long, value_enum, num_args = 0..=1, default_missing_value = "table", require_equals = true)]
    pub provenance: Option<ProvenanceFormat>,
    /// Refuse remote bases (git or http URLs in resources and components) instead of
    /// fetching them.
    #[arg(long)]
    pub no_remote_bases: bool,
    /// How deep kustomizations may include one another.
    #[arg(long, default_value_t = crate::kustomize::DEFAULT_MAX_DEPTH)]
    pub max_depth: usize,
    /// How many objects the build may hold.
    #[arg(long, default_value_t = crate::kustomize::DEFAULT_MAX_OBJECTS)]
    pub max_objects: usize,
}

fn duration(text: &str) -> Result<std::time::Duration, crate::api::ApiError> {
    crate::api::GoDuration::parse(text).map(|d| d.to_std())
}

/// `--prune-guard-threshold`: a threshold, or none (`off`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PruneGuardThreshold(pub Option<crate::controller::prune_guard::Threshold>);

fn prune_guard_threshold(
    text: &str,
) -> Result<PruneGuardThreshold, crate::controller::prune_guard::ThresholdError> {
    crate::controller::prune_guard::parse(text).map(PruneGuardThreshold)
}

/// `run`: the controller's flags, with Flux's names and defaults.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Address of the Prometheus metrics endpoint.
    #[arg(long, default_value = ":8080")]
    pub metrics_addr: String,
    /// Address of the /healthz and /readyz endpoints.
    #[arg(long, default_value = ":9440")]
    pub health_addr: String,
    /// Kustomizations reconciled at once.
    #[arg(long, default_value_t = 4)]
    pub concurrent: u16,
    /// Objects server-side applied at once within a Kustomization.
    #[arg(long, default_value_t = 4)]
    pub concurrent_ssa: usize,
    /// How long to wait before retrying a Kustomization whose dependencies or source are not ready.
    #[arg(long, default_value = "30s", value_parser = duration)]
    pub requeue_dependency: std::time::Duration,
    /// Refuse remote bases in kustomizations.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", require_equals = true, action = clap::ArgAction::Set, default_value_t = false)]
    pub no_remote_bases: bool,
    /// Retries of artifact downloads.
    #[arg(long, default_value_t = 9)]
    pub http_retry: u32,
    /// Service account to impersonate when a Kustomization names none.
    #[arg(long)]
    pub default_service_account: Option<String>,
    /// Secret in the runtime namespace with age keys, used when a Kustomization's decryption names no Secret.
    #[arg(long)]
    pub sops_age_secret: Option<String>,
    /// How deep a Kustomization's kustomizations may include one another; deeper trees fail
    /// the build.
    #[arg(long, default_value_t = crate::kustomize::DEFAULT_MAX_DEPTH)]
    pub build_max_depth: usize,
    /// How many objects a Kustomization's build may hold; more fail the build.
    #[arg(long, default_value_t = crate::kustomize::DEFAULT_MAX_OBJECTS)]
    pub build_max_objects: usize,
    /// Field managers whose fields are taken over (repeatable).
    #[arg(long = "override-manager")]
    pub override_managers: Vec<String>,
    /// Kinds applied in their own stage after CRDs and classes and before the rest, as Flux
    /// names them: `group/Kind` (`rbac.authorization.k8s.io/Role`), or `Kind` for the core group.
    #[arg(long, value_delimiter = ',')]
    pub custom_apply_stage_kinds: Vec<String>,
    /// Refuse references to sources and dependencies in other namespaces.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", require_equals = true, action = clap::ArgAction::Set, default_value_t = false)]
    pub no_cross_namespace_refs: bool,
    /// Client-side limit of API requests per second (0: unlimited).
    #[arg(long, default_value_t = 50.0)]
    pub kube_api_qps: f32,
    /// Requests allowed at once above the QPS limit.
    #[arg(long, default_value_t = 300)]
    pub kube_api_burst: u32,
    /// Run only while holding the leader-election Lease.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", require_equals = true, action = clap::ArgAction::Set, default_value_t = false)]
    pub enable_leader_election: bool,
    /// Give the Lease up on SIGTERM so another replica takes over at once.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", require_equals = true, action = clap::ArgAction::Set, default_value_t = true)]
    pub leader_election_release_on_cancel: bool,
    #[arg(long, default_value = "35s", value_parser = duration)]
    pub leader_election_lease_duration: std::time::Duration,
    #[arg(long, default_value = "30s", value_parser = duration)]
    pub leader_election_renew_deadline: std::time::Duration,
    #[arg(long, default_value = "5s", value_parser = duration)]
    pub leader_election_retry_period: std::time::Duration,
    /// Watch Kustomizations in all namespaces; otherwise only in the runtime namespace.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", require_equals = true, action = clap::ArgAction::Set, default_value_t = true)]
    pub watch_all_namespaces: bool,
    /// Reconcile only Kustomizations matching this label selector (sharding).
    #[arg(long)]
    pub watch_label_selector: Option<String>,
    /// ConfigMaps and Secrets with this label trigger the Kustomizations that use them.
    #[arg(long, default_value = "reconcile.fluxcd.io/watch=Enabled")]
    pub watch_configs_label_selector: String,
    #[arg(long, default_value = "750ms", value_parser = duration)]
    pub min_retry_delay: std::time::Duration,
    #[arg(long, default_value = "15m", value_parser = duration)]
    pub max_retry_delay: std::time::Duration,
    /// Jitter added to each Kustomization's interval, in percent.
    #[arg(long, default_value_t = 5)]
    pub interval_jitter_percentage: u8,
    /// Flux's feature gates, `Name=true,Other=false` (repeatable); an unknown gate is an error.
    #[arg(long, action = clap::ArgAction::Append)]
    pub feature_gates: Vec<String>,
    /// Allow kubeconfigs of remote clusters to run exec credential plugins.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", require_equals = true, action = clap::ArgAction::Set, default_value_t = false)]
    pub insecure_kubeconfig_exec: bool,
    /// Allow kubeconfigs of remote clusters to skip TLS verification.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", require_equals = true, action = clap::ArgAction::Set, default_value_t = false)]
    pub insecure_kubeconfig_tls: bool,
    /// Flux's notification-controller address: events are forwarded there as well as
    /// recorded as Kubernetes Events.
    #[arg(long, default_value = "")]
    pub events_addr: String,
    /// The ServiceAccount a Kustomization decrypts as when it names none (object-level
    /// workload identity; needs the ObjectLevelWorkloadIdentity gate).
    #[arg(long)]
    pub default_decryption_service_account: Option<String>,
    /// The ServiceAccount a kubeconfig ConfigMap's cloud identity is when it names none
    /// (needs the ObjectLevelWorkloadIdentity gate).
    #[arg(long)]
    pub default_kubeconfig_service_account: Option<String>,
    /// How many cloud credentials the token cache keeps; 0 turns it off.
    #[arg(long, default_value_t = 100)]
    pub token_cache_max_size: usize,
    /// The longest a credential is kept (at most 1h).
    #[arg(long, default_value = "1h", value_parser = duration)]
    pub token_cache_max_duration: std::time::Duration,
    /// Bytes of built objects kept to reuse while a Kustomization's build inputs are
    /// unchanged (no download, no build); 0 turns the build cache off.
    #[arg(long, default_value_t = crate::controller::build_cache::DEFAULT_CAPACITY)]
    pub build_cache_max_size: usize,
    /// Beyond Flux: the prune guard's cluster-wide threshold — a reconciliation that would
    /// prune more than this share (`50%`) or count (`100`) of a Kustomization's inventory
    /// prunes nothing until confirmed; `off` (the default) leaves it to each Kustomization's
    /// `kustomize-controller.rs/prune-guard` annotation.
    #[arg(long, default_value = "off", value_parser = prune_guard_threshold)]
    pub prune_guard_threshold: PruneGuardThreshold,
    /// A Flux flag this controller has no use for (source-controller's): accepted so Flux's
    /// Deployment args work, and reported as unused in the log.
    #[arg(long, hide = true)]
    pub storage_path: Option<String>,
    /// The name of a ConfigMap in the controller's namespace listing the OpenBao/Vault
    /// servers (address and login path) trusted for SOPS decryption with a ServiceAccount
    /// token; when empty, that login is off and Vault keys open with static tokens only.
    #[arg(long)]
    pub sops_vault_configmap: Option<String>,
    /// The namespace the controller runs in.
    #[arg(long, env = "RUNTIME_NAMESPACE", default_value = "flux-system")]
    pub runtime_namespace: String,
}

impl RunArgs {
    /// Flux's flags are Go strings, where an empty value is no value: `--sops-age-secret=`
    /// names no Secret.
    pub fn without_empty_values(mut self) -> RunArgs {
        for value in [
            &mut self.default_service_account,
            &mut self.sops_age_secret,
            &mut self.watch_label_selector,
            &mut self.default_decryption_service_account,
            &mut self.default_kubeconfig_service_account,
            &mut self.storage_path,
            &mut self.sops_vault_configmap,
        ] {
            if value.as_deref() == Some("") {
                *value = None;
            }
        }
        self
    }

    /// The feature gates, with Flux's defaults for those not given.
    pub fn feature_gates(
        &self,
    ) -> Result<crate::controller::FeatureGates, crate::controller::FeatureGateError> {
        crate::controller::FeatureGates::parse(self.feature_gates.iter().map(String::as_str))
    }
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
    Trace,
    Debug,
    Info,
    Error,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogEncoding {
    Json,
    Console,
}

/// The directives that keep the HTTP and TLS stack, and kube's line per request, at info.
macro_rules! quiet_http_stack {
    () => {
        "hyper=info,hyper_util=info,h2=info,tower=info,rustls=info,reqwest=info,kube_client=info"
    };
}

/// Installs the global tracing subscriber: zap's lines, as Flux writes them (see
/// [`crate::logging`]), on stderr so that stdout stays the output.
pub fn init_logging(level: LogLevel, encoding: LogEncoding) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    // kube's client logs every failed request as an error; during an API server outage that
    // is a line per retry. The controller reports what failed where it matters (a watch
    // outage once, a reconcile in its status), so those lines only show when debugging.
    //
    // Flux's debug and trace show the controllers' own lines, not its HTTP and TLS stack's
    // (Go's never log); ours would print a line or more per request, so they stay at info.
    let directive = match level {
        LogLevel::Trace => concat!("trace,", quiet_http_stack!()),
        LogLevel::Debug => concat!("debug,", quiet_http_stack!()),
        // The OpenPGP crate warns about every data key old sops framed in short chunks,
        // which it reads: not news outside debugging.
        //
        // kube's watcher warns at every retry of a refused watch (a role without `list`);
        // Flux's log has no warn level, and our watches report an outage once themselves.
        LogLevel::Info => {
            "info,kube_client::client::builder=off,pgp=error,kube_runtime::watcher=error"
        }
        LogLevel::Error => "error,kube_client::client::builder=off,pgp=error",
    };
    let encoding = match encoding {
        LogEncoding::Json => crate::logging::Encoding::Json,
        LogEncoding::Console => crate::logging::Encoding::Console,
    };
    // A second initialisation (tests calling in twice) is harmless, so its error is ignored.
    let _ = tracing_subscriber::registry()
        .with(EnvFilter::new(directive))
        .with(crate::logging::ZapLayer::new(encoding, std::io::stderr))
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn a_flag_given_again_overrides_as_with_pflag() {
        let cli = Cli::try_parse_from([
            "kustomize-controller",
            "run",
            "--watch-all-namespaces",
            "--log-encoding=console",
            "--watch-all-namespaces=false",
            "--log-encoding=json",
        ])
        .unwrap();
        assert_eq!(cli.log_encoding, LogEncoding::Json);
        let Command::Run(args) = cli.command else {
            panic!("run")
        };
        assert!(!args.watch_all_namespaces);
    }

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_flag_of_flux_1_9_4_is_accepted() {
        // Every flag Flux v1.9.4's main.go registers, and those of the fluxcd/pkg option sets
        // it binds (client, logger, leader election, ACL, kubeconfig, rate limiter, feature
        // gates, watch, jitter, token cache), with a value as Flux's Deployment would pass it.
        let cli = Cli::try_parse_from([
            "kustomize-controller",
            "run",
            "--log-level=info",
            "--log-encoding=json",
            "--metrics-addr=:8080",
            "--events-addr=http://notification-controller.flux-system.svc.cluster.local./",
            "--health-addr=:9440",
            "--concurrent=4",
            "--concurrent-ssa=4",
            "--requeue-dependency=30s",
            "--no-remote-bases=false",
            "--http-retry=9",
            "--default-service-account=default",
            "--default-decryption-service-account=sops",
            "--default-kubeconfig-service-account=kubeconfig",
            "--sops-age-secret=sops-age",
            "--sops-vault-configmap=vault-servers",
            "--override-manager=kubectl",
            "--custom-apply-stage-kinds=rbac.authorization.k8s.io/Role",
            "--kube-api-qps=50",
            "--kube-api-burst=300",
            "--enable-leader-election",
            "--leader-election-release-on-cancel=false",
            "--leader-election-lease-duration=35s",
            "--leader-election-renew-deadline=30s",
            "--leader-election-retry-period=5s",
            "--no-cross-namespace-refs=true",
            "--insecure-kubeconfig-exec=false",
            "--insecure-kubeconfig-tls=false",
            "--min-retry-delay=750ms",
            "--max-retry-delay=15m",
            "--feature-gates=StrictPostBuildSubstitutions=true",
            "--feature-gates=ExternalArtifact=true",
            "--watch-all-namespaces=true",
            "--watch-label-selector=sharding.fluxcd.io/key=shard1",
            "--watch-configs-label-selector=reconcile.fluxcd.io/watch=Enabled",
            "--interval-jitter-percentage=5",
            "--token-cache-max-size=100",
            "--token-cache-max-duration=1h",
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        let Command::Run(args) = cli.command else {
            panic!("the run command");
        };
        assert!(!args.leader_election_release_on_cancel);
        let gates = args.feature_gates().unwrap();
        assert!(gates.enabled(crate::controller::Gate::ExternalArtifact));
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
        let trace = Cli::try_parse_from(["kustomize-controller", "--log-level=trace", "crds"]);
        assert_eq!(
            trace.unwrap().log_level,
            LogLevel::Trace,
            "Flux accepts trace"
        );
        assert!(Cli::try_parse_from(["kustomize-controller", "--log-level=loud", "crds"]).is_err());
    }
}
