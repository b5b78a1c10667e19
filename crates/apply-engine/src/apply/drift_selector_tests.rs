//! fluxcd/pkg `ssa/jsondiff` `selector_test.go`, row by row: which objects a `spec.ignore`
//! target selects (`TestSelectorRegex_*`). Each row is asked through [`IgnoreRules`]: the
//! rule's path applies to the object exactly when Flux's selector matches it; Flux's nil
//! selector is a rule without a target.

use serde_json::{Value, json};

use super::IgnoreRules;
use crate::api::{IgnoreRule, Selector};

/// A target from Flux's field names.
fn target(fields: &[(&str, &str)]) -> Option<Selector> {
    let mut selector = Selector::default();
    for (field, value) in fields {
        let value = Some(value.to_string());
        match *field {
            "Group" => selector.group = value,
            "Version" => selector.version = value,
            "Kind" => selector.kind = value,
            "Name" => selector.name = value,
            "Namespace" => selector.namespace = value,
            "LabelSelector" => selector.label_selector = value,
            "AnnotationSelector" => selector.annotation_selector = value,
            other => panic!("no selector field {other}"),
        }
    }
    Some(selector)
}

fn selects(target: Option<Selector>, object: &Value) -> bool {
    let rules = IgnoreRules::new(&[IgnoreRule {
        paths: vec!["/spec/ignored".into()],
        target,
    }])
    .expect("a valid rule");
    !rules.paths_for(object).is_empty()
}

fn check(test: &str, rows: Vec<(&str, Option<Selector>, Value, bool)>) {
    for (name, target, object, want) in rows {
        assert_eq!(selects(target, &object), want, "{test}: {name}: {object}");
    }
}

const VALID: &[(&str, &str)] = &[
    ("Group", "apps"),
    ("Version", "v1"),
    ("Kind", "Deployment"),
    ("Name", "name-.*"),
    ("Namespace", "namespace-.*"),
    ("LabelSelector", "foo.bar/label in (a, b)"),
    ("AnnotationSelector", "foo.bar/annotation notin (c)"),
];

const DEPLOYMENT: &[(&str, &str)] = &[("Group", "apps"), ("Version", "v1"), ("Kind", "Deployment")];

#[test]
fn flux_selector_regex_match_unstructured() {
    check(
        "TestSelectorRegex_MatchUnstructured",
        vec![
            (
                "valid input",
                target(VALID),
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {
                    "name": "name-1", "namespace": "namespace-1",
                    "labels": {"foo.bar/label": "a"},
                    "annotations": {"foo.bar/annotation": "d"}}}),
                true,
            ),
            (
                "nil selector",
                None,
                json!({"apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": {"name": "anything", "namespace": "anything"}}),
                true,
            ),
            (
                "mismatched namespace",
                target(&[("Namespace", "exact-namespace")]),
                json!({"metadata": {"namespace": "other-namespace"}}),
                false,
            ),
            (
                "mismatched name",
                target(&[("Name", "exact-name")]),
                json!({"metadata": {"name": "other-name"}}),
                false,
            ),
            (
                "mismatched GVK",
                target(DEPLOYMENT),
                json!({"apiVersion": "apps/v1", "kind": "StatefulSet"}),
                false,
            ),
            (
                "mismatched label",
                target(&[("LabelSelector", "foo.bar/label in (a, b)")]),
                json!({"metadata": {"labels": {"foo.bar/label": "c"}}}),
                false,
            ),
            (
                "mismatched annotation",
                target(&[("AnnotationSelector", "foo.bar/annotation notin (c)")]),
                json!({"metadata": {"annotations": {"foo.bar/annotation": "c"}}}),
                false,
            ),
            (
                "combination of mismatches",
                target(VALID),
                json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {
                    "name": "other-name-1", "namespace": "other-namespace-1",
                    "labels": {"foo.bar/label": "c"},
                    "annotations": {"foo.bar/annotation": "c"}}}),
                false,
            ),
            ("empty input object", target(&[]), json!({}), true),
        ],
    );
}

