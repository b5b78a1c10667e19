//! `dependsOn`: a Kustomization waits until each dependency exists, has observed its latest
//! generation, is Ready, has applied the same revision when both build from the same source,
//! and satisfies its optional CEL `readyExpr` (over `self` and `dep`).

use kube::api::Api;

use crate::api::Kustomization;
use crate::controller::context::Context;
use crate::controller::status::{READY, get};
use crate::health::cel_check::{self, CheckError};
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
    /// Terminal, as in Flux: an expression whose type is not `bool` (`output`, as cel-go's
    /// checker names it: `dep.status.ready` is `dyn`), or, where the type could not be told
    /// before, whose value was not a boolean.
    #[error("{TERMINAL_PREFIX}{}", self.terminal_cause().unwrap_or_default())]
    ReadyExprNotBoolean {
        name: String,
        expression: String,
        output: Option<String>,
    },
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
            DependencyError::ReadyExprNotBoolean {
                name,
                expression,
                output,
            } => Some(invalid_expression(
                name,
                &match output {
                    Some(output) => CheckError::OutputType(output.clone()).to_string(),
                    None => {
                        format!("the CEL expression '{expression}' does not evaluate to a bool")
                    }
                },
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
        cel_check::compile_boolean(expression, &["self", "dep"]).map_err(|error| match error {
            CheckError::Issues(issues) => invalid(issues.to_string()),
            CheckError::OutputType(output) => DependencyError::ReadyExprNotBoolean {
                name: name.clone(),
                expression: expression.to_string(),
                output: Some(output),
            },
        })?;
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
            output: None,
        }),
        Err(cel::ExecutionError::UndeclaredReference(reference)) => Err(invalid(format!(
            "undeclared reference to '{reference}' (in container '')"
        ))),
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

#[cfg(test)]
mod tests {
    use super::{DependencyError, ready_by_expression};
    use crate::api::Kustomization;

    fn kustomization(name: &str, generation: i64) -> Kustomization {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": name, "namespace": "ns", "generation": generation},
            "spec": {"interval": "1m", "prune": true,
                "sourceRef": {"kind": "GitRepository", "name": "repo"}},
        }))
        .unwrap()
    }

    /// Integer fields are CEL ints, as Kubernetes decodes them for Flux's evaluation: they add
    /// to and compare with int literals, and their type is `int`.
    #[test]
    fn integer_fields_are_cel_ints_in_ready_expressions() {
        let (this, dep) = (kustomization("k", 1), kustomization("k", 2));
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

    /// Where the checker cannot tell the type (`type(…)`), a result that is not a boolean is
    /// still refused, terminally, when evaluated.
    #[test]
    fn a_result_of_untold_type_that_is_not_a_boolean_is_refused_when_evaluated() {
        let object: Kustomization = kustomization("dep", 1);
        let error = ready_by_expression(&object, &object, "type(dep)").unwrap_err();
        assert!(error.is_invalid_expression(), "{error}");
        assert_eq!(
            error.terminal_cause().unwrap(),
            "terminal error: failed to evaluate dependency dep: the CEL expression 'type(dep)' does not evaluate to a bool"
        );
    }

    /// An expression that cannot be evaluated yet says why in cel-go's words, as Flux's
    /// readyExpr evaluation reports it: the first operand evaluated is blamed, a missing
    /// field under `has()` is named whole.
    #[test]
    fn evaluation_errors_read_as_cel_gos() {
        let kustomization: Kustomization = kustomization("k", 1);
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

    /// Flux compiles a readyExpr before evaluating it (`cel.WithCompile`,
    /// `WithOutputType(BoolType)`, `self` and `dep` declared): what cel-go's checker answered
    /// for the expressions of `tests/fixtures/go/cel-output-types.json` decides here too. One
    /// naming an undeclared variable fails with cel-go's issues word for word; one whose type
    /// is not `bool` fails naming its type, as do operators no overload takes (`self == 'bar'`)
    /// and literals of mixed types, and functions no overload takes (`size(1)`); one of type
    /// `bool` is evaluated.
    #[test]
    fn ready_expressions_compile_as_cel_gos_checker_compiles_them() {
        let rows = crate::health::cel_types::cel_go_rows();
        let mut refused = 0;
        let object: Kustomization = kustomization("dep", 1);
        // cel-go v0.16.1, the oracle, has neither `reverse` nor `first`; Flux's v0.26.1 has
        // both, and names the optional type `optional_type`.
        let newer =
            |expression: &str| expression.contains("reverse") || expression.contains("first");
        let named = |go: &str| go.replace("optional(", "optional_type(");
        let mut differ = Vec::new();
        for (expression, go_type, go_error) in &rows {
            let ours = ready_by_expression(&object, &object, expression);
            let as_expected = if !go_error.is_empty() && !newer(expression) {
                refused += 1;
                let issues = named(go_error);
                matches!(&ours, Err(error @ DependencyError::InvalidReadyExpr { .. })
                    if error.terminal_cause().unwrap().ends_with(
                        &format!("failed to parse the CEL expression '{expression}': {issues}")))
            } else if !go_error.is_empty() {
                true
            } else if go_type == "bool" {
                !matches!(&ours, Err(error) if error.is_invalid_expression())
            } else if expression == "type(1)" {
                true
            } else {
                matches!(&ours, Err(DependencyError::ReadyExprNotBoolean { output: Some(output), .. })
                    if *output == named(go_type))
            };
            if !as_expected {
                differ.push(format!(
                    "{expression:?}: cel-go {go_type:?} {go_error:?}, ours {ours:?}"
                ));
            }
        }
        assert!(refused >= 50, "{refused} refusals compared");
        assert!(
            differ.is_empty(),
            "{} differ:\n{}",
            differ.len(),
            differ.join("\n")
        );
    }
}
