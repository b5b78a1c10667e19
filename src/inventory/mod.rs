//! The inventory: which objects a Kustomization applied, what dropped out of it since the last
//! reconcile, and garbage collection of those objects.
//!
//! Entries come from the change set (skipped objects included) in Flux's ID format
//! (`crate::api::ObjectId`). [`stale`] diffs two inventories by ID and orders the leftovers for
//! deletion in reverse apply order; [`prune`] deletes them with background propagation, but only
//! objects that still carry our owner labels and do not opt out (`prune: disabled`,
//! `reconcile: disabled`, `ssa: Ignore`). Objects whose deletion failed are survivors and stay.
//!
//! Size: Flux keeps every entry in `status.inventory`. At ~60 bytes an entry, 50,000 entries
//! would exceed etcd's 1.5 MiB object limit, so [`encode`] keeps the Flux format while it fits
//! a budget and otherwise keeps as many leading entries in the status as fit and writes the
//! complete list, gzip-compressed, to a companion Secret ([`save_overflow`]). Flux tooling
//! reading the status then sees a prefix of the inventory; a Flux controller taking over would
//! prune too little, never too much.

use std::collections::HashSet;
use std::io::{Read, Write};

use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;

use crate::api::{ObjectId, ResourceInventory, ResourceRef};
use crate::apply::{
    Action, Change, ChangeSet, KindCache, KindError, ObjectRef, Owner, SsaPolicy, kind_rank,
    prune_disabled, reconcile_disabled, ssa_policy,
};

#[derive(Debug, thiserror::Error)]
pub enum InventoryError {
    #[error("inventory entry for {object}: {reason}")]
    Id { object: String, reason: String },
    #[error("inventory entry '{id}' is not a valid object ID: {reason}")]
    Parse { id: String, reason: String },
    #[error("inventory overflow of {namespace}/{name}: {reason}")]
    Overflow {
        namespace: String,
        name: String,
        reason: String,
    },
}

fn object_id(reference: &ObjectRef) -> ObjectId {
    ObjectId::new(
        reference.namespace.clone(),
        reference.name.clone(),
        reference.group(),
        reference.kind.clone(),
    )
}

/// The inventory of a change set, in apply order.
pub fn from_change_set(change_set: &ChangeSet) -> Result<ResourceInventory, InventoryError> {
    let mut entries = Vec::with_capacity(change_set.changes.len());
    let mut seen = HashSet::new();
    for change in &change_set.changes {
        let id = object_id(&change.object)
            .encode()
            .map_err(|e| InventoryError::Id {
                object: change.object.to_string(),
                reason: e.to_string(),
            })?;
        if seen.insert(id.clone()) {
            entries.push(ResourceRef {
                id,
                version: change.object.version().to_string(),
            });
        }
    }
    Ok(ResourceInventory { entries })
}

/// The objects an inventory names.
pub fn objects_of(inventory: &ResourceInventory) -> Result<Vec<ObjectRef>, InventoryError> {
    inventory
        .entries
        .iter()
        .map(|entry| {
            let id = ObjectId::parse(&entry.id).map_err(|e| InventoryError::Parse {
                id: entry.id.clone(),
                reason: e.to_string(),
            })?;
            let api_version = if id.group.is_empty() {
                entry.version.clone()
            } else {
                format!("{}/{}", id.group, entry.version)
            };
            Ok(ObjectRef {
                api_version,
                kind: id.kind,
                namespace: id.namespace,
                name: id.name,
            })
        })
        .collect()
}

/// Entries of `old` that `new` no longer has (by ID, whatever the version), in the order
/// they are deleted: reverse apply order.
pub fn stale(
    old: &ResourceInventory,
    new: &ResourceInventory,
) -> Result<Vec<ObjectRef>, InventoryError> {
    let current: HashSet<&str> = new.entries.iter().map(|e| e.id.as_str()).collect();
    let leftover = ResourceInventory {
        entries: old
            .entries
            .iter()
            .filter(|e| !current.contains(e.id.as_str()))
            .cloned()
            .collect(),
    };
    let mut objects = objects_of(&leftover)?;
    objects.reverse();
    objects.sort_by_key(|o| std::cmp::Reverse(kind_rank(&o.kind)));
    Ok(objects)
}

