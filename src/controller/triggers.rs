//! What runs a Kustomization again: its own changes (generation, requests, deletion, a prune
//! confirmation, a drift mode), the Kustomizations a Ready one releases from waiting on it,
//! the ConfigMaps and Secrets it reads, and a source's new revision for those that have not
//! tried it; a request also cancels the health checks it makes stale. The decisions read
//! the objects and the stores the watches keep; the watch streams are narrowed here to the
//! events that matter (`touched`, `revision_changes`), and `run` wires them together.

use super::*;

/// What makes a Kustomization worth reconciling again: a new generation, a reconcile request,
/// or deletion; beyond Flux, a prune confirmation and a change of drift mode.
pub(super) fn trigger(object: &Kustomization) -> Option<u64> {
    let mut hasher = DefaultHasher::new();
    object.metadata.generation.hash(&mut hasher);
    let annotations = object.metadata.annotations.as_ref();
    for key in [REQUESTED_AT, prune_guard::CONFIRM, drift_mode::MODE] {
        annotations.and_then(|a| a.get(key)).hash(&mut hasher);
    }
    object
        .metadata
        .deletion_timestamp
        .is_some()
        .hash(&mut hasher);
    Some(hasher.finish())
}

/// The Kustomizations built from `source` that a new revision runs, as Flux's source watch
/// picks them: all but those Ready or Reconciling that last attempted that very revision (a
/// reconciliation under way, or a failure retrying on its own interval). One that applied
/// the revision but has since attempted another runs: a source rolled back to it.
pub(super) fn dependents(
    candidates: impl IntoIterator<Item = Arc<Kustomization>>,
    source: &DynamicObject,
    kind: &str,
) -> Vec<ObjectRef<Kustomization>> {
    let revision = source
        .data
        .pointer("/status/artifact/revision")
        .and_then(|r| r.as_str());
    let Some(revision) = revision else {
        return Vec::new();
    };
    let source_namespace = source.metadata.namespace.clone().unwrap_or_default();
    let source_name = source.metadata.name.clone().unwrap_or_default();
    candidates
        .into_iter()
        .filter(|k| {
            let namespace = k.metadata.namespace.clone().unwrap_or_default();
            let reference = SourceObject::of(&k.spec.source_ref, &namespace);
            let seen = k.status.as_ref().is_some_and(|s| {
                let holds = |type_: &str| {
                    s.conditions
                        .iter()
                        .any(|c| c.type_ == type_ && c.status == "True")
                };
                (holds(status::READY) || holds(status::RECONCILING))
                    && s.last_attempted_revision.as_deref() == Some(revision)
            });
            reference.kind.as_str() == kind
                && reference.namespace == source_namespace
                && reference.name == source_name
                && !seen
        })
        .map(|k| ObjectRef::from_obj(k.as_ref()))
        .collect()
}

/// Kustomizations in the same namespace that read a ConfigMap (or Secret) by name.
pub(super) fn referrers(
    store: &Store<Kustomization>,
    namespace: Option<&str>,
    name: Option<&str>,
    secret: bool,
) -> Vec<ObjectRef<Kustomization>> {
    let (Some(namespace), Some(name)) = (namespace, name) else {
        return Vec::new();
    };
    store
        .state()
        .into_iter()
        .filter(|k| k.metadata.namespace.as_deref() == Some(namespace))
        .filter(|k| reads_config(&k.spec, name, secret))
        .map(|k| ObjectRef::from_obj(k.as_ref()))
        .collect()
}

/// Whether a Kustomization reads the ConfigMap (or Secret) `name` of its namespace, as
/// Flux's indexes say: `substituteFrom`, the decryption Secret, the kubeConfig's Secret or
/// its ConfigMap (`configMapRef`).
pub(super) fn reads_config(spec: &crate::api::KustomizationSpec, name: &str, secret: bool) -> bool {
    let substitutes = spec
        .post_build
        .iter()
        .flat_map(|p| p.substitute_from.iter())
        .any(|r| r.name == name && matches!(r.kind, crate::api::SubstituteKind::Secret) == secret);
    let decryption = secret
        && spec
            .decryption
            .as_ref()
            .and_then(|d| d.secret_ref.as_ref())
            .is_some_and(|r| r.name == name);
    let kubeconfig = spec.kube_config.as_ref().is_some_and(|c| {
        if secret {
            c.secret_ref.as_ref().is_some_and(|r| r.name == name)
        } else {
            c.config_map_ref.as_ref().is_some_and(|r| r.name == name)
        }
    });
    substitutes || decryption || kubeconfig
}

/// With CancelHealthCheckOnNewRevision, as Flux's wrapped reconciler: any request a watch
/// makes for a Kustomization whose health checks run ends them, naming the object that
/// caused it (`Kind/namespace/name`). Nothing is computed while the gate is off.
pub(super) fn cancel_health_checks(
    context: &Context,
    requests: &[ObjectRef<Kustomization>],
    trigger: impl FnOnce() -> String,
) {
    if !context.options.cancel_health_on_new_revision {
        return;
    }
    let trigger = trigger();
    for request in requests {
        context
            .health_cancels
            .cancel(&KustomizationKey::of_ref(request), &trigger);
    }
}

