//! Where an inventory is kept: `status.inventory` in Flux's format while it fits
//! [`STATUS_BUDGET`], and otherwise a prefix there plus the complete list, gzip-compressed, in
//! an overflow Secret owned by the Kustomization. [`load`] and [`store`] are the stage's
//! reads and writes; [`encode`]/[`decode`] are their pure halves.

use std::io::{Read, Write};

use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;

use super::InventoryError;
use crate::api::{ResourceInventory, ResourceRef};

/// The Kustomization whose inventory is read or written.
#[derive(Clone, Debug)]
pub struct Holder<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    /// Owns the overflow Secret, so that it goes with the Kustomization.
    pub uid: &'a str,
}

/// Whether a stored status inventory may be only the prefix of one in the overflow Secret
/// (prefixes fill the budget to within an entry).
fn may_overflow(inventory: &ResourceInventory) -> bool {
    encoded_size(inventory) + 4096 >= STATUS_BUDGET
}

/// The complete inventory of `holder`: `in_status`, or the complete list in the overflow
/// Secret when the status only holds a prefix. A Secret that cannot be read is an error:
/// pruning from a prefix would orphan the rest.
pub async fn load(
    client: &kube::Client,
    holder: &Holder<'_>,
    in_status: Option<&ResourceInventory>,
) -> Result<ResourceInventory, InventoryError> {
    let in_status = in_status.cloned().unwrap_or_default();
    if !may_overflow(&in_status) {
        return Ok(in_status);
    }
    match load_overflow(client, holder.namespace, holder.name).await? {
        Some(bytes) => {
            decode(&in_status, Some(&bytes)).map_err(|source| InventoryError::Overflow {
                namespace: holder.namespace.into(),
                name: holder.name.into(),
                source,
            })
        }
        None => Ok(in_status),
    }
}

/// Stores `full`: returns what goes into `status.inventory`, after writing (or deleting) the
/// overflow Secret as needed. `previous` is the status inventory being replaced.
pub async fn store(
    client: &kube::Client,
    holder: &Holder<'_>,
    field_manager: &str,
    previous: Option<&ResourceInventory>,
    full: &ResourceInventory,
) -> Result<ResourceInventory, InventoryError> {
    let stored = encode(full, STATUS_BUDGET);
    let had_overflow = previous.is_some_and(may_overflow);
    if stored.overflow.is_some() || had_overflow {
        // A status prefix without its Secret could not be read back: fail instead.
        save_overflow(
            client,
            holder.namespace,
            holder.name,
            holder.uid,
            stored.overflow.as_deref(),
            field_manager,
        )
        .await?;
    }
    Ok(stored.status)
}

/// The bytes the inventory takes in the status (its JSON encoding).
pub fn encoded_size(inventory: &ResourceInventory) -> usize {
    serde_json::to_vec(inventory)
        .map(|v| v.len())
        .unwrap_or(usize::MAX)
}

/// The status share of the object-size budget: well under etcd's 1.5 MiB with room for the
/// rest of the Kustomization.
pub const STATUS_BUDGET: usize = 512 * 1024;

/// An inventory as stored: the status part, and the complete list when it did not fit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stored {
    pub status: ResourceInventory,
    pub overflow: Option<Vec<u8>>,
}

/// Splits an inventory into what the status can hold and, if needed, a compressed overflow.
pub fn encode(inventory: &ResourceInventory, budget: usize) -> Stored {
    if encoded_size(inventory) <= budget {
        return Stored {
            status: inventory.clone(),
            overflow: None,
        };
    }
    let mut used = r#"{"entries":[]}"#.len();
    let mut prefix = Vec::new();
    for entry in &inventory.entries {
        let size = serde_json::to_vec(entry)
            .map(|v| v.len())
            .unwrap_or(usize::MAX)
            + 1;
        if used + size > budget {
            break;
        }
        used += size;
        prefix.push(entry.clone());
    }
    let mut encoder = GzEncoder::new(Vec::new(), Compression::best());
    for entry in &inventory.entries {
        // IDs and versions contain neither tabs nor newlines (DNS names, kinds, groups).
        let _ = writeln!(encoder, "{}\t{}", entry.id, entry.version);
    }
    Stored {
        status: ResourceInventory { entries: prefix },
        overflow: Some(encoder.finish().unwrap_or_default()),
    }
}

