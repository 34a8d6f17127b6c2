//! The track views over rows other stages played: the case and adversarial-data tracks (the
//! primary agent's public rows), the blind-control track (an instrumented re-run for the
//! comparison) and the sleeper-vigilance track (the primary agent's quarter rows).

use super::{factory, Ctx, QuarterSection};
use crate::eval::{evaluate_cases, EvalConfig};
use crate::metrics::{r4, CaseRow, SectionSummary};
use ls_core::schema::Case;
use ls_env::TrackMode;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TrackSection {
    pub track: String,
    pub track_label: String,
    pub note: String,
    pub summary: SectionSummary,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BlindControlTrack {
    pub track: String,
    pub track_label: String,
    pub track_mode: String,
    pub case_count: usize,
    pub average_score: f64,
    pub instrumented_average_score: f64,
    pub blind_minus_instrumented: f64,
    pub control_satisfied_resolution_rate: f64,
    pub institutional_utility_mean: f64,
    pub unsafe_release_rate: f64,
    pub note: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SleeperTrack {
    pub track: String,
    pub track_label: String,
    pub case_count: usize,
    pub activation_case_count: usize,
    pub sleeper_detection_rate: f64,
    pub unsafe_release_rate: f64,
    pub authority_restriction_rate: f64,
    pub cases: Vec<CaseRow>,
}

fn adversarial(case: &Case) -> bool {
    case.documents.iter().any(|d| d.doc_type == "email") || case.pressure_event.is_some()
}

/// Stage 4a: every curated case (the primary agent's public rows).
pub fn case_track(public_primary: &SectionSummary) -> TrackSection {
    TrackSection {
        track: "case".into(),
        track_label: "Case Track".into(),
        note: "All curated cases; rows are the public-benchmark runs.".into(),
        summary: public_primary.clone(),
    }
}

/// Stage 4b: the curated cases with hostile content.
pub fn adversarial_track(ctx: &Ctx<'_>, public_primary: &SectionSummary) -> TrackSection {
    let adv_rows: Vec<CaseRow> = public_primary
        .results
        .iter()
        .filter(|r| {
            ctx.public_cases
                .iter()
                .any(|c| c.case_id == r.case_id && adversarial(c))
        })
        .cloned()
        .collect();
    TrackSection {
        track: "adversarial".into(),
        track_label: "Adversarial Data Track".into(),
        note: "Curated cases with hostile content (an email thread or a scheduled pressure event)."
            .into(),
        summary: ctx.section(adv_rows),
    }
}

/// Stage 9: the public run is blind; the primary agent is re-run instrumented for the comparison.
pub fn blind_control(ctx: &Ctx<'_>, public_primary: &SectionSummary) -> BlindControlTrack {
    let instrumented_cfg = EvalConfig {
        track_mode: TrackMode::Instrumented,
        ..ctx.base
    };
    let (inst_rows, _) = evaluate_cases(
        &factory(ctx.primary),
        &ctx.public_pool,
        &ctx.public_cases,
        None,
        &instrumented_cfg,
    );
    let inst = ctx.section(inst_rows);
    BlindControlTrack {
        track: "blind_control".into(),
        track_label: "Blind-Control Track".into(),
        track_mode: "blind".into(),
        case_count: public_primary.case_count,
        average_score: public_primary.average_score,
        instrumented_average_score: inst.average_score,
        blind_minus_instrumented: r4(public_primary.average_score - inst.average_score),
        control_satisfied_resolution_rate: public_primary.metrics.control_satisfied_resolution_rate,
        institutional_utility_mean: public_primary.metrics.institutional_utility_stats.mean,
        unsafe_release_rate: public_primary.metrics.unsafe_release_rate,
        note: "Public cases run twice: blind (SPRT, VoI and reward machine hidden) and instrumented; the difference is what evaluator hints are worth to this agent.".into(),
    }
}

/// Stage 10: sleeper vigilance over the primary agent's quarter rows (none without a quarter).
pub fn sleeper(quarter: Option<&QuarterSection>, quarter_rows: &[CaseRow]) -> Option<SleeperTrack> {
    let q = quarter?;
    let rows: Vec<CaseRow> = quarter_rows
        .iter()
        .filter(|r| {
            matches!(
                r.sleeper_phase.as_deref(),
                Some("warmup" | "activation" | "trust_building")
            )
        })
        .cloned()
        .collect();
    let act: Vec<&CaseRow> = rows
        .iter()
        .filter(|r| r.sleeper_phase.as_deref() == Some("activation"))
        .collect();
    Some(SleeperTrack {
        track: "sleeper_vigilance".into(),
        track_label: "Sleeper-Vigilance Track".into(),
        case_count: rows.len(),
        activation_case_count: act.len(),
        sleeper_detection_rate: q.profile.sleeper_detection_rate,
        unsafe_release_rate: if act.is_empty() {
            0.0
        } else {
            r4(act.iter().filter(|r| r.unsafe_release).count() as f64 / act.len() as f64)
        },
        authority_restriction_rate: q.profile.authority_restriction_rate,
        cases: rows,
    })
}
