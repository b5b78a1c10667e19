//! Who is asking and whether they may. A request without a bearer token is the admin
//! (`system:masters`, as the harness's client certificate is on a real cluster); a bearer
//! token from a TokenRequest is its ServiceAccount; any other token is 401. `Impersonate-User`
//! and `Impersonate-Group` switch to another identity only when the caller may `impersonate`
//! it. Permissions come from the Roles, ClusterRoles and their bindings stored in the server,
//! evaluated as RBAC does, so tests grant access the same way on a real cluster.

use serde_json::{Value, json};

use super::store::Store;

#[derive(Clone, Debug)]
pub struct Identity {
    pub user: String,
    pub groups: Vec<String>,
}

/// What a request presents: a bearer token, and whom it asks to act as.
#[derive(Clone, Debug, Default)]
pub struct Credentials {
    pub bearer: Option<String>,
    pub impersonate_user: String,
    pub impersonate_groups: Vec<String>,
}

/// The identity a request acts as: its token's (or the admin's), then the impersonated one,
/// which the caller must be allowed to `impersonate` (users, groups and ServiceAccounts are
/// separate resources, as in RBAC).
pub fn authenticate(
    store: &Store,
    credentials: &Credentials,
) -> Result<Identity, super::errors::ApiError> {
    let caller = match &credentials.bearer {
        None => Identity::admin(),
        Some(token) => store
            .tokens
            .get(token)
            .cloned()
            .ok_or_else(|| super::errors::ApiError::new(401, "Unauthorized", "Unauthorized"))?,
    };
    let user = &credentials.impersonate_user;
    if user.is_empty() {
        return Ok(caller);
    }
    let service_account = user
        .strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.split_once(':'));
    let mut wanted = vec![match service_account {
        Some((namespace, name)) => ("serviceaccounts", namespace, name),
        None => ("users", "", user.as_str()),
    }];
    for group in &credentials.impersonate_groups {
        wanted.push(("groups", "", group.as_str()));
    }
    for (resource, namespace, name) in wanted {
        let attributes = Attributes {
            verb: "impersonate",
            group: "",
            resource,
            subresource: "",
            namespace,
            name,
        };
        if !allowed(store, &caller, &attributes) {
            return Err(super::errors::ApiError::forbidden(denial(
                &caller,
                &attributes,
            )));
        }
    }
    Ok(Identity::impersonated(
        user,
        &credentials.impersonate_groups,
    ))
}

impl Identity {
    /// Who a request is before it is authenticated.
    pub fn anonymous() -> Identity {
        Identity {
            user: "system:anonymous".into(),
            groups: vec!["system:unauthenticated".into()],
        }
    }

    pub fn service_account(namespace: &str, name: &str) -> Identity {
        Identity::impersonated(&format!("system:serviceaccount:{namespace}:{name}"), &[])
    }

    pub fn admin() -> Identity {
        Identity {
            user: "admin".into(),
            groups: vec!["system:masters".into(), "system:authenticated".into()],
        }
    }

    pub fn impersonated(user: &str, groups: &[String]) -> Identity {
        let mut all: Vec<String> = groups.to_vec();
        if let Some(rest) = user.strip_prefix("system:serviceaccount:")
            && let Some((namespace, _)) = rest.split_once(':')
        {
            all.push("system:serviceaccounts".into());
            all.push(format!("system:serviceaccounts:{namespace}"));
        }
        all.push("system:authenticated".into());
        Identity {
            user: user.into(),
            groups: all,
        }
    }
}

/// One request's attributes, as RBAC sees them.
pub struct Attributes<'a> {
    pub verb: &'a str,
    pub group: &'a str,
    pub resource: &'a str,
    pub subresource: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
}

fn strings(value: &Value, key: &str) -> Vec<String> {
    value
        .get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn subject_matches(subject: &Value, identity: &Identity, binding_namespace: &str) -> bool {
    let name = subject.get("name").and_then(Value::as_str).unwrap_or("");
    match subject.get("kind").and_then(Value::as_str) {
        Some("User") => identity.user == name,
        Some("Group") => identity.groups.iter().any(|g| g == name),
        Some("ServiceAccount") => {
            let namespace = subject
                .get("namespace")
                .and_then(Value::as_str)
                .unwrap_or(binding_namespace);
            identity.user == format!("system:serviceaccount:{namespace}:{name}")
        }
        _ => false,
    }
}

fn rule_allows(rule: &Value, attributes: &Attributes) -> bool {
    let any = |list: &[String], wanted: &str| list.iter().any(|v| v == "*" || v == wanted);
    let resource = if attributes.subresource.is_empty() {
        attributes.resource.to_string()
    } else {
        format!("{}/{}", attributes.resource, attributes.subresource)
    };
    let names = strings(rule, "resourceNames");
    any(&strings(rule, "verbs"), attributes.verb)
        && any(&strings(rule, "apiGroups"), attributes.group)
        && any(&strings(rule, "resources"), &resource)
        && (names.is_empty()
            || (!attributes.name.is_empty() && names.iter().any(|n| n == attributes.name)))
}

pub fn allowed(store: &Store, identity: &Identity, attributes: &Attributes) -> bool {
    authorized(store, identity, attributes, View::Authorizer)
}

/// Where RBAC objects are read from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum View {
    /// The authorizer's informer cache: a Role or binding written moments ago is not there
    /// yet (`Store::rbac_visible`, `rbac_lag`), as kube-apiserver's authorizer sees it a
    /// little later.
    Authorizer,
    /// Storage, as the escalation check's rule resolver reads it: every write at once.
    Storage,
}

