//! Tests of the event recorder: bodies, writers, correlation on the wire, forwarding.
use super::*;

#[test]
fn metadata_is_prefixed_with_the_api_group_and_carries_event_annotations() {
    let object: Kustomization = serde_json::from_value(json!({
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
        "metadata": {"name": "apps", "namespace": "flux-system", "annotations": {
            "event.toolkit.fluxcd.io/cluster": "prod", "other.io/x": "no"}},
        "spec": {"interval": "5m", "prune": true,
            "sourceRef": {"kind": "GitRepository", "name": "r"}},
    }))
    .unwrap();
    let meta = EventMeta {
        commit_status: true,
        ..EventMeta::of(Some("main@sha1:abc"), Some("v1@sha1:def"))
    };
    let expected: BTreeMap<String, String> = [
        ("event.toolkit.fluxcd.io/cluster", "prod"),
        ("kustomize.toolkit.fluxcd.io/commit_status", "update"),
        ("kustomize.toolkit.fluxcd.io/originRevision", "v1@sha1:def"),
        ("kustomize.toolkit.fluxcd.io/revision", "main@sha1:abc"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(meta.annotations(&object), expected);
    assert_eq!(
        EventMeta::default().annotations(&object).len(),
        1,
        "only the object's event annotations"
    );
}

fn kustomization(name: &str) -> Kustomization {
    serde_json::from_value(json!({
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
        "metadata": {"name": name, "namespace": "apps", "uid": "u-1"},
        "spec": {"interval": "5m", "prune": true,
            "sourceRef": {"kind": "GitRepository", "name": "r"}},
    }))
    .unwrap()
}

type Reply = Result<
    http::Response<http_body_util::Full<hyper::body::Bytes>>,
    Box<dyn std::error::Error + Send + Sync>,
>;

/// An API server's answer: `body` as JSON with `status`.
fn json_reply(status: u16, body: &serde_json::Value) -> Reply {
    Ok(http::Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(http_body_util::Full::<hyper::body::Bytes>::from(
            serde_json::to_vec(body)?,
        ))?)
}

/// A client whose API server answers nothing until `open` is sent, then records each
/// request (method, path and Event reason or patched count) and echoes its body.
fn gated_client() -> (
    kube::Client,
    tokio::sync::watch::Sender<bool>,
    std::sync::Arc<std::sync::Mutex<Vec<String>>>,
) {
    use http_body_util::BodyExt;
    let (open, gate) = tokio::sync::watch::channel(false);
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let mut gate = gate.clone();
        let log = log.clone();
        async move {
            let _ = gate.wait_for(|open| *open).await;
            let method = request.method().to_string();
            let path = request.uri().path().to_string();
            let body = request.into_body().collect().await?.to_bytes();
            let mut sent: serde_json::Value = serde_json::from_slice(&body)?;
            let what = sent["reason"]
                .as_str()
                .map_or_else(|| format!("count {}", sent["count"]), str::to_string);
            log.lock().unwrap().push(format!("{method} {path} {what}"));
            if method == "PATCH" {
                sent = json!({"apiVersion": "v1", "kind": "Event",
                    "metadata": {"name": path.rsplit('/').next()},
                    "involvedObject": {}});
            }
            json_reply(if method == "POST" { 201 } else { 200 }, &sent)
        }
    });
    (kube::Client::new(service, "default"), open, seen)
}

/// As client-go's recorder for Flux: publishing does not wait for the API server, a
/// Kustomization's Events are written in the order they were published, and a repeat of
/// the same event bumps the first one's count.
#[tokio::test]
async fn events_are_queued_written_in_order_and_repeats_counted() {
    let (client, open, seen) = gated_client();
    let recorder = Recorder::new(client, "kustomize-controller");
    let object = kustomization("apps");
    let meta = EventMeta::default();
    recorder.publish(&object, EventType::Normal, "Progressing", "created", &meta);
    recorder.publish(
        &object,
        EventType::Warning,
        "HealthCheckFailed",
        "late",
        &meta,
    );
    recorder.publish(&object, EventType::Normal, "Progressing", "created", &meta);
    let other = kustomization("web");
    recorder.publish(&other, EventType::Normal, "Other", "web's", &meta);
    // Publishing returned; the gated server has answered nothing yet.
    assert!(
        seen.lock().unwrap().is_empty(),
        "publish returned while the API server had answered nothing"
    );
    open.send(true).unwrap();
    recorder.flush(Duration::from_secs(5)).await;
    let all = seen.lock().unwrap().clone();
    assert_eq!(all.len(), 4, "flushed every writer: {all:?}");
    let seen: Vec<_> = all.into_iter().filter(|s| !s.contains("Other")).collect();
    assert_eq!(seen[0], "POST /api/v1/namespaces/apps/events Progressing");
    assert_eq!(
        seen[1],
        "POST /api/v1/namespaces/apps/events HealthCheckFailed"
    );
    assert!(
        seen[2].starts_with("PATCH /api/v1/namespaces/apps/events/apps.")
            && seen[2].ends_with("count 2"),
        "{seen:?}"
    );
}

