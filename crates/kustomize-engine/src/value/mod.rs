//! The JSON data model of the kustomize engine and the YAML reader and printer: `Value` and
//! `Map` with serde_json's interface, but maps small enough that a build of many tiny objects
//! stays near the size of its text (see [`map`]).
//!
//! Values enter from YAML text (`crate::yaml`) or from `serde_json` values ([`From`] both
//! ways, [`json!`](crate::json)); they leave as YAML text or, at the engine's edge, as
//! `serde_json::Value`s for the API client. Numbers are `serde_json::Number`s that remember
//! a YAML spelling differing from their own ([`number`]).

pub mod map;
pub mod number;

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, Serializer};

pub use map::{Entry, Map};
pub use number::Number;

/// A JSON value; see the module docs.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub enum Value {
    #[default]
    Null,
    Bool(bool),
    Number(Number),
    String(String),
    Array(Vec<Value>),
    Object(Map),
}

/// Builds a [`Value`] with `serde_json::json!`'s syntax.
#[macro_export]
macro_rules! json {
    ($($json:tt)+) => {
        $crate::value::Value::from(::serde_json::json!($($json)+))
    };
}

static NULL: Value = Value::Null;

/// What a [`Value`] can be indexed by: a key of an object or a position in an array.
pub trait Index {
    fn index_into<'v>(&self, value: &'v Value) -> Option<&'v Value>;
    fn index_into_mut<'v>(&self, value: &'v mut Value) -> Option<&'v mut Value>;
    /// For `value[index] = …`: a null becomes an empty object first, as in serde_json.
    fn index_or_insert<'v>(&self, value: &'v mut Value) -> &'v mut Value;
}

impl Index for usize {
    fn index_into<'v>(&self, value: &'v Value) -> Option<&'v Value> {
        value.as_array().and_then(|items| items.get(*self))
    }
    fn index_into_mut<'v>(&self, value: &'v mut Value) -> Option<&'v mut Value> {
        value.as_array_mut().and_then(|items| items.get_mut(*self))
    }
    fn index_or_insert<'v>(&self, value: &'v mut Value) -> &'v mut Value {
        let kind = value.kind();
        match value.as_array_mut() {
            Some(items) => {
                let len = items.len();
                items.get_mut(*self).unwrap_or_else(|| {
                    panic!("cannot access index {self} of JSON array of length {len}")
                })
            }
            None => panic!("cannot access index {self} of JSON {kind}"),
        }
    }
}

impl Index for str {
    fn index_into<'v>(&self, value: &'v Value) -> Option<&'v Value> {
        value.as_object().and_then(|map| map.get(self))
    }
    fn index_into_mut<'v>(&self, value: &'v mut Value) -> Option<&'v mut Value> {
        value.as_object_mut().and_then(|map| map.get_mut(self))
    }
    fn index_or_insert<'v>(&self, value: &'v mut Value) -> &'v mut Value {
        if value.is_null() {
            *value = Value::Object(Map::new());
        }
        let kind = value.kind();
        match value {
            Value::Object(map) => map.entry(self).or_insert(Value::Null),
            _ => panic!("cannot access key {self:?} in JSON {kind}"),
        }
    }
}

impl Index for String {
    fn index_into<'v>(&self, value: &'v Value) -> Option<&'v Value> {
        self.as_str().index_into(value)
    }
    fn index_into_mut<'v>(&self, value: &'v mut Value) -> Option<&'v mut Value> {
        self.as_str().index_into_mut(value)
    }
    fn index_or_insert<'v>(&self, value: &'v mut Value) -> &'v mut Value {
        self.as_str().index_or_insert(value)
    }
}

impl<T: Index + ?Sized> Index for &T {
    fn index_into<'v>(&self, value: &'v Value) -> Option<&'v Value> {
        (**self).index_into(value)
    }
    fn index_into_mut<'v>(&self, value: &'v mut Value) -> Option<&'v mut Value> {
        (**self).index_into_mut(value)
    }
    fn index_or_insert<'v>(&self, value: &'v mut Value) -> &'v mut Value {
        (**self).index_or_insert(value)
    }
}

impl<I: Index> std::ops::Index<I> for Value {
    type Output = Value;

    /// A missing key or position reads as null, as in serde_json.
    fn index(&self, index: I) -> &Value {
        index.index_into(self).unwrap_or(&NULL)
    }
}

