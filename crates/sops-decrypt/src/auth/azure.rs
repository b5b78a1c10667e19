//! Azure: Microsoft Entra ID access tokens (fluxcd/pkg `auth/azure`).
//!
//! The controller's identity is one credential, the first its environment configures, as
//! Flux builds it (no fallback once chosen): a service principal's secret
//! (`AZURE_TENANT_ID`, `AZURE_CLIENT_ID`, `AZURE_CLIENT_SECRET`), workload identity (all of
//! `AZURE_CLIENT_ID`, `AZURE_TENANT_ID`, `AZURE_FEDERATED_TOKEN_FILE`, `AZURE_AUTHORITY_HOST`:
//! the projected token is the client assertion), else the managed identity of the instance
//! metadata service. A ServiceAccount named on an object is a federated credential: its
//! `azure.workload.identity/tenant-id` and `client-id` annotations, and a Kubernetes token
//! for `api://AzureADTokenExchange` as the assertion.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;

use super::{AuthError, ServiceAccountTokens, ServiceError};
use crate::sops::keysource::http::{Http, seconds};

/// A bearer token and how long it lives.
pub type Lived = (String, Option<std::time::Duration>);

pub const DEFAULT_AUTHORITY: &str = "https://login.microsoftonline.com/";
/// The audience of the Kubernetes tokens Entra ID takes as client assertions.
pub const TOKEN_EXCHANGE_AUDIENCE: &str = "api://AzureADTokenExchange";
pub const TENANT_ID_ANNOTATION: &str = "azure.workload.identity/tenant-id";
pub const CLIENT_ID_ANNOTATION: &str = "azure.workload.identity/client-id";
pub const INSTANCE_METADATA: &str = "http://169.254.169.254";
const JWT_BEARER: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// Who asks Entra ID for a token.
#[derive(Clone)]
pub enum AzureIdentity {
    /// A service principal's client secret.
    ClientSecret {
        tenant_id: String,
        client_id: String,
        client_secret: String,
        authority_host: String,
    },
    /// A service principal's certificate (PEM: the certificate, then its private key, as
    /// Azure's tools write it): an RS256 client assertion with its thumbprint.
    ClientCertificate {
        tenant_id: String,
        client_id: String,
        pem: String,
        /// `x5c`: the certificate chain sent along (subject name/issuer authentication).
        send_chain: bool,
        authority_host: String,
    },
    /// Workload identity: the federated token file is the client assertion.
    WorkloadIdentity {
        tenant_id: String,
        client_id: String,
        token_file: PathBuf,
        authority_host: String,
    },
    /// The managed identity of the instance metadata service (a user-assigned one when a
    /// client id is given).
    ManagedIdentity {
        client_id: Option<String>,
        endpoint: String,
    },
    /// A Kubernetes ServiceAccount's federated identity (object-level workload identity).
    ServiceAccount {
        account: Arc<dyn ServiceAccountTokens>,
        authority_host: String,
    },
}

impl std::fmt::Debug for AzureIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AzureIdentity::ClientSecret {
                tenant_id,
                client_id,
                authority_host,
                ..
            } => f
                .debug_struct("ClientSecret")
                .field("tenant_id", tenant_id)
                .field("client_id", client_id)
                .field("authority_host", authority_host)
                .finish_non_exhaustive(),
            AzureIdentity::ClientCertificate {
                tenant_id,
                client_id,
                ..
            } => f
                .debug_struct("ClientCertificate")
                .field("tenant_id", tenant_id)
                .field("client_id", client_id)
                .finish_non_exhaustive(),
            AzureIdentity::WorkloadIdentity {
                tenant_id,
                client_id,
                ..
            } => f
                .debug_struct("WorkloadIdentity")
                .field("tenant_id", tenant_id)
                .field("client_id", client_id)
                .finish_non_exhaustive(),
            AzureIdentity::ManagedIdentity {
                client_id,
                endpoint,
            } => f
                .debug_struct("ManagedIdentity")
                .field("client_id", client_id)
                .field("endpoint", endpoint)
                .finish(),
            AzureIdentity::ServiceAccount { account, .. } => f
                .debug_tuple("ServiceAccount")
                .field(&account.key())
                .finish(),
        }
    }
}

