//! The OpenEnv traits an environment implements to be served, and the discovery data they
//! return. Depends on nothing of the handlers, so the handlers (`ws`, `ws_mcp`, `discovery`) and
//! the environment adapters (`controlbench_openenv`, `audit`) all depend on it and not on each
//! other.

use crate::error::ApiError;
use crate::sessions::SessionManager;
use crate::ws_config::WsRuntime;
use ls_json::RawJson;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Map, Value};

/// `GET /metadata` (openenv-core's `EnvironmentMetadata`).
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct EnvironmentMetadata {
    pub name: String,
    pub description: String,
    pub readme_content: Option<String>,
    pub version: Option<String>,
    pub author: Option<String>,
    pub documentation_url: Option<String>,
}

/// `GET /schema` (openenv-core's `SchemaResponse`).
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "SchemaResponse")]
pub struct EnvironmentSchemas {
    /// JSON Schema (2020-12) of an action (the `/step` body).
    pub action: Value,
    /// JSON Schema of an observation.
    pub observation: Value,
    /// JSON Schema of the public state (`/state`).
    pub state: Value,
}

/// An MCP tool.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    #[serde(rename = "inputSchema")]
    pub input_schema: Value,
}

/// One session's environment as the OpenEnv layer drives it. Replies are the JSON `data` of
/// OpenEnv `observation` / `state` messages; errors are [`ApiError`]s (mapped to protocol codes).
/// Observations come back as JSON text serialized once (`RawJson`), so a WebSocket reply wraps
/// them without building and re-serializing a `Value` tree.
pub trait OpenEnvBackend: Send + 'static {
    /// Start an episode. `data` is the reset message's `data` object (may be empty).
    fn reset(&mut self, data: Map<String, Value>) -> Result<RawJson, ApiError>;
    /// Take one action. `action` is the step message's `data` object.
    fn step(&mut self, action: Map<String, Value>) -> Result<RawJson, ApiError>;
    /// The public state, or `None` before the first reset.
    fn state(&self) -> Option<Value>;
    /// MCP `tools/call`: by default one step with `{action_type: name, payload: arguments}`.
    fn call_tool(
        &mut self,
        name: &str,
        arguments: Map<String, Value>,
    ) -> Result<RawJson, ApiError> {
        let mut action = Map::new();
        action.insert("action_type".into(), Value::String(name.to_owned()));
        action.insert("payload".into(), Value::Object(arguments));
        self.step(action)
    }
}

/// The shared state of a server that serves one environment over the OpenEnv protocol.
pub trait OpenEnvService: Send + Sync + 'static {
    type Backend: OpenEnvBackend;
    /// A fresh, isolated environment for a new session.
    fn new_backend(&self) -> Result<Self::Backend, ApiError>;
    /// WebSocket limits and the live-connection counter.
    fn ws_runtime(&self) -> &WsRuntime;
    /// Named sessions shared with the HTTP API (`X-Session-Id`); MCP over HTTP uses them too.
    fn sessions(&self) -> &SessionManager<Self::Backend>;
    /// The state reported before any reset.
    fn initial_state(&self) -> Value;
    /// `GET /metadata`.
    fn metadata(&self) -> EnvironmentMetadata;
    /// `GET /schema`.
    fn schemas(&self) -> EnvironmentSchemas;
    /// The MCP tools (one per action).
    fn tools(&self) -> Vec<ToolSpec>;
    /// WebSocket message types this environment adds to OpenEnv's (none by default).
    fn extra_message_types(&self) -> &'static [&'static str] {
        &[]
    }
    /// Answer an added message type on a connection whose environment is `backend`: the
    /// reply message (`{"type", "data"}`). `operator`: the connection was opened with the
    /// operator key.
    fn extra_message(
        &self,
        ty: &str,
        _data: Map<String, Value>,
        _backend: &SharedBackend<Self::Backend>,
        _operator: bool,
    ) -> Result<Value, ApiError> {
        Err(ApiError::Validation(format!(
            "unsupported message type '{ty}'"
        )))
    }
}

/// A WebSocket connection's environment, shareable with routes that watch it (the watchdog).
pub type SharedBackend<B> = std::sync::Arc<std::sync::Mutex<B>>;

/// A reply serialized once (by `ls_json`, byte-identical to `serde_json`).
pub fn to_json<T: Serialize>(v: &T) -> Result<RawJson, ApiError> {
    RawJson::try_from_serialize(v)
        .map_err(|e| ApiError::Internal(format!("serializing the reply: {e}")))
}
