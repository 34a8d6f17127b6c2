//! OpenEnv WebSocket sessions (`GET /ws`), wire-compatible with openenv-core 0.3.
//!
//! Client messages: `{"type": "reset", "data": {...}}`, `{"type": "step", "data": <action>}`,
//! `{"type": "state"}`, `{"type": "close"}` and `{"type": "mcp", "data": <JSON-RPC request>}`.
//! Replies: `{"type": "observation", "data": {"observation", "reward", "done", ...}}`,
//! `{"type": "state", "data": {...}}`, `{"type": "mcp", "data": <JSON-RPC response>}` and
//! `{"type": "error", "data": {"message", "code", ...}}` with openenv-core's error codes.
//!
//! Each connection owns an isolated environment. A malformed message gets an error reply and the
//! connection stays usable; only `close`, the idle timeout, a frame above the hard size cap or the
//! client going away end it. The number of live connections is bounded: past the bound a new
//! connection gets a `CAPACITY_REACHED` error and a close frame (1013).

use crate::error::ApiError;
use crate::protocol::{OpenEnvBackend, OpenEnvService};
pub use crate::ws_config::{
    WsConfig, WsRuntime, ENV_IDLE_SECS, ENV_MAX_BUFFERED_BYTES, ENV_MAX_MESSAGE_BYTES,
    ENV_MAX_SESSIONS,
};
use crate::ws_socket::Reply;
use axum::extract::ws::{close_code, WebSocket, WebSocketUpgrade};
use axum::extract::State;
use axum::response::Response;
use serde_json::{json, Map, Value};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

pub use crate::ws_error::{WsError, WsErrorCode};

/// A parsed client message.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    Reset(Map<String, Value>),
    Step(Map<String, Value>),
    State,
    Close,
    Mcp(Map<String, Value>),
    /// A message type the environment adds to OpenEnv's (ControlBench: `watchdog_credential`).
    Extra(String, Map<String, Value>),
}

pub const MESSAGE_TYPES: &str = "reset, step, state, close, mcp";

/// Parse one client message (text or binary frame payload), enforcing the size limit.
pub fn parse_message(bytes: &[u8], limit: usize) -> Result<Incoming, WsError> {
    parse_message_with(bytes, limit, &[])
}

/// [`parse_message`], also accepting the environment's added message types `extra` (their
/// `data`, when present, must be an object).
pub fn parse_message_with(bytes: &[u8], limit: usize, extra: &[&str]) -> Result<Incoming, WsError> {
    let (ty, data) = parse_envelope(bytes, limit, MESSAGE_TYPES)?;
    let object = |required: bool| data_object(&ty, data.clone(), required);
    match ty.as_str() {
        "reset" => Ok(Incoming::Reset(object(false)?)),
        "step" => Ok(Incoming::Step(object(true)?)),
        "mcp" => Ok(Incoming::Mcp(object(true)?)),
        t if extra.contains(&t) => Ok(Incoming::Extra(ty.clone(), object(false)?)),
        "state" | "close" => {
            if !object(false)?.is_empty() {
                return Err(WsError::new(
                    WsErrorCode::ValidationError,
                    format!("a '{ty}' message takes no data"),
                ));
            }
            Ok(if ty == "state" {
                Incoming::State
            } else {
                Incoming::Close
            })
        }
        other => Err(unknown_type(other, types_hint(MESSAGE_TYPES))),
    }
}

fn types_hint(types: &str) -> String {
    format!("expected one of {types}")
}

/// The `UNKNOWN_TYPE` error for a message type the endpoint does not know.
pub fn unknown_type(ty: &str, hint: String) -> WsError {
    WsError::new(
        WsErrorCode::UnknownType,
        format!("Unknown message type: {} ({hint})", truncate(ty, 64)),
    )
}

