//! The `/metrics` page in the Prometheus text format (0.0.4) exactly as Flux's controllers
//! serve it (client_golang's `expfmt`), from the OpenMetrics text `prometheus_client`
//! writes: a counter's `# HELP`/`# TYPE` carry its full `_total` name, numbers (sample values
//! and histogram bounds) are Go's shortest `%g` (`1`, `0.005`, `1e-08`, `1.8e+19`), and there
//! is no `# EOF`. A dashboard that matches `le="1"` or a family name finds the same text.

use crate::controller::runtime::object_histograms::ObjectHistograms;

/// A metric family of the page.
struct Family<'a> {
    name: String,
    kind: &'a str,
    help: Option<&'a str>,
    samples: Vec<&'a str>,
}

/// Where a family of the page comes from.
enum Source<'a> {
    Parsed(Family<'a>),
    /// Written in expfmt's form and order by its owner.
    Direct(&'a ObjectHistograms),
}

impl Source<'_> {
    fn name(&self) -> &str {
        match self {
            Source::Parsed(family) => &family.name,
            Source::Direct(family) => family.name(),
        }
    }
}

/// Converts `prometheus_client`'s OpenMetrics text to Prometheus text 0.0.4 as expfmt writes
/// it: families sorted by name, series sorted by their labels, a histogram's buckets (with
/// `le` last) before its sum and count.
pub fn prometheus_text(open_metrics: &str) -> String {
    prometheus_text_into(open_metrics, &[], String::with_capacity(open_metrics.len()))
}

/// [`prometheus_text`] written into `out`, with the `direct` families in their place.
pub fn prometheus_text_into(
    open_metrics: &str,
    direct: &[&ObjectHistograms],
    mut out: String,
) -> String {
    let mut families: Vec<Family> = Vec::new();
    // HELP comes before TYPE; a counter's name is only known to need `_total` at TYPE.
    let mut help: Option<&str> = None;
    for line in open_metrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help = Some(rest.split_once(' ').map_or("", |(_, text)| text));
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "unknown"));
            let name = if kind == "counter" && !name.ends_with("_total") {
                format!("{name}_total")
            } else {
                name.to_string()
            };
            families.push(Family {
                name,
                kind: if kind == "unknown" { "untyped" } else { kind },
                // `Registry::register` ends every help text with a '.' of its own.
                help: help
                    .take()
                    .map(|text| text.strip_suffix('.').unwrap_or(text)),
                samples: Vec::new(),
            });
            continue;
        }
        if let Some(family) = families.last_mut() {
            family.samples.push(line);
        }
    }
    let mut families: Vec<Source> = families
        .into_iter()
        .map(Source::Parsed)
        .chain(direct.iter().map(|family| Source::Direct(family)))
        .collect();
    families.sort_by(|a, b| a.name().cmp(b.name()));
    for family in &families {
        let family = match family {
            Source::Parsed(family) => family,
            Source::Direct(family) => {
                family.write(&mut out);
                continue;
            }
        };
        if let Some(text) = family.help {
            out.push_str(&format!("# HELP {} {text}\n", family.name));
        }
        out.push_str(&format!("# TYPE {} {}\n", family.name, family.kind));
        let mut samples: Vec<Sample> = family.samples.iter().map(|l| Sample::parse(l)).collect();
        // By series, then (in a histogram) buckets by bound, then sum, then count.
        samples.sort_by(|a, b| {
            (&a.labels, a.rank(), Bound(a.bound)).cmp(&(&b.labels, b.rank(), Bound(b.bound)))
        });
        for sample in samples {
            sample.write(&mut out);
        }
    }
    out
}

/// A bucket bound, ordered (`+Inf` last).
#[derive(PartialEq)]
struct Bound(Option<f64>);

impl Eq for Bound {}

