//! Writing a replacement's value at a target's field path: fields created when asked, list
//! elements picked by key, index or `*`, a delimited part replaced, a scalar's type kept, and
//! kustomize's words when the path runs into a node of the wrong kind.

use super::{PathSegment, element_matches_pattern, kyaml_text, scalar_text};
use crate::kustomize::aliases::Step;
use crate::kustomize::kustfile::FieldOptions;
use crate::kustomize::untagged::{Trail, Untagged};
use crate::value::{Map, Value};
use crate::yaml::{self, Schema};

/// How a target field is written.
pub(super) struct WriteOptions<'o> {
    pub(super) field: &'o FieldOptions,
    /// Fields created under labels or annotations hold strings.
    pub(super) created_as_string: bool,
    /// A null field is a value to overwrite (in a document held in a string, where kyaml
    /// sees a `~` node), not a missing field.
    pub(super) null_is_value: bool,
    /// A JSON document held in a string: kustomize keeps a scalar's YAML tag and must read
    /// the document back through Go's decoder, which refuses a text that is not of that type.
    pub(super) json_types: bool,
}

/// What a replacement copies: the value, and the text of its YAML node, which is what an
/// existing scalar or a created field receives (`sourceValue: "~"` is the text `~` whose value
/// is null; a number keeps its spelling either way).
pub(super) struct Copied {
    pub(super) value: Value,
    pub(super) text: String,
}

impl Copied {
    /// A field's value read from a source object.
    pub(super) fn field(value: Value) -> Copied {
        Copied {
            text: kyaml_text(&value),
            value,
        }
    }

    /// A `sourceValue`: a node of that text with no tag, whose value is the text read as a
    /// plain YAML scalar.
    pub(super) fn literal(text: &str) -> Copied {
        Copied {
            value: yaml::plain_scalar(text, Schema::Kyaml),
            text: text.to_string(),
        }
    }

    fn is_collection(&self) -> bool {
        self.value.is_object() || self.value.is_array()
    }
}

/// What a write reached.
#[derive(Default)]
pub(super) struct Tally {
    pub(super) written: usize,
    /// A JSON scalar that cannot hold the new text: kustomize's write then lands in a
    /// throwaway copy, so nothing changes and nothing fails.
    pub(super) type_not_kept: bool,
    /// The target's fields kustomize holds without a tag, before the write.
    untagged: Vec<Vec<Step>>,
    /// The path of the field the walk is at.
    at: Vec<Step>,
    /// The fields written with no tag (created ones, and untagged ones written into), and
    /// what they now hold.
    pub(super) untagged_writes: Vec<(Vec<Step>, Value)>,
}

impl Trail for Tally {
    fn at(&mut self) -> &mut Vec<Step> {
        &mut self.at
    }
}

impl Tally {
    /// A tally for a write into a resource whose untagged fields are `untagged`.
    pub(super) fn over(untagged: &Untagged) -> Tally {
        Tally {
            untagged: untagged.paths().to_vec(),
            ..Tally::default()
        }
    }

    fn wrote_untagged(&mut self, step: Option<Step>, value: &Value) {
        let mut path = self.at.clone();
        path.extend(step);
        self.untagged_writes.push((path, value.clone()));
    }
}

/// Why a write failed.
#[derive(Debug)]
pub(super) enum WriteError {
    /// The path runs into a node of the wrong kind: kustomize's cause after "unable to find
    /// field". The node's contents, which kustomize prints, are left out: they may be a
    /// Secret's.
    Path(String),
    /// A delimiter splits a scalar; the path leads to a mapping or a sequence.
    DelimiterOnCollection,
    /// A text copied into a number or a boolean that go-yaml cannot read back under the tag
    /// kustomize keeps (a mapping's or a list's text is empty): the tag the text reads as and
    /// the target's. The text itself is left out of the message (kustomize prints it): it may
    /// be a Secret's.
    TagMismatch {
        found: &'static str,
        tag: &'static str,
    },
}

