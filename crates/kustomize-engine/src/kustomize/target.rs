//! Accumulating one kustomization: its resources and bases, generators, components and
//! transformers, in kustomize's order.
//!
//! For a directory the steps are: resources (files, then base directories built
//! recursively, conflicts refused), `crds` and `configurations` (extra field specs),
//! generators (ConfigMap, Secret, then `generators:` configs), components (each runs its own
//! steps over everything accumulated so far), the built-in transformers (strategic-merge
//! patches, patches, namespace, prefix/suffix, labels, annotations, JSON 6902 patches,
//! replicas, images, replacements), then `transformers:` configs. Steps that only make sense
//! once (hash suffixes, name references, vars, sorting) run in `build` at the top.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::value::Value;

use super::config::TransformerConfig;
use super::generators::{self, GeneratorKind};
use super::kustfile::{self, Kustomization, Var};
use super::loader::{self, Loader, Target};
use super::openapi::{Openapi, SchemaView};
use super::provenance::{ConfiguredBy, Origin, Tracking, relative_to};
use super::resource::{Behavior, Resource};
use super::transformers::Affix;
use super::{
    BuildOptions, KustomizeError, RemoteBase, builtins, patches, replacements, transformers,
};

mod accumulated;
mod remote;

pub use accumulated::{Accumulated, ObjectKeys};

/// Builds kustomizations, tracking the directories being built to detect cycles.
pub struct Builder<'a> {
    pub options: &'a BuildOptions,
    stack: Vec<PathBuf>,
    /// Bases included more than once in this build, accumulated once. A base's result
    /// depends only on its own directory, and trees commonly include one base from many
    /// overlays; bases used once are not kept, so they cost no extra memory.
    bases: HashMap<PathBuf, Accumulated>,
    /// The objects of the bases kept in `bases`, for the object limit.
    cached_objects: usize,
    /// Bases seen once so far.
    seen_bases: HashSet<PathBuf>,
    /// What provenance to record; paths in it are relative to `top_dir`.
    pub tracking: Tracking,
    pub top_dir: PathBuf,
    /// Remote bases being built, innermost last: for cycles and provenance.
    remotes: Vec<RemoteContext>,
    /// Whether kyaml would have read its built-in schema by now: a custom schema set after
    /// that joins it instead of replacing it (`SchemaView`).
    builtin_schema_read: bool,
}

/// A remote base being built.
struct RemoteContext {
    url: String,
    base: RemoteBase,
}

