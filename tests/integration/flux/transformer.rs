//! Flux's tests of what the build does to the manifests before they are applied
//! (`kustomization_transformer_test.go`): `spec.commonMetadata`, `spec.namePrefix` and
//! `spec.nameSuffix`, `spec.images` and `spec.patches`, `spec.buildMetadata`, and kustomize's
//! own transformers and generators, configured in a kustomization.yaml or in builtin
//! transformer files, checked on the objects the controller applied.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, ResourceQuota, Secret};
use kube::api::Api;
use kustomize_controller::api::Kustomization;
use serde_json::json;

use super::{
    applied, condition, eventually, kstatus_check, kubeconfig_secret, patch_kustomization,
};
use crate::support::controller::Harness;

/// The value of `key` in an optional label or annotation map.
fn value<'a>(map: &'a Option<BTreeMap<String, String>>, key: &str) -> Option<&'a str> {
    map.as_ref()?.get(key).map(String::as_str)
}

/// Flux's `isReconcileSuccess`: Ready True for the current generation, the generation
/// observed, and the last attempted revision applied.
fn is_reconcile_success(object: &Kustomization) -> bool {
    let Some(status) = object.status.as_ref() else {
        return false;
    };
    let generation = object.metadata.generation;
    condition(object, "Ready")
        .is_some_and(|c| c.status == "True" && c.observed_generation == generation)
        && Some(status.observed_generation) == generation
        && status.last_applied_revision == status.last_attempted_revision
}

/// A ConfigMap that carries its own `tenant` annotation.
const TENANT_CONFIG: &str = "\
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: tenant-settings
  annotations:
    tenant: test
data:
  color: blue
";

/// `TestKustomizationReconciler_CommonMetadata`: `spec.commonMetadata` sets its label and
/// annotation on the applied ConfigMap, its annotation winning over the manifest's own value
/// of that key; once `commonMetadata` is removed from the spec, neither is on the live object.
#[tokio::test]
async fn flux_common_metadata() {
    let harness = Harness::start().await;
    let id = harness.cluster.namespace.clone();
    kubeconfig_secret(&harness).await;
    let artifact = harness.publish_files("cm", "v1.0.0", &[("config.yaml", TENANT_CONFIG)]);
    harness.source("repo", &artifact).await;
    harness
        .create_kustomization(
            "cm",
            json!({"interval": "2m", "path": "./", "prune": false,
                "kubeConfig": {"secretRef": {"name": "kubeconfig"}},
                "commonMetadata": {"annotations": {"tenant": id}, "labels": {"tenant": id}}}),
        )
        .await;
    let maps = harness.config_maps();

    // sets labels and annotations
    let ready = eventually(&harness, "cm", "reconciled", is_reconcile_success).await;
    kstatus_check(&ready);
    let map = maps.get("tenant-settings").await.unwrap();
    assert_eq!(value(&map.metadata.labels, "tenant"), Some(id.as_str()));
    assert_eq!(
        value(&map.metadata.annotations, "tenant"),
        Some(id.as_str())
    );

    // removes labels and annotations
    patch_kustomization(&harness, "cm", json!({"spec": {"commonMetadata": null}})).await;
    let ready = eventually(&harness, "cm", "reconciled the new generation", |k| {
        k.metadata.generation != ready.metadata.generation && is_reconcile_success(k)
    })
    .await;
    kstatus_check(&ready);
    let map = maps.get("tenant-settings").await.unwrap();
    assert_ne!(
        value(&map.metadata.labels, "tenant"),
        Some(id.as_str()),
        "{:?}",
        map.metadata.labels
    );
    assert_ne!(
        value(&map.metadata.annotations, "tenant"),
        Some(id.as_str()),
        "{:?}",
        map.metadata.annotations
    );
}

