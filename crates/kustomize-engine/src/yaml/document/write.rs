//! Writing a document as kyaml's encoder does: go-yaml v3's emitter with two-space
//! indentation, sequences level with their key, and no line width.

use super::{Content, Document, INDENT, Node, Style, Tag, resolved_tag};
use crate::yaml::emit::{Emitter, ScalarTraits, analyze};

/// kyaml's encoder: go-yaml v3's emitter with two-space indentation and compact sequences.
#[derive(Default)]
pub(super) struct Writer {
    pub(super) emitter: Emitter,
    /// The indentation of the foot comment just written: the next line at that indentation
    /// is preceded by a blank line, as go-yaml writes it.
    foot_indent: Option<usize>,
}

impl Writer {
    pub(super) fn document(&mut self, document: &Document) {
        if !document.head_comment.is_empty() {
            self.comments(&document.head_comment, 0);
            self.emitter.push_char('\n');
        }
        let root = &document.root;
        self.comments(&root.head_comment, 0);
        if root.is_block_collection() {
            if self.properties(root) {
                self.emitter.push_char('\n');
            }
            if let Some(comment) = &root.line_comment {
                self.comments(std::slice::from_ref(comment), 0);
            }
            self.block_collection(root, 0, false);
        } else {
            let consumed = self.inline(root, 0, false, root.line_comment.as_deref());
            if !consumed {
                self.line_comment(root.line_comment.as_deref());
            }
            self.emitter.end_line();
        }
        self.foot(&root.foot_comment, 0);
        if document.foot_separated {
            self.foot_indent = Some(0);
        }
        self.foot(&document.foot_comment, 0);
    }

    /// `&anchor` and a collection's tag, as go-yaml writes them before a node; whether any.
    fn properties(&mut self, node: &Node) -> bool {
        let mut written = false;
        for property in [
            node.anchor.as_ref().map(|a| format!("&{a}")),
            node.collection_tag.clone(),
        ]
        .into_iter()
        .flatten()
        {
            if written {
                self.emitter.push_char(' ');
            }
            self.emitter.push(&property);
            written = true;
        }
        written
    }

    fn block_collection(&mut self, node: &Node, indent: usize, inline_first: bool) {
        match &node.content {
            Content::Mapping { entries, .. } => self.mapping(entries, indent, inline_first),
            Content::Sequence { items, .. } => self.sequence(items, indent, inline_first),
            Content::Scalar { .. } | Content::Alias(_) => {}
        }
    }

    fn indent(&mut self, indent: usize) {
        if self.emitter.column != 0 {
            self.emitter.push_char('\n');
        }
        if self.foot_indent == Some(indent) {
            self.emitter.push_char('\n');
        }
        self.foot_indent = None;
        self.emitter.indent_to(indent);
    }

    fn comments(&mut self, lines: &[String], indent: usize) {
        for line in lines {
            self.indent(indent);
            self.emitter.push(line);
            self.emitter.push_char('\n');
        }
    }

    fn foot(&mut self, lines: &[String], indent: usize) {
        if !lines.is_empty() {
            self.comments(lines, indent);
            self.foot_indent = Some(indent);
        }
    }

    fn line_comment(&mut self, comment: Option<&str>) {
        if let Some(comment) = comment {
            if !self.emitter.out.ends_with([' ', '\n']) {
                self.emitter.push_char(' ');
            }
            self.emitter.push(comment);
        }
    }

    fn mapping(&mut self, entries: &[(Node, Node)], indent: usize, inline_first: bool) {
        for (index, (key, value)) in entries.iter().enumerate() {
            if index > 0 || !inline_first {
                self.comments(&key.head_comment, indent);
                self.indent(indent);
            }
            self.inline(key, indent, true, None);
            self.emitter.push_char(':');
            self.value(value, indent, key.line_comment.as_deref());
            self.foot(&key.foot_comment, indent);
        }
    }

