//! `spec.kubeConfig.configMapRef`: the client of a remote cluster reached with an identity
//! rather than a kubeconfig Secret, as fluxcd/pkg `auth.GetRESTConfig` builds it. The
//! ConfigMap (in the Kustomization's namespace) names the provider and the cluster
//! ([`crate::auth::cluster`]): `generic` (a Kubernetes ServiceAccount token), `aws` (EKS),
//! `gcp` (GKE), `azure` (AKS). The identity is a ServiceAccount's (`serviceAccountName` or
//! `--default-kubeconfig-service-account`, gate `ObjectLevelWorkloadIdentity`) or, without
//! one, the controller's own; the cloud's API gives the address and CA the ConfigMap does not.
//! The access is kept in the token cache (operation `fetch_kubeconfig`) for 80% of its
//! token's life; a client is built again when the access it was built with changes.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::auth::cache::ClusterAccess;
use crate::auth::{AccountError, AuthError};

use crate::auth::cluster::{ClusterReference, Provider, parse_cluster_address};

/// Where Kubernetes mounts a pod's own ServiceAccount token.
pub const CONTROLLER_TOKEN_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";
/// How long a Kubernetes TokenRequest token lives (the API server's default).
const SERVICE_ACCOUNT_TOKEN_LIFETIME: Duration = Duration::from_secs(3600);

/// What the controller knows that a ConfigMap-based client needs.
pub struct IdentityOptions<'a> {
    pub object_level_workload_identity: bool,
    pub default_kubeconfig_service_account: Option<&'a str>,
    pub controller_token_file: &'a Path,
    /// The controller's environment: its own cloud identity and the clouds' endpoints.
    pub environment: &'a [(String, String)],
    /// Where Google's services are reached, when not Google's own.
    pub google_endpoints: Option<&'a crate::auth::gcp::GoogleEndpoints>,
    /// Azure Resource Manager's origin, when not Azure's own.
    pub azure_resource_manager: Option<&'a str>,
    /// The token cache (`fetch_kubeconfig`), and the Kustomization asking.
    pub token_cache: Option<&'a crate::auth::cache::TokenCache>,
    pub object_name: &'a str,
}

/// Where and with what a remote cluster is reached.
struct Material {
    host: String,
    ca_pem: Option<String>,
    token: String,
    /// How long the token lives, as its issuer says.
    lifetime: Option<Duration>,
}

/// A client and the ConfigMap version and access it was built with.
type Built = (String, ClusterAccess, kube::Client);

/// Clients built from kubeconfig ConfigMaps, by ConfigMap and impersonated account: reused
/// while the ConfigMap and the access (the token the cache keeps) are the same.
#[derive(Clone, Default)]
pub struct IdentityClients(Arc<Mutex<std::collections::HashMap<String, Built>>>);

/// Why a ConfigMap-based client cannot be had; the text is Flux's.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error("failed to get configmap {config_map}: {reason}")]
    ReadConfigMap { config_map: String, reason: String },
    #[error(transparent)]
    Reference(AuthError),
    #[error("failed to get access token for cluster: {0}")]
    AccessToken(AuthError),
    #[error(transparent)]
    RestConfig(AuthError),
    #[error("connecting to the remote cluster: {0}")]
    Connect(kube::Error),
    /// Flux's words, then the ConfigMap they came from (a Kustomization names only its
    /// `kubeConfig.configMapRef`, and a fleet shares few of them).
    #[error("{source} (kubeconfig ConfigMap '{config_map}')")]
    InConfigMap {
        config_map: String,
        source: Box<IdentityError>,
    },
}

