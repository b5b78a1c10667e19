//! SOPS data keys from every source sops writes them with, against real tools and servers:
//! the files sops itself wrote from 3.3 to 3.13 (`tests/fixtures/sops/getsops`), GnuPG,
//! Shamir key groups, OpenBao's transit engine, moto's AWS KMS and STS, and loopback
//! servers that answer as Google's and Azure's documented endpoints and check each request.

use std::path::PathBuf;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use kustomize_controller::sops::{self, Format, Keys, SopsError};
use kustomize_controller::yaml::{Schema, parse_single};
use serde_json::{Value, json};

use crate::support::key_services::{Gpg, MockServer, moto, openbao};
use crate::support::repo_root;

fn getsops(relative: &str) -> PathBuf {
    repo_root()
        .join("tests/fixtures/sops/getsops")
        .join(relative)
}

const FBC7: &str = "FBC7B9E2A4F9289AC0C1D4843D16CEE4A27381B4";
const D722: &str = "D7229043384BCC60326C6FB9D8720D957C3D3074";
/// A file sealed by sops 3.13.1 (`foo: bar`), whose data key the tests rewrap.
const SEALED: &str = "functional-tests/res/format.enc.yaml";

fn sops_test_keys() -> Keys {
    let mut keys = Keys::new();
    let key = getsops("pgp/sops_functional_tests_key.asc");
    keys.add(
        "sops_functional_tests_key.asc",
        &std::fs::read(key).unwrap(),
    )
    .unwrap();
    keys
}

/// GnuPG with sops's test keys, and the data key of [`SEALED`] as GnuPG opens it.
pub(crate) fn gpg_and_data_key() -> (Gpg, Vec<u8>) {
    let gpg = Gpg::new();
    gpg.import(&getsops("pgp/sops_functional_tests_key.asc"));
    let metadata = sops_metadata(&std::fs::read_to_string(getsops(SEALED)).unwrap());
    let data_key = gpg.decrypt(metadata["pgp"][0]["enc"].as_str().unwrap());
    assert_eq!(data_key.len(), 32);
    (gpg, data_key)
}

fn sops_metadata(text: &str) -> Value {
    parse_single(text, Schema::Kyaml).unwrap()["sops"]
        .clone()
        .into()
}

/// [`SEALED`] with its `sops` metadata rewritten by `edit` (values and MAC untouched: they
/// depend only on the data key).
pub(crate) fn sealed_with(edit: impl FnOnce(&mut serde_json::Map<String, Value>)) -> String {
    let text = std::fs::read_to_string(getsops(SEALED)).unwrap();
    let mut metadata = sops_metadata(&text);
    let map = metadata.as_object_mut().unwrap();
    map.remove("pgp");
    edit(map);
    let data = &text[..text.find("\nsops:").unwrap() + 1];
    // JSON is YAML: the metadata goes in as one flow mapping.
    format!("{data}sops: {metadata}\n")
}

pub(crate) fn decrypt_sealed(text: &str, keys: &Keys) -> Result<String, SopsError> {
    sops::decrypt(text.as_bytes(), Format::Yaml, keys).map(|p| String::from_utf8(p).unwrap())
}

#[test]
fn every_file_sops_wrote_from_3_3_to_3_13_opens_with_its_mac_checked() {
    let keys = sops_test_keys();
    let files = [
        ("example.yaml", Format::Yaml),
        ("example.json", Format::Json),
        ("example.ini", Format::Ini),
        ("example.txt", Format::Binary),
        ("examples/all_in_one/config/secret.enc.json", Format::Json),
        (
            "examples/per_file/config.enc/static_github.json",
            Format::Json,
        ),
        ("functional-tests/res/comments.enc.yaml", Format::Yaml),
        (
            "functional-tests/res/comments_unencrypted_comments.yaml",
            Format::Yaml,
        ),
        ("functional-tests/res/multiple_keys.yaml", Format::Yaml),
        ("functional-tests/res/format.enc.yaml", Format::Yaml),
        ("functional-tests/res/format.enc.json", Format::Json),
        ("functional-tests/res/format.enc.ini", Format::Ini),
        ("functional-tests/res/format-2.enc.ini", Format::Ini),
        ("functional-tests/res/format.enc.env", Format::Dotenv),
    ];
    for (file, format) in files {
        let content = std::fs::read(getsops(file)).unwrap();
        let plain =
            sops::decrypt(&content, format, &keys).unwrap_or_else(|e| panic!("{file}: {e}"));
        let plain = String::from_utf8(plain).unwrap();
        assert!(!plain.contains("ENC["), "{file}: {plain}");
    }
    // Known plaintexts, as sops's own functional tests and README give them.
    let plain = |file: &str, format| {
        String::from_utf8(
            sops::decrypt(&std::fs::read(getsops(file)).unwrap(), format, &keys).unwrap(),
        )
        .unwrap()
    };
    assert!(plain(SEALED, Format::Yaml).starts_with("foo: bar"));
    assert!(plain("example.yaml", Format::Yaml).starts_with("myapp1: t00m4nys3cr3tzupdated\n"));
    assert!(plain("example.json", Format::Json).contains("\"anEmptyValue\": \"\""));
    assert!(plain("functional-tests/res/format-2.enc.ini", Format::Ini).contains("bar"));
    // A file without a MAC opens only where the MAC is not checked (Flux's controller).
    let no_mac = std::fs::read(getsops("functional-tests/res/no_mac.yaml")).unwrap();
    assert_eq!(
        sops::decrypt(&no_mac, Format::Yaml, &keys),
        Err(SopsError::MacMissing)
    );
    sops::decrypt_with(&no_mac, Format::Yaml, &keys, false).unwrap();
}

