//! Google Cloud: access tokens without a key file (fluxcd/pkg `auth/gcp`).
//!
//! The controller's own identity, after a credentials file: the metadata server, which on GKE
//! with Workload Identity answers for the pod's Kubernetes ServiceAccount; a credentials file
//! of type `external_account` (workload identity federation) exchanges the subject token it
//! names at Google's STS, then optionally impersonates a Google service account. A
//! ServiceAccount named on an object is exchanged the same way: a Kubernetes token for the
//! workload identity pool's audience (its `gcp.auth.fluxcd.io/workload-identity-provider`
//! annotation, else GKE's identity namespace, from the metadata server), then the Google
//! service account of `iam.gke.io/gcp-service-account`, if annotated, impersonated.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::{AuthError, ServiceAccountTokens, ServiceError};
use crate::sops::keysource::http::{Http, seconds, until};

/// A bearer token and how long it lives.
pub type Lived = (String, Option<std::time::Duration>);

/// The scopes Flux asks every Google token for.
pub const SCOPES: [&str; 2] = [
    "https://www.googleapis.com/auth/cloud-platform",
    "https://www.googleapis.com/auth/userinfo.email",
];
const CLOUD_PLATFORM: &str = "https://www.googleapis.com/auth/cloud-platform";
pub const WORKLOAD_IDENTITY_PROVIDER_ANNOTATION: &str =
    "gcp.auth.fluxcd.io/workload-identity-provider";
pub const SERVICE_ACCOUNT_ANNOTATION: &str = "iam.gke.io/gcp-service-account";
const WORKLOAD_IDENTITY_PROVIDER_PATTERN: &str =
    r"^projects/\d{1,30}/locations/global/workloadIdentityPools/[^/]{1,100}/providers/[^/]{1,100}$";
const SERVICE_ACCOUNT_PATTERN: &str =
    r"^[a-zA-Z0-9-]{1,100}@[a-zA-Z0-9-]{1,100}\.iam\.gserviceaccount\.com$";
const JWT_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:jwt";
const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";

/// Where Google's services are reached: theirs, unless a test or a private endpoint says
/// otherwise.
#[derive(Debug, Clone)]
pub struct GoogleEndpoints {
    /// The metadata server's host (`GCE_METADATA_HOST`), else the link-local address.
    pub metadata_host: String,
    pub sts_token_url: String,
    /// IAM Credentials' origin, before `/v1/projects/-/serviceAccounts/…`.
    pub iam_credentials: String,
    /// The Kubernetes Engine API's origin, before `/v1/projects/…/clusters/…`.
    pub container: String,
}

impl Default for GoogleEndpoints {
    fn default() -> GoogleEndpoints {
        GoogleEndpoints {
            metadata_host: "169.254.169.254".into(),
            sts_token_url: "https://sts.googleapis.com/v1/token".into(),
            iam_credentials: "https://iamcredentials.googleapis.com".into(),
            container: "https://container.googleapis.com".into(),
        }
    }
}

impl GoogleEndpoints {
    /// Google's endpoints, the metadata host as `GCE_METADATA_HOST` says.
    pub fn from_environment(env: &BTreeMap<String, String>) -> GoogleEndpoints {
        let mut endpoints = GoogleEndpoints::default();
        if let Some(host) = env.get("GCE_METADATA_HOST").filter(|h| !h.is_empty()) {
            endpoints.metadata_host = host.clone();
        }
        endpoints
    }

    fn metadata_url(&self, path: &str) -> String {
        format!("http://{}/computeMetadata/v1/{path}", self.metadata_host)
    }
}

/// A workload identity federation credentials file (`"type": "external_account"`): where the
/// subject token is read, what it is exchanged for, and whom it impersonates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalAccount {
    pub audience: String,
    pub subject_token_type: String,
    pub token_url: String,
    pub source: SubjectTokenSource,
    pub impersonation_url: Option<String>,
}

/// Where an external account's subject token is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubjectTokenSource {
    File {
        path: PathBuf,
        json_field: Option<String>,
    },
    Url {
        url: String,
        headers: BTreeMap<String, String>,
        json_field: Option<String>,
    },
}

