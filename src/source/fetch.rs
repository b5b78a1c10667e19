//! Downloading an artifact: bounded retries with growing waits, a size bound while streaming
//! to disk, and the digest check that gates extraction.

use std::time::Duration;

use sha2::Digest as _;
use tokio::io::AsyncWriteExt;

use super::extract::{ExtractLimits, extract_tar_gz};
use super::{Artifact, DigestError, DownloadFailure, SourceError, Workspace};
use crate::retryable_http::{self, Tried};

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

/// go-digest's reasons, in its words.
const INVALID_FORMAT: &str = "invalid checksum digest format";
const INVALID_LENGTH: &str = "invalid checksum digest length";
const UNSUPPORTED: &str = "unsupported digest algorithm";

/// Whether an algorithm and its encoded part have the shape of a digest (go-digest's
/// `DigestRegexp`): components of `[a-z0-9]` joined by one of `.+_-`, then `[a-zA-Z0-9=_-]`.
fn is_digest_shaped(algorithm: &str, encoded: &str) -> bool {
    let component = |part: &str| {
        !part.is_empty()
            && part
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    };
    algorithm.split(['.', '+', '_', '-']).all(component)
        && encoded
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'=' | b'_' | b'-'))
}

impl Digest {
    /// Parses a digest as fluxcd/pkg does (with go-digest): one without an algorithm is a
    /// sha256 checksum, as artifacts gave before digests; the hex must be lower case.
    pub fn parse(text: &str) -> Result<Digest, DigestError> {
        if text.is_empty() {
            return Err(DigestError::Empty);
        }
        let digest = if text.contains(':') {
            text.to_string()
        } else {
            format!("sha256:{text}")
        };
        let unparsable = |reason| DigestError::Unparsable {
            digest: digest.clone(),
            reason,
        };
        let (algorithm, encoded) = digest.split_once(':').unwrap_or_default();
        if algorithm.is_empty() || encoded.is_empty() {
            return Err(unparsable(INVALID_FORMAT));
        }
        let (make, size): (fn(Vec<u8>) -> Digest, usize) = match algorithm {
            "sha256" => (Digest::Sha256, 32),
            "sha384" => (Digest::Sha384, 48),
            "sha512" => (Digest::Sha512, 64),
            "blake3" => (Digest::Blake3, 32),
            _ if is_digest_shaped(algorithm, encoded) => return Err(unparsable(UNSUPPORTED)),
            _ => return Err(unparsable(INVALID_FORMAT)),
        };
        if encoded.len() != size * 2 {
            return Err(unparsable(INVALID_LENGTH));
        }
        if !encoded
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        {
            return Err(unparsable(INVALID_FORMAT));
        }
        hex::decode(encoded)
            .map(make)
            .map_err(|_| unparsable(INVALID_FORMAT))
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

/// `url` without the password it may carry, as retryablehttp logs it.
fn redacted(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            let _ = parsed.set_password(Some("xxxxx"));
            parsed.to_string()
        }
        _ => url.to_string(),
    }
}

/// Download settings; the defaults are Flux's.
#[derive(Clone, Debug)]
pub struct FetcherOptions {
    /// Retries after the first attempt (`--http-retry`).
    pub retries: u32,
    /// The first wait between attempts (fluxcd/pkg's 5 s); it doubles up to `retry_wait_max`.
    pub retry_wait_min: Duration,
    pub retry_wait_max: Duration,
    /// `SOURCE_CONTROLLER_LOCALHOST`: replaces the host (and port) of artifact URLs.
    pub localhost: Option<String>,
    /// `SOURCE_WATCHER_LOCALHOST`: the same for source-watcher's artifacts (URLs with
    /// `//source-watcher`), which `localhost` then leaves alone.
    pub watcher_localhost: Option<String>,
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
            retry_wait_min: Duration::from_secs(5),
            retry_wait_max: Duration::from_secs(30),
            localhost: None,
            watcher_localhost: None,
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

/// Why one attempt ended without the artifact.
enum Attempt {
    /// What came back, for the retrying client to judge.
    Failed(Failed),
    /// Nothing to try again: the artifact is missing, refused, too large, or cannot be written.
    Fatal(SourceError),
}

/// A try that went wrong in a way retryablehttp may try again.
struct Failed {
    /// The status and `Retry-After` of an answer; none when there was no answer.
    answer: Option<(u16, Option<String>)>,
    /// Without an answer: whether trying again cannot help.
    permanent: bool,
    /// retryablehttp's words for it (none for a 429).
    failure: Option<String>,
}

impl Failed {
    fn tried(&self) -> Tried<'_> {
        match &self.answer {
            Some((status, retry_after)) => Tried::Answered {
                status: *status,
                retry_after: retry_after.as_deref(),
            },
            None => Tried::Unreached {
                permanent: self.permanent,
            },
        }
    }
}