/// What garbage collection did.
#[derive(Debug, Default)]
pub struct PruneOutcome {
    /// Deleted (or already being deleted) objects, as change-set entries.
    pub deleted: ChangeSet,
    /// Objects left alone: gone already, no longer ours, or opted out.
    pub skipped: Vec<ObjectRef>,
    /// Objects whose deletion failed; they stay in the inventory.
    pub survivors: Vec<ObjectRef>,
    pub errors: Vec<String>,
}

/// Deletes stale objects that are still ours.
pub async fn prune(client: &kube::Client, stale: &[ObjectRef], owner: &Owner) -> PruneOutcome {
    prune_with(client, &KindCache::default(), stale, owner).await
}

/// [`prune`] with discovery results shared with other callers.
pub async fn prune_with(
    client: &kube::Client,
    kinds: &KindCache,
    stale: &[ObjectRef],
    owner: &Owner,
) -> PruneOutcome {
    let mut outcome = PruneOutcome::default();
    for reference in stale {
        let api = match kinds.api(client, reference).await {
            Ok(api) => api,
            // The kind is no longer served (its CRD went first): nothing is left to delete.
            Err(KindError::NotServed) => {
                outcome.skipped.push(reference.clone());
                continue;
            }
            // Anything else may be passing (an aggregated API down): try again next time.
            Err(KindError::Api(error)) => {
                outcome.survivors.push(reference.clone());
                outcome.errors.push(format!("{reference}: {error}"));
                continue;
            }
        };
        let live = match api.get_opt(&reference.name).await {
            Ok(Some(live)) => serde_json::to_value(live).unwrap_or_default(),
            Ok(None) => {
                outcome.skipped.push(reference.clone());
                continue;
            }
            Err(error) => {
                outcome.survivors.push(reference.clone());
                outcome.errors.push(format!("{reference}: {error}"));
                continue;
            }
        };
        let opted_out = prune_disabled(&live)
            || reconcile_disabled(&live)
            || ssa_policy(&live) == SsaPolicy::Ignore;
        if !owner.owns(&live) || opted_out {
            outcome.skipped.push(reference.clone());
            continue;
        }
        if live.pointer("/metadata/deletionTimestamp").is_none() {
            match api
                .delete(&reference.name, &DeleteParams::background())
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(error) => {
                    outcome.survivors.push(reference.clone());
                    outcome
                        .errors
                        .push(format!("{reference} delete failed: {error}"));
                    continue;
                }
            }
        }
        outcome.deleted.changes.push(Change {
            object: reference.clone(),
            action: Action::Deleted,
        });
    }
    outcome
}

/// Adds survivors back to a new inventory so the next reconcile tries again.
pub fn keep_survivors(
    inventory: &mut ResourceInventory,
    survivors: &[ObjectRef],
) -> Result<(), InventoryError> {
    let present: HashSet<String> = inventory.entries.iter().map(|e| e.id.clone()).collect();
    for survivor in survivors {
        let id = object_id(survivor)
            .encode()
            .map_err(|e| InventoryError::Id {
                object: survivor.to_string(),
                reason: e.to_string(),
            })?;
        if !present.contains(&id) {
            inventory.entries.push(ResourceRef {
                id,
                version: survivor.version().to_string(),
            });
        }
    }
    Ok(())
}

/// The bytes the inventory takes in the status (its JSON encoding).
pub fn encoded_size(inventory: &ResourceInventory) -> usize {
    serde_json::to_vec(inventory)
        .map(|v| v.len())
        .unwrap_or(usize::MAX)
}

/// The status share of the object-size budget: well under etcd's 1.5 MiB with room for the
/// rest of the Kustomization.
pub const STATUS_BUDGET: usize = 512 * 1024;

