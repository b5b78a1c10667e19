use super::*;
use crate::retry::REFUSED_CAP;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::core::Status;

/// What a watch reported, and when (tokio's clock, paused in the tests).
#[derive(Default)]
struct Recorded(Mutex<Vec<(String, tokio::time::Instant)>>);

impl Recorded {
    fn push(&self, what: impl Into<String>) {
        self.0
            .lock()
            .unwrap()
            .push((what.into(), tokio::time::Instant::now()));
    }

    fn all(&self) -> Vec<(String, tokio::time::Instant)> {
        self.0.lock().unwrap().clone()
    }

    fn names(&self) -> Vec<String> {
        self.all().into_iter().map(|(what, _)| what).collect()
    }

    /// When each report named `what` came.
    fn times_of(&self, what: &str) -> Vec<tokio::time::Instant> {
        self.all()
            .into_iter()
            .filter(|(name, _)| name == what)
            .map(|(_, at)| at)
            .collect()
    }
}

impl WatchReporter for Recorded {
    fn started(&self, _: &str) {
        self.push("started");
    }
    fn listed(&self, _: &str) {
        self.push("listed");
    }
    fn opened(&self, _: &str) {
        self.push("opened");
    }
    fn heard(&self, _: &str) {
        self.push("heard");
    }
    fn delivered(&self, _: &str, _: Option<&str>, _: bool) {
        self.push("delivered");
    }
    fn set_back(&self, _: &str, setback: Setback, _: &dyn std::fmt::Display) {
        self.push(format!("{setback:?}"));
    }
}

/// For tests: a watch whose events are given, started again from the next script on a 410.
fn scripted<K: Send + 'static>(
    scripts: Vec<Vec<Result<Event<K>, watcher::Error>>>,
    reporter: Arc<dyn WatchReporter>,
) -> impl Stream<Item = Event<K>> + Send {
    let scripts = Mutex::new(scripts.into_iter());
    let shared = Arc::new(Shared {
        label: "ConfigMap".into(),
        reporter,
        pace: Mutex::default(),
    });
    let restart = move || {
        let next = scripts.lock().unwrap().next().unwrap_or_default();
        futures::stream::iter(next).boxed()
    };
    follow(restart, shared)
}

fn status(code: u16) -> Box<Status> {
    Status::failure("refused", "Reason").with_code(code).boxed()
}

fn api(code: u16) -> kube::Error {
    kube::Error::Api(status(code))
}

fn unreachable() -> kube::Error {
    kube::Error::Service("connection refused".into())
}

#[test]
fn setbacks_are_told_apart_by_request_and_status() {
    use watcher::Error::*;
    let rows: Vec<(watcher::Error, Setback)> = vec![
        (InitialListFailed(api(503)), Setback::Refused(Some(503))),
        (InitialListFailed(api(403)), Setback::Refused(Some(403))),
        (InitialListFailed(unreachable()), Setback::Refused(None)),
        (InitialListFailed(api(404)), Setback::NotServed),
        // A list continue token too old to use: list again from the start.
        (InitialListFailed(api(410)), Setback::Expired),
        (WatchStartFailed(api(500)), Setback::Refused(Some(500))),
        (WatchStartFailed(unreachable()), Setback::Refused(None)),
        (WatchStartFailed(api(404)), Setback::NotServed),
        (WatchStartFailed(api(410)), Setback::Expired),
        (WatchError(status(410)), Setback::Expired),
        (WatchError(status(500)), Setback::Broke),
        (WatchFailed(unreachable()), Setback::Broke),
        (NoResourceVersion, Setback::Refused(None)),
    ];
    for (error, expected) in rows {
        assert_eq!(Setback::of(&error), expected, "{error}");
    }
}

#[test]
fn watch_requests_are_told_from_the_rest() {
    let rows = [
        ("/api/v1/configmaps?&watch=true&resourceVersion=5", true),
        ("/api/v1/configmaps?watch=true", true),
        ("/api/v1/configmaps?limit=500", false),
        ("/api/v1/configmaps?labelSelector=watch%3Dtrue", false),
        ("/api/v1/configmaps", false),
    ];
    for (uri, watching) in rows {
        assert_eq!(is_watch(&uri.parse().unwrap()), watching, "{uri}");
    }
}

