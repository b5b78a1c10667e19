//! AWS: where credentials come from (fluxcd/pkg `auth/aws` over the AWS SDK's default chain)
//! and the exchanges that make them.
//!
//! The controller's own identity is the first source its environment configures, in the SDK's
//! order: an access key, a web identity (EKS IAM roles for service accounts), a container
//! credentials endpoint (EKS Pod Identity, ECS), then the EC2 instance role (IMDSv2). A
//! ServiceAccount's identity is its `eks.amazonaws.com/role-arn` annotation, assumed with a
//! token Kubernetes issues for `sts.amazonaws.com`, in the region of the key.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use super::{AuthError, ServiceAccountTokens, ServiceError};
use crate::sops::keysource::http::{Answer, Http, until};

/// Credentials and how long they live (as their issuer says).
pub type Lived = (AwsCredentials, Option<std::time::Duration>);

/// The audience of the tokens STS takes for a web identity.
pub const STS_AUDIENCE: &str = "sts.amazonaws.com";
/// The ServiceAccount annotation naming the IAM role it maps to.
pub const ROLE_ARN_ANNOTATION: &str = "eks.amazonaws.com/role-arn";
const ROLE_ARN_PATTERN: &str = r"^arn:aws[\w-]*:iam::[0-9]{1,30}:role/.{1,200}$";
/// Where EC2 instances reach their metadata service, and the container endpoint ECS tasks
/// reach with a relative URI.
const INSTANCE_METADATA: &str = "http://169.254.169.254";
const INSTANCE_METADATA_IPV6: &str = "http://[fd00:ec2::254]";
const ECS_CONTAINER_HOST: &str = "http://169.254.170.2";

/// Static credentials: an access key and, for temporary ones, a session token.
#[derive(Clone, PartialEq, Eq)]
pub struct AwsCredentials {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: Option<String>,
}

impl std::fmt::Debug for AwsCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsCredentials").finish_non_exhaustive()
    }
}

/// Where a decryption's AWS credentials come from.
#[derive(Clone, Debug)]
pub enum AwsCredentialSource {
    /// An access key (the `sops.aws-kms` entry, or `AWS_ACCESS_KEY_ID`…).
    Static(AwsCredentials),
    /// The pod's web identity (EKS IAM roles for service accounts: `AWS_ROLE_ARN` and
    /// `AWS_WEB_IDENTITY_TOKEN_FILE`), exchanged through STS `AssumeRoleWithWebIdentity`.
    WebIdentity {
        role_arn: String,
        token_file: PathBuf,
        session_name: Option<String>,
    },
    /// A container credentials endpoint: EKS Pod Identity's agent
    /// (`AWS_CONTAINER_CREDENTIALS_FULL_URI`) or ECS's (`…_RELATIVE_URI`).
    Container {
        uri: String,
        authorization: Option<ContainerAuthorization>,
    },
    /// The EC2 instance's role, from its metadata service (IMDSv2).
    InstanceMetadata { endpoint: String },
    /// A Kubernetes ServiceAccount's role (object-level workload identity).
    ServiceAccount(Arc<dyn ServiceAccountTokens>),
}

/// What the container credentials endpoint is asked with.
#[derive(Clone, Debug)]
pub enum ContainerAuthorization {
    /// `AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE`, read at every request (EKS rotates it).
    File(PathBuf),
    /// `AWS_CONTAINER_AUTHORIZATION_TOKEN`.
    Token(String),
}

