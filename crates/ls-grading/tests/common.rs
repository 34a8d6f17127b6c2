//! Test harness: grading inputs for a case after a careful investigation, or after none.
#![allow(dead_code)]

use ls_core::enums::ArtifactId;
use ls_core::episode::{RevealedArtifact, TrajectoryEntry};
use ls_core::fixtures::CaseWorld;
use ls_core::{ActionName, CallbackOutcome, Case, Decision, HiddenWorld, Hypothesis, Submission};
use ls_grading::{
    evaluate_boundary, AuthorityGate, BoundaryInput, BoundaryReport, GradeReport, GradingInput,
    PressureOutcome,
};
use serde_json::{json, Map, Value};
use std::collections::BTreeSet;

pub struct Episode {
    pub hidden: HiddenWorld,
    pub trajectory: Vec<TrajectoryEntry>,
    pub artifacts: Vec<RevealedArtifact>,
    pub refs: ls_grading::RefSet,
    pub observed: Vec<String>,
    pub readiness: f64,
}

fn artifact_action(a: ArtifactId) -> ActionName {
    match a {
        ArtifactId::CallbackVerificationResult => ActionName::RequestCallbackVerification,
        ArtifactId::BankChangeApprovalChain => ActionName::RequestBankChangeApprovalChain,
        ArtifactId::PoReconciliationReport => ActionName::RequestPoReconciliation,
        ArtifactId::ReceiptReconciliationReport => ActionName::RequestAdditionalReceiptEvidence,
        ArtifactId::DuplicateClusterReport => ActionName::FlagDuplicateClusterReview,
    }
}

/// The required controls, the actions that produce the required artifacts, and their artifacts.
pub fn careful_episode(case: &Case) -> Episode {
    let hidden = HiddenWorld::derive(case);
    let mut actions: Vec<ActionName> = hidden.required_actions.clone();
    // The verifications a PAY needs, performed (they are investigation tools).
    for a in ls_grading::reasons::pay_verifications(case.task_type) {
        if !actions.contains(a) {
            actions.push(*a);
        }
    }
    for a in &hidden.required_artifacts {
        let act = artifact_action(*a);
        if !actions.contains(&act) {
            actions.push(act);
        }
    }
    let doc = case
        .documents
        .first()
        .map(|d| d.doc_id.clone())
        .unwrap_or_default();
    let trajectory: Vec<TrajectoryEntry> = actions
        .iter()
        .enumerate()
        .map(|(i, a)| TrajectoryEntry {
            step: i as u32 + 1,
            case_clock: i as u32 + 1,
            action_type: *a,
            payload: json!({"doc_id": doc}).as_object().cloned().unwrap().into(),
            cost: 0.2,
            success: true,
            message: String::new(),
            is_intervention: a.is_intervention(),
            control_boundary_phase: ls_core::BoundaryPhase::Corroboration,
            control_boundary_warnings: vec![],
        })
        .collect();
    let mut artifacts = Vec::new();
    for a in actions.iter().filter_map(|a| a.scheduled_artifact()) {
        let mut details = Map::new();
        if a == ArtifactId::CallbackVerificationResult {
            let sig = match case.simulation.callback_outcome {
                CallbackOutcome::ConfirmsLegitimate => "callback_clean",
                CallbackOutcome::AdversarialConfirm => "callback_suspicious_confirm",
                CallbackOutcome::DisputesChange => "callback_dispute_confirmed",
            };
            details.insert("risk_signal".into(), json!(sig));
        }
        artifacts.push(RevealedArtifact {
            artifact_id: a,
            artifact_type: "report".into(),
            summary: format!("{} delivered", a.as_str()),
            details,
            revealed_at_clock: 5,
            source_action: artifact_action(a),
        });
    }
    let mut refs = ls_grading::RefSet::new();
    for d in &case.documents {
        refs.insert(d.doc_id.as_str().into());
        refs.extend(d.accurate_ocr.iter().map(|t| t.token_id.as_str().into()));
    }
    refs.extend(artifacts.iter().map(|a| a.artifact_id.as_str().into()));
    // The records those lookups revealed: the invoices' PO and receipt, the vendor master.
    for d in case.invoices() {
        let f = ls_core::validate::invoice_facts(d);
        refs.extend(f.po_id.into_iter().chain(f.receipt_id).map(Into::into));
    }
    if let Some(v) = &case.vendor_key {
        refs.insert(v.as_str().into());
    }
    let observed = hidden
        .hidden_signals
        .iter()
        .filter(|s| *s != "unsafe_if_pay")
        .cloned()
        .collect();
    Episode {
        hidden,
        trajectory,
        artifacts,
        refs,
        observed,
        readiness: 0.9,
    }
}

