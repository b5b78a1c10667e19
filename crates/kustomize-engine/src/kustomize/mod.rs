//! The embedded kustomize build engine: a kustomization directory in, Kubernetes objects out.
//!
//! A pure library, with no Kubernetes client, async runtime or network, so the CLI, the
//! controller and the tests all build the same way. [`build`] accumulates the kustomization
//! tree (`target`: resources, bases, generators, components, transformers, in kustomize's
//! order), then runs the steps that belong to the top only: hash suffixes on generated
//! ConfigMaps and Secrets, name-reference fix-up (`nameref`), vars (`vars`), dropping
//! `config.kubernetes.io/local-config` objects, and sorting (`sort`). [`to_yaml`] prints the
//! result as `kustomize build` does.
//!
//! Schema facts (merge keys, cluster scope) and kustomize's default field specs are compiled
//! in and parsed once per process (`openapi`, `config`).

mod aliases;
mod builtins;
mod config;
mod edit;
mod embedded;
mod fieldspec;
mod fold;
mod generators;
mod hash;
mod history;
mod inputs;
mod inventory;
mod json6902;
mod kustfile;
pub mod labels;
mod loader;
mod nameref;
mod openapi;
mod patches;
mod path_step;
mod plugin_configs;
mod provenance;
mod read;
mod regexes;
mod replacements;
mod resource;
mod selector;
mod smp;
mod sort;
mod target;
mod transformers;
mod untagged;
mod value_add;
mod vars;

use std::path::{Path, PathBuf};

use crate::value::Value;

use crate::yaml::{self, YamlError};
pub use edit::{
    BUILD_METADATA_OPTIONS, EditAction, edit_build_metadata, parse_build_metadata_options,
};
pub use generators::EnvLookup;
pub use inputs::{GeneratorFile, SecretInputs, secret_inputs};
pub use inventory::inventory_hash;
pub use kustfile::{KUSTOMIZATION_FILE_NAMES, UnknownFields};
pub use openapi::{Openapi, PropertyMeta, SchemaView};
use provenance::Tracking;
pub use provenance::{ConfiguredBy, Origin, Provenance, provenance_table};
pub use resource::Gvk;
pub use selector::{
    CompiledSelector as ObjectSelector, LabelSelector, SelectorError, labels_parse_message,
};
pub use smp::{Outcome as StrategicMergeOutcome, apply as strategic_merge};

/// Which files a kustomization may read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LoadRestrictions {
    /// Files must sit in or below the directory of the kustomization that names them
    /// (`kustomize build`'s default).
    #[default]
    RootOnly,
    /// Files may sit anywhere inside the build root (Flux's behaviour within an artifact).
    None,
}

/// Output order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reorder {
    /// kustomize's legacy kind order.
    Legacy,
    /// The order resources were accumulated in.
    None,
    /// The kustomization's `sortOptions` when it has them, else the order resources were
    /// accumulated in: krusty with its `Reorder` option left unset, as Flux builds.
    AsWritten,
}

/// Makes remote entries available locally: repositories named in `resources:` and
/// `components:`, and files named by http(s) URLs. The engine never touches the network
/// itself; without a fetcher, remote entries are an error.
///
/// As kustomize's loader, a `resources:` entry with an http(s) URL is downloaded as a file
/// first and checked out as a repository only when that fails other than by an error status
/// of the server (or the content is not manifests).
pub trait RemoteFetcher: Send + Sync + std::fmt::Debug {
    /// The kustomization directory a repository entry names (`https://host/org/repo//dir?ref=v1`,
    /// `git::…`, `github.com/org/repo`), checked out.
    fn fetch_repository(&self, url: &str) -> Result<RemoteBase, FetchError>;

    /// The content of an http(s) URL, downloaded as one file.
    fn download(&self, url: &str) -> Result<Vec<u8>, DownloadError>;
}

/// Why a [`RemoteFetcher`] could not fetch an entry: the fetcher's own error.
pub type FetchError = Box<dyn std::error::Error + Send + Sync>;