/// The controller's own source, as the SDK's default chain selects it from the environment:
/// the first one configured, whether or not it then works. `None` only when the instance
/// metadata service is disabled and nothing else is set.
pub fn controller_source(env: &BTreeMap<String, String>) -> Option<AwsCredentialSource> {
    let var = |name: &str| env.get(name).filter(|v| !v.is_empty()).cloned();
    if let (Some(access_key_id), Some(secret_access_key)) =
        (var("AWS_ACCESS_KEY_ID"), var("AWS_SECRET_ACCESS_KEY"))
    {
        return Some(AwsCredentialSource::Static(AwsCredentials {
            access_key_id,
            secret_access_key,
            session_token: var("AWS_SESSION_TOKEN"),
        }));
    }
    if let (Some(role_arn), Some(token_file)) =
        (var("AWS_ROLE_ARN"), var("AWS_WEB_IDENTITY_TOKEN_FILE"))
    {
        return Some(AwsCredentialSource::WebIdentity {
            role_arn,
            token_file: token_file.into(),
            session_name: var("AWS_ROLE_SESSION_NAME"),
        });
    }
    let container = var("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")
        .map(|path| format!("{ECS_CONTAINER_HOST}{path}"))
        .or_else(|| var("AWS_CONTAINER_CREDENTIALS_FULL_URI"));
    if let Some(uri) = container {
        let authorization = var("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")
            .map(|file| ContainerAuthorization::File(file.into()))
            .or_else(|| {
                var("AWS_CONTAINER_AUTHORIZATION_TOKEN").map(ContainerAuthorization::Token)
            });
        return Some(AwsCredentialSource::Container { uri, authorization });
    }
    if var("AWS_EC2_METADATA_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return None;
    }
    let endpoint = var("AWS_EC2_METADATA_SERVICE_ENDPOINT").unwrap_or_else(|| {
        match var("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE") {
            Some(mode) if mode.eq_ignore_ascii_case("ipv6") => INSTANCE_METADATA_IPV6.into(),
            _ => INSTANCE_METADATA.into(),
        }
    });
    Some(AwsCredentialSource::InstanceMetadata { endpoint })
}

/// The role a ServiceAccount's annotation names, in Flux's words when it is not one.
pub fn role_arn(annotations: &BTreeMap<String, String>) -> Result<String, AuthError> {
    super::annotation_matching(annotations, ROLE_ARN_ANNOTATION, ROLE_ARN_PATTERN)
}

/// The STS session a ServiceAccount's role is assumed in, as Flux names it.
pub fn session_name(name: &str, namespace: &str, region: &str) -> String {
    format!("{name}.{namespace}.{region}.fluxcd.io")
}

/// The token cache key of a source's credentials in `region`, as Flux composes it; none for
/// static keys, which are not kept.
pub(crate) fn cache_key(
    source: &AwsCredentialSource,
    region: &str,
) -> Result<Option<String>, AuthError> {
    Ok(match source {
        AwsCredentialSource::Static(_) => None,
        AwsCredentialSource::ServiceAccount(account) => {
            let role = role_arn(&account.annotations()?).unwrap_or_default();
            let (name, namespace) = account.name_and_namespace();
            Some(super::cache::key(&[
                ("provider", "aws"),
                ("audiences", STS_AUDIENCE),
                ("providerIdentity", &role),
                ("serviceAccountName", &name),
                ("serviceAccountNamespace", &namespace),
                ("stsRegion", region),
            ]))
        }
        _ => Some(super::cache::key(&[
            ("provider", "aws"),
            ("stsRegion", region),
        ])),
    })
}

/// The credentials a container credentials endpoint hands out.
pub(crate) fn container_credentials(
    http: &Http,
    uri: &str,
    authorization: Option<&ContainerAuthorization>,
) -> Result<Lived, AuthError> {
    let header = match authorization {
        Some(ContainerAuthorization::File(path)) => Some(
            std::fs::read_to_string(path)
                .map(|token| token.trim().to_string())
                .map_err(|e| AuthError::File {
                    what: "container authorization token",
                    path: path.clone(),
                    cause: e.to_string(),
                })?,
        ),
        Some(ContainerAuthorization::Token(token)) => Some(token.clone()),
        None => None,
    };
    let what = format!("container credentials at {uri}");
    let answer = http.send(&what, |client| {
        let request = client.get(uri).header("accept", "application/json");
        match &header {
            Some(token) => request.header("authorization", token),
            None => request,
        }
    })?;
    Ok(json_credentials(&what, &answer, "Token")?)
}

/// The instance role's credentials from the metadata service, IMDSv2's way: a session token
/// first, then the role's name, then its credentials.
pub(crate) fn instance_credentials(http: &Http, endpoint: &str) -> Result<Lived, AuthError> {
    let base = endpoint.trim_end_matches('/');
    let token_url = format!("{base}/latest/api/token");
    let what = format!("instance metadata token at {token_url}");
    let answer = http.send_within(&what, super::METADATA_TIMEOUT, |client| {
        client
            .put(&token_url)
            .header("x-aws-ec2-metadata-token-ttl-seconds", "21600")
    })?;
    let token = answer_text(&what, &answer)?;
    let roles_url = format!("{base}/latest/meta-data/iam/security-credentials/");
    let get = |what: &str, url: &str| {
        http.send_within(what, super::METADATA_TIMEOUT, |client| {
            client.get(url).header("x-aws-ec2-metadata-token", &token)
        })
    };
    let what = format!("instance role at {roles_url}");
    let roles = answer_text(&what, &get(&what, &roles_url)?)?;
    let role = roles
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .ok_or_else(|| AuthError::Invalid(format!("{what}: the instance has no role")))?
        .to_string();
    let url = format!("{roles_url}{role}");
    let what = format!("instance role credentials at {url}");
    Ok(json_credentials(&what, &get(&what, &url)?, "Token")?)
}

