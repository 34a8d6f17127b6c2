//! The watchdog as a playable role (Dec-POMDP analyst/watchdog separation): a second agent reads
//! the filtered watchdog stream of an analyst's episode and issues verdicts; once the analyst has
//! submitted, the joint analyst + watchdog score is computed from those verdicts. These routes
//! never step the analyst's episode. The scripted watchdog keeps judging every episode
//! (`info.watchdog`), so it stays the default opponent.
//!
//! Roles are capabilities the harness issues: `POST /watchdog/pair` creates the analyst's session
//! and answers its id (for the analyst), a watchdog credential (for the watchdog) and a harness
//! token (for the harness, which may issue the credential again with it). With the operator key,
//! `POST /watchdog/credential` issues one for any named session (and a socket opened with the key
//! may ask for one with `watchdog_credential` on `/ws`). The analyst's session id alone issues
//! nothing. The watchdog sends its credential over HTTP in the `X-Watchdog-Credential` header
//! (never in the URL, so it stays out of access logs and metric labels), over WebSocket in the
//! `attach` message ([`crate::watchdog_ws`]). The analyst's session id, the admin key, a guess,
//! a revoked credential or one whose analyst has gone are refused with 401/403 and a code naming
//! the problem. The analyst may read `GET /watchdog/joint` with its own `X-Session-Id`: it
//! answers only after the submission, when nothing can change any more.

use crate::body::JsonBody;
use crate::error::ApiError;
use crate::protocol::SharedBackend;
use crate::route_table::{ApiRoutes, RouteDoc};
use crate::security::{client_key, ClientAddr, OperatorAccess};
use crate::sessions::SessionHeader;
use crate::watchdog_credential::{token_shaped, CredentialError, HarnessError};
use crate::Shared;
use axum::extract::{FromRequestParts, RawQuery, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use ls_env::watchdog::VerdictKind;
use ls_env::{watchdog_stream, Environment};
use schemars::{json_schema, Schema, SchemaGenerator};
use serde_json::{json, Map, Value};

/// The header the HTTP watchdog routes read the watchdog credential from.
pub const CREDENTIAL_HEADER: &str = "x-watchdog-credential";

/// The header a harness sends its harness token in.
pub const HARNESS_HEADER: &str = "x-harness-token";

/// The two headers the watchdog routes read (and only those: no copy of the whole header map):
/// `X-Watchdog-Credential` and `X-Harness-Token`.
struct CredentialHeader {
    credential: Option<HeaderValue>,
    harness: Option<HeaderValue>,
}

impl<S: Send + Sync> FromRequestParts<S> for CredentialHeader {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Ok(Self {
            credential: parts.headers.get(CREDENTIAL_HEADER).cloned(),
            harness: parts.headers.get(HARNESS_HEADER).cloned(),
        })
    }
}

/// A refused watchdog request: a credential problem (401/403 with its own code) or any other
/// API error.
enum Refused {
    Credential(StatusCode, &'static str, String),
    Api(ApiError),
}

impl From<ApiError> for Refused {
    fn from(e: ApiError) -> Self {
        Self::Api(e)
    }
}

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        let (status, code, message) = match self {
            Self::Api(e) => return e.into_response(),
            Self::Credential(status, code, message) => (status, code, message),
        };
        // The usual error body (bounded message), with the credential problem as its code.
        let mut body = ApiError::Forbidden(message).body();
        body["error"]["code"] = json!(code);
        let mut res = (status, Json(body)).into_response();
        if status == StatusCode::UNAUTHORIZED {
            res.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("X-Watchdog-Credential"),
            );
        }
        res
    }
}

const ISSUED_BY: &str = "POST /watchdog/pair issues it to the harness";

/// Whether `s` has the shape of an issued credential: `wdc-` and 32 lowercase hex digits.
fn credential_shaped(s: &str) -> bool {
    token_shaped(s, "wdc")
}

