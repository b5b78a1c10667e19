//! Leader election with a `coordination.k8s.io/v1` Lease, as controller-runtime does it: a
//! replica acquires the Lease when it is free or expired (optimistic concurrency on its
//! resourceVersion), renews it every retry period, and gives up leadership when it could not
//! renew within the renew deadline. Shards (`--watch-label-selector`) each get their own
//! Lease, named as Flux names it ([`lease_name`]), and a replica that stops releases its Lease
//! (`--leader-election-release-on-cancel`) so the next one need not wait for it to expire.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use serde_json::json;

/// Flux's Lease name: `kustomize-controller-leader-election`, and for a shard the first eight
/// hex digits of the SHA-256 of its label selector appended (fluxcd/pkg `GenerateID`).
pub fn lease_name(label_selector: Option<&str>) -> String {
    use sha2::Digest as _;
    let base = "kustomize-controller-leader-election";
    match label_selector.filter(|s| !s.is_empty()) {
        Some(selector) => {
            let digest = hex::encode(sha2::Sha256::digest(selector.as_bytes()));
            format!("{base}-{}", &digest[..8])
        }
        None => base.to_string(),
    }
}

#[derive(Clone)]
pub struct LeaderElection {
    pub client: kube::Client,
    pub namespace: String,
    pub name: String,
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
    /// The other holder's record as last seen, and when we saw it change: expiry is judged by
    /// our own clock, as client-go does, so clock skew between replicas cannot cut a lease short.
    observed: std::sync::Arc<std::sync::Mutex<Option<(String, tokio::time::Instant)>>>,
    /// The Lease as our last write of it answered, and when: while the lease that write
    /// took is valid, client-go's leader renews from it without reading the Lease first (its
    /// resourceVersion makes the write fail if another changed the Lease since).
    held: std::sync::Arc<std::sync::Mutex<Option<(Lease, tokio::time::Instant)>>>,
}

/// The Lease given up, as client-go's release writes it: no holder, a one-second duration.
fn released(mut lease: Lease) -> Lease {
    let spec = lease.spec.get_or_insert_with(Default::default);
    let now = MicroTime(Timestamp::now());
    spec.holder_identity = Some(String::new());
    spec.lease_duration_seconds = Some(1);
    spec.acquire_time = Some(now.clone());
    spec.renew_time = Some(now);
    lease
}

#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// controller-runtime's words when the manager stops for it.
    #[error("leader election lost")]
    Lost,
}

/// Durations client-go's `NewLeaderElector` refuses, in its words.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum TimingError {
    #[error("leaseDuration must be greater than renewDeadline")]
    LeaseNotAfterRenew,
    #[error("renewDeadline must be greater than retryPeriod*JitterFactor")]
    RenewNotAfterRetries,
    #[error("leaseDuration must be greater than zero")]
    NoLease,
    #[error("renewDeadline must be greater than zero")]
    NoRenewDeadline,
    #[error("retryPeriod must be greater than zero")]
    NoRetryPeriod,
}

/// client-go's checks, in its order: a leader must stop before its Lease can pass to
/// another, and retry more than once within its renew deadline (`JitterFactor` 1.2).
pub fn check_timing(
    lease_duration: Duration,
    renew_deadline: Duration,
    retry_period: Duration,
) -> Result<(), TimingError> {
    if lease_duration <= renew_deadline {
        return Err(TimingError::LeaseNotAfterRenew);
    }
    // In floating seconds: `Duration::mul_f64` panics on a product out of range.
    if renew_deadline.as_secs_f64() <= retry_period.as_secs_f64() * 1.2 {
        return Err(TimingError::RenewNotAfterRetries);
    }
    if lease_duration.is_zero() {
        return Err(TimingError::NoLease);
    }
    if renew_deadline.is_zero() {
        return Err(TimingError::NoRenewDeadline);
    }
    if retry_period.is_zero() {
        return Err(TimingError::NoRetryPeriod);
    }
    Ok(())
}

/// Why one attempt on the Lease failed, as client-go tells the two apart in its log.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    #[error("{0}")]
    Read(kube::Error),
    #[error("{0}")]
    Update(kube::Error),
}

impl LeaseError {
    /// client-go's log message for it.
    pub fn message(&self) -> &'static str {
        match self {
            LeaseError::Read(_) => "Error retrieving lease lock",
            LeaseError::Update(_) => "Failed to update lease",
        }
    }
}

impl LeaderElection {
    pub fn new(
        client: kube::Client,
        namespace: &str,
        name: &str,
        identity: &str,
        lease_duration: Duration,
        renew_deadline: Duration,
        retry_period: Duration,
    ) -> LeaderElection {
        LeaderElection {
            client,
            namespace: namespace.into(),
            name: name.into(),
            identity: identity.into(),
            lease_duration,
            renew_deadline,
            retry_period,
            observed: Default::default(),
            held: Default::default(),
        }
    }