/// The client for the cluster the ConfigMap names.
#[allow(clippy::too_many_arguments)]
pub async fn client(
    controller: &kube::Client,
    configs: &crate::controller::configs::ConfigReader,
    namespace: &str,
    config_map: &str,
    options: &IdentityOptions<'_>,
    impersonate: Option<String>,
    cache: &IdentityClients,
    requests: Option<&crate::controller::runtime_metrics::RestRequests>,
) -> Result<kube::Client, IdentityError> {
    let config_map_id = format!("{namespace}/{config_map}");
    let read_failed = |reason: String| IdentityError::ReadConfigMap {
        config_map: config_map_id.clone(),
        reason,
    };
    let found = configs
        .config_map(namespace, config_map)
        .await
        .map_err(|e| read_failed(crate::report::api_message(&e)))?
        .ok_or_else(|| read_failed(format!("configmaps \"{config_map}\" not found")))?;
    let version = found.metadata.resource_version.clone().unwrap_or_default();
    let data: std::collections::BTreeMap<String, String> =
        found.data.unwrap_or_default().into_iter().collect();
    let in_config_map = |source: IdentityError| IdentityError::InConfigMap {
        config_map: config_map_id.clone(),
        source: Box::new(source),
    };
    let reference = ClusterReference::from_data(&data)
        .map_err(IdentityError::Reference)
        .map_err(in_config_map)?;
    let access = cluster_access(controller, namespace, &reference, options)
        .await
        .map_err(in_config_map)?;
    let cache_key = format!("{config_map_id}/{impersonate:?}");
    if let Some((cached_version, cached_access, client)) = cache
        .0
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&cache_key)
        && *cached_version == version
        && *cached_access == access
    {
        return Ok(client.clone());
    }
    let mut config = rest_config(&access.host, access.ca_pem.as_deref(), access.token.clone())
        .map_err(|e| {
            IdentityError::RestConfig(AuthError::Invalid(format!(
                "kubeconfig ConfigMap '{config_map_id}': {e}"
            )))
        })?;
    config.auth_info.impersonate = impersonate;
    let client = crate::controller::remote::limited_client(config, requests)
        .await
        .map_err(IdentityError::Connect)
        .map_err(in_config_map)?;
    cache
        .0
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(cache_key, (version, access, client.clone()));
    Ok(client)
}

/// How the cluster is reached: from the token cache while it keeps it (operation
/// `fetch_kubeconfig`), else asked of the provider and kept for 80% of the token's life.
async fn cluster_access(
    controller: &kube::Client,
    namespace: &str,
    reference: &ClusterReference,
    options: &IdentityOptions<'_>,
) -> Result<ClusterAccess, IdentityError> {
    use crate::auth::cache::{Cached, Involved};
    let account = reference
        .service_account_name
        .as_deref()
        .or(options.default_kubeconfig_service_account)
        .unwrap_or_default();
    let key = crate::auth::cache::key(&[
        (
            "provider",
            &format!("{:?}", reference.provider).to_lowercase(),
        ),
        ("audiences", &reference.audiences.join(",")),
        ("serviceAccountName", account),
        (
            "serviceAccountNamespace",
            if account.is_empty() { "" } else { namespace },
        ),
        ("cluster", reference.cluster.as_deref().unwrap_or_default()),
        ("address", reference.address.as_deref().unwrap_or_default()),
        ("caData", reference.ca_pem.as_deref().unwrap_or_default()),
    ]);
    let involved = Involved {
        kind: "Kustomization".into(),
        name: options.object_name.to_string(),
        namespace: namespace.to_string(),
        operation: "fetch_kubeconfig".into(),
    };
    if let Some(Cached::Cluster(access)) = options
        .token_cache
        .and_then(|cache| cache.lookup(&key, Some(&involved)))
    {
        return Ok(access);
    }
    let fetched = match reference.provider {
        Provider::Generic => generic(controller, namespace, reference, options).await,
        Provider::Aws => eks(controller, namespace, reference, options).await,
        Provider::Gcp => gke(controller, namespace, reference, options).await,
        Provider::Azure => aks(controller, namespace, reference, options).await,
    };
    let fetched = fetched.map(|material| {
        let access = ClusterAccess {
            host: material.host,
            ca_pem: material.ca_pem,
            token: material.token,
        };
        (access, material.lifetime)
    });
    if let Some(cache) = options.token_cache {
        let kept = fetched
            .as_ref()
            .ok()
            .map(|(access, lifetime)| (Cached::Cluster(access.clone()), *lifetime));
        cache.store(&key, kept.as_ref());
    }
    fetched.map(|(access, _)| access)
}

