//! Drift detection without correction, beyond Flux (fluxcd/kustomize-controller#1498; the
//! `warn` mode of helm-controller's `driftDetection`).
//!
//! A Kustomization annotated [`MODE`]`: warn` reconciles a new source revision or a new
//! generation as usual (that is the GitOps change), but an interval or requested
//! reconciliation of what it already applied runs the applier's plan (the same server-side
//! dry-run, ignore rules and `ssa` policies) and changes nothing: [`report`] turns the plan
//! into the `Drifted` condition, a Warning event naming each drifted object's fields as
//! JSON-patch operations (a Secret's values never shown), and a gauge. Everything here is a
//! pure function over the plan; the reconcile does the I/O.

use std::fmt;

use serde_json::Value;

use crate::apply::Planned;
use crate::objects::{Action, ObjectRef};

/// The annotation: `warn` detects drift only; `correct` (or none) corrects it, as Flux.
pub const MODE: &str = "kustomize-controller.rs/drift-detection";
/// The condition type warn mode reports in.
pub const DRIFTED: &str = "Drifted";
pub const DRIFT_DETECTED: &str = "DriftDetected";
pub const NO_DRIFT_DETECTED: &str = "NoDriftDetected";

/// How many objects the condition names, and how many field changes an event shows for one
/// object, before it says how many more there are.
const NAMED_OBJECTS: usize = 10;
const SHOWN_CHANGES: usize = 20;
/// The longest value an event shows whole.
const SHOWN_VALUE: usize = 80;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Correct,
    Warn,
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid {MODE} annotation {0:?}: want \"warn\" or \"correct\"")]
pub struct ModeError(pub String);

/// The mode a Kustomization asks for; `Correct` while the `DriftWarnMode` gate is off.
pub fn mode(enabled: bool, annotation: Option<&str>) -> Result<Mode, ModeError> {
    match annotation.map(str::trim) {
        _ if !enabled => Ok(Mode::Correct),
        None => Ok(Mode::Correct),
        Some(text) if text.eq_ignore_ascii_case("correct") => Ok(Mode::Correct),
        Some(text) if text.eq_ignore_ascii_case("warn") => Ok(Mode::Warn),
        Some(text) => Err(ModeError(text.to_string())),
    }
}

/// Whether this reconciliation only detects drift: in warn mode, when the revision is the one
/// last applied and the spec is the one last reconciled.
pub fn detects_only(
    mode: Mode,
    revision: &str,
    last_applied_revision: Option<&str>,
    generation: Option<i64>,
    observed_generation: i64,
) -> bool {
    mode == Mode::Warn
        && last_applied_revision == Some(revision)
        && generation.is_some_and(|g| g == observed_generation)
}

/// One JSON-patch operation that would turn the live object into what the apply would make.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldChange {
    pub op: &'static str,
    pub path: String,
    pub live: Option<Value>,
    pub wanted: Option<Value>,
}

/// The operations from `live` to `wanted`, by JSON pointer (RFC 6901 escaping). Mappings are
/// compared key by key; a list of the same length item by item, else replaced whole.
pub fn field_changes(live: &Value, wanted: &Value) -> Vec<FieldChange> {
    let mut changes = Vec::new();
    walk(live, wanted, &mut String::new(), &mut changes);
    changes
}

fn walk(live: &Value, wanted: &Value, path: &mut String, changes: &mut Vec<FieldChange>) {
    if live == wanted {
        return;
    }
    let depth = path.len();
    match (live, wanted) {
        (Value::Object(old), Value::Object(new)) => {
            let keys = old
                .keys()
                .chain(new.keys().filter(|k| !old.contains_key(*k)));
            for key in keys {
                path.push('/');
                path.push_str(&key.replace('~', "~0").replace('/', "~1"));
                match (old.get(key), new.get(key)) {
                    (Some(a), Some(b)) => walk(a, b, path, changes),
                    (Some(a), None) => changes.push(change("remove", path, Some(a), None)),
                    (None, Some(b)) => changes.push(change("add", path, None, Some(b))),
                    (None, None) => {}
                }
                path.truncate(depth);
            }
        }
        (Value::Array(old), Value::Array(new)) if old.len() == new.len() => {
            for (index, (a, b)) in old.iter().zip(new).enumerate() {
                path.push('/');
                path.push_str(&index.to_string());
                walk(a, b, path, changes);
                path.truncate(depth);
            }
        }
        _ => changes.push(change("replace", path, Some(live), Some(wanted))),
    }
}

fn change(
    op: &'static str,
    path: &str,
    live: Option<&Value>,
    wanted: Option<&Value>,
) -> FieldChange {
    FieldChange {
        op,
        path: path.to_string(),
        live: live.cloned(),
        wanted: wanted.cloned(),
    }
}

