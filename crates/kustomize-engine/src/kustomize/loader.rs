//! Reading files and directories named by kustomizations, within the load restrictions.
//!
//! Two boundaries apply after symlinks are resolved: everything must stay inside the build
//! root (the artifact, for the controller), and with [`LoadRestrictions::RootOnly`] a file
//! must also sit in or below the directory of the kustomization that names it. Absolute
//! paths and remote URLs are refused unless a remote hook takes the URL.

use std::path::{Component, Path, PathBuf};

use super::{KustomizeError, LoadRestrictions};

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
}

/// Whether a resource entry names something remote (git or HTTP) rather than a local path.
pub fn is_remote(entry: &str) -> bool {
    entry.contains("://")
        || entry.starts_with("git@")
        || entry.starts_with("github.com/")
        || entry.starts_with("gitlab.com/")
        || entry.starts_with("bitbucket.org/")
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
        })
    }

    /// Limits what the build may read in all (by default [`MAX_BUILD_READ_BYTES`]).
    pub fn set_read_budget(&self, bytes: u64) {
        self.budget.set(bytes);
    }

    /// A loader for another tree (a remote base) that shares this build's read budget.
    pub fn for_tree(&self, root: &Path, dir: &Path) -> Result<Loader, KustomizeError> {
        let mut loader = Loader::new(root, dir, self.restrictions)?;
        loader.budget = self.budget.clone();
        Ok(loader)
    }

    /// A loader for a directory this one references.
    pub fn child(&self, dir: &Path) -> Loader {
        Loader {
            dir: dir.to_path_buf(),
            root: self.root.clone(),
            restrictions: self.restrictions,
            budget: self.budget.clone(),
        }
    }

    /// Resolves `entry` (relative to this kustomization) to a file or directory inside the
    /// build root.
    pub fn resolve(&self, entry: &str) -> Result<Target, KustomizeError> {
        if Path::new(entry).is_absolute() {
            return Err(KustomizeError::AbsolutePath {
                dir: self.dir.clone(),
                entry: entry.to_string(),
            });
        }
        let joined = self.dir.join(entry);
        let resolved = canonical(&joined)?;
        if !resolved.starts_with(&self.root) {
            return Err(KustomizeError::OutsideRoot {
                file: resolved,
                root: self.root.clone(),
            });
        }
        if resolved.is_dir() {
            Ok(Target::Dir(resolved))
        } else {
            Ok(Target::File(resolved))
        }
    }

    /// Reads a file named by this kustomization, enforcing the restrictions.
    pub fn read(&self, entry: &str) -> Result<(PathBuf, Vec<u8>), KustomizeError> {
        match self.resolve(entry)? {
            Target::Dir(dir) => Err(KustomizeError::Io {
                path: dir,
                error: std::io::Error::other("is a directory, expected a file"),
            }),
            Target::File(file) => {
                self.check_file(&file)?;
                let bytes = read_bounded(&file)?;
                let left = self.budget.get();
                if bytes.len() as u64 > left {
                    return Err(KustomizeError::ReadBudget { file });
                }
                self.budget.set(left - bytes.len() as u64);
                Ok((file, bytes))
            }
        }
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

/// `a/./b/../c` → `a/c`, for naming paths that do not exist.
fn lexically_clean(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other),
        }
    }
    out
}
