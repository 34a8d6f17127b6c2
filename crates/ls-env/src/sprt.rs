//! Sequential hypothesis testing over the 12 latent hypotheses.
//!
//! A Bayesian belief with Wald boundaries, updated only on real observations: failed tool calls
//! carry no evidence, and each distinct piece of evidence (channel + what it was about) is counted
//! once, so repeating a tool cannot manufacture certainty. Log-likelihood ratios against `safe`
//! are kept for the documented payload.
//!
//! The test decides the *decision*, not the exact hypothesis (several hypotheses share a decision
//! and the channels cannot tell them apart). Each decision is a composite hypothesis whose
//! likelihood is the uniform mixture of its members' likelihoods (Wald's weight-function method):
//!
//! 1. Wald's binary test, risky against safe: Λ = ln(mean over the 11 risky hypotheses of L(h)
//!    / L(safe)). Λ ≤ B = ln(β/(1−α)) accepts `safe` (PAY); Λ ≥ A = ln((1−β)/α) establishes risk;
//!    in between the test continues.
//! 2. Once risk is established, a matrix SPRT over the risky decisions (HOLD, NEEDS_REVIEW,
//!    ESCALATE_FRAUD): a decision is accepted when its mixture likelihood beats every other risky
//!    decision's by A.
//!
//! The accepted hypothesis is the posterior argmax within the accepted decision. One bank mismatch
//! establishes risk but not which decision, so it accepts nothing.

use ls_core::text::round4;
use ls_core::{ActionName, Channel, Decision, Hypothesis};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

pub const ALPHA: f64 = 0.05;
/// The readiness a pending required check holds the boundary's input to: just under
/// `ls_grading::boundary::DECISION_READY_THRESHOLD`, above `MIN_DECISION_READINESS`.
const BELOW_DECISION_READY: f64 = ls_grading::boundary::DECISION_READY_THRESHOLD - 1e-4;
const _: () = assert!(BELOW_DECISION_READY > ls_grading::boundary::MIN_DECISION_READINESS);
pub const BETA: f64 = 0.10;
const N: usize = Hypothesis::COUNT;

/// Upper Wald boundary ln((1−β)/α).
pub fn upper() -> f64 {
    ((1.0 - BETA) / ALPHA).ln()
}
/// Lower Wald boundary ln(β/(1−α)).
pub fn lower() -> f64 {
    (BETA / (1.0 - ALPHA)).ln()
}

/// One channel outcome and its likelihood L(o|h) for the 12 hypotheses in canonical order.
pub struct Row {
    pub observation: &'static str,
    pub likelihood: [f64; N],
}

macro_rules! rows {
    ($($obs:literal => [$($v:literal),*]),* $(,)?) => { &[ $( Row { observation: $obs, likelihood: [$($v),*] } ),* ] };
}

