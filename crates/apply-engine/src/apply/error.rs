//! How an apply fails: [`ApplyError`] in fluxcd/pkg `ssa`'s words (its DryRunErr, the
//! steps around an apply), and which refusals of the server are an immutable field's.

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// fluxcd/pkg/ssa's DryRunErr: the reason in brackets, when the answer has one.
    #[error("{subject} dry-run failed{}: {message}", bracketed(.reason))]
    DryRun {
        subject: String,
        reason: String,
        message: String,
    },
    /// What the dry-run needs is missing (the namespace, or an object it refers to), in
    /// fluxcd/pkg/ssa's words.
    #[error("{subject} not found: {message}")]
    DryRunNotFound { subject: String, message: String },
    #[error("{subject} namespace not specified: {message}")]
    NamespaceNotSpecified { subject: String, message: String },
    /// An immutable field changed and the object may not be recreated (no `spec.force`, no
    /// force annotation): fluxcd/pkg/ssa's DryRunErr, as for any refused dry-run.
    #[error("{subject} dry-run failed{}: {message}", bracketed(.reason))]
    Immutable {
        subject: String,
        reason: String,
        message: String,
    },
    #[error("{subject} apply failed: {message}")]
    Apply { subject: String, message: String },
    /// A write around the apply failed, in fluxcd/pkg/ssa's words for it (`failed to migrate
    /// API version`, `metadata.managedFields cleanup failed`, `immutable field detected,
    /// failed to delete object`).
    #[error("{subject} {step}: {message}")]
    Step {
        subject: String,
        step: &'static str,
        message: String,
    },
    #[error("{subject}: {message}")]
    Invalid { subject: String, message: String },
    /// The kind is not served (its CRD is missing): fluxcd/pkg/ssa's DryRunErr around the
    /// REST mapper's error.
    #[error(
        "{subject} dry-run failed: no matches for kind \"{kind}\" in version \"{api_version}\""
    )]
    UnknownKind {
        subject: String,
        api_version: String,
        kind: String,
    },
    #[error("timeout waiting for: [{}]", .0.join(", "))]
    WaitTimeout(Vec<String>),
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Many(Vec<ApplyError>),
}

/// ` (reason)`, or nothing for an answer without one.
fn bracketed(reason: &str) -> String {
    if reason.is_empty() {
        String::new()
    } else {
        format!(" ({reason})")
    }
}

impl ApplyError {
    /// One error for a stage's failures, if any.
    pub(super) fn of_all(mut errors: Vec<ApplyError>) -> Option<ApplyError> {
        match errors.len() {
            0 => None,
            1 => Some(errors.remove(0)),
            _ => Some(ApplyError::Many(errors)),
        }
    }
}

pub(super) fn api_error_parts(error: &kube::Error) -> (String, String, u16) {
    match error {
        kube::Error::Api(status) => (status.reason.clone(), status.message.clone(), status.code),
        other => ("Unknown".into(), other.to_string(), 0),
    }
}

