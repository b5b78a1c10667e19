//! The YAML reader's tests: documents and scalar types, patches' number keys, anchors and
//! merge keys, the alias and nesting bounds, errors' lines, block, quoted and folded scalars
//! as go-yaml reads them, and resources' annotations as their text.

use super::*;
use crate::json;

fn kyaml(text: &str) -> Vec<Value> {
    parse_documents(text, Schema::Kyaml).unwrap()
}

#[test]
fn reads_documents_and_types() {
    let docs = kyaml("a: on\nb: 0777\nc: '0777'\nd: !!str 12\ne: |\n  x\n---\n- 1.5\n- ~\n---\n");
    assert_eq!(
        docs[0],
        json!({"a": "on", "b": 511, "c": "0777", "d": "12", "e": "x\n"})
    );
    assert_eq!(docs[1], json!([1.5, null]));
    assert_eq!(
        docs[2],
        Value::Null,
        "an empty document is reported as null"
    );
    assert_eq!(docs.len(), 3);
}

#[test]
fn explicit_tags_decode_as_go_yaml_or_fail_in_its_words() {
    let cases: &[(&str, Result<Value, &str>)] = &[
        ("!!int \"23\"", Ok(json!(23))),
        ("!!int '0x1F'", Ok(json!(31))),
        ("!!float \"3\"", Ok(json!(3.0))),
        ("!!bool \"True\"", Ok(json!(true))),
        ("!!str 23", Ok(json!("23"))),
        ("!!null \"\"", Ok(Value::Null)),
        ("!!binary aGVsbG8=", Ok(json!("hello"))),
        (
            "!!timestamp \"2001-12-14\"",
            Ok(json!("2001-12-14T00:00:00Z")),
        ),
        (
            "!!int \"abc\"",
            Err("line 1: cannot decode !!str as a !!int"),
        ),
        ("!!int 1.5", Err("line 1: cannot decode !!float as a !!int")),
        ("!!bool yes", Err("line 1: cannot decode !!str as a !!bool")),
        (
            "!!timestamp x",
            Err("line 1: cannot decode !!str as a !!timestamp"),
        ),
        (
            "!!binary 'no base64!'",
            Err("line 1: !!binary value contains invalid base64 data"),
        ),
    ];
    for (text, expected) in cases {
        let read = parse_documents(&format!("v: {text}\n"), Schema::Kyaml)
            .map(|documents| documents[0]["v"].clone())
            .map_err(|e| e.to_string());
        assert_eq!(read, expected.clone().map_err(str::to_string), "{text}");
    }
}

#[test]
fn resources_read_an_empty_value_in_flow_style_as_an_empty_string() {
    let objects = parse_resources("f: {e: , t: ~, g: !!null }\nb:\n  e:\nl: [k: ]\n").unwrap();
    assert_eq!(
        objects[0].value,
        json!({"f": {"e": "", "t": null, "g": null}, "b": {"e": null}, "l": [{"k": ""}]})
    );
    assert_eq!(objects[0].empty_values, ["/f/e", "/f/g", "/b/e", "/l/0/k"]);
}

#[test]
fn patches_say_where_a_null_is_not_spelled_null() {
    let patches = parse_patches(
        "metadata:\n  labels:\n    a: null\n    b: ~\n    c:\n    d: Null\n    e: 'null'\nl:\n- ~\n---\nk: null\n",
    )
    .unwrap();
    assert_eq!(
        patches[0].null_spellings,
        [
            ("/metadata/labels/b".to_string(), "~".to_string()),
            ("/metadata/labels/c".to_string(), String::new()),
            ("/metadata/labels/d".to_string(), "Null".to_string()),
            ("/l/0".to_string(), "~".to_string()),
        ]
    );
    assert!(patches[1].null_spellings.is_empty());
}

#[test]
fn patches_read_number_keys_as_their_text_and_say_where() {
    let patches =
        parse_patches("data:\n  6443: a\n  true: b\n  x/y:\n    7: c\n---\nk: v\n").unwrap();
    assert_eq!(
        patches[0].value,
        json!({"data": {"6443": "a", "true": "b", "x/y": {"7": "c"}}})
    );
    assert_eq!(
        patches[0].number_keys,
        ["/data/6443", "/data/true", "/data/x~1y/7"]
    );
    assert!(patches[1].number_keys.is_empty());
    // Under a list the key still has to be quoted; resources never take one.
    assert!(matches!(
        parse_patches("items:\n- 1: a\n"),
        Err(YamlError::NonStringKey { .. })
    ));
    assert!(matches!(
        parse_resources("data:\n  6443: a\n"),
        Err(YamlError::NonStringKey { .. })
    ));
}

#[test]
fn kubernetes_schema_reads_yaml11_booleans() {
    let doc = parse_single("labels: {x: y}", Schema::Kubernetes).unwrap();
    assert_eq!(doc, json!({"labels": {"x": true}}));
}

