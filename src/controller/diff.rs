//! `kustomize-controller diff`: what a Kustomization would change, built from a local
//! directory with the Kustomization's own overrides, decryption keys and variables, and
//! compared against the cluster through server-side dry-run, as `flux diff kustomization`.

use std::path::Path;

use kube::api::{Api, Patch, PatchParams};

use super::inputs::{decryption_keys, variables};
use super::manifests::{self, Inputs};
use super::reconcile::Context;
use crate::api::Kustomization;
use crate::apply::{
    ObjectRef, Owner, SsaPolicy, comparable, prepare, reconcile_disabled, ssa_policy,
};

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

/// Compares what `dir` would apply for the Kustomization `namespace/name` with the cluster.
pub async fn diff(
    ctx: &Context,
    namespace: &str,
    name: &str,
    dir: &Path,
) -> Result<Vec<Difference>, String> {
    let api: Api<Kustomization> = Api::namespaced(ctx.client.clone(), namespace);
    let object = api
        .get_opt(name)
        .await
        .map_err(|e| format!("reading Kustomization {namespace}/{name}: {e}"))?
        .ok_or_else(|| format!("Kustomization {namespace}/{name} not found"))?;
    let workdir = tempfile::tempdir().map_err(|e| e.to_string())?;
    copy_tree(dir, workdir.path()).map_err(|e| format!("copying {}: {e}", dir.display()))?;
    let keys = decryption_keys(&object, ctx).await?;
    let variables = variables(&object, ctx).await?;
    let root = workdir.path().to_path_buf();
    let spec = object.spec.clone();
    let strict = ctx.options.strict_substitution;
    let remote = ctx.options.remote.clone();
    let objects = tokio::task::spawn_blocking(move || {
        manifests::build(
            &root,
            &root,
            &Inputs {
                spec: &spec,
                keys: keys.as_ref(),
                variables: &variables,
                remote,
                strict_substitution: strict,
            },
        )
    })
    .await
    .map_err(|e| e.to_string())?
    .map_err(|e| e.to_string())?;
    let owner = Owner {
        name: name.to_string(),
        namespace: namespace.to_string(),
    };
    // The same cluster and identity the controller applies with.
    let client = ctx.target_client(&object).await?;
    let ignore = crate::apply::IgnoreRules::new(&object.spec.ignore)?;
    let kinds = crate::apply::KindCache::default();
    let mut differences = Vec::new();
    let mut built = Vec::new();
    for mut desired in objects {
        prepare(&mut desired, &owner, object.spec.common_metadata.as_ref());
        let reference = ObjectRef::of(&desired);
        built.push(reference.clone());
        if ssa_policy(&desired) == SsaPolicy::Ignore {
            continue;
        }
        let dynamic = match kinds.api(&client, &reference).await {
            Ok(api) => api,
            // A kind the cluster does not serve yet (its CRD comes with this build).
            Err(crate::apply::KindError::NotServed) => {
                differences.push(Difference::Created(reference));
                continue;
            }
            Err(crate::apply::KindError::Api(error)) => {
                return Err(format!("{reference}: {error}"));
            }
        };
        let Some(live) = dynamic
            .get_opt(&reference.name)
            .await
            .map_err(|e| format!("{reference}: {e}"))?
        else {
            differences.push(Difference::Created(reference));
            continue;
        };
        let live = serde_json::to_value(live).unwrap_or_default();
        // What the controller would skip is no difference.
        if reconcile_disabled(&live)
            || reconcile_disabled(&desired)
            || ssa_policy(&desired) == SsaPolicy::IfNotPresent
        {
            continue;
        }
        let ignored: Vec<String> = ignore
            .paths_for(&desired)
            .into_iter()
            .map(str::to_string)
            .collect();
        for pointer in &ignored {
            match live.pointer(pointer) {
                Some(value) => crate::apply::set_pointer(&mut desired, pointer, value.clone()),
                None => crate::apply::remove_pointer(&mut desired, pointer),
            }
        }
        let params = PatchParams::apply(&ctx.options.field_manager)
            .force()
            .dry_run();
        let dry_run = dynamic
            .patch(&reference.name, &params, &Patch::Apply(&desired))
            .await
            .map_err(|e| format!("{reference} dry-run failed: {e}"))?;
        let dry_run = serde_json::to_value(dry_run).unwrap_or_default();
        let (before, after) = (comparable(&live), comparable(&dry_run));
        if before != after {
            let text = line_diff(
                &crate::yaml::to_yaml_string(&before),
                &crate::yaml::to_yaml_string(&after),
            );
            differences.push(Difference::Drifted(reference, text));
        }
    }
    if object.spec.prune {
        let inventory = super::inputs::load_inventory(
            ctx,
            namespace,
            name,
            &object.status.clone().unwrap_or_default(),
        )
        .await?;
        let current = crate::inventory::from_change_set(&crate::apply::ChangeSet {
            changes: built
                .into_iter()
                .map(|o| crate::apply::Change {
                    object: o,
                    action: crate::apply::Action::Unchanged,
                })
                .collect(),
        })
        .map_err(|e| e.to_string())?;
        for stale in crate::inventory::stale(&inventory, &current).map_err(|e| e.to_string())? {
            differences.push(Difference::Deleted(stale));
        }
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
