//! The order objects are applied in: stages that must exist before the rest can be served
//! (CRDs, Namespaces and ClusterRoles; then `…Class` kinds; then `--custom-apply-stage-kinds`;
//! then everything else), and within a stage ssa's order: kinds in Flux's order with webhooks
//! last, then by group, kind, namespace and name.

use serde_json::Value;

use crate::objects::apply_order;

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
    crate::objects::api_group(api_version)
}

/// Whether an object is in a `--custom-apply-stage-kinds` entry: Flux's `group/Kind`, or a
/// bare `Kind` for the core group, matched exactly (as fluxcd/pkg/ssa's `ParseGroupKindSet`).
fn in_custom_stage(kind: &str, group: &str, custom_kinds: &[String]) -> bool {
    custom_kinds
        .iter()
        .any(|entry| group_kind(entry) == (group, kind))
}

/// One `--custom-apply-stage-kinds` entry (the flag is split at commas) as (group, Kind).
fn group_kind(entry: &str) -> (&str, &str) {
    let entry = entry.trim();
    entry.split_once('/').unwrap_or(("", entry))
}

/// The stage of an object, by fluxcd/pkg/ssa's rules: CRDs (`apiextensions.k8s.io`),
/// Namespaces (`v1`) and ClusterRoles (`rbac.authorization.k8s.io`) first, any kind ending in
/// `Class` next, then the custom stage kinds (`group/Kind`), then the rest.
pub fn stage_of(object: &Value, custom_kinds: &[String]) -> Stage {
    let kind = kind_of(object);
    let group = group_of(object);
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let lower = kind.to_ascii_lowercase();
    let definition = (lower == "customresourcedefinition"
        && api_version.starts_with("apiextensions.k8s.io/"))
        || (lower == "namespace" && api_version == "v1")
        || (lower == "clusterrole" && api_version.starts_with("rbac.authorization.k8s.io/"));
    if definition {
        Stage::Definitions
    } else if kind.ends_with("Class") {
        Stage::Classes
    } else if in_custom_stage(kind, group, custom_kinds) {
        Stage::Custom
    } else {
        Stage::Rest
    }
}

/// Splits objects into stages, each in ssa's order.
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
        list.sort_by(|a, b| order_of(a).cmp(&order_of(b)));
    }
    staged
}

