//! One ControlBench environment as the Python bindings hold it: the session's `Environment`
//! (institutional memory and curriculum persist across resets, as in one HTTP session) plus
//! what the last reply showed — the legal candidate actions and the fixed-size features.

use crate::errors::Refusal;
use crate::request::{Action, Reset, TaskReset};
use crate::vector::SeedStream;
use ls_env::candidates::{candidates, Candidate};
use ls_env::observation::{DocumentCatalogEntry, Observation, Shared};
use ls_env::{CasePool, CaseReset, EnvConfig, Environment, ResetRequest, StepEnvelope, TrackMode};
use ls_gen::TaskDistribution;
use serde::Serialize;
use std::sync::{Arc, OnceLock};

/// Entries of the RL export vector (instrumented mode; zeros in blind mode).
pub const RL_VECTOR_LEN: usize = 37;
/// Entries of the fixed feature vector ([`features`] documents them).
pub const FEATURES: usize = 24;
/// Slots of the candidate-action mask: more candidates than this are cut.
pub const MAX_CANDIDATES: usize = 64;
/// The action type an index past the candidate list plays (no tool has this name).
pub const INVALID_INDEX_ACTION: &str = "invalid_action_index";

/// The pool `ledgershield serve` serves: the embedded curated cases plus the generated blocks
/// its documented `LEDGERSHIELD_INCLUDE_*` variables enable (read here as the server binary
/// reads them, so the same settings give the same pool), built once per process and shared.
pub fn embedded_pool() -> Result<Arc<CasePool>, Refusal> {
    static POOL: OnceLock<Result<Arc<CasePool>, String>> = OnceLock::new();
    POOL.get_or_init(|| {
        let set = ls_core::FixtureSet::embedded().map_err(|e| e.to_string())?;
        let cfg = ls_gen::PoolConfig::from_lookup(|k| std::env::var(k).ok());
        ls_gen::build_pool(&set, &cfg)
            .map(|pool| Arc::new(CasePool::new(pool)))
            .map_err(|e| e.to_string())
    })
    .clone()
    .map_err(|e| Refusal::new(500, "internal_error", format!("fixtures: {e}")))
}

/// The task distribution over the embedded curated templates, sharing the embedded pool's
/// cases (so a curated draw reuses what the pool derived from its case), built once per process.
pub fn embedded_tasks() -> Result<Arc<TaskDistribution>, Refusal> {
    static TASKS: OnceLock<Result<Arc<TaskDistribution>, String>> = OnceLock::new();
    TASKS
        .get_or_init(|| {
            let pool = embedded_pool().map_err(|e| e.message)?;
            let set = ls_core::FixtureSet::embedded().map_err(|e| e.to_string())?;
            let templates = set
                .cases
                .iter()
                .map(|c| {
                    pool.get(&c.case_id)
                        .cloned()
                        .ok_or_else(|| format!("{} is not in the pool", c.case_id))
                })
                .collect::<Result<Vec<_>, String>>()?;
            Ok(Arc::new(TaskDistribution::new(Arc::new(set), templates)))
        })
        .clone()
        .map_err(|e| Refusal::new(500, "internal_error", format!("task distribution: {e}")))
}

/// Where a task draw came from: shown once its episode is over (as `/state` shows a case's
/// split), never to the policy mid-episode: a quarter slot's base template, for one, follows
/// the slot's label plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskInfo {
    pub generator: &'static str,
    /// The base template (`None` for FraudGen).
    pub template: Option<String>,
    pub family: &'static str,
    pub seed: u64,
    pub template_split: &'static str,
    pub generator_split: &'static str,
}

/// An ended episode: its case, its score (0 when it ended without a grade, as the return
/// counts it), how it ended and, for a task draw, where the case came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finished {
    pub case_id: String,
    pub final_score: f64,
    pub terminated: bool,
    pub truncated: bool,
    pub task: Option<TaskInfo>,
}

pub fn track_mode(name: &str) -> Result<TrackMode, Refusal> {
    match name {
        "blind" => Ok(TrackMode::Blind),
        "instrumented" => Ok(TrackMode::Instrumented),
        other => Err(Refusal::validation(format!(
            "track_mode must be 'blind' or 'instrumented', got '{}'",
            other.chars().take(64).collect::<String>()
        ))),
    }
}

