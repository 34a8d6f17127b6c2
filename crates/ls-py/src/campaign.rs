//! A Financial Audit multi-period campaign in process, as the audit server's campaign routes
//! serve it (`/campaign/start`, `/campaign/state`, `/campaign/task/start`,
//! `/campaign/task/submit`, `/campaign/action`, `/campaign/period/advance`, `/overseer/review`,
//! `/overseer/report`, `/self-improve`, `/self-improve/history`): the same bodies, the same
//! reply objects (built here in the handlers' field order, serialized by `serde_json` as the
//! server does), the same refusals.
//!
//! One [`CampaignSlot`] holds one campaign. Departures: a body's `campaign_id` is optional
//! (the slot's campaign is meant; a different id is refused as an unknown campaign, 404, as the
//! server refuses it), a start body may carry `campaign_id` to choose the id (the server ignores
//! that field and draws one), and nothing expires.

use crate::errors::Refusal;
use crate::request::audit_typed;
use audit_env::campaign::{self, Campaign, OverseerAction, Role};
use audit_env::episode::AuditAction;
use audit_env::error::AuditError;
use audit_env::model::{Finding, HELD_OUT_SEEDS, TRAIN_SEEDS};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// The periods a start body without `total_periods` gets (the server's
/// `CAMPAIGN_TOTAL_PERIODS` default).
pub const DEFAULT_TOTAL_PERIODS: u32 = 5;

#[derive(Deserialize)]
struct StartReq {
    #[serde(default)]
    seed: Option<u64>,
    #[serde(default)]
    total_periods: Option<u32>,
    /// In process only: the campaign's id (default: drawn from the OS random source).
    #[serde(default)]
    campaign_id: Option<String>,
}

#[derive(Deserialize)]
struct IdReq {
    #[serde(default)]
    campaign_id: Option<String>,
}

#[derive(Deserialize)]
struct RoleReq {
    #[serde(default)]
    campaign_id: Option<String>,
    role: Role,
}

#[derive(Deserialize)]
struct SubmitReq {
    #[serde(default)]
    campaign_id: Option<String>,
    role: Role,
    #[serde(default)]
    action: Option<AuditAction>,
    #[serde(default)]
    findings: Option<Vec<Finding>>,
    #[serde(default)]
    submit_final: Option<bool>,
}

#[derive(Deserialize)]
struct ReviewReq {
    #[serde(default)]
    campaign_id: Option<String>,
    #[serde(default)]
    action: Option<OverseerAction>,
    #[serde(default)]
    decisions: Option<Vec<campaign::OverseerDecision>>,
    #[serde(default)]
    conflicts_resolved: Option<Vec<campaign::ConflictResolution>>,
    #[serde(default)]
    audit_trail_id: Option<String>,
}

#[derive(Deserialize)]
struct ImproveReq {
    #[serde(default)]
    campaign_id: Option<String>,
    #[serde(default)]
    train_seeds: Option<Vec<u64>>,
    #[serde(default)]
    held_out_seeds: Option<Vec<u64>>,
}

fn to_json<T: Serialize>(v: &T) -> Result<Value, AuditError> {
    serde_json::to_value(v).map_err(|_| AuditError::Internal)
}

fn text(v: &Value) -> Result<String, Refusal> {
    serde_json::to_string(v).map_err(|_| AuditError::Internal.into())
}

/// At most 64 characters of client input, marked when cut (the server's quote bound).
fn quote(s: &str) -> String {
    match s.char_indices().nth(64) {
        None => s.to_owned(),
        Some((i, _)) => format!("{}…", &s[..i]),
    }
}

/// One campaign (none before the first start).
pub struct CampaignSlot {
    campaign: Option<Campaign>,
    max_findings_per_step: usize,
    pub poisoned: bool,
}

impl CampaignSlot {
    pub fn new(max_findings_per_step: usize) -> Self {
        Self {
            campaign: None,
            max_findings_per_step,
            poisoned: false,
        }
    }

