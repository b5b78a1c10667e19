//! Cloud identities without static credentials, as fluxcd/pkg `auth` obtains them: who the
//! controller is to AWS, Google Cloud and Azure (its pod's identity: EKS web identity or Pod
//! Identity, the EC2 instance role, GKE's metadata server or a workload identity federation
//! file, Azure workload or managed identity), and who a Kubernetes ServiceAccount named on an
//! object is (gate `ObjectLevelWorkloadIdentity`): a token Kubernetes issues for it, with the
//! cloud's audience, exchanged for the cloud's credentials per the account's annotations.
//!
//! The decisions are pure functions over plain data (which source the environment selects,
//! what an annotation must look like, which audience and session name a provider uses) with
//! Flux's error texts; the exchanges ([`aws`], [`gcp`], [`azure`]) are thin calls over the
//! key services' bounded HTTP client. Kubernetes itself is reached only through
//! [`ServiceAccountTokens`], which the controller implements.

pub mod aws;
pub mod azure;
pub mod cache;
pub mod cluster;
pub mod gcp;
pub mod vault;

use std::collections::BTreeMap;
use std::path::PathBuf;

pub use crate::sops::keysource::http::ServiceError;

/// Why a cloud identity could not be had, in Flux's words; never holds a token or secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// A key service or identity provider gave no usable answer.
    #[error(transparent)]
    Service(#[from] ServiceError),
    /// Kubernetes did not give a ServiceAccount or its token.
    #[error(transparent)]
    Account(#[from] AccountError),
    /// An annotation's value is not of the form the provider needs.
    #[error("invalid {key} annotation: '{value}'. must match {pattern}")]
    Annotation {
        key: String,
        value: String,
        pattern: String,
    },
    /// A token or credentials file could not be read.
    #[error("reading the {what} {}: {cause}", .path.display())]
    File {
        what: &'static str,
        path: PathBuf,
        cause: String,
    },
    /// Configuration that cannot be used (credentials, an ARN, a ConfigMap, an address),
    /// in Flux's words.
    #[error("{0}")]
    Invalid(String),
    /// A provider this build leaves out.
    #[error("{provider} support is not compiled in (feature `{feature}`)")]
    NotCompiledIn {
        provider: &'static str,
        feature: &'static str,
    },
    /// What failed, in Flux's words, and why.
    #[error("{context}: {source}")]
    Failed {
        context: String,
        source: Box<AuthError>,
    },
}

impl AuthError {
    /// This error as the cause of `context` failing.
    pub(crate) fn during(self, context: impl Into<String>) -> AuthError {
        AuthError::Failed {
            context: context.into(),
            source: Box::new(self),
        }
    }
}

/// Why Kubernetes did not give a ServiceAccount's annotations or a token for it; `message`
/// is the API server's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AccountError {
    #[error("failed to get service account '{account}': {message}")]
    Get { account: String, message: String },
    #[error("failed to create kubernetes token for service account '{account}': {message}")]
    Token { account: String, message: String },
    /// The controller's own account, when a kubeconfig ConfigMap names none.
    #[error(
        "failed to create kubernetes token for controller service account '{account}': {message}"
    )]
    ControllerToken { account: String, message: String },
    /// The controller's own account could not be told from its token file.
    #[error("{0}")]
    ControllerAccount(String),
}

/// A Kubernetes ServiceAccount whose identity a decryption uses: its annotations say which
/// cloud identity it maps to, and Kubernetes issues it tokens for an audience. Errors are in
/// Flux's words and name the account, never a token.
pub trait ServiceAccountTokens: Send + Sync {
    /// `namespace/name`, as errors name it.
    fn key(&self) -> String;
    /// The account's name and namespace.
    fn name_and_namespace(&self) -> (String, String);
    /// The account's annotations (`failed to get service account '<ns>/<name>': …`).
    fn annotations(&self) -> Result<BTreeMap<String, String>, AccountError>;
    /// A token for the account with these audiences (`failed to create kubernetes token for
    /// service account '<ns>/<name>': …`).
    fn token(&self, audiences: &[String]) -> Result<String, AccountError>;
}

impl std::fmt::Debug for dyn ServiceAccountTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ServiceAccount").field(&self.key()).finish()
    }
}

/// A ServiceAccount whose tokens are for the audiences given, whatever a provider asks
/// (a kubeconfig ConfigMap's `audiences`).
pub struct WithAudiences<T> {
    pub account: T,
    pub audiences: Vec<String>,
}

impl<T: ServiceAccountTokens> ServiceAccountTokens for WithAudiences<T> {
    fn key(&self) -> String {
        self.account.key()
    }

    fn name_and_namespace(&self) -> (String, String) {
        self.account.name_and_namespace()
    }

    fn annotations(&self) -> Result<BTreeMap<String, String>, AccountError> {
        self.account.annotations()
    }

    fn token(&self, audiences: &[String]) -> Result<String, AccountError> {
        if self.audiences.is_empty() {
            self.account.token(audiences)
        } else {
            self.account.token(&self.audiences)
        }
    }
}

/// What a provider's exchange for a ServiceAccount fails with, as fluxcd/pkg wraps it.
pub(crate) fn for_service_account(
    account: &dyn ServiceAccountTokens,
    error: impl Into<AuthError>,
) -> AuthError {
    error.into().during(format!(
        "failed to create provider access token for service account '{}'",
        account.key()
    ))
}

/// The claims of a JWT, read, not verified (whoever the token is sent to verifies it); the
/// error says which part is not what a JWT has.
pub fn unverified_claims(token: &str) -> Result<serde_json::Value, String> {
    use base64::Engine as _;
    let [_, payload, _] = token.split('.').collect::<Vec<_>>()[..] else {
        return Err("not a JWT".into());
    };
    let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .map_err(|e| format!("failed to decode token payload: {e}"))?;
    serde_json::from_slice(&payload).map_err(|e| format!("failed to unmarshal token payload: {e}"))
}

/// An annotation's value, matched against `pattern` whole, else Flux's message for it.
fn annotation_matching(
    annotations: &BTreeMap<String, String>,
    key: &str,
    pattern: &str,
) -> Result<String, AuthError> {
    let value = annotations.get(key).cloned().unwrap_or_default();
    let matches = regex::Regex::new(pattern)
        .map(|re| re.is_match(&value))
        .unwrap_or(false);
    if matches {
        Ok(value)
    } else {
        Err(AuthError::Annotation {
            key: key.to_string(),
            value,
            pattern: pattern.to_string(),
        })
    }
}

/// How long a request to an instance metadata service may take: they answer at once where
/// they exist, and elsewhere (a laptop running the CLI) the address goes nowhere.
pub(crate) const METADATA_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// The named environment variables that are set and not empty.
pub fn environment(
    vars: impl IntoIterator<Item = (String, String)>,
    prefixes: &[&str],
) -> BTreeMap<String, String> {
    vars.into_iter()
        .filter(|(name, value)| {
            !value.is_empty() && prefixes.iter().any(|prefix| name.starts_with(prefix))
        })
        .collect()
}
