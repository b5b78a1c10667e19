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

mod prune;
mod storage;

use std::collections::HashSet;

pub use prune::{prune, prune_with};
pub use storage::{
    Holder, OverflowError, STATUS_BUDGET, Stored, decode, encode, encoded_size, load,
    load_overflow, overflow_secret_name, save_overflow, store,
};

use crate::api::{ObjectId, ResourceInventory, ResourceRef};
use crate::objects::{Action, ChangeSet, ObjectRef, apply_order};

#[derive(Debug, thiserror::Error)]
pub enum InventoryError {
    #[error("inventory entry for {object}: {reason}")]
    Id { object: String, reason: String },
    #[error("inventory entry '{id}' is not a valid object ID: {reason}")]
    Parse { id: String, reason: String },
    #[error("inventory overflow of {namespace}/{name}: {source}")]
    Overflow {
        namespace: String,
        name: String,
        source: storage::OverflowError,
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
    // ssa's DeleteAll: the reverse of the apply order.
    objects.sort_by(|a, b| order_of(b).cmp(&order_of(a)));
    Ok(objects)
}

fn order_of(object: &ObjectRef) -> (usize, &str, &str, &str, &str) {
    apply_order(
        &object.kind,
        crate::objects::api_group(&object.api_version),
        &object.namespace,
        &object.name,
    )
}

/// What garbage collection did.
#[derive(Debug, Default)]
pub struct PruneOutcome {
    /// Every object settled, in the order they were pruned: `deleted` (or being deleted, or
    /// gone already) or `skipped` (no longer ours, opted out, or of a kind no longer
    /// served). What Flux's prune event lists.
    pub settled: ChangeSet,
    /// Objects whose deletion failed; they stay in the inventory.
    pub survivors: Vec<ObjectRef>,
    pub errors: Vec<String>,
}

impl PruneOutcome {
    /// The objects deleted, as change-set entries.
    pub fn deleted(&self) -> ChangeSet {
        self.only(Action::Deleted)
    }

    /// The objects left alone.
    pub fn skipped(&self) -> Vec<ObjectRef> {
        self.only(Action::Skipped)
            .changes
            .into_iter()
            .map(|change| change.object)
            .collect()
    }

    fn only(&self, action: Action) -> ChangeSet {
        ChangeSet {
            changes: self
                .settled
                .changes
                .iter()
                .filter(|change| change.action == action)
                .cloned()
                .collect(),
        }
    }
}

/// A prune's failures as fluxcd/pkg's DeleteAll words them: "delete failed, errors: " and
/// each error closed by a `;`.
pub fn delete_failed(errors: &[String]) -> String {
    let listed: String = errors.iter().map(|error| format!("{error};")).collect();
    format!("delete failed, errors: {listed}")
}

/// After a failed apply: the old entries plus what was applied before the failure, so that
/// objects created by the partial apply stay ours (pruned later if they leave) and nothing
/// the old inventory named is forgotten.
pub fn merge_applied(
    old: &ResourceInventory,
    applied: &ChangeSet,
) -> Result<ResourceInventory, InventoryError> {
    let applied = from_change_set(applied)?;
    let mut merged = old.clone();
    let known: HashSet<String> = merged.entries.iter().map(|e| e.id.clone()).collect();
    merged.entries.extend(
        applied
            .entries
            .into_iter()
            .filter(|e| !known.contains(&e.id)),
    );
    Ok(merged)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::{Action, Change};

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
    fn a_partial_apply_adds_what_it_applied_to_the_old_inventory() {
        let old = from_change_set(&change_set(&[
            object("v1", "ConfigMap", "apps", "kept"),
            object("v1", "ConfigMap", "apps", "leaving"),
        ]))
        .unwrap();
        let applied = change_set(&[
            object("v1", "ConfigMap", "apps", "kept"),
            object("v1", "Secret", "apps", "new"),
        ]);
        let merged = merge_applied(&old, &applied).unwrap();
        let ids: Vec<&str> = merged.entries.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "apps_kept__ConfigMap",
                "apps_leaving__ConfigMap",
                "apps_new__Secret"
            ]
        );
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
