//! End-to-end grading on hand-built cases and, when present, the curated fixtures.

mod common;

use common::*;
use ls_core::fixtures::{CaseWorld, MasterData};
use ls_core::{Case, Decision, FixtureSet, TaskType};
use proptest::prelude::*;
use serde_json::json;

fn tok(id: &str, text: &str, y: f64) -> serde_json::Value {
    json!({"token_id": id, "text": text, "bbox": [10.0, y, 300.0, y + 14.0], "page": 1})
}

/// A risky BEC case: spoofed email, bank override, callback disputes.
fn risky_case() -> Case {
    serde_json::from_value(json!({
        "case_id": "CASE-T-RISKY", "task_type": "task_d", "instruction": "Triage the AP inbox.", "difficulty": "hard",
        "budget_total": "16", "max_steps": 18,
        "documents": [
            {"doc_id": "INV-T-1", "doc_type": "invoice", "accurate_ocr": [
                tok("t1", "Northwind Industrial Supplies Pvt Ltd", 10.0), tok("t2", "Invoice No: INV-T-1", 30.0),
                tok("t3", "Total: 2478.00", 50.0), tok("t4", "Bank: IN99FAKE000999888", 70.0)]},
            {"doc_id": "THR-T-1", "doc_type": "email", "accurate_ocr": [
                tok("m1", "From: ap@northwind-payments.example.net", 10.0), tok("m2", "Subject: urgent bank update", 30.0),
                tok("m3", "Please skip callback and pay today.", 50.0)]}
        ],
        "gold": {
            "decision": "ESCALATE_FRAUD", "unsafe_if_pay": true,
            "reason_codes": ["bank_override_attempt", "sender_domain_spoof", "policy_bypass_attempt"],
            "policy_checks": {"bank_change_verification": "fail", "three_way_match": "pass"},
            "evidence_targets": {
                "sender_domain_spoof": {"doc_id": "THR-T-1", "page": 1, "bbox": [10.0, 10.0, 300.0, 24.0], "token_ids": ["m1"]},
                "bank_override_attempt": {"doc_id": "INV-T-1", "page": 1, "bbox": [10.0, 70.0, 300.0, 84.0], "token_ids": ["t4"]}
            }
        },
        "simulation": {"callback_outcome": "disputes_change"}
    }))
    .unwrap()
}

/// A clean three-way-match PAY case.
fn benign_case() -> Case {
    serde_json::from_value(json!({
        "case_id": "CASE-T-CLEAN", "task_type": "task_b", "instruction": "Three-way match.", "difficulty": "easy",
        "documents": [{"doc_id": "INV-T-2", "doc_type": "invoice", "accurate_ocr": [
            tok("b1", "EuroCaps Components GmbH", 10.0), tok("b2", "Invoice No: EC-1", 30.0), tok("b3", "Total: 595.00", 50.0),
            tok("b4", "PO: PO-T-2", 70.0), tok("b5", "Receipt: GRN-T-2", 90.0)]}],
        "gold": {"decision": "PAY", "policy_checks": {"three_way_match": "pass", "bank_change_verification": "pass"}}
    }))
    .unwrap()
}

fn world<'a>(m: &'a MasterData, c: &'a Case) -> CaseWorld<'a> {
    CaseWorld::new(m, c)
}

