//! Reading a document: the parser's events become the node tree, then the comments the
//! parser reports are attached to nodes as go-yaml attaches them.

use granit_parser::{Event, Placement, ScalarStyle, StructureStyle};

use super::{Content, Document, DocumentError, INDENT, Node, Pos, Style, Tag, resolved_tag};

/// The deepest nesting read; the document is in a string that already passed the resource
/// reader, whose limit this mirrors.
const MAX_DEPTH: usize = crate::yaml::parse::MAX_DEPTH;

#[derive(Default)]
pub(super) struct Reader {
    stack: Vec<Open>,
    root: Option<Node>,
    comments: Vec<Comment>,
    anchor_names: std::collections::HashMap<usize, String>,
    /// The last node event was a scalar (an anchor event that follows names it).
    last_was_scalar: bool,
}

enum Open {
    Mapping {
        entries: Vec<(Node, Node)>,
        key: Option<Box<Node>>,
        flow: bool,
        start: Pos,
        tag: Option<String>,
        anchor: Option<String>,
    },
    Sequence {
        items: Vec<Node>,
        flow: bool,
        start: Pos,
        tag: Option<String>,
        anchor: Option<String>,
    },
}

struct Comment {
    text: String,
    placement: Placement,
    start: Pos,
    end: Pos,
}

impl Reader {
    /// Takes one parser event; `false` once the first document has ended.
    pub(super) fn event(
        &mut self,
        event: Event<'_>,
        start: Pos,
        end: Pos,
    ) -> Result<bool, DocumentError> {
        if !matches!(event, Event::Anchor(..) | Event::Comment(..)) {
            self.last_was_scalar = matches!(event, Event::Scalar(..));
        }
        match event {
            Event::DocumentEnd => return Ok(self.root.is_none() && self.stack.is_empty()),
            Event::Comment(text, placement) => self.comments.push(Comment {
                text: format!("#{text}"),
                placement,
                start,
                end,
            }),
            Event::Anchor(id, name) => self.anchor(id, name.into_owned()),
            Event::Alias(id) => {
                let name = self.anchor_names.get(&id).cloned().unwrap_or_default();
                self.complete(Node::new(Content::Alias(name), start, end));
            }
            Event::Scalar(text, style, _, tag) => {
                self.complete(scalar(text.into_owned(), style, tag.as_deref(), start, end));
            }
            Event::MappingStart(style, _, ref tag) | Event::SequenceStart(style, _, ref tag) => {
                if self.stack.len() >= MAX_DEPTH {
                    return Err(DocumentError::TooDeep { limit: MAX_DEPTH });
                }
                let flow = style == StructureStyle::Flow;
                let tag = tag.as_ref().map(|tag| tag_name(tag));
                let mapping = matches!(event, Event::MappingStart(..));
                self.stack.push(Open::new(mapping, flow, start, tag));
            }
            Event::MappingEnd | Event::SequenceEnd => {
                if let Some(open) = self.stack.pop() {
                    self.complete(open.close(end));
                }
            }
            _ => {}
        }
        Ok(true)
    }

    /// An anchor follows the anchored node's event: a scalar already placed, or a
    /// collection still open.
    fn anchor(&mut self, id: usize, name: String) {
        self.anchor_names.insert(id, name.clone());
        match (self.last_was_scalar, self.stack.last_mut()) {
            (false, Some(Open::Mapping { anchor, .. } | Open::Sequence { anchor, .. })) => {
                *anchor = Some(name);
            }
            _ => {
                if let Some(node) = self.last_completed_mut() {
                    node.anchor = Some(name);
                }
            }
        }
    }

    fn last_completed_mut(&mut self) -> Option<&mut Node> {
        match self.stack.last_mut() {
            Some(Open::Mapping { entries, key, .. }) => match key {
                Some(key) => Some(key.as_mut()),
                None => entries.last_mut().map(|(_, value)| value),
            },
            Some(Open::Sequence { items, .. }) => items.last_mut(),
            None => self.root.as_mut(),
        }
    }

    fn complete(&mut self, node: Node) {
        match self.stack.last_mut() {
            Some(Open::Mapping { entries, key, .. }) => match key.take() {
                Some(k) => entries.push((*k, node)),
                None => *key = Some(Box::new(node)),
            },
            Some(Open::Sequence { items, .. }) => items.push(node),
            None => self.root = Some(node),
        }
    }