/// STS `AssumeRoleWithWebIdentity` at `sts_url`: `token` for the role's temporary
/// credentials (the request itself is not signed).
pub(crate) fn web_identity(
    http: &Http,
    sts_url: &str,
    role_arn: &str,
    session_name: &str,
    token: &str,
) -> Result<Lived, AuthError> {
    let what = format!("STS AssumeRoleWithWebIdentity {role_arn} at {sts_url}");
    let body = sts_form(
        "AssumeRoleWithWebIdentity",
        role_arn,
        session_name,
        &[("WebIdentityToken", token.trim())],
    );
    let answer = http.send(&what, |client| {
        client
            .post(sts_url)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body.clone())
    })?;
    Ok(sts_credentials(&what, &answer)?)
}

/// A ServiceAccount's role credentials, as fluxcd/pkg's AWS provider makes them: the role
/// from the annotation, a token for `sts.amazonaws.com`, STS in `region`.
pub(crate) fn service_account_credentials(
    http: &Http,
    account: &dyn ServiceAccountTokens,
    sts_url: &str,
    region: &str,
) -> Result<Lived, AuthError> {
    let annotations = account.annotations()?;
    let role = role_arn(&annotations).map_err(|e| {
        e.during(format!(
            "failed to get provider identity from service account '{}' annotations",
            account.key()
        ))
    })?;
    let token = account.token(&[STS_AUDIENCE.to_string()])?;
    let (name, namespace) = account.name_and_namespace();
    web_identity(
        http,
        sts_url,
        &role,
        &session_name(&name, &namespace, region),
        &token,
    )
    .map_err(|e| super::for_service_account(account, e))
}

/// An STS query-protocol request body for `action` on `role`.
pub(crate) fn sts_form(
    action: &str,
    role: &str,
    session_name: &str,
    extra: &[(&str, &str)],
) -> String {
    let mut form = form_urlencoded::Serializer::new(String::new());
    form.append_pair("Action", action)
        .append_pair("Version", "2011-06-15")
        .append_pair("RoleArn", role)
        .append_pair("RoleSessionName", session_name);
    for (name, value) in extra {
        form.append_pair(name, value);
    }
    form.finish()
}

/// The temporary credentials of an STS answer (AssumeRole and AssumeRoleWithWebIdentity
/// answer alike), or the service's words, cut short: nothing of the request is repeated.
pub(crate) fn sts_credentials(what: &str, answer: &Answer) -> Result<Lived, ServiceError> {
    let text = String::from_utf8_lossy(&answer.body);
    if !answer.is_success() {
        let message: String = xml_text(&text, "Message")
            .unwrap_or_default()
            .chars()
            .take(300)
            .collect();
        return Err(ServiceError::Status {
            what: what.to_string(),
            status: answer.status,
            message: Some(message),
            code: None,
        });
    }
    let field = |name: &str| {
        xml_text(&text, name).ok_or_else(|| ServiceError::Missing {
            what: what.to_string(),
            field: name.to_string(),
        })
    };
    let credentials = AwsCredentials {
        access_key_id: field("AccessKeyId")?,
        secret_access_key: field("SecretAccessKey")?,
        session_token: Some(field("SessionToken")?),
    };
    let lifetime = xml_text(&text, "Expiration").and_then(|at| until(&at));
    Ok((credentials, lifetime))
}

/// The text of the first `<name>…</name>` element of an STS answer.
fn xml_text(xml: &str, name: &str) -> Option<String> {
    let open = format!("<{name}>");
    let start = xml.find(&open)? + open.len();
    let end = xml[start..].find(&format!("</{name}>"))? + start;
    Some(xml[start..end].trim().to_string())
}

fn answer_text(what: &str, answer: &Answer) -> Result<String, ServiceError> {
    if !answer.is_success() {
        return Err(ServiceError::Status {
            what: what.to_string(),
            status: answer.status,
            message: None,
            code: None,
        });
    }
    Ok(String::from_utf8_lossy(&answer.body).into_owned())
}

