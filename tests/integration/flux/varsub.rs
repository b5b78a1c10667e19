//! Flux's post-build substitution tests (`kustomization_varsub_test.go`): variables from
//! `substitute` and from `substituteFrom` ConfigMaps and Secrets (newlines dropped, later
//! sources winning, bash-style defaults), optional sources that may disappear, the `Always`
//! substitution strategy, and values that must stay strings (`!!str`, quote variables) next
//! to escaped `$${var}` references and backslashes.
//!
//! Flux's suite runs its shared reconciler with `StrictSubstitutions` unset (off); only
//! `TestKustomizationReconciler_VarsubStrict` turns it on (ported as
//! `parity::unset_variables_fail_the_build_by_default_as_in_flux_1_9`). Our controller has
//! the `StrictPostBuildSubstitutions` gate on by default, as Flux 1.9's binary, so these
//! ports start theirs with it off, as Flux's suite does.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DynamicObject};
use serde_json::json;

use super::{applied, condition, gone, kubeconfig_secret};
use crate::support::cluster::{dynamic_api, unique, wait_for};
use crate::support::controller::Harness;

/// A harness whose controller substitutes without strict mode, as Flux's test reconciler.
async fn lenient_harness() -> Harness {
    Harness::start_with(|options| options.reconcile.strict_substitution = false).await
}

/// A revision shaped like Flux's test revisions (`v1.0.0/<random>`).
fn revision() -> String {
    format!("v1.0.0/{}", unique("rev"))
}

/// Manifests with `@ns` standing for the test namespace (they name it, as Flux's do, so
/// the Kustomizations need no `targetNamespace`) and `@name` for an object's name.
fn manifest(template: &str, harness: &Harness, name: &str) -> String {
    template
        .replace("@ns", &harness.cluster.namespace)
        .replace("@name", name)
}

fn service_accounts(harness: &Harness) -> Api<ServiceAccount> {
    Api::namespaced(harness.cluster.client.clone(), &harness.cluster.namespace)
}

fn secrets(harness: &Harness) -> Api<Secret> {
    Api::namespaced(harness.cluster.client.clone(), &harness.cluster.namespace)
}

fn label<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.labels.as_ref()?.get(key).map(String::as_str)
}

fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

fn secret_value(secret: &Secret, key: &str) -> Option<String> {
    let value = secret.data.as_ref()?.get(key)?;
    Some(String::from_utf8_lossy(&value.0).into_owned())
}

fn data<'a>(data: &'a Option<BTreeMap<String, String>>, key: &str) -> Option<&'a str> {
    data.as_ref()?.get(key).map(String::as_str)
}

const VARSUB_SERVICE_ACCOUNT: &str = r#"---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: @name
  namespace: @ns
  labels:
    environment: ${env:=dev}
    region: "${_Region}"
    zone: "${zone}"
"#;

const VARSUB_SECRET: &str = r#"---
apiVersion: v1
kind: Secret
metadata:
  name: @name
  namespace: @ns
stringData:
  zone: ${zone}
"#;

