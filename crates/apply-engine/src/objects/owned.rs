//! What this cluster holds of the objects Kustomizations applied, as metadata watches of
//! each kind (selected by the owner label) report it: resourceVersion, deletionTimestamp and
//! the policy annotations and labels, nothing else, so a fleet's worth costs little memory. The applier
//! asks it whether an object moved since its last apply instead of reading the object on
//! every reconcile; a kind whose watch has not listed yet (or may not be watched: a
//! restricted controller) is unknown, and the applier reads the object as before.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use crate::watch::WatchReporter;

use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::core::PartialObjectMeta;
use kube::runtime::watcher::{self, Event};
use serde_json::{Map, Value, json};

use super::policy::{
    FORCE_ANNOTATION, NAME_LABEL, NAMESPACE_LABEL, PRUNE_ANNOTATION, RECONCILE_ANNOTATION,
    SSA_ANNOTATION,
};
use super::{ObjectRef, Served};

/// The metadata keys policies read; everything else is dropped.
const KEPT: &[&str] = &[
    SSA_ANNOTATION,
    RECONCILE_ANNOTATION,
    FORCE_ANNOTATION,
    PRUNE_ANNOTATION,
    NAME_LABEL,
    NAMESPACE_LABEL,
];

/// One kind's objects: (namespace, name) → a metadata-only object.
#[derive(Default)]
struct Kind {
    listed: bool,
    objects: HashMap<(String, String), Kept>,
    /// Objects seen since the watch (re)started listing.
    relisting: Option<HashMap<(String, String), Kept>>,
}

/// What a metadata watch tells of an object.
#[derive(Debug, PartialEq)]
pub enum Seen {
    /// The kind's watch has not listed yet: ask the server.
    Unknown,
    /// Not among the watched objects. Not proof that the object does not exist: a watch
    /// that has listed may still be replaying what happened since, and an object without our
    /// label is not watched.
    Absent,
    /// The object's metadata (`resourceVersion`, the policy annotations and labels).
    Present(Value),
}

/// The owned objects of one cluster, watched with the controller's own client.
#[derive(Clone)]
pub struct OwnedObjects {
    client: kube::Client,
    state: Arc<Mutex<OwnedState>>,
    reporter: Arc<dyn WatchReporter>,
}

/// How the watches of owned objects name a kind: `ConfigMap (applied)`,
/// `Deployment.apps (applied)`.
fn watch_label(served: &Served) -> String {
    match served.resource.group.as_str() {
        "" => format!("{} (applied)", served.resource.kind),
        group => format!("{}.{group} (applied)", served.resource.kind),
    }
}

/// An object's place in the watches: kind (apiVersion, kind), namespace, name.
type Slot = ((String, String), String, String);

/// The owner (namespace, name) of objects a requested reconciliation took as unmoved.
pub type Owning = (String, String);

/// How long after a requested reconciliation a change the watches deliver to an object it
/// took as unmoved runs it again: the change may predate the request, and the watch was late.
pub const FOLLOW_UP_WINDOW: Duration = Duration::from_secs(10);

/// An object a requested reconciliation took as unmoved at `resource_version`.
struct Vouched {
    owner: Owning,
    resource_version: String,
    until: Instant,
}

/// Whether to keep the objects of the Kustomization (namespace, name): a controller keeps
/// only those of the Kustomizations it reconciles (a shard's own, those of its namespace).
pub type Keep = Arc<dyn Fn(&str, &str) -> bool + Send + Sync>;

#[derive(Default)]
struct OwnedState {
    /// Without it, every watched object is kept.
    keep: Option<Keep>,
    watched: HashSet<(String, String)>,
    kinds: HashMap<(String, String), Kind>,
    vouched: HashMap<Slot, Vouched>,
    follow_ups: Option<futures::channel::mpsc::UnboundedSender<Owning>>,
}

impl OwnedState {
    fn vouch(&mut self, slot: Slot, resource_version: &str, owner: Owning) {
        let now = Instant::now();
        if self.vouched.len() > 4096 {
            self.vouched.retain(|_, v| v.until > now);
        }
        let vouched = Vouched {
            owner,
            resource_version: resource_version.to_string(),
            until: now + FOLLOW_UP_WINDOW,
        };
        self.vouched.insert(slot.clone(), vouched);
        // A change (or deletion) that came between the caller's look and now counts as well.
        let Some(kind) = self.kinds.get(&slot.0) else {
            return;
        };
        let current = kind
            .objects
            .get(&(slot.1.clone(), slot.2.clone()))
            .map(|kept| kept.resource_version.clone());
        self.changed(&slot, current.as_deref());
    }

