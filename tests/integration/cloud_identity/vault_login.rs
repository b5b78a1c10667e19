//! OpenBao/Vault login as a ServiceAccount (`--sops-vault-configmap`), as Flux documents it:
//! a Kubernetes token for the decryption's ServiceAccount (else the controller's own), with
//! the Vault address as audience, is exchanged at the login path the operator's ConfigMap
//! lists for that address, as the role `{namespace}_{name}`. The Vault is `bao server -dev`
//! with a JWT auth mount that checks tokens against the API server's own published keys
//! (`/openid/v1/jwks`, in-process or real), and roles bound to one subject and audience each.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::support::controller::{Harness, ready_message};
use crate::support::key_services::{Gpg, MockServer, openbao, transit_encrypt, vault_call};

const CONFIG_MAP: &str = "sops-vault-config";

fn testdata() -> PathBuf {
    crate::support::repo_root().join("tests/fixtures/sops/flux/internal/controller/testdata/sops")
}

/// Flux's OpenPGP test Secret's data key, which GnuPG opens with Flux's test key.
fn data_key() -> Vec<u8> {
    let gpg = Gpg::new();
    gpg.import(&testdata().join("keys/pgp.asc"));
    gpg.decrypt(pgp_object()["sops"]["pgp"][0]["enc"].as_str().unwrap())
}

fn pgp_object() -> Value {
    let text = std::fs::read_to_string(testdata().join("algorithms/pgp.yaml")).unwrap();
    let parsed =
        kustomize_controller::yaml::parse_single(&text, kustomize_controller::yaml::Schema::Kyaml);
    Value::from(parsed.unwrap())
}

/// Flux's OpenPGP test Secret as `name`, its data key wrapped by the transit key
/// `sops/vault` as a SOPS file naming the Vault at `address` says it (`enc`).
fn vault_secret(name: &str, address: &str, enc: &str) -> String {
    let mut object = pgp_object();
    object["metadata"]["name"] = json!(name);
    object["sops"]["pgp"] = json!([]);
    object["sops"]["hc_vault"] = json!([{"vault_address": address, "engine_path": "sops",
        "key_name": "vault", "created_at": "2026-11-28T00:00:00Z", "enc": enc}]);
    object.to_string()
}

/// A JWT auth mount at `auth/jwt` trusting the keys `jwks_url` serves, a policy that may
/// decrypt with `sops/vault`, and a role `{ns}_{name}` for each account, bound to its
/// subject and to the Vault's address as audience.
fn configure_login(bao_url: &str, jwks_url: &str, ns: &str, accounts: &[&str]) {
    vault_call(bao_url, "sys/auth/jwt", json!({"type": "jwt"}));
    vault_call(bao_url, "auth/jwt/config", json!({"jwks_url": jwks_url}));
    vault_call(
        bao_url,
        "sys/policies/acl/sops",
        json!({"policy": "path \"sops/decrypt/vault\" { capabilities = [\"update\"] }"}),
    );
    for account in accounts {
        vault_call(
            bao_url,
            &format!("auth/jwt/role/{ns}_{account}"),
            json!({"role_type": "jwt", "user_claim": "sub", "bound_audiences": [bao_url],
                "bound_subject": format!("system:serviceaccount:{ns}:{account}"),
                "token_policies": ["sops"], "token_ttl": "5m"}),
        );
    }
}

/// Publishes `secret` as the source `name` and a Kustomization `name` decrypting it with
/// `decryption`.
async fn decrypt(harness: &Harness, name: &str, secret: &str, decryption: Value) {
    let artifact = harness.publish_files(
        name,
        "main@sha1:7a17",
        &[
            ("secret.yaml", secret),
            ("kustomization.yaml", "resources:\n- secret.yaml\n"),
        ],
    );
    harness.source(name, &artifact).await;
    harness
        .create_kustomization(
            name,
            json!({"sourceRef": {"kind": "GitRepository", "name": name},
                "decryption": decryption}),
        )
        .await;
}

async fn secret_value(harness: &Harness, name: &str) -> Option<String> {
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(harness.cluster.client.clone(), &harness.cluster.namespace);
    let secret = secrets.get_opt(name).await.unwrap()?;
    let data = secret.data.unwrap_or_default();
    data.get("key")
        .map(|value| String::from_utf8_lossy(&value.0).into_owned())
}

/// A cluster, `bao server -dev` logging in the cluster's ServiceAccounts `sops` and
/// `kustomize-controller` (`stranger` exists but has no role), the transit key `sops/vault`
/// wrapping Flux's test data key (`enc`), the ConfigMap listing the server, and a controller
/// (gate `ObjectLevelWorkloadIdentity` on, `--sops-vault-configmap`) whose mounted token is
/// `kustomize-controller`'s.
struct Logins {
    harness: Harness,
    bao_url: String,
    enc: String,
    _bao: crate::support::key_services::Server,
    _jwks: MockServer,
    _token_dir: tempfile::TempDir,
}

