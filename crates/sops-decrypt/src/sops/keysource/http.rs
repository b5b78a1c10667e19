//! The one HTTP client key services are called with: bounded in time, in attempts and in
//! the size of what it reads; errors keep their cause chain and never a header or body
//! that was sent.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use reqwest::blocking::{Client, RequestBuilder, Response};

use super::KeySourceError;
use crate::auth::AuthError;

/// How long one request may take, connecting included.
const TIMEOUT: Duration = Duration::from_secs(15);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Attempts per request: a refused connection, a timeout, 429 or 5xx is tried again.
const ATTEMPTS: u32 = 3;
/// Key service answers are small JSON documents.
const MAX_RESPONSE_BYTES: u64 = 1 << 20;

/// Why a call to a key service or identity provider gave no usable answer; `what` names the
/// call ("Decrypt at https://…"). Never holds a header or body that was sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServiceError {
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
    /// The origin did not answer earlier in the same decryption.
    #[error("{what}: not sent, as earlier: {earlier}")]
    Skipped {
        what: String,
        earlier: Box<ServiceError>,
    },
    #[error("{what}: not sent, the decryption ran out of time{}", last_attempt(.last))]
    OutOfTime { what: String, last: Option<String> },
    /// Every attempt failed to connect, timed out or was answered 429/5xx.
    #[error("{last} (after {attempts} attempts)")]
    Unreachable { last: String, attempts: u32 },
    #[error("{what}: {cause}")]
    Transport { what: String, cause: String },
    #[error("{what}: reading the answer: {cause}")]
    Read { what: String, cause: String },
    /// The service refused, with its own words and error code when it gave any.
    #[error("{what}: HTTP {status}{}{}", service_words(.message), error_code(.code))]
    Status {
        what: String,
        status: u16,
        message: Option<String>,
        code: Option<String>,
    },
    #[error("{what}: the answer (HTTP {status}) is not JSON: {cause}")]
    NotJson {
        what: String,
        status: u16,
        cause: String,
    },
    /// The answer lacks what the call is for.
    #[error("{what}: the answer has no {field}")]
    Missing { what: String, field: String },
    #[error("{what}: {field} is not base64")]
    NotBase64 { what: String, field: String },
}

fn last_attempt(last: &Option<String>) -> String {
    last.as_ref()
        .map(|last| format!(" (last: {last})"))
        .unwrap_or_default()
}

fn error_code(code: &Option<String>) -> String {
    code.as_ref()
        .map(|code| format!(" ({code})"))
        .unwrap_or_default()
}

fn service_words(message: &Option<String>) -> String {
    message
        .as_ref()
        .map(|message| format!(": {message}"))
        .unwrap_or_default()
}

/// The client the key services of one decryption share, and the time they have: past the
/// deadline nothing more is sent, and a service that did not answer all its attempts is not
/// asked again in the same decryption, so a key service that is down cannot hold a build
/// for longer than its Kustomization's timeout, nor once per file.
#[derive(Default)]
pub struct Http {
    client: OnceLock<Result<Client, ServiceError>>,
    deadline: Option<Instant>,
    /// Origins that did not answer, and how they failed.
    unreachable: Mutex<HashMap<String, ServiceError>>,
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
    pub fn new(deadline: Option<Instant>, tokens: Option<CacheUse>) -> Http {
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
        fetch: impl FnOnce() -> Result<crate::auth::cache::Fetched, AuthError>,
    ) -> Result<crate::auth::cache::Cached, AuthError> {
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
    ) -> Result<Answer, ServiceError> {
        self.send_within(what, TIMEOUT, build)
    }

    /// [`Http::send`], each attempt limited to `limit` (an instance metadata service, which
    /// answers at once where it exists).
    pub(crate) fn send_within(
        &self,
        what: &str,
        limit: Duration,
        build: impl Fn(&Client) -> RequestBuilder,
    ) -> Result<Answer, ServiceError> {
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
            return Err(ServiceError::Skipped {
                what: what.to_string(),
                earlier: Box::new(earlier),
            });
        }
        let sent = send(what, self.deadline, limit, || build(client));
        if let Err(error @ ServiceError::Unreachable { .. }) = &sent
            && let Ok(mut unreachable) = self.unreachable.lock()
        {
            unreachable.insert(origin, error.clone());
        }
        sent
    }
}

