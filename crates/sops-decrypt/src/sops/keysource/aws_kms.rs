//! AWS KMS: `kms` entries are opened by KMS Decrypt, signed with SigV4, with the credentials
//! of the decryption Secret's `sops.aws-kms` entry or the controller's environment; an
//! entry's `role` is assumed through STS first, as sops does.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use serde_json::json;

use super::http::{self, Base64, Http, secret_at, service_message};
use super::{KeySource, KeySourceError};
pub use crate::auth::aws::{AwsCredentialSource, AwsCredentials};
use crate::auth::aws::{sts_credentials, sts_form};
use crate::auth::{AuthError, ServiceError};

/// A `kms` entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct KmsEntry {
    pub arn: String,
    /// A role to assume before decrypting; empty for none.
    pub role: String,
    /// The encryption context the data key was bound to.
    pub context: BTreeMap<String, String>,
    /// A shared-config profile; profiles are not read here (see [`AwsKms::open`]).
    pub profile: String,
    /// The ciphertext blob, standard base64.
    pub enc: String,
}

impl AwsCredentials {
    /// The `sops.aws-kms` entry: YAML with `aws_access_key_id`, `aws_secret_access_key` and
    /// an optional `aws_session_token`, as Flux reads it.
    pub fn from_entry(content: &[u8]) -> Result<AwsCredentials, AuthError> {
        let text = std::str::from_utf8(content)
            .map_err(|_| AuthError::Invalid("not UTF-8 text".to_string()))?;
        let value = crate::yaml::parse_single(text, crate::yaml::Schema::Kyaml).map_err(|e| {
            AuthError::Invalid(format!("failed to unmarshal AWS credentials file: {e}"))
        })?;
        let field = |name: &str| {
            value
                .get(name)
                .and_then(|v| v.as_str())
                .filter(|v| !v.is_empty())
                .map(str::to_string)
        };
        match (field("aws_access_key_id"), field("aws_secret_access_key")) {
            (Some(access_key_id), Some(secret_access_key)) => Ok(AwsCredentials {
                access_key_id,
                secret_access_key,
                session_token: field("aws_session_token"),
            }),
            _ => Err(AuthError::Invalid(
                "requires aws_access_key_id and aws_secret_access_key".to_string(),
            )),
        }
    }
}

/// Where requests go: AWS's endpoints, unless the standard `AWS_ENDPOINT_URL*` variables of
/// the controller's environment name others.
#[derive(Debug, Clone, Default)]
pub struct AwsEndpoints {
    pub kms: Option<String>,
    pub sts: Option<String>,
}

/// AWS credentials and the endpoints to use them at.
pub(crate) struct AwsKms {
    source: AwsCredentialSource,
    /// The credentials of a source that is asked for them, once asked.
    exchanged: OnceLock<Result<AwsCredentials, AuthError>>,
    endpoints: AwsEndpoints,
    http: Arc<Http>,
}

impl AwsKms {
    pub(crate) fn new(
        source: AwsCredentialSource,
        endpoints: AwsEndpoints,
        http: Arc<Http>,
    ) -> AwsKms {
        AwsKms {
            source,
            exchanged: OnceLock::new(),
            endpoints,
            http,
        }
    }

    fn sts_url(&self, region: &Region) -> String {
        self.endpoints
            .sts
            .clone()
            .unwrap_or_else(|| format!("https://sts.{}/", region.host_suffix()))
    }

    /// The credentials requests are signed with: asked once per decryption, and kept in the
    /// token cache across decryptions when they are not static.
    fn base_credentials(&self, region: &Region) -> Result<AwsCredentials, AuthError> {
        use crate::auth::aws as identity;
        use crate::auth::cache::Cached;
        let http = &self.http;
        let fetch = || {
            identity::credentials(
                http,
                &self.source,
                &self.sts_url(region),
                &region.name,
                &session_name_for_host(),
            )
        };
        let asked = || match identity::cache_key(&self.source, &region.name)? {
            None => fetch().map(|(credentials, _)| credentials),
            Some(key) => {
                let kept = http.cached(&key, "decrypt_with_aws", || {
                    fetch().map(|(credentials, lifetime)| (Cached::Aws(credentials), lifetime))
                })?;
                kept.aws()
            }
        };
        self.exchanged.get_or_init(asked).clone()
    }

    /// Sends a signed POST.
    #[allow(clippy::too_many_arguments)]
    fn call(
        &self,
        what: &str,
        service: &str,
        region: &str,
        url: &str,
        headers: &[(&str, &str)],
        body: &[u8],
        credentials: &AwsCredentials,
    ) -> Result<http::Answer, KeySourceError> {
        // Signed once: retries come within seconds, well inside SigV4's five minutes.
        let (signed, _) = crate::auth::aws::sigv4(
            "POST",
            service,
            region,
            url,
            headers,
            body,
            credentials,
            None,
        )?;
        let answer = self.http.send(what, |client| {
            let mut request = client.post(url).body(body.to_vec());
            for (name, value) in headers {
                request = request.header(*name, *value);
            }
            for (name, value) in &signed {
                request = request.header(name, value);
            }
            request
        })?;
        Ok(answer)
    }

    /// Temporary credentials for `role`, as sops assumes it (session `sops@<host>`).
    fn assume_role(
        &self,
        role: &str,
        region: &Region,
        base: &AwsCredentials,
    ) -> Result<AwsCredentials, KeySourceError> {
        let url = self.sts_url(region);
        let what = format!("STS AssumeRole {role} at {url}");
        let body = sts_form("AssumeRole", role, &session_name_for_host(), &[]);
        let answer = self.call(
            &what,
            "sts",
            &region.name,
            &url,
            &[("content-type", "application/x-www-form-urlencoded")],
            body.as_bytes(),
            base,
        )?;
        let (credentials, _) = sts_credentials(&what, &answer)?;
        Ok(credentials)
    }
}

