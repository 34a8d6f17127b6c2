//! Leaderboard evaluation runs: the only thing `POST /leaderboard` scores without the operator
//! credential.
//!
//! A run is one task on [`RUN_SEEDS`] held-out seeds drawn from the operating system's random
//! source out of [`HELD_OUT_RANGE`] when the run starts, so the client cannot choose them. The
//! session plays each seed once (`/reset {task_id, seed}`, then `submit_final`); the first
//! completed episode of each seed after the run started is the one that counts, and its episodes
//! are sealed like every held-out episode (no outcome in any reply). The run's score is the mean
//! of the evaluator's grades, published once when the whole run is submitted, after which the
//! run is gone. Probing therefore buys nothing: a score is only ever the mean of several fresh
//! seeds' first attempts, each run's seeds are new draws (any one seed is in a later run with
//! probability [`RUN_SEEDS`] / 10,000), and no reply scores a seed the client picked.

use crate::error::AuditError;
use crate::grading::GradeResult;
use crate::model::{TaskId, HELD_OUT_RANGE};
use crate::util;
use serde::Serialize;
use std::collections::BTreeMap;

/// Held-out seeds per run.
pub const RUN_SEEDS: usize = 5;

/// One seed's counted result (the evaluator's grade of its first completed episode).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SeedResult {
    pub score: f64,
    pub weighted_score: f64,
    pub risk_mitigation_pct: f64,
}

/// A whole run, scored: the means over its seeds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunScore {
    pub run_id: String,
    pub task_id: TaskId,
    pub seeds: Vec<u64>,
    pub score: f64,
    pub weighted_score: f64,
    pub risk_mitigation_pct: f64,
}

/// A leaderboard run in progress (held by the session that started it).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvalRun {
    pub run_id: String,
    pub task_id: TaskId,
    pub seeds: Vec<u64>,
    results: BTreeMap<u64, SeedResult>,
}

impl EvalRun {
    /// A run of `task` on [`RUN_SEEDS`] distinct seeds drawn from the OS random source.
    pub fn draw(task: TaskId) -> Self {
        let span = HELD_OUT_RANGE.end() - HELD_OUT_RANGE.start() + 1;
        let mut seeds: Vec<u64> = Vec::with_capacity(RUN_SEEDS);
        while seeds.len() < RUN_SEEDS {
            let s = HELD_OUT_RANGE.start() + util::random_u64() % span;
            if !seeds.contains(&s) {
                seeds.push(s);
            }
        }
        EvalRun {
            run_id: util::random_id("run"),
            task_id: task,
            seeds,
            results: BTreeMap::new(),
        }
    }

    /// Count a completed episode of `task` on `seed` (graded `grade` by the evaluator) when it
    /// is one of the run's and the seed has no result yet; later attempts are ignored.
    pub fn record(&mut self, task: TaskId, seed: u64, grade: &GradeResult) {
        if task != self.task_id || !self.seeds.contains(&seed) {
            return;
        }
        self.results.entry(seed).or_insert_with(|| SeedResult {
            score: grade.score,
            weighted_score: grade.weighted_score,
            risk_mitigation_pct: grade.risk_score.risk_mitigation_pct,
        });
    }

    /// The run's seeds without a counted episode yet, in draw order.
    pub fn missing(&self) -> Vec<u64> {
        self.seeds
            .iter()
            .copied()
            .filter(|s| !self.results.contains_key(s))
            .collect()
    }

    /// The whole run's score, or a conflict naming the seeds still to play.
    pub fn score(&self) -> Result<RunScore, AuditError> {
        let missing = self.missing();
        if !missing.is_empty() {
            return Err(AuditError::Conflict(format!(
                "run {} is not complete: play {} with submit_final=true in this session first (seeds {:?} still to play)",
                self.run_id,
                self.task_id.as_str(),
                missing
            )));
        }
        let n = self.results.len().max(1) as f64;
        let mean = |f: fn(&SeedResult) -> f64| {
            util::round_n(self.results.values().map(f).sum::<f64>() / n, 4)
        };
        Ok(RunScore {
            run_id: self.run_id.clone(),
            task_id: self.task_id,
            seeds: self.seeds.clone(),
            score: mean(|r| r.score),
            weighted_score: mean(|r| r.weighted_score),
            risk_mitigation_pct: mean(|r| r.risk_mitigation_pct),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::episode::{AuditAction, AuditEnv, AuditResetRequest, AuditStepRequest, EnvConfig};

    fn play(env: &mut AuditEnv, task: TaskId, seed: u64) {
        env.reset(AuditResetRequest {
            task_id: Some(task),
            seed: Some(seed),
            ..Default::default()
        })
        .unwrap();
        env.step(AuditStepRequest {
            action: Some(AuditAction {
                submit_final: Some(true),
                ..Default::default()
            }),
            ..Default::default()
        })
        .unwrap();
    }

    #[test]
    fn seeds_are_fresh_held_out_draws_and_only_first_attempts_count() {
        let a = EvalRun::draw(TaskId::InvoiceMatch);
        let b = EvalRun::draw(TaskId::InvoiceMatch);
        assert_eq!(a.seeds.len(), RUN_SEEDS);
        assert!(a.seeds.iter().all(|s| HELD_OUT_RANGE.contains(s)));
        assert_ne!(a.seeds, b.seeds, "each run draws its own seeds");
        assert_ne!(a.run_id, b.run_id);

        let mut env = AuditEnv::new(EnvConfig::default());
        env.run = Some(a.clone());
        assert!(env.run.as_ref().unwrap().score().is_err());
        for &s in &a.seeds {
            play(&mut env, TaskId::InvoiceMatch, s);
        }
        // A second attempt on a seed, another task and a seed outside the run change nothing.
        play(&mut env, TaskId::InvoiceMatch, a.seeds[0]);
        play(&mut env, TaskId::ExpenseAudit, a.seeds[1]);
        play(&mut env, TaskId::InvoiceMatch, 42);
        let run = env.run.as_ref().unwrap();
        assert!(run.missing().is_empty());
        let s = run.score().unwrap();
        assert_eq!(s.seeds, a.seeds);
        assert_eq!(
            s.score, 0.01,
            "empty submissions score the floor on every seed"
        );
    }
}
