//! The binary as a user runs it: the README's commands, `crds`, `version`, flags and errors.

use kustomize_controller::api::CRD_FILE_NAME;

use crate::support::{repo_root, run_cli, stderr_of, stdout_of};

#[test]
fn readme_main_command_renders_the_bundled_example_like_kustomize() {
    let output = run_cli(&["build", "examples/podinfo"]);
    assert!(output.status.success(), "{}", stderr_of(&output));
    let expected =
        std::fs::read_to_string(repo_root().join("tests/fixtures/examples/podinfo.yaml")).unwrap();
    assert_eq!(stdout_of(&output), expected);
}

#[test]
fn crds_prints_the_committed_crd() {
    let output = run_cli(&["crds"]);
    assert!(output.status.success(), "{}", stderr_of(&output));
    let committed = std::fs::read_to_string(repo_root().join("crds").join(CRD_FILE_NAME)).unwrap();
    assert_eq!(stdout_of(&output), committed, "run `make crds`");
}

#[test]
fn version_names_the_package_version() {
    let output = run_cli(&["version"]);
    assert!(output.status.success());
    assert_eq!(
        stdout_of(&output),
        format!("kustomize-controller {}\n", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn help_lists_only_working_commands() {
    let output = run_cli(&["--help"]);
    let help = stdout_of(&output);
    for command in ["run", "diff", "build", "edit", "sops", "crds", "version"] {
        assert!(
            help.contains(&format!("\n  {command} ")),
            "{command} missing from:\n{help}"
        );
    }
}

#[test]
fn logging_flags_are_accepted_and_validated() {
    let output = run_cli(&[
        "--log-level",
        "debug",
        "--log-encoding",
        "console",
        "version",
    ]);
    assert!(output.status.success(), "{}", stderr_of(&output));
    let output = run_cli(&["--log-encoding", "xml", "version"]);
    assert!(!output.status.success());
    assert!(stderr_of(&output).contains("xml"), "{}", stderr_of(&output));
}

#[test]
fn a_failed_build_exits_nonzero_with_one_clear_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("kustomization.yaml"),
        "resources:\n- missing.yaml\n",
    )
    .unwrap();
    let output = run_cli(&["build", dir.path().to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    assert!(output.stdout.is_empty(), "nothing half-printed on failure");
    let stderr = stderr_of(&output);
    assert!(stderr.starts_with("error: building "), "{stderr}");
    assert!(
        stderr.contains("missing.yaml: No such file or directory"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("panicked") && !stderr.contains("stack backtrace"),
        "{stderr}"
    );
}

/// A patch that fails is named by the path it was read from, as the kustomization before it
/// is (not relative to the filesystem's root: `tmp/…`).
#[test]
fn a_failed_patch_is_named_by_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
    write(
        "kustomization.yaml",
        "resources:\n- cm.yaml\npatches:\n- path: patch.yaml\n",
    );
    write(
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  x: \"1\"\n",
    );
    write(
        "patch.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n- wrong\n",
    );
    let output = run_cli(&["build", dir.path().to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = stderr_of(&output);
    let patch = dir.path().canonicalize().unwrap().join("patch.yaml");
    assert!(
        stderr.contains(&format!(
            "{}: ConfigMap.v1.[noGrp]/a.[noNs]: wrong node kind",
            patch.display()
        )),
        "{stderr}"
    );
}

#[test]
fn build_honours_kustomize_load_restrictor_flag() {
    let dir = "tests/fixtures/kustomize/error-file-outside-root/input/overlay";
    let output = run_cli(&["build", dir]);
    assert!(!output.status.success());
    assert!(
        stderr_of(&output).contains("is not in or below"),
        "{}",
        stderr_of(&output)
    );
    let output = run_cli(&["build", dir, "--load-restrictor", "LoadRestrictionsNone"]);
    assert!(output.status.success(), "{}", stderr_of(&output));
    assert!(stdout_of(&output).contains("kind: ConfigMap"));
}

#[test]
fn build_provenance_prints_origins_and_transformer_chains() {
    let dir = "tests/fixtures/kustomize/buildmetadata-bases-components-configs/input/overlay";
    let output = run_cli(&["build", dir, "--provenance"]);
    assert!(output.status.success(), "{}", stderr_of(&output));
    let table = stdout_of(&output);
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines[0].starts_with("OBJECT") && lines[0].contains("TRANSFORMED BY"),
        "{table}"
    );
    let cm = lines
        .iter()
        .find(|l| l.starts_with("ConfigMap/team/cm "))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(cm.contains("../base/cm.yaml"), "{cm}");
    assert!(
        cm.contains("NamespaceTransformer (../base/kustomization.yaml) → AnnotationsTransformer (../comp/kustomization.yaml) → LabelTransformer my-labels (labels.yaml)"),
        "{cm}"
    );

    let output = run_cli(&["build", dir, "--provenance=json"]);
    assert!(output.status.success(), "{}", stderr_of(&output));
    let entries: serde_json::Value = serde_json::from_str(&stdout_of(&output)).unwrap();
    let generated = entries
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"].as_str().unwrap().starts_with("gen-"))
        .unwrap();
    assert_eq!(generated["apiVersion"], "v1");
    assert_eq!(
        generated["origin"]["configuredBy"]["kind"],
        "ConfigMapGenerator"
    );
    assert_eq!(
        generated["origin"]["configuredIn"],
        "../base/kustomization.yaml"
    );
}

#[test]
fn edit_build_metadata_rewrites_only_that_field() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("kustomization.yaml");
    std::fs::write(&file, "# keep me\nresources: [] # and me\n").unwrap();
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_kustomize-controller"))
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    let output = run(&[
        "edit",
        "add",
        "buildmetadata",
        "originAnnotations,managedByLabel",
    ]);
    assert!(output.status.success(), "{}", stderr_of(&output));
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "# keep me\nresources: [] # and me\nbuildMetadata:\n- originAnnotations\n- managedByLabel\n"
    );
    let output = run(&["edit", "remove", "buildmetadata", "*"]);
    assert!(output.status.success(), "{}", stderr_of(&output));
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "# keep me\nresources: [] # and me\n"
    );
    let output = run(&["edit", "add", "buildmetadata", "origins"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr_of(&output).contains("invalid buildMetadata option \"origins\""),
        "{}",
        stderr_of(&output)
    );
}
