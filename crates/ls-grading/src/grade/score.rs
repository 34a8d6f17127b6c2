//! Stage "score": the weighted dimensions plus adjustments and penalties (the raw score), then
//! every cap, clamped into the task score range.

use super::{Adjustments, Breakdown, Caps, Claims, Dimensions, Intake, Resolved};
use crate::BreakdownKey as K;
use crate::{result_class, rubric, GradingInput};
use ls_core::{Decision, TaskType};

/// The raw score: the rubric's weighted sum, the adjustments and penalties, the Task B
/// perfect-clean override and the Task E link gate.
pub(super) fn raw(
    input: &GradingInput<'_>,
    intake: &Intake<'_>,
    dims: &Dimensions,
    adj: &Adjustments,
    claims: &Claims,
    certificate_adjustment: f64,
    bd: &mut Breakdown,
) -> f64 {
    let task = intake.task;
    let gold = &input.case.gold;
    let scores = &dims.scores;
    for (&k, &v) in scores {
        debug_assert!((0.0..=1.0).contains(&v), "{k} {v} outside [0, 1]");
        bd.insert_named(k, crate::round4(v));
    }
    let weighted = rubric::weighted_sum(task, scores);
    bd.insert(K::weighted_score, crate::round4(weighted));
    let mut raw = weighted
        + adj.degenerate
        + adj.compliance_adj
        + adj.currency_adj
        + adj.causal.adjustment
        + certificate_adjustment
        + adj.institutional
        + claims.overcontrol_penalty
        + claims.unsupported_claim_penalty
        + claims.pay_citation_penalty;
    let unsafe_penalty = if intake.unsafe_release {
        rubric::unsafe_pay_penalty(task)
    } else {
        0.0
    };
    raw -= unsafe_penalty;
    bd.insert(K::unsafe_pay_penalty, -unsafe_penalty);
    // Task B perfect-clean override: a clean PAY with every checked dimension perfect.
    if task == TaskType::TaskB
        && gold.decision == Some(Decision::Pay)
        && [
            "decision_score",
            "evidence_score",
            "policy_score",
            "discrepancy_score",
        ]
        .iter()
        .all(|k| scores.get(k) == Some(&1.0))
    {
        raw = 1.0;
        bd.insert(K::perfect_clean_override, 1.0);
    }
    // Task E link gates (only where the gold has links to find: a clean batch has none, and
    // requiring one link match there capped every correct PAY of a benign campaign case).
    if let Some(links) = dims.links.filter(|l| l.gold > 0) {
        if task == TaskType::TaskE && raw > rubric::TASK_E_LINK_GATE_THRESHOLD {
            let gl = links.gold as f64;
            let required = gl.clamp(1.0, 2.0);
            if (links.matched as f64) < required || (links.doc_refs as f64) < required.min(gl) {
                raw = raw.min(0.84);
                bd.insert(K::task_e_link_gate, 0.84);
            }
        }
    }
    raw
}

/// The final score: the raw score under the result class's cap, every gate cap and the
/// reasons stage's caps, clamped into the task score range and rounded.
///
/// A reasons-stage cap scales with the submission's own merit: a capped case scores at most
/// `cap × raw` (the raw score before any cap), not the cap itself. A blind policy's uncapped score
/// is mostly credit it collects without reading (its prior decision and codes, process credit,
/// wording), 0.5–0.8 on every case, so a flat cap handed it the cap on every case and its pool
/// mean was the cap plus its chance hits; in proportion, a capped case keeps the cap's share of
/// what it earned, and one chance hit no longer rides on a floor at the cap.
pub(super) fn capped(
    mut raw: f64,
    risky: bool,
    caps: &Caps,
    resolved: &Resolved,
    reason_caps: &[(&'static str, f64)],
    bd: &mut Breakdown,
) -> f64 {
    let merit = if raw.is_finite() {
        raw.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let class_cap = result_class::class_cap(
        resolved.class,
        risky,
        caps.authority.unwrap_or(0.35),
        caps.boundary.unwrap_or(0.42),
        caps.falsifier_cap.unwrap_or(0.54),
        caps.gate.unwrap_or(0.65),
    );
    bd.insert(K::result_class_cap, class_cap.unwrap_or(1.0));
    for cap in [
        caps.authority,
        caps.boundary,
        caps.falsifier_cap,
        caps.trust_graph_cap,
        caps.gate,
        caps.evidence,
        class_cap,
    ]
    .into_iter()
    .flatten()
    {
        debug_assert!((0.0..=1.0).contains(&cap), "cap {cap} outside [0, 1]");
        raw = raw.min(cap);
    }
    for (key, cap) in reason_caps {
        debug_assert!((0.0..=1.0).contains(cap), "{key} cap {cap} outside [0, 1]");
        bd.insert_named(key, *cap);
        raw = raw.min(cap * merit);
    }
    bd.insert(K::raw_score, crate::round4(raw));
    crate::round4(
        if raw.is_finite() {
            raw
        } else {
            crate::TASK_SCORE_MIN
        }
        .clamp(crate::TASK_SCORE_MIN, crate::TASK_SCORE_MAX),
    )
}
