//! `dependsOn`: a Kustomization waits until each dependency exists, has observed its latest
//! generation, is Ready, has applied the same revision when both build from the same source,
//! and satisfies its optional CEL `readyExpr` (over `self` and `dep`).

use kube::api::Api;

use super::reconcile::Context;
use super::status::reason;
use crate::api::Kustomization;
use crate::source::SourceObject;

type NotReady = (bool, &'static str, String);

pub async fn check(
    object: &Kustomization,
    ctx: &Context,
    source: &SourceObject,
    revision: &str,
) -> Result<(), NotReady> {
    let namespace = object.metadata.namespace.clone().unwrap_or_default();
    for dependency in &object.spec.depends_on {
        let dep_namespace = dependency
            .namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| namespace.clone());
        let id = format!("{dep_namespace}/{}", dependency.name);
        let api: Api<Kustomization> = Api::namespaced(ctx.client.clone(), &dep_namespace);
        let not_ready = |detail: &str| {
            (
                false,
                reason::DEPENDENCY_NOT_READY,
                format!("dependency '{id}' is not ready{detail}"),
            )
        };
        let dep = match api.get_opt(&dependency.name).await {
            Ok(Some(dep)) => dep,
            Ok(None) => {
                return Err((
                    false,
                    reason::DEPENDENCY_NOT_READY,
                    format!("dependency '{id}' not found"),
                ));
            }
            Err(error) => {
                return Err((
                    false,
                    reason::DEPENDENCY_NOT_READY,
                    format!("dependency '{id}': {error}"),
                ));
            }
        };
        if let Some(expression) = dependency.ready_expr.as_deref().filter(|e| !e.is_empty()) {
            let program = cel::Program::compile(expression).map_err(|e| {
                (
                    true,
                    reason::INVALID_CEL,
                    format!("invalid readyExpr for dependency '{id}': {e}"),
                )
            })?;
            let mut context = cel::Context::default();
            let this = serde_json::to_value(object).unwrap_or_default();
            let that = serde_json::to_value(&dep).unwrap_or_default();
            context
                .add_variable_from_value("self", cel::to_value(this).unwrap_or(cel::Value::Null));
            context.add_variable_from_value("dep", cel::to_value(that).unwrap_or(cel::Value::Null));
            match program.execute(&context) {
                Ok(cel::Value::Bool(true)) => continue,
                Ok(cel::Value::Bool(false)) => return Err(not_ready("")),
                Ok(_) => {
                    return Err((
                        true,
                        reason::INVALID_CEL,
                        format!("readyExpr for dependency '{id}' is not a boolean"),
                    ));
                }
                Err(_) => return Err(not_ready("")),
            }
        }
        let status = dep.status.clone().unwrap_or_default();
        let observed = dep
            .metadata
            .generation
            .is_some_and(|g| g == status.observed_generation);
        let ready =
            super::status::get(&status, super::status::READY).is_some_and(|c| c.status == "True");
        if !observed || !ready {
            return Err(not_ready(""));
        }
        let dep_source = SourceObject::of(&dep.spec.source_ref, &dep_namespace);
        if dep_source == *source && status.last_applied_revision.as_deref() != Some(revision) {
            return Err(not_ready(&format!(
                " (revision {} not yet applied)",
                revision
            )));
        }
    }
    Ok(())
}
