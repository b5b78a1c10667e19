//! Source artifacts as source-controller offers them: a loopback HTTP server serving tar.gz
//! archives built from fixture folders, with `sha256:<hex>` digests, and helpers that create
//! `GitRepository`, `OCIRepository`, `Bucket` or `ExternalArtifact` objects and set their
//! `.status.artifact` the way source-controller does.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

use flate2::Compression;
use flate2::write::GzEncoder;
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::net::TcpListener;

use super::cluster::{TestCluster, dynamic_api};

/// What source-controller would put into `.status.artifact`.
#[derive(Clone, Debug)]
pub struct Artifact {
    pub url: String,
    /// `sha256:<hex>` of the archive.
    pub digest: String,
    pub revision: String,
    /// `<kind>/<namespace>/<name>/<file>` as source-controller names its storage paths.
    pub path: String,
    pub size: usize,
    /// `status.artifact.metadata` (source-controller copies OCI annotations there).
    pub metadata: std::collections::BTreeMap<String, String>,
}

impl Artifact {
    pub fn status(&self) -> Value {
        let mut status = json!({
            "url": self.url,
            "digest": self.digest,
            "revision": self.revision,
            "path": self.path,
            "size": self.size,
            "lastUpdateTime": kustomize_like_now(),
        });
        if !self.metadata.is_empty() {
            status["metadata"] = json!(self.metadata);
        }
        status
    }

    /// The artifact with one more metadata entry.
    pub fn with_metadata(mut self, key: &str, value: &str) -> Artifact {
        self.metadata.insert(key.into(), value.into());
        self
    }
}

fn kustomize_like_now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// A status code to answer with, and its `Retry-After` header.
type InjectedAnswer = (u16, Option<String>);

/// A loopback server of archives; it stops with the runtime that started it.
#[derive(Clone)]
pub struct ArtifactServer {
    address: SocketAddr,
    files: Arc<Mutex<HashMap<String, Vec<u8>>>>,
    requests: Arc<Mutex<Vec<String>>>,
    /// Status codes (and `Retry-After` headers) to answer the next requests with, first to
    /// last.
    failures: Arc<Mutex<Vec<InjectedAnswer>>>,
}

/// A deterministic tar.gz of `dir` (sorted entries, zero times and owners).
pub fn tar_gz(dir: &Path) -> Vec<u8> {
    let mut builder = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::default()));
    builder.mode(tar::HeaderMode::Deterministic);
    builder.follow_symlinks(false);
    let mut entries = Vec::new();
    collect(dir, dir, &mut entries);
    entries.sort();
    for relative in entries {
        let path = dir.join(&relative);
        builder
            .append_path_with_name(&path, &relative)
            .unwrap_or_else(|e| panic!("archiving {}: {e}", path.display()));
    }
    builder
        .into_inner()
        .and_then(|gz| gz.finish())
        .expect("the archive is written")
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        let relative = path
            .strip_prefix(root)
            .expect("inside the root")
            .to_path_buf();
        let file_type = std::fs::symlink_metadata(&path)
            .expect("metadata")
            .file_type();
        out.push(relative);
        if file_type.is_dir() {
            collect(root, &path, out);
        }
    }
}

pub fn sha256_digest(bytes: &[u8]) -> String {
    let hex: String = Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}

impl ArtifactServer {
    pub async fn start() -> ArtifactServer {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let server = ArtifactServer {
            address: listener.local_addr().expect("bound address"),
            files: Arc::default(),
            requests: Arc::default(),
            failures: Arc::default(),
        };
        let serving = server.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let server = serving.clone();
                tokio::spawn(async move {
                    let service =
                        service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                            let server = server.clone();
                            async move {
                                let path = request.uri().path().to_string();
                                server.requests.lock().expect("requests").push(path.clone());
                                let failure = {
                                    let mut failures = server.failures.lock().expect("failures");
                                    (!failures.is_empty()).then(|| failures.remove(0))
                                };
                                if let Some((code, retry_after)) = failure {
                                    let mut response = hyper::Response::builder().status(code);
                                    if let Some(retry_after) = retry_after {
                                        response = response.header("retry-after", retry_after);
                                    }
                                    let response = response
                                        .body(Full::new(Bytes::from_static(b"injected failure")));
                                    return Ok::<_, Infallible>(response.expect("a response"));
                                }
                                let body = server.files.lock().expect("files").get(&path).cloned();
                                let response = match body {
                                    Some(bytes) => hyper::Response::builder()
                                        .status(200)
                                        .header("content-type", "application/x-gzip")
                                        .body(Full::new(Bytes::from(bytes))),
                                    None => hyper::Response::builder()
                                        .status(404)
                                        .body(Full::new(Bytes::from_static(b"not found"))),
                                };
                                Ok::<_, Infallible>(response.expect("a response"))
                            }
                        });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        server
    }

    /// Serves `bytes` at `/<path>` and describes them as an artifact of `revision`.
    pub fn publish_bytes(&self, path: &str, revision: &str, bytes: Vec<u8>) -> Artifact {
        let path = path.trim_start_matches('/').to_string();
        let artifact = Artifact {
            url: format!("http://{}/{path}", self.address),
            digest: sha256_digest(&bytes),
            revision: revision.to_string(),
            path: path.clone(),
            size: bytes.len(),
            metadata: Default::default(),
        };
        self.files
            .lock()
            .expect("files")
            .insert(format!("/{path}"), bytes);
        artifact
    }

