//! The token cache (fluxcd/pkg `cache`, `--token-cache-max-size`, `--token-cache-max-duration`):
//! credentials a cloud or Kubernetes issued, kept across reconciles so that a fleet does not
//! ask the cloud once per Kustomization and reconcile. An entry lives 80% of its token's
//! lifetime, never longer than the maximum duration (at most an hour); credentials without a
//! lifetime (static keys) are not kept. Beyond the maximum size the least recently used
//! entry goes. Keys are Flux's: the SHA-256 of the identity's parts, one `name=value` a line.
//! Fetches run outside the cache's lock (Flux holds it): two reconciliations asking for one
//! identity at the same moment may both fetch it, and a fetch never holds up a lookup.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use sha2::{Digest, Sha256};

use super::AuthError;
use super::aws::AwsCredentials;

/// The longest an entry is kept, whatever the flag says.
pub const MAX_DURATION: Duration = Duration::from_secs(3600);

/// What is kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cached {
    Aws(AwsCredentials),
    Bearer(String),
    /// How a remote cluster is reached: its address, CA bundle and bearer token.
    Cluster(ClusterAccess),
}

impl Cached {
    /// The bearer token kept, or why what is kept under its key is not one.
    pub fn bearer(self) -> Result<String, AuthError> {
        match self {
            Cached::Bearer(token) => Ok(token),
            _ => Err(AuthError::Invalid(
                "the token cache holds another kind of credential under this key".into(),
            )),
        }
    }

    pub fn aws(self) -> Result<AwsCredentials, AuthError> {
        match self {
            Cached::Aws(credentials) => Ok(credentials),
            _ => Err(AuthError::Invalid(
                "the token cache holds another kind of credential under this key".into(),
            )),
        }
    }
}

/// A remote cluster's address, CA bundle (PEM) and bearer token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterAccess {
    pub host: String,
    pub ca_pem: Option<String>,
    pub token: String,
}

/// A fetched credential and how long its issuer says it lives.
pub type Fetched = (Cached, Option<Duration>);

/// The object a cache request is made for, as the events metric labels it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct Involved {
    pub kind: String,
    pub name: String,
    pub namespace: String,
    /// `decrypt_with_aws`, `decrypt_with_azure`, `decrypt_with_gcp`, `fetch_kubeconfig`.
    pub operation: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct EventLabels {
    event_type: &'static str,
    kind: String,
    name: String,
    namespace: String,
    operation: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct StatusLabels {
    status: &'static str,
}

/// The `gotk_token_*` families, registered by the controller's metrics.
#[derive(Clone, Default)]
pub struct CacheMetrics {
    events: Family<EventLabels, Counter>,
    requests: Family<StatusLabels, Counter>,
    evictions: Counter,
    items: Gauge,
}

impl CacheMetrics {
    pub fn register(&self, registry: &mut prometheus_client::registry::Registry) {
        registry.register(
            "gotk_token_cache_events",
            "Total number of cache retrieval events for a Gitops Toolkit resource reconciliation.",
            self.events.clone(),
        );
        registry.register(
            "gotk_token_cache_requests",
            "Total number of cache requests partioned by success or failure.",
            self.requests.clone(),
        );
        registry.register(
            "gotk_token_cache_evictions",
            "Total number of cache evictions.",
            self.evictions.clone(),
        );
        registry.register(
            "gotk_token_cached_items",
            "Total number of items in the cache.",
            self.items.clone(),
        );
    }
}

struct Entry {
    value: Cached,
    expires: Instant,
    used: u64,
}

impl std::fmt::Debug for TokenCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenCache")
            .field("max_size", &self.max_size)
            .field("max_duration", &self.max_duration)
            .finish_non_exhaustive()
    }
}

/// Flux's token cache. `None` from [`TokenCache::new`] when the size is 0 (disabled).
pub struct TokenCache {
    max_size: usize,
    max_duration: Duration,
    entries: Mutex<(u64, HashMap<String, Entry>)>,
    metrics: CacheMetrics,
}

impl TokenCache {
    pub fn new(
        max_size: usize,
        max_duration: Duration,
        metrics: CacheMetrics,
    ) -> Option<TokenCache> {
        (max_size > 0).then(|| TokenCache {
            max_size,
            max_duration: max_duration.min(MAX_DURATION),
            entries: Mutex::new((0, HashMap::new())),
            metrics,
        })
    }

