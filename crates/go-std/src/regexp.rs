//! Go's `regexp` syntax (RE2) on the `regex` crate: where Flux and kustomize compile a
//! user's pattern (patch and replacement targets, image names, SOPS's `encrypted_regex`), it
//! must mean what Go's does. The two syntaxes mostly agree; where they part,
//! [`from_go_syntax`] rewrites the pattern: a `{` that starts no repetition is a literal
//! (`${VAR}`), `\d`, `\w`, `\s` and `\b` are ASCII, `\Q...\E` quotes, octal escapes
//! (`\012`) are characters, inside a class `[`, `&`, `~` and a second `-` are plain
//! characters, and Go's refusals (`a**`, `a{1001}`) stay refusals. Checked against Go's own
//! answers for 3,000 patterns (`tools/go-oracles/regexp`).

use regex::Regex;

/// `pattern` compiled as Go compiles it.
pub fn compile(pattern: &str) -> Result<Regex, regex::Error> {
    Regex::new(&from_go_syntax(pattern).map_err(regex::Error::Syntax)?)
}

/// `pattern` (Go RE2 syntax) rewritten for the `regex` crate to match what Go matches, or
/// Go's reason to refuse it where the `regex` crate would accept it.
pub fn from_go_syntax(pattern: &str) -> Result<String, String> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut in_class = false;
    // Whether the last thing written outside a class was a repetition, which Go refuses to
    // repeat again (`a**`).
    let mut after_repetition = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' if i + 1 < chars.len() => {
                i += escape(&chars[i..], in_class, &mut out)?;
                continue;
            }
            '[' if in_class => {
                // `[:alpha:]` is a class name in both; any other `[` is Go's literal.
                let rest: String = chars[i..].iter().collect();
                match rest.find(":]").filter(|_| rest.starts_with("[:")) {
                    Some(end) => {
                        out.push_str(&rest[..end + 2]);
                        i += rest[..end + 2].chars().count();
                    }
                    None => {
                        out.push_str("\\[");
                        i += 1;
                    }
                }
                continue;
            }
            '&' | '~' if in_class => out.push_str(&format!("\\{c}")),
            // `--` is a set difference to the regex crate, the end of a range to Go.
            '-' if in_class && i > 0 && chars[i - 1] == '-' => out.push_str("\\-"),
            '[' => {
                in_class = true;
                out.push('[');
                // A `]` right after `[` or `[^` is a member, not the end.
                if chars.get(i + 1) == Some(&'^') {
                    out.push('^');
                    i += 1;
                }
                if chars.get(i + 1) == Some(&']') {
                    out.push_str("\\]");
                    i += 1;
                }
            }
            ']' if in_class => {
                in_class = false;
                out.push(']');
            }
            '(' if !in_class && flag_group(&chars[i..]).is_some() => {
                // Go applies a repetition after `(?i)` to what came before the flags.
                let mut groups = String::new();
                while let Some(len) = flag_group(&chars[i..]) {
                    groups.extend(&chars[i..i + len]);
                    i += len;
                }
                // Flags end a run of repetitions: Go accepts `a*(?i){2}`.
                if let Some(len) = repetition_operator(&chars[i..])? {
                    out.extend(&chars[i..i + len]);
                    i += len;
                    after_repetition = true;
                } else {
                    after_repetition = false;
                }
                out.push_str(&groups);
                continue;
            }
            '*' | '+' | '?' | '{' if !in_class => match repetition_operator(&chars[i..])? {
                Some(len) => {
                    if after_repetition {
                        return Err(nested(&chars[i..i + len]));
                    }
                    out.extend(&chars[i..i + len]);
                    i += len;
                    after_repetition = true;
                    continue;
                }
                None => out.push_str("\\{"),
            },
            '}' if !in_class => out.push_str("\\}"),
            _ => out.push(c),
        }
        after_repetition = false;
        i += 1;
    }
    Ok(out)
}

fn nested(operator: &[char]) -> String {
    let operator: String = operator.iter().collect();
    format!("invalid nested repetition operator: `{operator}`")
}

/// The length of a flags-only group (`(?i)`, `(?-s)`) at the start of `chars`.
fn flag_group(chars: &[char]) -> Option<usize> {
    if chars.first() != Some(&'(') || chars.get(1) != Some(&'?') {
        return None;
    }
    let flags = chars[2..]
        .iter()
        .take_while(|c| matches!(c, 'i' | 'm' | 's' | 'U' | '-'))
        .count();
    (flags > 0 && chars.get(2 + flags) == Some(&')')).then_some(3 + flags)
}

