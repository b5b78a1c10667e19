//! SOPS decryption against real files from Flux's test suite (`tests/fixtures/sops`), their
//! independently verified plaintexts (`vectors.json`), and the failure modes users meet.

use std::path::PathBuf;

use base64::Engine;
use kustomize_controller::json;
use kustomize_controller::sops::{self, Format, Keys, ObjectOutcome, SopsError};
use kustomize_controller::value::Value;
use kustomize_controller::yaml::{Schema, parse_documents, parse_single};

use crate::support::{copy_tree, repo_root, run_cli, stderr_of, stdout_of};

fn fixtures() -> PathBuf {
    repo_root().join("tests/fixtures/sops")
}

fn read(relative: &str) -> Vec<u8> {
    std::fs::read(fixtures().join(relative)).unwrap_or_else(|e| panic!("{relative}: {e}"))
}

fn keys_from(relative: &str) -> Keys {
    let mut keys = Keys::new();
    keys.add(relative, &read(relative)).unwrap();
    keys
}

struct Vector {
    file: String,
    format: String,
    key: String,
    unsupported: bool,
    plaintext: Value,
}

fn vectors() -> Vec<Vector> {
    let index: Value = serde_json::from_slice(&read("vectors.json")).unwrap();
    index["vectors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| Vector {
            file: v["file"].as_str().unwrap().to_string(),
            format: v["format"].as_str().unwrap().to_string(),
            key: v["key"].as_str().unwrap().to_string(),
            unsupported: v["unsupported"].as_bool().unwrap(),
            plaintext: v["plaintext"].clone(),
        })
        .collect()
}

/// The distinctive plaintexts of the vectors, which no error may ever contain.
fn secret_plaintexts() -> Vec<String> {
    let mut out = Vec::new();
    fn leaves(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::Object(map) => map.values().for_each(|v| leaves(v, out)),
            Value::String(s) if s.len() >= 6 && s != "Secret" && s != "default" => {
                out.push(s.clone())
            }
            _ => {}
        }
    }
    for vector in vectors() {
        if let Some(data) = vector
            .plaintext
            .get("stringData")
            .or(vector.plaintext.get("data"))
        {
            leaves(data, &mut out);
        }
    }
    out.push("my-sops-age-secret".to_string());
    out
}

fn assert_no_plaintext(message: &str) {
    for secret in secret_plaintexts() {
        assert!(
            !message.contains(&secret),
            "error leaks plaintext: {message}"
        );
    }
}

/// What a decrypted document holds, as a JSON tree, for comparison with `vectors.json`.
fn decrypted_tree(format: Format, plain: &[u8]) -> Value {
    let text = String::from_utf8(plain.to_vec()).unwrap();
    match format {
        Format::Yaml => parse_single(&text, Schema::Kyaml).unwrap(),
        Format::Binary => json!({ "data": text }),
        Format::Dotenv => Value::Object(
            text.lines()
                .map(|l| {
                    let (k, v) = l.split_once('=').unwrap();
                    (k.to_string(), Value::String(v.to_string()))
                })
                .collect(),
        ),
        other => panic!("no vector in format {other:?}"),
    }
}

#[test]
fn every_vector_decrypts_to_its_verified_plaintext() {
    let mut checked = 0;
    for vector in vectors() {
        let keys = keys_from(&vector.key);
        if let Some((file, field_key)) = vector.file.split_once('#') {
            // A plain Secret whose data value is a base64 SOPS document.
            let mut object =
                parse_single(&String::from_utf8(read(file)).unwrap(), Schema::Kubernetes).unwrap();
            let outcome = sops::decrypt_object(&mut object, &keys).unwrap();
            assert_eq!(outcome, ObjectOutcome::Decrypted, "{}", vector.file);
            let pointer = format!("/{}", field_key.replace('.', "/"));
            let encoded = object.pointer(&pointer).and_then(Value::as_str).unwrap();
            let plain = base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .unwrap();
            assert_eq!(
                json!({ "data": String::from_utf8(plain).unwrap() }),
                vector.plaintext,
                "{}",
                vector.file
            );
            checked += 1;
            continue;
        }
        let format = Format::from_name(&vector.format).unwrap();
        let result = sops::decrypt(&read(&vector.file), format, &keys);
        if vector.unsupported {
            let err = result.unwrap_err();
            assert!(matches!(err, SopsError::UnsupportedRecipient(_)), "{err}");
            assert!(
                err.to_string().contains("unsupported recipient type"),
                "{err}"
            );
            checked += 1;
            continue;
        }
        let plain = result.unwrap_or_else(|e| panic!("{}: {e}", vector.file));
        assert_eq!(
            decrypted_tree(format, &plain),
            vector.plaintext,
            "{}",
            vector.file
        );
        checked += 1;
    }
    assert_eq!(checked, 20);
}