    fn api(&self) -> Api<Lease> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// client-go's `LeaseLock.RecordEvent`: a Normal `LeaderElection` Event about the Lease,
    /// "<identity> became leader" or "<identity> stopped leading", from the identity as
    /// controller-runtime's recorder names it. Best effort, as an Event is.
    pub async fn record_event(&self, what: &str) {
        let api: Api<k8s_openapi::api::core::v1::Event> =
            Api::namespaced(self.client.clone(), &self.namespace);
        let lease = self.api().get_opt(&self.name).await.ok().flatten();
        let meta = lease.map(|l| l.metadata).unwrap_or_default();
        let now = Timestamp::now();
        let nanos = now.as_nanosecond();
        let time = now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
        let event = json!({
            "metadata": {"name": format!("{}.{nanos:x}", self.name), "namespace": self.namespace},
            "involvedObject": {"kind": "Lease", "apiVersion": "coordination.k8s.io/v1",
                "namespace": self.namespace, "name": self.name,
                "uid": meta.uid, "resourceVersion": meta.resource_version},
            "reason": "LeaderElection",
            "message": format!("{} {what}", self.identity),
            "type": "Normal",
            "source": {"component": self.identity},
            "reportingComponent": self.identity,
            "reportingInstance": "",
            "firstTimestamp": time, "lastTimestamp": time, "count": 1,
        });
        let created = match serde_json::from_value(event) {
            Ok(event) => api.create(&PostParams::default(), &event).await.map(|_| ()),
            Err(error) => Err(kube::Error::SerdeError(error)),
        };
        if let Err(error) = created {
            tracing::debug!(logger = "runtime", error = %error, "recording the leader election event");
        }
    }

    /// `namespace/name`, as client-go describes the lock in its log.
    pub fn describe(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The lease's duration in whole seconds, as the Lease records it.
    fn lease_seconds(&self) -> i32 {
        i32::try_from(self.lease_duration.as_secs())
            .unwrap_or(i32::MAX)
            .max(1)
    }

    /// Remembers the Lease our write left (none: we do not hold it, or no longer know).
    fn remember(&self, written: Option<Lease>) {
        *self.held.lock().unwrap_or_else(|e| e.into_inner()) =
            written.map(|lease| (lease, tokio::time::Instant::now()));
    }

    /// client-go's fast path: the leader renews the Lease its last write left, while the
    /// lease that write took is valid, without reading it first. `false` when it cannot
    /// (then the Lease is read and judged, as on the slow path).
    async fn renew_held(&self) -> bool {
        let held = self.held.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let Some((mut lease, written_at)) = held else {
            return false;
        };
        if written_at.elapsed() >= self.lease_duration {
            return false;
        }
        let spec = lease.spec.get_or_insert_with(Default::default);
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        spec.lease_duration_seconds = Some(self.lease_seconds());
        match self
            .api()
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(written) => {
                self.remember(Some(written));
                true
            }
            Err(error) => {
                let lock = self.describe();
                tracing::debug!(logger = "runtime", err = %error, %lock, "Failed to update lease optimistically, falling back to slow path");
                self.remember(None);
                false
            }
        }
    }

    /// One attempt to take or keep the Lease; `true` when we hold it afterwards.
    pub async fn try_acquire(&self) -> Result<bool, LeaseError> {
        if self.renew_held().await {
            return Ok(true);
        }
        let acquired = self.slow_path().await;
        if !matches!(acquired, Ok(true)) {
            self.remember(None);
        }
        acquired
    }

