//! The SOPS value grammar: `ENC[AES256_GCM,data:…,iv:…,tag:…,type:…]`.
//!
//! Each encrypted leaf is AES-256-GCM under the file's data key with a 32-byte IV; the
//! additional data binds it to its place in the tree (the key path joined by `:` plus a
//! trailing `:`), so a value moved to another key no longer authenticates.

use aes_gcm::aead::consts::U32;
use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::aes::Aes256;
use aes_gcm::{AesGcm, Nonce};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;

/// AES-256-GCM with the 32-byte nonce SOPS uses.
type SopsCipher = AesGcm<Aes256, U32>;

const IV_LEN: usize = 32;
const TAG_LEN: usize = 16;

/// What the plaintext of a value is, as recorded in its `type:` field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueKind {
    Str,
    Int,
    Float,
    Bool,
    Bytes,
    Comment,
}

impl ValueKind {
    fn parse(text: &str) -> Option<ValueKind> {
        Some(match text {
            "str" => ValueKind::Str,
            "int" => ValueKind::Int,
            "float" => ValueKind::Float,
            "bool" => ValueKind::Bool,
            "bytes" => ValueKind::Bytes,
            "comment" => ValueKind::Comment,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ValueKind::Str => "str",
            ValueKind::Int => "int",
            ValueKind::Float => "float",
            ValueKind::Bool => "bool",
            ValueKind::Bytes => "bytes",
            ValueKind::Comment => "comment",
        }
    }
}

/// Why a value could not be opened. Never carries plaintext or key material.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    #[error("not an ENC[AES256_GCM,…] value")]
    NotEncrypted,
    #[error("malformed encrypted value: {0}")]
    Malformed(&'static str),
    #[error("unknown value type {0:?}")]
    UnknownKind(String),
    #[error("authentication failed (wrong data key, or the value was modified or moved)")]
    Authentication,
}

/// One parsed `ENC[…]` value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EncryptedValue {
    pub data: Vec<u8>,
    pub iv: Vec<u8>,
    pub tag: Vec<u8>,
    pub kind: ValueKind,
}

impl EncryptedValue {
    /// Whether a string is meant to be an encrypted value (it may still be malformed).
    pub fn looks_encrypted(text: &str) -> bool {
        text.starts_with("ENC[") && text.ends_with(']')
    }

    pub fn parse(text: &str) -> Result<EncryptedValue, ValueError> {
        let inner = text
            .strip_prefix("ENC[")
            .and_then(|t| t.strip_suffix(']'))
            .ok_or(ValueError::NotEncrypted)?;
        let mut fields = inner.split(',');
        if fields.next() != Some("AES256_GCM") {
            return Err(ValueError::Malformed("the cipher must be AES256_GCM"));
        }
        let (mut data, mut iv, mut tag, mut kind) = (None, None, None, None);
        for field in fields {
            let (name, value) = field
                .split_once(':')
                .ok_or(ValueError::Malformed("a field lacks its name"))?;
            let slot = match name {
                "data" => &mut data,
                "iv" => &mut iv,
                "tag" => &mut tag,
                "type" => {
                    kind = Some(
                        ValueKind::parse(value)
                            .ok_or_else(|| ValueError::UnknownKind(value.to_string()))?,
                    );
                    continue;
                }
                _ => return Err(ValueError::Malformed("unknown field")),
            };
            if slot.is_some() {
                return Err(ValueError::Malformed("a field is repeated"));
            }
            *slot = Some(
                STANDARD
                    .decode(value)
                    .map_err(|_| ValueError::Malformed("a field is not valid base64"))?,
            );
        }
        let data = data.ok_or(ValueError::Malformed("missing data"))?;
        let iv = iv.ok_or(ValueError::Malformed("missing iv"))?;
        let tag = tag.ok_or(ValueError::Malformed("missing tag"))?;
        if iv.len() != IV_LEN {
            return Err(ValueError::Malformed("the iv must be 32 bytes"));
        }
        if tag.len() != TAG_LEN {
            return Err(ValueError::Malformed("the tag must be 16 bytes"));
        }
        Ok(EncryptedValue {
            data,
            iv,
            tag,
            // SOPS before 3.0 wrote no type; those values are strings.
            kind: kind.unwrap_or(ValueKind::Str),
        })
    }

