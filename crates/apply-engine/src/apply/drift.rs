//! Deciding whether a live object drifted from what we would apply, the `spec.ignore` rules
//! that exclude fields from that decision, and the managed-fields takeover that lets a later
//! apply revert edits made with other tools.

use serde_json::{Map, Value, json};

use super::normalize::{LEGACY_ANNOTATIONS, LEGACY_GC_LABEL};
use crate::kustomize::ObjectSelector;

/// Server-owned bookkeeping that never counts as drift.
const NOISE: &[&str] = &[
    "managedFields",
    "resourceVersion",
    "generation",
    "uid",
    "creationTimestamp",
    "selfLink",
];

/// The parts of an object that are compared: everything but status and metadata noise.
pub fn comparable(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(map) = object.as_object_mut() {
        map.remove("status");
    }
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        for key in NOISE {
            metadata.remove(*key);
        }
    }
    object
}

/// Whether `dry_run` (the server's answer to applying our object) differs from `live`, as
/// ssa's `hasDrifted` judges it: labels, annotations, and everything outside metadata and
/// status (an empty map is no map). A terminating object is not drift: applying it again
/// would not stop its deletion.
pub fn drifted(live: &Value, dry_run: &Value) -> bool {
    let map = |object: &Value, field: &str| {
        object
            .get("metadata")
            .and_then(|metadata| metadata.get(field))
            .and_then(Value::as_object)
            .filter(|map| !map.is_empty())
            .cloned()
    };
    map(live, "labels") != map(dry_run, "labels")
        || map(live, "annotations") != map(dry_run, "annotations")
        || !same_outside_metadata(live, dry_run)
}

/// Whether two objects agree on every field but `metadata` and `status`, compared in place
/// (this runs for every object of every reconciliation).
fn same_outside_metadata(a: &Value, b: &Value) -> bool {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a == b;
    };
    let compared = |key: &String| key != "metadata" && key != "status";
    a.keys().filter(|k| compared(k)).count() == b.keys().filter(|k| compared(k)).count()
        && a.iter()
            .filter(|(k, _)| compared(k))
            .all(|(k, v)| b.get(k) == Some(v))
}

/// Why a `spec.ignore` rule is invalid.
#[derive(Debug, thiserror::Error)]
pub enum IgnoreRuleError {
    #[error("ignore path '{0}' is not a JSON pointer")]
    NotAPointer(String),
    #[error(transparent)]
    Target(#[from] crate::kustomize::SelectorError),
}

/// `spec.ignore`: JSON pointers removed from objects a target selects.
pub struct IgnoreRules {
    rules: Vec<(Vec<String>, Option<ObjectSelector>)>,
}

impl IgnoreRules {
    pub fn new(rules: &[crate::api::IgnoreRule]) -> Result<IgnoreRules, IgnoreRuleError> {
        let mut compiled = Vec::new();
        for rule in rules {
            for path in &rule.paths {
                if !path.is_empty() && !path.starts_with('/') {
                    return Err(IgnoreRuleError::NotAPointer(path.clone()));
                }
            }
            let selector = match &rule.target {
                None => None,
                Some(t) => {
                    let text = |v: &Option<String>| v.clone().unwrap_or_default();
                    Some(
                        ObjectSelector::from_parts(
                            &text(&t.group),
                            &text(&t.version),
                            &text(&t.kind),
                            &text(&t.name),
                            &text(&t.namespace),
                            &text(&t.label_selector),
                            &text(&t.annotation_selector),
                        )
                        .map_err(IgnoreRuleError::Target)?,
                    )
                }
            };
            compiled.push((rule.paths.clone(), selector));
        }
        Ok(IgnoreRules { rules: compiled })
    }

    pub fn none() -> IgnoreRules {
        IgnoreRules { rules: Vec::new() }
    }

