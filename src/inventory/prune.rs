//! Garbage collection: deleting the stale objects that are still ours and not opted out.

use kube::api::{DeleteParams, Preconditions};

use super::PruneOutcome;
use crate::objects::{
    Action, Change, KindCache, KindError, ObjectRef, OwnedObjects, Owner, Seen, SsaPolicy,
    prune_disabled, reconcile_disabled, ssa_policy,
};

/// Deletes stale objects that are still ours.
pub async fn prune(client: &kube::Client, stale: &[ObjectRef], owner: &Owner) -> PruneOutcome {
    prune_with(client, &KindCache::default(), None, stale, &[], owner).await
}

/// [`prune`] with discovery results shared with other callers and, for this cluster, the
/// owned-object watches: an object they hold is judged from them and deleted only if it has
/// not changed since (a resourceVersion precondition); any other is read first. A stale
/// entry that names, in another namespace, an object of a cluster-scoped kind that `kept`
/// (the new inventory) or an earlier stale entry holds is the same object, and is passed
/// over (see [`same_cluster_scoped_object`]).
pub async fn prune_with(
    client: &kube::Client,
    kinds: &KindCache,
    owned: Option<&OwnedObjects>,
    stale: &[ObjectRef],
    kept: &[ObjectRef],
    owner: &Owner,
) -> PruneOutcome {
    let mut outcome = PruneOutcome::default();
    for (index, reference) in stale.iter().enumerate() {
        let (served, at_recorded_version) = match kinds.served(client, reference).await {
            Ok(served) => (served, true),
            // Not at this version: the object may live on at another the CRD still serves
            // (it dropped the one recorded); with no version left (its CRD went first)
            // nothing is left to delete.
            Err(KindError::NotServed) => {
                match kinds.served_at_another_version(client, reference).await {
                    Some(served) => (served, false),
                    None => {
                        outcome.skip(reference);
                        continue;
                    }
                }
            }
            // Anything else may be passing (an aggregated API down): try again next time.
            Err(KindError::Api(error)) => {
                outcome.survivors.push(reference.clone());
                outcome.errors.push(format!(
                    "{reference} query failed: {}",
                    crate::report::api_message(&error)
                ));
                continue;
            }
        };
        // Kept, or settled already under an earlier entry.
        if !served.namespaced
            && kept
                .iter()
                .chain(&stale[..index])
                .any(|entry| same_cluster_scoped_object(entry, reference))
        {
            continue;
        }
        let api = served.api(client, &reference.namespace);
        let watched = match owned {
            // The watches are of the version recorded; at another, the object is read.
            Some(owned) if at_recorded_version => {
                owned.watch(&served);
                owned.release(reference, &served);
                owned.seen(reference, &served)
            }
            _ => Seen::Unknown,
        };
        match judge_and_delete(&api, reference, owner, watched).await {
            Verdict::Deleted => {}
            Verdict::Skipped => {
                outcome.skip(reference);
                continue;
            }
            // fluxcd/pkg's words: "<object> query failed: <the server's message>".
            Verdict::ReadFailed(error) => {
                outcome.survivors.push(reference.clone());
                outcome.errors.push(format!(
                    "{reference} query failed: {}",
                    crate::report::api_message(&error)
                ));
                continue;
            }
            Verdict::DeleteFailed(error) => {
                outcome.survivors.push(reference.clone());
                outcome.errors.push(format!(
                    "{reference} delete failed: {}",
                    crate::report::api_message(&error)
                ));
                continue;
            }
        }
        outcome.settled.changes.push(Change {
            object: reference.clone(),
            action: Action::Deleted,
        });
    }
    outcome
}

/// Whether two inventory entries of a cluster-scoped kind name one object: the same group,
/// kind and name, whatever namespace each records. kustomize gives the custom resources of a
/// cluster-scoped kind the kustomization's namespace (it cannot know their scope), the API
/// server ignores it, and an inventory keyed as ssa keys skipped objects (Flux's: as built)
/// records such an object with it while an applied one is recorded without; deleting the
/// entry left behind would delete the object just applied or skipped.
fn same_cluster_scoped_object(a: &ObjectRef, b: &ObjectRef) -> bool {
    a.group() == b.group() && a.kind == b.kind && a.name == b.name
}

impl PruneOutcome {
    fn skip(&mut self, reference: &ObjectRef) {
        self.settled.changes.push(Change {
            object: reference.clone(),
            action: Action::Skipped,
        });
    }
}

enum Verdict {
    /// Deleted, being deleted, or gone already (fluxcd/pkg's DeleteAll counts that deleted).
    Deleted,
    /// No longer ours, or opted out of pruning.
    Skipped,
    ReadFailed(kube::Error),
    DeleteFailed(kube::Error),
}

