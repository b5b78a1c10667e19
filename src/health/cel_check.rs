//! What Flux's compilation of a dependency's `readyExpr` refuses before anything is
//! evaluated (fluxcd/pkg runtime/cel `NewExpression` with `WithCompile`,
//! `WithStructVariables("self", "dep")` and `WithOutputType(BoolType)`): cel-go's checker
//! issues — references to undeclared variables and functions, operators and functions no
//! overload of which takes their operands (`self == 'bar'`, `size(1)`, `1.value()`), literals
//! of mixed types — in its words and order, then an output type other than `bool`
//! ([`super::cel_types`]).

use cel::Program;

use super::cel_ext;
use super::cel_issues::CompileError;
use super::cel_types::{CelType, check};

/// Why an expression does not compile as Flux compiles a `readyExpr`.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// Parser or checker issues, in cel-go's words.
    #[error("{0}")]
    Issues(CompileError),
    /// The expression's type, as cel-go names it, is not `bool`.
    #[error("CEL expression output type mismatch: expected bool, got {0}")]
    OutputType(String),
}

/// Compiles `expression` with `variables` declared (each a `google.protobuf.Struct`) and a
/// `bool` output required.
pub fn compile_boolean(expression: &str, variables: &[&str]) -> Result<Program, CheckError> {
    let program = cel_ext::compile(expression).map_err(CheckError::Issues)?;
    let declared: Vec<(&str, CelType)> = variables
        .iter()
        .map(|name| (*name, CelType::structure()))
        .collect();
    let (output, type_errors) = check(program.expression(), &declared);
    let mut issues: Vec<(u64, String)> = undeclared_references(program.expression(), variables)
        .into_iter()
        .map(|(name, id)| {
            (
                id,
                format!("undeclared reference to '{name}' (in container '')"),
            )
        })
        .chain(type_errors)
        .collect();
    // cel-go lists its issues in the order of where they are.
    let offset = |id: u64| program.source_info().offset_for(id).map(|(start, _)| start);
    issues.sort_by_key(|(id, _)| offset(*id));
    if !issues.is_empty() {
        let shown: Vec<String> = issues
            .iter()
            .map(|(id, message)| {
                CompileError::at_node(&program, expression, *id, message).to_string()
            })
            .collect();
        return Err(CheckError::Issues(CompileError::from_lines(shown)));
    }
    match output {
        Some(output) if output != CelType::Bool => Err(CheckError::OutputType(output.to_string())),
        _ => Ok(program),
    }
}

/// The functions Flux's environment declares, and the operators, whose names start with `_`,
/// `@`, `!` or `-`.
fn is_declared_function(name: &str) -> bool {
    name.starts_with(['_', '@', '!', '-']) || super::cel_functions::is_declared(name)
}

/// Each reference `expression` makes to a variable that is neither `declared` nor bound by a
/// macro (`all`, `exists`, `filter`, `map` bind their iteration and accumulator variables), or
/// to a function Flux's environment does not declare, with the node making it.
fn undeclared_references(expression: &cel::IdedExpr, declared: &[&str]) -> Vec<(String, u64)> {
    use cel::common::ast::{EntryExpr, Expr};
    type Found = Vec<(String, u64)>;
    fn walk(expression: &cel::IdedExpr, bound: &mut Vec<String>, found: &mut Found) {
        let walk_entries = |entries: &[cel::common::ast::IdedEntryExpr],
                            bound: &mut Vec<String>,
                            found: &mut Found| {
            for entry in entries {
                match &entry.expr {
                    EntryExpr::StructField(field) => walk(&field.value, bound, found),
                    EntryExpr::MapEntry(pair) => {
                        walk(&pair.key, bound, found);
                        walk(&pair.value, bound, found);
                    }
                }
            }
        };
        match &expression.expr {
            Expr::Unspecified | Expr::Literal(_) => {}
            Expr::Ident(name) => {
                if !name.starts_with('@') && !bound.contains(name) {
                    found.push((name.clone(), expression.id));
                }
            }
            Expr::Select(select) => walk(&select.operand, bound, found),
            Expr::Call(call) => {
                // `optional.of(x)` calls a namespaced function; `optional` is no variable.
                let namespace = match call.target.as_deref().map(|target| &target.expr) {
                    Some(Expr::Ident(name)) => crate::health::cel_ext::is_function_namespace(name),
                    _ => false,
                };
                let function = cel_ext::written_name(&call.func_name);
                let space = match call.target.as_deref() {
                    Some(
                        target @ cel::IdedExpr {
                            expr: Expr::Ident(space),
                            ..
                        },
                    ) if namespace => Some((space, target.id)),
                    _ => None,
                };
                match space {
                    // A namespace's misspelled function: cel-go names both parts.
                    Some((space, id)) if !is_declared_function(&format!("{space}.{function}")) => {
                        found.push((space.clone(), id));
                        found.push((function.to_string(), expression.id));
                    }
                    Some(_) => {}
                    None if !is_declared_function(function) => {
                        found.push((function.to_string(), expression.id));
                    }
                    None => {}
                }
                if let Some(target) = call.target.as_deref().filter(|_| !namespace) {
                    walk(target, bound, found);
                }
                for argument in &call.args {
                    walk(argument, bound, found);
                }
            }
            Expr::List(list) => {
                for element in &list.elements {
                    walk(element, bound, found);
                }
            }
            Expr::Map(map) => walk_entries(&map.entries, bound, found),
            Expr::Struct(object) => walk_entries(&object.entries, bound, found),
            Expr::Comprehension(loop_) => {
                walk(&loop_.iter_range, bound, found);
                walk(&loop_.accu_init, bound, found);
                let scope = bound.len();
                bound.push(loop_.iter_var.clone());
                bound.extend(loop_.iter_var2.clone());
                bound.push(loop_.accu_var.clone());
                for inner in [&loop_.loop_cond, &loop_.loop_step, &loop_.result] {
                    walk(inner, bound, found);
                }
                bound.truncate(scope);
            }
        }
    }
    // CEL's type names are identifiers every checked expression knows (`type(x) == int`).
    const TYPE_NAMES: [&str; 10] = [
        "int",
        "uint",
        "double",
        "bool",
        "string",
        "bytes",
        "list",
        "map",
        "null_type",
        "type",
    ];
    let mut bound: Vec<String> = declared
        .iter()
        .chain(TYPE_NAMES.iter())
        .map(|name| name.to_string())
        .collect();
    let mut found = Vec::new();
    walk(expression, &mut bound, &mut found);
    found
}