/// Likelihood tables per channel (columns: S BF DB VT CB PV SC IC ML CF SP TE).
pub fn table(channel: Channel) -> &'static [Row] {
    match channel {
        Channel::CompareBankAccount => rows![
            "mismatch" => [0.02, 0.95, 0.05, 0.88, 0.72, 0.60, 0.84, 0.46, 0.68, 0.64, 0.18, 0.16],
            "match" => [0.98, 0.05, 0.95, 0.12, 0.28, 0.40, 0.16, 0.54, 0.32, 0.36, 0.82, 0.84],
        ],
        Channel::SearchLedger => rows![
            "duplicate_found" => [0.03, 0.10, 0.92, 0.14, 0.08, 0.06, 0.16, 0.20, 0.72, 0.80, 0.88, 0.74],
            "no_duplicate" => [0.97, 0.90, 0.08, 0.86, 0.92, 0.94, 0.84, 0.80, 0.28, 0.20, 0.12, 0.26],
        ],
        Channel::InspectEmailThread => rows![
            "domain_spoof_detected" => [0.01, 0.78, 0.05, 0.92, 0.94, 0.62, 0.87, 0.55, 0.50, 0.67, 0.18, 0.24],
            "domain_clean" => [0.99, 0.22, 0.95, 0.08, 0.06, 0.38, 0.13, 0.45, 0.50, 0.33, 0.82, 0.76],
        ],
        Channel::LookupVendorHistory => rows![
            "suspicious_history" => [0.10, 0.74, 0.18, 0.70, 0.30, 0.82, 0.78, 0.60, 0.52, 0.48, 0.35, 0.32],
            "clean_history" => [0.90, 0.26, 0.82, 0.30, 0.70, 0.18, 0.22, 0.40, 0.48, 0.52, 0.65, 0.68],
        ],
        Channel::CallbackVerificationResult => rows![
            "callback_dispute" => [0.01, 0.88, 0.04, 0.85, 0.36, 0.66, 0.82, 0.40, 0.46, 0.40, 0.10, 0.08],
            "callback_clean" => [0.94, 0.05, 0.90, 0.08, 0.32, 0.24, 0.15, 0.55, 0.40, 0.44, 0.78, 0.82],
            "callback_suspicious_confirm" => [0.04, 0.08, 0.06, 0.20, 0.34, 0.12, 0.28, 0.62, 0.36, 0.28, 0.10, 0.12],
        ],
        Channel::DuplicateClusterReport => rows![
            "cluster_detected" => [0.02, 0.06, 0.95, 0.10, 0.04, 0.06, 0.12, 0.18, 0.76, 0.82, 0.90, 0.78],
            "no_cluster" => [0.98, 0.94, 0.05, 0.90, 0.96, 0.94, 0.88, 0.82, 0.24, 0.18, 0.10, 0.22],
        ],
        Channel::BankChangeApprovalChain => rows![
            "mismatch_found" => [0.01, 0.92, 0.05, 0.78, 0.40, 0.55, 0.84, 0.62, 0.48, 0.44, 0.08, 0.06],
            "chain_clean" => [0.99, 0.08, 0.95, 0.22, 0.60, 0.45, 0.16, 0.38, 0.52, 0.56, 0.92, 0.94],
        ],
        Channel::PoReconciliationReport => rows![
            "reconciled_with_flags" => [0.04, 0.08, 0.70, 0.12, 0.10, 0.74, 0.34, 0.58, 0.22, 0.24, 0.42, 0.46],
            "po_clean" => [0.96, 0.92, 0.30, 0.88, 0.90, 0.26, 0.66, 0.42, 0.78, 0.76, 0.58, 0.54],
        ],
        Channel::ReceiptReconciliationReport => rows![
            "reconciled_with_flags" => [0.06, 0.10, 0.62, 0.14, 0.10, 0.70, 0.30, 0.50, 0.20, 0.20, 0.38, 0.40],
            "receipt_clean" => [0.94, 0.90, 0.38, 0.86, 0.90, 0.30, 0.70, 0.50, 0.80, 0.80, 0.62, 0.60],
        ],
    }
}

fn clamp_l(v: f64) -> f64 {
    v.clamp(0.001, 0.999)
}

/// The belief state.
#[derive(Debug, Clone, PartialEq)]
pub struct Sprt {
    /// Unnormalised log posterior per hypothesis (uniform prior).
    log_post: [f64; N],
    /// `softmax(log_post)`, kept in step with it: the posterior is read ~20 times per episode
    /// (distances, readiness, VoI, the watchdog) and changes only in `observe`.
    posterior: [f64; N],
    pub observations_used: u32,
    seen_evidence: BTreeSet<String>,
    /// Channels that produced at least one observation (VoI of a repeat is zero).
    pub observed_channels: BTreeSet<Channel>,
    pub last_observation: Option<(String, String)>,
}

impl Default for Sprt {
    fn default() -> Self {
        Self {
            log_post: [0.0; N],
            posterior: softmax(&[0.0; N]),
            observations_used: 0,
            seen_evidence: BTreeSet::new(),
            observed_channels: BTreeSet::new(),
            last_observation: None,
        }
    }
}

impl Sprt {
    /// Apply one observation. `evidence_key` identifies the piece of evidence; a key seen before
    /// is ignored. Returns whether the belief changed.
    pub fn observe(
        &mut self,
        channel: Channel,
        observation: &str,
        evidence_key: &str,
        tool_name: &str,
    ) -> bool {
        let Some(row) = table(channel).iter().find(|r| r.observation == observation) else {
            return false;
        };
        if !self
            .seen_evidence
            .insert(format!("{}|{evidence_key}", channel.as_str()))
        {
            return false;
        }
        for (lp, l) in self.log_post.iter_mut().zip(row.likelihood) {
            *lp += clamp_l(l).ln();
        }
        self.posterior = softmax(&self.log_post);
        self.observations_used += 1;
        self.observed_channels.insert(channel);
        self.last_observation = Some((tool_name.to_owned(), observation.to_owned()));
        true
    }

