//! The engine's library options, which golden cases (built with kustomize's CLI defaults)
//! cannot show: remote-base hooks, load restrictions within a root, reordering and env-file
//! lookups.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use kustomize_controller::kustomize::{
    self, BuildOptions, DownloadError, EnvLookup, FetchError, KustomizeError, LoadRestrictions,
    RemoteBase, RemoteFetcher, Reorder,
};
use kustomize_controller::value::Value;

fn write(dir: &Path, name: &str, text: &str) {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn names(resources: &[Value]) -> Vec<String> {
    resources
        .iter()
        .map(|r| r["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

const CONFIGMAP: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: NAME\n";

#[derive(Debug)]
struct FakeRemote {
    dir: PathBuf,
}

impl RemoteFetcher for FakeRemote {
    fn fetch_repository(&self, url: &str) -> Result<RemoteBase, FetchError> {
        if url == "https://example.com/fleet//base?ref=v1" {
            Ok(RemoteBase {
                root: self.dir.clone(),
                dir: self.dir.clone(),
                repo: "https://example.com/fleet".into(),
                git_ref: "v1".into(),
            })
        } else {
            Err(format!("unknown repository {url}").into())
        }
    }

    /// Every URL reads as a repository here, so a `resources:` entry is tried as one next.
    fn download(&self, url: &str) -> Result<Vec<u8>, DownloadError> {
        Err(DownloadError::MaybeRepository(
            format!("{url}: URL is a git repository").into(),
        ))
    }
}

#[test]
fn remote_bases_go_through_the_fetcher_and_are_refused_without_one() {
    let remote = tempfile::tempdir().unwrap();
    write(
        remote.path(),
        "kustomization.yaml",
        "resources: [cm.yaml]\n",
    );
    write(
        remote.path(),
        "cm.yaml",
        &CONFIGMAP.replace("NAME", "from-remote"),
    );
    let local = tempfile::tempdir().unwrap();
    write(
        local.path(),
        "kustomization.yaml",
        "namePrefix: app-\nresources:\n- https://example.com/fleet//base?ref=v1\n",
    );

    let options = BuildOptions {
        remote: Some(Arc::new(FakeRemote {
            dir: remote.path().to_path_buf(),
        })),
        ..Default::default()
    };
    let built = kustomize::build(local.path(), local.path(), &options).unwrap();
    assert_eq!(names(&built), ["app-from-remote"]);

    let err = kustomize::build(local.path(), local.path(), &BuildOptions::default()).unwrap_err();
    assert!(
        matches!(err, KustomizeError::RemoteDisabled { .. }),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("https://example.com/fleet//base?ref=v1"),
        "{err}"
    );

    write(
        local.path(),
        "kustomization.yaml",
        "resources:\n- https://example.com/other\n",
    );
    let err = kustomize::build(local.path(), local.path(), &options).unwrap_err();
    assert!(err.to_string().contains("unknown repository"), "{err}");
}

#[test]
fn unrestricted_loading_stays_inside_the_root() {
    let root = tempfile::tempdir().unwrap();
    write(
        root.path(),
        "common/cm.yaml",
        &CONFIGMAP.replace("NAME", "common"),
    );
    write(
        root.path(),
        "app/kustomization.yaml",
        "resources: [../common/cm.yaml]\n",
    );
    let app = root.path().join("app");

    let err = kustomize::build(root.path(), &app, &BuildOptions::default()).unwrap_err();
    assert!(
        matches!(err, KustomizeError::OutsideRoot { .. }),
        "root-only by default: {err}"
    );

    let unrestricted = BuildOptions {
        load_restrictions: LoadRestrictions::None,
        ..Default::default()
    };
    let built = kustomize::build(root.path(), &app, &unrestricted).unwrap();
    assert_eq!(names(&built), ["common"]);

    // Nothing outside the build root, even unrestricted and even through a symlink.
    let outside = tempfile::tempdir().unwrap();
    write(
        outside.path(),
        "secret.yaml",
        &CONFIGMAP.replace("NAME", "stolen"),
    );
    std::os::unix::fs::symlink(outside.path().join("secret.yaml"), app.join("link.yaml")).unwrap();
    write(
        root.path(),
        "app/kustomization.yaml",
        "resources: [link.yaml]\n",
    );
    let err = kustomize::build(root.path(), &app, &unrestricted).unwrap_err();
    assert!(matches!(err, KustomizeError::OutsideRoot { .. }), "{err}");
}

#[test]
fn symlinks_cannot_escape_a_kustomization_under_root_only() {
    let root = tempfile::tempdir().unwrap();
    write(
        root.path(),
        "private/cm.yaml",
        &CONFIGMAP.replace("NAME", "private"),
    );
    write(
        root.path(),
        "app/kustomization.yaml",
        "resources: [cm.yaml]\n",
    );
    std::os::unix::fs::symlink(
        root.path().join("private/cm.yaml"),
        root.path().join("app/cm.yaml"),
    )
    .unwrap();
    let err = kustomize::build(
        root.path(),
        &root.path().join("app"),
        &BuildOptions::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("is not in or below"), "{err}");
}

#[test]
fn reorder_none_keeps_accumulation_order() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "kustomization.yaml",
        "resources: [b.yaml, a.yaml]\n",
    );
    write(
        dir.path(),
        "b.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: b\n",
    );
    write(
        dir.path(),
        "a.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n",
    );
    let legacy = kustomize::build_dir(dir.path(), &BuildOptions::default()).unwrap();
    assert_eq!(names(&legacy), ["a", "b"]);
    let fifo = BuildOptions {
        reorder: Some(Reorder::None),
        ..Default::default()
    };
    assert_eq!(
        names(&kustomize::build_dir(dir.path(), &fifo).unwrap()),
        ["b", "a"]
    );
}

#[test]
fn env_files_read_the_process_environment_only_when_allowed() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "kustomization.yaml",
        "configMapGenerator:\n- name: env\n  envs: [app.env]\n  options: {disableNameSuffixHash: true}\n",
    );
    write(dir.path(), "app.env", "PATH\nSET=1\n");
    let data = |lookup| {
        let options = BuildOptions {
            env_lookup: lookup,
            ..Default::default()
        };
        kustomize::build_dir(dir.path(), &options).unwrap()[0]["data"].clone()
    };
    assert_eq!(
        data(EnvLookup::Disabled)["PATH"],
        "",
        "a controller must not leak its environment"
    );
    assert_eq!(
        data(EnvLookup::Process)["PATH"],
        std::env::var("PATH").unwrap_or_default().as_str()
    );
    assert_eq!(data(EnvLookup::Disabled)["SET"], "1");
}