    /// Serves a tar.gz of `dir`.
    pub fn publish_dir(&self, path: &str, revision: &str, dir: &Path) -> Artifact {
        self.publish_bytes(path, revision, tar_gz(dir))
    }

    /// Answers the next requests with these status codes, in order.
    pub fn fail_next(&self, codes: &[u16]) {
        self.failures
            .lock()
            .expect("failures")
            .extend(codes.iter().map(|code| (*code, None)));
    }

    /// Answers the next requests with these status codes and `Retry-After` headers, in order.
    pub fn fail_next_saying_when(&self, answers: &[(u16, &str)]) {
        self.failures.lock().expect("failures").extend(
            answers
                .iter()
                .map(|(code, retry_after)| (*code, Some(retry_after.to_string()))),
        );
    }

    /// The address clients connect to (`host:port`).
    pub fn address(&self) -> String {
        self.address.to_string()
    }

    /// The paths requested so far.
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().expect("requests").clone()
    }
}

/// The source kinds a Kustomization can name.
#[derive(Clone, Copy, Debug)]
pub enum SourceKind {
    GitRepository,
    OciRepository,
    Bucket,
    ExternalArtifact,
}

impl SourceKind {
    pub fn kind(self) -> &'static str {
        match self {
            SourceKind::GitRepository => "GitRepository",
            SourceKind::OciRepository => "OCIRepository",
            SourceKind::Bucket => "Bucket",
            SourceKind::ExternalArtifact => "ExternalArtifact",
        }
    }

    fn has_observed_generation(self) -> bool {
        !matches!(self, SourceKind::ExternalArtifact)
    }

    fn spec(self) -> Value {
        match self {
            SourceKind::GitRepository => {
                json!({"url": "https://example.invalid/repo.git", "interval": "1m"})
            }
            SourceKind::OciRepository => {
                json!({"url": "oci://example.invalid/manifests", "interval": "1m"})
            }
            SourceKind::Bucket => {
                json!({"bucketName": "manifests", "endpoint": "example.invalid", "interval": "1m"})
            }
            SourceKind::ExternalArtifact => json!({}),
        }
    }
}

/// A ConfigMap manifest named `name`.
pub fn config_map(name: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n")
}

impl TestCluster {
    /// Creates a source object and, with an artifact, sets its status as source-controller
    /// does (artifact, Ready condition, observedGeneration).
    pub async fn create_source(
        &self,
        kind: SourceKind,
        namespace: &str,
        name: &str,
        artifact: Option<&Artifact>,
    ) -> Value {
        let object = json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": kind.kind(),
            "metadata": {"name": name, "namespace": namespace},
            "spec": kind.spec(),
        });
        let created = self.apply(&object).await;
        match artifact {
            Some(artifact) => self.set_artifact(kind, namespace, name, artifact).await,
            None => created,
        }
    }

    /// A GitRepository `repo` in the test namespace whose artifact, at `revision`, holds one
    /// file of `manifests`.
    pub async fn source_of_manifests(
        &self,
        artifacts: &ArtifactServer,
        revision: &str,
        manifests: &str,
    ) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("manifests.yaml"), manifests).unwrap();
        let file = format!(
            "{}-{}.tar.gz",
            self.namespace,
            revision.replace([':', '@'], "-")
        );
        let artifact = artifacts.publish_dir(&file, revision, dir.path());
        self.create_source(
            SourceKind::GitRepository,
            &self.namespace,
            "repo",
            Some(&artifact),
        )
        .await;
    }

    /// Publishes a new artifact on an existing source, as a new revision would.
    pub async fn set_artifact(
        &self,
        kind: SourceKind,
        namespace: &str,
        name: &str,
        artifact: &Artifact,
    ) -> Value {
        let object = json!({"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": kind.kind(),
            "metadata": {"name": name, "namespace": namespace}});
        let api = dynamic_api(&self.client, &object).await;
        let current = api
            .get(name)
            .await
            .unwrap_or_else(|e| panic!("reading {name}: {e}"));
        let generation = current.metadata.generation.unwrap_or(1);
        let mut status = json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": kind.kind(),
            "status": {
                "artifact": artifact.status(),
                "conditions": [{
                    "type": "Ready", "status": "True", "reason": "Succeeded",
                    "message": format!("stored artifact for revision '{}'", artifact.revision),
                    "lastTransitionTime": kustomize_like_now(),
                    "observedGeneration": generation,
                }],
            },
        });
        // ExternalArtifact's schema has no status.observedGeneration (its producer is not a
        // reconciler of a spec); a real server refuses the field in an apply.
        if kind.has_observed_generation() {
            status["status"]["observedGeneration"] = json!(generation);
        }
        let patched = api
            .patch_status(
                name,
                &PatchParams::apply("source-controller").force(),
                &Patch::Apply(&status),
            )
            .await
            .unwrap_or_else(|e| panic!("setting the artifact of {name}: {e}"));
        serde_json::to_value(patched).expect("objects serialize")
    }
}
