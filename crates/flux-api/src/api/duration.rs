//! Go `time.Duration` strings as Flux stores them in `interval`, `timeout` and friends.
//!
//! Kubernetes' `metav1.Duration` serializes with Go's `Duration.String()` and parses with
//! `time.ParseDuration`, so a value written by `flux` or `kubectl` must read back here exactly,
//! and a value we write must be what Flux would write (`10m0s`, not `600s`). kube-core's
//! `Duration` prints Rust's form (`5400s`) and parses through `f64`, so it cannot be used here.

use std::fmt;
use std::str::FromStr;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::ApiError;

/// The pattern Flux's CRD puts on every duration field; the API server enforces it.
pub const DURATION_PATTERN: &str = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$";

const NANOSECOND: i64 = 1;
const MICROSECOND: i64 = 1_000 * NANOSECOND;
const MILLISECOND: i64 = 1_000 * MICROSECOND;
const SECOND: i64 = 1_000 * MILLISECOND;
const MINUTE: i64 = 60 * SECOND;
const HOUR: i64 = 60 * MINUTE;

/// A signed span of nanoseconds with Go's text form.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GoDuration {
    nanos: i64,
}

impl GoDuration {
    pub const ZERO: GoDuration = GoDuration { nanos: 0 };

    /// A duration from the standard library's, saturating at Go's maximum.
    pub fn from_std(duration: std::time::Duration) -> GoDuration {
        GoDuration {
            nanos: i64::try_from(duration.as_nanos()).unwrap_or(i64::MAX),
        }
    }

    pub const fn from_nanos(nanos: i64) -> Self {
        GoDuration { nanos }
    }

    pub const fn from_secs(secs: i64) -> Self {
        GoDuration {
            nanos: secs.saturating_mul(SECOND),
        }
    }

    pub const fn as_nanos(self) -> i64 {
        self.nanos
    }

    /// The duration for timers; negative durations (legal in Go) become zero.
    pub fn to_std(self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.nanos.max(0) as u64)
    }

    /// Parses Go's `time.ParseDuration` syntax: `[-+]` then one or more `<decimal><unit>`
    /// groups with units `ns`, `us`, `µs`, `μs`, `ms`, `s`, `m`, `h`; a lone `0` is allowed.
    pub fn parse(text: &str) -> Result<Self, ApiError> {
        let invalid = |reason: &str| ApiError::InvalidDuration {
            value: text.to_string(),
            reason: reason.to_string(),
        };
        let (negative, mut rest) = match text.as_bytes().first() {
            Some(b'-') => (true, &text[1..]),
            Some(b'+') => (false, &text[1..]),
            _ => (false, text),
        };
        if rest == "0" {
            return Ok(GoDuration::ZERO);
        }
        if rest.is_empty() {
            return Err(invalid("empty duration"));
        }
        // Go accumulates in u64 with 1<<63 as the limit and scales fractions in f64 so that
        // fractions of hours stay nanosecond-accurate; mirror it to read values identically.
        const LIMIT: u64 = 1 << 63;
        let mut total: u64 = 0;
        while !rest.is_empty() {
            let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
            let mut whole: u64 = 0;
            for digit in rest[..int_len].bytes().map(|b| u64::from(b - b'0')) {
                if whole > LIMIT / 10 {
                    return Err(invalid("overflow"));
                }
                whole = whole * 10 + digit;
                if whole > LIMIT {
                    return Err(invalid("overflow"));
                }
            }
            rest = &rest[int_len..];
            let (mut fraction, mut scale, mut has_fraction) = (0u64, 1f64, false);
            if let Some(after_dot) = rest.strip_prefix('.') {
                let frac_len = after_dot.bytes().take_while(u8::is_ascii_digit).count();
                has_fraction = frac_len > 0;
                let mut saturated = false;
                for digit in after_dot[..frac_len].bytes().map(|b| u64::from(b - b'0')) {
                    if saturated || fraction > (LIMIT - 1) / 10 || fraction * 10 + digit > LIMIT {
                        saturated = true;
                        continue;
                    }
                    fraction = fraction * 10 + digit;
                    scale *= 10.0;
                }
                rest = &after_dot[frac_len..];
            }
            if int_len == 0 && !has_fraction {
                return Err(invalid("expected a number"));
            }
            let unit_len = rest
                .char_indices()
                .find(|(_, c)| *c == '.' || c.is_ascii_digit())
                .map_or(rest.len(), |(i, _)| i);
            let unit = match &rest[..unit_len] {
                "ns" => NANOSECOND,
                "us" | "µs" | "μs" => MICROSECOND,
                "ms" => MILLISECOND,
                "s" => SECOND,
                "m" => MINUTE,
                "h" => HOUR,
                "" => return Err(invalid("missing unit")),
                _ => return Err(invalid("unknown unit")),
            } as u64;
            rest = &rest[unit_len..];

            if whole > LIMIT / unit {
                return Err(invalid("overflow"));
            }
            let mut value = whole * unit;
            if fraction > 0 {
                value += (fraction as f64 * (unit as f64 / scale)) as u64;
                if value > LIMIT {
                    return Err(invalid("overflow"));
                }
            }
            total = total
                .checked_add(value)
                .filter(|t| *t <= LIMIT)
                .ok_or_else(|| invalid("overflow"))?;
        }
        if !negative && total > LIMIT - 1 {
            return Err(invalid("overflow"));
        }
        let nanos = if negative {
            (total as i64).wrapping_neg()
        } else {
            total as i64
        };
        Ok(GoDuration { nanos })
    }
}

