//! OpenBao/Vault login as a Kubernetes ServiceAccount (`--sops-vault-configmap`), as Flux's
//! decryptor does it: where a decryption has no static Vault token (`sops.vault-token`), a
//! token Kubernetes issues for the decryption's ServiceAccount (else the controller's own),
//! with the Vault address as its audience, is written to the login path the operator's
//! ConfigMap gives for that address, as the role `{namespace}_{name}` read from the token's
//! own subject. The ConfigMap is also the allowlist: an address it does not list is never
//! sent a token.
//!
//! This module holds the decisions (the ConfigMap's `config.yaml`, the role a token is for)
//! and the interface through which the controller hands over its ConfigMap; the login itself
//! is a call of the Vault key source ([`crate::sops`]), over the key services' HTTP client.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{AuthError, ServiceAccountTokens, unverified_claims};

/// The ConfigMap entry holding the instances.
pub const CONFIG_KEY: &str = "config.yaml";

/// The Vault addresses the operator trusts, and the login path of each.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoginPaths(BTreeMap<String, String>);

impl LoginPaths {
    /// Reads the data of the ConfigMap `config_map` (`namespace/name`, as errors name it):
    /// its `config.yaml` lists `instances`, each an `address` and a `loginPath`. Fields it
    /// does not know are ignored, as Flux ignores them.
    pub fn from_config_map(
        config_map: &str,
        data: &BTreeMap<String, String>,
    ) -> Result<LoginPaths, AuthError> {
        let text = data.get(CONFIG_KEY).ok_or_else(|| {
            AuthError::Invalid(format!(
                "Vault ConfigMap '{config_map}' is missing the '{CONFIG_KEY}' key"
            ))
        })?;
        let unparsable = |cause: String| {
            AuthError::Invalid(format!(
                "failed to parse '{CONFIG_KEY}' in Vault ConfigMap '{config_map}': {cause}"
            ))
        };
        let config = crate::yaml::parse_single(text, crate::yaml::Schema::Kyaml)
            .map_err(|e| unparsable(e.to_string()))?;
        let instances = match config.get("instances") {
            None | Some(crate::value::Value::Null) => return Ok(LoginPaths::default()),
            Some(instances) => instances
                .as_array()
                .ok_or_else(|| unparsable("`instances` is not a list".into()))?,
        };
        let mut paths = BTreeMap::new();
        for (index, instance) in instances.iter().enumerate() {
            let field = |name: &str| match instance.get(name) {
                None | Some(crate::value::Value::Null) => Ok(String::new()),
                Some(value) => value.as_str().map(str::to_string).ok_or_else(|| {
                    unparsable(format!("`instances[{index}].{name}` is not a string"))
                }),
            };
            if instance.as_object().is_none() {
                return Err(unparsable(format!("`instances[{index}]` is not a mapping")));
            }
            let login_path = field("loginPath")?;
            // A URL would fold these away and log in somewhere the operator did not write.
            if !login_path.is_empty()
                && login_path
                    .trim_matches('/')
                    .split('/')
                    .any(|segment| matches!(segment, "" | "." | ".."))
            {
                return Err(unparsable(format!(
                    "`instances[{index}].loginPath` '{login_path}' has an empty, '.' or '..' segment"
                )));
            }
            paths.insert(field("address")?, login_path);
        }
        Ok(LoginPaths(paths))
    }

    /// The login path for a Vault address as a SOPS file names it (compared as written);
    /// `None` when the address is not listed or its path is empty.
    pub fn login_path(&self, address: &str) -> Option<&str> {
        self.0
            .get(address)
            .map(String::as_str)
            .filter(|path| !path.is_empty())
    }
}

/// The Vault role a Kubernetes ServiceAccount token logs in as: `{namespace}_{name}` of the
/// account its subject (`system:serviceaccount:<namespace>:<name>`) names.
pub fn role_from_token(token: &str) -> Result<String, AuthError> {
    let derive = |cause: String| {
        AuthError::Invalid(format!(
            "failed to derive Vault role for authentication: {cause}"
        ))
    };
    let claims = unverified_claims(token).map_err(derive)?;
    let subject = claims
        .get("sub")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default();
    subject
        .strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.split_once(':'))
        .filter(|(namespace, name)| !namespace.is_empty() && !name.is_empty())
        .map(|(namespace, name)| format!("{namespace}_{name}"))
        .ok_or_else(|| derive(format!("unexpected token subject '{subject}'")))
}

/// How long a Kubernetes token has left, from its `exp` (seconds since the epoch), as the
/// token cache keeps it; `None` when it has no expiry or has expired.
pub fn token_lifetime(token: &str, now: std::time::SystemTime) -> Option<std::time::Duration> {
    let expires = unverified_claims(token).ok()?.get("exp")?.as_u64()?;
    let now = now.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs();
    expires
        .checked_sub(now)
        .filter(|left| *left > 0)
        .map(std::time::Duration::from_secs)
}

