//! kyaml's list-element machinery as merge2 uses it: the `$patch` directives, the key
//! values a merged list's elements carry, finding the element with given key values, and
//! setting (replacing, adding or deleting) one. Its quirks are kept on purpose, because they
//! decide what kustomize prints: an element without its merge key is matched by an empty
//! value, which a setter takes as "any value"; a setter drops empty elements it passes.

use super::walk::Sources;
use super::{Node, NodeRef, SmpError, expect_kind, missing_or_empty_map, missing_or_null};

const PATCH: &str = "$patch";

/// A strategic merge patch directive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Directive {
    Replace,
    Delete,
    Merge,
}

/// kyaml's `determineSmpDirective`: the directive of a patch map (`$patch: …`) or list (its
/// first element with a `$patch` key, when that is the element's only key); the directive
/// is removed from the patch. No patch, or none given, merges.
pub(super) fn directive(patch: &Option<NodeRef>) -> Result<Directive, SmpError> {
    let Some(patch) = patch else {
        return Ok(Directive::Merge);
    };
    let kind = match &*patch.borrow() {
        Node::Map(_) => Some(true),
        Node::Seq(_) => Some(false),
        Node::Null { .. } => None,
        Node::Scalar(_) | Node::Untagged(_) => None,
    };
    match kind {
        Some(true) => map_directive(patch),
        Some(false) => list_directive(patch),
        None if patch.borrow().is_null() => Err(SmpError::NotImplemented("!!null")),
        None => Err(SmpError::NotImplemented("scalar")),
    }
}

fn parse_directive(text: &str) -> Result<Directive, SmpError> {
    match text {
        "delete" => Ok(Directive::Delete),
        "replace" => Ok(Directive::Replace),
        "merge" => Ok(Directive::Merge),
        other => Err(SmpError::UnknownStrategy(other.to_string())),
    }
}

fn map_directive(patch: &NodeRef) -> Result<Directive, SmpError> {
    let Some(value) = patch.borrow().field(PATCH) else {
        return Ok(Directive::Merge);
    };
    let text = directive_text(&value.borrow());
    let directive = parse_directive(&text)?;
    if let Node::Map(fields) = &mut *patch.borrow_mut() {
        fields.retain(|(key, _)| key != PATCH);
    }
    Ok(directive)
}

fn list_directive(patch: &NodeRef) -> Result<Directive, SmpError> {
    let first = match &*patch.borrow() {
        Node::Seq(items) => items
            .iter()
            .find(|item| item.borrow().field(PATCH).is_some())
            .cloned(),
        _ => None,
    };
    let Some(element) = first else {
        return Ok(Directive::Merge);
    };
    // With other keys beside it, the directive is the element's own, not the list's.
    let Some(value) = (match &*element.borrow() {
        Node::Map(fields) if fields.len() == 1 => fields[0].1.clone().into(),
        _ => None,
    }) else {
        return Ok(Directive::Merge);
    };
    let text = directive_text(&value.borrow());
    let directive = parse_directive(&text)?;
    set_element(
        patch,
        None,
        &[PATCH.to_string()],
        std::slice::from_ref(&text),
        &[],
    )?;
    Ok(directive)
}

/// A directive's text as kyaml reads it (`yaml.Node.Value`; an empty `$patch:` reads empty).
fn directive_text(node: &Node) -> String {
    match node {
        Node::Null { .. } => String::new(),
        other => other.text(),
    }
}

/// The key values of every element, patch first, each set once (kyaml's `elementValues`
/// with `Prepend`); a missing or empty key reads as "".
pub(super) fn element_values(sources: &Sources, keys: &[String]) -> Vec<Vec<String>> {
    let mut seen: Vec<Vec<String>> = Vec::new();
    for source in [&sources[1], &sources[0]].into_iter().flatten() {
        let Node::Seq(items) = &*source.borrow() else {
            continue;
        };
        for item in items {
            let values: Vec<String> = keys
                .iter()
                .map(|key| match item.borrow().field(key) {
                    Some(value) if !value.borrow().is_empty() => value.borrow().text(),
                    _ => String::new(),
                })
                .collect();
            if !values.is_empty() && !seen.contains(&values) {
                seen.push(values);
            }
        }
    }
    seen
}