impl Fetcher {
    pub fn new(options: FetcherOptions) -> Result<Fetcher, SourceError> {
        let client = crate::tls::client_builder()
            .timeout(options.timeout)
            .build()
            .map_err(|e| SourceError::Client(e.to_string()))?;
        Ok(Fetcher { client, options })
    }

    /// The URL to download from, after `SOURCE_CONTROLLER_LOCALHOST` (or, as Flux decides,
    /// `SOURCE_WATCHER_LOCALHOST` for a URL naming `//source-watcher`).
    pub fn effective_url(&self, url: &str) -> String {
        let localhost = if url.contains("//source-watcher") {
            &self.options.watcher_localhost
        } else {
            &self.options.localhost
        };
        let Some(localhost) = localhost.as_deref().filter(|l| !l.is_empty()) else {
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
        let mut attempt = 0;
        let actual = loop {
            let failed = match self.download(&url, &archive, &digest).await {
                Ok(actual) => break actual,
                Err(Attempt::Fatal(error)) => return Err(error),
                Err(Attempt::Failed(failed)) => failed,
            };
            let tried = failed.tried();
            if !retryable_http::retried(&tried) || attempt >= self.options.retries {
                return Err(SourceError::Download {
                    url: url.clone(),
                    failure: DownloadFailure::GaveUp {
                        attempts: attempt + 1,
                        reason: failed.failure,
                    },
                });
            }
            // A reconciliation waits on this: a server's `Retry-After` is honoured up to the
            // longest wait, where retryablehttp would wait as long as it says.
            let wait = retryable_http::backoff(
                self.options.retry_wait_min,
                self.options.retry_wait_max,
                attempt,
                &tried,
                k8s_openapi::jiff::Timestamp::now(),
            )
            .min(self.options.retry_wait_max);
            tracing::debug!(url = %url, attempt, ?wait, "retrying artifact download");
            tokio::time::sleep(wait).await;
            attempt += 1;
        };
        if actual != digest.bytes() {
            let actual = format!("{}:{}", digest.algorithm(), hex::encode(actual));
            // fluxcd/pkg's message names only the expected digest, with its algorithm also
            // when the artifact gave none; the computed one is in the debug line.
            let expected = format!("{}:{}", digest.algorithm(), hex::encode(digest.bytes()));
            tracing::debug!(url = %url, %expected, %actual, "artifact digest mismatch");
            return Err(SourceError::DigestMismatch {
                url: url.clone(),
                expected,
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
        let mut response = self.client.get(url).send().await.map_err(|error| {
            // fluxcd/pkg's archive fetcher logs each try that got no answer.
            tracing::info!(error = %error, method = "GET", url = %redacted(url), "request failed");
            Attempt::Failed(Failed {
                answer: None,
                permanent: retryable_http::is_permanent(&error),
                failure: Some(error.to_string()),
            })
        })?;
        let status = response.status();
        if status == reqwest::StatusCode::NOT_FOUND {
            return Err(Attempt::Fatal(SourceError::ArtifactMissing {
                url: url.into(),
            }));
        }
        let tried = Tried::Answered {
            status: status.as_u16(),
            retry_after: None,
        };
        if retryable_http::retried(&tried) {
            let retry_after = response
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|value| value.to_str().ok())
                .map(str::to_string);
            return Err(Attempt::Failed(Failed {
                answer: Some((status.as_u16(), retry_after)),
                permanent: false,
                failure: retryable_http::unexpected_status(status.as_u16())
                    .then(|| format!("unexpected HTTP status {status}")),
            }));
        }
        // Anything but 200 is refused, as fluxcd/pkg refuses it (a 501 is not retried).
        if status != reqwest::StatusCode::OK {
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
        while let Some(chunk) = response.chunk().await.map_err(|error| {
            // Beyond fluxcd/pkg, which fails the reconciliation: a body cut short is
            // downloaded again.
            Attempt::Failed(Failed {
                answer: None,
                permanent: false,
                failure: Some(error.to_string()),
            })
        })? {
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
        let digest = Digest::parse(&sha256).unwrap();
        assert_eq!(
            digest.of_same_kind(b"abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    /// fluxcd/pkg's `verifyDigest` over go-digest: a bare checksum is sha256 (its test
    /// "fetches and verifies the checksum"), and each refusal in their words.
    #[test]
    fn digests_are_refused_in_fluxcd_pkgs_words() {
        assert_eq!(
            Digest::parse(&"ab".repeat(32)),
            Ok(Digest::Sha256(vec![0xab; 32])),
            "a checksum without its algorithm"
        );
        let refused = |text: &str| Digest::parse(text).unwrap_err().to_string();
        assert_eq!(refused(""), "empty digest");
        let cases = [
            (
                "sha1:4c624b40731c876b23d36fe732833ea8261f7f00",
                "failed to parse digest 'sha1:4c624b40731c876b23d36fe732833ea8261f7f00': unsupported digest algorithm",
            ),
            (
                "md5:00",
                "failed to parse digest 'md5:00': unsupported digest algorithm",
            ),
            (
                "sha256:00",
                "failed to parse digest 'sha256:00': invalid checksum digest length",
            ),
            (
                "nocolon",
                "failed to parse digest 'sha256:nocolon': invalid checksum digest length",
            ),
            (
                "sha256:",
                "failed to parse digest 'sha256:': invalid checksum digest format",
            ),
            (
                ":00",
                "failed to parse digest ':00': invalid checksum digest format",
            ),
            (
                "SHA1:00",
                "failed to parse digest 'SHA1:00': invalid checksum digest format",
            ),
            (
                "md5:00:00",
                "failed to parse digest 'md5:00:00': invalid checksum digest format",
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(refused(text), expected, "{text}");
        }
        for hex in ["zz".repeat(32), "AB".repeat(32)] {
            assert_eq!(
                refused(&format!("sha256:{hex}")),
                format!("failed to parse digest 'sha256:{hex}': invalid checksum digest format"),
                "lower-case hex only, as go-digest"
            );
        }
        assert_eq!(
            SourceError::from(DigestError::Empty).to_string(),
            "failed to verify archive: empty digest"
        );
    }

    #[test]
    fn passwords_are_not_logged() {
        assert_eq!(
            redacted("https://user:hunter2@example.com/a.tar.gz"),
            "https://user:xxxxx@example.com/a.tar.gz"
        );
        assert_eq!(redacted("http://a:1/x"), "http://a:1/x");
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
        let watcher =
            "http://source-watcher.flux-system.svc.cluster.local./externalartifact/a/b.tar.gz";
        assert_eq!(
            fetcher.effective_url(watcher),
            watcher,
            "source-watcher's artifacts take SOURCE_WATCHER_LOCALHOST only"
        );
        let both = Fetcher::new(FetcherOptions {
            localhost: Some("localhost:9090".into()),
            watcher_localhost: Some("localhost:9091".into()),
            ..FetcherOptions::default()
        })
        .unwrap();
        assert_eq!(
            both.effective_url(watcher),
            "http://localhost:9091/externalartifact/a/b.tar.gz"
        );
    }
}
