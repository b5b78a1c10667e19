//! One YAML document as go-yaml v3's node tree holds it: each scalar's text, style and tag,
//! each collection's block or flow style, key order, and the comments around the nodes.
//!
//! Kustomize v5.8's replacements edit YAML held in a string field through such a tree and
//! write it back with kyaml's encoder (go-yaml v3, two-space indentation, sequences level with
//! their key), so comments, order, flow style and quoting survive an edit while indentation,
//! blank lines and comment spacing are normalised. Data flows [`Document::parse`] →
//! [`Document::to_value`] (the data, for the caller's path walk) → [`Document::update`] (the
//! edited data folded back into the tree) → [`Document::to_yaml_string`].
//!
//! Comments attach as go-yaml attaches them: a comment after content on its line belongs to
//! that content; comment lines directly above a node are its head; comment lines followed by a
//! blank line close the entry before them whose column is not deeper than theirs (a "foot",
//! after which go-yaml keeps one blank line before the next entry at the same indentation), or,
//! before any content, head the document.

mod read;
mod write;

use crate::value::{Map, Value};
use granit_parser::{Options, Parser};

use super::scalar::{Resolved, Schema, resolve_plain};
use read::Reader;
use write::Writer;

/// A line and column in the source text; nodes made here have none.
type Pos = (usize, usize);

/// kyaml's indentation.
const INDENT: usize = 2;

/// A YAML document with its layout, read by [`Document::parse`].
#[derive(Debug, Clone)]
pub struct Document {
    root: Node,
    head_comment: Vec<String>,
    foot_comment: Vec<String>,
    /// The foot comment followed a blank line, which go-yaml keeps.
    foot_separated: bool,
}

#[derive(Debug, Clone)]
struct Node {
    content: Content,
    /// A tag written on a mapping or sequence (`!!map`, `!custom`).
    collection_tag: Option<String>,
    /// `&name` on this node.
    anchor: Option<String>,
    head_comment: Vec<String>,
    line_comment: Option<String>,
    foot_comment: Vec<String>,
    start: Pos,
    end: Pos,
}

#[derive(Debug, Clone)]
enum Content {
    Scalar {
        text: String,
        style: Style,
        tag: Tag,
    },
    Mapping {
        entries: Vec<(Node, Node)>,
        flow: bool,
    },
    Sequence {
        items: Vec<Node>,
        flow: bool,
    },
    /// `*name`.
    Alias(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Style {
    Plain,
    SingleQuoted,
    DoubleQuoted,
    Literal,
    Folded,
}

/// go-yaml's tag of a scalar: the one its text resolves to (`!!int` for `5432`), one written
/// out in the source (`explicit`), or none for a node kyaml creates.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Tag {
    name: String,
    explicit: bool,
}

/// Why a text is not read as a [`Document`]; kustomize then leaves the field alone.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DocumentError {
    #[error("line {line}: {message}")]
    Syntax { line: usize, message: String },
    #[error("nesting deeper than {limit} levels")]
    TooDeep { limit: usize },
}

impl Node {
    fn new(content: Content, start: Pos, end: Pos) -> Node {
        Node {
            content,
            collection_tag: None,
            anchor: None,
            head_comment: Vec::new(),
            line_comment: None,
            foot_comment: Vec::new(),
            start,
            end,
        }
    }

    /// An empty plain scalar that is not a string (`key:`): go-yaml writes nothing for it.
    fn is_empty_plain(&self) -> bool {
        matches!(&self.content, Content::Scalar { text, style: Style::Plain, tag }
            if text.is_empty() && tag.name != "!!str")
    }

    fn is_block_collection(&self) -> bool {
        match &self.content {
            Content::Mapping { entries, flow } => !flow && !entries.is_empty(),
            Content::Sequence { items, flow } => !flow && !items.is_empty(),
            Content::Scalar { .. } | Content::Alias(_) => false,
        }
    }