impl Logins {
    async fn start() -> Logins {
        let mut harness = Harness::start_without_controller().await;
        let cluster = &harness.cluster;
        let ns = cluster.namespace.clone();
        for account in ["sops", "kustomize-controller", "stranger"] {
            super::annotated_service_account(cluster, account, json!({})).await;
        }
        // The controller's own token, as Kubernetes mounts it in its pod.
        let accounts: kube::Api<k8s_openapi::api::core::v1::ServiceAccount> =
            kube::Api::namespaced(cluster.client.clone(), &ns);
        let mounted = accounts
            .create_token_request(
                "kustomize-controller",
                &Default::default(),
                &Default::default(),
            )
            .await
            .unwrap();
        let token_dir = tempfile::tempdir().unwrap();
        let token_file = token_dir.path().join("token");
        std::fs::write(&token_file, mounted.status.unwrap().token).unwrap();

        let keys = crate::support::cluster::published_service_account_keys(&cluster.client).await;
        let jwks = MockServer::start_text(move |_| (200, keys.clone()));
        let bao = openbao();
        let bao_url = bao.url.clone();
        let enc = {
            let (bao_url, jwks_url, ns) = (bao_url.clone(), jwks.url.clone(), ns.clone());
            // GnuPG and the blocking HTTP client stay off the async runtime.
            tokio::task::spawn_blocking(move || {
                configure_login(&bao_url, &jwks_url, &ns, &["sops", "kustomize-controller"]);
                transit_encrypt(&bao_url, "sops", "vault", &data_key())
            })
            .await
            .unwrap()
        };
        list_in_config_map(cluster, CONFIG_MAP, &bao_url).await;
        harness
            .restart_with(|options| vault_login_options(options, &ns, CONFIG_MAP, token_file))
            .await;
        Logins {
            harness,
            bao_url,
            enc,
            _bao: bao,
            _jwks: jwks,
            _token_dir: token_dir,
        }
    }
}

/// The ConfigMap `name` in the suite's namespace listing `address` with `auth/jwt/login`.
async fn list_in_config_map(
    cluster: &crate::support::cluster::TestCluster,
    name: &str,
    address: &str,
) {
    let instances = format!("instances:\n- address: {address}\n  loginPath: auth/jwt/login\n");
    cluster
        .apply(&json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": cluster.namespace},
            "data": {"config.yaml": instances}}))
        .await;
}

/// The controller as a Flux user runs it for Vault login: the gate on, the suite's
/// namespace as its own, `--sops-vault-configmap=config_map`, its mounted token at
/// `token_file`.
fn vault_login_options(
    options: &mut kustomize_controller::controller::RunOptions,
    namespace: &str,
    config_map: &str,
    token_file: PathBuf,
) {
    options.reconcile.object_level_workload_identity = true;
    options.reconcile.runtime_namespace = namespace.to_string();
    options.reconcile.sops_vault_config_map = Some(config_map.to_string());
    options.reconcile.controller_token_file = token_file;
}

/// Vault keys open with the token a ServiceAccount's Kubernetes token is exchanged for:
/// the Kustomization's `decryption.serviceAccountName` (gate `ObjectLevelWorkloadIdentity`),
/// else the controller's own account (its mounted token names it). The Kubernetes token is
/// kept in the token cache under Flux's operation.
#[tokio::test]
async fn vault_keys_open_with_the_token_a_service_account_logs_in_for() {
    // Kept whole: the servers it holds stop when it is dropped.
    let logins = Logins::start().await;
    let (harness, bao_url, enc) = (&logins.harness, &logins.bao_url, &logins.enc);
    let ns = harness.cluster.namespace.clone();

    // As the Kustomization's ServiceAccount.
    let tenant = vault_secret("tenant", bao_url, enc);
    let as_tenant = json!({"provider": "sops", "serviceAccountName": "sops"});
    opens(harness, "tenant", &tenant, as_tenant).await;
    let scrape = harness.metrics.encode();
    let miss = format!(
        "gotk_token_cache_events_total{{event_type=\"cache_miss\",kind=\"Kustomization\",name=\"tenant\",namespace=\"{ns}\",operation=\"decrypt_with_vault\"}} 1"
    );
    assert!(scrape.contains(&miss), "{miss} in:\n{scrape}");

    // As the controller's own ServiceAccount.
    let own = vault_secret("own", bao_url, enc);
    opens(harness, "own", &own, json!({"provider": "sops"})).await;
}

