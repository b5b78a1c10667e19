//! fluxcd/pkg `runtime/cel` v0.110.1's `status_evaluator_test.go` and the CEL rows of
//! `status_reader_test.go`, row by row: which health check expressions compile, and what an
//! object's status is by them (generation first, then InProgress, Failed and Current, an
//! error in any of them reported). The objects get the check's apiVersion and kind, which
//! Flux's evaluator is handed the check for instead.

use serde_json::{Value, json};

use super::tests::check;
use super::*;

/// A check's expressions: Current, then InProgress and Failed if any.
type Exprs<'a> = (&'a str, Option<&'a str>, Option<&'a str>);

fn widget(mut object: Value) -> Value {
    object["apiVersion"] = json!("example.com/v1");
    object["kind"] = json!("Widget");
    object
}

/// `TestNewStatusEvaluator`: Current is required (the CRD's schema requires it here, so the
/// row is a CRD validation); a parse error names the expression's field.
#[test]
fn flux_new_status_evaluator() {
    let rows: [(&str, Exprs, &str); 5] = [
        (
            "all expressions are present",
            ("data.current", Some("data.inProgress"), Some("data.failed")),
            "",
        ),
        (
            "InProgress and Failed are optional",
            ("data.current", None, None),
            "",
        ),
        (
            "errors if Current is invalid",
            ("data.", None, None),
            "failed to parse the expression Current",
        ),
        (
            "errors if InProgress is invalid",
            ("data.current", Some("data."), None),
            "failed to parse the expression InProgress",
        ),
        (
            "errors if Failed is invalid",
            ("data.current", None, Some("data.")),
            "failed to parse the expression Failed",
        ),
    ];
    for (name, (current, in_progress, failed), error) in rows {
        let result = CelChecks::new(&[check(current, in_progress, failed)]);
        match (error, result) {
            ("", Ok(_)) => {}
            ("", Err(e)) => panic!("{name}: {e}"),
            (wanted, Err(e)) => assert!(e.to_string().contains(wanted), "{name}: {e}"),
            (_, Ok(_)) => panic!("{name}: compiled"),
        }
    }
}