    /// The node for `value` as kyaml makes it: `created` nodes (made by a replacement's
    /// `create`) carry no tag, copies of a source resource's values carry their resolved tag.
    fn from_value(value: &Value, created: bool) -> Node {
        let content = match value {
            Value::Object(map) => Content::Mapping {
                entries: map
                    .iter()
                    .map(|(k, v)| {
                        (
                            Node::scalar(k, "!!str", created),
                            Node::from_value(v, created),
                        )
                    })
                    .collect(),
                flow: false,
            },
            Value::Array(items) => Content::Sequence {
                items: items.iter().map(|v| Node::from_value(v, created)).collect(),
                flow: false,
            },
            Value::String(s) => return Node::scalar(s, "!!str", created),
            Value::Number(n) => {
                let tag = if n.is_f64() { "!!float" } else { "!!int" };
                return Node::scalar(&n.text(), tag, created);
            }
            Value::Bool(b) => return Node::scalar(&b.to_string(), "!!bool", created),
            Value::Null => return Node::scalar("null", "!!null", created),
        };
        Node::new(content, (0, 0), (0, 0))
    }

    fn scalar(text: &str, tag: &str, created: bool) -> Node {
        let name = if created {
            String::new()
        } else {
            tag.to_string()
        };
        Node::new(
            Content::Scalar {
                text: text.to_string(),
                style: Style::Plain,
                tag: Tag {
                    name,
                    explicit: false,
                },
            },
            (0, 0),
            (0, 0),
        )
    }

    /// The node's data; aliases read `anchors`, and `<<` merges the mappings it names under
    /// the keys written beside it, as go-yaml decodes them.
    fn to_value(&self, anchors: &Anchors) -> Value {
        match &self.content {
            Content::Scalar { text, style, tag } => scalar_value(text, *style, tag),
            Content::Alias(name) => anchors.get(name).cloned().unwrap_or(Value::Null),
            Content::Mapping { entries, .. } => {
                let mut map = Map::new();
                let mut merged = Vec::new();
                for (key, value) in entries {
                    if key.is_merge_key() {
                        merged.push(value.to_value(anchors));
                    } else {
                        map.insert(key.text().to_string(), value.to_value(anchors));
                    }
                }
                for source in merged {
                    let sources = match source {
                        Value::Array(items) => items,
                        other => vec![other],
                    };
                    for (key, value) in sources
                        .into_iter()
                        .filter_map(|s| match s {
                            Value::Object(map) => Some(map),
                            _ => None,
                        })
                        .flatten()
                    {
                        map.entry(key).or_insert(value);
                    }
                }
                Value::Object(map)
            }
            Content::Sequence { items, .. } => {
                Value::Array(items.iter().map(|item| item.to_value(anchors)).collect())
            }
        }
    }

    /// `<<` written plain: go-yaml's merge key.
    fn is_merge_key(&self) -> bool {
        matches!(&self.content, Content::Scalar { text, style: Style::Plain, .. } if text == "<<")
    }

    fn text(&self) -> &str {
        match &self.content {
            Content::Scalar { text, .. } => text,
            _ => "",
        }
    }

    /// Folds `new` (this node's data after an edit) into the node: changed scalars take the
    /// new text and keep their style and tag, as kyaml sets a target's value; new fields and
    /// items are appended; anything else changed is replaced.
    fn update(&mut self, new: &Value, created: bool, anchors: &Anchors) {
        let old = self.to_value(anchors);
        if old == *new {
            return;
        }
        match (&mut self.content, new) {
            // An alias and a merge stay as written; kyaml edits the anchored node itself.
            (Content::Alias(_), _) => {}
            (Content::Mapping { entries, .. }, Value::Object(map)) => {
                for (key, value) in entries.iter_mut() {
                    if !key.is_merge_key()
                        && let Some(new_value) = map.get(key.text())
                    {
                        value.update(new_value, created, anchors);
                    }
                }
                for (name, value) in map {
                    if old.get(name).is_none() {
                        entries.push((
                            Node::scalar(name, "!!str", created),
                            Node::from_value(value, created),
                        ));
                    }
                }
            }
            (Content::Sequence { items, .. }, Value::Array(new_items))
                if new_items.len() >= items.len() =>
            {
                for (item, new_item) in items.iter_mut().zip(new_items) {
                    item.update(new_item, created, anchors);
                }
                for new_item in &new_items[items.len()..] {
                    items.push(Node::from_value(new_item, created));
                }
            }
            (Content::Scalar { text, .. }, new) if !new.is_object() && !new.is_array() => {
                *text = match new {
                    Value::String(s) => s.clone(),
                    Value::Number(n) => n.text(),
                    Value::Bool(b) => b.to_string(),
                    _ => String::new(),
                };
            }
            (content, new) => *content = Node::from_value(new, created).content,
        }
    }
}

