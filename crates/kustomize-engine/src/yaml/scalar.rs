//! What a plain (unquoted) YAML scalar means, under the two rule sets Kubernetes tools use.
//!
//! - [`Schema::Kubernetes`]: sigs.k8s.io/yaml over go-yaml v2 (YAML 1.1), which reads
//!   kustomization files and what `kubectl apply` sends: `yes`/`on`/`y` are booleans,
//!   timestamps stay strings.
//! - [`Schema::Kyaml`]: go-yaml v3 as kustomize's kyaml reads resources: only
//!   `true`/`false` are booleans, dates become RFC 3339 timestamps.
//!
//! Both read numbers with Go's base-0 `ParseInt` after dropping underscores (`0777` and
//! `0o17` are octal, `0x1F` hex), then fall back to floats.
//!
//! The emitter asks [`needs_quotes`] whether a string would be misread by either reader.

use super::YamlError;
use crate::value::{Number, Value};

/// Which reader's rules resolve plain scalars.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schema {
    /// YAML 1.1 rules of sigs.k8s.io/yaml (kustomization files, kubectl).
    Kubernetes,
    /// go-yaml v3 rules as kyaml applies them to resources.
    Kyaml,
}

/// A plain scalar resolved to a typed value.
#[derive(Clone, Debug, PartialEq)]
pub enum Resolved {
    Null,
    Bool(bool),
    Int(Number),
    Float(f64),
    /// A YAML 1.2 timestamp, already rendered as Go's `time.Time` JSON form.
    Timestamp(String),
    Str,
}

/// Resolves a plain scalar's text under `schema`.
pub fn resolve_plain(text: &str, schema: Schema) -> Resolved {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Resolved::Null,
        "true" | "True" | "TRUE" => return Resolved::Bool(true),
        "false" | "False" | "FALSE" => return Resolved::Bool(false),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Resolved::Float(f64::INFINITY);
        }
        "-.inf" | "-.Inf" | "-.INF" => return Resolved::Float(f64::NEG_INFINITY),
        ".nan" | ".NaN" | ".NAN" => return Resolved::Float(f64::NAN),
        _ => {}
    }
    if schema == Schema::Kubernetes
        && let Some(b) = yaml11_bool(text)
    {
        return Resolved::Bool(b);
    }
    let first = text.as_bytes()[0];
    match first {
        b'0'..=b'9' | b'+' | b'-' => resolve_number(text, schema),
        // Go's ParseFloat accepts `.5` but also `.e1`-free forms only; `inf`-like words never
        // start with '.', so a plain float parse is enough here.
        b'.' => match parse_go_float(text) {
            Some(f) => Resolved::Float(f),
            None => Resolved::Str,
        },
        _ => Resolved::Str,
    }
}

/// A plain mapping key as sigs.k8s.io/yaml's `YAMLToJSON` names it: go-yaml v2 reads the key
/// as it reads a value, and the JSON key is that value as Go prints it (`on` is "true",
/// `0x1F` "31", `1e3` "1000", a float at float32 precision: `1.23456789012345` is
/// "1.2345679"). A null key or an integer beyond int64 has no JSON key (`None`).
pub fn yaml_to_json_key(text: &str) -> Option<String> {
    Some(match resolve_plain(text, Schema::Kubernetes) {
        Resolved::Null => return None,
        Resolved::Bool(b) => b.to_string(),
        Resolved::Int(n) => n.as_i64()?.to_string(),
        Resolved::Float(f) => match go_std::format_float_g32(f).as_str() {
            "+Inf" => ".inf".to_string(),
            "-Inf" => "-.inf".to_string(),
            "NaN" => ".nan".to_string(),
            other => other.to_string(),
        },
        Resolved::Timestamp(_) | Resolved::Str => text.to_string(),
    })
}

/// The YAML 1.1 booleans that go-yaml v3 reads as strings but v2 reads as booleans.
fn yaml11_bool(text: &str) -> Option<bool> {
    match text {
        "y" | "Y" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" => Some(true),
        "n" | "N" | "no" | "No" | "NO" | "off" | "Off" | "OFF" => Some(false),
        _ => None,
    }
}

