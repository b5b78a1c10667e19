//! `dependsOn`: a Kustomization waits until each dependency exists, has observed its latest
//! generation, is Ready, has applied the same revision when both build from the same source,
//! and satisfies its optional CEL `readyExpr` (over `self` and `dep`).

use kube::api::Api;

use crate::api::Kustomization;
use crate::controller::context::Context;
use crate::controller::status::{READY, get};
use crate::source::SourceObject;

/// Why a Kustomization cannot proceed past its dependencies.
#[derive(Debug, thiserror::Error)]
pub enum DependencyError {
    /// Flux's words, with the API server's.
    #[error(
        "dependency '{id}' not found: kustomizations.kustomize.toolkit.fluxcd.io \"{name}\" not found"
    )]
    NotFound { id: String, name: String },
    #[error("dependency '{id}': {source}")]
    Read { id: String, source: kube::Error },
    #[error("dependency '{id}' is not ready")]
    NotReady { id: String },
    #[error("dependency '{id}' is not ready according to readyExpr eval")]
    NotReadyByExpression { id: String },
    /// Flux's words (fluxcd/pkg/runtime/cel): the expression is valid but cannot be evaluated
    /// on these objects yet (a field absent), so waiting may help.
    #[error("failed to evaluate the CEL expression '{expression}': {reason}")]
    ReadyExprEvaluation { expression: String, reason: String },
    #[error("dependency '{id}' revision is not up to date")]
    RevisionNotApplied { id: String },
    /// Terminal, as in Flux: an expression that does not parse, or names a variable other
    /// than `self` and `dep` (Flux compiles it with only those two declared).
    /// As Flux's Ready says it: its message around the terminal error
    /// ([`DependencyError::terminal_cause`]).
    #[error("{TERMINAL_PREFIX}{}", self.terminal_cause().unwrap_or_default())]
    InvalidReadyExpr {
        name: String,
        expression: String,
        reason: String,
    },
    #[error("{TERMINAL_PREFIX}{}", self.terminal_cause().unwrap_or_default())]
    ReadyExprNotBoolean { name: String, expression: String },
}

/// What Flux's Ready message wraps around a terminal dependency error.
const TERMINAL_PREFIX: &str = "Reconciliation failed terminally due to configuration error: ";

/// The terminal error Flux's readyExpr compilation returns for dependency `name`, as
/// controller-runtime's `TerminalError` prints it.
fn invalid_expression(name: &str, cause: &str) -> String {
    format!("terminal error: failed to evaluate dependency {name}: {cause}")
}

impl DependencyError {
    /// The terminal error Flux's reconcile returns (and controller-runtime logs): the
    /// message without Ready's prefix.
    pub fn terminal_cause(&self) -> Option<String> {
        match self {
            DependencyError::InvalidReadyExpr {
                name,
                expression,
                reason,
            } => Some(invalid_expression(
                name,
                &format!("failed to parse the CEL expression '{expression}': {reason}"),
            )),
            DependencyError::ReadyExprNotBoolean { name, expression } => Some(invalid_expression(
                name,
                &format!("the CEL expression '{expression}' does not evaluate to a bool"),
            )),
            _ => None,
        }
    }

    /// A broken `readyExpr` cannot become valid by waiting: only a spec change helps.
    pub fn is_invalid_expression(&self) -> bool {
        matches!(
            self,
            DependencyError::InvalidReadyExpr { .. } | DependencyError::ReadyExprNotBoolean { .. }
        )
    }
}

/// Whether every dependency of `object` is ready for it to apply `revision` of `source`.
pub async fn check(
    object: &Kustomization,
    ctx: &Context,
    source: &SourceObject,
    revision: &str,
) -> Result<(), DependencyError> {
    let namespace = object.metadata.namespace.clone().unwrap_or_default();
    for dependency in &object.spec.depends_on {
        let dep_namespace = dependency
            .namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| namespace.clone());
        let id = format!("{dep_namespace}/{}", dependency.name);
        // From the controller's own watch, as Flux reads it from its cache; a dependency the
        // watch does not cover (another namespace, label selector) is read.
        let api: Api<Kustomization> = Api::namespaced(ctx.client.clone(), &dep_namespace);
        let cached = ctx.watched_kustomization(&dep_namespace, &dependency.name);
        let read = match cached {
            Some(dep) => Ok(Some(Kustomization::clone(&dep))),
            None => api.get_opt(&dependency.name).await,
        };
        let dep = match read {
            Ok(Some(dep)) => dep,
            Ok(None) => {
                return Err(DependencyError::NotFound {
                    id,
                    name: dependency.name.clone(),
                });
            }
            Err(source) => return Err(DependencyError::Read { id, source }),
        };
        if let Some(expression) = dependency.ready_expr.as_deref().filter(|e| !e.is_empty()) {
            if !ready_by_expression(object, &dep, expression)? {
                return Err(DependencyError::NotReadyByExpression { id });
            }
            // The expression replaces the built-in check, unless AdditiveCELDependencyCheck
            // asks for both.
            if !ctx.options.additive_cel_dependency_check {
                continue;
            }
        }
        let status = dep.status.clone().unwrap_or_default();
        let observed = dep
            .metadata
            .generation
            .is_some_and(|g| g == status.observed_generation);
        let ready = get(&status, READY).is_some_and(|c| c.status == "True");
        if !observed || !ready {
            return Err(DependencyError::NotReady { id });
        }
        let dep_source = SourceObject::of(&dep.spec.source_ref, &dep_namespace);
        if dep_source == *source && status.last_applied_revision.as_deref() != Some(revision) {
            return Err(DependencyError::RevisionNotApplied { id });
        }
    }
    Ok(())
}

