//! Auditors for the Financial Audit environment, played through its public routes
//! ([`client::AuditClient`]: in process or over HTTP): the LLM auditor for any OpenAI-compatible
//! endpoint ([`llm::LlmAuditor`]) and the rule-based baseline ([`baseline::BaselineAuditor`]),
//! on single tasks and on whole campaigns (the four specialists in dependency order, then the
//! overseer's review, then the period advance), with the seed's `[START]`/`[STEP]`/`[END]`
//! stdout contract ([`contract`]).
//!
//! A single task is one final step: the auditor's findings for the task's documents (the LLM
//! auditor asks the model once), then the evaluator's grade (`/grader`; sealed held-out grades
//! need the operator key over HTTP, in process the auditor is the evaluator). A campaign period
//! starts each specialist's task, submits its findings (final), asks the auditor to review every
//! finding of the period as the overseer, and advances; the campaign's score is the
//! environment's (`/campaign/state`).

pub mod baseline;
pub mod client;
pub mod contract;
pub mod llm;

use crate::chat::CallStats;
use audit_env::campaign::Instruction;
use client::{max_findings_per_step, read, valid_error_types, AuditClient, AuditRoute};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::time::Instant;

/// The four tasks, in the campaign's dependency order.
pub const TASKS: [&str; 4] = [
    "expense_audit",
    "invoice_match",
    "gst_reconciliation",
    "fraud_detection",
];
/// The specialist roles, in dependency order (the tasks above).
pub const ROLES: [&str; 4] = [
    "expense_specialist",
    "invoice_specialist",
    "gst_specialist",
    "fraud_specialist",
];
/// A single task succeeds (contract `success=true`) at this score, as in the seed's CLI.
pub const SUCCESS_SCORE: f64 = 0.5;

/// What an auditor is shown for one task.
pub struct TaskView<'a> {
    pub task: &'a str,
    /// The task observation (`task_description`, `documents`, `metadata`).
    pub observation: &'a Value,
    /// The error types a finding may name (the task's, plus any a shock added).
    pub valid_types: Vec<String>,
    /// In a campaign: the role and the `task/start` reply (world state, findings history,
    /// instructions, pending shocks).
    pub campaign: Option<(&'a str, &'a Value)>,
    pub max_findings: usize,
}

/// An auditor's findings for a task, or why there are none.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Findings {
    pub findings: Vec<Value>,
    /// Findings the auditor wrote that were not usable (no document, an invalid type, a repeat).
    pub dropped: usize,
    /// Why the findings are empty or partial (a failed call, a refusal, unusable text).
    pub error: Option<String>,
    /// Rows of the documents shown / in the documents (a prompt's budget may cut them).
    pub rows: (usize, usize),
}

/// An auditor: findings for a task, decisions on a period's findings as the overseer.
pub trait AuditPolicy {
    /// `audit-llm` or `audit-baseline`.
    fn name(&self) -> String;
    fn model(&self) -> String;
    fn agent_type(&self) -> String;
    fn findings(&mut self, view: &TaskView<'_>) -> Findings;
    /// Overseer decisions (`{finding_ref, verdict}`) on the period's submitted findings; an empty
    /// list leaves every finding undecided (counted as approved).
    fn review(
        &mut self,
        period: u32,
        submitted: &[Value],
        instructions: &[Instruction],
    ) -> Findings;
    fn call_stats(&self) -> Option<CallStats> {
        None
    }
    /// How the auditor plays (provenance); `None` for a rule-based auditor.
    fn harness(&self) -> Option<AuditHarness> {
        None
    }
}

/// How a language-model auditor played: the `llm` agent's harness and its prompt budget.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AuditHarness {
    #[serde(flatten)]
    pub harness: crate::assist::Harness,
    /// Characters of documents a prompt may carry.
    pub prompt_chars: usize,
}

/// One task as played.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AuditTaskRecord {
    pub task_id: String,
    pub seed: u64,
    /// In a campaign: period and role.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// The grade's score; `None` when it could not be read (sealed, or the task failed).
    pub score: Option<f64>,
    /// The grade as the evaluator read it (campaigns: counts only).
    pub grade: Value,
    pub steps: u32,
    pub rewards: Vec<f64>,
    pub findings: Vec<Value>,
    pub dropped_findings: usize,
    pub rows_shown: usize,
    pub rows_total: usize,
    /// Why the auditor's findings are empty or partial, or why the task failed.
    pub error: Option<String>,
    /// The environment refused or failed: the task has no score.
    pub failed: bool,
    pub model_calls: Option<CallStats>,
    pub seconds: f64,
}

/// One period's review as played.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReviewRecord {
    pub period: u32,
    pub decisions: usize,
    pub result: Value,
    pub error: Option<String>,
    pub period_score: Option<f64>,
}

/// A campaign as played.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AuditCampaignRecord {
    pub campaign_id: String,
    pub seed: u64,
    pub periods: u32,
    /// Every period advanced.
    pub completed: bool,
    pub score: Option<f64>,
    pub tasks: Vec<AuditTaskRecord>,
    pub reviews: Vec<ReviewRecord>,
    pub error: Option<String>,
    pub model_calls: Option<CallStats>,
    pub seconds: f64,
}

