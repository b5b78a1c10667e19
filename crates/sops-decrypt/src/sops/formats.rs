//! The five SOPS file formats: how each stores its values and its metadata.
//!
//! Every format loads into ordered branches plus the `sops` metadata as a JSON value, and
//! emits decrypted branches back in the same format. YAML and JSON keep their structure;
//! dotenv and INI hold flat strings and flatten the metadata into `sops_…` keys (nested keys
//! joined with `__map_`, list indexes with `__list_`); binary files are a JSON envelope
//! whose `data` string is the whole file.

use crate::value::{Map, Value};

use super::{Format, SopsError};
use crate::yaml::{self, Ordered, Schema};

/// A loaded SOPS file: its data branches (one per YAML document) and metadata.
pub struct Loaded {
    pub branches: Vec<Ordered>,
    pub metadata: Value,
}

pub fn load(text: &str, format: Format) -> Result<Loaded, SopsError> {
    match format {
        Format::Yaml | Format::Json | Format::Binary => load_tree(text, format),
        Format::Dotenv => load_dotenv(text),
        Format::Ini => load_ini(text),
    }
}

fn parse_error(format: Format, message: impl std::fmt::Display) -> SopsError {
    SopsError::Parse {
        format: format.name(),
        message: message.to_string(),
    }
}

fn load_tree(text: &str, format: Format) -> Result<Loaded, SopsError> {
    // JSON is read by the YAML 1.2 reader it is a subset of, which keeps key order.
    let documents =
        yaml::parse_documents_ordered(text, Schema::Kyaml).map_err(|e| parse_error(format, e))?;
    let mut metadata = None;
    let mut branches = Vec::new();
    for document in documents {
        match document {
            Ordered::Scalar(Value::Null) => {}
            Ordered::Map(mut entries) => {
                if let Some(i) = entries.iter().position(|(k, _)| k == "sops") {
                    let (_, sops) = entries.remove(i);
                    metadata.get_or_insert(sops.to_value());
                }
                branches.push(Ordered::Map(entries));
            }
            _ => return Err(parse_error(format, "a document is not a mapping")),
        }
    }
    if format != Format::Yaml && branches.len() > 1 {
        return Err(parse_error(format, "more than one document"));
    }
    let metadata = metadata.ok_or(SopsError::NotEncrypted)?;
    if format == Format::Binary {
        let has_data = matches!(
            branches.first(),
            Some(Ordered::Map(e)) if e.iter().any(|(k, v)| k == "data" && matches!(v, Ordered::Scalar(Value::String(_))))
        );
        if !has_data {
            return Err(parse_error(format, "no `data` string"));
        }
    }
    Ok(Loaded { branches, metadata })
}

fn load_dotenv(text: &str) -> Result<Loaded, SopsError> {
    let mut entries = Vec::new();
    let mut flat = Vec::new();
    for (number, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        let (key, value) = line.split_once('=').ok_or_else(|| {
            parse_error(
                Format::Dotenv,
                format!("line {}: expected KEY=VALUE", number + 1),
            )
        })?;
        let value = value.replace("\\n", "\n");
        match key.strip_prefix("sops_") {
            Some(meta) => flat.push((meta.to_string(), value)),
            None => entries.push((key.to_string(), Ordered::str(value))),
        }
    }
    if flat.is_empty() {
        return Err(SopsError::NotEncrypted);
    }
    Ok(Loaded {
        branches: vec![Ordered::Map(entries)],
        metadata: unflatten(flat)?,
    })
}