/// No investigation at all.
pub fn bare_episode(case: &Case) -> Episode {
    Episode {
        hidden: HiddenWorld::derive(case),
        trajectory: vec![],
        artifacts: vec![],
        refs: ls_grading::RefSet::new(),
        observed: vec![],
        readiness: 0.08,
    }
}

pub fn expected_decision(case: &Case, hidden: &HiddenWorld) -> Decision {
    ls_grading::oracle::expected_decision(case, hidden)
}

/// A careful, correct, well-evidenced submission payload (the shared reference answer).
pub fn careful_payload(case: &Case, ep: &Episode) -> Map<String, Value> {
    let artifacts: Vec<ls_core::ArtifactId> = ep.artifacts.iter().map(|a| a.artifact_id).collect();
    let interventions: Vec<ls_core::ActionName> = ep
        .trajectory
        .iter()
        .filter(|t| t.is_intervention)
        .map(|t| t.action_type)
        .collect();
    ls_grading::oracle::reference_submission(case, &ep.hidden, &artifacts, &interventions)
}

/// The control boundary at `submit_decision` after `ep` (`pending` artifacts outstanding;
/// `only_successful` counts only successful trajectory steps as done actions).
pub fn submit_boundary(
    ep: &Episode,
    sub: &Submission,
    pending: usize,
    only_successful: bool,
) -> BoundaryReport {
    let succ: BTreeSet<ActionName> = ep
        .trajectory
        .iter()
        .filter(|t| t.success || !only_successful)
        .map(|t| t.action_type)
        .collect();
    evaluate_boundary(&BoundaryInput {
        action: Some(ActionName::SubmitDecision),
        decision: sub.decision,
        submitted: false,
        pending_event_count: pending,
        decision_readiness: ep.readiness,
        phase_reads_belief: true,
        successful_actions: &succ,
        prior_count_of_action: 0,
        observed_signals: &ep.observed,
        risky: ep.hidden.risky,
    })
}

/// Episode context beyond the trajectory: everything `grading_input` leaves empty by default.
#[derive(Default)]
pub struct Extras {
    pub pending: Vec<ArtifactId>,
    pub gate: Option<AuthorityGate>,
    pub pressure: Option<PressureOutcome>,
    pub handoff: Option<ls_core::HandoffPacket>,
    pub loss: Option<f64>,
    /// The SPRT posterior; certainty on the latent hypothesis when absent.
    pub posterior: Option<[f64; Hypothesis::COUNT]>,
}

/// The grading input for `sub` after `ep` (budget spent as the trajectory's costs).
pub fn grading_input<'a>(
    case: &'a Case,
    world: CaseWorld<'a>,
    ep: &'a Episode,
    sub: &'a Submission,
    boundary: &'a BoundaryReport,
    track: &'a str,
    x: &'a Extras,
) -> GradingInput<'a> {
    let budget: f64 = case.budget_total.to_string().parse().unwrap_or(15.0);
    let spent: f64 = ep.trajectory.iter().map(|t| t.cost).sum();
    let posterior = x.posterior.unwrap_or_else(|| {
        let mut p = [0.0; Hypothesis::COUNT];
        p[ep.hidden.latent_hypothesis.index()] = 1.0;
        p
    });
    GradingInput {
        case,
        world,
        hidden: &ep.hidden,
        submission: sub,
        trajectory: &ep.trajectory,
        revealed_artifacts: &ep.artifacts,
        pending_artifact_ids: &x.pending,
        observed_signals: &ep.observed,
        revealed_refs: &ep.refs,
        budget_total: budget,
        budget_remaining: budget - spent,
        step_count: ep.trajectory.len() as u32,
        max_steps: case.max_steps,
        pressure: x.pressure.clone(),
        sprt_posterior: posterior,
        control_boundary: boundary,
        authority_gate: x.gate.as_ref(),
        institutional_loss_score: x.loss,
        benchmark_track: track,
        handoff_packet: x.handoff.as_ref(),
        invoices: None,
        instruction_normalized: None,
        clean_targets: None,
    }
}

/// Grade `payload` on `case` after `ep`.
pub fn grade_with(
    case: &Case,
    world: CaseWorld<'_>,
    ep: &Episode,
    payload: &Map<String, Value>,
    track: &str,
) -> GradeReport {
    let sub = Submission::from_payload(payload).expect("payload parses");
    let boundary = submit_boundary(ep, &sub, 0, false);
    let x = Extras::default();
    ls_grading::grade(&grading_input(case, world, ep, &sub, &boundary, track, &x))
}

pub fn obj(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap()
}