impl CredentialHeader {
    /// The analyst's environment the credential names. A credential is never compared with
    /// session ids or the admin key: those simply are not credentials.
    fn resolve(&self, s: &Shared) -> Result<SharedBackend<Environment>, Refused> {
        let refuse =
            |code, message: String| Refused::Credential(StatusCode::FORBIDDEN, code, message);
        let Some(value) = &self.credential else {
            return Err(Refused::Credential(
                StatusCode::UNAUTHORIZED,
                "watchdog_credential_required",
                format!("send the watchdog credential as X-Watchdog-Credential ({ISSUED_BY}); the analyst's session id (X-Session-Id, or the former `session` query parameter) is not one"),
            ));
        };
        let token = value.to_str().unwrap_or("").trim();
        if !credential_shaped(token) {
            return Err(refuse(
                "not_a_watchdog_credential",
                format!("X-Watchdog-Credential is not a watchdog credential (`wdc-` and 32 hex digits; {ISSUED_BY}); an analyst's session id or the admin key is not one"),
            ));
        }
        s.watchdog.resolve(token).map_err(|e| match e {
            CredentialError::Unknown => refuse(
                "unknown_watchdog_credential",
                format!("no such watchdog credential was issued ({ISSUED_BY})"),
            ),
            CredentialError::Revoked => refuse(
                "revoked_watchdog_credential",
                "this watchdog credential was revoked: the analyst's session issued a newer one"
                    .into(),
            ),
            CredentialError::AnalystClosed => refuse(
                "analyst_session_closed",
                "the analyst's session behind this watchdog credential has closed".into(),
            ),
        })
    }
}

/// The routes take no query: the credential names the analyst's episode.
fn no_query(q: &RawQuery) -> Result<(), Refused> {
    match q.0.as_deref() {
        None | Some("") => Ok(()),
        Some(_) => Err(ApiError::Validation(
            "the watchdog routes take no query parameters (the former `session` parameter was removed): the X-Watchdog-Credential header names the analyst's episode".into(),
        )
        .into()),
    }
}

/// Run `f` on the analyst's current episode.
pub(crate) fn on_episode<T>(
    env: &SharedBackend<Environment>,
    f: impl FnOnce(&mut ls_env::episode::Episode) -> Result<T, ApiError>,
) -> Result<T, ApiError> {
    let mut guard = crate::ws::lock_backend(env);
    let ep = guard.episode_mut().ok_or(ApiError::NotReset)?;
    f(ep)
}

/// The filtered watchdog stream of the analyst's episode.
pub(crate) fn observe(env: &SharedBackend<Environment>) -> Result<Value, ApiError> {
    on_episode(env, |ep| {
        Ok(serde_json::to_value(watchdog_stream::observation(ep)).unwrap_or(Value::Null))
    })
}

/// `{verdict, reason?}` (the HTTP body, the WebSocket message's `data`).
pub(crate) fn parse_verdict(
    fields: &Map<String, Value>,
) -> Result<(VerdictKind, String), ApiError> {
    let verdict = fields
        .get("verdict")
        .and_then(Value::as_str)
        .and_then(VerdictKind::parse)
        .ok_or_else(|| {
            ApiError::Validation("verdict must be one of veto, escalate, warn, approve".into())
        })?;
    let reason = match fields.get("reason") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(r)) => r.clone(),
        Some(_) => return Err(ApiError::Validation("'reason' must be a string".into())),
    };
    Ok((verdict, reason))
}

/// Record a verdict on the analyst's episode: `{recorded, verdict_count}`.
pub(crate) fn record(
    env: &SharedBackend<Environment>,
    verdict: VerdictKind,
    reason: &str,
) -> Result<Value, ApiError> {
    let count = on_episode(env, |ep| {
        watchdog_stream::record_verdict(ep, verdict, reason).map_err(ApiError::Validation)
    })?;
    Ok(json!({"recorded": true, "verdict_count": count}))
}

/// The joint analyst + watchdog score, once the analyst has submitted; never for an episode of a
/// sealed run (the joint score carries the analyst's grade).
pub(crate) fn joint(env: &SharedBackend<Environment>) -> Result<Value, ApiError> {
    if let Some(seal) = crate::ws::lock_backend(env).seal() {
        return Err(ApiError::Forbidden(format!(
            "the episode belongs to sealed run {}: its grade, and so the joint score, is withheld until the run is scored",
            seal.run_id()
        )));
    }
    on_episode(env, |ep| {
        let joint = watchdog_stream::external_joint(ep).ok_or_else(|| {
            ApiError::BadRequest(
                "the analyst has not submitted yet; the joint score exists once the episode is graded".into(),
            )
        })?;
        Ok(serde_json::to_value(joint).unwrap_or(Value::Null))
    })
}

async fn get_observation(
    State(s): State<Shared>,
    credential: CredentialHeader,
    q: RawQuery,
) -> Result<Json<Value>, Refused> {
    let env = credential.resolve(&s)?;
    no_query(&q)?;
    Ok(Json(observe(&env)?))
}

