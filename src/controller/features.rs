//! Flux's feature gates (`--feature-gates`), with Flux v1.9.4's names and defaults.
//!
//! The flag is parsed as Flux parses it (comma-separated `Name=bool`, Go's boolean spellings,
//! repeated flags merge) and an unknown gate is an error, as it is for Flux, which exits.
//! Each gate says how this controller treats it: honoured, equivalent (a cache or read path of
//! Flux's that our behaviour does not depend on), or not implemented yet, which start-up
//! reports when a gate is set away from Flux's default.

use std::collections::{BTreeMap, BTreeSet};

/// One of Flux's feature gates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Gate {
    CacheSecretsAndConfigMaps,
    DisableStatusPollerCache,
    DisableFailFastBehavior,
    StrictPostBuildSubstitutions,
    GroupChangeLog,
    AdditiveCELDependencyCheck,
    ExternalArtifact,
    CancelHealthCheckOnNewRevision,
    DisableConfigWatchers,
    DirectSourceFetch,
    MigrateAPIVersion,
    ObjectLevelWorkloadIdentity,
    /// Beyond Flux: the prune guard (on; off ignores every Kustomization's guard).
    PruneGuard,
    /// Beyond Flux: drift detection without correction (on; off corrects drift everywhere,
    /// as Flux).
    DriftWarnMode,
}

/// What a gate does here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Support {
    /// It changes behaviour as it does in Flux.
    Honoured,
    /// It tunes a cache or read path of Flux's; behaviour here is the same either way.
    Equivalent,
    /// This controller's own, which Flux does not have: it switches off what a
    /// Kustomization opts into with this controller's annotations.
    Own,
}

impl Gate {
    pub const ALL: [Gate; 14] = [
        Gate::CacheSecretsAndConfigMaps,
        Gate::DisableStatusPollerCache,
        Gate::DisableFailFastBehavior,
        Gate::StrictPostBuildSubstitutions,
        Gate::GroupChangeLog,
        Gate::AdditiveCELDependencyCheck,
        Gate::ExternalArtifact,
        Gate::CancelHealthCheckOnNewRevision,
        Gate::DisableConfigWatchers,
        Gate::DirectSourceFetch,
        Gate::MigrateAPIVersion,
        Gate::ObjectLevelWorkloadIdentity,
        Gate::PruneGuard,
        Gate::DriftWarnMode,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Gate::CacheSecretsAndConfigMaps => "CacheSecretsAndConfigMaps",
            Gate::DisableStatusPollerCache => "DisableStatusPollerCache",
            Gate::DisableFailFastBehavior => "DisableFailFastBehavior",
            Gate::StrictPostBuildSubstitutions => "StrictPostBuildSubstitutions",
            Gate::GroupChangeLog => "GroupChangeLog",
            Gate::AdditiveCELDependencyCheck => "AdditiveCELDependencyCheck",
            Gate::ExternalArtifact => "ExternalArtifact",
            Gate::CancelHealthCheckOnNewRevision => "CancelHealthCheckOnNewRevision",
            Gate::DisableConfigWatchers => "DisableConfigWatchers",
            Gate::DirectSourceFetch => "DirectSourceFetch",
            Gate::MigrateAPIVersion => "MigrateAPIVersion",
            Gate::ObjectLevelWorkloadIdentity => "ObjectLevelWorkloadIdentity",
            Gate::PruneGuard => "PruneGuard",
            Gate::DriftWarnMode => "DriftWarnMode",
        }
    }

    /// Flux v1.9.4's default (`internal/features`); this controller's own gates are on (what
    /// they switch is opted into per Kustomization).
    pub fn flux_default(self) -> bool {
        matches!(
            self,
            Gate::DisableStatusPollerCache
                | Gate::StrictPostBuildSubstitutions
                | Gate::PruneGuard
                | Gate::DriftWarnMode
        )
    }

    pub fn support(self) -> Support {
        match self {
            Gate::StrictPostBuildSubstitutions
            | Gate::ExternalArtifact
            | Gate::DisableConfigWatchers
            | Gate::CancelHealthCheckOnNewRevision
            | Gate::AdditiveCELDependencyCheck
            | Gate::DisableFailFastBehavior
            | Gate::GroupChangeLog
            | Gate::MigrateAPIVersion
            | Gate::CacheSecretsAndConfigMaps
            | Gate::DirectSourceFetch
            | Gate::ObjectLevelWorkloadIdentity => Support::Honoured,
            // Health polling keeps no cache: what this gate switches in Flux is how it reads.
            Gate::DisableStatusPollerCache => Support::Equivalent,
            Gate::PruneGuard | Gate::DriftWarnMode => Support::Own,
        }
    }

    fn named(name: &str) -> Option<Gate> {
        Gate::ALL.into_iter().find(|gate| gate.name() == name)
    }
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum FeatureGateError {
    #[error("feature-gate '{0}' not supported")]
    Unsupported(String),
    #[error("missing bool value for {0}")]
    MissingValue(String),
    #[error(
        "invalid value of {name}={value}, err: strconv.ParseBool: parsing {value:?}: invalid syntax"
    )]
    NotABool { name: String, value: String },
}