/// Why a download failed, as kustomize tells the two apart.
#[derive(Debug, thiserror::Error)]
pub enum DownloadError {
    /// The server answered with an error status (kustomize's `ErrHTTP`), or the file is over
    /// the size limit: a `resources:` entry is not tried as a repository.
    #[error("{0}")]
    Final(FetchError),
    /// No answer, or an error status for a URL that reads as a repository: a `resources:`
    /// entry is tried as one.
    #[error("{0}")]
    MaybeRepository(FetchError),
}

/// A kustomization inside a local copy of a repository.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteBase {
    /// The copy of the repository: nothing outside it may be read while the base is built.
    pub root: PathBuf,
    /// The kustomization directory, inside `root`.
    pub dir: PathBuf,
    /// The repository and ref, for build provenance.
    pub repo: String,
    pub git_ref: String,
}

/// How a build runs.
#[derive(Clone, Debug, Default)]
pub struct BuildOptions {
    /// Fetches remote bases; `None` refuses them.
    pub remote: Option<std::sync::Arc<dyn RemoteFetcher>>,
    pub load_restrictions: LoadRestrictions,
    /// Overrides the kustomization's `sortOptions` (and the legacy default) when set.
    pub reorder: Option<Reorder>,
    /// Where env-file entries without a value come from.
    pub env_lookup: EnvLookup,
    /// What one build may use.
    pub limits: Limits,
    /// Unknown fields of the top kustomization (those it includes are always refused).
    pub root_unknown_fields: UnknownFields,
    /// Whether kyaml's built-in schema counts as read before the build starts, so that a
    /// custom `openapi` schema always adds to it: Flux's generator preloads it before every
    /// build (fluxcd/pkg's `TestOpenAPIPathMergesBuiltins`), while `kustomize build` lets the
    /// top kustomization's custom schema replace it.
    pub builtin_schema_preloaded: bool,
}

/// Bounds on one build, far above what real repositories need, so that one hostile tree
/// cannot take the process down for everyone else.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// How deep kustomizations may include one another (kustomize itself builds chains of
    /// 3,000).
    pub max_depth: usize,
    /// How many objects a kustomization may hold, its bases' included (the largest real
    /// repositories measured build under 20,000).
    pub max_objects: usize,
    /// How many bytes of files the build may read in all.
    pub max_read_bytes: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_depth: DEFAULT_MAX_DEPTH,
            max_objects: DEFAULT_MAX_OBJECTS,
            max_read_bytes: loader::MAX_BUILD_READ_BYTES,
        }
    }
}

/// The default of [`Limits::max_depth`].
pub const DEFAULT_MAX_DEPTH: usize = 5_000;
/// The default of [`Limits::max_objects`].
pub const DEFAULT_MAX_OBJECTS: usize = 100_000;
/// The largest object a patch may produce, as JSON-like bytes (Kubernetes stores objects of
/// at most 1.5 MiB).
pub const MAX_OBJECT_BYTES: usize = 64 << 20;

/// Stack for one level of kustomization nesting, with room to spare in unoptimised builds
/// (which use about ten times what optimised ones do).
const STACK_PER_LEVEL: usize = 64 << 10;

impl Limits {
    /// The stack a build runs on: deep enough for `max_depth` levels, so that no input can
    /// overflow it. Only the pages a build touches are ever committed.
    fn stack_bytes(&self) -> usize {
        self.max_depth
            .saturating_mul(STACK_PER_LEVEL)
            .saturating_add(STACK_MARGIN)
    }
}

/// Stack for what is not nesting: YAML documents, patches and transformers recurse up to
/// the YAML depth limit.
const STACK_MARGIN: usize = 8 << 20;

/// Smaller stacks to fall back on where the system will not map the one the depth limit
/// asks for (address-space limits, strict overcommit); the depth limit shrinks to fit.
const FALLBACK_STACK_BYTES: [usize; 2] = [64 << 20, 16 << 20];

