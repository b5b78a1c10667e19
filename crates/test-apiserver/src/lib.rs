//! An in-process test double of kube-apiserver, served over loopback HTTPS so that a
//! `kube::Client` (or kubectl) talks to it exactly as to a real cluster.
//!
//! `TestApiServer::start()` binds a free port and serves, over TLS with a CA made for the test
//! process, discovery, CRUD, watch, patch in all four flavours (server-side apply with managed
//! fields and conflicts), deletion with finalizers and propagation, namespace termination, CRD
//! registration, dry-run, RBAC on impersonated identities and fault injection. Outages are
//! modelled at the connection level: the server can stop listening (connections refused),
//! answer every request with 503 while it "starts", and cut every open connection without a
//! TLS close_notify, as a killed kube-apiserver does. Requests are parsed here, answered by
//! `handler` (or `watch` for streams) under one lock on the `store`, and the change events
//! a write produced are then broadcast to open watches. Where behaviour had to be chosen,
//! the real server's was modelled; the deviations are listed in `tests/support/README.md`.

#![forbid(unsafe_code)]

pub mod issuer;
pub mod pki;

mod control;
mod errors;
mod fields;
mod fieldset;
mod handler;
mod list;
mod managed;
mod rbac;
mod resources;
mod schema;
mod selectors;
mod smp;
mod store;
mod validation;
mod watch;
mod yaml;

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::broadcast;

use errors::ApiError;
use handler::{Reply, Request, Route};
use rbac::{Credentials, Identity};
pub use store::ServerProfile;
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
    /// Only dry-runs (`Some(true)`) or only writes (`Some(false)`); `None` matches both.
    pub dry_run: Option<bool>,
}

/// A write another client makes right after the server answers a matching request, as a
/// controller's write can land between two requests of one client.
#[derive(Clone, Debug)]
pub struct Interleave {
    /// The request after which it happens: verb, resource plural and whether it is a dry-run.
    pub verb: String,
    pub resource: String,
    pub dry_run: bool,
    /// The object's path (`/apis/apps/v1/namespaces/ns/deployments/web`) and the JSON merge
    /// patch written there by `manager`.
    pub path: String,
    pub patch: serde_json::Value,
    pub manager: String,
}

#[derive(Default)]
struct Faults {
    rules: Vec<Fault>,
    latency: Duration,
    interleaved: Vec<Interleave>,
}

/// Whether the server is up, as a restarting kube-apiserver goes down and comes back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Availability {
    Serving,
    /// Not listening: connections are refused.
    Refusing,
    /// Listening, but every request is answered `503 Service Unavailable`.
    Unavailable,
}

struct Shared {
    store: Mutex<Store>,
    availability: tokio::sync::watch::Sender<Availability>,
    /// Every open connection, to cut them all at once.
    connections: Mutex<Vec<tokio::task::AbortHandle>>,
    events: broadcast::Sender<Arc<Event>>,
    /// Bumped to end every open watch stream.
    watch_generation: tokio::sync::watch::Sender<u64>,
    faults: Mutex<Faults>,
    requests: Mutex<Vec<RequestRecord>>,
    /// How late watch events of a resource (plural) reach their watchers.
    watch_lag: watch::Lag,
}

/// One request the server answered, for tests that count calls.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestRecord {
    pub verb: String,
    pub resource: String,
    pub name: String,
    pub dry_run: bool,
    /// A watch that asked for `sendInitialEvents` (a streaming list).
    pub initial_events: bool,
    /// Who asked (the authenticated or impersonated user).
    pub user: String,
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
    tls: Arc<Tls>,
}

struct Tls {
    acceptor: tokio_rustls::TlsAcceptor,
    ca_der: Vec<u8>,
    ca_pem: String,
}

impl Tls {
    /// One CA and serving certificate for every server of the test process: generating them
    /// per server would only cost time.
    fn shared() -> Arc<Tls> {
        static TLS: std::sync::OnceLock<Arc<Tls>> = std::sync::OnceLock::new();
        TLS.get_or_init(|| Arc::new(Tls::generate())).clone()
    }

    fn generate() -> Tls {
        let pki = pki::pki().expect("test certificates");
        let config = pki.server_config();
        Tls {
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
            ca_der: pki.ca_der,
            ca_pem: pki.ca,
        }
    }
}

