//! Request-body extraction: bounded while streaming (not only by Content-Length), parsed as JSON,
//! and every failure reported as an [`ApiError`] JSON body.

use crate::error::ApiError;
use axum::extract::{FromRequest, Request};
use serde_json::Value;

/// Largest accepted request body.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// A JSON request body (any JSON value; handlers validate the shape).
pub struct JsonBody(pub Value);

impl<S: Send + Sync> FromRequest<S> for JsonBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, _state: &S) -> Result<Self, Self::Rejection> {
        let bytes = axum::body::to_bytes(req.into_body(), MAX_BODY_BYTES)
            .await
            .map_err(|_| ApiError::PayloadTooLarge { limit_bytes: MAX_BODY_BYTES })?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(JsonBody(Value::Null));
        }
        serde_json::from_slice(&bytes).map(JsonBody).map_err(|e| ApiError::InvalidJson(e.to_string()))
    }
}
