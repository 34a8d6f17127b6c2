//! Terminal grading as a pipeline of named stages, each a short function from typed
//! intermediates to the next: the submission read once ([`Intake`], `intake.rs`); what the agent
//! did — budget, outcome, trajectory ([`Conduct`], `conduct.rs`); its claims — evidence and the
//! reasons stage ([`Claims`], `claims.rs`); the dimension scores and calibration ([`Dimensions`],
//! `dimensions.rs`); the adjustments ([`Adjustments`], `adjustments.rs`); the decision
//! certificate and its gate ([`Certified`], `certified.rs`); the falsifier, the TrustGraph and
//! every cap with its reasons ([`Caps`], `caps.rs`); the control resolution and result class
//! ([`Resolved`], `class.rs`); the raw and final score (`score.rs`); and the report with the
//! reference's breakdown keys (`report.rs`). Breakdown entries are appended by the stage that
//! decides them ([`Breakdown`], one slot per [`crate::BreakdownKey`]) and read off in name order.

mod adjustments;
mod breakdown;
mod caps;
mod certified;
mod claims;
mod class;
mod conduct;
mod dimensions;
mod intake;
mod report;
mod score;
mod trust_graph;

use crate::causal::CausalReport;
use crate::certificate::{CertificateReport, Parsed};
use crate::compliance::ComplianceReport;
use crate::currency::CurrencyReport;
use crate::dimensions::{self as dim, EvidenceScore};
use crate::falsifier::FalsifierReport;
use crate::outcome::SimulatedOutcome;
use crate::proper::{ProperScore, ResolvedProbabilities};
use crate::reasons::ReasonsReport;
use crate::result_class::{ControlResolution, ResultClass};
use crate::trust_graph::TrustGraphReport;
use crate::{GradeReport, GradingInput};
use breakdown::Breakdown;
use ls_core::validate::InvoiceFacts;
use ls_core::{ActionName, Decision, HandoffPacket, ReasonCode, TaskType};
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

/// Grade a submission. Pure: same input, same report.
pub fn grade(input: &GradingInput<'_>) -> GradeReport {
    let mut bd = Breakdown::default();
    let intake = Intake::of(input);
    let cf = dim::CounterfactualText::new(&intake.cf_text);
    let conduct = conduct::evaluate(input, &intake, &mut bd);
    let claims = claims::evaluate(input, &intake, &conduct, &mut bd);
    let dims = dimensions::score(input, &intake, &conduct, &claims, &cf, &mut bd);
    let adjustments = adjustments::evaluate(input, &intake, &cf, &mut bd);
    let cert = certified::verify(input, &intake, &mut bd);
    let mut caps = caps::evaluate(input, &intake, &cert, &mut bd);
    let resolved = class::resolve(
        input,
        &intake,
        &conduct,
        &claims,
        &cert,
        &caps,
        &adjustments,
    );
    let raw = score::raw(
        input,
        &intake,
        &dims,
        &adjustments,
        &claims,
        cert.adjustment,
        &mut bd,
    );
    let reason_caps = caps::reason_caps(&intake, &conduct, &claims, &resolved.resolution);
    let unverified: &[String] = if claims.reasons.pay_verified {
        &[]
    } else {
        &claims.reasons.pay_shortfalls
    };
    caps.record_reason_caps(&reason_caps, unverified);
    let final_score = score::capped(raw, intake.risky, &caps, &resolved, &reason_caps, &mut bd);
    debug_assert!(
        (crate::TASK_SCORE_MIN..=crate::TASK_SCORE_MAX).contains(&final_score)
            && final_score == crate::round4(final_score),
        "a final score is in [{}, {}] at 4 dp: {final_score}",
        crate::TASK_SCORE_MIN,
        crate::TASK_SCORE_MAX
    );
    let graded = Graded {
        conduct,
        dims,
        adjustments,
        certificate: cert.report,
        caps,
        resolved,
        final_score,
    };
    report::assemble(input, &intake, graded, bd)
}

/// Stage "intake": the submission read once — its codes canonicalised, what the agent did and
/// saw, the decision graded beside the one the institution executes.
struct Intake<'a> {
    task: TaskType,
    /// The agent's decision as submitted (a blocked PAY is still graded as PAY).
    decision: Option<Decision>,
    risky: bool,
    /// PAY submitted on a risky case.
    unsafe_release: bool,
    /// The gold decision, or the latent hypothesis's where the gold has none.
    expected_decision: Decision,
    decision_correct: bool,
    codes: Codes,
    effective: Effective,
    successful: BTreeSet<ActionName>,
    attempted: BTreeSet<ActionName>,
    revealed_refs: &'a crate::RefSet,
    revealed_ids: BTreeSet<&'a str>,
    /// Observed signals, normalised.
    observed: BTreeSet<Cow<'a, str>>,
    /// The delivered callback artifact's signal, normalised.
    callback_signal: Option<String>,
    /// `submission.counterfactual_text()`.
    cf_text: String,
    /// Facts of the case's invoices in document order (the caller's, or read here).
    invoices: Cow<'a, [InvoiceFacts]>,
    /// No reason codes submitted.
    reason_codes_empty: bool,
}

