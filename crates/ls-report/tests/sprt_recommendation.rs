//! The instrumented SPRT's recommendation over the reference agent's real trajectories: at its
//! first stop it names the gold decision, it never recommends PAY before any evidence, and when
//! the agent submits on a risky curated case (whose evidence supports the gold decision) it
//! recommends the gold decision.

use ls_agents::{Agent, TeacherAgent};
use ls_core::FixtureSet;
use ls_env::{CasePool, EnvConfig, Environment, ResetRequest, TrackMode};
use std::sync::Arc;

/// Per step of the teacher's episode: (action, should_stop, recommended decision).
fn trail(pool: &Arc<CasePool>, case_id: &str) -> Vec<(String, bool, String)> {
    let mut env = Environment::new(
        pool.clone(),
        EnvConfig {
            track_mode: TrackMode::Instrumented,
        },
    );
    let mut last = env
        .reset(&ResetRequest {
            case_id: Some(case_id.to_owned()),
            ..Default::default()
        })
        .unwrap();
    let mut agent = TeacherAgent::new();
    agent.begin(&last, 7);
    let mut out = Vec::new();
    for _ in 0..64 {
        let a = agent.next_action(&last);
        if a.action_type == "submit_decision" {
            break;
        }
        last = env.step(&a.action_type, &a.payload).unwrap();
        let st = serde_json::to_value(env.state().unwrap()).unwrap();
        let p = &st["sprt_state"];
        out.push((
            a.action_type.clone(),
            p["optimal_stopping_reached"].as_bool().unwrap(),
            p["recommended_decision"].as_str().unwrap().to_owned(),
        ));
        if last.done {
            break;
        }
    }
    out
}

#[test]
fn recommendations_follow_the_evidence() {
    let set = FixtureSet::embedded().unwrap();
    let pool = Arc::new(CasePool::new(set.clone()));
    let mut stops = 0;
    for case in set.cases.iter().filter(|c| c.gold.decision.is_some()) {
        let gold = case.gold.decision.unwrap().as_str();
        let t = trail(&pool, &case.case_id);
        assert!(!t.is_empty(), "{}", case.case_id);
        // The first step reads documents only: no evidence for the test, and no PAY.
        assert_eq!(t[0].2, "NEEDS_REVIEW", "{}: {:?}", case.case_id, t[0]);
        if let Some(first) = t.iter().find(|s| s.1) {
            stops += 1;
            assert_eq!(first.2, gold, "{}: first stop at {first:?}", case.case_id);
        }
        if case.gold.unsafe_if_pay {
            let at_submit = &t.last().unwrap().2;
            assert_eq!(at_submit, gold, "{}: {t:?}", case.case_id);
        }
    }
    assert!(
        stops >= 6,
        "the teacher's trajectories stop on {stops} cases"
    );
}

#[test]
fn the_held_and_escalated_cases_of_the_issue_are_recommended_right() {
    let set = FixtureSet::embedded().unwrap();
    let pool = Arc::new(CasePool::new(set));
    for (case, gold) in [
        ("CASE-B-001", "HOLD"),
        ("CASE-B-004", "HOLD"),
        ("CASE-C-003", "ESCALATE_FRAUD"),
    ] {
        let t = trail(&pool, case);
        // The held cases' evidence (PO and receipt reconciliation) never favours PAY. C-003's
        // clean vendor history does, for two steps, until the bank mismatch arrives; no stop
        // is taken there.
        if gold == "HOLD" {
            assert!(!t.iter().any(|s| s.2 == "PAY"), "{case}: PAY on {t:?}");
        }
        assert!(
            t.iter().filter(|s| s.1).all(|s| s.2 == gold),
            "{case}: a stop on the wrong decision: {t:?}"
        );
        assert_eq!(t.last().unwrap().2, gold, "{case}: {t:?}");
    }
}
