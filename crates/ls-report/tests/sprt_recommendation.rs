//! The instrumented SPRT's recommendation over the reference agent's real trajectories: at its
//! first stop it names the gold decision, it never recommends PAY before any evidence, and when
//! the agent submits on a risky curated case (whose evidence supports the gold decision) it
//! recommends the gold decision.

use ls_agents::{Agent, TeacherAgent};
use ls_core::FixtureSet;
use ls_env::{CasePool, EnvConfig, Environment, ResetRequest, TrackMode};
use std::sync::Arc;

/// Play the teacher on `case_id` in instrumented mode, calling `each` with every step's action
/// and the state after it (`GET /state`'s JSON), until it submits.
fn teacher_steps(
    pool: &Arc<CasePool>,
    case_id: &str,
    mut each: impl FnMut(&str, &serde_json::Value),
) {
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
    for _ in 0..64 {
        let a = agent.next_action(&last);
        if a.action_type == "submit_decision" {
            break;
        }
        last = env.step(&a.action_type, &a.payload).unwrap();
        each(
            &a.action_type,
            &serde_json::to_value(env.state().unwrap()).unwrap(),
        );
        if last.done {
            break;
        }
    }
}

/// Per step of the teacher's episode: (action, should_stop, recommended decision).
fn trail(pool: &Arc<CasePool>, case_id: &str) -> Vec<(String, bool, String)> {
    let mut out = Vec::new();
    teacher_steps(pool, case_id, |action, st| {
        let p = &st["sprt_state"];
        out.push((
            action.to_owned(),
            p["optimal_stopping_reached"].as_bool().unwrap(),
            p["recommended_decision"].as_str().unwrap().to_owned(),
        ));
    });
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

/// "Decision ready" waits for the checks the family's policy requires. Before, the teacher's
/// episodes of CASE-B-001, CASE-B-004 and CASE-C-003 reached the control boundary's
/// `decision_ready` phase (SPRT readiness at or above 0.72) before the three-way match (B) or the
/// ledger search and bank comparison (C): the evidence was near a boundary, the policy still
/// forbade deciding. At every step of those episodes, neither the boundary's phase nor the
/// instrumented `sprt_state.decision_ready` says ready while a required check is pending, and
/// `pending_required_checks` lists exactly the ones not yet done.
#[test]
fn decision_ready_waits_for_the_familys_required_checks() {
    let set = FixtureSet::embedded().unwrap();
    let pool = Arc::new(CasePool::new(set.clone()));
    let threshold = ls_grading::boundary::DECISION_READY_THRESHOLD;
    let mut held = Vec::new();
    for id in ["CASE-B-001", "CASE-B-004", "CASE-C-003"] {
        let case = set.cases.iter().find(|c| c.case_id == id).unwrap();
        let required: Vec<&str> = ls_grading::trajectory::required_tools(case.task_type, false)
            .iter()
            .map(|a| a.as_str())
            .collect();
        teacher_steps(&pool, id, |action, st| {
            let p = &st["sprt_state"];
            // A check counts once it has run (failed or not).
            let done: Vec<&str> = st["trajectory"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|t| t["action_type"].as_str())
                .collect();
            let expected: Vec<&str> = required
                .iter()
                .copied()
                .filter(|r| !done.contains(r))
                .collect();
            let pending: Vec<&str> = p["pending_required_checks"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|v| v.as_str())
                .collect();
            assert_eq!(pending, expected, "{id} after {action}");
            let phase = st["control_boundary"]["phase"].as_str().unwrap();
            if !pending.is_empty() {
                assert_ne!(
                    phase, "decision_ready",
                    "{id} after {action}: {pending:?} pending"
                );
                assert_eq!(p["decision_ready"], false, "{id} after {action}");
                if p["decision_readiness"].as_f64().unwrap() >= threshold {
                    held.push(format!("{id} after {action}"));
                }
            }
        });
    }
    eprintln!("readiness held under the threshold at: {held:?}");
    assert!(
        !held.is_empty(),
        "the evidence reaches the threshold before the checks on these cases (the case the fix is for)"
    );
}
