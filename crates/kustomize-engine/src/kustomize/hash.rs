//! Content hashes for generated ConfigMaps and Secrets (`name-<hash>`).
//!
//! The hash is SHA-256 over the Go `encoding/json` bytes of a small map (kind, an empty name,
//! data, and for Secrets the type), keys sorted and `<`, `>`, `&` escaped as Go does; its
//! first ten hex digits, with `0 1 3 a e` mapped to `g h k m t` so the suffix never looks
//! like a number or a word.

use crate::value::{Map, Value};
use sha2::{Digest, Sha256};

/// The suffix kustomize appends to a generated ConfigMap or Secret.
pub fn content_hash(object: &Value) -> String {
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
    let mut fields = Map::new();
    fields.insert("kind".into(), Value::String(kind.to_string()));
    fields.insert("name".into(), Value::String(String::new()));
    // Without a data map kustomize hashes an empty string in its place.
    let data = object
        .get("data")
        .cloned()
        .filter(|d| !d.is_null())
        .unwrap_or_else(|| Value::String(String::new()));
    fields.insert("data".into(), data);
    if kind == "Secret" {
        let secret_type = object
            .get("type")
            .cloned()
            .unwrap_or_else(|| Value::String(String::new()));
        fields.insert("type".into(), secret_type);
        if let Some(string_data) = object.get("stringData").filter(|v| is_non_empty_map(v)) {
            fields.insert("stringData".into(), string_data.clone());
        }
    } else if let Some(binary) = object.get("binaryData").filter(|v| is_non_empty_map(v)) {
        fields.insert("binaryData".into(), binary.clone());
    }
    let mut encoded = String::new();
    go_json(&Value::Object(fields), &mut encoded);
    kustomize_hash_encoding(&Sha256::digest(encoded.as_bytes()))
}

/// kustomize's HashTransformer: every generated resource that takes a hash suffix gets
/// `-<content hash>` appended to its name (its old name kept for name references). The flag
/// stays, so a hand-configured HashTransformer and the build's own pass each add one.
pub fn suffix_generated_names(resources: &mut [super::resource::Resource]) {
    for resource in resources {
        if resource.generated.is_some_and(|g| g.hash_suffix) {
            let name = format!("{}-{}", resource.name(), content_hash(&resource.object));
            resource.set_name(&name);
        }
    }
}

/// The first ten hex digits of a digest, with `0 1 3 a e` mapped to `g h k m t`.
pub fn kustomize_hash_encoding(digest: &[u8]) -> String {
    digest
        .iter()
        .flat_map(|b| [b >> 4, b & 0xF])
        .take(10)
        .map(|nibble| match nibble {
            0x0 => 'g',
            0x1 => 'h',
            0x3 => 'k',
            0xa => 'm',
            0xe => 't',
            n => char::from_digit(u32::from(n), 16).expect("a nibble"),
        })
        .collect()
}

fn is_non_empty_map(value: &Value) -> bool {
    value.as_object().is_some_and(|m| !m.is_empty())
}

/// Go's `json.Marshal` output for a value: sorted keys, HTML-safe escaping.
pub fn go_json(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => go_json_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                go_json(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                go_json_string(key, out);
                out.push(':');
                go_json(item, out);
            }
            out.push('}');
        }
    }
}

/// A string as Go's `encoding/json` writes it (HTML-safe; U+2028 and U+2029 escaped).
pub(super) fn go_json_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32))
            }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json;

    #[test]
    fn known_hashes() {
        assert_eq!(
            content_hash(&json!({"kind": "ConfigMap", "data": {"one": "x"}})),
            "t5fc6cc4t2"
        );
        assert_eq!(content_hash(&json!({"kind": "ConfigMap"})), "6ct58987ht");
    }

    #[test]
    fn go_escaping() {
        let mut out = String::new();
        go_json_string("a<b>&\u{8}\u{2028}\"", &mut out);
        assert_eq!(out, r#""a\u003cb\u003e\u0026\b\u2028\"""#);
    }
}
