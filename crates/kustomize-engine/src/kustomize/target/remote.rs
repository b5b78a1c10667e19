//! Remote entries of `resources:`, `components:` and config lists, through the build's
//! [`RemoteFetcher`]: repositories checked out, and http(s) URLs downloaded as files, in
//! kustomize's order.
//!
//! kustomize loads every `resources:` entry as a file first, so an http(s) URL is downloaded
//! before anything else: manifests in the answer are the entry's resources. It gives up when
//! the server answered with an error status (unless the URL reads as a repository; here also
//! when the file is over the size limit), and otherwise tries the entry as a repository; when
//! that fails too, a file that was malformed YAML is reported alone, anything else with both
//! causes. A component is always a directory, so only ever a repository.
//!
//! [`RemoteFetcher`]: super::super::RemoteFetcher

use std::path::{Path, PathBuf};

use super::super::loader::{self, Loader};
use super::super::provenance::Origin;
use super::super::resource::Resource;
use super::super::{DownloadError, FetchError, KustomizeError, RemoteBase};
use super::{Accumulated, Builder, ObjectKeys, RemoteContext, resources_from};

/// Why an http(s) entry was not a file of manifests.
pub(super) enum FileFailure {
    /// kustomize gives up on the entry: no fetcher, or an error status.
    Final(KustomizeError),
    /// The download failed otherwise; the entry may still be a repository.
    Download(FetchError),
    /// The answer is not manifests; the entry may still be a repository.
    Content(KustomizeError),
}

impl Builder<'_> {
    /// A remote `resources:` entry (or a `transformers:`, `generators:` or `validators:` one,
    /// which kustomize accumulates as resources): a file of manifests, else a repository's
    /// kustomization.
    pub(in crate::kustomize) fn accumulate_remote_resource(
        &mut self,
        loader: &Loader,
        entry: &str,
        file: &Path,
        acc: &mut Accumulated,
        seen: &mut ObjectKeys,
    ) -> Result<(), KustomizeError> {
        let mut file_failure = None;
        if loader::is_remote_file(entry) {
            match self.remote_file_resources(entry, file) {
                Ok(resources) => {
                    self.note_kinds(&resources);
                    return acc.append(resources, Path::new(entry), seen);
                }
                Err(FileFailure::Final(error)) => return Err(error),
                Err(failure) => file_failure = Some(failure),
            }
        }
        let base = self.fetch_repository(entry, file, file_failure)?;
        let remote_loader = loader.for_tree(&base.root, &base.dir)?;
        self.remotes.push(RemoteContext {
            url: entry.to_string(),
            base,
        });
        let built = self.base(&remote_loader, &remote_loader.dir.clone());
        self.remotes.pop();
        acc.absorb_base(built?, &remote_loader.dir, file, seen)
    }

    /// The manifests an http(s) URL answers with.
    fn remote_file_resources(
        &self,
        entry: &str,
        file: &Path,
    ) -> Result<Vec<Resource>, FileFailure> {
        let Some(fetcher) = self.options.remote.clone() else {
            return Err(FileFailure::Final(disabled(entry, file)));
        };
        let bytes = fetcher.download(entry).map_err(|error| match error {
            DownloadError::Final(_) => FileFailure::Final(KustomizeError::RemoteFailed {
                file: file.to_path_buf(),
                entry: entry.to_string(),
                error: Box::new(error),
            }),
            DownloadError::MaybeRepository(error) => FileFailure::Download(error),
        })?;
        let source = PathBuf::from(entry);
        let text = String::from_utf8(bytes).map_err(|_| {
            FileFailure::Content(KustomizeError::InvalidResource {
                file: source.clone(),
                message: "not UTF-8 text".into(),
            })
        })?;
        let origin = self.tracking.any().then(|| Origin::file(entry.to_string()));
        resources_from(&text, &source, origin).map_err(FileFailure::Content)
    }

    /// Checks out a repository entry, refusing it when no fetcher is configured and when it
    /// is already being built (a cycle between repositories). `file_failure` is why the
    /// entry was not a file, when it was tried as one first.
    pub(super) fn fetch_repository(
        &self,
        entry: &str,
        file: &Path,
        file_failure: Option<FileFailure>,
    ) -> Result<RemoteBase, KustomizeError> {
        let Some(fetcher) = self.options.remote.clone() else {
            return Err(disabled(entry, file));
        };
        if self.remotes.iter().any(|r| r.url == entry) {
            return Err(KustomizeError::Cycle {
                dir: PathBuf::from(entry),
                via: file.to_path_buf(),
            });
        }
        fetcher.fetch_repository(entry).map_err(|error| {
            let as_file = match file_failure {
                None | Some(FileFailure::Final(_)) => None,
                Some(FileFailure::Content(content @ KustomizeError::Yaml { .. })) => {
                    return content;
                }
                Some(FileFailure::Content(content)) => Some(content.to_string()),
                Some(FileFailure::Download(download)) => Some(download.to_string()),
            };
            KustomizeError::RemoteFailed {
                file: file.to_path_buf(),
                entry: entry.to_string(),
                error: match as_file {
                    Some(as_file) => {
                        format!("as a file: {as_file}; as a repository: {error}").into()
                    }
                    None => error,
                },
            }
        })
    }
}

fn disabled(entry: &str, file: &Path) -> KustomizeError {
    KustomizeError::RemoteDisabled {
        file: file.to_path_buf(),
        entry: entry.to_string(),
    }
}
