//! The server's storage: objects by (group, resource, namespace, name), one global
//! resourceVersion counter, a bounded history of change events for watches, and the work the
//! real control plane does after a write (namespace termination, CRD registration and
//! cleanup, garbage collection of dependents, removal once finalizers are gone).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::control::Control;
use super::managed::now;
use super::resources::{self, ResourceType};

/// (group, plural, namespace, name); the namespace is empty for cluster-scoped objects.
pub type ObjectKey = (String, String, String, String);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

#[derive(Clone, Debug)]
pub struct Event {
    pub resource_version: u64,
    pub event_type: EventType,
    pub group: String,
    pub plural: String,
    pub namespace: String,
    pub object: Value,
    /// The object before a modification, to tell selector transitions apart.
    pub previous: Option<Value>,
}

/// How many change events watches can resume from; older ones answer `410 Gone`.
const HISTORY: usize = 20_000;

pub struct Store {
    pub resource_version: u64,
    pub objects: BTreeMap<ObjectKey, Value>,
    pub history: VecDeque<Arc<Event>>,
    /// The newest resourceVersion that can no longer be watched from.
    pub compacted: u64,
    pub types: Vec<ResourceType>,
    uid_seed: String,
    uid_counter: u64,
    /// Events produced by the last write, for the server to broadcast.
    pub pending: Vec<Arc<Event>>,
    /// Set when an object was removed or is being deleted, so `settle` has work.
    needs_settle: bool,
    /// Objects the control plane follows up on (being deleted, or with owners), kept as
    /// objects are stored so a follow-up never walks the whole store.
    follow_up: std::collections::BTreeSet<ObjectKey>,
    /// The uids of the stored objects, for garbage collection's "is the owner gone".
    uids: std::collections::HashSet<String>,
    /// The Kubernetes release the server plays, and its feature gates.
    pub profile: ServerProfile,
    /// The follow-up to writes that is still to run.
    pub control: Control,
    /// CRDs whose kinds are served but not yet listed by discovery.
    pub undiscovered: Vec<String>,
    /// Bearer tokens TokenRequests issued, and whom they authenticate.
    pub tokens: std::collections::HashMap<String, super::rbac::Identity>,
    /// When the authorizer sees each RBAC object's latest write (`rbac_lag` after it).
    rbac_visible_at: std::collections::HashMap<ObjectKey, std::time::Instant>,
    /// How late kube-apiserver's authorizer sees an RBAC write: its informer's delivery, a few
    /// milliseconds on loopback.
    pub rbac_lag: std::time::Duration,
}

/// The authorizer's lag unless a test sets another (`TestApiServer::set_rbac_lag`).
pub const DEFAULT_RBAC_LAG: std::time::Duration = std::time::Duration::from_millis(10);

/// The Kubernetes release the server answers as: `/version`, and what that release refuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerProfile {
    pub minor: u32,
    pub patch: u32,
    /// The `WatchList` feature gate: watches with `sendInitialEvents` (streaming lists).
    pub watch_list: bool,
    /// API Priority and Fairness (`--enable-priority-and-fairness`, on by default): answers
    /// carry the `X-Kubernetes-PF-*` headers clients detect it by.
    pub priority_and_fairness: bool,
}

impl Default for ServerProfile {
    /// Kubernetes v1.34.1, the oldest release Flux 2.9 (kustomize-controller v1.9) supports,
    /// with the `WatchList` gate off, so the suite shows the controller never needs
    /// streaming lists.
    fn default() -> ServerProfile {
        ServerProfile {
            minor: 34,
            patch: 1,
            watch_list: false,
            priority_and_fairness: true,
        }
    }
}