/// `TestKustomizationReconciler_NamePrefixSuffix`: `spec.namePrefix` and `spec.nameSuffix`
/// give the applied ConfigMap the name `prefix-<name>-suffix`.
#[tokio::test]
async fn flux_name_prefix_suffix() {
    let harness = Harness::start().await;
    kubeconfig_secret(&harness).await;
    let artifact = harness.publish_files("np", "v1.0.0", &[("config.yaml", TENANT_CONFIG)]);
    harness.source("repo", &artifact).await;
    harness
        .create_kustomization(
            "np",
            json!({"interval": "2m", "path": "./", "prune": false,
                "kubeConfig": {"secretRef": {"name": "kubeconfig"}},
                "namePrefix": "prefix-", "nameSuffix": "-suffix"}),
        )
        .await;

    // sets name prefix and suffix
    let ready = eventually(&harness, "np", "reconciled", is_reconcile_success).await;
    kstatus_check(&ready);
    assert!(
        harness
            .config_maps()
            .get_opt("prefix-tenant-settings-suffix")
            .await
            .unwrap()
            .is_some(),
        "the ConfigMap is applied as prefix-tenant-settings-suffix"
    );
}

/// The workload the transformer trees change (image `podinfo`, one replica).
const PODINFO_DEPLOYMENT: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: podinfo
  labels:
    app: podinfo
spec:
  replicas: 1
  selector:
    matchLabels:
      app: podinfo
  template:
    metadata:
      labels:
        app: podinfo
    spec:
      containers:
        - name: web
          image: podinfo
";

/// A ResourceQuota whose `limits.memory` is the replacement's target.
const QUOTA: &str = "\
apiVersion: v1
kind: ResourceQuota
metadata:
  name: common
spec:
  hard:
    limits.cpu: \"1\"
    limits.memory: 1Gi
";

/// A strategic merge patch that adds a version label to the Deployment.
const VERSION_PATCH: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: podinfo
  labels:
    app.kubernetes.io/version: \"1.21.0\"
";

/// Every transformer and generator configured through kustomization.yaml fields (the
/// deprecated `patchesStrategicMerge` and `patchesJson6902` included); `{namespace}` is the
/// namespace to deploy to.
const INLINE_KUSTOMIZATION: &str = "\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: {namespace}
namePrefix: test-
nameSuffix: -transform
resources:
  - quota.yaml
  - deployment.yaml
commonAnnotations:
  test: annotations
commonLabels:
  test: labels
images:
  - name: podinfo
    newTag: \"6.0.0\"
replicas:
  - name: podinfo
    count: 2
configMapGenerator:
  - name: metas
    literals:
      - limits.cpu=8
      - limits.memory=24Gi
secretGenerator:
  - name: secret
    literals:
      - token=not-really-secret
patchesStrategicMerge:
  - |-
    apiVersion: apps/v1
    kind: Deployment
    metadata:
      name: podinfo
    spec:
      template:
        spec:
          serviceAccountName: test
patchesJson6902:
  - target:
      version: v1
      kind: Deployment
      name: podinfo
    patch: |-
      - op: add
        path: /metadata/labels/patch
        value: json6902
patches:
  - path: patch.yaml
    target:
      kind: Deployment
      name: podinfo
replacements:
  - source:
      kind: ConfigMap
      name: metas
      fieldPath: data.[limits.memory]
    targets:
      - select:
          kind: ResourceQuota
          name: common
        fieldPaths:
          - spec.hard.[limits.memory]
";

/// What Flux's two transformer tests check on the objects applied to `namespace`, one step per
/// Flux subtest: both trees transform the same objects the same way.
async fn assert_transformed(harness: &Harness, namespace: &str) {
    let client = harness.cluster.client.clone();
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let deployments: Api<Deployment> = Api::namespaced(client, namespace);

    // namespace and prefix transformers
    let quotas: Api<ResourceQuota> = Api::namespaced(harness.cluster.client.clone(), namespace);
    let quota = quotas
        .get_opt("test-common-transform")
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("test-common-transform is not in {namespace}"));

    // replacement transformer
    let hard = quota.spec.as_ref().and_then(|s| s.hard.as_ref());
    assert_eq!(
        hard.and_then(|h| h.get("limits.memory"))
            .map(|q| q.0.as_str()),
        Some("24Gi")
    );

    // annotations transformer
    assert_eq!(
        value(&quota.metadata.annotations, "test"),
        Some("annotations")
    );

    // label transformer
    assert_eq!(value(&quota.metadata.labels, "test"), Some("labels"));

    // configmap generator
    let map_names: Vec<String> = maps
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|m| m.metadata.name)
        .collect();
    assert!(
        map_names.iter().any(|n| n.contains("test-metas-transform")),
        "{map_names:?}"
    );

    // secret generator
    let secret_names: Vec<String> = secrets
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|s| s.metadata.name)
        .collect();
    assert!(
        secret_names
            .iter()
            .any(|n| n.contains("test-secret-transform")),
        "{secret_names:?}"
    );

    let deployment = deployments
        .get_opt("test-podinfo-transform")
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("test-podinfo-transform is not in {namespace}"));
    let spec = deployment.spec.as_ref().expect("a Deployment spec");
    let pod = spec.template.spec.as_ref().expect("a pod template spec");

    // patch6902 transformer
    assert_eq!(
        value(&deployment.metadata.labels, "patch"),
        Some("json6902")
    );

    // patches transformer
    assert_eq!(
        value(&deployment.metadata.labels, "app.kubernetes.io/version"),
        Some("1.21.0")
    );

    // patchStrategicMerge transformer
    assert_eq!(pod.service_account_name.as_deref(), Some("test"));

    // image transformer
    assert_eq!(pod.containers[0].image.as_deref(), Some("podinfo:6.0.0"));

    // replica transformer
    assert_eq!(spec.replicas, Some(2));
}

