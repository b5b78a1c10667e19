//! `--kube-api-qps` / `--kube-api-burst`: a client-side token bucket in front of every API
//! request, shared by all clients the controller makes (its own and impersonating ones), as
//! client-go's rate limiter is for Flux — only where the API server does not run API Priority
//! and Fairness: as Flux's `runtime/client`, a server that does (every supported release, by
//! default) is left to pace the controller itself, with no client-side limit. A remote
//! cluster's server is asked the same, and a client for it without APF gets client-go's
//! default limit ([`remote_limit`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tower::{Layer, Service};

/// Tokens refill at `qps` per second up to `burst`; a request takes one.
#[derive(Debug)]
struct Bucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl Bucket {
    /// Takes a token at `now`, or says how long until one is there.
    fn take(&mut self, now: Instant) -> Result<(), Duration> {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.qps).min(self.burst);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - self.tokens) / self.qps))
        }
    }
}

/// Whether the API server runs API Priority and Fairness, asked as Flux asks it (fluxcd/pkg
/// `runtime/client` through cli-utils' `flowcontrol.IsEnabled`): a `HEAD /livez/ping` whose
/// answer, even a 404, carries `X-Kubernetes-PF-FlowSchema-UID`. A failed request is a no.
pub async fn priority_and_fairness(client: &kube::Client) -> bool {
    let Ok(request) = http::Request::head("/livez/ping").body(Vec::new()) else {
        return false;
    };
    match client.send(request.map(Into::into)).await {
        Ok(response) => response
            .headers()
            .contains_key("x-kubernetes-pf-flowschema-uid"),
        Err(_) => false,
    }
}

/// The client-side limit: none where the server runs API Priority and Fairness (Flux sets QPS
/// and burst to -1 then), else `qps` and `burst`.
pub fn client_limit(priority_and_fairness: bool, qps: f32, burst: u32) -> Option<RateLimit> {
    if priority_and_fairness {
        None
    } else {
        RateLimit::new(qps, burst)
    }
}

/// client-go's QPS and burst for a config that sets none.
pub const CLIENT_GO_DEFAULT: (f32, u32) = (5.0, 10);

/// The limit of a client for a remote cluster (`spec.kubeConfig`), as fluxcd/pkg
/// `runtime/client.KubeConfig` decides it: none where that cluster runs API Priority and
/// Fairness, else client-go's default (5 QPS, burst 10) on a bucket of the client's own — the
/// `--kube-api-qps`/`--kube-api-burst` flags are for the controller's own cluster.
pub fn remote_limit(priority_and_fairness: bool) -> Option<RateLimit> {
    if priority_and_fairness {
        None
    } else {
        RateLimit::new(CLIENT_GO_DEFAULT.0, CLIENT_GO_DEFAULT.1)
    }
}

/// A shared limiter; `None` qps (or zero) means unlimited.
#[derive(Clone, Debug)]
pub struct RateLimit(Arc<Mutex<Bucket>>);

impl RateLimit {
    pub fn new(qps: f32, burst: u32) -> Option<RateLimit> {
        if qps <= 0.0 {
            return None;
        }
        let burst = f64::from(burst.max(1));
        Some(RateLimit(Arc::new(Mutex::new(Bucket {
            qps: f64::from(qps),
            burst,
            tokens: burst,
            last: Instant::now(),
        }))))
    }

    /// A limiter of the same QPS and burst with a bucket of its own, as every clientset
    /// client-go makes from one config has (Flux's event recorder among them).
    pub fn twin(&self) -> RateLimit {
        let bucket = self.0.lock().unwrap_or_else(|e| e.into_inner());
        RateLimit(Arc::new(Mutex::new(Bucket {
            qps: bucket.qps,
            burst: bucket.burst,
            tokens: bucket.burst,
            last: Instant::now(),
        })))
    }

    fn take(&self) -> Result<(), Duration> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take(Instant::now())
    }
}

impl<S> Layer<S> for RateLimit {
    type Service = Limited<S>;

    fn layer(&self, inner: S) -> Limited<S> {
        Limited {
            inner,
            limit: self.clone(),
            sleep: None,
            permitted: false,
        }
    }
}

/// A service that waits for a token before each request.
pub struct Limited<S> {
    inner: S,
    limit: RateLimit,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    /// A token was taken for the next call.
    permitted: bool,
}

