//! Selecting resources: by group, version and kind, name and namespace (all anchored regular
//! expressions; names and namespaces are tried against both the original and the current
//! identity, an empty namespace counting as `default`), and Kubernetes label and annotation
//! selectors.

use std::borrow::Cow;

use crate::value::{Map, Value};
use regex::Regex;

use super::kustfile::Selector;
use super::resource::Resource;

/// `pattern` as kustomize matches a selector field: a regular expression over the whole value;
/// `None` for an empty pattern, which matches anything.
pub(super) fn anchored_regex(pattern: &str) -> Result<Option<Regex>, regex::Error> {
    if pattern.is_empty() {
        return Ok(None);
    }
    super::regexes::compile(&format!("^(?:{pattern})$")).map(Some)
}

/// Why a selector cannot be compiled.
#[derive(Debug, thiserror::Error)]
pub enum SelectorError {
    #[error("invalid regular expression {pattern:?}: {source}")]
    Pattern {
        pattern: String,
        source: regex::Error,
    },
    /// A label or annotation selector Kubernetes' `labels.Parse` refuses, in its words.
    #[error("invalid label selector {selector:?}: {message}")]
    Labels { selector: String, message: String },
}

/// A selector compiled once and matched against many resources.
pub struct CompiledSelector {
    group: Option<Regex>,
    version: Option<Regex>,
    kind: Option<Regex>,
    name: Option<Regex>,
    namespace: Option<Regex>,
    labels: Vec<Requirement>,
    annotations: Vec<Requirement>,
}

impl CompiledSelector {
    pub fn new(selector: &Selector) -> Result<CompiledSelector, SelectorError> {
        let anchored = |pattern: &str| {
            anchored_regex(pattern).map_err(|source| SelectorError::Pattern {
                pattern: pattern.to_string(),
                source,
            })
        };
        Ok(CompiledSelector {
            group: anchored(&selector.group)?,
            version: anchored(&selector.version)?,
            kind: anchored(&selector.kind)?,
            name: anchored(&selector.name)?,
            namespace: anchored(&selector.namespace)?,
            labels: parse_selector(&selector.label_selector)?,
            annotations: parse_selector(&selector.annotation_selector)?,
        })
    }

    /// A selector from its parts, as Kustomization `spec.ignore` targets give them.
    pub fn from_parts(
        group: &str,
        version: &str,
        kind: &str,
        name: &str,
        namespace: &str,
        label_selector: &str,
        annotation_selector: &str,
    ) -> Result<CompiledSelector, SelectorError> {
        CompiledSelector::new(&Selector {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
            name: name.into(),
            namespace: namespace.into(),
            label_selector: label_selector.into(),
            annotation_selector: annotation_selector.into(),
        })
    }

    /// Whether a plain object (outside a build) matches.
    pub fn matches_object(&self, object: &Value) -> bool {
        let text = |pointer: &str| object.pointer(pointer).and_then(Value::as_str);
        let entry = |map: &str, key: &str| {
            object
                .get("metadata")
                .and_then(|m| m.get(map))
                .and_then(|m| m.get(key))
                .and_then(Value::as_str)
        };
        self.matches_fields(text, entry)
    }

    /// [`Self::matches_object`] for an object read from a cluster.
    pub fn matches_json_object(&self, object: &serde_json::Value) -> bool {
        let text = |pointer: &str| object.pointer(pointer).and_then(serde_json::Value::as_str);
        let entry = |map: &str, key: &str| {
            object
                .get("metadata")
                .and_then(|m| m.get(map))
                .and_then(|m| m.get(key))
                .and_then(serde_json::Value::as_str)
        };
        self.matches_fields(text, entry)
    }