    /// The document read, with its comments attached; `text` is the source, whose blank
    /// lines and indentation decide where own-line comments belong.
    pub(super) fn finish(self, text: &str) -> Document {
        let mut document = Document {
            root: self.root.unwrap_or_else(|| {
                Node::new(
                    Content::Scalar {
                        text: String::new(),
                        style: Style::Plain,
                        tag: Tag {
                            name: "!!null".into(),
                            explicit: false,
                        },
                    },
                    (0, 0),
                    (0, 0),
                )
            }),
            head_comment: Vec::new(),
            foot_comment: Vec::new(),
            foot_separated: false,
        };
        let lines = SourceLines::new(text);
        let mut groups: Vec<Comment> = Vec::new();
        // Consecutive own-line comments at one column form a group, as go-yaml reads them.
        for comment in self.comments {
            if let Some(last) = groups.last_mut()
                && comment.placement != Placement::Right
                && last.placement != Placement::Right
                && last.end.0 + 1 == comment.start.0
                && last.start.1 == comment.start.1
            {
                last.text.push('\n');
                last.text.push_str(&comment.text);
                last.end = comment.end;
                last.placement = comment.placement;
                continue;
            }
            groups.push(comment);
        }
        for group in groups {
            document.attach(group, &lines);
        }
        document
    }
}

/// A scalar event's node: its style, and its tag as written or as the plain text resolves.
fn scalar(
    text: String,
    style: ScalarStyle,
    tag: Option<&granit_parser::Tag>,
    start: Pos,
    end: Pos,
) -> Node {
    let style = match style {
        ScalarStyle::Plain => Style::Plain,
        ScalarStyle::SingleQuoted => Style::SingleQuoted,
        ScalarStyle::DoubleQuoted => Style::DoubleQuoted,
        ScalarStyle::Literal => Style::Literal,
        ScalarStyle::Folded => Style::Folded,
    };
    let tag = match tag {
        Some(tag) => Tag {
            name: tag_name(tag),
            explicit: true,
        },
        None if style == Style::Plain => Tag {
            name: resolved_tag(&text).to_string(),
            explicit: false,
        },
        None => Tag {
            name: "!!str".to_string(),
            explicit: false,
        },
    };
    // The parser writes an empty value (`key:`) as `~`; its text is empty.
    let text = if style == Style::Plain && start == end {
        String::new()
    } else {
        text
    };
    Node::new(Content::Scalar { text, style, tag }, start, end)
}

impl Open {
    fn new(mapping: bool, flow: bool, start: Pos, tag: Option<String>) -> Open {
        if mapping {
            Open::Mapping {
                entries: Vec::new(),
                key: None,
                flow,
                start,
                tag,
                anchor: None,
            }
        } else {
            Open::Sequence {
                items: Vec::new(),
                flow,
                start,
                tag,
                anchor: None,
            }
        }
    }

    /// The collection's node; a block collection ends where its last value does, a flow one
    /// at its closing bracket (`end`).
    fn close(self, end: Pos) -> Node {
        let (content, open, last_end, tag, anchor) = match self {
            Open::Mapping {
                entries,
                flow,
                start,
                tag,
                anchor,
                ..
            } => {
                let last_end = if flow {
                    Some(end)
                } else {
                    entries.last().map(|(_, v)| v.end)
                };
                (
                    Content::Mapping { entries, flow },
                    start,
                    last_end,
                    tag,
                    anchor,
                )
            }
            Open::Sequence {
                items,
                flow,
                start,
                tag,
                anchor,
            } => {
                let last_end = if flow {
                    Some(end)
                } else {
                    items.last().map(|item| item.end)
                };
                (
                    Content::Sequence { items, flow },
                    start,
                    last_end,
                    tag,
                    anchor,
                )
            }
        };
        let mut node = Node::new(content, open, last_end.unwrap_or(open));
        node.collection_tag = tag;
        node.anchor = anchor;
        node
    }
}

/// The source's lines, 1-based as the parser counts them, for what comments sit between.
struct SourceLines<'t>(Vec<&'t str>);

