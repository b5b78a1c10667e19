//! Flux's API reference (kustomize-controller v1.9.4 `docs/spec/v1/kustomizations.md`) as the
//! first spec: every Kustomization example it shows (`tests/fixtures/flux-docs/`, collected by
//! `tools/flux_docs_examples.py`), completed where it is a fragment, is one our types read
//! whole (no field of it is lost), the API server takes under our CRD, and whose CEL
//! expressions compile.

use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kustomize_controller::api::{GoDuration, Kustomization};
use kustomize_controller::health::CelChecks;
use serde_json::{Value, json};

use crate::support::cluster::TestCluster;

/// Every example, completed where the document shows a fragment: a spec Flux's CRD would
/// refuse for a required field left out (most examples show only the fields of their
/// section) gets it (`interval: 1m`, `prune: false`, a GitRepository `sourceRef`), and each is
/// named `example-<n>` (one of them is `<kustomization-name>`).
fn examples() -> Vec<Value> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/flux-docs/kustomizations.yaml"
    );
    let text = std::fs::read_to_string(path).unwrap();
    let examples: Vec<Value> = kustomize_controller::yaml::parse_documents(
        &text,
        kustomize_controller::yaml::Schema::Kubernetes,
    )
    .unwrap()
    .into_iter()
    .map(Value::from)
    .filter(|d| !d.is_null())
    .collect();
    assert!(examples.len() >= 25, "the fixture is whole");
    let required = required_by_fluxs_crd();
    assert_eq!(
        required,
        ["interval", "prune", "sourceRef"],
        "what completing means"
    );
    examples
        .into_iter()
        .enumerate()
        .map(|(index, mut example)| {
            example["metadata"]["name"] = json!(format!("example-{index}"));
            if !example["spec"].is_object() {
                example["spec"] = json!({});
            }
            let spec = example["spec"].as_object_mut().unwrap();
            spec.entry("interval").or_insert(json!("1m"));
            spec.entry("prune").or_insert(json!(false));
            spec.entry("sourceRef")
                .or_insert(json!({"kind": "GitRepository", "name": "example"}));
            example
        })
        .collect()
}

/// Every leaf of `documented` that `read` lacks or holds otherwise, as JSON pointers.
fn lost(documented: &Value, read: &Value, at: &str, found: &mut Vec<String>) {
    match (documented, read) {
        (Value::Object(fields), Value::Object(read_fields)) => {
            for (key, value) in fields {
                let pointer = format!("{at}/{key}");
                match read_fields.get(key) {
                    Some(read_value) => lost(value, read_value, &pointer, found),
                    None => found.push(pointer),
                }
            }
        }
        (Value::Array(items), Value::Array(read_items)) if items.len() == read_items.len() => {
            for (index, (item, read_item)) in items.iter().zip(read_items).enumerate() {
                lost(item, read_item, &format!("{at}/{index}"), found);
            }
        }
        // A duration reads back in Go's canonical form (`10m` is `10m0s`), as Flux prints it.
        (Value::String(a), Value::String(b)) if same_duration(a, b) => {}
        (documented, read) if documented != read => found.push(at.to_string()),
        _ => {}
    }
}

fn same_duration(a: &str, b: &str) -> bool {
    let read = |text: &str| {
        serde_json::from_value::<GoDuration>(Value::String(text.to_string()))
            .ok()
            .map(GoDuration::to_std)
    };
    read(a).is_some_and(|a| Some(a) == read(b))
}

/// The fields Flux's own CRD requires of a Kustomization's spec
/// (`tests/fixtures/reference/crds/`).
fn required_by_fluxs_crd() -> Vec<String> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/reference/crds/kustomize.toolkit.fluxcd.io_kustomizations.yaml"
    );
    let text = std::fs::read_to_string(path).unwrap();
    let crd: Value = kustomize_controller::yaml::parse_documents(
        &text,
        kustomize_controller::yaml::Schema::Kubernetes,
    )
    .unwrap()
    .remove(0)
    .into();
    let v1 = crd["spec"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "v1")
        .unwrap();
    v1.pointer("/schema/openAPIV3Schema/properties/spec/required")
        .and_then(Value::as_array)
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap().to_string())
        .collect()
}

/// Each example reads into our Kustomization type with every field it sets kept, and its
/// health check and dependency expressions compile in Flux's CEL environment.
#[test]
fn documented_kustomizations_read_whole_and_their_expressions_compile() {
    for example in examples() {
        let name = example["metadata"]["name"]
            .as_str()
            .unwrap_or("?")
            .to_string();
        let typed: Kustomization =
            serde_json::from_value(example.clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
        let read = serde_json::to_value(&typed).unwrap();
        let mut missing = Vec::new();
        lost(&example["spec"], &read["spec"], "/spec", &mut missing);
        assert!(missing.is_empty(), "{name}: not kept: {missing:?}");
        CelChecks::new(&typed.spec.health_check_exprs).unwrap_or_else(|e| panic!("{name}: {e}"));
        for dependency in &typed.spec.depends_on {
            // As Flux compiles a readyExpr: checked, its output a boolean.
            if let Some(expression) = &dependency.ready_expr {
                kustomize_controller::health::cel_check::compile_boolean(
                    expression,
                    &["self", "dep"],
                )
                .unwrap_or_else(|e| panic!("{name}: {expression}: {e}"));
            }
        }
    }
}

/// Each example is a valid object under our CRD: the API server takes it (a server-side
/// dry-run of its creation, in the test's namespace).
#[tokio::test]
async fn documented_kustomizations_are_valid_under_our_crd() {
    let cluster = TestCluster::start().await;
    let resource = ApiResource {
        group: "kustomize.toolkit.fluxcd.io".into(),
        version: "v1".into(),
        api_version: "kustomize.toolkit.fluxcd.io/v1".into(),
        kind: "Kustomization".into(),
        plural: "kustomizations".into(),
    };
    let api: Api<DynamicObject> =
        Api::namespaced_with(cluster.client.clone(), &cluster.namespace, &resource);
    let params = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    for mut example in examples() {
        example["metadata"]["namespace"] = Value::String(cluster.namespace.clone());
        let name = example["metadata"]["name"]
            .as_str()
            .unwrap_or("?")
            .to_string();
        let object: DynamicObject = serde_json::from_value(example).unwrap();
        api.create(&params, &object)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}
