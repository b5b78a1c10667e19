//! What a source's new revision does to running reconciliations. Health checks it cancels
//! (the CancelHealthCheckOnNewRevision gate): a running check registers here by
//! Kustomization; the source watch, seeing a new artifact revision for it, cancels the check
//! naming the source, so the new revision is reconciled at once instead of after the old one's
//! checks time out. And the revision each Kustomization last attempted in this process
//! ([`AttemptedRevisions`]), known before its status write reaches the watch cache, so a
//! source event for a revision already being applied does not run it a second time.

use crate::controller::KustomizationKey;

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::oneshot;

/// The process is stopping (SIGTERM): waits that only watch the cluster — health checks —
/// end at once, as Flux's do when controller-runtime cancels the reconcile context, so that
/// a rolling update is not held up by a check that may take minutes. Writes in flight
/// (an apply stage) still finish: nothing is left half-applied.
#[derive(Debug)]
pub struct Stopping(tokio::sync::watch::Sender<bool>);

impl Default for Stopping {
    fn default() -> Stopping {
        Stopping(tokio::sync::watch::channel(false).0)
    }
}

impl Stopping {
    pub fn stop(&self) {
        self.0.send_replace(true);
    }

    /// Completes once the process is stopping.
    pub async fn stopped(&self) {
        let mut stopping = self.0.subscribe();
        let _ = stopping.wait_for(|stop| *stop).await;
    }
}

/// Running health checks, by Kustomization (`namespace/name`).
#[derive(Debug, Default)]
pub struct HealthCancels(Mutex<HashMap<KustomizationKey, oneshot::Sender<String>>>);

/// A registered health check; dropping it unregisters the check.
pub struct Registered<'a> {
    cancels: &'a HealthCancels,
    key: KustomizationKey,
    /// Yields the trigger (`Kind/namespace/name`) when the check is cancelled.
    pub cancelled: oneshot::Receiver<String>,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.cancels
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.key);
    }
}

impl HealthCancels {
    /// Registers the running health check of `key`.
    pub fn register(&self, key: &KustomizationKey) -> Registered<'_> {
        let (sender, cancelled) = oneshot::channel();
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key.clone(), sender);
        Registered {
            cancels: self,
            key: key.clone(),
            cancelled,
        }
    }

    /// Cancels the health check of `key`, if one runs, because of `trigger`; says whether one
    /// was cancelled.
    pub fn cancel(&self, key: &KustomizationKey, trigger: &str) -> bool {
        let sender = self.0.lock().unwrap_or_else(|e| e.into_inner()).remove(key);
        sender.is_some_and(|s| s.send(trigger.to_string()).is_ok())
    }
}

/// The source revision each Kustomization (`namespace/name`) attempts or last attempted here.
#[derive(Debug, Default)]
pub struct AttemptedRevisions(Mutex<HashMap<KustomizationKey, Attempt>>);

#[derive(Debug)]
enum Attempt {
    /// A reconciliation has started and not read its source yet; `missed` is the newest
    /// revision a source event brought meanwhile.
    Starting { missed: Option<String> },
    /// It read `revision`; `stale` when an event brought another while it was starting,
    /// which it may have read too early to see.
    Read { revision: String, stale: bool },
    /// It ended before reading its source.
    Ended,
}

