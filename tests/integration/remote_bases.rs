//! Remote bases fetched with gix from repositories the tests create and serve themselves:
//! `file://` URLs and a `git daemon` on loopback; files served over HTTP on loopback. Nothing
//! leaves the machine.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kustomize_controller::kustomize::{self, BuildOptions, KustomizeError};
use kustomize_controller::remote::Fetcher;
use kustomize_controller::value::Value;

use crate::support::process::Supervised;

fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .args([
            "-c",
            "init.defaultBranch=main",
            "-c",
            "user.name=test",
            "-c",
            "user.email=test@example.com",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs");
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

fn write(dir: &Path, name: &str, text: &str) {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A repository with `base/` (using `../common/`) at tag `v1`, then a newer `main`.
/// Returns the repository directory and the first commit's id.
fn make_repository(root: &Path) -> (PathBuf, String) {
    let repo = root.join("fleet");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    write(&repo, "common/kustomization.yaml", "resources: [sa.yaml]\n");
    write(
        &repo,
        "common/sa.yaml",
        "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: app\n",
    );
    write(
        &repo,
        "base/kustomization.yaml",
        "resources: [../common, cm.yaml]\n",
    );
    write(
        &repo,
        "base/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  version: one\n",
    );
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "one"]);
    git(&repo, &["tag", "v1"]);
    let first = git(&repo, &["rev-parse", "HEAD"]);
    write(
        &repo,
        "base/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  version: two\n",
    );
    git(&repo, &["commit", "-q", "-am", "two"]);
    (repo, first)
}

fn build_with_remote(kustomization: &str) -> Result<Vec<Value>, KustomizeError> {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "kustomization.yaml", kustomization);
    let options = BuildOptions {
        remote: Some(Arc::new(Fetcher::default())),
        ..Default::default()
    };
    kustomize::build_dir(dir.path(), &options)
}

fn version_of(built: &[Value]) -> String {
    let cm = built
        .iter()
        .find(|o| o["kind"] == "ConfigMap")
        .expect("the ConfigMap");
    cm["data"]["version"].as_str().unwrap().to_string()
}

/// A remote that cannot be reached says why: the connection was refused, or nothing
/// answered within the timeout.
#[test]
fn unreachable_remotes_name_the_cause() {
    let build = |url: &str, limits: kustomize_controller::remote::Limits| {
        let app = tempfile::tempdir().unwrap();
        std::fs::write(
            app.path().join("kustomization.yaml"),
            format!("resources:\n- {url}\n"),
        )
        .unwrap();
        let options = BuildOptions {
            remote: Some(Arc::new(Fetcher::new(limits))),
            ..Default::default()
        };
        kustomize_controller::kustomize::build(app.path(), app.path(), &options)
            .unwrap_err()
            .to_string()
    };
    let closed = crate::support::free_port();
    let error = build(
        &format!("http://127.0.0.1:{closed}/cm.yaml"),
        Default::default(),
    );
    assert!(error.contains("Connection refused"), "{error}");
    // Tried as a file, then as a repository (kustomize's order): both causes are told.
    let error = build(
        &format!("http://127.0.0.1:{closed}/org/repo//base"),
        Default::default(),
    );
    let as_file = error.find("as a file: ").expect(&error);
    let as_repository = error.find("; as a repository: ").expect(&error);
    assert!(as_file < as_repository, "{error}");
    assert_eq!(error.matches("Connection refused").count(), 2, "{error}");

    // Accepts, never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/cm.yaml", silent.local_addr().unwrap());
    let error = build(
        &url,
        kustomize_controller::remote::Limits {
            default_timeout: std::time::Duration::from_secs(1),
            ..Default::default()
        },
    );
    assert!(error.contains("timed out after 1s"), "{error}");
    drop(silent);
}

/// The controller's fetcher reads repositories over the network only: a `file://` base
/// would let one tenant's tree read another's repository from the controller's disk.
#[test]
fn the_controllers_fetcher_refuses_file_urls() {
    let root = tempfile::tempdir().unwrap();
    let (repo, _) = make_repository(root.path());
    let url = format!("file://{}//base?ref=v1", repo.display());
    let app = tempfile::tempdir().unwrap();
    std::fs::write(
        app.path().join("kustomization.yaml"),
        format!("resources:\n- {url}\n"),
    )
    .unwrap();
    let options = BuildOptions {
        remote: Some(Arc::new(Fetcher::network_only())),
        ..Default::default()
    };
    let error = kustomize_controller::kustomize::build(app.path(), app.path(), &options)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("file:// remote bases are refused") && error.contains("kustomization.yaml"),
        "{error}"
    );
}