/// The armored message with one byte of its last packet flipped.
fn tampered(armored: &str, from_end: usize) -> String {
    let body: String = armored
        .lines()
        .skip_while(|l| !l.is_empty())
        .filter(|l| !l.is_empty() && !l.starts_with('=') && !l.starts_with("-----"))
        .collect();
    let mut bytes = STANDARD.decode(body).unwrap();
    let at = bytes.len() - from_end;
    bytes[at] ^= 0x01;
    let encoded = STANDARD.encode(&bytes);
    let lines: Vec<&str> = encoded
        .as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    format!(
        "-----BEGIN PGP MESSAGE-----\n\n{}\n-----END PGP MESSAGE-----\n",
        lines.join("\n")
    )
}

#[test]
fn old_short_chunk_messages_are_still_authenticated() {
    let keys = sops_test_keys();
    // sops 3.5's x/crypto messages end with the modification detection code and a final
    // empty chunk: the byte before that chunk is the MDC's last.
    let text = std::fs::read_to_string(getsops("example.json")).unwrap();
    let metadata: Value = serde_json::from_str(&text).unwrap();
    for (from_end, what) in [(2, "the modification detection code"), (30, "the data key")] {
        let mut tampered_file: Value = serde_json::from_str(&text).unwrap();
        for entry in tampered_file["sops"]["pgp"].as_array_mut().unwrap() {
            let enc = entry["enc"].as_str().unwrap().to_string();
            entry["enc"] = json!(tampered(&enc, from_end));
        }
        let result = sops::decrypt(tampered_file.to_string().as_bytes(), Format::Json, &keys);
        assert!(
            matches!(result, Err(SopsError::NoMatchingKey { .. })),
            "a message with {what} changed opened: {result:?}"
        );
    }
    assert!(metadata["sops"]["pgp"].as_array().unwrap().len() == 2);
}

/// Shares of `secret` over GF(2^8) (AES polynomial) at x = 1, 2, …, laid out as sops lays
/// them out (y bytes, then x), from Shamir's scheme as sops documents it.
fn shamir_split(secret: &[u8], coefficients: &[u8], parts: u8) -> Vec<Vec<u8>> {
    fn mul(mut a: u8, mut b: u8) -> u8 {
        let mut product = 0;
        while b != 0 {
            if b & 1 != 0 {
                product ^= a;
            }
            a = (a << 1) ^ if a & 0x80 != 0 { 0x1b } else { 0 };
            b >>= 1;
        }
        product
    }
    (1..=parts)
        .map(|x| {
            let mut share: Vec<u8> = secret
                .iter()
                .map(|&byte| {
                    let high = coefficients.iter().rev().fold(0, |acc, &c| mul(acc, x) ^ c);
                    mul(high, x) ^ byte
                })
                .collect();
            share.push(x);
            share
        })
        .collect()
}

