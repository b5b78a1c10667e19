//! An in-process test double of kube-apiserver, served over loopback HTTP so that a
//! `kube::Client` (or kubectl) talks to it exactly as to a real cluster.
//!
//! `TestApiServer::start()` binds a free port and serves discovery, CRUD, watch, patch in all
//! four flavours (server-side apply with managed fields and conflicts), deletion with
//! finalizers and propagation, namespace termination, CRD registration, dry-run, RBAC on
//! impersonated identities and fault injection. Requests are parsed here, answered by
//! `handler` (or `watch` for streams) under one lock on the `store`, and the change events
//! a write produced are then broadcast to open watches. Where behaviour had to be chosen,
//! the real server's was modelled; the deviations are listed in `tests/support/README.md`.

mod errors;
mod fieldset;
mod handler;
mod managed;
mod rbac;
mod resources;
mod selectors;
mod store;
mod validation;
mod watch;

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::broadcast;

use errors::ApiError;
use handler::{Reply, Request, Route};
use rbac::Identity;
use store::{Event, Store};

/// A rule that makes matching requests fail.
#[derive(Clone, Debug)]
pub struct Fault {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`; `None` matches all.
    pub verb: Option<String>,
    /// A resource plural such as `configmaps`; `None` matches all.
    pub resource: Option<String>,
    /// How many more requests fail.
    pub remaining: usize,
    pub code: u16,
    /// Seconds for `Retry-After` (with 429).
    pub retry_after: Option<u64>,
}

#[derive(Default)]
struct Faults {
    rules: Vec<Fault>,
    latency: Duration,
}

struct Shared {
    store: Mutex<Store>,
    events: broadcast::Sender<Arc<Event>>,
    /// Bumped to end every open watch stream.
    watch_generation: tokio::sync::watch::Sender<u64>,
    faults: Mutex<Faults>,
    requests: Mutex<Vec<RequestRecord>>,
}

/// One request the server answered, for tests that count calls.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestRecord {
    pub verb: String,
    pub resource: String,
    pub name: String,
    pub dry_run: bool,
}

impl Shared {
    fn lock_store(&self) -> std::sync::MutexGuard<'_, Store> {
        self.store
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A running test server; it stops with the runtime that started it.
#[derive(Clone)]
pub struct TestApiServer {
    address: SocketAddr,
    shared: Arc<Shared>,
}

type Body = BoxBody<Bytes, Infallible>;

impl TestApiServer {
    pub async fn start() -> TestApiServer {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port is free");
        let address = listener.local_addr().expect("bound address");
        let (events, _) = broadcast::channel(16_384);
        let shared = Arc::new(Shared {
            store: Mutex::new(Store::new()),
            events,
            watch_generation: tokio::sync::watch::Sender::new(0),
            faults: Mutex::new(Faults::default()),
            requests: Mutex::new(Vec::new()),
        });
        let server = TestApiServer { address, shared };
        let accepting = server.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let server = accepting.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |request| {
                        let server = server.clone();
                        async move { Ok::<_, Infallible>(server.serve(request).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        server
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// A kubeconfig naming this server, for clients in other processes.
    pub fn kubeconfig_yaml(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: {}\n\
             contexts:\n- name: test\n  context:\n    cluster: test\n    user: admin\n\
             current-context: test\nusers:\n- name: admin\n  user: {{}}\n",
            self.url()
        )
    }

    /// Fails the next `fault.remaining` requests that match.
    pub fn inject(&self, fault: Fault) {
        self.shared.faults.lock().expect("faults").rules.push(fault);
    }

    /// The resource requests answered so far (discovery is not counted).
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.shared
            .requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// How many injected failures are still to come.
    pub fn pending_faults(&self) -> usize {
        let faults = self.shared.faults.lock().expect("faults");
        faults.rules.iter().map(|r| r.remaining).sum()
    }

    /// Delays every request.
    pub fn set_latency(&self, latency: Duration) {
        self.shared.faults.lock().expect("faults").latency = latency;
    }

    /// Ends every open watch stream, as a restarting API server or a proxy timeout does.
    pub fn drop_watches(&self) {
        self.shared.watch_generation.send_modify(|g| *g += 1);
    }

    /// Forgets the change history: watches from older resourceVersions get `410 Gone`.
    pub fn compact(&self) {
        self.shared.lock_store().compact();
    }

    fn take_fault(&self, verb: &str, resource: &str) -> Option<ApiError> {
        let mut faults = self.shared.faults.lock().expect("faults");
        let rule = faults.rules.iter_mut().find(|rule| {
            rule.remaining > 0
                && rule.verb.as_deref().is_none_or(|v| v == verb)
                && rule.resource.as_deref().is_none_or(|r| r == resource)
        })?;
        rule.remaining -= 1;
        let reason = match rule.code {
            429 => "TooManyRequests",
            409 => "Conflict",
            500 => "InternalError",
            503 => "ServiceUnavailable",
            504 => "Timeout",
            _ => "Unknown",
        };
        let mut error = ApiError::new(
            rule.code,
            reason,
            format!("injected fault ({verb} {resource})"),
        );
        error.retry_after = rule.retry_after;
        faults.rules.retain(|r| r.remaining > 0);
        Some(error)
    }

    async fn serve(&self, request: hyper::Request<Incoming>) -> hyper::Response<Body> {
        let latency = self.shared.faults.lock().expect("faults").latency;
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
        let request = match read_request(request).await {
            Ok(request) => request,
            Err(error) => return error_response(&error),
        };
        let route = handler::route(&self.shared.lock_store(), &request.path);
        let route = match route {
            Ok(Route::Plain(body)) => return json_response(200, &body),
            Ok(Route::Text(text)) => {
                return hyper::Response::builder()
                    .status(200)
                    .header("content-type", "text/plain; charset=utf-8")
                    .body(Full::new(Bytes::from_static(text.as_bytes())).boxed())
                    .expect("a valid response");
            }
            Ok(Route::Resource(route)) => route,
            Err(error) => return error_response(&error),
        };
        let verb = route.verb(&request.method, &request.query);
        self.shared
            .requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(RequestRecord {
                verb: verb.to_string(),
                resource: route.rt.plural.clone(),
                name: route.name.clone().unwrap_or_default(),
                dry_run: request.query.get("dryRun").is_some_and(|d| d == "All"),
            });
        if let Some(error) = self.take_fault(verb, &route.rt.plural) {
            return error_response(&error);
        }
        if verb == "watch" {
            return match watch::start(
                &self.shared.store,
                &self.shared.events,
                self.shared.watch_generation.subscribe(),
                &request,
                &route,
            ) {
                Ok(body) => streaming_response(body),
                Err(error) => error_response(&error),
            };
        }
        let result = {
            let mut store = self.shared.lock_store();
            // A bug in the double must fail the request, not poison the server for the test.
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                handler::handle(&mut store, &request, &route)
            }))
            .unwrap_or_else(|_| {
                store.pending.clear();
                Err(ApiError::new(
                    500,
                    "InternalError",
                    "the test API server failed on this request",
                ))
            });
            for event in store.pending.drain(..) {
                let _ = self.shared.events.send(event);
            }
            result
        };
        match result {
            Ok(Reply { code, body }) => json_response(code, &body),
            Err(error) => error_response(&error),
        }
    }
}

async fn read_request(request: hyper::Request<Incoming>) -> Result<Request, ApiError> {
    let (parts, body) = request.into_parts();
    let header = |name: &str| {
        parts
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    let query: HashMap<String, String> = parts
        .uri
        .query()
        .map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
        .unwrap_or_default();
    let user = header("impersonate-user");
    let groups: Vec<String> = parts
        .headers
        .get_all("impersonate-group")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(str::to_string)
        .collect();
    let identity = if user.is_empty() {
        Identity::admin()
    } else {
        Identity::impersonated(&user, &groups)
    };
    let body = body
        .collect()
        .await
        .map_err(|e| ApiError::bad_request(format!("reading the body: {e}")))?
        .to_bytes()
        .to_vec();
    Ok(Request {
        method: parts.method.as_str().to_string(),
        path: parts.uri.path().to_string(),
        query,
        content_type: header("content-type"),
        accept: header("accept"),
        user_agent: header("user-agent"),
        identity,
        body,
    })
}

fn json_response(code: u16, body: &Value) -> hyper::Response<Body> {
    let bytes = serde_json::to_vec(body).expect("JSON values serialize");
    hyper::Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(bytes)).boxed())
        .expect("a valid response")
}

fn error_response(error: &ApiError) -> hyper::Response<Body> {
    let mut response = json_response(error.code, &error.status());
    if let Some(seconds) = error.retry_after {
        response.headers_mut().insert(
            "retry-after",
            seconds
                .to_string()
                .parse()
                .expect("a number is a header value"),
        );
    }
    response
}

fn streaming_response(body: Body) -> hyper::Response<Body> {
    hyper::Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .body(body)
        .expect("a valid response")
}
