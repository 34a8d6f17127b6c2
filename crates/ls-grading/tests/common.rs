//! Test harness: grading inputs for a case after a careful investigation, or after none.
#![allow(dead_code)]

use ls_core::enums::ArtifactId;
use ls_core::episode::{RevealedArtifact, TrajectoryEntry};
use ls_core::fixtures::CaseWorld;
use ls_core::{ActionName, CallbackOutcome, Case, Decision, HiddenWorld, Hypothesis, Submission};
use ls_grading::{evaluate_boundary, BoundaryInput, GradeReport, GradingInput};
use serde_json::{json, Map, Value};
use std::collections::BTreeSet;

pub struct Episode {
    pub hidden: HiddenWorld,
    pub trajectory: Vec<TrajectoryEntry>,
    pub artifacts: Vec<RevealedArtifact>,
    pub refs: BTreeSet<String>,
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
    for a in &hidden.required_artifacts {
        let act = artifact_action(*a);
        if !actions.contains(&act) {
            actions.push(act);
        }
    }
    let doc = case.documents.first().map(|d| d.doc_id.clone()).unwrap_or_default();
    let trajectory: Vec<TrajectoryEntry> = actions
        .iter()
        .enumerate()
        .map(|(i, a)| TrajectoryEntry {
            step: i as u32 + 1,
            case_clock: i as u32 + 1,
            action_type: a.as_str().to_owned(),
            payload: json!({"doc_id": doc}).as_object().cloned().unwrap(),
            cost: 0.2,
            success: true,
            message: String::new(),
            is_intervention: a.is_intervention(),
            control_boundary_phase: "corroboration".into(),
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
            artifact_id: a.as_str().to_owned(),
            artifact_type: "report".into(),
            summary: format!("{} delivered", a.as_str()),
            details,
            revealed_at_clock: 5,
            source_action: artifact_action(a).as_str().to_owned(),
        });
    }
    let mut refs: BTreeSet<String> = BTreeSet::new();
    for d in &case.documents {
        refs.insert(d.doc_id.clone());
        refs.extend(d.accurate_ocr.iter().map(|t| t.token_id.clone()));
    }
    refs.extend(artifacts.iter().map(|a| a.artifact_id.clone()));
    let observed = hidden.hidden_signals.iter().filter(|s| *s != "unsafe_if_pay").cloned().collect();
    Episode { hidden, trajectory, artifacts, refs, observed, readiness: 0.9 }
}

/// No investigation at all.
pub fn bare_episode(case: &Case) -> Episode {
    Episode { hidden: HiddenWorld::derive(case), trajectory: vec![], artifacts: vec![], refs: BTreeSet::new(), observed: vec![], readiness: 0.08 }
}

pub fn expected_decision(case: &Case, hidden: &HiddenWorld) -> Decision {
    case.gold.decision.unwrap_or_else(|| hidden.latent_hypothesis.decision())
}