#[test]
fn shamir_key_groups_open_with_enough_groups_and_name_what_is_missing() {
    let (gpg, data_key) = gpg_and_data_key();
    // Three groups, any two of which open the key: FBC7, D722, and an age recipient nobody
    // here holds.
    let shares = shamir_split(&data_key, &[0x5c], 3);
    let pgp_group = |fingerprint: &str, share: &[u8]| {
        json!({"pgp": [{"created_at": "2026-11-25T00:00:00Z", "fp": fingerprint,
                        "enc": gpg.encrypt(fingerprint, share)}]})
    };
    let file = sealed_with(|sops| {
        sops.insert(
            "key_groups".into(),
            json!([
                pgp_group(FBC7, &shares[0]),
                pgp_group(D722, &shares[1]),
                {"age": [{"recipient": "age1l44xcng8dqj32nlv6d930qvvrny05hglzcv9qpc7kxjc6902ma4qufys29",
                          "enc": "-----BEGIN AGE ENCRYPTED FILE-----\nYWdlLWVuY3J5cHRpb24ub3JnL3YxCg==\n-----END AGE ENCRYPTED FILE-----\n"}]}
            ]),
        );
        sops.insert("shamir_threshold".into(), json!(2));
    });
    let with = |fingerprints: &[&str]| {
        let mut keys = Keys::new();
        for fingerprint in fingerprints {
            keys.add_entry(
                &format!("{fingerprint}.asc"),
                &gpg.export_secret_key(fingerprint),
            )
            .unwrap();
        }
        keys
    };
    assert!(
        decrypt_sealed(&file, &with(&[FBC7, D722]))
            .unwrap()
            .starts_with("foo: bar")
    );
    let error = decrypt_sealed(&file, &with(&[D722])).unwrap_err();
    assert!(
        matches!(
            error,
            SopsError::NotEnoughKeyGroups {
                required: 2,
                opened: 1,
                ..
            }
        ),
        "{error}"
    );
    assert!(
        error.to_string().contains("2 key groups must open"),
        "{error}"
    );
    // INI and dotenv files carry the threshold as text.
    let threshold_as_text = sealed_with(|sops| {
        sops.insert(
            "key_groups".into(),
            json!([pgp_group(FBC7, &shares[0]), pgp_group(D722, &shares[1])]),
        );
        sops.insert("shamir_threshold".into(), json!("2"));
    });
    assert!(decrypt_sealed(&threshold_as_text, &with(&[FBC7, D722])).is_ok());
}

#[test]
fn vault_transit_keys_open_with_the_secret_token_or_the_environment() {
    let (_gpg, data_key) = gpg_and_data_key();
    let bao = openbao();
    let ciphertext = bao.transit_encrypt("sops/transit", "flux", &data_key);
    assert!(ciphertext.starts_with("vault:v1:"));
    let file = sealed_with(|sops| {
        sops.insert(
            "hc_vault".into(),
            json!([{"vault_address": bao.url, "engine_path": "sops/transit", "key_name": "flux",
                    "created_at": "2026-11-25T00:00:00Z", "enc": ciphertext}]),
        );
    });
    let mut keys = Keys::new();
    keys.add_entry("sops.vault-token", b"root\n").unwrap();
    assert!(
        decrypt_sealed(&file, &keys)
            .unwrap()
            .starts_with("foo: bar")
    );
    let mut from_environment = Keys::new();
    from_environment.add_environment([
        ("VAULT_TOKEN".to_string(), "root".to_string()),
        ("VAULT_ADDR".to_string(), bao.url.clone()),
    ]);
    assert!(decrypt_sealed(&file, &from_environment).is_ok());
    // The controller's own token goes to its own Vault only, whatever a file names.
    for address in [None, Some("https://vault.elsewhere.example:8200")] {
        let mut elsewhere = Keys::new();
        elsewhere.add_environment(
            std::iter::once(("VAULT_TOKEN".to_string(), "root".to_string()))
                .chain(address.map(|a| ("VAULT_ADDR".to_string(), a.to_string()))),
        );
        let error = decrypt_sealed(&file, &elsewhere).unwrap_err().to_string();
        assert!(error.contains("sent only to VAULT_ADDR"), "{error}");
    }

    let mut wrong = Keys::new();
    wrong
        .add_entry("sops.vault-token", b"not-the-token")
        .unwrap();
    let error = decrypt_sealed(&file, &wrong).unwrap_err().to_string();
    assert!(error.contains("HashiCorp Vault"), "{error}");
    assert!(error.contains("/v1/sops/transit/keys/flux"), "{error}");
    assert!(error.contains("permission denied"), "{error}");
    assert!(!error.contains("not-the-token"), "{error}");
    let error = decrypt_sealed(&file, &Keys::new()).unwrap_err().to_string();
    assert!(error.contains("sops.vault-token"), "{error}");
    // One group with several key types: the one whose key is at hand opens it.
    let original = sops_metadata(&std::fs::read_to_string(getsops(SEALED)).unwrap());
    let mixed = sealed_with(|sops| {
        sops.insert(
            "hc_vault".into(),
            json!([{"vault_address": bao.url, "engine_path": "sops/transit", "key_name": "flux",
                    "created_at": "2026-11-25T00:00:00Z", "enc": ciphertext}]),
        );
        sops.insert("pgp".into(), original["pgp"].clone());
    });
    assert!(decrypt_sealed(&mixed, &sops_test_keys()).is_ok());
    assert!(decrypt_sealed(&mixed, &from_environment).is_ok());
}

