//! Golden cases for the build engine: every folder under `tests/fixtures/kustomize/` holds an
//! `input/` tree and what Kustomize v5.8.1 (`kubectl kustomize`) made of it, committed by
//! `tests/fixtures/kustomize/regen.sh`. A successful case must match `expected.yaml` byte for
//! byte; a failing case must fail with a message containing every line of
//! `expected-error.txt` (kubectl's own message is kept beside it in `kubectl-error.txt`).

use std::path::{Path, PathBuf};

use kustomize_controller::kustomize::{self, BuildOptions};

use crate::support::repo_root;

fn cases() -> Vec<PathBuf> {
    cases_in("tests/fixtures/kustomize")
}

fn cases_in(folder: &str) -> Vec<PathBuf> {
    let root = repo_root().join(folder);
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.join("input").is_dir())
        .collect();
    cases.sort();
    cases
}

fn build_dir(case: &Path) -> PathBuf {
    let overlay = case.join("input/overlay");
    if overlay.is_dir() {
        overlay
    } else {
        case.join("input")
    }
}

/// Checks one case; `Err` describes how it differs from the reference.
fn check(case: &Path) -> Result<(), String> {
    check_built(case, &build_dir(case))
}

/// Checks one case built from `dir`.
fn check_built(case: &Path, dir: &Path) -> Result<(), String> {
    let result = kustomize::build_dir(dir, &BuildOptions::default());
    let expected_output = case.join("expected.yaml");
    if expected_output.is_file() {
        let mut expected = std::fs::read_to_string(&expected_output).unwrap();
        // regen.sh writes kubectl's output and a line break: nothing printed is that break.
        if expected == "\n" {
            expected.clear();
        }
        let resources = result.map_err(|e| format!("failed where kustomize succeeds: {e}"))?;
        let actual = kustomize::to_yaml(&resources);
        if actual != expected {
            return Err(format!(
                "output differs\n{}",
                first_difference(&expected, &actual)
            ));
        }
        return Ok(());
    }
    assert!(
        case.join("kubectl-error.txt").is_file(),
        "{}: neither expected.yaml nor kubectl-error.txt",
        case.display()
    );
    let fragments = std::fs::read_to_string(case.join("expected-error.txt"))
        .unwrap_or_else(|_| panic!("{}: error case without expected-error.txt", case.display()));
    let message = match result {
        Ok(_) => return Err("succeeded where kustomize fails".into()),
        Err(e) => e.to_string(),
    };
    for fragment in fragments.lines().filter(|l| !l.is_empty()) {
        if !message.contains(fragment) {
            return Err(format!("error {message:?} lacks {fragment:?}"));
        }
    }
    Ok(())
}

fn first_difference(expected: &str, actual: &str) -> String {
    let line = expected
        .lines()
        .zip(actual.lines())
        .position(|(a, b)| a != b)
        .unwrap_or_else(|| expected.lines().count().min(actual.lines().count()));
    let window = |text: &str| {
        text.lines()
            .skip(line.saturating_sub(2))
            .take(5)
            .collect::<Vec<_>>()
            .join("\n")
    };
    format!(
        "at line {}:\n--- expected\n{}\n--- actual\n{}",
        line + 1,
        window(expected),
        window(actual)
    )
}

#[test]
fn golden_cases_match_kustomize() {
    let cases = cases();
    assert!(!cases.is_empty(), "no golden cases found");
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|case| {
            check(case)
                .err()
                .map(|why| format!("{}: {why}", case.file_name().unwrap().to_string_lossy()))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} golden cases fail:\n\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n\n")
    );
}

