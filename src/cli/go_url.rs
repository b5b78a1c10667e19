//! Whether Go's `net/url.Parse` accepts an address, and if not, its error word for word. Flux's
//! event recorder parses `--events-addr` so at startup and exits on the error ("unable to
//! create event recorder"); what Go accepts, however odd (`notification-controller`, no
//! scheme), starts and fails on each event sent, as in Flux.
//!
//! Only the checks `Parse` makes are here, in its order: control characters, the scheme, a
//! colon in a relative path's first segment, the authority (userinfo, an IP literal, the
//! port, the host's characters and escapes), the path's and fragment's escapes. The query and
//! an opaque part are never checked. An IP literal's address is read by the standard library;
//! when Go refuses one, the message names it as Go does, its last words may differ.

use std::net::{Ipv4Addr, Ipv6Addr};

use go_std::quote;

/// Go's `url.Parse(raw)` error (`parse "…": …`), or `None` when Go parses it.
pub fn parse_error(raw: &str) -> Option<String> {
    let (reference, fragment) = match raw.split_once('#') {
        Some((reference, fragment)) => (reference, Some(fragment)),
        None => (raw, None),
    };
    if let Err(error) = parse_reference(reference) {
        return Some(format!("parse {}: {error}", quote(reference)));
    }
    let fragment = fragment.filter(|f| !f.is_empty())?;
    unescape(fragment, Mode::Fragment)
        .err()
        .map(|error| format!("parse {}: {error}", quote(raw)))
}

/// Which part of a URL is unescaped: the host and an IPv6 zone allow only some ASCII
/// characters and escapes; elsewhere only the escapes' form is checked.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Host,
    Zone,
    Other,
    Fragment,
}

/// Go's `parse(rawURL, viaRequest=false)`, reduced to its verdict.
fn parse_reference(raw: &str) -> Result<(), String> {
    if raw.bytes().any(|b| b < b' ' || b == 0x7f) {
        return Err("net/url: invalid control character in URL".into());
    }
    if raw.is_empty() || raw == "*" {
        return Ok(());
    }
    let (scheme, rest) = scheme(raw)?;
    let scheme = scheme.to_ascii_lowercase();
    let rest = match rest.strip_suffix('?') {
        Some(before) if rest.matches('?').count() == 1 => before,
        _ => rest.split_once('?').map_or(rest, |(before, _)| before),
    };
    if !rest.starts_with('/') {
        if !scheme.is_empty() {
            // An opaque part (`mailto:x`) is not looked into.
            return Ok(());
        }
        let first_segment = rest.split_once('/').map_or(rest, |(first, _)| first);
        if first_segment.contains(':') {
            return Err("first path segment in URL cannot contain colon".into());
        }
    }
    let mut path = rest;
    if (!scheme.is_empty() || !rest.starts_with("///")) && rest.starts_with("//") {
        let authority = &rest[2..];
        let (authority, after) = match authority.find('/') {
            Some(slash) => (&authority[..slash], &authority[slash..]),
            None => (authority, ""),
        };
        check_authority(&scheme, authority)?;
        path = after;
    }
    unescape(path, Mode::Other).map(drop)
}

/// Go's `getScheme`: letters, then letters, digits, `+`, `-` or `.` up to a colon; a colon
/// first is an error, anything else means there is no scheme.
fn scheme(raw: &str) -> Result<(&str, &str), String> {
    for (i, c) in raw.bytes().enumerate() {
        match c {
            b'a'..=b'z' | b'A'..=b'Z' => {}
            b'0'..=b'9' | b'+' | b'-' | b'.' if i > 0 => {}
            b':' if i == 0 => return Err("missing protocol scheme".into()),
            b':' => return Ok((&raw[..i], &raw[i + 1..])),
            _ => return Ok(("", raw)),
        }
    }
    Ok(("", raw))
}

/// Go's `parseAuthority`: the host after the last `@`, then the userinfo before it.
fn check_authority(scheme: &str, authority: &str) -> Result<(), String> {
    let Some(at) = authority.rfind('@') else {
        return check_host(scheme, authority);
    };
    check_host(scheme, &authority[at + 1..])?;
    let userinfo = &authority[..at];
    let allowed = |c: char| c.is_ascii_alphanumeric() || "-._:~!$&'()*+,;=%@".contains(c);
    if !userinfo.chars().all(allowed) {
        return Err("net/url: invalid userinfo".into());
    }
    match userinfo.split_once(':') {
        Some((user, password)) => {
            unescape(user, Mode::Other)?;
            unescape(password, Mode::Other)?;
        }
        None => {
            unescape(userinfo, Mode::Other)?;
        }
    }
    Ok(())
}

/// Go's `parseHost`: an IP literal in brackets with an optional port, else a name whose
/// port, if any, is digits (for http and https after the first colon, the strict colons of
/// Go 1.26, else after the last).
fn check_host(scheme: &str, host: &str) -> Result<(), String> {
    match host.rfind('[') {
        Some(open) if open > 0 => return Err("invalid IP-literal".into()),
        Some(_) => return check_ip_literal(host),
        None => {}
    }
    if let Some(first) = host.find(':') {
        let colon = if scheme == "http" || scheme == "https" {
            first
        } else {
            host.rfind(':').unwrap_or(first)
        };
        check_port(&host[colon..])?;
    }
    unescape(host, Mode::Host).map(drop)
}

