//! `${…}` expressions, bash-style, as Flux's envsubst evaluates them.
//!
//! Supported: `${v}`; defaults `${v:-d}` `${v:=d}` `${v=d}` `${v:+d}` `${v:?d}`,
//! which Flux treats alike (an unset or empty value takes the default, which may contain
//! expressions itself); `${#v}`; substrings `${v:off}` `${v:off:len}` (a negative offset needs
//! a space, `${v: -2}`, as in bash); prefix and suffix removal `${v#p}` `${v##p}` `${v%p}`
//! `${v%%p}` with glob patterns (`*`, `?`, `[…]`; shortest or longest non-empty match);
//! replacement `${v/a/b}` `${v//a/b}` `${v/#a/b}` `${v/%a/b}` with literal patterns (`\/` is a
//! slash; an empty anchored pattern prepends or appends); case `${v^}` `${v^^}` `${v,}` `${v,,}`.
//! Lengths and offsets count bytes, as Flux does. `$$` is an escaped `$` (so `$${v}` is the
//! text `${v}`, and `$$(V)` is `$(V)`), except inside a default; a bare `$v` is left as written.

use std::collections::BTreeMap;

/// Why an expression could not be evaluated. Never carries a variable's value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExprError {
    #[error("variable not set (strict mode): {0:?}")]
    Unset(String),
    /// The text is not quoted: it may be a decrypted secret value. The three syntax errors
    /// are Flux's envsubst parser's, with where the expression starts.
    #[error("bad substitution at character {0}")]
    Syntax(usize),
    #[error("missing closing brace at character {0}")]
    Unterminated(usize),
    #[error("unable to parse variable name at character {0}")]
    VariableName(usize),
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

/// Expands every `${…}` in `text`, and makes each `$$` a `$`.
pub fn expand(text: &str, context: &Context) -> Result<String, ExprError> {
    expand_at(text, context, 0, Escapes::DoubleDollar)
}

/// Whether `$$` stands for `$`: in the text, as Flux's scanner reads it; not in a default,
/// which its parser reads without escapes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Escapes {
    DoubleDollar,
    None,
}