/// Judges one stale object, from the watch's copy when there is one (then deleted only if
/// unchanged since) or as read now, and deletes it if it is still ours. An object changed
/// since the watch saw it (the precondition fails) is read and judged again, once.
async fn judge_and_delete(
    api: &kube::Api<kube::api::DynamicObject>,
    reference: &ObjectRef,
    owner: &Owner,
    watched: Seen,
) -> Verdict {
    let mut seen = watched;
    loop {
        let (live, precondition) = match seen {
            Seen::Present(metadata) => {
                let version = metadata
                    .pointer("/metadata/resourceVersion")
                    .and_then(|v| v.as_str())
                    .map(str::to_string);
                (metadata, version)
            }
            // Absent from a watch is no proof of absence (it may still be catching up).
            Seen::Unknown | Seen::Absent => match api.get_opt(&reference.name).await {
                Ok(Some(live)) => (serde_json::to_value(live).unwrap_or_default(), None),
                Ok(None) => return Verdict::Deleted,
                Err(error) => return Verdict::ReadFailed(error),
            },
        };
        match judge(&live, owner) {
            Judgement::Keep => return Verdict::Skipped,
            Judgement::AlreadyDeleting => return Verdict::Deleted,
            Judgement::Delete => {}
        }
        let mut params = DeleteParams::background();
        let judged_from_watch = precondition.is_some();
        params.preconditions = precondition.map(|version| Preconditions {
            resource_version: Some(version),
            uid: None,
        });
        return match api.delete(&reference.name, &params).await {
            Ok(_) => Verdict::Deleted,
            Err(kube::Error::Api(status)) if status.code == 404 => Verdict::Deleted,
            // Only a judgement from the watch is made again: a read one has no precondition.
            Err(kube::Error::Api(status)) if status.code == 409 && judged_from_watch => {
                seen = Seen::Unknown;
                continue;
            }
            Err(error) => Verdict::DeleteFailed(error),
        };
    }
}

/// Whether a stale object is deleted, as Flux's garbage collection judges it.
#[derive(Debug, PartialEq, Eq)]
enum Judgement {
    /// Not ours (the owner labels name another Kustomization), or opted out of pruning
    /// (`prune: disabled`, `reconcile: disabled`, `ssa: ignore`).
    Keep,
    /// Already being deleted: counted as deleted, not asked again.
    AlreadyDeleting,
    Delete,
}

fn judge(live: &serde_json::Value, owner: &Owner) -> Judgement {
    let opted_out =
        prune_disabled(live) || reconcile_disabled(live) || ssa_policy(live) == SsaPolicy::Ignore;
    if !owner.owns(live) || opted_out {
        Judgement::Keep
    } else if live.pointer("/metadata/deletionTimestamp").is_some() {
        Judgement::AlreadyDeleting
    } else {
        Judgement::Delete
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn object(labels: Value, annotations: Value, deleting: bool) -> Value {
        let mut object = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "labels": labels, "annotations": annotations}});
        if deleting {
            object["metadata"]["deletionTimestamp"] = json!("2026-11-26T00:00:00Z");
        }
        object
    }

    /// Flux's garbage collection (kustomize-controller's prune tests and docs): only objects
    /// labelled as this Kustomization's are deleted, and not those opted out.
    #[test]
    fn only_our_objects_that_did_not_opt_out_are_deleted() {
        let owner = Owner {
            name: "apps".into(),
            namespace: "flux-system".into(),
        };
        let ours = json!({"kustomize.toolkit.fluxcd.io/name": "apps",
            "kustomize.toolkit.fluxcd.io/namespace": "flux-system"});
        let theirs = json!({"kustomize.toolkit.fluxcd.io/name": "other",
            "kustomize.toolkit.fluxcd.io/namespace": "flux-system"});
        let rows = [
            (object(ours.clone(), json!({}), false), Judgement::Delete),
            (object(theirs, json!({}), false), Judgement::Keep),
            (object(json!({}), json!({}), false), Judgement::Keep),
            (
                object(
                    ours.clone(),
                    json!({"kustomize.toolkit.fluxcd.io/prune": "disabled"}),
                    false,
                ),
                Judgement::Keep,
            ),
            (
                object(
                    ours.clone(),
                    json!({"kustomize.toolkit.fluxcd.io/reconcile": "disabled"}),
                    false,
                ),
                Judgement::Keep,
            ),
            (
                object(
                    ours.clone(),
                    json!({"kustomize.toolkit.fluxcd.io/ssa": "Ignore"}),
                    false,
                ),
                Judgement::Keep,
            ),
            (
                object(
                    ours.clone(),
                    json!({"kustomize.toolkit.fluxcd.io/ssa": "Merge"}),
                    false,
                ),
                Judgement::Delete,
            ),
            (object(ours, json!({}), true), Judgement::AlreadyDeleting),
        ];
        for (live, want) in rows {
            assert_eq!(judge(&live, &owner), want, "{live}");
        }
    }

    /// One cluster-scoped object whatever namespace or version each entry records; another
    /// group, kind or name is another object.
    #[test]
    fn cluster_scoped_entries_name_one_object_by_group_kind_and_name() {
        let entry = |api_version: &str, kind: &str, namespace: &str, name: &str| ObjectRef {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
        };
        let applied = entry("example.com/v1", "Dial", "", "dial");
        let rows = [
            (entry("example.com/v1", "Dial", "apps", "dial"), true),
            (entry("example.com/v1beta1", "Dial", "apps", "dial"), true),
            (entry("other.com/v1", "Dial", "apps", "dial"), false),
            (entry("example.com/v1", "Knob", "apps", "dial"), false),
            (entry("example.com/v1", "Dial", "apps", "knob"), false),
        ];
        for (recorded, same) in rows {
            assert_eq!(
                same_cluster_scoped_object(&applied, &recorded),
                same,
                "{recorded}"
            );
        }
    }
}
