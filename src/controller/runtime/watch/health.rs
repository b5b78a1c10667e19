//! What each watch is doing, as a pure state machine the watch loops report to and the probes
//! and metrics read: connected or down (and since when), absent (the kind is not served),
//! when it last heard from the API server, and how often it had to restart.
//!
//! Transitions return what the caller should say, so that an outage is logged once when it
//! starts and once when it ends, however many retries it takes. Time is passed in, which
//! keeps every rule testable without sleeping.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Why a watch had to be started again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Restart {
    /// A list or watch request failed, or an open stream broke.
    Error,
    /// The resourceVersion to resume from was compacted away (410): the kind is listed again.
    Expired,
    /// The server ended the stream (its timeout, or a restart): resumed from the last version.
    Closed,
}

impl Restart {
    pub fn as_str(self) -> &'static str {
        match self {
            Restart::Error => "error",
            Restart::Expired => "expired",
            Restart::Closed => "closed",
        }
    }
}

/// What a transition means for the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transition {
    /// Nothing worth a line.
    Quiet,
    /// The first failure of an outage.
    Lost,
    /// Connected again after an outage of this length.
    Resumed(Duration),
    /// The API server does not serve this kind (its CRD is not installed).
    NotServed,
}

#[derive(Clone, Debug)]
struct KindState {
    /// `None` while connected.
    down_since: Option<Instant>,
    /// This outage has been reported (a watch that has never connected counts as down, but
    /// only its first failure is news).
    reported: bool,
    /// The kind answered 404: not an outage, and not a reason to be unready.
    absent: bool,
    /// The last time the API server said anything on this watch (an event, a bookmark, a list).
    last_heard: Instant,
    restarts: BTreeMap<Restart, u64>,
    /// Changes delivered (objects applied or deleted) and, of those, the ones that ran a
    /// Kustomization again.
    delivered: u64,
    follow_ups: u64,
    /// The resourceVersion of the last change delivered: a watch delivers in order.
    last_version: Option<String>,
    /// A watch stream is open (answered, and not ended by an error or a list since).
    streaming: bool,
}

/// One watch as the probes and metrics see it.
#[derive(Clone, Debug, PartialEq)]
pub struct WatchReport {
    pub kind: String,
    pub up: bool,
    pub absent: bool,
    /// How long it has been down, if it is.
    pub down_for: Option<Duration>,
    pub since_last_heard: Duration,
    pub restarts: BTreeMap<Restart, u64>,
    /// Changes delivered, and the ones that ran a Kustomization again.
    pub delivered: u64,
    pub follow_ups: u64,
    pub last_version: Option<String>,
}

/// The state of every watch the controller keeps, by watched kind.
#[derive(Debug, Default)]
pub struct WatchStates {
    kinds: BTreeMap<String, KindState>,
}

impl WatchStates {
    /// A watch that is about to connect: down until its first list or watch succeeds.
    pub fn register(&mut self, kind: &str, now: Instant) {
        self.kinds.entry(kind.to_string()).or_insert(KindState {
            down_since: Some(now),
            reported: false,
            absent: false,
            last_heard: now,
            restarts: BTreeMap::new(),
            delivered: 0,
            follow_ups: 0,
            last_version: None,
            streaming: false,
        });
    }

    fn state(&mut self, kind: &str, now: Instant) -> &mut KindState {
        self.register(kind, now);
        self.kinds.get_mut(kind).expect("registered above")
    }

    /// A list succeeded.
    pub fn connected(&mut self, kind: &str, now: Instant) -> Transition {
        let state = self.state(kind, now);
        state.last_heard = now;
        state.streaming = false;
        state.absent = false;
        let reported = std::mem::replace(&mut state.reported, false);
        match state.down_since.take() {
            Some(since) if reported => Transition::Resumed(now.saturating_duration_since(since)),
            _ => Transition::Quiet,
        }
    }

    /// A watch request was answered: connected. One answered while a stream was open means
    /// the server ended that stream (its timeout, or a restart).
    pub fn opened(&mut self, kind: &str, now: Instant) -> Transition {
        if self.state(kind, now).streaming {
            self.restarted(kind, Restart::Closed, now);
        }
        let transition = self.connected(kind, now);
        self.state(kind, now).streaming = true;
        transition
    }

    /// The watch received something (an event or a bookmark).
    pub fn heard(&mut self, kind: &str, now: Instant) {
        self.state(kind, now).last_heard = now;
    }

