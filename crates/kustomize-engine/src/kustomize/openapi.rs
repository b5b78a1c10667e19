//! The Kubernetes schema facts the engine needs: which kinds are cluster-scoped, and the
//! strategic-merge metadata (merge key, patch strategy, list type) of list fields.
//!
//! The built-in table is derived from the Kubernetes v1.21.2 OpenAPI document kustomize
//! embeds (`tools/gen_openapi_table.py` writes `openapi_v1_21_2.json`) and parsed once per
//! process. A kustomization's `openapi: {path: …}` replaces it or joins it for merge
//! metadata, as kyaml's one schema per build does ([`SchemaView`]).

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::value::Value;
use serde::Deserialize;

/// Merge metadata of one property of a definition.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PropertyMeta {
    /// The definition of the property's value (or of its list items).
    pub definition: Option<String>,
    pub merge_key: Option<String>,
    pub strategy: Option<String>,
    /// `x-kubernetes-list-map-keys`: the keys that together identify a list element.
    pub list_map_keys: Vec<String>,
    /// `x-kubernetes-list-type`: `atomic`, `set` or `map`.
    pub list_type: Option<String>,
}

/// A schema: kinds with their root definitions and scope, and definitions' properties.
#[derive(Clone, Debug, Default)]
pub struct Openapi {
    /// (apiVersion, kind) → (root definition, namespaced?) where known.
    kinds: HashMap<(String, String), (Option<String>, Option<bool>)>,
    definitions: HashMap<String, HashMap<String, PropertyMeta>>,
}

/// A property as the generator writes it: referenced definition, merge key, strategy, list
/// type and list map keys.
type TableProperty = (
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<Vec<String>>,
);

#[derive(Deserialize)]
struct Table {
    kinds: Vec<(String, String, Option<String>, Option<String>)>,
    definitions: HashMap<String, HashMap<String, TableProperty>>,
}

impl Openapi {
    /// The Kubernetes v1.21.2 schema kustomize embeds.
    pub fn builtin() -> &'static Openapi {
        static BUILTIN: OnceLock<Openapi> = OnceLock::new();
        BUILTIN.get_or_init(|| {
            let table: Table = serde_json::from_str(include_str!("openapi_v1_21_2.json"))
                .expect("openapi_v1_21_2.json matches its generator");
            let kinds = table
                .kinds
                .into_iter()
                .map(|(api_version, kind, definition, scope)| {
                    let namespaced = scope.map(|s| s == "Namespaced");
                    ((api_version, kind), (definition, namespaced))
                })
                .collect();
            let definitions = table
                .definitions
                .into_iter()
                .map(|(name, props)| {
                    let props = props
                        .into_iter()
                        .map(
                            |(
                                prop,
                                (definition, merge_key, strategy, list_type, list_map_keys),
                            )| {
                                (
                                    prop,
                                    PropertyMeta {
                                        definition,
                                        merge_key,
                                        strategy,
                                        list_map_keys: list_map_keys.unwrap_or_default(),
                                        list_type,
                                    },
                                )
                            },
                        )
                        .collect();
                    (name, props)
                })
                .collect();
            Openapi { kinds, definitions }
        })
    }

    /// A schema from a swagger-style document (`definitions` with `x-kubernetes-*`
    /// extensions), as a kustomization's `openapi:` field names.
    pub fn from_document(document: &Value) -> Openapi {
        let mut schema = Openapi::default();
        let Some(definitions) = document.get("definitions").and_then(Value::as_object) else {
            return schema;
        };
        for (name, definition) in definitions {
            if let Some(gvks) = definition
                .get("x-kubernetes-group-version-kind")
                .and_then(Value::as_array)
            {
                for gvk in gvks {
                    let text =
                        |k: &str| gvk.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                    let (group, version, kind) = (text("group"), text("version"), text("kind"));
                    let api_version = if group.is_empty() {
                        version
                    } else {
                        format!("{group}/{version}")
                    };
                    schema
                        .kinds
                        .insert((api_version, kind), (Some(name.clone()), None));
                }
            }
            schema.add_definition(name, definition, 0);
        }
        schema
    }

    /// Records a definition's properties; inline object schemas (properties, or items with
    /// properties, written in place instead of through `$ref`) become definitions named
    /// after their path so merge metadata below them is found too.
    fn add_definition(&mut self, name: &str, definition: &Value, depth: usize) {
        if depth > 32 {
            return;
        }
        let mut props = HashMap::new();
        if let Some(properties) = definition.get("properties").and_then(Value::as_object) {
            for (prop, spec) in properties {
                let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
                let reference =
                    text(spec.get("$ref")).or_else(|| text(spec.pointer("/items/$ref")));
                let mut nested =
                    reference.map(|r| r.trim_start_matches("#/definitions/").to_string());
                if nested.is_none() {
                    let inline = if spec.get("properties").is_some() {
                        Some(spec)
                    } else {
                        spec.get("items")
                            .filter(|items| items.get("properties").is_some())
                    };
                    if let Some(inline) = inline {
                        let inline_name = format!("{name}/{prop}");
                        self.add_definition(&inline_name, inline, depth + 1);
                        nested = Some(inline_name);
                    }
                }
                props.insert(
                    prop.clone(),
                    PropertyMeta {
                        definition: nested,
                        merge_key: text(spec.get("x-kubernetes-patch-merge-key")),
                        strategy: text(spec.get("x-kubernetes-patch-strategy")),
                        list_type: text(spec.get("x-kubernetes-list-type")),
                        list_map_keys: spec
                            .get("x-kubernetes-list-map-keys")
                            .and_then(Value::as_array)
                            .map(|keys| {
                                keys.iter()
                                    .filter_map(Value::as_str)
                                    .map(str::to_string)
                                    .collect()
                            })
                            .unwrap_or_default(),
                    },
                );
            }
        }
        self.definitions.insert(name.to_string(), props);
    }
}

