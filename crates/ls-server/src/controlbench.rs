//! ControlBench HTTP routes. Handlers parse the request, pick the session, call the
//! environment and serialize; they hold no domain logic.

use crate::body::{json_value, EnvelopeReply, JsonReply, RawBody};
use crate::capacity::ClientKey;
use crate::error::ApiError;
use crate::route_table::ApiRoutes;
use crate::security::{client_key, ClientAddr};
use crate::sessions::{lock_env, SessionManager};
pub use crate::sessions::{SessionHeader, SESSION_HEADER};
use axum::extract::State;
use axum::Json;
use ls_core::enums::ActionName;
use ls_env::{
    CasePool, EnvConfig, Environment, PublicState, ResetRequest, StateView, StepEnvelope,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::sync::{Arc, Mutex};

/// Shared state of the ControlBench server.
pub struct AppState {
    pub pool: Arc<CasePool>,
    pub config: EnvConfig,
    pub sessions: SessionManager<Environment>,
    /// OpenEnv WebSocket limits and live connections.
    pub ws: crate::ws_config::WsRuntime,
    /// Origin, host, admin key and rate limits (the guard around the whole application).
    pub security: crate::config::SecurityConfig,
    /// Watchdog credentials issued by analysts' sessions (`crate::watchdog_ws`).
    pub watchdog: crate::watchdog_credential::WatchdogCredentials,
}

impl AppState {
    pub fn new_env(&self) -> Environment {
        Environment::new(self.pool.clone(), self.config)
    }
}

pub type Shared = Arc<AppState>;

mod table;

/// A ControlBench action: `{"action_type": <one of the 21 actions>, "payload": {...}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(title = "ControlBenchAction")]
pub struct ControlBenchAction {
    /// The action to take.
    pub action_type: ActionName,
    /// Action arguments (see each tool's input schema in MCP `tools/list`); `{}` when none.
    #[serde(default)]
    pub payload: Map<String, Value>,
    /// Free-form client metadata; ignored by the environment.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub metadata: Map<String, Value>,
}

pub use ls_env::step_body::StepRequest;

/// Validate the step body's shape, naming the offending field
/// ([`ls_env::step_body::parse_step`], shared with the in-process module).
pub fn parse_step(body: Value) -> Result<StepRequest, ApiError> {
    ls_env::step_body::parse_step(body).map_err(ApiError::Validation)
}

/// Parse a `POST /step` body: the JSON value, then [`parse_step`] (every accepted shape, and
/// what is wrong with any other).
pub fn parse_step_body(bytes: &[u8]) -> Result<StepRequest, ApiError> {
    parse_step(json_value(bytes)?)
}

/// Parse a `POST /reset` body: the JSON value, then [`parse_reset`] (defaults, errors).
pub fn parse_reset_body(bytes: &[u8]) -> Result<ResetRequest, ApiError> {
    parse_reset(json_value(bytes)?)
}

/// Parse a reset body (absent or `{}` means defaults).
pub fn parse_reset(body: Value) -> Result<ResetRequest, ApiError> {
    ls_env::step_body::parse_reset(body).map_err(ApiError::Validation)
}

/// Reset `session` (created for `owner`, the client, when new).
pub fn do_reset(
    state: &AppState,
    session: &str,
    owner: Option<ClientKey>,
    req: &ResetRequest,
) -> Result<StepEnvelope, ApiError> {
    let env = state
        .sessions
        .get_or_create(session, owner, || state.new_env())?;
    let mut env = lock_env(&env);
    Ok(env.reset(req)?)
}

pub fn do_step(
    state: &AppState,
    session: &str,
    explicit: bool,
    req: &StepRequest,
) -> Result<StepEnvelope, ApiError> {
    let env = match state.sessions.get(session) {
        Some(e) => e,
        None if !explicit => return Err(ApiError::NotReset),
        None => return Err(ApiError::UnknownSession(session.to_owned())),
    };
    let mut env = lock_env(&env);
    let action = ls_env::ActionRequest::parse(&req.action_type, &req.payload);
    Ok(env.step_request(action)?)
}

/// The session's state as the client reads it: a sealed episode that is over answers its sealed
/// view, without the grade ([`ls_env::seal`]).
pub fn do_state(state: &AppState, session: &str) -> StateView {
    state
        .sessions
        .get(session)
        .and_then(|e| lock_env(&e).state_view())
        .unwrap_or_else(|| {
            StateView::Open(Box::new(PublicState {
                budget_total: 15.0,
                budget_remaining: 15.0,
                max_steps: 20,
                track_mode: state.config.track_mode.as_str().to_owned(),
                ..Default::default()
            }))
        })
}

async fn root() -> Json<Value> {
    Json(
        json!({"status": "ok", "service": "LedgerShield OpenEnv", "environment": "controlbench", "workbench": "/ui/", "docs": "/docs", "openapi": "/openapi.json"}),
    )
}

/// `GET /health` as the LedgerShield documentation specifies it: `{"status": "ok"}` (the
/// reference's smoke tests and `validate_grader.py` check exactly that), with our counts beside.
/// openenv-core's runtime validator expects `"healthy"` instead; the contract wins
/// (docs/server.md, "Health").
async fn health(State(s): State<Shared>) -> Json<Value> {
    Json(
        json!({"status": "ok", "service": "LedgerShield OpenEnv", "cases_loaded": s.pool.cases.len(), "sessions": s.sessions.len()}),
    )
}

/// A fresh institution restores full authority to whatever the institution governs (the
/// portfolio, ControlBench and sleeper tracks, also when the reset itself names another track:
/// the cleared memory carries into the next governed episode of the session). The governed agent
/// must not lift its own governance, so it is an operator action; a trainer gets a fresh
/// institution from a new session.
pub fn check_fresh_institution(req: &ResetRequest, operator: bool) -> Result<(), ApiError> {
    if req.fresh_institution && !operator {
        return Err(ApiError::Forbidden(FRESH_INSTITUTION_REFUSED.into()));
    }
    Ok(())
}

/// Why a keyless `fresh_institution` reset is refused (clients match on `fresh_institution`).
pub const FRESH_INSTITUTION_REFUSED: &str = "fresh_institution needs the operator key (X-API-Key): the governed agent cannot lift its own governance; open a new session for a fresh institution";

async fn reset(
    State(s): State<Shared>,
    header: SessionHeader,
    access: Option<axum::Extension<crate::security::OperatorAccess>>,
    client: Option<axum::Extension<ClientAddr>>,
    RawBody(body): RawBody,
) -> Result<EnvelopeReply, ApiError> {
    let req = parse_reset_body(&body)?;
    check_fresh_institution(&req, access.is_some_and(|a| a.0 .0))?;
    let (sid, _) = header.session_id(req.session_id.as_deref())?;
    Ok(EnvelopeReply(do_reset(
        &s,
        &sid,
        client_key(client.as_ref()),
        &req,
    )?))
}

async fn step(
    State(s): State<Shared>,
    header: SessionHeader,
    RawBody(body): RawBody,
) -> Result<EnvelopeReply, ApiError> {
    let req = parse_step_body(&body)?;
    let (sid, explicit) = header.session_id(req.session_id.as_deref())?;
    Ok(EnvelopeReply(do_step(&s, &sid, explicit, &req)?))
}

async fn state(
    State(s): State<Shared>,
    header: SessionHeader,
) -> Result<JsonReply<StateView>, ApiError> {
    let (sid, _) = header.session_id(None)?;
    Ok(JsonReply(do_state(&s, &sid)))
}

async fn institutional_memory(
    State(s): State<Shared>,
    header: SessionHeader,
) -> Result<JsonReply<ls_env::RawJson>, ApiError> {
    let (sid, _) = header.session_id(None)?;
    // A read never creates state: an unknown session reads a fresh institution's memory.
    let snapshot = match s.sessions.get(&sid) {
        Some(env) => lock_env(&env).memory.snapshots().full,
        None => s.new_env().memory.snapshots().full,
    };
    // The snapshot is already JSON text; no map round trip.
    Ok(JsonReply(snapshot))
}

/// `DELETE /session`: close the session named by `X-Session-Id` now, freeing its slot.
async fn close_session(
    State(s): State<Shared>,
    header: SessionHeader,
) -> Result<Json<Value>, ApiError> {
    let (sid, named) = header.session_id(None)?;
    if !named {
        return Err(ApiError::BadRequest(
            "DELETE /session needs the X-Session-Id header naming the session to close".into(),
        ));
    }
    if !s.sessions.remove(&sid) {
        return Err(ApiError::UnknownSession(crate::error::prefix(&sid)));
    }
    Ok(Json(json!({"session_id": sid, "status": "closed"})))
}

async fn institutional_reset(
    State(s): State<Shared>,
    header: SessionHeader,
    client: Option<axum::Extension<ClientAddr>>,
) -> Result<Json<Value>, ApiError> {
    let (sid, _) = header.session_id(None)?;
    let env = s
        .sessions
        .get_or_create(&sid, client_key(client.as_ref()), || s.new_env())?;
    let mut env = lock_env(&env);
    Ok(Json(Value::Object(env.institutional_reset()?)))
}

/// The ControlBench routes, each with its documentation.
pub fn routes() -> ApiRoutes<Shared> {
    table::routes()
}

/// ControlBench's protocol operator routes (the operator key, from every address).
pub fn is_operator_route(method: &axum::http::Method, path: &str) -> bool {
    // (The product's operator routes, stored runs and agent runs, are `ls-product`'s.)
    *method == axum::http::Method::POST && path == "/institutional-reset"
}

/// Build the shared state from the server configuration (parsed once by the binary).
pub fn app_state(
    pool: CasePool,
    config: EnvConfig,
    server: &crate::config::ServerConfig,
    shutdown: &crate::shutdown::Shutdown,
) -> Shared {
    Arc::new(AppState {
        pool: Arc::new(pool),
        config,
        sessions: SessionManager::new(server.max_sessions, server.session_idle)
            .with_per_client(server.max_sessions_per_client),
        ws: crate::ws_config::WsRuntime::new(server.ws, shutdown.clone()),
        security: server.security.clone(),
        watchdog: Default::default(),
    })
}

#[allow(dead_code)]
fn _assert_send(_: &Mutex<Environment>) {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sessions::DEFAULT_SESSION;
    use axum::http::HeaderValue;

    /// Bodies as bytes: one parse for every shape; blank means defaults for a reset, an array is
    /// not an object, broken JSON is named as such.
    #[test]
    fn bodies_from_bytes() {
        let r = parse_step_body(br#"{"action_type": "ocr", "payload": {"doc_id": "X"}}"#).unwrap();
        assert_eq!((r.action_type.as_str(), r.session_id), ("ocr", None));
        assert_eq!(r.payload["doc_id"], "X");
        let wrapped = parse_step_body(
            br#"{"action": {"action_type": "zoom", "doc_id": "X"}, "session_id": "s"}"#,
        )
        .unwrap();
        assert_eq!(
            (wrapped.action_type.as_str(), wrapped.session_id.as_deref()),
            ("zoom", Some("s"))
        );
        let e = parse_step_body(br#"["ocr", {"doc_id": "X"}]"#).unwrap_err();
        assert!(e.to_string().contains("body must be a JSON object"), "{e}");
        let e = parse_step_body(b"  ").unwrap_err();
        assert!(e.to_string().contains("body must be a JSON object"), "{e}");
        let e = parse_step_body(br#"{"action_type": "ocr", "payload": {}} trailing"#).unwrap_err();
        assert!(matches!(e, ApiError::InvalidJson(_)), "{e}");
        let long = format!(
            r#"{{"action_type": "{}", "payload": {{}}}}"#,
            "x".repeat(129)
        );
        assert!(parse_step_body(long.as_bytes())
            .unwrap_err()
            .to_string()
            .contains("too long"));
        assert_eq!(parse_reset_body(b"").unwrap(), ResetRequest::default());
        assert_eq!(
            parse_reset_body(br#"{"case_id": "CASE-D-001"}"#)
                .unwrap()
                .case_id
                .as_deref(),
            Some("CASE-D-001")
        );
        let e = parse_reset_body(b"[1]").unwrap_err();
        assert!(
            e.to_string().contains("reset body must be a JSON object"),
            "{e}"
        );
        let e = parse_reset_body(br#"{"extra": 1}"#).unwrap_err();
        assert!(
            e.to_string().contains("reset body: unknown field `extra`"),
            "{e}"
        );
    }

    #[test]
    fn session_ids_from_header_body_or_default() {
        let header = |v: &[u8]| SessionHeader(Some(HeaderValue::from_bytes(v).unwrap()));
        assert_eq!(
            header(b" s-1 ").session_id(Some("body")).unwrap(),
            ("s-1".to_owned(), true)
        );
        assert_eq!(
            SessionHeader(None).session_id(Some("body")).unwrap(),
            ("body".to_owned(), true)
        );
        assert_eq!(
            SessionHeader(None).session_id(None).unwrap(),
            (DEFAULT_SESSION.to_owned(), false)
        );
        let bad = header(b"a b").session_id(None).unwrap_err();
        assert_eq!(bad.status(), axum::http::StatusCode::BAD_REQUEST);
        assert!(bad.to_string().contains("session id"), "{bad}");
        let non_ascii = header("s\u{e9}".as_bytes()).session_id(None).unwrap_err();
        assert!(
            non_ascii.to_string().contains("X-Session-Id must be ASCII"),
            "{non_ascii}"
        );
        assert!(SessionHeader(None).session_id(Some("")).is_err());
    }
}
