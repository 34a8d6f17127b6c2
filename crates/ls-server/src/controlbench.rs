//! ControlBench HTTP routes. Handlers parse the request, pick the session, call the
//! environment and serialize; they hold no domain logic.

use crate::body::{json_value, EnvelopeReply, JsonReply, RawBody};
use crate::error::ApiError;
use crate::route_table::ApiRoutes;
use crate::sessions::{lock_env, SessionManager};
pub use crate::sessions::{SessionHeader, SESSION_HEADER};
use axum::extract::State;
use axum::Json;
use ls_env::{CasePool, EnvConfig, Environment, PublicState, ResetRequest, StepEnvelope};
use serde_json::{json, Map, Value};
use std::sync::{Arc, Mutex};

/// Shared state of the ControlBench server.
pub struct AppState {
    pub pool: Arc<CasePool>,
    pub config: EnvConfig,
    pub sessions: SessionManager<Environment>,
    /// OpenEnv WebSocket limits and live connections.
    pub ws: crate::ws_config::WsRuntime,
    /// Persistent report store behind the product endpoints.
    pub reports: crate::report_store::ReportStore,
    /// Origin, host, admin key and rate limits (the guard around the whole application).
    pub security: crate::config::SecurityConfig,
    /// Watchdog credentials issued by analysts' sessions (`crate::watchdog_ws`).
    pub watchdog: crate::watchdog_ws::WatchdogCredentials,
}

impl AppState {
    pub fn new_env(&self) -> Environment {
        Environment::new(self.pool.clone(), self.config)
    }
}

pub type Shared = Arc<AppState>;

mod table;

/// A parsed step request: `{"action_type", "payload"}` or OpenEnv's `{"action": {...}}`.
#[derive(Debug, Clone, PartialEq)]
pub struct StepRequest {
    pub action_type: String,
    pub payload: Map<String, Value>,
    pub session_id: Option<String>,
}

const WRAPPER_KEYS: [&str; 5] = [
    "action",
    "timeout_s",
    "request_id",
    "session_id",
    "metadata",
];
const ACTION_KEYS: [&str; 4] = ["action_type", "payload", "session_id", "metadata"];
/// Longest accepted `action_type` (no action name comes close).
const MAX_ACTION_TYPE_CHARS: usize = 128;

/// Validate the step body's shape, naming the offending field.
pub fn parse_step(body: Value) -> Result<StepRequest, ApiError> {
    let Value::Object(mut top) = body else {
        return Err(ApiError::Validation(
            "body must be a JSON object with action_type and payload".into(),
        ));
    };
    let session_id = match top.get("session_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(ApiError::Validation("session_id must be a string".into())),
    };
    let mut obj = if top.contains_key("action") && !top.contains_key("action_type") {
        if let Some(k) = top.keys().find(|k| !WRAPPER_KEYS.contains(&k.as_str())) {
            return Err(ApiError::Validation(format!(
                "unexpected field '{k}' beside 'action'"
            )));
        }
        match top.remove("action") {
            Some(Value::Object(a)) => a,
            _ => {
                return Err(ApiError::Validation(
                    "action must be an object with action_type and payload".into(),
                ))
            }
        }
    } else {
        if let Some(k) = top.keys().find(|k| !ACTION_KEYS.contains(&k.as_str())) {
            return Err(ApiError::Validation(format!(
                "unexpected field '{k}': expected action_type and payload"
            )));
        }
        top
    };
    let action_type = match obj.remove("action_type") {
        Some(Value::String(s)) => s,
        None | Some(Value::Null) => {
            return Err(ApiError::Validation("action_type is required".into()))
        }
        Some(_) => return Err(ApiError::Validation("action_type must be a string".into())),
    };
    if action_type.chars().count() > MAX_ACTION_TYPE_CHARS {
        return Err(ApiError::Validation("action_type is too long".into()));
    }
    // OpenEnv's generic action model may carry payload fields at the top level of the action.
    let payload = match obj.remove("payload") {
        None | Some(Value::Null) => obj
            .into_iter()
            .filter(|(k, _)| k != "metadata" && k != "session_id")
            .collect(),
        Some(Value::Object(p)) => p,
        Some(_) => return Err(ApiError::Validation("payload must be an object".into())),
    };
    Ok(StepRequest {
        action_type,
        payload,
        session_id,
    })
}

