//! Key sources: what opens one entry of a SOPS file's key groups.
//!
//! A file's `sops` metadata lists, per key group, entries of six kinds (`age`, `pgp`, `kms`,
//! `gcp_kms`, `azure_kv`, `hc_vault`). [`Stanza::parse`] reads one into its typed form; the
//! [`KeySource`] of that kind opens it with the credentials a decryption was given and yields
//! the bytes it wraps: the data key, or with several key groups that group's Shamir share.
//! Sources that call a key service do so over HTTPS with bounded time and retries
//! ([`http`]); credentials and tokens never enter an error.

pub(crate) mod age;
pub(crate) mod aws_kms;
pub(crate) mod azure_kv;
pub(crate) mod gcp_kms;
pub mod http;
pub(crate) mod pgp;
pub(crate) mod vault;

use std::collections::BTreeMap;

use crate::auth::{AuthError, ServiceError};
use crate::value::Value;

/// Why an entry of a key group could not be opened; names no secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum KeySourceError {
    /// The key service gave no usable answer.
    #[error(transparent)]
    Service(#[from] ServiceError),
    /// The credentials to call the key service with could not be had.
    #[error(transparent)]
    Auth(#[from] AuthError),
    /// The decryption was given nothing this kind of entry opens with.
    #[error("no credentials{0}")]
    NoCredentials(String),
    /// The entry or its wrapped key is malformed, or a local key cannot read it.
    #[error("{0}")]
    Unreadable(String),
    /// A key type this build leaves out.
    #[cfg_attr(feature = "pgp", allow(dead_code))]
    #[error("{provider} support is not compiled in (feature `{feature}`)")]
    NotCompiledIn {
        provider: &'static str,
        feature: &'static str,
    },
    #[error("the decrypted data key has {0} bytes (expected 32, or 33 for a Shamir share)")]
    SecretLength(usize),
}

/// Why an entry of the `sops` metadata cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum StanzaError {
    #[error("unknown key type `{0}`")]
    UnknownKind(String),
    #[error("a `{kind}` entry has no `{field}`")]
    Missing { kind: String, field: String },
    #[error("`{kind}` entry: `{field}` is not a {expected}")]
    WrongType {
        kind: String,
        field: String,
        expected: &'static str,
    },
}

/// The largest secret a stanza may wrap: a 32-byte data key, or a Shamir share of one (one
/// byte more); anything longer is refused before it is read.
pub(crate) const MAX_WRAPPED_LEN: usize = 33;

/// Opens the entries of one kind.
pub(crate) trait KeySource {
    /// The entry this source opens.
    type Entry;
    /// How errors name the source ("AWS KMS").
    const NAME: &'static str;
    /// The bytes `entry` wraps; `Ok(None)` when none of this source's keys is a recipient.
    /// An `Err` says why it could not be opened, naming no secret.
    fn open(&self, entry: &Self::Entry) -> Result<Option<Vec<u8>>, KeySourceError>;
}

/// One entry of a key group.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Stanza {
    Age(age::AgeEntry),
    Pgp(pgp::PgpEntry),
    AwsKms(aws_kms::KmsEntry),
    GcpKms(gcp_kms::GcpEntry),
    AzureKv(azure_kv::AzureEntry),
    Vault(vault::VaultEntry),
}

/// The metadata lists of a key group, in the order SOPS tries them by default (local keys
/// before key services).
pub(crate) const KINDS: [&str; 6] = ["age", "pgp", "hc_vault", "kms", "gcp_kms", "azure_kv"];

