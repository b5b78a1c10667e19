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
        // Go's encoder writes the shortest digits that read back as `f`, padded with zeros
        // (1.2345678901234567e19 is 12345678901234567000, not the float's exact value);
        // Rust's `Display` writes the same.
        let fits =
            (f > i64::MIN as f64 && f < i64::MAX as f64) || (f >= 0.0 && f < u64::MAX as f64);
        if fits {
            return if f.abs() < 9_007_199_254_740_992.0 {
                (f as i64).to_string()
            } else {
                format!("{f}")
            };
        }
    }
    go_std::format_float_g(f)
}