/// An account Vault has no role for fails with Vault's words; an address the ConfigMap does
/// not list is sent no token; a `sops.vault-token` in the decryption Secret goes before any
/// login.
#[tokio::test]
async fn vault_login_is_refused_unlisted_or_passed_over_for_the_secrets_token() {
    // Kept whole: the servers it holds stop when it is dropped.
    let logins = Logins::start().await;
    let (harness, bao_url, enc) = (&logins.harness, &logins.bao_url, &logins.enc);
    let ns = harness.cluster.namespace.clone();

    // An account Vault has no role for.
    let refused = vault_secret("refused", bao_url, enc);
    let as_stranger = json!({"provider": "sops", "serviceAccountName": "stranger"});
    let message = fails(harness, "refused", &refused, as_stranger).await;
    assert!(
        message.starts_with("decryption failed for 'Secret.v1.[noGrp]/refused': ")
            && message.contains(&format!(
                "failed to authenticate with Vault '{bao_url}' at login path 'auth/jwt/login' as role '{ns}_stranger': "
            ))
            && message.contains("could not be found"),
        "{message}"
    );
    assert_eq!(secret_value(harness, "refused").await, None);

    // An address the ConfigMap does not list: the same server, named otherwise.
    let unlisted_address = bao_url.replace("127.0.0.1", "localhost");
    let unlisted = vault_secret("unlisted", &unlisted_address, enc);
    let as_tenant = json!({"provider": "sops", "serviceAccountName": "sops"});
    let message = fails(harness, "unlisted", &unlisted, as_tenant).await;
    assert!(
        message.contains(&format!(
            "no Vault login path configured for address '{unlisted_address}' in ConfigMap '{ns}/{CONFIG_MAP}'"
        )),
        "{message}"
    );

    // The decryption Secret's token goes first: the account, which Vault has no role for,
    // is not logged in as.
    harness
        .cluster
        .apply(&json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "static-token", "namespace": ns},
            "stringData": {"sops.vault-token": "root"}}))
        .await;
    let with_token = vault_secret("with-token", bao_url, enc);
    let decryption = json!({"provider": "sops", "serviceAccountName": "stranger",
        "secretRef": {"name": "static-token"}});
    opens(harness, "with-token", &with_token, decryption).await;
}

/// Publishes `secret` and decrypts it as the Kustomization `name` with `decryption`; it is
/// applied with its plaintext.
async fn opens(harness: &Harness, name: &str, secret: &str, decryption: Value) {
    decrypt(harness, name, secret, decryption).await;
    let ready = harness
        .wait_ready(name, "True", "ReconciliationSucceeded")
        .await;
    assert_eq!(
        secret_value(harness, name).await.as_deref(),
        Some("value"),
        "{}",
        ready_message(&ready)
    );
}

/// Publishes `secret` and decrypts it as the Kustomization `name` with `decryption`; Ready's
/// message once its build failed.
async fn fails(harness: &Harness, name: &str, secret: &str, decryption: Value) -> String {
    decrypt(harness, name, secret, decryption).await;
    let failed = harness.wait_ready(name, "False", "BuildFailed").await;
    ready_message(&failed)
}

/// Restarts the controller for Vault login with `config_map`, the controller's token at
/// `token_file` and `default_account` as `--default-decryption-service-account`.
async fn restart(
    harness: &mut Harness,
    config_map: &str,
    token_file: &std::path::Path,
    default_account: Option<&str>,
) {
    let namespace = harness.cluster.namespace.clone();
    harness
        .restart_with(|options| {
            vault_login_options(options, &namespace, config_map, token_file.to_path_buf());
            options.reconcile.default_decryption_service_account = default_account.map(Into::into);
        })
        .await;
}

/// What stops a login before anything is sent to Vault, in Flux's words: a ServiceAccount
/// that does not exist (named, or `--default-decryption-service-account`), a controller
/// without a mounted token, a ConfigMap that is not there.
/// The listed address is a closed port: nothing reaches it.
#[tokio::test]
async fn vault_login_failures_before_vault_is_asked_are_named_as_flux_names_them() {
    let mut harness = Harness::start_without_controller().await;
    let ns = harness.cluster.namespace.clone();
    let address = "http://127.0.0.1:9";
    list_in_config_map(&harness.cluster, CONFIG_MAP, address).await;
    let missing_token = PathBuf::from("/nonexistent/serviceaccount/token");
    restart(&mut harness, CONFIG_MAP, &missing_token, None).await;
    let secret = |name: &str| vault_secret(name, address, "vault:v1:AAAA");
    let token_failed = "failed to issue Kubernetes token for Vault authentication";

    let as_nobody = json!({"provider": "sops", "serviceAccountName": "nobody"});
    let message = fails(&harness, "nobody", &secret("nobody"), as_nobody.clone()).await;
    let expected = format!(
        "{token_failed}: failed to get service account '{ns}/nobody': serviceaccounts \"nobody\" not found"
    );
    assert!(message.contains(&expected), "{message}");

    let as_controller = json!({"provider": "sops"});
    let message = fails(&harness, "own", &secret("own"), as_controller.clone()).await;
    let expected = format!(
        "{token_failed}: failed to create provider access token for the controller: failed to read service account token file {}: ",
        missing_token.display()
    );
    assert!(message.contains(&expected), "{message}");

    restart(&mut harness, "absent", &missing_token, None).await;
    let message = fails(&harness, "unconfigured", &secret("unconfigured"), as_nobody).await;
    let expected =
        format!("failed to get Vault ConfigMap '{ns}/absent': configmaps \"absent\" not found");
    assert!(message.contains(&expected), "{message}");

    // Without an account of its own, a Kustomization logs in as
    // --default-decryption-service-account, not as the controller.
    restart(&mut harness, CONFIG_MAP, &missing_token, Some("fallback")).await;
    let message = fails(&harness, "defaulted", &secret("defaulted"), as_controller).await;
    let expected = format!("{token_failed}: failed to get service account '{ns}/fallback': ");
    assert!(message.contains(&expected), "{message}");
}

