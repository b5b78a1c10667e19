//! Whether the watch cache's copy of a Kustomization already holds our last write to it.
//!
//! A reconciliation starts from the reflector's copy rather than reading the object: the
//! copy is current except in the moment between one of our writes (finalizer, status) and the
//! watch delivering it back. For that moment the resourceVersion each write produced is kept
//! here; a copy older than it is read afresh. resourceVersions are compared as the integers
//! etcd makes them; a server whose versions are not integers always gets the read.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::api::Kustomization;
use crate::controller::KustomizationKey;

/// The resourceVersion of our last write per Kustomization (`namespace/name`).
#[derive(Debug, Default)]
pub struct OwnWrites(Mutex<HashMap<KustomizationKey, String>>);

impl OwnWrites {
    /// Remembers the resourceVersion one of our writes produced.
    pub fn record(&self, key: &KustomizationKey, object: &Kustomization) {
        if let Some(version) = &object.metadata.resource_version {
            self.record_version(key, version);
        }
    }

    /// Remembers `version`, the resourceVersion one of our writes produced.
    pub fn record_version(&self, key: &KustomizationKey, version: &str) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key.clone(), version.to_string());
    }

    /// Forgets a Kustomization that is gone (or no longer ours to write).
    pub fn forget(&self, key: &KustomizationKey) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).remove(key);
    }

    /// Whether `cached` includes our last write to it (true if we never wrote it).
    pub fn includes_ours(&self, key: &KustomizationKey, cached: &Kustomization) -> bool {
        let map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let Some(ours) = map.get(key) else {
            return true;
        };
        let Some(theirs) = cached.metadata.resource_version.as_deref() else {
            return false;
        };
        match (ours.parse::<u64>(), theirs.parse::<u64>()) {
            (Ok(ours), Ok(theirs)) => theirs >= ours,
            _ => theirs == ours,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(version: &str) -> Kustomization {
        let mut object: Kustomization = serde_json::from_value(serde_json::json!({
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": "app", "namespace": "apps"},
            "spec": {"interval": "5m", "prune": true,
                "sourceRef": {"kind": "GitRepository", "name": "repo"}}
        }))
        .unwrap();
        object.metadata.resource_version = Some(version.into());
        object
    }

    #[test]
    fn a_copy_older_than_our_last_write_is_stale() {
        let writes = OwnWrites::default();
        assert!(
            writes.includes_ours(&KustomizationKey::new("apps", "app"), &at("7")),
            "never written"
        );
        writes.record(&KustomizationKey::new("apps", "app"), &at("12"));
        assert!(!writes.includes_ours(&KustomizationKey::new("apps", "app"), &at("9")));
        assert!(writes.includes_ours(&KustomizationKey::new("apps", "app"), &at("12")));
        // Versions compare as integers, not as text.
        assert!(writes.includes_ours(&KustomizationKey::new("apps", "app"), &at("100")));
        writes.forget(&KustomizationKey::new("apps", "app"));
        assert!(writes.includes_ours(&KustomizationKey::new("apps", "app"), &at("9")));
    }

    #[test]
    fn versions_that_are_not_integers_must_match_exactly() {
        let writes = OwnWrites::default();
        writes.record(&KustomizationKey::new("apps", "app"), &at("a2"));
        assert!(!writes.includes_ours(&KustomizationKey::new("apps", "app"), &at("a3")));
        assert!(writes.includes_ours(&KustomizationKey::new("apps", "app"), &at("a2")));
    }
}