    /// A vouched-for object changed: its owner runs again, once.
    /// An object changed; `true` when that ran its owner again.
    fn changed(&mut self, slot: &Slot, resource_version: Option<&str>) -> bool {
        let Some(vouched) = self.vouched.get(slot) else {
            return false;
        };
        if resource_version == Some(vouched.resource_version.as_str()) {
            return false;
        }
        if let Some(vouched) = self.vouched.remove(slot)
            && vouched.until > Instant::now()
            && let Some(follow_ups) = &self.follow_ups
        {
            return follow_ups.unbounded_send(vouched.owner).is_ok();
        }
        false
    }
}

fn slot_of(object: &ObjectRef, served: &Served) -> Slot {
    (
        (
            served.resource.api_version.clone(),
            served.resource.kind.clone(),
        ),
        if served.namespaced {
            object.namespace.clone()
        } else {
            String::new()
        },
        object.name.clone(),
    )
}

fn key_of(object: &PartialObjectMeta<DynamicObject>) -> (String, String) {
    (
        object.metadata.namespace.clone().unwrap_or_default(),
        object.metadata.name.clone().unwrap_or_default(),
    )
}

/// The part of an object's metadata this cache keeps, compactly (a fleet has tens of
/// thousands of objects): its resourceVersion, deletionTimestamp and the policy metadata.
#[derive(Debug, Clone, PartialEq)]
struct Kept {
    resource_version: String,
    deletion_timestamp: Option<String>,
    /// The `KEPT` keys present, with their values, as annotations or labels.
    annotations: Vec<(&'static str, String)>,
    labels: Vec<(&'static str, String)>,
}

impl Kept {
    fn of(object: &PartialObjectMeta<DynamicObject>) -> Kept {
        let pick = |map: &Option<std::collections::BTreeMap<String, String>>| {
            KEPT.iter()
                .filter_map(|key| Some((*key, map.as_ref()?.get(*key)?.clone())))
                .collect::<Vec<_>>()
        };
        Kept {
            resource_version: object.metadata.resource_version.clone().unwrap_or_default(),
            deletion_timestamp: object
                .metadata
                .deletion_timestamp
                .as_ref()
                .and_then(|at| serde_json::to_value(at).ok())
                .and_then(|at| at.as_str().map(str::to_string)),
            annotations: pick(&object.metadata.annotations),
            labels: pick(&object.metadata.labels),
        }
    }

    /// As object metadata, for the policy readers.
    fn to_value(&self) -> Value {
        let map = |pairs: &[(&'static str, String)]| -> Map<String, Value> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_string(), json!(v)))
                .collect()
        };
        let mut value = json!({"metadata": {
            "resourceVersion": self.resource_version,
            "annotations": map(&self.annotations),
            "labels": map(&self.labels),
        }});
        if let Some(at) = &self.deletion_timestamp {
            value["metadata"]["deletionTimestamp"] = json!(at);
        }
        value
    }
}

impl OwnedObjects {
    pub fn new(client: kube::Client) -> OwnedObjects {
        OwnedObjects {
            client,
            state: Default::default(),
            reporter: Arc::new(Unreported),
        }
    }

    /// These watches report to `reporter` how they are doing.
    pub fn reporting_to(mut self, reporter: Arc<dyn WatchReporter>) -> OwnedObjects {
        self.reporter = reporter;
        self
    }

    /// From now on only the objects whose owner `keep` accepts are kept (the labels
    /// [`NAME_LABEL`] and [`NAMESPACE_LABEL`] name it); another owner's objects are
    /// [`Seen::Absent`], which only costs a dry-run or a read. A shard's watches see every
    /// shard's objects; without this each would hold them all.
    pub fn keep_only(&self, keep: Keep) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).keep = Some(keep);
    }

    /// Starts watching a kind's owned objects, once per kind; the watch lives as long as the
    /// runtime.
    pub fn watch(&self, served: &Served) {
        let id = (
            served.resource.api_version.clone(),
            served.resource.kind.clone(),
        );
        {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            if !state.watched.insert(id.clone()) {
                return;
            }
        }
        let config = watcher::Config::default().labels(NAME_LABEL);
        let resource = served.resource.clone();
        let label = watch_label(served);
        let start = move |client| {
            let api: Api<PartialObjectMeta<DynamicObject>> = Api::all_with(client, &resource);
            watcher::watcher(api, config.clone())
        };
        let reporter = self.reporter.clone();
        let events = crate::watch::watch(&self.client, &label, reporter.clone(), start);
        tokio::spawn(follow(events, id, self.state.clone(), reporter, label));
    }

    /// The owners to run again because an object they took as unmoved changed (see
    /// [`OwnedObjects::vouch`]); taken once, by the controller.
    pub fn follow_ups(&self) -> futures::channel::mpsc::UnboundedReceiver<Owning> {
        let (sender, receiver) = futures::channel::mpsc::unbounded();
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .follow_ups = Some(sender);
        receiver
    }

    /// A requested reconciliation of `owner` took `object` as unmoved at `resource_version`:
    /// a different version delivered within [`FOLLOW_UP_WINDOW`] runs `owner` again.
    pub fn vouch(
        &self,
        object: &ObjectRef,
        served: &Served,
        resource_version: &str,
        owner: Owning,
    ) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).vouch(
            slot_of(object, served),
            resource_version,
            owner,
        );
    }

    /// A reconciliation is about to read, write or delete `object` itself, so what it does
    /// supersedes an earlier vouching: its own change coming through the watch is no reason
    /// to run again.
    pub fn release(&self, object: &ObjectRef, served: &Served) {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .vouched
            .remove(&slot_of(object, served));
    }

    /// What the watches tell of `object`.
    pub fn seen(&self, object: &ObjectRef, served: &Served) -> Seen {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let id = (
            served.resource.api_version.clone(),
            served.resource.kind.clone(),
        );
        let Some(kind) = state.kinds.get(&id).filter(|k| k.listed) else {
            return Seen::Unknown;
        };
        let namespace = if served.namespaced {
            object.namespace.clone()
        } else {
            String::new()
        };
        match kind.objects.get(&(namespace, object.name.clone())) {
            Some(kept) => Seen::Present(kept.to_value()),
            None => Seen::Absent,
        }
    }
}

