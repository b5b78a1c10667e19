//! JSON documents held in a string field (an annotation, a ConfigMap key), as Kustomize v5.8's
//! replacements read and write them: a replacement path that runs into such a string
//! continues inside the document, and the document is written back as Go's `encoding/json`
//! writes it (keys sorted, `<`, `>` and `&` escaped, numbers in Go's form), indented by two
//! spaces when the original was.

use crate::value::Value;

/// Whether `text` holds a JSON document kustomize would rewrite as JSON.
pub fn is_json_document(text: &str) -> bool {
    matches!(text.trim_start().chars().next(), Some('{' | '['))
}

/// `value` as Go's `json.Marshal` (or, when `original` was spread over indented lines,
/// `json.MarshalIndent` with two spaces) prints it.
pub fn to_go_json(value: &Value, original: &str) -> String {
    let pretty = original.contains('\n') && original.contains("  ");
    let mut out = String::new();
    write_value(&mut out, value, pretty.then_some(0));
    out
}

fn write_value(out: &mut String, value: &Value, indent: Option<usize>) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&go_number(n)),
        Value::String(s) => super::hash::go_json_string(s, out),
        Value::Array(items) => write_container(
            out,
            ('[', ']'),
            items.iter().map(|item| (None, item)),
            items.is_empty(),
            indent,
        ),
        Value::Object(map) => write_container(
            out,
            ('{', '}'),
            map.iter().map(|(key, item)| (Some(key.as_str()), item)),
            map.is_empty(),
            indent,
        ),
    }
}

fn write_container<'a>(
    out: &mut String,
    (open, close): (char, char),
    entries: impl Iterator<Item = (Option<&'a str>, &'a Value)>,
    empty: bool,
    indent: Option<usize>,
) {
    out.push(open);
    if empty {
        out.push(close);
        return;
    }
    let inner = indent.map(|level| level + 1);
    for (index, (key, item)) in entries.enumerate() {
        if index > 0 {
            out.push(',');
        }
        if let Some(level) = inner {
            out.push('\n');
            out.push_str(&"  ".repeat(level));
        }
        if let Some(key) = key {
            super::hash::go_json_string(key, out);
            out.push(':');
            if inner.is_some() {
                out.push(' ');
            }
        }
        write_value(out, item, inner);
    }
    if let Some(level) = indent {
        out.push('\n');
        out.push_str(&"  ".repeat(level));
    }
    out.push(close);
}

/// A number as Go prints a float64 in JSON: integers without a fraction, others in their
/// shortest form, with an exponent below 1e-6 and from 1e21 on.
fn go_number(number: &serde_json::Number) -> String {
    if number.is_i64() || number.is_u64() {
        return number.to_string();
    }
    let value = number.as_f64().unwrap_or(0.0);
    let magnitude = value.abs();
    if magnitude != 0.0 && !(1e-6..1e21).contains(&magnitude) {
        // Rust prints `1e21` and `1e-7`; Go `1e+21` and `1e-07`.
        let text = format!("{value:e}");
        let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
        let (sign, digits) = match exponent.strip_prefix('-') {
            Some(digits) => ('-', digits),
            None => ('+', exponent),
        };
        return format!("{mantissa}e{sign}{digits:0>2}");
    }
    // Rust's shortest round-trip form, without a trailing `.0`.
    let text = format!("{value}");
    text.strip_suffix(".0").map(str::to_string).unwrap_or(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json;

    #[test]
    fn json_is_written_as_go_writes_it() {
        let value = json!({"b": 1, "a": {"port": 5432, "ratio": 1.0, "tiny": 1e-7, "huge": 1e21,
            "html": "<a & b>", "list": [], "empty": {}}});
        assert_eq!(
            to_go_json(&value, "{\"b\":1}"),
            r#"{"a":{"empty":{},"html":"\u003ca \u0026 b\u003e","huge":1e+21,"list":[],"port":5432,"ratio":1,"tiny":1e-07},"b":1}"#
        );
        assert_eq!(
            to_go_json(
                &json!({"config": {"id": "42", "n": [1, 2]}}),
                "{\n  \"config\": {}\n}"
            ),
            "{\n  \"config\": {\n    \"id\": \"42\",\n    \"n\": [\n      1,\n      2\n    ]\n  }\n}"
        );
    }

    #[test]
    fn only_objects_and_arrays_are_json_documents() {
        assert!(is_json_document("  {\"a\": 1}"));
        assert!(is_json_document("[1]"));
        assert!(!is_json_document("a: b"));
        assert!(!is_json_document(""));
    }
}