#[test]
fn inventory_hash_changes_exactly_when_objects_come_or_go() {
    let dir = tempfile::tempdir().unwrap();
    let kustomization = "resources: [cm.yaml]\ninventory:\n  type: ConfigMap\n  configMap: {name: inv, namespace: default}\n";
    write(dir.path(), "kustomization.yaml", kustomization);
    write(
        dir.path(),
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: one\n",
    );
    let hash = || {
        let built = kustomize::build_dir(dir.path(), &BuildOptions::default()).unwrap();
        let inventory = built
            .iter()
            .find(|o| o["metadata"]["name"] == "inv")
            .unwrap()
            .clone();
        inventory["metadata"]["annotations"]["kustomize.config.k8s.io/InventoryHash"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let first = hash();
    write(
        dir.path(),
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: two\n",
    );
    assert_eq!(hash(), first, "changed content, same objects");
    write(
        dir.path(),
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n",
    );
    assert_ne!(hash(), first, "an object was added");

    write(
        dir.path(),
        "kustomization.yaml",
        &kustomization.replace("type: ConfigMap", "type: App"),
    );
    let err = kustomize::build_dir(dir.path(), &BuildOptions::default()).unwrap_err();
    assert!(err.to_string().contains("inventory: type \"App\""), "{err}");
}

#[test]
fn managed_by_label_names_the_kustomize_release_we_match() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "kustomization.yaml",
        "buildMetadata: [managedByLabel]\nresources: [cm.yaml]\n",
    );
    write(dir.path(), "cm.yaml", &CONFIGMAP.replace("NAME", "a"));
    let built = kustomize::build_dir(dir.path(), &BuildOptions::default()).unwrap();
    assert_eq!(
        built[0]["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "kustomize-v5.8.1"
    );
    assert!(
        built[0]["metadata"].get("annotations").is_none(),
        "no other build metadata"
    );
}

#[test]
fn provenance_does_not_change_the_output() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/kustomize/app-overlay-dev/input/overlay");
    let plain = kustomize::build_dir(&dir, &BuildOptions::default()).unwrap();
    let (with, provenance) =
        kustomize::build_with_provenance(Path::new("/"), &dir, &BuildOptions::default()).unwrap();
    assert_eq!(plain, with);
    assert_eq!(provenance.len(), plain.len());
    assert!(
        provenance.iter().all(|p| p.origin.is_some()),
        "every object has an origin"
    );
}