/// Observes the play (the stdout contract, progress).
pub trait AuditObserver {
    fn task_start(&mut self, _task: &str, _model: &str) {}
    fn task_end(&mut self, _rec: &AuditTaskRecord) {}
    fn campaign_start(&mut self, _seed: u64, _periods: u32) {}
    fn period_start(&mut self, _period: u32) {}
    fn role_done(&mut self, _period: u32, _role: &str, _findings: usize) {}
    fn review_done(&mut self, _period: u32, _decisions: usize) {}
    fn campaign_end(&mut self, _rec: &AuditCampaignRecord) {}
}

/// No output.
pub struct Quiet;
impl AuditObserver for Quiet {}

fn stats_since(p: &dyn AuditPolicy, before: Option<CallStats>) -> Option<CallStats> {
    p.call_stats()
        .map(|now| now.since(&before.unwrap_or_default()))
}

/// Play one task on `seed`: reset, the auditor's findings, one final step, the grade.
pub fn run_task(
    policy: &mut dyn AuditPolicy,
    env: &mut dyn AuditClient,
    task: &str,
    seed: u64,
    obs: &mut dyn AuditObserver,
) -> AuditTaskRecord {
    let started = Instant::now();
    let before = policy.call_stats();
    obs.task_start(task, &policy.model());
    let mut rec = AuditTaskRecord {
        task_id: task.to_owned(),
        seed,
        ..Default::default()
    };
    if let Err(e) = play_task(policy, env, task, seed, &mut rec) {
        rec.failed = true;
        rec.error = Some(e);
    }
    rec.model_calls = stats_since(policy, before);
    rec.seconds = ls_core::text::round_dp(started.elapsed().as_secs_f64(), 3);
    obs.task_end(&rec);
    rec
}

fn play_task(
    policy: &mut dyn AuditPolicy,
    env: &mut dyn AuditClient,
    task: &str,
    seed: u64,
    rec: &mut AuditTaskRecord,
) -> Result<(), String> {
    let catalogue = env.call(AuditRoute::Tasks, &Value::Null)?;
    env.new_session();
    let reset = env.call(AuditRoute::Reset, &json!({"task_id": task, "seed": seed}))?;
    let observation = reset.get("observation").unwrap_or(&reset);
    let view = TaskView {
        task,
        observation,
        valid_types: valid_error_types(observation),
        campaign: None,
        max_findings: max_findings_per_step(&catalogue),
    };
    let f = policy.findings(&view);
    rec.error = f.error.clone();
    let step = env.call(
        AuditRoute::Step,
        &json!({"action": {"findings": f.findings, "submit_final": true}}),
    )?;
    rec.findings = f.findings;
    rec.dropped_findings = f.dropped;
    (rec.rows_shown, rec.rows_total) = f.rows;
    rec.steps = 1;
    rec.rewards
        .push(step.get("reward").and_then(Value::as_f64).unwrap_or(0.0));
    let grade = match step.get("grader").filter(|g| g.is_object()) {
        Some(g) => g.clone(),
        None => env.call(AuditRoute::Grader, &Value::Null)?,
    };
    rec.score = grade.get("score").and_then(Value::as_f64);
    if rec.score.is_none() {
        let status = grade.get("status").and_then(Value::as_str).unwrap_or("");
        return Err(format!(
            "no grade to read ({status}): a held-out seed's grade is sealed and needs the operator key"
        ));
    }
    rec.grade = grade;
    Ok(())
}

/// Play a whole campaign of `periods` periods on `seed`.
pub fn run_campaign(
    policy: &mut dyn AuditPolicy,
    env: &mut dyn AuditClient,
    seed: u64,
    periods: u32,
    obs: &mut dyn AuditObserver,
) -> AuditCampaignRecord {
    let started = Instant::now();
    let before = policy.call_stats();
    obs.campaign_start(seed, periods);
    let mut rec = AuditCampaignRecord {
        seed,
        periods,
        ..Default::default()
    };
    if let Err(e) = play_campaign(policy, env, &mut rec, obs) {
        rec.error = Some(e);
    }
    rec.model_calls = stats_since(policy, before);
    rec.seconds = ls_core::text::round_dp(started.elapsed().as_secs_f64(), 3);
    obs.campaign_end(&rec);
    rec
}