impl Store {
    pub fn new() -> Store {
        let seed = format!(
            "{:?}{:?}",
            std::time::SystemTime::now(),
            std::thread::current().id()
        );
        let mut store = Store {
            resource_version: 1,
            objects: BTreeMap::new(),
            history: VecDeque::new(),
            compacted: 0,
            types: resources::builtins(),
            uid_seed: seed,
            uid_counter: 0,
            pending: Vec::new(),
            needs_settle: false,
            follow_up: Default::default(),
            uids: Default::default(),
            profile: ServerProfile::default(),
            control: Control::default(),
            undiscovered: Vec::new(),
            tokens: std::collections::HashMap::new(),
            rbac_visible_at: std::collections::HashMap::new(),
            rbac_lag: DEFAULT_RBAC_LAG,
        };
        for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            store
                .seed(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}));
        }
        store.seed(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "cluster-admin"},
            "rules": [
                {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                {"nonResourceURLs": ["*"], "verbs": ["*"]},
            ],
        }));
        store.seed(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "cluster-admin"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:masters"}],
        }));
        // What the server starts with, its authorizer has seen.
        store.rbac_visible_at.clear();
        store.pending.clear();
        store
    }

    /// A new store whose namespaces publish `root_ca`; the seeded ones have theirs already.
    pub fn with_root_ca(root_ca: &str) -> Store {
        let mut store = Store::new();
        store.control.root_ca = root_ca.to_string();
        for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            super::control::furnish_namespace(&mut store, name);
        }
        store.pending.clear();
        store
    }

    fn seed(&mut self, mut object: Value) {
        let kind = object["kind"].as_str().unwrap_or("").to_string();
        let rt = self
            .types
            .iter()
            .find(|t| t.kind == kind && t.custom.is_none())
            .cloned()
            .expect("seeded kinds are built in");
        super::validation::default_object(&rt, None, &mut object, "");
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or("")
            .to_string();
        self.stamp_new(&mut object);
        self.put(&rt, "", &name, object, EventType::Added, None);
    }

    pub fn new_uid(&mut self) -> String {
        self.uid_counter += 1;
        let digest = Sha256::digest(format!("{}/{}", self.uid_seed, self.uid_counter));
        let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
        format!(
            "{}-{}-4{}-a{}-{}",
            &hex[0..8],
            &hex[8..12],
            &hex[13..16],
            &hex[17..20],
            &hex[20..32]
        )
    }

    /// A five-character suffix for `generateName`.
    pub fn random_suffix(&mut self) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        let uid = self.new_uid();
        uid.bytes()
            .filter(u8::is_ascii_hexdigit)
            .take(5)
            .map(|b| ALPHABET[(b as usize) % ALPHABET.len()] as char)
            .collect()
    }

    /// Sets the server-owned metadata of an object being created.
    pub fn stamp_new(&mut self, object: &mut Value) {
        let uid = self.new_uid();
        let metadata = &mut object["metadata"];
        metadata["uid"] = json!(uid);
        metadata["creationTimestamp"] = json!(now());
    }

    pub fn find_type(&self, group: &str, version: &str, plural: &str) -> Option<ResourceType> {
        self.types
            .iter()
            .find(|t| t.group == group && t.version == version && t.plural == plural)
            .cloned()
    }

    pub fn key(rt: &ResourceType, namespace: &str, name: &str) -> ObjectKey {
        let (group, plural) = rt.storage_key();
        (group, plural, namespace.to_string(), name.to_string())
    }

    pub fn get(&self, rt: &ResourceType, namespace: &str, name: &str) -> Option<&Value> {
        self.objects.get(&Store::key(rt, namespace, name))
    }

    /// Objects of a resource, in one namespace or all (`None`).
    pub fn list(&self, rt: &ResourceType, namespace: Option<&str>) -> Vec<&Value> {
        let (group, plural) = rt.storage_key();
        self.stored(&group, &plural, namespace)
            .map(|(_, v)| v)
            .collect()
    }

    /// The stored objects of a (group, plural), in one namespace or all, read as a range of
    /// the ordered store: a store of 100,000 objects answers in the time of the matches.
    pub fn stored(
        &self,
        group: &str,
        plural: &str,
        namespace: Option<&str>,
    ) -> impl Iterator<Item = (&ObjectKey, &Value)> {
        let (group, plural) = (group.to_string(), plural.to_string());
        let namespace = namespace.map(str::to_string);
        let start = (
            group.clone(),
            plural.clone(),
            namespace.clone().unwrap_or_default(),
            String::new(),
        );
        self.objects
            .range(start..)
            .take_while(move |((g, p, ns, _), _)| {
                *g == group && *p == plural && namespace.as_ref().is_none_or(|n| n == ns)
            })
    }

    /// Keeps the follow-up and uid indexes in step with the object stored at `key`.
    fn index(&mut self, key: &ObjectKey, stored: Option<&Value>, replaced: Option<&Value>) {
        let uid = |o: &Value| {
            o.pointer("/metadata/uid")
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        if let Some(old) = replaced.and_then(uid)
            && stored.and_then(uid).as_ref() != Some(&old)
        {
            self.uids.remove(&old);
        }
        if let Some(new) = stored.and_then(uid) {
            self.uids.insert(new);
        }
        if stored.is_some_and(|o| o.pointer("/metadata/deletionTimestamp").is_some() || owned(o)) {
            self.follow_up.insert(key.clone());
        } else {
            self.follow_up.remove(key);
        }
    }

    fn record(&mut self, event: Event) {
        let event = Arc::new(event);
        self.history.push_back(event.clone());
        while self.history.len() > HISTORY {
            if let Some(dropped) = self.history.pop_front() {
                self.compacted = dropped.resource_version;
            }
        }
        self.pending.push(event);
    }

    /// Forgets all change history, as an etcd compaction does: watches from any earlier
    /// resourceVersion then answer `410 Gone`.
    pub fn compact(&mut self) {
        self.history.clear();
        self.compacted = self.resource_version;
    }

    /// Stores an object with the next resourceVersion and records the event.
    pub fn put(
        &mut self,
        rt: &ResourceType,
        namespace: &str,
        name: &str,
        mut object: Value,
        event_type: EventType,
        previous: Option<Value>,
    ) -> Value {
        self.resource_version += 1;
        object["metadata"]["resourceVersion"] = json!(self.resource_version.to_string());
        self.needs_settle |= object.pointer("/metadata/deletionTimestamp").is_some();
        let (group, plural) = rt.storage_key();
        let key = (group.clone(), plural.clone(), namespace.into(), name.into());
        if group == "rbac.authorization.k8s.io" {
            let visible_at = std::time::Instant::now() + self.rbac_lag;
            self.rbac_visible_at.insert(key.clone(), visible_at);
        }
        let replaced = self.objects.insert(key.clone(), object.clone());
        self.index(&key, Some(&object), replaced.as_ref());
        self.record(Event {
            resource_version: self.resource_version,
            event_type,
            group,
            plural,
            namespace: namespace.into(),
            object: object.clone(),
            previous,
        });
        object
    }

    /// Whether the authorizer sees the RBAC object `key` as it is stored now: a write reaches
    /// kube-apiserver's authorizer through its informer, a moment after it is answered.
    pub fn rbac_visible(&self, key: &ObjectKey, now: std::time::Instant) -> bool {
        self.rbac_visible_at.get(key).is_none_or(|at| *at <= now)
    }

    /// Lets the authorizer see every RBAC write made so far.
    pub fn reveal_rbac(&mut self) {
        self.rbac_visible_at.clear();
    }

    /// Removes an object for good (its finalizers are gone).
    pub fn remove(&mut self, key: &ObjectKey) -> Option<Value> {
        self.rbac_visible_at.remove(key);
        let mut object = self.objects.remove(key)?;
        self.index(key, None, Some(&object));
        let before = object.clone();
        self.needs_settle = true;
        self.resource_version += 1;
        object["metadata"]["resourceVersion"] = json!(self.resource_version.to_string());
        let (group, plural, namespace, _) = key.clone();
        if group == "apiextensions.k8s.io" && plural == "customresourcedefinitions" {
            self.unregister_crd(&object);
        }
        self.record(Event {
            resource_version: self.resource_version,
            event_type: EventType::Deleted,
            group,
            plural,
            namespace,
            object: object.clone(),
            previous: Some(before),
        });
        Some(object)
    }

    /// Whether the control plane has follow-up work (deletions in progress).
    pub fn has_follow_up(&self) -> bool {
        self.needs_settle
    }

    /// The stored CustomResourceDefinition of that name.
    pub fn crd(&self, name: &str) -> Option<Value> {
        let key = (
            "apiextensions.k8s.io".to_string(),
            "customresourcedefinitions".to_string(),
            String::new(),
            name.to_string(),
        );
        self.objects.get(&key).cloned()
    }

    /// A built-in resource type by group and plural.
    pub fn builtin_type(&self, group: &str, plural: &str) -> ResourceType {
        self.type_for_key(group, plural)
            .unwrap_or_else(|| panic!("{plural}.{group} is served"))
    }

    pub fn crd_type(&self) -> ResourceType {
        self.type_for_key("apiextensions.k8s.io", "customresourcedefinitions")
            .expect("CRDs are served")
    }

    /// Stores a CRD written by the control plane.
    pub fn put_crd(&mut self, crd: Value, event_type: EventType, previous: Value) -> Value {
        let rt = self.crd_type();
        let name = crd["metadata"]["name"].as_str().unwrap_or("").to_string();
        self.put(&rt, "", &name, crd, event_type, Some(previous))
    }

    pub fn register_crd(&mut self, crd: &Value) {
        self.unregister_crd(crd);
        self.types.extend(resources::from_crd(crd));
    }

    /// The types discovery lists.
    pub fn discoverable_types(&self) -> Vec<&ResourceType> {
        self.types
            .iter()
            .filter(|t| {
                t.custom
                    .as_ref()
                    .is_none_or(|c| !self.undiscovered.contains(&c.crd_name))
            })
            .collect()
    }

    fn unregister_crd(&mut self, crd: &Value) {
        let name = crd.pointer("/metadata/name").and_then(Value::as_str);
        self.undiscovered.retain(|n| Some(n.as_str()) != name);
        self.types
            .retain(|t| t.custom.as_ref().map(|c| Some(c.crd_name.as_str())) != Some(name));
    }

    fn type_for_key(&self, group: &str, plural: &str) -> Option<ResourceType> {
        self.types
            .iter()
            .find(|t| t.group == group && t.plural == plural)
            .cloned()
    }

    /// Starts deleting an object: with finalizers it gets a deletionTimestamp and stays,
    /// without it is removed. Returns the object as it now is and whether it is gone.
    pub fn begin_delete(
        &mut self,
        key: &ObjectKey,
        extra_finalizer: Option<&str>,
    ) -> (Value, bool) {
        let Some(object) = self.objects.get(key).cloned() else {
            return (Value::Null, true);
        };
        let namespace_like = key.0.is_empty() && key.1 == "namespaces";
        let has_finalizers =
            finalizers(&object).next().is_some() || extra_finalizer.is_some() || namespace_like;
        if object.pointer("/metadata/deletionTimestamp").is_some() {
            return (object, false);
        }
        if !has_finalizers {
            let removed = self.remove(key).unwrap_or(object);
            return (removed, true);
        }
        let mut updated = object.clone();
        updated["metadata"]["deletionTimestamp"] = json!(now());
        updated["metadata"]["deletionGracePeriodSeconds"] = json!(0);
        if let Some(generation) = updated
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .filter(|g| *g > 0)
        {
            updated["metadata"]["generation"] = json!(generation + 1);
        }
        if let Some(extra) = extra_finalizer {
            let list = updated["metadata"]["finalizers"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let mut list: Vec<Value> = list;
            if !list.contains(&json!(extra)) {
                list.push(json!(extra));
            }
            updated["metadata"]["finalizers"] = Value::Array(list);
        }
        if namespace_like {
            if !updated["status"].is_object() {
                updated["status"] = json!({});
            }
            updated["status"]["phase"] = json!("Terminating");
        }
        let Some(rt) = self.type_for_key(&key.0, &key.1) else {
            return (object, false);
        };
        let stored = self.put(
            &rt,
            &key.2,
            &key.3,
            updated,
            EventType::Modified,
            Some(object),
        );
        (stored, false)
    }

    /// The control plane's follow-up after a write, run until nothing changes: objects
    /// being deleted whose finalizers are gone are removed, terminating namespaces and CRDs
    /// are emptied, dependents of removed owners are collected, and CRDs are established.
    pub fn settle(&mut self) {
        if !self.needs_settle {
            return;
        }
        for _ in 0..64 {
            self.needs_settle = false;
            if !self.settle_once() {
                break;
            }
        }
        self.needs_settle = false;
    }

    fn settle_once(&mut self) -> bool {
        let mut changed = false;
        // Only objects being deleted, or with owners that may be gone, have follow-up work.
        let keys: Vec<ObjectKey> = self.follow_up.iter().cloned().collect();
        for key in keys {
            if let Some(object) = self.objects.get(&key).cloned() {
                changed |= self.settle_object(&key, object);
            }
        }
        changed
    }

    /// One object's follow-up work, as the control plane's controllers do it; whether
    /// anything changed.
    fn settle_object(&mut self, key: &ObjectKey, object: Value) -> bool {
        let deleting = object.pointer("/metadata/deletionTimestamp").is_some();
        let is_namespace = key.0.is_empty() && key.1 == "namespaces";
        let is_crd = key.0 == "apiextensions.k8s.io" && key.1 == "customresourcedefinitions";
        if deleting && self.release_finalizer(key, &object, is_namespace, is_crd) {
            return true;
        }
        let mut changed = false;
        let namespace_done = !is_namespace
            || object
                .pointer("/spec/finalizers")
                .and_then(Value::as_array)
                .is_none_or(Vec::is_empty);
        if deleting && finalizers(&object).next().is_none() && namespace_done {
            self.remove(key);
            return true;
        }
        if is_namespace && deleting {
            let contents: Vec<ObjectKey> = self
                .objects
                .iter()
                .filter(|((_, _, ns, _), o)| {
                    *ns == key.3 && o.pointer("/metadata/deletionTimestamp").is_none()
                })
                .map(|(k, _)| k.clone())
                .collect();
            for content in contents {
                self.begin_delete(&content, None);
                changed = true;
            }
        }
        if is_crd && deleting {
            for instance in self.list_crd_objects(&object) {
                if self
                    .objects
                    .get(&instance)
                    .is_some_and(|o| o.pointer("/metadata/deletionTimestamp").is_none())
                {
                    self.begin_delete(&instance, None);
                    changed = true;
                }
            }
        }
        // Background garbage collection: every owner is gone.
        if let Some(owners) = object
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            && !owners.is_empty()
            && !deleting
            && owners.iter().all(|o| {
                o.get("uid")
                    .and_then(Value::as_str)
                    .is_some_and(|uid| !self.uids.contains(uid))
            })
        {
            self.begin_delete(key, None);
            changed = true;
        }
        changed
    }

    /// The finalizer of a deleting object that the control plane removes once its work is
    /// done: an emptied namespace's, a CRD's cleanup once no instance is left, `orphan`
    /// after releasing the dependents, `foregroundDeletion` once they are gone (deleting
    /// them meanwhile). Whether it did anything.
    fn release_finalizer(
        &mut self,
        key: &ObjectKey,
        object: &Value,
        is_namespace: bool,
        is_crd: bool,
    ) -> bool {
        if is_namespace && self.empty_namespace(&key.3) {
            let spec_finalizers = object
                .pointer("/spec/finalizers")
                .and_then(Value::as_array)
                .is_some_and(|f| !f.is_empty());
            if spec_finalizers {
                let mut updated = object.clone();
                updated["spec"]["finalizers"] = json!([]);
                self.replace(key, updated, object.clone());
                return true;
            }
        }
        if is_crd && self.list_crd_objects(object).is_empty() {
            let cleanup = "customresourcecleanup.apiextensions.k8s.io";
            if finalizers(object).any(|f| f == cleanup) {
                let mut updated = object.clone();
                remove_finalizer(&mut updated, cleanup);
                self.replace(key, updated, object.clone());
                return true;
            }
        }
        if object.pointer("/metadata/finalizers").is_some() {
            // Foreground deletion waits for dependents; orphaning releases them.
            let uid = object["metadata"]["uid"].as_str().unwrap_or("").to_string();
            if finalizers(object).any(|f| f == "orphan") {
                self.release_dependents(&uid);
                let mut updated = object.clone();
                remove_finalizer(&mut updated, "orphan");
                self.replace(key, updated, object.clone());
                return true;
            }
            if finalizers(object).any(|f| f == "foregroundDeletion") {
                let dependents = self.dependents(&uid);
                if dependents.is_empty() {
                    let mut updated = object.clone();
                    remove_finalizer(&mut updated, "foregroundDeletion");
                    self.replace(key, updated, object.clone());
                } else {
                    for dependent in dependents {
                        self.begin_delete(&dependent, None);
                    }
                }
                return true;
            }
        }
        false
    }

    fn replace(&mut self, key: &ObjectKey, updated: Value, previous: Value) {
        if let Some(rt) = self.type_for_key(&key.0, &key.1) {
            self.put(
                &rt,
                &key.2,
                &key.3,
                updated,
                EventType::Modified,
                Some(previous),
            );
        }
    }

    fn dependents(&self, owner_uid: &str) -> Vec<ObjectKey> {
        self.objects
            .iter()
            .filter(|(_, o)| owned_by(o, owner_uid))
            .map(|(k, _)| k.clone())
            .collect()
    }

    fn release_dependents(&mut self, owner_uid: &str) {
        for key in self.dependents(owner_uid) {
            let Some(object) = self.objects.get(&key).cloned() else {
                continue;
            };
            let mut updated = object.clone();
            if let Some(refs) = updated["metadata"]["ownerReferences"].as_array_mut() {
                refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(owner_uid));
            }
            self.replace(&key, updated, object);
        }
    }

    fn empty_namespace(&self, namespace: &str) -> bool {
        !self.objects.keys().any(|(_, _, ns, _)| ns == namespace)
    }

    fn list_crd_objects(&self, crd: &Value) -> Vec<ObjectKey> {
        let group = crd
            .pointer("/spec/group")
            .and_then(Value::as_str)
            .unwrap_or("");
        let plural = crd
            .pointer("/spec/names/plural")
            .and_then(Value::as_str)
            .unwrap_or("");
        self.stored(group, plural, None)
            .map(|(key, _)| key.clone())
            .collect()
    }
}

fn owned(object: &Value) -> bool {
    object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|owners| !owners.is_empty())
}

pub fn finalizers(object: &Value) -> impl Iterator<Item = &str> {
    object
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

fn remove_finalizer(object: &mut Value, finalizer: &str) {
    if let Some(list) = object["metadata"]["finalizers"].as_array_mut() {
        list.retain(|f| f.as_str() != Some(finalizer));
        if list.is_empty() {
            object["metadata"]
                .as_object_mut()
                .expect("metadata")
                .remove("finalizers");
        }
    }
}

fn owned_by(object: &Value, owner_uid: &str) -> bool {
    object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|refs| {
            refs.iter()
                .any(|r| r.get("uid").and_then(Value::as_str) == Some(owner_uid))
        })
}
