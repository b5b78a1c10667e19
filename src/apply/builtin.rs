//! Built-in kinds as Flux applies them. fluxcd/pkg `ssa/normalize` converts every object of a
//! kind client-go knows to its Go type and back before applying, so fields the type does not
//! declare (a misspelled pod-spec field, a field of a newer release) are dropped rather than
//! refused by server-side apply. This does the same from the kinds' OpenAPI definitions
//! (`kubernetes-openapi.json`, derived by `tools/gen_reference_fixtures.py`), and says which
//! fields it dropped so the controller can tell the user — Flux drops them silently.
//!
//! Role and ClusterRole are left as they are, as Flux leaves them; kinds without a definition
//! here (custom resources, built-in kinds outside the table) go to the server unchanged.

use std::sync::LazyLock;

use serde_json::{Map, Value};

struct Definitions {
    kinds: Map<String, Value>,
    definitions: Map<String, Value>,
}

static OPENAPI: LazyLock<Definitions> = LazyLock::new(|| {
    let text = include_str!("kubernetes-openapi.json");
    let mut document: Value = serde_json::from_str(text).unwrap_or_default();
    let mut take = |key: &str| match document.get_mut(key).map(Value::take) {
        Some(Value::Object(map)) => map,
        _ => Map::new(),
    };
    Definitions {
        kinds: take("kinds"),
        definitions: take("definitions"),
    }
});

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
/// Flux's normalization leaves these as they are.
const LEFT_AS_IS: [&str; 2] = [
    "rbac.authorization.k8s.io/v1/Role",
    "rbac.authorization.k8s.io/v1/ClusterRole",
];

/// Drops from `object` the fields its built-in kind does not declare; the paths of what was
/// dropped (`spec.template.spec.containers[0].imagePullPolicyy`).
pub fn drop_undeclared_fields(object: &mut Value) -> Vec<String> {
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
    let key = format!("{api_version}/{kind}");
    if LEFT_AS_IS.contains(&key.as_str()) {
        return Vec::new();
    }
    let Some(definition) = OPENAPI
        .kinds
        .get(&key)
        .and_then(Value::as_str)
        .and_then(|name| OPENAPI.definitions.get(name))
    else {
        return Vec::new();
    };
    let mut dropped = Vec::new();
    let Value::Object(fields) = object else {
        return dropped;
    };
    let properties = definition.get("properties").and_then(Value::as_object);
    for (name, value) in fields.iter_mut() {
        let schema = match name.as_str() {
            "apiVersion" | "kind" | "status" => continue,
            "metadata" => OPENAPI.definitions.get(OBJECT_META),
            _ => properties.and_then(|p| p.get(name)),
        };
        if let Some(schema) = schema {
            prune(value, schema, name, &mut dropped);
        }
    }
    let undeclared: Vec<String> = fields
        .keys()
        .filter(|name| {
            !matches!(name.as_str(), "apiVersion" | "kind" | "metadata" | "status")
                && properties.is_none_or(|p| !p.contains_key(*name))
        })
        .cloned()
        .collect();
    for name in undeclared {
        fields.remove(&name);
        dropped.push(name);
    }
    dropped
}

/// The definition a schema node stands for.
fn resolved(schema: &Value) -> &Value {
    let mut schema = schema;
    while let Some(name) = schema
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/definitions/"))
    {
        match OPENAPI.definitions.get(name) {
            Some(definition) => schema = definition,
            None => break,
        }
    }
    schema
}

fn prune(value: &mut Value, schema: &Value, path: &str, dropped: &mut Vec<String>) {
    let schema = resolved(schema);
    match value {
        Value::Object(fields) => {
            if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                let undeclared: Vec<String> = fields
                    .keys()
                    .filter(|name| !properties.contains_key(*name))
                    .cloned()
                    .collect();
                for name in undeclared {
                    fields.remove(&name);
                    dropped.push(format!("{path}.{name}"));
                }
                for (name, field) in fields.iter_mut() {
                    if let Some(field_schema) = properties.get(name) {
                        prune(field, field_schema, &format!("{path}.{name}"), dropped);
                    }
                }
            } else if let Some(values) =
                schema.get("additionalProperties").filter(|v| v.is_object())
            {
                for (name, field) in fields.iter_mut() {
                    prune(field, values, &format!("{path}.{name}"), dropped);
                }
            }
            // Otherwise free-form (RawExtension, JSON): anything goes.
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (index, item) in items.iter_mut().enumerate() {
                    prune(item, item_schema, &format!("{path}[{index}]"), dropped);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn undeclared_fields_of_built_in_kinds_are_dropped_and_named() {
        let mut deployment = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app": "web"}, "colour": "blue"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "web"}},
                "strategyy": {"type": "Recreate"},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [
                        {"name": "app", "image": "app:1", "imagePullPolicyy": "Always",
                         "ports": [{"containerPort": 80, "protocoll": "TCP"}],
                         "resources": {"limits": {"cpu": "1"}}},
                    ]},
                },
            },
            "extra": true,
            "status": {"replicas": 2},
        });
        let dropped = drop_undeclared_fields(&mut deployment);
        assert_eq!(
            dropped,
            [
                "metadata.colour",
                "spec.strategyy",
                "spec.template.spec.containers[0].imagePullPolicyy",
                "spec.template.spec.containers[0].ports[0].protocoll",
                "extra",
            ]
        );
        assert_eq!(
            deployment["spec"]["template"]["spec"]["containers"][0],
            json!({"name": "app", "image": "app:1", "ports": [{"containerPort": 80}],
                "resources": {"limits": {"cpu": "1"}}})
        );
        assert_eq!(
            deployment["metadata"],
            json!({"name": "web", "labels": {"app": "web"}})
        );
    }

    #[test]
    fn roles_custom_resources_and_free_form_fields_are_left_as_they_are() {
        for object in [
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": "r"}, "rules": [{"verbs": ["get"], "extra": 1}]}),
            json!({"apiVersion": "example.com/v1", "kind": "Widget",
                "metadata": {"name": "w"}, "spec": {"anything": 1}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "c", "annotations": {"a": "b"}}, "data": {"k": "v"}}),
        ] {
            let mut changed = object.clone();
            assert!(drop_undeclared_fields(&mut changed).is_empty(), "{object}");
            assert_eq!(changed, object);
        }
    }
}
