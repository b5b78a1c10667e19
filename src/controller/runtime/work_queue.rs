//! controller-runtime's work-queue view of the reconciler, for `workqueue_adds_total`,
//! `workqueue_depth{priority}` and `workqueue_queue_duration_seconds`. kube-runtime keeps
//! its scheduler to itself, so this is a shadow of it fed by the same triggers: every
//! request the controller hands the runtime (a watch event that passes the predicates, a
//! source or dependency that names dependents, a requeue after a delay or a back-off) is
//! added here, and a reconciliation taking the key off ends its wait. As the runtime's
//! scheduler, a key waits once however often it is asked for, from the earliest time asked.
//!
//! Priorities are controller-runtime's: `-100` for what the initial listing queued, `0` for
//! the rest. [`Shadow`] is the pure queue; [`WorkQueue`] puts it behind a lock with the
//! counters and serves the depth when scraped.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::controller::KustomizationKey;
use crate::controller::runtime_metrics::{CONTROLLER, QUEUE_BUCKETS};

/// controller-runtime's priority of an item the initial list queued.
const LISTED_PRIORITY: i32 = -100;
/// controller-runtime's priority of every other request.
pub const DEFAULT_PRIORITY: i32 = 0;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Waiting {
    ready_at: Instant,
    priority: i32,
}

/// The keys the runtime holds, and since when each may run.
#[derive(Debug, Default)]
pub struct Shadow {
    waiting: HashMap<KustomizationKey, Waiting>,
    /// Keys of the initial listing not yet queued.
    listed: HashSet<KustomizationKey>,
    /// The initial listing is over: later listings (after a watch gap) queue what changed at
    /// the default priority.
    listing_done: bool,
    /// Every priority an item had, so that the depth of each is told, 0 when it is empty.
    priorities: BTreeSet<i32>,
}

impl Shadow {
    /// The initial listing saw `key`: its first add has the listing's priority.
    pub fn listed(&mut self, key: &KustomizationKey) {
        if !self.listing_done {
            self.listed.insert(key.clone());
        }
    }

    /// The initial listing is over; what it saw and did not queue is forgotten.
    pub fn listing_done(&mut self) {
        self.listing_done = true;
        self.listed.clear();
    }

    /// `key` may run from `ready_at`, at `priority` (the listing's, if it saw `key` first).
    /// An item asked for again keeps the earliest time and the higher priority, as
    /// controller-runtime's priority queue does. Whether that was a new item (an add).
    pub fn add(&mut self, key: &KustomizationKey, ready_at: Instant, priority: i32) -> bool {
        let priority = if self.listed.remove(key) {
            LISTED_PRIORITY
        } else {
            priority
        };
        self.priorities.insert(priority);
        match self.waiting.get_mut(key) {
            Some(waiting) => {
                waiting.ready_at = waiting.ready_at.min(ready_at);
                waiting.priority = waiting.priority.max(priority);
                false
            }
            None => {
                self.waiting
                    .insert(key.clone(), Waiting { ready_at, priority });
                true
            }
        }
    }

    /// A reconciliation of `key` starts at `now`: how long it waited since it could run and
    /// at which priority, if it was queued here.
    pub fn take(&mut self, key: &KustomizationKey, now: Instant) -> Option<(Duration, i32)> {
        self.waiting.remove(key).map(|waiting| {
            (
                now.saturating_duration_since(waiting.ready_at),
                waiting.priority,
            )
        })
    }

    /// A deleted object is not reconciled again.
    pub fn forget(&mut self, key: &KustomizationKey) {
        self.waiting.remove(key);
        self.listed.remove(key);
    }

    /// Keeps only the keys `exists` still finds: the runtime reconciles nothing for an object
    /// that is gone (deleted in a watch gap, say), so its requests never start.
    pub fn retain(&mut self, exists: impl Fn(&KustomizationKey) -> bool) {
        self.waiting.retain(|key, _| exists(key));
    }

