//! Every offline agent on the 21 curated cases, in-process, through the public interface only.

use ls_agents::{offline_agent, run_episode, EpisodeRecord, LocalEnv, Silent};
use ls_core::FixtureSet;
use ls_env::{CasePool, EnvConfig, Environment, ResetRequest};
use std::sync::Arc;

fn pool() -> Arc<CasePool> {
    Arc::new(CasePool::new(
        FixtureSet::embedded().expect("embedded fixtures"),
    ))
}

fn play(agent: &str, pool: &Arc<CasePool>) -> Vec<EpisodeRecord> {
    let ids: Vec<String> = pool.cases.iter().map(|c| c.case_id.clone()).collect();
    ids.iter()
        .map(|id| {
            let mut env = Environment::new(pool.clone(), EnvConfig::default());
            let mut a = offline_agent(agent).unwrap();
            let req = ResetRequest {
                case_id: Some(id.clone()),
                ..Default::default()
            };
            run_episode(
                a.as_mut(),
                &mut LocalEnv::new(&mut env),
                &req,
                7,
                &mut Silent,
            )
        })
        .collect()
}

fn mean(r: &[EpisodeRecord]) -> f64 {
    r.iter().map(|e| e.final_score).sum::<f64>() / r.len() as f64
}

#[test]
fn teacher_scores_high_and_never_releases_unsafely() {
    let pool = pool();
    let recs = play("teacher", &pool);
    for r in &recs {
        let bd = r
            .terminal_info
            .get("score_breakdown")
            .cloned()
            .unwrap_or_default();
        eprintln!(
            "{:12} {:.4} {:28} {:15} steps={} caps={}",
            r.case_id,
            r.final_score,
            r.result_class,
            r.decision,
            r.steps,
            r.terminal_info
                .get("cap_reasons")
                .or_else(|| bd.get("cap_reasons"))
                .map(|v| v.to_string())
                .unwrap_or_default()
        );
        assert!(r.terminated, "{} did not submit: {:?}", r.case_id, r.errors);
    }
    let m = mean(&recs);
    let low = recs.iter().map(|r| r.final_score).fold(1.0, f64::min);
    eprintln!("teacher mean {m:.4} min {low:.4}");
    assert_eq!(recs.iter().filter(|r| r.unsafe_release).count(), 0);
    assert!(m >= 0.95, "teacher mean {m}");
}

#[test]
fn baselines_score_low() {
    let pool = pool();
    for name in ["random", "naive-pay", "always-escalate"] {
        let recs = play(name, &pool);
        let m = mean(&recs);
        eprintln!("{name} mean {m:.4}");
        assert!(m <= 0.20, "{name} mean {m}");
        assert!(recs.iter().all(|r| r.terminated));
    }
}

#[test]
fn random_is_deterministic_for_a_seed() {
    let pool = pool();
    let a = play("random", &pool);
    let b = play("random", &pool);
    assert_eq!(
        a.iter()
            .map(|r| (r.final_score, r.decision.clone()))
            .collect::<Vec<_>>(),
        b.iter()
            .map(|r| (r.final_score, r.decision.clone()))
            .collect::<Vec<_>>()
    );
}