    /// The campaign a body names (or the slot's, when it names none).
    fn get(&mut self, id: Option<&str>) -> Result<&mut Campaign, Refusal> {
        if self.poisoned {
            return Err(Refusal::new(
                500,
                "internal",
                "an earlier internal error discarded this campaign; call start()",
            ));
        }
        let Some(c) = self.campaign.as_mut() else {
            return Err(
                AuditError::Conflict("no campaign is running: call start() first".into()).into(),
            );
        };
        match id {
            Some(id) if id != c.id => Err(AuditError::NotFound {
                kind: "campaign_id",
                id: quote(id),
            }
            .into()),
            _ => Ok(c),
        }
    }

    /// `POST /campaign/start`: a new campaign replaces the slot's.
    pub fn start(&mut self, body: &str) -> Result<String, Refusal> {
        let req: StartReq = audit_typed(body)?;
        let id = req
            .campaign_id
            .unwrap_or_else(|| audit_env::util::random_id("cmp"));
        let c = Campaign::new(
            id.clone(),
            req.seed.unwrap_or(42),
            req.total_periods.unwrap_or(DEFAULT_TOTAL_PERIODS),
            self.max_findings_per_step,
        )?;
        let obs = to_json(&c.observation(None))?;
        self.campaign = Some(c);
        self.poisoned = false;
        text(&json!({"status": "started", "campaign_id": id, "observation": obs}))
    }

    /// `GET /campaign/state/{campaign_id}`.
    pub fn state(&mut self) -> Result<String, Refusal> {
        let c = self.get(None)?;
        text(&json!({
            "campaign_id": c.id,
            "score": c.score(),
            "score_breakdown": c.period_scores.last().map(|p| &p.score),
            "current_period_score": c.score_period().score,
            "state": to_json(&c.state())?,
            "observation": to_json(&c.observation(None))?,
        }))
    }

    /// `POST /campaign/task/start`.
    pub fn task_start(&mut self, body: &str) -> Result<String, Refusal> {
        let req: RoleReq = audit_typed(body)?;
        let c = self.get(req.campaign_id.as_deref())?;
        let ep = c.start_task(req.role)?;
        let obs = ep.observation(0.0, ep.reset_feedback(), false);
        let p = c.current_period;
        let prior: Vec<_> = c.history.iter().filter(|h| h.period < p).cloned().collect();
        text(&json!({
            "status": "started", "campaign_id": c.id, "role": req.role,
            "observation": to_json(&c.observation(Some(obs)))?,
            "world_state": to_json(&c.world)?,
            "findings_history": to_json(&prior)?,
            "active_instructions": to_json(&c.active_instructions())?,
            "pending_regulatory_shocks": to_json(&c.world.mid_period_rule_drops)?,
        }))
    }

    /// `POST /campaign/task/submit` (`status: submitted`) or its alias `POST /campaign/action`
    /// (`status: accepted`).
    pub fn submit(&mut self, body: &str, status: &str) -> Result<String, Refusal> {
        let req: SubmitReq = audit_typed(body)?;
        let mut action = req.action.unwrap_or_default();
        if let Some(f) = req.findings {
            action.findings.extend(f);
        }
        if req.submit_final.is_some() {
            action.submit_final = req.submit_final;
        }
        let c = self.get(req.campaign_id.as_deref())?;
        let r = c.submit(req.role, action)?;
        text(&json!({
            "status": status, "campaign_id": c.id, "role": req.role,
            "observation": to_json(&r.observation)?, "reward": r.reward, "done": r.done,
            "deferred": r.deferred, "shock": r.shock, "grader": r.grader, "warnings": r.warnings,
        }))
    }

    /// `POST /campaign/period/advance`.
    pub fn advance(&mut self, body: &str) -> Result<String, Refusal> {
        let req: IdReq = audit_typed(body)?;
        let c = self.get(req.campaign_id.as_deref())?;
        let status = c.advance()?;
        text(&json!({
            "status": status, "campaign_id": c.id, "observation": to_json(&c.observation(None))?,
            "period_score": c.period_scores.last().map(|p| &p.score), "score": c.score(),
        }))
    }