#[test]
fn file_urls_with_tags_branches_and_commits() {
    let root = tempfile::tempdir().unwrap();
    let (repo, first) = make_repository(root.path());
    let url = format!("file://{}", repo.display());

    let built = build_with_remote(&format!(
        "namePrefix: p-\nresources:\n- {url}//base?ref=v1\n"
    ))
    .unwrap();
    assert_eq!(version_of(&built), "one");
    let names: Vec<&str> = built
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["p-app", "p-settings"],
        "the base's own ../common base is inside the repository"
    );

    assert_eq!(
        version_of(&build_with_remote(&format!("resources:\n- {url}//base?ref=main\n")).unwrap()),
        "two"
    );
    assert_eq!(
        version_of(&build_with_remote(&format!("resources:\n- {url}//base\n")).unwrap()),
        "two"
    );
    assert_eq!(
        version_of(
            &build_with_remote(&format!("resources:\n- {url}//base?ref={first}\n")).unwrap()
        ),
        "one"
    );
    assert_eq!(
        version_of(
            &build_with_remote(&format!("resources:\n- {url}//base?ref={}\n", &first[..10]))
                .unwrap()
        ),
        "one"
    );
}

#[test]
fn provenance_names_repository_ref_and_repository_path() {
    let root = tempfile::tempdir().unwrap();
    let (repo, _) = make_repository(root.path());
    let url = format!("file://{}", repo.display());
    let built = build_with_remote(&format!(
        "buildMetadata: [originAnnotations]\nresources:\n- {url}//base?ref=v1\n"
    ))
    .unwrap();
    let cm = built.iter().find(|o| o["kind"] == "ConfigMap").unwrap();
    assert_eq!(
        cm["metadata"]["annotations"]["config.kubernetes.io/origin"],
        format!("path: base/cm.yaml\nrepo: {url}\nref: v1\n").as_str()
    );
}

/// A `git daemon` serving `base` on a free loopback port, stopped (with the `git-daemon` it
/// forks) on drop or when the test process ends.
struct Daemon {
    _process: Supervised,
    port: u16,
}

impl Daemon {
    fn start(base: &Path) -> Daemon {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut command = Command::new("git");
        command
            .args([
                "daemon",
                "--reuseaddr",
                "--export-all",
                "--listen=127.0.0.1",
            ])
            .arg(format!("--port={port}"))
            .arg(format!("--base-path={}", base.display()))
            .arg(base)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let process = Supervised::spawn(&mut command).expect("git daemon starts");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "git daemon did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Daemon {
            _process: process,
            port,
        }
    }
}

#[test]
fn git_protocol_on_loopback() {
    let root = tempfile::tempdir().unwrap();
    make_repository(root.path());
    let daemon = Daemon::start(root.path());
    let built = build_with_remote(&format!(
        "resources:\n- git://127.0.0.1:{}/fleet//base?ref=v1\n",
        daemon.port
    ))
    .unwrap();
    assert_eq!(version_of(&built), "one");

    let err = build_with_remote(&format!(
        "resources:\n- git://127.0.0.1:{}/missing//base\n",
        daemon.port
    ))
    .unwrap_err();
    assert!(matches!(err, KustomizeError::RemoteFailed { .. }), "{err}");
}

#[test]
fn cycles_between_repositories_are_refused() {
    let root = tempfile::tempdir().unwrap();
    let repo = root.path().join("loop");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    let url = format!("file://{}//app", repo.display());
    write(
        &repo,
        "app/kustomization.yaml",
        &format!("resources:\n- {url}\n"),
    );
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "loop"]);
    let err = build_with_remote(&format!("resources:\n- {url}\n")).unwrap_err();
    assert!(matches!(err, KustomizeError::Cycle { .. }), "{err}");
}

#[test]
fn bad_paths_submodules_and_disabled_remotes() {
    let root = tempfile::tempdir().unwrap();
    let (repo, _) = make_repository(root.path());
    let url = format!("file://{}", repo.display());
    let err = build_with_remote(&format!("resources:\n- {url}//nowhere\n")).unwrap_err();
    assert!(
        err.to_string()
            .contains("not a directory inside the repository"),
        "{err}"
    );

    // A gitlink entry makes a submodule.
    let first = git(&repo, &["rev-parse", "HEAD"]);
    git(
        &repo,
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("160000,{first},base/vendored"),
        ],
    );
    git(&repo, &["commit", "-q", "-m", "submodule"]);
    let err = build_with_remote(&format!("resources:\n- {url}//base\n")).unwrap_err();
    assert!(err.to_string().contains("submodule"), "{err}");
    let built =
        build_with_remote(&format!("resources:\n- {url}//base?submodules=false\n")).unwrap();
    assert_eq!(version_of(&built), "two");

    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "kustomization.yaml",
        &format!("resources:\n- {url}//base\n"),
    );
    let err = kustomize::build_dir(dir.path(), &BuildOptions::default()).unwrap_err();
    assert!(
        matches!(err, KustomizeError::RemoteDisabled { .. }),
        "{err}"
    );
}

