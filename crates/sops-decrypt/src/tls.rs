//! The one TLS stack: rustls with ring as its crypto provider.
//!
//! reqwest is built without a provider of its own (its default would bring aws-lc), so every
//! HTTP client — ours, the key services', gix's for remote bases — takes the process-wide
//! provider, which [`use_ring`] installs before the first client is built. kube's client
//! finds ring the same way.

/// Installs ring as the process's rustls provider, unless one is installed already.
pub fn use_ring() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        // Err only when a provider is installed already, which is as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

#[cfg(test)]
mod tests {
    #[test]
    fn clients_build_over_ring() {
        super::use_ring();
        super::use_ring();
        let provider = rustls::crypto::CryptoProvider::get_default().expect("installed");
        assert!(
            provider
                .cipher_suites
                .iter()
                .any(|suite| suite.suite() == rustls::CipherSuite::TLS13_AES_128_GCM_SHA256)
        );
        reqwest::blocking::Client::builder()
            .build()
            .expect("a client without a provider of its own builds");
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
