//! What both WebSocket endpoints (`/ws`, `/watchdog/ws`) share, written once: admission at the
//! upgrade (the client's share of sessions, the buffer budget, the frame size caps), the session
//! slot, and the receive loop (idle deadline, shutdown, transport errors, control frames) that
//! hands each data frame to the endpoint's handler and sends what it answers.

use crate::capacity::Slot;
use crate::error::ApiError;
use crate::ws_config::{WsRefusal, WsRuntime};
use crate::ws_error::{WsError, WsErrorCode};
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{close_code, CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use std::future::Future;

/// What a handler answers to one data frame.
pub enum Reply {
    /// Send this text; the connection stays open.
    Text(String),
    /// Close with this code and reason.
    Close(u16, &'static str),
    /// Send this text, then close.
    TextThenClose(String, u16, &'static str),
}

/// A session's admission: its slot, or `None` when every slot was taken at the upgrade (the
/// session then only says so, see [`serve`]). The slot is given back when the session ends.
pub struct Admission(Option<Slot>);

/// Admit a WebSocket upgrade on `path` under `rt`'s limits, then run `run` on the socket. A
/// request without an upgrade is a 400; past the client's share of sessions, or past the
/// buffer budget, a 503 (the guard adds `Connection: close`).
pub fn upgrade<F, Fut>(
    rt: &WsRuntime,
    path: &str,
    client: Option<axum::Extension<crate::security::ClientAddr>>,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
    run: F,
) -> Response
where
    F: FnOnce(WebSocket, Admission) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let ws = match ws {
        Ok(ws) => ws,
        Err(e) => {
            return ApiError::BadRequest(format!("GET {path} requires a WebSocket upgrade ({e})"))
                .into_response()
        }
    };
    let slot = match rt.acquire(crate::security::client_key(client.as_ref())) {
        Ok(slot) => Some(slot),
        Err(WsRefusal::Http(e)) => return e.into_response(),
        Err(WsRefusal::Full) => None,
    };
    let hard = rt.config.hard_limit_bytes();
    ws.max_message_size(hard)
        .max_frame_size(hard)
        .on_upgrade(move |socket| run(socket, Admission(slot)))
}

pub async fn send_json(socket: &mut WebSocket, v: &Value) -> bool {
    send_text(socket, v.to_string()).await
}

pub async fn send_text(socket: &mut WebSocket, text: String) -> bool {
    socket.send(Message::Text(text.into())).await.is_ok()
}

pub async fn close(socket: &mut WebSocket, code: u16, reason: &'static str) {
    let _ = socket
        .send(Message::Close(Some(CloseFrame {
            code,
            reason: reason.into(),
        })))
        .await;
}

/// One session under `rt`: without a slot (every one was taken at the upgrade) it answers a
/// `CAPACITY_REACHED` error and closes 1013; else it builds its handler with `open` (an `Err` is
/// sent as an error message before close 1011), then answers each data frame with the handler
/// until the client closes, the idle timeout passes (only data frames count as activity: a ping
/// does not keep a session open), a frame breaks the transport (close 1009) or the server shuts
/// down (close 1001).
pub async fn serve<H>(
    rt: &WsRuntime,
    mut socket: WebSocket,
    admission: Admission,
    open: impl FnOnce() -> Result<H, Value>,
) where
    H: FnMut(&[u8]) -> Reply,
{
    let cfg = rt.config;
    let _live = rt.shutdown.track();
    let Admission(Some(_slot)) = admission else {
        let err = WsError::new(
            WsErrorCode::CapacityReached,
            format!(
                "Server at capacity: {} WebSocket sessions are open; retry later",
                rt.slots.limits().capacity
            ),
        )
        .with("active_sessions", json!(rt.active()))
        .with("max_sessions", json!(rt.slots.limits().capacity));
        let _ = send_json(&mut socket, &err.to_message()).await;
        close(&mut socket, close_code::AGAIN, "capacity reached").await;
        return;
    };
    let mut handler = match open() {
        Ok(h) => h,
        Err(message) => {
            let _ = send_json(&mut socket, &message).await;
            close(&mut socket, close_code::ERROR, "environment unavailable").await;
            return;
        }
    };
    let mut deadline = tokio::time::Instant::now() + cfg.idle_timeout;
    loop {
        let received = tokio::select! {
            r = tokio::time::timeout_at(deadline, socket.recv()) => r,
            () = rt.shutdown.triggered() => {
                close(&mut socket, close_code::AWAY, "server shutting down").await;
                return;
            }
        };
        let msg = match received {
            Err(_) => {
                let err = WsError::new(
                    WsErrorCode::SessionError,
                    format!(
                        "session closed after {} s without a message",
                        cfg.idle_timeout.as_secs()
                    ),
                )
                .with("error", json!("idle_timeout"));
                let _ = send_json(&mut socket, &err.to_message()).await;
                close(&mut socket, close_code::AWAY, "idle timeout").await;
                return;
            }
            Ok(None) => return,
            Ok(Some(Err(e))) => {
                // Transport-level failure (e.g. a frame above the hard cap): the stream is unusable.
                tracing::debug!(error = %e, "websocket receive failed");
                close(
                    &mut socket,
                    close_code::SIZE,
                    "message too large or malformed frame",
                )
                .await;
                return;
            }
            Ok(Some(Ok(m))) => m,
        };
        let bytes: &[u8] = match &msg {
            Message::Text(t) => t.as_str().as_bytes(),
            Message::Binary(b) => b,
            Message::Ping(_) | Message::Pong(_) => continue,
            Message::Close(_) => return,
        };
        deadline = tokio::time::Instant::now() + cfg.idle_timeout;
        let (text, closing) = match handler(bytes) {
            Reply::Text(t) => (Some(t), None),
            Reply::Close(code, reason) => (None, Some((code, reason))),
            Reply::TextThenClose(t, code, reason) => (Some(t), Some((code, reason))),
        };
        if let Some(t) = text {
            if !send_text(&mut socket, t).await {
                return;
            }
        }
        if let Some((code, reason)) = closing {
            close(&mut socket, code, reason).await;
            return;
        }
    }
}