impl fmt::Display for GoDuration {
    /// Formats as Go's `Duration.String()`: `1h30m0s`, `1.5s`, `500ms`, `0s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let negative = self.nanos < 0;
        let magnitude = self.nanos.unsigned_abs();
        let sign = if negative { "-" } else { "" };
        if magnitude == 0 {
            return f.write_str("0s");
        }
        if magnitude < SECOND as u64 {
            let (unit, per) = if magnitude < MICROSECOND as u64 {
                ("ns", NANOSECOND as u64)
            } else if magnitude < MILLISECOND as u64 {
                ("µs", MICROSECOND as u64)
            } else {
                ("ms", MILLISECOND as u64)
            };
            return write!(f, "{sign}{}{unit}", decimal(magnitude, per));
        }
        let hours = magnitude / HOUR as u64;
        let minutes = magnitude % HOUR as u64 / MINUTE as u64;
        let seconds = decimal(magnitude % MINUTE as u64, SECOND as u64);
        f.write_str(sign)?;
        if hours > 0 {
            write!(f, "{hours}h{minutes}m")?;
        } else if minutes > 0 {
            write!(f, "{minutes}m")?;
        }
        write!(f, "{seconds}s")
    }
}

/// `value / per` with the remainder as a decimal fraction without trailing zeros.
fn decimal(value: u64, per: u64) -> String {
    let whole = value / per;
    let remainder = value % per;
    if remainder == 0 {
        return whole.to_string();
    }
    let width = per.ilog10() as usize;
    let fraction = format!("{remainder:0width$}");
    format!("{whole}.{}", fraction.trim_end_matches('0'))
}

impl FromStr for GoDuration {
    type Err = ApiError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        GoDuration::parse(s)
    }
}

