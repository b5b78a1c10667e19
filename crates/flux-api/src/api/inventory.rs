//! `.status.inventory`: the objects a Kustomization applied, and the ID format Flux stores.
//!
//! An entry's `id` is `<namespace>_<name>_<group>_<kind>` with `:` in the name written as `__`
//! (RBAC names such as `system:auth-delegator`). Flux parses it by taking the namespace up to
//! the first `_`, the kind and group from the last two `_`, and the rest as the name; any `_`
//! left in the name after turning `__` back into `:` is rejected. So an ID is only written when
//! it reads back to the same object: a part that contains `_` is an error here, never an entry
//! that Flux (or we, after a restart) would parse as a different object.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ApiError;

const FIELD_SEPARATOR: char = '_';
const COLON_ENCODED: &str = "__";

/// The inventory: every object applied by the last successful reconciliation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ResourceInventory {
    /// Entries of Kubernetes object references.
    pub entries: Vec<ResourceRef>,
}

/// One inventory entry: an object ID and the API version it was applied with.
#[derive(
    Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
pub struct ResourceRef {
    /// The object ID in the format `<namespace>_<name>_<group>_<kind>`.
    pub id: String,
    /// The API version of the object's kind.
    #[serde(rename = "v")]
    pub version: String,
}

/// The identity of a Kubernetes object: namespace, name, API group and kind.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectId {
    /// Empty for cluster-scoped objects.
    pub namespace: String,
    pub name: String,
    /// Empty for the core group.
    pub group: String,
    pub kind: String,
}

impl ObjectId {
    pub fn new(
        namespace: impl Into<String>,
        name: impl Into<String>,
        group: impl Into<String>,
        kind: impl Into<String>,
    ) -> Self {
        ObjectId {
            namespace: namespace.into(),
            name: name.into(),
            group: group.into(),
            kind: kind.into(),
        }
    }

    /// The inventory ID, or an error when the ID would not read back as this object.
    pub fn encode(&self) -> Result<String, ApiError> {
        let ambiguous = |field: &'static str| ApiError::AmbiguousObjectId {
            object: self.to_string(),
            field,
        };
        if self.name.is_empty() {
            return Err(ApiError::IncompleteObjectId {
                object: self.to_string(),
                field: "name",
            });
        }
        if self.kind.is_empty() {
            return Err(ApiError::IncompleteObjectId {
                object: self.to_string(),
                field: "kind",
            });
        }
        if self.namespace.contains(FIELD_SEPARATOR) {
            return Err(ambiguous("namespace"));
        }
        if self.name.contains(FIELD_SEPARATOR) {
            return Err(ambiguous("name"));
        }
        if self.group.contains(FIELD_SEPARATOR) {
            return Err(ambiguous("group"));
        }
        if self.kind.contains(FIELD_SEPARATOR) {
            return Err(ambiguous("kind"));
        }
        Ok(format!(
            "{}_{}_{}_{}",
            self.namespace,
            self.name.replace(':', COLON_ENCODED),
            self.group,
            self.kind
        ))
    }

    /// Parses an inventory ID the way Flux does, rejecting IDs Flux rejects and IDs with an
    /// empty name or kind (Flux cannot create such objects either).
    pub fn parse(id: &str) -> Result<Self, ApiError> {
        let malformed = |reason: &'static str| ApiError::MalformedObjectId {
            id: id.to_string(),
            reason,
        };
        let (namespace, rest) = id
            .split_once(FIELD_SEPARATOR)
            .ok_or_else(|| malformed("expected <namespace>_<name>_<group>_<kind>"))?;
        let (rest, kind) = rest
            .rsplit_once(FIELD_SEPARATOR)
            .ok_or_else(|| malformed("expected <namespace>_<name>_<group>_<kind>"))?;
        let (encoded_name, group) = rest
            .rsplit_once(FIELD_SEPARATOR)
            .ok_or_else(|| malformed("expected <namespace>_<name>_<group>_<kind>"))?;
        let name = encoded_name.replace(COLON_ENCODED, ":");
        if name.contains(FIELD_SEPARATOR) {
            return Err(malformed("too many fields"));
        }
        if name.is_empty() {
            return Err(malformed("empty name"));
        }
        if kind.is_empty() {
            return Err(malformed("empty kind"));
        }
        Ok(ObjectId::new(namespace, name, group, kind))
    }
}

