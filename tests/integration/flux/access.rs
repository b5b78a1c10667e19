//! Flux's tests of who the controller acts as and what it may read: cross-namespace source
//! references (`kustomization_acl_test.go`), configuration errors that stall
//! (`kustomization_configuration_error_test.go`), impersonation and kubeconfig Secrets
//! (`kustomization_impersonation_test.go`), and RBAC objects applied by a limited service
//! account with a custom apply stage (`kustomization_rbac_test.go`).

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::{applied, condition, kubeconfig_secret};
use crate::support::cluster::wait_for;
use crate::support::controller::{Harness, ready_message};

fn config_map(name: &str, data: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  key: \"{data}\"\n"
    )
}

/// `TestKustomizationReconciler_NoCrossNamespaceRefs`: a source in another namespace is used
/// until `--no-cross-namespace-refs` is set; then the Kustomization stalls with AccessDenied.
#[tokio::test]
async fn flux_no_cross_namespace_refs() {
    let mut harness = Harness::start().await;
    let ns = harness.cluster.namespace.clone();
    kubeconfig_secret(&harness).await;
    let source_namespace = harness.cluster.create_namespace("source").await;
    let files = [(
        "secret.yaml",
        "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: acl\nstringData:\n  key: \"abcde\"\n",
    )];
    let v1 = harness.publish_files("acl-v1", "v1.0.0", &files);
    harness
        .cluster
        .create_source(
            crate::support::artifacts::SourceKind::GitRepository,
            &source_namespace,
            "repo",
            Some(&v1),
        )
        .await;
    harness
        .create_kustomization(
            "acl",
            json!({"interval": "10m", "kubeConfig": {"secretRef": {"name": "kubeconfig"}},
                "sourceRef": {"kind": "GitRepository", "name": "repo", "namespace": source_namespace},
                "targetNamespace": ns}),
        )
        .await;
    let ready = applied(&harness, "acl", "v1.0.0").await;
    assert_eq!(
        condition(&ready, "Ready").unwrap().reason,
        "ReconciliationSucceeded"
    );

    harness
        .restart_with(|options| options.reconcile.no_cross_namespace_refs = true)
        .await;
    let v2 = harness.publish_files("acl-v2", "v2.0.0", &files);
    harness
        .cluster
        .create_source(
            crate::support::artifacts::SourceKind::GitRepository,
            &source_namespace,
            "repo",
            Some(&v2),
        )
        .await;
    let denied = harness.wait_ready("acl", "False", "AccessDenied").await;
    assert_eq!(condition(&denied, "Stalled").unwrap().status, "True");
}

/// `TestKustomizationReconciler_ConfigurationError`: an invalid health check expression and
/// decryption as a service account without its feature gate stall, with Flux's reasons and
/// messages; with the gate on, the same spec reconciles.
#[tokio::test]
async fn flux_configuration_error() {
    let mut harness = Harness::start().await;
    let map = "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: invalid-config\ndata: {}\n";
    let artifact = harness.publish_files("config", "v1.0.0", &[("config.yaml", map)]);
    harness.source("repo", &artifact).await;

    // invalid cel expression
    harness
        .create_kustomization(
            "invalid-cel",
            json!({"interval": "2m", "timeout": "1s", "wait": true,
                "healthCheckExprs": [{"apiVersion": "v1", "kind": "ConfigMap", "inProgress": "foo.", "current": "true"}]}),
        )
        .await;
    let stalled = harness
        .wait_ready("invalid-cel", "False", "InvalidCELExpression")
        .await;
    let status = stalled.status.as_ref().unwrap();
    assert_eq!(
        Some(status.observed_generation),
        stalled.metadata.generation
    );
    for type_ in ["Ready", "Stalled"] {
        let found = condition(&stalled, type_).unwrap();
        assert_eq!(found.reason, "InvalidCELExpression", "{type_}");
        assert!(
            found.message.contains(
                "failed to create custom status evaluator for healthchecks[0]: failed to parse the expression InProgress: failed to parse the CEL expression 'foo.': "
            ),
            "{type_}: {}",
            found.message
        );
    }
    assert_eq!(condition(&stalled, "Stalled").unwrap().status, "True");

    // object level workload identity feature gate disabled
    let identity = json!({"interval": "2m",
        "decryption": {"provider": "sops", "serviceAccountName": "foo"}});
    harness
        .create_kustomization("identity-off", identity.clone())
        .await;
    let disabled = harness
        .wait_ready("identity-off", "False", "FeatureGateDisabled")
        .await;
    assert_eq!(
        disabled.status.as_ref().unwrap().observed_generation,
        -1,
        "the generation is not observed: with the gate on it could be"
    );
    for type_ in ["Ready", "Stalled"] {
        let found = condition(&disabled, type_).unwrap();
        assert_eq!(found.reason, "FeatureGateDisabled", "{type_}");
        assert!(found.message.contains("to use spec.decryption.serviceAccountName for decryption authentication please enable the ObjectLevelWorkloadIdentity feature gate in the controller"));
    }
    assert_eq!(condition(&disabled, "Stalled").unwrap().status, "True");

    // object level workload identity feature gate enabled
    harness
        .restart_with(|options| options.reconcile.object_level_workload_identity = true)
        .await;
    harness.create_kustomization("identity-on", identity).await;
    harness
        .wait_ready("identity-on", "True", "ReconciliationSucceeded")
        .await;
}

