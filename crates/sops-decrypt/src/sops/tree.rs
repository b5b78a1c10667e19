//! Opening a SOPS tree: metadata, data key, every encrypted leaf, and the MAC.
//!
//! A document arrives as ordered branches (mapping keys in file order, because the MAC is a
//! SHA-512 over the plaintext leaves in exactly that order) plus its `sops` metadata. Leaves
//! are decrypted in place with their key path as additional data; the MAC is then compared
//! with the encrypted one stored in the metadata.

use crate::value::{Number, Value};
use regex::Regex;
use sha2::{Digest, Sha512};

use super::SopsError;
use super::keys::Keys;
use super::keysource::{KINDS, Stanza};
use super::shamir;
use super::value::{EncryptedValue, ValueKind};
use crate::yaml::Ordered;

/// Hashed first when only encrypted values count towards the MAC (`mac_only_encrypted`),
/// so such a MAC can never equal one over all values.
const MAC_ONLY_ENCRYPTED_INIT: [u8; 32] = [
    0x8a, 0x3f, 0xd2, 0xad, 0x54, 0xce, 0x66, 0x52, 0x7b, 0x10, 0x34, 0xf3, 0xd1, 0x47, 0xbe, 0x0b,
    0x0b, 0x97, 0x5b, 0x3b, 0xf4, 0x4f, 0x72, 0xc6, 0xfd, 0xad, 0xec, 0x81, 0x76, 0xf2, 0x7d, 0x69,
];

/// Which leaves are encrypted, from the first rule the metadata sets.
enum Rule {
    UnencryptedSuffix(String),
    EncryptedSuffix(String),
    UnencryptedRegex(Regex),
    EncryptedRegex(Regex),
    /// `encrypted_comment_regex` / `unencrypted_comment_regex`: the decision follows comments,
    /// which this reader does not keep, so a leaf counts as encrypted when it is an
    /// `ENC[…]` value (a forged one still fails authentication).
    ByValueForm,
}

/// One key group: its entries, and those that could not be read (sops skips an entry it
/// cannot read and tries the others).
struct KeyGroup {
    stanzas: Vec<Stanza>,
    invalid: Vec<String>,
}

/// The parts of the `sops` metadata decryption needs.
pub struct Metadata {
    lastmodified: String,
    mac: Option<String>,
    /// The key groups: each entry of a group wraps the same secret (the data key, or with
    /// several groups that group's Shamir share).
    groups: Vec<KeyGroup>,
    /// How many groups must open; 0 when the file does not say (then every one given is
    /// combined, as sops does).
    shamir_threshold: usize,
    rule: Rule,
    mac_only_encrypted: bool,
}