pub(crate) fn kms_call(server: &str, target: &str, body: Value) -> Value {
    let answer = kustomize_controller::tls::blocking_client_builder()
        .build()
        .unwrap()
        .post(format!("{server}/"))
        .header("Content-Type", "application/x-amz-json-1.1")
        .header("X-Amz-Target", format!("TrentService.{target}"))
        .header(
            "Authorization",
            "AWS4-HMAC-SHA256 Credential=AKIDTEST/20261125/us-east-1/kms/aws4_request, \
             SignedHeaders=host, Signature=0",
        )
        .json(&body)
        .send()
        .unwrap();
    let status = answer.status();
    let text = answer.text().unwrap();
    assert!(status.is_success(), "{target}: {status} {text}");
    serde_json::from_str(&text).unwrap()
}

#[cfg(feature = "aws-kms")]
#[test]
fn aws_kms_keys_open_with_signed_requests_roles_and_encryption_contexts() {
    let (_gpg, data_key) = gpg_and_data_key();
    let moto = moto();
    let arn = kms_call(&moto.url, "CreateKey", json!({}))["KeyMetadata"]["Arn"]
        .as_str()
        .unwrap()
        .to_string();
    let context = json!({"app": "podinfo", "env": "test"});
    let blob = kms_call(
        &moto.url,
        "Encrypt",
        json!({"KeyId": arn, "Plaintext": STANDARD.encode(&data_key), "EncryptionContext": context}),
    )["CiphertextBlob"]
        .as_str()
        .unwrap()
        .to_string();
    let file_with = |role: &str, context: Value| {
        sealed_with(|sops| {
            sops.insert(
                "kms".into(),
                json!([{"arn": arn, "role": role, "context": context,
                        "created_at": "2026-11-25T00:00:00Z", "enc": blob, "aws_profile": ""}]),
            );
        })
    };
    let keys = || {
        let mut keys = Keys::new();
        keys.add_entry(
            "sops.aws-kms",
            b"aws_access_key_id: AKIDTEST\naws_secret_access_key: secret-key-never-shown\n",
        )
        .unwrap();
        keys.add_environment([("AWS_ENDPOINT_URL".to_string(), moto.url.clone())]);
        keys
    };
    assert!(
        decrypt_sealed(&file_with("", context.clone()), &keys())
            .unwrap()
            .starts_with("foo: bar")
    );
    // A role is assumed through STS first, and its temporary credentials decrypt.
    let with_role = file_with(
        "arn:aws:iam::123456789012:role/sops-decrypt",
        context.clone(),
    );
    assert!(decrypt_sealed(&with_role, &keys()).is_ok());
    // The controller's own credentials, from its environment, when no entry gives any.
    let mut from_environment = Keys::new();
    from_environment.add_environment([
        ("AWS_ACCESS_KEY_ID".to_string(), "AKIDENV".to_string()),
        (
            "AWS_SECRET_ACCESS_KEY".to_string(),
            "env-secret".to_string(),
        ),
        ("AWS_ENDPOINT_URL_KMS".to_string(), moto.url.clone()),
    ]);
    assert!(decrypt_sealed(&file_with("", context.clone()), &from_environment).is_ok());
    // EKS's IAM roles for service accounts: the projected token, exchanged through STS.
    let token_dir = tempfile::tempdir().unwrap();
    let token_file = token_dir.path().join("token");
    std::fs::write(
        &token_file,
        "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW0ifQ.c2ln\n",
    )
    .unwrap();
    let mut web_identity = Keys::new();
    web_identity.add_environment([
        (
            "AWS_ROLE_ARN".to_string(),
            "arn:aws:iam::123456789012:role/kustomize-controller".to_string(),
        ),
        (
            "AWS_WEB_IDENTITY_TOKEN_FILE".to_string(),
            token_file.display().to_string(),
        ),
        ("AWS_ENDPOINT_URL".to_string(), moto.url.clone()),
    ]);
    assert!(decrypt_sealed(&file_with("", context), &web_identity).is_ok());
    // The context is part of what KMS authenticates.
    let error = decrypt_sealed(&file_with("", json!({"app": "other"})), &keys())
        .unwrap_err()
        .to_string();
    assert!(error.contains("AWS KMS"), "{error}");
    assert!(error.contains(&arn), "{error}");
    assert!(!error.contains("secret-key-never-shown"), "{error}");
    let error = decrypt_sealed(&file_with("", json!({})), &Keys::new())
        .unwrap_err()
        .to_string();
    assert!(error.contains("sops.aws-kms"), "{error}");

    // What goes over the wire (moto does not check signatures): KMS's JSON 1.1 protocol,
    // signed with SigV4 for the key's region, temporary credentials' token included.
    let expected_key = data_key.clone();
    let recorder = MockServer::start(move |_| {
        (
            200,
            json!({"Plaintext": STANDARD.encode(&expected_key), "KeyId": "k"}),
        )
    });
    let mut keys = Keys::new();
    keys.add_entry(
        "sops.aws-kms",
        b"aws_access_key_id: AKIDTEST\naws_secret_access_key: s\naws_session_token: session-token\n",
    )
    .unwrap();
    keys.add_environment([("AWS_ENDPOINT_URL_KMS".to_string(), recorder.url.clone())]);
    assert!(decrypt_sealed(&file_with("", json!({"app": "podinfo"})), &keys).is_ok());
    let request = &recorder.requests()[0];
    assert_eq!(request.method, "POST");
    assert_eq!(request.header("x-amz-target"), Some("TrentService.Decrypt"));
    assert_eq!(
        request.header("content-type"),
        Some("application/x-amz-json-1.1")
    );
    assert_eq!(
        request.header("x-amz-security-token"),
        Some("session-token")
    );
    assert!(request.header("x-amz-date").is_some());
    let authorization = request.header("authorization").unwrap();
    assert!(
        authorization.starts_with("AWS4-HMAC-SHA256 Credential=AKIDTEST/")
            && authorization.contains("/us-east-1/kms/aws4_request")
            && authorization.contains("x-amz-target")
            && authorization.contains("Signature="),
        "{authorization}"
    );
    assert_eq!(
        request.json(),
        json!({"CiphertextBlob": blob, "EncryptionContext": {"app": "podinfo"}, "KeyId": arn})
    );
}