    /// The pointers that apply to `object`.
    pub fn paths_for(&self, object: &Value) -> Vec<&str> {
        self.rules
            .iter()
            .filter(|(_, selector)| {
                selector
                    .as_ref()
                    .is_none_or(|s| s.matches_json_object(object))
            })
            .flat_map(|(paths, _)| paths.iter().map(String::as_str))
            .collect()
    }
}

/// Fixes a dry-run's answer for known server bugs before it is compared, as fluxcd/pkg
/// `ssa/normalize.DryRunUnstructured`: Kubernetes before 1.27 returns an autoscaling/v2
/// HorizontalPodAutoscaler with its first metric repeated and an empty one added
/// (kubernetes/kubernetes#118293); repeats and metrics without a type are dropped.
pub fn fix_dry_run(object: &mut Value) {
    if object.get("kind").and_then(Value::as_str) != Some("HorizontalPodAutoscaler")
        || object.get("apiVersion").and_then(Value::as_str) != Some("autoscaling/v2")
    {
        return;
    }
    let Some(metrics) = object
        .pointer_mut("/spec/metrics")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    let mut kept: Vec<Value> = Vec::with_capacity(metrics.len());
    for metric in metrics.drain(..) {
        let typed = metric
            .get("type")
            .and_then(Value::as_str)
            .is_some_and(|t| !t.is_empty());
        if typed && !kept.contains(&metric) {
            kept.push(metric);
        }
    }
    *metrics = kept;
}

/// Removes the value at a JSON pointer, if there is one.
pub fn remove_pointer(object: &mut Value, pointer: &str) {
    let Some((parent, last)) = pointer.rsplit_once('/') else {
        return;
    };
    let key = last.replace("~1", "/").replace("~0", "~");
    match object.pointer_mut(parent) {
        Some(Value::Object(map)) => {
            map.remove(&key);
        }
        Some(Value::Array(items)) => {
            if let Ok(index) = key.parse::<usize>()
                && index < items.len()
            {
                items.remove(index);
            }
        }
        _ => {}
    }
}

/// Sets the value at a JSON pointer, creating objects on the way.
pub fn set_pointer(object: &mut Value, pointer: &str, value: Value) {
    let mut node = object;
    let parts: Vec<String> = pointer
        .split('/')
        .skip(1)
        .map(|p| p.replace("~1", "/").replace("~0", "~"))
        .collect();
    let Some((last, parents)) = parts.split_last() else {
        return;
    };
    for part in parents {
        let next = match node {
            Value::Object(map) => map.entry(part.clone()).or_insert_with(|| json!({})),
            Value::Array(items) => {
                match part.parse::<usize>().ok().and_then(|i| items.get_mut(i)) {
                    Some(item) => item,
                    None => return,
                }
            }
            _ => return,
        };
        node = next;
    }
    match node {
        Value::Object(map) => {
            map.insert(last.clone(), value);
        }
        Value::Array(items) => {
            if let Some(slot) = last.parse::<usize>().ok().and_then(|i| items.get_mut(i)) {
                *slot = value;
            }
        }
        _ => {}
    }
}

/// Managers whose fields we take over, matched as fluxcd/pkg/ssa matches them (by name prefix
/// and operation, never a subresource's entry): `kubectl` (Apply and Update), the
/// `before-first-apply` placeholder and our own Update entries, and `--override-manager`
/// names (Apply and Update). Our own Apply entry is where their fields go, never taken.
pub fn is_taken_over(
    manager: &str,
    operation: &str,
    own_manager: &str,
    overrides: &[String],
) -> bool {
    let any_write = matches!(operation, "Apply" | "Update");
    if manager == own_manager && operation == "Apply" {
        return false;
    }
    (manager.starts_with("kubectl") && any_write)
        || (manager.starts_with("before-first-apply") && operation == "Update")
        || (manager.starts_with(own_manager) && operation == "Update")
        || overrides
            .iter()
            .any(|o| !o.is_empty() && manager.starts_with(o.as_str()) && any_write)
}

/// A JSON patch that tags every managed-fields entry (every manager, subresources too) with
/// `api_version`, as fluxcd/pkg/ssa's MigrateAPIVersion does before an apply at a newer version
/// of a CRD (older entries make the server refuse fields that version added); `None` when all
/// entries already carry it.
pub fn migration_patch(live: &Value, api_version: &str) -> Option<Value> {
    let entries = live
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)?;
    if entries.iter().all(|e| e["apiVersion"] == api_version) {
        return None;
    }
    let migrated: Vec<Value> = entries
        .iter()
        .map(|entry| {
            let mut entry = entry.clone();
            entry["apiVersion"] = json!(api_version);
            entry
        })
        .collect();
    Some(json!([{"op": "replace", "path": "/metadata/managedFields", "value": migrated}]))
}

fn union_fields(into: &mut Map<String, Value>, from: &Map<String, Value>) {
    for (key, value) in from {
        match (into.get_mut(key), value) {
            (Some(Value::Object(existing)), Value::Object(more)) => union_fields(existing, more),
            (None, _) => {
                into.insert(key.clone(), value.clone());
            }
            _ => {}
        }
    }
}