/// The controller's credential, as fluxcd/pkg builds it from the environment. Client
/// certificates and user passwords are named as not supported rather than passed over:
/// Flux would use them.
pub fn controller_identity(env: &BTreeMap<String, String>) -> Result<AzureIdentity, AuthError> {
    let var = |name: &str| env.get(name).filter(|v| !v.is_empty()).cloned();
    let authority_host = var("AZURE_AUTHORITY_HOST").unwrap_or_else(|| DEFAULT_AUTHORITY.into());
    if let (Some(tenant_id), Some(client_id)) = (var("AZURE_TENANT_ID"), var("AZURE_CLIENT_ID")) {
        if let Some(client_secret) = var("AZURE_CLIENT_SECRET") {
            return Ok(AzureIdentity::ClientSecret {
                tenant_id,
                client_id,
                client_secret,
                authority_host,
            });
        }
        if let Some(path) = var("AZURE_CLIENT_CERTIFICATE_PATH") {
            if var("AZURE_CLIENT_CERTIFICATE_PASSWORD").is_some() {
                return Err(AuthError::Invalid("EnvironmentCredential: password-protected client certificates are not supported here".into()));
            }
            let pem = std::fs::read_to_string(&path).map_err(|e| {
                AuthError::Invalid(format!("EnvironmentCredential: reading {path}: {e}"))
            })?;
            return Ok(AzureIdentity::ClientCertificate {
                tenant_id,
                client_id,
                pem,
                send_chain: var("AZURE_CLIENT_SEND_CERTIFICATE_CHAIN")
                    .is_some_and(|v| v == "1" || v.eq_ignore_ascii_case("true")),
                authority_host,
            });
        }
        if var("AZURE_USERNAME").is_some() && var("AZURE_PASSWORD").is_some() {
            return Err(AuthError::Invalid(
                "EnvironmentCredential: user passwords (AZURE_USERNAME) are not supported here"
                    .into(),
            ));
        }
    }
    // Presence, as Flux looks the variables up; AZURE_AUTHORITY_HOST too, which the
    // workload identity webhook always injects.
    let present = |name: &str| env.contains_key(name);
    if [
        "AZURE_CLIENT_ID",
        "AZURE_FEDERATED_TOKEN_FILE",
        "AZURE_AUTHORITY_HOST",
        "AZURE_TENANT_ID",
    ]
    .iter()
    .all(|name| present(name))
    {
        return Ok(AzureIdentity::WorkloadIdentity {
            tenant_id: env["AZURE_TENANT_ID"].clone(),
            client_id: env["AZURE_CLIENT_ID"].clone(),
            token_file: env["AZURE_FEDERATED_TOKEN_FILE"].clone().into(),
            authority_host,
        });
    }
    Ok(AzureIdentity::ManagedIdentity {
        client_id: var("AZURE_CLIENT_ID"),
        endpoint: var("AZURE_POD_IDENTITY_AUTHORITY_HOST")
            .unwrap_or_else(|| INSTANCE_METADATA.into()),
    })
}

/// The tenant and client a ServiceAccount's annotations name, checked as Flux checks them
/// (present, the tenant first).
pub fn account_identity(
    annotations: &BTreeMap<String, String>,
) -> Result<(String, String), AuthError> {
    let tenant = annotations.get(TENANT_ID_ANNOTATION).ok_or_else(|| {
        AuthError::Invalid(format!(
            "azure tenant ID is not set in the service account annotation {TENANT_ID_ANNOTATION}"
        ))
    })?;
    let client = annotations.get(CLIENT_ID_ANNOTATION).ok_or_else(|| {
        AuthError::Invalid(format!(
            "azure client ID is not set in the service account annotation {CLIENT_ID_ANNOTATION}"
        ))
    })?;
    Ok((tenant.clone(), client.clone()))
}

