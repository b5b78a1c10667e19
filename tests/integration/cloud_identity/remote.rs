//! `spec.kubeConfig.configMapRef`: remote clusters reached with an identity.

use k8s_openapi::api::core::v1::ServiceAccount;
use serde_json::json;

use super::annotated_service_account;
use crate::support::controller::Harness;
use crate::support::key_services::MockServer;

/// An API server stand-in that refuses every request (401) and keeps them: which bearer
/// token the controller came with.
fn refusing_cluster(tls: bool) -> MockServer {
    let refuse = |_: &crate::support::key_services::Request| {
        (
            401,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                "message": "Unauthorized", "reason": "Unauthorized", "code": 401}),
        )
    };
    if tls {
        MockServer::start_tls(refuse)
    } else {
        MockServer::start(refuse)
    }
}

/// A kubeconfig ConfigMap `name` with `data`, and a Kustomization `name` applying a
/// ConfigMap to the cluster it names: the Kustomization once it failed.
async fn reach_and_fail(
    harness: &Harness,
    name: &str,
    data: serde_json::Value,
) -> kustomize_controller::api::Kustomization {
    let ns = harness.cluster.namespace.clone();
    harness
        .cluster
        .apply(&json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns}, "data": data}))
        .await;
    let artifact = harness.publish_files(
        name,
        "main@sha1:0a0a",
        &[(
            "cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: far\n",
        )],
    );
    harness.source(name, &artifact).await;
    harness
        .create_kustomization(
            name,
            json!({"sourceRef": {"kind": "GitRepository", "name": name},
                "kubeConfig": {"configMapRef": {"name": name}}}),
        )
        .await;
    harness
        .wait_ready(name, "False", "ReconciliationFailed")
        .await
}

