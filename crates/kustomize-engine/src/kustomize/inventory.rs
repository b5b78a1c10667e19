//! The `inventory:` directive (kustomize v2.1): an extra ConfigMap recording every object
//! the build produced, for clients that prune what disappeared.
//!
//! The ConfigMap carries two annotations. `kustomize.config.k8s.io/Inventory` holds compact
//! JSON `{"current": {ID: refs|null}}`, where an ID is `group_version_kind|namespace|name`
//! (`~G`, `~V`, `~K`, `~X`, `~N` standing for empty parts) and refs lists the objects that
//! refer to it by name, as the name-reference fix-up found them.
//! `kustomize.config.k8s.io/InventoryHash` hashes the sorted IDs (a compact JSON array), so it
//! changes exactly when an object is added or removed.

use std::collections::BTreeMap;
use std::path::Path;

use crate::json;
use crate::value::{Map, Value};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::KustomizeError;
use super::hash::{go_json, kustomize_hash_encoding};
use super::resource::{ResId, Resource};

pub const CONTENT_ANNOTATION: &str = "kustomize.config.k8s.io/Inventory";
pub const HASH_ANNOTATION: &str = "kustomize.config.k8s.io/InventoryHash";

/// The `inventory:` field of a kustomization.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InventoryConfig {
    #[serde(default, rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub config_map: Option<ConfigMapName>,
}

/// Where the inventory ConfigMap goes.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigMapName {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub namespace: String,
}

/// `group_version_kind|namespace|name` with kustomize's placeholders for empty parts.
pub fn inventory_id(id: &ResId) -> String {
    let or = |s: &str, placeholder: &str| {
        if s.is_empty() {
            placeholder.to_string()
        } else {
            s.to_string()
        }
    };
    format!(
        "{}_{}_{}|{}|{}",
        or(&id.group, "~G"),
        or(&id.version, "~V"),
        or(&id.kind, "~K"),
        or(&id.namespace, "~X"),
        or(&id.name, "~N")
    )
}

/// A referrer as the inventory lists it: empty fields left out, in this field order.
fn reference(id: &ResId) -> Value {
    let mut map = Map::new();
    for (key, value) in [
        ("group", &id.group),
        ("version", &id.version),
        ("kind", &id.kind),
        ("name", &id.name),
        ("namespace", &id.namespace),
    ] {
        if !value.is_empty() {
            map.insert(key.to_string(), Value::String(value.clone()));
        }
    }
    Value::Object(map)
}

/// The hash of a set of inventory IDs.
pub fn inventory_hash<'a>(ids: impl IntoIterator<Item = &'a String>) -> String {
    let mut sorted: Vec<&String> = ids.into_iter().collect();
    sorted.sort();
    let array = Value::Array(
        sorted
            .into_iter()
            .map(|s| Value::String(s.clone()))
            .collect(),
    );
    let mut encoded = String::new();
    go_json(&array, &mut encoded);
    kustomize_hash_encoding(&Sha256::digest(encoded.as_bytes()))
}

/// The inventory ConfigMap for `resources`.
pub fn inventory_object(
    config: &InventoryConfig,
    resources: &[Resource],
    file: &Path,
) -> Result<Value, KustomizeError> {
    let invalid = |message: String| KustomizeError::InvalidKustomization {
        file: file.to_path_buf(),
        message,
    };
    if config.kind != "ConfigMap" {
        return Err(invalid(format!(
            "inventory: type {:?} is not supported (use ConfigMap)",
            config.kind
        )));
    }
    let target = config
        .config_map
        .as_ref()
        .filter(|c| !c.name.is_empty())
        .ok_or_else(|| invalid("inventory: configMap.name is required".into()))?;
    let mut current: BTreeMap<String, Value> = BTreeMap::new();
    for resource in resources {
        let id = resource.id();
        let key = inventory_id(&id);
        let refs = if resource.referred_by.is_empty() {
            Value::Null
        } else {
            Value::Array(resource.referred_by.iter().map(reference).collect())
        };
        if current.insert(key.clone(), refs).is_some() {
            return Err(invalid(format!("inventory: two objects have the ID {key}")));
        }
    }
    let hash = inventory_hash(current.keys());
    let mut content = String::new();
    go_json_ordered(&json!({ "current": current }), &mut content);
    let mut metadata = Map::new();
    metadata.insert(
        "annotations".into(),
        json!({ CONTENT_ANNOTATION: content, HASH_ANNOTATION: hash }),
    );
    metadata.insert("name".into(), json!(target.name));
    if !target.namespace.is_empty() {
        metadata.insert("namespace".into(), json!(target.namespace));
    }
    Ok(json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata }))
}

/// Go's JSON for the inventory: map keys sorted (serde_json's maps already are), reference
/// fields in struct order. `reference` builds its maps in that order; serde_json's sorted
/// maps would reorder them, so references are written field by field.
fn go_json_ordered(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) if is_reference(map) => {
            out.push('{');
            let mut first = true;
            for key in ["group", "version", "kind", "name", "namespace"] {
                if let Some(v) = map.get(key) {
                    if !first {
                        out.push(',');
                    }
                    first = false;
                    go_json(&Value::String(key.to_string()), out);
                    out.push(':');
                    go_json(v, out);
                }
            }
            out.push('}');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                go_json(&Value::String(key.clone()), out);
                out.push(':');
                go_json_ordered(item, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                go_json_ordered(item, out);
            }
            out.push(']');
        }
        other => go_json(other, out),
    }
}

fn is_reference(map: &Map) -> bool {
    map.contains_key("kind")
        && map.keys().all(|k| {
            matches!(
                k.as_str(),
                "group" | "version" | "kind" | "name" | "namespace"
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(group: &str, version: &str, kind: &str, namespace: &str, name: &str) -> ResId {
        ResId {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    #[test]
    fn ids_and_hashes_match_kustomize() {
        let ids = [
            inventory_id(&id("apps", "v1", "Deployment", "", "deploy1")),
            inventory_id(&id("", "v1", "ConfigMap", "", "cm1")),
            inventory_id(&id("", "v1", "Secret", "", "secret1")),
        ];
        assert_eq!(ids[0], "apps_v1_Deployment|~X|deploy1");
        assert_eq!(ids[1], "~G_v1_ConfigMap|~X|cm1");
        // Vectors from kustomize's inventory transformer tests and inventory document.
        assert_eq!(inventory_hash(&ids), "h44788gt7g");
        let mysql = [
            "apps_v1_Deployment|default|mysql".to_string(),
            "~G_v1_Secret|default|pass-dfg7h97cf6".to_string(),
            "~G_v1_Service|default|mysql".to_string(),
        ];
        assert_eq!(inventory_hash(&mysql), "7mgt867b75");
    }

    #[test]
    fn references_keep_go_field_order() {
        let value = json!({"current": {"x": [reference(&id("apps", "v1", "Deployment", "default", "mysql"))], "y": null}});
        let mut out = String::new();
        go_json_ordered(&value, &mut out);
        assert_eq!(
            out,
            r#"{"current":{"x":[{"group":"apps","version":"v1","kind":"Deployment","name":"mysql","namespace":"default"}],"y":null}}"#
        );
    }
}
