//! The instrumented SPRT stops at Wald's boundary after a careful investigation: every curated
//! case's required controls (the teacher's plan in `careful.rs`), then `decision_ready` and
//! `should_stop` are read from the real environment's `sprt_state`.

use ls_core::validate::invoice_facts;
use ls_core::{ActionName, Case, FixtureSet, HiddenWorld};
use ls_env::{CasePool, EnvConfig, Environment, ResetRequest, StepEnvelope, TrackMode};
use serde_json::{json, Map, Value};
use std::sync::Arc;

fn obj(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

/// Payload for a required action, derived from the case's own documents.
fn payload_for(case: &Case, action: ActionName) -> Vec<Map<String, Value>> {
    let inv = case
        .invoices()
        .next()
        .map(invoice_facts)
        .unwrap_or_default();
    let vendor = case.vendor_key.clone().unwrap_or_default();
    use ActionName::*;
    match action {
        Ocr => case
            .documents
            .iter()
            .map(|d| obj(json!({"doc_id": d.doc_id, "mode": "accurate"})))
            .collect(),
        Zoom => vec![obj(
            json!({"doc_id": inv.doc_id, "page": 1, "bbox": [0, 0, 600, 800]}),
        )],
        LookupPo => vec![obj(json!({"po_id": inv.po_id.clone().unwrap_or_default()}))],
        LookupReceipt => vec![obj(
            json!({"receipt_id": inv.receipt_id.clone().unwrap_or_default()}),
        )],
        SearchLedger => vec![obj(
            json!({"vendor_key": vendor, "invoice_number": inv.invoice_number, "amount": inv.total.map(|t| t.to_string())}),
        )],
        CompareBankAccount => vec![obj(
            json!({"vendor_key": vendor, "proposed_bank_account": inv.bank_account}),
        )],
        InspectEmailThread => case
            .documents
            .iter()
            .filter(|d| d.doc_type == "email")
            .map(|d| obj(json!({"thread_id": d.doc_id})))
            .collect(),
        LookupVendorHistory | LookupVendor => vec![obj(json!({"vendor_key": vendor}))],
        _ => vec![Map::new()],
    }
}

/// Play the required actions and wait for every artifact; returns the environment ready to submit.
fn investigate(pool: &Arc<CasePool>, case: &Case) -> (Environment, Vec<String>, Vec<String>) {
    let mut env = Environment::new(
        pool.clone(),
        EnvConfig {
            track_mode: TrackMode::Instrumented,
        },
    );
    env.reset(&ResetRequest {
        case_id: Some(case.case_id.clone()),
        ..Default::default()
    })
    .unwrap();
    let hidden = HiddenWorld::derive(case);
    let mut interventions = Vec::new();
    // A careful analyst reads every document first, then runs the required controls.
    let mut plan: Vec<ActionName> = vec![ActionName::Ocr];
    plan.extend(
        hidden
            .required_actions
            .iter()
            .filter(|a| **a != ActionName::Ocr),
    );
    for a in &hidden.required_artifacts {
        let source = ActionName::ALL
            .into_iter()
            .find(|x| x.scheduled_artifact() == Some(*a))
            .unwrap();
        if !plan.contains(&source) {
            plan.push(source);
        }
    }
    for action in plan {
        for p in payload_for(case, action) {
            let e = env.step(action.as_str(), &p).unwrap();
            assert!(
                !e.done,
                "{}: episode ended during investigation at {action:?}",
                case.case_id
            );
            if action.is_intervention() {
                interventions.push(action.as_str().to_owned());
            }
        }
    }
    let mut last: Option<StepEnvelope> = None;
    for _ in 0..4 {
        if env.state().unwrap().pending_event_count == 0 {
            break;
        }
        last = Some(env.step("lookup_policy", &Map::new()).unwrap());
    }
    if let Some(l) = last {
        assert!(
            !l.done,
            "{}: ran out of steps waiting for artifacts",
            case.case_id
        );
    }
    let revealed = env.state().unwrap().revealed_artifact_ids;
    (env, revealed, interventions)
}

/// Cases whose careful investigation observes at least this many distinct evidence channels are
/// the clear-cut ones: enough independent controls ran for a decision to be forced.
const CLEAR_CUT_CHANNELS: usize = 5;

#[test]
fn should_stop_fires_at_walds_boundary_after_a_careful_investigation() {
    let set = FixtureSet::embedded().unwrap();
    let pool = Arc::new(CasePool::new(set.clone()));
    let mut stopped = Vec::new();
    let mut clear_cut = 0;
    for case in &set.cases {
        let (env, _, _) = investigate(&pool, case);
        let sprt = &env.episode().unwrap().sprt;
        let state = serde_json::to_value(env.state().unwrap()).unwrap();
        let payload = &state["sprt_state"];
        let ready = payload["decision_ready"].as_bool().unwrap();
        let should_stop = payload["optimal_stopping_reached"].as_bool().unwrap();
        assert_eq!(
            ready,
            sprt.accepted_decision().is_some(),
            "{}",
            case.case_id
        );
        if ready {
            assert!(
                should_stop,
                "{}: decision_ready implies should_stop",
                case.case_id
            );
            // It stops only at a boundary, and only on the right decision.
            let risk = sprt.risk_llr();
            assert!(
                risk <= ls_env::sprt::lower() || risk >= ls_env::sprt::upper(),
                "{}: {risk}",
                case.case_id
            );
            assert_eq!(
                payload["recommended_decision"].as_str(),
                case.gold.decision.map(|d| d.as_str()),
                "{}: stopped on the wrong decision",
                case.case_id
            );
            stopped.push(case.case_id.clone());
        }
        if sprt.observed_channels.len() >= CLEAR_CUT_CHANNELS {
            clear_cut += 1;
            assert!(
                ready && should_stop,
                "{}: clear-cut case ({} channels) did not stop: risk LLR {:.3}, posterior {:?}",
                case.case_id,
                sprt.observed_channels.len(),
                sprt.risk_llr(),
                sprt.posterior()
            );
        }
        if sprt.observations_used < 2 {
            assert!(!ready, "{}: no stop without evidence", case.case_id);
        }
    }
    assert!(
        clear_cut >= 7,
        "the curated set has at least 7 clear-cut cases, found {clear_cut}"
    );
    // The benign bank-change cases reach the lower boundary: PAY is accepted.
    for id in ["CASE-D-002", "CASE-D-006"] {
        assert!(
            stopped.iter().any(|s| s == id),
            "{id} should accept safe; stopped: {stopped:?}"
        );
    }
    eprintln!(
        "should_stop on {} of {} cases: {stopped:?}",
        stopped.len(),
        set.cases.len()
    );
}
