//! `configMapGenerator` and `secretGenerator`: ConfigMaps and Secrets made from literals,
//! files and env files.
//!
//! Keys come from `key=value` literals (surrounding quotes dropped), file names or
//! `key=path`, and `KEY=value` lines of env files (comments and blank lines skipped). File
//! contents that are not UTF-8 go to `binaryData`. A generator's own labels and annotations
//! win over those of `generatorOptions` with the same key, as in kustomize.

use std::path::Path;

use crate::json;
use crate::value::{Map, Value};
use base64::Engine;

use super::KustomizeError;
use super::kustfile::{GeneratorArgs, GeneratorOptions};
use super::loader::Loader;
use super::resource::{Behavior, Generated, Resource};

/// The kind of object a generator makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GeneratorKind {
    ConfigMap,
    Secret,
}

impl GeneratorKind {
    fn as_str(self) -> &'static str {
        match self {
            GeneratorKind::ConfigMap => "ConfigMap",
            GeneratorKind::Secret => "Secret",
        }
    }
}

/// Where env-file entries without `=` take their value from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EnvLookup {
    /// The process environment, as `kustomize build` does.
    Process,
    /// Nothing: the value is empty. A controller must not leak its own environment.
    #[default]
    Disabled,
}

/// Makes the resource a generator entry describes.
pub fn generate(
    kind: GeneratorKind,
    args: &GeneratorArgs,
    global: Option<&GeneratorOptions>,
    loader: &Loader,
    env_lookup: EnvLookup,
    file: &Path,
) -> Result<Resource, KustomizeError> {
    let invalid = |message: String| KustomizeError::Generator {
        file: file.to_path_buf(),
        kind: kind.as_str(),
        name: args.name.clone(),
        message,
    };
    let kind_word = match kind {
        GeneratorKind::ConfigMap => "configmap",
        GeneratorKind::Secret => "secret",
    };
    if args.name.is_empty() {
        return Err(invalid(format!("a {kind_word} must have a name")));
    }
    // kustomize treats a behavior it does not know as none, which creates.
    let behavior = Behavior::parse(&args.behavior);
    let options = merge_options(args.options.as_ref(), global);

    let entries = sources(args, loader, env_lookup, &invalid)?;
    let (data, binary_data) = data_maps(kind, entries).map_err(|RepeatedKey(key)| {
        invalid(format!(
            "{kind_word} {} illegally repeats the key `{key}`",
            args.name
        ))
    })?;
    let mut metadata = Map::new();
    metadata.insert("name".into(), json!(args.name));
    if !args.namespace.is_empty() {
        metadata.insert("namespace".into(), json!(args.namespace));
    }
    if !options.labels.is_empty() {
        metadata.insert("labels".into(), json!(options.labels));
    }
    if !options.annotations.is_empty() {
        metadata.insert("annotations".into(), json!(options.annotations));
    }
    let mut object = Map::new();
    object.insert("apiVersion".into(), json!("v1"));
    object.insert("kind".into(), json!(kind.as_str()));
    object.insert("metadata".into(), Value::Object(metadata));
    // kustomize always gives a Secret its `data` map (empty without sources), which the
    // name hash covers; a ConfigMap gets none.
    if !data.is_empty() || kind == GeneratorKind::Secret {
        object.insert("data".into(), Value::Object(data));
    }
    if !binary_data.is_empty() {
        object.insert("binaryData".into(), Value::Object(binary_data));
    }
    if kind == GeneratorKind::Secret {
        let secret_type = if args.secret_type.is_empty() {
            "Opaque"
        } else {
            &args.secret_type
        };
        object.insert("type".into(), json!(secret_type));
    }
    if options.immutable {
        object.insert("immutable".into(), json!(true));
    }
    let mut resource = Resource::new(Value::Object(object));
    resource.generated = Some(Generated {
        behavior,
        hash_suffix: !options.disable_name_suffix_hash.unwrap_or(false),
    });
    Ok(resource)
}