pub(super) fn trigger_of(
    kind: &str,
    metadata: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> String {
    format!(
        "{kind}/{}/{}",
        metadata.namespace.as_deref().unwrap_or(""),
        metadata.name.as_deref().unwrap_or("")
    )
}

/// Requests handed to the runtime, entered in the shadow of its queue as they go.
pub(super) fn queued(
    queue: &work_queue::WorkQueue,
    requests: Vec<ObjectRef<Kustomization>>,
) -> Vec<ObjectRef<Kustomization>> {
    for request in &requests {
        queue.add(&KustomizationKey::of_ref(request));
    }
    requests
}

/// Beyond Flux, which polls every `--requeue-dependency`: when `changed` is Ready for its
/// generation, the Kustomizations waiting on it (Ready false with DependencyNotReady and
/// `dependsOn` naming it) run at once, so a chain converges in seconds. The poll stays as the
/// fallback.
/// `candidates` is called only when `changed` is Ready: the store's copy of every
/// Kustomization would otherwise be taken for every event of a fleet.
pub(super) fn released_dependents<C: IntoIterator<Item = Arc<Kustomization>>>(
    candidates: impl FnOnce() -> C,
    changed: &Kustomization,
) -> Vec<ObjectRef<Kustomization>> {
    let Some(status) = changed.status.as_ref() else {
        return Vec::new();
    };
    let ready = status::get(status, status::READY).is_some_and(|c| c.status == "True");
    if !ready
        || changed
            .metadata
            .generation
            .is_some_and(|g| g != status.observed_generation)
    {
        return Vec::new();
    }
    let name = changed.metadata.name.as_deref().unwrap_or("");
    let namespace = changed.metadata.namespace.as_deref().unwrap_or("");
    candidates()
        .into_iter()
        .filter(|k| {
            let own_namespace = k.metadata.namespace.as_deref().unwrap_or("");
            let names_it = k.spec.depends_on.iter().any(|d| {
                d.name == name && d.namespace.as_deref().unwrap_or(own_namespace) == namespace
            });
            let waiting = k
                .status
                .as_ref()
                .and_then(|s| status::get(s, status::READY))
                .is_some_and(|c| c.reason == status::reason::DEPENDENCY_NOT_READY);
            names_it && waiting
        })
        .map(|k| ObjectRef::from_obj(k.as_ref()))
        .collect()
}

/// The objects a watch added, changed or deleted (a relist included), as trigger input.
pub(super) fn touched<K: Send + 'static>(
    events: impl futures::Stream<Item = watcher::Event<K>> + Send + 'static,
) -> impl futures::Stream<Item = Result<K, watcher::Error>> + Send + 'static {
    events.filter_map(|event| async move {
        match event {
            watcher::Event::Apply(object)
            | watcher::Event::InitApply(object)
            | watcher::Event::Delete(object) => Some(Ok(object)),
            watcher::Event::Init | watcher::Event::InitDone => None,
        }
    })
}

pub(super) fn artifact_revision(source: &DynamicObject) -> Option<&str> {
    source
        .data
        .pointer("/status/artifact/revision")
        .and_then(|r| r.as_str())
}

