//! Label and annotation values kustomize holds as one YAML node in several fields.
//!
//! kustomize's label and annotation transformers make one node per key and resource, and put
//! that very node into every field they create in that pass: `metadata.labels.app`, the
//! selector's and the template's `app`. A later write *into* one of those fields — another
//! labels entry, a strategic merge patch, a replacement — changes the node, so every field
//! holding it changes with it: an overlay relabelling a Deployment's `metadata.labels.app`
//! that its base's `commonLabels` created rewrites the selector too. A field created again
//! later is a node of its own, and a JSON patch rebuilds the whole object from JSON, which
//! ends all sharing.
//!
//! A resource keeps, for each shared node, the paths of the fields holding it ([`Aliases`]).
//! The label and annotation transformers record them as they create fields and pass what
//! they write into one on to the others ([`Aliases::written`]); a strategic merge patch or a
//! replacement's write is compared before and after ([`Aliases::before_write`],
//! [`Aliases::after_write`]).

use std::cmp::Ordering;

use thin_vec::ThinVec;

use crate::value::Value;

/// A step of a field's path while a walk is on it: a key, or a position in a list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place<'a> {
    Key(&'a str),
    Index(usize),
}

/// A step of a kept field path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    Key(Box<str>),
    Index(usize),
}

impl Step {
    fn of(place: &Place<'_>) -> Step {
        match *place {
            Place::Key(key) => Step::Key(key.into()),
            Place::Index(position) => Step::Index(position),
        }
    }
}

/// The path of a field: the steps to its map, then its key.
pub fn field_path(map_path: &[Place<'_>], key: &str) -> Vec<Step> {
    map_path
        .iter()
        .map(Step::of)
        .chain(std::iter::once(Step::Key(key.into())))
        .collect()
}

/// The fields of a resource that hold one shared node, one group per node.
#[derive(Clone, Debug, Default)]
pub struct Aliases {
    groups: ThinVec<Vec<Vec<Step>>>,
}

impl Aliases {
    /// Records that the fields at `paths`, just created, hold one node. A created field is a
    /// node of its own, whatever group its path was in before.
    pub fn created(&mut self, paths: Vec<Vec<Step>>) {
        for path in &paths {
            self.forget(path);
        }
        if paths.len() > 1 {
            self.groups.push(paths);
        }
    }

    /// Whether no fields share a node.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// The field at `path` was written into: the fields sharing its node take its value.
    pub fn written(&self, object: &mut Value, path: &[Step]) {
        let Some(group) = self.group_of(path) else {
            return;
        };
        let Some(value) = get(object, path).cloned() else {
            return;
        };
        for other in group.iter().filter(|other| other.as_slice() != path) {
            if let Some(field) = get_mut(object, other) {
                *field = value.clone();
            }
        }
    }

    /// The values of the shared fields, to compare after a write ([`Aliases::after_write`]).
    pub fn before_write(&self, object: &Value) -> Vec<Vec<Option<Value>>> {
        self.groups
            .iter()
            .map(|group| {
                group
                    .iter()
                    .map(|path| get(object, path).cloned())
                    .collect()
            })
            .collect()
    }

    /// After a strategic merge patch (which kyaml applies by writing the patch's values into
    /// the fields it names, walking keys in sorted order) or a replacement's write: in each
    /// group, the value of the last field written into is every field's. A field removed,
    /// made anew where there was none, or under a map the write `renewed` (a patch's `$patch:
    /// replace` puts the patch's own nodes there) leaves its group.
    pub fn after_write(
        &mut self,
        object: &mut Value,
        before: Vec<Vec<Option<Value>>>,
        renewed: &[Vec<Step>],
    ) {
        for (group, before) in self.groups.iter_mut().zip(before) {
            let mut kept = Vec::with_capacity(group.len());
            let mut last_written: Option<Vec<Step>> = None;
            for (path, old) in std::mem::take(group).into_iter().zip(before) {
                let (Some(old), Some(now)) = (old, get(object, &path)) else {
                    continue;
                };
                if renewed.iter().any(|map| path.starts_with(map)) {
                    continue;
                }
                if *now != old
                    && last_written
                        .as_ref()
                        .is_none_or(|last| walk_order(&path, last).is_gt())
                {
                    last_written = Some(path.clone());
                }
                kept.push(path);
            }
            if let Some(value) = last_written.and_then(|path| get(object, &path).cloned()) {
                for path in &kept {
                    if let Some(field) = get_mut(object, path) {
                        *field = value.clone();
                    }
                }
            }
            *group = kept;
        }
        self.groups.retain(|group| group.len() > 1);
    }

    /// The object was rebuilt (a JSON patch): no field shares a node any more.
    pub fn clear(&mut self) {
        self.groups = ThinVec::new();
    }

    fn group_of(&self, path: &[Step]) -> Option<&Vec<Vec<Step>>> {
        self.groups
            .iter()
            .find(|group| group.iter().any(|member| member.as_slice() == path))
    }

    fn forget(&mut self, path: &[Step]) {
        if self.groups.is_empty() {
            return;
        }
        for group in self.groups.iter_mut() {
            group.retain(|member| member.as_slice() != path);
        }
        self.groups.retain(|group| group.len() > 1);
    }
}

/// The maps a strategic merge patch replaces whole (`$patch: replace`), through maps only.
pub fn replaced_maps(patch: &Value) -> Vec<Vec<Step>> {
    fn walk(value: &Value, path: &mut Vec<Step>, found: &mut Vec<Vec<Step>>) {
        let Value::Object(map) = value else {
            return;
        };
        if map.get("$patch").and_then(Value::as_str) == Some("replace") {
            found.push(path.clone());
            return;
        }
        for (key, child) in map.iter() {
            path.push(Step::Key(key.as_str().into()));
            walk(child, path, found);
            path.pop();
        }
    }
    let mut found = Vec::new();
    walk(patch, &mut Vec::new(), &mut found);
    found
}

/// kyaml's walk order: keys sorted as strings at each level, list elements in order.
fn walk_order(a: &[Step], b: &[Step]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        let order = match (x, y) {
            (Step::Key(x), Step::Key(y)) => x.cmp(y),
            (Step::Index(x), Step::Index(y)) => x.cmp(y),
            (Step::Key(_), Step::Index(_)) => Ordering::Less,
            (Step::Index(_), Step::Key(_)) => Ordering::Greater,
        };
        if order != Ordering::Equal {
            return order;
        }
    }
    a.len().cmp(&b.len())
}

