//! What the event writer does after writing an Event failed, as client-go's broadcaster
//! decides it for Flux (`tools/record` `recordToSink` and `recordEvent`): an answer from the
//! API server (any status) or a request that cannot be built is final — the Event is
//! abandoned, since it would be refused the same way again; a failure to reach the server
//! (refused, reset, timed out, an answer that is not HTTP) holds the Event and tries again,
//! 12 tries in all, the first pause drawn at random below the pause (so that recorders do not
//! all come back at once after an outage) and the next ones the whole pause (10 s).
//!
//! Throttling answers (429, or 5xx with `Retry-After`) never get here: the client's own
//! retry (`retry_after`) sends those again first, as client-go's REST client does.
//!
//! The copy POSTed to notification-controller (`--events-addr`) is retried as Flux's
//! retrying client does (go-retryablehttp with Flux's `checkRetry`, [`forward_pause`] over
//! [`crate::retryable_http`]): five
//! tries, 1, 2, 4 and 8 s apart, after a connection failure or a 5xx but 501; a 503's
//! `Retry-After` is waited for; a 429 (notification-controller's "duplicate event") and other
//! answers end it, and so does a certificate the client does not trust.

use std::time::Duration;

use k8s_openapi::jiff;

use crate::retryable_http::{self, Tried};

/// client-go's `maxTriesPerEvent`.
pub const MAX_TRIES: u32 = 12;

/// client-go's `defaultSleepDuration`: the pause between tries.
pub const PAUSE: Duration = Duration::from_secs(10);

/// What follows a failed write of an Event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AfterFailure {
    /// The server was not reached: try again after a pause.
    Retry,
    /// The server refused the Event, or the request cannot be made: it is dropped. `quiet`
    /// when the refusal is expected (the Event exists already, or its namespace is being
    /// deleted), which client-go logs at debug level only.
    Abandon { quiet: bool, why: Abandoned },
}

/// Why an Event is abandoned, in client-go's words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Abandoned {
    /// "Server rejected event (will not retry!)": it exists already (a try whose answer was
    /// lost wrote it), so a repeat may count on it.
    Exists,
    /// "Server rejected event (will not retry!)"
    Rejected,
    /// "Unable to construct event (will not retry!)"
    Unconstructable,
}

impl Abandoned {
    pub fn message(self) -> &'static str {
        match self {
            Abandoned::Exists | Abandoned::Rejected => "Server rejected event (will not retry!)",
            Abandoned::Unconstructable => "Unable to construct event (will not retry!)",
        }
    }
}

/// The log message of a failed try that will be tried again.
pub const RETRYING: &str = "Unable to write event (may retry after sleeping)";
/// The log message of an Event given up after [`MAX_TRIES`].
pub const GIVEN_UP: &str = "Unable to write event (retry limit exceeded!)";

/// The status cause client-go names for a namespace being deleted.
const NAMESPACE_TERMINATING: &str = "NamespaceTerminating";

/// What follows `error`, the failure of a write of an Event.
pub fn after_failure(error: &kube::Error) -> AfterFailure {
    match error {
        kube::Error::Api(status) => {
            let terminating = status.details.as_ref().is_some_and(|details| {
                details
                    .causes
                    .iter()
                    .any(|cause| cause.reason == NAMESPACE_TERMINATING)
            });
            let exists = status.is_already_exists();
            AfterFailure::Abandon {
                quiet: exists || terminating,
                why: if exists {
                    Abandoned::Exists
                } else {
                    Abandoned::Rejected
                },
            }
        }
        kube::Error::BuildRequest(_) | kube::Error::HttpError(_) => AfterFailure::Abandon {
            quiet: false,
            why: Abandoned::Unconstructable,
        },
        // Connections refused, reset or timed out, TLS failures, answers that are not
        // an API server's: client-go retries all of these.
        _ => AfterFailure::Retry,
    }
}

/// The pause before the next try, after `tries` failed tries (`random` in `[0, 1)`); none
/// once the tries are spent.
pub fn pause_after(tries: u32, pause: Duration, random: f64) -> Option<Duration> {
    match tries {
        n if n >= MAX_TRIES => None,
        0 | 1 => Some(pause.mul_f64(random.clamp(0.0, 1.0))),
        _ => Some(pause),
    }
}

/// How many times an event is POSTed to notification-controller at most: go-retryablehttp's
/// default `RetryMax` (4) retries after the first try.
pub const FORWARD_ATTEMPTS: u32 = 5;
const FORWARD_FIRST_PAUSE: Duration = Duration::from_secs(1);
const FORWARD_LONGEST_PAUSE: Duration = Duration::from_secs(30);

/// Whether a POST of an event failed, as Flux's retrying client judges it: not reached, or a
/// 5xx but 501 (what Flux's recorder logs when it gives up); any other answer is the end of it.
pub fn forward_failed(forwarded: &Tried) -> bool {
    match *forwarded {
        Tried::Unreached { .. } => true,
        Tried::Answered { status, .. } => retryable_http::unexpected_status(status),
    }
}

