//! The fetch and build steps: the artifact downloaded and extracted ([`fetch`]), `spec.path`
//! built in it with the Kustomization's decryption keys and post-build variables
//! ([`build_fetched`]); or, when the build cache holds what this Kustomization built from the
//! very same inputs, neither.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::api::{Kustomization, KustomizationSpec};
use crate::controller::KustomizationKey;
use crate::controller::build_cache::BuildFacts;
use crate::controller::context::Context;
use crate::controller::error::StepError;
use crate::controller::inputs::{decryption_keys, variables};
use crate::controller::manifests::{self, Inputs};
use crate::source::{Artifact, SourceError};

/// Built objects and their digest (what the history records).
pub(crate) struct Built {
    pub objects: Vec<Value>,
    pub digest: String,
}

/// What [`fetch`] got: the objects this Kustomization built last from the very same inputs,
/// or the artifact extracted and what the build will read, ready for [`build_fetched`].
pub(crate) enum Fetched {
    Cached(Built),
    Extracted(Box<Extracted>),
}

pub(crate) struct Extracted {
    workspace: crate::source::Workspace,
    dir: std::path::PathBuf,
    /// The build's inputs, when the cache needed them read before the fetch.
    early: Option<Result<ReadInputs, StepError>>,
    cacheable: Option<crate::controller::build_cache::BuildInputs>,
}

/// Fetch: downloads and extracts the artifact and finds `spec.path` in it; or, when the
/// build cache holds what this Kustomization built from the very same inputs, neither.
pub(crate) async fn fetch(
    object: &Kustomization,
    ctx: &Context,
    artifact: &Artifact,
) -> Result<Fetched, StepError> {
    let key = KustomizationKey::of(object);
    let cache = ctx
        .options
        .build_cache
        .as_deref()
        .filter(|_| object.spec.decryption.is_none() && !artifact.digest.is_empty());
    // The cache is keyed by what the build reads, so that is read first; a failure to read
    // it is reported after the artifact's own, as Flux reports them.
    let early = match cache {
        Some(_) => Some(read_inputs(object, ctx).await),
        None => None,
    };
    let cacheable = match &early {
        Some(Ok(ReadInputs {
            variables: Ok(variables),
            ..
        })) => BuildFacts {
            artifact_digest: &artifact.digest,
            artifact_url: &artifact.url,
            spec: &object.spec,
            variables,
            strict_substitution: ctx.options.strict_substitution,
            limits: &ctx.options.build_limits,
            remote_allowed: ctx.options.remote.is_some(),
        }
        .cacheable(),
        _ => None,
    };
    if let (Some(cache), Some(inputs)) = (cache, cacheable)
        && let Some((objects, digest)) = cache.get(&key, inputs)
    {
        return Ok(Fetched::Cached(Built { objects, digest }));
    }
    let workspace = ctx.fetcher.fetch(artifact).await.map_err(|e| match e {
        SourceError::ArtifactMissing { .. } => StepError::SourceNotReady(e),
        other => StepError::Source(other),
    })?;
    let dir = workspace
        .path(object.spec.path.as_deref().unwrap_or("./"))
        .map_err(StepError::Source)?;
    Ok(Fetched::Extracted(Box::new(Extracted {
        workspace,
        dir,
        early,
        cacheable,
    })))
}

/// Build what [`fetch`] extracted (what it found cached is as it was built), keeping it for
/// the next reconcile when the build cache may.
pub(crate) async fn build_fetched(
    object: &Kustomization,
    ctx: &Context,
    fetched: Fetched,
) -> Result<Built, StepError> {
    let extracted = match fetched {
        Fetched::Cached(built) => return Ok(built),
        Fetched::Extracted(extracted) => *extracted,
    };
    let Extracted {
        workspace,
        dir,
        early,
        cacheable,
    } = extracted;
    let read = match early {
        Some(read) => read?,
        None => read_inputs(object, ctx).await?,
    };
    let started = Instant::now();
    let (built, fetched_remote) = build_from(object, ctx, workspace.root(), &dir, read).await?;
    drop(workspace);
    ctx.metrics.observe_build(started.elapsed());
    // Any other build (one that now decrypts, say) leaves no entry behind.
    if let Some(cache) = ctx.options.build_cache.as_deref() {
        let key = KustomizationKey::of(object);
        match cacheable {
            Some(inputs) if !fetched_remote => {
                cache.put(&key, inputs, &built.objects, &built.digest)
            }
            _ => cache.forget(&key),
        }
    }
    Ok(built)
}

/// What a build reads from the cluster: decryption keys and post-build variables.
pub(crate) struct ReadInputs {
    keys: Option<crate::sops::Keys>,
    /// The variables, or why they cannot be had (which fails the build only where an object
    /// is substituted).
    variables:
        Result<std::collections::BTreeMap<String, String>, crate::substitute::SubstituteError>,
}

async fn read_inputs(object: &Kustomization, ctx: &Context) -> Result<ReadInputs, StepError> {
    Ok(ReadInputs {
        keys: decryption_keys(object, ctx)
            .await
            .map_err(StepError::BuildInputs)?,
        variables: variables(object, ctx).await,
    })
}

