//! Google Cloud KMS: `gcp_kms` entries are opened by the KMS REST API's `decrypt` with an
//! OAuth token for the credentials JSON of the decryption Secret's `sops.gcp-kms` entry (a
//! service account, whose signed JWT is exchanged for a token, an authorized user, whose
//! refresh token is, or a workload identity federation file), or without a key file
//! ([`crate::auth::gcp`]): the controller's metadata server or a Kubernetes ServiceAccount's
//! federated identity; or the controller's `GOOGLE_OAUTH_ACCESS_TOKEN`.

use std::sync::{Arc, OnceLock};

use serde_json::{Value, json};

use super::http::{Base64, Http, secret_at};
use super::{KeySource, KeySourceError};
use crate::auth::AuthError;
use crate::auth::gcp::SecretlessIdentity;

#[cfg(feature = "gcp-kms")]
const KMS_SCOPE: &str = "https://www.googleapis.com/auth/cloudkms";
const DEFAULT_TOKEN_URI: &str = "https://oauth2.googleapis.com/token";
const DEFAULT_ENDPOINT: &str = "https://cloudkms.googleapis.com";

/// A `gcp_kms` entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct GcpEntry {
    /// `projects/…/locations/…/keyRings/…/cryptoKeys/…`
    pub resource_id: String,
    /// The ciphertext, standard base64 (as the REST API takes it).
    pub enc: String,
}

/// What a token is obtained with.
#[derive(Clone)]
pub enum GcpCredentials {
    ServiceAccount {
        client_email: String,
        private_key_pem: String,
        private_key_id: String,
        token_uri: String,
    },
    AuthorizedUser {
        client_id: String,
        client_secret: String,
        refresh_token: String,
        token_uri: String,
    },
    /// A bearer token as given (`GOOGLE_OAUTH_ACCESS_TOKEN`).
    AccessToken(String),
    /// A credentials file (`GOOGLE_APPLICATION_CREDENTIALS`), read when a key needs it.
    File(std::path::PathBuf),
    /// Workload identity federation (`"type": "external_account"`).
    ExternalAccount(crate::auth::gcp::ExternalAccount),
    /// No key file: the metadata server, or a Kubernetes ServiceAccount's federated identity.
    Secretless(crate::auth::gcp::SecretlessIdentity),
}

impl std::fmt::Debug for GcpCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self {
            GcpCredentials::ServiceAccount { .. } => "ServiceAccount",
            GcpCredentials::AuthorizedUser { .. } => "AuthorizedUser",
            GcpCredentials::AccessToken(_) => "AccessToken",
            GcpCredentials::File(_) => "File",
            GcpCredentials::ExternalAccount(_) => "ExternalAccount",
            GcpCredentials::Secretless(_) => "Secretless",
        };
        f.debug_tuple("GcpCredentials").field(&kind).finish()
    }
}

impl GcpCredentials {
    /// The `sops.gcp-kms` entry: Google credentials JSON (`service_account`,
    /// `authorized_user` or `external_account`).
    pub fn from_entry(content: &[u8]) -> Result<GcpCredentials, AuthError> {
        let value: Value = serde_json::from_slice(content).map_err(|e| {
            AuthError::Invalid(format!("not a Google credentials JSON document: {e}"))
        })?;
        let field = |name: &str| {
            value
                .get(name)
                .and_then(Value::as_str)
                .filter(|v| !v.is_empty())
                .map(str::to_string)
                .ok_or_else(|| AuthError::Invalid(format!("the credentials have no `{name}`")))
        };
        let token_uri = field("token_uri").unwrap_or_else(|_| DEFAULT_TOKEN_URI.to_string());
        match value.get("type").and_then(Value::as_str) {
            Some("service_account") => Ok(GcpCredentials::ServiceAccount {
                client_email: field("client_email")?,
                private_key_pem: field("private_key")?,
                private_key_id: field("private_key_id").unwrap_or_default(),
                token_uri,
            }),
            Some("authorized_user") => Ok(GcpCredentials::AuthorizedUser {
                client_id: field("client_id")?,
                client_secret: field("client_secret")?,
                refresh_token: field("refresh_token")?,
                token_uri,
            }),
            Some("external_account") => Ok(GcpCredentials::ExternalAccount(
                crate::auth::gcp::ExternalAccount::from_json(&value)?,
            )),
            Some(other) => Err(AuthError::Invalid(format!(
                "credentials of type `{other}` are not supported (service_account, \
                 authorized_user and external_account are)"
            ))),
            None => Err(AuthError::Invalid(
                "the credentials have no `type`".to_string(),
            )),
        }
    }
}

