//! Documents sealed here with a known data key: the formats and value types that no shared
//! vector covers (JSON, INI, typed YAML values, suffix and `mac_only_encrypted` rules).

use std::io::Write;

use crate::json;
use crate::value::Value;
use age::secrecy::ExposeSecret;

use super::formats::{Loaded, emit};
use super::tree::{Metadata, seal_branches};
use super::{Format, Keys, SopsError, decrypt};
use crate::yaml::{Ordered, Schema, parse_documents_ordered};

const DATA_KEY: [u8; 32] = [42; 32];

/// A fresh age identity and the data key wrapped for it, armored as SOPS stores it.
fn age_recipient() -> (Keys, String, String) {
    let identity = age::x25519::Identity::generate();
    let recipient = identity.to_public();
    let encryptor =
        age::Encryptor::with_recipients(std::iter::once(&recipient as &dyn age::Recipient))
            .unwrap();
    let mut armored = Vec::new();
    let writer =
        age::armor::ArmoredWriter::wrap_output(&mut armored, age::armor::Format::AsciiArmor)
            .unwrap();
    let mut stream = encryptor.wrap_output(writer).unwrap();
    stream.write_all(&DATA_KEY).unwrap();
    stream.finish().unwrap().finish().unwrap();
    let mut keys = Keys::new();
    keys.add(
        "test.agekey",
        identity.to_string().expose_secret().as_bytes(),
    )
    .unwrap();
    (
        keys,
        recipient.to_string(),
        String::from_utf8(armored).unwrap(),
    )
}

/// Seals `branches` and returns them with their metadata, as a loaded file would be.
fn sealed(mut branches: Vec<Ordered>, mut metadata: Value) -> (Keys, Loaded) {
    let (keys, recipient, enc) = age_recipient();
    metadata["age"] = json!([{ "recipient": recipient, "enc": enc }]);
    metadata["lastmodified"] = json!("2026-11-20T10:00:00Z");
    metadata["version"] = json!("3.9.0");
    let mac = seal_branches(
        &mut branches,
        &Metadata::from_value(&metadata).unwrap(),
        &DATA_KEY,
    );
    metadata["mac"] = json!(mac);
    (keys, Loaded { branches, metadata })
}

fn with_metadata(loaded: &Loaded) -> Vec<Ordered> {
    let mut branches = loaded.branches.clone();
    if let Some(Ordered::Map(entries)) = branches.first_mut() {
        entries.push(("sops".to_string(), to_ordered(&loaded.metadata)));
    }
    branches
}

fn to_ordered(value: &Value) -> Ordered {
    match value {
        Value::Object(map) => Ordered::Map(
            map.iter()
                .map(|(k, v)| (k.clone(), to_ordered(v)))
                .collect(),
        ),
        Value::Array(items) => Ordered::Seq(items.iter().map(to_ordered).collect()),
        scalar => Ordered::Scalar(scalar.clone()),
    }
}

fn yaml(text: &str) -> Vec<Ordered> {
    parse_documents_ordered(text, Schema::Kyaml).unwrap()
}

#[test]
fn json_documents_keep_types_and_key_order() {
    let plain = r#"{"zeta": "last-first", "port": 5432, "ratio": 0.25, "on": true,
        "list": ["a", 2, false], "nested": {"pass": "json-secret", "note_unencrypted": "clear"}}"#;
    let (keys, loaded) = sealed(yaml(plain), json!({"unencrypted_suffix": "_unencrypted"}));
    let file = emit(&with_metadata(&loaded), Format::Json).unwrap();
    let text = String::from_utf8(file.clone()).unwrap();
    assert!(
        !text.contains("json-secret") && text.contains("\"clear\""),
        "{text}"
    );
    let out = String::from_utf8(decrypt(&file, Format::Json, &keys).unwrap()).unwrap();
    let reparsed: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        reparsed,
        json!({"zeta": "last-first", "port": 5432, "ratio": 0.25, "on": true,
               "list": ["a", 2, false], "nested": {"pass": "json-secret", "note_unencrypted": "clear"}})
    );
    assert!(
        out.find("zeta").unwrap() < out.find("port").unwrap(),
        "{out}"
    );
}

#[test]
fn multi_document_yaml_shares_one_mac() {
    let (keys, loaded) = sealed(
        yaml("a: 1\nb: x\n---\nc: [true, 1.5]\n"),
        json!({"encrypted_suffix": ""}),
    );
    let docs = loaded
        .branches
        .iter()
        .map(|b| match b {
            Ordered::Map(entries) => {
                let mut entries = entries.clone();
                entries.push(("sops".into(), to_ordered(&loaded.metadata)));
                Ordered::Map(entries)
            }
            other => other.clone(),
        })
        .collect::<Vec<_>>();
    let file = emit(&docs, Format::Yaml).unwrap();
    let out = decrypt(&file, Format::Yaml, &keys).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "a: 1\nb: x\n---\nc:\n- true\n- 1.5\n"
    );
}