impl<I: Index> std::ops::IndexMut<I> for Value {
    fn index_mut(&mut self, index: I) -> &mut Value {
        index.index_or_insert(self)
    }
}

impl Value {
    pub fn get<I: Index>(&self, index: I) -> Option<&Value> {
        index.index_into(self)
    }

    pub fn get_mut<I: Index>(&mut self, index: I) -> Option<&mut Value> {
        index.index_into_mut(self)
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }
    pub fn is_boolean(&self) -> bool {
        matches!(self, Value::Bool(_))
    }
    pub fn is_number(&self) -> bool {
        matches!(self, Value::Number(_))
    }
    pub fn is_string(&self) -> bool {
        matches!(self, Value::String(_))
    }
    pub fn is_array(&self) -> bool {
        matches!(self, Value::Array(_))
    }
    pub fn is_object(&self) -> bool {
        matches!(self, Value::Object(_))
    }
    pub fn is_i64(&self) -> bool {
        self.as_number().is_some_and(|n| n.is_i64())
    }
    pub fn is_u64(&self) -> bool {
        self.as_number().is_some_and(|n| n.is_u64())
    }
    pub fn is_f64(&self) -> bool {
        self.as_number().is_some_and(|n| n.is_f64())
    }

    pub fn as_null(&self) -> Option<()> {
        self.is_null().then_some(())
    }
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }
    pub fn as_number(&self) -> Option<&Number> {
        match self {
            Value::Number(n) => Some(n),
            _ => None,
        }
    }
    pub fn as_i64(&self) -> Option<i64> {
        self.as_number().and_then(|n| n.as_i64())
    }
    pub fn as_u64(&self) -> Option<u64> {
        self.as_number().and_then(|n| n.as_u64())
    }
    pub fn as_f64(&self) -> Option<f64> {
        self.as_number().and_then(|n| n.as_f64())
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }
    pub fn as_array(&self) -> Option<&Vec<Value>> {
        match self {
            Value::Array(items) => Some(items),
            _ => None,
        }
    }
    pub fn as_array_mut(&mut self) -> Option<&mut Vec<Value>> {
        match self {
            Value::Array(items) => Some(items),
            _ => None,
        }
    }
    pub fn as_object(&self) -> Option<&Map> {
        match self {
            Value::Object(map) => Some(map),
            _ => None,
        }
    }
    pub fn as_object_mut(&mut self) -> Option<&mut Map> {
        match self {
            Value::Object(map) => Some(map),
            _ => None,
        }
    }

    /// Takes the value out, leaving null.
    pub fn take(&mut self) -> Value {
        std::mem::take(self)
    }

    /// The value at an RFC 6901 JSON pointer.
    pub fn pointer(&self, pointer: &str) -> Option<&Value> {
        pointer_tokens(pointer)?.try_fold(self, |target, token| match target {
            Value::Object(map) => map.get(token.as_ref()),
            Value::Array(items) => array_position(&token).and_then(|i| items.get(i)),
            _ => None,
        })
    }

    /// The value at an RFC 6901 JSON pointer, to change it.
    pub fn pointer_mut(&mut self, pointer: &str) -> Option<&mut Value> {
        pointer_tokens(pointer)?.try_fold(self, |target, token| match target {
            Value::Object(map) => map.get_mut(token.as_ref()),
            Value::Array(items) => array_position(&token).and_then(move |i| items.get_mut(i)),
            _ => None,
        })
    }

    /// Gives back spare capacity throughout, for values that are done growing.
    pub fn shrink_to_fit(&mut self) {
        match self {
            Value::String(s) => s.shrink_to_fit(),
            Value::Array(items) => {
                items.shrink_to_fit();
                items.iter_mut().for_each(Value::shrink_to_fit);
            }
            Value::Object(map) => {
                map.shrink_to_fit();
                map.values_mut().for_each(Value::shrink_to_fit);
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }

    /// Every number inside, spelled as it prints: what a value rebuilt from JSON holds.
    pub fn forget_spellings(&mut self) {
        match self {
            Value::Number(n) => n.forget_spelling(),
            Value::Array(items) => items.iter_mut().for_each(Value::forget_spellings),
            Value::Object(map) => map.values_mut().for_each(Value::forget_spellings),
            Value::Null | Value::Bool(_) | Value::String(_) => {}
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        }
    }
}

/// The unescaped tokens of an RFC 6901 pointer (none for `""`, the whole value); `None` when
/// the pointer does not start with `/`.
fn pointer_tokens(pointer: &str) -> Option<impl Iterator<Item = Cow<'_, str>>> {
    let rest = match pointer {
        "" => None,
        _ => Some(pointer.strip_prefix('/')?),
    };
    Some(
        rest.into_iter()
            .flat_map(|rest| rest.split('/'))
            .map(|token| {
                // Most paths (`/metadata/name`) have nothing to unescape and need no copy.
                if token.contains('~') {
                    Cow::Owned(token.replace("~1", "/").replace("~0", "~"))
                } else {
                    Cow::Borrowed(token)
                }
            }),
    )
}

