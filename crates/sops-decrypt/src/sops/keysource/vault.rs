//! HashiCorp Vault (and OpenBao) transit: `hc_vault` entries are opened by the transit
//! engine's decrypt endpoint with a Vault token: the decryption Secret's `sops.vault-token`;
//! else, with `--sops-vault-configmap`, one a Kubernetes ServiceAccount token is exchanged for
//! at the login path the operator lists for the entry's address ([`crate::auth::vault`]);
//! else the controller's `VAULT_TOKEN`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::json;

use super::http::{Base64, Http, secret_at};
use super::{KeySource, KeySourceError};
use crate::auth::AuthError;
use crate::auth::vault::{LoginPaths, VaultLogin, role_from_token, token_lifetime};

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

/// How a decryption gets its Vault tokens.
pub(crate) enum VaultAuth {
    /// One token, and where it may go.
    Static(String, TokenScope),
    /// A login as a ServiceAccount at each address the operator lists; the controller's
    /// `VAULT_TOKEN`, when there is one, for the others.
    Login {
        login: VaultLogin,
        fallback: Option<(String, TokenScope)>,
        /// The operator's ConfigMap, read once, when a Vault key first needs it.
        paths: OnceLock<Result<LoginPaths, AuthError>>,
        /// The token each address gave this decryption, or why it gave none.
        tokens: Mutex<HashMap<String, Result<String, KeySourceError>>>,
    },
}

impl VaultAuth {
    pub(crate) fn login(login: VaultLogin, fallback: Option<(String, TokenScope)>) -> VaultAuth {
        VaultAuth::Login {
            login,
            fallback,
            paths: OnceLock::new(),
            tokens: Mutex::new(HashMap::new()),
        }
    }
}

/// Vault tokens and the client they are sent with.
pub(crate) struct VaultTransit {
    auth: VaultAuth,
    http: Arc<Http>,
}

impl VaultTransit {
    pub(crate) fn new(auth: VaultAuth, http: Arc<Http>) -> VaultTransit {
        VaultTransit { auth, http }
    }

    /// The token for `address`, as the decryption's way of getting tokens gives it.
    fn token_for(&self, address: &str) -> Result<String, KeySourceError> {
        match &self.auth {
            VaultAuth::Static(token, scope) => scoped(token, scope, address),
            VaultAuth::Login {
                login,
                fallback,
                paths,
                tokens,
            } => {
                let paths = paths
                    .get_or_init(|| login.config.login_paths())
                    .clone()
                    .map_err(KeySourceError::Auth)?;
                let Some(path) = paths.login_path(address) else {
                    // The allowlist decides only who is sent a ServiceAccount token; the
                    // controller's VAULT_TOKEN still goes to its own VAULT_ADDR.
                    return fallback
                        .as_ref()
                        .and_then(|(token, scope)| scoped(token, scope, address).ok())
                        .ok_or_else(|| {
                            KeySourceError::Auth(AuthError::Invalid(format!(
                                "no Vault login path configured for address '{address}' in ConfigMap '{}'",
                                login.config.config_map()
                            )))
                        });
                };
                let mut tokens = tokens.lock().unwrap_or_else(|e| e.into_inner());
                tokens
                    .entry(address.to_string())
                    .or_insert_with(|| self.log_in(login, address, path))
                    .clone()
            }
        }
    }

    /// A Vault token for the ServiceAccount's token, at `path` of `address`.
    fn log_in(
        &self,
        login: &VaultLogin,
        address: &str,
        path: &str,
    ) -> Result<String, KeySourceError> {
        use crate::auth::cache::Cached;
        let issued = self
            .http
            .cached(
                &login.identity.cache_key(address),
                "decrypt_with_vault",
                || {
                    let token = login.identity.token(address)?;
                    let lifetime = token_lifetime(&token, std::time::SystemTime::now());
                    Ok((Cached::Bearer(token), lifetime))
                },
            )
            .and_then(Cached::bearer)
            .map_err(|e| e.during("failed to issue Kubernetes token for Vault authentication"))?;
        let role = role_from_token(&issued)?;
        let url = url_at(address, path.trim_matches('/').split('/'))?;
        let what = format!("login at {url}");
        let refused = |cause: String| {
            KeySourceError::Auth(AuthError::Invalid(format!(
                "failed to authenticate with Vault '{address}' at login path '{path}' as role '{role}': {cause}"
            )))
        };
        let body = json!({ "role": role, "jwt": issued });
        let answer = self
            .http
            .send(&what, |client| client.put(url.clone()).json(&body))
            .map_err(|e| refused(e.to_string()))?;
        let json = answer
            .success_json(&what, &["/errors"])
            .map_err(|e| refused(e.to_string()))?;
        json.pointer("/auth/client_token")
            .and_then(serde_json::Value::as_str)
            .filter(|token| !token.is_empty())
            .map(str::to_string)
            .ok_or_else(|| {
                KeySourceError::Auth(AuthError::Invalid(format!(
                    "Vault '{address}' returned no token for login at '{path}' as role '{role}'"
                )))
            })
    }
}

/// `token` when its scope lets it go to `address`.
fn scoped(token: &str, scope: &TokenScope, address: &str) -> Result<String, KeySourceError> {
    if let TokenScope::Only(allowed) = scope
        && (allowed.as_deref().and_then(origin).is_none()
            || allowed.as_deref().and_then(origin) != origin(address))
    {
        return Err(KeySourceError::Unreadable(format!(
            "the controller's VAULT_TOKEN is sent only to VAULT_ADDR ({}), not to {}; \
             give this Kustomization's token as `sops.vault-token` in its decryption Secret",
            allowed.as_deref().unwrap_or("unset"),
            address
        )));
    }
    Ok(token.to_string())
}

/// `address` with `/v1/` and `segments` after its path; each segment is encoded as one.
fn url_at<'a>(
    address: &str,
    segments: impl IntoIterator<Item = &'a str>,
) -> Result<reqwest::Url, KeySourceError> {
    let invalid = || KeySourceError::Unreadable(format!("invalid vault address {address}"));
    let mut url = reqwest::Url::parse(address)
        .map_err(|e| KeySourceError::Unreadable(format!("invalid vault address {address}: {e}")))?;
    if !matches!(url.scheme(), "https" | "http") {
        return Err(invalid());
    }
    url.path_segments_mut()
        .map_err(|_| invalid())?
        .pop_if_empty()
        .push("v1")
        .extend(segments);
    Ok(url)
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
        let url = url_at(
            &entry.address,
            segments.chain(["decrypt", entry.key_name.as_str()]),
        )?;
        let token = self.token_for(&entry.address)?;
        let what = format!("transit decrypt at {url}");
        let body = json!({ "ciphertext": entry.enc });
        let answer = self.http.send(&what, |client| {
            client
                .put(url.clone())
                .header("X-Vault-Token", &token)
                .json(&body)
        })?;
        let json = answer.success_json(&what, &["/errors"])?;
        secret_at(&what, &json, "/data/plaintext", Base64::Standard).map(Some)
    }
}