/// Serves `body` for every request on a loopback port, `count` times, then stops.
fn serve_http(body: &'static str, count: usize) -> (u16, std::thread::JoinHandle<()>) {
    use std::io::{Read, Write};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let handle = std::thread::spawn(move || {
        for stream in listener.incoming().take(count) {
            let mut stream = stream.unwrap();
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request);
            let response = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nContent-Type: text/yaml\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes());
        }
    });
    (port, handle)
}

#[test]
fn plain_http_files_are_downloaded_with_a_size_limit() {
    let (port, server) = serve_http(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-http\n",
        1,
    );
    let built = build_with_remote(&format!(
        "resources:\n- http://127.0.0.1:{port}/manifests/cm.yaml\n"
    ))
    .unwrap();
    assert_eq!(built[0]["metadata"]["name"], "from-http");
    server.join().unwrap();

    let (port, server) = serve_http(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: too-big\n",
        1,
    );
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "kustomization.yaml",
        &format!("resources:\n- http://127.0.0.1:{port}/cm.yaml\n"),
    );
    let small = kustomize_controller::remote::Limits {
        max_bytes: 10,
        ..Default::default()
    };
    let options = BuildOptions {
        remote: Some(Arc::new(Fetcher::new(small))),
        ..Default::default()
    };
    let err = kustomize::build_dir(dir.path(), &options).unwrap_err();
    assert!(err.to_string().contains("exceeds the limit of 10"), "{err}");
    server.join().unwrap();
}

/// Serves the files of a directory on a loopback port (404 for anything else), one request
/// per connection, until dropped.
struct FileServer {
    port: u16,
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FileServer {
    fn serve(dir: &Path) -> FileServer {
        use std::io::{Read, Write};
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (dir, stopped) = (dir.to_path_buf(), stop.clone());
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopped.load(std::sync::atomic::Ordering::SeqCst) {
                    break;
                }
                let Ok(mut stream) = stream else { continue };
                let mut request = [0u8; 4096];
                let read = stream.read(&mut request).unwrap_or(0);
                let request = String::from_utf8_lossy(&request[..read]);
                let path = request.split_whitespace().nth(1).unwrap_or("/");
                let file = dir.join(path.trim_start_matches('/'));
                let (status, body) = match std::fs::read(&file) {
                    Ok(body) if !path.contains("..") => ("200 OK", body),
                    _ => ("404 Not Found", b"not found".to_vec()),
                };
                let head = format!(
                    "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(head.as_bytes());
                let _ = stream.write_all(&body);
            }
        });
        FileServer {
            port,
            stop,
            thread: Some(thread),
        }
    }

    fn url(&self, name: &str) -> String {
        format!("http://127.0.0.1:{}/{name}", self.port)
    }
}

impl Drop for FileServer {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        // Wakes the accept loop so that it sees the flag.
        let _ = std::net::TcpStream::connect(("127.0.0.1", self.port));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Wherever a kustomization names a file (an OpenAPI schema, a patch, a strategic merge
/// patch, a generator's files and env files, a configuration, a replacement, a transformer's
/// config), an http(s) URL is downloaded as kustomize's loader downloads it. The golden case
/// names the same files locally; kubectl v1.37 builds both forms alike (checked against
/// `python3 -m http.server` when the case was made), so the URL build must print the case's
/// expected output.
#[test]
fn files_named_by_url_are_downloaded_wherever_a_kustomization_names_a_file() {
    let case = crate::support::repo_root()
        .join("tests/fixtures/kustomize/files-named-by-url-read-as-local-files");
    let server = FileServer::serve(&case.join("input"));
    let local = std::fs::read_to_string(case.join("input/kustomization.yaml")).unwrap();
    let mut by_url = local.clone();
    for (local_form, name) in [
        ("path: schema.json", "schema.json"),
        ("path: widget-patch.yaml", "widget-patch.yaml"),
        ("- deployment-patch.yaml", "deployment-patch.yaml"),
        ("  - app.properties", "app.properties"),
        ("renamed=app.properties", "app.properties"),
        ("- app.env", "app.env"),
        ("- name-reference.yaml", "name-reference.yaml"),
        ("path: replacement.yaml", "replacement.yaml"),
        ("- label-transformer.yaml", "label-transformer.yaml"),
    ] {
        assert!(by_url.contains(local_form), "{local_form}");
        let prefix = local_form.strip_suffix(name).unwrap();
        by_url = by_url.replace(local_form, &format!("{prefix}{}", server.url(name)));
    }
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "kustomization.yaml", &by_url);
    for resource in ["widget.yaml", "deployment.yaml"] {
        std::fs::copy(case.join("input").join(resource), dir.path().join(resource)).unwrap();
    }
    let options = BuildOptions {
        remote: Some(Arc::new(Fetcher::default())),
        ..Default::default()
    };
    let built = kustomize::build_dir(dir.path(), &options).unwrap();
    let expected = std::fs::read_to_string(case.join("expected.yaml")).unwrap();
    assert_eq!(kustomize::to_yaml(&built), expected);

    // Without a fetcher (`--no-remote-bases`) the URL is refused, not read from the disk.
    let err = kustomize::build_dir(dir.path(), &BuildOptions::default()).unwrap_err();
    assert!(
        matches!(err, KustomizeError::RemoteFileDisabled { .. }),
        "{err}"
    );
}

/// A file that is not there fails the build in kustomize's words, naming the URL; a URL
/// that reads as a repository says so.
#[test]
fn a_missing_file_named_by_url_fails_the_build_naming_it() {
    let served = tempfile::tempdir().unwrap();
    let server = FileServer::serve(served.path());
    let build = |kustomization: String| {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n",
        );
        write(dir.path(), "kustomization.yaml", &kustomization);
        let options = BuildOptions {
            remote: Some(Arc::new(Fetcher::default())),
            ..Default::default()
        };
        kustomize::build_dir(dir.path(), &options)
            .unwrap_err()
            .to_string()
    };
    let missing = server.url("missing.yaml");
    let message = build(format!(
        "resources: [cm.yaml]\npatches:\n- path: {missing}\n"
    ));
    assert!(
        message.contains(&format!("remote file {missing:?}"))
            && message.contains("HTTP Error: status code 404 (Not Found)"),
        "{message}"
    );
    let repository = server.url("org/repo//patch.yaml");
    let message = build(format!(
        "resources: [cm.yaml]\npatches:\n- path: {repository}\n"
    ));
    assert!(message.contains("URL is a git repository"), "{message}");
}

