//! `metadata.managedFields`: who owns which fields, how server-side apply merges a manager's
//! configuration into the live object (conflicts, force, removal of fields the manager stopped
//! sending) and how ordinary writes (create, update, patch) move ownership to their manager.

use serde_json::{Value, json};

use super::fieldset::{
    FieldSet, Owner, Shape, display_path, fields_of, merge, remove_fields, value_at,
};

#[derive(Clone, Debug)]
pub struct Entry {
    pub manager: String,
    pub operation: String,
    pub api_version: String,
    pub time: String,
    pub subresource: String,
    pub fields: FieldSet,
}

impl Entry {
    fn is(&self, manager: &str, operation: &str, subresource: &str) -> bool {
        self.manager == manager && self.operation == operation && self.subresource == subresource
    }
}

/// Which part of an object a write may touch and which fields are tracked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The main resource of a kind without a status subresource: everything is tracked.
    Whole,
    /// The main resource of a kind with `/status`: status is not the writer's.
    Main,
    /// The `/status` subresource.
    Status,
}

impl Scope {
    pub fn subresource(self) -> &'static str {
        if self == Scope::Status { "status" } else { "" }
    }

    /// Drops the fields the server never tracks, and those outside the scope.
    pub fn tracked(self, mut set: FieldSet) -> FieldSet {
        set.children.remove("f:apiVersion");
        set.children.remove("f:kind");
        if let Some(metadata) = set.children.get_mut("f:metadata") {
            for untracked in [
                "name",
                "namespace",
                "uid",
                "resourceVersion",
                "generation",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "managedFields",
                "selfLink",
            ] {
                metadata.children.remove(&format!("f:{untracked}"));
            }
            metadata.member = false;
        }
        match self {
            Scope::Whole => {}
            Scope::Main => {
                set.children.remove("f:status");
            }
            Scope::Status => set.children.retain(|k, _| k == "f:status"),
        }
        set.member = false;
        set
    }
}

pub fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

pub fn read(object: &Value) -> Vec<Entry> {
    let Some(entries) = object
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    let text = |e: &Value, k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    entries
        .iter()
        .filter(|e| e.get("manager").is_some() || e.get("fieldsV1").is_some())
        .map(|e| Entry {
            manager: text(e, "manager"),
            operation: text(e, "operation"),
            api_version: text(e, "apiVersion"),
            time: text(e, "time"),
            subresource: text(e, "subresource"),
            fields: FieldSet::from_fields_v1(e.get("fieldsV1").unwrap_or(&Value::Null)),
        })
        .collect()
}

pub fn write(object: &mut Value, entries: &[Entry]) {
    let list: Vec<Value> = entries
        .iter()
        .filter(|e| !e.fields.is_empty())
        .map(|e| {
            let mut entry = json!({
                "manager": e.manager,
                "operation": e.operation,
                "apiVersion": e.api_version,
                "fieldsType": "FieldsV1",
                "fieldsV1": e.fields.to_fields_v1(),
            });
            // An entry written without a time (a client may set managedFields) has none,
            // as metav1.Time's omitempty leaves it out.
            if !e.time.is_empty() {
                entry["time"] = json!(e.time);
            }
            if !e.subresource.is_empty() {
                entry["subresource"] = json!(e.subresource);
            }
            entry
        })
        .collect();
    let metadata = &mut object["metadata"];
    if list.is_empty() {
        if let Some(m) = metadata.as_object_mut() {
            m.remove("managedFields");
        }
    } else {
        metadata["managedFields"] = Value::Array(list);
    }
}

/// A field another manager owns with a different value.
#[derive(Clone, Debug)]
pub struct Conflict {
    pub manager: String,
    pub api_version: String,
    pub path: String,
}

pub struct ApplyRequest<'a> {
    pub manager: &'a str,
    pub force: bool,
    pub api_version: &'a str,
    pub scope: Scope,
}

