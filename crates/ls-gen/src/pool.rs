//! The case pool a server loads, controlled by the documented environment variables:
//!
//! | Variable | Default |
//! |---|---|
//! | `LEDGERSHIELD_INCLUDE_CHALLENGE` | true |
//! | `LEDGERSHIELD_CHALLENGE_VARIANTS` / `_SEED` | 2 / 2026 |
//! | `LEDGERSHIELD_INCLUDE_HOLDOUT` | false |
//! | `LEDGERSHIELD_HOLDOUT_VARIANTS` / `_SEED` | 1 / 31415 (also the base of twin seeds) |
//! | `LEDGERSHIELD_INCLUDE_TWINS` | false |
//! | `LEDGERSHIELD_INCLUDE_CONTROLBENCH` | false |
//! | `LEDGERSHIELD_CONTROLBENCH_CASES` / `_SEED` / `_SLEEPERS` / `_SLEEPER_WARMUPS` | 100 / 2026 / 3 / 3 |
//!
//! Booleans are true for `1`, `true`, `yes`, `on` (case-insensitive); counts are clamped.

use crate::checks::check_generated;
use crate::generators::{self, QuarterConfig};
use crate::GenError;
use ls_core::fixtures::FixtureSet;
use ls_core::schema::Case;
use std::collections::BTreeSet;

/// Which generator (CLI `--kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GenKind {
    Challenge,
    Holdout,
    Twins,
    Controlbench,
    CertificateRequired,
    Fraudgen,
}

impl GenKind {
    pub const ALL: [GenKind; 6] = [
        Self::Challenge,
        Self::Holdout,
        Self::Twins,
        Self::Controlbench,
        Self::CertificateRequired,
        Self::Fraudgen,
    ];
    pub fn parse(s: &str) -> Option<Self> {
        Some(
            match ls_core::text::normalize_text(s).replace('-', "_").as_str() {
                "challenge" => Self::Challenge,
                "holdout" => Self::Holdout,
                "twins" | "twin" => Self::Twins,
                "controlbench" => Self::Controlbench,
                "certificate_required" => Self::CertificateRequired,
                "fraudgen" => Self::Fraudgen,
                _ => return None,
            },
        )
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Challenge => "challenge",
            Self::Holdout => "holdout",
            Self::Twins => "twins",
            Self::Controlbench => "controlbench",
            Self::CertificateRequired => "certificate-required",
            Self::Fraudgen => "fraudgen",
        }
    }
}

/// The curated cases and `per_kind` generated cases of each kind a task-distribution reset
/// draws from besides them (challenge, holdout, twins, quarter), from `seed`: the sample the
/// tests that must cover every pool kind play.
pub fn curated_and_every_pool_kind(set: &FixtureSet, seed: u64, per_kind: usize) -> Vec<Case> {
    let mut cases = set.cases.clone();
    for kind in [
        GenKind::Challenge,
        GenKind::Holdout,
        GenKind::Twins,
        GenKind::Controlbench,
    ] {
        cases.extend(generate(set, kind, seed, per_kind));
    }
    cases
}

/// Generate `count` cases of one kind from `seed` (kinds whose size is fixed by the curated set
/// — twins, certificate-required clones — are cut to `count`; challenge and holdout draw as many
/// variants per base case as needed).
pub fn generate(set: &FixtureSet, kind: GenKind, seed: u64, count: usize) -> Vec<Case> {
    let count = count.min(generators::MAX_GENERATED);
    let hard = set
        .cases
        .iter()
        .filter(|c| {
            matches!(
                c.task_type,
                ls_core::TaskType::TaskC | ls_core::TaskType::TaskD | ls_core::TaskType::TaskE
            )
        })
        .count()
        .max(1);
    let per = count.div_ceil(hard).max(1);
    let mut v = match kind {
        GenKind::Challenge => generators::challenge(set, per, seed),
        GenKind::Holdout => generators::holdout(set, per, seed),
        GenKind::Twins => generators::twins(set, seed),
        GenKind::Controlbench => generators::controlbench(
            set,
            &QuarterConfig {
                length: count.clamp(1, 1000),
                seed,
                ..Default::default()
            },
        ),
        GenKind::CertificateRequired => generators::certificate_required(set),
        GenKind::Fraudgen => crate::fraudgen::fraudgen(count, seed),
    };
    v.truncate(count);
    v
}

#[derive(Debug, Clone, PartialEq)]
pub struct PoolConfig {
    pub include_challenge: bool,
    pub challenge_variants: usize,
    pub challenge_seed: u64,
    pub include_holdout: bool,
    pub holdout_variants: usize,
    pub holdout_seed: u64,
    pub include_twins: bool,
    pub include_controlbench: bool,
    pub quarter: QuarterConfig,
}

impl Default for PoolConfig {
    fn default() -> Self {
        Self {
            include_challenge: true,
            challenge_variants: 2,
            challenge_seed: 2026,
            include_holdout: false,
            holdout_variants: 1,
            holdout_seed: 31415,
            include_twins: false,
            include_controlbench: false,
            quarter: QuarterConfig::default(),
        }
    }
}

/// Documented boolean parsing: `1/true/yes/on` are true, any other set value is false.
pub fn parse_flag(v: &str) -> bool {
    matches!(
        ls_core::text::normalize_text(v).as_str(),
        "1" | "true" | "yes" | "on"
    )
}