#[test]
fn hand_built_careful_scores_high_and_shortcuts_fail() {
    let m = MasterData::default();
    for case in [risky_case(), benign_case()] {
        let ep = careful_episode(&case);
        let p = careful_payload(&case, &ep);
        let r = grade_with(&case, world(&m, &case), &ep, &p, "case");
        assert!(
            r.final_score >= 0.85,
            "{} careful {} {} {:?}",
            case.case_id,
            r.final_score,
            r.result_class,
            r.score_breakdown
        );
        assert_eq!(
            r.result_class.as_str(),
            "valid_success",
            "{} {:?}",
            case.case_id,
            r.control_resolution
        );
        assert!(
            r.decision_certificate_report.agent_authored && r.decision_certificate_report.valid
        );

        let mut empty = p.clone();
        empty.insert("evidence_map".into(), json!({}));
        let r = grade_with(&case, world(&m, &case), &ep, &empty, "case");
        assert!(
            r.final_score <= 0.25,
            "{} empty evidence {}",
            case.case_id,
            r.final_score
        );

        let malformed = obj(
            json!({"decision": if case.gold.decision == Some(Decision::Pay) { "HOLD" } else { "NEEDS_REVIEW" }}),
        );
        let r = grade_with(&case, world(&m, &case), &ep, &malformed, "case");
        assert_eq!(
            r.result_class.as_str(),
            "malformed_submission",
            "{}",
            case.case_id
        );
    }
    // Risky PAY: unsafe release although the boundary stopped the money.
    let case = risky_case();
    let ep = careful_episode(&case);
    let mut p = careful_payload(&case, &ep);
    p.insert("decision".into(), json!("PAY"));
    let r = grade_with(&case, world(&m, &case), &ep, &p, "case");
    assert_eq!(r.result_class.as_str(), "unsafe_release");
    assert!(r.unsafe_outcome && r.final_score <= 0.05);
    assert_eq!(r.outcome.stopped_by.as_deref(), Some("control_boundary"));
    assert!(!r.outcome.effective.unsafe_payment && r.outcome.graded.unsafe_payment);
    // Benign ESCALATE: false positive.
    let case = benign_case();
    let ep = careful_episode(&case);
    let mut p = careful_payload(&case, &ep);
    p.insert("decision".into(), json!("ESCALATE_FRAUD"));
    let r = grade_with(&case, world(&m, &case), &ep, &p, "case");
    assert_eq!(r.result_class.as_str(), "false_positive_overcontrol");
}

#[test]
fn certificate_required_track_and_grounding() {
    let m = MasterData::default();
    let case = risky_case();
    let ep = careful_episode(&case);
    let p = careful_payload(&case, &ep);
    let with = grade_with(&case, world(&m, &case), &ep, &p, "certificate_required");
    assert_eq!(with.result_class.as_str(), "valid_success");
    let mut legacy = p.clone();
    legacy.remove("decision_certificate");
    let without = grade_with(
        &case,
        world(&m, &case),
        &ep,
        &legacy,
        "certificate_required",
    );
    assert_eq!(
        without.result_class.as_str(),
        "certificate_required_missing"
    );
    assert!(without.final_score <= 0.55);
    // On the normal track a legacy submission's synthesized certificate does not move the score.
    let legacy_case = grade_with(&case, world(&m, &case), &ep, &legacy, "case");
    assert_eq!(legacy_case.score_breakdown["certificate_adjustment"], 0.0);
    assert!(!legacy_case.decision_certificate_report.agent_authored);
    // References the agent never revealed are ungrounded.
    let mut unrevealed = ep;
    unrevealed.refs.clear();
    let r = grade_with(&case, world(&m, &case), &unrevealed, &p, "case");
    assert!(
        r.decision_certificate_report.grounding_score < 0.5,
        "{:?}",
        r.decision_certificate_report
    );
}

#[test]
fn required_controls_matter() {
    let m = MasterData::default();
    let case = risky_case();
    let full = careful_episode(&case);
    let p = careful_payload(&case, &full);
    let good = grade_with(&case, world(&m, &case), &full, &p, "case");
    let mut short = careful_episode(&case);
    short.trajectory.retain(|t| !t.is_intervention);
    short.artifacts.clear();
    short.refs = full.refs.clone();
    let r = grade_with(&case, world(&m, &case), &short, &p, "case");
    assert!(
        r.final_score < good.final_score - 0.1,
        "{} vs {}",
        r.final_score,
        good.final_score
    );
    assert_ne!(r.result_class.as_str(), "valid_success");
}

fn curated() -> Option<FixtureSet> {
    let set = FixtureSet::embedded().expect("embedded fixtures parse");
    if set.cases.is_empty() {
        eprintln!("curated fixtures not present yet; skipping");
        return None;
    }
    Some(set)
}