fn load_ini(text: &str) -> Result<Loaded, SopsError> {
    let mut sections: Vec<(String, Vec<(String, Ordered)>)> = Vec::new();
    let mut flat = Vec::new();
    let mut current: Option<String> = None;
    let mut lines = text.split_inclusive('\n').enumerate();
    while let Some((number, raw)) = lines.next() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with(';') || line.starts_with('#') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            current = Some(name.trim().to_string());
            if name.trim() != "sops" {
                sections.push((name.trim().to_string(), Vec::new()));
            }
            continue;
        }
        // The raw line: a `"""` value keeps the line break after its first line.
        let (key, value) = raw.trim_start().split_once('=').ok_or_else(|| {
            parse_error(
                Format::Ini,
                format!("line {}: expected key = value", number + 1),
            )
        })?;
        let key = key.trim().to_string();
        let value = ini_value(value.trim_start(), &mut lines).ok_or_else(|| {
            parse_error(
                Format::Ini,
                format!(
                    "line {}: the value of `{key}` has no closing \"\"\"",
                    number + 1
                ),
            )
        })?;
        match current.as_deref() {
            // Multi-line metadata (armored keys) is stored with escaped newlines (sops
            // 3.13.0 and 3.13.1 wrote them inside `"""` instead, which this leaves as is).
            Some("sops") => flat.push((key, value.replace("\\n", "\n"))),
            section => {
                let name = section.unwrap_or("DEFAULT");
                if sections.last().is_none_or(|(n, _)| n != name) {
                    sections.push((name.to_string(), Vec::new()));
                }
                if let Some((_, entries)) = sections.last_mut() {
                    entries.push((key, Ordered::str(value)));
                }
            }
        }
    }
    if flat.is_empty() {
        return Err(SopsError::NotEncrypted);
    }
    let branch = sections
        .into_iter()
        .map(|(name, entries)| (name, Ordered::Map(entries)))
        .collect();
    Ok(Loaded {
        branches: vec![Ordered::Map(branch)],
        metadata: unflatten(flat)?,
    })
}

/// An INI value as go-ini reads it: `"""…"""` may span lines (kept raw, line breaks
/// included), `` `…` `` is taken literally, and a plain value ends at a `#` or `;` comment.
/// `None`: a `"""` never closed.
fn ini_value<'t>(
    value: &'t str,
    lines: &mut impl Iterator<Item = (usize, &'t str)>,
) -> Option<String> {
    if value.len() > 3
        && let Some(rest) = value.strip_prefix("\"\"\"")
    {
        if let Some(end) = rest.rfind("\"\"\"") {
            return Some(rest[..end].to_string());
        }
        let mut text = rest.to_string();
        for (_, raw) in lines {
            if let Some(end) = raw.rfind("\"\"\"") {
                text.push_str(&raw[..end]);
                return Some(text);
            }
            text.push_str(raw);
        }
        return None;
    }
    let value = value.trim_end();
    if let Some(quoted) = value
        .strip_prefix('`')
        .and_then(|rest| rest.rfind('`').map(|end| &rest[..end]))
    {
        return Some(quoted.to_string());
    }
    let value = match value.find(['#', ';']) {
        Some(comment) => value[..comment].trim_end(),
        None => value,
    };
    Some(value.to_string())
}

const MAX_METADATA_DEPTH: usize = 16;

/// Rebuilds nested metadata from flattened keys such as `age__list_0__map_enc`.
fn unflatten(flat: Vec<(String, String)>) -> Result<Value, SopsError> {
    let mut root = Value::Object(Map::new());
    for (key, value) in flat {
        let bad = || SopsError::Metadata(format!("malformed flattened key `sops_{key}`"));
        // SOPS metadata nests a few levels; a deeper key is hostile and would build a value
        // too deep to drop safely.
        if key.split("__").count() > MAX_METADATA_DEPTH {
            return Err(SopsError::Metadata(
                "flattened metadata key nests too deeply".into(),
            ));
        }
        let mut segments = key.split("__");
        let first = segments.next().unwrap_or_default();
        let mut node = root
            .as_object_mut()
            .ok_or_else(bad)?
            .entry(first.to_string())
            .or_insert(Value::Null);
        for segment in segments {
            if let Some(index) = segment.strip_prefix("list_") {
                let index: usize = index.parse().map_err(|_| bad())?;
                if node.is_null() {
                    *node = Value::Array(Vec::new());
                }
                let items = node.as_array_mut().ok_or_else(bad)?;
                // Indexes arrive in order; a gap means a malformed file, not a reason to pad
                // memory without bound.
                if index > items.len() {
                    return Err(bad());
                }
                if index == items.len() {
                    items.push(Value::Null);
                }
                node = &mut items[index];
            } else if let Some(name) = segment.strip_prefix("map_") {
                if node.is_null() {
                    *node = Value::Object(Map::new());
                }
                node = node
                    .as_object_mut()
                    .ok_or_else(bad)?
                    .entry(name.to_string())
                    .or_insert(Value::Null);
            } else {
                return Err(bad());
            }
        }
        *node = Value::String(value);
    }
    Ok(root)
}