impl From<std::time::Duration> for GoDuration {
    fn from(d: std::time::Duration) -> Self {
        GoDuration::from_nanos(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
    }
}

impl Serialize for GoDuration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for GoDuration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        GoDuration::parse(&text).map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for GoDuration {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "GoDuration".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "string", "pattern": DURATION_PATTERN })
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn from_std_prints_like_go() {
        assert_eq!(
            GoDuration::from_std(std::time::Duration::from_secs(90)).to_string(),
            "1m30s"
        );
        assert_eq!(
            GoDuration::from_std(std::time::Duration::from_millis(1500)).to_string(),
            "1.5s"
        );
    }

    use super::*;

    #[test]
    fn parses_go_syntax() {
        let cases: &[(&str, i64)] = &[
            ("0", 0),
            ("0s", 0),
            ("5s", 5 * SECOND),
            ("30s", 30 * SECOND),
            ("1478s", 1478 * SECOND),
            ("-5s", -5 * SECOND),
            ("+5s", 5 * SECOND),
            ("-0", 0),
            ("5.0s", 5 * SECOND),
            ("5.6s", 5 * SECOND + 600 * MILLISECOND),
            ("5.s", 5 * SECOND),
            (".5s", 500 * MILLISECOND),
            ("1.004s", SECOND + 4 * MILLISECOND),
            ("100.00100s", 100 * SECOND + MILLISECOND),
            ("10ns", 10),
            ("11us", 11 * MICROSECOND),
            ("12µs", 12 * MICROSECOND),
            ("12μs", 12 * MICROSECOND),
            ("13ms", 13 * MILLISECOND),
            ("14s", 14 * SECOND),
            ("15m", 15 * MINUTE),
            ("16h", 16 * HOUR),
            ("3h30m", 3 * HOUR + 30 * MINUTE),
            ("10.5s4m", 4 * MINUTE + 10 * SECOND + 500 * MILLISECOND),
            ("-2m3.4s", -(2 * MINUTE + 3 * SECOND + 400 * MILLISECOND)),
            (
                "1h2m3s4ms5us6ns",
                HOUR + 2 * MINUTE + 3 * SECOND + 4 * MILLISECOND + 5 * MICROSECOND + 6,
            ),
            (
                "39h9m14.425s",
                39 * HOUR + 9 * MINUTE + 14 * SECOND + 425 * MILLISECOND,
            ),
            ("52763797000ns", 52_763_797_000),
            ("0.3333333333333333333h", 20 * MINUTE),
            ("9007199254740993ns", 9_007_199_254_740_993),
            ("9223372036854775807ns", i64::MAX),
            ("-9223372036854775808ns", i64::MIN),
            ("0.100000000000000000000h", 6 * MINUTE),
        ];
        for (text, nanos) in cases {
            assert_eq!(
                GoDuration::parse(text).unwrap().as_nanos(),
                *nanos,
                "{text}"
            );
        }
    }

    #[test]
    fn rejects_what_go_rejects() {
        for text in [
            "",
            "3",
            "-",
            "s",
            ".",
            "-.",
            ".s",
            "+.s",
            "1d",
            "1.1.1s",
            "3000000h",
            "9223372036854775808ns",
            "9223372036854775.808us",
            "1 s",
        ] {
            assert!(GoDuration::parse(text).is_err(), "{text:?} should fail");
        }
    }

    #[test]
    fn prints_like_go() {
        let cases: &[(i64, &str)] = &[
            (0, "0s"),
            (1, "1ns"),
            (1100, "1.1µs"),
            (2200 * MICROSECOND, "2.2ms"),
            (3300 * MILLISECOND, "3.3s"),
            (4 * MINUTE + 5 * SECOND, "4m5s"),
            (4 * MINUTE + 5001 * MILLISECOND, "4m5.001s"),
            (5 * HOUR + 6 * MINUTE + 7001 * MILLISECOND, "5h6m7.001s"),
            (8 * MINUTE + 1, "8m0.000000001s"),
            (10 * MINUTE, "10m0s"),
            (HOUR, "1h0m0s"),
            (90 * MINUTE, "1h30m0s"),
            (-SECOND, "-1s"),
            (i64::MAX, "2562047h47m16.854775807s"),
            (i64::MIN, "-2562047h47m16.854775808s"),
        ];
        for (nanos, text) in cases {
            assert_eq!(GoDuration::from_nanos(*nanos).to_string(), *text);
        }
    }

    #[test]
    fn round_trips_through_serde() {
        let d: GoDuration = serde_json::from_str("\"1h30m\"").unwrap();
        assert_eq!(serde_json::to_string(&d).unwrap(), "\"1h30m0s\"");
        let err = serde_json::from_str::<GoDuration>("\"10 minutes\"").unwrap_err();
        assert!(err.to_string().contains("10 minutes"), "{err}");
    }
}

#[cfg(test)]
mod go_oracle {
    use super::GoDuration;

    /// `tests/fixtures/go/durations.json`: 3,000 strings (Flux's forms, random compositions
    /// of numbers and units, signs, overflows) as Go's `time.ParseDuration` read them, and
    /// durations as `Duration.String` printed them. Ours accepts what Go accepts, reads the
    /// same nanoseconds, and prints what Go prints.
    #[test]
    fn durations_read_and_print_as_gos_time_package() {
        /// Input (none: a duration printed), nanoseconds, Go's text, Go's error.
        type Row = (Option<String>, Option<i64>, Option<String>, Option<String>);
        #[derive(serde::Deserialize)]
        struct Fixture {
            rows: Vec<Row>,
        }
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/go/durations.json"
        );
        let fixture: Fixture =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let mut differ = Vec::new();
        for (input, nanos, printed, error) in &fixture.rows {
            match input {
                Some(input) => {
                    let ours = GoDuration::parse(input).ok();
                    let want = nanos.zip(printed.clone());
                    let got = ours.map(|d| (d.as_nanos(), d.to_string()));
                    if got != want {
                        differ.push(format!("{input:?}: Go {want:?} {error:?}, ours {got:?}"));
                    }
                }
                None => {
                    let (nanos, printed) = (nanos.unwrap(), printed.clone().unwrap());
                    let ours = GoDuration::from_nanos(nanos).to_string();
                    if ours != printed {
                        differ.push(format!("{nanos}ns: Go {printed:?}, ours {ours:?}"));
                    }
                }
            }
        }
        assert!(fixture.rows.len() > 3_000);
        assert!(
            differ.is_empty(),
            "{} differ:\n{}",
            differ.len(),
            differ.join("\n")
        );
    }
}
