//! Whole episodes on every curated case through the real environment and grader: a careful,
//! correct, well-evidenced submission after the required controls scores high; shortcuts do not.
//!
//! The harness reads gold to *write the answer* (it plays an oracle analyst); the environment
//! and grader only see the actions and the submission.

use ls_core::validate::invoice_facts;
use ls_core::{ActionName, Case, Decision, FixtureSet, HiddenWorld};
use ls_env::{CasePool, EnvConfig, Environment, ResetRequest, StepEnvelope};
use serde_json::{json, Map, Value};
use std::sync::Arc;

fn obj(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

fn expected_decision(case: &Case) -> Decision {
    case.gold.decision.unwrap_or(Decision::Pay)
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
    let mut env = Environment::new(pool.clone(), EnvConfig::default());
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

#[test]
fn careful_submissions_score_high_and_shortcuts_are_punished() {
    let set = FixtureSet::embedded().unwrap();
    let pool = Arc::new(CasePool::new(set.clone()));
    let mut report = Vec::new();
    for case in &set.cases {
        let hidden = HiddenWorld::derive(case);
        let (mut env, revealed, interventions) = investigate(&pool, case);
        let payload =
            ls_grading::oracle::reference_submission(case, &hidden, &revealed, &interventions);
        let done = env.step("submit_decision", &payload).unwrap();
        let score = done.info.value("final_score").as_f64().unwrap();
        let class = done.info.value("result_class").as_str().unwrap().to_owned();
        report.push(format!("{} {score:.4} {class}", case.case_id));
        assert!(
            score >= 0.85,
            "{}: careful score {score} ({class}); breakdown {}",
            case.case_id,
            done.info.value("score_breakdown")
        );
        assert!(
            (done.reward - score).abs() <= 0.03,
            "terminal reward tracks the grade"
        );

        // Same decision, empty evidence map: capped.
        let (mut env, _, _) = investigate(&pool, case);
        let mut bare = payload.clone();
        bare.insert("evidence_map".into(), json!({}));
        let e = env.step("submit_decision", &bare).unwrap();
        assert!(
            e.info.value("final_score").as_f64().unwrap() <= 0.25,
            "{}: empty evidence {}",
            case.case_id,
            e.info.value("final_score")
        );

        // PAY on a risky case is an unsafe release even when the boundary stops the money.
        if hidden.risky {
            let (mut env, _, _) = investigate(&pool, case);
            let mut pay = payload.clone();
            pay.insert("decision".into(), json!("PAY"));
            let e = env.step("submit_decision", &pay).unwrap();
            assert_eq!(
                e.info.value("result_class"),
                "unsafe_release",
                "{}",
                case.case_id
            );
            assert!(e.info.value("final_score").as_f64().unwrap() <= 0.05);
            assert_eq!(
                e.info.value("effective_decision"),
                "NEEDS_REVIEW",
                "the boundary stopped the money"
            );
        } else if expected_decision(case) == Decision::Pay
            && case.task_type != ls_core::TaskType::TaskA
        {
            // A wrong escalation of a benign case (Task A grades no decision).
            let (mut env, _, _) = investigate(&pool, case);
            let mut esc = payload.clone();
            esc.insert("decision".into(), json!("ESCALATE_FRAUD"));
            let e = env.step("submit_decision", &esc).unwrap();
            assert_eq!(
                e.info.value("result_class"),
                "false_positive_overcontrol",
                "{}",
                case.case_id
            );
            assert!(
                e.info.value("final_score").as_f64().unwrap() <= 0.25,
                "{}: benign escalation {}",
                case.case_id,
                e.info.value("final_score")
            );
        }
    }
    eprintln!("{}", report.join("\n"));
}

#[test]
fn evidence_free_policies_score_low() {
    let set = FixtureSet::embedded().unwrap();
    let pool = Arc::new(CasePool::new(set.clone()));
    for decision in ["PAY", "ESCALATE_FRAUD"] {
        let mut total = 0.0;
        for case in &set.cases {
            let mut env = Environment::new(pool.clone(), EnvConfig::default());
            env.reset(&ResetRequest {
                case_id: Some(case.case_id.clone()),
                ..Default::default()
            })
            .unwrap();
            let e = env
                .step("submit_decision", &obj(json!({"decision": decision})))
                .unwrap();
            total += e.info.value("final_score").as_f64().unwrap();
        }
        let avg = total / set.cases.len() as f64;
        assert!(avg <= 0.20, "always-{decision} averages {avg}");
    }
}
