//! Where go-yaml, kustomize's YAML reader, reads text otherwise than the YAML spec (and the
//! parser used here) does, and how the parser's output is brought to go-yaml's reading:
//! folded block scalars keep an extra line break before more-indented lines, and NEL (U+0085)
//! and a lone carriage return break lines. Also kyaml's own rules for the lines that separate
//! documents in resource files and for a BOM that starts a document.

use std::borrow::Cow;

use super::YamlError;
use super::emit::is_printable;

/// A folded block scalar's value as kustomize reads a resource, where that differs from the
/// spec. go-yaml reads the spec's value, but kyaml writes the scalar back folded and reads it
/// again, and go-yaml's emitter, writing a line break after a line that starts with no blank,
/// adds a blank line so that the break does not fold into a space; it tests the value's first
/// character for the line's, so it adds one where no folding happens either: before a
/// "more-indented" line (one starting with a space or tab) and at the end of breaks kept by
/// `+`. Each of those comes back one line break longer. None of it happens when the emitter
/// writes the value quoted instead (a space before a line break or at the end, a character it
/// cannot print) or starts it with a blank (left as the spec reads it).
pub(super) fn go_yaml_folded(value: &str) -> Option<String> {
    let blank_start = |line: &str| line.starts_with([' ', '\t']);
    let block_allowed = !value.ends_with(' ')
        && !value.contains(" \n")
        && value.chars().all(|c| c == '\t' || is_printable(c));
    if !block_allowed || blank_start(value.trim_start_matches('\n')) {
        return None;
    }
    let mut out = String::with_capacity(value.len() + 8);
    let mut previous_text: Option<&str> = None;
    let mut changed = false;
    for (index, line) in value.split('\n').enumerate() {
        if index > 0 {
            out.push('\n');
        }
        if blank_start(line) && previous_text.is_some_and(|p| !blank_start(p)) {
            out.push('\n');
            changed = true;
        }
        if !line.is_empty() {
            previous_text = Some(line);
        }
        out.push_str(line);
    }
    if value.ends_with("\n\n") && previous_text.is_some_and(|p| !blank_start(p)) {
        out.push('\n');
        changed = true;
    }
    changed.then_some(out)
}

/// go-yaml knows YAML 1.1's escapes, which lack 1.2's `\/`: a double-quoted scalar (the text
/// from byte `start` to `end`) that uses it is an error.
pub(super) fn refuse_yaml_1_2_escapes(
    text: &str,
    start: usize,
    end: usize,
) -> Result<(), YamlError> {
    let Some(quoted) = text.get(start..end) else {
        return Ok(());
    };
    let mut chars = quoted.char_indices();
    while let Some((_, c)) = chars.next() {
        if c == '\\'
            && let Some((at, '/')) = chars.next()
        {
            let before = &text[..start + at];
            return Err(YamlError::Syntax {
                line: before.matches('\n').count() + 1,
                column: before[before.rfind('\n').map_or(0, |n| n + 1)..]
                    .chars()
                    .count(),
                message: "found unknown escape character".to_string(),
            });
        }
    }
    Ok(())
}

/// go-yaml breaks lines at NEL (U+0085) as YAML 1.1 says, and at a carriage return that no
/// line feed follows, and reads either break as `\n`: in a quoted or plain scalar it folds to
/// a space, in a block scalar it is a line break, and it ends a comment. The spec the parser
/// follows (YAML 1.2) reads NEL as an ordinary character, and the line-based rewrites here
/// look for `\n` alone. (A value substituted from a Secret written on Windows keeps its `\r`s
/// once Flux drops the `\n`s.) go-yaml breaks lines at U+2028 and U+2029 too but keeps them as
/// they are, which no rewriting of the text reproduces; those are read as ordinary characters.
pub(super) fn go_yaml_line_breaks(text: &str) -> Cow<'_, str> {
    if !text.contains('\u{85}') && !has_lone_cr(text) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{85}' => out.push('\n'),
            '\r' if chars.peek() != Some(&'\n') => out.push('\n'),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Whether a carriage return in `text` has no line feed after it.
