//! A Kustomization's ServiceAccount as a cloud identity: its annotations and the tokens
//! Kubernetes issues for it (`TokenRequest`), read with the controller's own client, as
//! fluxcd/pkg `auth` reads them. The key services ask from the build's blocking thread, so
//! each request is run to completion on the controller's runtime from there.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Api;
use kube::api::PostParams;

use crate::auth::{AccountError, ServiceAccountTokens};

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

/// The API server's own words for a failed request.
pub(crate) fn api_message(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => status.message.clone(),
        other => crate::report::cause_chain(other),
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
