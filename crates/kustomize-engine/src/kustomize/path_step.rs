//! One step of a kyaml path lookup (`PathGetter`, which `LookupCreate` and kustomize's
//! field lookups use): a name is read as Go's `strconv.Atoi` would (an index), `-` (the last
//! element), `*` (refused), `[key=value]` (an element match) or a field. The ValueAdd
//! transformer walks such steps; field specs refuse every list step where they meet a
//! mapping.

use crate::value::Value;

/// kyaml's element match (`ElementMatcher`, exact): `[=value]` compares the element's own
/// text (a mapping's or a list's is empty), `[key=value]` the text of a mapping element's
/// field. Replacement targets match differently (a regex, `PathMatcher`).
pub(super) fn element_matches(item: &Value, key: &str, wanted: &str) -> bool {
    use super::replacements::kyaml_text;
    if key.is_empty() {
        return kyaml_text(item) == wanted;
    }
    item.as_object()
        .and_then(|map| map.get(key))
        .is_some_and(|field| kyaml_text(field) == wanted)
}

/// One step of a kyaml `PathGetter` path, read only when the walk reaches it (a step after
/// one that finds nothing is never read, so never refused).
#[derive(Debug, PartialEq)]
pub(super) enum Step<'p> {
    /// `0`, `+1`, `01`: the element at that index, if there is one.
    Index(usize),
    /// `-`: the last element.
    Last,
    /// `[key=value]` (or `[=value]`, a list of scalars): the first element that matches,
    /// added when none does.
    Element(&'p str, &'p str),
    /// A mapping's field, added when missing.
    Field(&'p str),
}

impl<'p> Step<'p> {
    /// The step `part` names, or kyaml's refusal of it.
    pub(super) fn parse(part: &'p str) -> Result<Step<'p>, String> {
        match part.parse::<i64>() {
            Ok(index) if index < 0 => Err(format!("array index {index} cannot be negative")),
            Ok(index) => Ok(Step::Index(usize::try_from(index).unwrap_or(usize::MAX))),
            Err(_) if part == "-" => Ok(Step::Last),
            Err(_) if part == "*" => Err("wildcard is not supported in PathGetter".into()),
            Err(_) if part.starts_with('[') && part.ends_with(']') => {
                let inner = part.strip_suffix(']').unwrap_or(part);
                let inner = inner.strip_prefix('[').unwrap_or(inner);
                inner
                    .split_once('=')
                    .map(|(key, value)| Step::Element(key, value))
                    .ok_or_else(|| {
                        "list path element must contain fieldName=fieldValue for element to match"
                            .into()
                    })
            }
            Err(_) => Ok(Step::Field(part)),
        }
    }
}
