//! Requests to responses: routing of API paths, the verbs (get, list, create, update,
//! patch, delete, deletecollection) with their preconditions, dry-run, field managers and
//! the status subresource (the tail every write shares in `write`, deletes in `delete`).
//! Watches are answered in `watch`; everything else is synchronous under the store's lock.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::control;
use super::errors::ApiError;
use super::fields::{
    FieldValidation, drop_unknown_fields, refuse_live_untyped_at_managed_versions,
    refuse_mistyped_applied_config,
};
use super::fieldset::Shape;
use super::managed::{self, ApplyRequest, Scope};
use super::rbac::{self, Attributes, Identity};
use super::resources::{Discovery, ResourceType};
use super::schema::{Nulls, Schema};
use super::selectors::{FieldSelector, LabelSelector};
use super::smp;
use super::store::{EventType, Store};
use super::validation;

mod delete;
mod write;

use delete::{delete, delete_collection};
use write::{Ownership, WriteOptions, finish_write};

/// A parsed request, independent of the HTTP library.
pub struct Request {
    pub method: String,
    pub path: String,
    pub query: HashMap<String, String>,
    pub content_type: String,
    pub accept: String,
    pub user_agent: String,
    /// Who is asking, once `credentials` are authenticated.
    pub identity: Identity,
    pub credentials: rbac::Credentials,
    pub body: Vec<u8>,
}

pub struct Reply {
    pub code: u16,
    pub body: Value,
    /// `Warning` headers (RFC 7234 code 299), as kube-apiserver sends for dropped fields.
    pub warnings: Vec<String>,
}

impl Reply {
    pub fn ok(body: Value) -> Reply {
        Reply::new(200, body)
    }

    pub fn new(code: u16, body: Value) -> Reply {
        Reply {
            code,
            body,
            warnings: Vec::new(),
        }
    }
}

/// Where a request goes.
pub enum Route {
    Plain(Value),
    Text(&'static str),
    Resource(Box<ResourceRoute>),
}

#[derive(Clone)]
pub struct ResourceRoute {
    pub rt: ResourceType,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

impl ResourceRoute {
    pub fn verb(&self, method: &str, query: &HashMap<String, String>) -> &'static str {
        let watch = query.get("watch").is_some_and(|w| w == "true" || w == "1");
        match (method, self.name.is_some()) {
            ("GET", true) => "get",
            ("GET", false) if watch => "watch",
            ("GET", false) => "list",
            ("POST", _) => "create",
            ("PUT", _) => "update",
            ("PATCH", _) => "patch",
            ("DELETE", true) => "delete",
            ("DELETE", false) => "deletecollection",
            _ => "unknown",
        }
    }

