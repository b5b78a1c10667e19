//! CEL compile errors as cel-go displays them (`issues.String()`, which Flux puts in its
//! messages): `ERROR: <input>:line:column: message`, then the line and a caret under the
//! column, dots before it (full-width ones under wide characters), one issue a line, in the
//! order of where they are.

use cel::{ParseErrors, Program};

/// A compile error in cel-go's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CompileError(String);

impl CompileError {
    /// The parser's errors on `source`.
    pub fn parsing(source: &str, errors: &ParseErrors) -> CompileError {
        let mut issues: Vec<(usize, usize, &str)> = errors
            .errors
            .iter()
            .map(|e| {
                let line = usize::try_from(e.pos.0).unwrap_or(0).max(1);
                let column = usize::try_from(e.pos.1 - 1).unwrap_or(0);
                (line, column, e.msg.as_str())
            })
            .collect();
        issues.sort_by_key(|&(line, column, _)| (line, column));
        CompileError(
            issues
                .iter()
                .map(|&(line, column, message)| issue(source, line, column, message))
                .collect::<Vec<_>>()
                .join("\n"),
        )
    }

    /// Issues already displayed, one a line.
    pub fn from_lines(issues: Vec<String>) -> CompileError {
        CompileError(issues.join("\n"))
    }

    /// A checker's error about the node `id` of `program`, compiled from `source`.
    pub fn at_node(program: &Program, source: &str, id: u64, message: &str) -> CompileError {
        let start = program
            .source_info()
            .offset_for(id)
            .map_or(0, |(start, _)| start as usize);
        let before = source.get(..start).unwrap_or(source);
        let line = before.matches('\n').count() + 1;
        let column = before
            .rsplit_once('\n')
            .map_or(before, |(_, current)| current)
            .chars()
            .count();
        CompileError(issue(source, line, column, message))
    }
}

/// One issue at `line` (from 1) and `column` (characters, from 0) of `source`.
fn issue(source: &str, line: usize, column: usize, message: &str) -> String {
    /// cel-go leaves out a longer line.
    const MAX_SNIPPET: usize = 16384;
    let mut shown = format!("ERROR: <input>:{line}:{}: {message}", column + 1);
    let Some(text) = source
        .split('\n')
        .nth(line - 1)
        .filter(|text| text.len() <= MAX_SNIPPET)
    else {
        return shown;
    };
    let text = text.replace('\t', " ");
    shown.push_str("\n | ");
    shown.push_str(&text);
    shown.push_str("\n | ");
    let mut chars = text.chars();
    for c in chars.by_ref().take(column) {
        shown.push(if c.len_utf8() > 1 { '．' } else { '.' });
    }
    shown.push(match chars.next() {
        Some(c) if c.len_utf8() > 1 => '＾',
        _ => '^',
    });
    shown
}

#[cfg(test)]
mod tests {
    use super::CompileError;
    use crate::health::cel_ext::compile;

    /// What cel-go (v0.16.1, as Kubernetes v1.28 vendors it) printed for these syntax errors;
    /// the first is also fluxcd/pkg runtime/cel's test row.
    #[test]
    fn syntax_errors_display_as_cel_go_displays_them() {
        for (source, shown) in [
            (
                "foo.",
                "ERROR: <input>:1:5: Syntax error: no viable alternative at input '.'\n | foo.\n | ....^",
            ),
            (
                "a &&\n\tb ||",
                "ERROR: <input>:2:6: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}\n |  b ||\n | .....^",
            ),
            (
                "x.é == 1 &&",
                "ERROR: <input>:1:3: Syntax error: token recognition error at: 'é'\n | x.é == 1 &&\n | ..＾\nERROR: <input>:1:5: Syntax error: no viable alternative at input '. =='\n | x.é == 1 &&\n | ..．.^\nERROR: <input>:1:12: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}\n | x.é == 1 &&\n | ..．........^",
            ),
            (
                "[1, 2",
                "ERROR: <input>:1:6: Syntax error: mismatched input '<EOF>' expecting {']', ','}\n | [1, 2\n | .....^",
            ),
        ] {
            let error = compile(source).expect_err("a syntax error");
            assert_eq!(error.to_string(), shown, "{source:?}");
        }
    }

    /// A checker's issue under the node it is about, wide characters before it shown wide.
    #[test]
    fn an_issue_points_at_its_node() {
        let source = "'é' == y";
        let program = compile(source).unwrap();
        let cel::common::ast::Expr::Call(call) = &program.expression().expr else {
            panic!("a call");
        };
        let error = CompileError::at_node(
            &program,
            source,
            call.args[1].id,
            "undeclared reference to 'y' (in container '')",
        );
        assert_eq!(
            error.to_string(),
            "ERROR: <input>:1:8: undeclared reference to 'y' (in container '')\n | 'é' == y\n | .．.....^"
        );
    }
}