/// The state of every gate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeatureGates {
    enabled: BTreeMap<Gate, bool>,
    /// The gates the flags named.
    set: BTreeSet<Gate>,
}

impl Default for FeatureGates {
    fn default() -> FeatureGates {
        FeatureGates {
            enabled: Gate::ALL.iter().map(|g| (*g, g.flux_default())).collect(),
            set: BTreeSet::new(),
        }
    }
}

/// Go's `strconv.ParseBool`.
fn parse_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

impl FeatureGates {
    /// Parses every `--feature-gates` value given (later ones win), as Flux does.
    pub fn parse<'a>(
        flags: impl IntoIterator<Item = &'a str>,
    ) -> Result<FeatureGates, FeatureGateError> {
        let mut gates = FeatureGates::default();
        for flag in flags {
            for item in flag.split(',').map(str::trim).filter(|i| !i.is_empty()) {
                let Some((name, value)) = item.split_once('=') else {
                    return Err(FeatureGateError::MissingValue(item.to_string()));
                };
                let (name, value) = (name.trim(), value.trim());
                let enabled = parse_bool(value).ok_or_else(|| FeatureGateError::NotABool {
                    name: name.to_string(),
                    value: value.to_string(),
                })?;
                let gate = Gate::named(name)
                    .ok_or_else(|| FeatureGateError::Unsupported(name.to_string()))?;
                gates.enabled.insert(gate, enabled);
                gates.set.insert(gate);
            }
        }
        Ok(gates)
    }

    pub fn enabled(&self, gate: Gate) -> bool {
        self.enabled
            .get(&gate)
            .copied()
            .unwrap_or_else(|| gate.flux_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_flux_1_9s() {
        let gates = FeatureGates::parse([""]).unwrap();
        assert!(
            gates.enabled(Gate::StrictPostBuildSubstitutions),
            "on in Flux 1.9"
        );
        assert!(gates.enabled(Gate::DisableStatusPollerCache));
        for gate in Gate::ALL {
            if !matches!(
                gate,
                Gate::StrictPostBuildSubstitutions
                    | Gate::DisableStatusPollerCache
                    | Gate::PruneGuard
                    | Gate::DriftWarnMode
            ) {
                assert!(!gates.enabled(gate), "{} is off by default", gate.name());
            }
        }
    }

    #[test]
    fn values_parse_as_go_booleans_and_later_flags_win() {
        let gates = FeatureGates::parse([
            "StrictPostBuildSubstitutions=false, ExternalArtifact=T",
            "DisableConfigWatchers=1,StrictPostBuildSubstitutions=True",
        ])
        .unwrap();
        assert!(gates.enabled(Gate::ExternalArtifact));
        assert!(gates.enabled(Gate::DisableConfigWatchers));
        assert!(gates.enabled(Gate::StrictPostBuildSubstitutions));
        let off = FeatureGates::parse(["StrictPostBuildSubstitutions=0"]).unwrap();
        assert!(!off.enabled(Gate::StrictPostBuildSubstitutions));
    }

    #[test]
    fn unknown_gates_and_bad_values_are_errors_as_in_flux() {
        assert_eq!(
            FeatureGates::parse(["NoSuchGate=true"]),
            Err(FeatureGateError::Unsupported("NoSuchGate".into()))
        );
        assert_eq!(
            FeatureGates::parse(["ExternalArtifact"]),
            Err(FeatureGateError::MissingValue("ExternalArtifact".into()))
        );
        assert!(matches!(
            FeatureGates::parse(["ExternalArtifact=yes"]),
            Err(FeatureGateError::NotABool { .. })
        ));
        assert!(
            FeatureGates::parse(["externalartifact=true"]).is_err(),
            "names are exact"
        );
    }
}
