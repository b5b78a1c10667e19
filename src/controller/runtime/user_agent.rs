//! The `User-Agent` every request of the controller carries, in client-go's shape
//! (`rest.DefaultKubernetesUserAgent`): `<command>/<version> (<os>/<arch>) kubernetes/<commit>`.
//! Flux sets no agent of its own, so client-go's default is what a cluster sees of it; the API
//! server names the manager of a write without `fieldManager` (an Event, a Lease) by the
//! agent's first word, and audit logs and `kubectl get --show-managed-fields` show it. With the
//! binary named as Flux's, that word is `kustomize-controller`, as in Flux.

use std::path::Path;

use http::HeaderValue;

/// The agent for this process: its command's base name, this build's version, the platform
/// in Go's names. client-go's commit part names the Kubernetes client's build, which this
/// controller has none of: "unknown", as client-go writes an unset commit.
pub fn user_agent() -> HeaderValue {
    let command = std::env::args_os().next().unwrap_or_default();
    let command = Path::new(&command).file_name().unwrap_or_default();
    let agent = |command: &str| {
        let text = agent_text(
            command,
            env!("CARGO_PKG_VERSION"),
            std::env::consts::OS,
            std::env::consts::ARCH,
        );
        HeaderValue::from_str(&text)
    };
    // A command name with bytes a header may not carry gets client-go's word for "none".
    agent(&command.to_string_lossy())
        .or_else(|_| agent(""))
        .expect("an agent of ASCII words")
}

fn agent_text(command: &str, version: &str, os: &str, arch: &str) -> String {
    let command = if command.is_empty() {
        "unknown"
    } else {
        command
    };
    format!(
        "{command}/v{version} ({os}/{}) kubernetes/unknown",
        go_arch(arch)
    )
}

/// Go's `GOARCH` for Rust's architecture name, where they differ.
fn go_arch(arch: &str) -> &str {
    match arch {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agent_has_client_gos_shape_and_the_commands_base_name_first() {
        for (command, arch, expected) in [
            (
                "kustomize-controller",
                "x86_64",
                "kustomize-controller/v1.2.3 (linux/amd64) kubernetes/unknown",
            ),
            (
                "kustomize-controller",
                "aarch64",
                "kustomize-controller/v1.2.3 (linux/arm64) kubernetes/unknown",
            ),
            (
                "",
                "s390x",
                "unknown/v1.2.3 (linux/s390x) kubernetes/unknown",
            ),
        ] {
            assert_eq!(agent_text(command, "1.2.3", "linux", arch), expected);
        }
    }

    #[test]
    fn this_process_has_an_agent_whose_first_word_is_its_command() {
        let agent = user_agent();
        let text = agent.to_str().unwrap();
        let command = std::env::args_os().next().unwrap();
        let base = Path::new(&command).file_name().unwrap().to_string_lossy();
        assert!(text.starts_with(&format!("{base}/v")), "{text}");
    }
}
