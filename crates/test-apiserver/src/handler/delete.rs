//! Deletes: one object (preconditions, propagation, finalizers, dry-run) and a collection.

use super::*;

fn delete_options(request: &Request) -> Result<Value, ApiError> {
    let mut options = if request.body.is_empty() {
        json!({})
    } else {
        parse_json(&request.body)?
    };
    if let Some(policy) = request.query.get("propagationPolicy") {
        options["propagationPolicy"] = json!(policy);
    }
    Ok(options)
}

pub(super) fn delete(
    store: &mut Store,
    request: &Request,
    route: &ResourceRoute,
    dry_run: bool,
) -> Result<Reply, ApiError> {
    let options = delete_options(request)?;
    let name = route.name.clone().unwrap_or_default();
    let namespace = namespace_of(route).to_string();
    let object = store
        .get(&route.rt, &namespace, &name)
        .cloned()
        .ok_or_else(|| ApiError::not_found(&route.rt, &name))?;
    // A precondition the stored object does not meet, in kube-apiserver's words.
    let preconditions = [
        ("uid", "UID", "deleted and then recreated"),
        ("resourceVersion", "ResourceVersion", "modified"),
    ];
    for (field, shown, meaning) in preconditions {
        let wanted = options
            .pointer(&format!("/preconditions/{field}"))
            .and_then(Value::as_str);
        let actual = object
            .pointer(&format!("/metadata/{field}"))
            .and_then(Value::as_str);
        if let Some(wanted) = wanted
            && actual != Some(wanted)
        {
            return Err(ApiError::delete_precondition_failed(
                &route.rt,
                &name,
                &format!(
                    "the {shown} in the precondition ({wanted}) does not match the {shown} in \
                     record ({}). The object might have been {meaning}",
                    actual.unwrap_or("")
                ),
            ));
        }
    }
    let dry_run = dry_run
        || options
            .get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|d| d.contains(&json!("All")));
    if dry_run {
        return Ok(Reply::ok(present(&route.rt, &object)));
    }
    let extra = match options.get("propagationPolicy").and_then(Value::as_str) {
        Some("Foreground") => Some("foregroundDeletion"),
        Some("Orphan") => Some("orphan"),
        _ => None,
    };
    let key = Store::key(&route.rt, &namespace, &name);
    let (object, gone) = store.begin_delete(&key, extra);
    if gone {
        let mut details = json!({"name": name, "kind": route.rt.plural,
            "uid": object.pointer("/metadata/uid").cloned().unwrap_or(Value::Null)});
        if !route.rt.group.is_empty() {
            details["group"] = json!(route.rt.group);
        }
        return Ok(Reply::ok(json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": details,
        })));
    }
    Ok(Reply::ok(present(&route.rt, &object)))
}

pub(super) fn delete_collection(
    store: &mut Store,
    request: &Request,
    route: &ResourceRoute,
    dry_run: bool,
) -> Result<Reply, ApiError> {
    let filters = Filters::parse(&request.query, &route.rt.kind)?;
    let names: Vec<(String, String)> = store
        .list(&route.rt, route.namespace.as_deref())
        .into_iter()
        .filter(|o| filters.matches(o))
        .map(|o| {
            let text = |p: &str| {
                o.pointer(p)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            };
            (text("/metadata/namespace"), text("/metadata/name"))
        })
        .collect();
    let mut items = Vec::new();
    for (namespace, name) in names {
        let key = Store::key(&route.rt, &namespace, &name);
        if dry_run {
            items.extend(store.objects.get(&key).cloned());
        } else {
            items.push(store.begin_delete(&key, None).0);
        }
    }
    Ok(Reply::ok(json!({
        "apiVersion": route.rt.api_version(), "kind": format!("{}List", route.rt.kind),
        "metadata": {"resourceVersion": store.resource_version.to_string()}, "items": items,
    })))
}
