//! What becomes of an Event before it is written, decided as client-go's `EventCorrelator`
//! decides it for Flux (controller-runtime's manager makes Flux's recorder with
//! `record.NewBroadcaster()`, whose correlator has the defaults below).
//!
//! Three steps, in client-go's order, over plain data and a clock reading:
//! 1. Aggregation: once an object has had [`AGGREGATE_MAX_EVENTS`] Events of one type and
//!    reason with different messages, each no more than [`AGGREGATE_INTERVAL`] after the last,
//!    the next ones become one Event "(combined from similar events): <message>".
//! 2. Observation: an Event seen before (the same object, type, reason and message, or the
//!    same combined Event) is a patch of the earlier one's count, not a new Event.
//! 3. The spam filter: each object may have [`SPAM_BURST`] Events of a type at once, then one
//!    more every [`SPAM_REFILL`]; the rest are not written (they are still forwarded to
//!    notification-controller, as Flux's recorder forwards them).
//!
//! Each step remembers at most a bounded number of keys, forgetting the least recently used,
//! as client-go's LRU caches do. Keys are 64-bit digests of what client-go joins into
//! strings: a fleet's Events cost a few words each.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::{Duration, Instant};

/// client-go's `defaultAggregateMaxEvents`: distinct messages before Events are combined.
pub const AGGREGATE_MAX_EVENTS: usize = 10;
/// client-go's `defaultAggregateIntervalInSeconds`.
pub const AGGREGATE_INTERVAL: Duration = Duration::from_secs(600);
/// client-go's `defaultSpamBurst`.
pub const SPAM_BURST: f64 = 25.0;
/// client-go's `defaultSpamQPS` is one Event per 300 s.
pub const SPAM_REFILL: Duration = Duration::from_secs(300);
/// The prefix of a combined Event's message (`EventAggregatorByReasonMessageFunc`).
pub const COMBINED_PREFIX: &str = "(combined from similar events): ";

/// The parts of an Event that the correlator's keys are made of (the recorder's component,
/// host and the involved object's kind and apiVersion are the same for all of ours).
#[derive(Clone, Copy, Debug)]
pub struct EventFacts<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub uid: &'a str,
    pub event_type: &'a str,
    pub reason: &'a str,
    pub message: &'a str,
}

/// What to write for an Event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Correlated {
    /// Dropped by the spam filter.
    Skip,
    /// A new Event: the one recorded, or (`combined`) the combined one.
    Create { combined: bool },
    /// Patch the Event `name` to `count`, with this message (combined or not); first written
    /// at `first_timestamp` (what recreates it, should it be gone).
    Patch {
        name: String,
        count: i32,
        first_timestamp: String,
        combined: bool,
    },
}

/// A token bucket as `golang.org/x/time/rate` keeps one: full at first.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn try_accept(&mut self, now: Instant, burst: f64) -> bool {
        let refilled =
            now.saturating_duration_since(self.at).as_secs_f64() / SPAM_REFILL.as_secs_f64();
        self.tokens = (self.tokens + refilled).min(burst);
        self.at = now.max(self.at);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// The distinct messages of one object's Events of a type and reason, and when the last came.
#[derive(Clone, Debug)]
struct Aggregate {
    messages: Vec<u64>,
    last: Instant,
}

/// An Event written before: its name, count and first timestamp.
#[derive(Clone, Debug)]
struct Observed {
    name: String,
    count: i32,
    first_timestamp: String,
}

/// A map that forgets its least recently used half when it reaches its capacity.
#[derive(Debug)]
struct Bounded<V> {
    entries: HashMap<u64, (V, u64)>,
    capacity: usize,
    tick: u64,
}

impl<V> Bounded<V> {
    fn new(capacity: usize) -> Bounded<V> {
        Bounded {
            entries: HashMap::new(),
            capacity: capacity.max(1),
            tick: 0,
        }
    }

