//! The server-side apply engine: built objects in, a change set out, with Flux's semantics.
//!
//! [`Applier::apply_all`] prepares every object (`normalize`), splits them into stages
//! (`order`), and handles each stage in two passes, as fluxcd/pkg/ssa's `ApplyAll` does.
//! Validation reads the live objects (a new one is told by its dry-run instead), honours the
//! `ssa`/`reconcile`/`force` policies found on the built or the live object, and dry-runs the
//! apply server-side; an object whose result
//! differs from what is live (or whose fields other tools took, `drift`) needs a write. Only
//! when the whole stage validated are the writes made (up to `--concurrent-ssa` at once), so
//! one invalid object applies nothing of its stage. After the definition and class stages it
//! waits until CRDs are established and namespaces active. Beyond Flux, an object whose
//! applied digest and live resourceVersion are unchanged since our last apply (or a plan
//! that found it unchanged) is not even dry-run (`AppliedCache`). [`Applier::plan`] validates the same way and writes nothing:
//! `diff` shows what an apply would do. Object identities, change sets, policies and
//! discovery come from [`crate::objects`].

mod cache;
mod decide;
mod drift;
mod error;
mod normalize;
mod order;
mod ownership;
mod sanitize;
mod stage;
mod undeclared;
mod write;

pub use cache::AppliedCache;
pub use error::ApplyError;
use error::{api_error_parts, is_immutable};
use stage::{Prefetched, Watched};

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use kube::api::{Api, DynamicObject, PatchParams};
use serde_json::Value;
use sha2::{Digest, Sha256};

pub use drift::{
    IgnoreRuleError, IgnoreRules, comparable, drifted, remove_pointer, set_pointer, takeover_patch,
};
pub use normalize::prepare;
pub use order::{Stage, stage_of};
pub use sanitize::{is_secret, mask_secret_data};

use crate::api::CommonMetadata;
use crate::objects::{
    Action, Change, ChangeSet, KindCache, KindError, NAME_LABEL, NAMESPACE_LABEL, ObjectRef,
    OwnedObjects, Owner, Served,
};

/// Engine-wide settings (flags and the Kustomization's `spec.force`).
#[derive(Clone, Debug)]
pub struct ApplyOptions {
    pub field_manager: String,
    pub force: bool,
    pub concurrency: usize,
    pub custom_stage_kinds: Vec<String>,
    pub override_managers: Vec<String>,
    /// The MigrateAPIVersion gate: live objects' managed fields are moved to the applied
    /// apiVersion before the dry-run.
    pub migrate_api_version: bool,
    /// How long to wait for CRDs, namespaces and recreated objects.
    pub wait_timeout: Duration,
    pub poll_interval: Duration,
}

impl Default for ApplyOptions {
    fn default() -> ApplyOptions {
        ApplyOptions {
            field_manager: "kustomize-controller".into(),
            force: false,
            concurrency: 4,
            custom_stage_kinds: Vec::new(),
            override_managers: Vec::new(),
            migrate_api_version: false,
            wait_timeout: Duration::from_secs(60),
            poll_interval: Duration::from_millis(500),
        }
    }
}

/// Whether objects are applied or only planned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Apply,
    Plan,
}

/// One object as [`Applier::plan`] finds it: the change an apply would make and, for a live
/// object that would change, both sides as compared.
#[derive(Clone, Debug, PartialEq)]
pub struct Planned {
    pub change: Change,
    pub drift: Option<Drift>,
}

impl Planned {
    fn new(object: ObjectRef, action: Action) -> Planned {
        Planned {
            change: Change { object, action },
            drift: None,
        }
    }
}

/// A live object and what the server would make of it after our apply (server-side dry-run),
/// without status, server bookkeeping or ignored fields.
#[derive(Clone, Debug, PartialEq)]
pub struct Drift {
    pub live: Value,
    pub applied: Value,
}

/// Applies objects for one owner (Kustomization).
pub struct Applier {
    client: kube::Client,
    options: ApplyOptions,
    owner: Owner,
    common_metadata: Option<CommonMetadata>,
    ignore: IgnoreRules,
    cache: AppliedCache,
    served: KindCache,
    /// What this cluster's watches tell of owned objects (local cluster only).
    owned: Option<OwnedObjects>,
    /// A requested reconciliation: objects taken as unmoved are vouched for to the watches.
    requested: bool,
    /// Fields built-in kinds do not declare, dropped as Flux drops them: `Kind/ns/name: path`.
    dropped: Mutex<Vec<String>>,
}

pub(super) fn digest(object: &Value) -> String {
    hex::encode(Sha256::digest(
        serde_json::to_vec(object).unwrap_or_default(),
    ))
}