fn expand_at(
    text: &str,
    context: &Context,
    depth: usize,
    escapes: Escapes,
) -> Result<String, ExprError> {
    if depth > MAX_DEPTH {
        return Err(ExprError::TooDeep);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(index) = rest.find('$') {
        out.push_str(&rest[..index]);
        let after = &rest[index + 1..];
        if escapes == Escapes::DoubleDollar
            && let Some(escaped) = after.strip_prefix('$')
        {
            // `$$` is a `$` that starts nothing: `$${v}` is the text `${v}`.
            out.push('$');
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

/// A character of a variable's name in Flux's parser (Go's `unicode.IsLetter`/`IsDigit` or
/// `_`): a name may start with a digit (`${1}` is the variable `1`).
fn is_name_char(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
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
        if name.is_empty() || !name.chars().all(is_name_char) {
            return Err(syntax());
        }
        // Bytes, as Flux (Go's len).
        return Ok(required(name, context)?.len().to_string());
    }
    if !body.starts_with(is_name_char) {
        return Err(ExprError::VariableName(position));
    }
    let name_len = body.find(|c: char| !is_name_char(c)).unwrap_or(body.len());
    let (name, operation) = body.split_at(name_len);
    let value = context.vars.get(name);
    if operation.is_empty() {
        return required(name, context);
    }
    // Flux's parser knows an operation by its first character; after any other (`${v-d}`,
    // `${v d}`) it expects the closing brace.
    if !operation.starts_with([':', '=', ',', '^', '/', '#', '%']) {
        return Err(ExprError::Unterminated(position));
    }
    // Defaults: the default text is itself expanded, and only when used.
    // Flux's envsubst treats every default form alike: an unset or empty value takes the
    // default (unlike bash, where `=` keeps a set-but-empty value).
    for prefix in [":-", ":=", ":+", ":?", "="] {
        if let Some(default) = operation.strip_prefix(prefix) {
            return match value {
                Some(v) if !v.is_empty() => Ok(v.clone()),
                _ => expand_at(default, context, depth + 1, Escapes::None),
            };
        }
    }
    let value = required(name, context)?;
    let op = operation;
    if let Some(spec) = op.strip_prefix(':') {
        return Ok(substring(value, spec));
    }
    // Prefix and suffix removal take glob patterns (`*`, `?`, `[…]`), shortest or longest.
    if let Some(pattern) = op.strip_prefix("##") {
        return Ok(remove_prefix(&value, pattern, true));
    }
    if let Some(pattern) = op.strip_prefix('#') {
        return Ok(remove_prefix(&value, pattern, false));
    }
    if let Some(pattern) = op.strip_prefix("%%") {
        return Ok(remove_suffix(&value, pattern, true));
    }
    if let Some(pattern) = op.strip_prefix('%') {
        return Ok(remove_suffix(&value, pattern, false));
    }
    if let Some(spec) = op.strip_prefix('/') {
        return Ok(replace(value, spec));
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

/// `${name:offset[:length]}`, in bytes as Flux.
fn substring(value: String, spec: &str) -> String {
    // Byte offsets, as Flux; an offset or length that is not a number leaves the value
    // as it is (bash's behaviour, kept by Flux).
    let bytes = value.as_bytes();
    let len = bytes.len() as i64;
    let (offset, length) = match spec.split_once(':') {
        Some((offset, length)) => (offset, Some(length)),
        None => (spec, None),
    };
    let Ok(offset) = offset.trim().parse::<i64>() else {
        return value;
    };
    let start = if offset < 0 {
        (len + offset).max(0)
    } else {
        offset.min(len)
    } as usize;
    let end = match length {
        None => bytes.len(),
        Some(length) => {
            let Ok(length) = length.trim().parse::<i64>() else {
                return value;
            };
            if length < 0 {
                let end = len + length;
                if end < start as i64 {
                    return String::new();
                }
                end as usize
            } else {
                (start as i64 + length).min(len) as usize
            }
        }
    };
    String::from_utf8_lossy(&bytes[start..end.max(start)]).into_owned()
}

/// `${name/pattern/replacement}` and its `//`, `/#`, `/%` forms.
fn replace(value: String, spec: &str) -> String {
    let (mode, spec) = match spec.chars().next() {
        Some('/') => ('a', &spec[1..]),
        Some('#') => ('p', &spec[1..]),
        Some('%') => ('s', &spec[1..]),
        _ => ('f', spec),
    };
    let (from, to) = split_pattern(spec);
    match mode {
        // An empty anchored pattern prepends or appends.
        'p' if from.is_empty() => format!("{to}{value}"),
        's' if from.is_empty() => format!("{value}{to}"),
        _ if from.is_empty() => value,
        'a' => value.replace(&from, to),
        'p' if value.starts_with(&from) => format!("{to}{}", &value[from.len()..]),
        's' if value.ends_with(&from) => format!("{}{to}", &value[..value.len() - from.len()]),
        'f' => value.replacen(&from, to, 1),
        _ => value,
    }
}

/// `pattern/replacement`, where `\/` in the pattern is a literal slash.
fn split_pattern(spec: &str) -> (String, &str) {
    let mut pattern = String::new();
    let mut chars = spec.char_indices().peekable();
    while let Some((index, c)) = chars.next() {
        match c {
            '\\' if matches!(chars.peek(), Some((_, '/'))) => {
                pattern.push('/');
                chars.next();
            }
            '/' => return (pattern, &spec[index + 1..]),
            other => pattern.push(other),
        }
    }
    (pattern, "")
}

/// One glob token: any run of characters, or one character passing a test.
enum Token {
    Star,
    One(Box<dyn Fn(char) -> bool>),
}

/// Values longer than this are not glob-matched.
const MAX_GLOB_VALUE: usize = 64 * 1024;

/// Parses a shell glob: `*`, `?`, `[abc]`, `[a-z]`, `[!x]`/`[^x]`, and `\` escaping the
/// next character.
fn glob_tokens(pattern: &str) -> Vec<Token> {
    let pattern: Vec<char> = pattern.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < pattern.len() {
        let (width, token) = match pattern[i] {
            '*' => (1, Token::Star),
            '?' => (1, Token::One(Box::new(|_| true))),
            '\\' if i + 1 < pattern.len() => {
                let literal = pattern[i + 1];
                (2, Token::One(Box::new(move |c| c == literal)))
            }
            '[' => match pattern[i + 1..].iter().position(|c| *c == ']') {
                Some(close) if close > 0 => {
                    let mut set: Vec<char> = pattern[i + 1..i + 1 + close].to_vec();
                    let negated = matches!(set.first(), Some('!' | '^'));
                    if negated {
                        set.remove(0);
                    }
                    let test = move |c: char| {
                        let mut k = 0;
                        let mut found = false;
                        while k < set.len() {
                            if k + 2 < set.len() && set[k + 1] == '-' {
                                found |= set[k] <= c && c <= set[k + 2];
                                k += 3;
                            } else {
                                found |= set[k] == c;
                                k += 1;
                            }
                        }
                        found != negated
                    };
                    (close + 2, Token::One(Box::new(test)))
                }
                _ => (1, Token::One(Box::new(|c| c == '['))),
            },
            literal => (1, Token::One(Box::new(move |c| c == literal))),
        };
        tokens.push(token);
        i += width;
    }
    tokens
}

/// For every `j`, whether the tokens match `text[..j]` as a whole: one pass, O(tokens × text).
fn prefix_matches<'t>(tokens: impl Iterator<Item = &'t Token>, text: &[char]) -> Vec<bool> {
    let mut matches = vec![false; text.len() + 1];
    matches[0] = true;
    for token in tokens {
        let mut next = vec![false; text.len() + 1];
        match token {
            Token::Star => {
                let mut seen = false;
                for j in 0..=text.len() {
                    seen |= matches[j];
                    next[j] = seen;
                }
            }
            Token::One(test) => {
                for j in 0..text.len() {
                    next[j + 1] = matches[j] && test(text[j]);
                }
            }
        }
        matches = next;
    }
    matches
}

#[cfg(test)]
fn glob_match(pattern: &str, text: &str) -> bool {
    let text: Vec<char> = text.chars().collect();
    prefix_matches(glob_tokens(pattern).iter(), &text)[text.len()]
}

/// Removes the shortest (or longest) non-empty prefix matching `pattern`, as Flux does.
fn remove_prefix(value: &str, pattern: &str, longest: bool) -> String {
    if value.len() > MAX_GLOB_VALUE {
        return value.to_string();
    }
    let chars: Vec<char> = value.chars().collect();
    let matches = prefix_matches(glob_tokens(pattern).iter(), &chars);
    let mut lengths = 1..=chars.len();
    let found = if longest {
        lengths.rev().find(|&j| matches[j])
    } else {
        lengths.find(|&j| matches[j])
    };
    match found {
        Some(length) => chars[length..].iter().collect(),
        None => value.to_string(),
    }
}

/// Removes the shortest (or longest) non-empty suffix matching `pattern`: the prefix search
/// on the reversed value with the tokens in reverse order.
fn remove_suffix(value: &str, pattern: &str, longest: bool) -> String {
    if value.len() > MAX_GLOB_VALUE {
        return value.to_string();
    }
    let reversed: Vec<char> = value.chars().rev().collect();
    let tokens = glob_tokens(pattern);
    let matches = prefix_matches(tokens.iter().rev(), &reversed);
    let mut lengths = 1..=reversed.len();
    let found = if longest {
        lengths.rev().find(|&j| matches[j])
    } else {
        lengths.find(|&j| matches[j])
    };
    match found {
        Some(length) => reversed[length..].iter().rev().collect(),
        None => value.to_string(),
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
            ("$$name", "$name"),
            ("$$(NAME)", "$(NAME)"),
            ("a $$ b $$$ c $$$$", "a $ b $$ c $$"),
            ("$$${name}", "$world"),
            ("${missing:-$$x}", "$$x"),
            ("${missing:-$${name}}", "$world"),
            ("${missing:-default}", "default"),
            ("${empty:-default}", "default"),
            ("${name:-default}", "world"),
            ("${missing:=set}", "set"),
            ("${empty:=set}", "set"),
            ("${missing=set}", "set"),
            ("${empty=set}", "set"),
            ("${missing:-}", ""),
            ("${missing:-${name}}", "world"),
            ("${missing:-${other:-deep}}", "deep"),
            ("${missing:-a b c}", "a b c"),
            ("${missing:-http://x:80}", "http://x:80"),
            ("${#name}", "5"),
            ("${#empty}", "0"),
            ("${#unicode}", "6"),
            ("${name:1}", "orld"),
            ("${name:1:3}", "orl"),
            ("${name:0:1}", "w"),
            ("${name:10}", ""),
            ("${name:2:100}", "rld"),
            ("${name: -3}", "rld"),
            ("${name: -3:2}", "rl"),
            ("${name:1:-1}", "orl"),
            ("${unicode:2}", "àü"),
            ("${name:x}", "world"),
            ("${name:1:x}", "world"),
            ("${path#/usr}", "/local/bin/tool"),
            ("${path#nope}", "/usr/local/bin/tool"),
            ("${path##/usr}", "/local/bin/tool"),
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
    fn every_default_form_fills_empty_values() {
        for form in [
            "${empty:-d}",
            "${empty:=d}",
            "${empty=d}",
            "${empty:+d}",
            "${empty:?d}",
            "${unset:?d}",
        ] {
            assert_eq!(run(form, true).as_deref(), Ok("d"), "{form}");
        }
        assert_eq!(run("${name:?d}", true).as_deref(), Ok("world"));
    }

    /// Flux's envsubst parser (fluxcd/pkg `envsubst/parse`): a name is letters, digits and
    /// `_` in any order; no name is "unable to parse variable name"; a name followed by what
    /// starts no operation (bash's `-`, `+`, `?` without a colon among them) is "missing
    /// closing brace"; a length of nothing is "bad substitution". None shows a value.
    #[test]
    fn syntax_errors_are_fluxs_and_never_show_values() {
        let vars = BTreeMap::from([("1abc".to_string(), "one".to_string())]);
        let strict = Context {
            vars: &vars,
            strict: true,
        };
        assert_eq!(expand("${1abc} ${#1abc}", &strict).as_deref(), Ok("one 3"));
        let rows = [
            ("${}", ExprError::VariableName(0)),
            ("x ${ name}", ExprError::VariableName(2)),
            ("${@}", ExprError::VariableName(0)),
            ("${name-d}", ExprError::Unterminated(0)),
            ("${name+d}", ExprError::Unterminated(0)),
            ("${name?d}", ExprError::Unterminated(0)),
            ("${name d}", ExprError::Unterminated(0)),
            ("${name", ExprError::Unterminated(0)),
            ("${#}", ExprError::Syntax(0)),
            ("${name^x}", ExprError::Syntax(0)),
        ];
        for (bad, want) in rows {
            let err = run(bad, true).unwrap_err();
            assert_eq!(err, want, "{bad}");
            assert!(!err.to_string().contains("world"), "{err}");
        }
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
        assert_eq!(message, "missing closing brace at character 7");
        let message = expand("x ${hunter2", &context).unwrap_err().to_string();
        assert_eq!(message, "missing closing brace at character 2");
    }

    /// Expectations of Flux's envsubst (fluxcd/pkg `envsubst` tests, from tldp.org).
    #[test]
    fn flux_envsubst_expectations() {
        type Case<'a> = (&'a [(&'a str, &'a str)], &'a str, &'a str);
        let cases: &[Case] = &[
            (
                &[("filename", "bash.string.txt")],
                "${filename#*.}",
                "string.txt",
            ),
            (&[("filename", "path/to/file")], "${filename#*/}", "to/file"),
            (
                &[("filename", "/path/to/file")],
                "${filename#*/}",
                "path/to/file",
            ),
            (&[("filename", "bash.string.txt")], "${filename##*.}", "txt"),
            (&[("filename", "/path/to/file")], "${filename##*/}", "file"),
            (
                &[("filename", "bash.string.txt")],
                "${filename%.*}",
                "bash.string",
            ),
            (
                &[("filename", "bash.string.txt")],
                "${filename%%.*}",
                "bash",
            ),
            (
                &[("stringZ", "abcABC123ABCabc")],
                "${stringZ/%abc/XYZ}",
                "abcABC123ABCXYZ",
            ),
            (
                &[("stringZ", "abcABC123ABCabc")],
                "${stringZ/#abc/XYZ}",
                "XYZABC123ABCabc",
            ),
            (
                &[("stringZ", "somevalue")],
                "${stringZ/#/prefix-}",
                "prefix-somevalue",
            ),
            (
                &[("stringZ", "somevalue")],
                "${stringZ/%/-suffix}",
                "somevalue-suffix",
            ),
            (
                &[("stringZ", "abcABC123ABCabc")],
                "${stringZ//abc/xyz}",
                "xyzABC123ABCxyz",
            ),
            (
                &[("stringZ", "abcABC123ABCabc")],
                "${stringZ/abc/xyz}",
                "xyzABC123ABCabc",
            ),
            (&[("stringZ", "foo/bar")], r"${stringZ/\//-}", "foo-bar"),
            (
                &[("stringZ", "foo/bar/baz")],
                r"${stringZ//\//-}",
                "foo-bar-baz",
            ),
            (&[("stringZ", "foo.bar")], "${stringZ/./}", "foobar"),
            (
                &[("path_name", "/home/bozo/ideas/thoughts.for.today")],
                "${path_name:11:5}",
                "ideas",
            ),
            (
                &[("var01", "abcdEFGH28ij")],
                "${var=${var01^^}}",
                "ABCDEFGH28IJ",
            ),
            (&[("var01", "abcdEFGH28ij")], "$${var01}", "${var01}"),
            // parse_test.go: "should not escape double dollar".
            (&[], "$$string", "$string"),
            (
                &[("var01", "abcdEFGH28ij")],
                "some text ${var01}$${var$${var01}$var01${var01}",
                "some text abcdEFGH28ij${var${var01}$var01abcdEFGH28ij",
            ),
            (
                &[("default_var", "foo")],
                "something $${var=${default_var}}",
                "something ${var=foo}",
            ),
            (
                &[("default_var", "foo1")],
                "foo: ${var=prefix${default_var}-suffix}",
                "foo: prefixfoo1-suffix",
            ),
        ];
        for (vars, input, expected) in cases {
            let vars: BTreeMap<String, String> = vars
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            let out = expand(
                input,
                &Context {
                    vars: &vars,
                    strict: false,
                },
            );
            assert_eq!(out.as_deref(), Ok(*expected), "{input}");
        }
    }

    #[test]
    fn globs_match_classes_and_escapes() {
        let matches = glob_match;
        assert!(matches("a*c", "abbbc"));
        assert!(matches("a?c", "abc") && !matches("a?c", "ac"));
        assert!(matches("[a-c]x", "bx") && !matches("[!a-c]x", "bx"));
        assert!(matches(r"\*", "*") && !matches(r"\*", "a"));
        assert!(matches("", ""));
        // Suffix removal runs the tokens backwards: classes and escapes keep their meaning.
        assert_eq!(remove_suffix("file.tar.gz", "[.]g?", false), "file.tar");
        assert_eq!(remove_suffix("a*b*c", r"\**", true), "a");
    }

    #[test]
    fn large_values_are_matched_in_linear_passes() {
        let value = "a".repeat(60_000);
        assert_eq!(remove_prefix(&value, "*b*", true), value);
        assert_eq!(remove_suffix(&value, "a*", false).len(), 59_999);
    }
}