/// `TestKustomizationReconciler_Impersonation`: through a kubeconfig Secret, the controller
/// applies as itself; with `--default-service-account` it impersonates that account in the
/// Kustomization's namespace (and fails without rights); `spec.serviceAccountName` with
/// rights reconciles, and the Kustomization is finalized (its objects pruned) as that account.
#[tokio::test]
async fn flux_impersonation() {
    let mut harness = Harness::start().await;
    let ns = harness.cluster.namespace.clone();
    kubeconfig_secret(&harness).await;
    let files = [("config.yaml", config_map("imp", "abcde"))];
    let files: Vec<(&str, &str)> = files.iter().map(|(n, t)| (*n, t.as_str())).collect();
    let publish = |harness: &Harness, revision: &str| {
        harness.publish_files(&format!("imp-{revision}"), revision, &files)
    };
    let v1 = publish(&harness, "v1.0.0");
    harness.source("repo", &v1).await;
    harness
        .create_kustomization(
            "imp",
            json!({"interval": "1m", "kubeConfig": {"secretRef": {"name": "kubeconfig"}}}),
        )
        .await;

    // reconciles as cluster admin
    let ready = applied(&harness, "imp", "v1.0.0").await;
    assert_eq!(
        condition(&ready, "Ready").unwrap().reason,
        "ReconciliationSucceeded"
    );

    // fails to reconcile impersonating the default service account
    harness
        .restart_with(|options| options.reconcile.default_service_account = Some("default".into()))
        .await;
    let v2 = publish(&harness, "v2.0.0");
    harness.source("repo", &v2).await;
    let failed = harness
        .wait_ready("imp", "False", "ReconciliationFailed")
        .await;
    assert!(
        ready_message(&failed).contains(&format!("system:serviceaccount:{ns}:default")),
        "{}",
        ready_message(&failed)
    );

    // reconciles impersonating service account
    harness
        .cluster
        .apply(&json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "test", "namespace": ns}}))
        .await;
    let binding = crate::support::cluster::unique("imp");
    harness
        .cluster
        .apply(&json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": binding},
            "subjects": [{"kind": "ServiceAccount", "name": "test", "namespace": ns}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"}}))
        .await;
    harness
        .kustomizations()
        .patch(
            "imp",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"serviceAccountName": "test"}})),
        )
        .await
        .unwrap();
    let v3 = publish(&harness, "v3.0.0");
    harness.source("repo", &v3).await;
    let ready = applied(&harness, "imp", "v3.0.0").await;
    assert_eq!(
        condition(&ready, "Ready").unwrap().reason,
        "ReconciliationSucceeded"
    );

    // can finalize impersonating service account
    let maps: Api<ConfigMap> = harness.config_maps();
    assert!(maps.get_opt("imp").await.unwrap().is_some());
    harness
        .kustomizations()
        .delete("imp", &Default::default())
        .await
        .unwrap();
    let gone = wait_for(Duration::from_secs(30), || async {
        harness
            .kustomizations()
            .get_opt("imp")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    assert!(gone.is_some(), "the Kustomization is finalized");
    assert!(
        maps.get_opt("imp").await.unwrap().is_none(),
        "its ConfigMap was pruned"
    );
    let bindings: Api<k8s_openapi::api::rbac::v1::ClusterRoleBinding> =
        Api::all(harness.cluster.client.clone());
    let _ = bindings.delete(&binding, &Default::default()).await;
}

/// Ours, from Flux's Go strings: `serviceAccountName: ""` names no account, so the controller
/// applies as itself, and with `--default-service-account` as that account (never as a
/// nameless `system:serviceaccount:<namespace>:`).
#[tokio::test]
async fn an_empty_service_account_name_names_no_account() {
    let mut harness = Harness::start().await;
    let ns = harness.cluster.namespace.clone();
    let files = [("config.yaml", config_map("unnamed", "abcde"))];
    let files: Vec<(&str, &str)> = files.iter().map(|(n, t)| (*n, t.as_str())).collect();
    let v1 = harness.publish_files("unnamed-v1.0.0", "v1.0.0", &files);
    harness.source("repo", &v1).await;
    harness
        .create_kustomization(
            "unnamed",
            json!({"interval": "1m", "serviceAccountName": ""}),
        )
        .await;
    let ready = applied(&harness, "unnamed", "v1.0.0").await;
    assert_eq!(
        condition(&ready, "Ready").unwrap().reason,
        "ReconciliationSucceeded",
        "{}",
        ready_message(&ready)
    );

    harness
        .restart_with(|options| options.reconcile.default_service_account = Some("default".into()))
        .await;
    let v2 = harness.publish_files("unnamed-v2.0.0", "v2.0.0", &files);
    harness.source("repo", &v2).await;
    let failed = harness
        .wait_ready("unnamed", "False", "ReconciliationFailed")
        .await;
    assert!(
        ready_message(&failed).contains(&format!("\"system:serviceaccount:{ns}:default\"")),
        "{}",
        ready_message(&failed)
    );
}

/// `TestKustomizationReconciler_KubeConfig`: a kubeconfig Secret with a user-defined name and
/// key; while it is missing the reconciliation fails naming it, and once created a new
/// revision is applied.
#[tokio::test]
async fn flux_kube_config() {
    let harness = Harness::start().await;
    let ns = harness.cluster.namespace.clone();
    let files = [("config.yaml", config_map("kc", "abcde"))];
    let files: Vec<(&str, &str)> = files.iter().map(|(n, t)| (*n, t.as_str())).collect();
    let v1 = harness.publish_files("kc-v1", "v1.0.0", &files);
    harness.source("repo", &v1).await;
    harness
        .create_kustomization(
            "kc",
            json!({"interval": "1m",
                "kubeConfig": {"secretRef": {"name": "user-defined-name", "key": "user-defined-key"}}}),
        )
        .await;

    // fails to reconcile with missing kubeconfig secret
    let failed = harness
        .wait_ready("kc", "False", "ReconciliationFailed")
        .await;
    assert!(
        ready_message(&failed).contains("Secret \"user-defined-name\" not found"),
        "{}",
        ready_message(&failed)
    );

    harness
        .cluster
        .apply(&json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "user-defined-name", "namespace": ns},
            "stringData": {"user-defined-key": harness.cluster.kubeconfig_yaml()}}))
        .await;

    // reconciles successfully after secret is created
    let v2 = harness.publish_files("kc-v2", "v2.0.0", &files);
    harness.source("repo", &v2).await;
    let ready = applied(&harness, "kc", "v2.0.0").await;
    assert_eq!(
        condition(&ready, "Ready").unwrap().reason,
        "ReconciliationSucceeded"
    );
}

