//! The one integration-test binary: each module covers a surface of the product end to end.

mod apiserver;
mod apiserver_fidelity;
mod apiserver_writes;
mod apply;
mod build_cache;
mod cancellation;
mod cel;
mod cli;
mod cloud_identity;
mod controller;
mod controller_bench;
mod crd;
mod drift_warn;
mod finalize;
mod flux;
mod flux_docs;
mod flux_ssa;
mod fuzz_corpus;
mod generator;
mod health;
mod hostile;
mod ignore;
mod ignore_ssa;
mod install;
mod inventory;
mod kustomize_api;
mod kustomize_golden;
mod lifecycle;
mod logs;
mod metrics;
mod outage;
mod parity;
mod prune_guard;
#[cfg(feature = "remote-bases")]
mod remote_bases;
mod requests;
mod restricted_rbac;
mod server_cost;
mod sops;
mod sops_key_sources;
mod source;
#[path = "../support/mod.rs"]
mod support;