/// An inventory as stored: the status part, and the complete list when it did not fit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stored {
    pub status: ResourceInventory,
    pub overflow: Option<Vec<u8>>,
}

/// Splits an inventory into what the status can hold and, if needed, a compressed overflow.
pub fn encode(inventory: &ResourceInventory, budget: usize) -> Stored {
    if encoded_size(inventory) <= budget {
        return Stored {
            status: inventory.clone(),
            overflow: None,
        };
    }
    let mut used = r#"{"entries":[]}"#.len();
    let mut prefix = Vec::new();
    for entry in &inventory.entries {
        let size = serde_json::to_vec(entry)
            .map(|v| v.len())
            .unwrap_or(usize::MAX)
            + 1;
        if used + size > budget {
            break;
        }
        used += size;
        prefix.push(entry.clone());
    }
    let mut encoder = GzEncoder::new(Vec::new(), Compression::best());
    for entry in &inventory.entries {
        // IDs and versions contain neither tabs nor newlines (DNS names, kinds, groups).
        let _ = writeln!(encoder, "{}\t{}", entry.id, entry.version);
    }
    Stored {
        status: ResourceInventory { entries: prefix },
        overflow: Some(encoder.finish().unwrap_or_default()),
    }
}

/// The complete inventory from its stored parts.
pub fn decode(
    status: &ResourceInventory,
    overflow: Option<&[u8]>,
) -> Result<ResourceInventory, String> {
    let Some(bytes) = overflow else {
        return Ok(status.clone());
    };
    let mut text = String::new();
    GzDecoder::new(bytes)
        .take(256 * 1024 * 1024)
        .read_to_string(&mut text)
        .map_err(|e| format!("reading the inventory overflow: {e}"))?;
    let entries = text
        .lines()
        .filter(|l| !l.is_empty())
        .map(|line| {
            let (id, version) = line
                .split_once('\t')
                .ok_or_else(|| format!("malformed inventory line {line:?}"))?;
            Ok(ResourceRef {
                id: id.to_string(),
                version: version.to_string(),
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(ResourceInventory { entries })
}

/// The Secret that holds an inventory overflow for a Kustomization.
pub fn overflow_secret_name(kustomization: &str) -> String {
    let name = format!("{kustomization}-inventory");
    if name.len() <= 253 {
        return name;
    }
    use sha2::Digest as _;
    let digest = hex::encode(sha2::Sha256::digest(kustomization.as_bytes()));
    format!("kustomization-inventory-{}", &digest[..32])
}

const OVERFLOW_KEY: &str = "inventory.gz";
const OVERFLOW_LABEL: &str = "kustomize.toolkit.fluxcd.io/inventory-of";

/// Writes (or, with `None`, deletes) the overflow Secret, owned by the Kustomization so it
/// goes with it.
pub async fn save_overflow(
    client: &kube::Client,
    namespace: &str,
    kustomization: &str,
    kustomization_uid: &str,
    overflow: Option<&[u8]>,
    field_manager: &str,
) -> Result<(), InventoryError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let name = overflow_secret_name(kustomization);
    let failure = |reason: String| InventoryError::Overflow {
        namespace: namespace.into(),
        name: kustomization.into(),
        reason,
    };
    let Some(bytes) = overflow else {
        return match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(error) => Err(failure(error.to_string())),
        };
    };
    use base64::Engine as _;
    let secret = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {
            "name": name, "namespace": namespace,
            "labels": {OVERFLOW_LABEL: kustomization},
            "ownerReferences": [{
                "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                "name": kustomization, "uid": kustomization_uid,
            }],
        },
        "type": "Opaque",
        "data": {OVERFLOW_KEY: base64::engine::general_purpose::STANDARD.encode(bytes)},
    });
    api.patch(
        &name,
        &PatchParams::apply(field_manager).force(),
        &Patch::Apply(&secret),
    )
    .await
    .map(|_| ())
    .map_err(|e| failure(e.to_string()))
}

