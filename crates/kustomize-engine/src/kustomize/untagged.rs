//! Numbers and booleans kustomize wrote without a YAML tag.
//!
//! A scalar read from a file carries the tag its text resolved to (`80` is `!!int`), and
//! kustomize's writes into it keep that tag. A field a replacement creates, the key of a list
//! element its selector creates, and whatever a prefix or suffix transformer writes are nodes
//! with no tag at all: they print as what their text reads as (`80`, a number), but kyaml
//! takes an untagged node for a string. So a strategic merge patch over the resource, whose
//! walk sets every field it reaches anew, double-quotes the ones that read as numbers or
//! booleans (`"80"`), and a replacement writing a text into one reads it back as a plain
//! scalar, where a tagged number would refuse a word.
//!
//! A resource keeps the paths of those fields ([`Untagged`]); the writers record them, the
//! strategic merge patch ([`super::smp`]) restyles the ones its walk reaches, and a JSON
//! patch, which rebuilds the object from JSON with tags resolved, ends them all.

use thin_vec::ThinVec;

use super::aliases::Step;
use crate::value::Value;

/// The paths of a resource's untagged numbers and booleans.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Untagged {
    paths: ThinVec<Vec<Step>>,
}

impl Untagged {
    /// Records what a tagless write left at `path`: a number or a boolean is kept track of,
    /// anything else (a string reads as one anyway) is not.
    pub fn wrote(&mut self, path: Vec<Step>, value: &Value) {
        self.paths.retain(|kept| *kept != path);
        if matches!(value, Value::Number(_) | Value::Bool(_)) {
            self.paths.push(path);
        }
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
