//! The campaign routes' request bodies and reply objects, declared once for the two places that
//! serve them: the audit server's HTTP routes and the in-process campaign of the Python module.
//! Both parse the same bodies and build the same replies (fields in this order, serialized by
//! `serde_json`), so a campaign played in process is byte-identical to one played over HTTP.
//!
//! A body's `campaign_id` is generic: the server takes `String` (required, a missing one is a
//! 422 naming the field), the in-process slot takes `Option<String>` (it holds one campaign).
//! Serde reports a missing non-`Option` field and fills a missing `Option` with `None`, so one
//! declaration gives both. What this module does not know: sessions, expiry, ids drawn for a
//! start, HTTP status codes (the callers map [`AuditError`]). A body type names its route in a
//! plain comment: a doc comment would become its schema's description in the OpenAPI document.

use crate::campaign::{
    Campaign, ConflictResolution, OverseerAction, OverseerDecision, Role, SubmitResult,
};
use crate::episode::AuditAction;
use crate::error::AuditError;
use crate::model::{Finding, HELD_OUT_SEEDS, TRAIN_SEEDS};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;

// `POST /campaign/start`.
#[derive(Deserialize, JsonSchema)]
#[schemars(rename = "CampaignStartReq")]
pub struct StartBody {
    /// World seed (default 42).
    #[serde(default)]
    pub seed: Option<u64>,
    /// Periods in the campaign (default `CAMPAIGN_TOTAL_PERIODS`, 5).
    #[serde(default)]
    pub total_periods: Option<u32>,
    /// In process only: the campaign's id (default drawn from the OS random source). The server
    /// always draws the id and ignores this field, so its schema leaves it out.
    #[serde(default)]
    #[schemars(skip)]
    pub campaign_id: Option<String>,
}

// `POST /campaign/period/advance`.
#[derive(Deserialize, JsonSchema)]
#[schemars(rename = "CampaignIdReq")]
pub struct IdBody<Id> {
    /// The campaign (from `/campaign/start`).
    pub campaign_id: Id,
}

// `POST /campaign/task/start`.
#[derive(Deserialize, JsonSchema)]
#[schemars(rename = "RoleReq")]
pub struct RoleBody<Id> {
    /// The campaign (from `/campaign/start`).
    pub campaign_id: Id,
    /// The auditor role whose task starts.
    pub role: Role,
}

// `POST /campaign/task/submit` and its alias `POST /campaign/action`.
#[derive(Deserialize, JsonSchema)]
#[schemars(rename = "SubmitReq")]
pub struct SubmitBody<Id> {
    /// The campaign (from `/campaign/start`).
    pub campaign_id: Id,
    /// The auditor role submitting.
    pub role: Role,
    /// The findings as an action object; top-level `findings` are added to it.
    #[serde(default)]
    pub action: Option<AuditAction>,
    /// Findings of this submit.
    #[serde(default)]
    pub findings: Option<Vec<Finding>>,
    /// True ends the role's task for the period and grades it.
    #[serde(default)]
    pub submit_final: Option<bool>,
}

impl<Id> SubmitBody<Id> {
    /// The campaign id, the role and the action with the top-level fields merged into it.
    pub fn into_parts(self) -> (Id, Role, AuditAction) {
        let action = AuditAction::merged(self.action, self.findings, self.submit_final);
        (self.campaign_id, self.role, action)
    }
}

// `POST /overseer/review`.
#[derive(Deserialize, JsonSchema)]
#[schemars(rename = "ReviewReq")]
pub struct ReviewBody<Id> {
    /// The campaign (from `/campaign/start`).
    pub campaign_id: Id,
    /// The review as an action object; the top-level fields are added to it.
    #[serde(default)]
    pub action: Option<OverseerAction>,
    /// Accept or reject decisions on the period's findings.
    #[serde(default)]
    pub decisions: Option<Vec<OverseerDecision>>,
    /// Resolutions of conflicts between roles' findings.
    #[serde(default)]
    pub conflicts_resolved: Option<Vec<ConflictResolution>>,
    /// Client reference for the review's audit trail.
    #[serde(default)]
    pub audit_trail_id: Option<String>,
}

impl<Id> ReviewBody<Id> {
    /// The campaign id and the review with the top-level fields merged into it.
    pub fn into_parts(self) -> (Id, OverseerAction) {
        let mut action = self.action.unwrap_or_default();
        if let Some(d) = self.decisions {
            action.decisions.extend(d);
        }
        if let Some(c) = self.conflicts_resolved {
            action.conflicts_resolved.extend(c);
        }
        if self.audit_trail_id.is_some() {
            action.audit_trail_id = self.audit_trail_id;
        }
        (self.campaign_id, action)
    }
}

// `POST /self-improve`.
#[derive(Deserialize, JsonSchema)]
#[schemars(rename = "ImproveReq")]
pub struct ImproveBody<Id> {
    /// The campaign (from `/campaign/start`).
    pub campaign_id: Id,
    /// Training seeds (default 42-51).
    #[serde(default)]
    pub train_seeds: Option<Vec<u64>>,
    /// Held-out seeds (default 100-104).
    #[serde(default)]
    pub held_out_seeds: Option<Vec<u64>>,
}

impl<Id> ImproveBody<Id> {
    /// The campaign id, the training seeds and the held-out seeds (defaults filled in).
    pub fn into_parts(self) -> (Id, Vec<u64>, Vec<u64>) {
        let train = self.train_seeds.unwrap_or_else(|| TRAIN_SEEDS.collect());
        let held = self
            .held_out_seeds
            .unwrap_or_else(|| HELD_OUT_SEEDS.collect());
        (self.campaign_id, train, held)
    }
}

