//! A Kustomization as the watch reads it: parsed without its `managedFields`.
//!
//! Every change to a Kustomization (ours, its author's, the benchmark's annotation) comes
//! through the watch whole, and its managed fields — one entry per writer, each a tree of
//! the fields it owns — are about as large as the rest of it. Nothing downstream reads them
//! (the watch drops them anyway), so they are skipped while parsing rather than built and
//! dropped: `LeanKustomization` reads the same JSON into a [`Kustomization`] whose
//! `metadata.managedFields` is `None`.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::Resource;
use serde::Deserialize;

use crate::api::{Kustomization, KustomizationSpec, KustomizationStatus};

/// A [`Kustomization`] read without its managed fields.
#[derive(Clone, Debug)]
pub struct LeanKustomization(pub Kustomization);

/// The object as it is read: every field of [`Kustomization`] but `managedFields`, which
/// serde skips without building it (as every field not named here).
#[derive(Deserialize)]
struct Shadow {
    metadata: ShadowMeta,
    spec: KustomizationSpec,
    #[serde(default)]
    status: Option<KustomizationStatus>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ShadowMeta {
    annotations: Option<BTreeMap<String, String>>,
    creation_timestamp: Option<Time>,
    deletion_grace_period_seconds: Option<i64>,
    deletion_timestamp: Option<Time>,
    finalizers: Option<Vec<String>>,
    generate_name: Option<String>,
    generation: Option<i64>,
    labels: Option<BTreeMap<String, String>>,
    name: Option<String>,
    namespace: Option<String>,
    owner_references: Option<Vec<OwnerReference>>,
    resource_version: Option<String>,
    self_link: Option<String>,
    uid: Option<String>,
}

impl<'de> Deserialize<'de> for LeanKustomization {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let Shadow {
            metadata: meta,
            spec,
            status,
        } = Shadow::deserialize(deserializer)?;
        let metadata = ObjectMeta {
            annotations: meta.annotations,
            creation_timestamp: meta.creation_timestamp,
            deletion_grace_period_seconds: meta.deletion_grace_period_seconds,
            deletion_timestamp: meta.deletion_timestamp,
            finalizers: meta.finalizers,
            generate_name: meta.generate_name,
            generation: meta.generation,
            labels: meta.labels,
            managed_fields: None,
            name: meta.name,
            namespace: meta.namespace,
            owner_references: meta.owner_references,
            resource_version: meta.resource_version,
            self_link: meta.self_link,
            uid: meta.uid,
        };
        Ok(LeanKustomization(Kustomization {
            metadata,
            spec,
            status,
        }))
    }
}

impl Resource for LeanKustomization {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind(dt: &()) -> std::borrow::Cow<'_, str> {
        Kustomization::kind(dt)
    }
    fn group(dt: &()) -> std::borrow::Cow<'_, str> {
        Kustomization::group(dt)
    }
    fn version(dt: &()) -> std::borrow::Cow<'_, str> {
        Kustomization::version(dt)
    }
    fn plural(dt: &()) -> std::borrow::Cow<'_, str> {
        Kustomization::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.0.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.0.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written() -> serde_json::Value {
        serde_json::json!({
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
            "kind": "Kustomization",
            "metadata": {
                "name": "apps",
                "namespace": "flux-system",
                "uid": "8c3f",
                "resourceVersion": "42",
                "generation": 3,
                "creationTimestamp": "2026-11-27T09:00:00Z",
                "labels": {"team": "a"},
                "annotations": {"reconcile.fluxcd.io/requestedAt": "now"},
                "finalizers": ["finalizers.fluxcd.io"],
                "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "1"}],
                "managedFields": [{
                    "manager": "gotk-kustomize-controller",
                    "operation": "Update",
                    "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:status": {"f:conditions": {}}},
                    "subresource": "status"
                }]
            },
            "spec": {
                "interval": "10m",
                "path": "./apps",
                "prune": true,
                "sourceRef": {"kind": "GitRepository", "name": "flux-system"}
            },
            "status": {
                "observedGeneration": 3,
                "lastAppliedRevision": "main@sha1:abc",
                "conditions": [{
                    "type": "Ready", "status": "True", "reason": "ReconciliationSucceeded",
                    "message": "Applied revision: main@sha1:abc",
                    "lastTransitionTime": "2026-11-27T09:00:01Z"
                }]
            }
        })
    }

    #[test]
    fn it_reads_what_the_full_type_reads_but_the_managed_fields() {
        let text = written().to_string();
        let lean: LeanKustomization = serde_json::from_str(&text).unwrap();
        let mut full: Kustomization = serde_json::from_str(&text).unwrap();
        assert!(full.metadata.managed_fields.is_some());
        full.metadata.managed_fields = None;
        assert_eq!(
            serde_json::to_value(&lean.0).unwrap(),
            serde_json::to_value(&full).unwrap()
        );
    }

    #[test]
    fn an_object_without_status_or_metadata_fields_reads_as_the_full_type_reads_it() {
        let mut value = written();
        value.as_object_mut().unwrap().remove("status");
        value["metadata"] = serde_json::json!({"name": "bare", "labels": null});
        let text = value.to_string();
        let lean: LeanKustomization = serde_json::from_str(&text).unwrap();
        let full: Kustomization = serde_json::from_str(&text).unwrap();
        assert_eq!(
            serde_json::to_value(&lean.0).unwrap(),
            serde_json::to_value(&full).unwrap()
        );
    }
}
