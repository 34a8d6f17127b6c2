//! The watchdog over WebSocket (`GET /watchdog/ws`), and the watchdog routes as one table (the
//! HTTP ones of [`crate::watchdog_role`] plus the socket).
//!
//! The harness is issued a watchdog credential for the analyst's session (`POST /watchdog/pair`,
//! or with the operator key `POST /watchdog/credential` or the message
//! `{"type": "watchdog_credential"}` on a `/ws` socket opened with the key).
//! A second agent opens `/watchdog/ws`, attaches with that credential and then, on the analyst's
//! current episode, reads the filtered watchdog stream, issues verdicts and reads the joint
//! analyst + watchdog score, exactly as the HTTP watchdog routes do. The credential is a random
//! token from the OS random source, tied to the analyst's environment (not to its session id):
//! neither the session id nor the admin key attaches a watchdog, and a credential dies with the
//! analyst's connection or session. Issuing a new one revokes the previous one.
//!
//! Watchdog messages: `attach {credential}`, `observe`, `verdict {verdict, reason}`, `joint`,
//! `close`. Replies: `attached`, `watchdog_observation`, `verdict`, `joint`, and OpenEnv-shaped
//! `error` messages (`{"type": "error", "data": {"message", "code", "error"}}`).

use crate::error::ApiError;
use crate::route_table::{ApiRoutes, RouteDoc};
use crate::watchdog_credential::WATCHDOG_SOCKET;
use crate::watchdog_role::{joint, observe, record};
use crate::ws;
use crate::ws_error::{WsError, WsErrorCode};
use crate::ws_socket::Reply;
use crate::Shared;
use axum::extract::ws::{close_code, WebSocket, WebSocketUpgrade};
use axum::extract::State;
use axum::response::Response;
use ls_env::watchdog::VerdictKind;
use ls_env::Environment;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex, Weak};

/// Failed `attach` attempts before the watchdog socket closes.
pub const MAX_ATTACH_ATTEMPTS: usize = 3;
/// Longest accepted credential.
const MAX_CREDENTIAL_CHARS: usize = 128;

/// A parsed watchdog message.
#[derive(Debug, Clone, PartialEq)]
pub enum WatchdogMessage {
    Attach(String),
    Observe,
    Verdict(VerdictKind, String),
    Joint,
    Close,
}

const WATCHDOG_TYPES: &str = "attach, observe, verdict, joint, close";

/// Parse one watchdog message (its envelope checked as on `/ws`).
pub fn parse_watchdog_message(bytes: &[u8], limit: usize) -> Result<WatchdogMessage, WsError> {
    let (ty, data) = ws::parse_envelope(bytes, limit, WATCHDOG_TYPES)?;
    let data = ws::data_object(&ty, data, false)?;
    match ty.as_str() {
        "attach" => match data.get("credential").and_then(Value::as_str).map(str::trim) {
            Some(c) if !c.is_empty() && c.len() <= MAX_CREDENTIAL_CHARS => {
                Ok(WatchdogMessage::Attach(c.to_owned()))
            }
            _ => Err(ApiError::Validation(
                "attach needs data.credential (a string): the watchdog credential the analyst's session issued".into(),
            )
            .into()),
        },
        "verdict" => {
            let (verdict, reason) = crate::watchdog_role::parse_verdict(&data)?;
            Ok(WatchdogMessage::Verdict(verdict, reason))
        }
        "observe" => Ok(WatchdogMessage::Observe),
        "joint" => Ok(WatchdogMessage::Joint),
        "close" => Ok(WatchdogMessage::Close),
        other => Err(ws::unknown_type(
            other,
            format!("expected one of {WATCHDOG_TYPES}"),
        )),
    }
}

fn reply(kind: &str, data: Value) -> Value {
    json!({"type": kind, "data": data})
}

/// A watchdog connection: attached to an analyst's environment or not yet.
#[derive(Default)]
pub struct WatchdogConn {
    /// Held weakly: the analyst's environment goes when its connection or session does.
    attached: Option<Weak<Mutex<Environment>>>,
    failed_attaches: usize,
}

