//! What the server knows of a kind's fields. Built-in kinds are described by Kubernetes'
//! OpenAPI definitions (`tests/fixtures/reference/kubernetes-openapi.json`, derived from the
//! v1.21.2 document by `tools/gen_reference_fixtures.py`), custom resources by their CRD's
//! structural schema; `metadata` is `ObjectMeta` for both.
//!
//! A `Schema` is a cursor into either. It answers which fields a body sets that the schema
//! does not declare (kube-apiserver drops them with a warning on create and update, refuses
//! them under `fieldValidation=Strict` and always refuses them in server-side apply), prunes
//! them, and tells how a list merges (associative by key, set, atomic) for managed fields and
//! strategic merge patch.

use std::sync::LazyLock;

use serde_json::{Map, Value, json};

use super::resources::ResourceType;

struct Openapi {
    kinds: Map<String, Value>,
    definitions: Map<String, Value>,
}

static OPENAPI: LazyLock<Openapi> = LazyLock::new(|| {
    let text = include_str!("../../../tests/fixtures/reference/kubernetes-openapi.json");
    let mut document: Value = serde_json::from_str(text).expect("the OpenAPI fixture is JSON");
    let mut take = |key: &str| match document[key].take() {
        Value::Object(map) => map,
        _ => panic!("the OpenAPI fixture has no {key}"),
    };
    Openapi {
        kinds: take("kinds"),
        definitions: take("definitions"),
    }
});

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Origin {
    /// Kubernetes' OpenAPI: `$ref`s into its definitions; an object without properties is
    /// free-form (`RawExtension`, `JSON`).
    Builtin,
    /// A CRD's structural schema: an object without properties keeps no fields unless it
    /// preserves unknown fields.
    Custom,
}

/// A position in a kind's schema.
#[derive(Clone, Copy, Debug)]
pub struct Schema<'a> {
    node: &'a Value,
    origin: Origin,
    /// The object's top level, where `apiVersion`, `kind` and `metadata` are always known.
    root: bool,
}

/// What a schema says of a field of an object.
pub enum Field<'a> {
    Declared(Schema<'a>),
    /// Anything goes below it (preserved unknown fields, free-form objects).
    Free,
    NotDeclared,
}

/// How a list merges.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListShape {
    Keyed(Vec<String>),
    Set,
    Atomic,
}

/// A field the schema does not declare, named as the two error formats name it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownField {
    /// `spec.template.spec.containers[0].colour`, as strict decoding and warnings say.
    pub json_path: String,
    /// `.spec.template.spec.containers[name="web"].colour`, as server-side apply says.
    pub typed_path: String,
}

fn builtin(name: &str) -> Option<Schema<'static>> {
    OPENAPI.definitions.get(name).map(|node| Schema {
        node,
        origin: Origin::Builtin,
        root: false,
    })
}

impl<'a> Schema<'a> {
    /// The schema of a resource type's objects, if the server has one.
    pub fn of(rt: &'a ResourceType) -> Option<Schema<'a>> {
        let root = match &rt.custom {
            Some(custom) => Schema {
                node: custom.schema.as_ref()?,
                origin: Origin::Custom,
                root: true,
            },
            None => {
                let key = format!("{}/{}", rt.api_version(), rt.kind);
                let name = OPENAPI.kinds.get(&key)?.as_str()?;
                Schema {
                    root: true,
                    ..builtin(name)?
                }
            }
        };
        Some(root)
    }

    /// A CRD version's structural schema (`openAPIV3Schema`).
    pub fn custom(node: &'a Value) -> Schema<'a> {
        Schema {
            node,
            origin: Origin::Custom,
            root: true,
        }
    }

    fn resolved(self) -> Schema<'a> {
        let mut current = self;
        while let Some(name) = current.node.get("$ref").and_then(Value::as_str) {
            let name = name.rsplit('/').next().unwrap_or(name);
            match OPENAPI.definitions.get(name) {
                Some(node) => current.node = node,
                None => break,
            }
        }
        current
    }

    fn flag(self, name: &str) -> bool {
        self.node.get(name) == Some(&json!(true))
    }

    fn child(self, node: &'a Value) -> Schema<'a> {
        Schema {
            node,
            origin: self.origin,
            root: false,
        }
    }

    /// What the schema says of `key` in an object at this position.
    pub fn field(self, key: &str) -> Field<'a> {
        let this = self.resolved();
        let envelope = this.root
            || (this.origin == Origin::Custom && this.flag("x-kubernetes-embedded-resource"));
        if envelope {
            match key {
                "apiVersion" | "kind" => return Field::Free,
                "metadata" => return builtin(OBJECT_META).map_or(Field::Free, Field::Declared),
                _ => {}
            }
        }
        let properties = this.node.get("properties").and_then(Value::as_object);
        if let Some(property) = properties.and_then(|p| p.get(key)) {
            return Field::Declared(this.child(property));
        }
        match this.node.get("additionalProperties") {
            Some(Value::Bool(true)) => return Field::Free,
            Some(schema @ Value::Object(_)) => return Field::Declared(this.child(schema)),
            _ => {}
        }
        let free = match this.origin {
            Origin::Custom => this.flag("x-kubernetes-preserve-unknown-fields"),
            Origin::Builtin => properties.is_none(),
        };
        if free {
            Field::Free
        } else {
            Field::NotDeclared
        }
    }

    /// The schema of a list's items.
    pub fn items(self) -> Option<Schema<'a>> {
        let this = self.resolved();
        this.node.get("items").map(|items| this.child(items))
    }

