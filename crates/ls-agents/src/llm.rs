//! An agent for any OpenAI-compatible chat-completions endpoint, and the **action protocol** that
//! training data is written in.
//!
//! Each step the model sees [`system_prompt`] and [`step_prompt`] (a compact, bounded projection of
//! the observation and the previous action types) and answers with one JSON action, written by
//! [`action_target`]. `run_episode` records that prompt on every step, so `ledgershield export
//! --format steps` teaches exactly what this agent asks: a model that reproduces the recorded
//! targets plays the recorded episode again. Transport errors, timeouts, 429/5xx answers are retried with exponential backoff;
//! refusals and unusable output fall back to a safe `NEEDS_REVIEW` submission, so a run never
//! crashes on a bad model.
//!
//! Every model is played alike: nothing here reads the model's name. The prompt, the reply cap
//! ([`DEFAULT_MAX_TOKENS`] unless the user sets one) and the parsing are the same for every
//! model; the teacher's hint, JSON repair and the guardrails are [`Assistance`] options, off by
//! default, that make a run *assisted* ([`crate::assist`]).

pub use crate::action::{parse_action, parse_actions, repair_action, MAX_PLAN_ACTIONS};
pub use crate::assist::{Assistance, Harness};
pub use crate::chat::{CallStats, Reply};
use crate::guardrails::Guardrails;
pub use crate::prompt::{
    action_target, compact_ascii_json, step_prompt, system_prompt, PromptOptions, MAX_HISTORY,
};
use crate::prompt::{candidate_action, choose_candidate, extend_prompt};
use crate::runner::{Action, Agent, EpisodeRecord, StepObserver, StepRecord};
use ls_env::StepEnvelope;
use ls_rl::Ledger as EvidenceLedger;
use serde_json::{json, Value};
use std::io::Write;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct LlmConfig {
    pub api_base: String,
    pub model: String,
    pub api_key: Option<String>,
    pub temperature: f64,
    pub timeout: Duration,
    pub max_retries: u32,
    pub backoff: Duration,
    /// Reply token cap of every call; `None` is [`DEFAULT_MAX_TOKENS`] (for every model).
    pub max_tokens: Option<u32>,
}

/// The reply token cap when the user sets none: room for a full submission (a teacher
/// submission with its certificate is up to ~2,700 tokens), the same for every model.
pub const DEFAULT_MAX_TOKENS: u32 = 3072;

pub struct LlmAgent {
    cfg: LlmConfig,
    http: crate::outbound::Outbound,
    stats: CallStats,
    failures: u64,
    history: Vec<String>,
    /// The rest of a plan reply, played before the model is asked again.
    queue: std::collections::VecDeque<Action>,
    assistance: Assistance,
    /// The teacher whose next action is shown (only with `assistance.teacher_hint`).
    hint: Option<crate::teacher::TeacherAgent>,
    options: PromptOptions,
    /// What the episode revealed so far (kept when `options.ledger`).
    ledger: EvidenceLedger,
    /// What the episode revealed that a submission may cite (used with `assistance.guardrails`).
    guard: Guardrails,
}

impl LlmAgent {
    pub fn new(cfg: LlmConfig) -> Self {
        let http = crate::outbound::Outbound::new(crate::outbound::Limits::per_call(cfg.timeout));
        Self {
            cfg,
            http,
            stats: CallStats::default(),
            failures: 0,
            history: Vec::new(),
            queue: std::collections::VecDeque::new(),
            assistance: Assistance::default(),
            hint: None,
            options: PromptOptions::default(),
            ledger: EvidenceLedger::default(),
            guard: Guardrails::default(),
        }
    }

    /// Show the policy more than the default prompt (the evidence ledger, the candidate
    /// actions) and optionally decode against the candidates (an assisted run).
    pub fn with_options(mut self, options: PromptOptions) -> Self {
        self.options = options;
        self
    }

    /// Switch assistance on (an assisted run; every option is off by default).
    pub fn with_assistance(mut self, assistance: Assistance) -> Self {
        self.hint = assistance
            .teacher_hint
            .then(crate::teacher::TeacherAgent::new);
        self.assistance = assistance;
        self
    }

    /// Call the endpoint through `transport` (its limits, deadline and cancellation) instead of
    /// the default one (the config's timeout per call, nothing else).
    pub fn with_transport(mut self, transport: crate::outbound::Outbound) -> Self {
        self.http = transport;
        self
    }

    pub fn failures(&self) -> u64 {
        self.failures
    }