    fn get_mut(&mut self, key: u64) -> Option<&mut V> {
        self.tick += 1;
        let tick = self.tick;
        self.entries.get_mut(&key).map(|(value, used)| {
            *used = tick;
            value
        })
    }

    fn insert(&mut self, key: u64, value: V) {
        self.make_room_for(key);
        self.tick += 1;
        self.entries.insert(key, (value, self.tick));
    }

    /// The value under `key`, made first if there is none.
    fn get_or_insert_with(&mut self, key: u64, make: impl FnOnce() -> V) -> &mut V {
        self.make_room_for(key);
        self.tick += 1;
        let tick = self.tick;
        let (value, used) = self.entries.entry(key).or_insert_with(|| (make(), tick));
        *used = tick;
        value
    }

    /// Forgets the least recently used half when a new `key` would pass the capacity.
    fn make_room_for(&mut self, key: u64) {
        if self.entries.len() >= self.capacity && !self.entries.contains_key(&key) {
            let keep = self.capacity / 2;
            let mut uses: Vec<u64> = self.entries.values().map(|(_, used)| *used).collect();
            let cut = uses.len() - keep;
            let oldest_kept = if keep == 0 {
                u64::MAX
            } else {
                *uses.select_nth_unstable(cut).1
            };
            self.entries.retain(|_, (_, used)| *used >= oldest_kept);
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }
}

/// The keys client-go joins into strings for an Event: its object and type (the spam
/// filter's), with its reason (the aggregator's), with its message too (the observer's).
struct Keys {
    object: u64,
    aggregate: u64,
    event: u64,
}

impl Keys {
    fn of(event: &EventFacts<'_>) -> Keys {
        let EventFacts {
            namespace,
            name,
            uid,
            event_type,
            reason,
            message,
        } = *event;
        Keys {
            object: digest(&[namespace, name, uid, event_type]),
            aggregate: digest(&[namespace, name, uid, event_type, reason]),
            event: digest(&[namespace, name, uid, event_type, reason, message]),
        }
    }

    /// What a written Event is observed under: a combined one under its aggregate's key.
    fn observed(&self, combined: bool) -> u64 {
        if combined { self.aggregate } else { self.event }
    }
}

fn digest(parts: &[&str]) -> u64 {
    let mut hasher = DefaultHasher::new();
    parts.hash(&mut hasher);
    hasher.finish()
}

/// client-go's `EventCorrelator`, for the Events of the objects one writer writes.
#[derive(Debug)]
pub struct Correlator {
    /// The spam filter's burst ([`SPAM_BURST`]).
    burst: f64,
    spam: Bounded<Bucket>,
    aggregates: Bounded<Aggregate>,
    observed: Bounded<Observed>,
}

impl Correlator {
    /// A correlator remembering at most `capacity` keys in each step (client-go: 4,096).
    pub fn new(capacity: usize) -> Correlator {
        Correlator {
            burst: SPAM_BURST,
            spam: Bounded::new(capacity),
            aggregates: Bounded::new(capacity),
            observed: Bounded::new(capacity),
        }
    }

    /// Decides what to write for an Event recorded at `now`. What it observes is
    /// remembered even when the spam filter then drops the Event, as in client-go.
    pub fn correlate(&mut self, event: &EventFacts<'_>, now: Instant) -> Correlated {
        let keys = Keys::of(event);
        let combined = self.aggregate(keys.aggregate, digest(&[event.message]), now);
        let observed_key = keys.observed(combined);
        let decision = match self.observed.get_mut(observed_key) {
            Some(observed) => {
                observed.count += 1;
                Correlated::Patch {
                    name: observed.name.clone(),
                    count: observed.count,
                    first_timestamp: observed.first_timestamp.clone(),
                    combined,
                }
            }
            None => Correlated::Create { combined },
        };
        if !self.accept(keys.object, now) {
            return Correlated::Skip;
        }
        decision
    }