#[test]
fn streams_that_end_at_once_are_resumed_ever_more_slowly() {
    let start = Instant::now();
    let mut pace = Pace::default();
    let mut at = start;
    let mut waits = Vec::new();
    for _ in 0..12 {
        pace.opened(at);
        at += Duration::from_millis(10);
        let wait = pace.before_watch(at);
        waits.push(wait);
        at += wait;
    }
    assert!(waits[0] <= crate::retry::FIRST, "{waits:?}");
    assert!(
        waits[11] >= RETRY_CAP / 2,
        "escalates to the cap: {waits:?}"
    );
    pace.opened(at);
    assert_eq!(
        pace.before_watch(at + Duration::from_secs(240)),
        Duration::ZERO,
        "a stream the server timed out resumes at once"
    );
    pace.opened(at);
    assert!(
        pace.before_watch(at + Duration::from_millis(10)) <= crate::retry::FIRST,
        "and the back-off started over"
    );
}

#[test]
fn history_moving_on_after_an_outage_lists_again_soon() {
    let start = Instant::now();
    let mut pace = Pace::default();
    for _ in 0..10 {
        pace.after(Setback::Refused(None), start);
    }
    pace.opened(start);
    let wait = pace.after(Setback::Expired, start);
    assert!(wait <= crate::retry::FIRST, "{wait:?}");
    // A 410 to the request itself, the server unheard since the outage, waits its turn.
    let mut pace = Pace::default();
    for _ in 0..10 {
        pace.after(Setback::Refused(None), start);
    }
    assert!(pace.after(Setback::Expired, start) >= RETRY_CAP / 2);
}

#[test]
fn a_stream_that_broke_after_working_starts_the_back_off_over() {
    let start = Instant::now();
    let mut pace = Pace::default();
    for _ in 0..10 {
        pace.after(Setback::Refused(Some(503)), start);
    }
    pace.opened(start);
    let wait = pace.after(Setback::Broke, start + Duration::from_secs(60));
    assert!(wait <= crate::retry::FIRST, "{wait:?}");
    // One that broke at once goes on backing off.
    let mut pace = Pace::default();
    for _ in 0..10 {
        pace.opened(start);
        pace.after(Setback::Broke, start + Duration::from_millis(5));
    }
    assert!(pace.after(Setback::Broke, start) >= RETRY_CAP / 2);
    pace.listed();
    assert!(
        pace.after(Setback::Broke, start) <= crate::retry::FIRST,
        "a list resets"
    );
}

#[test]
fn refusals_and_absent_kinds_back_off_longer_but_stay_bounded() {
    let start = Instant::now();
    for setback in [Setback::NotServed, Setback::Refused(Some(403))] {
        let mut pace = Pace::default();
        let waits: Vec<Duration> = (0..40).map(|_| pace.after(setback, start)).collect();
        assert!(waits.iter().all(|w| *w <= REFUSED_CAP), "{waits:?}");
        assert!(waits[39] >= REFUSED_CAP / 2, "{waits:?}");
    }
    let mut pace = Pace::default();
    let waits: Vec<Duration> = (0..40)
        .map(|_| pace.after(Setback::Refused(Some(503)), start))
        .collect();
    assert!(waits.iter().all(|w| *w <= RETRY_CAP), "{waits:?}");
}

fn forbidden_list() -> watcher::Error {
    watcher::Error::InitialListFailed(api(403))
}

/// kube-runtime's watcher says `Init` before every list it asks for, also after a list that
/// failed: that is no answer from the server, and must not undo the back-off.
#[tokio::test(start_paused = true)]
async fn a_list_that_keeps_failing_is_asked_ever_less_often() {
    let script: Vec<Result<Event<()>, watcher::Error>> = vec![
        Err(forbidden_list()),
        Ok(Event::Init),
        Err(forbidden_list()),
        Ok(Event::Init),
        Err(forbidden_list()),
        Ok(Event::Init),
        Err(forbidden_list()),
        Ok(Event::Init),
        Ok(Event::InitDone),
    ];
    let recorded = Arc::new(Recorded::default());
    let events: Vec<Event<()>> = scripted(vec![script], recorded.clone()).collect().await;
    assert_eq!(events.len(), 5, "errors are not passed on");
    let refused = "Refused(Some(403))".to_string();
    assert_eq!(
        recorded.names(),
        [&refused, &refused, &refused, &refused, "listed"],
        "Init is not reported: only the failures and the finished list are"
    );
    // Waits of at least 100, 200 and 400 ms (the lower halves of the jittered steps) between
    // the four failures: 700 ms at least; reset each time, at most 600 ms.
    let failures = recorded.times_of(&refused);
    assert!(
        failures[3] - failures[0] >= Duration::from_millis(700),
        "the back-off grew: {:?}",
        failures[3] - failures[0]
    );
}

