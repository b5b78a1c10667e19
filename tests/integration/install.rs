//! Install artifacts: the kustomize manifests in `config/` and the Helm chart, linted and
//! rendered with the official Helm SDK (helm-python-sdk, offline), checked against the CRD,
//! the API server and the flags the binary accepts.

use std::collections::BTreeSet;
use std::process::Command;

use serde_json::{Value, json};

use crate::support::{repo_root, run_cli, stdout_of};

fn parse_documents(text: &str) -> Vec<Value> {
    kustomize_controller::yaml::parse_documents(
        text,
        kustomize_controller::yaml::Schema::Kubernetes,
    )
    .expect("rendered YAML parses")
    .into_iter()
    .map(Value::from)
    .filter(|d| !d.is_null())
    .collect()
}

#[test]
fn crd_copies_stay_in_sync() {
    let crd = std::fs::read_to_string(
        repo_root().join("crds/kustomize.toolkit.fluxcd.io_kustomizations.yaml"),
    )
    .unwrap();
    for copy in [
        "config/crd/bases/kustomize.toolkit.fluxcd.io_kustomizations.yaml",
        "charts/kustomize-controller/files/kustomize.toolkit.fluxcd.io_kustomizations.yaml",
    ] {
        let text = std::fs::read_to_string(repo_root().join(copy)).unwrap();
        assert_eq!(text, crd, "{copy} differs from crds/ (copy it again)");
    }
}

#[test]
fn config_default_builds_as_kubectl_kustomize_does() {
    let dir = repo_root().join("config/default");
    let output = run_cli(&["build", dir.to_str().unwrap()]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let expected =
        std::fs::read_to_string(repo_root().join("tests/fixtures/install/config-default.yaml"))
            .unwrap();
    assert_eq!(
        stdout_of(&output),
        expected,
        "regenerate with: kubectl kustomize config/default"
    );
    let kinds: Vec<String> = parse_documents(&expected)
        .iter()
        .map(|d| d["kind"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        kinds,
        [
            "Namespace",
            "CustomResourceDefinition",
            "ServiceAccount",
            "Role",
            "RoleBinding",
            "ClusterRoleBinding",
            "Deployment"
        ]
    );
}

pub(crate) struct Rendered {
    lint: Value,
    pub(crate) objects: Vec<Value>,
}

pub(crate) fn render(values: &Value, namespace: &str) -> Result<Rendered, String> {
    let output = Command::new(crate::support::python())
        .arg(repo_root().join("tests/chart/render.py"))
        .arg(repo_root().join("charts/kustomize-controller"))
        .arg(values.to_string())
        .arg(namespace)
        .output()
        .expect("python3 runs");
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert!(
        !stderr.contains("No module named 'helm_python'"),
        "the Helm SDK is missing: run make setup (it installs helm-python-sdk into target/venv)"
    );
    if !output.status.success() {
        return Err(stderr);
    }
    let result: Value = serde_json::from_slice(&output.stdout).expect("render.py prints JSON");
    let mut objects = Vec::new();
    for (path, text) in result["manifests"].as_object().unwrap() {
        if path.ends_with(".txt") {
            continue;
        }
        objects.extend(parse_documents(text.as_str().unwrap()));
    }
    Ok(Rendered {
        lint: result["lint"].clone(),
        objects,
    })
}

/// The flags `kustomize-controller run` accepts, from its help.
fn run_flags() -> BTreeSet<String> {
    let help = stdout_of(&run_cli(&["run", "--help"]));
    help.split_whitespace()
        .filter(|w| w.starts_with("--"))
        .map(|w| {
            w.trim_end_matches(',')
                .split(['=', '['])
                .next()
                .unwrap()
                .to_string()
        })
        .collect()
}

fn find<'a>(objects: &'a [Value], kind: &str) -> Option<&'a Value> {
    objects.iter().find(|o| o["kind"] == kind)
}