#[test]
fn cli_decrypts_every_vector() {
    for vector in vectors() {
        if vector.file.contains('#') || vector.unsupported {
            continue;
        }
        let file = fixtures().join(&vector.file);
        let key = fixtures().join(&vector.key);
        let output = run_cli(&[
            "sops",
            "decrypt",
            file.to_str().unwrap(),
            "--key",
            key.to_str().unwrap(),
            "--input-type",
            &vector.format,
        ]);
        assert!(
            output.status.success(),
            "{}: {}",
            vector.file,
            stderr_of(&output)
        );
        let format = Format::from_name(&vector.format).unwrap();
        assert_eq!(
            decrypted_tree(format, stdout_of(&output).as_bytes()),
            vector.plaintext,
            "{}",
            vector.file
        );
    }
}

const AGE_FILE: &str = "flux/internal/controller/testdata/sops/algorithms/age.yaml";
const AGE_KEY: &str = "flux/internal/controller/testdata/sops/keys/age.txt";

fn decrypt_text(text: &str, keys: &Keys) -> Result<Vec<u8>, SopsError> {
    sops::decrypt(text.as_bytes(), Format::Yaml, keys)
}

#[test]
fn wrong_and_missing_keys_say_what_to_configure() {
    let text = String::from_utf8(read(AGE_FILE)).unwrap();
    for keys in [
        keys_from("flux/internal/controller/testdata/sops/keys/age-global.txt"),
        Keys::new(),
    ] {
        let err = decrypt_text(&text, &keys).unwrap_err();
        assert!(matches!(err, SopsError::NoMatchingKey { .. }), "{err}");
        let message = err.to_string();
        assert!(
            message.contains("1 age") && message.contains("spec.decryption"),
            "{message}"
        );
        assert_no_plaintext(&message);
    }
}

#[test]
fn tampered_values_and_macs_are_refused_without_leaking() {
    let text = String::from_utf8(read(AGE_FILE)).unwrap();
    let keys = keys_from(AGE_KEY);
    assert!(decrypt_text(&text, &keys).is_ok());

    // A value swapped for another ciphertext byte: the value's own tag fails.
    let start = text.find("key: ENC[AES256_GCM,data:").unwrap() + "key: ENC[AES256_GCM,data:".len();
    let mut tampered = text.clone();
    let flipped = if &text[start..start + 1] == "A" {
        "B"
    } else {
        "A"
    };
    tampered.replace_range(start..start + 1, flipped);
    let err = decrypt_text(&tampered, &keys).unwrap_err();
    assert!(
        matches!(&err, SopsError::Value { path, .. } if path == "stringData.key"),
        "{err}"
    );
    assert_no_plaintext(&err.to_string());

    // The MAC itself altered.
    let start = text.find("mac: ENC[AES256_GCM,data:").unwrap() + "mac: ENC[AES256_GCM,data:".len();
    let mut tampered = text.clone();
    let flipped = if &text[start..start + 1] == "A" {
        "B"
    } else {
        "A"
    };
    tampered.replace_range(start..start + 1, flipped);
    assert_eq!(
        decrypt_text(&tampered, &keys).unwrap_err(),
        SopsError::MacMismatch
    );

    // A plaintext leaf changed after encryption: authenticated values still open, the MAC
    // over all values catches it.
    let tampered = text.replace("name: age", "name: changed");
    assert_eq!(
        decrypt_text(&tampered, &keys).unwrap_err(),
        SopsError::MacMismatch
    );
}

