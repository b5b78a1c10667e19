//! Field specs: which field, in which kinds, a transformer touches; and walking objects to it.
//!
//! A path is slash-separated (`spec/template/spec/containers/image`, `\/` escapes a slash in
//! a key). A segment that lands on a list visits every element, as kustomize does, so
//! `containers/image` reaches each container's image; `[]` says the same explicitly. With
//! `create`, missing maps along the way are made, and the visitor is handed the map and the
//! key of a missing leaf so it can decide what to create. What kustomize's fieldspec filter
//! refuses on the way (a scalar, an empty name, a list step in a mapping) is refused here in
//! its words, each list walked through named.

use crate::value::{Map, Value};
use std::borrow::Cow;

use super::kustfile::FieldSpec;
use super::resource::{Gvk, ResId};

impl FieldSpec {
    /// Whether the spec applies to objects of `id`'s group, version and kind (an empty part
    /// matches anything).
    pub fn applies_to(&self, id: &ResId) -> bool {
        self.applies_to_gvk(Gvk {
            group: &id.group,
            version: &id.version,
            kind: &id.kind,
        })
    }

    pub fn applies_to_gvk(&self, gvk: Gvk) -> bool {
        (self.kind.is_empty() || self.kind == gvk.kind)
            && (self.group.is_empty() || self.group == gvk.group)
            && (self.version.is_empty() || self.version == gvk.version)
    }
}

/// Splits a field-spec path into keys, honouring `\/` escapes; `[]` suffixes are kept for
/// [`visit_leaves`]. Keys borrow from `path` unless an escape had to be removed (this runs for
/// every resource and field spec of every transformer).
pub fn split_path(path: &str) -> Vec<Cow<'_, str>> {
    // As kyaml's PathSplitter: one leading `/` allowed, other empty names kept (the walk
    // refuses them, as kustomize does).
    let path = path.strip_prefix('/').unwrap_or(path);
    if !path.contains('\\') {
        return path.split('/').map(Cow::Borrowed).collect();
    }
    let mut segments = Vec::new();
    let mut current = String::new();
    let mut chars = path.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'/') => {
                current.push('/');
                chars.next();
            }
            '/' => segments.push(std::mem::take(&mut current)),
            _ => current.push(c),
        }
    }
    segments.push(current);
    segments.into_iter().map(Cow::Owned).collect()
}

/// A path segment's field name, and whether the path marks it as a list (`containers[]`).
fn field_of(segment: &str) -> (&str, bool) {
    match segment.strip_suffix("[]") {
        Some(name) => (name, true),
        None => (segment, false),
    }
}

/// Called with the map holding a leaf and the leaf's key.
pub type LeafVisitor<'v, E> = dyn FnMut(&mut Map, &str) -> Result<(), E> + 'v;

/// A [`LeafVisitor`] that is also told where the leaf's map is: the keys and list positions
/// from the walked value down to it.
pub type PlacedLeafVisitor<'v, E> =
    dyn FnMut(&mut Map, &str, &[super::aliases::Place<'_>]) -> Result<(), E> + 'v;

/// What kustomize's fieldspec filter refuses on the way: a scalar before the path's end
/// (`spec: "oops"` for `spec/selector`, or a scalar element of a list the path goes
/// through), or an empty field name.
#[derive(Debug)]
pub struct PathRefused {
    cause: Cow<'static, str>,
    /// The rest of the path at each list the walk went through to the scalar, innermost
    /// first, as kustomize's fieldspec filter names them (`[env valueFrom name]`).
    lists: Vec<String>,
    met_a_collection: bool,
}

impl PathRefused {
    fn new(cause: impl Into<Cow<'static, str>>) -> PathRefused {
        PathRefused {
            cause: cause.into(),
            lists: Vec::new(),
            met_a_collection: false,
        }
    }

    /// Whether this is kyaml's node-kind error on a mapping or a list (which kustomize's
    /// namespace filter words differently).
    pub fn met_a_collection(&self) -> bool {
        self.met_a_collection
    }
}

/// kustomize's words: each list traversed, outermost first, then the refusal.
impl std::fmt::Display for PathRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&traversal(&self.lists))?;
        f.write_str(&self.cause)
    }
}