    /// The reply token cap every call sends.
    pub fn max_tokens(&self) -> u32 {
        self.cfg.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)
    }

    /// How this agent plays: its track, the options on, the reply cap and the temperature.
    pub fn harness(&self) -> Harness {
        Harness::new(
            self.assistance,
            self.options,
            self.max_tokens(),
            self.cfg.temperature,
        )
    }

    fn prompt(&self, last: &StepEnvelope, hint: Option<&Action>) -> String {
        let base = step_prompt(last, &self.history, hint);
        let o = self.options;
        if !o.ledger && !o.candidates {
            return base;
        }
        let cands = o
            .candidates
            .then(|| ls_env::candidates::candidates(&last.observation, last.done));
        extend_prompt(&base, o.ledger.then_some(&self.ledger), cands.as_deref())
    }

    /// Candidate-constrained decoding: the candidate the reply chooses, else the `NEEDS_REVIEW`
    /// submission among the candidates (a failure); `None` when there are no candidates.
    fn constrained(&mut self, last: &StepEnvelope, reply: Option<&str>) -> Option<Action> {
        let cands = ls_env::candidates::candidates(&last.observation, last.done);
        if let Some(c) = reply.and_then(|r| choose_candidate(r, &cands)) {
            return Some(candidate_action(c));
        }
        self.failures += 1;
        cands
            .iter()
            .find(|c| {
                c.action_type == "submit_decision"
                    && c.payload.get("decision").and_then(Value::as_str) == Some("NEEDS_REVIEW")
            })
            .map(candidate_action)
    }

    fn call(&mut self, user: &str) -> Reply {
        let started = std::time::Instant::now();
        let reply = self.attempts(user);
        self.stats.record(&reply, started);
        if matches!(reply, Reply::Failed(_)) {
            self.failures += 1;
        }
        reply
    }

    fn attempts(&mut self, user: &str) -> Reply {
        let body = crate::chat::request_body(
            &self.cfg.model,
            self.cfg.temperature,
            self.max_tokens(),
            system_prompt(),
            user,
        );
        let mut last_err = String::new();
        for attempt in 0..=self.cfg.max_retries.min(8) {
            if attempt > 0 {
                std::thread::sleep(self.cfg.backoff.saturating_mul(1 << (attempt - 1).min(6)));
            }
            self.stats.requests += 1;
            let sent = self.http.post_json(
                &self.cfg.api_base,
                &["chat", "completions"],
                &body,
                self.cfg.api_key.as_deref(),
            );
            let resp = match sent {
                Ok(r) => r,
                Err(e) => {
                    last_err = e.to_string();
                    if e.is_final() {
                        break;
                    }
                    continue;
                }
            };
            let status = reqwest::StatusCode::from_u16(resp.status)
                .unwrap_or(reqwest::StatusCode::BAD_GATEWAY);
            let text = resp.body.chars().take(200_000).collect::<String>();
            if status.as_u16() == 429 || status.is_server_error() {
                last_err = format!("HTTP {status}");
                continue;
            }
            if !status.is_success() {
                return Reply::Failed(format!("HTTP {status}"));
            }
            let Ok(v) = serde_json::from_str::<Value>(&text) else {
                last_err = "response is not JSON".into();
                continue;
            };
            self.stats.add_usage(&v);
            match crate::chat::interpret(&v) {
                Ok(reply) => return reply,
                Err(why) => last_err = why,
            }
        }
        Reply::Failed(last_err)
    }

    /// One model call: the first action of the reply (the rest of a plan is queued), a fallback
    /// submission on refusal or failure, `None` when the text has no usable action.
    fn ask(&mut self, last: &StepEnvelope) -> Option<Action> {
        let suggestion = self.hint.as_mut().map(|t| t.next_action(last));
        let prompt = self.prompt(last, suggestion.as_ref());
        let reply = self.call(&prompt);
        if self.options.constrain {
            let text = match &reply {
                Reply::Text(t) => Some(t.as_str()),
                Reply::Refusal(_) | Reply::Failed(_) => None,
            };
            return self.constrained(last, text);
        }
        match reply {
            Reply::Text(t) => {
                let mut acts = parse_actions(&t).or_else(|| {
                    if self.assistance.repair {
                        repair_action(&t).map(|a| vec![a])
                    } else {
                        None
                    }
                })?;
                let first = acts.remove(0);
                self.queue.extend(acts);
                Some(first)
            }
            Reply::Refusal(r) => {
                self.failures += 1;
                Some(Self::fallback(&format!("model refused: {r}")))
            }
            Reply::Failed(e) => Some(Self::fallback(&format!("model call failed: {e}"))),
        }
    }

    fn fallback(reason: &str) -> Action {
        Action::new(
            "submit_decision",
            json!({"decision": "NEEDS_REVIEW", "confidence": 0.35, "reason_codes": ["model_output_unparseable"], "policy_checks": {}, "evidence_map": {}, "notes": reason.chars().take(200).collect::<String>()}),
        )
    }
}

