//! Deleting a Kustomization: the deletion policy decides what happens to the applied
//! objects (MirrorPrune, Delete, WaitForTermination, Orphan), then the finalizer goes. A
//! suspended Kustomization prunes nothing; a tenant account that is gone or a termination
//! that times out is reported, never allowed to hold the finalizer forever.

use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::json;

use super::events::EventType;
use super::inputs::load_inventory;
use super::reconcile::{Context, FINALIZER, ReconcileError};
use super::status::reason;
use crate::api::{DeletionPolicy, Kustomization};
use crate::apply::{ObjectRef, Owner};
use crate::inventory;

/// Deletion: the policy decides what happens to the applied objects, then the finalizer goes.
pub(crate) async fn finalize(
    object: &Kustomization,
    ctx: &Context,
) -> Result<Action, ReconcileError> {
    let namespace = object.metadata.namespace.clone().unwrap_or_default();
    let name = object.metadata.name.clone().unwrap_or_default();
    let api: Api<Kustomization> = Api::namespaced(ctx.client.clone(), &namespace);
    if !object
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == FINALIZER)
    {
        return Ok(Action::await_change());
    }
    let suspended = object.spec.suspend == Some(true);
    let policy = object.spec.deletion_policy.unwrap_or_default();
    let prune = match policy {
        DeletionPolicy::MirrorPrune => object.spec.prune,
        DeletionPolicy::Delete | DeletionPolicy::WaitForTermination => true,
        DeletionPolicy::Orphan => false,
    };
    if prune && !suspended {
        let inventory = load_inventory(
            ctx,
            &namespace,
            &name,
            &object.status.clone().unwrap_or_default(),
        )
        .await
        .map_err(ReconcileError::Other)?;
        let stale = inventory::stale(&inventory, &Default::default())
            .map_err(|e| ReconcileError::Other(e.to_string()))?;
        let account = object
            .spec
            .service_account_name
            .clone()
            .or_else(|| ctx.options.default_service_account.clone());
        // The tenant's account may have gone with its namespace: then nothing can be pruned
        // in its name, and holding the finalizer would block the namespace forever.
        let account_gone = match (&account, &object.spec.kube_config) {
            (Some(account), None) => {
                let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> =
                    Api::namespaced(ctx.client.clone(), &namespace);
                matches!(accounts.get_opt(account).await, Ok(None))
            }
            _ => false,
        };
        if account_gone {
            let note = format!(
                "skipping garbage collection: service account '{namespace}/{}' no longer exists",
                account.unwrap_or_default()
            );
            ctx.recorder
                .publish(
                    object,
                    EventType::Warning,
                    reason::PRUNE_FAILED,
                    &note,
                    None,
                )
                .await;
        } else {
            let client = ctx
                .target_client(object)
                .await
                .map_err(ReconcileError::Other)?;
            let owner = Owner {
                name: name.clone(),
                namespace: namespace.clone(),
            };
            let outcome = inventory::prune(&client, &stale, &owner).await;
            if !outcome.errors.is_empty() {
                return Err(ReconcileError::Other(outcome.errors.join("; ")));
            }
            if policy == DeletionPolicy::WaitForTermination {
                let timeout = object
                    .spec
                    .timeout
                    .map(|t| t.to_std())
                    .unwrap_or(object.spec.interval.to_std());
                let deleted: Vec<ObjectRef> = outcome
                    .deleted
                    .changes
                    .iter()
                    .map(|c| c.object.clone())
                    .collect();
                // A timeout is reported, not retried forever: the finalizer still goes.
                if let Err(error) =
                    wait_gone(&client, &deleted, timeout, ctx.options.health_poll_interval).await
                {
                    ctx.recorder
                        .publish(
                            object,
                            EventType::Warning,
                            reason::PRUNE_FAILED,
                            &error.to_string(),
                            None,
                        )
                        .await;
                }
            }
        }
    }
    let finalizers: Vec<String> = object
        .metadata
        .finalizers
        .iter()
        .flatten()
        .filter(|f| *f != FINALIZER)
        .cloned()
        .collect();
    let patch = json!({"metadata": {"finalizers": finalizers, "resourceVersion": object.metadata.resource_version}});
    api.patch(&name, &PatchParams::default(), &Patch::Merge(patch))
        .await?;
    ctx.metrics.forget(object);
    ctx.forget(&format!("{namespace}/{name}"));
    Ok(Action::await_change())
}

async fn wait_gone(
    client: &kube::Client,
    objects: &[ObjectRef],
    timeout: Duration,
    interval: Duration,
) -> Result<(), ReconcileError> {
    let deadline = tokio::time::Instant::now() + timeout;
    let kinds = crate::apply::KindCache::default();
    loop {
        let mut remaining = Vec::new();
        for object in objects {
            let api = match kinds.api(client, object).await {
                Ok(api) => api,
                // A kind that is no longer served has no objects left.
                Err(crate::apply::KindError::NotServed) => continue,
                Err(crate::apply::KindError::Api(error)) => return Err(error.into()),
            };
            if api.get_opt(&object.name).await?.is_some() {
                remaining.push(object.to_string());
            }
        }
        if remaining.is_empty() {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(ReconcileError::Other(format!(
                "timeout waiting for termination of: [{}]",
                remaining.join(", ")
            )));
        }
        tokio::time::sleep(interval).await;
    }
}
