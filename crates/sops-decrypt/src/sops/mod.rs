//! SOPS decryption, in process: the SOPS v3 file format, its data key opened with age X25519
//! identities, OpenPGP secret keys, AWS KMS, GCP KMS, Azure Key Vault or Vault transit.
//!
//! Data flow: a file's bytes are loaded per [`Format`] into ordered branches and metadata
//! (`formats`); the metadata's key groups are read into typed entries, each opened by the
//! key source of its kind with the [`Keys`] given (`keys`, `keysource`), and several groups'
//! Shamir shares are combined (`shamir`) into the 32-byte data key; every
//! encrypted leaf is opened with AES-256-GCM bound to its key path and the SHA-512 MAC over
//! all plaintext leaves is checked (`tree`, `value`); the branches are printed back in the
//! same format. Kubernetes objects that already went through a kustomize build have lost
//! their key order, so [`decrypt_object`] opens their values without the MAC, as Flux does.
//!
//! Plaintext never enters an error: errors name the file, object and key path only.

mod formats;
mod keys;
pub mod keysource;
mod shamir;
#[cfg(test)]
mod tests;
mod tree;
mod value;

use std::path::{Path, PathBuf};

use crate::value::Value;
use base64::Engine;

pub use keys::{AWS_KMS_ENTRY, AZURE_KV_ENTRY, GCP_KMS_ENTRY, KeyError, Keys, VAULT_TOKEN_ENTRY};
pub use value::{EncryptedValue, ValueError, ValueKind};

/// The annotation that keeps an object away from decryption.
pub const DECRYPT_ANNOTATION: &str = "kustomize.toolkit.fluxcd.io/decrypt";

/// How a SOPS file stores its values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Yaml,
    Json,
    Dotenv,
    Ini,
    Binary,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::Yaml => "yaml",
            Format::Json => "json",
            Format::Dotenv => "dotenv",
            Format::Ini => "ini",
            Format::Binary => "binary",
        }
    }

    /// `yaml`, `json`, `dotenv`, `ini` or `binary`, as `sops --input-type` takes them.
    pub fn from_name(name: &str) -> Option<Format> {
        Some(match name {
            "yaml" => Format::Yaml,
            "json" => Format::Json,
            "dotenv" => Format::Dotenv,
            "ini" => Format::Ini,
            "binary" => Format::Binary,
            _ => return None,
        })
    }

    /// The format SOPS infers from a file name; anything unrecognised is binary.
    pub fn from_path(path: &Path) -> Format {
        // By suffix, not `extension()`: `.dockerconfigjson` and `.env` are whole file names.
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_ascii_lowercase();
        let ends = |suffix: &str| name.ends_with(suffix);
        if ends(".yaml") || ends(".yml") {
            Format::Yaml
        } else if ends(".json") || ends(".dockerconfigjson") {
            Format::Json
        } else if ends(".env") {
            Format::Dotenv
        } else if ends(".ini") {
            Format::Ini
        } else {
            Format::Binary
        }
    }

    /// The format of SOPS content recognised by its MAC marker, for data without a name
    /// that says (Secret values). `None`: not a SOPS document.
    pub fn sniff(content: &[u8]) -> Option<Format> {
        let has = |marker: &[u8]| content.windows(marker.len()).any(|w| w == marker);
        if has(b"\"mac\": \"ENC[") {
            Some(Format::Json)
        } else if has(b"sops_mac=ENC[") {
            Some(Format::Dotenv)
        } else if has(b"mac: ENC[") {
            // Before INI: a YAML value may well contain the text `[sops]`.
            Some(Format::Yaml)
        } else if has(b"[sops]") {
            Some(Format::Ini)
        } else {
            None
        }
    }
}