    /// A mapping value after its key's colon; `indent` is the key's.
    fn value(&mut self, value: &Node, indent: usize, key_comment: Option<&str>) {
        if value.is_block_collection() {
            if value.anchor.is_some() || value.collection_tag.is_some() {
                self.emitter.push_char(' ');
                self.properties(value);
            }
            self.line_comment(key_comment.or(value.line_comment.as_deref()));
            self.emitter.push_char('\n');
            // Sequences sit level with their key.
            let inner = match value.content {
                Content::Mapping { .. } => indent + INDENT,
                _ => indent,
            };
            self.comments(&value.head_comment, inner);
            self.block_collection(value, inner, false);
            return;
        }
        if !value.is_empty_plain() {
            self.emitter.push_char(' ');
        }
        let comment = value.line_comment.as_deref().or(key_comment);
        if !self.inline(value, indent, false, comment) {
            self.line_comment(comment);
        }
        self.emitter.end_line();
    }

    fn sequence(&mut self, items: &[Node], indent: usize, inline_first: bool) {
        for (index, item) in items.iter().enumerate() {
            if index > 0 || !inline_first {
                self.comments(&item.head_comment, indent);
                self.indent(indent);
            }
            self.emitter.push("- ");
            if item.is_block_collection() {
                if item.collection_tag.is_none()
                    && item.anchor.is_none()
                    && item.line_comment.is_none()
                {
                    self.block_collection(item, indent + INDENT, true);
                } else {
                    // `- &anchor !tag # comment`: the content starts on the next line.
                    self.properties(item);
                    self.line_comment(item.line_comment.as_deref());
                    self.emitter.push_char('\n');
                    self.block_collection(item, indent + INDENT, false);
                }
            } else {
                let comment = item.line_comment.as_deref();
                if !self.inline(item, indent, false, comment) {
                    self.line_comment(comment);
                }
                self.emitter.end_line();
            }
            self.foot(&item.foot_comment, indent);
        }
    }

    /// A scalar or a collection on the current line (flow style, or empty). A block scalar
    /// writes `comment` after its header and says so.
    fn inline(
        &mut self,
        node: &Node,
        indent: usize,
        simple_key: bool,
        comment: Option<&str>,
    ) -> bool {
        self.node_inline(node, indent, simple_key, false, comment)
    }

    fn node_inline(
        &mut self,
        node: &Node,
        indent: usize,
        simple_key: bool,
        in_flow: bool,
        comment: Option<&str>,
    ) -> bool {
        if self.properties(node) {
            self.emitter.push_char(' ');
        }
        if simple_key && node.is_merge_key() {
            // go-yaml writes the merge key with its tag.
            self.emitter.push("!!merge <<");
            return false;
        }
        match &node.content {
            Content::Alias(name) => {
                self.emitter.push_char('*');
                self.emitter.push(name);
            }
            Content::Scalar { text, style, tag } => {
                return self.scalar(
                    text,
                    *style,
                    tag,
                    indent,
                    simple_key || in_flow,
                    in_flow,
                    comment,
                );
            }
            Content::Mapping { entries, .. } => {
                self.emitter.push_char('{');
                let mut broke = false;
                for (index, (key, value)) in entries.iter().enumerate() {
                    self.flow_separator(index, broke, indent, &key.head_comment);
                    self.flow_child(key, indent, true);
                    self.emitter.push(": ");
                    self.flow_child(value, indent, false);
                    let comment = value
                        .line_comment
                        .as_deref()
                        .or(key.line_comment.as_deref());
                    broke = self.flow_comment(comment);
                }
                // go-yaml writes a mapping's `}` where the line is, even at its start.
                self.emitter.push_char('}');
            }
            Content::Sequence { items, .. } => {
                self.emitter.push_char('[');
                let mut broke = false;
                for (index, item) in items.iter().enumerate() {
                    self.flow_separator(index, broke, indent, &item.head_comment);
                    self.flow_child(item, indent, false);
                    broke = self.flow_comment(item.line_comment.as_deref());
                }
                if self.emitter.column == 0 {
                    self.emitter.indent_to(indent);
                }
                self.emitter.push_char(']');
            }
        }
        false
    }