    /// Posterior after a hypothetical observation (no bookkeeping).
    pub fn posterior_after(&self, row: &Row) -> [f64; N] {
        let mut lp = self.log_post;
        for (x, l) in lp.iter_mut().zip(row.likelihood) {
            *x += clamp_l(l).ln();
        }
        softmax(&lp)
    }

    pub fn posterior(&self) -> [f64; N] {
        debug_assert_eq!(
            self.posterior,
            softmax(&self.log_post),
            "the posterior follows the log posterior"
        );
        self.posterior
    }

    /// LLR of each hypothesis against `safe` (index 0 is 0).
    pub fn llr(&self) -> [f64; N] {
        let mut out = [0.0; N];
        for (i, o) in out.iter_mut().enumerate().skip(1) {
            *o = self.log_post[i] - self.log_post[0];
        }
        out
    }

    /// Distance to the decision boundary per hypothesis, in [0, 1].
    pub fn distances(&self) -> [f64; N] {
        let post = self.posterior();
        let llr = self.llr();
        let a = upper();
        let mut d = [1.0; N];
        d[0] = 1.0 - post[0];
        for i in 1..N {
            // `max`/`min` map a NaN to 0 where `clamp` would keep it.
            #[allow(clippy::manual_clamp)]
            let di = ((a - llr[i]) / a).max(0.0).min(1.0);
            d[i] = di;
        }
        d
    }

    /// Readiness to decide: 1 − the smallest distance to a boundary.
    pub fn readiness(&self) -> f64 {
        let m = self.distances().into_iter().fold(f64::INFINITY, f64::min);
        (1.0 - m).clamp(0.0, 1.0)
    }

    /// The readiness the control boundary reads: [`Sprt::readiness`], held just under the
    /// boundary's `decision_ready` threshold while a check the family's policy requires is
    /// pending. One strong observation (a bank mismatch, a spoofed sender) brings the evidence
    /// near a Wald boundary, and the boundary then called the phase `decision_ready` before the
    /// three-way match (the teacher's CASE-C-003 episode, before its ledger search). The hold is
    /// above the boundary's minimum readiness for a decision, so no decision is blocked that was
    /// not; the grade's resolution-state component reads this readiness (0.15 of it), so a
    /// decision taken before the policy's checks gets at most the held value there (the teacher
    /// runs every check and its curated scores are unchanged).
    pub fn policy_readiness(&self, readiness: &ReadinessInput<'_>) -> f64 {
        let r = self.readiness();
        if readiness.pending_checks().is_empty() {
            r
        } else {
            r.min(BELOW_DECISION_READY)
        }
    }

    /// Log of the uniform-mixture likelihood of the hypotheses `keep` selects (up to the common
    /// constant of the log posterior).
    fn mixture_log_likelihood(&self, keep: impl Fn(Hypothesis) -> bool) -> f64 {
        let members: Vec<f64> = Hypothesis::ALL
            .iter()
            .zip(self.log_post)
            .filter(|(h, _)| keep(**h))
            .map(|(_, l)| l)
            .collect();
        debug_assert!(!members.is_empty(), "every decision has a hypothesis");
        let m = members.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        m + (members.iter().map(|l| (l - m).exp()).sum::<f64>() / members.len() as f64).ln()
    }

    /// Stage 1 statistic: ln(mixture likelihood of the risky hypotheses / likelihood of safe).
    pub fn risk_llr(&self) -> f64 {
        self.mixture_log_likelihood(|h| h != Hypothesis::Safe)
            - self.log_post[Hypothesis::Safe.index()]
    }

    /// The decision the sequential test accepts, if it has reached a boundary (module docs).
    pub fn accepted_decision(&self) -> Option<Decision> {
        let risk = self.risk_llr();
        if risk <= lower() {
            return Some(Decision::Pay);
        }
        if risk < upper() {
            return None;
        }
        const RISKY: [Decision; 3] = [
            Decision::Hold,
            Decision::NeedsReview,
            Decision::EscalateFraud,
        ];
        let ll = RISKY.map(|d| self.mixture_log_likelihood(|h| h.decision() == d));
        (0..RISKY.len())
            .find(|&i| {
                (0..RISKY.len())
                    .filter(|j| *j != i)
                    .all(|j| ll[i] - ll[j] >= upper())
            })
            .map(|i| RISKY[i])
    }