/// The credentials of a JSON answer (`AccessKeyId`, `SecretAccessKey` and the session token
/// under `token_field`), as the container and instance metadata endpoints give them.
fn json_credentials(what: &str, answer: &Answer, token_field: &str) -> Result<Lived, ServiceError> {
    let json = answer.success_json(what, &["/message", "/Message"])?;
    let field = |name: &str| {
        json.get(name)
            .and_then(serde_json::Value::as_str)
            .filter(|v| !v.is_empty())
            .map(str::to_string)
    };
    match (field("AccessKeyId"), field("SecretAccessKey")) {
        (Some(access_key_id), Some(secret_access_key)) => Ok((
            AwsCredentials {
                access_key_id,
                secret_access_key,
                session_token: field(token_field),
            },
            field("Expiration").and_then(|at| until(&at)),
        )),
        _ => Err(ServiceError::Missing {
            what: what.to_string(),
            field: "AccessKeyId and SecretAccessKey".into(),
        }),
    }
}

/// Headers and query parameters a SigV4 signature adds to a request.
pub(crate) type Signed = (Vec<(String, String)>, Vec<(String, String)>);

/// Signs a request with SigV4: headers to add, or with `presign_for` query parameters (a
/// presigned URL valid that long).
#[cfg(feature = "aws-kms")]
#[allow(clippy::too_many_arguments)]
pub(crate) fn sigv4(
    method: &str,
    service: &str,
    region: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    credentials: &AwsCredentials,
    presign_for: Option<std::time::Duration>,
) -> Result<Signed, AuthError> {
    use aws_sigv4::http_request::{
        SignableBody, SignableRequest, SignatureLocation, SigningSettings, sign,
    };
    use aws_sigv4::sign::v4;
    let identity = aws_credential_types::Credentials::new(
        &credentials.access_key_id,
        &credentials.secret_access_key,
        credentials.session_token.clone(),
        None,
        "kustomize-controller",
    )
    .into();
    let mut settings = SigningSettings::default();
    if let Some(expires_in) = presign_for {
        settings.signature_location = SignatureLocation::QueryParams;
        settings.expires_in = Some(expires_in);
    }
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(service)
        .time(std::time::SystemTime::now())
        .settings(settings)
        .build()
        .map_err(signing)?
        .into();
    let request = SignableRequest::new(
        method,
        url,
        headers.iter().copied(),
        SignableBody::Bytes(body),
    )
    .map_err(signing)?;
    let (instructions, _) = sign(request, &params).map_err(signing)?.into_parts();
    let headers = instructions
        .headers()
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect();
    let query = instructions
        .params()
        .iter()
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect();
    Ok((headers, query))
}

#[cfg(not(feature = "aws-kms"))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn sigv4(
    _method: &str,
    _service: &str,
    _region: &str,
    _url: &str,
    _headers: &[(&str, &str)],
    _body: &[u8],
    _credentials: &AwsCredentials,
    _presign_for: Option<std::time::Duration>,
) -> Result<Signed, AuthError> {
    Err(AuthError::NotCompiledIn {
        provider: "AWS",
        feature: "aws-kms",
    })
}

#[cfg(feature = "aws-kms")]
fn signing(error: impl std::fmt::Display) -> AuthError {
    AuthError::Invalid(format!("signing: {error}"))
}

/// The credentials a source gives in `region` (STS at `sts_url`); a web identity without a
/// session name of its own uses `default_session`.
pub fn credentials(
    http: &Http,
    source: &AwsCredentialSource,
    sts_url: &str,
    region: &str,
    default_session: &str,
) -> Result<Lived, AuthError> {
    match source {
        AwsCredentialSource::Static(credentials) => Ok((credentials.clone(), None)),
        AwsCredentialSource::WebIdentity {
            role_arn,
            token_file,
            session_name,
        } => {
            let token = std::fs::read_to_string(token_file).map_err(|e| AuthError::File {
                what: "web identity token",
                path: token_file.clone(),
                cause: e.to_string(),
            })?;
            let session = session_name.as_deref().unwrap_or(default_session);
            web_identity(http, sts_url, role_arn, session, &token)
        }
        AwsCredentialSource::Container { uri, authorization } => {
            container_credentials(http, uri, authorization.as_ref())
        }
        AwsCredentialSource::InstanceMetadata { endpoint } => instance_credentials(http, endpoint),
        AwsCredentialSource::ServiceAccount(account) => {
            service_account_credentials(http, account.as_ref(), sts_url, region)
        }
    }
}

