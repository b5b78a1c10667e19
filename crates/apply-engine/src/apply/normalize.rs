//! Preparing built objects for server-side apply.
//!
//! Objects are normalized the way the API server would store them, so that a dry-run
//! compares like with like: Secret `stringData` folds into `data`, `status` is dropped (except
//! on CRDs, whose status the API server owns anyway), `metadata.creationTimestamp` is null,
//! and ports get their default `protocol`
//! (part of the list key), and a CRD's conversion-webhook `caBundle` that holds no certificate
//! is left out, as Flux's `ssa` does. The owner labels and `spec.commonMetadata` are stamped
//! on.

use base64::Engine as _;
use serde_json::{Map, Value, json};

use crate::api::CommonMetadata;
use crate::objects::{NAME_LABEL, NAMESPACE_LABEL, Owner};

pub const LAST_APPLIED_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";
/// What kubectl and older Flux versions wrote on objects, removed when they are taken over
/// (as Flux's apply cleanup does).
pub const LEGACY_ANNOTATIONS: &[&str] = &[
    LAST_APPLIED_ANNOTATION,
    "kustomize.toolkit.fluxcd.io/checksum",
    "fluxcd.io/sync-checksum",
];
pub const LEGACY_GC_LABEL: &str = "fluxcd.io/sync-gc-mark";

fn metadata_map<'a>(object: &'a mut Value, key: &str) -> &'a mut Map<String, Value> {
    if !object["metadata"][key].is_object() {
        object["metadata"][key] = json!({});
    }
    object["metadata"][key]
        .as_object_mut()
        .expect("just made an object")
}

