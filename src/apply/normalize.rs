//! Preparing built objects for server-side apply, and reading the per-object policies.
//!
//! Objects are normalized the way the API server would store them, so that a dry-run
//! compares like with like: Secret `stringData` folds into `data`, `status` is dropped (except
//! on CRDs, whose status the API server owns anyway), and ports get their default `protocol`
//! (part of the list key). The owner labels and `spec.commonMetadata` are stamped on.

use base64::Engine as _;
use serde_json::{Map, Value, json};

use crate::api::CommonMetadata;

pub const NAME_LABEL: &str = "kustomize.toolkit.fluxcd.io/name";
pub const NAMESPACE_LABEL: &str = "kustomize.toolkit.fluxcd.io/namespace";
pub const SSA_ANNOTATION: &str = "kustomize.toolkit.fluxcd.io/ssa";
pub const FORCE_ANNOTATION: &str = "kustomize.toolkit.fluxcd.io/force";
pub const RECONCILE_ANNOTATION: &str = "kustomize.toolkit.fluxcd.io/reconcile";
pub const PRUNE_ANNOTATION: &str = "kustomize.toolkit.fluxcd.io/prune";
pub const LAST_APPLIED_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";
/// Annotations and labels older Flux versions wrote, removed when objects are taken over.
pub const LEGACY_CHECKSUM: &str = "kustomize.toolkit.fluxcd.io/checksum";

/// How an object is applied (`kustomize.toolkit.fluxcd.io/ssa`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SsaPolicy {
    /// Apply and take over fields other tools changed.
    #[default]
    Override,
    /// Apply only our fields; leave other managers' fields alone.
    Merge,
    /// Create when missing, never update.
    IfNotPresent,
    /// Never apply, never prune.
    Ignore,
}

/// The value of a label or annotation, compared case-insensitively as Flux does.
pub fn metadata_value<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    ["annotations", "labels"].into_iter().find_map(|map| {
        object
            .pointer(&format!("/metadata/{map}"))
            .and_then(Value::as_object)
            .and_then(|m| m.get(key))
            .and_then(Value::as_str)
    })
}

fn has_value(object: &Value, key: &str, value: &str) -> bool {
    metadata_value(object, key).is_some_and(|v| v.eq_ignore_ascii_case(value))
}

pub fn ssa_policy(object: &Value) -> SsaPolicy {
    match metadata_value(object, SSA_ANNOTATION)
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("merge") => SsaPolicy::Merge,
        Some("ifnotpresent") => SsaPolicy::IfNotPresent,
        Some("ignore") => SsaPolicy::Ignore,
        _ => SsaPolicy::Override,
    }
}

pub fn reconcile_disabled(object: &Value) -> bool {
    has_value(object, RECONCILE_ANNOTATION, "disabled")
}

pub fn force_enabled(object: &Value) -> bool {
    has_value(object, FORCE_ANNOTATION, "enabled")
}

pub fn prune_disabled(object: &Value) -> bool {
    has_value(object, PRUNE_ANNOTATION, "disabled")
}

fn metadata_map<'a>(object: &'a mut Value, key: &str) -> &'a mut Map<String, Value> {
    if !object["metadata"][key].is_object() {
        object["metadata"][key] = json!({});
    }
    object["metadata"][key]
        .as_object_mut()
        .expect("just made an object")
}

/// Who applies: stamped on every object as the owner labels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    pub name: String,
    pub namespace: String,
}

impl Owner {
    /// Whether a live object still carries this owner's labels.
    pub fn owns(&self, object: &Value) -> bool {
        let label = |key: &str| {
            object
                .pointer("/metadata/labels")
                .and_then(|l| l.get(key))
                .and_then(Value::as_str)
        };
        label(NAME_LABEL) == Some(self.name.as_str())
            && label(NAMESPACE_LABEL) == Some(self.namespace.as_str())
    }
}