impl ExternalAccount {
    /// Reads an `external_account` credentials document. Executable and AWS sources are
    /// refused: the controller runs no programs, and AWS-to-Google federation is not here.
    pub fn from_json(value: &Value) -> Result<ExternalAccount, AuthError> {
        let text = |name: &str| {
            value
                .get(name)
                .and_then(Value::as_str)
                .filter(|v| !v.is_empty())
                .map(str::to_string)
        };
        let required = |name: &str| {
            text(name).ok_or_else(|| {
                AuthError::Invalid(format!("the external_account credentials have no `{name}`"))
            })
        };
        let source = value.get("credential_source").ok_or(AuthError::Invalid(
            "the external_account credentials have no `credential_source`".into(),
        ))?;
        let json_field = match source.pointer("/format/type").and_then(Value::as_str) {
            Some("json") => Some(
                source
                    .pointer("/format/subject_token_field_name")
                    .and_then(Value::as_str)
                    .ok_or(AuthError::Invalid(
                        "credential_source.format has no subject_token_field_name".into(),
                    ))?
                    .to_string(),
            ),
            Some("text") | None => None,
            Some(other) => {
                return Err(AuthError::Invalid(format!(
                    "credential_source.format type `{other}` is not supported"
                )));
            }
        };
        let source = if let Some(path) = source.get("file").and_then(Value::as_str) {
            SubjectTokenSource::File {
                path: path.into(),
                json_field,
            }
        } else if let Some(url) = source.get("url").and_then(Value::as_str) {
            let headers = source
                .get("headers")
                .and_then(Value::as_object)
                .map(|h| {
                    h.iter()
                        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                        .collect()
                })
                .unwrap_or_default();
            SubjectTokenSource::Url {
                url: url.to_string(),
                headers,
                json_field,
            }
        } else if source.get("executable").is_some() {
            return Err(AuthError::Invalid(
                "credential_source.executable is not supported: the controller runs no programs"
                    .into(),
            ));
        } else {
            return Err(AuthError::Invalid(
                "credential_source has neither `file` nor `url` (AWS sources are not supported)"
                    .into(),
            ));
        };
        Ok(ExternalAccount {
            audience: required("audience")?,
            subject_token_type: required("subject_token_type")?,
            token_url: text("token_url")
                .unwrap_or_else(|| GoogleEndpoints::default().sts_token_url),
            source,
            impersonation_url: text("service_account_impersonation_url"),
        })
    }

    /// An access token: the subject token exchanged at STS, then the impersonated account's.
    pub(crate) fn token(&self, http: &Http) -> Result<Lived, AuthError> {
        let subject = self.subject_token(http)?;
        let scopes: Vec<&str> = match &self.impersonation_url {
            Some(_) => vec![CLOUD_PLATFORM],
            None => SCOPES.to_vec(),
        };
        let federated = exchange(
            http,
            &self.token_url,
            &self.audience,
            &self.subject_token_type,
            &subject,
            &scopes,
        )?;
        match &self.impersonation_url {
            Some(url) => impersonate(http, url, &federated.0),
            None => Ok(federated),
        }
    }

    fn subject_token(&self, http: &Http) -> Result<String, AuthError> {
        let (raw, field, what) = match &self.source {
            SubjectTokenSource::File { path, json_field } => (
                std::fs::read_to_string(path).map_err(|e| {
                    AuthError::Invalid(format!("reading the subject token {}: {e}", path.display()))
                })?,
                json_field,
                path.display().to_string(),
            ),
            SubjectTokenSource::Url {
                url,
                headers,
                json_field,
            } => {
                let what = format!("subject token at {url}");
                let answer = http.send(&what, |client| {
                    headers
                        .iter()
                        .fold(client.get(url), |request, (name, value)| {
                            request.header(name, value)
                        })
                })?;
                if !answer.is_success() {
                    return Err(ServiceError::Status {
                        what,
                        status: answer.status,
                        message: None,
                        code: None,
                    }
                    .into());
                }
                (
                    String::from_utf8_lossy(&answer.body).into_owned(),
                    json_field,
                    what,
                )
            }
        };
        match field {
            None => Ok(raw.trim().to_string()),
            Some(field) => serde_json::from_str::<Value>(&raw)
                .ok()
                .and_then(|json| json.get(field).and_then(Value::as_str).map(str::to_string))
                .ok_or_else(|| {
                    AuthError::Invalid(format!("{what}: no `{field}` in the subject token JSON"))
                }),
        }
    }
}

