//! `${…}` expressions, as Flux's envsubst (fluxcd/pkg `envsubst` v1.7.0) reads and evaluates
//! them: [`super::parse`] reads the whole text first (a malformed expression fails whatever the
//! variables hold), then each expression is evaluated, its arguments before its variable.
//!
//! Supported, with Flux's meaning: `${v}`; defaults `${v=d}` `${v:=d}` `${v:-d}` `${v:?d}`
//! `${v:+d}`, all alike (an unset or empty value takes the default, itself text and
//! expressions); `${#v}`; substrings `${v:off}` `${v:off:len}` in bytes (an offset or length
//! that is not an integer keeps the value, so `${v: -2}` is the value); prefix and suffix
//! removal `${v#p}` `${v##p}` `${v%p}` `${v%%p}` ([`super::glob`]); replacement `${v/a/b}`
//! `${v//a/b}` `${v/#a/b}` `${v/%a/b}` with literal patterns (`\/` is a slash; an anchored
//! form without a replacement keeps the value); case `${v^}` `${v^^}` `${v,}` `${v,,}`.
//! `$$` is an escaped `$` in the text (`$${v}` is the text `${v}`), not in a default; a bare
//! `$v` is left as written. Variable names are letters, digits and `_` in any order.

use std::collections::BTreeMap;

use super::glob::{Budget, trim_prefix, trim_suffix};
use super::parse::{Node, parse};

/// Why an expression could not be evaluated: Flux's errors, with where the expression
/// starts (a character index). Never carries a variable's value or the text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExprError {
    #[error("variable not set (strict mode): {0:?}")]
    Unset(String),
    #[error("bad substitution at character {0}")]
    Syntax(usize),
    #[error("missing closing brace at character {0}")]
    Unterminated(usize),
    #[error("unable to parse variable name at character {0}")]
    VariableName(usize),
    #[error("unable to parse substitution within function at character {0}")]
    FunctionArgument(usize),
    #[error("unable to parse default function at character {0}")]
    DefaultFunction(usize),
    #[error("expressions nest more than 32 levels deep")]
    TooDeep,
    /// Prefix and suffix patterns over this text took more than their budget of steps; the
    /// variable whose pattern ran out (its value is never shown).
    #[error("pattern matching on ${{{0}}} takes more than {steps} steps", steps = super::glob::STEPS)]
    TooMuchMatching(String),
    /// A byte offset or a pattern cut a character of the variable's value in two (Flux's
    /// leaves invalid UTF-8, which its YAML reading then refuses).
    #[error("an offset or a pattern cuts a multi-byte character of ${{{0}}} in two")]
    SplitCharacter(String),
}

/// Variable lookup and strictness.
pub struct Context<'a> {
    pub vars: &'a BTreeMap<String, String>,
    /// A referenced variable that is unset is an error, unless a default names it.
    pub strict: bool,
}

/// Expands every `${…}` in `text`, and makes each `$$` a `$`.
pub fn expand(text: &str, context: &Context) -> Result<String, ExprError> {
    let mut out = String::with_capacity(text.len());
    let budget = Budget::new();
    for node in parse(text)? {
        out.push_str(&evaluate(&node, context, &budget)?);
    }
    Ok(out)
}

fn evaluate(node: &Node, context: &Context, budget: &Budget) -> Result<String, ExprError> {
    let (param, name, args) = match node {
        Node::Text(text) => return Ok(text.clone()),
        Node::Func { param, name, args } => (param, name.as_str(), args),
    };
    let args = args
        .iter()
        .map(|arg| evaluate(arg, context, budget))
        .collect::<Result<Vec<String>, ExprError>>()?;
    let value = match context.vars.get(param) {
        Some(value) => value.clone(),
        None if context.strict && !is_default(name) => {
            return Err(ExprError::Unset(param.clone()));
        }
        None => String::new(),
    };
    apply(name, value, &args, budget).map_err(|error| match error {
        ExprError::TooMuchMatching(_) => ExprError::TooMuchMatching(param.clone()),
        ExprError::SplitCharacter(_) => ExprError::SplitCharacter(param.clone()),
        other => other,
    })
}

