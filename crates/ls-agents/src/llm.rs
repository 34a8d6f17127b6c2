//! An agent for any OpenAI-compatible chat-completions endpoint, and the **action protocol** that
//! training data is written in.
//!
//! Each step the model sees [`system_prompt`] and [`step_prompt`] (a compact, bounded projection of
//! the observation and the previous action types) and answers with one JSON action, written by
//! [`action_target`]. `run_episode` records that prompt on every step, so `ledgershield export
//! --format steps` teaches exactly what this agent asks: a model that reproduces the recorded
//! targets plays the recorded episode again. Transport errors, timeouts, 429/5xx answers are retried with exponential backoff;
//! malformed output is repaired when the capability tier allows it; refusals and unusable output
//! fall back to a safe `NEEDS_REVIEW` submission, so a run never crashes on a bad model.

use crate::ledger::EvidenceLedger;
pub use crate::prompt::{
    action_target, compact_ascii_json, step_prompt, system_prompt, PromptOptions, MAX_HISTORY,
};
use crate::prompt::{candidate_action, choose_candidate, extend_prompt};
use crate::runner::{Action, Agent, EpisodeRecord, StepObserver, StepRecord};
use ls_env::StepEnvelope;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::io::Write;
use std::time::Duration;

/// Capability profile derived from the model name (documented tiers).
///
/// The reference's tiers also carry investigation and intervention budget bonuses (+2/+2 elite,
/// +1/+1 strong) for its scripted investigation and intervention phases. This agent has no such
/// phases (the model chooses every action within the environment's step and cost budget, and its
/// prompt is the recorded training protocol, which a budget line would change), so the bonuses
/// have no counterpart here and are not part of the profile (docs/agents.md).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CapabilityProfile {
    pub model: String,
    pub capability_score: f64,
    pub tier: String,
    pub plan_mode: String,
    pub repair_level: String,
    pub decision_tokens: u32,
    pub planning_tokens: u32,
    pub pending_artifact_waits: u32,
}

impl CapabilityProfile {
    pub fn from_model(model: &str) -> Self {
        let n = model.trim().to_ascii_lowercase();
        // `local/...`: a locally trained checkpoint, always the standard tier (no planner hint in
        // its prompts, no repair), so it is scored by exactly the protocol of its training data.
        let local = n.starts_with("local/");
        let mut score = if local {
            4.0
        } else if n.contains("gpt-4o") {
            4.6
        } else if let Some(rest) = n.split("gpt-").nth(1) {
            let num: String = rest
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            num.trim_end_matches('.').parse::<f64>().unwrap_or(4.0)
        } else {
            4.0
        };
        for (word, delta) in [
            ("pro", 0.5),
            ("latest", 0.2),
            ("mini", -0.7),
            ("nano", -1.1),
            ("turbo", -0.3),
        ] {
            if !local && n.contains(word) {
                score += delta;
            }
        }
        let score = ls_core::text::round_dp(score, 2);
        let (tier, plan, repair, dt, pt, waits) = if score >= 5.0 {
            ("elite", "llm", "partial", 1536, 640, 2)
        } else if score >= 4.5 {
            ("strong", "hybrid", "partial", 1280, 512, 1)
        } else {
            ("standard", "llm", "none", 512, 384, 0)
        };
        Self {
            model: model.to_owned(),
            capability_score: score,
            tier: tier.into(),
            plan_mode: plan.into(),
            repair_level: repair.into(),
            decision_tokens: dt,
            planning_tokens: pt,
            pending_artifact_waits: waits,
        }
    }
}

#[derive(Debug, Clone)]
pub struct LlmConfig {
    pub api_base: String,
    pub model: String,
    pub api_key: Option<String>,
    pub temperature: f64,
    pub timeout: Duration,
    pub max_retries: u32,
    pub backoff: Duration,
    /// Reply token cap; `None` uses the capability tier's `decision_tokens`.
    pub max_tokens: Option<u32>,
}

/// Outcome of one model call after retries.
#[derive(Debug, Clone, PartialEq)]
enum Reply {
    Text(String),
    Refusal(String),
    Failed(String),
}