/// What a ServiceAccount's annotations say: the workload identity provider its tokens are
/// for (GKE's identity namespace when absent) and the Google service account it
/// impersonates (none: federated access).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AccountIdentity {
    pub workload_identity_provider: Option<String>,
    pub service_account: Option<String>,
}

/// A ServiceAccount's Google identity, in Flux's words when an annotation is malformed.
pub fn account_identity(
    annotations: &BTreeMap<String, String>,
) -> Result<AccountIdentity, AuthError> {
    Ok(AccountIdentity {
        workload_identity_provider: workload_identity_provider(annotations)?,
        service_account: google_service_account(annotations)?,
    })
}

fn optional_annotation(
    annotations: &BTreeMap<String, String>,
    key: &str,
    pattern: &str,
) -> Result<Option<String>, AuthError> {
    annotations
        .contains_key(key)
        .then(|| super::annotation_matching(annotations, key, pattern))
        .transpose()
}

fn workload_identity_provider(
    annotations: &BTreeMap<String, String>,
) -> Result<Option<String>, AuthError> {
    optional_annotation(
        annotations,
        WORKLOAD_IDENTITY_PROVIDER_ANNOTATION,
        WORKLOAD_IDENTITY_PROVIDER_PATTERN,
    )
}

fn google_service_account(
    annotations: &BTreeMap<String, String>,
) -> Result<Option<String>, AuthError> {
    optional_annotation(
        annotations,
        SERVICE_ACCOUNT_ANNOTATION,
        SERVICE_ACCOUNT_PATTERN,
    )
}

/// A GKE cluster, as its metadata server names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GkeCluster {
    pub project: String,
    pub location: String,
    pub name: String,
}

/// The audiences of the Kubernetes token (`TokenRequest`) and of the STS exchange.
pub fn audiences(identity: &AccountIdentity, gke: Option<&GkeCluster>) -> (String, String) {
    match (&identity.workload_identity_provider, gke) {
        (Some(provider), _) => {
            let audience = format!("//iam.googleapis.com/{provider}");
            (audience.clone(), audience)
        }
        (None, Some(cluster)) => (
            format!("{}.svc.id.goog", cluster.project),
            format!(
                "identitynamespace:{project}.svc.id.goog:https://container.googleapis.com/v1/projects/{project}/locations/{location}/clusters/{name}",
                project = cluster.project,
                location = cluster.location,
                name = cluster.name
            ),
        ),
        (None, None) => (String::new(), String::new()),
    }
}

/// The metadata server's token for the instance's (or, on GKE, the pod's) account.
pub(crate) fn metadata_token(http: &Http, endpoints: &GoogleEndpoints) -> Result<Lived, AuthError> {
    let scopes = form_urlencoded::byte_serialize(SCOPES.join(",").as_bytes()).collect::<String>();
    let url = endpoints.metadata_url(&format!(
        "instance/service-accounts/default/token?scopes={scopes}"
    ));
    let what = format!("metadata server token at {url}");
    let answer = http.send_within(&what, super::METADATA_TIMEOUT, |client| {
        client.get(&url).header("metadata-flavor", "Google")
    })?;
    let json = answer.success_json(&what, &["/error_description", "/error"])?;
    match (
        json.get("access_token").and_then(Value::as_str),
        json.get("expires_in").and_then(Value::as_i64),
    ) {
        (Some(token), Some(expires_in)) if !token.is_empty() && expires_in != 0 => {
            Ok((token.to_string(), seconds(json.get("expires_in"))))
        }
        _ => Err(AuthError::Invalid(
            "oauth2/google: incomplete token received from metadata".into(),
        )),
    }
}