/// `TestKustomizationReconciler_KustomizeTransformer`: a kustomization.yaml using the
/// namespace, prefix and suffix, annotation, label, image and replica transformers, a
/// ConfigMap and a Secret generator, strategic merge, JSON 6902 and `patches` patches and a
/// replacement: each shows on the objects applied to the namespace it names.
#[tokio::test]
async fn flux_kustomize_transformer() {
    let harness = Harness::start().await;
    kubeconfig_secret(&harness).await;
    let deploy_namespace = harness
        .cluster
        .create_namespace("transformers-inline")
        .await;
    let kustomization = INLINE_KUSTOMIZATION.replace("{namespace}", &deploy_namespace);
    let revision = "main/5e1f0c2a";
    let artifact = harness.publish_files(
        "transformers",
        revision,
        &[
            ("kustomization.yaml", kustomization.as_str()),
            ("quota.yaml", QUOTA),
            ("deployment.yaml", PODINFO_DEPLOYMENT),
            ("patch.yaml", VERSION_PATCH),
        ],
    );
    harness.source("repo", &artifact).await;
    harness
        .create_kustomization(
            "transformers",
            json!({"interval": "5s", "path": "./", "prune": false, "targetNamespace": null,
                "kubeConfig": {"secretRef": {"name": "kubeconfig"}}}),
        )
        .await;
    applied(&harness, "transformers", revision).await;

    assert_transformed(&harness, &deploy_namespace).await;
}

