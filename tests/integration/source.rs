//! Source artifacts end to end: sources created through the harness, archives served over
//! loopback HTTP, resolved, downloaded, verified and extracted by `kustomize_controller::source`.

use std::time::Duration;

use kustomize_controller::api::{CrossNamespaceSourceReference, SourceKind as ApiSourceKind};
use kustomize_controller::source::{
    ExtractLimits, Fetcher, FetcherOptions, SourceError, SourceObject, resolve,
};

use crate::support::artifacts::{Artifact, ArtifactServer, SourceKind, tar_gz};
use crate::support::cluster::TestCluster;
use crate::support::repo_root;

fn quick() -> FetcherOptions {
    FetcherOptions {
        retries: 3,
        retry_wait_min: Duration::from_millis(10),
        retry_wait_max: Duration::from_millis(40),
        ..FetcherOptions::default()
    }
}

fn source_artifact(artifact: &Artifact) -> kustomize_controller::source::Artifact {
    kustomize_controller::source::Artifact {
        url: artifact.url.clone(),
        digest: artifact.digest.clone(),
        revision: artifact.revision.clone(),
        metadata: Default::default(),
    }
}

#[tokio::test]
async fn resolves_every_source_kind_and_tells_missing_apart() {
    let cluster = TestCluster::start().await;
    let server = ArtifactServer::start().await;
    let artifact = server.publish_dir(
        "podinfo.tar.gz",
        "main@sha1:abc",
        &repo_root().join("examples/podinfo"),
    );
    for (kind, api_kind) in [
        (SourceKind::GitRepository, ApiSourceKind::GitRepository),
        (SourceKind::OciRepository, ApiSourceKind::OCIRepository),
        (SourceKind::Bucket, ApiSourceKind::Bucket),
        (
            SourceKind::ExternalArtifact,
            ApiSourceKind::ExternalArtifact,
        ),
    ] {
        cluster
            .create_source(kind, &cluster.namespace, "ready", Some(&artifact))
            .await;
        cluster
            .create_source(kind, &cluster.namespace, "pending", None)
            .await;
        let reference = |name: &str| CrossNamespaceSourceReference {
            api_version: None,
            kind: api_kind,
            name: name.into(),
            namespace: None,
        };
        let ready = SourceObject::of(&reference("ready"), &cluster.namespace);
        let resolved = resolve(&cluster.client, None, &ready).await.unwrap();
        assert_eq!(resolved.digest, artifact.digest);
        assert_eq!(resolved.revision, "main@sha1:abc");

        let pending = SourceObject::of(&reference("pending"), &cluster.namespace);
        let error = resolve(&cluster.client, None, &pending).await.unwrap_err();
        assert!(matches!(error, SourceError::NoArtifact { .. }), "{error}");

        let absent = SourceObject::of(&reference("absent"), &cluster.namespace);
        let error = resolve(&cluster.client, None, &absent).await.unwrap_err();
        assert!(matches!(error, SourceError::NotFound { .. }), "{error}");
        assert!(error.to_string().contains("absent"), "{error}");
    }
}

#[tokio::test]
async fn downloads_verify_and_extract_with_retries() {
    let server = ArtifactServer::start().await;
    let artifact = server.publish_dir(
        "podinfo.tar.gz",
        "main@sha1:abc",
        &repo_root().join("examples/podinfo"),
    );
    let fetcher = Fetcher::new(quick()).unwrap();
    server.fail_next(&[503, 500, 429]);
    let workspace = fetcher.fetch(&source_artifact(&artifact)).await.unwrap();
    assert!(workspace.root().join("kustomization.yaml").is_file());
    assert_eq!(server.requests().len(), 4, "three failures, then success");
    let path = workspace.path("./").unwrap();
    assert!(path.join("kustomization.yaml").is_file());
    assert!(matches!(
        workspace.path("./nope"),
        Err(SourceError::PathNotFound(_))
    ));
    assert_eq!(
        workspace.path("../..").unwrap(),
        path,
        "`..` stops at the root, as Flux's SecureJoin"
    );
    let root = workspace.root().to_path_buf();
    drop(workspace);
    assert!(!root.exists(), "the workspace is removed when dropped");

    server.fail_next(&[500, 500, 500, 500]);
    let error = fetcher
        .fetch(&source_artifact(&artifact))
        .await
        .unwrap_err();
    // fluxcd/pkg's archive fetcher behind its retrying client.
    assert_eq!(
        error.to_string(),
        format!(
            "failed to download archive: GET {} giving up after 4 attempt(s): unexpected HTTP status 500 Internal Server Error",
            source_artifact(&artifact).url
        )
    );
}

