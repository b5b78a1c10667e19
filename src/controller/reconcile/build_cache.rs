//! The objects each Kustomization built last, reused while nothing its build reads has
//! changed: no download, no extraction, no build.
//!
//! What a build reads is digested into [`BuildInputs`] (the artifact's digest and URL, the
//! whole spec, the post-build variables as resolved from the cluster, and the controller's
//! build options). A reconcile asks [`BuildCache::get`] with that digest; an entry built from
//! other inputs is never served. Some builds are never kept, because what they read is
//! outside what the digest can see ([`BuildFacts::cacheable`]): a decrypting build (a key
//! service's answer can change while the decryption Secret does not, and decrypted Secrets
//! are not kept between reconciles), and one that fetched a remote base or file (a branch
//! moves on its own). Entries live in memory only, as compact JSON, up to a capacity in
//! bytes; the least recently used go first.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::api::KustomizationSpec;
use crate::controller::KustomizationKey;

/// The default capacity: the built objects of a few thousand typical Kustomizations.
pub const DEFAULT_CAPACITY: usize = 32 << 20;

/// Everything a build reads, in plain data.
#[derive(Debug)]
pub struct BuildFacts<'a> {
    /// The artifact's content digest (`sha256:…`); empty when the source gives none.
    pub artifact_digest: &'a str,
    /// Where the artifact is served: a source that moves it (or loses it) is fetched again,
    /// as Flux fetches it on every reconcile.
    pub artifact_url: &'a str,
    pub spec: &'a KustomizationSpec,
    /// Post-build variables: inline values and those read from `substituteFrom`.
    pub variables: &'a BTreeMap<String, String>,
    /// The controller's build options: strict substitution, limits, remote bases allowed.
    pub strict_substitution: bool,
    pub limits: &'a crate::kustomize::Limits,
    pub remote_allowed: bool,
}

/// The digest of a build's inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BuildInputs([u8; 32]);

impl BuildFacts<'_> {
    /// The digest of these inputs, when a build from them may be kept: the artifact has a
    /// content digest and the Kustomization decrypts nothing.
    pub fn cacheable(&self) -> Option<BuildInputs> {
        if self.artifact_digest.is_empty() || self.spec.decryption.is_some() {
            return None;
        }
        let mut hash = Sha256::new();
        let mut field = |name: &str, value: &[u8]| {
            // Lengths keep one field's end from passing for the next one's start.
            hash.update((name.len() as u64).to_le_bytes());
            hash.update(name.as_bytes());
            hash.update((value.len() as u64).to_le_bytes());
            hash.update(value);
        };
        field("artifact", self.artifact_digest.as_bytes());
        field("url", self.artifact_url.as_bytes());
        field("spec", &serde_json::to_vec(self.spec).ok()?);
        field("variables", &serde_json::to_vec(self.variables).ok()?);
        field("strict", &[u8::from(self.strict_substitution)]);
        field("limits", format!("{:?}", self.limits).as_bytes());
        field("remote", &[u8::from(self.remote_allowed)]);
        Some(BuildInputs(hash.finalize().into()))
    }
}

/// What the cache counts, on `/metrics/extra`.
#[derive(Clone, Debug, Default)]
pub struct BuildCacheMetrics {
    hits: Counter,
    misses: Counter,
    bytes: Gauge,
}

impl BuildCacheMetrics {
    pub fn register(&self, registry: &mut prometheus_client::registry::Registry) {
        registry.register(
            "kustomize_controller_build_cache_hits",
            "Reconciles that reused the objects they built last, without download or build.",
            self.hits.clone(),
        );
        registry.register(
            "kustomize_controller_build_cache_misses",
            "Reconciles of a cacheable build that had to build (first build, or changed inputs).",
            self.misses.clone(),
        );
        registry.register(
            "kustomize_controller_build_cache_bytes",
            "Bytes of built objects the build cache holds.",
            self.bytes.clone(),
        );
    }
}

/// One Kustomization's last build.
struct Entry {
    inputs: BuildInputs,
    /// The objects, as a JSON array (shared, so that a hit parses it outside the lock).
    objects: std::sync::Arc<[u8]>,
    digest: String,
    used: u64,
}

#[derive(Default)]
struct State {
    entries: HashMap<KustomizationKey, Entry>,
    bytes: usize,
    clock: u64,
}

/// The last build of each Kustomization, up to `capacity` bytes.
pub struct BuildCache {
    state: Mutex<State>,
    capacity: usize,
    metrics: BuildCacheMetrics,
}

impl std::fmt::Debug for BuildCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuildCache")
            .field("capacity", &self.capacity)
            .field("bytes", &self.lock().bytes)
            .finish()
    }
}

impl BuildCache {
    pub fn new(capacity: usize, metrics: BuildCacheMetrics) -> BuildCache {
        BuildCache {
            state: Mutex::default(),
            capacity,
            metrics,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The objects and digest `key` built from exactly `inputs`, if kept.
    pub fn get(&self, key: &KustomizationKey, inputs: BuildInputs) -> Option<(Vec<Value>, String)> {
        let mut state = self.lock();
        state.clock += 1;
        let clock = state.clock;
        let kept = state
            .entries
            .get_mut(key)
            .filter(|entry| entry.inputs == inputs)
            .map(|entry| {
                entry.used = clock;
                (entry.objects.clone(), entry.digest.clone())
            });
        drop(state);
        let found = kept
            .and_then(|(objects, digest)| Some((serde_json::from_slice(&objects).ok()?, digest)));
        match &found {
            Some(_) => self.metrics.hits.inc(),
            None => self.metrics.misses.inc(),
        };
        found
    }

    /// Keeps what `key` built from `inputs`, in place of what it built before; the least
    /// recently used entries go when the cache is over capacity.
    pub fn put(
        &self,
        key: &KustomizationKey,
        inputs: BuildInputs,
        objects: &[Value],
        digest: &str,
    ) {
        let Ok(objects) = serde_json::to_vec(objects) else {
            return;
        };
        let objects: std::sync::Arc<[u8]> = objects.into();
        let mut state = self.lock();
        if let Some(old) = state.entries.remove(key) {
            state.bytes -= old.objects.len();
        }
        if objects.len() > self.capacity {
            self.metrics.bytes.set(state.bytes as i64);
            return;
        }
        state.clock += 1;
        let used = state.clock;
        state.bytes += objects.len();
        state.entries.insert(
            key.clone(),
            Entry {
                inputs,
                objects,
                digest: digest.to_string(),
                used,
            },
        );
        evict(&mut state, self.capacity);
        self.metrics.bytes.set(state.bytes as i64);
    }

    /// Forgets a Kustomization (deleted, or whose build is no longer kept).
    pub fn forget(&self, key: &KustomizationKey) {
        let mut state = self.lock();
        if let Some(old) = state.entries.remove(key) {
            state.bytes -= old.objects.len();
        }
        self.metrics.bytes.set(state.bytes as i64);
    }
}

/// Drops the least recently used entries until the cache fits its capacity.
fn evict(state: &mut State, capacity: usize) {
    if state.bytes <= capacity {
        return;
    }
    let mut by_use: Vec<(u64, KustomizationKey)> = state
        .entries
        .iter()
        .map(|(key, entry)| (entry.used, key.clone()))
        .collect();
    by_use.sort();
    for (_, key) in by_use {
        if state.bytes <= capacity {
            break;
        }
        if let Some(old) = state.entries.remove(&key) {
            state.bytes -= old.objects.len();
        }
    }
}

#[cfg(test)]
#[path = "build_cache_tests.rs"]
mod tests;