/// A message's envelope `{"type": ..., "data": ...}` as every socket checks it: within the size
/// limit, a JSON object, a string `type`, no field but `data`. Its type and its data; `types`
/// (the endpoint's message types) is named when the type is missing.
pub fn parse_envelope(
    bytes: &[u8],
    limit: usize,
    types: &str,
) -> Result<(String, Option<Value>), WsError> {
    if bytes.len() > limit {
        return Err(WsError::new(
            WsErrorCode::ValidationError,
            format!(
                "message of {} bytes exceeds the {limit}-byte limit",
                bytes.len()
            ),
        )
        .with("error", json!("payload_too_large"))
        .with("limit_bytes", json!(limit)));
    }
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|e| WsError::new(WsErrorCode::InvalidJson, format!("Invalid JSON: {e}")))?;
    let Value::Object(mut obj) = value else {
        return Err(WsError::new(
            WsErrorCode::ValidationError,
            "message must be a JSON object with a 'type' field",
        ));
    };
    let ty = match obj.remove("type") {
        Some(Value::String(t)) => t,
        Some(other) => return Err(unknown_type(&other.to_string(), types_hint(types))),
        None => {
            return Err(WsError::new(
                WsErrorCode::UnknownType,
                format!("message has no 'type' ({})", types_hint(types)),
            ))
        }
    };
    if let Some(k) = obj.keys().find(|k| k.as_str() != "data") {
        return Err(WsError::new(
            WsErrorCode::ValidationError,
            format!(
                "unexpected field '{}' in a '{}' message",
                truncate(k, 64),
                truncate(&ty, 64)
            ),
        ));
    }
    Ok((ty, obj.remove("data")))
}

/// A message's `data` as an object (absent or null: empty, unless `required`).
pub fn data_object(
    ty: &str,
    data: Option<Value>,
    required: bool,
) -> Result<Map<String, Value>, WsError> {
    match data {
        Some(Value::Object(m)) => Ok(m),
        None | Some(Value::Null) if !required => Ok(Map::new()),
        None | Some(Value::Null) => Err(WsError::new(
            WsErrorCode::ValidationError,
            format!("a '{ty}' message requires 'data' (an object)"),
        )),
        Some(_) => Err(WsError::new(
            WsErrorCode::ValidationError,
            format!(
                "'data' of a '{}' message must be an object",
                truncate(ty, 64)
            ),
        )),
    }
}

fn truncate(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

/// A reply message `{"type": ..., "data": ...}` whose data is already JSON text.
#[derive(serde::Serialize)]
struct RawMessage<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    data: &'a ls_json::RawJson,
}

/// Answer one parsed message (not `close`) against the session's backend; the reply's JSON text.
/// Observations are wrapped as the text the environment serialized, not rebuilt as a tree.
pub fn dispatch<S: OpenEnvService>(svc: &S, backend: &mut S::Backend, msg: Incoming) -> String {
    let observation = |r: Result<ls_json::RawJson, ApiError>| match r {
        Ok(data) => ls_json::to_string(&RawMessage {
            kind: "observation",
            data: &data,
        })
        .expect("a raw message serializes"),
        Err(e) => WsError::from(e).to_message().to_string(),
    };
    match msg {
        Incoming::Reset(data) => {
            let reply = backend.reset(data);
            if reply.is_ok() {
                crate::metrics::episode_started("ws");
            }
            observation(reply)
        }
        Incoming::Step(action) => observation(backend.step(action)),
        Incoming::State => {
            json!({"type": "state", "data": backend.state().unwrap_or_else(|| svc.initial_state())})
                .to_string()
        }
        Incoming::Mcp(req) => {
            json!({"type": "mcp", "data": crate::ws_mcp::ws_rpc(svc, backend, Value::Object(req))})
                .to_string()
        }
        Incoming::Close => json!({"type": "state", "data": {}}).to_string(),
        Incoming::Extra(ty, _) => WsError::new(
            WsErrorCode::UnknownType,
            format!("Unknown message type: {}", truncate(&ty, 64)),
        )
        .to_message()
        .to_string(),
    }
}

