//! `/metrics` as Flux's dashboards and alerts read it: the binary, run as Flux's Deployment
//! runs it (leader election on), is scraped after a reconciliation and compared with the
//! families Flux's kustomize-controller v1.9.4 serves (`tests/fixtures/flux-metrics/`,
//! derived from Flux's sources): the same names, types, label names and histogram bounds,
//! and nothing else.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::json;

use crate::support::artifacts::config_map;
use crate::support::cluster::{TestCluster, wait_for};
use crate::support::controller::{ControllerProcess, controller_kubeconfig};
use crate::support::http_get_text;

const FAMILIES: &str = include_str!("../fixtures/flux-metrics/families.tsv");
const GO_RUNTIME: &str = include_str!("../fixtures/flux-metrics/go-runtime.txt");

/// A metric family as the text format shows it.
#[derive(Debug, Default, PartialEq)]
struct Family {
    kind: String,
    labels: BTreeSet<String>,
    /// Histogram bounds as written, without `+Inf`.
    buckets: Vec<String>,
}

/// A row of the reference.
struct Reference {
    family: Family,
    /// Whether the family shows in a scrape: Flux gives it a series, or it has no labels.
    shown: bool,
}

fn reference() -> BTreeMap<String, Reference> {
    FAMILIES
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|line| {
            let columns: Vec<&str> = line.split('\t').collect();
            let list = |column: &str| -> Vec<String> {
                if column == "-" {
                    Vec::new()
                } else {
                    column.split(',').map(str::to_string).collect()
                }
            };
            let labels: BTreeSet<String> = list(columns[2]).into_iter().collect();
            let shown = columns[4] == "yes" || labels.is_empty();
            let family = Family {
                kind: columns[1].to_string(),
                labels,
                buckets: list(columns[3]),
            };
            (columns[0].to_string(), Reference { family, shown })
        })
        .collect()
}

/// The families of a text-format page, with the label names of their samples.
fn scraped(text: &str) -> BTreeMap<String, Family> {
    let mut families: BTreeMap<String, Family> = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            families.insert(
                name.to_string(),
                Family {
                    kind: kind.to_string(),
                    ..Default::default()
                },
            );
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let (series, _value) = line.rsplit_once(' ').unwrap();
        let (name, labels) = match series.split_once('{') {
            Some((name, labels)) => (name, labels.trim_end_matches('}')),
            None => (series, ""),
        };
        let family_name = [
            name,
            name.trim_end_matches("_bucket"),
            name.trim_end_matches("_sum"),
            name.trim_end_matches("_count"),
        ]
        .into_iter()
        .find(|n| families.contains_key(*n))
        .unwrap_or_else(|| panic!("a sample of no declared family: {line}"));
        let family = families.get_mut(family_name).unwrap();
        for pair in labels.split("\",").filter(|p| !p.is_empty()) {
            let (label, value) = pair.split_once("=\"").unwrap();
            if label == "le" {
                let bound = value.trim_end_matches('"');
                if bound != "+Inf" && !family.buckets.iter().any(|b| b == bound) {
                    family.buckets.push(bound.to_string());
                }
            } else {
                family.labels.insert(label.to_string());
            }
        }
    }
    families
}

/// Label values on the lines of `family` (each distinct value once).
fn label_values(text: &str, family: &str, label: &str) -> BTreeSet<String> {
    let prefix = format!("{label}=\"");
    text.lines()
        .filter(|l| l.starts_with(family) && !l.starts_with('#'))
        .filter_map(|l| {
            let at = l.find(&prefix)? + prefix.len();
            Some(l[at..].split('"').next()?.to_string())
        })
        .collect()
}