/// Runs `build` on a thread whose stack fits the depth limit it is given, whatever thread
/// calls it: the limits asked for, or smaller ones where that stack cannot be had.
fn on_build_stack<T: Send>(
    limits: &Limits,
    build: impl Fn(Limits) -> Result<T, KustomizeError> + Sync,
) -> Result<T, KustomizeError> {
    let fallbacks = FALLBACK_STACK_BYTES.map(|bytes| Limits {
        max_depth: limits
            .max_depth
            .min((bytes - STACK_MARGIN) / STACK_PER_LEVEL),
        ..*limits
    });
    let mut last_error = String::new();
    for attempt in std::iter::once(*limits).chain(fallbacks) {
        let spawned = std::thread::scope(|scope| {
            std::thread::Builder::new()
                .name("kustomize-build".into())
                .stack_size(attempt.stack_bytes())
                .spawn_scoped(scope, || build(attempt))
                .map(|handle| {
                    handle
                        .join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                })
        });
        match spawned {
            Ok(result) => return result,
            Err(error) => last_error = error.to_string(),
        }
    }
    // No thread to be had at all: the build fails cleanly instead of risking the caller's
    // stack.
    Err(KustomizeError::BuildThread(last_error))
}

/// The objects a build produces, in output order.
pub type Resources = Vec<Value>;

/// Why a build failed; every variant names the file, object or field at fault.
#[derive(Debug, thiserror::Error)]
pub enum KustomizeError {
    #[error("unable to find one of 'kustomization.yaml', 'kustomization.yml' or 'Kustomization' in directory '{}'", .0.display())]
    MissingKustomization(PathBuf),

    #[error("Found multiple kustomization files under: {}", .0.display())]
    MultipleKustomizations(PathBuf),

    #[error("{}: kustomization is empty", .0.display())]
    EmptyKustomization(PathBuf),

    #[error("{}: invalid Kustomization: unknown field \"{field}\"", .file.display())]
    UnknownField { file: PathBuf, field: String },

    #[error("{}: invalid Kustomization: {message}", .file.display())]
    InvalidKustomization { file: PathBuf, message: String },

    // Causes are part of these messages, so they are deliberately not exposed as `source`
    // too: error chains would print them twice.
    #[error("{}: {error}", .file.display())]
    Yaml { file: PathBuf, error: YamlError },

    #[error("{}: {error}", .path.display())]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },

    #[error("{}: larger than the {limit}-byte limit for files a kustomization reads", .file.display())]
    FileTooLarge { file: PathBuf, limit: u64 },

    #[error("security; file '{}' is not in or below '{}'", .file.display(), .root.display())]
    OutsideRoot { file: PathBuf, root: PathBuf },

    #[error("{}: new root '{entry}' cannot be absolute: a base or component is named by a path relative to the kustomization", .dir.display())]
    AbsolutePath { dir: PathBuf, entry: String },

    #[error("{}: kustomizations nest deeper than {limit} levels (the build's limit)", .dir.display())]
    TooDeep { dir: PathBuf, limit: usize },

    #[error("cannot start a thread for the build: {0}")]
    BuildThread(String),

    #[error("{}: the build has read all the file bytes its limit allows", .file.display())]
    ReadBudget { file: PathBuf },

    #[error("{}: the build holds {count} objects, more than its limit of {limit}", .file.display())]
    TooManyObjects {
        file: PathBuf,
        count: usize,
        limit: usize,
    },

    #[error("{}: cycle detected: the kustomization includes itself through {}", .dir.display(), .via.display())]
    Cycle { dir: PathBuf, via: PathBuf },

    #[error("{}: object {index} is not a mapping", .file.display())]
    NotAnObject { file: PathBuf, index: usize },

    #[error("{}: {message}", .file.display())]
    InvalidResource { file: PathBuf, message: String },

    #[error("{}: missing kind in object {index}", .file.display())]
    MissingKind { file: PathBuf, index: usize },

