//! The local files a build will read that may hold SOPS-encrypted secrets, found without
//! building: `secretGenerator` `files` and `envs`, and patch files, of the root kustomization
//! and every local kustomization or component it includes.
//!
//! The controller decrypts these in place before the build; remote bases are not followed
//! (they cannot hold the user's encrypted files).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::KustomizeError;
use super::kustfile;

/// The most kustomization files followed, against pathological include graphs.
const MAX_KUSTOMIZATIONS: usize = 10_000;

/// Files that may need decryption before a build, each listed once, in discovery order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SecretInputs {
    /// `secretGenerator` `files` sources.
    pub generator_files: Vec<GeneratorFile>,
    /// `secretGenerator` `envs` sources.
    pub env_files: Vec<PathBuf>,
    /// `patches` paths, `patchesStrategicMerge` files and `patchesJson6902` paths.
    pub patch_files: Vec<PathBuf>,
}

/// One `secretGenerator` `files` source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneratorFile {
    /// The data key it becomes: the part before `=`, else the file name.
    pub key: String,
    pub path: PathBuf,
}

/// Walks the kustomization in `dir` and the local directories it includes.
pub fn secret_inputs(dir: &Path) -> Result<SecretInputs, KustomizeError> {
    let mut inputs = SecretInputs::default();
    let mut seen_files = BTreeSet::new();
    let mut visited = BTreeSet::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let canonical = dir.canonicalize().map_err(|error| KustomizeError::Io {
            path: dir.clone(),
            error,
        })?;
        if !visited.insert(canonical) || visited.len() > MAX_KUSTOMIZATIONS {
            continue;
        }
        let file = kustfile::find(&dir)?;
        let io = |error| KustomizeError::Io {
            path: file.clone(),
            error,
        };
        let limit = super::loader::MAX_FILE_BYTES;
        if std::fs::metadata(&file).map_err(io)?.len() > limit {
            return Err(KustomizeError::FileTooLarge { file, limit });
        }
        let text = std::fs::read_to_string(&file).map_err(io)?;
        // Only where SOPS files are: the build itself refuses what kustomize refuses.
        let kustomization = kustfile::parse_with(&text, &file, kustfile::UnknownFields::Drop)?;
        for generator in &kustomization.secret_generator {
            for source in &generator.files {
                let (key, relative) = match source.split_once('=') {
                    Some((key, relative)) => (key.to_string(), relative),
                    None => {
                        let name = Path::new(source).file_name().unwrap_or_default();
                        (name.to_string_lossy().into_owned(), source.as_str())
                    }
                };
                let path = dir.join(relative);
                if seen_files.insert(path.clone()) {
                    inputs.generator_files.push(GeneratorFile { key, path });
                }
            }
        }
        let mut add = |list: &mut Vec<PathBuf>, relative: &str| {
            let path = dir.join(relative);
            if seen_files.insert(path.clone()) {
                list.push(path);
            }
        };
        for generator in &kustomization.secret_generator {
            for env in &generator.envs {
                add(&mut inputs.env_files, env);
            }
        }
        for patch in kustomization
            .patches
            .iter()
            .chain(&kustomization.patches_json6902)
        {
            if !patch.path.is_empty() {
                add(&mut inputs.patch_files, &patch.path);
            }
        }
        for entry in &kustomization.patches_strategic_merge {
            // Entries are file paths or inline patches; inline ones span lines.
            if !entry.contains('\n') && dir.join(entry).is_file() {
                add(&mut inputs.patch_files, entry);
            }
        }
        // Included directories are walked in their written order.
        let mut includes: Vec<PathBuf> = kustomization
            .resources
            .iter()
            .chain(&kustomization.components)
            .map(|entry| dir.join(entry))
            .filter(|path| path.is_dir())
            .collect();
        includes.reverse();
        pending.extend(includes);
    }
    Ok(inputs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_local_directories_and_lists_each_file_once() {
        let root = tempfile::tempdir().unwrap();
        let write = |path: &str, text: &str| {
            let path = root.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        write(
            "app/kustomization.yaml",
            "resources: [../base, https://example.com/x.yaml]\ncomponents: [../comp]\n\
             secretGenerator:\n- name: s\n  files: [key=file.txt, plain.bin]\n  envs: [a.env]\n\
             patches:\n- path: p.yaml\n",
        );
        write(
            "base/kustomization.yaml",
            "secretGenerator:\n- name: b\n  envs: [b.env]\npatchesStrategicMerge: [smp.yaml]\n",
        );
        write("base/smp.yaml", "kind: X\n");
        write(
            "comp/kustomization.yaml",
            "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n\
             secretGenerator:\n- name: c\n  envs: [c.env, ../app/a.env]\nresources: [../base]\n",
        );
        let inputs = secret_inputs(&root.path().join("app")).unwrap();
        let names = |list: &[PathBuf]| -> Vec<String> {
            list.iter()
                .map(|p| p.strip_prefix(root.path()).unwrap().display().to_string())
                .collect()
        };
        let files: Vec<PathBuf> = inputs
            .generator_files
            .iter()
            .map(|f| f.path.clone())
            .collect();
        assert_eq!(names(&files), ["app/file.txt", "app/plain.bin"]);
        let keys: Vec<&str> = inputs
            .generator_files
            .iter()
            .map(|f| f.key.as_str())
            .collect();
        assert_eq!(keys, ["key", "plain.bin"]);
        assert_eq!(
            names(&inputs.env_files),
            [
                "app/a.env",
                "app/../base/b.env",
                "app/../comp/c.env",
                "app/../comp/../app/a.env"
            ]
        );
        assert_eq!(
            names(&inputs.patch_files),
            ["app/p.yaml", "app/../base/smp.yaml"]
        );
    }
}
