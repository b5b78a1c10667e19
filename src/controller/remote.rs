//! `spec.kubeConfig`: applying to another cluster with a kubeconfig from a Secret (`value`,
//! else `value.yaml`, or the named key). Kubeconfigs that would run programs (exec
//! credential plugins) or skip TLS verification are refused unless the operator allowed them
//! with `--insecure-kubeconfig-exec` / `--insecure-kubeconfig-tls`.

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
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

/// The client for the remote cluster, optionally impersonating a service account there;
/// a client built from the same Secret version is reused.
pub async fn cached_client(
    local: &kube::Client,
    namespace: &str,
    reference: &KubeConfigReference,
    allowances: Allowances,
    impersonate: Option<String>,
    cache: &RemoteClients,
) -> Result<kube::Client, String> {
    let Some(secret_ref) = &reference.secret_ref else {
        return Err(
            "spec.kubeConfig.configMapRef (workload identity) is not supported; use secretRef"
                .into(),
        );
    };
    let api: Api<Secret> = Api::namespaced(local.clone(), namespace);
    let secret = api
        .get_opt(&secret_ref.name)
        .await
        .map_err(|e| {
            format!(
                "cannot get kubeconfig Secret '{namespace}/{}': {e}",
                secret_ref.name
            )
        })?
        .ok_or_else(|| {
            format!(
                "kubeconfig Secret '{namespace}/{}' not found",
                secret_ref.name
            )
        })?;
    let cache_key = format!(
        "{namespace}/{}/{:?}/{:?}",
        secret_ref.name, secret_ref.key, impersonate
    );
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
    .ok_or_else(|| {
        format!(
            "kubeconfig Secret '{namespace}/{}' has no key '{}'",
            secret_ref.name,
            secret_ref.key.as_deref().unwrap_or("value")
        )
    })?;
    let source = format!("kubeconfig Secret '{namespace}/{}'", secret_ref.name);
    let text = std::str::from_utf8(&bytes.0).map_err(|_| format!("{source}: not UTF-8"))?;
    let kubeconfig =
        Kubeconfig::from_yaml(text).map_err(|e| format!("{source}: invalid kubeconfig: {e}"))?;
    check(&kubeconfig, allowances).map_err(|e| format!("{source}: {e}"))?;
    let mut config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .map_err(|e| format!("{source}: invalid kubeconfig: {e}"))?;
    if let Some(user) = impersonate {
        config.auth_info.impersonate = Some(user);
    }
    let client = kube::Client::try_from(config)
        .map_err(|e| format!("{source}: connecting to the remote cluster: {e}"))?;
    cache
        .0
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(cache_key, (version, client.clone()));
    Ok(client)
}

/// Refuses exec plugins and disabled TLS verification unless allowed.
pub fn check(kubeconfig: &Kubeconfig, allowances: Allowances) -> Result<(), String> {
    for user in &kubeconfig.auth_infos {
        let execs = user
            .auth_info
            .as_ref()
            .is_some_and(|a| a.exec.is_some() || a.auth_provider.is_some());
        if execs && !allowances.exec {
            return Err(format!(
                "kubeconfig user '{}' runs a credential plugin; refused (allow with --insecure-kubeconfig-exec)",
                user.name
            ));
        }
    }
    for cluster in &kubeconfig.clusters {
        let insecure = cluster
            .cluster
            .as_ref()
            .is_some_and(|c| c.insecure_skip_tls_verify == Some(true));
        if insecure && !allowances.insecure_tls {
            return Err(format!(
                "kubeconfig cluster '{}' skips TLS verification; refused (allow with --insecure-kubeconfig-tls)",
                cluster.name
            ));
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
                .contains("--insecure-kubeconfig-tls")
        );
    }
}