    /// `text` reads a string at a JSON pointer; `entry` a key of a metadata map.
    fn matches_fields<'o>(
        &self,
        text: impl Fn(&str) -> Option<&'o str>,
        entry: impl Fn(&str, &str) -> Option<&'o str>,
    ) -> bool {
        let field = |pointer: &str| text(pointer).unwrap_or("");
        let api_version = field("/apiVersion");
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let fits = |pattern: &Option<Regex>, value: &str| {
            pattern.as_ref().is_none_or(|p| p.is_match(value))
        };
        fits(&self.group, group)
            && fits(&self.version, version)
            && fits(&self.kind, field("/kind"))
            && fits(&self.name, field("/metadata/name"))
            && fits(&self.namespace, field("/metadata/namespace"))
            && matches_all(&self.labels, |key| entry("labels", key).map(Cow::Borrowed))
            && matches_all(&self.annotations, |key| {
                entry("annotations", key).map(Cow::Borrowed)
            })
    }

    pub fn matches(&self, resource: &Resource) -> bool {
        // Borrowed views: this runs for every resource against every target.
        let current_name = resource.name();
        let current_namespace = resource.namespace();
        let (original_name, original_namespace) = match resource.previous_ids.first() {
            Some(original) => (original.name.as_str(), original.namespace.as_str()),
            None => (current_name, current_namespace),
        };
        if let Some(namespace) = &self.namespace {
            // Cluster-scoped objects are in no namespace, not in `default`.
            let gvk = resource.gvk();
            let api_version = super::resource::str_at(&resource.object, "/apiVersion");
            let cluster_scoped =
                super::openapi::SchemaView::builtin().is_cluster_scoped(api_version, gvk.kind);
            let matches = |ns: &str| {
                !(cluster_scoped && ns.is_empty()) && namespace.is_match(effective_namespace(ns))
            };
            if !matches(original_namespace) && !matches(current_namespace) {
                return false;
            }
        }
        if let Some(name) = &self.name
            && !name.is_match(original_name)
            && !name.is_match(current_name)
        {
            return false;
        }
        let gvk = resource.gvk();
        let fits = |pattern: &Option<Regex>, value: &str| {
            pattern.as_ref().is_none_or(|p| p.is_match(value))
        };
        if !fits(&self.group, gvk.group)
            || !fits(&self.version, gvk.version)
            || !fits(&self.kind, gvk.kind)
        {
            return false;
        }
        let labels = resource.metadata_map("labels");
        let annotations = resource.metadata_map("annotations");
        matches_all(&self.labels, |key| {
            labels.and_then(|m| m.get(key)).and_then(node_text)
        }) && matches_all(&self.annotations, |key| {
            annotations.and_then(|m| m.get(key)).and_then(node_text)
        })
    }
}

/// A label's or annotation's value as kustomize's selectors read it in a build: the text of
/// its YAML node, so a number matches as it was written (`version: 1.10` is `1.10`).
fn node_text(value: &Value) -> Option<Cow<'_, str>> {
    match value {
        Value::String(text) => Some(Cow::Borrowed(text)),
        Value::Number(n) => Some(Cow::Owned(n.text())),
        Value::Bool(b) => Some(Cow::Borrowed(if *b { "true" } else { "false" })),
        Value::Null | Value::Object(_) | Value::Array(_) => None,
    }
}

fn effective_namespace(namespace: &str) -> &str {
    if namespace.is_empty() {
        "default"
    } else {
        namespace
    }
}

use super::labels::{Operator, Requirement};

fn matches_all<'v>(
    requirements: &[Requirement],
    get: impl Fn(&str) -> Option<Cow<'v, str>>,
) -> bool {
    requirements
        .iter()
        .all(|requirement| requirement.matches(&get))
}

/// A Kubernetes label selector (`a=b,c!=d,e in (f,g),h,!i`), for matching label maps
/// outside a build.
#[derive(Debug, Default)]
pub struct LabelSelector(Vec<Requirement>);

impl LabelSelector {
    /// Parses as Kubernetes' `labels.Parse`.
    pub fn parse(text: &str) -> Result<LabelSelector, SelectorError> {
        parse_selector(text).map(LabelSelector)
    }

    /// Parses as Kubernetes' `metav1.ParseToLabelSelector`, which Flux's watch selector goes
    /// through: `labels.Parse`, then only the operators a `LabelSelector` object can hold
    /// (no `!=`, `>` or `<`), in its words.
    pub fn parse_for_watch(text: &str) -> Result<LabelSelector, String> {
        let mut requirements = super::labels::parse(text)
            .map_err(|error| format!("couldn't parse the selector string \"{text}\": {error}"))?;
        // Kubernetes sorts a selector's requirements by key: the first refused is by key.
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        for requirement in &requirements {
            match requirement.operator {
                Operator::GreaterThan | Operator::LessThan => {
                    return Err(format!(
                        "\"{}\" isn't supported in label selectors",
                        requirement.operator.as_str()
                    ));
                }
                Operator::NotEquals => {
                    return Err(format!(
                        "\"{}\" is not a valid label selector operator",
                        requirement.operator.as_str()
                    ));
                }
                _ => {}
            }
        }
        Ok(LabelSelector(requirements))
    }

    /// Whether a label (or annotation) map satisfies every requirement.
    pub fn matches(&self, labels: Option<&Map>) -> bool {
        matches_all(&self.0, |key| {
            labels
                .and_then(|m| m.get(key))
                .and_then(Value::as_str)
                .map(Cow::Borrowed)
        })
    }
}

/// Parses as Kubernetes' `labels.Parse`, its error in its words alone.
pub fn labels_parse_message(text: &str) -> Result<LabelSelector, String> {
    super::labels::parse(text).map(LabelSelector)
}