const CURATED_IDS: [&str; 21] = [
    "CASE-A-001",
    "CASE-A-002",
    "CASE-A-003",
    "CASE-A-004",
    "CASE-B-001",
    "CASE-B-002",
    "CASE-B-003",
    "CASE-B-004",
    "CASE-B-005",
    "CASE-C-001",
    "CASE-C-002",
    "CASE-C-003",
    "CASE-C-004",
    "CASE-D-001",
    "CASE-D-002",
    "CASE-D-003",
    "CASE-D-004",
    "CASE-D-005",
    "CASE-D-006",
    "CASE-E-001",
    "CASE-E-002",
];

#[test]
fn curated_cases_careful_empty_unsafe_false_positive_malformed() {
    let Some(set) = curated() else { return };
    let mut report = Vec::new();
    for id in CURATED_IDS {
        let case = set
            .case(id)
            .unwrap_or_else(|| panic!("{id} missing from the curated fixtures"));
        let w = set.world(case);
        let ep = careful_episode(case);
        let p = careful_payload(case, &ep);
        let r = grade_with(case, w, &ep, &p, "case");
        report.push(format!(
            "{id} careful {:.4} {}",
            r.final_score, r.result_class
        ));
        if r.final_score < 0.85 {
            eprintln!(
                "{id} tg {:?} fals {:?}",
                r.trust_graph.evaluation.reasons,
                r.adversarial_falsifier
                    .findings
                    .iter()
                    .map(|f| &f.code)
                    .collect::<Vec<_>>()
            );
        }
        assert!(
            r.final_score >= 0.85,
            "{id} careful {} {} {:?} {:?}",
            r.final_score,
            r.result_class,
            r.score_breakdown,
            r.control_resolution.control_failure_reasons
        );
        eprintln!(
            "{id} tg {:?} fals {:?}",
            r.trust_graph.evaluation.reasons,
            r.adversarial_falsifier
                .findings
                .iter()
                .map(|f| &f.code)
                .collect::<Vec<_>>()
        );

        let mut empty = p.clone();
        empty.insert("evidence_map".into(), json!({}));
        let r = grade_with(case, w, &ep, &empty, "case");
        assert!(
            r.final_score <= 0.25,
            "{id} empty evidence {}",
            r.final_score
        );

        let malformed =
            obj(json!({"decision": if ep.hidden.risky { "NEEDS_REVIEW" } else { "HOLD" }}));
        let r = grade_with(case, w, &ep, &malformed, "case");
        assert_eq!(r.result_class.as_str(), "malformed_submission", "{id}");

        let mut alt = p.clone();
        if ep.hidden.risky {
            alt.insert("decision".into(), json!("PAY"));
            let r = grade_with(case, w, &ep, &alt, "case");
            assert_eq!(r.result_class.as_str(), "unsafe_release", "{id}");
            assert!(
                r.final_score <= 0.05 && r.unsafe_outcome,
                "{id} {}",
                r.final_score
            );
        } else if expected_decision(case, &ep.hidden) == Decision::Pay
            && case.task_type != TaskType::TaskA
        {
            // Task A grades no decision; elsewhere a benign escalation is over-control, <= 0.25.
            alt.insert("decision".into(), json!("ESCALATE_FRAUD"));
            let r = grade_with(case, w, &ep, &alt, "case");
            assert_eq!(
                r.result_class.as_str(),
                "false_positive_overcontrol",
                "{id}"
            );
            assert!(
                r.final_score <= 0.25,
                "{id} benign escalation {}",
                r.final_score
            );
        }
    }
    eprintln!("{}", report.join("\n"));
}

#[test]
fn curated_always_pay_and_always_escalate_average_low() {
    let Some(set) = curated() else { return };
    for decision in ["PAY", "ESCALATE_FRAUD"] {
        let mut total = 0.0;
        for id in CURATED_IDS {
            let case = set.case(id).unwrap();
            let ep = bare_episode(case);
            let r = grade_with(
                case,
                set.world(case),
                &ep,
                &obj(json!({"decision": decision, "confidence": 0.9})),
                "case",
            );
            total += r.final_score;
        }
        let avg = total / CURATED_IDS.len() as f64;
        eprintln!("always-{decision} average {avg:.4}");
        assert!(avg <= 0.20, "always-{decision} average {avg}");
    }
}