/// A copy waits for its own token, as a fresh service does: the retry layer sends each
/// attempt through one.
impl<S: Clone> Clone for Limited<S> {
    fn clone(&self) -> Limited<S> {
        Limited {
            inner: self.inner.clone(),
            limit: self.limit.clone(),
            sleep: None,
            permitted: false,
        }
    }
}

impl<S, R> Service<R> for Limited<S>
where
    S: Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        while !self.permitted {
            if let Some(sleep) = self.sleep.as_mut() {
                if sleep.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.sleep = None;
            }
            match self.limit.take() {
                Ok(()) => self.permitted = true,
                Err(wait) => self.sleep = Some(Box::pin(tokio::time::sleep(wait))),
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> S::Future {
        self.permitted = false;
        self.inner.call(request)
    }
}

/// What every client the controller makes wears: the shared limiter and the request counter.
#[derive(Clone, Copy, Debug, Default)]
pub struct ClientLayers<'a> {
    pub limit: Option<&'a RateLimit>,
    pub requests: Option<&'a crate::controller::runtime_metrics::RestRequests>,
}

/// A client for `config` behind the shared limiter (or without one), counting its requests
/// when asked, retrying throttled requests as client-go does ([`crate::controller::retry_after`]),
/// and naming itself with client-go's agent ([`super::user_agent`]).
pub fn client(config: kube::Config, layers: ClientLayers<'_>) -> Result<kube::Client, kube::Error> {
    let host = config
        .cluster_url
        .authority()
        .map(|a| a.as_str().to_string())
        .unwrap_or_default();
    let mut config = config;
    config.default_retry = false;
    config
        .headers
        .push((http::header::USER_AGENT, super::user_agent::user_agent()));
    let builder = kube::client::ClientBuilder::try_from(config)?;
    let counted = tower::layer::util::Stack::new(
        tower::util::option_layer(layers.limit.cloned()),
        tower::util::option_layer(layers.requests.map(|requests| requests.at(&host))),
    );
    // Each attempt is limited and counted, as client-go's retries are; a retry sends a
    // request again through a shareable handle to kube's (boxed, single-owner) stack.
    let shared = tower::layer::util::Stack::new(tower::buffer::BufferLayer::new(1024), counted);
    let retried = tower::layer::util::Stack::new(shared, crate::controller::retry_after::layer());
    Ok(builder.with_layer(&retried).build())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_server_without_priority_and_fairness_gets_a_client_side_limit() {
        for (flow_control, qps, limited) in [
            (true, 50.0, false),
            (true, 0.0, false),
            (false, 50.0, true),
            (false, 0.0, false),
        ] {
            let limit = client_limit(flow_control, qps, 300);
            assert_eq!(limit.is_some(), limited, "APF {flow_control}, QPS {qps}");
        }
    }

    #[test]
    fn a_remote_cluster_without_priority_and_fairness_gets_client_gos_default_limit() {
        assert!(remote_limit(true).is_none());
        let limit = remote_limit(false).expect("a limit");
        let bucket = limit.0.lock().unwrap();
        assert_eq!((bucket.qps, bucket.burst), (5.0, 10.0));
    }

    #[test]
    fn tokens_refill_at_qps_up_to_burst() {
        let start = Instant::now();
        let mut bucket = Bucket {
            qps: 10.0,
            burst: 3.0,
            tokens: 3.0,
            last: start,
        };
        for _ in 0..3 {
            assert!(bucket.take(start).is_ok(), "the burst is available at once");
        }
        let wait = bucket.take(start).unwrap_err();
        assert!((wait.as_secs_f64() - 0.1).abs() < 1e-9, "{wait:?}");
        assert!(bucket.take(start + Duration::from_millis(100)).is_ok());
        // A long pause refills only up to the burst.
        let later = start + Duration::from_secs(60);
        for _ in 0..3 {
            assert!(bucket.take(later).is_ok());
        }
        assert!(bucket.take(later).is_err());
        assert!(RateLimit::new(0.0, 10).is_none());
    }

    #[test]
    fn a_twin_has_its_own_bucket_of_the_same_size() {
        let limit = RateLimit::new(1.0, 2).unwrap();
        assert!(limit.take().is_ok() && limit.take().is_ok());
        assert!(limit.take().is_err(), "the original is drained");
        let twin = limit.twin();
        assert!(
            twin.take().is_ok() && twin.take().is_ok(),
            "the twin starts full"
        );
        assert!(twin.take().is_err(), "with the original's burst");
        assert!(
            limit.take().is_err(),
            "draining the twin did not refill the original"
        );
    }
}
