//! When Flux's HTTP clients send a request again: go-retryablehttp v0.7.8, which both of
//! them are — fluxcd/pkg's archive fetcher (artifact downloads, [`crate::source`]) and the
//! event recorder's POSTs to notification-controller (`controller::events`).
//!
//! Pure decisions: the caller sends, describes what came back as a [`Tried`], and asks
//! whether to try again ([`retried`], `baseRetryPolicy`), how long to wait first
//! ([`backoff`], `DefaultBackoff`, which honours a 429's or 503's `Retry-After`), and how
//! retryablehttp words a failure ([`unexpected_status`], [`giving_up`]).

use std::time::Duration;

use k8s_openapi::jiff;

/// What one try came to.
#[derive(Clone, Copy, Debug)]
pub enum Tried<'a> {
    /// No answer: refused, reset, timed out. `permanent` when trying again cannot help — a
    /// certificate the client does not trust, or a redirect loop — which retryablehttp's
    /// policy does not retry.
    Unreached { permanent: bool },
    /// An answer, with its `Retry-After` header.
    Answered {
        status: u16,
        retry_after: Option<&'a str>,
    },
}

/// Whether retryablehttp's `baseRetryPolicy` tries again: after a connection failure that
/// is not permanent, a 429, or a 5xx but 501 (and status 0).
pub fn retried(tried: &Tried) -> bool {
    match *tried {
        Tried::Unreached { permanent } => !permanent,
        Tried::Answered { status: 429, .. } => true,
        Tried::Answered { status, .. } => unexpected_status(status),
    }
}

/// Whether retryablehttp counts an answer of `status` as a failure of its own, which it
/// words "unexpected HTTP status …" (a 429 is retried without being one).
pub fn unexpected_status(status: u16) -> bool {
    status == 0 || (status >= 500 && status != 501)
}

/// The wait before the try after the one numbered `attempt` (0 for the first), which went
/// as `tried`, at `now`: `min` doubled per attempt up to `max`, unless a 429 or 503 said when
/// to come back.
pub fn backoff(
    min: Duration,
    max: Duration,
    attempt: u32,
    tried: &Tried,
    now: jiff::Timestamp,
) -> Duration {
    if let Tried::Answered {
        status: 429 | 503,
        retry_after: Some(header),
    } = tried
        && let Some(wait) = retry_after(header, now)
    {
        return wait;
    }
    2u32.checked_pow(attempt)
        .and_then(|factor| min.checked_mul(factor))
        .map_or(max, |wait| wait.min(max))
}

/// A `Retry-After` header's wait: whole seconds, or an HTTP date (nothing to wait once it
/// has passed); none for anything else, a negative number included.
pub fn retry_after(header: &str, now: jiff::Timestamp) -> Option<Duration> {
    if header.is_empty() {
        return None;
    }
    if let Ok(seconds) = header.parse::<i64>() {
        return u64::try_from(seconds).ok().map(Duration::from_secs);
    }
    let at = jiff::fmt::rfc2822::parse(header).ok()?.timestamp();
    Some(Duration::try_from(at.duration_since(now)).unwrap_or(Duration::ZERO))
}

/// retryablehttp's error once it stops trying: `GET <url> giving up after 3 attempt(s)`,
/// and what the last try failed with when there was something (a 429 has nothing).
pub fn giving_up(method: &str, url: &str, attempts: u32, failure: Option<&str>) -> String {
    match failure {
        Some(failure) => format!("{method} {url} giving up after {attempts} attempt(s): {failure}"),
        None => format!("{method} {url} giving up after {attempts} attempt(s)"),
    }
}

/// Whether a request's failure is one retryablehttp does not retry: a certificate the
/// client does not accept, or too many redirects.
pub fn is_permanent(error: &reqwest::Error) -> bool {
    error.is_redirect() || crate::tls::is_invalid_certificate(error)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// retryablehttp's own `TestParseRetryAfterHeader`, at its fixed time.
    #[test]
    fn retry_after_headers_are_read_as_retryablehttp_reads_them() {
        let now: jiff::Timestamp = "1999-12-31T23:59:57Z".parse().unwrap();
        let cases = [
            ("seconds", "2", Some(Duration::from_secs(2))),
            (
                "date",
                "Fri, 31 Dec 1999 23:59:59 GMT",
                Some(Duration::from_secs(2)),
            ),
            (
                "past-date",
                "Fri, 31 Dec 1999 23:59:00 GMT",
                Some(Duration::ZERO),
            ),
            ("empty", "", None),
            ("negative", "-2", None),
            ("bad-date", "Fri, 32 Dec 1999 23:59:59 GMT", None),
            ("bad-date-format", "badbadbad", None),
        ];
        for (case, header, expected) in cases {
            assert_eq!(retry_after(header, now), expected, "{case}");
        }
    }

    /// retryablehttp's `TestBackoff` and `TestClient_DefaultBackoff`.
    #[test]
    fn backoff_doubles_to_its_cap_unless_the_server_says_when() {
        let none = Tried::Unreached { permanent: false };
        let (second, five_minutes) = (Duration::from_secs(1), Duration::from_secs(300));
        for (attempt, expected) in [(0, 1), (1, 2), (2, 4), (3, 8), (63, 300), (128, 300)] {
            assert_eq!(
                backoff(second, five_minutes, attempt, &none, jiff::Timestamp::now()),
                Duration::from_secs(expected),
                "attempt {attempt}"
            );
        }
        let now: jiff::Timestamp = "1999-12-31T23:59:57Z".parse().unwrap();
        let (min, max) = (Duration::from_secs(1), Duration::from_secs(30));
        for status in [429, 503] {
            for header in ["2", "Fri, 31 Dec 1999 23:59:59 GMT"] {
                let tried = Tried::Answered {
                    status,
                    retry_after: Some(header),
                };
                assert_eq!(
                    backoff(min, max, 1, &tried, now),
                    Duration::from_secs(2),
                    "{status} {header}"
                );
            }
        }
        let other = Tried::Answered {
            status: 500,
            retry_after: Some("2"),
        };
        assert_eq!(
            backoff(min, max, 1, &other, now),
            Duration::from_secs(2),
            "a 500's header is not read: 1 s doubled once"
        );
        assert_eq!(backoff(min, max, 0, &other, now), Duration::from_secs(1));
    }

    /// `baseRetryPolicy`, status by status.
    #[test]
    fn connection_failures_throttling_and_server_errors_are_retried() {
        let answered = |status| Tried::Answered {
            status,
            retry_after: None,
        };
        for (status, expected) in [
            (200, false),
            (204, false),
            (301, false),
            (400, false),
            (403, false),
            (404, false),
            (429, true),
            (500, true),
            (501, false),
            (502, true),
            (503, true),
            (599, true),
            (999, true),
            (0, true),
        ] {
            assert_eq!(retried(&answered(status)), expected, "{status}");
        }
        assert!(!unexpected_status(429), "retried without being a failure");
        assert!(retried(&Tried::Unreached { permanent: false }));
        assert!(!retried(&Tried::Unreached { permanent: true }));
    }

    #[test]
    fn giving_up_is_worded_as_retryablehttp_words_it() {
        assert_eq!(
            giving_up("GET", "http://a/b", 10, None),
            "GET http://a/b giving up after 10 attempt(s)"
        );
        assert_eq!(
            giving_up(
                "POST",
                "http://n",
                5,
                Some("unexpected HTTP status 503 Service Unavailable")
            ),
            "POST http://n giving up after 5 attempt(s): unexpected HTTP status 503 Service Unavailable"
        );
    }
}