/// Build: generates, decrypts, builds and substitutes `dir` (inside `root`) as the
/// Kustomization asks, with its decryption keys and post-build variables from the cluster.
/// The digest is of the objects as `kustomize build` prints them.
pub(crate) async fn build(
    object: &Kustomization,
    ctx: &Context,
    root: &Path,
    dir: &Path,
) -> Result<Built, StepError> {
    let read = read_inputs(object, ctx).await?;
    Ok(build_from(object, ctx, root, dir, read).await?.0)
}

/// Builds with inputs already read; also says whether the build fetched a remote base or
/// file (what it read then is not among its inputs).
async fn build_from(
    object: &Kustomization,
    ctx: &Context,
    root: &Path,
    dir: &Path,
    read: ReadInputs,
) -> Result<(Built, bool), StepError> {
    let (root, dir) = (root.to_path_buf(), dir.to_path_buf());
    let spec: KustomizationSpec = object.spec.clone();
    let strict_substitution = ctx.options.strict_substitution;
    let remote = ctx.options.remote.clone().map(RecordingFetcher::new);
    let limits = ctx.options.build_limits;
    tokio::task::spawn_blocking(move || {
        let inputs = Inputs {
            spec: &spec,
            keys: read.keys.as_ref(),
            variables: read.variables.as_ref(),
            remote: remote
                .clone()
                .map(|r| r as Arc<dyn crate::kustomize::RemoteFetcher>),
            strict_substitution,
            limits,
        };
        let objects = manifests::build(&root, &dir, &inputs)?;
        let digest = format!(
            "sha256:{}",
            hex::encode(Sha256::digest(
                crate::kustomize::to_yaml(&objects).as_bytes()
            ))
        );
        let built = Built {
            objects: objects.into_iter().map(Value::from).collect(),
            digest,
        };
        Ok((built, remote.is_some_and(|r| r.fetched())))
    })
    .await
    .map_err(StepError::BuildStopped)?
    .map_err(StepError::Build)
}

/// A remote fetcher that remembers whether the build used it.
#[derive(Debug)]
struct RecordingFetcher {
    inner: Arc<dyn crate::kustomize::RemoteFetcher>,
    fetched: std::sync::atomic::AtomicBool,
}

impl RecordingFetcher {
    fn new(inner: Arc<dyn crate::kustomize::RemoteFetcher>) -> Arc<RecordingFetcher> {
        Arc::new(RecordingFetcher {
            inner,
            fetched: Default::default(),
        })
    }

    fn fetched(&self) -> bool {
        self.fetched.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl crate::kustomize::RemoteFetcher for RecordingFetcher {
    fn fetch_repository(
        &self,
        url: &str,
    ) -> Result<crate::kustomize::RemoteBase, crate::kustomize::FetchError> {
        self.fetched
            .store(true, std::sync::atomic::Ordering::Relaxed);
        self.inner.fetch_repository(url)
    }

    fn download(&self, url: &str) -> Result<Vec<u8>, crate::kustomize::DownloadError> {
        self.fetched
            .store(true, std::sync::atomic::Ordering::Relaxed);
        self.inner.download(url)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Serves one manifest for any URL.
    #[derive(Debug)]
    struct OneFile;

    const REMOTE_FILE: &[u8] = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: remote\n";

    impl crate::kustomize::RemoteFetcher for OneFile {
        fn fetch_repository(
            &self,
            url: &str,
        ) -> Result<crate::kustomize::RemoteBase, crate::kustomize::FetchError> {
            Err(format!("{url}: no repositories here").into())
        }

        fn download(&self, _: &str) -> Result<Vec<u8>, crate::kustomize::DownloadError> {
            Ok(REMOTE_FILE.to_vec())
        }
    }

    fn build_with(kustomization: &str, fetcher: &Arc<RecordingFetcher>) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("kustomization.yaml"), kustomization).unwrap();
        std::fs::write(
            dir.path().join("local.yaml"),
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: local\n",
        )
        .unwrap();
        let options = crate::kustomize::BuildOptions {
            remote: Some(fetcher.clone()),
            ..Default::default()
        };
        crate::kustomize::build(dir.path(), dir.path(), &options).unwrap();
    }

    /// A build that read a remote file is not kept: what it read is not among its inputs.
    #[test]
    fn builds_that_fetch_remote_entries_are_told_apart() {
        let local = RecordingFetcher::new(Arc::new(OneFile));
        build_with("resources:\n- local.yaml\n", &local);
        assert!(!local.fetched());
        let remote = RecordingFetcher::new(Arc::new(OneFile));
        build_with(
            "resources:\n- local.yaml\n- https://example.com/remote.yaml\n",
            &remote,
        );
        assert!(remote.fetched());
        let remote_source = RecordingFetcher::new(Arc::new(OneFile));
        build_with(
            "resources:\n- local.yaml\nconfigMapGenerator:\n- name: settings\n  files:\n  - https://example.com/remote.yaml\n",
            &remote_source,
        );
        assert!(remote_source.fetched());
    }
}