/// Google credentials, the KMS endpoint, and the token once obtained.
pub(crate) struct GcpKms {
    credentials: GcpCredentials,
    endpoint: String,
    http: Arc<Http>,
    token: OnceLock<Result<String, AuthError>>,
}

impl GcpKms {
    /// `endpoint`: sops's `SOPS_GCP_KMS_ENDPOINT` (`host:port`, or a URL), else Google's.
    pub(crate) fn new(
        credentials: GcpCredentials,
        endpoint: Option<String>,
        http: Arc<Http>,
    ) -> GcpKms {
        let endpoint = match endpoint {
            Some(url) if url.contains("://") => url,
            Some(host) => format!("https://{host}"),
            None => DEFAULT_ENDPOINT.to_string(),
        };
        GcpKms {
            credentials,
            endpoint,
            http,
            token: OnceLock::new(),
        }
    }

    fn token(&self) -> Result<&str, AuthError> {
        self.token
            .get_or_init(|| self.fetch_token())
            .as_deref()
            .map_err(Clone::clone)
    }

    fn fetch_token(&self) -> Result<String, AuthError> {
        let from_file;
        let credentials = match &self.credentials {
            GcpCredentials::File(path) => {
                let content = std::fs::read(path)
                    .map_err(|e| AuthError::Invalid(format!("{}: {e}", path.display())))?;
                from_file = GcpCredentials::from_entry(&content)
                    .map_err(|e| e.during(path.display().to_string()))?;
                &from_file
            }
            other => other,
        };
        let (token_uri, form) = match credentials {
            GcpCredentials::File(_) => {
                return Err(AuthError::Invalid(
                    "a credentials file names another".into(),
                ));
            }
            GcpCredentials::AccessToken(token) => return Ok(token.clone()),
            GcpCredentials::ExternalAccount(account) => {
                let key = crate::auth::cache::key(&[
                    ("provider", "gcp"),
                    ("audiences", &account.audience),
                ]);
                return self.kept(&key, || account.token(&self.http));
            }
            GcpCredentials::Secretless(identity) => {
                let key = crate::auth::gcp::cache_key(identity)?;
                return self.kept(&key, || match identity {
                    SecretlessIdentity::MetadataServer(endpoints) => {
                        crate::auth::gcp::metadata_token(&self.http, endpoints)
                    }
                    SecretlessIdentity::ServiceAccount(account, endpoints) => {
                        crate::auth::gcp::service_account_token(
                            &self.http,
                            account.as_ref(),
                            endpoints,
                        )
                    }
                });
            }
            GcpCredentials::ServiceAccount {
                client_email,
                private_key_pem,
                private_key_id,
                token_uri,
            } => {
                let assertion =
                    signed_jwt(client_email, private_key_pem, private_key_id, token_uri)?;
                (
                    token_uri,
                    vec![
                        (
                            "grant_type",
                            "urn:ietf:params:oauth:grant-type:jwt-bearer".to_string(),
                        ),
                        ("assertion", assertion),
                    ],
                )
            }
            GcpCredentials::AuthorizedUser {
                client_id,
                client_secret,
                refresh_token,
                token_uri,
            } => (
                token_uri,
                vec![
                    ("grant_type", "refresh_token".to_string()),
                    ("client_id", client_id.clone()),
                    ("client_secret", client_secret.clone()),
                    ("refresh_token", refresh_token.clone()),
                ],
            ),
        };
        let form: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
        Ok(self
            .http
            .oauth_token(&format!("OAuth token at {token_uri}"), token_uri, &form)?)
    }
}

