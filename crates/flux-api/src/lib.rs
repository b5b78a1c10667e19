//! Flux's `kustomize.toolkit.fluxcd.io/v1` API: the `Kustomization` custom resource (types,
//! CRD and schema, inventory IDs, Go durations), as Flux's kustomize-controller v1.9.4
//! defines it.

#![forbid(unsafe_code)]

pub(crate) use kustomize_engine::yaml;

pub mod api;
