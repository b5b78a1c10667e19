//! The ServiceAccount token issuer: TokenRequest tokens are JWTs signed (ES256) with one key
//! per test process, and `/openid/v1/jwks` publishes the key that verifies them, as
//! kube-apiserver publishes its own, so that a relying party (an OpenBao JWT auth mount)
//! can check them as it checks a real cluster's.

use std::sync::OnceLock;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair as _};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The DER of a P-256 SubjectPublicKeyInfo up to its 65-byte uncompressed point.
const P256_SPKI_PREFIX: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

pub struct Issuer {
    key: EcdsaKeyPair,
    rng: SystemRandom,
    /// As kube-apiserver names its keys: base64url of the SHA-256 of the public key's DER.
    kid: String,
}

/// The process's issuer, made on first use.
pub fn issuer() -> &'static Issuer {
    static ISSUER: OnceLock<Issuer> = OnceLock::new();
    ISSUER.get_or_init(|| {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .expect("a P-256 key");
        let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
            .expect("the key just made");
        let spki = [&P256_SPKI_PREFIX[..], key.public_key().as_ref()].concat();
        let kid = URL_SAFE_NO_PAD.encode(Sha256::digest(&spki));
        Issuer { key, rng, kid }
    })
}

impl Issuer {
    /// A signed JWT carrying `claims`.
    pub fn sign(&self, claims: &Value) -> String {
        let header = json!({"alg": "ES256", "kid": self.kid});
        let signed = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let signature = self
            .key
            .sign(&self.rng, signed.as_bytes())
            .expect("ECDSA signs");
        format!("{signed}.{}", URL_SAFE_NO_PAD.encode(signature.as_ref()))
    }

    /// The JSON Web Key Set that verifies the tokens (`/openid/v1/jwks`).
    pub fn jwks(&self) -> Value {
        let point = self.key.public_key().as_ref();
        json!({"keys": [{"use": "sig", "kty": "EC", "kid": self.kid, "crv": "P-256",
            "alg": "ES256", "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
            "y": URL_SAFE_NO_PAD.encode(&point[33..65])}]})
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::signature::{ECDSA_P256_SHA256_FIXED, UnparsedPublicKey};

    #[test]
    fn a_token_verifies_with_the_published_key() {
        let token = issuer().sign(&json!({"sub": "system:serviceaccount:a:b"}));
        let (signed, signature) = token.rsplit_once('.').unwrap();
        let jwk = &issuer().jwks()["keys"][0];
        let coordinate = |name: &str| URL_SAFE_NO_PAD.decode(jwk[name].as_str().unwrap()).unwrap();
        let point = [vec![4], coordinate("x"), coordinate("y")].concat();
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, point)
            .verify(
                signed.as_bytes(),
                &URL_SAFE_NO_PAD.decode(signature).unwrap(),
            )
            .expect("the signature verifies");
        let header: Value = serde_json::from_slice(
            &URL_SAFE_NO_PAD
                .decode(signed.split('.').next().unwrap())
                .unwrap(),
        )
        .unwrap();
        assert_eq!(header["kid"], jwk["kid"]);
    }
}
