//! Where go-yaml, kustomize's YAML reader, reads text otherwise than the YAML spec (and the
//! parser used here) does, and how the parser's output is brought to go-yaml's reading:
//! folded block scalars keep an extra line break before more-indented lines, quoted
//! scalars may continue on lines no deeper than their key (common in generated CRDs), and
//! NEL (U+0085) breaks lines as YAML 1.1 says. Also kyaml's own rule for the lines that
//! separate documents in resource files.

use std::borrow::Cow;

use super::YamlError;

/// A folded block scalar's value as go-yaml reads it, where that differs from the spec: a
/// "more-indented" line (one starting with a space or tab) that follows a normal line gets one
/// line break more than the spec gives it.
pub(super) fn go_yaml_folded(value: &str) -> Option<String> {
    let more_indented = |line: &str| line.starts_with([' ', '\t']);
    if !value.contains("\n ") && !value.contains("\n\t") {
        return None;
    }
    let lines: Vec<&str> = value.split('\n').collect();
    let mut out = String::with_capacity(value.len() + 8);
    let mut previous_text: Option<&str> = None;
    let mut changed = false;
    for (index, line) in lines.iter().enumerate() {
        if index > 0 {
            out.push('\n');
        }
        if more_indented(line) && previous_text.is_some_and(|p| !more_indented(p)) {
            out.push('\n');
            changed = true;
        }
        if !line.is_empty() {
            previous_text = Some(line);
        }
        out.push_str(line);
    }
    changed.then_some(out)
}

/// The parser's words for a quoted scalar whose continuation lines are not indented past
/// their key: valid for go-yaml (and common in generated CRDs), refused by the spec.
const SHALLOW_QUOTED_CONTINUATION: &str = "invalid indentation in multiline quoted scalar";

/// Runs `read` on `text`, and when the parser refuses a quoted scalar's shallow continuation
/// lines, once more with those lines indented past their key. Leading white space of a
/// quoted scalar's continuation line is folded away, so the value read is go-yaml's.
pub(super) fn leniently<R>(
    text: &str,
    read: impl Fn(&str) -> Result<R, YamlError>,
) -> Result<R, YamlError> {
    let text = &*nel_as_line_break(text);
    match read(text) {
        Err(error @ YamlError::Syntax { .. }) if is_shallow_continuation(&error) => {
            match indent_quoted_continuations(text) {
                Some(fixed) => read(&fixed),
                None => Err(error),
            }
        }
        other => other,
    }
}

fn is_shallow_continuation(error: &YamlError) -> bool {
    matches!(error, YamlError::Syntax { message, .. } if message == SHALLOW_QUOTED_CONTINUATION)
}

/// `text` with every continuation line of a multi-line quoted scalar in block context
/// indented one column past the line the scalar starts on; `None` when there is none.
pub(super) fn indent_quoted_continuations(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len() + 64);
    let mut open: Option<(char, usize)> = None;
    let mut changed = false;
    for line in text.split_inclusive('\n') {
        let indent = line.len() - line.trim_start_matches(' ').len();
        let mut line = std::borrow::Cow::Borrowed(line);
        let scan_from = match open {
            Some((_, key_indent)) => {
                if !line.trim().is_empty() && indent <= key_indent {
                    line = format!("{}{}", " ".repeat(key_indent + 1 - indent), line).into();
                    changed = true;
                }
                0
            }
            None => match quoted_value_start(&line) {
                Some((quote, at)) => {
                    open = Some((quote, indent));
                    at + 1
                }
                None => {
                    out.push_str(&line);
                    continue;
                }
            },
        };
        if let Some((quote, _)) = open
            && closes(&line[scan_from..], quote)
        {
            open = None;
        }
        out.push_str(&line);
    }
    changed.then_some(out)
}

/// Where a quoted scalar starts as a block value on `line` (after `key:`, `-` or nothing).
fn quoted_value_start(line: &str) -> Option<(char, usize)> {
    let at = line.find(['\'', '"'])?;
    let before = line[..at].trim_end();
    let starts_value = before.is_empty() || before.ends_with(':') || before.ends_with('-');
    if !starts_value || before.contains('#') || before.contains(['{', '[']) {
        return None;
    }
    let quote = line[at..].chars().next()?;
    (!closes(&line[at + 1..], quote)).then_some((quote, at))
}

/// Whether `rest` (inside a quoted scalar) holds its closing quote.
fn closes(rest: &str, quote: char) -> bool {
    let mut chars = rest.chars().peekable();
    while let Some(c) = chars.next() {
        match (quote, c) {
            ('"', '\\') => {
                chars.next();
            }
            ('\'', '\'') if chars.peek() == Some(&'\'') => {
                chars.next();
            }
            (q, c) if q == c => return true,
            _ => {}
        }
    }
    false
}

/// go-yaml breaks lines at NEL (U+0085) as YAML 1.1 says, and at a carriage return that no
/// line feed follows, and reads either break as `\n`: in a quoted or plain scalar it folds to
/// a space, in a block scalar it is a line break, and it ends a comment. The spec the parser
/// follows (YAML 1.2) reads NEL as an ordinary character, and the line-based rewrites here
/// look for `\n` alone. (A value substituted from a Secret written on Windows ends in `\r`
/// once Flux drops its `\n`.) go-yaml breaks lines at U+2028 and U+2029 too but keeps them as
/// they are, which no rewriting of the text reproduces; those are read as ordinary characters.
fn nel_as_line_break(text: &str) -> Cow<'_, str> {
    let lone_cr = |text: &str| {
        text.match_indices('\r')
            .any(|(at, _)| text.as_bytes().get(at + 1) != Some(&b'\n'))
    };
    if !text.contains('\u{85}') && !lone_cr(text) {
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

/// kyaml's reader of resource files splits them at every line that starts with `---` and
/// follows a line break (matched as the regular expression `\n---.*\n`, one match ending
/// where the next may start only after a line break), and refuses a separator line with
/// anything but blanks or a comment after the `---`. The YAML spec allows a document to start
/// on its separator line (`--- {kind: X}`); kustomize does not.
pub(super) fn kyaml_document_separators(text: &str) -> Result<(), YamlError> {
    let text = text.replace("\r\n", "\n");
    let mut line = 1;
    let mut rest = text.as_str();
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
        assert_eq!(indent_quoted_continuations("a: 'x'\nb: 1\n"), None);
        assert_eq!(
            indent_quoted_continuations("k:\n  d: 'one\n  two'\n").as_deref(),
            Some("k:\n  d: 'one\n   two'\n")
        );
        assert_eq!(nel_as_line_break("a: b\n"), "a: b\n");
        assert_eq!(nel_as_line_break("a: 'b\u{85}c'\n"), "a: 'b\nc'\n");
        assert_eq!(nel_as_line_break("a: b\r\nc: d\r\n"), "a: b\r\nc: d\r\n");
        assert_eq!(
            nel_as_line_break("a: 'b\rc'\rd: e\r\n"),
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