impl AttemptedRevisions {
    fn with<T>(&self, change: impl FnOnce(&mut HashMap<KustomizationKey, Attempt>) -> T) -> T {
        change(&mut self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// A reconciliation of `key` starts: it will read the newest source.
    pub fn start(&self, key: &KustomizationKey) {
        self.with(|map| map.insert(key.clone(), Attempt::Starting { missed: None }));
    }

    /// The reconciliation read `revision` of its source.
    pub fn read(&self, key: &KustomizationKey, revision: &str) {
        self.with(|map| {
            let stale = matches!(
                map.get(key),
                Some(Attempt::Starting { missed: Some(m) }) if m != revision
            );
            map.insert(
                key.clone(),
                Attempt::Read {
                    revision: revision.to_string(),
                    stale,
                },
            );
        })
    }

    /// The reconciliation ended; says whether it must run again at once, for a revision a
    /// source event brought that it did not read.
    pub fn finish(&self, key: &KustomizationKey) -> bool {
        self.with(|map| match map.get_mut(key) {
            Some(Attempt::Read { stale, .. }) => std::mem::take(stale),
            Some(Attempt::Starting { missed }) => {
                let missed = missed.is_some();
                map.insert(key.clone(), Attempt::Ended);
                missed
            }
            Some(Attempt::Ended) | None => false,
        })
    }

    pub fn forget(&self, key: &KustomizationKey) {
        self.with(|map| map.remove(key));
    }

    /// Whether a source event bringing `revision` needs to run `key`: not when its running or
    /// last reconciliation read that revision, nor while one is starting (it reads the newest
    /// source, and [`finish`](Self::finish) tells it when it read too early), nor when it was
    /// never reconciled at all (`brand_new`: its own creation runs it, reading the newest).
    pub fn needs_run(&self, key: &KustomizationKey, revision: &str, brand_new: bool) -> bool {
        self.with(|map| match map.get_mut(key) {
            None => !brand_new,
            Some(Attempt::Ended) => true,
            Some(Attempt::Read { revision: read, .. }) => read != revision,
            Some(Attempt::Starting { missed }) => {
                *missed = Some(revision.to_string());
                false
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_event_runs_only_what_has_not_read_its_revision() {
        let attempted = AttemptedRevisions::default();
        assert!(
            attempted.needs_run(&KustomizationKey::new("apps", "web"), "r1", false),
            "never reconciled here"
        );
        assert!(
            !attempted.needs_run(&KustomizationKey::new("apps", "web"), "r1", true),
            "its creation runs it"
        );
        attempted.start(&KustomizationKey::new("apps", "web"));
        attempted.read(&KustomizationKey::new("apps", "web"), "r1");
        assert!(
            !attempted.needs_run(&KustomizationKey::new("apps", "web"), "r1", false),
            "read already"
        );
        assert!(!attempted.finish(&KustomizationKey::new("apps", "web")));
        assert!(
            !attempted.needs_run(&KustomizationKey::new("apps", "web"), "r1", false),
            "last read"
        );
        assert!(attempted.needs_run(&KustomizationKey::new("apps", "web"), "r2", false));
        // An event while starting waits for the read; a stale read asks for another run.
        attempted.start(&KustomizationKey::new("apps", "web"));
        assert!(!attempted.needs_run(&KustomizationKey::new("apps", "web"), "r3", false));
        attempted.read(&KustomizationKey::new("apps", "web"), "r2");
        assert!(
            attempted.finish(&KustomizationKey::new("apps", "web")),
            "read before r3 was published"
        );
        attempted.start(&KustomizationKey::new("apps", "web"));
        assert!(!attempted.needs_run(&KustomizationKey::new("apps", "web"), "r3", false));
        attempted.read(&KustomizationKey::new("apps", "web"), "r3");
        assert!(
            !attempted.finish(&KustomizationKey::new("apps", "web")),
            "read r3 itself"
        );
        // Ended before reading the source (a dependency, say): the event is not lost.
        attempted.start(&KustomizationKey::new("apps", "web"));
        assert!(!attempted.needs_run(&KustomizationKey::new("apps", "web"), "r4", false));
        assert!(attempted.finish(&KustomizationKey::new("apps", "web")));
        assert!(attempted.needs_run(&KustomizationKey::new("apps", "web"), "r4", false));
        attempted.forget(&KustomizationKey::new("apps", "web"));
        assert!(attempted.needs_run(&KustomizationKey::new("apps", "web"), "r3", false));
    }

    #[tokio::test]
    async fn only_a_running_check_is_cancelled_and_a_finished_one_unregisters() {
        let cancels = HealthCancels::default();
        assert!(!cancels.cancel(
            &KustomizationKey::new("apps", "web"),
            "GitRepository/apps/repo"
        ));
        let mut running = cancels.register(&KustomizationKey::new("apps", "web"));
        assert!(cancels.cancel(
            &KustomizationKey::new("apps", "web"),
            "GitRepository/apps/repo"
        ));
        assert_eq!(
            (&mut running.cancelled).await.unwrap(),
            "GitRepository/apps/repo"
        );
        {
            let _finished = cancels.register(&KustomizationKey::new("apps", "db"));
        }
        assert!(!cancels.cancel(
            &KustomizationKey::new("apps", "db"),
            "GitRepository/apps/repo"
        ));
    }
}
