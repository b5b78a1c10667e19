//! Downloading an artifact: bounded retries with growing waits, a size bound while streaming
//! to disk, and the digest check that gates extraction.

use std::time::Duration;

use sha2::Digest as _;
use tokio::io::AsyncWriteExt;

use super::extract::{ExtractLimits, extract_tar_gz};
use super::{Artifact, DownloadFailure, SourceError, Workspace};

/// The digest source-controller advertises, `<algorithm>:<hex>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Digest {
    Sha256(Vec<u8>),
    Sha384(Vec<u8>),
    Sha512(Vec<u8>),
    Blake3(Vec<u8>),
}

enum Hasher {
    Sha256(sha2::Sha256),
    Sha384(sha2::Sha384),
    Sha512(sha2::Sha512),
    Blake3(Box<blake3::Hasher>),
}

impl Hasher {
    fn update(&mut self, bytes: &[u8]) {
        match self {
            Hasher::Sha256(h) => h.update(bytes),
            Hasher::Sha384(h) => h.update(bytes),
            Hasher::Sha512(h) => h.update(bytes),
            Hasher::Blake3(h) => {
                h.update(bytes);
            }
        }
    }

    fn finish(self) -> Vec<u8> {
        match self {
            Hasher::Sha256(h) => h.finalize().to_vec(),
            Hasher::Sha384(h) => h.finalize().to_vec(),
            Hasher::Sha512(h) => h.finalize().to_vec(),
            Hasher::Blake3(h) => h.finalize().as_bytes().to_vec(),
        }
    }
}

impl Digest {
    pub fn parse(text: &str) -> Result<Digest, SourceError> {
        let unsupported = || SourceError::UnsupportedDigest(text.to_string());
        let (algorithm, hex_digest) = text.split_once(':').ok_or_else(unsupported)?;
        let bytes = hex::decode(hex_digest).map_err(|_| unsupported())?;
        let (digest, length) = match algorithm {
            "sha256" => (Digest::Sha256(bytes), 32),
            "sha384" => (Digest::Sha384(bytes), 48),
            "sha512" => (Digest::Sha512(bytes), 64),
            "blake3" => (Digest::Blake3(bytes), 32),
            _ => return Err(unsupported()),
        };
        if digest.bytes().len() != length {
            return Err(unsupported());
        }
        Ok(digest)
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Digest::Sha256(b) | Digest::Sha384(b) | Digest::Sha512(b) | Digest::Blake3(b) => b,
        }
    }

    fn algorithm(&self) -> &'static str {
        match self {
            Digest::Sha256(_) => "sha256",
            Digest::Sha384(_) => "sha384",
            Digest::Sha512(_) => "sha512",
            Digest::Blake3(_) => "blake3",
        }
    }

    fn hasher(&self) -> Hasher {
        match self {
            Digest::Sha256(_) => Hasher::Sha256(sha2::Sha256::new()),
            Digest::Sha384(_) => Hasher::Sha384(sha2::Sha384::new()),
            Digest::Sha512(_) => Hasher::Sha512(sha2::Sha512::new()),
            Digest::Blake3(_) => Hasher::Blake3(Box::default()),
        }
    }

    /// The digest of `bytes` in the same algorithm, `<algorithm>:<hex>`.
    pub fn of_same_kind(&self, bytes: &[u8]) -> String {
        let mut hasher = self.hasher();
        hasher.update(bytes);
        format!("{}:{}", self.algorithm(), hex::encode(hasher.finish()))
    }
}

/// Download settings; the defaults are Flux's.
#[derive(Clone, Debug)]
pub struct FetcherOptions {
    /// Retries after the first attempt (`--http-retry`).
    pub retries: u32,
    /// The first wait between attempts; it doubles up to `retry_wait_max`.
    pub retry_wait_min: Duration,
    pub retry_wait_max: Duration,
    /// `SOURCE_CONTROLLER_LOCALHOST`: replaces the host (and port) of artifact URLs.
    pub localhost: Option<String>,
    /// The most bytes a download may have.
    pub max_download_bytes: u64,
    pub limits: ExtractLimits,
    /// The timeout of one attempt.
    pub timeout: Duration,
}

