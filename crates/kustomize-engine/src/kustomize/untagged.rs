//! Scalars kustomize wrote without a YAML tag.
//!
//! A scalar read from a file carries the tag its text resolved to (`80` is `!!int`), and
//! kustomize's writes into it keep that tag. A field a replacement creates, the key of a list
//! element its selector creates, whatever a prefix, suffix or value-add transformer writes, and
//! the name and namespace kustomize sets back after a strategic merge patch are nodes with no
//! tag at all: they print as what their text reads as (`80`, a number), but kyaml
//! takes an untagged node for a string. So a strategic merge patch over the resource, whose
//! walk sets every field it reaches anew, double-quotes the ones that read as numbers or
//! booleans (`"80"`), and a replacement writing a text into one reads it back as a plain
//! scalar, where a tagged number would refuse a word and a tagged string stay a string (a
//! name a prefix was added to becomes the number 1 when a replacement writes `1` there).
//!
//! A resource keeps the paths of those fields ([`Untagged`]); the writers record them, the
//! strategic merge patch ([`super::smp`]) restyles the ones its walk reaches, and a JSON
//! patch, which rebuilds the object from JSON with tags resolved, ends them all.

use thin_vec::ThinVec;

use super::aliases::Step;
use crate::value::Value;
use crate::yaml::{self, Schema};

/// The path of `metadata.<field>`.
pub fn metadata_field(field: &str) -> Vec<Step> {
    vec![Step::Key("metadata".into()), Step::Key(field.into())]
}

/// The path of `metadata.name`.
pub fn metadata_name() -> Vec<Step> {
    metadata_field("name")
}

/// A walk that keeps the path of the field it is at, for the writes it records there.
pub trait Trail: Sized {
    fn at(&mut self) -> &mut Vec<Step>;

    /// The walk one step further down (`step` pushed for the call, popped after).
    fn under<T>(&mut self, step: Step, walk: impl FnOnce(&mut Self) -> T) -> T {
        self.at().push(step);
        let result = walk(self);
        self.at().pop();
        result
    }
}

/// The paths of a resource's untagged scalars.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Untagged {
    paths: ThinVec<Vec<Step>>,
}

impl Untagged {
    /// Records what a tagless write left at `path`: a number, a boolean, or a string whose
    /// text reads as one when plain (any other string is quoted, which keeps it a string).
    pub fn wrote(&mut self, path: Vec<Step>, value: &Value) {
        self.forget(&path);
        let plain = match value {
            Value::Number(_) | Value::Bool(_) => true,
            Value::String(text) => yaml::plain_scalar(text, Schema::Kyaml).is_string(),
            _ => false,
        };
        if plain {
            self.paths.push(path);
        }
    }

    /// A tagged write at `path`.
    pub fn forget(&mut self, path: &[Step]) {
        self.paths.retain(|kept| kept.as_slice() != path);
    }

    pub fn contains(&self, path: &[Step]) -> bool {
        self.paths.iter().any(|kept| kept.as_slice() == path)
    }

    pub fn paths(&self) -> &[Vec<Step>] {
        &self.paths
    }

    pub fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }

    /// After a rewrite that left these paths untagged (all others tagged or gone).
    pub fn replace(&mut self, paths: Vec<Vec<Step>>) {
        self.paths = paths.into();
    }

    pub fn clear(&mut self) {
        self.paths.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json;

    fn at(key: &str) -> Vec<Step> {
        vec![Step::Key("spec".into()), Step::Key(key.into())]
    }

    #[test]
    fn numbers_booleans_and_plain_strings_are_kept_track_of_quoted_ones_and_nulls_are_not() {
        let mut untagged = Untagged::default();
        untagged.wrote(at("port"), &json!(80));
        untagged.wrote(at("on"), &json!(true));
        untagged.wrote(at("name"), &json!("p-web"));
        // A string that reads as a number when plain must be quoted, so it stays a string.
        untagged.wrote(at("quoted"), &json!("80"));
        untagged.wrote(at("null"), &json!(null));
        assert_eq!(untagged.paths(), [at("port"), at("on"), at("name")]);
    }

    #[test]
    fn a_later_write_replaces_what_was_kept_at_its_path() {
        let mut untagged = Untagged::default();
        untagged.wrote(at("port"), &json!(80));
        untagged.wrote(at("port"), &json!("80"));
        assert!(untagged.is_empty());
        untagged.wrote(metadata_name(), &json!("web"));
        untagged.forget(&metadata_name());
        assert!(!untagged.contains(&metadata_name()));
    }
}
