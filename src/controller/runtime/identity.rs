//! A Kustomization's ServiceAccount (or the controller's own) as a cloud identity: its
//! annotations and the tokens Kubernetes issues for it (`TokenRequest`), read with the
//! controller's own client, as fluxcd/pkg `auth` reads them; and the operator's Vault
//! ConfigMap (`--sops-vault-configmap`). The key services ask from the build's blocking
//! thread, so each request is run to completion on the controller's runtime from there.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Api;
use kube::api::PostParams;

use crate::auth::vault::{LoginPaths, VaultLoginConfig};
use crate::auth::{AccountError, AuthError, ServiceAccountTokens};
use crate::report::api_message;

pub struct KubeServiceAccount {
    client: kube::Client,
    namespace: String,
    name: String,
    runtime: tokio::runtime::Handle,
    annotations: OnceLock<Result<BTreeMap<String, String>, AccountError>>,
}

impl KubeServiceAccount {
    /// Must be made on the runtime (it keeps a handle to it), and asked off it.
    pub fn new(client: kube::Client, namespace: &str, name: &str) -> KubeServiceAccount {
        KubeServiceAccount {
            client,
            namespace: namespace.to_string(),
            name: name.to_string(),
            runtime: tokio::runtime::Handle::current(),
            annotations: OnceLock::new(),
        }
    }
}

/// The controller's own ServiceAccount, told from the `sub` of its mounted token when a
/// token is first asked for (a decryption that needs none never reads the file).
pub struct ControllerServiceAccount {
    client: kube::Client,
    token_file: PathBuf,
    runtime: tokio::runtime::Handle,
    account: OnceLock<Result<(String, String), AuthError>>,
}

impl ControllerServiceAccount {
    /// Must be made on the runtime (it keeps a handle to it), and asked off it.
    pub fn new(client: kube::Client, token_file: &Path) -> ControllerServiceAccount {
        ControllerServiceAccount {
            client,
            token_file: token_file.to_path_buf(),
            runtime: tokio::runtime::Handle::current(),
            account: OnceLock::new(),
        }
    }

    /// `(namespace, name)` of the account.
    fn account(&self) -> Result<(String, String), AuthError> {
        self.account
            .get_or_init(|| controller_account(&self.token_file))
            .clone()
    }
}

impl ServiceAccountTokens for ControllerServiceAccount {
    fn key(&self) -> String {
        match self.account() {
            Ok((namespace, name)) => format!("{namespace}/{name}"),
            Err(_) => self.token_file.display().to_string(),
        }
    }

    fn name_and_namespace(&self) -> (String, String) {
        self.account()
            .map(|(namespace, name)| (name, namespace))
            .unwrap_or_default()
    }

    fn annotations(&self) -> Result<BTreeMap<String, String>, AccountError> {
        let (namespace, name) = self
            .account()
            .map_err(|e| AccountError::ControllerAccount(e.to_string()))?;
        self.runtime
            .block_on(annotations(&self.client, &namespace, &name))
    }

    fn token(&self, audiences: &[String]) -> Result<String, AccountError> {
        let (namespace, name) = self
            .account()
            .map_err(|e| AccountError::ControllerAccount(e.to_string()))?;
        self.runtime
            .block_on(token(&self.client, &namespace, &name, audiences))
            .map_err(as_controllers)
    }
}

/// A failed TokenRequest for the controller's own account, as fluxcd/pkg words it.
pub(crate) fn as_controllers(error: AccountError) -> AccountError {
    match error {
        AccountError::Token { account, message } => {
            AccountError::ControllerToken { account, message }
        }
        other => other,
    }
}

/// The controller's own ServiceAccount, `(namespace, name)` from the `sub` of its mounted
/// token (read, not verified: the API server verifies it when it is used), in fluxcd/pkg's
/// words when it cannot be told.
pub(crate) fn controller_account(token_file: &Path) -> Result<(String, String), AuthError> {
    let token = std::fs::read_to_string(token_file).map_err(|e| {
        AuthError::Invalid(format!(
            "failed to read service account token file {}: {e}",
            token_file.display()
        ))
    })?;
    let claims = crate::auth::unverified_claims(token.trim()).map_err(|cause| {
        AuthError::Invalid(format!("failed to parse service account token: {cause}"))
    })?;
    let subject = claims
        .get("sub")
        .and_then(serde_json::Value::as_str)
        .ok_or(AuthError::Invalid(
            "failed to get subject from service account token: no sub claim".into(),
        ))?;
    match subject.split(':').collect::<Vec<_>>()[..] {
        [_, _, namespace, name] => Ok((namespace.to_string(), name.to_string())),
        _ => Err(AuthError::Invalid(format!(
            "invalid subject format in service account token: {subject}"
        ))),
    }
}