#[test]
fn anchors_aliases_and_merge_keys() {
    let doc = parse_single(
        "base: &b {x: 1, y: 2}\nchild:\n  <<: *b\n  y: 3\nlist: [*b]\n",
        Schema::Kyaml,
    )
    .unwrap();
    assert_eq!(
        doc,
        json!({"base": {"x": 1, "y": 2}, "child": {"x": 1, "y": 3}, "list": [{"x": 1, "y": 2}]})
    );
}

#[test]
fn alias_expansion_is_bounded() {
    // "Billion laughs": ten levels of ten aliases each.
    let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..10 {
        let refs = vec![format!("*a{}", i - 1); 10].join(", ");
        text.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
    }
    let err = parse_single(&text, Schema::Kyaml).unwrap_err();
    assert!(matches!(err, YamlError::AliasBudget { .. }), "{err}");
    // Deep anchors reused at depth.
    let deep = format!(
        "a: &d {}1{}\nb: {}*d{}\n",
        "[".repeat(200),
        "]".repeat(200),
        "[".repeat(100),
        "]".repeat(100)
    );
    let err = parse_single(&deep, Schema::Kyaml).unwrap_err();
    assert!(
        matches!(err, YamlError::TooDeep { .. } | YamlError::Syntax { .. }),
        "{err}"
    );
}

#[test]
fn nesting_is_bounded() {
    // granit-parser stops a little below our own bound; either way it is an error, not a
    // stack overflow.
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let err = parse_single(&deep, Schema::Kyaml).unwrap_err();
    assert!(
        matches!(err, YamlError::TooDeep { .. } | YamlError::Syntax { .. }),
        "{err}"
    );
    let ok = format!("{}{}", "[".repeat(100), "]".repeat(100));
    assert!(parse_single(&ok, Schema::Kyaml).is_ok());
}

#[test]
fn errors_carry_lines() {
    let err = parse_single("a: 1\nb: 2\na: 3\n", Schema::Kyaml).unwrap_err();
    assert_eq!(err.to_string(), "line 3: mapping key \"a\" already defined");
    let err = parse_single("a: [1\nb: 2", Schema::Kyaml).unwrap_err();
    assert!(matches!(err, YamlError::Syntax { .. }), "{err}");
    let err = parse_single("a: -.inf", Schema::Kyaml).unwrap_err();
    assert!(err.to_string().contains("-.inf"), "{err}");
    let err = parse_single("? [a]\n: b\n", Schema::Kyaml).unwrap_err();
    assert!(matches!(err, YamlError::ComplexKey { .. }), "{err}");
}

/// go-yaml's reading: a block scalar on the last line, without a final line break.
#[test]
fn a_block_scalar_ending_the_text_without_a_break_has_none() {
    assert_eq!(kyaml("v: |\n  a\n  b")[0]["v"], "a\nb");
    assert_eq!(kyaml("v: |+\n  a\n  b")[0]["v"], "a\nb");
    assert_eq!(kyaml("v: >\n  a\n  b")[0]["v"], "a b");
    assert_eq!(kyaml("v: |\n  a\n")[0]["v"], "a\n");
    assert_eq!(kyaml("v: |\n  a\n\n  ")[0]["v"], "a\n");
}

/// Resources read annotations as their text, at `metadata.annotations` only.
#[test]
fn resources_read_annotation_values_as_their_text() {
    let objects = parse_resources(
        "metadata:\n  annotations:\n    octal: 0755\n    tilde: ~\n    empty:\n    list: [a]\n    inf: .inf\n  labels:\n    octal: 0755\nspec:\n  annotations:\n    n: 1\n",
    )
    .unwrap();
    let object = &objects[0].value;
    assert_eq!(objects[0].empty_values, ["/metadata/annotations/empty"]);
    assert_eq!(
        object["metadata"]["annotations"],
        crate::json!({"octal": "0755", "tilde": "~", "empty": "", "list": "", "inf": ".inf"})
    );
    assert_eq!(object["metadata"]["labels"]["octal"], 493);
    assert_eq!(object["spec"]["annotations"]["n"], 1);
    assert!(kyaml("empty:\n")[0]["empty"].is_null());
    let tracked =
        parse_resources("a:\n  b:\n  c: null\n  d: ~\nl:\n- x:\n  y: 1\n---\ne:\n").unwrap();
    assert_eq!(tracked[0].empty_values, ["/a/b", "/l/0/x"]);
    assert_eq!(tracked[1].empty_values, ["/e"]);
}

/// go-yaml reads quoted scalars whose continuation lines are no deeper than their key.
#[test]
fn quoted_scalars_continued_at_their_key_indent_read_as_go_yaml_reads_them() {
    let text = "a:\n  d: 'one\n  two ''x''\n\n  three'\n  e: \"x\\\"\n  y\"\n  f: ok\n";
    let read = kyaml(text);
    assert_eq!(read[0]["a"]["d"], "one two 'x'\nthree");
    assert_eq!(read[0]["a"]["e"], "x\" y");
    assert_eq!(read[0]["a"]["f"], "ok");
}

/// go-yaml's folding: one more break before a more-indented line after a normal one.
#[test]
fn folded_scalars_read_as_go_yaml_reads_them() {
    let read = kyaml("a: >\n  one\n    two\n    three\n  four\n  five\nc: >\n  one\n\n    two\n");
    assert_eq!(read[0]["a"], "one\n\n  two\n  three\nfour five\n");
    assert_eq!(read[0]["c"], "one\n\n\n  two\n");
}