/// `TestKustomizationReconciler_Varsub`: variables from `substitute` and from a ConfigMap
/// and a Secret in `substituteFrom` (their values' newlines dropped, the later Secret
/// winning over the ConfigMap) and a bash-style default are substituted into a
/// ServiceAccount's labels and a Secret's data; the revision is applied, Ready and Healthy
/// are True, and the applied objects carry the owner labels.
#[tokio::test]
async fn flux_varsub() {
    let harness = lenient_harness().await;
    let ns = harness.cluster.namespace.clone();
    kubeconfig_secret(&harness).await;
    let revision = revision();
    let service_account = manifest(VARSUB_SERVICE_ACCOUNT, &harness, "vars");
    let secret = manifest(VARSUB_SECRET, &harness, "vars");
    let artifact = harness.publish_files(
        "varsub",
        &revision,
        &[
            ("service-account.yaml", service_account.as_str()),
            ("secret.yaml", secret.as_str()),
        ],
    );
    harness.source("repo", &artifact).await;
    harness
        .cluster
        .apply(&json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "zones-config", "namespace": ns},
            "data": {"zone": "\naz-1a\n"}}))
        .await;
    harness
        .cluster
        .apply(&json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "zones-secret", "namespace": ns},
            "stringData": {"zone": "\naz-1b\n"}}))
        .await;
    harness
        .create_kustomization(
            "vars",
            json!({"path": "./", "targetNamespace": null,
            "kubeConfig": {"secretRef": {"name": "kubeconfig"}},
            "postBuild": {
                "substitute": {"_Region": "eu-central-1"},
                "substituteFrom": [
                    {"kind": "ConfigMap", "name": "zones-config"},
                    {"kind": "Secret", "name": "zones-secret"},
                ],
            },
            "healthChecks": [
                {"apiVersion": "v1", "kind": "ServiceAccount",
                    "name": "vars", "namespace": ns},
            ]}),
        )
        .await;

    // reconciles successfully
    let result = applied(&harness, "vars", &revision).await;
    assert_eq!(
        condition(&result, "Ready").unwrap().reason,
        "ReconciliationSucceeded"
    );
    let account = service_accounts(&harness)
        .get("vars")
        .await
        .expect("the ServiceAccount is applied");
    let applied_secret = secrets(&harness)
        .get("vars")
        .await
        .expect("the Secret is applied");

    // sets status
    assert_eq!(
        result
            .status
            .as_ref()
            .unwrap()
            .last_applied_revision
            .as_deref(),
        Some(revision.as_str())
    );
    assert_eq!(condition(&result, "Ready").unwrap().status, "True");
    assert_eq!(condition(&result, "Healthy").unwrap().status, "True");

    // replaces vars
    assert_eq!(label(&account.metadata, "environment"), Some("dev"));
    assert_eq!(label(&account.metadata, "region"), Some("eu-central-1"));
    assert_eq!(label(&account.metadata, "zone"), Some("az-1b"));
    assert_eq!(
        secret_value(&applied_secret, "zone").as_deref(),
        Some("az-1b")
    );

    // sets owner labels
    assert_eq!(
        label(&account.metadata, "kustomize.toolkit.fluxcd.io/name"),
        result.metadata.name.as_deref()
    );
    assert_eq!(
        label(&account.metadata, "kustomize.toolkit.fluxcd.io/namespace"),
        result.metadata.namespace.as_deref()
    );
}

const DEFAULTED_SERVICE_ACCOUNT: &str = r#"---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: @name
  namespace: @ns
  labels:
    color: "${color:=blue}"
    shape: "${shape:=square}"
"#;

