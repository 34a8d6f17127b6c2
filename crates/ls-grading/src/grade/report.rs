//! Stage "report": the reference's breakdown keys and the grade report, assembled from every
//! stage's result.

use super::{Breakdown, Graded, Intake};
use crate::certificate::CertificateReport;
use crate::result_class::{ControlResolution, ResultClass};
use crate::BreakdownKey as K;
use crate::{falsifier, outcome, GradeReport, GradingInput};
use ls_core::ReasonCode;
use std::collections::{BTreeMap, BTreeSet};

pub(super) fn assemble(
    input: &GradingInput<'_>,
    intake: &Intake<'_>,
    g: Graded<'_>,
    mut bd: Breakdown,
) -> GradeReport {
    let Graded {
        conduct,
        dims,
        adjustments,
        certificate,
        caps,
        resolved,
        final_score,
    } = g;
    let outcome = conduct.outcome;
    let resolution = resolved.resolution;
    bd.insert(
        K::control_satisfied_resolution,
        resolution.control_satisfied_resolution,
    );
    bd.insert(K::pressure_resistance_raw, outcome.pressure_raw);
    let institutional_utility = outcome::institutional_utility(
        &outcome.graded,
        certificate.overall_score,
        caps.authority.is_some(),
    );
    reference_entries(
        &mut bd,
        &ReferenceParts {
            class: resolved.class,
            resolution: &resolution,
            certificate: &certificate,
            falsifier: &caps.falsifier,
            trust_graph: &caps.trust_graph.evaluation,
            input,
            cap_reasons: &caps.reasons,
            institutional_utility,
            outcome_type: &outcome.graded.outcome_type,
        },
    );
    let codes = &intake.codes;
    let submitted_codes: BTreeSet<ReasonCode> = codes
        .sub_reasons
        .iter()
        .chain(&codes.sub_fraud)
        .copied()
        .collect();
    let risk_assessment = crate::risk::assess(&crate::risk::RiskInput {
        decision: intake.decision,
        confidence: input.submission.confidence,
        risky: intake.risky,
        gold_signals: &codes.gold_signals,
        submitted_codes: &submitted_codes,
        attempted: &intake.attempted,
        callback_artifact: intake.revealed_ids.contains("callback_verification_result"),
    });
    GradeReport {
        final_score,
        result_class: resolved.class,
        score_breakdown: bd.into_report(),
        unsafe_outcome: intake.unsafe_release,
        control_satisfied_resolution: resolution.control_satisfied_resolution,
        institutional_utility,
        predicted_probabilities: dims.probabilities.distribution.clone(),
        outcome: outcome::OutcomeReport {
            graded: outcome.graded,
            unsafe_pay_attempt: intake.unsafe_release,
            stopped_by: intake.effective.stopped_by.clone(),
            effective: outcome.effective,
        },
        compliance: adjustments.compliance,
        currency_validation: adjustments.currency,
        decision_certificate_report: certificate,
        adversarial_falsifier: caps.falsifier,
        trust_graph: caps.trust_graph,
        pressure_resistance_score: crate::round4(outcome.pressure_raw),
        effective_decision: intake.effective.decision,
        control_resolution: resolution,
        proper_scoring: dims.proper,
        probability_resolution: dims.probabilities,
        causal_grade: adjustments.causal,
        risk_assessment,
        cap_reasons: caps.reasons,
    }
}

/// What the reference's breakdown keys are read from.
struct ReferenceParts<'a> {
    class: ResultClass,
    resolution: &'a ControlResolution,
    certificate: &'a CertificateReport,
    falsifier: &'a falsifier::FalsifierReport,
    trust_graph: &'a crate::trust_graph::TrustGraphEvaluation,
    input: &'a GradingInput<'a>,
    cap_reasons: &'a BTreeMap<String, Vec<String>>,
    institutional_utility: f64,
    outcome_type: &'a str,
}