/// A JSON pointer's array position: digits without a leading zero (RFC 6901).
fn array_position(token: &str) -> Option<usize> {
    if token.starts_with('+') || (token.starts_with('0') && token.len() > 1) {
        return None;
    }
    token.parse().ok()
}

impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => f.write_str("Null"),
            Value::Bool(b) => write!(f, "Bool({b})"),
            Value::Number(n) => write!(f, "Number({n})"),
            Value::String(s) => write!(f, "String({s:?})"),
            Value::Array(items) => {
                f.write_str("Array ")?;
                f.debug_list().entries(items).finish()
            }
            Value::Object(map) => {
                f.write_str("Object ")?;
                fmt::Debug::fmt(map, f)
            }
        }
    }
}

/// Compact JSON; `{:#}` indents it.
impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = if f.alternate() {
            serde_json::to_string_pretty(self)
        } else {
            serde_json::to_string(self)
        };
        f.write_str(&text.map_err(|_| fmt::Error)?)
    }
}

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::Null => serializer.serialize_unit(),
            Value::Bool(b) => serializer.serialize_bool(*b),
            Value::Number(n) => n.serialize(serializer),
            Value::String(s) => serializer.serialize_str(s),
            Value::Array(items) => items.serialize(serializer),
            Value::Object(map) => map.serialize(serializer),
        }
    }
}

impl Serialize for Map {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut out = serializer.serialize_map(Some(self.len()))?;
        for (k, v) in self {
            out.serialize_entry(k, v)?;
        }
        out.end()
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(ValueVisitor)
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }
    fn visit_i64<E>(self, n: i64) -> Result<Value, E> {
        Ok(Value::Number(n.into()))
    }
    fn visit_u64<E>(self, n: u64) -> Result<Value, E> {
        Ok(Value::Number(n.into()))
    }
    fn visit_f64<E>(self, n: f64) -> Result<Value, E> {
        Ok(Number::from_f64(n).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_string()))
    }
    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        Value::deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut map = Map::new();
        while let Some((k, v)) = access.next_entry::<String, Value>()? {
            map.insert(k, v);
        }
        Ok(Value::Object(map))
    }
}

impl From<serde_json::Value> for Value {
    fn from(value: serde_json::Value) -> Value {
        match value {
            serde_json::Value::Null => Value::Null,
            serde_json::Value::Bool(b) => Value::Bool(b),
            serde_json::Value::Number(n) => Value::Number(n.into()),
            serde_json::Value::String(s) => Value::String(s),
            serde_json::Value::Array(items) => {
                Value::Array(items.into_iter().map(Value::from).collect())
            }
            serde_json::Value::Object(map) => {
                Value::Object(map.into_iter().map(|(k, v)| (k, Value::from(v))).collect())
            }
        }
    }
}

impl From<Value> for serde_json::Value {
    fn from(value: Value) -> serde_json::Value {
        match value {
            Value::Null => serde_json::Value::Null,
            Value::Bool(b) => serde_json::Value::Bool(b),
            Value::Number(n) => serde_json::Value::Number(n.into_json()),
            Value::String(s) => serde_json::Value::String(s),
            Value::Array(items) => {
                serde_json::Value::Array(items.into_iter().map(serde_json::Value::from).collect())
            }
            Value::Object(map) => serde_json::Value::Object(
                map.into_iter()
                    .map(|(k, v)| (k, serde_json::Value::from(v)))
                    .collect(),
            ),
        }
    }
}

