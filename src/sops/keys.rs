//! Private keys that open a file's data key: age X25519 identities and OpenPGP secret keys.
//!
//! Keys come from the user (a key file, or entries of the decryption Secret named `*.agekey`
//! and `*.asc`). Key material never appears in errors or logs; errors name the entry only.

use std::io::Read;

/// The largest data key SOPS produces; anything else in a recipient stanza is refused.
const DATA_KEY_LEN: usize = 32;

/// A key entry that could not be read. Names the entry, never its content.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("{entry}: line {line} is not an age identity (expected AGE-SECRET-KEY-1…)")]
    InvalidAgeIdentity { entry: String, line: usize },
    #[error("{entry}: not an ASCII-armored OpenPGP secret key: {reason}")]
    InvalidPgpKey { entry: String, reason: String },
    #[error("{entry}: no age identity or OpenPGP secret key found")]
    Empty { entry: String },
    #[error("{entry}: OpenPGP keys are not supported by this build (feature `pgp` is off)")]
    PgpDisabled { entry: String },
}

/// The private keys available for one decryption.
#[derive(Default)]
pub struct Keys {
    age: Vec<age::x25519::Identity>,
    /// Identities of kinds the age crate cannot use (post-quantum hybrids), by entry name.
    unsupported_age: Vec<String>,
    #[cfg(feature = "pgp")]
    pgp: Vec<pgp::composed::SignedSecretKey>,
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keys")
            .field("age", &self.age.len())
            .field("pgp", &self.pgp_count())
            .finish()
    }
}

impl Keys {
    pub fn new() -> Keys {
        Keys::default()
    }

    pub fn is_empty(&self) -> bool {
        self.age.is_empty() && self.pgp_count() == 0 && self.unsupported_age.is_empty()
    }

    fn pgp_count(&self) -> usize {
        #[cfg(feature = "pgp")]
        return self.pgp.len();
        #[cfg(not(feature = "pgp"))]
        0
    }

    /// Adds a key entry, recognised by content: an armored OpenPGP secret key or age
    /// identities (one per line, `#` comments allowed). `entry` names it in errors.
    pub fn add(&mut self, entry: &str, content: &[u8]) -> Result<(), KeyError> {
        let text = String::from_utf8_lossy(content);
        if text.contains("-----BEGIN PGP PRIVATE KEY BLOCK-----") {
            return self.add_pgp(entry, &text);
        }
        let before = self.age.len() + self.unsupported_age.len();
        self.add_age(entry, &text)?;
        if self.age.len() + self.unsupported_age.len() == before {
            return Err(KeyError::Empty {
                entry: entry.to_string(),
            });
        }
        Ok(())
    }