impl AzureIdentity {
    /// An access token for `scope` (`https://vault.azure.net/.default`).
    pub fn token(&self, http: &Http, scope: &str) -> Result<Lived, AuthError> {
        match self {
            AzureIdentity::ClientSecret {
                tenant_id,
                client_id,
                client_secret,
                authority_host,
            } => entra_token(
                http,
                authority_host,
                tenant_id,
                &[
                    ("client_id", client_id),
                    ("client_secret", client_secret),
                    ("scope", scope),
                ],
            ),
            AzureIdentity::ClientCertificate {
                tenant_id,
                client_id,
                pem,
                send_chain,
                authority_host,
            } => {
                let url = token_url(authority_host, tenant_id);
                let assertion = certificate_assertion(pem, *send_chain, client_id, &url)?;
                assertion_token(
                    http,
                    authority_host,
                    tenant_id,
                    client_id,
                    &assertion,
                    scope,
                )
            }
            AzureIdentity::WorkloadIdentity {
                tenant_id,
                client_id,
                token_file,
                authority_host,
            } => {
                let assertion =
                    std::fs::read_to_string(token_file).map_err(|e| AuthError::File {
                        what: "federated token",
                        path: token_file.clone(),
                        cause: e.to_string(),
                    })?;
                assertion_token(
                    http,
                    authority_host,
                    tenant_id,
                    client_id,
                    assertion.trim(),
                    scope,
                )
            }
            AzureIdentity::ManagedIdentity {
                client_id,
                endpoint,
            } => managed_identity_token(http, endpoint, client_id.as_deref(), scope),
            AzureIdentity::ServiceAccount {
                account,
                authority_host,
            } => {
                let annotations = account.annotations()?;
                let (tenant_id, client_id) = account_identity(&annotations).map_err(|e| {
                    e.during(format!(
                        "failed to get provider identity from service account '{}' annotations",
                        account.key()
                    ))
                })?;
                let assertion = account.token(&[TOKEN_EXCHANGE_AUDIENCE.to_string()])?;
                assertion_token(
                    http,
                    authority_host,
                    &tenant_id,
                    &client_id,
                    &assertion,
                    scope,
                )
                .map_err(|e| super::for_service_account(account.as_ref(), e))
            }
        }
    }
}

fn assertion_token(
    http: &Http,
    authority_host: &str,
    tenant_id: &str,
    client_id: &str,
    assertion: &str,
    scope: &str,
) -> Result<Lived, AuthError> {
    entra_token(
        http,
        authority_host,
        tenant_id,
        &[
            ("client_id", client_id),
            ("client_assertion_type", JWT_BEARER),
            ("client_assertion", assertion),
            ("scope", scope),
        ],
    )
}

/// Entra ID's client-credentials grant at `<authority>/<tenant>/oauth2/v2.0/token`.
fn entra_token(
    http: &Http,
    authority_host: &str,
    tenant_id: &str,
    fields: &[(&str, &str)],
) -> Result<Lived, AuthError> {
    let url = token_url(authority_host, tenant_id);
    let client = fields
        .iter()
        .find(|(name, _)| *name == "client_id")
        .map(|(_, value)| *value)
        .unwrap_or_default();
    let mut form = vec![("grant_type", "client_credentials")];
    form.extend_from_slice(fields);
    Ok(http.oauth_token_with_lifetime(
        &format!("token for client {client} at {url}"),
        &url,
        &form,
    )?)
}

fn token_url(authority_host: &str, tenant_id: &str) -> String {
    format!(
        "{}/{tenant_id}/oauth2/v2.0/token",
        authority_host.trim_end_matches('/')
    )
}

/// The client assertion of a certificate credential, as Microsoft's libraries make it: an
/// RS256 JWT for the token endpoint, the certificate's SHA-1 thumbprint in `x5t` (and the
/// chain in `x5c` when asked), valid ten minutes.
#[cfg(feature = "azure-certificates")]
pub(crate) fn certificate_assertion(
    pem: &str,
    send_chain: bool,
    client_id: &str,
    token_url: &str,
) -> Result<String, AuthError> {
    use base64::Engine as _;
    use rsa::pkcs1::DecodeRsaPrivateKey;
    use rsa::pkcs1v15::SigningKey;
    use rsa::pkcs8::DecodePrivateKey;
    use rsa::signature::{SignatureEncoding, Signer};
    use rustls_pki_types::pem::SectionKind;
    use sha1::Digest as _;
    let mut certificates = Vec::new();
    let mut key = None;
    let mut reader = pem.as_bytes();
    while let Some((kind, der)) = rustls_pki_types::pem::from_buf(&mut reader)
        .map_err(|e| AuthError::Invalid(format!("the client certificate is not PEM: {e}")))?
    {
        match kind {
            SectionKind::Certificate => certificates.push(der),
            SectionKind::PrivateKey => {
                key = Some(rsa::RsaPrivateKey::from_pkcs8_der(&der).map_err(|_| not_rsa())?);
            }
            SectionKind::RsaPrivateKey => {
                key = Some(rsa::RsaPrivateKey::from_pkcs1_der(&der).map_err(|_| not_rsa())?);
            }
            _ => {}
        }
    }
    let (Some(leaf), Some(key)) = (certificates.first(), key) else {
        return Err(AuthError::Invalid(
            "the client certificate PEM needs a certificate and its RSA private key".into(),
        ));
    };
    let b64url = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let mut header = serde_json::json!({"alg": "RS256", "typ": "JWT",
        "x5t": b64url.encode(sha1::Sha1::digest(leaf))});
    if send_chain {
        header["x5c"] = certificates
            .iter()
            .map(|der| base64::engine::general_purpose::STANDARD.encode(der))
            .collect();
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|e| AuthError::Invalid(e.to_string()))?
        .as_secs();
    let claims = serde_json::json!({"aud": token_url, "exp": now + 600, "iss": client_id,
        "jti": hex::encode(fastrand::u128(..).to_be_bytes()), "nbf": now, "sub": client_id});
    let signing_input = format!(
        "{}.{}",
        b64url.encode(header.to_string()),
        b64url.encode(claims.to_string())
    );
    let signature = SigningKey::<sha2::Sha256>::new(key).sign(signing_input.as_bytes());
    Ok(format!(
        "{signing_input}.{}",
        b64url.encode(signature.to_bytes())
    ))
}

