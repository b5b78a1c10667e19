//! Numbers in the text kustomize prints for them.

use crate::value::Number;

/// Numbers as kustomize prints them: integers exactly; floats as Go's JSON encoder writes them
/// and go-yaml v3 reads them back, so integral floats below 1e21 become integers and the rest
/// print in Go's shortest `%g` form (`1e-07`, `1.0000005e+06`).
pub fn format_number(n: &Number) -> String {
    if let Some(i) = n.as_i64() {
        return i.to_string();
    }
    if let Some(u) = n.as_u64() {
        return u.to_string();
    }
    let f = n.as_f64().unwrap_or(0.0);
    if f.fract() == 0.0 && f.abs() < 1e21 {
        if f > i64::MIN as f64 && f < i64::MAX as f64 {
            return (f as i64).to_string();
        }
        if f >= 0.0 && f < u64::MAX as f64 {
            return (f as u64).to_string();
        }
    }
    go_shortest_g(f)
}

/// Go's `strconv.FormatFloat(f, 'g', -1, 64)`.
fn go_shortest_g(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    // Rust's `{:e}` gives the same shortest round-trip digits Go uses.
    let sci = format!("{:e}", f.abs());
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let sign = if f.is_sign_negative() { "-" } else { "" };
    if !(-4..6).contains(&exponent) {
        let (first, rest) = digits.split_at(1);
        let dot = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let exp_sign = if exponent < 0 { '-' } else { '+' };
        return format!("{sign}{first}{dot}e{exp_sign}{:02}", exponent.abs());
    }
    if exponent < 0 {
        let zeros = "0".repeat((-exponent - 1) as usize);
        return format!("{sign}0.{zeros}{digits}");
    }
    let point = exponent as usize + 1;
    if digits.len() <= point {
        format!("{sign}{digits}{}", "0".repeat(point - digits.len()))
    } else {
        format!("{sign}{}.{}", &digits[..point], &digits[point..])
    }
}