/// `TestStatusEvaluator_Evaluate`, every row: the status, or the error reported with an
/// in-progress status.
#[test]
fn flux_status_evaluator_evaluate() {
    let data = |current: bool, in_progress: bool, failed: bool| json!({"data": {"current": current, "inProgress": in_progress, "failed": failed}});
    let ready_exprs = |with_in_progress: bool| {
        (
            "status.conditions.filter(e, e.type == 'Ready').all(e, e.status == 'True')",
            with_in_progress
                .then_some("has(status.observedGeneration) && metadata.generation != status.observedGeneration"),
            Some("status.conditions.filter(e, e.type == 'Ready').all(e, e.status == 'False')"),
        )
    };
    let all = ("data.current", Some("data.inProgress"), Some("data.failed"));
    let rows: Vec<(&str, Exprs, Value, Result<Status, &str>)> = vec![
        (
            "observed generation exists and is different",
            ("true", None, None),
            json!({"metadata": {"generation": 2}, "status": {"observedGeneration": 1}}),
            Ok(Status::InProgress),
        ),
        (
            "if Current returns an error, the error is returned",
            (
                "data.currentt",
                Some("data.inProgress"),
                Some("data.failed"),
            ),
            data(true, false, false),
            Err("failed to evaluate the CEL expression 'data.currentt': no such key: currentt"),
        ),
        (
            "if InProgress returns an error, the error is returned",
            (
                "data.current",
                Some("data.inProgresss"),
                Some("data.failed"),
            ),
            data(true, false, false),
            Err(
                "failed to evaluate the CEL expression 'data.inProgresss': no such key: inProgresss",
            ),
        ),
        (
            "if Failed returns an error, the error is returned",
            (
                "data.current",
                Some("data.inProgress"),
                Some("data.failedd"),
            ),
            data(true, false, false),
            Err("failed to evaluate the CEL expression 'data.failedd': no such key: failedd"),
        ),
        (
            "if all expressions evaluate to false then the object is in progress",
            all,
            data(false, false, false),
            Ok(Status::InProgress),
        ),
        (
            "if all expressions evaluate to true then the object is in progress",
            all,
            data(true, true, true),
            Ok(Status::InProgress),
        ),
        (
            "if both Current and Failed evaluate to true, then the object failed",
            all,
            data(true, false, true),
            Ok(Status::Failed),
        ),
        (
            "if only Current evaluates to true, then the object is current",
            all,
            data(true, false, false),
            Ok(Status::Current),
        ),
        (
            "object without status with inProgress expression",
            ready_exprs(true),
            json!({}),
            Err(
                "failed to evaluate the CEL expression 'has(status.observedGeneration) && metadata.generation != status.observedGeneration': no such attribute(s): status.observedGeneration",
            ),
        ),
        (
            "object without status without inProgress expression",
            ready_exprs(false),
            json!({}),
            Err(
                "failed to evaluate the CEL expression 'status.conditions.filter(e, e.type == 'Ready').all(e, e.status == 'False')': no such attribute(s): status.conditions",
            ),
        ),
        (
            "object with status without status.conditions with inProgress expression",
            ready_exprs(true),
            json!({"status": {}}),
            Err(
                "failed to evaluate the CEL expression 'status.conditions.filter(e, e.type == 'Ready').all(e, e.status == 'False')': no such key: conditions",
            ),
        ),
        (
            "object with status without status.conditions without inProgress expression",
            ready_exprs(false),
            json!({"status": {}}),
            Err(
                "failed to evaluate the CEL expression 'status.conditions.filter(e, e.type == 'Ready').all(e, e.status == 'False')': no such key: conditions",
            ),
        ),
        (
            "object with status with empty status.conditions with inProgress expression",
            ready_exprs(true),
            json!({"status": {"conditions": []}}),
            Ok(Status::Failed),
        ),
        (
            "object with status with empty status.conditions without inProgress expression",
            ready_exprs(false),
            json!({"status": {"conditions": []}}),
            Ok(Status::Failed),
        ),
        (
            "object with status.observedGeneration with inProgress expression",
            ready_exprs(true),
            json!({"metadata": {"generation": 2}, "status": {"observedGeneration": 1}}),
            Ok(Status::InProgress),
        ),
        (
            "object with status.observedGeneration without inProgress expression",
            ready_exprs(false),
            json!({"metadata": {"generation": 2}, "status": {"observedGeneration": 1}}),
            Ok(Status::InProgress),
        ),
        (
            "object with non-int64 status.observedGeneration is tolerated and delegated to CEL expressions",
            ("status.observedGeneration == '2'", None, None),
            json!({"metadata": {"generation": 2}, "status": {"observedGeneration": "2"}}),
            Ok(Status::Current),
        ),
        (
            "object with non-int64 metadata.generation is tolerated and delegated to CEL expressions",
            ("metadata.generation == '2'", None, None),
            json!({"metadata": {"generation": "2"}, "status": {"observedGeneration": 2}}),
            Ok(Status::Current),
        ),
    ];
    let mut wrong = Vec::new();
    for (name, (current, in_progress, failed), object, wanted) in rows {
        let checks = CelChecks::new(&[check(current, in_progress, failed)]).unwrap();
        let (assessment, error) = checks.evaluate(&widget(object)).expect("a check covers it");
        let got = match error {
            Some(error) => Err(error),
            None => Ok(assessment.status),
        };
        let matches = match (&wanted, &got) {
            (Ok(status), Ok(ours)) => status == ours,
            (Err(message), Err(ours)) => ours == message,
            _ => false,
        };
        if !matches {
            wrong.push(format!("{name}: wanted {wanted:?}, got {got:?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

fn group_check(
    api_version: &str,
    kind: Option<&str>,
    current: &str,
    failed: Option<&str>,
) -> CustomHealthCheck {
    CustomHealthCheck {
        api_version: api_version.into(),
        kind: kind.map(str::to_string),
        current: current.into(),
        in_progress: None,
        failed: failed.map(str::to_string),
    }
}

/// `TestStatusReader_Supports`: a check covers its group and kind; one without a kind covers
/// its whole group (an object always has a kind here, so the row of a GroupKind without one
/// is the group-only row).
#[test]
fn flux_status_reader_supports() {
    let rows = [
        ("supported", Some("Test"), "test/v1", "Test", true),
        ("unsupported", Some("Test"), "test/v1", "Unsupported", false),
        (
            "group-only healthcheck supports any kind in that group",
            None,
            "test/v1",
            "AnyKind",
            true,
        ),
        (
            "group-only healthcheck does not support other groups",
            None,
            "other/v1",
            "AnyKind",
            false,
        ),
    ];
    for (name, kind, api_version, object_kind, supported) in rows {
        let checks = CelChecks::new(&[group_check("test/v1", kind, "something", None)]).unwrap();
        let object = json!({"apiVersion": api_version, "kind": object_kind});
        assert_eq!(checks.evaluate(&object).is_some(), supported, "{name}");
    }
}

/// `TestStatusReader_ReadStatusForObject_GroupOnlyHealthCheck` and
/// `TestStatusReader_ReadStatusForObject_SpecificKindOverridesGroupOnly`: a group's check
/// covers every kind of it and no other group; a kind's own check wins over its group's.
#[test]
fn flux_status_reader_group_only_and_specific_kind() {
    let group_only = CelChecks::new(&[group_check(
        "bitnami.com/v1alpha1",
        None,
        "data.current",
        None,
    )])
    .unwrap();
    for kind in ["SealedSecret", "AnotherKind"] {
        let object = json!({"apiVersion": "bitnami.com/v1alpha1", "kind": kind,
            "data": {"current": true}});
        assert_eq!(group_only.assess(&object).unwrap().status, Status::Current);
    }
    let other = json!({"apiVersion": "other.com/v1", "kind": "Foo", "data": {"current": true}});
    assert!(
        group_only.assess(&other).is_none(),
        "another group is kstatus's"
    );

    let both = CelChecks::new(&[
        group_check("bitnami.com/v1alpha1", None, "false", Some("true")),
        group_check("bitnami.com/v1alpha1", Some("SealedSecret"), "true", None),
    ])
    .unwrap();
    let status = |kind: &str| {
        both.assess(&json!({"apiVersion": "bitnami.com/v1alpha1", "kind": kind}))
            .unwrap()
            .status
    };
    assert_eq!(status("SealedSecret"), Status::Current);
    assert_eq!(status("OtherKind"), Status::Failed);
}

/// `TestNewStatusReader_DuplicateGroupKindError`, `TestNewStatusReader_DuplicateGroupOnlyError`
/// and `TestNewStatusReader_CELCompileError`.
#[test]
fn flux_new_status_reader_errors() {
    let duplicate_kind = CelChecks::new(&[
        group_check("v1", Some("ConfigMap"), "something", None),
        group_check("v1", Some("ConfigMap"), "something", None),
    ]);
    let duplicate_group = CelChecks::new(&[
        group_check("bitnami.com/v1alpha1", None, "true", None),
        group_check("bitnami.com/v1alpha1", None, "true", None),
    ]);
    for result in [duplicate_kind, duplicate_group] {
        let error = result.err().expect("a duplicate is refused").to_string();
        assert!(
            error.contains("duplicate custom health check for GroupKind"),
            "{error}"
        );
        assert!(error.contains("healthchecks[1]"), "{error}");
    }
    let error = CelChecks::new(&[group_check("v1", Some("ConfigMap"), "something.", None)])
        .err()
        .expect("a parse error")
        .to_string();
    assert!(
        error.contains("failed to create custom status evaluator for healthchecks[0]"),
        "{error}"
    );
}

/// Beyond the rows: which operand's error cel-go reports (the left of `||` when both fail, a
/// conditional's chosen branch), and a missing field under `has()` named whole.
#[test]
fn errors_are_the_operand_cel_go_evaluates_first() {
    let rows = [
        (
            "status.ready == true || metadata.ready == true",
            json!({}),
            "no such attribute(s): status.ready",
        ),
        (
            "has(spec.x) ? status.y == 1 : status.z == 1",
            json!({"spec": {"x": 1}, "status": {}}),
            "no such key: y",
        ),
        (
            "has(spec.x) ? status.y == 1 : status.z == 1",
            json!({"spec": {}, "status": {}}),
            "no such key: z",
        ),
        (
            "has(data.foo.bar)",
            json!({"data": {}}),
            "no such attribute(s): data.foo.bar",
        ),
        (
            "self.status.phase == 'Ready'",
            json!({"status": {}}),
            "no such key: phase",
        ),
    ];
    for (expression, object, cause) in rows {
        let checks = CelChecks::new(&[check(expression, None, None)]).unwrap();
        let (_, error) = checks.evaluate(&widget(object)).unwrap();
        assert_eq!(
            error,
            Some(format!(
                "failed to evaluate the CEL expression '{expression}': {cause}"
            )),
            "{expression}"
        );
    }
}
