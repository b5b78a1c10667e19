//! The control plane's follow-up to writes, run after a delay as kube-controller-manager and
//! apiextensions' controllers run it after the write is answered: garbage collection,
//! namespace finalization and CRD cleanup (`Store::settle`), and a new CRD's establishment
//! (`NamesAccepted`, `Established`, from which on its kinds are served, as kube-apiserver's
//! CRD handler serves an established CRD) followed, one more delay later, by its kinds
//! appearing in discovery. The deployment controller owns a Deployment's status: after
//! every write to one it reports what a cluster without kubelets has (no Pod ever becomes
//! available: `replicas: 0` is available, anything more is progressing until its progress
//! deadline passes, then `ProgressDeadlineExceeded`), overwriting a status a client wrote.
//! Clients must poll for all of it, as on a real cluster. A zero delay (only where a test
//! sets it) does everything before the write is answered.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sha2::Digest;

use super::fieldset::Shape;
use super::managed::{self, Scope};
use super::schema::Schema;
use super::store::{EventType, Store};

/// How long after a write its follow-up runs, unless a test sets another delay.
pub const DEFAULT_DELAY: Duration = Duration::from_millis(100);

pub struct Control {
    pub delay: Duration,
    settle_due: Option<Instant>,
    crds: Vec<PendingCrd>,
    /// Deployments (namespace, name) the deployment controller syncs when due.
    deployments: Vec<(String, String, Instant)>,
    /// When each stuck Deployment's progress deadline passes (one entry per Deployment).
    deadlines: Vec<(String, String, Instant)>,
    /// Each Deployment's last template hash and revision, for its revision annotation.
    revisions: std::collections::HashMap<(String, String), (String, u64)>,
    /// New namespaces that get their ServiceAccount and root CA when due.
    namespaces: Vec<(String, Instant)>,
    /// The CA bundle `kube-root-ca.crt` publishes: the one clients trust.
    pub root_ca: String,
}

impl Default for Control {
    fn default() -> Control {
        Control {
            delay: DEFAULT_DELAY,
            settle_due: None,
            crds: Vec::new(),
            deployments: Vec::new(),
            deadlines: Vec::new(),
            revisions: Default::default(),
            namespaces: Vec::new(),
            root_ca: String::new(),
        }
    }
}

struct PendingCrd {
    name: String,
    due: Instant,
    step: CrdStep,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum CrdStep {
    Establish,
    Discover,
}

/// After a write: its follow-up is due one delay from now.
pub fn after_write(store: &mut Store) {
    if store.has_follow_up() && store.control.settle_due.is_none() {
        store.control.settle_due = Some(Instant::now() + store.control.delay);
    }
    if store.control.delay.is_zero() {
        run(store, Instant::now());
    }
}

/// After a CRD was stored: an established CRD's kinds change at once (a new version, a new
/// schema); a new one is established and served, then discovered, each after a delay.
pub fn crd_written(store: &mut Store, crd: &Value) {
    if is_established(crd) {
        store.register_crd(crd);
        return;
    }
    let name = crd
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if !store.control.crds.iter().any(|p| p.name == name) {
        let due = Instant::now() + store.control.delay;
        store.control.crds.push(PendingCrd {
            name,
            due,
            step: CrdStep::Establish,
        });
    }
}

/// After a client wrote a Deployment (spec or status): its controller syncs it.
pub fn deployment_written(store: &mut Store, namespace: &str, name: &str) {
    let due = Instant::now() + store.control.delay;
    let known = store
        .control
        .deployments
        .iter()
        .any(|(ns, n, _)| ns == namespace && n == name);
    if !known {
        store
            .control
            .deployments
            .push((namespace.to_string(), name.to_string(), due));
    }
}

/// After a namespace was created: the controllers that furnish every namespace run.
pub fn namespace_created(store: &mut Store, name: &str) {
    let due = Instant::now() + store.control.delay;
    store.control.namespaces.push((name.to_string(), due));
}

fn is_established(crd: &Value) -> bool {
    crd.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Established" && c["status"] == "True")
}

/// Runs whatever is due by `now`.
pub fn run(store: &mut Store, now: Instant) {
    loop {
        let mut progressed = false;
        if store.control.settle_due.is_some_and(|due| due <= now) {
            store.control.settle_due = None;
            store.settle();
            progressed = true;
        }
        let (due, later): (Vec<PendingCrd>, Vec<PendingCrd>) =
            std::mem::take(&mut store.control.crds)
                .into_iter()
                .partition(|p| p.due <= now);
        store.control.crds = later;
        for pending in due {
            progressed = true;
            let Some(crd) = store.crd(&pending.name) else {
                continue;
            };
            match pending.step {
                CrdStep::Establish => {
                    if establish(store, &crd) {
                        store.undiscovered.push(pending.name.clone());
                        let due = now + store.control.delay;
                        store.control.crds.push(PendingCrd {
                            due,
                            step: CrdStep::Discover,
                            ..pending
                        });
                    }
                }
                CrdStep::Discover => store.undiscovered.retain(|n| *n != pending.name),
            }
        }
        let mut due = take_due(&mut store.control.deployments, now);
        due.extend(take_due(&mut store.control.deadlines, now));
        for (namespace, name) in due {
            progressed = true;
            sync_deployment(store, &namespace, &name);
        }
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut store.control.namespaces)
            .into_iter()
            .partition(|(_, due)| *due <= now);
        store.control.namespaces = later;
        for (namespace, _) in due {
            progressed = true;
            furnish_namespace(store, &namespace);
        }
        if !progressed {
            return;
        }
    }
}

