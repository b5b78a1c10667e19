//! SOPS decryption as Flux's kustomize-controller does it, and the cloud identities its key
//! services are reached with.
//!
//! - [`sops`]: the SOPS format (trees in YAML, JSON, dotenv and INI, MACs, Shamir key
//!   groups) and its key sources ([`sops::keysource`]), each bounded in time and size.
//! - [`auth`]: who the controller (or a Kubernetes ServiceAccount) is to AWS, Google Cloud
//!   and Azure, as fluxcd/pkg `auth` obtains it, and the token cache.
//! - [`report`]: error texts with their cause chain.
//! - [`tls`]: the crypto provider every HTTP client's TLS uses (ring).
//!
//! Values and YAML are the build engine's (`kustomize-engine`).

#![forbid(unsafe_code)]

#[cfg(test)]
pub(crate) use kustomize_engine::json;
pub(crate) use kustomize_engine::{kustomize, value, yaml};

pub mod auth;
pub mod report;
pub mod sops;
pub mod tls;