/// Why a SOPS document could not be decrypted. Never carries plaintext or key material.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SopsError {
    #[error("not a SOPS document: no `sops` metadata")]
    NotEncrypted,
    #[error("cannot read the {format} document: {message}")]
    Parse {
        format: &'static str,
        message: String,
    },
    #[error("invalid SOPS metadata: {0}")]
    Metadata(String),
    #[error(
        "no configured key decrypts the data key (recipients: {recipients}){}; \
         set spec.decryption with a matching key or key service credentials",
        if details.is_empty() { String::new() } else { format!(": {details}") }
    )]
    NoMatchingKey { recipients: String, details: String },
    #[error(
        "{required} key groups must open the data key's Shamir shares, {opened} did{}",
        if details.is_empty() { String::new() } else { format!(": {details}") }
    )]
    NotEnoughKeyGroups {
        required: usize,
        opened: usize,
        details: String,
    },
    #[error("{0}")]
    UnsupportedRecipient(String),
    #[error("value at `{path}`: {reason}")]
    Value { path: String, reason: String },
    #[error("the SOPS MAC does not match: the file was modified after it was encrypted")]
    MacMismatch,
    #[error("the SOPS metadata has no MAC")]
    MacMissing,
    #[error("the decrypted document is not UTF-8 text")]
    NotText,
    #[error("{}: {reason}", .file.display())]
    Input { file: PathBuf, reason: String },
    #[error("finding the files to decrypt: {0}")]
    Inputs(String),
    #[error("{context}: {source}")]
    In {
        context: String,
        #[source]
        source: Box<SopsError>,
    },
}

impl SopsError {
    fn within(self, context: impl Into<String>) -> SopsError {
        SopsError::In {
            context: context.into(),
            source: Box::new(self),
        }
    }
}

/// Decrypts a whole SOPS file as written, verifying its MAC, and prints it in its format
/// (as `sops decrypt` does).
pub fn decrypt(content: &[u8], format: Format, keys: &Keys) -> Result<Vec<u8>, SopsError> {
    decrypt_with(content, format, keys, true)
}

/// Like [`decrypt`]; `verify_mac: false` skips the integrity check, as Flux's controller does
/// for everything it decrypts (tools routinely inject data into manifests after encryption;
/// each value is still authenticated by AES-GCM).
pub fn decrypt_with(
    content: &[u8],
    format: Format,
    keys: &Keys,
    verify_mac: bool,
) -> Result<Vec<u8>, SopsError> {
    decrypt_as(content, format, format, keys, verify_mac)
}

/// Decrypts a document read as `input` and prints it as `output` (Flux prints a Secret value
/// in the format its key's extension names, whatever the document was written in).
fn decrypt_as(
    content: &[u8],
    format: Format,
    output: Format,
    keys: &Keys,
    verify_mac: bool,
) -> Result<Vec<u8>, SopsError> {
    let text = std::str::from_utf8(content).map_err(|_| SopsError::Parse {
        format: format.name(),
        message: "not UTF-8 text".to_string(),
    })?;
    let mut loaded = formats::load(text, format)?;
    let metadata = tree::Metadata::from_value(&loaded.metadata)?;
    let data_key = metadata.data_key(keys)?;
    tree::open_branches(&mut loaded.branches, &metadata, &data_key, verify_mac)?;
    if output != format
        && let Ok(converted) = formats::emit(&loaded.branches, output)
    {
        return Ok(converted);
    }
    formats::emit(&loaded.branches, format)
}

/// Whether `content` is a SOPS document of `format` (has its metadata).
pub fn is_encrypted(content: &[u8], format: Format) -> bool {
    std::str::from_utf8(content)
        .ok()
        .and_then(|text| formats::load(text, format).ok())
        .is_some()
}

/// The largest SOPS file decrypted before a build.
pub const MAX_INPUT_FILE_BYTES: u64 = 5 << 20;