/// The GKE cluster the controller runs in, from the metadata server; asked once per process
/// (per metadata host).
fn gke_cluster(http: &Http, endpoints: &GoogleEndpoints) -> Result<GkeCluster, AuthError> {
    static KNOWN: Mutex<BTreeMap<String, GkeCluster>> = Mutex::new(BTreeMap::new());
    let host = &endpoints.metadata_host;
    if let Some(cluster) = KNOWN.lock().ok().and_then(|known| known.get(host).cloned()) {
        return Ok(cluster);
    }
    let read = |path: &str, what: &str| -> Result<String, AuthError> {
        let url = endpoints.metadata_url(path);
        let fail = |e: AuthError| {
            e.during(format!(
                "failed to get GKE cluster {what} from the metadata service"
            ))
        };
        let answer = http
            .send_within(&url, super::METADATA_TIMEOUT, |client| {
                client.get(&url).header("metadata-flavor", "Google")
            })
            .map_err(|e| fail(e.into()))?;
        if !answer.is_success() {
            return Err(fail(AuthError::Invalid(format!("HTTP {}", answer.status))));
        }
        let value = String::from_utf8_lossy(&answer.body).trim().to_string();
        if value.is_empty() {
            return Err(fail(AuthError::Invalid("empty value".into())));
        }
        Ok(value)
    };
    let cluster = GkeCluster {
        project: read("project/project-id", "project ID")?,
        location: read("instance/attributes/cluster-location", "location")?,
        name: read("instance/attributes/cluster-name", "name")?,
    };
    if let Ok(mut known) = KNOWN.lock() {
        known.insert(host.clone(), cluster.clone());
    }
    Ok(cluster)
}

/// A ServiceAccount's Google access token, as fluxcd/pkg's GCP provider makes it.
pub fn service_account_token(
    http: &Http,
    account: &dyn ServiceAccountTokens,
    endpoints: &GoogleEndpoints,
) -> Result<Lived, AuthError> {
    let annotations = account.annotations()?;
    let audience_error = |e: AuthError| e.during("failed to get provider audience");
    let workload_identity_provider =
        workload_identity_provider(&annotations).map_err(audience_error)?;
    let gke = match workload_identity_provider {
        Some(_) => None,
        None => Some(gke_cluster(http, endpoints).map_err(audience_error)?),
    };
    let identity = AccountIdentity {
        workload_identity_provider,
        service_account: google_service_account(&annotations).map_err(|e| {
            e.during(format!(
                "failed to get provider identity from service account '{}' annotations",
                account.key()
            ))
        })?,
    };
    let (token_audience, sts_audience) = audiences(&identity, gke.as_ref());
    let token = account.token(&[token_audience])?;
    let scopes: Vec<&str> = match &identity.service_account {
        Some(_) => vec![CLOUD_PLATFORM],
        None => SCOPES.to_vec(),
    };
    let exchanged = exchange(
        http,
        &endpoints.sts_token_url,
        &sts_audience,
        JWT_TOKEN_TYPE,
        &token,
        &scopes,
    )
    .and_then(|federated| match &identity.service_account {
        Some(email) => impersonate(
            http,
            &format!(
                "{}/v1/projects/-/serviceAccounts/{email}:generateAccessToken",
                endpoints.iam_credentials.trim_end_matches('/')
            ),
            &federated.0,
        ),
        None => Ok(federated),
    });
    exchanged.map_err(|e| super::for_service_account(account, e))
}

/// Google STS's token exchange (RFC 8693) of `subject` for a federated access token.
fn exchange(
    http: &Http,
    url: &str,
    audience: &str,
    subject_token_type: &str,
    subject: &str,
    scopes: &[&str],
) -> Result<Lived, AuthError> {
    let scope = scopes.join(" ");
    let form = [
        ("audience", audience),
        ("grant_type", TOKEN_EXCHANGE),
        ("requested_token_type", ACCESS_TOKEN_TYPE),
        ("scope", scope.as_str()),
        ("subject_token", subject),
        ("subject_token_type", subject_token_type),
    ];
    let what = format!("token exchange at {url}");
    let answer = http.send(&what, |client| client.post(url).form(&form))?;
    let json = google_json(what.as_str(), &answer)?;
    if json.get("expires_in").and_then(Value::as_i64).unwrap_or(0) <= 0 {
        return Err(AuthError::Invalid(
            "oauth2/google/externalaccount: got invalid expiry from security token service".into(),
        ));
    }
    let token = json
        .get("access_token")
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| ServiceError::Missing {
            what: what.clone(),
            field: "access_token".into(),
        })?;
    Ok((token, seconds(json.get("expires_in"))))
}

/// A Google token service's JSON answer, or its failure in the words of Google's library.
fn google_json(
    what: &str,
    answer: &crate::sops::keysource::http::Answer,
) -> Result<Value, AuthError> {
    if !answer.is_success() {
        let body: String = String::from_utf8_lossy(&answer.body)
            .chars()
            .take(300)
            .collect();
        return Err(AuthError::Invalid(format!(
            "oauth2/google: status code {}: {body}",
            answer.status
        )));
    }
    Ok(answer.json(what)?)
}

