//! JSON 6902 patches as kustomize applies them (gopkg.in/evanphx/json-patch.v4).
//!
//! kustomize's patch library is more lenient than RFC 6902, and kustomizations in use rely
//! on it: `replace` of a missing member adds it, `copy` from a missing member copies null,
//! an operation without `value` uses null, a `test` for null passes on a missing member,
//! negative indices count from the end, a `~` not followed by `0` or `1` is kept as written,
//! and a path without its leading `/` names its last step in the object itself. Operations
//! are only read when they are applied, so a malformed one in a patch that selects nothing is
//! no error. No crate does this (the `json-patch` crate follows the RFC), hence this module.
//!
//! Data flow: [`JsonPatch::decode`] takes the patch document (a list of operation mappings,
//! as read from JSON or YAML 1.1), [`JsonPatch::apply`] runs its operations in order on one
//! object, stopping at the first that fails.

use serde_json::{Map, Value};

/// A decoded JSON 6902 patch: its operations, unread until applied (`None` for a `null`).
#[derive(Debug, Clone, PartialEq)]
pub struct JsonPatch(Vec<Option<Map<String, Value>>>);

/// Why a patch document is no list of operations.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    #[error("json: cannot unmarshal {0} into Go value of type jsonpatch.Patch")]
    NotAList(&'static str),
    #[error("json: cannot unmarshal {0} into Go value of type jsonpatch.Operation")]
    NotAnOperation(&'static str),
}

/// Why an operation could not be applied, worded as kustomize's library words it.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum OperationError {
    #[error("Unexpected kind: {0}")]
    UnexpectedKind(String),
    #[error("{op} operation failed to decode {field}: {cause}")]
    Unreadable {
        op: &'static str,
        field: &'static str,
        cause: String,
    },
    #[error("{op} operation does not apply: {missing}: missing value")]
    DoesNotApply { op: &'static str, missing: String },
    #[error("{context}: {cause}")]
    InContainer {
        context: String,
        cause: ContainerError,
    },
    #[error("testing value {0} failed: test failed")]
    TestFailed(String),
    #[error("replace operation value must be object or array")]
    NoDocumentValue,
    #[error("the patched object grows past {} MiB", .0 >> 20)]
    TooLarge(usize),
}

/// Why a member or element could not be read, set, added or removed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ContainerError {
    #[error("Unable to remove nonexistent key: {0}: missing value")]
    NoSuchKey(String),
    #[error("Unable to access invalid index: {0}: invalid index referenced")]
    InvalidIndex(i64),
    #[error("strconv.Atoi: parsing {key:?}: {}", if *.out_of_range { "value out of range" } else { "invalid syntax" })]
    NotAnIndex { key: String, out_of_range: bool },
    #[error("value was not a proper array index: '{0}': {1}")]
    NotAnInsertIndex(String, Box<ContainerError>),
}

impl JsonPatch {
    /// The operations of a patch document, each a mapping (or null) as Go decodes a
    /// `jsonpatch.Patch`; their fields are read when applied.
    pub fn decode(document: Value) -> Result<JsonPatch, DecodeError> {
        let Value::Array(items) = document else {
            return Err(DecodeError::NotAList(go_type_name(&document)));
        };
        items
            .into_iter()
            .map(|item| match item {
                Value::Object(operation) => Ok(Some(operation)),
                Value::Null => Ok(None),
                other => Err(DecodeError::NotAnOperation(go_type_name(&other))),
            })
            .collect::<Result<_, _>>()
            .map(JsonPatch)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Applies every operation in order. `max_bytes` bounds what `add` and `copy` may grow
    /// the object to (each can double it).
    pub fn apply(&self, document: &mut Value, max_bytes: usize) -> Result<(), OperationError> {
        let empty = Map::new();
        for operation in &self.0 {
            let operation = Operation(operation.as_ref().unwrap_or(&empty));
            let kind = operation.kind();
            match kind.as_str() {
                "add" => operation.add(document)?,
                "remove" => operation.remove(document)?,
                "replace" => operation.replace(document)?,
                "move" => operation.move_value(document)?,
                "test" => operation.test(document)?,
                "copy" => operation.copy(document)?,
                _ => return Err(OperationError::UnexpectedKind(kind)),
            }
            if matches!(kind.as_str(), "add" | "copy") && exceeds_bytes(document, max_bytes) {
                return Err(OperationError::TooLarge(max_bytes));
            }
        }
        Ok(())
    }
}

/// The name Go's decoder gives a JSON value's type in its messages.
fn go_type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// One operation's fields.
struct Operation<'p>(&'p Map<String, Value>);

