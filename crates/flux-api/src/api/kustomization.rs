//! `kustomize.toolkit.fluxcd.io/v1` `Kustomization`: spec and status, wire-compatible with Flux.
//!
//! Field names, optionality, defaults and validation follow Flux's CRD (kustomize-controller
//! v1.9); the CRD we ship is generated from these types (see `crd.rs`) and checked against
//! Flux's in the integration tests. Descriptions are our own wording.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::duration::GoDuration;
use super::inventory::ResourceInventory;
use super::schema::{condition_list_schema, only_status_level_default, status_default};

/// The desired state: which source to build, how to build it and how to apply it.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kustomize.toolkit.fluxcd.io",
    version = "v1",
    kind = "Kustomization",
    plural = "kustomizations",
    singular = "kustomization",
    namespaced,
    status = "KustomizationStatus",
    shortname = "ks",
    category = "all",
    category = "fluxcd",
    category = "fluxcd-appliers",
    annotation("kustomize.toolkit.fluxcd.io/substitute", "disabled"),
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Status","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].message"}"#,
    doc = "A Kustomization builds a path of a source artifact with kustomize and applies the result to the cluster."
)]
#[serde(rename_all = "camelCase")]
pub struct KustomizationSpec {
    /// Labels and annotations set on every applied object, overriding keys of the same name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub common_metadata: Option<CommonMetadata>,

    /// Kustomizations that must be ready before this one is reconciled.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<DependencyReference>,

    /// How to decrypt SOPS-encrypted secrets before applying them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decryption: Option<Decryption>,

    /// How often to reconcile; the controller may add jitter.
    pub interval: GoDuration,

    /// How soon to retry after a failed reconciliation; defaults to `interval`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_interval: Option<GoDuration>,

    /// A kubeconfig for applying to a remote cluster instead of the local one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube_config: Option<KubeConfigReference>,

    /// Directory inside the artifact to build; defaults to the artifact root. A directory
    /// without a kustomization.yaml gets one generated from its plain manifests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,

    /// Steps run on the built manifests before they are applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_build: Option<PostBuild>,

    /// Delete objects that were applied before but are no longer in the build.
    pub prune: bool,

    /// What to do with the applied objects when the Kustomization is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_policy: Option<DeletionPolicy>,

    /// Objects whose health gates readiness (ignored when `wait` is set).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub health_checks: Vec<NamespacedObjectKindReference>,

    /// Prefix for the names of all applied objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 200))]
    pub name_prefix: Option<String>,

    /// Suffix for the names of all applied objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 200))]
    pub name_suffix: Option<String>,

    /// Strategic merge or JSON 6902 patches applied to the build, optionally to a target set.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub patches: Vec<Patch>,

    /// Image name, tag and digest overrides.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<Image>,

    /// Service account to impersonate while applying.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,

    /// The source whose artifact holds the manifests.
    pub source_ref: CrossNamespaceSourceReference,

    /// Stop reconciling until unset; a running reconciliation finishes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,

    /// Namespace set on every namespaced object, overriding the kustomization's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub target_namespace: Option<String>,

    /// Time limit for apply and health checks; defaults to `interval`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<GoDuration>,

    /// Recreate objects whose update fails on an immutable field.
    #[serde(default)]
    #[schemars(default = "default_false")]
    pub force: bool,

    /// Wait for every applied object to become healthy (replaces `healthChecks`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<bool>,

    /// Paths of kustomize Components to add to the build.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub components: Vec<String>,

    /// Drop component paths that do not exist in the artifact instead of failing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignore_missing_components: Option<bool>,

    /// CEL expressions that assess the health of custom resources.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub health_check_exprs: Vec<CustomHealthCheck>,

    /// Build metadata to record on applied objects as annotations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub build_metadata: Vec<BuildMetadataOption>,

    /// JSON pointer paths that drift detection and apply leave alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignore: Vec<IgnoreRule>,
}

fn default_false() -> bool {
    false
}

/// A name as Flux's Go string reads it: empty is no name.
fn named(name: &Option<String>) -> Option<&str> {
    name.as_deref().filter(|name| !name.is_empty())
}

impl KustomizationSpec {
    /// The ServiceAccount to impersonate, when the spec names one (`serviceAccountName: ""`
    /// names none, so `--default-service-account` applies, as in Flux).
    pub fn service_account(&self) -> Option<&str> {
        named(&self.service_account_name)
    }
}