/// Server-side apply of `config` onto `live` (the stored object, or a skeleton for a
/// create). Returns the new object with its managedFields, or the conflicts.
pub fn apply(
    live: &Value,
    config: &Value,
    shape: Shape,
    request: &ApplyRequest,
) -> Result<Value, Vec<Conflict>> {
    let subresource = request.scope.subresource();
    let mut entries = read(live);
    let config_set = request
        .scope
        .tracked(fields_of(config, shape, Owner::Apply));

    let mut conflicts = Vec::new();
    for entry in &entries {
        if entry.is(request.manager, "Apply", subresource) {
            continue;
        }
        for path in entry.fields.intersection(&config_set).members() {
            let leaf = !config_set.has_below_children(&path);
            if leaf && value_at(live, &path) != value_at(config, &path) {
                conflicts.push(Conflict {
                    manager: entry.manager.clone(),
                    api_version: entry.api_version.clone(),
                    path: display_path(&path),
                });
            }
        }
    }
    if !conflicts.is_empty() && !request.force {
        return Err(conflicts);
    }
    if request.force {
        for entry in entries.iter_mut() {
            if entry.is(request.manager, "Apply", subresource) {
                continue;
            }
            let taken = entry.fields.intersection(&config_set);
            for path in taken.members() {
                let leaf = !config_set.has_below_children(&path);
                if leaf && value_at(live, &path) != value_at(config, &path) {
                    entry.fields.remove(&path);
                }
            }
        }
    }

    let mut merged = live.clone();
    let mut scoped_config = config.clone();
    restrict_to_scope(&mut scoped_config, request.scope);
    merge(&mut merged, &scoped_config, shape);

    let previous = entries
        .iter()
        .find(|e| e.is(request.manager, "Apply", subresource))
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    let mut others = FieldSet::default();
    for entry in entries
        .iter()
        .filter(|e| !e.is(request.manager, "Apply", subresource))
    {
        others.union(&entry.fields);
    }
    let removed = previous.difference(&config_set).difference(&others);
    // What anyone still owns stays, the applier's new set included: a map whose own member
    // (`.`, from fields taken over from an update) is dropped keeps the keys applied in it,
    // as structured-merge-diff adds owned items back after pruning.
    let mut kept = others;
    kept.union(&config_set);
    remove_fields(&mut merged, &removed, &kept);

    let now = now();
    match entries
        .iter_mut()
        .find(|e| e.is(request.manager, "Apply", subresource))
    {
        Some(entry) => {
            if entry.fields != config_set || entry.api_version != request.api_version {
                entry.time = now;
            }
            entry.fields = config_set;
            entry.api_version = request.api_version.to_string();
        }
        None => entries.push(Entry {
            manager: request.manager.to_string(),
            operation: "Apply".into(),
            api_version: request.api_version.to_string(),
            time: now,
            subresource: subresource.to_string(),
            fields: config_set,
        }),
    }
    write(&mut merged, &entries);
    Ok(merged)
}

fn restrict_to_scope(config: &mut Value, scope: Scope) {
    let Some(map) = config.as_object_mut() else {
        return;
    };
    match scope {
        Scope::Whole => {}
        Scope::Main => {
            map.remove("status");
        }
        Scope::Status => map.retain(|k, _| k == "status" || k == "apiVersion" || k == "kind"),
    }
    if let Some(metadata) = map.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("managedFields");
    }
}

/// Records an ordinary write (create, update, non-apply patch) by `manager`: it owns what it
/// changed, others lose those fields, and fields that went away leave every set.
pub fn record_update(
    old: Option<&Value>,
    new: &mut Value,
    shape: Shape,
    manager: &str,
    api_version: &str,
    scope: Scope,
) {
    let subresource = scope.subresource();
    let requested = new.pointer("/metadata/managedFields").cloned();
    let previous = old.map(read).unwrap_or_default();
    let mut entries = match (&requested, old) {
        // An empty list keeps the old entries; `[{}]` resets them.
        (Some(list), _)
            if list.as_array().is_some_and(|l| !l.is_empty())
                && old.and_then(|o| o.pointer("/metadata/managedFields")) != Some(list) =>
        {
            read(new)
        }
        _ => previous,
    };
    let empty = json!({});
    let old_value = old.unwrap_or(&empty);
    let old_set = scope.tracked(fields_of(old_value, shape, Owner::Update));
    let new_set = scope.tracked(fields_of(new, shape, Owner::Update));
    let mut changed = FieldSet::default();
    for path in new_set.members() {
        let leaf = !new_set.has_below_children(&path);
        let differs = if leaf {
            value_at(old_value, &path) != value_at(new, &path)
        } else {
            !old_set.contains(&path)
        };
        if differs {
            changed.insert(&path);
        }
    }
    let removed = old_set.difference(&new_set);
    for entry in entries.iter_mut() {
        entry.fields = entry.fields.difference(&removed);
        if !entry.is(manager, "Update", subresource) {
            entry.fields = entry.fields.difference(&changed);
        }
    }
    if !changed.is_empty() {
        let now = now();
        match entries
            .iter_mut()
            .find(|e| e.is(manager, "Update", subresource))
        {
            Some(entry) => {
                entry.fields.union(&changed);
                entry.time = now;
                entry.api_version = api_version.to_string();
            }
            None => entries.push(Entry {
                manager: manager.to_string(),
                operation: "Update".into(),
                api_version: api_version.to_string(),
                time: now,
                subresource: subresource.to_string(),
                fields: changed,
            }),
        }
    }
    write(new, &entries);
}

impl FieldSet {
    /// Whether the node at `path` has members below it (it is not a leaf of the set).
    fn has_below_children(&self, path: &[String]) -> bool {
        let mut node = self;
        for element in path {
            match node.children.get(element) {
                Some(child) => node = child,
                None => return false,
            }
        }
        node.children.values().any(|c| !c.is_empty())
    }
}

/// The message kube-apiserver gives a failed apply.
pub fn conflict_message(conflicts: &[Conflict]) -> String {
    if let [only] = conflicts {
        return format!(
            "Apply failed with 1 conflict: conflict with \"{}\" using {}: {}",
            only.manager, only.api_version, only.path
        );
    }
    let mut message = format!("Apply failed with {} conflicts: ", conflicts.len());
    let lines: Vec<String> = conflicts
        .iter()
        .map(|c| {
            format!(
                "conflict with \"{}\" using {}: {}",
                c.manager, c.api_version, c.path
            )
        })
        .collect();
    message.push_str(&lines.join("\n"));
    message
}
