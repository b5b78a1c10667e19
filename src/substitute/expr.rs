//! `${…}` expressions, bash-style, as Flux's envsubst evaluates them.
//!
//! Supported: `${v}`, defaults `${v:-d}` `${v-d}` `${v:=d}` `${v=d}` (defaults may contain
//! expressions themselves), `${#v}`, substrings `${v:off}` `${v:off:len}` (a negative offset
//! needs a space, `${v: -2}`, as in bash), prefix and suffix removal `${v#p}` `${v##p}` `${v%p}`
//! `${v%%p}`, replacement `${v/a/b}` `${v//a/b}` `${v/#a/b}` `${v/%a/b}`, and case `${v^}`
//! `${v^^}` `${v,}` `${v,,}`. `$${v}` is an escape for a literal `${v}`; a bare `$v` is left as
//! written. Patterns are literal strings, and the "longest" prefix/suffix forms remove a run of
//! the pattern's characters, as Flux's envsubst (derived from drone/envsubst) does rather than
//! bash's globbing. Offsets and lengths count characters.

use std::collections::BTreeMap;

/// Why an expression could not be evaluated. Never carries a variable's value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExprError {
    #[error("variable not set (strict mode): {0:?}")]
    Unset(String),
    /// The text is not quoted: it may be a decrypted secret value.
    #[error("bad substitution at character {0}")]
    Syntax(usize),
    #[error("unterminated expression at character {0}")]
    Unterminated(usize),
    #[error("expressions nest more than {MAX_DEPTH} levels deep")]
    TooDeep,
}

/// Variable lookup and strictness.
pub struct Context<'a> {
    pub vars: &'a BTreeMap<String, String>,
    /// A referenced variable that is unset and has no default is an error.
    pub strict: bool,
}

/// How deeply defaults may nest expressions (`${a:-${b:-…}}`).
const MAX_DEPTH: usize = 32;

/// Expands every `${…}` in `text`.
pub fn expand(text: &str, context: &Context) -> Result<String, ExprError> {
    expand_at(text, context, 0)
}

fn expand_at(text: &str, context: &Context, depth: usize) -> Result<String, ExprError> {
    if depth > MAX_DEPTH {
        return Err(ExprError::TooDeep);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(index) = rest.find('$') {
        out.push_str(&rest[..index]);
        let after = &rest[index + 1..];
        if let Some(escaped) = after.strip_prefix("${") {
            // `$${` is a literal `${`; what follows is copied through to its closing brace.
            out.push_str("${");
            rest = escaped;
            continue;
        }
        if let Some(body_and_rest) = after.strip_prefix('{') {
            let position = text.len() - rest.len() + index;
            let end = closing_brace(body_and_rest).ok_or(ExprError::Unterminated(position))?;
            let body = &body_and_rest[..end];
            out.push_str(&evaluate(body, context, depth, position)?);
            rest = &body_and_rest[end + 1..];
            continue;
        }
        out.push('$');
        rest = after;
    }
    out.push_str(rest);
    Ok(out)
}

/// The index of the `}` closing an expression whose body starts at `text`, honouring nested
/// `${…}` in defaults.
fn closing_brace(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'$' if bytes.get(i + 1) == Some(&b'{') => {
                depth += 1;
                i += 2;
                continue;
            }
            b'}' if depth == 0 => return Some(i),
            b'}' => depth -= 1,
            _ => {}
        }
        i += 1;
    }
    None
}

fn is_name_start(c: char) -> bool {
    c == '_' || c.is_ascii_alphabetic()
}

fn is_name_char(c: char) -> bool {
    c == '_' || c.is_ascii_alphanumeric()
}