#[cfg(feature = "azure-certificates")]
fn not_rsa() -> AuthError {
    AuthError::Invalid("the client certificate's key is not an RSA key".into())
}

#[cfg(not(feature = "azure-certificates"))]
pub(crate) fn certificate_assertion(
    _pem: &str,
    _send_chain: bool,
    _client_id: &str,
    _token_url: &str,
) -> Result<String, AuthError> {
    Err(AuthError::Invalid(
        "Azure client certificates are not supported by this build (feature `azure-certificates`)"
            .into(),
    ))
}

/// The managed identity's token from the instance metadata service, for the resource of
/// `scope` (`https://vault.azure.net`).
fn managed_identity_token(
    http: &Http,
    endpoint: &str,
    client_id: Option<&str>,
    scope: &str,
) -> Result<Lived, AuthError> {
    let resource = scope.strip_suffix("/.default").unwrap_or(scope);
    let mut query = form_urlencoded::Serializer::new(String::new());
    query
        .append_pair("api-version", "2018-02-01")
        .append_pair("resource", resource);
    if let Some(client_id) = client_id {
        query.append_pair("client_id", client_id);
    }
    let url = format!(
        "{}/metadata/identity/oauth2/token?{}",
        endpoint.trim_end_matches('/'),
        query.finish()
    );
    let what = format!("managed identity token at {url}");
    let answer = http.send_within(&what, super::METADATA_TIMEOUT, |client| {
        client.get(&url).header("metadata", "true")
    })?;
    let json = answer.success_json(&what, &["/error_description", "/error"])?;
    let token = json
        .get("access_token")
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| ServiceError::Missing {
            what,
            field: "access_token".into(),
        })?;
    // `expires_in` where the service gives it, else `expires_on` (Unix seconds).
    let lifetime = seconds(json.get("expires_in")).or_else(|| {
        let on = seconds(json.get("expires_on"))?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .ok()?;
        on.checked_sub(now)
    });
    Ok((token, lifetime))
}

impl AzureIdentity {
    /// The token cache key of the identity's token for `scope`; none for a client secret or
    /// certificate (kept by nobody, as Flux keeps the decryption Secret's credentials).
    pub(crate) fn cache_key(&self, scope: &str) -> Result<Option<String>, AuthError> {
        Ok(match self {
            AzureIdentity::ClientSecret { .. } | AzureIdentity::ClientCertificate { .. } => None,
            AzureIdentity::WorkloadIdentity { .. } | AzureIdentity::ManagedIdentity { .. } => {
                Some(super::cache::key(&[
                    ("provider", "azure"),
                    ("scopes", scope),
                ]))
            }
            AzureIdentity::ServiceAccount { account, .. } => {
                let annotations = account.annotations()?;
                let identity = account_identity(&annotations)
                    .map(|(tenant, client)| format!("{tenant}/{client}"))
                    .unwrap_or_default();
                let (name, namespace) = account.name_and_namespace();
                Some(super::cache::key(&[
                    ("provider", "azure"),
                    ("audiences", TOKEN_EXCHANGE_AUDIENCE),
                    ("providerIdentity", &identity),
                    ("serviceAccountName", &name),
                    ("serviceAccountNamespace", &namespace),
                    ("scopes", scope),
                ]))
            }
        })
    }
}

