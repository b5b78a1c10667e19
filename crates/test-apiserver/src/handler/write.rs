//! The tail every write shares: server-owned fields, scope, defaults, pruning, validation,
//! generation, managed fields, no-op detection, dry-run and storage, then the control
//! plane's reaction.

use super::*;

#[derive(Clone, Copy)]
pub(super) struct WriteOptions {
    dry_run: bool,
    validation: FieldValidation,
}

impl WriteOptions {
    pub(super) fn of(request: &Request, dry_run: bool) -> Result<WriteOptions, ApiError> {
        Ok(WriteOptions {
            dry_run,
            validation: FieldValidation::of(request)?,
        })
    }
}

/// How managed fields are recorded for a write.
pub(super) enum Ownership {
    /// Already recorded by server-side apply.
    Applied,
    /// An ordinary write by this manager.
    Update(String),
}

/// The common tail of every write: server-owned fields, scope, defaults, pruning,
/// validation, generation, managed fields, no-op detection, dry-run and storage.
#[allow(clippy::too_many_arguments)]
pub(super) fn finish_write(
    store: &mut Store,
    identity: &rbac::Identity,
    route: &ResourceRoute,
    old: Option<&Value>,
    mut new: Value,
    ownership: Ownership,
    options: WriteOptions,
) -> Result<Reply, ApiError> {
    let WriteOptions {
        dry_run,
        validation,
    } = options;
    let mut warnings = Vec::new();
    let rt = &route.rt;
    let scope = scope_of(rt, route);
    if !matches!(scope, Scope::Status) {
        rbac::check_escalation(store, identity, rt, namespace_of(route), &new)?;
    }
    let name = new
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let namespace = namespace_of(route).to_string();
    server_owned_fields(store, rt, scope, old, &mut new);
    if let Some(m) = new["metadata"].as_object_mut() {
        m.remove("selfLink");
        drop_empty_metadata(m);
    }
    check_shape(rt, &name, &new)?;
    let ip = next_cluster_ip(store);
    let nulls = match ownership {
        Ownership::Applied if rt.custom.is_some() => Nulls::Keep,
        _ => Nulls::Drop,
    };
    drop_unknown_fields(rt, &mut new, validation, nulls, &mut warnings)?;
    validation::default_object(rt, old, &mut new, &ip);
    if let Some(schema) = rt.custom.as_ref().and_then(|c| c.schema.as_ref()) {
        validation::apply_schema_defaults(&mut new, schema);
    }
    let causes = validation::validate(rt, old, &new);
    if !causes.is_empty() {
        return Err(ApiError::invalid(rt, &name, causes));
    }
    bump_generation(rt, old, &mut new);
    if let Ownership::Update(manager) = ownership {
        let (shape, api_version) = shape_of(rt);
        managed::record_update(old, &mut new, shape, &manager, &api_version, scope);
    }
    let mut stored_form = new.clone();
    if let Some(custom) = &rt.custom {
        stored_form["apiVersion"] = json!(format!("{}/{}", rt.group, custom.storage_version));
    }
    if let Some(old) = old {
        let mut comparable = stored_form.clone();
        comparable["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"].clone();
        if comparable == *old {
            let mut reply = Reply::ok(present(rt, old));
            reply.warnings = warnings;
            return Ok(reply);
        }
    }
    let code = if old.is_some() { 200 } else { 201 };
    if dry_run {
        if let Some(old) = old {
            new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"].clone();
        }
        let mut reply = Reply::new(code, present(rt, &new));
        reply.warnings = warnings;
        return Ok(reply);
    }
    let event = if old.is_some() {
        EventType::Modified
    } else {
        EventType::Added
    };
    let stored = store_and_react(store, rt, &namespace, &name, stored_form, event, old);
    let mut reply = Reply::new(code, present(rt, &stored));
    reply.warnings = warnings;
    Ok(reply)
}

/// ObjectMeta's maps and lists are `omitempty`: every object's metadata goes through the Go
/// type (custom resources' too, coerced by apiextensions-apiserver), so an emptied map of
/// labels or annotations, or an empty list of finalizers or owners, is not kept (and is no
/// field a manager could own).
fn drop_empty_metadata(metadata: &mut serde_json::Map<String, Value>) {
    for field in ["labels", "annotations", "finalizers", "ownerReferences"] {
        let empty = match metadata.get(field) {
            Some(Value::Object(map)) => map.is_empty(),
            Some(Value::Array(list)) => list.is_empty(),
            Some(Value::Null) => true,
            _ => false,
        };
        if empty {
            metadata.remove(field);
        }
    }
}

