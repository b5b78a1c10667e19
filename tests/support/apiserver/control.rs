//! The control plane's follow-up to writes, run after a delay as kube-controller-manager and
//! apiextensions' controllers run it after the write is answered: garbage collection,
//! namespace finalization and CRD cleanup (`Store::settle`), and a new CRD's establishment
//! (`NamesAccepted`, `Established`, from which on its kinds are served, as kube-apiserver's
//! CRD handler serves an established CRD) followed, one more delay later, by its kinds
//! appearing in discovery. Clients must poll for all of it, as on a real cluster. A zero delay (only where a
//! test sets it) does everything before the write is answered.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

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
}

impl Default for Control {
    fn default() -> Control {
        Control {
            delay: DEFAULT_DELAY,
            settle_due: None,
            crds: Vec::new(),
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
        if !progressed {
            return;
        }
    }
}

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