const EKS_CLUSTER_PATTERN: &str =
    r"^arn:aws[\w-]*:eks:([^:]{1,100}):[0-9]{1,30}:cluster/(.{1,200})$";
/// How long an EKS bearer token (a presigned STS request) is valid.
pub const EKS_TOKEN_LIFETIME: std::time::Duration = std::time::Duration::from_secs(900);

/// An EKS cluster's region and name, from its ARN, in Flux's words when it is not one.
pub fn eks_cluster(arn: &str) -> Result<(String, String), AuthError> {
    let pattern = regex::Regex::new(EKS_CLUSTER_PATTERN).expect("valid pattern");
    pattern
        .captures(arn)
        .map(|c| (c[1].to_string(), c[2].to_string()))
        .ok_or_else(|| {
            AuthError::Invalid(format!(
                "invalid EKS cluster ARN: '{arn}'. must match {EKS_CLUSTER_PATTERN}"
            ))
        })
}

/// An AWS service's endpoint in `region`: the environment's (`AWS_ENDPOINT_URL_<SERVICE>`,
/// else `AWS_ENDPOINT_URL`), else AWS's.
pub fn service_endpoint(env: &BTreeMap<String, String>, service: &str, region: &str) -> String {
    let specific = format!("AWS_ENDPOINT_URL_{}", service.to_uppercase());
    env.get(&specific)
        .or_else(|| env.get("AWS_ENDPOINT_URL"))
        .cloned()
        .unwrap_or_else(|| {
            let suffix = if region.starts_with("cn-") {
                "amazonaws.com.cn"
            } else {
                "amazonaws.com"
            };
            format!("https://{service}.{region}.{suffix}")
        })
}

/// EKS `DescribeCluster`: the API server's endpoint and its CA bundle (PEM).
pub fn describe_eks_cluster(
    http: &Http,
    eks_url: &str,
    arn: &str,
    region: &str,
    name: &str,
    credentials: &AwsCredentials,
) -> Result<(String, String), AuthError> {
    use base64::Engine as _;
    let url = format!("{}/clusters/{name}", eks_url.trim_end_matches('/'));
    let failed = |e: AuthError| e.during(format!("failed to describe EKS cluster '{arn}'"));
    let service_failed = |e: ServiceError| failed(e.into());
    let (signed, _) =
        sigv4("GET", "eks", region, &url, &[], &[], credentials, None).map_err(failed)?;
    let answer = http
        .send(&format!("DescribeCluster at {url}"), |client| {
            signed
                .iter()
                .fold(client.get(&url), |request, (name, value)| {
                    request.header(name, value)
                })
        })
        .map_err(service_failed)?;
    let json = answer
        .success_json("DescribeCluster", &["/message", "/Message"])
        .map_err(service_failed)?;
    let endpoint = json
        .pointer("/cluster/endpoint")
        .and_then(serde_json::Value::as_str)
        .ok_or_else(|| {
            failed(AuthError::Invalid(
                "the answer has no cluster.endpoint".into(),
            ))
        })?;
    let ca = json
        .pointer("/cluster/certificateAuthority/data")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default();
    let ca = base64::engine::general_purpose::STANDARD
        .decode(ca)
        .map_err(|e| AuthError::Invalid(format!("failed to decode EKS CA certificate: {e}")))?;
    Ok((
        endpoint.to_string(),
        String::from_utf8_lossy(&ca).into_owned(),
    ))
}

