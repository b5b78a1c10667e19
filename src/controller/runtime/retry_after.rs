//! client-go's retry of a throttled request, for every client the controller makes: an
//! answer of 429 or 5xx that says when to come back (`Retry-After: <seconds>`) is sent again
//! after that long, at most ten times; an answer without the header is final, and the
//! caller's own back-off ([`crate::retry`]) decides what follows. kube's own retry (on by
//! default, up to 15 attempts over minutes, header or not) is turned off in its place: it
//! would hold a watch through an outage that answers 503 far longer than the watch's
//! three-second cap.

use std::time::Duration;

use http::{Request, Response};
use kube::client::Body;

/// client-go's `maxRetries` for a request the server throttles.
pub const MAX_RETRIES: u32 = 10;

/// The wait before sending a request again after an answer of `status` with `retry_after`
/// (the header's text), when `retries` were made already; none when the answer is final.
pub fn retry_delay(status: u16, retry_after: Option<&str>, retries: u32) -> Option<Duration> {
    if retries >= MAX_RETRIES || !(status == 429 || status >= 500) {
        return None;
    }
    let seconds: u64 = retry_after?.trim().parse().ok()?;
    Some(Duration::from_secs(seconds))
}

/// The [`tower::retry::Policy`] that applies [`retry_delay`].
#[derive(Clone, Debug, Default)]
pub struct RetryAfter {
    retries: u32,
}

impl<Res, E> tower::retry::Policy<Request<Body>, Response<Res>, E> for RetryAfter {
    type Future = tokio::time::Sleep;

    fn retry(
        &mut self,
        _request: &mut Request<Body>,
        result: &mut Result<Response<Res>, E>,
    ) -> Option<Self::Future> {
        let response = result.as_ref().ok()?;
        let header = response
            .headers()
            .get(http::header::RETRY_AFTER)
            .and_then(|value| value.to_str().ok());
        let wait = retry_delay(response.status().as_u16(), header, self.retries)?;
        self.retries += 1;
        Some(tokio::time::sleep(wait))
    }

    fn clone_request(&mut self, request: &Request<Body>) -> Option<Request<Body>> {
        // A streamed body cannot be sent twice; such a request is not retried.
        let body = request.body().try_clone()?;
        let mut copy = Request::new(body);
        *copy.method_mut() = request.method().clone();
        *copy.uri_mut() = request.uri().clone();
        *copy.version_mut() = request.version();
        *copy.headers_mut() = request.headers().clone();
        *copy.extensions_mut() = request.extensions().clone();
        Some(copy)
    }
}

/// The layer every client wears.
pub fn layer() -> tower::retry::RetryLayer<RetryAfter> {
    tower::retry::RetryLayer::new(RetryAfter::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_answers_that_say_when_to_return_are_retried_as_client_go_does() {
        let second = Some(Duration::from_secs(1));
        for (status, header, retries, want) in [
            (429, Some("1"), 0, second),
            (503, Some("1"), 0, second),
            (500, Some("2"), 3, Some(Duration::from_secs(2))),
            (504, Some("0"), 0, Some(Duration::ZERO)),
            // Without the header the answer is final: the caller backs off.
            (503, None, 0, None),
            (429, None, 0, None),
            (429, Some("soon"), 0, None),
            // Not a throttling answer.
            (404, Some("1"), 0, None),
            (409, Some("1"), 0, None),
            (200, Some("1"), 0, None),
            // Ten retries at most.
            (429, Some("1"), 9, second),
            (429, Some("1"), 10, None),
        ] {
            assert_eq!(
                retry_delay(status, header, retries),
                want,
                "{status} {header:?} after {retries}"
            );
        }
    }
}
