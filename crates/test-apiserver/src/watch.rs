//! Watch streams: newline-delimited `{"type", "object"}` events from a resourceVersion on,
//! with kube-apiserver's rules: no resourceVersion (or `0`) starts with synthetic `ADDED`
//! events for what exists, an older one replays the retained history, one that history no
//! longer covers ends in an `ERROR` event carrying `410 Expired`, and objects that move in or
//! out of a label selector arrive as `ADDED` or `DELETED`.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Bytes, Frame};
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use super::Body;
use super::errors::ApiError;
use super::handler::{Filters, Request, ResourceRoute, present};
use super::rbac;
use super::store::{Event, EventType, Store};

fn line(event_type: &str, object: &Value) -> Bytes {
    let mut bytes = serde_json::to_vec(&json!({"type": event_type, "object": object}))
        .expect("JSON values serialize");
    bytes.push(b'\n');
    Bytes::from(bytes)
}

/// What a stored change means to this watch, if anything.
fn translate(event: &Event, route: &ResourceRoute, filters: &Filters) -> Option<Bytes> {
    let (group, plural) = route.rt.storage_key();
    if event.group != group || event.plural != plural {
        return None;
    }
    if route
        .namespace
        .as_ref()
        .is_some_and(|ns| *ns != event.namespace)
    {
        return None;
    }
    if let Some(name) = &route.name
        && event
            .object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            != Some(name)
    {
        return None;
    }
    let now = filters.matches(&event.object);
    let before = event.previous.as_ref().is_some_and(|p| filters.matches(p));
    let event_type = match event.event_type {
        EventType::Added if now => "ADDED",
        EventType::Deleted if now => "DELETED",
        EventType::Modified if now && before => "MODIFIED",
        EventType::Modified if now => "ADDED",
        EventType::Modified if before => "DELETED",
        _ => return None,
    };
    Some(line(event_type, &present(&route.rt, &event.object)))
}

/// The watch options kube-apiserver validates: `sendInitialEvents` needs the `WatchList`
/// gate and `resourceVersionMatch=NotOlderThan`.
fn check_watch_options(query: &HashMap<String, String>, watch_list: bool) -> Result<(), ApiError> {
    if !query.contains_key("sendInitialEvents") {
        return Ok(());
    }
    let mut problems = Vec::new();
    if query.get("resourceVersionMatch").map(String::as_str) != Some("NotOlderThan") {
        problems.push(
            "resourceVersionMatch: Forbidden: sendInitialEvents requires setting \
             resourceVersionMatch to NotOlderThan",
        );
    }
    if !watch_list {
        problems.push(
            "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the \
             WatchList feature gate is enabled",
        );
    }
    let listed = match problems.as_slice() {
        [] => return Ok(()),
        [one] => one.to_string(),
        many => format!("[{}]", many.join(", ")),
    };
    Err(ApiError::new(
        422,
        "Invalid",
        format!("ListOptions.meta.k8s.io \"\" is invalid: {listed}"),
    ))
}

/// How late each resource's (plural's) events reach watchers.
pub type Lag = Arc<Mutex<HashMap<String, Duration>>>;

/// What a watch sends before it follows the store: the objects as they are (a watch from
/// no version, or one asking for initial events), or the history since the version asked for
/// (or, compacted away, a 410 `ERROR` event that ends the watch).
struct Opening {
    lines: Vec<Bytes>,
    start_version: u64,
    expired: bool,
}

fn opening(
    store: &Store,
    request: &Request,
    route: &ResourceRoute,
    filters: &Filters,
) -> Result<Opening, ApiError> {
    let requested = request
        .query
        .get("resourceVersion")
        .map(String::as_str)
        .unwrap_or("");
    check_watch_options(&request.query, store.profile.watch_list)?;
    let send_initial = request
        .query
        .get("sendInitialEvents")
        .is_some_and(|v| v == "true");
    let mut lines = Vec::new();
    let mut expired = false;
    if requested.is_empty() || requested == "0" || send_initial {
        for object in store.list(&route.rt, route.namespace.as_deref()) {
            let named = route.name.as_deref().is_none_or(|n| {
                object.pointer("/metadata/name").and_then(Value::as_str) == Some(n)
            });
            if named && filters.matches(object) {
                lines.push(line("ADDED", &present(&route.rt, object)));
            }
        }
        if send_initial {
            lines.push(line(
                "BOOKMARK",
                &json!({
                    "apiVersion": route.rt.api_version(), "kind": route.rt.kind,
                    "metadata": {
                        "resourceVersion": store.resource_version.to_string(),
                        "annotations": {"k8s.io/initial-events-end": "true"},
                    },
                }),
            ));
        }
    } else {
        let version: u64 = requested.parse().map_err(|_| {
            ApiError::bad_request(format!("invalid resource version: {requested:?}"))
        })?;
        if version < store.compacted {
            let error = ApiError::gone(version, store.compacted + 1);
            lines.push(line("ERROR", &error.status()));
            expired = true;
        } else {
            for event in store
                .history
                .iter()
                .filter(|e| e.resource_version > version)
            {
                lines.extend(translate(event, route, filters));
            }
        }
    }
    Ok(Opening {
        lines,
        start_version: store.resource_version,
        expired,
    })
}

