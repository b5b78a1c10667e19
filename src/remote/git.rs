//! Fetching a git repository with gix and writing one commit's tree to disk.
//!
//! Branches and tags are fetched shallowly (depth 1); a ref that looks like a commit id is
//! fetched in full and resolved. The commit's tree is written by walking its objects, so no
//! git program, hook or filter ever runs; symlinks are written as links (the build engine
//! refuses any that lead outside the checkout), submodules are refused.

use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use gix::objs::tree::EntryKind;

use super::{Limits, RemoteError};

/// A checked-out commit in a temporary directory, removed on drop.
#[derive(Debug)]
pub struct Checkout {
    directory: tempfile::TempDir,
}

impl Checkout {
    /// The root of the written tree.
    pub fn root(&self) -> &Path {
        self.directory.path()
    }
}

/// Whether a ref looks like a (possibly abbreviated) commit id.
fn is_commit_id(git_ref: &str) -> bool {
    (7..=40).contains(&git_ref.len()) && git_ref.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Fetches `repo` at `git_ref` (the default branch when `None`) and writes its tree.
pub fn checkout(
    repo: &str,
    git_ref: Option<&str>,
    submodules: bool,
    timeout: Duration,
    limits: &Limits,
) -> Result<Checkout, RemoteError> {
    crate::tls::use_ring();
    let fail = |message: String| RemoteError::Fetch {
        url: repo.to_string(),
        message,
    };
    let scratch = tempfile::TempDir::new().map_err(|e| fail(crate::report::cause_chain(&e)))?;
    let destination = tempfile::TempDir::new().map_err(|e| fail(crate::report::cause_chain(&e)))?;
    let interrupt = AtomicBool::new(false);

    let commit_id_ref = git_ref.filter(|r| is_commit_id(r));
    // gix repositories stay on the thread that opened them: the worker fetches, resolves
    // and writes; this thread only waits, and interrupts the fetch on timeout.
    let work = || -> Result<(), RemoteError> {
        let fetched = fetch(
            repo,
            git_ref,
            commit_id_ref.is_some(),
            scratch.path(),
            &interrupt,
        )?;
        let spec = commit_id_ref.unwrap_or("HEAD");
        let commit = fetched
            .rev_parse_single(spec)
            .map_err(|e| fail(format!("resolving {spec}: {e}")))?
            .object()
            .map_err(|e| fail(crate::report::cause_chain(&e)))?
            .peel_to_commit()
            .map_err(|e| fail(crate::report::cause_chain(&e)))?;
        let tree = commit
            .tree()
            .map_err(|e| fail(crate::report::cause_chain(&e)))?;
        let mut budget = Budget {
            bytes: 0,
            files: 0,
            limits,
            url: repo,
        };
        write_tree(&fetched, &tree, destination.path(), submodules, &mut budget)
    };
    let work = &work;
    std::thread::scope(|scope| {
        let (done, finished) = mpsc::channel();
        let worker = scope.spawn(move || {
            let result = work();
            let _ = done.send(());
            result
        });
        if finished.recv_timeout(timeout).is_err() {
            interrupt.store(true, Ordering::Relaxed);
            let _ = worker.join();
            return Err(RemoteError::Timeout {
                url: repo.to_string(),
                timeout,
            });
        }
        worker
            .join()
            .unwrap_or_else(|_| Err(fail("the fetch failed unexpectedly".into())))
    })?;
    Ok(Checkout {
        directory: destination,
    })
}

fn fetch(
    repo: &str,
    git_ref: Option<&str>,
    full: bool,
    scratch: &Path,
    interrupt: &AtomicBool,
) -> Result<gix::Repository, RemoteError> {
    let fail = |message: String| RemoteError::Fetch {
        url: repo.to_string(),
        message,
    };
    let mut prepare =
        gix::prepare_clone_bare(repo, scratch).map_err(|e| fail(crate::report::cause_chain(&e)))?;
    if !full {
        prepare = prepare.with_shallow(gix::remote::fetch::Shallow::DepthAtRemote(NonZeroU32::MIN));
        if let Some(name) = git_ref {
            prepare = prepare
                .with_ref_name(Some(name))
                .map_err(|e| fail(format!("ref {name:?}: {e}")))?;
        }
    }
    let (repository, _) = prepare
        .fetch_only(gix::progress::Discard, interrupt)
        .map_err(|e| fail(crate::report::cause_chain(&e)))?;
    Ok(repository)
}

/// What a checkout may still write.
struct Budget<'a> {
    bytes: u64,
    files: usize,
    limits: &'a Limits,
    url: &'a str,
}

impl Budget<'_> {
    fn charge(&mut self, bytes: u64) -> Result<(), RemoteError> {
        self.files += 1;
        self.bytes += bytes;
        if self.files > self.limits.max_files {
            return Err(RemoteError::TooLarge {
                url: self.url.to_string(),
                what: "the number of files",
                limit: self.limits.max_files as u64,
            });
        }
        if self.bytes > self.limits.max_bytes {
            return Err(RemoteError::TooLarge {
                url: self.url.to_string(),
                what: "the checkout size",
                limit: self.limits.max_bytes,
            });
        }
        Ok(())
    }
}

fn write_tree(
    repo: &gix::Repository,
    tree: &gix::Tree<'_>,
    dir: &Path,
    submodules: bool,
    budget: &mut Budget,
) -> Result<(), RemoteError> {
    let fail = |message: String| RemoteError::Checkout {
        url: budget.url.to_string(),
        message,
    };
    for entry in tree.iter() {
        let entry = entry.map_err(|e| fail(crate::report::cause_chain(&e)))?;
        let name = entry.filename().to_string();
        // Tree entries are single path components; anything else would escape the checkout.
        if name.is_empty()
            || name == "."
            || name == ".."
            || name.contains('/')
            || name.contains('\0')
        {
            return Err(fail(format!(
                "invalid file name {name:?} in the repository"
            )));
        }
        let path: PathBuf = dir.join(&name);
        match entry.mode().kind() {
            EntryKind::Tree => {
                std::fs::create_dir(&path).map_err(|e| fail(format!("{}: {e}", path.display())))?;
                let subtree = repo
                    .find_tree(entry.oid())
                    .map_err(|e| fail(crate::report::cause_chain(&e)))?;
                write_tree(repo, &subtree, &path, submodules, budget)?;
            }
            EntryKind::Blob | EntryKind::BlobExecutable => {
                let blob = repo
                    .find_blob(entry.oid())
                    .map_err(|e| fail(crate::report::cause_chain(&e)))?;
                budget.charge(blob.data.len() as u64)?;
                std::fs::write(&path, &blob.data)
                    .map_err(|e| fail(format!("{}: {e}", path.display())))?;
            }
            EntryKind::Link => {
                let blob = repo
                    .find_blob(entry.oid())
                    .map_err(|e| fail(crate::report::cause_chain(&e)))?;
                budget.charge(blob.data.len() as u64)?;
                let target = String::from_utf8_lossy(&blob.data).into_owned();
                std::os::unix::fs::symlink(&target, &path)
                    .map_err(|e| fail(format!("{}: {e}", path.display())))?;
            }
            EntryKind::Commit => {
                if submodules {
                    return Err(fail(format!(
                        "{name} is a submodule, which is not supported; add ?submodules=false to build without it"
                    )));
                }
            }
        }
    }
    Ok(())
}
