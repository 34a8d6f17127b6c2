//! The audit environment's route table: every route with its documentation (tag, summary,
//! parameters, typed request and reply schemas). `/openapi.json` and `/docs` are built from it.

use super::*;
use crate::route_table::{ApiRoutes, RouteDoc};

/// Every audit HTTP route, documented (the state is provided by [`super::routes`]).
pub(super) fn table() -> ApiRoutes<AppState> {
    ApiRoutes::new()
        .get(
            "/",
            RouteDoc::new(
                "service",
                "Service banner: tasks, endpoints and a quickstart",
            ),
            root,
        )
        .get(
            "/health",
            RouteDoc::new("service", "Health check").reply_with(
                docs::health,
                "`status: healthy` with live sessions and campaigns",
            ),
            health,
        )
        .get(
            "/tasks",
            RouteDoc::new("service", "The four audit tasks and the action schema"),
            tasks,
        )
        .get(
            "/metrics",
            RouteDoc::new("service", "Request, episode and campaign counters")
                .reply_with(docs::metrics, "Counters since start"),
            metrics,
        )
        .merge(episode_routes())
        .merge(campaign_routes())
        .merge(misc_routes())
}

/// Single-task episodes and their sessions.
fn episode_routes() -> ApiRoutes<AppState> {
    let session_q = |d: RouteDoc| {
        d.session().query(
            "session_id",
            json!({"type": "string"}),
            false,
            "The session, when no `X-Session-Id` header is sent",
        )
    };
    ApiRoutes::new()
        .post(
            "/reset",
            RouteDoc::new("episode", "Start an episode of a task")
                .describe("The session is `X-Session-Id`, else `session_id` in the body, else the default session (created when named). `fraud_level` is an operator override.")
                .session()
                .body::<AuditResetRequest>("Task and seed")
                .reply::<AuditStepEnvelope>("The first observation"),
            reset,
        )
        .post(
            "/step",
            RouteDoc::new("episode", "Submit findings")
                .describe("`findings` and `submit_final`, or the OpenEnv `{action: {...}}` form; the final submit grades the episode.")
                .session()
                .body::<AuditStepRequest>("Findings of this step")
                .reply::<AuditStepEnvelope>("Observation, reward, done and (when final) the grade"),
            step,
        )
        .get("/state", session_q(RouteDoc::new("episode", "Episode state")).reply::<audit_env::episode::AuditState>("The session's state"), state_route)
        .get("/grader", session_q(RouteDoc::new("episode", "Grade of the session's last completed episode")).reply_with(docs::grader, "The grade, `status: no_completed_episode`, or `status: sealed` (a held-out episode's grade, read with the operator credential)"), grader)
        .post("/session", RouteDoc::new("session", "Create a named session").reply_with(docs::new_session, "The new session's id and idle TTL"), new_session)
        .delete("/session", session_q(RouteDoc::new("session", "Close a session now")).reply_with(docs::closed, "The session was closed"), close_session)
        .get("/adaptive-difficulty", session_q(RouteDoc::new("adversary", "The session's adaptive difficulty")).reply::<audit_env::episode::AdaptiveDifficulty>("Recent scores and the next difficulty"), adaptive)
        .get("/adversarial/state", session_q(RouteDoc::new("adversary", "The session's fraud adversary (arms race)")).reply::<audit_env::adversarial::ArmsRace>("The adversary's state"), adversarial_state)
}

