//! HashiCorp Vault (and OpenBao) transit: `hc_vault` entries are opened by the transit
//! engine's decrypt endpoint with the token of the decryption Secret's `sops.vault-token`
//! (or the controller's `VAULT_TOKEN`).

use std::sync::Arc;

use base64::Engine;
use serde_json::json;

use super::http::{Http, service_message};
use super::{KeySource, checked_secret};

/// An `hc_vault` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct VaultEntry {
    pub address: String,
    pub engine_path: String,
    pub key_name: String,
    /// Vault's own ciphertext (`vault:v1:…`), sent back as it is.
    pub enc: String,
}

/// A Vault token, and the one Vault it may be sent to when it is the controller's own.
pub(crate) struct VaultTransit {
    token: String,
    /// `VAULT_ADDR` for a token from the controller's environment: a tenant's file naming
    /// another address must not receive it. `None` for a token the tenant gave.
    only_to: Option<Option<String>>,
    http: Arc<Http>,
}

impl VaultTransit {
    /// A token from the decryption Secret: sent wherever the tenant's files say.
    pub(crate) fn tenant(token: String, http: Arc<Http>) -> VaultTransit {
        VaultTransit {
            token,
            only_to: None,
            http,
        }
    }

    /// The controller's `VAULT_TOKEN`, sent only to `VAULT_ADDR` (none if unset).
    pub(crate) fn controller(
        token: String,
        address: Option<String>,
        http: Arc<Http>,
    ) -> VaultTransit {
        VaultTransit {
            token,
            only_to: Some(address),
            http,
        }
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

    fn open(&self, entry: &VaultEntry) -> Result<Option<Vec<u8>>, String> {
        if let Some(allowed) = &self.only_to
            && (allowed.as_deref().and_then(origin).is_none()
                || allowed.as_deref().and_then(origin) != origin(&entry.address))
        {
            return Err(format!(
                "the controller's VAULT_TOKEN is sent only to VAULT_ADDR ({}), not to {}; \
                 give this Kustomization's token as `sops.vault-token` in its decryption Secret",
                allowed.as_deref().unwrap_or("unset"),
                entry.address
            ));
        }
        let segments = entry.engine_path.trim_matches('/').split('/');
        if segments
            .clone()
            .any(|s| s.is_empty() || s == "." || s == "..")
            || entry.key_name.contains('/')
            || entry.key_name.is_empty()
            || entry.key_name == ".."
        {
            return Err(format!(
                "invalid engine path {:?} or key name {:?}",
                entry.engine_path, entry.key_name
            ));
        }
        let mut url = reqwest::Url::parse(&entry.address)
            .map_err(|e| format!("invalid vault address {}: {e}", entry.address))?;
        if !matches!(url.scheme(), "https" | "http") {
            return Err(format!("invalid vault address {}", entry.address));
        }
        url.path_segments_mut()
            .map_err(|_| format!("invalid vault address {}", entry.address))?
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
        if !answer.is_success() {
            return Err(format!(
                "{what}: {}",
                service_message(&answer, &["/errors"])
            ));
        }
        let json = answer.json().map_err(|e| format!("{what}: {e}"))?;
        let plaintext = json
            .pointer("/data/plaintext")
            .and_then(|p| p.as_str())
            .ok_or_else(|| format!("{what}: no decrypted data"))?;
        let key = base64::engine::general_purpose::STANDARD
            .decode(plaintext)
            .map_err(|_| format!("{what}: cannot decode base64 plaintext into data key bytes"))?;
        checked_secret(key).map(Some)
    }
}