fn client() -> Result<Client, ServiceError> {
    crate::tls::blocking_client_builder()
        .timeout(TIMEOUT)
        .connect_timeout(CONNECT_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| ServiceError::Client(crate::report::cause_chain(&e)))
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

    /// The answer as JSON; `what` names the call in the error.
    pub(crate) fn json(&self, what: &str) -> Result<serde_json::Value, ServiceError> {
        serde_json::from_slice(&self.body).map_err(|e| ServiceError::NotJson {
            what: what.to_string(),
            status: self.status,
            cause: e.to_string(),
        })
    }

    /// The service's refusal, with its words at the first of `error_pointers` (see
    /// [`service_message`]).
    pub(crate) fn refusal(&self, what: &str, error_pointers: &[&str]) -> ServiceError {
        ServiceError::Status {
            what: what.to_string(),
            status: self.status,
            message: service_message(self, error_pointers),
            code: None,
        }
    }

    /// The JSON of a successful answer; for a failed one, the service's own words found at
    /// the first of `error_pointers` (see [`service_message`]).
    pub(crate) fn success_json(
        &self,
        what: &str,
        error_pointers: &[&str],
    ) -> Result<serde_json::Value, ServiceError> {
        if !self.is_success() {
            return Err(self.refusal(what, error_pointers));
        }
        self.json(what)
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
) -> Result<Vec<u8>, KeySourceError> {
    use base64::Engine;
    use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
    let field = pointer.trim_start_matches('/');
    let text = json
        .pointer(pointer)
        .and_then(serde_json::Value::as_str)
        .ok_or_else(|| ServiceError::Missing {
            what: what.to_string(),
            field: field.to_string(),
        })?;
    let bytes = match encoding {
        Base64::Standard => STANDARD.decode(text),
        Base64::UrlSafe => URL_SAFE_NO_PAD.decode(text.trim_end_matches('=')),
    }
    .map_err(|_| ServiceError::NotBase64 {
        what: what.to_string(),
        field: field.to_string(),
    })?;
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
    ) -> Result<String, ServiceError> {
        self.oauth_token_with_lifetime(what, url, form)
            .map(|(token, _)| token)
    }

    /// [`Http::oauth_token`], with how long the token lives (`expires_in`).
    pub(crate) fn oauth_token_with_lifetime(
        &self,
        what: &str,
        url: &str,
        form: &[(&str, &str)],
    ) -> Result<(String, Option<Duration>), ServiceError> {
        let answer = self.send(what, |client| client.post(url).form(form))?;
        let json = answer.success_json(what, &["/error_description", "/error"])?;
        let token = json
            .get("access_token")
            .and_then(serde_json::Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| ServiceError::Missing {
                what: what.to_string(),
                field: "access_token".to_string(),
            })?;
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

fn send(
    what: &str,
    deadline: Option<Instant>,
    limit: Duration,
    build: impl Fn() -> RequestBuilder,
) -> Result<Answer, ServiceError> {
    let mut last = None;
    for attempt in 0..ATTEMPTS {
        if attempt > 0 {
            std::thread::sleep(Duration::from_millis(200 << attempt));
        }
        let mut request = build().timeout(limit);
        if let Some(deadline) = deadline {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(ServiceError::OutOfTime {
                    what: what.to_string(),
                    last,
                });
            }
            request = request.timeout(left.min(limit));
        }
        match request.send() {
            Ok(response) => {
                let status = response.status().as_u16();
                let body = read_bounded(what, response)?;
                let answer = Answer { status, body };
                if status == 429 || status >= 500 {
                    last = Some(format!("{what}: HTTP {status}"));
                    continue;
                }
                return Ok(answer);
            }
            Err(error) if error.is_connect() || error.is_timeout() => {
                last = Some(format!("{what}: {}", crate::report::cause_chain(&error)));
            }
            Err(error) => {
                return Err(ServiceError::Transport {
                    what: what.to_string(),
                    cause: crate::report::cause_chain(&error),
                });
            }
        }
    }
    Err(ServiceError::Unreachable {
        last: last.unwrap_or_default(),
        attempts: ATTEMPTS,
    })
}

fn read_bounded(what: &str, response: Response) -> Result<Vec<u8>, ServiceError> {
    let failed = |cause: String| ServiceError::Read {
        what: what.to_string(),
        cause,
    };
    let mut body = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(response, MAX_RESPONSE_BYTES + 1),
        &mut body,
    )
    .map_err(|e| failed(e.to_string()))?;
    if body.len() as u64 > MAX_RESPONSE_BYTES {
        return Err(failed(format!("larger than {MAX_RESPONSE_BYTES} bytes")));
    }
    Ok(body)
}

/// A service's own error text from a JSON answer, at the first of `pointers` that holds a
/// string (or a list of them), cut short: it is the service's words, never ours.
pub(crate) fn service_message(answer: &Answer, pointers: &[&str]) -> Option<String> {
    let message = answer.json("").ok().and_then(|json| {
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
    message
        .filter(|m| !m.is_empty())
        .map(|m| m.chars().take(300).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_read_as_the_service_wrote_them() {
        let refused = |message: Option<&str>, code: Option<&str>| {
            ServiceError::Status {
                what: "Decrypt at https://kms.example".into(),
                status: 400,
                message: message.map(str::to_string),
                code: code.map(str::to_string),
            }
            .to_string()
        };
        assert_eq!(
            refused(None, None),
            "Decrypt at https://kms.example: HTTP 400"
        );
        assert_eq!(
            refused(Some("denied"), None),
            "Decrypt at https://kms.example: HTTP 400: denied"
        );
        assert_eq!(
            refused(Some("denied"), Some("AccessDeniedException")),
            "Decrypt at https://kms.example: HTTP 400: denied (AccessDeniedException)"
        );
        assert_eq!(
            refused(None, Some("InvalidCiphertextException")),
            "Decrypt at https://kms.example: HTTP 400 (InvalidCiphertextException)"
        );
    }
}
