//! `spec.kubeConfig`: applying to another cluster with a kubeconfig from a Secret (`value`,
//! else `value.yaml`, or the named key), or with an identity a ConfigMap names
//! ([`crate::controller::remote_identity`]). Kubeconfigs that would run programs (exec
//! credential plugins) or skip TLS verification are refused unless the operator allowed them
//! with `--insecure-kubeconfig-exec` / `--insecure-kubeconfig-tls`.

use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::api::KubeConfigReference;

/// What the operator allows in remote kubeconfigs.
#[derive(Clone, Copy, Debug, Default)]
pub struct Allowances {
    pub exec: bool,
    pub insecure_tls: bool,
}

/// Clients built from kubeconfig Secrets, by Secret, resourceVersion and identity: a
/// reconcile reads the Secret but builds a client (TLS setup) only when it changed.
#[derive(Clone, Default)]
pub struct RemoteClients(
    std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, (String, kube::Client)>>>,
);

/// Why the client a Kustomization applies with cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{0}")]
    Identity(#[from] crate::controller::remote_identity::IdentityError),
    #[error(
        "invalid .spec.kubeConfig, neither .spec.kubeConfig.provider nor .spec.kubeConfig.secretRef is set"
    )]
    NoKubeConfig,
    // Flux's words (fluxcd/pkg runtime/client), with the API server's where it has them.
    #[error("unable to read KubeConfig secret '{secret}' error: {source}")]
    ReadSecret { secret: String, source: kube::Error },
    #[error("unable to read KubeConfig secret '{secret}' error: Secret \"{name}\" not found")]
    SecretNotFound { secret: String, name: String },
    #[error("KubeConfig secret '{secret}' does not contain a '{key}' key with a kubeconfig")]
    MissingKey { secret: String, key: String },
    #[error("kubeconfig Secret '{secret}': not UTF-8")]
    NotUtf8 { secret: String },
    #[error("kubeconfig Secret '{secret}': invalid kubeconfig: {reason}")]
    InvalidKubeconfig { secret: String, reason: String },
    #[error("kubeconfig Secret '{secret}': {refusal}")]
    Refused { secret: String, refusal: Refusal },
    #[error("kubeconfig Secret '{secret}': connecting to the remote cluster: {source}")]
    Connect { secret: String, source: kube::Error },
    #[error("client for {user}: {source}")]
    Impersonate { user: String, source: kube::Error },
}

/// What [`check`] refuses in a kubeconfig.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error(
        "kubeconfig user '{0}' runs a credential plugin; refused (allow with --insecure-kubeconfig-exec)"
    )]
    CredentialPlugin(String),
    #[error(
        "kubeconfig cluster '{0}' skips TLS verification; refused (allow with --insecure-kubeconfig-tls)"
    )]
    InsecureTls(String),
}

/// The client for the remote cluster, optionally impersonating a service account there;
/// a client built from the same Secret version is reused.
pub async fn cached_client(
    configs: &crate::controller::configs::ConfigReader,
    namespace: &str,
    reference: &KubeConfigReference,
    allowances: Allowances,
    impersonate: Option<String>,
    cache: &RemoteClients,
    requests: Option<&crate::controller::runtime_metrics::RestRequests>,
) -> Result<kube::Client, ClientError> {
    let Some(secret_ref) = &reference.secret_ref else {
        return Err(ClientError::NoKubeConfig);
    };
    let secret_id = format!("{namespace}/{}", secret_ref.name);
    let secret = configs
        .secret(namespace, &secret_ref.name)
        .await
        .map_err(|source| ClientError::ReadSecret {
            secret: secret_id.clone(),
            source,
        })?
        .ok_or_else(|| ClientError::SecretNotFound {
            secret: secret_id.clone(),
            name: secret_ref.name.clone(),
        })?;
    let cache_key = format!("{secret_id}/{:?}/{:?}", secret_ref.key, impersonate);
    let version = secret.metadata.resource_version.clone().unwrap_or_default();
    if let Some((cached_version, client)) = cache
        .0
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&cache_key)
        && *cached_version == version
        && !version.is_empty()
    {
        return Ok(client.clone());
    }
    let data = secret.data.unwrap_or_default();
    let bytes = match &secret_ref.key {
        Some(key) => data.get(key),
        None => data.get("value").or_else(|| data.get("value.yaml")),
    }
    .ok_or_else(|| ClientError::MissingKey {
        secret: secret_id.clone(),
        key: secret_ref.key.clone().unwrap_or_else(|| "value".into()),
    })?;
    let text = std::str::from_utf8(&bytes.0).map_err(|_| ClientError::NotUtf8 {
        secret: secret_id.clone(),
    })?;
    let invalid = |reason: String| ClientError::InvalidKubeconfig {
        secret: secret_id.clone(),
        reason,
    };
    let kubeconfig = Kubeconfig::from_yaml(text).map_err(|e| invalid(e.to_string()))?;
    check(&kubeconfig, allowances).map_err(|refusal| ClientError::Refused {
        secret: secret_id.clone(),
        refusal,
    })?;
    let mut config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .map_err(|e| invalid(e.to_string()))?;
    if let Some(user) = impersonate {
        config.auth_info.impersonate = Some(user);
    }
    let client = limited_client(config, requests)
        .await
        .map_err(|source| ClientError::Connect {
            secret: secret_id.clone(),
            source,
        })?;
    cache
        .0
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(cache_key, (version, client.clone()));
    Ok(client)
}