/// The scope of the tokens AKS clusters with Microsoft Entra ID take (its AAD server app).
pub const AKS_SCOPE: &str = "6dae42f8-4368-4678-94ff-3960e28e3630/.default";
/// Azure Resource Manager, where AKS clusters are described (its public host whatever the
/// cloud, as Flux's client is built).
pub const RESOURCE_MANAGER: &str = "https://management.azure.com";
const AKS_API_VERSION: &str = "2022-01-01";
const AKS_CLUSTER_PATTERN: &str = r"(?i)^/subscriptions/([^/]{36})/resourceGroups/([^/]{1,200})/providers/Microsoft\.ContainerService/managedClusters/([^/]{1,200})$";

/// Resource Manager's token scope in the cloud `AZURE_AUTHORITY_HOST` names.
pub fn resource_manager_scope(env: &BTreeMap<String, String>) -> &'static str {
    let authority = env
        .get("AZURE_AUTHORITY_HOST")
        .map(String::as_str)
        .unwrap_or_default();
    if authority.contains("chinacloudapi.cn") {
        "https://management.core.chinacloudapi.cn/.default"
    } else if authority.contains("microsoftonline.us") {
        "https://management.core.usgovcloudapi.net/.default"
    } else {
        "https://management.core.windows.net//.default"
    }
}