/// `tests/fixtures/go/yaml-documents.json`: 3,000 random documents (block and flow
/// collections, every scalar style and indicator, anchors, aliases, merge keys, tags,
/// comments, markers; tabs, carriage returns, trailing blanks, odd indentation, a BOM) as
/// go-yaml v3 decodes them (kyaml's reading of resources) and as sigs.k8s.io/yaml's
/// `YAMLToJSON` reads them (go-yaml v2: kustomization files, Flux's substituted manifests),
/// written by `tools/go-oracles/yaml-documents`. Ours reads each to the same JSON, or fails
/// where go-yaml fails; `yaml-documents-known.tsv` lists the documents still read otherwise.
#[test]
fn documents_read_as_go_yaml_reads_them() {
    #[derive(serde::Deserialize)]
    struct Fixture {
        /// document, v3 json, v3 error, v2 json, v2 error.
        rows: Vec<[String; 5]>,
    }
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/go/");
    let fixture: Fixture = serde_json::from_str(
        &std::fs::read_to_string(format!("{root}yaml-documents.json")).unwrap(),
    )
    .unwrap();
    let known_text = std::fs::read_to_string(format!("{root}yaml-documents-known.tsv")).unwrap();
    let known: std::collections::BTreeMap<String, &str> = known_text
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.split_once('\t'))
        .map(|(reason, document)| (serde_json::from_str(document).unwrap(), reason))
        .collect();
    let as_json = |read: Result<Value, YamlError>| read.ok().map(|v| serde_json::Value::from(&v));
    let mut differ = Vec::new();
    let mut known_differ = 0;
    for [document, v3_json, _, v2_json, _] in &fixture.rows {
        let kyaml = as_json(parse_resources(document).map(|mut documents| {
            if documents.is_empty() {
                Value::Null
            } else {
                documents.remove(0).value
            }
        }));
        let flux = as_json(parse_yaml_to_json(document));
        let want = |text: &str| {
            (!text.is_empty()).then(|| serde_json::from_str::<serde_json::Value>(text).unwrap())
        };
        let mut this_differs = false;
        for (reader, ours, go) in [("v3", kyaml, want(v3_json)), ("v2", flux, want(v2_json))] {
            if !same_json(ours.as_ref(), go.as_ref()) {
                this_differs = true;
                if !known.contains_key(document) {
                    differ.push(format!(
                        "{document:?} {reader}:\n  Go   {go:?}\n  ours {ours:?}"
                    ));
                }
            }
        }
        match (known.get(document), this_differs) {
            (Some(_), true) => known_differ += 1,
            (Some(reason), false) => differ.push(format!(
                "{document:?}: listed as known ({reason}), but alike"
            )),
            _ => {}
        }
    }
    assert!(fixture.rows.len() >= 3_000);
    assert!(
        differ.is_empty(),
        "{} differ:\n{}",
        differ.len(),
        differ.join("\n")
    );
    assert_eq!(
        known_differ,
        known.len(),
        "every known document is in the fixture"
    );
}

/// Equal, numbers by value within a rounding step (Go's JSON writes `1e3` as `1000`).
fn same_json(a: Option<&serde_json::Value>, b: Option<&serde_json::Value>) -> bool {
    use serde_json::Value as J;
    match (a, b) {
        (None, None) => true,
        (Some(J::Number(x)), Some(J::Number(y))) => match (x.as_f64(), y.as_f64()) {
            (Some(x), Some(y)) => x == y || (x - y).abs() <= f64::EPSILON * x.abs().max(y.abs()),
            _ => x == y,
        },
        (Some(J::Array(x)), Some(J::Array(y))) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_json(Some(x), Some(y)))
        }
        (Some(J::Object(x)), Some(J::Object(y))) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_json(Some(v), Some(w))))
        }
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

/// go-yaml knows YAML 1.1's escapes only: `\/` (YAML 1.2) is an error, in every position.
#[test]
fn yaml_1_2_escapes_are_refused_as_go_yaml_refuses_them() {
    for text in [
        "k: \"\\/\"\n",
        "k0:\n  k0:\n    k1: \"\\/\"\n    k0: 1 # note\n",
        "é: [\"a\\/b\"]\n",
        "\"\\/\": 1\n",
        "\u{FEFF}a: 1\nk: \"\\/\"\n",
        "é: 1\nk: [\"\\/\"]\n",
    ] {
        let error = parse_documents(text, Schema::Kyaml).unwrap_err();
        assert!(
            error.to_string().contains("found unknown escape character"),
            "{text:?}: {error}"
        );
    }
    assert_eq!(kyaml("k: \"\\\\/\"\n")[0]["k"], "\\/");
    // Where: the escape's backslash, counted in characters.
    match parse_documents("a: 1\nk: \"é\\/\"\n", Schema::Kyaml) {
        Err(YamlError::Syntax { line, column, .. }) => assert_eq!((line, column), (2, 6)),
        other => panic!("{other:?}"),
    }
}