/// The values of a list of scalars, patch first, each once (kyaml's
/// `elementPrimitiveValues`).
pub(super) fn primitive_values(sources: &Sources) -> Vec<Vec<String>> {
    let mut seen: Vec<Vec<String>> = Vec::new();
    for source in [&sources[1], &sources[0]].into_iter().flatten() {
        let Node::Seq(items) = &*source.borrow() else {
            continue;
        };
        for item in items {
            let value = vec![item.borrow().text()];
            if !seen.contains(&value) {
                seen.push(value);
            }
        }
    }
    seen
}

/// Key values that agree where both are set, one side missing a key, become one (kyaml's
/// `mergeValues`: a port with and without `protocol` is the same port).
pub(super) fn merge_values(values_list: &mut [Vec<String>]) {
    for i in 0..values_list.len() {
        let first = values_list[i].clone();
        for j in 0..values_list.len() {
            let second = values_list[j].clone();
            if let Some(merged) = match_values(&first, &second) {
                values_list[i] = merged.clone();
                values_list[j] = merged;
            }
        }
    }
}

fn match_values(first: &[String], second: &[String]) -> Option<Vec<String>> {
    if first.len() != second.len() {
        return None;
    }
    let mut common = false;
    let mut merged = Vec::with_capacity(first.len());
    for (a, b) in first.iter().zip(second) {
        if a == b {
            common = true;
            merged.push(a.clone());
        } else if !a.is_empty() && !b.is_empty() {
            return None;
        } else if !a.is_empty() {
            merged.push(a.clone());
        } else {
            merged.push(b.clone());
        }
    }
    common.then_some(merged)
}

/// The keys some element sets, and `values` for them (kyaml's `validateKeys`): a key no
/// element sets identifies nothing.
pub(super) fn validate_keys(
    values_list: &[Vec<String>],
    values: &[String],
    keys: &[String],
) -> (Vec<String>, Vec<String>) {
    let set: Vec<&String> = values_list
        .iter()
        .flat_map(|values| {
            values
                .iter()
                .zip(keys)
                .filter(|(v, _)| !v.is_empty())
                .map(|(_, k)| k)
        })
        .collect();
    if set.is_empty() {
        return (keys.to_vec(), values.to_vec());
    }
    let valid_keys = keys.iter().filter(|k| set.contains(k)).cloned().collect();
    let valid_values = values
        .iter()
        .zip(keys)
        .filter(|(v, k)| !v.is_empty() || set.contains(k))
        .map(|(v, _)| v.clone())
        .collect();
    (valid_keys, valid_values)
}

/// The element of each source with these key values (kyaml's `elementValueList`).
pub(super) fn element_sources(sources: &Sources, keys: &[String], values: &[String]) -> Sources {
    let (keys, values) = validate_keys(&[values.to_vec()], values, keys);
    let find = |source: &Option<NodeRef>| {
        source
            .as_ref()
            .and_then(|source| find_element(source, &keys, &values))
    };
    [find(&sources[0]), find(&sources[1])]
}

/// kyaml's `ElementMatcher`: the first element whose keys hold exactly these values (the
/// scalar with this value when the key is "").
fn find_element(list: &NodeRef, keys: &[String], values: &[String]) -> Option<NodeRef> {
    let Node::Seq(items) = &*list.borrow() else {
        return None;
    };
    let first_value = values.first().map(String::as_str).unwrap_or("");
    if keys.first().is_none_or(String::is_empty) {
        return items
            .iter()
            .find(|item| item.borrow().text() == first_value)
            .cloned();
    }
    items
        .iter()
        .find(|item| {
            let item = item.borrow();
            matches!(&*item, Node::Map(_))
                && keys.iter().zip(values).all(|(key, value)| {
                    item.field(key)
                        .is_some_and(|field| field.borrow().text() == *value)
                })
        })
        .cloned()
}