impl Decryption {
    /// The ServiceAccount whose identity opens key services, when one is named (empty names
    /// none, so `--default-decryption-service-account` applies, as in Flux).
    pub fn service_account(&self) -> Option<&str> {
        named(&self.service_account_name)
    }
}

/// Labels and annotations added to every applied object.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CommonMetadata {
    /// Annotations to set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
    /// Labels to set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
}

/// A Kustomization this one waits for, with an optional CEL readiness expression.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DependencyReference {
    /// Name of the dependency.
    pub name: String,
    /// Namespace of the dependency; defaults to this Kustomization's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// CEL expression over `self` and `dep` that decides readiness instead of the built-in check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_expr: Option<String>,
}

/// Decryption settings for SOPS-encrypted manifests.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Decryption {
    /// The decryption engine.
    pub provider: DecryptionProvider,
    /// Secret holding the private keys (`*.agekey`, `*.asc`) and cloud credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalObjectReference>,
    /// Service account used to authenticate to cloud KMS services.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
}

/// The supported decryption engines.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum DecryptionProvider {
    #[default]
    #[serde(rename = "sops")]
    Sops,
}

/// A reference to an object in the same namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LocalObjectReference {
    /// Name of the object.
    pub name: String,
}

/// A kubeconfig taken from a Secret or built from a ConfigMap's provider settings.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = kube::core::Rule::new("has(self.configMapRef) || has(self.secretRef)")
        .message("exactly one of spec.kubeConfig.configMapRef or spec.kubeConfig.secretRef must be specified"),
    validation = kube::core::Rule::new("!has(self.configMapRef) || !has(self.secretRef)")
        .message("exactly one of spec.kubeConfig.configMapRef or spec.kubeConfig.secretRef must be specified")
)]
pub struct KubeConfigReference {
    /// ConfigMap with `provider` (aws, azure, gcp or generic), `cluster`, `address`, `ca.crt`,
    /// `audiences` and `serviceAccountName` keys describing how to reach the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map_ref: Option<LocalObjectReference>,
    /// Secret with a kubeconfig under `key` (default `value`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretKeyReference>,
}

/// A key of a Secret in the same namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SecretKeyReference {
    /// Name of the Secret.
    pub name: String,
    /// Key in the Secret; each use documents its default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// Post-build steps: variable substitution.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PostBuild {
    /// Variables substituted into `${var}` references (bash-style defaults and slicing work).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub substitute: Option<BTreeMap<String, String>>,
    /// ConfigMaps and Secrets whose data keys are substitution variables.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub substitute_from: Vec<SubstituteReference>,
    /// When substitution runs: only with variables defined (default) or always.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub substitute_strategy: Option<SubstituteStrategy>,
}

/// A ConfigMap or Secret that supplies substitution variables.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SubstituteReference {
    /// Kind of the object holding the variables.
    pub kind: SubstituteKind,
    /// Name of the object, in the Kustomization's namespace.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Treat a missing object as empty instead of failing.
    #[serde(default)]
    #[schemars(default = "default_false")]
    pub optional: bool,
}

/// Kinds that can supply substitution variables.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum SubstituteKind {
    #[default]
    Secret,
    ConfigMap,
}

/// When post-build substitution runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum SubstituteStrategy {
    /// Only when at least one variable is defined.
    #[default]
    WithVariables,
    /// Even with no variables defined.
    Always,
}

/// Garbage collection when the Kustomization itself is deleted; `MirrorPrune` deletes when
/// `prune` is true and orphans otherwise.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum DeletionPolicy {
    #[default]
    MirrorPrune,
    Delete,
    WaitForTermination,
    Orphan,
}

/// An object in any namespace, by kind and name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NamespacedObjectKindReference {
    /// API version; the preferred version when empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Kind of the object.
    pub kind: String,
    /// Name of the object.
    pub name: String,
    /// Namespace of the object; the Kustomization's namespace when empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// An inline strategic merge or JSON 6902 patch and the objects it applies to.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Patch {
    /// The patch document: a strategic merge patch or a list of JSON 6902 operations.
    pub patch: String,
    /// Objects the patch applies to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<Selector>,
}