/// A JSON patch that moves the fields of taken-over managers into our Apply entry and drops
/// kubectl's last-applied annotation and what Flux v1 wrote (its checksum annotations and
/// garbage-collection label); `None` when there is nothing
/// to take over.
pub fn takeover_patch(live: &Value, own_manager: &str, overrides: &[String]) -> Option<Value> {
    let entries = live
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array);
    let mut kept = Vec::new();
    let mut taken = Map::new();
    let mut any_taken = false;
    for entry in entries.into_iter().flatten() {
        let text = |k: &str| entry.get(k).and_then(Value::as_str).unwrap_or("");
        let subresource = text("subresource");
        if subresource.is_empty()
            && is_taken_over(text("manager"), text("operation"), own_manager, overrides)
        {
            any_taken = true;
            if let Some(fields) = entry.get("fieldsV1").and_then(Value::as_object) {
                union_fields(&mut taken, fields);
            }
        } else {
            kept.push(entry.clone());
        }
    }
    let annotations = live
        .pointer("/metadata/annotations")
        .and_then(Value::as_object);
    let labels = live.pointer("/metadata/labels").and_then(Value::as_object);
    let stale_annotations: Vec<&str> = LEGACY_ANNOTATIONS
        .iter()
        .copied()
        .filter(|a| annotations.is_some_and(|m| m.contains_key(*a)))
        .collect();
    let stale_label = labels.is_some_and(|m| m.contains_key(LEGACY_GC_LABEL));
    if !any_taken && stale_annotations.is_empty() && !stale_label {
        return None;
    }
    let mut operations = Vec::new();
    if any_taken {
        let own = kept.iter_mut().find(|e| {
            e.get("manager").and_then(Value::as_str) == Some(own_manager)
                && e.get("operation").and_then(Value::as_str) == Some("Apply")
        });
        match own {
            Some(entry) => {
                let fields = entry["fieldsV1"].as_object().cloned().unwrap_or_default();
                let mut merged = fields;
                union_fields(&mut merged, &taken);
                entry["fieldsV1"] = Value::Object(merged);
            }
            None => {
                let api_version = live.get("apiVersion").cloned().unwrap_or(Value::Null);
                kept.push(json!({
                    "manager": own_manager, "operation": "Apply", "apiVersion": api_version,
                    "fieldsType": "FieldsV1", "fieldsV1": taken,
                }));
            }
        }
        operations.push(json!({"op": "replace", "path": "/metadata/managedFields", "value": kept}));
    }
    for annotation in stale_annotations {
        let escaped = annotation.replace('~', "~0").replace('/', "~1");
        operations
            .push(json!({"op": "remove", "path": format!("/metadata/annotations/{escaped}")}));
    }
    if stale_label {
        let escaped = LEGACY_GC_LABEL.replace('~', "~0").replace('/', "~1");
        operations.push(json!({"op": "remove", "path": format!("/metadata/labels/{escaped}")}));
    }
    Some(Value::Array(operations))
}