/// `TestKustomizationReconciler_VarsubOptional`: optional `substituteFrom` sources supply
/// their variables while they exist; once the ConfigMap and the Secret are deleted, the next
/// reconciliation still succeeds and the expressions fall back to their defaults.
#[tokio::test]
async fn flux_varsub_optional() {
    let harness = lenient_harness().await;
    let ns = harness.cluster.namespace.clone();
    kubeconfig_secret(&harness).await;
    let revision = revision();
    let service_account = manifest(DEFAULTED_SERVICE_ACCOUNT, &harness, "optional");
    let artifact = harness.publish_files(
        "varsub-optional",
        &revision,
        &[("service-account.yaml", service_account.as_str())],
    );
    harness.source("repo", &artifact).await;
    harness
        .cluster
        .apply(&json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "colors", "namespace": ns},
            "data": {"color": "\nred\n"}}))
        .await;
    harness
        .cluster
        .apply(&json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "shapes", "namespace": ns},
            "stringData": {"shape": "\ntriangle\n"}}))
        .await;
    harness
        .create_kustomization(
            "optional",
            json!({"path": "./", "targetNamespace": null,
            "kubeConfig": {"secretRef": {"name": "kubeconfig"}},
            "postBuild": {
                "substitute": {"var_substitution_enabled": "true"},
                "substituteFrom": [
                    {"kind": "ConfigMap", "name": "colors", "optional": true},
                    {"kind": "Secret", "name": "shapes", "optional": true},
                ],
            },
            "healthChecks": [
                {"apiVersion": "v1", "kind": "ServiceAccount",
                    "name": "optional", "namespace": ns},
            ]}),
        )
        .await;

    // reconciles successfully with optional ConfigMap
    harness
        .wait_ready("optional", "True", "ReconciliationSucceeded")
        .await;
    let account = service_accounts(&harness)
        .get("optional")
        .await
        .expect("the ServiceAccount is applied");

    // replaces vars from optional ConfigMap
    assert_eq!(label(&account.metadata, "color"), Some("red"));
    assert_eq!(label(&account.metadata, "shape"), Some("triangle"));

    harness
        .config_maps()
        .delete("colors", &Default::default())
        .await
        .unwrap();
    secrets(&harness)
        .delete("shapes", &Default::default())
        .await
        .unwrap();

    // Flux forces a second detectable reconciliation by clearing the status conditions and
    // waiting for the interval; here a reconcile request is made and its handling awaited.
    let token = "varsub-optional-second";
    harness.request_reconcile("optional", token).await;

    // reconciles successfully without optional ConfigMap
    let api = harness.kustomizations();
    let again = wait_for(Duration::from_secs(30), || async {
        let object = api.get("optional").await.ok()?;
        let handled = object.status.as_ref()?.last_handled_reconcile_at.as_deref() == Some(token);
        let ready = condition(&object, "Ready")?;
        (handled && ready.status == "True" && ready.reason == "ReconciliationSucceeded")
            .then_some(object)
    })
    .await;
    if again.is_none() {
        let status = api.get("optional").await.ok().and_then(|o| o.status);
        panic!(
            "the second reconciliation did not succeed: {}",
            serde_json::to_string_pretty(&status).unwrap()
        );
    }
    let account = service_accounts(&harness)
        .get("optional")
        .await
        .expect("the ServiceAccount is still applied");

    // replaces vars tolerating absent ConfigMap
    assert_eq!(label(&account.metadata, "color"), Some("blue"));
    assert_eq!(label(&account.metadata, "shape"), Some("square"));
}

/// `TestKustomizationReconciler_VarsubAlways`: manifests whose expressions all have
/// defaults, and a `postBuild` that defines no variables. With the default `WithVariables`
/// strategy substitution is skipped, so the raw `${…}` label values are applied and
/// rejected (Ready False, ReconciliationFailed); with `substituteStrategy: Always` the
/// defaults are substituted and the Kustomization reconciles.
#[tokio::test]
async fn flux_varsub_always() {
    let harness = lenient_harness().await;
    let ns = harness.cluster.namespace.clone();
    kubeconfig_secret(&harness).await;
    let revision = revision();
    let service_account = manifest(DEFAULTED_SERVICE_ACCOUNT, &harness, "always");
    let artifact = harness.publish_files(
        "varsub-always",
        &revision,
        &[("service-account.yaml", service_account.as_str())],
    );
    harness.source("repo", &artifact).await;
    let api = harness.kustomizations();

    // WithVariables strategy skips substitution without variables
    harness
        .create_kustomization(
            "always-with-variables",
            json!({"path": "./", "kubeConfig": {"secretRef": {"name": "kubeconfig"}},
                "postBuild": {}, "wait": true}),
        )
        .await;
    // The unresolved expressions are invalid label values: the ServiceAccount fails to
    // apply, which proves substitution was skipped.
    harness
        .wait_ready("always-with-variables", "False", "ReconciliationFailed")
        .await;
    api.delete("always-with-variables", &Default::default())
        .await
        .unwrap();
    // Not in Flux (its deferred delete is not awaited): finalization is awaited so that the
    // next step starts from a clean slate.
    gone(&harness, "always-with-variables").await;

    // Always strategy substitutes defaults without variables
    harness
        .create_kustomization(
            "always",
            json!({"path": "./", "targetNamespace": null,
            "kubeConfig": {"secretRef": {"name": "kubeconfig"}},
            "postBuild": {"substituteStrategy": "Always"},
            "healthChecks": [
                {"apiVersion": "v1", "kind": "ServiceAccount",
                    "name": "always", "namespace": ns},
            ]}),
        )
        .await;
    harness
        .wait_ready("always", "True", "ReconciliationSucceeded")
        .await;
    let account = service_accounts(&harness)
        .get("always")
        .await
        .expect("the ServiceAccount is applied");
    assert_eq!(label(&account.metadata, "color"), Some("blue"));
    assert_eq!(label(&account.metadata, "shape"), Some("square"));
    api.delete("always", &Default::default()).await.unwrap();
}