/// Selects objects by GVK, name, namespace, labels and annotations (regexes for names).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Selector {
    /// API group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// API version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Name (a regular expression).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Namespace (a regular expression).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Kubernetes label selector expression matched against annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotation_selector: Option<String>,
    /// Kubernetes label selector expression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<String>,
}

/// An image override: new name, tag or digest for images named `name`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Image {
    /// Image name without a tag.
    pub name: String,
    /// Replacement name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_name: Option<String>,
    /// Replacement tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_tag: Option<String>,
    /// Replacement digest; takes precedence over `newTag`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

/// The source object that holds the artifact, possibly in another namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CrossNamespaceSourceReference {
    /// API version of the source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Kind of the source.
    pub kind: SourceKind,
    /// Name of the source.
    pub name: String,
    /// Namespace of the source; the Kustomization's namespace when empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// Kinds of Flux sources a Kustomization can build from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum SourceKind {
    OCIRepository,
    #[default]
    GitRepository,
    Bucket,
    ExternalArtifact,
}

impl SourceKind {
    /// Every kind, for watching them all.
    pub const ALL: [SourceKind; 4] = [
        SourceKind::GitRepository,
        SourceKind::OCIRepository,
        SourceKind::Bucket,
        SourceKind::ExternalArtifact,
    ];

    /// The resource name source-controller serves the kind under.
    pub fn plural(self) -> &'static str {
        match self {
            SourceKind::GitRepository => "gitrepositories",
            SourceKind::OCIRepository => "ocirepositories",
            SourceKind::Bucket => "buckets",
            SourceKind::ExternalArtifact => "externalartifacts",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::OCIRepository => "OCIRepository",
            SourceKind::GitRepository => "GitRepository",
            SourceKind::Bucket => "Bucket",
            SourceKind::ExternalArtifact => "ExternalArtifact",
        }
    }
}

/// CEL expressions that map a custom resource's status to health.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CustomHealthCheck {
    /// API version of the resources this check applies to.
    pub api_version: String,
    /// Kind of the resources this check applies to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// True when the resource has reached its desired state.
    pub current: String,
    /// True while the resource is still progressing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_progress: Option<String>,
    /// True when the resource has failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
}

/// Build metadata kustomize can record on objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum BuildMetadataOption {
    /// `config.kubernetes.io/origin`: where each object came from.
    OriginAnnotations,
    /// `alpha.config.kubernetes.io/transformations`: what changed each object.
    TransformerAnnotations,
}

/// Paths to leave alone during drift detection and apply, for all or selected objects.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct IgnoreRule {
    /// JSON pointers (RFC 6901) into the object.
    pub paths: Vec<String>,
    /// Objects the rule applies to; all when empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<Selector>,
}

/// The observed state, written by the controller.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("default" = status_default()), transform = only_status_level_default)]
pub struct KustomizationStatus {
    /// The generation last reconciled successfully; -1 until the first success.
    #[serde(default = "never_observed")]
    pub observed_generation: i64,

    /// Ready, Reconciling, Healthy and Stalled conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "condition_list_schema")]
    pub conditions: Vec<Condition>,

    /// The artifact revision of the last successful apply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_applied_revision: Option<String>,

    /// The origin revision (e.g. OCI `org.opencontainers.image.revision`) of the last successful
    /// apply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_applied_origin_revision: Option<String>,

    /// The artifact revision of the last attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_attempted_revision: Option<String>,

    /// The last `reconcile.fluxcd.io/requestedAt` value handled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_handled_reconcile_at: Option<String>,

    /// The objects applied by the last successful reconciliation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inventory: Option<ResourceInventory>,

    /// Recent reconciliation attempts, one snapshot per distinct set of objects.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<Snapshot>,
}

impl Default for KustomizationStatus {
    fn default() -> Self {
        KustomizationStatus {
            observed_generation: never_observed(),
            conditions: Vec::new(),
            last_applied_revision: None,
            last_applied_origin_revision: None,
            last_attempted_revision: None,
            last_handled_reconcile_at: None,
            inventory: None,
            history: Vec::new(),
        }
    }
}

fn never_observed() -> i64 {
    -1
}

