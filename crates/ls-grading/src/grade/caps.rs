//! Stage "caps": the adversarial falsifier and the TrustGraph, every cap on the score with its
//! reasons, and the reasons stage's caps.

use super::trust_graph::{build_trust_graph, TrustGraphParts};
use super::{coverage, Breakdown, Caps, Certified, Claims, Conduct, Intake};
use crate::falsifier::{self, FalsifierReport};
use crate::result_class::{self, ControlResolution};
use crate::BreakdownKey as K;
use crate::{normalized, reasons, GradingInput};
use ls_core::ActionName;
use std::collections::BTreeMap;

pub(super) fn evaluate(
    input: &GradingInput<'_>,
    intake: &Intake<'_>,
    cert: &Certified<'_>,
    bd: &mut Breakdown,
) -> Caps {
    let fals = falsify(input, intake, cert);
    let tg = build_trust_graph(
        input,
        &TrustGraphParts {
            invoice: intake.invoices.first(),
            certificate: &cert.parsed.cert,
            report: &cert.report,
            revealed_ids: &intake.revealed_ids,
            codes: &intake.codes.agent,
            counterfactual: &intake.cf_text,
            cert_required: cert.required,
        },
    );
    let authority_cap = input.authority_gate.filter(|g| g.blocking).map(|g| {
        if g.score_cap > 0.0 {
            g.score_cap
        } else {
            0.35
        }
    });
    let boundary_cap =
        input
            .control_boundary
            .blocking
            .then_some(if input.control_boundary.score_cap > 0.0 {
                input.control_boundary.score_cap
            } else {
                0.42
            });
    let falsifier_cap = fals.cap();
    let tg_cap = tg.cap(intake.risky || cert.required);
    let evidence_cap = input
        .submission
        .evidence_map
        .is_empty()
        .then_some(result_class::EMPTY_EVIDENCE_SCORE_CAP);
    bd.insert(K::authority_gate_cap, authority_cap.unwrap_or(1.0));
    bd.insert(K::control_boundary_cap, boundary_cap.unwrap_or(1.0));
    bd.insert(K::adversarial_falsifier_cap, falsifier_cap.unwrap_or(1.0));
    bd.insert(K::trust_graph_cap, tg_cap.unwrap_or(1.0));
    bd.insert(K::trust_graph_score, tg.evaluation.score);
    bd.insert(K::empty_evidence_cap, evidence_cap.unwrap_or(1.0));
    let mut caps = Caps {
        falsifier: fals,
        trust_graph: tg,
        authority: authority_cap,
        boundary: boundary_cap,
        falsifier_cap,
        trust_graph_cap: tg_cap,
        gate: cert.gate.cap,
        evidence: evidence_cap,
        reasons: BTreeMap::new(),
    };
    caps.record_reasons(input, cert);
    caps
}

impl Caps {
    /// Each applied cap's reasons under its name.
    fn record_reasons(&mut self, input: &GradingInput<'_>, cert: &Certified<'_>) {
        let reasons = &mut self.reasons;
        if !cert.gate.reasons.is_empty() {
            reasons.insert("certificate_gate".into(), cert.gate.reasons.clone());
        }
        if let Some(g) = input.authority_gate.filter(|g| g.blocking) {
            reasons.insert("authority_gate".into(), g.reasons.clone());
        }
        if input.control_boundary.blocking {
            reasons.insert(
                "control_boundary".into(),
                input
                    .control_boundary
                    .reasons
                    .iter()
                    .map(|r| (*r).to_owned())
                    .collect(),
            );
        }
        if self.falsifier.blocking {
            reasons.insert(
                "adversarial_falsifier".into(),
                self.falsifier
                    .findings
                    .iter()
                    .map(|f| f.code.clone())
                    .collect(),
            );
        }
        if self.trust_graph_cap.is_some() {
            reasons.insert(
                "trust_graph".into(),
                self.trust_graph.evaluation.reasons.clone(),
            );
        }
    }

    /// The reasons stage's caps, by name, under "reasons".
    /// The reasons stage's caps, by name, under "reasons", and what an unverified PAY lacks
    /// under "unverified_pay".
    pub(super) fn record_reason_caps(
        &mut self,
        reason_caps: &[(&'static str, f64)],
        pay_shortfalls: &[String],
    ) {
        if !reason_caps.is_empty() {
            self.reasons.insert(
                "reasons".into(),
                reason_caps.iter().map(|(k, _)| (*k).to_owned()).collect(),
            );
        }
        if !pay_shortfalls.is_empty() {
            self.reasons
                .insert("unverified_pay".into(), pay_shortfalls.to_vec());
        }
    }
}

/// The adversarial falsifier over the decision, the evidence and the certificate.
fn falsify(input: &GradingInput<'_>, intake: &Intake<'_>, cert: &Certified<'_>) -> FalsifierReport {
    let sub = input.submission;
    let policy_fail = sub
        .policy_checks
        .values()
        .any(|v| normalized(v).contains("fail"));
    falsifier::run(&falsifier::FalsifierInput {
        risky: intake.risky,
        decision: intake.decision,
        evidence_empty: sub.evidence_map.is_empty(),
        reason_codes_empty: intake.reason_codes_empty
            && sub.fraud_flags.as_ref().is_none_or(Vec::is_empty),
        policy_fail,
        pending: input.pending_artifact_ids.len(),
        observed: &intake.observed,
        attempted: &intake.attempted,
        certificate: &cert.report,
        boundary_blocking: input.control_boundary.blocking,
    })
}

/// The reasons stage's caps, given how much of the required controls the agent covered.
pub(super) fn reason_caps(
    intake: &Intake<'_>,
    conduct: &Conduct<'_>,
    claims: &Claims,
    resolution: &ControlResolution,
) -> Vec<(&'static str, f64)> {
    // Coverage of the controls (interventions) the case requires; its tools are investigation.
    let required_controls: Vec<&ActionName> = conduct
        .required_actions
        .iter()
        .filter(|a| a.is_intervention())
        .collect();
    // A resolution whose controls count as completed (or handed off) is not "skipping" them.
    let control_cov = if resolution.controls_completed || resolution.structured_exception {
        1.0
    } else {
        coverage(
            required_controls.len(),
            required_controls
                .iter()
                .filter(|a| !intake.successful.contains(**a))
                .count(),
        )
    };
    reasons::caps(
        &claims.reasons,
        intake.task,
        intake.risky,
        intake.decision,
        intake.decision_correct,
        control_cov,
    )
}