/// Parse a `POST /step` body. The plain shape `{"action_type": "...", "payload": {...}}` (no other
/// or repeated keys) is read straight into its parts; every other body, valid or not, goes
/// through the JSON value and [`parse_step`], which accepts the other shapes and names what is
/// wrong. Both paths give the same request for the plain shape (a unit test compares them).
pub fn parse_step_body(bytes: &[u8]) -> Result<StepRequest, ApiError> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Plain {
        action_type: String,
        payload: Map<String, Value>,
    }
    match is_object_text(bytes).then(|| serde_json::from_slice::<Plain>(bytes)) {
        Some(Ok(p)) if p.action_type.chars().count() <= MAX_ACTION_TYPE_CHARS => Ok(StepRequest {
            action_type: p.action_type,
            payload: p.payload,
            session_id: None,
        }),
        _ => parse_step(json_value(bytes)?),
    }
}

/// Parse a `POST /reset` body: read straight into a [`ResetRequest`] when it is one (no repeated
/// keys), otherwise through the JSON value and [`parse_reset`] (defaults, errors).
pub fn parse_reset_body(bytes: &[u8]) -> Result<ResetRequest, ApiError> {
    match is_object_text(bytes).then(|| serde_json::from_slice::<ResetRequest>(bytes)) {
        Some(Ok(r)) => Ok(r),
        _ => parse_reset(json_value(bytes)?),
    }
}

/// Does the text start (after whitespace) with `{`? A derived struct also accepts a JSON array
/// of its fields in order, which the protocol does not.
fn is_object_text(bytes: &[u8]) -> bool {
    bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
}

/// Parse a reset body (absent or `{}` means defaults).
pub fn parse_reset(body: Value) -> Result<ResetRequest, ApiError> {
    match body {
        Value::Null => Ok(ResetRequest::default()),
        Value::Object(_) => serde_json::from_value(body)
            .map_err(|e| ApiError::Validation(format!("reset body: {e}"))),
        _ => Err(ApiError::Validation(
            "reset body must be a JSON object".into(),
        )),
    }
}