/// The Event is client-go's recorder's, annotated with the event metadata; what the
/// Kustomization lacks (a resourceVersion) is left out rather than sent as null, and
/// notification-controller's copy carries the same metadata.
#[tokio::test]
async fn event_bodies_are_client_gos_event_and_flux_event() {
    let (client, _open, _seen) = gated_client();
    let recorder = Recorder::new(client, "kustomize-controller")
        .with_events_addr(Some("http://127.0.0.1:1/".into()));
    let object = kustomization("apps");
    let meta = EventMeta::of(Some("main@sha1:abc"), None);
    let now = "2026-11-27T14:00:00Z";
    let mut recorded = Recorded::of(
        &object,
        EventType::Warning,
        "HealthCheckFailed",
        "late",
        &meta,
    );
    recorded.now = now.into();
    let name = recorded.name.clone();
    let event = event_body(&recorded, "kustomize-controller", &name, 1, now, false);
    let forwarded = recorder.forwarded(&recorded);
    let event: serde_json::Value = serde_json::from_slice(&event).unwrap();
    assert!(name.starts_with("apps."), "{name}");
    assert_eq!(
        event,
        json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name, "namespace": "apps", "annotations": {
                "kustomize.toolkit.fluxcd.io/revision": "main@sha1:abc"}},
            "involvedObject": {"apiVersion": "kustomize.toolkit.fluxcd.io/v1",
                "kind": "Kustomization", "namespace": "apps", "name": "apps", "uid": "u-1"},
            "reason": "HealthCheckFailed", "message": "late", "type": "Warning",
            "source": {"component": "kustomize-controller"},
            "reportingComponent": "kustomize-controller",
            "firstTimestamp": now, "lastTimestamp": now, "count": 1,
        })
    );
    let forwarded: serde_json::Value = serde_json::from_slice(&forwarded.unwrap()).unwrap();
    assert_eq!(forwarded["severity"], "error");
    assert_eq!(forwarded["involvedObject"], event["involvedObject"]);
    assert_eq!(
        forwarded["metadata"],
        json!({"kustomize.toolkit.fluxcd.io/revision": "main@sha1:abc"})
    );
    assert_eq!(forwarded["reportingController"], "kustomize-controller");
    let plain = Recorded::of(&object, EventType::Normal, "r", "n", &EventMeta::default());
    let without = event_body(&plain, "kustomize-controller", &plain.name, 1, now, false);
    let without: serde_json::Value = serde_json::from_slice(&without).unwrap();
    assert!(without["metadata"].get("annotations").is_none());
    let long = format!("a{}", "é".repeat(MAX_NOTE));
    assert_eq!(
        bounded(&long).len(),
        MAX_NOTE - 1,
        "cut at a character boundary"
    );
}