/// Every submitted and gold code list, canonicalised once.
///
/// A set's derived order is [`ReasonCode`]'s table order, not the codes' spelling: where the
/// order of a code collection reaches the report, its stage orders it by `as_str()` itself.
struct Codes {
    sub_reasons: Vec<ReasonCode>,
    sub_fraud: Vec<ReasonCode>,
    sub_campaign: Vec<ReasonCode>,
    sub_discrepancies: Vec<ReasonCode>,
    gold_reasons: BTreeSet<ReasonCode>,
    gold_fraud: BTreeSet<ReasonCode>,
    gold_campaign: BTreeSet<ReasonCode>,
    gold_discrepancies: BTreeSet<ReasonCode>,
    /// The gold's decision-relevant codes (all four lists).
    gold_signals: BTreeSet<ReasonCode>,
    /// The agent's codes in submission order, first occurrence only (as `canonical_codes`; there
    /// are 27 canonical codes, so the linear `contains` stays cheap).
    agent: Vec<ReasonCode>,
}

/// The effective decision: what the institution executes — the boundary's fallback first, then
/// the authority gate's; `stopped_by` names what stopped a PAY.
struct Effective {
    decision: Option<Decision>,
    stopped_by: Option<String>,
}

/// Stage "conduct": what the agent's actions did — outcome, trajectory components, coverage of
/// what the case requires.
struct Conduct<'a> {
    outcome: Outcomes,
    /// The actions the case requires (interventions only where it is risky).
    required_actions: Vec<ActionName>,
    investigation: f64,
    intervention: f64,
    efficiency: f64,
    resolution_state: f64,
    action_cov: f64,
    artifact_cov: f64,
    missing_actions: Vec<String>,
    missing_artifacts: Vec<String>,
    /// The handoff packet: the environment's, else the submission's.
    handoff: Option<&'a HandoffPacket>,
    handoff_quality: f64,
}

/// The simulated outcome of the graded and of the effective decision, and the pressure event.
struct Outcomes {
    graded: SimulatedOutcome,
    effective: SimulatedOutcome,
    pressure_raw: f64,
    pressure_injected: bool,
}

/// Stage "claims": the evidence map's score and the reasons stage's report and penalties.
struct Claims {
    evidence: EvidenceScore,
    reasons: ReasonsReport,
    overcontrol_penalty: f64,
    unsupported_claim_penalty: f64,
    /// A verified PAY's loss for the required records it did not cite (0 otherwise).
    pay_citation_penalty: f64,
}

/// Stage "dimensions": every dimension score by name, the Task E link counts the link gate
/// reads, and the proper scoring of the submitted probabilities.
struct Dimensions {
    scores: BTreeMap<&'static str, f64>,
    links: Option<LinkCounts>,
    probabilities: ResolvedProbabilities,
    proper: ProperScore,
}

/// Task E: cross-invoice links matched and in the gold, and documents the counterfactual cites.
#[derive(Clone, Copy)]
struct LinkCounts {
    matched: usize,
    gold: usize,
    doc_refs: usize,
}

/// Stage "adjustments": the additive terms beside the weighted score (the certificate's is in
/// [`Certified`]).
struct Adjustments {
    degenerate: f64,
    compliance: ComplianceReport,
    compliance_adj: f64,
    currency: CurrencyReport,
    currency_adj: f64,
    causal: CausalReport,
    institutional: f64,
}

/// Stage "certificate": the agent's certificate (or one synthesized), verified, and the
/// certificate-required gate.
struct Certified<'a> {
    /// An agent-authored certificate was submitted.
    explicit: bool,
    parsed: Parsed<'a>,
    report: CertificateReport,
    adjustment: f64,
    required: bool,
    gate: Gate,
}

/// The certificate-required gate: its cap, class and reasons (none off the track).
struct Gate {
    cap: Option<f64>,
    class: Option<ResultClass>,
    reasons: Vec<String>,
}

/// Stage "caps": the falsifier and TrustGraph checks, every cap that applies (`None` where it
/// does not) and the reasons of each, by cap name.
struct Caps {
    falsifier: FalsifierReport,
    trust_graph: TrustGraphReport,
    authority: Option<f64>,
    boundary: Option<f64>,
    falsifier_cap: Option<f64>,
    trust_graph_cap: Option<f64>,
    gate: Option<f64>,
    evidence: Option<f64>,
    reasons: BTreeMap<String, Vec<String>>,
}

/// Stage "class": the control resolution and the result class `classify` returned.
struct Resolved {
    resolution: ControlResolution,
    class: ResultClass,
}

/// What the report is assembled from.
struct Graded<'a> {
    conduct: Conduct<'a>,
    dims: Dimensions,
    adjustments: Adjustments,
    certificate: CertificateReport,
    caps: Caps,
    resolved: Resolved,
    final_score: f64,
}

/// Coverage of `req` required items with `missing` of them missing (1 when none required).
fn coverage(req: usize, missing: usize) -> f64 {
    if req == 0 {
        1.0
    } else {
        1.0 - missing as f64 / req as f64
    }
}

/// The codes as a set.
fn set(codes: &[ReasonCode]) -> BTreeSet<ReasonCode> {
    codes.iter().copied().collect()
}

/// The union of the sets.
fn union(sets: &[&BTreeSet<ReasonCode>]) -> BTreeSet<ReasonCode> {
    sets.iter().flat_map(|s| s.iter().copied()).collect()
}
