//! Request-body extraction: bounded while streaming (not only by Content-Length), parsed as JSON,
//! and every failure reported as an [`ApiError`] JSON body.

use crate::error::ApiError;
use axum::extract::{FromRequest, Request};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

/// Largest accepted request body.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// A JSON request body (any JSON value; handlers validate the shape).
pub struct JsonBody(pub Value);

impl<S: Send + Sync> FromRequest<S> for JsonBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let RawBody(bytes) = RawBody::from_request(req, state).await?;
        json_value(&bytes).map(JsonBody)
    }
}

/// A request body's bytes, read up to [`MAX_BODY_BYTES`] (bounded while streaming, not only by
/// Content-Length), for routes that parse their common shapes straight into typed requests.
pub struct RawBody(pub axum::body::Bytes);

impl<S: Send + Sync> FromRequest<S> for RawBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, _state: &S) -> Result<Self, Self::Rejection> {
        read_body(req, MAX_BODY_BYTES).await.map(RawBody)
    }
}

/// The one body reader of both environments: at most `limit` bytes (bounded while streaming,
/// not only by Content-Length), within the server's body timeout ([`crate::serve::TimedBody`]).
pub async fn read_body(req: Request, limit: usize) -> Result<axum::body::Bytes, ApiError> {
    read(req.into_body(), limit).await
}

/// Most bytes read and discarded past the limit before a 413 is answered ("lingering"), so a
/// client still writing an oversized body reads the 413 instead of a reset connection; bounded
/// here and in time by the body timeout.
pub const OVERSIZE_DRAIN_BYTES: usize = 8 * 1024 * 1024;

/// [`read_body`] for a body already taken from its request (`POST /mcp`).
pub async fn read(body: axum::body::Body, limit: usize) -> Result<axum::body::Bytes, ApiError> {
    use futures_util::StreamExt;
    let mut stream = body.into_data_stream();
    let mut buf = Vec::new();
    let mut seen: usize = 0;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| body_error(&e, limit))?;
        seen = seen.saturating_add(chunk.len());
        if seen > limit {
            // Too large: drain what the client is still sending (up to a bound), then refuse.
            while seen <= limit.saturating_add(OVERSIZE_DRAIN_BYTES) {
                match stream.next().await {
                    Some(Ok(c)) => seen = seen.saturating_add(c.len()),
                    Some(Err(_)) | None => break,
                }
            }
            return Err(ApiError::PayloadTooLarge { limit_bytes: limit });
        }
        buf.extend_from_slice(&chunk);
    }
    debug_assert!(buf.len() <= limit);
    Ok(buf.into())
}

/// A body stream's error: the body timeout, else (a broken or over-long body) too large.
fn body_error(e: &axum::Error, limit: usize) -> ApiError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if let Some(t) = err.downcast_ref::<crate::serve::BodyTimedOut>() {
            return ApiError::BodyTimeout(t.0);
        }
        source = err.source();
    }
    ApiError::PayloadTooLarge { limit_bytes: limit }
}

/// A body as a JSON value: empty (or whitespace only) is `null`; invalid JSON is
/// [`ApiError::InvalidJson`] with the parser's message.
pub fn json_value(bytes: &[u8]) -> Result<Value, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Null);
    }
    serde_json::from_slice(bytes).map_err(|e| ApiError::InvalidJson(e.to_string()))
}

/// Initial buffer for a reply. Step replies are 9–17 KB once a session has played a few cases
/// (the institutional-memory snapshot and portfolio context ride on every step); sized with
/// headroom so a reply never grows (growing reallocates and copies what was written so far).
pub const REPLY_CAPACITY_BYTES: usize = 32 * 1024;
/// Initial buffer for a terminal step reply, which carries the grading reports, TrustGraph and
/// memory snapshot twice (`info` and `last_tool_result`): 50–58 KB in a long session.
pub const TERMINAL_REPLY_CAPACITY_BYTES: usize = 96 * 1024;

/// A JSON reply serialized (by `ls_json`, byte-identical to `serde_json`) into one buffer sized
/// for an observation, instead of growing from a few bytes by doubling and copying (axum's `Json`
/// starts at 128 bytes).
pub struct JsonReply<T>(pub T);

impl<T: serde::Serialize> IntoResponse for JsonReply<T> {
    fn into_response(self) -> Response {
        reply(&self.0, REPLY_CAPACITY_BYTES)
    }
}

/// A reset or step reply: like [`JsonReply`], with a buffer that fits a terminal reply at once.
pub struct EnvelopeReply(pub ls_env::StepEnvelope);

impl IntoResponse for EnvelopeReply {
    fn into_response(self) -> Response {
        reply(
            &self.0,
            if self.0.done {
                TERMINAL_REPLY_CAPACITY_BYTES
            } else {
                REPLY_CAPACITY_BYTES
            },
        )
    }
}

fn reply<T: serde::Serialize>(value: &T, capacity_bytes: usize) -> Response {
    let mut buf = String::with_capacity(capacity_bytes);
    match ls_json::append_to_string(&mut buf, value) {
        Ok(()) => {
            // Built directly: a `(headers, bytes)` reply first sets an octet-stream content type
            // and then replaces it.
            let mut res = Response::new(axum::body::Body::from(buf.into_bytes()));
            res.headers_mut().insert(
                axum::http::header::CONTENT_TYPE,
                axum::http::HeaderValue::from_static("application/json"),
            );
            res
        }
        Err(e) => ApiError::Internal(format!("reply serialization failed: {e}")).into_response(),
    }
}
