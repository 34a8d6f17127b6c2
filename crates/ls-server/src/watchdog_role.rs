//! The watchdog as a playable role (Dec-POMDP analyst/watchdog separation): a second agent reads
//! the filtered watchdog stream of an analyst's episode and issues verdicts; once the analyst has
//! submitted, the joint analyst + watchdog score is computed from those verdicts. The analyst's
//! session is named by the `session` query parameter; these routes never step it. The scripted
//! watchdog keeps judging every episode (`info.watchdog`), so it stays the default opponent.
//!
//! Over WebSocket the watchdog authenticates with a watchdog credential its analyst's session
//! issues (`POST /watchdog/credential` here, `watchdog_credential` on `/ws`): see
//! [`crate::watchdog_ws`].

use crate::body::JsonBody;
use crate::error::ApiError;
use crate::route_table::{ApiRoutes, RouteDoc};
use crate::sessions::lock_env;
use crate::Shared;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::Json;
use ls_env::watchdog::VerdictKind;
use ls_env::watchdog_stream;
use schemars::{json_schema, Schema, SchemaGenerator};
use serde_json::{json, Value};

#[derive(serde::Deserialize)]
struct Watched {
    session: Option<String>,
}

fn session_of(q: Result<Query<Watched>, QueryRejection>) -> Result<String, ApiError> {
    let Query(q) =
        q.map_err(|e| ApiError::Validation(format!("watchdog query: {}", e.body_text())))?;
    match q.session.map(|s| s.trim().to_owned()) {
        Some(s) if !s.is_empty() && s.len() <= 128 => Ok(s),
        _ => Err(ApiError::Validation(
            "query parameter `session` (the analyst's session id, 1-128 characters) is required"
                .into(),
        )),
    }
}

/// Run `f` on the analyst's current episode.
fn with_episode<T>(
    s: &Shared,
    sid: &str,
    f: impl FnOnce(&mut ls_env::episode::Episode) -> Result<T, ApiError>,
) -> Result<T, ApiError> {
    let env = s
        .sessions
        .get(sid)
        .ok_or_else(|| ApiError::UnknownSession(sid.to_owned()))?;
    let mut guard = lock_env(&env);
    let ep = guard.episode_mut().ok_or(ApiError::NotReset)?;
    f(ep)
}

async fn get_observation(
    State(s): State<Shared>,
    q: Result<Query<Watched>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let sid = session_of(q)?;
    let obs = with_episode(&s, &sid, |ep| Ok(watchdog_stream::observation(ep)))?;
    Ok(Json(serde_json::to_value(obs).unwrap_or(Value::Null)))
}

async fn post_verdict(
    State(s): State<Shared>,
    q: Result<Query<Watched>, QueryRejection>,
    JsonBody(body): JsonBody,
) -> Result<Json<Value>, ApiError> {
    let sid = session_of(q)?;
    let verdict = body
        .get("verdict")
        .and_then(Value::as_str)
        .and_then(VerdictKind::parse)
        .ok_or_else(|| {
            ApiError::Validation("verdict must be one of veto, escalate, warn, approve".into())
        })?;
    let reason = match body.get("reason") {
        None | Some(Value::Null) => "",
        Some(Value::String(r)) => r.as_str(),
        Some(_) => return Err(ApiError::Validation("reason must be a string".into())),
    };
    let count = with_episode(&s, &sid, |ep| {
        watchdog_stream::record_verdict(ep, verdict, reason).map_err(ApiError::Validation)
    })?;
    Ok(Json(json!({"recorded": true, "verdict_count": count})))
}

async fn get_joint(
    State(s): State<Shared>,
    q: Result<Query<Watched>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let sid = session_of(q)?;
    let joint = with_episode(&s, &sid, |ep| {
        watchdog_stream::external_joint(ep).ok_or_else(|| {
            ApiError::BadRequest(
                "the analyst has not submitted yet; the joint score exists once the episode is graded".into(),
            )
        })
    })?;
    Ok(Json(serde_json::to_value(joint).unwrap_or(Value::Null)))
}

async fn post_credential(
    State(s): State<Shared>,
    header: crate::sessions::SessionHeader,
) -> Result<Json<Value>, ApiError> {
    let (sid, named) = header.session_id(None)?;
    if !named {
        return Err(ApiError::Validation(
            "X-Session-Id is required: the watchdog credential is issued for the analyst's named session".into(),
        ));
    }
    let env = s
        .sessions
        .get(&sid)
        .ok_or_else(|| ApiError::UnknownSession(sid.clone()))?;
    Ok(Json(crate::watchdog_ws::credential_reply(
        &s.watchdog.issue(&env),
    )))
}

fn credential_reply_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "object", "required": ["watchdog_credential", "socket"], "properties": {
        "watchdog_credential": {"type": "string", "description": "the token a watchdog attaches with on the socket"},
        "socket": {"type": "string", "const": "/watchdog/ws"}}})
}

fn verdict_body(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "object", "required": ["verdict"], "properties": {
        "verdict": {"type": "string", "enum": ["veto", "escalate", "warn", "approve"]},
        "reason": {"type": "string", "maxLength": 500}}})
}

fn observation_reply(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "object", "description": "case_id, steps [{step, analyst_action, payload (no confidence), result_summary}], visible_risk_signals, budget_remaining, intervention_actions, pending_event_count, pressure_events_seen, episode_done, verdicts"})
}

fn joint_reply(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "object", "description": "analyst_score, analyst_decision, risk_observed, watchdog_veto_count, watchdog_escalation_count, watchdog_warning_count, watchdog_approval_count, watchdog_bonus, watchdog_penalty, joint_score"})
}

pub fn routes() -> ApiRoutes<Shared> {
    let r = |summary| RouteDoc::new("episode", summary);
    let session = || json!({"type": "string", "minLength": 1, "maxLength": 128});
    ApiRoutes::new()
        .get(
            "/watchdog/observation",
            r("The filtered watchdog stream of an analyst's episode")
                .query("session", session(), true, "The analyst's session id")
                .reply_with(observation_reply, "What the watchdog sees"),
            get_observation,
        )
        .post(
            "/watchdog/verdict",
            r("Issue a watchdog verdict on the analyst's episode")
                .query("session", session(), true, "The analyst's session id")
                .body_with(verdict_body, "The verdict"),
            post_verdict,
        )
        .get(
            "/watchdog/joint",
            r("Joint analyst + watchdog score once the analyst has submitted")
                .query("session", session(), true, "The analyst's session id")
                .reply_with(joint_reply, "The joint score"),
            get_joint,
        )
        .post(
            "/watchdog/credential",
            r("Issue a watchdog credential for the analyst's session")
                .describe("The analyst's named session (`X-Session-Id`) issues a random token; a second agent attaches with it on `GET /watchdog/ws`. Issuing again revokes the previous token; the token dies with the session.")
                .reply_with(credential_reply_schema, "The credential and the socket to use"),
            post_credential,
        )
        .get(
            crate::watchdog_ws::WATCHDOG_SOCKET,
            r("The watchdog role over WebSocket")
                .describe("Upgrade to a WebSocket. `{\"type\":\"attach\",\"data\":{\"credential\":...}}` first (the credential from `POST /watchdog/credential` or the analyst's `watchdog_credential` message on `/ws`; three wrong ones close the socket), then `observe`, `verdict` (`{verdict, reason}`), `joint`, `close`. Replies `attached`, `watchdog_observation`, `verdict`, `joint`, `error`.")
                .status(101, "application/json", None, "Switching protocols to a watchdog session"),
            crate::watchdog_ws::watchdog_socket,
        )
}