impl Stanza {
    /// Reads one entry of the metadata list `kind` (one of [`KINDS`]).
    pub(crate) fn parse(kind: &str, entry: &Value) -> Result<Stanza, StanzaError> {
        let fields = Fields { kind, entry };
        Ok(match kind {
            "age" => Stanza::Age(age::AgeEntry {
                enc: fields.required("enc")?,
            }),
            "pgp" => Stanza::Pgp(pgp::PgpEntry {
                enc: fields.required("enc")?,
                fingerprint: fields.optional("fp"),
            }),
            "kms" => Stanza::AwsKms(aws_kms::KmsEntry {
                arn: fields.required("arn")?,
                role: fields.optional("role"),
                context: fields.map("context")?,
                profile: fields.optional("aws_profile"),
                enc: fields.required("enc")?,
            }),
            "gcp_kms" => Stanza::GcpKms(gcp_kms::GcpEntry {
                resource_id: fields.required("resource_id")?,
                enc: fields.required("enc")?,
            }),
            "azure_kv" => Stanza::AzureKv(azure_kv::AzureEntry {
                vault_url: fields.required("vault_url")?,
                name: fields.required("name")?,
                version: fields.optional("version"),
                enc: fields.required("enc")?,
            }),
            "hc_vault" => Stanza::Vault(vault::VaultEntry {
                address: fields.required("vault_address")?,
                engine_path: fields.required("engine_path")?,
                key_name: fields.required("key_name")?,
                enc: fields.required("enc")?,
            }),
            other => return Err(StanzaError::UnknownKind(other.to_string())),
        })
    }

    /// The key service or key type, as errors name it.
    pub(crate) fn source_name(&self) -> &'static str {
        match self {
            Stanza::Age(_) => <age::AgeIdentities as KeySource>::NAME,
            Stanza::Pgp(_) => <pgp::PgpKeys as KeySource>::NAME,
            Stanza::AwsKms(_) => <aws_kms::AwsKms as KeySource>::NAME,
            Stanza::GcpKms(_) => <gcp_kms::GcpKms as KeySource>::NAME,
            Stanza::AzureKv(_) => <azure_kv::AzureKeyVault as KeySource>::NAME,
            Stanza::Vault(_) => <vault::VaultTransit as KeySource>::NAME,
        }
    }

    /// The key the entry names (an ARN, a resource id, a fingerprint), never its secret.
    pub(crate) fn key_name(&self) -> String {
        match self {
            Stanza::Age(_) => String::new(),
            Stanza::Pgp(entry) => entry.fingerprint.clone(),
            Stanza::AwsKms(entry) => entry.arn.clone(),
            Stanza::GcpKms(entry) => entry.resource_id.clone(),
            Stanza::AzureKv(entry) => format!("{}/keys/{}", entry.vault_url, entry.name),
            Stanza::Vault(entry) => format!(
                "{}/v1/{}/keys/{}",
                entry.address.trim_end_matches('/'),
                entry.engine_path.trim_matches('/'),
                entry.key_name
            ),
        }
    }
}

/// The fields of one metadata entry.
struct Fields<'v> {
    kind: &'v str,
    entry: &'v Value,
}

impl Fields<'_> {
    fn required(&self, name: &str) -> Result<String, StanzaError> {
        match self.entry.get(name) {
            Some(Value::String(text)) if !text.is_empty() => Ok(text.clone()),
            Some(Value::String(_)) | None | Some(Value::Null) => Err(StanzaError::Missing {
                kind: self.kind.to_string(),
                field: name.to_string(),
            }),
            Some(_) => Err(self.wrong_type(name, "string")),
        }
    }

    fn wrong_type(&self, field: &str, expected: &'static str) -> StanzaError {
        StanzaError::WrongType {
            kind: self.kind.to_string(),
            field: field.to_string(),
            expected,
        }
    }

    fn optional(&self, name: &str) -> String {
        self.entry
            .get(name)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    }

    fn map(&self, name: &str) -> Result<BTreeMap<String, String>, StanzaError> {
        match self.entry.get(name) {
            None | Some(Value::Null) => Ok(BTreeMap::new()),
            Some(Value::Object(map)) => map
                .iter()
                .map(|(key, value)| match value {
                    Value::String(text) => Ok((key.clone(), text.clone())),
                    _ => Err(self.wrong_type(&format!("{name}.{key}"), "string")),
                })
                .collect(),
            Some(_) => Err(self.wrong_type(name, "mapping")),
        }
    }
}

/// A wrapped secret of the length a data key or share has.
pub(crate) fn checked_secret(bytes: Vec<u8>) -> Result<Vec<u8>, KeySourceError> {
    if bytes.is_empty() || bytes.len() > MAX_WRAPPED_LEN {
        return Err(KeySourceError::SecretLength(bytes.len()));
    }
    Ok(bytes)
}
