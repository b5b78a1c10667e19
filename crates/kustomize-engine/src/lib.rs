//! A kustomize build engine: a kustomization directory in, Kubernetes objects out, printed as
//! `kustomize build` (Kustomize v5.8.1) prints them. A pure library: no Kubernetes client,
//! async runtime or network (remote bases come through a [`kustomize::RemoteFetcher`] the
//! caller provides).
//!
//! - [`kustomize`]: the build (see its module documentation for the order of the steps).
//! - [`yaml`]: Kubernetes YAML in, kustomize-identical YAML out.
//! - [`value`]: the JSON data model both share, compact for small maps.

#![forbid(unsafe_code)]

pub mod kustomize;
pub mod value;
pub mod yaml;