impl Applier {
    pub fn new(
        client: kube::Client,
        options: ApplyOptions,
        owner: Owner,
        common_metadata: Option<CommonMetadata>,
        ignore: IgnoreRules,
        cache: AppliedCache,
    ) -> Applier {
        Applier {
            client,
            options,
            owner,
            common_metadata,
            ignore,
            cache,
            served: KindCache::default(),
            owned: None,
            requested: false,
            dropped: Mutex::default(),
        }
    }

    /// The fields the last applies dropped because their built-in kind does not declare them
    /// (`Kind/namespace/name: path`), as Flux's normalization drops them.
    pub fn take_dropped_fields(&self) -> Vec<String> {
        std::mem::take(&mut *self.dropped.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Asks the owned-object watches whether an object moved before reading it.
    pub fn with_owned_objects(mut self, owned: OwnedObjects) -> Applier {
        self.owned = Some(owned);
        self
    }

    /// For a requested reconciliation (`flux reconcile`): an object taken as unmoved from the
    /// watches whose change they deliver shortly after (it may predate the request) runs the
    /// owner again, so an edit made just before the request is reverted without reading every
    /// object now.
    pub fn requested(mut self) -> Applier {
        self.requested = true;
        self
    }

    /// Shares discovery results with other appliers.
    pub fn with_kind_cache(mut self, cache: KindCache) -> Applier {
        self.served = cache;
        self
    }

    /// Normalizes, stamps and applies every object, stage by stage.
    pub async fn apply_all(&self, objects: Vec<Value>) -> Result<ChangeSet, ApplyError> {
        let (change_set, error) = self.apply_all_partial(objects).await;
        match error {
            Some(error) => Err(error),
            None => Ok(change_set),
        }
    }

    /// Like [`Applier::apply_all`], but on failure also returns what was applied before it
    /// (so the caller can keep those objects in the inventory).
    pub async fn apply_all_partial(&self, objects: Vec<Value>) -> (ChangeSet, Option<ApplyError>) {
        let (planned, error) = self.run(objects, Mode::Apply).await;
        let changes = planned.into_iter().map(|p| p.change).collect();
        (ChangeSet { changes }, error)
    }

    /// What [`Applier::apply_all`] would do, decided the same way (policies, ignore rules,
    /// server-side dry-run) but writing nothing: no apply, no managed-fields takeover, no
    /// recreation, no waiting for definitions. Kinds the cluster does not serve yet (their
    /// CRD comes with these objects) count as created.
    pub async fn plan(&self, objects: Vec<Value>) -> Result<Vec<Planned>, ApplyError> {
        match self.run(objects, Mode::Plan).await {
            (planned, None) => Ok(planned),
            (_, Some(error)) => Err(error),
        }
    }

    async fn run(&self, objects: Vec<Value>, mode: Mode) -> (Vec<Planned>, Option<ApplyError>) {
        let mut prepared = Vec::with_capacity(objects.len());
        for mut object in objects {
            prepare(&mut object, &self.owner, self.common_metadata.as_ref());
            prepared.push(object);
        }
        let mut done: Vec<Planned> = Vec::new();
        for (stage, list) in order::stages(prepared, &self.options.custom_stage_kinds) {
            let mut watched = Vec::with_capacity(list.len());
            for object in &list {
                watched.push(self.watched(object).await);
            }
            let mut prefetched = self.prefetch(&list, &watched).await;
            let work: Vec<(usize, Value, Prefetched)> = list
                .into_iter()
                .zip(watched)
                .enumerate()
                .map(|(index, (object, watched))| {
                    if let Watched::Unmoved(reference) = watched {
                        return (index, object, Prefetched::Unmoved(reference));
                    }
                    let mut reference = ObjectRef::of(&object);
                    let mut live = prefetched.remove(&reference);
                    if live.is_none() {
                        // Cluster-scoped objects are keyed without a namespace.
                        reference.namespace.clear();
                        live = prefetched.remove(&reference);
                    }
                    (
                        index,
                        object,
                        live.map_or(Prefetched::Unread, Prefetched::Live),
                    )
                })
                .collect();
            // As fluxcd/pkg/ssa's ApplyAll: the whole stage is validated (server-side
            // dry-run) before any object of it is written, so one invalid object applies
            // nothing of its stage.
            let (decided, errors) = self.validate_stage(work, mode).await;
            if let Some(error) = ApplyError::of_all(errors) {
                return (done, Some(error));
            }
            let (written, errors) = self.write_stage(decided).await;
            // CRDs and Namespaces this stage created or changed are waited for.
            let fresh: Vec<ObjectRef> = written
                .iter()
                .map(|planned| &planned.change)
                .filter(|change| {
                    matches!(
                        change.object.kind.as_str(),
                        "CustomResourceDefinition" | "Namespace"
                    ) && matches!(change.action, Action::Created | Action::Configured)
                })
                .map(|change| change.object.clone())
                .collect();
            done.extend(written);
            if let Some(error) = ApplyError::of_all(errors) {
                return (done, Some(error));
            }
            if mode == Mode::Apply
                && matches!(stage, Stage::Definitions | Stage::Classes)
                && !fresh.is_empty()
                && let Err(error) = self.wait_for_definitions(fresh).await
            {
                return (done, Some(error));
            }
        }
        (done, None)
    }

    /// The API of an object's kind, found through discovery once per kind.
    async fn served(&self, object: &ObjectRef) -> Result<Served, ApplyError> {
        self.served
            .served(&self.client, object)
            .await
            .map_err(|error| match error {
                KindError::NotServed => ApplyError::UnknownKind {
                    subject: object.to_string(),
                    api_version: object.api_version.clone(),
                    kind: object.kind.clone(),
                },
                KindError::Api(other) => ApplyError::Apply {
                    subject: object.to_string(),
                    message: format!(
                        "discovering {} {}: {other}",
                        object.api_version, object.kind
                    ),
                },
            })
    }

    /// The dynamic API for an object, fixing up its namespace by scope.
    async fn api_for(
        &self,
        object: &mut Value,
    ) -> Result<(Api<DynamicObject>, ObjectRef), ApplyError> {
        let reference = ObjectRef::of(object);
        if reference.name.is_empty() {
            return Err(ApplyError::Invalid {
                subject: reference.to_string(),
                message: "metadata.name is missing".into(),
            });
        }
        let served = self.served(&reference).await?;
        if served.namespaced {
            if reference.namespace.is_empty() {
                return Err(ApplyError::Invalid {
                    subject: reference.to_string(),
                    message: "namespace not specified for a namespaced kind (set it in the manifests or spec.targetNamespace)".into(),
                });
            }
            let api =
                Api::namespaced_with(self.client.clone(), &reference.namespace, &served.resource);
            Ok((api, reference))
        } else {
            if let Some(metadata) = object["metadata"].as_object_mut() {
                metadata.remove("namespace");
            }
            Ok((
                Api::all_with(self.client.clone(), &served.resource),
                ObjectRef::of(object),
            ))
        }
    }

    fn params(&self) -> PatchParams {
        apply_params(&self.options.field_manager)
    }

    /// Live objects of a stage that already carry our owner labels, read with one LIST per
    /// kind and namespace instead of one GET per object. Objects not found here (new, or not
    /// yet labelled by us) are read individually; objects the watches show unmoved need no
    /// read, and those absent from them are probably new (their dry-run tells).
    async fn prefetch(&self, objects: &[Value], watched: &[Watched]) -> HashMap<ObjectRef, Value> {
        let mut groups: HashMap<(String, String, String), usize> = HashMap::new();
        for (object, _) in objects
            .iter()
            .zip(watched)
            .filter(|(_, watched)| **watched == Watched::Unsure)
        {
            let reference = ObjectRef::of(object);
            *groups
                .entry((reference.api_version, reference.kind, reference.namespace))
                .or_default() += 1;
        }
        let selector = format!(
            "{NAME_LABEL}={},{NAMESPACE_LABEL}={}",
            self.owner.name, self.owner.namespace
        );
        let mut live = HashMap::new();
        for ((api_version, kind, namespace), count) in groups {
            // A single object is as cheap to GET as to LIST.
            if count < 2 {
                continue;
            }
            let probe = ObjectRef {
                api_version: api_version.clone(),
                kind: kind.clone(),
                namespace: namespace.clone(),
                name: String::new(),
            };
            let Ok(served) = self.served(&probe).await else {
                continue;
            };
            let api: Api<DynamicObject> = if served.namespaced {
                if namespace.is_empty() {
                    continue;
                }
                Api::namespaced_with(self.client.clone(), &namespace, &served.resource)
            } else {
                Api::all_with(self.client.clone(), &served.resource)
            };
            let Ok(list) = api
                .list(&kube::api::ListParams::default().labels(&selector))
                .await
            else {
                continue;
            };
            for item in list.items {
                let mut value = serde_json::to_value(&item).unwrap_or_default();
                // List items may lack apiVersion and kind; the group's are theirs.
                value["apiVersion"] = Value::String(api_version.clone());
                value["kind"] = Value::String(kind.clone());
                let reference = ObjectRef {
                    api_version: api_version.clone(),
                    kind: kind.clone(),
                    namespace: if served.namespaced {
                        namespace.clone()
                    } else {
                        String::new()
                    },
                    name: item.metadata.name.clone().unwrap_or_default(),
                };
                live.insert(reference, value);
            }
        }
        live
    }

    /// Waits until the CRDs among `objects` are established and their namespaces active.
    async fn wait_for_definitions(&self, objects: Vec<ObjectRef>) -> Result<(), ApplyError> {
        let deadline = tokio::time::Instant::now() + self.options.wait_timeout;
        let new_kinds = objects.iter().any(|o| o.kind == "CustomResourceDefinition");
        let mut established = Vec::new();
        let mut pending = objects;
        loop {
            let mut still = Vec::new();
            for reference in pending {
                let mut probe = serde_json::json!({
                    "apiVersion": reference.api_version, "kind": reference.kind,
                    "metadata": {"name": reference.name},
                });
                let (api, reference) = self.api_for(&mut probe).await?;
                let ready = match api.get_opt(&reference.name).await {
                    Ok(Some(live)) => {
                        let live = serde_json::to_value(&live).unwrap_or_default();
                        self.cache
                            .settled(&reference, &live, &self.options.field_manager);
                        if reference.kind == "Namespace" {
                            live.pointer("/status/phase").and_then(Value::as_str) == Some("Active")
                        } else {
                            let ready = live
                                .pointer("/status/conditions")
                                .and_then(Value::as_array)
                                .is_some_and(|c| {
                                    c.iter().any(|c| {
                                        c["type"] == "Established" && c["status"] == "True"
                                    })
                                });
                            if ready {
                                established.push(live);
                            }
                            ready
                        }
                    }
                    _ => false,
                };
                if !ready {
                    still.push(reference);
                }
            }
            if still.is_empty() {
                // Kinds of new or changed CRDs are taken from the CRDs themselves (discovery
                // lags them), every other kind is discovered afresh.
                if new_kinds {
                    self.served.clear();
                    for crd in &established {
                        self.served.learn_from_crd(crd);
                    }
                }
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(ApplyError::WaitTimeout(
                    still
                        .iter()
                        .map(|r| format!("{r} status: 'InProgress'"))
                        .collect(),
                ));
            }
            pending = still;
            tokio::time::sleep(self.options.poll_interval).await;
        }
    }
}

/// The parameters of every server-side apply and its dry-run: forced, under our manager, as
/// Flux's. `fieldValidation=Ignore`, because for an apply the only thing the server's default
/// (Warn) adds is a second, strict parse of the body through YAML to find duplicate keys, and
/// a body serialized from a JSON map has none. Unknown fields are refused whatever the
/// directive: the apply's typed conversion fails on them (`field not declared in schema`).
/// Skipping that parse saved about a tenth of what an apply or its dry-run costs
/// kube-apiserver in `make bench-server-cost` (README, "Per first apply").
fn apply_params(field_manager: &str) -> PatchParams {
    PatchParams::apply(field_manager)
        .force()
        .validation_ignore()
}

#[cfg(test)]
mod tests {
    #[test]
    fn applies_and_dry_runs_are_forced_and_skip_the_strict_reread() {
        let apply = super::apply_params("kustomize-controller");
        assert_eq!(apply.field_manager.as_deref(), Some("kustomize-controller"));
        assert!(apply.force && !apply.dry_run);
        assert!(matches!(
            apply.field_validation,
            Some(kube::api::ValidationDirective::Ignore)
        ));
        let dry_run = apply.dry_run();
        assert!(dry_run.dry_run && dry_run.force);
        assert!(matches!(
            dry_run.field_validation,
            Some(kube::api::ValidationDirective::Ignore)
        ));
    }

    use super::*;
    use serde_json::json;

    #[test]
    fn change_sets_print_as_flux_does() {
        let set = ChangeSet {
            changes: vec![
                Change {
                    object: ObjectRef::of(
                        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns"}}),
                    ),
                    action: Action::Configured,
                },
                Change {
                    object: ObjectRef::of(
                        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}}),
                    ),
                    action: Action::Unchanged,
                },
                Change {
                    object: ObjectRef::of(
                        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r"}}),
                    ),
                    action: Action::Created,
                },
            ],
        };
        assert_eq!(
            set.summary(),
            "ConfigMap/ns/a configured\nClusterRole/r created"
        );
        assert_eq!(set.count(Action::Unchanged), 1);
        // Flux's HasChanged leaves skipped objects out of an apply's summary too; a prune
        // lists every entry.
        let mut with_skipped = set.clone();
        with_skipped.changes.push(Change {
            object: ObjectRef::of(
                &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "ns"}}),
            ),
            action: Action::Skipped,
        });
        assert_eq!(with_skipped.summary(), set.summary());
        assert!(
            with_skipped
                .listing()
                .ends_with("ClusterRole/r created\nSecret/ns/s skipped")
        );
        assert_eq!(with_skipped.listing().lines().count(), 4);
    }
}