/// Follows one kind's watch into `state` until the runtime stops, reporting each change
/// it delivers once the state holds it, so that what the report says is decided.
async fn follow(
    events: impl futures::Stream<Item = Event<PartialObjectMeta<DynamicObject>>>,
    id: (String, String),
    state: Arc<Mutex<OwnedState>>,
    reporter: Arc<dyn WatchReporter>,
    label: String,
) {
    let mut events = std::pin::pin!(events);
    while let Some(event) = events.next().await {
        let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
        let delivered = match &event {
            Event::Apply(object) | Event::Delete(object) => {
                let (namespace, name) = key_of(object);
                let version = object.metadata.resource_version.clone();
                let followed_up = state.changed(&(id.clone(), namespace, name), version.as_deref());
                Some((version, followed_up))
            }
            _ => None,
        };
        let keep = state.keep.clone();
        apply(
            state.kinds.entry(id.clone()).or_default(),
            event,
            keep.as_ref(),
        );
        drop(state);
        if let Some((version, followed_up)) = delivered {
            reporter.delivered(&label, version.as_deref(), followed_up);
        }
    }
}

/// Where the watches of a cache that reports nowhere report.
struct Unreported;

impl WatchReporter for Unreported {
    fn started(&self, _: &str) {}
    fn listed(&self, _: &str) {}
    fn opened(&self, _: &str) {}
    fn heard(&self, _: &str) {}
    fn delivered(&self, _: &str, _: Option<&str>, _: bool) {}
    fn set_back(&self, _: &str, _: crate::watch::Setback, _: &dyn std::fmt::Display) {}
}

/// Whether `keep` accepts the owner the object's labels name.
fn kept_by(keep: Option<&Keep>, object: &PartialObjectMeta<DynamicObject>) -> bool {
    let Some(keep) = keep else {
        return true;
    };
    let label = |key: &str| {
        object
            .metadata
            .labels
            .as_ref()
            .and_then(|labels| labels.get(key))
            .map_or("", String::as_str)
    };
    keep(label(NAMESPACE_LABEL), label(NAME_LABEL))
}