fn has_lone_cr(text: &str) -> bool {
    text.match_indices('\r')
        .any(|(at, _)| text.as_bytes().get(at + 1) != Some(&b'\n'))
}

/// A resource stream as kyaml's reader takes it apart: separator lines checked
/// ([`kyaml_document_separators`]), a BOM that starts a document dropped
/// ([`kyaml_document_boms`]), and of a part that kyaml does not split further only the first
/// document kept ([`kyaml_first_documents`]).
pub(super) fn kyaml_stream(text: &str) -> Result<Cow<'_, str>, YamlError> {
    kyaml_document_separators(text)?;
    Ok(match kyaml_first_documents(text) {
        Some(parts) => Cow::Owned(kyaml_document_boms(&parts).into_owned()),
        None => kyaml_document_boms(text),
    })
}

/// kyaml splits a stream only at separator lines after a line feed and decodes one document
/// of each part, so in a file whose lines end in a carriage return alone every document after
/// the first of a part is never read. `None` when the text has no such carriage return.
fn kyaml_first_documents(text: &str) -> Option<String> {
    if !has_lone_cr(text) {
        return None;
    }
    let text = text.replace("\r\n", "\n");
    let mut out = String::with_capacity(text.len());
    let mut part = String::new();
    // The pattern `\n---.*\n`: a match takes the line feed after it, so a separator line right
    // after another is not one.
    let mut after_separator = false;
    for (index, line) in text.split_inclusive('\n').enumerate() {
        let separator =
            index > 0 && !after_separator && line.starts_with("---") && line.ends_with('\n');
        if separator {
            out.push_str(first_document(&part));
            out.push_str(line);
            part.clear();
        } else {
            part.push_str(line);
        }
        after_separator = separator;
    }
    out.push_str(first_document(&part));
    Some(out)
}

/// `part` up to where a second document would start, breaking lines at `\r` as at `\n`.
fn first_document(part: &str) -> &str {
    let mut content = false;
    let mut at = 0;
    for line in part.split_inclusive(['\r', '\n']) {
        let text = line.trim_end_matches(['\r', '\n']);
        let marker = |m: &str| {
            text.strip_prefix(m)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t']))
        };
        if (marker("---") && content) || marker("...") {
            return &part[..at];
        }
        let trimmed = text.trim();
        content |= marker("---") || !(trimmed.is_empty() || trimmed.starts_with('#'));
        at += line.len();
    }
    part
}

/// kyaml decodes each document of a resource file on its own, so a BOM that starts a document
/// after a separator line (a file saved with one, appended to another) is its stream's BOM,
/// which go-yaml skips; inside a document it is a character (`bom_inside_document_as_content`).
fn kyaml_document_boms(text: &str) -> Cow<'_, str> {
    if !text.contains("\n\u{FEFF}") {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut after_separator = false;
    for line in text.split_inclusive('\n') {
        let line = match line.strip_prefix('\u{FEFF}') {
            Some(rest) if after_separator => rest,
            _ => line,
        };
        after_separator = line.starts_with("---");
        out.push_str(line);
    }
    Cow::Owned(out)
}

