//! The one back-off every retry loop of the controller uses: exponential from 200 ms, each
//! wait drawn from the upper half of its step so that replicas and watches do not retry in
//! step, up to a cap the caller chooses ([`after_failure`] picks it from the server's
//! answer).

use std::time::Duration;

/// The first wait.
pub const FIRST: Duration = Duration::from_millis(200);

/// Exponential back-off with jitter: 200 ms, 400 ms, … up to a cap.
#[derive(Debug, Default)]
pub struct Backoff {
    attempts: u32,
}

impl Backoff {
    /// The wait before the next attempt, at most `cap`.
    pub fn next(&mut self, cap: Duration) -> Duration {
        let exponent = self.attempts.min(16);
        self.attempts = self.attempts.saturating_add(1);
        let full = FIRST.saturating_mul(1 << exponent).min(cap);
        full.mul_f64(0.5 + fastrand::f64() * 0.5)
    }

    /// Back to the first wait, after a success.
    pub fn reset(&mut self) {
        self.attempts = 0;
    }
}

/// The longest wait between two attempts while the API server is failing.
pub const RETRY_CAP: Duration = Duration::from_secs(3);
/// The longest wait between two attempts while the API server refuses for good reasons (the
/// kind is not served, or we may not use it): asking often would not help.
pub const REFUSED_CAP: Duration = Duration::from_secs(30);

/// The wait after a request to the API server failed with `status` (none: no answer):
/// longer once it said the kind is not served or not ours to use.
pub fn after_failure(status: Option<u16>, backoff: &mut Backoff) -> Duration {
    match status {
        Some(401 | 403 | 404) => backoff.next(REFUSED_CAP),
        _ => backoff.next(RETRY_CAP),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_is_jittered_and_stays_under_its_cap() {
        let cap = Duration::from_secs(3);
        let mut backoff = Backoff::default();
        let waits: Vec<Duration> = (0..20).map(|_| backoff.next(cap)).collect();
        assert!(waits[0] <= FIRST && waits[0] >= FIRST / 2, "{waits:?}");
        assert!(waits.iter().all(|w| *w <= cap), "{waits:?}");
        assert!(waits[10..].iter().all(|w| *w >= cap / 2), "{waits:?}");
        let distinct: std::collections::BTreeSet<_> = waits[10..].iter().collect();
        assert!(distinct.len() > 1, "jittered: {waits:?}");
        backoff.reset();
        assert!(backoff.next(cap) <= FIRST);
    }

    #[test]
    fn refusals_wait_longer_than_failures() {
        let mut backoff = Backoff::default();
        let failures: Vec<Duration> = (0..12)
            .map(|_| after_failure(Some(503), &mut backoff))
            .collect();
        assert!(failures.iter().all(|w| *w <= RETRY_CAP), "{failures:?}");
        let mut backoff = Backoff::default();
        let refusals: Vec<Duration> = (0..12)
            .map(|_| after_failure(Some(403), &mut backoff))
            .collect();
        assert!(refusals[11] > RETRY_CAP, "{refusals:?}");
        assert!(refusals.iter().all(|w| *w <= REFUSED_CAP), "{refusals:?}");
    }
}
