//! Hand-written schema pieces that derives cannot express: the metav1 `Condition` validation
//! that Kubernetes' Go markers add, and the status default Flux relies on to show
//! `observedGeneration: -1` before the first reconciliation.

use schemars::{Schema, SchemaGenerator, json_schema};
use serde_json::{Value, json};

/// `observedGeneration: -1` until the controller first reconciles the object.
pub(crate) fn status_default() -> Value {
    json!({ "observedGeneration": -1 })
}

/// A list of metav1 `Condition`s with the validation the API server enforces on them.
pub(crate) fn condition_list_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "items": {
            "description": "One aspect of the object's current state.",
            "type": "object",
            "properties": {
                "lastTransitionTime": {
                    "description": "When the condition last changed status.",
                    "type": "string",
                    "format": "date-time"
                },
                "message": {
                    "description": "Human-readable details of the transition; may be empty.",
                    "type": "string",
                    "maxLength": 32768
                },
                "observedGeneration": {
                    "description": "The metadata.generation the condition was computed from.",
                    "type": "integer",
                    "format": "int64",
                    "minimum": 0
                },
                "reason": {
                    "description": "A CamelCase identifier for why the condition last changed.",
                    "type": "string",
                    "maxLength": 1024,
                    "minLength": 1,
                    "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
                },
                "status": {
                    "description": "True, False or Unknown.",
                    "type": "string",
                    "enum": ["True", "False", "Unknown"]
                },
                "type": {
                    "description": "The condition type in CamelCase or foo.example.com/CamelCase.",
                    "type": "string",
                    "maxLength": 316,
                    "pattern": "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
                }
            },
            "required": ["lastTransitionTime", "message", "reason", "status", "type"]
        }
    })
}

/// Flux defaults `observedGeneration` through the status object's default only; drop the
/// property-level default schemars derives from the serde default.
pub(crate) fn only_status_level_default(schema: &mut Schema) {
    if let Some(property) = schema
        .get_mut("properties")
        .and_then(|p| p.get_mut("observedGeneration"))
        .and_then(Value::as_object_mut)
    {
        property.remove("default");
    }
}
