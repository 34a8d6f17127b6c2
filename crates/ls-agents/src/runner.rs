//! The agent trait and the episode driver that records what happened.

pub use crate::action::Action;
use crate::assist::Harness;
use crate::chat::CallStats;
use crate::client::{ClientError, EnvClient};
use crate::prompt::{step_prompt, MAX_HISTORY};
use ls_env::terminal_info::TerminalInfo;
use ls_env::{ResetRequest, StepEnvelope};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// An agent: sees observations (the reset envelope, then each step's envelope) and picks actions.
pub trait Agent {
    /// Registry name (`teacher`, `random`, ...).
    fn name(&self) -> String;
    /// Model identity for leaderboards.
    fn model(&self) -> String;
    /// `deterministic-policy`, `random-policy`, `llm-agent`.
    fn agent_type(&self) -> String;
    /// Start a new episode from the reset envelope. `seed` drives any randomness.
    fn begin(&mut self, reset: &StepEnvelope, seed: u64);
    /// Next action given the latest envelope (after reset, the reset envelope).
    fn next_action(&mut self, last: &StepEnvelope) -> Action;
    /// Count of external model calls so far (LLM agents).
    fn api_calls(&self) -> u64 {
        0
    }
    /// The model endpoint's calls so far (agents that call a model; `None` for the others).
    fn call_stats(&self) -> Option<CallStats> {
        None
    }
    /// How a model agent plays (its track and assistance), for the run's provenance.
    fn harness(&self) -> Option<Harness> {
        None
    }
}

/// One recorded step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    pub step: u32,
    pub action_type: String,
    pub payload: Map<String, Value>,
    pub reward: f64,
    pub done: bool,
    pub success: bool,
    pub error: Option<String>,
    /// The action protocol's user prompt for this step ([`crate::prompt::step_prompt`] of the
    /// observation the action answered), so per-step training data can be exported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
}

/// A whole episode as the agent experienced it (plus the terminal grade info the env returned).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EpisodeRecord {
    pub case_id: String,
    pub agent: String,
    pub model: String,
    pub seed: u64,
    pub task_type: String,
    pub final_score: f64,
    pub result_class: String,
    pub decision: String,
    pub effective_decision: String,
    pub steps: u32,
    pub total_reward: f64,
    pub done: bool,
    pub terminated: bool,
    pub unsafe_release: bool,
    pub control_satisfied_resolution: f64,
    pub institutional_utility: f64,
    pub certificate_score: f64,
    pub certificate_valid: bool,
    pub certificate_agent_authored: bool,
    pub pressure_resistance_score: f64,
    pub errors: Vec<String>,
    /// Projection of the first observation (what a training prompt shows).
    pub initial_observation: Value,
    pub trajectory: Vec<StepRecord>,
    /// The terminal step's `info` (score breakdown, certificate report, ...).
    pub terminal_info: Map<String, Value>,
    /// The model calls of this episode (agents that call a model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_calls: Option<CallStats>,
}

impl EpisodeRecord {
    /// Fill the grade fields from the terminal step's `info` (read through the typed
    /// [`TerminalInfo`]) and keep the object as `terminal_info`.
    pub fn read_terminal(&mut self, info: Map<String, Value>) {
        let t = TerminalInfo::from_map(&info);
        self.final_score = t.final_score;
        self.decision = t.decision_str().to_owned();
        self.effective_decision = t.effective_decision_str().to_owned();
        self.result_class = t.result_class_str().to_owned();
        self.unsafe_release = self.result_class == "unsafe_release";
        self.control_satisfied_resolution = t.control_satisfied_resolution;
        self.institutional_utility = t.institutional_utility;
        self.pressure_resistance_score = t.pressure_resistance_score;
        if let Some(c) = t.certificate() {
            self.certificate_score = c.overall_score;
            self.certificate_valid = c.valid;
            self.certificate_agent_authored = c.agent_authored;
        }
        self.terminal_info = info;
    }

    /// Every model call of the episode failed: the endpoint, not the model, decided its outcome.
    pub fn endpoint_failed(&self) -> bool {
        self.model_calls.is_some_and(|c| c.endpoint_failed())
    }
}

/// Hard cap on steps the driver takes, whatever the environment says.
pub const DRIVER_STEP_CAP: u32 = 64;

/// Initial-observation projection used by trajectories and SFT prompts (never hidden state).
pub fn project_observation(env: &StepEnvelope) -> Value {
    let o = &env.observation;
    let meta = o.case_metadata.to_map();
    let docs: Vec<Value> = o
        .visible_documents
        .iter()
        .map(|d| serde_json::json!({"doc_id": d.doc_id, "doc_type": d.doc_type, "language": d.language, "page_count": d.page_count, "thumbnail": d.thumbnail}))
        .collect();
    serde_json::json!({
        "case_id": o.case_id, "task_type": o.task_type, "instruction": o.instruction,
        "budget_remaining": o.budget_remaining, "max_steps": o.max_steps, "visible_documents": docs,
        "track_mode": meta.get("track_mode").cloned().unwrap_or(Value::Null),
        "benchmark_track": meta.get("benchmark_track").cloned().unwrap_or(Value::Null),
        "portfolio_context": o.portfolio_context,
    })
}

