//! What the engine remembers of its last apply of each object, so that an object unchanged
//! since needs neither a read nor a dry-run.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::digest;
use crate::objects::ObjectRef;

/// What we last applied per object (digest of the applied body, resourceVersion it
/// produced, the fields our apply owned then), shared across reconciles of one Kustomization.
#[derive(Clone, Debug, Default)]
pub struct AppliedCache(Arc<Mutex<HashMap<ObjectRef, Applied>>>);

#[derive(Clone, Debug)]
struct Applied {
    digest: String,
    resource_version: String,
    /// The digest of our `Apply` entry's `fieldsV1` in the apply's answer (a digest: a
    /// fleet's field sets would cost more memory than everything else cached).
    owned_fields: String,
}

/// The `fieldsV1` of `manager`'s `Apply` entry on the main resource, or null.
fn applied_fields(managed_fields: &Value, manager: &str) -> Value {
    managed_fields
        .as_array()
        .into_iter()
        .flatten()
        .find(|entry| {
            entry["manager"] == manager
                && entry["operation"] == "Apply"
                && entry
                    .get("subresource")
                    .is_none_or(|s| s.as_str().unwrap_or("").is_empty())
        })
        .map(|entry| entry["fieldsV1"].clone())
        .unwrap_or(Value::Null)
}

impl AppliedCache {
    pub(super) fn get(&self, object: &ObjectRef) -> Option<(String, String)> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(object)
            .map(|applied| (applied.digest.clone(), applied.resource_version.clone()))
    }

    /// Takes the live resourceVersion of an object the control plane has since written to
    /// (a CRD established, a Namespace activated) as the one our apply produced, when every
    /// other manager's entry is on the status subresource and ours still owns exactly what our
    /// apply did (a write that removed one of our fields leaves no entry of its own, but
    /// changes ours): the applied fields cannot have drifted then, and the next reconcile
    /// needs no dry-run for it.
    pub(super) fn settled(&self, object: &ObjectRef, live: &Value, manager: &str) {
        let Some(rv) = live
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
        else {
            return;
        };
        let managed = live
            .pointer("/metadata/managedFields")
            .unwrap_or(&Value::Null);
        let others_status_only = managed.as_array().is_some_and(|entries| {
            entries
                .iter()
                .all(|entry| entry["manager"] == manager || entry["subresource"] == "status")
        });
        let mut cache = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(applied) = cache.get_mut(object)
            && others_status_only
            && digest(&applied_fields(managed, manager)) == applied.owned_fields
        {
            applied.resource_version = rv.to_string();
        }
    }

    /// Records an apply's (or a dry-run's confirming no change) resourceVersion and our
    /// entry's fields from the object's `managedFields`.
    pub(super) fn put(
        &self,
        object: ObjectRef,
        digest: String,
        resource_version: Option<String>,
        managed_fields: &Value,
        manager: &str,
    ) {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match resource_version {
            Some(resource_version) => {
                map.insert(
                    object,
                    Applied {
                        digest,
                        resource_version,
                        owned_fields: self::digest(&applied_fields(managed_fields, manager)),
                    },
                );
            }
            None => {
                map.remove(&object);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_status_writes_since_our_apply_settle_the_cached_version() {
        let cache = AppliedCache::default();
        let crd = ObjectRef {
            api_version: "apiextensions.k8s.io/v1".into(),
            kind: "CustomResourceDefinition".into(),
            namespace: String::new(),
            name: "widgets.example.com".into(),
        };
        let ours = serde_json::json!({"manager": "kc", "operation": "Apply",
            "fieldsV1": {"f:metadata": {"f:labels": {"f:team": {}}}}});
        cache.put(
            crd.clone(),
            "d".into(),
            Some("5".into()),
            &serde_json::json!([ours]),
            "kc",
        );
        let established = serde_json::json!({"metadata": {"resourceVersion": "6",
            "managedFields": [ours, {"manager": "kube-apiserver", "operation": "Update",
                "subresource": "status", "fieldsV1": {"f:status": {}}}]}});
        cache.settled(&crd, &established, "kc");
        assert_eq!(cache.get(&crd).unwrap().1, "6");
        // A label of ours removed by another client: no entry of theirs, ours shrank.
        let edited = serde_json::json!({"metadata": {"resourceVersion": "7",
            "managedFields": [{"manager": "kc", "operation": "Apply", "fieldsV1": {}}]}});
        cache.settled(&crd, &edited, "kc");
        assert_eq!(
            cache.get(&crd).unwrap().1,
            "6",
            "the edit is not taken as ours"
        );
    }
}