/// The key "wrapped" by the loopback services: reversible, and not the key itself.
pub(crate) fn wrap(data_key: &[u8]) -> Vec<u8> {
    data_key.iter().rev().map(|b| b ^ 0xa5).collect()
}

#[cfg(feature = "gcp-kms")]
#[test]
fn gcp_kms_keys_open_with_a_service_account_token_as_google_documents_it() {
    use rsa::pkcs1v15::{Signature, VerifyingKey};
    use rsa::pkcs8::DecodePrivateKey;
    use rsa::signature::Verifier;
    let (_gpg, data_key) = gpg_and_data_key();
    let account_file =
        repo_root().join("tests/fixtures/sops/key-services/gcp-service-account.json");
    let mut account: Value = serde_json::from_slice(&std::fs::read(account_file).unwrap()).unwrap();
    let private_key =
        rsa::RsaPrivateKey::from_pkcs8_pem(account["private_key"].as_str().unwrap()).unwrap();
    let verifying = VerifyingKey::<sha2::Sha256>::new(private_key.to_public_key());
    let resource = "projects/kc-tests/locations/global/keyRings/flux/cryptoKeys/sops";
    let expected_key = data_key.clone();
    let token_path = "/token";
    let server = MockServer::start(move |request| {
        if request.path == token_path
            && request.form_field("grant_type").as_deref() == Some("refresh_token")
        {
            // An authorized user's refresh token (Google's OAuth 2.0 for installed apps).
            let form = |name| request.form_field(name);
            let fine = form("client_id").as_deref()
                == Some("user-client.apps.googleusercontent.com")
                && form("client_secret").as_deref() == Some("user-secret")
                && form("refresh_token").as_deref() == Some("1//refresh");
            return if fine {
                (
                    200,
                    json!({"access_token": "ya29.loopback", "expires_in": 3599, "token_type": "Bearer"}),
                )
            } else {
                (
                    400,
                    json!({"error": "invalid_grant", "error_description": "Bad Request"}),
                )
            };
        }
        if request.path == token_path {
            // RFC 7523 as Google's server-to-server OAuth documents it.
            let fine = request.method == "POST"
                && request.form_field("grant_type").as_deref()
                    == Some("urn:ietf:params:oauth:grant-type:jwt-bearer");
            let Some(assertion) = request.form_field("assertion").filter(|_| fine) else {
                return (400, json!({"error": "invalid_grant"}));
            };
            let parts: Vec<&str> = assertion.split('.').collect();
            let decode = |part: &str| -> Value {
                serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part).unwrap()).unwrap()
            };
            let (header, claims) = (decode(parts[0]), decode(parts[1]));
            let signature =
                Signature::try_from(URL_SAFE_NO_PAD.decode(parts[2]).unwrap().as_slice()).unwrap();
            let signed = format!("{}.{}", parts[0], parts[1]);
            let valid = verifying.verify(signed.as_bytes(), &signature).is_ok()
                && header["alg"] == "RS256"
                && header["kid"] == "0123456789abcdef0123456789abcdef01234567"
                && claims["iss"]
                    == "sops-decrypter@kustomize-controller-tests.iam.gserviceaccount.com"
                && claims["scope"] == "https://www.googleapis.com/auth/cloudkms"
                && claims["aud"]
                    .as_str()
                    .is_some_and(|a| a.ends_with("/token"))
                && claims["exp"].as_u64().unwrap() - claims["iat"].as_u64().unwrap() == 3600;
            if !valid {
                return (
                    400,
                    json!({"error": "invalid_grant", "error_description": "bad JWT"}),
                );
            }
            return (
                200,
                json!({"access_token": "ya29.loopback", "expires_in": 3599, "token_type": "Bearer"}),
            );
        }
        if request.path != format!("/v1/{resource}:decrypt") || request.method != "POST" {
            return (404, json!({"error": {"code": 404, "message": "not found"}}));
        }
        if request.header("authorization") != Some("Bearer ya29.loopback") {
            return (
                401,
                json!({"error": {"code": 401, "message": "Request had invalid authentication credentials."}}),
            );
        }
        let ciphertext = STANDARD
            .decode(request.json()["ciphertext"].as_str().unwrap_or_default())
            .unwrap_or_default();
        if ciphertext != wrap(&expected_key) {
            return (
                400,
                json!({"error": {"code": 400, "message": "Decryption failed: the ciphertext is invalid."}}),
            );
        }
        (200, json!({"plaintext": STANDARD.encode(&expected_key)}))
    });
    account["token_uri"] = json!(format!("{}/token", server.url));
    let file = |enc: &[u8]| {
        sealed_with(|sops| {
            sops.insert(
                "gcp_kms".into(),
                json!([{"resource_id": resource, "created_at": "2026-11-25T00:00:00Z",
                        "enc": STANDARD.encode(enc)}]),
            );
        })
    };
    let mut keys = Keys::new();
    keys.add_entry("sops.gcp-kms", account.to_string().as_bytes())
        .unwrap();
    keys.add_environment([("SOPS_GCP_KMS_ENDPOINT".to_string(), server.url.clone())]);
    assert!(
        decrypt_sealed(&file(&wrap(&data_key)), &keys)
            .unwrap()
            .starts_with("foo: bar")
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "one token, one decrypt: {requests:?}");
    assert_eq!(requests[1].header("content-type"), Some("application/json"));
    // The service's refusal is named with the key, never with the token.
    let mut fresh = Keys::new();
    fresh
        .add_entry("sops.gcp-kms", account.to_string().as_bytes())
        .unwrap();
    fresh.add_environment([("SOPS_GCP_KMS_ENDPOINT".to_string(), server.url.clone())]);
    let error = decrypt_sealed(&file(b"not the wrapped key"), &fresh)
        .unwrap_err()
        .to_string();
    assert!(error.contains("GCP KMS"), "{error}");
    assert!(error.contains(resource), "{error}");
    assert!(error.contains("the ciphertext is invalid"), "{error}");
    assert!(!error.contains("ya29"), "{error}");
    // An authorized user (`gcloud auth application-default login`) works the same way.
    let user = json!({"type": "authorized_user", "client_id": "user-client.apps.googleusercontent.com",
                      "client_secret": "user-secret", "refresh_token": "1//refresh",
                      "token_uri": format!("{}/token", server.url)});
    let mut keys = Keys::new();
    keys.add_entry("sops.gcp-kms", user.to_string().as_bytes())
        .unwrap();
    keys.add_environment([("SOPS_GCP_KMS_ENDPOINT".to_string(), server.url.clone())]);
    assert!(decrypt_sealed(&file(&wrap(&data_key)), &keys).is_ok());
    // The controller's own credentials file, read when a key needs it; a bad one is named.
    let dir = tempfile::tempdir().unwrap();
    let credentials_file = dir.path().join("application_default_credentials.json");
    std::fs::write(&credentials_file, user.to_string()).unwrap();
    let environment = |path: &std::path::Path| {
        let mut keys = Keys::new();
        keys.add_environment([
            (
                "GOOGLE_APPLICATION_CREDENTIALS".to_string(),
                path.display().to_string(),
            ),
            ("SOPS_GCP_KMS_ENDPOINT".to_string(), server.url.clone()),
        ]);
        keys
    };
    assert!(decrypt_sealed(&file(&wrap(&data_key)), &environment(&credentials_file)).is_ok());
    let broken = dir.path().join("broken.json");
    std::fs::write(&broken, "{not json").unwrap();
    let error = decrypt_sealed(&file(&wrap(&data_key)), &environment(&broken))
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("broken.json") && error.contains("not a Google credentials JSON document"),
        "{error}"
    );
}