fn get<'v>(mut value: &'v Value, path: &[Step]) -> Option<&'v Value> {
    for step in path {
        value = match (step, value) {
            (Step::Key(key), Value::Object(map)) => map.get(&**key)?,
            (Step::Index(position), Value::Array(items)) => items.get(*position)?,
            _ => return None,
        };
    }
    Some(value)
}

fn get_mut<'v>(mut value: &'v mut Value, path: &[Step]) -> Option<&'v mut Value> {
    for step in path {
        value = match (step, value) {
            (Step::Key(key), Value::Object(map)) => map.get_mut(&**key)?,
            (Step::Index(position), Value::Array(items)) => items.get_mut(*position)?,
            _ => return None,
        };
    }
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json;

    fn path(text: &str) -> Vec<Step> {
        text.split('/')
            .map(|part| match part.parse() {
                Ok(position) => Step::Index(position),
                Err(_) => Step::Key(part.into()),
            })
            .collect()
    }

    #[test]
    fn a_write_into_a_shared_field_reaches_the_others() {
        let mut object = json!({"metadata": {"labels": {"app": "a"}},
            "spec": {"selector": {"app": "a"}, "template": {"labels": {"app": "a"}}}});
        let mut aliases = Aliases::default();
        aliases.created(vec![path("metadata/labels/app"), path("spec/selector/app")]);
        object["metadata"]["labels"]["app"] = json!("b");
        aliases.written(&mut object, &path("metadata/labels/app"));
        assert_eq!(object["spec"]["selector"]["app"], json!("b"));
        assert_eq!(
            object["spec"]["template"]["labels"]["app"],
            json!("a"),
            "not shared"
        );

        // Created again, the selector's field is a node of its own.
        aliases.created(vec![path("spec/selector/app")]);
        object["metadata"]["labels"]["app"] = json!("c");
        aliases.written(&mut object, &path("metadata/labels/app"));
        assert_eq!(object["spec"]["selector"]["app"], json!("b"));
    }

    #[test]
    fn after_a_patch_the_last_field_written_in_walk_order_wins() {
        let mut object = json!({"metadata": {"labels": {"app": "a"}},
            "spec": {"selector": {"app": "a"}, "template": {"labels": {"app": "a"}}}});
        let mut aliases = Aliases::default();
        let members = [
            "metadata/labels/app",
            "spec/selector/app",
            "spec/template/labels/app",
        ];
        aliases.created(members.iter().map(|m| path(m)).collect());
        let before = aliases.before_write(&object);
        object["metadata"]["labels"]["app"] = json!("m");
        object["spec"]["selector"]["app"] = json!("s");
        aliases.after_write(&mut object, before, &[]);
        for member in members {
            assert_eq!(get(&object, &path(member)), Some(&json!("s")), "{member}");
        }

        // A removed field leaves the group; the others stay shared.
        let before = aliases.before_write(&object);
        object["spec"]["selector"]
            .as_object_mut()
            .unwrap()
            .remove("app");
        aliases.after_write(&mut object, before, &[]);
        object["metadata"]["labels"]["app"] = json!("z");
        aliases.written(&mut object, &path("metadata/labels/app"));
        assert_eq!(object["spec"]["template"]["labels"]["app"], json!("z"));
        assert_eq!(object["spec"]["selector"].get("app"), None);
    }
}
