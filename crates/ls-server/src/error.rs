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
    /// The request conflicts with the state of what it names (a sealed run already scored, a
    /// case already played).
    #[error("{0}")]
    Conflict(String),
    #[error("session capacity reached ({0} active sessions); close idle sessions or retry later")]
    TooManySessions(usize),
    /// A counted resource (connections, WebSocket sessions) refused to this client: the message
    /// says which share it holds.
    #[error("{0}; retry later")]
    Capacity(String),
    #[error("WebSocket buffer budget exhausted: open sessions hold the server's {budget_bytes} bytes ({per_session_bytes} each, LEDGERSHIELD_WS_MAX_BUFFERED_BYTES); retry later")]
    BufferBudgetExhausted {
        budget_bytes: usize,
        per_session_bytes: usize,
    },
    #[error("unsupported media type: send the body as application/json")]
    UnsupportedMediaType,
    #[error("internal error: {0}")]
    Internal(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("rate limit exceeded: at most {per_min} requests per minute per {scope}; retry after {retry_after_secs} s")]
    RateLimited {
        per_min: u32,
        scope: &'static str,
        retry_after_secs: u64,
    },
    #[error("the request body did not arrive within {0} s")]
    BodyTimeout(u64),
    /// Work the request started did not finish within its deadline.
    #[error("{0}")]
    DeadlineExceeded(String),
    #[error("{0}")]
    MethodNotAllowed(String),
    /// An upstream service the request named (an agent run's model endpoint) gave no usable
    /// answer.
    #[error("{0}")]
    BadGateway(String),
    /// A Financial Audit domain error: status by its kind, its own code and `detail`.
    #[error("{0}")]
    Audit(#[from] audit_env::AuditError),
}

/// Longest message an error reply carries: enough to name the problem, never the whole input.
pub const MAX_MESSAGE_CHARS: usize = 300;
/// Longest quote of client input inside a message.
pub const MAX_QUOTE_CHARS: usize = 64;

/// At most [`MAX_QUOTE_CHARS`] characters of client input, marked when cut.
pub fn prefix(s: &str) -> String {
    bounded(s, MAX_QUOTE_CHARS)
}

fn bounded(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        None => s.to_owned(),
        Some((i, _)) => format!("{}…", &s[..i]),
    }
}

/// The HTTP status of an audit error's kind.
pub fn audit_status(kind: audit_env::ErrorKind) -> StatusCode {
    use audit_env::ErrorKind as K;
    match kind {
        K::Invalid => StatusCode::UNPROCESSABLE_ENTITY,
        K::OutOfOrder => StatusCode::BAD_REQUEST,
        K::NotFound => StatusCode::NOT_FOUND,
        K::Conflict => StatusCode::CONFLICT,
        K::Capacity => StatusCode::SERVICE_UNAVAILABLE,
        K::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        K::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
        K::RateLimited => StatusCode::TOO_MANY_REQUESTS,
        K::Forbidden => StatusCode::FORBIDDEN,
        K::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
        K::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            Self::InvalidJson(_) | Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::Validation(_) => StatusCode::UNPROCESSABLE_ENTITY,
            Self::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::NotReset | Self::EpisodeEnded(_) | Self::Conflict(_) => StatusCode::CONFLICT,
            Self::UnknownSession(_) | Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::TooManySessions(_) | Self::Capacity(_) | Self::BufferBudgetExhausted { .. } => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            Self::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::BodyTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            Self::DeadlineExceeded(_) => StatusCode::GATEWAY_TIMEOUT,
            Self::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            Self::BadGateway(_) => StatusCode::BAD_GATEWAY,
            Self::Audit(e) => audit_status(e.kind()),
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
            Self::Conflict(_) => "conflict",
            Self::TooManySessions(_) | Self::Capacity(_) | Self::BufferBudgetExhausted { .. } => {
                "capacity_exhausted"
            }
            Self::UnsupportedMediaType => "unsupported_media_type",
            Self::Internal(_) => "internal_error",
            Self::Forbidden(_) => "forbidden",
            Self::RateLimited { .. } => "rate_limited",
            Self::BodyTimeout(_) => "request_timeout",
            Self::DeadlineExceeded(_) => "deadline_exceeded",
            Self::MethodNotAllowed(_) => "method_not_allowed",
            Self::BadGateway(_) => "upstream_failed",
            Self::Audit(e) => e.code(),
        }
    }

    /// The reply body; the message (and an audit error's `detail`) is bounded to
    /// [`MAX_MESSAGE_CHARS`], so no reply echoes more than a short prefix of its input.
    /// The message, bounded to [`MAX_MESSAGE_CHARS`].
    pub fn message(&self) -> String {
        bounded(&self.to_string(), MAX_MESSAGE_CHARS)
    }

    /// `detail` is the message in both environments (what the reference's clients print); an
    /// audit error also names its field in `error.field`.
    pub fn body(&self) -> serde_json::Value {
        let message = self.message();
        match self {
            Self::Audit(e) => json!({"error": {"code": self.code(), "message": message,
                "field": bounded(&e.detail(), MAX_MESSAGE_CHARS)}, "detail": message}),
            _ => json!({"error": {"code": self.code(), "message": message}, "detail": message}),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let retry = match &self {
            Self::RateLimited {
                retry_after_secs, ..
            } => Some(*retry_after_secs),
            _ => None,
        };
        let mut res = (self.status(), axum::Json(self.body())).into_response();
        if let Some(secs) = retry {
            res.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from(secs.max(1)),
            );
        }
        res
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_quote_only_a_prefix() {
        let huge = "x".repeat(100_000);
        let body = ApiError::InvalidJson(format!("invalid type: string \"{huge}\"")).body();
        assert!(
            body.to_string().len() < 2 * MAX_MESSAGE_CHARS + 200,
            "{}",
            body.to_string().len()
        );
        assert_eq!(prefix("abc"), "abc");
        assert_eq!(
            prefix(&"é".repeat(100)).chars().count(),
            MAX_QUOTE_CHARS + 1
        );
    }

    #[test]
    fn audit_errors_keep_their_kind() {
        let conflict = ApiError::from(audit_env::AuditError::Conflict("campaign finished".into()));
        assert_eq!(
            (conflict.status(), conflict.code()),
            (StatusCode::CONFLICT, "conflict")
        );
        let missing = ApiError::from(audit_env::AuditError::NotFound {
            kind: "campaign_id",
            id: "c".into(),
        });
        let body = missing.body();
        assert_eq!(body["error"]["field"], "campaign_id");
        assert_eq!(
            body["detail"], body["error"]["message"],
            "detail is the message"
        );
        let limited = ApiError::RateLimited {
            per_min: 1,
            scope: "client",
            retry_after_secs: 7,
        }
        .into_response();
        assert_eq!(limited.headers()["retry-after"], "7");
    }
}
