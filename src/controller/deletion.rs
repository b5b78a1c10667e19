//! Deleting a Kustomization: the deletion policy decides what happens to the applied
//! objects (MirrorPrune, Delete, WaitForTermination, Orphan), then the finalizer goes. A
//! suspended Kustomization prunes nothing; a tenant account that is gone or a termination
//! that times out is reported, never allowed to hold the finalizer forever.

use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::context::Context;
use super::events::{EventMeta, EventType};
use super::reconcile::{FINALIZER, ReconcileError};
use super::status::reason;
use crate::api::{DeletionPolicy, Kustomization};
use crate::inventory::{self, Holder};
use crate::objects::{KindCache, KindError, ObjectRef, Owner};

/// Deletion: the policy decides what happens to the applied objects, then the finalizer goes.
pub(crate) async fn finalize(object: &Kustomization, ctx: &Context) -> Result<(), ReconcileError> {
    let namespace = object.metadata.namespace.clone().unwrap_or_default();
    let name = object.metadata.name.clone().unwrap_or_default();
    ctx.attempted.forget(&format!("{namespace}/{name}"));
    let api: Api<Kustomization> = Api::namespaced(ctx.client.clone(), &namespace);
    if !object
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == FINALIZER)
    {
        return Ok(());
    }
    let suspended = object.spec.suspend == Some(true);
    let policy = object.spec.deletion_policy.unwrap_or_default();
    let prune = match policy {
        DeletionPolicy::MirrorPrune => object.spec.prune,
        DeletionPolicy::Delete | DeletionPolicy::WaitForTermination => true,
        DeletionPolicy::Orphan => false,
    };
    if prune && !suspended {
        let holder = Holder {
            namespace: &namespace,
            name: &name,
            uid: object.metadata.uid.as_deref().unwrap_or(""),
        };
        let in_status = object.status.as_ref().and_then(|s| s.inventory.as_ref());
        let inventory = inventory::load(&ctx.client, &holder, in_status).await?;
        let stale = inventory::stale(&inventory, &Default::default())?;
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
            ctx.recorder.publish(
                object,
                EventType::Warning,
                reason::PRUNE_FAILED,
                &note,
                &EventMeta::default(),
            );
        } else {
            let client = ctx.target_client(object).await?;
            let owner = Owner {
                name: name.clone(),
                namespace: namespace.clone(),
            };
            // Discovery and the owned-object watches are shared with the reconciliations.
            let kinds = ctx.kinds_for(object);
            let owned = object.spec.kube_config.is_none().then_some(&ctx.owned);
            let outcome = inventory::prune_with(&client, &kinds, owned, &stale, &owner).await;
            if !outcome.errors.is_empty() {
                return Err(ReconcileError::Prune(outcome.errors));
            }
            if policy == DeletionPolicy::WaitForTermination {
                let timeout = super::steps::timeout_of(&object.spec);
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
                    let error = match error {
                        WaitError::Timeout(remaining) => format!(
                            "timeout waiting for termination of: [{}]",
                            remaining.join(", ")
                        ),
                        WaitError::Api(error) => format!("Kubernetes API: {error}"),
                    };
                    ctx.recorder.publish(
                        object,
                        EventType::Warning,
                        reason::PRUNE_FAILED,
                        &error,
                        &EventMeta::default(),
                    );
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
    ctx.forget(&format!("{namespace}/{name}"));
    Ok(())
}

/// Why waiting for deleted objects to go ended early.
enum WaitError {
    /// Still there at the timeout.
    Timeout(Vec<String>),
    Api(kube::Error),
}

async fn wait_gone(
    client: &kube::Client,
    objects: &[ObjectRef],
    timeout: Duration,
    interval: Duration,
) -> Result<(), WaitError> {
    let deadline = tokio::time::Instant::now() + timeout;
    let kinds = KindCache::default();
    loop {
        let mut remaining = Vec::new();
        for object in objects {
            let api = match kinds.api(client, object).await {
                Ok(api) => api,
                // A kind that is no longer served has no objects left.
                Err(KindError::NotServed) => continue,
                Err(KindError::Api(error)) => return Err(WaitError::Api(error)),
            };
            if api
                .get_opt(&object.name)
                .await
                .map_err(WaitError::Api)?
                .is_some()
            {
                remaining.push(object.to_string());
            }
        }
        if remaining.is_empty() {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(WaitError::Timeout(remaining));
        }
        tokio::time::sleep(interval).await;
    }
}
