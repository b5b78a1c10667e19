//! Parsing remote entries with kustomize's repository-spec conventions.

use std::time::Duration;

use super::RemoteError;
use crate::api::GoDuration;

/// What a remote entry names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RemoteSpec {
    /// A directory in a git repository.
    Git {
        /// The URL to clone.
        repo: String,
        /// The directory inside the repository; empty for its root.
        path: String,
        /// Branch, tag or commit; the remote's default branch when absent.
        git_ref: Option<String>,
        submodules: bool,
        timeout: Option<Duration>,
    },
    /// One manifest file over http(s).
    File { url: String },
}

/// Hosts whose URLs name a repository by their first two path segments.
const GIT_HOSTS: [&str; 3] = ["github.com", "gitlab.com", "bitbucket.org"];

/// Parses a `resources:` or `components:` entry that names something remote.
pub fn parse_remote(entry: &str) -> Result<RemoteSpec, RemoteError> {
    let unsupported =
        |why: &str| RemoteError::Unsupported(format!("remote resource {entry:?}: {why}"));
    let (forced_git, rest) = match entry.strip_prefix("git::") {
        Some(rest) => (true, rest),
        None => (false, entry),
    };
    if rest.starts_with("ssh://")
        || rest.starts_with("git@")
        || rest.contains("@") && !rest.contains("://")
    {
        return Err(unsupported(
            "ssh URLs are not supported (the ssh transport would run the ssh program); use https",
        ));
    }
    let (location, query) = match rest.split_once('?') {
        Some((location, query)) => (location, query),
        None => (rest, ""),
    };
    let Query {
        git_ref,
        submodules,
        timeout,
    } = Query::parse(query).map_err(|why| unsupported(&why.to_string()))?;

    let (scheme, without_scheme) = match location.split_once("://") {
        Some((scheme, rest)) => (scheme, rest),
        None if GIT_HOSTS
            .iter()
            .any(|h| location.starts_with(&format!("{h}/"))) =>
        {
            ("https", location)
        }
        None => return Err(unsupported("not a URL")),
    };
    if !matches!(scheme, "https" | "http" | "git" | "file") {
        return Err(unsupported(&format!("scheme {scheme:?} is not supported")));
    }
    let host = without_scheme.split('/').next().unwrap_or("");
    let has_path_separator = without_scheme.contains("//");
    let looks_like_git = forced_git
        || matches!(scheme, "git" | "file")
        || has_path_separator
        || without_scheme.contains(".git")
        || git_ref.is_some()
        || GIT_HOSTS.contains(&host);
    if !looks_like_git {
        return Ok(RemoteSpec::File {
            url: entry.to_string(),
        });
    }

    let (repo_part, path) = split_repository(without_scheme, host).map_err(&unsupported)?;
    if path.split('/').any(|segment| segment == "..") {
        return Err(unsupported(
            "the path inside the repository may not contain '..'",
        ));
    }
    Ok(RemoteSpec::Git {
        repo: format!("{scheme}://{repo_part}"),
        path: path.trim_end_matches('/').to_string(),
        git_ref,
        submodules,
        timeout,
    })
}

/// A query parameter kustomize would not accept.
#[derive(Debug, thiserror::Error)]
enum QueryError {
    #[error("submodules={0:?} is not true or false")]
    Submodules(String),
    #[error("timeout={0:?} is not a duration")]
    Timeout(String),
}

/// A remote's query parameters, as kustomize reads them.
struct Query {
    git_ref: Option<String>,
    submodules: bool,
    timeout: Option<Duration>,
}

impl Query {
    fn parse(query: &str) -> Result<Query, QueryError> {
        let mut parsed = Query {
            git_ref: None,
            submodules: true,
            timeout: None,
        };
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            match key {
                "ref" | "version" => {
                    parsed.git_ref = Some(value.to_string()).filter(|v| !v.is_empty())
                }
                "submodules" => {
                    parsed.submodules = value
                        .parse()
                        .map_err(|_| QueryError::Submodules(value.to_string()))?
                }
                "timeout" => {
                    parsed.timeout = Some(
                        parse_timeout(value)
                            .ok_or_else(|| QueryError::Timeout(value.to_string()))?,
                    )
                }
                _ => {}
            }
        }
        Ok(parsed)
    }
}

