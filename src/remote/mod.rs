//! Remote bases: git repositories and plain HTTP(S) files named in `resources:` and
//! `components:`, and http(s) files named wherever a kustomization names a file, fetched for
//! the build engine (which never touches the network itself).
//!
//! An entry is parsed with kustomize's repository-spec rules (`spec.rs`): a git repository
//! (`https://host/org/repo//path?ref=v1`, `git::https://…`, `github.com/org/repo/path`,
//! `git://…`, `file://…`) is fetched with gix into a temporary directory and its commit's tree
//! written out there (`git.rs`); an http(s) URL the engine asks to download is one file (the
//! engine tries a `resources:` URL as a file before it asks for a repository, as kustomize).
//! ssh URLs are refused: gix's ssh transport runs the `ssh` program, and nothing here executes
//! programs. Every download is bounded in time and size, each repository and ref is fetched
//! once per [`Fetcher`], and the copies are removed when the fetcher is dropped.

mod git;
mod spec;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::kustomize::{DownloadError, RemoteBase, RemoteFetcher};
pub use spec::{RemoteSpec, parse_remote};

/// Limits on what a remote may bring in.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Bytes written for one repository checkout, or downloaded for one file.
    pub max_bytes: u64,
    /// Files written for one repository checkout.
    pub max_files: usize,
    /// Time for one fetch when the entry does not set `?timeout=`.
    pub default_timeout: Duration,
    /// Whether `file://` repositories may be read. The CLI builds local trees; a controller
    /// building many tenants' repositories must not let one read another's from its disk.
    pub allow_file_urls: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bytes: 256 << 20,
            max_files: 50_000,
            default_timeout: Duration::from_secs(27),
            allow_file_urls: true,
        }
    }
}

/// Why a remote could not be fetched.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error("{0}")]
    Unsupported(String),
    #[error("fetching {url}: {message}")]
    Fetch { url: String, message: String },
    #[error("fetching {url}: timed out after {timeout:?}")]
    Timeout { url: String, timeout: Duration },
    #[error("{url}: {what} exceeds the limit of {limit}")]
    TooLarge {
        url: String,
        what: &'static str,
        limit: u64,
    },
    #[error("{url}: path {path:?} is not a directory inside the repository")]
    BadPath { url: String, path: String },
    #[error("{url}: {message}")]
    Checkout { url: String, message: String },
}

/// Fetches remote entries for builds; keeps the copies until dropped.
#[derive(Debug, Default)]
pub struct Fetcher {
    limits: Limits,
    /// Checkouts by (repository URL, ref), so a repository used twice is fetched once.
    checkouts: Mutex<HashMap<(String, String), Arc<git::Checkout>>>,
}

impl Fetcher {
    pub fn new(limits: Limits) -> Fetcher {
        Fetcher {
            limits,
            checkouts: Mutex::new(HashMap::new()),
        }
    }

    /// The fetcher the controller builds with: the network only, never `file://`.
    pub fn network_only() -> Fetcher {
        Fetcher::new(Limits {
            allow_file_urls: false,
            ..Limits::default()
        })
    }

    fn checkout(&self, entry: &str) -> Result<RemoteBase, RemoteError> {
        match parse_remote(entry)? {
            RemoteSpec::File { url } => Err(RemoteError::Unsupported(format!(
                "{url}: not a repository (one reads as https://host/org/repo//path?ref=…)"
            ))),
            RemoteSpec::Git {
                repo,
                path,
                git_ref,
                submodules,
                timeout,
            } => {
                if !self.limits.allow_file_urls && repo.starts_with("file:") {
                    return Err(RemoteError::Unsupported(format!(
                        "{entry}: file:// remote bases are refused here (only https and git \
                         over the network): a repository on the controller's disk is not \
                         the Kustomization's to read"
                    )));
                }
                let key = (repo.clone(), git_ref.clone().unwrap_or_default());
                let existing = self
                    .checkouts
                    .lock()
                    .ok()
                    .and_then(|c| c.get(&key).cloned());
                let checkout = match existing {
                    Some(checkout) => checkout,
                    None => {
                        let timeout = timeout.unwrap_or(self.limits.default_timeout);
                        let checkout = Arc::new(git::checkout(
                            &repo,
                            git_ref.as_deref(),
                            submodules,
                            timeout,
                            &self.limits,
                        )?);
                        if let Ok(mut checkouts) = self.checkouts.lock() {
                            checkouts.insert(key, checkout.clone());
                        }
                        checkout
                    }
                };
                let root = checkout.root().to_path_buf();
                let dir = resolve_inside(&root, &path).ok_or_else(|| RemoteError::BadPath {
                    url: repo.clone(),
                    path: path.clone(),
                })?;
                Ok(RemoteBase {
                    root,
                    dir,
                    repo,
                    git_ref: git_ref.unwrap_or_default(),
                })
            }
        }
    }
}

impl RemoteFetcher for Fetcher {
    fn fetch_repository(&self, url: &str) -> Result<RemoteBase, crate::kustomize::FetchError> {
        Ok(self.checkout(url)?)
    }

    fn download(&self, url: &str) -> Result<Vec<u8>, DownloadError> {
        download(url, &self.limits)
    }
}

/// `root/path`, when it is a directory that stays inside `root` after symlinks.
fn resolve_inside(root: &std::path::Path, path: &str) -> Option<PathBuf> {
    let root = root.canonicalize().ok()?;
    let dir = root
        .join(path.trim_start_matches('/'))
        .canonicalize()
        .ok()?;
    (dir.starts_with(&root) && dir.is_dir()).then_some(dir)
}

/// Downloads one file, refusing more than the byte limit.
fn download(url: &str, limits: &Limits) -> Result<Vec<u8>, DownloadError> {
    use std::io::Read;
    let fail = |message: String| {
        DownloadError::MaybeRepository(Box::new(RemoteError::Fetch {
            url: url.to_string(),
            message,
        }))
    };
    let client = crate::tls::blocking_client_builder()
        .timeout(limits.default_timeout)
        .build()
        .map_err(|e| fail(crate::report::cause_chain(&e)))?;
    let response = client.get(url).send().map_err(|e| {
        if e.is_timeout() {
            DownloadError::MaybeRepository(Box::new(RemoteError::Timeout {
                url: url.to_string(),
                timeout: limits.default_timeout,
            }))
        } else {
            fail(crate::report::cause_chain(&e))
        }
    })?;
    let status = response.status();
    if !status.is_success() {
        // kustomize's loader words; a URL that reads as a repository is tried as one.
        if matches!(parse_remote(url), Ok(RemoteSpec::Git { .. })) {
            return Err(fail("URL is a git repository".to_string()));
        }
        return Err(DownloadError::Final(Box::new(RemoteError::Fetch {
            url: url.to_string(),
            message: format!(
                "HTTP Error: status code {} ({})",
                status.as_u16(),
                status.canonical_reason().unwrap_or("")
            ),
        })));
    }
    let mut body = Vec::new();
    response
        .take(limits.max_bytes + 1)
        .read_to_end(&mut body)
        .map_err(|e| fail(crate::report::cause_chain(&e)))?;
    if body.len() as u64 > limits.max_bytes {
        return Err(DownloadError::Final(Box::new(RemoteError::TooLarge {
            url: url.to_string(),
            what: "the file",
            limit: limits.max_bytes,
        })));
    }
    Ok(body)
}