/// `spec.kubeConfig.configMapRef` with the `generic` provider, the "remote" cluster being the
/// one the suite runs on: the ConfigMap's ServiceAccount gets a token for the audience that
/// cluster serves, and applies with that identity's RBAC (a ConfigMap it may write; a Secret
/// it may not). A missing account and a provider that is not one are named as Flux names
/// them.
#[tokio::test]
async fn a_remote_cluster_is_reached_as_the_service_account_a_config_map_names() {
    use crate::support::controller::{Harness, ready_message};
    let token_dir = tempfile::tempdir().unwrap();
    let token_file = token_dir.path().join("token");
    let controller_token = token_file.clone();
    let harness = Harness::start_with(|options| {
        options.reconcile.object_level_workload_identity = true;
        options.reconcile.controller_token_file = controller_token;
    })
    .await;
    let cluster = &harness.cluster;
    let ns = cluster.namespace.clone();
    if cluster.ca_pem().is_empty() {
        eprintln!("skipped: the cluster's kubeconfig gives no CA to trust");
        return;
    }
    annotated_service_account(cluster, "deployer", json!({})).await;
    // The audience the API server authenticates tokens for: what it fills in when asked for
    // none.
    let accounts: kube::Api<ServiceAccount> = kube::Api::namespaced(cluster.client.clone(), &ns);
    let issued = accounts
        .create_token_request("deployer", &Default::default(), &Default::default())
        .await
        .unwrap();
    let audience = issued.spec.audiences[0].clone();
    cluster
        .grant(
            &ns,
            &format!("system:serviceaccount:{ns}:deployer"),
            json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}]),
        )
        .await;
    let kubeconfig_map = |name: &str, account: &str, provider: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns},
            "data": {"provider": provider, "address": cluster.server_url(), "ca.crt": cluster.ca_pem(),
                "serviceAccountName": account, "audiences": audience}})
    };
    cluster
        .apply(&kubeconfig_map("fleet", "deployer", "generic"))
        .await;
    cluster
        .apply(&kubeconfig_map("nobody", "nobody", "generic"))
        .await;
    cluster
        .apply(&kubeconfig_map("openstack", "deployer", "openstack"))
        .await;
    let config_map = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: far\ndata:\n  k: v\n";
    let artifact = harness.publish_files("maps", "main@sha1:c0f1", &[("cm.yaml", config_map)]);
    harness.source("maps", &artifact).await;
    let secret = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: far\nstringData:\n  k: v\n";
    let artifact = harness.publish_files("secrets", "main@sha1:5ec7", &[("secret.yaml", secret)]);
    harness.source("secrets", &artifact).await;
    let kustomization = |source: &str, config_map: &str| {
        json!({"sourceRef": {"kind": "GitRepository", "name": source},
            "kubeConfig": {"configMapRef": {"name": config_map}}})
    };
    harness
        .create_kustomization("maps", kustomization("maps", "fleet"))
        .await;
    harness
        .wait_ready("maps", "True", "ReconciliationSucceeded")
        .await;
    let maps: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(cluster.client.clone(), &ns);
    assert!(maps.get_opt("far").await.unwrap().is_some());
    // The identity's RBAC applies: it may not write Secrets.
    harness
        .create_kustomization("secrets", kustomization("secrets", "fleet"))
        .await;
    let refused = harness
        .wait_ready("secrets", "False", "ReconciliationFailed")
        .await;
    let message = ready_message(&refused);
    assert!(
        message.contains(&format!("system:serviceaccount:{ns}:deployer"))
            && message.contains("secrets"),
        "{message}"
    );
    // The second Kustomization reached the cluster with the access the token cache kept.
    let scrape = harness.metrics.encode();
    for (event, name) in [("cache_miss", "maps"), ("cache_hit", "secrets")] {
        let series = format!(
            "gotk_token_cache_events_total{{event_type=\"{event}\",kind=\"Kustomization\",name=\"{name}\",namespace=\"{ns}\",operation=\"fetch_kubeconfig\"}}"
        );
        assert!(scrape.contains(&series), "{series} in:\n{scrape}");
    }
    harness
        .create_kustomization("nobody", kustomization("maps", "nobody"))
        .await;
    let missing = harness
        .wait_ready("nobody", "False", "ReconciliationFailed")
        .await;
    let message = ready_message(&missing);
    assert!(
        message.contains(&format!(
            "failed to get access token for cluster: failed to get service account '{ns}/nobody': serviceaccounts \"nobody\" not found (kubeconfig ConfigMap '{ns}/nobody')"
        )),
        "{message}"
    );
    // Without a ServiceAccount, the controller's own (read from its mounted token) is used:
    // here an account the test made, whose token it mounted.
    annotated_service_account(cluster, "controller", json!({})).await;
    let own = accounts
        .create_token_request("controller", &Default::default(), &Default::default())
        .await
        .unwrap();
    std::fs::write(&token_file, own.status.unwrap().token).unwrap();
    cluster
        .grant(
            &ns,
            &format!("system:serviceaccount:{ns}:controller"),
            json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}]),
        )
        .await;
    let mut own_identity = kubeconfig_map("own", "", "generic");
    own_identity["data"]
        .as_object_mut()
        .unwrap()
        .remove("serviceAccountName");
    cluster.apply(&own_identity).await;
    let near = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: near\n";
    let artifact = harness.publish_files("near", "main@sha1:0e4a", &[("cm.yaml", near)]);
    harness.source("near", &artifact).await;
    harness
        .create_kustomization("own", kustomization("near", "own"))
        .await;
    harness
        .wait_ready("own", "True", "ReconciliationSucceeded")
        .await;
    assert!(maps.get_opt("near").await.unwrap().is_some());
    // A CA that is not PEM names the ConfigMap and the key.
    let mut bad_ca = kubeconfig_map("bad-ca", "deployer", "generic");
    bad_ca["data"]["ca.crt"] = json!("not a certificate");
    cluster.apply(&bad_ca).await;
    harness
        .create_kustomization("bad-ca", kustomization("maps", "bad-ca"))
        .await;
    let failed = harness
        .wait_ready("bad-ca", "False", "ReconciliationFailed")
        .await;
    assert!(
        ready_message(&failed).contains(&format!(
            "kubeconfig ConfigMap '{ns}/bad-ca': invalid ca.crt"
        )),
        "{}",
        ready_message(&failed)
    );
    harness
        .create_kustomization("openstack", kustomization("maps", "openstack"))
        .await;
    let unknown = harness
        .wait_ready("openstack", "False", "ReconciliationFailed")
        .await;
    assert!(
        ready_message(&unknown).contains(&format!(
            "provider 'openstack' not implemented (kubeconfig ConfigMap '{ns}/openstack')"
        )),
        "{}",
        ready_message(&unknown)
    );
}