/// The Deployments (namespace, name) of `pending` due by `now`, taken off it.
fn take_due(pending: &mut Vec<(String, String, Instant)>, now: Instant) -> Vec<(String, String)> {
    let (due, later): (Vec<_>, Vec<_>) = std::mem::take(pending)
        .into_iter()
        .partition(|(_, _, due)| *due <= now);
    *pending = later;
    due.into_iter().map(|(ns, name, _)| (ns, name)).collect()
}

enum Deadline {
    Ahead,
    Passed,
}

/// Whether a Deployment whose Pods never become available has run out of
/// `spec.progressDeadlineSeconds` since its ReplicaSet last progressed (the Progressing
/// condition's `lastUpdateTime` while it names the same ReplicaSet, else now), as the
/// deployment controller judges it; before that, a sync is scheduled for when it passes, as
/// the controller requeues a stuck Deployment.
fn progress_deadline(
    store: &mut Store,
    namespace: &str,
    name: &str,
    live: &Value,
    replica_set: &str,
) -> Deadline {
    let seconds = live
        .pointer("/spec/progressDeadlineSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(600);
    let progressing = live
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Progressing");
    let same_replica_set = progressing.is_some_and(|c| {
        c["message"]
            .as_str()
            .is_some_and(|m| m.contains(&format!("\"{replica_set}\"")))
    });
    if same_replica_set && progressing.is_some_and(|c| c["reason"] == "ProgressDeadlineExceeded") {
        return Deadline::Passed;
    }
    let now = jiff::Timestamp::now();
    let since = progressing
        .filter(|_| same_replica_set)
        .and_then(|c| c["lastUpdateTime"].as_str())
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .unwrap_or(now);
    // A deadline past the end of time never comes.
    let Ok(deadline) = since.checked_add(jiff::SignedDuration::from_secs(seconds)) else {
        return Deadline::Ahead;
    };
    if deadline < now {
        return Deadline::Passed;
    }
    let left = std::time::Duration::try_from(deadline.duration_since(now)).unwrap_or_default();
    // Condition times have whole seconds: a second more makes sure the next sync finds it passed.
    let due = Instant::now() + left + Duration::from_secs(1);
    let deadlines = &mut store.control.deadlines;
    deadlines.retain(|(ns, n, _)| ns != namespace || n != name);
    deadlines.push((namespace.to_string(), name.to_string(), due));
    Deadline::Ahead
}

const REVISION_POINTER: &str = "/metadata/annotations/deployment.kubernetes.io~1revision";

/// The status kube-controller-manager's deployment controller reports when no Pod runs, and
/// the revision annotation it keeps on the Deployment.
fn sync_deployment(store: &mut Store, namespace: &str, name: &str) {
    let rt = store.builtin_type("apps", "deployments");
    let Some(live) = store.get(&rt, namespace, name).cloned() else {
        return;
    };
    if live.pointer("/metadata/deletionTimestamp").is_some() {
        return;
    }
    let replicas = live
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let template = live.pointer("/spec/template").cloned().unwrap_or_default();
    let digest = sha2::Sha256::digest(template.to_string().as_bytes());
    const SAFE: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let hash: String = digest
        .iter()
        .take(10)
        .map(|b| SAFE[*b as usize % SAFE.len()] as char)
        .collect();
    let replica_set = format!("{name}-{hash}");
    let condition = |kind: &str, status: &str, reason: &str, message: String| json!({"type": kind, "status": status, "reason": reason, "message": message});
    let mut status = if replicas == 0 {
        json!({"conditions": [
            condition("Available", "True", "MinimumReplicasAvailable",
                "Deployment has minimum availability.".into()),
            condition("Progressing", "True", "NewReplicaSetAvailable",
                format!("ReplicaSet \"{replica_set}\" has successfully progressed.")),
        ]})
    } else {
        let progressing = match progress_deadline(store, namespace, name, &live, &replica_set) {
            Deadline::Passed => condition(
                "Progressing",
                "False",
                "ProgressDeadlineExceeded",
                format!("ReplicaSet \"{replica_set}\" has timed out progressing."),
            ),
            Deadline::Ahead => condition(
                "Progressing",
                "True",
                "ReplicaSetUpdated",
                format!("ReplicaSet \"{replica_set}\" is progressing."),
            ),
        };
        json!({"replicas": replicas, "updatedReplicas": replicas,
            "unavailableReplicas": replicas, "conditions": [
            condition("Available", "False", "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.".into()),
            progressing,
        ]})
    };
    status["observedGeneration"] = live["metadata"]["generation"].clone();
    let without_times = |status: &Value| {
        let mut status = status.clone();
        for condition in status["conditions"].as_array_mut().into_iter().flatten() {
            if let Some(map) = condition.as_object_mut() {
                map.remove("lastTransitionTime");
                map.remove("lastUpdateTime");
            }
        }
        status
    };
    // A new template is a new ReplicaSet, and the next revision.
    let key = (namespace.to_string(), name.to_string());
    let revision = match store.control.revisions.get(&key) {
        Some((seen, revision)) if *seen == hash => *revision,
        Some((_, revision)) => revision + 1,
        None => 1,
    };
    store.control.revisions.insert(key, (hash, revision));
    let revision = revision.to_string();
    let current = live.get("status").cloned().unwrap_or_default();
    let annotated = live.pointer(REVISION_POINTER).and_then(Value::as_str) == Some(&revision);
    if annotated && without_times(&current) == status {
        return;
    }
    let now = managed::now();
    for condition in status["conditions"].as_array_mut().into_iter().flatten() {
        condition["lastTransitionTime"] = json!(now);
        condition["lastUpdateTime"] = json!(now);
    }
    let mut updated = live.clone();
    updated["status"] = status;
    // Written through /status, which keeps a Deployment's annotations (not its labels).
    updated["metadata"]["annotations"]["deployment.kubernetes.io/revision"] = json!(revision);
    managed::record_update(
        Some(&live),
        &mut updated,
        Shape::root(Schema::of(&rt)),
        "kube-controller-manager",
        "apps/v1",
        Scope::Status,
    );
    store.put(
        &rt,
        namespace,
        name,
        updated,
        EventType::Modified,
        Some(live),
    );
}

/// What kube-controller-manager puts in every active namespace: the `default` ServiceAccount
/// (the service-account controller writes no managed fields) and the root CA bundle.
pub fn furnish_namespace(store: &mut Store, namespace: &str) {
    let namespaces = store.builtin_type("", "namespaces");
    let active = store
        .get(&namespaces, "", namespace)
        .is_some_and(|ns| ns.pointer("/metadata/deletionTimestamp").is_none());
    if !active {
        return;
    }
    let service_accounts = store.builtin_type("", "serviceaccounts");
    if store.get(&service_accounts, namespace, "default").is_none() {
        let mut account = json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "default", "namespace": namespace}});
        store.stamp_new(&mut account);
        store.put(
            &service_accounts,
            namespace,
            "default",
            account,
            EventType::Added,
            None,
        );
    }
    let config_maps = store.builtin_type("", "configmaps");
    if store.get(&config_maps, namespace, ROOT_CA).is_none() {
        let mut bundle = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": ROOT_CA, "namespace": namespace,
                "annotations": {"kubernetes.io/description": ROOT_CA_DESCRIPTION}},
            "data": {"ca.crt": store.control.root_ca}});
        store.stamp_new(&mut bundle);
        managed::record_update(
            None,
            &mut bundle,
            Shape::root(Schema::of(&config_maps)),
            "kube-controller-manager",
            "v1",
            Scope::Whole,
        );
        store.put(
            &config_maps,
            namespace,
            ROOT_CA,
            bundle,
            EventType::Added,
            None,
        );
    }
}