/// The operators that name a default (an unset variable is no error in strict mode).
fn is_default(name: &str) -> bool {
    matches!(name, "-" | "+" | "=" | "?" | ":-" | ":+" | ":=" | ":?")
}

/// The function an operator names, applied to the value and its arguments.
fn apply(name: &str, value: String, args: &[String], budget: &Budget) -> Result<String, ExprError> {
    let trim = |suffix: bool, longest: bool| match one_arg(args) {
        None => Ok(value.clone()),
        Some(pattern) if suffix => trim_suffix(&value, pattern, longest, budget),
        Some(pattern) => trim_prefix(&value, pattern, longest, budget),
    };
    Ok(match name {
        // Go's per-character case mapping (strings.ToLower, unicode.ToUpper, …).
        "," => map_first(value, go_std::to_lower),
        ",," => value.chars().map(go_std::to_lower).collect(),
        "^" => map_first(value, go_std::to_upper),
        "^^" => value.chars().map(go_std::to_upper).collect(),
        // Bytes, as Flux (Go's len).
        "#" if args.is_empty() => value.len().to_string(),
        "#" => trim(false, false)?,
        "##" => trim(false, true)?,
        "%" => trim(true, false)?,
        "%%" => trim(true, true)?,
        ":" => substring(value, args)?,
        "/#" => match args {
            [from, to] if value.starts_with(from.as_str()) => value.replacen(from.as_str(), to, 1),
            _ => value,
        },
        "/%" => match args {
            [from, to] if value.ends_with(from.as_str()) => {
                format!("{}{to}", &value[..value.len() - from.len()])
            }
            _ => value,
        },
        "/" => match args {
            [] => value,
            [from] => value.replacen(from.as_str(), "", 1),
            [from, to, ..] => value.replacen(from.as_str(), to, 1),
        },
        "//" => match args {
            [] => value,
            [from] => value.replace(from.as_str(), ""),
            [from, to, ..] => value.replace(from.as_str(), to),
        },
        // Defaults, and every other operator: the value, or the arguments when it is empty.
        _ if value.is_empty() && !args.is_empty() => args.concat(),
        _ => value,
    })
}

fn one_arg(args: &[String]) -> Option<&str> {
    args.first().map(String::as_str)
}

fn map_first(value: String, map: fn(char) -> char) -> String {
    let mut chars = value.chars();
    match chars.next() {
        Some(first) => {
            let mut out = String::with_capacity(value.len());
            out.push(map(first));
            out.push_str(chars.as_str());
            out
        }
        None => value,
    }
}

/// `${v:offset}` and `${v:offset:length}`, in bytes as Flux: an offset or length that is not
/// an integer (Go's `strconv.Atoi`) keeps the value; a negative offset counts from the end.
fn substring(value: String, args: &[String]) -> Result<String, ExprError> {
    let Some(offset) = args.first() else {
        return Ok(value);
    };
    let Some(offset) = go_atoi(offset) else {
        return Ok(value);
    };
    let len = value.len() as i64;
    let start = if offset < 0 {
        (len + offset).max(0)
    } else {
        offset
    };
    let slice = |from: i64, to: i64| text_between(&value, from as usize, to as usize);
    let Some(length) = args.get(1) else {
        return if start < len {
            slice(start, len)
        } else {
            Ok(String::new())
        };
    };
    let Some(length) = go_atoi(length) else {
        return Ok(value);
    };
    if start.saturating_add(length) >= len {
        return if start < len {
            slice(start, len)
        } else {
            Ok(String::new())
        };
    }
    if length < 0 {
        // Go slices `s[pos:pos+length]` and panics below `pos`; Flux recovers nothing,
        // so such an expression fails its reconciliation. Keep the value instead.
        return Ok(value);
    }
    slice(start, start + length)
}

/// `value[from..to]` in bytes, as Go slices; a cut through a character fails, as the invalid
/// UTF-8 Go's slice leaves fails Flux's YAML reading after the substitution.
pub(super) fn text_between(value: &str, from: usize, to: usize) -> Result<String, ExprError> {
    value
        .get(from..to)
        .map(str::to_string)
        .ok_or(ExprError::SplitCharacter(String::new()))
}

