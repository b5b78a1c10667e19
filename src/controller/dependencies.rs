//! `dependsOn`: a Kustomization waits until each dependency exists, has observed its latest
//! generation, is Ready, has applied the same revision when both build from the same source,
//! and satisfies its optional CEL `readyExpr` (over `self` and `dep`).

use kube::api::Api;

use super::context::Context;
use super::status::{READY, get};
use crate::api::Kustomization;
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
    #[error("dependency '{id}' revision is not up to date")]
    RevisionNotApplied { id: String },
    /// Terminal, as in Flux: an expression that does not parse, or names a variable other
    /// than `self` and `dep` (Flux's compile-time check; found here when evaluation reaches it).
    #[error(
        "Reconciliation failed terminally due to configuration error: failed to evaluate dependency {name}: failed to parse the CEL expression '{expression}': {reason}"
    )]
    InvalidReadyExpr {
        name: String,
        expression: String,
        reason: String,
    },
    #[error(
        "Reconciliation failed terminally due to configuration error: failed to evaluate dependency {name}: the CEL expression '{expression}' does not evaluate to a bool"
    )]
    ReadyExprNotBoolean { name: String, expression: String },
}

impl DependencyError {
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
        let api: Api<Kustomization> = Api::namespaced(ctx.client.clone(), &dep_namespace);
        let dep = match api.get_opt(&dependency.name).await {
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

/// Evaluates a dependency's `readyExpr` over `self` (the dependent) and `dep`; an expression
/// that fails to evaluate counts as not ready, one naming an undeclared variable is invalid.
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
    let program = cel::Program::compile(expression).map_err(|e| invalid(e.to_string()))?;
    let mut context = cel::Context::default();
    let this = serde_json::to_value(object).unwrap_or_default();
    let that = serde_json::to_value(dep).unwrap_or_default();
    context.add_variable_from_value("self", cel::to_value(this).unwrap_or(cel::Value::Null));
    context.add_variable_from_value("dep", cel::to_value(that).unwrap_or(cel::Value::Null));
    match program.execute(&context) {
        Ok(cel::Value::Bool(ready)) => Ok(ready),
        Ok(_) => Err(DependencyError::ReadyExprNotBoolean {
            name,
            expression: expression.to_string(),
        }),
        Err(cel::ExecutionError::UndeclaredReference(reference)) => {
            Err(invalid(format!("undeclared reference to '{reference}'")))
        }
        Err(_) => Ok(false),
    }
}
