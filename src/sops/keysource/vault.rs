//! HashiCorp Vault (and OpenBao) transit: `hc_vault` entries are opened by the transit
//! engine's decrypt endpoint with the token of the decryption Secret's `sops.vault-token`
//! (or the controller's `VAULT_TOKEN`).

use base64::Engine;
use serde_json::json;

use super::http::{self, service_message};
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

/// A Vault token.
pub(crate) struct VaultTransit {
    token: String,
    client: reqwest::blocking::Client,
}

impl VaultTransit {
    pub(crate) fn new(token: String) -> Result<VaultTransit, String> {
        Ok(VaultTransit {
            token,
            client: http::client()?,
        })
    }
}

impl KeySource for VaultTransit {
    type Entry = VaultEntry;
    const NAME: &'static str = "HashiCorp Vault";

    fn open(&self, entry: &VaultEntry) -> Result<Option<Vec<u8>>, String> {
        let url = format!(
            "{}/v1/{}/decrypt/{}",
            entry.address.trim_end_matches('/'),
            entry.engine_path.trim_matches('/'),
            entry.key_name
        );
        let what = format!("transit decrypt at {url}");
        let body = json!({ "ciphertext": entry.enc });
        let answer = http::send(&what, || {
            self.client
                .put(&url)
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