const ROOT_CA: &str = "kube-root-ca.crt";
const ROOT_CA_DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the \
    kube-apiserver when using internal endpoints such as the internal service IP or \
    kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes \
    clusters.";

/// Accepts a CRD's names, establishes it and serves its kinds, as apiextensions'
/// controllers do; false for a CRD already being deleted.
fn establish(store: &mut Store, crd: &Value) -> bool {
    if crd.pointer("/metadata/deletionTimestamp").is_some() {
        return false;
    }
    let now = managed::now();
    let mut updated = crd.clone();
    updated["status"]["acceptedNames"] = crd.pointer("/spec/names").cloned().unwrap_or(json!({}));
    updated["status"]["conditions"] = json!([
        {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
         "message": "no conflicts found", "lastTransitionTime": now},
        {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
         "message": "the initial names have been accepted", "lastTransitionTime": now},
    ]);
    // kube-apiserver's own controllers write status as a manager of their own.
    let rt = store.crd_type();
    managed::record_update(
        Some(crd),
        &mut updated,
        Shape::root(Schema::of(&rt)),
        "kube-apiserver",
        "apiextensions.k8s.io/v1",
        Scope::Status,
    );
    let stored = store.put_crd(updated, EventType::Modified, crd.clone());
    store.register_crd(&stored);
    true
}