/// The data of each anchored node, by anchor name.
type Anchors = std::collections::HashMap<String, Value>;

/// The anchors of a tree in document order, each read with the ones before it (an alias
/// can only name an anchor written earlier).
fn anchor_values(root: &Node) -> Anchors {
    fn collect(node: &Node, anchors: &mut Anchors) {
        match &node.content {
            Content::Mapping { entries, .. } => {
                for (key, value) in entries {
                    collect(key, anchors);
                    collect(value, anchors);
                }
            }
            Content::Sequence { items, .. } => items.iter().for_each(|item| collect(item, anchors)),
            Content::Scalar { .. } | Content::Alias(_) => {}
        }
        if let Some(name) = &node.anchor {
            let value = node.to_value(anchors);
            anchors.insert(name.clone(), value);
        }
    }
    let mut anchors = Anchors::new();
    collect(root, &mut anchors);
    anchors
}

fn scalar_value(text: &str, style: Style, tag: &Tag) -> Value {
    if style != Style::Plain || tag.name == "!!str" && tag.explicit {
        return Value::String(text.to_string());
    }
    super::plain_scalar(text, Schema::Kyaml)
}

/// go-yaml v3's tag for a plain scalar's text.
fn resolved_tag(text: &str) -> &'static str {
    match resolve_plain(text, Schema::Kyaml) {
        Resolved::Null => "!!null",
        Resolved::Bool(_) => "!!bool",
        Resolved::Int(_) => "!!int",
        Resolved::Float(_) => "!!float",
        Resolved::Timestamp(_) => "!!timestamp",
        Resolved::Str => "!!str",
    }
}

impl Document {
    /// The first document of `text`, as go-yaml's `Unmarshal` into a node reads it.
    pub fn parse(text: &str) -> Result<Document, DocumentError> {
        let mut reader = Reader::default();
        let mut options = Options::default();
        options.set_emit_comments(true);
        options.emit_anchor_events = true;
        // libyaml reads a BOM inside a document as a character of the scalar it starts.
        options.bom_inside_document_as_content = true;
        let mut parser = Parser::new_from_str_with_options(text, options);
        while let Some(event) = parser.next_event() {
            let (event, span) = event.map_err(|e| DocumentError::Syntax {
                line: e.marker().line(),
                message: e.info().to_string(),
            })?;
            let start = (span.start.line(), span.start.col());
            let end = (span.end.line(), span.end.col());
            if !reader.event(event, start, end)? {
                break;
            }
        }
        Ok(reader.finish(text))
    }

    /// The document's data.
    pub fn to_value(&self) -> Value {
        self.root.to_value(&anchor_values(&self.root))
    }

    /// Folds the document's data after an edit back into it. `created` says the edit wrote a
    /// scalar (fields it made carry no tag, as kyaml's `create` makes them).
    pub fn update(&mut self, new: &Value, created: bool) {
        let anchors = anchor_values(&self.root);
        self.root.update(new, created, &anchors);
    }

