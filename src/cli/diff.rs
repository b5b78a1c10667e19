//! `kustomize-controller diff`: what a Kustomization would change, as `flux diff
//! kustomization`. A local directory is built by the reconciler's own build step (overrides,
//! decryption keys, variables) and planned by its own applier (policies, ignore rules,
//! server-side dry-run), so `diff` cannot drift from what a reconcile would do; stale
//! inventory entries are reported as deleted.

use std::path::Path;

use kube::api::Api;

use crate::api::Kustomization;
use crate::apply::Planned;
use crate::controller::Context;
use crate::controller::error::StepError;
use crate::controller::steps;
use crate::inventory;
use crate::objects::{Action, ChangeSet, ObjectRef};

/// kubectl's client-side apply record, which holds a Secret's data as written.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// One difference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Difference {
    Created(ObjectRef),
    Drifted(ObjectRef, String),
    Deleted(ObjectRef),
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Difference::Created(o) => writeln!(f, "► {o} created"),
            Difference::Drifted(o, diff) => write!(f, "► {o} drifted\n{diff}"),
            Difference::Deleted(o) => writeln!(f, "► {o} deleted"),
        }
    }
}

fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        let file_type = entry.file_type()?;
        if file_type.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else if file_type.is_file() {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// A line diff of two texts (`-` old, `+` new), by longest common subsequence.
pub fn line_diff(old: &str, new: &str) -> String {
    let (a, b): (Vec<&str>, Vec<&str>) = (old.lines().collect(), new.lines().collect());
    if a.len() * b.len() > 4_000_000 {
        return format!(
            "{}\n{}\n",
            a.iter()
                .map(|l| format!("-{l}"))
                .collect::<Vec<_>>()
                .join("\n"),
            b.iter()
                .map(|l| format!("+{l}"))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    let mut lcs = vec![vec![0u32; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, String::new());
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            i += 1;
            j += 1;
        } else if j < b.len() && (i == a.len() || lcs[i][j + 1] > lcs[i + 1][j]) {
            out.push_str(&format!("+{}\n", b[j]));
            j += 1;
        } else {
            out.push_str(&format!("-{}\n", a[i]));
            i += 1;
        }
    }
    out
}

/// Why a diff could not be made.
#[derive(Debug, thiserror::Error)]
pub enum DiffError {
    #[error("reading Kustomization {id}: {source}")]
    Read { id: String, source: kube::Error },
    #[error("Kustomization {0} not found")]
    NotFound(String),
    #[error("copying {path}: {source}")]
    Copy {
        path: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    Step(#[from] StepError),
}

/// Compares what `dir` would apply for the Kustomization `namespace/name` with the cluster:
/// the reconciler's build and applier, planning instead of applying.
pub async fn diff(
    ctx: &Context,
    namespace: &str,
    name: &str,
    dir: &Path,
) -> Result<Vec<Difference>, DiffError> {
    let id = format!("{namespace}/{name}");
    let api: Api<Kustomization> = Api::namespaced(ctx.client.clone(), namespace);
    let object = api
        .get_opt(name)
        .await
        .map_err(|source| DiffError::Read {
            id: id.clone(),
            source,
        })?
        .ok_or_else(|| DiffError::NotFound(id.clone()))?;
    // The build writes into its directory (overrides, decrypted inputs): work on a copy.
    let copy_failed = |source| DiffError::Copy {
        path: dir.display().to_string(),
        source,
    };
    let workdir = tempfile::tempdir().map_err(copy_failed)?;
    copy_tree(dir, workdir.path()).map_err(copy_failed)?;
    let objects = steps::build(&object, ctx, workdir.path(), workdir.path())
        .await?
        .objects;
    // The same cluster, identity and policies the controller applies with.
    let target = steps::target(&object, ctx).await?;
    let applier = steps::applier(&object, ctx, &target)?;
    let planned = applier.plan(objects).await.map_err(StepError::Apply)?;
    let mut differences = Vec::new();
    let mut built = ChangeSet::default();
    for Planned { change, drift } in planned {
        match (change.action, drift) {
            (Action::Created, _) => differences.push(Difference::Created(change.object.clone())),
            (Action::Configured, Some(mut drift)) => {
                // A Secret's values never reach the output, as in `flux diff`.
                if crate::apply::is_secret(&drift.applied) {
                    crate::apply::mask_secret_data(Some(&mut drift.live), Some(&mut drift.applied));
                    // kubectl's record of a Secret holds its data too.
                    for side in [&mut drift.live, &mut drift.applied] {
                        if let Some(annotations) = side
                            .pointer_mut("/metadata/annotations")
                            .and_then(serde_json::Value::as_object_mut)
                        {
                            annotations.remove(LAST_APPLIED);
                        }
                    }
                }
                let text = line_diff(
                    &crate::yaml::to_yaml_string(&drift.live.clone().into()),
                    &crate::yaml::to_yaml_string(&drift.applied.clone().into()),
                );
                differences.push(Difference::Drifted(change.object.clone(), text));
            }
            _ => {}
        }
        built.changes.push(change);
    }
    if object.spec.prune {
        let old =
            steps::load_inventory(&object, ctx, &object.status.clone().unwrap_or_default()).await?;
        let current = inventory::from_change_set(&built).map_err(StepError::Inventory)?;
        let stale = inventory::stale(&old, &current).map_err(StepError::StaleObjects)?;
        differences.extend(stale.into_iter().map(Difference::Deleted));
    }
    Ok(differences)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_diffs_mark_changes() {
        assert_eq!(line_diff("a\nb\nc\n", "a\nx\nc\n"), "-b\n+x\n");
        assert_eq!(line_diff("a\n", "a\nb\n"), "+b\n");
    }
}