/// What the candidate list was built from: `ls_env::candidates` reads only the document
/// catalogue, the allowed actions and the available interventions of an observation (and
/// `done`), so while these are unchanged the list is too and is not rebuilt (most steps reveal
/// no new document and take no intervention). The test below checks the cached list against
/// a fresh one at every step of random episodes.
struct CandidateInputs {
    docs: Shared<[DocumentCatalogEntry]>,
    allowed: Shared<[String]>,
    interventions: Shared<[String]>,
}

impl CandidateInputs {
    fn of(o: &Observation) -> Self {
        Self {
            docs: o.visible_documents.clone(),
            allowed: o.allowed_actions.clone(),
            interventions: o.available_interventions.clone(),
        }
    }

    /// The same inputs: the same shared value (the episode hands out clones of one `Arc`
    /// until a part changes), else equal contents.
    fn same(&self, o: &Observation) -> bool {
        fn eq<T: PartialEq>(a: &Shared<[T]>, b: &Shared<[T]>) -> bool {
            std::ptr::eq::<[T]>(&**a, &**b) || a == b
        }
        eq(&self.docs, &o.visible_documents)
            && eq(&self.allowed, &o.allowed_actions)
            && eq(&self.interventions, &o.available_interventions)
    }
}

/// One environment and what its last reply showed.
pub struct Slot {
    pub env: Environment,
    pool: Arc<CasePool>,
    config: EnvConfig,
    pub candidates: Vec<Candidate>,
    /// What `candidates` was built from (`None`: rebuild on the next reply).
    candidate_inputs: Option<CandidateInputs>,
    pub features: [f32; FEATURES],
    pub rl_vector: [f32; RL_VECTOR_LEN],
    pub done: bool,
    /// A panic left the environment in an unknown state; only a reset clears this.
    pub poisoned: bool,
    /// The task draw of the current episode (`None` for a server reset).
    draw: Option<TaskInfo>,
    /// The last episode that ended.
    pub finished: Option<Finished>,
    /// Seeds of task draws that name none (seeded 42, as the server's selection stream).
    own_seeds: SeedStream,
    /// Whether each reply computes the flat observation (`candidates`, `features`,
    /// `rl_vector`); the structured environment reads its own and turns this off.
    pub flat: bool,
}

impl Slot {
    pub fn new(pool: Arc<CasePool>, config: EnvConfig) -> Self {
        Self {
            env: Environment::new(pool.clone(), config),
            pool,
            config,
            candidates: Vec::new(),
            candidate_inputs: None,
            features: [0.0; FEATURES],
            rl_vector: [0.0; RL_VECTOR_LEN],
            done: false,
            poisoned: false,
            draw: None,
            finished: None,
            own_seeds: SeedStream::new(42, 0),
            flat: true,
        }
    }

    fn check(&self) -> Result<(), Refusal> {
        if self.poisoned {
            return Err(Refusal::new(
                500,
                "internal_error",
                "an earlier internal error discarded this environment; call reset()",
            ));
        }
        Ok(())
    }

    pub fn reset(&mut self, req: &ResetRequest) -> Result<StepEnvelope, Refusal> {
        self.unpoison();
        self.candidate_inputs = None;
        let out = self.env.reset(req)?;
        self.draw = None;
        self.observe(&out);
        Ok(out)
    }

    /// A Python reset: the server's, or a task draw with `seed` (else the draw's own seed,
    /// else the next of this environment's stream).
    pub fn reset_any(&mut self, reset: &Reset, seed: Option<u64>) -> Result<StepEnvelope, Refusal> {
        match reset {
            Reset::Server(req) => self.reset(req),
            Reset::Task(t) => {
                let seed = t
                    .seed
                    .or(seed)
                    .unwrap_or_else(|| self.own_seeds.next_seed());
                self.reset_task(t, seed)
            }
        }
    }