impl Default for FetcherOptions {
    fn default() -> FetcherOptions {
        FetcherOptions {
            retries: 9,
            retry_wait_min: Duration::from_secs(1),
            retry_wait_max: Duration::from_secs(30),
            localhost: None,
            max_download_bytes: 512 * 1024 * 1024,
            limits: ExtractLimits::default(),
            timeout: Duration::from_secs(120),
        }
    }
}

/// Fetches artifacts over HTTP(S).
#[derive(Clone, Debug)]
pub struct Fetcher {
    client: reqwest::Client,
    options: FetcherOptions,
}

/// Why one attempt failed, and whether another may help.
enum Attempt {
    Retry(String),
    Fatal(SourceError),
}

impl Fetcher {
    pub fn new(options: FetcherOptions) -> Result<Fetcher, SourceError> {
        let client = crate::tls::client_builder()
            .timeout(options.timeout)
            .build()
            .map_err(|e| SourceError::Client(e.to_string()))?;
        Ok(Fetcher { client, options })
    }

    /// The URL to download from, after `SOURCE_CONTROLLER_LOCALHOST`.
    pub fn effective_url(&self, url: &str) -> String {
        let Some(localhost) = self.options.localhost.as_deref().filter(|l| !l.is_empty()) else {
            return url.to_string();
        };
        let Ok(mut parsed) = reqwest::Url::parse(url) else {
            return url.to_string();
        };
        let (host, port) = match localhost.rsplit_once(':') {
            Some((host, port)) if port.parse::<u16>().is_ok() => (host, port.parse().ok()),
            _ => (localhost, None),
        };
        if parsed.set_host(Some(host)).is_err() || parsed.set_port(port).is_err() {
            return url.to_string();
        }
        parsed.to_string()
    }

    /// Downloads, verifies and extracts an artifact.
    pub async fn fetch(&self, artifact: &Artifact) -> Result<Workspace, SourceError> {
        let digest = Digest::parse(&artifact.digest)?;
        let url = self.effective_url(&artifact.url);
        let download = tempfile::Builder::new()
            .prefix("kc-artifact-")
            .tempdir()
            .map_err(|source| SourceError::Io {
                context: "creating a download directory".into(),
                source,
            })?;
        let archive = download.path().join("artifact.tar.gz");
        let mut wait = self.options.retry_wait_min;
        let mut attempt = 0;
        let actual = loop {
            match self.download(&url, &archive, &digest).await {
                Ok(actual) => break actual,
                Err(Attempt::Fatal(error)) => return Err(error),
                Err(Attempt::Retry(reason)) => {
                    if attempt >= self.options.retries {
                        return Err(SourceError::Download {
                            url: url.clone(),
                            failure: DownloadFailure::GaveUp {
                                attempts: attempt + 1,
                                reason,
                            },
                        });
                    }
                    tracing::debug!(url = %url, attempt, reason = %reason, "retrying artifact download");
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(self.options.retry_wait_max);
                    attempt += 1;
                }
            }
        };
        if actual != digest.bytes() {
            let actual = format!("{}:{}", digest.algorithm(), hex::encode(actual));
            // fluxcd/pkg's message names only the expected digest; the computed one is here.
            tracing::debug!(url = %url, expected = %artifact.digest, actual = %actual, "artifact digest mismatch");
            return Err(SourceError::DigestMismatch {
                url: url.clone(),
                expected: artifact.digest.clone(),
                actual,
            });
        }
        let target = tempfile::Builder::new()
            .prefix("kc-source-")
            .tempdir()
            .map_err(|source| SourceError::Io {
                context: "creating a source directory".into(),
                source,
            })?;
        let limits = self.options.limits.clone();
        let into = target.path().to_path_buf();
        tokio::task::spawn_blocking(move || {
            let file = std::fs::File::open(&archive).map_err(|source| SourceError::Io {
                context: "opening the downloaded artifact".into(),
                source,
            })?;
            extract_tar_gz(std::io::BufReader::new(file), &into, &limits)
        })
        .await
        .map_err(|e| SourceError::Limit(format!("extraction stopped: {e}")))??;
        drop(download);
        Ok(Workspace { dir: target })
    }