    /// A list or watch request failed, or the stream broke.
    pub fn failed(&mut self, kind: &str, now: Instant) -> Transition {
        let state = self.state(kind, now);
        state.absent = false;
        state.down_since.get_or_insert(now);
        if std::mem::replace(&mut state.reported, true) {
            Transition::Quiet
        } else {
            Transition::Lost
        }
    }

    /// The API server answered that it does not serve the kind.
    pub fn not_served(&mut self, kind: &str, now: Instant) -> Transition {
        let state = self.state(kind, now);
        state.last_heard = now;
        state.down_since.get_or_insert(now);
        if std::mem::replace(&mut state.absent, true) {
            Transition::Quiet
        } else {
            Transition::NotServed
        }
    }

    /// The watch delivered a change, which ran a Kustomization again or not.
    pub fn delivered(
        &mut self,
        kind: &str,
        version: Option<&str>,
        followed_up: bool,
        now: Instant,
    ) {
        let state = self.state(kind, now);
        state.last_heard = now;
        state.delivered += 1;
        state.follow_ups += u64::from(followed_up);
        state.last_version = version.map(str::to_string);
    }

    pub fn restarted(&mut self, kind: &str, why: Restart, now: Instant) {
        let state = self.state(kind, now);
        state.streaming = false;
        *state.restarts.entry(why).or_default() += 1;
    }

    /// The watches down for longer than `grace` (a kind that is not served does not count):
    /// empty when the controller is ready.
    pub fn unready(&self, grace: Duration, now: Instant) -> Vec<String> {
        self.kinds
            .iter()
            .filter(|(_, state)| !state.absent)
            .filter(|(_, state)| {
                state
                    .down_since
                    .is_some_and(|since| now.saturating_duration_since(since) > grace)
            })
            .map(|(kind, _)| kind.clone())
            .collect()
    }