#[test]
fn ini_sections_and_escaped_metadata() {
    let (keys, loaded) = sealed(
        vec![Ordered::Map(vec![
            (
                "db".into(),
                Ordered::Map(vec![
                    ("user".into(), Ordered::str("admin")),
                    ("password".into(), Ordered::str("ini-secret")),
                ]),
            ),
            (
                "cache".into(),
                Ordered::Map(vec![("ttl".into(), Ordered::str("60"))]),
            ),
        ])],
        json!({"unencrypted_suffix": "_unencrypted"}),
    );
    let mut file = String::from_utf8(emit(&loaded.branches, Format::Ini).unwrap()).unwrap();
    file.push_str("\n[sops]\n");
    let meta = &loaded.metadata;
    for (key, value) in [
        (
            "age__list_0__map_enc",
            meta["age"][0]["enc"].as_str().unwrap(),
        ),
        (
            "age__list_0__map_recipient",
            meta["age"][0]["recipient"].as_str().unwrap(),
        ),
        ("lastmodified", meta["lastmodified"].as_str().unwrap()),
        ("mac", meta["mac"].as_str().unwrap()),
        ("unencrypted_suffix", "_unencrypted"),
        ("version", "3.9.0"),
    ] {
        file.push_str(&format!("{key} = {}\n", value.replace('\n', "\\n")));
    }
    assert!(!file.contains("ini-secret"));
    let out = decrypt(file.as_bytes(), Format::Ini, &keys).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        // go-ini (sops's INI store) aligns `=` after a section's longest key.
        "[db]\nuser     = admin\npassword = ini-secret\n\n[cache]\nttl = 60\n"
    );
}

#[test]
fn mac_only_encrypted_ignores_clear_values() {
    let (keys, loaded) = sealed(
        yaml("kind: Secret\nstringData:\n  token: only-this\n"),
        json!({"encrypted_regex": "^stringData$", "mac_only_encrypted": true}),
    );
    let file = String::from_utf8(emit(&with_metadata(&loaded), Format::Yaml).unwrap()).unwrap();
    let changed = file.replace("kind: Secret", "kind: ConfigMap");
    let out = String::from_utf8(decrypt(changed.as_bytes(), Format::Yaml, &keys).unwrap()).unwrap();
    assert!(out.contains("kind: ConfigMap") && out.contains("token: only-this"));

    // Without mac_only_encrypted the same change is caught.
    let (keys, loaded) = sealed(
        yaml("kind: Secret\nstringData:\n  token: only-this\n"),
        json!({"encrypted_regex": "^stringData$"}),
    );
    let file = String::from_utf8(emit(&with_metadata(&loaded), Format::Yaml).unwrap()).unwrap();
    let changed = file.replace("kind: Secret", "kind: ConfigMap");
    assert_eq!(
        decrypt(changed.as_bytes(), Format::Yaml, &keys).unwrap_err(),
        SopsError::MacMismatch
    );
}

#[test]
fn values_moved_between_keys_do_not_open() {
    let (keys, loaded) = sealed(yaml("a: one-secret\nb: two-secret\n"), json!({}));
    let file = String::from_utf8(emit(&with_metadata(&loaded), Format::Yaml).unwrap()).unwrap();
    let lines: Vec<&str> = file.lines().collect();
    let a = lines[0].strip_prefix("a: ").unwrap();
    let b = lines[1].strip_prefix("b: ").unwrap();
    let swapped = file
        .replacen(a, "@A@", 1)
        .replacen(b, a, 1)
        .replacen("@A@", b, 1);
    let err = decrypt(swapped.as_bytes(), Format::Yaml, &keys).unwrap_err();
    assert!(
        matches!(&err, SopsError::Value { path, .. } if path == "a"),
        "{err}"
    );
    assert!(!err.to_string().contains("secret"), "{err}");
}

#[cfg(feature = "pgp")]
#[test]
fn openpgp_ecc_keys_open_data_keys() {
    use super::keysource::Stanza;
    use super::keysource::pgp::PgpEntry;
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/sops/generated"
    );
    let key = std::fs::read(format!("{dir}/ecc.asc")).unwrap();
    let message = std::fs::read_to_string(format!("{dir}/msg.asc")).unwrap();
    let mut keys = Keys::new();
    keys.add("ecc.asc", &key).unwrap();
    let expected: Vec<u8> = (100..132).collect();
    let stanza = |message: &str| {
        Stanza::Pgp(PgpEntry {
            enc: message.to_string(),
            fingerprint: String::new(),
        })
    };
    assert_eq!(keys.open(&stanza(&message)).unwrap().unwrap(), expected);
    // Another key is simply not a recipient.
    let rsa = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/sops/flux/internal/controller/testdata/sops/keys/pgp.asc"
    );
    let mut other = Keys::new();
    other.add("pgp.asc", &std::fs::read(rsa).unwrap()).unwrap();
    assert_eq!(other.open(&stanza(&message)).unwrap(), None);
}

