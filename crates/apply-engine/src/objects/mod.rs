//! The vocabulary every cluster-facing stage shares: which object ([`ObjectRef`]), what
//! happened to it ([`Change`], [`ChangeSet`]), who owns it and which per-object policies it
//! asks for ([`Owner`], the `kustomize.toolkit.fluxcd.io/*` annotations), in which order kinds
//! are applied and pruned ([`kind_rank`]), and how the cluster serves each kind
//! ([`KindCache`]). `apply` produces change sets, `inventory` turns them into entries and
//! prunes, `health` reads the objects they name; none of them reaches into another's
//! internals, they meet here.

mod kinds;
mod owned;
mod policy;

use std::fmt;

use serde_json::Value;

pub use kinds::{KindCache, KindError, Served};
pub use owned::{FOLLOW_UP_WINDOW, OwnedObjects, Owning, Seen, WatchReporter};
pub use policy::{
    FORCE_ANNOTATION, NAME_LABEL, NAMESPACE_LABEL, Owner, PRUNE_ANNOTATION, RECONCILE_ANNOTATION,
    SSA_ANNOTATION, SsaPolicy, force_enabled, prune_disabled, reconcile_disabled, ssa_policy,
};

/// What happened to one object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    Created,
    Configured,
    Unchanged,
    Deleted,
    Skipped,
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Action::Created => "created",
            Action::Configured => "configured",
            Action::Unchanged => "unchanged",
            Action::Deleted => "deleted",
            Action::Skipped => "skipped",
        })
    }
}

/// An object's identity as the change set and inventory need it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectRef {
    pub api_version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

impl ObjectRef {
    pub fn of(object: &Value) -> ObjectRef {
        let text = |p: &str| {
            object
                .pointer(p)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        ObjectRef {
            api_version: text("/apiVersion"),
            kind: text("/kind"),
            namespace: text("/metadata/namespace"),
            name: text("/metadata/name"),
        }
    }

    pub fn group(&self) -> &str {
        api_group(&self.api_version)
    }

    pub fn version(&self) -> &str {
        self.api_version
            .split_once('/')
            .map(|(_, v)| v)
            .unwrap_or(&self.api_version)
    }
}

/// The API group of an apiVersion: `apps/v1` → `apps`, `v1` → the core group `""`.
pub fn api_group(api_version: &str) -> &str {
    api_version.split_once('/').map_or("", |(group, _)| group)
}

/// `Kind/namespace/name` (or `Kind/name`), as Flux names objects in messages.
impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{}/{}", self.kind, self.name)
        } else {
            write!(f, "{}/{}/{}", self.kind, self.namespace, self.name)
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub object: ObjectRef,
    pub action: Action,
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.object, self.action)
    }
}

/// The outcome of applying a set of objects, in apply order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChangeSet {
    pub changes: Vec<Change>,
}

impl ChangeSet {
    /// The lines Flux puts into an apply's event and error: what changed, neither
    /// `unchanged` nor `skipped` (Flux's `HasChanged`).
    pub fn summary(&self) -> String {
        self.changes
            .iter()
            .filter(|c| !matches!(c.action, Action::Unchanged | Action::Skipped))
            .map(Change::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Every entry, a line each, as fluxcd/pkg's `ChangeSet.String()` writes it (a prune's
    /// event and log).
    pub fn listing(&self) -> String {
        self.changes
            .iter()
            .map(Change::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    }

    pub fn count(&self, action: Action) -> usize {
        self.changes.iter().filter(|c| c.action == action).count()
    }

    /// What Flux logs after an apply: each object with its action, or with the GroupChangeLog
    /// gate, each action with its objects.
    pub fn log_output(&self, grouped: bool) -> serde_json::Value {
        let mut output = serde_json::Map::new();
        for change in &self.changes {
            let subject = change.object.to_string();
            let action = change.action.to_string();
            if grouped {
                let list = output
                    .entry(action)
                    .or_insert_with(|| serde_json::Value::Array(Vec::new()));
                if let Some(list) = list.as_array_mut() {
                    list.push(serde_json::Value::String(subject));
                }
            } else {
                output.insert(subject, serde_json::Value::String(action));
            }
        }
        serde_json::Value::Object(output)
    }
}

/// fluxcd/pkg/ssa v0.76.1's `ReconcileOrder`: these kinds first, in this order; unknown
/// kinds come after them and before the webhooks.
const KIND_ORDER: &[&str] = &[
    "CustomResourceDefinition",
    "Namespace",
    "ClusterRole",
    "ClusterClass",
    "RuntimeClass",
    "PriorityClass",
    "StorageClass",
    "VolumeSnapshotClass",
    "IngressClass",
    "GatewayClass",
    "ClusterRoleBinding",
    "ResourceQuota",
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "ConfigMap",
    "Secret",
    "Service",
    "LimitRange",
    "Deployment",
    "StatefulSet",
    "CronJob",
    "PodDisruptionBudget",
];

const LAST: &[&str] = &[
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
];

/// ssa's order of objects (`SortableUnstructureds`): by kind rank, then group and kind, then
/// namespace and name, so that the order does not depend on the build's. Applied in this
/// order; pruned in the reverse.
pub fn apply_order<'a>(
    kind: &'a str,
    group: &'a str,
    namespace: &'a str,
    name: &'a str,
) -> (usize, &'a str, &'a str, &'a str, &'a str) {
    (kind_rank(kind), group, kind, namespace, name)
}

/// Flux's kind order: lower ranks are applied first (and pruned last).
pub fn kind_rank(kind: &str) -> usize {
    if let Some(i) = KIND_ORDER.iter().position(|k| *k == kind) {
        return i;
    }
    match LAST.iter().position(|k| *k == kind) {
        Some(i) => KIND_ORDER.len() + 1 + i,
        None => KIND_ORDER.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_apply_log_lists_objects_or_groups_them_by_action() {
        let change = |kind: &str, name: &str, action| Change {
            object: ObjectRef {
                api_version: "v1".into(),
                kind: kind.into(),
                namespace: "apps".into(),
                name: name.into(),
            },
            action,
        };
        let set = ChangeSet {
            changes: vec![
                change("ConfigMap", "a", Action::Created),
                change("ConfigMap", "b", Action::Unchanged),
                change("Secret", "c", Action::Created),
            ],
        };
        assert_eq!(
            set.log_output(false),
            serde_json::json!({"ConfigMap/apps/a": "created", "ConfigMap/apps/b": "unchanged",
                "Secret/apps/c": "created"})
        );
        assert_eq!(
            set.log_output(true),
            serde_json::json!({"created": ["ConfigMap/apps/a", "Secret/apps/c"],
                "unchanged": ["ConfigMap/apps/b"]})
        );
    }
}