/// How a string field was found: a null counts as missing, as Go reads a null into a nil
/// pointer.
enum Field<'p> {
    Missing,
    NotAString(&'static str),
    Text(&'p str),
}

impl<'p> Operation<'p> {
    fn field(&self, name: &str) -> Field<'p> {
        match self.0.get(name) {
            None | Some(Value::Null) => Field::Missing,
            Some(Value::String(text)) => Field::Text(text),
            Some(other) => Field::NotAString(go_type_name(other)),
        }
    }

    fn kind(&self) -> String {
        match self.field("op") {
            Field::Text(kind) => kind.to_string(),
            _ => "unknown".to_string(),
        }
    }

    /// `path`, or why it cannot be read. `add`, `remove` and `copy` word a missing or
    /// malformed path alike; the others tell which it was.
    fn path(&self, op: &'static str) -> Result<&'p str, OperationError> {
        self.string_field(op, "path", "operation missing path field")
    }

    fn from(&self, op: &'static str) -> Result<&'p str, OperationError> {
        self.string_field(op, "from", "operation, missing from field")
    }

    fn string_field(
        &self,
        op: &'static str,
        name: &'static str,
        missing: &str,
    ) -> Result<&'p str, OperationError> {
        let terse = name == "path" && matches!(op, "add" | "remove" | "copy");
        let cause = match self.field(name) {
            Field::Text(text) => return Ok(text),
            _ if terse => "missing value".to_string(),
            Field::Missing => format!("{missing}: missing value"),
            Field::NotAString(found) => {
                format!("json: cannot unmarshal {found} into Go value of type string")
            }
        };
        Err(OperationError::Unreadable {
            op,
            field: name,
            cause,
        })
    }

    /// `value`: `None` when absent, `Some(Null)` when written as null (Go tells them apart
    /// only in `test`).
    fn value(&self) -> Option<&'p Value> {
        self.0.get("value")
    }

    fn add(&self, document: &mut Value) -> Result<(), OperationError> {
        let path = self.path("add")?;
        let (container, key) = locate(document, path)
            .ok_or_else(|| missing("add", "doc is missing path:", quoted(path)))?;
        add(
            container,
            &key,
            self.value().cloned().unwrap_or(Value::Null),
        )
        .map_err(|cause| in_container(format!("error in add for path: '{path}'"), cause))
    }

    fn remove(&self, document: &mut Value) -> Result<(), OperationError> {
        let path = self.path("remove")?;
        let (container, key) = locate(document, path)
            .ok_or_else(|| missing("remove", "doc is missing path:", quoted(path)))?;
        remove(container, &key)
            .map_err(|cause| in_container(format!("error in remove for path: '{path}'"), cause))
    }

    fn replace(&self, document: &mut Value) -> Result<(), OperationError> {
        let path = self.path("replace")?;
        if path.is_empty() {
            return match self.value() {
                Some(value @ (Value::Object(_) | Value::Array(_))) => {
                    *document = value.clone();
                    Ok(())
                }
                _ => Err(OperationError::NoDocumentValue),
            };
        }
        let (container, key) = locate(document, path)
            .ok_or_else(|| missing("replace", "doc is missing path:", path.to_string()))?;
        get(container, &key)
            .map_err(|_| missing("replace", "doc is missing key:", path.to_string()))?;
        set(
            container,
            &key,
            self.value().cloned().unwrap_or(Value::Null),
        )
        .map_err(|cause| in_container(format!("error in remove for path: '{path}'"), cause))
    }

    fn move_value(&self, document: &mut Value) -> Result<(), OperationError> {
        let from = self.from("move")?;
        let (container, key) = locate(document, from)
            .ok_or_else(|| missing("move", "doc is missing from path:", from.to_string()))?;
        let context = || format!("error in move for path: '{key}'");
        let value = get(container, &key)
            .map_err(|cause| in_container(context(), cause))?
            .cloned()
            .unwrap_or(Value::Null);
        remove(container, &key).map_err(|cause| in_container(context(), cause))?;
        let path = self.path("move")?;
        let (container, key) = locate(document, path)
            .ok_or_else(|| missing("move", "doc is missing destination path:", path.to_string()))?;
        add(container, &key, value)
            .map_err(|cause| in_container(format!("error in move for path: '{path}'"), cause))
    }

    fn test(&self, document: &mut Value) -> Result<(), OperationError> {
        let path = self.path("test")?;
        let failed = || OperationError::TestFailed(path.to_string());
        if path.is_empty() {
            return match self.value() {
                Some(expected) if expected == document => Ok(()),
                _ => Err(failed()),
            };
        }
        let (container, key) = locate(document, path)
            .ok_or_else(|| missing("test", "is missing path:", path.to_string()))?;
        let found = get(container, &key)
            .map_err(|cause| in_container(format!("error in test for path: '{path}'"), cause))?;
        match (found, self.value()) {
            // A missing member and a null one are both nil to Go, and equal to a null or
            // missing value.
            (None, None | Some(Value::Null)) => Ok(()),
            (Some(found), Some(expected)) if found == expected => Ok(()),
            _ => Err(failed()),
        }
    }

    fn copy(&self, document: &mut Value) -> Result<(), OperationError> {
        let from = self.from("copy")?;
        let (container, key) = locate(document, from)
            .ok_or_else(|| missing("copy", "doc is missing from path:", from.to_string()))?;
        let value = get(container, &key)
            .map_err(|cause| in_container(format!("error in copy for from: '{from}'"), cause))?
            .cloned()
            .unwrap_or(Value::Null);
        let path = self.path("copy")?;
        let (container, key) = locate(document, path)
            .ok_or_else(|| missing("copy", "doc is missing destination path:", path.to_string()))?;
        add(container, &key, value).map_err(|cause| {
            in_container("error while adding value during copy".to_string(), cause)
        })
    }
}

