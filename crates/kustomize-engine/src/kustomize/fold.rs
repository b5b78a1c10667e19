//! Field names matched as Go's `encoding/json` matches them, which is how kustomize decodes
//! kustomization files and replacement files: a key names the field it spells exactly, else
//! the field it spells in another letter case (`RESOURCES`, `fieldref`), and where two keys
//! name one field the one that sorts last wins (kustomize turns YAML into JSON with sorted
//! keys first).
//!
//! [`Folded`] wraps a JSON value as a serde deserializer that renames the keys of every
//! object decoded into a struct to the struct's own field names before serde sees them;
//! maps (labels, annotations) keep their keys as written.

use crate::value::{Map, Value};
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor};

/// A field Go decodes a null into as its zero value, for fields serde reads outside
/// [`Folded`] (below a `#[serde(flatten)]`, which buffers the values first):
/// `#[serde(default, deserialize_with = "go_zero")]`.
pub fn go_zero<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + serde::Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Option::unwrap_or_default)
}

/// A string field sigs.k8s.io/yaml finds no type for when it turns a builtin plugin's
/// configuration into JSON: one kustomize promotes from an embedded inline struct (`Gvk` in a
/// field spec, `ResId` in a selector), or one under a list of pointers (a replacement target's
/// field paths). A number or a boolean there stays one and Go's decoding refuses it, where any
/// other string field takes its text. A null is Go's zero value.
pub fn json_typed_string<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<String, D::Error> {
    struct Text;
    impl Visitor<'_> for Text {
        type Value = String;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a string")
        }
        fn visit_str<E: de::Error>(self, text: &str) -> Result<String, E> {
            Ok(text.to_string())
        }
        fn visit_string<E: de::Error>(self, text: String) -> Result<String, E> {
            Ok(text)
        }
        fn visit_unit<E: de::Error>(self) -> Result<String, E> {
            Ok(String::new())
        }
        fn visit_none<E: de::Error>(self) -> Result<String, E> {
            Ok(String::new())
        }
    }
    deserializer.deserialize_any(Text)
}

