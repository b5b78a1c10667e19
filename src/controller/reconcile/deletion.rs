//! Deleting a Kustomization: the deletion policy decides what happens to the applied
//! objects (MirrorPrune, Delete, WaitForTermination, Orphan), then the finalizer goes. A
//! suspended Kustomization prunes nothing; a tenant account that is gone or a termination
//! that times out is reported, never allowed to hold the finalizer forever.

use std::time::Duration;

use kube::api::{Api, Patch};
use serde_json::json;

use crate::api::{DeletionPolicy, Kustomization};
use crate::controller::KustomizationKey;
use crate::controller::context::Context;
use crate::controller::events::{EventMeta, EventType};
use crate::controller::reconcile::{FINALIZER, ReconcileError, outcome};
use crate::inventory::{self, Holder};
use crate::objects::{KindCache, KindError, ObjectRef, Owner};

/// What deleting a Kustomization does with what it applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plan {
    /// Not ours to finalize (no finalizer of ours).
    Nothing,
    /// The finalizer goes; the objects stay (Orphan, MirrorPrune without prune, suspended).
    Release,
    /// The objects are pruned first, and with WaitForTermination waited for.
    Prune { wait: bool },
}

/// Flux's deletion policies (`spec.deletionPolicy`), decided from the spec alone.
fn plan(object: &Kustomization) -> Plan {
    let ours = object
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == FINALIZER);
    if !ours {
        return Plan::Nothing;
    }
    let policy = object.spec.deletion_policy.unwrap_or_default();
    let prune = match policy {
        DeletionPolicy::MirrorPrune => object.spec.prune,
        DeletionPolicy::Delete | DeletionPolicy::WaitForTermination => true,
        DeletionPolicy::Orphan => false,
    };
    if !prune || object.spec.suspend == Some(true) {
        return Plan::Release;
    }
    Plan::Prune {
        wait: policy == DeletionPolicy::WaitForTermination,
    }
}

/// Deletion: the policy decides what happens to the applied objects, then the finalizer goes.
pub(crate) async fn finalize(object: &Kustomization, ctx: &Context) -> Result<(), ReconcileError> {
    let started = std::time::Instant::now();
    let key = KustomizationKey::of(object);
    ctx.attempted.forget(&key);
    if let Some(cache) = &ctx.options.build_cache {
        cache.forget(&key);
    }
    match plan(object) {
        Plan::Nothing => return Ok(()),
        Plan::Release => {}
        Plan::Prune { wait } => prune_applied(object, ctx, wait).await?,
    }
    release(object, ctx).await?;
    // As Flux's deferred end of every reconciliation, this one included.
    let status = object.status.clone().unwrap_or_default();
    let suspended = object.spec.suspend == Some(true);
    let interval = object.spec.interval.to_std();
    if let Some((event, said)) = outcome::finalized(&status, suspended, started.elapsed(), interval)
    {
        super::say(&said);
        super::publish(ctx, object, &event);
    }
    Ok(())
}