    /// How the list at this position merges: the list type and keys the schema declares, or
    /// a patch merge key with the `merge` strategy (Kubernetes' older marker for the same).
    pub fn list_shape(self) -> ListShape {
        let text = |name: &str| self.node.get(name).and_then(Value::as_str);
        let list_type = text("x-kubernetes-list-type");
        let merge_key = text("x-kubernetes-patch-merge-key");
        let keys: Vec<String> = self
            .node
            .get("x-kubernetes-list-map-keys")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|k| k.as_str().map(str::to_string))
            .collect();
        let merge_strategy = text("x-kubernetes-patch-strategy")
            .is_some_and(|s| s.split(',').any(|part| part == "merge"));
        match list_type {
            Some("atomic") => ListShape::Atomic,
            Some("set") => ListShape::Set,
            Some("map") if !keys.is_empty() => ListShape::Keyed(keys),
            _ if merge_key.is_some() && (merge_strategy || list_type == Some("map")) => {
                ListShape::Keyed(vec![merge_key.unwrap_or_default().to_string()])
            }
            _ if merge_strategy => ListShape::Set,
            _ => ListShape::Atomic,
        }
    }

    /// How a strategic merge patch treats the list here: merged by its patch merge key,
    /// merged as a set of values, or replaced (`None`).
    pub fn patch_merge(self) -> Option<Option<&'a str>> {
        let merge = self
            .node
            .get("x-kubernetes-patch-strategy")
            .and_then(Value::as_str)
            .is_some_and(|s| s.split(',').any(|part| part == "merge"));
        merge.then(|| {
            self.node
                .get("x-kubernetes-patch-merge-key")
                .and_then(Value::as_str)
        })
    }

    /// Whether a null may stay at this position.
    fn nullable(self) -> bool {
        self.flag("nullable")
    }
}

/// Every field `value` sets that `schema` does not declare, in document order.
pub fn unknown_fields(schema: Schema, value: &Value) -> Vec<UnknownField> {
    let mut walk = Walk {
        check_types: false,
        ..Walk::default()
    };
    walk.visit(schema, value);
    walk.found
        .into_iter()
        .map(|problem| problem.field)
        .collect()
}

/// What server-side apply's typed conversion finds wrong in an applied configuration, in
/// document order, named as structured-merge-diff names them: fields the schema does not
/// declare and values of the wrong type (`.spec.size: expected numeric (int or float), got
/// string`). Nulls pass: they are judged later, by validation.
pub fn typed_problems(schema: Schema, value: &Value) -> Vec<String> {
    let mut walk = Walk {
        check_types: true,
        ..Walk::default()
    };
    walk.visit(schema, value);
    walk.found
        .into_iter()
        .map(|problem| format!("{}: {}", problem.field.typed_path, problem.message))
        .collect()
}

/// A problem at a field, with structured-merge-diff's words for it.
struct Problem {
    field: UnknownField,
    message: String,
}

/// A walk of a value beside its schema, naming each position both ways.
#[derive(Default)]
struct Walk {
    check_types: bool,
    json_path: String,
    typed_path: String,
    found: Vec<Problem>,
}

impl Walk {
    fn report(&mut self, message: String) {
        self.found.push(Problem {
            field: UnknownField {
                json_path: self.json_path.clone(),
                typed_path: self.typed_path.clone(),
            },
            message,
        });
    }

