//! kustomize's `legacy` output order, its default.
//!
//! Kinds that others depend on come first (Namespace, then quotas, storage, CRDs, accounts,
//! RBAC, config, services, workloads…), admission webhooks come last so they cannot block
//! the objects before them, and everything else sits in between. Ties are broken by the
//! `group_version_kind` string and then `namespace|name`, where kustomize writes an empty
//! group as `~G` and an empty namespace as `~X`, so those sort after named ones.

use std::path::Path;

use crate::value::Value;

use super::kustfile::SortOptions;
use super::{KustomizeError, Reorder};

const ORDER_FIRST: &[&str] = &[
    "Namespace",
    "ResourceQuota",
    "StorageClass",
    "CustomResourceDefinition",
    "ServiceAccount",
    "PodSecurityPolicy",
    "Role",
    "ClusterRole",
    "RoleBinding",
    "ClusterRoleBinding",
    "ConfigMap",
    "Secret",
    "Endpoints",
    "Service",
    "LimitRange",
    "PriorityClass",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "Deployment",
    "StatefulSet",
    "CronJob",
    "PodDisruptionBudget",
];

const ORDER_LAST: &[&str] = &[
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
];

/// kyaml's `typeOrders`: a kind of the legacy order's first list ranks below zero by its
/// place, one of its last list above, every other kind zero.
pub(super) fn kind_rank(kind: &str) -> i32 {
    if let Some(place) = ORDER_FIRST.iter().position(|k| *k == kind) {
        return place as i32 - ORDER_FIRST.len() as i32;
    }
    ORDER_LAST
        .iter()
        .position(|k| *k == kind)
        .map_or(0, |place| place as i32 + 1)
}

/// The order the output comes in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Order {
    /// kustomize's legacy order, with the kinds that go first and last.
    Legacy {
        first: Vec<String>,
        last: Vec<String>,
    },
    /// Accumulation order.
    Fifo,
}

impl Order {
    fn default_legacy() -> Order {
        Order::Legacy {
            first: ORDER_FIRST.iter().map(|s| s.to_string()).collect(),
            last: ORDER_LAST.iter().map(|s| s.to_string()).collect(),
        }
    }
}

/// The order from the build options or, when they say nothing, the top kustomization's
/// `sortOptions`, defaulting to the legacy order.
pub fn order_for(
    options: Option<&SortOptions>,
    reorder: Option<Reorder>,
    dir: &Path,
) -> Result<Order, KustomizeError> {
    match (reorder, options) {
        (Some(Reorder::Legacy), _) => Ok(Order::default_legacy()),
        (Some(Reorder::None), _) | (Some(Reorder::AsWritten), None) => Ok(Order::Fifo),
        (None, None) => Ok(Order::default_legacy()),
        (None | Some(Reorder::AsWritten), Some(options)) => match options.order.as_str() {
            "fifo" if options.legacy_sort_options.is_some() => Err(KustomizeError::InvalidKustomization {
                file: dir.to_path_buf(),
                message: "the field 'sortOptions.legacySortOptions' is set but the selected sort order is 'fifo', not 'legacy'".into(),
            }),
            "fifo" => Ok(Order::Fifo),
            "legacy" => match &options.legacy_sort_options {
                Some(custom) => Ok(Order::Legacy { first: custom.order_first.clone(), last: custom.order_last.clone() }),
                None => Ok(Order::default_legacy()),
            },
            // kustomize's words; `sortOptions` without an order is refused too.
            other => Err(KustomizeError::InvalidKustomization {
                file: dir.to_path_buf(),
                message: format!(
                    "the field 'sortOptions.order' must be one of [fifo, legacy], not {other:?}"
                ),
            }),
        },
    }
}

/// Sorts items into `order` by the object each holds.
pub fn apply_by<T>(items: &mut [T], order: &Order, object: impl Fn(&T) -> &Value) {
    if let Order::Legacy { first, last } = order {
        items.sort_by_cached_key(|item| legacy_key(object(item), first, last));
    }
}

/// The sort key kustomize's legacy order compares.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct LegacyKey {
    kind_rank: i64,
    gvk: String,
    namespace_and_name: String,
}

fn legacy_key(object: &Value, first: &[String], last: &[String]) -> LegacyKey {
    let text = |pointer: &str| super::resource::str_at(object, pointer);
    let kind = text("/kind");
    let (group, version) = match text("/apiVersion").split_once('/') {
        Some((group, version)) => (group, version),
        None => ("", text("/apiVersion")),
    };
    let or = |value: &str, placeholder: &str| {
        if value.is_empty() {
            placeholder.to_string()
        } else {
            value.to_string()
        }
    };
    let kind_rank = if let Some(i) = first.iter().position(|k| k == kind) {
        i as i64 - first.len() as i64
    } else if let Some(i) = last.iter().position(|k| k == kind) {
        i as i64 + 1
    } else {
        0
    };
    LegacyKey {
        kind_rank,
        gvk: format!(
            "{}_{}_{}",
            or(group, "~G"),
            or(version, "~V"),
            or(kind, "~K")
        ),
        namespace_and_name: format!(
            "{}|{}",
            or(text("/metadata/namespace"), "~X"),
            or(text("/metadata/name"), "~N")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json;

    fn object(api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> Value {
        let mut metadata = json!({ "name": name });
        if let Some(ns) = namespace {
            metadata["namespace"] = json!(ns);
        }
        json!({ "apiVersion": api_version, "kind": kind, "metadata": metadata })
    }

    #[test]
    fn as_written_keeps_the_accumulated_order_unless_the_kustomization_sorts() {
        let dir = Path::new(".");
        let as_written = Some(Reorder::AsWritten);
        assert_eq!(order_for(None, as_written, dir).unwrap(), Order::Fifo);
        let legacy = SortOptions {
            order: "legacy".into(),
            legacy_sort_options: None,
        };
        assert_eq!(
            order_for(Some(&legacy), as_written, dir).unwrap(),
            Order::default_legacy()
        );
        assert_eq!(order_for(None, None, dir).unwrap(), Order::default_legacy());
    }

    #[test]
    fn orders_like_kustomize_legacy() {
        let mut objects = vec![
            object("v1", "ConfigMap", None, "b"),
            object("v1", "ConfigMap", Some("zz"), "a"),
            object("v1", "ConfigMap", Some("aa"), "c"),
            object("example.com/v1", "Widget", None, "w"),
            object("apps/v1", "Widget", None, "w2"),
            object("v1", "Widget", None, "w3"),
            object(
                "admissionregistration.k8s.io/v1",
                "ValidatingWebhookConfiguration",
                None,
                "v",
            ),
            object(
                "admissionregistration.k8s.io/v1",
                "MutatingWebhookConfiguration",
                None,
                "m",
            ),
            object("v1", "Namespace", None, "ns"),
            object("zzz/v1", "Aaa", None, "x"),
        ];
        apply_by(&mut objects, &Order::default_legacy(), |o| o);
        let names: Vec<_> = objects
            .iter()
            .map(|o| o["metadata"]["name"].as_str().unwrap())
            .collect();
        // The order `kubectl kustomize` (v5.5.0 and v5.8.1 alike) printed for the same input.
        assert_eq!(names, ["ns", "c", "a", "b", "w2", "w", "x", "w3", "m", "v"]);
    }
}
