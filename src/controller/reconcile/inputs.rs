//! What a build reads from the cluster besides the artifact: SOPS keys from the decryption
//! Secret and post-build variables from `substituteFrom` ConfigMaps and Secrets.

use std::collections::BTreeMap;

use crate::api::{Kustomization, SubstituteKind};
use crate::controller::context::Context;
use crate::sops::{KeyError, Keys};
use crate::substitute::SubstituteError;

/// Why the inputs of a build could not be read, in Flux's decryptor's words.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// `sops` is `spec.decryption.provider`, the only one there is.
    #[error("cannot get sops {secret}: {}", crate::report::api_message(.source))]
    ReadDecryptionSecret {
        secret: KeySecret,
        source: kube::Error,
    },
    /// As the API server says it (Flux returns its error as it is).
    #[error("secrets \"{name}\" not found")]
    DecryptionSecretNotFound { name: String },
    #[error("failed to import '{}' data from sops {secret}: {}", .source.entry(), .source.reason())]
    DecryptionKey { secret: KeySecret, source: KeyError },
}

/// The Secret SOPS keys come from, as Flux names it.
#[derive(Debug)]
pub enum KeySecret {
    /// `spec.decryption.secretRef`.
    Decryption(String),
    /// `--sops-age-secret`, in the controller's namespace.
    GlobalAge(String),
}

impl std::fmt::Display for KeySecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeySecret::Decryption(id) => write!(f, "decryption Secret '{id}'"),
            KeySecret::GlobalAge(id) => write!(f, "SOPS age decryption Secret '{id}'"),
        }
    }
}

/// SOPS keys from `spec.decryption.secretRef`, or from `--sops-age-secret` when the
/// Kustomization names none; the identity key services are opened as (the decryption's
/// ServiceAccount, else the controller's own), and Vault login (`--sops-vault-configmap`).
pub(crate) async fn decryption_keys(
    object: &Kustomization,
    ctx: &Context,
) -> Result<Option<Keys>, InputError> {
    let Some(decryption) = &object.spec.decryption else {
        return Ok(None);
    };
    // With a ServiceAccount, key services the Secret gives no credentials for are opened as
    // its cloud identity, never the controller's (the gate is checked before the build).
    let namespace = object.metadata.namespace.clone().unwrap_or_default();
    let service_account = decryption
        .service_account()
        .or(ctx.options.default_decryption_service_account.as_deref())
        .map(|name| {
            std::sync::Arc::new(crate::controller::identity::KubeServiceAccount::new(
                ctx.client.clone(),
                &namespace,
                name,
            ))
        });
    // Key services get the Kustomization's timeout, from now, for all of its files.
    let deadline = std::time::Instant::now() + crate::controller::steps::timeout_of(&object.spec);
    let vault_login = vault_login(
        ctx,
        service_account
            .clone()
            .map(|account| account as std::sync::Arc<dyn crate::auth::ServiceAccountTokens>),
    );
    let environment = ctx.options.environment.clone();
    let token_cache = ctx.options.token_cache.clone();
    let name = object.metadata.name.clone().unwrap_or_default();
    let with_environment = |keys: &mut Keys| {
        keys.set_deadline(deadline);
        if let Some(cache) = &token_cache {
            keys.use_token_cache(cache.clone(), "Kustomization", &name, &namespace);
        }
        if let Some(login) = &vault_login {
            keys.use_vault_login(login.clone());
        }
        let vars = environment.iter().cloned();
        match &service_account {
            Some(account) => {
                keys.use_service_account(account.clone());
                keys.add_environment_endpoints(vars);
            }
            None => keys.add_environment(vars),
        }
    };
    let (secret_namespace, secret_name) = match &decryption.secret_ref {
        Some(reference) => (namespace.clone(), reference.name.clone()),
        None => match &ctx.options.sops_age_secret {
            Some(name) => (ctx.options.runtime_namespace.clone(), name.clone()),
            None => {
                let mut keys = Keys::new();
                with_environment(&mut keys);
                return Ok(Some(keys));
            }
        },
    };
    let from_global_secret = decryption.secret_ref.is_none();
    let key_secret = || {
        let id = format!("{secret_namespace}/{secret_name}");
        if from_global_secret {
            KeySecret::GlobalAge(id)
        } else {
            KeySecret::Decryption(id)
        }
    };
    let secret = ctx
        .configs
        .secret(&secret_namespace, &secret_name)
        .await
        .map_err(|source| match &source {
            kube::Error::Api(status) if status.code == 404 => {
                InputError::DecryptionSecretNotFound {
                    name: secret_name.clone(),
                }
            }
            _ => InputError::ReadDecryptionSecret {
                secret: key_secret(),
                source,
            },
        })?
        .ok_or_else(|| InputError::DecryptionSecretNotFound {
            name: secret_name.clone(),
        })?;
    let mut keys = Keys::new();
    for (entry, value) in secret.data.unwrap_or_default() {
        // The controller-wide Secret gives age identities only, as in Flux.
        if from_global_secret && !entry.ends_with(".agekey") {
            continue;
        }
        keys.add_entry(&entry, &value.0)
            .map_err(|source| InputError::DecryptionKey {
                secret: key_secret(),
                source,
            })?;
    }
    with_environment(&mut keys);
    Ok(Some(keys))
}