/// Why a generator's source cannot be read.
#[derive(Debug, thiserror::Error, PartialEq)]
enum SourceError {
    #[error("invalid literal source {0}, expected key=value")]
    Literal(String),
    #[error("missing key name for file path {path:?} in source {written:?}")]
    MissingKey { path: String, written: String },
    #[error("file path for key name {0} missing")]
    MissingPath(String),
    #[error("key names or file paths cannot contain '='")]
    ExtraEquals,
    #[error("line {0} has invalid utf8 bytes")]
    NotUtf8(usize),
}

/// A key a generator's sources give twice.
#[derive(Debug, PartialEq)]
struct RepeatedKey(String);

/// The key-value pairs of a generator's env files, literals and files, in that order.
fn sources(
    args: &GeneratorArgs,
    loader: &Loader,
    env_lookup: EnvLookup,
    invalid: &dyn Fn(String) -> KustomizeError,
) -> Result<Vec<(String, Vec<u8>)>, KustomizeError> {
    let mut entries: Vec<(String, Vec<u8>)> = Vec::new();
    for env in &args.envs {
        let (path, bytes) = loader.read(env)?;
        let pairs = env_pairs(&bytes, env_lookup)
            .map_err(|m| invalid(format!("env source {}: {m}", path.display())))?;
        for (key, value) in pairs {
            entries.push((key, value.into_bytes()));
        }
    }
    for literal in &args.literals {
        let (key, value) = parse_literal(literal).map_err(|e| invalid(e.to_string()))?;
        entries.push((key, value.into_bytes()));
    }
    for source in &args.files {
        let (key, path) = parse_file_source(source).map_err(|e| invalid(e.to_string()))?;
        if !super::loader::is_remote_file(&path)
            && let super::loader::Target::Dir(dir) = loader.resolve(&path)?
        {
            return Err(invalid(format!(
                "file source '{}' must resolve to a file",
                dir.display()
            )));
        }
        let (_, bytes) = loader.read(&path)?;
        entries.push((key, bytes));
    }
    Ok(entries)
}

/// `data` and `binaryData`: a Secret's values base64, a ConfigMap's as text unless they are
/// not UTF-8. A repeated key is the error.
fn data_maps(
    kind: GeneratorKind,
    entries: Vec<(String, Vec<u8>)>,
) -> Result<(Map, Map), RepeatedKey> {
    let mut data = Map::new();
    let mut binary_data = Map::new();
    for (key, bytes) in entries {
        if data.contains_key(&key) || binary_data.contains_key(&key) {
            return Err(RepeatedKey(key));
        }
        let base64 = || Value::String(encode_base64(&bytes));
        match kind {
            GeneratorKind::Secret => {
                data.insert(key, base64());
            }
            GeneratorKind::ConfigMap => match std::str::from_utf8(&bytes) {
                Ok(text) => {
                    data.insert(key, Value::String(text.to_string()));
                }
                Err(_) => {
                    binary_data.insert(key, base64());
                }
            },
        }
    }
    Ok((data, binary_data))
}

/// The generator's options, with the global labels and annotations it does not set itself and
/// the global flags that are on.
fn merge_options(
    local: Option<&GeneratorOptions>,
    global: Option<&GeneratorOptions>,
) -> GeneratorOptions {
    let mut merged = local.cloned().unwrap_or_default();
    if let Some(global) = global {
        for (own, global) in [
            (&mut merged.labels, &global.labels),
            (&mut merged.annotations, &global.annotations),
        ] {
            for (key, value) in global {
                own.entry(key.clone()).or_insert_with(|| value.clone());
            }
        }
        if global.disable_name_suffix_hash == Some(true) {
            merged.disable_name_suffix_hash = Some(true);
        }
        merged.immutable |= global.immutable;
    }
    merged
}

/// `key=value`, with one pair of matching surrounding quotes removed from the value.
fn parse_literal(source: &str) -> Result<(String, String), SourceError> {
    match source.split_once('=') {
        Some((key, value)) if !key.is_empty() => {
            Ok((key.to_string(), remove_quotes(value).to_string()))
        }
        _ => Err(SourceError::Literal(source.to_string())),
    }
}

fn remove_quotes(value: &str) -> &str {
    let bytes = value.as_bytes();
    if bytes.len() >= 2
        && bytes[0] == bytes[bytes.len() - 1]
        && (bytes[0] == b'"' || bytes[0] == b'\'')
    {
        &value[1..value.len() - 1]
    } else {
        value
    }
}