/// A client for a remote cluster, limited client-side only where that cluster does not run
/// API Priority and Fairness (asked once per client built, as Flux asks per client).
pub(crate) async fn limited_client(
    config: kube::Config,
    requests: Option<&crate::controller::runtime_metrics::RestRequests>,
) -> Result<kube::Client, kube::Error> {
    use crate::controller::ratelimit::{self, ClientLayers};
    let host = config.cluster_url.to_string();
    // Asked on a client of its own, not counted in `rest_client_requests_total`: Flux asks
    // with a bare transport.
    let probe = ratelimit::client(config.clone(), ClientLayers::default())?;
    let flow_control = ratelimit::priority_and_fairness(&probe).await;
    let limit = ratelimit::remote_limit(flow_control);
    if limit.is_none() {
        tracing::info!(
            host,
            "remote cluster: API Priority and Fairness is on: no client-side rate limit"
        );
    } else {
        tracing::info!(
            host,
            qps = f64::from(ratelimit::CLIENT_GO_DEFAULT.0),
            burst = ratelimit::CLIENT_GO_DEFAULT.1,
            "remote cluster: API Priority and Fairness is off: client-side rate limit"
        );
    }
    ratelimit::client(
        config,
        ClientLayers {
            limit: limit.as_ref(),
            requests,
        },
    )
}

/// Refuses exec plugins and disabled TLS verification unless allowed.
pub fn check(kubeconfig: &Kubeconfig, allowances: Allowances) -> Result<(), Refusal> {
    for user in &kubeconfig.auth_infos {
        let execs = user
            .auth_info
            .as_ref()
            .is_some_and(|a| a.exec.is_some() || a.auth_provider.is_some());
        if execs && !allowances.exec {
            return Err(Refusal::CredentialPlugin(user.name.clone()));
        }
    }
    for cluster in &kubeconfig.clusters {
        let insecure = cluster
            .cluster
            .as_ref()
            .is_some_and(|c| c.insecure_skip_tls_verify == Some(true));
        if insecure && !allowances.insecure_tls {
            return Err(Refusal::InsecureTls(cluster.name.clone()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_and_insecure_tls_are_refused_by_default() {
        let exec = Kubeconfig::from_yaml(
            "apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user:\n    exec:\n      command: aws\n      apiVersion: client.authentication.k8s.io/v1\n",
        )
        .unwrap();
        assert!(
            check(&exec, Allowances::default())
                .unwrap_err()
                .to_string()
                .contains("--insecure-kubeconfig-exec")
        );
        assert!(
            check(
                &exec,
                Allowances {
                    exec: true,
                    insecure_tls: false
                }
            )
            .is_ok()
        );
        let insecure = Kubeconfig::from_yaml(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://x\n    insecure-skip-tls-verify: true\n",
        )
        .unwrap();
        assert!(
            check(&insecure, Allowances::default())
                .unwrap_err()
                .to_string()
                .contains("--insecure-kubeconfig-tls")
        );
    }
}