/// Normalizes an object and stamps ownership and common metadata on it.
pub fn prepare(object: &mut Value, owner: &Owner, common: Option<&CommonMetadata>) {
    if !object["metadata"].is_object() {
        object["metadata"] = json!({});
    }
    let is_crd = object["kind"] == "CustomResourceDefinition"
        && object["apiVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with("apiextensions.k8s.io/"));
    if !is_crd && let Some(map) = object.as_object_mut() {
        map.remove("status");
    }
    if object["kind"] == "Secret" && object["apiVersion"] == "v1" {
        fold_string_data(object);
    }
    default_port_protocols(object);
    if let Some(common) = common {
        for (key, value) in common.labels.iter().flatten() {
            metadata_map(object, "labels").insert(key.clone(), json!(value));
        }
        for (key, value) in common.annotations.iter().flatten() {
            metadata_map(object, "annotations").insert(key.clone(), json!(value));
        }
    }
    let labels = metadata_map(object, "labels");
    labels.insert(NAME_LABEL.into(), json!(owner.name));
    labels.insert(NAMESPACE_LABEL.into(), json!(owner.namespace));
}

fn fold_string_data(secret: &mut Value) {
    let Some(Value::Object(string_data)) =
        secret.as_object_mut().and_then(|s| s.remove("stringData"))
    else {
        return;
    };
    if !secret["data"].is_object() {
        secret["data"] = json!({});
    }
    for (key, value) in string_data {
        let text = match value {
            Value::String(s) => s,
            Value::Null => String::new(),
            other => other.to_string(),
        };
        secret["data"][key] = json!(base64::engine::general_purpose::STANDARD.encode(text));
    }
}

fn default_protocols(ports: Option<&mut Value>) {
    for port in ports
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
    {
        port.entry("protocol").or_insert_with(|| json!("TCP"));
    }
}

/// `protocol: TCP` where Kubernetes defaults it (and keys lists by it): ports of containers in
/// pod specs of built-in kinds, and Service ports. Other kinds' `ports` are left alone: an
/// omitted protocol may mean something else there.
fn default_port_protocols(object: &mut Value) {
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let group = api_version.split_once('/').map(|(g, _)| g).unwrap_or("");
    if !matches!(group, "" | "apps" | "batch") {
        return;
    }
    if object.get("kind").and_then(Value::as_str) == Some("Service") && group.is_empty() {
        default_protocols(object.pointer_mut("/spec/ports"));
        return;
    }
    fn walk(value: &mut Value) {
        match value {
            Value::Object(map) => {
                for (key, child) in map.iter_mut() {
                    if matches!(
                        key.as_str(),
                        "containers" | "initContainers" | "ephemeralContainers"
                    ) {
                        for container in child.as_array_mut().into_iter().flatten() {
                            default_protocols(container.get_mut("ports"));
                        }
                    } else {
                        walk(child);
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(object);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prepare_normalizes_and_stamps() {
        let owner = Owner {
            name: "apps".into(),
            namespace: "flux-system".into(),
        };
        let common = CommonMetadata {
            labels: Some([("team".to_string(), "a".to_string())].into()),
            annotations: Some([("note".to_string(), "x".to_string())].into()),
        };
        let mut secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
            "stringData": {"k": "v"}, "data": {"o": "eA=="}, "status": {"x": 1}});
        prepare(&mut secret, &owner, Some(&common));
        assert_eq!(secret["data"], json!({"o": "eA==", "k": "dg=="}));
        assert!(secret.get("stringData").is_none() && secret.get("status").is_none());
        assert_eq!(secret["metadata"]["labels"][NAME_LABEL], "apps");
        assert_eq!(secret["metadata"]["labels"]["team"], "a");
        assert_eq!(secret["metadata"]["annotations"]["note"], "x");
        assert!(owner.owns(&secret));

        let mut deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"template": {"spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80}]}]}}}});
        prepare(&mut deployment, &owner, None);
        assert_eq!(
            deployment.pointer("/spec/template/spec/containers/0/ports/0/protocol"),
            Some(&json!("TCP"))
        );
        let mut policy = json!({"apiVersion": "cilium.io/v2", "kind": "CiliumNetworkPolicy", "metadata": {"name": "p"},
            "spec": {"egress": [{"toPorts": [{"ports": [{"port": "53"}]}]}]}});
        prepare(&mut policy, &owner, None);
        assert!(
            policy
                .pointer("/spec/egress/0/toPorts/0/ports/0/protocol")
                .is_none(),
            "custom kinds keep their ports"
        );
        let mut crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "x"}, "status": {"storedVersions": []}});
        prepare(&mut crd, &owner, None);
        assert!(crd.get("status").is_some(), "CRDs keep their status");
    }

    #[test]
    fn policies_read_labels_or_annotations_case_insensitively() {
        let object = json!({"metadata": {"annotations": {SSA_ANNOTATION: "IfNotPresent"},
            "labels": {RECONCILE_ANNOTATION: "Disabled", FORCE_ANNOTATION: "enabled"}}});
        assert_eq!(ssa_policy(&object), SsaPolicy::IfNotPresent);
        assert!(reconcile_disabled(&object));
        assert!(force_enabled(&object));
        assert!(!prune_disabled(&object));
        assert_eq!(ssa_policy(&json!({})), SsaPolicy::Override);
        assert_eq!(
            ssa_policy(&json!({"metadata": {"labels": {SSA_ANNOTATION: "merge"}}})),
            SsaPolicy::Merge
        );
    }
}
