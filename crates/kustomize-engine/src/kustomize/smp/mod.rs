//! Strategic merge patch as kustomize applies it: kyaml's `merge2` walk, step for step.
//!
//! The object and the patch become trees of shared nodes ([`Node`]), because kyaml's walk
//! depends on which node is which: a list element merged where it stands changes the list
//! it is in, one a directive swapped for the patch's copy does not, and a list the patch
//! adds is walked against itself. [`walk`] visits maps field by field (sorted), lists by
//! merge key where the schema gives a `merge` strategy (elsewhere the patch's list replaces
//! the object's), and scalars; [`elements`] holds kyaml's element matching and setting, whose
//! quirks (an element without its merge key, a directive-only element) decide what
//! unusual patches produce. `$patch: delete|replace|merge` on maps and as a list's
//! directive-only element are honoured; any other `$patch` value fails the patch, as in
//! kustomize. The merged tree goes back to a [`Value`].

mod elements;
mod walk;

use std::cell::RefCell;
use std::rc::Rc;

use crate::value::{Map, Value};

use super::aliases::Step;
use super::openapi::{PropertyMeta, SchemaView};
use super::untagged::Untagged;

/// What applying a patch to a whole object decided.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Patched,
    /// The patch deleted the object (`$patch: delete` at the top).
    Deleted,
}

/// Why a patch could not be applied, in kyaml's words (without the node contents kyaml
/// adds: they may be a Secret's).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SmpError {
    #[error("wrong node kind: expected {expected} but got {found}{}", at(.path))]
    WrongKind {
        expected: &'static str,
        found: &'static str,
        path: String,
    },
    #[error("unknown patch strategy '{0}'")]
    UnknownStrategy(String),
    #[error("no implemented strategic merge patch strategy for '{0}'")]
    NotImplemented(&'static str),
}

fn at(path: &str) -> String {
    if path.is_empty() {
        String::new()
    } else {
        format!(" at {path}")
    }
}

/// Applies `patch` to `object` (of `apiVersion`/`kind` known to the schema or not).
/// On an error the object is left partly patched (the build stops there).
/// `untagged` are the object's scalars kustomize holds without a tag: the numbers and booleans
/// among them the walk sets anew become strings, and the rest are where the merge left them.
pub fn apply(
    object: &mut Value,
    patch: &Value,
    schema: SchemaView,
    untagged: &mut Untagged,
) -> Result<Outcome, SmpError> {
    // The object's values move into the tree and back: most of it comes back untouched.
    let dest = Node::from_owned(std::mem::take(object));
    for path in untagged.paths() {
        Node::mark_untagged(&dest, path);
    }
    let origin = Node::from_value(patch);
    let walker = walk::Walker { view: schema };
    let merged = walker.walk(
        [Some(dest.clone()), Some(origin)],
        Schema::Nil,
        &mut Vec::new(),
    );
    let merged = match merged {
        Ok(merged) => merged,
        Err(error) => {
            *object = Node::into_value(dest);
            return Err(error);
        }
    };
    drop(dest);
    match merged {
        Some(node) if !node.borrow().is_null() => {
            let mut left = Vec::new();
            Node::untagged_paths(&node, &mut Vec::new(), &mut left);
            untagged.replace(left);
            *object = Node::into_value(node);
            Ok(Outcome::Patched)
        }
        _ => Ok(Outcome::Deleted),
    }
}

/// A node of the tree the walk works on; shared so that a change made through one holder
/// is seen by the others, as kyaml's `*yaml.Node`s are.
type NodeRef = Rc<RefCell<Node>>;

#[derive(Clone, Debug)]
enum Node {
    /// An explicit `null`; `keep` when a merge must not drop it (kyaml's persistent null).
    Null {
        keep: bool,
    },
    Scalar(Value),
    /// A scalar kustomize holds without a tag ([`Untagged`]).
    Untagged(Value),
    Seq(Vec<NodeRef>),
    Map(Vec<(String, NodeRef)>),
}

/// The node kinds kyaml names in its errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Map,
    Seq,
    Scalar,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Map => "MappingNode",
            Kind::Seq => "SequenceNode",
            Kind::Scalar => "ScalarNode",
        }
    }
}

impl Node {
    fn new(node: Node) -> NodeRef {
        Rc::new(RefCell::new(node))
    }

    fn from_value(value: &Value) -> NodeRef {
        Node::new(match value {
            Value::Null => Node::Null { keep: false },
            Value::Array(items) => Node::Seq(items.iter().map(Node::from_value).collect()),
            Value::Object(map) => Node::Map(
                map.iter()
                    .map(|(k, v)| (k.clone(), Node::from_value(v)))
                    .collect(),
            ),
            scalar => Node::Scalar(scalar.clone()),
        })
    }