    /// Start an episode of the task distribution's draw for `seed`, in a new session (the draw
    /// and the episode are pure functions of the selection and the seed).
    pub fn reset_task(&mut self, t: &TaskReset, seed: u64) -> Result<StepEnvelope, Refusal> {
        let draw = embedded_tasks()?
            .draw(t.selection, seed)
            .map_err(|e| Refusal::validation(e.to_string()))?;
        self.unpoison();
        self.candidate_inputs = None;
        let opts = CaseReset {
            fresh: true,
            track: t.track.clone(),
            reward_mode: t.reward_mode,
        };
        let out = self.env.reset_case(draw.case, &opts)?;
        self.draw = Some(TaskInfo {
            generator: draw.generator.as_str(),
            template: draw.template,
            family: draw.family.as_str(),
            seed,
            template_split: t.selection.templates.as_str(),
            generator_split: t.selection.generators.as_str(),
        });
        self.observe(&out);
        Ok(out)
    }

    fn unpoison(&mut self) {
        if self.poisoned {
            self.env = Environment::new(self.pool.clone(), self.config);
            self.poisoned = false;
        }
    }

    pub fn step(&mut self, action: &Action) -> Result<StepEnvelope, Refusal> {
        self.check()?;
        let out = self.env.step(&action.action_type, &action.payload)?;
        self.observe(&out);
        Ok(out)
    }

    /// Step the `index`-th candidate of the last reply. An index past the list is played as
    /// an unknown action ([`INVALID_INDEX_ACTION`]): a penalised step with `success: false`, as
    /// the server treats an unknown tool; after the end it is refused like any step.
    pub fn step_candidate(&mut self, index: usize) -> Result<StepEnvelope, Refusal> {
        self.check()?;
        let out = match self.candidates.get(index) {
            Some(c) => {
                let (action_type, payload) = (c.action_type, c.payload.clone());
                self.env.step(action_type, &payload)?
            }
            None => self.env.step(INVALID_INDEX_ACTION, &Default::default())?,
        };
        self.observe(&out);
        Ok(out)
    }

    fn observe(&mut self, out: &StepEnvelope) {
        self.done = out.done;
        if out.done {
            let score = self.env.episode().and_then(|e| e.grade.as_ref());
            self.finished = Some(Finished {
                case_id: out.observation.case_id.clone(),
                final_score: score.map_or(0.0, |g| g.final_score),
                terminated: out.terminated,
                truncated: out.truncated,
                task: self.draw.clone(),
            });
        }
        if !self.flat {
            return;
        }
        let o = &out.observation;
        let unchanged = !out.done && self.candidate_inputs.as_ref().is_some_and(|k| k.same(o));
        if !unchanged {
            self.candidates = candidates(o, out.done);
            self.candidates.truncate(MAX_CANDIDATES);
            self.candidate_inputs = (!out.done).then(|| CandidateInputs::of(o));
        }
        self.features = features(out, self.candidates.len());
        self.rl_vector = [0.0; RL_VECTOR_LEN];
        if self.config.track_mode == TrackMode::Instrumented {
            if let Some(ep) = self.env.episode() {
                for (slot, v) in self.rl_vector.iter_mut().zip(ep.rl_vector()) {
                    *slot = v as f32;
                }
            }
        }
    }

    /// The last ended episode, as JSON text.
    pub fn finished_text(&self) -> Option<String> {
        self.finished
            .as_ref()
            .and_then(|f| serde_json::to_string(f).ok())
    }

    /// Where the last ended episode's case came from (a task draw), as JSON text.
    pub fn task_text(&self) -> Option<String> {
        self.finished
            .as_ref()
            .and_then(|f| f.task.as_ref())
            .and_then(|t| serde_json::to_string(t).ok())
    }

    /// The candidate mask: 1 for each legal index.
    pub fn mask(&self) -> [u8; MAX_CANDIDATES] {
        let mut m = [0u8; MAX_CANDIDATES];
        m[..self.candidates.len()].fill(1);
        m
    }
}

impl crate::vector::Poison for Slot {
    fn poison(&mut self) {
        self.poisoned = true;
    }
}