    /// Remembers what the server answered for a written Event (`UpdateState`): its name,
    /// count and first timestamp, under the key it was correlated by.
    pub fn written(
        &mut self,
        event: &EventFacts<'_>,
        combined: bool,
        name: &str,
        count: i32,
        first_timestamp: &str,
    ) {
        self.observed.insert(
            Keys::of(event).observed(combined),
            Observed {
                name: name.to_string(),
                count,
                first_timestamp: first_timestamp.to_string(),
            },
        );
    }

    /// Whether the Event is combined (`EventAggregate`): its message joins the aggregate's
    /// distinct messages, and once they number [`AGGREGATE_MAX_EVENTS`] one is let go.
    fn aggregate(&mut self, key: u64, message: u64, now: Instant) -> bool {
        let aggregate = self.aggregates.get_or_insert_with(key, || Aggregate {
            messages: Vec::new(),
            last: now,
        });
        if now.saturating_duration_since(aggregate.last) > AGGREGATE_INTERVAL {
            aggregate.messages.clear();
        }
        if !aggregate.messages.contains(&message) {
            aggregate.messages.push(message);
        }
        aggregate.last = now;
        let combined = aggregate.messages.len() >= AGGREGATE_MAX_EVENTS;
        if combined {
            // client-go pops any one; the set stays one short of the threshold.
            aggregate.messages.remove(0);
        }
        combined
    }

    /// The spam filter's verdict (`EventSourceObjectSpamFilter.Filter`): a bucket per
    /// object and type, full at first.
    fn accept(&mut self, key: u64, now: Instant) -> bool {
        let burst = self.burst;
        self.spam
            .get_or_insert_with(key, || Bucket {
                tokens: burst,
                at: now,
            })
            .try_accept(now, burst)
    }