    /// Reads the Lease and takes it, renews it, or leaves it to its holder.
    async fn slow_path(&self) -> Result<bool, LeaseError> {
        let api = self.api();
        let now = Timestamp::now();
        let seconds = self.lease_seconds();
        let Some(mut lease) = api.get_opt(&self.name).await.map_err(LeaseError::Read)? else {
            let lease: Lease = serde_json::from_value(json!({
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": {
                    "holderIdentity": self.identity, "leaseDurationSeconds": seconds,
                    "acquireTime": MicroTime(now), "renewTime": MicroTime(now), "leaseTransitions": 0,
                },
            }))
            .expect("a Lease");
            return match api.create(&PostParams::default(), &lease).await {
                Ok(written) => {
                    self.remember(Some(written));
                    Ok(true)
                }
                Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
                Err(error) => Err(LeaseError::Update(error)),
            };
        };
        let spec = lease.spec.get_or_insert_with(Default::default);
        let ours = spec.holder_identity.as_deref() == Some(self.identity.as_str());
        // A released Lease (no holder) is free at once, as client-go treats it.
        let released = spec.holder_identity.as_deref().is_none_or(str::is_empty);
        let record = format!(
            "{:?}/{:?}/{:?}",
            spec.holder_identity, spec.renew_time, spec.lease_duration_seconds
        );
        let expired = {
            let mut observed = self.observed.lock().unwrap_or_else(|e| e.into_inner());
            let local_now = tokio::time::Instant::now();
            match observed.as_ref() {
                Some((seen, since)) if *seen == record => {
                    let duration =
                        u64::try_from(spec.lease_duration_seconds.unwrap_or(0)).unwrap_or(0);
                    local_now.duration_since(*since) > Duration::from_secs(duration)
                }
                _ => {
                    *observed = Some((record, local_now));
                    spec.holder_identity.is_none() || spec.renew_time.is_none()
                }
            }
        };
        if !ours && !expired && !released {
            return Ok(false);
        }
        if !ours {
            spec.holder_identity = Some(self.identity.clone());
            spec.acquire_time = Some(MicroTime(now));
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        spec.renew_time = Some(MicroTime(now));
        spec.lease_duration_seconds = Some(seconds);
        match api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(written) => {
                self.remember(Some(written));
                Ok(true)
            }
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
            Err(error) => Err(LeaseError::Update(error)),
        }
    }

    /// Waits until this replica holds the Lease.
    pub async fn acquire(&self) {
        loop {
            match self.try_acquire().await {
                Ok(true) => return,
                Ok(false) => {}
                Err(error) => {
                    let lock = self.describe();
                    tracing::error!(logger = "runtime", error = %error, %lock, "{}", error.message())
                }
            }
            tokio::time::sleep(self.retry_period).await;
        }
    }

    /// Renews the Lease until renewal fails for longer than the renew deadline. Each attempt
    /// is cut off at the deadline: an API server that hangs instead of refusing must not keep
    /// a replica leading after the Lease may have passed to another.
    pub async fn hold(&self) -> LeaderError {
        let mut last_renewal = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(self.retry_period).await;
            let left = self.renew_deadline.saturating_sub(last_renewal.elapsed());
            let lock = self.describe();
            match tokio::time::timeout(left, self.try_acquire()).await {
                Ok(Ok(true)) => last_renewal = tokio::time::Instant::now(),
                Ok(Ok(false)) => return self.lost("the lease is held by another"),
                Ok(Err(error)) => {
                    tracing::error!(logger = "runtime", error = %error, %lock, "{}", error.message())
                }
                Err(_) => {}
            }
            if last_renewal.elapsed() >= self.renew_deadline {
                return self.lost("context deadline exceeded");
            }
        }
    }

    /// Gives the Lease up, if we hold it, so that another replica can take it at once (as
    /// client-go's release: no holder, a one-second duration).
    pub async fn release(&self) -> Result<(), kube::Error> {
        let api = self.api();
        // From the Lease our last write left (client-go reads it first): the write carries
        // its resourceVersion, so a Lease changed since refuses it, and is then read.
        let held = self.held.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some((lease, _)) = held
            && api
                .replace(&self.name, &PostParams::default(), &released(lease))
                .await
                .is_ok()
        {
            return Ok(());
        }
        let Some(lease) = api.get_opt(&self.name).await? else {
            return Ok(());
        };
        if lease
            .spec
            .as_ref()
            .and_then(|spec| spec.holder_identity.as_deref())
            != Some(self.identity.as_str())
        {
            return Ok(());
        }
        api.replace(&self.name, &PostParams::default(), &released(lease))
            .await
            .map(|_| ())
    }

    /// client-go's line when renewing ends, and controller-runtime's error after it.
    fn lost(&self, why: &str) -> LeaderError {
        let lock = self.describe();
        tracing::info!(logger = "runtime", %lock, err = why, "Failed to renew lease");
        LeaderError::Lost
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{TimingError, check_timing, lease_name};

    /// client-go's `NewLeaderElector` checks, as Flux's manager meets them at start.
    #[test]
    fn lease_timings_client_go_refuses_are_refused() {
        let s = Duration::from_secs;
        assert_eq!(check_timing(s(35), s(30), s(5)), Ok(()), "Flux's defaults");
        let refused = [
            (s(10), s(15), s(2), TimingError::LeaseNotAfterRenew),
            (s(15), s(15), s(2), TimingError::LeaseNotAfterRenew),
            (s(35), s(6), s(5), TimingError::RenewNotAfterRetries),
            (s(35), s(30), s(0), TimingError::NoRetryPeriod),
        ];
        let huge = Duration::from_secs(u64::MAX);
        assert_eq!(
            check_timing(huge, s(30), huge),
            Err(TimingError::RenewNotAfterRetries),
            "out of range is refused, not a panic"
        );
        for (lease, renew, retry, expected) in refused {
            assert_eq!(check_timing(lease, renew, retry), Err(expected));
        }
    }

    #[test]
    fn shards_get_flux_lease_names() {
        assert_eq!(lease_name(None), "kustomize-controller-leader-election");
        assert_eq!(lease_name(Some("")), "kustomize-controller-leader-election");
        // sha256("sharding.fluxcd.io/key=shard1")[..8], as fluxcd/pkg GenerateID derives it.
        assert_eq!(
            lease_name(Some("sharding.fluxcd.io/key=shard1")),
            "kustomize-controller-leader-election-73fdc1be"
        );
        assert_eq!(
            lease_name(Some("sharding.fluxcd.io/key in (shard2)")),
            "kustomize-controller-leader-election-eb94278b"
        );
    }
}