fn resolve_number(text: &str, schema: Schema) -> Resolved {
    if schema == Schema::Kyaml
        && let Some(timestamp) = parse_timestamp(text)
    {
        return Resolved::Timestamp(timestamp);
    }
    // Both readers drop every underscore before trying the numeric forms.
    let plain: String = text.chars().filter(|c| *c != '_').collect();
    if let Some(n) = parse_go_int(&plain) {
        return Resolved::Int(n);
    }
    if is_yaml_style_float(&plain)
        && let Some(f) = parse_go_float(&plain)
    {
        return Resolved::Float(f);
    }
    Resolved::Str
}

/// Go's `strconv.ParseInt(s, 0, 64)`, falling back to `ParseUint`: optional sign, then
/// `0x`/`0o`/`0b` prefixes or a leading `0` for octal.
fn parse_go_int(text: &str) -> Option<Number> {
    let (negative, unsigned) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let (radix, digits) =
        if let Some(d) = unsigned.strip_prefix("0x").or(unsigned.strip_prefix("0X")) {
            (16, d)
        } else if let Some(d) = unsigned.strip_prefix("0o").or(unsigned.strip_prefix("0O")) {
            (8, d)
        } else if let Some(d) = unsigned.strip_prefix("0b").or(unsigned.strip_prefix("0B")) {
            (2, d)
        } else if unsigned.len() > 1 && unsigned.starts_with('0') {
            (8, &unsigned[1..])
        } else {
            (10, unsigned)
        };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = u64::from_str_radix(digits, radix).ok()?;
    if negative {
        if magnitude <= i64::MAX as u64 {
            Some(Number::from(-(magnitude as i64)))
        } else if magnitude == i64::MAX as u64 + 1 {
            Some(Number::from(i64::MIN))
        } else {
            None
        }
    } else if let Ok(v) = i64::try_from(magnitude) {
        Some(Number::from(v))
    } else {
        Some(Number::from(magnitude))
    }
}

/// `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`, the float shape both readers accept.
fn is_yaml_style_float(text: &str) -> bool {
    let s = text.strip_prefix(['-', '+']).unwrap_or(text);
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let mantissa_ok = match mantissa.split_once('.') {
        Some(("", frac)) => !frac.is_empty() && frac.bytes().all(|b| b.is_ascii_digit()),
        Some((int, frac)) => {
            !int.is_empty()
                && int.bytes().all(|b| b.is_ascii_digit())
                && frac.bytes().all(|b| b.is_ascii_digit())
        }
        None => !mantissa.is_empty() && mantissa.bytes().all(|b| b.is_ascii_digit()),
    };
    let exponent_ok = exponent.is_none_or(|e| {
        let digits = e.strip_prefix(['-', '+']).unwrap_or(e);
        !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
    });
    mantissa_ok && exponent_ok
}

/// Decimal floats as Go's `ParseFloat` reads them (hex floats and `inf` words excluded: the
/// callers only pass text that starts with a digit, sign or dot).
fn parse_go_float(text: &str) -> Option<f64> {
    let s = text.strip_prefix(['-', '+']).unwrap_or(text);
    if s.is_empty()
        || !s
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'-' | b'+'))
    {
        return None;
    }
    // Go's ParseFloat fails on overflow (`1e400`), and the text then stays a string.
    text.parse::<f64>().ok().filter(|f| f.is_finite())
}