/// The operator's Vault ConfigMap (`--sops-vault-configmap`, in the controller's namespace),
/// read through the controller's ConfigMap reader.
pub struct VaultConfigMap {
    configs: crate::controller::configs::ConfigReader,
    namespace: String,
    name: String,
    runtime: tokio::runtime::Handle,
}

impl VaultConfigMap {
    /// Must be made on the runtime (it keeps a handle to it), and asked off it.
    pub fn new(
        configs: crate::controller::configs::ConfigReader,
        namespace: &str,
        name: &str,
    ) -> VaultConfigMap {
        VaultConfigMap {
            configs,
            namespace: namespace.to_string(),
            name: name.to_string(),
            runtime: tokio::runtime::Handle::current(),
        }
    }
}

impl VaultLoginConfig for VaultConfigMap {
    fn config_map(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    fn login_paths(&self) -> Result<LoginPaths, AuthError> {
        let unreadable = |reason: String| {
            AuthError::Invalid(format!(
                "failed to get Vault ConfigMap '{}': {reason}",
                self.config_map()
            ))
        };
        let found = self
            .runtime
            .block_on(self.configs.config_map(&self.namespace, &self.name))
            .map_err(|e| unreadable(api_message(&e)))?
            .ok_or_else(|| unreadable(format!("configmaps \"{}\" not found", self.name)))?;
        let data: BTreeMap<String, String> = found.data.unwrap_or_default().into_iter().collect();
        LoginPaths::from_config_map(&self.config_map(), &data)
    }
}

impl ServiceAccountTokens for KubeServiceAccount {
    fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    fn name_and_namespace(&self) -> (String, String) {
        (self.name.clone(), self.namespace.clone())
    }

    fn annotations(&self) -> Result<BTreeMap<String, String>, AccountError> {
        self.annotations
            .get_or_init(|| {
                self.runtime
                    .block_on(annotations(&self.client, &self.namespace, &self.name))
            })
            .clone()
    }

    fn token(&self, audiences: &[String]) -> Result<String, AccountError> {
        self.runtime
            .block_on(token(&self.client, &self.namespace, &self.name, audiences))
    }
}

/// A ServiceAccount's annotations, in Flux's words when it cannot be read.
pub(crate) async fn annotations(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<BTreeMap<String, String>, AccountError> {
    Api::<ServiceAccount>::namespaced(client.clone(), namespace)
        .get(name)
        .await
        .map(|account| account.metadata.annotations.unwrap_or_default())
        .map_err(|e| AccountError::Get {
            account: format!("{namespace}/{name}"),
            message: api_message(&e),
        })
}

/// A token Kubernetes issues for the ServiceAccount with these audiences (the API server's
/// own when none), valid for the API server's default hour.
pub(crate) async fn token(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    audiences: &[String],
) -> Result<String, AccountError> {
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: audiences.to_vec(),
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    Api::<ServiceAccount>::namespaced(client.clone(), namespace)
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .map_err(|e| api_message(&e))
        .and_then(|issued| {
            issued
                .status
                .map(|status| status.token)
                .filter(|token| !token.is_empty())
                .ok_or_else(|| "the answer has no token".to_string())
        })
        .map_err(|message| AccountError::Token {
            account: format!("{namespace}/{name}"),
            message,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(claims: &str) -> String {
        use base64::Engine as _;
        let encode = |text: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text);
        format!(
            "{}.{}.signature\n",
            encode(r#"{"alg":"RS256"}"#),
            encode(claims)
        )
    }

    #[test]
    fn the_controllers_account_is_told_from_its_mounted_token_in_fluxcd_pkgs_words() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        let cases = [
            (
                Some(token(r#"{"sub":"system:serviceaccount:flux-system:kustomize-controller"}"#)),
                Ok(("flux-system".to_string(), "kustomize-controller".to_string())),
            ),
            (
                None,
                Err(format!(
                    "failed to read service account token file {}: ",
                    file.display()
                )),
            ),
            (
                Some("opaque".into()),
                Err("failed to parse service account token: not a JWT".into()),
            ),
            (
                Some(token(r#"{"iss":"x"}"#)),
                Err("failed to get subject from service account token: no sub claim".into()),
            ),
            (
                Some(token(r#"{"sub":"system:serviceaccount:only-namespace"}"#)),
                Err("invalid subject format in service account token: system:serviceaccount:only-namespace".into()),
            ),
        ];
        for (content, expected) in cases {
            match &content {
                Some(text) => std::fs::write(&file, text).unwrap(),
                None => {
                    let _ = std::fs::remove_file(&file);
                }
            }
            let told = controller_account(&file).map_err(|e| e.to_string());
            match (&told, &expected) {
                (Err(error), Err(prefix)) => {
                    assert!(
                        error.starts_with(prefix.as_str()),
                        "{error} for {content:?}"
                    )
                }
                _ => assert_eq!(told, expected, "for {content:?}"),
            }
        }
    }
}