/// The bearer token EKS takes: `k8s-aws-v1.` and a presigned STS `GetCallerIdentity` URL
/// (base64url), signed with the cluster's name in `x-k8s-aws-id`, valid 15 minutes.
pub fn eks_token(
    sts_url: &str,
    region: &str,
    name: &str,
    credentials: &AwsCredentials,
) -> Result<String, AuthError> {
    use base64::Engine as _;
    let url = format!(
        "{}/?Action=GetCallerIdentity&Version=2011-06-15",
        sts_url.trim_end_matches('/')
    );
    let (_, query) = sigv4(
        "GET",
        "sts",
        region,
        &url,
        &[("x-k8s-aws-id", name)],
        &[],
        credentials,
        Some(EKS_TOKEN_LIFETIME),
    )
    .map_err(|e| e.during("failed to presign GetCallerIdentity request"))?;
    let mut presigned = url;
    for (name, value) in query {
        presigned.push('&');
        presigned.extend(form_urlencoded::byte_serialize(name.as_bytes()));
        presigned.push('=');
        presigned.extend(form_urlencoded::byte_serialize(value.as_bytes()));
    }
    Ok(format!(
        "k8s-aws-v1.{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(presigned)
    ))
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

    fn kind(source: Option<AwsCredentialSource>) -> String {
        match source {
            None => "none".into(),
            Some(AwsCredentialSource::Static(c)) => format!("static {}", c.access_key_id),
            Some(AwsCredentialSource::WebIdentity { role_arn, .. }) => format!("web {role_arn}"),
            Some(AwsCredentialSource::Container { uri, authorization }) => {
                format!("container {uri} {authorization:?}")
            }
            Some(AwsCredentialSource::InstanceMetadata { endpoint }) => format!("imds {endpoint}"),
            Some(AwsCredentialSource::ServiceAccount(_)) => "account".into(),
        }
    }

    /// The SDK's default chain: the first source configured wins.
    #[test]
    fn the_environment_selects_the_first_configured_source() {
        let cases: &[(&[(&str, &str)], &str)] = &[
            (&[], "imds http://169.254.169.254"),
            (&[("AWS_EC2_METADATA_DISABLED", "TRUE")], "none"),
            (
                &[("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE", "IPv6")],
                "imds http://[fd00:ec2::254]",
            ),
            (
                &[("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://127.0.0.1:9")],
                "imds http://127.0.0.1:9",
            ),
            (
                &[
                    (
                        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                        "http://169.254.170.23/v1/credentials",
                    ),
                    ("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", "/var/run/token"),
                ],
                "container http://169.254.170.23/v1/credentials Some(File(\"/var/run/token\"))",
            ),
            (
                &[
                    (
                        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                        "/v2/credentials/x",
                    ),
                    ("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://127.0.0.1/c"),
                    ("AWS_CONTAINER_AUTHORIZATION_TOKEN", "t"),
                ],
                "container http://169.254.170.2/v2/credentials/x Some(Token(\"t\"))",
            ),
            (
                &[
                    ("AWS_ROLE_ARN", "arn:aws:iam::1:role/r"),
                    ("AWS_WEB_IDENTITY_TOKEN_FILE", "/t"),
                    ("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://127.0.0.1/c"),
                ],
                "web arn:aws:iam::1:role/r",
            ),
            (
                &[
                    ("AWS_ACCESS_KEY_ID", "AKID"),
                    ("AWS_SECRET_ACCESS_KEY", "s"),
                    ("AWS_ROLE_ARN", "arn:aws:iam::1:role/r"),
                    ("AWS_WEB_IDENTITY_TOKEN_FILE", "/t"),
                ],
                "static AKID",
            ),
            // An access key without its secret configures nothing.
            (
                &[
                    ("AWS_ACCESS_KEY_ID", "AKID"),
                    ("AWS_EC2_METADATA_DISABLED", "true"),
                ],
                "none",
            ),
        ];
        for (vars, want) in cases {
            assert_eq!(kind(controller_source(&env(vars))), *want, "{vars:?}");
        }
    }

    /// fluxcd/pkg auth/aws: the annotation's pattern and message.
    #[test]
    fn role_annotations_are_checked_as_flux_checks_them() {
        let with = |value: &str| env(&[(ROLE_ARN_ANNOTATION, value)]);
        assert_eq!(
            role_arn(&with("arn:aws:iam::123456789012:role/sops")),
            Ok("arn:aws:iam::123456789012:role/sops".to_string())
        );
        assert!(role_arn(&with("arn:aws-us-gov:iam::1:role/x")).is_ok());
        assert_eq!(
            role_arn(&with("arn:aws:iam::123:user/x")).map_err(|e| e.to_string()),
            Err(format!(
                "invalid eks.amazonaws.com/role-arn annotation: 'arn:aws:iam::123:user/x'. must match {ROLE_ARN_PATTERN}"
            ))
        );
        assert_eq!(
            role_arn(&BTreeMap::new()).map_err(|e| e.to_string()),
            Err(format!(
                "invalid eks.amazonaws.com/role-arn annotation: ''. must match {ROLE_ARN_PATTERN}"
            ))
        );
        assert_eq!(
            session_name("sops", "apps", "eu-west-1"),
            "sops.apps.eu-west-1.fluxcd.io"
        );
    }
}
