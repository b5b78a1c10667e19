//! The fuzz targets' harnesses (`fuzz/harness.rs`) over their committed corpus and over
//! mutations of it, on the stable toolchain: every input must end without a panic, a stack
//! overflow or a runaway. `cargo +nightly fuzz run …` explores further (`fuzz/Cargo.toml`).

#[allow(dead_code)]
mod harness {
    include!("../../fuzz/harness.rs");
}

use std::path::PathBuf;

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    entries.sort();
    assert!(!entries.is_empty(), "{} is empty", dir.display());
    entries
        .iter()
        .map(|path| std::fs::read(path).unwrap())
        .collect()
}

/// Deterministic mutations, as a fuzzer's simplest ones: byte flips, truncations,
/// duplicated spans and bytes that matter to YAML.
fn mutations(seed: &[u8], rounds: usize) -> Vec<Vec<u8>> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64 ^ seed.len() as u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let special = [
        b':', b'-', b'\n', b' ', b'&', b'*', b'[', b'{', b'|', b'0', b'\0',
    ];
    (0..rounds)
        .map(|_| {
            let mut data = seed.to_vec();
            if data.is_empty() {
                return vec![b'-'];
            }
            let at = (next() as usize) % data.len();
            match next() % 4 {
                0 => data[at] ^= 1 << (next() % 8),
                1 => data.truncate(at),
                2 => {
                    let end = (at + 1 + (next() as usize) % 64).min(data.len());
                    let span = data[at..end].to_vec();
                    data.splice(at..at, span);
                }
                _ => data[at] = special[(next() as usize) % special.len()],
            }
            data
        })
        .collect()
}

#[test]
fn build_harness_survives_its_corpus_and_mutations() {
    for seed in corpus("build_tree") {
        harness::build(&seed);
        for mutated in mutations(&seed, 32) {
            harness::build(&mutated);
        }
    }
}

#[test]
fn sops_harness_survives_its_corpus_and_mutations() {
    for seed in corpus("sops_decrypt") {
        harness::sops_decrypt(&seed);
        for mutated in mutations(&seed, 64) {
            harness::sops_decrypt(&mutated);
        }
    }
}