/// Decrypts in place the SOPS files the kustomization in `dir` will read as secret sources
/// or patches (see [`crate::kustomize::secret_inputs`]), refusing any that resolve outside
/// `artifact_root`. Files that are not SOPS documents, or do not exist, are left to the
/// build. Returns the files decrypted.
pub fn decrypt_build_inputs(
    artifact_root: &Path,
    dir: &Path,
    keys: &Keys,
) -> Result<Vec<PathBuf>, SopsError> {
    let inputs =
        crate::kustomize::secret_inputs(dir).map_err(|e| SopsError::Inputs(e.to_string()))?;
    let root = artifact_root.canonicalize().map_err(|e| SopsError::Input {
        file: artifact_root.to_path_buf(),
        reason: e.to_string(),
    })?;
    // Env sources whose extension names no format are dotenv, whatever SOPS would guess.
    let env_format = |path: &Path| match Format::from_path(path) {
        Format::Binary => Format::Dotenv,
        other => other,
    };
    // A generator file's format follows the data key it becomes, as in Flux
    // (`key=file.txt` is binary, `config.yaml=secret.enc` is YAML).
    let files = inputs
        .generator_files
        .iter()
        .map(|f| (&f.path, Format::from_path(Path::new(&f.key))))
        .chain(inputs.env_files.iter().map(|p| (p, env_format(p))))
        .chain(inputs.patch_files.iter().map(|p| (p, Format::from_path(p))));
    let mut decrypted = Vec::new();
    for (file, format) in files {
        let Ok(real) = file.canonicalize() else {
            continue;
        };
        let fail = |reason: String| SopsError::Input {
            file: file.clone(),
            reason,
        };
        if !real.starts_with(&root) {
            return Err(fail(format!(
                "resolves outside the artifact root {}",
                root.display()
            )));
        }
        // A FIFO or device would block or stream forever: refuse it before opening (opening
        // a FIFO blocks), check the opened handle again, and never read past the limit even
        // if the file grows.
        let regular = std::fs::symlink_metadata(&real).map_err(|e| fail(e.to_string()))?;
        if !regular.is_file() {
            return Err(fail("not a regular file".into()));
        }
        let mut handle = std::fs::File::open(&real).map_err(|e| fail(e.to_string()))?;
        let metadata = handle.metadata().map_err(|e| fail(e.to_string()))?;
        if !metadata.is_file() {
            return Err(fail("not a regular file".into()));
        }
        if metadata.len() > MAX_INPUT_FILE_BYTES {
            return Err(fail(format!(
                "larger than the {MAX_INPUT_FILE_BYTES}-byte limit for SOPS files"
            )));
        }
        let mut content = Vec::new();
        std::io::Read::read_to_end(
            &mut std::io::Read::take(&mut handle, MAX_INPUT_FILE_BYTES + 1),
            &mut content,
        )
        .map_err(|e| fail(e.to_string()))?;
        if content.len() as u64 > MAX_INPUT_FILE_BYTES {
            return Err(fail(format!(
                "larger than the {MAX_INPUT_FILE_BYTES}-byte limit for SOPS files"
            )));
        }
        drop(handle);
        if !is_encrypted(&content, format) {
            continue;
        }
        let plain = decrypt_with(&content, format, keys, false)
            .map_err(|e| e.within(file.display().to_string()))?;
        std::fs::write(&real, plain).map_err(|e| fail(e.to_string()))?;
        decrypted.push(file.clone());
    }
    Ok(decrypted)
}

/// What [`decrypt_object`] did to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectOutcome {
    /// Nothing was encrypted.
    Plain,
    /// Encrypted values were decrypted.
    Decrypted,
    /// Annotated `kustomize.toolkit.fluxcd.io/decrypt: disabled`; left as it was.
    Disabled,
}