/// The `aws` provider (EKS) against moto: the cluster's endpoint and CA from `DescribeCluster`
/// (the ConfigMap's address, a loopback stand-in for the cluster, taking precedence), and the
/// bearer token EKS takes — a presigned STS `GetCallerIdentity` URL with the cluster's name
/// signed in, which the test hands to moto's STS as EKS's authenticator would.
#[cfg(feature = "aws-kms")]
#[tokio::test]
async fn an_eks_cluster_is_reached_with_a_presigned_sts_token() {
    use crate::support::controller::Harness;
    use crate::support::key_services::moto;
    use base64::Engine as _;
    let moto = moto();
    let moto_url = moto.url.clone();
    let arn = tokio::task::spawn_blocking(move || {
        let answer = kustomize_controller::tls::blocking_client_builder()
            .build()
            .unwrap()
            .post(format!("{moto_url}/clusters"))
            .header(
                "Authorization",
                "AWS4-HMAC-SHA256 Credential=AKIDTEST/20261126/us-east-1/eks/aws4_request, SignedHeaders=host, Signature=0",
            )
            .json(&json!({"name": "fleet", "roleArn": "arn:aws:iam::123456789012:role/eks",
                "resourcesVpcConfig": {"subnetIds": []}}))
            .send()
            .unwrap();
        let cluster: serde_json::Value = answer.json().unwrap();
        cluster["cluster"]["arn"].as_str().unwrap().to_string()
    })
    .await
    .unwrap();
    let cluster_api = refusing_cluster(false);
    let environment = vec![
        (
            "AWS_ACCESS_KEY_ID".to_string(),
            "AKIDCONTROLLER".to_string(),
        ),
        (
            "AWS_SECRET_ACCESS_KEY".to_string(),
            "controller-secret".to_string(),
        ),
        ("AWS_ENDPOINT_URL".to_string(), moto.url.clone()),
    ];
    let harness = Harness::start_with(|options| {
        options.reconcile.environment = std::sync::Arc::new(environment);
    })
    .await;
    reach_and_fail(
        &harness,
        "eks",
        json!({"provider": "aws", "cluster": arn, "address": cluster_api.url}),
    )
    .await;
    let requests = cluster_api.requests();
    let bearer = requests
        .iter()
        .find_map(|r| r.header("authorization"))
        .expect("the cluster was asked with a token")
        .to_string();
    let encoded = bearer
        .strip_prefix("Bearer k8s-aws-v1.")
        .unwrap_or_else(|| panic!("an EKS token: {bearer}"));
    let presigned = String::from_utf8(
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(encoded)
            .unwrap(),
    )
    .unwrap();
    assert!(
        presigned.starts_with(&format!(
            "{}/?Action=GetCallerIdentity&Version=2011-06-15&",
            moto.url
        )) && presigned.contains("X-Amz-Expires=900")
            && presigned.contains("X-Amz-SignedHeaders=host%3Bx-k8s-aws-id")
            && presigned.contains("X-Amz-Credential=AKIDCONTROLLER%2F"),
        "{presigned}"
    );
    // What EKS's authenticator does with it: send it to STS with the cluster's name (moto's
    // STS answers it; it does not check signatures).
    let (status, identity) = tokio::task::spawn_blocking(move || {
        let answer = kustomize_controller::tls::blocking_client_builder()
            .build()
            .unwrap()
            .get(presigned)
            .header("x-k8s-aws-id", "fleet")
            // moto's server picks the service from an Authorization header's scope, which a
            // presigned request has none of: this one names STS (moto checks no signature).
            .header(
                "authorization",
                "AWS4-HMAC-SHA256 Credential=AKIDCONTROLLER/20261126/us-east-1/sts/aws4_request, SignedHeaders=host, Signature=0",
            )
            .send()
            .unwrap();
        (answer.status(), answer.text().unwrap())
    })
    .await
    .unwrap();
    assert!(
        status.is_success() && identity.contains("<GetCallerIdentityResult>"),
        "{status} {identity}"
    );
}