    #[error(
        "{}: metadata.name of object {index} (kind {kind}) is {name}, not a string: quote it (\"{name}\")",
        .file.display()
    )]
    NameNotText {
        file: PathBuf,
        index: usize,
        kind: String,
        name: String,
    },

    #[error("{}: missing metadata.name in object {index} (kind {kind})", .file.display())]
    MissingName {
        file: PathBuf,
        index: usize,
        kind: String,
    },

    #[error("{}: may not add resource with an already registered id: {id}", .file.display())]
    IdConflict { file: PathBuf, id: String },

    /// Field specs for one field that disagree on creating it: `what` is the configuration
    /// list (`CommonLabels fieldSpec`) or a `labels` entry's merge (`labels`, `template
    /// fieldSpec`), in kustomize's words; `file` is the configuration or kustomization file
    /// whose specs were being merged.
    #[error("{}: failed to merge {what}: conflicting fieldspecs", .file.display())]
    ConflictingFieldSpecs { file: PathBuf, what: String },

    /// Two resources share an identity once every transformer ran.
    #[error("may not add resource with an already registered id: {id}")]
    IdConflictAfterBuild { id: String },

    #[error("{}: id {id} does not exist; cannot merge or replace", .file.display())]
    MissingMergeTarget { file: PathBuf, id: String },

    #[error("{}: generated id {id} exists; behavior must be merge or replace", .file.display())]
    GeneratedExists { file: PathBuf, id: String },

    #[error("{}: {kind} generator {name:?}: {message}", .file.display())]
    Generator {
        file: PathBuf,
        kind: &'static str,
        name: String,
        message: String,
    },

    #[error("expected kind 'Component' for path '{}' but got 'Kustomization'", .dir.display())]
    ExpectedComponent { dir: PathBuf },

    #[error(
        "accumulating components: must build at directory: '{}': file is not directory",
        .path.display()
    )]
    ComponentNotDirectory { path: PathBuf },

    #[error("{}: an empty entry in {list}: new root cannot be empty", .file.display())]
    EmptyEntry { file: PathBuf, list: &'static str },

    #[error("expected kind 'Kustomization' for path '{}' but got 'Component'", .dir.display())]
    UnexpectedComponent { dir: PathBuf },

    #[error("{}: var '{name}' already encountered", .file.display())]
    DuplicateVar { file: PathBuf, name: String },

    #[error("{}: var '{name}' {message}", .file.display())]
    Var {
        file: PathBuf,
        name: String,
        message: String,
    },

    #[error("var '{name}': {message}")]
    VarValue { name: String, message: String },

    #[error("{}: remote resource {entry:?}: remote bases are not enabled in this build", .file.display())]
    RemoteDisabled { file: PathBuf, entry: String },

    #[error("{}: remote resource {entry:?}: {error}", .file.display())]
    RemoteFailed {
        file: PathBuf,
        entry: String,
        error: FetchError,
    },

    #[error("{}: remote file {url:?}: remote files are not enabled in this build", .dir.display())]
    RemoteFileDisabled { dir: PathBuf, url: String },

    #[error("{}: remote file {url:?}: {error}", .dir.display())]
    RemoteFileFailed {
        dir: PathBuf,
        url: String,
        error: DownloadError,
    },

    #[error("{}: {what}: external plugins disabled; plugins, exec and KRM functions are never run", .file.display())]
    PluginRefused { file: PathBuf, what: String },

    #[error("{}: HelmChartInflationGenerator ({what}): helm chart inflation is disabled (kustomize would need --enable-helm; this engine never runs helm)", .file.display())]
    HelmRefused { file: PathBuf, what: String },

    #[error("{}: validator shouldn't modify the resource map ({what})", .file.display())]
    ValidatorModified { file: PathBuf, what: String },

    #[error("namespace transformation produces ID conflict: {ids}")]
    NamespaceConflict { ids: String },

    #[error(
        "{}: namespace field specs must target scalar nodes: considering field '{path}' of object {object}: {cause}",
        .file.display()
    )]
    /// A namespace field spec that meets a mapping or a list where kyaml wanted another kind
    /// (kustomize's words for its node-kind errors there).
    NamespaceFieldNotScalar {
        file: PathBuf,
        object: String,
        path: String,
        cause: String,
    },

    #[error(
        "{}: namespace transformation failed: considering field '{path}' of object {object}: {cause}",
        .file.display()
    )]
    NamespaceTransformation {
        file: PathBuf,
        object: String,
        path: String,
        cause: String,
    },

    #[error("{}: {object}: {message}", .file.display())]
    Transformer {
        file: PathBuf,
        object: String,
        message: String,
    },

    #[error("images: invalid image name {name:?}: {message}")]
    InvalidImageName { name: String, message: String },

    #[error("{}: {patch}: {message}", .file.display())]
    Patch {
        file: PathBuf,
        patch: String,
        message: String,
    },

    #[error("{}: replacements: {message}", .file.display())]
    Replacement { file: PathBuf, message: String },

    #[error("{}: {message}", .file.display())]
    InvalidConfig { file: PathBuf, message: String },

    /// A field spec's path runs into a scalar, or ends at a node the transformer cannot
    /// set (kustomize's words; `during` names the transformer's step when kustomize does,
    /// e.g. a name reference's update).
    #[error("{during}considering field '{path}' of object {object}: {cause}")]
    FieldSpecPath {
        during: String,
        object: String,
        path: String,
        cause: String,
    },

    /// The `images:` walk through every `containers`/`initContainers` list met an element
    /// that is not a mapping, or an `image` that is not a scalar.
    #[error("{object}: updating images: {cause}")]
    ContainerImage { object: String, cause: String },

    /// kustomize's words for a RoleBinding subject whose namespace is written but empty.
    #[error("Invalid Input: namespace is blank for resource \"{resource}\"")]
    BlankSubjectNamespace { resource: String },

    #[error(
        "{referrer}: updating name reference in '{field}' field: found multiple possible referrals for name {name:?}: {candidates}"
    )]
    AmbiguousReference {
        referrer: String,
        field: String,
        name: String,
        candidates: String,
    },
}