fn authorized(store: &Store, identity: &Identity, attributes: &Attributes, view: View) -> bool {
    if identity.groups.iter().any(|g| g == "system:masters") {
        return true;
    }
    let now = std::time::Instant::now();
    let visible = |key: &(String, String, String, String)| {
        view == View::Storage || store.rbac_visible(key, now)
    };
    let role_rules = |kind: &str, namespace: &str, name: &str| -> Vec<Value> {
        let (plural, ns) = if kind == "ClusterRole" {
            ("clusterroles", "")
        } else {
            ("roles", namespace)
        };
        let key = (
            "rbac.authorization.k8s.io".to_string(),
            plural.to_string(),
            ns.to_string(),
            name.to_string(),
        );
        store
            .objects
            .get(&key)
            .filter(|_| visible(&key))
            .and_then(|role| role.get("rules").and_then(Value::as_array).cloned())
            .unwrap_or_default()
    };
    let rbac = "rbac.authorization.k8s.io";
    let role_bindings = (!attributes.namespace.is_empty())
        .then(|| store.stored(rbac, "rolebindings", Some(attributes.namespace)))
        .into_iter()
        .flatten();
    let bindings = store
        .stored(rbac, "clusterrolebindings", None)
        .chain(role_bindings);
    for (key, binding) in bindings {
        if !visible(key) {
            continue;
        }
        let namespace = &key.2;
        let subjects = binding.get("subjects").and_then(Value::as_array);
        if !subjects
            .into_iter()
            .flatten()
            .any(|s| subject_matches(s, identity, namespace))
        {
            continue;
        }
        let role_kind = binding
            .pointer("/roleRef/kind")
            .and_then(Value::as_str)
            .unwrap_or("");
        let role_name = binding
            .pointer("/roleRef/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        if role_rules(role_kind, namespace, role_name)
            .iter()
            .any(|rule| rule_allows(rule, attributes))
        {
            return true;
        }
    }
    false
}

/// RBAC's denial message.
pub fn denial(identity: &Identity, attributes: &Attributes) -> String {
    let resource = if attributes.subresource.is_empty() {
        attributes.resource.to_string()
    } else {
        format!("{}/{}", attributes.resource, attributes.subresource)
    };
    let qualified = if attributes.group.is_empty() {
        attributes.resource.to_string()
    } else {
        format!("{}.{}", attributes.resource, attributes.group)
    };
    let subject = if attributes.name.is_empty() {
        format!("{qualified} is forbidden")
    } else {
        format!("{qualified} \"{}\" is forbidden", attributes.name)
    };
    let scope = if attributes.namespace.is_empty() {
        "at the cluster scope".to_string()
    } else {
        format!("in the namespace \"{}\"", attributes.namespace)
    };
    format!(
        "{subject}: User \"{}\" cannot {} resource \"{resource}\" in API group \"{}\" {scope}",
        identity.user, attributes.verb, attributes.group
    )
}

/// RBAC's escalation prevention on writes of Roles, ClusterRoles and their bindings, as
/// kube-apiserver's policy-based storage does: a role may only hold rules its writer holds
/// (unless the writer may `escalate`), and a binding may only grant a role whose rules its
/// writer holds (unless the writer may `bind` it); a binding to a role that does not exist
/// is NotFound, named with the binding's resource and the role's name.
pub fn check_escalation(
    store: &Store,
    identity: &Identity,
    rt: &super::resources::ResourceType,
    namespace: &str,
    object: &Value,
) -> Result<(), super::errors::ApiError> {
    if rt.group != "rbac.authorization.k8s.io"
        || identity.groups.iter().any(|g| g == "system:masters")
    {
        return Ok(());
    }
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let may = |verb: &str, resource: &str, resource_name: &str| {
        allowed(
            store,
            identity,
            &Attributes {
                verb,
                group: "rbac.authorization.k8s.io",
                resource,
                subresource: "",
                namespace,
                name: resource_name,
            },
        )
    };
    let rules = match rt.plural.as_str() {
        "roles" | "clusterroles" => {
            if may("escalate", &rt.plural, name) {
                return Ok(());
            }
            object
                .get("rules")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        }
        "rolebindings" | "clusterrolebindings" => {
            let role_kind = object
                .pointer("/roleRef/kind")
                .and_then(Value::as_str)
                .unwrap_or("");
            let role_name = object
                .pointer("/roleRef/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            let (plural, role_namespace) = match role_kind {
                "ClusterRole" => ("clusterroles", ""),
                _ => ("roles", namespace),
            };
            if may("bind", plural, role_name) {
                return Ok(());
            }
            let key = (
                "rbac.authorization.k8s.io".to_string(),
                plural.to_string(),
                role_namespace.to_string(),
                role_name.to_string(),
            );
            let Some(role) = store.objects.get(&key) else {
                return Err(super::errors::ApiError::not_found(rt, role_name));
            };
            role.get("rules")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        }
        _ => return Ok(()),
    };
    let missing: Vec<String> = rules
        .iter()
        .filter(|rule| !rule_held(store, identity, namespace, rule))
        .map(|rule| rule.to_string())
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let subject = format!("{} \"{name}\" is forbidden", rt.qualified_plural());
    Err(super::errors::ApiError::forbidden(format!(
        "{subject}: user \"{}\" (groups={:?}) is attempting to grant RBAC permissions not currently held:\n{}",
        identity.user,
        identity.groups,
        missing.join("\n")
    )))
}

/// Whether `identity` holds every permission `rule` grants, in `namespace` (cluster scope
/// when empty). Wildcards in `rule` are held only by wildcards.
fn rule_held(store: &Store, identity: &Identity, namespace: &str, rule: &Value) -> bool {
    if !strings(rule, "nonResourceURLs").is_empty() {
        return namespace.is_empty() && identity.groups.iter().any(|g| g == "system:masters");
    }
    let names = strings(rule, "resourceNames");
    let names: Vec<&str> = if names.is_empty() {
        vec![""]
    } else {
        names.iter().map(String::as_str).collect()
    };
    let verbs = strings(rule, "verbs");
    let groups = strings(rule, "apiGroups");
    let resources = strings(rule, "resources");
    verbs.iter().all(|verb| {
        groups.iter().all(|group| {
            resources.iter().all(|resource| {
                let (resource, subresource) = resource.split_once('/').unwrap_or((resource, ""));
                names.iter().all(|name| {
                    authorized(
                        store,
                        identity,
                        &Attributes {
                            verb,
                            group,
                            resource,
                            subresource,
                            namespace,
                            name,
                        },
                        View::Storage,
                    )
                })
            })
        })
    })
}

/// TokenRequest: a bearer token that authenticates as the ServiceAccount, as
/// `kubectl create token` gets one. Like kube-apiserver's, it is a JWT whose `aud` holds the
/// audiences asked for (the API server's own when none are) and whose `sub` names the
/// account, signed by the key `/openid/v1/jwks` publishes ([`crate::issuer`]).
pub fn token_request(
    store: &mut Store,
    request: &super::handler::Request,
    route: &super::handler::ResourceRoute,
) -> Result<super::handler::Reply, super::errors::ApiError> {
    let namespace = route.namespace.clone().unwrap_or_default();
    let name = route.name.clone().unwrap_or_default();
    if store.get(&route.rt, &namespace, &name).is_none() {
        return Err(super::errors::ApiError::not_found(&route.rt, &name));
    }
    let asked: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
    let audiences = match asked.pointer("/spec/audiences").and_then(Value::as_array) {
        Some(audiences) if !audiences.is_empty() => Value::Array(audiences.clone()),
        _ => json!(["https://kubernetes.default.svc"]),
    };
    let now = jiff::Timestamp::now();
    let expiry = now + jiff::SignedDuration::from_hours(1);
    // The token's own id (`jti`) makes each one different, as kube-apiserver's are.
    let claims = json!({"aud": audiences, "exp": expiry.as_second(), "iat": now.as_second(),
        "nbf": now.as_second(), "iss": "https://kubernetes.default.svc", "jti": store.new_uid(),
        "sub": format!("system:serviceaccount:{namespace}:{name}"),
        "kubernetes.io": {"namespace": namespace, "serviceaccount": {"name": name}}});
    let token = super::issuer::issuer().sign(&claims);
    store
        .tokens
        .insert(token.clone(), Identity::service_account(&namespace, &name));
    Ok(super::handler::Reply::new(
        201,
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"audiences": audiences, "expirationSeconds": 3600},
            "status": {"token": token,
                "expirationTimestamp": expiry.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()}}),
    ))
}