fn check(rendered: &Rendered, values: &Value) {
    assert_eq!(
        rendered.lint["errors"],
        json!([]),
        "lint errors for {values}"
    );
    let warnings: Vec<&Value> = rendered.lint["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["severity"].as_i64().unwrap_or(0) >= 2)
        .collect();
    assert!(
        warnings.is_empty(),
        "lint warnings for {values}: {warnings:?}"
    );
    for object in &rendered.objects {
        assert!(
            object["apiVersion"].is_string() && object["kind"].is_string(),
            "{object}"
        );
        assert!(
            object
                .pointer("/metadata/name")
                .is_some_and(Value::is_string),
            "{object}"
        );
    }
    let deployment = find(&rendered.objects, "Deployment").expect("a Deployment");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(args[0], "run");
    let accepted = run_flags();
    for arg in &args[1..] {
        let flag = arg.split('=').next().unwrap();
        assert!(
            accepted.contains(flag),
            "{flag} is not a flag of `kustomize-controller run`"
        );
    }
    // The rendered arguments parse as the binary parses them.
    let mut probe = vec!["run"];
    probe.extend(args[1..].iter());
    probe.push("--help");
    let parsed = run_cli(&probe);
    assert!(
        parsed.status.success(),
        "{}",
        String::from_utf8_lossy(&parsed.stderr)
    );
    let selector = &deployment["spec"]["selector"]["matchLabels"];
    for (key, value) in selector.as_object().unwrap() {
        assert_eq!(
            &deployment["spec"]["template"]["metadata"]["labels"][key],
            value
        );
    }
    let security = &container["securityContext"];
    assert_eq!(security["allowPrivilegeEscalation"], false);
    assert_eq!(security["readOnlyRootFilesystem"], true);
    assert_eq!(container["env"][0]["name"], "RUNTIME_NAMESPACE");
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
}

#[test]
fn chart_lints_and_renders_for_default_and_custom_values() {
    let defaults = render(&json!({}), "flux-system").unwrap();
    check(&defaults, &json!({}));
    let crd = find(&defaults.objects, "CustomResourceDefinition").expect("the CRD");
    assert_eq!(
        crd["metadata"]["annotations"]["helm.sh/resource-policy"],
        "keep"
    );
    let ours = parse_documents(
        &std::fs::read_to_string(
            repo_root().join("crds/kustomize.toolkit.fluxcd.io_kustomizations.yaml"),
        )
        .unwrap(),
    );
    assert_eq!(crd["spec"], ours[0]["spec"], "the chart installs our CRD");
    let binding = find(&defaults.objects, "ClusterRoleBinding").unwrap();
    assert_eq!(binding["roleRef"]["name"], "cluster-admin");
    assert!(
        find(&defaults.objects, "Role").is_some(),
        "leader election is always on, as in Flux"
    );
    assert!(
        find(&defaults.objects, "Deployment")
            .unwrap()
            .to_string()
            .contains("--enable-leader-election")
    );
    assert_eq!(
        find(&defaults.objects, "Deployment").unwrap()["metadata"]["namespace"],
        "flux-system"
    );

    let custom = json!({
        "replicas": 2,
        "image": {"repository": "registry.example.com/kc", "tag": "v9", "pullPolicy": "Always"},
        "rbac": {"clusterAdmin": false},
        "crds": {"keep": false},
        "controller": {"noCrossNamespaceRefs": true, "overrideManagers": ["helm"], "customApplyStageKinds": ["Issuer.cert-manager.io"],
            "featureGates": "StrictPostBuildSubstitutions=true", "defaultServiceAccount": "default", "watchAllNamespaces": false,
            "sopsAgeSecret": "sops-age", "sopsVaultConfigMap": "sops-vault-config", "watchLabelSelector": "shard=a", "extraArgs": ["--insecure-kubeconfig-tls"]},
        "metrics": {"serviceMonitor": {"enabled": true}, "podMonitor": {"enabled": true}},
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "dedicated", "operator": "Exists"}],
    });
    let rendered = render(&custom, "gitops").unwrap();
    check(&rendered, &custom);
    let deployment = find(&rendered.objects, "Deployment").unwrap();
    assert_eq!(deployment["spec"]["replicas"], 2);
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["image"],
        "registry.example.com/kc:v9"
    );
    let args = deployment["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
    for expected in [
        "--enable-leader-election",
        "--no-cross-namespace-refs",
        "--override-manager=helm",
        "--watch-all-namespaces=false",
        "--sops-vault-configmap=sops-vault-config",
    ] {
        assert!(args.contains(expected), "{expected} in {args}");
    }
    // Vault login as the controller: tokens for its own ServiceAccount only.
    let cluster_role = find(&rendered.objects, "ClusterRole").unwrap().to_string();
    assert!(
        !cluster_role.contains("serviceaccounts/token"),
        "{cluster_role}"
    );
    let vault_role = rendered
        .objects
        .iter()
        .find(|o| {
            o["kind"] == "Role"
                && o["metadata"]["name"]
                    .as_str()
                    .unwrap()
                    .ends_with("vault-login")
        })
        .expect("a Role for the controller's own tokens");
    assert_eq!(
        vault_role["rules"],
        json!([{"apiGroups": [""], "resources": ["serviceaccounts/token"],
            "resourceNames": ["kustomize-controller"], "verbs": ["create"]}])
    );
    // With object-level workload identity, tokens for the tenants' accounts.
    let mut tenants = custom.clone();
    tenants["controller"]["featureGates"] =
        json!("StrictPostBuildSubstitutions=true, ObjectLevelWorkloadIdentity=true");
    let rendered = render(&tenants, "gitops").unwrap();
    check(&rendered, &tenants);
    let cluster_role = find(&rendered.objects, "ClusterRole").unwrap().to_string();
    assert!(
        cluster_role.contains("serviceaccounts/token"),
        "{cluster_role}"
    );
    assert!(
        !rendered.objects.iter().any(|o| o["metadata"]["name"]
            .as_str()
            .unwrap()
            .ends_with("vault-login")),
        "the ClusterRole covers the controller's own account"
    );
    assert!(
        find(&rendered.objects, "Role").is_some(),
        "leader election needs a Role"
    );
    assert!(
        find(&rendered.objects, "ClusterRole").is_some(),
        "a restricted ClusterRole"
    );
    assert!(
        find(&rendered.objects, "ServiceMonitor").is_some()
            && find(&rendered.objects, "PodMonitor").is_some()
    );
    let crd = find(&rendered.objects, "CustomResourceDefinition").unwrap();
    assert!(
        crd["metadata"]["annotations"]
            .get("helm.sh/resource-policy")
            .is_none()
    );

    let without_crds = render(&json!({"crds": {"install": false}}), "flux-system").unwrap();
    assert!(find(&without_crds.objects, "CustomResourceDefinition").is_none());
}