/// Reads the overflow Secret, if there is one.
pub async fn load_overflow(
    client: &kube::Client,
    namespace: &str,
    kustomization: &str,
) -> Result<Option<Vec<u8>>, InventoryError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret = api
        .get_opt(&overflow_secret_name(kustomization))
        .await
        .map_err(|e| InventoryError::Overflow {
            namespace: namespace.into(),
            name: kustomization.into(),
            reason: e.to_string(),
        })?;
    Ok(secret
        .and_then(|s| s.data)
        .and_then(|mut data| data.remove(OVERFLOW_KEY))
        .map(|bytes| bytes.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(api_version: &str, kind: &str, namespace: &str, name: &str) -> ObjectRef {
        ObjectRef {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    fn change_set(objects: &[ObjectRef]) -> ChangeSet {
        ChangeSet {
            changes: objects
                .iter()
                .map(|o| Change {
                    object: o.clone(),
                    action: Action::Created,
                })
                .collect(),
        }
    }

    #[test]
    fn entries_use_flux_ids_and_round_trip() {
        let objects = vec![
            object("v1", "Namespace", "", "apps"),
            object("apps/v1", "Deployment", "apps", "web"),
            object(
                "rbac.authorization.k8s.io/v1",
                "ClusterRole",
                "",
                "system:reader",
            ),
        ];
        let inventory = from_change_set(&change_set(&objects)).unwrap();
        let ids: Vec<&str> = inventory.entries.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(
            ids,
            vec![
                "_apps__Namespace",
                "apps_web_apps_Deployment",
                "_system__reader_rbac.authorization.k8s.io_ClusterRole"
            ]
        );
        assert_eq!(objects_of(&inventory).unwrap(), objects);
    }

    #[test]
    fn stale_entries_come_in_reverse_apply_order() {
        let old = from_change_set(&change_set(&[
            object("v1", "Namespace", "", "apps"),
            object("v1", "ConfigMap", "apps", "a"),
            object("apps/v1", "Deployment", "apps", "web"),
            object("v1", "Service", "apps", "web"),
        ]))
        .unwrap();
        let new = from_change_set(&change_set(&[object(
            "apps/v1",
            "Deployment",
            "apps",
            "web",
        )]))
        .unwrap();
        let stale: Vec<String> = stale(&old, &new)
            .unwrap()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            stale,
            vec!["Service/apps/web", "ConfigMap/apps/a", "Namespace/apps"]
        );
    }

    #[test]
    fn fifty_thousand_entries_stay_within_the_budget() {
        let objects: Vec<ObjectRef> = (0..50_000)
            .map(|i| {
                object(
                    "apps/v1",
                    "Deployment",
                    &format!("team-{}", i % 50),
                    &format!("service-{i:05}-deployment"),
                )
            })
            .collect();
        let inventory = from_change_set(&change_set(&objects)).unwrap();
        let full = encoded_size(&inventory);
        assert!(
            full > 1_500_000,
            "the Flux format alone would not fit: {full}"
        );
        let stored = encode(&inventory, STATUS_BUDGET);
        assert!(encoded_size(&stored.status) <= STATUS_BUDGET);
        let overflow = stored.overflow.as_ref().expect("an overflow");
        assert!(
            overflow.len() < 400_000,
            "compressed overflow is {} bytes",
            overflow.len()
        );
        assert_eq!(decode(&stored.status, Some(overflow)).unwrap(), inventory);
        let small = from_change_set(&change_set(&objects[..10])).unwrap();
        let stored = encode(&small, STATUS_BUDGET);
        assert_eq!(stored.overflow, None);
        assert_eq!(stored.status, small);
    }

    #[test]
    fn survivors_return_to_the_inventory() {
        let mut inventory =
            from_change_set(&change_set(&[object("v1", "ConfigMap", "a", "x")])).unwrap();
        keep_survivors(
            &mut inventory,
            &[
                object("v1", "ConfigMap", "a", "x"),
                object("v1", "Secret", "a", "y"),
            ],
        )
        .unwrap();
        assert_eq!(inventory.entries.len(), 2);
        assert!(overflow_secret_name(&"k".repeat(250)).len() <= 253);
    }
}