    pub fn reports(&self, now: Instant) -> Vec<WatchReport> {
        self.kinds
            .iter()
            .map(|(kind, state)| WatchReport {
                kind: kind.clone(),
                up: state.down_since.is_none(),
                absent: state.absent,
                down_for: state
                    .down_since
                    .map(|since| now.saturating_duration_since(since)),
                since_last_heard: now.saturating_duration_since(state.last_heard),
                restarts: state.restarts.clone(),
                delivered: state.delivered,
                follow_ups: state.follow_ups,
                last_version: state.last_version.clone(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KIND: &str = "Kustomization";

    fn after(start: Instant, seconds: u64) -> Instant {
        start + Duration::from_secs(seconds)
    }

    #[test]
    fn a_watch_is_down_until_it_first_connects() {
        let start = Instant::now();
        let mut states = WatchStates::default();
        states.register(KIND, start);
        assert!(
            states
                .unready(Duration::from_secs(5), after(start, 3))
                .is_empty()
        );
        assert_eq!(
            states.unready(Duration::from_secs(5), after(start, 6)),
            vec![KIND.to_string()],
            "never connecting is unready once the grace period is over"
        );
        assert_eq!(
            states.connected(KIND, after(start, 7)),
            Transition::Quiet,
            "a first connection is not news"
        );
        assert!(
            states
                .unready(Duration::from_secs(5), after(start, 8))
                .is_empty()
        );
    }

    #[test]
    fn a_watch_that_cannot_connect_at_start_is_reported() {
        let start = Instant::now();
        let mut states = WatchStates::default();
        states.register(KIND, start);
        assert_eq!(states.failed(KIND, after(start, 1)), Transition::Lost);
        assert_eq!(states.failed(KIND, after(start, 2)), Transition::Quiet);
        assert_eq!(
            states.connected(KIND, after(start, 5)),
            Transition::Resumed(Duration::from_secs(5)),
            "down since it was registered"
        );
    }

    #[test]
    fn an_outage_is_reported_once_when_it_starts_and_once_when_it_ends() {
        let start = Instant::now();
        let mut states = WatchStates::default();
        states.connected(KIND, start);
        assert_eq!(states.failed(KIND, after(start, 10)), Transition::Lost);
        for second in 11..40 {
            assert_eq!(states.failed(KIND, after(start, second)), Transition::Quiet);
        }
        let report = &states.reports(after(start, 40))[0];
        assert!(!report.up);
        assert_eq!(report.down_for, Some(Duration::from_secs(30)));
        assert_eq!(
            states.connected(KIND, after(start, 41)),
            Transition::Resumed(Duration::from_secs(31))
        );
        assert_eq!(states.connected(KIND, after(start, 42)), Transition::Quiet);
        assert!(states.reports(after(start, 42))[0].up);
    }

    #[test]
    fn readiness_waits_for_the_grace_period() {
        let start = Instant::now();
        let mut states = WatchStates::default();
        states.connected(KIND, start);
        states.connected("GitRepository", start);
        states.failed(KIND, after(start, 1));
        let grace = Duration::from_secs(10);
        assert!(
            states.unready(grace, after(start, 11)).is_empty(),
            "a short blip keeps it ready"
        );
        assert_eq!(
            states.unready(grace, after(start, 12)),
            vec![KIND.to_string()]
        );
        states.connected(KIND, after(start, 13));
        assert!(states.unready(grace, after(start, 13)).is_empty());
    }

    #[test]
    fn a_kind_that_is_not_served_is_neither_an_outage_nor_unready() {
        let start = Instant::now();
        let mut states = WatchStates::default();
        states.register("ExternalArtifact", start);
        assert_eq!(
            states.not_served("ExternalArtifact", after(start, 1)),
            Transition::NotServed
        );
        assert_eq!(
            states.not_served("ExternalArtifact", after(start, 31)),
            Transition::Quiet
        );
        assert!(
            states
                .unready(Duration::from_secs(5), after(start, 60))
                .is_empty()
        );
        let report = &states.reports(after(start, 60))[0];
        assert!(report.absent && !report.up);
        assert_eq!(
            states.connected("ExternalArtifact", after(start, 61)),
            Transition::Quiet,
            "a CRD installed later is not an outage ending"
        );
        // A real failure after that is an outage again.
        assert_eq!(
            states.failed("ExternalArtifact", after(start, 62)),
            Transition::Lost
        );
    }

    #[test]
    fn a_watch_opened_while_one_was_open_counts_the_server_ending_it() {
        let start = Instant::now();
        let mut states = WatchStates::default();
        states.register(KIND, start);
        assert_eq!(states.connected(KIND, after(start, 1)), Transition::Quiet);
        // The first watch after a list is no restart; each one after it is.
        states.opened(KIND, after(start, 1));
        states.opened(KIND, after(start, 241));
        states.opened(KIND, after(start, 481));
        let closed = |states: &WatchStates| {
            states.reports(after(start, 500))[0]
                .restarts
                .get(&Restart::Closed)
                .copied()
        };
        assert_eq!(closed(&states), Some(2));
        // After a failure, opening is the end of an outage, not the end of a stream.
        states.restarted(KIND, Restart::Error, after(start, 490));
        assert_eq!(states.failed(KIND, after(start, 490)), Transition::Lost);
        assert_eq!(
            states.opened(KIND, after(start, 495)),
            Transition::Resumed(Duration::from_secs(5))
        );
        assert_eq!(closed(&states), Some(2));
        // A relist after an expiry starts over as well.
        states.restarted(KIND, Restart::Expired, after(start, 496));
        states.connected(KIND, after(start, 497));
        states.opened(KIND, after(start, 497));
        assert_eq!(closed(&states), Some(2));
        assert!(states.reports(after(start, 500))[0].up);
    }

    #[test]
    fn restarts_and_silence_are_counted_per_kind() {
        let start = Instant::now();
        let mut states = WatchStates::default();
        states.connected(KIND, start);
        states.connected("Secret", start);
        states.restarted(KIND, Restart::Closed, after(start, 1));
        states.restarted(KIND, Restart::Expired, after(start, 2));
        states.restarted(KIND, Restart::Expired, after(start, 3));
        states.heard("Secret", after(start, 5));
        let reports = states.reports(after(start, 9));
        let kustomizations = reports.iter().find(|r| r.kind == KIND).unwrap();
        assert_eq!(kustomizations.restarts[&Restart::Expired], 2);
        assert_eq!(kustomizations.restarts[&Restart::Closed], 1);
        assert_eq!(kustomizations.since_last_heard, Duration::from_secs(9));
        let secrets = reports.iter().find(|r| r.kind == "Secret").unwrap();
        assert_eq!(secrets.since_last_heard, Duration::from_secs(4));
        assert!(secrets.restarts.is_empty());
    }
}
