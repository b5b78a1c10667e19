//! Safe tar.gz extraction, as Flux's kustomize-controller unpacks an artifact (fluxcd/pkg
//! `tar.Untar` with its symlinks skipped): files and directories are written, symlinks are
//! passed over (so nothing can point out of the artifact, and a build sees what Flux's sees),
//! names with `\`, absolute or with `..` are refused, hard links, devices and FIFOs too; every
//! directory on the way is checked and files never overwrite through a link (a defence in depth:
//! the fetcher unpacks into a fresh directory, where no link can be planted), and the total size
//! and number of entries are bounded.

use std::io::Read;
use std::path::{Component, Path, PathBuf};

use flate2::read::GzDecoder;

use super::SourceError;

/// Bounds on what one artifact may unpack to.
#[derive(Clone, Debug)]
pub struct ExtractLimits {
    /// Total bytes of file contents.
    pub max_bytes: u64,
    /// Number of entries (files, directories, links).
    pub max_entries: u64,
}

impl Default for ExtractLimits {
    fn default() -> ExtractLimits {
        ExtractLimits {
            max_bytes: 1024 * 1024 * 1024,
            max_entries: 100_000,
        }
    }
}

fn extract_error(path: &Path, reason: impl Into<String>) -> SourceError {
    SourceError::Extract {
        path: path.display().to_string(),
        reason: reason.into(),
    }
}

/// The entry's path as a clean relative path; `None` for the archive root itself.
fn clean_relative(path: &Path) -> Result<Option<PathBuf>, SourceError> {
    // Flux refuses an empty name and one with a backslash ("tar contained invalid name").
    if path.as_os_str().is_empty() {
        return Err(extract_error(path, "an entry has no name"));
    }
    if path.to_string_lossy().contains('\\') {
        return Err(extract_error(path, "'\\' is not allowed in entry paths"));
    }
    let mut clean = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => clean.push(part),
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => {
                return Err(extract_error(path, "absolute paths are not allowed"));
            }
            Component::ParentDir => {
                return Err(extract_error(path, "'..' is not allowed in entry paths"));
            }
        }
    }
    Ok((!clean.as_os_str().is_empty()).then_some(clean))
}

/// Creates (or finds) `relative` under `root`, checking each existing step after symlinks.
fn ensure_dir(root: &Path, relative: &Path, entry: &Path) -> Result<PathBuf, SourceError> {
    let mut current = root.to_path_buf();
    for component in relative.components() {
        let next = current.join(component);
        match std::fs::symlink_metadata(&next) {
            Ok(metadata) => {
                let resolved = if metadata.file_type().is_symlink() {
                    next.canonicalize().map_err(|_| {
                        extract_error(entry, "a directory on its path is a dangling symlink")
                    })?
                } else {
                    next
                };
                if !resolved.starts_with(root) {
                    return Err(extract_error(entry, "its path leads outside the artifact"));
                }
                if !resolved.is_dir() {
                    return Err(extract_error(
                        entry,
                        "a parent on its path is not a directory",
                    ));
                }
                current = resolved;
            }
            Err(_) => {
                std::fs::create_dir(&next).map_err(|e| extract_error(entry, e.to_string()))?;
                current = next;
            }
        }
    }
    Ok(current)
}