/// A ConfigMap's instances, as the controller would read them.
struct Listed(kustomize_controller::auth::vault::LoginPaths);

impl kustomize_controller::auth::vault::VaultLoginConfig for Listed {
    fn config_map(&self) -> String {
        "flux-system/sops-vault-config".into()
    }

    fn login_paths(
        &self,
    ) -> Result<kustomize_controller::auth::vault::LoginPaths, kustomize_controller::auth::AuthError>
    {
        Ok(self.0.clone())
    }
}

/// The order of Flux's documentation: the login goes before the controller's `VAULT_TOKEN`
/// at a listed address (so an account without a role fails even though the token would
/// open the key), and the token still opens what the ConfigMap does not list, at its own
/// `VAULT_ADDR` only.
#[tokio::test]
async fn the_login_goes_before_the_controllers_vault_token_at_listed_addresses_only() {
    use kustomize_controller::auth::vault::{LoginIdentity, LoginPaths, VaultLogin};
    use std::collections::BTreeMap;
    use std::sync::Arc;
    let cluster = crate::support::cluster::TestCluster::start().await;
    let ns = cluster.namespace.clone();
    let stranger = super::annotated_service_account(&cluster, "stranger", json!({})).await;
    let keys = crate::support::cluster::published_service_account_keys(&cluster.client).await;
    let jwks = MockServer::start_text(move |_| (200, keys.clone()));
    let bao = openbao();
    let bao_url = bao.url.clone();
    let enc = {
        let (bao_url, jwks_url, ns) = (bao_url.clone(), jwks.url.clone(), ns.clone());
        tokio::task::spawn_blocking(move || {
            configure_login(&bao_url, &jwks_url, &ns, &[]);
            transit_encrypt(&bao_url, "sops", "vault", &data_key())
        })
        .await
        .unwrap()
    };
    // Under its own name, so that its MAC, which this direct decryption checks, holds.
    let name = pgp_object()["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let file = vault_secret(&name, &bao_url, &enc);
    let listing = |addresses: &[&str]| {
        let text: String = addresses
            .iter()
            .map(|address| format!("- address: {address}\n  loginPath: auth/jwt/login\n"))
            .collect();
        let data = BTreeMap::from([("config.yaml".to_string(), format!("instances:\n{text}"))]);
        LoginPaths::from_config_map("flux-system/sops-vault-config", &data).unwrap()
    };
    let keys_with = |listed: LoginPaths, vault_addr: &str| {
        let mut keys = kustomize_controller::sops::Keys::new();
        keys.use_vault_login(VaultLogin {
            config: Arc::new(Listed(listed)),
            identity: LoginIdentity::ServiceAccount(stranger.clone()),
        });
        keys.add_environment(super::vars(&[
            ("VAULT_TOKEN", "root".into()),
            ("VAULT_ADDR", vault_addr.into()),
        ]));
        keys
    };

    let error =
        super::decrypt_off_the_runtime(file.clone(), keys_with(listing(&[&bao_url]), &bao_url))
            .await
            .unwrap_err();
    assert!(
        error.contains(&format!("as role '{ns}_stranger'")) && error.contains("could not be found"),
        "{error}"
    );
    let opened = super::decrypt_off_the_runtime(file.clone(), keys_with(listing(&[]), &bao_url))
        .await
        .unwrap();
    assert!(opened.contains("key: value"), "{opened}");
    let error = super::decrypt_off_the_runtime(
        file,
        keys_with(listing(&[]), "https://vault.elsewhere.example:8200"),
    )
    .await
    .unwrap_err();
    assert!(
        error.contains(&format!(
            "no Vault login path configured for address '{bao_url}' in ConfigMap 'flux-system/sops-vault-config'"
        )),
        "{error}"
    );
}