/// One open watch, from its opening on.
struct Following {
    opening: Opening,
    sender: mpsc::Sender<Bytes>,
    receiver: broadcast::Receiver<Arc<Event>>,
    /// Changes when the server severs its connections.
    ended: tokio::sync::watch::Receiver<u64>,
    lag: Lag,
    route: ResourceRoute,
    filters: Filters,
    timeout: Duration,
    bookmarks: bool,
}

/// Sends the opening, then each matching event, until the timeout, the server ending its
/// watches, or the client going away.
async fn follow(following: Following) {
    let Following {
        opening,
        sender,
        mut receiver,
        mut ended,
        lag,
        route,
        filters,
        timeout,
        bookmarks,
    } = following;
    for bytes in opening.lines {
        if sender.send(bytes).await.is_err() {
            return;
        }
    }
    if opening.expired {
        return;
    }
    let start_version = opening.start_version;
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    ended.mark_unchanged();
    // Bookmarks let a quiet watcher resume from a recent version after a restart.
    let mut ticks = tokio::time::interval(Duration::from_secs(1));
    ticks.tick().await;
    let (mut latest, mut bookmarked) = (start_version, start_version);
    loop {
        tokio::select! {
            _ = &mut deadline => return,
            _ = ended.changed() => return,
            _ = ticks.tick(), if bookmarks => {
                if latest > bookmarked {
                    bookmarked = latest;
                    let bookmark = json!({
                        "apiVersion": route.rt.api_version(), "kind": route.rt.kind,
                        "metadata": {"resourceVersion": latest.to_string()},
                    });
                    if sender.send(line("BOOKMARK", &bookmark)).await.is_err() {
                        return;
                    }
                }
            }
            received = receiver.recv() => match received {
                Ok(event) => {
                    if event.resource_version <= start_version {
                        continue;
                    }
                    latest = latest.max(event.resource_version);
                    if let Some(bytes) = translate(&event, &route, &filters) {
                        let late = lag
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .get(&route.rt.plural)
                            .copied();
                        if let Some(late) = late {
                            tokio::time::sleep(late).await;
                        }
                        bookmarked = latest;
                        if sender.send(bytes).await.is_err() {
                            return;
                        }
                    }
                }
                Err(_) => return,
            },
        }
    }
}

pub fn start(
    store: &Mutex<Store>,
    events: &broadcast::Sender<Arc<Event>>,
    ended: tokio::sync::watch::Receiver<u64>,
    lag: Lag,
    request: &Request,
    route: &ResourceRoute,
) -> Result<Body, ApiError> {
    let filters = Filters::parse(&request.query, &route.rt.kind)?;
    let (opening, receiver) = {
        let store = store
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let attributes = route.attributes("watch");
        if !rbac::allowed(&store, &request.identity, &attributes) {
            return Err(ApiError::forbidden(rbac::denial(
                &request.identity,
                &attributes,
            )));
        }
        // Subscribed under the lock: no write falls between the opening and the stream.
        let receiver = events.subscribe();
        (opening(&store, request, route, &filters)?, receiver)
    };
    let timeout = request
        .query
        .get("timeoutSeconds")
        .and_then(|t| t.parse().ok())
        .unwrap_or(1800u64);
    let bookmarks = request
        .query
        .get("allowWatchBookmarks")
        .is_some_and(|b| b == "true");
    let (sender, mut stream) = mpsc::channel::<Bytes>(256);
    tokio::spawn(follow(Following {
        opening,
        sender,
        receiver,
        ended,
        lag,
        route: route.clone(),
        filters,
        timeout: Duration::from_secs(timeout),
        bookmarks,
    }));
    let frames = futures::stream::poll_fn(move |cx| {
        stream
            .poll_recv(cx)
            .map(|bytes| bytes.map(|b| Ok::<_, Infallible>(Frame::data(b))))
    });
    Ok(StreamBody::new(frames).boxed())
}