impl<'a> Builder<'a> {
    pub fn new(options: &'a BuildOptions) -> Builder<'a> {
        Builder {
            options,
            stack: Vec::new(),
            bases: HashMap::new(),
            cached_objects: 0,
            seen_bases: HashSet::new(),
            tracking: Tracking::default(),
            top_dir: PathBuf::new(),
            remotes: Vec::new(),
            builtin_schema_read: options.builtin_schema_preloaded,
        }
    }

    /// An origin for `path`: relative to the repository with its repo and ref inside a
    /// remote base, relative to the top kustomization otherwise.
    fn place(&self, path: &Path) -> Origin {
        match self
            .remotes
            .iter()
            .rev()
            .find(|r| path.starts_with(&r.base.root))
        {
            Some(remote) => Origin {
                path: relative_to(path, &remote.base.root),
                repo: remote.base.repo.clone(),
                git_ref: remote.base.git_ref.clone(),
                ..Default::default()
            },
            None => Origin::file(relative_to(path, &self.top_dir)),
        }
    }

    /// The accumulated result of the base directory `dir`; a base included again is served
    /// from the cache from its second use on.
    fn base(&mut self, loader: &Loader, dir: &Path) -> Result<Accumulated, KustomizeError> {
        if let Some(cached) = self.bases.get(dir) {
            return Ok(cached.clone());
        }
        let (accumulated, _) = self.accumulate(&loader.child(dir), None)?;
        if !self.seen_bases.insert(dir.to_path_buf()) {
            self.cached_objects += accumulated.resources.len();
            self.bases.insert(dir.to_path_buf(), accumulated.clone());
        }
        Ok(accumulated)
    }

    /// Accumulates the kustomization in `loader.dir`. `component_of` carries what the parent
    /// accumulated when the directory is used as a component.
    pub fn accumulate(
        &mut self,
        loader: &Loader,
        component_of: Option<Accumulated>,
    ) -> Result<(Accumulated, Kustomization), KustomizeError> {
        if let Some(first) = self.stack.iter().position(|d| d == &loader.dir) {
            return Err(KustomizeError::Cycle {
                dir: self.stack[first].clone(),
                via: self.stack.last().cloned().unwrap_or_default(),
            });
        }
        if self.stack.len() >= self.options.limits.max_depth {
            return Err(KustomizeError::TooDeep {
                dir: loader.dir.clone(),
                limit: self.options.limits.max_depth,
            });
        }
        self.stack.push(loader.dir.clone());
        let result = self.accumulate_dir(loader, component_of);
        self.stack.pop();
        result
    }

    fn accumulate_dir(
        &mut self,
        loader: &Loader,
        component_of: Option<Accumulated>,
    ) -> Result<(Accumulated, Kustomization), KustomizeError> {
        let top_level = self.stack.len() == 1;
        let unknown = if top_level {
            self.options.root_unknown_fields
        } else {
            kustfile::UnknownFields::Refuse
        };
        let (file, k) = kustfile::load(loader, unknown)?;
        let as_component = component_of.is_some();
        if as_component && !k.is_component() {
            return Err(KustomizeError::ExpectedComponent {
                dir: loader.dir.clone(),
            });
        }
        // A Component is refused where a Kustomization is expected (as a resource), but the
        // directory being built may be one: kustomize builds it as it stands.
        if !as_component && k.is_component() && !top_level {
            return Err(KustomizeError::UnexpectedComponent {
                dir: loader.dir.clone(),
            });
        }
        refuse_plugins(&k, &file)?;
        let mut acc = component_of.unwrap_or_else(Accumulated::new);
        load_openapi(&k, loader, &file, &mut acc, !self.builtin_schema_read)?;

        // Nothing renames resources while they are collected, so identities stay valid.
        let mut seen = acc.object_keys();
        for entry in &k.resources {
            self.accumulate_resource(loader, entry, &file, &mut acc, &mut seen)?;
            self.check_object_count(&acc, &file)?;
        }
        // A kustomization naming the built-in schema's version uses it, over a base's own.
        if k.openapi.contains_key("version") {
            acc.custom_schema = None;
        }
        let mut configurations = Vec::with_capacity(k.configurations.len());
        for configuration in &k.configurations {
            let (path, text) = loader.read_text(configuration)?;
            let config = builtins::parse_config(&text, &path)?.sorted();
            configurations.push((path, config));
        }
        acc.merge_own_config(&configurations, &file)?;
        let mut crds = Vec::with_capacity(k.crds.len());
        for crd in &k.crds {
            let (path, text) = loader.read_text(crd)?;
            crds.push((
                path.clone(),
                builtins::config_from_crd(&text, &path)?.sorted(),
            ));
        }
        acc.merge_crd_config(&crds)?;

        self.run_generators(&k, loader, &file, &mut acc)?;

        for entry in &k.components {
            if entry.is_empty() {
                return Err(KustomizeError::EmptyEntry {
                    file,
                    list: "components",
                });
            }
            if loader::is_remote(entry) {
                let base = self.fetch_repository(entry, &file, None)?;
                let remote_loader = loader.for_tree(&base.root, &base.dir)?;
                self.remotes.push(RemoteContext {
                    url: entry.clone(),
                    base,
                });
                let built = self.accumulate(&remote_loader, Some(acc));
                self.remotes.pop();
                acc = built?.0;
                continue;
            }
            let dir = match loader.resolve(entry)? {
                Target::Dir(dir) => dir,
                Target::File(path) => return Err(KustomizeError::ComponentNotDirectory { path }),
            };
            let (accumulated, _) = self.accumulate(&loader.child(&dir), Some(acc))?;
            acc = accumulated;
        }

        self.run_builtin_transformers(&k, loader, &file, &mut acc)?;
        builtins::run_transformers(self, &k.transformers, loader, &file, &mut acc)?;
        builtins::run_validators(self, &k.validators, loader, &file, &acc)?;

        for var in &k.vars {
            if acc.vars.iter().any(|v| v.name == var.name) {
                return Err(KustomizeError::DuplicateVar {
                    file: file.clone(),
                    name: var.name.clone(),
                });
            }
            super::vars::bind(var, &mut acc.resources, &file)?;
            acc.vars.push(var.clone());
        }
        self.check_object_count(&acc, &file)?;
        Ok((acc, k))
    }

    /// The ConfigMap and Secret generators, then the generator plugins' built-in configs.
    fn run_generators(
        &mut self,
        k: &Kustomization,
        loader: &Loader,
        file: &Path,
        acc: &mut Accumulated,
    ) -> Result<(), KustomizeError> {
        let global_options = k.generator_options.as_ref();
        let env_lookup = self.options.env_lookup;
        for (kind, list) in [
            (GeneratorKind::ConfigMap, &k.config_map_generator),
            (GeneratorKind::Secret, &k.secret_generator),
        ] {
            for args in list {
                let mut resource =
                    generators::generate(kind, args, global_options, loader, env_lookup, file)?;
                let by = match kind {
                    GeneratorKind::ConfigMap => "ConfigMapGenerator",
                    GeneratorKind::Secret => "SecretGenerator",
                };
                resource.origin = self
                    .generated_origin(file, ConfiguredBy::builtin(by))
                    .map(Box::new);
                acc.absorb(resource, file)?;
            }
        }
        for resource in builtins::run_generators(self, &k.generators, loader, env_lookup, file)? {
            acc.absorb(resource, file)?;
        }
        Ok(())
    }

    fn accumulate_resource(
        &mut self,
        loader: &Loader,
        entry: &str,
        file: &Path,
        acc: &mut Accumulated,
        seen: &mut ObjectKeys,
    ) -> Result<(), KustomizeError> {
        if entry.is_empty() {
            return Err(KustomizeError::EmptyEntry {
                file: file.to_path_buf(),
                list: "resources",
            });
        }
        if loader::is_remote(entry) {
            return self.accumulate_remote_resource(loader, entry, file, acc, seen);
        }
        match loader.resolve(entry)? {
            Target::File(path) => {
                loader.check_file(&path)?;
                let (path, text) = loader.read_text(entry)?;
                let origin = self.file_origin(&path);
                let resources = resources_from(&text, &path, origin)?;
                self.note_kinds(&resources);
                acc.append(resources, &path, seen)?;
            }
            Target::Dir(dir) => {
                let sub = self.base(loader, &dir)?;
                acc.absorb_base(sub, &dir, file, seen)?;
            }
        }
        Ok(())
    }

    /// kyaml reads its built-in schema (unless a custom one is set) when it first checks the
    /// scope of a kind outside its precomputed table.
    pub(super) fn note_kinds(&mut self, resources: &[Resource]) {
        if !self.builtin_schema_read {
            self.builtin_schema_read = resources.iter().any(|r| {
                let api_version = super::resource::str_at(&r.object, "/apiVersion");
                !Openapi::builtin_knows_scope(api_version, r.gvk().kind)
            });
        }
    }

    /// Refuses a build that holds more objects than its limit, counting the bases kept for
    /// reuse: bases that include each other in diamonds double their objects at every level.
    fn check_object_count(&self, acc: &Accumulated, file: &Path) -> Result<(), KustomizeError> {
        let limit = self.options.limits.max_objects;
        let count = acc.resources.len() + self.cached_objects;
        if count > limit {
            return Err(KustomizeError::TooManyObjects {
                file: file.to_path_buf(),
                count,
                limit,
            });
        }
        Ok(())
    }

    fn run_builtin_transformers(
        &mut self,
        k: &Kustomization,
        loader: &Loader,
        file: &Path,
        acc: &mut Accumulated,
    ) -> Result<(), KustomizeError> {
        // Each configured transformer is recorded as kustomize configures them: one per
        // `patches`, `patchesJson6902`, `labels`, `replicas` and `images` entry, one for each
        // other field that is set.
        if !k.patches_strategic_merge.is_empty() || !k.patches.is_empty() {
            // Merging a patch reads the schema (an approximation: JSON 6902 patches do not).
            self.builtin_schema_read = true;
        }
        let record = |acc: &mut Accumulated, kind: &str| self.record_builtin(acc, file, kind);
        if !k.patches_strategic_merge.is_empty() {
            patches::apply_strategic_merge_files(&k.patches_strategic_merge, loader, file, acc)?;
            record(acc, "PatchStrategicMergeTransformer");
        }
        for patch in &k.patches {
            patches::apply_patches(std::slice::from_ref(patch), loader, file, acc)?;
            record(acc, "PatchTransformer");
        }
        if !k.namespace.is_empty() {
            let specs = acc.config.namespace.clone();
            let custom = acc.custom_schema.clone();
            let schema = SchemaView {
                custom: custom.as_ref(),
                replaces_builtin: acc.custom_replaces_builtin,
            };
            transformers::set_namespace(
                &mut acc.resources,
                &k.namespace,
                &specs,
                schema,
                Default::default(),
                file,
            )?;
            check_unique_ids(&acc.resources)?;
            record(acc, "NamespaceTransformer");
        }
        if !k.name_prefix.is_empty() {
            let specs = acc.config.name_prefix.clone();
            transformers::add_affix(&mut acc.resources, &k.name_prefix, Affix::Prefix, &specs)?;
            record(acc, "PrefixTransformer");
        }
        if !k.name_suffix.is_empty() {
            let specs = acc.config.name_suffix.clone();
            transformers::add_affix(&mut acc.resources, &k.name_suffix, Affix::Suffix, &specs)?;
            record(acc, "SuffixTransformer");
        }
        for label in &k.labels {
            let specs = label_specs(label, &acc.config, file)?;
            transformers::add_map_entries(&mut acc.resources, &label.pairs, &specs)?;
            record(acc, "LabelTransformer");
        }
        if !k.common_labels.is_empty() {
            let common_labels = acc.config.common_labels.clone();
            transformers::add_map_entries(&mut acc.resources, &k.common_labels, &common_labels)?;
            record(acc, "LabelTransformer");
        }
        if !k.common_annotations.is_empty() {
            let common_annotations = acc.config.common_annotations.clone();
            transformers::add_map_entries(
                &mut acc.resources,
                &k.common_annotations,
                &common_annotations,
            )?;
            record(acc, "AnnotationsTransformer");
        }
        for patch in &k.patches_json6902 {
            patches::apply_json6902(std::slice::from_ref(patch), loader, file, acc)?;
            record(acc, "PatchJson6902Transformer");
        }
        for replica in &k.replicas {
            let specs = acc.config.replicas.clone();
            transformers::set_replicas(
                &mut acc.resources,
                std::slice::from_ref(replica),
                &specs,
                file,
            )?;
            record(acc, "ReplicaCountTransformer");
        }
        for image in &k.images {
            let specs = acc.config.images.clone();
            transformers::set_images(&mut acc.resources, std::slice::from_ref(image), &specs)?;
            record(acc, "ImageTagTransformer");
        }
        if !k.replacements.is_empty() {
            replacements::apply_all(&k.replacements, loader, file, &mut acc.resources)?;
            record(acc, "ReplacementTransformer");
        }
        Ok(())
    }

    /// Records a built-in transformer configured in `file` on every accumulated resource.
    fn record_builtin(&self, acc: &mut Accumulated, file: &Path, kind: &str) {
        self.record_transformation(acc, || {
            self.configured_at(file, ConfiguredBy::builtin(kind))
        });
    }

    /// Appends a transformation to every accumulated resource, when transformations are
    /// tracked; `origin` is only built then.
    pub fn record_transformation(&self, acc: &mut Accumulated, origin: impl FnOnce() -> Origin) {
        if !self.tracking.transformations {
            return;
        }
        let origin = origin();
        for resource in acc.resources.iter_mut() {
            resource.transformations.push(origin.clone());
        }
    }

    /// The origin of objects read from `path`, when origins are tracked.
    fn file_origin(&self, path: &Path) -> Option<Origin> {
        self.tracking.any().then(|| self.place(path))
    }

    /// The origin of objects generated by `kind` configured in `file`, when tracked.
    pub fn generated_origin(&self, file: &Path, by: ConfiguredBy) -> Option<Origin> {
        self.tracking.any().then(|| self.configured_at(file, by))
    }

    /// An origin for configuration written in `file`, placed like [`Builder::place`].
    pub fn configured_at(&self, file: &Path, by: ConfiguredBy) -> Origin {
        let place = self.place(file);
        Origin {
            repo: place.repo,
            git_ref: place.git_ref,
            ..Origin::configured(place.path, by)
        }
    }
}

/// The resources of a manifest text read from `source`, all with `origin`.
fn resources_from(
    text: &str,
    source: &Path,
    origin: Option<Origin>,
) -> Result<Vec<Resource>, KustomizeError> {
    super::read::read_objects(text, source)?
        .into_iter()
        .map(|(object, empty_values)| {
            let mut resource = Resource::new(object);
            resource.origin = origin.clone().map(Box::new);
            resource.empty_values = empty_values.into();
            resource.take_build_annotations().map_err(|message| {
                KustomizeError::InvalidResource {
                    file: source.to_path_buf(),
                    message,
                }
            })?;
            Ok(resource)
        })
        .collect()
}

/// Moving resources into one namespace can make two of them the same object.
pub(super) fn check_unique_ids(resources: &[Resource]) -> Result<(), KustomizeError> {
    match Accumulated::first_twin(resources) {
        Some(twin) => Err(KustomizeError::NamespaceConflict {
            ids: twin.id().to_string(),
        }),
        None => Ok(()),
    }
}

/// The fields a `labels` entry writes: its own, the configuration's, and the selectors (or
/// only `metadata.labels`, plus templates when asked).
/// An entry's own field that one of these names with the other `create` is refused.
fn label_specs(
    label: &kustfile::Label,
    config: &super::config::TransformerConfig,
    file: &Path,
) -> Result<Vec<kustfile::FieldSpec>, KustomizeError> {
    use super::config::merge_specs;
    let conflict = |what: &'static str| {
        move |_| KustomizeError::ConflictingFieldSpecs {
            file: file.to_path_buf(),
            what: what.to_string(),
        }
    };
    let mut specs = label.fields.clone();
    merge_specs(&mut specs, &config.labels).map_err(conflict("labels"))?;
    if label.include_selectors {
        merge_specs(&mut specs, &config.common_labels).map_err(conflict("labels"))?;
    } else {
        if label.include_templates {
            merge_specs(&mut specs, &config.template_labels)
                .map_err(conflict("template fieldSpec"))?;
        }
        merge_specs(&mut specs, &[metadata_labels_spec()]).map_err(conflict("labels"))?;
    }
    Ok(specs)
}