pub struct LlmAgent {
    cfg: LlmConfig,
    pub profile: CapabilityProfile,
    http: crate::outbound::Outbound,
    calls: u64,
    failures: u64,
    history: Vec<String>,
    /// The rest of a plan reply, played before the model is asked again.
    queue: std::collections::VecDeque<Action>,
    hint: crate::teacher::TeacherAgent,
    options: PromptOptions,
    /// What the episode revealed so far (kept when `options.ledger`).
    ledger: EvidenceLedger,
}

impl LlmAgent {
    pub fn new(cfg: LlmConfig) -> Self {
        let profile = CapabilityProfile::from_model(&cfg.model);
        let http = crate::outbound::Outbound::new(crate::outbound::Limits::per_call(cfg.timeout));
        Self {
            cfg,
            profile,
            http,
            calls: 0,
            failures: 0,
            history: Vec::new(),
            queue: std::collections::VecDeque::new(),
            hint: crate::teacher::TeacherAgent::new(),
            options: PromptOptions::default(),
            ledger: EvidenceLedger::default(),
        }
    }

    /// Show the policy more than the default prompt (the evidence ledger, the candidate
    /// actions) and optionally decode against the candidates.
    pub fn with_options(mut self, options: PromptOptions) -> Self {
        self.options = options;
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
        let body = json!({
            "model": self.cfg.model,
            "temperature": self.cfg.temperature,
            "max_tokens": self.cfg.max_tokens.unwrap_or(self.profile.decision_tokens),
            "messages": [{"role": "system", "content": system_prompt()}, {"role": "user", "content": user}],
        });
        let mut last_err = String::new();
        for attempt in 0..=self.cfg.max_retries.min(8) {
            if attempt > 0 {
                std::thread::sleep(self.cfg.backoff.saturating_mul(1 << (attempt - 1).min(6)));
            }
            self.calls += 1;
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
            let choice = v.get("choices").and_then(|c| c.get(0));
            let msg = choice.and_then(|c| c.get("message"));
            if let Some(r) = msg
                .and_then(|m| m.get("refusal"))
                .and_then(Value::as_str)
                .filter(|r| !r.is_empty())
            {
                return Reply::Refusal(r.chars().take(200).collect());
            }
            if choice
                .and_then(|c| c.get("finish_reason"))
                .and_then(Value::as_str)
                == Some("content_filter")
            {
                return Reply::Refusal("content_filter".into());
            }
            match msg.and_then(|m| m.get("content")).and_then(Value::as_str) {
                Some(c) => return Reply::Text(c.to_owned()),
                None => {
                    last_err = "no message content".into();
                    continue;
                }
            }
        }
        self.failures += 1;
        Reply::Failed(last_err)
    }

