//! Case scores do not depend on the session's history: the same trajectory over the same case
//! scores the same in a fresh session as after any other cases in one session, in any order,
//! even after unsafe releases have locked the session's institution (on the case track; a curated
//! Task E case reset without a track plays on its primary track, `portfolio`, which is governed).

use ls_agents::{offline_agent, run_episode, Action, LocalEnv, Silent};
use ls_core::FixtureSet;
use ls_env::{CasePool, EnvConfig, Environment, ResetRequest};
use serde_json::Value;
use std::sync::Arc;

/// One recorded episode: its case and its actions.
struct Recorded {
    case_id: String,
    actions: Vec<Action>,
    fresh_score: f64,
}

fn record(agent: &str, pool: &Arc<CasePool>) -> Vec<Recorded> {
    pool.cases
        .iter()
        .map(|c| {
            let mut env = Environment::new(pool.clone(), EnvConfig::default());
            let mut a = offline_agent(agent).expect("agent");
            // On the case track: curated Task E cases default to the (governed) portfolio track.
            let req = ResetRequest {
                case_id: Some(c.case_id.clone()),
                track: Some("case".into()),
                ..Default::default()
            };
            let rec = run_episode(
                a.as_mut(),
                &mut LocalEnv::new(&mut env),
                &req,
                7,
                &mut Silent,
            );
            assert!(rec.terminated, "{agent} on {}", c.case_id);
            let actions = rec
                .trajectory
                .iter()
                .map(|s| Action {
                    action_type: s.action_type.clone(),
                    payload: s.payload.clone(),
                })
                .collect();
            Recorded {
                case_id: c.case_id.clone(),
                actions,
                fresh_score: rec.final_score,
            }
        })
        .collect()
}

/// Replay `r` in `env` (track as given); the final score.
fn replay(env: &mut Environment, r: &Recorded, track: Option<&str>) -> f64 {
    env.reset(&ResetRequest {
        case_id: Some(r.case_id.clone()),
        track: track.map(str::to_owned),
        ..Default::default()
    })
    .expect("reset");
    let mut last = None;
    for a in &r.actions {
        last = Some(env.step(&a.action_type, &a.payload).expect("step"));
    }
    let last = last.expect("at least a submission");
    assert!(last.terminated, "{} replay did not terminate", r.case_id);
    last.info
        .to_map()
        .get("final_score")
        .and_then(Value::as_f64)
        .expect("final score")
}

#[test]
fn case_scores_are_the_same_in_one_session_in_any_order() {
    let pool = Arc::new(CasePool::new(FixtureSet::embedded().expect("fixtures")));
    let teacher = record("teacher", &pool);
    let naive = record("naive-pay", &pool);
    let escalate = record("always-escalate", &pool);
    // Interleave careless episodes (unsafe PAYs, confident wrong escalations) with careful ones:
    // the shared session's institution ends up locked.
    let mut sequence: Vec<&Recorded> = Vec::new();
    for i in 0..teacher.len() {
        sequence.extend([&naive[i], &teacher[i], &escalate[i]]);
    }
    for order in [sequence.clone(), sequence.iter().rev().copied().collect()] {
        let mut shared = Environment::new(pool.clone(), EnvConfig::default());
        for r in order {
            let score = replay(&mut shared, r, Some("case"));
            assert_eq!(
                score, r.fresh_score,
                "{}: shared-session score differs from the fresh one",
                r.case_id
            );
        }
        let level = shared.memory.snapshots();
        assert!(
            level.full.get().contains("\"authority_level\":\"locked\""),
            "the shared institution was locked: {}",
            &level.full.get()[..200.min(level.full.get().len())]
        );
    }
}

/// The portfolio track stays governed by memory: after unsafe releases lock the institution,
/// the same careful trajectory is capped by the authority gate there.
#[test]
fn portfolio_scores_stay_governed_by_the_institution() {
    let pool = Arc::new(CasePool::new(FixtureSet::embedded().expect("fixtures")));
    let teacher = record("teacher", &pool);
    let naive = record("naive-pay", &pool);
    let mut env = Environment::new(pool.clone(), EnvConfig::default());
    for r in naive.iter().filter(|r| r.fresh_score <= 0.05) {
        replay(&mut env, r, Some("portfolio"));
    }
    let careful = teacher
        .iter()
        .find(|r| r.case_id == "CASE-D-001")
        .expect("case");
    let governed = replay(&mut env, careful, Some("portfolio"));
    let mut fresh = Environment::new(pool.clone(), EnvConfig::default());
    let ungoverned = replay(&mut fresh, careful, Some("portfolio"));
    assert!(
        governed < ungoverned,
        "governed {governed} vs fresh {ungoverned}"
    );
}
