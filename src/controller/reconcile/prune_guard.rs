//! The prune guard, beyond Flux: a reconciliation that would delete more of a Kustomization's
//! inventory than a threshold allows prunes nothing until a user confirms it once.
//!
//! A commit that empties a kustomization.yaml or points `spec.path` elsewhere makes Flux
//! delete everything the Kustomization applied. Here the threshold comes from the
//! Kustomization's [`GUARD`] annotation, else `--prune-guard-threshold` (off by default),
//! and the `PruneGuard` feature gate switches the guard off cluster-wide. The decision is
//! [`judge`], over counts alone: the stale objects are known from the inventories, so a
//! tripped guard on an inventory of thousands reads none of them.
//!
//! A confirmation is one-shot, as `reconcile.fluxcd.io/requestedAt`: the user sets
//! [`CONFIRM`] to any new value, and the controller records the value it honoured in
//! [`HONOURED`] before it prunes, so that the same value never lets a second prune through.

use std::fmt;

/// This controller's own annotations, which Flux ignores, so a user can swap back.
pub const PREFIX: &str = "kustomize-controller.rs/";
/// The threshold on one Kustomization: `50%`, `200`, or `off`.
pub const GUARD: &str = "kustomize-controller.rs/prune-guard";
/// A user's one-shot confirmation: any value not yet honoured lets one guarded prune through.
pub const CONFIRM: &str = "kustomize-controller.rs/prune-confirm";
/// The confirmation value the controller honoured last.
pub const HONOURED: &str = "kustomize-controller.rs/prune-confirm-honoured";

/// How much of an inventory one reconciliation may prune.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Threshold {
    /// More than this percentage of the inventory trips the guard.
    Share(u8),
    /// More than this many objects trips the guard.
    Count(usize),
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid prune guard threshold {0:?}: want a percentage from 0% to 100% (\"50%\"), a count of objects (\"100\") or \"off\""
)]
pub struct ThresholdError(pub String);

/// Parses a threshold: `None` for `off`.
pub fn parse(text: &str) -> Result<Option<Threshold>, ThresholdError> {
    let text = text.trim();
    let invalid = || ThresholdError(text.to_string());
    if text.eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    if let Some(percent) = text.strip_suffix('%') {
        let share: u8 = percent.trim().parse().map_err(|_| invalid())?;
        return (share <= 100)
            .then_some(Some(Threshold::Share(share)))
            .ok_or_else(invalid);
    }
    text.parse()
        .map(|count| Some(Threshold::Count(count)))
        .map_err(|_| invalid())
}

impl fmt::Display for Threshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Threshold::Share(share) => write!(f, "{share}% of the inventory"),
            Threshold::Count(count) => write!(f, "{count} objects"),
        }
    }
}

/// The threshold that holds for one Kustomization: none while the `PruneGuard` gate is
/// off, else its [`GUARD`] annotation, else `--prune-guard-threshold`. Read before anything is
/// applied, so a mistyped annotation stalls the Kustomization at once.
pub fn threshold(
    enabled: bool,
    default: Option<Threshold>,
    annotation: Option<&str>,
) -> Result<Option<Threshold>, ThresholdError> {
    match (enabled, annotation) {
        (false, _) => Ok(None),
        (true, Some(text)) => parse(text),
        (true, None) => Ok(default),
    }
}

/// What decides one reconciliation's guard, as plain data.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Guard<'a> {
    pub threshold: Option<Threshold>,
    /// The Kustomization's [`CONFIRM`] and [`HONOURED`] annotations.
    pub confirmation: Option<&'a str>,
    pub honoured: Option<&'a str>,
}

/// Whether a prune may proceed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Judgement {
    /// No guard, or within it.
    Proceed,
    /// Over the threshold, but a new confirmation lets it through: record `value` first.
    Confirmed { value: String },
    /// Over the threshold: prune nothing.
    Tripped(Tripped),
}

/// A guard that stopped a prune: what the user is told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tripped {
    pub stale: usize,
    pub inventory: usize,
    pub threshold: Threshold,
}

impl fmt::Display for Tripped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "prune guard: this revision would delete {} of the {} objects in the inventory, more than {}; nothing was pruned. To prune them, annotate the Kustomization once with {CONFIRM}=<a new value>",
            self.stale, self.inventory, self.threshold
        )
    }
}

