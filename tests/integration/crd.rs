//! Our Kustomization CRD against Flux's: the schema property by property, the CRD's names and
//! columns, and the copy under `crds/`.

use std::collections::BTreeSet;

use kustomize_controller::api::{CRD_FILE_NAME, crd_yaml};
use kustomize_controller::yaml::{Schema, parse_single};
use serde_json::Value;

use crate::support::{fixture_file, repo_root};

/// Differences from Flux's schema we accept, each with the reason. Keyed by schema path and
/// keyword; an entry that no longer matches a difference fails the test too.
const ALLOWED_DIFFERENCES: &[(&str, &str, &str)] = &[];

fn flux_crd() -> Value {
    let path = fixture_file(&format!("reference/crds/{CRD_FILE_NAME}"));
    let text = std::fs::read_to_string(path).unwrap();
    parse_single(&text, Schema::Kyaml).unwrap().into()
}

fn our_crd() -> Value {
    parse_single(&crd_yaml().unwrap(), Schema::Kyaml)
        .unwrap()
        .into()
}

fn schema_of(crd: &Value) -> &Value {
    &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
}

/// Keywords that carry documentation only.
const DOC_KEYWORDS: &[&str] = &["description", "title"];

fn compare(path: &str, ours: &Value, flux: &Value, diffs: &mut Vec<(String, String, String)>) {
    let empty = serde_json::Map::new();
    let ours_map = ours.as_object().unwrap_or(&empty);
    let flux_map = flux.as_object().unwrap_or(&empty);
    let keywords: BTreeSet<&String> = ours_map.keys().chain(flux_map.keys()).collect();
    for keyword in keywords {
        let (a, b) = (ours_map.get(keyword), flux_map.get(keyword));
        match keyword.as_str() {
            k if DOC_KEYWORDS.contains(&k) => {}
            "properties" => {
                let a = a.and_then(Value::as_object).unwrap_or(&empty);
                let b = b.and_then(Value::as_object).unwrap_or(&empty);
                let names: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
                for name in names {
                    let child = format!("{path}.{name}");
                    match (a.get(name), b.get(name)) {
                        (Some(x), Some(y)) => compare(&child, x, y, diffs),
                        (Some(_), None) => {
                            diffs.push((child, "property".into(), "only in ours".into()))
                        }
                        (None, Some(_)) => {
                            diffs.push((child, "property".into(), "only in Flux's".into()))
                        }
                        (None, None) => unreachable!(),
                    }
                }
            }
            "items" | "additionalProperties"
                if a.is_some_and(Value::is_object) && b.is_some_and(Value::is_object) =>
            {
                compare(&format!("{path}.{keyword}"), a.unwrap(), b.unwrap(), diffs)
            }
            "required" => {
                let set = |v: Option<&Value>| -> BTreeSet<String> {
                    v.and_then(Value::as_array)
                        .map(|items| {
                            items
                                .iter()
                                .filter_map(|i| i.as_str().map(String::from))
                                .collect()
                        })
                        .unwrap_or_default()
                };
                if set(a) != set(b) {
                    diffs.push((
                        path.into(),
                        "required".into(),
                        format!("ours {:?}, Flux's {:?}", set(a), set(b)),
                    ));
                }
            }
            _ if a != b => diffs.push((
                path.into(),
                keyword.clone(),
                format!("ours {a:?}, Flux's {b:?}"),
            )),
            _ => {}
        }
    }
}

#[test]
fn schema_matches_flux_property_by_property() {
    let (ours, flux) = (our_crd(), flux_crd());
    let mut diffs = Vec::new();
    compare("", schema_of(&ours), schema_of(&flux), &mut diffs);
    let unexpected: Vec<_> = diffs
        .iter()
        .filter(|(path, keyword, _)| {
            !ALLOWED_DIFFERENCES
                .iter()
                .any(|(p, k, _)| p == path && k == keyword)
        })
        .collect();
    let stale: Vec<_> = ALLOWED_DIFFERENCES
        .iter()
        .filter(|(p, k, _)| {
            !diffs
                .iter()
                .any(|(path, keyword, _)| p == path && k == keyword)
        })
        .collect();
    let report: Vec<String> = unexpected
        .iter()
        .map(|(p, k, d)| format!("{p} [{k}]: {d}"))
        .collect();
    assert!(
        unexpected.is_empty(),
        "schema differs from Flux's:\n{}",
        report.join("\n")
    );
    assert!(
        stale.is_empty(),
        "allowed differences that no longer occur: {stale:?}"
    );
}

#[test]
fn names_scope_columns_and_subresources_match_flux() {
    let (ours, flux) = (our_crd(), flux_crd());
    assert_eq!(ours["metadata"]["name"], flux["metadata"]["name"]);
    assert_eq!(
        ours["metadata"]["annotations"]["kustomize.toolkit.fluxcd.io/substitute"],
        flux["metadata"]["annotations"]["kustomize.toolkit.fluxcd.io/substitute"]
    );
    for field in ["group", "names", "scope"] {
        assert_eq!(ours["spec"][field], flux["spec"][field], "spec.{field}");
    }
    let (ours_v, flux_v) = (&ours["spec"]["versions"][0], &flux["spec"]["versions"][0]);
    for field in [
        "name",
        "served",
        "storage",
        "subresources",
        "additionalPrinterColumns",
    ] {
        assert_eq!(ours_v[field], flux_v[field], "spec.versions[0].{field}");
    }
    assert_eq!(ours["spec"]["versions"].as_array().map(Vec::len), Some(1));
}

#[test]
fn committed_crd_is_current() {
    let committed = std::fs::read_to_string(repo_root().join("crds").join(CRD_FILE_NAME))
        .unwrap_or_else(|e| panic!("crds/{CRD_FILE_NAME}: {e}; run `make crds`"));
    assert!(
        committed == crd_yaml().unwrap(),
        "crds/{CRD_FILE_NAME} is stale: run `make crds` and commit the result"
    );
}