/// The `generic` provider: the ServiceAccount's token (gate on), else the controller's own
/// account's, for the ConfigMap's audiences (its address when none), at the canonical address.
async fn generic(
    controller: &kube::Client,
    namespace: &str,
    reference: &ClusterReference,
    options: &IdentityOptions<'_>,
) -> Result<Material, IdentityError> {
    let audiences = reference.generic_audiences();
    let token = match object_account(controller, namespace, reference, options)
        .await
        .map_err(IdentityError::AccessToken)?
    {
        Some(name) => crate::controller::identity::token(controller, namespace, &name, &audiences)
            .await
            .map_err(AuthError::from),
        None => {
            match crate::controller::identity::controller_account(options.controller_token_file) {
                Ok((account_namespace, account)) => crate::controller::identity::token(
                    controller,
                    &account_namespace,
                    &account,
                    &audiences,
                )
                .await
                .map_err(|e| crate::controller::identity::as_controllers(e).into()),
                Err(error) => Err(error),
            }
        }
    }
    .map_err(IdentityError::AccessToken)?;
    let address = reference.address.as_deref().ok_or_else(|| {
        IdentityError::RestConfig(AuthError::Invalid(
            "cluster address is required to create a REST config".into(),
        ))
    })?;
    let host = parse_cluster_address(address).map_err(|e| {
        IdentityError::RestConfig(AuthError::Invalid(format!(
            "failed to parse cluster address {address}: {e}"
        )))
    })?;
    Ok(Material {
        host,
        ca_pem: reference.ca_pem.clone(),
        token,
        lifetime: Some(SERVICE_ACCOUNT_TOKEN_LIFETIME),
    })
}

/// The ServiceAccount a ConfigMap's identity is (its `serviceAccountName`, else
/// `--default-kubeconfig-service-account`), checked as fluxcd/pkg checks it: the account is
/// read first (the lockdown message names a missing default), then the gate. `None`: the
/// controller's own identity.
async fn object_account(
    controller: &kube::Client,
    namespace: &str,
    reference: &ClusterReference,
    options: &IdentityOptions<'_>,
) -> Result<Option<String>, AuthError> {
    let named = reference.service_account_name.clone();
    let default = options
        .default_kubeconfig_service_account
        .filter(|_| named.is_none());
    let Some(name) = named.or(default.map(str::to_string)) else {
        return Ok(None);
    };
    if let Err(error) = crate::controller::identity::annotations(controller, namespace, &name).await
    {
        return Err(match error {
            AccountError::Get { account, message }
                if default.is_some() && message.ends_with("not found") =>
            {
                AccountError::Get {
                    account,
                    message: "the specified default service account does not exist in the object namespace. your cluster is subject to multi-tenant workload identity lockdown, reach out to your cluster administrator for help".into(),
                }
            }
            other => other,
        }
        .into());
    }
    if !options.object_level_workload_identity {
        return Err(AuthError::Invalid(
            "ObjectLevelWorkloadIdentity feature gate is not enabled".into(),
        ));
    }
    Ok(Some(name))
}

