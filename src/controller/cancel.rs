//! Health checks a new source revision cancels (the CancelHealthCheckOnNewRevision gate): a
//! running check registers here by Kustomization; the source watch, seeing a new artifact
//! revision for it, cancels the check naming the source, so the new revision is reconciled at
//! once instead of after the old one's checks time out.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::oneshot;

/// Running health checks, by Kustomization (`namespace/name`).
#[derive(Debug, Default)]
pub struct HealthCancels(Mutex<HashMap<String, oneshot::Sender<String>>>);

/// A registered health check; dropping it unregisters the check.
pub struct Registered<'a> {
    cancels: &'a HealthCancels,
    key: String,
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
    pub fn register(&self, key: &str) -> Registered<'_> {
        let (sender, cancelled) = oneshot::channel();
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key.to_string(), sender);
        Registered {
            cancels: self,
            key: key.to_string(),
            cancelled,
        }
    }

    /// Cancels the health check of `key`, if one runs, because of `trigger`; says whether one
    /// was cancelled.
    pub fn cancel(&self, key: &str, trigger: &str) -> bool {
        let sender = self.0.lock().unwrap_or_else(|e| e.into_inner()).remove(key);
        sender.is_some_and(|s| s.send(trigger.to_string()).is_ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn only_a_running_check_is_cancelled_and_a_finished_one_unregisters() {
        let cancels = HealthCancels::default();
        assert!(!cancels.cancel("apps/web", "GitRepository/apps/repo"));
        let mut running = cancels.register("apps/web");
        assert!(cancels.cancel("apps/web", "GitRepository/apps/repo"));
        assert_eq!(
            (&mut running.cancelled).await.unwrap(),
            "GitRepository/apps/repo"
        );
        {
            let _finished = cancels.register("apps/db");
        }
        assert!(!cancels.cancel("apps/db", "GitRepository/apps/repo"));
    }
}