    /// Adds the age identities of an identity file.
    pub fn add_age(&mut self, entry: &str, text: &str) -> Result<(), KeyError> {
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if line.starts_with("AGE-SECRET-KEY-PQ-") || line.starts_with("AGE-PLUGIN-") {
                self.unsupported_age.push(entry.to_string());
                continue;
            }
            let identity = line.parse::<age::x25519::Identity>().map_err(|_| {
                KeyError::InvalidAgeIdentity {
                    entry: entry.to_string(),
                    line: number + 1,
                }
            })?;
            self.age.push(identity);
        }
        Ok(())
    }

    /// Adds every secret key of an armored OpenPGP key block.
    #[cfg(feature = "pgp")]
    pub fn add_pgp(&mut self, entry: &str, text: &str) -> Result<(), KeyError> {
        use pgp::composed::{Deserializable, SignedSecretKey};
        let invalid = |reason: String| KeyError::InvalidPgpKey {
            entry: entry.to_string(),
            reason,
        };
        let (keys, _) = SignedSecretKey::from_armor_many(text.as_bytes())
            .map_err(|e| invalid(e.to_string()))?;
        let before = self.pgp.len();
        for key in keys {
            self.pgp.push(key.map_err(|e| invalid(e.to_string()))?);
        }
        if self.pgp.len() == before {
            return Err(KeyError::Empty {
                entry: entry.to_string(),
            });
        }
        Ok(())
    }

    #[cfg(not(feature = "pgp"))]
    pub fn add_pgp(&mut self, entry: &str, _text: &str) -> Result<(), KeyError> {
        Err(KeyError::PgpDisabled {
            entry: entry.to_string(),
        })
    }

    /// Opens an armored age file holding a data key. `Ok(None)`: none of our identities is a
    /// recipient. `Err`: a reason worth reporting (malformed stanza, unsupported type).
    pub(super) fn open_age(&self, armored: &str) -> Result<Option<[u8; 32]>, String> {
        let reader = age::armor::ArmoredReader::new(armored.as_bytes());
        let decryptor =
            age::Decryptor::new(reader).map_err(|e| format!("invalid age file: {e}"))?;
        let stanza_types = age_stanza_types(armored);
        if !stanza_types.is_empty() && stanza_types.iter().all(|t| t != "X25519" && t != "scrypt") {
            return Err(format!(
                "unsupported recipient type {} (this build opens age X25519 recipients only)",
                stanza_types.join(", ")
            ));
        }
        if self.age.is_empty() {
            return Ok(None);
        }
        let identities = self.age.iter().map(|i| i as &dyn age::Identity);
        match decryptor.decrypt(identities) {
            Ok(mut reader) => {
                let mut key = Vec::new();
                reader
                    .by_ref()
                    .take(DATA_KEY_LEN as u64 + 1)
                    .read_to_end(&mut key)
                    .map_err(|e| format!("age payload: {e}"))?;
                data_key(key).map(Some)
            }
            Err(age::DecryptError::NoMatchingKeys) => Ok(None),
            Err(e) => Err(format!("age: {e}")),
        }
    }

    /// Opens an armored OpenPGP message holding a data key, like `open_age`.
    #[cfg(feature = "pgp")]
    pub(super) fn open_pgp(&self, armored: &str) -> Result<Option<[u8; 32]>, String> {
        use pgp::composed::Message;
        use pgp::types::Password;
        if self.pgp.is_empty() {
            return Ok(None);
        }
        for key in &self.pgp {
            let (message, _) = Message::from_armor(armored.as_bytes())
                .map_err(|e| format!("invalid OpenPGP message: {e}"))?;
            let Ok(message) = message.decrypt(&Password::empty(), key) else {
                continue;
            };
            let mut message = if message.is_compressed() {
                message
                    .decompress()
                    .map_err(|_| "the OpenPGP payload could not be decompressed".to_string())?
            } else {
                message
            };
            // A data key is 32 bytes; reading more than that would let anyone with the public
            // key make us inflate a compression bomb.
            let mut key = Vec::with_capacity(33);
            std::io::Read::read_to_end(&mut std::io::Read::take(&mut message, 33), &mut key)
                .map_err(|_| "the OpenPGP payload could not be read".to_string())?;
            return data_key(key).map(Some);
        }
        Ok(None)
    }

    #[cfg(not(feature = "pgp"))]
    pub(super) fn open_pgp(&self, _armored: &str) -> Result<Option<[u8; 32]>, String> {
        Err("OpenPGP support is not compiled in (feature `pgp`)".to_string())
    }

    /// Whether post-quantum or plugin identities were given that this build cannot use.
    pub(super) fn has_unsupported_age(&self) -> bool {
        !self.unsupported_age.is_empty()
    }
}

fn data_key(bytes: Vec<u8>) -> Result<[u8; 32], String> {
    <[u8; 32]>::try_from(bytes.as_slice())
        .map_err(|_| format!("the data key must be {DATA_KEY_LEN} bytes"))
}

/// The stanza types (`-> TYPE …` lines) of an armored age file's header.
fn age_stanza_types(armored: &str) -> Vec<String> {
    use base64::Engine;
    let body: String = armored
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .map(str::trim)
        .collect();
    let Ok(binary) = base64::engine::general_purpose::STANDARD.decode(body) else {
        return Vec::new();
    };
    let header_end = binary
        .windows(4)
        .position(|w| w == b"\n---")
        .unwrap_or(binary.len());
    String::from_utf8_lossy(&binary[..header_end])
        .lines()
        .filter_map(|l| l.strip_prefix("-> "))
        .filter_map(|l| l.split(' ').next())
        .map(str::to_string)
        .collect()
}