/// The pause before POSTing again after the try numbered `attempt` (0 for the first) went as
/// `forwarded`, at `now`; none when that was the end of it. Flux's `checkRetry` ends it at a
/// 429 (notification-controller's answer to a duplicate event); the rest is go-retryablehttp's.
pub fn forward_pause(forwarded: &Tried, attempt: u32, now: jiff::Timestamp) -> Option<Duration> {
    let duplicate = matches!(forwarded, Tried::Answered { status: 429, .. });
    if duplicate || !retryable_http::retried(forwarded) || attempt + 1 >= FORWARD_ATTEMPTS {
        return None;
    }
    Some(retryable_http::backoff(
        FORWARD_FIRST_PAUSE,
        FORWARD_LONGEST_PAUSE,
        attempt,
        forwarded,
        now,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    fn status(code: u16, reason: &str, cause: Option<&str>) -> kube::Error {
        let causes: Vec<_> = cause
            .map(|cause| {
                serde_json::json!({"reason": cause, "field": "metadata.namespace",
                    "message": "namespace apps is being terminated"})
            })
            .into_iter()
            .collect();
        let status: Status = serde_json::from_value(serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
            "reason": reason, "message": "refused", "details": {"causes": causes},
        }))
        .unwrap();
        kube::Error::Api(status.boxed())
    }

    /// client-go's recordEvent, case by case.
    #[test]
    fn a_refusal_is_final_and_only_an_unreached_server_is_tried_again() {
        let io = || std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let rejected = |quiet| AfterFailure::Abandon {
            quiet,
            why: Abandoned::Rejected,
        };
        let cases: Vec<(&str, kube::Error, AfterFailure)> = vec![
            (
                "exists already",
                status(409, "AlreadyExists", None),
                AfterFailure::Abandon {
                    quiet: true,
                    why: Abandoned::Exists,
                },
            ),
            (
                "namespace terminating",
                status(403, "Forbidden", Some(NAMESPACE_TERMINATING)),
                rejected(true),
            ),
            ("forbidden", status(403, "Forbidden", None), rejected(false)),
            ("invalid", status(422, "Invalid", None), rejected(false)),
            (
                "namespace gone",
                status(404, "NotFound", None),
                rejected(false),
            ),
            (
                "server error without Retry-After",
                status(500, "InternalError", None),
                rejected(false),
            ),
            (
                "throttled past the client's retries",
                status(429, "TooManyRequests", None),
                rejected(false),
            ),
            (
                "request not built",
                kube::Error::HttpError(http::Request::builder().uri("\n").body(()).unwrap_err()),
                AfterFailure::Abandon {
                    quiet: false,
                    why: Abandoned::Unconstructable,
                },
            ),
            (
                "connection refused",
                kube::Error::Service(Box::new(io())),
                AfterFailure::Retry,
            ),
            (
                "stream cut",
                kube::Error::ReadEvents(io()),
                AfterFailure::Retry,
            ),
            (
                "answer not an API server's",
                kube::Error::SerdeError(serde_json::from_str::<u8>("<html>").unwrap_err()),
                AfterFailure::Retry,
            ),
        ];
        for (case, error, expected) in cases {
            assert_eq!(after_failure(&error), expected, "{case}: {error}");
        }
    }

    #[test]
    fn twelve_tries_the_first_pause_random_the_others_whole() {
        let pause = Duration::from_secs(10);
        assert_eq!(
            pause_after(1, pause, 0.25),
            Some(Duration::from_millis(2500))
        );
        assert_eq!(pause_after(1, pause, 7.0), Some(pause), "random is clamped");
        for tries in 2..MAX_TRIES {
            assert_eq!(pause_after(tries, pause, 0.0), Some(pause), "after {tries}");
        }
        assert_eq!(pause_after(MAX_TRIES, pause, 0.5), None);
        let total: Duration = (1..)
            .map_while(|tries| pause_after(tries, pause, 1.0))
            .sum();
        assert_eq!(
            total,
            Duration::from_secs(110),
            "client-go's two minutes at most"
        );
    }

    /// go-retryablehttp's policy and back-off as Flux configures them, case by case.
    #[test]
    fn forwarding_is_retried_as_fluxs_retrying_client_retries() {
        let now: jiff::Timestamp = "2026-11-27T12:00:00Z".parse().unwrap();
        let answered = |status, retry_after| Tried::Answered {
            status,
            retry_after,
        };
        let unreached = Tried::Unreached { permanent: false };
        let secs = Duration::from_secs;
        let cases = [
            ("accepted", answered(202, None), 0, None),
            ("bad request", answered(400, None), 0, None),
            ("duplicate", answered(429, Some("5")), 0, None),
            ("not implemented", answered(501, None), 0, None),
            ("server error", answered(500, None), 0, Some(secs(1))),
            ("server error again", answered(502, None), 2, Some(secs(4))),
            ("503 says when", answered(503, Some("7")), 0, Some(secs(7))),
            (
                "503 says when, as a date",
                answered(503, Some("Fri, 27 Nov 2026 12:01:00 GMT")),
                0,
                Some(secs(60)),
            ),
            (
                "503 with a date passed",
                answered(503, Some("Fri, 27 Nov 2026 11:00:00 GMT")),
                0,
                Some(Duration::ZERO),
            ),
            (
                "503 says nonsense",
                answered(503, Some("-3")),
                1,
                Some(secs(2)),
            ),
            (
                "500's Retry-After is not read",
                answered(500, Some("7")),
                0,
                Some(secs(1)),
            ),
            ("unreached", unreached, 3, Some(secs(8))),
            ("the fifth try was the last", unreached, 4, None),
            (
                "untrusted certificate",
                Tried::Unreached { permanent: true },
                0,
                None,
            ),
        ];
        for (case, forwarded, attempt, expected) in cases {
            assert_eq!(forward_pause(&forwarded, attempt, now), expected, "{case}");
        }
        // What Flux's recorder logs as "unable to record event" once it gives up.
        let failed = [
            (answered(202, None), false),
            (answered(400, None), false),
            (answered(429, None), false),
            (answered(501, None), false),
            (answered(503, None), true),
            (unreached, true),
            (Tried::Unreached { permanent: true }, true),
        ];
        for (forwarded, expected) in failed {
            assert_eq!(forward_failed(&forwarded), expected, "{forwarded:?}");
        }
    }
}
