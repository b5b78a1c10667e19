//! The one HTTP client key services are called with: bounded in time, in attempts and in
//! the size of what it reads; errors keep their cause chain and never a header or body
//! that was sent.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use reqwest::blocking::{Client, RequestBuilder, Response};

/// How long one request may take, connecting included.
const TIMEOUT: Duration = Duration::from_secs(15);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Attempts per request: a refused connection, a timeout, 429 or 5xx is tried again.
const ATTEMPTS: u32 = 3;
/// Key service answers are small JSON documents.
const MAX_RESPONSE_BYTES: u64 = 1 << 20;

/// The client the key services of one decryption share, and the time they have: past the
/// deadline nothing more is sent, and a service that did not answer all its attempts is not
/// asked again in the same decryption, so a key service that is down cannot hold a build
/// for longer than its Kustomization's timeout, nor once per file.
#[derive(Default)]
pub(crate) struct Http {
    client: OnceLock<Result<Client, String>>,
    deadline: Option<Instant>,
    /// Origins that did not answer, and how they failed.
    unreachable: Mutex<HashMap<String, String>>,
    /// The controller's token cache and the object asking, when there is one.
    tokens: Option<CacheUse>,
}

/// A token cache and the object it is used for.
#[derive(Clone)]
pub struct CacheUse {
    pub cache: std::sync::Arc<crate::auth::cache::TokenCache>,
    pub kind: String,
    pub name: String,
    pub namespace: String,
}

impl Http {
    pub(crate) fn new(deadline: Option<Instant>, tokens: Option<CacheUse>) -> Http {
        Http {
            deadline,
            tokens,
            ..Http::default()
        }
    }

    /// The credential kept under `key` in the token cache, else what `fetch` gets (kept for
    /// its lifetime); without a cache, what `fetch` gets.
    pub(crate) fn cached(
        &self,
        key: &str,
        operation: &str,
        fetch: impl FnOnce() -> Result<crate::auth::cache::Fetched, String>,
    ) -> Result<crate::auth::cache::Cached, String> {
        match &self.tokens {
            None => fetch().map(|(value, _)| value),
            Some(tokens) => {
                let involved = crate::auth::cache::Involved {
                    kind: tokens.kind.clone(),
                    name: tokens.name.clone(),
                    namespace: tokens.namespace.clone(),
                    operation: operation.to_string(),
                };
                tokens.cache.get_or_fetch(key, Some(&involved), fetch)
            }
        }
    }

    /// Sends the request `build` makes, again after a transient failure; `what` names the
    /// call in errors ("Decrypt at https://…").
    pub(crate) fn send(
        &self,
        what: &str,
        build: impl Fn(&Client) -> RequestBuilder,
    ) -> Result<Answer, String> {
        self.send_within(what, TIMEOUT, build)
    }

    /// [`Http::send`], each attempt limited to `limit` (an instance metadata service, which
    /// answers at once where it exists).
    pub(crate) fn send_within(
        &self,
        what: &str,
        limit: Duration,
        build: impl Fn(&Client) -> RequestBuilder,
    ) -> Result<Answer, String> {
        let client = self
            .client
            .get_or_init(client)
            .as_ref()
            .map_err(Clone::clone)?;
        let origin = build(client)
            .build()
            .map(|request| request.url().origin().ascii_serialization())
            .unwrap_or_default();
        if let Some(earlier) = self
            .unreachable
            .lock()
            .ok()
            .and_then(|u| u.get(&origin).cloned())
        {
            return Err(format!("{what}: not sent, as earlier: {earlier}"));
        }
        match send(what, self.deadline, limit, || build(client)) {
            Ok(answer) => Ok(answer),
            Err(Failure::Unreachable(message)) => {
                if let Ok(mut unreachable) = self.unreachable.lock() {
                    unreachable.insert(origin, message.clone());
                }
                Err(message)
            }
            Err(Failure::Other(message)) => Err(message),
        }
    }
}

fn client() -> Result<Client, String> {
    Client::builder()
        .timeout(TIMEOUT)
        .connect_timeout(CONNECT_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| {
            format!(
                "cannot build the HTTP client: {}",
                crate::report::cause_chain(&e)
            )
        })
}

/// What a key service answered.
pub(crate) struct Answer {
    pub status: u16,
    pub body: Vec<u8>,
}

impl Answer {
    pub(crate) fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    pub(crate) fn json(&self) -> Result<serde_json::Value, String> {
        serde_json::from_slice(&self.body)
            .map_err(|e| format!("the answer (HTTP {}) is not JSON: {e}", self.status))
    }

    /// The JSON of a successful answer; for a failed one, the service's own words found at
    /// the first of `error_pointers` (see [`service_message`]).
    pub(crate) fn success_json(
        &self,
        what: &str,
        error_pointers: &[&str],
    ) -> Result<serde_json::Value, String> {
        if !self.is_success() {
            return Err(format!("{what}: {}", service_message(self, error_pointers)));
        }
        self.json().map_err(|e| format!("{what}: {e}"))
    }
}

/// How a key service encodes the secret it returns.
#[derive(Clone, Copy)]
pub(crate) enum Base64 {
    Standard,
    /// base64url, padding optional (Azure Key Vault).
    UrlSafe,
}