/// `GET /ws`.
pub async fn ws_handler<S: OpenEnvService>(
    State(svc): State<Arc<S>>,
    client: Option<axum::Extension<crate::security::ClientAddr>>,
    access: Option<axum::Extension<crate::security::OperatorAccess>>,
    ws: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Response {
    let owned = svc.clone();
    let operator = access.is_some_and(|a| a.0 .0);
    crate::ws_socket::upgrade(
        svc.ws_runtime(),
        "/ws",
        client,
        ws,
        move |socket, admission| session(owned, socket, admission, operator),
    )
}

/// Lock a connection's environment; a panic while it was held left it replaced (see [`handle`]).
pub fn lock_backend<B>(b: &crate::protocol::SharedBackend<B>) -> std::sync::MutexGuard<'_, B> {
    b.lock().unwrap_or_else(|p| {
        b.clear_poison();
        p.into_inner()
    })
}

/// Dispatch one message on the connection's environment. A panic replaces the environment by a
/// fresh one and answers an error; `None` when no fresh one can be made.
fn handle<S: OpenEnvService>(
    svc: &S,
    backend: &crate::protocol::SharedBackend<S::Backend>,
    incoming: Incoming,
) -> Option<String> {
    let mut guard = lock_backend(backend);
    match catch_unwind(AssertUnwindSafe(|| dispatch(svc, &mut guard, incoming))) {
        Ok(reply) => Some(reply),
        Err(_) => {
            tracing::error!("environment panicked; the session's environment was replaced");
            *guard = svc.new_backend().ok()?;
            Some(WsError::new(WsErrorCode::ExecutionError, "internal error while handling the message; the session's environment was reset").with("error", json!("internal_error")).to_message().to_string())
        }
    }
}

/// A fresh environment for a connection; the error message when none can be made.
fn open_backend<S: OpenEnvService>(
    svc: &S,
) -> Result<crate::protocol::SharedBackend<S::Backend>, Value> {
    match catch_unwind(AssertUnwindSafe(|| svc.new_backend())) {
        Ok(Ok(b)) => Ok(Arc::new(std::sync::Mutex::new(b))),
        Ok(Err(e)) => Err(WsError::new(WsErrorCode::FactoryError, e.to_string()).to_message()),
        Err(_) => Err(
            WsError::new(WsErrorCode::FactoryError, "creating the environment failed").to_message(),
        ),
    }
}

/// Answer one data frame of a `/ws` session.
fn answer<S: OpenEnvService>(
    svc: &S,
    backend: &crate::protocol::SharedBackend<S::Backend>,
    operator: bool,
    bytes: &[u8],
) -> Reply {
    let limit = svc.ws_runtime().config.max_message_bytes;
    Reply::Text(
        match parse_message_with(bytes, limit, svc.extra_message_types()) {
            Err(e) => e.to_message().to_string(),
            Ok(Incoming::Close) => return Reply::Close(close_code::NORMAL, "closed by client"),
            Ok(Incoming::Extra(ty, data)) => {
                match svc.extra_message(&ty, data, backend, operator) {
                    Ok(v) => v.to_string(),
                    Err(e) => WsError::from(e).to_message().to_string(),
                }
            }
            Ok(incoming) => match handle(svc, backend, incoming) {
                Some(reply) => reply,
                None => return Reply::Close(close_code::ERROR, "internal error"),
            },
        },
    )
}