/// go-yaml v3 timestamps: `YYYY-M-D`, optionally followed by `T`/`t`/space and a time with an
/// optional fraction and zone. Returns Go's RFC 3339 JSON form of the instant.
fn parse_timestamp(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    if bytes.len() < 5 || !bytes[..4].iter().all(u8::is_ascii_digit) || bytes[4] != b'-' {
        return None;
    }
    let (date, time) = match text.find(['T', 't', ' ']) {
        Some(i) => (&text[..i], Some((&text[i..i + 1], &text[i + 1..]))),
        None => (text, None),
    };
    let mut parts = date.splitn(3, '-');
    let year: u32 = parts.next()?.parse().ok()?;
    let month = short_field(parts.next()?, 1, 12)?;
    let day_text = parts.next()?;
    let day = short_field(day_text, 1, days_in_month(year, month))?;
    let date_out = format!("{year:04}-{month:02}-{day:02}");
    let Some((separator, time)) = time else {
        return Some(format!("{date_out}T00:00:00Z"));
    };
    // Zone: `Z` or `±hh:mm`, required after `T`, forbidden after a space.
    let (clock, zone) = if separator == " " {
        (time, None)
    } else if let Some(clock) = time.strip_suffix('Z') {
        (clock, Some("Z".to_string()))
    } else {
        let i = time.rfind(['+', '-'])?;
        let zone = &time[i..];
        let (h, m) = zone[1..].split_once(':')?;
        if h.len() != 2 || m.len() != 2 {
            return None;
        }
        let (h, m): (u32, u32) = (h.parse().ok()?, m.parse().ok()?);
        if h > 23 || m > 59 {
            return None;
        }
        let zone = if h == 0 && m == 0 {
            "Z".to_string()
        } else {
            zone.to_string()
        };
        (&time[..i], Some(zone))
    };
    let (hms, fraction) = match clock.split_once('.') {
        // Go reads any number of fraction digits and keeps nanoseconds.
        Some((hms, f)) if !f.is_empty() && f.bytes().all(|b| b.is_ascii_digit()) => {
            (hms, f[..f.len().min(9)].trim_end_matches('0'))
        }
        Some(_) => return None,
        None => (clock, ""),
    };
    let mut fields = hms.splitn(3, ':');
    let hour = short_field(fields.next()?, 0, 23)?;
    let minute = short_field(fields.next()?, 0, 59)?;
    let second = short_field(fields.next()?, 0, 59)?;
    let fraction = if fraction.is_empty() {
        String::new()
    } else {
        format!(".{fraction}")
    };
    Some(format!(
        "{date_out}T{hour:02}:{minute:02}:{second:02}{fraction}{}",
        zone.as_deref().unwrap_or("Z")
    ))
}

/// A one- or two-digit numeric field within `[min, max]` (Go's `1` and `2` layout elements).
fn short_field(text: &str, min: u32, max: u32) -> Option<u32> {
    if text.is_empty() || text.len() > 2 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let v: u32 = text.parse().ok()?;
    (min..=max).contains(&v).then_some(v)
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        4 | 6 | 9 | 11 => 30,
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => {
            29
        }
        2 => 28,
        _ => 31,
    }
}

/// Whether a string must be quoted so that neither reader takes it for another type: go-yaml
/// v3's rule (anything v3 resolves to non-string) plus its YAML 1.1 compatibility list (old
/// booleans, base-60 numbers such as `1:20`).
pub fn needs_quotes(text: &str) -> bool {
    !matches!(resolve_plain(text, Schema::Kyaml), Resolved::Str)
        || yaml11_bool(text).is_some()
        || is_base60_float(text)
}

/// YAML 1.1 base-60 numbers: `^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$`.
fn is_base60_float(text: &str) -> bool {
    let s = text.strip_prefix(['-', '+']).unwrap_or(text);
    if !s.as_bytes().first().is_some_and(u8::is_ascii_digit) || !s.as_bytes().contains(&b':') {
        return false;
    }
    let (s, _) = match s.split_once('.') {
        Some((head, tail)) if tail.bytes().all(|b| b.is_ascii_digit() || b == b'_') => (head, tail),
        Some(_) => return false,
        None => (s, ""),
    };
    let mut groups = s.split(':');
    let Some(head) = groups.next() else {
        return false;
    };
    let head_ok = head.as_bytes().first().is_some_and(u8::is_ascii_digit)
        && head.bytes().all(|b| b.is_ascii_digit() || b == b'_');
    let mut count = 0;
    let groups_ok = groups.all(|g| {
        count += 1;
        let b = g.as_bytes();
        match b.len() {
            1 => b[0].is_ascii_digit(),
            2 => (b'0'..=b'5').contains(&b[0]) && b[1].is_ascii_digit(),
            _ => false,
        }
    });
    head_ok && count > 0 && groups_ok
}