/// The operator's ConfigMap, read when a Vault key first needs it (a decryption that opens
/// no Vault key never reads it).
pub trait VaultLoginConfig: Send + Sync {
    /// `namespace/name`, as errors name it.
    fn config_map(&self) -> String;
    /// The instances it lists, in Flux's words when it cannot be read
    /// (`failed to get Vault ConfigMap '<ns>/<name>': …`).
    fn login_paths(&self) -> Result<LoginPaths, AuthError>;
}

/// Whose Kubernetes token is exchanged for a Vault token.
#[derive(Clone)]
pub enum LoginIdentity {
    /// The decryption's ServiceAccount (object-level workload identity).
    ServiceAccount(Arc<dyn ServiceAccountTokens>),
    /// The controller's own ServiceAccount (controller-level workload identity).
    Controller(Arc<dyn ServiceAccountTokens>),
}

impl LoginIdentity {
    /// The token cache key of the identity's token for `address`, as fluxcd/pkg composes it
    /// (the account's parts only for object-level identity).
    pub fn cache_key(&self, address: &str) -> String {
        match self {
            LoginIdentity::ServiceAccount(account) => {
                let (name, namespace) = account.name_and_namespace();
                super::cache::key(&[
                    ("provider", "generic"),
                    ("audiences", address),
                    (
                        "providerIdentity",
                        &format!("system:serviceaccount:{namespace}:{name}"),
                    ),
                    ("serviceAccountName", &name),
                    ("serviceAccountNamespace", &namespace),
                ])
            }
            LoginIdentity::Controller(_) => {
                super::cache::key(&[("provider", "generic"), ("audiences", address)])
            }
        }
    }

    /// A Kubernetes token with the Vault address as its audience, in fluxcd/pkg's words
    /// when it cannot be had: a ServiceAccount is read first, then asked a token for.
    pub fn token(&self, address: &str) -> Result<String, AuthError> {
        let audiences = [address.to_string()];
        match self {
            LoginIdentity::ServiceAccount(account) => {
                account.annotations()?;
                Ok(account.token(&audiences)?)
            }
            LoginIdentity::Controller(account) => account.token(&audiences).map_err(|e| {
                AuthError::from(e)
                    .during("failed to create provider access token for the controller")
            }),
        }
    }
}

/// What a decryption logs in to Vault with: the operator's ConfigMap and whose tokens are
/// exchanged.
#[derive(Clone)]
pub struct VaultLogin {
    pub config: Arc<dyn VaultLoginConfig>,
    pub identity: LoginIdentity,
}