async fn post_verdict(
    State(s): State<Shared>,
    credential: CredentialHeader,
    q: RawQuery,
    JsonBody(body): JsonBody,
) -> Result<Json<Value>, Refused> {
    let env = credential.resolve(&s)?;
    no_query(&q)?;
    let Value::Object(fields) = body else {
        return Err(ApiError::Validation("the verdict body must be a JSON object".into()).into());
    };
    let (verdict, reason) = parse_verdict(&fields)?;
    Ok(Json(record(&env, verdict, &reason)?))
}

/// The watchdog (credential) or the analyst itself (its `X-Session-Id`): the joint score only
/// exists after the submission, so the analyst learns nothing from it while it still decides.
async fn get_joint(
    State(s): State<Shared>,
    credential: CredentialHeader,
    session: SessionHeader,
    q: RawQuery,
) -> Result<Json<Value>, Refused> {
    let analyst = match credential.credential {
        None => Some(session.session_id(None)?).filter(|(_, named)| *named),
        Some(_) => None,
    };
    let env = match analyst {
        Some((sid, _)) => s.sessions.get(&sid).ok_or(ApiError::UnknownSession(sid))?,
        None => credential.resolve(&s)?,
    };
    no_query(&q)?;
    Ok(Json(joint(&env)?))
}

/// `POST /watchdog/pair`: a new analyst session for a dual-agent run, with its watchdog
/// credential and the harness token (the harness keeps both; the analyst gets the session id).
async fn post_pair(
    State(s): State<Shared>,
    client: Option<axum::Extension<ClientAddr>>,
) -> Result<Json<Value>, ApiError> {
    let sid = crate::sessions::SessionManager::<Environment>::new_id("dual");
    let env = s
        .sessions
        .get_or_create(&sid, client_key(client.as_ref()), || s.new_env())?;
    let credential = s.watchdog.issue(&env);
    let harness = s.watchdog.harness_token(&env);
    let mut reply = crate::watchdog_credential::credential_reply(&credential);
    reply["session_id"] = json!(sid);
    reply["harness_token"] = json!(harness);
    Ok(Json(reply))
}

/// `POST /watchdog/credential`: issue the session's watchdog credential again (the previous one
/// is revoked), for the harness (`X-Harness-Token`) or the operator (`X-API-Key` and the
/// session's `X-Session-Id`); never for the analyst's session id alone.
async fn post_credential(
    State(s): State<Shared>,
    access: Option<axum::Extension<OperatorAccess>>,
    headers: CredentialHeader,
    header: SessionHeader,
) -> Result<Json<Value>, Refused> {
    let refuse =
        |code, message: &str| Refused::Credential(StatusCode::FORBIDDEN, code, message.to_owned());
    let env = if let Some(value) = &headers.harness {
        let token = value.to_str().unwrap_or("").trim();
        if !token_shaped(token, "wdh") {
            return Err(refuse(
                "not_a_harness_token",
                "X-Harness-Token is not a harness token (`wdh-` and 32 hex digits, answered by POST /watchdog/pair)",
            ));
        }
        s.watchdog.harness_env(token).map_err(|e| match e {
            HarnessError::Unknown => refuse(
                "unknown_harness_token",
                "no such harness token was issued (POST /watchdog/pair answers one)",
            ),
            HarnessError::SessionClosed => refuse(
                "analyst_session_closed",
                "the analyst's session this harness token was issued with has closed",
            ),
        })?
    } else {
        if !access.is_some_and(|a| a.0 .0) {
            return Err(refuse(
                "harness_token_required",
                "a watchdog credential is issued to the harness, never to the analyst: send the harness token POST /watchdog/pair answered as X-Harness-Token (or the operator key as X-API-Key with the session's X-Session-Id); the analyst's session id alone issues nothing",
            ));
        }
        let (sid, named) = header.session_id(None)?;
        if !named {
            return Err(ApiError::Validation(
                "X-Session-Id is required with the operator key: the watchdog credential is issued for the analyst's named session".into(),
            )
            .into());
        }
        s.sessions
            .get(&sid)
            .ok_or_else(|| ApiError::UnknownSession(sid.clone()))?
    };
    Ok(Json(crate::watchdog_credential::credential_reply(
        &s.watchdog.issue(&env),
    )))
}

