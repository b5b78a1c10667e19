//! Gathering the built-in plugin configurations of a `transformers:`, `generators:` or
//! `validators:` list, as kustomize does before it configures any of them: the entries that
//! read as inline manifests first, in their order, then the files, folders (kustomizations
//! whose output is the configurations) and remote URLs, in theirs, all into one list in which
//! two configurations with one identity are refused, as two resources would be. Only
//! `apiVersion: builtin` configurations pass; what they do is [`super::builtins`]' part.

use std::path::{Path, PathBuf};

use super::KustomizeError;
use super::loader::{Loader, Target};
use super::resource::Resource;
use super::target::{Accumulated, Builder, ObjectKeys};
use crate::value::Value;
use crate::yaml::{self, Schema};

/// A built-in plugin configuration and where it was written (for messages and provenance).
pub struct LoadedConfig {
    pub config: Value,
    /// The entry's path relative to the kustomization, or "inline configuration".
    pub origin: String,
    pub source: PathBuf,
}

/// The configurations `entries` name, in the order kustomize runs them.
pub fn gather(
    builder: &mut Builder,
    entries: &[String],
    loader: &Loader,
    file: &Path,
) -> Result<Vec<LoadedConfig>, KustomizeError> {
    let mut inline = Vec::new();
    let mut paths = Vec::new();
    for entry in entries {
        match inline_configs(entry, file) {
            Some(configs) => inline.extend(configs?),
            None => paths.push(entry),
        }
    }
    let mut gathered = inline;
    for entry in paths {
        gathered.extend(path_configs(builder, entry, loader, file)?);
    }
    refuse_duplicates(&gathered, file)?;
    for LoadedConfig { config, origin, .. } in &gathered {
        refuse_non_builtin(config, origin, file)?;
    }
    Ok(gathered)
}

/// The configurations of an entry that reads as manifests, or None for a path.
fn inline_configs(entry: &str, file: &Path) -> Option<Result<Vec<LoadedConfig>, KustomizeError>> {
    if entry.contains('\n') {
        return Some(parse_configs(entry, "inline configuration", file));
    }
    one_line_inline_configs(entry, file).map(Ok)
}

/// kustomize reads a `transformers:` or `generators:` entry as inline manifests whenever it
/// reads as manifests at all, and as a path otherwise: so an entry on one line can be a
/// flow-style config (`{apiVersion: builtin, kind: …}`), and one with no manifest in it (empty,
/// `null`, `{}`, `---`) configures nothing. A path reads as a scalar, which is no manifest.
fn one_line_inline_configs(entry: &str, file: &Path) -> Option<Vec<LoadedConfig>> {
    let objects = super::read::read_objects(entry, file).ok()?;
    Some(
        objects
            .into_iter()
            .map(|(config, _)| LoadedConfig {
                config,
                origin: "inline configuration".to_string(),
                source: file.to_path_buf(),
            })
            .collect(),
    )
}

/// The configurations in a file, a kustomization folder or a remote URL.
fn path_configs(
    builder: &mut Builder,
    entry: &str,
    loader: &Loader,
    file: &Path,
) -> Result<Vec<LoadedConfig>, KustomizeError> {
    let built = |acc: Accumulated, origin: String, source: PathBuf| -> Vec<LoadedConfig> {
        acc.resources
            .into_iter()
            .map(|r| LoadedConfig {
                config: r.object,
                origin: origin.clone(),
                source: source.clone(),
            })
            .collect()
    };
    if super::loader::is_remote(entry) {
        // kustomize accumulates the paths of configs as resources: a URL is a file of
        // configs or a repository's kustomization of them.
        let mut acc = Accumulated::new();
        builder.accumulate_remote_resource(
            loader,
            entry,
            file,
            &mut acc,
            &mut ObjectKeys::default(),
        )?;
        return Ok(built(acc, entry.to_string(), PathBuf::from(entry)));
    }
    match loader.resolve(entry)? {
        Target::Dir(dir) => {
            let origin = loader.relative(&dir).display().to_string();
            let (acc, _) = builder.accumulate(&loader.child(&dir), None)?;
            Ok(built(acc, origin, dir))
        }
        Target::File(_) => {
            let (path, text) = loader.read_text(entry)?;
            parse_configs(&text, &loader.relative(&path).display().to_string(), &path)
        }
    }
}

/// The configurations in `text`, written in `source` (the kustomization itself when inline).
fn parse_configs(
    text: &str,
    origin: &str,
    source: &Path,
) -> Result<Vec<LoadedConfig>, KustomizeError> {
    let documents =
        yaml::parse_kio_documents(text, Schema::Kyaml).map_err(|error| KustomizeError::Yaml {
            file: source.to_path_buf(),
            error,
        })?;
    Ok(documents
        .into_iter()
        .filter(|d| !d.is_null())
        .map(|config| LoadedConfig {
            config,
            origin: origin.to_string(),
            source: source.to_path_buf(),
        })
        .collect())
}

/// kustomize gathers the configurations of a list as resources, so two with one identity
/// collide however they were written.
fn refuse_duplicates(gathered: &[LoadedConfig], file: &Path) -> Result<(), KustomizeError> {
    let identities: Vec<Resource> = gathered
        .iter()
        .map(|loaded| Resource::new(loaded.config.clone()))
        .collect();
    let mut seen = ObjectKeys::default();
    for (position, resource) in identities.iter().enumerate() {
        if !seen.insert(&identities, position) {
            return Err(KustomizeError::IdConflict {
                file: file.to_path_buf(),
                id: resource.id().to_string(),
            });
        }
    }
    Ok(())
}

/// Only kustomize's built-in plugins run: an external plugin or a Helm chart would mean exec.
fn refuse_non_builtin(config: &Value, origin: &str, file: &Path) -> Result<(), KustomizeError> {
    let api_version = config
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let kind = config.get("kind").and_then(Value::as_str).unwrap_or("");
    if kind == "HelmChartInflationGenerator" {
        return Err(KustomizeError::HelmRefused {
            file: file.to_path_buf(),
            what: format!("configured in {origin}"),
        });
    }
    if api_version != "builtin" {
        return Err(KustomizeError::PluginRefused {
            file: file.to_path_buf(),
            what: format!(
                "unable to load external plugin '{kind}' ({api_version}) configured in {origin}"
            ),
        });
    }
    Ok(())
}
