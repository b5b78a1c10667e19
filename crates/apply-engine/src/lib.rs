//! The server-side apply engine: what the cluster-facing stages share ([`objects`]: object
//! identities, change sets, owner labels and per-object policies, kind order and discovery,
//! the applied-object watches), and [`apply`]: applying a build in stages, with each of
//! Flux's decisions a pure function ([`apply::decide`]) and the cluster reached through a
//! thin layer. [`retry`] is the one back-off every retry loop uses, [`watch`] the one watch
//! mechanism every watch uses.

#![forbid(unsafe_code)]

pub(crate) use flux_api::api;
pub(crate) use kustomize_engine::kustomize;

pub mod apply;
pub mod objects;
pub mod retry;
pub mod watch;
