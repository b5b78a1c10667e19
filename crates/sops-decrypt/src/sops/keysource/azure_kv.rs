//! Azure Key Vault: `azure_kv` entries are opened by the key's `decrypt` operation
//! (RSA-OAEP-256, as sops encrypts) with a Microsoft Entra token for the decryption Secret's
//! `sops.azure-kv` entry, else for the controller's identity or a Kubernetes ServiceAccount's
//! ([`crate::auth::azure`]).

use std::sync::{Arc, OnceLock};

use serde_json::{Value, json};

use super::http::{Base64, Http, secret_at};
use super::{KeySource, KeySourceError};
use crate::auth::AuthError;
use crate::auth::azure::DEFAULT_AUTHORITY;

const VAULT_SCOPE: &str = "https://vault.azure.net/.default";
const API_VERSION: &str = "7.4";
/// The DNS suffixes of Key Vault in Azure's clouds: a token is sent to no other host.
const VAULT_SUFFIXES: [&str; 5] = [
    ".vault.azure.net",
    ".vault.azure.cn",
    ".vault.usgovcloudapi.net",
    ".vault.microsoftazure.de",
    ".managedhsm.azure.net",
];

/// An `azure_kv` entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct AzureEntry {
    pub vault_url: String,
    pub name: String,
    /// The key version; empty for the latest.
    pub version: String,
    /// The wrapped key, base64url without padding (as Key Vault's `value` takes it).
    pub enc: String,
}

pub use crate::auth::azure::AzureIdentity;

/// The `sops.azure-kv` entry, YAML or JSON, as Flux reads it: `tenantId`, `clientId` and
/// `clientSecret` (with an optional `authorityHost`), the `az` CLI's `tenant`, `appId` and
/// `password`, `tenantId`, `clientId` and `clientCertificate` (PEM, with an optional
/// `clientCertificateSendChain`), or `clientId` alone (a user-assigned managed identity).
pub fn identity_from_entry(content: &[u8]) -> Result<AzureIdentity, AuthError> {
    AzureCredentialsEntry::read(content)
}

struct AzureCredentialsEntry;

impl AzureCredentialsEntry {
    fn read(content: &[u8]) -> Result<AzureIdentity, AuthError> {
        let text = std::str::from_utf8(content)
            .map_err(|_| AuthError::Invalid("not UTF-8 text".to_string()))?;
        let value = crate::yaml::parse_single(text, crate::yaml::Schema::Kyaml)
            .map(Value::from)
            .map_err(|e| {
                AuthError::Invalid(format!(
                    "failed to unmarshal Azure authentication file: {e}"
                ))
            })?;
        let field = |name: &str| {
            value
                .get(name)
                .and_then(Value::as_str)
                .filter(|v| !v.is_empty())
                .map(str::to_string)
        };
        let authority_host = field("authorityHost").unwrap_or_else(|| DEFAULT_AUTHORITY.into());
        if let (Some(tenant_id), Some(client_id), Some(client_secret)) =
            (field("tenantId"), field("clientId"), field("clientSecret"))
        {
            return Ok(AzureIdentity::ClientSecret {
                tenant_id,
                client_id,
                client_secret,
                authority_host,
            });
        }
        if let (Some(tenant_id), Some(client_id), Some(pem)) = (
            field("tenantId"),
            field("clientId"),
            field("clientCertificate"),
        ) {
            if field("clientCertificatePassword").is_some() {
                return Err(AuthError::Invalid(
                    "password-protected client certificates are not supported".into(),
                ));
            }
            return Ok(AzureIdentity::ClientCertificate {
                tenant_id,
                client_id,
                pem,
                send_chain: field("clientCertificateSendChain")
                    .is_some_and(|v| v == "1" || v.eq_ignore_ascii_case("true")),
                authority_host,
            });
        }
        if let (Some(tenant_id), Some(client_id), Some(client_secret)) =
            (field("tenant"), field("appId"), field("password"))
        {
            return Ok(AzureIdentity::ClientSecret {
                tenant_id,
                client_id,
                client_secret,
                authority_host,
            });
        }
        if let Some(client_id) = field("clientId") {
            return Ok(AzureIdentity::ManagedIdentity {
                client_id: Some(client_id),
                endpoint: crate::auth::azure::INSTANCE_METADATA.into(),
            });
        }
        Err(AuthError::Invalid(
            "invalid data: requires a 'clientId' field, a combination of 'tenantId', \
             'clientId' and 'clientSecret', or 'tenantId', 'clientId' and 'clientCertificate'"
                .into(),
        ))
    }
}

/// Azure credentials and the token once obtained.
pub(crate) struct AzureKeyVault {
    identity: AzureIdentity,
    http: Arc<Http>,
    token: OnceLock<Result<String, AuthError>>,
    /// Vault origins trusted besides Azure's own domains (a private cloud, a test server).
    extra_origins: Vec<String>,
}