    /// How many keys each step remembers.
    #[cfg(test)]
    fn sizes(&self) -> (usize, usize, usize) {
        (self.spam.len(), self.aggregates.len(), self.observed.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts<'a>(reason: &'a str, message: &'a str) -> EventFacts<'a> {
        EventFacts {
            namespace: "apps",
            name: "podinfo",
            uid: "u-1",
            event_type: "Normal",
            reason,
            message,
        }
    }

    /// Correlates and, unless skipped, records the write as the writer would.
    fn record(
        correlator: &mut Correlator,
        event: &EventFacts<'_>,
        now: Instant,
        next_name: &mut u32,
    ) -> Correlated {
        let decided = correlator.correlate(event, now);
        match &decided {
            Correlated::Skip => {}
            Correlated::Create { combined } => {
                *next_name += 1;
                correlator.written(event, *combined, &format!("e{next_name}"), 1, "t0");
            }
            Correlated::Patch {
                name,
                count,
                first_timestamp,
                combined,
            } => correlator.written(event, *combined, name, *count, first_timestamp),
        }
        decided
    }

    /// Plays `prior` then `new` as client-go's tests do with their `SimpleIntervalClock`,
    /// which moves on by `interval` at each reading: three per Event (the test's, the
    /// aggregator's, the spam filter's). Each Event not skipped is written.
    fn played(
        correlator: &mut Correlator,
        prior: &[EventFacts<'_>],
        new: &EventFacts<'_>,
        interval: Duration,
    ) -> Correlated {
        let mut now = Instant::now();
        let mut names = 0;
        for event in prior {
            now += interval * 3;
            record(correlator, event, now, &mut names);
        }
        now += interval * 3;
        correlator.correlate(new, now)
    }

    /// client-go's TestEventCorrelator (tools/record/events_cache_test.go), its scenarios by
    /// name; "events-from-different-containers-do-not-aggregate" has no counterpart (a
    /// Kustomization's Events have no field path).
    #[test]
    fn client_gos_correlator_scenarios() {
        let object = |name: &'static str| EventFacts {
            namespace: "my-ns",
            name,
            uid: "C934D34AFB20242",
            event_type: "Normal",
            reason: "",
            message: "",
        };
        let with = |reason: &'static str, message: &'static str| EventFacts {
            reason,
            message,
            ..object("my-pod")
        };
        let first = with("first", "i am first");
        let duplicate = with("duplicate", "me again");
        let unique = with("unique", "snowflake");
        let similar = with("similar", "similar message");
        let similar_messages: Vec<String> = (0..AGGREGATE_MAX_EVENTS)
            .map(|i| format!("similar message-{i}-similar message"))
            .collect();
        let similar_prior = |n: usize| -> Vec<EventFacts<'_>> {
            similar_messages[..n]
                .iter()
                .map(|message| EventFacts { message, ..similar })
                .collect()
        };
        let unique_names: Vec<(String, String, String, String)> = (0..30)
            .map(|i| {
                (
                    format!("reason-{i}"),
                    format!("message-{i}"),
                    format!("pod-{i}"),
                    format!("ns-{i}"),
                )
            })
            .collect();
        let unique_prior: Vec<EventFacts<'_>> = unique_names
            .iter()
            .map(|(reason, message, name, namespace)| EventFacts {
                namespace,
                name,
                uid: "C934D34AFB20242",
                event_type: "Normal",
                reason,
                message,
            })
            .collect();
        let seconds = Duration::from_secs;
        let created = Correlated::Create { combined: false };
        let patched = |count: i32, combined: bool| Correlated::Patch {
            name: if combined { "e10" } else { "e1" }.into(),
            count,
            first_timestamp: "t0".into(),
            combined,
        };
        let scenarios: Vec<(
            &str,
            Vec<EventFacts<'_>>,
            EventFacts<'_>,
            Duration,
            Correlated,
        )> = vec![
            (
                "create-a-single-event",
                vec![],
                first,
                seconds(5),
                created.clone(),
            ),
            (
                "the-same-event-should-just-count",
                vec![duplicate],
                duplicate,
                seconds(5),
                patched(2, false),
            ),
            (
                "the-same-event-should-just-count-even-if-more-than-aggregate",
                vec![duplicate; AGGREGATE_MAX_EVENTS],
                duplicate,
                seconds(30),
                patched(11, false),
            ),
            (
                "the-same-event-is-spam-if-happens-too-frequently",
                vec![duplicate; SPAM_BURST as usize + 1],
                duplicate,
                seconds(1),
                Correlated::Skip,
            ),
            (
                "create-many-unique-events",
                unique_prior,
                unique,
                seconds(5),
                created.clone(),
            ),
            (
                "similar-events-should-aggregate-event",
                similar_prior(AGGREGATE_MAX_EVENTS - 1),
                similar,
                seconds(5),
                Correlated::Create { combined: true },
            ),
            (
                "similar-events-many-times-should-count-the-aggregate",
                similar_prior(AGGREGATE_MAX_EVENTS),
                similar,
                seconds(5),
                patched(2, true),
            ),
            (
                "similar-events-whose-interval-is-greater-than-aggregate-interval-do-not-aggregate",
                similar_prior(AGGREGATE_MAX_EVENTS - 1),
                similar,
                AGGREGATE_INTERVAL,
                created,
            ),
        ];
        for (scenario, prior, new, interval, expected) in scenarios {
            let mut correlator = Correlator::new(4096);
            assert_eq!(
                played(&mut correlator, &prior, &new, interval),
                expected,
                "{scenario}"
            );
        }
    }

    /// client-go's TestEventSpamFilter with its default key: with a burst of one, an Event of
    /// another reason about the same object a second later is spam.
    #[test]
    fn client_gos_spam_filter_keys_on_the_object_and_type_not_the_reason() {
        let mut correlator = Correlator::new(4096);
        correlator.burst = 1.0;
        let original = facts("original", "i am first");
        let different_reason = facts("duplicate", "me again");
        assert_eq!(
            played(
                &mut correlator,
                &[original],
                &different_reason,
                Duration::from_secs(1)
            ),
            Correlated::Skip
        );
    }

    #[test]
    fn a_repeated_event_patches_the_first_ones_count_however_late() {
        let mut correlator = Correlator::new(4096);
        let start = Instant::now();
        let mut names = 0;
        let event = facts("Progressing", "ConfigMap/apps/a configured");
        assert_eq!(
            record(&mut correlator, &event, start, &mut names),
            Correlated::Create { combined: false }
        );
        let hour = start + Duration::from_secs(3600);
        assert_eq!(
            record(&mut correlator, &event, hour, &mut names),
            Correlated::Patch {
                name: "e1".into(),
                count: 2,
                first_timestamp: "t0".into(),
                combined: false
            }
        );
        let other = facts("Progressing", "ConfigMap/apps/b configured");
        assert_eq!(
            record(&mut correlator, &other, hour, &mut names),
            Correlated::Create { combined: false }
        );
    }

    /// A Kustomization's "Reconciliation finished" Events every 90 s: the tenth distinct
    /// message of a reason within ten minutes of the one before starts a combined Event,
    /// which later ones count.
    #[test]
    fn ten_distinct_messages_of_a_reason_are_combined_into_one_event() {
        let mut correlator = Correlator::new(4096);
        let start = Instant::now();
        let mut names = 0;
        let mut decisions = Vec::new();
        for i in 0..12u64 {
            let message = format!("Reconciliation finished in {i}ms, next run in 90s");
            let at = start + Duration::from_secs(90 * i);
            decisions.push(record(
                &mut correlator,
                &facts("ReconciliationSucceeded", &message),
                at,
                &mut names,
            ));
        }
        assert!(
            decisions[..9]
                .iter()
                .all(|d| *d == Correlated::Create { combined: false }),
            "{decisions:?}"
        );
        assert_eq!(decisions[9], Correlated::Create { combined: true });
        assert_eq!(
            decisions[10],
            Correlated::Patch {
                name: "e10".into(),
                count: 2,
                first_timestamp: "t0".into(),
                combined: true
            }
        );
        assert_eq!(
            decisions[11],
            Correlated::Patch {
                name: "e10".into(),
                count: 3,
                first_timestamp: "t0".into(),
                combined: true
            }
        );
        // Another reason is aggregated apart.
        assert_eq!(
            record(
                &mut correlator,
                &facts("Progressing", "x"),
                start + Duration::from_secs(90 * 12),
                &mut names
            ),
            Correlated::Create { combined: false }
        );
    }

    #[test]
    fn a_pause_longer_than_the_aggregation_interval_starts_counting_anew() {
        let mut correlator = Correlator::new(4096);
        let start = Instant::now();
        let mut names = 0;
        for i in 0..9u64 {
            let message = format!("m{i}");
            let at = start + Duration::from_secs(60 * i);
            record(&mut correlator, &facts("R", &message), at, &mut names);
        }
        let late =
            start + Duration::from_secs(60 * 8) + AGGREGATE_INTERVAL + Duration::from_secs(1);
        assert_eq!(
            record(&mut correlator, &facts("R", "m9"), late, &mut names),
            Correlated::Create { combined: false },
            "the nine before were too long ago"
        );
    }

    /// client-go's TestEventSourceObjectSpamFilter: 25 Events of an object pass at once,
    /// then one every five minutes; another object, or the other type, has its own bucket.
    #[test]
    fn the_spam_filter_lets_25_through_then_one_every_five_minutes() {
        let mut correlator = Correlator::new(4096);
        let start = Instant::now();
        let mut names = 0;
        let passed = (0..30)
            .filter(|i| {
                let message = format!("same reason, message {}", i % 5);
                record(&mut correlator, &facts("R", &message), start, &mut names)
                    != Correlated::Skip
            })
            .count();
        assert_eq!(passed, 25);
        let soon = start + Duration::from_secs(299);
        assert_eq!(
            record(&mut correlator, &facts("R", "m"), soon, &mut names),
            Correlated::Skip
        );
        let refilled = start + SPAM_REFILL;
        assert_ne!(
            record(&mut correlator, &facts("R", "m"), refilled, &mut names),
            Correlated::Skip
        );
        assert_eq!(
            record(&mut correlator, &facts("R", "m"), refilled, &mut names),
            Correlated::Skip
        );
        let mut warning = facts("R", "m");
        warning.event_type = "Warning";
        assert_ne!(
            record(&mut correlator, &warning, refilled, &mut names),
            Correlated::Skip,
            "warnings have a bucket of their own"
        );
        let mut other = facts("R", "m");
        other.name = "other";
        assert_ne!(
            record(&mut correlator, &other, refilled, &mut names),
            Correlated::Skip
        );
    }

    /// A Kustomization reconciled every 90 s for a day, as Flux's recorder would write its
    /// "Reconciliation finished" Events: ten Events, then one combined Event counted up at
    /// most once every five minutes once the burst is spent.
    #[test]
    fn a_day_of_reconciliations_every_90s_writes_what_client_go_would() {
        let mut correlator = Correlator::new(4096);
        let start = Instant::now();
        let mut names = 0;
        let (mut creates, mut patches, mut skips) = (0, 0, 0);
        let cycles = 24 * 3600 / 90;
        for i in 0..cycles {
            let message = format!("Reconciliation finished in {}ms, next run in 90s", i % 97);
            let at = start + Duration::from_secs(90 * i);
            match record(
                &mut correlator,
                &facts("ReconciliationSucceeded", &message),
                at,
                &mut names,
            ) {
                Correlated::Create { .. } => creates += 1,
                Correlated::Patch { .. } => patches += 1,
                Correlated::Skip => skips += 1,
            }
        }
        assert_eq!(creates, 10, "nine Events and the combined one");
        // 25 at first, then one every 300 s: the bucket's refill over the day.
        let written = creates + patches;
        let expected = 25 + (90 * (cycles - 1)) / 300;
        assert!(
            (expected - 1..=expected + 1).contains(&written),
            "{written} written, {expected} expected, {skips} skipped"
        );
    }

    #[test]
    fn each_step_forgets_its_least_recently_used_half_at_capacity() {
        let mut correlator = Correlator::new(8);
        let start = Instant::now();
        let mut names = 0;
        for i in 0..8 {
            let name = format!("k{i}");
            let mut event = facts("R", "m");
            event.name = &name;
            record(&mut correlator, &event, start, &mut names);
        }
        assert_eq!(correlator.sizes(), (8, 8, 8));
        // k0 is used again, so k1..k4 are the oldest when a ninth object comes.
        let mut first = facts("R", "m");
        first.name = "k0";
        assert!(matches!(
            record(&mut correlator, &first, start, &mut names),
            Correlated::Patch { count: 2, .. }
        ));
        let mut ninth = facts("R", "m");
        ninth.name = "k8";
        record(&mut correlator, &ninth, start, &mut names);
        assert_eq!(correlator.sizes(), (5, 5, 5));
        assert!(matches!(
            record(&mut correlator, &first, start, &mut names),
            Correlated::Patch { count: 3, .. }
        ));
        let mut forgotten = facts("R", "m");
        forgotten.name = "k1";
        assert_eq!(
            record(&mut correlator, &forgotten, start, &mut names),
            Correlated::Create { combined: false }
        );
        let mut tiny = Correlator::new(1);
        record(&mut tiny, &first, start, &mut names);
        record(&mut tiny, &ninth, start, &mut names);
        assert_eq!(tiny.sizes(), (1, 1, 1), "a capacity of one keeps the last");
    }
}