impl PartialOrd for Bound {
    fn partial_cmp(&self, other: &Bound) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Bound {
    fn cmp(&self, other: &Bound) -> std::cmp::Ordering {
        match (self.0, other.0) {
            (Some(a), Some(b)) => a.total_cmp(&b),
            (a, b) => a.is_some().cmp(&b.is_some()),
        }
    }
}

/// A sample line, taken apart, borrowing from the page: a fleet's page holds tens of
/// thousands of samples, sorted family by family.
struct Sample<'a> {
    name: &'a str,
    /// Labels other than `le`, as written (`a="x",b="y"`): the page's own text when `le` is
    /// last (as `prometheus_client` writes it), else joined anew.
    labels: std::borrow::Cow<'a, str>,
    /// A histogram bucket's bound.
    bound: Option<f64>,
    value: &'a str,
}

impl<'a> Sample<'a> {
    fn parse(line: &'a str) -> Sample<'a> {
        let (series, value) = line.rsplit_once(' ').unwrap_or((line, ""));
        let (name, labels) = match series.split_once('{') {
            Some((name, labels)) => (name, labels.strip_suffix('}').unwrap_or(labels)),
            None => (series, ""),
        };
        let pairs = split_labels(labels);
        let Some(at) = pairs.iter().position(|pair| pair.starts_with("le=\"")) else {
            return Sample {
                name,
                labels: labels.into(),
                bound: None,
                value,
            };
        };
        let quoted = &pairs[at]["le=\"".len()..];
        let text = quoted.strip_suffix('"').unwrap_or(quoted);
        let bound = Some(if text == "+Inf" {
            f64::INFINITY
        } else {
            text.parse().unwrap_or(f64::NAN)
        });
        let labels = if at + 1 == pairs.len() {
            // `le` last: the labels before it, without the comma.
            let end = labels.len() - pairs[at].len();
            labels[..end]
                .strip_suffix(',')
                .unwrap_or(&labels[..end])
                .into()
        } else {
            let mut kept = pairs;
            kept.remove(at);
            kept.join(",").into()
        };
        Sample {
            name,
            labels,
            bound,
            value,
        }
    }

    /// Within a histogram series: buckets, then the sum, then the count.
    fn rank(&self) -> u8 {
        if self.name.ends_with("_sum") {
            1
        } else if self.name.ends_with("_count") {
            2
        } else {
            0
        }
    }

    fn write(&self, out: &mut String) {
        out.push_str(self.name);
        if !self.labels.is_empty() || self.bound.is_some() {
            out.push('{');
            out.push_str(&self.labels);
            if let Some(bound) = self.bound {
                if !self.labels.is_empty() {
                    out.push(',');
                }
                out.push_str("le=\"");
                out.push_str(&go_float(bound));
                out.push('"');
            }
            out.push('}');
        }
        out.push(' ');
        out.push_str(&number(self.value));
        out.push('\n');
    }
}

/// The `name="value"` pairs of a label set, split at the commas between them (a value may
/// hold commas and escaped quotes).
fn split_labels(labels: &str) -> Vec<&str> {
    let mut pairs = Vec::new();
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    for (at, c) in labels.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => quoted = !quoted,
            ',' if !quoted => {
                pairs.push(&labels[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    if start < labels.len() {
        pairs.push(&labels[start..]);
    }
    pairs
}

/// A collector's help text as `Registry::register` writes a registered metric's, so that
/// the page shows both as they were given.
pub fn collector_help(help: &str) -> String {
    format!("{help}.")
}

/// A number as expfmt writes it; text that is not a number is left as it is.
fn number(text: &str) -> String {
    match text.parse::<f64>() {
        Ok(value) => go_float(value),
        Err(_) => text.to_string(),
    }
}

/// A sample value as expfmt writes it: Go's `strconv.FormatFloat(value, 'g', -1, 64)`, zero
/// (negative too) as `0`.
pub fn go_float(value: f64) -> String {
    if value == 0.0 {
        return "0".into();
    }
    go_std::format_float_g(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Go's shortest 'g' is go-std's (tested there); expfmt adds only that a zero, negative
    /// too, is `0`.
    #[test]
    fn numbers_read_as_expfmt_writes_them() {
        for (value, go) in [
            (0.0, "0"),
            (-0.0, "0"),
            (1e6, "1e+06"),
            (0.038363583488692544, "0.038363583488692544"),
            (f64::INFINITY, "+Inf"),
        ] {
            assert_eq!(go_float(value), go, "{value}");
        }
    }

    #[test]
    fn open_metrics_becomes_prometheus_text() {
        let open_metrics = "# HELP workqueue_adds Total number of adds handled by workqueue.\n\
            # TYPE workqueue_adds counter\n\
            workqueue_adds_total{controller=\"other\",name=\"other\"} 0\n\
            workqueue_adds_total{controller=\"kustomization\",name=\"kustomization\"} 3\n\
            # HELP t Length of time..\n\
            # TYPE t histogram\n\
            t_sum{controller=\"kustomization\"} 0.25\n\
            t_count{controller=\"kustomization\"} 1\n\
            t_bucket{le=\"1e-8\",controller=\"kustomization\"} 0\n\
            t_bucket{le=\"1.0\",controller=\"kustomization\"} 1\n\
            t_bucket{le=\"+Inf\",controller=\"kustomization\"} 1\n\
            # EOF\n";
        assert_eq!(
            prometheus_text(open_metrics),
            "# HELP t Length of time.\n\
             # TYPE t histogram\n\
             t_bucket{controller=\"kustomization\",le=\"1e-08\"} 0\n\
             t_bucket{controller=\"kustomization\",le=\"1\"} 1\n\
             t_bucket{controller=\"kustomization\",le=\"+Inf\"} 1\n\
             t_sum{controller=\"kustomization\"} 0.25\n\
             t_count{controller=\"kustomization\"} 1\n\
             # HELP workqueue_adds_total Total number of adds handled by workqueue\n\
             # TYPE workqueue_adds_total counter\n\
             workqueue_adds_total{controller=\"kustomization\",name=\"kustomization\"} 3\n\
             workqueue_adds_total{controller=\"other\",name=\"other\"} 0\n"
        );
    }

    #[test]
    fn series_sort_by_their_labels_with_le_last_or_alone() {
        let open_metrics = "# HELP d Duration.\n\
            # TYPE d histogram\n\
            d_bucket{name=\"b\",le=\"1.0\"} 1\n\
            d_bucket{name=\"a\",le=\"+Inf\"} 2\n\
            d_bucket{name=\"a\",le=\"1.0\"} 1\n\
            d_count{name=\"a\"} 2\n\
            d_sum{name=\"a\"} 3\n\
            d_bucket{name=\"b\",le=\"+Inf\"} 1\n\
            d_sum{name=\"b\"} 0.5\n\
            d_count{name=\"b\"} 1\n\
            # HELP u Unlabelled.\n\
            # TYPE u histogram\n\
            u_bucket{le=\"+Inf\"} 0\n\
            u_bucket{le=\"1.0\"} 0\n\
            u_sum 0\n\
            u_count 0\n\
            # EOF\n";
        assert_eq!(
            prometheus_text(open_metrics),
            "# HELP d Duration\n\
             # TYPE d histogram\n\
             d_bucket{name=\"a\",le=\"1\"} 1\n\
             d_bucket{name=\"a\",le=\"+Inf\"} 2\n\
             d_sum{name=\"a\"} 3\n\
             d_count{name=\"a\"} 2\n\
             d_bucket{name=\"b\",le=\"1\"} 1\n\
             d_bucket{name=\"b\",le=\"+Inf\"} 1\n\
             d_sum{name=\"b\"} 0.5\n\
             d_count{name=\"b\"} 1\n\
             # HELP u Unlabelled\n\
             # TYPE u histogram\n\
             u_bucket{le=\"1\"} 0\n\
             u_bucket{le=\"+Inf\"} 0\n\
             u_sum 0\n\
             u_count 0\n"
        );
    }
}