impl PoolConfig {
    /// Read the configuration through `get` (the binary passes the process environment; this
    /// crate reads none).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Self {
        let d = Self::default();
        let flag = |k: &str, def: bool| get(k).map_or(def, |v| parse_flag(&v));
        let num = |k: &str, def: u64, max: u64| {
            get(k)
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map_or(def, |n| n.min(max))
        };
        Self {
            include_challenge: flag("LEDGERSHIELD_INCLUDE_CHALLENGE", d.include_challenge),
            challenge_variants: num("LEDGERSHIELD_CHALLENGE_VARIANTS", 2, 64) as usize,
            challenge_seed: num("LEDGERSHIELD_CHALLENGE_SEED", 2026, u64::MAX),
            include_holdout: flag("LEDGERSHIELD_INCLUDE_HOLDOUT", d.include_holdout),
            holdout_variants: num("LEDGERSHIELD_HOLDOUT_VARIANTS", 1, 64) as usize,
            holdout_seed: num("LEDGERSHIELD_HOLDOUT_SEED", 31415, u64::MAX),
            include_twins: flag("LEDGERSHIELD_INCLUDE_TWINS", d.include_twins),
            include_controlbench: flag("LEDGERSHIELD_INCLUDE_CONTROLBENCH", d.include_controlbench),
            quarter: QuarterConfig {
                length: num("LEDGERSHIELD_CONTROLBENCH_CASES", 100, 1000).max(1) as usize,
                seed: num("LEDGERSHIELD_CONTROLBENCH_SEED", 2026, u64::MAX),
                sleepers: num("LEDGERSHIELD_CONTROLBENCH_SLEEPERS", 3, 8) as usize,
                warmups: num("LEDGERSHIELD_CONTROLBENCH_SLEEPER_WARMUPS", 3, 10) as usize,
                ..QuarterConfig::default()
            },
        }
    }
}

/// Curated cases, then challenge variants, holdouts, twins and the ControlBench sequence (each
/// block only if enabled). Every generated case passes [`check_generated`] or the build fails.
pub fn build_pool(set: &FixtureSet, cfg: &PoolConfig) -> Result<FixtureSet, GenError> {
    let mut generated: Vec<Case> = Vec::new();
    if cfg.include_challenge {
        generated.extend(generators::challenge(
            set,
            cfg.challenge_variants,
            cfg.challenge_seed,
        ));
    }
    if cfg.include_holdout {
        generated.extend(generators::holdout(
            set,
            cfg.holdout_variants,
            cfg.holdout_seed,
        ));
    }
    if cfg.include_twins {
        generated.extend(generators::twins(set, cfg.holdout_seed));
    }
    if cfg.include_controlbench {
        generated.extend(generators::controlbench(set, &cfg.quarter));
    }
    for c in &generated {
        let issues = check_generated(c, &set.world(c));
        if !issues.is_empty() {
            return Err(GenError::Invalid {
                case_id: c.case_id.clone(),
                issues,
            });
        }
    }
    let mut seen = BTreeSet::new();
    let mut cases = set.cases.clone();
    cases.extend(generated);
    for c in &cases {
        if !seen.insert(c.case_id.clone()) {
            return Err(GenError::DuplicateId(c.case_id.clone()));
        }
    }
    FixtureSet::from_parts(cases, set.master.clone()).map_err(|e| GenError::Fixture(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sample_is_the_curated_cases_then_every_pool_kind() {
        let set = FixtureSet::embedded().unwrap();
        let cases = curated_and_every_pool_kind(&set, 3, 2);
        let n = set.cases.len();
        assert_eq!(&cases[..n], &set.cases[..]);
        assert_eq!(cases.len(), n + 4 * 2, "two of each pool kind");
        let splits: Vec<&str> = cases[n..]
            .iter()
            .map(|c| c.benchmark_split.as_str())
            .collect();
        assert!(
            cases[n + 6..].iter().all(|c| c.controlbench.is_some()),
            "{splits:?}"
        );
        assert!(
            cases[..n + 6].iter().all(|c| c.controlbench.is_none()),
            "{splits:?}"
        );
    }

    #[test]
    fn env_defaults_and_flags() {
        let d = PoolConfig::from_lookup(|_| None);
        assert_eq!(d, PoolConfig::default());
        let c = PoolConfig::from_lookup(|k| match k {
            "LEDGERSHIELD_INCLUDE_CHALLENGE" => Some("off".into()),
            "LEDGERSHIELD_INCLUDE_TWINS" => Some("YES".into()),
            "LEDGERSHIELD_CONTROLBENCH_CASES" => Some("12".into()),
            "LEDGERSHIELD_CONTROLBENCH_SLEEPERS" => Some("99".into()),
            _ => None,
        });
        assert!(!c.include_challenge && c.include_twins);
        assert_eq!(c.quarter.length, 12);
        assert_eq!(c.quarter.sleepers, 8);
    }

    #[test]
    fn default_pool_is_45_and_all_generators_169() {
        let set = FixtureSet::embedded().unwrap();
        assert_eq!(
            build_pool(&set, &PoolConfig::default())
                .unwrap()
                .cases
                .len(),
            45
        );
        let all = PoolConfig {
            include_holdout: true,
            include_twins: true,
            include_controlbench: true,
            ..PoolConfig::default()
        };
        assert_eq!(build_pool(&set, &all).unwrap().cases.len(), 169);
    }
}
