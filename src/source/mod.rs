//! Source artifacts: from a Kustomization's `spec.sourceRef` to a directory of manifests.
//!
//! [`resolve`] reads the source object (`GitRepository`, `OCIRepository`, `Bucket`,
//! `ExternalArtifact`) and returns the artifact source-controller published in its status.
//! [`Fetcher::fetch`] downloads it with bounded retries (`fetch`), verifies its digest before
//! anything is unpacked, and extracts the tar.gz with limits and path checks (`extract`) into
//! a temporary directory that is removed when the returned [`Workspace`] drops.
//! [`Workspace::path`] resolves `spec.path` inside the artifact without leaving it.

mod cache;
mod extract;
mod fetch;

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use serde_json::Value;

use crate::api::{CrossNamespaceSourceReference, SourceKind};
pub use cache::SourceCache;
pub use extract::{ExtractLimits, extract_tar_gz};
pub use fetch::{Digest, Fetcher, FetcherOptions};

/// Everything that can go wrong between a sourceRef and a directory of manifests.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("{kind} '{namespace}/{name}' not found")]
    NotFound {
        kind: &'static str,
        namespace: String,
        name: String,
    },
    #[error("{kind} '{namespace}/{name}' has no artifact yet")]
    NoArtifact {
        kind: &'static str,
        namespace: String,
        name: String,
    },
    #[error("{kind} '{namespace}/{name}' has an invalid artifact: {reason}")]
    InvalidArtifact {
        kind: &'static str,
        namespace: String,
        name: String,
        reason: String,
    },
    #[error("reading {kind} '{namespace}/{name}': {source}")]
    Api {
        kind: &'static str,
        namespace: String,
        name: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("artifact not found at {url} (HTTP 404)")]
    ArtifactMissing { url: String },
    /// fluxcd/pkg's archive fetcher: an answer other than 200 (or 404), or tries spent.
    #[error("{}", download_failure(.url, .failure))]
    Download {
        url: String,
        failure: DownloadFailure,
    },
    #[error("artifact from {url} is larger than the limit of {limit} bytes")]
    TooLarge { url: String, limit: u64 },
    /// fluxcd/pkg's words (the computed digest is in the debug log, not the message).
    #[error(
        "failed to verify archive: computed digest doesn't match provided '{expected}' (check whether file size exceeds max download size)"
    )]
    DigestMismatch {
        url: String,
        expected: String,
        actual: String,
    },
    /// The artifact's digest cannot be checked against (fluxcd/pkg's words).
    #[error("failed to verify archive: {0}")]
    UnusableDigest(#[from] DigestError),
    #[error("failed to extract artifact: {path}: {reason}")]
    Extract { path: String, reason: String },
    #[error("failed to extract artifact: {0}")]
    Limit(String),
    #[error("kustomization path not found: {0}")]
    PathNotFound(String),
    #[error("kustomization path '{0}' leaves the artifact")]
    PathEscapes(String),
    #[error("building the HTTP client for artifact downloads: {0}")]
    Client(String),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

/// Why a download failed, for [`SourceError::Download`].
#[derive(Debug)]
pub enum DownloadFailure {
    /// The server answered with this status line (`403 Forbidden`).
    Status(String),
    /// The retrying client stopped; the last try failed for `reason` (`unexpected HTTP
    /// status 503 Service Unavailable`, or the connection's error; none after a 429).
    GaveUp {
        attempts: u32,
        reason: Option<String>,
    },
}

/// Why an artifact's digest cannot be used, as go-digest (behind fluxcd/pkg) words it.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum DigestError {
    #[error("empty digest")]
    Empty,
    #[error("failed to parse digest '{digest}': {reason}")]
    Unparsable {
        digest: String,
        reason: &'static str,
    },
}

/// A failed download as fluxcd/pkg's archive fetcher (and the retrying client it uses)
/// words it.
fn download_failure(url: &str, failure: &DownloadFailure) -> String {
    match failure {
        DownloadFailure::Status(status) => {
            format!("failed to download archive from {url} (status: {status})")
        }
        DownloadFailure::GaveUp { attempts, reason } => format!(
            "failed to download archive: {}",
            crate::retryable_http::giving_up("GET", url, *attempts, reason.as_deref())
        ),
    }
}

/// What source-controller published: where to get it and what it must hash to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Artifact {
    pub url: String,
    pub digest: String,
    pub revision: String,
    /// `status.artifact.metadata` (OCI annotations, among them the origin revision).
    pub metadata: BTreeMap<String, String>,
}

impl Artifact {
    /// The revision of the source the artifact came from (`org.opencontainers.image.revision`
    /// on OCI artifacts), reported as `lastAppliedOriginRevision`.
    pub fn origin_revision(&self) -> Option<&str> {
        self.metadata
            .get("org.opencontainers.image.revision")
            .map(String::as_str)
    }
}

/// A resolved reference: kind, namespace and name of the source object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceObject {
    pub kind: SourceKind,
    pub namespace: String,
    pub name: String,
}

impl SourceObject {
    /// The source a Kustomization in `namespace` refers to.
    pub fn of(reference: &CrossNamespaceSourceReference, namespace: &str) -> SourceObject {
        SourceObject {
            kind: reference.kind,
            namespace: reference
                .namespace
                .clone()
                .filter(|ns| !ns.is_empty())
                .unwrap_or_else(|| namespace.to_string()),
            name: reference.name.clone(),
        }
    }

    fn api_resource(&self) -> ApiResource {
        source_resource(self.kind)
    }
}

