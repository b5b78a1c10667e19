//! Fields a built-in kind does not declare. Flux converts every object of a kind client-go
//! knows to its Go type and back before applying (fluxcd/pkg `ssa/normalize`), so such a
//! field — a misspelled pod-spec field — is dropped instead of failing the apply. Rather than
//! a copy of the types (which would age and drop fields newer servers know), the server says
//! which fields it does not know: its server-side apply refuses them with
//! `.spec…: field not declared in schema`; those paths are read here and removed, and the
//! dry-run is asked again.
//!
//! Paths are structured-merge-diff field paths: `.name` for a field, `[k="v",n=1]` for an item
//! of an associative list, `[="v"]` for an item of a set, `[3]` for an index.

use serde_json::Value;

const NOT_DECLARED: &str = ": field not declared in schema";

/// API groups of the kinds client-go's scheme knows (Flux normalizes only those).
const BUILT_IN_GROUPS: [&str; 22] = [
    "",
    "admissionregistration.k8s.io",
    "internal.apiserver.k8s.io",
    "apps",
    "authentication.k8s.io",
    "authorization.k8s.io",
    "autoscaling",
    "batch",
    "certificates.k8s.io",
    "coordination.k8s.io",
    "discovery.k8s.io",
    "events.k8s.io",
    "extensions",
    "flowcontrol.apiserver.k8s.io",
    "networking.k8s.io",
    "node.k8s.io",
    "policy",
    "rbac.authorization.k8s.io",
    "resource.k8s.io",
    "scheduling.k8s.io",
    "storage.k8s.io",
    "storagemigration.k8s.io",
];

/// Whether Flux would normalize `object`: a kind of client-go's scheme, except Role and
/// ClusterRole, which Flux leaves as they are.
pub fn normalized_by_flux(object: &Value) -> bool {
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
    BUILT_IN_GROUPS.contains(&group)
        && !(group == "rbac.authorization.k8s.io" && matches!(kind, "Role" | "ClusterRole"))
}

/// The paths of the fields a server-side apply error says are not declared.
pub fn undeclared_paths(message: &str) -> Vec<&str> {
    let mut paths = Vec::new();
    let mut rest = message;
    while let Some(at) = rest.find(NOT_DECLARED) {
        let before = &rest[..at];
        // A path starts at its first '.', after the message's own ": " or a line break.
        let start = [before.rfind(": "), before.rfind('\n')]
            .into_iter()
            .flatten()
            .max()
            .map_or(0, |i| i + 1);
        let path = before[start..].trim();
        if path.starts_with('.') {
            paths.push(path);
        }
        rest = &rest[at + NOT_DECLARED.len()..];
    }
    paths
}

enum Step {
    Field(String),
    /// An associative-list item by its keys (values as JSON).
    Keys(Vec<(String, Value)>),
    /// A set item by its value.
    Item(Value),
    Index(usize),
}

fn steps(path: &str) -> Option<Vec<Step>> {
    let mut steps = Vec::new();
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            steps.push(Step::Field(after[..end].to_string()));
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let end = closing_bracket(after)?;
            let inside = &after[..end];
            steps.push(if let Some(value) = inside.strip_prefix('=') {
                Step::Item(serde_json::from_str(value).ok()?)
            } else if let Ok(index) = inside.parse() {
                Step::Index(index)
            } else {
                let mut keys = Vec::new();
                for pair in split_pairs(inside) {
                    let (key, value) = pair.split_once('=')?;
                    keys.push((key.to_string(), serde_json::from_str(value).ok()?));
                }
                Step::Keys(keys)
            });
            rest = &after[end + 1..];
        } else {
            return None;
        }
    }
    Some(steps)
}

/// The `]` closing a bracket, outside quoted values.
fn closing_bracket(text: &str) -> Option<usize> {
    let (mut quoted, mut escaped) = (false, false);
    for (at, c) in text.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => quoted = !quoted,
            ']' if !quoted => return Some(at),
            _ => {}
        }
    }
    None
}

