//! `gotk_reconcile_duration_seconds`: one histogram per reconciled object, kept in the order
//! client_golang's expfmt writes its series (by label value: `kind`, then `name`, then
//! `namespace`) and written straight into the `/metrics` page.
//!
//! A fleet's page is mostly this family (13 lines per Kustomization, 2.8 MB for 1,000).
//! Going through `prometheus_client`'s OpenMetrics text and re-sorting it held the page three
//! times over while it was written; written from here, the page is held once.

use std::collections::BTreeMap;
use std::sync::{Mutex, RwLock};

use crate::controller::exposition::go_float;

/// The labels of one series, in the order expfmt compares them.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ObjectKey {
    pub kind: Box<str>,
    pub name: Box<str>,
    pub namespace: Box<str>,
}

/// One series: a count per bucket (the last for `+Inf`), the sum and the count.
#[derive(Clone, Debug, Default)]
struct Series {
    buckets: Box<[u64]>,
    sum: f64,
    count: u64,
}

/// A histogram family with `kind`, `name` and `namespace` labels.
pub struct ObjectHistograms {
    name: &'static str,
    help: &'static str,
    bounds: &'static [f64],
    /// A scrape reads the map while reconciliations observe their own series: only adding or
    /// removing a series waits for a scrape to finish.
    series: RwLock<BTreeMap<ObjectKey, Mutex<Series>>>,
}

impl ObjectHistograms {
    pub fn new(name: &'static str, help: &'static str, bounds: &'static [f64]) -> Self {
        ObjectHistograms {
            name,
            help,
            bounds,
            series: RwLock::default(),
        }
    }

    pub fn name(&self) -> &'static str {
        self.name
    }

    pub fn observe(&self, key: ObjectKey, value: f64) {
        // As client_golang and prometheus_client: the first bucket whose bound is at least
        // the value; NaN lands in `+Inf` only.
        let at = self
            .bounds
            .iter()
            .position(|bound| value <= *bound)
            .unwrap_or(self.bounds.len());
        let record = |series: &Mutex<Series>| {
            let mut series = series.lock().unwrap_or_else(|e| e.into_inner());
            series.buckets[at] += 1;
            series.sum += value;
            series.count += 1;
        };
        if let Some(series) = self
            .series
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            record(series);
            return;
        }
        let slots = self.bounds.len() + 1;
        let mut map = self.series.write().unwrap_or_else(|e| e.into_inner());
        record(map.entry(key).or_insert_with(|| {
            Mutex::new(Series {
                buckets: vec![0; slots].into_boxed_slice(),
                ..Series::default()
            })
        }));
    }

    pub fn remove(&self, key: &ObjectKey) {
        self.series
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }

    /// The family in Prometheus text 0.0.4 as expfmt writes it: HELP and TYPE, then each
    /// series' cumulative buckets, sum and count; nothing while it has no series.
    pub fn write(&self, out: &mut String) {
        use std::fmt::Write;
        let series = self.series.read().unwrap_or_else(|e| e.into_inner());
        if series.is_empty() {
            return;
        }
        let name = self.name;
        let _ = writeln!(out, "# HELP {name} {}", self.help);
        let _ = writeln!(out, "# TYPE {name} histogram");
        let bounds: Vec<String> = self
            .bounds
            .iter()
            .map(|bound| go_float(*bound))
            .chain(std::iter::once("+Inf".to_string()))
            .collect();
        for (key, series) in series.iter() {
            let series = series.lock().unwrap_or_else(|e| e.into_inner());
            let labels = format!(
                "kind=\"{}\",name=\"{}\",namespace=\"{}\"",
                escape(&key.kind),
                escape(&key.name),
                escape(&key.namespace)
            );
            // Counts are written as expfmt writes them, as Go floats: a million is `1e+06`.
            let mut cumulative = 0;
            for (bound, count) in bounds.iter().zip(series.buckets.iter()) {
                cumulative += count;
                let count = go_float(cumulative as f64);
                let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{bound}\"}} {count}");
            }
            let _ = writeln!(out, "{name}_sum{{{labels}}} {}", go_float(series.sum));
            let count = go_float(series.count as f64);
            let _ = writeln!(out, "{name}_count{{{labels}}} {count}");
        }
    }
}

