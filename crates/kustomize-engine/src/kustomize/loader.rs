//! Reading files and directories named by kustomizations, within the load restrictions.
//!
//! Two boundaries apply after symlinks are resolved: everything must stay inside the build
//! root (the artifact, for the controller), and with [`LoadRestrictions::RootOnly`] a file
//! must also sit in or below the directory of the kustomization that names it. An absolute
//! path may name a file, as in kustomize, never a base or component; remote URLs are refused
//! unless a remote hook takes them.
//!
//! A file named by an http(s) URL (a patch, a generator's source, a configuration, the
//! OpenAPI schema) is downloaded through the build's [`RemoteFetcher`], as kustomize's loader
//! downloads it; load restrictions concern the disk and do not apply to it.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use super::{KustomizeError, LoadRestrictions, RemoteFetcher};

/// Files larger than this are refused: manifests are text, and a controller must not be made
/// to read an arbitrarily large file into memory.
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// All the files one build reads, together: generators may name thousands of files, each
/// under [`MAX_FILE_BYTES`].
pub const MAX_BUILD_READ_BYTES: u64 = 1 << 30;

/// What a reference in a kustomization points at.
pub enum Target {
    File(PathBuf),
    Dir(PathBuf),
}

/// Loads files for the kustomization in `dir`.
#[derive(Clone, Debug)]
pub struct Loader {
    /// The canonical directory of the kustomization being read.
    pub dir: PathBuf,
    /// The canonical build root nothing may escape.
    pub root: PathBuf,
    pub restrictions: LoadRestrictions,
    /// Bytes the build may still read, shared by every loader of the build.
    budget: std::rc::Rc<std::cell::Cell<u64>>,
    /// Downloads files named by http(s) URLs; `None` refuses them.
    remote: Option<Arc<dyn RemoteFetcher>>,
}

/// Whether a resource entry names something remote (git or HTTP) rather than a local path.
pub fn is_remote(entry: &str) -> bool {
    entry.contains("://")
        || entry.starts_with("git@")
        || entry.starts_with("github.com/")
        || entry.starts_with("gitlab.com/")
        || entry.starts_with("bitbucket.org/")
}

/// kustomize's `IsRemoteFile`: Go's `url.Parse` finds the scheme `http` or `https` (in any
/// case, since Go lowercases it).
pub fn is_remote_file(entry: &str) -> bool {
    let Some((scheme, _)) = entry.split_once(':') else {
        return false;
    };
    scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https")
}

impl Loader {
    /// A loader for the kustomization directory `dir` inside `root`.
    pub fn new(
        root: &Path,
        dir: &Path,
        restrictions: LoadRestrictions,
    ) -> Result<Loader, KustomizeError> {
        let root = canonical(root)?;
        let dir = canonical(dir)?;
        if !dir.starts_with(&root) {
            return Err(KustomizeError::OutsideRoot { file: dir, root });
        }
        Ok(Loader {
            dir,
            root,
            restrictions,
            budget: std::rc::Rc::new(std::cell::Cell::new(MAX_BUILD_READ_BYTES)),
            remote: None,
        })
    }

    /// This loader, downloading files named by http(s) URLs through `remote`.
    pub fn with_remote(mut self, remote: Option<Arc<dyn RemoteFetcher>>) -> Loader {
        self.remote = remote;
        self
    }

    /// Limits what the build may read in all (by default [`MAX_BUILD_READ_BYTES`]).
    pub fn set_read_budget(&self, bytes: u64) {
        self.budget.set(bytes);
    }

    /// A loader for another tree (a remote base) that shares this build's read budget.
    pub fn for_tree(&self, root: &Path, dir: &Path) -> Result<Loader, KustomizeError> {
        let mut loader = Loader::new(root, dir, self.restrictions)?;
        loader.budget = self.budget.clone();
        loader.remote = self.remote.clone();
        Ok(loader)
    }

    /// A loader for a directory this one references.
    pub fn child(&self, dir: &Path) -> Loader {
        Loader {
            dir: dir.to_path_buf(),
            root: self.root.clone(),
            restrictions: self.restrictions,
            budget: self.budget.clone(),
            remote: self.remote.clone(),
        }
    }

    /// Resolves `entry` (relative to this kustomization) to a file or directory inside the
    /// build root. As kustomize's loader, an absolute path may name a file (the load
    /// restrictions still apply when it is read) but not a directory: "new root cannot be
    /// absolute".
    pub fn resolve(&self, entry: &str) -> Result<Target, KustomizeError> {
        // Go joins and cleans the path before it looks at the filesystem: `sub/../file`
        // names `file` even where `sub` does not exist (or is a link elsewhere).
        let joined = lexically_clean(&self.dir.join(entry));
        let resolved = canonical(&joined)?;
        if !resolved.starts_with(&self.root) {
            return Err(KustomizeError::OutsideRoot {
                file: resolved,
                root: self.root.clone(),
            });
        }
        if !resolved.is_dir() {
            return Ok(Target::File(resolved));
        }
        if Path::new(entry).is_absolute() {
            return Err(KustomizeError::AbsolutePath {
                dir: self.dir.clone(),
                entry: entry.to_string(),
            });
        }
        Ok(Target::Dir(resolved))
    }