/// Builds the kustomization in `dir`; nothing outside `root` may be read.
pub fn build(root: &Path, dir: &Path, options: &BuildOptions) -> Result<Resources, KustomizeError> {
    Ok(build_resources(root, dir, options, false)?
        .into_iter()
        .map(|r| r.object)
        .collect())
}

/// Builds like [`build`], and also returns where each object came from and which
/// transformers ran over it (recorded for this build even when the kustomization does not
/// ask for build metadata; its output is unchanged by that).
pub fn build_with_provenance(
    root: &Path,
    dir: &Path,
    options: &BuildOptions,
) -> Result<(Resources, Vec<Provenance>), KustomizeError> {
    let resources = build_resources(root, dir, options, true)?;
    let provenance = resources.iter().map(Provenance::of).collect();
    Ok((
        resources.into_iter().map(|r| r.object).collect(),
        provenance,
    ))
}

fn build_resources(
    root: &Path,
    dir: &Path,
    options: &BuildOptions,
    provenance: bool,
) -> Result<Vec<resource::Resource>, KustomizeError> {
    on_build_stack(&options.limits, |limits| {
        let options = BuildOptions {
            limits,
            ..options.clone()
        };
        build_on_this_thread(root, dir, &options, provenance)
    })
}

fn build_on_this_thread(
    root: &Path,
    dir: &Path,
    options: &BuildOptions,
    provenance: bool,
) -> Result<Vec<resource::Resource>, KustomizeError> {
    let loader = loader::Loader::new(root, dir, options.load_restrictions)?
        .with_remote(options.remote.clone());
    loader.set_read_budget(options.limits.max_read_bytes);
    // Only the top kustomization's buildMetadata decides what is recorded and written.
    let requested = Tracking::from_build_metadata(
        &kustfile::load(&loader, options.root_unknown_fields)?
            .1
            .build_metadata,
    );
    let mut builder = target::Builder::new(options);
    builder.top_dir = loader.dir.clone();
    builder.tracking = Tracking {
        origins: requested.origins || provenance,
        transformations: requested.transformations || provenance,
        managed_by: requested.managed_by,
    };
    let (mut acc, top) = builder.accumulate(&loader, None)?;

    hash::suffix_generated_names(&mut acc.resources);
    let schema = openapi::SchemaView {
        custom: acc.custom_schema.as_ref(),
        replaces_builtin: acc.custom_replaces_builtin,
    };
    nameref::fix(&mut acc.resources, &acc.config.name_reference, schema)?;
    vars::resolve(&acc.vars, &mut acc.resources, &acc.config.var_reference)?;
    acc.resources
        .retain(|r| r.annotation("config.kubernetes.io/local-config") != Some("true"));
    // kustomize lists the build's resources once more at the end, refusing twins.
    if let Some(twin) = target::Accumulated::first_twin(&acc.resources) {
        return Err(KustomizeError::IdConflictAfterBuild {
            id: twin.id().to_string(),
        });
    }
    for resource in acc.resources.iter_mut() {
        annotations_as_text(&mut resource.object);
        fold_next_lines(&mut resource.object);
        provenance::annotate(resource, requested);
    }

    if let Some(config) = &top.inventory {
        let object = inventory::inventory_object(config, &acc.resources, &loader.dir)?;
        acc.resources.push(resource::Resource::new(object));
    }
    let order = sort::order_for(top.sort_options.as_ref(), options.reorder, &loader.dir)?;
    sort::apply_by(&mut acc.resources, &order, |r| &r.object);
    Ok(acc.resources)
}