/// The `aws` provider (EKS): the cluster's region and name from its ARN; the ServiceAccount's
/// role or the controller's credentials; the endpoint and CA from `DescribeCluster` unless the
/// ConfigMap gives both; a presigned STS token.
async fn eks(
    controller: &kube::Client,
    namespace: &str,
    reference: &ClusterReference,
    options: &IdentityOptions<'_>,
) -> Result<Material, IdentityError> {
    use crate::auth::aws;
    let arn = reference.cluster.clone().unwrap_or_default();
    let (region, name) = aws::eks_cluster(&arn).map_err(IdentityError::Reference)?;
    let env = crate::auth::environment(options.environment.iter().cloned(), &["AWS_"]);
    let source = match object_account(controller, namespace, reference, options)
        .await
        .map_err(IdentityError::AccessToken)?
    {
        Some(account) => aws::AwsCredentialSource::ServiceAccount(cloud_account(
            controller, namespace, &account, reference,
        )),
        None => aws::controller_source(&env).ok_or_else(|| {
            IdentityError::AccessToken(AuthError::Invalid(
                "no AWS credentials: the controller has none configured".into(),
            ))
        })?,
    };
    let sts = aws::service_endpoint(&env, "sts", &region);
    let eks = aws::service_endpoint(&env, "eks", &region);
    let (address, ca_pem) = (reference.address.clone(), reference.ca_pem.clone());
    off_runtime("EKS", move |http| {
        let session = format!(
            "{}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos()
        );
        let (credentials, _) = aws::credentials(http, &source, &sts, &region, &session)
            .map_err(IdentityError::AccessToken)?;
        let (host, ca_pem) = given_or_described(address, ca_pem, |_| {
            aws::describe_eks_cluster(http, &eks, &arn, &region, &name, &credentials)
                .map_err(IdentityError::RestConfig)
        })?;
        let token = aws::eks_token(&sts, &region, &name, &credentials)
            .map_err(IdentityError::RestConfig)?;
        Ok(Material {
            host,
            ca_pem,
            token,
            lifetime: Some(aws::EKS_TOKEN_LIFETIME),
        })
    })
    .await
}

/// The ServiceAccount a ConfigMap names, as a cloud identity (its tokens for the ConfigMap's
/// audiences when it gives some).
fn cloud_account(
    controller: &kube::Client,
    namespace: &str,
    name: &str,
    reference: &ClusterReference,
) -> Arc<dyn crate::auth::ServiceAccountTokens> {
    Arc::new(crate::auth::WithAudiences {
        account: crate::controller::identity::KubeServiceAccount::new(
            controller.clone(),
            namespace,
            name,
        ),
        audiences: reference.audiences.clone(),
    })
}

/// The `gcp` provider (GKE): the ServiceAccount's federated token or the controller's own
/// (federation file or metadata server); the address and CA from `GetCluster` unless the
/// ConfigMap gives both.
async fn gke(
    controller: &kube::Client,
    namespace: &str,
    reference: &ClusterReference,
    options: &IdentityOptions<'_>,
) -> Result<Material, IdentityError> {
    use crate::auth::gcp;
    let env = crate::auth::environment(
        options.environment.iter().cloned(),
        &["GOOGLE_", "GCE_METADATA_HOST"],
    );
    let endpoints = options
        .google_endpoints
        .cloned()
        .unwrap_or_else(|| gcp::GoogleEndpoints::from_environment(&env));
    let account = object_account(controller, namespace, reference, options)
        .await
        .map_err(IdentityError::AccessToken)?
        .map(|name| cloud_account(controller, namespace, &name, reference));
    let (address, ca_pem) = (reference.address.clone(), reference.ca_pem.clone());
    let cluster = reference.cluster.clone().unwrap_or_default();
    off_runtime("GKE", move |http| {
        let (token, lifetime) = match &account {
            Some(account) => gcp::service_account_token(http, account.as_ref(), &endpoints),
            None => gcp::controller_token(http, &env, &endpoints),
        }
        .map_err(IdentityError::AccessToken)?;
        let (host, ca_pem) = given_or_described(address, ca_pem, |_| {
            gcp::describe_gke_cluster(http, &endpoints, &cluster, &token)
                .map_err(IdentityError::RestConfig)
        })?;
        Ok(Material {
            host,
            ca_pem,
            token,
            lifetime,
        })
    })
    .await
}