    /// Items that may run at `now` and have not started, for every priority seen.
    pub fn depth(&self, now: Instant) -> Vec<(i32, i64)> {
        let mut by_priority: Vec<(i32, i64)> = self.priorities.iter().map(|p| (*p, 0)).collect();
        for waiting in self.waiting.values().filter(|w| w.ready_at <= now) {
            if let Some((_, count)) = by_priority
                .iter_mut()
                .find(|(priority, _)| *priority == waiting.priority)
            {
                *count += 1;
            }
        }
        by_priority
    }
}

/// The labels of controller-runtime's work-queue series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct QueueLabels {
    controller: String,
    name: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DepthLabels {
    controller: String,
    name: String,
    priority: String,
}

pub(super) fn queue() -> QueueLabels {
    QueueLabels {
        controller: CONTROLLER.into(),
        name: CONTROLLER.into(),
    }
}

/// The controller's watch of Kustomizations: what the runtime can still reconcile.
type Kustomizations = kube::runtime::reflector::Store<crate::api::Kustomization>;

/// The shadow queue and the series it feeds.
#[derive(Clone, Debug)]
pub struct WorkQueue {
    shadow: Arc<Mutex<Shadow>>,
    /// Set once the controller watches; requests for objects it does not hold are not queued.
    watched: Arc<OnceLock<Kustomizations>>,
    adds: Family<QueueLabels, Counter>,
    waited: Family<QueueLabels, Histogram>,
}

fn exists(watched: &OnceLock<Kustomizations>, key: &KustomizationKey) -> bool {
    let Some(store) = watched.get() else {
        return true;
    };
    store.get(&key.object_ref()).is_some()
}

impl WorkQueue {
    pub fn register(registry: &mut Registry) -> WorkQueue {
        let queue = WorkQueue {
            shadow: Arc::default(),
            watched: Arc::default(),
            adds: Family::default(),
            waited: Family::new_with_constructor(|| Histogram::new(QUEUE_BUCKETS)),
        };
        registry.register(
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            queue.adds.clone(),
        );
        registry.register(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            queue.waited.clone(),
        );
        registry.register_collector(Box::new(DepthCollector {
            shadow: queue.shadow.clone(),
            watched: queue.watched.clone(),
        }));
        queue
    }

    /// The controller's watch of Kustomizations, once it runs.
    pub fn watching(&self, store: Kustomizations) {
        let _ = self.watched.set(store);
    }