/// An AKS cluster's address and CA bundle (PEM): the cluster user credentials' kubeconfig
/// whose server is `address` (canonically), else the first.
pub fn describe_aks_cluster(
    http: &Http,
    resource_manager: &str,
    cluster: &str,
    address: Option<&str>,
    token: &str,
) -> Result<(String, String), AuthError> {
    use base64::Engine as _;
    let pattern = regex::Regex::new(AKS_CLUSTER_PATTERN).expect("valid pattern");
    if !pattern.is_match(cluster) {
        return Err(AuthError::Invalid(format!(
            "invalid AKS cluster ID: '{cluster}'. must match {AKS_CLUSTER_PATTERN}"
        )));
    }
    let base = format!("{}{cluster}", resource_manager.trim_end_matches('/'));
    let failed = |e: ServiceError| AuthError::from(e).during("failed to describe AKS cluster");
    let url = format!("{base}?api-version={AKS_API_VERSION}");
    let answer = http
        .send(&format!("managedClusters at {url}"), |client| {
            client.get(&url).bearer_auth(token)
        })
        .map_err(failed)?;
    let described = answer
        .success_json("managedClusters", &["/error/message"])
        .map_err(failed)?;
    if described
        .pointer("/properties/aadProfile")
        .is_none_or(Value::is_null)
    {
        return Err(AuthError::Invalid(format!(
            "AKS cluster {cluster} does not have Microsoft Entra ID integration enabled. See docs for enabling: https://learn.microsoft.com/en-us/azure/aks/enable-authentication-microsoft-entra-id"
        )));
    }
    let url = format!("{base}/listClusterUserCredential?api-version={AKS_API_VERSION}");
    let answer = http
        .send(&format!("listClusterUserCredential at {url}"), |client| {
            client.post(&url).bearer_auth(token)
        })
        .map_err(failed)?;
    let credentials = answer
        .success_json("listClusterUserCredential", &["/error/message"])
        .map_err(failed)?;
    let wanted = address
        .map(|address| {
            super::cluster::parse_cluster_address(address).map_err(|e| {
                e.during(format!(
                    "failed to parse specified cluster address '{address}'"
                ))
            })
        })
        .transpose()?;
    let mut hosts = Vec::new();
    for (index, kubeconfig) in credentials
        .get("kubeconfigs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let text = kubeconfig
            .get("value")
            .and_then(Value::as_str)
            .and_then(|value| base64::engine::general_purpose::STANDARD.decode(value).ok())
            .and_then(|bytes| String::from_utf8(bytes).ok())
            .ok_or_else(|| {
                AuthError::Invalid(format!(
                    "failed to parse kubeconfig[{index}]: not base64 text"
                ))
            })?;
        let parsed = kube::config::Kubeconfig::from_yaml(&text)
            .map_err(|e| AuthError::Invalid(format!("failed to parse kubeconfig[{index}]: {e}")))?;
        let Some(cluster_entry) = parsed.clusters.first().and_then(|c| c.cluster.clone()) else {
            continue;
        };
        let host = cluster_entry.server.unwrap_or_default();
        let ca = cluster_entry
            .certificate_authority_data
            .and_then(|data| base64::engine::general_purpose::STANDARD.decode(data).ok())
            .map(|pem| String::from_utf8_lossy(&pem).into_owned())
            .unwrap_or_default();
        let canonical = super::cluster::parse_cluster_address(&host).map_err(|e| {
            e.during(format!(
                "failed to parse address '{host}' from kubeconfig[{index}]"
            ))
        })?;
        if wanted.as_ref().is_none_or(|wanted| *wanted == canonical) {
            return Ok((host, ca));
        }
        hosts.push(format!("'{host}'"));
    }
    Err(AuthError::Invalid(match address {
        None => format!("no kubeconfig found for AKS cluster {cluster}"),
        Some(address) => format!(
            "no kubeconfig found for AKS cluster {cluster} matching the specified address '{address}'. cluster addresses: [{}]",
            hosts.join(", ")
        ),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn kind(identity: Result<AzureIdentity, AuthError>) -> String {
        match identity {
            Err(e) => format!("error {e}"),
            Ok(AzureIdentity::ClientSecret { client_id, .. }) => format!("secret {client_id}"),
            Ok(AzureIdentity::WorkloadIdentity {
                client_id,
                token_file,
                authority_host,
                ..
            }) => {
                format!(
                    "workload {client_id} {} {authority_host}",
                    token_file.display()
                )
            }
            Ok(AzureIdentity::ManagedIdentity {
                client_id,
                endpoint,
            }) => {
                format!("managed {client_id:?} {endpoint}")
            }
            Ok(AzureIdentity::ServiceAccount { .. }) => "account".into(),
            Ok(AzureIdentity::ClientCertificate {
                client_id,
                send_chain,
                ..
            }) => {
                format!("certificate {client_id} {send_chain}")
            }
        }
    }

    /// fluxcd/pkg's order: environment, workload identity (four variables), managed identity.
    #[test]
    fn the_environment_selects_one_credential_as_flux_does() {
        let workload = [
            ("AZURE_CLIENT_ID", "c"),
            ("AZURE_TENANT_ID", "t"),
            ("AZURE_FEDERATED_TOKEN_FILE", "/var/run/azure/token"),
            ("AZURE_AUTHORITY_HOST", "https://login.example/"),
        ];
        let cases: Vec<(Vec<(&str, &str)>, &str)> = vec![
            (vec![], "managed None http://169.254.169.254"),
            (
                vec![
                    ("AZURE_CLIENT_ID", "u"),
                    ("AZURE_POD_IDENTITY_AUTHORITY_HOST", "http://127.0.0.1:9"),
                ],
                "managed Some(\"u\") http://127.0.0.1:9",
            ),
            (
                workload.to_vec(),
                "workload c /var/run/azure/token https://login.example/",
            ),
            // Without AZURE_AUTHORITY_HOST Flux does not build a workload identity.
            (
                workload[..3].to_vec(),
                "managed Some(\"c\") http://169.254.169.254",
            ),
            (
                [&workload[..], &[("AZURE_CLIENT_SECRET", "s")]].concat(),
                "secret c",
            ),
            (
                vec![
                    ("AZURE_CLIENT_ID", "c"),
                    ("AZURE_TENANT_ID", "t"),
                    ("AZURE_CLIENT_CERTIFICATE_PATH", "/nonexistent/c.pem"),
                ],
                "error EnvironmentCredential: reading /nonexistent/c.pem: No such file or directory (os error 2)",
            ),
            (
                vec![
                    ("AZURE_CLIENT_ID", "c"),
                    ("AZURE_TENANT_ID", "t"),
                    ("AZURE_CLIENT_CERTIFICATE_PATH", "/c.pem"),
                    ("AZURE_CLIENT_CERTIFICATE_PASSWORD", "p"),
                ],
                "error EnvironmentCredential: password-protected client certificates are not supported here",
            ),
        ];
        for (vars, want) in cases {
            assert_eq!(kind(controller_identity(&env(&vars))), want, "{vars:?}");
        }
    }

    #[test]
    fn annotations_are_checked_tenant_first() {
        assert_eq!(
            account_identity(&BTreeMap::new()),
            Err(AuthError::Invalid("azure tenant ID is not set in the service account annotation azure.workload.identity/tenant-id".into()))
        );
        assert_eq!(
            account_identity(&env(&[(TENANT_ID_ANNOTATION, "t")])),
            Err(AuthError::Invalid("azure client ID is not set in the service account annotation azure.workload.identity/client-id".into()))
        );
        assert_eq!(
            account_identity(&env(&[
                (TENANT_ID_ANNOTATION, "t"),
                (CLIENT_ID_ANNOTATION, "c")
            ])),
            Ok(("t".into(), "c".into()))
        );
    }
}
