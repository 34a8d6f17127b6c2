//! The OpenEnv `error` reply shared by `/ws` and `/watchdog/ws`: openenv-core's error codes and
//! the mapping from this server's [`ApiError`].

use crate::error::ApiError;
use serde::Serialize;
use serde_json::{json, Map, Value};

/// openenv-core's `WSErrorCode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum WsErrorCode {
    InvalidJson,
    UnknownType,
    ValidationError,
    ExecutionError,
    CapacityReached,
    FactoryError,
    SessionError,
}

/// An `error` reply.
#[derive(Debug, Clone, PartialEq)]
pub struct WsError {
    pub code: WsErrorCode,
    pub message: String,
    /// Extra fields of `data` (e.g. `error`: this server's finer error code).
    pub extra: Map<String, Value>,
}

impl WsError {
    pub fn new(code: WsErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            extra: Map::new(),
        }
    }

    pub fn with(mut self, key: &str, value: Value) -> Self {
        self.extra.insert(key.to_owned(), value);
        self
    }

    /// The wire message `{"type": "error", "data": {...}}`.
    pub fn to_message(&self) -> Value {
        let mut data = Map::new();
        data.insert("message".into(), Value::String(self.message.clone()));
        data.insert(
            "code".into(),
            serde_json::to_value(self.code).unwrap_or(Value::Null),
        );
        for (k, v) in &self.extra {
            data.insert(k.clone(), v.clone());
        }
        json!({"type": "error", "data": data})
    }
}

impl From<ApiError> for WsError {
    fn from(e: ApiError) -> Self {
        let code = match &e {
            ApiError::InvalidJson(_) => WsErrorCode::InvalidJson,
            ApiError::Validation(_)
            | ApiError::BadRequest(_)
            | ApiError::PayloadTooLarge { .. }
            | ApiError::UnsupportedMediaType => WsErrorCode::ValidationError,
            ApiError::TooManySessions(_)
            | ApiError::Capacity(_)
            | ApiError::BufferBudgetExhausted { .. } => WsErrorCode::CapacityReached,
            ApiError::BodyTimeout(_)
            | ApiError::MethodNotAllowed(_)
            | ApiError::Forbidden(_)
            | ApiError::RateLimited { .. } => WsErrorCode::ValidationError,
            ApiError::Audit(a) => match a.kind() {
                audit_env::ErrorKind::Invalid
                | audit_env::ErrorKind::TooLarge
                | audit_env::ErrorKind::UnsupportedMediaType => WsErrorCode::ValidationError,
                audit_env::ErrorKind::Capacity => WsErrorCode::CapacityReached,
                _ => WsErrorCode::ExecutionError,
            },
            ApiError::NotReset
            | ApiError::EpisodeEnded(_)
            | ApiError::UnknownSession(_)
            | ApiError::NotFound(_)
            | ApiError::Conflict(_)
            | ApiError::BadGateway(_)
            | ApiError::DeadlineExceeded(_)
            | ApiError::Internal(_) => WsErrorCode::ExecutionError,
        };
        WsError::new(code, e.message()).with("error", Value::String(e.code().to_owned()))
    }
}
