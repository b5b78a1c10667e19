//! What the real server does to an object before storing it: defaulting, the validation
//! rules the controller runs into (names, required fields, immutable fields), and for custom
//! resources the structural schema (pruning unknown fields, types, required, enums).

use serde_json::{Map, Value, json};

use super::errors::Cause;
use super::resources::ResourceType;

fn required(field: &str) -> Cause {
    Cause {
        reason: "FieldValueRequired",
        field: field.into(),
        message: "Required value".into(),
    }
}

fn invalid(field: &str, value: &Value, detail: &str) -> Cause {
    let shown = match value {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    };
    Cause {
        reason: "FieldValueInvalid",
        field: field.into(),
        message: format!("Invalid value: {shown}: {detail}"),
    }
}

fn forbidden(field: &str, detail: &str) -> Cause {
    Cause {
        reason: "FieldValueForbidden",
        field: field.into(),
        message: format!("Forbidden: {detail}"),
    }
}

fn immutable(field: &str, value: &Value) -> Cause {
    invalid(field, value, "field is immutable")
}

/// Fills in what the server defaults. `allocated_ip` is the next free cluster IP.
pub fn default_object(
    rt: &ResourceType,
    old: Option<&Value>,
    object: &mut Value,
    allocated_ip: &str,
) {
    if rt.custom.is_some() {
        return;
    }
    default_list_keys(object);
    let name = object
        .pointer("/metadata/name")
        .cloned()
        .unwrap_or(Value::Null);
    match (rt.group.as_str(), rt.kind.as_str()) {
        ("", "Namespace") => {
            object["metadata"]["labels"]["kubernetes.io/metadata.name"] = name;
            if object.pointer("/spec/finalizers").is_none() {
                object["spec"]["finalizers"] = json!(["kubernetes"]);
            }
            if object.pointer("/status/phase").is_none() {
                object["status"]["phase"] = json!("Active");
            }
        }
        ("", "Secret") => {
            if object.get("type").is_none() {
                object["type"] = json!("Opaque");
            }
            if let Some(Value::Object(string_data)) =
                object.as_object_mut().and_then(|o| o.remove("stringData"))
            {
                use base64::Engine as _;
                for (key, value) in string_data {
                    let text = value.as_str().unwrap_or("").to_string();
                    object["data"][key] =
                        json!(base64::engine::general_purpose::STANDARD.encode(text));
                }
            }
        }
        ("", "Service") => default_service(old, object, allocated_ip),
        ("apps", "Deployment") => {
            let spec = &mut object["spec"];
            if spec.get("replicas").is_none() {
                spec["replicas"] = json!(1);
            }
            if spec.get("revisionHistoryLimit").is_none() {
                spec["revisionHistoryLimit"] = json!(10);
            }
            if spec.get("progressDeadlineSeconds").is_none() {
                spec["progressDeadlineSeconds"] = json!(600);
            }
            if spec.get("strategy").is_none() {
                spec["strategy"] = json!({"type": "RollingUpdate",
                    "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}});
            }
        }
        ("batch", "Job") => default_job(object),
        _ => {}
    }
}

/// A Service's defaults, and its cluster IP: the one it had, else `allocated_ip`.
fn default_service(old: Option<&Value>, object: &mut Value, allocated_ip: &str) {
    let spec = &mut object["spec"];
    if spec.get("type").is_none() {
        spec["type"] = json!("ClusterIP");
    }
    if spec.get("sessionAffinity").is_none() {
        spec["sessionAffinity"] = json!("None");
    }
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for port in ports {
            if port.get("targetPort").is_none()
                && let Some(number) = port.get("port").cloned()
            {
                port["targetPort"] = number;
            }
        }
    }
    let unset = spec.get("clusterIP").is_none_or(|ip| ip == "");
    if spec["type"] != json!("ExternalName") && unset {
        let previous = old.and_then(|o| o.pointer("/spec/clusterIP")).cloned();
        let ip = previous.unwrap_or_else(|| json!(allocated_ip));
        spec["clusterIPs"] = json!([ip.clone()]);
        spec["clusterIP"] = ip;
        spec["ipFamilies"] = json!(["IPv4"]);
        spec["ipFamilyPolicy"] = json!("SingleStack");
        spec["internalTrafficPolicy"] = json!("Cluster");
    }
}

/// A Job's defaults, and the selector and labels the Job controller gives its Pods.
fn default_job(object: &mut Value) {
    let manual = object.pointer("/spec/manualSelector") == Some(&json!(true));
    let uid = object.pointer("/metadata/uid").cloned();
    if !manual
        && object.pointer("/spec/selector").is_none()
        && let Some(uid) = uid
    {
        let job_name = object["metadata"]["name"].clone();
        object["spec"]["selector"] =
            json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}});
        let labels = &mut object["spec"]["template"]["metadata"]["labels"];
        labels["batch.kubernetes.io/controller-uid"] = uid.clone();
        labels["batch.kubernetes.io/job-name"] = job_name.clone();
        labels["controller-uid"] = uid;
        labels["job-name"] = job_name;
    }
    for (field, default) in [("backoffLimit", 6), ("completions", 1), ("parallelism", 1)] {
        if object.pointer(&format!("/spec/{field}")).is_none() {
            object["spec"][field] = json!(default);
        }
    }
}