fn parse_selector(text: &str) -> Result<Vec<Requirement>, SelectorError> {
    super::labels::parse(text).map_err(|message| SelectorError::Labels {
        selector: text.to_string(),
        message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json;

    fn resource(name: &str, labels: Value) -> Resource {
        Resource::new(
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": labels}}),
        )
    }

    #[test]
    fn names_are_anchored_regexes() {
        let selector = Selector {
            name: "app".into(),
            ..Default::default()
        };
        let compiled = CompiledSelector::new(&selector).unwrap();
        assert!(compiled.matches(&resource("app", json!({}))));
        assert!(!compiled.matches(&resource("app2", json!({}))));
        let selector = Selector {
            name: "app.*".into(),
            kind: "Deployment".into(),
            ..Default::default()
        };
        assert!(
            CompiledSelector::new(&selector)
                .unwrap()
                .matches(&resource("app2", json!({})))
        );
    }

    #[test]
    fn label_selectors() {
        let r = resource("x", json!({"tier": "web", "env": "prod", "replicas": "3"}));
        for (selector, expected) in [
            ("tier=web", true),
            ("tier==web,env=prod", true),
            ("tier!=web", false),
            ("tier in (web, api)", true),
            ("tier in(web)", true),
            ("tier  in  ( api )", false),
            ("env notin (prod)", false),
            ("env notin(dev)", true),
            ("replicas>2", true),
            ("replicas > 3", false),
            ("replicas<4", true),
            ("tier>2", false),
            ("missing", false),
            ("!missing", true),
            ("tier,!env", false),
        ] {
            let s = Selector {
                label_selector: selector.into(),
                ..Default::default()
            };
            assert_eq!(
                CompiledSelector::new(&s).unwrap().matches(&r),
                expected,
                "{selector}"
            );
        }
    }

    /// A NUL byte right after a token ends it and the selector goes on, as Kubernetes' lexer
    /// reads it; one where a token starts ends the selector.
    #[test]
    fn nul_bytes_end_tokens_as_kubernetes_lexer_reads_them() {
        let labels = |pairs: &[(&str, &str)]| {
            crate::value::Value::from(serde_json::Value::Object(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), serde_json::json!(v)))
                    .collect(),
            ))
        };
        let selector = LabelSelector::parse("a=b\0,c").unwrap();
        assert!(selector.matches(labels(&[("a", "b"), ("c", "")]).as_object()));
        assert!(
            !selector.matches(labels(&[("a", "b")]).as_object()),
            "c is required"
        );
        let ended = LabelSelector::parse("a=b, \0c").unwrap_err().to_string();
        assert!(ended.contains("expected: identifier after ','"), "{ended}");
    }

    /// `metav1.ParseToLabelSelector`, which Flux's watch selector goes through: the operators
    /// a LabelSelector object cannot hold are refused, the first by key.
    #[test]
    fn watch_selectors_refuse_what_a_label_selector_object_cannot_hold() {
        let refused = |text: &str| LabelSelector::parse_for_watch(text).unwrap_err();
        assert_eq!(
            refused("b>1,a!=c"),
            "\"!=\" is not a valid label selector operator"
        );
        assert_eq!(refused("a<1"), "\"lt\" isn't supported in label selectors");
        assert!(LabelSelector::parse_for_watch("!sharding.fluxcd.io/key").is_ok());
        assert!(LabelSelector::parse_for_watch("sharding.fluxcd.io/key in (a,b)").is_ok());
    }

    #[test]
    fn label_selectors_kubernetes_refuses_are_errors() {
        for selector in [
            "a=b=c",
            "a\0b",
            "a=b\0=c",
            "a in (b c)",
            "tier in web",
            "replicas>x",
            "replicas<",
            "a b",
        ] {
            assert!(LabelSelector::parse(selector).is_err(), "{selector}");
        }
    }
}

#[cfg(test)]
mod go_oracle {
    use super::LabelSelector;
    use crate::value::Value;

    /// `tests/fixtures/go/label-selectors.json`: 3,000 selectors (hand-picked and random
    /// compositions of keys, values, operators and separators) as Kubernetes' `labels.Parse`
    /// (k8s.io/apimachinery, 1.28) read them, and whether each matched four label sets. Ours
    /// refuses what it refuses, in its words, and matches what it matches.
    #[test]
    fn label_selectors_read_and_match_as_kubernetes_labels_package() {
        #[derive(serde::Deserialize)]
        struct Fixture {
            sets: Vec<serde_json::Value>,
            rows: Vec<(String, Option<String>, Option<Vec<bool>>)>,
        }
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/go/label-selectors.json"
        );
        let fixture: Fixture =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let sets: Vec<Value> = fixture.sets.into_iter().map(Value::from).collect();
        let mut differ = Vec::new();
        for (input, error, matches) in &fixture.rows {
            let ours = match super::super::labels::parse(input) {
                Ok(requirements) => {
                    let selector = LabelSelector(requirements);
                    let matched = sets.iter().map(|set| selector.matches(set.as_object()));
                    (Some(matched.collect::<Vec<bool>>()), None)
                }
                Err(message) => (None, Some(message)),
            };
            if (&ours.0, &ours.1) != (matches, error) {
                differ.push(format!(
                    "{input:?}: Kubernetes {matches:?} {error:?}, ours {ours:?}"
                ));
            }
        }
        assert!(fixture.rows.len() >= 3_000);
        assert!(
            differ.is_empty(),
            "{} differ:\n{}",
            differ.len(),
            differ.join("\n")
        );
    }
}
