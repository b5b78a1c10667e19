//! kyaml's walker with merge2's visitor: two sources, the object (dest) and the patch
//! (origin), walked together; what each visit returns replaces the dest node (`None` clears
//! it). Lists the schema merges go through [`super::elements`].

use super::elements::{self, Directive};
use super::{Kind, Node, NodeRef, Schema, SmpError, expect_kind, missing_or_null};
use crate::kustomize::openapi::SchemaView;

/// The object and the patch at one place in the walk.
pub(super) type Sources = [Option<NodeRef>; 2];

pub(super) struct Walker<'a> {
    pub view: SchemaView<'a>,
}

impl<'a> Walker<'a> {
    /// kyaml's `Walker.Walk`: the node the sources merge into, or `None` to clear it.
    pub fn walk(
        &self,
        mut sources: Sources,
        schema: Schema<'a>,
        path: &mut Vec<String>,
    ) -> Result<Option<NodeRef>, SmpError> {
        let schema = self.schema_of(&sources, schema);
        let kind = sources
            .iter()
            .find(|s| !missing_or_null(s))
            .map(|s| s.as_ref().expect("present").borrow().kind());
        if let Some(kind) = kind {
            for source in &sources {
                expect_kind(source, kind, path)?;
            }
        }
        match kind {
            None | Some(Kind::Map) => self.walk_map(&mut sources, schema, path),
            Some(Kind::Seq) if schema.is_associative() => {
                self.walk_associative(&mut sources, schema, path)
            }
            // A list without a merge strategy: the patch's replaces the object's as it is.
            Some(Kind::Seq) | Some(Kind::Scalar) => {
                let [dest, origin] = sources;
                Ok(origin.or(dest))
            }
        }
    }

