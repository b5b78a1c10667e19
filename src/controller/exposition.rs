//! The `/metrics` page in the Prometheus text format (0.0.4) exactly as Flux's controllers
//! serve it (client_golang's `expfmt`), from the OpenMetrics text `prometheus_client`
//! writes: a counter's `# HELP`/`# TYPE` carry its full `_total` name, numbers (sample values
//! and histogram bounds) are Go's shortest `%g` (`1`, `0.005`, `1e-08`, `1.8e+19`), and there
//! is no `# EOF`. A dashboard that matches `le="1"` or a family name finds the same text.

/// Converts `prometheus_client`'s OpenMetrics text to Prometheus text 0.0.4.
pub fn prometheus_text(open_metrics: &str) -> String {
    let mut out = String::with_capacity(open_metrics.len());
    // HELP comes before TYPE; a counter's name is only known to need `_total` at TYPE.
    let mut help: Option<(&str, &str)> = None;
    for line in open_metrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help = Some(rest.split_once(' ').unwrap_or((rest, "")));
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let full = if kind == "counter" && !name.ends_with("_total") {
                format!("{name}_total")
            } else {
                name.to_string()
            };
            if let Some((_, text)) = help.take() {
                out.push_str("# HELP ");
                out.push_str(&full);
                out.push(' ');
                // `Registry::register` ends every help text with a '.' of its own.
                out.push_str(text.strip_suffix('.').unwrap_or(text));
                out.push('\n');
            }
            out.push_str("# TYPE ");
            out.push_str(&full);
            out.push(' ');
            out.push_str(if kind == "unknown" { "untyped" } else { kind });
            out.push('\n');
            continue;
        }
        sample(&mut out, line);
    }
    out
}

/// A collector's help text as `Registry::register` writes a registered metric's, so that
/// the page shows both as they were given.
pub fn collector_help(help: &str) -> String {
    format!("{help}.")
}

/// A sample line with its `le` bound and value in Go's notation.
fn sample(out: &mut String, line: &str) {
    let (series, value) = line.rsplit_once(' ').unwrap_or((line, ""));
    // `le` as a label of its own, not the end of another label's name (`handle`).
    let bound = ["{le=\"", ",le=\""]
        .iter()
        .find_map(|label| series.find(label).map(|at| at + label.len()));
    match bound {
        Some(bound_start) => {
            let bound_end = series[bound_start..]
                .find('"')
                .map_or(series.len(), |end| bound_start + end);
            out.push_str(&series[..bound_start]);
            out.push_str(&number(&series[bound_start..bound_end]));
            out.push_str(&series[bound_end..]);
        }
        None => out.push_str(series),
    }
    out.push(' ');
    out.push_str(&number(value));
    out.push('\n');
}

/// A number as expfmt writes it; text that is not a number is left as it is.
fn number(text: &str) -> String {
    match text.parse::<f64>() {
        Ok(value) => go_float(value),
        Err(_) => text.to_string(),
    }
}

/// Go's `strconv.FormatFloat(value, 'g', -1, 64)` with expfmt's spellings of infinities:
/// the shortest digits that read back as `value`, in exponent form when the decimal exponent
/// is below -4 or at least 6 (what `%g` decides for the shortest output).
pub fn go_float(value: f64) -> String {
    if value.is_nan() {
        return "NaN".into();
    }
    if value.is_infinite() {
        return if value > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    if value == 0.0 {
        return if value.is_sign_negative() { "-0" } else { "0" }.into();
    }
    // Rust's `{:e}` gives the shortest round-trip digits: `d.ddde±x`.
    let scientific = format!("{value:e}");
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
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
    let point = exponent + 1;
    if point <= 0 {
        let zeros = "0".repeat(point.unsigned_abs() as usize);
        return format!("{sign}0.{zeros}{digits}");
    }
    let point = point as usize;
    if digits.len() <= point {
        let zeros = "0".repeat(point - digits.len());
        format!("{sign}{digits}{zeros}")
    } else {
        format!("{sign}{}.{}", &digits[..point], &digits[point..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_as_gos_shortest_g() {
        for (value, go) in [
            (1.0, "1"),
            (0.005, "0.005"),
            (60.0, "60"),
            (1e-8, "1e-08"),
            (9.999999999999999e-6, "9.999999999999999e-06"),
            (9.999999999999999e-5, "9.999999999999999e-05"),
            (0.0001, "0.0001"),
            (1000.0, "1000"),
            (100000.0, "100000"),
            (1e6, "1e+06"),
            (1_764_171_922.12, "1.76417192212e+09"),
            (1799.9999999999986, "1799.9999999999986"),
            (0.038363583488692544, "0.038363583488692544"),
            (18446744073709551615.0, "1.8446744073709552e+19"),
            (-2.5, "-2.5"),
            (0.0, "0"),
            (f64::INFINITY, "+Inf"),
        ] {
            assert_eq!(go_float(value), go, "{value}");
        }
    }

    #[test]
    fn open_metrics_becomes_prometheus_text() {
        let open_metrics = "# HELP workqueue_adds Total number of adds handled by workqueue.\n\
            # TYPE workqueue_adds counter\n\
            workqueue_adds_total{controller=\"kustomization\",name=\"kustomization\"} 3\n\
            # HELP t Length of time..\n\
            # TYPE t histogram\n\
            t_sum 0.25\n\
            t_count 1\n\
            t_bucket{le=\"1e-8\",controller=\"kustomization\"} 0\n\
            t_bucket{le=\"1.0\",controller=\"kustomization\"} 1\n\
            t_bucket{le=\"+Inf\",controller=\"kustomization\"} 1\n\
            # EOF\n";
        assert_eq!(
            prometheus_text(open_metrics),
            "# HELP workqueue_adds_total Total number of adds handled by workqueue\n\
             # TYPE workqueue_adds_total counter\n\
             workqueue_adds_total{controller=\"kustomization\",name=\"kustomization\"} 3\n\
             # HELP t Length of time.\n\
             # TYPE t histogram\n\
             t_sum 0.25\n\
             t_count 1\n\
             t_bucket{le=\"1e-08\",controller=\"kustomization\"} 0\n\
             t_bucket{le=\"1\",controller=\"kustomization\"} 1\n\
             t_bucket{le=\"+Inf\",controller=\"kustomization\"} 1\n"
        );
    }
}
