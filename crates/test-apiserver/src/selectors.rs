//! Label and field selectors in the query-string syntax (`app=web,tier!=db,env in (a,b),!x`).

use serde_json::Value;

use kustomize_engine::kustomize::labels::{self, Requirement};

use super::errors::ApiError;

/// A label selector, parsed as kube-apiserver parses one (Kubernetes' `labels.Parse`; a
/// refusal is a 400 in its words).
pub struct LabelSelector(Vec<Requirement>);

impl LabelSelector {
    pub fn parse(text: &str) -> Result<LabelSelector, ApiError> {
        labels::parse(text)
            .map(LabelSelector)
            .map_err(ApiError::bad_request)
    }

    pub fn matches(&self, object: &Value) -> bool {
        let label = |key: &str| {
            object
                .pointer("/metadata/labels")
                .and_then(|labels| labels.get(key))
                .and_then(Value::as_str)
                .map(std::borrow::Cow::Borrowed)
        };
        self.0.iter().all(|requirement| requirement.matches(&label))
    }
}

/// A field selector: only the fields kube-apiserver indexes for the kind are accepted.
#[derive(Debug, Default)]
pub struct FieldSelector(Vec<(String, bool, String)>);

fn supported_fields(kind: &str) -> &'static [&'static str] {
    match kind {
        "Secret" => &["type"],
        "Pod" => &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "status.phase",
            "status.podIP",
        ],
        "Event" => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        "Namespace" => &["status.phase"],
        "Job" => &["status.successful"],
        _ => &[],
    }
}

impl FieldSelector {
    pub fn parse(text: &str, kind: &str) -> Result<FieldSelector, ApiError> {
        let mut terms = Vec::new();
        for term in text.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (field, equal, value) = if let Some((f, v)) = term.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = term.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = term.split_once('=') {
                (f, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{text}'; can't understand '{term}'"
                )));
            };
            let field = field.trim();
            if field != "metadata.name"
                && field != "metadata.namespace"
                && !supported_fields(kind).contains(&field)
            {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {field}"
                )));
            }
            terms.push((field.to_string(), equal, value.trim().to_string()));
        }
        Ok(FieldSelector(terms))
    }

    pub fn matches(&self, object: &Value) -> bool {
        self.0.iter().all(|(field, equal, value)| {
            let pointer = format!("/{}", field.replace('.', "/"));
            let actual = match object.pointer(&pointer) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            };
            (actual == *value) == *equal
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_selector_forms() {
        let object = json!({"metadata": {"labels": {"app": "web", "tier": "front"}}});
        for (selector, expected) in [
            ("app=web", true),
            ("app==web,tier=front", true),
            ("app!=web", false),
            ("app in (web, api)", true),
            ("app notin (web)", false),
            ("tier", true),
            ("!tier", false),
            ("!missing", true),
            ("missing notin (x)", true),
        ] {
            let parsed = LabelSelector::parse(selector).unwrap();
            assert_eq!(parsed.matches(&object), expected, "{selector}");
        }
    }

    #[test]
    fn field_selector_rejects_unindexed_fields() {
        assert!(FieldSelector::parse("metadata.name=a", "ConfigMap").is_ok());
        let error = FieldSelector::parse("data.x=a", "ConfigMap").unwrap_err();
        assert_eq!(error.code, 400);
    }
}
