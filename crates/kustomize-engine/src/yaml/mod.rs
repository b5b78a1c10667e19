//! Kubernetes YAML: reading streams into JSON values and printing values as kustomize does.
//!
//! Every YAML byte the product reads or writes passes through here, so the scalar rules live
//! in one place (`scalar`): which plain words are booleans, numbers, nulls or timestamps under
//! the YAML 1.1 rules of sigs.k8s.io/yaml and the go-yaml v3 rules of kustomize's kyaml, and
//! which strings must be quoted so that neither reads them back as something else. `parse`
//! turns text into `crate::value::Value`s (JSON is the data model of the API server and of
//! kustomize's own pipeline); `emit` prints values byte-for-byte as `kustomize build` does.

mod document;
mod emit;
mod goyaml;
mod parse;
mod scalar;

pub use document::{Document, DocumentError};
pub use emit::{
    Ordered, documents_to_yaml_string, format_number, ordered_documents_to_yaml_string,
    ordered_to_yaml_string, to_yaml_string, write_documents,
};
pub use parse::{
    Patch, Resource, escape_pointer, parse_documents, parse_documents_last_key_wins,
    parse_documents_ordered, parse_kio_documents, parse_patches, parse_resources, parse_single,
    parse_yaml_to_json,
};
pub use scalar::Schema;

/// What the untagged plain scalar `text` reads as under `schema` (a string when it reads as
/// nothing else).
pub fn plain_scalar(text: &str, schema: Schema) -> crate::value::Value {
    scalar::to_json(scalar::resolve_plain(text, schema), text)
        .unwrap_or_else(|| crate::value::Value::String(text.to_string()))
}

/// A YAML text that cannot become JSON values. Lines are 1-based; callers add the file name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum YamlError {
    #[error("line {line}, column {column}: {message}")]
    Syntax {
        line: usize,
        column: usize,
        message: String,
    },

    #[error("line {line}: invalid document separator: {separator}")]
    DocumentSeparator { separator: String, line: usize },

    #[error("line {line}: mapping key {key:?} already defined")]
    DuplicateKey { key: String, line: usize },

    #[error("line {line}: {value:?} has no JSON representation")]
    UnsupportedValue { value: String, line: usize },

    #[error("line {line}: cannot decode !!{found} as a !!{tag}")]
    TagMismatch {
        found: &'static str,
        tag: String,
        line: usize,
    },

    #[error("line {line}: !!binary value contains invalid base64 data")]
    InvalidBinary { line: usize },

    #[error("line {line}: alias refers to an unknown anchor")]
    UnknownAlias { line: usize },

    #[error("line {line}: mapping keys must be scalars")]
    ComplexKey { line: usize },

    #[error("line {line}: unsupported type: mapping key {key} is not a string (quote it)")]
    NonStringKey { key: String, line: usize },

    #[error("line {line}: '<<' merges a mapping or a list of mappings")]
    InvalidMerge { line: usize },

    #[error("line {line}: aliases expand to more than {limit} nodes")]
    AliasBudget { line: usize, limit: usize },

    #[error("line {line}: nesting deeper than {limit} levels")]
    TooDeep { line: usize, limit: usize },

    #[error("expected one YAML document, found {count}")]
    MultipleDocuments { count: usize },
}
