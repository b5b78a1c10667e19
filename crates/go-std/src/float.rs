//! Go's `strconv.FormatFloat(f, 'g', -1, 64)`: the shortest digits that read back as `f`,
//! in exponent form when the decimal exponent is below -4 or at least 6.

/// Go's `strconv.FormatFloat(f, 'g', -1, 64)` (`NaN`, `+Inf`, `-Inf`, `-0` as Go spells
/// them).
pub fn format_float_g(f: f64) -> String {
    format_g(f, format!("{:e}", f.abs()))
}

/// Go's `strconv.FormatFloat(f, 'g', -1, 32)`: `f` rounded to a float32 (beyond its range,
/// an infinity), in the shortest digits that read back as that float32.
pub fn format_float_g32(f: f64) -> String {
    let single = f as f32;
    format_g(f64::from(single), format!("{:e}", single.abs()))
}

/// `f` in Go's 'g' form, from its shortest digits in Rust's `{:e}` form.
fn format_g(f: f64, scientific: String) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    let sign = if f.is_sign_negative() { "-" } else { "" };
    if f == 0.0 {
        return format!("{sign}0");
    }
    // Rust's `{:e}` gives the same shortest round-trip digits Go uses: `d.ddde±x`.
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    if !(-4..6).contains(&exponent) {
        let (first, rest) = digits.split_at(1);
        let fraction = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let exponent_sign = if exponent < 0 { '-' } else { '+' };
        return format!(
            "{sign}{first}{fraction}e{exponent_sign}{:02}",
            exponent.unsigned_abs()
        );
    }
    if exponent < 0 {
        let zeros = "0".repeat(exponent.unsigned_abs() as usize - 1);
        return format!("{sign}0.{zeros}{digits}");
    }
    let point = exponent as usize + 1;
    if digits.len() <= point {
        format!("{sign}{digits}{}", "0".repeat(point - digits.len()))
    } else {
        format!("{sign}{}.{}", &digits[..point], &digits[point..])
    }
}

#[cfg(test)]
mod tests {
    use super::{format_float_g, format_float_g32};

    /// What Go's `strconv.FormatFloat(f, 'g', -1, 32)` prints for these (Go 1.26).
    #[test]
    fn floats_print_as_gos_shortest_g_at_single_precision() {
        for (value, go) in [
            (1.5, "1.5"),
            (0.1, "0.1"),
            (1.23456789012345, "1.2345679"),
            (9.87654321, "9.876543"),
            (1000.0, "1000"),
            (1e39, "+Inf"),
            (-1e39, "-Inf"),
            (16777217.0, "1.6777216e+07"),
            (1e-7, "1e-07"),
            (123456.7, "123456.7"),
            (1234567.0, "1.234567e+06"),
            (0.00012345678, "0.00012345678"),
            (f64::INFINITY, "+Inf"),
            (f64::NAN, "NaN"),
            (0.0, "0"),
            (2.5e-45, "3e-45"),
            (1e-46, "0"),
        ] {
            assert_eq!(format_float_g32(value), go, "{value}");
        }
    }

    /// What Go's `strconv.FormatFloat(f, 'g', -1, 64)` prints for these.
    #[test]
    fn floats_print_as_gos_shortest_g() {
        for (value, go) in [
            (1.0, "1"),
            (0.005, "0.005"),
            (60.0, "60"),
            (1e-8, "1e-08"),
            (9.999999999999999e-6, "9.999999999999999e-06"),
            (9.999999999999999e-5, "9.999999999999999e-05"),
            (0.0001, "0.0001"),
            (100000.0, "100000"),
            (1e6, "1e+06"),
            (1_000_000.5, "1.0000005e+06"),
            (1_764_171_922.12, "1.76417192212e+09"),
            (1799.9999999999986, "1799.9999999999986"),
            (18446744073709551615.0, "1.8446744073709552e+19"),
            (-2.5, "-2.5"),
            (0.0, "0"),
            (-0.0, "-0"),
            (1e21, "1e+21"),
            (0.00001, "1e-05"),
            (f64::INFINITY, "+Inf"),
            (f64::NEG_INFINITY, "-Inf"),
            (f64::NAN, "NaN"),
        ] {
            assert_eq!(format_float_g(value), go, "{value}");
        }
    }
}
