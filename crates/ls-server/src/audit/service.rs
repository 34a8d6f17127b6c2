//! The audit environment on the OpenEnv protocol: `AuditEnv` as the per-session backend and
//! [`AuditService`] (the one session map, shared with the HTTP routes) as the service.

use crate::discovery::{self, EnvironmentMetadata, EnvironmentSchemas, ToolSpec};
use crate::error::ApiError;
use crate::protocol::{to_json, OpenEnvBackend, OpenEnvService};
use crate::sessions::SessionManager;
use crate::ws_config::WsRuntime;
use audit_env::episode::{
    AuditEnv, AuditObservation, AuditResetRequest, AuditState, AuditStepRequest, EnvConfig,
};
use ls_json::RawJson;
use serde_json::{json, Map, Value};

/// Each audit error keeps its own kind and code (a campaign conflict stays `conflict`).
fn api_error(e: audit_env::AuditError) -> ApiError {
    ApiError::Audit(e)
}

fn parse<T: serde::de::DeserializeOwned>(
    what: &str,
    data: Map<String, Value>,
) -> Result<T, ApiError> {
    serde_json::from_value(Value::Object(data))
        .map_err(|e| ApiError::Validation(format!("{what}: {e}")))
}

impl OpenEnvBackend for AuditEnv {
    fn reset(&mut self, data: Map<String, Value>) -> Result<RawJson, ApiError> {
        let req: AuditResetRequest = parse("reset", data)?;
        // `fraud_level` overrides the adaptive adversary, an operator action. WebSocket and MCP
        // messages carry no operator credentials, so only HTTP `POST /reset` (behind the guard's
        // admin key or loopback rule) may set it.
        if req.fraud_level.is_some() {
            return Err(api_error(audit_env::AuditError::Forbidden));
        }
        to_json(&AuditEnv::reset(self, req).map_err(api_error)?)
    }

    fn step(&mut self, action: Map<String, Value>) -> Result<RawJson, ApiError> {
        let req: AuditStepRequest = parse("step", action)?;
        to_json(&AuditEnv::step(self, req).map_err(api_error)?)
    }

    fn state(&self) -> Option<Value> {
        self.episode
            .as_ref()
            .map(|_| AuditEnv::state(self))
            .and_then(|s| serde_json::to_value(s).ok())
    }

    /// MCP tools: `submit_findings` (a step with findings) and `submit_final`.
    fn call_tool(
        &mut self,
        name: &str,
        arguments: Map<String, Value>,
    ) -> Result<RawJson, ApiError> {
        let mut req = arguments;
        if name == "submit_final" {
            req.insert("submit_final".into(), Value::Bool(true));
        } else if name != "submit_findings" {
            return Err(ApiError::Validation(format!(
                "unknown tool '{}'; use submit_findings or submit_final",
                name.chars().take(64).collect::<String>()
            )));
        }
        OpenEnvBackend::step(self, req)
    }
}

/// Shared state of the audit environment's OpenEnv surface.
pub struct AuditService {
    config: EnvConfig,
    ws: WsRuntime,
    /// The one session map of the audit environment: HTTP routes and `POST /mcp` alike.
    pub(crate) sessions: SessionManager<AuditEnv>,
}

impl AuditService {
    pub fn new(
        config: EnvConfig,
        server: &crate::config::ServerConfig,
        shutdown: &crate::shutdown::Shutdown,
    ) -> Self {
        Self {
            config,
            ws: WsRuntime::new(server.ws, shutdown.clone()),
            sessions: SessionManager::new(server.max_sessions, server.session_idle)
                .with_per_client(server.max_sessions_per_client),
        }
    }
}

impl OpenEnvService for AuditService {
    type Backend = AuditEnv;

    fn new_backend(&self) -> Result<AuditEnv, ApiError> {
        Ok(AuditEnv::new(self.config.clone()))
    }

    fn ws_runtime(&self) -> &WsRuntime {
        &self.ws
    }

    fn sessions(&self) -> &SessionManager<AuditEnv> {
        &self.sessions
    }

    fn initial_state(&self) -> Value {
        serde_json::to_value(AuditEnv::new(self.config.clone()).state()).unwrap_or(Value::Null)
    }

    fn metadata(&self) -> EnvironmentMetadata {
        EnvironmentMetadata {
            name: "financial_audit_env".into(),
            description: "Financial Audit Env: seeded synthetic audits (expense claims, three-way match, GST reconciliation, fraud) with planted errors; submit findings (document_id, error_type, confidence) and get F1-family grades.".into(),
            readme_content: Some(
                "# Financial Audit Env\n\nReset with `{\"task_id\": \"expense_audit\"|\"invoice_match\"|\"gst_reconciliation\"|\"fraud_detection\", \"seed\": 42}`; \
                 step with `{\"findings\": [{\"document_id\", \"error_type\", \"confidence\", \"description\"}], \"submit_final\": false}` \
                 (or the `{\"action\": {...}}` form). The episode's final grade is in `grader.score`; on held-out seeds (100-104, 100000-109999) every step is outcome-blind and the grade is sealed (`GET /grader` with the operator credential). See docs/audit.md."
                    .into(),
            ),
            version: Some(env!("CARGO_PKG_VERSION").into()),
            author: Some("LedgerShield".into()),
            documentation_url: None,
        }
    }

    fn schemas(&self) -> EnvironmentSchemas {
        EnvironmentSchemas {
            action: discovery::input_schema::<AuditStepRequest>(),
            observation: discovery::output_schema::<AuditObservation>(),
            state: discovery::output_schema::<AuditState>(),
        }
    }

    fn tools(&self) -> Vec<ToolSpec> {
        let findings = json!({
            "type": "object",
            "properties": {"findings": {"type": "array", "items": {"type": "object", "properties": {
                "document_id": {"type": "string"}, "error_type": {"type": "string"},
                "confidence": {"type": "number", "minimum": 0, "maximum": 1}, "description": {"type": "string"}},
                "required": ["document_id", "error_type"]}}},
        });
        vec![
            ToolSpec {
                name: "submit_findings".into(),
                description: "Submit audit findings for this step.".into(),
                input_schema: findings.clone(),
            },
            ToolSpec {
                name: "submit_final".into(),
                description: "Submit final findings and end the episode (graded).".into(),
                input_schema: findings,
            },
        ]
    }
}