impl fmt::Display for ObjectId {
    /// The human form used in events and logs: `Kind/namespace/name` or `Kind/name`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{}/{}", self.kind, self.name)
        } else {
            write!(f, "{}/{}/{}", self.kind, self.namespace, self.name)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_and_parses_like_flux() {
        let cases = [
            (
                ObjectId::new("default", "podinfo", "apps", "Deployment"),
                "default_podinfo_apps_Deployment",
            ),
            (
                ObjectId::new("", "flux-system", "", "Namespace"),
                "_flux-system__Namespace",
            ),
            (
                ObjectId::new("default", "cfg", "", "ConfigMap"),
                "default_cfg__ConfigMap",
            ),
            (
                ObjectId::new(
                    "",
                    "system:auth-delegator",
                    "rbac.authorization.k8s.io",
                    "ClusterRole",
                ),
                "_system__auth-delegator_rbac.authorization.k8s.io_ClusterRole",
            ),
            (
                ObjectId::new(
                    "kube-system",
                    "a:b:c",
                    "rbac.authorization.k8s.io",
                    "RoleBinding",
                ),
                "kube-system_a__b__c_rbac.authorization.k8s.io_RoleBinding",
            ),
            (
                ObjectId::new(
                    "",
                    "kustomizations.kustomize.toolkit.fluxcd.io",
                    "apiextensions.k8s.io",
                    "CustomResourceDefinition",
                ),
                "_kustomizations.kustomize.toolkit.fluxcd.io_apiextensions.k8s.io_CustomResourceDefinition",
            ),
        ];
        for (object, id) in cases {
            assert_eq!(object.encode().unwrap(), id);
            assert_eq!(ObjectId::parse(id).unwrap(), object, "{id}");
        }
    }

    #[test]
    fn refuses_ids_that_would_not_read_back() {
        for (object, field) in [
            (ObjectId::new("default", "my_name", "", "ConfigMap"), "name"),
            (ObjectId::new("default", "a__b", "", "ConfigMap"), "name"),
            (ObjectId::new("default", "a_:b", "", "ConfigMap"), "name"),
            (ObjectId::new("my_ns", "x", "", "ConfigMap"), "namespace"),
            (ObjectId::new("", "x", "ex_ample.com", "Widget"), "group"),
            (ObjectId::new("", "x", "example.com", "My_Widget"), "kind"),
        ] {
            let err = object.encode().unwrap_err();
            assert!(
                matches!(err, ApiError::AmbiguousObjectId { field: f, .. } if f == field),
                "{object}: {err}"
            );
            assert!(err.to_string().contains(&object.name), "{err}");
        }
        assert!(ObjectId::new("", "", "", "Namespace").encode().is_err());
        assert!(ObjectId::new("", "x", "", "").encode().is_err());
    }

    #[test]
    fn rejects_malformed_ids() {
        for id in [
            "",
            "no-separators",
            "ns_name",
            "ns_name_Kind",
            "ns_my_name_apps_Deployment",
            "ns__apps_Deployment",
            "ns_name_apps_",
        ] {
            assert!(ObjectId::parse(id).is_err(), "{id:?} should not parse");
        }
    }

    #[test]
    fn entry_serializes_with_flux_field_names() {
        let entry = ResourceRef {
            id: "default_cfg__ConfigMap".into(),
            version: "v1".into(),
        };
        assert_eq!(
            serde_json::to_string(&entry).unwrap(),
            r#"{"id":"default_cfg__ConfigMap","v":"v1"}"#
        );
    }
}