/// Campaigns, the overseer and self-improvement (operator routes).
fn campaign_routes() -> ApiRoutes<AppState> {
    let campaign_q = |d: RouteDoc| {
        d.query(
            "campaign_id",
            json!({"type": "string"}),
            true,
            "The campaign",
        )
    };
    let submit = |summary| {
        RouteDoc::new("campaign", summary)
            .describe("`findings` and `submit_final` at top level, or inside `action`. A final submit grades the role's task for the period.")
            .body::<SubmitReq>("The role's findings")
            .reply_with(docs::submitted, "The campaign observation, reward and grade")
    };
    ApiRoutes::new()
        .post(
            "/campaign/start",
            RouteDoc::new("campaign", "Start a multi-period campaign")
                .body::<CampaignStartReq>("Seed and number of periods")
                .reply_with(docs::started, "The campaign id and first observation"),
            campaign_start,
        )
        .get(
            "/campaign/state",
            campaign_q(RouteDoc::new("campaign", "A campaign's state and score"))
                .reply_with(docs::campaign_state, "State, observation and scores"),
            campaign_state_q,
        )
        .get(
            "/campaign/state/{campaign_id}",
            RouteDoc::new("campaign", "A campaign's state and score (id in the path)")
                .path_param(
                    "campaign_id",
                    json!({"type": "string"}),
                    "The campaign",
                    json!("cmp-x"),
                )
                .reply_with(docs::campaign_state, "State, observation and scores"),
            campaign_state_p,
        )
        .post(
            "/campaign/task/start",
            RouteDoc::new("campaign", "Start a role's task in the current period")
                .body::<RoleReq>("Campaign and role")
                .reply_with(
                    docs::task_started,
                    "The role's observation, world state and instructions",
                ),
            campaign_task_start,
        )
        .post(
            "/campaign/task/submit",
            submit("Submit a role's findings"),
            campaign_task_submit,
        )
        .post(
            "/campaign/action",
            submit("Submit a role's findings (alias of /campaign/task/submit)"),
            campaign_action,
        )
        .post(
            "/campaign/period/advance",
            RouteDoc::new("campaign", "Close the period and advance")
                .body::<CampaignIdReq>("The campaign")
                .reply_with(
                    docs::advanced,
                    "The period's score and the next observation",
                ),
            campaign_advance,
        )
        .post(
            "/campaign/period",
            RouteDoc::new(
                "campaign",
                "Close the period and advance (alias of /campaign/period/advance)",
            )
            .body::<CampaignIdReq>("The campaign")
            .reply_with(
                docs::advanced,
                "The period's score and the next observation",
            ),
            campaign_advance,
        )
        .post(
            "/overseer/review",
            RouteDoc::new("overseer", "The overseer's review of the period's findings")
                .body::<ReviewReq>(
                    "Decisions and conflict resolutions, at top level or inside `action`",
                )
                .reply_with(docs::reviewed, "The review's result"),
            overseer_review,
        )
        .get(
            "/overseer/report",
            campaign_q(RouteDoc::new(
                "overseer",
                "The overseer's report of a campaign",
            ))
            .reply_with(docs::overseer_report, "Reviews, shocks and period scores"),
            overseer_report,
        )
        .post(
            "/self-improve",
            RouteDoc::new("self-improvement", "Run one self-improvement iteration")
                .body::<ImproveReq>(
                    "Campaign and seed sets (by default training seeds 42-51, held-out 100-104)",
                )
                .reply_with(docs::improved, "The iteration's record"),
            self_improve,
        )
        .get(
            "/self-improve/history",
            campaign_q(RouteDoc::new(
                "self-improvement",
                "Self-improvement iterations of a campaign",
            ))
            .reply_with(docs::improve_history, "Every iteration's record"),
            self_improve_history,
        )
}

/// Leaderboard and the baseline.
fn misc_routes() -> ApiRoutes<AppState> {
    ApiRoutes::new()
        .get(
            "/leaderboard",
            RouteDoc::new("reports", "Best score per model and task")
                .query("task_id", json!({"type": "string"}), false, "Only this task")
                .query("limit", json!({"type": "integer", "minimum": 0, "default": 20}), false, "Most entries listed")
                .reply_with(docs::leaderboard, "The entries and their total"),
            leaderboard_get,
        )
        .post(
            "/leaderboard/run",
            RouteDoc::new("reports", "Start a leaderboard run: the server draws its held-out seeds")
                .describe("Draws five held-out seeds for one task from the OS random source and binds them to the session. Play each once (sealed episodes), then `POST /leaderboard`. At most six runs start per minute on the server.")
                .session()
                .body::<RunReq>("The task and session")
                .reply_with(docs::run_started, "The run id and its seeds"),
            leaderboard_run,
        )
        .post(
            "/leaderboard",
            RouteDoc::new("reports", "Submit the session's whole leaderboard run under a model name")
                .describe("The score is the mean of the server's grades of the run's first completed episode on each drawn seed; a run is scored once, and nothing else (no single episode, no seed the client chose) is accepted. `model` and `session_id` may also come as query parameters.")
                .session()
                .query("model", json!({"type": "string"}), false, "Model name, when not in the body")
                .query("session_id", json!({"type": "string"}), false, "The session, when not in the header or body")
                .body::<LeaderReq>("Model name and session")
                .reply_with(docs::leader_submitted, "The entry and its rank"),
            leaderboard_post,
        )
        .post("/baseline", RouteDoc::new("reports", "Run the built-in baseline agent on seeds").body::<BaselineReq>("Seeds (default [42])").reply_with(docs::baseline, "The baseline's scores"), baseline_route)
}