#[test]
fn chart_values_are_validated_by_the_schema() {
    for bad in [
        json!({"replicas": "two"}),
        json!({"controller": {"logLevel": "loud"}}),
        json!({"unknown": true}),
        json!({"controller": {"requeueDependency": "soon"}}),
    ] {
        assert!(
            render(&bad, "flux-system").is_err(),
            "{bad} should be refused"
        );
    }
}

/// The rendered objects are accepted by the API server (server-side dry-run).
#[tokio::test]
async fn rendered_objects_pass_server_side_dry_run() {
    let cluster = crate::support::cluster::TestCluster::start().await;
    let namespace = cluster.namespace.clone();
    let rendered = tokio::task::spawn_blocking(move || {
        render(
            &json!({"replicas": 2, "crds": {"install": false}}),
            &namespace,
        )
        .unwrap()
    })
    .await
    .unwrap();
    for mut object in rendered.objects {
        if object["apiVersion"]
            .as_str()
            .unwrap()
            .starts_with("monitoring.coreos.com")
        {
            continue;
        }
        // Cluster-scoped names are shared on real clusters: keep them unique.
        if object.pointer("/metadata/namespace").is_none() {
            object["metadata"]["name"] = json!(crate::support::cluster::unique("chart"));
        }
        let api = crate::support::cluster::dynamic_api(&cluster.client, &object).await;
        let name = object["metadata"]["name"].as_str().unwrap().to_string();
        let params = kube::api::PatchParams::apply("chart-test")
            .dry_run()
            .force();
        api.patch(&name, &params, &kube::api::Patch::Apply(&object))
            .await
            .unwrap_or_else(|e| panic!("{} {name}: {e}", object["kind"]));
    }
}