/// kyaml's reader of resource files splits them at every line that starts with `---` and
/// follows a line break (matched as the regular expression `\n---.*\n`, one match ending
/// where the next may start only after a line break), and refuses a separator line with
/// anything but blanks or a comment after the `---`. The YAML spec allows a document to start
/// on its separator line (`--- {kind: X}`); kustomize does not.
fn kyaml_document_separators(text: &str) -> Result<(), YamlError> {
    let text = if text.contains('\r') {
        Cow::Owned(text.replace("\r\n", "\n"))
    } else {
        Cow::Borrowed(text)
    };
    let mut line = 1;
    let mut rest: &str = &text;
    while let Some(at) = rest.find("\n---") {
        line += rest[..at].matches('\n').count() + 1;
        let after = &rest[at + 4..];
        // The regular expression needs the separator line to end in a line break.
        let Some(end) = after.find('\n') else {
            break;
        };
        let content = after[..end].trim();
        if !content.is_empty() && !content.starts_with('#') {
            return Err(YamlError::DocumentSeparator {
                separator: format!("---{}", &after[..end]).trim().to_string(),
                line,
            });
        }
        // The next match must start with a line break after this one's.
        line += 1;
        rest = &after[end + 1..];
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_go_yaml_reads_otherwise_is_rewritten() {
        assert_eq!(go_yaml_folded("plain folded text\n"), None);
        assert_eq!(go_yaml_folded("a\n  b\n").as_deref(), Some("a\n\n  b\n"));
        assert_eq!(go_yaml_folded("a\n\tb").as_deref(), Some("a\n\n\tb"));
        assert_eq!(go_yaml_folded("one\n\n").as_deref(), Some("one\n\n\n"));
        assert_eq!(go_yaml_folded("one\n"), None);
        // Written quoted, or starting with a blank: read back as it is.
        assert_eq!(go_yaml_folded("one \n  two\n"), None);
        assert_eq!(go_yaml_folded("one\n  two "), None);
        assert_eq!(go_yaml_folded(" one\ntwo\n  three\n"), None);
        assert_eq!(go_yaml_line_breaks("a: b\n"), "a: b\n");
        assert_eq!(go_yaml_line_breaks("a: 'b\u{85}c'\n"), "a: 'b\nc'\n");
        assert_eq!(go_yaml_line_breaks("a: b\r\nc: d\r\n"), "a: b\r\nc: d\r\n");
        assert_eq!(kyaml_document_boms("a: \u{FEFF}b\n"), "a: \u{FEFF}b\n");
        assert_eq!(kyaml_first_documents("a: 1\n---\nb: 2\n"), None);
        assert_eq!(
            kyaml_first_documents("a: 1\r---\rb: 2\n---\n---\rc: 3\r---\rd: 4\r...\r").as_deref(),
            Some("a: 1\r---\n---\rc: 3\r")
        );
        assert_eq!(
            kyaml_document_boms("a: 1\n--- # x\n\u{FEFF}b: 2\n\u{FEFF}c: 3\n"),
            "a: 1\n--- # x\nb: 2\n\u{FEFF}c: 3\n"
        );
        assert_eq!(
            go_yaml_line_breaks("a: 'b\rc'\rd: e\r\n"),
            "a: 'b\nc'\nd: e\r\n"
        );
    }

    /// kyaml's `splitDocuments` (kio/byteio_reader.go) and what its tests accept and refuse.
    #[test]
    fn separator_lines_are_checked_as_kyaml_checks_them() {
        let refused = |text: &str| match kyaml_document_separators(text) {
            Err(YamlError::DocumentSeparator { separator, line }) => Some((separator, line)),
            Err(other) => panic!("{other}"),
            Ok(()) => None,
        };
        for accepted in [
            "a: 1\n---\nb: 2\n",
            "a: 1\n---   \nb: 2\n",
            "a: 1\n--- # comment\nb: 2\n",
            "a: 1\r\n---\t#x\r\nb: 2\r\n",
            // The first line follows no line break; the decoder reads it.
            "--- {a: 1}\n---\nb: 2\n",
            // A separator line right after another is not matched.
            "a: 1\n---\n--- {b: 2}\n",
            // Nor one the text ends on without a line break.
            "a: 1\n--- {b: 2}",
            "a: |\n  ---x\n",
        ] {
            assert_eq!(refused(accepted), None, "{accepted:?}");
        }
        for (text, separator, line) in [
            ("a: 1\n--- {b: 2}\n", "--- {b: 2}", 2),
            ("a: 1\n---\nb: 2\n--- !!map\nc: 3\n", "--- !!map", 4),
            ("a: 1\n----\n", "----", 2),
            ("a: 1\n---x # y\n", "---x # y", 2),
        ] {
            assert_eq!(
                refused(text),
                Some((separator.to_string(), line)),
                "{text:?}"
            );
        }
    }
}