/// client-go's aggregator's Event: the message prefixed, no annotations, no reporting
/// controller; the event's own name, count and first timestamp as given.
#[test]
fn a_combined_event_is_client_gos_aggregate() {
    let recorded = Recorded {
        namespace: "apps".into(),
        object: "apps".into(),
        uid: Some("u-1".into()),
        resource_version: None,
        event_type: EventType::Normal,
        reason: "ReconciliationSucceeded".into(),
        message: "Reconciliation finished in 1.2ms, next run in 90s".into(),
        annotations: [(
            "kustomize.toolkit.fluxcd.io/revision".to_string(),
            "r".to_string(),
        )]
        .into(),
        name: "apps.1".into(),
        now: "2026-11-27T14:00:00Z".into(),
    };
    let body = |combined| -> serde_json::Value {
        serde_json::from_slice(&event_body(
            &recorded,
            "kustomize-controller",
            "apps.2",
            3,
            "2026-11-27T13:00:00Z",
            combined,
        ))
        .unwrap()
    };
    let combined = body(true);
    assert_eq!(
        combined["message"],
        "(combined from similar events): Reconciliation finished in 1.2ms, next run in 90s"
    );
    assert!(combined["metadata"].get("annotations").is_none());
    assert!(combined.get("reportingComponent").is_none());
    assert_eq!(combined["metadata"]["name"], "apps.2");
    assert_eq!(combined["count"], 3);
    assert_eq!(combined["firstTimestamp"], "2026-11-27T13:00:00Z");
    assert_eq!(combined["lastTimestamp"], "2026-11-27T14:00:00Z");
    let plain = body(false);
    assert_eq!(plain["message"], recorded.message);
    assert_eq!(
        plain["metadata"]["annotations"]["kustomize.toolkit.fluxcd.io/revision"],
        "r"
    );
    assert_eq!(plain["reportingComponent"], "kustomize-controller");
}

/// As client-go's recordEvent: a repeat whose Event is gone (expired) is written again
/// under the first one's name, with its first timestamp and the count it reached.
#[tokio::test]
async fn a_repeat_of_an_expired_event_is_written_again_with_its_count() {
    use http_body_util::BodyExt;
    let posted = std::sync::Arc::new(std::sync::Mutex::new(Vec::<serde_json::Value>::new()));
    let log = posted.clone();
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let log = log.clone();
        async move {
            let method = request.method().clone();
            let body = request.into_body().collect().await?.to_bytes();
            let (status, reply) = if method == http::Method::PATCH {
                (
                    404,
                    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                    "reason": "NotFound", "code": 404, "message": "events not found"}),
                )
            } else {
                let sent: serde_json::Value = serde_json::from_slice(&body)?;
                log.lock().unwrap().push(sent.clone());
                (201, sent)
            };
            json_reply(status, &reply)
        }
    });
    let recorder = Recorder::new(
        kube::Client::new(service, "default"),
        "kustomize-controller",
    );
    let object = kustomization("apps");
    let meta = EventMeta::of(Some("main@sha1:abc"), None);
    // The first is created; its repeat's count patch finds it gone.
    for _ in 0..2 {
        recorder.publish(
            &object,
            EventType::Warning,
            "HealthCheckFailed",
            "late",
            &meta,
        );
        recorder.flush(Duration::from_secs(5)).await;
    }
    let posted = posted.lock().unwrap().clone();
    assert_eq!(posted.len(), 2, "{posted:#?}");
    let (first, again) = (&posted[0], &posted[1]);
    assert_eq!(again["metadata"]["name"], first["metadata"]["name"]);
    assert_eq!(again["count"], 2);
    assert_eq!(again["firstTimestamp"], first["firstTimestamp"]);
    assert_eq!(again["message"], "late");
    assert_eq!(
        again["metadata"]["annotations"],
        first["metadata"]["annotations"]
    );
    assert_eq!(again["reportingComponent"], "kustomize-controller");
}

/// notification-controller answering 503 (restarting) gets the event again; a 4xx or a 501
/// is not retried.
#[tokio::test]
async fn forwarding_retries_server_errors_and_stops_on_success() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}/", listener.local_addr().unwrap());
    let server = tokio::spawn(async move {
        let mut answered = Vec::new();
        let statuses = [
            "503 Service Unavailable",
            "202 Accepted",
            "400 Bad Request",
            "501 Not Implemented",
            "500 retried a 501",
        ];
        for status in statuses {
            let Ok(Ok((mut stream, _))) =
                tokio::time::timeout(Duration::from_secs(3), listener.accept()).await
            else {
                break;
            };
            let mut buffer = vec![0u8; 4096];
            let _ = stream.read(&mut buffer).await;
            let reply =
                format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
            let _ = stream.write_all(reply.as_bytes()).await;
            answered.push(status);
        }
        answered
    });
    let http = crate::tls::client_builder().build().unwrap();
    let about = || ("apps".to_string(), "apps".to_string());
    for _ in 0..3 {
        forward(http.clone(), address.clone(), b"{}".to_vec(), about()).await;
    }
    let answered = server.await.unwrap();
    assert_eq!(
        answered,
        [
            "503 Service Unavailable",
            "202 Accepted",
            "400 Bad Request",
            "501 Not Implemented"
        ],
        "one retry after the 503, none after the 400 or the 501"
    );
}