#[cfg(test)]
mod tests {
    use super::undeclared_references;

    fn undeclared(expression: &str) -> Vec<String> {
        let program = crate::health::cel_ext::compile(expression).unwrap();
        undeclared_references(program.expression(), &["self", "dep"])
            .into_iter()
            .map(|(name, _)| name)
            .collect()
    }

    #[test]
    fn only_self_dep_and_macro_variables_are_declared() {
        assert_eq!(undeclared("self.generation == deps.generation"), ["deps"]);
        assert_eq!(undeclared("foo && bar || foo"), ["foo", "bar", "foo"]);
        assert!(undeclared("self.metadata.name == dep.metadata.name").is_empty());
        assert!(
            undeclared(
                "dep.status.conditions.filter(e, e.type == 'Ready').all(c, c.status == 'True')"
            )
            .is_empty()
        );
        assert!(
            undeclared("dep.spec.dependsOn.exists(d, d.name == self.metadata.name)").is_empty()
        );
        assert_eq!(undeclared("[1, 2].map(x, x + y)"), ["y"]);
        // A macro's variable is bound inside it only.
        assert_eq!(undeclared("[1].all(x, x > 0) && x"), ["x"]);
        assert_eq!(undeclared("{'a': other}['a'] == self.kind"), ["other"]);
        // Namespaced functions are no variables; their arguments are read.
        assert!(
            undeclared(
                "dep.?status.?conditions.orValue([]).size() > 0 || optional.none().hasValue()"
            )
            .is_empty()
        );
        assert_eq!(undeclared("sets.contains(self.spec.x, others)"), ["others"]);
        assert_eq!(undeclared("base64.decode(secret) == b''"), ["secret"]);
    }
}

#[cfg(test)]
mod environment_tests {
    use super::compile_boolean;

    /// Every function of Flux's environment (cel-go v0.26's optional library at version 2,
    /// the strings library's `reverse`, which the cel-go the oracle comes from lacks, and the
    /// calls rewritten by macros here) is declared: none of these is refused.
    #[test]
    fn the_environments_functions_are_declared() {
        for expression in [
            "dep.?a.optMap(x, x + 1).hasValue()",
            "dep.?a.optFlatMap(x, optional.of(x)).hasValue()",
            "[optional.of(1)].unwrapOpt().size() == 1",
            "optional.unwrap([optional.of(1)]).size() == 1",
            "[1].first().hasValue() && [1].last().hasValue()",
            "'abc'.reverse() == 'cba'",
            "'abc'.indexOf('b', 1) == 1 && 'abc'.lastIndexOf('b', 2) == 1",
            "dep.?a.or(optional.none()).orValue(1) == 1",
            "[1, 2].exists_one(x, x == 1)",
        ] {
            assert!(
                compile_boolean(expression, &["self", "dep"]).is_ok(),
                "{expression}: {:?}",
                compile_boolean(expression, &["self", "dep"]).err()
            );
        }
    }
}

#[cfg(test)]
mod robustness_tests {
    use super::compile_boolean;

    /// Whatever a Kustomization's readyExpr says, compiling it ends with a program or an
    /// error, never a panic: 10,000 expressions made of CEL's tokens, at random (a fixed seed).
    #[test]
    fn any_expression_compiles_or_is_refused_without_a_panic() {
        const TOKENS: [&str; 48] = [
            "self",
            "dep",
            "x",
            "1",
            "1u",
            "1.5",
            "'a'",
            "b'a'",
            "true",
            "null",
            "[",
            "]",
            "{",
            "}",
            "(",
            ")",
            ".",
            ".?",
            "[?",
            ",",
            ":",
            "?",
            "==",
            "!=",
            "<",
            "+",
            "-",
            "*",
            "%",
            "!",
            "&&",
            "||",
            " in ",
            "size",
            "exists",
            "map",
            "filter",
            "all",
            "has",
            "optional.of",
            "orValue",
            "timestamp",
            "duration",
            "'é'",
            "sets.contains",
            "int",
            "startsWith",
            "indexOf",
        ];
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |bound: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % bound as u64) as usize
        };
        for _ in 0..10_000 {
            let length = 1 + next(14);
            let expression: Vec<&str> = (0..length).map(|_| TOKENS[next(TOKENS.len())]).collect();
            let expression = expression.join(if next(2) == 0 { " " } else { "" });
            let _ = compile_boolean(&expression, &["self", "dep"]);
        }
    }
}
