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

/// The previous inventory: the status, or the complete list in the overflow Secret when
/// the status only holds a prefix.
pub(crate) async fn load_inventory(
    ctx: &Context,
    namespace: &str,
    name: &str,
    status: &KustomizationStatus,
) -> crate::api::ResourceInventory {
    let in_status = status.inventory.clone().unwrap_or_default();
    if inventory::encoded_size(&in_status) + 4096 < inventory::STATUS_BUDGET {
        return in_status;
    }
    match inventory::load_overflow(&ctx.client, namespace, name).await {
        Ok(Some(bytes)) => inventory::decode(&in_status, Some(&bytes)).unwrap_or(in_status),
        _ => in_status,
    }
}

/// Stores an inventory: in the status, spilling into the overflow Secret when too large.
pub(crate) async fn store_inventory(
    ctx: &Context,
    object: &Kustomization,
    status: &mut KustomizationStatus,
    full: crate::api::ResourceInventory,
) {
    let namespace = object.metadata.namespace.clone().unwrap_or_default();
    let name = object.metadata.name.clone().unwrap_or_default();
    let uid = object.metadata.uid.clone().unwrap_or_default();
    let stored = inventory::encode(&full, inventory::STATUS_BUDGET);
    let had_overflow = status
        .inventory
        .as_ref()
        .is_some_and(|i| inventory::encoded_size(i) + 4096 >= inventory::STATUS_BUDGET);
    if (stored.overflow.is_some() || had_overflow)
        && let Err(error) = inventory::save_overflow(
            &ctx.client,
            &namespace,
            &name,
            &uid,
            stored.overflow.as_deref(),
            &ctx.options.field_manager,
        )
        .await
    {
        tracing::warn!(kustomization = %format!("{namespace}/{name}"), error = %error, "storing the inventory overflow");
    }
    status.inventory = Some(stored.status);
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