/// What kyaml's lookup of the field `name` in a mapping refuses: it reads a number, `-`,
/// `*` and `[..]` as steps into a list (kustomize looks each field up that way); and
/// whether that is a node-kind error.
fn lookup_refusal(name: &str) -> Option<(String, bool)> {
    match super::path_step::Step::parse(name) {
        Ok(super::path_step::Step::Field(_)) => None,
        Ok(_) => Some((
            "wrong node kind: expected SequenceNode but got MappingNode".into(),
            true,
        )),
        Err(refusal) => Some((refusal, false)),
    }
}

/// `visit traversal on path: [..]: ` for each list (given innermost first), outermost
/// first: how kustomize prefixes whatever failed inside a list a path goes through.
fn traversal(lists: &[String]) -> String {
    lists
        .iter()
        .rev()
        .map(|list| format!("visit traversal on path: {list}: "))
        .collect()
}

/// An error of a walk's visitor, which kustomize prefixes with the lists the walk went
/// through to the failing leaf.
pub trait Traversed: From<PathRefused> {
    /// This error, met after `prefix` (the lists' words, outermost first).
    fn traversed(self, prefix: &str) -> Self;
}

impl Traversed for PathRefused {
    fn traversed(self, _: &str) -> Self {
        self
    }
}

/// Calls `visit` with every value at `segments` below `value`. `visit` receives the parent
/// map and the final key, so it can read, replace or create the leaf. Lists met on the way
/// are traversed element by element. Missing intermediate maps are created when `create`.
/// A scalar met before the end of the path (a field's value or a list's element) is a
/// [`PathRefused`] error, as in kustomize; a null ends that branch of the walk.
pub fn visit_leaves<E: Traversed>(
    value: &mut Value,
    segments: &[Cow<'_, str>],
    create: bool,
    visit: &mut LeafVisitor<'_, E>,
) -> Result<(), E> {
    visit_placed_leaves(value, segments, create, &mut |map, key, _| visit(map, key))
}

/// [`visit_leaves`], telling `visit` where each leaf's map is.
pub fn visit_placed_leaves<E: Traversed>(
    value: &mut Value,
    segments: &[Cow<'_, str>],
    create: bool,
    visit: &mut PlacedLeafVisitor<'_, E>,
) -> Result<(), E> {
    walk(value, segments, create, &mut Vec::new(), visit).map_err(|stop| match stop {
        Stop::Refused(scalar) => scalar.into(),
        Stop::Visitor(error, lists) if lists.is_empty() => error,
        Stop::Visitor(error, lists) => error.traversed(&traversal(&lists)),
    })
}

/// Why a walk stopped, with the rest of the path at each list it went through (innermost
/// first).
enum Stop<E> {
    Refused(PathRefused),
    Visitor(E, Vec<String>),
}

fn walk<'s, E>(
    value: &mut Value,
    segments: &'s [Cow<'s, str>],
    create: bool,
    path: &mut Vec<super::aliases::Place<'s>>,
    visit: &mut PlacedLeafVisitor<'_, E>,
) -> Result<(), Stop<E>> {
    match value {
        Value::Array(items) => {
            for (position, item) in items.iter_mut().enumerate() {
                path.push(super::aliases::Place::Index(position));
                let walked = walk(item, segments, create, path, visit);
                path.pop();
                walked.map_err(|stop| {
                    let list = format!("[{}]", segments.join(" "));
                    match stop {
                        Stop::Refused(mut scalar) => {
                            scalar.lists.push(list);
                            Stop::Refused(scalar)
                        }
                        Stop::Visitor(error, mut lists) => {
                            lists.push(list);
                            Stop::Visitor(error, lists)
                        }
                    }
                })?;
            }
            Ok(())
        }
        Value::Object(map) => {
            let Some((first, rest)) = segments.split_first() else {
                return Ok(());
            };
            let (first, is_list) = field_of(first.as_ref());
            if first.is_empty() {
                return Err(Stop::Refused(PathRefused::new(
                    "cannot set or create an empty field name",
                )));
            }
            if let Some((refusal, met_a_collection)) = lookup_refusal(first) {
                let mut refused = PathRefused::new(format!("fieldName: {first}: {refusal}"));
                refused.met_a_collection = met_a_collection;
                return Err(Stop::Refused(refused));
            }
            if rest.is_empty() {
                if map.contains_key(first) || (create && !is_list) {
                    return visit(map, first, path)
                        .map_err(|error| Stop::Visitor(error, Vec::new()));
                }
                return Ok(());
            }
            // As kustomize's fieldspec filter: a field the path marks as a list is never
            // created, and a null one becomes an empty list.
            if !map.contains_key(first) {
                if !create || is_list {
                    return Ok(());
                }
                map.insert(first.to_string(), Value::Object(Map::new()));
            }
            let child = map.get_mut(first).expect("present");
            if child.is_null() {
                if is_list {
                    *child = Value::Array(Vec::new());
                    return Ok(());
                }
                if !create {
                    return Ok(());
                }
                *child = Value::Object(Map::new());
            }
            path.push(super::aliases::Place::Key(first));
            let walked = walk(child, rest, create, path, visit);
            path.pop();
            walked
        }
        Value::Null => Ok(()),
        _ if segments.is_empty() => Ok(()),
        _ => Err(Stop::Refused(PathRefused::new(
            "expected sequence or mapping node",
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json;

    #[test]
    fn splits_paths_with_escapes_and_list_markers() {
        assert_eq!(
            split_path("spec/containers[]/image"),
            ["spec", "containers[]", "image"]
        );
        assert_eq!(field_of("containers[]"), ("containers", true));
        // kyaml's PathSplitter: one leading slash dropped, other empty names kept.
        assert_eq!(split_path("/spec/x"), ["spec", "x"]);
        assert_eq!(split_path("spec//x"), ["spec", "", "x"]);
        assert_eq!(split_path("spec/x/"), ["spec", "x", ""]);
        assert_eq!(split_path(""), [""]);
        assert_eq!(split_path("/"), [""]);
        assert_eq!(split_path("a\\/b/"), ["a/b", ""]);
        assert_eq!(
            split_path("metadata/annotations/config.kubernetes.io\\/local-config"),
            [
                "metadata",
                "annotations",
                "config.kubernetes.io/local-config"
            ]
        );
    }

    #[test]
    fn visits_through_lists_and_creates_on_request() {
        let mut object =
            json!({"spec": {"containers": [{"image": "a"}, {"image": "b"}, {"name": "c"}]}});
        let mut seen = Vec::new();
        visit_leaves::<PathRefused>(
            &mut object,
            &split_path("spec/containers/image"),
            false,
            &mut |map, key| {
                seen.push(map[key].clone());
                map.insert(key.to_string(), json!("x"));
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(seen, [json!("a"), json!("b")]);
        assert_eq!(
            object["spec"]["containers"][2],
            json!({"name": "c"}),
            "no create, no field"
        );

        let mut object = json!({"metadata": {}});
        visit_leaves::<PathRefused>(
            &mut object,
            &split_path("spec/selector/matchLabels"),
            true,
            &mut |map, key| {
                map.insert(key.to_string(), json!({"a": "b"}));
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(object["spec"]["selector"]["matchLabels"], json!({"a": "b"}));
    }

    /// kustomize's fieldspec filter: a scalar element fails the walk, each list on the way
    /// named with the rest of the path, outermost first; nulls end their branch.
    #[test]
    fn a_scalar_element_on_the_way_is_refused_naming_each_list() {
        let refused = |mut object: Value, path: &str| {
            visit_leaves::<PathRefused>(&mut object, &split_path(path), false, &mut |_, _| Ok(()))
                .err()
                .map(|e| e.to_string())
        };
        assert_eq!(
            refused(
                json!({"spec": {"containers": [{"env": [null, "x"]}]}}),
                "spec/containers/env/name"
            )
            .as_deref(),
            Some(
                "visit traversal on path: [env name]: visit traversal on path: [name]: \
                 expected sequence or mapping node"
            )
        );
        assert_eq!(
            refused(json!({"spec": "oops"}), "spec/selector").as_deref(),
            Some("expected sequence or mapping node")
        );
        assert_eq!(
            refused(json!({"spec": {"list": [null, {}]}}), "spec/list/a"),
            None
        );
        assert_eq!(
            refused(json!({"spec": "oops"}), "spec"),
            None,
            "a scalar leaf is no path through"
        );
    }
}