    /// The credential kept under `key`, else what `fetch` gets (kept when it lives). The
    /// fetch runs without the cache's lock: it may wait on the async runtime (a
    /// TokenRequest run from a build's thread), whose only worker may itself be waiting
    /// for this lock to look an entry up.
    pub fn get_or_fetch<E>(
        &self,
        key: &str,
        involved: Option<&Involved>,
        fetch: impl FnOnce() -> Result<Fetched, E>,
    ) -> Result<Cached, E> {
        if let Some(value) = self.lookup(key, involved) {
            return Ok(value);
        }
        match fetch() {
            Ok(fetched) => {
                self.store(key, Some(&fetched));
                Ok(fetched.0)
            }
            Err(error) => {
                self.store(key, None);
                Err(error)
            }
        }
    }

    /// The credential kept under `key`, for callers that fetch without holding the cache
    /// (an asynchronous fetch); a miss is then followed by [`TokenCache::store`].
    pub fn lookup(&self, key: &str, involved: Option<&Involved>) -> Option<Cached> {
        let mut guard = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let (clock, entries) = &mut *guard;
        self.find(clock, entries, key, involved)
    }

    /// A live entry's value (an expired one goes), counted as a hit or a miss.
    fn find(
        &self,
        clock: &mut u64,
        entries: &mut HashMap<String, Entry>,
        key: &str,
        involved: Option<&Involved>,
    ) -> Option<Cached> {
        *clock += 1;
        let hit = match entries.get_mut(key) {
            Some(entry) if entry.expires > Instant::now() => {
                entry.used = *clock;
                Some(entry.value.clone())
            }
            Some(_) => {
                entries.remove(key);
                None
            }
            None => None,
        };
        let event = if hit.is_some() {
            "cache_hit"
        } else {
            "cache_miss"
        };
        self.event(involved, event);
        if hit.is_some() {
            self.request("success");
        }
        self.metrics.items.set(entries.len() as i64);
        hit
    }

    /// Keeps what a fetch after a [`TokenCache::lookup`] miss got (a failure is counted).
    pub fn store(&self, key: &str, fetched: Option<&Fetched>) {
        let Some((value, lifetime)) = fetched else {
            self.request("failure");
            return;
        };
        self.request("success");
        let mut guard = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let (clock, entries) = &mut *guard;
        *clock += 1;
        let used = *clock;
        self.keep(entries, key, value.clone(), *lifetime, used);
    }

    fn keep(
        &self,
        entries: &mut HashMap<String, Entry>,
        key: &str,
        value: Cached,
        lifetime: Option<Duration>,
        used: u64,
    ) {
        let keep = kept_for(lifetime, self.max_duration);
        if !keep.is_zero() {
            if !entries.contains_key(key) && entries.len() >= self.max_size {
                let oldest = entries
                    .iter()
                    .min_by_key(|(_, entry)| entry.used)
                    .map(|(key, _)| key.clone());
                if let Some(oldest) = oldest {
                    entries.remove(&oldest);
                    self.metrics.evictions.inc();
                }
            }
            entries.insert(
                key.to_string(),
                Entry {
                    value,
                    expires: Instant::now() + keep,
                    used,
                },
            );
        }
        self.metrics.items.set(entries.len() as i64);
    }

    /// Drops the event series of a deleted object, as Flux's finalizer does.
    pub fn forget(&self, kind: &str, name: &str, namespace: &str) {
        for operation in OPERATIONS {
            for event_type in ["cache_hit", "cache_miss"] {
                self.metrics.events.remove(&EventLabels {
                    event_type,
                    kind: kind.to_string(),
                    name: name.to_string(),
                    namespace: namespace.to_string(),
                    operation: operation.to_string(),
                });
            }
        }
    }

    fn event(&self, involved: Option<&Involved>, event_type: &'static str) {
        if let Some(involved) = involved {
            self.metrics
                .events
                .get_or_create(&EventLabels {
                    event_type,
                    kind: involved.kind.clone(),
                    name: involved.name.clone(),
                    namespace: involved.namespace.clone(),
                    operation: involved.operation.clone(),
                })
                .inc();
        }
    }

    fn request(&self, status: &'static str) {
        self.metrics
            .requests
            .get_or_create(&StatusLabels { status })
            .inc();
    }
}

/// The operations Flux labels cache events with.
pub const OPERATIONS: [&str; 5] = [
    "fetch_kubeconfig",
    "decrypt_with_aws",
    "decrypt_with_azure",
    "decrypt_with_gcp",
    "decrypt_with_vault",
];