/// Defaults that are part of list-item keys (`protocol` of ports), which the real server
/// fills in before it merges an applied configuration.
pub fn default_list_keys(object: &mut Value) {
    fn walk(value: &mut Value, in_ports: bool) {
        match value {
            Value::Object(map) => {
                if in_ports && (map.contains_key("containerPort") || map.contains_key("port")) {
                    map.entry("protocol").or_insert_with(|| json!("TCP"));
                }
                for (key, child) in map.iter_mut() {
                    walk(child, key == "ports");
                }
            }
            Value::Array(items) => {
                for item in items {
                    walk(item, in_ports);
                }
            }
            _ => {}
        }
    }
    walk(object, false);
}

fn is_dns_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

fn is_dns_subdomain(name: &str) -> bool {
    name.len() <= 253 && name.split('.').all(is_dns_label)
}

/// Kubernetes' label-value and qualified-name part rule: empty, or at most 63 alphanumerics,
/// '-', '_' and '.', starting and ending alphanumeric.
fn is_label_part(text: &str, may_be_empty: bool) -> bool {
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    (text.is_empty() && may_be_empty)
        || (text.len() <= 63
            && edge(text.chars().next())
            && edge(text.chars().last())
            && text
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
}

/// `metadata.labels` as kube-apiserver's ObjectMeta validation checks them, in its words.
fn validate_labels(object: &Value, causes: &mut Vec<Cause>) {
    let Some(labels) = object
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
    else {
        return;
    };
    for (key, value) in labels {
        let (prefix, name) = match key.split_once('/') {
            Some((prefix, name)) => (Some(prefix), name),
            None => (None, key.as_str()),
        };
        if prefix.is_some_and(|p| !is_dns_subdomain(p)) {
            causes.push(invalid(
                "metadata.labels",
                &json!(key),
                "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            ));
        }
        if !is_label_part(name, false) {
            causes.push(invalid(
                "metadata.labels",
                &json!(key),
                "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
            ));
        }
        let text = value.as_str().unwrap_or_default();
        if text.len() > 63 {
            causes.push(invalid(
                "metadata.labels",
                value,
                "must be no more than 63 characters",
            ));
        } else if !is_label_part(text, true) {
            causes.push(invalid(
                "metadata.labels",
                value,
                "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
            ));
        }
    }
}

fn name_rule(rt: &ResourceType) -> (fn(&str) -> bool, &'static str) {
    match (rt.group.as_str(), rt.kind.as_str()) {
        ("", "Namespace") | ("", "Service") => (
            is_dns_label,
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
        ),
        ("rbac.authorization.k8s.io", _) => (
            |n: &str| {
                !n.is_empty() && n != "." && n != ".." && !n.contains('/') && !n.contains('%')
            },
            "may not contain '/' or '%'",
        ),
        _ => (
            is_dns_subdomain,
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
        ),
    }
}

/// Validation of a create (`old` is `None`) or an update.
pub fn validate(rt: &ResourceType, old: Option<&Value>, new: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let name = new
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if name.is_empty() {
        causes.push(Cause {
            reason: "FieldValueRequired",
            field: "metadata.name".into(),
            message: "Required value: name or generateName is required".into(),
        });
    } else {
        let (rule, detail) = name_rule(rt);
        if !rule(name) {
            causes.push(invalid("metadata.name", &json!(name), detail));
        }
    }
    validate_labels(new, &mut causes);
    if let Some(old) = old
        && old.pointer("/metadata/deletionTimestamp").is_some()
    {
        let old_finalizers = old
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array);
        let new_finalizers = new
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array);
        if let Some(added) = new_finalizers
            .into_iter()
            .flatten()
            .find(|f| old_finalizers.is_none_or(|o| !o.contains(f)))
        {
            causes.push(forbidden(
                "metadata.finalizers",
                &format!("no new finalizers can be added if the object is being deleted, found new finalizers []string{{{added}}}"),
            ));
        }
    }
    match (rt.group.as_str(), rt.kind.as_str()) {
        ("", "ConfigMap") | ("", "Secret") => validate_immutable_data(old, new, &mut causes),
        ("apps", "Deployment" | "ReplicaSet" | "DaemonSet" | "StatefulSet") => {
            validate_workload(rt, old, new, &mut causes)
        }
        ("batch", "Job") => {
            if let Some(old) = old {
                for field in ["template", "selector", "completions"] {
                    let pointer = format!("/spec/{field}");
                    if old.pointer(&pointer) != new.pointer(&pointer) {
                        let value = new.pointer(&pointer).cloned().unwrap_or(Value::Null);
                        causes.push(immutable(&format!("spec.{field}"), &value));
                    }
                }
            }
            validate_pod_template(new, "spec.template", &mut causes);
        }
        ("", "Service") => {
            if let Some(old) = old {
                let before = old.pointer("/spec/clusterIP");
                let after = new.pointer("/spec/clusterIP");
                if before.is_some() && after.is_some() && before != after {
                    causes.push(immutable("spec.clusterIP", after.unwrap_or(&Value::Null)));
                }
            }
            // kube-apiserver's ValidateService: the type is one of four.
            const TYPES: [&str; 4] = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];
            if let Some(kind) = new.pointer("/spec/type").and_then(Value::as_str)
                && !TYPES.contains(&kind)
            {
                let supported: Vec<String> = TYPES.iter().map(|t| format!("{t:?}")).collect();
                causes.push(Cause {
                    reason: "FieldValueNotSupported",
                    field: "spec.type".into(),
                    message: format!(
                        "Unsupported value: {kind:?}: supported values: {}",
                        supported.join(", ")
                    ),
                });
            }
            let ports = new.pointer("/spec/ports").and_then(Value::as_array);
            let headless = new.pointer("/spec/clusterIP") == Some(&json!("None"));
            let external = new.pointer("/spec/type") == Some(&json!("ExternalName"));
            if ports.is_none_or(Vec::is_empty) && !headless && !external {
                causes.push(required("spec.ports"));
            }
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => validate_crd(new, &mut causes),
        // kube-apiserver's ValidateRoleBindingUpdate (ClusterRoleBindings alike).
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => {
            if let Some(old) = old
                && old.get("roleRef") != new.get("roleRef")
            {
                let text = |field: &str| new["roleRef"][field].as_str().unwrap_or("").to_string();
                causes.push(Cause {
                    reason: "FieldValueInvalid",
                    field: "roleRef".into(),
                    message: format!(
                        "Invalid value: rbac.RoleRef{{APIGroup:{:?}, Kind:{:?}, Name:{:?}}}: \
                         cannot change roleRef",
                        text("apiGroup"),
                        text("kind"),
                        text("name")
                    ),
                });
            }
        }
        // kube-apiserver's ValidateStorageClassUpdate.
        ("storage.k8s.io", "StorageClass") => {
            if let Some(old) = old {
                for field in ["parameters", "provisioner", "reclaimPolicy"] {
                    if old.get(field) != new.get(field) {
                        causes.push(forbidden(
                            field,
                            &format!("updates to {field} are forbidden."),
                        ));
                    }
                }
                if old.get("volumeBindingMode") != new.get("volumeBindingMode") {
                    let value = new.get("volumeBindingMode").cloned().unwrap_or(Value::Null);
                    causes.push(immutable("volumeBindingMode", &value));
                }
            }
        }
        _ => {}
    }
    if let Some(custom) = &rt.custom
        && let Some(schema) = &custom.schema
    {
        validate_against_schema(new, schema, "", &mut causes, true);
    }
    causes
}

fn validate_immutable_data(old: Option<&Value>, new: &Value, causes: &mut Vec<Cause>) {
    let Some(old) = old else {
        return;
    };
    if old.get("immutable") != Some(&json!(true)) {
        if old.get("type").is_some()
            && new.get("type").is_some()
            && old.get("type") != new.get("type")
        {
            causes.push(immutable("type", &new["type"]));
        }
        return;
    }
    let detail = "field is immutable when `immutable` is set";
    for field in ["data", "binaryData"] {
        if old.get(field) != new.get(field) {
            causes.push(forbidden(field, detail));
        }
    }
    if new.get("immutable") != Some(&json!(true)) {
        causes.push(forbidden("immutable", detail));
    }
}

fn validate_workload(rt: &ResourceType, old: Option<&Value>, new: &Value, causes: &mut Vec<Cause>) {
    let selector = new.pointer("/spec/selector");
    match selector {
        None => causes.push(required("spec.selector")),
        Some(selector) => {
            let labels = new.pointer("/spec/template/metadata/labels");
            let matches = selector
                .get("matchLabels")
                .and_then(Value::as_object)
                .is_none_or(|wanted| {
                    wanted
                        .iter()
                        .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
                });
            if !matches {
                causes.push(invalid(
                    "spec.template.metadata.labels",
                    labels.unwrap_or(&Value::Null),
                    "`selector` does not match template `labels`",
                ));
            }
        }
    }
    if let Some(old) = old {
        if old.pointer("/spec/selector") != selector {
            causes.push(immutable("spec.selector", selector.unwrap_or(&Value::Null)));
        }
        if rt.kind == "StatefulSet" {
            let allowed = [
                "replicas",
                "ordinals",
                "template",
                "updateStrategy",
                "persistentVolumeClaimRetentionPolicy",
                "minReadySeconds",
                "selector",
            ];
            let strip = |v: &Value| -> Map<String, Value> {
                let mut spec = v
                    .get("spec")
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default();
                spec.retain(|k, _| !allowed.contains(&k.as_str()));
                spec
            };
            if strip(old) != strip(new) {
                causes.push(forbidden("spec", "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"));
            }
        }
    }
    validate_pod_template(new, "spec.template", causes);
}

fn validate_pod_template(object: &Value, path: &str, causes: &mut Vec<Cause>) {
    let pointer = format!("/{}/spec/containers", path.replace('.', "/"));
    match object.pointer(&pointer).and_then(Value::as_array) {
        None => causes.push(required(&format!("{path}.spec.containers"))),
        Some(containers) => {
            for (i, container) in containers.iter().enumerate() {
                for field in ["name", "image"] {
                    if container
                        .get(field)
                        .and_then(Value::as_str)
                        .is_none_or(str::is_empty)
                    {
                        causes.push(required(&format!("{path}.spec.containers[{i}].{field}")));
                    }
                }
            }
        }
    }
}

fn validate_crd(crd: &Value, causes: &mut Vec<Cause>) {
    let text = |p: &str| crd.pointer(p).and_then(Value::as_str).unwrap_or("");
    let (group, plural) = (text("/spec/group"), text("/spec/names/plural"));
    if group.is_empty() {
        causes.push(required("spec.group"));
    }
    if plural.is_empty() {
        causes.push(required("spec.names.plural"));
    }
    if text("/spec/names/kind").is_empty() {
        causes.push(required("spec.names.kind"));
    }
    let expected = format!("{plural}.{group}");
    if text("/metadata/name") != expected {
        causes.push(invalid(
            "metadata.name",
            &json!(text("/metadata/name")),
            "must be spec.names.plural+\".\"+spec.group",
        ));
    }
    let versions = crd.pointer("/spec/versions").and_then(Value::as_array);
    let storage = versions
        .into_iter()
        .flatten()
        .filter(|v| v.get("storage") == Some(&json!(true)))
        .count();
    if storage != 1 {
        causes.push(invalid(
            "spec.versions",
            &json!(storage),
            "must have exactly one version marked as storage version",
        ));
    }
}

fn type_matches(value: &Value, expected: &str, schema: &Value) -> bool {
    if schema.get("x-kubernetes-int-or-string") == Some(&json!(true)) {
        return value.is_string() || value.is_i64() || value.is_u64();
    }
    match expected {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        _ => true,
    }
}

/// A JSON value's type as kube-openapi's validator names it.
fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Checks a custom resource against its structural schema and prunes unknown fields.
fn validate_against_schema(
    value: &Value,
    schema: &Value,
    path: &str,
    causes: &mut Vec<Cause>,
    root: bool,
) {
    if value.is_null() && schema.get("nullable") == Some(&json!(true)) {
        return;
    }
    if let Some(expected) = schema.get("type").and_then(Value::as_str)
        && !type_matches(value, expected, schema)
    {
        // kube-openapi's validator names the value by its JSON type, twice.
        let field = path.trim_start_matches('.').to_string();
        let found = json_type(value);
        causes.push(Cause {
            reason: "FieldValueTypeInvalid",
            message: format!(
                "Invalid value: \"{found}\": {field} in body must be of type {expected}: \"{found}\""
            ),
            field,
        });
        return;
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        let list: Vec<String> = allowed.iter().map(Value::to_string).collect();
        causes.push(Cause {
            reason: "FieldValueNotSupported",
            field: path.trim_start_matches('.').to_string(),
            message: format!(
                "Unsupported value: {value}: supported values: {}",
                list.join(", ")
            ),
        });
    }
    if let Value::Object(map) = value {
        if let Some(required) = schema.get("required").and_then(Value::as_array) {
            for field in required.iter().filter_map(Value::as_str) {
                if !map.contains_key(field) {
                    causes.push(Cause {
                        reason: "FieldValueRequired",
                        field: format!("{path}.{field}")
                            .trim_start_matches('.')
                            .to_string(),
                        message: "Required value".into(),
                    });
                }
            }
        }
        let properties = schema.get("properties").and_then(Value::as_object);
        for (key, child) in map {
            if root && (key == "metadata" || key == "apiVersion" || key == "kind") {
                continue;
            }
            let child_schema = properties
                .and_then(|p| p.get(key))
                .or_else(|| schema.get("additionalProperties").filter(|a| a.is_object()));
            if let Some(child_schema) = child_schema {
                validate_against_schema(
                    child,
                    child_schema,
                    &format!("{path}.{key}"),
                    causes,
                    false,
                );
            }
        }
    }
    if let (Value::Array(items), Some(item_schema)) = (value, schema.get("items")) {
        for (i, item) in items.iter().enumerate() {
            validate_against_schema(item, item_schema, &format!("{path}[{i}]"), causes, false);
        }
    }
}

/// Fills in the schema's `default`s where the parent exists, as the server does for custom
/// resources on every write.
pub fn apply_schema_defaults(value: &mut Value, schema: &Value) {
    match value {
        Value::Object(map) => {
            if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                for (key, property) in properties {
                    if !map.contains_key(key)
                        && let Some(default) = property.get("default")
                    {
                        map.insert(key.clone(), default.clone());
                    }
                }
                for (key, child) in map.iter_mut() {
                    if let Some(property) = properties.get(key) {
                        apply_schema_defaults(child, property);
                    }
                }
            } else if let Some(additional) =
                schema.get("additionalProperties").filter(|a| a.is_object())
            {
                for child in map.values_mut() {
                    apply_schema_defaults(child, additional);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    apply_schema_defaults(item, item_schema);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_follow_kubernetes_rules() {
        let causes = |labels: Value| {
            let mut found = Vec::new();
            validate_labels(&json!({"metadata": {"labels": labels}}), &mut found);
            found.into_iter().map(|c| c.message).collect::<Vec<_>>()
        };
        assert!(
            causes(json!({"app.kubernetes.io/name": "web", "empty": "", "a_b": "x.y-z_1"}))
                .is_empty()
        );
        let unsubstituted = causes(json!({"color": "${color:=blue}"}));
        assert_eq!(unsubstituted.len(), 1);
        assert!(unsubstituted[0].starts_with(
            "Invalid value: \"${color:=blue}\": a valid label must be an empty string"
        ));
        assert_eq!(causes(json!({"long": "a".repeat(64)})).len(), 1);
        assert_eq!(causes(json!({"-bad": "x"})).len(), 1);
        assert_eq!(causes(json!({"Bad_Prefix/x": "x"})).len(), 1);
    }

    #[test]
    fn names_follow_dns_rules() {
        assert!(is_dns_subdomain("a.b-c"));
        assert!(!is_dns_subdomain("A"));
        assert!(!is_dns_label("a.b"));
    }
}