/// `[address%25zone]:port`: the port, the escapes, and an IPv6 address (not an IPv4 one).
fn check_ip_literal(host: &str) -> Result<(), String> {
    let close = host.rfind(']').ok_or("missing ']' in host")?;
    let port = &host[close + 1..];
    check_port(port)?;
    unescape(port, Mode::Host)?;
    let hostname = &host[1..close];
    let mut address = match hostname.find("%25") {
        Some(zone) => {
            let mut address = unescape(&hostname[..zone], Mode::Host)?;
            address.extend(unescape(&hostname[zone..], Mode::Zone)?);
            address
        }
        None => unescape(hostname, Mode::Host)?,
    };
    let text = String::from_utf8(std::mem::take(&mut address))
        .unwrap_or_else(|invalid| String::from_utf8_lossy(invalid.as_bytes()).into_owned());
    match parse_addr(&text) {
        Ok(Addr::V4) => Err("invalid IP-literal".into()),
        Ok(Addr::V6) => Ok(()),
        Err(why) => Err(format!("invalid host: ParseAddr({}): {why}", quote(&text))),
    }
}

enum Addr {
    V4,
    V6,
}

/// netip.ParseAddr's verdict: an IPv6 address with an optional non-empty zone, or a dotted
/// IPv4 address.
fn parse_addr(text: &str) -> Result<Addr, &'static str> {
    if text.contains(':') {
        let (address, zone) = match text.split_once('%') {
            Some((address, zone)) => (address, Some(zone)),
            None => (text, None),
        };
        if zone == Some("") {
            return Err("zone must be a non-empty string");
        }
        return address
            .parse::<Ipv6Addr>()
            .map(|_| Addr::V6)
            .map_err(|_| "invalid IPv6 address");
    }
    if text.contains('.') {
        return text
            .parse::<Ipv4Addr>()
            .map(|_| Addr::V4)
            .map_err(|_| "invalid IPv4 address");
    }
    Err("unable to parse IP")
}

/// Go's `validOptionalPort`: nothing, or a colon and digits.
fn check_port(colon_port: &str) -> Result<(), String> {
    let valid = colon_port.is_empty()
        || colon_port
            .strip_prefix(':')
            .is_some_and(|digits| digits.bytes().all(|b| b.is_ascii_digit()));
    if valid {
        Ok(())
    } else {
        Err(format!("invalid port {} after host", quote(colon_port)))
    }
}

/// The bytes `text` unescapes to, or Go's error for its first bad escape or (in a host) a
/// character a host may not hold.
fn unescape(text: &str, mode: Mode) -> Result<Vec<u8>, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c != b'%' {
            if matches!(mode, Mode::Host | Mode::Zone) && c < 0x80 && !host_allows(c) {
                return Err(format!(
                    "invalid character {} in host name",
                    quote(&char::from(c).to_string())
                ));
            }
            out.push(c);
            i += 1;
            continue;
        }
        let escape = &bytes[i..(i + 3).min(bytes.len())];
        let (Some(high), Some(low)) = (
            escape.get(1).and_then(|&h| hex_value(h)),
            escape.get(2).and_then(|&l| hex_value(l)),
        ) else {
            return Err(escape_error(escape));
        };
        let value = high << 4 | low;
        let refused = match mode {
            // Only non-ASCII bytes may be escaped in a host, and `%25` for a zone.
            Mode::Host => high < 8 && escape != b"%25",
            Mode::Zone => escape != b"%25" && value != b' ' && !host_allows(value),
            Mode::Other | Mode::Fragment => false,
        };
        if refused {
            return Err(escape_error(escape));
        }
        out.push(value);
        i += 3;
    }
    Ok(out)
}

/// Go's `EscapeError`: the escape quoted, bytes that are not UTF-8 as `\xHH`.
fn escape_error(escape: &[u8]) -> String {
    format!("invalid URL escape {}", go_std::quote_bytes(escape))
}

/// The ASCII characters Go leaves unescaped in a host: letters, digits, `-_.~`, the
/// sub-delimiters, `:` for the port, brackets for IPv6, and `<>"`, which Go lets through.
fn host_allows(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"-_.~!$&'()*+,;=:[]<>\"".contains(&c)
}

fn hex_value(c: u8) -> Option<u8> {
    char::from(c).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::parse_error;

    /// `tests/fixtures/go/url-parse.json`: 6,000 addresses (hand-picked, every composition of
    /// schemes, separators, authorities and tails, random strings over URL characters) as Go
    /// 1.26's `net/url.Parse` answered them (`tools/go-oracles/url-parse`). The same verdict
    /// and the same words; an IP literal Go's netip refuses is named as Go names it.
    #[test]
    fn addresses_parse_as_gos_net_url_parses_them() {
        #[derive(serde::Deserialize)]
        struct Fixture {
            rows: Vec<(String, String)>,
        }
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/go/url-parse.json"
        );
        let fixture: Fixture =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        assert!(fixture.rows.len() >= 6000);
        let mut differ = Vec::new();
        for (input, go) in &fixture.rows {
            let ours = parse_error(input).unwrap_or_default();
            let same = match go.split_once("invalid host: ParseAddr(") {
                Some((before, after)) => {
                    let named = &after[..after.find("): ").unwrap_or(after.len())];
                    ours.starts_with(&format!("{before}invalid host: ParseAddr({named}): "))
                }
                None => ours == *go,
            };
            if !same {
                differ.push(format!("{input:?}: Go {go:?}, ours {ours:?}"));
            }
        }
        assert!(
            differ.is_empty(),
            "{} differ:\n{}",
            differ.len(),
            differ[..differ.len().min(30)].join("\n")
        );
    }
}