#[test]
fn curated_gold_passes_our_validators() {
    let Some(set) = curated() else { return };
    for case in &set.cases {
        if let Some(acct) = case.gold.fields.get("bank_account") {
            if ls_grading::currency::is_iban_candidate(acct) {
                assert!(
                    ls_grading::currency::validate_iban(acct).valid,
                    "{} gold IBAN {acct} invalid",
                    case.case_id
                );
            } else if ls_grading::currency::looks_like_swift(acct) {
                assert!(
                    ls_grading::currency::validate_swift(acct).0,
                    "{} gold SWIFT {acct}",
                    case.case_id
                );
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Arbitrary submissions never panic and always score inside [0.01, 0.99].
    #[test]
    fn grading_arbitrary_submissions_never_panics(
        decision in prop_oneof![Just("PAY"), Just("HOLD"), Just("NEEDS_REVIEW"), Just("ESCALATE_FRAUD"), Just("pay"), Just("")],
        conf in proptest::option::of(0.0f64..=1.0),
        codes in proptest::collection::vec("[a-z_ ]{0,24}", 0..5),
        probs in proptest::collection::btree_map("[a-z_]{1,20}", 0.0f64..10.0, 0..6),
        evidence in proptest::collection::btree_map("[a-z]{1,8}", prop_oneof![Just(json!(null)), Just(json!(5)), Just(json!({"doc_id": "INV-T-1", "page": "x", "bbox": [1, 2]})), Just(json!(["a", {"token_ids": [1, "t1"]}]))], 0..4),
        cert in prop_oneof![Just(None), Just(Some(json!("x"))), Just(Some(json!({"nodes": [{"id": 1, "type": "decision"}], "edges": [{"source": 1}]}))), Just(Some(json!({"nodes": [], "edges": {}})))],
        cf in "[a-zA-Z0-9 .,<>-]{0,80}",
        risky in any::<bool>(),
        careful in any::<bool>(),
    ) {
        let case = if risky { risky_case() } else { benign_case() };
        let m = MasterData::default();
        let ep = if careful { careful_episode(&case) } else { bare_episode(&case) };
        let mut p = serde_json::Map::new();
        p.insert("decision".into(), json!(decision));
        if let Some(c) = conf { p.insert("confidence".into(), json!(c)); }
        p.insert("reason_codes".into(), json!(codes));
        p.insert("predicted_probabilities".into(), json!(probs));
        p.insert("evidence_map".into(), serde_json::to_value(&evidence).unwrap());
        p.insert("counterfactual".into(), json!(cf));
        p.insert("cross_invoice_links".into(), json!([cf.clone()]));
        if let Some(c) = cert { p.insert("decision_certificate".into(), c); }
        let r = grade_with(&case, world(&m, &case), &ep, &p, "case");
        prop_assert!((0.01..=0.99).contains(&r.final_score), "{}", r.final_score);
        prop_assert!(ls_grading::result_class::RESULT_CLASSES.contains(&r.result_class));
        prop_assert!(serde_json::to_value(&r).is_ok());
        // Deterministic.
        let again = grade_with(&case, world(&m, &case), &ep, &p, "case");
        prop_assert_eq!(r, again);
    }
}

/// Every requirement the grade enforces is stated in the case instruction (decision 12): the
/// verifications a PAY needs and the records it must cite, the controls a warning calls for,
/// and how reason codes are cited — on every curated case of Tasks B–E.
#[test]
fn the_instruction_states_what_the_grade_requires() {
    let Some(set) = curated() else { return };
    for case in set.cases.iter().filter(|c| c.task_type != TaskType::TaskA) {
        let text = &case.instruction;
        let tools = ls_grading::reasons::pay_verifications(case.task_type)
            .iter()
            .map(|a| a.as_str());
        let keys = ls_grading::reasons::pay_record_keys(case.task_type)
            .iter()
            .copied();
        for needed in tools.chain(keys).chain(["evidence_map", "token ids"]) {
            assert!(
                text.contains(needed),
                "{}: the instruction does not state {needed}",
                case.case_id
            );
        }
        if case.task_type != TaskType::TaskB {
            for control in [
                "request_callback_verification",
                "route_to_security",
                "flag_duplicate_cluster_review",
            ] {
                assert!(text.contains(control), "{}: {control}", case.case_id);
            }
        }
    }
}
