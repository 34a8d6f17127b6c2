//! Errors as the HTTP server reports them: the same status, code and message for the same
//! domain error, built here from the domain error types (this crate holds no HTTP types and does
//! not depend on the server). Python receives them as `ledgershield._native.EnvError` with
//! `args == (message, code, status, detail, field)` and the same five as attributes.

use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::PyErr;

create_exception!(
    _native,
    EnvError,
    PyValueError,
    "A request the environment refuses: args (and attributes) are (message, code, status, detail, \
     field): the message, code and HTTP status the server answers for the same request, its \
     `detail`, and for an audit error the field the server names in `error.field` (else None)."
);

/// Longest message an error carries (the server's bound).
pub const MAX_MESSAGE_CHARS: usize = 300;

/// One refused request.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub status: u16,
    pub code: &'static str,
    pub message: String,
    pub detail: String,
    /// The field an audit error names (the server's `error.field`); `None` for ControlBench.
    pub field: Option<String>,
}

fn bounded(s: &str) -> String {
    match s.char_indices().nth(MAX_MESSAGE_CHARS) {
        None => s.to_owned(),
        Some((i, _)) => format!("{}…", &s[..i]),
    }
}

impl Refusal {
    pub fn new(status: u16, code: &'static str, message: impl AsRef<str>) -> Self {
        let message = bounded(message.as_ref());
        Self {
            status,
            code,
            detail: message.clone(),
            message,
            field: None,
        }
    }

    /// A request of the wrong shape or type (HTTP 422).
    pub fn validation(message: impl AsRef<str>) -> Self {
        Self::new(422, "validation_error", message)
    }

    /// Text that is not JSON (HTTP 400).
    pub fn invalid_json(e: &serde_json::Error) -> Self {
        Self::new(
            400,
            "invalid_json",
            format!("request body is not valid JSON: {e}"),
        )
    }

    pub fn into_py(self, py: Python<'_>) -> PyErr {
        let err = EnvError::new_err((
            self.message.clone(),
            self.code,
            self.status,
            self.detail.clone(),
            self.field.clone(),
        ));
        let value = err.value(py);
        let set = || -> PyResult<()> {
            value.setattr("message", &self.message)?;
            value.setattr("code", self.code)?;
            value.setattr("status", self.status)?;
            value.setattr("detail", &self.detail)?;
            value.setattr("field", &self.field)
        };
        if let Err(e) = set() {
            return e;
        }
        err
    }
}

impl From<ls_env::EnvStepError> for Refusal {
    fn from(e: ls_env::EnvStepError) -> Self {
        use ls_env::{EnvStepError, StepError};
        match e {
            EnvStepError::NotReset => Self::new(
                409,
                "reset_required",
                "no episode is active in this session; call /reset first",
            ),
            EnvStepError::Step(StepError::EpisodeEnded(r)) => Self::new(
                409,
                "episode_ended",
                format!("the episode has ended; call /reset to start a new one ({r})"),
            ),
            EnvStepError::Step(StepError::Payload(p)) => Self::validation(p.to_string()),
            EnvStepError::Step(StepError::Submission(s)) => Self::validation(s.to_string()),
        }
    }
}

impl From<ls_env::ResetError> for Refusal {
    fn from(e: ls_env::ResetError) -> Self {
        Self::new(400, "bad_request", e.to_string())
    }
}

/// The HTTP status of an audit error's kind (as the server maps it).
fn audit_status(kind: audit_env::ErrorKind) -> u16 {
    use audit_env::ErrorKind as K;
    match kind {
        K::Invalid => 422,
        K::OutOfOrder => 400,
        K::NotFound => 404,
        K::Conflict => 409,
        K::Capacity => 503,
        K::TooLarge => 413,
        K::UnsupportedMediaType => 415,
        K::RateLimited => 429,
        K::Forbidden => 403,
        K::MethodNotAllowed => 405,
        K::Internal => 500,
    }
}

impl From<audit_env::AuditError> for Refusal {
    /// As the server answers it: `detail` is the message in both environments (the field the
    /// error names rides in the server's `error.field`).
    fn from(e: audit_env::AuditError) -> Self {
        let mut r = Self::new(audit_status(e.kind()), e.code(), e.to_string());
        r.field = Some(bounded(&e.detail()));
        r
    }
}

/// A Rust panic inside the environment, as a Python `RuntimeError`.
pub fn panic_error(payload: Box<dyn std::any::Any + Send>) -> PyErr {
    let what = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
    PyRuntimeError::new_err(format!(
        "internal error in the LedgerShield environment: {what}; the environment was discarded, call reset() to start afresh"
    ))
}
