//! Stage "class": the control resolution (what the agent resolved, and how) and the result
//! class `classify` returns for it.

use super::{Adjustments, Caps, Certified, Claims, Conduct, Intake, Resolved};
use crate::result_class::{self, ClassInput, ControlResolution};
use crate::{reasons, GradingInput};
use ls_core::submitted::HandoffSection;
use ls_core::{Decision, TaskType};

pub(super) fn resolve(
    input: &GradingInput<'_>,
    intake: &Intake<'_>,
    conduct: &Conduct<'_>,
    claims: &Claims,
    cert: &Certified<'_>,
    caps: &Caps,
    adjustments: &Adjustments,
) -> Resolved {
    let resolution = control_resolution(input, intake, conduct, claims, cert, caps);
    let false_positive = intake.task != TaskType::TaskA
        && !intake.risky
        && intake.decision.is_some_and(|d| d != Decision::Pay)
        && conduct.outcome.graded.outcome_type == "false_positive_operational_delay";
    let class = result_class::classify(&ClassInput {
        resolution: &resolution,
        authority_blocking: caps.authority.is_some(),
        boundary_blocking: input.control_boundary.blocking,
        malformed: malformed(input, intake, adjustments.degenerate),
        falsifier_blocking: caps.falsifier.blocking,
        explicit_certificate: cert.explicit,
        certificate_supported: resolution.certificate_supported,
        false_positive,
        certificate_gate_class: cert.gate.class,
    });
    Resolved { resolution, class }
}

fn control_resolution(
    input: &GradingInput<'_>,
    intake: &Intake<'_>,
    conduct: &Conduct<'_>,
    claims: &Claims,
    cert: &Certified<'_>,
    caps: &Caps,
) -> ControlResolution {
    let sub = input.submission;
    let risky = intake.risky;
    let (action_cov, artifact_cov) = (conduct.action_cov, conduct.artifact_cov);
    let structured_exception = conduct.handoff_quality >= 2.0 / 3.0
        && conduct
            .handoff
            .is_some_and(|p| matches!(p.summary, HandoffSection::Text(_)));
    let policy_completion = crate::round4((0.6 * action_cov + 0.4 * artifact_cov).clamp(0.0, 1.0));
    let (c, r) = (&cert.report, &claims.reasons);
    ControlResolution {
        decision_correct: intake.decision_correct,
        required_action_coverage: crate::round4(action_cov),
        required_artifact_coverage: crate::round4(artifact_cov),
        policy_completion_score: policy_completion,
        controls_completed: policy_completion >= if risky { 0.85 } else { 0.75 },
        structured_exception,
        essential_evidence_grounded: !sub.evidence_map.is_empty()
            && claims.evidence.grounded_fraction >= 0.5,
        certificate_supported: (!cert.explicit && !risky)
            || (c.valid && c.support_score >= 0.45 && c.unsupported_claim_rate <= 0.55),
        falsifier_clear: !caps.falsifier.blocking,
        trust_graph_supported: caps.trust_graph.evaluation.supported,
        authority_compliant: caps.authority.is_none(),
        control_boundary_clear: !input.control_boundary.blocking,
        unsafe_release: intake.unsafe_release,
        decision_reasons_missing: r.supported_recall() < reasons::MIN_SUPPORTED_RECALL
            || !r.pay_verified,
        overcontrolled: r.uncalled_interventions.len() >= 2,
        missing_required_actions: conduct.missing_actions.clone(),
        missing_required_artifacts: conduct.missing_artifacts.clone(),
        ..Default::default()
    }
    .finish()
}

/// A submission with no decision, no claims at all, or a degenerate one with nothing behind it.
fn malformed(input: &GradingInput<'_>, intake: &Intake<'_>, degenerate: f64) -> bool {
    let sub = input.submission;
    let claim_fields_empty = sub.evidence_map.is_empty()
        && intake.codes.agent.is_empty()
        && sub.policy_checks.is_empty()
        && sub.extracted_fields.is_empty()
        && sub.line_items.is_empty()
        && intake.cf_text.trim().is_empty()
        && sub.duplicate_links.as_ref().is_none_or(Vec::is_empty)
        && sub.cross_invoice_links.as_ref().is_none_or(Vec::is_empty);
    intake.decision.is_none()
        || claim_fields_empty
        || (intake.task != TaskType::TaskA
            && degenerate <= -0.08
            && sub.evidence_map.is_empty()
            && intake.reason_codes_empty
            && sub.policy_checks.is_empty())
}