#[test]
fn azure_key_vault_keys_open_with_a_client_secret_as_azure_documents_it() {
    let (_gpg, data_key) = gpg_and_data_key();
    let expected_key = data_key.clone();
    let server = MockServer::start(move |request| {
        if request.path == "/tenant-1/oauth2/v2.0/token" {
            // The client-credentials grant of the Microsoft identity platform.
            let form = |name| request.form_field(name);
            let fine = request.method == "POST"
                && form("grant_type").as_deref() == Some("client_credentials")
                && form("client_id").as_deref() == Some("client-1")
                && form("client_secret").as_deref() == Some("secret-never-shown")
                && form("scope").as_deref() == Some("https://vault.azure.net/.default");
            return if fine {
                (
                    200,
                    json!({"token_type": "Bearer", "expires_in": 3599, "access_token": "eyJ.loopback"}),
                )
            } else {
                (
                    400,
                    json!({"error": "invalid_client", "error_description": "AADSTS7000215: Invalid client secret provided."}),
                )
            };
        }
        // Key Vault's decrypt operation (REST API 7.4).
        if request.method != "POST"
            || request.path != "/keys/sops-key/0f1e2d/decrypt?api-version=7.4"
        {
            return (
                404,
                json!({"error": {"code": "NotFound", "message": "not found"}}),
            );
        }
        if request.header("authorization") != Some("Bearer eyJ.loopback") {
            return (
                401,
                json!({"error": {"code": "Unauthorized", "message": "AKV10000: Request is missing a Bearer or PoP token."}}),
            );
        }
        let body = request.json();
        let value = URL_SAFE_NO_PAD
            .decode(body["value"].as_str().unwrap_or_default())
            .unwrap_or_default();
        if body["alg"] != "RSA-OAEP-256" || value != wrap(&expected_key) {
            return (
                400,
                json!({"error": {"code": "BadParameter", "message": "Operation decrypt is not allowed"}}),
            );
        }
        (
            200,
            json!({"kid": "https://vault/keys/sops-key/0f1e2d", "value": URL_SAFE_NO_PAD.encode(&expected_key)}),
        )
    });
    let file = sealed_with(|sops| {
        sops.insert(
            "azure_kv".into(),
            json!([{"vault_url": server.url, "name": "sops-key", "version": "0f1e2d",
                    "created_at": "2026-11-25T00:00:00Z", "enc": URL_SAFE_NO_PAD.encode(wrap(&data_key))}]),
        );
    });
    // The token goes to Azure's Key Vault domains only, unless an origin is trusted.
    let mut untrusted = Keys::new();
    untrusted
        .add_entry(
            "sops.azure-kv",
            format!(
                "tenantId: tenant-1\nclientId: client-1\nclientSecret: s\nauthorityHost: {}\n",
                server.url
            )
            .as_bytes(),
        )
        .unwrap();
    let error = decrypt_sealed(&file, &untrusted).unwrap_err().to_string();
    assert!(
        error.contains("not an https Azure Key Vault address"),
        "{error}"
    );
    assert!(
        server.requests().is_empty(),
        "nothing was sent, not even for a token"
    );
    let entry = |secret: &str| {
        let mut keys = Keys::new();
        keys.trust_azure_vault_origin(&server.url);
        keys.add_entry(
            "sops.azure-kv",
            format!(
                "tenantId: tenant-1\nclientId: client-1\nclientSecret: {secret}\nauthorityHost: {}\n",
                server.url
            )
            .as_bytes(),
        )
        .unwrap();
        keys
    };
    assert!(
        decrypt_sealed(&file, &entry("secret-never-shown"))
            .unwrap()
            .starts_with("foo: bar")
    );
    // The controller's own service principal, from its environment.
    let mut from_environment = Keys::new();
    from_environment.trust_azure_vault_origin(&server.url);
    from_environment.add_environment([
        ("AZURE_TENANT_ID".to_string(), "tenant-1".to_string()),
        ("AZURE_CLIENT_ID".to_string(), "client-1".to_string()),
        (
            "AZURE_CLIENT_SECRET".to_string(),
            "secret-never-shown".to_string(),
        ),
        ("AZURE_AUTHORITY_HOST".to_string(), server.url.clone()),
    ]);
    assert!(decrypt_sealed(&file, &from_environment).is_ok());
    let error = decrypt_sealed(&file, &entry("wrong-secret"))
        .unwrap_err()
        .to_string();
    assert!(error.contains("Azure Key Vault"), "{error}");
    assert!(error.contains("AADSTS7000215"), "{error}");
    assert!(!error.contains("wrong-secret"), "{error}");
}

