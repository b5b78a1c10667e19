//! age: X25519 identities open the armored age files SOPS stores in `age` entries.

use std::io::Read;

use super::{KeySource, KeySourceError, MAX_WRAPPED_LEN, checked_secret};

/// The largest armored age file read: a data key for a handful of recipients takes well
/// under a kilobyte each.
const MAX_ARMORED_BYTES: usize = 64 << 10;
/// The most recipient stanzas read in one age header.
const MAX_STANZAS: usize = 64;

/// An `age` entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct AgeEntry {
    /// The armored age file (`-----BEGIN AGE ENCRYPTED FILE-----`).
    pub enc: String,
}

/// The age identities of a decryption.
#[derive(Default)]
pub(crate) struct AgeIdentities {
    pub identities: Vec<age::x25519::Identity>,
    /// Entries whose identities are of kinds the age crate cannot use (post-quantum
    /// hybrids, plugins).
    pub unsupported: Vec<String>,
}

impl KeySource for AgeIdentities {
    type Entry = AgeEntry;
    const NAME: &'static str = "age";

    fn open(&self, entry: &AgeEntry) -> Result<Option<Vec<u8>>, KeySourceError> {
        // sops writes one recipient per entry; the age crate's work grows with the square of
        // the stanzas in a header, so a hostile header is refused before it is read.
        if entry.enc.len() > MAX_ARMORED_BYTES {
            return Err(KeySourceError::Unreadable(format!(
                "the age file is {} bytes, more than {MAX_ARMORED_BYTES}",
                entry.enc.len()
            )));
        }
        let stanza_types = stanza_types(&entry.enc);
        if stanza_types.len() > MAX_STANZAS {
            return Err(KeySourceError::Unreadable(format!(
                "the age header has {} recipient stanzas, more than {MAX_STANZAS}",
                stanza_types.len()
            )));
        }
        let reader = age::armor::ArmoredReader::new(entry.enc.as_bytes());
        let decryptor = age::Decryptor::new(reader)
            .map_err(|e| KeySourceError::Unreadable(format!("invalid age file: {e}")))?;
        if !stanza_types.is_empty() && stanza_types.iter().all(|t| t != "X25519" && t != "scrypt") {
            return Err(KeySourceError::Unreadable(format!(
                "unsupported recipient type {} (this build opens age X25519 recipients only)",
                stanza_types.join(", ")
            )));
        }
        if self.identities.is_empty() {
            return Ok(None);
        }
        let identities = self.identities.iter().map(|i| i as &dyn age::Identity);
        match decryptor.decrypt(identities) {
            Ok(mut reader) => {
                let mut key = Vec::new();
                reader
                    .by_ref()
                    .take(MAX_WRAPPED_LEN as u64 + 1)
                    .read_to_end(&mut key)
                    .map_err(|e| KeySourceError::Unreadable(format!("age payload: {e}")))?;
                checked_secret(key).map(Some)
            }
            Err(age::DecryptError::NoMatchingKeys) => Ok(None),
            Err(e) => Err(KeySourceError::Unreadable(format!("age: {e}"))),
        }
    }
}

/// The stanza types (`-> TYPE …` lines) of an armored age file's header.
fn stanza_types(armored: &str) -> Vec<String> {
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