/// Runs the control plane's due follow-up every few milliseconds, until the server is gone.
async fn control_loop(shared: std::sync::Weak<Shared>) {
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    loop {
        tick.tick().await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let mut store = shared.lock_store();
        control::run(&mut store, std::time::Instant::now());
        for event in store.pending.drain(..) {
            let _ = shared.events.send(event);
        }
    }
}

/// A listener on `address` that can be bound again right after it is closed.
fn listen(address: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.set_reuseaddr(true)?;
    socket.bind(address)?;
    socket.listen(1024)
}

type Body = BoxBody<Bytes, Infallible>;

impl TestApiServer {
    pub async fn start() -> TestApiServer {
        let listener =
            listen("127.0.0.1:0".parse().expect("an address")).expect("a loopback port is free");
        let address = listener.local_addr().expect("bound address");
        let (events, _) = broadcast::channel(16_384);
        let shared = Arc::new(Shared {
            store: Mutex::new(Store::with_root_ca(&Tls::shared().ca_pem)),
            availability: tokio::sync::watch::Sender::new(Availability::Serving),
            connections: Mutex::new(Vec::new()),
            events,
            watch_generation: tokio::sync::watch::Sender::new(0),
            faults: Mutex::new(Faults::default()),
            requests: Mutex::new(Vec::new()),
            watch_lag: Default::default(),
        });
        let server = TestApiServer {
            address,
            shared,
            tls: Tls::shared(),
        };
        tokio::spawn(server.clone().accept(listener));
        tokio::spawn(control_loop(Arc::downgrade(&server.shared)));
        server
    }

    /// How long after a write the control plane's follow-up runs (garbage collection,
    /// namespace and CRD cleanup, CRD establishment); zero runs it before the write is
    /// answered.
    pub fn set_control_delay(&self, delay: Duration) {
        let mut store = self.shared.lock_store();
        store.control.delay = delay;
        if delay.is_zero() {
            control::run(&mut store, std::time::Instant::now());
        }
    }

    /// How late the authorizer sees a Role or binding written (10 ms by default, as an
    /// informer on loopback); zero shows it every RBAC write made so far at once.
    pub fn set_rbac_lag(&self, lag: Duration) {
        let mut store = self.shared.lock_store();
        store.rbac_lag = lag;
        if lag.is_zero() {
            store.reveal_rbac();
        }
    }

    /// Accepts connections while the server listens; closes and reopens the port as the
    /// server goes down and comes back.
    async fn accept(self, mut listener: TcpListener) {
        let mut availability = self.shared.availability.subscribe();
        loop {
            let refusing = tokio::select! {
                accepted = listener.accept() => {
                    if let Ok((stream, _)) = accepted {
                        self.connection(stream);
                    }
                    false
                }
                _ = availability.wait_for(|a| *a == Availability::Refusing) => true,
            };
            if !refusing {
                continue;
            }
            drop(listener);
            self.sever_connections();
            if availability
                .wait_for(|a| *a != Availability::Refusing)
                .await
                .is_err()
            {
                return;
            }
            listener = loop {
                match listen(self.address) {
                    Ok(listener) => break listener,
                    Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
                }
            };
        }
    }