/// The `azure` provider (AKS): the ServiceAccount's federated identity or the controller's
/// own; a token for AKS's Entra application as the bearer; the address and CA from the
/// cluster user credentials (Resource Manager, with a token of its own) unless the ConfigMap
/// gives both.
async fn aks(
    controller: &kube::Client,
    namespace: &str,
    reference: &ClusterReference,
    options: &IdentityOptions<'_>,
) -> Result<Material, IdentityError> {
    use crate::auth::azure::{self, AzureIdentity};
    let env = crate::auth::environment(options.environment.iter().cloned(), &["AZURE_"]);
    let identity = match object_account(controller, namespace, reference, options)
        .await
        .map_err(IdentityError::AccessToken)?
    {
        Some(name) => AzureIdentity::ServiceAccount {
            account: cloud_account(controller, namespace, &name, reference),
            authority_host: env
                .get("AZURE_AUTHORITY_HOST")
                .cloned()
                .unwrap_or_else(|| azure::DEFAULT_AUTHORITY.into()),
        },
        None => azure::controller_identity(&env).map_err(IdentityError::AccessToken)?,
    };
    let resource_manager = options
        .azure_resource_manager
        .unwrap_or(azure::RESOURCE_MANAGER)
        .to_string();
    let scope = azure::resource_manager_scope(&env);
    let (address, ca_pem) = (reference.address.clone(), reference.ca_pem.clone());
    let cluster = reference.cluster.clone().unwrap_or_default();
    off_runtime("AKS", move |http| {
        let (token, lifetime) = identity
            .token(http, azure::AKS_SCOPE)
            .map_err(IdentityError::AccessToken)?;
        let (host, ca_pem) = given_or_described(address, ca_pem, |address| {
            let (manager_token, _) = identity
                .token(http, scope)
                .map_err(IdentityError::AccessToken)?;
            azure::describe_aks_cluster(http, &resource_manager, &cluster, address, &manager_token)
                .map_err(IdentityError::RestConfig)
        })?;
        Ok(Material {
            host,
            ca_pem,
            token,
            lifetime,
        })
    })
    .await
}

/// Runs a provider's exchanges, which call the key services' blocking HTTP client, off the
/// runtime; `provider` names it if that stops.
async fn off_runtime(
    provider: &'static str,
    exchange: impl FnOnce(&crate::sops::keysource::http::Http) -> Result<Material, IdentityError>
    + Send
    + 'static,
) -> Result<Material, IdentityError> {
    tokio::task::spawn_blocking(move || {
        exchange(&crate::sops::keysource::http::Http::new(None, None))
    })
    .await
    .map_err(|e| {
        IdentityError::RestConfig(AuthError::Invalid(format!(
            "the {provider} client setup stopped: {e}"
        )))
    })?
}

/// The address and CA the ConfigMap gives, what `describe` finds for what it does not (as
/// Flux: the cloud is asked only when one of the two is missing; a given one wins).
fn given_or_described(
    address: Option<String>,
    ca_pem: Option<String>,
    describe: impl FnOnce(Option<&str>) -> Result<(String, String), IdentityError>,
) -> Result<(String, Option<String>), IdentityError> {
    match (address, ca_pem) {
        (Some(address), Some(ca_pem)) => Ok((address, Some(ca_pem))),
        (address, ca_pem) => {
            let (host, described) = describe(address.as_deref())?;
            Ok((address.unwrap_or(host), Some(ca_pem.unwrap_or(described))))
        }
    }
}

/// A client configuration for `host` with a bearer token, trusting `ca_pem` (else the
/// system's roots).
fn rest_config(host: &str, ca_pem: Option<&str>, token: String) -> Result<kube::Config, AuthError> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject as _;
    let url = host
        .parse()
        .map_err(|e| AuthError::Invalid(format!("failed to parse cluster address {host}: {e}")))?;
    let mut config = kube::Config::new(url);
    // A CA bundle is for TLS: a plain http address (a local proxy) has none to check.
    if let Some(pem) = ca_pem.filter(|_| host.starts_with("https://")) {
        let roots: Vec<Vec<u8>> = CertificateDer::pem_slice_iter(pem.as_bytes())
            .map(|der| der.map(|der| der.to_vec()))
            .collect::<Result<_, _>>()
            .map_err(|e| AuthError::Invalid(format!("invalid ca.crt: {e}")))?;
        if roots.is_empty() {
            return Err(AuthError::Invalid(
                "invalid ca.crt: no PEM certificate".into(),
            ));
        }
        config.root_cert = Some(roots);
    }
    config.auth_info.token = Some(token.into());
    Ok(config)
}

/// The controller's token file, as the options name it.
pub fn default_token_file() -> PathBuf {
    PathBuf::from(CONTROLLER_TOKEN_FILE)
}