    fn from_owned(value: Value) -> NodeRef {
        Node::new(match value {
            Value::Null => Node::Null { keep: false },
            Value::Array(items) => Node::Seq(items.into_iter().map(Node::from_owned).collect()),
            Value::Object(map) => Node::Map(
                map.into_iter()
                    .map(|(k, v)| (k, Node::from_owned(v)))
                    .collect(),
            ),
            scalar => Node::Scalar(scalar),
        })
    }

    /// The value of a tree, moved out of the nodes no one else holds.
    fn into_value(node: NodeRef) -> Value {
        match Rc::try_unwrap(node) {
            Ok(cell) => match cell.into_inner() {
                Node::Null { .. } => Value::Null,
                Node::Scalar(value) | Node::Untagged(value) => value,
                Node::Seq(items) => Value::Array(items.into_iter().map(Node::into_value).collect()),
                Node::Map(fields) => {
                    let mut map = Map::new();
                    for (key, value) in fields {
                        map.insert(key, Node::into_value(value));
                    }
                    Value::Object(map)
                }
            },
            Err(shared) => shared.borrow().to_value(),
        }
    }

    fn to_value(&self) -> Value {
        match self {
            Node::Null { .. } => Value::Null,
            Node::Scalar(value) | Node::Untagged(value) => value.clone(),
            Node::Seq(items) => Value::Array(items.iter().map(|i| i.borrow().to_value()).collect()),
            Node::Map(fields) => {
                let mut map = Map::new();
                for (key, value) in fields {
                    map.insert(key.clone(), value.borrow().to_value());
                }
                Value::Object(map)
            }
        }
    }

    fn is_null(&self) -> bool {
        matches!(self, Node::Null { .. })
    }

    /// The kind of a node that is not null.
    fn kind(&self) -> Kind {
        match self {
            Node::Map(_) | Node::Null { .. } => Kind::Map,
            Node::Seq(_) => Kind::Seq,
            Node::Scalar(_) | Node::Untagged(_) => Kind::Scalar,
        }
    }

    /// A scalar node's text, as kyaml compares values (`yaml.Node.Value`); collections
    /// have none.
    fn text(&self) -> String {
        match self {
            Node::Null { .. } => "null".to_string(),
            Node::Scalar(value) | Node::Untagged(value) => super::replacements::scalar_text(value),
            Node::Seq(_) | Node::Map(_) => String::new(),
        }
    }

    /// The value of a map's field.
    fn field(&self, name: &str) -> Option<NodeRef> {
        match self {
            Node::Map(fields) => fields
                .iter()
                .find(|(key, _)| key == name)
                .map(|(_, value)| value.clone()),
            _ => None,
        }
    }

    /// kyaml's `IsNilOrEmpty` of a present node: null, `{}`, `[]`.
    fn is_empty(&self) -> bool {
        match self {
            Node::Null { .. } => true,
            Node::Map(fields) => fields.is_empty(),
            Node::Seq(items) => items.is_empty(),
            Node::Scalar(_) | Node::Untagged(_) => false,
        }
    }

    /// Marks the scalar at `path` as one kustomize holds without a tag.
    fn mark_untagged(root: &NodeRef, path: &[Step]) {
        let mut node = root.clone();
        for step in path {
            let next = match (step, &*node.borrow()) {
                (Step::Key(key), Node::Map(_)) => node.borrow().field(key),
                (Step::Index(index), Node::Seq(items)) => items.get(*index).cloned(),
                _ => None,
            };
            let Some(next) = next else {
                return;
            };
            node = next;
        }
        let mut node = node.borrow_mut();
        if let Node::Scalar(value @ (Value::Number(_) | Value::Bool(_) | Value::String(_))) = &*node
        {
            *node = Node::Untagged(value.clone());
        }
    }

    /// The paths of the untagged scalars in a tree.
    fn untagged_paths(node: &NodeRef, at: &mut Vec<Step>, found: &mut Vec<Vec<Step>>) {
        match &*node.borrow() {
            Node::Untagged(_) => found.push(at.clone()),
            Node::Map(fields) => {
                for (key, value) in fields {
                    at.push(Step::Key(key.as_str().into()));
                    Node::untagged_paths(value, at, found);
                    at.pop();
                }
            }
            Node::Seq(items) => {
                for (index, item) in items.iter().enumerate() {
                    at.push(Step::Index(index));
                    Node::untagged_paths(item, at, found);
                    at.pop();
                }
            }
            Node::Null { .. } | Node::Scalar(_) => {}
        }
    }