    /// One attempt: streams the body to `path`, hashing as it goes.
    async fn download(
        &self,
        url: &str,
        path: &std::path::Path,
        digest: &Digest,
    ) -> Result<Vec<u8>, Attempt> {
        let mut response = self
            .client
            .get(url)
            .send()
            .await
            .map_err(|e| Attempt::Retry(e.to_string()))?;
        let status = response.status();
        if status == reqwest::StatusCode::NOT_FOUND {
            return Err(Attempt::Fatal(SourceError::ArtifactMissing {
                url: url.into(),
            }));
        }
        if status.is_server_error() || status == reqwest::StatusCode::TOO_MANY_REQUESTS {
            return Err(Attempt::Retry(format!("unexpected HTTP status {status}")));
        }
        if !status.is_success() {
            return Err(Attempt::Fatal(SourceError::Download {
                url: url.into(),
                failure: DownloadFailure::Status(status.to_string()),
            }));
        }
        let limit = self.options.max_download_bytes;
        if response
            .content_length()
            .is_some_and(|length| length > limit)
        {
            return Err(Attempt::Fatal(SourceError::TooLarge {
                url: url.into(),
                limit,
            }));
        }
        let mut file = tokio::fs::File::create(path).await.map_err(|source| {
            Attempt::Fatal(SourceError::Io {
                context: "writing the downloaded artifact".into(),
                source,
            })
        })?;
        let mut hasher = digest.hasher();
        let mut written: u64 = 0;
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| Attempt::Retry(e.to_string()))?
        {
            written += chunk.len() as u64;
            if written > limit {
                return Err(Attempt::Fatal(SourceError::TooLarge {
                    url: url.into(),
                    limit,
                }));
            }
            hasher.update(&chunk);
            file.write_all(&chunk).await.map_err(|source| {
                Attempt::Fatal(SourceError::Io {
                    context: "writing the downloaded artifact".into(),
                    source,
                })
            })?;
        }
        file.flush().await.map_err(|source| {
            Attempt::Fatal(SourceError::Io {
                context: "writing the downloaded artifact".into(),
                source,
            })
        })?;
        Ok(hasher.finish())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_parse_by_algorithm() {
        let sha256 = format!("sha256:{}", "ab".repeat(32));
        assert!(matches!(Digest::parse(&sha256), Ok(Digest::Sha256(_))));
        assert!(Digest::parse(&format!("sha384:{}", "00".repeat(48))).is_ok());
        assert!(Digest::parse(&format!("sha512:{}", "00".repeat(64))).is_ok());
        assert!(Digest::parse(&format!("blake3:{}", "00".repeat(32))).is_ok());
        for bad in ["md5:00", "sha256:zz", "sha256:00", "nocolon"] {
            assert!(
                matches!(Digest::parse(bad), Err(SourceError::UnsupportedDigest(_))),
                "{bad}"
            );
        }
        let digest = Digest::parse(&sha256).unwrap();
        assert_eq!(
            digest.of_same_kind(b"abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn localhost_override_replaces_host_and_port() {
        let fetcher = Fetcher::new(FetcherOptions {
            localhost: Some("localhost:9090".into()),
            ..FetcherOptions::default()
        })
        .unwrap();
        assert_eq!(
            fetcher.effective_url(
                "http://source-controller.flux-system.svc.cluster.local./gitrepository/a/b/c.tar.gz"
            ),
            "http://localhost:9090/gitrepository/a/b/c.tar.gz"
        );
        let plain = Fetcher::new(FetcherOptions::default()).unwrap();
        assert_eq!(plain.effective_url("http://a:1/x"), "http://a:1/x");
    }
}