/// The sources whose artifact revision changed, as Flux's SourceRevisionChangePredicate:
/// status churn and relists of an unchanged source do not bypass retry intervals. A source
/// first seen in the watch's initial list is only remembered: the Kustomizations' own initial
/// list runs them all, and a second run of each right after would be waste. A relist after an
/// outage does pass on what changed meanwhile.
pub(super) fn revision_changes(
    events: impl futures::Stream<Item = watcher::Event<DynamicObject>> + Send + 'static,
) -> impl futures::Stream<Item = Result<DynamicObject, watcher::Error>> + Send + 'static {
    let mut seen: std::collections::HashMap<(String, String), String> = Default::default();
    let key_of = |object: &DynamicObject| {
        (
            object.metadata.namespace.clone().unwrap_or_default(),
            object.metadata.name.clone().unwrap_or_default(),
        )
    };
    events.filter_map(move |event| {
        let (object, initial) = match event {
            watcher::Event::Apply(object) => (Some(object), false),
            watcher::Event::InitApply(object) => (Some(object), true),
            watcher::Event::Delete(object) => {
                // Re-created, it is new again.
                seen.remove(&key_of(&object));
                (None, false)
            }
            watcher::Event::Init | watcher::Event::InitDone => (None, false),
        };
        let changed = object.filter(|object| {
            let key = key_of(object);
            let revision = artifact_revision(object).unwrap_or("").to_string();
            match seen.insert(key, revision.clone()) {
                Some(previous) => previous != revision,
                None => !initial,
            }
        });
        futures::future::ready(changed.map(Ok))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn kustomization(
        name: &str,
        depends_on: &[&str],
        ready: Option<(&str, &str)>,
    ) -> Kustomization {
        let mut object = json!({
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": name, "namespace": "apps", "generation": 2},
            "spec": {"interval": "5m", "prune": true,
                "sourceRef": {"kind": "GitRepository", "name": "repo"},
                "dependsOn": depends_on.iter().map(|d| json!({"name": d})).collect::<Vec<_>>()},
        });
        if let Some((state, reason)) = ready {
            object["status"] = json!({"observedGeneration": 2, "conditions": [{
                "type": "Ready", "status": state, "reason": reason, "message": "",
                "lastTransitionTime": "2026-11-24T00:00:00Z"}]});
        }
        serde_json::from_value(object).unwrap()
    }

    #[test]
    fn a_new_source_revision_runs_only_kustomizations_that_have_not_tried_it() {
        let with_revisions = |name: &str,
                              applied: Option<&str>,
                              attempted: Option<&str>,
                              conditions: &[(&str, &str)]| {
            let mut object = kustomization(name, &[], None);
            let status = object.status.get_or_insert_with(Default::default);
            status.last_applied_revision = applied.map(str::to_string);
            status.last_attempted_revision = attempted.map(str::to_string);
            for (type_, state) in conditions {
                status::set(status, type_, state, "Some", "", Some(2));
            }
            Arc::new(object)
        };
        let (one, two) = (Some("main@sha1:1"), Some("main@sha1:2"));
        let ready = [("Ready", "True")];
        let retrying = [("Reconciling", "True"), ("Ready", "False")];
        let candidates = vec![
            with_revisions("fresh", None, None, &[]),
            with_revisions("behind", one, one, &ready),
            with_revisions("applied", two, two, &ready),
            with_revisions("trying", one, two, &[("Reconciling", "True")]),
            with_revisions("retrying", one, two, &retrying),
            with_revisions("failed", one, two, &[("Ready", "False")]),
        ];
        let source: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
            "metadata": {"name": "repo", "namespace": "apps"},
            "status": {"artifact": {"revision": "main@sha1:2"}},
        }))
        .unwrap();
        let names: Vec<String> = dependents(candidates.clone(), &source, "GitRepository")
            .into_iter()
            .map(|r| r.name)
            .collect();
        assert_eq!(names, ["fresh", "behind", "failed"]);
        assert!(dependents(candidates.clone(), &source, "OCIRepository").is_empty());
        // The source rolled back to what they applied: those that tried 2 run again.
        let mut rolled_back = source.clone();
        rolled_back.data["status"]["artifact"]["revision"] = json!("main@sha1:1");
        let names: Vec<String> = dependents(candidates, &rolled_back, "GitRepository")
            .into_iter()
            .map(|r| r.name)
            .collect();
        assert_eq!(names, ["fresh", "applied", "trying", "retrying", "failed"]);
    }

    #[test]
    fn a_kustomization_reads_the_configs_flux_indexes_it_by() {
        let spec: crate::api::KustomizationSpec = serde_json::from_value(json!({
            "interval": "5m", "prune": true,
            "sourceRef": {"kind": "GitRepository", "name": "repo"},
            "postBuild": {"substituteFrom": [
                {"kind": "ConfigMap", "name": "vars"}, {"kind": "Secret", "name": "secret-vars"}]},
            "decryption": {"provider": "sops", "secretRef": {"name": "keys"}},
            "kubeConfig": {"configMapRef": {"name": "cluster"}, "secretRef": {"name": "kubeconfig"}},
        }))
        .unwrap();
        for (name, secret, expected) in [
            ("vars", false, true),
            ("vars", true, false),
            ("secret-vars", true, true),
            ("secret-vars", false, false),
            ("keys", true, true),
            ("keys", false, false),
            ("cluster", false, true),
            ("cluster", true, false),
            ("kubeconfig", true, true),
            ("kubeconfig", false, false),
            ("other", false, false),
        ] {
            assert_eq!(
                reads_config(&spec, name, secret),
                expected,
                "{name} {secret}"
            );
        }
    }

    #[test]
    fn a_ready_kustomization_releases_only_those_waiting_on_it() {
        let waiting = Some(("False", status::reason::DEPENDENCY_NOT_READY));
        let candidates: Vec<Arc<Kustomization>> = [
            kustomization("web", &["infra"], waiting),
            kustomization("db", &["infra"], Some(("True", status::reason::SUCCEEDED))),
            kustomization("cache", &["other"], waiting),
            kustomization(
                "queue",
                &["infra"],
                Some(("False", status::reason::BUILD_FAILED)),
            ),
        ]
        .into_iter()
        .map(Arc::new)
        .collect();
        let names = |refs: Vec<ObjectRef<Kustomization>>| -> Vec<String> {
            refs.into_iter().map(|r| r.name).collect()
        };
        let infra = kustomization("infra", &[], Some(("True", status::reason::SUCCEEDED)));
        assert_eq!(
            names(released_dependents(|| candidates.clone(), &infra)),
            ["web"]
        );
        let failing = kustomization("infra", &[], Some(("False", status::reason::BUILD_FAILED)));
        assert!(released_dependents(|| candidates.clone(), &failing).is_empty());
        let mut stale = infra.clone();
        stale.metadata.generation = Some(3);
        assert!(
            released_dependents(|| candidates, &stale).is_empty(),
            "not ready for its current generation"
        );
    }
}
