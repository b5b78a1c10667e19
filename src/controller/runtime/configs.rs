//! The ConfigMaps and Secrets a reconciliation reads besides its manifests: `substituteFrom`,
//! the decryption Secret and the kubeConfig Secret.
//!
//! By default (Flux's) each is read from the API server when it is needed, and no Secret
//! stays in memory. With the `CacheSecretsAndConfigMaps` feature gate, as Flux then reads them
//! from its informer cache, [`ConfigReader::start`] watches all ConfigMaps and Secrets of the
//! watched namespaces and reads come from what the watches hold. A cache answers only once its
//! watch has listed, and only for the namespaces it watches; otherwise the object is read.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::Api;
use kube::runtime::reflector::{ObjectRef, Store, store::Writer};
use kube::runtime::watcher::Event;

use crate::controller::watch::{self, WatchConfig, WatchHealth};

/// Where ConfigMaps and Secrets are read from; cheap to clone.
#[derive(Clone)]
pub struct ConfigReader {
    client: kube::Client,
    cached: Option<Arc<Cached>>,
}

struct Cached {
    config_maps: Watched<ConfigMap>,
    secrets: Watched<Secret>,
    /// The one namespace watched, or all.
    namespace: Option<String>,
}

struct Watched<K: kube::Resource<DynamicType = ()> + Clone + 'static> {
    store: Store<K>,
    /// The watch has listed (and so the store holds everything there is).
    listed: Arc<AtomicBool>,
}

/// The watches behind a caching reader; they stop when this is dropped.
pub struct ConfigWatches(Vec<tokio::task::JoinHandle<()>>);

impl Drop for ConfigWatches {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

impl ConfigReader {
    /// A reader that reads each object from the API server when asked.
    pub fn direct(client: kube::Client) -> ConfigReader {
        ConfigReader {
            client,
            cached: None,
        }
    }

    /// A reader that caches: it watches every ConfigMap and Secret in `namespace` (or all
    /// namespaces) for as long as the returned watches are kept.
    pub fn start(
        client: &kube::Client,
        namespace: Option<&str>,
        health: Arc<WatchHealth>,
    ) -> (ConfigReader, ConfigWatches) {
        let (config_maps, maps_task) =
            watched::<ConfigMap>(client, namespace, "ConfigMap", &health);
        let (secrets, secrets_task) = watched::<Secret>(client, namespace, "Secret", &health);
        let reader = ConfigReader {
            client: client.clone(),
            cached: Some(Arc::new(Cached {
                config_maps,
                secrets,
                namespace: namespace.map(str::to_string),
            })),
        };
        (reader, ConfigWatches(vec![maps_task, secrets_task]))
    }