#[tokio::test]
async fn refuses_wrong_digests_missing_artifacts_and_oversized_downloads() {
    let server = ArtifactServer::start().await;
    let artifact = server.publish_dir("podinfo.tar.gz", "r", &repo_root().join("examples/podinfo"));
    let fetcher = Fetcher::new(quick()).unwrap();

    let mut tampered = source_artifact(&artifact);
    tampered.digest = format!("sha256:{}", "0".repeat(64));
    let error = fetcher.fetch(&tampered).await.unwrap_err();
    assert!(
        matches!(error, SourceError::DigestMismatch { .. }),
        "{error}"
    );
    assert_eq!(
        error.to_string(),
        format!(
            "failed to verify archive: computed digest doesn't match provided '{}' (check whether file size exceeds max download size)",
            tampered.digest
        )
    );
    server.fail_next(&[403]);
    let refused = fetcher
        .fetch(&source_artifact(&artifact))
        .await
        .unwrap_err();
    assert_eq!(
        refused.to_string(),
        format!(
            "failed to download archive from {} (status: 403 Forbidden)",
            source_artifact(&artifact).url
        ),
        "not retried"
    );

    let mut missing = source_artifact(&artifact);
    missing.url = missing.url.replace("podinfo.tar.gz", "gone.tar.gz");
    let requests_before = server.requests().len();
    let error = fetcher.fetch(&missing).await.unwrap_err();
    assert!(
        matches!(error, SourceError::ArtifactMissing { .. }),
        "{error}"
    );
    assert_eq!(
        server.requests().len(),
        requests_before + 1,
        "a 404 is not retried"
    );

    let tiny = Fetcher::new(FetcherOptions {
        max_download_bytes: 100,
        ..quick()
    })
    .unwrap();
    let error = tiny.fetch(&source_artifact(&artifact)).await.unwrap_err();
    assert!(matches!(error, SourceError::TooLarge { .. }), "{error}");

    let few = Fetcher::new(FetcherOptions {
        limits: ExtractLimits {
            max_bytes: u64::MAX,
            max_entries: 2,
        },
        ..quick()
    })
    .unwrap();
    let error = few.fetch(&source_artifact(&artifact)).await.unwrap_err();
    assert!(error.to_string().contains("more than 2 entries"), "{error}");
}

/// An artifact holding a symlink out of it (here to `/etc/passwd`) unpacks without the link,
/// as Flux's fetcher skips every symlink: nothing outside is reachable from the build, and
/// the Kustomization builds what Flux's builds.
#[tokio::test]
async fn symlinks_in_an_artifact_are_passed_over_as_flux_passes_them_over() {
    let server = ArtifactServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.yaml"), "kind: ConfigMap\n").unwrap();
    std::os::unix::fs::symlink("/etc/passwd", dir.path().join("passwd")).unwrap();
    std::os::unix::fs::symlink("a.yaml", dir.path().join("b.yaml")).unwrap();
    let artifact = server.publish_bytes("links.tar.gz", "r", tar_gz(dir.path()));
    let workspace = Fetcher::new(quick())
        .unwrap()
        .fetch(&source_artifact(&artifact))
        .await
        .unwrap();
    assert!(workspace.root().join("a.yaml").is_file());
    for link in ["passwd", "b.yaml"] {
        assert!(
            std::fs::symlink_metadata(workspace.root().join(link)).is_err(),
            "{link} is not unpacked"
        );
    }
}

#[tokio::test]
async fn source_controller_localhost_overrides_the_artifact_host() {
    let server = ArtifactServer::start().await;
    let artifact = server.publish_dir("podinfo.tar.gz", "r", &repo_root().join("examples/podinfo"));
    let mut in_cluster = source_artifact(&artifact);
    in_cluster.url = in_cluster.url.replace(
        &server.address(),
        "source-controller.flux-system.svc.cluster.local.",
    );
    let fetcher = Fetcher::new(FetcherOptions {
        localhost: Some(server.address()),
        ..quick()
    })
    .unwrap();
    let workspace = fetcher.fetch(&in_cluster).await.unwrap();
    assert!(workspace.root().join("kustomization.yaml").is_file());
}