/// Decides whether deleting `stale` of the `inventory` objects last applied may proceed.
pub fn judge(guard: &Guard<'_>, inventory: usize, stale: usize) -> Judgement {
    let Some(threshold) = guard.threshold.filter(|_| stale > 0) else {
        return Judgement::Proceed;
    };
    let over = match threshold {
        // stale/inventory > share/100, in integers.
        Threshold::Share(share) => stale * 100 > usize::from(share) * inventory,
        Threshold::Count(count) => stale > count,
    };
    if !over {
        return Judgement::Proceed;
    }
    match guard.confirmation.map(str::trim).filter(|v| !v.is_empty()) {
        Some(value) if guard.honoured != Some(value) => Judgement::Confirmed {
            value: value.to_string(),
        },
        _ => Judgement::Tripped(Tripped {
            stale,
            inventory,
            threshold,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_are_a_share_a_count_or_off() {
        assert_eq!(parse("50%"), Ok(Some(Threshold::Share(50))));
        assert_eq!(parse(" 0% "), Ok(Some(Threshold::Share(0))));
        assert_eq!(parse("100%"), Ok(Some(Threshold::Share(100))));
        assert_eq!(parse("200"), Ok(Some(Threshold::Count(200))));
        assert_eq!(parse("0"), Ok(Some(Threshold::Count(0))));
        assert_eq!(parse("off"), Ok(None));
        assert_eq!(parse("Off"), Ok(None));
        for bad in ["101%", "-1", "half", "", "5.5%", "%"] {
            assert!(parse(bad).is_err(), "{bad:?} is refused");
        }
        let message = parse("lots").unwrap_err().to_string();
        assert!(message.contains("\"lots\"") && message.contains("\"50%\""));
    }

    fn guard(annotation: &str) -> Guard<'static> {
        Guard {
            threshold: parse(annotation).unwrap(),
            confirmation: None,
            honoured: None,
        }
    }

    fn tripped(stale: usize, inventory: usize, threshold: Threshold) -> Judgement {
        Judgement::Tripped(Tripped {
            stale,
            inventory,
            threshold,
        })
    }

    #[test]
    fn the_guard_trips_only_over_its_threshold() {
        use Threshold::*;
        let half = guard("50%");
        let rows: &[(&Guard, usize, usize, Judgement)] = &[
            (&half, 1000, 0, Judgement::Proceed),
            (&half, 1000, 500, Judgement::Proceed),
            (&half, 1000, 501, tripped(501, 1000, Share(50))),
            (&half, 1000, 1000, tripped(1000, 1000, Share(50))),
            (&half, 3, 1, Judgement::Proceed),
            (&half, 3, 2, tripped(2, 3, Share(50))),
            (&guard("0%"), 10, 1, tripped(1, 10, Share(0))),
            (&guard("100%"), 10, 10, Judgement::Proceed),
            (&guard("100"), 1000, 100, Judgement::Proceed),
            (&guard("100"), 1000, 101, tripped(101, 1000, Count(100))),
            (&guard("off"), 1000, 1000, Judgement::Proceed),
        ];
        for (guard, inventory, stale, expected) in rows {
            assert_eq!(
                &judge(guard, *inventory, *stale),
                expected,
                "{guard:?} {stale} of {inventory}"
            );
        }
    }

    #[test]
    fn the_flag_is_a_default_the_annotation_overrides_and_the_gate_switches_off() {
        let flag = Some(Threshold::Share(10));
        assert_eq!(threshold(true, flag, None), Ok(flag));
        assert_eq!(threshold(true, flag, Some("off")), Ok(None));
        assert_eq!(
            threshold(true, flag, Some("5")),
            Ok(Some(Threshold::Count(5)))
        );
        assert_eq!(threshold(false, flag, Some("5")), Ok(None));
        assert_eq!(threshold(true, None, None), Ok(None));
        assert!(threshold(true, flag, Some("most")).is_err());
        assert_eq!(
            threshold(false, flag, Some("most")),
            Ok(None),
            "with the gate off the annotation is not read"
        );
    }

    #[test]
    fn a_confirmation_lets_one_prune_through() {
        let confirmed = Guard {
            confirmation: Some("2026-11-27T10:00"),
            ..guard("50%")
        };
        assert_eq!(
            judge(&confirmed, 10, 10),
            Judgement::Confirmed {
                value: "2026-11-27T10:00".into()
            }
        );
        let honoured = Guard {
            honoured: Some("2026-11-27T10:00"),
            ..confirmed.clone()
        };
        assert_eq!(
            judge(&honoured, 10, 10),
            tripped(10, 10, Threshold::Share(50)),
            "a value already honoured confirms nothing more"
        );
        let blank = Guard {
            confirmation: Some(" "),
            ..confirmed.clone()
        };
        assert!(matches!(judge(&blank, 10, 10), Judgement::Tripped(_)));
        assert_eq!(
            judge(&confirmed, 10, 1),
            Judgement::Proceed,
            "within the threshold, a confirmation is not used up"
        );
    }

    #[test]
    fn every_annotation_of_this_controller_has_its_one_prefix() {
        let mode = crate::controller::drift_mode::MODE;
        for key in [GUARD, CONFIRM, HONOURED, mode] {
            assert!(key.starts_with(PREFIX), "{key}");
        }
    }

    #[test]
    fn a_tripped_guard_says_how_many_and_how_to_confirm() {
        let message = Tripped {
            stale: 950,
            inventory: 1000,
            threshold: Threshold::Share(50),
        }
        .to_string();
        assert!(message.contains("delete 950 of the 1000 objects"));
        assert!(message.contains("more than 50% of the inventory"));
        assert!(message.contains("nothing was pruned"));
        assert!(message.contains(CONFIRM));
    }
}
