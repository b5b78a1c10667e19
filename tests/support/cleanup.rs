//! What a test leaves on a shared cluster (a real one, envtest, the shared in-process server)
//! is removed when its `TestCluster` drops, also when the test failed, so that a second run
//! on the same cluster finds nothing of the first.
//!
//! A test's objects are found by what marks them as its own:
//! - the namespaces it created, and everything in them (the namespace controller empties a
//!   deleted namespace). Kustomizations there are deleted and their finalizer released first:
//!   the test's controller has stopped, and no other would ever remove it, which would hold
//!   the namespace in `Terminating` for good;
//! - cluster-scoped objects of the built-in kinds (CRDs, namespaces, RBAC, classes…) whose
//!   name holds a name `unique` gave the test (`kc-restricted-4f3a1c7`,
//!   `widgets.g-81d2a4.example.com`, `kc-test-…-kustomize-controller`);
//! - cluster-scoped objects a Kustomization of those namespaces applied (Flux's owner label
//!   `kustomize.toolkit.fluxcd.io/namespace`). Custom resources go with their CRD.
//!
//! Nothing else is touched: the CRDs the harness installs once per process stay, as an
//! installation's would, and other tests' objects do not match.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use kube::Client;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use kube::discovery::{Discovery, Scope, verbs};
use serde_json::json;

const OWNER_NAMESPACE_LABEL: &str = "kustomize.toolkit.fluxcd.io/namespace";

/// Removes what the test made: see the module documentation.
pub async fn remove_test_objects(client: &Client, namespaces: Vec<String>, issued: &[String]) {
    let mut doomed: BTreeSet<String> = namespaces.into_iter().collect();
    for kind in cluster_scoped_kinds(client).await {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &kind);
        let Ok(list) = api.list_metadata(&ListParams::default()).await else {
            continue;
        };
        for item in list.items {
            let Some(name) = item.metadata.name.clone() else {
                continue;
            };
            let applied_for_test = item
                .metadata
                .labels
                .as_ref()
                .and_then(|labels| labels.get(OWNER_NAMESPACE_LABEL))
                .is_some_and(|ns| doomed.contains(ns));
            if !applied_for_test && !issued.iter().any(|token| names_token(&name, token)) {
                continue;
            }
            if kind.kind == "Namespace" {
                doomed.insert(name);
            } else {
                let _ = api.delete(&name, &DeleteParams::background()).await;
            }
        }
    }
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    for namespace in doomed {
        release_kustomizations(client, &namespace).await;
        let _ = namespaces
            .delete(&namespace, &DeleteParams::background())
            .await;
    }
}

/// Whether `name` holds `token` as a whole part: bounded by the ends or by `-` or `.`, so
/// that `g-abc1232` is not found in `g-abc12321`.
pub fn names_token(name: &str, token: &str) -> bool {
    let boundary = |c: Option<char>| c.is_none_or(|c| c == '-' || c == '.');
    name.match_indices(token).any(|(start, _)| {
        boundary(name[..start].chars().next_back())
            && boundary(name[start + token.len()..].chars().next())
    })
}

/// Deletes the Kustomizations of `namespace` and removes their finalizers: once deleted, no
/// finalizer can be added again, so a controller still winding down cannot hold them.
async fn release_kustomizations(client: &Client, namespace: &str) {
    let gvk = GroupVersionKind::gvk("kustomize.toolkit.fluxcd.io", "v1", "Kustomization");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "kustomizations");
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
    let Ok(list) = api.list_metadata(&ListParams::default()).await else {
        return;
    };
    for item in list.items {
        let Some(name) = item.metadata.name else {
            continue;
        };
        let _ = api.delete(&name, &DeleteParams::background()).await;
        let _ = api
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"finalizers": null}})),
            )
            .await;
    }
}

/// The cluster-scoped built-in kinds that can be listed and deleted, discovered once per
/// process (custom kinds go with their CRD).
async fn cluster_scoped_kinds(client: &Client) -> Vec<ApiResource> {
    static KINDS: OnceLock<Vec<ApiResource>> = OnceLock::new();
    if let Some(kinds) = KINDS.get() {
        return kinds.clone();
    }
    let Ok(discovery) = Discovery::new(client.clone()).run().await else {
        return Vec::new();
    };
    let kinds: Vec<ApiResource> = discovery
        .groups()
        .filter(|group| group.name().is_empty() || group.name().ends_with("k8s.io"))
        .flat_map(|group| group.recommended_resources())
        .filter(|(_, capabilities)| {
            capabilities.scope == Scope::Cluster
                && capabilities.supports_operation(verbs::LIST)
                && capabilities.supports_operation(verbs::DELETE)
        })
        .map(|(resource, _)| resource)
        .collect();
    KINDS.get_or_init(|| kinds).clone()
}

#[cfg(test)]
mod tests {
    use super::names_token;

    #[test]
    fn a_token_is_found_only_as_a_whole_part_of_a_name() {
        assert!(names_token("kc-test-abc1232", "kc-test-abc1232"));
        assert!(names_token("widgets.g-abc1232.example.com", "g-abc1232"));
        assert!(names_token(
            "kc-test-abc1232-kustomize-controller",
            "kc-test-abc1232"
        ));
        assert!(!names_token("g-abc12321", "g-abc1232"));
        assert!(!names_token("xg-abc1232", "g-abc1232"));
        assert!(!names_token("system:controller:g-abc1232x", "g-abc1232"));
    }
}