/// Refuses a keyless campaign that would play a held-out seed. A campaign grades every final
/// submit (counts per type, `TP: k`) and scores each period, so on a held-out seed it is a
/// per-submission oracle: group testing recovered every true finding and replayed to 0.99. Period
/// p plays seed `seed + p − 1`, so every period's seed is checked. The operator (evaluator) may
/// still run one; the caller decides who is.
pub fn refuse_held_out(seed: u64, total_periods: u32) -> Result<(), AuditError> {
    let last = seed.saturating_add(u64::from(total_periods.max(1)) - 1);
    match (seed..=last).find(|s| crate::model::is_held_out(*s)) {
        None => Ok(()),
        Some(s) => Err(AuditError::HeldOut(format!(
            "campaign seeds {seed}..={last} include held-out seed {s} (held out: 100-104 and 100000-109999); a campaign reports grades per submission, so held-out campaigns need the operator credential: use a training seed (e.g. 42), or evaluate on held-out seeds with sealed /reset episodes or a leaderboard run"
        ))),
    }
}

/// A reply part as JSON (a serialization failure is an internal error).
pub fn to_json<T: Serialize>(v: &T) -> Result<Value, AuditError> {
    serde_json::to_value(v).map_err(|_| AuditError::Internal)
}

/// The reply objects, in the routes' field order.
impl Campaign {
    /// `POST /campaign/start`'s reply for a campaign just made.
    pub fn start_reply(&self) -> Result<Value, AuditError> {
        Ok(
            json!({"status": "started", "campaign_id": self.id, "observation": to_json(&self.observation(None))?}),
        )
    }

    /// `GET /campaign/state`.
    pub fn state_reply(&self) -> Result<Value, AuditError> {
        Ok(json!({
            "campaign_id": self.id,
            "score": self.score(),
            "score_breakdown": self.period_scores.last().map(|p| &p.score),
            "current_period_score": self.score_period().score,
            "state": to_json(&self.state())?,
            "observation": to_json(&self.observation(None))?,
        }))
    }

    /// `POST /campaign/task/start`: starts `role`'s task of the current period.
    pub fn task_start_reply(&mut self, role: Role) -> Result<Value, AuditError> {
        let ep = self.start_task(role)?;
        let obs = ep.observation(0.0, ep.reset_feedback(), false);
        let p = self.current_period;
        let prior: Vec<_> = self
            .history
            .iter()
            .filter(|h| h.period < p)
            .cloned()
            .collect();
        Ok(json!({
            "status": "started", "campaign_id": self.id, "role": role,
            "observation": to_json(&self.observation(Some(obs)))?,
            "world_state": to_json(&self.world)?,
            "findings_history": to_json(&prior)?,
            "active_instructions": to_json(&self.active_instructions())?,
            "pending_regulatory_shocks": to_json(&self.world.mid_period_rule_drops)?,
        }))
    }

    /// `POST /campaign/task/submit` (`status` `submitted`) or `/campaign/action` (`accepted`).
    pub fn submit_reply(
        &mut self,
        role: Role,
        action: AuditAction,
        status: &str,
    ) -> Result<Value, AuditError> {
        let r: SubmitResult = self.submit(role, action)?;
        Ok(json!({
            "status": status, "campaign_id": self.id, "role": role,
            "observation": to_json(&r.observation)?, "reward": r.reward, "done": r.done,
            "deferred": r.deferred, "shock": r.shock, "grader": r.grader, "warnings": r.warnings,
        }))
    }

    /// `POST /campaign/period/advance`.
    pub fn advance_reply(&mut self) -> Result<Value, AuditError> {
        let status = self.advance()?;
        Ok(json!({
            "status": status, "campaign_id": self.id, "observation": to_json(&self.observation(None))?,
            "period_score": self.period_scores.last().map(|p| &p.score), "score": self.score(),
        }))
    }

    /// `POST /overseer/review`.
    pub fn review_reply(&mut self, action: OverseerAction) -> Result<Value, AuditError> {
        let r = self.review(action)?;
        Ok(json!({"status": "reviewed", "campaign_id": self.id, "result": to_json(&r)?}))
    }

    /// `GET /overseer/report`.
    pub fn report_reply(&self) -> Result<Value, AuditError> {
        let mut per_role = BTreeMap::new();
        for (r, e) in &self.episodes {
            if let Some(gr) = &e.last_grade {
                per_role.insert(
                    r.as_str().to_string(),
                    json!({"precision": gr.precision, "recall": gr.recall, "score": gr.score}),
                );
            }
        }
        let period_scores: Vec<Value> = self
            .period_scores
            .iter()
            .map(|p| json!({"period": p.period, "score": p.score.score, "overseer_quality": p.inputs.overseer_quality}))
            .collect();
        Ok(json!({
            "campaign_id": self.id, "current_period": self.current_period, "budget_remaining": self.budget_remaining,
            "findings_seen": self.history.len(), "regulatory_shocks_applied": to_json(&self.shocks_applied)?,
            "reviews": to_json(&self.reviews)?, "per_role_current_period": per_role,
            "period_scores": period_scores,
        }))
    }

    /// `POST /self-improve`.
    pub fn self_improve_reply(&mut self, train: &[u64], held: &[u64]) -> Result<Value, AuditError> {
        let rec = self.self_improve(train, held)?;
        Ok(json!({"status": "completed", "campaign_id": self.id, "summary": to_json(&rec)?}))
    }

    /// `GET /self-improve/history`.
    pub fn history_reply(&self) -> Result<Value, AuditError> {
        Ok(json!({"campaign_id": self.id, "history": to_json(&self.improve_history)?}))
    }
}