/// Unpacks a gzip-compressed tar stream into `into` (an existing, empty directory).
pub fn extract_tar_gz(
    reader: impl Read,
    into: &Path,
    limits: &ExtractLimits,
) -> Result<(), SourceError> {
    let root = into.canonicalize().map_err(|source| SourceError::Io {
        context: format!("resolving {}", into.display()),
        source,
    })?;
    let mut archive = tar::Archive::new(GzDecoder::new(reader));
    let entries = archive
        .entries()
        .map_err(|e| SourceError::Limit(format!("reading the archive: {e}")))?;
    let (mut entries_seen, mut bytes) = (0u64, 0u64);
    for entry in entries {
        let mut entry =
            entry.map_err(|e| SourceError::Limit(format!("reading the archive: {e}")))?;
        let raw_path = entry
            .path()
            .map_err(|e| SourceError::Limit(format!("reading an entry name: {e}")))?
            .into_owned();
        entries_seen += 1;
        if entries_seen > limits.max_entries {
            return Err(SourceError::Limit(format!(
                "the archive has more than {} entries",
                limits.max_entries
            )));
        }
        let Some(relative) = clean_relative(&raw_path)? else {
            continue;
        };
        let parent = relative.parent().unwrap_or(Path::new(""));
        let name = relative.file_name().unwrap_or_default();
        let entry_type = entry.header().entry_type();
        if entry_type.is_dir() {
            ensure_dir(&root, &relative, &raw_path)?;
        } else if entry_type.is_file() || entry_type == tar::EntryType::Continuous {
            let size = entry.size();
            bytes = bytes.saturating_add(size);
            if bytes > limits.max_bytes {
                return Err(SourceError::Limit(format!(
                    "the archive unpacks to more than {} bytes",
                    limits.max_bytes
                )));
            }
            let directory = ensure_dir(&root, parent, &raw_path)?;
            let target = directory.join(name);
            if std::fs::symlink_metadata(&target).is_ok() {
                std::fs::remove_file(&target)
                    .map_err(|e| extract_error(&raw_path, e.to_string()))?;
            }
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&target)
                .map_err(|e| extract_error(&raw_path, e.to_string()))?;
            let copied = std::io::copy(&mut (&mut entry).take(size), &mut file)
                .map_err(|e| extract_error(&raw_path, e.to_string()))?;
            if copied != size {
                return Err(extract_error(
                    &raw_path,
                    "the archive ends inside this file",
                ));
            }
        } else if entry_type.is_symlink() {
            // As Flux's fetcher (`tar.WithSkipSymlinks`): not written, wherever it points.
            continue;
        } else if entry_type.is_hard_link() {
            return Err(extract_error(&raw_path, "hard links are not supported"));
        } else if entry_type.is_pax_global_extensions() || entry_type.is_pax_local_extensions() {
            continue;
        } else {
            return Err(extract_error(
                &raw_path,
                format!("unsupported entry type {entry_type:?} (devices and FIFOs are refused)"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::Compression;
    use flate2::write::GzEncoder;

    enum Item<'a> {
        File(&'a str, &'a [u8]),
        Dir(&'a str),
        Link(&'a str, &'a str),
        Hard(&'a str, &'a str),
        Fifo(&'a str),
    }

    /// Builds archives with raw headers, so hostile names are possible.
    fn archive(items: &[Item]) -> Vec<u8> {
        let mut builder = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::fast()));
        for item in items {
            let mut header = tar::Header::new_gnu();
            let (name, kind, data, link): (&str, tar::EntryType, &[u8], Option<&str>) = match item {
                Item::File(n, d) => (n, tar::EntryType::Regular, d, None),
                Item::Dir(n) => (n, tar::EntryType::Directory, b"", None),
                Item::Link(n, t) => (n, tar::EntryType::Symlink, b"", Some(t)),
                Item::Hard(n, t) => (n, tar::EntryType::Link, b"", Some(t)),
                Item::Fifo(n) => (n, tar::EntryType::Fifo, b"", None),
            };
            let bytes = header.as_old_mut();
            bytes.name[..name.len()].copy_from_slice(name.as_bytes());
            if let Some(link) = link {
                bytes.linkname[..link.len()].copy_from_slice(link.as_bytes());
            }
            header.set_entry_type(kind);
            header.set_size(data.len() as u64);
            header.set_mode(0o644);
            header.set_cksum();
            builder.append(&header, data).unwrap();
        }
        builder.into_inner().unwrap().finish().unwrap()
    }

    fn extract(
        items: &[Item],
        limits: &ExtractLimits,
    ) -> (tempfile::TempDir, Result<(), SourceError>) {
        let dir = tempfile::tempdir().unwrap();
        let bytes = archive(items);
        let result = extract_tar_gz(bytes.as_slice(), dir.path(), limits);
        (dir, result)
    }

    /// fluxcd/pkg `tar.Untar` with symlinks skipped, as Flux's fetcher calls it: files and
    /// directories are written; symlinks are passed over wherever they point, so none is
    /// followed and none is refused.
    #[test]
    fn regular_trees_extract_and_symlinks_are_passed_over() {
        let (dir, result) = extract(
            &[
                Item::Dir("./apps/"),
                Item::File("./apps/a.yaml", b"kind: A\n"),
                Item::File("b/c.yaml", b"x"),
                Item::Link("apps/link.yaml", "a.yaml"),
                Item::Link("b/up", "../apps"),
                Item::Link("passwd", "/etc/passwd"),
                Item::Link("x", "."),
                Item::Link("l", "x/../.."),
            ],
            &ExtractLimits::default(),
        );
        result.unwrap();
        assert_eq!(
            std::fs::read(dir.path().join("apps/a.yaml")).unwrap(),
            b"kind: A\n"
        );
        assert_eq!(std::fs::read(dir.path().join("b/c.yaml")).unwrap(), b"x");
        for skipped in ["apps/link.yaml", "b/up", "passwd", "x", "l"] {
            assert!(
                std::fs::symlink_metadata(dir.path().join(skipped)).is_err(),
                "{skipped}"
            );
        }
    }

    #[test]
    fn hostile_entries_are_refused_with_their_name() {
        let limits = ExtractLimits::default();
        for (items, expected) in [
            (vec![Item::File("/etc/x", b"")], "absolute paths"),
            (vec![Item::File("a/../../x", b"")], "'..'"),
            (vec![Item::File("a\\b", b"")], "'\\'"),
            (vec![Item::Hard("h", "a")], "hard links"),
            (vec![Item::Fifo("f")], "FIFOs"),
        ] {
            let (_dir, result) = extract(&items, &limits);
            let message = result.expect_err(expected).to_string();
            assert!(
                message.contains(expected),
                "{message} should mention {expected}"
            );
        }
    }

    #[test]
    fn writes_never_follow_links_out() {
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("victim");
        std::fs::write(&target, "safe").unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(&target, dir.path().join("f")).unwrap();
        let bytes = archive(&[Item::File("f", b"overwritten")]);
        extract_tar_gz(bytes.as_slice(), dir.path(), &ExtractLimits::default()).unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "safe");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("f")).unwrap(),
            "overwritten"
        );
    }

    #[test]
    fn limits_bound_size_and_entries() {
        let small = ExtractLimits {
            max_bytes: 4,
            max_entries: 2,
        };
        let (_d, result) = extract(&[Item::File("a", b"12345")], &small);
        assert!(
            result
                .unwrap_err()
                .to_string()
                .contains("more than 4 bytes")
        );
        let (_d, result) = extract(&[Item::Dir("a"), Item::Dir("b"), Item::Dir("c")], &small);
        assert!(
            result
                .unwrap_err()
                .to_string()
                .contains("more than 2 entries")
        );
        let corrupt = {
            let mut bytes = archive(&[Item::File("a", b"x")]);
            bytes.truncate(bytes.len() / 2);
            bytes
        };
        let dir = tempfile::tempdir().unwrap();
        assert!(extract_tar_gz(corrupt.as_slice(), dir.path(), &ExtractLimits::default()).is_err());
    }
}

