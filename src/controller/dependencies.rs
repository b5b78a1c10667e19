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
    #[error("dependency '{id}' not found")]
    NotFound { id: String },
    #[error("dependency '{id}': {source}")]
    Read { id: String, source: kube::Error },
    #[error("dependency '{id}' is not ready")]
    NotReady { id: String },
    #[error("dependency '{id}' is not ready (revision {revision} not yet applied)")]
    RevisionNotApplied { id: String, revision: String },
    #[error("invalid readyExpr for dependency '{id}': {reason}")]
    InvalidReadyExpr { id: String, reason: String },
    #[error("readyExpr for dependency '{id}' is not a boolean")]
    ReadyExprNotBoolean { id: String },
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
            Ok(None) => return Err(DependencyError::NotFound { id }),
            Err(source) => return Err(DependencyError::Read { id, source }),
        };
        if let Some(expression) = dependency.ready_expr.as_deref().filter(|e| !e.is_empty()) {
            if !ready_by_expression(object, &dep, expression, &id)? {
                return Err(DependencyError::NotReady { id });
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
            return Err(DependencyError::RevisionNotApplied {
                id,
                revision: revision.to_string(),
            });
        }
    }
    Ok(())
}

/// Evaluates a dependency's `readyExpr` over `self` (the dependent) and `dep`; an expression
/// that fails to evaluate counts as not ready.
fn ready_by_expression(
    object: &Kustomization,
    dep: &Kustomization,
    expression: &str,
    id: &str,
) -> Result<bool, DependencyError> {
    let program =
        cel::Program::compile(expression).map_err(|e| DependencyError::InvalidReadyExpr {
            id: id.to_string(),
            reason: e.to_string(),
        })?;
    let mut context = cel::Context::default();
    let this = serde_json::to_value(object).unwrap_or_default();
    let that = serde_json::to_value(dep).unwrap_or_default();
    context.add_variable_from_value("self", cel::to_value(this).unwrap_or(cel::Value::Null));
    context.add_variable_from_value("dep", cel::to_value(that).unwrap_or(cel::Value::Null));
    match program.execute(&context) {
        Ok(cel::Value::Bool(ready)) => Ok(ready),
        Ok(_) => Err(DependencyError::ReadyExprNotBoolean { id: id.to_string() }),
        Err(_) => Ok(false),
    }
}
