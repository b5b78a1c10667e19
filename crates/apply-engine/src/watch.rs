//! The one watch mechanism of the controller: kube-runtime's watcher, kept going for as long
//! as it is polled, with a back-off of its own, telling a [`WatchReporter`] how it goes.
//!
//! [`watch`] hands the caller's watcher (full objects or metadata only, any scope and
//! selector) a client of its own, which sees every request that watcher makes. That is how it
//! knows when a watch request is answered, which kube-runtime does not tell when it resumes a
//! watch, and how it hears every frame, bookmarks included. Its stream never yields an error:
//! kube-runtime's `Controller` backs off *all* its triggers together when one of them yields
//! an error, which is how one failing watch made the controller deaf to every other after an
//! API server restart. Each error is instead classified ([`Setback::of`]), reported, and
//! waited out as the watch's [`Pace`] says, and a version compacted away (410) lists again.
//!
//! [`Pace`] holds every timing rule as a pure function of the instants it is given: failures
//! back off from 200 ms to [`RETRY_CAP`] (to [`REFUSED_CAP`] when the kind is not served or
//! not ours), a list resets the back-off, and a stream that ends within [`STABLE`] of being
//! opened counts as a failure, so a server that ends every watch at once is asked ever less
//! often rather than in a tight loop.

use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;
use kube::runtime::watcher::{self, Event};

use crate::retry::{Backoff, REFUSED_CAP, RETRY_CAP, after_failure};

/// How long a watch stream must have been open to count as a working watch.
pub const STABLE: Duration = Duration::from_secs(1);

/// Where a watch reports how it is doing, by the label it was given (`Kustomization`,
/// `ConfigMap (applied)`).
pub trait WatchReporter: Send + Sync {
    /// The watch starts: down until it has listed.
    fn started(&self, kind: &str);
    /// The watch listed (again), and the consumer has taken the list in: what it holds is
    /// current.
    fn listed(&self, kind: &str);
    /// The API server answered a watch request: the watch is connected. A stream opened while
    /// another was open means the server ended that one.
    fn opened(&self, kind: &str);
    /// The API server sent something on this watch (an answer, an event, a bookmark).
    fn heard(&self, kind: &str);
    /// The watch delivered a change (an object applied or deleted, at `version`), which ran
    /// an owner again or not. Reported by consumers that follow changes up.
    fn delivered(&self, kind: &str, version: Option<&str>, followed_up: bool);
    /// A request failed or a stream broke; the watch waits and goes on.
    fn set_back(&self, kind: &str, setback: Setback, error: &dyn std::fmt::Display);
}

/// What went wrong with a watch, as far as what to do next goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setback {
    /// A list or watch request failed with this status (none: no answer).
    Refused(Option<u16>),
    /// The API server does not serve the kind (404): its CRD is not installed.
    NotServed,
    /// The version to resume from is no longer in history (410): the kind is listed again.
    Expired,
    /// An open stream broke, or carried an error.
    Broke,
}

impl Setback {
    /// Classifies a watcher's error.
    pub fn of(error: &watcher::Error) -> Setback {
        let refused = |error: &kube::Error| match error {
            kube::Error::Api(status) if status.code == 404 => Setback::NotServed,
            kube::Error::Api(status) if status.code == 410 => Setback::Expired,
            kube::Error::Api(status) => Setback::Refused(Some(status.code)),
            _ => Setback::Refused(None),
        };
        match error {
            watcher::Error::InitialListFailed(error) | watcher::Error::WatchStartFailed(error) => {
                refused(error)
            }
            watcher::Error::WatchError(status) if status.code == 410 => Setback::Expired,
            watcher::Error::WatchError(_) | watcher::Error::WatchFailed(_) => Setback::Broke,
            // A list or an event without a version: the server is not serving the kind as
            // it should, which is worth an outage's report.
            watcher::Error::NoResourceVersion => Setback::Refused(None),
        }
    }
}

/// One watch's timing: its back-off, and when its open stream was answered.
#[derive(Debug, Default)]
pub struct Pace {
    backoff: Backoff,
    /// When the open stream's watch request was answered; none while no stream is open.
    opened_at: Option<Instant>,
}

impl Pace {
    /// The wait before a watch request. The previous stream ended without an error (the
    /// server's timeout): after one that lived for [`STABLE`] the watch resumes at once, after
    /// one that ended at once it backs off.
    pub fn before_watch(&mut self, now: Instant) -> Duration {
        match self.opened_at.take() {
            Some(at) if now.saturating_duration_since(at) < STABLE => self.backoff.next(RETRY_CAP),
            Some(_) => {
                self.backoff.reset();
                Duration::ZERO
            }
            None => Duration::ZERO,
        }
    }

    /// A watch request was answered.
    pub fn opened(&mut self, now: Instant) {
        self.opened_at = Some(now);
    }

    /// A list completed: the server is fine.
    pub fn listed(&mut self) {
        self.backoff.reset();
    }