    /// The plaintext bytes, authenticated against `additional_data`.
    pub fn decrypt(
        &self,
        data_key: &[u8; 32],
        additional_data: &[u8],
    ) -> Result<Vec<u8>, ValueError> {
        let cipher = SopsCipher::new(data_key.into());
        let mut sealed = Vec::with_capacity(self.data.len() + TAG_LEN);
        sealed.extend_from_slice(&self.data);
        sealed.extend_from_slice(&self.tag);
        let nonce = Nonce::<U32>::try_from(self.iv.as_slice())
            .map_err(|_| ValueError::Malformed("the iv must be 32 bytes"))?;
        cipher
            .decrypt(
                &nonce,
                Payload {
                    msg: &sealed,
                    aad: additional_data,
                },
            )
            .map_err(|_| ValueError::Authentication)
    }

    /// Seals `plaintext`; SOPS draws a fresh random IV per value, callers pass it in.
    pub fn encrypt(
        plaintext: &[u8],
        kind: ValueKind,
        data_key: &[u8; 32],
        iv: [u8; IV_LEN],
        additional_data: &[u8],
    ) -> EncryptedValue {
        let cipher = SopsCipher::new(data_key.into());
        let nonce = Nonce::<U32>::from(iv);
        // Encryption with a valid key and nonce size cannot fail for in-memory buffers.
        let mut sealed = cipher
            .encrypt(
                &nonce,
                Payload {
                    msg: plaintext,
                    aad: additional_data,
                },
            )
            .unwrap_or_default();
        let tag = sealed.split_off(sealed.len().saturating_sub(TAG_LEN));
        EncryptedValue {
            data: sealed,
            iv: iv.to_vec(),
            tag,
            kind,
        }
    }
}

impl std::fmt::Display for EncryptedValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ENC[AES256_GCM,data:{},iv:{},tag:{},type:{}]",
            STANDARD.encode(&self.data),
            STANDARD.encode(&self.iv),
            STANDARD.encode(&self.tag),
            self.kind.as_str()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: [u8; 32] = [7; 32];

    #[test]
    fn round_trips_through_text_and_cipher() {
        // A small deterministic sweep standing in for a property test: every kind, lengths
        // from empty to multi-block, several IVs and paths.
        let kinds = [
            ValueKind::Str,
            ValueKind::Int,
            ValueKind::Float,
            ValueKind::Bool,
            ValueKind::Bytes,
            ValueKind::Comment,
        ];
        for len in [0usize, 1, 15, 16, 17, 100, 1000] {
            for (i, kind) in kinds.iter().enumerate() {
                let plaintext: Vec<u8> = (0..len).map(|b| (b * 31 + i) as u8).collect();
                let iv = [(len + i) as u8; IV_LEN];
                let aad = format!("stringData:k{i}:");
                let sealed = EncryptedValue::encrypt(&plaintext, *kind, &KEY, iv, aad.as_bytes());
                let text = sealed.to_string();
                let parsed = EncryptedValue::parse(&text).unwrap();
                assert_eq!(parsed, sealed);
                assert_eq!(parsed.decrypt(&KEY, aad.as_bytes()).unwrap(), plaintext);
                assert_eq!(
                    parsed.decrypt(&KEY, b"elsewhere:"),
                    Err(ValueError::Authentication),
                    "a value moved to another path must not authenticate"
                );
            }
        }
    }

    #[test]
    fn rejects_malformed_values() {
        let good =
            EncryptedValue::encrypt(b"x", ValueKind::Str, &KEY, [1; IV_LEN], b"a:").to_string();
        assert!(EncryptedValue::parse(&good).is_ok());
        for bad in [
            "plain",
            "ENC[AES128_GCM,data:,iv:,tag:,type:str]",
            "ENC[AES256_GCM,data:@@,iv:AAAA,tag:AAAA,type:str]",
            "ENC[AES256_GCM,data:,iv:AAAA,tag:AAAA,type:str]",
            &good.replace("type:str", "type:list"),
            &good.replace(",tag:", ",tog:"),
        ] {
            assert!(EncryptedValue::parse(bad).is_err(), "{bad}");
        }
        let mut tampered = EncryptedValue::parse(&good).unwrap();
        tampered.tag[0] ^= 1;
        assert_eq!(
            tampered.decrypt(&KEY, b"a:"),
            Err(ValueError::Authentication)
        );
    }
}