/// One drifted object: missing from the cluster, or these fields differ.
#[derive(Clone, Debug, PartialEq)]
pub struct DriftedObject {
    pub object: ObjectRef,
    pub missing: bool,
    /// A Secret's changes are shown by path alone.
    pub secret: bool,
    pub changes: Vec<FieldChange>,
}

/// What a plan found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DriftReport {
    pub drifted: Vec<DriftedObject>,
}

/// The drift in a plan: objects it would create (deleted from the cluster) and objects it
/// would configure, with their changed fields.
pub fn report(planned: &[Planned]) -> DriftReport {
    let drifted = planned
        .iter()
        .filter_map(|Planned { change, drift }| {
            let secret = change.object.kind == "Secret" && change.object.group().is_empty();
            match (change.action, drift) {
                (Action::Created, _) => Some(DriftedObject {
                    object: change.object.clone(),
                    missing: true,
                    secret,
                    changes: Vec::new(),
                }),
                (Action::Configured, Some(drift)) => Some(DriftedObject {
                    object: change.object.clone(),
                    missing: false,
                    secret,
                    changes: field_changes(&drift.live, &drift.applied),
                }),
                _ => None,
            }
        })
        .collect();
    DriftReport { drifted }
}

impl DriftReport {
    /// The `Drifted` condition: status, reason, message.
    pub fn condition(&self) -> (&'static str, &'static str, String) {
        if self.drifted.is_empty() {
            return ("False", NO_DRIFT_DETECTED, "No drift detected".to_string());
        }
        let mut names: Vec<String> = self
            .drifted
            .iter()
            .take(NAMED_OBJECTS)
            .map(|d| d.object.to_string())
            .collect();
        if self.drifted.len() > NAMED_OBJECTS {
            names.push(format!("and {} more", self.drifted.len() - NAMED_OBJECTS));
        }
        let count = self.drifted.len();
        let objects = if count == 1 { "object" } else { "objects" };
        let message = format!(
            "{count} {objects} drifted, not corrected (drift detection mode warn): {}",
            names.join(", ")
        );
        ("True", DRIFT_DETECTED, message)
    }

    /// The Warning event's message: each drifted object and its field changes; none
    /// without drift.
    pub fn event_message(&self) -> Option<String> {
        if self.drifted.is_empty() {
            return None;
        }
        let lines: Vec<String> = self.drifted.iter().map(ToString::to_string).collect();
        Some(format!(
            "drift detected, not corrected (drift detection mode warn):\n{}",
            lines.join("\n")
        ))
    }
}

impl fmt::Display for DriftedObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.missing {
            return write!(f, "{} missing", self.object);
        }
        write!(f, "{} drifted", self.object)?;
        for change in self.changes.iter().take(SHOWN_CHANGES) {
            write!(f, "\n  {} {}", change.op, change.path)?;
            if self.secret {
                continue;
            }
            match (&change.live, &change.wanted) {
                (Some(live), Some(wanted)) => {
                    write!(f, ": {} -> {}", shown(live), shown(wanted))?;
                }
                (Some(live), None) => write!(f, ": {}", shown(live))?,
                (None, Some(wanted)) => write!(f, ": {}", shown(wanted))?,
                (None, None) => {}
            }
        }
        if self.changes.len() > SHOWN_CHANGES {
            write!(f, "\n  and {} more", self.changes.len() - SHOWN_CHANGES)?;
        }
        Ok(())
    }
}

