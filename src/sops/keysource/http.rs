//! The one HTTP client key services are called with: bounded in time, in attempts and in
//! the size of what it reads; errors keep their cause chain and never a header or body
//! that was sent.

use std::sync::OnceLock;
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
/// deadline nothing more is sent, so a key service that is down cannot hold a build for
/// longer than its Kustomization's timeout.
#[derive(Default)]
pub(crate) struct Http {
    client: OnceLock<Result<Client, String>>,
    deadline: Option<Instant>,
}

impl Http {
    pub(crate) fn new(deadline: Option<Instant>) -> Http {
        Http {
            client: OnceLock::new(),
            deadline,
        }
    }

    /// Sends the request `build` makes, again after a transient failure; `what` names the
    /// call in errors ("Decrypt at https://…").
    pub(crate) fn send(
        &self,
        what: &str,
        build: impl Fn(&Client) -> RequestBuilder,
    ) -> Result<Answer, String> {
        let client = self
            .client
            .get_or_init(client)
            .as_ref()
            .map_err(Clone::clone)?;
        send(what, self.deadline, || build(client))
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
}

fn send(
    what: &str,
    deadline: Option<Instant>,
    build: impl Fn() -> RequestBuilder,
) -> Result<Answer, String> {
    let mut last = String::new();
    for attempt in 0..ATTEMPTS {
        if attempt > 0 {
            std::thread::sleep(Duration::from_millis(200 << attempt));
        }
        let mut request = build();
        if let Some(deadline) = deadline {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!(
                    "{what}: not sent, the decryption ran out of time{}",
                    if last.is_empty() {
                        String::new()
                    } else {
                        format!(" (last: {last})")
                    }
                ));
            }
            request = request.timeout(left.min(TIMEOUT));
        }
        match request.send() {
            Ok(response) => {
                let status = response.status().as_u16();
                let body = read_bounded(response)
                    .map_err(|e| format!("{what}: reading the answer: {e}"))?;
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
            Err(error) => return Err(format!("{what}: {}", crate::report::cause_chain(&error))),
        }
    }
    Err(format!("{last} (after {ATTEMPTS} attempts)"))
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