    fn visit(&mut self, schema: Schema, value: &Value) {
        if self.check_types
            && let Some(problem) = type_problem(schema, value)
        {
            self.report(problem);
            return;
        }
        let (json_len, typed_len) = (self.json_path.len(), self.typed_path.len());
        match value {
            Value::Object(map) => {
                for (key, child) in map {
                    if !self.json_path.is_empty() {
                        self.json_path.push('.');
                    }
                    self.json_path.push_str(key);
                    self.typed_path.push('.');
                    self.typed_path.push_str(key);
                    match schema.field(key) {
                        Field::Declared(child_schema) => self.visit(child_schema, child),
                        Field::Free => {}
                        Field::NotDeclared => self.report("field not declared in schema".into()),
                    }
                    self.json_path.truncate(json_len);
                    self.typed_path.truncate(typed_len);
                }
            }
            Value::Array(items) => {
                let Some(item_schema) = schema.items() else {
                    return;
                };
                let shape = schema.list_shape();
                for (index, item) in items.iter().enumerate() {
                    self.json_path.push_str(&format!("[{index}]"));
                    self.typed_path
                        .push_str(&typed_element(&shape, index, item));
                    self.visit(item_schema, item);
                    self.json_path.truncate(json_len);
                    self.typed_path.truncate(typed_len);
                }
            }
            _ => {}
        }
    }
}

/// The scalar, list or map structured-merge-diff expects here, if the value is not one.
fn type_problem(schema: Schema, value: &Value) -> Option<String> {
    if value.is_null() || schema.root {
        return None;
    }
    // Kinds defined by reference to a string (Quantity, IntOrString, Time) are untyped
    // scalars to structured-merge-diff: `cpu: 1` is as good as `cpu: "1"`.
    let referenced = schema.node.get("$ref").is_some();
    let this = schema.resolved();
    let text = |name: &str| this.node.get(name).and_then(Value::as_str);
    if this.flag("x-kubernetes-int-or-string") || text("format") == Some("int-or-string") {
        return None;
    }
    let expected = match text("type") {
        Some("object") => "map",
        None if this.node.get("properties").is_some() => "map",
        Some("array") => "list",
        Some("string") if !referenced => "string",
        Some("integer" | "number") => "numeric",
        Some("boolean") => "boolean",
        _ => return None,
    };
    let problem = match (expected, value) {
        ("map", Value::Object(_))
        | ("list", Value::Array(_))
        | ("string", Value::String(_))
        | ("numeric", Value::Number(_))
        | ("boolean", Value::Bool(_)) => return None,
        ("string", other) => format!(
            "expected string, got &value.valueUnstructured{{Value:{}}}",
            go_syntax(other)
        ),
        ("numeric", other) => format!("expected numeric (int or float), got {}", go_type(other)),
        (expected, other) => format!("expected {expected}, got &{{{}}}", go_value(other)),
    };
    Some(problem)
}

/// A decoded JSON value as Go's `%v` prints it.
fn go_value(value: &Value) -> String {
    match value {
        Value::Null => "<nil>".into(),
        Value::String(text) => text.clone(),
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(go_value).collect();
            format!("[{}]", parts.join(" "))
        }
        Value::Object(map) => {
            let parts: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{k}:{}", go_value(v)))
                .collect();
            format!("map[{}]", parts.join(" "))
        }
        other => other.to_string(),
    }
}

/// A decoded JSON value as Go's `%#v` prints it.
fn go_syntax(value: &Value) -> String {
    match value {
        Value::Null => "interface {}(nil)".into(),
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(go_syntax).collect();
            format!("[]interface {{}}{{{}}}", parts.join(", "))
        }
        Value::Object(map) => {
            let parts: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{}:{}", Value::from(k.as_str()), go_syntax(v)))
                .collect();
            format!("map[string]interface {{}}{{{}}}", parts.join(", "))
        }
        other => other.to_string(),
    }
}

/// The Go type a decoded JSON value has.
fn go_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float64",
        Value::Number(_) => "int64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// How structured-merge-diff names a list element: by its keys, by its value, or by index.
fn typed_element(shape: &ListShape, index: usize, item: &Value) -> String {
    match shape {
        ListShape::Keyed(keys) => {
            let parts: Vec<String> = keys
                .iter()
                .filter_map(|key| item.get(key).map(|value| format!("{key}={value}")))
                .collect();
            format!("[{}]", parts.join(","))
        }
        ListShape::Set => format!("[={item}]"),
        ListShape::Atomic => format!("[{index}]"),
    }
}

/// What pruning does with a null the schema does not allow.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Nulls {
    /// Dropped, as decoding a request body drops them (create, update, patch).
    Drop,
    /// Kept for validation to refuse: a custom resource's server-side apply result is not
    /// decoded again, so a non-nullable null in the applied configuration is invalid (422).
    Keep,
}

