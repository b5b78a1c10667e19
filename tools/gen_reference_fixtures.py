#!/usr/bin/env python3
"""Derives the reference CRDs the tests need from ../shared/reference/crds into
tests/fixtures/reference/crds, and the Kubernetes OpenAPI definitions of the built-in kinds the
test API server serves from ../shared/reference/openapi/swagger.json into
tests/fixtures/reference/kubernetes-openapi.json, so that a fresh clone tests with nothing
beside it.

Each CRD keeps every field but `description` (documentation only: the schema comparison in
tests/integration/crd.rs skips it, and the test API server does not read it). Needs PyYAML
(a developer tool, not a test dependency).

  python3 tools/gen_reference_fixtures.py          # write the fixtures
  python3 tools/gen_reference_fixtures.py --check  # exit 1 if the fixtures are stale
"""
import argparse
import json
import os
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "..", "..", "shared", "reference", "crds")
TARGET = os.path.join(HERE, "..", "tests", "fixtures", "reference", "crds")
FILES = [
    "kustomize.toolkit.fluxcd.io_kustomizations.yaml",
    "source.toolkit.fluxcd.io_buckets.yaml",
    "source.toolkit.fluxcd.io_externalartifacts.yaml",
    "source.toolkit.fluxcd.io_gitrepositories.yaml",
    "source.toolkit.fluxcd.io_ocirepositories.yaml",
]
OPENAPI_SOURCE = os.path.join(HERE, "..", "..", "shared", "reference", "openapi", "swagger.json")
OPENAPI_TARGET = os.path.join(HERE, "..", "tests", "fixtures", "reference", "kubernetes-openapi.json")
# The built-in kinds of tests/support/apiserver/resources.rs: apiVersion/kind -> definition.
# Kubernetes v1.21.2 has no autoscaling/v2; its v2beta2 HorizontalPodAutoscaler has the shape
# v2 kept.
BUILTIN_KINDS = {
    "v1/Namespace": "io.k8s.api.core.v1.Namespace",
    "v1/ConfigMap": "io.k8s.api.core.v1.ConfigMap",
    "v1/Secret": "io.k8s.api.core.v1.Secret",
    "v1/ServiceAccount": "io.k8s.api.core.v1.ServiceAccount",
    "v1/Service": "io.k8s.api.core.v1.Service",
    "v1/Pod": "io.k8s.api.core.v1.Pod",
    "v1/PersistentVolumeClaim": "io.k8s.api.core.v1.PersistentVolumeClaim",
    "v1/Event": "io.k8s.api.core.v1.Event",
    "v1/ResourceQuota": "io.k8s.api.core.v1.ResourceQuota",
    "apps/v1/Deployment": "io.k8s.api.apps.v1.Deployment",
    "apps/v1/StatefulSet": "io.k8s.api.apps.v1.StatefulSet",
    "apps/v1/DaemonSet": "io.k8s.api.apps.v1.DaemonSet",
    "apps/v1/ReplicaSet": "io.k8s.api.apps.v1.ReplicaSet",
    "batch/v1/Job": "io.k8s.api.batch.v1.Job",
    "batch/v1/CronJob": "io.k8s.api.batch.v1.CronJob",
    "rbac.authorization.k8s.io/v1/Role": "io.k8s.api.rbac.v1.Role",
    "rbac.authorization.k8s.io/v1/RoleBinding": "io.k8s.api.rbac.v1.RoleBinding",
    "rbac.authorization.k8s.io/v1/ClusterRole": "io.k8s.api.rbac.v1.ClusterRole",
    "rbac.authorization.k8s.io/v1/ClusterRoleBinding": "io.k8s.api.rbac.v1.ClusterRoleBinding",
    "networking.k8s.io/v1/Ingress": "io.k8s.api.networking.v1.Ingress",
    "networking.k8s.io/v1/NetworkPolicy": "io.k8s.api.networking.v1.NetworkPolicy",
    "networking.k8s.io/v1/IngressClass": "io.k8s.api.networking.v1.IngressClass",
    "policy/v1/PodDisruptionBudget": "io.k8s.api.policy.v1.PodDisruptionBudget",
    "autoscaling/v2/HorizontalPodAutoscaler": "io.k8s.api.autoscaling.v2beta2.HorizontalPodAutoscaler",
    "storage.k8s.io/v1/StorageClass": "io.k8s.api.storage.v1.StorageClass",
    "scheduling.k8s.io/v1/PriorityClass": "io.k8s.api.scheduling.v1.PriorityClass",
    "coordination.k8s.io/v1/Lease": "io.k8s.api.coordination.v1.Lease",
    "events.k8s.io/v1/Event": "io.k8s.api.events.v1.Event",
    "apiextensions.k8s.io/v1/CustomResourceDefinition":
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition",
    "admissionregistration.k8s.io/v1/MutatingWebhookConfiguration":
        "io.k8s.api.admissionregistration.v1.MutatingWebhookConfiguration",
    "admissionregistration.k8s.io/v1/ValidatingWebhookConfiguration":
        "io.k8s.api.admissionregistration.v1.ValidatingWebhookConfiguration",
}
# Fields Kubernetes added after v1.21 that manifests and the tests use (from the Kubernetes API
# reference of v1.28, the oldest server the suite runs against); declared free-form, so they are
# known but not checked inside.
ADDED_AFTER_1_21 = {
    "io.k8s.apimachinery.pkg.apis.meta.v1.ManagedFieldsEntry": ["subresource"],
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps": [
        "x-kubernetes-validations"],
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionVersion": [
        "selectableFields"],
    "io.k8s.api.core.v1.PodSpec": ["hostUsers", "os", "schedulingGates", "resourceClaims"],
    "io.k8s.api.core.v1.Container": ["resizePolicy", "restartPolicy"],
    "io.k8s.api.core.v1.EphemeralContainer": ["resizePolicy", "restartPolicy"],
    "io.k8s.api.core.v1.ResourceRequirements": ["claims"],
    "io.k8s.api.core.v1.LifecycleHandler": ["sleep"],
    "io.k8s.api.core.v1.Handler": ["sleep"],
    "io.k8s.api.core.v1.Probe": ["grpc"],
    "io.k8s.api.core.v1.TopologySpreadConstraint": [
        "matchLabelKeys", "minDomains", "nodeAffinityPolicy", "nodeTaintsPolicy"],
    "io.k8s.api.core.v1.ServiceSpec": ["trafficDistribution"],
    "io.k8s.api.core.v1.PersistentVolumeClaimSpec": ["volumeAttributesClassName"],
    "io.k8s.api.batch.v1.JobSpec": [
        "podFailurePolicy", "backoffLimitPerIndex", "maxFailedIndexes", "podReplacementPolicy",
        "managedBy", "successPolicy"],
    "io.k8s.api.batch.v1.CronJobSpec": ["timeZone"],
    "io.k8s.api.apps.v1.StatefulSetSpec": ["persistentVolumeClaimRetentionPolicy", "ordinals"],
    "io.k8s.api.policy.v1.PodDisruptionBudgetSpec": ["unhealthyPodEvictionPolicy"],
    "io.k8s.api.admissionregistration.v1.ValidatingWebhook": ["matchConditions"],
    "io.k8s.api.admissionregistration.v1.MutatingWebhook": ["matchConditions"],
}
# Custom resources' metadata is checked against ObjectMeta as well.
EXTRA_ROOTS = ["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]
# What the server reads of a schema: structure, types and merge metadata.
SCHEMA_KEYWORDS = {
    "type", "format", "properties", "items", "additionalProperties", "$ref", "required",
    "x-kubernetes-patch-merge-key", "x-kubernetes-patch-strategy", "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys", "x-kubernetes-map-type",
}
HEADER = (
    "# Derived by tools/gen_reference_fixtures.py from Flux's CRD of the same name\n"
    "# (see tests/fixtures/reference/README.md): descriptions removed, nothing else changed.\n"
)


def without_descriptions(node, in_properties=False):
    """Drops `description` keywords; a property that is itself named `description` stays."""
    if isinstance(node, dict):
        return {
            key: without_descriptions(value, key == "properties")
            for key, value in node.items()
            if in_properties or key != "description"
        }
    if isinstance(node, list):
        return [without_descriptions(item) for item in node]
    return node


def derive(name):
    with open(os.path.join(SOURCE, name), encoding="utf-8") as source:
        documents = [d for d in yaml.safe_load_all(source) if d is not None]
    body = "---\n".join(
        yaml.safe_dump(without_descriptions(d), sort_keys=False, width=100) for d in documents
    )
    return HEADER + body


def schema_only(node):
    """Keeps the keywords the test server reads; property names are kept whatever they are."""
    if isinstance(node, dict):
        kept = {}
        for key, value in node.items():
            if key == "properties":
                kept[key] = {name: schema_only(child) for name, child in value.items()}
            elif key in SCHEMA_KEYWORDS:
                kept[key] = schema_only(value)
        return kept
    if isinstance(node, list):
        return [schema_only(item) for item in node]
    return node


def references(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value.rsplit("/", 1)[-1]
            else:
                yield from references(value)
    elif isinstance(node, list):
        for item in node:
            yield from references(item)


def derive_openapi():
    with open(OPENAPI_SOURCE, encoding="utf-8") as source:
        definitions = json.load(source)["definitions"]
    wanted = list(BUILTIN_KINDS.values()) + EXTRA_ROOTS
    kept = {}
    while wanted:
        name = wanted.pop()
        if name in kept:
            continue
        kept[name] = schema_only(definitions[name])
        for field in ADDED_AFTER_1_21.get(name, []):
            kept[name].setdefault("properties", {}).setdefault(field, {})
        wanted.extend(references(kept[name]))
    document = {
        "source": "Kubernetes v1.21.2 OpenAPI v2 as embedded in kustomize, with the fields "
        "added up to v1.28 that tools/gen_reference_fixtures.py lists declared free-form",
        "kinds": BUILTIN_KINDS,
        "definitions": dict(sorted(kept.items())),
    }
    return json.dumps(document, sort_keys=False, separators=(",", ":")) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args()
    if not os.path.isdir(SOURCE):
        sys.exit(f"reference CRDs not found at {SOURCE}: the shared/ folder must sit beside the repository")
    os.makedirs(TARGET, exist_ok=True)
    stale = []
    for name in FILES:
        text = derive(name)
        path = os.path.join(TARGET, name)
        if args.check:
            current = open(path, encoding="utf-8").read() if os.path.exists(path) else None
            if current != text:
                stale.append(name)
            continue
        with open(path, "w", encoding="utf-8") as out:
            out.write(text)
        print(f"wrote {os.path.relpath(path)} ({len(text)} bytes)")
    text = derive_openapi()
    if args.check:
        current = open(OPENAPI_TARGET, encoding="utf-8").read() if os.path.exists(OPENAPI_TARGET) else None
        if current != text:
            stale.append(os.path.basename(OPENAPI_TARGET))
    else:
        with open(OPENAPI_TARGET, "w", encoding="utf-8") as out:
            out.write(text)
        print(f"wrote {os.path.relpath(OPENAPI_TARGET)} ({len(text)} bytes)")
    if stale:
        sys.exit("stale fixtures (run tools/gen_reference_fixtures.py): " + ", ".join(stale))


if __name__ == "__main__":
    main()
