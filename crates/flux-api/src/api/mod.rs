//! The `kustomize.toolkit.fluxcd.io/v1` API: the `Kustomization` custom resource, its CRD,
//! inventory IDs and Go duration strings.
//!
//! Everything the controller reads from or writes to the cluster about a Kustomization goes
//! through these types, so they are the compatibility contract with Flux: `kustomization.rs`
//! holds spec and status, `crd.rs` turns them into the CRD we install (and `crds/` keeps a
//! copy), `inventory.rs` owns the `<namespace>_<name>_<group>_<kind>` IDs in
//! `.status.inventory`, and `duration.rs` the `1h30m0s` strings of `interval` and `timeout`.

mod crd;
mod duration;
mod inventory;
mod kustomization;
mod schema;

pub use crd::{CRD_FILE_NAME, crd, crd_yaml};
pub use duration::{DURATION_PATTERN, GoDuration};
pub use inventory::{ObjectId, ResourceInventory, ResourceRef};
pub use kustomization::*;

/// Errors in API values: durations, inventory IDs, CRD generation.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error(
        "invalid duration {value:?}: {reason} (expected Go syntax such as 1h30m, 45s or 500ms)"
    )]
    InvalidDuration { value: String, reason: String },

    #[error(
        "cannot record {object} in the inventory: its {field} contains '_', which Flux's inventory IDs cannot represent unambiguously"
    )]
    AmbiguousObjectId { object: String, field: &'static str },

    #[error("cannot record {object} in the inventory: its {field} is empty")]
    IncompleteObjectId { object: String, field: &'static str },

    #[error("malformed inventory ID {id:?}: {reason}")]
    MalformedObjectId { id: String, reason: &'static str },

    #[error("generating the Kustomization CRD: {0}")]
    Crd(String),
}