/// Evaluates a dependency's `readyExpr` over `self` (the dependent) and `dep`. As Flux
/// compiles it with only those two variables declared, an expression naming any other is
/// invalid before anything is evaluated; one that fails to evaluate is reported as such.
fn ready_by_expression(
    object: &Kustomization,
    dep: &Kustomization,
    expression: &str,
) -> Result<bool, DependencyError> {
    let name = dep.metadata.name.clone().unwrap_or_default();
    let invalid = |reason: String| DependencyError::InvalidReadyExpr {
        name: name.clone(),
        expression: expression.to_string(),
        reason,
    };
    let program =
        crate::health::cel_ext::compile(expression).map_err(|e| invalid(e.to_string()))?;
    if let Some(undeclared) = undeclared_variables(program.expression(), &["self", "dep"]).first() {
        return Err(invalid(format!("undeclared reference to '{undeclared}'")));
    }
    let mut context = crate::health::cel_ext::context();
    let this = serde_json::to_value(object).unwrap_or_default();
    let that = serde_json::to_value(dep).unwrap_or_default();
    // Integers as Kubernetes decodes them, CEL ints (`dep.status.observedGeneration + 1`).
    context.add_variable_from_value("self", crate::health::cel_ext::json_value(&this));
    context.add_variable_from_value("dep", crate::health::cel_ext::json_value(&that));
    match program.execute(&context) {
        Ok(cel::Value::Bool(ready)) => Ok(ready),
        Ok(_) => Err(DependencyError::ReadyExprNotBoolean {
            name,
            expression: expression.to_string(),
        }),
        Err(cel::ExecutionError::UndeclaredReference(reference)) => {
            Err(invalid(format!("undeclared reference to '{reference}'")))
        }
        Err(error) => Err(DependencyError::ReadyExprEvaluation {
            expression: expression.to_string(),
            reason: crate::health::cel_ext::describe_for(
                &program,
                &context,
                |name| match name {
                    "self" => Some(&this),
                    "dep" => Some(&that),
                    _ => None,
                },
                &error,
            ),
        }),
    }
}

/// The variables `expression` reads that are neither `declared` nor bound by a macro
/// (`all`, `exists`, `filter`, `map` bind their iteration and accumulator variables), in
/// the order they appear.
fn undeclared_variables(expression: &cel::IdedExpr, declared: &[&str]) -> Vec<String> {
    use cel::common::ast::{EntryExpr, Expr};
    fn walk(expression: &cel::IdedExpr, bound: &mut Vec<String>, found: &mut Vec<String>) {
        let walk_entries = |entries: &[cel::common::ast::IdedEntryExpr],
                            bound: &mut Vec<String>,
                            found: &mut Vec<String>| {
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
                if !name.starts_with('@') && !bound.contains(name) && !found.contains(name) {
                    found.push(name.clone());
                }
            }
            Expr::Select(select) => walk(&select.operand, bound, found),
            Expr::Call(call) => {
                // `optional.of(x)` calls a namespaced function; `optional` is no variable.
                let namespace = match call.target.as_deref().map(|target| &target.expr) {
                    Some(Expr::Ident(name)) => crate::health::cel_ext::is_function_namespace(name),
                    _ => false,
                };
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
    use super::{ready_by_expression, undeclared_variables};
    use crate::api::Kustomization;

    /// Integer fields are CEL ints, as Kubernetes decodes them for Flux's evaluation: they add
    /// to and compare with int literals, and their type is `int`.
    #[test]
    fn integer_fields_are_cel_ints_in_ready_expressions() {
        let kustomization = |generation: i64| -> Kustomization {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                "metadata": {"name": "k", "namespace": "ns", "generation": generation},
                "spec": {"interval": "1m", "prune": true,
                    "sourceRef": {"kind": "GitRepository", "name": "repo"}},
            }))
            .unwrap()
        };
        let (this, dep) = (kustomization(1), kustomization(2));
        for expression in [
            "dep.metadata.generation == self.metadata.generation + 1",
            "type(dep.metadata.generation) == int",
            "dep.metadata.generation % 2 == 0",
        ] {
            assert!(
                ready_by_expression(&this, &dep, expression).unwrap(),
                "{expression}"
            );
        }
    }

    /// An expression that cannot be evaluated yet says why in cel-go's words, as Flux's
    /// readyExpr evaluation reports it: the first operand evaluated is blamed, a missing
    /// field under `has()` is named whole.
    #[test]
    fn evaluation_errors_read_as_cel_gos() {
        let kustomization: Kustomization = serde_json::from_value(serde_json::json!({
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": "k", "namespace": "ns"},
            "spec": {"interval": "1m", "prune": true,
                "sourceRef": {"kind": "GitRepository", "name": "repo"}},
        }))
        .unwrap();
        for (expression, reason) in [
            ("dep.spec.a == 1 || self.spec.b == 1", "no such key: a"),
            (
                "has(dep.spec.missing.x)",
                "no such attribute(s): dep.spec.missing.x",
            ),
        ] {
            let error = ready_by_expression(&kustomization, &kustomization, expression)
                .unwrap_err()
                .to_string();
            assert_eq!(
                error,
                format!("failed to evaluate the CEL expression '{expression}': {reason}")
            );
        }
    }

    fn undeclared(expression: &str) -> Vec<String> {
        let program = crate::health::cel_ext::compile(expression).unwrap();
        undeclared_variables(program.expression(), &["self", "dep"])
    }

    #[test]
    fn only_self_dep_and_macro_variables_are_declared() {
        assert_eq!(undeclared("self.generation == deps.generation"), ["deps"]);
        assert_eq!(undeclared("foo && bar || foo"), ["foo", "bar"]);
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
