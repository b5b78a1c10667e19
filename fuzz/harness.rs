// The fuzz harnesses, shared by the `cargo fuzz` targets in `fuzz_targets/` and the stable
// test that replays the committed corpus (`tests/integration/fuzz_corpus.rs`), which
// includes this file. Each takes arbitrary bytes and must return, never panic, overflow or
// run away: errors are fine.

/// The files of a generated tree: the input split at NUL bytes; the first part is the top
/// `kustomization.yaml`, the others `r0.yaml`, `r1.yaml`… beside it, and a part starting
/// with `base/` goes into a base directory the top may include.
pub fn tree_files(data: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    let mut resources = 0;
    for (index, part) in data.split(|b| *b == 0).take(16).enumerate() {
        if index == 0 {
            files.push(("kustomization.yaml".to_string(), part.to_vec()));
        } else if let Some(rest) = part.strip_prefix(b"base/") {
            let name = if files.iter().any(|(n, _)| n == "base/kustomization.yaml") {
                format!("base/r{index}.yaml")
            } else {
                "base/kustomization.yaml".to_string()
            };
            files.push((name, rest.to_vec()));
        } else {
            files.push((format!("r{resources}.yaml"), part.to_vec()));
            resources += 1;
        }
    }
    files
}

/// Builds the tree `data` describes in a fresh directory, with the build's default limits.
pub fn build(data: &[u8]) {
    use kustomize_controller::kustomize::{self, BuildOptions};
    let Ok(dir) = tempfile::tempdir() else {
        return;
    };
    for (name, content) in tree_files(data) {
        let path = dir.path().join(&name);
        if let Some(parent) = path.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        let _ = std::fs::write(path, content);
    }
    if let Ok(objects) = kustomize::build(dir.path(), dir.path(), &BuildOptions::default()) {
        let _ = kustomize::to_yaml(&objects);
    }
}

/// Decrypts `data` as a SOPS document in the format its first byte picks, with no keys (no
/// key service is ever called): parsing, metadata and recipient handling are what is fuzzed.
pub fn sops_decrypt(data: &[u8]) {
    use kustomize_controller::sops::{self, Format, Keys};
    let Some((selector, content)) = data.split_first() else {
        return;
    };
    let format = match selector % 5 {
        0 => Format::Yaml,
        1 => Format::Json,
        2 => Format::Dotenv,
        3 => Format::Ini,
        _ => Format::Binary,
    };
    let keys = Keys::new();
    let _ = sops::decrypt(content, format, &keys);
    let _ = sops::decrypt_with(content, format, &keys, false);
}