/// The file-based tree: the same transformers and generators as builtin plugin configs listed
/// under `generators:` and `transformers:`, which kustomize runs in the order listed;
/// `{namespace}` is the namespace to deploy to.
const TRANSFORMER_FILES: &[(&str, &str)] = &[
    (
        "kustomization.yaml",
        "\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - quota.yaml
  - deployment.yaml
generators:
  - generate-configmap.yaml
  - generate-secret.yaml
transformers:
  - add-annotations.yaml
  - add-labels.yaml
  - set-image-tag.yaml
  - set-namespace.yaml
  - patch-version.yaml
  - patch-json6902.yaml
  - patch-strategic-merge.yaml
  - add-prefix-suffix.yaml
  - set-replicas.yaml
  - replace-memory.yaml
",
    ),
    ("quota.yaml", QUOTA),
    ("deployment.yaml", PODINFO_DEPLOYMENT),
    ("patch.yaml", VERSION_PATCH),
    (
        "generate-configmap.yaml",
        "\
apiVersion: builtin
kind: ConfigMapGenerator
metadata:
  name: metas
literals:
  - limits.cpu=8
  - limits.memory=24Gi
",
    ),
    (
        "generate-secret.yaml",
        "\
apiVersion: builtin
kind: SecretGenerator
metadata:
  name: secret
literals:
  - token=not-really-secret
",
    ),
    (
        "add-annotations.yaml",
        "\
apiVersion: builtin
kind: AnnotationsTransformer
metadata:
  name: annotations
annotations:
  test: annotations
fieldSpecs:
  - path: metadata/annotations
    create: true
",
    ),
    (
        "add-labels.yaml",
        "\
apiVersion: builtin
kind: LabelTransformer
metadata:
  name: labels
labels:
  test: labels
fieldSpecs:
  - path: metadata/labels
    create: true
",
    ),
    (
        "set-image-tag.yaml",
        "\
apiVersion: builtin
kind: ImageTagTransformer
metadata:
  name: image
imageTag:
  name: podinfo
  newTag: \"6.0.0\"
fieldSpecs:
  - path: spec/template/spec/containers[]/image
",
    ),
    (
        "set-namespace.yaml",
        "\
apiVersion: builtin
kind: NamespaceTransformer
metadata:
  name: namespace
  namespace: {namespace}
fieldSpecs:
  - path: metadata/namespace
    create: true
",
    ),
    (
        "patch-version.yaml",
        "\
apiVersion: builtin
kind: PatchTransformer
metadata:
  name: version
path: patch.yaml
",
    ),
    (
        "patch-json6902.yaml",
        "\
apiVersion: builtin
kind: PatchJson6902Transformer
metadata:
  name: json6902
target:
  group: apps
  version: v1
  kind: Deployment
  name: podinfo
jsonOp: '[{\"op\": \"add\", \"path\": \"/metadata/labels/patch\", \"value\": \"json6902\"}]'
",
    ),
    (
        "patch-strategic-merge.yaml",
        "\
apiVersion: builtin
kind: PatchStrategicMergeTransformer
metadata:
  name: service-account
patches: |-
  apiVersion: apps/v1
  kind: Deployment
  metadata:
    name: podinfo
  spec:
    template:
      spec:
        serviceAccountName: test
",
    ),
    (
        "add-prefix-suffix.yaml",
        "\
apiVersion: builtin
kind: PrefixSuffixTransformer
metadata:
  name: names
prefix: test-
suffix: -transform
fieldSpecs:
  - path: metadata/name
",
    ),
    (
        "set-replicas.yaml",
        "\
apiVersion: builtin
kind: ReplicaCountTransformer
metadata:
  name: replicas
replica:
  name: podinfo
  count: 2
fieldSpecs:
  - path: spec/replicas
    create: true
    kind: Deployment
",
    ),
    (
        "replace-memory.yaml",
        "\
apiVersion: builtin
kind: ReplacementTransformer
metadata:
  name: memory
replacements:
  - source:
      kind: ConfigMap
      name: metas
      fieldPath: data.[limits.memory]
    targets:
      - select:
          kind: ResourceQuota
          name: common
        fieldPaths:
          - spec.hard.[limits.memory]
",
    ),
];

/// `TestKustomizationReconciler_KustomizeTransformerFiles`: the same transformers and
/// generators as `KustomizeTransformer`, configured as builtin plugin files under
/// `generators:` and `transformers:`, give the same applied objects.
#[tokio::test]
async fn flux_kustomize_transformer_files() {
    let harness = Harness::start().await;
    kubeconfig_secret(&harness).await;
    let deploy_namespace = harness.cluster.create_namespace("transformer-files").await;
    let texts: Vec<(&str, String)> = TRANSFORMER_FILES
        .iter()
        .map(|(path, text)| (*path, text.replace("{namespace}", &deploy_namespace)))
        .collect();
    let files: Vec<(&str, &str)> = texts.iter().map(|(p, t)| (*p, t.as_str())).collect();
    let revision = "main/9a7c3d4e";
    let artifact = harness.publish_files("file-transformer", revision, &files);
    harness.source("repo", &artifact).await;
    harness
        .create_kustomization(
            "transformer-files",
            json!({"interval": "5s", "path": "./", "prune": false, "targetNamespace": null,
                "kubeConfig": {"secretRef": {"name": "kubeconfig"}}}),
        )
        .await;
    applied(&harness, "transformer-files", revision).await;

    assert_transformed(&harness, &deploy_namespace).await;
}

/// A Deployment with two containers, for `spec.images` (no kustomization.yaml: the controller
/// generates one).
const TWO_CONTAINERS: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: podinfo
  labels:
    app: podinfo