/// Go's `strconv.Atoi`: an optional sign and decimal digits, nothing else.
fn go_atoi(text: &str) -> Option<i64> {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
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
            // Not an integer for Go's Atoi: the value, unchanged (bash would count back).
            ("${name: -3}", "world"),
            ("${name: -3:2}", "world"),
            // A negative length: Flux's envsubst panics (a failed reconciliation); the value.
            ("${name:1:-1}", "world"),
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
            ("${file/a/}", "rchive.tar.gz"),
            ("${file/#arch/}", "archive.tar.gz"),
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

    /// Offsets and patterns count bytes, as Flux's: a cut through a character leaves
    /// invalid UTF-8 in Flux's output, which its YAML reading refuses; here it is refused at
    /// once, never written as a replacement character.
    #[test]
    fn cutting_a_character_in_two_fails() {
        assert_eq!(run("${unicode:2}", false).as_deref(), Ok("àü"));
        assert_eq!(
            run("${unicode:1}", false),
            Err(ExprError::SplitCharacter("unicode".into()))
        );
        assert_eq!(
            run("${unicode:0:3}", false),
            Err(ExprError::SplitCharacter("unicode".into()))
        );
        assert_eq!(
            run("${unicode#*}", false),
            Err(ExprError::SplitCharacter("unicode".into()))
        );
        // Flux's `?` matches a lone byte too: the shortest prefix cuts é.
        assert_eq!(
            run("${unicode#?}", false),
            Err(ExprError::SplitCharacter("unicode".into()))
        );
        assert_eq!(run("${unicode##?}", false).as_deref(), Ok("àü"));
        // A suffix is trimmed on the value reversed by characters, and reversed back by
        // characters: the cut bytes become U+FFFD, as Flux's do.
        assert_eq!(run("${unicode%?}", false).as_deref(), Ok("éà\u{fffd}"));
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
            ("${name/a}", ExprError::Syntax(0)),
            ("${name:}", ExprError::FunctionArgument(0)),
            ("${name#}", ExprError::FunctionArgument(0)),
            ("${name/#/prefix-}", ExprError::FunctionArgument(0)),
            ("${name/%/-suffix}", ExprError::FunctionArgument(0)),
            ("a ${missing:-${name/a}}", ExprError::Syntax(2)),
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
        // Escapes are dropped in one pass, however many: a megabyte of `$$` is half as long.
        let dollars = "$$".repeat(500_000);
        assert_eq!(
            expand(&dollars, &context).map(|text| text.len()),
            Ok(500_000)
        );
        // A pattern that would keep Flux's matcher busy for hours ends at its budget.
        let long = BTreeMap::from([("v".to_string(), "a".repeat(64 * 1024))]);
        let hostile = format!("${{v#*{}b}}", "a".repeat(1_000));
        let context_long = Context {
            vars: &long,
            strict: false,
        };
        assert_eq!(
            expand(&hostile, &context_long),
            Err(ExprError::TooMuchMatching("v".into()))
        );
        let defaults = format!("${{a:-{}}}", "$".repeat(1_000_000));
        assert_eq!(
            expand(&defaults, &context).map(|text| text.len()),
            Ok(1_000_000)
        );
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
}

#[cfg(test)]
mod flux_oracle {
    use super::*;

    /// Every expression of `tests/fixtures/envsubst/` (each operator on each variable, edge
    /// cases, 4,000 random expressions), as fluxcd/pkg's envsubst v1.7.0 itself evaluated it,
    /// lenient and strict: the same text, or the same error (ours also says where the
    /// expression starts).
    #[test]
    fn expressions_evaluate_as_fluxs_envsubst_evaluates_them() {
        // input, output, error, strict output, strict error.
        let fixture = super::super::fixtures::table("flux-envsubst-v1.7.0.json");
        assert!(fixture.rows.len() > 4_000);
        let mut differ = Vec::new();
        for [input, output, error, strict_output, strict_error] in &fixture.rows {
            for (strict, want) in [
                (false, (output, error)),
                (true, (strict_output, strict_error)),
            ] {
                let context = Context {
                    vars: &fixture.vars,
                    strict,
                };
                let ours = match expand(input, &context) {
                    Ok(text) => (text, String::new()),
                    Err(error) => (String::new(), error_kind(&error)),
                };
                if (&ours.0, &ours.1) != want {
                    differ.push(format!(
                        "{input:?} strict={strict}: Flux {want:?}, ours {ours:?}"
                    ));
                }
            }
        }
        assert!(
            differ.is_empty(),
            "{} differ:\n{}",
            differ.len(),
            differ.join("\n")
        );
    }

    /// A name's characters are Go's letters and digits (`unicode.IsLetter`, `IsDigit`): what
    /// fluxcd/pkg's envsubst v1.7.0 answered for names with a superscript, a letter number, a
    /// combining vowel sign (none of them Go's) and an Arabic-Indic digit (one of them).
    #[test]
    fn names_are_made_of_gos_letters_and_digits() {
        let vars = named(&[
            ("a", "A"),
            ("a²", "SQ"),
            ("aⅫ", "XII"),
            ("a\u{093F}", "VS"),
            ("a١", "AR1"),
            ("Ünï", "uni"),
        ]);
        let context = Context {
            vars: &vars,
            strict: false,
        };
        for (input, output, error) in [
            ("${a²}", "", "missing closing brace"),
            ("${aⅫ}", "", "missing closing brace"),
            ("${a\u{093F}}", "", "missing closing brace"),
            ("${a١}", "AR1", ""),
            ("${Ünï}", "uni", ""),
            ("${a}²", "A²", ""),
            ("${a²:-d}", "", "missing closing brace"),
            ("${aⅫ^^}", "", "missing closing brace"),
        ] {
            let ours = match expand(input, &context) {
                Ok(text) => (text, String::new()),
                Err(error) => (String::new(), error_kind(&error)),
            };
            assert_eq!(ours, (output.to_string(), error.to_string()), "{input}");
        }
    }

    /// Case operators map each character as Go's `unicode.ToUpper`/`ToLower` do (what
    /// fluxcd/pkg's envsubst v1.7.0 printed for these, run here): `İ` lowers to `i` and `ᾳ`
    /// uppers to `ᾼ` (Rust's full mappings make two characters of each), `ß` and `ŉ` stay.
    #[test]
    fn case_operators_map_characters_as_go_does() {
        let vars = named(&[
            ("turkish", "İSTANBUL"),
            ("greek", "ᾳᾼΐ"),
            ("german", "straße"),
            ("title", "ǅemal"),
            ("n", "ŉote"),
            ("mixed", "ǈubljana Ǳ"),
            ("cyr", "ѐЀ"),
        ]);
        let context = Context {
            vars: &vars,
            strict: false,
        };
        for (input, flux) in [
            ("${turkish,,}", "istanbul"),
            ("${turkish,}", "iSTANBUL"),
            ("${greek^^}", "ᾼᾼΐ"),
            ("${greek^}", "ᾼᾼΐ"),
            ("${greek,,}", "ᾳᾳΐ"),
            ("${german^^}", "STRAßE"),
            ("${title^^}", "ǄEMAL"),
            ("${title,,}", "ǆemal"),
            ("${title,}", "ǆemal"),
            ("${n^^}", "ŉOTE"),
            ("${n^}", "ŉote"),
            ("${mixed^^}", "ǇUBLJANA Ǳ"),
            ("${mixed,,}", "ǉubljana ǳ"),
            ("${cyr^^}", "ЀЀ"),
            ("${cyr,,}", "ѐѐ"),
        ] {
            assert_eq!(expand(input, &context).unwrap(), flux, "{input}");
        }
    }

    /// Variables by name.
    fn named(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// Flux's words for an error, without where the expression starts.
    fn error_kind(error: &ExprError) -> String {
        let text = error.to_string();
        match text.rsplit_once(" at character ") {
            Some((kind, _)) => kind.to_string(),
            None => text,
        }
    }
}