impl AzureKeyVault {
    pub(crate) fn new(
        identity: AzureIdentity,
        http: Arc<Http>,
        extra_origins: Vec<String>,
    ) -> AzureKeyVault {
        AzureKeyVault {
            identity,
            http,
            token: OnceLock::new(),
            extra_origins,
        }
    }

    /// The vault's URL, when the token may go there: https to a Key Vault host, or an
    /// origin trusted by configuration. A file names the vault; a tenant's file must not be
    /// able to send the token anywhere else.
    fn vault_url(&self, vault_url: &str) -> Result<reqwest::Url, KeySourceError> {
        let url = reqwest::Url::parse(vault_url).map_err(|e| {
            KeySourceError::Unreadable(format!("invalid vault_url {vault_url}: {e}"))
        })?;
        let origin = url.origin().ascii_serialization();
        let key_vault_host = url.scheme() == "https"
            && url.username().is_empty()
            && url
                .host_str()
                .is_some_and(|host| VAULT_SUFFIXES.iter().any(|s| host.ends_with(s)));
        if key_vault_host
            || self
                .extra_origins
                .iter()
                .any(|trusted| trusted.trim_end_matches('/') == origin)
        {
            Ok(url)
        } else {
            Err(KeySourceError::Unreadable(format!(
                "vault_url {vault_url} is not an https Azure Key Vault address; the token is \
                 not sent there"
            )))
        }
    }

    fn token(&self) -> Result<&str, AuthError> {
        self.token
            .get_or_init(|| self.fetch_token())
            .as_deref()
            .map_err(Clone::clone)
    }

    /// The identity's token; a secret-less one's through the token cache.
    fn fetch_token(&self) -> Result<String, AuthError> {
        use crate::auth::cache::Cached;
        let Some(key) = self.identity.cache_key(VAULT_SCOPE)? else {
            return self
                .identity
                .token(&self.http, VAULT_SCOPE)
                .map(|(token, _)| token);
        };
        let kept = self.http.cached(&key, "decrypt_with_azure", || {
            self.identity
                .token(&self.http, VAULT_SCOPE)
                .map(|(token, lifetime)| (Cached::Bearer(token), lifetime))
        })?;
        kept.bearer()
    }
}

impl KeySource for AzureKeyVault {
    type Entry = AzureEntry;
    const NAME: &'static str = "Azure Key Vault";

    fn open(&self, entry: &AzureEntry) -> Result<Option<Vec<u8>>, KeySourceError> {
        let mut url = self.vault_url(&entry.vault_url)?;
        {
            let mut segments = url.path_segments_mut().map_err(|_| {
                KeySourceError::Unreadable(format!("invalid vault_url {}", entry.vault_url))
            })?;
            segments.pop_if_empty().push("keys").push(&entry.name);
            if !entry.version.is_empty() {
                segments.push(&entry.version);
            }
            segments.push("decrypt");
        }
        url.set_query(Some(&format!("api-version={API_VERSION}")));
        let token = self.token()?;
        let what = format!("decrypt at {url}");
        let body = json!({ "alg": "RSA-OAEP-256", "value": entry.enc });
        let answer = self.http.send(&what, |client| {
            client.post(url.clone()).bearer_auth(token).json(&body)
        })?;
        let json = answer.success_json(&what, &["/error/message"])?;
        secret_at(&what, &json, "/value", Base64::UrlSafe).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_read_in_flux_order() {
        let secret = identity_from_entry(
            b"tenantId: t\nclientId: c\nclientSecret: s3cret\nauthorityHost: https://login.example/\n",
        )
        .unwrap();
        assert!(
            matches!(&secret, AzureIdentity::ClientSecret { authority_host, .. } if authority_host == "https://login.example/")
        );
        assert!(!format!("{secret:?}").contains("s3cret"));
        let cli = identity_from_entry(
            br#"{"appId":"a","displayName":"d","name":"n","password":"p","tenant":"t"}"#,
        )
        .unwrap();
        assert!(
            matches!(&cli, AzureIdentity::ClientSecret { client_id, authority_host, .. } if client_id == "a" && authority_host == DEFAULT_AUTHORITY)
        );
        assert!(matches!(
            identity_from_entry(b"clientId: c\n").unwrap(),
            AzureIdentity::ManagedIdentity { client_id: Some(id), .. } if id == "c"
        ));
        for (entry, says) in [
            (
                &b"tenantId: t\nclientId: c\nclientCertificate: pem\nclientCertificatePassword: p\n"[..],
                "password-protected",
            ),
            (b"tenantId: incomplete\n", "requires a 'clientId' field"),
        ] {
            let error = identity_from_entry(entry).unwrap_err().to_string();
            assert!(error.contains(says), "{error}");
        }
    }
}