/// A list of [`json_typed_string`]s; null is an empty one.
pub fn json_typed_strings<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<String>, D::Error> {
    #[derive(serde::Deserialize)]
    struct Text(#[serde(deserialize_with = "json_typed_string")] String);
    let items: Option<Vec<Text>> = serde::Deserialize::deserialize(deserializer)?;
    Ok(items
        .unwrap_or_default()
        .into_iter()
        .map(|Text(text)| text)
        .collect())
}

/// A value to decode with Go's field matching. `lenient` drops keys that name no field, as
/// Go's non-strict decoding ignores them.
pub struct Folded {
    value: Value,
    lenient: bool,
    /// A number or boolean read into a string field becomes its text, as sigs.k8s.io/yaml
    /// decodes kustomize's builtin plugin configurations (toward their Go types).
    stringify: bool,
}

impl Folded {
    /// Unknown keys stay, for the struct to refuse (`deny_unknown_fields`).
    pub fn strict(value: Value) -> Folded {
        Folded {
            value,
            lenient: false,
            stringify: false,
        }
    }

    /// Unknown keys are dropped.
    pub fn lenient(value: Value) -> Folded {
        Folded {
            value,
            lenient: true,
            stringify: false,
        }
    }

    /// A builtin plugin's configuration: unknown keys dropped, scalars read into string
    /// fields as their text.
    pub fn plugin_config(value: Value) -> Folded {
        Folded {
            value,
            lenient: true,
            stringify: true,
        }
    }

    fn child(&self, value: Value) -> Folded {
        Folded {
            value,
            lenient: self.lenient,
            stringify: self.stringify,
        }
    }
}

/// `map`'s keys renamed to the `fields` they name in any letter case (the last in sorted
/// order winning), unknown keys kept or, when `lenient`, dropped.
pub fn fold_keys(map: Map, fields: &[&str], lenient: bool) -> Map {
    let mut folded = Map::new();
    // The map iterates in sorted key order, as Go sees the keys.
    for (key, value) in map {
        let name = if fields.contains(&key.as_str()) {
            Some(key)
        } else {
            match fields
                .iter()
                .find(|field| go_std::equal_fold_ascii(&key, field))
            {
                Some(field) => Some(field.to_string()),
                None if lenient => None,
                None => Some(key),
            }
        };
        if let Some(name) = name {
            folded.insert(name, value);
        }
    }
    folded
}

/// The values `fold_keys` lets a later spelling overwrite, with the field each names: Go
/// still decodes them (and reports a type error in one), since it decodes every key in turn.
pub fn shadowed_values(map: &Map, fields: &[&str]) -> Vec<(String, Value)> {
    let field_of = |key: &str| {
        fields
            .iter()
            .find(|field| **field == key)
            .or_else(|| fields.iter().find(|f| go_std::equal_fold_ascii(key, f)))
            .map(|field| field.to_string())
    };
    let named: Vec<(String, &Value)> = map
        .iter()
        .filter_map(|(key, value)| field_of(key).map(|field| (field, value)))
        .collect();
    named
        .iter()
        .enumerate()
        .filter(|(index, (field, _))| named[index + 1..].iter().any(|(later, _)| later == field))
        .map(|(_, (field, value))| (field.clone(), (*value).clone()))
        .collect()
}

impl<'de> de::Deserializer<'de> for Folded {
    type Error = serde_json::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        let template = self.child(Value::Null);
        match self.value {
            Value::Array(items) => visitor.visit_seq(FoldedSeq {
                items: items.into_iter(),
                template,
            }),
            Value::Object(map) => visitor.visit_map(FoldedMap {
                entries: map.into_iter(),
                value: None,
                template,
            }),
            other => de::Deserializer::deserialize_any(serde_json::Value::from(other), visitor),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.value {
            Value::Bool(b) if self.stringify => visitor.visit_string(b.to_string()),
            Value::Number(n) if self.stringify => {
                visitor.visit_string(crate::yaml::format_number(&n))
            }
            // Go decodes a null into a string as its zero value.
            Value::Null => visitor.visit_string(String::new()),
            _ => self.deserialize_any(visitor),
        }
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        self.deserialize_string(visitor)
    }

    /// Go decodes a null into a list as an empty (nil) one.
    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.value {
            Value::Null => visitor.visit_seq(FoldedSeq {
                items: Vec::new().into_iter(),
                template: self.child(Value::Null),
            }),
            _ => self.deserialize_any(visitor),
        }
    }

    /// Go decodes a null into a map as an empty (nil) one.
    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.value {
            Value::Null => visitor.visit_map(FoldedMap {
                entries: Map::new().into_iter(),
                value: None,
                template: self.child(Value::Null),
            }),
            _ => self.deserialize_any(visitor),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.value {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        let template = self.child(Value::Null);
        match self.value {
            Value::Object(map) => visitor.visit_map(FoldedMap {
                entries: fold_keys(map, fields, template.lenient).into_iter(),
                value: None,
                template,
            }),
            // Go never reads a list as a struct (serde would, field by field).
            Value::Array(_) => Err(de::Error::invalid_type(de::Unexpected::Seq, &visitor)),
            // Go decodes a null into a struct as its zero value.
            Value::Null => visitor.visit_map(FoldedMap {
                entries: Map::new().into_iter(),
                value: None,
                template,
            }),
            other => de::Deserializer::deserialize_struct(
                serde_json::Value::from(other),
                name,
                fields,
                visitor,
            ),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        de::Deserializer::deserialize_enum(
            serde_json::Value::from(self.value),
            name,
            variants,
            visitor,
        )
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char bytes byte_buf
        unit unit_struct tuple tuple_struct identifier ignored_any
    }
}

struct FoldedSeq {
    items: std::vec::IntoIter<Value>,
    /// Carries the decoding mode to the elements.
    template: Folded,
}

impl<'de> SeqAccess<'de> for FoldedSeq {
    type Error = serde_json::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Self::Error> {
        match self.items.next() {
            Some(value) => seed.deserialize(self.template.child(value)).map(Some),
            None => Ok(None),
        }
    }
}

struct FoldedMap {
    entries: crate::value::map::IntoIter,
    value: Option<Value>,
    /// Carries the decoding mode to the values.
    template: Folded,
}

impl<'de> MapAccess<'de> for FoldedMap {
    type Error = serde_json::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Self::Error> {
        match self.entries.next() {
            Some((key, value)) => {
                self.value = Some(value);
                seed.deserialize(key.into_deserializer()).map(Some)
            }
            None => Ok(None),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, Self::Error> {
        let value = self.value.take().unwrap_or(Value::Null);
        seed.deserialize(self.template.child(value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json;
    use serde::Deserialize;
    use std::collections::BTreeMap;

    #[derive(Debug, Default, Deserialize, PartialEq)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    struct Inner {
        #[serde(default)]
        field_path: String,
    }

    #[derive(Debug, Default, Deserialize, PartialEq)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    struct Outer {
        #[serde(default)]
        name_prefix: String,
        #[serde(default)]
        field_ref: Option<Inner>,
        #[serde(default)]
        items: Vec<Inner>,
        #[serde(default)]
        common_labels: BTreeMap<String, String>,
    }

    #[test]
    fn keys_match_fields_in_any_case_and_the_last_in_sorted_order_wins() {
        let decoded = Outer::deserialize(Folded::strict(json!({
            "NAMEPREFIX": "a-", "fieldref": {"FieldPath": "x"}, "Items": [{"fieldpath": "y"}],
            "commonLABELS": {"KeepCase": "v"}})))
        .unwrap();
        assert_eq!(decoded.name_prefix, "a-");
        assert_eq!(decoded.field_ref.unwrap().field_path, "x");
        assert_eq!(decoded.items[0].field_path, "y");
        assert!(
            decoded.common_labels.contains_key("KeepCase"),
            "maps keep their keys"
        );
        // `namePrefix` < `nameprefix` bytewise: the second wins.
        let both = Outer::deserialize(Folded::strict(
            json!({"namePrefix": "exact-", "nameprefix": "folded-"}),
        ))
        .unwrap();
        assert_eq!(both.name_prefix, "folded-");
    }

    /// Go folds the long `ſ` with `s` (Rust's lowercase does not); map keys stay as written.
    #[test]
    fn the_long_s_folds_as_in_go() {
        let decoded = Outer::deserialize(Folded::strict(
            json!({"commonLabel\u{17f}": {"\u{212a}": "v"}}),
        ))
        .unwrap();
        assert_eq!(decoded.common_labels["\u{212a}"], "v");
    }

    #[test]
    fn a_plugin_configuration_reads_numbers_and_booleans_into_strings_as_their_text() {
        let decoded = Outer::deserialize(Folded::plugin_config(json!({
            "namePrefix": 7, "commonLabels": {"a": true, "b": 42, "c": "x"}})))
        .unwrap();
        assert_eq!(decoded.name_prefix, "7");
        assert_eq!(decoded.common_labels["a"], "true");
        assert_eq!(decoded.common_labels["b"], "42");
        assert!(Outer::deserialize(Folded::lenient(json!({"commonLabels": {"a": true}}))).is_err());
    }

    #[test]
    fn unknown_keys_are_refused_when_strict_and_dropped_when_lenient() {
        assert!(Outer::deserialize(Folded::strict(json!({"bogus": 1}))).is_err());
        assert_eq!(
            Outer::deserialize(Folded::lenient(json!({"bogus": 1, "NamePrefix": "p-"})))
                .unwrap()
                .name_prefix,
            "p-"
        );
    }
}