/// Why an inventory overflow cannot be read back.
#[derive(Debug, thiserror::Error)]
pub enum OverflowError {
    #[error("reading the inventory overflow: {0}")]
    Unreadable(#[from] std::io::Error),
    #[error("malformed inventory line {0:?}")]
    MalformedLine(String),
    #[error(transparent)]
    Api(#[from] kube::Error),
}

/// The complete inventory from its stored parts.
pub fn decode(
    status: &ResourceInventory,
    overflow: Option<&[u8]>,
) -> Result<ResourceInventory, OverflowError> {
    let Some(bytes) = overflow else {
        return Ok(status.clone());
    };
    let mut text = String::new();
    GzDecoder::new(bytes)
        .take(256 * 1024 * 1024)
        .read_to_string(&mut text)?;
    let entries = text
        .lines()
        .filter(|l| !l.is_empty())
        .map(|line| {
            let (id, version) = line
                .split_once('\t')
                .ok_or_else(|| OverflowError::MalformedLine(line.to_string()))?;
            Ok(ResourceRef {
                id: id.to_string(),
                version: version.to_string(),
            })
        })
        .collect::<Result<Vec<_>, OverflowError>>()?;
    Ok(ResourceInventory { entries })
}

/// The Secret that holds an inventory overflow for a Kustomization.
pub fn overflow_secret_name(kustomization: &str) -> String {
    let name = format!("{kustomization}-inventory");
    if name.len() <= 253 {
        return name;
    }
    use sha2::Digest as _;
    let digest = hex::encode(sha2::Sha256::digest(kustomization.as_bytes()));
    format!("kustomization-inventory-{}", &digest[..32])
}

const OVERFLOW_KEY: &str = "inventory.gz";
const OVERFLOW_LABEL: &str = "kustomize.toolkit.fluxcd.io/inventory-of";

/// Writes (or, with `None`, deletes) the overflow Secret, owned by the Kustomization so it
/// goes with it.
pub async fn save_overflow(
    client: &kube::Client,
    namespace: &str,
    kustomization: &str,
    kustomization_uid: &str,
    overflow: Option<&[u8]>,
    field_manager: &str,
) -> Result<(), InventoryError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let name = overflow_secret_name(kustomization);
    let failure = |error: kube::Error| InventoryError::Overflow {
        namespace: namespace.into(),
        name: kustomization.into(),
        source: error.into(),
    };
    let Some(bytes) = overflow else {
        return match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(error) => Err(failure(error)),
        };
    };
    use base64::Engine as _;
    let secret = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {
            "name": name, "namespace": namespace,
            "labels": {OVERFLOW_LABEL: kustomization},
            "ownerReferences": [{
                "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                "name": kustomization, "uid": kustomization_uid,
            }],
        },
        "type": "Opaque",
        "data": {OVERFLOW_KEY: base64::engine::general_purpose::STANDARD.encode(bytes)},
    });
    api.patch(
        &name,
        &PatchParams::apply(field_manager).force(),
        &Patch::Apply(&secret),
    )
    .await
    .map(|_| ())
    .map_err(failure)
}

/// Reads the overflow Secret, if there is one.
pub async fn load_overflow(
    client: &kube::Client,
    namespace: &str,
    kustomization: &str,
) -> Result<Option<Vec<u8>>, InventoryError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret = api
        .get_opt(&overflow_secret_name(kustomization))
        .await
        .map_err(|e| InventoryError::Overflow {
            namespace: namespace.into(),
            name: kustomization.into(),
            source: e.into(),
        })?;
    Ok(secret
        .and_then(|s| s.data)
        .and_then(|mut data| data.remove(OVERFLOW_KEY))
        .map(|bytes| bytes.0))
}