/// kyaml's `ElementSetter`: replaces (or, with no `element`, deletes) the elements that
/// match `keys`/`values` — an empty value matching any — appending `element` if none did.
/// Null and empty-map elements are dropped on the way, and with no values every element
/// that does not match goes too.
pub(super) fn set_element(
    list: &NodeRef,
    element: Option<NodeRef>,
    keys: &[String],
    values: &[String],
    path: &[String],
) -> Result<(), SmpError> {
    let default_keys = [String::new()];
    let keys = if keys.is_empty() {
        &default_keys[..]
    } else {
        keys
    };
    let mapping_setter = !keys[0].is_empty() && values.first().is_some_and(|v| !v.is_empty());
    let items = match &*list.borrow() {
        Node::Seq(items) => items.clone(),
        _ => return Ok(()),
    };
    let mut kept = Vec::with_capacity(items.len() + 1);
    let mut matched = false;
    for item in items {
        let item_ref = Some(item.clone());
        if missing_or_empty_map(&item_ref) {
            continue;
        }
        let is_map = matches!(&*item.borrow(), Node::Map(_));
        if !is_map && mapping_setter {
            kept.push(item);
            continue;
        }
        let mut found = true;
        let mut last: Option<NodeRef> = None;
        for (j, key) in keys.iter().enumerate() {
            if let Some(value) = values.get(j) {
                last = match_field(&item, key, value, path)?;
            }
            if last.is_none() {
                found = false;
                break;
            }
        }
        if !found {
            if !values.is_empty() {
                kept.push(item);
            }
            continue;
        }
        matched = true;
        if let Some(element) = &element {
            kept.push(element.clone());
        }
    }
    if let Some(element) = element.filter(|e| !missing_or_null(&Some(e.clone())))
        && !matched
    {
        kept.push(element);
    }
    *list.borrow_mut() = Node::Seq(kept);
    Ok(())
}

/// kyaml's `FieldMatcher` with a string value: the field `name` of a map (of any value
/// when `value` is empty), or with no name the scalar equal to `value`.
fn match_field(
    item: &NodeRef,
    name: &str,
    value: &str,
    path: &[String],
) -> Result<Option<NodeRef>, SmpError> {
    let item_ref = Some(item.clone());
    if missing_or_null(&item_ref) {
        return Ok(None);
    }
    if name.is_empty() {
        expect_kind(&item_ref, super::Kind::Scalar, path)?;
        return Ok((item.borrow().text() == value).then(|| item.clone()));
    }
    expect_kind(&item_ref, super::Kind::Map, path)?;
    let field = item.borrow().field(name);
    Ok(field.filter(|f| value.is_empty() || f.borrow().text() == value))
}

/// Gives a merged element the key value it was found by (kyaml sets it as an untagged
/// scalar, read as its text reads). A list of scalars has nothing to set.
pub(super) fn set_key(
    element: &NodeRef,
    key: &str,
    value: &str,
    path: &[String],
) -> Result<(), SmpError> {
    if key.is_empty() {
        return Ok(());
    }
    expect_kind(&Some(element.clone()), super::Kind::Map, path)?;
    if let Node::Map(fields) = &mut *element.borrow_mut() {
        let scalar = crate::yaml::plain_scalar(value, crate::yaml::Schema::Kyaml);
        fields.push((key.to_string(), Node::from_value(&scalar)));
    }
    Ok(())
}

/// kyaml's `appendListNode` with `Prepend`: every element of the object's list, as the
/// walk left it, is set over the gathered ones by its key values; one without a key is
/// appended, and then set with fewer values than keys.
pub(super) fn append_list(
    gathered: &NodeRef,
    list: &NodeRef,
    keys: &[String],
    path: &[String],
) -> Result<(), SmpError> {
    let items = match &*list.borrow() {
        Node::Seq(items) => items.clone(),
        _ => Vec::new(),
    };
    let primitive = keys.first().is_none_or(String::is_empty);
    for item in items {
        if primitive {
            let value = item.borrow().text();
            set_element(gathered, Some(item), &[String::new()], &[value], path)?;
            continue;
        }
        let mut values = Vec::with_capacity(keys.len());
        for key in keys {
            match match_field(&item, key, "", path)? {
                Some(field) => values.push(field.borrow().text()),
                None => {
                    if let Node::Seq(gathered_items) = &mut *gathered.borrow_mut() {
                        gathered_items.push(item.clone());
                    }
                }
            }
        }
        if keys.len() > 1 {
            set_element(gathered, None, keys, &values, path)?;
        }
        set_element(gathered, Some(item), keys, &values, path)?;
    }
    Ok(())
}

/// A list element in an error's path, as kyaml writes one (`[name=app]`).
pub(super) fn describe(keys: &[String], values: &[String]) -> String {
    let pairs: Vec<String> = keys
        .iter()
        .zip(values)
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    format!("[{}]", pairs.join(","))
}
