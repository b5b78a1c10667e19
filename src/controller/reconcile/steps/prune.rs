//! Inventory and prune: the new inventory from what was applied, the objects that left it
//! deleted, unless the prune guard stops that.

use std::time::Duration;

use super::guards::annotation;
use super::{EventMeta, EventType, Progress, Target, store_inventory};
use crate::api::{Kustomization, KustomizationStatus, ResourceInventory};
use crate::controller::KustomizationKey;
use crate::controller::context::Context;
use crate::controller::error::StepError;
use crate::controller::prune_guard;
use crate::controller::status::reason;
use crate::inventory;
use crate::objects::{ChangeSet, ObjectRef};

/// Inventory and prune: the new inventory from the change set; with `spec.prune`, objects
/// that left it are deleted (those whose deletion failed stay in it, and fail the step
/// after the inventory is stored). Beyond Flux, a prune over the guard's `threshold` is not
/// made: its objects stay in the inventory, and the step fails with the guard's reason.
pub(crate) async fn inventory_and_prune(
    progress: &Progress<'_>,
    target: &Target,
    changes: &ChangeSet,
    old_inventory: &ResourceInventory,
    status: &mut KustomizationStatus,
    threshold: Option<prune_guard::Threshold>,
    meta: &EventMeta,
) -> Result<(), StepError> {
    let (object, ctx) = (progress.object, progress.ctx);
    let mut new_inventory = inventory::from_change_set(changes).map_err(StepError::Inventory)?;
    let mut failure = None;
    if object.spec.prune {
        let stale =
            inventory::stale(old_inventory, &new_inventory).map_err(StepError::StaleObjects)?;
        let guard = prune_guard::Guard {
            threshold,
            confirmation: annotation(object, prune_guard::CONFIRM),
            honoured: annotation(object, prune_guard::HONOURED),
        };
        match prune_guard::judge(&guard, old_inventory.entries.len(), stale.len()) {
            prune_guard::Judgement::Proceed => {}
            prune_guard::Judgement::Confirmed { value } => {
                // Recorded before the prune: a crash in between asks for a new confirmation
                // rather than letting one value through twice.
                honour_confirmation(object, ctx, &value).await?;
            }
            prune_guard::Judgement::Tripped(tripped) => {
                inventory::keep_survivors(&mut new_inventory, &stale)
                    .map_err(StepError::StaleObjects)?;
                store_inventory(object, ctx, status, &new_inventory).await?;
                return Err(StepError::PruneGuarded(tripped));
            }
        }
        if !stale.is_empty() {
            let kept: Vec<ObjectRef> = changes.changes.iter().map(|c| c.object.clone()).collect();
            let pruning = Pruning {
                stale: &stale,
                kept: &kept,
            };
            failure = prune(progress, target, pruning, &mut new_inventory, meta).await?;
        }
    }
    store_inventory(object, ctx, status, &new_inventory).await?;
    match failure {
        Some(errors) => Err(StepError::Prune(errors)),
        None => Ok(()),
    }
}

/// What a prune deletes, and what the new inventory keeps.
struct Pruning<'a> {
    stale: &'a [ObjectRef],
    kept: &'a [ObjectRef],
}

/// Deletes the stale objects; those whose deletion failed stay in `new_inventory`, and their
/// errors come back.
async fn prune(
    progress: &Progress<'_>,
    target: &Target,
    pruning: Pruning<'_>,
    new_inventory: &mut ResourceInventory,
    meta: &EventMeta,
) -> Result<Option<Vec<String>>, StepError> {
    let (object, ctx) = (progress.object, progress.ctx);
    let owned = object.spec.kube_config.is_none().then_some(&ctx.owned);
    let outcome = inventory::prune_with(
        &target.client,
        &target.kinds,
        owned,
        pruning.stale,
        pruning.kept,
        &target.owner,
    )
    .await;
    ctx.metrics
        .observe_apply(Duration::ZERO, &outcome.deleted());
    let mut failure = None;
    if !outcome.survivors.is_empty() {
        inventory::keep_survivors(new_inventory, &outcome.survivors)
            .map_err(StepError::StaleObjects)?;
        failure = Some(outcome.errors);
    }
    // As Flux's: a prune that failed says so only in the outcome; one that settled
    // everything lists what it deleted and what it left.
    let settled = outcome.settled.listing();
    if failure.is_none() && !settled.is_empty() {
        tracing::info!("garbage collection completed: {settled}");
        progress.event(EventType::Normal, reason::PROGRESSING, &settled, meta);
    }
    Ok(failure)
}

/// Records on the Kustomization the confirmation value a guarded prune honours.
async fn honour_confirmation(
    object: &Kustomization,
    ctx: &Context,
    value: &str,
) -> Result<(), StepError> {
    let namespace = object.metadata.namespace.as_deref().unwrap_or("");
    let name = object.metadata.name.as_deref().unwrap_or("");
    let api: kube::Api<Kustomization> = kube::Api::namespaced(ctx.client.clone(), namespace);
    let patch = serde_json::json!({"metadata": {"annotations": {prune_guard::HONOURED: value}}});
    let params = ctx.options.status_writes();
    let patched = api
        .patch(name, &params, &kube::api::Patch::Merge(patch))
        .await
        .map_err(StepError::PruneConfirmation)?;
    tracing::info!(confirmation = %value, "prune guard: confirmed prune proceeds");
    ctx.own_writes
        .record(&KustomizationKey::of(&patched), &patched);
    Ok(())
}
