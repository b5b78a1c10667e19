//! The one TLS stack: rustls with ring as its crypto provider.
//!
//! reqwest is built without a provider of its own (its default would bring aws-lc), so every
//! HTTP client — ours, the key services', gix's for remote bases — takes the process-wide
//! provider, which [`use_ring`] installs before the first client is built. kube's client
//! finds ring the same way.

/// A reqwest client builder whose TLS is rustls over ring. The only way to build a client
/// (`clippy.toml` refuses reqwest's own constructors elsewhere).
#[allow(clippy::disallowed_methods)]
pub fn client_builder() -> reqwest::ClientBuilder {
    use_ring();
    reqwest::Client::builder()
}

/// [`client_builder`] for a blocking client.
#[allow(clippy::disallowed_methods)]
pub fn blocking_client_builder() -> reqwest::blocking::ClientBuilder {
    use_ring();
    reqwest::blocking::Client::builder()
}

/// Installs ring as the process's rustls provider, unless one is installed already.
pub fn use_ring() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        // Err only when a provider is installed already, which is as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// Whether `error`, or any error in its chain of causes, is a certificate rustls did not
/// accept (untrusted, expired, for another name), which no second try mends.
pub fn is_invalid_certificate(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(error);
    while let Some(current) = cause {
        // An I/O error's `source` skips the error it wraps (often another I/O error), which is
        // where rustls's sits.
        let mut candidate = Some(current);
        while let Some(error) = candidate {
            if let Some(rustls::Error::InvalidCertificate(_)) =
                error.downcast_ref::<rustls::Error>()
            {
                return true;
            }
            candidate = error
                .downcast_ref::<std::io::Error>()
                .and_then(|io| io.get_ref())
                .map(|inner| inner as &(dyn std::error::Error + 'static));
        }
        cause = current.source();
    }
    false
}

#[cfg(test)]
mod tests {
    #[test]
    fn clients_build_over_ring() {
        super::blocking_client_builder()
            .build()
            .expect("a client without a provider of its own builds");
        super::use_ring();
        let installed = rustls::crypto::CryptoProvider::get_default().expect("installed");
        let ring = rustls::crypto::ring::default_provider();
        let suites = |p: &rustls::crypto::CryptoProvider| -> Vec<_> {
            p.cipher_suites.iter().map(|s| s.suite()).collect()
        };
        let groups = |p: &rustls::crypto::CryptoProvider| -> Vec<_> {
            p.kx_groups.iter().map(|g| g.name()).collect()
        };
        assert_eq!(suites(installed), suites(&ring));
        assert_eq!(groups(installed), groups(&ring));
        // aws-lc's provider offers a post-quantum hybrid group; ring's does not.
        assert!(!groups(installed).contains(&rustls::NamedGroup::X25519MLKEM768));
    }

    /// What the README's "Differences from Flux" says: Go's TLS verifies ECDSA over P-521,
    /// ring does not.
    #[test]
    fn ring_verifies_ecdsa_over_p256_and_p384_only() {
        use rustls::SignatureScheme;
        let schemes = rustls::crypto::ring::default_provider()
            .signature_verification_algorithms
            .supported_schemes();
        assert!(schemes.contains(&SignatureScheme::ECDSA_NISTP256_SHA256));
        assert!(schemes.contains(&SignatureScheme::ECDSA_NISTP384_SHA384));
        assert!(schemes.contains(&SignatureScheme::RSA_PSS_SHA256));
        assert!(!schemes.contains(&SignatureScheme::ECDSA_NISTP521_SHA512));
    }
}