    fn connection(&self, stream: tokio::net::TcpStream) {
        let server = self.clone();
        let task = tokio::spawn(async move {
            let Ok(stream) = server.tls.acceptor.accept(stream).await else {
                return;
            };
            let service = service_fn(move |request| {
                let server = server.clone();
                async move { Ok::<_, Infallible>(server.serve_with_flow_control(request).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
        let mut connections = self.shared.connections.lock().expect("connections");
        connections.retain(|c| !c.is_finished());
        connections.push(task.abort_handle());
    }

    /// Cuts every open connection at the TCP level, without a TLS close_notify: clients see
    /// their watches and requests end mid-stream, as when kube-apiserver is killed.
    pub fn sever_connections(&self) {
        for connection in self
            .shared
            .connections
            .lock()
            .expect("connections")
            .drain(..)
        {
            connection.abort();
        }
    }

    /// Goes down or comes back: `Refusing` closes the port (and every open connection),
    /// `Unavailable` listens but answers every request with 503, `Serving` is back to normal.
    pub fn set_availability(&self, availability: Availability) {
        self.shared.availability.send_replace(availability);
    }

    pub fn url(&self) -> String {
        format!("https://{}", self.address)
    }

    /// A client configuration that trusts this server's CA.
    pub fn client_config(&self) -> kube::Config {
        let mut config = kube::Config::new(self.url().parse().expect("a URL"));
        config.root_cert = Some(vec![self.tls.ca_der.clone()]);
        config
    }

    /// A kubeconfig naming this server, for clients in other processes.
    pub fn kubeconfig_yaml(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: {}\n    certificate-authority-data: {}\n\
             contexts:\n- name: test\n  context:\n    cluster: test\n    user: admin\n\
             current-context: test\nusers:\n- name: admin\n  user: {{}}\n",
            self.url(),
            base64::engine::general_purpose::STANDARD.encode(&self.tls.ca_pem)
        )
    }

    /// Makes `write` once, right after the next request that matches it is answered.
    pub fn interleave(&self, write: Interleave) {
        self.shared
            .faults
            .lock()
            .expect("faults")
            .interleaved
            .push(write);
    }

    /// The interleaved write due after this request, taken off the list.
    fn take_interleaved(&self, verb: &str, resource: &str, dry_run: bool) -> Option<Interleave> {
        let mut faults = self.shared.faults.lock().expect("faults");
        let index = faults
            .interleaved
            .iter()
            .position(|w| w.verb == verb && w.resource == resource && w.dry_run == dry_run)?;
        Some(faults.interleaved.remove(index))
    }

    /// Makes an interleaved write as the admin, before the matching request is answered.
    fn write_interleaved(store: &mut Store, write: &Interleave) {
        let request = Request {
            method: "PATCH".into(),
            path: write.path.clone(),
            query: [("fieldManager".to_string(), write.manager.clone())].into(),
            content_type: "application/merge-patch+json".into(),
            accept: "application/json".into(),
            user_agent: write.manager.clone(),
            identity: rbac::Identity::admin(),
            credentials: Default::default(),
            body: write.patch.to_string().into_bytes(),
        };
        // A failed write is told, not panicked on: the store's lock must not be poisoned, and
        // the test sees the write missing.
        let failure = match handler::route(store, &write.path) {
            Ok(Route::Resource(route)) => handler::handle(store, &request, &route)
                .err()
                .map(|error| format!("{error:?}")),
            _ => Some("the path names no object".into()),
        };
        if let Some(failure) = failure {
            eprintln!("the interleaved write to {} failed: {failure}", write.path);
        }
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

    /// Drops every injected fault still to come.
    pub fn clear_faults(&self) {
        self.shared.faults.lock().expect("faults").rules.clear();
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

    /// Delivers the watch events of `resource` (a plural) `lag` late to every watcher, open or
    /// yet to come, as a busy kube-apiserver's watch cache can.
    pub fn set_watch_lag(&self, resource: &str, lag: Duration) {
        self.shared
            .watch_lag
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(resource.to_string(), lag);
    }

    /// Ends every open watch stream, as a restarting API server or a proxy timeout does.
    pub fn drop_watches(&self) {
        self.shared.watch_generation.send_modify(|g| *g += 1);
    }

    /// Plays another Kubernetes release, or flips its `WatchList` gate.
    pub fn set_profile(&self, profile: ServerProfile) {
        self.shared.lock_store().profile = profile;
    }

    /// Forgets the change history: watches from older resourceVersions get `410 Gone`.
    pub fn compact(&self) {
        self.shared.lock_store().compact();
    }

    fn take_fault(&self, verb: &str, resource: &str, dry_run: bool) -> Option<ApiError> {
        let mut faults = self.shared.faults.lock().expect("faults");
        let rule = faults.rules.iter_mut().find(|rule| {
            rule.remaining > 0
                && rule.verb.as_deref().is_none_or(|v| v == verb)
                && rule.resource.as_deref().is_none_or(|r| r == resource)
                && rule.dry_run.is_none_or(|d| d == dry_run)
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

    /// Every answer, as API Priority and Fairness (on by default in every supported release)
    /// marks it: the flow schema and priority level that admitted the request.
    async fn serve_with_flow_control(
        &self,
        request: hyper::Request<Incoming>,
    ) -> hyper::Response<Body> {
        let flow_control = self.shared.lock_store().profile.priority_and_fairness;
        let mut response = self.serve(request).await;
        if flow_control {
            let headers = response.headers_mut();
            for name in [
                "x-kubernetes-pf-flowschema-uid",
                "x-kubernetes-pf-prioritylevel-uid",
            ] {
                headers.insert(
                    name,
                    hyper::header::HeaderValue::from_static("5e1f0c2a-0000-4000-a000-00000000f10c"),
                );
            }
        }
        response
    }

    async fn serve(&self, request: hyper::Request<Incoming>) -> hyper::Response<Body> {
        if *self.shared.availability.borrow() != Availability::Serving {
            return error_response(&ApiError::new(
                503,
                "ServiceUnavailable",
                "the server is currently unable to handle the request",
            ));
        }
        let latency = self.shared.faults.lock().expect("faults").latency;
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
        let mut request = match read_request(request).await {
            Ok(request) => request,
            Err(error) => return error_response(&error),
        };
        match rbac::authenticate(&self.shared.lock_store(), &request.credentials) {
            Ok(identity) => request.identity = identity,
            Err(error) => return error_response(&error),
        }
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
                initial_events: request.query.contains_key("sendInitialEvents"),
                user: request.identity.user.clone(),
            });
        let dry_run = request.query.get("dryRun").is_some_and(|d| d == "All");
        if let Some(error) = self.take_fault(verb, &route.rt.plural, dry_run) {
            return error_response(&error);
        }
        if verb == "watch" {
            return match watch::start(
                &self.shared.store,
                &self.shared.events,
                self.shared.watch_generation.subscribe(),
                self.shared.watch_lag.clone(),
                &request,
                &route,
            ) {
                Ok(body) => streaming_response(body),
                Err(error) => error_response(&error),
            };
        }
        self.respond(&request, &route, verb)
    }

    /// Handles a request that is not a watch, under the store's lock, and sends the events
    /// it caused.
    fn respond(
        &self,
        request: &Request,
        route: &handler::ResourceRoute,
        verb: &str,
    ) -> hyper::Response<Body> {
        let dry_run = request.query.get("dryRun").is_some_and(|d| d == "All");
        let interleaved = self.take_interleaved(verb, &route.rt.plural, dry_run);
        let result = {
            let mut store = self.shared.lock_store();
            // A bug in the double must fail the request, not poison the server for the test.
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                handler::handle(&mut store, request, route)
            }))
            .unwrap_or_else(|_| {
                store.pending.clear();
                Err(ApiError::new(
                    500,
                    "InternalError",
                    "the test API server failed on this request",
                ))
            });
            if let Some(write) = &interleaved {
                TestApiServer::write_interleaved(&mut store, write);
            }
            for event in store.pending.drain(..) {
                let _ = self.shared.events.send(event);
            }
            result
        };
        match result {
            Ok(Reply {
                code,
                body,
                warnings,
            }) => {
                let body = if wants_metadata_only(&request.accept) {
                    as_partial_object_metadata(body)
                } else {
                    body
                };
                let mut response = json_response(code, &body);
                for warning in warnings {
                    // RFC 7234 `299 - "text"`, as kube-apiserver writes a warning.
                    let text = format!("299 - {}", serde_json::Value::String(warning));
                    if let Ok(value) = text.parse() {
                        response.headers_mut().append("warning", value);
                    }
                }
                response
            }
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
    let credentials = Credentials {
        bearer: header("authorization")
            .strip_prefix("Bearer ")
            .map(str::to_string),
        impersonate_user: user,
        impersonate_groups: groups,
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
        identity: Identity::anonymous(),
        credentials,
        body,
    })
}

/// Whether the client asked first for an object's metadata alone (`Accept:
/// application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1`), which kube-apiserver
/// honours on the verbs that answer with one object (get, create, update, patch, delete).
/// Lists ask for `PartialObjectMetadataList`, answered by the list handler. Not modelled: a
/// watch's events transformed, a list asked for as one object refused (406), `q` weights,
/// `meta.k8s.io/v1beta1`.
fn wants_metadata_only(accept: &str) -> bool {
    accept.split(',').next().is_some_and(|first| {
        let parameters: Vec<&str> = first.split(';').map(str::trim).collect();
        parameters.contains(&"as=PartialObjectMetadata")
            && parameters.contains(&"g=meta.k8s.io")
            && parameters.contains(&"v=v1")
    })
}

/// An object answer as kube-apiserver transforms it for a metadata-only client; a `Status`,
/// a list and any answer without metadata are left as they are.
fn as_partial_object_metadata(body: Value) -> Value {
    let kind = body.get("kind").and_then(Value::as_str).unwrap_or("");
    let transformed = kind != "Status" && !kind.ends_with("List");
    match body {
        Value::Object(mut object) if transformed && object.contains_key("metadata") => {
            serde_json::json!({
                "apiVersion": "meta.k8s.io/v1",
                "kind": "PartialObjectMetadata",
                "metadata": object.remove("metadata"),
            })
        }
        body => body,
    }
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
