//! What a kustomization contributes upward ([`Accumulated`]): its resources with their
//! identities kept apart ([`ObjectKeys`]), field-spec configuration and vars, and how a
//! generated resource meets another of its name (merged, replaced, or refused).

use super::*;
use crate::value::Map;

/// What a kustomization contributes upward: resources, field-spec configuration and vars.
#[derive(Clone, Debug)]
pub struct Accumulated {
    pub resources: Vec<Resource>,
    /// The field specs merged so far, as kustomize's accumulator holds them: nothing before
    /// a base or the kustomization's own configuration is merged in; the shared defaults
    /// until a configuration differs from them.
    pub config: Arc<TransformerConfig>,
    pub vars: Vec<Var>,
    /// A custom schema from an `openapi:` field, consulted before the built-in one.
    pub custom_schema: Option<Openapi>,
    /// Whether the custom schema is the top kustomization's, which replaces the built-in
    /// schema for merge metadata (`SchemaView`).
    pub custom_replaces_builtin: bool,
}

impl Accumulated {
    pub fn new() -> Accumulated {
        Accumulated {
            resources: Vec::new(),
            config: Arc::new(TransformerConfig::default()),
            vars: Vec::new(),
            custom_schema: None,
            custom_replaces_builtin: false,
        }
    }

    /// Merges in a kustomization's own configuration (`MakeTransformerConfig`): its
    /// `configurations:` files, each merged into the ones before, merged into the built-in
    /// configuration (the defaults alone without files). A conflict names the configuration
    /// file where there is one, else `file`, the kustomization file.
    pub fn merge_own_config(
        &mut self,
        files: &[(PathBuf, TransformerConfig)],
        file: &Path,
    ) -> Result<(), KustomizeError> {
        let named = match files {
            [(path, _)] => path.as_path(),
            _ => file,
        };
        if files.is_empty() {
            return self.merge_config(&TransformerConfig::defaults(), named);
        }
        let mut configured = TransformerConfig::default();
        for (path, config) in files {
            configured
                .merge(config)
                .map_err(|section| conflicting_config(path, section))?;
        }
        let mut own = TransformerConfig::builtin().clone();
        own.merge(&configured)
            .map_err(|section| conflicting_config(named, section))?;
        self.merge_config(&Arc::new(own), named)
    }

    /// Merges in what a kustomization's `crds:` files declare, each merged into the ones
    /// before.
    pub fn merge_crd_config(
        &mut self,
        files: &[(PathBuf, TransformerConfig)],
    ) -> Result<(), KustomizeError> {
        let Some((last, _)) = files.last() else {
            return Ok(());
        };
        let mut declared = TransformerConfig::default();
        for (path, config) in files {
            declared
                .merge(config)
                .map_err(|section| conflicting_config(path, section))?;
        }
        self.merge_config(&Arc::new(declared), last)
    }

    /// Merges in a base's field specs.
    pub fn merge_config_of(
        &mut self,
        base: &Accumulated,
        file: &Path,
    ) -> Result<(), KustomizeError> {
        self.merge_config(&base.config, file)
    }

    /// kustomize's accumulator merge (`MergeConfig`), sharing the defaults where merging
    /// them changes nothing.
    fn merge_config(
        &mut self,
        incoming: &Arc<TransformerConfig>,
        file: &Path,
    ) -> Result<(), KustomizeError> {
        let defaults = TransformerConfig::defaults();
        if Arc::ptr_eq(incoming, &defaults)
            && (self.config.is_empty() || Arc::ptr_eq(&self.config, &defaults))
        {
            self.config = defaults;
            return Ok(());
        }
        Arc::make_mut(&mut self.config)
            .merge(incoming)
            .map_err(|section| conflicting_config(file, section))
    }

    /// Adds resources, refusing a second resource with the same identity. `seen` holds the
    /// identities already present, so each check is a lookup rather than a scan.
    pub fn append(
        &mut self,
        resources: Vec<Resource>,
        source: &Path,
        seen: &mut ObjectKeys,
    ) -> Result<(), KustomizeError> {
        self.resources.reserve_exact(resources.len());
        for resource in resources {
            self.resources.push(resource);
            if !seen.insert(&self.resources, self.resources.len() - 1) {
                let id = self.resources[self.resources.len() - 1].id();
                self.resources.pop();
                return Err(KustomizeError::IdConflict {
                    file: source.to_path_buf(),
                    id: id.to_string(),
                });
            }
        }
        Ok(())
    }