impl KeySource for AwsKms {
    type Entry = KmsEntry;
    const NAME: &'static str = "AWS KMS";

    /// `aws_profile` names a profile of a shared config file the controller does not read;
    /// the entry is opened with the credentials given, as Flux's static credentials are.
    fn open(&self, entry: &KmsEntry) -> Result<Option<Vec<u8>>, KeySourceError> {
        let region = region_of(&entry.arn)?;
        let base = self.base_credentials(&region)?;
        let credentials = if entry.role.is_empty() {
            base
        } else {
            self.assume_role(&entry.role, &region, &base)?
        };
        let url = self
            .endpoints
            .kms
            .clone()
            .unwrap_or_else(|| format!("https://kms.{}/", region.host_suffix()));
        let what = format!("Decrypt at {url}");
        let body = serde_json::to_vec(&json!({
            "CiphertextBlob": entry.enc,
            "EncryptionContext": entry.context,
            "KeyId": entry.arn,
        }))
        .map_err(|e| KeySourceError::Unreadable(e.to_string()))?;
        let answer = self.call(
            &what,
            "kms",
            &region.name,
            &url,
            &[
                ("content-type", "application/x-amz-json-1.1"),
                ("x-amz-target", "TrentService.Decrypt"),
            ],
            &body,
            &credentials,
        )?;
        if !answer.is_success() {
            let kind = answer
                .json(&what)
                .ok()
                .and_then(|j| j.get("__type").and_then(|t| t.as_str()).map(str::to_string))
                .filter(|kind| !kind.is_empty());
            return Err(ServiceError::Status {
                what,
                status: answer.status,
                message: service_message(&answer, &["/message", "/Message"]),
                code: kind,
            }
            .into());
        }
        let json = answer.json(&what)?;
        secret_at(&what, &json, "/Plaintext", Base64::Standard).map(Some)
    }
}

/// A KMS key's region and partition.
#[derive(Debug, PartialEq, Eq)]
struct Region {
    name: String,
    /// `aws`, `aws-cn`, `aws-us-gov`…
    partition: String,
}

impl Region {
    /// `<region>.amazonaws.com`, or `.com.cn` in the China partition.
    fn host_suffix(&self) -> String {
        if self.partition == "aws-cn" {
            format!("{}.amazonaws.com.cn", self.name)
        } else {
            format!("{}.amazonaws.com", self.name)
        }
    }
}

/// The region of a KMS key ARN, which sops uses whatever else is configured. It becomes
/// part of a host name, so it must look like one's label.
fn region_of(arn: &str) -> Result<Region, KeySourceError> {
    static ARN: OnceLock<regex::Regex> = OnceLock::new();
    let pattern = ARN.get_or_init(|| {
        regex::Regex::new(r"^arn:(aws[a-z-]*):kms:([a-z0-9-]+):[0-9]+:(key|alias)/.+$")
            .expect("valid")
    });
    pattern
        .captures(arn)
        .map(|c| Region {
            name: c[2].to_string(),
            partition: c[1].to_string(),
        })
        .ok_or_else(|| KeySourceError::Unreadable(format!("no valid ARN found in '{arn}'")))
}

/// `sops@<host>` with what STS refuses in a session name removed, as sops names it.
fn session_name_for_host() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    let name: String = format!("sops@{host}")
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || "=,.@_".contains(*c) || ('@'..='_').contains(c))
        .take(64)
        .collect();
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_come_from_the_arn() {
        let region = region_of("arn:aws:kms:eu-west-1:123456789012:key/abc").unwrap();
        assert_eq!(region.host_suffix(), "eu-west-1.amazonaws.com");
        let gov = region_of("arn:aws-us-gov:kms:us-gov-west-1:123456789012:alias/sops").unwrap();
        assert_eq!(gov.name, "us-gov-west-1");
        let china = region_of("arn:aws-cn:kms:cn-north-1:123456789012:key/abc").unwrap();
        assert_eq!(china.host_suffix(), "cn-north-1.amazonaws.com.cn");
        assert!(region_of("arn:aws:s3:::bucket").is_err());
        // A region is a host label: nothing may steer the signed request elsewhere.
        assert!(region_of("arn:aws:kms:evil.example/:1:key/a").is_err());
        assert!(region_of("arn:aws:kms:x.evil.example:1:key/a").is_err());
    }

    #[test]
    fn credentials_entries_are_read_as_flux_reads_them() {
        let credentials = AwsCredentials::from_entry(
            b"aws_access_key_id: AKID\naws_secret_access_key: SECRET\naws_session_token: TOKEN\n",
        )
        .unwrap();
        assert_eq!(credentials.access_key_id, "AKID");
        assert_eq!(credentials.session_token.as_deref(), Some("TOKEN"));
        assert!(!format!("{credentials:?}").contains("SECRET"));
        let error = AwsCredentials::from_entry(b"aws_access_key_id: AKID\n")
            .unwrap_err()
            .to_string();
        assert!(!error.contains("AKID"), "{error}");
    }

    #[test]
    fn session_names_keep_only_what_sts_accepts() {
        let name = session_name_for_host();
        assert!(name.starts_with("sops@"));
        assert!(name.len() <= 64);
        assert!(!name.contains('-'));
    }
}