    /// The decision the evidence favours so far: the accepted one at a boundary, else the
    /// decision whose mixture likelihood (each decision's hypotheses weighted uniformly, as in
    /// the test itself) is highest. The posterior argmax would favour a decision for how many
    /// hypotheses it has (eight escalate, one pays), and at a tie it would recommend PAY with no
    /// evidence at all; at an exact tie (no evidence yet) this recommends NEEDS_REVIEW.
    pub fn recommended_decision(&self) -> Decision {
        if let Some(d) = self.accepted_decision() {
            return d;
        }
        const ORDER: [Decision; 4] = [
            Decision::NeedsReview,
            Decision::Hold,
            Decision::EscalateFraud,
            Decision::Pay,
        ];
        let ll = ORDER.map(|d| self.mixture_log_likelihood(|h| h.decision() == d));
        let mut best = 0;
        for i in 1..ORDER.len() {
            if ll[i] > ll[best] + 1e-9 {
                best = i;
            }
        }
        ORDER[best]
    }

    /// The accepted hypothesis: the posterior argmax within the accepted decision.
    pub fn accepted(&self) -> Option<Hypothesis> {
        let d = self.accepted_decision()?;
        let p = self.posterior();
        Hypothesis::ALL
            .iter()
            .enumerate()
            .filter(|(_, h)| h.decision() == d)
            .fold(
                None,
                |best: Option<(usize, Hypothesis)>, (i, h)| match best {
                    Some((b, _)) if p[b] + 1e-12 >= p[i] => best,
                    _ => Some((i, *h)),
                },
            )
            .map(|(_, h)| h)
    }

    /// Potential for reward shaping: readiness to decide.
    pub fn potential(&self) -> f64 {
        self.readiness()
    }

    pub fn entropy(&self) -> f64 {
        -self
            .posterior()
            .iter()
            .filter(|p| **p > 0.0)
            .map(|p| p * p.ln())
            .sum::<f64>()
    }

    /// Expected remaining observations to reach a boundary (0.45 nats per observation).
    pub fn expected_sample_number(&self) -> f64 {
        let a = upper();
        let llr = self.llr();
        let mean = llr.iter().skip(1).map(|l| (a - l).max(0.0)).sum::<f64>() / (N - 1) as f64;
        mean / 0.45
    }

    /// The documented `sprt_state` payload. `decision_ready` needs both a boundary and the
    /// checks the family's policy requires (`readiness.pending_checks()` empty): evidence alone
    /// can cross Wald's boundary early (one bank mismatch on a Task B case), but the policy says
    /// no decision before the three-way match, so the test is not "ready" before it either.
    pub fn payload(&self, readiness: &ReadinessInput<'_>) -> SprtPayload {
        let post = self.posterior();
        let llr = self.llr();
        let dist = self.distances();
        let accepted = self.accepted();
        let recommended = self.recommended_decision();
        let pending = readiness.pending_checks();
        let optimal_stopping_reached = readiness.optimal_stopping_reached;
        SprtPayload {
            hypotheses: Hypothesis::ALL.iter().map(|h| h.as_str()).collect(),
            log_likelihood_ratios: per_hypothesis(1, |i| llr[i]),
            posterior_probabilities: per_hypothesis(0, |i| post[i]),
            upper_boundaries: per_hypothesis(1, |_| upper()),
            lower_boundaries: per_hypothesis(1, |_| lower()),
            observations_used: self.observations_used,
            decision_ready: accepted.is_some() && pending.is_empty(),
            pending_required_checks: pending.iter().map(|a| a.as_str()).collect(),
            optimal_stopping_reached,
            expected_sample_number: round4(self.expected_sample_number()),
            distance_to_boundary: per_hypothesis(0, |i| dist[i]),
            accepted_hypothesis: accepted.map(|h| h.as_str()),
            recommended_decision: recommended.as_str(),
            belief_entropy: ls_core::text::round_to(self.entropy(), 6),
            potential: round4(self.potential()),
            decision_readiness: round4(self.readiness()),
            last_observation: self.last_observation.as_ref().map(|(t, o)| {
                BTreeMap::from([("tool_name", t.clone()), ("observation_key", o.clone())])
            }),
        }
    }
}