    /// Reads a file named by this kustomization, enforcing the restrictions, or downloads it
    /// when `entry` is an http(s) URL (the path returned is then the URL).
    pub fn read(&self, entry: &str) -> Result<(PathBuf, Vec<u8>), KustomizeError> {
        if is_remote_file(entry) {
            let bytes = self.download(entry)?;
            let file = PathBuf::from(entry);
            self.spend(&file, bytes.len())?;
            return Ok((file, bytes));
        }
        match self.resolve(entry)? {
            Target::Dir(dir) => Err(KustomizeError::Io {
                path: dir,
                error: std::io::Error::other("is a directory, expected a file"),
            }),
            Target::File(file) => {
                self.check_file(&file)?;
                let bytes = read_bounded(&file)?;
                self.spend(&file, bytes.len())?;
                Ok((file, bytes))
            }
        }
    }

    fn download(&self, url: &str) -> Result<Vec<u8>, KustomizeError> {
        let Some(remote) = &self.remote else {
            return Err(KustomizeError::RemoteFileDisabled {
                dir: self.dir.clone(),
                url: url.to_string(),
            });
        };
        remote
            .download(url)
            .map_err(|error| KustomizeError::RemoteFileFailed {
                dir: self.dir.clone(),
                url: url.to_string(),
                error,
            })
    }

    /// Takes `bytes` read from `file` off the build's read budget.
    fn spend(&self, file: &Path, bytes: usize) -> Result<(), KustomizeError> {
        let left = self.budget.get();
        if bytes as u64 > left {
            return Err(KustomizeError::ReadBudget {
                file: file.to_path_buf(),
            });
        }
        self.budget.set(left - bytes as u64);
        Ok(())
    }

    /// Reads a file as UTF-8 text.
    pub fn read_text(&self, entry: &str) -> Result<(PathBuf, String), KustomizeError> {
        let (file, bytes) = self.read(entry)?;
        let text = String::from_utf8(bytes).map_err(|_| KustomizeError::Io {
            path: file.clone(),
            error: std::io::Error::other("invalid utf8: the file is not UTF-8 text"),
        })?;
        Ok((file, text))
    }

    pub fn check_file(&self, file: &Path) -> Result<(), KustomizeError> {
        if self.restrictions == LoadRestrictions::RootOnly && !file.starts_with(&self.dir) {
            return Err(KustomizeError::OutsideRoot {
                file: file.to_path_buf(),
                root: self.dir.clone(),
            });
        }
        Ok(())
    }

    /// A path relative to the build root (an artifact's, in the controller), for messages and
    /// origins; absolute when the root is the filesystem's (`build DIR`), as the CLI's other
    /// messages name files.
    pub fn relative<'a>(&self, path: &'a Path) -> &'a Path {
        if self.root == Path::new("/") {
            return path;
        }
        path.strip_prefix(&self.root).unwrap_or(path)
    }
}

pub fn canonical(path: &Path) -> Result<PathBuf, KustomizeError> {
    path.canonicalize().map_err(|error| KustomizeError::Io {
        path: lexically_clean(path),
        error,
    })
}

fn read_bounded(file: &Path) -> Result<Vec<u8>, KustomizeError> {
    use std::io::Read;
    let io = |error| KustomizeError::Io {
        path: file.to_path_buf(),
        error,
    };
    // Only regular files: a FIFO or device would block or never end.
    if !std::fs::metadata(file).map_err(io)?.is_file() {
        return Err(io(std::io::Error::other("not a regular file")));
    }
    let mut bytes = Vec::new();
    std::fs::File::open(file)
        .map_err(io)?
        .take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(KustomizeError::FileTooLarge {
            file: file.to_path_buf(),
            limit: MAX_FILE_BYTES,
        });
    }
    Ok(bytes)
}

/// `a/./b/../c` → `a/c`, as Go's `filepath.Clean` reads a path: without the filesystem.
fn lexically_clean(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                // `/..` is `/`, as Go's `filepath.Clean` has it.
                if !out.pop() && !out.has_root() {
                    out.push("..");
                }
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{is_remote_file, lexically_clean};
    use std::path::Path;

    /// What Go's `filepath.Clean` makes of these (no filesystem read).
    #[test]
    fn paths_are_cleaned_as_go_cleans_them() {
        for (path, cleaned) in [
            ("a/./b/../c", "a/c"),
            ("missing/../file", "file"),
            ("a/../../b", "../b"),
            ("../x", "../x"),
            ("/..", "/"),
            ("/a/../../b", "/b"),
        ] {
            assert_eq!(
                lexically_clean(Path::new(path)),
                Path::new(cleaned),
                "{path}"
            );
        }
    }

    /// kustomize downloads what Go's `url.Parse` gives the scheme http or https, in any case;
    /// repositories without that scheme and local paths are not files to download.
    #[test]
    fn remote_files_are_http_and_https_urls() {
        for (entry, remote) in [
            (
                "https://raw.githubusercontent.com/org/repo/v1/crd.yaml",
                true,
            ),
            ("http://127.0.0.1:8080/cm.yaml", true),
            ("HTTPS://example.com/cm.yaml", true),
            ("git::https://example.com/org/repo", false),
            ("github.com/org/repo//dir", false),
            ("file:///srv/repo", false),
            ("patch.yaml", false),
            ("dir/http:x.yaml", false),
            ("httpx://example.com", false),
        ] {
            assert_eq!(is_remote_file(entry), remote, "{entry}");
        }
    }
}
