//! The watchdog over WebSocket (`GET /watchdog/ws`) and the watchdog credential.
//!
//! An analyst's session issues a watchdog credential: over `/ws` with the message
//! `{"type": "watchdog_credential"}`, over HTTP with `POST /watchdog/credential` (`X-Session-Id`).
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
use crate::protocol::SharedBackend;
use crate::sessions::SessionManager;
use crate::watchdog_role::{joint, observe, record};
use crate::ws::{WsError, WsErrorCode};
use crate::Shared;
use axum::extract::ws::{close_code, CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use ls_env::watchdog::VerdictKind;
use ls_env::Environment;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

/// Path of the watchdog socket.
pub const WATCHDOG_SOCKET: &str = "/watchdog/ws";
/// Failed `attach` attempts before the watchdog socket closes.
pub const MAX_ATTACH_ATTEMPTS: usize = 3;
/// Longest accepted credential.
const MAX_CREDENTIAL_CHARS: usize = 128;

/// Why a watchdog credential does not name an analyst's episode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CredentialError {
    /// Never issued (a guess, a session id, the admin key) or long gone.
    Unknown,
    /// Replaced by a newer credential of the same analyst.
    Revoked,
    /// The analyst's connection or session has closed.
    AnalystClosed,
}

impl From<CredentialError> for ApiError {
    /// The WebSocket's `attach` errors (`error: "forbidden"`).
    fn from(e: CredentialError) -> Self {
        ApiError::Forbidden(match e {
            CredentialError::Unknown | CredentialError::Revoked => "unknown or revoked watchdog credential: the analyst's session issues one (`{\"type\": \"watchdog_credential\"}` on /ws, or POST /watchdog/credential); its session id or the admin key is not a credential".into(),
            CredentialError::AnalystClosed => "the analyst's session behind this watchdog credential has closed".into(),
        })
    }
}

struct Held {
    /// Held weakly: a credential does not keep a closed session alive.
    env: Weak<Mutex<Environment>>,
    revoked: bool,
}

/// Live watchdog credentials: token → the analyst's environment. Each environment holds its
/// live credential and at most the one it revoked last (so a revoked one is named as such).
#[derive(Default)]
pub struct WatchdogCredentials {
    inner: Mutex<HashMap<String, Held>>,
}

impl WatchdogCredentials {
    /// A fresh credential for `env`; its live credential is revoked (the one revoked before is
    /// forgotten), and credentials of environments that are gone are dropped, so the map is
    /// bounded by twice the live sessions.
    pub fn issue(&self, env: &SharedBackend<Environment>) -> String {
        let token = SessionManager::<Environment>::new_id("wdc");
        let target = Arc::downgrade(env);
        let mut map = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        map.retain(|_, h| {
            h.env.strong_count() > 0 && !(h.revoked && Weak::ptr_eq(&h.env, &target))
        });
        for h in map.values_mut().filter(|h| Weak::ptr_eq(&h.env, &target)) {
            h.revoked = true;
        }
        map.insert(
            token.clone(),
            Held {
                env: target,
                revoked: false,
            },
        );
        token
    }

    /// The analyst's environment behind `token`.
    pub fn resolve(&self, token: &str) -> Result<SharedBackend<Environment>, CredentialError> {
        let map = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        match map.get(token) {
            None => Err(CredentialError::Unknown),
            Some(h) if h.revoked => Err(CredentialError::Revoked),
            Some(h) => h.env.upgrade().ok_or(CredentialError::AnalystClosed),
        }
    }

