//! The resource types the test server serves: a fixed table of built-in kinds plus the kinds
//! that `CustomResourceDefinition`s register, and the discovery documents derived from them.

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// One served resource (group, version, plural) and what the server knows about it.
#[derive(Clone, Debug)]
pub struct ResourceType {
    pub group: String,
    pub version: String,
    pub plural: String,
    pub singular: String,
    pub kind: String,
    pub namespaced: bool,
    /// Whether `/status` is a subresource (writes to the main resource then ignore status).
    pub status_subresource: bool,
    /// Whether `metadata.generation` tracks spec changes.
    pub generation: bool,
    pub short_names: Vec<String>,
    /// Set for kinds registered by a CRD: the name of that CRD and its schema.
    pub custom: Option<CustomSchema>,
}

#[derive(Clone, Debug)]
pub struct CustomSchema {
    pub crd_name: String,
    /// The version objects are stored in; other served versions convert by rewriting
    /// `apiVersion` (conversion strategy `None`).
    pub storage_version: String,
    /// The version's `openAPIV3Schema`, if any.
    pub schema: Option<Value>,
    /// Every version of the CRD, served or not, with its schema: server-side apply types the
    /// live object at the version of each managed-fields entry.
    pub versions: std::sync::Arc<Vec<(String, Option<Value>)>>,
}

impl CustomSchema {
    /// The schema of `version` of the CRD: `None` when the CRD has no such version, `Some(None)`
    /// when it has one without a schema.
    pub fn version_schema(&self, version: &str) -> Option<Option<&Value>> {
        self.versions
            .iter()
            .find(|(name, _)| name == version)
            .map(|(_, schema)| schema.as_ref())
    }
}

impl ResourceType {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `deployments.apps`, as kube-apiserver names a resource in error messages.
    pub fn qualified_plural(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// `Deployment.apps`, as validation errors name a kind.
    pub fn qualified_kind(&self) -> String {
        if self.group.is_empty() {
            self.kind.clone()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }

    /// Where objects of this resource are stored, whatever version a request uses.
    pub fn storage_key(&self) -> (String, String) {
        (self.group.clone(), self.plural.clone())
    }

    fn api_resource(&self) -> Value {
        let mut verbs = vec![
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ];
        verbs.sort_unstable();
        let mut resource = json!({
            "name": self.plural,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": verbs,
        });
        if !self.short_names.is_empty() {
            resource["shortNames"] = json!(self.short_names);
        }
        resource
    }
}

/// (group, version, plural, kind, namespaced, status subresource, generation, short names)
type Row = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    bool,
    bool,
    bool,
    &'static [&'static str],
);

const BUILTINS: &[Row] = &[
    (
        "",
        "v1",
        "namespaces",
        "Namespace",
        false,
        true,
        false,
        &["ns"],
    ),
    (
        "",
        "v1",
        "configmaps",
        "ConfigMap",
        true,
        false,
        false,
        &["cm"],
    ),
    ("", "v1", "secrets", "Secret", true, false, false, &[]),
    (
        "",
        "v1",
        "serviceaccounts",
        "ServiceAccount",
        true,
        false,
        false,
        &["sa"],
    ),
    ("", "v1", "services", "Service", true, true, false, &["svc"]),
    ("", "v1", "pods", "Pod", true, true, false, &["po"]),
    (
        "",
        "v1",
        "persistentvolumeclaims",
        "PersistentVolumeClaim",
        true,
        true,
        false,
        &["pvc"],
    ),
    ("", "v1", "events", "Event", true, false, false, &["ev"]),
    (
        "",
        "v1",
        "resourcequotas",
        "ResourceQuota",
        true,
        true,
        false,
        &["quota"],
    ),
    (
        "apps",
        "v1",
        "deployments",
        "Deployment",
        true,
        true,
        true,
        &["deploy"],
    ),
    (
        "apps",
        "v1",
        "statefulsets",
        "StatefulSet",
        true,
        true,
        true,
        &["sts"],
    ),
    (
        "apps",
        "v1",
        "daemonsets",
        "DaemonSet",
        true,
        true,
        true,
        &["ds"],
    ),
    (
        "apps",
        "v1",
        "replicasets",
        "ReplicaSet",
        true,
        true,
        true,
        &["rs"],
    ),
    ("batch", "v1", "jobs", "Job", true, true, true, &[]),
    (
        "batch",
        "v1",
        "cronjobs",
        "CronJob",
        true,
        true,
        true,
        &["cj"],
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "roles",
        "Role",
        true,
        false,
        false,
        &[],
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "rolebindings",
        "RoleBinding",
        true,
        false,
        false,
        &[],
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "clusterroles",
        "ClusterRole",
        false,
        false,
        false,
        &[],
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "clusterrolebindings",
        "ClusterRoleBinding",
        false,
        false,
        false,
        &[],
    ),
    (
        "networking.k8s.io",
        "v1",
        "ingresses",
        "Ingress",
        true,
        true,
        true,
        &["ing"],
    ),
    (
        "networking.k8s.io",
        "v1",
        "networkpolicies",
        "NetworkPolicy",
        true,
        false,
        true,
        &["netpol"],
    ),
    (
        "networking.k8s.io",
        "v1",
        "ingressclasses",
        "IngressClass",
        false,
        false,
        false,
        &[],
    ),
    (
        "policy",
        "v1",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        true,
        true,
        true,
        &["pdb"],
    ),
    (
        "autoscaling",
        "v2",
        "horizontalpodautoscalers",
        "HorizontalPodAutoscaler",
        true,
        true,
        true,
        &["hpa"],
    ),
    (
        "storage.k8s.io",
        "v1",
        "storageclasses",
        "StorageClass",
        false,
        false,
        false,
        &["sc"],
    ),
    (
        "scheduling.k8s.io",
        "v1",
        "priorityclasses",
        "PriorityClass",
        false,
        false,
        false,
        &["pc"],
    ),
    (
        "coordination.k8s.io",
        "v1",
        "leases",
        "Lease",
        true,
        false,
        false,
        &[],
    ),
    (
        "events.k8s.io",
        "v1",
        "events",
        "Event",
        true,
        false,
        false,
        &["ev"],
    ),
    (
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        false,
        true,
        true,
        &["crd", "crds"],
    ),
    (
        "admissionregistration.k8s.io",
        "v1",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        false,
        false,
        true,
        &[],
    ),
    (
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        false,
        false,
        true,
        &[],
    ),
];

