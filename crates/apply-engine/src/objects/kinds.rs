//! Discovery: how the cluster serves each kind, asked once per kind and shared.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::discovery::Scope;

use super::ObjectRef;

/// How the server serves a kind.
#[derive(Clone, Debug)]
pub struct Served {
    pub resource: ApiResource,
    pub namespaced: bool,
}

/// How the server serves each kind (discovery results), shared by the appliers of all
/// Kustomizations so that discovery runs once per kind, not once per reconcile. Kinds are
/// discovered afresh after CRDs are applied.
#[derive(Clone, Debug, Default)]
pub struct KindCache(Arc<Mutex<HashMap<(String, String), Served>>>);

/// Why a kind has no API.
#[derive(Debug)]
pub enum KindError {
    /// The server does not serve the kind (no such group, version or kind).
    NotServed,
    /// Discovery failed otherwise (unreachable, forbidden, an aggregated API down).
    Api(kube::Error),
}

impl KindCache {
    /// How the server serves `object`'s kind, if discovery already told: no request.
    pub fn known(&self, object: &ObjectRef) -> Option<Served> {
        let key = (object.api_version.clone(), object.kind.clone());
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .cloned()
    }

    /// How the server serves `object`'s kind, discovered once per kind.
    pub async fn served(
        &self,
        client: &kube::Client,
        object: &ObjectRef,
    ) -> Result<Served, KindError> {
        if let Some(served) = self.known(object) {
            return Ok(served);
        }
        let key = (object.api_version.clone(), object.kind.clone());
        let gvk = GroupVersionKind::gvk(object.group(), object.version(), &object.kind);
        let (resource, capabilities) =
            kube::discovery::pinned_kind(client, &gvk)
                .await
                .map_err(|error| match error {
                    kube::Error::Discovery(_) => KindError::NotServed,
                    kube::Error::Api(status) if status.code == 404 => KindError::NotServed,
                    other => KindError::Api(other),
                })?;
        let served = Served {
            resource,
            namespaced: capabilities.scope == Scope::Namespaced,
        };
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, served.clone());
        Ok(served)
    }

    /// The dynamic API of `object`'s kind on `client`'s cluster (in its namespace when the
    /// kind is namespaced), discovered once per kind.
    pub async fn api(
        &self,
        client: &kube::Client,
        object: &ObjectRef,
    ) -> Result<Api<DynamicObject>, KindError> {
        Ok(self
            .served(client, object)
            .await?
            .api(client, &object.namespace))
    }
}

impl Served {
    /// The dynamic API of the kind on `client`'s cluster: in `namespace` when the kind is
    /// namespaced, cluster-wide otherwise.
    pub fn api(&self, client: &kube::Client, namespace: &str) -> Api<DynamicObject> {
        if self.namespaced {
            Api::namespaced_with(client.clone(), namespace, &self.resource)
        } else {
            Api::all_with(client.clone(), &self.resource)
        }
    }
}

impl KindCache {
    /// How the server serves `object`'s kind at the version its group now prefers, for an
    /// object recorded at a version the server no longer serves (a CRD that dropped it): the
    /// object itself may live on at another. None when the group serves the kind at no version.
    pub async fn served_at_another_version(
        &self,
        client: &kube::Client,
        object: &ObjectRef,
    ) -> Option<Served> {
        let group = object.group();
        if group.is_empty() {
            return None;
        }
        let discovered = kube::discovery::group(client, group).await.ok()?;
        let (resource, capabilities) = discovered.recommended_kind(&object.kind)?;
        Some(Served {
            resource,
            namespaced: capabilities.scope == Scope::Namespaced,
        })
    }

    /// Forgets every kind, so that kinds served by new or changed CRDs are discovered afresh.
    pub fn clear(&self) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// Records the kinds an established CRD serves, from the CRD itself: its instances can
    /// be applied at once, while the server's discovery documents may still lag behind it.
    pub fn learn_from_crd(&self, crd: &serde_json::Value) {
        let text = |pointer: &str| crd.pointer(pointer).and_then(|v| v.as_str());
        let (Some(group), Some(kind), Some(plural)) = (
            text("/spec/group"),
            text("/spec/names/kind"),
            text("/spec/names/plural"),
        ) else {
            return;
        };
        let namespaced = text("/spec/scope") != Some("Cluster");
        let versions = crd
            .pointer("/spec/versions")
            .and_then(|v| v.as_array())
            .into_iter()
            .flatten()
            .filter(|v| v.get("served").and_then(|s| s.as_bool()) == Some(true))
            .filter_map(|v| v.get("name").and_then(|n| n.as_str()));
        let mut cache = self.0.lock().unwrap_or_else(|e| e.into_inner());
        for version in versions {
            let gvk = GroupVersionKind::gvk(group, version, kind);
            let resource = ApiResource::from_gvk_with_plural(&gvk, plural);
            cache.insert(
                (resource.api_version.clone(), kind.to_string()),
                Served {
                    resource,
                    namespaced,
                },
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_established_crd_names_the_kinds_it_serves() {
        let cache = KindCache::default();
        cache.learn_from_crd(&serde_json::json!({"spec": {
            "group": "example.com", "scope": "Cluster",
            "names": {"kind": "Widget", "plural": "widgets"},
            "versions": [{"name": "v1", "served": true}, {"name": "v0", "served": false}],
        }}));
        let known = cache.0.lock().unwrap();
        let served = known
            .get(&("example.com/v1".to_string(), "Widget".to_string()))
            .expect("v1 is served");
        assert_eq!(served.resource.plural, "widgets");
        assert!(!served.namespaced);
        assert!(!known.contains_key(&("example.com/v0".to_string(), "Widget".to_string())));
    }
}