/// A resolved scalar as a JSON value, a number keeping `text` as its spelling; non-finite floats
/// are refused as Go's JSON encoder does.
pub fn to_json(resolved: Resolved, text: &str) -> Option<Value> {
    Some(match resolved {
        Resolved::Null => Value::Null,
        Resolved::Bool(b) => Value::Bool(b),
        Resolved::Int(n) => Value::Number(Number::spelled(n, text)),
        Resolved::Float(f) => Value::Number(Number::spelled(Number::from_f64(f)?, text)),
        Resolved::Timestamp(t) => Value::String(t),
        Resolved::Str => Value::String(text.to_string()),
    })
}

/// A scalar under an explicit `!!bool`, `!!int`, `!!float` or `!!timestamp` tag, as go-yaml
/// decodes it: the text must resolve to that type (an integer widens to a float), quoted or
/// not. The error leaves the text out (go-yaml prints it): it may be a Secret's.
pub(super) fn resolve_tagged(
    text: &str,
    tag: &str,
    schema: Schema,
    line: usize,
) -> Result<Resolved, YamlError> {
    let tag_of = |resolved: &Resolved| match resolved {
        Resolved::Null => "null",
        Resolved::Bool(_) => "bool",
        Resolved::Int(_) => "int",
        Resolved::Float(_) => "float",
        Resolved::Timestamp(_) => "timestamp",
        Resolved::Str => "str",
    };
    match (resolve_plain(text, schema), tag) {
        (resolved, _) if tag_of(&resolved) == tag => Ok(resolved),
        (Resolved::Int(n), "float") => Ok(Resolved::Float(n.as_f64().unwrap_or_default())),
        // sigs.k8s.io/yaml keeps a timestamp's text.
        (Resolved::Str, "timestamp") if schema == Schema::Kubernetes => Ok(Resolved::Str),
        (resolved, _) => Err(YamlError::TagMismatch {
            found: tag_of(&resolved),
            tag: tag.to_string(),
            line,
        }),
    }
}

