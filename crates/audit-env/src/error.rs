//! One error type for the whole crate. It carries no HTTP types: [`AuditError::kind`] classifies
//! each error (invalid input, conflict with the current state, unknown id, capacity...) and the
//! protocol layer maps the kind to a status code.

use serde_json::json;

/// What kind of failure an [`AuditError`] is; the protocol layer maps it to its status code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The request is malformed or names an invalid value (HTTP 422).
    Invalid,
    /// A call out of order for a fresh or finished episode (HTTP 400).
    OutOfOrder,
    /// An id that names nothing (HTTP 404).
    NotFound,
    /// Valid, but conflicts with the current state (HTTP 409).
    Conflict,
    /// A bounded resource is full (HTTP 503).
    Capacity,
    /// The body is larger than the limit (HTTP 413).
    TooLarge,
    /// The body is not JSON by its content type (HTTP 415).
    UnsupportedMediaType,
    /// Too many requests (HTTP 429).
    RateLimited,
    /// An operator route without the key (HTTP 403).
    Forbidden,
    /// The method is not served on the route (HTTP 405).
    MethodNotAllowed,
    /// A bug (HTTP 500).
    Internal,
}

#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum AuditError {
    #[error("invalid request: {message}")]
    Invalid { field: String, message: String },
    #[error("unknown task_id '{0}'; valid: expense_audit, invoice_match, gst_reconciliation, fraud_detection (or 1-4)")]
    UnknownTask(String),
    #[error("environment not initialized: call /reset first")]
    NotInitialized,
    #[error("episode finished: call /reset to start a new episode")]
    EpisodeFinished,
    #[error("too many findings: maximum {max} per step, got {got}")]
    TooManyFindings { max: usize, got: usize },
    #[error("unknown {kind} '{id}'")]
    NotFound { kind: &'static str, id: String },
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    Dependency(String),
    /// An ordering rule that depends on campaign progress (the overseer before every
    /// specialist has finished): the request is valid but conflicts with the current state.
    #[error("{0}")]
    DependencyConflict(String),
    #[error("capacity reached: {0}")]
    Capacity(String),
    #[error("request body too large: limit is {limit_bytes} bytes")]
    BodyTooLarge { limit_bytes: usize },
    #[error("Content-Type application/json is required")]
    UnsupportedMediaType,
    #[error("rate limit exceeded: at most {per_min} requests per minute")]
    RateLimited { per_min: u32 },
    #[error("API key required for this endpoint (X-API-Key)")]
    Forbidden,
    /// A keyless request for held-out data the route would answer per submission.
    #[error("{0}")]
    HeldOut(String),
    #[error("route not found: {0}")]
    RouteNotFound(String),
    #[error("method not allowed")]
    MethodNotAllowed,
    #[error("internal error")]
    Internal,
}

impl AuditError {
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        AuditError::Invalid {
            field: field.into(),
            message: message.into(),
        }
    }

    pub fn kind(&self) -> ErrorKind {
        use AuditError::*;
        match self {
            Invalid { .. } | UnknownTask(_) | TooManyFindings { .. } => ErrorKind::Invalid,
            NotInitialized | EpisodeFinished | Dependency(_) => ErrorKind::OutOfOrder,
            NotFound { .. } | RouteNotFound(_) => ErrorKind::NotFound,
            Conflict(_) | DependencyConflict(_) => ErrorKind::Conflict,
            Capacity(_) => ErrorKind::Capacity,
            BodyTooLarge { .. } => ErrorKind::TooLarge,
            UnsupportedMediaType => ErrorKind::UnsupportedMediaType,
            RateLimited { .. } => ErrorKind::RateLimited,
            Forbidden | HeldOut(_) => ErrorKind::Forbidden,
            MethodNotAllowed => ErrorKind::MethodNotAllowed,
            Internal => ErrorKind::Internal,
        }
    }

    pub fn code(&self) -> &'static str {
        use AuditError::*;
        match self {
            Invalid { .. } => "invalid_request",
            UnknownTask(_) => "unknown_task",
            NotInitialized => "not_initialized",
            EpisodeFinished => "episode_finished",
            TooManyFindings { .. } => "too_many_findings",
            NotFound { .. } => "not_found",
            Conflict(_) => "conflict",
            Dependency(_) | DependencyConflict(_) => "dependency_violation",
            Capacity(_) => "capacity",
            BodyTooLarge { .. } => "body_too_large",
            UnsupportedMediaType => "unsupported_media_type",
            RateLimited { .. } => "rate_limited",
            Forbidden => "forbidden",
            HeldOut(_) => "held_out_seed",
            RouteNotFound(_) => "route_not_found",
            MethodNotAllowed => "method_not_allowed",
            Internal => "internal",
        }
    }

    /// The offending field (or a hint) for the `detail` member.
    pub fn detail(&self) -> String {
        match self {
            AuditError::Invalid { field, .. } => field.clone(),
            AuditError::UnknownTask(_) => "task_id".into(),
            AuditError::TooManyFindings { .. } => "findings".into(),
            AuditError::NotFound { kind, .. } => (*kind).into(),
            AuditError::NotInitialized | AuditError::EpisodeFinished => "call POST /reset".into(),
            other => other.to_string(),
        }
    }

    pub fn body(&self) -> serde_json::Value {
        json!({"error": {"code": self.code(), "message": self.to_string()}, "detail": self.detail()})
    }
}