/// Decrypts a built Kubernetes object: a top-level `sops` key (any kind) makes the whole
/// object a SOPS tree; a `Secret`'s `data`/`stringData` values holding a SOPS document are
/// decrypted into their plaintext, printed in the format the data key's extension names.
/// The MAC of a whole object cannot be checked (the build re-ordered it); those inside
/// Secret values are.
pub fn decrypt_object(object: &mut Value, keys: &Keys) -> Result<ObjectOutcome, SopsError> {
    let id = object_id(object);
    if decryption_disabled(object) {
        return Ok(ObjectOutcome::Disabled);
    }
    let mut outcome = ObjectOutcome::Plain;
    if let Some(map) = object.as_object_mut()
        && let Some(sops) = map.remove("sops")
    {
        let metadata = tree::Metadata::from_value(&sops).map_err(|e| e.within(&id))?;
        let data_key = metadata.data_key(keys).map_err(|e| e.within(&id))?;
        tree::open_value(object, &metadata, &data_key).map_err(|e| e.within(&id))?;
        outcome = ObjectOutcome::Decrypted;
    }
    if object.get("kind").and_then(Value::as_str) != Some("Secret") {
        return Ok(outcome);
    }
    for field in ["data", "stringData"] {
        let Some(entries) = object.get_mut(field).and_then(Value::as_object_mut) else {
            continue;
        };
        for (key, value) in entries.iter_mut() {
            let Some(text) = value.as_str() else { continue };
            let content = if field == "data" {
                match base64::engine::general_purpose::STANDARD.decode(text) {
                    Ok(bytes) => bytes,
                    Err(_) => continue,
                }
            } else {
                text.as_bytes().to_vec()
            };
            let Some(sniffed) = Format::sniff(&content) else {
                continue;
            };
            let context = || format!("{id} {field}.{key}");
            // A JSON envelope under a key without a known extension is a binary file
            // (`{"data": …}`), whose plaintext is the raw bytes.
            let input = match (sniffed, Format::from_path(Path::new(key))) {
                (Format::Json, Format::Binary) => Format::Binary,
                (sniffed, _) => sniffed,
            };
            let output = match Format::from_path(Path::new(key)) {
                Format::Binary => input,
                named => named,
            };
            let plain = decrypt_as(&content, input, output, keys, false)
                .map_err(|e| e.within(context()))?;
            *value = if field == "data" {
                Value::String(base64::engine::general_purpose::STANDARD.encode(plain))
            } else {
                Value::String(
                    String::from_utf8(plain).map_err(|_| SopsError::NotText.within(context()))?,
                )
            };
            outcome = ObjectOutcome::Decrypted;
        }
    }
    Ok(outcome)
}

/// A Secret that would be applied encrypted, in Flux's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{object} is SOPS encrypted, configuring decryption is required for this secret to be reconciled"
)]
pub struct EncryptedSecret {
    /// `Kind/namespace/name`.
    pub object: String,
}

/// A `Secret` that still holds SOPS-encrypted content after decryption (no keys
/// configured) is refused, named as `Kind/namespace/name`: applying it would store
/// ciphertext. Beyond Flux, which looks for a top-level `sops` key only, values holding a
/// SOPS document or value count too. Objects annotated
/// `kustomize.toolkit.fluxcd.io/decrypt: disabled` hold it on purpose and pass.
pub fn ensure_not_encrypted_secret(object: &Value) -> Result<(), EncryptedSecret> {
    if object.get("kind").and_then(Value::as_str) != Some("Secret") || decryption_disabled(object) {
        return Ok(());
    }
    let encrypted = object.get("sops").is_some()
        || ["data", "stringData"].iter().any(|field| {
            object
                .get(field)
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .filter_map(|(_, v)| v.as_str())
                .any(|text| {
                    EncryptedValue::looks_encrypted(text)
                        || base64::engine::general_purpose::STANDARD
                            .decode(text)
                            .ok()
                            .and_then(|b| Format::sniff(&b))
                            .is_some()
                        || Format::sniff(text.as_bytes()).is_some()
                })
        });
    if encrypted {
        return Err(EncryptedSecret {
            object: object_id(object),
        });
    }
    Ok(())
}

/// `kustomize.toolkit.fluxcd.io/decrypt: disabled`, in any case (Flux's `strings.EqualFold`;
/// its docs spell it `Disabled`).
fn decryption_disabled(object: &Value) -> bool {
    object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(DECRYPT_ANNOTATION))
        .and_then(Value::as_str)
        .is_some_and(|value| value.eq_ignore_ascii_case("disabled"))
}

fn object_id(object: &Value) -> String {
    let text = |pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    let namespace = text("/metadata/namespace");
    format!(
        "{}/{}{}",
        text("/kind"),
        if namespace.is_empty() {
            String::new()
        } else {
            format!("{namespace}/")
        },
        text("/metadata/name")
    )
}