/// `path` (key: the file name) or `key=path`.
fn parse_file_source(source: &str) -> Result<(String, String), SourceError> {
    match source.matches('=').count() {
        0 => {
            let key = Path::new(source)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| source.to_string());
            Ok((key, source.to_string()))
        }
        1 if source.starts_with('=') => Err(SourceError::MissingKey {
            path: source[1..].to_string(),
            written: source.to_string(),
        }),
        1 if source.ends_with('=') => Err(SourceError::MissingPath(
            source[..source.len() - 1].to_string(),
        )),
        1 => {
            let (key, path) = source.split_once('=').expect("one '='");
            Ok((key.to_string(), path.to_string()))
        }
        _ => Err(SourceError::ExtraEquals),
    }
}

/// base64 in lines of 70 characters, each ending in a newline once there is more than one
/// line's worth, as kustomize writes Secret data and ConfigMap binaryData.
fn encode_base64(bytes: &[u8]) -> String {
    const LINE: usize = 70;
    let encoded = base64::engine::general_purpose::STANDARD.encode(bytes);
    if encoded.len() < LINE {
        return encoded;
    }
    let mut out = String::with_capacity(encoded.len() + encoded.len() / LINE + 1);
    for chunk in encoded.as_bytes().chunks(LINE) {
        out.push_str(std::str::from_utf8(chunk).expect("base64 is ASCII"));
        out.push('\n');
    }
    out
}

/// The `KEY=value` pairs of an env file, in order. Like kustomize, keys are not validated,
/// and lines with an empty key are skipped.
fn env_pairs(bytes: &[u8], lookup: EnvLookup) -> Result<Vec<(String, String)>, SourceError> {
    let mut pairs = Vec::new();
    for (index, raw) in bytes.split(|b| *b == b'\n').enumerate() {
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let text = std::str::from_utf8(raw).map_err(|_| SourceError::NotUtf8(index + 1))?;
        let line = if index == 0 {
            text.trim_start_matches('\u{FEFF}')
        } else {
            text
        };
        let line = line.trim_start();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (key, value) = match line.split_once('=') {
            Some((key, value)) => (key, value.to_string()),
            None => {
                let value = match lookup {
                    EnvLookup::Process => std::env::var(line).unwrap_or_default(),
                    EnvLookup::Disabled => String::new(),
                };
                (line, value)
            }
        };
        if key.is_empty() {
            continue;
        }
        pairs.push((key.to_string(), value));
    }
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_files_and_envs_parse_like_kustomize() {
        assert_eq!(parse_literal("a=b=c").unwrap(), ("a".into(), "b=c".into()));
        assert_eq!(parse_literal("a=\"quoted\"").unwrap().1, "quoted");
        assert_eq!(parse_literal("a='x\"").unwrap().1, "'x\"");
        assert!(parse_literal("=x").is_err());
        assert!(parse_literal("novalue").is_err());
        assert_eq!(
            parse_file_source("dir/app.properties").unwrap(),
            ("app.properties".into(), "dir/app.properties".into())
        );
        assert_eq!(
            parse_file_source("k=dir/f").unwrap(),
            ("k".into(), "dir/f".into())
        );
        assert!(parse_file_source("=f").is_err());
        assert!(parse_file_source("a=b=c").is_err());
        let pairs = env_pairs(
            "\u{FEFF}# comment\n\n  A=1\nB=x=y\nC\n=skipped\nexport D =v\n".as_bytes(),
            EnvLookup::Disabled,
        )
        .unwrap();
        let expected: Vec<(String, String)> =
            [("A", "1"), ("B", "x=y"), ("C", ""), ("export D ", "v")]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        assert_eq!(pairs, expected);
        assert!(env_pairs(b"BAD=\xff\n", EnvLookup::Disabled).is_err());
    }

    #[test]
    fn long_base64_is_wrapped_at_70_columns() {
        assert_eq!(encode_base64(b"b"), "Yg==");
        let long = encode_base64(&[0u8; 60]);
        let lines: Vec<&str> = long.lines().collect();
        assert_eq!(lines.iter().map(|l| l.len()).collect::<Vec<_>>(), [70, 10]);
        assert!(long.ends_with('\n'));
    }
}