/// `TestKustomizationReconciler_AppliesRoleAndRoleBinding`: a service account that may
/// create Roles and RoleBindings (and holds what the Role grants) applies a Role and a
/// RoleBinding to it. In one stage the binding's dry-run fails, the Role not existing yet;
/// with Roles in a custom stage (`--custom-apply-stage-kinds`) both are applied.
#[tokio::test]
async fn flux_applies_role_and_role_binding() {
    let mut harness = Harness::start().await;
    let id = harness.cluster.namespace.clone();
    kubeconfig_secret(&harness).await;
    let role_name = crate::support::cluster::unique("custom-stage");
    for object in [
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "limited", "namespace": id}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": role_name},
        "rules": [
            {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"],
             "verbs": ["create", "update", "delete", "get", "list", "watch", "patch"]},
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]},
        ]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": role_name},
            "subjects": [{"kind": "ServiceAccount", "name": "limited", "namespace": id}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role_name}}),
    ] {
        harness.cluster.apply(&object).await;
    }
    let role = format!(
        "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: {id}-role\n  namespace: {id}\nrules:\n- apiGroups: [\"\"]\n  resources: [\"configmaps\"]\n  verbs: [\"get\", \"list\"]\n"
    );
    let binding = format!(
        "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: {id}-rolebinding\n  namespace: {id}\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: {id}-role\nsubjects:\n- kind: ServiceAccount\n  name: default\n  namespace: {id}\n"
    );
    let files = [
        ("role.yaml", role.as_str()),
        ("rolebinding.yaml", binding.as_str()),
    ];
    let v1 = harness.publish_files("rbac-v1", "v1.0.0", &files);
    harness.source("repo", &v1).await;
    harness
        .create_kustomization(
            "rbac",
            json!({"kubeConfig": {"secretRef": {"name": "kubeconfig"}}, "serviceAccountName": "limited"}),
        )
        .await;

    // fails to reconcile Role and RoleBinding without custom stage
    let failed = harness
        .wait_ready("rbac", "False", "ReconciliationFailed")
        .await;
    // The dry-run names the RoleBinding; the server's reason names the missing Role, by the
    // resource its release reports (`roles.rbac…` on v1.28, `rolebindings.rbac…` on the
    // release Flux's own test runs on).
    let message = ready_message(&failed);
    let (subject, reason) = message.split_once(" not found: ").unwrap_or_default();
    assert_eq!(
        subject,
        format!("RoleBinding/{id}/{id}-rolebinding"),
        "{message}"
    );
    assert!(
        ["roles", "rolebindings"]
            .iter()
            .any(|resource| reason.starts_with(&format!(
                "{resource}.rbac.authorization.k8s.io \"{id}-role\" not found"
            ))),
        "{message}"
    );

    // reconciles Role and RoleBinding with custom stage
    harness
        .restart_with(|options| {
            options.reconcile.custom_apply_stage_kinds =
                vec!["rbac.authorization.k8s.io/Role".into()]
        })
        .await;
    let v2 = harness.publish_files("rbac-v2", "v2.0.0", &files);
    harness.source("repo", &v2).await;
    let ready = applied(&harness, "rbac", "v2.0.0").await;
    assert_eq!(
        condition(&ready, "Ready").unwrap().reason,
        "ReconciliationSucceeded"
    );
    let roles: Api<k8s_openapi::api::rbac::v1::Role> =
        Api::namespaced(harness.cluster.client.clone(), &id);
    let bindings: Api<k8s_openapi::api::rbac::v1::RoleBinding> =
        Api::namespaced(harness.cluster.client.clone(), &id);
    assert!(
        roles
            .get_opt(&format!("{id}-role"))
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        bindings
            .get_opt(&format!("{id}-rolebinding"))
            .await
            .unwrap()
            .is_some()
    );
    let cluster_bindings: Api<k8s_openapi::api::rbac::v1::ClusterRoleBinding> =
        Api::all(harness.cluster.client.clone());
    let _ = cluster_bindings
        .delete(&role_name, &Default::default())
        .await;
    let cluster_roles: Api<k8s_openapi::api::rbac::v1::ClusterRole> =
        Api::all(harness.cluster.client.clone());
    let _ = cluster_roles.delete(&role_name, &Default::default()).await;
}