fn apply(kind: &mut Kind, event: Event<PartialObjectMeta<DynamicObject>>, keep: Option<&Keep>) {
    match event {
        Event::Apply(object) if kept_by(keep, &object) => {
            kind.objects.insert(key_of(&object), Kept::of(&object));
        }
        // Another owner's now (its Kustomization moved to another shard): forgotten.
        Event::Apply(object) | Event::Delete(object) => {
            kind.objects.remove(&key_of(&object));
        }
        Event::Init => kind.relisting = Some(HashMap::new()),
        Event::InitApply(object) => {
            if let Some(relisting) = &mut kind.relisting
                && kept_by(keep, &object)
            {
                relisting.insert(key_of(&object), Kept::of(&object));
            }
        }
        Event::InitDone => {
            if let Some(relisted) = kind.relisting.take() {
                kind.objects = relisted;
            }
            kind.listed = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(name: &str, rv: &str) -> PartialObjectMeta<DynamicObject> {
        serde_json::from_value(json!({"apiVersion": "meta.k8s.io/v1",
            "kind": "PartialObjectMetadata", "metadata": {"name": name, "namespace": "apps",
            "resourceVersion": rv, "annotations": {SSA_ANNOTATION: "Merge", "other": "x"}}}))
        .unwrap()
    }

    #[test]
    fn a_change_to_a_vouched_for_object_runs_its_owner_again_once() {
        let mut state = OwnedState::default();
        let (sender, mut follow_ups) = futures::channel::mpsc::unbounded();
        state.follow_ups = Some(sender);
        let kind = ("v1".to_string(), "ConfigMap".to_string());
        let slot = (kind.clone(), "apps".to_string(), "a".to_string());
        let owner = ("flux-system".to_string(), "apps".to_string());
        state.vouch(slot.clone(), "5", owner.clone());
        state.changed(&slot, Some("5"));
        assert!(
            follow_ups.try_recv().is_err(),
            "our own version is no change"
        );
        state.changed(&slot, Some("6"));
        assert_eq!(follow_ups.try_recv().unwrap(), owner.clone());
        state.changed(&slot, Some("7"));
        assert!(follow_ups.try_recv().is_err(), "once per vouching");
        // Already changed when vouched for: the owner runs again at once.
        let mut listed = Kind::default();
        apply(&mut listed, Event::Init, None);
        apply(&mut listed, Event::InitApply(object("a", "8")), None);
        apply(&mut listed, Event::InitDone, None);
        state.kinds.insert(kind, listed);
        state.vouch(slot, "5", owner.clone());
        assert_eq!(follow_ups.try_recv().unwrap(), owner);
    }

    #[test]
    fn a_kind_is_known_once_listed_and_keeps_only_policy_metadata() {
        let mut kind = Kind::default();
        apply(&mut kind, Event::Init, None);
        apply(&mut kind, Event::InitApply(object("a", "5")), None);
        assert!(!kind.listed);
        apply(&mut kind, Event::InitDone, None);
        assert!(kind.listed);
        let kept = kind.objects[&("apps".to_string(), "a".to_string())].to_value();
        assert_eq!(kept["metadata"]["resourceVersion"], "5");
        assert_eq!(
            kept["metadata"]["annotations"],
            json!({SSA_ANNOTATION: "Merge"})
        );
        apply(&mut kind, Event::Apply(object("b", "6")), None);
        apply(&mut kind, Event::Delete(object("a", "7")), None);
        assert_eq!(kind.objects.len(), 1);
        // A relist forgets what went away meanwhile.
        apply(&mut kind, Event::Init, None);
        apply(&mut kind, Event::InitApply(object("c", "9")), None);
        apply(&mut kind, Event::InitDone, None);
        assert_eq!(
            kind.objects.keys().cloned().collect::<Vec<_>>(),
            vec![("apps".to_string(), "c".to_string())]
        );
    }

    #[test]
    fn only_the_objects_of_kept_owners_are_kept() {
        let owned_by = |name: &str, owner: &str| -> PartialObjectMeta<DynamicObject> {
            serde_json::from_value(json!({"apiVersion": "meta.k8s.io/v1",
                "kind": "PartialObjectMetadata", "metadata": {"name": name, "namespace": "apps",
                "resourceVersion": "1",
                "labels": {NAME_LABEL: owner, NAMESPACE_LABEL: "flux-system"}}}))
            .unwrap()
        };
        let keep: Keep = Arc::new(|namespace, name| namespace == "flux-system" && name == "ours");
        let mut kind = Kind::default();
        apply(&mut kind, Event::Init, Some(&keep));
        apply(
            &mut kind,
            Event::InitApply(owned_by("a", "ours")),
            Some(&keep),
        );
        apply(
            &mut kind,
            Event::InitApply(owned_by("b", "theirs")),
            Some(&keep),
        );
        apply(&mut kind, Event::InitDone, Some(&keep));
        apply(
            &mut kind,
            Event::Apply(owned_by("c", "theirs")),
            Some(&keep),
        );
        apply(&mut kind, Event::Apply(owned_by("d", "ours")), Some(&keep));
        let mut names: Vec<&str> = kind.objects.keys().map(|(_, n)| n.as_str()).collect();
        names.sort();
        assert_eq!(names, ["a", "d"]);
        // An object whose owner is no longer kept is forgotten.
        apply(
            &mut kind,
            Event::Apply(owned_by("a", "theirs")),
            Some(&keep),
        );
        assert!(
            !kind
                .objects
                .contains_key(&("apps".to_string(), "a".to_string()))
        );
        assert_eq!(kind.objects.len(), 1);
    }
}