impl std::fmt::Debug for VaultLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let identity = match &self.identity {
            LoginIdentity::ServiceAccount(account) => account.key(),
            LoginIdentity::Controller(_) => "the controller".into(),
        };
        f.debug_struct("VaultLogin")
            .field("config", &self.config.config_map())
            .field("identity", &identity)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(text: &str) -> BTreeMap<String, String> {
        BTreeMap::from([(CONFIG_KEY.to_string(), text.to_string())])
    }

    #[test]
    fn the_config_map_maps_each_address_to_its_login_path() {
        let paths = LoginPaths::from_config_map(
            "flux-system/sops-vault-config",
            &data(
                "instances:\n\
                 - address: https://vault-a.example.com:8200\n  loginPath: auth/kubernetes/login\n\
                 - address: https://vault-b.example.com:8200\n  loginPath: ns1/ns2/auth/kubernetes/login\n  extra: ignored\n",
            ),
        )
        .unwrap();
        for (address, expected) in [
            (
                "https://vault-a.example.com:8200",
                Some("auth/kubernetes/login"),
            ),
            (
                "https://vault-b.example.com:8200",
                Some("ns1/ns2/auth/kubernetes/login"),
            ),
            // Addresses are compared as written: no normalisation lets another server in.
            ("https://vault-a.example.com:8200/", None),
            ("https://vault-c.example.com:8200", None),
        ] {
            assert_eq!(paths.login_path(address), expected, "{address}");
        }
    }

    #[test]
    fn a_listed_address_without_a_login_path_is_not_trusted() {
        let paths = LoginPaths::from_config_map(
            "ns/cm",
            &data("instances:\n- address: https://vault:8200\n"),
        )
        .unwrap();
        assert_eq!(paths.login_path("https://vault:8200"), None);
        let empty = LoginPaths::from_config_map("ns/cm", &data("{}\n")).unwrap();
        assert_eq!(empty, LoginPaths::default());
    }

    #[test]
    fn an_unreadable_config_map_is_named_in_fluxs_words() {
        let cases = [
            (
                BTreeMap::new(),
                "Vault ConfigMap 'ns/cm' is missing the 'config.yaml' key",
            ),
            (
                data("instances: [a"),
                "failed to parse 'config.yaml' in Vault ConfigMap 'ns/cm': ",
            ),
            (
                data("instances: {address: x}\n"),
                "failed to parse 'config.yaml' in Vault ConfigMap 'ns/cm': `instances` is not a list",
            ),
            (
                data("instances:\n- address: [x]\n"),
                "failed to parse 'config.yaml' in Vault ConfigMap 'ns/cm': `instances[0].address` is not a string",
            ),
            (
                data("instances:\n- just-text\n"),
                "failed to parse 'config.yaml' in Vault ConfigMap 'ns/cm': `instances[0]` is not a mapping",
            ),
        ];
        for (data, expected) in cases {
            let error = LoginPaths::from_config_map("ns/cm", &data)
                .unwrap_err()
                .to_string();
            assert!(error.starts_with(expected), "{error:?} for {data:?}");
        }
    }

    fn token(claims: serde_json::Value) -> String {
        use base64::Engine as _;
        let encode = |value: serde_json::Value| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(value.to_string())
        };
        format!(
            "{}.{}.signature",
            encode(serde_json::json!({"alg": "RS256"})),
            encode(claims)
        )
    }

    #[test]
    fn the_role_is_the_namespace_and_name_of_the_tokens_subject() {
        let role = |sub: &str| role_from_token(&token(serde_json::json!({ "sub": sub })));
        assert_eq!(
            role("system:serviceaccount:apps:sops").unwrap(),
            "apps_sops"
        );
        // As Flux cuts the subject: the name is what follows the namespace.
        assert_eq!(role("system:serviceaccount:apps:a:b").unwrap(), "apps_a:b");
        for subject in [
            "system:serviceaccount:apps",
            "system:serviceaccount::sops",
            "system:serviceaccount:apps:",
            "system:node:apps:sops",
            "",
        ] {
            assert_eq!(
                role(subject).unwrap_err().to_string(),
                format!(
                    "failed to derive Vault role for authentication: unexpected token subject '{subject}'"
                )
            );
        }
    }

    #[test]
    fn a_login_path_with_an_empty_or_dot_segment_is_refused() {
        for path in ["auth/../sys/login", "auth//login", "./auth/login"] {
            let error = LoginPaths::from_config_map(
                "ns/cm",
                &data(&format!(
                    "instances:\n- address: https://v\n  loginPath: {path}\n"
                )),
            )
            .unwrap_err()
            .to_string();
            assert!(
                error.ends_with(&format!(
                    "`instances[0].loginPath` '{path}' has an empty, '.' or '..' segment"
                )),
                "{error}"
            );
        }
        let verbatim = LoginPaths::from_config_map(
            "ns/cm",
            &data("instances:\n- address: https://v\n  loginPath: /ns1/auth/k8s/login/\n"),
        )
        .unwrap();
        assert_eq!(
            verbatim.login_path("https://v"),
            Some("/ns1/auth/k8s/login/")
        );
    }

    /// An account that is only named.
    struct Named;

    impl ServiceAccountTokens for Named {
        fn key(&self) -> String {
            "apps/sops".into()
        }
        fn name_and_namespace(&self) -> (String, String) {
            ("sops".into(), "apps".into())
        }
        fn annotations(&self) -> Result<BTreeMap<String, String>, super::super::AccountError> {
            Ok(BTreeMap::new())
        }
        fn token(&self, _: &[String]) -> Result<String, super::super::AccountError> {
            Ok(String::new())
        }
    }

    /// The SHA-256 of fluxcd/pkg's `name=value` lines for the generic provider (computed
    /// with `printf … | sha256sum`), so tokens are kept under the keys Flux keeps them.
    #[test]
    fn tokens_are_cached_under_fluxcd_pkgs_keys() {
        let address = "https://vault:8200";
        assert_eq!(
            LoginIdentity::Controller(Arc::new(Named)).cache_key(address),
            "563973fd7c8e81c96878e079acf50978324a6accdddc21929efc75adbd97ee24"
        );
        assert_eq!(
            LoginIdentity::ServiceAccount(Arc::new(Named)).cache_key(address),
            "cc1d7d3ffa5a2bb0bd32e824b6f306c76b53c17f1376a5287ff3079fcb6ca28d"
        );
    }

    #[test]
    fn a_tokens_lifetime_is_read_from_its_expiry() {
        let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000);
        let lifetime = |claims| token_lifetime(&token(claims), at);
        assert_eq!(
            lifetime(serde_json::json!({"exp": 4_600})),
            Some(std::time::Duration::from_secs(3_600))
        );
        assert_eq!(lifetime(serde_json::json!({"exp": 1_000})), None);
        assert_eq!(lifetime(serde_json::json!({"exp": 10})), None);
        assert_eq!(lifetime(serde_json::json!({})), None);
        assert_eq!(token_lifetime("opaque", at), None);
    }

    #[test]
    fn a_token_that_is_not_a_jwt_has_no_role() {
        for (token, expected) in [
            ("opaque", "not a JWT"),
            ("a.b.c.d", "not a JWT"),
            ("a.!!!.c", "failed to decode token payload: "),
            ("a.bm90LWpzb24.c", "failed to unmarshal token payload: "),
        ] {
            let error = role_from_token(token).unwrap_err().to_string();
            assert!(
                error.starts_with(&format!(
                    "failed to derive Vault role for authentication: {expected}"
                )),
                "{error} for {token}"
            );
        }
    }
}