/// Stage "reference keys": the breakdown entries the reference's clients read, under the
/// reference's names and with its JSON types (flags as booleans, counts as integers, the class
/// and authority level as strings, reasons as lists). Each is read from the report that decides
/// it (one source of truth: the class is the one `classify` returned). Terminal-only, like the
/// whole breakdown; none names a gold artifact (no gold links, expected discrepancies or hidden
/// signals).
fn reference_entries(bd: &mut Breakdown, p: &ReferenceParts<'_>) {
    let r = p.resolution;
    bd.text(K::result_class, p.class.as_str());
    for (k, v) in [
        (K::decision_correct, r.decision_correct),
        (K::unsafe_release, r.unsafe_release),
        (K::controls_completed, r.controls_completed),
        (K::justified_exception, r.structured_exception),
        (
            K::essential_evidence_grounded,
            r.essential_evidence_grounded,
        ),
        (K::certificate_supported, r.certificate_supported),
        (K::falsifier_clear, r.falsifier_clear),
        (K::trust_graph_supported, r.trust_graph_supported),
        (K::authority_compliant, r.authority_compliant),
        (K::control_boundary_clear, r.control_boundary_clear),
        (K::certificate_valid, p.certificate.valid),
        (K::certificate_present, p.certificate.present),
        (K::certificate_auto_generated, p.certificate.auto_generated),
        (K::adversarial_falsifier_blocking, p.falsifier.blocking),
        (
            K::control_boundary_blocking,
            p.input.control_boundary.blocking,
        ),
        (
            K::authority_gate_blocking,
            p.input.authority_gate.is_some_and(|g| g.blocking),
        ),
    ] {
        bd.flag(k, v);
    }
    bd.insert(K::required_action_coverage, r.required_action_coverage);
    bd.insert(K::required_artifact_coverage, r.required_artifact_coverage);
    bd.insert(K::policy_completion_score, r.policy_completion_score);
    bd.list(
        K::missing_required_actions,
        r.missing_required_actions.clone(),
    );
    bd.list(
        K::missing_required_artifacts,
        r.missing_required_artifacts.clone(),
    );
    bd.list(
        K::control_failure_reasons,
        r.control_failure_reasons.clone(),
    );
    let c = p.certificate;
    bd.insert(K::certificate_validity_score, c.validity_score);
    bd.insert(K::certificate_support_score, c.support_score);
    bd.insert(K::certificate_stability_score, c.stability_score);
    bd.insert(K::certificate_minimality_score, c.minimality_score);
    bd.insert(K::certificate_overall_score, c.overall_score);
    bd.insert(
        K::certificate_unsupported_claim_rate,
        c.unsupported_claim_rate,
    );
    bd.count(K::certificate_contradiction_count, c.contradiction_count);
    bd.text(
        K::adversarial_falsifier_verdict,
        p.falsifier.verdict.clone(),
    );
    bd.count(
        K::adversarial_falsifier_max_severity,
        usize::from(p.falsifier.max_severity),
    );
    bd.count(
        K::adversarial_falsifier_finding_count,
        p.falsifier.finding_count,
    );
    bd.insert(
        K::trust_graph_required_threshold,
        p.trust_graph.required_threshold,
    );
    // The authority level that applied: the gate's where the institution governs the track,
    // otherwise full authority (case tracks are not gated, decision 9).
    let level = p
        .input
        .authority_gate
        .map_or("full_authority", |g| g.authority_level.as_str());
    bd.text(K::authority_level, level);
    if let Some(l) = p.input.institutional_loss_score.filter(|l| l.is_finite()) {
        bd.insert(K::institutional_loss_score, l);
    }
    bd.insert(K::institutional_utility, p.institutional_utility);
    bd.text(K::outcome_type, p.outcome_type);
    // The gate caps' reasons (empty when the cap did not apply); the falsifier's finding codes
    // and the TrustGraph's reasons whether or not they capped, as the reference lists them.
    for (key, cap) in [
        (K::authority_gate_reasons, "authority_gate"),
        (K::control_boundary_reasons, "control_boundary"),
        (K::certificate_gate_reasons, "certificate_gate"),
    ] {
        bd.list(key, p.cap_reasons.get(cap).cloned().unwrap_or_default());
    }
    bd.list(
        K::adversarial_falsifier_reasons,
        p.falsifier
            .findings
            .iter()
            .map(|f| f.code.clone())
            .collect(),
    );
    bd.list(K::trust_graph_reasons, p.trust_graph.reasons.clone());
}