    /// Takes in what a base contributed: its resources, field specs, custom schema and vars.
    pub fn absorb_base(
        &mut self,
        base: Accumulated,
        dir: &Path,
        file: &Path,
        seen: &mut ObjectKeys,
    ) -> Result<(), KustomizeError> {
        self.merge_config_of(&base, file)?;
        self.append(base.resources, dir, seen)?;
        if self.custom_schema.is_none() {
            self.custom_schema = base.custom_schema;
            self.custom_replaces_builtin = base.custom_replaces_builtin;
        }
        for var in base.vars {
            if self.vars.iter().any(|v| v.name == var.name) {
                return Err(KustomizeError::DuplicateVar {
                    file: file.to_path_buf(),
                    name: var.name,
                });
            }
            self.vars.push(var);
        }
        Ok(())
    }

    /// The first resource with the identity of one before it, if any: a namespace moving
    /// two into one, or, at the end of a build, a JSON patch, a replacement or a patch
    /// allowed to rename making one object another's twin after every append was checked.
    pub fn first_twin(resources: &[Resource]) -> Option<&Resource> {
        let mut keys = ObjectKeys::default();
        (0..resources.len())
            .find(|&position| !keys.insert(resources, position))
            .map(|twin| &resources[twin])
    }

    /// The identities present now, for a run of [`Accumulated::append`]s.
    pub fn object_keys(&self) -> ObjectKeys {
        let mut keys = ObjectKeys::default();
        for position in 0..self.resources.len() {
            keys.insert(&self.resources, position);
        }
        keys
    }

    /// Adds a generated resource according to its behavior: create refuses duplicates, merge
    /// and replace need an existing resource of the same identity (current or earlier).
    pub fn absorb(&mut self, resource: Resource, source: &Path) -> Result<(), KustomizeError> {
        let behavior = resource.generated.map(|g| g.behavior).unwrap_or_default();
        let id = resource.id();
        let existing = self.resources.iter().position(|r| {
            id.same_object_as(&r.object) || r.previous_ids.iter().any(|p| p.same_object(&id))
        });
        match (behavior, existing) {
            (Behavior::Create | Behavior::Unspecified, None) => {
                self.resources.push(resource);
                Ok(())
            }
            (Behavior::Create | Behavior::Unspecified, Some(_)) => {
                Err(KustomizeError::GeneratedExists {
                    file: source.to_path_buf(),
                    id: id.to_string(),
                })
            }
            (_, None) => Err(KustomizeError::MissingMergeTarget {
                file: source.to_path_buf(),
                id: id.to_string(),
            }),
            (Behavior::Merge, Some(index)) => {
                merge_generated(&mut self.resources[index], resource);
                Ok(())
            }
            (Behavior::Replace, Some(index)) => {
                replace_generated(&mut self.resources[index], resource);
                Ok(())
            }
        }
    }
}

fn conflicting_config(file: &Path, section: &'static str) -> KustomizeError {
    KustomizeError::ConflictingFieldSpecs {
        file: file.to_path_buf(),
        what: format!("{section} fieldSpec"),
    }
}

/// The identities ([`object_key`]) of a list of resources, as positions in the list hashed by
/// identity: a build of many small objects keeps no copy of each identity.
#[derive(Default)]
pub struct ObjectKeys {
    hasher: std::hash::RandomState,
    positions: hashbrown::HashTable<usize>,
}

impl ObjectKeys {
    /// Records `resources[position]`; false when a resource with its identity is recorded.
    pub fn insert(&mut self, resources: &[Resource], position: usize) -> bool {
        use std::hash::BuildHasher;
        let ObjectKeys { hasher, positions } = self;
        let key = object_key(&resources[position]);
        let entry = positions.entry(
            hasher.hash_one(key),
            |&p| object_key(&resources[p]) == key,
            |&p| hasher.hash_one(object_key(&resources[p])),
        );
        match entry {
            hashbrown::hash_table::Entry::Occupied(_) => false,
            hashbrown::hash_table::Entry::Vacant(vacant) => {
                vacant.insert(position);
                true
            }
        }
    }
}