/// What the payload's readiness reads besides the belief: the stopping rule's verdict and the
/// checks the task family's policy requires (`ls_grading::trajectory::required_tools`, a
/// function of the family alone, so it carries no label) against what the agent performed.
pub struct ReadinessInput<'a> {
    pub optimal_stopping_reached: bool,
    pub required_checks: &'a [ActionName],
    /// The actions run so far (a check that ran and failed, such as a goods receipt that does
    /// not exist, has been performed).
    pub performed: &'a BTreeSet<ActionName>,
}

impl ReadinessInput<'_> {
    /// The required checks not yet performed, in the policy's order.
    pub fn pending_checks(&self) -> Vec<ActionName> {
        self.required_checks
            .iter()
            .copied()
            .filter(|a| !self.performed.contains(a))
            .collect()
    }
}

/// `value(i)` of every hypothesis from index `skip` on (1 skips `safe`, which the LLRs and
/// boundaries are against), rounded, by name.
fn per_hypothesis(skip: usize, value: impl Fn(usize) -> f64) -> BTreeMap<&'static str, f64> {
    Hypothesis::ALL
        .iter()
        .enumerate()
        .skip(skip)
        .map(|(i, h)| (h.as_str(), round4(value(i))))
        .collect()
}

fn softmax(lp: &[f64; N]) -> [f64; N] {
    let m = lp.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let mut out = [0.0; N];
    let mut z = 0.0;
    for (o, x) in out.iter_mut().zip(lp) {
        *o = (x - m).exp();
        z += *o;
    }
    for o in &mut out {
        *o /= z;
    }
    out
}