impl WatchdogConn {
    /// Answer one message; `Err` carries an error reply.
    pub fn answer(&mut self, s: &crate::AppState, msg: WatchdogMessage) -> Result<Value, WsError> {
        if let WatchdogMessage::Attach(token) = msg {
            return match s.watchdog.resolve(&token).map_err(ApiError::from) {
                Ok(env) => {
                    let active = crate::ws::lock_backend(&env).episode_mut().is_some();
                    self.attached = Some(Arc::downgrade(&env));
                    Ok(reply("attached", json!({"episode_active": active})))
                }
                Err(e) => {
                    self.failed_attaches += 1;
                    Err(WsError::from(e).with(
                        "attempts_left",
                        json!(MAX_ATTACH_ATTEMPTS.saturating_sub(self.failed_attaches)),
                    ))
                }
            };
        }
        let weak = self.attached.as_ref().ok_or_else(|| {
            WsError::new(
                WsErrorCode::SessionError,
                "attach first: {\"type\": \"attach\", \"data\": {\"credential\": ...}}",
            )
            .with("error", json!("not_attached"))
        })?;
        let env = &weak.upgrade().ok_or_else(|| {
            WsError::new(
                WsErrorCode::SessionError,
                "the analyst's session this watchdog watched has closed",
            )
            .with("error", json!("analyst_gone"))
        })?;
        let result = match msg {
            WatchdogMessage::Observe => observe(env).map(|o| reply("watchdog_observation", o)),
            WatchdogMessage::Verdict(v, reason) => {
                record(env, v, &reason).map(|r| reply("verdict", r))
            }
            WatchdogMessage::Joint => joint(env).map(|j| reply("joint", j)),
            WatchdogMessage::Attach(_) | WatchdogMessage::Close => Ok(Value::Null),
        };
        result.map_err(WsError::from)
    }

    /// Whether the connection spent its attach attempts.
    pub fn locked_out(&self) -> bool {
        self.attached.is_none() && self.failed_attaches >= MAX_ATTACH_ATTEMPTS
    }
}

/// `GET /watchdog/ws`.
pub async fn watchdog_socket(
    State(s): State<Shared>,
    client: Option<axum::Extension<crate::security::ClientAddr>>,
    ws: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Response {
    let owned = s.clone();
    crate::ws_socket::upgrade(
        &s.ws,
        WATCHDOG_SOCKET,
        client,
        ws,
        move |socket, admission| session(owned, socket, admission),
    )
}

/// Answer one data frame of a watchdog connection.
fn answer_frame(s: &crate::AppState, conn: &mut WatchdogConn, bytes: &[u8]) -> Reply {
    let answer = match parse_watchdog_message(bytes, s.ws.config.max_message_bytes) {
        Ok(WatchdogMessage::Close) => return Reply::Close(close_code::NORMAL, "closed by client"),
        Ok(m) => conn.answer(s, m),
        Err(e) => Err(e),
    };
    let out = answer.unwrap_or_else(|e| e.to_message()).to_string();
    if conn.locked_out() {
        Reply::TextThenClose(out, close_code::POLICY, "too many failed attach attempts")
    } else {
        Reply::Text(out)
    }
}

/// One watchdog connection: counts against the WebSocket session slots and idle timeout.
async fn session(s: Shared, socket: WebSocket, admission: crate::ws_socket::Admission) {
    let mut conn = WatchdogConn::default();
    crate::ws_socket::serve(&s.ws, socket, admission, || {
        Ok(|bytes: &[u8]| answer_frame(&s, &mut conn, bytes))
    })
    .await
}

/// The watchdog routes: the HTTP role of [`crate::watchdog_role`] and `GET /watchdog/ws`.
pub fn routes() -> ApiRoutes<Shared> {
    crate::watchdog_role::routes().get(
        WATCHDOG_SOCKET,
        RouteDoc::new("episode", "The watchdog role over WebSocket")
            .describe("Upgrade to a WebSocket. `{\"type\":\"attach\",\"data\":{\"credential\":...}}` first (the credential the harness got from `POST /watchdog/pair`, or with the operator key from `POST /watchdog/credential` or the `watchdog_credential` message on a `/ws` socket opened with the key; three wrong ones close the socket), then `observe`, `verdict` (`{verdict, reason}`), `joint`, `close`. Replies `attached`, `watchdog_observation`, `verdict`, `joint`, `error`.")
            .status(101, "application/json", None, "Switching protocols to a watchdog session"),
        watchdog_socket,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_watchdog_messages_and_names_bad_ones() {
        let p = |s: &str| parse_watchdog_message(s.as_bytes(), 4096);
        assert_eq!(
            p(r#"{"type":"attach","data":{"credential":"wdc-1"}}"#).unwrap(),
            WatchdogMessage::Attach("wdc-1".into())
        );
        assert_eq!(
            p(r#"{"type":"verdict","data":{"verdict":"veto","reason":"r"}}"#).unwrap(),
            WatchdogMessage::Verdict(VerdictKind::Veto, "r".into())
        );
        assert_eq!(
            p(r#"{"type":"observe"}"#).unwrap(),
            WatchdogMessage::Observe
        );
        let e = p(r#"{"type":"attach"}"#).unwrap_err();
        assert!(e.message.contains("credential"), "{}", e.message);
        let e = p(r#"{"type":"verdict","data":{"verdict":"pay"}}"#).unwrap_err();
        assert!(e.message.contains("veto, escalate, warn, approve"));
        let e = p(r#"{"type":"step"}"#).unwrap_err();
        assert_eq!(e.code, WsErrorCode::UnknownType);
        assert_eq!(p("nope").unwrap_err().code, WsErrorCode::InvalidJson);
        assert!(p(&format!(
            r#"{{"type":"observe","x":"{}"}}"#,
            "y".repeat(5000)
        ))
        .is_err());
    }
}
