//! The Kustomization CustomResourceDefinition, generated from the Rust types.
//!
//! `crds/` holds a copy of [`crd_yaml`]'s output for installers; a test fails when it is stale,
//! and another compares the schema with Flux's CRD property by property.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use serde_json::{Value, json};

use super::{ApiError, Kustomization};
use crate::yaml;

/// The file under `crds/` that holds the generated CRD, named as controller-gen names it.
pub const CRD_FILE_NAME: &str = "kustomize.toolkit.fluxcd.io_kustomizations.yaml";

/// The CRD for `kustomize.toolkit.fluxcd.io/v1` `Kustomization`.
pub fn crd() -> Result<CustomResourceDefinition, ApiError> {
    let mut crd = Kustomization::crd();
    crd.spec.names.list_kind = Some("KustomizationList".into());
    let mut value = serde_json::to_value(crd).map_err(|e| ApiError::Crd(e.to_string()))?;
    strip_nullable(&mut value);
    if let Some(root) = value
        .pointer_mut("/spec/versions/0/schema/openAPIV3Schema")
        .and_then(Value::as_object_mut)
    {
        add_type_meta_properties(root);
    }
    serde_json::from_value(value).map_err(|e| ApiError::Crd(e.to_string()))
}

/// The CRD as a YAML document, starting with `---` as controller-gen writes it.
pub fn crd_yaml() -> Result<String, ApiError> {
    let value = serde_json::to_value(crd()?).map_err(|e| ApiError::Crd(e.to_string()))?;
    Ok(format!("---\n{}", yaml::to_yaml_string(&value.into())))
}

/// Declares `apiVersion`, `kind` and `metadata` at the root as controller-gen does, and drops
/// kube's root `required: [spec]`: Flux accepts an object without a spec, and so must we.
fn add_type_meta_properties(root: &mut serde_json::Map<String, Value>) {
    root.remove("required");
    root.remove("title");
    if let Some(properties) = root.get_mut("properties").and_then(Value::as_object_mut) {
        properties.insert(
            "apiVersion".into(),
            json!({"description": "The versioned schema of this object.", "type": "string"}),
        );
        properties.insert(
            "kind".into(),
            json!({"description": "The REST resource this object represents, in CamelCase.", "type": "string"}),
        );
        properties.insert("metadata".into(), json!({"type": "object"}));
    }
}

/// kube marks every `Option` field `nullable` (and lists `null` among an optional enum's
/// values); Flux's schema does neither, so the API server prunes explicit nulls there instead
/// of storing them. Match Flux.
fn strip_nullable(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.remove("nullable");
            if let Some(Value::Array(values)) = map.get_mut("enum") {
                values.retain(|v| !v.is_null());
            }
            map.values_mut().for_each(strip_nullable);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_nullable),
        _ => {}
    }
}