    pub fn attributes<'a>(&'a self, verb: &'a str) -> Attributes<'a> {
        Attributes {
            verb,
            group: &self.rt.group,
            resource: &self.rt.plural,
            subresource: self.subresource.as_deref().unwrap_or(""),
            namespace: if self.rt.kind == "Namespace" && self.rt.group.is_empty() {
                self.name.as_deref().unwrap_or("")
            } else {
                self.namespace.as_deref().unwrap_or("")
            },
            name: self.name.as_deref().unwrap_or(""),
        }
    }
}

pub fn route(store: &Store, path: &str) -> Result<Route, ApiError> {
    let segments: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let discovery = || Discovery {
        types: store.discoverable_types(),
    };
    let (group, version, rest) = match segments.as_slice() {
        ["version"] => {
            let profile = store.profile;
            return Ok(Route::Plain(json!({
                "major": "1", "minor": profile.minor.to_string(),
                "gitVersion": format!("v1.{}.{}", profile.minor, profile.patch),
                "platform": "linux/amd64",
            })));
        }
        ["openid", "v1", "jwks"] => return Ok(Route::Plain(super::issuer::issuer().jwks())),
        ["healthz" | "readyz" | "livez"] | ["healthz" | "readyz" | "livez", "ping"] => {
            return Ok(Route::Text("ok"));
        }
        ["api"] => {
            return Ok(Route::Plain(json!({
                "kind": "APIVersions", "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
            })));
        }
        ["apis"] => return Ok(Route::Plain(discovery().group_list())),
        ["api", "v1"] => {
            return discovery()
                .resource_list("", "v1")
                .map(Route::Plain)
                .ok_or_else(ApiError::unknown_resource);
        }
        ["apis", group] => {
            return discovery()
                .group_document(group)
                .map(Route::Plain)
                .ok_or_else(ApiError::unknown_resource);
        }
        ["apis", group, version] => {
            return discovery()
                .resource_list(group, version)
                .map(Route::Plain)
                .ok_or_else(ApiError::unknown_resource);
        }
        ["api", "v1", rest @ ..] => ("", "v1", rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return Err(ApiError::unknown_resource()),
    };
    let namespaced_path = rest.first() == Some(&"namespaces")
        && rest.len() >= 3
        && !(group.is_empty() && rest.len() == 3 && matches!(rest[2], "status" | "finalize"));
    let (namespace, rest) = if namespaced_path {
        (Some(rest[1].to_string()), &rest[2..])
    } else {
        (None, rest)
    };
    let (plural, name, subresource) = match rest {
        [plural] => (*plural, None, None),
        [plural, name] => (*plural, Some(name.to_string()), None),
        [plural, name, sub] => (*plural, Some(name.to_string()), Some(sub.to_string())),
        _ => return Err(ApiError::unknown_resource()),
    };
    let rt = store
        .find_type(group, version, plural)
        .ok_or_else(ApiError::unknown_resource)?;
    if namespace.is_some() && !rt.namespaced {
        return Err(ApiError::unknown_resource());
    }
    if rt.namespaced && namespace.is_none() && name.is_some() {
        return Err(ApiError::unknown_resource());
    }
    if let Some(sub) = &subresource
        && !(sub == "status" && rt.status_subresource
            || sub == "finalize" && rt.kind == "Namespace"
            || sub == "token" && rt.kind == "ServiceAccount" && rt.group.is_empty())
    {
        return Err(ApiError::unknown_resource());
    }
    Ok(Route::Resource(Box::new(ResourceRoute {
        rt,
        namespace,
        name,
        subresource,
    })))
}

/// Answers a non-watch request on a resource.
pub fn handle(
    store: &mut Store,
    request: &Request,
    route: &ResourceRoute,
) -> Result<Reply, ApiError> {
    let verb = route.verb(&request.method, &request.query);
    let attributes = route.attributes(verb);
    if !rbac::allowed(store, &request.identity, &attributes) {
        return Err(ApiError::forbidden(rbac::denial(
            &request.identity,
            &attributes,
        )));
    }
    let dry_run = dry_run_of(request, verb)?;
    if route.subresource.as_deref() == Some("token") {
        return match verb {
            "create" => rbac::token_request(store, request, route),
            _ => Err(ApiError::method_not_allowed()),
        };
    }
    let reply = match verb {
        "get" => get(store, route),
        "list" => super::list::list(store, request, route),
        "create" => create(store, request, route, dry_run),
        "update" => update(store, request, route, dry_run),
        "patch" => patch(store, request, route, dry_run),
        "delete" => delete(store, request, route, dry_run),
        "deletecollection" => delete_collection(store, request, route, dry_run),
        _ => Err(ApiError::method_not_allowed()),
    }?;
    if !dry_run {
        control::after_write(store);
    }
    Ok(reply)
}

/// `dryRun=All`, or nothing; any other value fails the options' validation before the write,
/// as kube-apiserver's `Validate{Create,Update,Patch,Delete}Options` do.
fn dry_run_of(request: &Request, verb: &str) -> Result<bool, ApiError> {
    let Some(value) = request.query.get("dryRun") else {
        return Ok(false);
    };
    if value == "All" {
        return Ok(true);
    }
    let options = match verb {
        "create" => "CreateOptions",
        "update" => "UpdateOptions",
        "patch" => "PatchOptions",
        "delete" | "deletecollection" => "DeleteOptions",
        _ => return Ok(false),
    };
    Err(ApiError::new(
        422,
        "Invalid",
        format!(
            "{options}.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: \
             []string{{{value:?}}}: supported values: \"All\""
        ),
    ))
}

fn namespace_of(route: &ResourceRoute) -> &str {
    route.namespace.as_deref().unwrap_or("")
}

/// The object as a client of `rt`'s version sees it.
/// A stored object as a request at `rt`'s version reads it: at that version, and for a
/// custom resource with that version's defaults filled in (kube-apiserver defaults what it
/// reads from etcd, so a default added to a schema shows on objects stored before it).
pub fn present(rt: &ResourceType, object: &Value) -> Value {
    let mut object = object.clone();
    object["apiVersion"] = json!(rt.api_version());
    object["kind"] = json!(rt.kind);
    if let Some(schema) = rt.custom.as_ref().and_then(|c| c.schema.as_ref()) {
        validation::apply_schema_defaults(&mut object, schema);
    }
    object
}

fn get(store: &Store, route: &ResourceRoute) -> Result<Reply, ApiError> {
    let name = route.name.as_deref().unwrap_or("");
    let object = store
        .get(&route.rt, namespace_of(route), name)
        .ok_or_else(|| ApiError::not_found(&route.rt, name))?;
    Ok(Reply::ok(present(&route.rt, object)))
}

pub struct Filters {
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

impl Filters {
    pub fn parse(query: &HashMap<String, String>, kind: &str) -> Result<Filters, ApiError> {
        Ok(Filters {
            labels: LabelSelector::parse(query.get("labelSelector").map_or("", String::as_str))?,
            fields: FieldSelector::parse(
                query.get("fieldSelector").map_or("", String::as_str),
                kind,
            )?,
        })
    }

    pub fn matches(&self, object: &Value) -> bool {
        self.labels.matches(object) && self.fields.matches(object)
    }
}

fn parse_json(body: &[u8]) -> Result<Value, ApiError> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(format!("the request body could not be decoded: {e}"))
    })?;
    if !value.is_object() {
        return Err(ApiError::bad_request("the request body must be an object"));
    }
    Ok(value)
}

