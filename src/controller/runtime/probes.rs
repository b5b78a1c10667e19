//! The liveness and readiness probes, as Flux's manager answers them: fluxcd/pkg
//! `runtime/probes` registers one check, `ping` (always healthy), for each of `/healthz` and
//! `/readyz`, and controller-runtime's `healthz.Handler` serves the aggregate at the endpoint
//! (and at the endpoint with a trailing slash) and the check alone at `<endpoint>/ping`. The
//! aggregate answers `ok`, or with `?verbose` a line per check; `?exclude=<check>` (repeated)
//! leaves a check out. Pure: [`answer`] maps a path and query to what is sent.

/// The checks Flux registers, by name.
const CHECKS: [&str; 1] = ["ping"];

/// What a probe request is answered with.
#[derive(Debug, PartialEq, Eq)]
pub struct ProbeAnswer {
    pub status: u16,
    pub body: String,
    /// Whether `X-Content-Type-Options: nosniff` goes with it (Go's `http.Error` and the
    /// aggregate's writer set it; a single check's `ok` goes without).
    pub nosniff: bool,
}

/// The content type of every probe answer (Go's, for its plain-text answers).
pub const CONTENT_TYPE: &str = "text/plain; charset=utf-8";

/// The answer to `path` (with its raw `query`), or none when the path is not a probe's.
pub fn answer(path: &str, query: Option<&str>) -> Option<ProbeAnswer> {
    let rest = ["/healthz", "/readyz"]
        .iter()
        .find_map(|endpoint| path.strip_prefix(endpoint))?;
    if !rest.is_empty() && !rest.starts_with('/') {
        return None;
    }
    // controller-runtime cleans the path left after the endpoint (`path.Clean`): one layer
    // of sub-paths, a trailing slash dropped.
    let check = rest.trim_matches('/');
    if check.is_empty() {
        return Some(aggregate(query));
    }
    Some(if CHECKS.contains(&check) {
        ProbeAnswer {
            status: 200,
            body: "ok".into(),
            nosniff: false,
        }
    } else {
        not_found()
    })
}

/// Go's `http.NotFoundHandler`.
pub fn not_found() -> ProbeAnswer {
    ProbeAnswer {
        status: 404,
        body: "404 page not found\n".into(),
        nosniff: true,
    }
}

/// Every check at once: `ok`, or with `verbose` (any value) each check's line in name order,
/// the excluded marked, excludes that name no check warned of, and the verdict.
fn aggregate(query: Option<&str>) -> ProbeAnswer {
    let pairs: Vec<(String, String)> = form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .map(|(key, value)| (key.into_owned(), value.into_owned()))
        .collect();
    let verbose = pairs.iter().any(|(key, _)| key == "verbose");
    let mut excluded: Vec<&str> = pairs
        .iter()
        .filter(|(key, _)| key == "exclude")
        .map(|(_, value)| value.as_str())
        .collect();
    if !verbose {
        return ProbeAnswer {
            status: 200,
            body: "ok".into(),
            nosniff: true,
        };
    }
    let mut body = String::new();
    let mut names = CHECKS;
    names.sort_unstable();
    for name in names {
        if excluded.contains(&name) {
            excluded.retain(|other| *other != name);
            body.push_str(&format!("[+]{name} excluded: ok\n"));
        } else {
            body.push_str(&format!("[+]{name} ok\n"));
        }
    }
    // A set, as Go's: each unknown name once (in name order; Go's is unordered).
    excluded.sort_unstable();
    excluded.dedup();
    if !excluded.is_empty() {
        let quoted: Vec<String> = excluded.iter().map(|name| format!("{name:?}")).collect();
        body.push_str(&format!(
            "warn: some health checks cannot be excluded: no matches for {}\n",
            quoted.join(",")
        ));
    }
    body.push_str("healthz check passed\n");
    ProbeAnswer {
        status: 200,
        body,
        nosniff: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// controller-runtime's `healthz_test.go`, for the one check Flux registers: the
    /// aggregate is `ok`, verbose on request; a check alone at its sub-path; excludes marked
    /// or warned of; anything else under the endpoint is not found, and other paths are not
    /// the probes'.
    #[test]
    fn the_probes_answer_as_controller_runtimes_handler_with_flux_ping_check() {
        let ok = |body: &str, nosniff| {
            Some(ProbeAnswer {
                status: 200,
                body: body.into(),
                nosniff,
            })
        };
        let rows = [
            ("/healthz", None, ok("ok", true)),
            ("/readyz", None, ok("ok", true)),
            ("/healthz/", None, ok("ok", true)),
            ("/readyz", Some("exclude=ping"), ok("ok", true)),
            (
                "/healthz",
                Some("verbose"),
                ok("[+]ping ok\nhealthz check passed\n", true),
            ),
            (
                "/readyz",
                Some("verbose=false"),
                ok("[+]ping ok\nhealthz check passed\n", true),
            ),
            (
                "/readyz",
                Some("verbose&exclude=ping"),
                ok("[+]ping excluded: ok\nhealthz check passed\n", true),
            ),
            (
                "/healthz",
                Some("verbose=1&exclude=other&exclude=ping&exclude=nope&exclude=other"),
                ok(
                    "[+]ping excluded: ok\nwarn: some health checks cannot be excluded: no matches for \"nope\",\"other\"\nhealthz check passed\n",
                    true,
                ),
            ),
            ("/healthz/ping", None, ok("ok", false)),
            ("/readyz/ping/", Some("verbose"), ok("ok", false)),
            ("/healthz/log", None, Some(not_found())),
            ("/healthzz", None, None),
            ("/metrics", None, None),
            ("/", None, None),
        ];
        for (path, query, want) in rows {
            assert_eq!(answer(path, query), want, "{path}?{query:?}");
        }
    }
}