/// A notification-controller whose certificate is not trusted is not asked again, as Flux's
/// retrying client does not: the handshake would fail the same way.
#[tokio::test]
async fn forwarding_to_an_untrusted_certificate_is_not_retried() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("https://{}/", listener.local_addr().unwrap());
    let pki = test_apiserver::pki::pki().unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(pki.server_config()));
    let server = tokio::spawn(async move {
        let mut handshakes = 0;
        while let Ok(Ok((stream, _))) =
            tokio::time::timeout(Duration::from_secs(1), listener.accept()).await
        {
            handshakes += 1;
            let _ = acceptor.accept(stream).await;
        }
        handshakes
    });
    let http = crate::tls::client_builder().build().unwrap();
    let error = http.post(&address).send().await.unwrap_err();
    assert!(crate::retryable_http::is_permanent(&error), "{error:?}");
    forward(
        http,
        address,
        b"{}".to_vec(),
        ("apps".into(), "apps".into()),
    )
    .await;
    assert_eq!(server.await.unwrap(), 2, "one handshake each, none again");
    let refused = crate::tls::client_builder()
        .build()
        .unwrap()
        .get("http://127.0.0.1:1/")
        .send()
        .await
        .unwrap_err();
    assert!(
        !crate::retryable_http::is_permanent(&refused),
        "{refused:?}"
    );
}

/// A client whose API server is out of reach for the first `unreached` requests (the
/// connection refused), then answers each as `answer` says (status; a 2xx echoes the body);
/// `calls` counts every request.
fn flaky_client(
    unreached: usize,
    answer: u16,
) -> (kube::Client, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use http_body_util::BodyExt;
    let calls = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = calls.clone();
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let log = log.clone();
        async move {
            let body = request.into_body().collect().await?.to_bytes();
            let sent: serde_json::Value = serde_json::from_slice(&body)?;
            let call = {
                let mut calls = log.lock().unwrap();
                calls.push(sent["reason"].as_str().unwrap_or_default().to_string());
                calls.len()
            };
            if call <= unreached {
                let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
                return Err(Box::new(refused) as Box<dyn std::error::Error + Send + Sync>);
            }
            if answer < 300 {
                return json_reply(answer, &sent);
            }
            json_reply(
                answer,
                &json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                    "reason": "Invalid", "code": answer, "message": "refused"}),
            )
        }
    });
    (kube::Client::new(service, "default"), calls)
}

/// Publishes an event of each reason, in order, to a [`flaky_client`] and waits until the
/// writer is done with them: the requests made (by reason), and how long that took.
async fn sent_to_a_flaky_server(
    unreached: usize,
    answer: u16,
    reasons: &[&str],
) -> (Vec<String>, Duration) {
    let object = kustomization("apps");
    let (client, calls) = flaky_client(unreached, answer);
    let recorder = Recorder::new(client, "kustomize-controller");
    let started = tokio::time::Instant::now();
    for reason in reasons {
        recorder.publish(
            &object,
            EventType::Normal,
            reason,
            reason,
            &EventMeta::default(),
        );
    }
    recorder.flush(Duration::from_secs(300)).await;
    let sent = calls.lock().unwrap().clone();
    (sent, started.elapsed())
}

/// As client-go's broadcaster: an Event the server could not be reached for is held and
/// tried again (the Events after it wait, in order), twelve tries at most, 10 s apart after
/// a random first pause; then the writer goes on.
#[tokio::test(start_paused = true)]
async fn an_event_is_tried_again_while_the_server_is_out_of_reach() {
    let (sent, waited) = sent_to_a_flaky_server(2, 201, &["First", "Second"]).await;
    assert_eq!(
        sent,
        ["First", "First", "First", "Second"],
        "the first Event tried until written, the second after it"
    );
    assert!(
        waited >= Duration::from_secs(10) && waited <= Duration::from_secs(20),
        "a random pause below 10 s, then 10 s: {waited:?}"
    );
    let (sent, _) = sent_to_a_flaky_server(usize::MAX, 201, &["Lost"]).await;
    assert_eq!(sent.len(), 12, "client-go's maxTriesPerEvent");
}

