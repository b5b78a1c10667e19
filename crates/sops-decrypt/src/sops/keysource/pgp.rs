//! OpenPGP: secret keys open the armored messages SOPS stores in `pgp` entries.
//!
//! Every data key sops ever wrote opens: Go's x/crypto/openpgp (sops ≤ 3.6) framed its
//! packets in partial body chunks shorter than the 512 bytes OpenPGP requires of the first
//! one, which the `pgp` crate accepts with its `malformed-artifact-compat` feature; the
//! message is still authenticated by its modification detection code.

use super::{KeySource, KeySourceError};
#[cfg(feature = "pgp")]
use super::{MAX_WRAPPED_LEN, checked_secret};

/// A `pgp` entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct PgpEntry {
    /// The armored message (`-----BEGIN PGP MESSAGE-----`).
    pub enc: String,
    /// The recipient key's fingerprint, for messages.
    pub fingerprint: String,
}

/// The OpenPGP secret keys of a decryption.
#[derive(Default)]
pub(crate) struct PgpKeys {
    #[cfg(feature = "pgp")]
    pub keys: Vec<pgp::composed::SignedSecretKey>,
}

impl PgpKeys {
    pub(crate) fn len(&self) -> usize {
        #[cfg(feature = "pgp")]
        return self.keys.len();
        #[cfg(not(feature = "pgp"))]
        0
    }
}

impl KeySource for PgpKeys {
    type Entry = PgpEntry;
    const NAME: &'static str = "OpenPGP";

    #[cfg(feature = "pgp")]
    fn open(&self, entry: &PgpEntry) -> Result<Option<Vec<u8>>, KeySourceError> {
        use pgp::composed::Message;
        use pgp::types::Password;
        if self.keys.is_empty() {
            return Ok(None);
        }
        if entry.enc.len() > 64 << 10 {
            return Err(KeySourceError::Unreadable(format!(
                "the OpenPGP message is {} bytes, more than a data key's ever is",
                entry.enc.len()
            )));
        }
        for key in &self.keys {
            let (message, _) = Message::from_armor(entry.enc.as_bytes())
                .map_err(|e| KeySourceError::Unreadable(format!("invalid OpenPGP message: {e}")))?;
            let Ok(message) = message.decrypt(&Password::empty(), key) else {
                continue;
            };
            let mut message = if message.is_compressed() {
                message.decompress().map_err(|_| {
                    KeySourceError::Unreadable(
                        "the OpenPGP payload could not be decompressed".to_string(),
                    )
                })?
            } else {
                message
            };
            // A data key is 32 bytes; reading more than that would let anyone with the public
            // key make us inflate a compression bomb.
            let mut key = Vec::with_capacity(MAX_WRAPPED_LEN + 1);
            std::io::Read::read_to_end(
                &mut std::io::Read::take(&mut message, MAX_WRAPPED_LEN as u64 + 1),
                &mut key,
            )
            .map_err(|e| {
                KeySourceError::Unreadable(format!("the OpenPGP message could not be read: {e}"))
            })?;
            return checked_secret(key).map(Some);
        }
        Ok(None)
    }

    #[cfg(not(feature = "pgp"))]
    fn open(&self, _entry: &PgpEntry) -> Result<Option<Vec<u8>>, KeySourceError> {
        Err(KeySourceError::NotCompiledIn {
            provider: "OpenPGP",
            feature: "pgp",
        })
    }
}