impl GcpKms {
    /// A secret-less identity's token, through the token cache.
    fn kept(
        &self,
        key: &str,
        fetch: impl FnOnce() -> Result<crate::auth::gcp::Lived, AuthError>,
    ) -> Result<String, AuthError> {
        use crate::auth::cache::Cached;
        let kept = self.http.cached(key, "decrypt_with_gcp", || {
            fetch().map(|(token, lifetime)| (Cached::Bearer(token), lifetime))
        })?;
        kept.bearer()
    }
}

impl KeySource for GcpKms {
    type Entry = GcpEntry;
    const NAME: &'static str = "GCP KMS";

    fn open(&self, entry: &GcpEntry) -> Result<Option<Vec<u8>>, KeySourceError> {
        static RESOURCE: OnceLock<regex::Regex> = OnceLock::new();
        let resource = RESOURCE.get_or_init(|| {
            regex::Regex::new(r"^projects/[^/]+/locations/[^/]+/keyRings/[^/]+/cryptoKeys/[^/]+$")
                .expect("valid")
        });
        if !resource.is_match(&entry.resource_id) || entry.resource_id.contains("..") {
            return Err(KeySourceError::Unreadable(format!(
                "invalid resource_id {:?}",
                entry.resource_id
            )));
        }
        let token = self.token()?;
        let url = format!(
            "{}/v1/{}:decrypt",
            self.endpoint.trim_end_matches('/'),
            entry.resource_id
        );
        let what = format!("decrypt at {url}");
        let body = json!({ "ciphertext": entry.enc });
        let answer = self.http.send(&what, |client| {
            client.post(&url).bearer_auth(token).json(&body)
        })?;
        let json = answer.success_json(&what, &["/error/message"])?;
        secret_at(&what, &json, "/plaintext", Base64::Standard).map(Some)
    }
}

#[cfg(not(feature = "gcp-kms"))]
fn signed_jwt(_: &str, _: &str, _: &str, _: &str) -> Result<String, AuthError> {
    Err(AuthError::Invalid(
        "GCP service accounts are not supported by this build (feature `gcp-kms`)".into(),
    ))
}

/// A service account's RS256-signed JWT asking for the Cloud KMS scope (RFC 7523, as
/// Google's OAuth 2.0 for server-to-server applications describes it).
#[cfg(feature = "gcp-kms")]
fn signed_jwt(
    client_email: &str,
    private_key_pem: &str,
    private_key_id: &str,
    token_uri: &str,
) -> Result<String, AuthError> {
    use base64::Engine;
    use rsa::pkcs1v15::SigningKey;
    use rsa::pkcs8::DecodePrivateKey;
    use rsa::signature::{SignatureEncoding, Signer};
    let key = rsa::RsaPrivateKey::from_pkcs8_pem(private_key_pem).map_err(|_| {
        AuthError::Invalid("the service account's private_key is not a PKCS#8 RSA key".into())
    })?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|e| AuthError::Invalid(e.to_string()))?
        .as_secs();
    let encode = |value: &Value| {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(value.to_string().as_bytes())
    };
    let mut header = json!({ "alg": "RS256", "typ": "JWT" });
    if !private_key_id.is_empty() {
        header["kid"] = json!(private_key_id);
    }
    let claims = json!({
        "iss": client_email,
        "scope": KMS_SCOPE,
        "aud": token_uri,
        "iat": now,
        "exp": now + 3600,
    });
    let signing_input = format!("{}.{}", encode(&header), encode(&claims));
    let signature = SigningKey::<sha2::Sha256>::new(key).sign(signing_input.as_bytes());
    Ok(format!(
        "{signing_input}.{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(signature.to_bytes())
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_of_each_supported_type_are_read() {
        let user = GcpCredentials::from_entry(
            br#"{"type":"authorized_user","client_id":"id","client_secret":"s3cret","refresh_token":"r"}"#,
        )
        .unwrap();
        assert!(matches!(
            &user,
            GcpCredentials::AuthorizedUser { token_uri, .. } if token_uri == DEFAULT_TOKEN_URI
        ));
        assert!(!format!("{user:?}").contains("s3cret"));
        let error = GcpCredentials::from_entry(br#"{"type":"external_account","audience":"x"}"#)
            .unwrap_err()
            .to_string();
        assert!(error.contains("external_account"), "{error}");
        assert!(GcpCredentials::from_entry(b"token").is_err());
    }
}