/// A careful, correct, well-evidenced submission payload.
pub fn careful_payload(case: &Case, ep: &Episode) -> Map<String, Value> {
    let g = &case.gold;
    let decision = expected_decision(case, &ep.hidden);
    let latent = ep.hidden.latent_hypothesis;
    let other = if latent == Hypothesis::Safe { Hypothesis::BankFraud } else { Hypothesis::Safe };
    let mut evidence = Map::new();
    for (k, r) in &g.evidence_targets {
        evidence.insert(k.clone(), serde_json::to_value(r).unwrap());
    }
    if evidence.is_empty() {
        if let Some(d) = case.invoices().next().or(case.documents.first()) {
            let t = &d.accurate_ocr[0];
            evidence.insert("invoice_reviewed".into(), json!({"doc_id": d.doc_id, "page": t.page, "bbox": t.bbox, "token_ids": [t.token_id]}));
        }
    }
    let mut codes: Vec<String> = g.reason_codes.iter().chain(&g.fraud_flags).chain(&g.campaign_signals).cloned().collect();
    codes.sort();
    codes.dedup();
    let links = if g.cross_invoice_links.is_empty() { g.duplicate_links.clone() } else { g.cross_invoice_links.clone() };
    let mut totals = Vec::new();
    for l in &links {
        if let Some(d) = case.document(l) {
            if let Some(t) = ls_core::validate::invoice_facts(d).total {
                totals.push(format!("{l} ({:.2})", t));
                continue;
            }
        }
        totals.push(l.clone());
    }
    let cf = if decision == Decision::Pay {
        "If the bank account had not matched the vendor master or the sender domain had been spoofed, we would hold the invoice instead of paying it.".to_owned()
    } else {
        format!(
            "If the sender domain had matched the approved vendor domain, the bank account had matched the vendor master, the callback had verified the request, no duplicate invoice existed in the ledger, the approval threshold was respected, the receipt and PO reconciled, and no coordinated campaign linked {}, we would pay the invoice instead.",
            if totals.is_empty() { "other invoices".to_owned() } else { totals.join(", ") }
        )
    };
    // Agent-authored certificate grounded in revealed references.
    let mut nodes = vec![json!({"id": "decision.final", "type": "decision", "value": decision.as_str()})];
    let mut edges = vec![];
    let ev_ids: Vec<String> = evidence.keys().map(|k| format!("evidence.{k}")).collect();
    for (k, v) in &evidence {
        nodes.push(json!({"id": format!("evidence.{k}"), "type": "observation", "ref": v}));
        edges.push(json!({"source": format!("evidence.{k}"), "target": "decision.final", "type": "supports"}));
    }
    for a in &ep.artifacts {
        nodes.push(json!({"id": format!("artifact.{}", a.artifact_id), "type": "artifact", "ref": {"artifact_id": a.artifact_id}}));
        edges.push(json!({"source": format!("artifact.{}", a.artifact_id), "target": "decision.final", "type": "supports"}));
    }
    for (i, c) in codes.iter().enumerate() {
        nodes.push(json!({"id": format!("hypothesis.{c}"), "type": "hypothesis", "label": c}));
        edges.push(json!({"source": ev_ids[i % ev_ids.len()], "target": format!("hypothesis.{c}"), "type": "supports"}));
        edges.push(json!({"source": format!("hypothesis.{c}"), "target": "decision.final", "type": "supports"}));
    }
    for (k, v) in &g.policy_checks {
        nodes.push(json!({"id": format!("policy.{k}"), "type": "policy", "label": format!("{k}: {v}")}));
        edges.push(json!({"source": ev_ids[0], "target": format!("policy.{k}"), "type": "supports"}));
        edges.push(json!({"source": format!("policy.{k}"), "target": "decision.final", "type": "supports"}));
    }
    for t in ep.trajectory.iter().filter(|t| t.is_intervention) {
        nodes.push(json!({"id": format!("intervention.{}", t.action_type), "type": "intervention", "label": t.action_type}));
        edges.push(json!({"source": format!("intervention.{}", t.action_type), "target": "decision.final", "type": "supports"}));
    }
    nodes.push(json!({"id": "counterfactual.primary", "type": "counterfactual", "label": cf}));
    edges.push(json!({"source": ev_ids[0], "target": "counterfactual.primary", "type": "supports"}));
    edges.push(json!({"source": "counterfactual.primary", "target": "decision.final", "type": "would_flip"}));
    let line_items: Vec<Value> = g.line_items.iter().map(|l| serde_json::to_value(l).unwrap()).collect();
    json!({
        "decision": decision.as_str(),
        "confidence": 0.95,
        "predicted_probabilities": {latent.as_str(): 0.9, other.as_str(): 0.1},
        "reason_codes": codes,
        "fraud_flags": g.fraud_flags,
        "discrepancies": g.discrepancies,
        "campaign_signals": g.campaign_signals,
        "duplicate_links": g.duplicate_links,
        "cross_invoice_links": g.cross_invoice_links,
        "policy_checks": g.policy_checks,
        "evidence_map": evidence,
        "extracted_fields": g.fields,
        "line_items": line_items,
        "counterfactual": cf,
        "decision_certificate": {"certificate_version": "ledgershield-dcg-v1", "nodes": nodes, "edges": edges},
    })
    .as_object()
    .cloned()
    .unwrap()
}

/// Grade `payload` on `case` after `ep`.
pub fn grade_with(case: &Case, world: CaseWorld<'_>, ep: &Episode, payload: &Map<String, Value>, track: &str) -> GradeReport {
    let sub = Submission::from_payload(payload).expect("payload parses");
    let succ: BTreeSet<ActionName> = ep.trajectory.iter().filter_map(|t| ActionName::parse(&t.action_type)).collect();
    let boundary = evaluate_boundary(&BoundaryInput {
        action: Some(ActionName::SubmitDecision),
        decision: sub.decision,
        submitted: false,
        pending_event_count: 0,
        decision_readiness: ep.readiness,
        successful_actions: &succ,
        prior_count_of_action: 0,
        observed_signals: &ep.observed,
        risky: ep.hidden.risky,
    });
    let budget: f64 = case.budget_total.to_string().parse().unwrap_or(15.0);
    let spent: f64 = ep.trajectory.iter().map(|t| t.cost).sum();
    let mut posterior = [0.0; Hypothesis::COUNT];
    posterior[ep.hidden.latent_hypothesis.index()] = 1.0;
    let input = GradingInput {
        case,
        world,
        hidden: &ep.hidden,
        submission: &sub,
        trajectory: &ep.trajectory,
        revealed_artifacts: &ep.artifacts,
        pending_artifact_ids: &[],
        observed_signals: &ep.observed,
        revealed_refs: &ep.refs,
        budget_total: budget,
        budget_remaining: budget - spent,
        step_count: ep.trajectory.len() as u32,
        max_steps: case.max_steps,
        pressure: None,
        sprt_posterior: posterior,
        control_boundary: &boundary,
        authority_gate: None,
        institutional_loss_score: None,
        benchmark_track: track,
        handoff_packet: None,
    };
    ls_grading::grade(&input)
}

pub fn obj(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap()
}
