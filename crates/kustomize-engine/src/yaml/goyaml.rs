//! Where go-yaml, kustomize's YAML reader, reads text otherwise than the YAML spec (and the
//! parser used here) does, and how the parser's output is brought to go-yaml's reading:
//! folded block scalars keep an extra line break before more-indented lines, and quoted
//! scalars may continue on lines no deeper than their key (common in generated CRDs).

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
    }
}