/// A record of reconciliations of one set of objects.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    /// Checksum `<algo>:<hex>` of the objects.
    pub digest: String,
    /// When this set of objects was first reconciled.
    pub first_reconciled: Time,
    /// When this set of objects was last reconciled.
    pub last_reconciled: Time,
    /// How long the last reconciliation took.
    pub last_reconciled_duration: String,
    /// Outcome of the last reconciliation.
    pub last_reconciled_status: String,
    /// Extra information about the snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<BTreeMap<String, String>>,
    /// How many reconciliations this snapshot has seen.
    pub total_reconciliations: i64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::{Schema, parse_single};

    /// A Kustomization using every spec field, as a Flux user writes it.
    const FULL: &str = r#"
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: apps
  namespace: flux-system
spec:
  interval: 10m0s
  retryInterval: 1m0s
  timeout: 5m0s
  path: ./apps/production
  prune: true
  deletionPolicy: WaitForTermination
  force: true
  wait: true
  suspend: false
  targetNamespace: apps
  namePrefix: prod-
  nameSuffix: -v1
  serviceAccountName: reconciler
  sourceRef:
    kind: GitRepository
    name: fleet
    namespace: flux-system
  dependsOn:
  - name: infra
    readyExpr: dep.status.conditions.all(c, c.type != 'Ready' || c.status == 'True')
  commonMetadata:
    labels: {team: platform}
    annotations: {owner: sre}
  decryption:
    provider: sops
    secretRef: {name: sops-age}
  kubeConfig:
    secretRef: {name: remote, key: value.yaml}
  postBuild:
    substitute: {cluster_env: prod}
    substituteFrom:
    - kind: ConfigMap
      name: vars
      optional: true
    substituteStrategy: Always
  healthChecks:
  - apiVersion: apps/v1
    kind: Deployment
    name: podinfo
    namespace: apps
  healthCheckExprs:
  - apiVersion: example.com/v1
    kind: Widget
    current: status.ready
    failed: status.failed
  patches:
  - patch: |
      - op: add
        path: /metadata/labels/x
        value: y
    target: {kind: Deployment, labelSelector: app=podinfo}
  images:
  - name: podinfo
    newName: ghcr.io/stefanprodan/podinfo
    newTag: 6.7.1
  components: [../components/monitoring]
  ignoreMissingComponents: true
  buildMetadata: [originAnnotations, transformerAnnotations]
  ignore:
  - paths: [/spec/replicas]
    target: {kind: Deployment}
status:
  observedGeneration: 3
  lastAppliedRevision: main@sha1:abc
  lastAttemptedRevision: main@sha1:abc
  inventory:
    entries:
    - id: apps_podinfo_apps_Deployment
      v: v1
"#;

    #[test]
    fn a_full_flux_object_round_trips() {
        let value = serde_json::Value::from(parse_single(FULL, Schema::Kyaml).unwrap());
        let object: Kustomization = serde_json::from_value(value.clone()).unwrap();
        assert_eq!(object.spec.interval.to_string(), "10m0s");
        assert_eq!(object.spec.source_ref.kind, SourceKind::GitRepository);
        assert_eq!(
            object.spec.deletion_policy,
            Some(DeletionPolicy::WaitForTermination)
        );
        let status = object.status.as_ref().unwrap();
        assert_eq!(status.inventory.as_ref().unwrap().entries[0].version, "v1");
        assert_eq!(
            serde_json::to_value(&object).unwrap(),
            value,
            "nothing gained or lost"
        );
    }

    #[test]
    fn status_defaults_to_never_observed() {
        let status: KustomizationStatus = serde_json::from_str("{}").unwrap();
        assert_eq!(status.observed_generation, -1);
    }

    #[test]
    fn bad_durations_are_rejected_with_the_value() {
        let err = serde_json::from_str::<KustomizationSpec>(
            r#"{"interval": "ten minutes", "prune": false, "sourceRef": {"kind": "Bucket", "name": "b"}}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("ten minutes"), "{err}");
    }

    #[test]
    fn an_empty_service_account_name_names_no_account() {
        let spec = |account: Option<&str>| KustomizationSpec {
            service_account_name: account.map(str::to_string),
            ..Default::default()
        };
        let decryption = |account: Option<&str>| Decryption {
            service_account_name: account.map(str::to_string),
            ..Default::default()
        };
        for (written, named) in [
            (None, None),
            (Some(""), None),
            (Some("tenant"), Some("tenant")),
        ] {
            assert_eq!(spec(written).service_account(), named, "{written:?}");
            assert_eq!(decryption(written).service_account(), named, "{written:?}");
        }
    }
}
