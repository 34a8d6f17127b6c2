//! Property tests of the episode loop: arbitrary action sequences never panic, rewards stay in
//! [-1, 1], graded scores in [0.01, 0.99], the step counter and clock agree, the budget never
//! grows, and replaying the same actions gives identical envelopes.

use ls_core::FixtureSet;
use ls_env::{CasePool, EnvConfig, Environment, ResetRequest, TrackMode};
use proptest::prelude::*;
use serde_json::{json, Map, Value};
use std::sync::{Arc, OnceLock};

fn pool() -> Arc<CasePool> {
    static POOL: OnceLock<Arc<CasePool>> = OnceLock::new();
    POOL.get_or_init(|| Arc::new(CasePool::new(FixtureSet::embedded().expect("fixtures"))))
        .clone()
}

/// Every catalogued action name, then names that are not actions (unknown, empty, wrong case).
fn names() -> Vec<&'static str> {
    let catalogue = ls_core::ActionName::ALL.into_iter().map(|a| a.as_str());
    catalogue.chain(["teleport", "", "OCR"]).collect()
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(|f| json!(f)),
        "[A-Z]{0,4}-?[0-9A-Z]{0,6}".prop_map(Value::from),
        prop::sample::select(vec![
            "INV-D-001",
            "THR-100",
            "northwind-industrial",
            "PO-2048",
            "GRN-2048",
            "PAY",
            "ESCALATE_FRAUD",
            "HOLD",
            "accurate"
        ])
        .prop_map(Value::from),
        prop::collection::vec(0f64..500.0, 0..5).prop_map(|v| json!(v)),
    ]
}

fn payload() -> impl Strategy<Value = Map<String, Value>> {
    let keys = prop::sample::select(vec![
        "doc_id",
        "page",
        "bbox",
        "mode",
        "vendor_key",
        "rule_id",
        "po_id",
        "receipt_id",
        "invoice_number",
        "amount",
        "thread_id",
        "proposed_bank_account",
        "decision",
        "confidence",
        "reason_codes",
        "evidence_map",
        "policy_checks",
        "summary",
    ]);
    prop::collection::btree_map(keys, value(), 0..6)
        .prop_map(|m| m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

fn actions() -> impl Strategy<Value = Vec<(String, Map<String, Value>)>> {
    prop::collection::vec(
        (
            prop::sample::select(names()).prop_map(str::to_owned),
            payload(),
        ),
        1..30,
    )
}

fn play(case: &str, acts: &[(String, Map<String, Value>)]) -> Vec<String> {
    let mut env = Environment::new(
        pool(),
        EnvConfig {
            track_mode: TrackMode::Instrumented,
        },
    );
    let mut out = vec![serde_json::to_string(
        &env.reset(&ResetRequest {
            case_id: Some(case.into()),
            ..Default::default()
        })
        .unwrap(),
    )
    .unwrap()];
    let mut budget = f64::INFINITY;
    for (a, p) in acts {
        match env.step(a, p) {
            Ok(e) => {
                assert!((-1.0..=1.0).contains(&e.reward), "reward {}", e.reward);
                assert_eq!(e.observation.step_count, e.observation.case_clock);
                assert!(e.observation.budget_remaining <= budget + 1e-9);
                budget = e.observation.budget_remaining;
                assert_eq!(e.done, e.terminated || e.truncated);
                if let Some(s) = e.info.terminal().map(|t| t.final_score) {
                    assert!((0.01..=0.99).contains(&s), "score {s}");
                }
                out.push(serde_json::to_string(&e).unwrap());
            }
            Err(err) => out.push(format!("error: {err}")),
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    #[test]
    fn arbitrary_actions_keep_invariants_and_replay_identically(case_idx in 0usize..21, acts in actions()) {
        let ids: Vec<String> = pool().cases.iter().map(|c| c.case_id.clone()).collect();
        let case = &ids[case_idx % ids.len()];
        let a = play(case, &acts);
        let b = play(case, &acts);
        prop_assert_eq!(a, b);
    }
}
