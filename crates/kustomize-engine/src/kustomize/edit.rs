//! Editing a kustomization file in place: `edit add|remove buildmetadata`.
//!
//! Only the `buildMetadata:` block changes; every other line, comments included, stays as
//! written (kustomize's own `edit` rewrites the whole file and drops comments). The file is
//! validated before and after; adding what is there or removing what is not changes nothing.

use std::path::Path;

use super::KustomizeError;
use super::kustfile;

/// The build metadata options kustomize knows.
pub const BUILD_METADATA_OPTIONS: [&str; 3] = [
    "originAnnotations",
    "transformerAnnotations",
    "managedByLabel",
];

/// Whether options are added or removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EditAction {
    Add,
    Remove,
}

/// Expands `*` and comma-separated lists, and checks every option is known.
pub fn parse_build_metadata_options(
    arguments: &[String],
    file: &Path,
) -> Result<Vec<String>, KustomizeError> {
    let mut options = Vec::new();
    for argument in arguments {
        for option in argument.split(',').map(str::trim).filter(|o| !o.is_empty()) {
            if option == "*" {
                options.extend(BUILD_METADATA_OPTIONS.iter().map(|o| o.to_string()));
            } else if BUILD_METADATA_OPTIONS.contains(&option) {
                options.push(option.to_string());
            } else {
                return Err(KustomizeError::InvalidKustomization {
                    file: file.to_path_buf(),
                    message: format!(
                        "invalid buildMetadata option {option:?}: use {} or *",
                        BUILD_METADATA_OPTIONS.join(", ")
                    ),
                });
            }
        }
    }
    options.dedup();
    if options.is_empty() {
        return Err(KustomizeError::InvalidKustomization {
            file: file.to_path_buf(),
            message: "no buildMetadata option given".into(),
        });
    }
    Ok(options)
}

/// The kustomization text with `options` added to or removed from `buildMetadata`.
pub fn edit_build_metadata(
    text: &str,
    file: &Path,
    action: EditAction,
    options: &[String],
) -> Result<String, KustomizeError> {
    let mut current = kustfile::parse(text, file)?.build_metadata;
    // Idempotent: adding an option that is there, or removing one that is not, changes
    // nothing (so `remove buildmetadata '*'` clears whatever is set).
    for option in options {
        match action {
            EditAction::Add if !current.contains(option) => current.push(option.clone()),
            EditAction::Remove => current.retain(|o| o != option),
            EditAction::Add => {}
        }
    }
    let block = if current.is_empty() {
        String::new()
    } else {
        let mut block = String::from("buildMetadata:\n");
        for option in &current {
            block.push_str(&format!("- {option}\n"));
        }
        block
    };
    let edited = replace_top_level_block(text, "buildMetadata", &block);
    // An edit must leave a valid kustomization behind; an empty one is still written (it
    // was only buildMetadata), as the user asked for exactly that.
    match kustfile::parse(&edited, file) {
        Ok(_) | Err(KustomizeError::EmptyKustomization(_)) => Ok(edited),
        Err(error) => Err(error),
    }
}

/// Replaces the top-level `key:` entry (the key line and the lines that belong to it) with
/// `replacement`, or appends `replacement` when the key is absent.
fn replace_top_level_block(text: &str, key: &str, replacement: &str) -> String {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let prefix = format!("{key}:");
    let Some(start) = lines.iter().position(|l| l.starts_with(&prefix)) else {
        let mut out = text.to_string();
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(replacement);
        return out;
    };
    // The block continues over indented lines and, for a block sequence written at column
    // zero, `- ` items; blank lines count only when more of the block follows.
    let mut end = start + 1;
    let mut last_content = start + 1;
    while end < lines.len() {
        let line = lines[end];
        let trimmed = line.trim_end_matches(['\n', '\r']);
        if trimmed.trim().is_empty() {
            end += 1;
            continue;
        }
        if trimmed.starts_with(' ')
            || trimmed.starts_with('\t')
            || trimmed.starts_with("- ")
            || trimmed == "-"
        {
            end += 1;
            last_content = end;
            continue;
        }
        break;
    }
    let mut out: String = lines[..start].concat();
    out.push_str(replacement);
    out.push_str(&lines[last_content..].concat());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(text: &str, options: &[&str]) -> Result<String, KustomizeError> {
        let options: Vec<String> = options.iter().map(|o| o.to_string()).collect();
        edit_build_metadata(
            text,
            Path::new("kustomization.yaml"),
            EditAction::Add,
            &options,
        )
    }

    fn remove(text: &str, options: &[&str]) -> Result<String, KustomizeError> {
        let options: Vec<String> = options.iter().map(|o| o.to_string()).collect();
        edit_build_metadata(
            text,
            Path::new("kustomization.yaml"),
            EditAction::Remove,
            &options,
        )
    }

    #[test]
    fn adds_and_removes_keeping_other_lines_and_comments() {
        let text = "# my app\nresources:\n- a.yaml # the app\n";
        let added = add(text, &["originAnnotations"]).unwrap();
        assert_eq!(
            added,
            "# my app\nresources:\n- a.yaml # the app\nbuildMetadata:\n- originAnnotations\n"
        );
        let both = add(&added, &["managedByLabel"]).unwrap();
        assert_eq!(
            both,
            "# my app\nresources:\n- a.yaml # the app\nbuildMetadata:\n- originAnnotations\n- managedByLabel\n"
        );
        let removed = remove(&both, &["originAnnotations", "managedByLabel"]).unwrap();
        assert_eq!(removed, text);
    }

    #[test]
    fn replaces_flow_and_indented_blocks_in_the_middle() {
        let text = "buildMetadata: [managedByLabel]\nresources:\n- a.yaml\n";
        assert_eq!(
            add(text, &["originAnnotations"]).unwrap(),
            "buildMetadata:\n- managedByLabel\n- originAnnotations\nresources:\n- a.yaml\n"
        );
        let text = "resources:\n- a.yaml\nbuildMetadata:\n  - managedByLabel\n\nnamePrefix: x-\n";
        assert_eq!(
            remove(text, &["managedByLabel"]).unwrap(),
            "resources:\n- a.yaml\n\nnamePrefix: x-\n"
        );
    }

    #[test]
    fn star_means_all_and_mistakes_are_errors() {
        let all = parse_build_metadata_options(&["*".into()], Path::new("k")).unwrap();
        assert_eq!(all, BUILD_METADATA_OPTIONS);
        let listed = parse_build_metadata_options(
            &["originAnnotations,managedByLabel".into()],
            Path::new("k"),
        )
        .unwrap();
        assert_eq!(listed, ["originAnnotations", "managedByLabel"]);
        let err = parse_build_metadata_options(&["origins".into()], Path::new("k")).unwrap_err();
        assert!(
            err.to_string()
                .contains("invalid buildMetadata option \"origins\""),
            "{err}"
        );
        let unchanged = "resources: [a]\n";
        assert_eq!(remove(unchanged, &["managedByLabel"]).unwrap(), unchanged);
        let once = add(unchanged, &["managedByLabel"]).unwrap();
        assert_eq!(add(&once, &["managedByLabel"]).unwrap(), once);
    }
}