/// How long a credential that lives `lifetime` is kept: 80% of it, at most `max`; not at all
/// without a lifetime.
pub fn kept_for(lifetime: Option<Duration>, max: Duration) -> Duration {
    lifetime
        .map(|lifetime| (lifetime * 8 / 10).min(max))
        .unwrap_or_default()
}

/// Flux's cache key: the SHA-256 (hex) of the parts given, `name=value` one a line.
pub fn key(parts: &[(&str, &str)]) -> String {
    let text: Vec<String> = parts
        .iter()
        .filter(|(_, value)| !value.is_empty())
        .map(|(name, value)| format!("{name}={value}"))
        .collect();
    hex::encode(Sha256::digest(text.join("\n")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lookup_is_answered_while_a_fetch_runs() {
        let cache = std::sync::Arc::new(
            TokenCache::new(10, MAX_DURATION, CacheMetrics::default()).unwrap(),
        );
        let fetched = cache
            .get_or_fetch("a", None, || {
                // As a TokenRequest run on the runtime whose worker looks another entry up.
                let other = cache.clone();
                let (answered, answer) = std::sync::mpsc::channel();
                std::thread::spawn(move || {
                    let _ = answered.send(other.lookup("b", None));
                });
                let looked_up = answer.recv_timeout(Duration::from_secs(10)).is_ok();
                Ok::<_, AuthError>(bearer(&looked_up.to_string()))
            })
            .unwrap();
        assert_eq!(fetched, Cached::Bearer("true".into()));
    }

    fn bearer(text: &str) -> Fetched {
        (Cached::Bearer(text.into()), Some(Duration::from_secs(3600)))
    }

    #[test]
    fn entries_live_80_percent_of_their_token_at_most_the_maximum() {
        let hour = Duration::from_secs(3600);
        assert_eq!(kept_for(Some(hour), hour), Duration::from_secs(2880));
        assert_eq!(
            kept_for(Some(Duration::from_secs(900)), hour),
            Duration::from_secs(720),
            "an EKS token: 12 minutes"
        );
        assert_eq!(kept_for(Some(hour * 12), hour), hour);
        assert_eq!(
            kept_for(None, hour),
            Duration::ZERO,
            "static keys are not kept"
        );
    }

    #[test]
    fn a_kept_token_is_reused_and_the_least_recently_used_goes_first() {
        let metrics = CacheMetrics::default();
        let cache = TokenCache::new(2, Duration::from_secs(7200), metrics.clone()).unwrap();
        assert_eq!(cache.max_duration, MAX_DURATION, "capped at an hour");
        let involved = Involved {
            kind: "Kustomization".into(),
            name: "apps".into(),
            namespace: "flux-system".into(),
            operation: "decrypt_with_aws".into(),
        };
        let mut fetches = 0;
        let mut get = |key: &str, value: &str| {
            cache
                .get_or_fetch(key, Some(&involved), || {
                    fetches += 1;
                    Ok::<_, AuthError>(bearer(value))
                })
                .unwrap()
        };
        assert_eq!(get("a", "1"), Cached::Bearer("1".into()));
        assert_eq!(get("a", "2"), Cached::Bearer("1".into()), "kept");
        get("b", "3");
        get("a", "4");
        get("c", "5");
        assert_eq!(
            get("b", "6"),
            Cached::Bearer("6".into()),
            "b was the least recently used"
        );
        assert_eq!(fetches, 4);
        assert_eq!(metrics.evictions.get(), 2);
        assert_eq!(metrics.items.get(), 2);
        let uncached = cache
            .get_or_fetch("static", None, || {
                Ok::<_, AuthError>((Cached::Bearer("s".into()), None))
            })
            .unwrap();
        assert_eq!(uncached, Cached::Bearer("s".into()));
        assert_eq!(
            metrics.items.get(),
            2,
            "a credential without a lifetime is not kept"
        );
        assert!(
            cache
                .get_or_fetch("x", None, || Err(AuthError::Invalid("denied".into())))
                .is_err()
        );
        assert!(TokenCache::new(0, MAX_DURATION, CacheMetrics::default()).is_none());
    }

    #[test]
    fn keys_are_flux_s() {
        assert_eq!(
            key(&[
                ("provider", "aws"),
                ("audiences", ""),
                ("stsRegion", "eu-west-1")
            ]),
            hex::encode(Sha256::digest("provider=aws\nstsRegion=eu-west-1"))
        );
    }
}
