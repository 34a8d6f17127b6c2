//! Stage 5: the portfolio track. The primary agent over five fixed four-case sequences of the
//! curated cases, one environment per sequence (institutional memory carries over).

use super::quarter::ledger_delta;
use super::{factory, Ctx};
use crate::eval::{run_sequence, MemorySnapshot};
use crate::metrics::{stats, CaseRow, Stats};
use ls_core::schema::Case;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PortfolioSequence {
    pub sequence_id: String,
    pub case_ids: Vec<String>,
    pub sequence_score_stats: Stats,
    pub control_satisfied_resolution_rate: f64,
    pub institutional_utility: f64,
    pub unsafe_release_rate: f64,
    pub ap_week_state_delta: BTreeMap<String, f64>,
    pub institutional_memory_before: MemorySnapshot,
    pub institutional_memory_after: MemorySnapshot,
    pub case_results: Vec<CaseRow>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PortfolioTrack {
    pub track: String,
    pub track_label: String,
    pub sequence_count: usize,
    pub institutional_utility_stats: Stats,
    pub control_satisfied_resolution_stats: Stats,
    pub unsafe_release_rate_stats: Stats,
    pub sequence_reports: Vec<PortfolioSequence>,
}

const SEQUENCES: [[&str; 4]; 5] = [
    ["CASE-D-002", "CASE-C-001", "CASE-D-001", "CASE-E-001"],
    ["CASE-B-003", "CASE-D-006", "CASE-D-003", "CASE-E-002"],
    ["CASE-A-001", "CASE-B-001", "CASE-C-001", "CASE-D-001"],
    ["CASE-A-004", "CASE-B-005", "CASE-C-004", "CASE-D-006"],
    ["CASE-D-004", "CASE-D-005", "CASE-E-001", "CASE-E-002"],
];

pub fn run(ctx: &Ctx<'_>) -> PortfolioTrack {
    let mut seq_reports = Vec::new();
    for (i, ids) in SEQUENCES.iter().enumerate() {
        let cases: Vec<Case> = ids
            .iter()
            .filter_map(|id| ctx.public_cases.iter().find(|c| c.case_id == *id).cloned())
            .collect();
        if cases.len() != ids.len() {
            continue;
        }
        let out = run_sequence(
            &factory(ctx.primary),
            &ctx.public_pool,
            &cases,
            Some("portfolio"),
            &ctx.base,
        );
        let s = ctx.section(out.rows.clone());
        seq_reports.push(PortfolioSequence {
            sequence_id: format!("portfolio-seq-{}", i + 1),
            case_ids: ids.iter().map(|x| (*x).to_owned()).collect(),
            sequence_score_stats: s.metrics.score_stats,
            control_satisfied_resolution_rate: s.metrics.control_satisfied_resolution_rate,
            institutional_utility: s.metrics.institutional_utility_stats.mean,
            unsafe_release_rate: s.metrics.unsafe_release_rate,
            ap_week_state_delta: ledger_delta(&out.memory_before, &out.memory_after),
            institutional_memory_before: out.memory_before,
            institutional_memory_after: out.memory_after,
            case_results: out.rows,
        });
    }
    let of =
        |f: fn(&PortfolioSequence) -> f64| stats(&seq_reports.iter().map(f).collect::<Vec<_>>());
    PortfolioTrack {
        track: "portfolio".into(),
        track_label: "Portfolio Track".into(),
        sequence_count: seq_reports.len(),
        institutional_utility_stats: of(|s| s.institutional_utility),
        control_satisfied_resolution_stats: of(|s| s.control_satisfied_resolution_rate),
        unsafe_release_rate_stats: of(|s| s.unsafe_release_rate),
        sequence_reports: seq_reports,
    }
}