#[tokio::test(start_paused = true)]
async fn a_compacted_version_lists_again_from_scratch() {
    let gone = watcher::Error::WatchStartFailed(api(410));
    let first: Vec<Result<Event<u8>, watcher::Error>> = vec![
        Ok(Event::Init),
        Ok(Event::InitDone),
        Ok(Event::Apply(1)),
        Err(gone),
    ];
    let second = vec![
        Ok(Event::Init),
        Ok(Event::InitApply(2)),
        Ok(Event::InitDone),
    ];
    let recorded = Arc::new(Recorded::default());
    let events: Vec<Event<u8>> = scripted(vec![first, second], recorded.clone())
        .collect()
        .await;
    assert!(
        matches!(
            events[..],
            [
                Event::Init,
                Event::InitDone,
                Event::Apply(1),
                Event::Init,
                Event::InitApply(2),
                Event::InitDone
            ]
        ),
        "{events:?}"
    );
    assert_eq!(recorded.names(), ["listed", "Expired", "listed"]);
}

/// A ConfigMap watch through [`watch`], once it has listed.
async fn listed_config_maps(
    client: &kube::Client,
    reported: Arc<Recorded>,
) -> BoxStream<'static, Event<ConfigMap>> {
    let mut events = watch(client, "ConfigMap", reported, |client| {
        watcher::watcher(Api::<ConfigMap>::all(client), watcher::Config::default())
    })
    .boxed();
    assert!(matches!(events.next().await, Some(Event::Init)));
    assert!(matches!(events.next().await, Some(Event::InitDone)));
    events
}

/// An API server that ends every watch as soon as it has answered it.
fn server_ending_every_watch(requests: Arc<Recorded>) -> kube::Client {
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let requests = requests.clone();
        async move {
            let watching = is_watch(request.uri());
            requests.push(if watching { "watch" } else { "list" });
            // Unpaced, the watcher would never let the paused clock move: stop answering.
            if requests.times_of("watch").len() > 100 {
                futures::future::pending::<()>().await;
            }
            let body = if watching {
                br#"{"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"6"}}}
"#
                .to_vec()
            } else {
                br#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"5"},"items":[]}"#
                    .to_vec()
            };
            Ok::<_, std::convert::Infallible>(http::Response::new(kube::client::Body::from(body)))
        }
    });
    kube::Client::new(service, "default")
}

#[tokio::test(start_paused = true)]
async fn a_server_that_ends_every_watch_at_once_is_asked_ever_less_often() {
    let requests = Arc::new(Recorded::default());
    let client = server_ending_every_watch(requests.clone());
    let reported = Arc::new(Recorded::default());
    let mut events = listed_config_maps(&client, reported.clone()).await;
    // The watcher resumes after every end on its own; nothing more reaches the consumer.
    let more = tokio::time::timeout(Duration::from_secs(20), events.next()).await;
    assert!(more.is_err(), "no event: {more:?}");
    let watches = requests.times_of("watch");
    assert!(
        (8..40).contains(&watches.len()),
        "paced, not a tight loop: {} watches in 20 s",
        watches.len()
    );
    let gaps: Vec<Duration> = watches.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(gaps[gaps.len() - 1] >= RETRY_CAP / 2, "{gaps:?}");
    let names = reported.names();
    assert_eq!(&names[..2], ["started", "heard"], "{names:?}");
    assert!(names.contains(&"listed".to_string()), "{names:?}");
    let opened = reported.times_of("opened").len();
    assert_eq!(opened, watches.len(), "every answered watch is reported");
}

type TestBody = UnsyncBoxBody<bytes::Bytes, std::convert::Infallible>;

fn body_of(text: &'static str) -> TestBody {
    http_body_util::Full::new(bytes::Bytes::from_static(text.as_bytes())).boxed_unsync()
}

