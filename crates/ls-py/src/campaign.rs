//! A Financial Audit multi-period campaign in process, as the audit server's campaign routes
//! serve it (`/campaign/start`, `/campaign/state`, `/campaign/task/start`,
//! `/campaign/task/submit`, `/campaign/action`, `/campaign/period/advance`, `/overseer/review`,
//! `/overseer/report`, `/self-improve`, `/self-improve/history`): the same bodies and reply
//! objects (both declared once in `audit_env::campaign_api`, serialized by `serde_json` as the
//! server does), the same refusals.
//!
//! One [`CampaignSlot`] holds one campaign. Departures: a body's `campaign_id` is optional
//! (the slot's campaign is meant; a different id is refused as an unknown campaign, 404, as the
//! server refuses it), a start body may carry `campaign_id` to choose the id (the server ignores
//! that field and draws one), and nothing expires.

use crate::errors::Refusal;
use crate::request::audit_typed;
use audit_env::campaign::Campaign;
use audit_env::campaign_api::{IdBody, ImproveBody, ReviewBody, RoleBody, StartBody, SubmitBody};
use audit_env::error::AuditError;
use serde_json::Value;

/// The periods a start body without `total_periods` gets (the server's
/// `CAMPAIGN_TOTAL_PERIODS` default).
pub const DEFAULT_TOTAL_PERIODS: u32 = 5;

/// The campaign a body names: optional in process (the slot holds one).
type Id = Option<String>;

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
        let req: StartBody = audit_typed(body)?;
        let c = Campaign::new(
            req.campaign_id
                .unwrap_or_else(|| audit_env::util::random_id("cmp")),
            req.seed.unwrap_or(42),
            req.total_periods.unwrap_or(DEFAULT_TOTAL_PERIODS),
            self.max_findings_per_step,
        )?;
        let reply = text(&c.start_reply()?);
        self.campaign = Some(c);
        self.poisoned = false;
        reply
    }

    /// `GET /campaign/state/{campaign_id}`.
    pub fn state(&mut self) -> Result<String, Refusal> {
        text(&self.get(None)?.state_reply()?)
    }

    /// `POST /campaign/task/start`.
    pub fn task_start(&mut self, body: &str) -> Result<String, Refusal> {
        let req: RoleBody<Id> = audit_typed(body)?;
        text(
            &self
                .get(req.campaign_id.as_deref())?
                .task_start_reply(req.role)?,
        )
    }

    /// `POST /campaign/task/submit` (`status: submitted`) or its alias `POST /campaign/action`
    /// (`status: accepted`).
    pub fn submit(&mut self, body: &str, status: &str) -> Result<String, Refusal> {
        let (id, role, action) = audit_typed::<SubmitBody<Id>>(body)?.into_parts();
        text(
            &self
                .get(id.as_deref())?
                .submit_reply(role, action, status)?,
        )
    }

    /// `POST /campaign/period/advance`.
    pub fn advance(&mut self, body: &str) -> Result<String, Refusal> {
        let req: IdBody<Id> = audit_typed(body)?;
        text(&self.get(req.campaign_id.as_deref())?.advance_reply()?)
    }

    /// `POST /overseer/review`.
    pub fn review(&mut self, body: &str) -> Result<String, Refusal> {
        let (id, action) = audit_typed::<ReviewBody<Id>>(body)?.into_parts();
        text(&self.get(id.as_deref())?.review_reply(action)?)
    }

    /// `GET /overseer/report`.
    pub fn report(&mut self) -> Result<String, Refusal> {
        text(&self.get(None)?.report_reply()?)
    }

    /// `POST /self-improve` (by default training seeds 42-51, held-out 100-104).
    pub fn self_improve(&mut self, body: &str) -> Result<String, Refusal> {
        let (id, train, held) = audit_typed::<ImproveBody<Id>>(body)?.into_parts();
        text(&self.get(id.as_deref())?.self_improve_reply(&train, &held)?)
    }

    /// `GET /self-improve/history`.
    pub fn improve_history(&mut self) -> Result<String, Refusal> {
        text(&self.get(None)?.history_reply()?)
    }

    /// What specialist `role` sees of its episode this period, for a policy over candidates:
    /// its candidate findings (submit-final first, as the audit environment lists them; none
    /// when it has no open episode) and its audit features, from the episode's current
    /// observation.
    pub fn role_view(
        &mut self,
        role: &str,
    ) -> Result<(Vec<crate::audit::Candidate>, [f32; crate::audit::FEATURES]), Refusal> {
        let role = audit_env::campaign::Role::parse(role)
            .filter(|r| r.task().is_some())
            .ok_or_else(|| {
                AuditError::invalid("role", format!("not a specialist: '{}'", quote(role)))
            })?;
        let c = self.get(None)?;
        let Some(ep) = c.episodes.get(&role) else {
            return Ok((Vec::new(), [0.0; crate::audit::FEATURES]));
        };
        let obs = ep.observation(0.0, String::new(), ep.done);
        let mut list = crate::audit::candidates_of(&obs, ep.done);
        list.truncate(crate::audit::MAX_CANDIDATES);
        Ok((list, crate::audit::features_of(&obs, 0.0, ep.done)))
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