/// Prunes what the Kustomization applied (as its account, on its cluster), announcing what
/// went; a tenant account that is gone skips the pruning, and a termination that times out is
/// announced, never retried forever.
async fn prune_applied(
    object: &Kustomization,
    ctx: &Context,
    wait: bool,
) -> Result<(), ReconcileError> {
    let namespace = object.metadata.namespace.clone().unwrap_or_default();
    let name = object.metadata.name.clone().unwrap_or_default();
    let holder = Holder {
        namespace: &namespace,
        name: &name,
        uid: object.metadata.uid.as_deref().unwrap_or(""),
    };
    let in_status = object.status.as_ref().and_then(|s| s.inventory.as_ref());
    let inventory = inventory::load(&ctx.client, &holder, in_status).await?;
    let stale = inventory::stale(&inventory, &Default::default())?;
    if account_gone(object, ctx).await {
        // Flux's words, typo included: alerts and log queries match them.
        let listed: Vec<String> = stale.iter().map(ToString::to_string).collect();
        let note = format!("unable to prune objects: \n{}", listed.join("\n"));
        tracing::error!(
            error = "skiping pruning, failed to find account to impersonate",
            "{note}"
        );
        announce(ctx, object, EventType::Warning, &note);
        return Ok(());
    }
    let client = ctx.target_client(object).await?;
    let owner = Owner {
        name: name.clone(),
        namespace: namespace.clone(),
    };
    // Discovery and the owned-object watches are shared with the reconciliations.
    let kinds = ctx.kinds_for(object);
    let owned = object.spec.kube_config.is_none().then_some(&ctx.owned);
    let outcome = inventory::prune_with(&client, &kinds, owned, &stale, &[], &owner).await;
    if !outcome.errors.is_empty() {
        announce(
            ctx,
            object,
            EventType::Warning,
            "pruning for deleted resource failed",
        );
        return Err(ReconcileError::Prune(outcome.errors));
    }
    let settled = outcome.settled.listing();
    if !settled.is_empty() {
        announce(ctx, object, EventType::Normal, &settled);
    }
    if wait {
        let timeout = crate::controller::steps::timeout_of(&object.spec);
        let deleted: Vec<ObjectRef> = outcome
            .deleted()
            .changes
            .into_iter()
            .map(|c| c.object)
            .collect();
        if let Err(error) =
            wait_gone(&client, &deleted, timeout, ctx.options.health_poll_interval).await
        {
            let error = error.as_fluxs();
            let message = "failed to wait for resources termination";
            tracing::error!(%error, "{message}");
            announce(ctx, object, EventType::Warning, message);
        }
    }
    Ok(())
}

/// Whether the tenant account pruning would impersonate is gone (with its namespace, say):
/// then nothing can be pruned in its name, and holding the finalizer would block the
/// namespace forever.
async fn account_gone(object: &Kustomization, ctx: &Context) -> bool {
    let Some(account) = account_to_look_for(object, ctx.options.default_service_account.as_deref())
    else {
        return false;
    };
    let namespace = object.metadata.namespace.clone().unwrap_or_default();
    let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(ctx.client.clone(), &namespace);
    matches!(accounts.get_opt(account).await, Ok(None))
}

/// The local ServiceAccount whose absence skips pruning on deletion: the Kustomization's,
/// else the controller's default. Flux also looks one up locally for a remote cluster
/// (`kubeConfig`), where the account lives on the remote cluster, and skips pruning there
/// when it is not found locally; here a remote cluster's pruning is never skipped for it.
fn account_to_look_for<'a>(
    object: &'a Kustomization,
    default_account: Option<&'a str>,
) -> Option<&'a str> {
    if object.spec.kube_config.is_some() {
        return None;
    }
    object.spec.service_account().or(default_account)
}

/// Removes our finalizer (at the version read, so a concurrent change is not lost) and
/// forgets what was kept for the Kustomization.
async fn release(object: &Kustomization, ctx: &Context) -> Result<(), ReconcileError> {
    let namespace = object.metadata.namespace.clone().unwrap_or_default();
    let name = object.metadata.name.clone().unwrap_or_default();
    let api: Api<Kustomization> = Api::namespaced(ctx.client.clone(), &namespace);
    let finalizers: Vec<String> = object
        .metadata
        .finalizers
        .iter()
        .flatten()
        .filter(|f| *f != FINALIZER)
        .cloned()
        .collect();
    let patch = json!({"metadata": {"finalizers": finalizers, "resourceVersion": object.metadata.resource_version}});
    api.patch(&name, &ctx.options.status_writes(), &Patch::Merge(patch))
        .await?;
    ctx.forget(&KustomizationKey::of(object));
    // As Flux's finalizer: the object's token cache series go with it.
    if let Some(cache) = &ctx.options.token_cache {
        cache.forget("Kustomization", &name, &namespace);
    }
    Ok(())
}

