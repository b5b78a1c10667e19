//! Label and field selectors in the query-string syntax (`app=web,tier!=db,env in (a,b),!x`).

use serde_json::Value;

use super::errors::ApiError;

/// A label selector, parsed as Kubernetes' `labels.Parse` reads the query-string syntax.
pub struct LabelSelector(Vec<Requirement>);

enum Operator {
    Exists,
    DoesNotExist,
    In(Vec<String>),
    NotIn(Vec<String>),
    GreaterThan(i64),
    LessThan(i64),
}

struct Requirement {
    key: String,
    operator: Operator,
}

/// Splits at commas outside parentheses.
fn split_requirements(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (index, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&text[start..index]);
                start = index + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

fn valid_key(key: &str) -> bool {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|label| {
                !label.is_empty()
                    && label
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            })
    });
    name_ok && prefix_ok
}

fn valid_value(value: &str) -> bool {
    value.is_empty()
        || (value.len() <= 63
            && value.starts_with(|c: char| c.is_ascii_alphanumeric())
            && value.ends_with(|c: char| c.is_ascii_alphanumeric())
            && value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
}

fn parse_requirement(text: &str) -> Option<Requirement> {
    let text = text.trim();
    if let Some(key) = text.strip_prefix('!') {
        let key = key.trim();
        return valid_key(key).then(|| Requirement {
            key: key.to_string(),
            operator: Operator::DoesNotExist,
        });
    }
    let set = |rest: &str| -> Option<Vec<String>> {
        let inner = rest.trim().strip_prefix('(')?.strip_suffix(')')?;
        let values: Vec<String> = inner.split(',').map(|v| v.trim().to_string()).collect();
        values.iter().all(|v| valid_value(v)).then_some(values)
    };
    let words: Vec<&str> = text.splitn(2, char::is_whitespace).collect();
    if let [key, rest] = words.as_slice() {
        let rest = rest.trim_start();
        let operator = if let Some(values) = rest.strip_prefix("notin") {
            Some(Operator::NotIn(set(values)?))
        } else if let Some(values) = rest.strip_prefix("in") {
            Some(Operator::In(set(values)?))
        } else {
            None
        };
        if let Some(operator) = operator {
            return valid_key(key).then(|| Requirement {
                key: key.to_string(),
                operator,
            });
        }
    }
    for (symbol, build) in [
        (
            "!=",
            (|v: String| Some(Operator::NotIn(vec![v]))) as fn(String) -> Option<Operator>,
        ),
        ("==", |v| Some(Operator::In(vec![v]))),
        ("=", |v| Some(Operator::In(vec![v]))),
        (">", |v| v.parse().ok().map(Operator::GreaterThan)),
        ("<", |v| v.parse().ok().map(Operator::LessThan)),
    ] {
        if let Some((key, value)) = text.split_once(symbol) {
            let (key, value) = (key.trim(), value.trim());
            if !valid_key(key) || !valid_value(value) {
                return None;
            }
            return Some(Requirement {
                key: key.to_string(),
                operator: build(value.to_string())?,
            });
        }
    }
    valid_key(text).then(|| Requirement {
        key: text.to_string(),
        operator: Operator::Exists,
    })
}

impl LabelSelector {
    pub fn parse(text: &str) -> Result<LabelSelector, ApiError> {
        if text.trim().is_empty() {
            return Ok(LabelSelector(Vec::new()));
        }
        split_requirements(text)
            .into_iter()
            .map(|part| {
                parse_requirement(part).ok_or_else(|| {
                    ApiError::bad_request(format!("unable to parse requirement: {part:?}"))
                })
            })
            .collect::<Result<_, _>>()
            .map(LabelSelector)
    }

    pub fn matches(&self, object: &Value) -> bool {
        let label = |key: &str| {
            object
                .pointer("/metadata/labels")
                .and_then(|labels| labels.get(key))
                .and_then(Value::as_str)
        };
        self.0.iter().all(|requirement| {
            let value = label(&requirement.key);
            match &requirement.operator {
                Operator::Exists => value.is_some(),
                Operator::DoesNotExist => value.is_none(),
                Operator::In(values) => value.is_some_and(|v| values.iter().any(|w| w == v)),
                Operator::NotIn(values) => value.is_none_or(|v| values.iter().all(|w| w != v)),
                Operator::GreaterThan(n) => value
                    .and_then(|v| v.parse::<i64>().ok())
                    .is_some_and(|v| v > *n),
                Operator::LessThan(n) => value
                    .and_then(|v| v.parse::<i64>().ok())
                    .is_some_and(|v| v < *n),
            }
        })
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