    /// The schema a walk uses: the one it was given, else the kind the sources name
    /// (`apiVersion` and `kind` of an embedded object), as kyaml's `GetSchema` looks it up.
    fn schema_of(&self, sources: &Sources, given: Schema<'a>) -> Schema<'a> {
        if !matches!(given, Schema::Nil) {
            return given;
        }
        for source in sources.iter().flatten() {
            let node = source.borrow();
            let text = |key: &str| match node.field(key) {
                Some(value) => match &*value.borrow() {
                    Node::Scalar(crate::value::Value::String(s)) => s.clone(),
                    _ => String::new(),
                },
                None => String::new(),
            };
            let (api_version, kind) = (text("apiVersion"), text("kind"));
            if api_version.is_empty() || kind.is_empty() {
                continue;
            }
            if let Some(root) = self.view.root(&api_version, &kind) {
                return Schema::Known {
                    definition: Some(root),
                    property: None,
                };
            }
        }
        Schema::Nil
    }

    /// merge2's `VisitMap`, then every field of either source (sorted), set on the result.
    fn walk_map(
        &self,
        sources: &mut Sources,
        schema: Schema<'a>,
        path: &mut Vec<String>,
    ) -> Result<Option<NodeRef>, SmpError> {
        let Some(dest) = visit_map(sources)? else {
            return Ok(None);
        };
        sources[0] = Some(dest.clone());
        let mut names: Vec<String> = Vec::new();
        for source in sources.iter().flatten() {
            if let Node::Map(fields) = &*source.borrow() {
                names.extend(fields.iter().map(|(key, _)| key.clone()));
            }
        }
        names.sort();
        names.dedup();
        for name in names {
            let field_sources = [
                sources[0].as_ref().and_then(|s| s.borrow().field(&name)),
                sources[1].as_ref().and_then(|s| s.borrow().field(&name)),
            ];
            path.push(name.clone());
            let value = self.walk(field_sources, schema.field(self.view, &name), path)?;
            path.pop();
            set_field(&dest, &name, value);
        }
        Ok(Some(dest))
    }

    /// A list merged element by element (kyaml's `walkAssociativeSequence`), the patch's
    /// elements first (kustomize merges with `ListIncreaseDirection: Prepend`).
    fn walk_associative(
        &self,
        sources: &mut Sources,
        schema: Schema<'a>,
        path: &mut Vec<String>,
    ) -> Result<Option<NodeRef>, SmpError> {
        let Some(dest) = visit_associative_list(sources)? else {
            return Ok(None);
        };
        sources[0] = Some(dest.clone());
        let keys = schema.merge_keys();
        let values = elements::element_values(sources, &keys);
        if !values.is_empty() || !keys.is_empty() {
            self.set_elements(values, &keys, dest, sources, schema, path)
        } else {
            let primitive = elements::primitive_values(sources);
            self.set_elements(primitive, &[String::new()], dest, sources, schema, path)
        }
    }

    /// kyaml's `setAssociativeSequenceElements`: each key value seen (patch first) walks
    /// the elements that carry it; what survives is gathered and the object's elements, as
    /// they now are, laid over it.
    fn set_elements(
        &self,
        mut values_list: Vec<Vec<String>>,
        keys: &[String],
        dest: NodeRef,
        sources: &Sources,
        schema: Schema<'a>,
        path: &mut Vec<String>,
    ) -> Result<Option<NodeRef>, SmpError> {
        let added = Node::new(Node::Seq(Vec::new()));
        if keys.len() > 1 {
            elements::merge_values(&mut values_list);
        }
        let mut valid: (Vec<String>, Vec<String>) = (Vec::new(), Vec::new());
        for index in 0..values_list.len() {
            let values = values_list[index].clone();
            if values.is_empty() {
                continue;
            }
            valid = elements::validate_keys(&values_list, &values, keys);
            let (valid_keys, valid_values) = (&valid.0, &valid.1);
            let element_sources = elements::element_sources(sources, valid_keys, valid_values);
            path.push(elements::describe(valid_keys, valid_values));
            let value = self.walk(element_sources, schema.elements(), path)?;
            path.pop();
            if super::missing_or_empty_map(&value) {
                if !valid_keys.is_empty() {
                    elements::set_element(&dest, None, valid_keys, valid_values, path)?;
                    continue;
                }
            } else if let Some(value) = &value {
                for (key, key_value) in valid_keys.iter().zip(valid_values) {
                    if value.borrow().field(key).is_none() && !key_value.is_empty() {
                        elements::set_key(value, key, key_value, path)?;
                    }
                }
            }
            elements::set_element(&added, value, valid_keys, valid_values, path)?;
        }
        let merged = if values_list.is_empty() {
            dest
        } else {
            elements::append_list(&added, &dest, &valid.0, path)?;
            added
        };
        let is_null = merged.borrow().is_null();
        Ok((!is_null).then_some(merged))
    }
}

/// merge2's `VisitMap`: a directive on the patch's map decides whether the object's map is
/// kept (to merge into), replaced by the patch's or cleared.
fn visit_map(sources: &Sources) -> Result<Option<NodeRef>, SmpError> {
    let [dest, origin] = sources;
    if missing_or_null(dest) {
        // Adding: kyaml reads the directive (and elides it) but ignores an unknown one.
        if elements::directive(origin).ok() == Some(Directive::Delete) {
            return Ok(None);
        }
        if origin.is_none() && dest.is_some() {
            // An explicit null the patch does not mention stays.
            return Ok(Some(Node::new(Node::Null { keep: true })));
        }
        return Ok(origin.clone());
    }
    by_directive(dest, origin)
}

/// merge2's `VisitList` for a list merged element by element.
fn visit_associative_list(sources: &Sources) -> Result<Option<NodeRef>, SmpError> {
    let [dest, origin] = sources;
    if missing_or_null(dest) {
        return Ok(origin.clone());
    }
    by_directive(dest, origin)
}

/// A map or list both sides have: a null patch clears it, else the patch's directive keeps
/// the object's (to merge into), takes the patch's or clears it.
fn by_directive(
    dest: &Option<NodeRef>,
    origin: &Option<NodeRef>,
) -> Result<Option<NodeRef>, SmpError> {
    if origin.as_ref().is_some_and(|o| o.borrow().is_null()) {
        return Ok(None);
    }
    Ok(match elements::directive(origin)? {
        Directive::Delete => None,
        Directive::Replace => origin.clone(),
        Directive::Merge => dest.clone(),
    })
}

/// kyaml's `FieldSetter`: an untagged number or boolean becomes a string
/// ([`Node::restyle_for_field`]); a cleared or (droppable) null value removes the field; a present
/// field's node takes the value's content in place; a new field goes last.
fn set_field(map: &NodeRef, name: &str, value: Option<NodeRef>) {
    let value = value.filter(|v| !matches!(&*v.borrow(), Node::Null { keep: false }));
    if let Some(value) = &value {
        value.borrow_mut().restyle_for_field();
    }
    let existing = map.borrow().field(name);
    match (value, existing) {
        (None, _) => {
            if let Node::Map(fields) = &mut *map.borrow_mut() {
                fields.retain(|(key, _)| key != name);
            }
        }
        (Some(value), Some(existing)) => {
            if !std::rc::Rc::ptr_eq(&value, &existing) {
                let content = value.borrow().clone();
                *existing.borrow_mut() = content;
            }
        }
        (Some(value), None) => {
            if let Node::Map(fields) = &mut *map.borrow_mut() {
                fields.push((name.to_string(), value));
            }
        }
    }
}