/// Drops undeclared fields, and nulls where the schema does not allow them (unless `nulls`
/// keeps them), as the server does before it stores an object.
pub fn prune(schema: Schema, value: &mut Value, nulls: Nulls) {
    match value {
        Value::Object(map) => {
            map.retain(|key, child| match schema.field(key) {
                Field::Declared(child_schema) => {
                    !child.is_null() || child_schema.nullable() || nulls == Nulls::Keep
                }
                Field::Free => true,
                Field::NotDeclared => false,
            });
            for (key, child) in map.iter_mut() {
                if let Field::Declared(child_schema) = schema.field(key) {
                    prune(child_schema, child, nulls);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.items() {
                for item in items {
                    prune(item_schema, item, nulls);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::super::resources::builtins;
    use super::*;

    fn deployment() -> ResourceType {
        builtins()
            .into_iter()
            .find(|rt| rt.kind == "Deployment")
            .expect("Deployment is served")
    }

    #[test]
    fn deployments_are_checked_against_kubernetes_openapi() {
        let rt = deployment();
        let schema = Schema::of(&rt).expect("Deployment has a schema");
        let object = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "colour": "red"},
        "spec": {"replicas": 1, "replica": 2, "template": {"spec": {"containers": [
            {"name": "web", "image": "nginx", "imagePullPolicy": "Always", "colour": "x"}
        ]}}}});
        let unknown = unknown_fields(schema, &object);
        let json_paths: Vec<&str> = unknown.iter().map(|u| u.json_path.as_str()).collect();
        assert_eq!(
            json_paths,
            [
                "metadata.colour",
                "spec.replica",
                "spec.template.spec.containers[0].colour"
            ]
        );
        assert_eq!(
            unknown[2].typed_path,
            ".spec.template.spec.containers[name=\"web\"].colour"
        );
        let mut pruned = object.clone();
        prune(schema, &mut pruned, Nulls::Drop);
        assert!(unknown_fields(schema, &pruned).is_empty());
        assert_eq!(pruned["spec"]["replicas"], json!(1));
    }

    #[test]
    fn merge_metadata_comes_from_the_schema() {
        let rt = deployment();
        let schema = Schema::of(&rt).expect("Deployment has a schema");
        let Field::Declared(spec) = schema.field("spec") else {
            panic!("spec is declared")
        };
        let Field::Declared(template) = spec.field("template") else {
            panic!("template is declared")
        };
        let Field::Declared(pod) = template.field("spec") else {
            panic!("template.spec is declared")
        };
        let Field::Declared(containers) = pod.field("containers") else {
            panic!("containers are declared")
        };
        assert_eq!(
            containers.list_shape(),
            ListShape::Keyed(vec!["name".into()])
        );
        let Field::Declared(args) = containers.items().unwrap().field("args") else {
            panic!("args are declared")
        };
        assert_eq!(args.list_shape(), ListShape::Atomic);
    }

    #[test]
    fn custom_resources_keep_declared_and_preserved_fields() {
        let crd_schema = json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {"a": {"type": "string"},
                "maybe": {"type": "string", "nullable": true}}},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "closed": {"type": "object"},
        }});
        let schema = Schema {
            node: &crd_schema,
            origin: Origin::Custom,
            root: true,
        };
        let mut object = json!({"apiVersion": "x/v1", "kind": "K",
            "metadata": {"name": "n", "junk": 1},
            "spec": {"a": "1", "b": 2, "maybe": null, "a2": null}, "free": {"any": 1},
            "closed": {"x": 1}, "junk": true});
        let unknown: Vec<String> = unknown_fields(schema, &object)
            .into_iter()
            .map(|u| u.typed_path)
            .collect();
        assert_eq!(
            unknown,
            [
                ".closed.x",
                ".junk",
                ".metadata.junk",
                ".spec.a2",
                ".spec.b"
            ]
        );
        prune(schema, &mut object, Nulls::Drop);
        assert_eq!(
            object,
            json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "n"},
            "spec": {"a": "1", "maybe": null}, "free": {"any": 1}, "closed": {}})
        );
    }

    #[test]
    fn free_form_fields_keep_whatever_they_hold() {
        let rt = builtins()
            .into_iter()
            .find(|rt| rt.kind == "CustomResourceDefinition")
            .unwrap();
        let schema = Schema::of(&rt).unwrap();
        let crd = json!({"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": {
            "type": "object", "properties": {"spec": {"default": {"any": [1]}}}}}}]}});
        assert!(unknown_fields(schema, &crd).is_empty());
    }
}