/// Whether the server refused a change because a field may not change: fluxcd/pkg
/// `ssa/errors.IsImmutableError`'s message patterns (`is immutable`, `immutable field`, as
/// CEL rules and admission webhooks word it, whatever the status code), and Kubernetes' own
/// wordings of an invalid (422) change (a StorageClass's "updates to parameters are
/// forbidden.", a PriorityClass's "may not be changed in an update."). Unlike Flux, other
/// invalid or conflicting requests are not taken for immutable ones: with `force`, Flux would
/// delete such an object and fail to create it again.
pub(super) fn is_immutable(error: &kube::Error) -> bool {
    static FLUX_PATTERNS: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    static KUBERNETES_PATTERNS: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let (reason, message, code) = api_error_parts(error);
    let flux_patterns = FLUX_PATTERNS
        .get_or_init(|| regex::Regex::new(r"is\simmutable|immutable\sfield").expect("valid"));
    // Kubernetes' own, precisely: a policy's "hostPath volumes are forbidden." is no
    // immutable field, and recreating its object would lose it.
    let kubernetes_patterns = KUBERNETES_PATTERNS.get_or_init(|| {
        regex::Regex::new(
            r"may not change|may not be changed in an update|cannot change|updates to statefulset spec|updates to [a-z][a-zA-Z.]* are forbidden",
        )
        .expect("valid")
    });
    let message = message.to_ascii_lowercase();
    flux_patterns.is_match(&message)
        || ((code == 422 || reason == "Invalid") && kubernetes_patterns.is_match(&message))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// fluxcd/pkg/ssa's DryRunErr: the reason in brackets only when the answer has one.
    #[test]
    fn refused_dry_runs_read_as_fluxcd_pkgs() {
        let refused = |reason: &str| ApplyError::DryRun {
            subject: "ConfigMap/apps/x".into(),
            reason: reason.into(),
            message: "no".into(),
        };
        assert_eq!(
            refused("Invalid").to_string(),
            "ConfigMap/apps/x dry-run failed (Invalid): no"
        );
        assert_eq!(
            refused("").to_string(),
            "ConfigMap/apps/x dry-run failed: no"
        );
        let immutable = ApplyError::Immutable {
            subject: "Job/apps/once".into(),
            reason: "Invalid".into(),
            message: "field is immutable".into(),
        };
        assert_eq!(
            immutable.to_string(),
            "Job/apps/once dry-run failed (Invalid): field is immutable"
        );
    }

    #[test]
    fn immutable_errors_are_recognised() {
        let with = |code: u16, reason: &str, message: &str| {
            kube::Error::Api(Box::new(kube::core::Status {
                code,
                reason: reason.into(),
                message: message.into(),
                ..Default::default()
            }))
        };
        let status = |code: u16, message: &str| with(code, "Invalid", message);
        assert!(is_immutable(&status(
            422,
            "Job.batch \"x\" is invalid: spec.template: Invalid value: ...: field is immutable"
        )));
        assert!(!is_immutable(&status(422, "metadata.name: Required value")));
        // Kubernetes' own wordings of a field that may not change, and a policy's refusal
        // that only looks like one.
        for (message, immutable) in [
            (
                "StorageClass.storage.k8s.io \"fast\" is invalid: parameters: Forbidden: updates to parameters are forbidden.",
                true,
            ),
            (
                "PriorityClass.scheduling.k8s.io \"high\" is invalid: value: Forbidden: may not be changed in an update.",
                true,
            ),
            (
                "pods \"x\" is forbidden: ValidatingAdmissionPolicy 'no-host-path' denied request: hostPath volumes are forbidden.",
                false,
            ),
        ] {
            assert_eq!(is_immutable(&status(422, message)), immutable, "{message}");
        }
        // fluxcd/pkg/ssa's words for the writes around an apply.
        let step = |step| ApplyError::Step {
            subject: "ConfigMap/apps/x".into(),
            step,
            message: "refused".into(),
        };
        assert_eq!(
            step("immutable field detected, failed to delete object").to_string(),
            "ConfigMap/apps/x immutable field detected, failed to delete object: refused"
        );
        assert_eq!(
            step("metadata.managedFields cleanup failed").to_string(),
            "ConfigMap/apps/x metadata.managedFields cleanup failed: refused"
        );
        // fluxcd/pkg ssa/errors TestIsImmutableError.
        for (error, immutable) in [
            (
                with(
                    422,
                    "Invalid",
                    r#"the ImmutableSinceFirstWrite "test1" is invalid: value: Invalid value: "string": Value is immutable"#,
                ),
                true,
            ),
            (
                with(
                    400,
                    "BadRequest",
                    r#"the IAMPolicyMember's spec is immutable: admission webhook "deny-immutable-field-updates.cnrm.cloud.google.com" denied the request: the IAMPolicyMember's spec is immutable"#,
                ),
                true,
            ),
            (with(400, "BadRequest", "is not immutable"), false),
            (
                with(
                    422,
                    "Invalid",
                    "spec.selector: Invalid value: ...: field is immutable",
                ),
                true,
            ),
            (
                with(
                    403,
                    "Forbidden",
                    "admission webhook denied: cannot change the immutable field spec.x",
                ),
                true,
            ),
        ] {
            assert_eq!(is_immutable(&error), immutable, "{error}");
        }
    }
}
