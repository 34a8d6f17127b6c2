//! The one error type of the protocol layer. Every variant maps to a JSON 4xx/5xx body
//! `{"error": {"code", "message"}, "detail"}` — never a plain-text response or a panic.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("request body is not valid JSON: {0}")]
    InvalidJson(String),
    #[error("{0}")]
    Validation(String),
    #[error("request body exceeds the {limit_bytes}-byte limit")]
    PayloadTooLarge { limit_bytes: usize },
    #[error("no episode is active in this session; call /reset first")]
    NotReset,
    #[error("the episode has ended; call /reset to start a new one ({0})")]
    EpisodeEnded(String),
    #[error("unknown session '{0}'; call /reset with this session id to create it")]
    UnknownSession(String),
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    NotFound(String),
    #[error("session capacity reached ({0} active sessions); close idle sessions or retry later")]
    TooManySessions(usize),
    #[error("unsupported media type: send the body as application/json")]
    UnsupportedMediaType,
    #[error("internal error: {0}")]
    Internal(String),
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            Self::InvalidJson(_) | Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::Validation(_) => StatusCode::UNPROCESSABLE_ENTITY,
            Self::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::NotReset | Self::EpisodeEnded(_) => StatusCode::CONFLICT,
            Self::UnknownSession(_) | Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::TooManySessions(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidJson(_) => "invalid_json",
            Self::Validation(_) => "validation_error",
            Self::PayloadTooLarge { .. } => "payload_too_large",
            Self::NotReset => "reset_required",
            Self::EpisodeEnded(_) => "episode_ended",
            Self::UnknownSession(_) => "unknown_session",
            Self::BadRequest(_) => "bad_request",
            Self::NotFound(_) => "not_found",
            Self::TooManySessions(_) => "capacity_exhausted",
            Self::UnsupportedMediaType => "unsupported_media_type",
            Self::Internal(_) => "internal_error",
        }
    }

    pub fn body(&self) -> serde_json::Value {
        let message = self.to_string();
        json!({"error": {"code": self.code(), "message": message}, "detail": message})
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status(), axum::Json(self.body())).into_response()
    }
}

impl From<ls_env::EnvStepError> for ApiError {
    fn from(e: ls_env::EnvStepError) -> Self {
        use ls_env::{EnvStepError, StepError};
        match e {
            EnvStepError::NotReset => Self::NotReset,
            EnvStepError::Step(StepError::EpisodeEnded(r)) => Self::EpisodeEnded(r),
            EnvStepError::Step(StepError::Payload(p)) => Self::Validation(p.to_string()),
            EnvStepError::Step(StepError::Submission(s)) => Self::Validation(s.to_string()),
        }
    }
}

impl From<ls_env::ResetError> for ApiError {
    fn from(e: ls_env::ResetError) -> Self {
        Self::BadRequest(e.to_string())
    }
}