impl Metadata {
    pub fn from_value(sops: &Value) -> Result<Metadata, SopsError> {
        let bad = |what: &str| SopsError::Metadata(what.to_string());
        let map = sops
            .as_object()
            .ok_or_else(|| bad("`sops` is not a mapping"))?;
        let text = |key: &str| map.get(key).and_then(Value::as_str).map(str::to_string);
        let has_top_level_keys = KINDS.iter().any(|k| {
            map.get(*k)
                .and_then(Value::as_array)
                .is_some_and(|l| !l.is_empty())
        });
        // As in SOPS, key groups count only when no key list is set at the top level.
        let group_maps: Vec<&crate::value::Map> = match map.get("key_groups") {
            Some(Value::Array(groups)) if !has_top_level_keys && !groups.is_empty() => groups
                .iter()
                .map(|g| {
                    g.as_object()
                        .ok_or_else(|| bad("a key group is not a mapping"))
                })
                .collect::<Result<_, _>>()?,
            Some(other) if !has_top_level_keys && !other.is_null() && !other.is_array() => {
                return Err(bad("`key_groups` is not a list"));
            }
            _ => vec![map],
        };
        let mut groups = Vec::new();
        for group in group_maps {
            let mut stanzas = Vec::new();
            let mut invalid = Vec::new();
            for kind in KINDS {
                match group.get(kind) {
                    None | Some(Value::Null) => {}
                    Some(Value::Array(entries)) => {
                        for entry in entries {
                            match Stanza::parse(kind, entry) {
                                Ok(stanza) => stanzas.push(stanza),
                                Err(reason) => invalid.push(format!("invalid entry: {reason}")),
                            }
                        }
                    }
                    Some(_) => return Err(bad(&format!("`{kind}` is not a list"))),
                }
            }
            groups.push(KeyGroup { stanzas, invalid });
        }
        let shamir_threshold = match map.get("shamir_threshold") {
            None | Some(Value::Null) => 0,
            Some(Value::Number(n)) => n
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| bad("shamir_threshold is not an integer"))?,
            // INI and dotenv files store it as text.
            Some(Value::String(s)) => s
                .parse()
                .map_err(|_| bad("shamir_threshold is not an integer"))?,
            Some(_) => return Err(bad("shamir_threshold is not an integer")),
        };
        let regex = |key: &str| -> Result<Option<Regex>, SopsError> {
            text(key)
                .map(|r| go_std::regexp::compile(&r).map_err(|e| bad(&format!("`{key}`: {e}"))))
                .transpose()
        };
        let rule = if let Some(suffix) = text("unencrypted_suffix").filter(|s| !s.is_empty()) {
            Rule::UnencryptedSuffix(suffix)
        } else if let Some(suffix) = text("encrypted_suffix").filter(|s| !s.is_empty()) {
            Rule::EncryptedSuffix(suffix)
        } else if let Some(r) = regex("unencrypted_regex")? {
            Rule::UnencryptedRegex(r)
        } else if let Some(r) = regex("encrypted_regex")? {
            Rule::EncryptedRegex(r)
        } else if ["encrypted_comment_regex", "unencrypted_comment_regex"]
            .iter()
            .any(|k| text(k).is_some_and(|r| !r.is_empty()))
        {
            Rule::ByValueForm
        } else {
            Rule::UnencryptedSuffix("_unencrypted".to_string())
        };
        let mac_only_encrypted = match map.get("mac_only_encrypted") {
            Some(Value::Bool(b)) => *b,
            Some(Value::String(s)) => s == "true",
            _ => false,
        };
        Ok(Metadata {
            lastmodified: text("lastmodified").ok_or_else(|| bad("`lastmodified` is missing"))?,
            mac: text("mac").filter(|m| !m.is_empty()),
            groups,
            shamir_threshold,
            rule,
            mac_only_encrypted,
        })
    }

    fn encrypts(&self, path: &[String], leaf: &Value) -> bool {
        match &self.rule {
            Rule::ByValueForm => leaf.as_str().is_some_and(EncryptedValue::looks_encrypted),
            Rule::UnencryptedSuffix(s) => !path.iter().any(|k| k.ends_with(s.as_str())),
            Rule::EncryptedSuffix(s) => path.iter().any(|k| k.ends_with(s.as_str())),
            Rule::UnencryptedRegex(r) => !path.iter().any(|k| r.is_match(k)),
            Rule::EncryptedRegex(r) => path.iter().any(|k| r.is_match(k)),
        }
    }

    /// The data key: from the first entry of the one key group that `keys` opens, or with
    /// several groups combined from the Shamir shares of those that open.
    pub fn data_key(&self, keys: &Keys) -> Result<[u8; 32], SopsError> {
        let mut parts = Vec::new();
        let mut reasons = Vec::new();
        for (index, group) in self.groups.iter().enumerate() {
            match open_group(group, keys) {
                Ok(part) => parts.push(part),
                Err(group_reasons) => reasons.extend(group_reasons.into_iter().map(|r| {
                    if self.groups.len() > 1 {
                        format!("group {index}: {r}")
                    } else {
                        r
                    }
                })),
            }
        }
        let secret = if self.groups.len() > 1 {
            if parts.len() < self.shamir_threshold.max(2) {
                return Err(SopsError::NotEnoughKeyGroups {
                    required: self.shamir_threshold.max(2),
                    opened: parts.len(),
                    details: reasons.join("; "),
                });
            }
            shamir::combine(&parts).map_err(|e| SopsError::Metadata(e.to_string()))?
        } else if let Some(part) = parts.pop() {
            part
        } else {
            return Err(self.no_matching_key(keys, reasons));
        };
        <[u8; 32]>::try_from(secret.as_slice()).map_err(|_| {
            SopsError::Metadata(format!("the data key has {} bytes, not 32", secret.len()))
        })
    }

    fn no_matching_key(&self, keys: &Keys, reasons: Vec<String>) -> SopsError {
        let stanzas: Vec<&Stanza> = self.groups.iter().flat_map(|g| &g.stanzas).collect();
        // Only a file we cannot open at all for that reason is reported as unsupported;
        // otherwise the missing key is the more useful message.
        if let Some(unsupported) = reasons.iter().find(|r| r.contains("unsupported recipient"))
            && (stanzas.len() == 1 || keys.has_unsupported_age())
        {
            let unsupported = unsupported.trim_start_matches("age: ").to_string();
            return SopsError::UnsupportedRecipient(unsupported);
        }
        let mut counts: Vec<(&str, usize)> = Vec::new();
        for stanza in &stanzas {
            match counts
                .iter_mut()
                .find(|(name, _)| *name == stanza.source_name())
            {
                Some((_, count)) => *count += 1,
                None => counts.push((stanza.source_name(), 1)),
            }
        }
        let recipients = if counts.is_empty() {
            "none".to_string()
        } else {
            counts
                .iter()
                .map(|(name, count)| format!("{count} {name}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        SopsError::NoMatchingKey {
            recipients,
            details: reasons.join("; "),
        }
    }
}

/// The secret one key group wraps, from the first of its entries `keys` opens; else why
/// each entry did not open (entries no key of ours is a recipient of say nothing).
fn open_group(group: &KeyGroup, keys: &Keys) -> Result<Vec<u8>, Vec<String>> {
    let mut reasons = group.invalid.clone();
    for stanza in &group.stanzas {
        match keys.open(stanza) {
            Ok(Some(secret)) => return Ok(secret),
            Ok(None) => {}
            Err(reason) => {
                let key = stanza.key_name();
                reasons.push(if key.is_empty() {
                    format!("{}: {reason}", stanza.source_name())
                } else {
                    format!("{} {key}: {reason}", stanza.source_name())
                });
            }
        }
    }
    Err(reasons)
}

/// Decrypts every encrypted leaf of `branches` and checks the MAC.
pub fn open_branches(
    branches: &mut [Ordered],
    metadata: &Metadata,
    data_key: &[u8; 32],
    verify_mac: bool,
) -> Result<(), SopsError> {
    let mut hasher = Sha512::new();
    if metadata.mac_only_encrypted {
        hasher.update(MAC_ONLY_ENCRYPTED_INIT);
    }
    let mut path = Vec::new();
    for branch in branches.iter_mut() {
        open_ordered(branch, &mut path, metadata, data_key, &mut hasher)?;
    }
    if verify_mac {
        check_mac(metadata, data_key, hasher)?;
    }
    Ok(())
}

/// Decrypts the encrypted leaves of a JSON value whose key order is lost (an object after a
/// kustomize build), so no MAC can be checked.
pub fn open_value(
    value: &mut Value,
    metadata: &Metadata,
    data_key: &[u8; 32],
) -> Result<(), SopsError> {
    fn walk(
        value: &mut Value,
        path: &mut Vec<String>,
        metadata: &Metadata,
        data_key: &[u8; 32],
    ) -> Result<(), SopsError> {
        match value {
            Value::Object(map) => {
                for (key, item) in map.iter_mut() {
                    path.push(key.clone());
                    walk(item, path, metadata, data_key)?;
                    path.pop();
                }
                Ok(())
            }
            Value::Array(items) => items
                .iter_mut()
                .try_for_each(|item| walk(item, path, metadata, data_key)),
            leaf => {
                if !leaf.is_null() && metadata.encrypts(path, leaf) {
                    *leaf = open_leaf(leaf, path, data_key)?.0;
                }
                Ok(())
            }
        }
    }
    walk(value, &mut Vec::new(), metadata, data_key)
}

fn open_ordered(
    node: &mut Ordered,
    path: &mut Vec<String>,
    metadata: &Metadata,
    data_key: &[u8; 32],
    hasher: &mut Sha512,
) -> Result<(), SopsError> {
    match node {
        Ordered::Map(entries) => {
            for (key, item) in entries.iter_mut() {
                path.push(key.clone());
                open_ordered(item, path, metadata, data_key, hasher)?;
                path.pop();
            }
        }
        // List items share their parent's path: SOPS binds values to keys, not indexes.
        Ordered::Seq(items) => {
            for item in items.iter_mut() {
                open_ordered(item, path, metadata, data_key, hasher)?;
            }
        }
        Ordered::Scalar(Value::Null) => {}
        Ordered::Scalar(leaf) => {
            let encrypted = metadata.encrypts(path, leaf);
            if encrypted {
                let (plain, mac_bytes) = open_leaf(leaf, path, data_key)?;
                *leaf = plain;
                hasher.update(mac_bytes);
            } else if !metadata.mac_only_encrypted {
                hasher.update(mac_bytes(leaf));
            }
        }
    }
    Ok(())
}

/// One leaf's plaintext value and the bytes it contributes to the MAC.
fn open_leaf(
    leaf: &Value,
    path: &[String],
    data_key: &[u8; 32],
) -> Result<(Value, Vec<u8>), SopsError> {
    let at = || path.join(".");
    let text = leaf.as_str().ok_or_else(|| SopsError::Value {
        path: at(),
        reason: "expected an encrypted value, found a plain one".to_string(),
    })?;
    // sops leaves empty values as they are: there is nothing to encrypt, nor to hash.
    if text.is_empty() {
        return Ok((Value::String(String::new()), Vec::new()));
    }
    let sealed = EncryptedValue::parse(text).map_err(|e| SopsError::Value {
        path: at(),
        reason: e.to_string(),
    })?;
    let additional_data = format!("{}:", path.join(":"));
    let plaintext = sealed
        .decrypt(data_key, additional_data.as_bytes())
        .map_err(|e| SopsError::Value {
            path: at(),
            reason: e.to_string(),
        })?;
    let wrong_type = || SopsError::Value {
        path: at(),
        reason: format!("decrypted value is not a valid {}", sealed.kind.as_str()),
    };
    let text = String::from_utf8(plaintext).map_err(|_| wrong_type())?;
    let value = match sealed.kind {
        ValueKind::Str | ValueKind::Bytes | ValueKind::Comment => Value::String(text),
        ValueKind::Int => Value::Number(text.parse::<i64>().map_err(|_| wrong_type())?.into()),
        ValueKind::Float => text
            .parse::<f64>()
            .ok()
            .and_then(Number::from_f64)
            .map(Value::Number)
            .ok_or_else(wrong_type)?,
        ValueKind::Bool => Value::Bool(parse_go_bool(&text).ok_or_else(wrong_type)?),
    };
    let bytes = mac_bytes(&value);
    Ok((value, bytes))
}

/// Go's `strconv.ParseBool`.
fn parse_go_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// The bytes SOPS hashes for a plaintext value: strings as is, numbers in decimal without
/// exponent, booleans capitalised (a Python-era convention the format kept).
fn mac_bytes(value: &Value) -> Vec<u8> {
    match value {
        Value::String(s) => s.as_bytes().to_vec(),
        Value::Bool(true) => b"True".to_vec(),
        Value::Bool(false) => b"False".to_vec(),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i.to_string().into_bytes(),
            (_, Some(u), _) => u.to_string().into_bytes(),
            (_, _, Some(f)) => format!("{f}").into_bytes(),
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}

fn check_mac(metadata: &Metadata, data_key: &[u8; 32], hasher: Sha512) -> Result<(), SopsError> {
    let stored = metadata.mac.as_deref().ok_or(SopsError::MacMissing)?;
    let sealed = EncryptedValue::parse(stored).map_err(|_| SopsError::MacMismatch)?;
    let expected = sealed
        .decrypt(data_key, metadata.lastmodified.as_bytes())
        .map_err(|_| SopsError::MacMismatch)?;
    let computed: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect();
    if expected != computed.as_bytes() {
        return Err(SopsError::MacMismatch);
    }
    Ok(())
}

/// Encrypts the leaves of `branches` the way SOPS does and returns the encrypted MAC, so
/// tests can make documents in formats and with value types no shared vector covers.
#[cfg(test)]
pub(super) fn seal_branches(
    branches: &mut [Ordered],
    metadata: &Metadata,
    data_key: &[u8; 32],
) -> String {
    fn walk(
        node: &mut Ordered,
        path: &mut Vec<String>,
        metadata: &Metadata,
        data_key: &[u8; 32],
        hasher: &mut Sha512,
        counter: &mut u8,
    ) {
        match node {
            Ordered::Map(entries) => {
                for (key, item) in entries.iter_mut() {
                    path.push(key.clone());
                    walk(item, path, metadata, data_key, hasher, counter);
                    path.pop();
                }
            }
            Ordered::Seq(items) => items
                .iter_mut()
                .for_each(|i| walk(i, path, metadata, data_key, hasher, counter)),
            Ordered::Scalar(Value::Null) => {}
            Ordered::Scalar(leaf) => {
                let encrypted = metadata.encrypts(path, leaf);
                if encrypted || !metadata.mac_only_encrypted {
                    hasher.update(mac_bytes(leaf));
                }
                if encrypted {
                    let (kind, plain) = match &*leaf {
                        Value::String(s) => (ValueKind::Str, s.clone()),
                        Value::Bool(b) => (ValueKind::Bool, b.to_string()),
                        Value::Number(n) if n.is_f64() => (ValueKind::Float, n.to_string()),
                        Value::Number(n) => (ValueKind::Int, n.to_string()),
                        _ => unreachable!(),
                    };
                    *counter = counter.wrapping_add(1);
                    let aad = format!("{}:", path.join(":"));
                    let sealed = EncryptedValue::encrypt(
                        plain.as_bytes(),
                        kind,
                        data_key,
                        [*counter; 32],
                        aad.as_bytes(),
                    );
                    *leaf = Value::String(sealed.to_string());
                }
            }
        }
    }
    let mut hasher = Sha512::new();
    if metadata.mac_only_encrypted {
        hasher.update(MAC_ONLY_ENCRYPTED_INIT);
    }
    let mut counter = 0;
    for branch in branches.iter_mut() {
        walk(
            branch,
            &mut Vec::new(),
            metadata,
            data_key,
            &mut hasher,
            &mut counter,
        );
    }
    let mac: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect();
    EncryptedValue::encrypt(
        mac.as_bytes(),
        ValueKind::Str,
        data_key,
        [0xAB; 32],
        metadata.lastmodified.as_bytes(),
    )
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mac_bytes_follow_sops() {
        assert_eq!(mac_bytes(&Value::Bool(true)), b"True");
        assert_eq!(mac_bytes(&crate::json!(1.5)), b"1.5");
        assert_eq!(mac_bytes(&crate::json!(2.0)), b"2");
        assert_eq!(mac_bytes(&crate::json!(0.0000001)), b"0.0000001");
        assert_eq!(mac_bytes(&crate::json!(-12)), b"-12");
    }
}