/// Key services cannot hold a build: a key that failed once is not asked again in the same
/// decryption, nothing is sent past the deadline, and an entry that cannot be read is
/// skipped for the others, as sops skips it.
#[test]
fn key_services_are_asked_once_and_never_past_the_deadline() {
    let server = MockServer::start(|_| (403, json!({"errors": ["permission denied"]})));
    let vault_entry = json!({"vault_address": server.url, "engine_path": "transit", "key_name": "k",
                             "created_at": "2026-11-25T00:00:00Z", "enc": "vault:v1:AAAA"});
    let twice = sealed_with(|sops| {
        sops.insert(
            "hc_vault".into(),
            json!([vault_entry.clone(), vault_entry.clone()]),
        );
    });
    let mut keys = Keys::new();
    keys.add_entry("sops.vault-token", b"t").unwrap();
    for _ in 0..3 {
        let error = decrypt_sealed(&twice, &keys).unwrap_err().to_string();
        assert!(error.contains("permission denied"), "{error}");
    }
    assert_eq!(server.requests().len(), 1, "one failed key, asked once");

    let mut late = Keys::new();
    late.add_entry("sops.vault-token", b"t").unwrap();
    late.set_deadline(std::time::Instant::now());
    let error = decrypt_sealed(&twice, &late).unwrap_err().to_string();
    assert!(error.contains("ran out of time"), "{error}");
    assert_eq!(server.requests().len(), 1, "nothing sent past the deadline");

    // A service that does not answer any attempt is not asked again for another entry.
    let down = MockServer::start(|_| (503, json!({"errors": ["Vault is sealed"]})));
    let entry = |enc: &str| {
        json!({"vault_address": down.url, "engine_path": "transit", "key_name": "k",
               "created_at": "2026-11-25T00:00:00Z", "enc": enc})
    };
    let two_keys = sealed_with(|sops| {
        sops.insert(
            "hc_vault".into(),
            json!([entry("vault:v1:AAAA"), entry("vault:v1:BBBB")]),
        );
    });
    let mut keys = Keys::new();
    keys.add_entry("sops.vault-token", b"t").unwrap();
    let error = decrypt_sealed(&two_keys, &keys).unwrap_err().to_string();
    assert!(
        error.contains("after 3 attempts") && error.contains("not sent, as earlier"),
        "{error}"
    );
    assert_eq!(
        down.requests().len(),
        3,
        "three attempts for the first entry, none for the second"
    );

    let original = sops_metadata(&std::fs::read_to_string(getsops(SEALED)).unwrap());
    let with_a_broken_entry = sealed_with(|sops| {
        sops.insert("hc_vault".into(), json!([{"vault_address": server.url}]));
        sops.insert("pgp".into(), original["pgp"].clone());
    });
    assert!(decrypt_sealed(&with_a_broken_entry, &sops_test_keys()).is_ok());
    let error = decrypt_sealed(&with_a_broken_entry, &Keys::new())
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("invalid entry: a `hc_vault` entry has no `engine_path`"),
        "{error}"
    );
}
