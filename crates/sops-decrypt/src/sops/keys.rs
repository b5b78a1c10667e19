//! What a decryption may open data keys with: age identities, OpenPGP secret keys, and
//! credentials for the key services (AWS KMS, GCP KMS, Azure Key Vault, Vault transit).
//!
//! Keys come from the user: entries of the decryption Secret, recognised by name as Flux
//! does (`*.agekey`, `*.asc`, `sops.aws-kms`, `sops.gcp-kms`, `sops.azure-kv`,
//! `sops.vault-token`), key files given to the CLI (recognised by content), and the
//! controller's own environment for what no entry gives. [`Keys::open`] hands a metadata
//! entry to the [`KeySource`] of its kind. Key material never appears in errors or logs;
//! errors name the entry only.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use super::keysource::age::AgeIdentities;
use super::keysource::aws_kms::{AwsCredentialSource, AwsCredentials, AwsEndpoints, AwsKms};
use super::keysource::azure_kv::{AzureIdentity, AzureKeyVault, identity_from_entry};
use super::keysource::gcp_kms::{GcpCredentials, GcpKms};
use super::keysource::http::Http;
use super::keysource::pgp::PgpKeys;
use super::keysource::vault::{TokenScope, VaultAuth, VaultTransit};
use super::keysource::{KeySource, KeySourceError, Stanza};
use crate::auth::gcp::{GoogleEndpoints, SecretlessIdentity};
use crate::auth::vault::VaultLogin;
use crate::auth::{AuthError, ServiceAccountTokens};

/// The decryption Secret entries with fixed names, as Flux names them.
pub const AWS_KMS_ENTRY: &str = "sops.aws-kms";
pub const GCP_KMS_ENTRY: &str = "sops.gcp-kms";
pub const AZURE_KV_ENTRY: &str = "sops.azure-kv";
pub const VAULT_TOKEN_ENTRY: &str = "sops.vault-token";

/// A key entry that could not be read. Names the entry, never its content.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("{entry}: line {line} is not an age identity (expected AGE-SECRET-KEY-1…)")]
    InvalidAgeIdentity { entry: String, line: usize },
    #[error("{entry}: not an ASCII-armored OpenPGP secret key: {reason}")]
    InvalidPgpKey { entry: String, reason: String },
    #[error("{entry}: no age identity or OpenPGP secret key found")]
    Empty { entry: String },
    #[error("{entry}: OpenPGP keys are not supported by this build (feature `pgp` is off)")]
    PgpDisabled { entry: String },
    #[error("{entry}: {source}")]
    InvalidCredentials {
        entry: String,
        source: Box<AuthError>,
    },
}

impl KeyError {
    /// The Secret entry it is about.
    pub fn entry(&self) -> &str {
        match self {
            KeyError::InvalidAgeIdentity { entry, .. }
            | KeyError::InvalidPgpKey { entry, .. }
            | KeyError::Empty { entry }
            | KeyError::PgpDisabled { entry }
            | KeyError::InvalidCredentials { entry, .. } => entry,
        }
    }

    /// What is wrong with the entry, without naming it.
    pub fn reason(&self) -> String {
        let text = self.to_string();
        let prefix = format!("{}: ", self.entry());
        text.strip_prefix(&prefix).unwrap_or(&text).to_string()
    }
}

