//! Field sets as server-side apply tracks them (`fieldsV1`), and the schema-aware walks that
//! derive them from objects, merge applied configurations and remove fields.
//!
//! A set is a tree keyed by fieldsV1 path elements: `f:<field>`, `k:<json key fields>` for
//! items of associative lists, `v:<json>` for items of set lists and `i:<index>` where a list
//! item has no key. A node that is itself a member carries `member` (written `.` when it also
//! has children). The shape of lists (associative by key, set, atomic) comes from the merge
//! metadata of the kind's schema, as the real server takes it from its OpenAPI models.

use std::collections::BTreeMap;

use super::schema::{Field, ListShape, Schema};
use serde_json::{Map, Value, json};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSet {
    pub member: bool,
    pub children: BTreeMap<String, FieldSet>,
}

impl FieldSet {
    pub fn leaf() -> FieldSet {
        FieldSet {
            member: true,
            children: BTreeMap::new(),
        }
    }

    pub fn is_empty(&self) -> bool {
        !self.member && self.children.values().all(FieldSet::is_empty)
    }

    pub fn from_fields_v1(value: &Value) -> FieldSet {
        let mut set = FieldSet::default();
        if let Some(map) = value.as_object() {
            for (key, child) in map {
                if key == "." {
                    set.member = true;
                } else {
                    let mut child_set = FieldSet::from_fields_v1(child);
                    if child.as_object().is_some_and(Map::is_empty) {
                        child_set.member = true;
                    }
                    set.children.insert(key.clone(), child_set);
                }
            }
        }
        set
    }

    pub fn to_fields_v1(&self) -> Value {
        let mut map = Map::new();
        if self.member && !self.children.is_empty() {
            map.insert(".".into(), json!({}));
        }
        for (key, child) in &self.children {
            if !child.is_empty() {
                map.insert(key.clone(), child.to_fields_v1());
            }
        }
        Value::Object(map)
    }

    pub fn union(&mut self, other: &FieldSet) {
        self.member |= other.member;
        for (key, child) in &other.children {
            self.children.entry(key.clone()).or_default().union(child);
        }
    }

    /// Members of `self` that are not members of `other`.
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let mut result = FieldSet {
            member: self.member && !other.member,
            children: BTreeMap::new(),
        };
        for (key, child) in &self.children {
            let rest = match other.children.get(key) {
                Some(o) => child.difference(o),
                None => child.clone(),
            };
            if !rest.is_empty() {
                result.children.insert(key.clone(), rest);
            }
        }
        result
    }

    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let mut result = FieldSet {
            member: self.member && other.member,
            children: BTreeMap::new(),
        };
        for (key, child) in &self.children {
            if let Some(o) = other.children.get(key) {
                let both = child.intersection(o);
                if !both.is_empty() {
                    result.children.insert(key.clone(), both);
                }
            }
        }
        result
    }

    /// Every member path, parents before children.
    pub fn members(&self) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        self.collect_members(&mut Vec::new(), &mut out);
        out
    }

    fn collect_members(&self, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        if self.member && !prefix.is_empty() {
            out.push(prefix.clone());
        }
        for (key, child) in &self.children {
            prefix.push(key.clone());
            child.collect_members(prefix, out);
            prefix.pop();
        }
    }

    pub fn contains(&self, path: &[String]) -> bool {
        match path.split_first() {
            None => self.member,
            Some((head, rest)) => self.children.get(head).is_some_and(|c| c.contains(rest)),
        }
    }

    pub fn insert(&mut self, path: &[String]) {
        match path.split_first() {
            None => self.member = true,
            Some((head, rest)) => self.children.entry(head.clone()).or_default().insert(rest),
        }
    }

    pub fn remove(&mut self, path: &[String]) {
        match path.split_first() {
            None => self.member = false,
            Some((head, rest)) => {
                if let Some(child) = self.children.get_mut(head) {
                    child.remove(rest);
                    if child.is_empty() {
                        self.children.remove(head);
                    }
                }
            }
        }
    }
}

/// `.spec.containers[name="web"].image`, as conflict messages print a path.
pub fn display_path(path: &[String]) -> String {
    let mut out = String::new();
    for element in path {
        if let Some(field) = element.strip_prefix("f:") {
            out.push('.');
            out.push_str(field);
        } else if let Some(key) = element.strip_prefix("k:") {
            let fields: Map<String, Value> = serde_json::from_str(key).unwrap_or_default();
            let inner: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
            out.push_str(&format!("[{}]", inner.join(",")));
        } else if let Some(value) = element.strip_prefix("v:") {
            out.push_str(&format!("[={value}]"));
        } else if let Some(index) = element.strip_prefix("i:") {
            out.push_str(&format!("[{index}]"));
        }
    }
    out
}

