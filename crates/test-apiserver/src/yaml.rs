//! Apply bodies: JSON, or YAML read with the yaml-rust2 crate (not the product's reader, so a
//! bug in one cannot hide one in the other), as JSON values.

use serde_json::{Map, Number, Value};
use yaml_rust2::{Yaml, YamlLoader};

/// Why an apply body is not one document of plain YAML.
#[derive(Debug, thiserror::Error)]
pub enum YamlError {
    #[error(transparent)]
    Scan(#[from] yaml_rust2::ScanError),
    #[error("expected one document, found {0}")]
    Documents(usize),
    #[error("invalid number {0}")]
    Number(String),
    #[error("unsupported map key {0}")]
    MapKey(String),
    #[error("aliases are not supported")]
    Alias,
}

/// The single document of an apply body.
pub fn parse(text: &str) -> Result<Value, YamlError> {
    if let Ok(value) = serde_json::from_str(text) {
        return Ok(value);
    }
    let mut documents = YamlLoader::load_from_str(text)?;
    match documents.len() {
        0 => Ok(Value::Null),
        1 => to_json(documents.remove(0)),
        n => Err(YamlError::Documents(n)),
    }
}

fn to_json(yaml: Yaml) -> Result<Value, YamlError> {
    Ok(match yaml {
        Yaml::Null | Yaml::BadValue => Value::Null,
        Yaml::Boolean(b) => Value::Bool(b),
        Yaml::Integer(i) => Value::Number(i.into()),
        Yaml::Real(text) => {
            let float: f64 = text.parse().map_err(|_| YamlError::Number(text.clone()))?;
            Number::from_f64(float)
                .map(Value::Number)
                .ok_or(YamlError::Number(text))?
        }
        Yaml::String(text) => Value::String(text),
        Yaml::Array(items) => {
            Value::Array(items.into_iter().map(to_json).collect::<Result<_, _>>()?)
        }
        Yaml::Hash(entries) => {
            let mut map = Map::new();
            for (key, value) in entries {
                let key = match key {
                    Yaml::String(text) => text,
                    Yaml::Integer(i) => i.to_string(),
                    Yaml::Boolean(b) => b.to_string(),
                    other => return Err(YamlError::MapKey(format!("{other:?}"))),
                };
                map.insert(key, to_json(value)?);
            }
            Value::Object(map)
        }
        Yaml::Alias(_) => return Err(YamlError::Alias),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn yaml_and_json_bodies_read_alike() {
        let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  n: \"1\"\n";
        let expected = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "x"}, "data": {"n": "1"}});
        assert_eq!(parse(yaml).unwrap(), expected);
        assert_eq!(parse(&expected.to_string()).unwrap(), expected);
    }
}
