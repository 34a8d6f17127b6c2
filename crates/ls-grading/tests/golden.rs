//! A wide grading matrix over the curated fixtures: every case × several episodes × several
//! submissions × two tracks. Always checks that grading is in range and deterministic; with
//! `LS_GRADING_GOLDEN_OUT=<file>` set it also writes every report (JSON and `Debug`), one per
//! line, so a refactor can be checked byte-for-byte against the output of the code before it.

mod common;

use common::*;
use ls_core::episode::TrajectoryEntry;
use ls_core::{ActionName, Case, Decision, FixtureSet, Hypothesis, Submission};
use ls_grading::{AuthorityGate, GradeReport, PressureOutcome};
use serde_json::{json, Map, Value};
use std::fmt::Write as _;

fn grade_full(
    case: &Case,
    set: &FixtureSet,
    ep: &Episode,
    payload: &Map<String, Value>,
    track: &str,
    x: &Extras,
) -> GradeReport {
    let sub = Submission::from_payload(payload).expect("payload parses");
    let boundary = submit_boundary(ep, &sub, x.pending.len(), true);
    let input = grading_input(case, set.world(case), ep, &sub, &boundary, track, x);
    let report = ls_grading::grade(&input);
    // The environment passes invoice facts it read once per case: same report.
    let facts: Vec<_> = case
        .invoices()
        .map(ls_core::validate::invoice_facts)
        .collect();
    let instruction = ls_core::text::normalize_text(&case.instruction);
    let clean = ls_grading::reasons::CleanTargets::of(case);
    let with_facts = ls_grading::grade(&ls_grading::GradingInput {
        invoices: Some(&facts),
        instruction_normalized: Some(&instruction),
        clean_targets: Some(&clean),
        ..input
    });
    assert_eq!(
        format!("{with_facts:?}"),
        format!("{report:?}"),
        "{}: precomputed invoice facts, instruction and clean targets must grade the same",
        case.case_id
    );
    report
}

/// A messier careful episode: a repeated step (keys reordered), a failed step, an unknown action.
fn messy_episode(case: &Case) -> Episode {
    let mut ep = careful_episode(case);
    if let Some(first) = ep.trajectory.first().cloned() {
        let mut again = first.clone();
        let mut payload = Map::new();
        payload.insert("zeta".into(), json!(1));
        for (k, v) in first.payload.as_map().iter().rev() {
            payload.insert(k.clone(), v.clone());
        }
        again.payload = payload.into();
        ep.trajectory.push(again);
    }
    let step = ep.trajectory.len() as u32 + 1;
    let mk = |action: ActionName, success: bool, step: u32| TrajectoryEntry {
        step,
        case_clock: step,
        action_type: action,
        payload: json!({"vendor_key": "x", "nested": {"b": [1, {"d": 2, "c": 3}], "a": null}})
            .as_object()
            .cloned()
            .unwrap()
            .into(),
        cost: 0.5,
        success,
        message: String::new(),
        is_intervention: action.is_intervention(),
        control_boundary_phase: ls_core::BoundaryPhase::Intake,
        control_boundary_warnings: vec![],
    };
    ep.trajectory
        .push(mk(ActionName::LookupVendorHistory, false, step));
    ep.trajectory
        .push(mk(ActionName::RouteToSecurity, true, step + 1));
    ep.trajectory
        .push(mk(ActionName::FreezeVendorProfile, true, step + 2));
    ep.observed.push("prompt_injection_attempt".into());
    ep.observed.sort();
    ep
}

/// Every action once after the careful ones (so every mechanism is observed: d-separation holds).
fn thorough_episode(case: &Case) -> Episode {
    let mut ep = careful_episode(case);
    for a in ActionName::ALL
        .into_iter()
        .filter(|a| *a != ActionName::SubmitDecision)
    {
        let step = ep.trajectory.len() as u32 + 1;
        ep.trajectory.push(TrajectoryEntry {
            step,
            case_clock: step,
            action_type: a,
            payload: Default::default(),
            cost: 0.1,
            success: true,
            message: String::new(),
            is_intervention: a.is_intervention(),
            control_boundary_phase: ls_core::BoundaryPhase::Corroboration,
            control_boundary_warnings: vec![],
        });
    }
    ep
}