/// Where an object comes in ssa's order ([`apply_order`]); no allocation, as a sort asks it
/// for every comparison.
fn order_of(object: &Value) -> (usize, &str, &str, &str, &str) {
    let metadata = |field: &str| {
        object
            .get("metadata")
            .and_then(|metadata| metadata.get(field))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    apply_order(
        kind_of(object),
        group_of(object),
        metadata("namespace"),
        metadata("name"),
    )
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
            object("v1", "ServiceAccount"),
        ];
        let staged = stages(
            objects,
            &[
                "cert-manager.io/Issuer".to_string(),
                "ServiceAccount".to_string(),
            ],
        );
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
                (Stage::Custom, vec!["ServiceAccount", "Issuer"]),
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

    /// ssa v0.76.1's `ReconcileOrder` and its tie-breaks: ClusterRoleBinding before
    /// ServiceAccount, kinds it does not list (PersistentVolumeClaim, Endpoints) with the
    /// unknown ones by group and kind, and one kind by namespace and name whatever the build's
    /// order.
    #[test]
    fn objects_come_in_ssas_order() {
        let named = |api_version: &str, kind: &str, namespace: &str, name: &str| {
            json!({"apiVersion": api_version, "kind": kind,
                "metadata": {"name": name, "namespace": namespace}})
        };
        let objects = vec![
            named("v1", "PersistentVolumeClaim", "apps", "data"),
            named("apps/v1", "Deployment", "apps", "web"),
            named("v1", "ConfigMap", "b", "settings"),
            named("v1", "ConfigMap", "a", "z"),
            named("v1", "ConfigMap", "a", "b"),
            named("example.com/v1", "Widget", "apps", "w"),
            named("v1", "Endpoints", "apps", "web"),
            named("v1", "ServiceAccount", "apps", "web"),
            named(
                "rbac.authorization.k8s.io/v1",
                "ClusterRoleBinding",
                "",
                "web",
            ),
        ];
        let order: Vec<String> = stages(objects, &[])
            .into_iter()
            .flat_map(|(_, list)| list)
            .map(|o| {
                format!(
                    "{}/{}/{}",
                    kind_of(&o),
                    o["metadata"]["namespace"].as_str().unwrap_or(""),
                    o["metadata"]["name"].as_str().unwrap_or("")
                )
            })
            .collect();
        assert_eq!(
            order,
            [
                "ClusterRoleBinding//web",
                "ServiceAccount/apps/web",
                "ConfigMap/a/b",
                "ConfigMap/a/z",
                "ConfigMap/b/settings",
                "Deployment/apps/web",
                "Endpoints/apps/web",
                "PersistentVolumeClaim/apps/data",
                "Widget/apps/w",
            ]
        );
    }

    #[test]
    fn custom_stage_kinds_are_flux_group_kinds_matched_exactly() {
        let custom = ["cert-manager.io/Issuer".to_string(), " Secret".to_string()];
        let stage = |api_version: &str, kind: &str| stage_of(&object(api_version, kind), &custom);
        assert_eq!(stage("cert-manager.io/v1", "Issuer"), Stage::Custom);
        assert_eq!(
            stage("v1", "Secret"),
            Stage::Custom,
            "a bare Kind is the core group"
        );
        assert_eq!(
            stage("example.com/v1", "Issuer"),
            Stage::Rest,
            "another group"
        );
        assert_eq!(
            stage("cert-manager.io/v1", "issuer"),
            Stage::Rest,
            "kinds are case-sensitive"
        );
        let old_form = ["Issuer.cert-manager.io".to_string()];
        assert_eq!(
            stage_of(&object("cert-manager.io/v1", "Issuer"), &old_form),
            Stage::Rest,
            "Kind.group is not Flux's form"
        );
    }

    /// fluxcd/pkg `ssa/utils` `TestParseGroupKindSet`, row by row: the flag's value, split
    /// at commas as the command line splits it, and the (group, Kind) set it names.
    #[test]
    fn flux_parse_group_kind_set() {
        let rows: &[(&str, &[(&str, &str)])] = &[
            ("", &[]),
            ("Secret", &[("", "Secret")]),
            ("apps/Deployment", &[("apps", "Deployment")]),
            (
                "apps/Deployment,batch/Job",
                &[("apps", "Deployment"), ("batch", "Job")],
            ),
            (
                "Secret,apps/Deployment,ConfigMap",
                &[("", "Secret"), ("apps", "Deployment"), ("", "ConfigMap")],
            ),
            (
                " Secret , apps/Deployment ",
                &[("", "Secret"), ("apps", "Deployment")],
            ),
            (
                "gateway.networking.k8s.io/Gateway",
                &[("gateway.networking.k8s.io", "Gateway")],
            ),
        ];
        for (flag, expected) in rows {
            let parsed: std::collections::BTreeSet<(&str, &str)> = flag
                .split(',')
                .map(group_kind)
                .filter(|(_, kind)| !kind.is_empty())
                .collect();
            let expected: std::collections::BTreeSet<(&str, &str)> =
                expected.iter().copied().collect();
            assert_eq!(parsed, expected, "{flag:?}");
        }
    }

    #[test]
    fn definitions_need_their_api_group_as_in_flux() {
        assert_eq!(
            stage_of(&object("example.com/v1", "Namespace"), &[]),
            Stage::Rest
        );
        assert_eq!(
            stage_of(&object("example.com/v1", "ClusterRole"), &[]),
            Stage::Rest
        );
        assert_eq!(
            stage_of(&object("example.com/v1", "CustomResourceDefinition"), &[]),
            Stage::Rest
        );
        assert_eq!(
            stage_of(
                &object("apiextensions.k8s.io/v1beta1", "CustomResourceDefinition"),
                &[]
            ),
            Stage::Definitions
        );
    }
}