/// One WebSocket session: its own environment, under the runtime's limits.
async fn session<S: OpenEnvService>(
    svc: Arc<S>,
    socket: WebSocket,
    admission: crate::ws_socket::Admission,
    operator: bool,
) {
    let svc = &*svc;
    crate::ws_socket::serve(svc.ws_runtime(), socket, admission, || {
        let backend = open_backend(svc)?;
        Ok(move |bytes: &[u8]| answer(svc, &backend, operator, bytes))
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(r: Result<Incoming, WsError>) -> WsErrorCode {
        r.unwrap_err().code
    }

    #[test]
    fn parses_protocol_messages() {
        assert_eq!(
            parse_message(br#"{"type":"reset"}"#, 1024).unwrap(),
            Incoming::Reset(Map::new())
        );
        assert!(
            matches!(parse_message(br#"{"type":"reset","data":{"seed":1}}"#, 1024).unwrap(), Incoming::Reset(m) if m["seed"] == 1)
        );
        assert!(matches!(
            parse_message(br#"{"type":"step","data":{"action_type":"ocr"}}"#, 1024).unwrap(),
            Incoming::Step(_)
        ));
        assert_eq!(
            parse_message(br#"{"type":"state"}"#, 1024).unwrap(),
            Incoming::State
        );
        assert_eq!(
            parse_message(br#"{"type":"close"}"#, 1024).unwrap(),
            Incoming::Close
        );
    }

    #[test]
    fn rejects_malformed_messages_with_protocol_codes() {
        assert_eq!(
            code(parse_message(b"not json", 1024)),
            WsErrorCode::InvalidJson
        );
        assert_eq!(
            code(parse_message(b"[1,2]", 1024)),
            WsErrorCode::ValidationError
        );
        assert_eq!(
            code(parse_message(br#"{"data":{}}"#, 1024)),
            WsErrorCode::UnknownType
        );
        assert_eq!(
            code(parse_message(br#"{"type":"jump"}"#, 1024)),
            WsErrorCode::UnknownType
        );
        assert_eq!(
            code(parse_message(br#"{"type":7}"#, 1024)),
            WsErrorCode::UnknownType
        );
        assert_eq!(
            code(parse_message(br#"{"type":"step"}"#, 1024)),
            WsErrorCode::ValidationError
        );
        assert_eq!(
            code(parse_message(br#"{"type":"step","data":[1]}"#, 1024)),
            WsErrorCode::ValidationError
        );
        assert_eq!(
            code(parse_message(br#"{"type":"state","extra":1}"#, 1024)),
            WsErrorCode::ValidationError
        );
        assert_eq!(
            code(parse_message(br#"{"type":"state","data":{"x":1}}"#, 1024)),
            WsErrorCode::ValidationError
        );
        let big = format!(r#"{{"type":"state","pad":"{}"}}"#, "x".repeat(2000));
        let e = parse_message(big.as_bytes(), 1024).unwrap_err();
        assert_eq!(e.code, WsErrorCode::ValidationError);
        assert_eq!(e.to_message()["data"]["error"], "payload_too_large");
    }

    #[test]
    fn added_message_types_parse_only_where_the_environment_lists_them() {
        let msg = br#"{"type":"watchdog_credential"}"#;
        assert_eq!(
            parse_message_with(msg, 1024, &["watchdog_credential"]).unwrap(),
            Incoming::Extra("watchdog_credential".into(), Map::new())
        );
        // Elsewhere it is an unknown type, with OpenEnv's five types listed as before.
        let e = parse_message(msg, 1024).unwrap_err();
        assert_eq!(e.code, WsErrorCode::UnknownType);
        assert!(e
            .message
            .ends_with("(expected one of reset, step, state, close, mcp)"));
        let e = parse_message_with(
            br#"{"type":"watchdog_credential","data":[1]}"#,
            1024,
            &["watchdog_credential"],
        )
        .unwrap_err();
        assert_eq!(e.code, WsErrorCode::ValidationError);
    }

    #[test]
    fn error_messages_have_openenv_shape() {
        let m = WsError::from(ApiError::NotReset).to_message();
        assert_eq!(m["type"], "error");
        assert_eq!(m["data"]["code"], "EXECUTION_ERROR");
        assert_eq!(m["data"]["error"], "reset_required");
        assert!(m["data"]["message"].as_str().unwrap().contains("reset"));
    }

    #[test]
    fn config_from_lookup() {
        let c = WsConfig::from_lookup(|k| match k {
            ENV_MAX_SESSIONS => Some("8".into()),
            ENV_IDLE_SECS => Some("nope".into()),
            ENV_MAX_MESSAGE_BYTES => Some("0".into()),
            ENV_MAX_BUFFERED_BYTES => Some("4194304".into()),
            _ => None,
        });
        assert_eq!(c.max_sessions, 8);
        assert_eq!(c.max_buffered_bytes, 4 << 20);
        assert_eq!(c.idle_timeout, WsConfig::default().idle_timeout);
        assert_eq!(c.max_message_bytes, WsConfig::default().max_message_bytes);
        let rt = WsRuntime::new(c, crate::shutdown::Shutdown::new());
        assert_eq!(rt.active(), 0);
    }
}
