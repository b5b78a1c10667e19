//! What feeds the reconcile and carries its results out: the watches (`watch`, with their
//! health record) and the config caches (`configs`), leader election (`leader`), the API
//! clients every reconcile uses (`ratelimit`, `retry_after`, `remote`, `remote_identity`,
//! `identity`, `user_agent`), the work queue (`work_queue`), Kubernetes Events (`events`,
//! correlated by `event_correlator`, retried by `event_retry`) and the metrics and probes
//! (`metrics`, `probes`, `object_histograms`, `runtime_metrics`, `process_metrics`, `exposition`). The
//! decisions live in `reconcile`; nothing here decides a Kustomization's outcome.

pub mod configs;
pub(crate) mod event_correlator;
pub mod event_retry;
pub mod events;
pub(crate) mod exposition;
pub mod identity;
pub mod leader;
pub mod metrics;
pub(crate) mod object_histograms;
pub(crate) mod probes;
pub(crate) mod process_metrics;
pub mod ratelimit;
pub mod remote;
pub mod remote_identity;
pub mod retry_after;
pub mod runtime_metrics;
pub(crate) mod user_agent;
pub mod watch;
pub(crate) mod work_queue;