/// `openapi`: the built-in schema's version (only v1.21.2 is built in) or a custom schema
/// file, never both.
fn load_openapi(
    k: &Kustomization,
    loader: &Loader,
    file: &Path,
    acc: &mut Accumulated,
    replaces_builtin: bool,
) -> Result<(), KustomizeError> {
    if k.openapi.contains_key("version") && k.openapi.contains_key("path") {
        return Err(KustomizeError::InvalidKustomization {
            file: file.to_path_buf(),
            message: "openapi: builtin version and custom schema provided, cannot use both".into(),
        });
    }
    if let Some(version) = k.openapi.get("version")
        && version != "v1.21.2"
    {
        return Err(KustomizeError::InvalidKustomization {
            file: file.to_path_buf(),
            message: format!(
                "openapi version {version:?}: the specified OpenAPI version is not built in (v1.21.2 is)"
            ),
        });
    }
    if let Some(path) = k.openapi.get("path") {
        let (schema_file, text) = loader.read_text(path)?;
        let document =
            crate::yaml::parse_single(&text, crate::yaml::Schema::Kyaml).map_err(|error| {
                KustomizeError::Yaml {
                    file: schema_file,
                    error,
                }
            })?;
        acc.custom_schema = Some(Openapi::from_document(&document));
        acc.custom_replaces_builtin = replaces_builtin;
    }
    Ok(())
}

fn metadata_labels_spec() -> kustfile::FieldSpec {
    kustfile::FieldSpec {
        path: "metadata/labels".into(),
        create: true,
        ..Default::default()
    }
}

/// Helm inflation stays out, as in Flux.
fn refuse_plugins(k: &Kustomization, file: &Path) -> Result<(), KustomizeError> {
    if !k.helm_charts.is_empty()
        || !k.helm_chart_inflation_generator.is_empty()
        || k.helm_globals.is_some()
    {
        return Err(KustomizeError::HelmRefused {
            file: file.to_path_buf(),
            what: "helmCharts".into(),
        });
    }

    Ok(())
}