fn split_pairs(text: &str) -> Vec<&str> {
    let mut pairs = Vec::new();
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    for (at, c) in text.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => quoted = !quoted,
            ',' if !quoted => {
                pairs.push(&text[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    pairs.push(&text[start..]);
    pairs
}

/// Removes the field at `path` from `object`; whether there was one.
pub fn remove_path(object: &mut Value, path: &str) -> bool {
    let Some(mut steps) = steps(path) else {
        return false;
    };
    let Some(Step::Field(last)) = steps.pop() else {
        return false;
    };
    let mut node = object;
    for step in &steps {
        let next = match (step, node) {
            (Step::Field(name), Value::Object(map)) => map.get_mut(name),
            (Step::Index(index), Value::Array(items)) => items.get_mut(*index),
            (Step::Item(value), Value::Array(items)) => items.iter_mut().find(|i| *i == value),
            (Step::Keys(keys), Value::Array(items)) => items
                .iter_mut()
                .find(|item| keys.iter().all(|(key, value)| item.get(key) == Some(value))),
            _ => None,
        };
        match next {
            Some(next) => node = next,
            None => return false,
        }
    }
    node.as_object_mut()
        .is_some_and(|map| map.remove(&last).is_some())
}

/// The path as people read it: `spec.template.spec.containers[name="app"].imagePullPolicyy`.
pub fn readable(path: &str) -> &str {
    path.strip_prefix('.').unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_servers_messages_name_the_undeclared_fields() {
        assert_eq!(
            undeclared_paths(
                "failed to create typed patch object (apps/web; apps/v1, Kind=Deployment): \
                 .spec.replica: field not declared in schema"
            ),
            [".spec.replica"]
        );
        assert_eq!(
            undeclared_paths(
                "failed to create typed patch object (apps/web; apps/v1, Kind=Deployment): errors:\n  \
                 .spec.template.spec.containers[name=\"app\"].imagePullPolicyy: field not declared in schema\n  \
                 .spec.paused: expected boolean, got &{3}\n  \
                 .metadata.colour: field not declared in schema"
            ),
            [
                ".spec.template.spec.containers[name=\"app\"].imagePullPolicyy",
                ".metadata.colour"
            ]
        );
        assert!(undeclared_paths("admission webhook denied the request").is_empty());
    }

    #[test]
    fn paths_lead_through_list_items_by_key_value_and_index() {
        let mut deployment = json!({"metadata": {"name": "web", "colour": "blue"}, "spec": {"template": {"spec": {
            "containers": [
                {"name": "sidecar", "image": "s:1"},
                {"name": "app", "image": "a:1", "imagePullPolicyy": "Always",
                 "ports": [{"containerPort": 80, "protocol": "TCP", "nam": "http"}]},
            ],
            "finalizers": ["a"],
        }}}});
        for path in [
            ".spec.template.spec.containers[name=\"app\"].imagePullPolicyy",
            ".spec.template.spec.containers[name=\"app\"].ports[containerPort=80,protocol=\"TCP\"].nam",
            ".metadata.colour",
        ] {
            assert!(remove_path(&mut deployment, path), "{path}");
        }
        assert_eq!(
            deployment,
            json!({"metadata": {"name": "web"}, "spec": {"template": {"spec": {
                "containers": [
                    {"name": "sidecar", "image": "s:1"},
                    {"name": "app", "image": "a:1", "ports": [{"containerPort": 80, "protocol": "TCP"}]},
                ],
                "finalizers": ["a"],
            }}}})
        );
        let mut indexed = json!({"items": [{"a": 1, "b": 2}]});
        assert!(remove_path(&mut indexed, ".items[0].b"));
        assert_eq!(indexed, json!({"items": [{"a": 1}]}));
        assert!(!remove_path(&mut indexed, ".items[1].a"), "no such item");
        assert!(!remove_path(&mut indexed, "items"), "not a path");
    }

    #[test]
    fn only_kinds_of_client_gos_scheme_but_roles_are_normalized() {
        for (api_version, kind, normalized) in [
            ("apps/v1", "Deployment", true),
            ("v1", "ConfigMap", true),
            ("networking.k8s.io/v1", "Ingress", true),
            ("rbac.authorization.k8s.io/v1", "ClusterRole", false),
            ("rbac.authorization.k8s.io/v1", "RoleBinding", true),
            ("apiextensions.k8s.io/v1", "CustomResourceDefinition", false),
            ("gateway.networking.k8s.io/v1", "HTTPRoute", false),
            ("example.com/v1", "Widget", false),
        ] {
            let object = json!({"apiVersion": api_version, "kind": kind});
            assert_eq!(
                normalized_by_flux(&object),
                normalized,
                "{api_version} {kind}"
            );
        }
    }
}