/// What makes two resources the same object for kustomize: group, version, kind, namespace
/// (empty meaning `default`, and none at all for a cluster-scoped kind, whatever its
/// `metadata.namespace` says) and name.
fn object_key(resource: &Resource) -> (&str, &str, &str, &str, &str) {
    let gvk = resource.gvk();
    let namespace = match resource.namespace() {
        "" | "default" => "default",
        namespace => {
            let api_version = super::super::resource::str_at(&resource.object, "/apiVersion");
            // Within one kind every object has the same scope, so any one value will do.
            if SchemaView::builtin().is_cluster_scoped(api_version, gvk.kind) {
                "default"
            } else {
                namespace
            }
        }
    };
    (gvk.group, gvk.version, gvk.kind, namespace, resource.name())
}

/// `behavior: merge`, as kustomize merges: the new resource, under the existing one's name
/// and namespace, with the existing labels, annotations, `data` and `binaryData` beneath its
/// own. Whatever else the existing object had is not kept (a Secret's `type` becomes the
/// generator's), its data values are read as text (a number's digits; a mapping, a list or
/// a null as nothing), and an empty `data` goes.
fn merge_generated(existing: &mut Resource, new: Resource) {
    let mut merged = new.object;
    let name = existing.name().to_string();
    let namespace = existing.namespace().to_string();
    take_identity(&mut merged, name, namespace);
    {
        let metadata = crate::kustomize::resource::metadata_mut(&mut merged);
        for field in ["labels", "annotations"] {
            let mut entries = existing.metadata_map(field).cloned().unwrap_or_default();
            if let Some(Value::Object(own)) = metadata.remove(field) {
                entries.extend(own);
            }
            if !entries.is_empty() {
                metadata.insert(field.into(), Value::Object(entries));
            }
        }
    }
    if let Some(object) = merged.as_object_mut() {
        for field in ["data", "binaryData"] {
            let mut entries = text_map(existing.object.get(field));
            entries.extend(text_map(object.get(field)));
            object.remove(field);
            if !entries.is_empty() {
                object.insert(field.into(), Value::Object(entries));
            }
        }
    }
    existing.object = merged;
    existing.aliases.clear();
    existing.untagged.clear();
    combine_hash_flags(existing, new.generated);
}

/// kyaml's `GetDataMap`: a mapping's values as text (a scalar's, else empty); anything but a
/// mapping as no entries.
fn text_map(field: Option<&Value>) -> Map {
    let Some(Value::Object(entries)) = field else {
        return Map::new();
    };
    entries
        .iter()
        .map(|(key, value)| {
            let text = crate::kustomize::replacements::kyaml_text(value);
            (key.clone(), Value::String(text))
        })
        .collect()
}

/// A merged or replaced resource gets a hash suffix only if both the original and the new
/// generator ask for one, and it has the new generator's behavior.
fn combine_hash_flags(existing: &mut Resource, new: Option<crate::kustomize::resource::Generated>) {
    let new_wants_hash = new.is_none_or(|g| g.hash_suffix);
    if let Some(generated) = &mut existing.generated {
        generated.hash_suffix &= new_wants_hash;
        if let Some(new) = new {
            generated.behavior = new.behavior;
        }
    }
}

/// A merged or replaced resource keeps the existing one's name and namespace (none, when it
/// had none, even where the generator named `default`).
fn take_identity(object: &mut Value, name: String, namespace: String) {
    let metadata = crate::kustomize::resource::metadata_mut(object);
    metadata.insert("name".into(), Value::String(name));
    if namespace.is_empty() {
        metadata.remove("namespace");
    } else {
        metadata.insert("namespace".into(), Value::String(namespace));
    }
}

/// `behavior: replace`: the new content under the existing identity and history; labels
/// and annotations are the existing ones with the new ones laid over them.
fn replace_generated(existing: &mut Resource, new: Resource) {
    let name = existing.name().to_string();
    let namespace = existing.namespace().to_string();
    let generated = new.generated;
    // The replacing generator's origin annotation wins, as its annotations win in kustomize.
    if new.origin.is_some() {
        existing.origin = new.origin.clone();
    }
    let mut replacement = new;
    for field in ["labels", "annotations"] {
        if let Some(old) = existing.metadata_map(field).cloned() {
            let merged = replacement.metadata_map_mut(field);
            for (k, v) in old {
                merged.entry(k).or_insert(v);
            }
        }
    }
    take_identity(&mut replacement.object, name, namespace);
    existing.object = replacement.object;
    existing.aliases.clear();
    existing.untagged.clear();
    combine_hash_flags(existing, generated);
}