spec:
  replicas: 1
  selector:
    matchLabels:
      app: podinfo
  template:
    metadata:
      labels:
        app: podinfo
    spec:
      containers:
        - name: web
          image: podinfo
        - name: canary
          image: ghcr.io/fluxcd/flagger
";

const FLAGGER_DIGEST: &str =
    "sha256:0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0";

/// `TestKustomizationReconciler_FluxTransformers`: `spec.images` sets one image's name and
/// tag and another's digest; `spec.patches` applies an inline JSON 6902 patch to the objects
/// its label selector picks and an inline strategic merge patch without a target.
#[tokio::test]
async fn flux_flux_transformers() {
    let harness = Harness::start().await;
    let id = harness.cluster.namespace.clone();
    kubeconfig_secret(&harness).await;
    let revision = "main/c0ffee42";
    let artifact = harness.publish_files("patch", revision, &[("deployment.yaml", TWO_CONTAINERS)]);
    harness.source("repo", &artifact).await;
    let json_patch = "- op: add\n  path: /metadata/labels/patch1\n  value: inline-json\n";
    let merge_patch = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: podinfo\n  labels:\n    patch2: inline-yaml\n";
    harness
        .create_kustomization(
            "patch",
            json!({"interval": "5s", "path": "./", "prune": false,
                "kubeConfig": {"secretRef": {"name": "kubeconfig"}},
                "images": [
                    {"name": "podinfo", "newName": "ghcr.io/stefanprodan/podinfo", "newTag": "5.2.0"},
                    {"name": "ghcr.io/fluxcd/flagger", "digest": FLAGGER_DIGEST}],
                "patches": [
                    {"patch": json_patch, "target": {"labelSelector": "app=podinfo"}},
                    {"patch": merge_patch}]}),
        )
        .await;
    applied(&harness, "patch", revision).await;
    let deployments: Api<Deployment> = Api::namespaced(harness.cluster.client.clone(), &id);
    let deployment = deployments.get("podinfo").await.unwrap();

    // applies patches
    assert_eq!(
        value(&deployment.metadata.labels, "patch1"),
        Some("inline-json")
    );
    assert_eq!(
        value(&deployment.metadata.labels, "patch2"),
        Some("inline-yaml")
    );
    let containers = &deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .expect("a pod template spec")
        .containers;
    let image = |index: usize| containers[index].image.clone().unwrap_or_default();
    assert!(image(0).contains("5.2.0"), "{}", image(0));
    assert!(image(1).contains(FLAGGER_DIGEST), "{}", image(1));
}

/// `TestKustomizationReconciler_BuildMetadata`: `spec.buildMetadata: [originAnnotations]`
/// puts kustomize's `config.kubernetes.io/origin` annotation on the applied ConfigMap;
/// removing it from the spec removes the annotation from the live object.
#[tokio::test]
async fn flux_build_metadata() {
    let harness = Harness::start().await;
    kubeconfig_secret(&harness).await;
    let config = "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: build-metadata\ndata:\n  color: green\n";
    let artifact = harness.publish_files("bm", "v1.0.0", &[("config.yaml", config)]);
    harness.source("repo", &artifact).await;
    harness
        .create_kustomization(
            "bm",
            json!({"interval": "2m", "path": "./", "prune": true,
                "kubeConfig": {"secretRef": {"name": "kubeconfig"}},
                "buildMetadata": ["originAnnotations"]}),
        )
        .await;
    let maps = harness.config_maps();
    let origin = "config.kubernetes.io/origin";

    // sets origin annotations
    let ready = eventually(&harness, "bm", "reconciled", is_reconcile_success).await;
    kstatus_check(&ready);
    let map = maps.get("build-metadata").await.unwrap();
    assert!(
        value(&map.metadata.annotations, origin).is_some(),
        "{:?}",
        map.metadata.annotations
    );

    // removes origin annotations
    patch_kustomization(&harness, "bm", json!({"spec": {"buildMetadata": null}})).await;
    let ready = eventually(&harness, "bm", "reconciled the new generation", |k| {
        k.metadata.generation != ready.metadata.generation && is_reconcile_success(k)
    })
    .await;
    kstatus_check(&ready);
    let map = maps.get("build-metadata").await.unwrap();
    assert!(
        value(&map.metadata.annotations, origin).is_none(),
        "{:?}",
        map.metadata.annotations
    );
}