fn missing(op: &'static str, what: &str, path: String) -> OperationError {
    OperationError::DoesNotApply {
        op,
        missing: format!("{what} {path}"),
    }
}

fn quoted(path: &str) -> String {
    format!("\"{path}\"")
}

fn in_container(context: String, cause: ContainerError) -> OperationError {
    OperationError::InContainer { context, cause }
}

/// The mapping or list holding a path's last step, and that step unescaped. Steps before
/// the last are followed through members and elements; a missing, null or scalar one ends
/// the search. As in Go, the text before the first `/` is not a step.
fn locate<'d>(document: &'d mut Value, path: &str) -> Option<(&'d mut Value, String)> {
    let steps: Vec<&str> = path.split('/').collect();
    let (last, inner) = steps.split_last()?;
    let inner = inner.get(1..)?;
    let mut container = document;
    for step in inner {
        container = match container {
            Value::Object(members) => members.get_mut(&unescape(step)),
            Value::Array(elements) => {
                let index = element_index(&unescape(step), elements.len()).ok()?;
                elements.get_mut(index)
            }
            _ => None,
        }
        .filter(|child| child.is_object() || child.is_array())?;
    }
    Some((container, unescape(last)))
}

/// RFC 6901's unescaping as Go's replacer does it: one pass, `~1` to `/` and `~0` to `~`,
/// any other `~` kept.
fn unescape(step: &str) -> String {
    let mut unescaped = String::with_capacity(step.len());
    let mut rest = step;
    while let Some(at) = rest.find('~') {
        unescaped.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        match after.as_bytes().first() {
            Some(b'1') => unescaped.push('/'),
            Some(b'0') => unescaped.push('~'),
            _ => {
                unescaped.push('~');
                rest = after;
                continue;
            }
        }
        rest = &after[1..];
    }
    unescaped.push_str(rest);
    unescaped
}