/// Reply schemas of the handlers that assemble their reply as JSON (the typed parts by `$ref`).
mod docs {
    use super::super::LeaderEntry;
    use audit_env::campaign::{CampaignObservation, CampaignState, OverseerReview};
    use audit_env::grading::{CampaignScore, GradeResult};
    use audit_env::improve::IterationRecord;
    use schemars::{json_schema, Schema, SchemaGenerator};

    pub fn health(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "object", "required": ["status"], "properties": {
            "status": {"const": "healthy"}, "environment": {"type": "string"}, "version": {"type": "string"},
            "tasks_available": {"type": "integer"}, "active_sessions": {"type": "integer"},
            "active_campaigns": {"type": "integer"}, "log_level": {"type": "string"}}})
    }
    pub fn metrics(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "object", "properties": {
            "uptime_seconds": {"type": "integer"}, "total_resets": {"type": "integer"}, "total_steps": {"type": "integer"},
            "total_episodes_completed": {"type": "integer"}, "task_usage": {"type": "object", "additionalProperties": {"type": "integer"}},
            "active_sessions": {"type": "integer"}, "active_campaigns": {"type": "integer"}, "campaigns_started": {"type": "integer"},
            "requests_total": {"type": "integer"}, "mean_latency_ms": {"type": "number"}}})
    }
    pub fn grader(g: &mut SchemaGenerator) -> Schema {
        let grade = g.subschema_for::<GradeResult>();
        json_schema!({"anyOf": [
            {"allOf": [grade, {"type": "object", "required": ["status", "task_id", "episode_id"], "properties": {
                "status": {"const": "completed"}, "task_id": {"type": "string"}, "episode_id": {"type": "string"}}}]},
            {"type": "object", "required": ["status"], "properties": {"status": {"const": "no_completed_episode"}, "message": {"type": "string"}}},
            {"type": "object", "required": ["status", "task_id", "episode_id"], "properties": {"status": {"const": "sealed"},
                "task_id": {"type": "string"}, "episode_id": {"type": "string"}, "message": {"type": "string"}}}]})
    }
    pub fn new_session(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "object", "required": ["session_id", "ttl_seconds"], "properties": {
            "session_id": {"type": "string"}, "ttl_seconds": {"type": "integer"}, "message": {"type": "string"}}})
    }
    pub fn closed(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "object", "required": ["session_id", "status"], "properties": {
            "session_id": {"type": "string"}, "status": {"const": "closed"}}})
    }
    pub fn started(g: &mut SchemaGenerator) -> Schema {
        let obs = g.subschema_for::<CampaignObservation>();
        json_schema!({"type": "object", "required": ["status", "campaign_id", "observation"], "properties": {
            "status": {"const": "started"}, "campaign_id": {"type": "string"}, "observation": obs}})
    }
    pub fn campaign_state(g: &mut SchemaGenerator) -> Schema {
        let (obs, state, score) = (
            g.subschema_for::<CampaignObservation>(),
            g.subschema_for::<CampaignState>(),
            g.subschema_for::<CampaignScore>(),
        );
        json_schema!({"type": "object", "required": ["campaign_id", "score", "state", "observation"], "properties": {
            "campaign_id": {"type": "string"}, "score": {"type": "number"},
            "score_breakdown": {"anyOf": [score, {"type": "null"}], "description": "the last closed period's score"},
            "current_period_score": score, "state": state, "observation": obs}})
    }
    pub fn task_started(g: &mut SchemaGenerator) -> Schema {
        let obs = g.subschema_for::<CampaignObservation>();
        json_schema!({"type": "object", "required": ["status", "campaign_id", "role", "observation"], "properties": {
            "status": {"const": "started"}, "campaign_id": {"type": "string"}, "role": {"type": "string"}, "observation": obs,
            "world_state": {"type": "object"}, "findings_history": {"type": "array"}, "active_instructions": {"type": "array"},
            "pending_regulatory_shocks": {"type": "array"}}})
    }
    pub fn submitted(g: &mut SchemaGenerator) -> Schema {
        let (obs, grade) = (
            g.subschema_for::<CampaignObservation>(),
            g.subschema_for::<GradeResult>(),
        );
        json_schema!({"type": "object", "required": ["status", "campaign_id", "role", "observation", "reward", "done"], "properties": {
            "status": {"enum": ["submitted", "accepted"]}, "campaign_id": {"type": "string"}, "role": {"type": "string"},
            "observation": obs, "reward": {"type": "number"}, "done": {"type": "boolean"}, "deferred": {"type": "boolean"},
            "shock": {"type": ["object", "null"]}, "grader": {"anyOf": [grade, {"type": "null"}]},
            "warnings": {"type": "array", "items": {"type": "string"}}}})
    }
    pub fn advanced(g: &mut SchemaGenerator) -> Schema {
        let (obs, score) = (
            g.subschema_for::<CampaignObservation>(),
            g.subschema_for::<CampaignScore>(),
        );
        json_schema!({"type": "object", "required": ["status", "campaign_id", "observation", "score"], "properties": {
            "status": {"type": "string"}, "campaign_id": {"type": "string"}, "observation": obs,
            "period_score": {"anyOf": [score, {"type": "null"}]}, "score": {"type": "number"}}})
    }
    pub fn reviewed(g: &mut SchemaGenerator) -> Schema {
        let review = g.subschema_for::<OverseerReview>();
        json_schema!({"type": "object", "required": ["status", "campaign_id", "result"], "properties": {
            "status": {"const": "reviewed"}, "campaign_id": {"type": "string"}, "result": review}})
    }
    pub fn overseer_report(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "object", "required": ["campaign_id", "current_period"], "properties": {
            "campaign_id": {"type": "string"}, "current_period": {"type": "integer"}, "budget_remaining": {"type": "number"},
            "findings_seen": {"type": "integer"}, "regulatory_shocks_applied": {"type": "array"}, "reviews": {"type": "object"},
            "per_role_current_period": {"type": "object"}, "period_scores": {"type": "array"}}})
    }
    pub fn improved(g: &mut SchemaGenerator) -> Schema {
        let rec = g.subschema_for::<IterationRecord>();
        json_schema!({"type": "object", "required": ["status", "campaign_id", "summary"], "properties": {
            "status": {"const": "completed"}, "campaign_id": {"type": "string"}, "summary": rec}})
    }
    pub fn improve_history(g: &mut SchemaGenerator) -> Schema {
        let rec = g.subschema_for::<IterationRecord>();
        json_schema!({"type": "object", "required": ["campaign_id", "history"], "properties": {
            "campaign_id": {"type": "string"}, "history": {"type": "array", "items": rec}}})
    }
    pub fn leaderboard(g: &mut SchemaGenerator) -> Schema {
        let entry = g.subschema_for::<LeaderEntry>();
        json_schema!({"type": "object", "required": ["leaderboard", "total_entries"], "properties": {
            "leaderboard": {"type": "array", "items": entry}, "total_entries": {"type": "integer"}}})
    }
    pub fn leader_submitted(g: &mut SchemaGenerator) -> Schema {
        let entry = g.subschema_for::<LeaderEntry>();
        json_schema!({"type": "object", "required": ["status", "rank", "entry"], "properties": {
            "status": {"const": "submitted"}, "rank": {"type": "integer"}, "entry": entry, "note": {"type": "string"}}})
    }
    pub fn run_started(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "object", "required": ["status", "run_id", "task_id", "seeds", "session_id"], "properties": {
            "status": {"const": "started"}, "run_id": {"type": "string"}, "task_id": {"type": "string"},
            "seeds": {"type": "array", "items": {"type": "integer"}}, "session_id": {"type": "string"}, "message": {"type": "string"}}})
    }
    pub fn baseline(g: &mut SchemaGenerator) -> Schema {
        let report = g.subschema_for::<audit_env::baseline::BaselineReport>();
        json_schema!({"type": "object", "required": ["status", "model", "scores"], "properties": {
            "status": {"const": "completed"}, "model": {"type": "string"}, "scores": report}})
    }
}
