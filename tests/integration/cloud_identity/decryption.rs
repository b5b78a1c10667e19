//! SOPS key services opened as the controller's own cloud identity and as a Kustomization's
//! ServiceAccount's.

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use kustomize_controller::auth::gcp::GoogleEndpoints;
use kustomize_controller::controller::identity::KubeServiceAccount;
use kustomize_controller::sops::Keys;
use serde_json::{Value, json};

use super::{annotated_service_account, decrypt_off_the_runtime, issued_for, vars};
use crate::sops_key_sources::{decrypt_sealed, gpg_and_data_key, sealed_with, wrap};
use crate::support::cluster::TestCluster;
use crate::support::key_services::{MockServer, Request};

#[cfg(feature = "aws-kms")]
fn aws_kms_file(data_key: &[u8], moto_url: &str) -> (String, String) {
    use crate::sops_key_sources::kms_call;
    let arn = kms_call(moto_url, "CreateKey", json!({}))["KeyMetadata"]["Arn"]
        .as_str()
        .unwrap()
        .to_string();
    let blob = kms_call(
        moto_url,
        "Encrypt",
        json!({"KeyId": arn, "Plaintext": STANDARD.encode(data_key)}),
    )["CiphertextBlob"]
        .as_str()
        .unwrap()
        .to_string();
    (arn, blob)
}

/// A KMS `Decrypt` that answers only requests signed with `access_key_id` and carrying
/// `session_token`: which credentials the controller ended up with.
#[cfg(feature = "aws-kms")]
fn kms_checking_credentials(
    data_key: Vec<u8>,
    access_key_id: &'static str,
    session_token: &'static str,
) -> MockServer {
    MockServer::start(move |request| {
        let signed = request.header("authorization").is_some_and(|a| {
            a.starts_with(&format!("AWS4-HMAC-SHA256 Credential={access_key_id}/"))
        }) && request.header("x-amz-security-token") == Some(session_token)
            && request.header("x-amz-target") == Some("TrentService.Decrypt");
        if signed {
            (
                200,
                json!({"Plaintext": STANDARD.encode(&data_key), "KeyId": "k"}),
            )
        } else {
            (
                400,
                json!({"__type": "UnrecognizedClientException", "message": "The security token included in the request is invalid."}),
            )
        }
    })
}