    /// `POST /overseer/review`.
    pub fn review(&mut self, body: &str) -> Result<String, Refusal> {
        let req: ReviewReq = audit_typed(body)?;
        let mut action = req.action.unwrap_or_default();
        if let Some(d) = req.decisions {
            action.decisions.extend(d);
        }
        if let Some(c) = req.conflicts_resolved {
            action.conflicts_resolved.extend(c);
        }
        if req.audit_trail_id.is_some() {
            action.audit_trail_id = req.audit_trail_id;
        }
        let c = self.get(req.campaign_id.as_deref())?;
        let r = c.review(action)?;
        text(&json!({"status": "reviewed", "campaign_id": c.id, "result": to_json(&r)?}))
    }

    /// `GET /overseer/report`.
    pub fn report(&mut self) -> Result<String, Refusal> {
        let c = self.get(None)?;
        let mut per_role = BTreeMap::new();
        for (r, e) in &c.episodes {
            if let Some(gr) = &e.last_grade {
                per_role.insert(
                    r.as_str().to_string(),
                    json!({"precision": gr.precision, "recall": gr.recall, "score": gr.score}),
                );
            }
        }
        let period_scores: Vec<Value> = c
            .period_scores
            .iter()
            .map(|p| json!({"period": p.period, "score": p.score.score, "overseer_quality": p.inputs.overseer_quality}))
            .collect();
        text(&json!({
            "campaign_id": c.id, "current_period": c.current_period, "budget_remaining": c.budget_remaining,
            "findings_seen": c.history.len(), "regulatory_shocks_applied": to_json(&c.shocks_applied)?,
            "reviews": to_json(&c.reviews)?, "per_role_current_period": per_role,
            "period_scores": period_scores,
        }))
    }

    /// `POST /self-improve` (by default training seeds 42-51, held-out 100-104).
    pub fn self_improve(&mut self, body: &str) -> Result<String, Refusal> {
        let req: ImproveReq = audit_typed(body)?;
        let train = req.train_seeds.unwrap_or_else(|| TRAIN_SEEDS.collect());
        let held = req
            .held_out_seeds
            .unwrap_or_else(|| HELD_OUT_SEEDS.collect());
        let c = self.get(req.campaign_id.as_deref())?;
        let rec = c.self_improve(&train, &held)?;
        text(&json!({"status": "completed", "campaign_id": c.id, "summary": to_json(&rec)?}))
    }

    /// `GET /self-improve/history`.
    pub fn improve_history(&mut self) -> Result<String, Refusal> {
        let c = self.get(None)?;
        text(&json!({"campaign_id": c.id, "history": to_json(&c.improve_history)?}))
    }

    /// The running campaign's id, if any.
    pub fn id(&self) -> Option<String> {
        self.campaign.as_ref().map(|c| c.id.clone())
    }

    /// Has the running campaign closed its last period?
    pub fn finished(&self) -> bool {
        self.campaign.as_ref().is_some_and(|c| c.finished)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_campaign_runs_its_periods_and_refuses_out_of_order_calls() {
        let mut s = CampaignSlot::new(50);
        let e = s.state().unwrap_err();
        assert_eq!((e.status, e.code), (409, "conflict"));
        let start: Value = serde_json::from_str(
            &s.start(r#"{"seed": 7, "total_periods": 2, "campaign_id": "cmp-t"}"#)
                .unwrap(),
        )
        .unwrap();
        assert_eq!(start["campaign_id"], "cmp-t");
        let e = s.advance(r#"{"campaign_id": "other"}"#).unwrap_err();
        assert_eq!(
            (e.status, e.code, e.field.as_deref()),
            (404, "not_found", Some("campaign_id"))
        );
        let e = s.task_start(r#"{"role": "nobody"}"#).unwrap_err();
        assert_eq!((e.status, e.field.as_deref()), (422, Some("role")));
        for _ in 0..2 {
            let r: Value = serde_json::from_str(&s.advance("{}").unwrap()).unwrap();
            assert!(r["score"].is_number());
        }
        assert!(s.finished());
        assert_eq!(s.advance("").unwrap_err().status, 409);
    }
}