/// `sprt_state` as observed in instrumented mode.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SprtPayload {
    pub hypotheses: Vec<&'static str>,
    pub log_likelihood_ratios: BTreeMap<&'static str, f64>,
    pub posterior_probabilities: BTreeMap<&'static str, f64>,
    pub upper_boundaries: BTreeMap<&'static str, f64>,
    pub lower_boundaries: BTreeMap<&'static str, f64>,
    pub observations_used: u32,
    /// A decision is accepted at a boundary *and* no required check is pending.
    pub decision_ready: bool,
    /// The checks the family's policy requires that the agent has not performed yet.
    pub pending_required_checks: Vec<&'static str>,
    pub optimal_stopping_reached: bool,
    pub expected_sample_number: f64,
    pub distance_to_boundary: BTreeMap<&'static str, f64>,
    pub accepted_hypothesis: Option<&'static str>,
    pub recommended_decision: &'static str,
    pub belief_entropy: f64,
    pub potential: f64,
    pub decision_readiness: f64,
    pub last_observation: Option<BTreeMap<&'static str, String>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_checks(performed: &BTreeSet<ActionName>) -> ReadinessInput<'_> {
        ReadinessInput {
            optimal_stopping_reached: false,
            required_checks: &[],
            performed,
        }
    }

    #[test]
    fn boundaries_match_wald() {
        assert!((upper() - 18f64.ln()).abs() < 1e-12);
        assert!((lower() - (0.1f64 / 0.95).ln()).abs() < 1e-12);
    }

    #[test]
    fn uniform_prior_at_reset() {
        let s = Sprt::default();
        assert!((s.posterior()[0] - 1.0 / 12.0).abs() < 1e-12);
        assert!((s.entropy() - 12f64.ln()).abs() < 1e-9);
        assert!((s.readiness() - 1.0 / 12.0).abs() < 1e-9);
        assert!((s.expected_sample_number() - upper() / 0.45).abs() < 1e-9);
    }

    #[test]
    fn repeated_evidence_counts_once() {
        let mut s = Sprt::default();
        assert!(s.observe(
            Channel::CompareBankAccount,
            "mismatch",
            "northwind|IN99",
            "compare_bank_account"
        ));
        let once = s.posterior();
        assert!(!s.observe(
            Channel::CompareBankAccount,
            "mismatch",
            "northwind|IN99",
            "compare_bank_account"
        ));
        assert_eq!(once, s.posterior());
        assert_eq!(s.observations_used, 1);
    }

    #[test]
    fn one_mismatch_does_not_accept_many_hypotheses() {
        let mut s = Sprt::default();
        s.observe(
            Channel::CompareBankAccount,
            "mismatch",
            "k",
            "compare_bank_account",
        );
        assert_eq!(
            s.accepted(),
            None,
            "bank mismatch alone cannot separate bank_fraud from vendor_takeover"
        );
        assert!(
            s.readiness() > 0.55,
            "but it is strong evidence against safe"
        );
    }

    #[test]
    fn consistent_evidence_reaches_walds_boundaries() {
        // A spoofed, disputed bank change: risk established, then ESCALATE_FRAUD beats HOLD and
        // NEEDS_REVIEW by the upper boundary.
        let mut s = Sprt::default();
        assert_eq!(s.accepted_decision(), None, "no decision at the prior");
        s.observe(
            Channel::CompareBankAccount,
            "mismatch",
            "k",
            "compare_bank_account",
        );
        assert_eq!(
            s.accepted_decision(),
            None,
            "one mismatch establishes risk, not the decision"
        );
        for (c, o) in [
            (Channel::InspectEmailThread, "domain_spoof_detected"),
            (Channel::CallbackVerificationResult, "callback_dispute"),
            (Channel::BankChangeApprovalChain, "mismatch_found"),
        ] {
            s.observe(c, o, "k", c.as_str());
        }
        assert!(s.risk_llr() >= upper());
        assert_eq!(s.accepted_decision(), Some(Decision::EscalateFraud));
        assert_eq!(
            s.accepted().map(Hypothesis::decision),
            Some(Decision::EscalateFraud)
        );
        let done: BTreeSet<ActionName> = BTreeSet::new();
        assert!(s.payload(&no_checks(&done)).decision_ready);
        // The family's policy still requires the three-way match: not ready before it.
        let b = [ActionName::LookupPo, ActionName::LookupReceipt];
        let mut performed = BTreeSet::from([ActionName::LookupPo]);
        let pending = ReadinessInput {
            optimal_stopping_reached: true,
            required_checks: &b,
            performed: &performed,
        };
        let p = s.payload(&pending);
        assert!(
            !p.decision_ready,
            "a boundary is not readiness before the checks"
        );
        assert_eq!(p.pending_required_checks, vec!["lookup_receipt"]);
        // The boundary's input: held under the decision_ready threshold while a check is pending.
        assert!(s.readiness() >= ls_grading::boundary::DECISION_READY_THRESHOLD);
        assert!(s.policy_readiness(&pending) < ls_grading::boundary::DECISION_READY_THRESHOLD);
        assert!(s.policy_readiness(&pending) > ls_grading::boundary::MIN_DECISION_READINESS);
        performed.insert(ActionName::LookupReceipt);
        let all = ReadinessInput {
            optimal_stopping_reached: true,
            required_checks: &b,
            performed: &performed,
        };
        assert!(s.payload(&all).decision_ready);
        assert_eq!(s.policy_readiness(&all), s.readiness());
        // Clean controls: the lower boundary accepts safe.
        let mut s = Sprt::default();
        for (c, o) in [
            (Channel::CompareBankAccount, "match"),
            (Channel::InspectEmailThread, "domain_clean"),
            (Channel::SearchLedger, "no_duplicate"),
        ] {
            s.observe(c, o, "k", c.as_str());
        }
        assert!(s.risk_llr() <= lower());
        assert_eq!(s.accepted(), Some(Hypothesis::Safe));
    }

    #[test]
    fn recommendation_follows_the_decision_level_evidence() {
        let mut s = Sprt::default();
        // No evidence: a tie, so no PAY (the posterior argmax would pick `safe`).
        assert_eq!(s.recommended_decision(), Decision::NeedsReview);
        let done = BTreeSet::new();
        assert_eq!(
            s.payload(&no_checks(&done)).recommended_decision,
            "NEEDS_REVIEW"
        );
        // PO reconciliation flags favour the duplicate-billing family (HOLD) although eight
        // escalation hypotheses share the remaining posterior mass.
        s.observe(
            Channel::PoReconciliationReport,
            "reconciled_with_flags",
            "po",
            "po_reconciliation_report",
        );
        assert_eq!(s.accepted_decision(), None);
        assert_eq!(s.recommended_decision(), Decision::Hold);
        // A clean bank match and callback move it to PAY.
        let mut c = Sprt::default();
        c.observe(
            Channel::CompareBankAccount,
            "match",
            "b",
            "compare_bank_account",
        );
        c.observe(
            Channel::CallbackVerificationResult,
            "callback_clean",
            "cb",
            "callback_verification_result",
        );
        assert_eq!(c.recommended_decision(), Decision::Pay);
    }

    #[test]
    fn unknown_observation_is_ignored() {
        let mut s = Sprt::default();
        assert!(!s.observe(Channel::SearchLedger, "nonsense", "k", "search_ledger"));
        assert_eq!(s.observations_used, 0);
    }
}