/// A list index as Go's `strconv.Atoi` reads it (a sign and leading zeros allowed).
fn parse_index(key: &str) -> Result<i64, ContainerError> {
    key.parse::<i64>().map_err(|e| ContainerError::NotAnIndex {
        key: key.to_string(),
        out_of_range: matches!(
            e.kind(),
            std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow
        ),
    })
}

/// The element a key names in a list of `len`; negative indices count from the end.
fn element_index(key: &str, len: usize) -> Result<usize, ContainerError> {
    let index = parse_index(key)?;
    let len = len as i64;
    if index < -len {
        return Err(ContainerError::InvalidIndex(index));
    }
    let resolved = if index < 0 { index + len } else { index };
    if resolved >= len {
        return Err(ContainerError::InvalidIndex(resolved));
    }
    Ok(resolved as usize)
}

/// The member or element a key names; `None` for a missing or null member or a null
/// element, as Go holds both as nil.
fn get<'d>(container: &'d Value, key: &str) -> Result<Option<&'d Value>, ContainerError> {
    let found = match container {
        Value::Object(members) => members.get(key),
        Value::Array(elements) => elements.get(element_index(key, elements.len())?),
        _ => None,
    };
    Ok(found.filter(|value| !value.is_null()))
}

/// Sets a member, or an element [`get`] has found.
fn set(container: &mut Value, key: &str, value: Value) -> Result<(), ContainerError> {
    match container {
        Value::Object(members) => {
            members.insert(key.to_string(), value);
        }
        Value::Array(elements) => {
            let index = element_index(key, elements.len())?;
            elements[index] = value;
        }
        _ => {}
    }
    Ok(())
}

/// Adds or overwrites a member, or inserts an element before an index (`-` or the length
/// appends; negative indices count from the end, `-1` appending).
fn add(container: &mut Value, key: &str, value: Value) -> Result<(), ContainerError> {
    match container {
        Value::Object(members) => {
            members.insert(key.to_string(), value);
        }
        Value::Array(elements) if key == "-" => elements.push(value),
        Value::Array(elements) => {
            let index = parse_index(key).map_err(|cause| {
                ContainerError::NotAnInsertIndex(key.to_string(), Box::new(cause))
            })?;
            let slots = elements.len() as i64 + 1;
            if index >= slots || index < -slots {
                return Err(ContainerError::InvalidIndex(index));
            }
            let index = if index < 0 { index + slots } else { index };
            elements.insert(index as usize, value);
        }
        _ => {}
    }
    Ok(())
}

/// Removes a member that is there (null or not), or an element.
fn remove(container: &mut Value, key: &str) -> Result<(), ContainerError> {
    match container {
        Value::Object(members) => {
            members
                .remove(key)
                .ok_or_else(|| ContainerError::NoSuchKey(key.to_string()))?;
        }
        Value::Array(elements) => {
            let index = parse_index(key)?;
            let len = elements.len() as i64;
            if index >= len || index < -len {
                return Err(ContainerError::InvalidIndex(index));
            }
            elements.remove(if index < 0 { index + len } else { index } as usize);
        }
        _ => {}
    }
    Ok(())
}

/// Whether `value` takes more than `limit` bytes written as JSON (about: punctuation is
/// counted a byte per value and key). Stops counting at the limit.
fn exceeds_bytes(value: &Value, limit: usize) -> bool {
    let mut total = 0usize;
    let mut pending = vec![value];
    while let Some(value) = pending.pop() {
        total += match value {
            Value::String(text) => text.len() + 2,
            Value::Object(map) => {
                pending.extend(map.values());
                map.keys().map(|k| k.len() + 4).sum::<usize>() + 2
            }
            Value::Array(items) => {
                pending.extend(items);
                2 + items.len()
            }
            _ => 8,
        };
        if total > limit {
            return true;
        }
    }
    false
}

#[cfg(test)]
#[path = "json6902_tests.rs"]
mod tests;