    pub async fn config_map(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ConfigMap>, kube::Error> {
        self.read(|c| &c.config_maps, namespace, name).await
    }

    pub async fn secret(&self, namespace: &str, name: &str) -> Result<Option<Secret>, kube::Error> {
        self.read(|c| &c.secrets, namespace, name).await
    }

    /// From the cache when it can answer, else from the API server.
    async fn read<K>(
        &self,
        kind: impl Fn(&Cached) -> &Watched<K>,
        namespace: &str,
        name: &str,
    ) -> Result<Option<K>, kube::Error>
    where
        K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + std::fmt::Debug
            + serde::de::DeserializeOwned
            + 'static,
    {
        match self.cached(kind, namespace, name) {
            Some(found) => Ok(found),
            None => {
                Api::namespaced(self.client.clone(), namespace)
                    .get_opt(name)
                    .await
            }
        }
    }

    /// The cache's answer (`Some(None)`: it has no such object), or `None` when the cache
    /// cannot answer.
    fn cached<K>(
        &self,
        kind: impl Fn(&Cached) -> &Watched<K>,
        namespace: &str,
        name: &str,
    ) -> Option<Option<K>>
    where
        K: kube::Resource<DynamicType = ()> + Clone + 'static,
    {
        let cached = self.cached.as_ref()?;
        if cached.namespace.as_deref().is_some_and(|n| n != namespace) {
            return None;
        }
        let watched = kind(cached);
        if !watched.listed.load(Ordering::Acquire) {
            return None;
        }
        let reference = ObjectRef::new(name).within(namespace);
        Some(
            watched
                .store
                .get(&reference)
                .map(|object| (*object).clone()),
        )
    }
}

/// The store a watch of `K` keeps, and the task that feeds it.
fn watched<K>(
    client: &kube::Client,
    namespace: Option<&str>,
    kind: &str,
    health: &Arc<WatchHealth>,
) -> (Watched<K>, tokio::task::JoinHandle<()>)
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    // Named apart from the `--watch-configs-label-selector` watches of the same kinds.
    let config = WatchConfig {
        kind: format!("{kind} (cache)"),
        label_selector: None,
    };
    let mut writer: Writer<K> = Writer::default();
    let store = writer.as_reader();
    let listed = Arc::new(AtomicBool::new(false));
    let marks = listed.clone();
    let api = watch::scoped::<K>(namespace.map(str::to_string));
    let events = watch::watch(client, api, config, health.clone());
    let task = tokio::spawn(events.for_each(move |event| {
        writer.apply_watcher_event(&event);
        if matches!(event, Event::InitDone) {
            marks.store(true, Ordering::Release);
        }
        futures::future::ready(())
    }));
    (Watched { store, listed }, task)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config_map(namespace: &str, name: &str, value: &str) -> ConfigMap {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace},
            "data": {"key": value}}))
        .unwrap()
    }

    /// A client for a server that is never asked.
    fn unused_client() -> kube::Client {
        kube::Client::try_from(kube::Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap()
    }

    /// A reader over stores fed by hand, as the watch tasks feed them.
    fn reader(namespace: Option<&str>) -> (ConfigReader, Writer<ConfigMap>, Arc<AtomicBool>) {
        let maps: Writer<ConfigMap> = Writer::default();
        let secrets: Writer<Secret> = Writer::default();
        let listed = Arc::new(AtomicBool::new(false));
        let reader = ConfigReader {
            client: unused_client(),
            cached: Some(Arc::new(Cached {
                config_maps: Watched {
                    store: maps.as_reader(),
                    listed: listed.clone(),
                },
                secrets: Watched {
                    store: secrets.as_reader(),
                    listed: Arc::new(AtomicBool::new(true)),
                },
                namespace: namespace.map(str::to_string),
            })),
        };
        (reader, maps, listed)
    }

    #[tokio::test]
    async fn the_cache_answers_once_listed_and_only_for_its_namespace() {
        let (reader, mut maps, listed) = reader(Some("apps"));
        let value = |found: Option<Option<ConfigMap>>| {
            found.map(|m| m.and_then(|m| m.data).map(|d| d["key"].clone()))
        };
        let vars = config_map("apps", "vars", "one");
        maps.apply_watcher_event(&Event::Init);
        maps.apply_watcher_event(&Event::InitApply(vars));
        assert_eq!(
            value(reader.cached(|c| &c.config_maps, "apps", "vars")),
            None,
            "not listed yet: read instead"
        );
        maps.apply_watcher_event(&Event::InitDone);
        listed.store(true, Ordering::Release);
        assert_eq!(
            value(reader.cached(|c| &c.config_maps, "apps", "vars")),
            Some(Some("one".into()))
        );
        maps.apply_watcher_event(&Event::Apply(config_map("apps", "vars", "two")));
        assert_eq!(
            value(reader.cached(|c| &c.config_maps, "apps", "vars")),
            Some(Some("two".into())),
            "a change the watch brought"
        );
        assert_eq!(
            value(reader.cached(|c| &c.config_maps, "apps", "absent")),
            Some(None),
            "the listed cache knows what does not exist"
        );
        assert_eq!(
            value(reader.cached(|c| &c.config_maps, "other", "vars")),
            None,
            "a namespace the cache does not watch is read"
        );
        assert!(
            ConfigReader::direct(unused_client())
                .cached(|c| &c.secrets, "apps", "vars")
                .is_none(),
            "without the gate nothing is cached"
        );
    }
}