/// The keys and credentials available for one decryption.
#[derive(Default)]
pub struct Keys {
    age: AgeIdentities,
    pgp: PgpKeys,
    aws: Option<AwsCredentialSource>,
    aws_endpoints: AwsEndpoints,
    gcp: Option<GcpCredentials>,
    gcp_endpoint: Option<String>,
    azure: Option<AzureIdentity>,
    /// Why the controller's environment gives no Azure identity (a credential it names that
    /// is not supported here).
    azure_unavailable: Option<AuthError>,
    /// Where Google's STS, IAM Credentials and metadata server are (Google's own unless a
    /// test says otherwise).
    google_endpoints: Option<GoogleEndpoints>,
    /// Key Vault origins trusted besides Azure's domains.
    azure_vault_origins: Vec<String>,
    /// A Vault token and where it may be sent.
    vault_token: Option<(String, TokenScope)>,
    /// Vault login as a ServiceAccount (`--sops-vault-configmap`), where the decryption
    /// Secret gives no token.
    vault_login: Option<VaultLogin>,
    /// When key services stop being called.
    deadline: Option<Instant>,
    /// Key-service entries that already failed in this decryption, and why (an entry shared
    /// by several files is asked once; a service that does not answer is remembered by
    /// the HTTP client, whatever entry names it).
    failed: Mutex<HashMap<Stanza, KeySourceError>>,
    /// The Kubernetes ServiceAccount whose cloud identity key services are opened as, where
    /// the decryption Secret gives no credentials (object-level workload identity).
    service_account: Option<Arc<dyn ServiceAccountTokens>>,
    /// The controller's token cache, and the object decrypting.
    token_cache: Option<super::keysource::http::CacheUse>,
    /// The key-service clients, made on first use (they keep connections and tokens).
    services: OnceLock<Services>,
}

#[derive(Default)]
struct Services {
    aws: Option<AwsKms>,
    gcp: Option<GcpKms>,
    azure: Option<AzureKeyVault>,
    vault: Option<VaultTransit>,
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keys")
            .field("age", &self.age.identities.len())
            .field("pgp", &self.pgp.len())
            .field("aws", &self.aws.is_some())
            .field("gcp", &self.gcp.is_some())
            .field("azure", &self.azure.is_some())
            .field("vault", &self.vault_token.is_some())
            .field("vault_login", &self.vault_login)
            .finish()
    }
}

impl Keys {
    pub fn new() -> Keys {
        Keys::default()
    }

    pub fn is_empty(&self) -> bool {
        self.age.identities.is_empty()
            && self.pgp.len() == 0
            && self.age.unsupported.is_empty()
            && self.aws.is_none()
            && self.gcp.is_none()
            && self.azure.is_none()
            && self.vault_token.is_none()
            && self.vault_login.is_none()
    }