/// An Event the server refused is not sent again: it would be refused the same way.
#[tokio::test(start_paused = true)]
async fn an_event_the_server_refused_is_not_tried_again() {
    let (sent, _) = sent_to_a_flaky_server(0, 422, &["Refused", "Next"]).await;
    assert_eq!(sent, ["Refused", "Next"]);
}

/// An Event the server says exists (as a retry after a lost answer is told) counts as
/// written, as client-go's correlator counts it: its repeat patches the count.
#[tokio::test]
async fn an_event_the_server_says_exists_is_counted_by_its_repeat() {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let log = seen.clone();
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let log = log.clone();
        async move {
            let method = request.method().to_string();
            log.lock().unwrap().push(method.clone());
            if method == "POST" {
                return json_reply(
                    409,
                    &json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                        "reason": "AlreadyExists", "code": 409, "message": "exists"}),
                );
            }
            json_reply(
                200,
                &json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "x"},
                    "involvedObject": {}}),
            )
        }
    });
    let recorder = Recorder::new(
        kube::Client::new(service, "default"),
        "kustomize-controller",
    );
    let object = kustomization("apps");
    for _ in 0..2 {
        recorder.publish(
            &object,
            EventType::Normal,
            "Same",
            "same",
            &EventMeta::default(),
        );
    }
    recorder.flush(Duration::from_secs(5)).await;
    assert_eq!(*seen.lock().unwrap(), ["POST", "PATCH"]);
}

/// What Flux logs of each event, by level, outside the reconciliation's context: nothing at
/// info; at debug controller-runtime's `events` line (type, object, reason); with trace
/// fluxcd/pkg's recorder line too, a Warning as an error with its reason the error.
#[tokio::test]
async fn published_events_are_logged_as_fluxs_pipeline_logs_them() {
    use crate::logging::{Encoding, captured};
    use tracing_subscriber::filter::LevelFilter;
    let (client, _open, _seen) = gated_client();
    let recorder = Recorder::new(client, "kustomize-controller");
    let object = kustomization("apps");
    let meta = EventMeta::of(Some("main@sha1:abc"), None);
    let publish = || {
        let reconcile = tracing::info_span!("reconcile", reconcileID = "r-1");
        let _in_it = reconcile.enter();
        recorder.publish(
            &object,
            EventType::Warning,
            "HealthCheckFailed",
            "late",
            &meta,
        );
        let plain = EventMeta::default();
        recorder.publish(&object, EventType::Normal, "Progressing", "done", &plain);
    };
    // Each line from its message on (the time varies).
    let lines = |level| -> Vec<String> {
        captured(Encoding::Json, level, publish)
            .lines()
            .map(|line| {
                let (head, rest) = line.split_once(",\"msg\"").unwrap();
                let level = head.split('"').nth(3).unwrap();
                let logger = head.split_once("\"logger\":").map(|(_, l)| l);
                format!("{level} {} {rest}", logger.unwrap_or("-"))
            })
            .collect()
    };
    assert_eq!(lines(LevelFilter::INFO), Vec::<String>::new());
    let object_json = r#"{"kind":"Kustomization","namespace":"apps","name":"apps","uid":"u-1","apiVersion":"kustomize.toolkit.fluxcd.io/v1"}"#;
    let debug_lines = [
        format!(
            r#"debug "events" :"late","type":"Warning","object":{object_json},"reason":"HealthCheckFailed"}}"#
        ),
        format!(
            r#"debug "events" :"done","type":"Normal","object":{object_json},"reason":"Progressing"}}"#
        ),
    ];
    assert_eq!(lines(LevelFilter::DEBUG), debug_lines);
    let who = r#""name":"apps","namespace":"apps","reconciler kind":"Kustomization""#;
    assert_eq!(
        lines(LevelFilter::TRACE),
        [
            format!(
                r#"error - :"late",{who},"annotations":{{"kustomize.toolkit.fluxcd.io/revision":"main@sha1:abc"}},"error":"HealthCheckFailed"}}"#
            ),
            debug_lines[0].clone(),
            format!(r#"info - :"done",{who},"reason":"Progressing","annotations":null}}"#),
            debug_lines[1].clone(),
        ]
    );
}