/// The repository and the path inside it: after `//`, after `.git`, or after a known git
/// host's `org/repo`.
fn split_repository(without_scheme: &str, host: &str) -> Result<(String, String), &'static str> {
    if let Some((repo, path)) = without_scheme.split_once("//") {
        Ok((repo.to_string(), path.to_string()))
    } else if let Some(index) = without_scheme.find(".git/").or_else(|| {
        without_scheme
            .ends_with(".git")
            .then(|| without_scheme.len() - 4)
    }) {
        let end = index + 4;
        Ok((
            without_scheme[..end].to_string(),
            without_scheme[end..].trim_start_matches('/').to_string(),
        ))
    } else if GIT_HOSTS.contains(&host) {
        let segments: Vec<&str> = without_scheme.splitn(4, '/').collect();
        if segments.len() < 3 {
            return Err("expected host/org/repo");
        }
        Ok((
            segments[..3].join("/"),
            segments.get(3).copied().unwrap_or("").to_string(),
        ))
    } else {
        Ok((without_scheme.to_string(), String::new()))
    }
}

/// Seconds (`30`) or a Go duration (`1m30s`).
fn parse_timeout(value: &str) -> Option<Duration> {
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    GoDuration::parse(value).ok().map(GoDuration::to_std)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(repo: &str, path: &str, git_ref: Option<&str>) -> RemoteSpec {
        RemoteSpec::Git {
            repo: repo.into(),
            path: path.into(),
            git_ref: git_ref.map(str::to_string),
            submodules: true,
            timeout: None,
        }
    }

    #[test]
    fn repository_forms() {
        assert_eq!(
            parse_remote("https://github.com/org/repo//deploy/base?ref=v1.2").unwrap(),
            git("https://github.com/org/repo", "deploy/base", Some("v1.2"))
        );
        assert_eq!(
            parse_remote("git::https://example.com/team/repo.git//x").unwrap(),
            git("https://example.com/team/repo.git", "x", None)
        );
        assert_eq!(
            parse_remote("github.com/org/repo/deploy?version=main").unwrap(),
            git("https://github.com/org/repo", "deploy", Some("main"))
        );
        assert_eq!(
            parse_remote("https://example.com/team/repo.git/sub/dir").unwrap(),
            git("https://example.com/team/repo.git", "sub/dir", None)
        );
        assert_eq!(
            parse_remote("file:///srv/repos/app//overlays/prod").unwrap(),
            git("file:///srv/repos/app", "overlays/prod", None)
        );
        assert_eq!(
            parse_remote("git://127.0.0.1:9418/app").unwrap(),
            git("git://127.0.0.1:9418/app", "", None)
        );
        let RemoteSpec::Git {
            timeout,
            submodules,
            ..
        } = parse_remote("https://h/r//p?timeout=1m30s&submodules=false").unwrap()
        else {
            panic!("git")
        };
        assert_eq!(timeout, Some(Duration::from_secs(90)));
        assert!(!submodules);
    }

    #[test]
    fn files_and_refusals() {
        assert_eq!(
            parse_remote("https://raw.example.com/app/deploy.yaml").unwrap(),
            RemoteSpec::File {
                url: "https://raw.example.com/app/deploy.yaml".into()
            }
        );
        for refused in [
            "ssh://git@github.com/org/repo",
            "git@github.com:org/repo.git",
            "ftp://x/y",
            "https://h/r//../etc",
        ] {
            assert!(parse_remote(refused).is_err(), "{refused}");
        }
        let err = parse_remote("ssh://git@github.com/org/repo")
            .unwrap_err()
            .to_string();
        assert!(err.contains("ssh"), "{err}");
    }
}