/// Prints decrypted branches in `format`.
pub fn emit(branches: &[Ordered], format: Format) -> Result<Vec<u8>, SopsError> {
    let single = || match branches {
        [Ordered::Map(entries)] => Ok(entries),
        _ => Err(parse_error(format, "expected exactly one mapping")),
    };
    Ok(match format {
        Format::Yaml => yaml::ordered_documents_to_yaml_string(branches).into_bytes(),
        Format::Json => {
            let mut out = String::new();
            write_json(&Ordered::Map(single()?.clone()), 0, &mut out);
            out.push('\n');
            out.into_bytes()
        }
        Format::Binary => match single()?.iter().find(|(k, _)| k == "data") {
            Some((_, Ordered::Scalar(Value::String(data)))) => data.clone().into_bytes(),
            _ => return Err(parse_error(format, "no `data` string")),
        },
        Format::Dotenv => {
            let mut out = String::new();
            for (key, value) in single()? {
                out.push_str(key);
                out.push('=');
                out.push_str(&scalar_text(value).replace('\n', "\\n"));
                out.push('\n');
            }
            out.into_bytes()
        }
        Format::Ini => {
            let mut out = String::new();
            for (i, (section, entries)) in single()?.iter().enumerate() {
                if i > 0 {
                    out.push('\n');
                }
                out.push_str(&format!("[{section}]\n"));
                if let Ordered::Map(entries) = entries {
                    write_ini_entries(entries, &mut out);
                }
            }
            out.into_bytes()
        }
    })
}

/// A section's entries as go-ini writes them (sops's INI store): `=` aligned after the
/// longest key, keys holding `"`, `=` or `:` in backticks (one holding a backtick in `"""`),
/// values holding a line break or backtick in `"""`, a `#` or `;` in backticks, and edge
/// spaces in double quotes.
fn write_ini_entries(entries: &[(String, Ordered)], out: &mut String) {
    let keys: Vec<String> = entries
        .iter()
        .map(|(key, _)| {
            if key.contains(['"', '=', ':']) {
                format!("`{key}`")
            } else if key.contains('`') {
                format!("\"\"\"{key}\"\"\"")
            } else {
                key.clone()
            }
        })
        .collect();
    let width = keys.iter().map(String::len).max().unwrap_or(0);
    for (key, (_, value)) in keys.iter().zip(entries) {
        let value = scalar_text(value);
        let value = if value.contains(['\n', '`']) {
            format!("\"\"\"{value}\"\"\"")
        } else if value.contains(['#', ';']) {
            format!("`{value}`")
        } else if value.trim().len() != value.len() {
            format!("\"{value}\"")
        } else {
            value
        };
        out.push_str(key);
        out.extend(std::iter::repeat_n(' ', width - key.len()));
        out.push_str(" = ");
        out.push_str(&value);
        out.push('\n');
    }
}

fn scalar_text(value: &Ordered) -> String {
    match value {
        Ordered::Scalar(Value::String(s)) => s.clone(),
        Ordered::Scalar(other) => other.to_string(),
        other => other.to_value().to_string(),
    }
}