#[tokio::test]
async fn the_binary_serves_the_metric_families_flux_serves_and_nothing_else() {
    let cluster = TestCluster::start().await;
    let kubeconfig = controller_kubeconfig(&cluster).await;
    let artifacts = crate::support::artifacts::ArtifactServer::start().await;
    let ns = cluster.namespace.clone();
    cluster
        .source_of_manifests(&artifacts, "main@sha1:5c4a", &config_map("scraped"))
        .await;
    let controller = ControllerProcess::start_with_kubeconfig(
        &kubeconfig,
        &ns,
        &[
            "--enable-leader-election",
            "--leader-election-retry-period=200ms",
        ],
    );
    cluster
        .apply(
            &json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": "scraped", "namespace": ns},
            "spec": {"interval": "10m", "prune": true, "targetNamespace": ns,
                "sourceRef": {"kind": "GitRepository", "name": "repo"}}}),
        )
        .await;
    let page = wait_for(Duration::from_secs(30), || async {
        let page = http_get_text(&controller.metrics, "/metrics").await?;
        (page.contains("gotk_reconcile_duration_seconds_count{")
            && page.contains(
                "leader_election_master_status{name=\"kustomize-controller-leader-election\"} 1",
            ))
        .then_some(page)
    })
    .await
    .unwrap_or_else(|| panic!("a reconciliation is measured; log:\n{}", controller.log()));
    let (head, text) = page.split_once("\r\n\r\n").unwrap();
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/plain; version=0.0.4"),
        "{head}"
    );

    // expfmt's layout: families by name; a histogram's buckets, `le` last, before its sum.
    let declared: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    assert!(declared.is_sorted(), "{declared:?}");
    let histogram: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("controller_runtime_reconcile_time_seconds"))
        .collect();
    assert!(histogram[0].starts_with("controller_runtime_reconcile_time_seconds_bucket{controller=\"kustomization\",le=\"0.005\"} "));
    assert!(
        histogram[histogram.len() - 2].starts_with("controller_runtime_reconcile_time_seconds_sum")
    );

    let reference = reference();
    let families = scraped(text);
    let expected: BTreeSet<&String> = reference
        .iter()
        .filter(|(_, r)| r.shown)
        .map(|(name, _)| name)
        .collect();
    let served: BTreeSet<&String> = families.keys().collect();
    assert_eq!(
        served.difference(&expected).collect::<Vec<_>>(),
        Vec::<&&String>::new(),
        "families Flux does not serve"
    );
    assert_eq!(
        expected.difference(&served).collect::<Vec<_>>(),
        Vec::<&&String>::new(),
        "families Flux serves that are missing"
    );
    for (name, family) in &families {
        let want = &reference[name].family;
        assert_eq!(family.kind, want.kind, "{name}: type");
        assert_eq!(family.labels, want.labels, "{name}: label names");
        assert_eq!(family.buckets, want.buckets, "{name}: histogram bounds");
    }
    for go in GO_RUNTIME
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        assert!(!families.contains_key(go), "{go}: no Go runtime series");
    }

    let one = |values: BTreeSet<String>| values.into_iter().collect::<Vec<_>>();
    for family in ["controller_runtime_reconcile_total", "workqueue_adds_total"] {
        assert_eq!(
            one(label_values(text, family, "controller")),
            ["kustomization"]
        );
    }
    assert_eq!(
        one(label_values(text, "workqueue_depth", "name")),
        ["kustomization"]
    );
    assert_eq!(
        one(label_values(
            text,
            "controller_runtime_reconcile_total",
            "result"
        )),
        ["error", "requeue", "requeue_after", "success"]
    );
    assert_eq!(
        one(label_values(
            text,
            "gotk_reconcile_duration_seconds_count",
            "kind"
        )),
        ["Kustomization"]
    );
    assert!(
        label_values(text, "rest_client_requests_total", "method").contains("PATCH"),
        "{text}"
    );
    let waited: f64 = text
        .lines()
        .find_map(|l| {
            l.strip_prefix(
                "workqueue_queue_duration_seconds_count{controller=\"kustomization\",name=\"kustomization\"} ",
            )
        })
        .unwrap()
        .parse()
        .unwrap();
    assert!(waited >= 1.0, "a reconciliation was taken off the queue");
    // Idle (the next run is in 10 minutes), the queue is empty at every priority.
    let idle = wait_for(Duration::from_secs(30), || async {
        let page = http_get_text(&controller.metrics, "/metrics").await?;
        let depths: Vec<String> = page
            .lines()
            .filter(|l| l.starts_with("workqueue_depth{"))
            .map(str::to_string)
            .collect();
        (!depths.is_empty() && depths.iter().all(|l| l.ends_with(" 0"))).then_some(())
    })
    .await;
    assert!(idle.is_some(), "workqueue_depth returns to 0");
    for process in [
        "process_resident_memory_bytes ",
        "process_start_time_seconds ",
    ] {
        let value: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix(process))
            .unwrap()
            .parse()
            .unwrap();
        assert!(value > 0.0, "{process}{value}");
    }
}