/// The API of a source kind (`source.toolkit.fluxcd.io/v1`).
pub fn source_resource(kind: SourceKind) -> ApiResource {
    let gvk = GroupVersionKind::gvk("source.toolkit.fluxcd.io", "v1", kind.as_str());
    ApiResource::from_gvk_with_plural(&gvk, kind.plural())
}

/// Reads the source object and its artifact: from the watch cache when one is given and holds
/// the object, else from the API server.
pub async fn resolve(
    client: &kube::Client,
    cache: Option<&SourceCache>,
    source: &SourceObject,
) -> Result<Artifact, SourceError> {
    let kind = source.kind.as_str();
    let (namespace, name) = (source.namespace.clone(), source.name.clone());
    if let Some(object) = cache.and_then(|cache| cache.get(source)) {
        return artifact_of(&object.data, kind, &namespace, &name);
    }
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &source.namespace, &source.api_resource());
    let object = match api.get_opt(&source.name).await {
        Ok(Some(object)) => object,
        Ok(None) => {
            return Err(SourceError::NotFound {
                kind,
                namespace,
                name,
            });
        }
        Err(error) => {
            return Err(SourceError::Api {
                kind,
                namespace,
                name,
                source: Box::new(error),
            });
        }
    };
    artifact_of(&object.data, kind, &namespace, &name)
}

/// The artifact in a source object's status.
pub fn artifact_of(
    object: &Value,
    kind: &'static str,
    namespace: &str,
    name: &str,
) -> Result<Artifact, SourceError> {
    let Some(artifact) = object.pointer("/status/artifact").filter(|a| a.is_object()) else {
        return Err(SourceError::NoArtifact {
            kind,
            namespace: namespace.into(),
            name: name.into(),
        });
    };
    let text = |key: &str| artifact.get(key).and_then(Value::as_str).unwrap_or("");
    let invalid = |reason: &str| SourceError::InvalidArtifact {
        kind,
        namespace: namespace.into(),
        name: name.into(),
        reason: reason.into(),
    };
    if text("url").is_empty() {
        return Err(invalid("no url"));
    }
    if text("digest").is_empty() {
        return Err(invalid("no digest"));
    }
    let metadata = artifact
        .get("metadata")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default();
    Ok(Artifact {
        url: text("url").into(),
        digest: text("digest").into(),
        revision: text("revision").into(),
        metadata,
    })
}

/// An extracted artifact; the directory is removed when this drops.
#[derive(Debug)]
pub struct Workspace {
    dir: tempfile::TempDir,
}

impl Workspace {
    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// `spec.path` inside the artifact. Leading `./` and `/` are relative to the root, `..`
    /// climbs no higher than it (as Flux's SecureJoin), and a symlink leading out of it is
    /// refused.
    pub fn path(&self, spec_path: &str) -> Result<PathBuf, SourceError> {
        resolve_inside(self.root(), spec_path)
    }
}

/// Joins `relative` under `root` and proves the result stays inside it.
pub fn resolve_inside(root: &Path, relative: &str) -> Result<PathBuf, SourceError> {
    let mut joined = PathBuf::new();
    for component in Path::new(relative).components() {
        match component {
            Component::Normal(part) => joined.push(part),
            // As Flux's SecureJoin: `..` at the root stays at the root.
            Component::ParentDir => {
                joined.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    let candidate = root.join(&joined);
    let canonical_root = root.canonicalize().map_err(|source| SourceError::Io {
        context: format!("resolving {}", root.display()),
        source,
    })?;
    let canonical = candidate
        .canonicalize()
        .map_err(|_| SourceError::PathNotFound(relative.into()))?;
    if !canonical.starts_with(&canonical_root) {
        return Err(SourceError::PathEscapes(relative.into()));
    }
    if !canonical.is_dir() {
        return Err(SourceError::PathNotFound(relative.into()));
    }
    Ok(canonical)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn artifacts_come_from_status() {
        let object = json!({"status": {"artifact": {
            "url": "http://source/a.tar.gz", "digest": "sha256:00", "revision": "main@sha1:1",
            "metadata": {"org.opencontainers.image.revision": "v1@sha1:2"},
        }}});
        let artifact = artifact_of(&object, "OCIRepository", "ns", "n").unwrap();
        assert_eq!(artifact.origin_revision(), Some("v1@sha1:2"));
        let missing = artifact_of(&json!({"status": {}}), "GitRepository", "ns", "n");
        assert!(matches!(missing, Err(SourceError::NoArtifact { .. })));
        assert_eq!(
            missing.unwrap_err().to_string(),
            "GitRepository 'ns/n' has no artifact yet"
        );
    }

    #[test]
    fn paths_stay_inside_the_artifact() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("apps/prod")).unwrap();
        std::os::unix::fs::symlink("/etc", root.path().join("escape")).unwrap();
        let canonical = root.path().canonicalize().unwrap();
        assert_eq!(
            resolve_inside(root.path(), "./apps/prod").unwrap(),
            canonical.join("apps/prod")
        );
        assert_eq!(
            resolve_inside(root.path(), "/apps/../apps").unwrap(),
            canonical.join("apps")
        );
        assert_eq!(resolve_inside(root.path(), "").unwrap(), canonical);
        assert_eq!(
            resolve_inside(root.path(), "../../apps").unwrap(),
            canonical.join("apps"),
            "no higher than the root, as SecureJoin"
        );
        assert!(matches!(
            resolve_inside(root.path(), "escape"),
            Err(SourceError::PathEscapes(_))
        ));
        assert!(matches!(
            resolve_inside(root.path(), "missing"),
            Err(SourceError::PathNotFound(_))
        ));
    }
}