/// A `!!binary` scalar: go-yaml decodes its base64 (line breaks ignored) and holds the bytes
/// as a string; bytes that are no UTF-8 print as U+FFFD in JSON.
pub(super) fn decode_binary(text: &str, line: usize) -> Result<Value, YamlError> {
    use base64::Engine;
    let compact: String = text.chars().filter(|c| !matches!(c, '\n' | '\r')).collect();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(compact)
        .map_err(|_| YamlError::InvalidBinary { line })?;
    Ok(Value::String(String::from_utf8_lossy(&bytes).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kyaml(text: &str) -> Resolved {
        resolve_plain(text, Schema::Kyaml)
    }

    #[test]
    fn kyaml_rules() {
        assert_eq!(kyaml("on"), Resolved::Str);
        assert_eq!(kyaml("yes"), Resolved::Str);
        assert_eq!(kyaml("true"), Resolved::Bool(true));
        assert_eq!(kyaml("0777"), Resolved::Int(511.into()));
        assert_eq!(kyaml("0o17"), Resolved::Int(15.into()));
        assert_eq!(kyaml("0x1F"), Resolved::Int(31.into()));
        assert_eq!(kyaml("1_000"), Resolved::Int(1000.into()));
        assert_eq!(kyaml("1_"), Resolved::Int(1.into()));
        assert_eq!(kyaml("+12"), Resolved::Int(12.into()));
        assert_eq!(kyaml("08"), Resolved::Float(8.0));
        assert_eq!(kyaml("1.0"), Resolved::Float(1.0));
        assert_eq!(kyaml(".5"), Resolved::Float(0.5));
        assert_eq!(kyaml("1e3"), Resolved::Float(1000.0));
        assert_eq!(
            kyaml("12345678901234567890"),
            Resolved::Int(12345678901234567890u64.into())
        );
        assert_eq!(kyaml("~"), Resolved::Null);
        assert_eq!(
            kyaml("2001-12-14"),
            Resolved::Timestamp("2001-12-14T00:00:00Z".into())
        );
        assert_eq!(
            kyaml("2001-2-3"),
            Resolved::Timestamp("2001-02-03T00:00:00Z".into())
        );
        assert_eq!(kyaml("2001-02-30"), Resolved::Str);
        assert_eq!(
            kyaml("2001-12-14T21:59:43.10-05:00"),
            Resolved::Timestamp("2001-12-14T21:59:43.1-05:00".into())
        );
        assert_eq!(kyaml("NaN"), Resolved::Str);
        assert_eq!(kyaml("1e400"), Resolved::Str);
        assert_eq!(kyaml("0x"), Resolved::Str);
        assert_eq!(kyaml("1.2.3"), Resolved::Str);
        assert_eq!(kyaml("-"), Resolved::Str);
    }

    #[test]
    fn kubernetes_rules_read_yaml11_booleans() {
        let k8s = |t| resolve_plain(t, Schema::Kubernetes);
        assert_eq!(k8s("y"), Resolved::Bool(true));
        assert_eq!(k8s("on"), Resolved::Bool(true));
        assert_eq!(k8s("No"), Resolved::Bool(false));
        assert_eq!(k8s("0o17"), Resolved::Int(15.into()));
        assert_eq!(k8s("0777"), Resolved::Int(511.into()));
        assert_eq!(k8s("2001-12-14"), Resolved::Str);
    }

    #[test]
    fn quoting_decisions_match_kustomize() {
        for quoted in [
            "yes",
            "on",
            "y",
            "n",
            "Yes",
            "0777",
            "2020",
            "1.5",
            "~",
            "",
            "null",
            "0x1F",
            "0o17",
            ".inf",
            "1_000",
            "2001-12-14",
            "1:20",
            "true",
            "08",
        ] {
            assert!(needs_quotes(quoted), "{quoted:?} must be quoted");
        }
        for plain in [
            "hello",
            "NaN",
            "x:y",
            "http://a b",
            "1.2.3",
            "v1",
            "1:70",
            "é ü",
        ] {
            assert!(!needs_quotes(plain), "{plain:?} must stay plain");
        }
    }
}

#[cfg(test)]
mod go_oracle {
    use super::Schema;

    /// `tests/fixtures/go/yaml-scalars.json`: 1,500 plain scalars (YAML 1.1 booleans, nulls,
    /// bases, underscores, floats, sexagesimals, timestamps, overflows, random runs of digits
    /// and signs) as sigs.k8s.io/yaml's `YAMLToJSON` read `v: <scalar>`, the reading Flux's
    /// substitution and kubectl give manifests. Ours reads each to the same JSON.
    #[test]
    fn plain_scalars_read_as_sigs_k8s_io_yaml_reads_them() {
        #[derive(serde::Deserialize)]
        struct Fixture {
            rows: Vec<(String, Option<String>, Option<String>)>,
        }
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/go/yaml-scalars.json"
        );
        let fixture: Fixture =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let mut differ = Vec::new();
        for (scalar, json, error) in &fixture.rows {
            let document = format!("v: {scalar}\n");
            let ours = crate::yaml::parse_single(&document, Schema::Kubernetes)
                .ok()
                .map(|value| numbers_as_floats(serde_json::Value::from(&value)));
            let want: Option<serde_json::Value> = json
                .as_deref()
                .map(|text| numbers_as_floats(serde_json::from_str(text).unwrap()));
            if !same(&ours, &want) {
                differ.push(format!("{scalar:?}: Go {json:?} {error:?}, ours {ours:?}"));
            }
        }
        assert!(fixture.rows.len() >= 1_500);
        assert!(
            differ.is_empty(),
            "{} differ:\n{}",
            differ.len(),
            differ.join("\n")
        );
    }

    /// Numbers compared by value: Go's JSON prints an integral float (`1e3`) as `1000`, which
    /// reads back as an integer; ours keeps it a float of the same value.
    fn numbers_as_floats(value: serde_json::Value) -> serde_json::Value {
        match value {
            serde_json::Value::Number(n) => serde_json::json!(n.as_f64()),
            serde_json::Value::Object(map) => map
                .into_iter()
                .map(|(k, v)| (k, numbers_as_floats(v)))
                .collect(),
            other => other,
        }
    }

    /// Equal, floats within a rounding step (serde_json's own float reading is not exact).
    fn same(ours: &Option<serde_json::Value>, want: &Option<serde_json::Value>) -> bool {
        let number = |v: &Option<serde_json::Value>| v.as_ref()?.get("v")?.as_f64();
        match (number(ours), number(want)) {
            (Some(a), Some(b)) => (a - b).abs() <= f64::EPSILON * a.abs().max(b.abs()),
            _ => ours == want,
        }
    }
}