    /// kyaml's `FieldSetter` double-quotes an untagged scalar that YAML 1.1 reads as no
    /// string: from then on it is one.
    fn restyle_for_field(&mut self) {
        if let Node::Untagged(value @ (Value::Number(_) | Value::Bool(_))) = self {
            *self = Node::Scalar(Value::String(super::replacements::scalar_text(value)));
        }
    }
}

/// kyaml's `IsMissingOrNull`.
fn missing_or_null(node: &Option<NodeRef>) -> bool {
    node.as_ref().is_none_or(|n| n.borrow().is_null())
}

/// kyaml's `IsEmptyMap`: missing, null or `{}`.
fn missing_or_empty_map(node: &Option<NodeRef>) -> bool {
    node.as_ref().is_none_or(|n| {
        let n = n.borrow();
        n.is_null() || matches!(&*n, Node::Map(fields) if fields.is_empty())
    })
}

/// kyaml's `ErrorIfInvalid`: a node that is present and not null must be of `kind`.
fn expect_kind(node: &Option<NodeRef>, kind: Kind, path: &[String]) -> Result<(), SmpError> {
    match node {
        Some(n) if !n.borrow().is_null() && n.borrow().kind() != kind => Err(SmpError::WrongKind {
            expected: kind.name(),
            found: n.borrow().kind().name(),
            path: path.join("."),
        }),
        _ => Ok(()),
    }
}

/// Where in the schema the walk is: nowhere known, or a definition (object) and the property
/// metadata that led to it (lists carry their strategy and keys there).
#[derive(Clone, Copy, Debug)]
enum Schema<'a> {
    Nil,
    Known {
        definition: Option<&'a str>,
        property: Option<&'a PropertyMeta>,
    },
}

impl<'a> Schema<'a> {
    /// The schema of a map's field (kyaml's `ResourceSchema.Field`).
    fn field(self, view: SchemaView<'a>, key: &str) -> Schema<'a> {
        let Schema::Known {
            definition: Some(definition),
            property,
        } = self
        else {
            return Schema::Nil;
        };
        // A list's schema has no fields (its definition is its elements'): a map written
        // where a list belongs merges without a schema, as in kyaml.
        if property.is_some_and(is_list) {
            return Schema::Nil;
        }
        match view.property(definition, key) {
            Some(meta) => Schema::Known {
                definition: meta.definition.as_deref(),
                property: Some(meta),
            },
            // The table keeps only the properties that lead to merge metadata; any other
            // field of a known kind has a schema in kustomize too (one without merge keys),
            // so an object embedded there is not looked up by its own apiVersion and kind.
            None => Schema::Known {
                definition: None,
                property: None,
            },
        }
    }

    /// The schema of a list's elements (kyaml's `ResourceSchema.Elements`).
    fn elements(self) -> Schema<'a> {
        match self {
            Schema::Known {
                definition,
                property: Some(_),
            } => Schema::Known {
                definition,
                property: None,
            },
            _ => Schema::Nil,
        }
    }

    /// Whether a list here merges element by element (a `merge` patch strategy).
    fn is_associative(self) -> bool {
        self.strategy()
            .is_some_and(|s| s.split(',').any(|part| part == "merge"))
    }

    fn strategy(self) -> Option<&'a str> {
        match self {
            Schema::Known {
                property: Some(meta),
                ..
            } => meta.strategy.as_deref(),
            _ => None,
        }
    }

    /// The keys that identify a list's elements: `x-kubernetes-list-map-keys`, else the
    /// patch merge key, else none (a list of scalars) — kyaml's `PatchStrategyAndKeyList`.
    fn merge_keys(self) -> Vec<String> {
        match self {
            Schema::Known {
                property: Some(meta),
                ..
            } if meta.strategy.is_some() => {
                if !meta.list_map_keys.is_empty() {
                    meta.list_map_keys.clone()
                } else {
                    meta.merge_key.iter().cloned().collect()
                }
            }
            _ => Vec::new(),
        }
    }
}

/// Whether a property's metadata makes it a list (merge key, list type or keys, or a
/// `merge` strategy; `retainKeys` alone is also given to maps).
fn is_list(meta: &PropertyMeta) -> bool {
    meta.merge_key.is_some()
        || meta.list_type.is_some()
        || !meta.list_map_keys.is_empty()
        || meta
            .strategy
            .as_deref()
            .is_some_and(|s| s.split(',').any(|part| part == "merge"))
}

#[cfg(test)]
mod tests;