impl<'t> SourceLines<'t> {
    fn new(text: &'t str) -> SourceLines<'t> {
        SourceLines(text.lines().collect())
    }

    fn is_blank(&self, line: usize) -> bool {
        line >= 1 && self.0.get(line - 1).is_some_and(|l| l.trim().is_empty())
    }

    /// The indentation of the first line after `line` that holds content (not blank, not
    /// only a comment).
    fn next_content_indent(&self, line: usize) -> Option<usize> {
        self.0.iter().skip(line).find_map(|l| {
            let trimmed = l.trim_start();
            (!trimmed.is_empty() && !trimmed.starts_with('#')).then(|| l.len() - trimmed.len())
        })
    }
}

impl Document {
    fn attach(&mut self, comment: Comment, source: &SourceLines) {
        let lines: Vec<String> = comment.text.lines().map(str::to_string).collect();
        if comment.placement == Placement::Right {
            if let Some(node) = ends_last_on_line(&mut self.root, comment.start) {
                node.line_comment = Some(comment.text);
            } else if self.root.start > comment.start {
                // `--- # comment`: go-yaml heads the document's content with it.
                self.root.head_comment.extend(lines);
            } else if let Some(node) = starts_first_after(&mut self.root, comment.end) {
                // `- # comment` before an item's content.
                node.line_comment = Some(comment.text);
            }
            return;
        }
        let (line, column) = comment.start;
        let preceded_by_blank = source.is_blank(line - 1);
        let followed_by_blank = comment.placement == Placement::Free;
        let next_indent = source.next_content_indent(comment.end.0);
        let before_everything = self.root.start > comment.start
            || matches!(&self.root.content, Content::Scalar { text, .. } if text.is_empty());
        if before_everything {
            if followed_by_blank {
                self.head_comment.extend(lines);
            } else {
                self.root.head_comment.extend(lines);
            }
            return;
        }
        // Comments deeper than what follows close the entries they are indented under;
        // comments right after content and before a blank line close the entry before them.
        let closes = match next_indent {
            None => !preceded_by_blank,
            Some(indent) => column > indent || followed_by_blank && !preceded_by_blank,
        };
        // go-yaml reads a comment under a key with no value as heading what follows.
        let closed = closes
            .then(|| closed_entry(&self.root, comment.start))
            .flatten()
            .filter(|(_, _, empty_value)| !empty_value);
        if let Some((start, is_key, _)) = closed
            && let Some(node) = find_entry_mut(&mut self.root, start, is_key)
        {
            node.foot_comment.extend(lines);
            return;
        }
        match starts_first_after(&mut self.root, comment.end) {
            Some(node) if next_indent.is_some() => node.head_comment.extend(lines),
            _ => {
                self.foot_separated = preceded_by_blank;
                self.foot_comment.extend(lines);
            }
        }
    }
}

fn tag_name(tag: &granit_parser::Tag) -> String {
    match tag.core_suffix() {
        Some(suffix) => format!("!!{suffix}"),
        None => format!("{}{}", tag.original_handle(), tag.suffix()),
    }
}

/// The scalar or flow collection that ends last before `at` on `at`'s line (the outermost
/// of those ending together).
fn ends_last_on_line(node: &mut Node, at: Pos) -> Option<&mut Node> {
    let mut best: Option<Pos> = None;
    visit(node, &mut |n| {
        let inline = matches!(n.content, Content::Scalar { .. } | Content::Alias(_))
            || !n.is_block_collection();
        if inline && n.end.0 == at.0 && n.end <= at && best.is_none_or(|b| n.end > b) {
            best = Some(n.end);
        }
    });
    let best = best?;
    find_mut(node, &|n| {
        (matches!(n.content, Content::Scalar { .. } | Content::Alias(_))
            || !n.is_block_collection())
            && n.end == best
    })
}

/// The outermost node that starts first at or after `at`.
fn starts_first_after(node: &mut Node, at: Pos) -> Option<&mut Node> {
    let mut best: Option<Pos> = None;
    visit(node, &mut |n| {
        if n.start >= at && n.start != (0, 0) && best.is_none_or(|b| n.start < b) {
            best = Some(n.start);
        }
    });
    let best = best?;
    find_mut(node, &|n| n.start == best)
}

/// The entry a comment block followed by a blank line closes: within the innermost entry
/// still open at `at`, the one that starts last among those that end before `at` at a column
/// no deeper than `at`'s. A mapping entry's column is its key's, a sequence item's its dash's.
///
/// go-yaml hands a comment that closes a block-mapping item of a sequence on to the next item:
/// to the first key of that item when it is a mapping too, else to the item itself.
/// Returns where the entry (or the one go-yaml hands the comment to) starts, whether that
/// is a key, and whether the closed entry is a key with no value.
fn closed_entry(node: &Node, at: Pos) -> Option<(Pos, bool, bool)> {
    let mut found = Vec::new();
    entries(node, &mut found);
    let open_since = found
        .iter()
        .filter(|entry| entry.start < at && entry.end > at)
        .map(|entry| entry.start)
        .max();
    let best = found
        .iter()
        .filter(|entry| open_since.is_none_or(|open| entry.start >= open))
        .filter(|entry| entry.start < at && entry.end <= at && entry.column <= at.1)
        .max_by_key(|entry| entry.start)?;
    let (start, is_key) = best.handed_to.unwrap_or((best.start, best.is_key));
    Some((start, is_key, best.empty_value))
}

/// A mapping entry or sequence item, for [`closed_entry`].
struct Entry {
    start: Pos,
    column: usize,
    end: Pos,
    is_key: bool,
    /// A key with no value (`key:`).
    empty_value: bool,
    /// Where go-yaml moves a foot comment of this entry: a start, and whether it is a key's.
    handed_to: Option<(Pos, bool)>,
}

fn entries(node: &Node, out: &mut Vec<Entry>) {
    match &node.content {
        Content::Mapping { entries: pairs, .. } => {
            for (key, value) in pairs {
                out.push(Entry {
                    start: key.start,
                    is_key: true,
                    empty_value: value.is_empty_plain(),
                    column: key.start.1,
                    end: value.end.max(key.end),
                    handed_to: None,
                });
                entries(value, out);
            }
        }
        Content::Sequence { items, flow } => {
            for (index, item) in items.iter().enumerate() {
                let handed_to = match (
                    item.is_block_collection(),
                    &item.content,
                    items.get(index + 1),
                ) {
                    (true, Content::Mapping { .. }, Some(next)) if !flow => {
                        Some(match &next.content {
                            Content::Mapping {
                                entries: pairs,
                                flow: false,
                            } if !pairs.is_empty() => (pairs[0].0.start, true),
                            _ => (next.start, false),
                        })
                    }
                    _ => None,
                };
                out.push(Entry {
                    start: item.start,
                    is_key: false,
                    empty_value: false,
                    column: item.start.1.saturating_sub(INDENT),
                    end: item.end,
                    handed_to,
                });
                entries(item, out);
            }
        }
        Content::Scalar { .. } | Content::Alias(_) => {}
    }
}

fn find_entry_mut(node: &mut Node, start: Pos, is_key: bool) -> Option<&mut Node> {
    match &mut node.content {
        Content::Mapping { entries, .. } => {
            for (key, value) in entries.iter_mut() {
                if is_key && key.start == start {
                    return Some(key);
                }
                if let Some(found) = find_entry_mut(value, start, is_key) {
                    return Some(found);
                }
            }
            None
        }
        Content::Sequence { items, .. } => {
            for item in items.iter_mut() {
                if !is_key && item.start == start {
                    return Some(item);
                }
                if let Some(found) = find_entry_mut(item, start, is_key) {
                    return Some(found);
                }
            }
            None
        }
        Content::Scalar { .. } | Content::Alias(_) => None,
    }
}

/// Every node, parents before children, keys before values.
fn visit(node: &Node, f: &mut dyn FnMut(&Node)) {
    f(node);
    match &node.content {
        Content::Mapping { entries, .. } => {
            for (key, value) in entries {
                visit(key, f);
                visit(value, f);
            }
        }
        Content::Sequence { items, .. } => items.iter().for_each(|item| visit(item, f)),
        Content::Scalar { .. } | Content::Alias(_) => {}
    }
}

/// The first node in [`visit`] order that `matches`.
fn find_mut<'n>(node: &'n mut Node, matches: &dyn Fn(&Node) -> bool) -> Option<&'n mut Node> {
    if matches(node) {
        return Some(node);
    }
    match &mut node.content {
        Content::Mapping { entries, .. } => entries
            .iter_mut()
            .find_map(|(key, value)| find_mut(key, matches).or_else(|| find_mut(value, matches))),
        Content::Sequence { items, .. } => {
            items.iter_mut().find_map(|item| find_mut(item, matches))
        }
        Content::Scalar { .. } | Content::Alias(_) => None,
    }
}