/// What the server owns in a written object: an update keeps the stored identity,
/// timestamps and generation, and the part the request's scope may not change (the status
/// of a main write, everything but the status of a status write); a create is stamped.
fn server_owned_fields(
    store: &mut Store,
    rt: &ResourceType,
    scope: Scope,
    old: Option<&Value>,
    new: &mut Value,
) {
    if let Some(old) = old {
        for field in [
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ] {
            match old["metadata"].get(field) {
                Some(value) => new["metadata"][field] = value.clone(),
                None => {
                    if let Some(m) = new["metadata"].as_object_mut() {
                        m.remove(field);
                    }
                }
            }
        }
        match scope {
            Scope::Main => match old.get("status") {
                Some(status) => new["status"] = status.clone(),
                None => {
                    if let Some(m) = new.as_object_mut() {
                        m.remove("status");
                    }
                }
            },
            Scope::Status => {
                let status = new.get("status").cloned();
                let managed_fields = new.pointer("/metadata/managedFields").cloned();
                *new = old.clone();
                match status {
                    Some(status) => new["status"] = status,
                    None => {
                        if let Some(m) = new.as_object_mut() {
                            m.remove("status");
                        }
                    }
                }
                if let Some(managed_fields) = managed_fields {
                    new["metadata"]["managedFields"] = managed_fields;
                }
            }
            Scope::Whole => {}
        }
    } else {
        store.stamp_new(new);
        if rt.generation {
            new["metadata"]["generation"] = json!(1);
        }
        if rt.status_subresource
            && let Some(m) = new.as_object_mut()
        {
            m.remove("status");
        }
        if rt.group == "apiextensions.k8s.io" {
            crd_status(new);
        }
    }
}

/// A change outside metadata (and the status, when it has its own subresource) moves the
/// generation on.
fn bump_generation(rt: &ResourceType, old: Option<&Value>, new: &mut Value) {
    if let Some(old) = old
        && rt.generation
    {
        let spec_of = |v: &Value| {
            let mut v = v.clone();
            if let Some(m) = v.as_object_mut() {
                m.remove("metadata");
                if rt.status_subresource {
                    m.remove("status");
                }
            }
            v
        };
        if spec_of(old) != spec_of(new) {
            let generation = old
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            new["metadata"]["generation"] = json!(generation + 1);
        }
    }
}

/// Stores a write, and lets the control plane react to it as its controllers would.
fn store_and_react(
    store: &mut Store,
    rt: &ResourceType,
    namespace: &str,
    name: &str,
    stored_form: Value,
    event: EventType,
    old: Option<&Value>,
) -> Value {
    let stored = store.put(rt, namespace, name, stored_form, event, old.cloned());
    if rt.group == "apps" && rt.kind == "Deployment" {
        control::deployment_written(store, namespace, name);
    }
    if rt.group == "apiextensions.k8s.io" && rt.kind == "CustomResourceDefinition" {
        control::crd_written(store, &stored);
    }
    if rt.group.is_empty() && rt.kind == "Namespace" && old.is_none() {
        control::namespace_created(store, name);
    }
    stored
}

/// A new CRD records its storage version and gets the cleanup finalizer; its names are
/// accepted and it is established later, by the control plane (`control`).
fn crd_status(crd: &mut Value) {
    let storage: Vec<Value> = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|v| v.get("storage") == Some(&json!(true)))
        .filter_map(|v| v.get("name").cloned())
        .collect();
    crd["status"] = json!({
        "acceptedNames": {"kind": "", "plural": ""},
        "storedVersions": storage,
        "conditions": [],
    });
    let finalizers = crd["metadata"]["finalizers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let cleanup = json!("customresourcecleanup.apiextensions.k8s.io");
    if !finalizers.contains(&cleanup) {
        let mut finalizers = finalizers;
        finalizers.push(cleanup);
        crd["metadata"]["finalizers"] = Value::Array(finalizers);
    }
}