/// kustomize rewrites annotations on every resource from their text, and drops the map when
/// it ends up empty. Files and patches are read with annotations as text; what transformers
/// wrote since (a replacement's number, a mapping it created) becomes text here (a mapping's
/// or a list's text is empty).
fn annotations_as_text(object: &mut Value) {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        if let Some(Value::Object(annotations)) = metadata.get_mut("annotations") {
            for value in annotations.values_mut() {
                match value {
                    Value::Number(_) | Value::Bool(_) | Value::Object(_) | Value::Array(_) => {
                        *value = Value::String(replacements::kyaml_text(value));
                    }
                    Value::String(_) | Value::Null => {}
                }
            }
        }
        let empty = metadata
            .get("annotations")
            .is_some_and(|a| a.is_null() || a.as_object().is_some_and(|m| m.is_empty()));
        if empty {
            metadata.remove("annotations");
        }
    }
}

/// kustomize's output passes through Go's JSON encoder and back through a YAML reader. Go
/// leaves NEL (U+0085) unescaped, and YAML folds that line break inside a quoted scalar, so
/// NEL runs end up as a space (or newlines for several) with surrounding blanks trimmed.
fn fold_next_lines(value: &mut Value) {
    match value {
        // NEL is encoded as C2 85; a byte scan rules most strings out cheaply.
        Value::String(s) if s.as_bytes().contains(&0xC2) && s.contains('\u{85}') => {
            *s = fold_nel(s)
        }
        Value::Array(items) => items.iter_mut().for_each(fold_next_lines),
        Value::Object(map) => {
            if map
                .keys()
                .any(|k| k.as_bytes().contains(&0xC2) && k.contains('\u{85}'))
            {
                let entries = std::mem::take(map);
                for (k, mut v) in entries {
                    fold_next_lines(&mut v);
                    map.insert(fold_nel(&k), v);
                }
            } else {
                map.values_mut().for_each(fold_next_lines);
            }
        }
        _ => {}
    }
}