#[test]
fn truncated_and_corrupted_files_give_clear_errors() {
    let text = String::from_utf8(read(AGE_FILE)).unwrap();
    let keys = keys_from(AGE_KEY);
    let cut = &text[..text.find("sops:").unwrap()];
    assert_eq!(
        decrypt_text(cut, &keys).unwrap_err(),
        SopsError::NotEncrypted
    );
    let cut = &text[..text.len() / 2];
    let err = decrypt_text(cut, &keys).unwrap_err();
    assert!(!err.to_string().is_empty());

    // Flux's deliberately broken fixture: every field carries the ciphertext of
    // `stringData.secret`. Only `stringData` is meant to be encrypted, so the copies
    // elsewhere count as altered plaintext and the MAC refuses the file.
    let broken = "flux-history/internal/generator/testdata/panic/secret.age.yaml";
    let keys = keys_from("flux-history/internal/controller/testdata/sops/age.txt");
    let err = sops::decrypt(&read(broken), Format::Yaml, &keys).unwrap_err();
    assert_eq!(err, SopsError::MacMismatch);
    assert_no_plaintext(&format!("{err} {err:?}"));
}

#[test]
fn objects_with_sops_metadata_decrypt_after_a_build() {
    let text = String::from_utf8(read(AGE_FILE)).unwrap();
    let keys = keys_from(AGE_KEY);
    let mut object = parse_documents(&text, Schema::Kubernetes)
        .unwrap()
        .remove(0);
    assert!(sops::ensure_not_encrypted_secret(&object).is_err());
    assert_eq!(
        sops::decrypt_object(&mut object, &keys).unwrap(),
        ObjectOutcome::Decrypted
    );
    assert_eq!(object["stringData"]["key"], "value");
    assert!(object.get("sops").is_none());
    sops::ensure_not_encrypted_secret(&object).unwrap();

    let mut disabled = parse_documents(&text, Schema::Kubernetes)
        .unwrap()
        .remove(0);
    disabled["metadata"]["annotations"] = json!({ sops::DECRYPT_ANNOTATION: "disabled" });
    let before = disabled.clone();
    assert_eq!(
        sops::decrypt_object(&mut disabled, &keys).unwrap(),
        ObjectOutcome::Disabled
    );
    assert_eq!(disabled, before);
    // Left alone means applied as written: the user keeps SOPS data there on purpose.
    sops::ensure_not_encrypted_secret(&disabled).unwrap();

    let still_encrypted = parse_documents(&text, Schema::Kubernetes)
        .unwrap()
        .remove(0);
    let err = sops::ensure_not_encrypted_secret(&still_encrypted)
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "Secret/age is SOPS encrypted, configuring decryption is required for this secret to be reconciled"
    );
}

#[test]
fn cli_errors_name_the_file_and_never_the_plaintext() {
    let file = fixtures().join(AGE_FILE);
    let wrong = fixtures().join("flux/internal/controller/testdata/sops/keys/age-global.txt");
    let output = run_cli(&[
        "sops",
        "decrypt",
        file.to_str().unwrap(),
        "--key",
        wrong.to_str().unwrap(),
    ]);
    assert!(!output.status.success());
    let stderr = stderr_of(&output);
    assert!(
        stderr.contains("age.yaml") && stderr.contains("no configured key"),
        "{stderr}"
    );
    assert_no_plaintext(&stderr);
    assert!(stdout_of(&output).is_empty());
}

/// Recursively copies a fixture tree, so decryption in place never touches the checkout.