/// IAM Credentials `generateAccessToken` at `url`, with the federated token: the
/// impersonated account's token for an hour.
fn impersonate(http: &Http, url: &str, federated: &str) -> Result<Lived, AuthError> {
    let what = format!("generateAccessToken at {url}");
    let body = json!({"lifetime": "3600s", "scope": SCOPES});
    let answer = http.send(&what, |client| {
        client.post(url).bearer_auth(federated).json(&body)
    })?;
    let json = google_json(what.as_str(), &answer)?;
    let token = json
        .get("accessToken")
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| AuthError::Invalid(format!("{what}: the answer has no accessToken")))?;
    let lifetime = json
        .get("expireTime")
        .and_then(Value::as_str)
        .and_then(until);
    Ok((token, lifetime))
}

/// The token cache key of a secret-less identity's token.
pub(crate) fn cache_key(identity: &SecretlessIdentity) -> Result<String, AuthError> {
    Ok(match identity {
        SecretlessIdentity::MetadataServer(_) => super::cache::key(&[("provider", "gcp")]),
        SecretlessIdentity::ServiceAccount(account, _) => {
            let annotations = account.annotations()?;
            let (name, namespace) = account.name_and_namespace();
            let empty = String::new();
            super::cache::key(&[
                ("provider", "gcp"),
                (
                    "audiences",
                    annotations
                        .get(WORKLOAD_IDENTITY_PROVIDER_ANNOTATION)
                        .unwrap_or(&empty),
                ),
                (
                    "providerIdentity",
                    annotations
                        .get(SERVICE_ACCOUNT_ANNOTATION)
                        .unwrap_or(&empty),
                ),
                ("serviceAccountName", &name),
                ("serviceAccountNamespace", &namespace),
            ])
        }
    })
}

const GKE_CLUSTER_PATTERN: &str =
    r"^projects/[^/]{1,200}/locations/[^/]{1,200}/clusters/[^/]{1,200}$";

/// The controller's own token for a GKE cluster: a workload identity federation file
/// (`GOOGLE_APPLICATION_CREDENTIALS`), else the metadata server.
pub fn controller_token(
    http: &Http,
    env: &BTreeMap<String, String>,
    endpoints: &GoogleEndpoints,
) -> Result<Lived, AuthError> {
    let Some(path) = env.get("GOOGLE_APPLICATION_CREDENTIALS") else {
        return metadata_token(http, endpoints);
    };
    let read = |reason: String| AuthError::Invalid(format!("{path}: {reason}"));
    let content = std::fs::read(path).map_err(|e| read(e.to_string()))?;
    let value: Value = serde_json::from_slice(&content).map_err(|e| read(e.to_string()))?;
    match value.get("type").and_then(Value::as_str) {
        Some("external_account") => ExternalAccount::from_json(&value)
            .map_err(|e| e.during(path.as_str()))?
            .token(http),
        other => Err(read(format!(
            "credentials of type `{}` are not supported for remote clusters here (external_account and the metadata server are)",
            other.unwrap_or_default()
        ))),
    }
}

/// GKE `GetCluster`: the API server's address and CA bundle (PEM), asked with `token`.
pub fn describe_gke_cluster(
    http: &Http,
    endpoints: &GoogleEndpoints,
    cluster: &str,
    token: &str,
) -> Result<(String, String), AuthError> {
    use base64::Engine as _;
    let pattern = regex::Regex::new(GKE_CLUSTER_PATTERN).expect("valid pattern");
    if !pattern.is_match(cluster) {
        return Err(AuthError::Invalid(format!(
            "invalid GKE cluster ID: '{cluster}'. must match {GKE_CLUSTER_PATTERN}"
        )));
    }
    let url = format!("{}/v1/{cluster}", endpoints.container.trim_end_matches('/'));
    let failed = |e: AuthError| e.during(format!("failed to describe GKE cluster '{cluster}'"));
    let answer = http
        .send(&format!("GetCluster at {url}"), |client| {
            client.get(&url).bearer_auth(token)
        })
        .map_err(|e| failed(e.into()))?;
    let json = answer
        .success_json("GetCluster", &["/error/message"])
        .map_err(|e| failed(e.into()))?;
    let endpoint = json
        .get("endpoint")
        .and_then(Value::as_str)
        .ok_or_else(|| failed(AuthError::Invalid("the answer has no endpoint".into())))?;
    let ca = json
        .pointer("/masterAuth/clusterCaCertificate")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let ca = base64::engine::general_purpose::STANDARD
        .decode(ca)
        .map_err(|e| AuthError::Invalid(format!("failed to decode GKE CA certificate: {e}")))?;
    // GKE names a bare address; the CA makes it https.
    let host = if endpoint.contains("://") {
        endpoint.to_string()
    } else {
        format!("https://{endpoint}")
    };
    Ok((host, String::from_utf8_lossy(&ca).into_owned()))
}