    /// The wait after a setback. A stream that broke after working for a while starts the
    /// back-off over; one that broke at once does not.
    pub fn after(&mut self, setback: Setback, now: Instant) -> Duration {
        let lived = self
            .opened_at
            .take()
            .map(|at| now.saturating_duration_since(at));
        match setback {
            Setback::Broke => {
                if lived.is_some_and(|lived| lived >= STABLE) {
                    self.backoff.reset();
                }
                self.backoff.next(RETRY_CAP)
            }
            // The server answered, and history moved on: list again soon, whatever the
            // back-off grew to while it was away.
            Setback::Expired => {
                if lived.is_some() {
                    self.backoff.reset();
                }
                self.backoff.next(RETRY_CAP)
            }
            Setback::NotServed => self.backoff.next(REFUSED_CAP),
            Setback::Refused(status) => after_failure(status, &mut self.backoff),
        }
    }
}

/// Watches with the watcher `start` builds on the client it is given (called again when the
/// watch has to list from scratch), reporting to `reporter` under `label`. The stream never
/// yields an error; it ends only if the watcher does (kube-runtime's never does).
pub fn watch<K, S, F>(
    client: &kube::Client,
    label: &str,
    reporter: Arc<dyn WatchReporter>,
    start: F,
) -> impl Stream<Item = Event<K>> + Send + 'static + use<K, S, F>
where
    K: Send + 'static,
    S: Stream<Item = Result<Event<K>, watcher::Error>> + Send + 'static,
    F: Fn(kube::Client) -> S + Send + 'static,
{
    reporter.started(label);
    let shared = Arc::new(Shared {
        label: label.to_string(),
        reporter,
        pace: Mutex::default(),
    });
    let observed = kube::Client::new(
        Observed {
            client: client.clone(),
            shared: shared.clone(),
        },
        client.default_namespace().to_string(),
    );
    follow(move || start(observed.clone()).boxed(), shared)
}

/// What a watch's client and its event stream share.
struct Shared {
    label: String,
    reporter: Arc<dyn WatchReporter>,
    pace: Mutex<Pace>,
}

impl Shared {
    fn pace(&self) -> MutexGuard<'_, Pace> {
        self.pace.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The clock, as tokio tells it: paused in tests.
fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

/// The state of a followed watch between two events.
struct Following<K, R> {
    events: BoxStream<'static, Result<Event<K>, watcher::Error>>,
    restart: R,
    shared: Arc<Shared>,
    /// A list was handed out: reported as listed once the consumer asks for more.
    listed: bool,
}

/// The watcher's events without its errors: each one is reported and waited out.
fn follow<K, R>(restart: R, shared: Arc<Shared>) -> impl Stream<Item = Event<K>> + Send
where
    K: Send + 'static,
    R: Fn() -> BoxStream<'static, Result<Event<K>, watcher::Error>> + Send + 'static,
{
    let following = Following {
        events: restart(),
        restart,
        shared,
        listed: false,
    };
    futures::stream::unfold(following, |mut following| async move {
        let shared = following.shared.clone();
        if std::mem::take(&mut following.listed) {
            shared.reporter.listed(&shared.label);
        }
        loop {
            match following.events.next().await? {
                Ok(event) => {
                    if matches!(event, Event::InitDone) {
                        shared.pace().listed();
                        following.listed = true;
                    }
                    return Some((event, following));
                }
                Err(error) => {
                    let setback = Setback::of(&error);
                    shared.reporter.set_back(&shared.label, setback, &error);
                    let wait = shared.pace().after(setback, now());
                    tokio::time::sleep(wait).await;
                    // kube-runtime lists again after a 410 in the stream, but retries the
                    // same version forever after a 410 answer to the watch request.
                    if setback == Setback::Expired {
                        following.events = (following.restart)();
                    }
                }
            }
        }
    })
}

/// Whether a request is a watch (`?watch=true`).
fn is_watch(uri: &http::Uri) -> bool {
    uri.query()
        .is_some_and(|query| query.split('&').any(|pair| pair == "watch=true"))
}

/// A watch's own client: the controller's client, with the watch's pacing before each watch
/// request and its reports on each answer and frame.
#[derive(Clone)]
struct Observed {
    client: kube::Client,
    shared: Arc<Shared>,
}

type ObservedBody = UnsyncBoxBody<bytes::Bytes, kube::Error>;

impl tower::Service<http::Request<kube::client::Body>> for Observed {
    type Response = http::Response<ObservedBody>;
    type Error = kube::Error;
    type Future = BoxFuture<'static, Result<Self::Response, kube::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), kube::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<kube::client::Body>) -> Self::Future {
        let (client, shared) = (self.client.clone(), self.shared.clone());
        Box::pin(async move {
            let watching = is_watch(request.uri());
            if watching {
                let wait = shared.pace().before_watch(now());
                if !wait.is_zero() {
                    tokio::time::sleep(wait).await;
                }
            }
            let response = client.send(request).await?;
            // A refusal is an answer, but no sign that the watch works. Anything else kube
            // reads as a stream, so it counts as one (and is paced as one).
            let status = response.status();
            if status.is_client_error() || status.is_server_error() {
                return Ok(response.map(BodyExt::boxed_unsync));
            }
            shared.reporter.heard(&shared.label);
            if watching {
                shared.pace().opened(now());
                shared.reporter.opened(&shared.label);
            }
            Ok(response.map(|body| {
                body.map_frame(move |frame| {
                    shared.reporter.heard(&shared.label);
                    frame
                })
                .boxed_unsync()
            }))
        })
    }
}

#[cfg(test)]
#[path = "watch_tests.rs"]
mod tests;