/// An API server whose first two watch requests are refused with 503, and which then keeps
/// the watch open after one bookmark.
fn server_refusing_two_watches(requests: Arc<Recorded>) -> kube::Client {
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let requests = requests.clone();
        async move {
            let watching = is_watch(request.uri());
            requests.push(if watching { "watch" } else { "list" });
            let response = if !watching {
                http::Response::new(body_of(
                    r#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"5"},"items":[]}"#,
                ))
            } else if requests.times_of("watch").len() <= 2 {
                let mut refused = http::Response::new(body_of(
                    r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"starting","reason":"ServiceUnavailable","code":503}"#,
                ));
                *refused.status_mut() = http::StatusCode::SERVICE_UNAVAILABLE;
                refused
            } else {
                let bookmark = bytes::Bytes::from_static(
                    b"{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"6\"}}}\n",
                );
                let frames = futures::stream::iter([Ok(http_body::Frame::data(bookmark))])
                    .chain(futures::stream::pending());
                http::Response::new(http_body_util::StreamBody::new(frames).boxed_unsync())
            };
            Ok::<_, std::convert::Infallible>(response)
        }
    });
    kube::Client::new(service, "default")
}

#[tokio::test(start_paused = true)]
async fn a_refused_watch_request_is_a_setback_and_the_next_answer_is_the_connection() {
    let requests = Arc::new(Recorded::default());
    let client = server_refusing_two_watches(requests.clone());
    let reported = Arc::new(Recorded::default());
    let mut events = listed_config_maps(&client, reported.clone()).await;
    let more = tokio::time::timeout(Duration::from_secs(10), events.next()).await;
    assert!(more.is_err(), "no event: {more:?}");
    assert_eq!(
        requests.times_of("watch").len(),
        3,
        "{:?}",
        requests.names()
    );
    let names = reported.names();
    let after_list: Vec<&str> = names
        .iter()
        .skip_while(|name| *name != "listed")
        .map(String::as_str)
        .collect();
    assert_eq!(
        after_list,
        [
            "listed",
            "Refused(Some(503))",
            "Refused(Some(503))",
            "heard",
            "opened",
            "heard"
        ],
        "a refusal is neither heard nor a connection; the answer and its bookmark are"
    );
}

/// An API server whose first watch finds history compacted — as a `410` answer
/// (`as_answer`) or, as kube-apiserver does, an `ERROR` event in an answered stream — and
/// which then keeps watches open.
fn server_compacting_the_first_watch(requests: Arc<Recorded>, as_answer: bool) -> kube::Client {
    const GONE: &str = r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version: 5 (7)","reason":"Expired","code":410}"#;
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let requests = requests.clone();
        async move {
            let watching = is_watch(request.uri());
            requests.push(if watching { "watch" } else { "list" });
            let first_watch = watching && requests.times_of("watch").len() == 1;
            let response = if !watching {
                http::Response::new(body_of(
                    r#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"5"},"items":[]}"#,
                ))
            } else if first_watch && as_answer {
                let mut gone = http::Response::new(body_of(GONE));
                *gone.status_mut() = http::StatusCode::GONE;
                gone
            } else if first_watch {
                http::Response::new(body_of(
                    r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version: 5 (7)","reason":"Expired","code":410}}
"#,
                ))
            } else {
                http::Response::new(
                    http_body_util::StreamBody::new(futures::stream::pending::<
                        Result<http_body::Frame<bytes::Bytes>, std::convert::Infallible>,
                    >())
                    .boxed_unsync(),
                )
            };
            Ok::<_, std::convert::Infallible>(response)
        }
    });
    kube::Client::new(service, "default")
}

#[tokio::test(start_paused = true)]
async fn a_compacted_version_lists_again_through_the_real_watcher() {
    for as_answer in [false, true] {
        let requests = Arc::new(Recorded::default());
        let client = server_compacting_the_first_watch(requests.clone(), as_answer);
        let reported = Arc::new(Recorded::default());
        let mut events = listed_config_maps(&client, reported.clone()).await;
        let relisted = tokio::time::timeout(Duration::from_secs(10), async {
            assert!(matches!(events.next().await, Some(Event::Init)));
            assert!(matches!(events.next().await, Some(Event::InitDone)));
        })
        .await;
        assert!(
            relisted.is_ok(),
            "as_answer={as_answer}: {:?}",
            requests.names()
        );
        let more = tokio::time::timeout(Duration::from_secs(10), events.next()).await;
        assert!(
            more.is_err(),
            "no error and no event reaches the consumer: {more:?}"
        );
        assert_eq!(
            requests.names(),
            ["list", "watch", "list", "watch"],
            "as_answer={as_answer}"
        );
        assert_eq!(
            reported.names().iter().filter(|n| *n == "Expired").count(),
            1,
            "as_answer={as_answer}: {:?}",
            reported.names()
        );
    }
}