fn fold_nel(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{85}' {
            out.push(c);
            continue;
        }
        let mut breaks = 1;
        while let Some(&next) = chars.peek() {
            match next {
                '\u{85}' => breaks += 1,
                ' ' | '\t' => {}
                _ => break,
            }
            chars.next();
        }
        while out.ends_with([' ', '\t']) {
            out.pop();
        }
        if breaks == 1 {
            out.push(' ');
        } else {
            out.extend(std::iter::repeat_n('\n', breaks - 1));
        }
    }
    out
}

/// The kustomization file of `dir` (one of [`KUSTOMIZATION_FILE_NAMES`]).
pub fn find_kustomization(dir: &Path) -> Result<PathBuf, KustomizeError> {
    kustfile::find(dir)
}

/// kyaml's words for a node of the wrong kind (without the node's contents, which kyaml
/// adds and which may be a Secret's).
pub(crate) fn node_kind_mismatch(expected: &str, found: &Value) -> String {
    let found = match found {
        Value::Object(_) => "MappingNode",
        Value::Array(_) => "SequenceNode",
        _ => "ScalarNode",
    };
    format!("wrong node kind: expected {expected} but got {found}")
}

impl From<fieldspec::PathRefused> for KustomizeError {
    /// The caller adds which object and field spec; see [`KustomizeError::in_field`].
    fn from(error: fieldspec::PathRefused) -> Self {
        KustomizeError::FieldSpecPath {
            during: String::new(),
            object: String::new(),
            path: String::new(),
            cause: error.to_string(),
        }
    }
}

impl fieldspec::Traversed for KustomizeError {
    fn traversed(self, prefix: &str) -> Self {
        match self {
            KustomizeError::FieldSpecPath {
                during,
                object,
                path,
                cause,
            } => KustomizeError::FieldSpecPath {
                during,
                object,
                path,
                cause: format!("{prefix}{cause}"),
            },
            other => other,
        }
    }
}

impl KustomizeError {
    /// Names the object and field spec of a field-spec walk's failure (the walk's own
    /// refusal or its visitor's).
    fn in_field(self, object: &resource::ResId, path: &str) -> KustomizeError {
        match self {
            KustomizeError::FieldSpecPath { during, cause, .. } => KustomizeError::FieldSpecPath {
                during,
                object: object.to_string(),
                path: path.to_string(),
                cause,
            },
            other => other,
        }
    }

    /// A field spec's target that is not what the transformer sets: the object and path
    /// are added by [`Self::in_field`].
    fn field_not(expected: &str, found: &Value) -> KustomizeError {
        KustomizeError::field_spec(node_kind_mismatch(expected, found))
    }

    /// What a field spec's target cannot take, in kustomize's words: the object and path are
    /// added by [`Self::in_field`].
    fn field_spec(cause: impl Into<String>) -> KustomizeError {
        KustomizeError::FieldSpecPath {
            during: String::new(),
            object: String::new(),
            path: String::new(),
            cause: cause.into(),
        }
    }

    /// As [`Self::in_field`], for a name reference's update, which kustomize also names.
    fn in_name_reference(self, object: &resource::ResId, path: &str) -> KustomizeError {
        match self.in_field(object, path) {
            KustomizeError::FieldSpecPath {
                object,
                path,
                cause,
                ..
            } => KustomizeError::FieldSpecPath {
                during: format!("updating name reference in '{path}' field of '{object}': "),
                object,
                path,
                cause,
            },
            other => other,
        }
    }
}

/// Builds `dir` with the whole file system as the root, as the `build` command does.
pub fn build_dir(dir: &Path, options: &BuildOptions) -> Result<Resources, KustomizeError> {
    build(Path::new("/"), dir, options)
}

/// Prints objects as `kustomize build` does: documents separated by `---`.
pub fn to_yaml(resources: &[Value]) -> String {
    yaml::documents_to_yaml_string(resources)
}

/// [`to_yaml`] written to `out` as each object is printed, consuming the objects.
pub fn write_yaml(resources: Resources, out: &mut impl std::io::Write) -> std::io::Result<()> {
    yaml::write_documents(resources, out)
}
