//! The Financial Audit environment on the OpenEnv protocol: `/ws`, `/mcp`, `/metadata`,
//! `/schema` and `/openapi.json` over `audit_env::AuditEnv`, beside the audit router's own HTTP
//! routes (`audit_env::http::router`).

use crate::discovery::{self, EnvironmentMetadata, EnvironmentSchemas, RouteDoc, ToolSpec};
use crate::error::ApiError;
use crate::openenv::{protocol_routes, to_json, OpenEnvBackend, OpenEnvService};
use ls_json::RawJson;
use crate::sessions::SessionManager;
use crate::ws::{WsConfig, WsRuntime};
use audit_env::episode::{AuditEnv, AuditObservation, AuditResetRequest, AuditState, AuditStepEnvelope, AuditStepRequest, EnvConfig};
use audit_env::error::AuditError;
use axum::http::StatusCode;
use axum::Router;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Duration;

fn api_error(e: AuditError) -> ApiError {
    match e.status() {
        StatusCode::NOT_FOUND => ApiError::NotFound(e.to_string()),
        StatusCode::CONFLICT => ApiError::EpisodeEnded(e.to_string()),
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::PayloadTooLarge { limit_bytes: crate::body::MAX_BODY_BYTES },
        StatusCode::UNPROCESSABLE_ENTITY => ApiError::Validation(e.to_string()),
        s if s.is_server_error() => ApiError::Internal(e.to_string()),
        _ => ApiError::BadRequest(e.to_string()),
    }
}

fn parse<T: serde::de::DeserializeOwned>(what: &str, data: Map<String, Value>) -> Result<T, ApiError> {
    serde_json::from_value(Value::Object(data)).map_err(|e| ApiError::Validation(format!("{what}: {e}")))
}


impl OpenEnvBackend for AuditEnv {
    fn reset(&mut self, data: Map<String, Value>) -> Result<RawJson, ApiError> {
        let req: AuditResetRequest = parse("reset", data)?;
        to_json(&AuditEnv::reset(self, req).map_err(api_error)?)
    }

    fn step(&mut self, action: Map<String, Value>) -> Result<RawJson, ApiError> {
        let req: AuditStepRequest = parse("step", action)?;
        to_json(&AuditEnv::step(self, req).map_err(api_error)?)
    }

    fn state(&self) -> Option<Value> {
        self.episode.as_ref().map(|_| AuditEnv::state(self)).and_then(|s| serde_json::to_value(s).ok())
    }

    /// MCP tools: `submit_findings` (a step with findings) and `submit_final`.
    fn call_tool(&mut self, name: &str, arguments: Map<String, Value>) -> Result<RawJson, ApiError> {
        let mut req = arguments;
        if name == "submit_final" {
            req.insert("submit_final".into(), Value::Bool(true));
        } else if name != "submit_findings" {
            return Err(ApiError::Validation(format!("unknown tool '{}'; use submit_findings or submit_final", name.chars().take(64).collect::<String>())));
        }
        OpenEnvBackend::step(self, req)
    }
}

/// Shared state of the audit environment's OpenEnv surface.
pub struct AuditService {
    config: EnvConfig,
    ws: WsRuntime,
    sessions: SessionManager<AuditEnv>,
}

impl AuditService {
    pub fn new(config: EnvConfig, max_sessions: usize, idle_timeout: Duration) -> Self {
        Self { config, ws: WsRuntime::new(WsConfig::from_env()), sessions: SessionManager::new(max_sessions, idle_timeout) }
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
                 (or the `{\"action\": {...}}` form). The episode's final grade is in `grader.score`. See docs/audit.md."
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
            ToolSpec { name: "submit_findings".into(), description: "Submit audit findings for this step.".into(), input_schema: findings.clone() },
            ToolSpec { name: "submit_final".into(), description: "Submit final findings and end the episode (graded).".into(), input_schema: findings },
        ]
    }

    fn route_docs(&self) -> Vec<RouteDoc> {
        vec![
            RouteDoc::get("/", "Service banner", None),
            RouteDoc::get("/health", "Health check", None),
            RouteDoc::get("/tasks", "The four audit tasks", None),
            RouteDoc::post("/reset", "Start an audit episode", Some("AuditResetRequest"), Some("AuditStepEnvelope")),
            RouteDoc::post("/step", "Submit findings (`findings`, `submit_final`) or the `{action: {...}}` form", Some("AuditStepRequest"), Some("AuditStepEnvelope")),
            RouteDoc::get("/state", "Episode state", Some("AuditState")),
            RouteDoc::post("/campaign/start", "Start a 5-period multi-agent campaign", None, None),
        ]
    }

    fn component_schemas(&self) -> Map<String, Value> {
        let mut g = discovery::component_generator();
        g.subschema_for::<AuditResetRequest>();
        g.subschema_for::<AuditStepRequest>();
        let mut defs = g.take_definitions(true);
        let mut out = discovery::component_generator_serialize();
        out.subschema_for::<AuditStepEnvelope>();
        out.subschema_for::<AuditState>();
        defs.extend(out.take_definitions(true));
        defs
    }
}

/// The audit application: its own HTTP routes plus the OpenEnv protocol routes.
pub fn router(config: audit_env::http::AuditConfig) -> Router {
    let env_config = EnvConfig { max_findings_per_step: config.max_findings_per_step, fraud_difficulty: config.fraud_difficulty };
    let service = Arc::new(AuditService::new(env_config, 1024, Duration::from_secs(1800)));
    audit_env::http::router(config).merge(protocol_routes::<AuditService>().with_state(service)).merge(ls_ui::router())
}