/// Features beyond Kustomize v5.8.1: our output is pinned in `expected.yaml`, and whatever
/// kustomize can still produce (the build without the extension) must match its output.
#[test]
fn extension_cases_match_their_spec_and_kustomize_where_it_applies() {
    let root = repo_root().join("tests/fixtures/kustomize-extensions");
    let case = root.join("inventory-mysql");
    let built = kustomize::build_dir(&case.join("input"), &BuildOptions::default()).unwrap();
    assert_eq!(
        kustomize::to_yaml(&built),
        std::fs::read_to_string(case.join("expected.yaml")).unwrap()
    );

    let is_inventory = |o: &kustomize_controller::value::Value| {
        o["metadata"]["annotations"]
            .get("kustomize.config.k8s.io/Inventory")
            .is_some()
    };
    let without: Vec<_> = built.iter().filter(|o| !is_inventory(o)).cloned().collect();
    assert_eq!(
        kustomize::to_yaml(&without),
        std::fs::read_to_string(case.join("kubectl-without-inventory.yaml")).unwrap()
    );

    let inventory = built
        .iter()
        .find(|o| is_inventory(o))
        .expect("an inventory ConfigMap");
    let content: serde_json::Value = serde_json::from_str(
        inventory["metadata"]["annotations"]["kustomize.config.k8s.io/Inventory"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    let ids: Vec<String> = content["current"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(ids.len(), without.len(), "one entry per object");
    assert_eq!(
        inventory["metadata"]["annotations"]["kustomize.config.k8s.io/InventoryHash"],
        kustomize::inventory_hash(&ids).as_str()
    );
}

/// Kustomize's own `api/krusty` tests at kustomize/v5.8.1, as golden cases written by
/// `tools/krusty_cases.py` into `tests/fixtures/kustomize-upstream/` (`INDEX.md` maps every
/// upstream test; `RESULTS.md` lists ours). A case builds `input/` or the folder its
/// `build-dir` names. The cases in `known-failures.txt` are what the engine does not match yet:
/// each must still fail (remove it from the list once it passes), every other case must pass.
#[test]
fn upstream_krusty_cases_match_kustomize() {
    upstream_cases_match_kustomize("tests/fixtures/kustomize-upstream", 250);
}

/// The table tests of kustomize's filters (`api/filters/*`, kyaml's `merge2`) and the tests of
/// its builtin plugins (`plugin/builtin/*`) at kustomize/v5.8.1, each row or plugin run a
/// build written by `tools/filter_cases.py` into `tests/fixtures/kustomize-upstream-filters/`
/// with what kubectl made of it (`INDEX.md` maps them), held to the same rule as the krusty
/// cases.
#[test]
fn upstream_filter_cases_match_kustomize() {
    upstream_cases_match_kustomize("tests/fixtures/kustomize-upstream-filters", 300);
}

/// Every case of `folder` matches kubectl's verdict, but those its `known-failures.txt`
/// lists, which must still differ.
fn upstream_cases_match_kustomize(folder: &str, at_least: usize) {
    let known: std::collections::BTreeSet<String> =
        std::fs::read_to_string(repo_root().join(folder).join("known-failures.txt"))
            .unwrap_or_default()
            .lines()
            .map(|line| line.split('#').next().unwrap_or("").trim().to_string())
            .filter(|line| !line.is_empty())
            .collect();
    let cases = cases_in(folder);
    assert!(cases.len() > at_least, "the upstream cases are missing");
    let mut problems = Vec::new();
    let mut failing = 0;
    for case in &cases {
        let name = case.file_name().unwrap().to_string_lossy().to_string();
        let dir = match std::fs::read_to_string(case.join("build-dir")) {
            Ok(relative) => case.join("input").join(relative.trim()),
            Err(_) => case.join("input"),
        };
        match (check_built(case, &dir), known.contains(&name)) {
            (Ok(()), true) => problems.push(format!(
                "{name}: passes now; remove it from known-failures.txt"
            )),
            (Err(why), false) => problems.push(format!("{name}: {why}")),
            (Err(_), true) => failing += 1,
            (Ok(()), false) => {}
        }
    }
    assert!(
        problems.is_empty(),
        "{} of {} upstream cases differ from what is expected of them:\n\n{}",
        problems.len(),
        cases.len(),
        problems.join("\n\n")
    );
    assert_eq!(failing, known.len(), "every known failure names a case");
}