/// go-retryablehttp's policy behind fluxcd/pkg's fetcher: a 501 and any answer but 200 are
/// final, 429s are retried and, once spent, give up without a reason, and a `Retry-After` of
/// a 429 or 503 is waited for instead of the back-off.
#[tokio::test]
async fn downloads_are_retried_as_fluxs_retrying_client_retries() {
    let server = ArtifactServer::start().await;
    let artifact = server.publish_dir("podinfo.tar.gz", "r", &repo_root().join("examples/podinfo"));
    let url = source_artifact(&artifact).url;
    let fetcher = Fetcher::new(quick()).unwrap();
    for (status, line) in [(501, "501 Not Implemented"), (204, "204 No Content")] {
        let before = server.requests().len();
        server.fail_next(&[status]);
        let error = fetcher
            .fetch(&source_artifact(&artifact))
            .await
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            format!("failed to download archive from {url} (status: {line})")
        );
        assert_eq!(
            server.requests().len(),
            before + 1,
            "{status} is not retried"
        );
    }

    server.fail_next(&[429, 429, 429, 429]);
    let error = fetcher
        .fetch(&source_artifact(&artifact))
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        format!("failed to download archive: GET {url} giving up after 4 attempt(s)")
    );

    // The back-off is an hour: only the servers' "now" brings the download back in time.
    let patient = Fetcher::new(FetcherOptions {
        retry_wait_min: Duration::from_secs(3600),
        retry_wait_max: Duration::from_secs(3600),
        ..quick()
    })
    .unwrap();
    server.fail_next_saying_when(&[(503, "0"), (429, "0")]);
    let workspace = tokio::time::timeout(
        Duration::from_secs(60),
        patient.fetch(&source_artifact(&artifact)),
    )
    .await
    .expect("Retry-After: 0 is waited for, not the hour")
    .unwrap();
    assert!(workspace.root().join("kustomization.yaml").is_file());
}

/// fluxcd/pkg's fetcher tests "fetches and verifies the checksum" and "fails with empty
/// digest error": a digest without its algorithm is a sha256 checksum.
#[tokio::test]
async fn a_bare_checksum_is_verified_as_sha256_and_an_empty_digest_is_refused() {
    let server = ArtifactServer::start().await;
    let artifact = server.publish_dir("podinfo.tar.gz", "r", &repo_root().join("examples/podinfo"));
    let fetcher = Fetcher::new(quick()).unwrap();
    let mut checksum = source_artifact(&artifact);
    checksum.digest = checksum.digest.trim_start_matches("sha256:").to_string();
    let workspace = fetcher.fetch(&checksum).await.unwrap();
    assert!(workspace.root().join("kustomization.yaml").is_file());

    checksum.digest = "0".repeat(64);
    let error = fetcher.fetch(&checksum).await.unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "failed to verify archive: computed digest doesn't match provided 'sha256:{}' (check whether file size exceeds max download size)",
            "0".repeat(64)
        )
    );

    checksum.digest = String::new();
    let error = fetcher.fetch(&checksum).await.unwrap_err();
    assert_eq!(error.to_string(), "failed to verify archive: empty digest");
}

/// A server whose certificate is not trusted is not asked again: the handshake would fail
/// the same way (retryablehttp's policy), so the error says one attempt.
#[tokio::test]
async fn an_untrusted_artifact_server_is_not_asked_again() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://{}/a.tar.gz", listener.local_addr().unwrap());
    let pki = test_apiserver::pki::pki().unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(pki.server_config()));
    let handshakes = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = handshakes.clone();
    let server = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let _ = acceptor.accept(stream).await;
        }
    });
    let artifact = kustomize_controller::source::Artifact {
        url: url.clone(),
        digest: format!("sha256:{}", "0".repeat(64)),
        revision: "r".into(),
        metadata: Default::default(),
    };
    let error = Fetcher::new(quick())
        .unwrap()
        .fetch(&artifact)
        .await
        .unwrap_err()
        .to_string();
    server.abort();
    assert!(
        error.starts_with(&format!(
            "failed to download archive: GET {url} giving up after 1 attempt(s): "
        )),
        "{error}"
    );
    assert_eq!(handshakes.load(std::sync::atomic::Ordering::SeqCst), 1);
}