fn typed(api_version: &str, kind: &str) -> Value {
    json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": "n"}})
}

#[test]
fn flux_selector_regex_match_gvk() {
    check(
        "TestSelectorRegex_MatchGVK",
        vec![
            (
                "valid match",
                target(DEPLOYMENT),
                typed("apps/v1", "Deployment"),
                true,
            ),
            (
                "valid match with regex",
                target(&[
                    ("Group", "apps"),
                    ("Version", "v.*"),
                    ("Kind", "Deployment"),
                ]),
                typed("apps/v1", "Deployment"),
                true,
            ),
            (
                "valid match without regex",
                target(&[]),
                typed("apps/v1", "Deployment"),
                true,
            ),
            (
                "invalid group",
                target(DEPLOYMENT),
                typed("extensions/v1", "Deployment"),
                false,
            ),
            (
                "invalid version",
                target(DEPLOYMENT),
                typed("apps/v2", "Deployment"),
                false,
            ),
            (
                "invalid kind",
                target(DEPLOYMENT),
                typed("apps/v1", "StatefulSet"),
                false,
            ),
            (
                "partial selector",
                target(&[("Group", "apps"), ("Kind", "Deployment")]),
                typed("apps/v2", "Deployment"),
                true,
            ),
            // Flux asks with an empty group, version and kind.
            ("empty selector", target(&[]), json!({}), true),
            ("nil selector", None, json!({}), true),
        ],
    );
}

#[test]
fn flux_selector_regex_match_name_and_namespace() {
    let named = |name: &str| json!({"metadata": {"name": name}});
    check(
        "TestSelectorRegex_MatchName",
        vec![
            (
                "valid match",
                target(&[("Name", "name-1")]),
                named("name-1"),
                true,
            ),
            (
                "valid match with regex",
                target(&[("Name", "name-.*")]),
                named("name-2"),
                true,
            ),
            (
                "invalid name",
                target(&[("Name", "name-.*")]),
                named("other-name-1"),
                false,
            ),
            ("empty selector", target(&[]), named("any-name"), true),
            ("nil selector", None, named("any-name"), true),
        ],
    );
    let in_namespace = |namespace: &str| json!({"metadata": {"namespace": namespace}});
    check(
        "TestSelectorRegex_MatchNamespace",
        vec![
            (
                "valid match",
                target(&[("Namespace", "ns-1")]),
                in_namespace("ns-1"),
                true,
            ),
            (
                "valid match with regex",
                target(&[("Namespace", "ns-.*")]),
                in_namespace("ns-2"),
                true,
            ),
            (
                "invalid namespace",
                target(&[("Namespace", "ns-.*")]),
                in_namespace("other-ns-1"),
                false,
            ),
            ("empty selector", target(&[]), in_namespace("any-ns"), true),
            ("nil selector", None, in_namespace("any-ns"), true),
        ],
    );
}

#[test]
fn flux_selector_regex_match_label_and_annotation_selectors() {
    for (test, field, key) in [
        (
            "TestSelectorRegex_MatchAnnotationSelector",
            "AnnotationSelector",
            "annotations",
        ),
        (
            "TestSelectorRegex_MatchLabelSelector",
            "LabelSelector",
            "labels",
        ),
    ] {
        let with = |pairs: Value| json!({"metadata": {key: pairs}});
        check(
            test,
            vec![
                (
                    "valid match",
                    target(&[(field, "key-1=value-1")]),
                    with(json!({"key-1": "value-1", "key-2": "value-2"})),
                    true,
                ),
                (
                    "invalid",
                    target(&[(field, "key-1 in(value-1)")]),
                    with(json!({"key-1": "value-2"})),
                    false,
                ),
                (
                    "empty selector",
                    target(&[]),
                    with(json!({"key-1": "value-1"})),
                    true,
                ),
                (
                    "nil selector",
                    None,
                    with(json!({"key-2": "value-2"})),
                    true,
                ),
            ],
        );
    }
}