    /// Number of credentials held (live, last revoked, or not yet pruned).
    pub fn len(&self) -> usize {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The reply to the analyst's `watchdog_credential` message (and `POST /watchdog/credential`).
pub fn credential_reply(token: &str) -> Value {
    json!({"watchdog_credential": token, "socket": WATCHDOG_SOCKET})
}

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

fn invalid(msg: impl Into<String>) -> WsError {
    WsError::new(WsErrorCode::ValidationError, msg).with("error", json!("validation_error"))
}

/// Parse one watchdog message.
pub fn parse_watchdog_message(bytes: &[u8], limit: usize) -> Result<WatchdogMessage, WsError> {
    if bytes.len() > limit {
        return Err(invalid(format!(
            "message of {} bytes exceeds the {limit}-byte limit",
            bytes.len()
        )));
    }
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|e| WsError::new(WsErrorCode::InvalidJson, format!("Invalid JSON: {e}")))?;
    let Value::Object(mut obj) = value else {
        return Err(invalid("message must be a JSON object with a 'type' field"));
    };
    let ty = match obj.remove("type") {
        Some(Value::String(t)) => t,
        _ => {
            return Err(WsError::new(
                WsErrorCode::UnknownType,
                format!("message needs a string 'type' (one of {WATCHDOG_TYPES})"),
            ))
        }
    };
    if let Some(k) = obj.keys().find(|k| k.as_str() != "data") {
        return Err(invalid(format!(
            "unexpected field '{}' in a watchdog message",
            k.chars().take(64).collect::<String>()
        )));
    }
    let data = match obj.remove("data") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m,
        Some(_) => return Err(invalid("'data' must be an object")),
    };
    let text = |k: &str| match data.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(invalid(format!("'{k}' must be a string"))),
    };
    match ty.as_str() {
        "attach" => match text("credential")? {
            Some(c) if !c.trim().is_empty() && c.len() <= MAX_CREDENTIAL_CHARS => {
                Ok(WatchdogMessage::Attach(c.trim().to_owned()))
            }
            _ => Err(invalid(
                "attach needs data.credential: the watchdog credential the analyst's session issued",
            )),
        },
        "verdict" => {
            let (verdict, reason) = crate::watchdog_role::parse_verdict(&data)?;
            Ok(WatchdogMessage::Verdict(verdict, reason))
        }
        "observe" => Ok(WatchdogMessage::Observe),
        "joint" => Ok(WatchdogMessage::Joint),
        "close" => Ok(WatchdogMessage::Close),
        other => Err(WsError::new(
            WsErrorCode::UnknownType,
            format!(
                "Unknown message type: {} (expected one of {WATCHDOG_TYPES})",
                other.chars().take(64).collect::<String>()
            ),
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
    let ws = match ws {
        Ok(ws) => ws,
        Err(e) => {
            return ApiError::BadRequest(format!(
                "GET {WATCHDOG_SOCKET} requires a WebSocket upgrade ({e})"
            ))
            .into_response()
        }
    };
    let Some(client_slot) = s.ws.acquire_client(client.and_then(|c| c.0 .0)) else {
        return ApiError::TooManySessions(s.ws.config.max_sessions_per_client).into_response();
    };
    let Some(reservation) = s.ws.reserve_buffer() else {
        return ApiError::BufferBudgetExhausted {
            budget_bytes: s.ws.config.max_buffered_bytes,
            per_session_bytes: s.ws.config.hard_limit_bytes(),
        }
        .into_response();
    };
    let hard = s.ws.config.hard_limit_bytes();
    ws.max_message_size(hard)
        .max_frame_size(hard)
        .on_upgrade(move |socket| async move {
            let _client_slot = client_slot;
            let _reservation = reservation;
            session(s, socket).await
        })
}

async fn send(socket: &mut WebSocket, v: &Value) -> bool {
    socket
        .send(Message::Text(v.to_string().into()))
        .await
        .is_ok()
}

async fn close(socket: &mut WebSocket, code: u16, reason: &'static str) {
    let _ = socket
        .send(Message::Close(Some(CloseFrame {
            code,
            reason: reason.into(),
        })))
        .await;
}

/// One watchdog connection: counts against the WebSocket session slots and idle timeout.
async fn session(s: Shared, mut socket: WebSocket) {
    let rt = &s.ws;
    let cfg = rt.config;
    let _live = rt.shutdown.track();
    let Ok(_slot) = rt.slots.clone().try_acquire_owned() else {
        let err = WsError::new(
            WsErrorCode::CapacityReached,
            "Server at capacity: retry later",
        );
        let _ = send(&mut socket, &err.to_message()).await;
        close(&mut socket, close_code::AGAIN, "capacity reached").await;
        return;
    };
    let mut conn = WatchdogConn::default();
    loop {
        let received = tokio::select! {
            r = tokio::time::timeout(cfg.idle_timeout, socket.recv()) => r,
            () = rt.shutdown.triggered() => {
                close(&mut socket, close_code::AWAY, "server shutting down").await;
                return;
            }
        };
        let msg = match received {
            Err(_) => {
                close(&mut socket, close_code::AWAY, "idle timeout").await;
                return;
            }
            Ok(None) | Ok(Some(Err(_))) => return,
            Ok(Some(Ok(m))) => m,
        };
        let bytes: &[u8] = match &msg {
            Message::Text(t) => t.as_str().as_bytes(),
            Message::Binary(b) => b,
            Message::Ping(_) | Message::Pong(_) => continue,
            Message::Close(_) => return,
        };
        let answer = match parse_watchdog_message(bytes, cfg.max_message_bytes) {
            Ok(WatchdogMessage::Close) => {
                close(&mut socket, close_code::NORMAL, "closed by client").await;
                return;
            }
            Ok(m) => conn.answer(&s, m),
            Err(e) => Err(e),
        };
        let out = answer.unwrap_or_else(|e| e.to_message());
        if !send(&mut socket, &out).await {
            return;
        }
        if conn.locked_out() {
            close(
                &mut socket,
                close_code::POLICY,
                "too many failed attach attempts",
            )
            .await;
            return;
        }
    }
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

    #[test]
    fn credentials_are_tied_to_the_environment_and_revocable() {
        let creds = WatchdogCredentials::default();
        let pool = Arc::new(ls_env::CasePool::new(
            ls_core::FixtureSet::embedded().unwrap(),
        ));
        let env = Arc::new(Mutex::new(Environment::new(
            pool,
            ls_env::EnvConfig::default(),
        )));
        let first = creds.issue(&env);
        assert!(first.starts_with("wdc-") && first.len() > 30, "{first}");
        assert!(creds.resolve(&first).is_ok());
        let second = creds.issue(&env);
        assert_ne!(first, second);
        assert_eq!(creds.resolve(&first).err(), Some(CredentialError::Revoked));
        let e = ApiError::from(CredentialError::Revoked);
        assert!(e.to_string().contains("unknown or revoked"), "{e}");
        assert!(creds.resolve(&second).is_ok());
        // Only the last revoked credential is remembered as revoked.
        let third = creds.issue(&env);
        assert_eq!(creds.resolve(&first).err(), Some(CredentialError::Unknown));
        assert_eq!(creds.resolve(&second).err(), Some(CredentialError::Revoked));
        assert_eq!(creds.len(), 2);
        assert_eq!(
            creds.resolve("wdc-guess").err(),
            Some(CredentialError::Unknown)
        );
        drop(env);
        assert_eq!(
            creds.resolve(&third).err(),
            Some(CredentialError::AnalystClosed)
        );
        let e = ApiError::from(CredentialError::AnalystClosed);
        assert!(e.to_string().contains("has closed"), "{e}");
    }
}