/// A value as compact JSON, cut at [`SHOWN_VALUE`] characters.
fn shown(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(SHOWN_VALUE) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apply::Drift;
    use crate::objects::Change;
    use serde_json::json;

    #[test]
    fn the_mode_is_warn_or_correct_and_the_gate_switches_warn_off() {
        assert_eq!(mode(true, None), Ok(Mode::Correct));
        assert_eq!(mode(true, Some("warn")), Ok(Mode::Warn));
        assert_eq!(mode(true, Some(" Warn ")), Ok(Mode::Warn));
        assert_eq!(mode(true, Some("correct")), Ok(Mode::Correct));
        assert_eq!(mode(false, Some("warn")), Ok(Mode::Correct));
        assert_eq!(mode(false, Some("nonsense")), Ok(Mode::Correct));
        let error = mode(true, Some("detect")).unwrap_err().to_string();
        assert!(
            error.contains(MODE) && error.contains("\"detect\""),
            "{error}"
        );
    }

    #[test]
    fn only_a_reconciliation_of_what_was_applied_detects_without_applying() {
        let rows = [
            (
                Mode::Warn,
                "main@sha1:1",
                Some("main@sha1:1"),
                Some(2),
                2,
                true,
            ),
            (
                Mode::Warn,
                "main@sha1:2",
                Some("main@sha1:1"),
                Some(2),
                2,
                false,
            ),
            (Mode::Warn, "main@sha1:1", None, Some(1), 0, false),
            (
                Mode::Warn,
                "main@sha1:1",
                Some("main@sha1:1"),
                Some(3),
                2,
                false,
            ),
            (
                Mode::Correct,
                "main@sha1:1",
                Some("main@sha1:1"),
                Some(2),
                2,
                false,
            ),
        ];
        for (mode, revision, applied, generation, observed, expected) in rows {
            assert_eq!(
                detects_only(mode, revision, applied, generation, observed),
                expected,
                "{mode:?} {revision} {applied:?} {generation:?} {observed}"
            );
        }
    }

    #[test]
    fn field_changes_are_json_patch_operations_from_live_to_wanted() {
        let live = json!({"data": {"a": "1", "b": "2", "x/y": "3"},
            "spec": {"ports": [{"port": 80}, {"port": 81}], "list": [1]}});
        let wanted = json!({"data": {"a": "1", "b": "changed", "c": "new"},
            "spec": {"ports": [{"port": 80}, {"port": 8080}], "list": [1, 2]}});
        let ops: Vec<(&str, String)> = field_changes(&live, &wanted)
            .into_iter()
            .map(|c| (c.op, c.path))
            .collect();
        assert_eq!(
            ops,
            [
                ("replace", "/data/b".to_string()),
                ("remove", "/data/x~1y".to_string()),
                ("add", "/data/c".to_string()),
                ("replace", "/spec/list".to_string()),
                ("replace", "/spec/ports/1/port".to_string()),
            ]
        );
        assert!(field_changes(&live, &live).is_empty());
    }

    fn planned(kind: &str, name: &str, action: Action, drift: Option<(Value, Value)>) -> Planned {
        Planned {
            change: Change {
                object: ObjectRef {
                    api_version: "v1".into(),
                    kind: kind.into(),
                    namespace: "apps".into(),
                    name: name.into(),
                },
                action,
            },
            drift: drift.map(|(live, applied)| Drift { live, applied }),
        }
    }

    #[test]
    fn a_report_names_missing_and_changed_objects_and_never_a_secrets_values() {
        let plan = [
            planned("ConfigMap", "same", Action::Unchanged, None),
            planned("ConfigMap", "gone", Action::Created, None),
            planned(
                "ConfigMap",
                "edited",
                Action::Configured,
                Some((
                    json!({"data": {"k": "by hand"}}),
                    json!({"data": {"k": "from git"}}),
                )),
            ),
            planned(
                "Secret",
                "token",
                Action::Configured,
                Some((
                    json!({"data": {"token": "aGFja2Vk"}}),
                    json!({"data": {"token": "c2VjcmV0"}}),
                )),
            ),
            planned("ServiceAccount", "skipped", Action::Skipped, None),
        ];
        let report = report(&plan);
        let (status, reason, message) = report.condition();
        assert_eq!((status, reason), ("True", DRIFT_DETECTED));
        assert_eq!(
            message,
            "3 objects drifted, not corrected (drift detection mode warn): ConfigMap/apps/gone, ConfigMap/apps/edited, Secret/apps/token"
        );
        let event = report.event_message().unwrap();
        assert!(event.contains("ConfigMap/apps/gone missing"), "{event}");
        assert!(
            event.contains(
                "ConfigMap/apps/edited drifted\n  replace /data/k: \"by hand\" -> \"from git\""
            ),
            "{event}"
        );
        assert!(
            event.contains("Secret/apps/token drifted\n  replace /data/token"),
            "{event}"
        );
        assert!(
            !event.contains("aGFja2Vk") && !event.contains("c2VjcmV0"),
            "{event}"
        );
    }

    #[test]
    fn no_drift_is_a_false_condition_and_no_event() {
        let report = report(&[planned("ConfigMap", "same", Action::Unchanged, None)]);
        assert_eq!(
            report.condition(),
            ("False", NO_DRIFT_DETECTED, "No drift detected".to_string())
        );
        assert_eq!(report.event_message(), None);
    }

    #[test]
    fn long_reports_are_cut_with_a_count_of_what_is_left_out() {
        let many: Vec<Planned> = (0..12)
            .map(|i| planned("ConfigMap", &format!("c{i}"), Action::Created, None))
            .collect();
        let (_, _, message) = report(&many).condition();
        assert!(message.starts_with("12 objects drifted"));
        assert!(
            message.ends_with("ConfigMap/apps/c9, and 2 more"),
            "{message}"
        );
        let live = json!({"data": (0..25).map(|i| (format!("k{i:02}"), json!("a"))).collect::<serde_json::Map<_, _>>()});
        let wanted = json!({"data": (0..25).map(|i| (format!("k{i:02}"), json!("b".repeat(100)))).collect::<serde_json::Map<_, _>>()});
        let text = report(&[planned(
            "ConfigMap",
            "big",
            Action::Configured,
            Some((live, wanted)),
        )])
        .event_message()
        .unwrap();
        assert!(text.ends_with("\n  and 5 more"), "{text}");
        assert!(
            text.contains(&format!("\"a\" -> \"{}…", "b".repeat(79))),
            "{text}"
        );
    }
}