fn wrong_kind(expected: &str, found: &Value) -> WriteError {
    WriteError::Path(crate::kustomize::node_kind_mismatch(expected, found))
}

/// Writes `value` at every place `segments` reaches, creating fields when asked.
pub(super) fn write_at(
    target: &mut Value,
    segments: &[PathSegment],
    value: &Copied,
    write: &WriteOptions,
    tally: &mut Tally,
) -> Result<(), WriteError> {
    let options = write.field;
    let Some((first, rest)) = segments.split_first() else {
        let collection = value.is_collection();
        if write.json_types && !collection {
            match json_retyped(target, &value.text) {
                Some(retyped) => *target = retyped,
                None => tally.type_not_kept = true,
            }
        } else if write.json_types && !target.is_object() && !target.is_array() {
            // Only the collection's (empty) text reaches a JSON scalar: a string or a null
            // reads it back as "", a number or a boolean cannot, so nothing changes.
            match target {
                Value::Number(_) | Value::Bool(_) => tally.type_not_kept = true,
                _ => *target = Value::String(String::new()),
            }
        } else {
            let untagged = tally.untagged.contains(&tally.at);
            set_field(target, value, options, write, untagged)?;
            if untagged {
                tally.wrote_untagged(None, target);
            }
        }
        tally.written += 1;
        return Ok(());
    };
    match (first, target) {
        (PathSegment::Field(name), Value::Object(map)) => {
            write_field(map, name, rest, value, write, tally)
        }
        (PathSegment::Index(i), Value::Array(items)) => {
            if *i == items.len() && options.create {
                if rest.is_empty() {
                    let mut fresh = Value::Null;
                    set_field(&mut fresh, value, options, write, false)?;
                    tally.wrote_untagged(Some(Step::Index(*i)), &fresh);
                    items.push(fresh);
                    tally.written += 1;
                    return Ok(());
                }
                items.push(Value::Object(Map::new()));
            }
            let found = items.len();
            match items.get_mut(*i) {
                Some(item) => {
                    tally.under(Step::Index(*i), |t| write_at(item, rest, value, write, t))
                }
                None => Err(WriteError::Path(format!(
                    "index {i} specified but only {found} elements found"
                ))),
            }
        }
        (PathSegment::Wildcard, Value::Array(items)) => {
            for (index, item) in items.iter_mut().enumerate() {
                tally.under(Step::Index(index), |t| {
                    write_at(item, rest, value, write, t)
                })?;
            }
            Ok(())
        }
        (PathSegment::Match(k, v), Value::Array(items)) => {
            let pattern = super::super::regexes::compile(v)
                .map_err(|e| WriteError::Path(format!("error parsing regexp: {e}")))?;
            let mut any = false;
            for (index, item) in items
                .iter_mut()
                .enumerate()
                .filter(|(_, item)| element_matches_pattern(item, k, &pattern))
            {
                any = true;
                tally.under(Step::Index(index), |t| {
                    write_at(item, rest, value, write, t)
                })?;
            }
            if !any && options.create {
                // kustomize creates the element its selector names, with the selector's text
                // as a plain scalar (`[containerPort=80]` makes the number 80).
                let selected = yaml::plain_scalar(v, Schema::Kyaml);
                let index = items.len();
                tally.under(Step::Index(index), |t| {
                    t.wrote_untagged(
                        (!k.is_empty()).then(|| Step::Key(k.as_str().into())),
                        &selected,
                    )
                });
                items.push(if k.is_empty() {
                    selected
                } else {
                    let mut element = Map::new();
                    element.insert(k.clone(), selected);
                    Value::Object(element)
                });
                let last = items.last_mut().expect("just pushed");
                tally.under(Step::Index(index), |t| {
                    write_at(last, rest, value, write, t)
                })?;
            }
            Ok(())
        }
        (_, Value::Null) => Ok(()),
        // kustomize reads a string the path runs through as a YAML document and goes on in
        // a copy of it: what it finds there counts, what it writes there is lost.
        (_, Value::String(text)) => match yaml::parse_single(text, Schema::Kyaml) {
            Ok(mut inner @ (Value::Object(_) | Value::Array(_))) => {
                let kept = tally.untagged_writes.len();
                let written = write_at(&mut inner, segments, value, write, tally);
                tally.untagged_writes.truncate(kept);
                written
            }
            Ok(Value::Null) => Ok(()),
            Ok(scalar) => Err(wrong_kind("MappingNode", &scalar)),
            Err(error) => Err(WriteError::Path(format!("yaml: {error}"))),
        },
        (PathSegment::Field(_), other) => Err(wrong_kind("MappingNode", other)),
        (_, other) => Err(wrong_kind("SequenceNode", other)),
    }
}