impl Openapi {
    /// Whether the built-in schema knows the scope of `apiVersion`/`kind`: kyaml's
    /// precomputed table, consulted without reading the schema itself.
    pub fn builtin_knows_scope(api_version: &str, kind: &str) -> bool {
        let key = (api_version.to_string(), kind.to_string());
        Openapi::builtin()
            .kinds
            .get(&key)
            .is_some_and(|(_, namespaced)| namespaced.is_some())
    }
}

/// The schema a build looks kinds up in: the built-in one, and a kustomization's custom one.
///
/// kyaml keeps one schema per build, read when first needed. A custom schema set before
/// kyaml has read the built-in one (the top kustomization's always is: it is set before
/// anything is read) replaces it for merge metadata: a Deployment's containers have no merge
/// key under a schema that does not define Deployment (`replaces_builtin`). One set after
/// (a base's or component's, once a resource of a kind outside kyaml's precomputed table
/// was read or a patch merged) joins the built-in definitions and is looked up first. Whether a kind is cluster-scoped is looked up in the built-in kinds first (kyaml's
/// precomputed table), then in the custom schema.
#[derive(Clone, Copy, Debug)]
pub struct SchemaView<'a> {
    pub custom: Option<&'a Openapi>,
    pub replaces_builtin: bool,
}

impl<'a> SchemaView<'a> {
    /// The built-in schema alone.
    pub fn builtin() -> SchemaView<'static> {
        SchemaView {
            custom: None,
            replaces_builtin: false,
        }
    }

    /// Where merge metadata comes from, first to last.
    fn merge_layers(self) -> impl Iterator<Item = &'a Openapi> {
        let builtin = (self.custom.is_none() || !self.replaces_builtin).then(Openapi::builtin);
        self.custom.into_iter().chain(builtin)
    }

    /// Whether the schema knows `apiVersion`/`kind` to be cluster-scoped; unknown kinds are
    /// treated as namespaced, as kustomize does.
    pub fn is_cluster_scoped(self, api_version: &str, kind: &str) -> bool {
        let key = (api_version.to_string(), kind.to_string());
        std::iter::once(Openapi::builtin())
            .chain(self.custom)
            .find_map(|s| s.kinds.get(&key).and_then(|(_, namespaced)| *namespaced))
            .is_some_and(|namespaced| !namespaced)
    }

    /// The root definition of a kind.
    pub fn root(self, api_version: &str, kind: &str) -> Option<&'a str> {
        let key = (api_version.to_string(), kind.to_string());
        self.merge_layers()
            .find_map(|s| s.kinds.get(&key).and_then(|(d, _)| d.as_deref()))
    }

    /// Merge metadata of `property` in `definition`.
    pub fn property(self, definition: &str, property: &str) -> Option<&'a PropertyMeta> {
        self.merge_layers()
            .find_map(|s| s.definitions.get(definition)?.get(property))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_scopes_and_merge_keys() {
        let view = SchemaView::builtin();
        assert!(view.is_cluster_scoped("rbac.authorization.k8s.io/v1", "ClusterRole"));
        assert!(view.is_cluster_scoped("v1", "Namespace"));
        assert!(!view.is_cluster_scoped("apps/v1", "Deployment"));
        assert!(
            !view.is_cluster_scoped("example.com/v1", "Widget"),
            "unknown kinds are namespaced"
        );
        let pod_spec = view
            .property("io.k8s.api.core.v1.PodTemplateSpec", "spec")
            .unwrap();
        let containers = view
            .property(pod_spec.definition.as_deref().unwrap(), "containers")
            .unwrap();
        assert_eq!(containers.merge_key.as_deref(), Some("name"));
        assert_eq!(
            view.root("apps/v1", "Deployment"),
            Some("io.k8s.api.apps.v1.Deployment")
        );
    }
}