/// As kustomize's loader: an absolute path may name a file (a resource, a patch), within the
/// load restrictions (at RootOnly in or below the kustomization's directory); a directory
/// named by an absolute path is refused ("new root cannot be absolute"). kubectl v1.37 gives
/// the same answers for the same tree.
#[test]
fn absolute_paths_name_files_within_the_load_restrictions_but_never_bases() {
    let tree = tempfile::tempdir().unwrap();
    let app = tree.path().join("app");
    let elsewhere = tree.path().join("elsewhere");
    write(&app, "cm.yaml", &CONFIGMAP.replace("NAME", "inside"));
    write(
        &app,
        "patch.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: inside\ndata:\n  patched: \"yes\"\n",
    );
    write(&elsewhere, "cm.yaml", &CONFIGMAP.replace("NAME", "outside"));
    write(
        &elsewhere,
        "base/kustomization.yaml",
        "resources: [../cm.yaml]\n",
    );
    let build = |kustomization: String, load_restrictions: LoadRestrictions| {
        write(&app, "kustomization.yaml", &kustomization);
        let options = BuildOptions {
            load_restrictions,
            ..Default::default()
        };
        kustomize::build(Path::new("/"), &app, &options)
    };

    let built = build(
        format!(
            "resources:\n- {}\npatches:\n- path: {}\n",
            app.join("cm.yaml").display(),
            app.join("patch.yaml").display()
        ),
        LoadRestrictions::RootOnly,
    )
    .unwrap();
    assert_eq!(names(&built), ["inside"]);
    assert_eq!(built[0]["data"]["patched"], "yes");

    let outside = format!("resources:\n- {}\n", elsewhere.join("cm.yaml").display());
    let err = build(outside.clone(), LoadRestrictions::RootOnly).unwrap_err();
    assert!(err.to_string().contains("is not in or below"), "{err}");
    let built = build(outside.clone(), LoadRestrictions::None).unwrap();
    assert_eq!(names(&built), ["outside"]);
    // The controller builds inside the artifact's root: nothing outside it is read, however
    // named.
    let options = BuildOptions {
        load_restrictions: LoadRestrictions::None,
        ..Default::default()
    };
    let err = kustomize::build(&app, &app, &options).unwrap_err();
    assert!(matches!(err, KustomizeError::OutsideRoot { .. }), "{err}");

    let base = elsewhere.join("base");
    let err = build(
        format!("resources:\n- {}\n", base.display()),
        LoadRestrictions::None,
    )
    .unwrap_err();
    assert!(
        matches!(err, KustomizeError::AbsolutePath { .. })
            && err.to_string().contains("cannot be absolute"),
        "{err}"
    );
}
