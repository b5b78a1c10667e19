use serde_json::{Value, json};

use super::{DecodeError, JsonPatch};

const NO_LIMIT: usize = usize::MAX;

fn apply(document: &str, patch: &str) -> Result<Value, String> {
    let mut document: Value = serde_json::from_str(document).expect("document is JSON");
    let patch = JsonPatch::decode(serde_json::from_str(patch).expect("patch is JSON"))
        .map_err(|e| e.to_string())?;
    patch
        .apply(&mut document, NO_LIMIT)
        .map(|()| document)
        .map_err(|e| e.to_string())
}

/// `tests/fixtures/go/json-patch-v4.json`: the tables of the library kustomize applies JSON
/// 6902 patches with (tools/port_json_patch_tables.py).
#[test]
fn the_go_librarys_own_tables_pass() {
    #[derive(serde::Deserialize)]
    struct Row {
        doc: String,
        patch: String,
        #[serde(default)]
        result: Option<String>,
        #[serde(default)]
        passes: Option<bool>,
        #[serde(default)]
        failed_path: Option<String>,
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "PascalCase")]
    struct Fixture {
        cases: Vec<Row>,
        mutation_test_cases: Vec<Row>,
        bad_cases: Vec<Row>,
        test_cases: Vec<Row>,
    }
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/go/json-patch-v4.json"
    );
    let fixture: Fixture =
        serde_json::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("rows");
    assert!(fixture.cases.len() >= 20 && fixture.bad_cases.len() >= 15);
    for row in &fixture.cases {
        let expected: Value = serde_json::from_str(row.result.as_deref().unwrap()).unwrap();
        assert_eq!(apply(&row.doc, &row.patch), Ok(expected), "{}", row.patch);
    }
    for row in &fixture.mutation_test_cases {
        let original: Value = serde_json::from_str(&row.doc).unwrap();
        let patched = apply(&row.doc, &row.patch).expect(&row.patch);
        assert_ne!(patched, original, "{}", row.patch);
    }
    for row in &fixture.bad_cases {
        assert!(apply(&row.doc, &row.patch).is_err(), "{}", row.patch);
    }
    for row in &fixture.test_cases {
        let outcome = apply(&row.doc, &row.patch);
        if row.passes.unwrap() {
            assert!(outcome.is_ok(), "{}: {outcome:?}", row.patch);
        } else {
            let path = row.failed_path.as_deref().unwrap();
            assert_eq!(
                outcome.err(),
                Some(format!("testing value {path} failed: test failed")),
                "{}",
                row.patch
            );
        }
    }
}