fn pair_reply_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "object", "required": ["session_id", "watchdog_credential", "harness_token", "socket"], "properties": {
        "session_id": {"type": "string", "description": "the analyst's session: hand it to the analyst (X-Session-Id)"},
        "watchdog_credential": {"type": "string", "description": "hand it to the watchdog only (X-Watchdog-Credential, or attach on the socket)"},
        "harness_token": {"type": "string", "description": "keep it in the harness: X-Harness-Token on POST /watchdog/credential issues a new credential (revoking the old one)"},
        "socket": {"type": "string", "const": "/watchdog/ws"}}})
}

fn credential_reply_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "object", "required": ["watchdog_credential", "socket"], "properties": {
        "watchdog_credential": {"type": "string", "description": "the token the watchdog sends as X-Watchdog-Credential or attaches with on the socket"},
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

const CREDENTIAL_DOC: &str = "The watchdog credential goes in the `X-Watchdog-Credential` header. Missing: 401 `watchdog_credential_required`; not credential-shaped (an analyst's session id, the admin key): 403 `not_a_watchdog_credential`; never issued: 403 `unknown_watchdog_credential`; replaced by a newer one: 403 `revoked_watchdog_credential`; its analyst gone: 403 `analyst_session_closed`.";

const CREDENTIAL_PARAM: &str =
    "The watchdog credential the analyst's session issued (required: 401 without it)";

pub fn routes() -> ApiRoutes<Shared> {
    let r = |summary| RouteDoc::new("episode", summary);
    ApiRoutes::new()
        .get(
            "/watchdog/observation",
            r("The filtered watchdog stream of an analyst's episode")
                .describe(CREDENTIAL_DOC)
                .header("X-Watchdog-Credential", CREDENTIAL_PARAM)
                .reply_with(observation_reply, "What the watchdog sees"),
            get_observation,
        )
        .post(
            "/watchdog/verdict",
            r("Issue a watchdog verdict on the analyst's episode")
                .describe(CREDENTIAL_DOC)
                .header("X-Watchdog-Credential", CREDENTIAL_PARAM)
                .body_with(verdict_body, "The verdict"),
            post_verdict,
        )
        .get(
            "/watchdog/joint",
            r("Joint analyst + watchdog score once the analyst has submitted")
                .describe("With the watchdog credential (`X-Watchdog-Credential`, refused as on the other watchdog routes) or the analyst's own `X-Session-Id`; 400 before the submission, for both.")
                .header("X-Watchdog-Credential", "The watchdog credential (or send the analyst's X-Session-Id)")
                .session()
                .reply_with(joint_reply, "The joint score"),
            get_joint,
        )
        .post(
            "/watchdog/pair",
            r("Create an analyst session for a dual-agent run")
                .describe("A new named session for the analyst, with its watchdog credential and a harness token. The harness hands `session_id` to the analyst (`X-Session-Id`) and `watchdog_credential` to the watchdog (`X-Watchdog-Credential`, or `attach` on `GET /watchdog/ws`), and keeps `harness_token`. The analyst never sees the credential or the harness token, so it cannot issue, use or revoke a credential. Counts against the client's session quota.")
                .reply_with(pair_reply_schema, "The analyst's session, the watchdog credential and the harness token"),
            post_pair,
        )
        .post(
            "/watchdog/credential",
            r("Issue the watchdog credential of a session again")
                .describe("For the harness (`X-Harness-Token`, from `POST /watchdog/pair`) or the operator (`X-API-Key` and the session's `X-Session-Id`): a new random token; the previous one is revoked; the token dies with the session. The analyst's `X-Session-Id` alone is refused (403 `harness_token_required`); a malformed, unknown or closed harness token is 403 `not_a_harness_token`, `unknown_harness_token`, `analyst_session_closed`.")
                .header("X-Harness-Token", "The harness token POST /watchdog/pair answered")
                .session()
                .reply_with(credential_reply_schema, "The credential and the socket to use"),
            post_credential,
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_issued_shapes_count_as_credentials() {
        let token = crate::sessions::SessionManager::<()>::new_id("wdc");
        assert!(credential_shaped(&token), "{token}");
        for not in [
            "analyst-1",
            "wdc-",
            "wdc-guess",
            "WDC-0123456789abcdef0123456789abcdef",
            "wdc-0123456789ABCDEF0123456789abcdef",
            "sess-0123456789abcdef0123456789abcdef",
        ] {
            assert!(!credential_shaped(not), "{not}");
        }
    }
}