/// The manager of an ordinary write: `fieldManager`, else the user agent's first word.
fn update_manager(request: &Request) -> String {
    if let Some(manager) = request.query.get("fieldManager") {
        return manager.clone();
    }
    let agent = request.user_agent.split('/').next().unwrap_or("").trim();
    if agent.is_empty() {
        "unknown".into()
    } else {
        agent.to_string()
    }
}

fn scope_of(rt: &ResourceType, route: &ResourceRoute) -> Scope {
    match (route.subresource.as_deref(), rt.status_subresource) {
        (Some("status"), _) => Scope::Status,
        (_, true) => Scope::Main,
        (_, false) => Scope::Whole,
    }
}

fn shape_of(rt: &ResourceType) -> (Shape<'_>, String) {
    (Shape::root(Schema::of(rt)), rt.api_version())
}

/// Checks the body's apiVersion, kind, name and namespace against the URL.
fn check_identity(route: &ResourceRoute, object: &mut Value) -> Result<(), ApiError> {
    let rt = &route.rt;
    if let Some(api_version) = object.get("apiVersion").and_then(Value::as_str)
        && api_version != rt.api_version()
    {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({api_version}) does not match the expected API version ({})",
            rt.api_version()
        )));
    }
    if let Some(kind) = object.get("kind").and_then(Value::as_str)
        && kind != rt.kind
    {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({kind}) does not match the expected kind ({})",
            rt.kind
        )));
    }
    object["apiVersion"] = json!(rt.api_version());
    object["kind"] = json!(rt.kind);
    if !object["metadata"].is_object() {
        object["metadata"] = json!({});
    }
    let url_namespace = route.namespace.clone().unwrap_or_default();
    match object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
    {
        Some(ns) if rt.namespaced && !ns.is_empty() && ns != url_namespace => {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        _ => {}
    }
    if rt.namespaced {
        object["metadata"]["namespace"] = json!(url_namespace);
    } else if let Some(metadata) = object["metadata"].as_object_mut() {
        metadata.remove("namespace");
    }
    if let Some(url_name) = &route.name {
        match object.pointer("/metadata/name").and_then(Value::as_str) {
            Some(name) if name != url_name => {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({name}) does not match the name on the URL ({url_name})"
                )));
            }
            _ => object["metadata"]["name"] = json!(url_name),
        }
    }
    Ok(())
}

fn check_namespace(store: &Store, route: &ResourceRoute, name: &str) -> Result<(), ApiError> {
    let Some(namespace) = route.namespace.as_deref() else {
        return Ok(());
    };
    let namespaces = store
        .find_type("", "v1", "namespaces")
        .expect("namespaces are built in");
    let Some(ns) = store.get(&namespaces, "", namespace) else {
        return Err(ApiError::namespace_not_found(namespace));
    };
    if ns.pointer("/metadata/deletionTimestamp").is_some() {
        let mut error = ApiError::forbidden(format!(
            "{} \"{name}\" is forbidden: unable to create new content in namespace {namespace} because it is being terminated",
            route.rt.qualified_plural()
        ));
        error.details = Some(json!({
            "name": name, "kind": route.rt.plural,
            "causes": [{"reason": "NamespaceTerminating", "message": format!("namespace {namespace} is being terminated"), "field": "metadata.namespace"}],
        }));
        return Err(error);
    }
    Ok(())
}