/// An event about the deletion, as Flux's finalizer records it: the reason is the Ready
/// condition's (else the severity), and the revisions are the last applied ones.
fn announce(ctx: &Context, object: &Kustomization, event_type: EventType, message: &str) {
    let status = object.status.as_ref();
    let reason = event_reason(status, event_type);
    let meta = EventMeta::of(
        status.and_then(|s| s.last_applied_revision.as_deref()),
        status.and_then(|s| s.last_applied_origin_revision.as_deref()),
    );
    ctx.recorder
        .publish(object, event_type, &reason, message, &meta);
}

/// Flux's event reason outside a reconciliation's outcome: the Ready condition's reason,
/// else the severity (`info`, `error`).
fn event_reason(status: Option<&crate::api::KustomizationStatus>, event_type: EventType) -> String {
    status
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.reason.clone())
        .filter(|r| !r.is_empty())
        .unwrap_or_else(|| {
            match event_type {
                EventType::Warning => "error",
                EventType::Normal => "info",
            }
            .to_string()
        })
}

/// Why waiting for deleted objects to go ended early.
enum WaitError {
    /// Still there at the timeout.
    Timeout(Vec<String>),
    /// Asking after `object` failed.
    Api { object: String, error: kube::Error },
}

impl WaitError {
    /// What fluxcd/pkg/ssa's WaitForTermination says: the first object not gone, and why
    /// the wait ended (its context's deadline, or the failed read).
    fn as_fluxs(&self) -> String {
        match self {
            WaitError::Timeout(remaining) => format!(
                "{} termination timeout: context deadline exceeded",
                remaining.first().map_or("", String::as_str)
            ),
            WaitError::Api { object, error } => format!(
                "{object} termination timeout: {}",
                crate::report::api_message(error)
            ),
        }
    }
}