/// Evaluates the inside of `${…}`.
fn evaluate(
    body: &str,
    context: &Context,
    depth: usize,
    position: usize,
) -> Result<String, ExprError> {
    let syntax = || ExprError::Syntax(position);
    if let Some(name) = body.strip_prefix('#') {
        if !name.starts_with(is_name_start) || !name.chars().all(is_name_char) {
            return Err(syntax());
        }
        return Ok(required(name, context)?.chars().count().to_string());
    }
    if !body.starts_with(is_name_start) {
        return Err(syntax());
    }
    let name_len = body.find(|c: char| !is_name_char(c)).unwrap_or(body.len());
    let (name, operation) = body.split_at(name_len);
    let value = context.vars.get(name);
    if operation.is_empty() {
        return required(name, context);
    }
    // Defaults: the default text is itself expanded, and only when used.
    for (prefix, when_empty) in [(":-", true), (":=", true), ("-", false), ("=", false)] {
        if let Some(default) = operation.strip_prefix(prefix) {
            return match value {
                Some(v) if !(when_empty && v.is_empty()) => Ok(v.clone()),
                _ => expand_at(default, context, depth + 1),
            };
        }
    }
    let value = required(name, context)?;
    let chars: Vec<char> = value.chars().collect();
    let op = operation;
    if let Some(spec) = op.strip_prefix(':') {
        let (offset, length) = match spec.split_once(':') {
            Some((offset, length)) => (offset, Some(length)),
            None => (spec, None),
        };
        let offset: i64 = offset.trim().parse().map_err(|_| syntax())?;
        let len = chars.len() as i64;
        let start = if offset < 0 {
            (len + offset).max(0)
        } else {
            offset.min(len)
        } as usize;
        let end = match length {
            None => chars.len(),
            Some(length) => {
                let length: i64 = length.trim().parse().map_err(|_| syntax())?;
                if length < 0 {
                    ((len + length).max(start as i64)) as usize
                } else {
                    (start + length as usize).min(chars.len())
                }
            }
        };
        return Ok(chars[start..end.max(start)].iter().collect());
    }
    if let Some(pattern) = op.strip_prefix("##") {
        return Ok(value
            .trim_start_matches(|c| pattern.contains(c))
            .to_string());
    }
    if let Some(pattern) = op.strip_prefix('#') {
        return Ok(value.strip_prefix(pattern).unwrap_or(&value).to_string());
    }
    if let Some(pattern) = op.strip_prefix("%%") {
        return Ok(value.trim_end_matches(|c| pattern.contains(c)).to_string());
    }
    if let Some(pattern) = op.strip_prefix('%') {
        return Ok(value.strip_suffix(pattern).unwrap_or(&value).to_string());
    }
    if let Some(spec) = op.strip_prefix('/') {
        let (mode, spec) = match spec.chars().next() {
            Some('/') => ('a', &spec[1..]),
            Some('#') => ('p', &spec[1..]),
            Some('%') => ('s', &spec[1..]),
            _ => ('f', spec),
        };
        let (from, to) = spec.split_once('/').unwrap_or((spec, ""));
        if from.is_empty() {
            return Ok(value);
        }
        return Ok(match mode {
            'a' => value.replace(from, to),
            'p' if value.starts_with(from) => format!("{to}{}", &value[from.len()..]),
            's' if value.ends_with(from) => format!("{}{to}", &value[..value.len() - from.len()]),
            'f' => value.replacen(from, to, 1),
            _ => value,
        });
    }
    let first_mapped = |map: fn(char) -> String| -> String {
        let mut it = value.chars();
        match it.next() {
            Some(first) => map(first) + it.as_str(),
            None => String::new(),
        }
    };
    match op {
        "^^" => Ok(value.to_uppercase()),
        "^" => Ok(first_mapped(|c| c.to_uppercase().collect())),
        ",," => Ok(value.to_lowercase()),
        "," => Ok(first_mapped(|c| c.to_lowercase().collect())),
        _ => Err(syntax()),
    }
}

