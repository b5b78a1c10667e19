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

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::runtime_metrics::{CONTROLLER, QUEUE_BUCKETS};

/// controller-runtime's priority of an item the initial list queued.
const LISTED_PRIORITY: i32 = -100;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Waiting {
    ready_at: Instant,
    priority: i32,
}

/// The keys the runtime holds, and since when each may run.
#[derive(Debug, Default)]
pub struct Shadow {
    waiting: HashMap<String, Waiting>,
    /// Keys of the initial listing not yet queued.
    listed: HashSet<String>,
}

impl Shadow {
    /// The initial listing saw `key`: its first add has the listing's priority.
    pub fn listed(&mut self, key: &str) {
        self.listed.insert(key.to_string());
    }

    /// `key` may run from `ready_at`. Whether that was a new item (an add).
    pub fn add(&mut self, key: &str, ready_at: Instant) -> bool {
        let priority = if self.listed.remove(key) {
            LISTED_PRIORITY
        } else {
            0
        };
        match self.waiting.get_mut(key) {
            Some(waiting) => {
                waiting.ready_at = waiting.ready_at.min(ready_at);
                false
            }
            None => {
                self.waiting
                    .insert(key.to_string(), Waiting { ready_at, priority });
                true
            }
        }
    }

    /// A reconciliation of `key` starts at `now`: how long it waited since it could run, if
    /// it was queued here.
    pub fn take(&mut self, key: &str, now: Instant) -> Option<Duration> {
        self.waiting
            .remove(key)
            .map(|waiting| now.saturating_duration_since(waiting.ready_at))
    }

    /// A deleted object is not reconciled again.
    pub fn forget(&mut self, key: &str) {
        self.waiting.remove(key);
        self.listed.remove(key);
    }

    /// Items that may run at `now` and have not started, by priority.
    pub fn depth(&self, now: Instant) -> Vec<(i32, i64)> {
        let mut by_priority: Vec<(i32, i64)> = Vec::new();
        for waiting in self.waiting.values().filter(|w| w.ready_at <= now) {
            match by_priority.iter_mut().find(|(p, _)| *p == waiting.priority) {
                Some((_, count)) => *count += 1,
                None => by_priority.push((waiting.priority, 1)),
            }
        }
        by_priority.sort_unstable();
        by_priority
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabels {
    controller: String,
    name: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DepthLabels {
    controller: String,
    name: String,
    priority: String,
}

fn queue() -> QueueLabels {
    QueueLabels {
        controller: CONTROLLER.into(),
        name: CONTROLLER.into(),
    }
}

/// The shadow queue and the series it feeds.
#[derive(Clone, Debug)]
pub struct WorkQueue {
    shadow: Arc<Mutex<Shadow>>,
    adds: Family<QueueLabels, Counter>,
    waited: Family<QueueLabels, Histogram>,
}

impl WorkQueue {
    pub fn register(registry: &mut Registry) -> WorkQueue {
        let queue = WorkQueue {
            shadow: Arc::default(),
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
        registry.register_collector(Box::new(DepthCollector(queue.shadow.clone())));
        queue
    }

    fn with<T>(&self, f: impl FnOnce(&mut Shadow) -> T) -> T {
        f(&mut self.shadow.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The initial listing saw `key`.
    pub fn listed(&self, key: &str) {
        self.with(|shadow| shadow.listed(key));
    }

    /// `key` is asked for now.
    pub fn add(&self, key: &str) {
        self.add_after(key, Duration::ZERO);
    }

    /// `key` is asked for after `delay` (a requeue or a back-off).
    pub fn add_after(&self, key: &str, delay: Duration) {
        if self.with(|shadow| shadow.add(key, Instant::now() + delay)) {
            self.adds.get_or_create(&queue()).inc();
        }
    }

    /// A reconciliation of `key` starts. One the shadow did not see queued (a trigger of the
    /// runtime's own) counts as an add that did not wait.
    pub fn take(&self, key: &str) {
        let waited = self.with(|shadow| shadow.take(key, Instant::now()));
        if waited.is_none() {
            self.adds.get_or_create(&queue()).inc();
        }
        self.waited
            .get_or_create(&queue())
            .observe(waited.unwrap_or_default().as_secs_f64());
    }

    pub fn forget(&self, key: &str) {
        self.with(|shadow| shadow.forget(key));
    }
}

/// `workqueue_depth{priority}`, counted when scraped.
#[derive(Debug)]
struct DepthCollector(Arc<Mutex<Shadow>>);

impl Collector for DepthCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let depth = self
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .depth(Instant::now());
        let gauge = ConstGauge::new(0i64);
        let mut family = encoder.encode_descriptor(
            "workqueue_depth",
            &super::exposition::collector_help(
                "Current depth of workqueue by workqueue and priority",
            ),
            None,
            gauge.metric_type(),
        )?;
        // An empty queue still says so, at the default priority.
        let depth = if depth.is_empty() {
            vec![(0, 0)]
        } else {
            depth
        };
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

    #[test]
    fn a_key_waits_once_from_the_earliest_time_it_was_asked_for() {
        let start = Instant::now();
        let mut shadow = Shadow::default();
        assert!(shadow.add("apps/web", start + Duration::from_secs(600)));
        assert_eq!(shadow.depth(start), vec![], "a requeue is not ready yet");
        assert!(
            !shadow.add("apps/web", start + Duration::from_secs(2)),
            "asked again: no new item"
        );
        assert_eq!(shadow.depth(start + Duration::from_secs(3)), vec![(0, 1)]);
        assert_eq!(
            shadow.take("apps/web", start + Duration::from_secs(5)),
            Some(Duration::from_secs(3))
        );
        assert_eq!(shadow.depth(start + Duration::from_secs(5)), vec![]);
        assert_eq!(shadow.take("apps/web", start), None, "taken once");
    }

    #[test]
    fn the_initial_listing_queues_at_low_priority() {
        let start = Instant::now();
        let mut shadow = Shadow::default();
        shadow.listed("apps/web");
        shadow.add("apps/web", start);
        shadow.add("apps/db", start);
        assert_eq!(shadow.depth(start), vec![(-100, 1), (0, 1)]);
        shadow.take("apps/web", start);
        shadow.add("apps/web", start);
        assert_eq!(
            shadow.depth(start),
            vec![(0, 2)],
            "later adds are at the default priority"
        );
    }

    #[test]
    fn a_deleted_object_leaves_the_queue() {
        let start = Instant::now();
        let mut shadow = Shadow::default();
        shadow.add("apps/web", start);
        shadow.forget("apps/web");
        assert_eq!(shadow.depth(start), vec![]);
    }
}