/// The `gcp` provider (GKE), as the controller's own identity on GKE: the metadata server's
/// token, the cluster's address and CA from the Kubernetes Engine API's `GetCluster`, and that
/// token as the bearer the cluster is asked with. Google's endpoints are loopback servers
/// that check each request.
#[tokio::test]
async fn a_gke_cluster_is_reached_with_the_metadata_servers_token() {
    use crate::support::controller::Harness;
    use crate::support::key_services::{MockServer, Request};
    use base64::Engine as _;
    use kustomize_controller::auth::gcp::GoogleEndpoints;
    let cluster_api = refusing_cluster(false);
    let endpoint = cluster_api.url.clone();
    let google = MockServer::start_text(move |request: &Request| {
        let metadata = request.header("metadata-flavor") == Some("Google");
        match request.path.as_str() {
            "/computeMetadata/v1/instance/service-accounts/default/token?scopes=https%3A%2F%2Fwww.googleapis.com%2Fauth%2Fcloud-platform%2Chttps%3A%2F%2Fwww.googleapis.com%2Fauth%2Fuserinfo.email"
                if metadata =>
            {
                (200, json!({"access_token": "ya29.metadata", "expires_in": 3599, "token_type": "Bearer"}).to_string())
            }
            "/v1/projects/fleet-project/locations/europe-west1/clusters/fleet"
                if request.header("authorization") == Some("Bearer ya29.metadata") =>
            {
                let ca = base64::engine::general_purpose::STANDARD
                    .encode("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");
                (200, json!({"name": "fleet", "endpoint": endpoint, "masterAuth": {"clusterCaCertificate": ca}}).to_string())
            }
            _ => (404, json!({"error": {"code": 404, "message": "not found"}}).to_string()),
        }
    });
    let endpoints = GoogleEndpoints {
        metadata_host: google.url.trim_start_matches("http://").to_string(),
        sts_token_url: format!("{}/v1/token", google.url),
        iam_credentials: google.url.clone(),
        container: google.url.clone(),
    };
    let harness = Harness::start_with(|options| {
        options.reconcile.google_endpoints = Some(endpoints);
        options.reconcile.environment = std::sync::Arc::new(Vec::new());
    })
    .await;
    reach_and_fail(&harness, "gke", json!({"provider": "gcp", "cluster": "projects/fleet-project/locations/europe-west1/clusters/fleet"})).await;
    let asked = cluster_api.requests();
    assert!(
        !asked.is_empty()
            && asked
                .iter()
                .all(|r| r.header("authorization") == Some("Bearer ya29.metadata")),
        "{asked:?}"
    );
    // A cluster name that is not one, in Flux's words.
    let failed = reach_and_fail(
        &harness,
        "gke-bad",
        json!({"provider": "gcp", "cluster": "fleet"}),
    )
    .await;
    let message = crate::support::controller::ready_message(&failed);
    assert!(
        message.contains("invalid GKE cluster ID: 'fleet'. must match"),
        "{message}"
    );
}