/// The variable's value; unset is an error in strict mode and empty otherwise.
fn required(name: &str, context: &Context) -> Result<String, ExprError> {
    match context.vars.get(name) {
        Some(value) => Ok(value.clone()),
        None if context.strict => Err(ExprError::Unset(name.to_string())),
        None => Ok(String::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> BTreeMap<String, String> {
        [
            ("name", "world"),
            ("greeting", "Hello"),
            ("empty", ""),
            ("path", "/usr/local/bin/tool"),
            ("file", "archive.tar.gz"),
            ("mixed", "hELLo wORLD"),
            ("n", "3"),
            ("url", "https://example.com/a/b"),
            ("unicode", "éàü"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    fn run(text: &str, strict: bool) -> Result<String, ExprError> {
        let vars = vars();
        expand(
            text,
            &Context {
                vars: &vars,
                strict,
            },
        )
    }

    #[test]
    fn expression_table() {
        let cases: &[(&str, &str)] = &[
            ("${name}", "world"),
            ("Hello ${name}!", "Hello world!"),
            ("${greeting}, ${name}", "Hello, world"),
            ("${name}${name}", "worldworld"),
            ("plain text", "plain text"),
            ("", ""),
            ("$name", "$name"),
            ("cost: $5", "cost: $5"),
            ("a$", "a$"),
            ("$${name}", "${name}"),
            ("$${name} and ${name}", "${name} and world"),
            ("$$name", "$$name"),
            ("${missing:-default}", "default"),
            ("${empty:-default}", "default"),
            ("${name:-default}", "world"),
            ("${missing-default}", "default"),
            ("${empty-default}", ""),
            ("${missing:=set}", "set"),
            ("${empty:=set}", "set"),
            ("${missing=set}", "set"),
            ("${empty=set}", ""),
            ("${missing:-}", ""),
            ("${missing:-${name}}", "world"),
            ("${missing:-${other:-deep}}", "deep"),
            ("${missing:-a b c}", "a b c"),
            ("${missing:-http://x:80}", "http://x:80"),
            ("${#name}", "5"),
            ("${#empty}", "0"),
            ("${#unicode}", "3"),
            ("${name:1}", "orld"),
            ("${name:1:3}", "orl"),
            ("${name:0:1}", "w"),
            ("${name:10}", ""),
            ("${name:2:100}", "rld"),
            ("${name: -3}", "rld"),
            ("${name: -3:2}", "rl"),
            ("${name:1:-1}", "orl"),
            ("${unicode:1}", "àü"),
            ("${path#/usr}", "/local/bin/tool"),
            ("${path#nope}", "/usr/local/bin/tool"),
            ("${path##/usr}", "local/bin/tool"),
            ("${file%.gz}", "archive.tar"),
            ("${file%.zip}", "archive.tar.gz"),
            ("${file%%.gz}", "archive.tar"),
            ("${url/example/sample}", "https://sample.com/a/b"),
            ("${url//a/A}", "https://exAmple.com/A/b"),
            ("${url/https/http}", "http://example.com/a/b"),
            ("${file//a/A}", "Archive.tAr.gz"),
            ("${file/a/A}", "Archive.tar.gz"),
            ("${file/#arch/ARCH}", "ARCHive.tar.gz"),
            ("${file/#tar/X}", "archive.tar.gz"),
            ("${file/%gz/bz2}", "archive.tar.bz2"),
            ("${file/%tar/X}", "archive.tar.gz"),
            ("${file/a}", "rchive.tar.gz"),
            ("${name^}", "World"),
            ("${name^^}", "WORLD"),
            ("${mixed,}", "hELLo wORLD"),
            ("${mixed,,}", "hello world"),
            ("${greeting,}", "hello"),
            ("${empty^^}", ""),
            ("replicas: ${n}", "replicas: 3"),
            ("${n}${n}", "33"),
        ];
        for (input, expected) in cases {
            assert_eq!(run(input, true).as_deref(), Ok(*expected), "{input}");
        }
        assert!(cases.len() >= 60, "the table covers {} cases", cases.len());
    }

    #[test]
    fn strict_and_lenient_modes() {
        assert_eq!(
            run("${missing}", true),
            Err(ExprError::Unset("missing".into()))
        );
        assert_eq!(run("a ${missing} b", false).as_deref(), Ok("a  b"));
        assert_eq!(
            run("${missing^^}", true),
            Err(ExprError::Unset("missing".into()))
        );
        assert_eq!(
            run("${#missing}", true),
            Err(ExprError::Unset("missing".into()))
        );
        assert_eq!(run("${#missing}", false).as_deref(), Ok("0"));
    }

    #[test]
    fn syntax_errors_never_show_values() {
        for bad in [
            "${1abc}",
            "${}",
            "${ name}",
            "${name:x}",
            "${name?}",
            "${#1}",
        ] {
            let err = run(bad, true).unwrap_err();
            assert!(matches!(err, ExprError::Syntax(_)), "{bad}: {err}");
            assert!(!err.to_string().contains("world"), "{err}");
        }
        assert!(matches!(
            run("${name", true),
            Err(ExprError::Unterminated(_))
        ));
    }

    #[test]
    fn hostile_expressions_fail_without_quoting_text() {
        let vars = BTreeMap::new();
        let context = Context {
            vars: &vars,
            strict: false,
        };
        let deep = format!("{}x{}", "${a:-".repeat(5_000), "}".repeat(5_000));
        assert_eq!(expand(&deep, &context), Err(ExprError::TooDeep));
        let secret = "prefix ${not a name: hunter2}";
        let message = expand(secret, &context).unwrap_err().to_string();
        assert!(!message.contains("hunter2"), "{message}");
        assert_eq!(message, "bad substitution at character 7");
        let message = expand("x ${hunter2", &context).unwrap_err().to_string();
        assert_eq!(message, "unterminated expression at character 2");
    }
}