/// Properties whose maps are granular `map[string]…` rather than structs; the real server
/// records the map itself as a member (`.`) beside its keys.
const MAP_TYPED: &[&str] = &[
    "labels",
    "annotations",
    "data",
    "binaryData",
    "stringData",
    "matchLabels",
    "nodeSelector",
    "limits",
    "requests",
];

/// Where a value sits in a kind's schema (nowhere known: every list is atomic).
#[derive(Clone, Copy)]
pub struct Shape<'a>(Option<Schema<'a>>);

impl<'a> Shape<'a> {
    pub fn root(schema: Option<Schema<'a>>) -> Shape<'a> {
        Shape(schema)
    }

    fn child(self, key: &str) -> Shape<'a> {
        Shape(self.0.and_then(|schema| match schema.field(key) {
            Field::Declared(child) => Some(child),
            Field::Free | Field::NotDeclared => None,
        }))
    }

    fn items(self) -> Shape<'a> {
        Shape(self.0.and_then(Schema::items))
    }

    fn list_shape(self) -> ListShape {
        self.0.map_or(ListShape::Atomic, Schema::list_shape)
    }
}

fn item_key(item: &Value, keys: &[String]) -> Option<String> {
    let mut fields = Map::new();
    for key in keys {
        if let Some(v) = item.get(key) {
            fields.insert(key.clone(), v.clone());
        }
    }
    if fields.is_empty() {
        return None;
    }
    Some(format!("k:{}", Value::Object(fields)))
}

/// Whose field set is being derived: an applied configuration owns only leaves, list items
/// and atomic values, while an ordinary write also owns the maps it created (`.`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Owner {
    Apply,
    Update,
}

/// The fields an object sets.
pub fn fields_of(object: &Value, shape: Shape, owner: Owner) -> FieldSet {
    walk(object, shape, "", owner)
}

fn walk(value: &Value, shape: Shape, name: &str, owner: Owner) -> FieldSet {
    match value {
        Value::Object(map) => {
            let mut set = FieldSet {
                member: owner == Owner::Update && (map.is_empty() || MAP_TYPED.contains(&name)),
                children: BTreeMap::new(),
            };
            for (key, child) in map {
                set.children.insert(
                    format!("f:{key}"),
                    walk(child, shape.child(key), key, owner),
                );
            }
            set
        }
        Value::Array(items) => match shape.list_shape() {
            ListShape::Atomic => FieldSet::leaf(),
            ListShape::Set => {
                let mut set = FieldSet::default();
                for item in items {
                    set.children.insert(format!("v:{item}"), FieldSet::leaf());
                }
                if items.is_empty() {
                    set.member = true;
                }
                set
            }
            ListShape::Keyed(keys) => {
                let mut set = FieldSet::default();
                for (index, item) in items.iter().enumerate() {
                    let element = item_key(item, &keys).unwrap_or_else(|| format!("i:{index}"));
                    let mut child = walk(item, shape.items(), "", owner);
                    child.member = true;
                    set.children.insert(element, child);
                }
                if items.is_empty() {
                    set.member = true;
                }
                set
            }
        },
        _ => FieldSet::leaf(),
    }
}

/// The value at a fieldsV1 path.
pub fn value_at<'v>(value: &'v Value, path: &[String]) -> Option<&'v Value> {
    let Some((head, rest)) = path.split_first() else {
        return Some(value);
    };
    let next = if let Some(field) = head.strip_prefix("f:") {
        value.get(field)?
    } else if let Some(key) = head.strip_prefix("k:") {
        let fields: Map<String, Value> = serde_json::from_str(key).ok()?;
        value
            .as_array()?
            .iter()
            .find(|item| fields.iter().all(|(k, v)| item.get(k) == Some(v)))?
    } else if let Some(text) = head.strip_prefix("v:") {
        let wanted: Value = serde_json::from_str(text).ok()?;
        value.as_array()?.iter().find(|item| **item == wanted)?
    } else if let Some(index) = head.strip_prefix("i:") {
        value.as_array()?.get(index.parse::<usize>().ok()?)?
    } else {
        return None;
    };
    value_at(next, rest)
}