/// The built-in resource types.
pub fn builtins() -> Vec<ResourceType> {
    BUILTINS
        .iter()
        .map(
            |&(group, version, plural, kind, namespaced, status, generation, short)| ResourceType {
                group: group.into(),
                version: version.into(),
                plural: plural.into(),
                singular: kind.to_lowercase(),
                kind: kind.into(),
                namespaced,
                status_subresource: status,
                generation,
                short_names: short.iter().map(|s| s.to_string()).collect(),
                custom: None,
            },
        )
        .collect()
}

/// The resource types a CRD registers, one per served version; `None` when its spec is not
/// usable (the create is then rejected by validation first).
pub fn from_crd(crd: &Value) -> Vec<ResourceType> {
    let Some(spec) = crd.get("spec") else {
        return Vec::new();
    };
    let text = |v: &Value, p: &str| {
        v.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let group = text(spec, "/group");
    let names = &spec["names"];
    let plural = text(names, "/plural");
    let kind = text(names, "/kind");
    let singular = match text(names, "/singular") {
        s if s.is_empty() => kind.to_lowercase(),
        s => s,
    };
    let namespaced = text(spec, "/scope") != "Cluster";
    let short_names: Vec<String> = names["shortNames"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let versions = spec["versions"].as_array().cloned().unwrap_or_default();
    let storage_version = versions
        .iter()
        .find(|v| v["storage"] == json!(true))
        .map(|v| text(v, "/name"))
        .unwrap_or_default();
    let crd_name = text(crd, "/metadata/name");
    let all_versions = std::sync::Arc::new(
        versions
            .iter()
            .map(|v| {
                (
                    text(v, "/name"),
                    v.pointer("/schema/openAPIV3Schema").cloned(),
                )
            })
            .collect::<Vec<_>>(),
    );
    versions
        .iter()
        .filter(|v| v["served"] == json!(true))
        .map(|v| {
            let version = text(v, "/name");
            let schema = v.pointer("/schema/openAPIV3Schema").cloned();
            ResourceType {
                group: group.clone(),
                version,
                plural: plural.clone(),
                singular: singular.clone(),
                kind: kind.clone(),
                namespaced,
                status_subresource: v.pointer("/subresources/status").is_some(),
                generation: true,
                short_names: short_names.clone(),
                custom: Some(CustomSchema {
                    crd_name: crd_name.clone(),
                    storage_version: storage_version.clone(),
                    schema,
                    versions: all_versions.clone(),
                }),
            }
        })
        .collect()
}

/// The discovery documents for a set of resource types.
pub struct Discovery<'a> {
    /// The types discovery lists (a new CRD's kinds join them after a lag).
    pub types: Vec<&'a ResourceType>,
}

impl Discovery<'_> {
    /// `/api/v1` or `/apis/{group}/{version}`; `None` when nothing is served there.
    pub fn resource_list(&self, group: &str, version: &str) -> Option<Value> {
        let mut resources = Vec::new();
        for t in self
            .types
            .iter()
            .filter(|t| t.group == group && t.version == version)
        {
            resources.push(t.api_resource());
            if t.status_subresource {
                resources.push(json!({
                    "name": format!("{}/status", t.plural),
                    "singularName": "",
                    "namespaced": t.namespaced,
                    "kind": t.kind,
                    "verbs": ["get", "patch", "update"],
                }));
            }
        }
        if resources.is_empty() {
            return None;
        }
        let group_version = if group.is_empty() {
            version.to_string()
        } else {
            format!("{group}/{version}")
        };
        Some(json!({
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": group_version,
            "resources": resources,
        }))
    }

    fn groups(&self) -> BTreeMap<&str, Vec<&str>> {
        let mut groups: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for t in self.types.iter().filter(|t| !t.group.is_empty()) {
            let versions = groups.entry(&t.group).or_default();
            if !versions.contains(&t.version.as_str()) {
                versions.push(&t.version);
            }
        }
        groups
    }

    fn group(name: &str, versions: &[&str]) -> Value {
        let versions: Vec<Value> = versions
            .iter()
            .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
            .collect();
        json!({
            "name": name,
            "versions": versions,
            "preferredVersion": versions[0],
        })
    }

    /// `/apis`.
    pub fn group_list(&self) -> Value {
        let groups: Vec<Value> = self
            .groups()
            .iter()
            .map(|(name, versions)| Self::group(name, versions))
            .collect();
        json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
    }

    /// `/apis/{group}`.
    pub fn group_document(&self, group: &str) -> Option<Value> {
        let groups = self.groups();
        let versions = groups.get(group)?;
        let mut document = Self::group(group, versions);
        document["kind"] = json!("APIGroup");
        document["apiVersion"] = json!("v1");
        Some(document)
    }
}