#[test]
fn flux_sops_tree_builds_and_decrypts_end_to_end() {
    use kustomize_controller::kustomize::{self, BuildOptions};
    let artifact = tempfile::tempdir().unwrap();
    let root = artifact.path().join("sops");
    copy_tree(
        &fixtures().join("flux/internal/controller/testdata/sops"),
        &root,
    );
    // Without network and Vault: drop the remote base, the Vault-only object and the
    // post-quantum one (unsupported by the age crate, tested above).
    std::fs::write(
        root.join("kustomization.yaml"),
        "namePrefix: sops-\nresources: [algorithms, envs, files, patches, inside]\n\
         components: [./component]\n",
    )
    .unwrap();
    std::fs::write(
        root.join("algorithms/kustomization.yaml"),
        "namePrefix: algo-\nresources: [age.yaml, pgp.yaml]\n",
    )
    .unwrap();
    let mut keys = keys_from(AGE_KEY);
    let pgp = "flux/internal/controller/testdata/sops/keys/pgp.asc";
    keys.add(pgp, &read(pgp)).unwrap();

    let decrypted = sops::decrypt_build_inputs(artifact.path(), &root, &keys).unwrap();
    let mut names: Vec<String> = decrypted
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "env.env",
            "env.env",
            "file.txt",
            "merge1.yaml",
            "merge2.yaml"
        ]
    );
    // Decrypting again finds nothing left to do.
    assert!(
        sops::decrypt_build_inputs(artifact.path(), &root, &keys)
            .unwrap()
            .is_empty()
    );

    let mut objects = kustomize::build_dir(&root, &BuildOptions::default()).unwrap();
    for object in objects.iter_mut() {
        sops::decrypt_object(object, &keys).unwrap();
        sops::ensure_not_encrypted_secret(object).unwrap();
    }
    let find = |kind: &str, name: &str| -> Value {
        objects
            .iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("{kind} {name} missing"))
            .clone()
    };
    let b64 = base64::engine::general_purpose::STANDARD.encode("value");
    for (kind, name, field, expected) in [
        ("Secret", "sops-algo-age", "stringData", "value"),
        ("Secret", "sops-algo-pgp", "stringData", "value"),
        ("Secret", "sops-envs-secret", "data", &b64),
        ("ConfigMap", "sops-envs-configmap", "data", "value"),
        ("Secret", "sops-files-secret", "data", &b64),
        ("ConfigMap", "sops-files-configmap", "data", "value"),
        ("Secret", "sops-component", "data", &b64),
        ("Secret", "sops-inside-secret", "data", &b64),
    ] {
        assert_eq!(find(kind, name)[field]["key"], expected, "{kind} {name}");
    }
    let patched = find("Secret", "sops-patches-secret");
    assert_eq!(patched["stringData"]["key"], "merge1");
    assert_eq!(patched["stringData"]["merge2"], "merge2");
}

#[test]
fn build_inputs_outside_the_artifact_are_refused() {
    let artifact = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(
        outside.path().join("s.env"),
        read("flux/internal/controller/testdata/sops/envs/env.env"),
    )
    .unwrap();
    let app = artifact.path().join("app");
    std::fs::create_dir_all(&app).unwrap();
    std::os::unix::fs::symlink(outside.path().join("s.env"), app.join("s.env")).unwrap();
    std::fs::write(
        app.join("kustomization.yaml"),
        "secretGenerator:\n- name: s\n  envs: [s.env]\n",
    )
    .unwrap();
    let err = sops::decrypt_build_inputs(artifact.path(), &app, &keys_from(AGE_KEY)).unwrap_err();
    assert!(
        err.to_string().contains("outside the artifact root"),
        "{err}"
    );
}

#[test]
fn whole_file_yaml_decrypts_byte_exact_for_generator_files() {
    // Flux's history test turns this file into Secret data through `files:`, so the bytes
    // (not just the tree) matter.
    let dir = "flux-history/internal/controller/testdata/sops";
    let keys = keys_from(&format!("{dir}/pgp.asc"));
    let plain = sops::decrypt(
        &read(&format!("{dir}/month/month.yaml")),
        Format::Yaml,
        &keys,
    )
    .unwrap();
    assert_eq!(plain, b"month: May\n");
    let plain = sops::decrypt(
        &read(&format!("{dir}/day.txt.encrypted")),
        Format::Binary,
        &keys,
    )
    .unwrap();
    assert_eq!(plain, b"day=Tuesday\n");
}

#[test]
fn fifos_in_the_artifact_are_refused_not_read() {
    let artifact = tempfile::tempdir().unwrap();
    let dir = artifact.path();
    std::fs::write(
        dir.join("kustomization.yaml"),
        "secretGenerator:\n- name: s\n  files:\n  - key=pipe\n",
    )
    .unwrap();
    let status = std::process::Command::new("mkfifo")
        .arg(dir.join("pipe"))
        .status()
        .unwrap();
    assert!(status.success());
    let err = sops::decrypt_build_inputs(dir, dir, &keys_from(AGE_KEY)).unwrap_err();
    assert!(err.to_string().contains("not a regular file"), "{err}");
}
