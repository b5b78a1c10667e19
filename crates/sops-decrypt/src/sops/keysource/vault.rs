//! HashiCorp Vault (and OpenBao) transit: `hc_vault` entries are opened by the transit
//! engine's decrypt endpoint with the token of the decryption Secret's `sops.vault-token`
//! (or the controller's `VAULT_TOKEN`).

use std::sync::Arc;

use serde_json::json;

use super::http::{Base64, Http, secret_at};
use super::{KeySource, KeySourceError};

/// An `hc_vault` entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct VaultEntry {
    pub address: String,
    pub engine_path: String,
    pub key_name: String,
    /// Vault's own ciphertext (`vault:v1:…`), sent back as it is.
    pub enc: String,
}

/// Where a Vault token may be sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TokenScope {
    /// The tenant's own token (`sops.vault-token`): wherever its files say.
    Anywhere,
    /// The controller's `VAULT_TOKEN`: only to this address (`VAULT_ADDR`), or nowhere when
    /// it is unset, so that a tenant's file naming another Vault never receives it.
    Only(Option<String>),
}

/// A Vault token and where it may go.
pub(crate) struct VaultTransit {
    token: String,
    scope: TokenScope,
    http: Arc<Http>,
}

impl VaultTransit {
    pub(crate) fn new(token: String, scope: TokenScope, http: Arc<Http>) -> VaultTransit {
        VaultTransit { token, scope, http }
    }
}

/// `scheme://host:port` of a URL, for comparing where a token goes.
fn origin(url: &str) -> Option<String> {
    let parsed = reqwest::Url::parse(url).ok()?;
    Some(parsed.origin().ascii_serialization())
}

impl KeySource for VaultTransit {
    type Entry = VaultEntry;
    const NAME: &'static str = "HashiCorp Vault";

    fn open(&self, entry: &VaultEntry) -> Result<Option<Vec<u8>>, KeySourceError> {
        if let TokenScope::Only(allowed) = &self.scope
            && (allowed.as_deref().and_then(origin).is_none()
                || allowed.as_deref().and_then(origin) != origin(&entry.address))
        {
            return Err(KeySourceError::Unreadable(format!(
                "the controller's VAULT_TOKEN is sent only to VAULT_ADDR ({}), not to {}; \
                 give this Kustomization's token as `sops.vault-token` in its decryption Secret",
                allowed.as_deref().unwrap_or("unset"),
                entry.address
            )));
        }
        let segments = entry.engine_path.trim_matches('/').split('/');
        if segments
            .clone()
            .any(|s| s.is_empty() || s == "." || s == "..")
            || entry.key_name.contains('/')
            || entry.key_name.is_empty()
            || entry.key_name == ".."
        {
            return Err(KeySourceError::Unreadable(format!(
                "invalid engine path {:?} or key name {:?}",
                entry.engine_path, entry.key_name
            )));
        }
        let mut url = reqwest::Url::parse(&entry.address).map_err(|e| {
            KeySourceError::Unreadable(format!("invalid vault address {}: {e}", entry.address))
        })?;
        if !matches!(url.scheme(), "https" | "http") {
            return Err(KeySourceError::Unreadable(format!(
                "invalid vault address {}",
                entry.address
            )));
        }
        url.path_segments_mut()
            .map_err(|_| {
                KeySourceError::Unreadable(format!("invalid vault address {}", entry.address))
            })?
            .pop_if_empty()
            .push("v1")
            .extend(segments)
            .push("decrypt")
            .push(&entry.key_name);
        let what = format!("transit decrypt at {url}");
        let body = json!({ "ciphertext": entry.enc });
        let answer = self.http.send(&what, |client| {
            client
                .put(url.clone())
                .header("X-Vault-Token", &self.token)
                .json(&body)
        })?;
        let json = answer.success_json(&what, &["/errors"])?;
        secret_at(&what, &json, "/data/plaintext", Base64::Standard).map(Some)
    }
}
