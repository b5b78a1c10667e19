//! Failures as kube-apiserver reports them: a `metav1.Status` with code, reason, message and
//! details, in the wording the real server uses so clients can match on it.

use serde_json::{Value, json};

use super::resources::ResourceType;

#[derive(Clone, Debug)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
    /// Seconds for a `Retry-After` header (429 and some 5xx).
    pub retry_after: Option<u64>,
    /// `metadata.continue` of the Status: how to go on after an expired continue token.
    pub list_continue: Option<String>,
}

/// One cause of an `Invalid` error.
pub struct Cause {
    pub reason: &'static str,
    pub field: String,
    pub message: String,
}

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
            retry_after: None,
            list_continue: None,
        }
    }

    fn with_details(mut self, rt: &ResourceType, name: &str) -> ApiError {
        let mut details = json!({"name": name, "kind": rt.plural});
        if !rt.group.is_empty() {
            details["group"] = json!(rt.group);
        }
        self.details = Some(details);
        self
    }

    pub fn not_found(rt: &ResourceType, name: &str) -> ApiError {
        ApiError::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", rt.qualified_plural()),
        )
        .with_details(rt, name)
    }

    pub fn namespace_not_found(namespace: &str) -> ApiError {
        ApiError::new(
            404,
            "NotFound",
            format!("namespaces \"{namespace}\" not found"),
        )
        .with_details(&super::resources::builtins()[0], namespace)
    }

    pub fn unknown_resource() -> ApiError {
        ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    }

    pub fn already_exists(rt: &ResourceType, name: &str) -> ApiError {
        ApiError::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", rt.qualified_plural()),
        )
        .with_details(rt, name)
    }

    /// A write that named a resourceVersion the object no longer has.
    pub fn stale(rt: &ResourceType, name: &str) -> ApiError {
        ApiError::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; \
                 please apply your changes to the latest version and try again",
                rt.qualified_plural()
            ),
        )
        .with_details(rt, name)
    }

    /// A delete whose preconditions do not hold. kube-apiserver checks them before deleting
    /// (`rest.BeforeDelete`) and names the resource by its kind, not its plural.
    pub fn delete_precondition_failed(rt: &ResourceType, name: &str, cause: &str) -> ApiError {
        let kind = if rt.group.is_empty() {
            rt.kind.clone()
        } else {
            format!("{}.{}", rt.kind, rt.group)
        };
        let mut error = ApiError::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {kind} \"{name}\": {cause}"),
        );
        let mut details = json!({"name": name, "kind": rt.kind});
        if !rt.group.is_empty() {
            details["group"] = json!(rt.group);
        }
        error.details = Some(details);
        error
    }

    pub fn invalid(rt: &ResourceType, name: &str, causes: Vec<Cause>) -> ApiError {
        let summary: Vec<String> = causes
            .iter()
            .map(|c| {
                if c.field.is_empty() {
                    c.message.clone()
                } else {
                    format!("{}: {}", c.field, c.message)
                }
            })
            .collect();
        let summary = if summary.len() == 1 {
            summary[0].clone()
        } else {
            format!("[{}]", summary.join(", "))
        };
        let mut details = json!({
            "name": name,
            "kind": rt.kind,
            "causes": causes.iter().map(|c| json!({
                "reason": c.reason, "message": c.message, "field": c.field,
            })).collect::<Vec<_>>(),
        });
        if !rt.group.is_empty() {
            details["group"] = json!(rt.group);
        }
        let mut error = ApiError::new(
            422,
            "Invalid",
            format!("{} \"{name}\" is invalid: {summary}", rt.qualified_kind()),
        );
        error.details = Some(details);
        error
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "BadRequest", message)
    }

    pub fn unsupported_media_type(content_type: &str) -> ApiError {
        ApiError::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {content_type})"
            ),
        )
    }

    pub fn method_not_allowed() -> ApiError {
        ApiError::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
    }

    pub fn gone(requested: u64, oldest: u64) -> ApiError {
        ApiError::new(
            410,
            "Expired",
            format!("too old resource version: {requested} ({oldest})"),
        )
    }

    pub fn forbidden(message: impl Into<String>) -> ApiError {
        ApiError::new(403, "Forbidden", message)
    }

    pub fn status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(details) = &self.details {
            status["details"] = details.clone();
        }
        if self.reason.is_empty() {
            // metav1.Status omits an unknown (empty) reason.
            status.as_object_mut().expect("an object").remove("reason");
        }
        if let Some(token) = &self.list_continue {
            status["metadata"]["continue"] = json!(token);
        }
        if let Some(seconds) = self.retry_after {
            let details = status
                .as_object_mut()
                .expect("status is an object")
                .entry("details")
                .or_insert_with(|| json!({}));
            details["retryAfterSeconds"] = json!(seconds);
        }
        status
    }
}