/// The fixed-size features of a reply, all read from the observation the agent sees:
/// 0 budget remaining / total, 1 budget remaining, 2 steps / max steps, 3 step count,
/// 4 max steps, 5 case clock, 6 visible documents, 7 revealed artifacts, 8 pending events,
/// 9 observed risk signals, 10 pressure events seen, 11 days until due, 12 tool calls,
/// 13 interventions taken, 14 budget used, 15 last action succeeded, 16 this step's reward,
/// 17 done, 18–22 task family A–E one-hot, 23 legal candidate count.
pub fn features(out: &StepEnvelope, candidate_count: usize) -> [f32; FEATURES] {
    let o = &out.observation;
    let frac = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
    let success = matches!(
        o.last_tool_result.get("success"),
        Some(serde_json::Value::Bool(true))
    );
    let mut f = [0.0f64; FEATURES];
    f[0] = frac(o.budget_remaining, o.budget_total);
    f[1] = o.budget_remaining;
    f[2] = frac(f64::from(o.step_count), f64::from(o.max_steps));
    f[3] = f64::from(o.step_count);
    f[4] = f64::from(o.max_steps);
    f[5] = f64::from(o.case_clock);
    f[6] = o.visible_documents.len() as f64;
    f[7] = o.revealed_artifacts.len() as f64;
    f[8] = o.pending_events.len() as f64;
    f[9] = o.risk_snapshot.observed_signal_count as f64;
    f[10] = o.risk_snapshot.pressure_events_seen as f64;
    f[11] = f64::from(o.risk_snapshot.days_until_due);
    f[12] = o.investigation_status.tool_calls as f64;
    f[13] = o.investigation_status.interventions_taken as f64;
    f[14] = o.investigation_status.budget_used;
    f[15] = if success { 1.0 } else { 0.0 };
    f[16] = out.reward;
    f[17] = if out.done { 1.0 } else { 0.0 };
    let family = ["task_a", "task_b", "task_c", "task_d", "task_e"]
        .iter()
        .position(|t| *t == o.task_type);
    if let Some(i) = family {
        f[18 + i] = 1.0;
    }
    f[23] = candidate_count as f64;
    f.map(|x| x as f32)
}

/// The reply as the server writes it: the same serializer, so the same bytes.
pub fn reply_text(out: &StepEnvelope) -> Result<String, Refusal> {
    let mut buf = String::with_capacity(if out.done { 64 * 1024 } else { 32 * 1024 });
    ls_json::append_to_string(&mut buf, out)
        .map_err(|e| Refusal::new(500, "internal_error", format!("serialize: {e}")))?;
    Ok(buf)
}

/// Candidates as JSON text: a list of `{"action_type", "payload"}`.
pub fn candidates_text(list: &[Candidate]) -> String {
    let v: Vec<serde_json::Value> = list.iter().map(Candidate::to_json).collect();
    serde_json::Value::Array(v).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cached candidate list equals a fresh `ls_env::candidates` at every step of random
    /// episodes (random seeds, printed; random candidate indices, some past the list).
    #[test]
    fn cached_candidates_equal_fresh_ones() {
        let pool = embedded_pool().expect("pool");
        let base: u64 = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64 % 100_000)
            .unwrap_or(1);
        println!("candidate cache seeds {base}..{}", base + 40);
        let mut slot = Slot::new(pool, EnvConfig::default());
        let mut checked = 0;
        for seed in base..base + 40 {
            let req = ResetRequest {
                seed: Some(seed),
                ..Default::default()
            };
            let mut out = slot.reset(&req).expect("reset");
            let mut pick = seed;
            loop {
                let fresh = candidates(&out.observation, out.done);
                assert_eq!(
                    slot.candidates,
                    fresh[..fresh.len().min(MAX_CANDIDATES)],
                    "seed {seed}"
                );
                checked += 1;
                if out.done {
                    break;
                }
                pick = pick
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let n = slot.candidates.len() as u64;
                // Mostly investigation steps (submissions are the last four), now and then an
                // index past the list.
                let i = (pick >> 33) % (n + 1);
                let i = if i >= n.saturating_sub(4) && (pick >> 20) % 4 != 0 {
                    0
                } else {
                    i
                };
                out = slot.step_candidate(i as usize).expect("step");
            }
        }
        assert!(checked > 200, "{checked}");
    }
}