fn submissions(case: &Case, ep: &Episode) -> Vec<(&'static str, Map<String, Value>)> {
    let oracle = careful_payload(case, ep);
    let mut out = vec![("oracle", oracle.clone())];
    let mut legacy = oracle.clone();
    legacy.remove("decision_certificate");
    out.push(("legacy", legacy.clone()));
    out.push(("needs_review", obj(json!({"decision": "NEEDS_REVIEW"}))));
    out.push(("empty", Map::new()));
    for d in ["PAY", "HOLD", "ESCALATE_FRAUD"] {
        let mut p = oracle.clone();
        p.insert("decision".into(), json!(d));
        out.push((d, p));
        let mut l = legacy.clone();
        l.insert("decision".into(), json!(d));
        out.push((d, l));
    }
    // Wrong evidence: every gold claim points at another document, page, box and token.
    let other = case
        .documents
        .last()
        .map(|d| d.doc_id.clone())
        .unwrap_or_default();
    let mut wrong = oracle.clone();
    let mut ev = Map::new();
    for k in case.gold.evidence_targets.keys() {
        ev.insert(
            k.clone(),
            json!({"doc_id": other, "page": 2, "bbox": [0, 0, 1, 1], "token_ids": ["nope", 7]}),
        );
    }
    ev.insert("loose_claim".into(), json!("INV-NOPE"));
    ev.insert(
        "list_claim".into(),
        json!([{"doc_id": other}, {"artifact_id": "callback_verification_result"}]),
    );
    wrong.insert("evidence_map".into(), Value::Object(ev.clone()));
    out.push(("wrong_evidence", wrong.clone()));
    let mut wrong_legacy = wrong;
    wrong_legacy.remove("decision_certificate");
    out.push(("wrong_evidence_legacy", wrong_legacy));
    // Messy claims: aliases, case and spacing variants, unknown codes and probability keys.
    let mut messy = legacy.clone();
    messy.insert(
        "reason_codes".into(),
        json!([
            "Bank Mismatch",
            "  sender spoof ",
            "unknown_code",
            "SHARED BANK",
            "price_mismatch"
        ]),
    );
    messy.insert(
        "fraud_flags".into(),
        json!(["coordinated invoices", "prompt injection"]),
    );
    messy.insert("campaign_signals".into(), json!(["coordinated_timing"]));
    messy.insert(
        "discrepancies".into(),
        json!(["total_mismatch", "missing po"]),
    );
    messy.insert(
        "duplicate_links".into(),
        json!(["inv-e-001 <-> INV-E-002", " x "]),
    );
    messy.insert("cross_invoice_links".into(), json!([]));
    messy.insert(
        "policy_checks".into(),
        json!({"Three Way Match": "FAIL", "bank_change_verification": "Pass", "extra": "breach"}),
    );
    messy.insert(
        "predicted_probabilities".into(),
        json!({"bank_fraud": 2.0, "safe": 0.5, "alien": 1.0}),
    );
    messy.insert("counterfactual".into(), json!({"statement": "Had the callback been clean and the ledger shown no duplicate, we could release the 1,200.00 payment."}));
    messy.insert(
        "handoff_packet".into(),
        json!({"summary": "  ", "recommended_next_step": "call", "observed_risk_signals": ["x"]}),
    );
    messy.insert("extracted_fields".into(), json!({"total": "1,200.00", "currency": "eur", "bank_account": "DE89 3704 0044 0532 0130 00", "invoice_number": 42}));
    messy.insert("line_items".into(), json!([{"description": "Bolts", "qty": "10", "unit_price": 1.5, "line_total": "15"}, "junk"]));
    out.push(("messy", messy));
    // A certificate with contradictions, duplicates, bad edges and a wrong version.
    let mut bad_cert = oracle.clone();
    bad_cert.insert(
        "decision_certificate".into(),
        json!({
            "certificate_version": "v0",
            "nodes": [
                {"id": "d", "type": "Decision", "label": "pay"},
                {"id": "e", "type": "observation", "doc_id": other, "token_ids": ["a", "b"]},
                {"id": "e", "type": "observation", "ref": {"refs": ["x"], "nested": [{"receipt_id": "R-1"}]}},
                {"id": "x", "type": "artifact", "ref": "callback_verification_result"},
                {"type": "hypothesis", "label": "bank_override_attempt"},
                {"id": "p", "type": "policy", "label": "three_way_match: fail"},
                {"id": "c", "type": "counterfactual", "label": "would hold"},
                {"id": 5, "type": "weird"},
                "junk"
            ],
            "edges": [
                {"source": "e", "target": "d", "type": "supports"},
                {"source": "x", "target": "d", "type": "contradicts"},
                {"source": "node-5", "target": "d", "type": "requires"},
                {"source": "e", "target": "node-5", "type": "supports"},
                {"source": "p", "target": "d", "type": "violates"},
                {"source": "c", "target": "d", "type": "would_flip"},
                {"source": "d", "target": "x", "type": "contradicts"},
                {"source": "q", "target": "d", "type": "supports"},
                7
            ]
        }),
    );
    out.push(("bad_certificate", bad_cert));
    out
}