/// The length of the repetition operator at the start of `chars` with its lazy `?` (`*`,
/// `+?`, `{2,3}`), `None` where there is none (a `{` Go reads as a literal), or Go's error
/// for a count over 1,000.
fn repetition_operator(chars: &[char]) -> Result<Option<usize>, String> {
    let len = match chars.first() {
        Some('*' | '+' | '?') => 1,
        Some('{') => match repetition(chars)? {
            Some(len) => len,
            None => return Ok(None),
        },
        _ => return Ok(None),
    };
    Ok(Some(if chars.get(len) == Some(&'?') {
        len + 1
    } else {
        len
    }))
}

/// One escape at the start of `chars` written for the regex crate; returns its length.
fn escape(chars: &[char], in_class: bool, out: &mut String) -> Result<usize, String> {
    let letter = chars[1];
    match letter {
        'Q' => {
            let rest: String = chars[2..].iter().collect();
            let (quoted, after) = rest.split_once("\\E").unwrap_or((&rest, ""));
            out.push_str(&regex::escape(quoted));
            Ok(chars.len() - after.chars().count())
        }
        // `\p{Greek}`, `\x{41}`: the braces belong to the escape.
        'p' | 'P' | 'x' if chars.get(2) == Some(&'{') => {
            let len = chars
                .iter()
                .position(|&c| c == '}')
                .map_or(chars.len(), |end| end + 1);
            out.extend(&chars[..len]);
            Ok(len)
        }
        // Go's octal escapes: `\0`, and two or three octal digits (`\01`, `\123`).
        '0'..='7' if letter == '0' || chars.get(2).is_some_and(|c| ('0'..='7').contains(c)) => {
            let digits = chars[1..]
                .iter()
                .take(3)
                .take_while(|c| ('0'..='7').contains(*c))
                .count();
            let code = chars[1..1 + digits].iter().fold(0u32, |code, digit| {
                code * 8 + digit.to_digit(8).unwrap_or(0)
            });
            out.push_str(&format!("\\x{{{code:X}}}"));
            Ok(1 + digits)
        }
        _ => {
            match ascii_class(letter, in_class) {
                Some(class) => out.push_str(&class),
                None => {
                    out.push('\\');
                    out.push(letter);
                }
            }
            Ok(2)
        }
    }
}