#[cfg(feature = "aws-kms")]
#[test]
fn aws_pod_identity_and_the_instance_role_are_the_controllers_own_identity() {
    let (_gpg, data_key) = gpg_and_data_key();
    let moto = crate::support::key_services::moto();
    let (arn, blob) = aws_kms_file(&data_key, &moto.url);
    let file = sealed_with(|sops| {
        sops.insert(
            "kms".into(),
            json!([{"arn": arn, "role": "", "context": {}, "created_at": "2026-11-26T00:00:00Z",
                    "enc": blob, "aws_profile": ""}]),
        );
    });
    // EKS Pod Identity: the agent's endpoint, asked with the token EKS projects (read at
    // every request, as it rotates).
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("eks-pod-identity-token");
    std::fs::write(&token_file, "pod-identity-token\n").unwrap();
    let agent = MockServer::start(|request| {
        let fine = request.method == "GET"
            && request.path == "/v1/credentials"
            && request.header("authorization") == Some("pod-identity-token")
            && request.header("accept") == Some("application/json");
        if fine {
            (
                200,
                json!({"AccessKeyId": "ASIAPODIDENTITY", "SecretAccessKey": "pod-secret",
                    "Token": "pod-session", "AccountId": "123456789012",
                    "Expiration": "2099-01-01T00:00:00Z"}),
            )
        } else {
            (401, json!({"message": "unauthorized"}))
        }
    });
    let kms = kms_checking_credentials(data_key.clone(), "ASIAPODIDENTITY", "pod-session");
    let mut keys = Keys::new();
    keys.add_environment(vars(&[
        (
            "AWS_CONTAINER_CREDENTIALS_FULL_URI",
            format!("{}/v1/credentials", agent.url),
        ),
        (
            "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
            token_file.display().to_string(),
        ),
        ("AWS_ENDPOINT_URL_KMS", kms.url.clone()),
    ]));
    assert!(
        decrypt_sealed(&file, &keys)
            .unwrap()
            .starts_with("foo: bar")
    );
    assert_eq!(agent.requests().len(), 1);
    // The same credentials against moto's KMS, which decrypts for real.
    let mut keys = Keys::new();
    keys.add_environment(vars(&[
        (
            "AWS_CONTAINER_CREDENTIALS_FULL_URI",
            format!("{}/v1/credentials", agent.url),
        ),
        (
            "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
            token_file.display().to_string(),
        ),
        ("AWS_ENDPOINT_URL_KMS", moto.url.clone()),
    ]));
    assert!(
        decrypt_sealed(&file, &keys)
            .unwrap()
            .starts_with("foo: bar")
    );

    // The EC2 instance role, IMDSv2's way: a session token, then the role, then its
    // credentials, each asked with the session token.
    let imds = MockServer::start_text(|request: &Request| {
        let session = request.header("x-aws-ec2-metadata-token") == Some("imds-session");
        match (request.method.as_str(), request.path.as_str()) {
            ("PUT", "/latest/api/token")
                if request.header("x-aws-ec2-metadata-token-ttl-seconds") == Some("21600") =>
            {
                (200, "imds-session".into())
            }
            (_, _) if !session => (401, String::new()),
            ("GET", "/latest/meta-data/iam/security-credentials/") => {
                (200, "flux-node-role".into())
            }
            ("GET", "/latest/meta-data/iam/security-credentials/flux-node-role") => (
                200,
                json!({"Code": "Success", "Type": "AWS-HMAC", "AccessKeyId": "ASIAINSTANCE",
                    "SecretAccessKey": "instance-secret", "Token": "instance-session",
                    "Expiration": "2099-01-01T00:00:00Z"})
                .to_string(),
            ),
            _ => (404, String::new()),
        }
    });
    let kms = kms_checking_credentials(data_key.clone(), "ASIAINSTANCE", "instance-session");
    let mut keys = Keys::new();
    keys.add_environment(vars(&[
        ("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.url.clone()),
        ("AWS_ENDPOINT_URL_KMS", kms.url.clone()),
    ]));
    assert!(
        decrypt_sealed(&file, &keys)
            .unwrap()
            .starts_with("foo: bar")
    );
    assert_eq!(imds.requests().len(), 3, "{:?}", imds.requests());
    // Disabled, the instance role is not asked and the error says what to configure.
    let mut keys = Keys::new();
    keys.add_environment(vars(&[("AWS_EC2_METADATA_DISABLED", "true".into())]));
    let error = decrypt_sealed(&file, &keys).unwrap_err().to_string();
    assert!(error.contains("sops.aws-kms"), "{error}");
}

/// The token and Key Vault endpoints of Microsoft Entra ID and Azure, as documented: the
/// client-credentials grant with a client assertion (workload identity), the instance
/// metadata service's managed identity, and Key Vault's decrypt.
fn azure_endpoints(
    data_key: Vec<u8>,
    assertion_ok: impl Fn(&str) -> bool + Send + Sync + 'static,
) -> MockServer {
    MockServer::start(move |request| {
        let form = |name| request.form_field(name);
        if request.path == "/tenant-1/oauth2/v2.0/token" {
            let fine = request.method == "POST"
                && form("grant_type").as_deref() == Some("client_credentials")
                && form("client_id").as_deref() == Some("client-1")
                && form("client_assertion_type").as_deref()
                    == Some("urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
                && form("client_assertion").is_some_and(|a| assertion_ok(&a))
                && form("scope").as_deref() == Some("https://vault.azure.net/.default");
            return if fine {
                (
                    200,
                    json!({"token_type": "Bearer", "expires_in": 3599, "access_token": "eyJ.federated"}),
                )
            } else {
                (
                    400,
                    json!({"error": "invalid_client", "error_description": "AADSTS700213: No matching federated identity record found."}),
                )
            };
        }
        if request.path
            == "/metadata/identity/oauth2/token?api-version=2018-02-01&resource=https%3A%2F%2Fvault.azure.net&client_id=managed-1"
        {
            return if request.header("metadata") == Some("true") && request.method == "GET" {
                (
                    200,
                    json!({"access_token": "eyJ.managed", "expires_on": "4102444800",
                    "resource": "https://vault.azure.net", "token_type": "Bearer"}),
                )
            } else {
                (
                    400,
                    json!({"error": "invalid_request", "error_description": "Required metadata header not specified"}),
                )
            };
        }
        if request.method != "POST"
            || request.path != "/keys/sops-key/0f1e2d/decrypt?api-version=7.4"
        {
            return (
                404,
                json!({"error": {"code": "NotFound", "message": "not found"}}),
            );
        }
        let authorized = matches!(
            request.header("authorization"),
            Some("Bearer eyJ.federated") | Some("Bearer eyJ.managed")
        );
        let value = URL_SAFE_NO_PAD
            .decode(request.json()["value"].as_str().unwrap_or_default())
            .unwrap_or_default();
        if !authorized || value != wrap(&data_key) {
            return (
                401,
                json!({"error": {"code": "Unauthorized", "message": "AKV10032: Invalid issuer."}}),
            );
        }
        (
            200,
            json!({"kid": "k", "value": URL_SAFE_NO_PAD.encode(&data_key)}),
        )
    })
}

fn azure_file(server: &MockServer, data_key: &[u8]) -> String {
    sealed_with(|sops| {
        sops.insert(
            "azure_kv".into(),
            json!([{"vault_url": server.url, "name": "sops-key", "version": "0f1e2d",
                    "created_at": "2026-11-26T00:00:00Z", "enc": URL_SAFE_NO_PAD.encode(wrap(data_key))}]),
        );
    })
}

#[test]
fn azure_workload_and_managed_identity_are_the_controllers_own_identity() {
    let (_gpg, data_key) = gpg_and_data_key();
    let server = azure_endpoints(data_key.clone(), |assertion| assertion == "projected-token");
    let file = azure_file(&server, &data_key);
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("azure-identity-token");
    std::fs::write(&token_file, "projected-token\n").unwrap();
    // What the workload identity webhook injects.
    let mut keys = Keys::new();
    keys.trust_azure_vault_origin(&server.url);
    keys.add_environment(vars(&[
        ("AZURE_CLIENT_ID", "client-1".into()),
        ("AZURE_TENANT_ID", "tenant-1".into()),
        (
            "AZURE_FEDERATED_TOKEN_FILE",
            token_file.display().to_string(),
        ),
        ("AZURE_AUTHORITY_HOST", format!("{}/", server.url)),
    ]));
    assert!(
        decrypt_sealed(&file, &keys)
            .unwrap()
            .starts_with("foo: bar")
    );
    // A user-assigned managed identity, from the instance metadata service.
    let mut keys = Keys::new();
    keys.trust_azure_vault_origin(&server.url);
    keys.add_environment(vars(&[
        ("AZURE_CLIENT_ID", "managed-1".into()),
        ("AZURE_POD_IDENTITY_AUTHORITY_HOST", server.url.clone()),
    ]));
    assert!(
        decrypt_sealed(&file, &keys)
            .unwrap()
            .starts_with("foo: bar")
    );
}

/// Google's metadata server, STS, IAM Credentials and Cloud KMS as documented, checking each
/// request: the metadata server's token (the controller's identity on GKE), the STS token
/// exchange of a subject token the test chose, impersonation, and KMS decrypt with the token
/// that each path ends with.
pub(crate) fn google_endpoints(
    data_key: Vec<u8>,
    subject_ok: impl Fn(&Request) -> bool + Send + Sync + 'static,
) -> MockServer {
    MockServer::start_text(move |request: &Request| {
        let metadata = request.header("metadata-flavor") == Some("Google");
        let text = |status: u16, value: Value| (status, value.to_string());
        match request.path.as_str() {
            "/computeMetadata/v1/instance/service-accounts/default/token?scopes=https%3A%2F%2Fwww.googleapis.com%2Fauth%2Fcloud-platform%2Chttps%3A%2F%2Fwww.googleapis.com%2Fauth%2Fuserinfo.email"
                if metadata =>
            {
                text(
                    200,
                    json!({"access_token": "ya29.metadata", "expires_in": 3599, "token_type": "Bearer"}),
                )
            }
            "/computeMetadata/v1/project/project-id" if metadata => (200, "fleet-project".into()),
            "/computeMetadata/v1/instance/attributes/cluster-location" if metadata => {
                (200, "europe-west1".into())
            }
            "/computeMetadata/v1/instance/attributes/cluster-name" if metadata => {
                (200, "fleet".into())
            }
            "/v1/token" => {
                let form = |name| request.form_field(name);
                let fine = request.method == "POST"
                    && form("grant_type").as_deref()
                        == Some("urn:ietf:params:oauth:grant-type:token-exchange")
                    && form("requested_token_type").as_deref()
                        == Some("urn:ietf:params:oauth:token-type:access_token")
                    && form("subject_token_type").as_deref()
                        == Some("urn:ietf:params:oauth:token-type:jwt")
                    && subject_ok(request);
                if fine {
                    text(
                        200,
                        json!({"access_token": "ya29.federated", "issued_token_type":
                        "urn:ietf:params:oauth:token-type:access_token", "token_type": "Bearer", "expires_in": 3599}),
                    )
                } else {
                    text(
                        400,
                        json!({"error": "invalid_grant", "error_description": "The audience in ID Token does not match the expected audience."}),
                    )
                }
            }
            "/v1/projects/-/serviceAccounts/sops@fleet-project.iam.gserviceaccount.com:generateAccessToken" =>
            {
                let body = request.json();
                let fine = request.header("authorization") == Some("Bearer ya29.federated")
                    && body["lifetime"] == "3600s"
                    && body["scope"]
                        == json!([
                            "https://www.googleapis.com/auth/cloud-platform",
                            "https://www.googleapis.com/auth/userinfo.email"
                        ]);
                if fine {
                    text(
                        200,
                        json!({"accessToken": "ya29.impersonated", "expireTime": "2099-01-01T00:00:00Z"}),
                    )
                } else {
                    text(
                        403,
                        json!({"error": {"code": 403, "message": "Permission 'iam.serviceAccounts.getAccessToken' denied"}}),
                    )
                }
            }
            "/v1/projects/fleet-project/locations/global/keyRings/flux/cryptoKeys/sops:decrypt" => {
                let authorized = matches!(
                    request.header("authorization"),
                    Some("Bearer ya29.metadata")
                        | Some("Bearer ya29.federated")
                        | Some("Bearer ya29.impersonated")
                );
                let ciphertext = STANDARD
                    .decode(request.json()["ciphertext"].as_str().unwrap_or_default())
                    .unwrap_or_default();
                if authorized && ciphertext == wrap(&data_key) {
                    text(200, json!({"plaintext": STANDARD.encode(&data_key)}))
                } else {
                    text(
                        401,
                        json!({"error": {"code": 401, "message": "Request had invalid authentication credentials."}}),
                    )
                }
            }
            _ => (404, String::new()),
        }
    })
}

pub(crate) fn gcp_file(data_key: &[u8]) -> String {
    sealed_with(|sops| {
        sops.insert(
            "gcp_kms".into(),
            json!([{"resource_id": "projects/fleet-project/locations/global/keyRings/flux/cryptoKeys/sops",
                    "created_at": "2026-11-26T00:00:00Z", "enc": STANDARD.encode(wrap(data_key))}]),
        );
    })
}

pub(crate) fn loopback_google(server: &MockServer) -> GoogleEndpoints {
    GoogleEndpoints {
        metadata_host: server.url.trim_start_matches("http://").to_string(),
        sts_token_url: format!("{}/v1/token", server.url),
        iam_credentials: server.url.clone(),
        container: server.url.clone(),
    }
}

#[test]
fn gcp_metadata_server_and_workload_identity_federation_are_the_controllers_own_identity() {
    let (_gpg, data_key) = gpg_and_data_key();
    let server = google_endpoints(data_key.clone(), |request| {
        request.form_field("subject_token").as_deref() == Some("oidc-subject-token")
            && request.form_field("audience").as_deref()
                == Some(
                    "//iam.googleapis.com/projects/123/locations/global/workloadIdentityPools/fleet/providers/k8s",
                )
    });
    let file = gcp_file(&data_key);
    // GKE Workload Identity: the metadata server answers for the pod.
    let mut keys = Keys::new();
    keys.add_environment(vars(&[
        (
            "GCE_METADATA_HOST",
            server.url.trim_start_matches("http://").to_string(),
        ),
        ("SOPS_GCP_KMS_ENDPOINT", server.url.clone()),
    ]));
    assert!(
        decrypt_sealed(&file, &keys)
            .unwrap()
            .starts_with("foo: bar")
    );
    // A workload identity federation file: the subject token exchanged at STS, then the
    // Google service account impersonated.
    let dir = tempfile::tempdir().unwrap();
    let subject = dir.path().join("token.json");
    std::fs::write(
        &subject,
        json!({"id_token": "oidc-subject-token"}).to_string(),
    )
    .unwrap();
    let credentials = dir.path().join("credentials.json");
    let federation = |impersonate: bool| {
        let mut file = json!({"type": "external_account",
            "audience": "//iam.googleapis.com/projects/123/locations/global/workloadIdentityPools/fleet/providers/k8s",
            "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
            "token_url": format!("{}/v1/token", server.url),
            "credential_source": {"file": subject.display().to_string(),
                "format": {"type": "json", "subject_token_field_name": "id_token"}}});
        if impersonate {
            file["service_account_impersonation_url"] = json!(format!(
                "{}/v1/projects/-/serviceAccounts/sops@fleet-project.iam.gserviceaccount.com:generateAccessToken",
                server.url
            ));
        }
        file
    };
    for impersonate in [false, true] {
        std::fs::write(&credentials, federation(impersonate).to_string()).unwrap();
        let before = server.requests().len();
        let mut keys = Keys::new();
        keys.add_environment(vars(&[
            (
                "GOOGLE_APPLICATION_CREDENTIALS",
                credentials.display().to_string(),
            ),
            ("SOPS_GCP_KMS_ENDPOINT", server.url.clone()),
        ]));
        assert!(
            decrypt_sealed(&file, &keys)
                .unwrap()
                .starts_with("foo: bar"),
            "{impersonate}"
        );
        let requests = server.requests()[before..].to_vec();
        let scope = requests[0].form_field("scope").unwrap();
        let expected_scope = if impersonate {
            "https://www.googleapis.com/auth/cloud-platform"
        } else {
            "https://www.googleapis.com/auth/cloud-platform https://www.googleapis.com/auth/userinfo.email"
        };
        assert_eq!(scope, expected_scope, "STS scopes as Flux asks them");
        let last = requests.last().unwrap();
        let bearer = if impersonate {
            "Bearer ya29.impersonated"
        } else {
            "Bearer ya29.federated"
        };
        assert_eq!(last.header("authorization"), Some(bearer));
    }
}

/// A Kustomization's ServiceAccount on GKE: a token for GKE's identity namespace (cluster
/// named by the metadata server), exchanged at STS for that namespace's audience, then the
/// annotated Google service account impersonated; and with a workload identity pool
/// annotated, that pool's audience, federated access.
#[tokio::test]
async fn gcp_keys_open_as_a_service_accounts_federated_identity() {
    let cluster = TestCluster::start().await;
    let ns = cluster.namespace.clone();
    let (_gpg, data_key) = gpg_and_data_key();
    let expected_ns = ns.clone();
    let server = google_endpoints(data_key.clone(), move |request| {
        let token = request.form_field("subject_token").unwrap_or_default();
        match request.form_field("audience").as_deref() {
            Some(
                "identitynamespace:fleet-project.svc.id.goog:https://container.googleapis.com/v1/projects/fleet-project/locations/europe-west1/clusters/fleet",
            ) => issued_for(
                &token,
                &expected_ns,
                "gke-decrypter",
                "fleet-project.svc.id.goog",
            ),
            Some(
                audience @
                "//iam.googleapis.com/projects/123/locations/global/workloadIdentityPools/fleet/providers/k8s",
            ) => issued_for(&token, &expected_ns, "pool-decrypter", audience),
            _ => false,
        }
    });
    let file = gcp_file(&data_key);
    let keys_for = |account: Arc<KubeServiceAccount>| {
        let mut keys = Keys::new();
        keys.set_google_endpoints(loopback_google(&server));
        keys.use_service_account(account);
        keys.add_environment_endpoints(vars(&[("SOPS_GCP_KMS_ENDPOINT", server.url.clone())]));
        keys
    };
    let gke = annotated_service_account(
        &cluster,
        "gke-decrypter",
        json!({"iam.gke.io/gcp-service-account": "sops@fleet-project.iam.gserviceaccount.com"}),
    )
    .await;
    let opened = decrypt_off_the_runtime(file.clone(), keys_for(gke)).await;
    assert!(opened.unwrap().starts_with("foo: bar"));
    let pool = annotated_service_account(
        &cluster,
        "pool-decrypter",
        json!({"gcp.auth.fluxcd.io/workload-identity-provider":
            "projects/123/locations/global/workloadIdentityPools/fleet/providers/k8s"}),
    )
    .await;
    let opened = decrypt_off_the_runtime(file.clone(), keys_for(pool)).await;
    assert!(opened.unwrap().starts_with("foo: bar"));
    // Never the controller's own identity: the metadata server's token is not asked for.
    assert!(
        server
            .requests()
            .iter()
            .all(|r| !r.path.contains("service-accounts/default/token"))
    );
    // A malformed annotation, in Flux's words.
    let wrong = annotated_service_account(
        &cluster,
        "wrong-decrypter",
        json!({"iam.gke.io/gcp-service-account": "sops@example.com"}),
    )
    .await;
    let error = decrypt_off_the_runtime(file, keys_for(wrong))
        .await
        .unwrap_err();
    assert!(
        error.contains(&format!("failed to get provider identity from service account '{ns}/wrong-decrypter' annotations: invalid iam.gke.io/gcp-service-account annotation: 'sops@example.com'")),
        "{error}"
    );
}

/// A Kustomization's ServiceAccount on AKS: its annotated tenant and client, a token for
/// `api://AzureADTokenExchange` as the client assertion.
#[tokio::test]
async fn azure_keys_open_as_a_service_accounts_federated_identity() {
    let cluster = TestCluster::start().await;
    let ns = cluster.namespace.clone();
    let (_gpg, data_key) = gpg_and_data_key();
    let expected_ns = ns.clone();
    let server = azure_endpoints(data_key.clone(), move |assertion| {
        issued_for(
            assertion,
            &expected_ns,
            "kv-decrypter",
            "api://AzureADTokenExchange",
        )
    });
    let file = azure_file(&server, &data_key);
    let keys_for = |account: Arc<KubeServiceAccount>| {
        let mut keys = Keys::new();
        keys.trust_azure_vault_origin(&server.url);
        keys.use_service_account(account);
        keys.add_environment_endpoints(vars(&[(
            "AZURE_AUTHORITY_HOST",
            format!("{}/", server.url),
        )]));
        keys
    };
    let account = annotated_service_account(
        &cluster,
        "kv-decrypter",
        json!({"azure.workload.identity/tenant-id": "tenant-1",
            "azure.workload.identity/client-id": "client-1"}),
    )
    .await;
    let opened = decrypt_off_the_runtime(file.clone(), keys_for(account)).await;
    assert!(opened.unwrap().starts_with("foo: bar"));
    let unannotated = annotated_service_account(&cluster, "plain", json!({})).await;
    let error = decrypt_off_the_runtime(file.clone(), keys_for(unannotated))
        .await
        .unwrap_err();
    assert!(
        error.contains("azure tenant ID is not set in the service account annotation azure.workload.identity/tenant-id"),
        "{error}"
    );
    // A ServiceAccount that does not exist, in Flux's words.
    let missing = Arc::new(KubeServiceAccount::new(
        cluster.client.clone(),
        &ns,
        "absent",
    ));
    let error = decrypt_off_the_runtime(file, keys_for(missing))
        .await
        .unwrap_err();
    assert!(
        error.contains(&format!(
            "failed to get service account '{ns}/absent': serviceaccounts \"absent\" not found"
        )),
        "{error}"
    );
}

/// Flux's scenario end to end, on the API server the suite runs on: a Kustomization names a
/// ServiceAccount annotated with an IAM role; the controller (gate on, no AWS credentials of
/// its own) asks Kubernetes for a token for `sts.amazonaws.com`, assumes the role with it in
/// the key's region under Flux's session name, and decrypts with moto's KMS.
#[cfg(feature = "aws-kms")]
#[tokio::test]
async fn a_kustomization_decrypts_as_its_service_accounts_aws_role() {
    use crate::support::controller::{Harness, ready_message};
    let fixtures = crate::support::repo_root()
        .join("tests/fixtures/sops/flux/internal/controller/testdata/sops");
    let gpg = crate::support::key_services::Gpg::new();
    gpg.import(&fixtures.join("keys/pgp.asc"));
    let encrypted = std::fs::read_to_string(fixtures.join("algorithms/pgp.yaml")).unwrap();
    let mut object: Value = kustomize_controller::yaml::parse_single(
        &encrypted,
        kustomize_controller::yaml::Schema::Kyaml,
    )
    .map(Value::from)
    .unwrap();
    let data_key = gpg.decrypt(object["sops"]["pgp"][0]["enc"].as_str().unwrap());
    let moto = crate::support::key_services::moto();
    let (arn, blob) = {
        let (data_key, url) = (data_key.clone(), moto.url.clone());
        // The blocking HTTP client of the KMS setup calls runs off the runtime.
        tokio::task::spawn_blocking(move || aws_kms_file(&data_key, &url))
            .await
            .unwrap()
    };
    let region = arn.split(':').nth(3).unwrap().to_string();
    object["sops"]["pgp"] = json!([]);
    object["sops"]["kms"] = json!([{"arn": arn, "role": "", "context": {},
        "created_at": "2026-11-26T00:00:00Z", "enc": blob, "aws_profile": ""}]);

    let role = "arn:aws:iam::123456789012:role/flux-sops";
    let namespace = Arc::new(std::sync::Mutex::new(String::new()));
    let sts = {
        let (namespace, region) = (namespace.clone(), region.clone());
        MockServer::start_text(move |request: &Request| {
            let ns = namespace.lock().unwrap().clone();
            let form = |name| request.form_field(name);
            let fine = request.method == "POST"
                && form("Action").as_deref() == Some("AssumeRoleWithWebIdentity")
                && form("Version").as_deref() == Some("2011-06-15")
                && form("RoleArn").as_deref() == Some(role)
                && form("RoleSessionName") == Some(format!("sops.{ns}.{region}.fluxcd.io"))
                && form("WebIdentityToken")
                    .is_some_and(|token| issued_for(&token, &ns, "sops", "sts.amazonaws.com"))
                && request.header("authorization").is_none();
            if fine {
                (200, "<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult><Credentials>\
                    <AccessKeyId>ASIAROLE</AccessKeyId><SecretAccessKey>role-secret</SecretAccessKey>\
                    <SessionToken>role-session</SessionToken><Expiration>2099-01-01T00:00:00Z</Expiration>\
                    </Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>".into())
            } else {
                (403, "<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code>\
                    <Message>Not authorized to perform sts:AssumeRoleWithWebIdentity</Message></Error></ErrorResponse>".into())
            }
        })
    };
    let environment = vars(&[
        ("AWS_ENDPOINT_URL_STS", sts.url.clone()),
        ("AWS_ENDPOINT_URL_KMS", moto.url.clone()),
        ("AWS_EC2_METADATA_DISABLED", "true".into()),
    ]);
    let harness = Harness::start_with(|options| {
        options.reconcile.object_level_workload_identity = true;
        options.reconcile.environment = Arc::new(environment);
    })
    .await;
    let ns = harness.cluster.namespace.clone();
    *namespace.lock().unwrap() = ns.clone();
    annotated_service_account(
        &harness.cluster,
        "sops",
        json!({"eks.amazonaws.com/role-arn": role}),
    )
    .await;
    let artifact = harness.publish_files(
        "identity",
        "main@sha1:a0a5",
        &[
            ("secret.yaml", &object.to_string()),
            ("kustomization.yaml", "resources:\n- secret.yaml\n"),
        ],
    );
    harness.source("repo", &artifact).await;
    harness
        .create_kustomization(
            "identity",
            json!({"decryption": {"provider": "sops", "serviceAccountName": "sops"}}),
        )
        .await;
    let ready = harness
        .wait_ready("identity", "True", "ReconciliationSucceeded")
        .await;
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(harness.cluster.client.clone(), &ns);
    let secret = secrets.get("pgp").await.unwrap();
    assert!(
        secret.data.unwrap_or_default().contains_key("key"),
        "{}",
        ready_message(&ready)
    );
    assert_eq!(sts.requests().len(), 1);
    // The next reconcile decrypts with the credentials the token cache kept: STS is not
    // asked again, and the cache says so in Flux's metrics.
    harness.request_reconcile("identity", "again").await;
    harness.wait_handled("identity", "again").await;
    assert_eq!(sts.requests().len(), 1, "the role's credentials were kept");
    let scrape = harness.metrics.encode();
    for series in [
        format!(
            "gotk_token_cache_events_total{{event_type=\"cache_miss\",kind=\"Kustomization\",name=\"identity\",namespace=\"{ns}\",operation=\"decrypt_with_aws\"}} 1"
        ),
        format!(
            "gotk_token_cache_events_total{{event_type=\"cache_hit\",kind=\"Kustomization\",name=\"identity\",namespace=\"{ns}\",operation=\"decrypt_with_aws\"}} 1"
        ),
        "gotk_token_cached_items 1".to_string(),
    ] {
        assert!(scrape.contains(&series), "{series} in:\n{scrape}");
    }
}

/// Azure client certificates (the controller's `AZURE_CLIENT_CERTIFICATE_PATH`, or the
/// decryption Secret's `clientCertificate`): the client assertion is an RS256 JWT for the token
/// endpoint, with the certificate's SHA-1 thumbprint, signed with its key — which the loopback
/// Entra ID checks against the certificate's public key.
#[cfg(feature = "azure-certificates")]
#[test]
fn azure_client_certificates_sign_their_client_assertion() {
    use rsa::pkcs1v15::{Signature, VerifyingKey};
    use rsa::pkcs8::DecodePrivateKey;
    use rsa::signature::Verifier;
    use sha1::Digest as _;
    let (_gpg, data_key) = gpg_and_data_key();
    let account: Value = serde_json::from_slice(
        &std::fs::read(
            crate::support::repo_root()
                .join("tests/fixtures/sops/key-services/gcp-service-account.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let key_pem = account["private_key"].as_str().unwrap().to_string();
    let key_pair = rcgen::KeyPair::from_pem(&key_pem).unwrap();
    let certificate = rcgen::CertificateParams::new(vec!["kc-test-client".to_string()])
        .unwrap()
        .self_signed(&key_pair)
        .unwrap();
    let thumbprint = URL_SAFE_NO_PAD.encode(sha1::Sha1::digest(certificate.der()));
    let verifying = VerifyingKey::<sha2::Sha256>::new(
        rsa::RsaPrivateKey::from_pkcs8_pem(&key_pem)
            .unwrap()
            .to_public_key(),
    );
    let origin = Arc::new(std::sync::Mutex::new(String::new()));
    let expected_origin = origin.clone();
    let server = azure_endpoints(data_key.clone(), move |assertion| {
        let parts: Vec<&str> = assertion.split('.').collect();
        let decode = |part: &str| -> Value {
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part).unwrap_or_default())
                .unwrap_or(Value::Null)
        };
        let (header, claims) = (decode(parts[0]), decode(parts[1]));
        let signature = URL_SAFE_NO_PAD
            .decode(parts.get(2).copied().unwrap_or_default())
            .ok()
            .and_then(|bytes| Signature::try_from(bytes.as_slice()).ok());
        let signed = format!("{}.{}", parts[0], parts[1]);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        signature.is_some_and(|s| verifying.verify(signed.as_bytes(), &s).is_ok())
            && header["alg"] == "RS256"
            && header["x5t"] == thumbprint.as_str()
            && claims["aud"]
                == format!(
                    "{}/tenant-1/oauth2/v2.0/token",
                    expected_origin.lock().unwrap()
                )
            && claims["iss"] == "client-1"
            && claims["sub"] == "client-1"
            && claims["exp"].as_u64().is_some_and(|exp| exp > now)
    });
    *origin.lock().unwrap() = server.url.clone();
    let file = azure_file(&server, &data_key);
    let pem = format!("{}{}", certificate.pem(), key_pem);
    // The controller's own certificate.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("client.pem");
    std::fs::write(&path, &pem).unwrap();
    let mut keys = Keys::new();
    keys.trust_azure_vault_origin(&server.url);
    keys.add_environment(vars(&[
        ("AZURE_CLIENT_ID", "client-1".into()),
        ("AZURE_TENANT_ID", "tenant-1".into()),
        ("AZURE_CLIENT_CERTIFICATE_PATH", path.display().to_string()),
        ("AZURE_AUTHORITY_HOST", format!("{}/", server.url)),
    ]));
    assert!(
        decrypt_sealed(&file, &keys)
            .unwrap()
            .starts_with("foo: bar")
    );
    // The decryption Secret's certificate.
    let entry = json!({"tenantId": "tenant-1", "clientId": "client-1", "clientCertificate": pem,
        "authorityHost": format!("{}/", server.url)});
    let mut keys = Keys::new();
    keys.trust_azure_vault_origin(&server.url);
    keys.add_entry("sops.azure-kv", entry.to_string().as_bytes())
        .unwrap();
    assert!(
        decrypt_sealed(&file, &keys)
            .unwrap()
            .starts_with("foo: bar")
    );
}