async fn wait_gone(
    client: &kube::Client,
    objects: &[ObjectRef],
    timeout: Duration,
    interval: Duration,
) -> Result<(), WaitError> {
    let deadline = tokio::time::Instant::now() + timeout;
    let kinds = KindCache::default();
    loop {
        let mut remaining = Vec::new();
        for object in objects {
            let api = match kinds.api(client, object).await {
                Ok(api) => api,
                // A kind that is no longer served has no objects left.
                Err(KindError::NotServed) => continue,
                Err(KindError::Api(error)) => {
                    return Err(WaitError::Api {
                        object: object.to_string(),
                        error,
                    });
                }
            };
            if api
                .get_opt(&object.name)
                .await
                .map_err(|error| WaitError::Api {
                    object: object.to_string(),
                    error,
                })?
                .is_some()
            {
                remaining.push(object.to_string());
            }
        }
        if remaining.is_empty() {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(WaitError::Timeout(remaining));
        }
        tokio::time::sleep(interval).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::KustomizationStatus;

    /// fluxcd/pkg/ssa's WaitForTermination error, as Flux's finalizer logs it.
    #[test]
    fn a_termination_wait_ends_in_fluxcd_pkgs_words() {
        let timeout = WaitError::Timeout(vec!["ConfigMap/apps/a".into(), "Secret/apps/b".into()]);
        assert_eq!(
            timeout.as_fluxs(),
            "ConfigMap/apps/a termination timeout: context deadline exceeded"
        );
        let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 403,
            "reason": "Forbidden", "message": "configmaps \"a\" is forbidden"}))
        .unwrap();
        let refused = WaitError::Api {
            object: "ConfigMap/apps/a".into(),
            error: kube::Error::Api(status.boxed()),
        };
        assert_eq!(
            refused.as_fluxs(),
            "ConfigMap/apps/a termination timeout: configmaps \"a\" is forbidden"
        );
    }

    /// Flux's deletion policies (docs `spec.deletionPolicy`; kustomization_deletion_policy
    /// tests): what happens to the applied objects.
    #[test]
    fn deletion_policies_decide_what_goes() {
        let object = |policy: Option<&str>, prune: bool, suspend: bool, ours: bool| {
            let mut spec = serde_json::json!({"interval": "10m", "prune": prune, "suspend": suspend,
                "sourceRef": {"kind": "GitRepository", "name": "repo"}});
            if let Some(policy) = policy {
                spec["deletionPolicy"] = serde_json::json!(policy);
            }
            let finalizers = if ours { vec![FINALIZER] } else { vec![] };
            serde_json::from_value::<Kustomization>(serde_json::json!({
                "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                "metadata": {"name": "apps", "namespace": "flux-system", "finalizers": finalizers},
                "spec": spec}))
            .unwrap()
        };
        let rows = [
            (None, true, false, true, Plan::Prune { wait: false }),
            (
                Some("MirrorPrune"),
                true,
                false,
                true,
                Plan::Prune { wait: false },
            ),
            (Some("MirrorPrune"), false, false, true, Plan::Release),
            (
                Some("Delete"),
                false,
                false,
                true,
                Plan::Prune { wait: false },
            ),
            (
                Some("WaitForTermination"),
                false,
                false,
                true,
                Plan::Prune { wait: true },
            ),
            (Some("Orphan"), true, false, true, Plan::Release),
            (Some("Delete"), true, true, true, Plan::Release),
            (Some("Delete"), true, false, false, Plan::Nothing),
        ];
        for (policy, prune, suspend, ours, want) in rows {
            assert_eq!(
                plan(&object(policy, prune, suspend, ours)),
                want,
                "{policy:?} prune={prune} suspend={suspend} ours={ours}"
            );
        }
    }

    /// Which account's absence skips pruning (Flux's `Impersonator.CanImpersonate`: the
    /// Kustomization's account, else the default one, none when neither is set).
    #[test]
    fn pruning_on_deletion_looks_for_the_kustomizations_account_else_the_default() {
        let object = |account: Option<&str>, remote: bool| {
            let mut spec = serde_json::json!({"interval": "10m", "prune": true,
                "sourceRef": {"kind": "GitRepository", "name": "repo"}});
            if let Some(account) = account {
                spec["serviceAccountName"] = serde_json::json!(account);
            }
            if remote {
                spec["kubeConfig"] = serde_json::json!({"secretRef": {"name": "remote"}});
            }
            serde_json::from_value::<Kustomization>(serde_json::json!({
                "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                "metadata": {"name": "apps", "namespace": "tenant"}, "spec": spec}))
            .unwrap()
        };
        let rows = [
            (None, None, false, None),
            (Some("tenant"), None, false, Some("tenant")),
            (None, Some("default"), false, Some("default")),
            (Some("tenant"), Some("default"), false, Some("tenant")),
            (Some(""), None, false, None),
            (Some(""), Some("default"), false, Some("default")),
            (Some("tenant"), Some("default"), true, None),
        ];
        for (account, default_account, remote, want) in rows {
            let object = object(account, remote);
            assert_eq!(
                account_to_look_for(&object, default_account),
                want,
                "{account:?} default={default_account:?} remote={remote}"
            );
        }
    }

    #[test]
    fn deletion_events_take_the_ready_reason_else_the_severity() {
        let mut status = KustomizationStatus::default();
        crate::controller::status::set(
            &mut status,
            "Ready",
            "False",
            "BuildFailed",
            "kustomize build failed",
            Some(1),
        );
        for (status, event_type, reason) in [
            (Some(&status), EventType::Normal, "BuildFailed"),
            (Some(&status), EventType::Warning, "BuildFailed"),
            (None, EventType::Normal, "info"),
            (None, EventType::Warning, "error"),
        ] {
            assert_eq!(event_reason(status, event_type), reason);
        }
    }
}