/// What kustomize's library does where RFC 6902 says otherwise or is silent; each row was
/// seen in `kubectl kustomize` (tools/mutate_patches.py).
#[test]
fn leniencies_kustomize_builds_rely_on() {
    let doc = r#"{"a": {"b": 1, "n": null}, "l": ["x", "y"]}"#;
    let rows: &[(&str, Result<Value, &str>)] = &[
        // No `value`: null.
        (
            r#"[{"op": "add", "path": "/a/c"}]"#,
            Ok(json!({"a": {"b": 1, "c": null, "n": null}, "l": ["x", "y"]})),
        ),
        (
            r#"[{"op": "replace", "path": "/a/b"}]"#,
            Ok(json!({"a": {"b": null, "n": null}, "l": ["x", "y"]})),
        ),
        // `replace` of a missing member adds it.
        (
            r#"[{"op": "replace", "path": "/a/c", "value": 2}]"#,
            Ok(json!({"a": {"b": 1, "c": 2, "n": null}, "l": ["x", "y"]})),
        ),
        // `copy` from a missing member copies null.
        (
            r#"[{"op": "copy", "from": "/a/zz", "path": "/a/c"}]"#,
            Ok(json!({"a": {"b": 1, "c": null, "n": null}, "l": ["x", "y"]})),
        ),
        // A `~` that escapes nothing is kept; `~01` is `~1`.
        (
            r#"[{"op": "add", "path": "/a/x~2~01", "value": 2}]"#,
            Ok(json!({"a": {"b": 1, "n": null, "x~2~1": 2}, "l": ["x", "y"]})),
        ),
        // A path without its leading `/` names its last step in the object itself.
        (
            r#"[{"op": "add", "path": "whatever/c", "value": 2}]"#,
            Ok(json!({"a": {"b": 1, "n": null}, "c": 2, "l": ["x", "y"]})),
        ),
        // Indices as Go's Atoi reads them: a sign, leading zeros, negatives from the end.
        (
            r#"[{"op": "add", "path": "/l/+01", "value": "z"}]"#,
            Ok(json!({"a": {"b": 1, "n": null}, "l": ["x", "z", "y"]})),
        ),
        (
            r#"[{"op": "add", "path": "/l/-1", "value": "z"}]"#,
            Ok(json!({"a": {"b": 1, "n": null}, "l": ["x", "y", "z"]})),
        ),
        (
            r#"[{"op": "remove", "path": "/l/-2"}]"#,
            Ok(json!({"a": {"b": 1, "n": null}, "l": ["y"]})),
        ),
        // `test` of null (or of nothing) passes on a missing or null member.
        (
            r#"[{"op": "test", "path": "/a/zz", "value": null}]"#,
            Ok(json!(null)),
        ),
        (r#"[{"op": "test", "path": "/a/n"}]"#, Ok(json!(null))),
        // A null member is no container to go through.
        (
            r#"[{"op": "add", "path": "/a/n/x", "value": 1}]"#,
            Err(r#"add operation does not apply: doc is missing path: "/a/n/x": missing value"#),
        ),
        (
            r#"[{"op": "add", "path": "/l/3", "value": 1}]"#,
            Err(
                "error in add for path: '/l/3': Unable to access invalid index: 3: invalid index referenced",
            ),
        ),
        (
            r#"[{"op": "add", "path": "/l/x", "value": 1}]"#,
            Err(
                "error in add for path: '/l/x': value was not a proper array index: 'x': strconv.Atoi: parsing \"x\": invalid syntax",
            ),
        ),
        (
            r#"[{"op": "remove", "path": "/a/zz"}]"#,
            Err(
                "error in remove for path: '/a/zz': Unable to remove nonexistent key: zz: missing value",
            ),
        ),
        (
            r#"[{"op": "replace", "path": "/l/2", "value": 1}]"#,
            Err("replace operation does not apply: doc is missing key: /l/2: missing value"),
        ),
        (
            r#"[{"op": "replace", "path": "", "value": 1}]"#,
            Err("replace operation value must be object or array"),
        ),
        (
            r#"[{"op": "move", "from": "/a/zz", "path": "/c"}]"#,
            Err(
                "error in move for path: 'zz': Unable to remove nonexistent key: zz: missing value",
            ),
        ),
        (
            r#"[{"op": "test", "path": "/a/b", "value": "1"}]"#,
            Err("testing value /a/b failed: test failed"),
        ),
        (
            r#"[{"op": "merge", "path": "/a"}]"#,
            Err("Unexpected kind: merge"),
        ),
        (r#"[{"path": "/a"}]"#, Err("Unexpected kind: unknown")),
        (r#"[null]"#, Err("Unexpected kind: unknown")),
        (
            r#"[{"op": "replace"}]"#,
            Err(
                "replace operation failed to decode path: operation missing path field: missing value",
            ),
        ),
        (
            r#"[{"op": "add", "path": 3}]"#,
            Err("add operation failed to decode path: missing value"),
        ),
        (
            r#"[{"op": "move", "from": 3, "path": "/b"}]"#,
            Err(
                "move operation failed to decode from: json: cannot unmarshal number into Go value of type string",
            ),
        ),
    ];
    for (patch, expected) in rows {
        let outcome = apply(doc, patch);
        match expected {
            Ok(Value::Null) => assert!(outcome.is_ok(), "{patch}: {outcome:?}"),
            Ok(expected) => assert_eq!(outcome.as_ref(), Ok(expected), "{patch}"),
            Err(message) => assert_eq!(outcome, Err(message.to_string()), "{patch}"),
        }
    }
}

#[test]
fn a_patch_is_a_list_of_mappings_read_only_when_applied() {
    assert_eq!(
        JsonPatch::decode(json!({"op": "add"})),
        Err(DecodeError::NotAList("object"))
    );
    assert_eq!(
        JsonPatch::decode(json!([{"op": "add"}, "x"])),
        Err(DecodeError::NotAnOperation("string"))
    );
    let unreadable = JsonPatch::decode(json!([{"op": 1, "path": [], "value": {}}, null]));
    assert!(unreadable.is_ok_and(|patch| !patch.is_empty()));
}

#[test]
fn copies_stop_at_the_size_bound() {
    let patch = JsonPatch::decode(json!([
        {"op": "copy", "from": "/a", "path": "/b"},
        {"op": "copy", "from": "/b", "path": "/c"},
    ]))
    .unwrap();
    let mut document = json!({"a": "x".repeat(40)});
    assert_eq!(
        patch.apply(&mut document, 100),
        Err(super::OperationError::TooLarge(100))
    );
}
