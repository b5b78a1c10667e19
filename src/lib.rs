//! kustomize-controller: a drop-in Rust replacement for the Flux kustomize-controller.
//!
//! The crate follows the reconcile pipeline, one module per stage, each with its own error
//! type (see `docs/architecture.md` for the stage diagram and the types between stages):
//!
//! - [`api`]: the `Kustomization` custom resource (types, CRD, inventory IDs, durations).
//! - [`value`], [`yaml`], [`kustomize`]: the embedded build engine and its data model, a
//!   library crate of its own (`crates/kustomize-engine`) re-exported here: the JSON data
//!   model, Kubernetes YAML in and kustomize-identical YAML out, and the build.
//! - `remote` (feature `remote-bases`): fetching remote bases for the engine with gix.
//! - [`sops`]: SOPS decryption of build inputs and Secrets (age, OpenPGP).
//! - [`substitute`]: post-build variable substitution (`${var}` expressions).
//! - [`source`]: source artifacts (resolve, download with digest check, safe extraction).
//! - [`retryable_http`]: when Flux's HTTP clients (artifacts, notifications) try again.
//! - [`objects`]: what the cluster-facing stages share: object identities, change sets,
//!   owner labels and per-object policies, kind order and discovery.
//! - [`apply`]: the server-side apply engine (stages, policies, drift, takeover, plans).
//! - [`inventory`]: inventory entries, storage (status and overflow Secret), pruning.
//! - [`health`]: kstatus and CEL health checks, and waiting for objects to become ready.
//! - [`controller`]: the Kustomization reconciler (`kustomize-controller run`): the reconcile
//!   and the runtime that feeds it (watches, leader election, clients, events, metrics).
//! - [`cli`]: the command line of the `kustomize-controller` binary, and `diff`.
//! - [`logging`]: log lines in zap's JSON and console encodings, as Flux writes them.

#![forbid(unsafe_code)]

pub use apply_engine::{apply, objects, retry};
pub use flux_api::api;
pub use kustomize_engine::{json, kustomize, value, yaml};
pub use sops_decrypt::{auth, report, sops, tls};

pub mod cli;
pub mod controller;
pub mod health;
pub mod inventory;
pub mod logging;
#[cfg(feature = "remote-bases")]
pub mod remote;
pub mod retryable_http;
pub mod source;
pub mod substitute;
