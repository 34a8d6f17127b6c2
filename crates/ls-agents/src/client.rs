//! The environment interface agents play through: `reset` and `step`, nothing else. Two
//! implementations: in-process ([`LocalEnv`], an `ls_env::Environment`) and HTTP ([`HttpEnv`]).

use ls_env::{Environment, ResetRequest, StepEnvelope};
use serde_json::{Map, Value};
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("reset failed: {0}")]
    Reset(String),
    #[error("step failed: {0}")]
    Step(String),
    #[error("transport: {0}")]
    Transport(String),
}

/// What an agent may call. Observations are the only thing it ever sees.
pub trait EnvClient {
    fn reset(&mut self, req: &ResetRequest) -> Result<StepEnvelope, ClientError>;
    fn step(
        &mut self,
        action_type: &str,
        payload: &Map<String, Value>,
    ) -> Result<StepEnvelope, ClientError>;
    /// Public institutional-memory snapshot, when the client can read it.
    fn institutional_memory(&mut self) -> Option<Map<String, Value>> {
        None
    }
}

/// In-process environment.
pub struct LocalEnv<'a> {
    pub env: &'a mut Environment,
}

impl<'a> LocalEnv<'a> {
    pub fn new(env: &'a mut Environment) -> Self {
        Self { env }
    }
}

impl EnvClient for LocalEnv<'_> {
    fn reset(&mut self, req: &ResetRequest) -> Result<StepEnvelope, ClientError> {
        self.env
            .reset(req)
            .map_err(|e| ClientError::Reset(e.to_string()))
    }
    fn step(
        &mut self,
        action_type: &str,
        payload: &Map<String, Value>,
    ) -> Result<StepEnvelope, ClientError> {
        self.env
            .step(action_type, payload)
            .map_err(|e| ClientError::Step(e.to_string()))
    }
    fn institutional_memory(&mut self) -> Option<Map<String, Value>> {
        Some(self.env.memory.public_view())
    }
}

/// HTTP environment (`POST /reset`, `POST /step`) with its own session id.
pub struct HttpEnv {
    base: String,
    session: String,
    http: reqwest::blocking::Client,
}

/// Largest response body accepted from an environment server.
pub const MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;

impl HttpEnv {
    pub fn new(base_url: &str, session: &str, timeout: Duration) -> Result<Self, ClientError> {
        let http = reqwest::blocking::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|e| ClientError::Transport(e.to_string()))?;
        Ok(Self {
            base: base_url.trim_end_matches('/').to_owned(),
            session: session.to_owned(),
            http,
        })
    }

    fn post(&self, path: &str, body: &Value) -> Result<Value, String> {
        let resp = self
            .http
            .post(format!("{}{path}", self.base))
            .header("x-session-id", &self.session)
            .json(body)
            .send()
            .map_err(|e| e.to_string())?;
        read_json(resp)
    }
}

fn read_json(resp: reqwest::blocking::Response) -> Result<Value, String> {
    let status = resp.status();
    let bytes = resp.bytes().map_err(|e| e.to_string())?;
    if bytes.len() > MAX_RESPONSE_BYTES {
        return Err(format!("response larger than {MAX_RESPONSE_BYTES} bytes"));
    }
    let v: Value =
        serde_json::from_slice(&bytes).map_err(|e| format!("invalid JSON ({status}): {e}"))?;
    if !status.is_success() {
        let msg = v
            .get("error")
            .and_then(|e| e.get("message").or(Some(e)))
            .map(|m| m.to_string())
            .unwrap_or_else(|| v.to_string());
        return Err(format!(
            "HTTP {status}: {}",
            msg.chars().take(300).collect::<String>()
        ));
    }
    Ok(v)
}

impl EnvClient for HttpEnv {
    fn reset(&mut self, req: &ResetRequest) -> Result<StepEnvelope, ClientError> {
        let body = serde_json::to_value(req).map_err(|e| ClientError::Reset(e.to_string()))?;
        let v = self.post("/reset", &body).map_err(ClientError::Reset)?;
        serde_json::from_value(v)
            .map_err(|e| ClientError::Reset(format!("unexpected envelope: {e}")))
    }
    fn step(
        &mut self,
        action_type: &str,
        payload: &Map<String, Value>,
    ) -> Result<StepEnvelope, ClientError> {
        let body = serde_json::json!({"action_type": action_type, "payload": payload});
        let v = self.post("/step", &body).map_err(ClientError::Step)?;
        serde_json::from_value(v)
            .map_err(|e| ClientError::Step(format!("unexpected envelope: {e}")))
    }
    fn institutional_memory(&mut self) -> Option<Map<String, Value>> {
        let resp = self
            .http
            .get(format!("{}/institutional-memory", self.base))
            .header("x-session-id", &self.session)
            .send()
            .ok()?;
        match read_json(resp).ok()? {
            Value::Object(m) => Some(m),
            _ => None,
        }
    }
}

/// The step's tool result read into its declared reply type (`ls_core::replies`), once, from
/// its JSON text (amounts keep their exact digits); `None` when it is not that type (a failed
/// call, or another tool's reply).
pub fn tool_reply<T: serde::de::DeserializeOwned>(env: &StepEnvelope) -> Option<T> {
    let text = serde_json::to_string(&env.observation.last_tool_result).ok()?;
    serde_json::from_str(&text).ok()
}

/// A typed payload (an `ls_core::draft`) as the JSON object an action carries.
pub fn outbound_payload<T: serde::Serialize>(draft: &T) -> Map<String, Value> {
    match serde_json::to_value(draft) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    }
}