/// Swapping the image of Flux's Deployment keeps its container args: flags without a
/// subcommand mean `run`.
#[test]
fn fluxs_deployment_args_are_accepted_as_they_are() {
    let output = run_cli(&[
        "--events-addr=http://notification-controller.flux-system.svc.cluster.local./",
        "--watch-all-namespaces=true",
        "--log-level=info",
        "--log-encoding=json",
        "--enable-leader-election",
        "--help",
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout_of(&output).contains("Usage: kustomize-controller run"));
}

/// The README's image swap, as a Flux user makes it: `flux-system/kustomization.yaml` gets
/// the `images:` entry, the build changes the image of Flux's Deployment and nothing else,
/// and the binary then runs with that Deployment's container args and environment through a
/// rolling update: the new replica is Ready by its readiness probe while the old one leads,
/// the old one stops on SIGTERM within the grace period and releases the Lease, and the new
/// one takes over and handles a `flux reconcile` request. Its log is JSON `flux logs` reads.
/// The one flag added, a label selector, keeps `--watch-all-namespaces` to this test's
/// objects on a shared cluster.
#[tokio::test]
async fn fluxs_deployment_with_the_image_swapped_runs_through_a_rolling_update() {
    use crate::support::cluster::{TestCluster, wait_for};
    use crate::support::controller::{ControllerProcess, controller_kubeconfig};
    use crate::support::http_get_text;
    use k8s_openapi::api::coordination::v1::Lease;
    use std::time::Duration;

    let fixture = repo_root().join("tests/fixtures/flux-swap");
    let built = run_cli(&["build", fixture.to_str().unwrap()]);
    assert!(built.status.success(), "{built:?}");
    let deployment = parse_documents(&stdout_of(&built)).remove(0);
    let original =
        parse_documents(&std::fs::read_to_string(fixture.join("deployment.yaml")).unwrap())
            .remove(0);
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    assert_eq!(
        container["image"],
        "ghcr.io/kustomize-controller-rs/kustomize-controller:v0.1.0"
    );
    let mut unswapped = deployment.clone();
    unswapped["spec"]["template"]["spec"]["containers"][0]["image"] =
        original["spec"]["template"]["spec"]["containers"][0]["image"].clone();
    assert_eq!(unswapped, original, "only the image changes");
    let readiness = container["readinessProbe"]["httpGet"]["path"]
        .as_str()
        .unwrap();
    let liveness = container["livenessProbe"]["httpGet"]["path"]
        .as_str()
        .unwrap();
    let grace = Duration::from_secs(pod["terminationGracePeriodSeconds"].as_u64().unwrap());
    assert_eq!(
        container["env"][0]["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.namespace"
    );

    let cluster = TestCluster::start().await;
    let kubeconfig = controller_kubeconfig(&cluster).await;
    let artifacts = crate::support::artifacts::ArtifactServer::start().await;
    let ns = cluster.namespace.clone();
    cluster
        .source_of_manifests(
            &artifacts,
            "main@sha1:5a4b",
            &crate::support::artifacts::config_map("swapped"),
        )
        .await;
    let selector = format!("swap.test/namespace={ns}");
    let mut args: Vec<String> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    args.push(format!("--watch-label-selector={selector}"));
    let lease = kustomize_controller::controller::leader::lease_name(Some(&selector));
    let leases: kube::Api<Lease> = kube::Api::namespaced(cluster.client.clone(), &ns);
    let holder = || async {
        leases
            .get_opt(&lease)
            .await
            .ok()
            .flatten()
            .and_then(|l| l.spec?.holder_identity)
            .filter(|h| !h.is_empty())
    };
    let ready = |process: &ControllerProcess| {
        let address = process.health.clone();
        async move {
            let answer = http_get_text(&address, readiness).await?;
            answer.starts_with("HTTP/1.1 200").then_some(())
        }
    };

    let mut old = ControllerProcess::start_container(&kubeconfig, &ns, &args);
    assert!(
        wait_for(Duration::from_secs(30), || ready(&old))
            .await
            .is_some(),
        "the first replica is Ready"
    );
    let leader = wait_for(Duration::from_secs(60), holder)
        .await
        .unwrap_or_else(|| panic!("the first replica leads; log:\n{}", old.log()));
    cluster
        .apply(
            &json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": "swap", "namespace": ns, "labels": {"swap.test/namespace": ns}},
            "spec": {"interval": "10m", "prune": true, "targetNamespace": ns,
                "sourceRef": {"kind": "GitRepository", "name": "repo"}}}),
        )
        .await;
    let kustomizations: kube::Api<kustomize_controller::api::Kustomization> =
        kube::Api::namespaced(cluster.client.clone(), &ns);
    let applied = wait_for(Duration::from_secs(30), || async {
        let object = kustomizations.get("swap").await.ok()?;
        let status = object.status?;
        (status.last_applied_revision.as_deref() == Some("main@sha1:5a4b")).then_some(())
    })
    .await;
    assert!(applied.is_some(), "the leader applies; log:\n{}", old.log());

    // The rolling update: a new replica starts while the old one leads.
    let new = ControllerProcess::start_container(&kubeconfig, &ns, &args);
    assert!(
        wait_for(Duration::from_secs(30), || ready(&new))
            .await
            .is_some(),
        "the new replica is Ready while it waits for the Lease"
    );
    let live = http_get_text(&new.health, liveness).await.unwrap();
    assert!(live.starts_with("HTTP/1.1 200"), "{live}");
    assert_eq!(holder().await.as_deref(), Some(leader.as_str()));
    old.terminate();
    let stopped = tokio::time::timeout(grace, old.child.wait())
        .await
        .expect("the old replica stops within the grace period")
        .unwrap();
    assert!(stopped.success(), "{stopped}; log:\n{}", old.log());
    let next = wait_for(Duration::from_secs(30), || async {
        holder().await.filter(|h| *h != leader)
    })
    .await;
    assert!(next.is_some(), "the new replica takes the released Lease");
    let patch =
        json!({"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": "after-the-swap"}}});
    kustomizations
        .patch(
            "swap",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .unwrap();
    let handled = wait_for(Duration::from_secs(30), || async {
        let object = kustomizations.get("swap").await.ok()?;
        (object.status?.last_handled_reconcile_at.as_deref() == Some("after-the-swap"))
            .then_some(())
    })
    .await;
    assert!(
        handled.is_some(),
        "the new leader handles the request; log:\n{}",
        new.log()
    );
    for log in [old.log(), new.log()] {
        for line in log.lines() {
            let entry = crate::logs::decode(line)
                .unwrap_or_else(|e| panic!("flux logs cannot read this line: {e}"));
            assert!(!entry.ts.is_empty() && !entry.msg.is_empty(), "{line}");
        }
    }
    assert!(
        new.log().contains(&format!(
            "\"msg\":\"Successfully acquired lease\",\"lock\":\"{ns}/kustomize-controller-leader-election"
        )),
        "{}",
        new.log()
    );
}