pub fn do_reset(
    state: &AppState,
    session: &str,
    req: &ResetRequest,
) -> Result<StepEnvelope, ApiError> {
    let env = state.sessions.get_or_create(session, || state.new_env())?;
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

pub fn do_state(state: &AppState, session: &str) -> PublicState {
    state
        .sessions
        .get(session)
        .and_then(|e| lock_env(&e).state())
        .unwrap_or_else(|| PublicState {
            budget_total: 15.0,
            budget_remaining: 15.0,
            max_steps: 20,
            track_mode: state.config.track_mode.as_str().to_owned(),
            ..Default::default()
        })
}

async fn root() -> Json<Value> {
    Json(
        json!({"status": "ok", "service": "LedgerShield OpenEnv", "environment": "controlbench", "workbench": "/ui/", "docs": "/docs", "openapi": "/openapi.json"}),
    )
}

async fn health(State(s): State<Shared>) -> Json<Value> {
    Json(
        json!({"status": "healthy", "service": "LedgerShield OpenEnv", "cases_loaded": s.pool.cases.len(), "sessions": s.sessions.len()}),
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
    RawBody(body): RawBody,
) -> Result<EnvelopeReply, ApiError> {
    let req = parse_reset_body(&body)?;
    check_fresh_institution(&req, access.is_some_and(|a| a.0 .0))?;
    let (sid, _) = header.session_id(req.session_id.as_deref())?;
    Ok(EnvelopeReply(do_reset(&s, &sid, &req)?))
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
) -> Result<JsonReply<PublicState>, ApiError> {
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
) -> Result<Json<Value>, ApiError> {
    let (sid, _) = header.session_id(None)?;
    let env = s.sessions.get_or_create(&sid, || s.new_env())?;
    let mut env = lock_env(&env);
    Ok(Json(Value::Object(env.institutional_reset()?)))
}

/// The ControlBench routes, each with its documentation.
pub fn routes() -> ApiRoutes<Shared> {
    table::routes()
}

/// ControlBench's operator routes (the operator key, from every address).
pub fn is_operator_route(method: &axum::http::Method, path: &str) -> bool {
    // Stored runs hold other agents' decisions and evidence for the same cases: an agent under
    // evaluation must not read them, so they are operator reads.
    let stored_runs =
        *method == axum::http::Method::GET && (path == "/runs" || path.starts_with("/runs/"));
    // A scripted agent's submissions on a served case are a worked answer.
    let agent_runs = *method == axum::http::Method::POST
        && (path == "/agent-runs" || path == crate::hand_runs::ROUTE);
    (*method == axum::http::Method::POST && path == "/institutional-reset")
        || stored_runs
        || agent_runs
}

/// Build the shared state from the server configuration (parsed once by the binary).
pub fn app_state(
    pool: CasePool,
    config: EnvConfig,
    server: &crate::config::ServerConfig,
    reports: crate::report_store::ReportStore,
    shutdown: &crate::shutdown::Shutdown,
) -> Shared {
    Arc::new(AppState {
        pool: Arc::new(pool),
        config,
        sessions: SessionManager::new(server.max_sessions, server.session_idle),
        ws: crate::ws_config::WsRuntime::new(server.ws, shutdown.clone()),
        reports,
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

    #[test]
    fn step_bodies() {
        let r = parse_step(json!({"action_type": "ocr", "payload": {"doc_id": "X"}})).unwrap();
        assert_eq!(r.action_type, "ocr");
        let r = parse_step(
            json!({"action": {"action_type": "zoom", "payload": {"doc_id": "X"}}, "timeout_s": 5}),
        )
        .unwrap();
        assert_eq!(r.action_type, "zoom");
        let r = parse_step(json!({"action": {"action_type": "zoom", "doc_id": "X"}})).unwrap();
        assert_eq!(r.payload["doc_id"], "X");
        assert!(parse_step(json!({"payload": {}}))
            .unwrap_err()
            .to_string()
            .contains("action_type"));
        assert!(parse_step(json!({"action_type": "ocr", "payload": [1]}))
            .unwrap_err()
            .to_string()
            .contains("payload"));
        assert!(parse_step(json!({"action_type": 3})).is_err());
        assert!(parse_step(json!({"action_type": "ocr", "extra": 1}))
            .unwrap_err()
            .to_string()
            .contains("extra"));
        assert!(parse_step(json!([1, 2])).is_err());
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

    /// The direct parse of the plain shapes gives what the general path gives, for every body,
    /// valid or not (errors compared by message).
    #[test]
    fn body_fast_paths_match_the_general_parse() {
        let long = "x".repeat(129);
        let step_bodies = [
            r#"{"action_type": "ocr", "payload": {"doc_id": "X", "mode": "fast"}}"#.to_owned(),
            r#"{"payload": {"b": 1, "a": [1, 2.5, null]}, "action_type": "zoom"}"#.to_owned(),
            r#"{"action_type": "ocr", "payload": {"doc_id": "X", "doc_id": "Y"}}"#.to_owned(),
            r#"{"action_type": "ocr", "action_type": "zoom", "payload": {}}"#.to_owned(),
            r#"{"action_type": "ocr", "payload": null}"#.to_owned(),
            r#"{"action_type": "ocr"}"#.to_owned(),
            r#"{"action_type": "ocr", "payload": [1]}"#.to_owned(),
            r#"{"action_type": 3, "payload": {}}"#.to_owned(),
            r#"{"action_type": "ocr", "payload": {}, "session_id": "s1"}"#.to_owned(),
            r#"{"action_type": "ocr", "payload": {}, "extra": 1}"#.to_owned(),
            r#"{"action": {"action_type": "zoom", "doc_id": "X"}, "timeout_s": 5}"#.to_owned(),
            format!(r#"{{"action_type": "{long}", "payload": {{}}}}"#),
            r#"{"action_type": "ocr", "payload": {"#.to_owned(),
            r#"{"action_type": "ocr", "payload": {}} trailing"#.to_owned(),
            "[1, 2]".to_owned(),
            r#"["ocr", {"doc_id": "X"}]"#.to_owned(),
            "  ".to_owned(),
            String::new(),
            "nope".to_owned(),
        ];
        for body in &step_bodies {
            same_outcome(
                body,
                json_value(body.as_bytes()).and_then(parse_step),
                parse_step_body(body.as_bytes()),
            );
        }
        let reset_bodies = [
            r#"{"case_id": "CASE-D-001"}"#,
            r#"{"seed": 7, "track": "blind", "episode_id": "e"}"#,
            r#"{"case_id": "A", "case_id": "B"}"#,
            r#"{"seed": -1}"#,
            r#"{"seed": 1.5}"#,
            r#"{"extra": 1}"#,
            r#"{"custom_case": {"template_case_id": "CASE-A-001", "x": [1, {"y": null}]}}"#,
            "null",
            "",
            "  ",
            "[1]",
            "{",
        ];
        for body in reset_bodies {
            same_outcome(
                body,
                json_value(body.as_bytes()).and_then(parse_reset),
                parse_reset_body(body.as_bytes()),
            );
        }
    }

    /// The same request, or errors with the same message.
    fn same_outcome<T: PartialEq + std::fmt::Debug>(
        body: &str,
        general: Result<T, ApiError>,
        direct: Result<T, ApiError>,
    ) {
        match (&general, &direct) {
            (Ok(g), Ok(d)) => assert_eq!(g, d, "{body}"),
            (Err(g), Err(d)) => assert_eq!(g.to_string(), d.to_string(), "{body}"),
            _ => panic!("{body}: general {general:?}, direct {direct:?}"),
        }
    }
}
