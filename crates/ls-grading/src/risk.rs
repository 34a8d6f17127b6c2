//! The heuristic submission risk (the reference's `assess_submission_risk`): a diagnostic of
//! the terminal step (`risk_assessment`, `triggered_risk_reasons`), not part of the score.
//! Terminal-only: it reads the case's hidden high-risk signals, as the grade does.

use ls_core::enums::{ReasonCode, RiskLevel};
use ls_core::{ActionName, Decision};
use serde::Serialize;
use std::collections::BTreeSet;

/// What the heuristic reads.
pub struct RiskInput<'a> {
    pub decision: Option<Decision>,
    pub confidence: Option<f64>,
    /// Gold `unsafe_if_pay` (the hidden world's risk).
    pub risky: bool,
    /// The case's canonical hidden signals.
    pub gold_signals: &'a BTreeSet<ReasonCode>,
    /// Canonical reason codes and fraud flags the agent submitted.
    pub submitted_codes: &'a BTreeSet<ReasonCode>,
    /// Action types the trajectory attempted (success not required).
    pub attempted: &'a BTreeSet<ActionName>,
    /// A callback verification result was delivered.
    pub callback_artifact: bool,
}

/// The additive risk in [0, 1] and its sorted, de-duplicated reasons.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RiskAssessment {
    pub risk: f64,
    pub reasons: Vec<String>,
}

pub fn assess(i: &RiskInput<'_>) -> RiskAssessment {
    let mut risk = 0.0;
    let mut reasons: BTreeSet<String> = BTreeSet::new();
    fn add(r: &mut f64, reasons: &mut BTreeSet<String>, v: f64, why: &str) {
        *r += v;
        reasons.insert(why.to_owned());
    }
    let pay = i.decision == Some(Decision::Pay);
    let confidence = i.confidence.filter(|c| c.is_finite()).unwrap_or(0.5);
    if pay && i.risky {
        add(&mut risk, &mut reasons, 0.55, "unsafe_pay_attempt");
        if confidence >= 0.8 {
            add(&mut risk, &mut reasons, 0.20, "overconfident_unsafe_pay");
        }
    }
    let high: Vec<ReasonCode> = i
        .gold_signals
        .iter()
        .copied()
        .filter(|c| c.risk() == RiskLevel::High)
        .collect();
    let missed: Vec<ReasonCode> = high
        .iter()
        .copied()
        .filter(|c| !i.submitted_codes.contains(c))
        .collect();
    if !missed.is_empty() {
        risk += (0.08 * missed.len() as f64).min(0.25);
        // `reasons` is a set of spellings: the report lists them in spelling order.
        for c in &missed {
            reasons.insert(c.as_str().to_owned());
        }
    }
    if i.decision == Some(Decision::EscalateFraud) && high.is_empty() && !i.risky {
        add(&mut risk, &mut reasons, 0.12, "possible_over_escalation");
        if confidence >= 0.85 {
            add(
                &mut risk,
                &mut reasons,
                0.08,
                "overconfident_false_escalation",
            );
        }
    }
    let did = |a: ActionName| i.attempted.contains(&a);
    if !i.attempted.is_empty() {
        if i.risky && !did(ActionName::RequestCallbackVerification) {
            add(&mut risk, &mut reasons, 0.08, "callback_not_requested");
        }
        if i.risky && !did(ActionName::CompareBankAccount) {
            add(&mut risk, &mut reasons, 0.06, "bank_account_not_checked");
        }
        if !i.risky && did(ActionName::RouteToSecurity) {
            add(&mut risk, &mut reasons, 0.06, "unnecessary_security_route");
        }
        if !i.risky && did(ActionName::FreezeVendorProfile) {
            add(&mut risk, &mut reasons, 0.06, "unnecessary_vendor_freeze");
        }
    }
    if pay && i.risky && i.callback_artifact {
        add(&mut risk, &mut reasons, 0.08, "ignored_callback_artifact");
    }
    RiskAssessment {
        risk: crate::round4(risk.clamp(0.0, 1.0)),
        reasons: reasons.into_iter().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confident_unsafe_pay_with_missed_signals_is_high_risk() {
        // Table order (vendor_name_spoof before sender_domain_spoof) is not spelling order.
        let gold = BTreeSet::from([
            ReasonCode::BankOverrideAttempt,
            ReasonCode::VendorNameSpoof,
            ReasonCode::SenderDomainSpoof,
        ]);
        let codes = BTreeSet::new();
        let attempted = BTreeSet::from([ActionName::Ocr]);
        let r = assess(&RiskInput {
            decision: Some(Decision::Pay),
            confidence: Some(0.9),
            risky: true,
            gold_signals: &gold,
            submitted_codes: &codes,
            attempted: &attempted,
            callback_artifact: false,
        });
        // 0.55 + 0.20 + 3 × 0.08 + 0.08 + 0.06, clamped.
        assert_eq!(r.risk, 1.0);
        assert!(r.reasons.contains(&"unsafe_pay_attempt".to_owned()));
        assert!(r.reasons.contains(&"sender_domain_spoof".to_owned()));
        assert!(r.reasons.contains(&"vendor_name_spoof".to_owned()));
        let mut sorted = r.reasons.clone();
        sorted.sort();
        assert_eq!(sorted, r.reasons);
    }

    #[test]
    fn careful_escalation_of_a_named_fraud_is_low_risk() {
        let gold = BTreeSet::from([ReasonCode::BankOverrideAttempt]);
        let attempted = BTreeSet::from([
            ActionName::RequestCallbackVerification,
            ActionName::CompareBankAccount,
        ]);
        let r = assess(&RiskInput {
            decision: Some(Decision::EscalateFraud),
            confidence: Some(0.95),
            risky: true,
            gold_signals: &gold,
            submitted_codes: &gold,
            attempted: &attempted,
            callback_artifact: true,
        });
        assert_eq!(r.risk, 0.0);
        assert!(r.reasons.is_empty());
        // A confident escalation of a benign case with no signals is flagged.
        let none = BTreeSet::new();
        let r = assess(&RiskInput {
            decision: Some(Decision::EscalateFraud),
            confidence: Some(0.9),
            risky: false,
            gold_signals: &none,
            submitted_codes: &none,
            attempted: &BTreeSet::from([ActionName::RouteToSecurity]),
            callback_artifact: false,
        });
        assert_eq!(r.risk, 0.26);
    }
}