/// JSON with keys in their given order, indented with tabs as SOPS prints it.
fn write_json(value: &Ordered, depth: usize, out: &mut String) {
    let indent = |out: &mut String, depth: usize| out.extend(std::iter::repeat_n('\t', depth));
    match value {
        Ordered::Scalar(scalar) => out.push_str(&scalar.to_string()),
        Ordered::Map(entries) if entries.is_empty() => out.push_str("{}"),
        Ordered::Seq(items) if items.is_empty() => out.push_str("[]"),
        Ordered::Map(entries) => {
            out.push_str("{\n");
            for (i, (key, item)) in entries.iter().enumerate() {
                indent(out, depth + 1);
                out.push_str(&Value::String(key.clone()).to_string());
                out.push_str(": ");
                write_json(item, depth + 1, out);
                out.push_str(if i + 1 < entries.len() { ",\n" } else { "\n" });
            }
            indent(out, depth);
            out.push('}');
        }
        Ordered::Seq(items) => {
            out.push_str("[\n");
            for (i, item) in items.iter().enumerate() {
                indent(out, depth + 1);
                write_json(item, depth + 1, out);
                out.push_str(if i + 1 < items.len() { ",\n" } else { "\n" });
            }
            indent(out, depth);
            out.push(']');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json;

    #[test]
    fn deep_flattened_keys_are_refused() {
        let key = vec!["map_a"; 100_000].join("__");
        let flat = vec![(format!("x__{key}"), "v".to_string())];
        assert!(matches!(unflatten(flat), Err(SopsError::Metadata(_))));
    }

    #[test]
    fn formats_follow_file_name_suffixes() {
        use std::path::Path;
        assert_eq!(
            Format::from_path(Path::new(".dockerconfigjson")),
            Format::Json
        );
        assert_eq!(Format::from_path(Path::new("a/.env")), Format::Dotenv);
        assert_eq!(Format::from_path(Path::new("x.YAML")), Format::Yaml);
        assert_eq!(Format::from_path(Path::new("key.pem")), Format::Binary);
    }

    #[test]
    fn unflattens_metadata_keys() {
        let flat = vec![
            ("age__list_0__map_enc".to_string(), "A".to_string()),
            ("age__list_0__map_recipient".to_string(), "R".to_string()),
            ("age__list_1__map_enc".to_string(), "B".to_string()),
            ("mac".to_string(), "M".to_string()),
        ];
        assert_eq!(
            unflatten(flat).unwrap(),
            json!({"age": [{"enc": "A", "recipient": "R"}, {"enc": "B"}], "mac": "M"})
        );
        assert!(unflatten(vec![("age__list_5__map_enc".into(), "x".into())]).is_err());
    }

    #[test]
    fn dotenv_and_ini_round_trip_their_layout() {
        let loaded = load_dotenv("# c\nA=1\nB=x\\ny\nsops_mac=M\nsops_lastmodified=T\n").unwrap();
        assert_eq!(
            String::from_utf8(emit(&loaded.branches, Format::Dotenv).unwrap()).unwrap(),
            "A=1\nB=x\\ny\n"
        );
        let loaded = load_ini("[db]\nuser = u\n\n[sops]\nmac = M\nlastmodified = T\n").unwrap();
        assert_eq!(loaded.metadata, json!({"mac": "M", "lastmodified": "T"}));
        assert_eq!(
            String::from_utf8(emit(&loaded.branches, Format::Ini).unwrap()).unwrap(),
            "[db]\nuser = u\n"
        );
        // go-ini's layout: aligned `=`, and quoting where a value or key would not read back.
        let branches = vec![Ordered::Map(vec![
            (
                "app".to_string(),
                Ordered::Map(vec![
                    ("password".to_string(), Ordered::str("p#ss;word")),
                    ("motd".to_string(), Ordered::str("line one\nline two")),
                    ("pad".to_string(), Ordered::str(" spaced ")),
                    ("a:b".to_string(), Ordered::str("x")),
                ]),
            ),
            ("empty".to_string(), Ordered::Map(vec![])),
        ])];
        assert_eq!(
            String::from_utf8(emit(&branches, Format::Ini).unwrap()).unwrap(),
            "[app]\npassword = `p#ss;word`\nmotd     = \"\"\"line one\nline two\"\"\"\npad      = \" spaced \"\n`a:b`    = x\n\n[empty]\n"
        );
        // And it reads back as written.
        let again = load_ini(
            "[app]\npassword = `p#ss;word`\nmotd     = \"\"\"line one\nline two\"\"\"\n[sops]\nmac = M\n",
        )
        .unwrap();
        assert_eq!(
            again.branches[0],
            Ordered::Map(vec![(
                "app".to_string(),
                Ordered::Map(vec![
                    ("password".to_string(), Ordered::str("p#ss;word")),
                    ("motd".to_string(), Ordered::str("line one\nline two")),
                ])
            )])
        );
    }
}