/// A path's step into a mapping's field: created (as the next step needs it) when missing
/// and creation is on, a null one taken as missing unless nulls are values.
fn write_field(
    map: &mut Map,
    name: &str,
    rest: &[PathSegment],
    value: &Copied,
    write: &WriteOptions,
    tally: &mut Tally,
) -> Result<(), WriteError> {
    let options = write.field;
    let null = map.get(name).is_some_and(Value::is_null);
    let null_is_value = write.null_is_value || write.json_types && rest.is_empty();
    if null && write.null_is_value && !rest.is_empty() {
        return Err(WriteError::Path(format!(
            "wrong node kind: expected a mapping at {name}, found null"
        )));
    }
    if null && !null_is_value {
        // kyaml finds a null field: at the path's end the text is written under the `!!null`
        // tag it keeps; on the way it is a scalar a created path cannot enter, so the write
        // lands nowhere and nothing fails.
        if rest.is_empty() {
            let slot = map.get_mut(name).expect("present");
            let text = delimited(slot, &value.text, options)?;
            *slot = under_kept_tag(slot, &text)?;
            tally.written += 1;
        } else if options.create {
            tally.written += 1;
        }
        return Ok(());
    }
    if !map.contains_key(name) {
        if !options.create {
            return Ok(());
        }
        // kustomize creates the field as the kind of node the value is: a mapping or a list
        // there cannot be split by a delimiter.
        if rest.is_empty() && !options.delimiter.is_empty() && value.is_collection() {
            return Err(WriteError::DelimiterOnCollection);
        }
        let fresh = if rest.is_empty() {
            Value::Null
        } else if matches!(rest[0], PathSegment::Match(..) | PathSegment::Index(_)) {
            Value::Array(Vec::new())
        } else {
            Value::Object(Map::new())
        };
        map.insert(name.to_string(), fresh);
        if rest.is_empty() {
            // A created field has no tag to keep, in JSON too.
            let slot = map.get_mut(name).expect("inserted");
            set_field(slot, value, options, write, false)?;
            tally.wrote_untagged(Some(Step::Key(name.into())), slot);
            tally.written += 1;
            return Ok(());
        }
    }
    let field = map.get_mut(name).expect("present");
    tally.under(Step::Key(name.into()), |t| {
        write_at(field, rest, value, write, t)
    })
}

/// Writes into the scalar `target`, or puts the value in place of a collection; `untagged`
/// when kustomize holds the target without a tag.
fn set_field(
    target: &mut Value,
    copied: &Copied,
    options: &FieldOptions,
    write: &WriteOptions,
    untagged: bool,
) -> Result<(), WriteError> {
    let created_as_string = write.created_as_string;
    let embedded = write.null_is_value || write.json_types;
    // A delimiter joins the text into a string, a collection's (empty) text too.
    let collection = options.delimiter.is_empty() && copied.is_collection();
    let text = delimited(target, &copied.text, options)?;
    *target = match &*target {
        // Only the text is copied, and with no tag to keep it reads as a plain scalar.
        Value::Number(_) | Value::Bool(_) | Value::String(_) if untagged && !embedded => {
            yaml::plain_scalar(if collection { "" } else { &text }, Schema::Kyaml)
        }
        // A scalar target keeps its type; only the text is copied, and a collection's is
        // empty.
        Value::String(_) if collection => Value::String(String::new()),
        // An annotation holds a string: a collection's text, which is empty.
        Value::Null if collection && created_as_string => Value::String(String::new()),
        // A YAML document held in a string keeps the empty text under the tag (`d: !!int`),
        // which these values cannot say; there the collection is written instead.
        Value::Number(_) | Value::Bool(_) if !embedded => under_kept_tag(target, &text)?,
        _ if collection => copied.value.clone(),
        Value::String(_) => Value::String(text),
        Value::Number(_) => retyped_number(&text),
        Value::Bool(_) => match text.as_str() {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            _ => Value::String(text),
        },
        // A field made by `create` is a plain scalar: it reads back by YAML's rules, once
        // printed: in a flow (JSON) document an empty one prints as `''`.
        Value::Null if created_as_string => Value::String(text),
        Value::Null if text.is_empty() && write.json_types => Value::String(text),
        Value::Null => yaml::plain_scalar(&text, Schema::Kyaml),
        _ => copied.value.clone(),
    };
    Ok(())
}