#[cfg(test)]
#[path = "drift_selector_tests.rs"]
mod selector_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apply::normalize::LAST_APPLIED_ANNOTATION;

    #[test]
    fn drift_ignores_bookkeeping_and_status() {
        let live = json!({"metadata": {"name": "a", "resourceVersion": "1", "managedFields": [1]},
            "data": {"x": "1"}, "status": {"s": 1}});
        let dry = json!({"metadata": {"name": "a", "resourceVersion": "2"}, "data": {"x": "1"}});
        assert!(!drifted(&live, &dry));
        let changed = json!({"metadata": {"name": "a"}, "data": {"x": "2"}});
        assert!(drifted(&live, &changed));
        // ssa's hasDrifted: labels, annotations and what is outside metadata only.
        let terminating = json!({"metadata": {"name": "a", "deletionTimestamp": "2026-11-28T00:00:00Z",
            "finalizers": ["example.com/hold"], "labels": {}}, "data": {"x": "1"}});
        assert!(!drifted(&live, &terminating), "terminating is not drift");
        let relabelled =
            json!({"metadata": {"name": "a", "labels": {"team": "b"}}, "data": {"x": "1"}});
        assert!(drifted(&live, &relabelled));
        let annotated =
            json!({"metadata": {"name": "a", "annotations": {"note": "x"}}, "data": {"x": "1"}});
        assert!(drifted(&live, &annotated));
        let extended = json!({"metadata": {"name": "a"}, "data": {"x": "1"}, "binaryData": {}});
        assert!(drifted(&live, &extended), "a field the live object lacks");
        assert!(drifted(&extended, &live), "a field the dry-run lacks");
    }

    #[test]
    fn ignore_rules_select_objects_and_remove_pointers() {
        let rules = IgnoreRules::new(&[crate::api::IgnoreRule {
            paths: vec!["/spec/replicas".into(), "/metadata/annotations/a~1b".into()],
            target: Some(crate::api::Selector {
                kind: Some("Deployment".into()),
                ..Default::default()
            }),
        }])
        .unwrap();
        let mut deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "annotations": {"a/b": "1", "c": "2"}}, "spec": {"replicas": 3}});
        for pointer in rules.paths_for(&deployment.clone()) {
            remove_pointer(&mut deployment, pointer);
        }
        assert_eq!(deployment["spec"], json!({}));
        assert_eq!(deployment["metadata"]["annotations"], json!({"c": "2"}));
        let config_map =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
        assert!(rules.paths_for(&config_map).is_empty());
        assert!(
            IgnoreRules::new(&[crate::api::IgnoreRule {
                paths: vec!["spec".into()],
                target: None
            }])
            .is_err()
        );
    }

    #[test]
    fn takeover_moves_kubectl_fields_into_our_apply_entry() {
        let live = json!({"apiVersion": "v1", "metadata": {
        "annotations": {LAST_APPLIED_ANNOTATION: "{}"},
        "managedFields": [
            {"manager": "kustomize-controller", "operation": "Apply", "fieldsV1": {"f:data": {"f:a": {}}}},
            {"manager": "kubectl-edit", "operation": "Update", "fieldsV1": {"f:data": {"f:b": {}}}},
            {"manager": "hpa", "operation": "Update", "fieldsV1": {"f:spec": {"f:replicas": {}}}},
        ]}});
        let patch = takeover_patch(&live, "kustomize-controller", &[]).unwrap();
        let entries = &patch[0]["value"];
        assert_eq!(entries.as_array().unwrap().len(), 2);
        assert_eq!(
            entries[0]["fieldsV1"],
            json!({"f:data": {"f:a": {}, "f:b": {}}})
        );
        assert_eq!(entries[1]["manager"], "hpa");
        assert_eq!(patch[1]["op"], "remove");
        let clean = json!({"metadata": {"managedFields": [
            {"manager": "kustomize-controller", "operation": "Apply", "fieldsV1": {}}]}});
        assert!(takeover_patch(&clean, "kustomize-controller", &[]).is_none());
        let with_override = json!({"metadata": {"managedFields": [
            {"manager": "helm", "operation": "Update", "fieldsV1": {"f:x": {}}}]}});
        assert!(
            takeover_patch(
                &with_override,
                "kustomize-controller",
                &["helm".to_string()]
            )
            .is_some()
        );
    }

    #[test]
    fn managers_are_matched_by_prefix_and_operation_as_flux_does() {
        let taken = |manager: &str, operation: &str| {
            is_taken_over(
                manager,
                operation,
                "kustomize-controller",
                &["helm".to_string()],
            )
        };
        assert!(taken("kubectl-client-side-apply", "Update"));
        assert!(taken("kubectl", "Apply"));
        assert!(taken("before-first-apply", "Update"));
        assert!(!taken("before-first-apply", "Apply"));
        assert!(taken("kustomize-controller", "Update"));
        assert!(!taken("kustomize-controller", "Apply"), "our own entry");
        assert!(
            taken("helm-controller", "Apply"),
            "--override-manager is a prefix"
        );
        assert!(!taken("flagger", "Update"));
    }

    #[test]
    fn flux_v1_leftovers_are_removed_on_takeover() {
        let live = json!({"metadata": {
            "annotations": {"fluxcd.io/sync-checksum": "abc", "kustomize.toolkit.fluxcd.io/checksum": "def", "keep": "1"},
            "labels": {"fluxcd.io/sync-gc-mark": "sha256.x", "keep": "1"},
            "managedFields": [{"manager": "kustomize-controller", "operation": "Apply", "fieldsV1": {}}]}});
        let patch = takeover_patch(&live, "kustomize-controller", &[]).unwrap();
        let paths: Vec<&str> = patch
            .as_array()
            .unwrap()
            .iter()
            .map(|op| op["path"].as_str().unwrap())
            .collect();
        assert_eq!(
            paths,
            [
                "/metadata/annotations/kustomize.toolkit.fluxcd.io~1checksum",
                "/metadata/annotations/fluxcd.io~1sync-checksum",
                "/metadata/labels/fluxcd.io~1sync-gc-mark"
            ]
        );
    }

    #[test]
    fn a_dry_run_hpa_loses_its_repeated_and_empty_metrics() {
        let cpu = json!({"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": 80}}});
        let memory = json!({"type": "Resource", "resource": {"name": "memory",
            "target": {"type": "Utilization", "averageUtilization": 70}}});
        let mut answer = json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "spec": {"metrics": [cpu, memory, cpu, {"type": ""}, {}]}});
        fix_dry_run(&mut answer);
        assert_eq!(answer["spec"]["metrics"], json!([cpu, memory]));
        let mut other = json!({"apiVersion": "autoscaling/v2beta2", "kind": "HorizontalPodAutoscaler",
            "spec": {"metrics": [cpu, cpu]}});
        fix_dry_run(&mut other);
        assert_eq!(
            other["spec"]["metrics"],
            json!([cpu, cpu]),
            "only autoscaling/v2, as Flux"
        );
    }
}