    /// The document as kyaml's encoder writes it, without leading or trailing whitespace
    /// (kustomize trims it before storing it back in the string field).
    pub fn to_yaml_string(&self) -> String {
        let mut writer = Writer::default();
        writer.document(self);
        writer.emitter.out.trim().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(text: &str) -> String {
        Document::parse(text).expect("parses").to_yaml_string()
    }

    #[test]
    fn keeps_comments_order_and_styles_and_normalises_layout() {
        let text = "# doc head\n\n# head of a\na: 1 # line a\n# between a and b\nb:\n    # head c\n    c: x   # line c\n    d: [1, 2] # line d\n\n    # after blank\n    e: 'q'\n# foot of b\n\nf:\n  - 1\n  - name: z # lz\n    # before w\n    w: \"v\"\n# last comment\n";
        assert_eq!(
            round_trip(text),
            "# doc head\n\n# head of a\na: 1 # line a\n# between a and b\nb:\n  # head c\n  c: x # line c\n  d: [1, 2] # line d\n  # after blank\n  e: 'q'\n# foot of b\n\nf:\n- 1\n- name: z # lz\n  # before w\n  w: \"v\"\n# last comment"
        );
    }

    #[test]
    fn a_foot_comment_keeps_a_blank_line_only_before_an_entry_at_its_indentation() {
        let text = "b:\n  c: x\n  # free in b\n\n  e: 'q'\n  # free at end of b\n\ng: 1\na:\n  b: 1\n    # deeper\n\nc: 2\n";
        assert_eq!(
            round_trip(text),
            "b:\n  c: x\n  # free in b\n\n  e: 'q'\n  # free at end of b\ng: 1\na:\n  b: 1\n  # deeper\nc: 2"
        );
    }

    #[test]
    fn scalars_keep_their_text_tags_and_styles() {
        let text = "j: ~\nk:\nl: !!str 12\nm: 012\nn: \"yes\"\no: 1.0\np: |\n  lit\n";
        assert_eq!(round_trip(text), text.trim_end());
    }

    #[test]
    fn folded_scalars_are_written_as_go_yaml_writes_them() {
        // go-yaml doubles the line break after folded text (its look-ahead checks the start
        // of the value rather than the current position).
        assert_eq!(
            round_trip("i: >\n  folded text\n  more\nj: 1\n"),
            "i: >\n  folded text more\n\nj: 1"
        );
    }

    #[test]
    fn an_edited_value_keeps_its_comment_and_a_created_field_comes_last() {
        let mut document =
            Document::parse("db:\n  host: localhost   # overridden\n  port: 5432\n").unwrap();
        let mut value = document.to_value();
        value["db"]["host"] = Value::String("true".into());
        value["cache"] = crate::json!({"host": "db.internal"});
        document.update(&value, true);
        assert_eq!(
            document.to_yaml_string(),
            "db:\n  host: \"true\" # overridden\n  port: 5432\ncache:\n  host: db.internal"
        );
    }

    #[test]
    fn own_line_comments_deeper_than_what_follows_close_the_entries_above_them() {
        let text = "a:\n  b:\n    c: 1\n      # deeper than c\n  # at b\n# top\nd: 2\n";
        assert_eq!(
            round_trip(text),
            "a:\n  b:\n    c: 1\n    # deeper than c\n  # at b\n# top\nd: 2"
        );
    }

    #[test]
    fn a_comment_under_a_key_with_no_value_heads_what_follows() {
        assert_eq!(
            round_trip("a:\n  # only a comment\nb: 1\n"),
            "a:\n# only a comment\nb: 1"
        );
    }

    #[test]
    fn a_comment_after_a_block_scalar_header_or_a_bare_dash_stays_there() {
        assert_eq!(round_trip("c: |- # lit\n  z\n"), "c: |- # lit\n  z");
        assert_eq!(
            round_trip("e: # after e\n  |\n  text\n"),
            "e: | # after e\n  text"
        );
        assert_eq!(
            round_trip("- # on the dash\n  name: b\n- # inner\n  - c\n"),
            "- # on the dash\n  name: b\n- # inner\n  - c"
        );
    }

    #[test]
    fn tags_on_collections_and_empty_quoted_strings_are_kept() {
        let text = "m: !!map\n  b: 1\ns: !!seq\n- 1\nc: !custom {k: v}\na: \"\"\nb: ''\n";
        assert_eq!(round_trip(text), text.trim_end());
    }

    #[test]
    fn anchors_aliases_and_merges_are_kept_and_read() {
        let mut document =
            Document::parse("base: &b\n  k: v\nuse: *b\nmerged:\n  <<: *b\n  k2: v2\nx: &x 0\n")
                .unwrap();
        let mut value = document.to_value();
        assert_eq!(value["merged"], crate::json!({"k": "v", "k2": "v2"}));
        value["base"]["k"] = Value::String("NEW".into());
        value["x"] = Value::String("NEW".into());
        document.update(&value, true);
        assert_eq!(
            document.to_yaml_string(),
            "base: &b\n  k: NEW\nuse: *b\nmerged:\n  !!merge <<: *b\n  k2: v2\nx: &x !!int NEW"
        );
    }
}