impl Agent for LlmAgent {
    fn name(&self) -> String {
        "llm".into()
    }
    fn model(&self) -> String {
        self.cfg.model.clone()
    }
    fn agent_type(&self) -> String {
        self.harness().agent_type()
    }
    fn begin(&mut self, reset: &StepEnvelope, seed: u64) {
        self.history.clear();
        self.queue.clear();
        self.ledger = EvidenceLedger::default();
        self.guard = Guardrails::default();
        if let Some(t) = self.hint.as_mut() {
            t.begin(reset, seed);
        }
    }
    fn next_action(&mut self, last: &StepEnvelope) -> Action {
        if self.options.ledger {
            self.ledger.absorb(last);
        }
        if self.assistance.guardrails {
            self.guard.observe(last);
        }
        let action = match self.queue.pop_front() {
            Some(a) => Some(a),
            None => self.ask(last),
        };
        let mut action = action.unwrap_or_else(|| {
            self.failures += 1;
            Self::fallback("model output unparseable")
        });
        let steps_left = last
            .observation
            .max_steps
            .saturating_sub(last.observation.step_count);
        if steps_left <= 1 && action.action_type != "submit_decision" {
            action = Self::fallback("step limit reached before a decision");
        }
        if self.assistance.guardrails {
            self.guard.apply(&mut action);
        }
        if self.history.len() < MAX_HISTORY {
            self.history.push(action.action_type.clone());
        }
        action
    }
    fn api_calls(&self) -> u64 {
        self.stats.requests
    }
    fn call_stats(&self) -> Option<CallStats> {
        Some(self.stats)
    }
    fn harness(&self) -> Option<Harness> {
        Some(LlmAgent::harness(self))
    }
}

// ----- the stdout contract -----

fn num(x: f64) -> String {
    if x.abs() < 0.005 {
        "0.00".into()
    } else {
        format!("{x:.2}")
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Prints `[START]`, `[STEP]` and `[END]` lines (the documented submission contract).
pub struct ContractPrinter<W: Write> {
    pub out: W,
    pub model: String,
    rewards: Vec<f64>,
}

impl<W: Write> ContractPrinter<W> {
    pub fn new(out: W, model: &str) -> Self {
        Self {
            out,
            model: model.to_owned(),
            rewards: Vec::new(),
        }
    }
}

impl<W: Write> StepObserver for ContractPrinter<W> {
    fn on_start(&mut self, case_id: &str, _model: &str) {
        self.rewards.clear();
        let _ = writeln!(
            self.out,
            "[START] task={} env=ledgershield model={}",
            one_line(case_id),
            one_line(&self.model)
        );
    }
    fn on_step(&mut self, r: &StepRecord) {
        self.rewards.push(r.reward);
        let err = r
            .error
            .as_deref()
            .map(one_line)
            .filter(|e| !e.is_empty())
            .unwrap_or_else(|| "null".into());
        let _ = writeln!(
            self.out,
            "[STEP] step={} action={}({}) reward={} done={} error={}",
            r.step,
            one_line(&r.action_type),
            compact_ascii_json(&Value::Object(r.payload.clone())),
            num(r.reward),
            r.done,
            err
        );
    }
    fn on_end(&mut self, rec: &EpisodeRecord) {
        let score = if rec.terminated {
            rec.final_score
        } else if !rec.errors.is_empty() && rec.trajectory.is_empty() {
            0.01
        } else {
            self.rewards.last().copied().unwrap_or(0.01)
        }
        .clamp(0.01, 0.99);
        let rewards: Vec<String> = self.rewards.iter().map(|r| num(*r)).collect();
        let _ = writeln!(
            self.out,
            "[END] success={} steps={} score={} rewards={}",
            score >= 0.85,
            rec.steps,
            num(score),
            rewards.join(",")
        );
        let _ = self.out.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contract_numbers_and_json() {
        assert_eq!(num(0.004), "0.00");
        assert_eq!(num(-0.004), "0.00");
        assert_eq!(num(0.126), "0.13");
        assert_eq!(
            compact_ascii_json(&json!({"b": 1, "a": "é"})),
            "{\"a\":\"\\u00e9\",\"b\":1}"
        );
    }
}