/// Vault login as a ServiceAccount, where the controller runs with `--sops-vault-configmap`:
/// as the decryption's ServiceAccount (`serviceAccountName`, else
/// `--default-decryption-service-account`), else as the controller's own.
fn vault_login(
    ctx: &Context,
    service_account: Option<std::sync::Arc<dyn crate::auth::ServiceAccountTokens>>,
) -> Option<crate::auth::vault::VaultLogin> {
    use crate::auth::vault::LoginIdentity;
    let config_map = ctx.options.sops_vault_config_map.as_deref()?;
    let identity = match service_account {
        Some(account) => LoginIdentity::ServiceAccount(account),
        None => LoginIdentity::Controller(std::sync::Arc::new(
            crate::controller::identity::ControllerServiceAccount::new(
                ctx.client.clone(),
                &ctx.options.controller_token_file,
            ),
        )),
    };
    let config = crate::controller::identity::VaultConfigMap::new(
        ctx.configs.clone(),
        &ctx.options.runtime_namespace,
        config_map,
    );
    Some(crate::auth::vault::VaultLogin {
        config: std::sync::Arc::new(config),
        identity,
    })
}

/// Post-build variables from `substituteFrom` (in order) and inline `substitute`. Why they
/// cannot be had is not a failure yet: as in Flux, it fails the build at the first object
/// that is substituted, and none when every object opts out.
pub(crate) async fn variables(
    object: &Kustomization,
    ctx: &Context,
) -> Result<BTreeMap<String, String>, SubstituteError> {
    let Some(post_build) = &object.spec.post_build else {
        return Ok(BTreeMap::new());
    };
    let namespace = object.metadata.namespace.clone().unwrap_or_default();
    let mut sources = Vec::new();
    for reference in &post_build.substitute_from {
        let kind = match reference.kind {
            SubstituteKind::ConfigMap => "ConfigMap",
            SubstituteKind::Secret => "Secret",
        };
        let unreadable = |error: kube::Error| crate::report::api_message(&error);
        let data = match reference.kind {
            SubstituteKind::ConfigMap => ctx
                .configs
                .config_map(&namespace, &reference.name)
                .await
                .map_err(unreadable)
                .map(|found| found.map(|c| c.data.unwrap_or_default())),
            SubstituteKind::Secret => ctx
                .configs
                .secret(&namespace, &reference.name)
                .await
                .map_err(unreadable)
                .map(|found| {
                    found.map(|s| {
                        s.data
                            .unwrap_or_default()
                            .into_iter()
                            .map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned()))
                            .collect()
                    })
                }),
        };
        sources.push(crate::substitute::Source {
            kind: kind.into(),
            name: reference.name.clone(),
            optional: reference.optional,
            data,
        });
    }
    crate::substitute::collect_variables(sources, post_build.substitute.as_ref())
}