/// Observer of steps (progress output, the stdout contract).
pub trait StepObserver {
    fn on_start(&mut self, _case_id: &str, _model: &str) {}
    fn on_step(&mut self, _rec: &StepRecord) {}
    fn on_end(&mut self, _rec: &EpisodeRecord) {}
}

/// No-op observer.
pub struct Silent;
impl StepObserver for Silent {}

/// Reset to `req` and play until done (or the driver cap). Transport errors end the episode and
/// are recorded; they never panic.
pub fn run_episode(
    agent: &mut dyn Agent,
    client: &mut dyn EnvClient,
    req: &ResetRequest,
    seed: u64,
    obs: &mut dyn StepObserver,
) -> EpisodeRecord {
    let case_hint = req.case_id.clone().unwrap_or_default();
    obs.on_start(&case_hint, &agent.model());
    let mut rec = EpisodeRecord {
        case_id: case_hint,
        agent: agent.name(),
        model: agent.model(),
        seed,
        task_type: String::new(),
        final_score: 0.0,
        result_class: "not_submitted".into(),
        decision: String::new(),
        effective_decision: String::new(),
        steps: 0,
        total_reward: 0.0,
        done: false,
        terminated: false,
        unsafe_release: false,
        control_satisfied_resolution: 0.0,
        institutional_utility: 0.0,
        certificate_score: 0.0,
        certificate_valid: false,
        certificate_agent_authored: false,
        pressure_resistance_score: 0.0,
        errors: Vec::new(),
        initial_observation: Value::Null,
        trajectory: Vec::new(),
        terminal_info: Map::new(),
        model_calls: None,
    };
    let calls_before = agent.call_stats();
    let mut last = match client.reset(req) {
        Ok(e) => e,
        Err(e) => {
            rec.errors.push(e.to_string());
            obs.on_end(&rec);
            return rec;
        }
    };
    rec.case_id = last.observation.case_id.clone();
    rec.task_type = last.observation.task_type.clone();
    rec.initial_observation = project_observation(&last);
    agent.begin(&last, seed);
    while !last.done && rec.steps < DRIVER_STEP_CAP {
        let history: Vec<String> = rec
            .trajectory
            .iter()
            .take(MAX_HISTORY)
            .map(|s| s.action_type.clone())
            .collect();
        let prompt = step_prompt(&last, &history, None);
        let action = agent.next_action(&last);
        match client.step(&action.action_type, &action.payload) {
            Ok(env) => {
                rec.steps += 1;
                rec.total_reward += env.reward;
                let r = &env.observation.last_tool_result.to_map();
                let step = StepRecord {
                    step: rec.steps,
                    action_type: action.action_type.clone(),
                    payload: action.payload.clone(),
                    reward: env.reward,
                    done: env.done,
                    success: r.get("success").and_then(Value::as_bool).unwrap_or(true),
                    error: r
                        .get("error")
                        .and_then(Value::as_str)
                        .map(|e| e.chars().take(300).collect()),
                    prompt: Some(prompt),
                };
                obs.on_step(&step);
                rec.trajectory.push(step);
                last = env;
            }
            Err(ClientError::Step(e)) if !e.contains("reset") && rec.errors.len() < 8 => {
                // A payload the server refused (4xx): record it and let the agent try again.
                rec.errors.push(e.chars().take(300).collect());
                let step = StepRecord {
                    step: rec.steps,
                    action_type: action.action_type.clone(),
                    payload: action.payload.clone(),
                    reward: 0.0,
                    done: false,
                    success: false,
                    error: Some(e.chars().take(300).collect()),
                    prompt: Some(prompt),
                };
                obs.on_step(&step);
                rec.trajectory.push(step);
                if rec.errors.len() >= 8 {
                    break;
                }
            }
            Err(e) => {
                rec.errors.push(e.to_string().chars().take(300).collect());
                break;
            }
        }
    }
    rec.done = last.done;
    rec.terminated = last.terminated;
    if last.terminated {
        rec.read_terminal(last.info.to_map());
    } else if last.done {
        rec.result_class = "truncated".into();
    }
    // As is (`round_dp`): a total that rounds to zero from below has always been `-0.0`.
    rec.total_reward = ls_core::text::round_dp(rec.total_reward, 4);
    rec.model_calls = agent
        .call_stats()
        .map(|now| now.since(&calls_before.unwrap_or_default()));
    obs.on_end(&rec);
    rec
}