/// Normalizes an object and stamps ownership and common metadata on it.
pub fn prepare(object: &mut Value, owner: &Owner, common: Option<&CommonMetadata>) {
    if !object["metadata"].is_object() {
        object["metadata"] = json!({});
    }
    let is_crd = object["kind"] == "CustomResourceDefinition"
        && object["apiVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with("apiextensions.k8s.io/"));
    if !is_crd && let Some(map) = object.as_object_mut() {
        map.remove("status");
    }
    // As Flux: a creation time copied from a live object (`kubectl get -o yaml`) is sent as
    // null, which the API server reads as no opinion.
    object["metadata"]["creationTimestamp"] = Value::Null;
    if is_crd {
        remove_invalid_ca_bundle(object);
    }
    if super::sanitize::is_secret(object) {
        fold_string_data(object);
    }
    default_port_protocols(object);
    if let Some(common) = common {
        for (key, value) in common.labels.iter().flatten() {
            metadata_map(object, "labels").insert(key.clone(), json!(value));
        }
        for (key, value) in common.annotations.iter().flatten() {
            metadata_map(object, "annotations").insert(key.clone(), json!(value));
        }
    }
    let labels = metadata_map(object, "labels");
    labels.insert(NAME_LABEL.into(), json!(owner.name));
    labels.insert(NAMESPACE_LABEL.into(), json!(owner.namespace));
}

/// As fluxcd/pkg `ssa`: a CRD's conversion webhook `caBundle` that holds no certificate is
/// left out of the apply, since Kubernetes 1.31 and later refuse the CRD for it.
fn remove_invalid_ca_bundle(crd: &mut Value) {
    let Some(client_config) = crd
        .pointer_mut("/spec/conversion/webhook/clientConfig")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    let invalid = client_config
        .get("caBundle")
        .and_then(Value::as_str)
        .is_some_and(|bundle| !bundle.is_empty() && !holds_a_certificate(bundle));
    if invalid {
        client_config.remove("caBundle");
    }
}

/// Whether base64 `bundle` is PEM with at least one certificate that parses, which is what
/// client-go asks of CA data.
fn holds_a_certificate(bundle: &str) -> bool {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject as _;
    let Ok(pem) = base64::engine::general_purpose::STANDARD.decode(bundle) else {
        return false;
    };
    CertificateDer::pem_slice_iter(&pem)
        .flatten()
        .any(|certificate| webpki::anchor_from_trusted_cert(&certificate).is_ok())
}

fn fold_string_data(secret: &mut Value) {
    let Some(Value::Object(string_data)) =
        secret.as_object_mut().and_then(|s| s.remove("stringData"))
    else {
        return;
    };
    if !secret["data"].is_object() {
        secret["data"] = json!({});
    }
    for (key, value) in string_data {
        let text = match value {
            Value::String(s) => s,
            Value::Null => String::new(),
            other => other.to_string(),
        };
        secret["data"][key] = json!(base64::engine::general_purpose::STANDARD.encode(text));
    }
}

fn default_protocols(ports: Option<&mut Value>) {
    for port in ports
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
    {
        port.entry("protocol").or_insert_with(|| json!("TCP"));
    }
}

/// `protocol: TCP` where Kubernetes defaults it (and keys lists by it): ports of containers in
/// pod specs of built-in kinds, and Service ports. Other kinds' `ports` are left alone: an
/// omitted protocol may mean something else there.
fn default_port_protocols(object: &mut Value) {
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let group = crate::objects::api_group(api_version);
    if !matches!(group, "" | "apps" | "batch") {
        return;
    }
    if object.get("kind").and_then(Value::as_str) == Some("Service") && group.is_empty() {
        default_protocols(object.pointer_mut("/spec/ports"));
        return;
    }
    fn walk(value: &mut Value) {
        match value {
            Value::Object(map) => {
                for (key, child) in map.iter_mut() {
                    if matches!(
                        key.as_str(),
                        "containers" | "initContainers" | "ephemeralContainers"
                    ) {
                        for container in child.as_array_mut().into_iter().flatten() {
                            default_protocols(container.get_mut("ports"));
                        }
                    } else {
                        walk(child);
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(object);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// fluxcd/pkg `ssa/normalize` `TestNormalizeUnstructured`, row by row: what each row
    /// expects of the fields it is about. Flux normalizes by a round trip through Go's
    /// typed structs, which also writes their zero values (`name: ""`, `resources: {}`,
    /// `selector: null`, `targetPort: 0`); the API server defaults those the same either way,
    /// so they are not ours to send.
    #[test]
    fn flux_normalize_unstructured_rows() {
        let owner = Owner {
            name: "apps".into(),
            namespace: "flux-system".into(),
        };
        let ports = || json!([{"containerPort": 80}, {"containerPort": 8080}]);
        let pod_spec = || json!({"containers": [{"ports": ports()}]});
        let template = || json!({"template": {"spec": pod_spec()}});
        let tcp = || {
            json!([{"containerPort": 80, "protocol": "TCP"},
            {"containerPort": 8080, "protocol": "TCP"}])
        };
        // (row, object, what each pointer then holds)
        type Row<'a> = (&'a str, Value, Vec<(&'a str, Option<Value>)>);
        let rows: Vec<Row> = vec![
            (
                "adds default port protocol to Pod",
                json!({"apiVersion": "v1", "kind": "Pod", "spec": pod_spec()}),
                vec![("/spec/containers/0/ports", Some(tcp()))],
            ),
            (
                "adds default port protocol to Deployment",
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": template()}),
                vec![("/spec/template/spec/containers/0/ports", Some(tcp()))],
            ),
            (
                "adds default port protocol to StatefulSet",
                json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "spec": template()}),
                vec![("/spec/template/spec/containers/0/ports", Some(tcp()))],
            ),
            (
                "adds default port protocol to DaemonSet",
                json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "spec": template()}),
                vec![("/spec/template/spec/containers/0/ports", Some(tcp()))],
            ),
            (
                "adds default port protocol to ReplicaSet",
                json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "spec": template()}),
                vec![("/spec/template/spec/containers/0/ports", Some(tcp()))],
            ),
            (
                "adds default port protocol to Job",
                json!({"apiVersion": "batch/v1", "kind": "Job", "spec": template()}),
                vec![("/spec/template/spec/containers/0/ports", Some(tcp()))],
            ),
            (
                "adds default port protocol to CronJob",
                json!({"apiVersion": "batch/v1", "kind": "CronJob",
                    "spec": {"jobTemplate": {"spec": template()}}}),
                vec![(
                    "/spec/jobTemplate/spec/template/spec/containers/0/ports",
                    Some(tcp()),
                )],
            ),
            (
                "adds default port protocol to Service",
                json!({"apiVersion": "v1", "kind": "Service",
                    "spec": {"ports": [{"port": 80}, {"port": 443}]}}),
                vec![(
                    "/spec/ports",
                    Some(json!([{"port": 80, "protocol": "TCP"},
                        {"port": 443, "protocol": "TCP"}])),
                )],
            ),
            (
                "moves stringData to data in Secret",
                json!({"apiVersion": "v1", "kind": "Secret", "stringData": {"foo": "bar"}}),
                vec![
                    ("/data", Some(json!({"foo": "YmFy"}))),
                    ("/stringData", None),
                ],
            ),
            (
                "removes status from any object",
                json!({"apiVersion": "test/v1", "kind": "Test", "status": {"foo": "bar"}}),
                vec![("/status", None)],
            ),
            (
                "nil writes creationTimestamp on any object",
                json!({"apiVersion": "test/v1", "kind": "Test",
                    "metadata": {"creationTimestamp": "2020-01-01T00:00:00Z"}}),
                vec![("/metadata/creationTimestamp", Some(Value::Null))],
            ),
        ];
        for (name, mut object, expected) in rows {
            prepare(&mut object, &owner, None);
            for (pointer, want) in expected {
                assert_eq!(object.pointer(pointer), want.as_ref(), "{name}: {pointer}");
            }
            assert_eq!(
                object.pointer("/metadata/creationTimestamp"),
                Some(&Value::Null),
                "{name}: every row writes a null creationTimestamp"
            );
        }
    }

    /// fluxcd/pkg `ssa/utils` `TestRemoveCABundleFromCRD`, row by row, with its certificate.
    #[test]
    fn flux_remove_ca_bundle_from_crd_rows() {
        use base64::Engine as _;
        let owner = Owner {
            name: "apps".into(),
            namespace: "flux-system".into(),
        };
        let pem = include_str!("../../../../tests/fixtures/flux-ssa/example-ca.pem");
        let example_cert = base64::engine::general_purpose::STANDARD.encode(pem);
        let crd = |client_config: Option<Value>| {
            let mut crd = json!({"apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition", "metadata": {"name": "examples.example.com"},
                "spec": {"group": "example.com"}});
            if let Some(client_config) = client_config {
                crd["spec"]["conversion"] = json!({"webhook": {"clientConfig": client_config}});
            }
            crd
        };
        const BUNDLE: &str = "/spec/conversion/webhook/clientConfig/caBundle";
        let rows: Vec<(&str, Value, &str, Option<Value>)> = vec![
            (
                "removes invalid CA bundle from CRD",
                crd(Some(json!({"caBundle": "invalid-cert-data"}))),
                BUNDLE,
                None,
            ),
            (
                "removes invalid base64 CA bundle from CRD",
                crd(Some(
                    json!({"caBundle": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t"}),
                )),
                BUNDLE,
                None,
            ),
            (
                "preserves valid CA bundle in CRD",
                crd(Some(json!({"caBundle": example_cert}))),
                BUNDLE,
                Some(json!(example_cert)),
            ),
            (
                "ignores non-CRD objects",
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "test-config"},
                    "data": {"caBundle": "invalid-cert-data"}}),
                "/data/caBundle",
                Some(json!("invalid-cert-data")),
            ),
            ("handles CRD without CA bundle", crd(None), BUNDLE, None),
            (
                "handles CRD with empty CA bundle",
                crd(Some(json!({"caBundle": ""}))),
                BUNDLE,
                Some(json!("")),
            ),
        ];
        for (name, mut object, pointer, want) in rows {
            prepare(&mut object, &owner, None);
            assert_eq!(object.pointer(pointer), want.as_ref(), "{name}");
        }
    }

    /// fluxcd/pkg `ssa/utils` `TestSetCommonMetadata`: common labels and annotations are
    /// added, and win over the object's own.
    #[test]
    fn flux_set_common_metadata_rows() {
        let owner = Owner {
            name: "apps".into(),
            namespace: "flux-system".into(),
        };
        let map = |pairs: &[(&str, &str)]| {
            Some(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<std::collections::BTreeMap<_, _>>(),
            )
        };
        let secret = |metadata: Value| {
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": metadata,
                "stringData": {"key": "private-key"}})
        };
        let rows = [
            (
                "adds metadata",
                secret(json!({"name": "test", "namespace": "default"})),
                CommonMetadata {
                    labels: map(&[("test1", "lb1"), ("test2", "lb2")]),
                    annotations: map(&[("test1", "a1"), ("test2", "a2")]),
                },
            ),
            (
                "overrides metadata",
                secret(json!({"name": "test", "namespace": "default",
                    "labels": {"test1": "over"}, "annotations": {"test2": "over"}})),
                CommonMetadata {
                    labels: map(&[("test1", "lb1")]),
                    annotations: map(&[("test1", "an1"), ("test2", "an2")]),
                },
            ),
        ];
        for (name, mut object, common) in rows {
            prepare(&mut object, &owner, Some(&common));
            for (key, value) in common.labels.iter().flatten() {
                assert_eq!(object["metadata"]["labels"][key], json!(value), "{name}");
            }
            for (key, value) in common.annotations.iter().flatten() {
                assert_eq!(
                    object["metadata"]["annotations"][key],
                    json!(value),
                    "{name}"
                );
            }
        }
    }

    #[test]
    fn prepare_normalizes_and_stamps() {
        let owner = Owner {
            name: "apps".into(),
            namespace: "flux-system".into(),
        };
        let common = CommonMetadata {
            labels: Some([("team".to_string(), "a".to_string())].into()),
            annotations: Some([("note".to_string(), "x".to_string())].into()),
        };
        let mut secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
            "stringData": {"k": "v"}, "data": {"o": "eA=="}, "status": {"x": 1}});
        prepare(&mut secret, &owner, Some(&common));
        assert_eq!(secret["data"], json!({"o": "eA==", "k": "dg=="}));
        assert!(secret.get("stringData").is_none() && secret.get("status").is_none());
        assert_eq!(secret["metadata"]["labels"][NAME_LABEL], "apps");
        assert_eq!(secret["metadata"]["labels"]["team"], "a");
        assert_eq!(secret["metadata"]["annotations"]["note"], "x");
        assert!(owner.owns(&secret));
        assert_eq!(secret["metadata"]["creationTimestamp"], Value::Null);
        let mut copied = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "creationTimestamp": "2020-01-01T00:00:00Z"}});
        prepare(&mut copied, &owner, None);
        assert_eq!(
            copied["metadata"].get("creationTimestamp"),
            Some(&Value::Null),
            "a copied creation time is not sent"
        );

        let mut deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"template": {"spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80}]}]}}}});
        prepare(&mut deployment, &owner, None);
        assert_eq!(
            deployment.pointer("/spec/template/spec/containers/0/ports/0/protocol"),
            Some(&json!("TCP"))
        );
        let mut policy = json!({"apiVersion": "cilium.io/v2", "kind": "CiliumNetworkPolicy", "metadata": {"name": "p"},
            "spec": {"egress": [{"toPorts": [{"ports": [{"port": "53"}]}]}]}});
        prepare(&mut policy, &owner, None);
        assert!(
            policy
                .pointer("/spec/egress/0/toPorts/0/ports/0/protocol")
                .is_none(),
            "custom kinds keep their ports"
        );
        let mut crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "x"}, "status": {"storedVersions": []}});
        prepare(&mut crd, &owner, None);
        assert!(crd.get("status").is_some(), "CRDs keep their status");
    }

    /// fluxcd/pkg `ssa`'s `TestRemoveCABundleFromCRD` cases.
    #[test]
    fn invalid_conversion_webhook_ca_bundles_are_left_out_of_crds() {
        let owner = Owner {
            name: "app".into(),
            namespace: "flux-system".into(),
        };
        let certificate = rcgen::generate_simple_self_signed(vec!["webhook.example.com".into()])
            .unwrap()
            .cert
            .pem();
        let valid = base64::engine::general_purpose::STANDARD.encode(certificate);
        let crd = |bundle: &str| {
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": "widgets.example.com"},
                "spec": {"conversion": {"strategy": "Webhook", "webhook": {"clientConfig": {
                    "caBundle": bundle, "service": {"name": "w", "namespace": "n"}}}}}})
        };
        for (bundle, kept) in [
            ("invalid-cert-data", false),
            // A certificate header alone, in base64.
            ("LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t", false),
            (valid.as_str(), true),
            ("", true),
        ] {
            let mut object = crd(bundle);
            prepare(&mut object, &owner, None);
            let left = object.pointer("/spec/conversion/webhook/clientConfig/caBundle");
            assert_eq!(left.is_some(), kept, "{bundle}");
            assert!(
                object
                    .pointer("/spec/conversion/webhook/clientConfig/service")
                    .is_some()
            );
        }
        let mut config_map = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
            "spec": {"conversion": {"webhook": {"clientConfig": {"caBundle": "invalid-cert-data"}}}}});
        prepare(&mut config_map, &owner, None);
        assert!(
            config_map
                .pointer("/spec/conversion/webhook/clientConfig/caBundle")
                .is_some(),
            "other kinds are left alone"
        );
        let mut without = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "plain.example.com"}, "spec": {"group": "example.com"}});
        prepare(&mut without, &owner, None);
        assert_eq!(without["spec"], json!({"group": "example.com"}));
    }
}