/// Merges an applied configuration into the live object: maps key by key, associative lists
/// item by key, set lists as a union, everything else replaced.
pub fn merge(live: &mut Value, config: &Value, shape: Shape) {
    match (live, config) {
        (Value::Object(live_map), Value::Object(config_map)) => {
            for (key, config_child) in config_map {
                match live_map.get_mut(key) {
                    Some(live_child) if !config_child.is_null() => {
                        merge(live_child, config_child, shape.child(key))
                    }
                    _ => {
                        live_map.insert(key.clone(), config_child.clone());
                    }
                }
            }
        }
        (Value::Array(live_items), Value::Array(config_items)) => match shape.list_shape() {
            ListShape::Atomic => *live_items = config_items.clone(),
            ListShape::Set => {
                for item in config_items {
                    if !live_items.contains(item) {
                        live_items.push(item.clone());
                    }
                }
            }
            ListShape::Keyed(keys) => {
                for item in config_items {
                    let key = item_key(item, &keys);
                    let existing = key.as_ref().and_then(|key| {
                        live_items
                            .iter_mut()
                            .find(|live| item_key(live, &keys).as_ref() == Some(key))
                    });
                    match existing {
                        Some(live) => merge(live, item, shape.items()),
                        None => live_items.push(item.clone()),
                    }
                }
            }
        },
        (live, config) => *live = config.clone(),
    }
}

/// Removes every member of `set` from `value`. A member element goes as a whole unless
/// `kept` (what other managers own) holds something below it; then only the removed
/// fields inside it go, as the real server adds back owned items.
pub fn remove_fields(value: &mut Value, set: &FieldSet, kept: &FieldSet) {
    for (element, child) in &set.children {
        let kept_below = kept.children.get(element);
        if child.member && kept_below.is_none_or(FieldSet::is_empty) {
            remove_element(value, element);
        } else if let Some(inner) = element_mut(value, element) {
            let empty = FieldSet::default();
            remove_fields(inner, child, kept_below.unwrap_or(&empty));
        }
    }
}

fn element_mut<'v>(value: &'v mut Value, element: &str) -> Option<&'v mut Value> {
    if let Some(field) = element.strip_prefix("f:") {
        return value.get_mut(field);
    }
    let path = [element.to_string()];
    let target = value_at(value, &path)?.clone();
    value
        .as_array_mut()?
        .iter_mut()
        .find(|item| **item == target)
}

fn remove_element(value: &mut Value, element: &str) {
    if let Some(field) = element.strip_prefix("f:") {
        if let Some(map) = value.as_object_mut() {
            map.remove(field);
        }
        return;
    }
    let path = [element.to_string()];
    if let Some(target) = value_at(value, &path).cloned()
        && let Some(items) = value.as_array_mut()
    {
        items.retain(|item| *item != target);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape() -> Shape<'static> {
        static DEPLOYMENT: std::sync::LazyLock<super::super::resources::ResourceType> =
            std::sync::LazyLock::new(|| {
                super::super::resources::builtins()
                    .into_iter()
                    .find(|rt| rt.kind == "Deployment")
                    .expect("Deployment is served")
            });
        Shape::root(Schema::of(&DEPLOYMENT))
    }

    #[test]
    fn deployment_fields_use_container_names_as_keys() {
        let deployment = json!({"spec": {"replicas": 2, "template": {"spec": {"containers": [
            {"name": "web", "image": "nginx", "ports": [{"containerPort": 80, "protocol": "TCP"}]}
        ]}}}, "metadata": {"labels": {"app": "web"}}});
        let fields = fields_of(&deployment, shape(), Owner::Update).to_fields_v1();
        let container =
            &fields["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"web\"}"];
        assert_eq!(container["."], json!({}));
        assert_eq!(container["f:image"], json!({}));
        assert!(
            container["f:ports"]
                .get("k:{\"containerPort\":80,\"protocol\":\"TCP\"}")
                .is_some(),
            "{container}"
        );
        assert_eq!(fields["f:metadata"]["f:labels"]["."], json!({}));
        let round_trip = FieldSet::from_fields_v1(&fields).to_fields_v1();
        assert_eq!(round_trip, fields);
    }

    #[test]
    fn merge_keeps_unmentioned_items_and_replaces_atomic_lists() {
        let mut live = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "a", "image": "a:1", "args": ["x"]}, {"name": "b", "image": "b:1"}
        ]}}}});
        let config = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "b", "image": "b:2"}, {"name": "a", "args": ["y"]}
        ]}}}});
        merge(&mut live, &config, shape());
        assert_eq!(
            live["spec"]["template"]["spec"]["containers"],
            json!([{"name": "a", "image": "a:1", "args": ["y"]}, {"name": "b", "image": "b:2"}])
        );
    }

    #[test]
    fn remove_drops_list_items_and_fields() {
        let mut live =
            json!({"metadata": {"finalizers": ["a", "b"]}, "data": {"x": "1", "y": "2"}});
        let mut set = FieldSet::default();
        set.insert(&["f:data".into(), "f:x".into()]);
        remove_fields(&mut live, &set, &FieldSet::default());
        assert_eq!(live["data"], json!({"y": "2"}));
        assert_eq!(
            display_path(&[
                "f:spec".into(),
                "k:{\"name\":\"web\"}".into(),
                "f:image".into()
            ]),
            ".spec[name=\"web\"].image"
        );
    }
}
