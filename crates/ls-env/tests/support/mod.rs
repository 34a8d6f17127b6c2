//! The careful analyst shared by the whole-episode tests (`careful.rs`, `sprt_stops.rs`): every
//! document read, then the case's required controls, then a wait for every artifact.

use ls_core::validate::invoice_facts;
use ls_core::{ActionName, Case, HiddenWorld};
use ls_env::{CasePool, EnvConfig, Environment, ResetRequest, StepEnvelope};
use serde_json::{json, Map, Value};
use std::sync::Arc;

pub fn obj(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

/// Payload for a required action, derived from the case's own documents.
pub fn payload_for(case: &Case, action: ActionName) -> Vec<Map<String, Value>> {
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
pub fn investigate(
    pool: &Arc<CasePool>,
    case: &Case,
    config: EnvConfig,
) -> (Environment, Vec<ls_core::ArtifactId>, Vec<ActionName>) {
    let mut env = Environment::new(pool.clone(), config);
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
                interventions.push(action);
            }
        }
    }
    // ... then whatever the control boundary still asks for given what the tools showed (a
    // benign case's surface signal calls for its callback or duplicate review too).
    let followups: Vec<String> = env
        .state()
        .unwrap()
        .control_boundary
        .get("required_followups")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect();
    for f in followups {
        let Some(action) = ActionName::parse(&f).filter(|a| a.is_intervention()) else {
            continue;
        };
        let e = env.step(action.as_str(), &Map::new()).unwrap();
        assert!(!e.done, "{}: episode ended at follow-up {f}", case.case_id);
        interventions.push(action);
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
