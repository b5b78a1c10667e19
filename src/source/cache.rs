//! The source objects the controller watches, as last seen. A reconcile reads its source
//! here instead of asking the API server each time, as Flux reads it from its informer
//! cache; a source the cache does not hold (not yet listed, or new) is read from the server.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kube::api::DynamicObject;
use kube::runtime::reflector::{ObjectRef, Store, store::Writer};

use super::{SourceObject, source_resource};
use crate::api::SourceKind;

#[derive(Clone, Default)]
pub struct SourceCache(Arc<Mutex<HashMap<SourceKind, Store<DynamicObject>>>>);

impl SourceCache {
    /// The writer a watch of `kind` feeds; the cache reads what it wrote.
    pub fn writer(&self, kind: SourceKind) -> Writer<DynamicObject> {
        let writer = Writer::new(source_resource(kind));
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(kind, writer.as_reader());
        writer
    }

    /// The source object as last seen, if the cache holds it.
    pub fn get(&self, source: &SourceObject) -> Option<Arc<DynamicObject>> {
        let stores = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let store = stores.get(&source.kind)?;
        let reference = ObjectRef::new_with(&source.name, source_resource(source.kind))
            .within(&source.namespace);
        store.get(&reference)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::watcher::Event;

    #[test]
    fn watched_sources_are_read_back_and_forgotten_when_deleted() {
        let cache = SourceCache::default();
        let mut writer = cache.writer(SourceKind::GitRepository);
        let object: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
            "metadata": {"name": "repo", "namespace": "apps"},
            "status": {"artifact": {"revision": "main@sha1:1"}}}))
        .unwrap();
        let source = SourceObject {
            kind: SourceKind::GitRepository,
            namespace: "apps".into(),
            name: "repo".into(),
        };
        assert!(cache.get(&source).is_none());
        writer.apply_watcher_event(&Event::Apply(object.clone()));
        let seen = cache.get(&source).expect("cached");
        assert_eq!(seen.data["status"]["artifact"]["revision"], "main@sha1:1");
        writer.apply_watcher_event(&Event::Delete(object));
        assert!(cache.get(&source).is_none());
    }
}