    /// Adds a decryption Secret entry by its name, as Flux reads them; entries it does not
    /// know are ignored. `true` when the entry was used.
    pub fn add_entry(&mut self, entry: &str, content: &[u8]) -> Result<bool, KeyError> {
        let invalid = |source: AuthError| KeyError::InvalidCredentials {
            entry: entry.to_string(),
            source: Box::new(source),
        };
        match entry {
            AWS_KMS_ENTRY => {
                self.aws = Some(AwsCredentialSource::Static(
                    AwsCredentials::from_entry(content).map_err(invalid)?,
                ));
            }
            GCP_KMS_ENTRY => self.gcp = Some(GcpCredentials::from_entry(content).map_err(invalid)?),
            AZURE_KV_ENTRY => {
                self.azure = Some(identity_from_entry(content).map_err(invalid)?);
            }
            VAULT_TOKEN_ENTRY => {
                let token = String::from_utf8_lossy(content).trim().to_string();
                if token.is_empty() {
                    return Err(invalid(AuthError::Invalid("the token is empty".into())));
                }
                self.vault_token = Some((token, TokenScope::Anywhere));
            }
            _ if entry.ends_with(".agekey") => {
                self.add_age(entry, &String::from_utf8_lossy(content))?;
            }
            _ if entry.ends_with(".asc") => {
                let text = String::from_utf8_lossy(content);
                // gpg --import, which Flux uses, takes a public key too; it opens nothing.
                if text.contains("-----BEGIN PGP PUBLIC KEY BLOCK-----")
                    && !text.contains("-----BEGIN PGP PRIVATE KEY BLOCK-----")
                {
                    return Ok(true);
                }
                self.add_pgp(entry, &text)?;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Adds a key file, recognised by content: an armored OpenPGP secret key or age
    /// identities (one per line, `#` comments allowed). `entry` names it in errors.
    pub fn add(&mut self, entry: &str, content: &[u8]) -> Result<(), KeyError> {
        let text = String::from_utf8_lossy(content);
        if text.contains("-----BEGIN PGP PRIVATE KEY BLOCK-----") {
            return self.add_pgp(entry, &text);
        }
        let before = self.age.identities.len() + self.age.unsupported.len();
        self.add_age(entry, &text)?;
        if self.age.identities.len() + self.age.unsupported.len() == before {
            return Err(KeyError::Empty {
                entry: entry.to_string(),
            });
        }
        Ok(())
    }

    /// Takes what the controller's environment says where no entry said it: its own cloud
    /// identity ([`crate::auth`]: `AWS_*`, `GOOGLE_APPLICATION_CREDENTIALS`,
    /// `GOOGLE_OAUTH_ACCESS_TOKEN`, the metadata servers, `AZURE_*`), `VAULT_TOKEN`, and the
    /// endpoints (`AWS_ENDPOINT_URL`, `AWS_ENDPOINT_URL_KMS`, `AWS_ENDPOINT_URL_STS`,
    /// `SOPS_GCP_KMS_ENDPOINT`, `GCE_METADATA_HOST`).
    pub fn add_environment(&mut self, vars: impl IntoIterator<Item = (String, String)>) {
        self.add_environment_where(vars, true);
    }

    /// Takes only the endpoints of the controller's environment, not its identity: for a
    /// decryption as a ServiceAccount ([`Keys::use_service_account`]).
    pub fn add_environment_endpoints(&mut self, vars: impl IntoIterator<Item = (String, String)>) {
        self.add_environment_where(vars, false);
    }

    fn add_environment_where(
        &mut self,
        vars: impl IntoIterator<Item = (String, String)>,
        credentials: bool,
    ) {
        let env = crate::auth::environment(
            vars,
            &[
                "AWS_",
                "AZURE_",
                "GOOGLE_",
                "GCE_METADATA_HOST",
                "VAULT_TOKEN",
                "VAULT_ADDR",
                "SOPS_GCP_KMS_ENDPOINT",
            ],
        );
        let var = |name: &str| env.get(name).cloned();
        self.aws_endpoints.kms = var("AWS_ENDPOINT_URL_KMS").or_else(|| var("AWS_ENDPOINT_URL"));
        self.aws_endpoints.sts = var("AWS_ENDPOINT_URL_STS").or_else(|| var("AWS_ENDPOINT_URL"));
        self.gcp_endpoint = var("SOPS_GCP_KMS_ENDPOINT");
        let google = self
            .google_endpoints
            .clone()
            .unwrap_or_else(|| GoogleEndpoints::from_environment(&env));
        let authority_host = var("AZURE_AUTHORITY_HOST")
            .unwrap_or_else(|| crate::auth::azure::DEFAULT_AUTHORITY.into());
        if let Some(account) = self.service_account.clone()
            && !credentials
        {
            self.aws
                .get_or_insert_with(|| AwsCredentialSource::ServiceAccount(account.clone()));
            self.gcp.get_or_insert_with(|| {
                GcpCredentials::Secretless(SecretlessIdentity::ServiceAccount(
                    account.clone(),
                    google.clone(),
                ))
            });
            self.azure
                .get_or_insert_with(|| AzureIdentity::ServiceAccount {
                    account,
                    authority_host,
                });
            return;
        }
        if !credentials {
            return;
        }
        if self.aws.is_none() {
            self.aws = crate::auth::aws::controller_source(&env);
        }
        if self.vault_token.is_none()
            && let Some(token) = var("VAULT_TOKEN")
        {
            self.vault_token = Some((token, TokenScope::Only(var("VAULT_ADDR"))));
        }
        if self.gcp.is_none() {
            // The file is read when a key needs it, on the build's thread, and a bad one is
            // then named in the error.
            self.gcp = Some(
                var("GOOGLE_OAUTH_ACCESS_TOKEN")
                    .map(GcpCredentials::AccessToken)
                    .or_else(|| {
                        var("GOOGLE_APPLICATION_CREDENTIALS")
                            .map(|p| GcpCredentials::File(p.into()))
                    })
                    .unwrap_or(GcpCredentials::Secretless(
                        SecretlessIdentity::MetadataServer(google),
                    )),
            );
        }
        if self.azure.is_none() {
            match crate::auth::azure::controller_identity(&env) {
                Ok(identity) => self.azure = Some(identity),
                Err(reason) => self.azure_unavailable = Some(reason),
            }
        }
    }

    /// Keeps the credentials of secret-less identities in the controller's token cache,
    /// labelled with the object decrypting (`kind`, `name`, `namespace`).
    pub fn use_token_cache(
        &mut self,
        cache: Arc<crate::auth::cache::TokenCache>,
        kind: &str,
        name: &str,
        namespace: &str,
    ) {
        self.token_cache = Some(super::keysource::http::CacheUse {
            cache,
            kind: kind.to_string(),
            name: name.to_string(),
            namespace: namespace.to_string(),
        });
    }

    /// Reaches Google's STS, IAM Credentials and metadata server at these endpoints (tests,
    /// private endpoints); before the environment is added.
    pub fn set_google_endpoints(&mut self, endpoints: GoogleEndpoints) {
        self.google_endpoints = Some(endpoints);
    }

    /// Stops calling key services at `deadline` (a Kustomization's timeout).
    pub fn set_deadline(&mut self, deadline: Instant) {
        self.deadline = Some(deadline);
    }

    /// Trusts an Azure Key Vault origin (`https://vault.example:8443`) besides Azure's own
    /// domains, for private clouds and test servers.
    pub fn trust_azure_vault_origin(&mut self, origin: &str) {
        self.azure_vault_origins.push(origin.to_string());
    }

    /// Decrypts as a Kubernetes ServiceAccount (`spec.decryption.serviceAccountName`, gate
    /// `ObjectLevelWorkloadIdentity`): key services the decryption Secret gives no
    /// credentials for are opened with the cloud identity its token is exchanged for, never
    /// with the controller's. Call before [`Keys::add_environment_endpoints`].
    pub fn use_service_account(&mut self, account: Arc<dyn ServiceAccountTokens>) {
        self.service_account = Some(account);
    }

    /// Logs in to Vault as a Kubernetes ServiceAccount at the addresses the operator's
    /// ConfigMap lists (`--sops-vault-configmap`), unless the decryption Secret gives a
    /// `sops.vault-token`, which goes first; the controller's `VAULT_TOKEN` comes last.
    pub fn use_vault_login(&mut self, login: VaultLogin) {
        self.vault_login = Some(login);
    }

    /// Adds the age identities of an identity file.
    pub fn add_age(&mut self, entry: &str, text: &str) -> Result<(), KeyError> {
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if line.starts_with("AGE-SECRET-KEY-PQ-") || line.starts_with("AGE-PLUGIN-") {
                self.age.unsupported.push(entry.to_string());
                continue;
            }
            let identity = line.parse::<age::x25519::Identity>().map_err(|_| {
                KeyError::InvalidAgeIdentity {
                    entry: entry.to_string(),
                    line: number + 1,
                }
            })?;
            self.age.identities.push(identity);
        }
        Ok(())
    }

    /// Adds every secret key of an armored OpenPGP key block.
    #[cfg(feature = "pgp")]
    pub fn add_pgp(&mut self, entry: &str, text: &str) -> Result<(), KeyError> {
        use pgp::composed::{Deserializable, SignedSecretKey};
        let invalid = |reason: String| KeyError::InvalidPgpKey {
            entry: entry.to_string(),
            reason,
        };
        let (keys, _) = SignedSecretKey::from_armor_many(text.as_bytes())
            .map_err(|e| invalid(e.to_string()))?;
        let before = self.pgp.keys.len();
        for key in keys {
            self.pgp.keys.push(key.map_err(|e| invalid(e.to_string()))?);
        }
        if self.pgp.keys.len() == before {
            return Err(KeyError::Empty {
                entry: entry.to_string(),
            });
        }
        Ok(())
    }

    #[cfg(not(feature = "pgp"))]
    pub fn add_pgp(&mut self, entry: &str, _text: &str) -> Result<(), KeyError> {
        Err(KeyError::PgpDisabled {
            entry: entry.to_string(),
        })
    }

    /// Whether post-quantum or plugin identities were given that this build cannot use.
    pub(super) fn has_unsupported_age(&self) -> bool {
        !self.age.unsupported.is_empty()
    }

    fn services(&self) -> &Services {
        self.services.get_or_init(|| {
            let http = Arc::new(Http::new(self.deadline, self.token_cache.clone()));
            Services {
                aws: self
                    .aws
                    .clone()
                    .map(|c| AwsKms::new(c, self.aws_endpoints.clone(), http.clone())),
                gcp: self
                    .gcp
                    .clone()
                    .map(|c| GcpKms::new(c, self.gcp_endpoint.clone(), http.clone())),
                azure: self
                    .azure
                    .clone()
                    .map(|c| AzureKeyVault::new(c, http.clone(), self.azure_vault_origins.clone())),
                vault: self
                    .vault_auth()
                    .map(|auth| VaultTransit::new(auth, http.clone())),
            }
        })
    }

    /// How Vault tokens are had, in Flux's order: the Secret's token, the login as a
    /// ServiceAccount, the controller's `VAULT_TOKEN`.
    fn vault_auth(&self) -> Option<VaultAuth> {
        match (&self.vault_token, &self.vault_login) {
            (Some((token, TokenScope::Anywhere)), _) => {
                Some(VaultAuth::Static(token.clone(), TokenScope::Anywhere))
            }
            (fallback, Some(login)) => Some(VaultAuth::login(login.clone(), fallback.clone())),
            (Some((token, scope)), None) => Some(VaultAuth::Static(token.clone(), scope.clone())),
            (None, None) => None,
        }
    }

    /// The bytes a metadata entry wraps (a data key or a Shamir share); `Ok(None)` when no
    /// key of ours is its recipient. Errors say why, naming the service but no secret.
    pub(super) fn open(&self, stanza: &Stanza) -> Result<Option<Vec<u8>>, KeySourceError> {
        if matches!(stanza, Stanza::Age(_) | Stanza::Pgp(_)) {
            return self.open_now(stanza);
        }
        if let Some(reason) = self.failed.lock().ok().and_then(|f| f.get(stanza).cloned()) {
            return Err(reason);
        }
        let opened = self.open_now(stanza);
        if let Err(reason) = &opened
            && let Ok(mut failed) = self.failed.lock()
        {
            failed.insert(stanza.clone(), reason.clone());
        }
        opened
    }

    fn open_now(&self, stanza: &Stanza) -> Result<Option<Vec<u8>>, KeySourceError> {
        let missing = |entry: &str| {
            Err(KeySourceError::NoCredentials(
                match (&self.service_account, stanza) {
                    (Some(account), Stanza::Vault(_)) => format!(
                        ": a Vault token is exchanged for the service account '{}' only \
                     where the controller runs with --sops-vault-configmap; add `{entry}` \
                     to the decryption Secret",
                        account.key()
                    ),
                    (None, Stanza::AzureKv(_)) if self.azure_unavailable.is_some() => format!(
                        ": {}; add `{entry}` to the decryption Secret",
                        self.azure_unavailable
                            .as_ref()
                            .map(ToString::to_string)
                            .unwrap_or_default()
                    ),
                    _ => format!(
                        " (add `{entry}` to the decryption Secret, or give the controller its own)"
                    ),
                },
            ))
        };
        let services = self.services();
        match stanza {
            Stanza::Age(entry) => self.age.open(entry),
            Stanza::Pgp(entry) => self.pgp.open(entry),
            Stanza::AwsKms(entry) => match &services.aws {
                Some(source) => source.open(entry),
                None => missing(AWS_KMS_ENTRY),
            },
            Stanza::GcpKms(entry) => match &services.gcp {
                Some(source) => source.open(entry),
                None => missing(GCP_KMS_ENTRY),
            },
            Stanza::AzureKv(entry) => match &services.azure {
                Some(source) => source.open(entry),
                None => missing(AZURE_KV_ENTRY),
            },
            Stanza::Vault(entry) => match &services.vault {
                Some(source) => source.open(entry),
                None => missing(VAULT_TOKEN_ENTRY),
            },
        }
    }
}