const TYPED_MANIFESTS: &str = r#"---
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata:
  name: @name
  namespace: @ns
  labels:
    id: ${numberStr}
    enabled: ${booleanStr}
  annotations:
    id: ${q}${number}${q}
    enabled: ${q}${boolean}${q}
spec:
  interval: ${number}m
  url: https://example.invalid/typed.git
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: @name
  namespace: @ns
data:
  id: ${q}${number}${q}
  text: |
    A doubled dollar keeps a reference literal: $${var}

    The lines below only make this value long enough that a YAML printer could be
    tempted to fold or re-quote it on its way through the build and the substitution;
    each of them must come back exactly as written, since none names a variable.

    \?
"#;

/// `TestKustomizationReconciler_VarsubNumberBool`: numbers and booleans substituted where
/// strings are required stay strings, through a `!!str` tag in the value or a quote
/// variable around the expression (a GitRepository's labels and annotations, a ConfigMap's
/// data); `$${var}` comes out as the literal `${var}` and a backslash sequence is left
/// alone.
#[tokio::test]
async fn flux_varsub_number_bool() {
    let harness = lenient_harness().await;
    let ns = harness.cluster.namespace.clone();
    kubeconfig_secret(&harness).await;
    let revision = revision();
    let manifests = manifest(TYPED_MANIFESTS, &harness, "typed");
    let artifact = harness.publish_files(
        "varsub-number-bool",
        &revision,
        &[("templates.yaml", manifests.as_str())],
    );
    harness.source("repo", &artifact).await;
    harness
        .create_kustomization(
            "typed",
            json!({"path": "./", "targetNamespace": null, "wait": false,
            "kubeConfig": {"secretRef": {"name": "kubeconfig"}},
            "postBuild": {"substitute": {
                "q": "\"",
                "numberStr": "!!str 123",
                "number": "123",
                "booleanStr": "!!str true",
                "boolean": "true",
            }}}),
        )
        .await;
    harness
        .wait_ready("typed", "True", "ReconciliationSucceeded")
        .await;

    let repositories: Api<DynamicObject> = dynamic_api(
        &harness.cluster.client,
        &json!({"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
            "metadata": {"namespace": ns}}),
    )
    .await;
    let repository = repositories
        .get("typed")
        .await
        .expect("the GitRepository is applied");
    assert_eq!(label(&repository.metadata, "id"), Some("123"));
    assert_eq!(annotation(&repository.metadata, "id"), Some("123"));
    assert_eq!(label(&repository.metadata, "enabled"), Some("true"));
    assert_eq!(annotation(&repository.metadata, "enabled"), Some("true"));

    let map = harness
        .config_maps()
        .get("typed")
        .await
        .expect("the ConfigMap is applied");
    assert_eq!(data(&map.data, "id"), Some("123"));
    let text = data(&map.data, "text").unwrap_or_default();
    assert!(text.contains("${var}"), "{text}");
    assert!(!text.contains("$${var}"), "{text}");
    assert!(text.contains(r"\?"), "{text}");
}