#[test]
fn key_entries_that_cannot_be_read_are_named_not_shown() {
    let mut keys = Keys::new();
    let secret_looking = "AGE-SECRET-KEY-1NOTAVALIDKEYBUTSECRETLOOKING";
    let err = keys
        .add(
            "identity.agekey",
            format!("# comment\n{secret_looking}\n").as_bytes(),
        )
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("identity.agekey") && err.contains("line 2"),
        "{err}"
    );
    assert!(!err.contains("NOTAVALID"), "{err}");
    let err = keys
        .add("empty.agekey", b"# nothing\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("empty.agekey"), "{err}");
    let err = keys
        .add(
            "bad.asc",
            b"-----BEGIN PGP PRIVATE KEY BLOCK-----\n\ngarbage\n",
        )
        .unwrap_err()
        .to_string();
    assert!(err.contains("bad.asc"), "{err}");
    assert!(keys.is_empty());
}

#[test]
fn comment_rules_decide_by_value_form() {
    let (keys, mut loaded) = sealed(
        yaml("user: admin\npassword: comment-secret\n"),
        json!({"encrypted_regex": "^password$"}),
    );
    // The same file as if `# sops:enc` comments had chosen `password`.
    let metadata = loaded.metadata.as_object_mut().unwrap();
    metadata.remove("encrypted_regex");
    metadata.insert("encrypted_comment_regex".into(), json!("sops:enc"));
    let file = emit(&with_metadata(&loaded), Format::Yaml).unwrap();
    let out = String::from_utf8(decrypt(&file, Format::Yaml, &keys).unwrap()).unwrap();
    assert_eq!(out, "user: admin\npassword: comment-secret\n");
}

#[test]
fn secret_values_print_in_the_format_their_key_names() {
    let (keys, loaded) = sealed(yaml(r#"{"user": "admin", "pass": "s3cret"}"#), json!({}));
    let file = emit(&with_metadata(&loaded), Format::Json).unwrap();
    use base64::Engine as _;
    let encoded = base64::engine::general_purpose::STANDARD.encode(&file);
    let mut secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
        "data": {"config.yaml": encoded, "config.json": encoded}});
    assert_eq!(
        super::decrypt_object(&mut secret, &keys).unwrap(),
        super::ObjectOutcome::Decrypted
    );
    let decode = |key: &str| {
        String::from_utf8(
            base64::engine::general_purpose::STANDARD
                .decode(secret["data"][key].as_str().unwrap())
                .unwrap(),
        )
        .unwrap()
    };
    assert_eq!(decode("config.yaml"), "user: admin\npass: s3cret\n");
    let json: Value = serde_json::from_str(&decode("config.json")).unwrap();
    assert_eq!(json, json!({"user": "admin", "pass": "s3cret"}));
}

#[test]
fn public_keys_and_endpoint_only_environments_give_no_keys() {
    let mut keys = Keys::new();
    // gpg --import (Flux) accepts a public key in an `*.asc` entry; it opens nothing.
    assert_eq!(
        keys.add_entry(
            "public.asc",
            b"-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmQENBF\n-----END PGP PUBLIC KEY BLOCK-----\n",
        ),
        Ok(true)
    );
    // A Kustomization decrypting as its own service account takes endpoints, never the
    // controller's credentials.
    keys.add_environment_endpoints([
        ("AWS_ACCESS_KEY_ID".to_string(), "AKID".to_string()),
        ("AWS_SECRET_ACCESS_KEY".to_string(), "secret".to_string()),
        ("VAULT_TOKEN".to_string(), "token".to_string()),
        (
            "AWS_ENDPOINT_URL".to_string(),
            "http://127.0.0.1:1".to_string(),
        ),
    ]);
    assert!(keys.is_empty());
    keys.add_environment([
        ("AWS_ACCESS_KEY_ID".to_string(), "AKID".to_string()),
        ("AWS_SECRET_ACCESS_KEY".to_string(), "secret".to_string()),
    ]);
    assert!(!keys.is_empty());
}

/// `kustomize.toolkit.fluxcd.io/decrypt: disabled` in any case, as Flux's `EqualFold`
/// reads it (its docs write `Disabled`): the object is left as it is and may be applied.
#[test]
fn decryption_is_disabled_by_the_annotation_in_any_case() {
    let secret = |annotation: Option<&str>| {
        let mut object = json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "held", "namespace": "apps"},
            "data": {"key": "c2VjcmV0"},
            "sops": {"version": "3.9.0"},
        });
        if let Some(value) = annotation {
            object["metadata"]["annotations"] =
                json!({"kustomize.toolkit.fluxcd.io/decrypt": value});
        }
        object
    };
    for value in ["disabled", "Disabled", "DISABLED"] {
        let mut object = secret(Some(value));
        let unchanged = object.clone();
        assert_eq!(
            super::decrypt_object(&mut object, &Keys::new()).unwrap(),
            super::ObjectOutcome::Disabled,
            "{value}"
        );
        assert_eq!(object, unchanged, "{value}");
        assert!(
            super::ensure_not_encrypted_secret(&object).is_ok(),
            "{value}"
        );
    }
    for refused in [None, Some("enabled"), Some("disable")] {
        assert!(
            super::ensure_not_encrypted_secret(&secret(refused)).is_err(),
            "{refused:?}"
        );
    }
}
