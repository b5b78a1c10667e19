//! The bundled example builds to what Kustomize v5.8.1 prints for it
//! (`examples/hello.expected.yaml`, written by `examples/regen.sh` with kubectl's kustomize).

use std::path::Path;

use kustomize_engine::kustomize::{self, BuildOptions};

#[test]
fn the_bundled_example_builds_as_kustomize_builds_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let objects = kustomize::build_dir(&root.join("hello"), &BuildOptions::default())
        .expect("the example builds");
    let expected = std::fs::read_to_string(root.join("hello.expected.yaml")).unwrap();
    assert_eq!(kustomize::to_yaml(&objects), expected);
}

#[test]
fn a_remote_base_is_refused_without_a_fetcher() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("kustomization.yaml"),
        "resources:\n- https://github.com/kubernetes-sigs/kustomize//examples/helloWorld?ref=v5.8.1\n",
    )
    .unwrap();
    let error = kustomize::build_dir(dir.path(), &BuildOptions::default()).unwrap_err();
    assert!(error.to_string().contains("remote"), "{error}");
}
