//! Certificates for test API servers (the in-process one and envtest's kube-apiserver), made
//! fresh for each server so nothing secret is checked in.

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};

/// The certificates and keys of one test cluster.
pub struct Pki {
    pub ca: String,
    pub serving_cert: String,
    pub serving_key: String,
    pub admin_cert: String,
    pub admin_key: String,
    pub service_account_key: String,
    pub service_account_public: String,
    /// The same CA and serving pair in DER, for rustls and `kube::Config::root_cert`.
    pub ca_der: Vec<u8>,
    pub serving_cert_der: Vec<u8>,
    pub serving_key_der: Vec<u8>,
}

/// A CA, a serving certificate for `localhost` and `127.0.0.1`, an admin client certificate
/// (`system:masters`) and a service-account key pair, all made fresh.
pub fn pki() -> Result<Pki, rcgen::Error> {
    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "kc-test-ca");
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca_params, ca_key);

    let serving_key = KeyPair::generate()?;
    let mut serving =
        CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])?;
    serving
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    let serving_cert = serving.signed_by(&serving_key, &issuer)?;

    let admin_key = KeyPair::generate()?;
    let mut admin = CertificateParams::new(Vec::<String>::new())?;
    admin.distinguished_name.push(DnType::CommonName, "admin");
    admin
        .distinguished_name
        .push(DnType::OrganizationName, "system:masters");
    let admin_cert = admin.signed_by(&admin_key, &issuer)?;

    let service_account = KeyPair::generate()?;
    Ok(Pki {
        ca: ca_cert.pem(),
        serving_cert: serving_cert.pem(),
        serving_key: serving_key.serialize_pem(),
        admin_cert: admin_cert.pem(),
        admin_key: admin_key.serialize_pem(),
        service_account_key: service_account.serialize_pem(),
        service_account_public: service_account.public_key_pem(),
        ca_der: ca_cert.der().to_vec(),
        serving_cert_der: serving_cert.der().to_vec(),
        serving_key_der: serving_key.serialize_der(),
    })
}

impl Pki {
    /// A rustls server configuration serving this PKI's certificate.
    pub fn server_config(&self) -> tokio_rustls::rustls::ServerConfig {
        use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.serving_key_der.clone()));
        tokio_rustls::rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(
                vec![CertificateDer::from(self.serving_cert_der.clone())],
                key,
            )
            .expect("a serving certificate rustls accepts")
    }
}
