//! A Kustomization's identity in the controller's own bookkeeping (the work queue, the
//! per-object caches and back-off, the revisions attempted, its own status writes): its
//! namespace and name, typed, so that every map keys it the same way.

use kube::runtime::reflector::ObjectRef;

use crate::api::Kustomization;

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KustomizationKey {
    pub namespace: String,
    pub name: String,
}

impl KustomizationKey {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> KustomizationKey {
        KustomizationKey {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    pub fn of(object: &Kustomization) -> KustomizationKey {
        KustomizationKey::new(
            object.metadata.namespace.as_deref().unwrap_or(""),
            object.metadata.name.as_deref().unwrap_or(""),
        )
    }

    /// The key of a reflector's reference.
    pub fn of_ref(reference: &ObjectRef<Kustomization>) -> KustomizationKey {
        KustomizationKey::new(
            reference.namespace.as_deref().unwrap_or(""),
            reference.name.as_str(),
        )
    }

    /// The reflector's reference to the object.
    pub fn object_ref(&self) -> ObjectRef<Kustomization> {
        ObjectRef::new(&self.name).within(&self.namespace)
    }
}

/// `namespace/name`, as logs and metrics name the object.
impl std::fmt::Display for KustomizationKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_name_namespace_and_name_and_order_by_them() {
        let web = KustomizationKey::new("apps", "web");
        assert_eq!(web.to_string(), "apps/web");
        assert!(KustomizationKey::new("apps", "api") < web);
        assert!(web < KustomizationKey::new("infra", "a"));
        assert_eq!(KustomizationKey::of_ref(&web.object_ref()), web);
    }
}