/// A label value as the text format escapes it: backslash, double quote and newline.
fn escape(value: &str) -> std::borrow::Cow<'_, str> {
    if !value.contains(['\\', '"', '\n']) {
        return value.into();
    }
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::EncodeLabelSet;
    use prometheus_client::metrics::family::Family;
    use prometheus_client::metrics::histogram::Histogram;

    #[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
    struct Labels {
        kind: String,
        name: String,
        namespace: String,
    }

    const BOUNDS: [f64; 4] = [0.01, 0.5, 2.5, 1800.0];

    /// The page as it was written before: `prometheus_client`'s histogram family, converted.
    fn through_the_registry(observed: &[(&str, &str, f64)]) -> String {
        let family = Family::<Labels, Histogram>::new_with_constructor(|| Histogram::new(BOUNDS));
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register("the_seconds", "What is measured.", family.clone());
        for (name, namespace, value) in observed {
            let labels = Labels {
                kind: "Kustomization".into(),
                name: name.to_string(),
                namespace: namespace.to_string(),
            };
            family.get_or_create(&labels).observe(*value);
        }
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        crate::controller::exposition::prometheus_text(&text)
    }

    fn written_directly(observed: &[(&str, &str, f64)]) -> String {
        let family = ObjectHistograms::new("the_seconds", "What is measured.", &BOUNDS);
        for (name, namespace, value) in observed {
            let key = ObjectKey {
                kind: "Kustomization".into(),
                name: (*name).into(),
                namespace: (*namespace).into(),
            };
            family.observe(key, *value);
        }
        crate::controller::exposition::prometheus_text_into("", &[&family], String::new())
    }

    #[test]
    fn the_family_reads_as_the_registry_wrote_it() {
        let observed = [
            ("apps", "flux-system", 0.01),
            ("apps", "flux-system", 3.0),
            ("apps-b", "a", 0.0),
            ("apps", "z", 1e-9),
            ("a.b", "team", 5000.0),
            ("infra", "flux-system", 0.75),
            ("infra", "flux-system", 0.123_456_789),
            ("b", "a", 2.5),
        ];
        let direct = written_directly(&observed);
        assert_eq!(direct, through_the_registry(&observed));
        assert!(
            direct.contains(
                "the_seconds_bucket{kind=\"Kustomization\",name=\"apps\",namespace=\"flux-system\",le=\"0.01\"} 1\n"
            ),
            "{direct}"
        );
        assert_eq!(written_directly(&[]), through_the_registry(&[]));
    }

    #[test]
    fn a_million_observations_read_as_expfmt_writes_them() {
        let family = ObjectHistograms::new("the_seconds", "What is measured.", &BOUNDS);
        let key = ObjectKey {
            kind: "Kustomization".into(),
            name: "busy".into(),
            namespace: "default".into(),
        };
        for _ in 0..1_000_000 {
            family.observe(key.clone(), 0.0);
        }
        let mut page = String::new();
        family.write(&mut page);
        let labels = "kind=\"Kustomization\",name=\"busy\",namespace=\"default\"";
        assert!(
            page.contains(&format!(
                "the_seconds_bucket{{{labels},le=\"0.01\"}} 1e+06\n"
            )),
            "{page}"
        );
        assert!(
            page.contains(&format!("the_seconds_count{{{labels}}} 1e+06\n")),
            "{page}"
        );
    }

    #[test]
    fn a_removed_series_leaves_the_page() {
        let family = ObjectHistograms::new("the_seconds", "What is measured.", &BOUNDS);
        let key = |name: &str| ObjectKey {
            kind: "Kustomization".into(),
            name: name.into(),
            namespace: "default".into(),
        };
        family.observe(key("kept"), 1.0);
        family.observe(key("gone"), 1.0);
        family.remove(&key("gone"));
        let mut page = String::new();
        family.write(&mut page);
        assert!(page.contains("name=\"kept\""), "{page}");
        assert!(!page.contains("name=\"gone\""), "{page}");
    }

    #[test]
    fn label_values_are_escaped_as_the_text_format_wants() {
        assert_eq!(escape("plain"), "plain");
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