/// Fields the real server decodes into structs must be objects; anything else is a decode
/// error there, and would be nonsense to default here.
fn check_shape(rt: &ResourceType, name: &str, object: &Value) -> Result<(), ApiError> {
    let pointers = [
        "/metadata",
        "/metadata/labels",
        "/metadata/annotations",
        "/spec",
        "/status",
        "/data",
        "/spec/template",
        "/spec/template/metadata",
        "/spec/template/metadata/labels",
        "/spec/selector",
    ];
    for pointer in pointers {
        if let Some(value) = object.pointer(pointer)
            && !value.is_object()
            && !(value.is_null() && pointer != "/metadata")
        {
            return Err(ApiError::invalid(
                rt,
                name,
                vec![super::errors::Cause {
                    reason: "FieldValueTypeInvalid",
                    field: pointer.trim_start_matches('/').replace('/', "."),
                    message: format!("Invalid value: {value}: must be an object"),
                }],
            ));
        }
    }
    Ok(())
}

fn next_cluster_ip(store: &Store) -> String {
    let n = store.resource_version % 65_000 + 10;
    format!("10.96.{}.{}", n / 250, n % 250 + 1)
}

fn create(
    store: &mut Store,
    request: &Request,
    route: &ResourceRoute,
    dry_run: bool,
) -> Result<Reply, ApiError> {
    let mut object = parse_json(&request.body)?;
    check_identity(route, &mut object)?;
    if object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .is_some_and(|rv| !rv.is_empty())
    {
        return Err(ApiError::bad_request(
            "resourceVersion should not be set on objects to be created",
        ));
    }
    let mut name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if name.is_empty()
        && let Some(prefix) = object
            .pointer("/metadata/generateName")
            .and_then(Value::as_str)
    {
        name = format!("{prefix}{}", store.random_suffix());
        object["metadata"]["name"] = json!(name);
    }
    check_namespace(store, route, &name)?;
    if !name.is_empty() && store.get(&route.rt, namespace_of(route), &name).is_some() {
        return Err(ApiError::already_exists(&route.rt, &name));
    }
    let manager = update_manager(request);
    finish_write(
        store,
        &request.identity,
        route,
        None,
        object,
        Ownership::Update(manager),
        WriteOptions::of(request, dry_run)?,
    )
}

fn check_resource_version(route: &ResourceRoute, old: &Value, new: &Value) -> Result<(), ApiError> {
    let wanted = new
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let current = old
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !wanted.is_empty() && wanted != current {
        return Err(ApiError::stale(
            &route.rt,
            route.name.as_deref().unwrap_or(""),
        ));
    }
    Ok(())
}

fn update(
    store: &mut Store,
    request: &Request,
    route: &ResourceRoute,
    dry_run: bool,
) -> Result<Reply, ApiError> {
    let mut object = parse_json(&request.body)?;
    check_identity(route, &mut object)?;
    let name = route.name.clone().unwrap_or_default();
    let old = store
        .get(&route.rt, namespace_of(route), &name)
        .cloned()
        .ok_or_else(|| ApiError::not_found(&route.rt, &name))?;
    check_resource_version(route, &old, &object)?;
    let unconditional = object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty);
    if route.rt.custom.is_some() && unconditional {
        return Err(ApiError::invalid(
            &route.rt,
            &name,
            vec![super::errors::Cause {
                reason: "FieldValueInvalid",
                field: "metadata.resourceVersion".into(),
                message: "Invalid value: 0x0: must be specified for an update".into(),
            }],
        ));
    }
    let manager = update_manager(request);
    finish_write(
        store,
        &request.identity,
        route,
        Some(&old),
        object,
        Ownership::Update(manager),
        WriteOptions::of(request, dry_run)?,
    )
}