    fn with<T>(&self, f: impl FnOnce(&mut Shadow) -> T) -> T {
        f(&mut self.shadow.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The initial listing saw `key`.
    pub fn listed(&self, key: &KustomizationKey) {
        self.with(|shadow| shadow.listed(key));
    }

    /// The initial listing (or a later one) is over.
    pub fn listing_done(&self) {
        self.with(Shadow::listing_done);
    }

    /// `key` is asked for now.
    pub fn add(&self, key: &KustomizationKey) {
        self.add_after(key, Duration::ZERO, DEFAULT_PRIORITY);
    }

    /// `key` is asked for after `delay` (a requeue or a back-off), at `priority`.
    pub fn add_after(&self, key: &KustomizationKey, delay: Duration, priority: i32) {
        if !exists(&self.watched, key) {
            return;
        }
        if self.with(|shadow| shadow.add(key, Instant::now() + delay, priority)) {
            self.adds.get_or_create(&queue()).inc();
        }
    }

    /// A reconciliation of `key` starts: the priority it was queued at. One the shadow did
    /// not see queued (a trigger of the runtime's own) counts as an add that did not wait.
    pub fn take(&self, key: &KustomizationKey) -> i32 {
        let taken = self.with(|shadow| shadow.take(key, Instant::now()));
        if taken.is_none() {
            self.adds.get_or_create(&queue()).inc();
        }
        let (waited, priority) = taken.unwrap_or((Duration::ZERO, DEFAULT_PRIORITY));
        self.waited
            .get_or_create(&queue())
            .observe(waited.as_secs_f64());
        priority
    }

    pub fn forget(&self, key: &KustomizationKey) {
        self.with(|shadow| shadow.forget(key));
    }
}

/// `workqueue_depth{priority}`, counted when scraped.
#[derive(Debug)]
struct DepthCollector {
    shadow: Arc<Mutex<Shadow>>,
    watched: Arc<OnceLock<Kustomizations>>,
}

impl Collector for DepthCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let depth = {
            let mut shadow = self.shadow.lock().unwrap_or_else(|e| e.into_inner());
            shadow.retain(|key| exists(&self.watched, key));
            shadow.depth(Instant::now())
        };
        // As client_golang: a family without series is not written.
        if depth.is_empty() {
            return Ok(());
        }
        let gauge = ConstGauge::new(0i64);
        let mut family = encoder.encode_descriptor(
            "workqueue_depth",
            &crate::controller::exposition::collector_help(
                "Current depth of workqueue by workqueue and priority",
            ),
            None,
            gauge.metric_type(),
        )?;
        for (priority, count) in depth {
            let labels = DepthLabels {
                controller: CONTROLLER.into(),
                name: CONTROLLER.into(),
                priority: priority.to_string(),
            };
            ConstGauge::new(count).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> KustomizationKey {
        KustomizationKey::new("apps", name)
    }

    #[test]
    fn a_key_waits_once_from_the_earliest_time_it_was_asked_for() {
        let start = Instant::now();
        let mut shadow = Shadow::default();
        assert!(shadow.add(&key("web"), start + Duration::from_secs(600), 0));
        assert_eq!(
            shadow.depth(start),
            vec![(0, 0)],
            "a requeue is not ready yet"
        );
        assert!(
            !shadow.add(&key("web"), start + Duration::from_secs(2), 0),
            "asked again: no new item"
        );
        assert_eq!(shadow.depth(start + Duration::from_secs(3)), vec![(0, 1)]);
        assert_eq!(
            shadow.take(&key("web"), start + Duration::from_secs(5)),
            Some((Duration::from_secs(3), 0))
        );
        assert_eq!(shadow.depth(start + Duration::from_secs(5)), vec![(0, 0)]);
        assert_eq!(shadow.take(&key("web"), start), None, "taken once");
    }

    #[test]
    fn the_initial_listing_queues_at_low_priority_and_requeues_keep_it() {
        let start = Instant::now();
        let mut shadow = Shadow::default();
        assert_eq!(
            shadow.depth(start),
            vec![],
            "no series before the first add"
        );
        shadow.listed(&key("web"));
        shadow.add(&key("web"), start, 0);
        shadow.add(&key("db"), start, 0);
        assert_eq!(shadow.depth(start), vec![(-100, 1), (0, 1)]);
        let (_, priority) = shadow.take(&key("web"), start).unwrap();
        assert_eq!(priority, -100);
        shadow.add(&key("web"), start, priority);
        assert_eq!(
            shadow.depth(start),
            vec![(-100, 1), (0, 1)],
            "a requeue keeps it"
        );
        shadow.add(&key("web"), start, 0);
        assert_eq!(
            shadow.depth(start),
            vec![(-100, 0), (0, 2)],
            "asked for at a higher priority, it is raised"
        );
    }

    #[test]
    fn later_listings_queue_at_the_default_priority() {
        let start = Instant::now();
        let mut shadow = Shadow::default();
        shadow.listed(&key("unchanged"));
        shadow.listing_done();
        shadow.listed(&key("web"));
        shadow.add(&key("web"), start, 0);
        shadow.add(&key("unchanged"), start, 0);
        assert_eq!(shadow.depth(start), vec![(0, 2)]);
    }

    #[test]
    fn what_is_gone_leaves_the_queue() {
        let start = Instant::now();
        let mut shadow = Shadow::default();
        shadow.add(&key("web"), start, 0);
        shadow.add(&key("db"), start, 0);
        shadow.forget(&key("web"));
        shadow.retain(|queued| queued != &key("db"));
        assert_eq!(shadow.depth(start), vec![(0, 0)]);
    }
}