/// The wrapped secret (data key or Shamir share) a key service returned as base64 text at
/// `pointer` of its answer.
pub(crate) fn secret_at(
    what: &str,
    json: &serde_json::Value,
    pointer: &str,
    encoding: Base64,
) -> Result<Vec<u8>, String> {
    use base64::Engine;
    use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
    let field = pointer.trim_start_matches('/');
    let text = json
        .pointer(pointer)
        .and_then(serde_json::Value::as_str)
        .ok_or_else(|| format!("{what}: the answer has no {field}"))?;
    let bytes = match encoding {
        Base64::Standard => STANDARD.decode(text),
        Base64::UrlSafe => URL_SAFE_NO_PAD.decode(text.trim_end_matches('=')),
    }
    .map_err(|_| format!("{what}: {field} is not base64"))?;
    super::checked_secret(bytes)
}

impl Http {
    /// An OAuth 2.0 access token from the token endpoint `url` for the form `form` (a
    /// client-credentials, JWT-bearer or refresh-token grant).
    pub(crate) fn oauth_token(
        &self,
        what: &str,
        url: &str,
        form: &[(&str, &str)],
    ) -> Result<String, String> {
        self.oauth_token_with_lifetime(what, url, form)
            .map(|(token, _)| token)
    }

    /// [`Http::oauth_token`], with how long the token lives (`expires_in`).
    pub(crate) fn oauth_token_with_lifetime(
        &self,
        what: &str,
        url: &str,
        form: &[(&str, &str)],
    ) -> Result<(String, Option<Duration>), String> {
        let answer = self.send(what, |client| client.post(url).form(form))?;
        let json = answer.success_json(what, &["/error_description", "/error"])?;
        let token = json
            .get("access_token")
            .and_then(serde_json::Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| format!("{what}: the answer has no access_token"))?;
        Ok((token, seconds(json.get("expires_in"))))
    }
}

/// A lifetime in seconds, as a number or a numeric string (Entra ID writes either).
pub(crate) fn seconds(value: Option<&serde_json::Value>) -> Option<Duration> {
    let seconds = match value? {
        serde_json::Value::Number(n) => n.as_u64()?,
        serde_json::Value::String(s) => s.parse().ok()?,
        _ => return None,
    };
    Some(Duration::from_secs(seconds))
}

/// The time left until an RFC 3339 instant (`2026-11-26T20:00:00Z`), none when it passed.
pub(crate) fn until(instant: &str) -> Option<Duration> {
    let at = chrono::DateTime::parse_from_rfc3339(instant.trim()).ok()?;
    (at.with_timezone(&chrono::Utc) - chrono::Utc::now())
        .to_std()
        .ok()
}

/// Why a request got no usable answer.
enum Failure {
    /// Every attempt failed to connect, timed out or was answered 429/5xx.
    Unreachable(String),
    Other(String),
}

fn send(
    what: &str,
    deadline: Option<Instant>,
    limit: Duration,
    build: impl Fn() -> RequestBuilder,
) -> Result<Answer, Failure> {
    let mut last = String::new();
    for attempt in 0..ATTEMPTS {
        if attempt > 0 {
            std::thread::sleep(Duration::from_millis(200 << attempt));
        }
        let mut request = build().timeout(limit);
        if let Some(deadline) = deadline {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Failure::Other(format!(
                    "{what}: not sent, the decryption ran out of time{}",
                    if last.is_empty() {
                        String::new()
                    } else {
                        format!(" (last: {last})")
                    }
                )));
            }
            request = request.timeout(left.min(limit));
        }
        match request.send() {
            Ok(response) => {
                let status = response.status().as_u16();
                let body = read_bounded(response)
                    .map_err(|e| Failure::Other(format!("{what}: reading the answer: {e}")))?;
                let answer = Answer { status, body };
                if status == 429 || status >= 500 {
                    last = format!("{what}: HTTP {status}");
                    continue;
                }
                return Ok(answer);
            }
            Err(error) if error.is_connect() || error.is_timeout() => {
                last = format!("{what}: {}", crate::report::cause_chain(&error));
            }
            Err(error) => {
                return Err(Failure::Other(format!(
                    "{what}: {}",
                    crate::report::cause_chain(&error)
                )));
            }
        }
    }
    Err(Failure::Unreachable(format!(
        "{last} (after {ATTEMPTS} attempts)"
    )))
}

fn read_bounded(response: Response) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(response, MAX_RESPONSE_BYTES + 1),
        &mut body,
    )
    .map_err(|e| e.to_string())?;
    if body.len() as u64 > MAX_RESPONSE_BYTES {
        return Err(format!("larger than {MAX_RESPONSE_BYTES} bytes"));
    }
    Ok(body)
}

/// A service's own error text from a JSON answer, at the first of `pointers` that holds a
/// string (or a list of them), cut short: it is the service's words, never ours.
pub(crate) fn service_message(answer: &Answer, pointers: &[&str]) -> String {
    let message = answer.json().ok().and_then(|json| {
        pointers
            .iter()
            .find_map(|pointer| match json.pointer(pointer) {
                Some(serde_json::Value::String(text)) => Some(text.clone()),
                Some(serde_json::Value::Array(items)) => Some(
                    items
                        .iter()
                        .filter_map(|item| item.as_str())
                        .collect::<Vec<_>>()
                        .join("; "),
                ),
                _ => None,
            })
    });
    let mut text = format!("HTTP {}", answer.status);
    if let Some(message) = message.filter(|m| !m.is_empty()) {
        text.push_str(": ");
        text.extend(message.chars().take(300));
    }
    text
}