/// The identity a GCP KMS key is opened with when no key file is given.
#[derive(Clone, Debug)]
pub enum SecretlessIdentity {
    /// The metadata server (the instance's account; on GKE, the pod's).
    MetadataServer(GoogleEndpoints),
    /// A Kubernetes ServiceAccount, federated (object-level workload identity).
    ServiceAccount(Arc<dyn ServiceAccountTokens>, GoogleEndpoints),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotations_select_the_audiences_as_flux_does() {
        let annotations = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let provider = "projects/123/locations/global/workloadIdentityPools/pool/providers/k8s";
        let federated = account_identity(&annotations(&[(
            WORKLOAD_IDENTITY_PROVIDER_ANNOTATION,
            provider,
        )]))
        .unwrap();
        assert_eq!(
            audiences(&federated, None),
            (
                format!("//iam.googleapis.com/{provider}"),
                format!("//iam.googleapis.com/{provider}")
            )
        );
        let gke = GkeCluster {
            project: "proj".into(),
            location: "europe-west1".into(),
            name: "fleet".into(),
        };
        assert_eq!(
            audiences(&AccountIdentity::default(), Some(&gke)),
            (
                "proj.svc.id.goog".to_string(),
                "identitynamespace:proj.svc.id.goog:https://container.googleapis.com/v1/projects/proj/locations/europe-west1/clusters/fleet".to_string()
            )
        );
        assert_eq!(
            account_identity(&annotations(&[(
                SERVICE_ACCOUNT_ANNOTATION,
                "sops@proj.iam.gserviceaccount.com"
            )]))
            .unwrap()
            .service_account
            .as_deref(),
            Some("sops@proj.iam.gserviceaccount.com")
        );
        assert_eq!(
            account_identity(&annotations(&[(
                SERVICE_ACCOUNT_ANNOTATION,
                "sops@example.com"
            )]))
            .map_err(|e| e.to_string()),
            Err(format!(
                "invalid iam.gke.io/gcp-service-account annotation: 'sops@example.com'. must match {SERVICE_ACCOUNT_PATTERN}"
            ))
        );
        assert_eq!(
            account_identity(&annotations(&[(
                WORKLOAD_IDENTITY_PROVIDER_ANNOTATION,
                "pool"
            )]))
            .map_err(|e| e.to_string()),
            Err(format!(
                "invalid gcp.auth.fluxcd.io/workload-identity-provider annotation: 'pool'. must match {WORKLOAD_IDENTITY_PROVIDER_PATTERN}"
            ))
        );
    }

    #[test]
    fn external_account_files_are_read_and_refused_by_what_they_need() {
        let file = json!({"type": "external_account",
            "audience": "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/q",
            "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
            "token_url": "https://sts.googleapis.com/v1/token",
            "service_account_impersonation_url": "https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/a@b.iam.gserviceaccount.com:generateAccessToken",
            "credential_source": {"file": "/var/run/token", "format": {"type": "json", "subject_token_field_name": "id_token"}}});
        let account = ExternalAccount::from_json(&file).unwrap();
        assert_eq!(
            account.source,
            SubjectTokenSource::File {
                path: "/var/run/token".into(),
                json_field: Some("id_token".into())
            }
        );
        assert!(account.impersonation_url.is_some());
        let mut executable = file.clone();
        executable["credential_source"] = json!({"executable": {"command": "/bin/true"}});
        assert!(
            ExternalAccount::from_json(&executable)
                .unwrap_err()
                .to_string()
                .contains("runs no programs")
        );
        let mut no_audience = file;
        no_audience.as_object_mut().unwrap().remove("audience");
        assert_eq!(
            ExternalAccount::from_json(&no_audience),
            Err(AuthError::Invalid(
                "the external_account credentials have no `audience`".into()
            ))
        );
    }
}
