//! Preparing built objects for server-side apply.
//!
//! Objects are normalized the way the API server would store them, so that a dry-run
//! compares like with like: Secret `stringData` folds into `data`, `status` is dropped (except
//! on CRDs, whose status the API server owns anyway), and ports get their default `protocol`
//! (part of the list key). The owner labels and `spec.commonMetadata` are stamped on.

use base64::Engine as _;
use serde_json::{Map, Value, json};

use crate::api::CommonMetadata;
use crate::objects::{NAME_LABEL, NAMESPACE_LABEL, Owner};

pub const LAST_APPLIED_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";
/// What kubectl and older Flux versions wrote on objects, removed when they are taken over
/// (as Flux's apply cleanup does).
pub const LEGACY_ANNOTATIONS: &[&str] = &[
    LAST_APPLIED_ANNOTATION,
    "kustomize.toolkit.fluxcd.io/checksum",
    "fluxcd.io/sync-checksum",
];
pub const LEGACY_GC_LABEL: &str = "fluxcd.io/sync-gc-mark";

fn metadata_map<'a>(object: &'a mut Value, key: &str) -> &'a mut Map<String, Value> {
    if !object["metadata"][key].is_object() {
        object["metadata"][key] = json!({});
    }
    object["metadata"][key]
        .as_object_mut()
        .expect("just made an object")
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
    let group = crate::objects::api_group(api_version);
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
}
