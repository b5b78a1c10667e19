//! What a reconciliation reads besides the artifact: the previous inventory (with its
//! overflow Secret), decryption keys and post-build variables; and how the new inventory is
//! stored.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::Api;

use super::reconcile::Context;
use crate::api::{Kustomization, KustomizationStatus, SubstituteKind};
use crate::inventory;
use crate::sops::Keys;

/// Whether a stored status inventory may be only the prefix of one in the overflow Secret
/// (prefixes fill the budget to within an entry).
fn may_overflow(inventory: &crate::api::ResourceInventory) -> bool {
    inventory::encoded_size(inventory) + 4096 >= inventory::STATUS_BUDGET
}

/// The previous inventory: the status, or the complete list in the overflow Secret when
/// the status only holds a prefix. A Secret that cannot be read is an error: pruning from a
/// prefix would orphan the rest.
pub(crate) async fn load_inventory(
    ctx: &Context,
    namespace: &str,
    name: &str,
    status: &KustomizationStatus,
) -> Result<crate::api::ResourceInventory, String> {
    let in_status = status.inventory.clone().unwrap_or_default();
    if !may_overflow(&in_status) {
        return Ok(in_status);
    }
    let secret = inventory::overflow_secret_name(name);
    match inventory::load_overflow(&ctx.client, namespace, name).await {
        Ok(Some(bytes)) => inventory::decode(&in_status, Some(&bytes))
            .map_err(|e| format!("inventory Secret '{namespace}/{secret}': {e}")),
        Ok(None) => Ok(in_status),
        Err(error) => Err(error.to_string()),
    }
}

/// Stores an inventory: in the status, spilling into the overflow Secret when too large.
pub(crate) async fn store_inventory(
    ctx: &Context,
    object: &Kustomization,
    status: &mut KustomizationStatus,
    full: crate::api::ResourceInventory,
) -> Result<(), String> {
    let namespace = object.metadata.namespace.clone().unwrap_or_default();
    let name = object.metadata.name.clone().unwrap_or_default();
    let uid = object.metadata.uid.clone().unwrap_or_default();
    let stored = inventory::encode(&full, inventory::STATUS_BUDGET);
    let had_overflow = status.inventory.as_ref().is_some_and(may_overflow);
    if stored.overflow.is_some() || had_overflow {
        // A status prefix without its Secret could not be read back: fail instead.
        inventory::save_overflow(
            &ctx.client,
            &namespace,
            &name,
            &uid,
            stored.overflow.as_deref(),
            &ctx.options.field_manager,
        )
        .await
        .map_err(|e| e.to_string())?;
    }
    status.inventory = Some(stored.status);
    Ok(())
}

/// SOPS keys from `spec.decryption.secretRef`, or from `--sops-age-secret` when the
/// Kustomization names none.
pub(crate) async fn decryption_keys(
    object: &Kustomization,
    ctx: &Context,
) -> Result<Option<Keys>, String> {
    let Some(decryption) = &object.spec.decryption else {
        return Ok(None);
    };
    let namespace = object.metadata.namespace.clone().unwrap_or_default();
    let (secret_namespace, secret_name) = match &decryption.secret_ref {
        Some(reference) => (namespace, reference.name.clone()),
        None => match &ctx.options.sops_age_secret {
            Some(name) => (ctx.options.runtime_namespace.clone(), name.clone()),
            None => return Ok(Some(Keys::new())),
        },
    };
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), &secret_namespace);
    let secret = api
        .get_opt(&secret_name)
        .await
        .map_err(|e| {
            format!("cannot get decryption Secret '{secret_namespace}/{secret_name}': {e}")
        })?
        .ok_or_else(|| format!("decryption Secret '{secret_namespace}/{secret_name}' not found"))?;
    let mut keys = Keys::new();
    for (entry, value) in secret.data.unwrap_or_default() {
        if entry.ends_with(".agekey") || entry.ends_with(".asc") {
            keys.add(&entry, &value.0).map_err(|e| {
                format!("decryption Secret '{secret_namespace}/{secret_name}': {e}")
            })?;
        }
    }
    Ok(Some(keys))
}

/// Post-build variables from `substituteFrom` (in order) and inline `substitute`.
pub(crate) async fn variables(
    object: &Kustomization,
    ctx: &Context,
) -> Result<BTreeMap<String, String>, String> {
    let Some(post_build) = &object.spec.post_build else {
        return Ok(BTreeMap::new());
    };
    let namespace = object.metadata.namespace.clone().unwrap_or_default();
    let mut sources = Vec::new();
    for reference in &post_build.substitute_from {
        let data = match reference.kind {
            SubstituteKind::ConfigMap => {
                let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &namespace);
                api.get_opt(&reference.name)
                    .await
                    .map_err(|e| format!("substitute from ConfigMap '{}': {e}", reference.name))?
                    .map(|c| c.data.unwrap_or_default())
            }
            SubstituteKind::Secret => {
                let api: Api<Secret> = Api::namespaced(ctx.client.clone(), &namespace);
                api.get_opt(&reference.name)
                    .await
                    .map_err(|e| format!("substitute from Secret '{}': {e}", reference.name))?
                    .map(|s| {
                        s.data
                            .unwrap_or_default()
                            .into_iter()
                            .map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned()))
                            .collect()
                    })
            }
        };
        sources.push(crate::substitute::Source {
            kind: match reference.kind {
                SubstituteKind::ConfigMap => "ConfigMap".into(),
                SubstituteKind::Secret => "Secret".into(),
            },
            name: reference.name.clone(),
            optional: reference.optional,
            data,
        });
    }
    crate::substitute::collect_variables(sources, post_build.substitute.as_ref())
        .map_err(|e| e.to_string())
}