/// The `azure` provider (AKS), as the controller's workload identity: a token for AKS's Entra
/// application as the bearer, and one for Resource Manager to read the cluster (Entra ID
/// integration checked) and its user kubeconfig, whose server and CA the client takes. Entra
/// ID, Resource Manager and the cluster are loopback servers that check each request.
#[tokio::test]
async fn an_aks_cluster_is_reached_with_an_entra_token() {
    use crate::support::controller::{Harness, ready_message};
    use crate::support::key_services::MockServer;
    use base64::Engine as _;
    // AKS serves https; its user kubeconfig names the CA.
    let cluster_api = refusing_cluster(true);
    let cluster = "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/fleet/providers/Microsoft.ContainerService/managedClusters/aks";
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: aks\n  cluster:\n    server: {}\n    certificate-authority-data: {}\nusers: []\ncontexts: []\n",
        cluster_api.url,
        base64::engine::general_purpose::STANDARD.encode(cluster_api.ca_pem.clone().unwrap())
    );
    let azure = MockServer::start(move |request| {
        let form = |name| request.form_field(name);
        if request.path == "/tenant-1/oauth2/v2.0/token" {
            let assertion_ok = form("client_assertion").as_deref() == Some("projected-token")
                && form("client_id").as_deref() == Some("client-1");
            return match form("scope").as_deref() {
                Some("6dae42f8-4368-4678-94ff-3960e28e3630/.default") if assertion_ok => (
                    200,
                    json!({"token_type": "Bearer", "expires_in": 3599, "access_token": "eyJ.aks"}),
                ),
                Some("https://management.core.windows.net//.default") if assertion_ok => (
                    200,
                    json!({"token_type": "Bearer", "expires_in": 3599, "access_token": "eyJ.arm"}),
                ),
                _ => (400, json!({"error": "invalid_scope"})),
            };
        }
        if request.header("authorization") != Some("Bearer eyJ.arm") {
            return (
                401,
                json!({"error": {"code": "AuthenticationFailed", "message": "no token"}}),
            );
        }
        match (request.method.as_str(), request.path.as_str()) {
            ("GET", path) if path == format!("{cluster}?api-version=2022-01-01") => (
                200,
                json!({"name": "aks", "properties": {"aadProfile": {"managed": true}}}),
            ),
            ("POST", path)
                if path
                    == format!("{cluster}/listClusterUserCredential?api-version=2022-01-01") =>
            {
                (
                    200,
                    json!({"kubeconfigs": [{"name": "clusterUser",
                    "value": base64::engine::general_purpose::STANDARD.encode(&kubeconfig)}]}),
                )
            }
            _ => (
                404,
                json!({"error": {"code": "NotFound", "message": "not found"}}),
            ),
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("azure-identity-token");
    std::fs::write(&token_file, "projected-token\n").unwrap();
    let environment = vec![
        ("AZURE_CLIENT_ID".to_string(), "client-1".to_string()),
        ("AZURE_TENANT_ID".to_string(), "tenant-1".to_string()),
        (
            "AZURE_FEDERATED_TOKEN_FILE".to_string(),
            token_file.display().to_string(),
        ),
        (
            "AZURE_AUTHORITY_HOST".to_string(),
            format!("{}/", azure.url),
        ),
    ];
    let resource_manager = azure.url.clone();
    let harness = Harness::start_with(|options| {
        options.reconcile.environment = std::sync::Arc::new(environment);
        options.reconcile.azure_resource_manager = Some(resource_manager);
    })
    .await;
    let refused = reach_and_fail(
        &harness,
        "aks",
        json!({"provider": "azure", "cluster": cluster}),
    )
    .await;
    let asked = cluster_api.requests();
    assert!(
        !asked.is_empty()
            && asked
                .iter()
                .all(|r| r.header("authorization") == Some("Bearer eyJ.aks")),
        "{asked:?} {}",
        ready_message(&refused)
    );
    // An address no user kubeconfig serves, in Flux's words.
    let failed = reach_and_fail(
        &harness,
        "aks-elsewhere",
        json!({"provider": "azure", "cluster": cluster, "address": "https://other.example:443"}),
    )
    .await;
    let message = ready_message(&failed);
    assert!(
        message.contains(&format!(
            "no kubeconfig found for AKS cluster {cluster} matching the specified address 'https://other.example:443'. cluster addresses: ['{}']",
            cluster_api.url
        )),
        "{message}"
    );
}

/// Multi-tenancy lockdown as Flux words it: a ConfigMap without an account falls back on
/// `--default-kubeconfig-service-account`, and a tenant namespace without that account is told
/// so; with the gate off, an account a ConfigMap names is refused.
#[tokio::test]
async fn kubeconfig_identities_are_locked_down_as_flux_locks_them() {
    use crate::support::controller::{Harness, ready_message};
    let harness = Harness::start_with(|options| {
        options.reconcile.object_level_workload_identity = true;
        options.reconcile.default_kubeconfig_service_account = Some("tenant".into());
    })
    .await;
    let ns = harness.cluster.namespace.clone();
    let locked = reach_and_fail(
        &harness,
        "defaulted",
        json!({"provider": "generic", "address": "https://fleet.example"}),
    )
    .await;
    assert!(
        ready_message(&locked).contains(&format!(
            "failed to get access token for cluster: failed to get service account '{ns}/tenant': the specified default service account does not exist in the object namespace. your cluster is subject to multi-tenant workload identity lockdown, reach out to your cluster administrator for help"
        )),
        "{}",
        ready_message(&locked)
    );
    drop(harness);

    let harness = Harness::start().await;
    annotated_service_account(&harness.cluster, "deployer", json!({})).await;
    let refused = reach_and_fail(
        &harness,
        "named",
        json!({"provider": "generic", "address": "https://fleet.example", "serviceAccountName": "deployer"}),
    )
    .await;
    assert!(
        ready_message(&refused).contains(
            "failed to get access token for cluster: ObjectLevelWorkloadIdentity feature gate is not enabled"
        ),
        "{}",
        ready_message(&refused)
    );
}