fn play_campaign(
    policy: &mut dyn AuditPolicy,
    env: &mut dyn AuditClient,
    rec: &mut AuditCampaignRecord,
    obs: &mut dyn AuditObserver,
) -> Result<(), String> {
    let catalogue = env.call(AuditRoute::Tasks, &Value::Null)?;
    let start = env.call(
        AuditRoute::CampaignStart,
        &json!({"seed": rec.seed, "total_periods": rec.periods}),
    )?;
    let id = start
        .get("campaign_id")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    rec.campaign_id = id.clone();
    for period in 1..=rec.periods {
        obs.period_start(period);
        let mut submitted: Vec<Value> = Vec::new();
        let mut instructions = Vec::new();
        for (role, task) in ROLES.iter().zip(TASKS) {
            let t = play_role(
                policy,
                env,
                &id,
                (period, role, task),
                max_findings_per_step(&catalogue),
            )?;
            instructions = t.1;
            for f in &t.0.findings {
                submitted.push(json!({"role": role, "finding": f}));
            }
            obs.role_done(period, role, t.0.findings.len());
            rec.tasks.push(t.0);
        }
        let review = policy.review(period, &submitted, &instructions);
        let reply = env.call(
            AuditRoute::Review,
            &json!({"campaign_id": id, "action": {"decisions": review.findings}}),
        )?;
        obs.review_done(period, review.findings.len());
        let adv = env.call(AuditRoute::Advance, &json!({"campaign_id": id}))?;
        rec.reviews.push(ReviewRecord {
            period,
            decisions: review.findings.len(),
            result: reply.get("result").cloned().unwrap_or(Value::Null),
            error: review.error,
            period_score: adv.pointer("/period_score/score").and_then(Value::as_f64),
        });
    }
    rec.completed = true;
    let state = env.call(AuditRoute::CampaignState, &json!({"campaign_id": id}))?;
    rec.score = state.get("score").and_then(Value::as_f64);
    Ok(())
}

/// One specialist's task of a period: start, findings, final submit. Returns the record and the
/// period's active instructions (the overseer reads them).
fn play_role(
    policy: &mut dyn AuditPolicy,
    env: &mut dyn AuditClient,
    id: &str,
    (period, role, task): (u32, &str, &str),
    max_findings: usize,
) -> Result<(AuditTaskRecord, Vec<Instruction>), String> {
    let started = Instant::now();
    let before = policy.call_stats();
    let start = env.call(
        AuditRoute::TaskStart,
        &json!({"campaign_id": id, "role": role}),
    )?;
    let observation = start
        .pointer("/observation/period_observation")
        .unwrap_or(&Value::Null);
    let view = TaskView {
        task,
        observation,
        valid_types: valid_error_types(observation),
        campaign: Some((role, &start)),
        max_findings,
    };
    let f = policy.findings(&view);
    let reply = env.call(
        AuditRoute::TaskSubmit,
        &json!({"campaign_id": id, "role": role, "action": {"findings": f.findings, "submit_final": true}}),
    )?;
    let grade = reply.get("grader").cloned().unwrap_or(Value::Null);
    let rec = AuditTaskRecord {
        task_id: task.to_owned(),
        seed: observation
            .pointer("/metadata/seed")
            .and_then(Value::as_u64)
            .unwrap_or_default(),
        period: Some(period),
        role: Some(role.to_owned()),
        score: grade.get("score").and_then(Value::as_f64),
        grade,
        steps: 1,
        rewards: vec![reply.get("reward").and_then(Value::as_f64).unwrap_or(0.0)],
        findings: f.findings,
        dropped_findings: f.dropped,
        rows_shown: f.rows.0,
        rows_total: f.rows.1,
        error: f.error,
        failed: false,
        model_calls: stats_since(policy, before),
        seconds: ls_core::text::round_dp(started.elapsed().as_secs_f64(), 3),
    };
    let instructions = read(&start, "/active_instructions").unwrap_or_default();
    Ok((rec, instructions))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_harness_is_written_flat_in_its_provenance_order() {
        let h = AuditHarness {
            harness: crate::assist::Harness {
                track: crate::assist::UNASSISTED.into(),
                assistance: Vec::new(),
                max_tokens: 512,
                temperature: 0.0,
            },
            prompt_chars: 6_000,
        };
        let text = serde_json::to_string(&h).unwrap();
        assert_eq!(
            text,
            r#"{"track":"unassisted","assistance":[],"max_tokens":512,"temperature":0.0,"prompt_chars":6000}"#
        );
        assert_eq!(serde_json::from_str::<AuditHarness>(&text).unwrap(), h);
    }

    #[test]
    fn replies_are_read_into_types_at_the_client() {
        let catalogue = json!({"tasks": [{"action_schema": {"max_findings_per_step": 7}}]});
        assert_eq!(max_findings_per_step(&catalogue), 7);
        assert_eq!(
            max_findings_per_step(&json!({"tasks": []})),
            audit_env::model::limits::MAX_FINDINGS_PER_STEP_DEFAULT
        );
        let obs = json!({"metadata": {"valid_error_types": ["over_limit", "weekend_expense"]}});
        assert_eq!(valid_error_types(&obs), ["over_limit", "weekend_expense"]);
        assert!(valid_error_types(&json!({})).is_empty());
        let start = json!({"active_instructions": [{"id": "POL-001", "bucket": "policy",
            "text": "t", "severity": 1.0, "active_from_period": 1}]});
        let ins: Vec<Instruction> = read(&start, "/active_instructions").unwrap();
        assert_eq!(ins[0].id, "POL-001");
    }
}
