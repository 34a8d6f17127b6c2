//! Stage 2: the holdout challenge (generated holdouts per seed, every ladder agent) and the
//! documented `generated_holdout_track` view of the primary agent's section.

use super::{Ctx, Unavailable};
use crate::eval::pool_of;
use crate::metrics::{stats, CaseRow, SectionSummary, Stats};
use ls_core::schema::Case;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HoldoutSeedReport {
    pub seed: u64,
    pub case_count: usize,
    pub average_score: f64,
    pub score_stats: Stats,
    pub trial_pass_rate: f64,
    pub consistent_pass_rate: f64,
    pub any_pass_rate: f64,
    pub results: Vec<CaseRow>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HoldoutSection {
    pub seed_count: usize,
    pub variants_per_case: usize,
    pub total_case_count: usize,
    pub average_score: f64,
    pub suite_average_stats: Stats,
    pub summary: SectionSummary,
    pub seed_reports: Vec<HoldoutSeedReport>,
}

/// The documented `generated_holdout_track`: the primary agent on the generated holdouts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GeneratedHoldoutTrack {
    pub track: String,
    pub track_label: String,
    pub seed_count: usize,
    pub variants_per_case: usize,
    pub total_case_count: usize,
    pub average_score: f64,
    pub control_satisfied_resolution_rate: f64,
    pub institutional_utility_mean: f64,
    pub unsafe_release_rate: f64,
    pub mechanism_breakdown: BTreeMap<String, crate::metrics::AggregateMetrics>,
    pub seed_reports: Vec<HoldoutSeedReport>,
}

impl GeneratedHoldoutTrack {
    pub fn from_section(h: &HoldoutSection) -> Self {
        Self {
            track: "generated_holdout".into(),
            track_label: "Generated-Holdout Track".into(),
            seed_count: h.seed_count,
            variants_per_case: h.variants_per_case,
            total_case_count: h.total_case_count,
            average_score: h.average_score,
            control_satisfied_resolution_rate: h.summary.metrics.control_satisfied_resolution_rate,
            institutional_utility_mean: h.summary.metrics.institutional_utility_stats.mean,
            unsafe_release_rate: h.summary.metrics.unsafe_release_rate,
            mechanism_breakdown: h.summary.mechanism_breakdown.clone(),
            seed_reports: h.seed_reports.clone(),
        }
    }
}

/// The generated holdout cases (by seed) and every agent's section on them.
#[derive(Debug, Clone, Default)]
pub struct HoldoutRun {
    pub cases: Vec<(u64, Vec<Case>)>,
    /// Empty when the generator failed (the track is then unavailable).
    pub sections: BTreeMap<String, HoldoutSection>,
}

pub fn run(ctx: &Ctx<'_>, unavailable: &mut Vec<Unavailable>) -> HoldoutRun {
    let cfg = ctx.cfg;
    let mut cases = Vec::new();
    for &seed in &cfg.holdout_seeds {
        match ctx.gen.holdout(seed, cfg.variants_per_case.clamp(1, 8)) {
            Ok(c) => cases.push((seed, c)),
            Err(e) => {
                unavailable.push(Unavailable {
                    track: "generated_holdout".into(),
                    reason: e,
                });
                return HoldoutRun {
                    cases,
                    sections: BTreeMap::new(),
                };
            }
        }
    }
    let sections = ctx
        .agents
        .iter()
        .map(|a| (a.clone(), agent_section(ctx, a, &cases)))
        .collect();
    HoldoutRun { cases, sections }
}

fn agent_section(ctx: &Ctx<'_>, agent: &str, cases: &[(u64, Vec<Case>)]) -> HoldoutSection {
    let mut seed_reports = Vec::new();
    let mut all_rows = Vec::new();
    for (seed, cases) in cases {
        let pool = pool_of(&ctx.master, cases);
        let rows = ctx.evaluate(agent, &pool, cases, Some("generated_holdout"));
        let s = ctx.section(rows.clone());
        seed_reports.push(HoldoutSeedReport {
            seed: *seed,
            case_count: rows.len(),
            average_score: s.average_score,
            score_stats: s.metrics.score_stats,
            trial_pass_rate: s.metrics.trial_pass_rate,
            consistent_pass_rate: s.metrics.consistent_pass_rate,
            any_pass_rate: s.metrics.any_pass_rate,
            results: rows.clone(),
        });
        all_rows.extend(rows);
    }
    let summary = ctx.section(all_rows);
    HoldoutSection {
        seed_count: seed_reports.len(),
        variants_per_case: ctx.cfg.variants_per_case,
        total_case_count: summary.case_count,
        average_score: summary.average_score,
        suite_average_stats: stats(
            &seed_reports
                .iter()
                .map(|s| s.average_score)
                .collect::<Vec<_>>(),
        ),
        summary,
        seed_reports,
    }
}
