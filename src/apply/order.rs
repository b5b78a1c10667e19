//! The order objects are applied in: stages that must exist before the rest can be served
//! (CRDs, Namespaces and ClusterRoles; then `…Class` kinds; then `--custom-apply-stage-kinds`;
//! then everything else), and within a stage Flux's kind order with webhooks last.

use serde_json::Value;

use crate::objects::kind_rank;

/// One apply stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    /// CRDs, Namespaces, ClusterRoles: applied, then waited for.
    Definitions,
    /// Kinds named `…Class`: applied, then waited for.
    Classes,
    /// `--custom-apply-stage-kinds`.
    Custom,
    Rest,
}

fn kind_of(object: &Value) -> &str {
    object.get("kind").and_then(Value::as_str).unwrap_or("")
}

fn group_of(object: &Value) -> &str {
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    api_version.split_once('/').map(|(g, _)| g).unwrap_or("")
}

/// The stage of an object; `custom_kinds` are `Kind` or `Kind.group` entries.
pub fn stage_of(object: &Value, custom_kinds: &[String]) -> Stage {
    let kind = kind_of(object);
    let group = group_of(object);
    let custom = custom_kinds
        .iter()
        .any(|entry| match entry.split_once('.') {
            Some((k, g)) => k.eq_ignore_ascii_case(kind) && g.eq_ignore_ascii_case(group),
            None => entry.eq_ignore_ascii_case(kind),
        });
    match kind {
        "CustomResourceDefinition" | "Namespace" | "ClusterRole" => Stage::Definitions,
        _ if kind.ends_with("Class") => Stage::Classes,
        _ if custom => Stage::Custom,
        _ => Stage::Rest,
    }
}

/// Splits objects into stages, each sorted by kind (stable within a kind).
pub fn stages(objects: Vec<Value>, custom_kinds: &[String]) -> Vec<(Stage, Vec<Value>)> {
    let mut staged: Vec<(Stage, Vec<Value>)> = Vec::new();
    for object in objects {
        let stage = stage_of(&object, custom_kinds);
        match staged.iter_mut().find(|(s, _)| *s == stage) {
            Some((_, list)) => list.push(object),
            None => staged.push((stage, vec![object])),
        }
    }
    staged.sort_by_key(|(stage, _)| *stage);
    for (_, list) in staged.iter_mut() {
        list.sort_by_key(|o| kind_rank(kind_of(o)));
    }
    staged
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(api_version: &str, kind: &str) -> Value {
        json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": kind.to_lowercase()}})
    }

    #[test]
    fn stages_and_kind_order() {
        let objects = vec![
            object(
                "admissionregistration.k8s.io/v1",
                "ValidatingWebhookConfiguration",
            ),
            object("example.com/v1", "Widget"),
            object("apps/v1", "Deployment"),
            object("v1", "ConfigMap"),
            object("networking.k8s.io/v1", "IngressClass"),
            object("v1", "Namespace"),
            object("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
            object("rbac.authorization.k8s.io/v1", "ClusterRole"),
            object("cert-manager.io/v1", "Issuer"),
        ];
        let staged = stages(objects, &["Issuer.cert-manager.io".to_string()]);
        let kinds: Vec<(Stage, Vec<&str>)> = staged
            .iter()
            .map(|(s, list)| (*s, list.iter().map(kind_of).collect()))
            .collect();
        assert_eq!(
            kinds,
            vec![
                (
                    Stage::Definitions,
                    vec!["CustomResourceDefinition", "Namespace", "ClusterRole"]
                ),
                (Stage::Classes, vec!["IngressClass"]),
                (Stage::Custom, vec!["Issuer"]),
                (
                    Stage::Rest,
                    vec![
                        "ConfigMap",
                        "Deployment",
                        "Widget",
                        "ValidatingWebhookConfiguration"
                    ]
                ),
            ]
        );
    }
}