/// The length of the repetition `{n}`, `{n,}` or `{n,m}` at the start of `chars`, as Go's
/// parser accepts one (no sign, no leading zero); `None` where Go reads a literal `{`, and
/// Go's error for a count over 1,000.
fn repetition(chars: &[char]) -> Result<Option<usize>, String> {
    let number = |from: usize| -> Option<(usize, u64)> {
        let count = chars[from..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
        let leading_zero = count > 1 && chars[from] == '0';
        let value = chars[from..from + count].iter().fold(0u64, |n, d| {
            n.saturating_mul(10)
                .saturating_add(d.to_digit(10).unwrap_or(0) as u64)
        });
        (!leading_zero).then_some((count, value))
    };
    let Some((min_len, min)) = number(1).filter(|(len, _)| *len > 0) else {
        return Ok(None);
    };
    let mut at = 1 + min_len;
    let mut max = Some(min);
    if chars.get(at) == Some(&',') {
        let Some((max_len, value)) = number(at + 1) else {
            return Ok(None);
        };
        max = (max_len > 0).then_some(value);
        at += 1 + max_len;
    }
    if chars.get(at) != Some(&'}') {
        return Ok(None);
    }
    if min > 1000 || max.is_some_and(|max| max > 1000 || max < min) {
        let text: String = chars[..=at].iter().collect();
        return Err(format!("invalid repeat count: `{text}`"));
    }
    Ok(Some(at + 1))
}

/// Go's ASCII-only Perl classes and word boundaries, for an escape `\\<letter>`.
fn ascii_class(letter: char, in_class: bool) -> Option<String> {
    let (members, negated) = match letter {
        'd' => ("0-9", false),
        'D' => ("0-9", true),
        'w' => ("0-9A-Za-z_", false),
        'W' => ("0-9A-Za-z_", true),
        's' => ("\\t\\n\\f\\r ", false),
        'S' => ("\\t\\n\\f\\r ", true),
        'b' if !in_class => return Some("(?-u:\\b)".to_string()),
        'B' if !in_class => return Some("(?-u:\\B)".to_string()),
        _ => return None,
    };
    Some(match (in_class, negated) {
        (true, false) => members.to_string(),
        (_, true) => format!("[^{members}]"),
        (false, false) => format!("[{members}]"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each pattern with a text Go's `regexp.MatchString` matches and one it does not.
    #[test]
    fn patterns_match_what_go_matches() {
        let rows: &[(&str, &str, &str)] = &[
            // A `{` that starts no repetition is a literal (`$` stays an anchor).
            ("^(?:x${VAR})?$", "", "x${VAR}"),
            ("a{VAR}", "a{VAR}", "aVAR"),
            ("a{,3}", "a{,3}", "aaa"),
            ("a{01}", "a{01}", "a"),
            ("x}", "x}", "x"),
            ("a{2}", "aa", "a{2}"),
            ("a{1,}b", "aab", "b"),
            ("a{1,2}b", "aab", "b"),
            // ASCII classes and boundaries.
            ("^\\d+$", "123", "١٢٣"),
            ("^\\w+$", "a_1", "é"),
            ("^\\s$", " ", "\u{a0}"),
            ("^[\\d]$", "5", "٥"),
            ("^[^\\D]$", "5", "٥"),
            ("\\bx\\b", "éxé", "axb"),
            // Quoting, and class members the regex crate reads as syntax.
            ("^\\Qa.b*\\E$", "a.b*", "axbb"),
            ("^\\Qa.b", "a.bc", "axb"),
            ("^[a[]$", "[", "b"),
            ("^[a&&b]$", "&", "c"),
            ("^[]a]$", "]", "b"),
            ("^[^]a]$", "b", "]"),
            ("^[[:alpha:]]+$", "abc", "a1"),
            ("^[~]$", "~", "a"),
        ];
        for (pattern, matching, other) in rows {
            let regex = compile(pattern).unwrap_or_else(|e| panic!("{pattern}: {e}"));
            assert!(
                regex.is_match(matching),
                "{pattern} should match {matching:?}"
            );
            assert!(
                !regex.is_match(other),
                "{pattern} should not match {other:?}"
            );
        }
    }

    /// `tests/fixtures/go/regexps.json` (tools/go-oracles/regexp): 3,000 patterns, hand-picked
    /// and random, as Go's regexp compiled them and matched 43 texts with them. Ours compiles
    /// the same ones and matches the same texts.
    #[test]
    fn patterns_compile_and_match_as_go_regexp_does() {
        #[derive(serde::Deserialize)]
        struct Row {
            pattern: String,
            #[serde(default)]
            error: Option<String>,
            #[serde(default)]
            matches: String,
        }
        #[derive(serde::Deserialize)]
        struct Fixture {
            texts: Vec<String>,
            rows: Vec<Row>,
        }
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/go/regexps.json"
        );
        let fixture: Fixture =
            serde_json::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("rows");
        assert!(fixture.rows.len() >= 3000);
        let mut wrong = Vec::new();
        for row in &fixture.rows {
            let compiled = compile(&row.pattern);
            match (compiled, &row.error) {
                (Ok(_), Some(error)) => {
                    wrong.push(format!("{:?}: Go refuses it ({error})", row.pattern))
                }
                (Err(error), None) => wrong.push(format!(
                    "{:?}: Go compiles it, we do not: {error}",
                    row.pattern
                )),
                (Err(_), Some(_)) => {}
                (Ok(regex), None) => {
                    let ours: String = fixture
                        .texts
                        .iter()
                        .map(|text| if regex.is_match(text) { '1' } else { '0' })
                        .collect();
                    if ours != row.matches {
                        wrong.push(format!(
                            "{:?}: matches {ours}, Go {}",
                            row.pattern, row.matches
                        ));
                    }
                }
            }
        }
        assert!(
            wrong.is_empty(),
            "{} of {} differ:\n{}",
            wrong.len(),
            fixture.rows.len(),
            wrong.join("\n")
        );
    }

    #[test]
    fn what_go_refuses_is_still_an_error() {
        for pattern in ["(", "[a", "a{2,1}", "*a"] {
            assert!(compile(pattern).is_err(), "{pattern}");
        }
    }
}