/// kustomize loads every `resources:` URL as a file first, so a URL that reads as a
/// repository (`.git` in it, as every raw.githubusercontent.com address has) but answers
/// with manifests is those manifests; an error status that does not read as a repository
/// ends there, and malformed YAML that is no repository either is reported alone.
#[test]
fn resource_urls_are_tried_as_files_before_repositories() {
    let served = tempfile::tempdir().unwrap();
    write(
        served.path(),
        "org/repo.git/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-dot-git\n",
    );
    write(served.path(), "bad.yaml", "a: [\n");
    let server = FileServer::serve(served.path());
    let build = |entry: String| build_with_remote(&format!("resources:\n- {entry}\n"));

    let built = build(server.url("org/repo.git/cm.yaml")).unwrap();
    assert_eq!(built[0]["metadata"]["name"], "from-dot-git");

    let missing = server.url("missing.yaml");
    let err = build(missing.clone()).unwrap_err();
    assert!(
        matches!(err, KustomizeError::RemoteFailed { .. })
            && err.to_string().ends_with(&format!(
                "fetching {missing}: HTTP Error: status code 404 (Not Found)"
            )),
        "{err}"
    );

    let err = build(server.url("bad.yaml")).unwrap_err();
    assert!(matches!(err, KustomizeError::Yaml { .. }), "{err}");
    assert!(err.to_string().contains("unclosed bracket"), "{err}");
}

/// kustomize accumulates the entries of `transformers:` and `generators:` that are not
/// inline as it accumulates resources, so a config list may come from a repository's
/// kustomization or from a URL (kubectl v1.37 builds this tree alike).
#[test]
fn transformer_and_generator_configs_come_from_repositories_and_urls() {
    let root = tempfile::tempdir().unwrap();
    let repo = root.path().join("configs");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    write(
        &repo,
        "labels/labels.yaml",
        "apiVersion: builtin\nkind: LabelTransformer\nmetadata:\n  name: team\nlabels:\n  team: remote\nfieldSpecs:\n- path: metadata/labels\n  create: true\n",
    );
    write(
        &repo,
        "labels/kustomization.yaml",
        "resources:\n- labels.yaml\n",
    );
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "configs"]);

    let served = tempfile::tempdir().unwrap();
    write(
        served.path(),
        "generator.yaml",
        "apiVersion: builtin\nkind: ConfigMapGenerator\nmetadata:\n  name: generated\nliterals:\n- k=v\noptions:\n  disableNameSuffixHash: true\n",
    );
    let server = FileServer::serve(served.path());

    let built = build_with_remote(&format!(
        "generators:\n- {}\ntransformers:\n- file://{}//labels\n",
        server.url("generator.yaml"),
        repo.display()
    ))
    .unwrap();
    assert_eq!(built.len(), 1, "{built:?}");
    assert_eq!(built[0]["metadata"]["name"], "generated");
    assert_eq!(built[0]["data"]["k"], "v");
    assert_eq!(built[0]["metadata"]["labels"]["team"], "remote");
}