fn patch(
    store: &mut Store,
    request: &Request,
    route: &ResourceRoute,
    dry_run: bool,
) -> Result<Reply, ApiError> {
    let name = route.name.clone().unwrap_or_default();
    let old = store.get(&route.rt, namespace_of(route), &name).cloned();
    let content_type = request.content_type.split(';').next().unwrap_or("").trim();
    if content_type == "application/apply-patch+yaml" {
        return apply(store, request, route, old, dry_run);
    }
    let old = old.ok_or_else(|| ApiError::not_found(&route.rt, &name))?;
    let mut new = present(&route.rt, &old);
    match content_type {
        "application/merge-patch+json" => {
            let patch = parse_json(&request.body)?;
            json_patch::merge(&mut new, &patch);
        }
        "application/json-patch+json" => {
            let patch: json_patch::Patch = serde_json::from_slice(&request.body).map_err(|e| {
                ApiError::bad_request(format!("the request body could not be decoded: {e}"))
            })?;
            json_patch::patch(&mut new, &patch).map_err(|e| {
                ApiError::new(
                    422,
                    "Invalid",
                    format!("the server rejected our request due to an error in our request: {e}"),
                )
            })?;
        }
        "application/strategic-merge-patch+json" if route.rt.custom.is_none() => {
            let patch = parse_json(&request.body)?;
            smp::patch(&mut new, &patch, Schema::of(&route.rt))
                .map_err(|e| ApiError::bad_request(e.to_string()))?;
        }
        other => return Err(ApiError::unsupported_media_type(other)),
    }
    if !new.is_object() {
        return Err(ApiError::new(
            422,
            "Invalid",
            "the patch turned the object into a non-object",
        ));
    }
    check_identity(route, &mut new)?;
    check_resource_version(route, &old, &new)?;
    let manager = update_manager(request);
    finish_write(
        store,
        &request.identity,
        route,
        Some(&old),
        new,
        Ownership::Update(manager),
        WriteOptions::of(request, dry_run)?,
    )
}

fn apply(
    store: &mut Store,
    request: &Request,
    route: &ResourceRoute,
    old: Option<Value>,
    dry_run: bool,
) -> Result<Reply, ApiError> {
    let Some(manager) = request.query.get("fieldManager").filter(|m| !m.is_empty()) else {
        return Err(ApiError::bad_request(
            "PATCH, application/apply-patch+yaml requires fieldManager to be set",
        ));
    };
    let text = std::str::from_utf8(&request.body)
        .map_err(|_| ApiError::bad_request("the apply body is not UTF-8"))?;
    let mut config = super::yaml::parse(text)
        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
    if !config.is_object() {
        return Err(ApiError::bad_request("the apply body must be an object"));
    }
    for field in ["apiVersion", "kind"] {
        if config
            .get(field)
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            return Err(ApiError::bad_request(format!("{field} must be set")));
        }
    }
    // The typed conversion sees the body as sent: its own namespace and name, if any.
    refuse_mistyped_applied_config(&route.rt, &config)?;
    check_identity(route, &mut config)?;
    validation::default_list_keys(&mut config);
    let name = route.name.clone().unwrap_or_default();
    if let Some(old) = &old {
        check_resource_version(route, old, &config)?;
    } else {
        let attributes = route.attributes("create");
        if !rbac::allowed(store, &request.identity, &attributes) {
            return Err(ApiError::forbidden(rbac::denial(
                &request.identity,
                &attributes,
            )));
        }
        check_namespace(store, route, &name)?;
    }
    if let Some(m) = config["metadata"].as_object_mut() {
        m.remove("resourceVersion");
    }
    let live = match &old {
        Some(old) => present(&route.rt, old),
        None => {
            let mut skeleton = json!({
                "apiVersion": route.rt.api_version(), "kind": route.rt.kind,
                "metadata": {"name": name},
            });
            if let Some(namespace) = &route.namespace {
                skeleton["metadata"]["namespace"] = json!(namespace);
            }
            skeleton
        }
    };
    if old.is_some() {
        refuse_live_untyped_at_managed_versions(&route.rt, &live)?;
    }
    let force = request.query.get("force").is_some_and(|f| f == "true");
    let (shape, api_version) = shape_of(&route.rt);
    let applied = managed::apply(
        &live,
        &config,
        shape,
        &ApplyRequest {
            manager,
            force,
            api_version: &api_version,
            scope: scope_of(&route.rt, route),
        },
    )
    .map_err(|conflicts| {
        let mut error = ApiError::new(409, "Conflict", managed::conflict_message(&conflicts));
        let mut details = json!({
            "name": name, "kind": route.rt.plural,
            "causes": conflicts.iter().map(|c| json!({
                "type": "FieldManagerConflict",
                "message": format!("conflict with \"{}\" using {}", c.manager, c.api_version),
                "field": c.path,
            })).collect::<Vec<_>>(),
        });
        if !route.rt.group.is_empty() {
            details["group"] = json!(route.rt.group);
        }
        error.details = Some(details);
        error
    })?;
    finish_write(
        store,
        &request.identity,
        route,
        old.as_ref(),
        applied,
        Ownership::Applied,
        WriteOptions::of(request, dry_run)?,
    )
}