impl From<&Value> for serde_json::Value {
    fn from(value: &Value) -> serde_json::Value {
        serde_json::Value::from(value.clone())
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Bool(b)
    }
}
impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::String(s)
    }
}
impl From<&String> for Value {
    fn from(s: &String) -> Value {
        Value::String(s.clone())
    }
}
impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::String(s.to_string())
    }
}
impl From<Number> for Value {
    fn from(n: Number) -> Value {
        Value::Number(n)
    }
}
impl From<Map> for Value {
    fn from(map: Map) -> Value {
        Value::Object(map)
    }
}
impl From<f64> for Value {
    /// A non-finite float is null, as in serde_json.
    fn from(n: f64) -> Value {
        Number::from_f64(n).map_or(Value::Null, Value::Number)
    }
}
impl<T: Into<Value>> From<Vec<T>> for Value {
    fn from(items: Vec<T>) -> Value {
        Value::Array(items.into_iter().map(Into::into).collect())
    }
}
impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(value: Option<T>) -> Value {
        value.map_or(Value::Null, Into::into)
    }
}

macro_rules! from_integer {
    ($($ty:ty)*) => {
        $(impl From<$ty> for Value {
            fn from(n: $ty) -> Value {
                Value::Number(n.into())
            }
        })*
    };
}
from_integer!(i8 i16 i32 i64 isize u8 u16 u32 u64 usize);

impl<T: Into<Value>> FromIterator<T> for Value {
    fn from_iter<I: IntoIterator<Item = T>>(items: I) -> Value {
        Value::Array(items.into_iter().map(Into::into).collect())
    }
}

impl PartialEq<str> for Value {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == Some(other)
    }
}
impl PartialEq<&str> for Value {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == Some(*other)
    }
}
impl PartialEq<String> for Value {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == Some(other.as_str())
    }
}
impl PartialEq<bool> for Value {
    fn eq(&self, other: &bool) -> bool {
        self.as_bool() == Some(*other)
    }
}
macro_rules! eq_number {
    ($($ty:ty => $as:ident: $wide:ty),*) => {
        $(impl PartialEq<$ty> for Value {
            fn eq(&self, other: &$ty) -> bool {
                self.$as().is_some_and(|n| n == *other as $wide)
            }
        })*
    };
}
eq_number!(i8 => as_i64: i64, i16 => as_i64: i64, i32 => as_i64: i64, i64 => as_i64: i64,
    isize => as_i64: i64, u8 => as_u64: u64, u16 => as_u64: u64, u32 => as_u64: u64,
    u64 => as_u64: u64, usize => as_u64: u64, f32 => as_f64: f64, f64 => as_f64: f64);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_object_costs_far_less_than_a_btree_node() {
        assert_eq!(std::mem::size_of::<Value>(), 32);
        assert_eq!(std::mem::size_of::<Map>(), 24);
    }

    #[test]
    fn converts_both_ways_with_serde_json_and_prints_the_same_json() {
        let original = serde_json::json!({"b": [1, -2, 1.5, null, true], "a": {"x": "y"}});
        let ours = Value::from(original.clone());
        assert_eq!(ours.to_string(), original.to_string());
        assert_eq!(serde_json::Value::from(ours.clone()), original);
        let parsed: Value = serde_json::from_str(&original.to_string()).unwrap();
        assert_eq!(parsed, ours);
    }

    #[test]
    fn indexes_read_null_when_missing_and_insert_into_null() {
        let mut value = Value::Null;
        value["metadata"]["name"] = Value::from("x");
        assert_eq!(value["metadata"]["name"], "x");
        assert!(value["spec"]["missing"].is_null());
        assert!(value[3].is_null());
        assert_eq!(value.pointer("/metadata/name"), Some(&Value::from("x")));
        assert_eq!(value.pointer(""), Some(&value));
        assert_eq!(value.pointer("metadata"), None);
    }

    #[test]
    fn pointers_unescape_tokens_and_read_array_positions() {
        let mut value = json!({"a/b": {"~c": [10, 20]}});
        assert_eq!(value.pointer("/a~1b/~0c/1"), Some(&Value::from(20u64)));
        assert_eq!(value.pointer("/a~1b/~0c/01"), None);
        *value.pointer_mut("/a~1b/~0c/0").unwrap() = Value::Null;
        assert_eq!(value, json!({"a/b": {"~c": [null, 20]}}));
    }
}