#[cfg(test)]
mod go_oracle {
    use super::{ExtractLimits, extract_tar_gz};
    use base64::Engine;
    use sha2::Digest;

    /// The tree under `root` as the fixture lists it: `dir <path>`, `file <path> <sha256 prefix>`.
    fn tree(root: &std::path::Path) -> Vec<String> {
        let mut found = Vec::new();
        let mut pending = vec![root.to_path_buf()];
        while let Some(dir) = pending.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                let relative = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .to_string();
                let metadata = std::fs::symlink_metadata(&path).unwrap();
                if metadata.is_dir() {
                    found.push(format!("dir {relative}"));
                    pending.push(path);
                } else {
                    let digest = sha2::Sha256::digest(std::fs::read(&path).unwrap());
                    found.push(format!("file {relative} {}", hex::encode(&digest[..8])));
                }
            }
        }
        found.sort();
        found
    }

    /// `tests/fixtures/go/untar.json`: 29 archives (plain trees, `./` and `//` names, `..`,
    /// absolute and backslash names, symlinks in and out, duplicates, a file where a
    /// directory goes and the reverse, FIFOs, devices, long PAX names, truncated or not
    /// gzip) as fluxcd/pkg `tar.Untar` unpacked them for kustomize-controller's fetcher
    /// (symlinks skipped, no size limit). Ours refuses what it refuses and writes the same
    /// tree otherwise; the one difference: a hard link, which Flux writes as an empty file.
    #[test]
    fn archives_unpack_as_fluxs_untar_unpacks_them() {
        #[derive(serde::Deserialize)]
        struct Fixture {
            rows: Vec<(String, String, String, Option<Vec<String>>)>,
        }
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/go/untar.json");
        let fixture: Fixture =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let mut differ = Vec::new();
        assert!(fixture.rows.len() >= 29, "the fixture is whole");
        for (case, archive, error, flux_tree) in &fixture.rows {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(archive)
                .unwrap();
            let dir = tempfile::tempdir().unwrap();
            let ours = extract_tar_gz(bytes.as_slice(), dir.path(), &ExtractLimits::default());
            if case == "hardlink" {
                assert!(ours.is_err(), "a hard link is refused here");
                continue;
            }
            match (ours, error.is_empty()) {
                (Ok(()), true) => {
                    let mut want = flux_tree.clone().unwrap_or_default();
                    want.sort();
                    let got = tree(dir.path());
                    if got != want {
                        differ.push(format!("{case}: Flux {want:?}, ours {got:?}"));
                    }
                }
                (Err(_), false) => {}
                (Ok(()), false) => {
                    differ.push(format!("{case}: Flux refused ({error}), ours unpacked"))
                }
                (Err(ours), true) => {
                    differ.push(format!("{case}: Flux unpacked, ours refused ({ours})"))
                }
            }
        }
        assert!(
            differ.is_empty(),
            "{} differ:\n{}",
            differ.len(),
            differ.join("\n")
        );
    }
}