    /// `, ` before a flow entry, unless a comment already ended the line. An entry after a
    /// line break, or after its own head comment, starts at the collection's indentation.
    fn flow_separator(&mut self, index: usize, broke: bool, indent: usize, head: &[String]) {
        if index > 0 && !broke {
            self.emitter.push_char(',');
        }
        if !head.is_empty() {
            for line in head {
                if self.emitter.column != 0 {
                    self.emitter.push_char('\n');
                }
                self.emitter.indent_to(indent + INDENT);
                self.emitter.push(line);
            }
            self.emitter.push_char('\n');
        }
        if self.emitter.column == 0 {
            self.emitter.indent_to(indent + INDENT);
        } else if index > 0 {
            self.emitter.push_char(' ');
        }
    }

    /// A flow entry's node: a nested flow collection indents one level deeper.
    fn flow_child(&mut self, node: &Node, indent: usize, simple_key: bool) {
        let indent = match node.content {
            Content::Mapping { .. } | Content::Sequence { .. } => indent + INDENT,
            Content::Scalar { .. } | Content::Alias(_) => indent,
        };
        self.node_inline(node, indent, simple_key, true, None);
    }

    /// A flow entry's line comment: go-yaml writes the entry's comma before it and ends the
    /// line. Whether the line ended.
    fn flow_comment(&mut self, comment: Option<&str>) -> bool {
        let Some(comment) = comment else {
            return false;
        };
        self.emitter.push(", ");
        self.emitter.push(comment);
        self.emitter.push_char('\n');
        true
    }

    /// A scalar in go-yaml v3's encoder: the tag is written only when the text would not
    /// resolve to it (a string that would is double-quoted instead), the node's style is
    /// requested, and the emitter falls back where the text does not allow it.
    #[allow(clippy::too_many_arguments)]
    fn scalar(
        &mut self,
        text: &str,
        style: Style,
        tag: &Tag,
        indent: usize,
        simple_key: bool,
        in_flow: bool,
        comment: Option<&str>,
    ) -> bool {
        let mut written_tag = tag.name.as_str();
        let mut force_quoting = false;
        if !tag.name.is_empty() && !tag.explicit {
            if tag.name == "!!str" && style != Style::Plain || resolved_tag(text) == tag.name {
                written_tag = "";
            } else if tag.name == "!!str" {
                written_tag = "";
                force_quoting = true;
            }
        }
        let requested = match style {
            Style::Plain if text.contains('\n') => Style::Literal,
            Style::Plain if force_quoting => Style::DoubleQuoted,
            other => other,
        };
        let traits = if text.is_empty() {
            ScalarTraits {
                plain_allowed: true,
                single_quoted_allowed: true,
                block_allowed: false,
            }
        } else {
            analyze(text)
        };
        let flow_plain_allowed = traits.plain_allowed
            && !text.is_empty()
            && !text.contains([',', '?', '[', ']', '{', '}']);
        let mut chosen = requested;
        if chosen == Style::Plain
            && (in_flow && !flow_plain_allowed
                || !in_flow && !traits.plain_allowed
                || text.is_empty() && simple_key)
        {
            chosen = Style::SingleQuoted;
        }
        if chosen == Style::SingleQuoted && !traits.single_quoted_allowed {
            chosen = Style::DoubleQuoted;
        }
        if matches!(chosen, Style::Literal | Style::Folded)
            && (!traits.block_allowed || in_flow || simple_key)
        {
            chosen = Style::DoubleQuoted;
        }
        if !written_tag.is_empty() {
            self.emitter.push(written_tag);
            self.emitter.push_char(' ');
        }
        let continuation = indent + INDENT;
        let emitter = &mut self.emitter;
        match chosen {
            // kyaml's encoder has no line width: nothing folds.
            Style::Plain => emitter.plain(text, continuation, false),
            Style::SingleQuoted => emitter.single_quoted(text, continuation, false),
            Style::DoubleQuoted => emitter.double_quoted(text, continuation, false),
            Style::Literal => {
                emitter.literal_with_comment(text, continuation, comment);
                return true;
            }
            Style::Folded => {
                emitter.folded(text, continuation, comment);
                return true;
            }
        }
        false
    }
}