    /// One model call: the first action of the reply (the rest of a plan is queued), a fallback
    /// submission on refusal or failure, `None` when the text has no usable action.
    fn ask(&mut self, last: &StepEnvelope) -> Option<Action> {
        let suggestion = if self.profile.plan_mode == "hybrid" {
            Some(self.hint.next_action(last))
        } else {
            None
        };
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
                    if self.profile.repair_level == "partial" {
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

/// Parse one action from model text: code fences stripped, first JSON value decoded; accepts
/// `{action_type, payload}`, `{"action": {...}}` and `{"actions": [...]}` (first entry).
pub fn parse_action(text: &str) -> Option<Action> {
    parse_actions(text).and_then(|a| a.into_iter().next())
}

/// Parse every action of a reply: one action, or a plan `{"actions": [...]}` (at most
/// [`MAX_PLAN_ACTIONS`], entries that are not actions skipped). `None` when nothing parses.
pub fn parse_actions(text: &str) -> Option<Vec<Action>> {
    let t = text
        .trim()
        .trim_start_matches("```json")
        .trim_start_matches("```")
        .trim_end_matches("```")
        .trim();
    let start = t.find('{')?;
    let mut de = serde_json::Deserializer::from_str(&t[start..]).into_iter::<Value>();
    let v = de.next()?.ok()?;
    if let Some(list) = v.get("actions").and_then(Value::as_array) {
        let acts: Vec<Action> = list
            .iter()
            .take(MAX_PLAN_ACTIONS)
            .filter_map(action_from_value)
            .collect();
        return (!acts.is_empty()).then_some(acts);
    }
    action_from_value(&v).map(|a| vec![a])
}

/// Longest plan a single reply may queue.
pub const MAX_PLAN_ACTIONS: usize = 64;

fn action_from_value(v: &Value) -> Option<Action> {
    let o = v.as_object()?;
    if let Some(a) = o.get("action").filter(|a| a.is_object()) {
        return action_from_value(a);
    }
    let at = o.get("action_type")?.as_str()?.trim();
    if at.is_empty() || at.len() > 64 {
        return None;
    }
    let payload = o
        .get("payload")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    Some(Action {
        action_type: at.to_owned(),
        payload,
    })
}

/// Partial repair: recover an action name (and decision) from broken JSON.
pub fn repair_action(text: &str) -> Option<Action> {
    let lower = text.to_ascii_lowercase();
    let i = lower.find("\"action_type\"")?;
    let rest = &text[i + 13..];
    let q1 = rest.find('"')?;
    let rest = &rest[q1 + 1..];
    let q2 = rest.find('"')?;
    let at = rest[..q2].trim();
    if at.is_empty() || at.len() > 64 || !at.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return None;
    }
    let mut payload = Map::new();
    if at == "submit_decision" {
        let d = ["ESCALATE_FRAUD", "NEEDS_REVIEW", "HOLD", "PAY"]
            .into_iter()
            .find(|d| text.contains(d))?;
        payload.insert("decision".into(), json!(d));
        payload.insert("confidence".into(), json!(0.5));
        payload.insert("reason_codes".into(), json!(["partial_json_recovery"]));
    }
    Some(Action {
        action_type: at.to_owned(),
        payload,
    })
}

impl Agent for LlmAgent {
    fn name(&self) -> String {
        "llm".into()
    }
    fn model(&self) -> String {
        self.cfg.model.clone()
    }
    fn agent_type(&self) -> String {
        "llm-agent".into()
    }
    fn begin(&mut self, reset: &StepEnvelope, seed: u64) {
        self.history.clear();
        self.queue.clear();
        self.ledger = EvidenceLedger::default();
        self.hint.begin(reset, seed);
    }
    fn next_action(&mut self, last: &StepEnvelope) -> Action {
        if self.options.ledger {
            if let Ok(o) = serde_json::to_value(&last.observation) {
                self.ledger.observe(&o);
            }
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
        if self.history.len() < MAX_HISTORY {
            self.history.push(action.action_type.clone());
        }
        action
    }
    fn api_calls(&self) -> u64 {
        self.calls
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
    fn tiers() {
        assert_eq!(CapabilityProfile::from_model("gpt-5.4").tier, "elite");
        assert_eq!(CapabilityProfile::from_model("gpt-4o").tier, "strong");
        assert_eq!(
            CapabilityProfile::from_model("gpt-4o-mini").tier,
            "standard"
        );
        assert_eq!(
            CapabilityProfile::from_model("llama-3").capability_score,
            4.0
        );
        assert_eq!(
            CapabilityProfile::from_model("gpt-5-pro").capability_score,
            5.5
        );
        // No budget bonuses: this agent has no scripted phases for them to extend.
        let v = serde_json::to_value(CapabilityProfile::from_model("gpt-5.4")).unwrap();
        assert!(v.get("investigation_bonus").is_none() && v.get("intervention_bonus").is_none());
        assert_eq!(v["decision_tokens"], 1536);
        let local = CapabilityProfile::from_model("local/pro-latest-checkpoint");
        assert_eq!(
            (local.tier.as_str(), local.plan_mode.as_str()),
            ("standard", "llm")
        );
    }

    #[test]
    fn parsing_and_repair() {
        let a = parse_action(
            "```json\n{\"action_type\": \"ocr\", \"payload\": {\"doc_id\": \"X\"}}\n```",
        )
        .unwrap();
        assert_eq!(a.action_type, "ocr");
        assert_eq!(a.payload["doc_id"], "X");
        assert_eq!(
            parse_action("sure! {\"actions\": [{\"action_type\": \"zoom\"}]} trailing")
                .unwrap()
                .action_type,
            "zoom"
        );
        assert!(parse_action("I cannot help with that").is_none());
        let r = repair_action(
            "{\"action_type\": \"submit_decision\", \"payload\": {\"decision\": \"HOLD\", ",
        )
        .unwrap();
        assert_eq!(r.payload["decision"], "HOLD");
        assert!(repair_action("{\"action_type\": \"bad name!\"").is_none());
    }

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
