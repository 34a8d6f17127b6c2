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
use crate::ws::{self, WsError, WsErrorCode};
use crate::ws_socket::Reply;
use crate::Shared;
use axum::extract::ws::{close_code, WebSocket, WebSocketUpgrade};
use axum::extract::State;
use axum::response::Response;
use ls_env::watchdog::VerdictKind;
use ls_env::Environment;
use serde_json::{json, Value};
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
    crate::ws_socket::upgrade(&s.ws, WATCHDOG_SOCKET, client, ws, move |socket| {
        session(owned, socket)
    })
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
async fn session(s: Shared, socket: WebSocket) {
    let mut conn = WatchdogConn::default();
    crate::ws_socket::serve(&s.ws, socket, || {
        Ok(|bytes: &[u8]| answer_frame(&s, &mut conn, bytes))
    })
    .await
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