/// `text` as it is written into the scalar `target`: in place of the target's part at the
/// delimiter option's index (before the first part for a negative one, after the last for one
/// past it), the parts joined again; the text itself without a delimiter.
fn delimited(target: &Value, text: &str, options: &FieldOptions) -> Result<String, WriteError> {
    if options.delimiter.is_empty() {
        return Ok(text.to_string());
    }
    if target.is_object() || target.is_array() {
        return Err(WriteError::DelimiterOnCollection);
    }
    let current = scalar_text(target);
    let mut parts: Vec<&str> = current.split(options.delimiter.as_str()).collect();
    match usize::try_from(options.index) {
        Err(_) => parts.insert(0, text),
        Ok(index) if index >= parts.len() => parts.push(text),
        Ok(index) => parts[index] = text,
    }
    Ok(parts.join(&options.delimiter))
}

/// `text` in place of the JSON scalar `target`, as go-yaml reads it back under the tag the
/// target keeps (an integer widens to a float); `None` where go-yaml refuses it.
fn json_retyped(target: &Value, text: &str) -> Option<Value> {
    match target {
        Value::String(_) => Some(Value::String(text.to_string())),
        Value::Null => yaml::plain_scalar(text, Schema::Kyaml)
            .is_null()
            .then_some(Value::Null),
        Value::Bool(_) => under_kept_tag(target, text).ok(),
        // JSON keeps a float a float (`5` becomes `5.0`).
        Value::Number(was) => match under_kept_tag(target, text).ok()? {
            Value::Number(now) if was.is_f64() => {
                crate::value::Number::from_f64(now.as_f64()?).map(Value::Number)
            }
            now => Some(now),
        },
        _ => None,
    }
}

/// `text` in place of the null, number or boolean `target`, as go-yaml reads it back under the
/// tag kustomize keeps: an integer takes only an integer, a float a number, a boolean a
/// boolean, a null only a null.
fn under_kept_tag(target: &Value, text: &str) -> Result<Value, WriteError> {
    let read = yaml::plain_scalar(text, Schema::Kyaml);
    let tag_of = |value: &Value| match value {
        Value::Null => "!!null",
        Value::Bool(_) => "!!bool",
        Value::Number(n) if n.is_f64() => "!!float",
        Value::Number(_) => "!!int",
        _ => "!!str",
    };
    let kept = tag_of(target);
    let fits = match (target, &read) {
        (Value::Null, Value::Null) | (Value::Bool(_), Value::Bool(_)) => true,
        (Value::Number(was), Value::Number(now)) => was.is_f64() || !now.is_f64(),
        _ => false,
    };
    if fits {
        return Ok(read);
    }
    Err(WriteError::TagMismatch {
        found: tag_of(&read),
        tag: kept,
    })
}

fn retyped_number(text: &str) -> Value {
    if let Ok(i) = text.parse::<i64>() {
        return Value::from(i);
    }
    if let Ok(f) = text.parse::<f64>()
        && let Some(n) = crate::value::Number::from_f64(f)
    {
        return Value::Number(n);
    }
    Value::String(text.to_string())
}
