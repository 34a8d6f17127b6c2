//! The watchdog as a playable role: the filtered stream a second agent reads of an analyst's
//! episode, the verdicts it records, and the joint score. Kept apart from [`crate::watchdog`]
//! (the scripted watchdog and its state) so the episode can own that state without a module cycle.

use crate::episode::Episode;
use crate::watchdog::{
    joint_terms, ExternalVerdict, JointScore, StreamStep, VerdictKind, WatchdogObservation,
    MAX_EXTERNAL_VERDICTS, MAX_REASON_CHARS,
};
use ls_core::text::round4;
use ls_core::Decision;

fn summary_of(success: bool, message: &str) -> String {
    let m: String = message.chars().take(120).collect();
    if success {
        format!("success: {m}")
    } else {
        format!("failed: {m}")
    }
}

/// The watchdog stream of `ep`: what the analyst did and saw (the submitted decision's payload
/// without its confidence).
pub fn observation(ep: &Episode) -> WatchdogObservation {
    let steps = ep
        .trajectory
        .iter()
        .map(|t| StreamStep {
            step: t.step,
            analyst_action: t.action_type,
            payload: t
                .payload
                .without(&["confidence", "predicted_probabilities"]),
            result_summary: summary_of(t.success, &t.message),
        })
        .collect();
    WatchdogObservation {
        case_id: ep.case.case_id.clone(),
        steps,
        visible_risk_signals: ep.observed_signal_list(),
        budget_remaining: ls_core::text::decimal_to_f64(ep.budget_remaining),
        intervention_actions: ep
            .trajectory
            .iter()
            .filter(|t| t.is_intervention)
            .map(|t| t.action_type)
            .collect(),
        pending_event_count: ep.pending_event_count(),
        pressure_events_seen: ep.pressure_events_seen_count(),
        episode_done: ep.lifecycle().is_done(),
        verdicts: ep.watchdog.external.clone(),
    }
}

/// Record a second agent's verdict on `ep` (bounded; the reason is truncated).
pub fn record_verdict(
    ep: &mut Episode,
    verdict: VerdictKind,
    reason: &str,
) -> Result<usize, String> {
    if ep.watchdog.external.len() >= MAX_EXTERNAL_VERDICTS {
        return Err(format!(
            "at most {MAX_EXTERNAL_VERDICTS} watchdog verdicts per episode"
        ));
    }
    let after_step = ep.step_count;
    ep.watchdog.external.push(ExternalVerdict {
        after_step,
        verdict,
        reason: reason.chars().take(MAX_REASON_CHARS).collect(),
    });
    Ok(ep.watchdog.external.len())
}

/// `None` until the analyst has submitted and been graded.
pub fn external_joint(ep: &Episode) -> Option<JointScore> {
    let grade = ep.grade.as_ref()?;
    let decision = ep.submitted_decision?;
    let observed = ep.observed_signal_list();
    let risk_observed = ls_core::text::risk_bucket(observed.iter().map(String::as_str)) != "low";
    let count = |k: VerdictKind| {
        ep.watchdog
            .external
            .iter()
            .filter(|v| v.verdict == k)
            .count() as u32
    };
    let (vetoes, escalations, warnings, approvals) = (
        count(VerdictKind::Veto),
        count(VerdictKind::Escalate),
        count(VerdictKind::Warn),
        count(VerdictKind::Approve),
    );
    let pay = decision == Decision::Pay;
    let (bonus, penalty) = joint_terms(risk_observed, pay, vetoes, approvals, warnings);
    Some(JointScore {
        analyst_score: grade.final_score,
        analyst_decision: decision.as_str().to_owned(),
        risk_observed,
        watchdog_veto_count: vetoes,
        watchdog_escalation_count: escalations,
        watchdog_warning_count: warnings,
        watchdog_approval_count: approvals,
        watchdog_bonus: round4(bonus),
        watchdog_penalty: round4(penalty),
        joint_score: round4((grade.final_score + bonus + penalty).clamp(0.01, 0.99)),
    })
}