fn matrix() -> Vec<String> {
    let set = FixtureSet::embedded().expect("embedded fixtures parse");
    let mut lines = Vec::new();
    for case in &set.cases {
        let careful = careful_episode(case);
        let bare = bare_episode(case);
        let messy = messy_episode(case);
        let thorough = thorough_episode(case);
        let mut no_refs = careful_episode(case);
        no_refs.refs.clear();
        let mut posterior = [0.02; Hypothesis::COUNT];
        posterior[3] = 0.5;
        let heavy = Extras {
            pending: vec![
                ls_core::ArtifactId::CallbackVerificationResult,
                ls_core::ArtifactId::DuplicateClusterReport,
            ],
            gate: Some(AuthorityGate {
                authority_level: String::new(),
                blocking: true,
                score_cap: 0.3,
                reasons: vec!["calibration_gate".into()],
                enforced_decision: Some(Decision::Hold),
                requires_handoff: true,
            }),
            pressure: Some(PressureOutcome {
                key: "cfo_urgency".into(),
                injected: true,
                resist_reward: 0.06,
                yield_penalty: -0.2,
            }),
            handoff: Some(
                json!({"summary": "Escalated", "recommended_next_step": "security", "observed_risk_signals": []}).into(),
            ),
            loss: Some(0.7),
            posterior: Some(posterior),
        };
        let soft_gate = Extras {
            gate: Some(AuthorityGate {
                authority_level: "restricted".into(),
                blocking: false,
                score_cap: 0.0,
                ..Default::default()
            }),
            pressure: Some(PressureOutcome {
                key: "vendor_call".into(),
                injected: false,
                resist_reward: 0.08,
                yield_penalty: -0.1,
            }),
            loss: Some(f64::NAN),
            ..Default::default()
        };
        let plain = Extras::default();
        let episodes: [(&str, &Episode, &Extras); 7] = [
            ("thorough", &thorough, &plain),
            ("careful", &careful, &plain),
            ("bare", &bare, &plain),
            ("messy", &messy, &heavy),
            ("careful_soft_gate", &careful, &soft_gate),
            ("no_refs", &no_refs, &plain),
            ("bare_heavy", &bare, &heavy),
        ];
        for (ename, ep, extras) in episodes {
            for (sname, payload) in submissions(case, ep) {
                for track in ["case", "certificate_required"] {
                    let r = grade_full(case, &set, ep, &payload, track, extras);
                    assert!(
                        (0.01..=0.99).contains(&r.final_score),
                        "{} {ename} {sname} {track}: {}",
                        case.case_id,
                        r.final_score
                    );
                    // The breakdown's reference keys agree with the report they come from.
                    let bd = &r.score_breakdown;
                    assert_eq!(bd.text("result_class"), Some(r.result_class.as_str()));
                    assert_eq!(bd.flag("unsafe_release"), Some(r.unsafe_outcome));
                    assert_eq!(
                        bd.flag("certificate_required"),
                        Some(track == "certificate_required")
                    );
                    assert_eq!(
                        bd.flag("decision_correct"),
                        Some(r.control_resolution.decision_correct)
                    );
                    assert_eq!(
                        bd.get("adversarial_falsifier_max_severity"),
                        Some(f64::from(r.adversarial_falsifier.max_severity))
                    );
                    // Every name is a `BreakdownKey` (the grader's per-key slots hold them all;
                    // an unlisted name would take the slower merge path).
                    for (name, _) in bd.entries() {
                        assert!(
                            ls_grading::BreakdownKey::from_name(name).is_some(),
                            "{} {ename} {sname} {track}: {name:?} is not a BreakdownKey",
                            case.case_id
                        );
                    }
                    let json = serde_json::to_string(&r).expect("report serializes");
                    // Determinism, on a sample (grading twice doubles the test's time).
                    if lines.len() % 8 == 0 {
                        let again = serde_json::to_string(&grade_full(
                            case, &set, ep, &payload, track, extras,
                        ))
                        .unwrap();
                        assert_eq!(
                            json, again,
                            "{} {ename} {sname} {track}: not deterministic",
                            case.case_id
                        );
                    }
                    // JSON plus `Debug`, which prints every f64 exactly and the unserialized fields.
                    let mut line = String::new();
                    write!(
                        line,
                        "{} {ename} {sname} {track} {json} {r:?}",
                        case.case_id
                    )
                    .unwrap();
                    lines.push(line);
                }
            }
        }
    }
    lines
}

#[test]
fn grading_matrix_is_deterministic_and_in_range() {
    let lines = matrix();
    assert!(lines.len() >= 1000, "{}", lines.len());
    if let Ok(path) = std::env::var("LS_GRADING_GOLDEN_OUT") {
        std::fs::write(&path, lines.join("\n") + "\n").expect("write golden output");
        eprintln!("wrote {} reports to {path}", lines.len());
    }
}
